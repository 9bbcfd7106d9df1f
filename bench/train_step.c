/* ldt-bench train_step: the demo's training step (GPT, 2 layers, hidden 128, seq 64, batch 8,
 * AdamW) on dp=2,tp=2 rank threads, replayed against eager (trace, plan, run every step).
 *  - step_seconds (mode replay, eager) and replay_over_eager_speedup: eager and replayed
 *    steps timed in interleaved rounds with profiling off, medians, each with its _cpu twin
 *    (the process's CPU seconds over the 4 rank threads).
 *  - A separate executable of the same step, profiled and with collectives in line, replayed
 *    on its own: on its busiest rank (the most time in kernels and collectives' own work),
 *    wait_fraction is the time blocked inside collectives waiting for peers (or for a core
 *    while a peer has it) over the replay's wall time; busy_fraction the time in kernels and
 *    collectives less that; outside_fraction what is left: the dispatch loop, the rank
 *    threads' start and finish, and the host work around the replay (writing the assigned
 *    parameters back). Medians over rounds; profiled_step_seconds is that replay's time. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_util.h"
#include "ldt/ldt.h"

typedef struct demo {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    ldt_tensor *ps[64];
    int np;
} demo;

static int demo_open(demo *d, int quick) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_optim_config oc = {0};
    int64_t n;
    int64_t *tok;
    cfg.layers = 2, cfg.hidden = quick ? 64 : 128, cfg.heads = 4, cfg.vocab = 256;
    cfg.seq = quick ? 32 : 64, cfg.batch = 8, cfg.dropout = 0.1, cfg.train = 1;
    if (ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_CPU, &d->mesh) != LDT_OK) return 1;
    co.mesh = d->mesh;
    if (ldt_ctx_create(&co, &d->ctx) != LDT_OK || ldt_model_create(d->ctx, "gpt", &cfg, &d->m) != LDT_OK ||
        ldt_model_init(d->m, 1) != LDT_OK || ldt_model_pin(d->m, "megatron") != LDT_OK)
        return 1;
    d->np = ldt_model_nparams(d->m);
    for (int i = 0; i < d->np; i++) d->ps[i] = ldt_model_param(d->m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.clip_norm = 1, oc.total_steps = 1000;
    /* data parallel as the CLI runs it: gradients reduced over dp explicitly, in buckets */
    if (ldt_optim_create(d->ctx, &oc, d->ps, d->np, &d->o) != LDT_OK || ldt_optim_sync_grads(d->o, 0) != LDT_OK)
        return 1;
    n = cfg.batch * cfg.seq;
    if (!(tok = malloc((size_t)n * sizeof *tok))) return 1;
    for (int64_t i = 0; i < n; i++) tok[i] = (i * 31 + 7) % 256;
    ldt_input_bind(ldt_model_input(d->m, 0, NULL), tok, n * 8);
    ldt_input_bind(ldt_model_input(d->m, 1, NULL), tok, n * 8);
    free(tok);
    return 0;
}

static void demo_close(demo *d) {
    ldt_optim_destroy(d->o);
    ldt_model_destroy(d->m);
    ldt_ctx_destroy(d->ctx);
    ldt_mesh_destroy(d->mesh);
}

/* Records one step; *loss its loss. */
static int record(demo *d, ldt_tensor **loss) {
    ldt_tensor *g[64];
    if (!(*loss = ldt_model_forward(d->m))) return 1;
    return ldt_grad(*loss, d->ps, d->np, g) != LDT_OK || ldt_optim_step(d->o, g) != LDT_OK;
}

#define NRANKS 4
#define MAX_ROUNDS 32

/* One profiled replay of ex: fractions of its wall time on its busiest rank (f[0] wait, f[1]
 * busy, f[2] outside), its wall and CPU seconds (f[3], f[4]). */
static int profiled_round(ldt_exec *ex, double *f) {
    double w0[NRANKS], w1, inside, best = -1;
    bench_clock c0, d;
    for (int rk = 0; rk < NRANKS; rk++)
        if (ldt_exec_comm_wait(ex, rk, &w0[rk]) != LDT_OK) return 1;
    c0 = bench_clock_now();
    if (ldt_replay(ex) != LDT_OK) return 1;
    d = bench_clock_since(c0, NRANKS);
    for (int rk = 0; rk < NRANKS; rk++) {
        double wait;
        if (ldt_exec_comm_wait(ex, rk, &w1) != LDT_OK || ldt_exec_rank_inside(ex, rk, &inside) != LDT_OK)
            return 1;
        wait = w1 - w0[rk];
        if (inside - wait > best) {
            best = inside - wait;
            f[0] = wait / d.wall;
            f[1] = (inside - wait) / d.wall;
            f[2] = d.wall > inside ? (d.wall - inside) / d.wall : 0;
        }
    }
    f[3] = d.wall;
    f[4] = d.cpu;
    return 0;
}

int bench_train_step(const bench_opts *o, bench_results *out) {
    demo d = {0};
    int reps = o->quick ? 3 : 9, idx;
    bench_rounds t = {0}, p = {0};
    ldt_tensor *loss;
    ldt_exec *ex;
    ldt_compile_options copt = {0};
    if (bench_rounds_init(&t, 4, reps) != 0 || bench_rounds_init(&p, 5, reps) != 0) goto fail;
    if (demo_open(&d, o->quick)) goto fail;
    for (int r = 0; r <= reps; r++) { /* interleaved: eager, then replay; round 0 warms up */
        float l;
        void *dst = &l;
        int64_t nb = 4;
        double f[4];
        bench_clock c0 = bench_clock_now(), dt;
        if (record(&d, &loss) || ldt_run_eager(d.ctx, NULL, 1, &loss, &dst, &nb) != LDT_OK) goto fail;
        dt = bench_clock_since(c0, NRANKS);
        f[0] = dt.wall, f[1] = dt.cpu;
        /* replay: the same step traced again hits the cache (outside the timing) */
        if (record(&d, &loss) || ldt_compile(d.ctx, &loss, 1, NULL, &ex) != LDT_OK) goto fail;
        c0 = bench_clock_now();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        dt = bench_clock_since(c0, NRANKS);
        f[2] = dt.wall, f[3] = dt.cpu;
        if (r) bench_rounds_add(&t, f);
    }
    /* the profiled executable: instruction times kept in memory (no trace file written inside
     * the replay), collectives in line so their waits are the rank thread's own */
    copt.profile = 1;
    copt.overlap = -1;
    if (record(&d, &loss) || ldt_compile(d.ctx, &loss, 1, &copt, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK)
        goto fail;
    for (int r = 0; r < reps; r++) {
        double f[5];
        if (profiled_round(ex, f) != 0) goto fail;
        bench_rounds_add(&p, f);
    }
    {
        double eager = bench_rounds_median(&t, 0), eager_c = bench_rounds_median(&t, 1);
        double replay = bench_rounds_median(&t, 2), replay_c = bench_rounds_median(&t, 3);
        idx = bench_add(out, "outside_fraction", bench_rounds_median(&p, 2), "ratio");
        bench_param_int(out, idx, "ranks", NRANKS);
        idx = bench_add(out, "wait_fraction", bench_rounds_median(&p, 0), "ratio");
        bench_param_int(out, idx, "ranks", NRANKS);
        idx = bench_add(out, "busy_fraction", bench_rounds_median(&p, 1), "ratio");
        bench_param_int(out, idx, "ranks", NRANKS);
        idx = bench_add_timed(out, "profiled_step_seconds", bench_rounds_median(&p, 3),
                              bench_rounds_median(&p, 4), "s");
        bench_param_int(out, idx, "ranks", NRANKS);
        idx = bench_add_timed(out, "replay_over_eager_speedup", eager / replay, eager_c / replay_c, "ratio");
        bench_param_int(out, idx, "ranks", NRANKS);
        idx = bench_add_timed(out, "step_seconds", replay, replay_c, "s");
        bench_param_str(out, idx, "mode", "replay");
        idx = bench_add_timed(out, "step_seconds", eager, eager_c, "s");
        bench_param_str(out, idx, "mode", "eager");
    }
    bench_rounds_free(&t);
    bench_rounds_free(&p);
    demo_close(&d);
    return 0;
fail:
    bench_note("train_step: %s", ldt_last_error());
    bench_rounds_free(&t);
    bench_rounds_free(&p);
    demo_close(&d);
    return 1;
}
