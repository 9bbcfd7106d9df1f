/* CPU matmul and linear kernels against a naive f64 reference and hand-computed cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "core/ops.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------------------------------
 * Helpers: tensors with their exact values in double, and half rounding done independently
 * of the library (scale to an integer quantum, round to nearest even).
 */
typedef struct tensor {
    ldt__operand op;
    double *v; /* the stored values, exactly */
    int64_t n;
} tensor;

static int64_t numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

static ldt_shape shp(int ndim, const int64_t *dims) {
    ldt_shape s = {ndim, {0}};
    for (int d = 0; d < ndim; d++) s.dims[d] = dims[d];
    return s;
}

/* double -> f16/bf16 rounded once: the quantum at d's binade (or the subnormal quantum), and
 * nearbyint's round-half-even on d / quantum. The result is exact in f32. */
static double round_half_ref(ldt_dtype t, double d) {
    if (d == 0 || !isfinite(d)) return d;
    int ex;
    frexp(d, &ex); /* |d| in [2^(ex-1), 2^ex) */
    int bits = t == LDT_F16 ? 11 : 8, emin = t == LDT_F16 ? -24 : -133;
    int qe = ex - bits < emin ? emin : ex - bits;
    double r = ldexp(nearbyint(ldexp(d, -qe)), qe);
    if (t == LDT_F16 && fabs(r) >= 65536.0) return copysign(INFINITY, d);
    return r;
}

static double stored(ldt_dtype t, const void *data, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)data)[i];
    case LDT_F64: return ((const double *)data)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)data)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)data)[i]);
    default: return NAN;
    }
}

static void store(ldt_dtype t, void *data, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)data)[i] = (float)v; break;
    case LDT_F64: ((double *)data)[i] = v; break;
    case LDT_F16: ((uint16_t *)data)[i] = ldt__f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)data)[i] = ldt__f32_to_bf16((float)v); break;
    default: break;
    }
}

/* A tensor of random values in [-1, 1] (or the given ones), exactly representable. */
static tensor mk(ldt_dtype t, ldt_shape s, uint64_t *rng, const double *given) {
    tensor x;
    x.n = numel(&s);
    x.op.shape = s;
    x.op.dtype = t;
    size_t esz = ldt_dtype_size(t);
    x.op.data = calloc((size_t)(x.n ? x.n : 1), esz ? esz : 1);
    x.v = calloc((size_t)(x.n ? x.n : 1), sizeof(double));
    uint64_t local = 99;
    if (!rng) rng = &local;
    for (int64_t i = 0; i < x.n; i++) {
        double v = given ? given[i] : (double)(int64_t)(ldt_test_rand(rng) % 2001) / 1000.0 - 1.0;
        if (ldt_dtype_is_float(t)) {
            store(t, x.op.data, i, v);
            x.v[i] = stored(t, x.op.data, i);
        }
    }
    return x;
}

static void tfree(tensor *x) {
    free(x->op.data);
    free(x->v);
}

/* The naive reference: a 1-D a is [1, K], a 1-D b is [K, 1]; batch dims broadcast from the
 * right; out[batch, m, n] = sum_k a[batch', m, k] b[batch'', k, n], in double, with the sum of
 * |terms| for the tolerance. Returns the element count, -1 if the shapes do not match. */
static int64_t ref_matmul(const tensor *a, const tensor *b, double **out, double **mag,
                          ldt_shape *oshape) {
    ldt_shape as = a->op.shape, bs = b->op.shape;
    int a1 = as.ndim == 1, b1 = bs.ndim == 1;
    if (a1) as = shp(2, (int64_t[]){1, as.dims[0]});
    if (b1) bs = shp(2, (int64_t[]){bs.dims[0], 1});
    int64_t M = as.dims[as.ndim - 2], K = as.dims[as.ndim - 1], N = bs.dims[bs.ndim - 1];
    if (bs.dims[bs.ndim - 2] != K) return -1;
    int nb = (as.ndim > bs.ndim ? as.ndim : bs.ndim) - 2;
    int64_t bd[LDT_MAX_DIMS];
    for (int d = 0; d < nb; d++) {
        int da = d - (nb - (as.ndim - 2)), db = d - (nb - (bs.ndim - 2));
        int64_t x = da >= 0 ? as.dims[da] : 1, y = db >= 0 ? bs.dims[db] : 1;
        if (x != y && x != 1 && y != 1) return -1;
        bd[d] = x == 1 ? y : x;
    }
    oshape->ndim = 0;
    for (int d = 0; d < nb; d++) oshape->dims[oshape->ndim++] = bd[d];
    if (!a1) oshape->dims[oshape->ndim++] = M;
    if (!b1) oshape->dims[oshape->ndim++] = N;
    int64_t total = numel(oshape);
    *out = calloc((size_t)(total ? total : 1), sizeof(double));
    *mag = calloc((size_t)(total ? total : 1), sizeof(double));
    int64_t batch = 1;
    for (int d = 0; d < nb; d++) batch *= bd[d];
    for (int64_t bi = 0; bi < batch; bi++) {
        /* batch multi-index, then each input's flat batch index with broadcast dims at 0 */
        int64_t idx[LDT_MAX_DIMS], rem = bi;
        for (int d = nb - 1; d >= 0; d--) {
            idx[d] = rem % bd[d];
            rem /= bd[d];
        }
        int64_t ai = 0, bj = 0;
        for (int d = 0; d < nb; d++) {
            int da = d - (nb - (as.ndim - 2)), db = d - (nb - (bs.ndim - 2));
            if (da >= 0) ai = ai * as.dims[da] + (as.dims[da] == 1 ? 0 : idx[d]);
            if (db >= 0) bj = bj * bs.dims[db] + (bs.dims[db] == 1 ? 0 : idx[d]);
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0, g = 0;
                for (int64_t k = 0; k < K; k++) {
                    double t = a->v[(ai * M + m) * K + k] * b->v[(bj * K + k) * N + n];
                    s += t;
                    g += fabs(t);
                }
                (*out)[(bi * M + m) * N + n] = s;
                (*mag)[(bi * M + m) * N + n] = g;
            }
    }
    return total;
}

/* Ordered integer of a half's bits, so adjacent values differ by 1 (and -0 == +0). */
static int32_t half_ord(uint16_t h) {
    int32_t mag = h & 0x7fff;
    return (h & 0x8000) ? -mag : mag;
}

static uint16_t half_bits(ldt_dtype t, double v) {
    return t == LDT_F16 ? ldt__f32_to_f16((float)v) : ldt__f32_to_bf16((float)v);
}

/* got vs want: f32 within 1e-5 * sum|terms|, f64 1e-12 * that; halves within 1 ulp of the
 * f64 result rounded once. Prints the first few values that differ. */
static int check_close(const char *what, ldt_dtype t, const void *got, const double *want,
                       const double *mag, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = stored(t, got, i);
        int ok;
        if (t == LDT_F32 || t == LDT_F64) {
            double tol = (t == LDT_F32 ? 1e-5 : 1e-12) * mag[i];
            ok = fabs(g - want[i]) <= tol;
        } else {
            uint16_t gb = ((const uint16_t *)got)[i];
            uint16_t wb = half_bits(t, round_half_ref(t, want[i]));
            ok = abs(half_ord(gb) - half_ord(wb)) <= 1;
        }
        if (!ok && bad++ < 8)
            fprintf(stderr, "%s [%s] element %lld: got %.17g, want %.17g (sum|terms| %.3g)\n", what,
                    ldt_dtype_name(t), (long long)i, g, want[i], mag[i]);
    }
    return bad;
}

static ldt_status run_op(int op, const tensor *ins, int nin, ldt__operand *out) {
    ldt__operand in[3];
    for (int k = 0; k < nin; k++) in[k] = ins[k].op;
    ldt__kcall c = {op, NULL, nin, in, *out, NULL, NULL, NULL};
    return ldt__k_matmul(&c);
}

static const ldt_dtype k_floats[4] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16};

/* One matmul case in one dtype, against the reference. */
static void check_matmul_case(ldt_dtype t, ldt_shape as, ldt_shape bs, uint64_t *rng) {
    tensor ab[2] = {mk(t, as, rng, NULL), mk(t, bs, rng, NULL)};
    double *want, *mag;
    ldt_shape os;
    int64_t n = ref_matmul(&ab[0], &ab[1], &want, &mag, &os);
    char sa[64], sb[64], what[160];
    ldt_shape_format(&as, sa, sizeof sa);
    ldt_shape_format(&bs, sb, sizeof sb);
    snprintf(what, sizeof what, "matmul %s @ %s", sa, sb);
    cr_assert(n >= 0, "%s: bad test case", what);
    ldt__operand out = {calloc((size_t)(n ? n : 1), 8), os, t};
    /* poison: every output element must be written */
    memset(out.data, 0x7f, (size_t)(n ? n : 1) * ldt_dtype_size(t));
    ldt_status st = run_op(LDT_OP_MATMUL, ab, 2, &out);
    cr_assert_eq(st, LDT_OK, "%s [%s]: %s", what, ldt_dtype_name(t), ldt_last_error());
    int bad = check_close(what, t, out.data, want, mag, n);
    cr_assert_eq(bad, 0, "%s [%s]: %d of %lld elements differ", what, ldt_dtype_name(t), bad,
                 (long long)n);
    free(out.data);
    free(want);
    free(mag);
    tfree(&ab[0]);
    tfree(&ab[1]);
}

#define S(...)                                                                                     \
    shp((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* ---------------------------------------------------------------------------------------
 * Hand-computed.
 */
Test(matmul, hand_2x3_by_3x2) {
    /* [1 2 3; 4 5 6] @ [7 8; 9 10; 11 12] = [1*7+2*9+3*11, 1*8+2*10+3*12; ...] */
    static const double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    static const double want[4] = {58, 64, 139, 154};
    for (int di = 0; di < 4; di++) {
        ldt_dtype t = k_floats[di];
        tensor ab[2] = {mk(t, S(2, 3), NULL, a), mk(t, S(3, 2), NULL, b)};
        ldt__operand out = {calloc(4, 8), S(2, 2), t};
        cr_assert_eq(run_op(LDT_OP_MATMUL, ab, 2, &out), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 4; i++) /* small integers: exact in every dtype */
            cr_assert(stored(t, out.data, i) == want[i], "[%s] element %d: got %g, want %g",
                      ldt_dtype_name(t), i, stored(t, out.data, i), want[i]);
        free(out.data);
        tfree(&ab[0]);
        tfree(&ab[1]);
    }
}

Test(matmul, hand_dot_and_vectors) {
    /* [1 2 3] . [4 5 6] = 32 (0-dim); [1 2 3] @ [[1 0],[0 1],[1 1]] = [4 5];
     * [[1 0 1],[0 1 1]] @ [1 2 3] = [4 5] */
    static const double v1[3] = {1, 2, 3}, v2[3] = {4, 5, 6}, m[6] = {1, 0, 0, 1, 1, 1},
                        mt[6] = {1, 0, 1, 0, 1, 1};
    tensor d[2] = {mk(LDT_F64, S(3), NULL, v1), mk(LDT_F64, S(3), NULL, v2)};
    double r[2] = {0, 0};
    ldt__operand out = {r, {0, {0}}, LDT_F64};
    cr_assert_eq(run_op(LDT_OP_MATMUL, d, 2, &out), LDT_OK, "%s", ldt_last_error());
    cr_assert(r[0] == 32, "dot: got %g, want 32", r[0]);
    tensor vm[2] = {mk(LDT_F64, S(3), NULL, v1), mk(LDT_F64, S(3, 2), NULL, m)};
    out.shape = S(2);
    cr_assert_eq(run_op(LDT_OP_MATMUL, vm, 2, &out), LDT_OK, "%s", ldt_last_error());
    cr_assert(r[0] == 4 && r[1] == 5, "vec @ mat: got [%g %g], want [4 5]", r[0], r[1]);
    tensor mv[2] = {mk(LDT_F64, S(2, 3), NULL, mt), mk(LDT_F64, S(3), NULL, v1)};
    cr_assert_eq(run_op(LDT_OP_MATMUL, mv, 2, &out), LDT_OK, "%s", ldt_last_error());
    cr_assert(r[0] == 4 && r[1] == 5, "mat @ vec: got [%g %g], want [4 5]", r[0], r[1]);
    for (int k = 0; k < 2; k++) {
        tfree(&d[k]);
        tfree(&vm[k]);
        tfree(&mv[k]);
    }
}

Test(linear, hand_with_bias) {
    /* x [1 2], w [[1 0],[0 1],[1 1]] (out 3, in 2), b [10 20 30]: y = [11 22 33] */
    static const double x[2] = {1, 2}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {10, 20, 30};
    for (int di = 0; di < 4; di++) {
        ldt_dtype t = k_floats[di];
        tensor in[3] = {mk(t, S(1, 2), NULL, x), mk(t, S(3, 2), NULL, w), mk(t, S(3), NULL, b)};
        ldt__operand out = {calloc(3, 8), S(1, 3), t};
        cr_assert_eq(run_op(LDT_OP_LINEAR, in, 3, &out), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 3; i++)
            cr_assert(stored(t, out.data, i) == 11.0 * (i + 1), "[%s] y[%d] = %g, want %g",
                      ldt_dtype_name(t), i, stored(t, out.data, i), 11.0 * (i + 1));
        /* without the bias: [1 2 3] */
        cr_assert_eq(run_op(LDT_OP_LINEAR, in, 2, &out), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 3; i++)
            cr_assert(stored(t, out.data, i) == i + 1.0, "[%s] no bias: y[%d] = %g, want %d",
                      ldt_dtype_name(t), i, stored(t, out.data, i), i + 1);
        free(out.data);
        for (int k = 0; k < 3; k++) tfree(&in[k]);
    }
}

/* ---------------------------------------------------------------------------------------
 * Every torch.matmul case against the reference, in every float dtype.
 */
Test(matmul, broadcast_cases) {
    const struct {
        ldt_shape a, b;
    } cases[] = {
        {S(7), S(7)},                         /* dot -> 0-dim */
        {S(5, 7), S(7, 6)},                   /* 2-D */
        {S(7), S(7, 6)},                      /* 1-D @ 2-D -> [6] */
        {S(5, 7), S(7)},                      /* 2-D @ 1-D -> [5] */
        {S(7), S(3, 7, 6)},                   /* 1-D @ batched -> [3, 6] */
        {S(3, 5, 7), S(7)},                   /* batched @ 1-D -> [3, 5] */
        {S(3, 5, 7), S(3, 7, 6)},             /* same batch */
        {S(3, 5, 7), S(7, 6)},                /* b shared: folds into one GEMM */
        {S(2, 3, 5, 7), S(7, 6)},             /* b shared, two batch dims */
        {S(5, 7), S(3, 7, 6)},                /* a shared */
        {S(2, 1, 5, 7), S(3, 7, 6)},          /* -> [2, 3, 5, 6] */
        {S(1, 5, 7), S(4, 7, 6)},             /* size-1 batch dim broadcast */
        {S(3, 1, 5, 7), S(1, 2, 7, 6)},       /* both broadcast */
        {S(2, 3, 5, 7), S(2, 3, 7, 6)},       /* 4-D */
        {S(4, 1, 5, 7), S(4, 7, 6)},          /* a broadcast on the inner batch dim */
        {S(2, 1, 2, 3, 4), S(1, 3, 1, 4, 2)}, /* 3 batch dims, mixed */
        {S(1, 1), S(1, 1)},
        {S(1), S(1)},
        /* zero sizes */
        {S(0, 7), S(7, 6)},
        {S(5, 0), S(0, 6)}, /* K = 0: zeros */
        {S(0), S(0)},       /* empty dot: 0 */
        {S(5, 7), S(7, 0)},
        {S(0, 5, 7), S(7, 6)},
        {S(2, 0, 5, 7), S(1, 7, 6)},
        {S(3, 5, 0), S(3, 0, 6)},
        {S(3, 5, 7), S(0, 1, 7, 6)},
    };
    uint64_t rng = 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int di = 0; di < 4; di++)
            check_matmul_case(k_floats[di], cases[k].a, cases[k].b, &rng);
}

/* Random shapes and broadcast patterns, larger K (accumulation order matters there). */
Test(matmul, random_shapes) {
    uint64_t rng = 2;
    int cases = ldt_test_cases(60);
    for (int c = 0; c < cases; c++) {
        int nb = (int)ldt_test_range(&rng, 0, 3);
        int64_t M = ldt_test_range(&rng, 1, 40), K = ldt_test_range(&rng, 1, 200),
                N = ldt_test_range(&rng, 1, 40);
        ldt_shape as = {0, {0}}, bs = {0, {0}};
        int an = nb - (int)ldt_test_range(&rng, 0, nb), bn = nb - (int)ldt_test_range(&rng, 0, nb);
        for (int d = 0; d < nb; d++) {
            int64_t full = ldt_test_range(&rng, 1, 3);
            int which = (int)ldt_test_range(&rng, 0, 2); /* 0: both full, 1: a is 1, 2: b is 1 */
            if (d >= nb - an) as.dims[as.ndim++] = which == 1 ? 1 : full;
            if (d >= nb - bn) bs.dims[bs.ndim++] = which == 2 ? 1 : full;
        }
        int avec = ldt_test_range(&rng, 0, 5) == 0, bvec = ldt_test_range(&rng, 0, 5) == 0;
        if (avec && as.ndim == 0)
            as.dims[as.ndim++] = K;
        else {
            as.dims[as.ndim++] = M;
            as.dims[as.ndim++] = K;
        }
        if (bvec && bs.ndim == 0)
            bs.dims[bs.ndim++] = K;
        else {
            bs.dims[bs.ndim++] = K;
            bs.dims[bs.ndim++] = N;
        }
        check_matmul_case(k_floats[c % 4], as, bs, &rng);
    }
}

/* ---------------------------------------------------------------------------------------
 * linear against the reference: y[r, o] = sum_k x[r, k] w[o, k] (+ b[o]).
 */
static void check_linear_case(ldt_dtype t, ldt_shape xs, int64_t nout, int bias, uint64_t *rng) {
    int64_t K = xs.dims[xs.ndim - 1];
    tensor in[3] = {mk(t, xs, rng, NULL), mk(t, S(nout, K), rng, NULL), mk(t, S(nout), rng, NULL)};
    ldt_shape ys = xs;
    ys.dims[ys.ndim - 1] = nout;
    int64_t rows = 1, n = numel(&ys);
    for (int d = 0; d < xs.ndim - 1; d++) rows *= xs.dims[d];
    double *want = calloc((size_t)(n ? n : 1), sizeof(double)),
           *mag = calloc((size_t)(n ? n : 1), sizeof(double));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < nout; o++) {
            double s = bias ? in[2].v[o] : 0, g = fabs(s);
            for (int64_t k = 0; k < K; k++) {
                s += in[0].v[r * K + k] * in[1].v[o * K + k];
                g += fabs(in[0].v[r * K + k] * in[1].v[o * K + k]);
            }
            want[r * nout + o] = s;
            mag[r * nout + o] = g;
        }
    ldt__operand out = {calloc((size_t)(n ? n : 1), 8), ys, t};
    memset(out.data, 0x7f, (size_t)(n ? n : 1) * ldt_dtype_size(t));
    char sx[64], what[128];
    ldt_shape_format(&xs, sx, sizeof sx);
    snprintf(what, sizeof what, "linear x %s, out %lld, bias %d", sx, (long long)nout, bias);
    cr_assert_eq(run_op(LDT_OP_LINEAR, in, bias ? 3 : 2, &out), LDT_OK, "%s: %s", what,
                 ldt_last_error());
    int bad = check_close(what, t, out.data, want, mag, n);
    cr_assert_eq(bad, 0, "%s [%s]: %d elements differ", what, ldt_dtype_name(t), bad);
    free(out.data);
    free(want);
    free(mag);
    for (int k = 0; k < 3; k++) tfree(&in[k]);
}

Test(linear, against_reference) {
    uint64_t rng = 3;
    const struct {
        ldt_shape x;
        int64_t nout;
    } cases[] = {
        {S(4, 9), 5}, {S(9), 5},    {S(2, 3, 9), 5}, {S(2, 3, 4, 17), 11}, {S(1, 1), 1},
        {S(0, 9), 5}, {S(4, 9), 0}, {S(4, 0), 5},    {S(2, 0, 9), 5},      {S(33, 64), 48},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int di = 0; di < 4; di++)
            for (int bias = 0; bias < 2; bias++)
                check_linear_case(k_floats[di], cases[k].x, cases[k].nout, bias, &rng);
}

/* ---------------------------------------------------------------------------------------
 * Errors.
 */
Test(matmul, unsupported_dtypes) {
    static const ldt_dtype ints[4] = {LDT_I32, LDT_I64, LDT_U8, LDT_BOOL};
    for (int di = 0; di < 4; di++) {
        ldt_dtype t = ints[di];
        tensor in[3] = {mk(t, S(2, 3), NULL, NULL), mk(t, S(3, 2), NULL, NULL),
                        mk(t, S(3), NULL, NULL)};
        ldt__operand out = {calloc(4, 8), S(2, 2), t};
        ldt_status st = run_op(LDT_OP_MATMUL, in, 2, &out);
        cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "matmul %s: status %d", ldt_dtype_name(t), st);
        cr_assert(strstr(ldt_last_error(), "matmul") && strstr(ldt_last_error(), ldt_dtype_name(t)),
                  "message should name the op and the dtype: %s", ldt_last_error());
        in[1].op.shape = S(3, 3);
        out.shape = S(2, 3);
        for (int nin = 2; nin <= 3; nin++) {
            st = run_op(LDT_OP_LINEAR, in, nin, &out);
            cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "linear %s: status %d", ldt_dtype_name(t), st);
            cr_assert(strstr(ldt_last_error(), "linear") &&
                          strstr(ldt_last_error(), ldt_dtype_name(t)),
                      "message should name the op and the dtype: %s", ldt_last_error());
        }
        free(out.data);
        for (int k = 0; k < 3; k++) tfree(&in[k]);
    }
}

static void expect_invalid(int op, ldt_shape a, ldt_shape b, ldt_shape o, const char *needle) {
    tensor in[2] = {mk(LDT_F32, a, NULL, NULL), mk(LDT_F32, b, NULL, NULL)};
    ldt__operand out = {calloc((size_t)numel(&o) + 1, 8), o, LDT_F32};
    ldt_status st = run_op(op, in, 2, &out);
    cr_assert_eq(st, LDT_ERR_INVALID_ARGUMENT, "expected invalid argument, got %d (%s)", st,
                 ldt_last_error());
    cr_assert(strstr(ldt_last_error(), needle), "message '%s' should contain '%s'",
              ldt_last_error(), needle);
    free(out.data);
    tfree(&in[0]);
    tfree(&in[1]);
}

Test(matmul, shape_errors) {
    expect_invalid(LDT_OP_MATMUL, S(2, 3), S(4, 2), S(2, 2), "matmul: inner dims differ");
    expect_invalid(LDT_OP_MATMUL, S(3), S(4), (ldt_shape){0, {0}}, "inner dims differ");
    expect_invalid(LDT_OP_MATMUL, (ldt_shape){0, {0}}, S(3), S(3), "at least 1 dim");
    expect_invalid(LDT_OP_MATMUL, S(2, 2, 3), S(3, 3, 2), S(3, 2, 2), "do not broadcast");
    expect_invalid(LDT_OP_MATMUL, S(2, 3), S(3, 2), S(2, 3),
                   "output shape is [2,3], expected [2,2]");
    expect_invalid(LDT_OP_MATMUL, S(3), S(3), S(1), "output shape");
    expect_invalid(LDT_OP_LINEAR, S(2, 3), S(4, 2), S(2, 4), "linear: expected x [..., in]");
    expect_invalid(LDT_OP_LINEAR, S(2, 3), S(3), S(2, 3), "linear");
    expect_invalid(LDT_OP_LINEAR, S(2, 3), S(4, 3), S(2, 5), "output shape");
    /* a bias of the wrong length; mixed dtypes */
    tensor in[3] = {mk(LDT_F32, S(2, 3), NULL, NULL), mk(LDT_F32, S(4, 3), NULL, NULL),
                    mk(LDT_F32, S(3), NULL, NULL)};
    ldt__operand out = {calloc(8, 4), S(2, 4), LDT_F32};
    cr_assert_eq(run_op(LDT_OP_LINEAR, in, 3, &out), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "bias is [3], expected [4]"), "%s", ldt_last_error());
    in[1].op.dtype = LDT_F64;
    cr_assert_eq(run_op(LDT_OP_LINEAR, in, 2, &out), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "input 1 is f64"), "%s", ldt_last_error());
    cr_assert_eq(run_op(LDT_OP_LINEAR, in, 1, &out), LDT_ERR_INVALID_ARGUMENT);
    ldt__kcall c = {LDT_OP_ADD, NULL, 2, &in[0].op, out, NULL, NULL, NULL};
    cr_assert_eq(ldt__k_matmul(&c), LDT_ERR_INTERNAL);
    free(out.data);
    for (int k = 0; k < 3; k++) tfree(&in[k]);
}
