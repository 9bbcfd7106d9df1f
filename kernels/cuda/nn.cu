// CUDA kernels of the nn family (kernels/cpu/nn.c): softmax, log_softmax, layer_norm,
// rms_norm, cross_entropy, dropout.
//
// The formulas are kernels/common/nn_math.h's, element by element in the CPU's order: one
// thread per short softmax row, a block per long one, and 32 threads per norm row in the
// lanes nn_math.h sums norm statistics in; rows are read where they lie (launchers never
// allocate). Row max in the row's compute type, sums and norm statistics in double,
// exp in the row's type (expf for f32 and the halves), each output rounded once. Products in
// double go through __dmul_rn / __dadd_rn so nvcc cannot contract them into FMAs the C build
// does not make: the norms then equal the CPU bitwise; softmax and cross-entropy differ by
// CUDA's exp and log (a few ulps). cross_entropy sums its rows' losses in one block, each
// thread a contiguous run of rows, combined in a fixed tree (no atomics).
#include <stdint.h>
#include <type_traits>

#include "kernels/common/nn_math.h"
#include "kernels/common/nn_plan.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/common.cuh"


__device__ __forceinline__ float nn_exp(float v) { return expf(v); }
__device__ __forceinline__ double nn_exp(double v) { return exp(v); }

// The row max as ldt__row_max_*: NaN if any element is NaN, -inf for an empty row.
template <typename D>
__device__ typename ldt__el<D>::C nn_row_max(const typename ldt__el<D>::S *x, int64_t n,
                                             int64_t stride) {
    typedef ldt__el<D> E;
    typename E::C m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        typename E::C v = E::load(x[j * stride]);
        if (v > m || isnan(v)) {
            m = v;
            if (isnan(m)) break;
        }
    }
    return m;
}

// log(sum_j exp(x_j - m)), the sum in double: ldt__log_sum_exp_shifted_*.
template <typename D>
__device__ double nn_log_sum_exp(const typename ldt__el<D>::S *x, int64_t n, int64_t stride,
                                 typename ldt__el<D>::C m) {
    double s = 0.0;
    for (int64_t j = 0; j < n; j++) s += nn_exp(ldt__el<D>::load(x[j * stride]) - m);
    return log(s);
}

// One double rounded once to the dtype, as the CPU's store_one.
template <typename D> __device__ void nn_store_once(typename ldt__el<D>::S *y, int64_t i, double v) {
    if constexpr (std::is_same<D, ldt__f16_t>::value) y[i] = ldt__f64_to_f16_once(v);
    else if constexpr (std::is_same<D, ldt__bf16_t>::value) y[i] = ldt__f64_to_bf16_once(v);
    else y[i] = (typename ldt__el<D>::S)v;
}

template <typename D> __device__ double nn_param(const void *p, int64_t j, double absent) {
    return p ? (double)ldt__el<D>::load(((const typename ldt__el<D>::S *)p)[j]) : absent;
}

// ---- block-wide row reductions ------------------------------------------------------------
// A long row is read by a whole block (NN_ROW_BLOCK threads, thread t taking j = t, t + 256,
// ... in order), and the threads' parts are joined in a fixed tree: the same bits at every
// replay, and a few ulps from the CPU's left-to-right sum (docs/gpu.md).
#define NN_ROW_BLOCK 256 // a power of two
#define NN_CE_MAX_BLOCKS 1024 // cross_entropy's blocks when the env has a scratch (2 doubles each)
#define NN_CE_MIN_ROWS 8      // rows a cross_entropy block takes at least

struct nn_max_op { // NaN wins, as nn_row_max
    template <typename C> __device__ C operator()(C a, C b) const {
        return isnan(a) ? a : isnan(b) ? b : (b > a ? b : a);
    }
};
struct nn_add_op {
    __device__ double operator()(double a, double b) const { return a + b; }
};

// Every thread's v joined by op in a fixed tree; every thread gets the result. sh holds
// NN_ROW_BLOCK values; it may be reused at once (the last barrier is passed).
template <typename T, typename Op> __device__ T nn_block_join(T v, T *sh, Op op) {
    const int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int w = NN_ROW_BLOCK / 2; w > 0; w >>= 1) {
        if (t < w) sh[t] = op(sh[t], sh[t + w]);
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

// The max of a contiguous row, by the block: NaN if any is NaN, -inf when empty.
template <typename D>
__device__ typename ldt__el<D>::C nn_block_row_max(const typename ldt__el<D>::S *x, int64_t n,
                                                   typename ldt__el<D>::C *sh) {
    typedef typename ldt__el<D>::C C;
    C m = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += NN_ROW_BLOCK) m = nn_max_op()(m, ldt__el<D>::load(x[j]));
    return nn_block_join(m, sh, nn_max_op());
}

// sum_j exp(x_j - m) of a contiguous row in double, by the block.
template <typename D>
__device__ double nn_block_sum_exp(const typename ldt__el<D>::S *x, int64_t n,
                                   typename ldt__el<D>::C m, double *sh) {
    double s = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += NN_ROW_BLOCK) s += nn_exp(ldt__el<D>::load(x[j]) - m);
    return nn_block_join(s, sh, nn_add_op());
}

// ---- kernels ---------------------------------------------------------------------------
// softmax, log_softmax along dim: x is [outer, n, inner], row r = (o, i) starts at
// o * n * inner + i with its elements inner apart.
template <typename D>
__global__ void k_softmax(int64_t rows, int64_t n, int64_t inner, int log_form,
                          const typename ldt__el<D>::S *x, typename ldt__el<D>::S *y) {
    typedef ldt__el<D> E;
    typedef typename E::C C;
    LDT__CUDA_FOR(r, rows) {
        int64_t o = r / inner, base = o * n * inner + (r - o * inner);
        const typename E::S *xr = x + base;
        typename E::S *yr = y + base;
        C m = nn_row_max<D>(xr, n, inner);
        if (log_form) {
            double l = nn_log_sum_exp<D>(xr, n, inner, m);
            for (int64_t j = 0; j < n; j++)
                yr[j * inner] = E::store((C)(((double)E::load(xr[j * inner]) - (double)m) - l));
        } else {
            double s = 0.0;
            for (int64_t j = 0; j < n; j++) s += nn_exp(E::load(xr[j * inner]) - m);
            for (int64_t j = 0; j < n; j++)
                yr[j * inner] = E::store((C)((double)nn_exp(E::load(xr[j * inner]) - m) / s));
        }
    }
}

// softmax, log_softmax of contiguous rows (inner == 1) of n >= NN_ROW_BLOCK: a block per
// row (a grid-stride loop over rows), the max and the sum of exponentials by the block.
template <typename D>
__global__ void k_softmax_rows(int64_t rows, int64_t n, int log_form,
                               const typename ldt__el<D>::S *x, typename ldt__el<D>::S *y) {
    typedef ldt__el<D> E;
    typedef typename E::C C;
    __shared__ C shm[NN_ROW_BLOCK];
    __shared__ double shs[NN_ROW_BLOCK];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const typename E::S *xr = x + r * n;
        typename E::S *yr = y + r * n;
        C m = nn_block_row_max<D>(xr, n, shm);
        double s = nn_block_sum_exp<D>(xr, n, m, shs);
        if (log_form) {
            double l = log(s);
            for (int64_t j = threadIdx.x; j < n; j += NN_ROW_BLOCK)
                yr[j] = E::store((C)(((double)E::load(xr[j]) - (double)m) - l));
        } else {
            for (int64_t j = threadIdx.x; j < n; j += NN_ROW_BLOCK)
                yr[j] = E::store((C)((double)nn_exp(E::load(xr[j]) - m) / s));
        }
    }
}

// layer_norm, rms_norm over the last dims: x is [rows, m]; w and b are [m] or NULL. A row is
// taken by LDT__NORM_LANES threads, thread l a lane of nn_math.h's order (j = l, l + L, ...),
// the lanes joined in its pairwise tree: the CPU's bits, read coalesced. NN_NORM_ROWS rows a
// block, a grid-stride loop over row groups (every thread of a block meets every barrier).
#define NN_NORM_ROWS (NN_ROW_BLOCK / LDT__NORM_LANES)

// The lanes' values v joined as ldt__norm_lanes_join; sh holds this row's LDT__NORM_LANES
// doubles. Every thread of the block calls it; every lane of the row gets the result.
__device__ double nn_norm_join(double v, double *sh, int lane) {
    sh[lane] = v;
    __syncthreads();
    for (int w = LDT__NORM_LANES / 2; w > 0; w >>= 1) {
        if (lane < w) sh[lane] = __dadd_rn(sh[lane], sh[lane + w]);
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

template <typename D>
__global__ void k_norm(int64_t rows, int64_t m, int center, double eps,
                       const typename ldt__el<D>::S *x, const void *w, const void *b,
                       typename ldt__el<D>::S *y) {
    typedef ldt__el<D> E;
    __shared__ double sh[NN_ROW_BLOCK];
    const int lane = (int)(threadIdx.x % LDT__NORM_LANES), g = (int)(threadIdx.x / LDT__NORM_LANES);
    double *gs = sh + g * LDT__NORM_LANES;
    for (int64_t r0 = (int64_t)blockIdx.x * NN_NORM_ROWS; r0 < rows;
         r0 += (int64_t)gridDim.x * NN_NORM_ROWS) {
        const int64_t r = r0 + g, n = r < rows ? m : 0; // a group past the end sums nothing
        const typename E::S *xr = x + (r < rows ? r : 0) * m;
        double mu = 0.0, s = 0.0; // ldt__norm_stats_*: two passes
        if (center) {
            for (int64_t j = lane; j < n; j += LDT__NORM_LANES) s = __dadd_rn(s, (double)E::load(xr[j]));
            mu = nn_norm_join(s, gs, lane) / (double)m;
            s = 0.0;
        }
        for (int64_t j = lane; j < n; j += LDT__NORM_LANES) {
            double d = (double)E::load(xr[j]) - mu;
            s = __dadd_rn(s, __dmul_rn(d, d));
        }
        double rstd = 1.0 / sqrt(nn_norm_join(s, gs, lane) / (double)m + eps);
        for (int64_t j = lane; j < n; j += LDT__NORM_LANES) {
            double t = __dmul_rn(__dmul_rn((double)E::load(xr[j]) - mu, rstd), nn_param<D>(w, j, 1.0));
            nn_store_once<D>(y, r * m + j, __dadd_rn(t, nn_param<D>(b, j, 0.0)));
        }
    }
}

// cross_entropy: logits [rows, C], targets [rows] (i32 or i64); the mean loss over the rows
// whose target is not `ignore`, NaN when there is none. A target out of range is a data
// error (the CPU refuses the call): recorded, its row skipped.
template <typename D, typename T>
__global__ void k_cross_entropy(int64_t rows, int64_t C, int64_t ignore, int64_t run,
                                const typename ldt__el<D>::S *x, const T *tg, double *part,
                                typename ldt__el<D>::S *y, int *err) {
    typedef ldt__el<D> E;
    __shared__ typename E::C shm[NN_ROW_BLOCK];
    __shared__ double shs[NN_ROW_BLOCK];
    const int64_t r0 = (int64_t)blockIdx.x * run, r1 = r0 + run < rows ? r0 + run : rows;
    double tot = 0.0; // thread 0's: this block's rows in order
    int64_t used = 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t k = (int64_t)tg[r];
        if (k == ignore) continue;
        if (k < 0 || k >= C) {
            if (threadIdx.x == 0) ldt__cuda_derr(err, LDT__CUDA_DERR_TARGET_RANGE);
            continue;
        }
        const typename E::S *xr = x + r * C;
        typename E::C m = nn_block_row_max<D>(xr, C, shm);
        double s = nn_block_sum_exp<D>(xr, C, m, shs);
        if (threadIdx.x == 0) {
            tot += log(s) - ((double)E::load(xr[k]) - (double)m);
            used++;
        }
    }
    if (threadIdx.x != 0) return;
    if (part) {
        part[2 * blockIdx.x] = tot;
        part[2 * blockIdx.x + 1] = (double)used;
    } else {
        nn_store_once<D>(y, 0, used ? tot / (double)used : (double)NAN);
    }
}

// The blocks' parts joined in a fixed tree (one block): the mean over the rows used.
template <typename D>
__global__ void k_cross_entropy_join(int nb, const double *part, typename ldt__el<D>::S *y) {
    __shared__ double sh[NN_ROW_BLOCK];
    double tot = 0.0, used = 0.0;
    for (int b = threadIdx.x; b < nb; b += NN_ROW_BLOCK) {
        tot += part[2 * b];
        used += part[2 * b + 1];
    }
    tot = nn_block_join(tot, sh, nn_add_op());
    used = nn_block_join(used, sh, nn_add_op());
    if (threadIdx.x == 0) nn_store_once<D>(y, 0, used > 0.0 ? tot / used : (double)NAN);
}

// dropout: element with global index g is +0 where the stream's bernoulli(p) at g is 1, else
// x * (1/(1-p)) with the factor in the compute type ((float) for f32 and the halves, whose
// product is rounded once), as kernels/cpu/nn.c.
template <typename D>
__global__ void k_dropout(ldt__cuda_region r, int64_t n, const typename ldt__el<D>::S *x,
                          typename ldt__el<D>::S *y, uint64_t seed, uint64_t offset, int64_t base,
                          double p, const uint64_t *delta) {
    typedef ldt__el<D> E;
    if (delta) offset += *delta; // this step's place on the stream
    typedef typename E::C C;
    const C s = (C)ldt__dropout_scale(p);
    LDT__CUDA_FOR(i, n) {
        int64_t g = base + ldt__cuda_region_global(r, i);
        y[i] = ldt__rand_bernoulli(seed, offset, g, p) ? E::store((C)0) : E::store(E::load(x[i]) * s);
    }
}

// ---- launchers -------------------------------------------------------------------------
// Only the float dtypes reach these (ldt__nn_check refuses the others).
#define NN_FLOAT_ONLY(D) if constexpr (std::is_floating_point<typename ldt__el<D>::C>::value)

struct launch_softmax {
    template <typename D>
    static void run(int64_t rows, int64_t n, int64_t inner, int log_form, const void *x, void *y,
                    cudaStream_t s) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            if (inner == 1 && n >= NN_ROW_BLOCK) // long contiguous rows: a block per row
                LDT__CUDA_LAUNCH(k_softmax_rows<D>, (int)(rows < 65535 ? rows : 65535), NN_ROW_BLOCK, 0, s)(
                    rows, n, log_form, (const S *)x, (S *)y);
            else
                LDT__CUDA_LAUNCH(k_softmax<D>, ldt__cuda_blocks(rows), LDT__CUDA_THREADS, 0, s)(
                    rows, n, inner, log_form, (const S *)x, (S *)y);
        }
    }
};

struct launch_norm {
    template <typename D>
    static void run(int64_t rows, int64_t m, int center, double eps, const void *x, const void *w,
                    const void *b, void *y, cudaStream_t s) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            if (rows <= 0) return;
            int64_t nb = (rows + NN_NORM_ROWS - 1) / NN_NORM_ROWS;
            LDT__CUDA_LAUNCH(k_norm<D>, (int)(nb < 65535 ? nb : 65535), NN_ROW_BLOCK, 0, s)(
                rows, m, center, eps, (const S *)x, w, b, (S *)y);
        }
    }
};

struct launch_cross_entropy {
    template <typename D>
    static void run(int64_t rows, int64_t C, int64_t ignore, const void *x, const void *tg,
                    int tg64, void *y, int *err, void *scratch, size_t scratch_bytes, cudaStream_t s) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            // blocks of `run` (>= NN_CE_MIN_ROWS) consecutive rows; with a scratch for their
            // parts, up to NN_CE_MAX_BLOCKS of them and a join, else one block for all
            int64_t nb = (rows + NN_CE_MIN_ROWS - 1) / NN_CE_MIN_ROWS;
            if (nb > NN_CE_MAX_BLOCKS) nb = NN_CE_MAX_BLOCKS;
            if (nb < 1 || !scratch || scratch_bytes < (size_t)nb * 2 * sizeof(double)) nb = 1;
            int64_t run = rows > 0 ? (rows + nb - 1) / nb : 0;
            if (run > 0) nb = (rows + run - 1) / run;
            double *part = nb > 1 ? (double *)scratch : NULL;
            auto *k64 = k_cross_entropy<D, int64_t>; // a name without a comma, for the macro
            auto *k32 = k_cross_entropy<D, int32_t>;
            if (tg64)
                LDT__CUDA_LAUNCH(k64, (int)nb, NN_ROW_BLOCK, 0, s)(
                    rows, C, ignore, run, (const S *)x, (const int64_t *)tg, part, (S *)y, err);
            else
                LDT__CUDA_LAUNCH(k32, (int)nb, NN_ROW_BLOCK, 0, s)(
                    rows, C, ignore, run, (const S *)x, (const int32_t *)tg, part, (S *)y, err);
            if (part)
                LDT__CUDA_LAUNCH(k_cross_entropy_join<D>, 1, NN_ROW_BLOCK, 0, s)((int)nb, part, (S *)y);
        }
    }
};

struct launch_dropout {
    template <typename D>
    static void run(const ldt__cuda_region &r, int64_t n, const void *x, void *y, uint64_t seed,
                    uint64_t offset, int64_t base, double p, const ldt__cuda_env *env) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            LDT__CUDA_LAUNCH(k_dropout<D>, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
                r, n, (const S *)x, (S *)y, seed, offset, base, p, env ? env->rng_delta : NULL);
        }
    }
};

static ldt_status nn_dropout(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__cuda_region reg;
    int64_t n;
    double p = c->attrs->f[0];
    if (!(p >= 0.0 && p <= 1.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: p = %g; expected 0 <= p <= 1", p);
    LDT_CHECK(ldt__cuda_region_make(name, c, &reg));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    LDT__CUDA_DISPATCH(c->in[0].dtype, launch_dropout, reg, n, c->in[0].data, c->out.data,
                       (uint64_t)c->attrs->i[0], (uint64_t)c->attrs->i[1], c->attrs->i[3], p, env);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}

extern "C" ldt_status ldt__cuda_k_nn(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__nn_plan p;
    LDT_CHECK(ldt__nn_check(c, &p));
    const ldt__operand *x = &c->in[0];
    const ldt_shape *xs = &x->shape;
    cudaStream_t s = LDT__CUDA_STREAM(env);
    int64_t total;
    LDT_CHECK(ldt_shape_numel(xs, &total));
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: {
        int64_t outer = 1, n = xs->ndim ? xs->dims[p.dim] : 1, inner = 1;
        for (int d = 0; d < p.dim; d++) outer *= xs->dims[d];
        for (int d = p.dim + 1; d < xs->ndim; d++) inner *= xs->dims[d];
        if (total == 0) return LDT_OK;
        LDT__CUDA_DISPATCH(x->dtype, launch_softmax, outer * inner, n, inner,
                           c->op == LDT_OP_LOG_SOFTMAX, x->data, c->out.data, s);
        break;
    }
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM: {
        int64_t m = 1;
        for (int d = xs->ndim - p.k; d < xs->ndim; d++) m *= xs->dims[d];
        if (total == 0) return LDT_OK;
        LDT__CUDA_DISPATCH(x->dtype, launch_norm, total / m, m, c->op == LDT_OP_LAYER_NORM,
                           c->attrs->f[0], x->data, p.w ? p.w->data : NULL,
                           p.b ? p.b->data : NULL, c->out.data, s);
        break;
    }
    case LDT_OP_CROSS_ENTROPY: {
        int64_t rows;
        LDT_CHECK(ldt_shape_numel(&c->in[1].shape, &rows));
        LDT__CUDA_DISPATCH(x->dtype, launch_cross_entropy, rows, xs->dims[xs->ndim - 1],
                           c->attrs->i[0], x->data, c->in[1].data, c->in[1].dtype == LDT_I64,
                           c->out.data, env ? env->err : NULL, env ? env->scratch : NULL,
                           env ? env->scratch_bytes : 0, s);
        break;
    }
    default: return nn_dropout(c, env); // LDT_OP_DROPOUT
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
