/* Strategies of the nn ops: softmax and the norms need their normalised dims whole (the other
 * dims follow; a norm's weight and bias, shaped like the normalised dims, stay Replicate),
 * dropout follows its input by global index, cross_entropy runs batch- and vocab-parallel with
 * run-time global maxes, sums and counts, and attention shards batch/head dims (and Lq, Ev). */
#include <math.h>

#include "core/error.h"
#include "planner/program.h"

/* Option: x and the output sharded alike on dim d (Shard, and InterleavedShard for the
 * graph's block counts), every other input Replicate. */
static void follow_dim(ldt__opts1 *o, int d) {
    const ldt_shape *x = LDT__SIN(o, 0);
    ldt_placement in[LDT__SMAX_IN];
    for (int k = 1; k < o->nin; k++) in[k] = ldt_replicate();
    in[0] = ldt_shard(d);
    ldt__opt_add(o, in[0], in);
    for (int i = 0; i < o->niks; i++)
        if (o->iks[i] > 1 && x->dims[d] % o->iks[i] == 0) {
            in[0] = ldt_interleaved_shard(d, o->iks[i]);
            ldt__opt_add(o, in[0], in);
        }
}

/* softmax, log_softmax: every dim but attrs.i[0]. */
static void so_softmax(ldt__opts1 *o) {
    for (int d = 0; d < LDT__SIN(o, 0)->ndim; d++)
        if (d != o->t->attrs->i[0]) follow_dim(o, d);
}

/* layer_norm, rms_norm: the leading dims, before the i[0] normalised trailing ones. */
static void so_norm(ldt__opts1 *o) {
    int lead = LDT__SIN(o, 0)->ndim - (int)o->t->attrs->i[0];
    for (int d = 0; d < lead; d++) follow_dim(o, d);
}

/* dropout: any dim (the mask is drawn by global index), and a Partial(sum) input, since
 * x -> mask * x / (1 - p) is linear and every rank draws the same mask for the whole tensor. */
static void so_dropout(ldt__opts1 *o) {
    for (int d = 0; d < LDT__SIN(o, 0)->ndim; d++) follow_dim(o, d);
    ldt__opt_all(o, ldt_partial(LDT_REDUCE_SUM));
}

/* ---------------------------------------------------------------------------------------
 * Attention: q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] -> [..., Lq, Ev].
 */
static void so_sdpa(ldt__opts1 *o) {
    int n = LDT__SOUT(o)->ndim, causal = o->t->attrs->i[2] != 0;
    int dropout = o->t->attrs->f[0] > 0;
    ldt_placement R = ldt_replicate(), P = ldt_partial(LDT_REDUCE_SUM);
    /* Ev: every rank holds the whole weights, so even the dropout mask's indices are global */
    ldt__opt_add(o, ldt_shard(n - 1), (ldt_placement[]){R, R, ldt_shard(n - 1)});
    ldt__opt_add(o, P, (ldt_placement[]){R, R, P}); /* linear in v */
    /* batch and head dims: the kernel maps its region's batches to global ones for the mask */
    for (int d = 0; d < n - 2; d++) ldt__opt_all(o, ldt_shard(d));
    /* Lq: rows are independent, but the causal mask needs their global positions and the
     * dropout mask whole rows */
    if (!causal && !dropout) ldt__opt_add(o, ldt_shard(n - 2), (ldt_placement[]){ldt_shard(n - 2), R, R});
}

/* ---------------------------------------------------------------------------------------
 * cross_entropy: logits [..., C], targets [...] -> 0-dim mean over non-ignored targets.
 * Options: the batch dims follow on both; the class dim sharded (vocab-parallel) with the
 * targets Replicate. The output is always Replicate: the lowering all_reduces what it needs.
 */
static void so_cross_entropy(ldt__opts1 *o) {
    int n = LDT__SIN(o, 0)->ndim;
    ldt_placement R = ldt_replicate();
    for (int d = 0; d < n - 1; d++)
        ldt__opt_add(o, R, (ldt_placement[]){ldt_shard(d), ldt_shard(d)});
    ldt__opt_add(o, R, (ldt_placement[]){ldt_shard(n - 1), R});
}

/* The collectives the lowering below issues: three all_reduces of one value per local row
 * over the class-sharding mesh dims (row max, exp sum, target logit), and two of one value
 * over the batch-sharding dims (loss sum, count). */
static double comm_cross_entropy(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                                 const ldt_placement *const *in, const ldt_cost_model *cm) {
    const ldt_shape *ls = LDT__IN(t)[0]->shape;
    int nd = ldt_mesh_ndim(mesh), vd[LDT_MAX_DIMS], bd[LDT_MAX_DIMS], nv, nb = 0;
    int64_t rows = 1, es = (int64_t)ldt_dtype_size((ldt_dtype)LDT__IN(t)[0]->dtype);
    (void)out;
    nv = ldt__shard_mesh_dims(in[0], nd, ls->ndim - 1, vd);
    for (int d = 0; d < ls->ndim - 1; d++) rows *= ls->dims[d];
    for (int i = 0; i < nd; i++)
        if (ldt__pl_is_shard(&in[0][i]) && in[0][i].dim != ls->ndim - 1) {
            bd[nb++] = i;
            rows = (rows + ldt_mesh_dim_size(mesh, i) - 1) / ldt_mesh_dim_size(mesh, i);
        }
    return 3 * ldt__all_reduce_seconds(cm, mesh, vd, nv, rows * es) +
           2 * ldt__all_reduce_seconds(cm, mesh, bd, nb, es);
}

/* The local buffers and mesh groups of one cross_entropy lowering. */
typedef struct ce_low {
    ldt__lower *L;
    const ldt__lnode *n;
    int32_t node;
    ldt_dtype ft, it;          /* the logits' and the targets' dtypes */
    ldt_shape rows, rows1, cls; /* local [b...], [b..., 1], [b..., Cl] */
    int vdims[LDT_MAX_DIMS], nv; /* mesh dims sharding the classes */
    int bdims[LDT_MAX_DIMS], nb; /* mesh dims sharding a batch dim */
    int64_t lo;                 /* this rank's first class */
} ce_low;

#define CE_OOM LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory")

static int32_t ce_val(ce_low *c, const ldt_shape *s, ldt_dtype dt) {
    return ldt__lower_value(c->L, s, dt, -1);
}

/* out = op(in) with attrs i = {i0, i1}, f = {f0}. */
static ldt_status ce_k(ce_low *c, int op, int64_t i0, int64_t i1, double f0, int nin,
                       const int32_t *in, int32_t out) {
    ldt__attrs a = {{0}, {0}};
    a.i[0] = i0;
    a.i[1] = i1;
    a.f[0] = f0;
    return ldt__lower_kernel(c->L, c->node, op, &a, nin, in, out, NULL, NULL);
}

/* A 0-dim constant of dtype dt. */
static ldt_status ce_const(ce_low *c, ldt_dtype dt, double v, int32_t *out) {
    ldt_shape s0 = {0, {0}};
    if ((*out = ce_val(c, &s0, dt)) < 0) CE_OOM;
    return ldt__lower_fill(c->L, c->node, *out, v);
}

static ldt_status ce_reduce(ce_low *c, int32_t v, ldt_reduce_op op, const int *dims, int nd) {
    return nd ? ldt__lower_all_reduce(c->L, c->node, v, op, nd, dims) : LDT_OK;
}

/* z = x - rowmax (global), lse = log(sum exp z) (global sum): [b..., Cl] and [b...]. */
static ldt_status ce_lse(ce_low *c, int32_t *z, int32_t *lse) {
    int last = c->cls.ndim - 1;
    int32_t m = ce_val(c, &c->rows1, c->ft), e = ce_val(c, &c->cls, c->ft);
    int32_t s = ce_val(c, &c->rows, c->ft);
    int32_t in[2];
    *z = ce_val(c, &c->cls, c->ft);
    *lse = ce_val(c, &c->rows, c->ft);
    if (m < 0 || e < 0 || s < 0 || *z < 0 || *lse < 0) CE_OOM;
    if (c->cls.dims[last] == 0) /* no classes here: the max of nothing */
        LDT_CHECK(ldt__lower_fill(c->L, c->node, m, -INFINITY));
    else
        LDT_CHECK(ce_k(c, LDT_OP_AMAX, (int64_t)1 << last, 1, 0, 1, &c->n->in_val[0], m));
    LDT_CHECK(ce_reduce(c, m, LDT_REDUCE_MAX, c->vdims, c->nv));
    in[0] = c->n->in_val[0];
    in[1] = m;
    LDT_CHECK(ce_k(c, LDT_OP_SUB, 0, 0, 0, 2, in, *z));
    LDT_CHECK(ce_k(c, LDT_OP_EXP, 0, 0, 0, 1, z, e));
    LDT_CHECK(ce_k(c, LDT_OP_SUM, (int64_t)1 << last, 0, 0, 1, &e, s));
    LDT_CHECK(ce_reduce(c, s, LDT_REDUCE_SUM, c->vdims, c->nv));
    return ce_k(c, LDT_OP_LOG, 0, 0, 0, 1, &s, *lse);
}

/* valid = targets != ignore; here = valid and lo <= target < lo + Cl; idx = target - lo where
 * here, else 0 (a safe index). All [b...]. */
static ldt_status ce_masks(ce_low *c, int32_t *valid, int32_t *here, int32_t *idx) {
    int32_t tg = c->n->in_val[1], ign, lo, cl, zero, no, rel, ge, lt, rng, in[3];
    int64_t ncl = c->cls.dims[c->cls.ndim - 1];
    *valid = ce_val(c, &c->rows, LDT_BOOL);
    *here = ce_val(c, &c->rows, LDT_BOOL);
    *idx = ce_val(c, &c->rows, c->it);
    rel = ce_val(c, &c->rows, c->it);
    ge = ce_val(c, &c->rows, LDT_BOOL);
    lt = ce_val(c, &c->rows, LDT_BOOL);
    rng = ce_val(c, &c->rows, LDT_BOOL);
    if (*valid < 0 || *here < 0 || *idx < 0 || rel < 0 || ge < 0 || lt < 0 || rng < 0)
        CE_OOM;
    LDT_CHECK(ce_const(c, c->it, (double)c->n->t->attrs->i[0], &ign));
    LDT_CHECK(ce_const(c, c->it, (double)c->lo, &lo));
    LDT_CHECK(ce_const(c, c->it, (double)ncl, &cl));
    LDT_CHECK(ce_const(c, c->it, 0, &zero));
    LDT_CHECK(ce_const(c, LDT_BOOL, 0, &no));
    LDT_CHECK(ce_k(c, LDT_OP_NE, 0, 0, 0, 2, (int32_t[]){tg, ign}, *valid));
    LDT_CHECK(ce_k(c, LDT_OP_SUB, 0, 0, 0, 2, (int32_t[]){tg, lo}, rel));
    LDT_CHECK(ce_k(c, LDT_OP_GE, 0, 0, 0, 2, (int32_t[]){rel, zero}, ge));
    LDT_CHECK(ce_k(c, LDT_OP_LT, 0, 0, 0, 2, (int32_t[]){rel, cl}, lt));
    /* here = valid && ge && lt, as two wheres (there is no logical and) */
    in[0] = ge, in[1] = lt, in[2] = no;
    LDT_CHECK(ce_k(c, LDT_OP_WHERE, 0, 0, 0, 3, in, rng));
    in[0] = *valid, in[1] = rng, in[2] = no;
    LDT_CHECK(ce_k(c, LDT_OP_WHERE, 0, 0, 0, 3, in, *here));
    in[0] = *here, in[1] = rel, in[2] = zero;
    return ce_k(c, LDT_OP_WHERE, 0, 0, 0, 3, in, *idx);
}

/* picked = z[target] where the target's class is here, else 0; summed over the vocab ranks
 * (one holds it, the others add exact zeros): [b...]. */
static ldt_status ce_picked(ce_low *c, int32_t z, int32_t here, int32_t idx, int32_t *picked) {
    int last = c->cls.ndim - 1;
    int32_t idx1 = ce_val(c, &c->rows1, c->it), g1 = ce_val(c, &c->rows1, c->ft);
    int32_t g = ce_val(c, &c->rows, c->ft), fz, in[3];
    *picked = ce_val(c, &c->rows, c->ft);
    if (idx1 < 0 || g1 < 0 || g < 0 || *picked < 0) CE_OOM;
    LDT_CHECK(ce_const(c, c->ft, 0, &fz));
    if (c->cls.dims[last] == 0) {
        LDT_CHECK(ldt__lower_fill(c->L, c->node, *picked, 0));
    } else {
        LDT_CHECK(ce_k(c, LDT_OP_RESHAPE, 0, 0, 0, 1, &idx, idx1));
        LDT_CHECK(ce_k(c, LDT_OP_GATHER, last, 0, 0, 2, (int32_t[]){z, idx1}, g1));
        LDT_CHECK(ce_k(c, LDT_OP_RESHAPE, 0, 0, 0, 1, &g1, g));
        in[0] = here, in[1] = g, in[2] = fz;
        LDT_CHECK(ce_k(c, LDT_OP_WHERE, 0, 0, 0, 3, in, *picked));
    }
    return ce_reduce(c, *picked, LDT_REDUCE_SUM, c->vdims, c->nv);
}

/* The mean over valid rows: sum(where(valid, lse - picked, 0)) / count, both summed over the
 * batch ranks. */
static ldt_status ce_mean(ce_low *c, int32_t lse, int32_t picked, int32_t valid) {
    ldt_shape s0 = {0, {0}};
    uint64_t all = ((uint64_t)1 << c->rows.ndim) - 1;
    int32_t loss = ce_val(c, &c->rows, c->ft), ml = ce_val(c, &c->rows, c->ft);
    int32_t vf = ce_val(c, &c->rows, c->ft), tot = ce_val(c, &s0, c->ft);
    int32_t cnt = ce_val(c, &s0, c->ft);
    int32_t fz, in[3];
    if (loss < 0 || ml < 0 || vf < 0 || tot < 0 || cnt < 0) CE_OOM;
    LDT_CHECK(ce_const(c, c->ft, 0, &fz));
    LDT_CHECK(ce_k(c, LDT_OP_SUB, 0, 0, 0, 2, (int32_t[]){lse, picked}, loss));
    in[0] = valid, in[1] = loss, in[2] = fz;
    LDT_CHECK(ce_k(c, LDT_OP_WHERE, 0, 0, 0, 3, in, ml));
    LDT_CHECK(ce_k(c, LDT_OP_CAST, 0, 0, 0, 1, &valid, vf));
    LDT_CHECK(ce_k(c, LDT_OP_SUM, (int64_t)all, 0, 0, 1, &ml, tot));
    LDT_CHECK(ce_k(c, LDT_OP_SUM, (int64_t)all, 0, 0, 1, &vf, cnt));
    LDT_CHECK(ce_reduce(c, tot, LDT_REDUCE_SUM, c->bdims, c->nb));
    LDT_CHECK(ce_reduce(c, cnt, LDT_REDUCE_SUM, c->bdims, c->nb));
    return ce_k(c, LDT_OP_DIV, 0, 0, 0, 2, (int32_t[]){tot, cnt}, c->n->out_val);
}

/* Fills the local shapes, the mesh dims of each kind and this rank's first class. */
static ldt_status ce_init(ce_low *c, ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *x = LDT__IN(n->t)[0];
    int nd = ldt_mesh_ndim(n->mesh), last = x->shape->ndim - 1;
    ldt_spec spec;
    ldt_region r;
    c->L = L;
    c->n = n;
    c->node = n->t->id;
    c->ft = (ldt_dtype)x->dtype;
    c->it = (ldt_dtype)LDT__IN(n->t)[1]->dtype;
    c->cls = L->p->vals[n->in_val[0]].shape;
    c->rows = L->p->vals[n->in_val[1]].shape;
    c->rows1 = c->cls;
    c->rows1.dims[last] = 1;
    c->nv = c->nb = 0;
    for (int i = 0; i < nd; i++) {
        if (!ldt__pl_is_shard(&n->in[0][i])) continue;
        if (n->in[0][i].dim == last)
            c->vdims[c->nv++] = i;
        else
            c->bdims[c->nb++] = i;
    }
    LDT_CHECK(ldt_spec_init(&spec, n->mesh, x->shape, n->in[0], nd, c->ft));
    LDT_CHECK(ldt_layout(&spec, n->rank, &r));
    c->lo = r.offset[last];
    return LDT_OK;
}

static ldt_status lower_cross_entropy(ldt__lower *L, const ldt__lnode *n) {
    ce_low c;
    int32_t z, lse, valid, here, idx, picked;
    LDT_CHECK(ce_init(&c, L, n));
    if (!c.nv && !c.nb) /* all Replicate: the fused kernel, as one device runs it */
        return ldt__lower_kernel(L, c.node, n->t->op, n->t->attrs, 2, n->in_val, n->out_val,
                                 NULL, NULL);
    LDT_CHECK(ce_lse(&c, &z, &lse));
    LDT_CHECK(ce_masks(&c, &valid, &here, &idx));
    LDT_CHECK(ce_picked(&c, z, here, idx, &picked));
    return ce_mean(&c, lse, picked, valid);
}

void ldt__strategies_nn(ldt__op_strategy *rows) {
    rows[LDT_OP_SOFTMAX].options = so_softmax;
    rows[LDT_OP_LOG_SOFTMAX].options = so_softmax;
    rows[LDT_OP_LAYER_NORM].options = so_norm;
    rows[LDT_OP_RMS_NORM].options = so_norm;
    rows[LDT_OP_DROPOUT].options = so_dropout;
    rows[LDT_OP_DROPOUT].needs_region = 1;
    rows[LDT_OP_CROSS_ENTROPY].options = so_cross_entropy;
    rows[LDT_OP_CROSS_ENTROPY].lower = lower_cross_entropy;
    rows[LDT_OP_CROSS_ENTROPY].comm = comm_cross_entropy;
    rows[LDT_OP_SDPA].options = so_sdpa;
    rows[LDT_OP_SDPA].needs_region = 1;
}
