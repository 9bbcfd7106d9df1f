/* matmul (torch.matmul rules) and linear: recording and shape rules. */
#include "core/error.h"
#include "trace/trace.h"

static ldt_tensor *inner_mismatch(ldt_ctx *ctx, const char *op, ldt_tensor *a, ldt_tensor *b) {
    char da[256], db[256];
    ldt__describe(a, da, sizeof da);
    ldt__describe(b, db, sizeof db);
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: inner dims differ: a is %s, b is %s",
                         op, da, db);
}

static ldt_tensor *check_float_pair(ldt_ctx *ctx, const char *op, ldt_tensor *a, ldt_tensor *b) {
    if (a->dtype != b->dtype)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: dtypes differ: a is %s, b is %s",
                             op, ldt_dtype_name((ldt_dtype)a->dtype),
                             ldt_dtype_name((ldt_dtype)b->dtype));
    if (!ldt__dtype_is_float((ldt_dtype)a->dtype))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: operands are %s, expected a floating dtype (f32 f64 f16 bf16)",
                             op, ldt_dtype_name((ldt_dtype)a->dtype));
    return a;
}

ldt_tensor *ldt_matmul(ldt_tensor *a, ldt_tensor *b) {
    ldt_tensor *in[2] = {a, b};
    ldt_ctx *ctx = ldt__check_inputs("matmul", in, 2);
    ldt_shape s = {0, {0}};
    int na, nb;
    if (!ctx) return NULL;
    if (!check_float_pair(ctx, "matmul", a, b)) return NULL;
    na = a->shape->ndim;
    nb = b->shape->ndim;
    if (na == 0 || nb == 0)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "matmul: a has %d dims and b %d; both need at least 1", na, nb);
    {
        /* k: a's last dim; b's first (1-D) or second-to-last */
        int64_t ka = a->shape->dims[na - 1], kb = nb == 1 ? b->shape->dims[0] : b->shape->dims[nb - 2];
        int bna = na > 2 ? na - 2 : 0, bnb = nb > 2 ? nb - 2 : 0, bn = bna > bnb ? bna : bnb;
        if (ka != kb) return inner_mismatch(ctx, "matmul", a, b);
        for (int i = 0; i < bn; i++) {
            int ia = bna - bn + i, ib = bnb - bn + i;
            int64_t da = ia >= 0 ? a->shape->dims[ia] : 1, db = ib >= 0 ? b->shape->dims[ib] : 1;
            if (da != db && da != 1 && db != 1) {
                char sa[256], sb[256];
                ldt__describe(a, sa, sizeof sa);
                ldt__describe(b, sb, sizeof sb);
                return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                     "matmul: batch dims do not broadcast: a is %s, b is %s", sa,
                                     sb);
            }
            s.dims[s.ndim++] = da == 1 ? db : da;
        }
        if (na >= 2) s.dims[s.ndim++] = a->shape->dims[na - 2];
        if (nb >= 2) s.dims[s.ndim++] = b->shape->dims[nb - 1];
    }
    return ldt__record(ctx, LDT_OP_MATMUL, in, 2, &s, (ldt_dtype)a->dtype);
}

ldt_tensor *ldt_linear(ldt_tensor *x, ldt_tensor *w, ldt_tensor *b) {
    ldt_tensor *in[3] = {x, w, b};
    int nin = b ? 3 : 2;
    ldt_ctx *ctx = ldt__check_inputs("linear", in, nin);
    ldt_shape s;
    if (!ctx) return NULL;
    if (!check_float_pair(ctx, "linear", x, w)) return NULL;
    if (b && b->dtype != x->dtype)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "linear: bias is %s, x is %s",
                             ldt_dtype_name((ldt_dtype)b->dtype), ldt_dtype_name((ldt_dtype)x->dtype));
    if (x->shape->ndim < 1 || w->shape->ndim != 2) {
        char sx[256], sw[256];
        ldt__describe(x, sx, sizeof sx);
        ldt__describe(w, sw, sizeof sw);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "linear: x is %s and w is %s; expected x [..., in] and w [out, in]",
                             sx, sw);
    }
    if (x->shape->dims[x->shape->ndim - 1] != w->shape->dims[1])
        return inner_mismatch(ctx, "linear", x, w);
    if (b && (b->shape->ndim != 1 || b->shape->dims[0] != w->shape->dims[0])) {
        char sb[256];
        ldt__describe(b, sb, sizeof sb);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "linear: bias is %s, expected [%lld]",
                             sb, (long long)w->shape->dims[0]);
    }
    s = (*x->shape);
    s.dims[s.ndim - 1] = w->shape->dims[0];
    return ldt__record(ctx, LDT_OP_LINEAR, in, nin, &s, (ldt_dtype)x->dtype);
}
