/* Strategies of the indexing ops: dims that are not indexed follow (where the operands that
 * pair up position by position have equal sizes there), the indexed dim stays whole, a
 * Partial(sum) x (and src/values) passes through (every op here is linear in them jointly),
 * and embedding also runs vocab-parallel: weight S0 -> Partial(sum), each rank looking up
 * only the rows it holds. */
#include "core/error.h"
#include "planner/program.h"

#define R_ ldt_replicate()

/* The option where the output holds S(dout), the inputs in `follow` (a bit mask) S(d) and
 * the others Replicate. */
static void shard_some(ldt__opts1 *o, int dout, int d, unsigned follow) {
    ldt_placement in[LDT__SMAX_IN];
    for (int k = 0; k < o->nin; k++) in[k] = (follow >> k) & 1u ? ldt_shard(d) : R_;
    ldt__opt_add(o, ldt_shard(dout), in);
}

/* Partial(sum) through an op linear in the inputs of mask `lin` (the rest Replicate). */
static void partial_through(ldt__opts1 *o, unsigned lin) {
    ldt_placement P = ldt_partial(LDT_REDUCE_SUM), in[LDT__SMAX_IN];
    if (!ldt_dtype_is_float((ldt_dtype)o->t->dtype)) return;
    for (int k = 0; k < o->nin; k++) in[k] = (lin >> k) & 1u ? P : R_;
    ldt__opt_add(o, P, in);
}

/* ---------------------------------------------------------------------------------------
 * embedding: weight [V, H], indices [...] -> [..., H].
 */
static void so_embedding(ldt__opts1 *o) {
    int ni = LDT__SIN(o, 1)->ndim;
    for (int d = 0; d < ni; d++) ldt__opt_add(o, ldt_shard(d), (ldt_placement[]){R_, ldt_shard(d)});
    ldt__opt_add(o, ldt_shard(ni), (ldt_placement[]){ldt_shard(1), R_}); /* hidden */
    if (!ldt_dtype_is_float((ldt_dtype)o->t->dtype)) return;
    ldt__opt_add(o, ldt_partial(LDT_REDUCE_SUM), (ldt_placement[]){ldt_shard(0), R_}); /* vocab */
    partial_through(o, 1u);
}

/* The kernel in range mode (attrs {1, lo, V}) when the weight's rows are sharded: lo is the
 * first row of this rank's region of the weight. */
static ldt_status lower_embedding(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *w = LDT__IN(n->t)[0];
    int nd = ldt_mesh_ndim(n->mesh), dims[LDT_MAX_DIMS];
    ldt__attrs a = {{0}, {0}};
    ldt_spec spec;
    ldt_region r;
    if (!ldt__shard_mesh_dims(n->in[0], nd, 0, dims))
        return ldt__lower_kernel(L, n->t->id, n->t->op, n->t->attrs, 2, n->in_val, n->out_val,
                                 NULL, NULL);
    LDT_CHECK(ldt_spec_init(&spec, n->mesh, w->shape, n->in[0], nd, (ldt_dtype)w->dtype));
    LDT_CHECK(ldt_layout(&spec, n->rank, &r));
    a.i[0] = 1;
    a.i[1] = r.offset[0];
    a.i[2] = w->shape->dims[0];
    return ldt__lower_kernel(L, n->t->id, n->t->op, &a, 2, n->in_val, n->out_val, NULL, NULL);
}

/* one_hot: indices [...] -> [..., C]; the batch dims follow. */
static void so_one_hot(ldt__opts1 *o) {
    for (int d = 0; d < LDT__SIN(o, 0)->ndim; d++) shard_some(o, d, d, 1u);
}

/* index_select(x, index [L]; dim): x's other dims follow; a sharded index shards the output
 * along dim (x whole there). */
static void so_index_select(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    for (int d = 0; d < LDT__SIN(o, 0)->ndim; d++)
        if (d != dim) shard_some(o, d, d, 1u);
    shard_some(o, dim, 0, 2u);
    partial_through(o, 1u);
}

/* 1 when every input in mask `m` has dim d of size n. */
static int sizes_eq(const ldt__opts1 *o, unsigned m, int d, int64_t n) {
    for (int k = 0; k < o->nin; k++)
        if (((m >> k) & 1u) && LDT__SIN(o, k)->dims[d] != n) return 0;
    return 1;
}

/* gather(x, index; dim) -> index's shape: x and index pair up position by position on the
 * other dims, so those follow where both have one size; along dim the index alone may be
 * sharded (x whole). */
static void so_gather(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    const ldt_shape *x = LDT__SIN(o, 0);
    for (int d = 0; d < x->ndim; d++)
        if (d != dim && sizes_eq(o, 2u, d, x->dims[d])) shard_some(o, d, d, 3u);
    shard_some(o, dim, dim, 2u);
    partial_through(o, 1u);
}

/* scatter, scatter_add (x, index, src; dim) -> x's shape: the other dims follow where x,
 * index and src have one size. */
static void so_scatter(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    const ldt_shape *x = LDT__SIN(o, 0);
    for (int d = 0; d < x->ndim; d++)
        if (d != dim && sizes_eq(o, 6u, d, x->dims[d])) shard_some(o, d, d, 7u);
    partial_through(o, 5u);
}

/* index_add(x, index [L], src; dim): src is x's shape but L along dim. */
static void so_index_add(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    for (int d = 0; d < LDT__SIN(o, 0)->ndim; d++)
        if (d != dim) shard_some(o, d, d, 5u);
    partial_through(o, 5u); /* x and src */
    /* the added rows split: each rank adds its share of them (index and src chunked alike)
     * into a Partial(sum) x, as a data-parallel embedding gradient is made */
    if (ldt_dtype_is_float((ldt_dtype)o->t->dtype))
        ldt__opt_add(o, ldt_partial(LDT_REDUCE_SUM),
                     (ldt_placement[]){ldt_partial(LDT_REDUCE_SUM), ldt_shard(0), ldt_shard(dim)});
}

/* index_put(x, values, idx_0..idx_{k-1}): x's dims from k on follow; values broadcast to
 * [L, x.dims[k:]], sharded alike where they have the full size, else Replicate. */
static void so_index_put(ldt__opts1 *o) {
    const ldt_shape *x = LDT__SIN(o, 0), *v = LDT__SIN(o, 1);
    int k = (int)o->t->attrs->i[1], vnd = 1 + x->ndim - k;
    for (int d = k; d < x->ndim; d++) {
        int vd = (d - k + 1) - (vnd - v->ndim);
        ldt_placement in[LDT__SMAX_IN];
        for (int j = 0; j < o->nin; j++) in[j] = R_;
        in[0] = ldt_shard(d);
        if (vd >= 0 && v->dims[vd] == x->dims[d]) in[1] = ldt_shard(vd);
        ldt__opt_add(o, ldt_shard(d), in);
    }
    partial_through(o, 3u);
}

void ldt__strategies_index(ldt__op_strategy *rows) {
    rows[LDT_OP_EMBEDDING].options = so_embedding;
    rows[LDT_OP_EMBEDDING].lower = lower_embedding;
    rows[LDT_OP_ONE_HOT].options = so_one_hot;
    rows[LDT_OP_INDEX_SELECT].options = so_index_select;
    rows[LDT_OP_GATHER].options = so_gather;
    rows[LDT_OP_SCATTER].options = so_scatter;
    rows[LDT_OP_SCATTER_ADD].options = so_scatter;
    rows[LDT_OP_INDEX_ADD].options = so_index_add;
    rows[LDT_OP_INDEX_PUT].options = so_index_put;
}
