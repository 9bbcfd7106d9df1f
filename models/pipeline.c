/* Pipelined gpt steps (docs/pipeline.md): the stage split balanced by modeled time, and the
 * forward of every micro-batch on its stages. Written against the public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

/* Forward FLOPs of one block and of the head (the backward is twice both: the balance is the
 * same). Attention: the QKV, output and MLP projections (24 B S H^2) and the score and value
 * products (4 B S^2 H); the head: 2 B S H V. */
static double layer_flops(const ldt_model_config *c) {
    double B = (double)c->batch, S = (double)c->seq, H = (double)c->hidden;
    return 24 * B * S * H * H + 4 * B * S * S * H;
}

static double head_flops(const ldt_model_config *c) {
    return 2 * (double)c->batch * (double)c->seq * (double)c->hidden * (double)c->vocab;
}

/* a <= b within the split's tie tolerance */
static int not_above(double a, double b) { return a <= b + 1e-12 * (b > 0 ? b : -b); }

ldt_status ldt_model_pipeline_split_seconds(int64_t n, const double *layer_seconds, double first_seconds,
                                            double last_seconds, int stages, int *layer_stage,
                                            double *stage_seconds) {
    double *best = NULL, *pre = NULL;
    if (!layer_seconds || !layer_stage)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: NULL layer_seconds or layer_stage");
    if (stages < 1 || n < stages)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: %lld layers into %d stages; expected at least "
                             "one layer a stage (layers >= stages >= 1)", (long long)n, stages);
    if (n > (1 << 20)) return ldt_set_error(LDT_ERR_UNSUPPORTED, "pipeline split: %lld layers; up to 2^20", (long long)n);
    if (!(first_seconds >= 0 && first_seconds < 1e300) || !(last_seconds >= 0 && last_seconds < 1e300))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: first %g, last %g seconds; expected finite "
                             "costs >= 0", first_seconds, last_seconds);
    for (int64_t l = 0; l < n; l++)
        if (!(layer_seconds[l] >= 0 && layer_seconds[l] < 1e300))
            return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: layer %lld costs %g seconds; expected a "
                                 "finite cost >= 0", (long long)l, layer_seconds[l]);
    /* best[s * (n + 1) + l]: the smallest largest-stage cost of layers [0, l) on stages [0, s)
     * (stage 0 with the first part; the last stage's own part added where s is the last) */
    best = malloc((size_t)(stages + 1) * (size_t)(n + 1) * sizeof *best);
    pre = malloc((size_t)(n + 1) * sizeof *pre);
    if (!best || !pre) {
        free(best);
        free(pre);
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "pipeline split: out of memory");
    }
    pre[0] = 0;
    for (int64_t l = 0; l < n; l++) pre[l + 1] = pre[l] + layer_seconds[l];
#define BEST(s, l) best[(int64_t)(s) * (n + 1) + (l)]
#define COST(s, j, l) (pre[l] - pre[j] + ((s) == 0 ? first_seconds : 0) + ((s) == stages - 1 ? last_seconds : 0))
    for (int64_t l = 0; l <= n; l++) BEST(0, l) = l ? 1e300 : 0;
    for (int s = 1; s <= stages; s++)
        for (int64_t l = 0; l <= n; l++) {
            BEST(s, l) = 1e300;
            for (int64_t j = s - 1; j < l; j++) { /* stage s - 1 holds layers [j, l) */
                double t = COST(s - 1, j, l), m = BEST(s - 1, j) > t ? BEST(s - 1, j) : t;
                if (m < BEST(s, l)) BEST(s, l) = m;
            }
        }
    /* the cuts from the last stage back: each stage the fewest layers that keep the largest
     * cost of it and the stages before it; then those stages split the same way (their own
     * largest cost as small as it can be, the fewest layers on the last of them, ...) */
    for (int64_t l = n, s = stages; s > 0; s--) {
        int64_t j = l - 1;
        while (j > s - 1) {
            double t = COST(s - 1, j, l);
            if (not_above(BEST(s - 1, j) > t ? BEST(s - 1, j) : t, BEST(s, l))) break;
            j--;
        }
        if (s == 1) j = 0;
        for (int64_t k = j; k < l; k++) layer_stage[k] = (int)s - 1;
        if (stage_seconds) stage_seconds[s - 1] = COST(s - 1, j, l);
        l = j;
    }
#undef BEST
#undef COST
    free(best);
    free(pre);
    return LDT_OK;
}

ldt_status ldt_model_pipeline_split(const char *kind, const ldt_model_config *cfg, int stages, int *layer_stage) {
    double *lf;
    ldt_status st;
    if (!kind || !cfg || !layer_stage) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: NULL argument");
    if (strcmp(kind, "gpt") != 0)
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "pipeline split: model %s; only gpt is split into stages", kind);
    if (stages < 1 || cfg->layers < stages)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: %lld layers into %d stages; expected at least "
                             "one layer a stage (layers >= stages)", (long long)cfg->layers, stages);
    if (cfg->layers > (1 << 20))
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "pipeline split: %lld layers; up to 2^20", (long long)cfg->layers);
    if (!(lf = malloc((size_t)cfg->layers * sizeof *lf))) return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "pipeline split: out of memory");
    for (int64_t l = 0; l < cfg->layers; l++) lf[l] = layer_flops(cfg);
    st = ldt_model_pipeline_split_seconds(cfg->layers, lf, 0, head_flops(cfg), stages, layer_stage, NULL);
    free(lf);
    return st;
}

/* ---- the modeled prices of a stage's parts (ldt_model_stage_seconds) ---------------- */

#define PRICE_LAYERS 3

/* Prefix of the busiest rank's modeled seconds: its instructions of trace nodes below `end`. */
static ldt_status prefix_seconds(ldt_plan *plan, ldt_ctx *ctx, int64_t end, double *out) {
    ldt_plan_step step;
    ldt_status st;
    *out = 0;
    if (end <= 0) return LDT_OK;
    if ((st = ldt_plan_step_get(plan, ldt_trace_node(ctx, end - 1), &step)) != LDT_OK) return st;
    *out = step.forward_compute_seconds + step.forward_comm_seconds;
    return LDT_OK;
}

/* A leaf shaped, typed and pinned as x: the gradient that reaches x from what follows it. */
static ldt_tensor *grad_leaf(ldt_ctx *ctx, ldt_tensor *x, int k) {
    ldt_shape sh;
    ldt_placement pl[LDT_MAX_DIMS];
    int np = 0;
    char name[48];
    ldt_tensor *g;
    snprintf(name, sizeof name, "stage_seconds.grad.%d", k);
    if (ldt_tensor_shape(x, &sh) != LDT_OK || !(g = ldt_input(ctx, name, &sh, ldt_tensor_dtype(x)))) return NULL;
    if (ldt_tensor_pin(x, pl, LDT_MAX_DIMS, &np) != LDT_OK || (np && ldt_pin(g, pl, ldt_mesh_ndim(ldt_ctx_mesh(ctx))) != LDT_OK))
        return NULL;
    return g;
}

/* The backward of what lies between x and `from`, recorded on its own: the gradient g of x's
 * consumers as a leaf, and ldt_grad of sum(x * g) with respect to wrt. Returns the nodes
 * [*begin, *end) it recorded (the surrogate's own product and sum before them). */
static ldt_status part_backward(ldt_ctx *ctx, ldt_tensor *x, ldt_tensor *const *wrt, int n, int k, int64_t *begin,
                                int64_t *end) {
    ldt_tensor *g = grad_leaf(ctx, x, k), *s, *gs[16];
    ldt_status st;
    if (!g || !(s = ldt_sum(ldt_mul(x, g), NULL, 0, 0)))
        return ldt_set_error(ldt_ctx_status(ctx) ? ldt_ctx_status(ctx) : LDT_ERR_INTERNAL, "stage seconds: %s",
                             ldt_ctx_errmsg(ctx));
    *begin = ldt_trace_nodes(ctx);
    if ((st = ldt_grad(s, wrt, n, gs)) != LDT_OK) return st;
    *end = ldt_trace_nodes(ctx);
    return LDT_OK;
}

/* One pricing of the 3-layer copy under recomputation `mode`: the middle layer's seconds and
 * the two ends'. */
static ldt_status price_parts(const ldt_model *src, const ldt_mesh *mesh, const char *pins, const ldt_cost_model *cm,
                              const char *mode, double *layer, double *first, double *last) {
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_plan *plan = NULL;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_model_config cfg = src->cfg;
    ldt_tensor *marks[PRICE_LAYERS + 1], *loss, *wrt[16];
    ldt_placement pl[LDT_MAX_DIMS];
    int np = 0;
    /* node boundaries: forward parts, then each backward part [b, e) and the surrogate's own */
    int64_t fwd[PRICE_LAYERS + 2], hb0, hb1, lb0[PRICE_LAYERS + 1], lb1[PRICE_LAYERS + 1], ob0, ob1;
    double pf[PRICE_LAYERS + 2], a, b, c, d, o, total_fwd_last, head_b;
    ldt_status st;
    cfg.layers = PRICE_LAYERS;
    co.mesh = (ldt_mesh *)mesh;
    po.cost = cm;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK || (st = ldt_model_create(ctx, "gpt", &cfg, &m)) != LDT_OK ||
        (st = ldt_model_pin(m, pins)) != LDT_OK || (st = ldt_model_set_recompute(m, -1, mode)) != LDT_OK)
        goto done;
    /* the head reads the tied table through an alias, as in a pipeline: its backward is the
     * last stage's, the lookup's the first's */
    if (!(m->pp_head = ldt_alias(m->params[0]))) goto ctx_fail;
    if (ldt_tensor_pin(m->params[0], pl, LDT_MAX_DIMS, &np) == LDT_OK && np) ldt_pin(m->pp_head, pl, ldt_mesh_ndim(mesh));
    m->marks = marks;
    loss = ldt_model_forward(m);
    m->marks = NULL;
    if (!loss) goto ctx_fail;
    for (int l = 0; l <= PRICE_LAYERS; l++) fwd[l] = ldt_tensor_node(marks[l]) + 1;
    fwd[PRICE_LAYERS + 1] = ldt_trace_nodes(ctx);
    /* the head and loss: back to the last layer's output */
    wrt[0] = marks[PRICE_LAYERS];
    wrt[1] = m->params[m->nparams - 2];
    wrt[2] = m->params[m->nparams - 1];
    wrt[3] = m->pp_head;
    hb0 = ldt_trace_nodes(ctx);
    if ((st = ldt_grad(loss, wrt, 4, wrt + 4)) != LDT_OK) goto done;
    hb1 = ldt_trace_nodes(ctx);
    /* each layer, the last first: back to its input */
    for (int l = PRICE_LAYERS; l >= 1; l--) {
        int n = 0;
        wrt[n++] = marks[l - 1];
        for (int k = 2 + (l - 1) * ((m->nparams - 4) / PRICE_LAYERS); k < 2 + l * ((m->nparams - 4) / PRICE_LAYERS); k++)
            wrt[n++] = m->params[k];
        if ((st = part_backward(ctx, marks[l], wrt, n, l, &lb0[l], &lb1[l])) != LDT_OK) goto done;
    }
    /* the embeddings: the token table through the lookup, the position table */
    wrt[0] = m->params[0];
    wrt[1] = m->params[1];
    if ((st = part_backward(ctx, marks[0], wrt, 2, 0, &lb0[0], &lb1[0])) != LDT_OK) goto done;
    /* what a surrogate's backward costs by itself, taken off each part's */
    wrt[0] = marks[0];
    if ((st = part_backward(ctx, marks[0], wrt, 1, PRICE_LAYERS + 1, &ob0, &ob1)) != LDT_OK) goto done;
    m->pp_head = NULL;
    if ((st = ldt_plan_create(ctx, &po, &plan)) != LDT_OK) goto done;
    for (int i = 0; i < PRICE_LAYERS + 2; i++)
        if ((st = prefix_seconds(plan, ctx, fwd[i], &pf[i])) != LDT_OK) goto done;
    if ((st = prefix_seconds(plan, ctx, ob0, &a)) != LDT_OK || (st = prefix_seconds(plan, ctx, ob1, &b)) != LDT_OK)
        goto done;
    o = b - a;
    /* the middle layer: its forward and its backward part */
    if ((st = prefix_seconds(plan, ctx, lb0[2], &a)) != LDT_OK || (st = prefix_seconds(plan, ctx, lb1[2], &b)) != LDT_OK)
        goto done;
    *layer = pf[2] - pf[1] + (b - a - o);
    /* the embeddings: the forward up to the stream's start, the lookup's backward */
    if ((st = prefix_seconds(plan, ctx, lb0[0], &c)) != LDT_OK || (st = prefix_seconds(plan, ctx, lb1[0], &d)) != LDT_OK)
        goto done;
    *first = pf[0] + (d - c - o);
    /* the final norm, head and loss: after the last layer, and back to it */
    if ((st = prefix_seconds(plan, ctx, hb0, &a)) != LDT_OK || (st = prefix_seconds(plan, ctx, hb1, &b)) != LDT_OK)
        goto done;
    total_fwd_last = pf[PRICE_LAYERS + 1] - pf[PRICE_LAYERS];
    head_b = b - a;
    *last = total_fwd_last + head_b;
    if (*layer < 0) *layer = 0;
    if (*first < 0) *first = 0;
    goto done;
ctx_fail:
    st = ldt_set_error(ldt_ctx_status(ctx) ? ldt_ctx_status(ctx) : LDT_ERR_INTERNAL, "stage seconds: %s",
                       ldt_ctx_errmsg(ctx));
done:
    if (m) m->pp_head = NULL;
    ldt_plan_destroy(plan);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    return st;
}

ldt_status ldt_model_stage_seconds(const ldt_model *m, const char *pins, const ldt_cost_model *cm, double *layer_seconds,
                                   double *first_seconds, double *last_seconds) {
    static const char *const modes[3] = {"none", "selective", "full"};
    const ldt_mesh *mesh;
    ldt_mesh *stage = NULL;
    ldt_cost_model full, scm;
    int64_t dims[LDT_MAX_DIMS];
    const char *names[LDT_MAX_DIMS];
    int nd = 0, pp = -1, used[3] = {0, 0, 0};
    double price[3] = {0, 0, 0}, first = 0, last = 0;
    ldt_status st = LDT_OK;
    if (!m || !cm || !layer_seconds || !first_seconds || !last_seconds)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "stage seconds: NULL argument (expected a model, a cost model "
                             "and three outputs)");
    if (m->kind != MODEL_GPT)
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "stage seconds: an mlp model; only gpt is split into stages");
    if (!pins) pins = m->sp ? "megatron-sp" : "megatron";
    mesh = ldt_ctx_mesh(m->ctx);
    if (ldt_mesh_dim_index(mesh, "pp", &pp) != LDT_OK) pp = -1;
    ldt_clear_error();
    /* the stage's sub-mesh on no devices, each of its dims priced by the link it has in m's mesh */
    if ((st = ldt_cost_model_for_mesh(cm, mesh, &full)) != LDT_OK) return st;
    scm = full;
    scm.nlinks = 0;
    for (int d = 0; d < ldt_mesh_ndim(mesh); d++) {
        if (d == pp) continue;
        dims[nd] = ldt_mesh_dim_size(mesh, d);
        names[nd] = ldt_mesh_dim_name(mesh, d);
        scm.links[nd++] = full.links[d];
    }
    if (nd == 0) { /* a stage of one rank */
        dims[nd] = 1;
        names[nd] = "dp";
        scm.links[nd++] = full.links[0];
    }
    scm.nlinks = nd;
    for (int d = 0; d < nd; d++)
        if (!names[d]) {
            nd = -nd;
            break;
        }
    st = nd < 0 ? ldt_mesh_create(-nd, dims, NULL, NULL, LDT_DEVICE_META, &stage)
                : ldt_mesh_create(nd, dims, NULL, names, LDT_DEVICE_META, &stage);
    if (st != LDT_OK) return st;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        const char *r = ldt_model_recompute(m, l);
        for (int i = 0; i < 3; i++) used[i] |= r && strcmp(r, modes[i]) == 0;
    }
    for (int i = 0, priced = 0; i < 3 && st == LDT_OK; i++) {
        double f = 0, la = 0;
        if (!used[i]) continue;
        st = price_parts(m, stage, pins, &scm, modes[i], &price[i], &f, &la);
        if (!priced) first = f, last = la; /* the ends, whatever the layers' mode */
        priced = 1;
    }
    ldt_mesh_destroy(stage);
    if (st != LDT_OK) return st;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        const char *r = ldt_model_recompute(m, l);
        for (int i = 0; i < 3; i++)
            if (r && strcmp(r, modes[i]) == 0) layer_seconds[l] = price[i];
    }
    *first_seconds = first;
    *last_seconds = last;
    return LDT_OK;
}

ldt_tensor *ldt_model_forward_pipeline(ldt_model *m, const ldt_pipeline_config *pc, ldt_tensor *const *tokens,
                                       ldt_tensor *const *targets) {
    const ldt_mesh *mesh;
    int d, P, V, nv, *split = NULL;
    const int *st;
    ldt_tensor *loss = NULL, *sum = NULL, *in0, *in1;
    ldt_placement pl[LDT_MAX_DIMS];
    int np = 0;
    if (!m || !pc || !tokens || !targets) {
        ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward pipeline: NULL argument");
        return NULL;
    }
    if (m->kind != MODEL_GPT) {
        ldt_set_error(LDT_ERR_UNSUPPORTED, "model forward pipeline: only gpt is split into stages");
        return NULL;
    }
    mesh = ldt_ctx_mesh(m->ctx);
    if (ldt_mesh_dim_index(mesh, "pp", &d) != LDT_OK) {
        ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward pipeline: the mesh has no dim named pp; expected one "
                      "(e.g. pp=2,dp=2)");
        return NULL;
    }
    P = (int)ldt_mesh_dim_size(mesh, d);
    V = pc->chunks > 1 ? pc->chunks : 1;
    if (ldt_pipeline_begin(m->ctx, pc->schedule, V, pc->micro) != LDT_OK) return NULL;
    nv = P * V;
    if (m->cfg.layers < nv) {
        ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward pipeline: %lld layers on %d stages (pp=%d x %d chunks); "
                      "expected at least one layer a stage", (long long)m->cfg.layers, nv, P, V);
        return NULL;
    }
    if (pc->schedule == LDT_PIPE_INTERLEAVED && m->cfg.layers % nv != 0) {
        ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward pipeline: interleaved over pp=%d x %d chunks needs the "
                      "layers (%lld) to be a multiple of %d: every model chunk as deep", P, V,
                      (long long)m->cfg.layers, nv);
        return NULL;
    }
    if (!(split = malloc((size_t)m->cfg.layers * sizeof *split))) {
        ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model forward pipeline: out of memory");
        return NULL;
    }
    if (pc->layer_stage) {
        st = pc->layer_stage;
        for (int64_t l = 0; l < m->cfg.layers; l++)
            if (st[l] < 0 || st[l] >= nv || (l == 0 ? st[l] != 0 : st[l] != st[l - 1] && st[l] != st[l - 1] + 1) ||
                (l == m->cfg.layers - 1 && st[l] != nv - 1)) {
                ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward pipeline: layer %lld on stage %d; expected the "
                              "stages 0..%d in order, each at least one layer", (long long)l, st[l], nv - 1);
                free(split);
                return NULL;
            }
    } else if (pc->schedule == LDT_PIPE_INTERLEAVED) { /* Megatron: every chunk as deep */
        for (int64_t l = 0; l < m->cfg.layers; l++) split[l] = (int)(l / (m->cfg.layers / nv));
        st = split;
    } else {
        if (ldt_model_pipeline_split("gpt", &m->cfg, nv, split) != LDT_OK) {
            free(split);
            return NULL;
        }
        st = split;
    }
    /* the head reads the tied table through an alias: its gradient sums on the last stage, the
     * embedding's on the first, and the two meet once, after the last micro-batch */
    m->pp_head = ldt_alias(m->params[0]);
    if (m->pp_head && ldt_tensor_pin(m->params[0], pl, LDT_MAX_DIMS, &np) == LDT_OK && np)
        ldt_pin(m->pp_head, pl, ldt_mesh_ndim(mesh));
    m->pp_stage = st;
    m->pp_last = nv - 1;
    in0 = m->inputs[0];
    in1 = m->inputs[1];
    /* the last micro-batch first: ldt_grad walks the trace backward, so the gradients of the
     * parameters accumulate from micro-batch 0 on, as every schedule runs the backwards */
    for (int i = pc->micro - 1; i >= 0; i--) {
        ldt_tensor *l;
        m->pp_micro = i;
        m->inputs[0] = tokens[i];
        m->inputs[1] = targets[i];
        m->output = NULL;
        l = ldt__gpt_forward(m);
        if (!l) break;
        ldt_pipeline_tag(m->ctx, -1, 0);
        sum = sum ? ldt_add(l, sum) : l;
    }
    m->inputs[0] = in0;
    m->inputs[1] = in1;
    m->pp_stage = NULL;
    m->pp_head = NULL;
    ldt_pipeline_tag(m->ctx, -1, 0);
    if (sum) loss = pc->micro > 1 ? ldt_mul_scalar(sum, 1.0 / pc->micro) : sum;
    free(split);
    if (!loss && ldt_ctx_status(m->ctx) != LDT_OK) ldt_set_error(ldt_ctx_status(m->ctx), "%s", ldt_ctx_errmsg(m->ctx));
    return loss;
}
