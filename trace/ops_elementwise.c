/* Elementwise ops: recording and shape rules (numpy broadcasting, no implicit dtype
 * promotion: operands must share a dtype, as the error says). */
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "trace/trace.h"

/* Broadcasts a and b (right-aligned; sizes equal or 1). 0 on success. */
static int broadcast(const ldt_shape *a, const ldt_shape *b, ldt_shape *out) {
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    out->ndim = nd;
    for (int i = 0; i < nd; i++) {
        int ia = a->ndim - nd + i, ib = b->ndim - nd + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1) return -1;
        out->dims[i] = da == 1 ? db : da;
    }
    return 0;
}

static ldt_tensor *shape_mismatch(ldt_ctx *ctx, const char *op, ldt_tensor *a, ldt_tensor *b) {
    char da[256], db[256];
    ldt__describe(a, da, sizeof da);
    ldt__describe(b, db, sizeof db);
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                         "%s: shapes do not broadcast: a is %s, b is %s (sizes must match or "
                         "be 1, aligned from the right)",
                         op, da, db);
}

static ldt_tensor *dtype_mismatch(ldt_ctx *ctx, const char *op, ldt_tensor *a, ldt_tensor *b) {
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                         "%s: dtypes differ: a is %s, b is %s (cast one with ldt_cast)", op,
                         ldt_dtype_name((ldt_dtype)a->dtype), ldt_dtype_name((ldt_dtype)b->dtype));
}

static ldt_tensor *binary(int op, ldt_tensor *a, ldt_tensor *b) {
    ldt_tensor *in[2] = {a, b};
    const char *name = ldt__op_name(NULL, op);
    ldt_ctx *ctx = ldt__check_inputs(name, in, 2);
    ldt_shape s;
    int cmp = op >= LDT_OP_EQ && op <= LDT_OP_GE;
    if (!ctx) return NULL;
    if (a->dtype != b->dtype) return dtype_mismatch(ctx, name, a, b);
    if (!cmp && a->dtype == LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: arithmetic on bool tensors; cast to a number first", name);
    if (cmp && a->dtype == LDT_BOOL && op != LDT_OP_EQ && op != LDT_OP_NE)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: bool tensors compare with eq and ne only", name);
    if (broadcast(a->shape, b->shape, &s) != 0) return shape_mismatch(ctx, name, a, b);
    return ldt__record(ctx, op, in, 2, &s, cmp ? LDT_BOOL : (ldt_dtype)a->dtype);
}

ldt_tensor *ldt_add(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_ADD, a, b); }
ldt_tensor *ldt_sub(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_SUB, a, b); }
ldt_tensor *ldt_mul(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_MUL, a, b); }
ldt_tensor *ldt_div(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_DIV, a, b); }
ldt_tensor *ldt_eq(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_EQ, a, b); }
ldt_tensor *ldt_ne(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_NE, a, b); }
ldt_tensor *ldt_lt(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_LT, a, b); }
ldt_tensor *ldt_le(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_LE, a, b); }
ldt_tensor *ldt_gt(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_GT, a, b); }
ldt_tensor *ldt_ge(ldt_tensor *a, ldt_tensor *b) { return binary(LDT_OP_GE, a, b); }

ldt_tensor *ldt_where(ldt_tensor *cond, ldt_tensor *a, ldt_tensor *b) {
    ldt_tensor *in[3] = {cond, a, b};
    ldt_ctx *ctx = ldt__check_inputs("where", in, 3);
    ldt_shape s1, s;
    if (!ctx) return NULL;
    if (cond->dtype != LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "where: cond is %s, expected bool (from a comparison)",
                             ldt_dtype_name((ldt_dtype)cond->dtype));
    if (a->dtype != b->dtype) return dtype_mismatch(ctx, "where", a, b);
    if (broadcast(a->shape, b->shape, &s1) != 0) return shape_mismatch(ctx, "where", a, b);
    if (broadcast(cond->shape, &s1, &s) != 0) return shape_mismatch(ctx, "where", cond, a);
    return ldt__record(ctx, LDT_OP_WHERE, in, 3, &s, (ldt_dtype)a->dtype);
}

static ldt_tensor *scalar(int op, ldt_tensor *x, double v) {
    const char *name = ldt__op_name(NULL, op);
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    ldt_tensor *t;
    if (!ctx) return NULL;
    if (x->dtype == LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: arithmetic on a bool tensor; cast to a number first", name);
    if (op == LDT_OP_POW_SCALAR && !ldt__dtype_is_float((ldt_dtype)x->dtype))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: x is %s, expected a floating dtype (f32 f64 f16 bf16)", name,
                             ldt_dtype_name((ldt_dtype)x->dtype));
    /* no implicit promotion: an integer tensor takes whole-number scalars only */
    if (!ldt__dtype_is_float((ldt_dtype)x->dtype) && v != (double)(int64_t)v)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: scalar %g is not a whole number and x is %s; cast x to a "
                             "floating dtype first",
                             name, v, ldt_dtype_name((ldt_dtype)x->dtype));
    t = ldt__record_a(ctx, op, &x, 1, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->f[0] = v;
    return t;
}

ldt_tensor *ldt_add_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_ADD_SCALAR, x, s); }
ldt_tensor *ldt_sub_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_SUB_SCALAR, x, s); }
ldt_tensor *ldt_rsub_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_RSUB_SCALAR, x, s); }
ldt_tensor *ldt_mul_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_MUL_SCALAR, x, s); }
ldt_tensor *ldt_div_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_DIV_SCALAR, x, s); }
ldt_tensor *ldt_rdiv_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_RDIV_SCALAR, x, s); }
ldt_tensor *ldt_pow_scalar(ldt_tensor *x, double s) { return scalar(LDT_OP_POW_SCALAR, x, s); }

/* float_only: exp, log, ... need a floating dtype; neg and relu take integers too. */
static ldt_tensor *unary(int op, ldt_tensor *x, int float_only) {
    const char *name = ldt__op_name(NULL, op);
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    if (!ctx) return NULL;
    if (x->dtype == LDT_BOOL || (float_only && !ldt__dtype_is_float((ldt_dtype)x->dtype)))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: x is %s, expected %s", name,
                             ldt_dtype_name((ldt_dtype)x->dtype),
                             float_only ? "a floating dtype (f32 f64 f16 bf16)"
                                        : "a numeric dtype (not bool)");
    return op == LDT_OP_GELU ? ldt__record_a(ctx, op, &x, 1, x->shape, (ldt_dtype)x->dtype)
                             : ldt__record(ctx, op, &x, 1, x->shape, (ldt_dtype)x->dtype);
}

ldt_tensor *ldt_neg(ldt_tensor *x) { return unary(LDT_OP_NEG, x, 0); }
ldt_tensor *ldt_exp(ldt_tensor *x) { return unary(LDT_OP_EXP, x, 1); }
ldt_tensor *ldt_log(ldt_tensor *x) { return unary(LDT_OP_LOG, x, 1); }
ldt_tensor *ldt_sqrt(ldt_tensor *x) { return unary(LDT_OP_SQRT, x, 1); }
ldt_tensor *ldt_rsqrt(ldt_tensor *x) { return unary(LDT_OP_RSQRT, x, 1); }
ldt_tensor *ldt_tanh(ldt_tensor *x) { return unary(LDT_OP_TANH, x, 1); }
ldt_tensor *ldt_relu(ldt_tensor *x) { return unary(LDT_OP_RELU, x, 0); }
ldt_tensor *ldt_silu(ldt_tensor *x) { return unary(LDT_OP_SILU, x, 1); }

ldt_tensor *ldt_gelu(ldt_tensor *x, int tanh_form) {
    ldt_tensor *t = unary(LDT_OP_GELU, x, 1);
    if (t) t->attrs->i[0] = tanh_form ? 1 : 0;
    return t;
}

ldt_tensor *ldt_cast(ldt_tensor *x, ldt_dtype dt) {
    ldt_ctx *ctx = ldt__check_inputs("cast", &x, 1);
    if (!ctx) return NULL;
    if ((unsigned)dt >= LDT_DTYPE_COUNT)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "cast: invalid dtype %d", (int)dt);
    return ldt__record(ctx, LDT_OP_CAST, &x, 1, x->shape, dt);
}
