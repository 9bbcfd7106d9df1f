/* Pipelined gpt steps (docs/pipeline.md): the stage split balanced by modeled time, and the
 * forward of every micro-batch on its stages. Written against the public API only. */
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

ldt_status ldt_model_pipeline_split(const char *kind, const ldt_model_config *cfg, int stages, int *layer_stage) {
    int64_t L;
    double lf, hf, *best = NULL;
    int *cut = NULL;
    if (!kind || !cfg || !layer_stage) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: NULL argument");
    if (strcmp(kind, "gpt") != 0)
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "pipeline split: model %s; only gpt is split into stages", kind);
    L = cfg->layers;
    if (stages < 1 || L < stages)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "pipeline split: %lld layers into %d stages; expected at least "
                             "one layer a stage (layers >= stages)", (long long)L, stages);
    if (L > (1 << 20)) return ldt_set_error(LDT_ERR_UNSUPPORTED, "pipeline split: %lld layers; up to 2^20", (long long)L);
    lf = layer_flops(cfg);
    hf = head_flops(cfg);
    /* best[s * (L + 1) + l]: the smallest largest-stage time of layers [0, l) on stages
     * [0, s); the last stage also carries the head */
    best = malloc((size_t)(stages + 1) * (size_t)(L + 1) * sizeof *best);
    cut = malloc((size_t)(stages + 1) * (size_t)(L + 1) * sizeof *cut);
    if (!best || !cut) {
        free(best);
        free(cut);
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "pipeline split: out of memory");
    }
#define BEST(s, l) best[(int64_t)(s) * (L + 1) + (l)]
#define CUT(s, l) cut[(int64_t)(s) * (L + 1) + (l)]
    for (int64_t l = 0; l <= L; l++) BEST(0, l) = l ? 1e300 : 0;
    for (int s = 1; s <= stages; s++)
        for (int64_t l = 0; l <= L; l++) {
            BEST(s, l) = 1e300;
            CUT(s, l) = -1;
            /* stage s - 1 holds layers [j, l): fewest first, so ties keep the earlier stages fuller */
            for (int64_t j = l - 1; j >= s - 1; j--) {
                double t = (double)(l - j) * lf + (s == stages ? hf : 0), m = BEST(s - 1, j) > t ? BEST(s - 1, j) : t;
                if (m < BEST(s, l)) {
                    BEST(s, l) = m;
                    CUT(s, l) = (int)j;
                }
            }
        }
    for (int64_t l = L, s = stages; s > 0; s--) {
        int64_t j = CUT(s, l);
        for (int64_t k = j; k < l; k++) layer_stage[k] = (int)s - 1;
        l = j;
    }
#undef BEST
#undef CUT
    free(best);
    free(cut);
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
