// CUDA kernels for rand, randn, bernoulli, trunc_normal and randint: element i of the output
// takes its value from (seed, offset, global index of i) by kernels/common/philox.h, the
// stream the CPU kernels (kernels/cpu/random.c) draw from, so the values are theirs:
// uniform, bernoulli and randint bitwise; randn and trunc_normal up to the last bits of the
// device's logf/sinf/cosf/erfc (docs/random-stream.md).
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/cast.h"
#include "kernels/common/philox.h"
#include "kernels/common/random_plan.h"
#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
// A float value (rand, randn) or a 0/1 (bernoulli) into dtype t, as the CPU kernel widens
// or rounds its f32 chunks.
__device__ __forceinline__ void rn_store_f32(int t, void *o, int64_t i, float v) {
    switch (t) {
    case LDT_F32: ((float *)o)[i] = v; break;
    case LDT_F64: ((double *)o)[i] = (double)v; break;
    case LDT_F16: ((uint16_t *)o)[i] = ldt__f32_to_f16(v); break;
    case LDT_BF16: ((uint16_t *)o)[i] = ldt__f32_to_bf16(v); break;
    case LDT_I32: ((int32_t *)o)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)o)[i] = (int64_t)v; break;
    default: ((uint8_t *)o)[i] = (uint8_t)v; break;
    }
}

__global__ void k_random(ldt__rn_params p, ldt__cuda_region r, int64_t n, void *o,
                         const uint64_t *delta) {
    if (delta) p.offset += *delta; // this step's place on the stream (wraps as the CPU's does)
    LDT__CUDA_FOR(i, n) {
        int64_t g = ldt__cuda_region_global(r, i);
        switch (p.op) {
        case LDT_OP_RAND: {
            float u = ldt__rand_u32_to_uniform_f32(ldt__rand_u32(p.seed, p.offset, g));
            rn_store_f32(p.dtype, o, i, ldt__rand_uniform_scale_f32(u, p.a, p.b));
        } break;
        case LDT_OP_RANDN: {
            float z = ldt__rand_normal_f32(p.seed, p.offset, g);
            rn_store_f32(p.dtype, o, i, ldt__rand_mul_add_f32(p.a, p.b, z));
        } break;
        case LDT_OP_BERNOULLI:
            rn_store_f32(p.dtype, o, i, ldt__rand_bernoulli(p.seed, p.offset, g, p.p) ? 1.0f : 0.0f);
            break;
        case LDT_OP_TRUNC_NORMAL: {
            // a double, rounded once to the dtype
            double v = ldt__rand_trunc_normal_from_u32(&p.tn, ldt__rand_u32(p.seed, p.offset, g));
            switch (p.dtype) {
            case LDT_F64: ((double *)o)[i] = v; break;
            case LDT_F32: ((float *)o)[i] = (float)v; break;
            case LDT_F16: ((uint16_t *)o)[i] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(v)); break;
            default: ((uint16_t *)o)[i] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(v)); break;
            }
        } break;
        default: { // randint: checked on the host to fit, and to be exact, in the dtype
            int64_t v = ldt__rand_u32_to_int(ldt__rand_u32(p.seed, p.offset, g), p.low, p.range);
            switch (p.dtype) {
            case LDT_I64: ((int64_t *)o)[i] = v; break;
            case LDT_I32: ((int32_t *)o)[i] = (int32_t)v; break;
            case LDT_U8: ((uint8_t *)o)[i] = (uint8_t)v; break;
            case LDT_F64: ((double *)o)[i] = (double)v; break;
            case LDT_F32: ((float *)o)[i] = (float)v; break;
            case LDT_F16: ((uint16_t *)o)[i] = ldt__f32_to_f16((float)v); break;
            default: ((uint16_t *)o)[i] = ldt__f32_to_bf16((float)v); break;
            }
        } break;
        }
    }
}

// state = {delta, advance, step}: the next step draws further on, and is counted.
__global__ void k_rng_advance(uint64_t *state) {
    state[0] += state[1];
    state[2] += 1;
}

// ---- launchers -------------------------------------------------------------------------
extern "C" ldt_status ldt__cuda_rng_advance(uint64_t *state, const ldt__cuda_env *env) {
    if (!state) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "rng advance: no state");
    LDT__CUDA_LAUNCH(k_rng_advance, 1, 1, 0, LDT__CUDA_STREAM(env))(state);
    LDT__CUDA_LAUNCHED("rng advance");
    return LDT_OK;
}

static const char *rn_name(int op) { return ldt__builtin_op_name(op); }

ldt_status ldt__cuda_region_make(const char *name, const ldt__kcall *c, ldt__cuda_region *out) {
    const ldt_region *r = c->region;
    const ldt_shape *gs = c->global_shape;
    memset(out, 0, sizeof *out);
    if (!r) return LDT_OK;
    LDT_CHECK(ldt__region_check(name, c));
    if (r->ndim == 0) return LDT_OK; // a 0-dim tensor: its one element is global index 0
    out->nd = r->ndim;
    out->gstride[r->ndim - 1] = 1;
    for (int d = r->ndim - 2; d >= 0; d--) out->gstride[d] = out->gstride[d + 1] * gs->dims[d + 1];
    for (int d = 0; d < r->ndim; d++) {
        out->ldims[d] = c->out.shape.dims[d];
        out->start[d] = r->runs[d].start;
        out->len[d] = r->runs[d].len > 0 ? r->runs[d].len : 1;
        out->bstride[d] = r->runs[d].block_stride;
    }
    return LDT_OK;
}

extern "C" ldt_status ldt__cuda_k_random(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = rn_name(c->op);
    ldt__rn_params p;
    ldt__cuda_region reg;
    int64_t n;
    if (c->op < LDT_OP_RAND || c->op > LDT_OP_RANDINT)
        LDT_FAIL(LDT_ERR_INTERNAL, "random kernels: op %d is not rand, randn, bernoulli, "
                 "trunc_normal or randint", c->op);
    LDT_CHECK(ldt__rn_params_make(c, name, 1, &p));
    LDT_CHECK(ldt__cuda_region_make(name, c, &reg));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    LDT__CUDA_LAUNCH(k_random, ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env))(
        p, reg, n, c->out.data, env ? env->rng_delta : NULL);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
