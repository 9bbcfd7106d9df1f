/* The random stream (kernels/common/philox.h): Philox4x32-10 known answers, hand-derived
 * stream elements, the counter/key layout, shard independence, statistics, Box-Muller. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/common/philox.h"
#include "tests/test_util.h"

#define TWO_PI 6.283185307179586476925

/* Random123's known-answer vectors for philox4x32_10 (kat_vectors). */
static const struct {
    uint32_t ctr[4], key[2], out[4];
} k_kat[3] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

static void assert_block(ldt__philox4x32 got, const uint32_t want[4], const char *what) {
    cr_assert(got.v[0] == want[0] && got.v[1] == want[1] && got.v[2] == want[2] &&
                  got.v[3] == want[3],
              "%s: got %08x %08x %08x %08x, want %08x %08x %08x %08x", what, got.v[0], got.v[1],
              got.v[2], got.v[3], want[0], want[1], want[2], want[3]);
}

Test(philox, known_answer_vectors) {
    for (int t = 0; t < 3; t++) {
        char what[32];
        snprintf(what, sizeof what, "KAT %d", t + 1);
        assert_block(ldt__philox4x32_10(k_kat[t].ctr, k_kat[t].key), k_kat[t].out, what);
    }
}

/* Seed 0, offset 0: block 0 is KAT 1, so elements 0..3 are its words, and each value follows
 * from a word by hand. */
Test(stream, hand_computed_elements) {
    static const uint32_t w[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    /* (x >> 8) / 2^24, reduced: 0x6627e8 = 6694888 = 8 * 836861, ... */
    static const float uni[4] = {836861.0f / 2097152.0f, 14772677.0f / 16777216.0f,
                                 3085803.0f / 4194304.0f, 10158299.0f / 16777216.0f};
    /* Box-Muller in double from the f32 v = ((float)x + 0.5f) * 2^-32 of those words */
    static const double nrm[4] = {0.9911378214385375, -0.9246624091664182, -0.6176089559616506,
                                  -0.4820686421889939};
    for (int i = 0; i < 4; i++) {
        uint32_t x = ldt__rand_u32(0, 0, i);
        float u = ldt__rand_uniform_f32(0, 0, i);
        float z = ldt__rand_normal_f32(0, 0, i);
        cr_assert_eq(x, w[i], "u32(0,0,%d) = %08x, want %08x", i, x, w[i]);
        cr_assert(u == uni[i], "uniform(0,0,%d) = %.9g, want %.9g", i, (double)u, (double)uni[i]);
        cr_assert(fabs(z - nrm[i]) <= 1e-5 * fabs(nrm[i]), "normal(0,0,%d) = %.9g, want %.9g", i,
                  (double)z, nrm[i]);
        /* bernoulli is u < p: p equal to u gives 0, the next f32 up gives 1 */
        cr_assert_eq(ldt__rand_bernoulli(0, 0, i, uni[i]), 0, "bernoulli(p = u) at %d", i);
        cr_assert_eq(ldt__rand_bernoulli(0, 0, i, nextafterf(uni[i], 1.0f)), 1,
                     "bernoulli(p just above u) at %d", i);
        {
            uint8_t b0, b1;
            float f0, f1;
            ldt__rand_fill_bernoulli_u8(&b0, 0, 0, i, 1, uni[i]);
            ldt__rand_fill_bernoulli_u8(&b1, 0, 0, i, 1, nextafterf(uni[i], 1.0f));
            ldt__rand_fill_bernoulli_f32(&f0, 0, 0, i, 1, uni[i]);
            ldt__rand_fill_bernoulli_f32(&f1, 0, 0, i, 1, nextafterf(uni[i], 1.0f));
            cr_assert(b0 == 0 && b1 == 1 && f0 == 0.0f && f1 == 1.0f,
                      "bernoulli fills at %d, p = u and just above: u8 %d %d, f32 %g %g", i, b0, b1,
                      (double)f0, (double)f1);
        }
    }
    /* element 4 starts block 1: counter (1, 0, 0, 0) */
    {
        uint32_t ctr[4] = {1, 0, 0, 0}, key[2] = {0, 0};
        ldt__philox4x32 b = ldt__philox4x32_10(ctr, key);
        for (int l = 0; l < 4; l++)
            cr_assert_eq(ldt__rand_u32(0, 0, 4 + l), b.v[l], "element %d: %08x, want %08x", 4 + l,
                         ldt__rand_u32(0, 0, 4 + l), b.v[l]);
    }
}

/* counter = (j lo, j hi, offset lo, offset hi), key = (seed lo, seed hi): block j of a seed and
 * offset built from KATs 2 and 3 is their answer. */
Test(stream, counter_key_layout) {
    const uint64_t seed = 0x299f31d0a4093822ull, offset = 0x0370734413198a2eull;
    assert_block(ldt__rand_block(seed, offset, 0x85a308d3243f6a88ull), k_kat[2].out,
                 "block(KAT 3 seed, offset, j)");
    assert_block(ldt__rand_block(~0ull, ~0ull, ~0ull), k_kat[1].out, "block(~0, ~0, ~0)");
    assert_block(ldt__rand_block(0, 0, 0), k_kat[0].out, "block(0, 0, 0)");

    /* elements at valid indices, j hi nonzero: lane i%4 of the counter built by hand */
    uint64_t rng = 7;
    int cases = ldt_test_cases(2000);
    for (int c = 0; c < cases; c++) {
        int64_t i = (int64_t)(ldt_test_rand(&rng) >> 1); /* any int64 >= 0 */
        uint64_t j = (uint64_t)i / 4;
        uint32_t ctr[4] = {(uint32_t)j, (uint32_t)(j >> 32), 0x13198a2eu, 0x03707344u};
        uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
        uint32_t want = ldt__philox4x32_10(ctr, key).v[i % 4];
        uint32_t got = ldt__rand_u32(seed, offset, i);
        cr_assert_eq(got, want, "u32 at i=%lld (j=%llx lane %d): %08x, want %08x", (long long)i,
                     (unsigned long long)j, (int)(i % 4), got, want);
    }

    /* every half of seed, offset and j matters, and they are not interchangeable */
    {
        const uint64_t j = 0x0000000500000003ull;
        ldt__philox4x32 base = ldt__rand_block(seed, offset, j);
        const ldt__philox4x32 other[] = {
            ldt__rand_block(seed ^ 1, offset, j),
            ldt__rand_block(seed ^ (1ull << 32), offset, j),
            ldt__rand_block(seed, offset ^ 1, j),
            ldt__rand_block(seed, offset ^ (1ull << 32), j),
            ldt__rand_block(seed, offset, j ^ 1),
            ldt__rand_block(seed, offset, j ^ (1ull << 32)),
            ldt__rand_block(offset, seed, j),
            ldt__rand_block(seed, j, offset),
        };
        for (size_t k = 0; k < sizeof other / sizeof other[0]; k++)
            cr_assert(memcmp(&base, &other[k], sizeof base) != 0,
                      "variant %zu gives the same block", k);
    }
}

/* A fill of n elements from any start equals n single-element calls. */
Test(stream, fills_match_single_elements) {
    uint64_t rng = 11;
    int cases = ldt_test_cases(300);
    float *f = malloc(64 * sizeof *f), *g = malloc(64 * sizeof *g);
    uint8_t *b = malloc(64);
    for (int c = 0; c < cases; c++) {
        uint64_t seed = ldt_test_rand(&rng), offset = ldt_test_rand(&rng) >> (c % 64);
        int64_t start = c % 3 == 0 ? ldt_test_range(&rng, 0, 9)
                                   : (int64_t)(ldt_test_rand(&rng) >> 2);
        int64_t n = ldt_test_range(&rng, 0, 64);
        double p = (double)ldt_test_range(&rng, 0, 1000) / 1000.0;
        ldt__rand_fill_uniform_f32(f, seed, offset, start, n, 0.0f, 1.0f);
        ldt__rand_fill_normal_f32(g, seed, offset, start, n, 0.0f, 1.0f);
        ldt__rand_fill_bernoulli_u8(b, seed, offset, start, n, p);
        for (int64_t k = 0; k < n; k++) {
            int64_t i = start + k;
            float u = ldt__rand_uniform_f32(seed, offset, i);
            float z = ldt__rand_normal_f32(seed, offset, i);
            int bit = ldt__rand_bernoulli(seed, offset, i, p);
            cr_assert(f[k] == u, "case %d uniform at %lld: fill %.9g, single %.9g", c, (long long)i,
                      (double)f[k], (double)u);
            cr_assert(g[k] == z, "case %d normal at %lld: fill %.9g, single %.9g", c, (long long)i,
                      (double)g[k], (double)z);
            cr_assert_eq(b[k], bit, "case %d bernoulli(%g) at %lld: fill %d, single %d", c, p,
                         (long long)i, b[k], bit);
        }
        ldt__rand_fill_bernoulli_f32(f, seed, offset, start, n, p);
        for (int64_t k = 0; k < n; k++)
            cr_assert(f[k] == (float)b[k], "case %d bernoulli f32 at %lld: %g, u8 says %d", c,
                      (long long)(start + k), (double)f[k], b[k]);
    }
    free(f);
    free(g);
    free(b);
}

/* The four fills of [start, start + n) into dst. */
typedef struct {
    float *uni, *nrm, *bf;
    uint8_t *bu;
} fills;

static void fills_alloc(fills *f, int64_t n) {
    size_t m = (size_t)(n > 0 ? n : 1);
    f->uni = malloc(m * sizeof(float));
    f->nrm = malloc(m * sizeof(float));
    f->bf = malloc(m * sizeof(float));
    f->bu = malloc(m);
    memset(f->uni, 0xa5, m * sizeof(float));
    memset(f->nrm, 0xa5, m * sizeof(float));
    memset(f->bf, 0xa5, m * sizeof(float));
    memset(f->bu, 0xa5, m);
}

static void fills_free(fills *f) {
    free(f->uni);
    free(f->nrm);
    free(f->bf);
    free(f->bu);
}

static void fills_range(fills *f, int64_t at, uint64_t seed, uint64_t offset, int64_t start,
                        int64_t n) {
    ldt__rand_fill_uniform_f32(f->uni + at, seed, offset, start, n, -3.0f, 5.0f);
    ldt__rand_fill_normal_f32(f->nrm + at, seed, offset, start, n, 1.5f, 0.25f);
    ldt__rand_fill_bernoulli_f32(f->bf + at, seed, offset, start, n, 0.3);
    ldt__rand_fill_bernoulli_u8(f->bu + at, seed, offset, start, n, 0.7);
}

/* First index where two buffers differ, -1 if none. */
static int64_t first_diff(const void *a, const void *b, int64_t n, size_t es) {
    for (int64_t k = 0; k < n; k++)
        if (memcmp((const char *)a + k * es, (const char *)b + k * es, es) != 0) return k;
    return -1;
}

static void assert_fills_equal(const fills *got, const fills *want, int64_t n, const char *what,
                               int c) {
    int64_t k;
    k = first_diff(got->uni, want->uni, n, sizeof(float));
    cr_assert(k < 0, "case %d %s: uniform[%lld] = %.9g, whole fill has %.9g", c, what,
              (long long)k, k < 0 ? 0.0 : (double)got->uni[k], k < 0 ? 0.0 : (double)want->uni[k]);
    k = first_diff(got->nrm, want->nrm, n, sizeof(float));
    cr_assert(k < 0, "case %d %s: normal[%lld] = %.9g, whole fill has %.9g", c, what, (long long)k,
              k < 0 ? 0.0 : (double)got->nrm[k], k < 0 ? 0.0 : (double)want->nrm[k]);
    k = first_diff(got->bf, want->bf, n, sizeof(float));
    cr_assert(k < 0, "case %d %s: bernoulli f32[%lld] = %g, whole fill has %g", c, what,
              (long long)k, k < 0 ? 0.0 : (double)got->bf[k], k < 0 ? 0.0 : (double)want->bf[k]);
    k = first_diff(got->bu, want->bu, n, 1);
    cr_assert(k < 0, "case %d %s: bernoulli u8[%lld] = %d, whole fill has %d", c, what,
              (long long)k, k < 0 ? 0 : got->bu[k], k < 0 ? 0 : want->bu[k]);
}

/* Cutting [base, base + n) into uneven pieces at arbitrary points and filling each at its own
 * start gives bitwise one fill of the whole. */
Test(stream, shard_independence_pieces) {
    uint64_t rng = 23;
    int cases = ldt_test_cases(200);
    for (int c = 0; c < cases; c++) {
        uint64_t seed = ldt_test_rand(&rng), offset = ldt_test_rand(&rng);
        int64_t base = c % 2 ? ldt_test_range(&rng, 0, 7) : (int64_t)(ldt_test_rand(&rng) >> 3);
        int64_t n = ldt_test_range(&rng, 0, 1000);
        fills whole, pieces;
        fills_alloc(&whole, n);
        fills_alloc(&pieces, n);
        fills_range(&whole, 0, seed, offset, base, n);
        for (int64_t a = 0; a < n;) {
            int64_t len = ldt_test_range(&rng, 0, c % 3 == 0 ? 5 : 97);
            if (len > n - a) len = n - a;
            fills_range(&pieces, a, seed, offset, base + a, len);
            a += len;
        }
        assert_fills_equal(&pieces, &whole, n, "pieces", c);
        fills_free(&whole);
        fills_free(&pieces);
    }
}

/* torch.chunk of a [R, C] tensor over k ranks on dim d: rank r holds [r*ch, min(n, (r+1)*ch)). */
static void chunk(int64_t n, int k, int r, int64_t *lo, int64_t *hi) {
    int64_t ch = (n + k - 1) / k;
    *lo = r * ch < n ? r * ch : n;
    *hi = (r + 1) * ch < n ? (r + 1) * ch : n;
}

/* A [R, C] tensor sharded on rows (S0) or columns (S1) over k ranks, uneven: each rank fills
 * its local rows from their global indices r*C + c0; the assembled tensor is the
 * single-device one. */
Test(stream, shard_independence_2d_chunks) {
    uint64_t rng = 31;
    int cases = ldt_test_cases(150);
    for (int c = 0; c < cases; c++) {
        uint64_t seed = ldt_test_rand(&rng), offset = ldt_test_rand(&rng);
        int64_t R = ldt_test_range(&rng, 1, 23), C = ldt_test_range(&rng, 1, 23);
        int k = (int)ldt_test_range(&rng, 1, 8), dim = c % 2;
        fills whole, assembled, local;
        char what[64];
        fills_alloc(&whole, R * C);
        fills_alloc(&assembled, R * C);
        fills_alloc(&local, R * C);
        fills_range(&whole, 0, seed, offset, 0, R * C);
        for (int rank = 0; rank < k; rank++) {
            int64_t r0 = 0, r1 = R, c0 = 0, c1 = C, w;
            if (dim == 0) chunk(R, k, rank, &r0, &r1);
            else chunk(C, k, rank, &c0, &c1);
            w = c1 - c0;
            /* the rank's local [r1-r0, w] buffer, row by row, then copied into place */
            for (int64_t r = r0; r < r1; r++)
                fills_range(&local, (r - r0) * w, seed, offset, r * C + c0, w);
            for (int64_t r = r0; r < r1; r++) {
                int64_t src = (r - r0) * w, dst = r * C + c0;
                memcpy(assembled.uni + dst, local.uni + src, (size_t)w * sizeof(float));
                memcpy(assembled.nrm + dst, local.nrm + src, (size_t)w * sizeof(float));
                memcpy(assembled.bf + dst, local.bf + src, (size_t)w * sizeof(float));
                memcpy(assembled.bu + dst, local.bu + src, (size_t)w);
            }
        }
        snprintf(what, sizeof what, "[%lld,%lld] S%d over %d", (long long)R, (long long)C, dim, k);
        assert_fills_equal(&assembled, &whole, R * C, what, c);
        fills_free(&whole);
        fills_free(&assembled);
        fills_free(&local);
    }
}

#define NSTAT 1000000

Test(stream, uniform_statistics) {
    float *x = malloc(NSTAT * sizeof *x);
    double sum = 0, sq = 0;
    ldt__rand_fill_uniform_f32(x, 1234, 5, 3, NSTAT, 0.0f, 1.0f);
    for (int k = 0; k < NSTAT; k++) {
        cr_assert(x[k] >= 0.0f && x[k] < 1.0f, "uniform[%d] = %.9g outside [0,1)", k, (double)x[k]);
        sum += x[k];
        sq += (double)x[k] * x[k];
    }
    double mean = sum / NSTAT, var = sq / NSTAT - mean * mean;
    /* sd of the mean is 0.29/1000: bounds of ~17 sd */
    cr_assert(fabs(mean - 0.5) < 0.005, "uniform mean %.6f, want 0.5", mean);
    cr_assert(fabs(var - 1.0 / 12) < 0.005, "uniform variance %.6f, want %.6f", var, 1.0 / 12);

    /* scaled to [-3, 5) */
    ldt__rand_fill_uniform_f32(x, 99, 0, 0, NSTAT, -3.0f, 5.0f);
    sum = 0;
    for (int k = 0; k < NSTAT; k++) {
        cr_assert(x[k] >= -3.0f && x[k] < 5.0f, "uniform[-3,5)[%d] = %.9g", k, (double)x[k]);
        sum += x[k];
    }
    cr_assert(fabs(sum / NSTAT - 1.0) < 0.04, "uniform[-3,5) mean %.6f, want 1", sum / NSTAT);
    free(x);
}

Test(stream, normal_statistics) {
    float *x = malloc(NSTAT * sizeof *x);
    double sum = 0, sq = 0, sum4 = 0;
    int64_t out2 = 0;
    ldt__rand_fill_normal_f32(x, 42, 77, 1, NSTAT, 0.0f, 1.0f);
    for (int k = 0; k < NSTAT; k++) {
        double v = x[k];
        cr_assert(isfinite(v) && fabs(v) < 6.8, "normal[%d] = %.9g", k, v);
        sum += v;
        sq += v * v;
        sum4 += v * v * v * v;
        out2 += fabs(v) > 2.0;
    }
    double mean = sum / NSTAT, var = sq / NSTAT - mean * mean, kurt = sum4 / NSTAT;
    double tail = (double)out2 / NSTAT;
    cr_assert(fabs(mean) < 0.01, "normal mean %.6f, want 0", mean);
    cr_assert(fabs(var - 1.0) < 0.02, "normal variance %.6f, want 1", var);
    cr_assert(fabs(kurt - 3.0) < 0.1, "normal fourth moment %.6f, want 3", kurt);
    cr_assert(fabs(tail - 0.0455) < 0.003, "P(|z| > 2) = %.6f, want 0.0455", tail);

    /* mean 10, std 3 */
    ldt__rand_fill_normal_f32(x, 43, 0, 0, NSTAT, 10.0f, 3.0f);
    sum = sq = 0;
    for (int k = 0; k < NSTAT; k++) {
        sum += x[k];
        sq += (double)x[k] * x[k];
    }
    mean = sum / NSTAT;
    var = sq / NSTAT - mean * mean;
    cr_assert(fabs(mean - 10.0) < 0.03, "normal(10, 3) mean %.6f", mean);
    cr_assert(fabs(var - 9.0) < 0.2, "normal(10, 3) variance %.6f", var);
    free(x);
}

Test(stream, bernoulli_rate) {
    static const double ps[] = {0.0, 0.01, 0.3, 0.5, 0.9, 1.0};
    uint8_t *b = malloc(NSTAT);
    for (size_t t = 0; t < sizeof ps / sizeof ps[0]; t++) {
        int64_t ones = 0;
        ldt__rand_fill_bernoulli_u8(b, 7 + t, 1, 0, NSTAT, ps[t]);
        for (int k = 0; k < NSTAT; k++) {
            cr_assert(b[k] <= 1, "bernoulli[%d] = %d", k, b[k]);
            ones += b[k];
        }
        double rate = (double)ones / NSTAT;
        cr_assert(fabs(rate - ps[t]) < 0.005, "bernoulli(%g) rate %.6f", ps[t], rate);
        if (ps[t] == 0.0 || ps[t] == 1.0)
            cr_assert(rate == ps[t], "bernoulli(%g) rate %.6f, want exactly %g", ps[t], rate,
                      ps[t]);
    }
    free(b);
}

/* The word -> value maps at their ends, and the [lo, hi) clamp. */
Test(stream, conversion_ends) {
    cr_assert(ldt__rand_u32_to_uniform_f32(0) == 0.0f);
    cr_assert(ldt__rand_u32_to_uniform_f32(0xffffffffu) == 1.0f - 0x1p-24f, "top: %.9g",
              (double)ldt__rand_u32_to_uniform_f32(0xffffffffu));
    cr_assert(ldt__rand_u32_to_uniform_f32(0x000000ffu) == 0.0f, "low 8 bits are dropped");
    cr_assert(ldt__rand_u32_to_open_f32(0) == 0x1p-33f, "bottom: %.9g",
              (double)ldt__rand_u32_to_open_f32(0));
    cr_assert(ldt__rand_u32_to_open_f32(0xffffffffu) == 1.0f);
    {
        float za, zb;
        ldt__rand_box_muller_f32(0, 0x40000000u, &za, &zb); /* radius max, angle pi/2 */
        cr_assert(isfinite(za) && fabs(zb - sqrt(66 * log(2.0))) < 1e-5, "z = %.9g %.9g",
                  (double)za, (double)zb);
        ldt__rand_box_muller_f32(0xffffffffu, 0x12345678u, &za, &zb); /* v0 rounds to 1 */
        cr_assert(za == 0.0f && zb == 0.0f, "z = %.9g %.9g", (double)za, (double)zb);
    }
    /* lo 1, hi 2, u = 1 - 2^-24: 1 + (1 - 2^-24) rounds to 2, clamped to 2 - 2^-23 */
    {
        float v = ldt__rand_uniform_scale_f32(1.0f - 0x1p-24f, 1.0f, 2.0f);
        cr_assert(v == 2.0f - 0x1p-23f, "scale(1-2^-24, 1, 2) = %.9g", (double)v);
    }
    cr_assert(ldt__rand_uniform_scale_f32(0.0f, -3.0f, 5.0f) == -3.0f);
    cr_assert(ldt__rand_uniform_scale_f32(0.25f, -3.0f, 5.0f) == -1.0f);
    cr_assert(ldt__rand_uniform_scale_f32(0.5f, 0.0f, 1.0f) == 0.5f);
    cr_assert(ldt__rand_f32_below(1.0f) == nextafterf(1.0f, 0.0f));
    cr_assert(ldt__rand_f32_below(-1.0f) == nextafterf(-1.0f, -2.0f));
    cr_assert(ldt__rand_f32_below(0.0f) == -FLT_TRUE_MIN);
    {
        float v = ldt__rand_uniform_scale_f32(1.0f - 0x1p-24f, -1.0f, 0.0f);
        cr_assert(v < 0.0f, "scale(1-2^-24, -1, 0) = %.9g", (double)v);
    }
}

/* Each normal is Box-Muller on its block's lane pair: recomputed in double from the raw words
 * (after the f32 v = ((float)x + 0.5f) * 2^-32 of the definition), within 1e-5 of the radius. */
Test(stream, box_muller_matches_double) {
    uint64_t rng = 5;
    int cases = ldt_test_cases(20000);
    for (int c = 0; c < cases; c++) {
        uint64_t seed = ldt_test_rand(&rng), offset = ldt_test_rand(&rng);
        int64_t i = c % 2 ? (int64_t)(ldt_test_rand(&rng) >> 1) : ldt_test_range(&rng, 0, 1000);
        int lane = (int)(i % 4), pair = lane & 2;
        uint32_t xa = ldt__rand_u32(seed, offset, i - lane + pair);
        uint32_t xb = ldt__rand_u32(seed, offset, i - lane + pair + 1);
        double va = ldt__rand_u32_to_open_f32(xa), vb = ldt__rand_u32_to_open_f32(xb);
        double r = sqrt(-2.0 * log(va)), t = TWO_PI * vb;
        double want = lane & 1 ? r * sin(t) : r * cos(t);
        float got = ldt__rand_normal_f32(seed, offset, i);
        /* v is (x + 0.5) * 2^-32 up to two f32 roundings (of x, of the sum) */
        cr_assert(fabs(va - ((double)xa + 0.5) * 0x1p-32) <= 0x1p-23 * va,
                  "v(%08x) = %.9g, (x + 0.5) * 2^-32 = %.9g", xa, va, ((double)xa + 0.5) * 0x1p-32);
        cr_assert(fabs(got - want) <= 1e-5 * r, "case %d i=%lld words %08x %08x: normal %.9g, "
                  "double gives %.9g (radius %.6g)", c, (long long)i, xa, xb, (double)got, want, r);
    }
}

Test(stream, offset_advance) {
    static const struct {
        int64_t numel;
        uint64_t adv;
    } t[] = {{0, 0},         {1, 1},     {3, 1}, {4, 1},
             {5, 2},         {8, 2},     {9, 3}, {1000001, 250001},
             {INT64_MAX, 1ull << 61},    {-5, 0}};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        uint64_t a = ldt__rand_offset_advance(t[k].numel);
        cr_assert_eq(a, t[k].adv, "advance(%lld) = %llu, want %llu", (long long)t[k].numel,
                     (unsigned long long)a, (unsigned long long)t[k].adv);
    }
    uint64_t rng = 3;
    int cases = ldt_test_cases(1000);
    for (int c = 0; c < cases; c++) {
        int64_t n = (int64_t)(ldt_test_rand(&rng) >> (1 + c % 63));
        uint64_t a = ldt__rand_offset_advance(n);
        /* the blocks an op of n elements touches: j = 0 .. a-1 */
        cr_assert(n == 0 ? a == 0 : (a - 1) == (uint64_t)(n - 1) / 4,
                  "advance(%lld) = %llu, last block %llu", (long long)n, (unsigned long long)a,
                  (unsigned long long)((n - 1) / 4));
    }
}

/* The next op (offset advanced) draws a different stream. */
Test(stream, offsets_give_fresh_streams) {
    float a[256], b[256];
    int same = 0;
    uint64_t off = 1000;
    ldt__rand_fill_uniform_f32(a, 9, off, 0, 256, 0.0f, 1.0f);
    ldt__rand_fill_uniform_f32(b, 9, off + ldt__rand_offset_advance(256), 0, 256, 0.0f, 1.0f);
    for (int k = 0; k < 256; k++) same += a[k] == b[k];
    cr_assert(same < 4, "%d of 256 uniforms equal after the offset advanced", same);
    ldt__rand_fill_uniform_f32(b, 10, off, 0, 256, 0.0f, 1.0f);
    same = 0;
    for (int k = 0; k < 256; k++) same += a[k] == b[k];
    cr_assert(same < 4, "%d of 256 uniforms equal under another seed", same);
}
