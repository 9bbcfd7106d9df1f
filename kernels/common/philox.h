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
    while (i < end) {
        float z[4];
        ldt__rand_normal4_f32(ldt__rand_block(seed, offset, (uint64_t)i >> 2), z);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = ldt__rand_mul_add_f32(mean, std, z[lane]);
    }
}

/* Bernoulli(p) as bytes 0/1 (bool and u8 tensors, masks). */
LDT_HD void ldt__rand_fill_bernoulli_u8(uint8_t *out, uint64_t seed, uint64_t offset,
                                        int64_t start, int64_t n, double p) {
    int64_t i = start, end = start + n;
    while (i < end) {
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = (uint8_t)((double)ldt__rand_u32_to_uniform_f32(b.v[lane]) < p);
    }
}

/* Bernoulli(p) as f32 0.0/1.0. */
LDT_HD void ldt__rand_fill_bernoulli_f32(float *out, uint64_t seed, uint64_t offset,
                                         int64_t start, int64_t n, double p) {
    int64_t i = start, end = start + n;
    while (i < end) {
        ldt__philox4x32 b = ldt__rand_block(seed, offset, (uint64_t)i >> 2);
        for (unsigned lane = (unsigned)(i & 3); lane < 4u && i < end; lane++, i++)
            out[i - start] = (double)ldt__rand_u32_to_uniform_f32(b.v[lane]) < p ? 1.0f : 0.0f;
    }
}

#endif
