/* Neural-network ops: softmax, log_softmax, layer_norm, rms_norm, cross_entropy, dropout and
 * scaled dot-product attention — recording and shape rules. */
#include <math.h>

#include "core/error.h"
#include "kernels/common/philox.h"
#include "trace/autodiff.h"
#include "trace/pipeline.h"

static ldt_tensor *need_float(ldt_ctx *ctx, const char *op, const char *what, ldt_tensor *x) {
    if (ldt__dtype_is_float((ldt_dtype)x->dtype)) return x;
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                         "%s: %s is %s, expected a floating dtype (f32 f64 f16 bf16)", op, what,
                         ldt_dtype_name((ldt_dtype)x->dtype));
}

static ldt_tensor *softmax_like(int op, ldt_tensor *x, int dim) {
    const char *name = ldt__builtin_op_name(op);
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    ldt_tensor *t;
    int d;
    if (!ctx || !need_float(ctx, name, "x", x)) return NULL;
    d = ldt__norm_dim(dim, x->shape->ndim);
    if (d < 0) return ldt__bad_dim(ctx, name, dim, x);
    t = ldt__record_a(ctx, op, &x, 1, x->shape, (ldt_dtype)x->dtype);
    if (t) t->attrs->i[0] = d;
    return t;
}

ldt_tensor *ldt_softmax(ldt_tensor *x, int dim) { return softmax_like(LDT_OP_SOFTMAX, x, dim); }
ldt_tensor *ldt_log_softmax(ldt_tensor *x, int dim) {
    return softmax_like(LDT_OP_LOG_SOFTMAX, x, dim);
}

/* The affine parameters of a norm must have the shape of x's last k dims and x's dtype. */
static int norm_param_ok(ldt_ctx *ctx, const char *op, const char *what, ldt_tensor *x,
                         ldt_tensor *p, int k) {
    int ok = p->dtype == x->dtype && p->shape->ndim == k;
    for (int i = 0; ok && i < k; i++) ok = p->shape->dims[i] == x->shape->dims[x->shape->ndim - k + i];
    if (!ok) {
        char dx[256], dp[256];
        ldt__describe(x, dx, sizeof dx);
        ldt__describe(p, dp, sizeof dp);
        ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                      "%s: %s is %s %s, expected the last %d dims of x %s %s", op, what, dp,
                      ldt_dtype_name((ldt_dtype)p->dtype), k, dx,
                      ldt_dtype_name((ldt_dtype)x->dtype));
    }
    return ok;
}

static ldt_tensor *norm(int op, ldt_tensor *x, int k, ldt_tensor *w, ldt_tensor *b, double eps) {
    const char *name = ldt__builtin_op_name(op);
    ldt_tensor *in[3];
    int nin = 0;
    ldt_ctx *ctx = ldt__check_inputs(name, &x, 1);
    ldt_tensor *t;
    if (!ctx || !need_float(ctx, name, "x", x)) return NULL;
    in[nin++] = x;
    if (w) in[nin++] = w;
    if (b) in[nin++] = b;
    if (!ldt__check_inputs(name, in, nin)) return NULL;
    if (k < 1 || k > x->shape->ndim) {
        char desc[256];
        ldt__describe(x, desc, sizeof desc);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "%s: normalising the last %d dims of x %s; expected 1 to %d", name, k,
                             desc, x->shape->ndim);
    }
    if (!(eps >= 0) || !isfinite(eps))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: eps %g, expected >= 0", name, eps);
    if ((w && !norm_param_ok(ctx, name, "weight", x, w, k)) ||
        (b && !norm_param_ok(ctx, name, "bias", x, b, k)))
        return NULL;
    t = ldt__record_a(ctx, op, in, nin, x->shape, (ldt_dtype)x->dtype);
    if (t) {
        t->attrs->i[0] = k;
        t->attrs->i[1] = w != NULL;
        t->attrs->i[2] = b != NULL;
        t->attrs->f[0] = eps;
    }
    return t;
}

ldt_tensor *ldt_layer_norm(ldt_tensor *x, int ndims, ldt_tensor *w, ldt_tensor *b, double eps) {
    return norm(LDT_OP_LAYER_NORM, x, ndims, w, b, eps);
}
ldt_tensor *ldt_rms_norm(ldt_tensor *x, int ndims, ldt_tensor *w, double eps) {
    return norm(LDT_OP_RMS_NORM, x, ndims, w, NULL, eps);
}

static int is_index_dtype(ldt_dtype t) { return t == LDT_I32 || t == LDT_I64; }

/* cross_entropy recorded as ordinary nodes, so the planner shards each (the class dim too:
 * vocab parallel) and the backward pass reads what the forward made:
 *   m = amax(z) per row (its gradient stopped: any per-row shift gives the same loss),
 *   e = exp(z - m), s = sum(e) per row, lse = log(s) + m,
 *   picked = z[target] (gather; a vocab-sharded z gives a Partial, the owner's value),
 *   loss = sum(where(valid, lse - picked, 0)) / count, count = the targets != ignore_index.
 * On a class-sharded z every reduction is of one value per row (m, s) or a scalar; the
 * backward (e / s - one_hot at the owner, by gather's rule, times valid / count) is local, and
 * the count it divides by is the forward's. */
/* Logits pinned with the class dim sharded (vocab parallel, and perhaps a batch dim on
 * another mesh dim): the row max, the exp sum and the target logit are pinned to reduce
 * from the shards (Partial max, sum, sum on the class-sharding mesh dims, the batch dims as
 * the logits), and the exponentials to the logits' pin, so the planner never gathers the
 * logits for the loss, though one all_gather can cost less than the few small all_reduces
 * on a small model. Other pins (Partial, interleaved) pin nothing. */
/* reduce 0: t takes the logits' pin; 1: Partial(op) where the classes are sharded. */
static void pin_rows(ldt_ctx *ctx, const ldt_tensor *z, ldt_tensor *t, int reduce, ldt_reduce_op op) {
    int nd = ldt_mesh_ndim(ctx->mesh), last = z->shape->ndim - 1, vocab = 0;
    ldt_placement pl[LDT_MAX_DIMS];
    if (!z->pin || !t) return;
    for (int d = 0; d < nd; d++) {
        const ldt_placement *p = &z->pin[d];
        if (p->kind == LDT_PLACE_REPLICATE) {
            pl[d] = *p;
        } else if (p->kind == LDT_PLACE_SHARD && p->dim == last) {
            pl[d] = reduce ? ldt_partial(op) : *p;
            vocab = 1;
        } else if (p->kind == LDT_PLACE_SHARD) {
            pl[d] = *p;
        } else {
            return;
        }
    }
    if (vocab) ldt_pin(t, pl, nd);
}

/* The [loss sum, count] pair of logits pinned sharded (classes or batch): Partial(sum) on
 * every mesh dim that shards them, then explicit moves to Replicate, so both are reduced
 * together (a few bytes). Where both the classes and a batch dim are sharded, the class dims
 * (vocab parallel) are reduced first and the batch dims (data parallel) apart, a lone
 * all_reduce on them that fusion can put in the gradients' bucket: the loss's backward reads
 * neither number (the count divides the gradients after their reduction, trace/autodiff.h). */
static ldt_tensor *reduce_stats(ldt_ctx *ctx, const ldt_tensor *z, ldt_tensor *stats) {
    int nd = ldt_mesh_ndim(ctx->mesh), any = 0, cls = 0, last = z->shape->ndim - 1;
    ldt_placement pl[LDT_MAX_DIMS], mid[LDT_MAX_DIMS], rep[LDT_MAX_DIMS];
    if (!z->pin || !stats) return stats;
    for (int d = 0; d < nd; d++) {
        rep[d] = ldt_replicate();
        if (z->pin[d].kind == LDT_PLACE_SHARD) {
            pl[d] = ldt_partial(LDT_REDUCE_SUM);
            any |= z->pin[d].dim != last;
            cls |= z->pin[d].dim == last;
            mid[d] = z->pin[d].dim == last ? rep[d] : pl[d];
        } else if (z->pin[d].kind == LDT_PLACE_REPLICATE) {
            pl[d] = mid[d] = z->pin[d];
        } else {
            return stats;
        }
    }
    if (!(any || cls) || ldt_pin(stats, pl, nd) != LDT_OK) return stats;
    if (any && cls) stats = ldt_redistribute_to(stats, mid, nd);
    return ldt_redistribute_to(stats, rep, nd);
}

static ldt_tensor *cross_entropy_parts(ldt_ctx *ctx, ldt_tensor *z, ldt_tensor *tg, int64_t ign) {
    ldt_dtype ft = (ldt_dtype)z->dtype, it = (ldt_dtype)tg->dtype;
    int last = z->shape->ndim - 1;
    ldt_shape rows1 = *z->shape;
    ldt_tensor *izero = ldt__scalar_const(ctx, it, 0), *fzero = ldt__scalar_const(ctx, ft, 0);
    ldt_tensor *m, *e, *lse, *valid, *valid1, *idx1, *picked, *tot, *count, *pair[2], *stats;
    ldt_shape one = {1, {1}};
    ldt_tensor *s;
    rows1.dims[last] = 1;
    m = ldt_amax(z, &last, 1, 1);
    pin_rows(ctx, z, m, 1, LDT_REDUCE_MAX);
    m = ldt__stop_gradient(m);
    e = ldt_exp(ldt_sub(z, m));
    pin_rows(ctx, z, e, 0, LDT_REDUCE_SUM);
    s = ldt_sum(e, &last, 1, 1);
    pin_rows(ctx, z, s, 1, LDT_REDUCE_SUM);
    lse = ldt_add(ldt_log(s), m); /* [..., 1] */
    /* target - ignore_index != 0: no new constant per call */
    valid = ldt_ne(ldt_sub_scalar(tg, (double)ign), izero);
    valid1 = ldt_reshape(valid, &rows1);
    idx1 = ldt_reshape(ldt_where(valid, tg, izero), &rows1); /* ignored rows read class 0 */
    picked = ldt_gather(z, last, idx1);
    pin_rows(ctx, z, picked, 1, LDT_REDUCE_SUM);
    tot = ldt_sum(ldt_where(valid1, ldt_sub(lse, picked), fzero), NULL, 0, 0);
    count = ldt_sum(ldt_cast(valid, ft), NULL, 0, 0);
    /* [sum, count] as one value: on sharded logits one reduction of two numbers gives both */
    pair[0] = ldt_reshape(tot, &one);
    pair[1] = ldt_reshape(count, &one);
    stats = reduce_stats(ctx, z, ldt_cat(pair, 2, 0));
    /* NaN when every target is ignored, as 0 / 0. The count is the mean's divisor: ldt_grad
     * divides the gradients by it at the end, so the backward reads none of the pair and a
     * data-parallel step can reduce the pair with the gradients (docs/replay.md) */
    return ldt_div(ldt_select(stats, 0, 0), ldt__mean_divisor(ldt_select(stats, 0, 1)));
}

ldt_tensor *ldt_cross_entropy(ldt_tensor *logits, ldt_tensor *targets, int64_t ignore_index) {
    ldt_tensor *in[2] = {logits, targets};
    ldt_ctx *ctx = ldt__check_inputs("cross_entropy", in, 2);
    int ok;
    if (!ctx || !need_float(ctx, "cross_entropy", "logits", logits)) return NULL;
    if (!is_index_dtype((ldt_dtype)targets->dtype))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "cross_entropy: targets are %s, expected i32 or i64 class indices",
                             ldt_dtype_name((ldt_dtype)targets->dtype));
    ok = logits->shape->ndim >= 1 && targets->shape->ndim == logits->shape->ndim - 1;
    for (int d = 0; ok && d < targets->shape->ndim; d++)
        ok = targets->shape->dims[d] == logits->shape->dims[d];
    if (!ok) {
        char dl[256], dt[256];
        ldt__describe(logits, dl, sizeof dl);
        ldt__describe(targets, dt, sizeof dt);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "cross_entropy: logits are %s and targets %s; expected logits "
                             "[..., C] and targets [...]",
                             dl, dt);
    }
    return cross_entropy_parts(ctx, logits, targets, ignore_index);
}

/* Takes the stream at the context's offset for `numel` elements and advances it. */
/* The op's seed, stream offset and global index base (i[3]: a pipeline's micro-batch draws its
 * rows of the single-device op, trace/pipeline.c); 0 when refused (on the context). */
static int take_stream(ldt_ctx *ctx, ldt_tensor *t, int64_t numel) {
    uint64_t off;
    int64_t base;
    if (ldt__pp_rng_take(ctx, numel, &off, &base) != LDT_OK) {
        ldt__trace_fail(ctx);
        return 0;
    }
    t->attrs->i[0] = (int64_t)ctx->seed;
    t->attrs->i[1] = (int64_t)off;
    t->attrs->i[3] = base;
    return 1;
}

ldt_tensor *ldt_dropout(ldt_tensor *x, double p, int train) {
    ldt_ctx *ctx = ldt__check_inputs("dropout", &x, 1);
    ldt_tensor *t;
    int64_t numel;
    if (!ctx || !need_float(ctx, "dropout", "x", x)) return NULL;
    if (!(p >= 0 && p <= 1))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "dropout: p = %g, expected 0 <= p <= 1", p);
    if (!train || p == 0) return ldt_alias(x);
    t = ldt__record_a(ctx, LDT_OP_DROPOUT, &x, 1, x->shape, (ldt_dtype)x->dtype);
    if (!t) return NULL;
    ldt_shape_numel(x->shape, &numel);
    if (!take_stream(ctx, t, numel)) return NULL;
    t->attrs->f[0] = p;
    return t;
}

ldt_tensor *ldt_scaled_dot_product_attention(ldt_tensor *q, ldt_tensor *k, ldt_tensor *v,
                                             int causal, double dropout_p, double scale) {
    ldt_tensor *in[3] = {q, k, v}, *t;
    ldt_ctx *ctx = ldt__check_inputs("scaled_dot_product_attention", in, 3);
    int n, ok;
    ldt_shape s;
    if (!ctx || !need_float(ctx, "scaled_dot_product_attention", "q", q)) return NULL;
    n = q->shape->ndim;
    ok = n >= 2 && k->shape->ndim == n && v->shape->ndim == n && q->dtype == k->dtype &&
         q->dtype == v->dtype;
    for (int d = 0; ok && d < n - 2; d++)
        ok = k->shape->dims[d] == q->shape->dims[d] && v->shape->dims[d] == q->shape->dims[d];
    ok = ok && k->shape->dims[n - 1] == q->shape->dims[n - 1] &&
         v->shape->dims[n - 2] == k->shape->dims[n - 2];
    if (!ok) {
        char dq[256], dk[256], dv[256];
        ldt__describe(q, dq, sizeof dq);
        ldt__describe(k, dk, sizeof dk);
        ldt__describe(v, dv, sizeof dv);
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "scaled_dot_product_attention: q %s, k %s, v %s (%s %s %s); expected "
                             "q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] of one dtype",
                             dq, dk, dv, ldt_dtype_name((ldt_dtype)q->dtype),
                             ldt_dtype_name((ldt_dtype)k->dtype), ldt_dtype_name((ldt_dtype)v->dtype));
    }
    if (!(dropout_p >= 0 && dropout_p <= 1))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "scaled_dot_product_attention: dropout p = %g, expected 0 <= p <= 1",
                             dropout_p);
    s = (*q->shape);
    s.dims[n - 1] = v->shape->dims[n - 1];
    t = ldt__record_a(ctx, LDT_OP_SDPA, in, 3, &s, (ldt_dtype)q->dtype);
    if (!t) return NULL;
    t->attrs->i[2] = causal ? 1 : 0;
    t->attrs->f[0] = dropout_p;
    t->attrs->f[1] = scale > 0 ? scale : 1.0 / sqrt((double)(q->shape->dims[n - 1] ? q->shape->dims[n - 1] : 1));
    if (dropout_p > 0) {
        /* the weights [..., Lq, Lk] are what dropout masks */
        int64_t numel = k->shape->dims[n - 2];
        for (int d = 0; d < n - 1; d++)
            if (__builtin_mul_overflow(numel, q->shape->dims[d], &numel))
                return ldt__op_error(ctx, LDT_ERR_OVERFLOW,
                                     "scaled_dot_product_attention: the attention weights "
                                     "overflow 64 bits");
        if (!take_stream(ctx, t, numel)) return NULL;
    }
    return t;
}
