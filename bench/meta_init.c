/* ldt-bench meta_init: describing GPT-3 175B and a 1T-parameter GPT on a dp=8,tp=8 meta mesh
 * (create, init recipes, Megatron pins, trace the forward pass, plan, per-rank memory):
 * `seconds` and `host_bytes` (heap in use at the end, over the start), param model. */
#include <malloc.h>

#include "bench_util.h"
#include "ldt/ldt.h"

static int one(const char *name, int64_t layers, int64_t hidden, int64_t heads, int reps,
               bench_results *out) {
    double t[8], tc[8], heap = 0;
    int idx;
    for (int r = 0; r < reps; r++) {
        ldt_mesh *mesh = NULL;
        ldt_ctx *ctx = NULL;
        ldt_model *m = NULL;
        ldt_plan *plan = NULL;
        ldt_plan_memory mem;
        ldt_ctx_options co = {0};
        ldt_model_config cfg = ldt_model_config_default("gpt");
        struct mallinfo2 before = mallinfo2(), after;
        bench_clock t0 = bench_clock_now(), dt;
        int ok;
        cfg.layers = layers;
        cfg.hidden = hidden;
        cfg.heads = heads;
        cfg.vocab = 50257;
        cfg.seq = 2048;
        cfg.batch = 8;
        ok = ldt_mesh_parse("dp=8,tp=8", LDT_DEVICE_META, &mesh) == LDT_OK;
        co.mesh = mesh;
        ok = ok && ldt_ctx_create(&co, &ctx) == LDT_OK && ldt_model_create(ctx, "gpt", &cfg, &m) == LDT_OK &&
             ldt_model_init(m, 0) == LDT_OK && ldt_model_pin(m, "megatron") == LDT_OK &&
             ldt_model_forward(m) && ldt_plan_create(ctx, NULL, &plan) == LDT_OK &&
             ldt_plan_memory_get(plan, &mem) == LDT_OK;
        dt = bench_clock_since(t0, 1);
        t[r] = dt.wall;
        tc[r] = dt.cpu;
        after = mallinfo2();
        heap = (double)after.uordblks + (double)after.hblkhd - (double)before.uordblks - (double)before.hblkhd;
        ldt_plan_destroy(plan);
        ldt_model_destroy(m);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
        if (!ok) {
            bench_note("meta_init %s: %s", name, ldt_last_error());
            return 1;
        }
    }
    idx = bench_add_timed(out, "seconds", bench_median(t, reps), bench_median(tc, reps), "s");
    bench_param_str(out, idx, "model", name);
    idx = bench_add(out, "host_bytes", heap, "B");
    bench_param_str(out, idx, "model", name);
    return 0;
}

int bench_meta_init(const bench_opts *o, bench_results *out) {
    int reps = o->quick ? 1 : 5;
    if (one("gpt175b", 96, 12288, 96, reps, out)) return 1;
    return one("gpt1t", 128, 25600, 160, reps, out);
}
