/* Optimizers as graph ops inside the step (docs/autodiff.md): the update of every parameter,
 * its state, the step counter and the learning rate are ordinary nodes of the trace, written
 * back with ldt_assign, so a planned or captured step shards and replays them like the rest.
 * The learning rate is the schedule's table read at the step counter, a persistent value:
 * the same step replays without re-tracing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "trace/autodiff.h"

struct ldt_optim {
    ldt_ctx *ctx;
    ldt_optim_config cfg;
    int n;
    ldt_tensor **params;
    ldt_tensor **m, **v; /* momentum (SGD) or Adam's moments; NULL when unused */
    ldt_tensor **master; /* f32 masters of f16/bf16 parameters (the update runs on them) */
    ldt_tensor *step;    /* f64 0-dim: steps taken */
    ldt_tensor *lrs;     /* f64 [total]: the schedule's rate of each step */
    int sync_dim;        /* ldt_optim_sync_grads: the data-parallel mesh dim, or -1 */
};

void ldt_optim_destroy(ldt_optim *o) {
    if (!o) return;
    free(o->params);
    free(o->m);
    free(o->v);
    free(o->master);
    free(o);
}

/* The schedule's rate for step t (0-based); from total_steps on, the rate at total_steps. */
static double rate(const ldt_optim_config *c, int64_t t) {
    double lr = c->lr;
    if (t > c->total_steps) t = c->total_steps;
    switch (c->schedule) {
    case LDT_LR_WARMUP_LINEAR:
        return t < c->warmup_steps ? lr * (double)(t + 1) / (double)c->warmup_steps : lr;
    case LDT_LR_COSINE: {
        double p;
        if (t < c->warmup_steps) return lr * (double)(t + 1) / (double)c->warmup_steps;
        p = (double)(t - c->warmup_steps) / (double)(c->total_steps - c->warmup_steps);
        if (p > 1) p = 1;
        return c->lr_min + 0.5 * (lr - c->lr_min) * (1 + cos(3.14159265358979323846 * p));
    }
    default: return lr;
    }
}

double ldt_optim_rate(const ldt_optim_config *c, int64_t t) { return c ? rate(c, t) : 0; }

static ldt_status check_config(const ldt_optim_config *c) {
    if (c->kind != LDT_OPTIM_SGD && c->kind != LDT_OPTIM_ADAMW)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: kind %d, expected sgd or adamw", (int)c->kind);
    if (!(c->lr > 0) || !isfinite(c->lr))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: lr %g, expected a positive number", c->lr);
    if (!(c->momentum >= 0 && c->momentum < 1))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: momentum %g, expected 0 <= momentum < 1", c->momentum);
    if (c->kind == LDT_OPTIM_ADAMW &&
        (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) || !(c->eps > 0)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: adamw betas %g, %g and eps %g; expected betas in "
                 "[0, 1) and eps > 0", c->beta1, c->beta2, c->eps);
    if (!(c->weight_decay >= 0) || !(c->clip_norm >= 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: weight_decay %g, clip_norm %g; expected >= 0",
                 c->weight_decay, c->clip_norm);
    if (c->total_steps < 1 || c->total_steps > ((int64_t)1 << 30) || c->warmup_steps < 0 ||
        (c->schedule == LDT_LR_COSINE && c->warmup_steps >= c->total_steps))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: total_steps %lld, warmup_steps %lld; expected "
                 "1 <= total <= 2^30, 0 <= warmup (< total for cosine)",
                 (long long)c->total_steps, (long long)c->warmup_steps);
    if (c->schedule != LDT_LR_CONSTANT && c->schedule != LDT_LR_WARMUP_LINEAR && c->schedule != LDT_LR_COSINE)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: schedule %d, expected constant, warmup_linear or cosine",
                 (int)c->schedule);
    if (c->schedule != LDT_LR_CONSTANT && c->warmup_steps == 0 && c->schedule == LDT_LR_WARMUP_LINEAR)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim: warmup_linear with 0 warmup steps");
    return LDT_OK;
}

/* A state tensor named "<param>.<what>", zeros. */
/* A state tensor named "<param>.<what>", zeros; f32 for half parameters (mixed precision). */
static ldt_tensor *state(ldt_ctx *ctx, ldt_tensor *p, const char *what) {
    char name[512];
    ldt_dtype dt = (ldt_dtype)p->dtype;
    snprintf(name, sizeof name, "%s.%s", LDT__NAME(p) ? LDT__NAME(p) : "param", what);
    return ldt_param(ctx, name, p->shape, dt == LDT_F16 || dt == LDT_BF16 ? LDT_F32 : dt);
}

/* The f32 master of a half parameter, holding its current values. */
static ldt_tensor *master_of(ldt_ctx *ctx, ldt_tensor *p) {
    ldt_tensor *m = state(ctx, p, "master");
    int64_t n = ldt__nbytes(p) / 2;
    if (m && p->data && m->data && ldt__host_sync(ctx) == LDT_OK) {
        const uint16_t *src = p->data;
        float *dst = m->data;
        for (int64_t i = 0; i < n; i++)
            dst[i] = p->dtype == LDT_BF16 ? ldt__bf16_to_f32(src[i]) : ldt__f16_to_f32(src[i]);
    }
    return m;
}

ldt_status ldt_optim_create(ldt_ctx *ctx, const ldt_optim_config *cfg, ldt_tensor *const *params,
                            int n, ldt_optim **out) {
    ldt_optim *o;
    ldt_status st = LDT_OK;
    double *tab;
    if (!ctx || !cfg || !out || n < 1 || !params)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_create: ctx, cfg, params (n >= 1) and out must be given");
    *out = NULL;
    LDT_CHECK(check_config(cfg));
    for (int i = 0; i < n; i++)
        if (!params[i] || params[i]->ctx != ctx || params[i]->kind != LDT__PERSISTENT ||
            params[i]->op != LDT_OP_PARAM || !ldt__dtype_is_float((ldt_dtype)params[i]->dtype))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_create: params[%d] is not a floating parameter of ctx", i);
    if (!(o = calloc(1, sizeof *o))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "optim_create: out of memory");
    o->ctx = ctx;
    o->cfg = *cfg;
    o->sync_dim = -1;
    o->n = n;
    o->params = malloc((size_t)n * sizeof *o->params);
    o->m = calloc((size_t)n, sizeof *o->m);
    o->v = calloc((size_t)n, sizeof *o->v);
    o->master = calloc((size_t)n, sizeof *o->master);
    tab = malloc((size_t)(cfg->total_steps + 1) * sizeof *tab);
    if (!o->params || !o->m || !o->v || !o->master || !tab) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "optim_create: out of memory");
    memcpy(o->params, params, (size_t)n * sizeof *params);
    for (int i = 0; i < n; i++) {
        if (cfg->kind == LDT_OPTIM_ADAMW || cfg->momentum > 0) o->m[i] = state(ctx, params[i], "m");
        if (cfg->kind == LDT_OPTIM_ADAMW) o->v[i] = state(ctx, params[i], "v");
        if ((params[i]->dtype == LDT_F16 || params[i]->dtype == LDT_BF16) && !(o->master[i] = master_of(ctx, params[i])))
            LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_OUT_OF_MEMORY, "optim_create: %s", ctx->errmsg);
        if ((o->m[i] == NULL && (cfg->kind == LDT_OPTIM_ADAMW || cfg->momentum > 0)) ||
            (cfg->kind == LDT_OPTIM_ADAMW && !o->v[i]))
            LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_OUT_OF_MEMORY, "optim_create: %s", ctx->errmsg);
    }
    o->step = ldt_param(ctx, "optim.step", &(ldt_shape){0, {0}}, LDT_F64);
    /* one entry past the end: the rate from there on */
    for (int64_t t = 0; t <= cfg->total_steps; t++) tab[t] = rate(cfg, t);
    o->lrs = ldt_constant(ctx, &(ldt_shape){1, {cfg->total_steps + 1}}, LDT_F64, tab);
    if (!o->step || !o->lrs) LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_OUT_OF_MEMORY, "optim_create: %s", ctx->errmsg);
    *out = o;
    o = NULL;
fail:
    free(tab);
    ldt_optim_destroy(o);
    return st;
}

ldt_tensor *ldt_optim_step_counter(const ldt_optim *o) { return o ? o->step : NULL; }

ldt_tensor *ldt_optim_state(const ldt_optim *o, int i, int which) {
    if (!o || i < 0 || i >= o->n) return NULL;
    return which == 2 ? o->master[i] : which ? o->v[i] : o->m[i];
}

ldt_status ldt_optim_shard_states(ldt_optim *o, int mesh_dim) {
    const ldt_mesh *mesh;
    int nd;
    if (!o) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_shard_states: optim is NULL");
    mesh = ldt_ctx_mesh(o->ctx);
    nd = ldt_mesh_ndim(mesh);
    if (mesh_dim < 0 || mesh_dim >= nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_shard_states: mesh dim %d, the mesh has %d", mesh_dim, nd);
    for (int i = 0; i < o->n; i++) {
        ldt_tensor *st[2] = {o->m[i], o->v[i]};
        const ldt_tensor *p = o->params[i];
        ldt_placement pl[LDT_MAX_DIMS];
        if (p->shape->ndim == 0) continue;
        /* the state follows its parameter's pin on the other mesh dims, dim 0 split on this one
         * (unless that dim is already split there) */
        for (int d = 0; d < nd; d++) pl[d] = p->pin ? p->pin[d] : ldt_replicate();
        {
            int taken = 0;
            for (int d = 0; d < nd; d++)
                taken |= (pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD) && pl[d].dim == 0;
            if (taken || p->shape->dims[0] < ldt_mesh_dim_size(mesh, mesh_dim)) continue;
        }
        pl[mesh_dim] = ldt_shard(0);
        for (int k = 0; k < 2; k++)
            if (st[k]) LDT_CHECK(ldt_pin(st[k], pl, nd));
    }
    return LDT_OK;
}

ldt_status ldt_optim_sync_grads(ldt_optim *o, int mesh_dim) {
    int nd;
    if (!o) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_sync_grads: optim is NULL");
    nd = ldt_mesh_ndim(ldt_ctx_mesh(o->ctx));
    if (mesh_dim < -1 || mesh_dim >= nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_sync_grads: mesh dim %d, the mesh has %d", mesh_dim, nd);
    o->sync_dim = mesh_dim;
    return LDT_OK;
}

/* Data-parallel synchronisation of gradient i (docs/replay.md, "Gradient bucketing"): the
 * gradient as the backward makes it, a Partial(sum) over the data-parallel dim (each rank's
 * share of the batch), reduced to the placement the update reads it in: its parameter's (an
 * all_reduce that fusion buckets) or, under ZeRO, its state's (a reduce_scatter). Where the
 * parameter is interleaved-sharded on another dim no op strategy makes that Partial directly:
 * the gradient is redistributed to it first (the other dims' reduction), so the data-parallel
 * reduction is still one all_reduce (a mean loss's gradient before its division by the count,
 * as the others). Pinned gradients and parameters split on this
 * dim are left as they are. */
static ldt_tensor *synced_grad(ldt_optim *o, int i, ldt_tensor *g, int phase, ldt_tensor **r) {
    const ldt_tensor *p = o->params[i], *s = o->m[i];
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(o->ctx)), pin = 1;
    ldt_placement pl[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
    ldt_tensor *u = NULL;
    for (int d = 0; d < nd; d++) {
        pl[d] = p->pin ? p->pin[d] : ldt_replicate();
        to[d] = s && s->pin ? s->pin[d] : pl[d];
        pin &= pl[d].kind != LDT_PLACE_INTERLEAVED_SHARD;
    }
    if (pl[o->sync_dim].kind != LDT_PLACE_REPLICATE || g->pin || g->kind == LDT__PERSISTENT) return g;
    pl[o->sync_dim] = ldt_partial(LDT_REDUCE_SUM);
    /* a mean loss's gradient, div(u, count) (ldt_grad, trace/autodiff.h): u is pinned Partial
     * and the division placed where the update reads it, so u is reduced first and the count
     * read after that reduction, not before the backward (docs/replay.md) */
    if (g->kind == LDT__NODE && g->op == LDT_OP_DIV && ldt__is_mean_divisor(LDT__IN(g)[1]))
        u = LDT__IN(g)[0];
    if (pin && u && !u->pin && u->kind == LDT__NODE) {
        if (ldt_pin(u, pl, nd) != LDT_OK || ldt_pin(g, to, nd) != LDT_OK) return NULL;
        return g;
    }
    if (!pin && u && u->kind == LDT__NODE) {
        /* interleaved: u redistributed to the parameter's placement with dp Partial (its other
         * dims' reduction), then divided where the update reads it, so its dp reduction, too,
         * comes before the count is read and joins the bucket that carries the count. Every
         * such redistribution is made (phase 0) before any division (phase 1), so the dp
         * reductions' windows meet. */
        if (phase == 0) return (*r = ldt_redistribute_to(u, pl, nd));
        /* ldt_grad's own division of u, which the update no longer reads, is placed where u's
         * redistribution reads u (dp Partial): the search would otherwise split it over dp, a
         * reduce_scatter of u for a value nothing reads (fusion drops the division) */
        if (!g->pin && ldt_pin(g, pl, nd) != LDT_OK) return NULL;
        if (!(g = ldt_div(*r, LDT__IN(g)[1])) || ldt_pin(g, to, nd) != LDT_OK) return NULL;
        return g;
    }
    if (phase == 0) return g;
    if (pin) {
        if (ldt_pin(g, pl, nd) != LDT_OK) return NULL;
    } else if (!(g = ldt_redistribute_to(g, pl, nd))) { /* the other dims' reduction first */
        return NULL;
    }
    return ldt_redistribute_to(g, to, nd);
}

/* xs[0..n) (1-D) joined on dim 0, at most CAT_MAX at a time (a node takes at most 16 inputs
 * in the planner's strategies). */
#define CAT_MAX 16
static ldt_tensor *cat_all(ldt_tensor **xs, int n) {
    ldt_tensor *parts[CAT_MAX];
    int np = 0;
    if (n <= 1) return n ? xs[0] : NULL;
    if (n <= CAT_MAX) return ldt_cat(xs, n, 0);
    for (int i = 0; i < n && np < CAT_MAX; i += (n + CAT_MAX - 1) / CAT_MAX) {
        int k = (n + CAT_MAX - 1) / CAT_MAX;
        parts[np++] = cat_all(xs + i, i + k <= n ? k : n - i);
    }
    return ldt_cat(parts, np, 0);
}

/* The length of name's layer prefix: up to and including its first dot-separated component
 * that is a number ("h.3.attn.qkv.w": "h.3"); 0 without one. */
static size_t layer_prefix(const char *name) {
    const char *c = name;
    while (c && *c) {
        const char *e = c;
        while (*e >= '0' && *e <= '9') e++;
        if (e > c && (*e == '.' || !*e)) return (size_t)(e - name);
        c = strchr(c, '.');
        if (c) c++;
    }
    return 0;
}

/* 1 when parameters a and b are of one layer by their names (both of the same numbered
 * prefix, or both of none). */
static int same_layer(const ldt_tensor *a, const ldt_tensor *b) {
    const char *na = LDT__NAME(a), *nb = LDT__NAME(b);
    size_t la = na ? layer_prefix(na) : 0, lb = nb ? layer_prefix(nb) : 0;
    return la == lb && (!la || !memcmp(na, nb, la));
}

/* The squared norms xs[0..n) of parameters ps[0..n) in one vector, in order: joined layer by
 * layer first (consecutive parameters of one numbered name prefix), then the layers' vectors.
 * The same vector as one join of all; grouped so that no node but the last joins reads two
 * layers' norms, so the planner's exact search sees each layer's step alike (repeated layers
 * make repeated tables: docs/planner.md, "Tying"). */
static ldt_tensor *cat_by_layer(ldt_tensor **xs, ldt_tensor *const *ps, int n) {
    ldt_tensor **grp = malloc((size_t)(n ? n : 1) * sizeof *grp), *r;
    int ng = 0;
    if (!grp) return NULL;
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_layer(ps[i], ps[j]); j++) {}
        if (!(grp[ng++] = cat_all(xs + i, j - i))) {
            free(grp);
            return NULL;
        }
    }
    r = cat_all(grp, ng);
    free(grp);
    return r;
}

/* The step's rate, read from the table at the counter (clamped to the last entry). */
static ldt_tensor *lr_now(ldt_optim *o) {
    ldt_tensor *t = ldt_cast(o->step, LDT_I64);
    ldt_tensor *last = ldt__cached_constant(o->ctx, &(ldt_shape){0, {0}}, LDT_I64,
                                            &(int64_t){o->cfg.total_steps});
    t = ldt_where(ldt_gt(t, last), last, t);
    return ldt_reshape(ldt_index_select(o->lrs, 0, ldt_reshape(t, &(ldt_shape){1, {1}})),
                       &(ldt_shape){0, {0}});
}

/* Data parallel without split states (DDP, docs/replay.md "Gradient bucketing"): where
 * parameter i's update runs when its gradient is synchronised over the data-parallel dim and
 * its states are not split there (ZeRO): its parameter's placement, whole on that dim as the
 * reduced gradient is, into pl. 0 when it is not such a case (no sync, split states, a
 * parameter not pinned on a mesh of more than one dim, or one split on the dp dim). Left to
 * itself the search splits the update's elementwise work over dp at the price of all_gathers
 * of its results and of the clip norm's own reduction: collectives a replicated update has
 * none of. */
static int ddp_place(const ldt_optim *o, int i, ldt_placement *pl) {
    const ldt_tensor *p = o->params[i];
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(o->ctx));
    if (o->sync_dim < 0 || (o->m[i] && o->m[i]->pin && o->m[i]->pin[o->sync_dim].kind != LDT_PLACE_REPLICATE) ||
        (!p->pin && nd > 1))
        return 0; /* (a state pinned whole on dp: pinned here at an earlier step) */
    for (int d = 0; d < nd; d++) pl[d] = p->pin ? p->pin[d] : ldt_replicate();
    return pl[o->sync_dim].kind == LDT_PLACE_REPLICATE;
}

ldt_status ldt_optim_step(ldt_optim *o, ldt_tensor *const *grads) {
    const ldt_optim_config *c;
    ldt_tensor **g, *lr, *scale = NULL, *t1;
    ldt_ctx *ctx;
    ldt_status st = LDT_OK;
    if (!o || !grads) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "optim_step: optim and grads must be given");
    c = &o->cfg;
    ctx = o->ctx;
    if (!(g = calloc(2 * (size_t)o->n, sizeof *g))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "optim_step: out of memory");
    for (int i = 0; i < o->n; i++) {
        if (!grads[i] || !ldt_shape_equal(grads[i]->shape, o->params[i]->shape))
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "optim_step: grads[%d] is missing or not shaped like its "
                          "parameter", i);
        g[i] = grads[i];
    }
    for (int ph = 0; ph < 2; ph++)
        for (int i = 0; o->sync_dim >= 0 && i < o->n; i++)
            if (!(g[i] = synced_grad(o, i, grads[i], ph, &g[o->n + i])))
                LDT_FAIL_GOTO(ctx->status ? ctx->status : LDT_ERR_INVALID_ARGUMENT, "optim_step: gradient %d: %s", i,
                              ctx->status ? ctx->errmsg : ldt_last_error());
    lr = lr_now(o);
    t1 = ldt_add_scalar(o->step, 1); /* this step's 1-based count */
    if (c->clip_norm > 0) { /* by the global norm: one reduction over every gradient */
        ldt_tensor *sq = NULL, **part = calloc((size_t)o->n, sizeof *part), *one[1];
        int np = 0;
        if (!part) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "optim_step: out of memory");
        /* each gradient's sum of squares, side by side in one vector before any is used: where
         * the gradients are split over ranks (ZeRO) the partial sums are reduced in one call,
         * not one each */
        for (int i = 0; i < o->n; i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            ldt_tensor *sq2 = ldt_mul(g[i], g[i]);
            /* DDP: the squares where the reduced gradient is (whole on dp), so the norm needs
             * no dp reduction of its own (only the other dims' partial sums are reduced) */
            ldt_tensor *s2 = NULL;
            int ddp = sq2 && ddp_place(o, i, pl), nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
            if (ddp && !sq2->pin && (st = ldt_pin(sq2, pl, nd)) != LDT_OK) {
                free(part);
                goto fail;
            }
            s2 = ldt_sum(sq2, NULL, 0, 0);
            if (s2 && ddp) { /* the local sum: a partial sum over the dims the gradient is split on */
                for (int d = 0; d < nd; d++)
                    pl[d] = pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD
                                ? ldt_partial(LDT_REDUCE_SUM) : ldt_replicate();
                if ((st = ldt_pin(s2, pl, nd)) != LDT_OK) {
                    free(part);
                    goto fail;
                }
            }
            if ((part[np] = ldt_reshape(s2, &(ldt_shape){1, {1}})) != NULL) np++;
        }
        for (int i = 0, j = 0; i < o->n && np == o->n; i++) { /* summed by dtype, in order */
            ldt_dtype dt = (ldt_dtype)g[i]->dtype;
            ldt_tensor *s;
            int n = 0;
            if (i > 0 && (ldt_dtype)g[i - 1]->dtype == dt) continue;
            for (j = i; j < o->n && (ldt_dtype)g[j]->dtype == dt; j++) n++;
            one[0] = cat_by_layer(part + i, o->params + i, n);
            s = ldt_sum(ldt_cast(one[0], LDT_F64), NULL, 0, 0);
            sq = sq ? ldt_add(sq, s) : s;
        }
        free(part);
        /* min(1, clip / (norm + 1e-6)), as torch's clip_grad_norm_ */
        scale = ldt_rdiv_scalar(ldt_add_scalar(ldt_sqrt(sq), 1e-6), c->clip_norm);
        {
            ldt_tensor *one = ldt__scalar_const(ctx, LDT_F64, 1);
            scale = ldt_where(ldt_lt(scale, one), scale, one);
        }
    }
    for (int i = 0; i < o->n; i++) {
        /* half parameters: the update runs on the f32 master, the parameter gets its rounding */
        int64_t from = ctx->nnodes; /* the update's nodes are made from here */
        int nd_ = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
        ldt_placement pl_ddp[LDT_MAX_DIMS];
        ldt_tensor *p = o->master[i] ? o->master[i] : o->params[i], *upd, *lrp;
        ldt_tensor *gi = o->master[i] ? ldt_cast(g[i], LDT_F32) : g[i];
        ldt_dtype dt = (ldt_dtype)p->dtype;
        if (scale) gi = ldt_mul(gi, ldt_cast(scale, dt));
        lrp = ldt_cast(lr, dt);
        if (c->kind == LDT_OPTIM_SGD) {
            if (c->weight_decay > 0) gi = ldt_add(gi, ldt_mul_scalar(p, c->weight_decay));
            if (o->m[i]) { /* buf = momentum buf + g */
                ldt_tensor *buf = ldt_add(ldt_mul_scalar(o->m[i], c->momentum), gi);
                if ((st = ldt_assign(o->m[i], buf)) != LDT_OK) goto fail;
                gi = buf;
            }
            upd = ldt_sub(p, ldt_mul(gi, lrp));
        } else { /* AdamW: decoupled decay, bias-corrected moments */
            ldt_tensor *m = ldt_add(ldt_mul_scalar(o->m[i], c->beta1), ldt_mul_scalar(gi, 1 - c->beta1));
            ldt_tensor *v = ldt_add(ldt_mul_scalar(o->v[i], c->beta2), ldt_mul_scalar(ldt_mul(gi, gi), 1 - c->beta2));
            /* 1 - beta^t = 1 - exp(t log beta) */
            ldt_tensor *bc1 = ldt_cast(ldt_rsub_scalar(ldt_exp(ldt_mul_scalar(t1, log(c->beta1 > 0 ? c->beta1 : 1e-300))), 1), dt);
            ldt_tensor *bc2 = ldt_cast(ldt_rsub_scalar(ldt_exp(ldt_mul_scalar(t1, log(c->beta2 > 0 ? c->beta2 : 1e-300))), 1), dt);
            ldt_tensor *den = ldt_add_scalar(ldt_sqrt(ldt_div(v, bc2)), c->eps);
            ldt_tensor *pd = c->weight_decay > 0 ? ldt_sub(p, ldt_mul(ldt_mul_scalar(p, c->weight_decay), lrp)) : p;
            if ((st = ldt_assign(o->m[i], m)) != LDT_OK || (st = ldt_assign(o->v[i], v)) != LDT_OK) goto fail;
            upd = ldt_sub(pd, ldt_mul(lrp, ldt_div(ldt_div(m, bc1), den)));
        }
        if (ddp_place(o, i, pl_ddp)) { /* the whole update where its parameter is */
            for (int64_t k = from; k < ctx->nnodes; k++) {
                ldt_tensor *t = ctx->nodes[k];
                if (!t->pin && ldt_shape_equal(t->shape, p->shape) && (st = ldt_pin(t, pl_ddp, nd_)) != LDT_OK) goto fail;
            }
            for (int k = 0; k < 2; k++) {
                ldt_tensor *sk = k ? o->v[i] : o->m[i];
                if (sk && !sk->pin && (st = ldt_pin(sk, pl_ddp, nd_)) != LDT_OK) goto fail;
            }
        } else if (o->m[i] && o->m[i]->pin) {
            /* ZeRO: the update where the state is split; the parameter's all_gather then moves
             * the new values, read by nothing else in the step, so fusion can bucket them */
            ldt_tensor *sm = o->m[i];
            int nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
            if ((st = ldt_pin(upd, sm->pin, nd)) != LDT_OK) goto fail;
        }
        if ((st = ldt_assign(p, upd)) != LDT_OK) goto fail;
        if (o->master[i] && (st = ldt_assign(o->params[i], ldt_cast(upd, (ldt_dtype)o->params[i]->dtype))) != LDT_OK)
            goto fail;
    }
    st = ldt_assign(o->step, t1);
fail:
    if (st == LDT_OK && ctx->status != LDT_OK) {
        st = ctx->status;
        ldt__error(st, "optim_step: %s", ctx->errmsg);
    }
    free(g);
    return st;
}
