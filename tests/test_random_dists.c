/* trunc_normal and randint on the random stream: elements against the stream's definition
 * recomputed here from raw Philox words, statistics, the ops through a context, every sharding
 * against one device (with rand, randn and bernoulli too), the offset advance and bad input. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "kernels/common/philox.h"
#include "ldt/exec.h"
#include "ldt/trace.h"
#include "tests/plan_check.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------------------------------
 * Straightforward references, written from the definition in docs/random-stream.md.
 */

/* The word of element i: lane i % 4 of Philox4x32-10 on counter (lo(j), hi(j), lo(o), hi(o)),
 * key (lo(s), hi(s)), j = i / 4. */
static uint32_t ref_word(uint64_t seed, uint64_t offset, int64_t i) {
    uint64_t j = (uint64_t)i / 4;
    uint32_t ctr[4] = {(uint32_t)j, (uint32_t)(j >> 32), (uint32_t)offset, (uint32_t)(offset >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    return ldt__philox4x32_10(ctr, key).v[(uint64_t)i % 4];
}

static long double ref_cdf(long double t) { return 0.5L * erfcl(-t / sqrtl(2.0L)); }

/* The truncated normal by bisection on the CDF, in long double, no mirroring: the value of
 * mean + std * z where Phi(z) = Phi(alpha) + v (Phi(beta) - Phi(alpha)), clamped to [a, b]. */
static double ref_trunc_normal(uint32_t x, double mean, double std, double a, double b) {
    long double alpha = ((long double)a - mean) / std, beta = ((long double)b - mean) / std;
    long double v = ((long double)x + 0.5L) / 4294967296.0L;
    long double pa = ref_cdf(alpha), pb = ref_cdf(beta), p = pa + v * (pb - pa);
    long double lo = alpha, hi = beta, r;
    for (int k = 0; k < 200; k++) {
        long double mid = 0.5L * (lo + hi);
        if (ref_cdf(mid) < p)
            lo = mid;
        else
            hi = mid;
    }
    r = mean + std * (0.5L * (lo + hi));
    if (r < a) r = a;
    if (r > b) r = b;
    return (double)r;
}

/* low + floor(x * r / 2^32), in long double (exact: x r < 2^64 fits its 64-bit mantissa). */
static int64_t ref_randint(uint32_t x, int64_t low, int64_t high) {
    long double r = (long double)high - (long double)low;
    return low + (int64_t)floorl((long double)x * r / 4294967296.0L);
}

/* Distance in f32 steps between two f32 values of the same sign (or zero). */
static int64_t ulps_f32(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

typedef struct tn_case {
    double mean, std, a, b;
} tn_case;

static const tn_case k_tn[] = {
    {0, 1, -2, 2},       /* torch's default */
    {1.5, 0.5, 1.0, 3.0}, /* asymmetric */
    {0, 1, 2, 5},        /* wholly in the upper tail: the mirrored evaluation */
    {0, 1, -6, -4},      /* far lower tail */
    {10, 3, -100, 100},  /* effectively untruncated */
    {0, 0.02, -0.04, 0.04},
};
#define NTN ((int)(sizeof k_tn / sizeof k_tn[0]))

/* ---------------------------------------------------------------------------------------
 * Elements against the definition.
 */
Test(trunc_normal, elements_match_the_definition) {
    int n = ldt_test_cases(4000);
    uint64_t st = 99;
    for (int c = 0; c < NTN; c++) {
        const tn_case *k = &k_tn[c];
        ldt__trunc_normal t = ldt__rand_trunc_normal_init(k->mean, k->std, k->a, k->b);
        uint64_t seed = ldt_test_rand(&st), offset = ldt_test_rand(&st) >> 3;
        int exact = 0;
        for (int e = 0; e < n; e++) {
            int64_t i = (int64_t)(ldt_test_rand(&st) >> 4);
            double got = ldt__rand_trunc_normal_f64(seed, offset, i, &t);
            double want = ref_trunc_normal(ref_word(seed, offset, i), k->mean, k->std, k->a, k->b);
            cr_assert(got >= k->a && got <= k->b, "case %d: %.17g outside [%g, %g]", c, got, k->a,
                      k->b);
            /* the double agrees to ~1e-12 of the scale; the f32 result to an ulp at most */
            cr_assert(fabs(got - want) <= 1e-11 * (fabs(k->mean) + k->std * 10),
                      "case %d element %lld: %.17g, reference %.17g", c, (long long)i, got, want);
            int64_t u = ulps_f32((float)got, (float)want);
            cr_assert(u <= 1, "case %d element %lld: f32 %.9g vs %.9g", c, (long long)i,
                      (double)(float)got, (double)(float)want);
            exact += u == 0;
        }
        cr_expect(exact >= n * 99 / 100, "case %d: only %d of %d f32 values bitwise", c, exact, n);
    }
}

Test(randint, elements_match_the_definition) {
    static const int64_t ranges[][2] = {
        {0, 10}, {-5, 5}, {0, 1}, {7, 8}, {-2147483648ll, 2147483648ll}, {0, 1000003},
        {INT64_MAX - 5, INT64_MAX}, {INT64_MIN, INT64_MIN + 3}, {0, 4294967296ll},
        {-1000000000000ll, -999999999000ll},
    };
    int n = ldt_test_cases(3000);
    uint64_t st = 5;
    for (size_t c = 0; c < sizeof ranges / sizeof ranges[0]; c++) {
        int64_t lo = ranges[c][0], hi = ranges[c][1];
        uint64_t seed = ldt_test_rand(&st), offset = ldt_test_rand(&st);
        for (int e = 0; e < n; e++) {
            int64_t i = (int64_t)(ldt_test_rand(&st) >> 2);
            int64_t got = ldt__rand_randint(seed, offset, i, lo, (uint64_t)hi - (uint64_t)lo);
            int64_t want = ref_randint(ref_word(seed, offset, i), lo, hi);
            cr_assert_eq(got, want, "[%lld, %lld) element %lld: %lld, want %lld", (long long)lo,
                         (long long)hi, (long long)i, (long long)got, (long long)want);
            cr_assert(got >= lo && got < hi);
        }
    }
    /* the ends of the word range */
    cr_assert_eq(ldt__rand_u32_to_int(0, -3, 10), -3);
    cr_assert_eq(ldt__rand_u32_to_int(0xffffffffu, -3, 10), 6);
    cr_assert_eq(ldt__rand_u32_to_int(0xffffffffu, 0, 4294967296ull), 4294967295ll);
    cr_assert_eq(ldt__rand_u32_to_int(0x80000000u, 0, 2), 1);
}

/* Fillers at any start equal the single-element functions (the SIMD path and the block-wise
 * one alike), for every distribution's filler. */
Test(fillers, equal_single_elements_at_any_start) {
    uint64_t st = 77;
    int cases = ldt_test_cases(40);
    ldt__trunc_normal t = ldt__rand_trunc_normal_init(0.5, 2.0, -1.0, 3.0);
    float *f = malloc(600 * sizeof *f);
    double *d = malloc(600 * sizeof *d);
    int64_t *v = malloc(600 * sizeof *v);
    uint8_t *u = malloc(600);
    cr_assert(f && d && v && u);
    for (int c = 0; c < cases; c++) {
        uint64_t seed = ldt_test_rand(&st), offset = ldt_test_rand(&st);
        int64_t start = ldt_test_range(&st, 0, 1000) + (c & 1 ? (int64_t)1 << 40 : 0);
        int64_t n = ldt_test_range(&st, 0, 600);
        ldt__rand_fill_trunc_normal_f64(d, seed, offset, start, n, &t);
        ldt__rand_fill_randint_i64(v, seed, offset, start, n, -7, 1007);
        for (int64_t k = 0; k < n; k++) {
            double w = ldt__rand_trunc_normal_f64(seed, offset, start + k, &t);
            cr_assert(memcmp(&d[k], &w, 8) == 0, "trunc_normal start %lld k %lld", (long long)start,
                      (long long)k);
            cr_assert_eq(v[k], ldt__rand_randint(seed, offset, start + k, -7, 1007));
        }
        ldt__rand_fill_uniform_f32(f, seed, offset, start, n, -3.0f, 5.5f);
        for (int64_t k = 0; k < n; k++) {
            float w = ldt__rand_uniform_scale_f32(ldt__rand_uniform_f32(seed, offset, start + k),
                                                  -3.0f, 5.5f);
            cr_assert(memcmp(&f[k], &w, 4) == 0, "uniform start %lld k %lld", (long long)start,
                      (long long)k);
        }
        ldt__rand_fill_uniform_f32(f, seed, offset, start, n, 1.0f, 2.0f);
        for (int64_t k = 0; k < n; k++) {
            float w = ldt__rand_uniform_scale_f32(ldt__rand_uniform_f32(seed, offset, start + k),
                                                  1.0f, 2.0f);
            cr_assert(memcmp(&f[k], &w, 4) == 0 && f[k] < 2.0f);
        }
        ldt__rand_fill_normal_f32(f, seed, offset, start, n, 1.0f, 3.0f);
        for (int64_t k = 0; k < n; k++) {
            float w = ldt__rand_mul_add_f32(1.0f, 3.0f, ldt__rand_normal_f32(seed, offset, start + k));
            cr_assert(memcmp(&f[k], &w, 4) == 0, "normal start %lld k %lld", (long long)start,
                      (long long)k);
        }
        ldt__rand_fill_bernoulli_u8(u, seed, offset, start, n, 0.3);
        ldt__rand_fill_bernoulli_f32(f, seed, offset, start, n, 0.3);
        for (int64_t k = 0; k < n; k++) {
            int w = ldt__rand_bernoulli(seed, offset, start + k, 0.3);
            cr_assert_eq(u[k], w);
            cr_assert_eq(f[k], (float)w);
        }
    }
    free(f);
    free(d);
    free(v);
    free(u);
}

/* ---------------------------------------------------------------------------------------
 * Statistics.
 */
Test(trunc_normal, statistics_match_the_truncated_normal) {
    int64_t n = (int64_t)(1000000 * ldt_test_scale());
    double *x = malloc((size_t)n * sizeof *x);
    cr_assert(x != NULL);
    if (n < 10000) n = 10000;
    for (int c = 0; c < NTN; c++) {
        const tn_case *k = &k_tn[c];
        ldt__trunc_normal t = ldt__rand_trunc_normal_init(k->mean, k->std, k->a, k->b);
        double al = (k->a - k->mean) / k->std, be = (k->b - k->mean) / k->std;
        double phia = exp(-al * al / 2) / sqrt(2 * 3.14159265358979323846),
               phib = exp(-be * be / 2) / sqrt(2 * 3.14159265358979323846);
        double z = (double)(ref_cdf(be) - ref_cdf(al));
        double m = k->mean + k->std * (phia - phib) / z;
        double var = k->std * k->std *
                     (1 + (al * phia - be * phib) / z - ((phia - phib) / z) * ((phia - phib) / z));
        double s1 = 0, s2 = 0;
        ldt__rand_fill_trunc_normal_f64(x, 1234 + (uint64_t)c, 0, 0, n, &t);
        for (int64_t i = 0; i < n; i++) {
            cr_assert(x[i] >= k->a && x[i] <= k->b, "case %d: %.17g", c, x[i]);
            s1 += x[i];
        }
        s1 /= (double)n;
        for (int64_t i = 0; i < n; i++) s2 += (x[i] - s1) * (x[i] - s1);
        s2 /= (double)(n - 1);
        /* six standard errors of the mean; 2% of the variance */
        cr_expect(fabs(s1 - m) <= 6 * sqrt(var / (double)n), "case %d: mean %.6g, expected %.6g",
                  c, s1, m);
        cr_expect(fabs(s2 / var - 1) <= 0.02 + 10 / sqrt((double)n),
                  "case %d: variance %.6g, expected %.6g", c, s2, var);
    }
    free(x);
}

Test(randint, range_and_uniformity) {
    int64_t n = (int64_t)(1000000 * ldt_test_scale());
    int64_t *v = malloc((size_t)(n < 10000 ? 10000 : n) * sizeof *v);
    static const int64_t rs[] = {10, 7, 256};
    cr_assert(v != NULL);
    if (n < 10000) n = 10000;
    for (size_t c = 0; c < sizeof rs / sizeof rs[0]; c++) {
        int64_t r = rs[c], low = -3;
        int64_t count[256] = {0};
        double chi = 0, e = (double)n / (double)r;
        ldt__rand_fill_randint_i64(v, 42, 9 + c, 0, n, low, (uint64_t)r);
        for (int64_t i = 0; i < n; i++) {
            cr_assert(v[i] >= low && v[i] < low + r, "r %lld: %lld", (long long)r, (long long)v[i]);
            count[v[i] - low]++;
        }
        for (int64_t k = 0; k < r; k++) {
            cr_expect(count[k] > 0, "r %lld: value %lld never drawn", (long long)r, (long long)(k + low));
            chi += ((double)count[k] - e) * ((double)count[k] - e) / e;
        }
        /* chi-square with r - 1 degrees of freedom: mean r - 1, sd sqrt(2 (r - 1)); 8 sd */
        cr_expect(chi < (double)(r - 1) + 8 * sqrt(2.0 * (double)(r - 1)),
                  "r %lld: chi-square %.1f", (long long)r, chi);
    }
    /* one value */
    ldt__rand_fill_randint_i64(v, 1, 2, 3, 100, 17, 1);
    for (int i = 0; i < 100; i++) cr_assert_eq(v[i], 17);
    free(v);
}

/* ---------------------------------------------------------------------------------------
 * The ops through a context: values, dtypes, the offset advance, errors.
 */
static void read_all(ldt_tensor *t, void *buf, int64_t nbytes) {
    cr_assert_not_null(t, "%s", ldt_last_error());
    cr_assert_eq(ldt_read(t, buf, nbytes), LDT_OK, "%s", ldt_last_error());
}

Test(ops, trunc_normal_values_dtypes_and_offset) {
    ldt_ctx *ctx;
    ldt_shape s = {2, {13, 7}};
    int64_t n = 91;
    double d[91];
    float f[91];
    uint16_t h[91], bh[91];
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 11, 100), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_F64, 0.5, 2.0, -1.0, 3.0), d, sizeof d);
    cr_assert_eq(ldt_ctx_rng_offset(ctx), 100 + 23); /* ceil(91 / 4) */
    cr_assert_eq(ldt_ctx_set_seed(ctx, 11, 100), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_F32, 0.5, 2.0, -1.0, 3.0), f, sizeof f);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 11, 100), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_F16, 0.5, 2.0, -1.0, 3.0), h, sizeof h);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 11, 100), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_BF16, 0.5, 2.0, -1.0, 3.0), bh, sizeof bh);
    for (int64_t i = 0; i < n; i++) {
        double want = ref_trunc_normal(ref_word(11, 100, i), 0.5, 2.0, -1.0, 3.0);
        cr_assert(fabs(d[i] - want) <= 1e-10, "element %lld: %.17g vs %.17g", (long long)i, d[i],
                  want);
        cr_assert(f[i] == (float)d[i]); /* one rounding of the double */
        /* f16 / bf16: the double rounded once, to nearest */
        float hf = ldt__f16_to_f32(h[i]), bf = ldt__bf16_to_f32(bh[i]);
        cr_assert(fabs(hf - d[i]) <= ldexp(fabs(d[i]) > 0 ? 1 : 0, ilogb(fabs(d[i]) + 1e-300) - 11) + 1e-8,
                  "f16 element %lld: %g vs %.17g", (long long)i, hf, d[i]);
        cr_assert(fabs(bf - d[i]) <= ldexp(1, ilogb(fabs(d[i]) + 1e-300) - 8) + 1e-30,
                  "bf16 element %lld: %g vs %.17g", (long long)i, bf, d[i]);
    }
    ldt_ctx_destroy(ctx);
}

Test(ops, half_results_are_rounded_once) {
    /* A double just above an f16 tie (1 + 2^-11 + 2^-40, say) rounded to f32 first would land
     * on the tie and go to even (1); rounded once it is 1 + 2^-10. With 64k draws some dozen
     * values lie that close to a tie; every f16 must be the nearest to its double. */
    ldt_ctx *ctx;
    ldt_shape s = {1, {65536}};
    static double d[65536];
    static uint16_t h[65536];
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_F64, 0.0, 1.0, -3.0, 3.0), d, sizeof d);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0, 0), LDT_OK);
    read_all(ldt_trunc_normal(ctx, &s, LDT_F16, 0.0, 1.0, -3.0, 3.0), h, sizeof h);
    for (int i = 0; i < 65536; i++) {
        /* the nearest f16 by search over the two f32-rounded neighbours' f16 values */
        uint16_t a = ldt__f32_to_f16((float)d[i]);
        double va = ldt__f16_to_f32(a), best = va;
        uint16_t cand[2] = {(uint16_t)(a - 1), (uint16_t)(a + 1)};
        for (int k = 0; k < 2; k++) {
            double vc = ldt__f16_to_f32(cand[k]);
            if (fabs(vc - d[i]) < fabs(best - d[i])) best = vc;
        }
        cr_assert(fabs((double)ldt__f16_to_f32(h[i]) - d[i]) <= fabs(best - d[i]),
                  "element %d: f16 %g is not the nearest to %.17g", i, ldt__f16_to_f32(h[i]), d[i]);
    }
    ldt_ctx_destroy(ctx);
}

Test(ops, randint_values_dtypes_and_offset) {
    ldt_ctx *ctx;
    ldt_shape s = {3, {3, 5, 7}};
    int64_t v64[105];
    int32_t v32[105];
    uint8_t v8[105];
    float vf[105];
    uint16_t vh[105];
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0xabcdef, 5), LDT_OK);
    read_all(ldt_randint(ctx, &s, LDT_I64, -1000, 1000), v64, sizeof v64);
    cr_assert_eq(ldt_ctx_rng_offset(ctx), 5 + 27);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0xabcdef, 5), LDT_OK);
    read_all(ldt_randint(ctx, &s, LDT_I32, -1000, 1000), v32, sizeof v32);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0xabcdef, 5), LDT_OK);
    read_all(ldt_randint(ctx, &s, LDT_F32, -1000, 1000), vf, sizeof vf);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0xabcdef, 5), LDT_OK);
    read_all(ldt_randint(ctx, &s, LDT_F16, -1000, 1000), vh, sizeof vh);
    for (int i = 0; i < 105; i++) {
        int64_t want = ref_randint(ref_word(0xabcdef, 5, i), -1000, 1000);
        cr_assert_eq(v64[i], want);
        cr_assert_eq(v32[i], want);
        cr_assert_eq(vf[i], (float)want);
        cr_assert_eq(ldt__f16_to_f32(vh[i]), (float)want);
    }
    cr_assert_eq(ldt_ctx_set_seed(ctx, 3, 0), LDT_OK);
    read_all(ldt_randint(ctx, &s, LDT_U8, 0, 256), v8, sizeof v8);
    for (int i = 0; i < 105; i++) cr_assert_eq(v8[i], ref_randint(ref_word(3, 0, i), 0, 256));
    ldt_ctx_destroy(ctx);
}

/* The op fails, names what was wrong, leaves the offset alone; the error is cleared after. */
static void expect_bad(ldt_ctx *ctx, ldt_tensor *t, const char *needle) {
    cr_assert_null(t, "expected an error mentioning '%s'", needle);
    cr_assert(strstr(ldt_ctx_errmsg(ctx), needle) != NULL, "message '%s' lacks '%s'",
              ldt_ctx_errmsg(ctx), needle);
    cr_assert_eq(ldt_ctx_rng_offset(ctx), 0);
    ldt_ctx_clear_error(ctx);
    ldt_trace_discard(ctx);
}

Test(ops, bad_input) {
    ldt_ctx *ctx;
    ldt_shape s = {2, {4, 4}};
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, 0, -1, 1), "std > 0");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, -1, -1, 1), "std > 0");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, NAN, 1, -1, 1), "finite");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, 1, 1, 1), "a < b");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, 1, 2, -2), "a < b");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, 1, -INFINITY, 2), "finite a < b");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_F32, 0, 1, NAN, 2), "a < b");
    expect_bad(ctx, ldt_trunc_normal(ctx, &s, LDT_I32, 0, 1, -2, 2), "floating dtype");
    expect_bad(ctx, ldt_trunc_normal(ctx, NULL, LDT_F32, 0, 1, -2, 2), "shape");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I64, 5, 5), "low < high");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I64, 5, -5), "low < high");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I64, 0, 4294967297ll), "2^32");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I64, INT64_MIN, INT64_MAX), "2^32");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I32, 0, 2147483649ll), "overflows i32");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_I32, -2147483649ll, 0), "overflows i32");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_U8, -1, 10), "overflows u8");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_U8, 0, 257), "overflows u8");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_F16, 0, 5000), "holds exactly");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_F32, 0, 16777218), "holds exactly");
    expect_bad(ctx, ldt_randint(ctx, &s, LDT_BOOL, 0, 2), "expected i32, i64, u8");
    /* the largest allowed ones record */
    cr_assert_not_null(ldt_randint(ctx, &s, LDT_I32, INT32_MIN, INT32_MAX + 1ll));
    cr_assert_not_null(ldt_randint(ctx, &s, LDT_F32, -16777216, 16777217));
    cr_assert_not_null(ldt_randint(ctx, &s, LDT_U8, 0, 256));
    ldt_trace_discard(ctx);
    ldt_ctx_destroy(ctx);
}

/* ---------------------------------------------------------------------------------------
 * Sharded equals one device, bitwise, for every strategy of every distribution.
 */
typedef struct dist_arg {
    int dist; /* 0 uniform, 1 normal, 2 bernoulli, 3 trunc_normal, 4 randint */
    ldt_shape shape;
    ldt_dtype dt;
} dist_arg;

static ldt_tensor *build_dist(ldt_ctx *ctx, void *arg) {
    const dist_arg *a = arg;
    cr_assert_eq(ldt_ctx_set_seed(ctx, 0x5eed, 77), LDT_OK);
    switch (a->dist) {
    case 0: return ldt_uniform(ctx, &a->shape, a->dt, -2.0, 3.0);
    case 1: return ldt_normal(ctx, &a->shape, a->dt, 1.0, 2.0);
    case 2: return ldt_bernoulli(ctx, &a->shape, a->dt, 0.3);
    case 3: return ldt_trunc_normal(ctx, &a->shape, a->dt, 0.1, 1.5, -1.0, 2.5);
    default: return ldt_randint(ctx, &a->shape, a->dt, -50, 77);
    }
}

Test(sharded, every_strategy_equals_one_device) {
    static const char *meshes[] = {"2", "3", "2x2", "2x3"};
    /* uneven dims for torch.chunk, dims divisible by 2 and 3 for interleaved shards */
    static const ldt_shape shapes[] = {{2, {7, 5}}, {2, {12, 6}}, {3, {5, 6, 3}}, {1, {13}}};
    static const ldt_dtype dts[5][2] = {{LDT_F32, LDT_BF16}, {LDT_F32, LDT_F64},
                                        {LDT_F32, LDT_U8},   {LDT_F32, LDT_F16},
                                        {LDT_I64, LDT_I32}};
    int total = 0;
    for (int dist = 0; dist < 5; dist++)
        for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; m++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                dist_arg a = {dist, shapes[s], dts[dist][(m + s) % 2]};
                int ns = pc_check_op(meshes[m], build_dist, &a, 0);
                cr_assert(ns >= 2, "dist %d mesh %s: %d strategies", dist, meshes[m], ns);
                total += ns;
            }
    cr_log_info("%d strategies checked", total);
}

/* Distributions dists[0..ndist) of `shape` on mesh_text, each pinned to every entry of pins
 * and planned normally (not forced): every result equals one device's bit for bit. */
static void check_pinned(const char *mesh_text, const char *const *pins, size_t npins, ldt_shape shape,
                         const int *dists, int ndist) {
    ldt_mesh *mesh;
    int nd;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    nd = ldt_mesh_ndim(mesh);
    for (int k = 0; k < ndist; k++) {
        int dist = dists[k];
        dist_arg a = {dist, shape, dist == 4 ? LDT_I32 : LDT_F32};
        ldt_ctx *one, *ctx;
        ldt_ctx_options co = {mesh, 0, NULL};
        int64_t nb = 4;
        int32_t *ref, *got; /* 4-byte elements either way */
        for (int d = 0; d < shape.ndim; d++) nb *= shape.dims[d];
        ref = malloc((size_t)nb);
        got = malloc((size_t)nb);
        cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
        read_all(build_dist(one, &a), ref, nb);
        ldt_ctx_destroy(one);
        for (size_t p = 0; p < npins; p++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int npl;
            ldt_plan *plan;
            ldt_tensor *t;
            void *dst = got;
            cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
            t = build_dist(ctx, &a);
            cr_assert_not_null(t);
            cr_assert_eq(ldt_placements_parse(pins[p], shape.ndim, pl, LDT_MAX_DIMS, &npl), LDT_OK, "%s",
                         ldt_last_error());
            cr_assert_eq(npl, nd);
            cr_assert_eq(ldt_pin(t, pl, npl), LDT_OK, "%s: %s", pins[p], ldt_last_error());
            cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s: %s", pins[p], ldt_last_error());
            memset(got, 0, (size_t)nb);
            cr_assert_eq(ldt_plan_run(plan, 1, &t, &dst, &nb), LDT_OK, "%s: %s", pins[p], ldt_last_error());
            cr_assert(memcmp(got, ref, (size_t)nb) == 0, "dist %d pinned %s on %s differs", dist, pins[p],
                      mesh_text);
            ldt_plan_destroy(plan);
            ldt_ctx_destroy(ctx);
        }
        free(ref);
        free(got);
    }
    ldt_mesh_destroy(mesh);
}

/* A 2x2 mesh pinned to nested and interleaved placements. */
Test(sharded, pinned_nested_and_interleaved) {
    static const char *pins[] = {"S0,S0", "S1,S0", "IS0:2,S1", "S1,IS0:3", "R,S1", "IS1:3,S0"};
    static const int dists[] = {3, 4};
    check_pinned("2x2", pins, sizeof pins / sizeof pins[0], (ldt_shape){2, {12, 6}}, dists, 2);
}

/* A 3-D mesh: every distribution pinned to nested, uneven and interleaved placements. */
Test(sharded, three_d_mesh_pinned) {
    static const char *pins[] = {"S0,S1,S0", "S1,S1,S1", "IS0:2,R,S1", "R,S1,IS0:3", "S0,S0,S0"};
    static const int dists[] = {0, 1, 2, 3, 4};
    /* 7 over 8 ranks: empty shards; 12 over 8: uneven */
    check_pinned("2x2x2", pins, sizeof pins / sizeof pins[0], (ldt_shape){2, {12, 7}}, dists, 5);
}
