/* Sharding schemes for the model builders, set as pins on parameters and inputs (public API
 * only). "megatron": tensor parallel on the mesh dim named "tp" (else the last, unless a dim
 * is named "dp": then none), the batch on the dim named "dp" (else, on a 2-D+ mesh, the first
 * that is not tp; a dim named "pp" is neither), every other parameter Replicate; the
 * planner derives the rest.
 * "megatron-sp": the same parameters, and the gpt's activations that Megatron keeps whole on
 * tp (residual stream, norms, dropouts) split on the sequence there (sequence parallel). */
#include <string.h>

#include "models/model.h"

/* Pins t to `p` on mesh dim `dim`, Replicate elsewhere, except the batch dim 0 on the data
 * dim when batch != 0. */
static ldt_status pin_one(ldt_tensor *t, int nd, int tp, ldt_placement p, int dp) {
    ldt_placement pl[LDT_MAX_DIMS];
    for (int d = 0; d < nd; d++) pl[d] = ldt_replicate();
    if (tp >= 0) pl[tp] = p;
    if (dp >= 0) pl[dp] = ldt_shard(0);
    return ldt_pin(t, pl, nd);
}

static int find_dim(const ldt_mesh *m, const char *name, int fallback) {
    int d;
    return ldt_mesh_dim_index(m, name, &d) == LDT_OK ? d : fallback;
}

ldt_status ldt_model_pin(ldt_model *m, const char *scheme) {
    const ldt_mesh *mesh;
    int nd, tp, dp;
    ldt_placement R = ldt_replicate();
    if (!m || !scheme) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model pin: NULL argument");
    m->sp = 0;
    if (strcmp(scheme, "none") == 0) return LDT_OK;
    if (strcmp(scheme, "megatron-sp") == 0) m->sp = 1;
    else if (strcmp(scheme, "megatron") != 0)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                             "model pin: unknown scheme '%s', expected megatron, megatron-sp or none",
                             scheme);
    mesh = ldt_ctx_mesh(m->ctx);
    nd = ldt_mesh_ndim(mesh);
    ldt_clear_error();
    /* a mesh that names a dp dim but no tp dim is data parallel only: nothing on tp */
    dp = find_dim(mesh, "dp", -1);
    tp = find_dim(mesh, "tp", dp >= 0 ? -1 : nd - 1);
    if (dp < 0 && nd >= 2) dp = tp == 0 ? 1 : 0;
    if (dp == tp) dp = -1;
    { /* a pipeline's dim (pp) is neither: every tensor whole on it (docs/pipeline.md) */
        int pp = find_dim(mesh, "pp", -2);
        if (tp == pp) tp = -1;
        if (dp == pp) dp = -1;
    }
    ldt_clear_error();
    for (int i = 0; i < m->ninputs; i++) /* the batch on dp, replicated on tp */
        if (pin_one(m->inputs[i], nd, tp, R, dp) != LDT_OK) return ldt__model_fail(m);
    for (int i = 0; i < m->nparams; i++) {
        const char *n = m->names[i];
        size_t len = strlen(n);
        ldt_placement p;
        int pinned = 1;
#define ENDS(s) (len >= strlen(s) && strcmp(n + len - strlen(s), s) == 0)
        if (m->kind == MODEL_MLP) {
            if (ENDS(".w1") || ENDS(".b1")) p = ldt_shard(0); /* column parallel */
            else if (ENDS(".w2")) p = ldt_shard(1);           /* row parallel */
            else pinned = 0;
        } else {
            if (ENDS("attn.c_attn.w") || ENDS("attn.c_attn.b")) /* q, k, v blocks each split */
                p = ldt_interleaved_shard(0, 3);
            else if (ENDS("attn.c_proj.w") || ENDS("mlp.c_proj.w")) p = ldt_shard(1);
            else if (ENDS("mlp.c_fc.w") || ENDS("mlp.c_fc.b")) p = ldt_shard(0);
            else if (strcmp(n, "wte") == 0) p = ldt_shard(0); /* vocab parallel */
            else pinned = 0;
        }
#undef ENDS
        /* the rest (norms, row-parallel biases, positions) whole on every rank, as Megatron
         * keeps them: left free, the search would shard a bias over the batch dim to save its
         * update and gather it back in every forward */
        if (pin_one(m->params[i], nd, tp, pinned ? p : R, -1) != LDT_OK) return ldt__model_fail(m);
    }
    return LDT_OK;
}
