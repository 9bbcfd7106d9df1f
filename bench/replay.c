/* ldt-bench replay: what a replay costs beyond the kernels' own work.
 *  - replay_ns_per_instr: a compiled program of 100k no-op custom kernels on one rank,
 *    replayed, per instruction; floor_ns_per_call: a loop of indirect calls to an empty
 *    function over as many entries, in the same run.
 *  - eager_over_replay_overhead: the GPT forward on 4 ranks. Eager (trace, plan, run every
 *    step) and replay do the same kernel work, so eager's overhead is T_eager - T_replay +
 *    replay's overhead, and replay's overhead is the replay with every kernel swapped for a
 *    no-op (the loop, the rank threads' start and finish, the collectives' handshakes).
 *  - cache_hit_us: compiling a step the plan cache holds (hash the trace, build the key,
 *    find it), GPT forward on 4 ranks. */
#include <stdlib.h>

#include "bench_util.h"
#include "exec/exec_internal.h"
#include "ldt/ldt.h"

static ldt_status noop_shape(int nin, const ldt_shape *in, const ldt_dtype *dts, void *user,
                             ldt_shape *out, ldt_dtype *odt, char *msg, size_t cap) {
    (void)nin, (void)user, (void)msg, (void)cap;
    *out = in[0];
    *odt = dts[0];
    return LDT_OK;
}

static ldt_status noop_cpu(int nin, const void *const *in, const ldt_shape *s, const ldt_dtype *d,
                           void *out, const ldt_shape *os, ldt_dtype od, void *user) {
    (void)nin, (void)in, (void)s, (void)d, (void)out, (void)os, (void)od, (void)user;
    return LDT_OK;
}

static ldt_status noop_kernel(const ldt__kcall *c) {
    (void)c;
    return LDT_OK;
}

typedef struct floor_entry {
    ldt__kernel_fn fn;
    ldt__kcall call;
} floor_entry;

static double floor_ns(int64_t n, int reps) {
    floor_entry *v = calloc((size_t)n, sizeof *v);
    double t[16];
    if (!v) return -1;
    for (int64_t i = 0; i < n; i++) v[i].fn = noop_kernel;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        ldt__kernel_fn volatile guard = NULL;
        for (int64_t i = 0; i < n; i++)
            if (v[i].fn(&v[i].call) != LDT_OK) guard = v[i].fn;
        (void)guard;
        t[r] = (bench_now() - t0) * 1e9 / (double)n;
    }
    free(v);
    return bench_median(t, reps);
}

static int replay_floor(const bench_opts *o, bench_results *out) {
    int64_t n = o->quick ? 20000 : 100000;
    int reps = o->quick ? 5 : 11, id, idx;
    ldt_ctx *ctx;
    ldt_tensor *x, *h;
    ldt_exec *ex;
    double t[16];
    float one = 1;
    if (ldt_ctx_create(NULL, &ctx) != LDT_OK ||
        ldt_custom_op_register(ctx, "noop", 1, noop_shape, noop_cpu, NULL, &id) != LDT_OK)
        return 1;
    x = ldt_input(ctx, "x", &(ldt_shape){1, {1}}, LDT_F32);
    ldt_input_bind(x, &one, sizeof one);
    h = x;
    for (int64_t i = 0; i < n - 1; i++) h = ldt_custom(ctx, id, &h, 1);
    if (!h || ldt_compile(ctx, &h, 1, NULL, &ex) != LDT_OK) {
        ldt_ctx_destroy(ctx);
        return 1;
    }
    ldt_replay(ex); /* warm */
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (ldt_replay(ex) != LDT_OK) {
            ldt_ctx_destroy(ctx);
            return 1;
        }
        t[r] = (bench_now() - t0) * 1e9 / (double)n;
    }
    idx = bench_add(out, "replay_ns_per_instr", bench_median(t, reps), "ns");
    bench_param_int(out, idx, "instructions", n);
    idx = bench_add(out, "floor_ns_per_call", floor_ns(n, reps), "ns");
    bench_param_int(out, idx, "instructions", n);
    ldt_ctx_destroy(ctx);
    return 0;
}

/* The GPT forward on 4 ranks, with its inputs bound. */
static int gpt_open(ldt_mesh **mesh, ldt_ctx **ctx, ldt_model **m, int quick) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    cfg.layers = quick ? 2 : 12; /* GPT-2 small's depth */
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, mesh) != LDT_OK) return 1;
    co.mesh = *mesh;
    if (ldt_ctx_create(&co, ctx) != LDT_OK || ldt_model_create(*ctx, "gpt", &cfg, m) != LDT_OK ||
        ldt_model_init(*m, 1) != LDT_OK || ldt_model_pin(*m, "megatron") != LDT_OK)
        return 1;
    for (int i = 0; i < ldt_model_ninputs(*m); i++) {
        ldt_tensor *t = ldt_model_input(*m, i, NULL);
        int64_t n = cfg.batch * cfg.seq, *d = malloc((size_t)n * sizeof *d);
        if (!d) return 1;
        for (int64_t j = 0; j < n; j++) d[j] = (j * 7 + i) % cfg.vocab;
        ldt_input_bind(t, d, n * (int64_t)sizeof *d);
        free(d);
    }
    return 0;
}

static int eager_vs_replay(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_exec *ex;
    int reps = o->quick ? 5 : 15, rc = 1, idx;
    double te[32], tr[32], tn[32], th[32], eager, replay, noop;
    float loss;
    int64_t nb = sizeof loss;
    void *dst = &loss;
    if (gpt_open(&mesh, &ctx, &m, o->quick) != 0) goto done;
    for (int r = 0; r < reps + 1; r++) { /* eager: trace, plan, run */
        double t0 = bench_now();
        ldt_tensor *l = ldt_model_forward(m);
        if (!l || ldt_run_eager(ctx, NULL, 1, &l, &dst, &nb) != LDT_OK) goto done;
        if (r) te[r - 1] = bench_now() - t0;
    }
    {
        ldt_tensor *l = ldt_model_forward(m);
        if (!l || ldt_compile(ctx, &l, 1, NULL, &ex) != LDT_OK) goto done;
    }
    for (int r = 0; r < reps + 1; r++) {
        double t0 = bench_now();
        if (ldt_replay(ex) != LDT_OK) goto done;
        if (r) tr[r - 1] = bench_now() - t0;
    }
    ldt__exec_bind_noop(ex, noop_kernel);
    for (int r = 0; r < reps + 1; r++) {
        double t0 = bench_now();
        if (ldt_replay(ex) != LDT_OK) goto done;
        if (r) tn[r - 1] = bench_now() - t0;
    }
    ldt__exec_bind_noop(ex, NULL);
    for (int r = 0; r < reps; r++) { /* a cache hit: the trace is recorded outside the timing */
        ldt_tensor *l = ldt_model_forward(m);
        ldt_exec *hit;
        double t0 = bench_now();
        if (!l || ldt_compile(ctx, &l, 1, NULL, &hit) != LDT_OK || hit != ex) goto done;
        th[r] = bench_now() - t0;
    }
    eager = bench_median(te, reps);
    replay = bench_median(tr, reps);
    noop = bench_median(tn, reps);
    idx = bench_add(out, "eager_over_replay_overhead", (eager - replay + noop) / noop, "ratio");
    bench_param_int(out, idx, "ranks", 4);
    bench_param_int(out, idx, "instructions", ex->instructions);
    idx = bench_add(out, "eager_step_us", eager * 1e6, "us");
    bench_param_int(out, idx, "ranks", 4);
    idx = bench_add(out, "replay_step_us", replay * 1e6, "us");
    bench_param_int(out, idx, "ranks", 4);
    idx = bench_add(out, "replay_overhead_us", noop * 1e6, "us");
    bench_param_int(out, idx, "ranks", 4);
    idx = bench_add(out, "cache_hit_us", bench_median(th, reps) * 1e6, "us");
    bench_param_int(out, idx, "ranks", 4);
    rc = 0;
done:
    if (rc) bench_note("replay: %s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}

int bench_replay(const bench_opts *o, bench_results *out) {
    if (replay_floor(o, out) != 0) {
        bench_note("replay: %s", ldt_last_error());
        return 1;
    }
    return eager_vs_replay(o, out);
}
