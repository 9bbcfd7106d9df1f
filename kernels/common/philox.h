/* The random stream: Philox4x32-10 and the (seed, offset, global index) -> value rule that
 * every random op and deferred init uses, as inline functions for host and CUDA code.
 *
 * The stream (docs/random-stream.md has the long form):
 *   A random op has a 64-bit seed s and a 64-bit offset o. Element i of its output, i the
 *   row-major index into the GLOBAL tensor (int64, i >= 0), takes lane i%4 of block j = i/4:
 *
 *     block(j) = philox4x32_10(counter = {lo32(j), hi32(j), lo32(o), hi32(o)},
 *                              key     = {lo32(s), hi32(s)})            -> words x0..x3
 *     u32      x = block(i/4).x[i%4]
 *     uniform  u = (x >> 8) * 2^-24                     f32, exact, in [0, 1 - 2^-24]
 *     scaled     lo + (hi - lo) * u, one rounding per op (no FMA), clamped below hi
 *     normal     elements 4j..4j+3 from Box-Muller on the lane pairs (x0,x1) and (x2,x3):
 *                  v = ((float)x + 0.5f) * 2^-32        f32, in [2^-33, 1]
 *                  z0 = sqrtf(-2 logf(v0)) cosf(2 pi v1),  z1 = sqrtf(-2 logf(v0)) sinf(2 pi v1)
 *                  z2, z3 likewise from (x2, x3);  mean + std * z, no FMA
 *     bernoulli  u < p  ->  1, else 0     (p a double, compared exactly)
 *     trunc_normal(mean, std, a, b), by the inverse CDF, one word per element, in double:
 *                  v = (x + 0.5) 2^-32,  alpha = (a - mean)/std,  beta = (b - mean)/std
 *                  z = Phi^-1(Phi(alpha) + v (Phi(beta) - Phi(alpha)))   (below for how)
 *                  mean + std z clamped into [a, b], then rounded once to the dtype
 *     randint [low, high), high - low = r in [1, 2^32]:  low + ((x * r) >> 32)
 *                  (a 64-bit product: floor(x r / 2^32), one word per element)
 *
 *   After the op the offset advances by ceil(numel/4), numel of the global tensor: the amount
 *   one device would use, whatever this rank produced.
 *
 * A value depends only on (s, o, i), never on the rank, the thread or where a fill starts, so
 * any sharding, even uneven, gives bitwise the single-device tensor. Uniform, scaled uniform
 * and bernoulli are bitwise equal on host and CUDA (unless CUDA flushes subnormals, -ftz);
 * normal goes through libm, and CPU and CUDA logf/sinf/cosf may differ in the last bits (by
 * more under --use_fast_math).
 *
 *   // CPU kernel: this rank's part of row r of a [R, C] f32 tensor, columns [c0, c1)
 *   ldt__rand_fill_normal_f32(dst, seed, offset, r * C + c0, c1 - c0, 0.0f, 1.0f);
 *   // CUDA kernel: thread t makes element t of its slice, global index g0 + t
 *   out[t] = ldt__rand_uniform_f32(seed, offset, g0 + t);
 *   // after the op, on every rank
 *   offset += ldt__rand_offset_advance(R * C);
 */
#ifndef LDT_KERNELS_COMMON_PHILOX_H
#define LDT_KERNELS_COMMON_PHILOX_H

#include <math.h>
#include <stdint.h>

#include "core/half.h" /* LDT_HD, ldt__f32_bits */
#include "ldt/core.h"   /* ldt_dtype */

/* ---------------------------------------------------------------------------------------
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11).
 */
#define LDT__PHILOX_M0 0xD2511F53u /* round multipliers */
#define LDT__PHILOX_M1 0xCD9E8D57u
#define LDT__PHILOX_W0 0x9E3779B9u /* Weyl key increments: golden ratio, sqrt(3) - 1 */
#define LDT__PHILOX_W1 0xBB67AE85u

typedef struct ldt__philox4x32 {
    uint32_t v[4];
} ldt__philox4x32;

/* One round: two 32x32->64 products; their high halves mix with the other words and the key. */
LDT_HD void ldt__philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
    uint64_t p0 = (uint64_t)LDT__PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)LDT__PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

/* Ten rounds; the key is bumped between rounds (nine bumps), as in Random123. */
LDT_HD ldt__philox4x32 ldt__philox4x32_10(const uint32_t counter[4], const uint32_t key[2]) {
    ldt__philox4x32 r;
    uint32_t k0 = key[0], k1 = key[1];
    r.v[0] = counter[0];
    r.v[1] = counter[1];
    r.v[2] = counter[2];
    r.v[3] = counter[3];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += LDT__PHILOX_W0;
            k1 += LDT__PHILOX_W1;
        }
        ldt__philox_round(r.v, k0, k1);
    }
    return r;
}

/* ---------------------------------------------------------------------------------------
 * The stream: blocks, words, and the conversions of a word to a value.
 */

/* Block j of the stream (elements 4j..4j+3) for seed and offset. */
LDT_HD ldt__philox4x32 ldt__rand_block(uint64_t seed, uint64_t offset, uint64_t j) {
    uint32_t ctr[4], key[2];
    ctr[0] = (uint32_t)j;
    ctr[1] = (uint32_t)(j >> 32);
    ctr[2] = (uint32_t)offset;
    ctr[3] = (uint32_t)(offset >> 32);
    key[0] = (uint32_t)seed;
    key[1] = (uint32_t)(seed >> 32);
    return ldt__philox4x32_10(ctr, key);
}

/* Word x of element i: lane i%4 of block i/4. i >= 0. */
LDT_HD uint32_t ldt__rand_u32(uint64_t seed, uint64_t offset, int64_t i) {
    ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
    return b.v[(uint64_t)i & 3u];
}

/* (x >> 8) * 2^-24: the top 24 bits, exact in f32, in [0, 1 - 2^-24]. */
LDT_HD float ldt__rand_u32_to_uniform_f32(uint32_t x) {
    return (float)(x >> 8) * 5.9604644775390625e-08f; /* 2^-24 */
}

/* ((float)x + 0.5f) * 2^-32 for Box-Muller, in f32: never 0 (smallest 2^-33) so the log is
 * finite; the largest words round to exactly 1, giving a radius of 0. */
LDT_HD float ldt__rand_u32_to_open_f32(uint32_t x) {
    return ((float)x + 0.5f) * 2.3283064365386962890625e-10f; /* 2^-32 */
}

/* a + b * c with two roundings on host and device alike: CUDA would otherwise contract it to
 * an FMA and the host (C11, contraction off) would not, and the bits would differ. */
LDT_HD float ldt__rand_mul_add_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, __fmul_rn(b, c));
#else
    float p = b * c; /* a separate statement: clang contracts within one expression */
    return a + p;
#endif
}

/* The largest f32 below finite h. */
LDT_HD float ldt__rand_f32_below(float h) {
    uint32_t b = ldt__f32_bits(h);
    if ((b & 0x7fffffffu) == 0) return ldt__bits_f32(0x80000001u); /* +-0: -min subnormal */
    return ldt__bits_f32(h > 0.0f ? b - 1u : b + 1u);
}

/* u in [0,1) mapped to [lo, hi): lo + (hi - lo) * u, and when that rounds up to hi (it can:
 * lo 1, hi 2, u 1 - 2^-24 gives 2), the largest f32 below hi. Needs lo < hi, hi - lo finite.
 * lo 0, hi 1 gives u itself. */
LDT_HD float ldt__rand_uniform_scale_f32(float u, float lo, float hi) {
    float v = ldt__rand_mul_add_f32(lo, hi - lo, u);
    return v < hi ? v : ldt__rand_f32_below(hi);
}

/* Box-Muller on one lane pair: za = r cos(t), zb = r sin(t), r = sqrt(-2 ln va), t = 2 pi vb.
 * |z| <= sqrt(-2 ln 2^-33) ~ 6.77. */
LDT_HD void ldt__rand_box_muller_f32(uint32_t xa, uint32_t xb, float *za, float *zb) {
    float r = sqrtf(-2.0f * logf(ldt__rand_u32_to_open_f32(xa)));
    float t = 6.28318530717958647692f * ldt__rand_u32_to_open_f32(xb);
    *za = r * cosf(t);
    *zb = r * sinf(t);
}

/* The four normals of one block: z[0], z[1] from (x0, x1), z[2], z[3] from (x2, x3). */
LDT_HD void ldt__rand_normal4_f32(ldt__philox4x32 b, float z[4]) {
    ldt__rand_box_muller_f32(b.v[0], b.v[1], &z[0], &z[1]);
    ldt__rand_box_muller_f32(b.v[2], b.v[3], &z[2], &z[3]);
}

/* ---------------------------------------------------------------------------------------
 * One element. Each call computes a whole block; to make many elements, use the fillers
 * (CPU) or give each CUDA thread a block of four.
 */

/* Uniform f32 in [0, 1) of element i. */
LDT_HD float ldt__rand_uniform_f32(uint64_t seed, uint64_t offset, int64_t i) {
    return ldt__rand_u32_to_uniform_f32(ldt__rand_u32(seed, offset, i));
}

/* Standard normal f32 of element i: Box-Muller on the lane pair holding lane i%4. */
LDT_HD float ldt__rand_normal_f32(uint64_t seed, uint64_t offset, int64_t i) {
    ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
    unsigned lane = (unsigned)((uint64_t)i & 3u), pair = lane & 2u;
    float za, zb;
    /* both of the pair, by the same helper as the fillers, so the bits match them */
    ldt__rand_box_muller_f32(b.v[pair], b.v[pair + 1u], &za, &zb);
    return (lane & 1u) ? zb : za;
}

/* Bernoulli(p) of element i: 1 when its uniform is < p (compared exactly, in double). */
LDT_HD int ldt__rand_bernoulli(uint64_t seed, uint64_t offset, int64_t i, double p) {
    return (double)ldt__rand_uniform_f32(seed, offset, i) < p;
}

/* How far the offset moves after an op on a tensor of numel elements: ceil(numel/4), the
 * blocks one device would use. 0 for numel <= 0. */
LDT_HD uint64_t ldt__rand_offset_advance(int64_t numel) {
    return numel <= 0 ? 0u : ((uint64_t)numel + 3u) / 4u;
}

/* ---------------------------------------------------------------------------------------
 * Truncated normal, by the inverse CDF: one word per element, no rejection, so an element is
 * still a function of (seed, offset, i) alone. Computed in double:
 *
 *   v     = (x + 0.5) * 2^-32                          in (0, 1), exact in double
 *   alpha = (a - mean) / std,  beta = (b - mean) / std
 *   z     = Phi^-1(Phi(alpha) + v * (Phi(beta) - Phi(alpha)))
 *   value = mean + std * z, clamped into [a, b], then rounded once to the output dtype
 *
 * Phi(t) = erfc(-t / sqrt 2) / 2. Phi^-1 is a rational approximation (P. J. Acklam's
 * coefficients, relative error 1.2e-9) refined by one Halley step against erfc, so it is good
 * to about 1e-15. For precision in a far upper tail the rule is evaluated on the mirror
 * image when alpha > 0: z = -Phi^-1(Phi(-alpha) - v * (Phi(-alpha) - Phi(-beta))), which is the
 * same value mathematically, so every interval is handled on the side where Phi is small and
 * exact. If the interval's probability underflows in double (an interval more than ~37 std into
 * a tail) the values collapse onto the nearer bound. Like normal, this goes through libm (erfc,
 * log, exp, sqrt), so CPU and CUDA may differ in the last bits of the double (rarely in the
 * rounded result).
 */

/* (x + 0.5) * 2^-32 in double: exact, in (0, 1). */
LDT_HD double ldt__rand_u32_to_open_f64(uint32_t x) {
    return ((double)x + 0.5) * 2.3283064365386962890625e-10; /* 2^-32 */
}

/* a + b * c with two roundings, as ldt__rand_mul_add_f32, in double. */
LDT_HD double ldt__rand_mul_add_f64(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, __dmul_rn(b, c));
#else
    double p = b * c;
    return a + p;
#endif
}

/* The standard normal CDF. */
LDT_HD double ldt__normal_cdf(double t) {
    return 0.5 * erfc(-t * 0.70710678118654752440); /* 1/sqrt(2) */
}

/* Phi^-1(p) for 0 < p <= 1/2 (the lower half; the caller mirrors the upper one), by the
 * rational approximation in three regions and one Halley step:
 *   central  |p - 1/2| <= 1/2 - 0.02425:  q = p - 1/2, z = q A(q^2) / B(q^2)
 *   tail     p < 0.02425:                 q = sqrt(-2 ln p), z = C(q) / D(q) */
LDT_HD double ldt__normal_icdf_lower(double p) {
    double z, q, r;
    if (p < 0.02425) {
        double n, d;
        q = sqrt(-2.0 * log(p));
        n = -7.784894002430293e-03;
        n = n * q - 3.223964580411365e-01;
        n = n * q - 2.400758277161838e+00;
        n = n * q - 2.549732539343734e+00;
        n = n * q + 4.374664141464968e+00;
        n = n * q + 2.938163982698783e+00;
        d = 7.784695709041462e-03;
        d = d * q + 3.224671290700398e-01;
        d = d * q + 2.445134137142996e+00;
        d = d * q + 3.754408661907416e+00;
        d = d * q + 1.0;
        z = n / d;
    } else {
        double n, d;
        q = p - 0.5;
        r = q * q;
        n = -3.969683028665376e+01;
        n = n * r + 2.209460984245205e+02;
        n = n * r - 2.759285104469687e+02;
        n = n * r + 1.383577518672690e+02;
        n = n * r - 3.066479806614716e+01;
        n = n * r + 2.506628277459239e+00;
        d = -5.447609879822406e+01;
        d = d * r + 1.615858368580409e+02;
        d = d * r - 1.556989798598866e+02;
        d = d * r + 6.680131188771972e+01;
        d = d * r - 1.328068155288572e+01;
        d = d * r + 1.0;
        z = n * q / d;
    }
    /* Halley: e = Phi(z) - p, u = e / phi(z), z -= u / (1 + z u / 2); phi(z) = exp(-z^2/2) /
     * sqrt(2 pi) is skipped where it would underflow (|z| > 37.5), the approximation alone
     * being good to 1e-9 there */
    if (z > -37.5) {
        double e = ldt__normal_cdf(z) - p;
        double u = e * 2.50662827463100050242 * exp(0.5 * z * z); /* sqrt(2 pi) */
        z = z - u / (1.0 + 0.5 * z * u);
    }
    return z;
}

/* Phi^-1(p) for p in [0, 1]: -inf at 0, +inf at 1; the upper half by symmetry, 1 - p being
 * exact there. */
LDT_HD double ldt__normal_icdf(double p) {
    if (!(p > 0.0)) return -INFINITY;
    if (p >= 1.0) return INFINITY;
    return p <= 0.5 ? ldt__normal_icdf_lower(p) : -ldt__normal_icdf_lower(1.0 - p);
}

/* A truncated normal's constants, worked out once per op. */
typedef struct ldt__trunc_normal {
    double mean, std, a, b;
    double p0, w; /* the CDF at the (possibly mirrored) lower end, and the interval's mass */
    int mirror;   /* alpha > 0: evaluated on the mirror image */
} ldt__trunc_normal;

/* Needs finite mean, a < b and std > 0 (the op's recording checks them). */
LDT_HD ldt__trunc_normal ldt__rand_trunc_normal_init(double mean, double std, double a, double b) {
    ldt__trunc_normal t;
    double alpha = (a - mean) / std, beta = (b - mean) / std;
    t.mean = mean;
    t.std = std;
    t.a = a;
    t.b = b;
    t.mirror = alpha > 0.0;
    if (t.mirror) { /* z = -Phi^-1(Phi(-alpha) - v (Phi(-alpha) - Phi(-beta))) */
        t.p0 = ldt__normal_cdf(-alpha);
        t.w = t.p0 - ldt__normal_cdf(-beta);
    } else { /* z = Phi^-1(Phi(alpha) + v (Phi(beta) - Phi(alpha))) */
        t.p0 = ldt__normal_cdf(alpha);
        t.w = ldt__normal_cdf(beta) - t.p0;
    }
    return t;
}

/* The value (in double, before rounding to the dtype) of the element whose word is x. */
LDT_HD double ldt__rand_trunc_normal_from_u32(const ldt__trunc_normal *t, uint32_t x) {
    double v = ldt__rand_u32_to_open_f64(x), z, r;
    if (t->mirror)
        z = -ldt__normal_icdf(ldt__rand_mul_add_f64(t->p0, -t->w, v));
    else
        z = ldt__normal_icdf(ldt__rand_mul_add_f64(t->p0, t->w, v));
    r = ldt__rand_mul_add_f64(t->mean, t->std, z);
    return r < t->a ? t->a : r > t->b ? t->b : r; /* also where z is +-inf */
}

/* Truncated normal (double) of element i. */
LDT_HD double ldt__rand_trunc_normal_f64(uint64_t seed, uint64_t offset, int64_t i,
                                         const ldt__trunc_normal *t) {
    return ldt__rand_trunc_normal_from_u32(t, ldt__rand_u32(seed, offset, i));
}

/* ---------------------------------------------------------------------------------------
 * Integers in [low, high), one word per element: with r = high - low (1 <= r <= 2^32),
 *   value = low + floor(x * r / 2^32) = low + ((x * r) >> 32)      (a 64-bit product)
 * Exact integer arithmetic, so equal on every backend. Each value gets floor(2^32 / r) or
 * ceil(2^32 / r) of the 2^32 words, a relative bias below r / 2^32 (none when r is a power
 * of two); wider ranges would need more than one word and are refused.
 */
#define LDT__RANDINT_MAX_RANGE 4294967296ull /* 2^32 */

/* low + ((x * range) >> 32); range in [1, 2^32], low + range - 1 <= INT64_MAX. */
LDT_HD int64_t ldt__rand_u32_to_int(uint32_t x, int64_t low, uint64_t range) {
    return low + (int64_t)(((uint64_t)x * range) >> 32);
}

/* The integers randint can make in dtype t, exactly: [*lo, *hi]. Integer dtypes by their
 * range (u8 0..255, i32, i64); float dtypes by the integers they hold exactly (|v| <= 2^24 for
 * f32, 2^53 f64, 2^11 f16, 2^8 bf16); 0 (and [0, -1]) for bool and invalid dtypes. */
LDT_HD int ldt__randint_limits(ldt_dtype t, int64_t *lo, int64_t *hi) {
    int64_t m;
    switch (t) {
    case LDT_I64: *lo = INT64_MIN, *hi = INT64_MAX; return 1;
    case LDT_I32: *lo = INT32_MIN, *hi = INT32_MAX; return 1;
    case LDT_U8: *lo = 0, *hi = 255; return 1;
    case LDT_F64: m = (int64_t)1 << 53; break;
    case LDT_F32: m = (int64_t)1 << 24; break;
    case LDT_F16: m = (int64_t)1 << 11; break;
    case LDT_BF16: m = (int64_t)1 << 8; break;
    default: *lo = 0, *hi = -1; return 0;
    }
    *lo = -m, *hi = m;
    return 1;
}

/* The integer of element i. */
LDT_HD int64_t ldt__rand_randint(uint64_t seed, uint64_t offset, int64_t i, int64_t low,
                                 uint64_t range) {
    return ldt__rand_u32_to_int(ldt__rand_u32(seed, offset, i), low, range);
}

/* ---------------------------------------------------------------------------------------
 * Host SIMD for the CPU fillers: sixteen blocks at a time with AVX2, chosen at run time where
 * the CPU has it (x86-64, GCC or Clang, not in CUDA code). Integer Philox and the f32
 * conversions are exact, so the words and values are bitwise those of the scalar code.
 */
#if !defined(__CUDACC__) && (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define LDT__RAND_AVX2 1
#include <immintrin.h>
#define LDT__AVX2_FN __attribute__((target("avx2"))) static inline

static inline int ldt__rand_have_avx2(void) { return __builtin_cpu_supports("avx2"); }

/* One round on eight blocks: c[w] holds word w of each. The 32x32->64 products of the even
 * lanes come from one multiply, those of the odd lanes from another on the words shifted down. */
LDT__AVX2_FN void ldt__philox_round_avx2(__m256i c[4], __m256i k0, __m256i k1) {
    const __m256i m0 = _mm256_set1_epi32((int)LDT__PHILOX_M0);
    const __m256i m1 = _mm256_set1_epi32((int)LDT__PHILOX_M1);
    __m256i pe0 = _mm256_mul_epu32(c[0], m0);
    __m256i po0 = _mm256_mul_epu32(_mm256_srli_epi64(c[0], 32), m0);
    __m256i pe1 = _mm256_mul_epu32(c[2], m1);
    __m256i po1 = _mm256_mul_epu32(_mm256_srli_epi64(c[2], 32), m1);
    __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
    __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
    __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
    __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
    c[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1]), k0);
    c[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3]), k1);
    c[1] = lo1;
    c[3] = lo0;
}

/* Blocks j0 .. j0 + 15 (elements 4 j0 .. 4 j0 + 63). With out NULL, their words go to
 * w[0..64) in element order; else their uniforms scaled to [lo, hi) go to out[0..64), by the
 * same f32 operations as ldt__rand_uniform_scale_f32 (lo 0, hi 1: the uniforms themselves). */
LDT__AVX2_FN void ldt__rand_blocks16_avx2(uint64_t seed, uint64_t offset, uint64_t j0,
                                          uint32_t *w, float *out, float lo, float hi) {
    __m256i x[2][4];
    uint32_t jlo[16], jhi[16], k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    int unit = lo == 0.0f && hi == 1.0f;
    for (int k = 0; k < 16; k++) {
        uint64_t j = j0 + (uint64_t)k;
        jlo[k] = (uint32_t)j;
        jhi[k] = (uint32_t)(j >> 32);
    }
    for (int h = 0; h < 2; h++) {
        x[h][0] = _mm256_loadu_si256((const __m256i *)(jlo + 8 * h));
        x[h][1] = _mm256_loadu_si256((const __m256i *)(jhi + 8 * h));
        x[h][2] = _mm256_set1_epi32((int)(uint32_t)offset);
        x[h][3] = _mm256_set1_epi32((int)(uint32_t)(offset >> 32));
    }
    for (int r = 0; r < 10; r++) { /* two independent chains for the multipliers' latency */
        __m256i vk0 = _mm256_set1_epi32((int)k0), vk1 = _mm256_set1_epi32((int)k1);
        ldt__philox_round_avx2(x[0], vk0, vk1);
        ldt__philox_round_avx2(x[1], vk0, vk1);
        k0 += LDT__PHILOX_W0;
        k1 += LDT__PHILOX_W1;
    }
    for (int h = 0; h < 2; h++) {
        const __m256i *v = x[h];
        /* transpose: per 128-bit half, words of blocks k and k+4 (k = 0..3) side by side */
        __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpacklo_epi32(v[2], v[3]);
        __m256i t2 = _mm256_unpackhi_epi32(v[0], v[1]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
        __m256i b0 = _mm256_unpacklo_epi64(t0, t1), b1 = _mm256_unpackhi_epi64(t0, t1);
        __m256i b2 = _mm256_unpacklo_epi64(t2, t3), b3 = _mm256_unpackhi_epi64(t2, t3);
        __m256i e[4] = {_mm256_permute2x128_si256(b0, b1, 0x20),  /* blocks 0, 1 */
                        _mm256_permute2x128_si256(b2, b3, 0x20),  /* 2, 3 */
                        _mm256_permute2x128_si256(b0, b1, 0x31),  /* 4, 5 */
                        _mm256_permute2x128_si256(b2, b3, 0x31)}; /* 6, 7 */
        if (!out) {
            for (int q = 0; q < 4; q++) _mm256_storeu_si256((__m256i *)(w + 32 * h + 8 * q), e[q]);
            continue;
        }
        const __m256 s = _mm256_set1_ps(5.9604644775390625e-08f); /* 2^-24 */
        const __m256 vlo = _mm256_set1_ps(lo), vw = _mm256_set1_ps(hi - lo);
        const __m256 vhi = _mm256_set1_ps(hi), vbelow = _mm256_set1_ps(ldt__rand_f32_below(hi));
        for (int q = 0; q < 4; q++) {
            __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(e[q], 8)), s);
            if (!unit) {
                __m256 val = _mm256_add_ps(vlo, _mm256_mul_ps(vw, u));
                u = _mm256_blendv_ps(vbelow, val, _mm256_cmp_ps(val, vhi, _CMP_LT_OQ));
            }
            _mm256_storeu_ps(out + 32 * h + 8 * q, u);
        }
    }
}
#endif

/* Fast path of a filler at element i (of [i, end)): 64 elements from i, a multiple of 4, as
 * words into w (or as scaled uniforms into out); returns 0 where the path does not apply. */
LDT_HD int ldt__rand_fast64(uint64_t seed, uint64_t offset, int64_t i, int64_t end, uint32_t *w,
                            float *out, float lo, float hi) {
#if defined(LDT__RAND_AVX2)
    if ((i & 3) == 0 && end - i >= 64 && ldt__rand_have_avx2()) {
        ldt__rand_blocks16_avx2(seed, offset, (uint64_t)i >> 2, w, out, lo, hi);
        return 1;
    }
#else
    (void)seed, (void)offset, (void)i, (void)end, (void)w, (void)out, (void)lo, (void)hi;
#endif
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Fillers for CPU kernels: out[k] = value of global element start + k, k in [0, n). Any
 * start >= 0 (not only multiples of 4); each block is computed once. start + n <= INT64_MAX.
 * The result is the same as n single-element calls, so pieces filled at their own starts
 * assemble bitwise into one fill of the whole.
 */

/* Uniform f32 in [lo, hi) (ldt__rand_uniform_scale_f32); lo 0, hi 1 is the plain uniform. */
LDT_HD void ldt__rand_fill_uniform_f32(float *out, uint64_t seed, uint64_t offset, int64_t start,
                                       int64_t n, float lo, float hi) {
    int64_t i = start, end = start + n;
    while (i < end) {
        if (ldt__rand_fast64(seed, offset, i, end, NULL, out + (i - start), lo, hi)) {
            i += 64;
            continue;
        }
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] =
                ldt__rand_uniform_scale_f32(ldt__rand_u32_to_uniform_f32(b.v[lane]), lo, hi);
    }
}

/* Normal f32: mean + std * z (two roundings, no FMA). */
LDT_HD void ldt__rand_fill_normal_f32(float *out, uint64_t seed, uint64_t offset, int64_t start,
                                      int64_t n, float mean, float std) {
    int64_t i = start, end = start + n;
    uint32_t w[64];
    while (i < end) {
        float z[4];
        if (ldt__rand_fast64(seed, offset, i, end, w, NULL, 0.0f, 1.0f)) {
            for (int k = 0; k < 64; k += 2) {
                float za, zb;
                ldt__rand_box_muller_f32(w[k], w[k + 1], &za, &zb);
                out[i - start + k] = ldt__rand_mul_add_f32(mean, std, za);
                out[i - start + k + 1] = ldt__rand_mul_add_f32(mean, std, zb);
            }
            i += 64;
            continue;
        }
        ldt__rand_normal4_f32(ldt__rand_block(seed, offset, (uint64_t)i >> 2), z);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = ldt__rand_mul_add_f32(mean, std, z[lane]);
    }
}

/* Bernoulli(p) as bytes 0/1 (bool and u8 tensors, masks). */
LDT_HD void ldt__rand_fill_bernoulli_u8(uint8_t *out, uint64_t seed, uint64_t offset,
                                        int64_t start, int64_t n, double p) {
    int64_t i = start, end = start + n;
    uint32_t w[64];
    while (i < end) {
        if (ldt__rand_fast64(seed, offset, i, end, w, NULL, 0.0f, 1.0f)) {
            for (int k = 0; k < 64; k++)
                out[i - start + k] = (uint8_t)((double)ldt__rand_u32_to_uniform_f32(w[k]) < p);
            i += 64;
            continue;
        }
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = (uint8_t)((double)ldt__rand_u32_to_uniform_f32(b.v[lane]) < p);
    }
}

/* Bernoulli(p) as f32 0.0/1.0. */
LDT_HD void ldt__rand_fill_bernoulli_f32(float *out, uint64_t seed, uint64_t offset,
                                         int64_t start, int64_t n, double p) {
    int64_t i = start, end = start + n;
    uint32_t w[64];
    while (i < end) {
        if (ldt__rand_fast64(seed, offset, i, end, w, NULL, 0.0f, 1.0f)) {
            for (int k = 0; k < 64; k++)
                out[i - start + k] = (double)ldt__rand_u32_to_uniform_f32(w[k]) < p ? 1.0f : 0.0f;
            i += 64;
            continue;
        }
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = (double)ldt__rand_u32_to_uniform_f32(b.v[lane]) < p ? 1.0f : 0.0f;
    }
}

/* Truncated normal in double (ldt__rand_trunc_normal_from_u32); the kernel rounds each value
 * once to its dtype. */
LDT_HD void ldt__rand_fill_trunc_normal_f64(double *out, uint64_t seed, uint64_t offset,
                                            int64_t start, int64_t n, const ldt__trunc_normal *t) {
    int64_t i = start, end = start + n;
    uint32_t w[64];
    while (i < end) {
        if (ldt__rand_fast64(seed, offset, i, end, w, NULL, 0.0f, 1.0f)) {
            for (int k = 0; k < 64; k++)
                out[i - start + k] = ldt__rand_trunc_normal_from_u32(t, w[k]);
            i += 64;
            continue;
        }
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = ldt__rand_trunc_normal_from_u32(t, b.v[lane]);
    }
}

/* Integers in [low, low + range) as int64 (ldt__rand_u32_to_int); range in [1, 2^32]. */
LDT_HD void ldt__rand_fill_randint_i64(int64_t *out, uint64_t seed, uint64_t offset,
                                       int64_t start, int64_t n, int64_t low, uint64_t range) {
    int64_t i = start, end = start + n;
    uint32_t w[64];
    while (i < end) {
        if (ldt__rand_fast64(seed, offset, i, end, w, NULL, 0.0f, 1.0f)) {
            for (int k = 0; k < 64; k++)
                out[i - start + k] = ldt__rand_u32_to_int(w[k], low, range);
            i += 64;
            continue;
        }
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = ldt__rand_u32_to_int(b.v[lane], low, range);
    }
}

#endif
