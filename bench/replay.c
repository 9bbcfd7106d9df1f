/* ldt-bench replay: what a replay costs beyond the kernels' own work. Every timing comes
 * with its _cpu twin (bench_util.h), and each figure and its floor are timed in interleaved
 * rounds of one run, medians reported.
 *  - replay_ns_per_instr: a compiled program of 100k custom kernels on one rank, its
 *    kernels bound to a no-op (ldt__exec_bind_noop, at bind: the replay loop is the
 *    production one), replayed, per instruction; floor_ns_per_call: a loop of indirect calls
 *    to an empty function over as many {function, argument} pairs (16 bytes, as the replay's
 *    hot pairs). Goal: replay <= floor + 3 ns. replay_custom_ns_per_instr: the same program
 *    with its custom kernels (each an empty function behind the custom-op ABI).
 *  - replay_chain_ns_per_node: a chain of adds on 16-element f32 tensors (ggml's benchmark
 *    graph), 1 rank, 10k and 100k nodes, compiled and replayed, per node;
 *    chain_floor_ns_per_node: the same CPU add kernel called per node through a function
 *    pointer on buffers of the same kind (ping-pong 64-byte tensors). Goal: replay <= floor
 *    + 3 ns. record_chain_ns_per_node: tracing that chain, per node.
 *  - eager_over_replay_step: the GPT forward on 4 ranks, the eager step (trace, plan, run)
 *    over the replayed step, same graph, same mesh.
 *  - eager_overhead_over_noop_replay: eager's overhead over replay's: eager and replay do the
 *    same kernel work, so eager's overhead is T_eager - T_replay + replay's overhead, and
 *    replay's overhead is the replay with every kernel and collective swapped for a no-op
 *    (the loop, the rank threads' start and finish).
 *  - cache_hit_us: compiling a step the plan cache holds (hash the trace, build the key,
 *    find it), GPT forward on 4 ranks. */
#include <stdlib.h>

#include "bench_util.h"
#include "exec/exec_internal.h"
#include "ldt/ldt.h"

/* Calls per timed sample at least this many, so a sample spans milliseconds. */
#define MIN_CALLS_PER_SAMPLE 200000
#define MAX_ROUNDS 64

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

/* The floor's entry: a function and its argument, as plain as the replay's hot pair. */
typedef struct floor_entry {
    ldt__kernel_fn fn;
    const ldt__kcall *arg;
} floor_entry;

/* One pass of plain indirect calls to an empty kernel over n entries. */
static void floor_pass(const floor_entry *v, int64_t n) {
    ldt__kernel_fn volatile guard = NULL;
    for (int64_t i = 0; i < n; i++)
        if (v[i].fn(v[i].arg) != LDT_OK) guard = v[i].fn;
    (void)guard;
}

static int inner_for(int64_t n) {
    int64_t k = MIN_CALLS_PER_SAMPLE / (n > 0 ? n : 1);
    return k < 1 ? 1 : (int)k;
}

static int rounds_for(const bench_opts *o) { return o->quick ? 5 : 11; }

static int replay_floor(const bench_opts *o, bench_results *out) {
    int64_t n = o->quick ? 20000 : 100000;
    int rounds = rounds_for(o), id, idx, inner = inner_for(n), rc = 1;
    ldt_ctx *ctx;
    ldt_tensor *x, *h;
    ldt_exec *ex;
    floor_entry *v = calloc((size_t)n, sizeof *v);
    bench_rounds t;
    float one = 1;
    if (!v || bench_rounds_init(&t, 6, rounds) != 0) {
        free(v);
        return 1;
    }
    for (int64_t i = 0; i < n; i++) v[i].fn = noop_kernel, v[i].arg = NULL;
    if (ldt_ctx_create(NULL, &ctx) != LDT_OK) goto fail_ctx;
    if (ldt_custom_op_register(ctx, "noop", 1, noop_shape, noop_cpu, NULL, &id) != LDT_OK) goto fail;
    x = ldt_input(ctx, "x", &(ldt_shape){1, {1}}, LDT_F32);
    ldt_input_bind(x, &one, sizeof one);
    h = x;
    for (int64_t i = 0; i < n - 1; i++) h = ldt_custom(ctx, id, &h, 1);
    if (!h || ldt_compile(ctx, &h, 1, NULL, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK) goto fail;
    floor_pass(v, n); /* warm */
    for (int r = 0; r < rounds; r++) { /* interleaved: no-op replay, custom replay, floor */
        double f[6];
        bench_clock c0, d;
        if (ldt__exec_bind_noop(ex, noop_kernel) != LDT_OK) goto fail; /* bind-time only */
        c0 = bench_clock_now();
        for (int k = 0; k < inner; k++)
            if (ldt_replay(ex) != LDT_OK) goto fail;
        d = bench_clock_since(c0, 1);
        f[0] = d.wall * 1e9 / (double)n / inner;
        f[1] = d.cpu * 1e9 / (double)n / inner;
        if (ldt__exec_bind_noop(ex, NULL) != LDT_OK) goto fail;
        c0 = bench_clock_now();
        for (int k = 0; k < inner; k++)
            if (ldt_replay(ex) != LDT_OK) goto fail;
        d = bench_clock_since(c0, 1);
        f[2] = d.wall * 1e9 / (double)n / inner;
        f[3] = d.cpu * 1e9 / (double)n / inner;
        c0 = bench_clock_now();
        for (int k = 0; k < inner; k++) floor_pass(v, n);
        d = bench_clock_since(c0, 1);
        f[4] = d.wall * 1e9 / (double)n / inner;
        f[5] = d.cpu * 1e9 / (double)n / inner;
        bench_rounds_add(&t, f);
    }
    {
        double rp = bench_rounds_median(&t, 0), fl = bench_rounds_median(&t, 4);
        idx = bench_add_timed(out, "replay_ns_per_instr", rp, bench_rounds_median(&t, 1), "ns");
        bench_param_int(out, idx, "instructions", n);
        idx = bench_add_timed(out, "replay_custom_ns_per_instr", bench_rounds_median(&t, 2),
                              bench_rounds_median(&t, 3), "ns");
        bench_param_int(out, idx, "instructions", n);
        idx = bench_add_timed(out, "floor_ns_per_call", fl, bench_rounds_median(&t, 5), "ns");
        bench_param_int(out, idx, "instructions", n);
        bench_goal(out, rp <= fl + 3, "replay_ns_per_instr <= floor_ns_per_call + 3 ns (%.2f <= %.2f + 3)",
                   rp, fl);
    }
    rc = 0;
fail:
    ldt_ctx_destroy(ctx);
fail_ctx:
    free(v);
    bench_rounds_free(&t);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * The add chain. The floor calls the same CPU add kernel, through a function pointer, over
 * an array of prepared calls: node i reads the previous node's output and b, and writes the
 * other of two 16-element buffers (the replay's memory plan ping-pongs as well).
 */
#define CHAIN_ELEMS 16

typedef struct chain_entry {
    ldt__kernel_fn fn;
    ldt__kcall call;
    ldt__operand in[2];
} chain_entry;

typedef struct chain_floor {
    chain_entry *v;
    int64_t n;
    float *buf; /* 3 x CHAIN_ELEMS: two ping-pong buffers and b, 64-byte aligned */
} chain_floor;

static int chain_floor_init(chain_floor *f, int64_t n) {
    ldt_shape s = {1, {CHAIN_ELEMS}};
    void *plan;
    f->n = n;
    f->v = calloc((size_t)n, sizeof *f->v);
    f->buf = aligned_alloc(64, 3 * CHAIN_ELEMS * sizeof(float));
    if (!f->v || !f->buf) return -1;
    for (int i = 0; i < 3 * CHAIN_ELEMS; i++) f->buf[i] = i < CHAIN_ELEMS ? 1.0f : 0.5f;
    for (int64_t i = 0; i < n; i++) {
        chain_entry *e = &f->v[i];
        float *src = f->buf + (i % 2) * CHAIN_ELEMS, *dst = f->buf + ((i + 1) % 2) * CHAIN_ELEMS;
        e->in[0] = (ldt__operand){src, s, LDT_F32};
        e->in[1] = (ldt__operand){f->buf + 2 * CHAIN_ELEMS, s, LDT_F32};
        e->call.op = LDT_OP_ADD;
        e->call.nin = 2;
        e->call.in = e->in;
        e->call.out = (ldt__operand){dst, s, LDT_F32};
        /* the kernel the replay calls: bound once, as binding does (its plan in call.plan) */
        if (ldt__cpu_kernel_bind(&e->call, &e->fn, &plan) != LDT_OK) return -1;
    }
    return 0;
}

static ldt_status chain_floor_pass(const chain_floor *f) {
    ldt_status st = LDT_OK;
    for (int64_t i = 0; i < f->n; i++)
        if ((st = f->v[i].fn(&f->v[i].call)) != LDT_OK) break;
    return st;
}

static void chain_floor_free(chain_floor *f) {
    for (int64_t i = 0; f->v && i < f->n; i++) free((void *)f->v[i].call.plan);
    free(f->v);
    free(f->buf);
}

/* Records the chain x + b + b + ... (nodes adds) into ctx's trace; its last node, or NULL. */
static ldt_tensor *chain_record(ldt_tensor *x, ldt_tensor *b, int64_t nodes) {
    ldt_tensor *h = x;
    for (int64_t i = 0; i < nodes && h; i++) h = ldt_add(h, b);
    return h;
}

static int chain_one(const bench_opts *o, int64_t nodes, bench_results *out) {
    int rounds = rounds_for(o), inner = inner_for(nodes), rc = 1, idx, rec_rounds = o->quick ? 3 : 5;
    ldt_ctx *ctx = NULL;
    ldt_tensor *x, *b, *h;
    ldt_exec *ex;
    chain_floor fl = {0};
    bench_rounds t, rec;
    float xs[CHAIN_ELEMS], bs[CHAIN_ELEMS], res[CHAIN_ELEMS];
    if (bench_rounds_init(&t, 4, rounds) != 0) return 1;
    if (bench_rounds_init(&rec, 2, rec_rounds) != 0 || chain_floor_init(&fl, nodes) != 0 ||
        ldt_ctx_create(NULL, &ctx) != LDT_OK)
        goto done;
    for (int i = 0; i < CHAIN_ELEMS; i++) xs[i] = (float)i, bs[i] = 0.25f;
    x = ldt_input(ctx, "x", &(ldt_shape){1, {CHAIN_ELEMS}}, LDT_F32);
    b = ldt_input(ctx, "b", &(ldt_shape){1, {CHAIN_ELEMS}}, LDT_F32);
    if (!x || !b || ldt_input_bind(x, xs, sizeof xs) != LDT_OK || ldt_input_bind(b, bs, sizeof bs) != LDT_OK)
        goto done;
    for (int r = 0; r < rec_rounds; r++) { /* recording; the last round's trace is compiled */
        double f[2];
        int64_t before = ldt_trace_nodes(ctx);
        bench_clock c0 = bench_clock_now(), d;
        h = chain_record(x, b, nodes);
        d = bench_clock_since(c0, 1);
        if (!h) goto done;
        f[0] = d.wall * 1e9 / (double)(ldt_trace_nodes(ctx) - before);
        f[1] = d.cpu * 1e9 / (double)(ldt_trace_nodes(ctx) - before);
        bench_rounds_add(&rec, f);
        if (r + 1 < rec_rounds) ldt_trace_discard(ctx);
    }
    if (ldt_compile(ctx, &h, 1, NULL, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK ||
        ldt_exec_read(ex, 0, res, sizeof res) != LDT_OK)
        goto done;
    /* a benchmark of wrong results is worthless: x + nodes * 0.25 (exact in f32 here) */
    for (int i = 0; i < CHAIN_ELEMS; i++)
        if (res[i] != (float)i + 0.25f * (float)nodes) {
            bench_note("replay: the add chain gave %g at %d, expected %g", res[i], i,
                       (float)i + 0.25f * (float)nodes);
            goto done;
        }
    if (chain_floor_pass(&fl) != LDT_OK) goto done; /* warm */
    for (int r = 0; r < rounds; r++) {
        double f[4];
        bench_clock c0 = bench_clock_now(), d;
        for (int k = 0; k < inner; k++)
            if (ldt_replay(ex) != LDT_OK) goto done;
        d = bench_clock_since(c0, 1);
        f[0] = d.wall * 1e9 / (double)nodes / inner;
        f[1] = d.cpu * 1e9 / (double)nodes / inner;
        c0 = bench_clock_now();
        for (int k = 0; k < inner; k++)
            if (chain_floor_pass(&fl) != LDT_OK) goto done;
        d = bench_clock_since(c0, 1);
        f[2] = d.wall * 1e9 / (double)nodes / inner;
        f[3] = d.cpu * 1e9 / (double)nodes / inner;
        bench_rounds_add(&t, f);
    }
    {
        double rp = bench_rounds_median(&t, 0), fm = bench_rounds_median(&t, 2);
        idx = bench_add_timed(out, "replay_chain_ns_per_node", rp, bench_rounds_median(&t, 1), "ns");
        bench_param_int(out, idx, "nodes", nodes);
        idx = bench_add_timed(out, "chain_floor_ns_per_node", fm, bench_rounds_median(&t, 3), "ns");
        bench_param_int(out, idx, "nodes", nodes);
        idx = bench_add_timed(out, "record_chain_ns_per_node", bench_rounds_median(&rec, 0),
                              bench_rounds_median(&rec, 1), "ns");
        bench_param_int(out, idx, "nodes", nodes);
        bench_goal(out, rp <= fm + 3,
                   "replay_chain_ns_per_node <= chain_floor_ns_per_node + 3 ns at %lld nodes (%.2f <= %.2f + 3)",
                   (long long)nodes, rp, fm);
    }
    rc = 0;
done:
    if (rc) bench_note("replay: add chain of %lld nodes: %s", (long long)nodes, ldt_last_error());
    ldt_ctx_destroy(ctx);
    chain_floor_free(&fl);
    bench_rounds_free(&t);
    bench_rounds_free(&rec);
    return rc;
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

/* A sample of a 4-rank figure: wall and CPU seconds (CPU over the 4 rank threads). */
static void sample(bench_clock c0, double *wall, double *cpu) {
    bench_clock d = bench_clock_since(c0, 4);
    *wall = d.wall;
    *cpu = d.cpu;
}

static int eager_vs_replay(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_exec *ex;
    int reps = o->quick ? 5 : 15, rc = 1, idx;
    bench_rounds t, th;
    float loss;
    int64_t nb = sizeof loss;
    void *dst = &loss;
    if (bench_rounds_init(&t, 6, reps) != 0) return 1;
    if (bench_rounds_init(&th, 2, reps) != 0) {
        bench_rounds_free(&t);
        return 1;
    }
    if (gpt_open(&mesh, &ctx, &m, o->quick) != 0) goto done;
    {
        ldt_tensor *l = ldt_model_forward(m);
        if (!l || ldt_run_eager(ctx, NULL, 1, &l, &dst, &nb) != LDT_OK) goto done; /* warm */
        l = ldt_model_forward(m);
        if (!l || ldt_compile(ctx, &l, 1, NULL, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK) goto done;
    }
    for (int r = 0; r < reps; r++) { /* interleaved: eager, replay, no-op replay */
        double f[6];
        bench_clock c0 = bench_clock_now();
        ldt_tensor *l = ldt_model_forward(m); /* eager: trace, plan, run */
        if (!l || ldt_run_eager(ctx, NULL, 1, &l, &dst, &nb) != LDT_OK) goto done;
        sample(c0, &f[0], &f[1]);
        c0 = bench_clock_now();
        if (ldt_replay(ex) != LDT_OK) goto done;
        sample(c0, &f[2], &f[3]);
        ldt__exec_bind_noop(ex, noop_kernel); /* bind-time: the loop is unchanged */
        c0 = bench_clock_now();
        if (ldt_replay(ex) != LDT_OK) goto done;
        sample(c0, &f[4], &f[5]);
        ldt__exec_bind_noop(ex, NULL);
        bench_rounds_add(&t, f);
    }
    for (int r = 0; r < reps; r++) { /* a cache hit: the trace is recorded outside the timing */
        ldt_tensor *l = ldt_model_forward(m);
        ldt_exec *hit;
        double f[2];
        bench_clock c0 = bench_clock_now(), d;
        if (!l || ldt_compile(ctx, &l, 1, NULL, &hit) != LDT_OK || hit != ex) goto done;
        d = bench_clock_since(c0, 1);
        f[0] = d.wall, f[1] = d.cpu;
        bench_rounds_add(&th, f);
    }
    {
        double eager = bench_rounds_median(&t, 0), eager_c = bench_rounds_median(&t, 1);
        double replay = bench_rounds_median(&t, 2), replay_c = bench_rounds_median(&t, 3);
        double noop = bench_rounds_median(&t, 4), noop_c = bench_rounds_median(&t, 5);
        idx = bench_add_timed(out, "eager_over_replay_step", eager / replay, eager_c / replay_c, "ratio");
        bench_param_int(out, idx, "ranks", 4);
        bench_param_int(out, idx, "instructions", ex->instructions);
        idx = bench_add_timed(out, "eager_overhead_over_noop_replay", (eager - replay + noop) / noop,
                              (eager_c - replay_c + noop_c) / noop_c, "ratio");
        bench_param_int(out, idx, "ranks", 4);
        bench_param_int(out, idx, "instructions", ex->instructions);
        idx = bench_add_timed(out, "eager_step_us", eager * 1e6, eager_c * 1e6, "us");
        bench_param_int(out, idx, "ranks", 4);
        idx = bench_add_timed(out, "replay_step_us", replay * 1e6, replay_c * 1e6, "us");
        bench_param_int(out, idx, "ranks", 4);
        idx = bench_add_timed(out, "replay_overhead_us", noop * 1e6, noop_c * 1e6, "us");
        bench_param_int(out, idx, "ranks", 4);
        idx = bench_add_timed(out, "cache_hit_us", bench_rounds_median(&th, 0) * 1e6,
                              bench_rounds_median(&th, 1) * 1e6, "us");
        bench_param_int(out, idx, "ranks", 4);
    }
    rc = 0;
done:
    if (rc) bench_note("replay: %s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    bench_rounds_free(&t);
    bench_rounds_free(&th);
    return rc;
}

int bench_replay(const bench_opts *o, bench_results *out) {
    static const int64_t chain_nodes[] = {10000, 100000};
    if (replay_floor(o, out) != 0) {
        bench_note("replay: %s", ldt_last_error());
        return 1;
    }
    for (int i = 0; i < 2; i++)
        if (chain_one(o, chain_nodes[i], out) != 0) return 1;
    return eager_vs_replay(o, out);
}
