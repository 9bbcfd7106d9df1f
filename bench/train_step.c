/* ldt-bench train_step: the demo's training step (GPT, 2 layers, hidden 128, seq 64, batch 8,
 * AdamW) on dp=2,tp=2 rank threads, replayed against eager (trace, plan, run every step).
 *  - outside_fraction: a replayed step's time outside kernels and collectives over its time
 *    (inside: the busiest rank's summed instruction times, timed in that same replay; the
 *    rest is the dispatch loop, the rank threads' start and finish, and the host work
 *    around the replay: writing the assigned parameters back);
 *  - replay_over_eager_speedup: the eager step's time over the replayed step's. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_util.h"
#include "exec/exec_internal.h"
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
    if (ldt_optim_create(d->ctx, &oc, d->ps, d->np, &d->o) != LDT_OK) return 1;
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

int bench_train_step(const bench_opts *o, bench_results *out) {
    demo d = {0};
    int reps = o->quick ? 3 : 9, idx;
    double te[16], tr[16], eager, replay, inside = 0, wall = 0;
    ldt_tensor *loss;
    ldt_exec *ex;
    ldt_compile_options copt = {0};
    if (demo_open(&d, o->quick)) goto fail;
    for (int r = 0; r <= reps; r++) { /* eager */
        float l;
        void *dst = &l;
        int64_t nb = 4;
        double t0 = bench_now();
        if (record(&d, &loss) || ldt_run_eager(d.ctx, NULL, 1, &loss, &dst, &nb) != LDT_OK) goto fail;
        if (r) te[r - 1] = bench_now() - t0;
    }
    for (int r = 0; r <= reps; r++) { /* replay: the same step traced again hits the cache */
        double t0;
        if (record(&d, &loss) || ldt_compile(d.ctx, &loss, 1, NULL, &ex) != LDT_OK) goto fail;
        t0 = bench_now();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        if (r) tr[r - 1] = bench_now() - t0;
    }
    /* inside kernels and collectives: a profiled replay of the same step (instruction times
     * kept in memory; no trace file is written inside the timed replay) */
    copt.profile = 1;
    if (record(&d, &loss) || ldt_compile(d.ctx, &loss, 1, &copt, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK)
        goto fail;
    {
        double t0 = bench_now();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        wall = bench_now() - t0; /* the same replay the instruction times come from */
    }
    for (int rk = 0; rk < ex->nranks; rk++) {
        double s = 0;
        if (!ex->ranks[rk]) continue;
        for (int64_t i = 0; i < ex->ranks[rk]->nins; i++) s += ex->ranks[rk]->prof[i].end - ex->ranks[rk]->prof[i].start;
        if (s > inside) inside = s;
    }
    eager = bench_median(te, reps);
    replay = bench_median(tr, reps);
    idx = bench_add(out, "outside_fraction", wall > inside ? (wall - inside) / wall : 0, "ratio");
    bench_param_int(out, idx, "ranks", 4);
    idx = bench_add(out, "replay_over_eager_speedup", eager / replay, "ratio");
    bench_param_int(out, idx, "ranks", 4);
    idx = bench_add(out, "step_seconds", replay, "s");
    bench_param_str(out, idx, "mode", "replay");
    idx = bench_add(out, "step_seconds", eager, "s");
    bench_param_str(out, idx, "mode", "eager");
    demo_close(&d);
    return 0;
fail:
    bench_note("train_step: %s", ldt_last_error());
    demo_close(&d);
    return 1;
}
