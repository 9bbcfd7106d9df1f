/* View CPU kernels: reshape, permute, slice, select, cat, expand, alias, redistribute's copy. */
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "kernels/cpu/kernel.h"

/* ---------------------------------------------------------------------------------------
 * Kernels. Every view but cat is a strided gather: output element (i0..in-1), row-major, is
 * source element sum(i_d * st[d]) from a base offset, with st[d] = 0 on broadcast dims.
 */

/* One row of len elements of es bytes, source stride s elements (0: one value repeated). */
static void copy_row(char *dst, const char *src, int64_t len, int64_t s, size_t es) {
    if (s == 1) {
        memcpy(dst, src, (size_t)len * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < len; i++) ((uint8_t *)dst)[i] = ((const uint8_t *)src)[i * s];
        break;
    case 2:
        for (int64_t i = 0; i < len; i++) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * s];
        break;
    case 4:
        for (int64_t i = 0; i < len; i++) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * s];
        break;
    case 8:
        for (int64_t i = 0; i < len; i++) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i * s];
        break;
    default:
        for (int64_t i = 0; i < len; i++)
            memcpy(dst + (size_t)i * es, src + i * s * (int64_t)es, es);
        break;
    }
}

/* Transposed tile: the output row dim (len, source stride s) and the dim above it (rows,
 * source stride 1, output stride len). Going through 32x32 tiles reads and writes whole cache
 * lines instead of touching one element per line on the strided side. */
static void copy_transposed(char *dst, const char *src, int64_t rows, int64_t len, int64_t s,
                            size_t es) {
    enum { T = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += T)
        for (int64_t c0 = 0; c0 < len; c0 += T) {
            int64_t r1 = r0 + T < rows ? r0 + T : rows, c1 = c0 + T < len ? c0 + T : len;
            for (int64_t r = r0; r < r1; r++)
                copy_row(dst + (r * len + c0) * (int64_t)es, src + (r + c0 * s) * (int64_t)es,
                         c1 - c0, s, es);
        }
}

/* dst[row-major over dims] = src[base + sum(i_d * st[d])]. Size-1 dims are dropped and dims
 * contiguous in the source are merged, so a plain copy is one memcpy and a slice of whole
 * rows is one memcpy per run. */
static void gather(char *dst, const char *src, int nd, const int64_t *dims, const int64_t *st,
                   size_t es) {
    int64_t cd[LDT_MAX_DIMS], cs[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0}, off = 0, rows = 1;
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (dims[d] == 1) continue;
        if (m > 0 && cs[m - 1] == st[d] * dims[d]) {
            cd[m - 1] *= dims[d];
            cs[m - 1] = st[d];
        } else {
            cd[m] = dims[d];
            cs[m] = st[d];
            m++;
        }
    }
    if (m == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t len = cd[m - 1], s = cs[m - 1];
    int outer = m - 1; /* dims walked by the odometer */
    /* A transpose (row strided, the dim above contiguous) goes tile by tile. */
    int tiled = m >= 2 && s != 1 && s != 0 && cs[m - 2] == 1;
    if (tiled) outer = m - 2;
    for (int d = 0; d < outer; d++) rows *= cd[d];
    int64_t block = tiled ? cd[m - 2] * len : len;
    for (int64_t r = 0; r < rows; r++) {
        char *o = dst + r * block * (int64_t)es;
        const char *i = src + off * (int64_t)es;
        if (tiled)
            copy_transposed(o, i, cd[m - 2], len, s, es);
        else
            copy_row(o, i, len, s, es);
        for (int d = outer - 1; d >= 0; d--) {
            off += cs[d];
            if (++idx[d] < cd[d]) break;
            off -= cs[d] * cd[d];
            idx[d] = 0;
        }
    }
}

/* Row-major strides (elements) of a contiguous shape. */
static void strides_of(const ldt_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

/* cat along dim: the output is [outer, sum of d_k, inner]; input k is [outer, d_k, inner],
 * so for every outer index each input contributes one contiguous run of d_k * inner. */
static void cat_run(const ldt__kcall *c, int dim, size_t es) {
    const ldt_shape *os = &c->out.shape;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; d++) outer *= os->dims[d];
    for (int d = dim + 1; d < os->ndim; d++) inner *= os->dims[d];
    int64_t orow = os->dims[dim] * inner * (int64_t)es; /* bytes per outer index in out */
    int64_t at = 0;                                      /* byte offset of input k in a row */
    for (int k = 0; k < c->nin; k++) {
        int64_t run = c->in[k].shape.dims[dim] * inner * (int64_t)es;
        if (run > 0)
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)c->out.data + o * orow + at,
                       (const char *)c->in[k].data + o * run, (size_t)run);
        at += run;
    }
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: checks with messages naming the op, then one of the moves above.
 */
static const char *op_name(int op) { return ldt__builtin_op_name(op); }

static const char *fmt_shape(const ldt_shape *s, char *buf, size_t cap) {
    ldt_shape_format(s, buf, cap);
    return buf;
}

/* Arity, one dtype for all, valid shapes, data present where there are elements. */
static ldt_status check_call(const ldt__kcall *c, const char *op, int nin) {
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

static ldt_status need_attrs(const ldt__kcall *c, const char *op) {
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: attrs missing", op);
    return LDT_OK;
}

/* The output shape a view must have, compared with the one the caller gives. */
static ldt_status expect_out(const char *op, const ldt__kcall *c, const ldt_shape *want) {
    char b1[192], b2[192], b3[192];
    if (ldt_shape_equal(want, &c->out.shape)) return LDT_OK;
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s, expected %s for input %s", op,
             fmt_shape(&c->out.shape, b1, sizeof b1), fmt_shape(want, b2, sizeof b2),
             fmt_shape(&c->in[0].shape, b3, sizeof b3));
}

ldt_status ldt__k_view(const ldt__kcall *c) {
    const char *op = op_name(c->op);
    char b1[192], b2[192];
    int64_t n, nin_el, st[LDT_MAX_DIMS], gst[LDT_MAX_DIMS];
    if (c->op < LDT_OP_RESHAPE || c->op > LDT_OP_REDISTRIBUTE)
        LDT_FAIL(LDT_ERR_INTERNAL, "view kernel: %s is not a view op", op);
    LDT_CHECK(check_call(c, op, c->op == LDT_OP_CAT ? -1 : 1));
    const ldt__operand *x = &c->in[0];
    const ldt_shape *is = &x->shape, *os = &c->out.shape;
    size_t es = ldt_dtype_size(c->out.dtype);
    char *dst = (char *)c->out.data;
    const char *src = (const char *)x->data;
    LDT_CHECK(ldt_shape_numel(os, &n));
    LDT_CHECK(ldt_shape_numel(is, &nin_el));
    strides_of(is, st);

    switch (c->op) {
    case LDT_OP_RESHAPE:
        if (n != nin_el)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "reshape: input %s has %lld elements, output %s has %lld",
                     fmt_shape(is, b1, sizeof b1), (long long)nin_el, fmt_shape(os, b2, sizeof b2),
                     (long long)n);
        if (n > 0 && dst != src) memmove(dst, src, (size_t)n * es);
        return LDT_OK;

    case LDT_OP_ALIAS:
    case LDT_OP_REDISTRIBUTE:
        LDT_CHECK(expect_out(op, c, is));
        if (n > 0 && dst != src) memmove(dst, src, (size_t)n * es);
        return LDT_OK;

    case LDT_OP_PERMUTE: {
        ldt_shape want = {is->ndim, {0}};
        int seen = 0;
        LDT_CHECK(need_attrs(c, op));
        for (int d = 0; d < is->ndim; d++) {
            int64_t p = c->attrs->i[d];
            if (p < 0 || p >= is->ndim || (seen >> p) & 1)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "permute: attrs.i[%d] = %lld: the dims must be a permutation of 0..%d",
                         d, (long long)p, is->ndim - 1);
            seen |= 1 << p;
            want.dims[d] = is->dims[p];
            gst[d] = st[p];
        }
        LDT_CHECK(expect_out(op, c, &want));
        if (n > 0) gather(dst, src, os->ndim, os->dims, gst, es);
        return LDT_OK;
    }

    case LDT_OP_SLICE: {
        LDT_CHECK(need_attrs(c, op));
        int64_t dim = c->attrs->i[0], start = c->attrs->i[1], end = c->attrs->i[2],
                step = c->attrs->i[3];
        if (dim < 0 || dim >= is->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "slice: dim %lld out of range for input %s",
                     (long long)dim, fmt_shape(is, b1, sizeof b1));
        if (step < 1 || start < 0 || start > end || end > is->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "slice: start %lld, end %lld, step %lld on dim %lld of size %lld: expected "
                     "0 <= start <= end <= size and step >= 1",
                     (long long)start, (long long)end, (long long)step, (long long)dim,
                     (long long)is->dims[dim]);
        ldt_shape want = *is;
        want.dims[dim] = (end - start + step - 1) / step;
        LDT_CHECK(expect_out(op, c, &want));
        for (int d = 0; d < is->ndim; d++) gst[d] = d == dim ? st[d] * step : st[d];
        if (n > 0) gather(dst, src + start * st[dim] * (int64_t)es, os->ndim, os->dims, gst, es);
        return LDT_OK;
    }

    case LDT_OP_SELECT: {
        LDT_CHECK(need_attrs(c, op));
        int64_t dim = c->attrs->i[0], index = c->attrs->i[1];
        if (dim < 0 || dim >= is->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "select: dim %lld out of range for input %s",
                     (long long)dim, fmt_shape(is, b1, sizeof b1));
        if (index < 0 || index >= is->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "select: index %lld out of range for dim %lld of "
                     "size %lld", (long long)index, (long long)dim, (long long)is->dims[dim]);
        ldt_shape want = {is->ndim - 1, {0}};
        for (int d = 0, o = 0; d < is->ndim; d++)
            if (d != dim) {
                want.dims[o] = is->dims[d];
                gst[o++] = st[d];
            }
        LDT_CHECK(expect_out(op, c, &want));
        if (n > 0) gather(dst, src + index * st[dim] * (int64_t)es, os->ndim, os->dims, gst, es);
        return LDT_OK;
    }

    case LDT_OP_EXPAND: {
        int nd = os->ndim;
        if (is->ndim > nd)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "expand: input %s has more dims than the output %s",
                     fmt_shape(is, b1, sizeof b1), fmt_shape(os, b2, sizeof b2));
        for (int d = 0; d < nd; d++) {
            int sd = d - (nd - is->ndim);
            int64_t sz = sd >= 0 ? is->dims[sd] : 1;
            if (sz != os->dims[d] && sz != 1)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "expand: input %s does not broadcast to %s (dim %d is %lld, not 1 or "
                         "%lld)",
                         fmt_shape(is, b1, sizeof b1), fmt_shape(os, b2, sizeof b2), sd,
                         (long long)sz, (long long)os->dims[d]);
            gst[d] = sz == 1 ? 0 : st[sd];
        }
        if (n > 0) gather(dst, src, nd, os->dims, gst, es);
        return LDT_OK;
    }

    default: { /* LDT_OP_CAT */
        LDT_CHECK(need_attrs(c, op));
        int64_t dim = c->attrs->i[0], total = 0;
        if (dim < 0) dim += os->ndim; /* accept -1 as torch.cat does */
        if (dim < 0 || dim >= os->ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cat: dim %lld out of range for output %s",
                     (long long)c->attrs->i[0], fmt_shape(os, b1, sizeof b1));
        for (int k = 0; k < c->nin; k++) {
            const ldt_shape *s = &c->in[k].shape;
            int ok = s->ndim == os->ndim;
            for (int d = 0; d < os->ndim && ok; d++) ok = d == dim || s->dims[d] == os->dims[d];
            if (!ok)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "cat: input %d is %s; along dim %lld it must match the output %s in "
                         "every other dim",
                         k, fmt_shape(s, b1, sizeof b1), (long long)dim,
                         fmt_shape(os, b2, sizeof b2));
            total += s->dims[dim];
        }
        if (total != os->dims[dim])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cat: inputs sum to %lld along dim %lld but the output %s has %lld",
                     (long long)total, (long long)dim, fmt_shape(os, b1, sizeof b1),
                     (long long)os->dims[dim]);
        if (n > 0) cat_run(c, (int)dim, es);
        return LDT_OK;
    }
    }
}
