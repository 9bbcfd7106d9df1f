// CUDA kernels of the view ops (kernels/cpu/view.c): reshape, alias and redistribute's copy
// are one device-to-device copy, cat one 2-D copy per input, and permute, slice, select and
// expand a strided gather. Elements move as bytes: bitwise equal to the CPU for every dtype.
#include <stdint.h>

#include "kernels/common/view_plan.h"
#include "kernels/cuda/common.cuh"

// The gather's dims with size-1 dims dropped and dims contiguous in the source merged (as
// the CPU's gather does), so a slice of whole rows walks few dims.
struct vw_dev {
    int nd;
    int64_t dims[LDT_MAX_DIMS], st[LDT_MAX_DIMS];
};

// ---- kernels ---------------------------------------------------------------------------
// out[i] = src[sum(i_d * st[d])], i row-major over dims; T is an unsigned type of the
// element's size.
template <typename T> __global__ void k_gather(vw_dev g, int64_t n, const T *src, T *out) {
    LDT__CUDA_FOR(i, n) {
        int64_t off = 0, r = i;
        for (int d = g.nd - 1; d >= 0; d--) {
            int64_t q = r / g.dims[d];
            off += (r - q * g.dims[d]) * g.st[d];
            r = q;
        }
        out[i] = src[off];
    }
}

// Runs of bytes, {source, destination, length} triples (multiples of sizeof(T)): a block per
// run (grid-stride over runs), its threads over the run's elements.
template <typename T>
__global__ void k_copy_runs(const char *src, char *dst, const int64_t *runs, int64_t nruns) {
    for (int64_t r = blockIdx.x; r < nruns; r += gridDim.x) {
        const T *s = (const T *)(src + runs[3 * r]);
        T *d = (T *)(dst + runs[3 * r + 1]);
        int64_t n = runs[3 * r + 2] / (int64_t)sizeof(T);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
    }
}

// ---- launchers -------------------------------------------------------------------------
extern "C" ldt_status ldt__cuda_copy_runs(const void *src, void *dst, const int64_t *runs,
                                          int64_t nruns, int es, const ldt__cuda_env *env) {
    const char *name = "copy_runs";
    cudaStream_t s = LDT__CUDA_STREAM(env);
    unsigned b = nruns < 65535 ? (unsigned)nruns : 65535u;
    if (nruns <= 0) return LDT_OK;
    switch (es) {
    case 1: { auto *k = k_copy_runs<uint8_t>; LDT__CUDA_LAUNCH(k, b, LDT__CUDA_THREADS, 0, s)((const char *)src, (char *)dst, runs, nruns); break; }
    case 2: { auto *k = k_copy_runs<uint16_t>; LDT__CUDA_LAUNCH(k, b, LDT__CUDA_THREADS, 0, s)((const char *)src, (char *)dst, runs, nruns); break; }
    case 4: { auto *k = k_copy_runs<uint32_t>; LDT__CUDA_LAUNCH(k, b, LDT__CUDA_THREADS, 0, s)((const char *)src, (char *)dst, runs, nruns); break; }
    case 8: { auto *k = k_copy_runs<uint64_t>; LDT__CUDA_LAUNCH(k, b, LDT__CUDA_THREADS, 0, s)((const char *)src, (char *)dst, runs, nruns); break; }
    default: LDT_FAIL(LDT_ERR_INTERNAL, "%s: no CUDA copy for %d-byte elements", name, es);
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}

extern "C" ldt_status ldt__cuda_k_view(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__view_plan p;
    LDT_CHECK(ldt__view_plan_make(c, &p));
    cudaStream_t s = LDT__CUDA_STREAM(env);
    char *dst = (char *)c->out.data;
    const char *src = (const char *)c->in[0].data;
    if (p.n == 0) return LDT_OK;
    if (p.kind == LDT__VIEW_COPY) {
        if (dst != src)
            LDT__CUDA_CALL(name, cudaMemcpyAsync(dst, src, (size_t)p.n * p.es,
                                                 cudaMemcpyDeviceToDevice, s));
        return LDT_OK;
    }
    if (p.kind == LDT__VIEW_CAT) {
        // input k is [outer, d_k * inner]: a 2-D copy into columns [at, at + run) of the
        // output's [outer, sum d_k * inner] rows (a capturable memcpy node)
        int64_t outer, inner, at = 0;
        ldt__view_cat_geom(&c->out.shape, p.dim, &outer, &inner);
        size_t orow = (size_t)(c->out.shape.dims[p.dim] * inner) * p.es;
        for (int k = 0; k < c->nin; k++) {
            size_t run = (size_t)(c->in[k].shape.dims[p.dim] * inner) * p.es;
            if (run > 0 && outer == 1) // one row: a plain copy (a 2-D one's pitch has a limit)
                LDT__CUDA_CALL(name, cudaMemcpyAsync(dst + at, c->in[k].data, run,
                                                     cudaMemcpyDeviceToDevice, s));
            else if (run > 0)
                LDT__CUDA_CALL(name, cudaMemcpy2DAsync(dst + at, orow, c->in[k].data, run, run,
                                                       (size_t)outer, cudaMemcpyDeviceToDevice, s));
            at += (int64_t)run;
        }
        return LDT_OK;
    }
    vw_dev g;
    memset(&g, 0, sizeof g);
    for (int d = 0; d < p.nd; d++) {
        if (p.dims[d] == 1) continue;
        if (g.nd > 0 && g.st[g.nd - 1] == p.st[d] * p.dims[d]) {
            g.dims[g.nd - 1] *= p.dims[d];
            g.st[g.nd - 1] = p.st[d];
        } else {
            g.dims[g.nd] = p.dims[d];
            g.st[g.nd++] = p.st[d];
        }
    }
    const char *from = src + p.base * (int64_t)p.es;
    unsigned b = ldt__cuda_blocks(p.n);
    switch (p.es) {
    case 1: LDT__CUDA_LAUNCH(k_gather, b, LDT__CUDA_THREADS, 0, s)(g, p.n, (const uint8_t *)from, (uint8_t *)dst); break;
    case 2: LDT__CUDA_LAUNCH(k_gather, b, LDT__CUDA_THREADS, 0, s)(g, p.n, (const uint16_t *)from, (uint16_t *)dst); break;
    case 4: LDT__CUDA_LAUNCH(k_gather, b, LDT__CUDA_THREADS, 0, s)(g, p.n, (const uint32_t *)from, (uint32_t *)dst); break;
    case 8: LDT__CUDA_LAUNCH(k_gather, b, LDT__CUDA_THREADS, 0, s)(g, p.n, (const uint64_t *)from, (uint64_t *)dst); break;
    default: LDT_FAIL(LDT_ERR_INTERNAL, "%s: no CUDA gather for %zu-byte elements", name, p.es);
    }
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
