// CUDA kernels converting f32 <-> f16/bf16 with core/half.h's rounding; launchers last.
#include <cuda_runtime.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/convert.h"

// ---- kernels ---------------------------------------------------------------------------
__global__ void ldt_k_f32_to_half(const float *src, uint16_t *dst, int64_t n, int bf16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = bf16 ? ldt__f32_to_bf16(src[i]) : ldt__f32_to_f16(src[i]);
}

__global__ void ldt_k_half_to_f32(const uint16_t *src, float *dst, int64_t n, int bf16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = bf16 ? ldt__bf16_to_f32(src[i]) : ldt__f16_to_f32(src[i]);
}

// ---- launchers -------------------------------------------------------------------------
#define CUDA_TRY(call)                                                                      \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess) {                                                            \
            st = ldt__trace(ldt__error(LDT_ERR_CUDA, "cuda convert: %s failed: %s", #call,   \
                                       cudaGetErrorString(e_)),                             \
                            __FILE__, __LINE__);                                            \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

extern "C" ldt_status ldt__cuda_convert_host(const void *src, ldt_dtype from, void *dst,
                                             ldt_dtype to, int64_t n) {
    ldt_status st = LDT_OK;
    void *dsrc = NULL, *ddst = NULL;
    int count = 0, half_to_f32 = 0, bf16 = 0;
    if ((!src || !dst) && n > 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda convert: src and dst must not be NULL");
    if (n < 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda convert: negative count %lld", (long long)n);
    if (from == LDT_F32 && (to == LDT_F16 || to == LDT_BF16)) {
        bf16 = to == LDT_BF16;
    } else if (to == LDT_F32 && (from == LDT_F16 || from == LDT_BF16)) {
        half_to_f32 = 1;
        bf16 = from == LDT_BF16;
    } else {
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cuda convert: %s -> %s, expected f32 <-> f16 or f32 <-> bf16",
                 ldt_dtype_name(from), ldt_dtype_name(to));
    }
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        cudaGetLastError(); // clear the sticky "no driver" error
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "cuda convert: no CUDA device");
    }
    if (n == 0) return LDT_OK;
    {
        size_t in_b = (size_t)n * ldt_dtype_size(from), out_b = (size_t)n * ldt_dtype_size(to);
        int blocks = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
        CUDA_TRY(cudaMalloc(&dsrc, in_b));
        CUDA_TRY(cudaMalloc(&ddst, out_b));
        CUDA_TRY(cudaMemcpy(dsrc, src, in_b, cudaMemcpyHostToDevice));
        if (half_to_f32)
            LDT__CUDA_LAUNCH(ldt_k_half_to_f32, blocks, 256)((const uint16_t *)dsrc, (float *)ddst, n, bf16);
        else
            LDT__CUDA_LAUNCH(ldt_k_f32_to_half, blocks, 256)((const float *)dsrc, (uint16_t *)ddst, n, bf16);
        CUDA_TRY(cudaGetLastError());
        CUDA_TRY(cudaMemcpy(dst, ddst, out_b, cudaMemcpyDeviceToHost));
    }
fail:
    cudaFree(dsrc);
    cudaFree(ddst);
    return st;
}
