/* CPU kernels for matmul (torch.matmul rules) and linear, on OpenBLAS GEMM. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/copy.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/common/matmul_plan.h"
#include "kernels/cpu/kernel.h"

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* ---------------------------------------------------------------------------------------
 * GEMM over the batch, for f32 (sgemm) and f64 (dgemm). cblas takes int sizes, so the plan
 * was checked against INT_MAX before we get here. The GEMM parameters (the batch folded into
 * M where it can be, leading dims, transposes) are worked out once per plan.
 */
typedef struct mm_gemm {
    const ldt__mm_plan *p;
    int M, N, K, lda, ldb, ldc;
    int64_t mats; /* GEMM calls */
    enum CBLAS_TRANSPOSE tb;
} mm_gemm;

static void mm_gemm_make(const ldt__mm_plan *p, mm_gemm *g) {
    int64_t M = p->M, mats = p->batch;
    if (ldt__mm_can_fold(p)) { /* one GEMM of M * mats rows */
        M *= mats;
        mats = 1;
    }
    g->p = p;
    g->M = (int)M;
    g->N = (int)p->N;
    g->K = (int)p->K;
    g->lda = (int)p->K;
    g->ldb = p->transb ? (int)p->K : (int)p->N;
    g->ldc = (int)p->N;
    g->mats = mats;
    g->tb = p->transb ? CblasTrans : CblasNoTrans;
}

#define LDT__MM_RUN(NAME, T, GEMM)                                                                 \
    static void NAME(const mm_gemm *g, const T *A, const T *B, const T *bias, T *C) {              \
        const ldt__mm_plan *p = g->p;                                                              \
        int64_t idx[LDT_MAX_DIMS] = {0};                                                           \
        int64_t aoff = 0, boff = 0;                                                                \
        /* bias: prefill each row of C and let GEMM add to it (beta 1) */                          \
        T beta = bias ? (T)1 : (T)0;                                                               \
        if (bias)                                                                                  \
            for (int64_t r = 0; r < (int64_t)g->M * g->mats; r++)                                  \
                memcpy(C + r * g->N, bias, (size_t)g->N * sizeof(T));                              \
        for (int64_t m = 0; m < g->mats; m++) {                                                    \
            GEMM(CblasRowMajor, CblasNoTrans, g->tb, g->M, g->N, g->K, (T)1, A + aoff, g->lda,     \
                 B + boff, g->ldb, beta, C + m * g->M * g->N, g->ldc);                             \
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
static void mm_fill_empty_sum(const ldt__mm_plan *p, const void *bias, void *C, size_t esz) {
    int64_t rows = p->batch * p->M;
    for (int64_t r = 0; r < rows; r++) {
        char *row = (char *)C + (size_t)(r * p->N) * esz;
        if (bias)
            ldt__copy(row, bias, (size_t)p->N * esz);
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

/* f16 / bf16: widen the operands once, accumulate in f32 GEMM, round once on store; the f32
 * copies in fa (anumel), fb (bnumel), fbias (N) and fc (cnumel). */
static void mm_run_half(const mm_gemm *g, ldt_dtype t, const void *A, const void *B,
                        const void *bias, void *C, int64_t anumel, int64_t bnumel,
                        int64_t cnumel, float *fa, float *fb, float *fbias, float *fc) {
    const ldt__mm_plan *p = g->p;
    half_to_f32(t, A, fa, anumel);
    half_to_f32(t, B, fb, bnumel);
    if (bias) half_to_f32(t, bias, fbias, p->N);
    if (p->K == 0)
        mm_fill_empty_sum(p, bias ? fbias : NULL, fc, sizeof(float));
    else
        mm_run_f32(g, fa, fb, bias ? fbias : NULL, fc);
    f32_to_half(t, fc, C, cnumel);
}

/* Runs a checked plan in the operands' dtype. */
static ldt_status mm_execute(const ldt__kcall *c, const ldt__mm_plan *p, const void *A,
                             const void *B, const void *bias, int64_t anumel, int64_t bnumel) {
    ldt_dtype t = c->out.dtype;
    int64_t cnumel = numel_of(&c->out.shape);
    mm_gemm g;
    if (cnumel == 0) return LDT_OK; /* a zero batch, M or N: nothing to write */
    mm_gemm_make(p, &g);
    if (t == LDT_F32 || t == LDT_F64) {
        if (p->K == 0)
            mm_fill_empty_sum(p, bias, c->out.data, t == LDT_F32 ? 4 : 8);
        else if (t == LDT_F32)
            mm_run_f32(&g, A, B, bias, c->out.data);
        else
            mm_run_f64(&g, A, B, bias, c->out.data);
        return LDT_OK;
    }
    float *fa = malloc((size_t)(anumel ? anumel : 1) * sizeof(float));
    float *fb = malloc((size_t)(bnumel ? bnumel : 1) * sizeof(float));
    float *fbias = malloc((size_t)(p->N ? p->N : 1) * sizeof(float));
    float *fc = malloc((size_t)cnumel * sizeof(float));
    ldt_status st = LDT_OK;
    if (!fa || !fb || !fbias || !fc)
        st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for the f32 copies of %s operands",
                        ldt__mm_name(c->op), ldt_dtype_name(t));
    else
        mm_run_half(&g, t, A, B, bias, c->out.data, anumel, bnumel, cnumel, fa, fb, fbias, fc);
    free(fa);
    free(fb);
    free(fbias);
    free(fc);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Plans (kernels/common/matmul_plan.h: the checks and messages CUDA shares).
 */
static ldt_status matmul_kernel(const ldt__kcall *c) {
    ldt__mm_plan p;
    LDT_CHECK(ldt__mm_plan_matmul(c, 0, "BLAS", &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, NULL, numel_of(&c->in[0].shape),
                      numel_of(&c->in[1].shape));
}

static ldt_status linear_kernel(const ldt__kcall *c) {
    ldt__mm_plan p;
    LDT_CHECK(ldt__mm_plan_linear(c, 0, "BLAS", &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, c->nin == 3 ? c->in[2].data : NULL,
                      numel_of(&c->in[0].shape), numel_of(&c->in[1].shape));
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

/* ---------------------------------------------------------------------------------------
 * Bound calls: the plan checked once, the GEMM parameters and the routine chosen at bind,
 * and for halves the f32 copies allocated with the plan.
 */
typedef struct mm_bplan {
    ldt__mm_plan p;
    mm_gemm g; /* g.p points at p: fixed up after the plan is copied into place */
    int has_bias;
    ldt_dtype t;
    int64_t anumel, bnumel, cnumel;
    float *fa, *fb, *fbias, *fc; /* halves: in the plan's own allocation */
} mm_bplan;

static ldt_status mm_nothing(const ldt__kcall *c) {
    (void)c;
    return LDT_OK;
}

#define MM_BIAS(c, p) ((p)->has_bias ? (c)->in[2].data : NULL)

static ldt_status mm_bound_f32(const ldt__kcall *c) {
    const mm_bplan *p = (const mm_bplan *)c->plan;
    mm_run_f32(&p->g, c->in[0].data, c->in[1].data, MM_BIAS(c, p), c->out.data);
    return LDT_OK;
}

static ldt_status mm_bound_f64(const ldt__kcall *c) {
    const mm_bplan *p = (const mm_bplan *)c->plan;
    mm_run_f64(&p->g, c->in[0].data, c->in[1].data, MM_BIAS(c, p), c->out.data);
    return LDT_OK;
}

static ldt_status mm_bound_empty_sum(const ldt__kcall *c) {
    const mm_bplan *p = (const mm_bplan *)c->plan;
    mm_fill_empty_sum(&p->p, MM_BIAS(c, p), c->out.data, ldt_dtype_size(p->t));
    return LDT_OK;
}

static ldt_status mm_bound_half(const ldt__kcall *c) {
    const mm_bplan *p = (const mm_bplan *)c->plan;
    mm_run_half(&p->g, p->t, c->in[0].data, c->in[1].data, MM_BIAS(c, p), c->out.data,
                p->anumel, p->bnumel, p->cnumel, p->fa, p->fb, p->fbias, p->fc);
    return LDT_OK;
}

ldt_status ldt__kb_matmul(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    mm_bplan q;
    size_t extra = 0;
    memset(&q, 0, sizeof q);
    *plan = NULL;
    switch (c->op) {
    case LDT_OP_MATMUL: LDT_CHECK(ldt__mm_plan_matmul(c, 0, "BLAS", &q.p)); break;
    case LDT_OP_LINEAR: LDT_CHECK(ldt__mm_plan_linear(c, 0, "BLAS", &q.p)); break;
    default: LDT_FAIL(LDT_ERR_INTERNAL, "matmul kernels: op %d is not matmul or linear", c->op);
    }
    q.t = c->out.dtype;
    q.has_bias = c->op == LDT_OP_LINEAR && c->nin == 3;
    q.anumel = numel_of(&c->in[0].shape);
    q.bnumel = numel_of(&c->in[1].shape);
    q.cnumel = numel_of(&c->out.shape);
    if (q.cnumel == 0) {
        *fn = mm_nothing;
        return LDT_OK;
    }
    int half = q.t != LDT_F32 && q.t != LDT_F64;
    if (half)
        extra = (size_t)((q.anumel ? q.anumel : 1) + (q.bnumel ? q.bnumel : 1) +
                         (q.p.N ? q.p.N : 1) + q.cnumel) * sizeof(float);
    LDT_CHECK(ldt__kplan_alloc(ldt__mm_name(c->op), sizeof q + extra, plan));
    mm_bplan *b = (mm_bplan *)*plan;
    *b = q;
    mm_gemm_make(&b->p, &b->g);
    if (half) {
        b->fa = (float *)(b + 1);
        b->fb = b->fa + (q.anumel ? q.anumel : 1);
        b->fbias = b->fb + (q.bnumel ? q.bnumel : 1);
        b->fc = b->fbias + (q.p.N ? q.p.N : 1);
        *fn = mm_bound_half;
    } else {
        *fn = q.p.K == 0 ? mm_bound_empty_sum : q.t == LDT_F32 ? mm_bound_f32 : mm_bound_f64;
    }
    return LDT_OK;
}
