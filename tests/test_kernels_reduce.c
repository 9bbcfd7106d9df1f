/* CPU reduction kernels against naive references and hand-computed cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "core/ops.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static const ldt_dtype k_all[8] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                   LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};

#define S(...)                                                                                     \
    shp((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define S0 ((ldt_shape){0, {0}})

static ldt_shape shp(int ndim, const int64_t *dims) {
    ldt_shape s = {ndim, {0}};
    for (int d = 0; d < ndim; d++) s.dims[d] = dims[d];
    return s;
}

static int64_t numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Values of any dtype as double (floats, exactly) or int64 (integers).
 */
static double getf(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static int64_t geti(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return ((const int64_t *)p)[i];
    case LDT_U8:
    case LDT_BOOL: return ((const uint8_t *)p)[i];
    default: return (int64_t)getf(t, p, i);
    }
}

static void setv(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt__f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)v); break;
    case LDT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case LDT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case LDT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

static int isf(ldt_dtype t) { return ldt_dtype_is_float(t); }

/* A buffer of n elements of t: values from `given`, or random small values with many ties
 * (eighths in [-4, 4] for floats, [0, 9] for integers, 0/1 for bool), NaN at rate 1/nan_every
 * for floats when nan_every > 0. */
static void *mkbuf(ldt_dtype t, int64_t n, uint64_t *rng, const double *given, int nan_every) {
    void *p = calloc((size_t)(n ? n : 1), 8);
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (given)
            v = given[i];
        else if (isf(t)) {
            v = nan_every > 0 && ldt_test_range(rng, 0, nan_every - 1) == 0
                    ? NAN
                    : (double)ldt_test_range(rng, -32, 32) / 8.0;
        } else
            v = (double)ldt_test_range(rng, 0, t == LDT_BOOL ? 1 : 9);
        setv(t, p, i, v);
    }
    return p;
}

/* double -> f16/bf16 rounded once, independently of the library: the quantum of d's binade
 * and nearbyint (round half to even). */
static double round_half_ref(ldt_dtype t, double d) {
    if (d == 0 || !isfinite(d)) return d;
    int ex;
    frexp(d, &ex);
    int bits = t == LDT_F16 ? 11 : 8, emin = t == LDT_F16 ? -24 : -133;
    int qe = ex - bits < emin ? emin : ex - bits;
    double r = ldexp(nearbyint(ldexp(d, -qe)), qe);
    if (t == LDT_F16 && fabs(r) >= 65536.0) return copysign(INFINITY, d);
    return r;
}

static int32_t half_ord(uint16_t h) {
    int32_t mag = h & 0x7fff;
    return (h & 0x8000) ? -mag : mag;
}

static ldt_status call(int op, ldt_dtype t, ldt_shape s, void *data, const int64_t *attrs,
                       ldt_dtype ot, ldt_shape os, void *out) {
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < 4; k++) a.i[k] = attrs[k];
    ldt__operand in = {data, s, t};
    ldt__kcall c = {op, &a, 1, &in, {out, os, ot}, NULL, NULL, NULL};
    if (op == LDT_OP_SUM || op == LDT_OP_MEAN || op == LDT_OP_AMAX || op == LDT_OP_AMIN)
        return ldt__k_reduce(&c);
    return ldt__k_index_reduce(&c);
}

static ldt_shape reduced_shape(ldt_shape s, uint64_t mask, int keepdim) {
    ldt_shape o = {0, {0}};
    for (int d = 0; d < s.ndim; d++) {
        if (!((mask >> d) & 1))
            o.dims[o.ndim++] = s.dims[d];
        else if (keepdim)
            o.dims[o.ndim++] = 1;
    }
    return o;
}

/* ---------------------------------------------------------------------------------------
 * sum / mean / amax / amin reference: every input element, by its multi-index, goes to the
 * output element of its kept dims.
 */
typedef struct ref_out {
    double *f, *mag; /* float results and sum|terms| */
    uint64_t *u;     /* integer sums (wrapping) and int amax/amin */
    int64_t n, count;
} ref_out;

static ref_out ref_reduce(int op, ldt_dtype t, ldt_shape s, const void *x, uint64_t mask) {
    ref_out r;
    ldt_shape os = reduced_shape(s, mask, 0);
    r.n = numel(&os);
    r.count = numel(&s) / (r.n ? r.n : 1);
    if (r.n == 0) { /* count is the product of the reduced dims */
        r.count = 1;
        for (int d = 0; d < s.ndim; d++)
            if ((mask >> d) & 1) r.count *= s.dims[d];
    }
    r.f = calloc((size_t)r.n + 1, sizeof(double));
    r.mag = calloc((size_t)r.n + 1, sizeof(double));
    r.u = calloc((size_t)r.n + 1, sizeof(uint64_t));
    char *seen = calloc((size_t)r.n + 1, 1);
    int64_t total = numel(&s);
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, oi = 0, mul = 1;
        for (int d = s.ndim - 1; d >= 0; d--) {
            int64_t id = rem % s.dims[d];
            rem /= s.dims[d];
            if (!((mask >> d) & 1)) {
                oi += id * mul;
                mul *= s.dims[d];
            }
        }
        if (isf(t)) {
            double v = getf(t, x, i);
            if (op == LDT_OP_SUM || op == LDT_OP_MEAN) {
                r.f[oi] += v;
                r.mag[oi] += fabs(v);
            } else if (!seen[oi] || isnan(v) ||
                       (!isnan(r.f[oi]) && (op == LDT_OP_AMAX ? v > r.f[oi] : v < r.f[oi]))) {
                r.f[oi] = v;
            }
        } else {
            int64_t v = geti(t, x, i);
            if (op == LDT_OP_SUM)
                r.u[oi] += (uint64_t)v;
            else if (!seen[oi] || (op == LDT_OP_AMAX ? v > (int64_t)r.u[oi] : v < (int64_t)r.u[oi]))
                r.u[oi] = (uint64_t)v;
        }
        seen[oi] = 1;
    }
    if (op == LDT_OP_MEAN)
        for (int64_t i = 0; i < r.n; i++) {
            r.f[i] /= (double)r.count;
            r.mag[i] /= (double)r.count;
        }
    free(seen);
    return r;
}

static void ref_free(ref_out *r) {
    free(r->f);
    free(r->mag);
    free(r->u);
}

/* Float results: f32 within 1e-5 * sum|terms|, f64 1e-12 * that, halves within 1 ulp of the
 * reference rounded once; NaN where the reference is NaN; infinities exactly. */
static int close_float(ldt_dtype t, double got, const void *outp, int64_t i, double want,
                       double mag) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    if (t == LDT_F32 || t == LDT_F64)
        return fabs(got - want) <= (t == LDT_F32 ? 1e-5 : 1e-12) * mag;
    uint16_t gb = ((const uint16_t *)outp)[i];
    float w = (float)round_half_ref(t, want);
    uint16_t wb = t == LDT_F16 ? ldt__f32_to_f16(w) : ldt__f32_to_bf16(w);
    return abs(half_ord(gb) - half_ord(wb)) <= 1;
}

static const char *opname(int op) {
    switch (op) {
    case LDT_OP_SUM: return "sum";
    case LDT_OP_MEAN: return "mean";
    case LDT_OP_AMAX: return "amax";
    case LDT_OP_AMIN: return "amin";
    case LDT_OP_ARGMAX: return "argmax";
    case LDT_OP_ARGMIN: return "argmin";
    case LDT_OP_TOPK_VALUES: return "topk_values";
    default: return "topk_indices";
    }
}

/* Runs one reduction and compares every element; amax/amin must match exactly. */
static void check_reduce(int op, ldt_dtype t, ldt_shape s, const void *x, uint64_t mask, int keep) {
    ldt_dtype ot = (op == LDT_OP_SUM && !isf(t)) ? LDT_I64 : t;
    ldt_shape os = reduced_shape(s, mask, keep);
    ref_out r = ref_reduce(op, t, s, x, mask);
    void *out = calloc((size_t)r.n + 1, 8);
    memset(out, 0x55, (size_t)r.n * ldt_dtype_size(ot)); /* every element must be written */
    int64_t attrs[4] = {(int64_t)mask, keep, 0, 0};
    char sh[64];
    ldt_shape_format(&s, sh, sizeof sh);
    ldt_status st = call(op, t, s, (void *)x, attrs, ot, os, out);
    cr_assert_eq(st, LDT_OK, "%s %s %s mask 0x%llx keep %d: %s", opname(op), ldt_dtype_name(t), sh,
                 (unsigned long long)mask, keep, ldt_last_error());
    int bad = 0;
    for (int64_t i = 0; i < r.n; i++) {
        int ok;
        double g = getf(ot, out, i), w;
        if (isf(t)) {
            w = r.f[i];
            ok = op == LDT_OP_SUM || op == LDT_OP_MEAN ? close_float(t, g, out, i, w, r.mag[i])
                                                       : (isnan(w) ? isnan(g) : g == w);
        } else {
            int64_t gi = geti(ot, out, i), wi = (int64_t)r.u[i];
            if (op != LDT_OP_SUM && ot == LDT_U8) wi = (uint8_t)wi;
            ok = gi == wi;
            w = (double)wi;
        }
        if (!ok && bad++ < 8)
            fprintf(stderr, "%s %s %s mask 0x%llx keep %d: element %lld got %.17g want %.17g\n",
                    opname(op), ldt_dtype_name(t), sh, (unsigned long long)mask, keep, (long long)i,
                    g, w);
    }
    cr_assert_eq(bad, 0, "%s %s %s mask 0x%llx: %d of %lld elements differ", opname(op),
                 ldt_dtype_name(t), sh, (unsigned long long)mask, bad, (long long)r.n);
    free(out);
    ref_free(&r);
}

/* ---------------------------------------------------------------------------------------
 * Hand-computed reductions.
 */
Test(reduce, hand_2x3) {
    /* x = [1 2 3; 4 5 6] */
    static const double x[6] = {1, 2, 3, 4, 5, 6};
    const struct {
        int op;
        uint64_t mask;
        int keep;
        ldt_shape os;
        double want[3];
    } cases[] = {
        {LDT_OP_SUM, 1, 0, S(3), {5, 7, 9}},
        {LDT_OP_SUM, 1, 1, S(1, 3), {5, 7, 9}},
        {LDT_OP_SUM, 2, 0, S(2), {6, 15}},
        {LDT_OP_SUM, 2, 1, S(2, 1), {6, 15}},
        {LDT_OP_SUM, 3, 0, S0, {21}},
        {LDT_OP_SUM, 3, 1, S(1, 1), {21}},
        {LDT_OP_SUM, 0, 0, S(2, 3), {1, 2, 3}},
        {LDT_OP_MEAN, 2, 0, S(2), {2, 5}},
        {LDT_OP_MEAN, 1, 1, S(1, 3), {2.5, 3.5, 4.5}},
        {LDT_OP_MEAN, 3, 0, S0, {3.5}},
        {LDT_OP_AMAX, 1, 0, S(3), {4, 5, 6}},
        {LDT_OP_AMAX, 2, 1, S(2, 1), {3, 6}},
        {LDT_OP_AMIN, 2, 1, S(2, 1), {1, 4}},
        {LDT_OP_AMIN, 3, 0, S0, {1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int di = 0; di < 7; di++) {
            ldt_dtype t = k_all[di];
            if (cases[k].op == LDT_OP_MEAN && !isf(t)) continue;
            ldt_dtype ot = cases[k].op == LDT_OP_SUM && !isf(t) ? LDT_I64 : t;
            void *in = mkbuf(t, 6, NULL, x, 0), *out = calloc(6, 8);
            int64_t attrs[4] = {(int64_t)cases[k].mask, cases[k].keep, 0, 0};
            cr_assert_eq(call(cases[k].op, t, S(2, 3), in, attrs, ot, cases[k].os, out), LDT_OK,
                         "%s", ldt_last_error());
            int64_t n = numel(&cases[k].os);
            for (int64_t i = 0; i < n && i < 3; i++)
                cr_assert(getf(ot, out, i) == cases[k].want[i],
                          "%s %s mask %llu keep %d: element %lld = %g, want %g",
                          opname(cases[k].op), ldt_dtype_name(t), (unsigned long long)cases[k].mask,
                          cases[k].keep, (long long)i, getf(ot, out, i), cases[k].want[i]);
            free(in);
            free(out);
        }
}

/* f64 sums are compensated (Neumaier): 1e16 + 1 + 1 + 1 + 1 - 1e16 is 4, where a plain
 * double loop gives 0; along the last dim and along a non-last dim. */
Test(reduce, compensated_f64_sum) {
    static const double x[6] = {1e16, 1, 1, 1, 1, -1e16};
    double out[1];
    int64_t attrs[4] = {1, 0, 0, 0};
    cr_assert_eq(call(LDT_OP_SUM, LDT_F64, S(6), (void *)x, attrs, LDT_F64, S0, out), LDT_OK);
    cr_assert(out[0] == 4.0, "sum along the last dim: %.17g, want 4", out[0]);
    cr_assert_eq(call(LDT_OP_SUM, LDT_F64, S(6, 1), (void *)x, attrs, LDT_F64, S(1), out), LDT_OK);
    cr_assert(out[0] == 4.0, "sum along dim 0 of [6,1]: %.17g, want 4", out[0]);
    double x2[12];
    for (int i = 0; i < 6; i++) x2[2 * i] = x2[2 * i + 1] = x[i]; /* [6, 2], columns */
    double o2[2];
    cr_assert_eq(call(LDT_OP_SUM, LDT_F64, S(6, 2), x2, attrs, LDT_F64, S(2), o2), LDT_OK);
    cr_assert(o2[0] == 4.0 && o2[1] == 4.0, "column sums: %.17g %.17g, want 4 4", o2[0], o2[1]);
    cr_assert_eq(call(LDT_OP_MEAN, LDT_F64, S(6, 2), x2, attrs, LDT_F64, S(2), o2), LDT_OK);
    cr_assert(o2[0] == 4.0 / 6.0, "column mean: %.17g, want 4/6", o2[0]);
}

/* Halves are rounded once from the double sum: 1 + 2^-8 + 2^-40 is just above a bf16 tie
 * and rounds up to 1 + 2^-7; through f32 first it would be a tie and round to 1. Likewise
 * f16: 1 + 2^-11 + 2^-24 -> 1 + 2^-10. */
Test(reduce, halves_rounded_once) {
    const double xb[3] = {1, ldexp(1, -8), ldexp(1, -40)},
                 xh[3] = {1, ldexp(1, -11), ldexp(1, -24)};
    int64_t attrs[4] = {1, 0, 0, 0};
    void *b = mkbuf(LDT_BF16, 3, NULL, xb, 0), *h = mkbuf(LDT_F16, 3, NULL, xh, 0);
    uint16_t out;
    cr_assert_eq(call(LDT_OP_SUM, LDT_BF16, S(3), b, attrs, LDT_BF16, S0, &out), LDT_OK);
    cr_assert(ldt__bf16_to_f32(out) == 1 + ldexp(1, -7), "bf16 sum: %.10g, want 1 + 2^-7",
              (double)ldt__bf16_to_f32(out));
    cr_assert_eq(call(LDT_OP_SUM, LDT_F16, S(3), h, attrs, LDT_F16, S0, &out), LDT_OK);
    cr_assert(ldt__f16_to_f32(out) == 1 + ldexp(1, -10), "f16 sum: %.10g, want 1 + 2^-10",
              (double)ldt__f16_to_f32(out));
    free(b);
    free(h);
}

Test(reduce, nan_and_inf) {
    const double nan = NAN, inf = INFINITY;
    /* rows: [1 nan 3] [inf 1 2] [inf -inf 0] [-inf -inf 5] */
    const double x[12] = {1, nan, 3, inf, 1, 2, inf, -inf, 0, -inf, -inf, 5};
    int64_t attrs[4] = {2, 0, 0, 0};
    double sum[4], mx[4], mn[4];
    cr_assert_eq(call(LDT_OP_SUM, LDT_F64, S(4, 3), (void *)x, attrs, LDT_F64, S(4), sum), LDT_OK);
    cr_assert_eq(call(LDT_OP_AMAX, LDT_F64, S(4, 3), (void *)x, attrs, LDT_F64, S(4), mx), LDT_OK);
    cr_assert_eq(call(LDT_OP_AMIN, LDT_F64, S(4, 3), (void *)x, attrs, LDT_F64, S(4), mn), LDT_OK);
    cr_assert(isnan(sum[0]) && sum[1] == inf && isnan(sum[2]) && sum[3] == -inf,
              "sums: %g %g %g %g, want nan inf nan -inf", sum[0], sum[1], sum[2], sum[3]);
    cr_assert(isnan(mx[0]) && mx[1] == inf && mx[2] == inf && mx[3] == 5,
              "amax: %g %g %g %g, want nan inf inf 5", mx[0], mx[1], mx[2], mx[3]);
    cr_assert(isnan(mn[0]) && mn[1] == 1 && mn[2] == -inf && mn[3] == -inf,
              "amin: %g %g %g %g, want nan 1 -inf -inf", mn[0], mn[1], mn[2], mn[3]);
    /* NaN first, then numbers, along a non-last dim */
    const float y[4] = {NAN, 1, 2, NAN};
    float o[2];
    attrs[0] = 1;
    cr_assert_eq(call(LDT_OP_AMAX, LDT_F32, S(2, 2), (void *)y, attrs, LDT_F32, S(2), o), LDT_OK);
    cr_assert(isnan(o[0]) && isnan(o[1]), "amax over dim 0: %g %g, want nan nan", o[0], o[1]);
}

Test(reduce, integer_sums) {
    int64_t attrs[4] = {1, 0, 0, 0}, o;
    const int64_t a[2] = {INT64_MAX, 1};
    cr_assert_eq(call(LDT_OP_SUM, LDT_I64, S(2), (void *)a, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == INT64_MIN, "i64 sum wraps: %lld", (long long)o);
    const int32_t b[2] = {INT32_MAX, INT32_MAX};
    cr_assert_eq(call(LDT_OP_SUM, LDT_I32, S(2), (void *)b, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == 2LL * INT32_MAX, "i32 sum in i64: %lld", (long long)o);
    const int32_t c[3] = {-5, -7, 3};
    cr_assert_eq(call(LDT_OP_SUM, LDT_I32, S(3), (void *)c, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == -9, "negative i32 sum: %lld", (long long)o);
    const uint8_t u[3] = {255, 255, 7}, bl[4] = {1, 0, 1, 1};
    cr_assert_eq(call(LDT_OP_SUM, LDT_U8, S(3), (void *)u, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == 517, "u8 sum: %lld", (long long)o);
    cr_assert_eq(call(LDT_OP_SUM, LDT_BOOL, S(4), (void *)bl, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == 3, "bool sum counts: %lld", (long long)o);
    const int64_t m[3] = {INT64_MIN, INT64_MAX, -1};
    cr_assert_eq(call(LDT_OP_AMAX, LDT_I64, S(3), (void *)m, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == INT64_MAX, "i64 amax: %lld", (long long)o);
    cr_assert_eq(call(LDT_OP_AMIN, LDT_I64, S(3), (void *)m, attrs, LDT_I64, S0, &o), LDT_OK);
    cr_assert(o == INT64_MIN, "i64 amin: %lld", (long long)o);
    uint8_t um;
    cr_assert_eq(call(LDT_OP_AMAX, LDT_U8, S(3), (void *)u, attrs, LDT_U8, S0, &um), LDT_OK);
    cr_assert(um == 255, "u8 amax: %d", um);
}

Test(reduce, empty_dims) {
    float x[1] = {0}, o[4] = {9, 9, 9, 9};
    int64_t attrs[4] = {2, 0, 0, 0}; /* [3, 0] over dim 1 */
    cr_assert_eq(call(LDT_OP_SUM, LDT_F32, S(3, 0), x, attrs, LDT_F32, S(3), o), LDT_OK);
    cr_assert(o[0] == 0 && o[1] == 0 && o[2] == 0, "empty sum: %g %g %g", o[0], o[1], o[2]);
    cr_assert_eq(call(LDT_OP_MEAN, LDT_F32, S(3, 0), x, attrs, LDT_F32, S(3), o), LDT_OK);
    cr_assert(isnan(o[0]) && isnan(o[2]), "empty mean: %g %g, want nan", o[0], o[2]);
    int64_t io[3] = {9, 9, 9};
    cr_assert_eq(call(LDT_OP_SUM, LDT_I32, S(3, 0), x, attrs, LDT_I64, S(3), io), LDT_OK);
    cr_assert(io[0] == 0 && io[2] == 0, "empty int sum: %lld", (long long)io[0]);
    for (int op = LDT_OP_AMAX; op <= LDT_OP_AMIN; op++) {
        ldt_status st = call(op, LDT_F32, S(3, 0), x, attrs, LDT_F32, S(3), o);
        cr_assert_eq(st, LDT_ERR_INVALID_ARGUMENT, "%s of empty: %d", opname(op), st);
        char want[64];
        snprintf(want, sizeof want, "%s: reducing an empty dim", opname(op));
        cr_assert(strstr(ldt_last_error(), want), "message: %s", ldt_last_error());
    }
    /* an empty kept dim: nothing to do, no error */
    attrs[0] = 1;
    cr_assert_eq(call(LDT_OP_AMAX, LDT_F32, S(3, 0), x, attrs, LDT_F32, S(0), o), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(call(LDT_OP_SUM, LDT_F32, S(0, 4), x, attrs, LDT_F32, S(4), o), LDT_OK);
    cr_assert(o[0] == 0 && o[2] == 0, "sum over an empty dim 0: %g", o[0]);
}

/* Random shapes, masks and keepdim, every op on every dtype it supports, against the
 * reference; sizes chosen so every reduction layout occurs (inner kept, inner reduced,
 * alternating groups, size-1 and zero dims), and rows longer than the kernel's chunk. */
Test(reduce, random_against_reference) {
    uint64_t rng = 5;
    int cases = ldt_test_cases(400);
    for (int c = 0; c < cases; c++) {
        ldt_shape s = {(int)ldt_test_range(&rng, 0, 5), {0}};
        int64_t total = 1;
        for (int d = 0; d < s.ndim; d++) {
            int64_t r = ldt_test_range(&rng, 0, 9);
            s.dims[d] = r == 0 ? 1 : r == 1 && c % 7 == 0 ? 0 : ldt_test_range(&rng, 2, 7);
            total *= s.dims[d];
        }
        if (c % 25 == 0) s = c % 50 == 0 ? S(3, 700) : S(700, 3); /* past a chunk */
        total = numel(&s);
        uint64_t mask = ldt_test_rand(&rng) & ((1u << s.ndim) - 1u);
        int keep = (int)ldt_test_range(&rng, 0, 1);
        ldt_dtype t = k_all[c % 8];
        void *x = mkbuf(t, total, &rng, NULL, c % 3 == 0 ? 50 : 0);
        ldt_shape os = reduced_shape(s, mask, 0);
        int empty = numel(&os) > 0 && numel(&s) == 0;
        for (int op = LDT_OP_SUM; op <= LDT_OP_AMIN; op++) {
            if (op == LDT_OP_MEAN && !isf(t)) continue;
            if ((op == LDT_OP_AMAX || op == LDT_OP_AMIN) && (t == LDT_BOOL || empty)) continue;
            if (op == LDT_OP_AMAX || op == LDT_OP_AMIN) { /* an empty reduced dim errors */
                int zero_red = 0;
                for (int d = 0; d < s.ndim; d++) zero_red |= ((mask >> d) & 1) && s.dims[d] == 0;
                if (zero_red) continue;
            }
            check_reduce(op, t, s, x, mask, keep);
        }
        free(x);
    }
}

Test(reduce, errors) {
    float x[6] = {0}, o[6];
    int64_t attrs[4] = {1, 0, 0, 0};
    for (int di = 4; di < 8; di++) {
        ldt_status st = call(LDT_OP_MEAN, k_all[di], S(6), x, attrs, k_all[di], S0, o);
        cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "mean %s: %d", ldt_dtype_name(k_all[di]), st);
        cr_assert(strstr(ldt_last_error(), "mean") &&
                      strstr(ldt_last_error(), ldt_dtype_name(k_all[di])),
                  "%s", ldt_last_error());
    }
    for (int op = LDT_OP_AMAX; op <= LDT_OP_AMIN; op++) {
        cr_assert_eq(call(op, LDT_BOOL, S(6), x, attrs, LDT_BOOL, S0, o), LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), opname(op)) && strstr(ldt_last_error(), "bool"), "%s",
                  ldt_last_error());
    }
    /* integer sums give i64 */
    cr_assert_eq(call(LDT_OP_SUM, LDT_I32, S(6), x, attrs, LDT_I32, S0, o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "expected i64"), "%s", ldt_last_error());
    cr_assert_eq(call(LDT_OP_SUM, LDT_F32, S(6), x, attrs, LDT_F64, S0, o),
                 LDT_ERR_INVALID_ARGUMENT);
    /* wrong output shape; mask beyond the dims */
    cr_assert_eq(call(LDT_OP_SUM, LDT_F32, S(2, 3), x, attrs, LDT_F32, S(2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "output shape is [2], expected [3]"), "%s",
              ldt_last_error());
    attrs[0] = 4;
    cr_assert_eq(call(LDT_OP_SUM, LDT_F32, S(2, 3), x, attrs, LDT_F32, S(2, 3), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "mask"), "%s", ldt_last_error());
    /* the wrong family */
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(6), x, attrs, LDT_I64, S0, o) != LDT_OK, 1);
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    ldt__operand in = {x, S(6), LDT_F32};
    ldt__kcall c = {LDT_OP_ARGMAX, &a, 1, &in, {o, S0, LDT_F32}, NULL, NULL, NULL};
    cr_assert_eq(ldt__k_reduce(&c), LDT_ERR_INTERNAL);
    c.op = LDT_OP_SUM;
    cr_assert_eq(ldt__k_index_reduce(&c), LDT_ERR_INTERNAL);
}

/* ---------------------------------------------------------------------------------------
 * argmax / argmin.
 */
Test(argmax, hand_ties_nan_zero) {
    int64_t o[3];
    int64_t a0[4] = {0, 0, 0, 0};
    const double v[4] = {3, 1, 3, 1};
    for (int di = 0; di < 7; di++) { /* first occurrence wins */
        void *x = mkbuf(k_all[di], 4, NULL, v, 0);
        cr_assert_eq(call(LDT_OP_ARGMAX, k_all[di], S(4), x, a0, LDT_I64, S0, o), LDT_OK);
        cr_assert(o[0] == 0, "argmax %s of [3 1 3 1]: %lld, want 0", ldt_dtype_name(k_all[di]),
                  (long long)o[0]);
        cr_assert_eq(call(LDT_OP_ARGMIN, k_all[di], S(4), x, a0, LDT_I64, S0, o), LDT_OK);
        cr_assert(o[0] == 1, "argmin %s of [3 1 3 1]: %lld, want 1", ldt_dtype_name(k_all[di]),
                  (long long)o[0]);
        free(x);
    }
    /* the first NaN, for both */
    const float n[5] = {1, NAN, 7, NAN, -1};
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(5), (void *)n, a0, LDT_I64, S0, o), LDT_OK);
    cr_assert(o[0] == 1, "argmax with NaN: %lld, want 1", (long long)o[0]);
    cr_assert_eq(call(LDT_OP_ARGMIN, LDT_F32, S(5), (void *)n, a0, LDT_I64, S0, o), LDT_OK);
    cr_assert(o[0] == 1, "argmin with NaN: %lld, want 1", (long long)o[0]);
    /* -0 and +0 are equal: a tie */
    const double z[3] = {-0.0, 0.0, -1};
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F64, S(3), (void *)z, a0, LDT_I64, S0, o), LDT_OK);
    cr_assert(o[0] == 0, "argmax [-0 +0 -1]: %lld, want 0", (long long)o[0]);
    const double z2[3] = {0.0, -0.0, 1};
    cr_assert_eq(call(LDT_OP_ARGMIN, LDT_F64, S(3), (void *)z2, a0, LDT_I64, S0, o), LDT_OK);
    cr_assert(o[0] == 0, "argmin [+0 -0 1]: %lld, want 0", (long long)o[0]);
    /* along dim 0 of [[1 5 2],[5 1 2],[5 5 2]], keepdim: [[1 0 0]]; along dim 1: [1 0 0] */
    const double m[9] = {1, 5, 2, 5, 1, 2, 5, 5, 2};
    void *x = mkbuf(LDT_I32, 9, NULL, m, 0);
    int64_t a1[4] = {0, 1, 0, 0};
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_I32, S(3, 3), x, a1, LDT_I64, S(1, 3), o), LDT_OK);
    cr_assert(o[0] == 1 && o[1] == 0 && o[2] == 0, "argmax dim 0: %lld %lld %lld, want 1 0 0",
              (long long)o[0], (long long)o[1], (long long)o[2]);
    a1[0] = -1; /* negative dim, no keepdim */
    a1[1] = 0;
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_I32, S(3, 3), x, a1, LDT_I64, S(3), o), LDT_OK);
    cr_assert(o[0] == 1 && o[1] == 0 && o[2] == 0, "argmax dim -1: %lld %lld %lld, want 1 0 0",
              (long long)o[0], (long long)o[1], (long long)o[2]);
    cr_assert_eq(call(LDT_OP_ARGMIN, LDT_I32, S(3, 3), x, a1, LDT_I64, S(3), o), LDT_OK);
    cr_assert(o[0] == 0 && o[1] == 1 && o[2] == 2, "argmin dim -1: %lld %lld %lld, want 0 1 2",
              (long long)o[0], (long long)o[1], (long long)o[2]);
    free(x);
    /* a 0-dim input is one element along dim 0 */
    double one = 4;
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F64, S0, &one, a0, LDT_I64, S0, o), LDT_OK);
    cr_assert(o[0] == 0, "argmax of a scalar: %lld", (long long)o[0]);
}

/* Reference: first index of the max (min) by plain comparisons, a NaN taking the place at
 * once and keeping it. */
static int64_t ref_arg(int op, ldt_dtype t, const void *x, int64_t base, int64_t R, int64_t I) {
    int64_t best = 0;
    for (int64_t r = 1; r < R; r++) {
        int64_t i = base + r * I, b = base + best * I;
        if (isf(t)) {
            double v = getf(t, x, i), w = getf(t, x, b);
            if (isnan(w)) break;
            if (isnan(v) || (op == LDT_OP_ARGMAX ? v > w : v < w)) best = r;
        } else {
            int64_t v = geti(t, x, i), w = geti(t, x, b);
            if (op == LDT_OP_ARGMAX ? v > w : v < w) best = r;
        }
    }
    return best;
}

/* Reference topk: insertion sort of (value, index), NaN above every number, ties by index. */
static int before(ldt_dtype t, const void *x, int64_t ia, int64_t ib, int64_t ra, int64_t rb,
                  int largest) {
    int cmp; /* -1: a < b, 0 equal, 1: a > b */
    if (isf(t)) {
        double a = getf(t, x, ia), b = getf(t, x, ib);
        if (isnan(a) || isnan(b))
            cmp = isnan(a) - isnan(b);
        else
            cmp = (a > b) - (a < b);
    } else {
        int64_t a = geti(t, x, ia), b = geti(t, x, ib);
        cmp = (a > b) - (a < b);
    }
    if (cmp != 0) return largest ? cmp > 0 : cmp < 0;
    return ra < rb;
}

static void ref_topk(ldt_dtype t, const void *x, int64_t base, int64_t R, int64_t I, int largest,
                     int64_t *order) {
    for (int64_t r = 0; r < R; r++) {
        int64_t j = r;
        while (j > 0 &&
               before(t, x, base + r * I, base + order[j - 1] * I, r, order[j - 1], largest)) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = r;
    }
}

Test(argmax, random_against_reference) {
    uint64_t rng = 9;
    int cases = ldt_test_cases(300);
    for (int c = 0; c < cases; c++) {
        ldt_shape s = {(int)ldt_test_range(&rng, 1, 4), {0}};
        for (int d = 0; d < s.ndim; d++) s.dims[d] = ldt_test_range(&rng, 1, 6);
        if (c % 20 == 0) s = c % 40 == 0 ? S(2, 600) : S(600, 3);
        int dim = (int)ldt_test_range(&rng, 0, s.ndim - 1), keep = c % 2;
        ldt_dtype t = k_all[c % 7];
        int64_t n = numel(&s), O = 1, I = 1, R = s.dims[dim];
        for (int d = 0; d < dim; d++) O *= s.dims[d];
        for (int d = dim + 1; d < s.ndim; d++) I *= s.dims[d];
        void *x = mkbuf(t, n, &rng, NULL, c % 3 == 0 ? 8 : 0);
        ldt_shape os = reduced_shape(s, 1u << dim, keep);
        int64_t *out = calloc((size_t)(O * I), 8);
        int64_t attrs[4] = {c % 4 == 0 ? dim - s.ndim : dim, keep, 0, 0};
        for (int op = LDT_OP_ARGMAX; op <= LDT_OP_ARGMIN; op++) {
            cr_assert_eq(call(op, t, s, x, attrs, LDT_I64, os, out), LDT_OK, "%s",
                         ldt_last_error());
            for (int64_t o = 0; o < O; o++)
                for (int64_t i = 0; i < I; i++) {
                    int64_t want = ref_arg(op, t, x, o * R * I + i, R, I), got = out[o * I + i];
                    cr_assert_eq(got, want, "%s %s dim %d at (%lld, %lld): got %lld want %lld",
                                 opname(op), ldt_dtype_name(t), dim, (long long)o, (long long)i,
                                 (long long)got, (long long)want);
                }
        }
        free(out);
        free(x);
    }
}

Test(argmax, errors) {
    float x[6] = {0};
    int64_t o[6], attrs[4] = {1, 0, 0, 0};
    ldt_status st = call(LDT_OP_ARGMAX, LDT_F32, S(3, 0), x, attrs, LDT_I64, S(3), o);
    cr_assert_eq(st, LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "argmax: reducing an empty dim"), "%s", ldt_last_error());
    cr_assert_eq(call(LDT_OP_ARGMIN, LDT_BOOL, S(2, 3), x, attrs, LDT_I64, S(2), o),
                 LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "argmin") && strstr(ldt_last_error(), "bool"), "%s",
              ldt_last_error());
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(2, 3), x, attrs, LDT_I32, S(2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "expected i64"), "%s", ldt_last_error());
    attrs[0] = 2;
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(2, 3), x, attrs, LDT_I64, S(2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "dim 2 is out of range"), "%s", ldt_last_error());
    attrs[0] = -3;
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(2, 3), x, attrs, LDT_I64, S(2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    attrs[0] = 0;
    cr_assert_eq(call(LDT_OP_ARGMAX, LDT_F32, S(2, 3), x, attrs, LDT_I64, S(2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "output shape is [2], expected [3]"), "%s",
              ldt_last_error());
}

/* ---------------------------------------------------------------------------------------
 * topk.
 */
static void topk_both(ldt_dtype t, ldt_shape s, void *x, int dim, int64_t k, int largest,
                      void *vals, int64_t *idx) {
    ldt_shape os = s;
    os.dims[dim] = k;
    int64_t attrs[4] = {dim, k, largest, 1};
    cr_assert_eq(call(LDT_OP_TOPK_VALUES, t, s, x, attrs, t, os, vals), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(call(LDT_OP_TOPK_INDICES, t, s, x, attrs, LDT_I64, os, idx), LDT_OK, "%s",
                 ldt_last_error());
}

Test(topk, hand_ties_nan) {
    /* [1 3 2 3 0]: largest 2 -> 3 3 at 1 3; smallest 2 -> 0 1 at 4 0 */
    const double v[5] = {1, 3, 2, 3, 0};
    double vals[5];
    int64_t idx[5];
    for (int di = 0; di < 7; di++) {
        ldt_dtype t = k_all[di];
        void *x = mkbuf(t, 5, NULL, v, 0), *vb = calloc(5, 8);
        topk_both(t, S(5), x, 0, 2, 1, vb, idx);
        cr_assert(getf(t, vb, 0) == 3 && getf(t, vb, 1) == 3 && idx[0] == 1 && idx[1] == 3,
                  "%s largest: %g %g at %lld %lld, want 3 3 at 1 3", ldt_dtype_name(t),
                  getf(t, vb, 0), getf(t, vb, 1), (long long)idx[0], (long long)idx[1]);
        topk_both(t, S(5), x, 0, 2, 0, vb, idx);
        cr_assert(getf(t, vb, 0) == 0 && getf(t, vb, 1) == 1 && idx[0] == 4 && idx[1] == 0,
                  "%s smallest: %g %g at %lld %lld, want 0 1 at 4 0", ldt_dtype_name(t),
                  getf(t, vb, 0), getf(t, vb, 1), (long long)idx[0], (long long)idx[1]);
        free(x);
        free(vb);
    }
    /* NaN is above every number: [1 nan 2 nan]: largest 3 -> nan nan 2 at 1 3 2; smallest 4
     * -> 1 2 nan nan at 0 2 1 3 */
    const double n[4] = {1, NAN, 2, NAN};
    topk_both(LDT_F64, S(4), (void *)n, 0, 3, 1, vals, idx);
    cr_assert(isnan(vals[0]) && isnan(vals[1]) && vals[2] == 2 && idx[0] == 1 && idx[1] == 3 &&
                  idx[2] == 2,
              "largest with NaN: %g %g %g at %lld %lld %lld", vals[0], vals[1], vals[2],
              (long long)idx[0], (long long)idx[1], (long long)idx[2]);
    topk_both(LDT_F64, S(4), (void *)n, 0, 4, 0, vals, idx);
    cr_assert(vals[0] == 1 && vals[1] == 2 && isnan(vals[2]) && idx[0] == 0 && idx[1] == 2 &&
                  idx[2] == 1 && idx[3] == 3,
              "smallest with NaN: %g %g %g at %lld %lld %lld %lld", vals[0], vals[1], vals[2],
              (long long)idx[0], (long long)idx[1], (long long)idx[2], (long long)idx[3]);
    /* along dim 0 of [[1 9],[8 2],[5 5]], k 2 largest: [[8 9],[5 5]] at [[1 0],[2 2]] */
    const double m[6] = {1, 9, 8, 2, 5, 5};
    topk_both(LDT_F64, S(3, 2), (void *)m, 0, 2, 1, vals, idx);
    cr_assert(vals[0] == 8 && vals[1] == 9 && vals[2] == 5 && vals[3] == 5 && idx[0] == 1 &&
                  idx[1] == 0 && idx[2] == 2 && idx[3] == 2,
              "dim 0: %g %g %g %g at %lld %lld %lld %lld", vals[0], vals[1], vals[2], vals[3],
              (long long)idx[0], (long long)idx[1], (long long)idx[2], (long long)idx[3]);
    /* k = 0: empty, fine */
    topk_both(LDT_F64, S(3, 2), (void *)m, 1, 0, 1, vals, idx);
}

Test(topk, random_against_reference) {
    uint64_t rng = 13;
    int cases = ldt_test_cases(200);
    for (int c = 0; c < cases; c++) {
        ldt_shape s = {(int)ldt_test_range(&rng, 1, 3), {0}};
        for (int d = 0; d < s.ndim; d++) s.dims[d] = ldt_test_range(&rng, 1, 7);
        if (c % 20 == 0) s = S(3, 300);
        int dim = (int)ldt_test_range(&rng, 0, s.ndim - 1), largest = c % 2;
        int64_t R = s.dims[dim], k = ldt_test_range(&rng, 0, R), O = 1, I = 1;
        for (int d = 0; d < dim; d++) O *= s.dims[d];
        for (int d = dim + 1; d < s.ndim; d++) I *= s.dims[d];
        ldt_dtype t = k_all[c % 7];
        void *x = mkbuf(t, numel(&s), &rng, NULL, c % 3 == 0 ? 6 : 0);
        void *vals = calloc((size_t)(O * k * I) + 1, 8);
        int64_t *idx = calloc((size_t)(O * k * I) + 1, 8), *order = calloc((size_t)R, 8);
        topk_both(t, s, x, dim, k, largest, vals, idx);
        size_t esz = ldt_dtype_size(t);
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < I; i++) {
                int64_t base = o * R * I + i;
                ref_topk(t, x, base, R, I, largest, order);
                for (int64_t j = 0; j < k; j++) {
                    int64_t oi = (o * k + j) * I + i;
                    int64_t want = order[j];
                    cr_assert_eq(idx[oi], want,
                                 "topk %s %s dim %d k %lld largest %d: index (%lld, %lld, %lld) "
                                 "got %lld want %lld",
                                 ldt_dtype_name(t), "", dim, (long long)k, largest, (long long)o,
                                 (long long)j, (long long)i, (long long)idx[oi], (long long)want);
                    /* values are the input elements, bit for bit */
                    cr_assert(memcmp((char *)vals + oi * esz, (char *)x + (base + want * I) * esz,
                                     esz) == 0,
                              "topk %s value at (%lld, %lld, %lld): got %g want %g",
                              ldt_dtype_name(t), (long long)o, (long long)j, (long long)i,
                              getf(t, vals, oi), getf(t, x, base + want * I));
                }
            }
        free(x);
        free(vals);
        free(idx);
        free(order);
    }
}

Test(topk, errors) {
    float x[6] = {0}, o[6];
    int64_t attrs[4] = {1, 4, 1, 1};
    cr_assert_eq(call(LDT_OP_TOPK_VALUES, LDT_F32, S(2, 3), x, attrs, LDT_F32, S(2, 4), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "topk_values: k = 4 is out of range"), "%s",
              ldt_last_error());
    attrs[1] = -1;
    cr_assert_eq(call(LDT_OP_TOPK_INDICES, LDT_F32, S(2, 3), x, attrs, LDT_I64, S(2, 3), o),
                 LDT_ERR_INVALID_ARGUMENT);
    attrs[1] = 2;
    cr_assert_eq(call(LDT_OP_TOPK_INDICES, LDT_BOOL, S(2, 3), x, attrs, LDT_I64, S(2, 2), o),
                 LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "topk_indices") && strstr(ldt_last_error(), "bool"), "%s",
              ldt_last_error());
    cr_assert_eq(call(LDT_OP_TOPK_INDICES, LDT_F32, S(2, 3), x, attrs, LDT_F32, S(2, 2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "expected i64"), "%s", ldt_last_error());
    cr_assert_eq(call(LDT_OP_TOPK_VALUES, LDT_F32, S(2, 3), x, attrs, LDT_F64, S(2, 2), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(call(LDT_OP_TOPK_VALUES, LDT_F32, S(2, 3), x, attrs, LDT_F32, S(2, 3), o),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "output shape is [2,3], expected [2,2]"), "%s",
              ldt_last_error());
}
