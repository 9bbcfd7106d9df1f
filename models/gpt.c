/* The gpt model (GPT-2): embeddings, pre-LN attention + MLP blocks, tied head, CE loss. */
/* Token and learned position embeddings, `layers` pre-LN blocks of causal self-attention and an
 * MLP (biases on every linear), a final LayerNorm, the LM head tied to the token embedding, and
 * the cross-entropy loss (targets of -1 are ignored). Parameters: V*H + P*H + L*(12H^2 + 13H) +
 * 2H, P the position table's rows (cfg.positions, else seq; positions 0..seq-1 are used).
 * GPT-2's function: pre-LN, LayerNorm eps 1e-5, GELU tanh form ("gelu_new"), learned
 * positions, biases, attention scaled by 1/sqrt(head_dim) under the causal mask, tied head
 * (tests/test_hf.c compares the logits with a double-precision GPT-2 written from its
 * definition). */
#include <stdlib.h>

#include "models/model.h"

/* The parameters of one block, in creation order. */
enum { LN1_W, LN1_B, ATTN_W, ATTN_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FC2_W, FC2_B,
       PER_LAYER };

ldt_status ldt__gpt_create(ldt_model *m) {
    int64_t H = m->cfg.hidden, V = m->cfg.vocab, S = m->cfg.seq, B = m->cfg.batch;
    int64_t P = m->cfg.positions ? m->cfg.positions : S;
    ldt_shape ts = {2, {B, S}}, hs = {1, {H}};
    int64_t *pos;
    static const char *const names[PER_LAYER] = {
        "ln_1.w", "ln_1.b", "attn.c_attn.w", "attn.c_attn.b", "attn.c_proj.w", "attn.c_proj.b",
        "ln_2.w", "ln_2.b", "mlp.c_fc.w",    "mlp.c_fc.b",    "mlp.c_proj.w",  "mlp.c_proj.b"};
    const model_init N = MODEL_INIT_NORMAL, Z = MODEL_INIT_ZERO, O = MODEL_INIT_ONE;
    const model_init init[PER_LAYER] = {O, Z, N, Z, N, Z, O, Z, N, Z, N, Z};
    const ldt_shape shapes[PER_LAYER] = {
        {1, {H}},        {1, {H}},     /* ln_1 */
        {2, {3 * H, H}}, {1, {3 * H}}, /* c_attn: q, k, v stacked on the output dim */
        {2, {H, H}},     {1, {H}},     /* attn c_proj */
        {1, {H}},        {1, {H}},     /* ln_2 */
        {2, {4 * H, H}}, {1, {4 * H}}, /* c_fc */
        {2, {H, 4 * H}}, {1, {H}}};    /* mlp c_proj */
    m->inputs[0] = ldt_input(m->ctx, "tokens", &ts, LDT_I64);  /* [B, S] */
    m->inputs[1] = ldt_input(m->ctx, "targets", &ts, LDT_I64); /* [B, S], -1 ignored */
    m->input_names[0] = "tokens";
    m->input_names[1] = "targets";
    m->ninputs = 2;
    if (!m->inputs[0] || !m->inputs[1]) return ldt__model_fail(m);
    if (!(pos = malloc((size_t)S * sizeof *pos)))
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY,
                             "model gpt: out of memory for seq = %lld positions", (long long)S);
    for (int64_t i = 0; i < S; i++) pos[i] = i;
    m->positions = ldt_constant(m->ctx, &(ldt_shape){1, {S}}, LDT_I64, pos); /* made once */
    free(pos);
    if (!m->positions || !ldt__model_param(m, N, &(ldt_shape){2, {V, H}}, "wte") ||
        !ldt__model_param(m, N, &(ldt_shape){2, {P, H}}, "wpe"))
        return ldt__model_fail(m);
    for (int64_t l = 0; l < m->cfg.layers; l++)
        for (int k = 0; k < PER_LAYER; k++)
            if (!ldt__model_param(m, init[k], &shapes[k], "h.%lld.%s", (long long)l, names[k]))
                return ldt__model_fail(m);
    if (!ldt__model_param(m, O, &hs, "ln_f.w") || !ldt__model_param(m, Z, &hs, "ln_f.b"))
        return ldt__model_fail(m);
    return LDT_OK;
}

/* When the token embedding is pinned vocab-parallel (Shard(0) on some mesh dims, as the
 * megatron scheme does), pins t to `vocab` on those dims, Shard(0) where the tokens are pinned
 * so (the batch), Replicate elsewhere: the lookup's output Partial (each rank reads only its
 * rows), the tied head's logits sharded on the vocabulary. Under the cost model's prices a
 * small model would rather gather the table or the logits (one collective instead of the
 * loss's few small ones), which the scheme exists to rule out. */
static void pin_vocab(ldt_model *m, ldt_tensor *t, ldt_placement vocab) {
    const ldt_mesh *mesh = ldt_ctx_mesh(m->ctx);
    int nd = ldt_mesh_ndim(mesh), pw = 0, pt = 0, any = 0;
    ldt_placement wp[LDT_MAX_DIMS], tp[LDT_MAX_DIMS], pl[LDT_MAX_DIMS];
    if (!t || ldt_tensor_pin(m->params[0], wp, LDT_MAX_DIMS, &pw) != LDT_OK || !pw ||
        ldt_tensor_pin(m->inputs[0], tp, LDT_MAX_DIMS, &pt) != LDT_OK)
        return;
    for (int d = 0; d < nd; d++) {
        pl[d] = ldt_replicate();
        if (wp[d].kind == LDT_PLACE_SHARD && wp[d].dim == 0) {
            pl[d] = vocab;
            any = 1;
        } else if (pt && tp[d].kind == LDT_PLACE_SHARD && tp[d].dim == 0) {
            pl[d] = ldt_shard(0);
        }
    }
    if (any) ldt_pin(t, pl, nd);
}

/* The residual stream as the tokens are pinned (the batch on the data-parallel dims, whole on
 * the others), when the embedding is pinned too (the megatron scheme): Megatron's layout, one
 * all_reduce after each row-parallel projection and no traffic on the batch dims. Unpinned,
 * a small model's step would rather gather the batch once than reduce its gradients. */
static void pin_batch(ldt_model *m, ldt_tensor *t) {
    const ldt_mesh *mesh = ldt_ctx_mesh(m->ctx);
    int nd = ldt_mesh_ndim(mesh), pw = 0, pt = 0;
    ldt_placement wp[LDT_MAX_DIMS], tp[LDT_MAX_DIMS], pl[LDT_MAX_DIMS];
    if (!t || ldt_tensor_pin(m->params[0], wp, LDT_MAX_DIMS, &pw) != LDT_OK || !pw ||
        ldt_tensor_pin(m->inputs[0], tp, LDT_MAX_DIMS, &pt) != LDT_OK || !pt)
        return;
    for (int d = 0; d < nd; d++)
        pl[d] = tp[d].kind == LDT_PLACE_SHARD && tp[d].dim == 0 ? ldt_shard(0) : ldt_replicate();
    ldt_pin(t, pl, nd);
}

ldt_tensor *ldt__gpt_forward(ldt_model *m) {
    int64_t H = m->cfg.hidden, A = m->cfg.heads, D = H / A, S = m->cfg.seq, B = m->cfg.batch;
    int train = m->cfg.train;
    double p = train ? m->cfg.dropout : 0;
    ldt_tensor *wte = m->params[0], *wpe = m->params[1], *x, *logits;
    ldt_shape heads = {4, {B, S, A, D}}, flat = {3, {B, S, H}};
    /* [B, S, H] + [S, H] */
    x = ldt_embedding(wte, m->inputs[0]);
    pin_vocab(m, x, ldt_partial(LDT_REDUCE_SUM));
    x = ldt_add(x, ldt_embedding(wpe, m->positions));
    pin_batch(m, x);
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        ldt_tensor **w = &m->params[2 + PER_LAYER * l], *h, *qkv, *q, *k, *v, *y;
        h = ldt_layer_norm(x, 1, w[LN1_W], w[LN1_B], 1e-5);
        qkv = ldt_linear(h, w[ATTN_W], w[ATTN_B]); /* [B, S, 3H] */
        /* [B, S, H] -> [B, S, A, D] -> [B, A, S, D] */
        q = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, 0, H, 1), &heads), 1, 2);
        k = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, H, 2 * H, 1), &heads), 1, 2);
        v = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, 2 * H, 3 * H, 1), &heads), 1, 2);
        y = ldt_scaled_dot_product_attention(q, k, v, 1, p, 0); /* scale 1/sqrt(D) */
        y = ldt_reshape(ldt_transpose(y, 1, 2), &flat);         /* [B, S, H] */
        x = ldt_add(x, ldt_dropout(ldt_linear(y, w[PROJ_W], w[PROJ_B]), p, train));
        pin_batch(m, x);
        h = ldt_layer_norm(x, 1, w[LN2_W], w[LN2_B], 1e-5);
        h = ldt_linear(ldt_gelu(ldt_linear(h, w[FC_W], w[FC_B]), 1), w[FC2_W], w[FC2_B]);
        x = ldt_add(x, ldt_dropout(h, p, train));
        pin_batch(m, x);
    }
    x = ldt_layer_norm(x, 1, m->params[m->nparams - 2], m->params[m->nparams - 1], 1e-5);
    logits = ldt_linear(x, wte, NULL); /* [B, S, V]: the head is tied to the token embedding */
    pin_vocab(m, logits, ldt_shard(2));
    m->output = logits;
    return ldt_cross_entropy(logits, m->inputs[1], -1);
}
