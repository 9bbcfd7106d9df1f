/* Host-side checks and GEMM plans of matmul (torch.matmul rules) and linear, as inline
 * functions for CPU and CUDA (kernels/cpu/matmul.c, kernels/cuda/matmul.cu), so both accept
 * the same calls, plan the same batches and fail with the same messages.
 *
 *   ldt__mm_plan p;
 *   LDT_CHECK(ldt__mm_plan_matmul(c, 0, "BLAS", &p)); // c->out checked against the plan
 *   if (ldt__mm_can_fold(&p)) ...                     // one GEMM of M * batch rows
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_MATMUL_PLAN_H
#define LDT_KERNELS_COMMON_MATMUL_PLAN_H

#include <limits.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

/* One GEMM problem, repeated over broadcast batch dims:
 *   C[b] (M, N) = A[b] (M, K) @ B[b] (K, N)     (B[b] is (N, K), used transposed, if transb)
 * A and B are contiguous per matrix; astr/bstr are the element strides of each batch dim in
 * the inputs, 0 where that input is broadcast; C is contiguous [batch..., M, N]. */
typedef struct ldt__mm_plan {
    int64_t M, N, K;
    int transb;
    int nbatch;
    int64_t bdims[LDT_MAX_DIMS];
    int64_t astr[LDT_MAX_DIMS], bstr[LDT_MAX_DIMS];
    int64_t batch;    /* product of bdims */
} ldt__mm_plan;

static inline const char *ldt__mm_name(int op) {
    return op == LDT_OP_LINEAR ? "linear" : "matmul";
}

/* B shared by every matrix and A not broadcast anywhere: the batch folds into M, one big
 * GEMM instead of many small ones (the common linear / x @ W case). */
static inline int ldt__mm_can_fold(const ldt__mm_plan *p) {
    int fold = p->batch > 1;
    for (int d = 0; d < p->nbatch && fold; d++)
        if (p->bdims[d] > 1 && (p->bstr[d] != 0 || p->astr[d] == 0)) fold = 0;
    return fold && p->M * p->batch <= INT_MAX;
}

/* Inputs and output of one float dtype; check_operands: also ldt__check_operand on each
 * (the CUDA launchers, which the CPU runner's checks do not cover). */
static inline ldt_status ldt__mm_check_dtypes(const ldt__kcall *c, int check_operands) {
    ldt_dtype t = c->out.dtype;
    const char *name = ldt__mm_name(c->op);
    for (int k = 0; k < c->nin; k++) {
        if (check_operands) LDT_CHECK(ldt__check_operand(name, &c->in[k], k));
        if (c->in[k].dtype != t)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: input %d is %s but the output is %s (all must match)", name, k,
                     ldt_dtype_name(c->in[k].dtype), ldt_dtype_name(t));
    }
    if (check_operands) LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    if (!ldt_dtype_is_float(t))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16 are)",
                 name, ldt_dtype_name(t));
    return LDT_OK;
}

static inline ldt_status ldt__mm_check_out_shape(const ldt__kcall *c, const ldt_shape *want) {
    if (ldt_shape_equal(want, &c->out.shape)) return LDT_OK;
    char w[128], g[128];
    ldt_shape_format(want, w, sizeof w);
    ldt_shape_format(&c->out.shape, g, sizeof g);
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output shape is %s, expected %s", ldt__mm_name(c->op),
             g, w);
}

/* Fails with msg, a format taking the two operands' shapes (a, b or x, w) as text: shapes
 * are formatted only here, on failure. */
static inline ldt_status ldt__mm_fail_shapes(const ldt__kcall *c, const char *msg) {
    char s0[128], s1[128];
    ldt_shape_format(&c->in[0].shape, s0, sizeof s0);
    ldt_shape_format(&c->in[1].shape, s1, sizeof s1);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
    return ldt__trace(ldt__error(LDT_ERR_INVALID_ARGUMENT, msg, s0, s1), __FILE__, __LINE__);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

/* blas: the library named in the message ("BLAS", "cuBLAS"), which takes int sizes. */
static inline ldt_status ldt__mm_check_int_range(const ldt__kcall *c, const ldt__mm_plan *p,
                                                 const char *blas) {
    if (p->M > INT_MAX || p->N > INT_MAX || p->K > INT_MAX)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "%s: matrix dims M=%lld N=%lld K=%lld exceed the %s int range",
                 ldt__mm_name(c->op), (long long)p->M, (long long)p->N, (long long)p->K, blas);
    return LDT_OK;
}

/* torch.matmul: a 1-D a is a row [1, K] and a 1-D b a column [K, 1], the added dim removed
 * from the result; dims before the last two broadcast (numpy rules). */
static inline ldt_status ldt__mm_plan_matmul(const ldt__kcall *c, int check_operands,
                                             const char *blas, ldt__mm_plan *p) {
    if (c->nin != 2 || !c->in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "matmul: takes 2 inputs, got %d", c->nin);
    LDT_CHECK(ldt__mm_check_dtypes(c, check_operands));
    const ldt_shape *as = &c->in[0].shape, *bs = &c->in[1].shape;
    if (as->ndim < 1 || bs->ndim < 1)
        return ldt__mm_fail_shapes(c, "matmul: both operands need at least 1 dim: a is %s, b is %s");
    memset(p, 0, sizeof *p);
    int abatch = as->ndim >= 2 ? as->ndim - 2 : 0, bbatch = bs->ndim >= 2 ? bs->ndim - 2 : 0;
    p->M = as->ndim >= 2 ? as->dims[as->ndim - 2] : 1;
    p->K = as->dims[as->ndim - 1];
    int64_t kb = bs->ndim >= 2 ? bs->dims[bs->ndim - 2] : bs->dims[0];
    p->N = bs->ndim >= 2 ? bs->dims[bs->ndim - 1] : 1;
    if (kb != p->K)
        return ldt__mm_fail_shapes(c, "matmul: inner dims differ: a is %s, b is %s");
    /* batch dims, aligned on the right; contiguous strides per input, 0 where broadcast */
    p->nbatch = abatch > bbatch ? abatch : bbatch;
    int64_t astride = p->M * p->K, bstride = p->K * p->N;
    ldt_shape want;
    memset(&want, 0, sizeof want);
    p->batch = 1;
    for (int d = p->nbatch - 1; d >= 0; d--) {
        int da = d - (p->nbatch - abatch), db = d - (p->nbatch - bbatch);
        int64_t na = da >= 0 ? as->dims[da] : 1, nb = db >= 0 ? bs->dims[db] : 1;
        if (na != nb && na != 1 && nb != 1)
            return ldt__mm_fail_shapes(c, "matmul: batch dims do not broadcast: a is %s, b is %s");
        p->bdims[d] = na == 1 ? nb : na;
        p->astr[d] = na == 1 ? 0 : astride;
        p->bstr[d] = nb == 1 ? 0 : bstride;
        astride *= na;
        bstride *= nb;
        p->batch *= p->bdims[d];
    }
    want.ndim = p->nbatch;
    for (int d = 0; d < p->nbatch; d++) want.dims[d] = p->bdims[d];
    if (as->ndim >= 2) want.dims[want.ndim++] = p->M;
    if (bs->ndim >= 2) want.dims[want.ndim++] = p->N;
    LDT_CHECK(ldt__mm_check_out_shape(c, &want));
    LDT_CHECK(ldt__mm_check_int_range(c, p, blas));
    return LDT_OK;
}

/* linear: x [..., in] @ w[out, in]^T (+ b[out]) -> [..., out]; the leading dims of x are rows
 * of one GEMM. */
static inline ldt_status ldt__mm_plan_linear(const ldt__kcall *c, int check_operands,
                                             const char *blas, ldt__mm_plan *p) {
    if ((c->nin != 2 && c->nin != 3) || !c->in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "linear: takes 2 or 3 inputs (x, w, optional b), got %d",
                 c->nin);
    LDT_CHECK(ldt__mm_check_dtypes(c, check_operands));
    const ldt_shape *xs = &c->in[0].shape, *ws = &c->in[1].shape;
    if (xs->ndim < 1 || ws->ndim != 2 || xs->dims[xs->ndim - 1] != ws->dims[1])
        return ldt__mm_fail_shapes(c,
                                   "linear: expected x [..., in] and w [out, in]: x is %s, w is %s");
    if (c->nin == 3 && (c->in[2].shape.ndim != 1 || c->in[2].shape.dims[0] != ws->dims[0])) {
        char sw[128], sb[128];
        ldt_shape_format(ws, sw, sizeof sw);
        ldt_shape_format(&c->in[2].shape, sb, sizeof sb);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "linear: bias is %s, expected [%lld] (w is %s)", sb,
                 (long long)ws->dims[0], sw);
    }
    memset(p, 0, sizeof *p);
    p->K = ws->dims[1];
    p->N = ws->dims[0];
    p->M = 1;
    for (int d = 0; d < xs->ndim - 1; d++) p->M *= xs->dims[d];
    p->transb = 1;
    p->batch = 1;
    ldt_shape want = *xs;
    want.dims[want.ndim - 1] = p->N;
    LDT_CHECK(ldt__mm_check_out_shape(c, &want));
    LDT_CHECK(ldt__mm_check_int_range(c, p, blas));
    return LDT_OK;
}

#endif
