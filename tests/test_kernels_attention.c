/* CPU scaled dot-product attention against a naive f64 reference (scores, causal mask, softmax,
 * dropout on the weights, product, all by hand), hand-checked rows, and the error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "core/ops.h"
#include "kernels/common/nn_math.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static const ldt_dtype k_floats[4] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16};

static int64_t numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

static ldt__operand opnd(ldt_dtype t, ldt_shape s) {
    ldt__operand o;
    int64_t n = numel(&s);
    o.data = calloc((size_t)(n ? n : 1), ldt_dtype_size(t));
    cr_assert(o.data != NULL);
    o.shape = s;
    o.dtype = t;
    return o;
}

static void put(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt__f64_to_f16_once(v); break;
    default: ((uint16_t *)p)[i] = ldt__f64_to_bf16_once(v); break;
    }
}

static double get(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    default: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void fill(uint64_t *rng, ldt__operand *o, double scale) {
    int64_t n = numel(&o->shape);
    for (int64_t i = 0; i < n; i++)
        put(o->dtype, o->data, i, scale * ((double)(ldt_test_rand(rng) >> 11) * 0x1p-52 - 1.0));
}

static double half_ulp(ldt_dtype t, double v) {
    uint16_t h = t == LDT_F16 ? ldt__f64_to_f16_once(fabs(v)) : ldt__f64_to_bf16_once(fabs(v));
    uint16_t h1 = (uint16_t)(h + 1);
    double a = t == LDT_F16 ? ldt__f16_to_f32(h) : ldt__bf16_to_f32(h);
    double b = t == LDT_F16 ? ldt__f16_to_f32(h1) : ldt__bf16_to_f32(h1);
    return b - a;
}

/* f64 1e-12 relative (1e-13 absolute); f32 1e-5 relative (1e-6 absolute); halves within 1 ulp
 * of the reference rounded to the half type. */
static int close_to(ldt_dtype t, double got, double want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    switch (t) {
    case LDT_F64: return fabs(got - want) <= 1e-12 * fabs(want) + 1e-13;
    case LDT_F32: return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
    default: {
        uint16_t h = t == LDT_F16 ? ldt__f64_to_f16_once(want) : ldt__f64_to_bf16_once(want);
        double r = get(t, &h, 0);
        return fabs(got - r) <= half_ulp(t, r);
    }
    }
}

/* One attention problem: q [B.., Lq, E], k [B.., Lk, E], v [B.., Lk, Ev]. */
typedef struct prob {
    ldt_dtype t;
    ldt_shape batch; /* the leading dims */
    int64_t Lq, Lk, E, Ev;
    int causal;
    double p, scale;
    uint64_t seed, offset;
} prob;

static ldt_shape with2(ldt_shape b, int64_t x, int64_t y) {
    b.dims[b.ndim++] = x;
    b.dims[b.ndim++] = y;
    return b;
}

static ldt__attrs attrs_of(const prob *pr) {
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = (int64_t)pr->seed;
    a.i[1] = (int64_t)pr->offset;
    a.i[2] = pr->causal;
    a.f[0] = pr->p;
    a.f[1] = pr->scale;
    return a;
}

/* Runs the kernel on in[3] into a new output; the caller frees it. */
static ldt__operand run(const prob *pr, const ldt__operand *in) {
    ldt__attrs a = attrs_of(pr);
    ldt__operand out = opnd(pr->t, with2(pr->batch, pr->Lq, pr->Ev));
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = LDT_OP_SDPA;
    c.attrs = &a;
    c.nin = 3;
    c.in = in;
    c.out = out;
    cr_assert_eq(ldt__k_attention(&c), LDT_OK, "%s", ldt_last_error());
    return out;
}

/* The naive reference, in f64 from the stored inputs: for each batch and query row the full
 * score row, the mask (j > i is out), softmax with the max subtracted, dropout of weight j by
 * its index (b*Lq + i)*Lk + j in [B.., Lq, Lk], then the weighted sum of v rows. */
static double *reference(const prob *pr, const ldt__operand *in) {
    int64_t B = numel(&pr->batch), Lq = pr->Lq, Lk = pr->Lk, E = pr->E, Ev = pr->Ev;
    double *out = calloc((size_t)(B * Lq * Ev + 1), sizeof(double));
    double *s = malloc((size_t)(Lk + 1) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Lq; i++) {
            double mx = -INFINITY, z = 0;
            for (int64_t j = 0; j < Lk; j++) {
                double dot = 0;
                for (int64_t e = 0; e < E; e++)
                    dot += get(pr->t, in[0].data, (b * Lq + i) * E + e) *
                           get(pr->t, in[1].data, (b * Lk + j) * E + e);
                s[j] = (pr->causal && j > i) ? -INFINITY : dot * pr->scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int64_t j = 0; j < Lk; j++) {
                s[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx);
                z += s[j];
            }
            for (int64_t j = 0; j < Lk; j++) {
                s[j] /= z;
                if (pr->p > 0 &&
                    ldt__rand_bernoulli(pr->seed, pr->offset, (b * Lq + i) * Lk + j, pr->p))
                    s[j] = 0;
                else if (pr->p > 0)
                    s[j] /= 1 - pr->p;
            }
            for (int64_t e = 0; e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < Lk; j++)
                    o += s[j] * get(pr->t, in[2].data, (b * Lk + j) * Ev + e);
                out[(b * Lq + i) * Ev + e] = o;
            }
        }
    free(s);
    return out;
}

static void make_inputs(uint64_t *rng, const prob *pr, ldt__operand in[3], double amp) {
    in[0] = opnd(pr->t, with2(pr->batch, pr->Lq, pr->E));
    in[1] = opnd(pr->t, with2(pr->batch, pr->Lk, pr->E));
    in[2] = opnd(pr->t, with2(pr->batch, pr->Lk, pr->Ev));
    for (int i = 0; i < 3; i++) fill(rng, &in[i], amp);
}

/* Compares the kernel with the reference; returns the number of values that differ (printing
 * the first few). */
static int compare(const char *what, const prob *pr, const ldt__operand *in) {
    ldt__operand out = run(pr, in);
    double *want = reference(pr, in);
    int64_t n = numel(&out.shape);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = get(pr->t, out.data, i);
        if (!close_to(pr->t, got, want[i]) && bad++ < 5)
            cr_expect(0,
                      "%s: %s batch %s Lq %lld Lk %lld E %lld Ev %lld causal %d p %g scale %g: "
                      "[%lld] = %.9g, want %.9g",
                      what, ldt_dtype_name(pr->t), ldt_test_fmt_shape(&pr->batch),
                      (long long)pr->Lq, (long long)pr->Lk, (long long)pr->E, (long long)pr->Ev,
                      pr->causal, pr->p, pr->scale, (long long)i, got, want[i]);
    }
    free(want);
    free(out.data);
    return bad;
}

Test(attention, matches_reference) {
    uint64_t rng = 3;
    int cases = ldt_test_cases(250), bad = 0;
    for (int cs = 0; cs < cases; cs++) {
        prob pr;
        memset(&pr, 0, sizeof pr);
        pr.t = k_floats[cs % 4];
        pr.batch.ndim = (int)ldt_test_range(&rng, 0, 2);
        for (int d = 0; d < pr.batch.ndim; d++) pr.batch.dims[d] = ldt_test_range(&rng, 1, 3);
        pr.Lq = ldt_test_range(&rng, 1, 9);
        pr.Lk = ldt_test_range(&rng, cs % 31 ? 1 : 0, 9);
        pr.E = ldt_test_range(&rng, cs % 37 ? 1 : 0, 8);
        pr.Ev = ldt_test_range(&rng, 1, 6);
        pr.causal = (cs / 4) % 2;
        pr.p = cs % 3 == 0 ? 0.25 : 0;
        pr.scale = cs % 5 ? 1 / sqrt((double)(pr.E ? pr.E : 1)) : 0.3;
        pr.seed = ldt_test_rand(&rng);
        pr.offset = ldt_test_rand(&rng) >> 20;
        ldt__operand in[3];
        make_inputs(&rng, &pr, in, 1.5);
        char what[32];
        snprintf(what, sizeof what, "case %d", cs);
        bad += compare(what, &pr, in);
        for (int i = 0; i < 3; i++) free(in[i].data);
    }
    cr_expect_eq(bad, 0, "%d values differ", bad);
}

/* More query rows than one block (64), causal and not, so blocks and the causal key limit per
 * block are exercised; with and without dropout. */
Test(attention, long_sequences) {
    uint64_t rng = 4;
    const int64_t L[3][2] = {{150, 150}, {130, 70}, {65, 200}};
    int bad = 0;
    for (int di = 0; di < 4; di++)
        for (int li = 0; li < 3; li++)
            for (int causal = 0; causal < 2; causal++) {
                prob pr;
                memset(&pr, 0, sizeof pr);
                pr.t = k_floats[di];
                pr.batch = ldt_test_shape(1, 2);
                pr.Lq = L[li][0];
                pr.Lk = L[li][1];
                pr.E = 16;
                pr.Ev = 8;
                pr.causal = causal;
                pr.p = li == 1 ? 0.1 : 0;
                pr.scale = 0.25;
                pr.seed = 99;
                pr.offset = 1000;
                ldt__operand in[3];
                make_inputs(&rng, &pr, in, 1);
                bad += compare("long", &pr, in);
                for (int i = 0; i < 3; i++) free(in[i].data);
            }
    cr_expect_eq(bad, 0, "%d values differ", bad);
}

/* Under the causal mask query 0 sees key 0 only: its weight is exactly 1 and its output row
 * is v[0] exactly, in every dtype, whatever Lk is. */
Test(attention, causal_row0_is_v0) {
    uint64_t rng = 8;
    for (int di = 0; di < 4; di++)
        for (int64_t Lk = 1; Lk <= 9; Lk += 4) {
            prob pr;
            memset(&pr, 0, sizeof pr);
            pr.t = k_floats[di];
            pr.batch = ldt_test_shape(2, 2, 3);
            pr.Lq = 5;
            pr.Lk = Lk;
            pr.E = 4;
            pr.Ev = 3;
            pr.causal = 1;
            pr.scale = 0.5;
            ldt__operand in[3];
            make_inputs(&rng, &pr, in, 3);
            ldt__operand out = run(&pr, in);
            for (int64_t b = 0; b < 6; b++)
                for (int64_t e = 0; e < pr.Ev; e++) {
                    double got = get(pr.t, out.data, b * pr.Lq * pr.Ev + e);
                    double want = get(pr.t, in[2].data, b * pr.Lk * pr.Ev + e);
                    cr_expect_eq(got, want, "%s Lk %lld batch %lld: out[0][%lld] = %.9g, v[0] = %.9g",
                                 ldt_dtype_name(pr.t), (long long)Lk, (long long)b, (long long)e,
                                 got, want);
                }
            free(out.data);
            for (int i = 0; i < 3; i++) free(in[i].data);
        }
}

/* Dropout p = 0 is no dropout whatever the seed, bitwise; p = 1 drops every weight. */
Test(attention, dropout_p0_and_p1) {
    uint64_t rng = 12;
    for (int di = 0; di < 4; di++) {
        prob pr;
        memset(&pr, 0, sizeof pr);
        pr.t = k_floats[di];
        pr.batch = ldt_test_shape(1, 3);
        pr.Lq = 7;
        pr.Lk = 6;
        pr.E = 5;
        pr.Ev = 4;
        pr.causal = di % 2;
        pr.scale = 0.4;
        ldt__operand in[3];
        make_inputs(&rng, &pr, in, 2);
        ldt__operand plain = run(&pr, in);
        pr.seed = 1234567;
        pr.offset = 89;
        ldt__operand p0 = run(&pr, in);
        size_t bytes = (size_t)numel(&plain.shape) * ldt_dtype_size(pr.t);
        cr_expect(memcmp(plain.data, p0.data, bytes) == 0, "%s: p = 0 with a seed differs",
                  ldt_dtype_name(pr.t));
        pr.p = 1;
        ldt__operand p1 = run(&pr, in);
        for (int64_t i = 0; i < numel(&p1.shape); i++)
            cr_expect_eq(get(pr.t, p1.data, i), 0.0, "%s p = 1: [%lld] = %g", ldt_dtype_name(pr.t),
                         (long long)i, get(pr.t, p1.data, i));
        free(plain.data);
        free(p0.data);
        free(p1.data);
        for (int i = 0; i < 3; i++) free(in[i].data);
    }
}

/* Scores in the thousands stay finite: the max is subtracted, and the row takes the v of its
 * best key. */
Test(attention, huge_scores_are_stable) {
    const ldt_dtype ts[3] = {LDT_F32, LDT_F64, LDT_F16};
    for (int di = 0; di < 3; di++) {
        prob pr;
        memset(&pr, 0, sizeof pr);
        pr.t = ts[di];
        pr.Lq = 2;
        pr.Lk = 3;
        pr.E = 1;
        pr.Ev = 2;
        pr.scale = 1;
        ldt__operand in[3];
        const double q[2] = {40, -40}, k[3] = {25, 50, -50}, v[6] = {1, 2, 3, 4, 5, 6};
        in[0] = opnd(pr.t, ldt_test_shape(2, 2, 1));
        in[1] = opnd(pr.t, ldt_test_shape(2, 3, 1));
        in[2] = opnd(pr.t, ldt_test_shape(2, 3, 2));
        for (int i = 0; i < 2; i++) put(pr.t, in[0].data, i, q[i]);
        for (int i = 0; i < 3; i++) put(pr.t, in[1].data, i, k[i]);
        for (int i = 0; i < 6; i++) put(pr.t, in[2].data, i, v[i]);
        ldt__operand out = run(&pr, in); /* scores 1000, 2000, -2000 and -1000, -2000, 2000 */
        const double want[4] = {3, 4, 5, 6};
        for (int i = 0; i < 4; i++)
            cr_expect_eq(get(pr.t, out.data, i), want[i], "%s [%d] = %.9g, want %g",
                         ldt_dtype_name(pr.t), i, get(pr.t, out.data, i), want[i]);
        free(out.data);
        for (int i = 0; i < 3; i++) free(in[i].data);
    }
}

/* ---------------------------------------------------------------------------------------
 * Errors.
 */
static ldt_status call3(ldt_dtype tq, ldt_shape qs, ldt_shape ks, ldt_shape vs, ldt_shape os,
                        ldt_dtype tk, double p, const ldt_region *region) {
    static char buf[4][4096];
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.f[0] = p;
    a.f[1] = 1;
    ldt__operand in[3] = {{buf[0], qs, tq}, {buf[1], ks, tk}, {buf[2], vs, tq}};
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = LDT_OP_SDPA;
    c.attrs = &a;
    c.nin = 3;
    c.in = in;
    c.out = (ldt__operand){buf[3], os, tq};
    c.region = region;
    return ldt__k_attention(&c);
}

static void expect_error(ldt_status got, ldt_status want, const char *part) {
    cr_expect_eq(got, want, "%s: status %d, %s", part, got, ldt_last_error());
    cr_expect(strstr(ldt_last_error(), part) != NULL, "want \"%s\" in \"%s\"", part,
              ldt_last_error());
}

Test(attention, errors) {
    ldt_shape q = ldt_test_shape(3, 2, 4, 8), k = ldt_test_shape(3, 2, 5, 8),
              v = ldt_test_shape(3, 2, 5, 3), o = ldt_test_shape(3, 2, 4, 3);
    cr_expect_eq(call3(LDT_F32, q, k, v, o, LDT_F32, 0, NULL), LDT_OK, "%s", ldt_last_error());
    const ldt_dtype ints[4] = {LDT_I32, LDT_I64, LDT_U8, LDT_BOOL};
    for (int i = 0; i < 4; i++) {
        char want[80];
        snprintf(want, sizeof want, "scaled_dot_product_attention: dtype %s is not supported",
                 ldt_dtype_name(ints[i]));
        expect_error(call3(ints[i], q, k, v, o, ints[i], 0, NULL), LDT_ERR_UNSUPPORTED, want);
    }
    expect_error(call3(LDT_F32, q, k, v, o, LDT_F16, 0, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "are f32 f16 f32 f32; expected one dtype");
    expect_error(call3(LDT_F32, q, ldt_test_shape(3, 3, 5, 8), v, o, LDT_F32, 0, NULL),
                 LDT_ERR_INVALID_ARGUMENT, "q [2,4,8], k [3,5,8], v [2,5,3], output [2,4,3]");
    expect_error(call3(LDT_F32, q, ldt_test_shape(3, 2, 5, 7), v, o, LDT_F32, 0, NULL),
                 LDT_ERR_INVALID_ARGUMENT, "k [2,5,7]");
    expect_error(call3(LDT_F32, q, k, ldt_test_shape(3, 2, 6, 3), o, LDT_F32, 0, NULL),
                 LDT_ERR_INVALID_ARGUMENT, "v [2,6,3]");
    expect_error(call3(LDT_F32, q, k, v, ldt_test_shape(3, 2, 4, 8), LDT_F32, 0, NULL),
                 LDT_ERR_INVALID_ARGUMENT, "output [2,4,8]");
    expect_error(call3(LDT_F32, ldt_test_shape(1, 8), k, v, o, LDT_F32, 0, NULL),
                 LDT_ERR_INVALID_ARGUMENT, "q [8]");
    expect_error(call3(LDT_F32, q, k, v, o, LDT_F32, 1.5, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "dropout p = 1.5");
    /* a shard: fine without dropout, refused with it (the mask needs global indices) */
    ldt_region r;
    memset(&r, 0, sizeof r);
    cr_expect_eq(call3(LDT_F32, q, k, v, o, LDT_F32, 0, &r), LDT_OK, "%s", ldt_last_error());
    expect_error(call3(LDT_F32, q, k, v, o, LDT_F32, 0.5, &r), LDT_ERR_UNSUPPORTED,
                 "dropout on a shard");
}
