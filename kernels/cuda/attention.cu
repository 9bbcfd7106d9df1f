// CUDA kernel of scaled_dot_product_attention (kernels/cpu/attention.c): softmax(q k^T * scale,
// causal mask) v, with dropout on the weights by the shared Philox stream.
//
// One thread block per (batch, query row). Up to AT_SMAX keys the row's scores live in shared
// memory (k_sdpa_cached); past it there is no score buffer (launchers never allocate) and the
// scores are recomputed in each of three passes over the visible keys, a chunk of AT_THREADS
// keys at a time (k_sdpa). The CPU's math in its order where it has one: scores
// as a dot product in the compute type (f32 for f32 and the halves, f64 for f64) times
// scale; the row max (NaN if any is NaN); exp in the compute type and the sum in double,
// key by key in order (one thread adds a chunk's terms); each weight (double)e / sum rounded
// once; dropout by the weights' global index ((b * Lq + i) * Lk + j), kept weights times
// 1/(1-p); each output element sum_j w_j v_jk in key order, rounded once to the dtype. What
// differs from the CPU: its scores and its weighted sum are BLAS GEMMs (another summation
// order, possibly FMAs), and exp is CUDA's: a few ulps.
#include <stdint.h>
#include <type_traits>

#include "kernels/common/attention_plan.h"
#include "kernels/common/nn_math.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/common.cuh"

#define AT_THREADS 128 // threads per query row: keys per chunk, output columns per group

__device__ __forceinline__ float at_exp(float v) { return expf(v); }
__device__ __forceinline__ double at_exp(double v) { return exp(v); }

// The pieces both kernels share. A row with no visible keys is softmax over nothing: 0.
template <typename El>
__device__ __forceinline__ void at_zero_row(typename El::S *o, int64_t Ev, int tid) {
    for (int64_t e = tid; e < Ev; e += AT_THREADS) o[e] = El::store((typename El::C)0);
}

// The block's row max from each thread's partial max w[0..AT_THREADS), in thread order, NaN
// if any is NaN (one thread calls it).
template <typename T> __device__ __forceinline__ T at_join_max(const T *w) {
    T M = -INFINITY;
    for (int t = 0; t < AT_THREADS; t++)
        if (w[t] > M || isnan(w[t])) {
            M = w[t];
            if (isnan(M)) break;
        }
    return M;
}

// Dropout on weight j of row (b, i): 0 when dropped, else the weight times 1/(1-p).
template <typename T>
__device__ __forceinline__ T at_dropout(T wj, int64_t b, int64_t i, int64_t j, int64_t Lq,
                                        int64_t Lk, double p, T kp, uint64_t seed,
                                        uint64_t offset, const ldt__at_batches &bt, int sharded) {
    int64_t g = bt.base + ((sharded ? ldt__at_global_batch(&bt, b) : b) * Lq + i) * Lk;
    return ldt__rand_bernoulli(seed, offset, g + j, p) ? (T)0 : wj * kp;
}

// ---- kernels ---------------------------------------------------------------------------
// q [B, Lq, E], k [B, Lk, E], v [B, Lk, Ev] -> out [B, Lq, Ev]; block-stride over the B * Lq
// rows. bt (when sharded) gives each local batch its global index for the dropout mask.
template <typename D>
__global__ void k_sdpa(int64_t B, int64_t Lq, int64_t Lk, int64_t E, int64_t Ev, int causal,
                       double scale, double p, double keep, uint64_t seed, uint64_t offset,
                       const uint64_t *delta, ldt__at_batches bt, int sharded,
                       const typename ldt__el<D>::S *q, const typename ldt__el<D>::S *k,
                       const typename ldt__el<D>::S *v, typename ldt__el<D>::S *out) {
    typedef ldt__el<D> El;
    typedef typename El::C T;
    __shared__ T w[AT_THREADS];
    __shared__ T mx;
    __shared__ double sum;
    const int tid = threadIdx.x;
    const T sc = (T)scale, kp = (T)keep;
    if (delta) offset += *delta; // this step's place on the stream
    for (int64_t row = blockIdx.x; row < B * Lq; row += gridDim.x) {
        const int64_t b = row / Lq, i = row - b * Lq, n = ldt__at_keys(causal, Lk, i);
        const typename El::S *qi = q + row * E, *kb = k + b * Lk * E, *vb = v + b * Lk * Ev;
        typename El::S *o = out + row * Ev;
        if (n == 0) { // no keys: softmax over nothing, the output is 0
            at_zero_row<El>(o, Ev, tid);
            continue;
        }
        // pass 1: the row max, NaN if any score is NaN
        T m = -INFINITY;
        for (int64_t j = tid; j < n; j += AT_THREADS) {
            T acc = 0;
            for (int64_t e = 0; e < E; e++) acc += El::load(qi[e]) * El::load(kb[j * E + e]);
            T s = acc * sc;
            if (s > m || isnan(s)) m = isnan(m) ? m : s;
        }
        w[tid] = m;
        __syncthreads();
        if (tid == 0) {
            mx = at_join_max(w);
            sum = 0.0;
        }
        __syncthreads();
        const T M = mx;
        // pass 2: sum_j exp(s_j - M) in double, in key order
        for (int64_t j0 = 0; j0 < n; j0 += AT_THREADS) {
            int64_t j = j0 + tid;
            if (j < n) {
                T acc = 0;
                for (int64_t e = 0; e < E; e++) acc += El::load(qi[e]) * El::load(kb[j * E + e]);
                w[tid] = at_exp(acc * sc - M);
            }
            __syncthreads();
            if (tid == 0) {
                double s = sum;
                for (int64_t t = 0; t < AT_THREADS && j0 + t < n; t++) s += (double)w[t];
                sum = s;
            }
            __syncthreads();
        }
        const double S = sum;
        // pass 3: out[c] = sum_j w_j v[j, c], AT_THREADS columns at a time
        for (int64_t c0 = 0; c0 < Ev; c0 += AT_THREADS) {
            T acc = 0;
            for (int64_t j0 = 0; j0 < n; j0 += AT_THREADS) {
                int64_t j = j0 + tid;
                if (j < n) {
                    T a = 0;
                    for (int64_t e = 0; e < E; e++) a += El::load(qi[e]) * El::load(kb[j * E + e]);
                    T wj = (T)((double)at_exp(a * sc - M) / S);
                    if (p > 0.0)
                        wj = at_dropout(wj, b, i, j, Lq, Lk, p, kp, seed, offset, bt, sharded);
                    w[tid] = wj;
                }
                __syncthreads();
                if (c0 + tid < Ev)
                    for (int64_t t = 0; t < AT_THREADS && j0 + t < n; t++)
                        acc += w[t] * El::load(vb[(j0 + t) * Ev + c0 + tid]);
                __syncthreads();
            }
            if (c0 + tid < Ev) o[c0 + tid] = El::store(acc);
        }
    }
}

// The same attention with the row's scores kept in shared memory (Lk <= AT_SMAX keys, E <=
// AT_EMAX): each score computed once, from q's row in shared memory; then the exponentials
// in place, their sum in double by one thread in key order, the weights in place, and each
// output column by one thread in key order. The same values as k_sdpa's passes, but each
// score's s - M is one rounding (k_sdpa's recomputation may contract it into an FMA).
#define AT_SMAX 2048
#define AT_EMAX 256
template <typename D>
__global__ void k_sdpa_cached(int64_t B, int64_t Lq, int64_t Lk, int64_t E, int64_t Ev, int causal,
                              double scale, double p, double keep, uint64_t seed, uint64_t offset,
                              const uint64_t *delta, ldt__at_batches bt, int sharded,
                              const typename ldt__el<D>::S *q, const typename ldt__el<D>::S *k,
                              const typename ldt__el<D>::S *v, typename ldt__el<D>::S *out) {
    typedef ldt__el<D> El;
    typedef typename El::C T;
    __shared__ T qs[AT_EMAX];
    __shared__ T sj[AT_SMAX];
    __shared__ T w[AT_THREADS];
    __shared__ T mx;
    __shared__ double sum;
    const int tid = threadIdx.x;
    const T sc = (T)scale, kp = (T)keep;
    if (delta) offset += *delta; // this step's place on the stream
    for (int64_t row = blockIdx.x; row < B * Lq; row += gridDim.x) {
        const int64_t b = row / Lq, i = row - b * Lq, n = ldt__at_keys(causal, Lk, i);
        const typename El::S *qi = q + row * E, *kb = k + b * Lk * E, *vb = v + b * Lk * Ev;
        typename El::S *o = out + row * Ev;
        if (n == 0) {
            at_zero_row<El>(o, Ev, tid);
            continue;
        }
        for (int64_t e = tid; e < E; e += AT_THREADS) qs[e] = El::load(qi[e]);
        __syncthreads();
        T m = -INFINITY;
        for (int64_t j = tid; j < n; j += AT_THREADS) {
            T acc = 0;
            for (int64_t e = 0; e < E; e++) acc += qs[e] * El::load(kb[j * E + e]);
            T s = acc * sc;
            sj[j] = s;
            if (s > m || isnan(s)) m = isnan(m) ? m : s;
        }
        w[tid] = m;
        __syncthreads();
        if (tid == 0) mx = at_join_max(w);
        __syncthreads();
        const T M = mx;
        for (int64_t j = tid; j < n; j += AT_THREADS) sj[j] = at_exp(sj[j] - M);
        __syncthreads();
        if (tid == 0) {
            double s = 0.0;
            for (int64_t j = 0; j < n; j++) s += (double)sj[j];
            sum = s;
        }
        __syncthreads();
        const double S = sum;
        for (int64_t j = tid; j < n; j += AT_THREADS) {
            T wj = (T)((double)sj[j] / S);
            if (p > 0.0) wj = at_dropout(wj, b, i, j, Lq, Lk, p, kp, seed, offset, bt, sharded);
            sj[j] = wj;
        }
        __syncthreads();
        for (int64_t c = tid; c < Ev; c += AT_THREADS) {
            T acc = 0;
            for (int64_t j = 0; j < n; j++) acc += sj[j] * El::load(vb[j * Ev + c]);
            o[c] = El::store(acc);
        }
        __syncthreads(); // qs and sj are the next row's
    }
}

// ---- launchers -------------------------------------------------------------------------
struct launch_sdpa {
    template <typename D>
    static void run(const ldt__at_plan &p, const ldt__at_batches &bt, int sharded,
                    const ldt__kcall *c, const ldt__cuda_env *env) {
        if constexpr (std::is_floating_point<typename ldt__el<D>::C>::value) {
            typedef typename ldt__el<D>::S S;
            int64_t rows = p.B * p.Lq;
            unsigned grid = (unsigned)(rows < 65536 ? rows : 65536);
            if (p.Lk <= AT_SMAX && p.E <= AT_EMAX)
                LDT__CUDA_LAUNCH(k_sdpa_cached<D>, grid, AT_THREADS, 0, LDT__CUDA_STREAM(env))(
                    p.B, p.Lq, p.Lk, p.E, p.Ev, p.causal, p.scale, p.p, p.keep, p.seed, p.offset,
                    env ? env->rng_delta : NULL, bt, sharded, (const S *)c->in[0].data,
                    (const S *)c->in[1].data, (const S *)c->in[2].data, (S *)c->out.data);
            else
                LDT__CUDA_LAUNCH(k_sdpa<D>, grid, AT_THREADS, 0, LDT__CUDA_STREAM(env))(
                    p.B, p.Lq, p.Lk, p.E, p.Ev, p.causal, p.scale, p.p, p.keep, p.seed, p.offset,
                    env ? env->rng_delta : NULL, bt, sharded, (const S *)c->in[0].data,
                    (const S *)c->in[1].data, (const S *)c->in[2].data, (S *)c->out.data);
        }
    }
};

extern "C" ldt_status ldt__cuda_k_attention(const ldt__kcall *c, const ldt__cuda_env *env) {
    ldt__at_plan p;
    ldt__at_batches bt;
    LDT_CHECK(ldt__at_check(c, &p));
    memset(&bt, 0, sizeof bt);
    if (p.sharded_dropout)
        ldt__at_batches_make(c->region, c->global_shape, c->in[0].shape.ndim - 2, &bt);
    bt.base = p.base;
    if (p.B * p.Lq * p.Ev == 0) return LDT_OK;
    LDT__CUDA_DISPATCH(c->in[0].dtype, launch_sdpa, p, bt, p.sharded_dropout, c, env);
    LDT__CUDA_LAUNCHED(LDT__AT_NAME);
    return LDT_OK;
}
