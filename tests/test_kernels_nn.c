/* CPU nn kernels (softmax, log_softmax, layer_norm, rms_norm, cross_entropy, dropout) against
 * naive f64 references, hand-computed values, extremes, the dropout stream, shards, errors. */
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

/* ---------------------------------------------------------------------------------------
 * Buffers of any float dtype, read and written as double.
 */
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

/* v rounded once to t (the half types through ldt__f64_to_f16_once / _bf16_once). */
static void put(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt__f64_to_f16_once(v); break;
    case LDT_BF16: ((uint16_t *)p)[i] = ldt__f64_to_bf16_once(v); break;
    case LDT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: cr_assert_fail("put: dtype %s", ldt_dtype_name(t));
    }
}

static double get(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return (double)((const int64_t *)p)[i];
    default: cr_assert_fail("get: dtype %s", ldt_dtype_name(t)); return 0;
    }
}

/* Uniform values in [-scale, scale], stored in t (so the reference reads what the kernel does). */
static void fill(uint64_t *rng, ldt__operand *o, double scale) {
    int64_t n = numel(&o->shape);
    for (int64_t i = 0; i < n; i++)
        put(o->dtype, o->data, i, scale * ((double)(ldt_test_rand(rng) >> 11) * 0x1p-52 - 1.0));
}

/* One ulp of a half type at |v| (the gap above it). */
static double half_ulp(ldt_dtype t, double v) {
    uint16_t h = t == LDT_F16 ? ldt__f64_to_f16_once(fabs(v)) : ldt__f64_to_bf16_once(fabs(v));
    uint16_t h1 = (uint16_t)(h + 1);
    double a = t == LDT_F16 ? ldt__f16_to_f32(h) : ldt__bf16_to_f32(h);
    double b = t == LDT_F16 ? ldt__f16_to_f32(h1) : ldt__bf16_to_f32(h1);
    return b - a;
}

/* Is got close enough to the f64 reference want? f64 1e-12 relative (1e-13 absolute), f32
 * 1e-5 relative (1e-6 absolute), halves within 1 ulp of want rounded to the half type. NaN
 * matches NaN. */
static int close_to(ldt_dtype t, double got, double want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    switch (t) {
    case LDT_F64: return fabs(got - want) <= 1e-12 * fabs(want) + 1e-13;
    case LDT_F32: return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
    default: {
        uint16_t h = t == LDT_F16 ? ldt__f64_to_f16_once(want) : ldt__f64_to_bf16_once(want);
        double r = t == LDT_F16 ? ldt__f16_to_f32(h) : ldt__bf16_to_f32(h);
        return fabs(got - r) <= half_ulp(t, r);
    }
    }
}

static ldt__kcall mkcall(int op, const ldt__attrs *a, int nin, const ldt__operand *in,
                         ldt__operand out) {
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.attrs = a;
    c.nin = nin;
    c.in = in;
    c.out = out;
    return c;
}

/* ---------------------------------------------------------------------------------------
 * softmax, log_softmax.
 */
Test(nn, softmax_hand_values) {
    const double sm[3] = {0.0900306, 0.2447285, 0.6652410};
    const double lsm[3] = {-2.4076060, -1.4076060, -0.4076060};
    for (int di = 0; di < 2; di++) {
        ldt_dtype t = k_floats[di];
        ldt__operand x = opnd(t, ldt_test_shape(1, 3)), y = opnd(t, ldt_test_shape(1, 3));
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        for (int j = 0; j < 3; j++) put(t, x.data, j, j + 1);
        for (int lg = 0; lg < 2; lg++) {
            ldt__kcall c = mkcall(lg ? LDT_OP_LOG_SOFTMAX : LDT_OP_SOFTMAX, &a, 1, &x, y);
            cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
            for (int j = 0; j < 3; j++) {
                double got = get(t, y.data, j), want = lg ? lsm[j] : sm[j];
                cr_expect(fabs(got - want) < 1e-6, "%s %s [%d] = %.9g, want %.7f",
                          lg ? "log_softmax" : "softmax", ldt_dtype_name(t), j, got, want);
            }
        }
        free(x.data);
        free(y.data);
    }
}

Test(nn, softmax_matches_reference) {
    uint64_t rng = 5;
    int cases = ldt_test_cases(300), bad = 0;
    for (int cs = 0; cs < cases; cs++) {
        ldt_dtype t = k_floats[cs % 4];
        ldt_shape s = {(int)ldt_test_range(&rng, 0, 4), {0}};
        for (int d = 0; d < s.ndim; d++) s.dims[d] = ldt_test_range(&rng, cs % 17 ? 1 : 0, 7);
        if (cs % 23 == 0 && s.ndim > 0) s.dims[s.ndim - 1] = 300; /* a long row */
        int dim = s.ndim ? (int)ldt_test_range(&rng, 0, s.ndim - 1) : 0;
        ldt__operand x = opnd(t, s), y = opnd(t, s);
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = dim;
        fill(&rng, &x, 8);
        int64_t outer = 1, n = s.ndim ? s.dims[dim] : 1, inner = 1;
        for (int d = 0; d < dim; d++) outer *= s.dims[d];
        for (int d = dim + 1; d < s.ndim; d++) inner *= s.dims[d];
        for (int lg = 0; lg < 2; lg++) {
            ldt__kcall c = mkcall(lg ? LDT_OP_LOG_SOFTMAX : LDT_OP_SOFTMAX, &a, 1, &x, y);
            cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) {
                    /* shifted by the row max so that log_softmax of the max is exactly
                     * (x - m) - log(1 + ...) and a lone element gives exactly 0 */
                    double z = 0, mx = -INFINITY;
                    for (int64_t j = 0; j < n; j++)
                        mx = fmax(mx, get(t, x.data, (o * n + j) * inner + i));
                    for (int64_t j = 0; j < n; j++)
                        z += exp(get(t, x.data, (o * n + j) * inner + i) - mx);
                    for (int64_t j = 0; j < n; j++) {
                        int64_t at = (o * n + j) * inner + i;
                        double xv = get(t, x.data, at) - mx;
                        double want = lg ? xv - log(z) : exp(xv) / z, got = get(t, y.data, at);
                        if (!close_to(t, got, want) && bad++ < 10)
                            cr_expect(0, "%s %s %s dim %d case %d [%lld] = %.9g, want %.9g",
                                      lg ? "log_softmax" : "softmax", ldt_dtype_name(t),
                                      ldt_test_fmt_shape(&s), dim, cs, (long long)at, got, want);
                    }
                }
        }
        free(x.data);
        free(y.data);
    }
    cr_expect_eq(bad, 0, "%d values differ", bad);
}

/* The max is subtracted: logits of 1000 stay finite. A row of -inf gives NaN (as torch), a
 * -inf among finite values gives 0 (log: -inf), a NaN poisons its row only. */
Test(nn, softmax_extremes) {
    const ldt_dtype ts[3] = {LDT_F32, LDT_F64, LDT_F16};
    for (int di = 0; di < 3; di++) {
        ldt_dtype t = ts[di];
        ldt_shape s = ldt_test_shape(2, 4, 2);
        const double xs[8] = {1000, 1001, -INFINITY, -INFINITY, -INFINITY, 2, NAN, 1};
        ldt__operand x = opnd(t, s), y = opnd(t, s);
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = 1;
        for (int j = 0; j < 8; j++) put(t, x.data, j, xs[j]);
        for (int lg = 0; lg < 2; lg++) {
            const char *op = lg ? "log_softmax" : "softmax";
            ldt__kcall c = mkcall(lg ? LDT_OP_LOG_SOFTMAX : LDT_OP_SOFTMAX, &a, 1, &x, y);
            cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
            double w0 = lg ? -1.3132616875182228 : 0.2689414213699951;
            double w1 = lg ? -0.3132616875182228 : 0.7310585786300049;
            cr_expect(close_to(t, get(t, y.data, 0), w0) && close_to(t, get(t, y.data, 1), w1),
                      "%s %s of [1000, 1001] = [%.9g, %.9g], want [%.9g, %.9g]", op,
                      ldt_dtype_name(t), get(t, y.data, 0), get(t, y.data, 1), w0, w1);
            cr_expect(isnan(get(t, y.data, 2)) && isnan(get(t, y.data, 3)),
                      "%s %s of [-inf, -inf] = [%g, %g], want NaN", op, ldt_dtype_name(t),
                      get(t, y.data, 2), get(t, y.data, 3));
            cr_expect(get(t, y.data, 4) == (lg ? -INFINITY : 0.0) && get(t, y.data, 5) == (lg ? 0.0 : 1.0),
                      "%s %s of [-inf, 2] = [%g, %g]", op, ldt_dtype_name(t), get(t, y.data, 4),
                      get(t, y.data, 5));
            cr_expect(isnan(get(t, y.data, 6)) && isnan(get(t, y.data, 7)),
                      "%s %s of [NaN, 1] = [%g, %g], want NaN", op, ldt_dtype_name(t),
                      get(t, y.data, 6), get(t, y.data, 7));
        }
        free(x.data);
        free(y.data);
    }
}

/* ---------------------------------------------------------------------------------------
 * layer_norm, rms_norm.
 */
Test(nn, norm_hand_values) {
    const double ln[3] = {-1.2247449, 0, 1.2247449};
    const double rms[3] = {0.46291005, 0.92582010, 1.38873015}; /* x / sqrt(14/3) */
    for (int di = 0; di < 2; di++) {
        ldt_dtype t = k_floats[di];
        ldt__operand x = opnd(t, ldt_test_shape(1, 3)), y = opnd(t, ldt_test_shape(1, 3));
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = 1; /* no weight, no bias, eps 0 */
        for (int j = 0; j < 3; j++) put(t, x.data, j, j + 1);
        for (int r = 0; r < 2; r++) {
            ldt__kcall c = mkcall(r ? LDT_OP_RMS_NORM : LDT_OP_LAYER_NORM, &a, 1, &x, y);
            cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
            for (int j = 0; j < 3; j++) {
                double got = get(t, y.data, j), want = r ? rms[j] : ln[j];
                cr_expect(fabs(got - want) < 1e-6, "%s %s [%d] = %.9g, want %.8f",
                          r ? "rms_norm" : "layer_norm", ldt_dtype_name(t), j, got, want);
            }
        }
        free(x.data);
        free(y.data);
    }
}

Test(nn, norms_match_reference) {
    uint64_t rng = 7;
    int cases = ldt_test_cases(300), bad = 0;
    for (int cs = 0; cs < cases; cs++) {
        ldt_dtype t = k_floats[cs % 4];
        int rms = (cs / 4) % 2;
        ldt_shape s = {(int)ldt_test_range(&rng, 1, 4), {0}};
        for (int d = 0; d < s.ndim; d++) s.dims[d] = ldt_test_range(&rng, cs % 19 ? 1 : 0, 6);
        if (cs % 29 == 0) s.dims[s.ndim - 1] = 257;
        int k = (int)ldt_test_range(&rng, 1, s.ndim);
        int has_w = (int)ldt_test_range(&rng, 0, 1), has_b = rms ? 0 : (int)ldt_test_range(&rng, 0, 1);
        double eps = cs % 3 ? 1e-5 : 0.1;
        ldt_shape ws = {k, {0}};
        for (int d = 0; d < k; d++) ws.dims[d] = s.dims[s.ndim - k + d];
        ldt__operand in[3], y = opnd(t, s);
        int nin = 0;
        in[nin++] = opnd(t, s);
        fill(&rng, &in[0], 3);
        /* a row far from 0 in some cases: the variance must not cancel */
        if (cs % 5 == 0)
            for (int64_t i = 0; i < numel(&s); i++)
                put(t, in[0].data, i, get(t, in[0].data, i) + (t == LDT_F32 || t == LDT_F64 ? 1000 : 8));
        const ldt__operand *w = NULL, *b = NULL;
        if (has_w) {
            in[nin] = opnd(t, ws);
            fill(&rng, &in[nin], 2);
            w = &in[nin++];
        }
        if (has_b) {
            in[nin] = opnd(t, ws);
            fill(&rng, &in[nin], 1);
            b = &in[nin++];
        }
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = k;
        a.i[1] = has_w;
        a.i[2] = has_b;
        a.f[0] = eps;
        ldt__kcall c = mkcall(rms ? LDT_OP_RMS_NORM : LDT_OP_LAYER_NORM, &a, nin, in, y);
        cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
        int64_t m = numel(&ws), rows = m ? numel(&s) / m : 0;
        for (int64_t r = 0; r < rows; r++) {
            /* statistics in long double, left to right: the kernel sums in lanes (nn_math.h),
             * so its mean may differ by the summation's rounding, at most about m ulps of the
             * row's mean magnitude; that difference, times rstd |w|, is allowed on top */
            long double mean = 0, var = 0;
            double mabs = 0;
            for (int64_t j = 0; j < m; j++) mabs += fabs(get(t, in[0].data, r * m + j)) / (double)m;
            for (int64_t j = 0; !rms && j < m; j++) mean += get(t, in[0].data, r * m + j);
            mean /= (long double)m;
            for (int64_t j = 0; j < m; j++) {
                long double dv = get(t, in[0].data, r * m + j) - mean;
                var += dv * dv;
            }
            var /= (long double)m;
            double rstd = (double)(1.0L / sqrtl(var + eps));
            for (int64_t j = 0; j < m; j++) {
                double want = (double)(get(t, in[0].data, r * m + j) - mean) * rstd;
                double wj = w ? get(t, w->data, j) : 1.0;
                want *= wj;
                if (b) want += get(t, b->data, j);
                double got = get(t, y.data, r * m + j);
                double sum_err = (double)m * 0x1p-52 * mabs * rstd * fabs(wj);
                if (!close_to(t, got, want) && !(t == LDT_F64 && fabs(got - want) <= sum_err + 1e-12 * fabs(want)) && bad++ < 10)
                    cr_expect(0, "%s %s x %s k %d w %d b %d case %d row %lld [%lld] = %.9g, want %.9g",
                              rms ? "rms_norm" : "layer_norm", ldt_dtype_name(t),
                              ldt_test_fmt_shape(&s), k, has_w, has_b, cs, (long long)r,
                              (long long)j, got, want);
            }
        }
        for (int i = 0; i < nin; i++) free(in[i].data);
        free(y.data);
    }
    cr_expect_eq(bad, 0, "%d values differ", bad);
}

/* f32 rows of 1e4 + noise: E[x^2] - E[x]^2 in f32 would lose the variance entirely. */
Test(nn, layer_norm_variance_is_stable) {
    float x[64], y[64];
    double mean = 0, var = 0;
    uint64_t rng = 11;
    for (int j = 0; j < 64; j++) x[j] = 10000.0f + (float)(ldt_test_range(&rng, -100, 100)) / 1000.0f;
    for (int j = 0; j < 64; j++) mean += x[j];
    mean /= 64;
    for (int j = 0; j < 64; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= 64;
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = 1;
    a.f[0] = 1e-12;
    ldt__operand in = {x, {1, {64}}, LDT_F32};
    ldt__kcall c = mkcall(LDT_OP_LAYER_NORM, &a, 1, &in, (ldt__operand){y, {1, {64}}, LDT_F32});
    cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
    for (int j = 0; j < 64; j++) {
        double want = (x[j] - mean) / sqrt(var + 1e-12);
        cr_expect(close_to(LDT_F32, y[j], want), "[%d] = %.9g, want %.9g", j, y[j], want);
    }
}

/* ---------------------------------------------------------------------------------------
 * cross_entropy.
 */
static ldt_status run_ce(ldt_dtype t, ldt_shape xs, const double *xv, ldt_dtype tt, ldt_shape ts,
                         const int64_t *tv, int64_t ignore, double *loss) {
    ldt__operand in[2] = {opnd(t, xs), opnd(tt, ts)}, y = opnd(t, ldt_test_shape(0));
    for (int64_t i = 0; i < numel(&xs); i++) put(t, in[0].data, i, xv[i]);
    for (int64_t i = 0; i < numel(&ts); i++) put(tt, in[1].data, i, (double)tv[i]);
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = ignore;
    ldt__kcall c = mkcall(LDT_OP_CROSS_ENTROPY, &a, 2, in, y);
    ldt_status st = ldt__k_nn(&c);
    *loss = get(t, y.data, 0);
    free(in[0].data);
    free(in[1].data);
    free(y.data);
    return st;
}

Test(nn, cross_entropy_hand_values) {
    const double x[3] = {1, 2, 3}, big[2] = {1000, 1001};
    const int64_t t2[1] = {2}, t1[1] = {1}, t0[1] = {0};
    for (int di = 0; di < 3; di++)
        for (int ti = 0; ti < 2; ti++) {
            ldt_dtype t = k_floats[di], tt = ti ? LDT_I64 : LDT_I32;
            double l;
            cr_assert_eq(run_ce(t, ldt_test_shape(2, 1, 3), x, tt, ldt_test_shape(1, 1), t2, -100, &l),
                         LDT_OK, "%s", ldt_last_error());
            cr_expect(close_to(t, l, 0.40760596444437), "%s/%s: %.9g, want 0.4076060",
                      ldt_dtype_name(t), ldt_dtype_name(tt), l);
            if (t == LDT_BF16) continue; /* 1001 is not a bf16 */
            cr_assert_eq(run_ce(t, ldt_test_shape(2, 1, 2), big, tt, ldt_test_shape(1, 1), t1, -100, &l), LDT_OK);
            cr_expect(close_to(t, l, 0.3132616875182228), "%s huge logits, target 1: %.9g",
                      ldt_dtype_name(t), l);
            cr_assert_eq(run_ce(t, ldt_test_shape(2, 1, 2), big, tt, ldt_test_shape(1, 1), t0, -100, &l), LDT_OK);
            cr_expect(close_to(t, l, 1.3132616875182228), "%s huge logits, target 0: %.9g",
                      ldt_dtype_name(t), l);
        }
}

Test(nn, cross_entropy_matches_reference) {
    uint64_t rng = 9;
    int cases = ldt_test_cases(300), bad = 0;
    for (int cs = 0; cs < cases; cs++) {
        ldt_dtype t = k_floats[cs % 4], tt = (cs / 4) % 2 ? LDT_I64 : LDT_I32;
        ldt_shape xs = {(int)ldt_test_range(&rng, 1, 3), {0}}, ts;
        for (int d = 0; d < xs.ndim; d++) xs.dims[d] = ldt_test_range(&rng, 1, 6);
        int64_t C = xs.dims[xs.ndim - 1] = ldt_test_range(&rng, 1, cs % 13 ? 9 : 200);
        ts = xs;
        ts.ndim--;
        int64_t rows = numel(&ts);
        /* the ignore index: torch's -100, or a valid class (then those rows are skipped too) */
        int64_t ignore = cs % 3 ? -100 : ldt_test_range(&rng, 0, C - 1);
        double *xv = malloc((size_t)numel(&xs) * sizeof(double));
        int64_t *tv = malloc((size_t)rows * sizeof(int64_t));
        for (int64_t i = 0; i < numel(&xs); i++) {
            double u = (double)(ldt_test_rand(&rng) >> 11) * 0x1p-53;
            xv[i] = 20 * (u - 0.5);
            /* round through t so the reference sees the kernel's input */
            double tmp[1];
            put(t, tmp, 0, xv[i]);
            xv[i] = get(t, tmp, 0);
        }
        for (int64_t r = 0; r < rows; r++)
            tv[r] = ldt_test_range(&rng, 0, 3) == 0 ? ignore : ldt_test_range(&rng, 0, C - 1);
        double want = 0, got;
        int64_t used = 0;
        for (int64_t r = 0; r < rows; r++) {
            if (tv[r] == ignore) continue;
            double z = 0;
            for (int64_t j = 0; j < C; j++) z += exp(xv[r * C + j]);
            want += log(z) - xv[r * C + tv[r]];
            used++;
        }
        want = used ? want / (double)used : NAN;
        cr_assert_eq(run_ce(t, xs, xv, tt, ts, tv, ignore, &got), LDT_OK, "%s", ldt_last_error());
        if (!close_to(t, got, want) && bad++ < 10)
            cr_expect(0, "cross_entropy %s/%s logits %s ignore %lld case %d: %.9g, want %.9g",
                      ldt_dtype_name(t), ldt_dtype_name(tt), ldt_test_fmt_shape(&xs),
                      (long long)ignore, cs, got, want);
        free(xv);
        free(tv);
    }
    cr_expect_eq(bad, 0, "%d losses differ", bad);
}

Test(nn, cross_entropy_ignored_rows) {
    const double x[6] = {1, 2, 3, 3, 2, 1};
    const int64_t mixed[2] = {-100, 0}, none[2] = {-100, -100}, as_class[2] = {0, 0};
    double l;
    cr_assert_eq(run_ce(LDT_F64, ldt_test_shape(2, 2, 3), x, LDT_I64, ldt_test_shape(1, 2), mixed, -100, &l), LDT_OK);
    cr_expect(close_to(LDT_F64, l, 0.40760596444437), "one ignored row: %.12g", l);
    cr_assert_eq(run_ce(LDT_F32, ldt_test_shape(2, 2, 3), x, LDT_I32, ldt_test_shape(1, 2), none, -100, &l), LDT_OK);
    cr_expect(isnan(l), "all ignored: %g, want NaN", l);
    /* an ignore index that is a class: both rows ignored */
    cr_assert_eq(run_ce(LDT_F32, ldt_test_shape(2, 2, 3), x, LDT_I32, ldt_test_shape(1, 2), as_class, 0, &l), LDT_OK);
    cr_expect(isnan(l), "ignore index 0, targets 0: %g, want NaN", l);
    /* no rows at all */
    cr_assert_eq(run_ce(LDT_F32, ldt_test_shape(2, 0, 3), x, LDT_I64, ldt_test_shape(1, 0), none, -100, &l), LDT_OK);
    cr_expect(isnan(l), "no rows: %g, want NaN", l);
}

Test(nn, cross_entropy_target_out_of_range) {
    const double x[6] = {1, 2, 3, 3, 2, 1};
    const int64_t high[2] = {1, 3}, neg[2] = {-1, 0};
    double l;
    cr_expect_eq(run_ce(LDT_F32, ldt_test_shape(2, 2, 3), x, LDT_I64, ldt_test_shape(1, 2), high, -100, &l),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "cross_entropy: target 3 at row 1") != NULL, "%s",
              ldt_last_error());
    cr_expect_eq(run_ce(LDT_F64, ldt_test_shape(2, 2, 3), x, LDT_I32, ldt_test_shape(1, 2), neg, -100, &l),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "target -1 at row 0") != NULL, "%s", ldt_last_error());
}

/* ---------------------------------------------------------------------------------------
 * dropout.
 */
static double dropout_want(ldt_dtype t, double x, int drop, double p) {
    if (drop) return 0.0;
    if (t == LDT_F64) return x * (1.0 / (1.0 - p));
    float f = (float)x * (float)(1.0 / (1.0 - p)); /* the product in f32, rounded once to t */
    double tmp[1];
    put(t, tmp, 0, f);
    return get(t, tmp, 0);
}

Test(nn, dropout_mask_is_the_stream) {
    const double ps[5] = {0.0, 0.1, 0.5, 0.9, 1.0};
    uint64_t rng = 13;
    int bad = 0;
    for (int di = 0; di < 4; di++)
        for (int pi = 0; pi < 5; pi++) {
            ldt_dtype t = k_floats[di];
            ldt_shape s = ldt_test_shape(3, 3, 37, 11); /* not a multiple of 4 or the chunk */
            ldt__operand x = opnd(t, s), y = opnd(t, s);
            ldt__attrs a;
            memset(&a, 0, sizeof a);
            a.i[0] = (int64_t)0x9E3779B97F4A7C15ull; /* a seed with the top bit set */
            a.i[1] = 12345;
            a.f[0] = ps[pi];
            fill(&rng, &x, 5);
            ldt__kcall c = mkcall(LDT_OP_DROPOUT, &a, 1, &x, y);
            cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
            int64_t dropped = 0, n = numel(&s);
            for (int64_t i = 0; i < n; i++) {
                int drop = ldt__rand_bernoulli((uint64_t)a.i[0], (uint64_t)a.i[1], i, ps[pi]);
                double want = dropout_want(t, get(t, x.data, i), drop, ps[pi]);
                double got = get(t, y.data, i);
                dropped += drop;
                if (got != want && bad++ < 10)
                    cr_expect(0, "dropout %s p %g [%lld] = %.9g, want %.9g (dropped %d)",
                              ldt_dtype_name(t), ps[pi], (long long)i, got, want, drop);
            }
            if (ps[pi] == 0.0) cr_expect_eq(dropped, 0);
            if (ps[pi] == 1.0) cr_expect_eq(dropped, n);
            if (ps[pi] == 0.5)
                cr_expect(dropped > n / 2 - n / 8 && dropped < n / 2 + n / 8, "%lld of %lld dropped",
                          (long long)dropped, (long long)n);
            free(x.data);
            free(y.data);
        }
    cr_expect_eq(bad, 0, "%d values differ", bad);
}

/* Local element li of a region as a global row-major index, element by element (the kernel
 * walks runs instead). */
static int64_t global_of(const ldt_region *r, const ldt_shape *gs, int64_t li) {
    int64_t g = 0, stride = 1;
    for (int d = r->ndim - 1; d >= 0; d--) {
        int64_t i = li % r->local_shape.dims[d];
        li /= r->local_shape.dims[d];
        const ldt_dim_runs *rd = &r->runs[d];
        g += ((i / rd->len) * rd->block_stride + rd->start + i % rd->len) * stride;
        stride *= gs->dims[d];
    }
    return g;
}

static void check_sharded(const char *mesh_text, ldt_shape gs, const char *pl_text, ldt_dtype t) {
    ldt_mesh *m;
    ldt_spec spec;
    ldt_placement pl[LDT_MAX_DIMS];
    int npl;
    uint64_t rng = 21;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(pl_text, gs.ndim, pl, LDT_MAX_DIMS, &npl), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt_spec_init(&spec, m, &gs, pl, npl, t), LDT_OK, "%s", ldt_last_error());
    ldt__operand x = opnd(t, gs), whole = opnd(t, gs);
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = 77;
    a.i[1] = 3;
    a.f[0] = 0.3;
    fill(&rng, &x, 4);
    ldt__kcall c = mkcall(LDT_OP_DROPOUT, &a, 1, &x, whole);
    cr_assert_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
    size_t esz = ldt_dtype_size(t);
    for (int rank = 0; rank < ldt_mesh_nranks(m); rank++) {
        ldt_region reg;
        cr_assert_eq(ldt_layout(&spec, rank, &reg), LDT_OK, "%s", ldt_last_error());
        ldt_shape ls = gs.ndim ? reg.local_shape : gs;
        ldt__operand lx = opnd(t, ls), ly = opnd(t, ls);
        int64_t n = numel(&ls);
        for (int64_t i = 0; i < n; i++)
            memcpy((char *)lx.data + i * esz, (char *)x.data + global_of(&reg, &gs, i) * esz, esz);
        ldt__kcall lc = mkcall(LDT_OP_DROPOUT, &a, 1, &lx, ly);
        lc.region = &reg;
        lc.global_shape = &gs;
        cr_assert_eq(ldt__k_nn(&lc), LDT_OK, "%s %s rank %d: %s", mesh_text, pl_text, rank,
                     ldt_last_error());
        for (int64_t i = 0; i < n; i++) {
            int64_t g = global_of(&reg, &gs, i);
            cr_expect(memcmp((char *)ly.data + i * esz, (char *)whole.data + g * esz, esz) == 0,
                      "%s %s %s %s rank %d local %lld (global %lld): %.9g, whole %.9g", mesh_text,
                      ldt_test_fmt_shape(&gs), pl_text, ldt_dtype_name(t), rank, (long long)i,
                      (long long)g, get(t, ly.data, i), get(t, whole.data, g));
        }
        free(lx.data);
        free(ly.data);
    }
    free(x.data);
    free(whole.data);
    ldt_mesh_destroy(m);
}

Test(nn, dropout_sharded_equals_whole) {
    for (int di = 0; di < 4; di++) {
        ldt_dtype t = k_floats[di];
        check_sharded("2x2", ldt_test_shape(2, 7, 5), "S0,S1", t); /* uneven on both dims */
        check_sharded("2x2", ldt_test_shape(2, 7, 5), "S1,S0", t);
        check_sharded("2x2", ldt_test_shape(2, 7, 5), "R,S1", t);
        check_sharded("2x2", ldt_test_shape(2, 6, 5), "IS0:3,S1", t); /* interleaved rows */
        check_sharded("2x2", ldt_test_shape(2, 5, 6), "S0,IS1:3", t); /* runs within a row */
        check_sharded("4", ldt_test_shape(2, 3, 5), "S0", t);         /* rank 3 empty */
        check_sharded("2x3", ldt_test_shape(3, 4, 6, 300), "S2,IS1:2", t);
        check_sharded("2", ldt_test_shape(0), "R", t); /* 0-dim */
    }
}

Test(nn, dropout_bad_region_is_refused) {
    float x[6] = {0}, y[6];
    ldt_shape gs = ldt_test_shape(2, 4, 3);
    ldt_region r;
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.local_shape = ldt_test_shape(2, 2, 3);
    r.runs[0] = (ldt_dim_runs){3, 2, 1, 2}; /* rows 3, 4 of 4: outside */
    r.runs[1] = (ldt_dim_runs){0, 3, 1, 3};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.f[0] = 0.5;
    ldt__operand in = {x, r.local_shape, LDT_F32};
    ldt__kcall c = mkcall(LDT_OP_DROPOUT, &a, 1, &in, (ldt__operand){y, r.local_shape, LDT_F32});
    c.region = &r;
    c.global_shape = &gs;
    cr_expect_eq(ldt__k_nn(&c), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "dropout: region dim 0") != NULL, "%s", ldt_last_error());
    c.global_shape = NULL;
    cr_expect_eq(ldt__k_nn(&c), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "without a global shape") != NULL, "%s", ldt_last_error());
}

/* ---------------------------------------------------------------------------------------
 * Errors: unsupported dtypes name the op and dtype; inconsistent shapes name the shapes.
 */
Test(nn, integer_dtypes_are_unsupported) {
    const int ops[6] = {LDT_OP_SOFTMAX,  LDT_OP_LOG_SOFTMAX,   LDT_OP_LAYER_NORM,
                        LDT_OP_RMS_NORM, LDT_OP_CROSS_ENTROPY, LDT_OP_DROPOUT};
    const ldt_dtype ints[4] = {LDT_I32, LDT_I64, LDT_U8, LDT_BOOL};
    int64_t xb[4] = {0}, tb[2] = {0}, yb[4] = {0};
    for (int oi = 0; oi < 6; oi++)
        for (int ti = 0; ti < 4; ti++) {
            ldt__attrs a;
            memset(&a, 0, sizeof a);
            a.i[0] = ops[oi] == LDT_OP_LAYER_NORM || ops[oi] == LDT_OP_RMS_NORM ? 1 : 0;
            ldt__operand in[2] = {{xb, ldt_test_shape(2, 2, 2), ints[ti]},
                                  {tb, ldt_test_shape(1, 2), LDT_I64}};
            ldt__operand out = {yb, ops[oi] == LDT_OP_CROSS_ENTROPY ? ldt_test_shape(0) : in[0].shape,
                                ints[ti]};
            ldt__kcall c = mkcall(ops[oi], &a, ops[oi] == LDT_OP_CROSS_ENTROPY ? 2 : 1, in, out);
            char want[64];
            snprintf(want, sizeof want, "%s: dtype %s", ldt__builtin_op_name(ops[oi]),
                     ldt_dtype_name(ints[ti]));
            cr_expect_eq(ldt__k_nn(&c), LDT_ERR_UNSUPPORTED, "%s", want);
            cr_expect(strstr(ldt_last_error(), want) != NULL, "%s: got \"%s\"", want, ldt_last_error());
        }
    /* cross_entropy's targets must be i32 or i64 */
    float x[4] = {0}, t[2] = {0}, l;
    ldt__operand in[2] = {{x, ldt_test_shape(2, 2, 2), LDT_F32}, {t, ldt_test_shape(1, 2), LDT_F32}};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    ldt__kcall c = mkcall(LDT_OP_CROSS_ENTROPY, &a, 2, in, (ldt__operand){&l, ldt_test_shape(0), LDT_F32});
    cr_expect_eq(ldt__k_nn(&c), LDT_ERR_UNSUPPORTED);
    cr_expect(strstr(ldt_last_error(), "cross_entropy: targets of dtype f32") != NULL, "%s",
              ldt_last_error());
}

static void expect_invalid(ldt__kcall *c, const char *part) {
    cr_expect_eq(ldt__k_nn(c), LDT_ERR_INVALID_ARGUMENT, "%s: %s", part, ldt_last_error());
    cr_expect(strstr(ldt_last_error(), part) != NULL, "want \"%s\" in \"%s\"", part, ldt_last_error());
}

Test(nn, inconsistent_shapes_are_invalid) {
    float x[24] = {0}, y[24], w[24] = {0}, l;
    int64_t tg[6] = {0};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    ldt__operand in[3] = {{x, ldt_test_shape(2, 4, 6), LDT_F32}, {w, ldt_test_shape(1, 6), LDT_F32},
                          {w, ldt_test_shape(1, 6), LDT_F32}};
    ldt__kcall c = mkcall(LDT_OP_SOFTMAX, &a, 1, in, (ldt__operand){y, ldt_test_shape(2, 6, 4), LDT_F32});
    expect_invalid(&c, "softmax: x is [4,6] f32 and the output [6,4] f32");
    c.out.shape = in[0].shape;
    a.i[0] = 2;
    expect_invalid(&c, "softmax: dim 2 is out of range for x [4,6]");
    /* layer_norm: the weight must be x's last k dims */
    c.op = LDT_OP_LAYER_NORM;
    a.i[0] = 1;
    a.i[1] = 1;
    a.i[2] = 1;
    c.nin = 3;
    in[2].shape = ldt_test_shape(1, 4);
    expect_invalid(&c, "layer_norm: bias is [4] f32; expected the last 1 dims of x [4,6] f32");
    in[2].shape = ldt_test_shape(1, 6);
    c.nin = 2;
    expect_invalid(&c, "layer_norm: 2 inputs; expected 3");
    c.nin = 3;
    a.i[0] = 3;
    expect_invalid(&c, "layer_norm: normalising the last 3 dims of x [4,6]");
    c.op = LDT_OP_RMS_NORM;
    a.i[0] = 1;
    expect_invalid(&c, "rms_norm: 3 inputs");
    a.i[2] = 0;
    c.nin = 2;
    cr_expect_eq(ldt__k_nn(&c), LDT_OK, "%s", ldt_last_error());
    /* cross_entropy: targets [...] for logits [..., C]; a 0-dim output */
    ldt__operand ce[2] = {{x, ldt_test_shape(2, 4, 6), LDT_F32}, {tg, ldt_test_shape(1, 6), LDT_I64}};
    c = mkcall(LDT_OP_CROSS_ENTROPY, &a, 2, ce, (ldt__operand){&l, ldt_test_shape(0), LDT_F32});
    expect_invalid(&c, "cross_entropy: logits are [4,6] and targets [6]");
    ce[1].shape = ldt_test_shape(1, 4);
    c.out.shape = ldt_test_shape(1, 1);
    expect_invalid(&c, "cross_entropy: x is [4,6] f32 and the output [1] f32; expected [] f32");
    /* dropout: p in [0, 1] */
    c = mkcall(LDT_OP_DROPOUT, &a, 1, in, (ldt__operand){y, ldt_test_shape(2, 4, 6), LDT_F32});
    a.f[0] = 1.5;
    expect_invalid(&c, "dropout: p = 1.5");
    c.nin = 2;
    expect_invalid(&c, "dropout: 2 inputs; expected 1");
}
