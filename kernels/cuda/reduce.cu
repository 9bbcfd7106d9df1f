// CUDA kernels for sum, mean, amax, amin over dims (kernels/cpu/reduce.c).
//
// Each output element reads its inputs in increasing input order and adds them as the CPU
// does: floats in double with Neumaier's compensation, integers wrapping in uint64, amax and
// amin with NaN propagating. No atomics: one fixed order per output element, so a replay
// gives the same bits. Two shapes of work:
//   - one thread per output element, sequential: many outputs (or short reductions); the same
//     order as the CPU, so the same bits.
//   - one block per output element: few outputs with long reductions (a full sum). Thread t
//     takes the t-th contiguous run, and the runs are combined in a fixed tree, earlier run
//     on the left: integers and amax/amin still equal the CPU exactly; float sums differ only
//     by the order of a compensated double sum (within an ulp of the CPU's before the one
//     rounding to the output dtype).
#include <stdint.h>
#include <type_traits>

#include "kernels/common/cast.h"
#include "kernels/common/reduce_plan.h"
#include "kernels/cuda/common.cuh"

#define RD_BLOCK 256 // threads of the block-per-output kernel (a power of two)
#define RD_SPLIT_MIN 16384 // elements a block of the split reduction takes at least
#define RD_SPLIT_MAX 1024  // blocks per output of the split reduction at most
#define RD_TSPLIT_MIN 1024 // elements a thread of the split thread-per-output reduction takes at least
#define RD_TSPLIT_MAX 64   // chunks per output of that reduction at most

// The input as kept groups (their sizes in output order) and reduced groups, each with its
// input stride; output element o starts at input offset koff(o) and its r-th input (row-major
// over the reduced groups) sits at koff(o) + roff(r).
struct rd_dev {
    int nk, nr;
    int64_t ksize[LDT_MAX_DIMS], kstride[LDT_MAX_DIMS];
    int64_t rsize[LDT_MAX_DIMS], rstride[LDT_MAX_DIMS];
    int64_t out_n, count;
};

enum { RD_SUM, RD_MEAN, RD_AMAX, RD_AMIN };

// Element loads: floats to double (exact), integers to int64 (exact), bool as 0/1.
template <typename D> struct rd_load;
template <> struct rd_load<float> {
    __device__ static double f(const void *p, int64_t i) { return ((const float *)p)[i]; }
};
template <> struct rd_load<double> {
    __device__ static double f(const void *p, int64_t i) { return ((const double *)p)[i]; }
};
template <> struct rd_load<ldt__f16_t> {
    __device__ static double f(const void *p, int64_t i) {
        return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    }
};
template <> struct rd_load<ldt__bf16_t> {
    __device__ static double f(const void *p, int64_t i) {
        return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    }
};
template <> struct rd_load<int32_t> {
    __device__ static int64_t f(const void *p, int64_t i) { return ((const int32_t *)p)[i]; }
};
template <> struct rd_load<int64_t> {
    __device__ static int64_t f(const void *p, int64_t i) { return ((const int64_t *)p)[i]; }
};
template <> struct rd_load<uint8_t> {
    __device__ static int64_t f(const void *p, int64_t i) { return ((const uint8_t *)p)[i]; }
};
template <> struct rd_load<ldt__bool_t> {
    __device__ static int64_t f(const void *p, int64_t i) { return ((const uint8_t *)p)[i] != 0; }
};

// Accumulators: (sum, compensation) or the running extreme for floats; a wrapping sum or the
// running extreme for integers. add() takes one input; join() puts a later run's
// accumulator after this one's.
struct rd_facc {
    double s, c;
    __device__ void init(int op) {
        s = op == RD_AMAX ? -INFINITY : op == RD_AMIN ? INFINITY : 0.0;
        c = 0.0;
    }
    __device__ void add(int op, double x) {
        // NaN propagates: a NaN input replaces the extreme, and nothing replaces a NaN
        if (op == RD_SUM || op == RD_MEAN)
            ldt__neumaier_add(&s, &c, x);
        else if (op == RD_AMAX ? (x > s || x != x) : (x < s || x != x))
            s = x;
    }
    __device__ void join(int op, const rd_facc &b) {
        if (op == RD_SUM || op == RD_MEAN) {
            ldt__neumaier_add(&s, &c, b.s);
            c += b.c;
        } else {
            add(op, b.s);
        }
    }
};
struct rd_iacc {
    int64_t s;
    __device__ void init(int op) { s = op == RD_AMAX ? INT64_MIN : op == RD_AMIN ? INT64_MAX : 0; }
    __device__ void add(int op, int64_t x) {
        if (op == RD_SUM)
            s = (int64_t)((uint64_t)s + (uint64_t)x);
        else if (op == RD_AMAX ? x > s : x < s)
            s = x;
    }
    __device__ void join(int op, const rd_iacc &b) { add(op, b.s); }
};

// The accumulator and output store of a dtype: floats round once from double (round to odd
// into f32 first for the halves, as the CPU's store does); integer sums are i64, amax/amin
// keep the input's dtype (the value is one of the inputs: it fits).
template <typename D> struct rd_out {
    typedef rd_facc A;
    __device__ static void store(void *o, int64_t i, int op, const A &a, int64_t count) {
        double v = a.s;
        if ((op == RD_SUM || op == RD_MEAN) && isfinite(v)) v += a.c; // inf - inf is no fix
        if (op == RD_MEAN) v /= (double)count;
        if constexpr (std::is_same<D, float>::value) ((float *)o)[i] = (float)v;
        else if constexpr (std::is_same<D, double>::value) ((double *)o)[i] = v;
        else if constexpr (std::is_same<D, ldt__f16_t>::value)
            ((uint16_t *)o)[i] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(v));
        else ((uint16_t *)o)[i] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(v));
    }
};
template <typename T> struct rd_iout {
    typedef rd_iacc A;
    __device__ static void store(void *o, int64_t i, int op, const A &a, int64_t) {
        if (op == RD_SUM) ((int64_t *)o)[i] = a.s;
        else ((T *)o)[i] = (T)a.s;
    }
};
template <> struct rd_out<int32_t> : rd_iout<int32_t> {};
template <> struct rd_out<int64_t> : rd_iout<int64_t> {};
template <> struct rd_out<uint8_t> : rd_iout<uint8_t> {};
template <> struct rd_out<ldt__bool_t> : rd_iout<uint8_t> {}; // only sum (i64) reaches here

__device__ __forceinline__ int64_t rd_koff(const rd_dev &g, int64_t o) {
    int64_t off = 0;
    for (int k = g.nk - 1; k >= 0; k--) {
        int64_t q = o / g.ksize[k];
        off += (o - q * g.ksize[k]) * g.kstride[k];
        o = q;
    }
    return off;
}

// Adds inputs r0 .. r1-1 of the output starting at base into a, in order (an odometer over
// the reduced groups).
template <typename D>
__device__ void rd_run(const rd_dev &g, int op, const void *x, int64_t base, int64_t r0,
                       int64_t r1, typename rd_out<D>::A &a) {
    if (r0 >= r1) return;
    int64_t idx[LDT_MAX_DIMS], off = base, r = r0;
    for (int k = g.nr - 1; k >= 0; k--) {
        int64_t q = r / g.rsize[k];
        idx[k] = r - q * g.rsize[k];
        off += idx[k] * g.rstride[k];
        r = q;
    }
    for (int64_t j = r0; j < r1; j++) {
        a.add(op, rd_load<D>::f(x, off));
        for (int k = g.nr - 1; k >= 0; k--) {
            off += g.rstride[k];
            if (++idx[k] < g.rsize[k]) break;
            off -= g.rstride[k] * g.rsize[k];
            idx[k] = 0;
        }
    }
}

// ---- kernels ---------------------------------------------------------------------------
template <typename D> __global__ void k_reduce_thread(rd_dev g, int op, const void *x, void *y) {
    LDT__CUDA_FOR(o, g.out_n) {
        typename rd_out<D>::A a;
        a.init(op);
        rd_run<D>(g, op, x, rd_koff(g, o), 0, g.count, a);
        rd_out<D>::store(y, o, op, a, g.count);
    }
}

template <typename D> __global__ void k_reduce_block(rd_dev g, int op, const void *x, void *y) {
    typedef typename rd_out<D>::A A;
    __shared__ A part[RD_BLOCK];
    const int t = threadIdx.x;
    const int64_t run = (g.count + RD_BLOCK - 1) / RD_BLOCK;
    for (int64_t o = blockIdx.x; o < g.out_n; o += gridDim.x) {
        A a;
        a.init(op);
        int64_t r0 = t * run, r1 = r0 + run < g.count ? r0 + run : g.count;
        rd_run<D>(g, op, x, rd_koff(g, o), r0, r1, a);
        part[t] = a;
        __syncthreads();
        for (int w = 1; w < RD_BLOCK; w *= 2) { // the same tree whatever the timing
            if (t % (2 * w) == 0) part[t].join(op, part[t + w]);
            __syncthreads();
        }
        if (t == 0) rd_out<D>::store(y, o, op, part[0], g.count);
        __syncthreads();
    }
}

// Few, long outputs with a scratch (ldt__cuda_env.scratch): G blocks per output, block c
// taking the c-th of G contiguous chunks of the reduced elements (each thread a contiguous
// run of it, joined in the block's fixed tree) into part[o * G + c]; then k_reduce_join
// joins an output's G parts in a fixed tree. The same bits at every replay.
template <typename D>
__global__ void k_reduce_split(rd_dev g, int op, const void *x, typename rd_out<D>::A *part, int64_t G) {
    typedef typename rd_out<D>::A A;
    __shared__ A sh[RD_BLOCK];
    const int t = threadIdx.x;
    const int64_t chunk = (g.count + G - 1) / G;
    for (int64_t bi = blockIdx.x; bi < g.out_n * G; bi += gridDim.x) {
        const int64_t o = bi / G, c = bi - o * G;
        const int64_t c0 = c * chunk < g.count ? c * chunk : g.count;
        const int64_t c1 = c0 + chunk < g.count ? c0 + chunk : g.count;
        const int64_t run = (c1 - c0 + RD_BLOCK - 1) / RD_BLOCK;
        A a;
        a.init(op);
        int64_t r0 = c0 + t * run, r1 = r0 + run < c1 ? r0 + run : c1;
        rd_run<D>(g, op, x, rd_koff(g, o), r0, r1, a);
        sh[t] = a;
        __syncthreads();
        for (int w = 1; w < RD_BLOCK; w *= 2) {
            if (t % (2 * w) == 0) sh[t].join(op, sh[t + w]);
            __syncthreads();
        }
        if (t == 0) part[bi] = sh[0];
        __syncthreads();
    }
}

template <typename D>
__global__ void k_reduce_join(rd_dev g, int op, const typename rd_out<D>::A *part, int64_t G, void *y) {
    typedef typename rd_out<D>::A A;
    __shared__ A sh[RD_BLOCK];
    const int t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < g.out_n; o += gridDim.x) {
        A a;
        a.init(op);
        for (int64_t c = t; c < G; c += RD_BLOCK) a.join(op, part[o * G + c]);
        sh[t] = a;
        __syncthreads();
        for (int w = 1; w < RD_BLOCK; w *= 2) {
            if (t % (2 * w) == 0) sh[t].join(op, sh[t + w]);
            __syncthreads();
        }
        if (t == 0) rd_out<D>::store(y, o, op, sh[0], g.count);
        __syncthreads();
    }
}

// Many outputs, each long, too few to fill the GPU a thread each: G chunks of the reduced
// elements per output, thread (c, o) reducing chunk c of output o into part[c * out_n + o]
// (adjacent threads, adjacent outputs); then a thread per output joins its G parts in order.
template <typename D>
__global__ void k_reduce_thread_split(rd_dev g, int op, const void *x, typename rd_out<D>::A *part,
                                      int64_t G) {
    typedef typename rd_out<D>::A A;
    const int64_t chunk = (g.count + G - 1) / G;
    LDT__CUDA_FOR(i, g.out_n * G) {
        const int64_t c = i / g.out_n, o = i - c * g.out_n;
        const int64_t r0 = c * chunk < g.count ? c * chunk : g.count;
        const int64_t r1 = r0 + chunk < g.count ? r0 + chunk : g.count;
        A a;
        a.init(op);
        rd_run<D>(g, op, x, rd_koff(g, o), r0, r1, a);
        part[i] = a;
    }
}

template <typename D>
__global__ void k_reduce_thread_join(rd_dev g, int op, const typename rd_out<D>::A *part, int64_t G,
                                     void *y) {
    typedef typename rd_out<D>::A A;
    LDT__CUDA_FOR(o, g.out_n) {
        A a;
        a.init(op);
        for (int64_t c = 0; c < G; c++) a.join(op, part[c * g.out_n + o]);
        rd_out<D>::store(y, o, op, a, g.count);
    }
}

// The identity of an empty reduction: 0 for sums, NaN for mean (0/0, as torch).
template <typename D> __global__ void k_reduce_empty(int64_t n, int op, void *y) {
    LDT__CUDA_FOR(i, n) {
        typename rd_out<D>::A a;
        a.init(op);
        rd_out<D>::store(y, i, op, a, 0);
    }
}

// ---- launchers -------------------------------------------------------------------------
struct launch_reduce {
    template <typename D>
    static void run(const rd_dev &g, int op, const void *x, void *y, void *scratch,
                    size_t scratch_bytes, cudaStream_t s) {
        typedef typename rd_out<D>::A A;
        if (g.count == 0) {
            LDT__CUDA_LAUNCH(k_reduce_empty<D>, ldt__cuda_blocks(g.out_n), LDT__CUDA_THREADS, 0, s)(g.out_n, op, y);
            return;
        }
        // Few outputs, each very long: several blocks per output (RD_SPLIT_MIN elements or
        // more each), as many as the scratch holds parts for, at most RD_SPLIT_MAX.
        int64_t G = g.count / RD_SPLIT_MIN, cap = scratch ? (int64_t)(scratch_bytes / sizeof(A)) / g.out_n : 0;
        if (G > cap) G = cap;
        if (G > RD_SPLIT_MAX) G = RD_SPLIT_MAX;
        if (g.out_n < 64 && G >= 2) {
            A *part = (A *)scratch;
            int64_t nb = g.out_n * G;
            LDT__CUDA_LAUNCH(k_reduce_split<D>, (unsigned)(nb < 65536 ? nb : 65536), RD_BLOCK, 0, s)(g, op, x, part, G);
            LDT__CUDA_LAUNCH(k_reduce_join<D>, (unsigned)g.out_n, RD_BLOCK, 0, s)(g, op, part, G, y);
            return;
        }
        // Outputs too few to fill the GPU a thread each, each long: split into G chunks.
        int64_t Gt = g.count / RD_TSPLIT_MIN, capt = scratch ? (int64_t)(scratch_bytes / sizeof(A)) / g.out_n : 0;
        if (Gt > capt) Gt = capt;
        if (Gt > RD_TSPLIT_MAX) Gt = RD_TSPLIT_MAX;
        if (g.out_n >= 64 && g.out_n < 32768 && Gt >= 2) {
            A *part = (A *)scratch;
            LDT__CUDA_LAUNCH(k_reduce_thread_split<D>, ldt__cuda_blocks(g.out_n * Gt), LDT__CUDA_THREADS, 0, s)(
                g, op, x, part, Gt);
            LDT__CUDA_LAUNCH(k_reduce_thread_join<D>, ldt__cuda_blocks(g.out_n), LDT__CUDA_THREADS, 0, s)(
                g, op, part, Gt, y);
            return;
        }
        // A block per output when the outputs alone cannot fill the GPU and each is long.
        if (g.out_n < 2048 && g.count >= 4 * RD_BLOCK) {
            unsigned b = (unsigned)(g.out_n < 65536 ? g.out_n : 65536);
            LDT__CUDA_LAUNCH(k_reduce_block<D>, b, RD_BLOCK, 0, s)(g, op, x, y);
        } else {
            LDT__CUDA_LAUNCH(k_reduce_thread<D>, ldt__cuda_blocks(g.out_n), LDT__CUDA_THREADS, 0, s)(g, op, x, y);
        }
    }
};

extern "C" ldt_status ldt__cuda_k_reduce(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__rd_geom geo;
    rd_dev g;
    int op = c->op == LDT_OP_SUM    ? RD_SUM
             : c->op == LDT_OP_MEAN ? RD_MEAN
             : c->op == LDT_OP_AMAX ? RD_AMAX
             : c->op == LDT_OP_AMIN ? RD_AMIN
                                    : -1;
    if (op < 0)
        LDT_FAIL(LDT_ERR_INTERNAL, "reduce kernels: op %d is not sum, mean, amax or amin", c->op);
    LDT_CHECK(ldt__rd_check(c, &geo));
    LDT_CHECK(ldt__check_operand(name, &c->in[0], 0));
    LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    if (geo.out_numel == 0) return LDT_OK;
    memset(&g, 0, sizeof g);
    g.out_n = geo.out_numel;
    g.count = geo.count;
    int64_t st = 1;
    for (int k = geo.n - 1; k >= 0; k--) st *= geo.size[k];
    for (int k = 0; k < geo.n; k++) { // input strides of the groups, outermost first
        st /= geo.size[k] ? geo.size[k] : 1;
        if (geo.red[k]) {
            g.rsize[g.nr] = geo.size[k];
            g.rstride[g.nr++] = st;
        } else {
            g.ksize[g.nk] = geo.size[k];
            g.kstride[g.nk++] = st;
        }
    }
    LDT__CUDA_DISPATCH(c->in[0].dtype, launch_reduce, g, op, c->in[0].data, c->out.data,
                       env ? env->scratch : NULL, env ? env->scratch_bytes : 0, LDT__CUDA_STREAM(env));
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
