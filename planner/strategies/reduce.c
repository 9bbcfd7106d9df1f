/* Strategies of the reductions: sum/mean/amax/amin over a sharded dim give Partial(sum/max/
 * min) (mean divides its local sum by the global count), kept dims follow; argmax, argmin and
 * topk let the other dims follow, and reduce a Shard(dim) input by exchanging each rank's
 * (value, global index) candidates with all_reduces into a Replicate output. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "planner/program.h"

/* The output dim of input dim d (kept), for a reduce over `mask` with or without keepdim. */
static int out_dim(uint64_t mask, int keepdim, int d) {
    int od = d;
    if (!keepdim)
        for (int j = 0; j < d; j++) od -= (int)((mask >> j) & 1u);
    return od;
}

/* The Partial a sharded reduced dim leaves: sum for sum/mean, max/min for amax/amin. */
static ldt_reduce_op partial_op(int op) {
    return op == LDT_OP_AMAX ? LDT_REDUCE_MAX : op == LDT_OP_AMIN ? LDT_REDUCE_MIN : LDT_REDUCE_SUM;
}

/* Input dim d held as p (Shard or InterleavedShard): a reduced dim gives Partial (float only:
 * integer sums have no Partial), a kept one the same placement on its output dim. */
static void reduce_dim_opt(ldt__opts1 *o, ldt_placement p, int fl) {
    uint64_t mask = (uint64_t)o->t->attrs->i[0];
    int keep = o->t->attrs->i[1] != 0, d = p.dim;
    if ((mask >> d) & 1u) {
        if (fl) ldt__opt_add(o, ldt_partial(partial_op(o->t->op)), &p);
    } else {
        ldt__opt_add(o, ldt__pl_on_dim(p, out_dim(mask, keep, d)), &p);
    }
}

static void so_reduce(ldt__opts1 *o) {
    const ldt_shape *x = LDT__SIN(o, 0);
    int fl = ldt__s_all_float(o->t);
    ldt_placement P = ldt_partial(partial_op(o->t->op));
    for (int d = 0; d < x->ndim; d++) {
        reduce_dim_opt(o, ldt_shard(d), fl);
        for (int i = 0; i < o->niks; i++)
            if (o->iks[i] > 1 && x->dims[d] % o->iks[i] == 0)
                reduce_dim_opt(o, ldt_interleaved_shard(d, o->iks[i]), fl);
    }
    /* a pending sum (max, min) passes through the same reduction unchanged */
    if (fl) ldt__opt_add(o, P, &P);
}

/* The node's own kernel on its local shards. */
static ldt_status own_kernel(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t;
    return ldt__lower_kernel(L, t->id, t->op, t->attrs, t->nin, n->in_val, n->out_val, NULL, NULL);
}

/* The reduce kernel (op) on local shards, or the identity where a reduced dim is empty here
 * (a short trailing shard): amax/amin of nothing has no value, but as a Partial(max/min)
 * contribution -inf/+inf is exactly "nothing". */
static ldt_status lower_minmax(ldt__lower *L, const ldt__lnode *n) {
    const ldt_shape *xl = &L->p->vals[n->in_val[0]].shape;
    uint64_t mask = (uint64_t)n->t->attrs->i[0];
    int empty = 0;
    for (int d = 0; d < xl->ndim; d++)
        if (((mask >> d) & 1u) && xl->dims[d] == 0) empty = 1;
    if (empty && ldt_dtype_is_float((ldt_dtype)n->t->dtype))
        return ldt__lower_fill(L, n->t->id, n->out_val,
                               n->t->op == LDT_OP_AMAX ? -INFINITY : INFINITY);
    return own_kernel(L, n);
}

/* mean over a sharded dim: the local sum (a Partial(sum) piece) over the GLOBAL count, since
 * shards are uneven and a local mean would weight them wrongly. Unsharded: the mean kernel. */
static ldt_status lower_mean(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t;
    const ldt_shape *xg = LDT__IN(t)[0]->shape;
    uint64_t mask = (uint64_t)t->attrs->i[0];
    int nd = ldt_mesh_ndim(n->mesh), dims[LDT_MAX_DIMS], sharded = 0;
    double count = 1;
    ldt__attrs a = {{0}, {0}};
    int32_t tmp;
    for (int d = 0; d < xg->ndim; d++)
        if ((mask >> d) & 1u) {
            count *= (double)xg->dims[d];
            sharded += ldt__shard_mesh_dims(n->in[0], nd, d, dims);
        }
    if (!sharded) return own_kernel(L, n);
    if ((tmp = ldt__lower_value(L, &L->p->vals[n->out_val].shape, (ldt_dtype)t->dtype, -1)) < 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    LDT_CHECK(ldt__lower_kernel(L, t->id, LDT_OP_SUM, t->attrs, 1, n->in_val, tmp, NULL, NULL));
    a.f[0] = count; /* 0 / 0 gives NaN, as the mean of nothing does */
    return ldt__lower_kernel(L, t->id, LDT_OP_DIV_SCALAR, &a, 1, &tmp, n->out_val, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * argmax/argmin (attrs {dim, keepdim}) and topk (attrs {dim, k, largest, sorted}, the dim kept
 * with size k): every dim but `dim` follows, and `dim` itself may be Shard (the output
 * Replicate on those mesh dims).
 *
 * Sharded dim: each rank takes its local winners (w = 1 for argmax/argmin, k for topk): the
 * indices by the op itself, the values gathered at them (the elements themselves, bit for
 * bit), the indices made global by the rank's first position along dim. The m ranks' chunks
 * that are not empty get one slot each, in global order; a candidate buffer holds m * w
 * entries along dim, this rank's piece in its slot and the reduction's identity elsewhere, and
 * one all_reduce per buffer gives every rank every piece. The op again on the candidate values
 * picks positions, and the global indices are gathered there.
 *
 * Bitwise with one device: the kernel orders by (key, index), NaN the largest key and -0 tied
 * with +0 (kernels/cpu/reduce.c); a chunk's winners are in that order, and equal keys in two
 * chunks keep the chunks' (global) order, so the final pick breaks ties exactly as one device
 * does. Only non-empty chunks get slots (a nested Shard can leave an empty chunk in the
 * middle), so no fill value ever competes: the fills only need to be identities of the
 * all_reduce. Floats use MAX with -inf (MIN with +inf), which the communicator's NaN-
 * propagating max/min keep exact (-0 included); integers use SUM with 0 (exact, wrapping);
 * global indices MAX with -1. topk's kernel always sorts (sorted = 0 gets the sorted answer,
 * on one device as here); the local winners are asked sorted regardless, since the tie order
 * within a chunk is what the final pick relies on. topk needs every chunk to hold k or more
 * entries, or none (`valid`). */
static void so_index_reduce(ldt__opts1 *o) {
    const ldt_shape *x = LDT__SIN(o, 0);
    int dim = (int)o->t->attrs->i[0];
    int topk = o->t->op == LDT_OP_TOPK_VALUES || o->t->op == LDT_OP_TOPK_INDICES;
    int keep = topk || o->t->attrs->i[1] != 0;
    for (int d = 0; d < x->ndim; d++) {
        ldt_placement p = ldt_shard(d);
        if (d == dim)
            ldt__opt_add(o, ldt_replicate(), &p);
        else
            ldt__opt_add(o, ldt_shard(!keep && d > dim ? d - 1 : d), &p);
    }
}

static int ix_is_topk(int op) { return op == LDT_OP_TOPK_VALUES || op == LDT_OP_TOPK_INDICES; }

/* The mesh dims that shard dim (plain Shard) in pl; -1 when an InterleavedShard does. */
static int ix_shard_dims(const ldt_placement *pl, int nd, int dim, int *out) {
    int n = 0;
    for (int i = 0; i < nd; i++) {
        if (pl[i].kind == LDT_PLACE_INTERLEAVED_SHARD && pl[i].dim == dim) return -1;
        if (pl[i].kind == LDT_PLACE_SHARD && pl[i].dim == dim) out[n++] = i;
    }
    return n;
}

/* The chunks along dim of x under pl, one per coordinate of the sharding mesh dims sd in
 * row-major order (the other coordinates at `base`, or 0): calls fn with each chunk's start
 * and length. Chunks along dim do not depend on the other mesh dims. */
static ldt_status ix_each_chunk(const ldt_mesh *mesh, const ldt_tensor *x, const ldt_placement *pl,
                                const int *sd, int ns, int dim, const int64_t *base,
                                ldt_status (*fn)(void *u, int64_t lo, int64_t len), void *u) {
    int nd = ldt_mesh_ndim(mesh);
    int64_t coord[LDT_MAX_DIMS];
    ldt_spec spec;
    ldt_region r;
    LDT_CHECK(ldt_spec_init(&spec, mesh, x->shape, pl, nd, (ldt_dtype)x->dtype));
    for (int i = 0; i < nd; i++) coord[i] = base ? base[i] : 0;
    for (int i = 0; i < ns; i++) coord[sd[i]] = 0;
    for (;;) {
        int j;
        LDT_CHECK(ldt_layout_coord(&spec, coord, &r));
        LDT_CHECK(fn(u, r.offset[dim], r.local_shape.dims[dim]));
        for (j = ns - 1; j >= 0; j--) { /* odometer, the innermost sharding dim fastest */
            if (++coord[sd[j]] < ldt_mesh_dim_size(mesh, sd[j])) break;
            coord[sd[j]] = 0;
        }
        if (j < 0) return LDT_OK;
    }
}

/* topk: every chunk holds k or more entries, or none. */
typedef struct ix_fit {
    int64_t k;
    int ok;
} ix_fit;

static ldt_status ix_fit_fn(void *u, int64_t lo, int64_t len) {
    ix_fit *f = u;
    (void)lo;
    if (len != 0 && len < f->k) f->ok = 0;
    return LDT_OK;
}

static int valid_index_reduce(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                              const ldt_placement *const *in) {
    const ldt_tensor *x = LDT__IN(t)[0];
    int dim = (int)t->attrs->i[0], nd = ldt_mesh_ndim(mesh), sd[LDT_MAX_DIMS], ns;
    ix_fit f = {1, 1};
    (void)out;
    ns = ix_shard_dims(in[0], nd, dim, sd);
    if (ns == 0) return 1;
    if (ns < 0 || x->dtype == LDT_BOOL || x->shape->dims[dim] == 0) return 0;
    if (!ix_is_topk(t->op)) return 1;
    f.k = t->attrs->i[1];
    if (f.k < 1) return 0;
    if (ix_each_chunk(mesh, x, in[0], sd, ns, dim, NULL, ix_fit_fn, &f) != LDT_OK) return 0;
    return f.ok;
}

/* The two all_reduces (one for topk values alone) of m * w candidates per local row. */
static double comm_index_reduce(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                                const ldt_placement *const *in, const ldt_cost_model *cm) {
    const ldt_tensor *x = LDT__IN(t)[0];
    const ldt_shape *xs = x->shape;
    int dim = (int)t->attrs->i[0], nd = ldt_mesh_ndim(mesh), sd[LDT_MAX_DIMS], ns;
    int64_t rows = 1, slots = 1, w = ix_is_topk(t->op) ? t->attrs->i[1] : 1, cands;
    double s;
    (void)out;
    ns = ix_shard_dims(in[0], nd, dim, sd);
    if (ns <= 0) return 0;
    for (int d = 0; d < xs->ndim; d++)
        if (d != dim) rows *= xs->dims[d];
    for (int i = 0; i < nd; i++)
        if (ldt__pl_is_shard(&in[0][i]) && in[0][i].dim != dim)
            rows = (rows + ldt_mesh_dim_size(mesh, i) - 1) / ldt_mesh_dim_size(mesh, i);
    for (int i = 0; i < ns; i++) slots *= ldt_mesh_dim_size(mesh, sd[i]);
    cands = rows * slots * w;
    s = ldt__all_reduce_seconds(cm, mesh, sd, ns,
                                cands * (int64_t)ldt_dtype_size((ldt_dtype)x->dtype));
    if (t->op != LDT_OP_TOPK_VALUES) s += ldt__all_reduce_seconds(cm, mesh, sd, ns, cands * 8);
    return s;
}

/* One sharded argmax/argmin/topk lowering. */
typedef struct ix_low {
    ldt__lower *L;
    const ldt__lnode *n;
    int32_t node;
    int op, dim, topk, want_idx;
    int64_t w;         /* winners per chunk */
    int64_t lo, len;   /* this rank's chunk along dim */
    int64_t m, slot;   /* non-empty chunks; this rank's slot among them (-1: empty here) */
    ldt_dtype xt;
    ldt_shape piece;   /* the local input with dim -> w */
    ldt_reduce_op vop; /* the values' all_reduce */
    double vfill;      /* its identity */
    int sd[LDT_MAX_DIMS], ns;
} ix_low;

#define IX_OOM LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory")

static ldt_status ix_slot_fn(void *u, int64_t lo, int64_t len) {
    ix_low *c = u;
    if (len == 0) return LDT_OK;
    if (c->len > 0 && lo < c->lo) c->slot++;
    c->m++;
    return LDT_OK;
}

static ldt_status ix_k(ix_low *c, int op, const ldt__attrs *a, int nin, const int32_t *in,
                       int32_t out) {
    return ldt__lower_kernel(c->L, c->node, op, a, nin, in, out, NULL, NULL);
}

static int32_t ix_val(ix_low *c, const ldt_shape *s, ldt_dtype dt) {
    return ldt__lower_value(c->L, s, dt, -1);
}

/* This rank's pieces: *v the winners' values, *gi their global indices (-1: not wanted). */
static ldt_status ix_local(ix_low *c, int32_t *v, int32_t *gi) {
    ldt__attrs a = *c->n->t->attrs;
    int32_t x = c->n->in_val[0], li, in[2];
    *gi = -1;
    if ((li = ix_val(c, &c->piece, LDT_I64)) < 0 || (*v = ix_val(c, &c->piece, c->xt)) < 0)
        IX_OOM;
    if (c->topk) {
        a.i[3] = 1; /* sorted: equal keys must stay in index order */
        LDT_CHECK(ix_k(c, LDT_OP_TOPK_INDICES, &a, 1, &x, li));
    } else {
        a.i[1] = 1; /* keepdim */
        LDT_CHECK(ix_k(c, c->op, &a, 1, &x, li));
    }
    memset(&a, 0, sizeof a);
    a.i[0] = c->dim;
    in[0] = x;
    in[1] = li;
    LDT_CHECK(ix_k(c, LDT_OP_GATHER, &a, 2, in, *v));
    if (!c->want_idx) return LDT_OK;
    if (c->lo == 0) {
        *gi = li;
        return LDT_OK;
    }
    if ((*gi = ix_val(c, &c->piece, LDT_I64)) < 0) IX_OOM;
    memset(&a, 0, sizeof a);
    a.f[0] = (double)c->lo;
    return ix_k(c, LDT_OP_ADD_SCALAR, &a, 1, &li, *gi);
}

/* The candidate buffer of dtype dt: `own` in this rank's slot and `fill` elsewhere (all fill
 * where this rank's chunk is empty), all_reduced with op. */
static ldt_status ix_candidates(ix_low *c, int32_t own, ldt_dtype dt, double fill,
                                ldt_reduce_op op, int32_t *out) {
    ldt_shape cs = c->piece, bs = c->piece, as = c->piece;
    int32_t in[3];
    int nin = 0;
    ldt__attrs a = {{0}, {0}};
    cs.dims[c->dim] = c->m * c->w;
    if (c->slot < 0) {
        if ((*out = ix_val(c, &cs, dt)) < 0) IX_OOM;
        LDT_CHECK(ldt__lower_fill(c->L, c->node, *out, fill));
    } else if (c->m == 1) {
        *out = own; /* a temporary of this lowering: reduced in place */
    } else {
        bs.dims[c->dim] = c->slot * c->w;
        as.dims[c->dim] = (c->m - 1 - c->slot) * c->w;
        if (c->slot > 0) {
            if ((in[nin] = ix_val(c, &bs, dt)) < 0) IX_OOM;
            LDT_CHECK(ldt__lower_fill(c->L, c->node, in[nin++], fill));
        }
        in[nin++] = own;
        if (c->slot < c->m - 1) {
            if ((in[nin] = ix_val(c, &as, dt)) < 0) IX_OOM;
            LDT_CHECK(ldt__lower_fill(c->L, c->node, in[nin++], fill));
        }
        if ((*out = ix_val(c, &cs, dt)) < 0) IX_OOM;
        a.i[0] = c->dim;
        LDT_CHECK(ix_k(c, LDT_OP_CAT, &a, nin, in, *out));
    }
    return ldt__lower_all_reduce(c->L, c->node, *out, op, c->ns, c->sd);
}

/* The op on the candidates: positions, then the global indices there, into the output. */
static ldt_status ix_final(ix_low *c, int32_t cv, int32_t ci) {
    ldt__attrs a = *c->n->t->attrs;
    const ldt_shape osv = c->L->p->vals[c->n->out_val].shape, *os = &osv; /* new values move vals */
    int32_t pos, g, in[2];
    if (c->op == LDT_OP_TOPK_VALUES) return ix_k(c, c->op, &a, 1, &cv, c->n->out_val);
    if ((pos = ix_val(c, &c->piece, LDT_I64)) < 0) IX_OOM;
    if (!c->topk) a.i[1] = 1; /* keepdim: gather wants the dim */
    LDT_CHECK(ix_k(c, c->op, &a, 1, &cv, pos));
    g = ldt_shape_equal(os, &c->piece) ? c->n->out_val : ix_val(c, &c->piece, LDT_I64);
    if (g < 0) IX_OOM;
    memset(&a, 0, sizeof a);
    a.i[0] = c->dim;
    in[0] = ci;
    in[1] = pos;
    LDT_CHECK(ix_k(c, LDT_OP_GATHER, &a, 2, in, g));
    if (g == c->n->out_val) return LDT_OK;
    return ix_k(c, LDT_OP_RESHAPE, NULL, 1, &g, c->n->out_val);
}

static ldt_status lower_index_reduce(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t, *x = LDT__IN(t)[0];
    int nd = ldt_mesh_ndim(n->mesh), largest;
    int64_t coord[LDT_MAX_DIMS];
    ix_low c;
    int32_t v = -1, gi = -1, cv = -1, ci = -1;
    memset(&c, 0, sizeof c);
    c.dim = (int)t->attrs->i[0];
    c.ns = ix_shard_dims(n->in[0], nd, c.dim, c.sd);
    if (c.ns == 0) return own_kernel(L, n);
    if (c.ns < 0)
        LDT_FAIL(LDT_ERR_INTERNAL, "lower: %s over an interleaved-sharded dim %d",
                 ldt__builtin_op_name(t->op), c.dim);
    c.L = L;
    c.n = n;
    c.node = t->id;
    c.op = t->op;
    c.topk = ix_is_topk(t->op);
    c.want_idx = t->op != LDT_OP_TOPK_VALUES;
    c.w = c.topk ? t->attrs->i[1] : 1;
    c.xt = (ldt_dtype)x->dtype;
    c.piece = L->p->vals[n->in_val[0]].shape;
    c.piece.dims[c.dim] = c.w;
    c.len = L->p->vals[n->in_val[0]].shape.dims[c.dim];
    largest = c.topk ? t->attrs->i[2] != 0 : t->op == LDT_OP_ARGMAX;
    if (!ldt_dtype_is_float(c.xt)) {
        c.vop = LDT_REDUCE_SUM;
        c.vfill = 0;
    } else {
        c.vop = largest ? LDT_REDUCE_MAX : LDT_REDUCE_MIN;
        c.vfill = largest ? -INFINITY : INFINITY;
    }
    LDT_CHECK(ldt_mesh_coord(n->mesh, n->rank, coord));
    {
        ldt_spec spec;
        ldt_region r;
        LDT_CHECK(ldt_spec_init(&spec, n->mesh, x->shape, n->in[0], nd, c.xt));
        LDT_CHECK(ldt_layout(&spec, n->rank, &r));
        c.lo = r.offset[c.dim];
    }
    /* this rank's slot among the non-empty chunks, in global order */
    LDT_CHECK(ix_each_chunk(n->mesh, x, n->in[0], c.sd, c.ns, c.dim, coord, ix_slot_fn, &c));
    if (c.len > 0) {
        LDT_CHECK(ix_local(&c, &v, &gi));
    } else {
        c.slot = -1; /* the kernels never run on an empty dim: fills stand in */
    }
    LDT_CHECK(ix_candidates(&c, v, c.xt, c.vfill, c.vop, &cv));
    if (c.want_idx) LDT_CHECK(ix_candidates(&c, gi, LDT_I64, -1, LDT_REDUCE_MAX, &ci));
    return ix_final(&c, cv, ci);
}

void ldt__strategies_reduce(ldt__op_strategy *rows) {
    for (int op = LDT_OP_SUM; op <= LDT_OP_AMIN; op++) rows[op].options = so_reduce;
    rows[LDT_OP_MEAN].lower = lower_mean;
    rows[LDT_OP_AMAX].lower = lower_minmax;
    rows[LDT_OP_AMIN].lower = lower_minmax;
    for (int op = LDT_OP_ARGMAX; op <= LDT_OP_TOPK_INDICES; op++) {
        rows[op].options = so_index_reduce;
        rows[op].valid = valid_index_reduce;
        rows[op].lower = lower_index_reduce;
        rows[op].comm = comm_index_reduce;
    }
}
