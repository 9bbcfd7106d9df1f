// CUDA matmul (torch.matmul rules) and linear on cuBLAS: f32, f16 and bf16 accumulate in f32
// (tensor cores for the halves, one rounding on store), f64 in f64. Row-major operands are
// handed to column-major cuBLAS as their transposes: C^T (N, M) = B^T (N, K) @ A^T (K, M).
#include <cublas_v2.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

// One GEMM problem, repeated over broadcast batch dims (as kernels/cpu/matmul.c plans it):
//   C[b] (M, N) = A[b] (M, K) @ B[b] (K, N)     (B[b] is (N, K), used transposed, if transb)
struct mm_plan {
    int64_t M, N, K;
    int transb;
    int nbatch;
    int64_t bdims[LDT_MAX_DIMS];
    int64_t astr[LDT_MAX_DIMS], bstr[LDT_MAX_DIMS];
    int64_t batch; // product of bdims
};

// ---- kernels ---------------------------------------------------------------------------
// Each of `rows` rows of C (N elements) set to bias [N]: GEMM then adds with beta 1.
template <typename T> __global__ void k_bias_rows(T *C, const T *bias, int64_t rows, int64_t N) {
    LDT__CUDA_FOR(i, rows * N) C[i] = bias[i % N];
}

// ---- launchers -------------------------------------------------------------------------
static const char *mm_name(int op) { return op == LDT_OP_LINEAR ? "linear" : "matmul"; }

#define BLAS_TRY(name, call)                                                                \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            LDT_FAIL(LDT_ERR_CUDA, "%s: %s failed: %s (%s)", (name), #call,                 \
                     cublasGetStatusString(s_), cublasGetStatusName(s_));                   \
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
        k_bias_rows<<<g, LDT__CUDA_THREADS, 0, s>>>((uint16_t *)C, (const uint16_t *)bias, rows, N);
    else if (es == 4)
        k_bias_rows<<<g, LDT__CUDA_THREADS, 0, s>>>((float *)C, (const float *)bias, rows, N);
    else
        k_bias_rows<<<g, LDT__CUDA_THREADS, 0, s>>>((double *)C, (const double *)bias, rows, N);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}

// Element offsets of matrix m's A and B (the batch odometer of the CPU kernel, direct).
static void mm_offsets(const mm_plan *p, int64_t m, int64_t *ao, int64_t *bo) {
    *ao = *bo = 0;
    for (int d = p->nbatch - 1; d >= 0; d--) {
        int64_t q = m / p->bdims[d], k = m - q * p->bdims[d];
        m = q;
        *ao += k * p->astr[d];
        *bo += k * p->bstr[d];
    }
}

static ldt_status mm_execute(const ldt__kcall *c, mm_plan *p, const void *A, const void *B,
                             const void *bias, const ldt__cuda_env *env) {
    const char *name = mm_name(c->op);
    ldt_dtype t = c->out.dtype;
    size_t es = ldt_dtype_size(t);
    int64_t M = p->M, N = p->N, K = p->K, mats = p->batch;
    if (M * N * mats == 0) return LDT_OK; // a zero batch, M or N: nothing to write
    if (!env || !env->blas)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "%s: no cuBLAS handle in the CUDA environment", name);
    if (K == 0 || bias) LDT_CHECK(mm_prefill(name, c->out.data, bias, M * mats, N, es, env));
    if (K == 0) return LDT_OK; // the empty sum (cuBLAS wants ld >= 1)
    // B shared by every matrix and A not broadcast anywhere: the batch folds into M, one big
    // GEMM instead of many small ones (the common linear / x @ W case)
    int fold = mats > 1;
    for (int d = 0; d < p->nbatch && fold; d++)
        if (p->bdims[d] > 1 && (p->bstr[d] != 0 || p->astr[d] == 0)) fold = 0;
    if (fold && M * mats <= INT_MAX) {
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
        BLAS_TRY(name, cublasGemmEx(h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha, B, dt, ldb,
                                    A, dt, (int)K, beta, c->out.data, dt, (int)N, ct,
                                    CUBLAS_GEMM_DEFAULT));
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
        BLAS_TRY(name, cublasGemmStridedBatchedEx(
                           h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha, B, dt, ldb,
                           (long long)sb, A, dt, (int)K, (long long)sa, beta, c->out.data, dt,
                           (int)N, (long long)(M * N), (int)mats, ct, CUBLAS_GEMM_DEFAULT));
        return LDT_OK;
    }
    for (int64_t m = 0; m < mats; m++) { // general broadcasting: one call per matrix
        mm_offsets(p, m, &ao, &bo);
        BLAS_TRY(name, cublasGemmEx(h, opb, CUBLAS_OP_N, (int)N, (int)M, (int)K, alpha,
                                    (const char *)B + bo * (int64_t)es, dt, ldb,
                                    (const char *)A + ao * (int64_t)es, dt, (int)K, beta,
                                    (char *)c->out.data + m * M * N * (int64_t)es, dt, (int)N, ct,
                                    CUBLAS_GEMM_DEFAULT));
    }
    return LDT_OK;
}

// ---- checks and plans (kernels/cpu/matmul.c's rules and messages) ----------------------
static ldt_status check_dtypes(const ldt__kcall *c) {
    ldt_dtype t = c->out.dtype;
    const char *name = mm_name(c->op);
    for (int k = 0; k < c->nin; k++) {
        LDT_CHECK(ldt__check_operand(name, &c->in[k], k));
        if (c->in[k].dtype != t)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: input %d is %s but the output is %s (all must match)", name, k,
                     ldt_dtype_name(c->in[k].dtype), ldt_dtype_name(t));
    }
    LDT_CHECK(ldt__check_operand(name, &c->out, -1));
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
                 "%s: matrix dims M=%lld N=%lld K=%lld exceed the cuBLAS int range",
                 mm_name(c->op), (long long)p->M, (long long)p->N, (long long)p->K);
    return LDT_OK;
}

static ldt_status matmul_launch(const ldt__kcall *c, const ldt__cuda_env *env) {
    if (c->nin != 2 || !c->in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "matmul: takes 2 inputs, got %d", c->nin);
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
    p.nbatch = abatch > bbatch ? abatch : bbatch;
    int64_t astride = p.M * p.K, bstride = p.K * p.N;
    ldt_shape want;
    memset(&want, 0, sizeof want);
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
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, NULL, env);
}

// linear: x [..., in] @ w[out, in]^T (+ b[out]) -> [..., out]; x's leading dims are rows.
static ldt_status linear_launch(const ldt__kcall *c, const ldt__cuda_env *env) {
    if ((c->nin != 2 && c->nin != 3) || !c->in)
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
    return mm_execute(c, &p, c->in[0].data, c->in[1].data, c->nin == 3 ? c->in[2].data : NULL, env);
}

extern "C" ldt_status ldt__cuda_k_matmul(const ldt__kcall *c, const ldt__cuda_env *env) {
    switch (c->op) {
    case LDT_OP_MATMUL: return matmul_launch(c, env);
    case LDT_OP_LINEAR: return linear_launch(c, env);
    default: LDT_FAIL(LDT_ERR_INTERNAL, "matmul kernels: op %d is not matmul or linear", c->op);
    }
}
