/* Indexing CPU kernels: embedding, one_hot, index_select, gather, scatter(_add), index_add, index_put. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/common/index_plan.h"
#include "kernels/cpu/kernel.h"

/* Conventions shared by every op here (the contract is in core/ops.h):
 * - Index tensors are i32 or i64. An index v into a dim of n entries is valid when
 *   -n <= v < n; a negative one counts from the end (v + n). torch rejects negatives in
 *   gather and scatter; here every op accepts them, like index_select.
 * - Every index is checked before anything is written: on error the output is untouched.
 * - Copies move bytes, so every dtype works and NaN payloads survive.
 * - Accumulation (scatter_add, index_add, index_put with accumulate) adds in the element's
 *   dtype: f16 and bf16 widen to f32 and round back after every addition (as torch's CPU
 *   kernels do), integers wrap (unsigned arithmetic), bool is unsupported.
 * - Duplicate indices: without accumulate the last write in row-major order of the index
 *   (index_put: the last j) wins, where torch leaves it undefined; with accumulate every
 *   one adds, in that order. */

/* ---------------------------------------------------------------------------------------
 * Element moves.
 */

static inline int64_t raw_index(const ldt__operand *ix, int64_t i) {
    return ix->dtype == LDT_I32 ? (int64_t)((const int32_t *)ix->data)[i]
                                : ((const int64_t *)ix->data)[i];
}

/* Index i of ix into n entries, already range-checked by check_range. */
static inline int64_t index_at(const ldt__operand *ix, int64_t i, int64_t n) {
    int64_t v = raw_index(ix, i);
    return v < 0 ? v + n : v;
}

static inline void copy_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* dst[0..n) = src[0], src[s], src[2s], ... of es-byte elements; s = 0 repeats one. */
static void copy_run(char *dst, const char *src, int64_t n, int64_t s, size_t es) {
    if (n <= 0) return;
    if (s == 1) {
        ldt__copy(dst, src, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++) copy_elem(dst + i * (int64_t)es, src + i * s * (int64_t)es, es);
}

/* dst[0..n) += src[0], src[s], ... in dtype t (never bool: callers refuse it). Halves go
 * through f32 and round after each addition; integers wrap through unsigned types. */
static void add_run(ldt_dtype t, char *dst, const char *src, int64_t n, int64_t s) {
#define LDT__ADD_LOOP(T, EXPR)                                                              \
    do {                                                                                    \
        T *d_ = (T *)(void *)dst;                                                           \
        const T *a_ = (const T *)(const void *)src;                                         \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T a = a_[i * s], b = d_[i];                                                     \
            d_[i] = (EXPR);                                                                 \
        }                                                                                   \
    } while (0)
    switch (t) {
    case LDT_F32: LDT__ADD_LOOP(float, b + a); break;
    case LDT_F64: LDT__ADD_LOOP(double, b + a); break;
    case LDT_F16:
        LDT__ADD_LOOP(uint16_t, ldt__f32_to_f16(ldt__f16_to_f32(b) + ldt__f16_to_f32(a)));
        break;
    case LDT_BF16:
        LDT__ADD_LOOP(uint16_t, ldt__f32_to_bf16(ldt__bf16_to_f32(b) + ldt__bf16_to_f32(a)));
        break;
    case LDT_I32: LDT__ADD_LOOP(int32_t, (int32_t)((uint32_t)b + (uint32_t)a)); break;
    case LDT_I64: LDT__ADD_LOOP(int64_t, (int64_t)((uint64_t)b + (uint64_t)a)); break;
    case LDT_U8: LDT__ADD_LOOP(uint8_t, (uint8_t)(b + a)); break;
    default: break;
    }
#undef LDT__ADD_LOOP
}

static void move_run(ldt_dtype t, int acc, char *dst, const char *src, int64_t n, int64_t s) {
    if (acc)
        add_run(t, dst, src, n, s);
    else
        copy_run(dst, src, n, s, ldt_dtype_size(t));
}

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* Row-major strides (elements) of a contiguous shape. */
static void strides_of(const ldt_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dims[d];
    }
}

/* x viewed as [outer, x.dims[dim], inner] around dim. */
static void split_at(const ldt_shape *s, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= s->dims[d];
    for (int d = dim + 1; d < s->ndim; d++) *inner *= s->dims[d];
}

/* The output starts as a copy of x (scatter, index_add, index_put); in place is fine. */
static void copy_x(const ldt__kcall *c) {
    size_t bytes = (size_t)numel_of(&c->in[0].shape) * ldt_dtype_size(c->in[0].dtype);
    if (bytes > 0 && c->out.data != c->in[0].data) ldt__move(c->out.data, c->in[0].data, bytes);
}

/* ---------------------------------------------------------------------------------------
 * Kernels: the call has been checked (dispatch below), indices included.
 */

/* weight [V, H], ix [...] -> out [..., H]: one row copy per index. In range mode (attrs
 * i = {1, lo, V}: vocab-parallel) the weight holds rows [lo, lo + len) of a [V, H] table:
 * indices there copy their row, all others give a zero row (other ranks hold it). */
static void embedding(const ldt__kcall *c) {
    const ldt__operand *w = &c->in[0], *ix = &c->in[1];
    int range = c->attrs && c->attrs->i[0] == 1;
    int64_t len = w->shape.dims[0];
    int64_t lo = range ? c->attrs->i[1] : 0, V = range ? c->attrs->i[2] : len;
    int64_t row = w->shape.dims[1] * (int64_t)ldt_dtype_size(w->dtype);
    int64_t n = numel_of(&ix->shape);
    if (row == 0) return;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = index_at(ix, i, V) - lo;
        char *dst = (char *)c->out.data + i * row;
        if (r >= 0 && r < len)
            ldt__copy(dst, (const char *)w->data + r * row, (size_t)row);
        else
            memset(dst, 0, (size_t)row); /* all-zero bytes are 0 in every dtype */
    }
}

/* ix [...] -> out [..., C]: zeros, and a one in the out dtype at each index. */
static void one_hot(const ldt__kcall *c, int64_t C) {
    const ldt__operand *ix = &c->in[0];
    int64_t n = numel_of(&ix->shape);
    size_t es = ldt_dtype_size(c->out.dtype);
    char one[8];
    float f1 = 1.0f;
    double d1 = 1.0;
    int64_t i64 = 1;
    int32_t i32 = 1;
    uint16_t h = 0x3c00u, bh = 0x3f80u; /* 1.0 in f16, bf16 */
    switch (c->out.dtype) {
    case LDT_F32: memcpy(one, &f1, 4); break;
    case LDT_F64: memcpy(one, &d1, 8); break;
    case LDT_F16: memcpy(one, &h, 2); break;
    case LDT_BF16: memcpy(one, &bh, 2); break;
    case LDT_I32: memcpy(one, &i32, 4); break;
    case LDT_I64: memcpy(one, &i64, 8); break;
    default: one[0] = 1; break; /* u8, bool */
    }
    if (n * C == 0) return;
    memset(c->out.data, 0, (size_t)(n * C) * es);
    for (int64_t i = 0; i < n; i++)
        copy_elem((char *)c->out.data + (i * C + index_at(ix, i, C)) * (int64_t)es, one, es);
}

/* x [outer, n, inner], ix [L] -> out [outer, L, inner]. */
static void index_select(const ldt__kcall *c, int dim) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    int64_t outer, inner, n = x->shape.dims[dim], L = ix->shape.dims[0];
    int64_t es = (int64_t)ldt_dtype_size(x->dtype);
    split_at(&x->shape, dim, &outer, &inner);
    if (inner == 0) return;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < L; j++)
            ldt__copy((char *)c->out.data + (o * L + j) * inner * es,
                   (const char *)x->data + (o * n + index_at(ix, j, n)) * inner * es,
                   (size_t)(inner * es));
}

/* out = x; out [outer, n, inner] at [o, ix[j], :] += src [outer, L, inner] at [o, j, :]. */
static void index_add(const ldt__kcall *c, int dim) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1], *src = &c->in[2];
    int64_t outer, inner, n = x->shape.dims[dim], L = ix->shape.dims[0];
    int64_t es = (int64_t)ldt_dtype_size(x->dtype);
    split_at(&x->shape, dim, &outer, &inner);
    copy_x(c);
    if (inner == 0) return;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < L; j++)
            add_run(x->dtype, (char *)c->out.data + (o * n + index_at(ix, j, n)) * inner * es,
                    (const char *)src->data + (o * L + j) * inner * es, inner, 1);
}

/* gather, scatter, scatter_add: position p of the index (row-major) pairs x's position p
 * with its dim coordinate replaced by index[p], and src's position p. gather writes out[p],
 * scatter out[x position]. The last index dim is the inner loop; an odometer walks the rest. */
static void gather_scatter(const ldt__kcall *c, int dim) {
    const ldt__operand *x = &c->in[0], *ix = &c->in[1];
    const ldt__operand *src = c->op == LDT_OP_GATHER ? NULL : &c->in[2];
    int nd = x->shape.ndim, last = nd - 1, acc = c->op == LDT_OP_SCATTER_ADD;
    int64_t xs[LDT_MAX_DIMS], ss[LDT_MAX_DIMS] = {0}, p[LDT_MAX_DIMS] = {0};
    int64_t n = x->shape.dims[dim], total = numel_of(&ix->shape), len = ix->shape.dims[last];
    int64_t es = (int64_t)ldt_dtype_size(x->dtype), xbase = 0, sbase = 0, k = 0;
    const char *xd = (const char *)x->data;
    char *od = (char *)c->out.data;
    strides_of(&x->shape, xs);
    int64_t xdim = xs[dim];
    xs[dim] = 0; /* x's offset without the dim coordinate; the index supplies it */
    if (src) {
        strides_of(&src->shape, ss);
        copy_x(c);
    }
    if (total == 0) return;
    for (;;) {
        for (int64_t j = 0; j < len; j++, k++) {
            int64_t xo = (xbase + j * xs[last] + index_at(ix, k, n) * xdim) * es;
            if (!src)
                copy_elem(od + k * es, xd + xo, (size_t)es);
            else
                move_run(x->dtype, acc, od + xo, (const char *)src->data + (sbase + j * ss[last]) * es,
                         1, 0);
        }
        int d = last - 1;
        for (; d >= 0; d--) { /* odometer over the index's outer dims */
            xbase += xs[d];
            sbase += ss[d];
            if (++p[d] < ix->shape.dims[d]) break;
            xbase -= xs[d] * p[d];
            sbase -= ss[d] * p[d];
            p[d] = 0;
        }
        if (d < 0) return;
    }
}

/* index_put: x, values, idx_0..idx_{k-1} (each [L]). Entry j addresses the contiguous block
 * x[idx_0[j], ..., idx_{k-1}[j], ...] of x.dims[k:]; values broadcast to [L, x.dims[k:]]
 * (vst: their strides over that shape, 0 where broadcast). */
static void index_put(const ldt__kcall *c, int k, int acc) {
    const ldt__operand *x = &c->in[0], *v = &c->in[1];
    int nd = x->shape.ndim, vnd = 1 + nd - k; /* dims of [L, x.dims[k:]] */
    int64_t L = c->in[2].shape.dims[0], xs[LDT_MAX_DIMS], vs[LDT_MAX_DIMS];
    int64_t bdims[LDT_MAX_DIMS], vst[LDT_MAX_DIMS], blk = 1, inner, rows;
    int64_t es = (int64_t)ldt_dtype_size(x->dtype);
    strides_of(&x->shape, xs);
    strides_of(&v->shape, vs);
    for (int d = 0; d < vnd; d++) {
        int vd = d - (vnd - v->shape.ndim);
        vst[d] = vd >= 0 && v->shape.dims[vd] != 1 ? vs[vd] : 0;
        if (d > 0) blk *= bdims[d - 1] = x->shape.dims[k + d - 1];
    }
    copy_x(c);
    if (blk == 0) return;
    /* the block, as rows of `inner` elements (its last dim) */
    inner = vnd > 1 ? bdims[vnd - 2] : 1;
    rows = blk / inner;
    for (int64_t j = 0; j < L; j++) {
        int64_t base = 0, q[LDT_MAX_DIMS] = {0}, voff = j * vst[0];
        for (int i = 0; i < k; i++)
            base += index_at(&c->in[2 + i], j, x->shape.dims[i]) * xs[i];
        for (int64_t r = 0; r < rows; r++) {
            move_run(x->dtype, acc, (char *)c->out.data + (base + r * inner) * es,
                     (const char *)v->data + voff * es, inner, vnd > 1 ? vst[vnd - 1] : 0);
            for (int d = vnd - 3; d >= 0; d--) { /* block dim d is [L, ...] dim d + 1 */
                voff += vst[d + 1];
                if (++q[d] < bdims[d]) break;
                voff -= vst[d + 1] * q[d];
                q[d] = 0;
            }
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: the shared checks (kernels/common/index_plan.h), every index range-checked, then
 * a kernel.
 */

/* Every index of input k against n entries (what: "rows", "entries of dim 1"). The message
 * gives the value, its flat position and, for a multi-dim index, its coordinates. */
static ldt_status check_range(const char *op, const ldt__kcall *c, int k, int64_t n,
                              const char *what, int dim) {
    const ldt__operand *ix = &c->in[k];
    int64_t m = numel_of(&ix->shape), bad = -1;
    if (ix->dtype == LDT_I32) {
        const int32_t *p = (const int32_t *)ix->data;
        for (int64_t i = 0; i < m && bad < 0; i++)
            if (p[i] < -n || p[i] >= n) bad = i;
    } else {
        const int64_t *p = (const int64_t *)ix->data;
        for (int64_t i = 0; i < m && bad < 0; i++)
            if (p[i] < -n || p[i] >= n) bad = i;
    }
    if (bad < 0) return LDT_OK;
    char where[192] = "", tensor[32] = "";
    if (ix->shape.ndim > 1) {
        ldt_shape at = ix->shape;
        for (int64_t r = bad, d = at.ndim - 1; d >= 0; d--) {
            at.dims[d] = r % ix->shape.dims[d];
            r /= ix->shape.dims[d];
        }
        where[0] = ' ';
        ldt__ix_fmt(&at, where + 1, sizeof where - 1);
    }
    if (c->op == LDT_OP_INDEX_PUT) snprintf(tensor, sizeof tensor, " of index tensor %d", k - 2);
    char dims[48];
    if (!what) {
        snprintf(dims, sizeof dims, "entries of dim %d", dim);
        what = dims;
    }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: index %lld at position %lld%s%s is out of range for %lld %s",
             op, (long long)raw_index(ix, bad), (long long)bad, where, tensor, (long long)n, what);
}

/* A checked call: every index range-checked (the data's part), then the kernel. */
static ldt_status index_run(const ldt__kcall *c, const ldt__ix_plan *pp) {
    const char *op = ldt__builtin_op_name(c->op);
    for (int j = 0; j < pp->nidx; j++)
        LDT_CHECK(check_range(op, c, pp->idx_in[j], pp->idx_n[j], pp->idx_what[j], pp->idx_dim[j]));
    switch (c->op) {
    case LDT_OP_EMBEDDING: embedding(c); break;
    case LDT_OP_ONE_HOT: one_hot(c, pp->C); break;
    case LDT_OP_INDEX_SELECT: index_select(c, pp->dim); break;
    case LDT_OP_INDEX_ADD: index_add(c, pp->dim); break;
    case LDT_OP_INDEX_PUT: index_put(c, pp->k, pp->acc); break;
    default: gather_scatter(c, pp->dim); break; /* gather, scatter, scatter_add */
    }
    return LDT_OK;
}

ldt_status ldt__k_index(const ldt__kcall *c) {
    ldt__ix_plan p;
    LDT_CHECK(ldt__ix_check(c, &p));
    return index_run(c, &p);
}

/* Bound calls: the shared checks once; the indices, being data, are range-checked per call. */
static ldt_status index_bound(const ldt__kcall *c) {
    return index_run(c, (const ldt__ix_plan *)c->plan);
}

ldt_status ldt__kb_index(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    ldt__ix_plan p;
    *plan = NULL;
    LDT_CHECK(ldt__ix_check(c, &p));
    LDT_CHECK(ldt__kplan_alloc(ldt__builtin_op_name(c->op), sizeof p, plan));
    memcpy(*plan, &p, sizeof p);
    *fn = index_bound;
    return LDT_OK;
}
