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
#include "kernels/cuda/common.cuh"

struct rn_params {
    int op;
    int dtype;
    uint64_t seed, offset;
    float a, b; // rand: lo, hi; randn: mean, std
    double p;   // bernoulli
    ldt__trunc_normal tn;
    int64_t low; // randint: [low, low + range)
    uint64_t range;
};

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

__global__ void k_random(rn_params p, ldt__cuda_region r, int64_t n, void *o,
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
    k_rng_advance<<<1, 1, 0, LDT__CUDA_STREAM(env)>>>(state);
    LDT__CUDA_LAUNCHED("rng advance");
    return LDT_OK;
}

static const char *rn_name(int op) { return ldt__builtin_op_name(op); }

ldt_status ldt__cuda_region_make(const char *name, const ldt__kcall *c, ldt__cuda_region *out) {
    const ldt_region *r = c->region;
    const ldt_shape *gs = c->global_shape;
    char o[128], g[128];
    memset(out, 0, sizeof *out);
    if (!r) return LDT_OK;
    ldt_shape_format(&c->out.shape, o, sizeof o);
    if (!gs)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: a region without a global shape (out is %s)", name, o);
    ldt_shape_format(gs, g, sizeof g);
    if (r->ndim != gs->ndim || !ldt_shape_equal(&r->local_shape, &c->out.shape))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: the region (%d dims) does not fit output %s of global shape %s", name,
                 r->ndim, o, g);
    for (int d = 0; d < r->ndim; d++) {
        const ldt_dim_runs *rd = &r->runs[d];
        if (rd->len < 0 || rd->blocks < 0 || rd->start < 0 ||
            rd->len * rd->blocks != c->out.shape.dims[d] ||
            (rd->len > 0 && rd->blocks > 0 &&
             rd->start + (rd->blocks - 1) * rd->block_stride + rd->len > gs->dims[d]))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: region dim %d (start %lld, %lld runs of %lld every %lld) does not fit "
                     "output %s of global shape %s",
                     name, d, (long long)rd->start, (long long)rd->blocks, (long long)rd->len,
                     (long long)rd->block_stride, o, g);
    }
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
    rn_params p;
    ldt__cuda_region reg;
    int64_t n;
    if (c->op < LDT_OP_RAND || c->op > LDT_OP_RANDINT)
        LDT_FAIL(LDT_ERR_INTERNAL, "random kernels: op %d is not rand, randn, bernoulli, "
                 "trunc_normal or randint", c->op);
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: no attributes (seed, offset)", name);
    LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    memset(&p, 0, sizeof p);
    p.op = c->op;
    p.dtype = (int)c->out.dtype;
    p.seed = (uint64_t)c->attrs->i[0];
    p.offset = (uint64_t)c->attrs->i[1];
    ldt_dtype dt = c->out.dtype;
    int isf = ldt_dtype_is_float(dt);
    int isint = dt == LDT_BOOL || dt == LDT_U8 || dt == LDT_I32 || dt == LDT_I64;
    if (!isf && !(c->op == LDT_OP_BERNOULLI && isint) &&
        !(c->op == LDT_OP_RANDINT && isint && dt != LDT_BOOL))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16%s)", name,
                 ldt_dtype_name(dt),
                 c->op == LDT_OP_BERNOULLI ? ", bool, u8, i32, i64"
                 : c->op == LDT_OP_RANDINT ? ", u8, i32, i64" : "");
    double f0 = c->attrs->f[0], f1 = c->attrs->f[1];
    if (c->op == LDT_OP_TRUNC_NORMAL) {
        double lo, hi;
        int64_t ia = c->attrs->i[2], ib = c->attrs->i[3];
        memcpy(&lo, &ia, sizeof lo);
        memcpy(&hi, &ib, sizeof hi);
        if (!isfinite(f0) || !isfinite(f1) || !(f1 > 0) || !isfinite(lo) || !isfinite(hi) ||
            !(lo < hi))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "trunc_normal: mean %g, std %g, bounds [%g, %g]; expected finite values, "
                     "std > 0 and a < b", f0, f1, lo, hi);
        p.tn = ldt__rand_trunc_normal_init(f0, f1, lo, hi);
    } else if (c->op == LDT_OP_RANDINT) {
        int64_t low = c->attrs->i[2], high = c->attrs->i[3], mn, mx;
        uint64_t range = (uint64_t)high - (uint64_t)low;
        ldt__randint_limits(dt, &mn, &mx);
        if (!(high > low) || range > LDT__RANDINT_MAX_RANGE || low < mn || high - 1 > mx)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "randint: [%lld, %lld) as %s; expected low < high, high - low <= 2^32 and "
                     "values within [%lld, %lld]", (long long)low, (long long)high,
                     ldt_dtype_name(dt), (long long)mn, (long long)mx);
        p.low = low;
        p.range = range;
    } else if (c->op == LDT_OP_RAND) {
        p.a = (float)f0;
        p.b = (float)f1;
        if (!(p.a < p.b) || !isfinite(p.b - p.a))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "rand: range [%g, %g) is empty or not finite in f32; expected lo < hi", f0, f1);
    } else if (c->op == LDT_OP_RANDN) {
        p.a = (float)f0;
        p.b = (float)f1;
        if (!isfinite(p.a) || !isfinite(p.b) || p.b < 0.0f)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "randn: mean %g, std %g; expected finite f32 values and std >= 0", f0, f1);
    } else {
        p.p = f0;
        if (!(f0 >= 0.0 && f0 <= 1.0))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bernoulli: p = %g; expected 0 <= p <= 1", f0);
    }
    LDT_CHECK(ldt__cuda_region_make(name, c, &reg));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    k_random<<<ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env)>>>(
        p, reg, n, c->out.data, env ? env->rng_delta : NULL);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
