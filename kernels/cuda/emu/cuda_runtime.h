/* The CUDA emulator (LDT_CUDA=EMU, docs/gpu.md "Testing without a GPU"): this header stands
 * in for the CUDA runtime's on machines without a GPU, so that kernels/cuda and the CUDA
 * backend run, unchanged, on the CPU. It declares the part of the runtime API lazydt uses,
 * with the runtime's names, types and error codes; kernels/cuda/emu/runtime.cc implements it.
 *
 * "Device" memory is host memory the emulator tracks, so copies and memsets are checked
 * against it. A stream runs its work at once when nothing captures it; a captured stream
 * records it into a graph, which a launch replays. The rules of capture that matter to us are
 * enforced as the runtime enforces them: no allocation, no synchronisation, no blocking copy
 * and no copy from pageable host memory while the calling thread captures.
 *
 * For C++ (the .cu files, compiled as C++) it also gives the device side: __global__ and
 * friends, threadIdx/blockIdx/blockDim/gridDim, __syncthreads (each thread of a block is a
 * fiber; a barrier switches to the next one), atomicCAS, the __*_rn intrinsics, and
 * ldt_emu::launch behind LDT__CUDA_LAUNCH (kernels/cuda/common.cuh). Not emulated: warps,
 * dynamic shared memory, concurrency between blocks (they run one after another). */
#ifndef LDT_CUDA_EMU_RUNTIME_H
#define LDT_CUDA_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#define LDT_CUDA_EMU 1
#define CUDART_VERSION 13000

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidPitchValue = 12,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
} cudaStreamCaptureMode;

typedef enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
} cudaStreamCaptureStatus;

#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14
} cudaDataType;

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st);

cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);

/* Emulator only: counters the tests read (bytes held, work run). */
typedef struct ldt_emu_stats {
    int64_t device_bytes, host_pinned_bytes; /* held now */
    int64_t kernels, graph_launches;         /* run since the process started */
} ldt_emu_stats;
void ldt_emu_get_stats(ldt_emu_stats *s);
/* Emulator only: for the runtime's libraries (cuBLAS, NCCL): work on stream s, run now or
 * recorded into the graph that captures s. run(arg) is called then; free_arg(arg) when the
 * work is dropped (NULL: nothing to free). */
cudaError_t ldt_emu_enqueue(cudaStream_t s, void (*run)(void *), void *arg,
                            void (*free_arg)(void *));
/* Emulator only: whether [p, p + bytes) lies in one device allocation. */
int ldt_emu_is_device(const void *p, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */

/* ---- the device side, for the .cu files compiled as C++ -------------------------------- */
#include <functional>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
/* one block runs at a time on the emulating thread: a static is the block's shared memory */
#define __shared__ static thread_local

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;

extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

void __syncthreads(void);

inline int atomicCAS(int *p, int cmp, int val) { /* blocks and threads never run at once */
    int old = *p;
    if (old == cmp) *p = val;
    return old;
}
/* round-to-nearest arithmetic, never contracted into an FMA (host C++ contracts nothing on
 * x86-64 without -mfma; volatile keeps it so) */
inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }

namespace ldt_emu {
/* Runs body for every thread of every block of the grid (on the stream, or into its graph). */
cudaError_t run_grid(dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                     std::function<void()> body);

/* LDT__CUDA_LAUNCH(k, grid, block, smem, stream)(args...) becomes
 * launch([=](auto... a) { k(a...); }, grid, block, smem, stream)(args...): the arguments are
 * copied at the launch, as a launch copies its parameters, and k's template arguments are
 * deduced from them, as nvcc deduces them. */
template <typename F> struct launcher {
    F f;
    dim3 grid, block;
    size_t smem;
    cudaStream_t s;
    template <typename... A> void operator()(A &&...a) const {
        F fn = f;
        std::function<void()> body = [fn, args = std::make_tuple(
                                              typename std::decay<A>::type(std::forward<A>(a))...)]() {
            std::apply(fn, args);
        };
        run_grid(grid, block, smem, s, std::move(body));
    }
};
template <typename F>
launcher<F> launch(F f, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t s = nullptr) {
    return launcher<F>{f, grid, block, smem, s};
}
} // namespace ldt_emu

#endif /* __cplusplus */

#endif
