/* Random ops on the counter-based stream: each takes the context's seed and current offset,
 * then advances the offset by the single-device amount ceil(numel/4) (one word per element
 * for every distribution, kernels/common/philox.h). */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "kernels/common/philox.h"
#include "trace/trace.h"

/* i2, i3: attrs.i[2], i[3] (trunc_normal's bounds as double bit patterns, randint's low and
 * high); the caller has checked the op's own parameters. */
static ldt_tensor *random_op(ldt_ctx *ctx, int op, const ldt_shape *shape, ldt_dtype dt,
                             double f0, double f1, int64_t i2, int64_t i3) {
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
    if (op == LDT_OP_RANDINT) {
        int64_t mn, mx;
        if (!ldt__randint_limits(dt, &mn, &mx))
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "randint: dtype %s, expected i32, i64, u8 or a floating dtype",
                                 ldt_dtype_name(dt));
        if (!(i3 > i2))
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "randint: range [%lld, %lld) is empty, expected low < high",
                                 (long long)i2, (long long)i3);
        if ((uint64_t)i3 - (uint64_t)i2 > LDT__RANDINT_MAX_RANGE)
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "randint: range [%lld, %lld) holds %llu values, expected at most "
                                 "2^32 (one 32-bit word per element)",
                                 (long long)i2, (long long)i3,
                                 (unsigned long long)((uint64_t)i3 - (uint64_t)i2));
        if (i2 < mn || i3 - 1 > mx)
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "randint: range [%lld, %lld) overflows %s, expected values "
                                 "within [%lld, %lld]%s",
                                 (long long)i2, (long long)i3, ldt_dtype_name(dt), (long long)mn,
                                 (long long)mx,
                                 ldt__dtype_is_float(dt) ? " (the integers it holds exactly)" : "");
    } else if (op != LDT_OP_BERNOULLI && !ldt__dtype_is_float(dt))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: dtype %s, expected a floating dtype (f32 f64 f16 bf16)", name,
                             ldt_dtype_name(dt));
    if (op == LDT_OP_RAND && !(isfinite(f0) && isfinite(f1) && f0 < f1 && isfinite(f1 - f0)))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "uniform: bounds [%g, %g), expected finite lo < hi", f0, f1);
    if (op == LDT_OP_RANDN && !(isfinite(f0) && isfinite(f1) && f1 >= 0))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "normal: mean %g std %g, expected finite values and std >= 0", f0, f1);
    if (op == LDT_OP_TRUNC_NORMAL) {
        double a, b;
        memcpy(&a, &i2, sizeof a);
        memcpy(&b, &i3, sizeof b);
        if (!(isfinite(f0) && isfinite(f1) && f1 > 0))
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "trunc_normal: mean %g std %g, expected finite values and std > 0",
                                 f0, f1);
        if (!(isfinite(a) && isfinite(b) && a < b))
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "trunc_normal: bounds [%g, %g], expected finite a < b", a, b);
    }
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
    t->attrs->i[2] = i2;
    t->attrs->i[3] = i3;
    t->attrs->f[0] = f0;
    t->attrs->f[1] = f1;
    ctx->rng_offset += ldt__rand_offset_advance(numel);
    return t;
}

ldt_tensor *ldt_rand(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt) {
    return random_op(ctx, LDT_OP_RAND, shape, dt, 0.0, 1.0, 0, 0);
}
ldt_tensor *ldt_uniform(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double lo, double hi) {
    return random_op(ctx, LDT_OP_RAND, shape, dt, lo, hi, 0, 0);
}
ldt_tensor *ldt_randn(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt) {
    return random_op(ctx, LDT_OP_RANDN, shape, dt, 0.0, 1.0, 0, 0);
}
ldt_tensor *ldt_normal(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double mean,
                       double std) {
    return random_op(ctx, LDT_OP_RANDN, shape, dt, mean, std, 0, 0);
}
ldt_tensor *ldt_bernoulli(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double p) {
    return random_op(ctx, LDT_OP_BERNOULLI, shape, dt, p, 0.0, 0, 0);
}
ldt_tensor *ldt_trunc_normal(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double mean,
                             double std, double a, double b) {
    int64_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return random_op(ctx, LDT_OP_TRUNC_NORMAL, shape, dt, mean, std, ia, ib);
}
ldt_tensor *ldt_randint(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, int64_t low,
                        int64_t high) {
    return random_op(ctx, LDT_OP_RANDINT, shape, dt, 0.0, 0.0, low, high);
}
