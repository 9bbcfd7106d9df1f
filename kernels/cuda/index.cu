// CUDA kernels of the index family (kernels/cpu/index.c): embedding, one_hot, index_select,
// gather, scatter, scatter_add, index_add, index_put.
//
// Copies move elements as same-sized unsigned words (every dtype, NaN payloads kept).
// Accumulation adds in the element's dtype as the CPU does (halves through f32, rounded after
// every addition; integers wrap). Deterministic without atomics: each destination element
// belongs to one thread, which walks the index list in the CPU's order (row-major of the
// index; index_put: increasing j), so duplicates add in the CPU's order and, without
// accumulate, the CPU's last write wins. An index outside -n..n-1 (the CPU refuses the call
// before writing) is a device data error: recorded (LDT__CUDA_DERR_INDEX_RANGE) and skipped.
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "kernels/common/index_plan.h"
#include "kernels/cuda/common.cuh"

// Index i of an i32 or i64 tensor.
__device__ __forceinline__ int64_t ix_raw(const void *ix, int ix64, int64_t i) {
    return ix64 ? ((const int64_t *)ix)[i] : (int64_t)((const int32_t *)ix)[i];
}

// v as an entry of n (negative counts from the end); -1 and the error recorded when v is
// outside -n..n-1.
__device__ __forceinline__ int64_t ix_norm(int64_t v, int64_t n, int *err) {
    if (v < -n || v >= n) {
        ldt__cuda_derr(err, LDT__CUDA_DERR_INDEX_RANGE);
        return -1;
    }
    return v < 0 ? v + n : v;
}

// dst = dst + src in dtype D (never bool: the launchers refuse it), as the CPU's add_run.
template <typename D>
__device__ __forceinline__ typename ldt__el<D>::S ix_add(typename ldt__el<D>::S b,
                                                         typename ldt__el<D>::S a) {
    typedef ldt__el<D> E;
    if constexpr (std::is_floating_point<typename E::C>::value)
        return E::store(E::load(b) + E::load(a));
    else
        return (typename E::S)((typename E::U)b + (typename E::U)a);
}

// Geometry of gather and scatter: position p of the index (row-major over idims) pairs x's
// position with its dim coordinate replaced by index[p], and src's position.
struct ix_gs {
    int nd, dim;
    int64_t idims[LDT_MAX_DIMS];
    int64_t xs[LDT_MAX_DIMS], ss[LDT_MAX_DIMS], is[LDT_MAX_DIMS]; // x, src, index strides
    int64_t n;                                                    // x.dims[dim]
};

// index_put: entry j addresses the block x[idx_0[j], ..., idx_{k-1}[j], ...] of blk
// elements (bdims: x.dims[k:]); values broadcast to [L, bdims] with strides vst (0 where
// broadcast).
struct ix_put {
    int k, nb;
    const void *ix[LDT_MAX_DIMS];
    int ix64[LDT_MAX_DIMS];
    int64_t xn[LDT_MAX_DIMS], xs[LDT_MAX_DIMS];
    int64_t bdims[LDT_MAX_DIMS], vst[LDT_MAX_DIMS + 1];
    int64_t L, blk;
};

// ---- kernels ---------------------------------------------------------------------------
// embedding: weight [len, H] (rows [lo, lo + len) of a V-row table), ix [n] -> out [n, H];
// one thread per output element; rows held elsewhere (range mode) are zero.
template <typename W>
__global__ void k_embedding(int64_t n, int64_t H, int64_t len, int64_t lo, int64_t V,
                            const W *w, const void *ix, int ix64, W *out, int *err) {
    LDT__CUDA_FOR(e, n * H) {
        int64_t i = e / H, h = e - i * H;
        int64_t v = ix_norm(ix_raw(ix, ix64, i), V, err);
        if (v < 0) continue;
        int64_t r = v - lo;
        out[e] = r >= 0 && r < len ? w[r * H + h] : (W)0; // all-zero bits: 0 in every dtype
    }
}

// one_hot: ix [n] -> out [n, C]: `one` (1 in the output dtype, as bits) at each index.
template <typename W>
__global__ void k_one_hot(int64_t n, int64_t C, const void *ix, int ix64, W one, W *out,
                          int *err) {
    LDT__CUDA_FOR(e, n * C) {
        int64_t i = e / C, k = e - i * C;
        int64_t raw = ix_raw(ix, ix64, i);
        int64_t v = k == 0 ? ix_norm(raw, C, err) : (raw < -C || raw >= C) ? -1 : raw < 0 ? raw + C : raw;
        out[e] = v == k ? one : (W)0;
    }
}

// index_select: x [outer, n, inner], ix [L] -> out [outer, L, inner].
template <typename W>
__global__ void k_index_select(int64_t outer, int64_t n, int64_t L, int64_t inner, const W *x,
                               const void *ix, int ix64, W *out, int *err) {
    LDT__CUDA_FOR(e, outer * L * inner) {
        int64_t i = e % inner, j = (e / inner) % L, o = e / (inner * L);
        int64_t v = ix_norm(ix_raw(ix, ix64, j), n, err);
        if (v >= 0) out[e] = x[(o * n + v) * inner + i];
    }
}

// gather: out[p] = x at p with its dim coordinate replaced by index[p].
template <typename W>
__global__ void k_gather(int64_t total, ix_gs g, const W *x, const void *ix, int ix64, W *out,
                         int *err) {
    LDT__CUDA_FOR(p, total) {
        int64_t r = p, xo = 0;
        for (int d = g.nd - 1; d >= 0; d--) {
            int64_t q = r / g.idims[d];
            if (d != g.dim) xo += (r - q * g.idims[d]) * g.xs[d]; // the index gives dim's
            r = q;
        }
        int64_t v = ix_norm(ix_raw(ix, ix64, p), g.n, err);
        if (v >= 0) out[p] = x[xo + v * g.xs[g.dim]];
    }
}

// scatter, scatter_add (out already holds x): one thread per line of the index along dim
// (its other coordinates fixed), walking the line in order. Lines own disjoint destination
// lines of x, and one line's entries are in the CPU's row-major order.
template <typename D>
__global__ void k_scatter(int64_t lines, ix_gs g, int acc, const void *ix, int ix64,
                          const typename ldt__el<D>::S *src, typename ldt__el<D>::S *out,
                          int *err) {
    const int64_t len = g.idims[g.dim];
    LDT__CUDA_FOR(t, lines) {
        int64_t r = t, xo = 0, so = 0, io = 0;
        for (int d = g.nd - 1; d >= 0; d--) {
            if (d == g.dim) continue;
            int64_t q = r / g.idims[d], c = r - q * g.idims[d];
            xo += c * g.xs[d];
            so += c * g.ss[d];
            io += c * g.is[d];
            r = q;
        }
        for (int64_t j = 0; j < len; j++) {
            int64_t v = ix_norm(ix_raw(ix, ix64, io + j * g.is[g.dim]), g.n, err);
            if (v < 0) continue;
            typename ldt__el<D>::S a = src[so + j * g.ss[g.dim]];
            int64_t o = xo + v * g.xs[g.dim];
            out[o] = acc ? ix_add<D>(out[o], a) : a;
        }
    }
}

// index_add (out already holds x): x [outer, n, inner], src [outer, L, inner]; one thread per
// (o, i), walking j in order.
template <typename D>
__global__ void k_index_add(int64_t outer, int64_t n, int64_t L, int64_t inner,
                            const void *ix, int ix64, const typename ldt__el<D>::S *src,
                            typename ldt__el<D>::S *out, int *err) {
    LDT__CUDA_FOR(t, outer * inner) {
        int64_t o = t / inner, i = t - o * inner;
        for (int64_t j = 0; j < L; j++) {
            int64_t v = ix_norm(ix_raw(ix, ix64, j), n, err);
            if (v < 0) continue;
            int64_t d = (o * n + v) * inner + i;
            out[d] = ix_add<D>(out[d], src[(o * L + j) * inner + i]);
        }
    }
}

// index_put (out already holds x): one thread per block element e, walking j in order (the
// block starts at a multiple of blk, so e owns its destinations).
template <typename D>
__global__ void k_index_put(ix_put q, int acc, const typename ldt__el<D>::S *v,
                            typename ldt__el<D>::S *out, int *err) {
    LDT__CUDA_FOR(e, q.blk) {
        int64_t r = e, voff = 0;
        for (int d = q.nb - 1; d >= 0; d--) {
            int64_t qq = r / q.bdims[d];
            voff += (r - qq * q.bdims[d]) * q.vst[d + 1];
            r = qq;
        }
        for (int64_t j = 0; j < q.L; j++) {
            int64_t base = 0;
            int ok = 1;
            for (int i = 0; i < q.k; i++) {
                int64_t w = ix_norm(ix_raw(q.ix[i], q.ix64[i], j), q.xn[i], err);
                if (w < 0) ok = 0;
                base += w * q.xs[i];
            }
            if (!ok) continue;
            typename ldt__el<D>::S a = v[j * q.vst[0] + voff];
            out[base + e] = acc ? ix_add<D>(out[base + e], a) : a;
        }
    }
}

// ---- launchers -------------------------------------------------------------------------
// Calls F::template run<W>(args...) with W the unsigned word of es bytes.
#define IX_BY_SIZE(es, F, ...)                                                              \
    ((es) == 1   ? F::template run<uint8_t>(__VA_ARGS__)                                    \
     : (es) == 2 ? F::template run<uint16_t>(__VA_ARGS__)                                   \
     : (es) == 4 ? F::template run<uint32_t>(__VA_ARGS__)                                   \
                 : F::template run<uint64_t>(__VA_ARGS__))

static void ix_strides(const ldt_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

struct launch_embedding {
    template <typename W>
    static void run(int64_t n, int64_t H, int64_t len, int64_t lo, int64_t V, const void *w,
                    const void *ix, int ix64, void *out, int *err, cudaStream_t s) {
        LDT__CUDA_LAUNCH(k_embedding<W>, ldt__cuda_blocks(n * H), LDT__CUDA_THREADS, 0, s)(
            n, H, len, lo, V, (const W *)w, ix, ix64, (W *)out, err);
    }
};

struct launch_one_hot {
    template <typename W>
    static void run(int64_t n, int64_t C, const void *ix, int ix64, uint64_t one, void *out,
                    int *err, cudaStream_t s) {
        LDT__CUDA_LAUNCH(k_one_hot<W>, ldt__cuda_blocks(n * C), LDT__CUDA_THREADS, 0, s)(n, C, ix, ix64, (W)one,
                                                                           (W *)out, err);
    }
};

struct launch_index_select {
    template <typename W>
    static void run(int64_t outer, int64_t n, int64_t L, int64_t inner, const void *x,
                    const void *ix, int ix64, void *out, int *err, cudaStream_t s) {
        LDT__CUDA_LAUNCH(k_index_select<W>, ldt__cuda_blocks(outer * L * inner), LDT__CUDA_THREADS, 0, s)(
            outer, n, L, inner, (const W *)x, ix, ix64, (W *)out, err);
    }
};

struct launch_gather {
    template <typename W>
    static void run(int64_t total, const ix_gs &g, const void *x, const void *ix, int ix64,
                    void *out, int *err, cudaStream_t s) {
        LDT__CUDA_LAUNCH(k_gather<W>, ldt__cuda_blocks(total), LDT__CUDA_THREADS, 0, s)(total, g, (const W *)x, ix,
                                                                          ix64, (W *)out, err);
    }
};

struct launch_scatter {
    template <typename D>
    static void run(int64_t lines, const ix_gs &g, int acc, const void *ix, int ix64,
                    const void *src, void *out, int *err, cudaStream_t s) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_scatter<D>, ldt__cuda_blocks(lines), LDT__CUDA_THREADS, 0, s)(
            lines, g, acc, ix, ix64, (const S *)src, (S *)out, err);
    }
};

struct launch_index_add {
    template <typename D>
    static void run(int64_t outer, int64_t n, int64_t L, int64_t inner, const void *ix, int ix64,
                    const void *src, void *out, int *err, cudaStream_t s) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_index_add<D>, ldt__cuda_blocks(outer * inner), LDT__CUDA_THREADS, 0, s)(
            outer, n, L, inner, ix, ix64, (const S *)src, (S *)out, err);
    }
};

struct launch_index_put {
    template <typename D>
    static void run(const ix_put &q, int acc, const void *v, void *out, int *err,
                    cudaStream_t s) {
        typedef typename ldt__el<D>::S S;
        LDT__CUDA_LAUNCH(k_index_put<D>, ldt__cuda_blocks(q.blk), LDT__CUDA_THREADS, 0, s)(q, acc, (const S *)v,
                                                                             (S *)out, err);
    }
};

// x [outer, n, inner] around dim.
static void ix_split(const ldt_shape *s, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= s->dims[d];
    for (int d = dim + 1; d < s->ndim; d++) *inner *= s->dims[d];
}

// 1 in dtype t, as the bits of its element (one_hot's output may be any dtype).
static uint64_t ix_one_bits(ldt_dtype t) {
    switch (t) {
    case LDT_F32: return 0x3f800000u;
    case LDT_F64: return 0x3ff0000000000000ull;
    case LDT_F16: return 0x3c00u;
    case LDT_BF16: return 0x3f80u;
    default: return 1; // i32, i64, u8, bool
    }
}

extern "C" ldt_status ldt__cuda_k_index(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__ix_plan p;
    LDT_CHECK(ldt__ix_check(c, &p));
    cudaStream_t s = LDT__CUDA_STREAM(env);
    int *err = env ? env->err : NULL;
    const ldt__operand *x = &c->in[0];
    size_t es = ldt_dtype_size(c->out.dtype);
    int64_t on, xn;
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &on));
    LDT_CHECK(ldt_shape_numel(&x->shape, &xn));
    // scatter, scatter_add, index_add, index_put start from a copy of x (in place is fine)
    if (c->op == LDT_OP_SCATTER || c->op == LDT_OP_SCATTER_ADD || c->op == LDT_OP_INDEX_ADD ||
        c->op == LDT_OP_INDEX_PUT) {
        if (xn > 0 && c->out.data != x->data)
            LDT__CUDA_CALL(name, cudaMemcpyAsync(c->out.data, x->data, (size_t)xn * es,
                                                 cudaMemcpyDeviceToDevice, s));
    }
    switch (c->op) {
    case LDT_OP_EMBEDDING: {
        const ldt__operand *ix = &c->in[1];
        int64_t n, H = x->shape.dims[1];
        LDT_CHECK(ldt_shape_numel(&ix->shape, &n));
        if (n * H == 0) return LDT_OK;
        IX_BY_SIZE(es, launch_embedding, n, H, x->shape.dims[0], p.lo, p.V, x->data, ix->data,
                   ix->dtype == LDT_I64, c->out.data, err, s);
        break;
    }
    case LDT_OP_ONE_HOT: {
        int64_t n;
        LDT_CHECK(ldt_shape_numel(&x->shape, &n));
        if (n * p.C == 0) return LDT_OK;
        IX_BY_SIZE(es, launch_one_hot, n, p.C, x->data, x->dtype == LDT_I64,
                   ix_one_bits(c->out.dtype), c->out.data, err, s);
        break;
    }
    case LDT_OP_INDEX_SELECT:
    case LDT_OP_INDEX_ADD: {
        const ldt__operand *ix = &c->in[1];
        int64_t outer, inner, n = x->shape.dims[p.dim], L = ix->shape.dims[0];
        ix_split(&x->shape, p.dim, &outer, &inner);
        if (c->op == LDT_OP_INDEX_SELECT) {
            if (on == 0) return LDT_OK;
            IX_BY_SIZE(es, launch_index_select, outer, n, L, inner, x->data, ix->data,
                       ix->dtype == LDT_I64, c->out.data, err, s);
        } else {
            if (outer * inner == 0 || L == 0) return LDT_OK;
            LDT__CUDA_DISPATCH(x->dtype, launch_index_add, outer, n, L, inner, ix->data,
                               ix->dtype == LDT_I64, c->in[2].data, c->out.data, err, s);
        }
        break;
    }
    case LDT_OP_INDEX_PUT: {
        const ldt__operand *v = &c->in[1];
        ix_put q;
        int64_t vs[LDT_MAX_DIMS], xs[LDT_MAX_DIMS];
        int nd = x->shape.ndim, vnd = 1 + nd - p.k; // dims of [L, x.dims[k:]]
        memset(&q, 0, sizeof q);
        ix_strides(&x->shape, xs);
        ix_strides(&v->shape, vs);
        q.k = p.k;
        q.nb = vnd - 1;
        q.L = c->in[2].shape.dims[0];
        q.blk = 1;
        for (int i = 0; i < p.k; i++) {
            q.ix[i] = c->in[2 + i].data;
            q.ix64[i] = c->in[2 + i].dtype == LDT_I64;
            q.xn[i] = x->shape.dims[i];
            q.xs[i] = xs[i];
        }
        for (int d = 0; d < vnd; d++) {
            int vd = d - (vnd - v->shape.ndim);
            q.vst[d] = vd >= 0 && v->shape.dims[vd] != 1 ? vs[vd] : 0;
            if (d > 0) q.blk *= q.bdims[d - 1] = x->shape.dims[p.k + d - 1];
        }
        if (q.blk == 0 || q.L == 0) return LDT_OK;
        LDT__CUDA_DISPATCH(x->dtype, launch_index_put, q, p.acc, v->data, c->out.data, err, s);
        break;
    }
    default: { // gather, scatter, scatter_add
        const ldt__operand *ix = &c->in[1];
        ix_gs g;
        int64_t total;
        memset(&g, 0, sizeof g);
        g.nd = x->shape.ndim;
        g.dim = p.dim;
        g.n = x->shape.dims[p.dim];
        for (int d = 0; d < g.nd; d++) g.idims[d] = ix->shape.dims[d];
        ix_strides(&x->shape, g.xs);
        ix_strides(&ix->shape, g.is);
        LDT_CHECK(ldt_shape_numel(&ix->shape, &total));
        if (total == 0) return LDT_OK;
        if (c->op == LDT_OP_GATHER) {
            IX_BY_SIZE(es, launch_gather, total, g, x->data, ix->data, ix->dtype == LDT_I64,
                       c->out.data, err, s);
        } else {
            ix_strides(&c->in[2].shape, g.ss);
            LDT__CUDA_DISPATCH(x->dtype, launch_scatter, total / g.idims[p.dim], g,
                               c->op == LDT_OP_SCATTER_ADD, ix->data, ix->dtype == LDT_I64,
                               c->in[2].data, c->out.data, err, s);
        }
        break;
    }
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
