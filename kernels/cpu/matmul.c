/* CPU kernels for matmul (torch.matmul rules) and linear, on OpenBLAS GEMM. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/kernel.h"

/* One GEMM problem, repeated over broadcast batch dims:
 *   C[b] (M, N) = A[b] (M, K) @ B[b] (K, N)     (B[b] is (N, K), used transposed, if transb)
 * A and B are contiguous per matrix; astr/bstr are the element strides of each batch dim in
 * the inputs, 0 where that input is broadcast; C is contiguous [batch..., M, N]. */
typedef struct mm_plan {
    int64_t M, N, K;
    int transb;
    int nbatch;
    int64_t bdims[LDT_MAX_DIMS];
    int64_t astr[LDT_MAX_DIMS], bstr[LDT_MAX_DIMS];
    int64_t batch;    /* product of bdims */
    const void *bias; /* LINEAR: [N] of the compute dtype, or NULL */
} mm_plan;

static const char *mm_name(int op) { return op == LDT_OP_LINEAR ? "linear" : "matmul"; }

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* ---------------------------------------------------------------------------------------
 * GEMM over the batch, for f32 (sgemm) and f64 (dgemm). cblas takes int sizes, so the plan
 * was checked against INT_MAX before we get here.
 */
#define LDT__MM_RUN(NAME, T, GEMM)                                                                 \
    static void NAME(const mm_plan *p, const T *A, const T *B, T *C) {                             \
        int64_t M = p->M, N = p->N, K = p->K, mats = p->batch;                                     \
        int64_t idx[LDT_MAX_DIMS] = {0};                                                           \
        int64_t aoff = 0, boff = 0;                                                                \
        /* bias: prefill each row of C and let GEMM add to it (beta 1) */                          \
        T beta = p->bias ? (T)1 : (T)0;                                                            \
        /* B shared by every matrix and A not broadcast anywhere: the batch folds into M,          \
         * one big GEMM instead of many small ones (the common linear / x @ W case) */             \
        int fold = mats > 1;                                                                       \
        for (int d = 0; d < p->nbatch && fold; d++)                                                \
            if (p->bdims[d] > 1 && (p->bstr[d] != 0 || p->astr[d] == 0)) fold = 0;                 \
        if (fold && M * mats <= INT_MAX) {                                                         \
            M *= mats;                                                                             \
            mats = 1;                                                                              \
        }                                                                                          \
        if (p->bias)                                                                               \
            for (int64_t r = 0; r < M * mats; r++)                                                 \
                memcpy(C + r * N, p->bias, (size_t)N * sizeof(T));                                 \
        for (int64_t m = 0; m < mats; m++) {                                                       \
            GEMM(CblasRowMajor, CblasNoTrans, p->transb ? CblasTrans : CblasNoTrans, (int)M,       \
                 (int)N, (int)K, (T)1, A + aoff, (int)K, B + boff, p->transb ? (int)K : (int)N,    \
                 beta, C + m * M * N, (int)N);                                                     \
            /* odometer over the batch dims, moving both input offsets with it */                  \
            for (int d = p->nbatch - 1; d >= 0; d--) {                                             \
                aoff += p->astr[d];                                                                \
                boff += p->bstr[d];                                                                \
                if (++idx[d] < p->bdims[d]) break;                                                 \
                aoff -= p->astr[d] * p->bdims[d];                                                  \
                boff -= p->bstr[d] * p->bdims[d];                                                  \
                idx[d] = 0;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }

LDT__MM_RUN(mm_run_f32, float, cblas_sgemm)
LDT__MM_RUN(mm_run_f64, double, cblas_dgemm)
#undef LDT__MM_RUN

/* K == 0: every output is the empty sum (BLAS wants lda >= 1, so no GEMM call). */
static void mm_fill_empty_sum(const mm_plan *p, void *C, size_t esz) {
    int64_t rows = p->batch * p->M;
    for (int64_t r = 0; r < rows; r++) {
        char *row = (char *)C + (size_t)(r * p->N) * esz;
        if (p->bias)
            memcpy(row, p->bias, (size_t)p->N * esz);
        else
            memset(row, 0, (size_t)p->N * esz);
    }
}

/* Halves to f32 (exact) and f32 back to the half dtype (one rounding). */
static void half_to_f32(ldt_dtype t, const uint16_t *src, float *dst, int64_t n) {
    if (t == LDT_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = ldt__f16_to_f32(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = ldt__bf16_to_f32(src[i]);
}

static void f32_to_half(ldt_dtype t, const float *src, uint16_t *dst, int64_t n) {
    if (t == LDT_F16)
        for (int64_t i = 0; i < n; i++) dst[i] = ldt__f32_to_f16(src[i]);
    else
        for (int64_t i = 0; i < n; i++) dst[i] = ldt__f32_to_bf16(src[i]);
}

/* Runs a checked plan in the operands' dtype. */
static ldt_status mm_execute(const ldt__kcall *c, mm_plan *p, const void *A, const void *B,
                             const void *bias, int64_t anumel, int64_t bnumel) {
    ldt_dtype t = c->out.dtype;
    int64_t cnumel = numel_of(&c->out.shape);
    if (cnumel == 0) return LDT_OK; /* a zero batch, M or N: nothing to write */
    if (t == LDT_F32 || t == LDT_F64) {
        p->bias = bias;
        if (p->K == 0)
            mm_fill_empty_sum(p, c->out.data, t == LDT_F32 ? 4 : 8);
        else if (t == LDT_F32)
            mm_run_f32(p, A, B, c->out.data);
        else
            mm_run_f64(p, A, B, c->out.data);
        return LDT_OK;
    }
    /* f16 / bf16: widen the operands once, accumulate in f32 GEMM, round once on store */
    float *fa = malloc((size_t)(anumel ? anumel : 1) * sizeof(float));
    float *fb = malloc((size_t)(bnumel ? bnumel : 1) * sizeof(float));
    float *fbias = malloc((size_t)(p->N ? p->N : 1) * sizeof(float));
    float *fc = malloc((size_t)cnumel * sizeof(float));
    ldt_status st = LDT_OK;
    if (!fa || !fb || !fbias || !fc) {
        st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for the f32 copies of %s operands",
                        mm_name(c->op), ldt_dtype_name(t));
        goto done;
    }
    half_to_f32(t, A, fa, anumel);
    half_to_f32(t, B, fb, bnumel);
    if (bias) half_to_f32(t, bias, fbias, p->N);
    p->bias = bias ? fbias : NULL;
    if (p->K == 0)
        mm_fill_empty_sum(p, fc, sizeof(float));
    else
        mm_run_f32(p, fa, fb, fc);
    f32_to_half(t, fc, c->out.data, cnumel);
done:
    free(fa);
    free(fb);
    free(fbias);
    free(fc);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Shape checks and plans.
 */
static ldt_status check_dtypes(const ldt__kcall *c) {
    ldt_dtype t = c->out.dtype;
    const char *name = mm_name(c->op);
    for (int k = 0; k < c->nin; k++)
        if (c->in[k].dtype != t)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: input %d is %s but the output is %s (all must match)", name, k,
                     ldt_dtype_name(c->in[k].dtype), ldt_dtype_name(t));
    if (!ldt_dtype_is_float(t))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16 are)",
                 name, ldt_dtype_name(t));
    return LDT_OK;
}

static ldt_status check_out_shape(const ldt__kcall *c, const ldt_shape *want) {
    if (ldt_shape_equal(want, &c->out.shape)) return LDT_OK;
    char w[128], g[128];
    ldt_shape_format(want, w, sizeof w);
    ldt_shape_format(&c->out.shape, g, sizeof g);
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output shape is %s, expected %s", mm_name(c->op), g, w);
}

static ldt_status check_int_range(const ldt__kcall *c, const mm_plan *p) {
    if (p->M > INT_MAX || p->N > INT_MAX || p->K > INT_MAX)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "%s: matrix dims M=%lld N=%lld K=%lld exceed the BLAS int range", mm_name(c->op),
                 (long long)p->M, (long long)p->N, (long long)p->K);
    return LDT_OK;
}

/* torch.matmul: a 1-D a is a row [1, K] and a 1-D b a column [K, 1], the added dim removed
 * from the result; dims before the last two broadcast (numpy rules). */
static ldt_status matmul_kernel(const ldt__kcall *c) {
    if (c->nin != 2) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "matmul: takes 2 inputs, got %d", c->nin);
    LDT_CHECK(check_dtypes(c));
    const ldt_shape *as = &c->in[0].shape, *bs = &c->in[1].shape;
    char sa[128], sb[128];
    ldt_shape_format(as, sa, sizeof sa);
    ldt_shape_format(bs, sb, sizeof sb);
    if (as->ndim < 1 || bs->ndim < 1)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "matmul: both operands need at least 1 dim: a is %s, b is %s", sa, sb);
    mm_plan p;
    memset(&p, 0, sizeof p);
    int abatch = as->ndim >= 2 ? as->ndim - 2 : 0, bbatch = bs->ndim >= 2 ? bs->ndim - 2 : 0;
    p.M = as->ndim >= 2 ? as->dims[as->ndim - 2] : 1;
    p.K = as->dims[as->ndim - 1];
    int64_t kb = bs->ndim >= 2 ? bs->dims[bs->ndim - 2] : bs->dims[0];
    p.N = bs->ndim >= 2 ? bs->dims[bs->ndim - 1] : 1;
    if (kb != p.K)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "matmul: inner dims differ: a is %s, b is %s", sa, sb);
    /* batch dims, aligned on the right; contiguous strides per input, 0 where broadcast */
    p.nbatch = abatch > bbatch ? abatch : bbatch;
    int64_t astride = p.M * p.K, bstride = p.K * p.N;
    ldt_shape want = {0, {0}};
    p.batch = 1;
    for (int d = p.nbatch - 1; d >= 0; d--) {
        int da = d - (p.nbatch - abatch), db = d - (p.nbatch - bbatch);
        int64_t na = da >= 0 ? as->dims[da] : 1, nb = db >= 0 ? bs->dims[db] : 1;
        if (na != nb && na != 1 && nb != 1)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "matmul: batch dims do not broadcast: a is %s, b is %s", sa, sb);
        p.bdims[d] = na == 1 ? nb : na;
        p.astr[d] = na == 1 ? 0 : astride;
        p.bstr[d] = nb == 1 ? 0 : bstride;
        astride *= na;
        bstride *= nb;
        p.batch *= p.bdims[d];
    }
    want.ndim = p.nbatch;
    for (int d = 0; d < p.nbatch; d++) want.dims[d] = p.bdims[d];
    if (as->ndim >= 2) want.dims[want.ndim++] = p.M;
    if (bs->ndim >= 2) want.dims[want.ndim++] = p.N;
    LDT_CHECK(check_out_shape(c, &want));
    LDT_CHECK(check_int_range(c, &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, NULL, numel_of(as), numel_of(bs));
}

/* linear: x [..., in] @ w[out, in]^T (+ b[out]) -> [..., out]; the leading dims of x are rows
 * of one GEMM. */
static ldt_status linear_kernel(const ldt__kcall *c) {
    if (c->nin != 2 && c->nin != 3)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "linear: takes 2 or 3 inputs (x, w, optional b), got %d",
                 c->nin);
    LDT_CHECK(check_dtypes(c));
    const ldt_shape *xs = &c->in[0].shape, *ws = &c->in[1].shape;
    char sx[128], sw[128], sb[128] = "";
    ldt_shape_format(xs, sx, sizeof sx);
    ldt_shape_format(ws, sw, sizeof sw);
    if (c->nin == 3) ldt_shape_format(&c->in[2].shape, sb, sizeof sb);
    if (xs->ndim < 1 || ws->ndim != 2 || xs->dims[xs->ndim - 1] != ws->dims[1])
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "linear: expected x [..., in] and w [out, in]: x is %s, w is %s", sx, sw);
    if (c->nin == 3 && (c->in[2].shape.ndim != 1 || c->in[2].shape.dims[0] != ws->dims[0]))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "linear: bias is %s, expected [%lld] (w is %s)", sb,
                 (long long)ws->dims[0], sw);
    mm_plan p;
    memset(&p, 0, sizeof p);
    p.K = ws->dims[1];
    p.N = ws->dims[0];
    p.M = 1;
    for (int d = 0; d < xs->ndim - 1; d++) p.M *= xs->dims[d];
    p.transb = 1;
    p.batch = 1;
    ldt_shape want = *xs;
    want.dims[want.ndim - 1] = p.N;
    LDT_CHECK(check_out_shape(c, &want));
    LDT_CHECK(check_int_range(c, &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, c->nin == 3 ? c->in[2].data : NULL,
                      numel_of(xs), numel_of(ws));
}

/* ---------------------------------------------------------------------------------------
 * Dispatch.
 */
ldt_status ldt__k_matmul(const ldt__kcall *c) {
    switch (c->op) {
    case LDT_OP_MATMUL: return matmul_kernel(c);
    case LDT_OP_LINEAR: return linear_kernel(c);
    default: LDT_FAIL(LDT_ERR_INTERNAL, "matmul kernels: op %d is not matmul or linear", c->op);
    }
}
