// CUDA kernels of the nn family (kernels/cpu/nn.c); this installment: dropout.
#include <stdint.h>
#include <type_traits>

#include "kernels/common/nn_math.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/common.cuh"

// ---- kernels ---------------------------------------------------------------------------
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
struct launch_dropout {
    template <typename D>
    static void run(const ldt__cuda_region &r, int64_t n, const void *x, void *y, uint64_t seed,
                    uint64_t offset, double p, const ldt__cuda_env *env) {
        if constexpr (std::is_floating_point<typename ldt__el<D>::C>::value) {
            typedef typename ldt__el<D>::S S;
            k_dropout<D><<<ldt__cuda_blocks(n), LDT__CUDA_THREADS, 0, LDT__CUDA_STREAM(env)>>>(
                r, n, (const S *)x, (S *)y, seed, offset, p, env ? env->rng_delta : NULL);
        }
    }
};

extern "C" ldt_status ldt__cuda_k_nn(const ldt__kcall *c, const ldt__cuda_env *env) {
    const char *name = ldt__builtin_op_name(c->op);
    ldt__cuda_region reg;
    int64_t n;
    if (c->op != LDT_OP_DROPOUT)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: no CUDA kernel yet", name);
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: no attributes", name);
    if (c->nin != 1 || !c->in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs; expected 1", name, c->nin);
    LDT_CHECK(ldt__check_operand(name, &c->in[0], 0));
    LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    const ldt__operand *x = &c->in[0];
    if (!ldt_dtype_is_float(x->dtype))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16)", name,
                 ldt_dtype_name(x->dtype));
    if (c->out.dtype != x->dtype || !ldt_shape_equal(&c->out.shape, &x->shape)) {
        char xs[128], os[128];
        ldt_shape_format(&x->shape, xs, sizeof xs);
        ldt_shape_format(&c->out.shape, os, sizeof os);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s %s, expected %s %s", name,
                 ldt_dtype_name(c->out.dtype), os, ldt_dtype_name(x->dtype), xs);
    }
    double p = c->attrs->f[0];
    if (!(p >= 0.0 && p <= 1.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: p = %g; expected 0 <= p <= 1", p);
    LDT_CHECK(ldt__cuda_region_make(name, c, &reg));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    LDT__CUDA_DISPATCH(x->dtype, launch_dropout, reg, n, x->data, c->out.data,
                       (uint64_t)c->attrs->i[0], (uint64_t)c->attrs->i[1], p, env);
    LDT__CUDA_LAUNCHED(name);
    return LDT_OK;
}
