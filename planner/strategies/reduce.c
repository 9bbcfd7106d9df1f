/* Strategies of the reductions: sum/mean/amax/amin over a sharded dim give Partial(sum/max/
 * min) (mean divides its local sum by the global count), kept dims follow; argmax, argmin and
 * topk need their dim whole and let the other dims follow. */
#include <math.h>

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

/* argmax/argmin (attrs {dim, keepdim}) and topk (attrs {dim, k, ...}, the dim kept with size
 * k): every dim but `dim` follows. */
static void so_index_reduce(ldt__opts1 *o) {
    const ldt_shape *x = LDT__SIN(o, 0);
    int dim = (int)o->t->attrs->i[0];
    int topk = o->t->op == LDT_OP_TOPK_VALUES || o->t->op == LDT_OP_TOPK_INDICES;
    int keep = topk || o->t->attrs->i[1] != 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        ldt_placement p = ldt_shard(d);
        ldt__opt_add(o, ldt_shard(!keep && d > dim ? d - 1 : d), &p);
    }
}

void ldt__strategies_reduce(ldt__op_strategy *rows) {
    for (int op = LDT_OP_SUM; op <= LDT_OP_AMIN; op++) rows[op].options = so_reduce;
    rows[LDT_OP_MEAN].lower = lower_mean;
    rows[LDT_OP_AMAX].lower = lower_minmax;
    rows[LDT_OP_AMIN].lower = lower_minmax;
    for (int op = LDT_OP_ARGMAX; op <= LDT_OP_TOPK_INDICES; op++)
        rows[op].options = so_index_reduce;
}
