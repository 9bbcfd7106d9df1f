// CUDA fill: every element of a buffer set to one value (the FILL instruction).
#include <stdint.h>
#include <string.h>

#include "kernels/common/store.h"
#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
template <typename T> __global__ void k_fill(T *o, int64_t n, T v) {
    LDT__CUDA_FOR(i, n) o[i] = v;
}

// arange: element i of the global tensor is a + b * i, each local element at its global index;
// the product and the sum rounded apart, as the CPU does (nvcc would fuse them into an FMA).
__global__ void k_arange(void *o, ldt_dtype t, ldt__cuda_region r, int64_t n, double a, double b) {
    LDT__CUDA_FOR(i, n) ldt__store_f64(o, t, i, __dadd_rn(a, __dmul_rn(b, (double)ldt__cuda_region_global(r, i))));
}

// ---- launchers -------------------------------------------------------------------------
// v rounded once to dtype t, as the CPU stores it (kernels/common/store.h).
static void fill_bytes(ldt_dtype t, double v, unsigned char out[8]) {
    memset(out, 0, 8);
    ldt__store_f64(out, t, 0, v);
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

extern "C" ldt_status ldt__cuda_arange(const ldt__operand *out, const ldt_region *region,
                                       const ldt_shape *global, double a, double b,
                                       const ldt__cuda_env *env) {
    ldt__kcall c;
    ldt__cuda_region reg;
    int64_t n;
    memset(&c, 0, sizeof c);
    c.op = -1;
    c.out = *out;
    c.region = region;
    c.global_shape = global;
    LDT_CHECK(ldt__check_operand("arange", out, -1));
    LDT_CHECK(ldt__cuda_region_make("arange", &c, &reg));
    LDT_CHECK(ldt_shape_numel(&out->shape, &n));
    if (n == 0) return LDT_OK;
    LDT__CUDA_LAUNCH(k_arange, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
        out->data, out->dtype, reg, n, a, b);
    LDT__CUDA_LAUNCHED("arange");
    return LDT_OK;
}
