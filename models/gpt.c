/* The gpt model (GPT-2): embeddings, pre-LN attention + MLP blocks, tied head, CE loss. */
/* Token and learned position embeddings, `layers` pre-LN blocks of causal self-attention and an
 * MLP (biases on every linear), a final LayerNorm, the LM head tied to the token embedding, and
 * the cross-entropy loss (targets of -1 are ignored). Parameters: V*H + P*H + L*(12H^2 + 13H) +
 * 2H, P the position table's rows (cfg.positions, else seq; positions 0..seq-1 are used).
 * GPT-2's function: pre-LN, LayerNorm eps 1e-5, GELU tanh form ("gelu_new"), learned
 * positions, biases, attention scaled by 1/sqrt(head_dim) under the causal mask, tied head
 * (tests/test_hf.c compares the logits with a double-precision GPT-2 written from its
 * definition). */
#include <math.h>
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

/* Megatron's activation layout, when the token embedding is pinned (the megatron scheme): on
 * the mesh dims where the tied table is split on the vocabulary (tensor parallel) t is pinned
 * to `tp`, on those where the tokens are split on the batch Shard(0), elsewhere Replicate. So
 * the lookup's output is Partial (each rank reads only its rows), the head's logits are split
 * on the vocabulary, column-parallel outputs split on their features and row-parallel ones
 * Partial, the residual stream and the norms whole on tp, and nothing moves on the batch dims
 * in the forward. Under the cost model's prices a small model would rather gather the table,
 * the logits or the batch once (one collective instead of a few small ones, and no gradient
 * reduction), which the scheme exists to rule out. `batch` 0: t has no batch dim (whole on
 * the data-parallel dims too). */
static void pin_layout(ldt_model *m, ldt_tensor *t, ldt_placement tp, int batch) {
    const ldt_mesh *mesh = ldt_ctx_mesh(m->ctx);
    int nd = ldt_mesh_ndim(mesh), pw = 0, pt = 0;
    ldt_placement wp[LDT_MAX_DIMS], bp[LDT_MAX_DIMS], pl[LDT_MAX_DIMS];
    if (!t || ldt_tensor_pin(m->params[0], wp, LDT_MAX_DIMS, &pw) != LDT_OK || !pw ||
        ldt_tensor_pin(m->inputs[0], bp, LDT_MAX_DIMS, &pt) != LDT_OK || !pt)
        return;
    for (int d = 0; d < nd; d++) {
        pl[d] = ldt_replicate();
        if (wp[d].kind == LDT_PLACE_SHARD && wp[d].dim == 0)
            pl[d] = tp;
        else if (batch && bp[d].kind == LDT_PLACE_SHARD && bp[d].dim == 0)
            pl[d] = ldt_shard(0);
    }
    ldt_pin(t, pl, nd); /* with no tensor-parallel dim `tp` is never used */
}

/* Ranks over the tensor-parallel mesh dims (where the tied table is split on the vocabulary
 * by a pin); 1 when there are none. */
static int64_t tp_ranks(ldt_model *m) {
    const ldt_mesh *mesh = ldt_ctx_mesh(m->ctx);
    ldt_placement wp[LDT_MAX_DIMS];
    int pw = 0;
    int64_t n = 1;
    if (ldt_tensor_pin(m->params[0], wp, LDT_MAX_DIMS, &pw) != LDT_OK || !pw) return 1;
    for (int d = 0; d < ldt_mesh_ndim(mesh); d++)
        if (wp[d].kind == LDT_PLACE_SHARD && wp[d].dim == 0) n *= ldt_mesh_dim_size(mesh, d);
    return n;
}

/* An activation [B, ...]: the batch on the data-parallel dims. */
static void pin_act(ldt_model *m, ldt_tensor *t, ldt_placement tp) { pin_layout(m, t, tp, 1); }

/* Dropout of a row-parallel output before the residual add, pinned whole on tp as the sum it
 * drops from: the Partial is all-reduced once, before it (Megatron), where the roofline would
 * rather reduce-scatter it, drop a quarter on each rank and gather the result back. Under
 * sequence parallelism (m->sp) pinned split on the sequence: the reduce_scatter, and the
 * residual add on the shard. */
static ldt_tensor *residual_dropout(ldt_model *m, ldt_tensor *h, double p, int train) {
    ldt_tensor *d = ldt_dropout(h, p, train);
    pin_act(m, d, m->sp ? ldt_shard(1) : ldt_replicate());
    return d;
}

/* The attention core unfused, its weights kept for the backward (a MODEL_RC_NONE layer):
 * scores q k^T / sqrt(D), the causal mask (-inf above the diagonal), softmax, dropout p on the
 * weights (the stream taken as the fused kernel takes it: the very mask), then the weights
 * times v. The same function as ldt_scaled_dot_product_attention's; each piece split by whole
 * heads where the heads divide over tp, as its output. NULL on error (stuck on the context). */
static ldt_tensor *attention_unfused(ldt_model *m, ldt_tensor *q, ldt_tensor *k, ldt_tensor *v, double p,
                                     int train) {
    int64_t S = m->cfg.seq, D = m->cfg.hidden / m->cfg.heads;
    int heads_split = m->cfg.heads % tp_ranks(m) == 0;
    double inf = -INFINITY;
    ldt_tensor *s, *w, *ninf;
    if (!m->causal_mask) {
        unsigned char *mask = malloc((size_t)(S * S));
        if (!mask) {
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model gpt: out of memory for the [%lld, %lld] causal mask",
                          (long long)S, (long long)S);
            return NULL;
        }
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < S; j++) mask[i * S + j] = j <= i;
        m->causal_mask = ldt_constant(m->ctx, &(ldt_shape){2, {S, S}}, LDT_BOOL, mask); /* made once */
        free(mask);
        if (!m->causal_mask) return NULL;
    }
    if (!m->neg_inf && !(m->neg_inf = ldt_constant(m->ctx, &(ldt_shape){0, {0}}, LDT_F64, &inf))) return NULL;
    ninf = m->cfg.dtype != LDT_F64 ? ldt_cast(m->neg_inf, m->cfg.dtype) : m->neg_inf;
    s = ldt_mul_scalar(ldt_matmul(q, ldt_transpose(k, -1, -2)), 1.0 / sqrt((double)D)); /* [B, A, S, S] */
    if (heads_split) pin_act(m, s, ldt_shard(1));
    s = ldt_where(m->causal_mask, s, ninf);
    if (heads_split) pin_act(m, s, ldt_shard(1));
    w = ldt_softmax(s, -1);
    if (heads_split) pin_act(m, w, ldt_shard(1));
    if (train && p > 0) {
        w = ldt_dropout(w, p, train);
        if (heads_split) pin_act(m, w, ldt_shard(1));
    }
    return ldt_matmul(w, v); /* [B, A, S, D] */
}

/* In a pipelined forward, the ops recorded next belong to virtual stage `stage`. */
static void pp_tag(ldt_model *m, int stage) {
    if (m->pp_stage) ldt_pipeline_tag(m->ctx, stage, m->pp_micro);
}

ldt_tensor *ldt__gpt_forward(ldt_model *m) {
    int64_t H = m->cfg.hidden, A = m->cfg.heads, D = H / A, S = m->cfg.seq, B = m->cfg.batch;
    int train = m->cfg.train;
    double p = train ? m->cfg.dropout : 0;
    ldt_tensor *wte = m->params[0], *wpe = m->params[1], *x, *pos, *logits;
    ldt_shape heads = {4, {B, S, A, D}}, flat = {3, {B, S, H}};
    /* the activations whole on tp (Megatron), or split on the sequence (sequence parallel: the
     * row-parallel outputs reduce-scattered, the column-parallel inputs all-gathered) */
    ldt_placement R = m->sp ? ldt_shard(1) : ldt_replicate();
    /* [B, S, H] + [S, H] */
    pp_tag(m, 0); /* the embeddings with the first stage, the head and loss with the last */
    x = ldt_embedding(wte, m->inputs[0]);
    pin_act(m, x, ldt_partial(LDT_REDUCE_SUM)); /* vocab-parallel lookup */
    pos = ldt_embedding(wpe, m->positions); /* [S, H]: no batch dim, whole everywhere */
    pin_layout(m, pos, ldt_replicate(), 0);
    x = ldt_add(x, pos);
    pin_act(m, x, R);
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        ldt_tensor **w = &m->params[2 + PER_LAYER * l], *h, *qkv, *q, *k, *v, *y;
        int rc = m->recompute ? m->recompute[l] : MODEL_RC_SELECTIVE;
        if (m->marks) { /* the layer's input as a node of its own, outside any recomputation */
            x = m->marks[l] = ldt_alias(x);
            pin_act(m, x, R);
        }
        if (rc == MODEL_RC_FULL && ldt_recompute_begin(m->ctx) != LDT_OK) return NULL;
        if (m->pp_stage) pp_tag(m, m->pp_stage[l]);
        h = ldt_layer_norm(x, 1, w[LN1_W], w[LN1_B], 1e-5);
        pin_act(m, h, R);
        qkv = ldt_linear(h, w[ATTN_W], w[ATTN_B]); /* [B, S, 3H] */
        pin_act(m, qkv, ldt_interleaved_shard(2, 3)); /* each of q, k, v split on heads */
        /* [B, S, H] -> [B, S, A, D] -> [B, A, S, D] */
        q = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, 0, H, 1), &heads), 1, 2);
        k = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, H, 2 * H, 1), &heads), 1, 2);
        v = ldt_transpose(ldt_reshape(ldt_slice(qkv, -1, 2 * H, 3 * H, 1), &heads), 1, 2);
        y = rc == MODEL_RC_NONE ? attention_unfused(m, q, k, v, p, train)
                                : ldt_scaled_dot_product_attention(q, k, v, 1, p, 0); /* scale 1/sqrt(D) */
        if (A % tp_ranks(m) == 0) pin_act(m, y, ldt_shard(1)); /* split by whole heads */
        y = ldt_reshape(ldt_transpose(y, 1, 2), &flat);         /* [B, S, H] */
        h = ldt_linear(y, w[PROJ_W], w[PROJ_B]);
        pin_act(m, h, ldt_partial(LDT_REDUCE_SUM)); /* row parallel */
        x = ldt_add(x, residual_dropout(m, h, p, train));
        pin_act(m, x, R);
        h = ldt_layer_norm(x, 1, w[LN2_W], w[LN2_B], 1e-5);
        pin_act(m, h, R);
        h = ldt_linear(h, w[FC_W], w[FC_B]);
        pin_act(m, h, ldt_shard(2)); /* column parallel */
        h = ldt_linear(ldt_gelu(h, 1), w[FC2_W], w[FC2_B]);
        pin_act(m, h, ldt_partial(LDT_REDUCE_SUM));
        x = ldt_add(x, residual_dropout(m, h, p, train));
        pin_act(m, x, R);
        if (rc == MODEL_RC_FULL && ldt_recompute_end(m->ctx) != LDT_OK) return NULL;
    }
    if (m->marks) {
        x = m->marks[m->cfg.layers] = ldt_alias(x);
        pin_act(m, x, R);
    }
    pp_tag(m, m->pp_last);
    x = ldt_layer_norm(x, 1, m->params[m->nparams - 2], m->params[m->nparams - 1], 1e-5);
    pin_act(m, x, R);
    logits = ldt_linear(x, m->pp_head ? m->pp_head : wte, NULL); /* [B, S, V]: the head is tied to the token embedding */
    pin_act(m, logits, ldt_shard(2));
    m->output = logits;
    return ldt_cross_entropy(logits, m->inputs[1], -1);
}
