/* Host-side checks of the index family (embedding, one_hot, index_select, gather, scatter,
 * scatter_add, index_add, index_put), as inline functions for CPU and CUDA
 * (kernels/cpu/index.c, kernels/cuda/index.cu), so both accept the same calls and fail with
 * the same messages. What needs the index values (their range) is not here: the CPU checks
 * it on the host before writing; a CUDA kernel finds it on the device (docs/gpu.md).
 *
 *   ldt__ix_plan p;
 *   LDT_CHECK(ldt__ix_check(c, &p));   // arity, operands, dtypes, shapes, dim, attrs
 *   // p.dim; p.nidx index inputs: input p.idx_in[j] indexes p.idx_n[j] entries
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_INDEX_PLAN_H
#define LDT_KERNELS_COMMON_INDEX_PLAN_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

typedef struct ldt__ix_plan {
    int dim;           /* index_select, index_add, gather, scatter(_add): the dim of x */
    int k, acc;        /* index_put: index tensors, accumulate */
    int64_t lo, V;     /* embedding: the weight holds rows [lo, lo + rows) of a V-row table */
    int64_t C;         /* one_hot: classes */
    /* the index inputs to range-check, in the order the CPU checks them: input idx_in[j]
     * indexes idx_n[j] entries, named idx_what[j] in the message ("rows"), or when that is
     * NULL "entries of dim idx_dim[j]" (formatted only for a message) */
    int nidx;
    int idx_in[LDT_MAX_DIMS];
    int64_t idx_n[LDT_MAX_DIMS];
    const char *idx_what[LDT_MAX_DIMS];
    int idx_dim[LDT_MAX_DIMS];
} ldt__ix_plan;

static inline const char *ldt__ix_fmt(const ldt_shape *s, char *buf, size_t cap) {
    ldt_shape_format(s, buf, cap);
    return buf;
}

static inline ldt_status ldt__ix_need_index_dtype(const char *op, const ldt__kcall *c, int k) {
    ldt_dtype t = c->in[k].dtype;
    if (t == LDT_I32 || t == LDT_I64) return LDT_OK;
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: indices are %s (input %d), expected i32 or i64", op,
             ldt_dtype_name(t), k);
}

/* Input k (named what) has x's dtype. */
static inline ldt_status ldt__ix_same_dtype(const char *op, const ldt__kcall *c, int k,
                                            const char *what) {
    if (c->in[k].dtype == c->in[0].dtype) return LDT_OK;
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s is %s but x is %s (one dtype for both)", op, what,
             ldt_dtype_name(c->in[k].dtype), ldt_dtype_name(c->in[0].dtype));
}

static inline ldt_status ldt__ix_no_bool_accumulate(const char *op, ldt_dtype t) {
    if (t != LDT_BOOL) return LDT_OK;
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: cannot accumulate bool values (cast to u8 or i32 first)",
             op);
}

static inline ldt_status ldt__ix_expect_out(const char *op, const ldt__kcall *c,
                                            const ldt_shape *want, ldt_dtype dt) {
    char b1[192], b2[192];
    if (c->out.dtype != dt)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s, expected %s", op,
                 ldt_dtype_name(c->out.dtype), ldt_dtype_name(dt));
    if (!ldt_shape_equal(want, &c->out.shape))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s, expected %s", op,
                 ldt__ix_fmt(&c->out.shape, b1, sizeof b1), ldt__ix_fmt(want, b2, sizeof b2));
    return LDT_OK;
}

/* attrs.i[0] as a dim of x (negative counts from the end). */
static inline ldt_status ldt__ix_get_dim(const char *op, const ldt__kcall *c, int *dim) {
    char b[192];
    int nd = c->in[0].shape.ndim;
    int64_t d = c->attrs->i[0];
    if (d < -nd || d >= nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: dim %lld is out of range for x %s", op,
                 (long long)d, ldt__ix_fmt(&c->in[0].shape, b, sizeof b));
    *dim = (int)(d < 0 ? d + nd : d);
    return LDT_OK;
}

/* Input k is to be range-checked against n entries, named `what` ("rows", "entries of dim
 * 1") in the message. */
static inline void ldt__ix_range(ldt__ix_plan *p, int k, int64_t n, const char *what, int dim) {
    p->idx_in[p->nidx] = k;
    p->idx_n[p->nidx] = n;
    p->idx_what[p->nidx] = what; /* a string literal, or NULL */
    p->idx_dim[p->nidx] = dim;
    p->nidx++;
}

static inline ldt_status ldt__ix_check_embedding(const char *op, const ldt__kcall *c,
                                                 ldt__ix_plan *p) {
    const ldt__operand *w = &c->in[0], *ix = &c->in[1];
    char b[192];
    LDT_CHECK(ldt__ix_need_index_dtype(op, c, 1));
    if (w->shape.ndim != 2)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: weight is %s, expected [V, H]",
                 ldt__ix_fmt(&w->shape, b, sizeof b));
    if (ix->shape.ndim >= LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: indices %s have more than %d dims",
                 ldt__ix_fmt(&ix->shape, b, sizeof b), LDT_MAX_DIMS - 1);
    ldt_shape want = ix->shape;
    want.dims[want.ndim++] = w->shape.dims[1];
    LDT_CHECK(ldt__ix_expect_out(op, c, &want, w->dtype));
    p->lo = 0;
    p->V = w->shape.dims[0];
    if (c->attrs && c->attrs->i[0] == 1) { /* range mode: indices are into the whole table */
        int64_t lo = c->attrs->i[1], V = c->attrs->i[2];
        if (lo < 0 || V < 0 || lo > V || w->shape.dims[0] > V - lo)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "embedding: range mode with rows [%lld, %lld) of a %lld-row table; expected "
                     "0 <= lo and lo + rows <= V",
                     (long long)lo, (long long)(lo + w->shape.dims[0]), (long long)V);
        p->lo = lo;
        p->V = V;
    }
    ldt__ix_range(p, 1, p->V, "rows", 0);
    return LDT_OK;
}

static inline ldt_status ldt__ix_check_one_hot(const char *op, const ldt__kcall *c,
                                               ldt__ix_plan *p) {
    const ldt__operand *ix = &c->in[0];
    char b[192];
    int64_t C = c->attrs->i[0];
    LDT_CHECK(ldt__ix_need_index_dtype(op, c, 0));
    if (C < 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "one_hot: %lld classes", (long long)C);
    if (ix->shape.ndim >= LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "one_hot: indices %s have more than %d dims",
                 ldt__ix_fmt(&ix->shape, b, sizeof b), LDT_MAX_DIMS - 1);
    ldt_shape want = ix->shape;
    want.dims[want.ndim++] = C;
    /* any output dtype: 0 and 1 written in it (the trace asks for i64) */
    LDT_CHECK(ldt__ix_expect_out(op, c, &want, c->out.dtype));
    p->C = C;
    ldt__ix_range(p, 0, C, "classes", 0);
    return LDT_OK;
}

static inline ldt_status ldt__ix_check_select_add(const char *op, const ldt__kcall *c,
                                                  ldt__ix_plan *p) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    char b1[192], b2[192], what[48];
    int dim = 0, add = c->op == LDT_OP_INDEX_ADD;
    LDT_CHECK(ldt__ix_need_index_dtype(op, c, 1));
    LDT_CHECK(ldt__ix_get_dim(op, c, &dim));
    if (ix->shape.ndim != 1)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: index is %s, expected 1-D", op,
                 ldt__ix_fmt(&ix->shape, b1, sizeof b1));
    ldt_shape want = x->shape;
    want.dims[dim] = ix->shape.dims[0];
    if (add) {
        LDT_CHECK(ldt__ix_same_dtype(op, c, 2, "src"));
        LDT_CHECK(ldt__ix_no_bool_accumulate(op, x->dtype));
        if (!ldt_shape_equal(&c->in[2].shape, &want))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: src is %s, expected %s (x %s with the index's length along dim %d)", op,
                     ldt__ix_fmt(&c->in[2].shape, b1, sizeof b1), ldt__ix_fmt(&want, b2, sizeof b2),
                     ldt__ix_fmt(&x->shape, what, sizeof what), dim);
        want = x->shape;
    }
    LDT_CHECK(ldt__ix_expect_out(op, c, &want, x->dtype));
    p->dim = dim;
    ldt__ix_range(p, 1, x->shape.dims[dim], NULL, dim);
    return LDT_OK;
}

static inline ldt_status ldt__ix_check_gather_scatter(const char *op, const ldt__kcall *c,
                                                      ldt__ix_plan *p) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    const ldt__operand *src = c->op == LDT_OP_GATHER ? NULL : &c->in[2];
    char b1[192], b2[192], what[48];
    int dim = 0;
    LDT_CHECK(ldt__ix_need_index_dtype(op, c, 1));
    LDT_CHECK(ldt__ix_get_dim(op, c, &dim));
    if (src) LDT_CHECK(ldt__ix_same_dtype(op, c, 2, "src"));
    if (c->op == LDT_OP_SCATTER_ADD) LDT_CHECK(ldt__ix_no_bool_accumulate(op, x->dtype));
    if (ix->shape.ndim != x->shape.ndim || (src && src->shape.ndim != x->shape.ndim))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: index is %s and x %s%s%s; expected one ndim", op,
                 ldt__ix_fmt(&ix->shape, b1, sizeof b1), ldt__ix_fmt(&x->shape, b2, sizeof b2),
                 src ? " and src " : "", src ? ldt__ix_fmt(&src->shape, what, sizeof what) : "");
    for (int d = 0; d < x->shape.ndim; d++) {
        if (d != dim && ix->shape.dims[d] > x->shape.dims[d])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: index %s is larger than x %s in dim %d (only dim %d may be larger)", op,
                     ldt__ix_fmt(&ix->shape, b1, sizeof b1), ldt__ix_fmt(&x->shape, b2, sizeof b2),
                     d, dim);
        if (src && ix->shape.dims[d] > src->shape.dims[d])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: index %s is larger than src %s in dim %d", op,
                     ldt__ix_fmt(&ix->shape, b1, sizeof b1), ldt__ix_fmt(&src->shape, b2, sizeof b2),
                     d);
    }
    LDT_CHECK(ldt__ix_expect_out(op, c, src ? &x->shape : &ix->shape, x->dtype));
    p->dim = dim;
    ldt__ix_range(p, 1, x->shape.dims[dim], NULL, dim);
    return LDT_OK;
}

static inline ldt_status ldt__ix_check_index_put(const char *op, const ldt__kcall *c,
                                                 ldt__ix_plan *p) {
    const ldt__operand *x = &c->in[0], *v = &c->in[1];
    char b1[192], b2[192];
    int64_t k = c->attrs->i[1];
    int acc = c->attrs->i[0] != 0, nd = x->shape.ndim;
    if (k < 1 || k > nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: %lld index tensors (attrs.i[1]) for x %s; "
                 "expected 1 to %d", (long long)k, ldt__ix_fmt(&x->shape, b1, sizeof b1), nd);
    if (c->nin != 2 + k)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: %d inputs for %lld index tensors, expected "
                 "x, values and the %lld", c->nin, (long long)k, (long long)k);
    LDT_CHECK(ldt__ix_same_dtype(op, c, 1, "values"));
    if (acc) LDT_CHECK(ldt__ix_no_bool_accumulate(op, x->dtype));
    for (int i = 0; i < k; i++) {
        const ldt__operand *ix = &c->in[2 + i];
        LDT_CHECK(ldt__ix_need_index_dtype(op, c, 2 + i));
        if (ix->shape.ndim != 1 || ix->shape.dims[0] != c->in[2].shape.dims[0])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: index tensor %d is %s, expected 1-D of "
                     "length %lld like index tensor 0", i, ldt__ix_fmt(&ix->shape, b1, sizeof b1),
                     (long long)c->in[2].shape.dims[0]);
    }
    ldt_shape full = {(int)(1 + nd - k), {0}}; /* values broadcast to [L, x.dims[k:]] */
    full.dims[0] = c->in[2].shape.dims[0];
    for (int d = 1; d < full.ndim; d++) full.dims[d] = x->shape.dims[k + d - 1];
    int ok = v->shape.ndim <= full.ndim;
    for (int d = 0; ok && d < v->shape.ndim; d++) {
        int64_t vd = v->shape.dims[d], fd = full.dims[d + full.ndim - v->shape.ndim];
        ok = vd == 1 || vd == fd;
    }
    if (!ok)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: values %s do not broadcast to %s ([L, x's "
                 "dims after the first %lld])", ldt__ix_fmt(&v->shape, b1, sizeof b1),
                 ldt__ix_fmt(&full, b2, sizeof b2), (long long)k);
    LDT_CHECK(ldt__ix_expect_out(op, c, &x->shape, x->dtype));
    p->k = (int)k;
    p->acc = acc;
    for (int i = 0; i < k; i++) ldt__ix_range(p, 2 + i, x->shape.dims[i], NULL, i);
    return LDT_OK;
}

/* The family's checks: arity, attrs, operands, then each op's. */
static inline ldt_status ldt__ix_check(const ldt__kcall *c, ldt__ix_plan *p) {
    const char *op = ldt__builtin_op_name(c->op);
    int nin = 0;
    p->dim = p->k = p->acc = p->nidx = 0;
    p->lo = p->V = p->C = 0;
    switch (c->op) {
    case LDT_OP_EMBEDDING: case LDT_OP_INDEX_SELECT: case LDT_OP_GATHER: nin = 2; break;
    case LDT_OP_ONE_HOT: nin = 1; break;
    case LDT_OP_SCATTER: case LDT_OP_SCATTER_ADD: case LDT_OP_INDEX_ADD: nin = 3; break;
    case LDT_OP_INDEX_PUT: nin = -1; break;
    default: LDT_FAIL(LDT_ERR_INTERNAL, "index kernel: %s is not an indexing op", op);
    }
    if (nin >= 0 ? c->nin != nin : c->nin < 3) {
        if (nin >= 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expects %d input(s), got %d", op, nin, c->nin);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expects x, values and at least one index tensor, "
                 "got %d input(s)", op, c->nin);
    }
    if (!c->in) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: inputs missing", op);
    if (!c->attrs && c->op != LDT_OP_EMBEDDING)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: attrs missing", op);
    for (int k = -1; k < c->nin; k++) LDT_CHECK(ldt__check_operand(op, k < 0 ? &c->out : &c->in[k], k));
    switch (c->op) {
    case LDT_OP_EMBEDDING: return ldt__ix_check_embedding(op, c, p);
    case LDT_OP_ONE_HOT: return ldt__ix_check_one_hot(op, c, p);
    case LDT_OP_INDEX_SELECT:
    case LDT_OP_INDEX_ADD: return ldt__ix_check_select_add(op, c, p);
    case LDT_OP_INDEX_PUT: return ldt__ix_check_index_put(op, c, p);
    default: return ldt__ix_check_gather_scatter(op, c, p); /* gather, scatter, scatter_add */
    }
}

#endif
