/* ldt-bench fusion: the gradient-sync pattern (k Partial results, each all-reduced, then
 * used together) on 4 rank threads, compiled with and without collective fusion: calls per
 * step (`collective_calls`) and the replayed step's wall time (`step_seconds`), param
 * fused=true/false. */
#include <stdlib.h>

#include "bench_util.h"
#include "ldt/ldt.h"

static ldt_tensor *build(ldt_ctx *ctx, int k, int64_t n) {
    ldt_tensor *acc = NULL, *ys[64];
    ldt_placement s0 = ldt_shard(0), s1 = ldt_shard(1), r = ldt_replicate();
    float *d = malloc((size_t)(n * n) * sizeof *d);
    if (!d) return NULL;
    for (int64_t i = 0; i < n * n; i++) d[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < k; i++) {
        char name[32];
        ldt_tensor *x, *w, *y;
        snprintf(name, sizeof name, "x%d", i);
        x = ldt_input(ctx, name, &(ldt_shape){2, {n, n}}, LDT_F32);
        snprintf(name, sizeof name, "w%d", i);
        w = ldt_param(ctx, name, &(ldt_shape){2, {n, n}}, LDT_F32);
        ldt_input_bind(x, d, n * n * 4);
        ldt_param_set(w, d, n * n * 4);
        ldt_pin(x, &s1, 1);
        ldt_pin(w, &s0, 1);
        y = ldt_redistribute_to(ldt_matmul(x, w), &r, 1);
        ys[i] = y;
    }
    for (int i = 0; i < k; i++) acc = acc ? ldt_add(acc, ys[i]) : ys[i]; /* then all used */
    free(d);
    return acc;
}

int bench_fusion(const bench_opts *o, bench_results *out) {
    int k = o->quick ? 16 : 64, reps = o->quick ? 5 : 15;
    int64_t n = o->quick ? 64 : 128;
    for (int fused = 0; fused < 2; fused++) {
        ldt_mesh *mesh = NULL;
        ldt_ctx *ctx = NULL;
        ldt_ctx_options co = {0};
        ldt_compile_options copt = {0};
        ldt_exec *ex;
        ldt_exec_stats es;
        ldt_tensor *y;
        double t[32];
        int idx;
        if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
        co.mesh = mesh;
        copt.no_fuse = !fused;
        if (ldt_ctx_create(&co, &ctx) != LDT_OK || !(y = build(ctx, k, n)) ||
            ldt_compile(ctx, &y, 1, &copt, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK) {
            bench_note("fusion: %s", ldt_last_error());
            ldt_ctx_destroy(ctx);
            ldt_mesh_destroy(mesh);
            return 1;
        }
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now();
            if (ldt_replay(ex) != LDT_OK) return 1;
            t[r] = bench_now() - t0;
        }
        ldt_exec_stats_get(ex, &es);
        idx = bench_add(out, "collective_calls", (double)es.collectives, "calls");
        bench_param_str(out, idx, "fused", fused ? "true" : "false");
        bench_param_int(out, idx, "all_reduces", k);
        idx = bench_add(out, "step_seconds", bench_median(t, reps), "s");
        bench_param_str(out, idx, "fused", fused ? "true" : "false");
        bench_param_int(out, idx, "all_reduces", k);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    return 0;
}
