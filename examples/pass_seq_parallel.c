/* A user graph pass: sequence-parallel LayerNorm (Megatron-SP) on a Megatron GPT, forced by a
 * pre-plan pass that pins every LayerNorm and the residual stream (the model's [batch, seq,
 * hidden] adds, which the megatron scheme pins whole on tp) to their sequence dim on the tp
 * mesh dim. The planner then turns the row-parallel all_reduces into reduce_scatters and
 * gathers before the column-parallel matmuls. Prints the plan's collectives without and with the pass, and checks
 * the loss against one device.
 *
 *   build/examples/example_pass_seq_parallel    prints both plans' collectives and "ok" */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"

typedef struct seq_parallel {
    int tp, dp, nd; /* mesh dims: tensor parallel, data parallel (-1: none) */
    int pinned;
} seq_parallel;

/* The pass: LayerNorm outputs and residual sums [batch, seq, hidden] become S1 on tp (and the
 * batch S0 on dp); the norms' strategy then needs its input sequence-sharded too. */
static ldt_status seq_parallel_ln(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    seq_parallel *sp = user;
    (void)plan; /* a pre-plan pass: there is no plan yet */
    sp->pinned = 0;
    for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) {
        ldt_tensor *t = ldt_trace_node(ctx, i);
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_shape s;
        int ln = strcmp(ldt_tensor_op(t), "layer_norm") == 0;
        if (!ln && strcmp(ldt_tensor_op(t), "add") != 0) continue;
        if (ldt_tensor_shape(t, &s) != LDT_OK || s.ndim != 3) continue;
        for (int d = 0; d < sp->nd; d++) pl[d] = ldt_replicate();
        pl[sp->tp] = ldt_shard(1);
        if (sp->dp >= 0) pl[sp->dp] = ldt_shard(0);
        if (ldt_pin(t, pl, sp->nd) != LDT_OK) return ldt_ctx_status(ctx);
        sp->pinned += ln;
    }
    return LDT_OK;
}

/* A GPT on ctx: parameters from seed 11, tokens and targets from a fixed pattern. */
static ldt_tensor *gpt(ldt_ctx *ctx, int megatron, ldt_model **out) {
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_model *m;
    int64_t tokens[4 * 16], targets[4 * 16];
    cfg.seq = 16;
    cfg.batch = 4;
    for (int i = 0; i < 64; i++) {
        tokens[i] = (i * 37 + 5) % cfg.vocab;
        targets[i] = (i * 53 + 1) % cfg.vocab;
    }
    if (ldt_model_create(ctx, "gpt", &cfg, &m) != LDT_OK) return NULL;
    *out = m;
    if (ldt_model_init(m, 11) != LDT_OK ||
        ldt_input_bind(ldt_model_input(m, 0, NULL), tokens, sizeof tokens) != LDT_OK ||
        ldt_input_bind(ldt_model_input(m, 1, NULL), targets, sizeof targets) != LDT_OK ||
        (megatron && ldt_model_pin(m, "megatron") != LDT_OK))
        return NULL;
    return ldt_model_forward(m);
}

static void print_collectives(const char *title, ldt_plan *plan) {
    printf("%-28s", title);
    for (int c = 0; c < LDT_COLL_COUNT; c++) {
        int64_t n = 0;
        if (ldt_plan_count(plan, (ldt_collective)c, -1, &n) == LDT_OK && n)
            printf(" %s=%lld", ldt_collective_name((ldt_collective)c), (long long)n);
    }
    printf("\n");
}

int main(void) {
    ldt_ctx *one = NULL, *ctx = NULL;
    ldt_model *m1 = NULL, *m = NULL;
    ldt_mesh *mesh = NULL;
    ldt_ctx_options co = {0};
    ldt_plan *megatron = NULL, *sp_plan = NULL;
    ldt_tensor *loss;
    seq_parallel sp = {0};
    float ref, got;
    void *dst = &got;
    int64_t nb = sizeof got;
    int ok = 0;
    /* one device: the reference */
    if (ldt_ctx_create(NULL, &one) != LDT_OK || !(loss = gpt(one, 0, &m1)) ||
        ldt_read(loss, &ref, sizeof ref) != LDT_OK)
        goto fail;
    /* dp=2, tp=2: Megatron pins, planned without and then with the pass (on the same trace) */
    if (ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_CPU, &mesh) != LDT_OK) goto fail;
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || !(loss = gpt(ctx, 1, &m)) ||
        ldt_plan_create(ctx, NULL, &megatron) != LDT_OK)
        goto fail;
    sp.nd = 2;
    if (ldt_mesh_dim_index(mesh, "tp", &sp.tp) != LDT_OK || ldt_mesh_dim_index(mesh, "dp", &sp.dp) != LDT_OK ||
        ldt_pass_register(ctx, LDT_PASS_PRE_PLAN, "seq-parallel-ln", seq_parallel_ln, &sp) != LDT_OK ||
        ldt_plan_create(ctx, NULL, &sp_plan) != LDT_OK || ldt_plan_run(sp_plan, 1, &loss, &dst, &nb) != LDT_OK)
        goto fail;
    print_collectives("megatron:", megatron);
    print_collectives("megatron + seq-parallel LN:", sp_plan);
    printf("layer norms pinned: %d; loss %.6f, one device %.6f\n", sp.pinned, got, ref);
    ok = sp.pinned > 0 && fabsf(got - ref) <= 1e-5f * (1 + fabsf(ref));
    printf("%s\n", ok ? "ok" : "MISMATCH");
    goto done;
fail:
    fprintf(stderr, "pass_seq_parallel: %s\n", ldt_last_error());
done:
    ldt_plan_destroy(megatron);
    ldt_plan_destroy(sp_plan);
    ldt_model_destroy(m1);
    ldt_model_destroy(m);
    ldt_ctx_destroy(one);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return ok ? 0 : 1;
}
