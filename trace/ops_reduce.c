/* Reductions: sum, mean, amax/amin (max/min), argmax/argmin, topk — recording and shape
 * rules. */
#include "core/error.h"
#include "trace/trace.h"

/* Output shape of reducing `mask` dims of in. */
static ldt_shape reduced(const ldt_shape *in, uint64_t mask, int keepdim) {
    ldt_shape s = {0, {0}};
    for (int d = 0; d < in->ndim; d++) {
        if (mask & (1u << d)) {
            if (keepdim) s.dims[s.ndim++] = 1;
        } else {
            s.dims[s.ndim++] = in->dims[d];
        }
    }
    return s;
}

static ldt_tensor *reduce(int op, ldt_tensor *x, const int *dims, int n, int keepdim) {
    const char *name = ldt__op_name(NULL, op);
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    ldt_dtype dt;
    ldt_shape s;
    ldt_tensor *t;
    uint64_t mask = 0;
    if (!ctx) return NULL;
    dt = (ldt_dtype)x->dtype;
    if (n < 0 || (n > 0 && !dims))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: %d dims given", name, n);
    if (n == 0) {
        mask = x->shape->ndim ? (1u << x->shape->ndim) - 1 : 0;
    } else {
        for (int i = 0; i < n; i++) {
            int d = ldt__norm_dim(dims[i], x->shape->ndim);
            if (d < 0) return ldt__bad_dim(ctx, name, dims[i], x);
            if (mask & (1u << d))
                return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: dim %d appears twice",
                                     name, d);
            mask |= 1u << d;
        }
    }
    if (op == LDT_OP_MEAN && !ldt__dtype_is_float(dt))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "mean: x is %s, expected a floating dtype (f32 f64 f16 bf16)",
                             ldt_dtype_name(dt));
    if ((op == LDT_OP_AMAX || op == LDT_OP_AMIN) && dt == LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: x is bool, expected a number",
                             name);
    if ((op == LDT_OP_AMAX || op == LDT_OP_AMIN))
        for (int d = 0; d < x->shape->ndim; d++)
            if ((mask & (1u << d)) && x->shape->dims[d] == 0) {
                char desc[256];
                ldt__describe(x, desc, sizeof desc);
                return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                     "%s: reducing dim %d of x %s, which is empty; the result "
                                     "has no value",
                                     name, d, desc);
            }
    /* integer and bool sums widen to i64, as torch does */
    if (op == LDT_OP_SUM && !ldt__dtype_is_float(dt)) dt = LDT_I64;
    s = reduced(x->shape, mask, keepdim);
    t = ldt__record_a(ctx, op, &x, 1, &s, dt);
    if (t) {
        t->attrs->i[0] = (int64_t)mask;
        t->attrs->i[1] = keepdim ? 1 : 0;
    }
    return t;
}

ldt_tensor *ldt_sum(ldt_tensor *x, const int *dims, int n, int keepdim) {
    return reduce(LDT_OP_SUM, x, dims, n, keepdim);
}
ldt_tensor *ldt_mean(ldt_tensor *x, const int *dims, int n, int keepdim) {
    return reduce(LDT_OP_MEAN, x, dims, n, keepdim);
}
ldt_tensor *ldt_amax(ldt_tensor *x, const int *dims, int n, int keepdim) {
    return reduce(LDT_OP_AMAX, x, dims, n, keepdim);
}
ldt_tensor *ldt_amin(ldt_tensor *x, const int *dims, int n, int keepdim) {
    return reduce(LDT_OP_AMIN, x, dims, n, keepdim);
}
ldt_tensor *ldt_max(ldt_tensor *x, int dim, int keepdim) {
    return reduce(LDT_OP_AMAX, x, &dim, 1, keepdim);
}
ldt_tensor *ldt_min(ldt_tensor *x, int dim, int keepdim) {
    return reduce(LDT_OP_AMIN, x, &dim, 1, keepdim);
}

/* Checks x and dim for argmax/argmin/topk; returns the normalised dim or -1. */
static int index_dim(ldt_ctx *ctx, const char *name, ldt_tensor *x, int dim) {
    int d;
    if (x->dtype == LDT_BOOL) {
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: x is bool, expected a number", name);
        return -1;
    }
    d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) ldt__bad_dim(ctx, name, dim, x);
    return d;
}

static ldt_tensor *arg(int op, ldt_tensor *x, int dim, int keepdim) {
    const char *name = ldt__op_name(NULL, op);
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    ldt_tensor *t;
    int d;
    if (!ctx || (d = index_dim(ctx, name, x, dim)) < 0) return NULL;
    if (x->shape->dims[d] == 0) {
        char desc[256];
        ldt__describe(x, desc, sizeof desc);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: dim %d of x %s is empty", name,
                             d, desc);
    }
    {
        ldt_shape s = reduced(x->shape, 1u << d, keepdim);
        t = ldt__record_a(ctx, op, &x, 1, &s, LDT_I64);
    }
    if (t) {
        t->attrs->i[0] = d;
        t->attrs->i[1] = keepdim ? 1 : 0;
    }
    return t;
}

ldt_tensor *ldt_argmax(ldt_tensor *x, int dim, int keepdim) {
    return arg(LDT_OP_ARGMAX, x, dim, keepdim);
}
ldt_tensor *ldt_argmin(ldt_tensor *x, int dim, int keepdim) {
    return arg(LDT_OP_ARGMIN, x, dim, keepdim);
}

ldt_status ldt_topk(ldt_tensor *x, int64_t k, int dim, int largest, ldt_tensor **values,
                    ldt_tensor **indices) {
    ldt_ctx *ctx = ldt__check_inputs("topk", &x, 1);
    ldt_shape s;
    int d;
    if (!ctx) return x && x->ctx && x->ctx->status ? x->ctx->status : LDT_ERR_INVALID_ARGUMENT;
    if ((d = index_dim(ctx, "topk", x, dim)) < 0) return ctx->status;
    if (k < 0 || k > x->shape->dims[d]) {
        char desc[256];
        ldt__describe(x, desc, sizeof desc);
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                      "topk: k = %lld, expected 0 to %lld (the size of dim %d of x %s)",
                      (long long)k, (long long)x->shape->dims[d], d, desc);
        return ctx->status;
    }
    s = (*x->shape);
    s.dims[d] = k;
    for (int which = 0; which < 2; which++) {
        ldt_tensor **out = which ? indices : values, *t;
        if (!out) continue;
        t = ldt__record_a(ctx, which ? LDT_OP_TOPK_INDICES : LDT_OP_TOPK_VALUES, &x, 1, &s,
                        which ? LDT_I64 : (ldt_dtype)x->dtype);
        if (!t) return ctx->status;
        t->attrs->i[0] = d;
        t->attrs->i[1] = k;
        t->attrs->i[2] = largest ? 1 : 0;
        t->attrs->i[3] = 1; /* sorted */
        *out = t;
    }
    return LDT_OK;
}
