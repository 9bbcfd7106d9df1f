// CUDA kernels of the nn family (kernels/cpu/nn.c): softmax, log_softmax, layer_norm,
// rms_norm, cross_entropy, dropout.
//
// The formulas are kernels/common/nn_math.h's, element by element in the CPU's order: one
// thread per row (softmax, norms), reading the row where it lies (no row buffer: launchers
// never allocate). Row max in the row's compute type, sums and norm statistics in double,
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

#define NN_CE_BLOCK 256 // threads of the cross-entropy kernel (a power of two)

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

// layer_norm, rms_norm over the last dims: x is [rows, m]; w and b are [m] or NULL.
template <typename D>
__global__ void k_norm(int64_t rows, int64_t m, int center, double eps,
                       const typename ldt__el<D>::S *x, const void *w, const void *b,
                       typename ldt__el<D>::S *y) {
    typedef ldt__el<D> E;
    LDT__CUDA_FOR(r, rows) {
        const typename E::S *xr = x + r * m;
        double mu = 0.0, v = 0.0; // ldt__norm_stats_*: two passes
        if (center) {
            for (int64_t j = 0; j < m; j++) mu += (double)E::load(xr[j]);
            mu /= (double)m;
        }
        for (int64_t j = 0; j < m; j++) {
            double d = (double)E::load(xr[j]) - mu;
            v = __dadd_rn(v, __dmul_rn(d, d));
        }
        double rstd = 1.0 / sqrt(v / (double)m + eps);
        for (int64_t j = 0; j < m; j++) {
            double t = __dmul_rn(__dmul_rn((double)E::load(xr[j]) - mu, rstd), nn_param<D>(w, j, 1.0));
            nn_store_once<D>(y, r * m + j, __dadd_rn(t, nn_param<D>(b, j, 0.0)));
        }
    }
}

// cross_entropy: logits [rows, C], targets [rows] (i32 or i64); the mean loss over the rows
// whose target is not `ignore`, NaN when there is none. A target out of range is a data
// error (the CPU refuses the call): recorded, its row skipped.
template <typename D, typename T>
__global__ void k_cross_entropy(int64_t rows, int64_t C, int64_t ignore,
                                const typename ldt__el<D>::S *x, const T *tg,
                                typename ldt__el<D>::S *y, int *err) {
    typedef ldt__el<D> E;
    __shared__ double tot[NN_CE_BLOCK];
    __shared__ int64_t used[NN_CE_BLOCK];
    const int t = threadIdx.x;
    const int64_t run = (rows + NN_CE_BLOCK - 1) / NN_CE_BLOCK;
    double s = 0.0;
    int64_t u = 0;
    for (int64_t r = t * run; r < rows && r < (t + 1) * run; r++) {
        int64_t k = (int64_t)tg[r];
        if (k == ignore) continue;
        if (k < 0 || k >= C) {
            ldt__cuda_derr(err, LDT__CUDA_DERR_TARGET_RANGE);
            continue;
        }
        const typename E::S *xr = x + r * C;
        typename E::C m = nn_row_max<D>(xr, C, 1);
        s += nn_log_sum_exp<D>(xr, C, 1, m) - ((double)E::load(xr[k]) - (double)m);
        u++;
    }
    tot[t] = s;
    used[t] = u;
    __syncthreads();
    for (int w = 1; w < NN_CE_BLOCK; w *= 2) { // a fixed tree: the same sum every replay
        if (t % (2 * w) == 0) {
            tot[t] += tot[t + w];
            used[t] += used[t + w];
        }
        __syncthreads();
    }
    if (t == 0) nn_store_once<D>(y, 0, used[0] ? tot[0] / (double)used[0] : (double)NAN);
}

// dropout: element with global index g is +0 where the stream's bernoulli(p) at g is 1, else
// x * (1/(1-p)) with the factor in the compute type ((float) for f32 and the halves, whose
// product is rounded once), as kernels/cpu/nn.c.
template <typename D>
__global__ void k_dropout(ldt__cuda_region r, int64_t n, const typename ldt__el<D>::S *x,
                          typename ldt__el<D>::S *y, uint64_t seed, uint64_t offset, double p,
                          const uint64_t *delta) {
    typedef ldt__el<D> E;
    if (delta) offset += *delta; // this step's place on the stream
    typedef typename E::C C;
    const C s = (C)ldt__dropout_scale(p);
    LDT__CUDA_FOR(i, n) {
        int64_t g = ldt__cuda_region_global(r, i);
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
            LDT__CUDA_LAUNCH(k_norm<D>, ldt__cuda_blocks(rows), LDT__CUDA_THREADS, 0, s)(
                rows, m, center, eps, (const S *)x, w, b, (S *)y);
        }
    }
};

struct launch_cross_entropy {
    template <typename D>
    static void run(int64_t rows, int64_t C, int64_t ignore, const void *x, const void *tg,
                    int tg64, void *y, int *err, cudaStream_t s) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            auto *k64 = k_cross_entropy<D, int64_t>; // a name without a comma, for the macro
            auto *k32 = k_cross_entropy<D, int32_t>;
            if (tg64)
                LDT__CUDA_LAUNCH(k64, 1, NN_CE_BLOCK, 0, s)(
                    rows, C, ignore, (const S *)x, (const int64_t *)tg, (S *)y, err);
            else
                LDT__CUDA_LAUNCH(k32, 1, NN_CE_BLOCK, 0, s)(
                    rows, C, ignore, (const S *)x, (const int32_t *)tg, (S *)y, err);
        }
    }
};

struct launch_dropout {
    template <typename D>
    static void run(const ldt__cuda_region &r, int64_t n, const void *x, void *y, uint64_t seed,
                    uint64_t offset, double p, const ldt__cuda_env *env) {
        NN_FLOAT_ONLY(D) {
            typedef typename ldt__el<D>::S S;
            LDT__CUDA_LAUNCH(k_dropout<D>, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
                r, n, (const S *)x, (S *)y, seed, offset, p, env ? env->rng_delta : NULL);
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
                       (uint64_t)c->attrs->i[0], (uint64_t)c->attrs->i[1], p, env);
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
                           c->out.data, env ? env->err : NULL, s);
        break;
    }
    default: return nn_dropout(c, env); // LDT_OP_DROPOUT
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
