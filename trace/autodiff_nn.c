/* Backward rules of the neural-network and indexing ops, composed of ordinary ops so the
 * planner shards them like any other (softmax through its output; norms recompute the
 * normalised input; cross_entropy as softmax minus the one-hot target over the count of
 * targets that count; dropout as the same mask on the gradient). */
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
void ldt__r_norm(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    ldt_tensor *x = IN(t, 0), *w = t->attrs->i[1] ? IN(t, 1) : NULL;
    int k = (int)t->attrs->i[0], n = x->shape->ndim, nd[LDT_MAX_DIMS], ld[LDT_MAX_DIMS], nl;
    double eps = t->attrs->f[0];
    ldt_tensor *xc, *rstd, *xhat, *gh;
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

void ldt__r_index(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi) {
    int dim = (int)t->attrs->i[0];
    switch (t->op) {
    case LDT_OP_EMBEDDING: { /* rows of the weight, added where the indices took them */
        ldt_tensor *w = IN(t, 0), *idx = IN(t, 1);
        int64_t N = 1, H = w->shape->dims[1];
        for (int d = 0; d < idx->shape->ndim; d++) N *= idx->shape->dims[d];
        gi[0] = ldt_index_add(ldt__zeros_like(w), 0, ldt_reshape(idx, &(ldt_shape){1, {N}}),
                              ldt_reshape(g, &(ldt_shape){2, {N, H}}));
        break;
    }
    case LDT_OP_INDEX_SELECT: gi[0] = ldt_index_add(ldt__zeros_like(IN(t, 0)), dim, IN(t, 1), g); break;
    case LDT_OP_GATHER: gi[0] = ldt_scatter_add(ldt__zeros_like(IN(t, 0)), dim, IN(t, 1), g); break;
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
