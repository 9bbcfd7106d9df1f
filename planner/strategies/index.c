/* Strategies of the indexing ops: dims that are not indexed follow (where the operands that
 * pair up position by position have equal sizes there), the indexed dim stays whole, a
 * Partial(sum) x (and src/values) passes through (every op here is linear in them jointly),
 * and embedding also runs vocab-parallel: weight S0 -> Partial(sum), each rank looking up
 * only the rows it holds. gather (x sharded along its indexed dim -> Partial(sum)),
 * scatter_add and index_add (x sharded along it -> the same shard) run the same way: each
 * rank takes or adds only the indices that fall in its rows (masked local lowering), so a
 * vocab-sharded table or logits never move for a lookup or its gradient. */
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


/* ---------------------------------------------------------------------------------------
 * Masked local lowering: x sharded along the indexed dim `dim` (contiguous rows [lo, lo+n)
 * here), the index whole there. An index i is this rank's when lo <= i < lo + n; the kernel
 * then runs on i - lo, and the others read (or add) nothing.
 */
typedef struct masked {
    ldt__lower *L;
    int32_t node;
    int64_t lo, n; /* this rank's rows of x along dim */
    int32_t here;  /* bool, the index's local shape: the index is in [lo, lo + n) */
    int32_t safe;  /* the index's dtype: index - lo where here, else 0 */
} masked;

#define M_OOM LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory")

static ldt_status m_k(masked *m, int op, int64_t i0, int nin, const int32_t *in, int32_t out) {
    ldt__attrs a = {{0}, {0}};
    a.i[0] = i0;
    return ldt__lower_kernel(m->L, m->node, op, &a, nin, in, out, NULL, NULL);
}

/* A 0-dim constant. */
static ldt_status m_const(masked *m, ldt_dtype dt, double v, int32_t *out) {
    ldt_shape s0 = {0, {0}};
    if ((*out = ldt__lower_value(m->L, &s0, dt, -1)) < 0) M_OOM;
    return ldt__lower_fill(m->L, m->node, *out, v);
}

/* The rows of input 0 (x) along dim on this rank, and whether dim is sharded at all (0: the
 * op's own kernel does). */
static ldt_status m_rows(ldt__lower *L, const ldt__lnode *n, int dim, masked *m, int *sharded) {
    const ldt_tensor *x = LDT__IN(n->t)[0];
    int nd = ldt_mesh_ndim(n->mesh), dims[LDT_MAX_DIMS];
    ldt_spec spec;
    ldt_region r;
    m->L = L;
    m->node = n->t->id;
    *sharded = ldt__shard_mesh_dims(n->in[0], nd, dim, dims) > 0;
    if (!*sharded) return LDT_OK;
    LDT_CHECK(ldt_spec_init(&spec, n->mesh, x->shape, n->in[0], nd, (ldt_dtype)x->dtype));
    LDT_CHECK(ldt_layout(&spec, n->rank, &r));
    if (r.runs[dim].blocks > 1)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "lower %s: its x is interleaved along the indexed dim %d",
                 ldt__builtin_op_name(n->t->op), dim);
    m->lo = r.offset[dim];
    m->n = r.local_shape.dims[dim];
    return LDT_OK;
}

/* here and safe for the index value idx (local shape s, dtype it). */
static ldt_status m_index(masked *m, int32_t idx, const ldt_shape *s_in, ldt_dtype it) {
    int32_t lo, hi, zero, no, rel, ge, lt;
    const ldt_shape s_copy = *s_in, *s = &s_copy; /* s_in may be a value the growth below moves */
    m->here = ldt__lower_value(m->L, s, LDT_BOOL, -1);
    m->safe = ldt__lower_value(m->L, s, it, -1);
    rel = ldt__lower_value(m->L, s, it, -1);
    ge = ldt__lower_value(m->L, s, LDT_BOOL, -1);
    lt = ldt__lower_value(m->L, s, LDT_BOOL, -1);
    if (m->here < 0 || m->safe < 0 || rel < 0 || ge < 0 || lt < 0) M_OOM;
    LDT_CHECK(m_const(m, it, (double)m->lo, &lo));
    LDT_CHECK(m_const(m, it, (double)m->n, &hi));
    LDT_CHECK(m_const(m, it, 0, &zero));
    LDT_CHECK(m_const(m, LDT_BOOL, 0, &no));
    LDT_CHECK(m_k(m, LDT_OP_SUB, 0, 2, (int32_t[]){idx, lo}, rel));
    LDT_CHECK(m_k(m, LDT_OP_GE, 0, 2, (int32_t[]){rel, zero}, ge));
    LDT_CHECK(m_k(m, LDT_OP_LT, 0, 2, (int32_t[]){rel, hi}, lt));
    LDT_CHECK(m_k(m, LDT_OP_WHERE, 0, 3, (int32_t[]){ge, lt, no}, m->here)); /* ge and lt */
    return m_k(m, LDT_OP_WHERE, 0, 3, (int32_t[]){m->here, rel, zero}, m->safe);
}

/* gather(x, index; dim) with x sharded along dim: the owner's element, 0 elsewhere (the
 * output a Partial(sum)). */
static ldt_status lower_gather(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t;
    /* copies: new values move L->p->vals */
    const ldt__value iv = L->p->vals[n->in_val[1]];
    const ldt_shape os = L->p->vals[n->out_val].shape;
    int dim = (int)t->attrs->i[0], sharded;
    masked m;
    int32_t g, fz;
    LDT_CHECK(m_rows(L, n, dim, &m, &sharded));
    if (!sharded)
        return ldt__lower_kernel(L, t->id, t->op, t->attrs, 2, n->in_val, n->out_val, NULL, NULL);
    if (m.n == 0) return ldt__lower_fill(L, t->id, n->out_val, 0); /* no rows here */
    LDT_CHECK(m_index(&m, n->in_val[1], &iv.shape, (ldt_dtype)iv.dtype));
    if ((g = ldt__lower_value(L, &os, (ldt_dtype)t->dtype, -1)) < 0) M_OOM;
    LDT_CHECK(m_const(&m, (ldt_dtype)t->dtype, 0, &fz));
    LDT_CHECK(m_k(&m, LDT_OP_GATHER, dim, 2, (int32_t[]){n->in_val[0], m.safe}, g));
    return m_k(&m, LDT_OP_WHERE, 0, 3, (int32_t[]){m.here, g, fz}, n->out_val);
}

/* scatter_add(x, index, src; dim) and index_add(x, index, src; dim) with x sharded along dim:
 * each rank adds the src entries whose index is its own (the others add exact zeros to its
 * row 0). index_add's 1-D index masks src through a view with the index's length at dim. */
static ldt_status lower_add_at(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t;
    /* copies: new values move L->p->vals */
    const ldt__value iv = L->p->vals[n->in_val[1]], sv = L->p->vals[n->in_val[2]];
    int dim = (int)t->attrs->i[0], sharded;
    masked m;
    int32_t here = -1, src, fz;
    LDT_CHECK(m_rows(L, n, dim, &m, &sharded));
    if (!sharded)
        return ldt__lower_kernel(L, t->id, t->op, t->attrs, 3, n->in_val, n->out_val, NULL, NULL);
    if (m.n == 0) return ldt__lower_fill(L, t->id, n->out_val, 0); /* no rows here: empty */
    LDT_CHECK(m_index(&m, n->in_val[1], &iv.shape, (ldt_dtype)iv.dtype));
    here = m.here;
    if (t->op == LDT_OP_INDEX_ADD) { /* [L] -> [1, .., L at dim, .., 1] */
        ldt_shape b = {sv.shape.ndim, {0}};
        for (int d = 0; d < b.ndim; d++) b.dims[d] = d == dim ? iv.shape.dims[0] : 1;
        if ((here = ldt__lower_value(L, &b, LDT_BOOL, -1)) < 0) M_OOM;
        LDT_CHECK(m_k(&m, LDT_OP_RESHAPE, 0, 1, &m.here, here));
    }
    if ((src = ldt__lower_value(L, &sv.shape, (ldt_dtype)sv.dtype, -1)) < 0) M_OOM;
    LDT_CHECK(m_const(&m, (ldt_dtype)sv.dtype, 0, &fz));
    LDT_CHECK(m_k(&m, LDT_OP_WHERE, 0, 3, (int32_t[]){here, n->in_val[2], fz}, src));
    return m_k(&m, t->op, dim, 3, (int32_t[]){n->in_val[0], m.safe, src}, n->out_val);
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
    /* x sharded along dim (vocab-parallel logits): the owner's element, a Partial(sum) */
    if (ldt_dtype_is_float((ldt_dtype)o->t->dtype))
        ldt__opt_add(o, ldt_partial(LDT_REDUCE_SUM), (ldt_placement[]){ldt_shard(dim), R_});
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

/* scatter_add also with x sharded along dim, the index and src whole: each rank adds what
 * falls in its rows (gather's gradient on vocab-parallel logits). */
static void so_scatter_add(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    so_scatter(o);
    ldt__opt_add(o, ldt_shard(dim), (ldt_placement[]){ldt_shard(dim), R_, R_});
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
    /* x sharded along dim, index and src whole: each rank adds the rows it holds (a
     * vocab-parallel embedding's gradient) */
    ldt__opt_add(o, ldt_shard(dim), (ldt_placement[]){ldt_shard(dim), R_, R_});
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
    rows[LDT_OP_GATHER].lower = lower_gather;
    rows[LDT_OP_SCATTER].options = so_scatter;
    rows[LDT_OP_SCATTER_ADD].options = so_scatter_add;
    rows[LDT_OP_SCATTER_ADD].lower = lower_add_at;
    rows[LDT_OP_INDEX_ADD].options = so_index_add;
    rows[LDT_OP_INDEX_ADD].lower = lower_add_at;
    rows[LDT_OP_INDEX_PUT].options = so_index_put;
}
