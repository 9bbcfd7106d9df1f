// CUDA fill: every element of a buffer set to one value (the FILL instruction).
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
template <typename T> __global__ void k_fill(T *o, int64_t n, T v) {
    LDT__CUDA_FOR(i, n) o[i] = v;
}

// ---- launchers -------------------------------------------------------------------------
// v rounded once to dtype t, as exec/fill.h's ldt__store_f64 does on the CPU (one byte
// dtypes, u8 included, store v != 0).
static void fill_bytes(ldt_dtype t, double v, unsigned char out[8]) {
    memset(out, 0, 8);
    switch (t) {
    case LDT_F32: { float f = (float)v; memcpy(out, &f, 4); } break;
    case LDT_F64: memcpy(out, &v, 8); break;
    case LDT_F16: { uint16_t h = ldt__f32_to_f16((float)v); memcpy(out, &h, 2); } break;
    case LDT_BF16: { uint16_t h = ldt__f32_to_bf16((float)v); memcpy(out, &h, 2); } break;
    case LDT_I32: { int32_t i = (int32_t)v; memcpy(out, &i, 4); } break;
    case LDT_I64: { int64_t i = (int64_t)v; memcpy(out, &i, 8); } break;
    default: out[0] = (unsigned char)(v != 0); break;
    }
}

extern "C" ldt_status ldt__cuda_fill(const ldt__operand *out, double v, const ldt__cuda_env *env) {
    unsigned char b[8], zero[8] = {0};
    int64_t n;
    LDT_CHECK(ldt__check_operand("fill", out, -1));
    LDT_CHECK(ldt_shape_numel(&out->shape, &n));
    if (n == 0) return LDT_OK;
    size_t es = ldt_dtype_size(out->dtype);
    cudaStream_t s = LDT__CUDA_STREAM(env);
    fill_bytes(out->dtype, v, b);
    if (!memcmp(b, zero, es)) {
        LDT__CUDA_CALL("fill", cudaMemsetAsync(out->data, 0, (size_t)n * es, s));
        return LDT_OK;
    }
    unsigned g = ldt__cuda_blocks(n);
    switch (es) {
    case 1: LDT__CUDA_LAUNCH(k_fill, g, LDT__CUDA_THREADS, 0, s)((uint8_t *)out->data, n, b[0]); break;
    case 2: {
        uint16_t x;
        memcpy(&x, b, 2);
        LDT__CUDA_LAUNCH(k_fill, g, LDT__CUDA_THREADS, 0, s)((uint16_t *)out->data, n, x);
    } break;
    case 4: {
        uint32_t x;
        memcpy(&x, b, 4);
        LDT__CUDA_LAUNCH(k_fill, g, LDT__CUDA_THREADS, 0, s)((uint32_t *)out->data, n, x);
    } break;
    default: {
        uint64_t x;
        memcpy(&x, b, 8);
        LDT__CUDA_LAUNCH(k_fill, g, LDT__CUDA_THREADS, 0, s)((uint64_t *)out->data, n, x);
    } break;
    }
    LDT__CUDA_LAUNCHED("fill");
    return LDT_OK;
}
