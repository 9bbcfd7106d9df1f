// CUDA kernels of argmax, argmin, topk_values, topk_indices along one dim (kernels/cpu/reduce.c).
//
// The input is [O, R, I] with R the dim. Values compare through the CPU's order keys
// (kernels/common/argreduce_plan.h: NaN the largest, -0 tied with +0), so every answer is the
// CPU's, bitwise: argmax and argmin take the first index of the best key; topk sorts by
// (key, index), equal values in index order. One thread per line (o, i), correct first:
// argmax scans the line once; topk takes each next (key, index) above the last one taken, k
// scans of the line (no line buffer: launchers never allocate).
#include <stdint.h>

#include "kernels/common/argreduce_plan.h"
#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
// argmax, argmin: out[o * I + i] = the first r with the largest (argmin: smallest) key.
__global__ void k_argmax(int64_t O, int64_t R, int64_t I, ldt_dtype t, int is_min,
                         const void *x, int64_t *out) {
    const int isf = t == LDT_F32 || t == LDT_F64 || t == LDT_F16 || t == LDT_BF16;
    LDT__CUDA_FOR(l, O * I) {
        int64_t o = l / I, i = l - o * I, base = o * R * I + i, bi = 0;
        uint64_t best = 0;
        for (int64_t r = 0; r < R; r++) {
            uint64_t k = ldt__ar_key(t, x, base + r * I);
            if (is_min) k = ldt__ar_key_for_min(k, isf);
            if (r == 0 || k > best) {
                best = k;
                bi = r;
            }
        }
        out[l] = bi;
    }
}

// topk: the line's first k by (key, index) ascending, the key inverted for the largest; the
// output line is [O, k, I], element (o, j, i). vals: copy the element (word W); else its index.
template <typename W>
__global__ void k_topk(int64_t O, int64_t R, int64_t I, int64_t k, int largest, ldt_dtype t,
                       int vals, const void *x, void *out) {
    LDT__CUDA_FOR(l, O * I) {
        int64_t o = l / I, i = l - o * I, base = o * R * I + i;
        uint64_t pk = 0;
        int64_t pi = -1; // the last (key, index) taken; none yet
        for (int64_t j = 0; j < k; j++) {
            uint64_t bk = 0;
            int64_t bi = -1;
            for (int64_t r = 0; r < R; r++) {
                uint64_t key = ldt__ar_key(t, x, base + r * I);
                if (largest) key = ~key;
                int after = pi < 0 || key > pk || (key == pk && r > pi);
                if (after && (bi < 0 || key < bk)) { // ties: the first r, the lower index
                    bk = key;
                    bi = r;
                }
            }
            int64_t oi = (o * k + j) * I + i;
            if (vals)
                ((W *)out)[oi] = ((const W *)x)[base + bi * I];
            else
                ((int64_t *)out)[oi] = bi;
            pk = bk;
            pi = bi;
        }
    }
}

// ---- launchers -------------------------------------------------------------------------
struct launch_topk {
    template <typename W>
    static void run(const ldt__ar_geom &g, ldt_dtype t, int vals, const void *x, void *out,
                    cudaStream_t s) {
        LDT__CUDA_LAUNCH(k_topk<W>, ldt__cuda_blocks(g.O * g.I), LDT__CUDA_THREADS, 0, s)(
            g.O, g.R, g.I, g.k, g.largest, t, vals, x, out);
    }
};

extern "C" ldt_status ldt__cuda_k_argreduce(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__ar_geom g;
    LDT_CHECK(ldt__ar_check(c, &g));
    cudaStream_t s = LDT__CUDA_STREAM(env);
    ldt_dtype t = c->in[0].dtype;
    if (g.O * g.I == 0) return LDT_OK;
    if (c->op == LDT_OP_ARGMAX || c->op == LDT_OP_ARGMIN) {
        LDT__CUDA_LAUNCH(k_argmax, ldt__cuda_blocks(g.O * g.I), LDT__CUDA_THREADS, 0, s)(
            g.O, g.R, g.I, t, c->op == LDT_OP_ARGMIN, c->in[0].data, (int64_t *)c->out.data);
    } else {
        if (g.k == 0) return LDT_OK;
        switch (ldt_dtype_size(t)) {
        case 1: launch_topk::run<uint8_t>(g, t, c->op == LDT_OP_TOPK_VALUES, c->in[0].data, c->out.data, s); break;
        case 2: launch_topk::run<uint16_t>(g, t, c->op == LDT_OP_TOPK_VALUES, c->in[0].data, c->out.data, s); break;
        case 4: launch_topk::run<uint32_t>(g, t, c->op == LDT_OP_TOPK_VALUES, c->in[0].data, c->out.data, s); break;
        default: launch_topk::run<uint64_t>(g, t, c->op == LDT_OP_TOPK_VALUES, c->in[0].data, c->out.data, s); break;
        }
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
