/* Host-side checks of the ops that draw by global index (rand, randn, bernoulli,
 * trunc_normal, randint; dropout's region), as inline functions for CPU and CUDA
 * (kernels/cpu/random.c, kernels/cpu/nn.c, kernels/cuda/random.cu), so both accept the same
 * calls, draw with the same parameters and fail with the same messages.
 *
 *   ldt__rn_params p;
 *   LDT_CHECK(ldt__rn_params_make(c, "rand", 0, &p));      // dtype and attributes
 *   if (c->region) LDT_CHECK(ldt__region_check("rand", c)); // the region fits out
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_RANDOM_PLAN_H
#define LDT_KERNELS_COMMON_RANDOM_PLAN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/philox.h"

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

/* One random op's draw: element with global index g takes its value from (seed, offset, g). */
typedef struct ldt__rn_params {
    int op;
    ldt_dtype dtype;
    uint64_t seed, offset;
    float a, b;           /* rand: lo, hi; randn: mean, std */
    double p;             /* bernoulli */
    ldt__trunc_normal tn; /* trunc_normal */
    int64_t low;          /* randint: [low, low + range) */
    uint64_t range;
} ldt__rn_params;

/* c->region (set) must describe out's shape and lie inside the global shape: a wrong one
 * would write outside the buffer or read the stream at the wrong places. */
static inline ldt_status ldt__region_check(const char *name, const ldt__kcall *c) {
    const ldt_region *r = c->region;
    const ldt_shape *gs = c->global_shape;
    char o[128], g[128]; /* shapes, formatted only for a message */
    if (!gs) {
        ldt_shape_format(&c->out.shape, o, sizeof o);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: a region without a global shape (out is %s)", name,
                 o);
    }
    if (r->ndim != gs->ndim || !ldt_shape_equal(&r->local_shape, &c->out.shape)) {
        ldt_shape_format(&c->out.shape, o, sizeof o);
        ldt_shape_format(gs, g, sizeof g);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: the region (%d dims) does not fit output %s of global shape %s", name,
                 r->ndim, o, g);
    }
    for (int d = 0; d < r->ndim; d++) {
        const ldt_dim_runs *rd = &r->runs[d];
        if (rd->len < 0 || rd->blocks < 0 || rd->start < 0 ||
            rd->len * rd->blocks != c->out.shape.dims[d] ||
            (rd->len > 0 && rd->blocks > 0 &&
             rd->start + (rd->blocks - 1) * rd->block_stride + rd->len > gs->dims[d])) {
            ldt_shape_format(&c->out.shape, o, sizeof o);
            ldt_shape_format(gs, g, sizeof g);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: region dim %d (start %lld, %lld runs of %lld every %lld) does not fit "
                     "output %s of global shape %s",
                     name, d, (long long)rd->start, (long long)rd->blocks, (long long)rd->len,
                     (long long)rd->block_stride, o, g);
        }
    }
    return LDT_OK;
}

/* The draw of random op c (rand..randint) from its attributes: i[0] seed, i[1] offset, f[0],
 * f[1] and i[2], i[3] the op's parameters; the output dtype checked for the op.
 * check_out: also ldt__check_operand on c->out (the CUDA launchers). */
static inline ldt_status ldt__rn_params_make(const ldt__kcall *c, const char *name,
                                             int check_out, ldt__rn_params *p) {
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: no attributes (seed, offset)", name);
    if (check_out) LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    memset(p, 0, sizeof *p);
    p->op = c->op;
    p->dtype = c->out.dtype;
    p->seed = (uint64_t)c->attrs->i[0];
    p->offset = (uint64_t)c->attrs->i[1];
    int isf = ldt_dtype_is_float(p->dtype);
    int isint =
        p->dtype == LDT_BOOL || p->dtype == LDT_U8 || p->dtype == LDT_I32 || p->dtype == LDT_I64;
    if (!isf && !(c->op == LDT_OP_BERNOULLI && isint) &&
        !(c->op == LDT_OP_RANDINT && isint && p->dtype != LDT_BOOL))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16%s)", name,
                 ldt_dtype_name(p->dtype),
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
                     "std > 0 and a < b",
                     f0, f1, lo, hi);
        p->tn = ldt__rand_trunc_normal_init(f0, f1, lo, hi);
    } else if (c->op == LDT_OP_RANDINT) {
        int64_t low = c->attrs->i[2], high = c->attrs->i[3], mn, mx;
        uint64_t range = (uint64_t)high - (uint64_t)low;
        ldt__randint_limits(p->dtype, &mn, &mx);
        if (!(high > low) || range > LDT__RANDINT_MAX_RANGE || low < mn || high - 1 > mx)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "randint: [%lld, %lld) as %s; expected low < high, high - low <= 2^32 and "
                     "values within [%lld, %lld]",
                     (long long)low, (long long)high, ldt_dtype_name(p->dtype), (long long)mn,
                     (long long)mx);
        p->low = low;
        p->range = range;
    } else if (c->op == LDT_OP_RAND) {
        /* the values are made in f32: the range must be a non-empty finite f32 range */
        p->a = (float)f0;
        p->b = (float)f1;
        if (!(p->a < p->b) || !isfinite(p->b - p->a))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "rand: range [%g, %g) is empty or not finite in f32; expected lo < hi", f0,
                     f1);
    } else if (c->op == LDT_OP_RANDN) {
        p->a = (float)f0;
        p->b = (float)f1;
        if (!isfinite(p->a) || !isfinite(p->b) || p->b < 0.0f)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "randn: mean %g, std %g; expected finite f32 values and std >= 0", f0, f1);
    } else {
        p->p = f0;
        if (!(f0 >= 0.0 && f0 <= 1.0))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bernoulli: p = %g; expected 0 <= p <= 1", f0);
    }
    return LDT_OK;
}

#endif
