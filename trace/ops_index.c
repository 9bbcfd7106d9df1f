/* Indexing ops: embedding, one_hot, index_select, gather, scatter(_add), index_add and
 * index_put — recording and shape rules. Index values are checked when the op runs. */
#include "core/error.h"
#include "trace/trace.h"

static int need_index(ldt_ctx *ctx, const char *op, const char *what, const ldt_tensor *t) {
    if (t->dtype == LDT_I32 || t->dtype == LDT_I64) return 1;
    ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: %s is %s, expected i32 or i64 indices", op,
                  what, ldt_dtype_name((ldt_dtype)t->dtype));
    return 0;
}

static int norm_dim(ldt_ctx *ctx, const char *op, int dim, ldt_tensor *x) {
    int d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) ldt__bad_dim(ctx, op, dim, x);
    return d;
}

static ldt_tensor *shapes_error(ldt_ctx *ctx, const char *op, const char *expect, ldt_tensor *a,
                                ldt_tensor *b) {
    char da[256], db[256];
    ldt__describe(a, da, sizeof da);
    ldt__describe(b, db, sizeof db);
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: %s and %s; expected %s", op, da, db,
                         expect);
}

ldt_tensor *ldt_embedding(ldt_tensor *weight, ldt_tensor *indices) {
    ldt_tensor *in[2] = {weight, indices};
    ldt_ctx *ctx = ldt__check_inputs("embedding", in, 2);
    ldt_shape s;
    if (!ctx || !need_index(ctx, "embedding", "indices", indices)) return NULL;
    if (weight->shape->ndim != 2 || indices->shape->ndim + 1 > LDT_MAX_DIMS)
        return shapes_error(ctx, "embedding", "weight [V, H] and indices of up to 7 dims", weight,
                            indices);
    s = (*indices->shape);
    s.dims[s.ndim++] = weight->shape->dims[1];
    return ldt__record(ctx, LDT_OP_EMBEDDING, in, 2, &s, (ldt_dtype)weight->dtype);
}

ldt_tensor *ldt_one_hot(ldt_tensor *indices, int64_t classes) {
    ldt_ctx *ctx = ldt__check_inputs("one_hot", &indices, 1);
    ldt_shape s;
    ldt_tensor *t;
    if (!ctx || !need_index(ctx, "one_hot", "indices", indices)) return NULL;
    if (classes < 1 || indices->shape->ndim + 1 > LDT_MAX_DIMS)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "one_hot: %lld classes for indices of %d dims; expected >= 1 class "
                             "and up to 7 dims",
                             (long long)classes, indices->shape->ndim);
    s = (*indices->shape);
    s.dims[s.ndim++] = classes;
    t = ldt__record_a(ctx, LDT_OP_ONE_HOT, &indices, 1, &s, LDT_I64);
    if (t) t->attrs->i[0] = classes;
    return t;
}

ldt_tensor *ldt_index_select(ldt_tensor *x, int dim, ldt_tensor *index) {
    ldt_tensor *in[2] = {x, index}, *t;
    ldt_ctx *ctx = ldt__check_inputs("index_select", in, 2);
    ldt_shape s;
    int d;
    if (!ctx || !need_index(ctx, "index_select", "index", index)) return NULL;
    if ((d = norm_dim(ctx, "index_select", dim, x)) < 0) return NULL;
    if (index->shape->ndim != 1)
        return shapes_error(ctx, "index_select", "a 1-D index", x, index);
    s = (*x->shape);
    s.dims[d] = index->shape->dims[0];
    t = ldt__record_a(ctx, LDT_OP_INDEX_SELECT, in, 2, &s, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

ldt_tensor *ldt_gather(ldt_tensor *x, int dim, ldt_tensor *index) {
    ldt_tensor *in[2] = {x, index}, *t;
    ldt_ctx *ctx = ldt__check_inputs("gather", in, 2);
    int d, ok;
    if (!ctx || !need_index(ctx, "gather", "index", index)) return NULL;
    if ((d = norm_dim(ctx, "gather", dim, x)) < 0) return NULL;
    ok = index->shape->ndim == x->shape->ndim;
    for (int i = 0; ok && i < x->shape->ndim; i++)
        ok = i == d || index->shape->dims[i] <= x->shape->dims[i];
    if (!ok)
        return shapes_error(ctx, "gather",
                            "an index with x's dims, no larger than x's except along dim", x,
                            index);
    t = ldt__record_a(ctx, LDT_OP_GATHER, in, 2, index->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

static ldt_tensor *scatter(int op, ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src) {
    const char *name = ldt__builtin_op_name(op);
    ldt_tensor *in[3] = {x, index, src}, *t;
    ldt_ctx *ctx = ldt__check_inputs(name, in, 3);
    int d, ok;
    if (!ctx || !need_index(ctx, name, "index", index)) return NULL;
    if ((d = norm_dim(ctx, name, dim, x)) < 0) return NULL;
    if (src->dtype != x->dtype)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: src is %s, x is %s", name,
                             ldt_dtype_name((ldt_dtype)src->dtype), ldt_dtype_name((ldt_dtype)x->dtype));
    if (op != LDT_OP_SCATTER && x->dtype == LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: x is bool; it cannot accumulate",
                             name);
    ok = index->shape->ndim == x->shape->ndim && src->shape->ndim == x->shape->ndim;
    for (int i = 0; ok && i < x->shape->ndim; i++)
        ok = index->shape->dims[i] <= src->shape->dims[i] &&
             (i == d || index->shape->dims[i] <= x->shape->dims[i]);
    if (!ok)
        return shapes_error(ctx, name,
                            "index no larger than src, and no larger than x except along dim "
                            "(all with x's number of dims)",
                            x, index);
    t = ldt__record_a(ctx, op, in, 3, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

ldt_tensor *ldt_scatter(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src) {
    return scatter(LDT_OP_SCATTER, x, dim, index, src);
}
ldt_tensor *ldt_scatter_add(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src) {
    return scatter(LDT_OP_SCATTER_ADD, x, dim, index, src);
}

ldt_tensor *ldt_index_add(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src) {
    ldt_tensor *in[3] = {x, index, src}, *t;
    ldt_ctx *ctx = ldt__check_inputs("index_add", in, 3);
    int d, ok;
    if (!ctx || !need_index(ctx, "index_add", "index", index)) return NULL;
    if ((d = norm_dim(ctx, "index_add", dim, x)) < 0) return NULL;
    if (src->dtype != x->dtype || x->dtype == LDT_BOOL)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "index_add: x is %s and src %s; expected one numeric dtype",
                             ldt_dtype_name((ldt_dtype)x->dtype), ldt_dtype_name((ldt_dtype)src->dtype));
    ok = index->shape->ndim == 1 && src->shape->ndim == x->shape->ndim;
    for (int i = 0; ok && i < x->shape->ndim; i++)
        ok = src->shape->dims[i] == (i == d ? index->shape->dims[0] : x->shape->dims[i]);
    if (!ok)
        return shapes_error(ctx, "index_add",
                            "a 1-D index and src shaped like x with len(index) along dim", x, src);
    t = ldt__record_a(ctx, LDT_OP_INDEX_ADD, in, 3, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

ldt_tensor *ldt_index_put(ldt_tensor *x, ldt_tensor *const *indices, int k, ldt_tensor *values,
                          int accumulate) {
    ldt_tensor *in[2 + LDT_MAX_DIMS], *t;
    ldt_ctx *ctx;
    int64_t len;
    int nd;
    in[0] = x;
    in[1] = values;
    if (!(ctx = ldt__check_inputs("index_put", in, 2))) return NULL;
    if (k < 1 || k > x->shape->ndim || !indices)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "index_put: %d index tensors for x of %d dims; expected 1 to %d", k,
                             x->shape->ndim, x->shape->ndim);
    for (int i = 0; i < k; i++) in[2 + i] = indices[i];
    if (!ldt__check_inputs("index_put", in, 2 + k)) return NULL;
    if (values->dtype != x->dtype || (accumulate && x->dtype == LDT_BOOL))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "index_put: x is %s and values %s; expected one dtype (not bool "
                             "when accumulating)",
                             ldt_dtype_name((ldt_dtype)x->dtype),
                             ldt_dtype_name((ldt_dtype)values->dtype));
    len = -1;
    for (int i = 0; i < k; i++) {
        if (!need_index(ctx, "index_put", "an index tensor", indices[i])) return NULL;
        if (indices[i]->shape->ndim != 1 || (len >= 0 && indices[i]->shape->dims[0] != len))
            return shapes_error(ctx, "index_put", "1-D index tensors of one length", indices[0],
                                indices[i]);
        len = indices[i]->shape->dims[0];
    }
    /* values broadcast to [len, x.shape[k:]...] */
    nd = 1 + x->shape->ndim - k;
    if (values->shape->ndim > nd)
        return shapes_error(ctx, "index_put", "values that broadcast to [L, x's remaining dims]",
                            x, values);
    for (int i = 0; i < values->shape->ndim; i++) {
        int j = nd - values->shape->ndim + i;
        int64_t want = j == 0 ? len : x->shape->dims[k + j - 1];
        if (values->shape->dims[i] != 1 && values->shape->dims[i] != want)
            return shapes_error(ctx, "index_put",
                                "values that broadcast to [L, x's remaining dims]", x, values);
    }
    t = ldt__record_a(ctx, LDT_OP_INDEX_PUT, in, 2 + k, x->shape, (ldt_dtype)x->dtype);
    if (t) {
        t->attrs->i[0] = accumulate ? 1 : 0;
        t->attrs->i[1] = k;
    }
    return t;
}
