/* Random ops on the counter-based stream: each takes the context's seed and current offset,
 * then advances the offset by the single-device amount ceil(numel/4). */
#include <math.h>

#include "core/error.h"
#include "kernels/common/philox.h"
#include "trace/trace.h"

static ldt_tensor *random_op(ldt_ctx *ctx, int op, const ldt_shape *shape, ldt_dtype dt,
                             double f0, double f1) {
    const char *name = ldt__op_name(NULL, op);
    ldt_tensor *t;
    int64_t numel;
    if (!ctx) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "%s: ctx must not be NULL", name);
        return NULL;
    }
    if (!shape) return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: shape is NULL", name);
    if ((unsigned)dt >= LDT_DTYPE_COUNT)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", name, (int)dt);
    if (op != LDT_OP_BERNOULLI && !ldt__dtype_is_float(dt))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: dtype %s, expected a floating dtype (f32 f64 f16 bf16)", name,
                             ldt_dtype_name(dt));
    if (op == LDT_OP_RAND && !(isfinite(f0) && isfinite(f1) && f0 < f1 && isfinite(f1 - f0)))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "uniform: bounds [%g, %g), expected finite lo < hi", f0, f1);
    if (op == LDT_OP_RANDN && !(isfinite(f0) && isfinite(f1) && f1 >= 0))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "normal: mean %g std %g, expected finite values and std >= 0", f0, f1);
    if (op == LDT_OP_BERNOULLI && !(f0 >= 0 && f0 <= 1))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "bernoulli: p = %g, expected 0 <= p <= 1",
                             f0);
    if (ldt_shape_numel(shape, &numel) != LDT_OK) {
        ldt__error_prefix(LDT_ERR_INVALID_ARGUMENT, "%s", name);
        return ldt__trace_fail(ctx);
    }
    t = ldt__record_a(ctx, op, NULL, 0, shape, dt);
    if (!t) return NULL;
    t->attrs->i[0] = (int64_t)ctx->seed;
    t->attrs->i[1] = (int64_t)ctx->rng_offset;
    t->attrs->f[0] = f0;
    t->attrs->f[1] = f1;
    ctx->rng_offset += ldt__rand_offset_advance(numel);
    return t;
}

ldt_tensor *ldt_rand(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt) {
    return random_op(ctx, LDT_OP_RAND, shape, dt, 0.0, 1.0);
}
ldt_tensor *ldt_uniform(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double lo, double hi) {
    return random_op(ctx, LDT_OP_RAND, shape, dt, lo, hi);
}
ldt_tensor *ldt_randn(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt) {
    return random_op(ctx, LDT_OP_RANDN, shape, dt, 0.0, 1.0);
}
ldt_tensor *ldt_normal(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double mean,
                       double std) {
    return random_op(ctx, LDT_OP_RANDN, shape, dt, mean, std);
}
ldt_tensor *ldt_bernoulli(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double p) {
    return random_op(ctx, LDT_OP_BERNOULLI, shape, dt, p, 0.0);
}
