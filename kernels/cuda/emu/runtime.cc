// The CUDA emulator's runtime (kernels/cuda/emu/cuda_runtime.h): memory, streams, events,
// stream capture into graphs, graph launch, and kernel grids run on fibers. Built only with
// LDT_CUDA=EMU, which runs the CUDA backend's tests on machines without a GPU.
#include "cuda_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <typeindex>
#include <vector>

// ---- errors ------------------------------------------------------------------------------
static thread_local cudaError_t last_error = cudaSuccess;

static cudaError_t fail(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

extern "C" cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
extern "C" cudaError_t cudaPeekAtLastError(void) { return last_error; }

extern "C" const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
#define N(x) case x: return #x;
        N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation)
        N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidPitchValue)
        N(cudaErrorInvalidDevicePointer)
        N(cudaErrorInvalidMemcpyDirection) N(cudaErrorNoDevice) N(cudaErrorInvalidDevice)
        N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady) N(cudaErrorIllegalAddress)
        N(cudaErrorStreamCaptureUnsupported) N(cudaErrorStreamCaptureInvalidated)
        N(cudaErrorStreamCaptureUnmatched) N(cudaErrorStreamCaptureUnjoined)
        N(cudaErrorStreamCaptureImplicit) N(cudaErrorCapturedEvent)
        N(cudaErrorStreamCaptureWrongThread) N(cudaErrorUnknown)
#undef N
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
    case cudaErrorStreamCaptureUnjoined:
        return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureImplicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case cudaErrorStreamCaptureWrongThread:
        return "attempt to terminate a thread-local capture sequence from another thread";
    default: return "unknown error";
    }
}

// ---- devices -----------------------------------------------------------------------------
// LDT_EMU_DEVICES=N pretends there are N devices (default 1; 0 makes the GPU tests skip).
static int device_count(void) {
    const char *e = getenv("LDT_EMU_DEVICES");
    return e ? atoi(e) : 1;
}
static thread_local int current_device = 0;

extern "C" cudaError_t cudaGetDeviceCount(int *n) {
    if (!n) return fail(cudaErrorInvalidValue);
    *n = device_count();
    return *n ? cudaSuccess : fail(cudaErrorNoDevice);
}
extern "C" cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= device_count()) return fail(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGetDevice(int *d) {
    if (!d) return fail(cudaErrorInvalidValue);
    *d = current_device;
    return cudaSuccess;
}

// ---- memory: device and pinned allocations, tracked ---------------------------------------
static std::mutex mem_mu;
static std::map<uintptr_t, size_t> device_mem, pinned_mem;
static std::atomic<int64_t> n_kernels{0}, n_graph_launches{0};

static int in_map(const std::map<uintptr_t, size_t> &m, const void *p, size_t bytes) {
    std::lock_guard<std::mutex> g(mem_mu);
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return 0;
    --it;
    size_t sz = it->second ? it->second : 1;
    return a >= it->first && a + bytes <= it->first + sz;
}

extern "C" int ldt_emu_is_device(const void *p, size_t bytes) { return in_map(device_mem, p, bytes); }
static int is_pinned(const void *p, size_t bytes) { return in_map(pinned_mem, p, bytes); }

extern "C" void ldt_emu_get_stats(ldt_emu_stats *s) {
    if (!s) return;
    std::lock_guard<std::mutex> g(mem_mu);
    s->device_bytes = s->host_pinned_bytes = 0;
    for (auto &kv : device_mem) s->device_bytes += (int64_t)kv.second;
    for (auto &kv : pinned_mem) s->host_pinned_bytes += (int64_t)kv.second;
    s->kernels = n_kernels.load();
    s->graph_launches = n_graph_launches.load();
}

// ---- streams, graphs, capture ------------------------------------------------------------
struct CUgraph_st {
    std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> nodes;
};
struct CUstream_st {
    CUgraph_st *capture = nullptr; // the graph this stream records into, when capturing
    CUstream_st *origin = nullptr; // the stream that began that capture
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::thread::id owner;         // the thread that began the capture
    bool invalidated = false;      // a prohibited call happened during the capture
    bool unjoined = false;         // forked into a capture, work since its last join
    uint64_t seq = 0;              // work items enqueued (events remember where they were)
};
struct CUevent_st {
    CUstream_st *stream = nullptr; // where it was last recorded
    uint64_t seq = 0;              // the stream's seq then
    CUgraph_st *captured = nullptr;
};

static CUstream_st legacy_stream;
static std::mutex cap_mu;
static std::vector<CUstream_st *> capturing; // streams whose capture is in progress
static int global_captures = 0;              // captures in Global mode, any thread

static CUstream_st *S(cudaStream_t s) { return s ? s : &legacy_stream; }

// Whether an unsafe call (allocation, synchronisation, a blocking copy) made by this thread
// now is prohibited; when so, the captures it would break are invalidated, as the runtime
// does.
static bool unsafe_now(void) {
    std::lock_guard<std::mutex> g(cap_mu);
    bool bad = global_captures > 0;
    for (CUstream_st *c : capturing)
        if (c->mode == cudaStreamCaptureModeThreadLocal && c->owner == std::this_thread::get_id())
            bad = true;
    if (bad)
        for (CUstream_st *c : capturing)
            if (c->mode != cudaStreamCaptureModeRelaxed) c->invalidated = true;
    return bad;
}

static cudaError_t enqueue(cudaStream_t s, std::function<void()> fn) {
    CUstream_st *st = S(s);
    st->seq++;
    if (st->capture) {
        if (st != st->origin) st->unjoined = true;
        st->capture->nodes.push_back(std::move(fn));
        return cudaSuccess;
    }
    if (st == &legacy_stream && unsafe_now()) return fail(cudaErrorStreamCaptureImplicit);
    fn();
    return cudaSuccess;
}

extern "C" cudaError_t ldt_emu_enqueue(cudaStream_t s, void (*run)(void *), void *arg,
                                       void (*free_arg)(void *)) {
    std::shared_ptr<void> hold(arg, [free_arg](void *a) {
        if (free_arg) free_arg(a);
    });
    return enqueue(s, [run, hold]() { run(hold.get()); });
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (!p) return fail(cudaErrorInvalidValue);
    *p = nullptr;
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    void *m = malloc(bytes ? bytes : 1);
    if (!m) return fail(cudaErrorMemoryAllocation);
    memset(m, 0xA5, bytes); // device memory starts as garbage, not as zeros
    std::lock_guard<std::mutex> g(mem_mu);
    device_mem[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}

static cudaError_t free_in(std::map<uintptr_t, size_t> &m, void *p) {
    if (!p) return cudaSuccess;
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    std::lock_guard<std::mutex> g(mem_mu);
    auto it = m.find((uintptr_t)p);
    if (it == m.end()) return fail(cudaErrorInvalidValue);
    m.erase(it);
    free(p);
    return cudaSuccess;
}
extern "C" cudaError_t cudaFree(void *p) { return free_in(device_mem, p); }
extern "C" cudaError_t cudaFreeHost(void *p) { return free_in(pinned_mem, p); }

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes) {
    if (!p) return fail(cudaErrorInvalidValue);
    *p = nullptr;
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    void *m = malloc(bytes ? bytes : 1);
    if (!m) return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> g(mem_mu);
    pinned_mem[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}

// The copy's sides checked against the allocations: device sides must be device memory, host
// sides must not be.
static cudaError_t check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return cudaSuccess;
    if (!dst || !src) return cudaErrorInvalidValue;
    bool dd = ldt_emu_is_device(dst, bytes), sd = ldt_emu_is_device(src, bytes);
    switch (kind) {
    case cudaMemcpyHostToHost: return !dd && !sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToDevice: return dd && !sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost: return !dd && sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice: return dd && sd ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault: return cudaSuccess;
    }
    return cudaErrorInvalidMemcpyDirection;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    cudaError_t e = check_copy(dst, src, bytes, kind);
    if (e != cudaSuccess) return fail(e);
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind, cudaStream_t s) {
    cudaError_t e = check_copy(dst, src, bytes, kind);
    if (e != cudaSuccess) return fail(e);
    if (!bytes) return cudaSuccess;
    if (S(s)->capture) { // a captured copy's host side must be pinned
        bool hd = kind == cudaMemcpyHostToDevice, dh = kind == cudaMemcpyDeviceToHost;
        if ((hd && !is_pinned(src, bytes)) || (dh && !is_pinned(dst, bytes))) {
            S(s)->invalidated = true;
            return fail(cudaErrorStreamCaptureUnsupported);
        }
    }
    return enqueue(s, [dst, src, bytes]() { memmove(dst, src, bytes); });
}

extern "C" cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                         size_t spitch, size_t width, size_t height,
                                         cudaMemcpyKind kind, cudaStream_t s) {
    if (!width || !height) return cudaSuccess;
    if (width > dpitch || width > spitch) return fail(cudaErrorInvalidPitchValue);
    size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
    bool dd = ldt_emu_is_device(dst, dspan), sd = ldt_emu_is_device(src, sspan);
    bool ok = kind == cudaMemcpyDefault ||
              (dd == (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice) &&
               sd == (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice));
    if (!ok) return fail(cudaErrorInvalidValue);
    if (S(s)->capture && ((!dd && !is_pinned(dst, dspan)) || (!sd && !is_pinned(src, sspan)))) {
        S(s)->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    return enqueue(s, [=]() {
        for (size_t r = 0; r < height; r++)
            memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    });
}

extern "C" cudaError_t cudaMemset(void *p, int v, size_t bytes) {
    if (bytes && !ldt_emu_is_device(p, bytes)) return fail(cudaErrorInvalidValue);
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    if (bytes) memset(p, v, bytes);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s) {
    if (bytes && !ldt_emu_is_device(p, bytes)) return fail(cudaErrorInvalidValue);
    if (!bytes) return cudaSuccess;
    return enqueue(s, [p, v, bytes]() { memset(p, v, bytes); });
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    if (!s) return fail(cudaErrorInvalidValue);
    *s = new CUstream_st();
    return cudaSuccess;
}
extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    if (s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    delete s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (S(s)->capture) {
        S(s)->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess; // work ran when it was enqueued
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t s) {
    if (S(s)->capture) {
        S(s)->invalidated = true;
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void) {
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    if (!s) return fail(cudaErrorStreamCaptureUnsupported); // the legacy stream cannot capture
    if (s->capture) return fail(cudaErrorStreamCaptureUnsupported);
    s->capture = new CUgraph_st();
    s->origin = s;
    s->mode = mode;
    s->owner = std::this_thread::get_id();
    s->invalidated = false;
    s->unjoined = false;
    std::lock_guard<std::mutex> g(cap_mu);
    capturing.push_back(s);
    if (mode == cudaStreamCaptureModeGlobal) global_captures++;
    return cudaSuccess;
}

static std::mutex streams_mu;
static std::vector<CUstream_st *> forked; // streams that joined a capture by an event wait

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !g) return fail(cudaErrorInvalidValue);
    *g = nullptr;
    if (!s->capture) return fail(cudaErrorStreamCaptureUnmatched);
    if (s->origin != s) return fail(cudaErrorStreamCaptureUnmatched);
    if (s->mode == cudaStreamCaptureModeThreadLocal && s->owner != std::this_thread::get_id())
        return fail(cudaErrorStreamCaptureWrongThread);
    CUgraph_st *graph = s->capture;
    bool invalid = s->invalidated, unjoined = false;
    {
        std::lock_guard<std::mutex> lk(cap_mu);
        capturing.erase(std::remove(capturing.begin(), capturing.end(), s), capturing.end());
        if (s->mode == cudaStreamCaptureModeGlobal) global_captures--;
    }
    { // forked streams leave the capture with it; work not joined back is an error
        std::lock_guard<std::mutex> lk(streams_mu);
        for (CUstream_st *f : forked) {
            if (f->capture != graph) continue;
            unjoined = unjoined || f->unjoined;
            invalid = invalid || f->invalidated;
            f->capture = nullptr;
            f->origin = nullptr;
            f->unjoined = false;
        }
        forked.erase(std::remove_if(forked.begin(), forked.end(),
                                    [](CUstream_st *f) { return f->capture == nullptr; }),
                     forked.end());
    }
    s->capture = nullptr;
    s->origin = nullptr;
    if (invalid || unjoined) {
        delete graph;
        return fail(invalid ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined);
    }
    *g = graph;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st) {
    if (!st) return fail(cudaErrorInvalidValue);
    CUstream_st *x = S(s);
    *st = !x->capture ? cudaStreamCaptureStatusNone
          : x->invalidated ? cudaStreamCaptureStatusInvalidated
                           : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    (void)flags;
    if (!e) return fail(cudaErrorInvalidValue);
    *e = new CUevent_st();
    return cudaSuccess;
}
extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = S(s);
    e->stream = st;
    e->seq = st->seq;
    e->captured = st->capture;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    CUstream_st *st = S(s);
    if (e->captured) {
        if (!st->capture) { // fork: st joins the capture of the event's stream
            st->capture = e->captured;
            st->origin = e->stream->origin;
            st->mode = e->stream->mode;
            st->owner = e->stream->owner;
            st->unjoined = false;
            std::lock_guard<std::mutex> g(streams_mu);
            forked.push_back(st);
        } else if (st->capture != e->captured) {
            st->invalidated = true;
            return fail(cudaErrorStreamCaptureUnsupported);
        }
        // a join: the event stream's work up to the record is now ordered before st's
        if (e->stream != st && e->seq == e->stream->seq) e->stream->unjoined = false;
    }
    return cudaSuccess; // outside capture, the event's work has run already
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    if (e->captured) return fail(cudaErrorCapturedEvent);
    return unsafe_now() ? fail(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}
extern "C" cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return fail(cudaErrorInvalidResourceHandle);
    return e->captured ? fail(cudaErrorCapturedEvent) : cudaSuccess;
}

extern "C" cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n) {
    if (!g || !n) return fail(cudaErrorInvalidValue);
    if (nodes) return fail(cudaErrorInvalidValue); // the emulator only counts
    *n = g->nodes.size();
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
                                            unsigned long long flags) {
    (void)flags;
    if (!x || !g) return fail(cudaErrorInvalidValue);
    if (unsafe_now()) return fail(cudaErrorStreamCaptureUnsupported);
    *x = new CUgraphExec_st();
    (*x)->nodes = g->nodes;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
    if (!x) return fail(cudaErrorInvalidValue);
    CUgraphExec_st *ge = x;
    return enqueue(s, [ge]() {
        n_graph_launches++;
        for (auto &f : ge->nodes) f();
    });
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    delete x;
    return cudaSuccess;
}

// ---- kernels: a grid's blocks one after another, a block's threads as fibers --------------
thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {
enum { F_RUN, F_BARRIER, F_DONE };
// A fiber's saved context. On x86-64 a switch saves the callee-saved registers on the
// stack it leaves and swaps stack pointers (a few instructions: ucontext's swapcontext makes
// a sigprocmask system call on every switch, which was most of the emulator's time in kernels
// with barriers); elsewhere ucontext.
#if defined(__x86_64__) && !defined(LDT_EMU_UCONTEXT)
struct emu_ctx {
    void *sp = nullptr;
};
extern "C" void ldt_emu_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".globl ldt_emu_switch\n"
    ".hidden ldt_emu_switch\n"
    ".type ldt_emu_switch,@function\n"
    "ldt_emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size ldt_emu_switch,.-ldt_emu_switch\n");
// A fresh context that starts fn (which never returns) on the stack [stack, stack + size):
// six zero registers for the switch to pop, then fn as its return address, then a zero
// return address for fn, so fn starts with the stack aligned as after a call.
inline void ctx_make(emu_ctx *c, char *stack, size_t size, void (*fn)(void)) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;
    *--sp = (void *)fn;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    c->sp = sp;
}
inline void ctx_swap(emu_ctx *from, emu_ctx *to) { ldt_emu_switch(&from->sp, to->sp); }
#else
struct emu_ctx {
    ucontext_t uc;
};
inline void ctx_make(emu_ctx *c, char *stack, size_t size, void (*fn)(void)) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr; // fn never returns
    makecontext(&c->uc, fn, 0);
}
inline void ctx_swap(emu_ctx *from, emu_ctx *to) { swapcontext(&from->uc, &to->uc); }
#endif

struct fiber {
    emu_ctx ctx;
    char *stack = nullptr;
    int state = F_DONE;
    int barriers = 0;
    dim3 tid;
};
const size_t STACK = (size_t)256 << 10;
// The thread's fibers, their stacks unmapped when the thread ends.
struct fiber_pool {
    std::vector<fiber> v;
    ~fiber_pool() {
        for (fiber &f : v) munmap(f.stack, STACK);
    }
};
thread_local fiber_pool pool;
thread_local std::vector<fiber> *const fibers = &pool.v;
thread_local emu_ctx sched;
thread_local fiber *cur;
thread_local const std::function<void()> *body;
thread_local bool direct_mode;

// AddressSanitizer follows the stack switches (fiber annotations), so an emulated kernel's
// out-of-bounds access is reported as on any other stack or heap.
#if defined(__SANITIZE_ADDRESS__)
#define LDT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LDT_EMU_ASAN 1
#endif
#endif
thread_local const void *sched_bottom;
thread_local size_t sched_size;
#ifdef LDT_EMU_ASAN
inline void to_fiber(void **save, const fiber &f) {
    __sanitizer_start_switch_fiber(save, f.stack, STACK);
}
inline void in_sched(void *save) { __sanitizer_finish_switch_fiber(save, nullptr, nullptr); }
inline void to_sched(void **save) { __sanitizer_start_switch_fiber(save, sched_bottom, sched_size); }
inline void in_fiber(void *save) {
    __sanitizer_finish_switch_fiber(save, &sched_bottom, &sched_size);
}
#else
inline void to_fiber(void **, const fiber &) {}
inline void in_sched(void *) {}
inline void to_sched(void **) {}
inline void in_fiber(void *) {}
#endif

// A fiber's first frame: runs the thread to its end, then hands back to the scheduler for
// good (it is never resumed; the next block makes the context afresh).
void entry(void) {
    in_fiber(nullptr);
    (*body)();
    cur->state = F_DONE;
    to_sched(nullptr); // this fiber's stack frames end here
    ctx_swap(&cur->ctx, &sched);
    abort(); // unreachable: a finished fiber is never resumed
}

// LDT_EMU_REVERSE=1 runs every grid's blocks, and every block's threads between barriers,
// last first: a kernel whose result depends on the order (a race between blocks, or between
// threads without a barrier) then differs from the forward run, as it could on a GPU.
bool reverse_order(void) {
    static const bool r = getenv("LDT_EMU_REVERSE") && atoi(getenv("LDT_EMU_REVERSE"));
    return r;
}

// The k-th of n in the run order.
inline uint64_t in_order(uint64_t k, uint64_t n) { return reverse_order() ? n - 1 - k : k; }

inline dim3 unflatten(uint64_t i, dim3 d) {
    return dim3((unsigned)(i % d.x), (unsigned)(i / d.x % d.y), (unsigned)(i / ((uint64_t)d.x * d.y)));
}

// A block whose kernel needs no barrier: its threads one after another, as plain calls.
void run_block_direct(void) {
    uint64_t n = (uint64_t)blockDim.x * blockDim.y * blockDim.z;
    direct_mode = true;
    for (uint64_t k = 0; k < n; k++) {
        threadIdx = unflatten(in_order(k, n), blockDim);
        (*body)();
    }
    direct_mode = false;
}

// A block's threads as fibers; returns whether any reached a barrier.
bool run_block(unsigned nthreads) {
    while (fibers->size() < nthreads) {
        fibers->emplace_back();
        void *m = mmap(nullptr, STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "cuda emulator: cannot map a fiber stack\n");
            abort();
        }
        fibers->back().stack = (char *)m;
    }
    unsigned t = 0;
    for (unsigned z = 0; z < blockDim.z; z++)
        for (unsigned y = 0; y < blockDim.y; y++)
            for (unsigned x = 0; x < blockDim.x; x++, t++) {
                fiber &f = (*fibers)[t];
                f.tid = dim3(x, y, z);
                f.state = F_RUN;
                f.barriers = 0;
                ctx_make(&f.ctx, f.stack, STACK, entry);
            }
    for (;;) { // run every thread to the next barrier or to its end, then release the barrier
        bool waiting = false;
        for (unsigned k = 0; k < nthreads; k++) {
            fiber &f = (*fibers)[in_order(k, nthreads)];
            if (f.state == F_DONE) continue;
            f.state = F_RUN;
            cur = &f;
            threadIdx = f.tid;
            void *save = nullptr;
            to_fiber(&save, f);
            ctx_swap(&sched, &f.ctx);
            in_sched(save);
            if (f.state == F_BARRIER) waiting = true;
        }
        if (!waiting) break;
    }
    cur = nullptr;
    for (unsigned i = 0; i < nthreads; i++)
        if ((*fibers)[i].barriers) return true;
    return false;
}

// Launch sites (the type of the closure a launch wraps) whose first launch reached no
// barrier: later launches run their threads as plain calls, much faster than fibers.
std::mutex sites_mu;
std::map<std::type_index, bool> barrier_free;
} // namespace

void __syncthreads(void) {
    if (direct_mode) {
        fprintf(stderr, "cuda emulator: a kernel that reached no barrier in its first launch "
                        "reached __syncthreads in a later one (run it with LDT_EMU_FIBERS=1)\n");
        abort();
    }
    if (!cur) return; // not inside a kernel
    fiber *me = cur;
    me->state = F_BARRIER;
    me->barriers++;
    void *save = nullptr;
    to_sched(&save);
    ctx_swap(&me->ctx, &sched);
    in_fiber(save);
}

cudaError_t ldt_emu::run_grid(dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                              std::function<void()> fn) {
    uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !nthreads || nthreads > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535 || smem > 48 * 1024)
        return fail(cudaErrorInvalidConfiguration);
    static const bool fibers_always = getenv("LDT_EMU_FIBERS") && atoi(getenv("LDT_EMU_FIBERS"));
    std::type_index site(fn.target_type());
    return fail(enqueue(s, [grid, block, fn, site]() {
        n_kernels++;
        bool direct = false;
        if (!fibers_always) {
            std::lock_guard<std::mutex> g(sites_mu);
            auto it = barrier_free.find(site);
            direct = it != barrier_free.end() && it->second;
        }
        bool barriers = false;
        const std::function<void()> *saved_body = body; // a kernel never launches a kernel
        dim3 sg = gridDim, sb = blockDim, sbi = blockIdx;
        body = &fn;
        gridDim = grid;
        blockDim = block;
        uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z;
        for (uint64_t k = 0; k < nblocks; k++) {
            blockIdx = unflatten(in_order(k, nblocks), grid);
            if (direct)
                run_block_direct();
            else
                barriers |= run_block((unsigned)(block.x * block.y * block.z));
        }
        if (!direct && !fibers_always) {
            std::lock_guard<std::mutex> g(sites_mu);
            barrier_free.emplace(site, !barriers);
        }
        body = saved_body;
        gridDim = sg;
        blockDim = sb;
        blockIdx = sbi;
    }));
}
