// Internal to kernels/cuda: launch geometry, status macros and per-dtype element traits
// shared by the .cu files (each file still holds one op family).
#ifndef LDT_KERNELS_CUDA_COMMON_CUH
#define LDT_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cuda/kernel.h"

#define LDT__CUDA_THREADS 256

// Blocks for n elements with a grid-stride loop: enough to fill the GPU, never above the
// grid's x limit.
static inline unsigned ldt__cuda_blocks(int64_t n) {
    int64_t b = (n + LDT__CUDA_THREADS - 1) / LDT__CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

// Launches kernel k with the launch configuration (grid, block[, shared bytes[, stream]]),
// then its arguments: LDT__CUDA_LAUNCH(k, g, b, 0, s)(args...). Under the CUDA emulator
// (LDT_CUDA=EMU, kernels/cuda/emu) the same line runs the grid on the CPU.
#ifdef LDT_CUDA_EMU
#define LDT__CUDA_LAUNCH(k, ...) ldt_emu::launch([=](auto... a_) { k(a_...); }, __VA_ARGS__)
#else
#define LDT__CUDA_LAUNCH(k, ...) k<<<__VA_ARGS__>>>
#endif

#define LDT__CUDA_STREAM(env) ((cudaStream_t)((env) ? (env)->stream : NULL))

// For i over [0, n) in a grid-stride loop.
#define LDT__CUDA_FOR(i, n)                                                                 \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);               \
         i += (int64_t)gridDim.x * blockDim.x)

// After a launch: a bad configuration or a sticky device error, named, as LDT_ERR_CUDA.
#define LDT__CUDA_LAUNCHED(opname)                                                          \
    do {                                                                                    \
        cudaError_t e_ = cudaGetLastError();                                                \
        if (e_ != cudaSuccess)                                                              \
            LDT_FAIL(LDT_ERR_CUDA, "%s: kernel launch failed: %s (%s)", (opname),           \
                     cudaGetErrorString(e_), cudaGetErrorName(e_));                         \
    } while (0)

// A runtime call inside a launcher (memset, memcpy on the stream), named, as LDT_ERR_CUDA.
#define LDT__CUDA_CALL(opname, call)                                                        \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            LDT_FAIL(LDT_ERR_CUDA, "%s: %s failed: %s (%s)", (opname), #call,               \
                     cudaGetErrorString(e_), cudaGetErrorName(e_));                         \
    } while (0)

// Records the first device data error (kernels/cuda/kernel.h) into *err, when there is one.
__device__ __forceinline__ void ldt__cuda_derr(int *err, int code) {
    if (err) atomicCAS(err, 0, code);
}

// "op: dtype X is not supported (f32, ...)", listing mask's dtypes (kernels/cuda/table.cu).
ldt_status ldt__cuda_fail_dtype(const char *op, ldt_dtype t, unsigned mask);

// Where a local output sits in the global tensor, for kernels that draw by global index
// (random ops, dropout; kernels/cpu/random.c walks the same runs): along dim d, local index
// k is global (k / len) * block_stride + start + k % len.
struct ldt__cuda_region {
    int nd; // 0: the output is the whole tensor (global index = local index)
    int64_t ldims[LDT_MAX_DIMS];
    int64_t start[LDT_MAX_DIMS], len[LDT_MAX_DIMS], bstride[LDT_MAX_DIMS];
    int64_t gstride[LDT_MAX_DIMS];
};

__device__ __forceinline__ int64_t ldt__cuda_region_global(const ldt__cuda_region &r, int64_t i) {
    if (r.nd == 0) return i;
    int64_t g = 0;
    for (int d = r.nd - 1; d >= 0; d--) {
        int64_t q = i / r.ldims[d], k = i - q * r.ldims[d];
        i = q;
        g += ((k / r.len[d]) * r.bstride[d] + r.start[d] + k % r.len[d]) * r.gstride[d];
    }
    return g;
}

// c's region (NULL: the whole tensor) as the kernels walk it, checked as the CPU kernels
// check it: a wrong one would write outside the buffer or read the stream at the wrong
// places (kernels/cuda/random.cu).
ldt_status ldt__cuda_region_make(const char *name, const ldt__kcall *c, ldt__cuda_region *out);

// ---- element traits: storage type S, compute type C, load and store -------------------
struct ldt__f16_t {};
struct ldt__bf16_t {};
struct ldt__bool_t {};

template <typename D> struct ldt__el;
// A type that is its own compute type: load and store are the identity.
template <typename T> struct ldt__el_plain {
    typedef T S;
    typedef T C;
    __device__ static C load(S s) { return s; }
    __device__ static S store(C c) { return c; }
};
template <> struct ldt__el<float> : ldt__el_plain<float> {};
template <> struct ldt__el<double> : ldt__el_plain<double> {};
// Halves compute in f32 and round once on the way out, as the CPU kernels do.
template <> struct ldt__el<ldt__f16_t> {
    typedef uint16_t S;
    typedef float C;
    __device__ static C load(S s) { return ldt__f16_to_f32(s); }
    __device__ static S store(C c) { return ldt__f32_to_f16(c); }
};
template <> struct ldt__el<ldt__bf16_t> {
    typedef uint16_t S;
    typedef float C;
    __device__ static C load(S s) { return ldt__bf16_to_f32(s); }
    __device__ static S store(C c) { return ldt__f32_to_bf16(c); }
};
// Integers: U is the unsigned type that wrapping arithmetic is computed in.
template <> struct ldt__el<int32_t> : ldt__el_plain<int32_t> { typedef uint32_t U; };
template <> struct ldt__el<int64_t> : ldt__el_plain<int64_t> { typedef uint64_t U; };
template <> struct ldt__el<uint8_t> : ldt__el_plain<uint8_t> { typedef unsigned U; };
// bool compares as 0/1 whatever byte it holds.
template <> struct ldt__el<ldt__bool_t> {
    typedef uint8_t S;
    typedef uint8_t C;
    typedef unsigned U;
    __device__ static C load(S s) { return s != 0; }
    __device__ static S store(C c) { return c != 0; }
};

// Calls F::template run<D>(args...) with D the trait tag of dtype t; returns LDT_ERR_INTERNAL
// for an invalid dtype (the launchers check dtypes first).
#define LDT__CUDA_DISPATCH(t, F, ...)                                                       \
    ((t) == LDT_F32    ? F::template run<float>(__VA_ARGS__)                                \
     : (t) == LDT_F64  ? F::template run<double>(__VA_ARGS__)                               \
     : (t) == LDT_F16  ? F::template run<ldt__f16_t>(__VA_ARGS__)                           \
     : (t) == LDT_BF16 ? F::template run<ldt__bf16_t>(__VA_ARGS__)                          \
     : (t) == LDT_I32  ? F::template run<int32_t>(__VA_ARGS__)                              \
     : (t) == LDT_I64  ? F::template run<int64_t>(__VA_ARGS__)                              \
     : (t) == LDT_U8   ? F::template run<uint8_t>(__VA_ARGS__)                              \
                       : F::template run<ldt__bool_t>(__VA_ARGS__))

#endif
