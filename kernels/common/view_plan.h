/* Host-side checks and the plan of the view ops (reshape, permute, slice, select, cat,
 * expand, alias, redistribute's copy), as inline functions for CPU and CUDA
 * (kernels/cpu/view.c, kernels/cuda/view.cu), so both accept the same calls, fail with the
 * same messages and move the same elements.
 *
 *   ldt__view_plan p;
 *   LDT_CHECK(ldt__view_plan_make(c, &p));
 *   // p.kind: COPY n elements; GATHER out[i0..] = in[base + sum(i_d * st[d])]; CAT on p.dim
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_VIEW_PLAN_H
#define LDT_KERNELS_COMMON_VIEW_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

enum {
    LDT__VIEW_COPY = 0, /* the output is the input's elements in order (reshape, alias) */
    LDT__VIEW_GATHER,   /* a strided gather (permute, slice, select, expand) */
    LDT__VIEW_CAT,      /* inputs side by side along dim */
};

/* Every view but cat is a strided gather: output element (i0..in-1), row-major, is source
 * element base + sum(i_d * st[d]), with st[d] = 0 on broadcast dims. */
typedef struct ldt__view_plan {
    int kind;
    int64_t n;  /* output elements */
    size_t es;  /* bytes per element */
    int nd;     /* gather: the output's dims and the source strides (elements) */
    int64_t dims[LDT_MAX_DIMS], st[LDT_MAX_DIMS];
    int64_t base; /* gather: first source element */
    int dim;      /* cat: the dim, normalised */
} ldt__view_plan;

static inline const char *ldt__view_fmt(const ldt_shape *s, char *buf, size_t cap) {
    ldt_shape_format(s, buf, cap);
    return buf;
}

/* Arity, one dtype for all, valid shapes, data present where there are elements. */
static inline ldt_status ldt__view_check_call(const ldt__kcall *c, const char *op, int nin) {
    if (nin >= 0 ? c->nin != nin : c->nin < 1) {
        if (nin >= 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expects %d input(s), got %d", op, nin, c->nin);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expects at least one input, got %d", op, c->nin);
    }
    if (!c->in) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: inputs missing", op);
    if (ldt_dtype_size(c->out.dtype) == 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output has an invalid dtype (%d)", op,
                 (int)c->out.dtype);
    for (int k = -1; k < c->nin; k++) {
        const ldt__operand *x = k < 0 ? &c->out : &c->in[k];
        if (x->dtype != c->out.dtype)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: input %d is %s but the output is %s (views "
                     "keep the dtype; cast first)", op, k, ldt_dtype_name(x->dtype),
                     ldt_dtype_name(c->out.dtype));
        LDT_CHECK(ldt__check_operand(op, x, k));
    }
    return LDT_OK;
}

static inline ldt_status ldt__view_need_attrs(const ldt__kcall *c, const char *op) {
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: attrs missing", op);
    return LDT_OK;
}

/* The output shape a view must have, compared with the one the caller gives. */
static inline ldt_status ldt__view_expect_out(const char *op, const ldt__kcall *c,
                                              const ldt_shape *want) {
    char b1[192], b2[192], b3[192];
    if (ldt_shape_equal(want, &c->out.shape)) return LDT_OK;
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s, expected %s for input %s", op,
             ldt__view_fmt(&c->out.shape, b1, sizeof b1), ldt__view_fmt(want, b2, sizeof b2),
             ldt__view_fmt(&c->in[0].shape, b3, sizeof b3));
}

static inline ldt_status ldt__view_plan_make(const ldt__kcall *c, ldt__view_plan *p) {
    const char *op = ldt__builtin_op_name(c->op);
    char b1[192], b2[192];
    int64_t n, nin_el, st[LDT_MAX_DIMS];
    if (c->op < LDT_OP_RESHAPE || c->op > LDT_OP_REDISTRIBUTE)
        LDT_FAIL(LDT_ERR_INTERNAL, "view kernel: %s is not a view op", op);
    LDT_CHECK(ldt__view_check_call(c, op, c->op == LDT_OP_CAT ? -1 : 1));
    const ldt__operand *x = &c->in[0];
    const ldt_shape *is = &x->shape, *os = &c->out.shape;
    LDT_CHECK(ldt_shape_numel(os, &n));
    LDT_CHECK(ldt_shape_numel(is, &nin_el));
    p->kind = LDT__VIEW_GATHER;
    p->n = n;
    p->es = ldt_dtype_size(c->out.dtype);
    p->nd = os->ndim;
    p->base = 0;
    p->dim = 0;
    for (int d = 0; d < os->ndim; d++) p->dims[d] = os->dims[d];
    {
        int64_t acc = 1; /* row-major strides (elements) of the input */
        for (int d = is->ndim - 1; d >= 0; d--) {
            st[d] = acc;
            acc *= is->dims[d];
        }
    }

    switch (c->op) {
    case LDT_OP_RESHAPE:
        if (n != nin_el)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "reshape: input %s has %lld elements, output %s has %lld",
                     ldt__view_fmt(is, b1, sizeof b1), (long long)nin_el,
                     ldt__view_fmt(os, b2, sizeof b2), (long long)n);
        p->kind = LDT__VIEW_COPY;
        return LDT_OK;

    case LDT_OP_ALIAS:
    case LDT_OP_REDISTRIBUTE:
        LDT_CHECK(ldt__view_expect_out(op, c, is));
        p->kind = LDT__VIEW_COPY;
        return LDT_OK;

    case LDT_OP_PERMUTE: {
        ldt_shape want = {is->ndim, {0}};
        int seen = 0;
        LDT_CHECK(ldt__view_need_attrs(c, op));
        for (int d = 0; d < is->ndim; d++) {
            int64_t q = c->attrs->i[d];
            if (q < 0 || q >= is->ndim || (seen >> q) & 1)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "permute: attrs.i[%d] = %lld: the dims must be a permutation of 0..%d",
                         d, (long long)q, is->ndim - 1);
            seen |= 1 << q;
            want.dims[d] = is->dims[q];
            p->st[d] = st[q];
        }
        LDT_CHECK(ldt__view_expect_out(op, c, &want));
        return LDT_OK;
    }

    case LDT_OP_SLICE: {
        LDT_CHECK(ldt__view_need_attrs(c, op));
        int64_t dim = c->attrs->i[0], start = c->attrs->i[1], end = c->attrs->i[2],
                step = c->attrs->i[3];
        if (dim < 0 || dim >= is->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "slice: dim %lld out of range for input %s",
                     (long long)dim, ldt__view_fmt(is, b1, sizeof b1));
        if (step < 1 || start < 0 || start > end || end > is->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "slice: start %lld, end %lld, step %lld on dim %lld of size %lld: expected "
                     "0 <= start <= end <= size and step >= 1",
                     (long long)start, (long long)end, (long long)step, (long long)dim,
                     (long long)is->dims[dim]);
        ldt_shape want = *is;
        want.dims[dim] = (end - start + step - 1) / step;
        LDT_CHECK(ldt__view_expect_out(op, c, &want));
        for (int d = 0; d < is->ndim; d++) p->st[d] = d == dim ? st[d] * step : st[d];
        p->base = start * st[dim];
        return LDT_OK;
    }

    case LDT_OP_SELECT: {
        LDT_CHECK(ldt__view_need_attrs(c, op));
        int64_t dim = c->attrs->i[0], index = c->attrs->i[1];
        if (dim < 0 || dim >= is->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "select: dim %lld out of range for input %s",
                     (long long)dim, ldt__view_fmt(is, b1, sizeof b1));
        if (index < 0 || index >= is->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "select: index %lld out of range for dim %lld of "
                     "size %lld", (long long)index, (long long)dim, (long long)is->dims[dim]);
        ldt_shape want = {is->ndim - 1, {0}};
        for (int d = 0, o = 0; d < is->ndim; d++)
            if (d != dim) {
                want.dims[o] = is->dims[d];
                p->st[o++] = st[d];
            }
        LDT_CHECK(ldt__view_expect_out(op, c, &want));
        p->base = index * st[dim];
        return LDT_OK;
    }

    case LDT_OP_EXPAND: {
        int nd = os->ndim;
        if (is->ndim > nd)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "expand: input %s has more dims than the output %s",
                     ldt__view_fmt(is, b1, sizeof b1), ldt__view_fmt(os, b2, sizeof b2));
        for (int d = 0; d < nd; d++) {
            int sd = d - (nd - is->ndim);
            int64_t sz = sd >= 0 ? is->dims[sd] : 1;
            if (sz != os->dims[d] && sz != 1)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "expand: input %s does not broadcast to %s (dim %d is %lld, not 1 or "
                         "%lld)",
                         ldt__view_fmt(is, b1, sizeof b1), ldt__view_fmt(os, b2, sizeof b2), sd,
                         (long long)sz, (long long)os->dims[d]);
            p->st[d] = sz == 1 ? 0 : st[sd];
        }
        return LDT_OK;
    }

    default: { /* LDT_OP_CAT */
        LDT_CHECK(ldt__view_need_attrs(c, op));
        int64_t dim = c->attrs->i[0], total = 0;
        if (dim < 0) dim += os->ndim; /* accept -1 as torch.cat does */
        if (dim < 0 || dim >= os->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cat: dim %lld out of range for output %s",
                     (long long)c->attrs->i[0], ldt__view_fmt(os, b1, sizeof b1));
        for (int k = 0; k < c->nin; k++) {
            const ldt_shape *s = &c->in[k].shape;
            int ok = s->ndim == os->ndim;
            for (int d = 0; d < os->ndim && ok; d++) ok = d == dim || s->dims[d] == os->dims[d];
            if (!ok)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "cat: input %d is %s; along dim %lld it must match the output %s in "
                         "every other dim",
                         k, ldt__view_fmt(s, b1, sizeof b1), (long long)dim,
                         ldt__view_fmt(os, b2, sizeof b2));
            total += s->dims[dim];
        }
        if (total != os->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cat: inputs sum to %lld along dim %lld but the output %s has %lld",
                     (long long)total, (long long)dim, ldt__view_fmt(os, b1, sizeof b1),
                     (long long)os->dims[dim]);
        p->kind = LDT__VIEW_CAT;
        p->dim = (int)dim;
        return LDT_OK;
    }
    }
}

/* cat along dim: the output is [outer, sum of d_k, inner]; input k is [outer, d_k, inner],
 * so for every outer index each input contributes one contiguous run of d_k * inner. */
static inline void ldt__view_cat_geom(const ldt_shape *os, int dim, int64_t *outer,
                                      int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= os->dims[d];
    for (int d = dim + 1; d < os->ndim; d++) *inner *= os->dims[d];
}

#endif
