/* CPU kernels of the indexing ops: embedding, one_hot, index_select, gather, scatter,
 * scatter_add, index_add and index_put. Indices (i32 or i64) are all checked before anything
 * is written; negative ones count from the end. Copies move bytes, so every dtype works;
 * accumulation adds in the dtype (halves through f32, integers wrapping). */
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/kernel.h"

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

static int64_t raw_index(const ldt__operand *ix, int64_t i) {
    return ix->dtype == LDT_I32 ? ((const int32_t *)ix->data)[i] : ((const int64_t *)ix->data)[i];
}

/* Index i of ix normalised against n, or -1 (with the error set) when out of range. */
static int64_t index_at(const char *op, const ldt__operand *ix, int64_t i, int64_t n,
                        const char *what) {
    int64_t v = raw_index(ix, i);
    if (v < -n || v >= n) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT,
                   "%s: index %lld at position %lld is out of range for %lld %s", op,
                   (long long)v, (long long)i, (long long)n, what);
        return -1;
    }
    return v < 0 ? v + n : v;
}

static ldt_status check_all(const char *op, const ldt__operand *ix, int64_t n, const char *what) {
    int64_t m = numel_of(&ix->shape);
    for (int64_t i = 0; i < m; i++)
        if (index_at(op, ix, i, n, what) < 0) return ldt__trace(LDT_ERR_INVALID_ARGUMENT, __FILE__, __LINE__);
    return LDT_OK;
}

/* dst[i] += src[j] for one element of dtype t. */
static void add_elem(ldt_dtype t, void *dst, int64_t i, const void *src, int64_t j) {
    switch (t) {
    case LDT_F32: ((float *)dst)[i] += ((const float *)src)[j]; break;
    case LDT_F64: ((double *)dst)[i] += ((const double *)src)[j]; break;
    case LDT_F16:
        ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__f16_to_f32(((uint16_t *)dst)[i]) +
                                               ldt__f16_to_f32(((const uint16_t *)src)[j]));
        break;
    case LDT_BF16:
        ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__bf16_to_f32(((uint16_t *)dst)[i]) +
                                                ldt__bf16_to_f32(((const uint16_t *)src)[j]));
        break;
    case LDT_I32:
        ((int32_t *)dst)[i] = (int32_t)((uint32_t)((int32_t *)dst)[i] + (uint32_t)((const int32_t *)src)[j]);
        break;
    case LDT_I64:
        ((int64_t *)dst)[i] = (int64_t)((uint64_t)((int64_t *)dst)[i] + (uint64_t)((const int64_t *)src)[j]);
        break;
    case LDT_U8: ((uint8_t *)dst)[i] = (uint8_t)(((uint8_t *)dst)[i] + ((const uint8_t *)src)[j]); break;
    default: break;
    }
}

/* Row-major strides (in elements) of a shape. */
static void strides_of(const ldt_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

/* ---- kernels -------------------------------------------------------------------------- */

static ldt_status embedding(const ldt__kcall *c) {
    const ldt__operand *w = &c->in[0], *ix = &c->in[1];
    int64_t V = w->shape.dims[0], row = w->shape.dims[1] * (int64_t)ldt_dtype_size(w->dtype);
    int64_t n = numel_of(&ix->shape);
    LDT_CHECK(check_all("embedding", ix, V, "rows"));
    for (int64_t i = 0; i < n; i++)
        memcpy((char *)c->out.data + i * row, (const char *)w->data + index_at("embedding", ix, i, V, "rows") * row,
               (size_t)row);
    return LDT_OK;
}

static ldt_status one_hot(const ldt__kcall *c) {
    const ldt__operand *ix = &c->in[0];
    int64_t C = c->attrs->i[0], n = numel_of(&ix->shape);
    size_t es = ldt_dtype_size(c->out.dtype);
    LDT_CHECK(check_all("one_hot", ix, C, "classes"));
    memset(c->out.data, 0, (size_t)(n * C) * es);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = i * C + index_at("one_hot", ix, i, C, "classes");
        switch (c->out.dtype) {
        case LDT_I64: ((int64_t *)c->out.data)[k] = 1; break;
        case LDT_I32: ((int32_t *)c->out.data)[k] = 1; break;
        case LDT_F32: ((float *)c->out.data)[k] = 1; break;
        case LDT_F64: ((double *)c->out.data)[k] = 1; break;
        case LDT_F16: ((uint16_t *)c->out.data)[k] = 0x3c00; break;
        case LDT_BF16: ((uint16_t *)c->out.data)[k] = 0x3f80; break;
        default: ((uint8_t *)c->out.data)[k] = 1; break;
        }
    }
    return LDT_OK;
}

/* index_select and index_add work on [outer, n, inner] views of x along dim. */
static ldt_status index_select(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    int dim = (int)c->attrs->i[0];
    int64_t outer = 1, inner = 1, n = x->shape.dims[dim], m = ix->shape.dims[0];
    size_t es = ldt_dtype_size(x->dtype);
    for (int d = 0; d < dim; d++) outer *= x->shape.dims[d];
    for (int d = dim + 1; d < x->shape.ndim; d++) inner *= x->shape.dims[d];
    LDT_CHECK(check_all("index_select", ix, n, "entries along the dim"));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++)
            memcpy((char *)c->out.data + ((o * m + j) * inner) * (int64_t)es,
                   (const char *)x->data +
                       ((o * n + index_at("index_select", ix, j, n, "")) * inner) * (int64_t)es,
                   (size_t)inner * es);
    return LDT_OK;
}

static ldt_status index_add(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1], *src = &c->in[2];
    int dim = (int)c->attrs->i[0];
    int64_t outer = 1, inner = 1, n = x->shape.dims[dim], m = ix->shape.dims[0];
    size_t es = ldt_dtype_size(x->dtype);
    for (int d = 0; d < dim; d++) outer *= x->shape.dims[d];
    for (int d = dim + 1; d < x->shape.ndim; d++) inner *= x->shape.dims[d];
    LDT_CHECK(check_all("index_add", ix, n, "entries along the dim"));
    memcpy(c->out.data, x->data, (size_t)numel_of(&x->shape) * es);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++) {
            int64_t t = index_at("index_add", ix, j, n, "");
            for (int64_t i = 0; i < inner; i++)
                add_elem(x->dtype, c->out.data, (o * n + t) * inner + i, src->data, (o * m + j) * inner + i);
        }
    return LDT_OK;
}

/* gather, scatter, scatter_add: walk every position p of index; the x position is p with
 * the dim coordinate replaced by index[p]. */
static ldt_status gather_scatter(const ldt__kcall *c, const char *op) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    const ldt__operand *src = c->op == LDT_OP_GATHER ? NULL : &c->in[2];
    int dim = (int)c->attrs->i[0], nd = x->shape.ndim;
    int64_t xs[LDT_MAX_DIMS], ss[LDT_MAX_DIMS], p[LDT_MAX_DIMS] = {0}, n = numel_of(&ix->shape);
    size_t es = ldt_dtype_size(x->dtype);
    LDT_CHECK(check_all(op, ix, x->shape.dims[dim], "entries along the dim"));
    strides_of(&x->shape, xs);
    if (src) {
        strides_of(&src->shape, ss);
        memcpy(c->out.data, x->data, (size_t)numel_of(&x->shape) * es);
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t xo = 0, so = 0, t = index_at(op, ix, k, x->shape.dims[dim], "");
        for (int d = 0; d < nd; d++) {
            xo += (d == dim ? t : p[d]) * xs[d];
            if (src) so += p[d] * ss[d];
        }
        if (!src)
            memcpy((char *)c->out.data + k * (int64_t)es, (const char *)x->data + xo * (int64_t)es, es);
        else if (c->op == LDT_OP_SCATTER)
            memcpy((char *)c->out.data + xo * (int64_t)es, (const char *)src->data + so * (int64_t)es, es);
        else
            add_elem(x->dtype, c->out.data, xo, src->data, so);
        for (int d = nd - 1; d >= 0; d--) {
            if (++p[d] < ix->shape.dims[d]) break;
            p[d] = 0;
        }
    }
    return LDT_OK;
}

/* index_put: inputs x, values, idx_0..idx_{k-1}; each j addresses the block
 * x[idx_0[j], ..., idx_{k-1}[j], ...] of `blk` elements; values broadcast to [L, block]. */
static ldt_status index_put(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0], *v = &c->in[1];
    int acc = (int)c->attrs->i[0], k = (int)c->attrs->i[1], nd = x->shape.ndim;
    int64_t L = k > 0 ? c->in[2].shape.dims[0] : 0, blk = 1, xs[LDT_MAX_DIMS];
    int64_t vdims[LDT_MAX_DIMS + 1], vst[LDT_MAX_DIMS + 1], vnd = 1 + nd - k;
    size_t es = ldt_dtype_size(x->dtype);
    if (c->nin != 2 + k) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: %d inputs for %d indices", c->nin, k);
    for (int i = 0; i < k; i++) LDT_CHECK(check_all("index_put", &c->in[2 + i], x->shape.dims[i], "entries"));
    for (int d = k; d < nd; d++) blk *= x->shape.dims[d];
    strides_of(&x->shape, xs);
    /* the values' strides over [L, block dims], 0 where values broadcast */
    {
        int64_t acc_st = 1;
        for (int d = (int)vnd - 1; d >= 0; d--) {
            int vd = v->shape.ndim - (int)vnd + d;
            int64_t want = d == 0 ? L : x->shape.dims[k + d - 1];
            vdims[d] = want;
            if (vd >= 0 && v->shape.dims[vd] != 1) {
                vst[d] = acc_st;
                acc_st *= v->shape.dims[vd];
            } else {
                vst[d] = 0;
                if (vd >= 0) acc_st *= 1;
            }
        }
    }
    memcpy(c->out.data, x->data, (size_t)numel_of(&x->shape) * es);
    for (int64_t j = 0; j < L; j++) {
        int64_t base = 0, q[LDT_MAX_DIMS + 1] = {0};
        for (int i = 0; i < k; i++) base += index_at("index_put", &c->in[2 + i], j, x->shape.dims[i], "") * xs[i];
        q[0] = j;
        for (int64_t e = 0; e < blk; e++) {
            int64_t vo = 0;
            for (int d = 0; d < vnd; d++) vo += q[d] * vst[d];
            if (acc)
                add_elem(x->dtype, c->out.data, base + e, v->data, vo);
            else
                memcpy((char *)c->out.data + (base + e) * (int64_t)es, (const char *)v->data + vo * (int64_t)es, es);
            for (int d = (int)vnd - 1; d >= 1; d--) {
                if (++q[d] < vdims[d]) break;
                q[d] = 0;
            }
        }
    }
    return LDT_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

ldt_status ldt__k_index(const ldt__kcall *c) {
    const char *op = ldt__builtin_op_name(c->op);
    int ixpos = c->op == LDT_OP_ONE_HOT ? 0 : c->op == LDT_OP_INDEX_PUT ? 2 : 1;
    int accumulate = c->op == LDT_OP_SCATTER_ADD || c->op == LDT_OP_INDEX_ADD ||
                     (c->op == LDT_OP_INDEX_PUT && c->attrs->i[0]);
    if (c->nin <= ixpos) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs", op, c->nin);
    for (int i = ixpos; i < (c->op == LDT_OP_INDEX_PUT ? c->nin : ixpos + 1); i++)
        if (c->in[i].dtype != LDT_I32 && c->in[i].dtype != LDT_I64)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: indices are %s, expected i32 or i64", op,
                     ldt_dtype_name(c->in[i].dtype));
    if (accumulate && c->in[0].dtype == LDT_BOOL)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: bool tensors cannot accumulate", op);
    if (c->op == LDT_OP_EMBEDDING && c->in[0].shape.ndim != 2)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: weight has %d dims, expected [V, H]",
                 c->in[0].shape.ndim);
    if (c->op != LDT_OP_EMBEDDING && c->op != LDT_OP_ONE_HOT && c->op != LDT_OP_INDEX_PUT &&
        (c->attrs->i[0] < 0 || c->attrs->i[0] >= c->in[0].shape.ndim))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: dim %lld is out of range for %d dims", op,
                 (long long)c->attrs->i[0], c->in[0].shape.ndim);
    if ((c->op == LDT_OP_INDEX_SELECT || c->op == LDT_OP_INDEX_ADD) && c->in[1].shape.ndim != 1)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: the index has %d dims, expected 1", op,
                 c->in[1].shape.ndim);
    switch (c->op) {
    case LDT_OP_EMBEDDING: return embedding(c);
    case LDT_OP_ONE_HOT: return one_hot(c);
    case LDT_OP_INDEX_SELECT: return index_select(c);
    case LDT_OP_INDEX_ADD: return index_add(c);
    case LDT_OP_GATHER:
    case LDT_OP_SCATTER:
    case LDT_OP_SCATTER_ADD: return gather_scatter(c, op);
    case LDT_OP_INDEX_PUT: return index_put(c);
    default: LDT_FAIL(LDT_ERR_INTERNAL, "index kernels: op %s is not theirs", op);
    }
}
