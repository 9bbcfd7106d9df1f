/* Views and data movement: reshape, transpose/permute, slice, select, cat, split, expand,
 * alias — recording and shape rules. */
#include <stdio.h>

#include "core/error.h"
#include "trace/trace.h"

ldt_tensor *ldt_reshape(ldt_tensor *x, const ldt_shape *shape) {
    ldt_ctx *ctx = ldt__check_inputs("reshape", &x, 1);
    ldt_shape s;
    int64_t have, known = 1;
    int infer = -1;
    char d[256], t[256];
    if (!ctx) return NULL;
    if (!shape || shape->ndim < 0 || shape->ndim > LDT_MAX_DIMS)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "reshape: bad target shape");
    s = *shape;
    ldt_shape_numel(x->shape, &have);
    for (int i = 0; i < s.ndim; i++) {
        if (s.dims[i] == -1) {
            if (infer >= 0)
                return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                     "reshape: more than one -1 in the target shape");
            infer = i;
        } else if (s.dims[i] < 0) {
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "reshape: target size %lld at dim %d is negative",
                                 (long long)s.dims[i], i);
        } else if (__builtin_mul_overflow(known, s.dims[i], &known)) {
            return ldt__op_error(ctx, LDT_ERR_OVERFLOW, "reshape: target shape overflows");
        }
    }
    if (infer >= 0) {
        if (known == 0 || have % known != 0) goto mismatch;
        s.dims[infer] = have / known;
        known = have;
    }
    if (known != have) goto mismatch;
    return ldt__record(ctx, LDT_OP_RESHAPE, &x, 1, &s, (ldt_dtype)x->dtype);
mismatch:
    ldt__describe(x, d, sizeof d);
    ldt_shape_format(shape, t, sizeof t);
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                         "reshape: x is %s (%lld elements), target %s does not hold that many", d,
                         (long long)have, t);
}

ldt_tensor *ldt_view(ldt_tensor *x, const ldt_shape *shape) { return ldt_reshape(x, shape); }

ldt_tensor *ldt_permute(ldt_tensor *x, const int *dims, int n) {
    ldt_ctx *ctx = ldt__check_inputs("permute", &x, 1);
    ldt_shape s;
    ldt_tensor *t;
    int seen[LDT_MAX_DIMS] = {0}, perm[LDT_MAX_DIMS];
    if (!ctx) return NULL;
    if (n != x->shape->ndim || (n > 0 && !dims)) {
        char d[256];
        ldt__describe(x, d, sizeof d);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "permute: %d dims given for x %s, expected %d", n, d, x->shape->ndim);
    }
    for (int i = 0; i < n; i++) {
        int d = ldt__norm_dim(dims[i], n);
        if (d < 0) return ldt__bad_dim(ctx, "permute", dims[i], x);
        if (seen[d])
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "permute: dim %d appears twice", d);
        seen[d] = 1;
        perm[i] = d;
    }
    s.ndim = n;
    for (int i = 0; i < n; i++) s.dims[i] = x->shape->dims[perm[i]];
    t = ldt__record_a(ctx, LDT_OP_PERMUTE, &x, 1, &s, (ldt_dtype)x->dtype);
    if (t)
        for (int i = 0; i < n; i++) t->attrs->i[i] = perm[i];
    return t;
}

ldt_tensor *ldt_transpose(ldt_tensor *x, int d0, int d1) {
    int perm[LDT_MAX_DIMS], n, a, b;
    ldt_ctx *ctx = ldt__check_inputs("transpose", &x, 1);
    if (!ctx) return NULL;
    n = x->shape->ndim;
    a = ldt__norm_dim(d0, n);
    b = ldt__norm_dim(d1, n);
    if (a < 0) return ldt__bad_dim(ctx, "transpose", d0, x);
    if (b < 0) return ldt__bad_dim(ctx, "transpose", d1, x);
    for (int i = 0; i < n; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return ldt_permute(x, perm, n);
}

ldt_tensor *ldt_slice(ldt_tensor *x, int dim, int64_t start, int64_t end, int64_t step) {
    ldt_ctx *ctx = ldt__check_inputs("slice", &x, 1);
    ldt_shape s;
    ldt_tensor *t;
    int d;
    int64_t n;
    if (!ctx) return NULL;
    d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) return ldt__bad_dim(ctx, "slice", dim, x);
    if (step < 1)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "slice: step %lld, expected >= 1",
                             (long long)step);
    n = x->shape->dims[d];
    /* Python rules: negative from the end, then clamped to [0, n] */
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < start) end = start;
    if (end > n) end = n;
    s = (*x->shape);
    s.dims[d] = (end - start + step - 1) / step;
    t = ldt__record_a(ctx, LDT_OP_SLICE, &x, 1, &s, (ldt_dtype)x->dtype);
    if (t) {
        t->attrs->i[0] = d;
        t->attrs->i[1] = start;
        t->attrs->i[2] = end;
        t->attrs->i[3] = step;
    }
    return t;
}

ldt_tensor *ldt_select(ldt_tensor *x, int dim, int64_t index) {
    ldt_ctx *ctx = ldt__check_inputs("select", &x, 1);
    ldt_shape s;
    ldt_tensor *t;
    int d;
    if (!ctx) return NULL;
    d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) return ldt__bad_dim(ctx, "select", dim, x);
    if (index < -x->shape->dims[d] || index >= x->shape->dims[d]) {
        char desc[256];
        ldt__describe(x, desc, sizeof desc);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "select: index %lld is out of range for dim %d of x %s", (long long)index,
                             d, desc);
    }
    if (index < 0) index += x->shape->dims[d];
    s.ndim = x->shape->ndim - 1;
    for (int i = 0, j = 0; i < x->shape->ndim; i++)
        if (i != d) s.dims[j++] = x->shape->dims[i];
    t = ldt__record_a(ctx, LDT_OP_SELECT, &x, 1, &s, (ldt_dtype)x->dtype);
    if (t) {
        t->attrs->i[0] = d;
        t->attrs->i[1] = index;
    }
    return t;
}

ldt_tensor *ldt_cat(ldt_tensor *const *xs, int n, int dim) {
    ldt_ctx *ctx;
    ldt_shape s;
    ldt_tensor *t;
    int d;
    if (!xs || n < 1) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "cat: %d tensors given, expected at least 1", n);
        return NULL;
    }
    if (!(ctx = ldt__check_inputs("cat", xs, n))) return NULL;
    d = ldt__norm_dim(dim, xs[0]->shape->ndim);
    if (d < 0) return ldt__bad_dim(ctx, "cat", dim, xs[0]);
    s = (*xs[0]->shape);
    for (int i = 1; i < n; i++) {
        const ldt_tensor *x = xs[i];
        int ok = x->shape->ndim == s.ndim && x->dtype == xs[0]->dtype;
        for (int k = 0; ok && k < s.ndim; k++) ok = k == d || x->shape->dims[k] == s.dims[k];
        if (!ok) {
            char a[256], b[256];
            ldt__describe(xs[0], a, sizeof a);
            ldt__describe(xs[i], b, sizeof b);
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "cat: tensor %d is %s %s, tensor 0 is %s %s; all must match "
                                 "except on dim %d",
                                 i, b, ldt_dtype_name((ldt_dtype)x->dtype), a,
                                 ldt_dtype_name((ldt_dtype)xs[0]->dtype), d);
        }
        if (__builtin_add_overflow(s.dims[d], x->shape->dims[d], &s.dims[d]))
            return ldt__op_error(ctx, LDT_ERR_OVERFLOW, "cat: dim %d overflows", d);
    }
    t = ldt__record_a(ctx, LDT_OP_CAT, xs, n, &s, (ldt_dtype)xs[0]->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

ldt_status ldt_split(ldt_tensor *x, int64_t size, int dim, ldt_tensor **out, int cap, int *n) {
    ldt_ctx *ctx = ldt__check_inputs("split", &x, 1);
    int d, count;
    if (!ctx) return x && x->ctx ? x->ctx->status : LDT_ERR_INVALID_ARGUMENT;
    if (!out || !n) {
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "split: out and n must not be NULL");
        return LDT_ERR_INVALID_ARGUMENT;
    }
    d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) {
        ldt__bad_dim(ctx, "split", dim, x);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (size < 1) {
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "split: size %lld, expected >= 1",
                      (long long)size);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    count = (int)((x->shape->dims[d] + size - 1) / size);
    if (count == 0) count = 1; /* an empty dim splits into one empty piece, as torch does */
    if (count > cap) {
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                      "split: dim %d of size %lld in pieces of %lld makes %d, out holds %d", d,
                      (long long)x->shape->dims[d], (long long)size, count, cap);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < count; i++) {
        out[i] = ldt_slice(x, d, (int64_t)i * size, (int64_t)(i + 1) * size, 1);
        if (!out[i]) return ctx->status;
    }
    *n = count;
    return LDT_OK;
}

ldt_tensor *ldt_expand(ldt_tensor *x, const ldt_shape *shape) {
    ldt_ctx *ctx = ldt__check_inputs("expand", &x, 1);
    ldt_shape s;
    int nd;
    if (!ctx) return NULL;
    if (!shape || shape->ndim < x->shape->ndim || shape->ndim > LDT_MAX_DIMS)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "expand: target has %d dims, x has %d; expected at least as many",
                             shape ? shape->ndim : -1, x->shape->ndim);
    s = *shape;
    nd = s.ndim;
    for (int i = 0; i < nd; i++) {
        int ix = x->shape->ndim - nd + i;
        int64_t have = ix >= 0 ? x->shape->dims[ix] : 1;
        if (s.dims[i] == -1) {
            if (ix < 0)
                return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                     "expand: -1 at a new leading dim %d", i);
            s.dims[i] = have;
        }
        if (s.dims[i] < 0 || (have != 1 && have != s.dims[i])) {
            char a[256], b[256];
            ldt__describe(x, a, sizeof a);
            ldt_shape_format(shape, b, sizeof b);
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "expand: x %s cannot expand to %s (only size-1 dims expand)", a, b);
        }
    }
    return ldt__record(ctx, LDT_OP_EXPAND, &x, 1, &s, (ldt_dtype)x->dtype);
}

ldt_tensor *ldt_expand_as(ldt_tensor *x, ldt_tensor *other) {
    ldt_tensor *in[2] = {x, other};
    if (!ldt__check_inputs("expand_as", in, 2)) return NULL;
    return ldt_expand(x, other->shape);
}

ldt_tensor *ldt_alias(ldt_tensor *x) {
    ldt_ctx *ctx = ldt__check_inputs("alias", &x, 1);
    if (!ctx) return NULL;
    return ldt__record(ctx, LDT_OP_ALIAS, &x, 1, x->shape, (ldt_dtype)x->dtype);
}
