/* ldt-bench plan: whole-graph planning time per node for GPT forward graphs of about 1k, 10k
 * and 100k nodes (Megatron pins on tp=4, the mesh issue 24 names; a fresh plan each time: cold),
 * and the modeled cost of the op-by-op greedy plan over the whole-graph plan on the same graphs;
 * then (not with --quick) the forward and backward of a 96-layer GPT at GPT-3 175B sizes on a
 * dp=8,tp=8 meta mesh (graph gpt96-fwd-bwd).
 * plan_us_per_node is the search's own time (ldt_plan_seconds); its _cpu twin the CPU time of
 * the whole ldt_plan_create call, per node; plan_gap the plan's proven relative gap (0:
 * optimal), with whether the exact search decided it (exact), the plan's method
 * (ldt_plan_method) and whether tying reused a table (tied). */
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ldt/ldt.h"

typedef struct gpt_graph {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
} gpt_graph;

static void graph_close(gpt_graph *g) {
    ldt_model_destroy(g->m);
    ldt_ctx_destroy(g->ctx);
    ldt_mesh_destroy(g->mesh);
}

/* A small-width GPT (the plan depends on the graph, not the sizes) with `layers` blocks. */
static int graph_open(gpt_graph *g, int64_t layers) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    cfg.layers = layers;
    cfg.hidden = 8;
    cfg.heads = 2;
    cfg.vocab = 32;
    cfg.seq = 4;
    cfg.batch = 2;
    if (ldt_mesh_parse("tp=4", LDT_DEVICE_META, &g->mesh) != LDT_OK) return -1;
    co.mesh = g->mesh;
    if (ldt_ctx_create(&co, &g->ctx) != LDT_OK ||
        ldt_model_create(g->ctx, "gpt", &cfg, &g->m) != LDT_OK ||
        ldt_model_pin(g->m, "megatron") != LDT_OK || !ldt_model_forward(g->m))
        return -1;
    return 0;
}

/* The forward and backward (ldt_grad of every parameter) of a 96-layer GPT at GPT-3 175B sizes
 * (bf16, batch 1, Megatron pins) on a dp=8,tp=8 meta mesh, planned `reps` times; 0 or -1. */
static int bench_gpt96(int reps, bench_results *out) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_tensor *loss, **ps = NULL, **gs = NULL;
    double us[3], us_cpu[3], gap = 0, total_cpu;
    int np, idx, rc = -1, tied = 0;
    const char *method = "heuristic";
    int64_t nodes;
    cfg.layers = 96;
    cfg.hidden = 12288;
    cfg.heads = 96;
    cfg.vocab = 51200;
    cfg.seq = 2048;
    cfg.batch = 1;
    cfg.dtype = LDT_BF16;
    if (reps > 3) reps = 3;
    if (ldt_mesh_parse("dp=8,tp=8", LDT_DEVICE_META, &mesh) != LDT_OK) goto done;
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, "gpt", &cfg, &m) != LDT_OK ||
        ldt_model_pin(m, "megatron") != LDT_OK || !(loss = ldt_model_forward(m)))
        goto done;
    np = ldt_model_nparams(m);
    ps = malloc((size_t)np * sizeof *ps);
    gs = malloc((size_t)np * sizeof *gs);
    if (!ps || !gs) goto done;
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    if (ldt_grad(loss, ps, np, gs) != LDT_OK) goto done;
    nodes = ldt_trace_nodes(ctx);
    for (int r = 0; r < reps; r++) {
        ldt_plan *plan;
        bench_clock c0 = bench_clock_now(), d;
        if (ldt_plan_create(ctx, NULL, &plan) != LDT_OK) goto done;
        d = bench_clock_since(c0, 1);
        us[r] = ldt_plan_seconds(plan) * 1e6 / (double)nodes;
        us_cpu[r] = d.cpu * 1e6 / (double)nodes;
        gap = ldt_plan_gap(plan);
        method = strcmp(ldt_plan_method(plan), "heuristic") != 0 ? "exact" : "heuristic";
        tied = ldt_plan_tied(plan);
        ldt_plan_destroy(plan);
    }
    total_cpu = bench_median(us_cpu, reps) * (double)nodes * 1e-6;
    idx = bench_add_timed(out, "plan_us_per_node", bench_median(us, reps), bench_median(us_cpu, reps), "us");
    bench_param_int(out, idx, "nodes", nodes);
    bench_param_str(out, idx, "graph", "gpt96-fwd-bwd");
    bench_param_str(out, idx, "method", method);
    idx = bench_add(out, "plan_gap", gap, "ratio");
    bench_param_int(out, idx, "nodes", nodes);
    bench_param_str(out, idx, "graph", "gpt96-fwd-bwd");
    bench_param_int(out, idx, "exact", strcmp(method, "exact") == 0);
    bench_param_str(out, idx, "method", method);
    bench_param_int(out, idx, "tied", tied);
    bench_goal(out, total_cpu < 5 && gap == 0,
               "the %lld-node forward and backward of a 96-layer GPT on dp=8,tp=8 planned in under 5 s "
               "with gap 0 (%.2f s of CPU, %s, gap %.3g)",
               (long long)nodes, total_cpu, method, gap);
    rc = 0;
done:
    free(ps);
    free(gs);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}

int bench_plan(const bench_opts *o, bench_results *out) {
    static const int64_t targets[] = {1000, 10000, 100000};
    int nsizes = o->quick ? 2 : 3;
    int64_t per_layer, base;
    gpt_graph g;
    /* nodes per block, from graphs of 1 and 2 blocks */
    if (graph_open(&g, 1) != 0) goto fail;
    base = ldt_trace_nodes(g.ctx);
    graph_close(&g);
    if (graph_open(&g, 2) != 0) goto fail;
    per_layer = ldt_trace_nodes(g.ctx) - base;
    base -= per_layer;
    graph_close(&g);
    for (int i = 0; i < nsizes; i++) {
        int64_t layers = (targets[i] - base + per_layer - 1) / per_layer, nodes;
        int reps = targets[i] >= 100000 ? 3 : targets[i] >= 10000 ? 5 : 9;
        double us[9], us_cpu[9], ratio = 0, gap = 0;
        int idx, exact = 0;
        const char *method = "heuristic";
        if (graph_open(&g, layers) != 0) goto fail;
        nodes = ldt_trace_nodes(g.ctx);
        for (int r = 0; r < reps; r++) {
            ldt_plan *plan;
            bench_clock c0 = bench_clock_now(), d;
            if (ldt_plan_create(g.ctx, NULL, &plan) != LDT_OK) {
                graph_close(&g);
                goto fail;
            }
            d = bench_clock_since(c0, 1);
            us[r] = ldt_plan_seconds(plan) * 1e6 / (double)nodes;
            /* CPU: the whole ldt_plan_create call (the search and the little around it) */
            us_cpu[r] = d.cpu * 1e6 / (double)nodes;
            /* equal costs (both 0 when nothing moves) are a ratio of 1 */
            ratio = ldt_plan_greedy_cost(plan) == ldt_plan_cost(plan)
                        ? 1.0
                        : ldt_plan_greedy_cost(plan) / ldt_plan_cost(plan);
            gap = ldt_plan_gap(plan);
            exact = strcmp(ldt_plan_method(plan), "heuristic") != 0;
            method = exact ? "exact" : "heuristic"; /* a static string, kept past the plan */
            ldt_plan_destroy(plan);
        }
        idx = bench_add_timed(out, "plan_us_per_node", bench_median(us, reps), bench_median(us_cpu, reps), "us");
        bench_param_int(out, idx, "nodes", nodes);
        bench_param_str(out, idx, "graph", "gpt-fwd");
        bench_param_str(out, idx, "method", method);
        idx = bench_add(out, "greedy_over_global_cost", ratio, "ratio");
        bench_param_int(out, idx, "nodes", nodes);
        /* the proven relative gap of the plan (0: optimal); exact 1 when the exact search
         * decided it, 0 when the heuristic did */
        idx = bench_add(out, "plan_gap", gap, "ratio");
        bench_param_int(out, idx, "nodes", nodes);
        bench_param_str(out, idx, "graph", "gpt-fwd");
        bench_param_int(out, idx, "exact", exact);
        bench_param_str(out, idx, "method", method);
        if (targets[i] == 100000)
            bench_goal(out, bench_median(us_cpu, reps) * (double)nodes < 1e6 && gap == 0,
                       "the %lld-node forward on tp=4 planned in under 1 s of CPU with gap 0 "
                       "(%.3f s, %s, gap %g)",
                       (long long)nodes, bench_median(us_cpu, reps) * (double)nodes * 1e-6, method, gap);
        graph_close(&g);
    }
    if (!o->quick && bench_gpt96(2, out) != 0) goto fail;
    return 0;
fail:
    bench_note("plan: %s", ldt_last_error());
    return 1;
}
