/* ldt-bench plan: whole-graph planning time per node for GPT forward graphs of about 1k, 10k
 * and 100k nodes (Megatron pins on dp=2,tp=2, a fresh plan each time: cold), and the modeled
 * cost of the op-by-op greedy plan over the whole-graph plan on the same graphs.
 * plan_us_per_node is the search's own time (ldt_plan_seconds); its _cpu twin the CPU time of
 * the whole ldt_plan_create call, per node; plan_gap the plan's proven relative gap (0:
 * optimal), with whether the exact search decided it. */
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
    if (ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_META, &g->mesh) != LDT_OK) return -1;
    co.mesh = g->mesh;
    if (ldt_ctx_create(&co, &g->ctx) != LDT_OK ||
        ldt_model_create(g->ctx, "gpt", &cfg, &g->m) != LDT_OK ||
        ldt_model_pin(g->m, "megatron") != LDT_OK || !ldt_model_forward(g->m))
        return -1;
    return 0;
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
            ldt_plan_destroy(plan);
        }
        idx = bench_add_timed(out, "plan_us_per_node", bench_median(us, reps), bench_median(us_cpu, reps), "us");
        bench_param_int(out, idx, "nodes", nodes);
        idx = bench_add(out, "greedy_over_global_cost", ratio, "ratio");
        bench_param_int(out, idx, "nodes", nodes);
        /* the proven relative gap of the plan (0: optimal); exact 1 when the exact search
         * decided it, 0 when the heuristic did */
        idx = bench_add(out, "plan_gap", gap, "ratio");
        bench_param_int(out, idx, "nodes", nodes);
        bench_param_int(out, idx, "exact", exact);
        graph_close(&g);
    }
    return 0;
fail:
    bench_note("plan: %s", ldt_last_error());
    return 1;
}
