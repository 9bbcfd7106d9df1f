/* Reverse-mode autodiff on the traced graph (docs/autodiff.md): backward nodes are ordinary
 * nodes of the same trace, recorded by one rule per op (the table below, indexed by the op
 * enum), so the planner shards the backward like the forward. */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/error.h"
#include "trace/autodiff.h"
#include "trace/pipeline.h"

/* ---------------------------------------------------------------------------------------
 * Helpers for rules.
 */
/* A 0-dim constant 0 or 1 of dtype dt, made once per context. */
ldt_tensor *ldt__scalar_const(ldt_ctx *ctx, ldt_dtype dt, int one) {
    ldt_tensor **slot = &ctx->scalar_const[dt][one != 0];
    if (!*slot) {
        unsigned char v[8] = {0};
        ldt_shape s0 = {0, {0}};
        switch (dt) {
        case LDT_F32: *(float *)v = (float)one; break;
        case LDT_F64: *(double *)v = one; break;
        case LDT_F16: *(uint16_t *)v = one ? 0x3c00 : 0; break;
        case LDT_BF16: *(uint16_t *)v = one ? 0x3f80 : 0; break;
        case LDT_I32: *(int32_t *)v = one; break;
        case LDT_I64: *(int64_t *)v = one; break;
        default: v[0] = (unsigned char)one; break;
        }
        *slot = ldt_constant(ctx, &s0, dt, v);
    }
    return *slot;
}

ldt_tensor *ldt__cached_constant(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, const void *data) {
    int64_t nb = (int64_t)ldt__dtype_size(dt);
    uint64_t key, head[2 + LDT_MAX_DIMS] = {(uint64_t)dt, (uint64_t)shape->ndim};
    XXH3_state_t *h = XXH3_createState();
    ldt_tensor *t;
    int slot;
    for (int d = 0; d < shape->ndim; d++) {
        nb *= shape->dims[d];
        head[2 + d] = (uint64_t)shape->dims[d];
    }
    if (!h) return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, head, (size_t)(2 + shape->ndim) * sizeof head[0]);
    XXH3_64bits_update(h, data, (size_t)nb);
    key = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    for (int i = 0; i < 16; i++) {
        t = ctx->const_cache[i];
        if (t && ctx->const_cache_key[i] == key && t->dtype == dt && ldt_shape_equal(t->shape, shape) &&
            memcmp(t->data, data, (size_t)nb) == 0)
            return t;
    }
    if (!(t = ldt_constant(ctx, shape, dt, data))) return NULL;
    slot = ctx->const_cache_next;
    ctx->const_cache_next = (slot + 1) % 16; /* an evicted one stays alive with the context */
    ctx->const_cache[slot] = t;
    ctx->const_cache_key[slot] = key;
    return t;
}

ldt_tensor *ldt__stop_gradient(ldt_tensor *x) {
    ldt_tensor *t;
    if (!x) return NULL;
    t = ldt__record_a(x->ctx, LDT_OP_ALIAS, &x, 1, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = 1;
    return t;
}

ldt_tensor *ldt__mean_divisor(ldt_tensor *x) {
    ldt_tensor *t;
    if (!x) return NULL;
    t = ldt__record_a(x->ctx, LDT_OP_ALIAS, &x, 1, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = 2;
    return t;
}

ldt_tensor *ldt__zeros_like(ldt_tensor *x) {
    ldt_tensor *z = ldt__scalar_const(x->ctx, (ldt_dtype)x->dtype, 0);
    return z ? ldt_expand(z, x->shape) : NULL;
}

/* g (shaped like a broadcast result) summed back to `shape`: over the leading dims the shape
 * lacks and the dims where it has 1. */
ldt_tensor *ldt__unbroadcast(ldt_tensor *g, const ldt_shape *shape) {
    int dims[LDT_MAX_DIMS], n = 0, lead;
    if (!g) return NULL;
    lead = g->shape->ndim - shape->ndim;
    for (int d = 0; d < g->shape->ndim; d++)
        if (d < lead || (shape->dims[d - lead] == 1 && g->shape->dims[d] != 1)) dims[n++] = d;
    if (n) g = ldt_sum(g, dims, n, 1);
    if (g && (g->shape->ndim != shape->ndim ||
              memcmp(g->shape->dims, shape->dims, (size_t)shape->ndim * sizeof shape->dims[0])))
        g = ldt_reshape(g, shape);
    return g;
}

/* g of a reduction's output, brought back to the input's shape (keepdim form, expanded). */
static ldt_tensor *unreduce(ldt_tensor *g, const ldt_shape *in, uint64_t mask) {
    ldt_shape keep = *in;
    for (int d = 0; d < in->ndim; d++)
        if (mask & (1u << d)) keep.dims[d] = 1;
    return ldt_expand(ldt_reshape(g, &keep), in);
}

#define IN(t, k) (LDT__IN(t)[k])

/* ---------------------------------------------------------------------------------------
 * Elementwise.
 */
static void r_binary(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *a = IN(t, 0), *b = IN(t, 1);
    /* only what is needed: a gradient into a constant (a stopped max, a count) would be
     * recorded and run for nothing */
    int na = ldt__vjp_needs(t, 0), nb = ldt__vjp_needs(t, 1);
    switch (t->op) {
    case LDT_OP_ADD:
        if (na) gi[0] = ldt__unbroadcast(g, a->shape);
        if (nb) gi[1] = ldt__unbroadcast(g, b->shape);
        break;
    case LDT_OP_SUB:
        if (na) gi[0] = ldt__unbroadcast(g, a->shape);
        if (nb) gi[1] = ldt__unbroadcast(ldt_neg(g), b->shape);
        break;
    case LDT_OP_MUL:
        if (na) gi[0] = ldt__unbroadcast(ldt_mul(g, b), a->shape);
        if (nb) gi[1] = ldt__unbroadcast(ldt_mul(g, a), b->shape);
        break;
    case LDT_OP_DIV: /* d(a/b)/db = -(a/b)/b */
        if (na) gi[0] = ldt__unbroadcast(ldt_div(g, b), a->shape);
        if (nb) gi[1] = ldt__unbroadcast(ldt_neg(ldt_div(ldt_mul(g, t), b)), b->shape);
        break;
    default: /* comparisons: no gradient */
        break;
    }
}

static void r_where(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *c = IN(t, 0), *z = ldt__scalar_const(t->ctx, (ldt_dtype)g->dtype, 0);
    if (ldt__vjp_needs(t, 1)) gi[1] = ldt__unbroadcast(ldt_where(c, g, z), IN(t, 1)->shape);
    if (ldt__vjp_needs(t, 2)) gi[2] = ldt__unbroadcast(ldt_where(c, z, g), IN(t, 2)->shape);
}

static void r_scalar(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    double s = t->attrs->f[0];
    ldt_tensor *x = IN(t, 0);
    switch (t->op) {
    case LDT_OP_ADD_SCALAR:
    case LDT_OP_SUB_SCALAR: gi[0] = g; break;
    case LDT_OP_RSUB_SCALAR: gi[0] = ldt_neg(g); break;
    case LDT_OP_MUL_SCALAR: gi[0] = ldt_mul_scalar(g, s); break;
    case LDT_OP_DIV_SCALAR: gi[0] = ldt_div_scalar(g, s); break;
    case LDT_OP_RDIV_SCALAR: gi[0] = ldt_neg(ldt_div(ldt_mul(g, t), x)); break; /* -(s/x)/x */
    case LDT_OP_POW_SCALAR: /* s x^(s-1) */
        gi[0] = s == 0 ? ldt__zeros_like(x) : ldt_mul(g, ldt_mul_scalar(ldt_pow_scalar(x, s - 1), s));
        break;
    default: break;
    }
}

static void r_unary(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0);
    switch (t->op) {
    case LDT_OP_NEG: gi[0] = ldt_neg(g); break;
    case LDT_OP_EXP: gi[0] = ldt_mul(g, t); break;
    case LDT_OP_LOG: gi[0] = ldt_div(g, x); break;
    case LDT_OP_SQRT: gi[0] = ldt_div(ldt_mul_scalar(g, 0.5), t); break;
    case LDT_OP_RSQRT: gi[0] = ldt_mul(g, ldt_mul_scalar(ldt_pow_scalar(t, 3), -0.5)); break;
    case LDT_OP_TANH: gi[0] = ldt_mul(g, ldt_rsub_scalar(ldt_mul(t, t), 1)); break;
    case LDT_OP_RELU:
        gi[0] = ldt_where(ldt_gt(x, ldt__scalar_const(t->ctx, (ldt_dtype)x->dtype, 0)), g,
                          ldt__scalar_const(t->ctx, (ldt_dtype)g->dtype, 0));
        break;
    case LDT_OP_SILU: { /* s(x) (1 + x (1 - s(x))), s the logistic function */
        ldt_tensor *sg = ldt_rdiv_scalar(ldt_add_scalar(ldt_exp(ldt_neg(x)), 1), 1);
        gi[0] = ldt_mul(g, ldt_mul(sg, ldt_add_scalar(ldt_mul(x, ldt_rsub_scalar(sg, 1)), 1)));
        break;
    }
    case LDT_OP_GELU:
        if (t->attrs->i[0]) { /* tanh form: 0.5 x (1 + tanh u), u = c (x + 0.044715 x^3) */
            const double c = 0.7978845608028654; /* sqrt(2 / pi) */
            ldt_tensor *x2 = ldt_mul(x, x);
            ldt_tensor *u = ldt_mul_scalar(ldt_add(x, ldt_mul_scalar(ldt_mul(x2, x), 0.044715)), c);
            ldt_tensor *th = ldt_tanh(u);
            ldt_tensor *du = ldt_mul_scalar(ldt_add_scalar(ldt_mul_scalar(x2, 3 * 0.044715), 1), c);
            ldt_tensor *d = ldt_add(ldt_mul_scalar(ldt_add_scalar(th, 1), 0.5),
                                    ldt_mul(ldt_mul_scalar(x, 0.5),
                                            ldt_mul(ldt_rsub_scalar(ldt_mul(th, th), 1), du)));
            gi[0] = ldt_mul(g, d);
        } else if (t->attrs->i[0] == 0) { /* erf form: Phi(x) + x phi(x), one kernel (form 2) */
            ldt_tensor *d = ldt__record_a(t->ctx, LDT_OP_GELU, &x, 1, x->shape, (ldt_dtype)x->dtype);
            if (d) d->attrs->i[0] = 2;
            gi[0] = d ? ldt_mul(g, d) : NULL;
        } else {
            ldt__op_error(t->ctx, LDT_ERR_UNSUPPORTED, "gelu form %lld has no backward rule",
                          (long long)t->attrs->i[0]);
        }
        break;
    case LDT_OP_CAST: gi[0] = ldt_cast(g, (ldt_dtype)x->dtype); break;
    default: break;
    }
}

/* ---------------------------------------------------------------------------------------
 * Linear algebra.
 */
static ldt_tensor *tr(ldt_tensor *x) { return ldt_transpose(x, -1, -2); }

static void r_matmul(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *a = IN(t, 0), *b = IN(t, 1), *a2 = a, *b2 = b, *g2 = g;
    ldt_shape s;
    /* 1-D operands as matrices: [K] -> [1, K] on the left, [K, 1] on the right */
    if (a->shape->ndim == 1) a2 = ldt_reshape(a, &(ldt_shape){2, {1, a->shape->dims[0]}});
    if (b->shape->ndim == 1) b2 = ldt_reshape(b, &(ldt_shape){2, {b->shape->dims[0], 1}});
    if (a->shape->ndim == 1 || b->shape->ndim == 1) {
        s = *g->shape;
        if (a->shape->ndim == 1) { /* the output lost M: put it back */
            s.ndim++;
            for (int d = s.ndim - 1; d > s.ndim - 1 - (b->shape->ndim >= 2); d--) s.dims[d] = s.dims[d - 1];
            s.dims[s.ndim - 1 - (b->shape->ndim >= 2)] = 1;
        }
        if (b->shape->ndim == 1) s.dims[s.ndim++] = 1; /* and N */
        g2 = ldt_reshape(g, &s);
    }
    gi[0] = ldt__unbroadcast(ldt_matmul(g2, tr(b2)), a2->shape);
    gi[1] = ldt__unbroadcast(ldt_matmul(tr(a2), g2), b2->shape);
    if (gi[0] && a2 != a) gi[0] = ldt_reshape(gi[0], a->shape);
    if (gi[1] && b2 != b) gi[1] = ldt_reshape(gi[1], b->shape);
}

/* A linear whose weight and output are pinned (tensor parallel, as Megatron lays it out)
 * pins its input's gradient (the matmul g w) to the conjugate layout: on a mesh dim where the
 * weight is split on its outputs (Shard(0), InterleavedShard(0)) the Partial sum of the split
 * contraction; split on its inputs (Shard(1)), split on its features; where the weight is
 * whole, as the output (a batch shard). Pinned, the search cannot gather the gradient and the
 * weight instead, which a small model's prices favour. The weight's gradient is the
 * optimizer's to place. Anything else pins nothing. */
static void pin_linear_dx(const ldt_tensor *t, ldt_tensor *dx) {
    const ldt_tensor *w = IN(t, 1);
    int nd = ldt_mesh_ndim(t->ctx->mesh), last = t->shape->ndim - 1;
    ldt_placement px[LDT_MAX_DIMS];
    if (!t->pin || !w->pin || !dx) return;
    for (int d = 0; d < nd; d++) {
        const ldt_placement *o = &t->pin[d], *wp = &w->pin[d];
        int wsplit = wp->kind == LDT_PLACE_SHARD || wp->kind == LDT_PLACE_INTERLEAVED_SHARD;
        int osplit = o->kind == LDT_PLACE_SHARD || o->kind == LDT_PLACE_INTERLEAVED_SHARD;
        if (wp->kind == LDT_PLACE_REPLICATE && (o->kind == LDT_PLACE_REPLICATE ||
                                                (o->kind == LDT_PLACE_SHARD && o->dim < last)))
            px[d] = *o;
        else if (wsplit && wp->dim == 0 && osplit && o->dim == last)
            px[d] = ldt_partial(LDT_REDUCE_SUM);
        else if (wp->kind == LDT_PLACE_SHARD && wp->dim == 1 && o->kind == LDT_PLACE_PARTIAL)
            px[d] = ldt_shard(last);
        else
            return;
    }
    ldt_pin(dx, px, nd);
}

ldt_tensor *ldt__param_grad(const ldt_tensor *t, const ldt_tensor *w, ldt_tensor *gw, int lead) {
    int nd = ldt_mesh_ndim(t->ctx->mesh);
    ldt_placement pl[LDT_MAX_DIMS];
    if (!t->pin || !w->pin || !gw || gw->pin || gw->kind != LDT__NODE) return gw;
    for (int d = 0; d < nd; d++) {
        const ldt_placement *o = &t->pin[d], *wp = &w->pin[d];
        int osplit = o->kind == LDT_PLACE_SHARD || o->kind == LDT_PLACE_INTERLEAVED_SHARD;
        if (osplit && o->dim < lead && wp->kind == LDT_PLACE_REPLICATE)
            pl[d] = ldt_partial(LDT_REDUCE_SUM); /* summed over this rank's rows */
        else if (!(osplit && o->dim < lead) && wp->kind != LDT_PLACE_PARTIAL)
            pl[d] = *wp;
        else
            return gw;
    }
    ldt_pin(gw, pl, nd);
    return ldt_alias(gw);
}

ldt_tensor *ldt__rows_of(ldt_tensor *v, int64_t rows) {
    int nd = ldt_mesh_ndim(v->ctx->mesh), last = v->shape->ndim - 1;
    ldt_tensor *r = ldt_reshape(v, &(ldt_shape){2, {rows, v->shape->dims[last]}});
    ldt_placement pl[LDT_MAX_DIMS];
    int64_t split0 = 1; /* ranks over the mesh dims that split the leading dim */
    if (!r || !v->pin || r->pin || r->kind != LDT__NODE || r == v) return r;
    for (int d = 0; d < nd; d++)
        if (v->pin[d].kind == LDT_PLACE_SHARD && v->pin[d].dim == 0 && last > 0)
            split0 *= ldt_mesh_dim_size(v->ctx->mesh, d);
    /* uneven chunks of the leading dim are not chunks of the rows: left to the search */
    if (v->shape->dims[0] % split0) return r;
    for (int d = 0; d < nd; d++) {
        pl[d] = v->pin[d];
        if (pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD) {
            if (pl[d].dim == last) pl[d].dim = 1;
            else if (pl[d].kind == LDT_PLACE_SHARD && pl[d].dim > 0) pl[d] = ldt_replicate();
            else if (pl[d].dim != 0 || pl[d].kind != LDT_PLACE_SHARD) return r;
        } else if (pl[d].kind == LDT_PLACE_PARTIAL && pl[d].op != LDT_REDUCE_SUM) {
            return r;
        }
    }
    ldt_pin(r, pl, nd);
    return r;
}

/* The transpose of r [R, n], pinned as r with the two dims swapped when r is pinned. */
static ldt_tensor *tr_pinned(ldt_tensor *r) {
    int nd = ldt_mesh_ndim(r->ctx->mesh);
    ldt_tensor *y = tr(r);
    ldt_placement pl[LDT_MAX_DIMS];
    if (!y || !r->pin || y->pin || y->kind != LDT__NODE) return y;
    for (int d = 0; d < nd; d++) {
        pl[d] = r->pin[d];
        if (pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD) pl[d].dim = 1 - pl[d].dim;
    }
    ldt_pin(y, pl, nd);
    return y;
}

static void r_linear(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *w = IN(t, 1);
    int64_t rows = 1;
    for (int d = 0; d < x->shape->ndim - 1; d++) rows *= x->shape->dims[d];
    gi[0] = ldt_matmul(g, w); /* [..., out] @ [out, in] */
    gi[1] = ldt_matmul(tr_pinned(ldt__rows_of(g, rows)), ldt__rows_of(x, rows));
    pin_linear_dx(t, gi[0]);
    gi[1] = ldt__param_grad(t, w, gi[1], t->shape->ndim - 1);
    if (t->nin == 3) { /* the bias [out]: g summed over its rows */
        int dims[LDT_MAX_DIMS];
        for (int d = 0; d < g->shape->ndim - 1; d++) dims[d] = d;
        gi[2] = g->shape->ndim > 1 ? ldt_sum(g, dims, g->shape->ndim - 1, 0) : g;
        gi[2] = ldt__param_grad(t, IN(t, 2), gi[2], t->shape->ndim - 1);
    }
}

/* ---------------------------------------------------------------------------------------
 * Views and data movement.
 */
static void r_view(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0);
    const int64_t *a = t->attrs->i;
    switch (t->op) {
    case LDT_OP_RESHAPE: gi[0] = ldt_reshape(g, x->shape); break;
    case LDT_OP_PERMUTE: {
        int inv[LDT_MAX_DIMS];
        for (int d = 0; d < x->shape->ndim; d++) inv[a[d]] = d;
        gi[0] = ldt_permute(g, inv, x->shape->ndim);
        break;
    }
    case LDT_OP_SLICE:
    case LDT_OP_SELECT:
        if (t->op == LDT_OP_SELECT || a[3] == 1) { /* contiguous: zeros before and after */
            int dim = (int)a[0];
            int64_t start = a[1], len = t->op == LDT_OP_SLICE ? t->shape->dims[dim] : 1;
            ldt_shape s = *x->shape, before, after;
            ldt_tensor *parts[3], *z = ldt__scalar_const(t->ctx, (ldt_dtype)g->dtype, 0);
            int np = 0;
            s.dims[dim] = len;
            before = after = *x->shape;
            before.dims[dim] = start;
            after.dims[dim] = x->shape->dims[dim] - start - len;
            if (before.dims[dim]) parts[np++] = ldt_expand(z, &before);
            parts[np++] = ldt_reshape(g, &s);
            if (after.dims[dim]) parts[np++] = ldt_expand(z, &after);
            gi[0] = np == 1 ? parts[0] : ldt_cat(parts, np, dim);
            break;
        } else { /* strided: scattered into zeros at the taken positions */
        int dim = (int)a[0];
        int64_t n = t->op == LDT_OP_SLICE ? t->shape->dims[dim] : 1, *idx;
        ldt_tensor *gg = g, *index;
        if (!(idx = malloc((size_t)(n ? n : 1) * sizeof *idx))) {
            ldt__op_error(t->ctx, LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
            break;
        }
        for (int64_t i = 0; i < n; i++) idx[i] = t->op == LDT_OP_SLICE ? a[1] + i * a[3] : a[1];
        index = ldt__cached_constant(t->ctx, &(ldt_shape){1, {n}}, LDT_I64, idx);
        free(idx);
        if (t->op == LDT_OP_SELECT) { /* the removed dim back, of size 1 */
            ldt_shape s = *x->shape;
            s.dims[dim] = 1;
            gg = ldt_reshape(g, &s);
        }
        gi[0] = ldt_index_add(ldt__zeros_like(x), dim, index, gg);
        break;
    }
    case LDT_OP_CAT: {
        int64_t at = 0;
        int dim = (int)a[0];
        for (int k = 0; k < t->nin; k++) {
            int64_t len = IN(t, k)->shape->dims[dim];
            gi[k] = ldt_slice(g, dim, at, at + len, 1);
            at += len;
        }
        break;
    }
    case LDT_OP_EXPAND: gi[0] = ldt__unbroadcast(g, x->shape); break;
    case LDT_OP_ALIAS:
    case LDT_OP_REDISTRIBUTE: gi[0] = g; break;
    default: break;
    }
}

/* ---------------------------------------------------------------------------------------
 * Reductions.
 */
static void r_reduce(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *ge;
    uint64_t mask = (uint64_t)t->attrs->i[0];
    int64_t count = 1;
    for (int d = 0; d < x->shape->ndim; d++)
        if (mask & (1u << d)) count *= x->shape->dims[d];
    ge = unreduce(g, x->shape, mask);
    switch (t->op) {
    case LDT_OP_SUM: gi[0] = ge; break;
    case LDT_OP_MEAN: gi[0] = ldt_div_scalar(ge, (double)count); break;
    case LDT_OP_AMAX:
    case LDT_OP_AMIN: { /* shared evenly among the elements that reach the extreme, as torch */
        int dims[LDT_MAX_DIMS], n = 0;
        ldt_tensor *m = ldt_cast(ldt_eq(x, unreduce(t, x->shape, mask)), (ldt_dtype)x->dtype);
        for (int d = 0; d < x->shape->ndim; d++)
            if (mask & (1u << d)) dims[n++] = d;
        gi[0] = ldt_div(ldt_mul(ge, m), n ? ldt_expand(ldt_sum(m, dims, n, 1), x->shape) : m);
        break;
    }
    default: break;
    }
}

/* ---------------------------------------------------------------------------------------
 * The table: one row per op. Leaves, integer-valued ops and random draws have no gradient
 * (LDT__NO_GRAD); a NULL row is an op whose rule is still missing.
 */
#define LDT__NO_GRAD ((ldt__vjp_fn)1)

static const ldt__vjp_fn k_rules[LDT_OP_COUNT] = {
    [LDT_OP_INPUT] = LDT__NO_GRAD, [LDT_OP_PARAM] = LDT__NO_GRAD, [LDT_OP_CONST] = LDT__NO_GRAD,
    [LDT_OP_DATA] = LDT__NO_GRAD,  [LDT_OP_ADD] = r_binary,       [LDT_OP_SUB] = r_binary,
    [LDT_OP_MUL] = r_binary,       [LDT_OP_DIV] = r_binary,       [LDT_OP_EQ] = LDT__NO_GRAD,
    [LDT_OP_NE] = LDT__NO_GRAD,    [LDT_OP_LT] = LDT__NO_GRAD,    [LDT_OP_LE] = LDT__NO_GRAD,
    [LDT_OP_GT] = LDT__NO_GRAD,    [LDT_OP_GE] = LDT__NO_GRAD,    [LDT_OP_WHERE] = r_where,
    [LDT_OP_ADD_SCALAR] = r_scalar, [LDT_OP_SUB_SCALAR] = r_scalar, [LDT_OP_RSUB_SCALAR] = r_scalar,
    [LDT_OP_MUL_SCALAR] = r_scalar, [LDT_OP_DIV_SCALAR] = r_scalar, [LDT_OP_RDIV_SCALAR] = r_scalar,
    [LDT_OP_POW_SCALAR] = r_scalar, [LDT_OP_NEG] = r_unary,       [LDT_OP_EXP] = r_unary,
    [LDT_OP_LOG] = r_unary,        [LDT_OP_SQRT] = r_unary,       [LDT_OP_RSQRT] = r_unary,
    [LDT_OP_TANH] = r_unary,       [LDT_OP_RELU] = r_unary,       [LDT_OP_GELU] = r_unary,
    [LDT_OP_SILU] = r_unary,       [LDT_OP_CAST] = r_unary,       [LDT_OP_MATMUL] = r_matmul,
    [LDT_OP_LINEAR] = r_linear,    [LDT_OP_RESHAPE] = r_view,     [LDT_OP_PERMUTE] = r_view,
    [LDT_OP_SLICE] = r_view,       [LDT_OP_SELECT] = r_view,      [LDT_OP_CAT] = r_view,
    [LDT_OP_EXPAND] = r_view,      [LDT_OP_ALIAS] = r_view,       [LDT_OP_REDISTRIBUTE] = r_view,
    [LDT_OP_SUM] = r_reduce,       [LDT_OP_MEAN] = r_reduce,      [LDT_OP_AMAX] = r_reduce,
    [LDT_OP_AMIN] = r_reduce,      [LDT_OP_ARGMAX] = LDT__NO_GRAD, [LDT_OP_ARGMIN] = LDT__NO_GRAD,
    [LDT_OP_TOPK_INDICES] = LDT__NO_GRAD, [LDT_OP_RAND] = LDT__NO_GRAD,
    [LDT_OP_RANDN] = LDT__NO_GRAD, [LDT_OP_BERNOULLI] = LDT__NO_GRAD,
    [LDT_OP_TRUNC_NORMAL] = LDT__NO_GRAD, [LDT_OP_RANDINT] = LDT__NO_GRAD,
    [LDT_OP_ONE_HOT] = LDT__NO_GRAD,
    [LDT_OP_TOPK_VALUES] = ldt__r_topk,
    [LDT_OP_SOFTMAX] = ldt__r_softmax, [LDT_OP_LOG_SOFTMAX] = ldt__r_softmax,
    [LDT_OP_LAYER_NORM] = ldt__r_norm, [LDT_OP_RMS_NORM] = ldt__r_norm,
    [LDT_OP_CROSS_ENTROPY] = ldt__r_cross_entropy, [LDT_OP_DROPOUT] = ldt__r_dropout,
    [LDT_OP_EMBEDDING] = ldt__r_index, [LDT_OP_INDEX_SELECT] = ldt__r_index,
    [LDT_OP_GATHER] = ldt__r_index, [LDT_OP_SCATTER] = ldt__r_index,
    [LDT_OP_SCATTER_ADD] = ldt__r_index, [LDT_OP_INDEX_ADD] = ldt__r_index,
    [LDT_OP_SDPA] = ldt__r_sdpa, [LDT_OP_INDEX_PUT] = ldt__r_index_put,
};

int ldt__has_vjp(int op) {
    return op >= 0 && op < LDT_OP_COUNT && k_rules[op] != NULL;
}

/* ---------------------------------------------------------------------------------------
 * The backward pass.
 */
int ldt__conjugate_of(const ldt_tensor *t, int leaf, ldt_placement *pl) {
    int nd = ldt_mesh_ndim(t->ctx->mesh), split = 0;
    for (int d = 0; d < nd; d++) {
        const ldt_placement *p = &t->pin[d];
        split |= p->kind == LDT_PLACE_SHARD || p->kind == LDT_PLACE_INTERLEAVED_SHARD;
        if (t->ctx->pp && d == t->ctx->pp->dim) /* a pipeline's dim: everything whole there */
            pl[d] = ldt_replicate();
        else if (p->kind == LDT_PLACE_REPLICATE && t->kind != LDT__NODE && leaf == LDT__PIN_LEAF_GRAD)
            pl[d] = ldt_partial(LDT_REDUCE_SUM);
        else if (p->kind == LDT_PLACE_SHARD || p->kind == LDT_PLACE_INTERLEAVED_SHARD ||
                 p->kind == LDT_PLACE_REPLICATE)
            pl[d] = *p;
        else if (p->kind == LDT_PLACE_PARTIAL && p->op == LDT_REDUCE_SUM)
            pl[d] = ldt_replicate();
        else
            return 0;
    }
    return !(t->kind != LDT__NODE && leaf == LDT__PIN_LEAF_GRAD && !split);
}

/* The gradient g of a pinned forward value t (and each contribution to it) takes the
 * conjugate pin when nothing pinned it already (g made at or after node first_backward): a
 * shard (plain or interleaved, as a fused QKV output) stays that shard, a whole value's
 * gradient is whole (summed over its consumers: Megatron's all_reduce behind a
 * column-parallel input), a Partial(sum) value's gradient whole (the same on every rank).
 * Other pins (max) pin nothing. So a layout pinned on the forward holds for the backward too,
 * where the search would otherwise trade it for gathers under a small model's prices.
 * Parameters' gradients are the optimizer's to place (its data-parallel reduction,
 * bucketed): a leaf t pins nothing, unless `leaf` says how (LDT__PIN_AS_LEAF: g is laid out
 * as t itself; LDT__PIN_LEAF_GRAD: where t is whole g is Partial(sum), and only when t is
 * split somewhere). */
void ldt__pin_conjugate(const ldt_tensor *t, ldt_tensor *g, int64_t first_backward, int leaf) {
    ldt_placement pl[LDT_MAX_DIMS];
    if (!t->pin || !g || g->pin || g->kind != LDT__NODE || g->id < first_backward) return;
    if (t->kind != LDT__NODE && !leaf) return;
    if (ldt__conjugate_of(t, leaf, pl)) ldt_pin(g, pl, ldt_mesh_ndim(t->ctx->mesh));
}

/* t's conjugate (ldt__conjugate_of, not a leaf) with Partial(sum) for Replicate on the mesh
 * dims in bcast: those where a consumer broadcast t over a dim it splits there (positions
 * added to a batch-split activation), so t's gradient is a sum over ranks' rows. 0: none. */
static int conj_bcast(const ldt_tensor *t, uint32_t bcast, ldt_placement *pl) {
    if (!ldt__conjugate_of(t, 0, pl)) return 0;
    for (int d = 0; d < ldt_mesh_ndim(t->ctx->mesh); d++)
        if (((bcast >> d) & 1u) && pl[d].kind == LDT_PLACE_REPLICATE) pl[d] = ldt_partial(LDT_REDUCE_SUM);
    return 1;
}

/* ldt__pin_conjugate for a node t (not a leaf), with conj_bcast's Partial dims. */
static void pin_grad(const ldt_tensor *t, ldt_tensor *g, int64_t first_backward, uint32_t bcast) {
    ldt_placement pl[LDT_MAX_DIMS];
    if (!t->pin || !g || g->pin || g->kind != LDT__NODE || g->id < first_backward || t->kind != LDT__NODE)
        return;
    if (conj_bcast(t, bcast, pl)) ldt_pin(g, pl, ldt_mesh_ndim(t->ctx->mesh));
}

/* The mesh dims where pinned node t splits a dim its input u is broadcast over (absent from
 * u, or 1 there): u's gradient from t is a partial sum on them. */
static uint32_t bcast_dims(const ldt_tensor *t, const ldt_tensor *u) {
    uint32_t m = 0;
    int lead = t->shape->ndim - u->shape->ndim;
    if (!t->pin || t->kind != LDT__NODE) return 0;
    for (int d = 0; d < ldt_mesh_ndim(t->ctx->mesh); d++) {
        const ldt_placement *p = &t->pin[d];
        int j = p->dim - lead;
        if (p->kind == LDT_PLACE_SHARD && t->shape->dims[p->dim] > 1 &&
            (j < 0 || u->shape->dims[j] == 1))
            m |= 1u << d;
    }
    return m;
}

/* g, the gradient of pinned node t, as the rule for t takes it: where g was pinned to
 * another layout than t's conjugate (a column-parallel linear's input gradient is pinned
 * Partial, its input whole), an alias of g pinned to the conjugate, so g is reduced once
 * however many backward ops of t read it (a layer norm's reads it three times: three
 * all_reduces of the activation where Megatron has one). Else g. */
static ldt_tensor *settle(const ldt_tensor *t, ldt_tensor *g, int64_t first_backward, uint32_t bcast) {
    ldt_placement pl[LDT_MAX_DIMS];
    int nd = ldt_mesh_ndim(t->ctx->mesh), same = 1;
    ldt_tensor *a;
    if (!t->pin || !g || !g->pin || g->kind != LDT__NODE || g->id < first_backward ||
        t->kind != LDT__NODE || !conj_bcast(t, bcast, pl))
        return g;
    for (int d = 0; d < nd; d++) same &= ldt_placement_equal(&pl[d], &g->pin[d]);
    if (same || !(a = ldt_alias(g))) return g;
    ldt_pin(a, pl, nd);
    return a;
}

/* Gradients of contiguous slices of one value, kept until the value's own turn: there they
 * become one cat along the slice dim (zeros in the gaps), where adding one zero-padded cat per
 * slice would make a whole-sized sum of every slice (a fused QKV output's gradient from its
 * q, k and v blocks: Megatron concatenates them, each still sharded on heads). */
typedef struct slice_piece {
    int dim;
    int64_t start, len;
    ldt_tensor *g;
} slice_piece;

typedef struct slice_pieces {
    int dim, n, cap, mixed; /* mixed: pieces on several dims, or overlapping */
    slice_piece *p;
} slice_pieces;

static int piece_cmp(const void *a, const void *b) {
    const slice_piece *x = a, *y = b;
    if (x->dim != y->dim) return x->dim < y->dim ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static ldt_status piece_add(slice_pieces *s, int dim, int64_t start, int64_t len, ldt_tensor *g) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        slice_piece *p = realloc(s->p, (size_t)cap * sizeof *p);
        if (!p) return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
        s->p = p;
        s->cap = cap;
    }
    if (s->n && s->dim != dim) s->mixed = 1;
    s->dim = dim;
    s->p[s->n++] = (slice_piece){dim, start, len, g};
    return LDT_OK;
}

/* Zeros like x with dim `dim` of length len. */
static ldt_tensor *zeros_run(ldt_tensor *x, int dim, int64_t len) {
    ldt_shape s = *x->shape;
    s.dims[dim] = len;
    return ldt_expand(ldt__scalar_const(x->ctx, (ldt_dtype)x->dtype, 0), &s);
}

/* The gradient of x from its slices' pieces: one cat in order with zeros in the gaps (or, for
 * pieces on several dims or overlapping, one zero-padded cat per piece, summed). */
static ldt_tensor *pieces_grad(ldt_tensor *x, slice_pieces *s) {
    ldt_tensor **parts, *g = NULL;
    int64_t at = 0, n = x->shape->dims[s->dim];
    int np = 0;
    qsort(s->p, (size_t)s->n, sizeof *s->p, piece_cmp);
    for (int i = 1; i < s->n && !s->mixed; i++)
        s->mixed |= s->p[i].start < s->p[i - 1].start + s->p[i - 1].len;
    if (!(parts = malloc((size_t)(2 * s->n + 1) * sizeof *parts)))
        return ldt__op_error(x->ctx, LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
    if (s->mixed) {
        for (int i = 0; i < s->n; i++) {
            const slice_piece *q = &s->p[i];
            int dim = q->dim, np1 = 0;
            ldt_tensor *c;
            if (q->start) parts[np1++] = zeros_run(x, dim, q->start);
            parts[np1++] = q->g;
            if (x->shape->dims[dim] - q->start - q->len)
                parts[np1++] = zeros_run(x, dim, x->shape->dims[dim] - q->start - q->len);
            c = np1 == 1 ? parts[0] : ldt_cat(parts, np1, dim);
            g = g ? ldt_add(g, c) : c;
        }
    } else {
        for (int i = 0; i < s->n; i++) {
            if (s->p[i].start > at) parts[np++] = zeros_run(x, s->dim, s->p[i].start - at);
            parts[np++] = s->p[i].g;
            at = s->p[i].start + s->p[i].len;
        }
        if (at < n) parts[np++] = zeros_run(x, s->dim, n - at);
        g = np == 1 ? parts[0] : ldt_cat(parts, np, s->dim);
    }
    free(parts);
    return g;
}

/* ---------------------------------------------------------------------------------------
 * Recomputation segments.
 */
ldt_status ldt_recompute_begin(ldt_ctx *ctx) {
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "recompute_begin: ctx is NULL (expected a context)");
    if (ctx->rc_open)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "recompute_begin: a segment is open since node %%%lld; segments do "
                 "not nest (expected ldt_recompute_end first)", (long long)ctx->rc_start);
    ctx->rc_open = 1;
    ctx->rc_start = ctx->nnodes;
    return LDT_OK;
}

ldt_status ldt_recompute_end(ldt_ctx *ctx) {
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "recompute_end: ctx is NULL (expected a context)");
    if (!ctx->rc_open)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "recompute_end: no segment is open (expected ldt_recompute_begin "
                 "first, in this trace)");
    ctx->rc_open = 0;
    if (ctx->nnodes == ctx->rc_start) return LDT_OK; /* empty: nothing to recompute */
    if (ctx->rc_nseg == ctx->rc_cap) {
        int32_t cap = ctx->rc_cap ? 2 * ctx->rc_cap : 16;
        int64_t *n = realloc(ctx->rc_seg, (size_t)cap * 2 * sizeof *n);
        if (!n) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "recompute_end: out of memory");
        ctx->rc_seg = n;
        ctx->rc_cap = cap;
    }
    ctx->rc_seg[2 * ctx->rc_nseg] = ctx->rc_start;
    ctx->rc_seg[2 * ctx->rc_nseg + 1] = ctx->nnodes;
    ctx->rc_nseg++;
    return LDT_OK;
}

/* The forward of segment [b, e) recorded again, into clone[b..e): each node with the same op,
 * attributes (a random draw's seed and offset: the very values) and pin, reading the clones
 * of its inputs inside the segment and the originals outside. Leaves stay themselves. */
static ldt_status clone_segment(ldt_ctx *ctx, int64_t b, int64_t e, ldt_tensor **clone) {
    int nd = ldt_mesh_ndim(ctx->mesh);
    for (int64_t u = b; u < e; u++) {
        ldt_tensor *t = ctx->nodes[u], *in[LDT__MAX_VJP_IN], **inp = in, *c;
        if (t->kind != LDT__NODE) {
            clone[u] = t;
            continue;
        }
        if (t->nin > LDT__MAX_VJP_IN && !(inp = malloc((size_t)t->nin * sizeof *inp)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
        for (int k = 0; k < t->nin; k++) {
            ldt_tensor *x = IN(t, k);
            inp[k] = x->id >= b && x->id < e && ctx->nodes[x->id] == x && clone[x->id] ? clone[x->id] : x;
        }
        if (t->attrs != &ctx->no_attrs) {
            c = ldt__record_a(ctx, t->op, inp, t->nin, t->shape, (ldt_dtype)t->dtype);
            if (c) *c->attrs = *t->attrs;
        } else {
            c = ldt__record(ctx, t->op, inp, t->nin, t->shape, (ldt_dtype)t->dtype);
        }
        if (inp != in) free(inp);
        if (!c) LDT_FAIL(ctx->status ? ctx->status : LDT_ERR_INTERNAL, "grad: recomputing node %%%lld: %s",
                         (long long)u, ctx->errmsg);
        if (t->pin && ldt_pin(c, t->pin, nd) != LDT_OK)
            LDT_FAIL(LDT_ERR_INTERNAL, "grad: recomputing node %%%lld: its pin: %s", (long long)u, ldt_last_error());
        clone[u] = c;
    }
    return LDT_OK;
}

/* Pipelines (docs/pipeline.md): the backward ops of node v carry v's stage and micro-batch. */
static void pp_backward_of(ldt_ctx *ctx, int64_t v) {
    ldt__pp_tag t = ldt__pp_tag_of(ctx, v);
    if (t.stage >= 0) t.phase = LDT__PP_BWD;
    ldt__pp_set(ctx, t);
}

ldt_status ldt_grad(ldt_tensor *loss, ldt_tensor *const *wrt, int n, ldt_tensor **grads) {
    ldt_ctx *ctx;
    ldt_tensor *root, *divisor = NULL;
    int64_t nn;
    ldt_tensor **adj = NULL;
    char *from_wrt = NULL, *to_loss = NULL;
    slice_pieces *pieces = NULL;
    uint32_t *bcast = NULL;
    int32_t *seg_of = NULL; /* per forward node: its recomputation segment, -1 none */
    char *seg_done = NULL;
    ldt_tensor **clone = NULL;
    ldt_status st = LDT_OK;
    if (!loss || n < 0 || (n > 0 && (!wrt || !grads)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "grad: loss, wrt and grads must be given");
    ctx = loss->ctx;
    if (loss->kind != LDT__NODE || loss->gen != ctx->gen)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "grad: the loss is not a result of the current trace");
    if (!ldt__dtype_is_float((ldt_dtype)loss->dtype) || ldt__nbytes(loss) != (int64_t)ldt__dtype_size((ldt_dtype)loss->dtype))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "grad: the loss must be one floating value (%s, %d dims)",
                 ldt_dtype_name((ldt_dtype)loss->dtype), loss->shape->ndim);
    if (ctx->status != LDT_OK) LDT_FAIL(ctx->status, "grad: the trace holds an error: %s", ctx->errmsg);
    for (int i = 0; i < n; i++) {
        grads[i] = NULL;
        if (!wrt[i] || wrt[i]->ctx != ctx)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "grad: wrt[%d] is NULL or from another context", i);
        if (!ldt__dtype_is_float((ldt_dtype)wrt[i]->dtype))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "grad: wrt[%d] is %s; only floating tensors have gradients",
                     i, ldt_dtype_name((ldt_dtype)wrt[i]->dtype));
    }
    root = loss;
    nn = ctx->nnodes; /* the forward; backward nodes are appended after it */
    adj = calloc((size_t)(nn ? nn : 1), sizeof *adj);
    from_wrt = calloc((size_t)(nn ? nn : 1), 1);
    to_loss = calloc((size_t)(nn ? nn : 1), 1);
    pieces = calloc((size_t)(nn ? nn : 1), sizeof *pieces);
    bcast = calloc((size_t)(nn ? nn : 1), sizeof *bcast);
    if (!adj || !from_wrt || !to_loss || !pieces || !bcast) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
    if (ctx->rc_nseg > 0) {
        seg_of = malloc((size_t)(nn ? nn : 1) * sizeof *seg_of);
        seg_done = calloc((size_t)ctx->rc_nseg, 1);
        clone = calloc((size_t)(nn ? nn : 1), sizeof *clone);
        if (!seg_of || !seg_done || !clone) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
        for (int64_t v = 0; v < nn; v++) seg_of[v] = -1;
        for (int32_t i = 0; i < ctx->rc_nseg; i++)
            for (int64_t v = ctx->rc_seg[2 * i]; v < ctx->rc_seg[2 * i + 1] && v < nn; v++) seg_of[v] = i;
    }
    /* the nodes on a path from some wrt to the loss */
    for (int i = 0; i < n; i++)
        if (wrt[i]->gen == ctx->gen && wrt[i]->id >= 0 && wrt[i]->id < nn && ctx->nodes[wrt[i]->id] == wrt[i])
            from_wrt[wrt[i]->id] = 1;
    for (int64_t v = 0; v < nn; v++) {
        ldt_tensor *t = ctx->nodes[v];
        /* a stopped gradient: the node is a constant to the backward pass */
        for (int k = 0; !from_wrt[v] && t->kind == LDT__NODE && !ldt__is_stop_gradient(t) && k < t->nin; k++)
            from_wrt[v] = from_wrt[IN(t, k)->id];
    }
    to_loss[loss->id] = 1;
    for (int64_t v = loss->id; v >= 0; v--) {
        ldt_tensor *t = ctx->nodes[v];
        if (!to_loss[v] || t->kind != LDT__NODE) continue;
        for (int k = 0; k < t->nin; k++) to_loss[IN(t, k)->id] = 1;
    }
    /* a mean loss a / c (c marked by ldt__mean_divisor, out of every wrt's reach): the backward
     * of a, each gradient divided by c at the end (the same values: the backward is linear in
     * its seed), so nothing before the gradients reads c */
    if (loss->op == LDT_OP_DIV && ldt__is_mean_divisor(IN(loss, 1)) && !from_wrt[IN(loss, 1)->id] &&
        ldt_shape_equal(IN(loss, 0)->shape, loss->shape) && IN(loss, 0)->dtype == loss->dtype) {
        int wrt_loss = 0;
        for (int i = 0; i < n; i++) wrt_loss |= wrt[i] == loss;
        if (!wrt_loss) {
            divisor = IN(loss, 1);
            root = IN(loss, 0);
        }
    }
    pp_backward_of(ctx, root->id);
    adj[root->id] = ldt_expand(ldt__scalar_const(ctx, (ldt_dtype)root->dtype, 1), root->shape);
    for (int64_t v = root->id; v >= 0; v--) {
        ldt_tensor *t = ctx->nodes[v], *gi[LDT__MAX_VJP_IN];
        ldt__vjp_fn rule;
        pp_backward_of(ctx, v);
        if (pieces[v].n) { /* every slice of v is done: their gradients as one */
            ldt_tensor *c = pieces_grad(t, &pieces[v]);
            if (!c) LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_INTERNAL, "grad: %s", ctx->errmsg);
            pin_grad(t, c, nn, bcast[v]);
            adj[v] = adj[v] ? ldt_add(adj[v], c) : c;
        }
        if (!adj[v] || !from_wrt[v] || t->kind != LDT__NODE) continue;
        rule = t->op < LDT_OP_COUNT ? k_rules[t->op] : NULL;
        if (rule == LDT__NO_GRAD) continue;
        if (!rule)
            LDT_FAIL_GOTO(LDT_ERR_UNSUPPORTED, "grad: op %s (node %%%lld) has no backward rule yet",
                          ldt__op_name(ctx, t->op), (long long)v);
        if (t->nin > LDT__MAX_VJP_IN)
            LDT_FAIL_GOTO(LDT_ERR_UNSUPPORTED, "grad: op %s with %d inputs; rules take up to %d",
                          ldt__op_name(ctx, t->op), t->nin, LDT__MAX_VJP_IN);
        pin_grad(t, adj[v], nn, bcast[v]);
        adj[v] = settle(t, adj[v], nn, bcast[v]);
        if (t->op == LDT_OP_SLICE && t->attrs->i[3] == 1) { /* kept for its input's turn */
            int64_t u = IN(t, 0)->id;
            if (from_wrt[u] && to_loss[u] &&
                (st = piece_add(&pieces[u], (int)t->attrs->i[0], t->attrs->i[1], t->shape->dims[t->attrs->i[0]],
                                adj[v])) != LDT_OK)
                goto fail;
            continue;
        }
        /* the first backward rule of a recomputation segment: its forward again, here */
        if (seg_of && seg_of[v] >= 0 && !seg_done[seg_of[v]]) {
            int32_t i = seg_of[v];
            seg_done[i] = 1;
            if ((st = clone_segment(ctx, ctx->rc_seg[2 * i], ctx->rc_seg[2 * i + 1], clone)) != LDT_OK) goto fail;
        }
        memset(gi, 0, sizeof gi);
        ctx->vjp_need = 0;
        for (int k = 0; k < t->nin && k < 32; k++)
            if (from_wrt[IN(t, k)->id] && to_loss[IN(t, k)->id]) ctx->vjp_need |= 1u << k;
        rule(clone && clone[v] ? clone[v] : t, adj[v], gi);
        if (ctx->status != LDT_OK) {
            char msg[1024];
            st = ctx->status;
            snprintf(msg, sizeof msg, "%s", ctx->errmsg);
            ldt__error(st, "grad: the backward of %s (node %%%lld): %s", ldt__op_name(ctx, t->op),
                       (long long)v, msg);
            goto fail;
        }
        for (int k = 0; k < t->nin; k++) {
            int64_t u = IN(t, k)->id;
            if (!gi[k] || !from_wrt[u] || !to_loss[u]) continue;
            bcast[u] |= bcast_dims(t, IN(t, k));
            pin_grad(IN(t, k), gi[k], nn, bcast[u]); /* each contribution, not only their sum */
            adj[u] = adj[u] ? ldt_add(adj[u], gi[k]) : gi[k];
        }
    }
    ldt__pp_set(ctx, (ldt__pp_tag){-1, 0, LDT__PP_NONE}); /* what follows is step-wide */
    for (int i = 0; i < n; i++) {
        ldt_tensor *w = wrt[i];
        int used = w->gen == ctx->gen && w->id >= 0 && w->id < nn && ctx->nodes[w->id] == w;
        grads[i] = used && adj[w->id] ? (divisor ? ldt_div(adj[w->id], divisor) : adj[w->id]) : ldt__zeros_like(w);
        if (!grads[i]) LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_INTERNAL, "grad: %s", ctx->errmsg);
    }
fail:
    free(adj);
    free(from_wrt);
    free(to_loss);
    for (int64_t v = 0; pieces && v < nn; v++) free(pieces[v].p);
    free(pieces);
    free(bcast);
    free(seg_of);
    free(seg_done);
    free(clone);
    return st;
}
