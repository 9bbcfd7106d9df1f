/* Backward rules of the neural-network and indexing ops, composed of ordinary ops so the
 * planner shards them like any other (softmax through its output; norms recompute the
 * normalised input; cross_entropy as softmax minus the one-hot target over the count of
 * targets that count; dropout as the same mask on the gradient). */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "trace/autodiff.h"

#define IN(t, k) (LDT__IN(t)[k])

/* The trailing k dims of an n-dim tensor, as a dims list. */
static int trailing(int n, int k, int *dims) {
    for (int i = 0; i < k; i++) dims[i] = n - k + i;
    return k;
}

/* The leading dims (all but the trailing k). */
static int leading(int n, int k, int *dims) {
    for (int i = 0; i < n - k; i++) dims[i] = i;
    return n - k;
}

void ldt__r_softmax(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    int dim = (int)t->attrs->i[0];
    if (t->op == LDT_OP_SOFTMAX) /* y (g - sum(g y)) */
        gi[0] = ldt_mul(t, ldt_sub(g, ldt_sum(ldt_mul(g, t), &dim, 1, 1)));
    else /* log_softmax: g - exp(y) sum(g) */
        gi[0] = ldt_sub(g, ldt_mul(ldt_exp(t), ldt_sum(g, &dim, 1, 1)));
}

/* layer_norm and rms_norm over the trailing i[0] dims, weight and bias when i[1], i[2]. */
/* Every node a rule for pinned t recorded (ids from `first` on) with t's rank and no pin is
 * pinned to t's conjugate layout, when that splits none of the last k dims (the rows a norm
 * reduces): the backward runs where the forward ran (Megatron's layer norm on the whole
 * activation of every tensor-parallel rank), not split over ranks and gathered back, which a
 * roofline's prices can favour op by op. */
static void pin_rows(ldt_tensor *t, int64_t first, int k) {
    ldt_ctx *ctx = t->ctx;
    ldt_placement pl[LDT_MAX_DIMS];
    int nd = ldt_mesh_ndim(ctx->mesh), n = t->shape->ndim;
    if (!t->pin || !ldt__conjugate_of(t, 0, pl)) return;
    for (int d = 0; d < nd; d++)
        if ((pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD) && pl[d].dim >= n - k) return;
    for (int64_t i = first; i < ctx->nnodes; i++) {
        ldt_tensor *u = ctx->nodes[i];
        if (u->kind == LDT__NODE && !u->pin && u->shape->ndim == n) ldt_pin(u, pl, nd);
    }
}

void ldt__r_norm(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *w = t->attrs->i[1] ? IN(t, 1) : NULL;
    int k = (int)t->attrs->i[0], n = x->shape->ndim, nd[LDT_MAX_DIMS], ld[LDT_MAX_DIMS], nl;
    double eps = t->attrs->f[0];
    ldt_tensor *xc, *rstd, *xhat, *gh;
    int64_t first = t->ctx->nnodes;
    trailing(n, k, nd);
    nl = leading(n, k, ld);
    if (t->op == LDT_OP_LAYER_NORM) {
        xc = ldt_sub(x, ldt_mean(x, nd, k, 1));
        rstd = ldt_rsqrt(ldt_add_scalar(ldt_mean(ldt_mul(xc, xc), nd, k, 1), eps));
    } else {
        xc = x;
        rstd = ldt_rsqrt(ldt_add_scalar(ldt_mean(ldt_mul(x, x), nd, k, 1), eps));
    }
    xhat = ldt_mul(xc, rstd);
    gh = w ? ldt_mul(g, w) : g;
    if (t->op == LDT_OP_LAYER_NORM) /* rstd (gh - mean(gh) - xhat mean(gh xhat)) */
        gi[0] = ldt_mul(rstd, ldt_sub(ldt_sub(gh, ldt_mean(gh, nd, k, 1)),
                                      ldt_mul(xhat, ldt_mean(ldt_mul(gh, xhat), nd, k, 1))));
    else /* rstd (gh - xhat mean(gh xhat)) */
        gi[0] = ldt_mul(rstd, ldt_sub(gh, ldt_mul(xhat, ldt_mean(ldt_mul(gh, xhat), nd, k, 1))));
    if (w) gi[1] = nl ? ldt_sum(ldt_mul(g, xhat), ld, nl, 0) : ldt_mul(g, xhat);
    if (t->op == LDT_OP_LAYER_NORM && t->attrs->i[2]) gi[1 + (w != NULL)] = nl ? ldt_sum(g, ld, nl, 0) : g;
    pin_rows(t, first, k);
    for (int j = 1; j < t->nin; j++) gi[j] = ldt__param_grad(t, IN(t, j), gi[j], nl);
}

/* mean over targets that are not ignore_index of -log softmax(logits)[target]:
 * d/dlogits = (softmax - one_hot(target)) * valid / count, times the loss's gradient g. */
void ldt__r_cross_entropy(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *z = IN(t, 0), *tg = IN(t, 1);
    ldt_dtype dt = (ldt_dtype)z->dtype;
    int n = z->shape->ndim, last = n - 1;
    int64_t C = z->shape->dims[last], ign = t->attrs->i[0];
    ldt_shape col = *tg->shape;
    ldt_tensor *zero = ldt__scalar_const(t->ctx, (ldt_dtype)tg->dtype, 0), *valid, *safe, *oh, *vf, *count;
    /* target - ignore_index != 0: no new constant per backward pass */
    valid = ldt_ne(ldt_sub_scalar(tg, (double)ign), zero);
    safe = ldt_where(valid, tg, zero);
    oh = ldt_cast(ldt_one_hot(safe, C), dt);
    vf = ldt_cast(valid, dt);
    count = ldt_sum(vf, NULL, 0, 0);
    col.dims[col.ndim++] = 1;
    gi[0] = ldt_mul(ldt_mul(ldt_sub(ldt_softmax(z, last), oh), ldt_reshape(vf, &col)),
                    ldt_div(g, count));
}

/* The same mask and scale on the gradient: a dropout node with the forward's seed and
 * offset draws the very mask (element i from (seed, offset, i)). */
void ldt__r_dropout(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *d = ldt__record_a(t->ctx, LDT_OP_DROPOUT, &g, 1, g->shape, (ldt_dtype)g->dtype);
    if (d) *d->attrs = *t->attrs;
    gi[0] = d;
}

/* Zeros shaped and (when x is pinned) laid out like x: the buffer a gradient is added into
 * where the indices point, sharded as x so a vocab-sharded table or logits get a gradient
 * sharded alike without moving zeros. */
static ldt_tensor *zeros_as(ldt_tensor *x) {
    ldt_tensor *z = ldt__zeros_like(x);
    if (z) ldt__pin_conjugate(x, z, z->id, LDT__PIN_AS_LEAF);
    return z;
}

void ldt__r_index(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    int dim = (int)t->attrs->i[0];
    switch (t->op) {
    case LDT_OP_EMBEDDING: { /* rows of the weight, added where the indices took them */
        ldt_tensor *w = IN(t, 0), *idx = IN(t, 1);
        int64_t N = 1;
        for (int d = 0; d < idx->shape->ndim; d++) N *= idx->shape->dims[d];
        gi[0] = ldt_index_add(zeros_as(w), 0, ldt_reshape(idx, &(ldt_shape){1, {N}}),
                              ldt__rows_of(g, N));
        /* a vocab-sharded table's rows gathered nowhere: its gradient sharded alike */
        if (gi[0]) ldt__pin_conjugate(w, gi[0], gi[0]->id, LDT__PIN_LEAF_GRAD);
        break;
    }
    case LDT_OP_INDEX_SELECT: gi[0] = ldt_index_add(zeros_as(IN(t, 0)), dim, IN(t, 1), g); break;
    case LDT_OP_GATHER: gi[0] = ldt_scatter_add(zeros_as(IN(t, 0)), dim, IN(t, 1), g); break;
    case LDT_OP_SCATTER: /* overwritten positions take nothing from x */
        gi[0] = ldt_scatter(g, dim, IN(t, 1), ldt__zeros_like(IN(t, 2)));
        gi[2] = ldt_gather(g, dim, IN(t, 1));
        break;
    case LDT_OP_SCATTER_ADD:
        gi[0] = g;
        gi[2] = ldt_gather(g, dim, IN(t, 1));
        break;
    case LDT_OP_INDEX_ADD:
        gi[0] = g;
        gi[2] = ldt_index_select(g, dim, IN(t, 1));
        break;
    default: break;
    }
}

/* topk values: the gradient goes back to the positions the indices name. */
void ldt__r_topk(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *idx = NULL;
    const int64_t *a = t->attrs->i;
    if (ldt_topk(x, a[1], (int)a[0], (int)a[2], NULL, &idx) != LDT_OK || !idx) return;
    gi[0] = ldt_scatter_add(ldt__zeros_like(x), (int)a[0], idx, g);
}

/* Attention, recomputing the weights: S = scale q k^T (causal: -inf above the diagonal,
 * top-left aligned as the kernel), P = softmax(S), Pd = dropout(P) with the forward's seed and
 * offset (the very mask: it is drawn by the weights' global index, as dropout's), O = Pd v.
 * Then gv = Pd^T g, gP = dropout(g v^T), gS = P (gP - sum(gP P)), gq = scale gS k,
 * gk = scale gS^T q. */
void ldt__r_sdpa(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *q = IN(t, 0), *k = IN(t, 1), *v = IN(t, 2), *s, *p, *pd, *gp, *gs;
    int n = q->shape->ndim, last = n - 1;
    int64_t Lq = q->shape->dims[n - 2], Lk = k->shape->dims[n - 2];
    double scale = t->attrs->f[1], drop = t->attrs->f[0];
    ldt_dtype dt = (ldt_dtype)q->dtype;
    s = ldt_mul_scalar(ldt_matmul(q, ldt_transpose(k, -1, -2)), scale);
    if (t->attrs->i[2]) { /* causal: key j is seen by query i when j <= i */
        unsigned char *m = malloc((size_t)(Lq * Lk > 0 ? Lq * Lk : 1));
        ldt_tensor *mask, *ninf;
        double inf = -INFINITY;
        if (!m) {
            ldt__op_error(t->ctx, LDT_ERR_OUT_OF_MEMORY, "grad: out of memory");
            return;
        }
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) m[i * Lk + j] = j <= i;
        mask = ldt__cached_constant(t->ctx, &(ldt_shape){2, {Lq, Lk}}, LDT_BOOL, m);
        free(m);
        ninf = ldt__cached_constant(t->ctx, &(ldt_shape){0, {0}}, LDT_F64, &inf);
        s = ldt_where(mask, s, dt == LDT_F64 ? ninf : ldt_cast(ninf, dt));
    }
    p = ldt_softmax(s, last);
    pd = p;
    if (drop > 0) {
        ldt_tensor *d = ldt__record_a(t->ctx, LDT_OP_DROPOUT, &p, 1, p->shape, dt);
        if (d) {
            d->attrs->i[0] = t->attrs->i[0];
            d->attrs->i[1] = t->attrs->i[1];
            d->attrs->i[3] = t->attrs->i[3]; /* the weights' global index base */
            d->attrs->f[0] = drop;
        }
        pd = d;
    }
    gi[2] = ldt_matmul(ldt_transpose(pd, -1, -2), g);
    gp = ldt_matmul(g, ldt_transpose(v, -1, -2));
    if (drop > 0) {
        ldt_tensor *d = ldt__record_a(t->ctx, LDT_OP_DROPOUT, &gp, 1, gp->shape, dt);
        if (d) {
            d->attrs->i[0] = t->attrs->i[0];
            d->attrs->i[1] = t->attrs->i[1];
            d->attrs->i[3] = t->attrs->i[3]; /* the weights' global index base */
            d->attrs->f[0] = drop;
        }
        gp = d;
    }
    gs = ldt_mul(p, ldt_sub(gp, ldt_sum(ldt_mul(gp, p), &last, 1, 1)));
    gi[0] = ldt_mul_scalar(ldt_matmul(gs, k), scale);
    gi[1] = ldt_mul_scalar(ldt_matmul(ldt_transpose(gs, -1, -2), q), scale);
}

/* index_put: x[idx_0[j], ..., idx_{k-1}[j], ...] = values[j, ...] (or +=). The gradient of x
 * is g with the written positions zeroed (g itself when accumulating); values get g read at
 * those positions: the first k dims flattened, each j's flat index (negative indices counted
 * from the end) picking a row, summed back over the broadcast values took. */
void ldt__r_index_put(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *vals = IN(t, 1), *flat = NULL, *rows;
    int k = (int)t->attrs->i[1], n = x->shape->ndim;
    int64_t lead = 1;
    ldt_shape fs = {0, {0}};
    for (int d = 0; d < k; d++) { /* flat = ((i0 d1 + i1) d2 + i2) ... */
        ldt_tensor *ix = IN(t, 2 + d), *z = ldt__scalar_const(t->ctx, (ldt_dtype)ix->dtype, 0);
        ix = ldt_where(ldt_lt(ix, z), ldt_add_scalar(ix, (double)x->shape->dims[d]), ix);
        if (ix && ix->dtype != LDT_I64) ix = ldt_cast(ix, LDT_I64);
        flat = flat ? ldt_add(ldt_mul_scalar(flat, (double)x->shape->dims[d]), ix) : ix;
        lead *= x->shape->dims[d];
    }
    fs.dims[fs.ndim++] = lead;
    for (int d = k; d < n; d++) fs.dims[fs.ndim++] = x->shape->dims[d];
    rows = ldt_index_select(ldt_reshape(g, &fs), 0, flat); /* [L, rest] */
    gi[1] = ldt__unbroadcast(rows, vals->shape);
    if (t->attrs->i[0]) {
        gi[0] = g;
    } else { /* the written positions take nothing from x */
        ldt_tensor *idx[LDT_MAX_DIMS];
        for (int d = 0; d < k; d++) idx[d] = IN(t, 2 + d);
        gi[0] = ldt_index_put(g, idx, k, ldt__scalar_const(t->ctx, (ldt_dtype)g->dtype, 0), 0);
    }
}
