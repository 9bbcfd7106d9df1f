// CUDA matmul (torch.matmul rules) and linear on cuBLAS: f32, f16 and bf16 accumulate in f32
// (tensor cores for the halves, one rounding on store), f64 in f64. Row-major operands are
// handed to column-major cuBLAS as their transposes: C^T (N, M) = B^T (N, K) @ A^T (K, M).
#include <cublas_v2.h>
#include <limits.h>
#include <stdint.h>

#include "exec/cuda_libs.h"
#include "kernels/common/matmul_plan.h"
#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
// Each of `rows` rows of C (N elements) set to bias [N]: GEMM then adds with beta 1.
template <typename T> __global__ void k_bias_rows(T *C, const T *bias, int64_t rows, int64_t N) {
    LDT__CUDA_FOR(i, rows * N) C[i] = bias[i % N];
}

// ---- launchers -------------------------------------------------------------------------
// A cuBLAS call through env's table (`api` in scope: cuBLAS is loaded at first use).
#define BLAS_TRY(name, what, call)                                                          \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            LDT_FAIL(LDT_ERR_CUDA, "%s: %s failed: %s (%s)", (name), (what),                \
                     api->status_string(s_), api->status_name(s_));                         \
    } while (0)

// Prefills C (rows x N) with bias, or zeros when there is none.
static ldt_status mm_prefill(const char *name, void *C, const void *bias, int64_t rows, int64_t N,
                             size_t es, const ldt__cuda_env *env) {
    cudaStream_t s = LDT__CUDA_STREAM(env);
    if (!bias) {
        LDT__CUDA_CALL(name, cudaMemsetAsync(C, 0, (size_t)(rows * N) * es, s));
        return LDT_OK;
    }
    unsigned g = ldt__cuda_blocks(rows * N);
    if (es == 2)
        LDT__CUDA_LAUNCH(k_bias_rows, g, LDT__CUDA_THREADS, 0, s)((uint16_t *)C, (const uint16_t *)bias, rows, N);
    else if (es == 4)
        LDT__CUDA_LAUNCH(k_bias_rows, g, LDT__CUDA_THREADS, 0, s)((float *)C, (const float *)bias, rows, N);
    else
        LDT__CUDA_LAUNCH(k_bias_rows, g, LDT__CUDA_THREADS, 0, s)((double *)C, (const double *)bias, rows, N);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}

// Element offsets of matrix m's A and B (the batch odometer of the CPU kernel, direct).
static void mm_offsets(const ldt__mm_plan *p, int64_t m, int64_t *ao, int64_t *bo) {
    *ao = *bo = 0;
    for (int d = p->nbatch - 1; d >= 0; d--) {
        int64_t q = m / p->bdims[d], k = m - q * p->bdims[d];
        m = q;
        *ao += k * p->astr[d];
        *bo += k * p->bstr[d];
    }
}

static ldt_status mm_execute(const ldt__kcall *c, ldt__mm_plan *p, const void *A, const void *B,
                             const void *bias, const ldt__cuda_env *env) {
    const char *name = ldt__mm_name(c->op);
    ldt_dtype t = c->out.dtype;
    size_t es = ldt_dtype_size(t);
    int64_t M = p->M, N = p->N, K = p->K, mats = p->batch;
    if (M * N * mats == 0) return LDT_OK; // a zero batch, M or N: nothing to write
    if (!env || !env->blas || !env->blas_api)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "%s: no cuBLAS handle in the CUDA environment", name);
    const ldt__cublas_api *api = env->blas_api;
    if (K == 0 || bias) LDT_CHECK(mm_prefill(name, c->out.data, bias, M * mats, N, es, env));
    if (K == 0) return LDT_OK; // the empty sum (cuBLAS wants ld >= 1)
    if (ldt__mm_can_fold(p)) { // one GEMM of M * mats rows
        M *= mats;
        mats = 1;
    }
    cudaDataType dt = t == LDT_F32 ? CUDA_R_32F : t == LDT_F64 ? CUDA_R_64F
                      : t == LDT_F16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasComputeType_t ct = t == LDT_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    float a32 = 1.0f, b32 = bias ? 1.0f : 0.0f;
    double a64 = 1.0, b64 = bias ? 1.0 : 0.0;
    const void *alpha = t == LDT_F64 ? (const void *)&a64 : (const void *)&a32;
    const void *beta = t == LDT_F64 ? (const void *)&b64 : (const void *)&b32;
    cublasHandle_t h = (cublasHandle_t)env->blas;
    cublasOperation_t opb = p->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = p->transb ? (int)K : (int)N;
    if (mats == 1) {
        BLAS_TRY(name, "cublasGemmEx",
                 api->gemm_ex(h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha, B, dt, ldb, A,
                              dt, (int)K, beta, c->out.data, dt, (int)N, ct, CUBLAS_GEMM_DEFAULT));
        return LDT_OK;
    }
    // one strided-batched call when the batch offsets are affine in the flat batch index
    // (one batch dim, or dims contiguous for both inputs; stride 0 where broadcast)
    int64_t sa, sb, ao, bo;
    int affine = mats <= INT_MAX;
    mm_offsets(p, 1, &sa, &sb);
    for (int64_t m = 2; m < mats && affine; m++) {
        mm_offsets(p, m, &ao, &bo);
        affine = ao == m * sa && bo == m * sb;
    }
    if (affine) {
        BLAS_TRY(name, "cublasGemmStridedBatchedEx",
                 api->gemm_strided_batched_ex(
                           h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha, B, dt, ldb,
                           (long long)sb, A, dt, (int)K, (long long)sa, beta, c->out.data, dt,
                           (int)N, (long long)(M * N), (int)mats, ct, CUBLAS_GEMM_DEFAULT));
        return LDT_OK;
    }
    for (int64_t m = 0; m < mats; m++) { // general broadcasting: one call per matrix
        mm_offsets(p, m, &ao, &bo);
        BLAS_TRY(name, "cublasGemmEx",
                 api->gemm_ex(h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha,
                              (const char *)B + bo * (int64_t)es, dt, ldb,
                              (const char *)A + ao * (int64_t)es, dt, (int)K, beta,
                              (char *)c->out.data + m * M * N * (int64_t)es, dt, (int)N, ct,
                              CUBLAS_GEMM_DEFAULT));
    }
    return LDT_OK;
}

// ---- plans (kernels/common/matmul_plan.h: kernels/cpu/matmul.c's rules and messages) ---
static ldt_status matmul_launch(const ldt__kcall *c, const ldt__cuda_env *env) {
    ldt__mm_plan p;
    LDT_CHECK(ldt__mm_plan_matmul(c, 1, "cuBLAS", &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, NULL, env);
}

static ldt_status linear_launch(const ldt__kcall *c, const ldt__cuda_env *env) {
    ldt__mm_plan p;
    LDT_CHECK(ldt__mm_plan_linear(c, 1, "cuBLAS", &p));
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, c->nin == 3 ? c->in[2].data : NULL, env);
}

extern "C" ldt_status ldt__cuda_k_matmul(const ldt__kcall *c, const ldt__cuda_env *env) {
    switch (c->op) {
    case LDT_OP_MATMUL: return matmul_launch(c, env);
    case LDT_OP_LINEAR: return linear_launch(c, env);
    default: LDT_FAIL(LDT_ERR_INTERNAL, "matmul kernels: op %d is not matmul or linear", c->op);
    }
}
