/* CPU kernels for matmul (torch.matmul rules) and linear, on OpenBLAS GEMM. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

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
 * was checked against INT_MAX before we get here.
 */
#define LDT__MM_RUN(NAME, T, GEMM)                                                                 \
    static void NAME(const ldt__mm_plan *p, const T *A, const T *B, T *C) {                        \
        int64_t M = p->M, N = p->N, K = p->K, mats = p->batch;                                     \
        int64_t idx[LDT_MAX_DIMS] = {0};                                                           \
        int64_t aoff = 0, boff = 0;                                                                \
        /* bias: prefill each row of C and let GEMM add to it (beta 1) */                          \
        T beta = p->bias ? (T)1 : (T)0;                                                            \
        if (ldt__mm_can_fold(p)) { /* one GEMM of M * mats rows */                                 \
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
static void mm_fill_empty_sum(const ldt__mm_plan *p, void *C, size_t esz) {
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
static ldt_status mm_execute(const ldt__kcall *c, ldt__mm_plan *p, const void *A, const void *B,
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
                        ldt__mm_name(c->op), ldt_dtype_name(t));
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
