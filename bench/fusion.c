/* ldt-bench fusion: collective calls and step times with and without collective fusion.
 *  1. The demo's training step (GPT, 2 layers, hidden 128, seq 64, batch 8, f32, dropout 0.1,
 *     AdamW with clipping; ldt train's) on dp=4 and on dp=2,tp=2 rank threads, the gradients
 *     reduced over dp (ldt_optim_sync_grads), at the default bucket cap (25 MiB):
 *     `dp_collective_calls` (calls per step that span the dp mesh dim; params mesh, fused),
 *     `dp_buckets` (the buckets the cap implies for the plan that runs, ldt_exec_stats
 *     .dim_buckets: its dp collectives grouped by phase and kind, each group filled by next fit
 *     in readiness order; params mesh, zero), `collective_calls` (all dims) and
 *     `step_seconds` with `step_seconds_cpu` (the process's CPU time over the same replays:
 *     every rank thread's), params graph=gpt_train_step, mesh, fused. Fused and unfused
 *     replays alternate, several rounds; medians. Each row also has param zero: "true" rows
 *     split the optimizer states over dp as well (ldt_optim_shard_states, ZeRO): their
 *     gradients are reduce_scattered and their parameters all_gathered after the update.
 *     `dp_call` (fused rows): one result per dp call of the step, value its bytes on a rank,
 *     params mesh, zero, call (its place), collective, group_dims (mesh dims its group
 *     spans), phase (0: reads no dp call's result; k: reads a phase k-1 call's) and members
 *     (collectives fused into it): what `dp_collective_calls` counts, call by call.
 *     `pack_buckets`: fused calls per step that copy through a staging buffer (every
 *     reduce_scatter and all_gather bucket stages one side); `packed_all_reduces`: of them,
 *     all_reduce buckets not placed back to back (0: zero-copy), params mesh, zero.
 *  2. The gradient-sync pattern (k Partial results, each all-reduced, then used together) on
 *     4 rank threads: `collective_calls` and `step_seconds` (+ `_cpu`), params
 *     graph=gradient_sync, all_reduces, fused. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "ldt/ldt.h"

/* CPU seconds of the whole process (every thread). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define MAXP 256

typedef struct step {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    ldt_exec *ex;
    int dp, np;
} step;

static void step_close(step *s) {
    ldt_optim_destroy(s->o);
    ldt_model_destroy(s->m);
    ldt_ctx_destroy(s->ctx);
    ldt_mesh_destroy(s->mesh);
}

/* Traces and compiles the demo step on mesh_text; 0 on success. */
static int step_open(step *s, const char *mesh_text, int fused, int zero, int quick) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_optim_config oc = {0};
    ldt_compile_options copt = {0};
    ldt_tensor *ps[MAXP], *g[MAXP], *loss;
    int64_t n, *tok;
    (void)quick; /* the demo's sizes either way: only the rounds shrink */
    cfg.layers = 2, cfg.hidden = 128, cfg.heads = 4, cfg.vocab = 256;
    cfg.seq = 64, cfg.batch = 8, cfg.dropout = 0.1, cfg.train = 1;
    if (ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &s->mesh) != LDT_OK || ldt_mesh_dim_index(s->mesh, "dp", &s->dp) != LDT_OK)
        return 1;
    co.mesh = s->mesh;
    co.seed = 1;
    if (ldt_ctx_create(&co, &s->ctx) != LDT_OK || ldt_model_create(s->ctx, "gpt", &cfg, &s->m) != LDT_OK ||
        ldt_model_init(s->m, 1) != LDT_OK || ldt_model_pin(s->m, "megatron") != LDT_OK)
        return 1;
    s->np = ldt_model_nparams(s->m);
    if (s->np > MAXP) return 1;
    for (int i = 0; i < s->np; i++) ps[i] = ldt_model_param(s->m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.weight_decay = 0.01, oc.clip_norm = 1, oc.total_steps = 1000;
    if (ldt_optim_create(s->ctx, &oc, ps, s->np, &s->o) != LDT_OK || ldt_optim_sync_grads(s->o, s->dp) != LDT_OK ||
        (zero && ldt_optim_shard_states(s->o, s->dp) != LDT_OK))
        return 1;
    n = cfg.batch * cfg.seq;
    if (!(tok = malloc((size_t)n * sizeof *tok))) return 1;
    for (int64_t i = 0; i < n; i++) tok[i] = (i * 31 + 7) % 256;
    ldt_input_bind(ldt_model_input(s->m, 0, NULL), tok, n * 8);
    ldt_input_bind(ldt_model_input(s->m, 1, NULL), tok, n * 8);
    free(tok);
    if (!(loss = ldt_model_forward(s->m)) || ldt_grad(loss, ps, s->np, g) != LDT_OK) return 1;
    copt.no_fuse = !fused;
    return ldt_optim_step(s->o, g) != LDT_OK || ldt_compile(s->ctx, &loss, 1, &copt, &s->ex) != LDT_OK ||
           ldt_replay(s->ex) != LDT_OK;
}

static int bench_gpt(const bench_opts *o, bench_results *out) {
    const char *meshes[2] = {"dp=4", "dp=2,tp=2"};
    int reps = o->quick ? 3 : 9;
    for (int mz = 0; mz < 4; mz++) {
        int mi = mz % 2, zero = mz / 2;
        const char *zs = zero ? "true" : "false";
        step s[2] = {{0}};
        double t[2][16], c[2][16];
        int bad = 0;
        for (int f = 0; f < 2 && !bad; f++) bad = step_open(&s[f], meshes[mi], f, zero, o->quick);
        for (int r = 0; r < reps && !bad; r++) /* fused and unfused alternate */
            for (int f = 0; f < 2 && !bad; f++) {
                double t0 = bench_now(), c0 = cpu_now();
                bad = ldt_replay(s[f].ex) != LDT_OK;
                t[f][r] = bench_now() - t0;
                c[f][r] = cpu_now() - c0;
            }
        if (bad) {
            bench_note("fusion: %s: %s", meshes[mi], ldt_last_error());
            for (int f = 0; f < 2; f++) step_close(&s[f]);
            return 1;
        }
        for (int f = 0; f < 2; f++) {
            ldt_exec_stats es;
            int idx;
            ldt_exec_stats_get(s[f].ex, &es);
            idx = bench_add(out, "dp_collective_calls", (double)es.dim_collectives[s[f].dp], "calls");
            bench_param_str(out, idx, "mesh", meshes[mi]);
            bench_param_str(out, idx, "zero", zs);
            bench_param_str(out, idx, "fused", f ? "true" : "false");
            idx = bench_add(out, "collective_calls", (double)es.collectives, "calls");
            bench_param_str(out, idx, "graph", "gpt_train_step");
            bench_param_str(out, idx, "mesh", meshes[mi]);
            bench_param_str(out, idx, "zero", zs);
            bench_param_str(out, idx, "fused", f ? "true" : "false");
            idx = bench_add(out, "step_seconds", bench_median(t[f], reps), "s");
            bench_param_str(out, idx, "graph", "gpt_train_step");
            bench_param_str(out, idx, "mesh", meshes[mi]);
            bench_param_str(out, idx, "zero", zs);
            bench_param_str(out, idx, "fused", f ? "true" : "false");
            idx = bench_add(out, "step_seconds_cpu", bench_median(c[f], reps), "s");
            bench_param_str(out, idx, "graph", "gpt_train_step");
            bench_param_str(out, idx, "mesh", meshes[mi]);
            bench_param_str(out, idx, "zero", zs);
            bench_param_str(out, idx, "fused", f ? "true" : "false");
            if (f) {
                ldt_exec_call calls[64];
                int nc = 0;
                idx = bench_add(out, "dp_buckets", (double)es.dim_buckets[s[f].dp], "buckets");
                bench_param_str(out, idx, "mesh", meshes[mi]);
                bench_param_str(out, idx, "zero", zs);
                /* every dp call of the fused step: its collective, phase, members and bytes */
                if (ldt_exec_dim_calls(s[f].ex, s[f].dp, calls, 64, &nc) != LDT_OK) nc = 0;
                for (int k = 0; k < nc && k < 64; k++) {
                    idx = bench_add(out, "dp_call", (double)calls[k].bytes, "bytes");
                    bench_param_str(out, idx, "mesh", meshes[mi]);
                    bench_param_str(out, idx, "zero", zs);
                    bench_param_int(out, idx, "call", k);
                    bench_param_str(out, idx, "collective", ldt_collective_name(calls[k].collective));
                    bench_param_int(out, idx, "group_dims", calls[k].ndims);
                    bench_param_int(out, idx, "phase", calls[k].phase);
                    bench_param_int(out, idx, "members", calls[k].members);
                }
                idx = bench_add(out, "pack_buckets", (double)es.pack_buckets, "buckets");
                bench_param_str(out, idx, "mesh", meshes[mi]);
                bench_param_str(out, idx, "zero", zs);
                idx = bench_add(out, "packed_all_reduces", (double)es.packed_all_reduces, "buckets");
                bench_param_str(out, idx, "mesh", meshes[mi]);
                bench_param_str(out, idx, "zero", zs);
            }
        }
        for (int f = 0; f < 2; f++) step_close(&s[f]);
    }
    return 0;
}

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

static int bench_sync_pattern(const bench_opts *o, bench_results *out) {
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
        double t[32], c[32];
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
            double t0 = bench_now(), c0 = cpu_now();
            if (ldt_replay(ex) != LDT_OK) return 1;
            t[r] = bench_now() - t0;
            c[r] = cpu_now() - c0;
        }
        ldt_exec_stats_get(ex, &es);
        idx = bench_add(out, "collective_calls", (double)es.collectives, "calls");
        bench_param_str(out, idx, "graph", "gradient_sync");
        bench_param_str(out, idx, "fused", fused ? "true" : "false");
        bench_param_int(out, idx, "all_reduces", k);
        idx = bench_add(out, "step_seconds", bench_median(t, reps), "s");
        bench_param_str(out, idx, "graph", "gradient_sync");
        bench_param_str(out, idx, "fused", fused ? "true" : "false");
        bench_param_int(out, idx, "all_reduces", k);
        idx = bench_add(out, "step_seconds_cpu", bench_median(c, reps), "s");
        bench_param_str(out, idx, "graph", "gradient_sync");
        bench_param_str(out, idx, "fused", fused ? "true" : "false");
        bench_param_int(out, idx, "all_reduces", k);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    return 0;
}

int bench_fusion(const bench_opts *o, bench_results *out) {
    return bench_gpt(o, out) || bench_sync_pattern(o, out);
}
