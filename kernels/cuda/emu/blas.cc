// The CUDA emulator's cuBLAS (kernels/cuda/emu/cublas_v2.h): GEMMs as plain loops on the
// handle's stream. Column-major, C = alpha op(A) op(B) + beta C; C is not read when beta is 0;
// f16 and bf16 load to f32, accumulate in the compute type and round once on store.
#include "cublas_v2.h"

#include <stdlib.h>
#include <string.h>

#include "core/half.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
};

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *h = new cublasContext();
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
extern "C" cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && !ldt_emu_is_device(ws, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
    h->workspace = ws;
    h->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasGetStatusName(cublasStatus_t s) {
    switch (s) {
#define N(x) case x: return #x;
        N(CUBLAS_STATUS_SUCCESS) N(CUBLAS_STATUS_NOT_INITIALIZED) N(CUBLAS_STATUS_ALLOC_FAILED)
        N(CUBLAS_STATUS_INVALID_VALUE) N(CUBLAS_STATUS_ARCH_MISMATCH)
        N(CUBLAS_STATUS_MAPPING_ERROR) N(CUBLAS_STATUS_EXECUTION_FAILED)
        N(CUBLAS_STATUS_INTERNAL_ERROR) N(CUBLAS_STATUS_NOT_SUPPORTED)
#undef N
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
extern "C" const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    default: return "an internal operation failed";
    }
}

namespace {
struct gemm {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    const void *A, *B;
    void *C;
    cudaDataType t;
    double alpha, beta;
};

template <typename T> struct el;
template <> struct el<float> {
    static double ld(const float *p, long long i) { return p[i]; }
    static void st(float *p, long long i, double v) { p[i] = (float)v; }
};
template <> struct el<double> {
    static double ld(const double *p, long long i) { return p[i]; }
    static void st(double *p, long long i, double v) { p[i] = v; }
};
struct f16 {
    uint16_t b;
};
struct bf16 {
    uint16_t b;
};
template <> struct el<f16> {
    static double ld(const f16 *p, long long i) { return ldt__f16_to_f32(p[i].b); }
    static void st(f16 *p, long long i, double v) { p[i].b = ldt__f32_to_f16((float)v); }
};
template <> struct el<bf16> {
    static double ld(const bf16 *p, long long i) { return ldt__bf16_to_f32(p[i].b); }
    static void st(bf16 *p, long long i, double v) { p[i].b = ldt__f32_to_bf16((float)v); }
};

template <typename T, typename Acc> void run_t(const gemm &g) {
    for (int b = 0; b < g.batch; b++) {
        const T *A = (const T *)g.A + b * g.sa, *B = (const T *)g.B + b * g.sb;
        T *C = (T *)g.C + b * g.sc;
        for (int j = 0; j < g.n; j++)
            for (int i = 0; i < g.m; i++) {
                Acc s = 0;
                for (int l = 0; l < g.k; l++) {
                    Acc a = (Acc)el<T>::ld(A, g.ta == CUBLAS_OP_N ? i + (long long)l * g.lda
                                                                  : l + (long long)i * g.lda);
                    Acc x = (Acc)el<T>::ld(B, g.tb == CUBLAS_OP_N ? l + (long long)j * g.ldb
                                                                  : j + (long long)l * g.ldb);
                    s += a * x;
                }
                long long ci = i + (long long)j * g.ldc;
                Acc r = (Acc)g.alpha * s;
                if (g.beta != 0) r += (Acc)g.beta * (Acc)el<T>::ld(C, ci);
                el<T>::st(C, ci, (double)r);
            }
    }
}

void run(void *arg) {
    const gemm &g = *(const gemm *)arg;
    switch (g.t) {
    case CUDA_R_64F: run_t<double, double>(g); break;
    case CUDA_R_32F: run_t<float, float>(g); break;
    case CUDA_R_16F: run_t<f16, float>(g); break;
    default: run_t<bf16, float>(g); break;
    }
}

void free_gemm(void *arg) { delete (gemm *)arg; }

// The extent of a column-major operand of `rows` x `cols` (as stored) with leading dim ld.
bool on_device(const void *p, size_t es, int rows, int cols, int ld, long long stride, int batch) {
    if (!rows || !cols || !batch) return true;
    size_t last = (size_t)(rows - 1) + (size_t)(cols - 1) * (size_t)ld +
                  (size_t)(batch - 1) * (size_t)(stride < 0 ? 0 : stride);
    return ldt_emu_is_device(p, (last + 1) * es);
}

cublasStatus_t submit(cublasHandle_t h, gemm g, const void *alpha, const void *beta,
                      cudaDataType at, cudaDataType bt, cublasComputeType_t compute) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (at != g.t || bt != g.t || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    if (g.t != CUDA_R_32F && g.t != CUDA_R_64F && g.t != CUDA_R_16F && g.t != CUDA_R_16BF)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (g.t == CUDA_R_64F ? compute != CUBLAS_COMPUTE_64F : compute != CUBLAS_COMPUTE_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED; // the pairs lazydt uses
    if ((g.ta != CUBLAS_OP_N && g.ta != CUBLAS_OP_T) || (g.tb != CUBLAS_OP_N && g.tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    int arows = g.ta == CUBLAS_OP_N ? g.m : g.k, acols = g.ta == CUBLAS_OP_N ? g.k : g.m;
    int brows = g.tb == CUBLAS_OP_N ? g.k : g.n, bcols = g.tb == CUBLAS_OP_N ? g.n : g.k;
    if (g.lda < (arows > 1 ? arows : 1) || g.ldb < (brows > 1 ? brows : 1) ||
        g.ldc < (g.m > 1 ? g.m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    g.alpha = g.t == CUDA_R_64F ? *(const double *)alpha : *(const float *)alpha;
    g.beta = g.t == CUDA_R_64F ? *(const double *)beta : *(const float *)beta;
    if (!g.m || !g.n || !g.batch) return CUBLAS_STATUS_SUCCESS;
    size_t es = g.t == CUDA_R_64F ? 8 : g.t == CUDA_R_32F ? 4 : 2;
    if (!on_device(g.A, es, arows, g.k ? acols : 0, g.lda, g.sa, g.batch) ||
        !on_device(g.B, es, g.k ? brows : 0, bcols, g.ldb, g.sb, g.batch) ||
        !on_device(g.C, es, g.m, g.n, g.ldc, g.sc, g.batch))
        return CUBLAS_STATUS_EXECUTION_FAILED; // the GPU would fault on a host pointer
    cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(h->stream, &cs) != cudaSuccess) return CUBLAS_STATUS_INTERNAL_ERROR;
    if (cs != cudaStreamCaptureStatusNone && !h->workspace)
        return CUBLAS_STATUS_NOT_SUPPORTED; // would allocate a workspace inside the capture
    gemm *copy = new gemm(g);
    if (ldt_emu_enqueue(h->stream, run, copy, free_gemm) != cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}
} // namespace

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                       int m, int n, int k, const void *alpha, const void *A,
                                       cudaDataType at, int lda, const void *B, cudaDataType bt,
                                       int ldb, const void *beta, void *C, cudaDataType ct,
                                       int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;
    gemm g{ta, tb, m, n, k, lda, ldb, ldc, 1, 0, 0, 0, A, B, C, ct, 0, 0};
    return submit(h, g, alpha, beta, at, bt, compute);
}

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;
    gemm g{ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, A, B, C, ct, 0, 0};
    return submit(h, g, alpha, beta, at, bt, compute);
}
