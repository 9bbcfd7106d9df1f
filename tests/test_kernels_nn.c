/* The nn and attention kernels against naive long-double references written here, random
 * shapes and dtypes, the sharded dropout mask, and the error paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static const ldt_dtype k_floats[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16};

static void put(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt_f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = ldt_f32_to_bf16((float)v); break;
    }
}
static double get(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ldt_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}
/* the tolerance of a dtype relative to a value's magnitude */
static double tol(ldt_dtype t, double v) {
    double rel = t == LDT_F64 ? 1e-12 : t == LDT_F32 ? 2e-6 : t == LDT_F16 ? 2e-3 : 1.6e-2;
    return rel * (fabs(v) + 1e-3);
}

static ldt__operand opnd(ldt_dtype t, ldt_shape s) {
    ldt__operand o;
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    o.data = calloc((size_t)(n ? n : 1), ldt_dtype_size(t));
    o.shape = s;
    o.dtype = t;
    return o;
}

static int64_t count(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

static void fill(uint64_t *rng, ldt__operand *o, double scale) {
    int64_t n = count(&o->shape);
    for (int64_t i = 0; i < n; i++)
        put(o->dtype, o->data, i, scale * ((double)(ldt_test_rand(rng) % 20001) / 10000.0 - 1.0));
}

Test(nn, softmax_and_norms_match_reference) {
    uint64_t rng = 5;
    for (int c = 0; c < ldt_test_cases(200); c++) {
        ldt_dtype dt = k_floats[c % 4];
        ldt_shape s = {(int)ldt_test_range(&rng, 1, 3), {0}};
        ldt__attrs a;
        ldt__operand in[3], out;
        ldt__kcall call;
        int dim, k;
        for (int d = 0; d < s.ndim; d++) s.dims[d] = ldt_test_range(&rng, 1, 6);
        dim = (int)ldt_test_range(&rng, 0, s.ndim - 1);
        in[0] = opnd(dt, s);
        fill(&rng, &in[0], 4);
        out = opnd(dt, s);
        memset(&a, 0, sizeof a);
        memset(&call, 0, sizeof call);
        call.attrs = &a;
        call.in = in;
        call.out = out;
        /* softmax and log_softmax along dim */
        for (int lg = 0; lg < 2; lg++) {
            int64_t outer = 1, n = s.dims[dim], inner = 1;
            a.i[0] = dim;
            call.op = lg ? LDT_OP_LOG_SOFTMAX : LDT_OP_SOFTMAX;
            call.nin = 1;
            cr_assert_eq(ldt__k_nn(&call), LDT_OK, "%s", ldt_last_error());
            for (int d = 0; d < dim; d++) outer *= s.dims[d];
            for (int d = dim + 1; d < s.ndim; d++) inner *= s.dims[d];
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) {
                    long double z = 0;
                    for (int64_t j = 0; j < n; j++)
                        z += expl((long double)get(dt, in[0].data, (o * n + j) * inner + i));
                    for (int64_t j = 0; j < n; j++) {
                        int64_t at = (o * n + j) * inner + i;
                        long double xv = get(dt, in[0].data, at);
                        double want = (double)(lg ? xv - logl(z) : expl(xv) / z);
                        double got = get(dt, out.data, at);
                        cr_assert(fabs(got - want) <= tol(dt, want) * 2, "%s %s case %d [%lld] = %.9g, want %.9g",
                                  lg ? "log_softmax" : "softmax", ldt_dtype_name(dt), c,
                                  (long long)at, got, want);
                    }
                }
        }
        /* layer_norm with w and b over the last k dims; rms_norm with w */
        k = (int)ldt_test_range(&rng, 1, s.ndim);
        {
            ldt_shape ws = {k, {0}};
            int64_t m = 1, rows;
            for (int d = 0; d < k; d++) ws.dims[d] = s.dims[s.ndim - k + d];
            in[1] = opnd(dt, ws);
            in[2] = opnd(dt, ws);
            fill(&rng, &in[1], 2);
            fill(&rng, &in[2], 1);
            m = count(&ws);
            rows = count(&s) / m;
            for (int rms = 0; rms < 2; rms++) {
                a.i[0] = k;
                a.i[1] = 1;
                a.i[2] = !rms;
                a.f[0] = 1e-5;
                call.op = rms ? LDT_OP_RMS_NORM : LDT_OP_LAYER_NORM;
                call.nin = rms ? 2 : 3;
                cr_assert_eq(ldt__k_nn(&call), LDT_OK, "%s", ldt_last_error());
                for (int64_t r = 0; r < rows; r++) {
                    long double mean = 0, sq = 0;
                    for (int64_t j = 0; j < m; j++) mean += get(dt, in[0].data, r * m + j);
                    mean = rms ? 0 : mean / m;
                    for (int64_t j = 0; j < m; j++) {
                        long double dv = get(dt, in[0].data, r * m + j) - mean;
                        sq += dv * dv;
                    }
                    for (int64_t j = 0; j < m; j++) {
                        double want = (double)((get(dt, in[0].data, r * m + j) - mean) /
                                               sqrtl(sq / m + 1e-5L) * get(dt, in[1].data, j) +
                                           (rms ? 0 : get(dt, in[2].data, j)));
                        double got = get(dt, out.data, r * m + j);
                        cr_assert(fabs(got - want) <= tol(dt, want) * 4 + (dt == LDT_F64 ? 0 : 1e-5),
                                  "%s %s case %d row %lld [%lld] = %.9g, want %.9g",
                                  rms ? "rms_norm" : "layer_norm", ldt_dtype_name(dt), c,
                                  (long long)r, (long long)j, got, want);
                    }
                }
            }
            free(in[1].data);
            free(in[2].data);
        }
        free(in[0].data);
        free(out.data);
    }
}

Test(nn, cross_entropy_matches_reference_and_ignores) {
    uint64_t rng = 9;
    for (int c = 0; c < ldt_test_cases(100); c++) {
        ldt_dtype dt = k_floats[c % 4];
        int64_t N = ldt_test_range(&rng, 1, 7), C = ldt_test_range(&rng, 1, 9);
        ldt__operand in[2], out;
        ldt__attrs a;
        ldt__kcall call;
        long double total = 0;
        int used = 0;
        in[0] = opnd(dt, ldt_test_shape(2, (int)N, (int)C));
        in[1] = opnd(LDT_I64, ldt_test_shape(1, (int)N));
        fill(&rng, &in[0], 30);
        for (int64_t r = 0; r < N; r++)
            ((int64_t *)in[1].data)[r] = ldt_test_range(&rng, 0, 3) == 0 ? -100 : ldt_test_range(&rng, 0, C - 1);
        out = opnd(dt, ldt_test_shape(0));
        memset(&a, 0, sizeof a);
        a.i[0] = -100;
        memset(&call, 0, sizeof call);
        call.op = LDT_OP_CROSS_ENTROPY;
        call.attrs = &a;
        call.nin = 2;
        call.in = in;
        call.out = out;
        cr_assert_eq(ldt__k_nn(&call), LDT_OK, "%s", ldt_last_error());
        for (int64_t r = 0; r < N; r++) {
            int64_t t = ((int64_t *)in[1].data)[r];
            long double z = 0;
            if (t == -100) continue;
            for (int64_t j = 0; j < C; j++) z += expl((long double)get(dt, in[0].data, r * C + j));
            total += logl(z) - get(dt, in[0].data, r * C + t);
            used++;
        }
        if (!used) {
            cr_expect(isnan(get(dt, out.data, 0)), "all ignored gives NaN");
        } else {
            double want = (double)(total / used), got = get(dt, out.data, 0);
            cr_expect(fabs(got - want) <= tol(dt, want) * 4, "%s case %d: %.9g, want %.9g",
                      ldt_dtype_name(dt), c, got, want);
        }
        /* a target out of range is an error naming the row */
        if (used) {
            for (int64_t r = 0; r < N; r++)
                if (((int64_t *)in[1].data)[r] != -100) {
                    ((int64_t *)in[1].data)[r] = C;
                    break;
                }
            cr_expect_eq(ldt__k_nn(&call), LDT_ERR_INVALID_ARGUMENT);
            cr_expect(strstr(ldt_last_error(), "out of range") != NULL, "%s", ldt_last_error());
        }
        free(in[0].data);
        free(in[1].data);
        free(out.data);
    }
}

/* Huge logits stay finite: the max is subtracted. */
Test(nn, large_logits_are_stable) {
    float x[2] = {1000, 1001}, y[2], ce;
    int64_t t = 1;
    ldt__attrs a = {{0}, {0}};
    ldt__operand in[2] = {{x, {2, {1, 2}}, LDT_F32}, {&t, {1, {1}}, LDT_I64}};
    ldt__kcall call = {LDT_OP_SOFTMAX, &a, 1, in, {y, {2, {1, 2}}, LDT_F32}, NULL, NULL};
    a.i[0] = 1;
    cr_assert_eq(ldt__k_nn(&call), LDT_OK);
    cr_expect(fabsf(y[1] - 0.731058579f) < 1e-6f && fabsf(y[0] - 0.268941421f) < 1e-6f, "%g %g",
              y[0], y[1]);
    a.i[0] = -100;
    call.op = LDT_OP_CROSS_ENTROPY;
    call.nin = 2;
    call.out = (ldt__operand){&ce, {0, {0}}, LDT_F32};
    cr_assert_eq(ldt__k_nn(&call), LDT_OK);
    cr_expect(fabsf(ce - 0.313261688f) < 1e-6f, "%.9g", ce);
}

Test(nn, dropout_mask_is_the_stream_and_sharding_exact) {
    ldt_mesh *m;
    ldt_shape g = {2, {7, 5}};
    float x[35], whole[35];
    ldt__attrs a = {{0}, {0}};
    ldt__operand in = {x, g, LDT_F32};
    ldt__kcall call = {LDT_OP_DROPOUT, &a, 1, &in, {whole, g, LDT_F32}, NULL, NULL};
    for (int i = 0; i < 35; i++) x[i] = (float)i - 10.5f;
    a.i[0] = 42;
    a.i[1] = 5;
    a.f[0] = 0.4;
    cr_assert_eq(ldt__k_nn(&call), LDT_OK);
    for (int i = 0; i < 35; i++) {
        float want = ldt__rand_bernoulli(42, 5, i, 0.4) ? 0.0f : x[i] * (float)(1.0 / 0.6);
        cr_expect_eq(whole[i], want, "[%d] %g vs %g", i, whole[i], want);
    }
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &m), LDT_OK);
    for (int v = 0; v < 2; v++) {
        ldt_placement pl[2];
        ldt_spec spec;
        int np;
        cr_assert_eq(ldt_placements_parse(v ? "S0,S1" : "R,IS0:1", 2, pl, 2, &np), LDT_OK);
        cr_assert_eq(ldt_spec_init(&spec, m, &g, pl, 2, LDT_F32), LDT_OK);
        for (int r = 0; r < 4; r++) {
            ldt_region reg;
            float lx[35], ly[35];
            int64_t n = 0, off[2], sh[2];
            cr_assert_eq(ldt_layout(&spec, r, &reg), LDT_OK);
            /* gather the rank's local input from the global one, slice by slice */
            for (int64_t k = 0; k < reg.nslices; k++) {
                ldt_region_slice(&reg, k, off, sh);
                for (int64_t i = 0; i < sh[0]; i++)
                    for (int64_t j = 0; j < sh[1]; j++) lx[n++] = x[(off[0] + i) * 5 + off[1] + j];
            }
            in = (ldt__operand){lx, reg.local_shape, LDT_F32};
            call.in = &in;
            call.out = (ldt__operand){ly, reg.local_shape, LDT_F32};
            call.region = &reg;
            call.global_shape = &g;
            cr_assert_eq(ldt__k_nn(&call), LDT_OK, "%s", ldt_last_error());
            n = 0;
            for (int64_t k = 0; k < reg.nslices; k++) {
                ldt_region_slice(&reg, k, off, sh);
                for (int64_t i = 0; i < sh[0]; i++)
                    for (int64_t j = 0; j < sh[1]; j++, n++)
                        cr_expect_eq(ly[n], whole[(off[0] + i) * 5 + off[1] + j], "rank %d", r);
            }
        }
    }
    ldt_mesh_destroy(m);
}

/* Attention against a reference that forms the full score matrix, masks, normalises. */
Test(attention, matches_reference) {
    uint64_t rng = 3;
    for (int c = 0; c < ldt_test_cases(60); c++) {
        ldt_dtype dt = k_floats[c % 4];
        int64_t B = ldt_test_range(&rng, 1, 3), Lq = ldt_test_range(&rng, 1, 6),
                Lk = ldt_test_range(&rng, 1, 6), E = ldt_test_range(&rng, 1, 5),
                Ev = ldt_test_range(&rng, 1, 4);
        int causal = c % 3 == 0;
        ldt__operand in[3], out;
        ldt__attrs a;
        ldt__kcall call;
        if (causal) Lk = Lq;
        in[0] = opnd(dt, ldt_test_shape(3, (int)B, (int)Lq, (int)E));
        in[1] = opnd(dt, ldt_test_shape(3, (int)B, (int)Lk, (int)E));
        in[2] = opnd(dt, ldt_test_shape(3, (int)B, (int)Lk, (int)Ev));
        for (int i = 0; i < 3; i++) fill(&rng, &in[i], 2);
        out = opnd(dt, ldt_test_shape(3, (int)B, (int)Lq, (int)Ev));
        memset(&a, 0, sizeof a);
        a.i[2] = causal;
        a.f[1] = 1 / sqrt((double)E);
        memset(&call, 0, sizeof call);
        call.op = LDT_OP_SDPA;
        call.attrs = &a;
        call.nin = 3;
        call.in = in;
        call.out = out;
        cr_assert_eq(ldt__k_attention(&call), LDT_OK, "%s", ldt_last_error());
        for (int64_t b = 0; b < B; b++) {
            long double S[6][6], den[6] = {0};
            for (int64_t i = 0; i < Lq; i++)
                for (int64_t j = 0; j < Lk; j++) {
                    long double s = 0;
                    for (int64_t e = 0; e < E; e++)
                        s += (long double)get(dt, in[0].data, (b * Lq + i) * E + e) *
                             get(dt, in[1].data, (b * Lk + j) * E + e);
                    S[i][j] = (causal && j > i) ? 0 : expl(s / sqrtl((long double)E));
                    den[i] += S[i][j];
                }
            for (int64_t i = 0; i < Lq; i++)
                for (int64_t e = 0; e < Ev; e++) {
                    long double o = 0;
                    double want, got;
                    for (int64_t j = 0; j < Lk; j++)
                        o += S[i][j] / den[i] * get(dt, in[2].data, (b * Lk + j) * Ev + e);
                    want = (double)o;
                    got = get(dt, out.data, (b * Lq + i) * Ev + e);
                    cr_assert(fabs(got - want) <= tol(dt, want) * 4 + (dt == LDT_F64 ? 1e-13 : 1e-5),
                              "%s causal %d case %d [%lld,%lld,%lld] = %.9g, want %.9g",
                              ldt_dtype_name(dt), causal, c, (long long)b, (long long)i,
                              (long long)e, got, want);
                }
        }
        for (int i = 0; i < 3; i++) free(in[i].data);
        free(out.data);
    }
}

Test(nn, unsupported_dtypes_and_bad_calls) {
    int32_t xi[4] = {1, 2, 3, 4}, yi[4];
    ldt__attrs a = {{0}, {0}};
    ldt__operand in = {xi, {1, {4}}, LDT_I32};
    ldt__kcall call = {LDT_OP_SOFTMAX, &a, 1, &in, {yi, {1, {4}}, LDT_I32}, NULL, NULL};
    cr_expect_eq(ldt__k_nn(&call), LDT_ERR_UNSUPPORTED);
    cr_expect(strstr(ldt_last_error(), "softmax: input is i32") != NULL, "%s", ldt_last_error());
    call.op = LDT_OP_SDPA;
    call.nin = 1;
    cr_expect_eq(ldt__k_attention(&call), LDT_ERR_UNSUPPORTED);
}
