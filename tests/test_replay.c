/* Compile once, replay: replays equal eager steps (plan and run anew each step) bitwise on
 * the same mesh and one device within reduction reordering, with new inputs every step and
 * dropout drawing fresh values per replay; the plan cache's hits and misses; zero-copy
 * inputs; the Chrome trace; bad input. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/comm.h"
#include "exec/exec_internal.h"

#include "ldt/models.h"
#include "tests/plan_check.h"
#include "tests/trainer.h"
#include "trace/trace.h"

typedef struct step_model {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
} step_model;

static void sm_open(step_model *s, const char *kind, const char *mesh, const char *pins,
                    double dropout) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default(kind);
    memset(s, 0, sizeof *s);
    cfg.layers = 2;
    cfg.hidden = 24;
    cfg.heads = 6;
    cfg.vocab = 30;
    cfg.seq = 5;
    cfg.batch = 3;
    cfg.dropout = dropout;
    cfg.train = dropout > 0;
    if (mesh) cr_assert_eq(ldt_mesh_parse(mesh, LDT_DEVICE_CPU, &s->mesh), LDT_OK);
    co.mesh = s->mesh;
    co.seed = 99;
    cr_assert_eq(ldt_ctx_create(&co, &s->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(s->ctx, kind, &cfg, &s->m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(s->m, 5), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pin(s->m, pins), LDT_OK);
}

static void sm_close(step_model *s) {
    ldt_model_destroy(s->m);
    ldt_ctx_destroy(s->ctx);
    ldt_mesh_destroy(s->mesh);
}

/* Binds step k's inputs (different every step). */
static void sm_inputs(step_model *s, int k) {
    for (int i = 0; i < ldt_model_ninputs(s->m); i++) {
        const char *name;
        ldt_tensor *t = ldt_model_input(s->m, i, &name);
        ldt_shape sh;
        char key[64];
        void *d;
        ldt_tensor_shape(t, &sh);
        snprintf(key, sizeof key, "%s.%d", name, k);
        d = pc_data(key, &sh, ldt_tensor_dtype(t), 30);
        cr_assert_eq(ldt_input_bind(t, d, pc_nbytes(&sh, ldt_tensor_dtype(t))), LDT_OK);
        free(d);
    }
}

static void check_replays_with(const char *kind, const char *mesh, const char *pins,
                               double dropout, int no_fuse) {
    enum { MAX_STEPS = 10 };
    /* 10 steps, fewer in the sanitizer builds (each eager step plans the graph again); 3 at
     * least, so fresh dropout masks show */
    const int STEPS = ldt_test_cases(MAX_STEPS) < 3 ? 3 : ldt_test_cases(MAX_STEPS);
    step_model eg, rp, one;
    ldt_compile_options o = {0};
    float eager[MAX_STEPS], one_dev[MAX_STEPS], got;
    ldt_exec *ex = NULL;
    int64_t nb = sizeof(float);
    sm_open(&eg, kind, mesh, pins, dropout);
    sm_open(&rp, kind, mesh, pins, dropout);
    sm_open(&one, kind, NULL, "none", dropout);
    for (int k = 0; k < STEPS; k++) {
        ldt_tensor *loss;
        void *dst = &eager[k];
        sm_inputs(&eg, k);
        loss = ldt_model_forward(eg.m);
        cr_assert_eq(ldt_run_eager(eg.ctx, NULL, 1, &loss, &dst, &nb), LDT_OK, "%s", ldt_last_error());
        sm_inputs(&one, k);
        cr_assert_eq(ldt_read(ldt_model_forward(one.m), &one_dev[k], sizeof(float)), LDT_OK);
    }
    { /* the eager steps after the first reuse its strategies (exec/cache.c); the replays
       * below, planned afresh by the search, check that the reused plan is the same, bit for
       * bit */
        int64_t hits, misses;
        cr_assert_eq(ldt__plan_cache_stats(eg.ctx, &hits, &misses), LDT_OK);
        cr_assert_eq(misses, 1, "%s on %s: %lld eager plan misses", kind, mesh ? mesh : "1",
                     (long long)misses);
        cr_assert_eq(hits, STEPS - 1, "%s on %s: %lld eager plan hits in %d steps", kind,
                     mesh ? mesh : "1", (long long)hits, STEPS);
    }
    {
        ldt_tensor *loss = ldt_model_forward(rp.m);
        o.no_fuse = no_fuse;
        cr_assert_eq(ldt_compile(rp.ctx, &loss, 1, &o, &ex), LDT_OK, "%s", ldt_last_error());
    }
    {
        ldt_exec_stats es;
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        /* the memory plan's goal on the GPT graphs: within 5% of the liveness bound */
        if (strcmp(kind, "gpt") == 0)
            cr_assert_leq((double)es.arena_bytes, 1.05 * (double)es.bound_bytes, "arena %lld, bound %lld",
                      (long long)es.arena_bytes, (long long)es.bound_bytes);
    }
    for (int k = 0; k < STEPS; k++) {
        sm_inputs(&rp, k);
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &got, nb), LDT_OK);
        cr_assert(memcmp(&got, &eager[k], sizeof got) == 0,
                  "%s on %s (%s, dropout %g): replay %d gives %.9g, the eager step %.9g", kind,
                  mesh ? mesh : "1 rank", pins, dropout, k, got, eager[k]);
        cr_assert(fabs(got - one_dev[k]) <= 1e-5 * (1 + fabs(one_dev[k])),
                  "%s on %s: replay %d gives %.9g, one device %.9g", kind, mesh ? mesh : "1", k, got,
                  one_dev[k]);
    }
    if (dropout > 0) /* fresh masks: the same inputs give another loss on another step */
        cr_assert(eager[0] != eager[1] || eager[1] != eager[2]);
    sm_close(&eg);
    sm_close(&rp);
    sm_close(&one);
}

/* With and without collective fusion. */
static void check_replays(const char *kind, const char *mesh, const char *pins, double dropout) {
    check_replays_with(kind, mesh, pins, dropout, 0);
    /* the sanitizer builds run the unfused gpt once per test (an unpinned gpt on 2x2 is
     * planned exactly, about 1e7 table entries a plan: a minute under TSan) */
    if (ldt_test_scale() >= 1 || strcmp(kind, "gpt") != 0 || strcmp(pins, "none") != 0)
        check_replays_with(kind, mesh, pins, dropout, 1);
}

Test(replay, mlp_equals_eager_on_1_2_4_ranks) {
    check_replays("mlp", NULL, "none", 0);
    check_replays("mlp", "2", "megatron", 0);
    check_replays("mlp", "4", "megatron", 0);
    check_replays("mlp", "2x2", "megatron", 0);
}

Test(replay, gpt_equals_eager_on_1_2_4_ranks) {
    check_replays("gpt", NULL, "none", 0);
    check_replays("gpt", "2", "megatron", 0);
    check_replays("gpt", "4", "megatron", 0);
}

Test(replay, gpt_dropout_fresh_each_replay_and_equal_to_eager_step_k) {
    check_replays("gpt", NULL, "none", 0.2);
    check_replays("gpt", "4", "megatron", 0.2);
    check_replays("gpt", "2x2", "none", 0.2);
}

Test(replay, plan_cache_hits_and_misses) {
    step_model s;
    ldt_exec *a, *b, *c;
    ldt_tensor *loss;
    int64_t hits, misses;
    sm_open(&s, "mlp", "4", "megatron", 0);
    loss = ldt_model_forward(s.m);
    cr_assert_eq(ldt_compile(s.ctx, &loss, 1, NULL, &a), LDT_OK);
    loss = ldt_model_forward(s.m); /* the same step traced again: a hit */
    cr_assert_eq(ldt_compile(s.ctx, &loss, 1, NULL, &b), LDT_OK);
    cr_assert_eq(a, b);
    cr_assert_eq(ldt_exec_cache_stats(s.ctx, &hits, &misses), LDT_OK);
    cr_assert_eq(hits, 1);
    cr_assert_eq(misses, 1);
    /* another output, another cost model, strict mode: misses */
    loss = ldt_model_forward(s.m);
    cr_assert_eq(ldt_compile(s.ctx, (ldt_tensor *[]){ldt_model_output(s.m)}, 1, NULL, &c), LDT_OK);
    cr_assert_neq(c, a);
    {
        ldt_cost_model cm;
        ldt_compile_options o = {0};
        cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &cm), LDT_OK);
        o.plan.cost = &cm;
        loss = ldt_model_forward(s.m);
        cr_assert_eq(ldt_compile(s.ctx, &loss, 1, &o, &c), LDT_OK);
        cr_assert_neq(c, a);
    }
    { /* a memory weight changes the plan: a miss */
        ldt_compile_options o = {0};
        o.plan.memory_weight = 1e-6;
        loss = ldt_model_forward(s.m);
        cr_assert_eq(ldt_compile(s.ctx, &loss, 1, &o, &c), LDT_OK, "%s", ldt_last_error());
        cr_assert_neq(c, a);
    }
    /* a different graph (one more op): a miss */
    loss = ldt_mul_scalar(ldt_model_forward(s.m), 2.0);
    cr_assert_eq(ldt_compile(s.ctx, &loss, 1, NULL, &c), LDT_OK);
    cr_assert_neq(c, a);
    cr_assert_eq(ldt_exec_cache_stats(s.ctx, &hits, &misses), LDT_OK);
    cr_assert_eq(hits, 1);
    cr_assert_eq(misses, 5);
    sm_close(&s);
}

Test(replay, zero_copy_inputs_and_chrome_trace) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_exec *ex;
    ldt_compile_options o = {0};
    char path[64];
    float x[12], w[12], y[9], ref[9];
    ldt_tensor *tx, *tw, *ty;
    FILE *f;
    static char buf[1 << 16];
    size_t n;
    cJSON *j, *ev;
    int comm = 0, compute = 0;
    snprintf(path, sizeof path, "/tmp/ldt_replay_trace_%d.json", (int)getpid());
    cr_assert_eq(ldt_mesh_parse("3", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    tx = ldt_input(ctx, "x", &(ldt_shape){2, {3, 4}}, LDT_F32);
    tw = ldt_param(ctx, "w", &(ldt_shape){2, {4, 3}}, LDT_F32);
    for (int i = 0; i < 12; i++) w[i] = (float)(i % 5) - 2;
    cr_assert_eq(ldt_param_set(tw, w, sizeof w), LDT_OK);
    cr_assert_eq(ldt_pin(tw, (ldt_placement[]){ldt_shard(0)}, 1), LDT_OK); /* K sharded: P */
    ty = ldt_redistribute_to(ldt_matmul(tx, tw), (ldt_placement[]){ldt_replicate()}, 1);
    o.trace_path = path;
    cr_assert_eq(ldt_compile(ctx, &ty, 1, &o, &ex), LDT_OK, "%s", ldt_last_error());
    for (int step = 0; step < 4; step++) {
        for (int i = 0; i < 12; i++) x[i] = (float)(i * (step + 1) % 7) - 3;
        if (step == 3) { /* a parameter changed between replays: its shards are reloaded */
            for (int i = 0; i < 12; i++) w[i] = (float)(i % 3) + 0.5f;
            cr_assert_eq(ldt_param_set(tw, w, sizeof w), LDT_OK);
        }
        if (step == 0) cr_assert_eq(ldt_exec_bind(ex, "x", x, sizeof x), LDT_OK);
        /* the reference, by hand */
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                ref[r * 3 + c] = 0;
                for (int k = 0; k < 4; k++) ref[r * 3 + c] += x[r * 4 + k] * w[k * 3 + c];
            }
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, y, sizeof y), LDT_OK);
        for (int i = 0; i < 9; i++) cr_assert_float_eq(y[i], ref[i], 1e-5, "step %d [%d]", step, i);
    }
    f = fopen(path, "r");
    cr_assert(f != NULL);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    remove(path);
    j = cJSON_Parse(buf);
    cr_assert(j != NULL, "the trace is JSON");
    ev = cJSON_GetObjectItem(j, "traceEvents");
    for (int i = 0; i < cJSON_GetArraySize(ev); i++) {
        cJSON *cat = cJSON_GetObjectItem(cJSON_GetArrayItem(ev, i), "cat");
        if (cat && strcmp(cat->valuestring, "comm") == 0) comm++;
        if (cat && strcmp(cat->valuestring, "compute") == 0) compute++;
    }
    cr_assert(comm >= 3 && compute >= 3, "one track per rank with compute and comm (%d, %d)", compute, comm);
    cJSON_Delete(j);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(replay, bad_input_is_reported) {
    ldt_ctx *ctx;
    ldt_exec *ex;
    ldt_tensor *x, *y, *old;
    float v[4] = {1, 2, 3, 4}, out[4];
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    x = ldt_input(ctx, "x", &(ldt_shape){1, {4}}, LDT_F32);
    cr_assert_eq(ldt_compile(NULL, NULL, 0, NULL, &ex), LDT_ERR_INVALID_ARGUMENT);
    old = ldt_exp(x);
    ldt_trace_discard(ctx);
    y = ldt_exp(x);
    cr_assert_eq(ldt_compile(ctx, &old, 1, NULL, &ex), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "output 0"), "%s", ldt_last_error());
    cr_assert_eq(ldt_compile(ctx, &x, 1, NULL, &ex), LDT_ERR_INVALID_ARGUMENT); /* a leaf */
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 0, out, sizeof out), LDT_ERR_INVALID_USAGE);
    cr_assert_eq(ldt_replay(ex), LDT_ERR_INVALID_USAGE); /* x was never bound */
    cr_assert(strstr(ldt_last_error(), "'x'"), "%s", ldt_last_error());
    ldt_ctx_destroy(ctx);
    /* a fresh context: bind, replay, read with wrong sizes and names */
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    x = ldt_input(ctx, "x", &(ldt_shape){1, {4}}, LDT_F32);
    y = ldt_exp(x);
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_OK);
    cr_assert_eq(ldt_exec_bind(ex, "nope", v, sizeof v), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "'nope'"), "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_bind(ex, "x", v, 8), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_bind(ex, "x", v, sizeof v), LDT_OK);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 1, out, sizeof out), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_read(ex, 0, out, 8), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_read(ex, 0, out, sizeof out), LDT_OK);
    for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], expf(v[i]), 1e-6);
    ldt_ctx_destroy(ctx);
}

/* k independent Partial results (K-sharded matmuls) each explicitly all-reduced, then summed:
 * the gradient-sync pattern fusion is for. */
static ldt_tensor *build_sync(ldt_ctx *ctx, int k, ldt_tensor **xs) {
    ldt_tensor *acc = NULL, *ys[16];
    ldt_placement s1 = ldt_shard(1), s0 = ldt_shard(0), r = ldt_replicate();
    for (int i = 0; i < k; i++) {
        char name[16];
        ldt_tensor *w;
        snprintf(name, sizeof name, "x%d", i);
        xs[i] = pc_input(ctx, name, (ldt_shape){2, {5, 7 + i}}, LDT_F32, 0);
        snprintf(name, sizeof name, "w%d", i);
        w = pc_param(ctx, name, (ldt_shape){2, {7 + i, 6}}, LDT_F32);
        cr_assert_eq(ldt_pin(xs[i], &s1, 1), LDT_OK);
        cr_assert_eq(ldt_pin(w, &s0, 1), LDT_OK);
        ys[i] = ldt_redistribute_to(ldt_matmul(xs[i], w), &r, 1);
    }
    for (int i = 0; i < k; i++) acc = acc ? ldt_add(acc, ys[i]) : ys[i];
    return acc;
}

Test(replay, fused_collectives_are_bitwise_equal_and_fewer) {
    enum { K = 6 };
    float got[3][30];
    int64_t calls[3];
    for (int mode = 0; mode < 3; mode++) { /* unfused, fused, fused with a small cap */
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_compile_options o = {0};
        ldt_exec *ex;
        ldt_exec_stats es;
        ldt_tensor *xs[K], *y;
        cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        y = build_sync(ctx, K, xs);
        o.no_fuse = mode == 0;
        o.bucket_bytes = mode == 2 ? 250 : 0; /* two [5,6] f32 results per bucket */
        cr_assert_eq(ldt_compile(ctx, &y, 1, &o, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, got[mode], sizeof got[mode]), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        calls[mode] = es.collectives;
        cr_assert_eq(es.collectives_unfused, K);
        cr_assert_eq(es.pack_buckets, 0, "buckets are placed contiguously: no pack copies");
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    cr_assert_eq(calls[0], K);
    cr_assert_eq(calls[1], 1, "one fused call for all %d all_reduces", K);
    cr_assert_eq(calls[2], 3, "cap: %lld calls", (long long)calls[2]);
    cr_assert(memcmp(got[0], got[1], sizeof got[0]) == 0, "fusion changes no bit");
    cr_assert(memcmp(got[0], got[2], sizeof got[0]) == 0, "fusion changes no bit");
    /* and one device agrees */
    {
        ldt_ctx *one;
        ldt_tensor *xs[K];
        float ref[30];
        cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
        cr_assert_eq(ldt_read(build_sync(one, K, xs), ref, sizeof ref), LDT_OK);
        cr_assert_eq(pc_compare(LDT_F32, got[1], ref, 30, 1e-5), -1);
        ldt_ctx_destroy(one);
    }
}

/* Overlap: each all_reduce starts right after its matmul, while the next matmul computes;
 * results equal the in-line run bit for bit, and the modeled step is shorter. */
Test(replay, overlapped_collectives_start_early_and_change_no_bit) {
    enum { K = 5 };
    float got[2][30];
    for (int mode = 0; mode < 2; mode++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_compile_options o = {0};
        ldt_exec *ex;
        ldt_exec_stats es;
        ldt_tensor *xs[K], *y;
        cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        {
            ldt_tensor *acc = NULL, *ys[K];
            ldt_placement s1[2] = {ldt_replicate(), ldt_shard(1)}, s0[2] = {ldt_replicate(), ldt_shard(0)},
                          r[2] = {ldt_replicate(), ldt_replicate()};
            for (int i = 0; i < K; i++) {
                char name[16];
                ldt_tensor *w;
                snprintf(name, sizeof name, "x%d", i);
                xs[i] = pc_input(ctx, name, (ldt_shape){2, {5, 8}}, LDT_F32, 0);
                snprintf(name, sizeof name, "w%d", i);
                w = pc_param(ctx, name, (ldt_shape){2, {8, 6}}, LDT_F32);
                cr_assert_eq(ldt_pin(xs[i], s1, 2), LDT_OK);
                cr_assert_eq(ldt_pin(w, s0, 2), LDT_OK);
                ys[i] = ldt_redistribute_to(ldt_matmul(xs[i], w), r, 2);
            }
            for (int i = 0; i < K; i++) acc = acc ? ldt_add(acc, ys[i]) : ys[i];
            y = acc;
        }
        o.no_fuse = 1;
        o.overlap = mode == 0 ? -1 : 1;
        cr_assert_eq(ldt_compile(ctx, &y, 1, &o, &ex), LDT_OK, "%s", ldt_last_error());
        for (int rep = 0; rep < 3; rep++) cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, got[mode], sizeof got[mode]), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        if (mode == 0) {
            cr_assert_eq(es.overlapped_collectives, 0);
            cr_assert_float_eq(es.modeled_overlap_seconds, es.modeled_step_seconds, 1e-15);
        } else {
            cr_assert_geq(es.overlapped_collectives, K - 1, "each all_reduce overlaps the matmuls and adds around it");
            cr_assert_lt(es.modeled_overlap_seconds, es.modeled_step_seconds,
                         "overlap shortens the modeled step (%g vs %g)", es.modeled_overlap_seconds,
                         es.modeled_step_seconds);
        }
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    cr_assert(memcmp(got[0], got[1], sizeof got[0]) == 0, "overlap changes no bit");
}

/* All_reduces that cannot share a bucket (f32 and f64 alternating) but sit side by side are
 * issued as one group when collectives run in line; values equal the ungrouped run. */
Test(replay, unfusable_neighbours_are_grouped) {
    float got[2][30];
    double gotd[2][30];
    for (int mode = 0; mode < 2; mode++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_compile_options o = {0};
        ldt_exec *ex;
        ldt_exec_stats es;
        ldt_tensor *ys[4], *outs[2];
        ldt_placement s1 = ldt_shard(1), s0 = ldt_shard(0), r = ldt_replicate();
        void *dst[2] = {got[mode], gotd[mode]};
        cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        for (int i = 0; i < 4; i++) {
            char name[16];
            ldt_dtype dt = i % 2 ? LDT_F64 : LDT_F32;
            ldt_tensor *x, *w;
            snprintf(name, sizeof name, "x%d", i);
            x = pc_input(ctx, name, (ldt_shape){2, {5, 8}}, dt, 0);
            snprintf(name, sizeof name, "w%d", i);
            w = pc_param(ctx, name, (ldt_shape){2, {8, 6}}, dt);
            cr_assert_eq(ldt_pin(x, &s1, 1), LDT_OK);
            cr_assert_eq(ldt_pin(w, &s0, 1), LDT_OK);
            ys[i] = ldt_redistribute_to(ldt_matmul(x, w), &r, 1);
        }
        outs[0] = ldt_add(ys[0], ys[2]);
        outs[1] = ldt_add(ys[1], ys[3]);
        o.no_fuse = mode == 0;
        o.overlap = -1;
        cr_assert_eq(ldt_compile(ctx, outs, 2, &o, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, dst[0], sizeof got[0]), LDT_OK);
        cr_assert_eq(ldt_exec_read(ex, 1, dst[1], sizeof gotd[0]), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        if (mode == 1) {
            cr_assert_eq(es.collective_groups, 1, "one group of the unfusable run (%lld groups, %lld calls)", (long long)es.collective_groups, (long long)es.collectives);
            cr_assert_eq(es.collectives, 2, "two buckets: one per dtype");
        } else {
            cr_assert_eq(es.collective_groups, 0);
        }
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    cr_assert(memcmp(got[0], got[1], sizeof got[0]) == 0);
    cr_assert(memcmp(gotd[0], gotd[1], sizeof gotd[0]) == 0);
}

/* A whole training step (forward, backward, AdamW) traced every step, compiled once (the
 * cache returns it), replayed: losses and final parameters equal eager steps bit for bit on
 * the same mesh, and the parameters are written in place. */
/* An f64 MLP (2 layers, hidden 8, batch 6) with AdamW on mesh (NULL: one device), Megatron
 * pins on a mesh; inputs for step k are bound by trainer_bind. */
static void trainer_bind(trainer *t, int step) {
    for (int i = 0; i < ldt_model_ninputs(t->model); i++) {
        const char *name;
        ldt_tensor *x = ldt_model_input(t->model, i, &name);
        char key[32];
        void *d;
        snprintf(key, sizeof key, "%s%d", name, step);
        d = pc_data(key, &(ldt_shape){2, {6, 8}}, LDT_F64, 0);
        cr_assert_eq(ldt_input_bind(x, d, 6 * 8 * 8), LDT_OK);
        free(d);
    }
}

/* One training step recorded, then run compiled (replayed) or eagerly; its loss. */
static double trainer_step(trainer *t, int compiled, ldt_exec_stats *es) {
    ldt_tensor *loss = ldt_model_forward(t->model), *g[16];
    double l;
    cr_assert_eq(ldt_grad(loss, t->ps, t->np, g), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_step(t->opt, g), LDT_OK, "%s", ldt_last_error());
    if (compiled) {
        ldt_exec *ex;
        cr_assert_eq(ldt_compile(t->ctx, &loss, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &l, 8), LDT_OK);
        if (es) cr_assert_eq(ldt_exec_stats_get(ex, es), LDT_OK);
    } else {
        void *dst = &l;
        int64_t nb = 8;
        cr_assert_eq(ldt_run_eager(t->ctx, NULL, 1, &loss, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    }
    return l;
}


static void train_steps(const char *mesh, int compiled, double *losses, double *wfinal) {
    trainer t;
    ldt_exec_stats es;
    trainer_open(&t, mesh, 8, 1);
    for (int step = 0; step < 8; step++) {
        trainer_bind(&t, step); /* binding inputs brings no parameter home */
        losses[step] = trainer_step(&t, compiled, &es);
    }
    if (compiled) {
        int64_t hits, misses;
        cr_assert_eq(es.host_copies, 0, "8 steps, no host read: %lld host copies", (long long)es.host_copies);
        cr_assert_eq(ldt_exec_cache_stats(t.ctx, &hits, &misses), LDT_OK);
        cr_assert_eq(misses, 1, "the step compiles once");
        cr_assert_eq(hits, 7);
    }
    cr_assert_eq(ldt_read(t.ps[0], wfinal, 8 * 32 * 8), LDT_OK); /* the first weight [32, 8] */
    trainer_close(&t);
}

Test(replay, training_steps_replayed_equal_eager_steps) {
    const char *meshes[] = {NULL, "2", "dp=2,tp=2"};
    for (int m = 0; m < 3; m++) {
        double le[8], lr[8], we[256], wr[256];
        train_steps(meshes[m], 0, le, we);
        train_steps(meshes[m], 1, lr, wr);
        cr_assert(memcmp(le, lr, sizeof le) == 0, "losses on %s", meshes[m] ? meshes[m] : "1 rank");
        cr_assert(memcmp(we, wr, sizeof we) == 0, "weights on %s", meshes[m] ? meshes[m] : "1 rank");
        cr_assert(le[7] < le[0], "the loss falls: %g -> %g", le[0], le[7]);
    }
}

/* Parameters and optimizer states persist in place on the ranks between replays; the host
 * copy is brought up to date whenever the host looks (read, eager run, another executable,
 * param_set). A sequence of training steps, an evaluation compiled separately, a parameter
 * overwritten from the host and more steps gives the same bits compiled as eager. */
static void mixed_run(int compiled, double *losses, double *w0, int64_t *in_place, int *nassign) {
    trainer t;
    double w_new[32 * 8];
    int nl = 0;
    trainer_open(&t, "dp=2,tp=2", 6, 0);
    for (int i = 0; i < 32 * 8; i++) w_new[i] = 0.01 * (double)(i % 7) - 0.03;
    for (int step = 0; step < 6; step++) {
        ldt_exec_stats es;
        trainer_bind(&t, step);
        if (step == 3) { /* an evaluation (forward only), then the host overwrites a weight */
            ldt_tensor *loss = ldt_model_forward(t.model);
            if (compiled) {
                ldt_exec *ev;
                cr_assert_eq(ldt_compile(t.ctx, &loss, 1, NULL, &ev), LDT_OK, "%s", ldt_last_error());
                cr_assert_eq(ldt_replay(ev), LDT_OK, "%s", ldt_last_error());
                cr_assert_eq(ldt_exec_read(ev, 0, &losses[nl++], 8), LDT_OK);
            } else {
                void *dst = &losses[nl++];
                int64_t nb = 8;
                cr_assert_eq(ldt_run_eager(t.ctx, NULL, 1, &loss, &dst, &nb), LDT_OK, "%s", ldt_last_error());
            }
            cr_assert_eq(ldt_param_set(t.ps[0], w_new, sizeof w_new), LDT_OK);
        }
        losses[nl++] = trainer_step(&t, compiled, &es);
        if (compiled) {
            *in_place = es.assigned_in_place;
            *nassign = (int)es.assigned;
        }
        if (step == 1) cr_assert_eq(ldt_read(t.ps[2], w0, 8 * 32 * 8), LDT_OK); /* mid-way, from the host */
    }
    cr_assert_eq(ldt_read(t.ps[0], w0 + 256, 8 * 32 * 8), LDT_OK);
    trainer_close(&t);
}

Test(replay, parameters_persist_in_place_and_the_host_sees_them) {
    double le[7], lr[7], we[512], wr[512];
    int64_t in_place = 0;
    int nassign = 0;
    mixed_run(0, le, we, &in_place, &nassign);
    mixed_run(1, lr, wr, &in_place, &nassign);
    cr_assert(memcmp(le, lr, sizeof le) == 0, "losses");
    cr_assert(memcmp(we, wr, sizeof we) == 0, "weights read mid-way and at the end");
    cr_assert_gt(nassign, 0);
    cr_assert_eq(in_place, nassign, "every parameter and state persists in place (%lld of %d)",
                 (long long)in_place, nassign);
}

static _Atomic int64_t g_noop_calls;

static ldt_status counting_noop(const ldt__kcall *c) {
    (void)c;
    atomic_fetch_add(&g_noop_calls, 1);
    return LDT_OK;
}

/* The replay loop walks 16-byte (function, call) pairs; a built-in kernel's call is a copy of
 * its cold record's first member, back to back with the other kernels' (rank_state.kcalls),
 * while the other instructions' wrappers get the cold record's own; a measurement binding (ldt__exec_bind_noop) swaps every function, the loop calls it
 * once per instruction on every rank, and binding NULL puts the kernels back. */
Test(replay, hot_array_and_noop_binding) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_exec *ex;
    float x[6], y[6];
    ldt_tensor *tx, *h;
    int64_t total = 0;
    cr_assert_eq(sizeof(ldt__hot), 16);
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    tx = ldt_input(ctx, "x", &(ldt_shape){1, {6}}, LDT_F32);
    h = tx;
    for (int i = 0; i < 5; i++) h = ldt_add(h, tx);
    cr_assert_eq(ldt_compile(ctx, &h, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    for (int r = 0; r < 2; r++) {
        const rank_state *rs = ex->ranks[r];
        cr_assert_not_null(rs);
        cr_assert_eq((uintptr_t)rs->hot & 63, 0, "the hot array is 64-byte aligned");
        cr_assert_eq((uintptr_t)rs->kcalls & 63, 0, "the kernels' calls are 64-byte aligned");
        int64_t nk = 0;
        for (int64_t i = 0; i < rs->nins; i++) {
            cr_assert_null(rs->ins[i].custom, "adds only: no custom call");
            cr_assert(rs->hot[i].fn == rs->ins[i].fn);
            if (rs->prog->ins[i].kind != LDT__I_KERNEL) {
                cr_assert_null(rs->ins[i].hcall);
                cr_assert_eq(rs->hot[i].call, &rs->ins[i].call);
                cr_assert_eq(BIN_OF(rs->hot[i].call), &rs->ins[i]);
                continue;
            }
            const ldt__kcall *k = &rs->kcalls[nk++], *c = &rs->ins[i].call;
            cr_assert_eq(rs->hot[i].call, k, "instruction %lld: its call back to back, in program order", (long long)i);
            cr_assert_eq(rs->ins[i].hcall, k);
            cr_assert(k->op == c->op && k->in == c->in && k->nin == c->nin && k->out.data == c->out.data &&
                      k->plan == c->plan && k->plan != NULL, "the copy is the cold record's call");
        }
        cr_assert_eq(nk, 5, "five adds");
        total += rs->nins;
    }
    for (int i = 0; i < 6; i++) x[i] = (float)i - 2;
    cr_assert_eq(ldt_exec_bind(ex, "x", x, sizeof x), LDT_OK);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 0, y, sizeof y), LDT_OK);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(y[i], 6 * x[i], 0);
    /* no-op binding: every instruction of every rank calls it once, nothing is computed */
    cr_assert_eq(ldt__exec_bind_noop(ex, counting_noop), LDT_OK);
    atomic_store(&g_noop_calls, 0);
    for (int i = 0; i < 6; i++) x[i] = (float)(3 * i + 1);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(atomic_load(&g_noop_calls), total);
    cr_assert_eq(ldt_exec_read(ex, 0, y, sizeof y), LDT_OK);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(y[i], 6 * ((float)i - 2), 0, "the last computed value");
    /* the kernels back */
    cr_assert_eq(ldt__exec_bind_noop(ex, NULL), LDT_OK);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(atomic_load(&g_noop_calls), total);
    cr_assert_eq(ldt_exec_read(ex, 0, y, sizeof y), LDT_OK);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(y[i], 6 * x[i], 0);
    cr_assert_eq(ldt__exec_bind_noop(NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* A custom op for the layout test: out = 2 * in (f32); refuses when *user is set. */
static ldt_status twice_shape(int nin, const ldt_shape *in, const ldt_dtype *dts, void *user, ldt_shape *out,
                              ldt_dtype *odt, char *msg, size_t cap) {
    (void)nin, (void)user, (void)msg, (void)cap;
    *out = in[0];
    *odt = dts[0];
    return LDT_OK;
}

static ldt_status twice_cpu(int nin, const void *const *in, const ldt_shape *s, const ldt_dtype *d, void *out,
                            const ldt_shape *os, ldt_dtype od, void *user) {
    (void)nin, (void)d, (void)od;
    if (*(const int *)user) return LDT_ERR_INVALID_ARGUMENT;
    if (os->ndim != 1 || os->dims[0] != s[0].dims[0]) return LDT_ERR_INTERNAL; /* the output shape as bound */
    for (int64_t i = 0; i < s[0].dims[0]; i++) ((float *)out)[i] = 2 * ((const float *)in[0])[i];
    return LDT_OK;
}

Test(replay, custom_calls_on_lines_of_their_own) {
    ldt_ctx *ctx;
    ldt_exec *ex;
    float x[8], y[8];
    ldt_tensor *tx, *h;
    int id, refuse = 0, ncustom = 0;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    cr_assert_eq(ldt_custom_op_register(ctx, "twice", 1, twice_shape, twice_cpu, &refuse, &id), LDT_OK);
    tx = ldt_input(ctx, "x", &(ldt_shape){1, {8}}, LDT_F32);
    h = tx;
    for (int i = 0; i < 3; i++) h = ldt_add(ldt_custom(ctx, id, &h, 1), tx); /* h = 2h + x */
    cr_assert_eq(ldt_compile(ctx, &h, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    {
        const rank_state *rs = ex->ranks[0];
        for (int64_t i = 0; i < rs->nins; i++) {
            if (!rs->ins[i].custom) {
                cr_assert_eq(rs->hot[i].call, rs->ins[i].hcall ? rs->ins[i].hcall : &rs->ins[i].call);
                continue;
            }
            cr_assert_eq((const void *)rs->hot[i].call, (const void *)rs->ins[i].custom,
                         "a custom op's hot argument is its call");
            cr_assert_eq((uintptr_t)rs->ins[i].custom & 63, 0, "one cache line each");
            cr_assert_eq(rs->ins[i].custom, &rs->ccalls[ncustom], "in program order");
            cr_assert_eq(rs->ins[i].custom->b, &rs->ins[i]);
            ncustom++;
        }
        cr_assert_eq(ncustom, 3);
    }
    for (int round = 0; round < 2; round++) { /* rebound inputs reach the custom calls */
        for (int i = 0; i < 8; i++) x[i] = (float)(i - 3) * (float)(round + 1);
        cr_assert_eq(ldt_exec_bind(ex, "x", x, sizeof x), LDT_OK);
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, y, sizeof y), LDT_OK);
        for (int i = 0; i < 8; i++) cr_assert_float_eq(y[i], 15 * x[i], 0, "((2x+x)*2+x)*2+x");
    }
    refuse = 1; /* a kernel's refusal names the op */
    cr_assert_eq(ldt_replay(ex), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "custom op twice") != NULL, "%s", ldt_last_error());
    ldt_ctx_destroy(ctx);
}

typedef struct ar_case {
    const void *send;
    void *recv;
    int64_t count;
    ldt_dtype dt;
    ldt_reduce_op rop;
    ldt_status st;
    char msg[512];
} ar_case;

static ldt_status rank_ar_case(ldt_comm *w, void *arg) {
    ar_case *k = arg;
    k->st = ldt_all_reduce(w, k->send, k->recv, k->count, k->dt, k->rop);
    snprintf(k->msg, sizeof k->msg, "%s", ldt_last_error());
    return LDT_OK;
}

/* A bound all_reduce is checked once, at bind (ldt__all_reduce_check), with the statuses and
 * messages the per-call check of ldt_all_reduce gives; what it accepts, the call accepts. */
Test(replay, all_reduce_bind_check_equals_the_call_check) {
    float a[8] = {0}, b[8] = {0};
    ar_case cases[] = {
        {NULL, b, 4, LDT_F32, LDT_REDUCE_SUM, 0, ""},     /* send NULL */
        {a, NULL, 4, LDT_F32, LDT_REDUCE_SUM, 0, ""},     /* recv NULL */
        {a, b, -1, LDT_F32, LDT_REDUCE_SUM, 0, ""},       /* negative count */
        {a, b, 4, LDT_BOOL, LDT_REDUCE_AVG, 0, ""},       /* avg of bool */
        {a, b, 4, (ldt_dtype)99, LDT_REDUCE_SUM, 0, ""},  /* no such dtype */
        {a, a + 1, 4, LDT_F32, LDT_REDUCE_SUM, 0, ""},    /* overlapping, not in place */
        {a, a, 4, LDT_F32, LDT_REDUCE_MAX, 0, ""},        /* in place: fine */
        {a, b, 8, LDT_F32, LDT_REDUCE_SUM, 0, ""},        /* fine */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ar_case *k = &cases[i];
        ldt_status st;
        cr_assert_eq(ldt_threads_launch(1, NULL, rank_ar_case, k), LDT_OK);
        st = ldt__all_reduce_check(k->send, k->recv, k->count, k->dt, k->rop);
        cr_assert_eq(st, k->st, "case %zu: bind %s, call %s", i, ldt_status_name(st), ldt_status_name(k->st));
        if (st != LDT_OK) cr_assert_str_eq(ldt_last_error(), k->msg, "case %zu", i);
        cr_assert_eq(st == LDT_OK, i >= 6, "case %zu", i);
    }
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Nothing spins beside the working ranks: a 1-rank replay's process CPU time stays within its
 * wall time, and rank threads with no work between replays sleep (the process's CPU time
 * while the caller sleeps is near zero). */
Test(replay, idle_threads_sleep) {
    const char *meshes[] = {"1", "4"};
#if defined(__SANITIZE_THREAD__)
    return; /* ThreadSanitizer's runtime runs threads of its own: the process's CPU says nothing */
#endif
    for (int m = 0; m < 2; m++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_exec *ex;
        float x[16] = {1};
        ldt_tensor *tx, *h;
        double w0, c0, wall, cpu;
        struct timespec nap = {0, 50 * 1000 * 1000};
        cr_assert_eq(ldt_mesh_parse(meshes[m], LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        tx = ldt_input(ctx, "x", &(ldt_shape){1, {16}}, LDT_F32);
        cr_assert_eq(ldt_input_bind(tx, x, sizeof x), LDT_OK);
        h = tx;
        for (int i = 0; i < 2000; i++) h = ldt_add(h, tx);
        cr_assert_eq(ldt_compile(ctx, &h, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK);
        w0 = clock_s(CLOCK_MONOTONIC);
        c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int r = 0; r < 20; r++) cr_assert_eq(ldt_replay(ex), LDT_OK);
        wall = clock_s(CLOCK_MONOTONIC) - w0;
        cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (m == 0) cr_assert_leq(cpu, 1.2 * wall + 0.002, "1 rank: CPU %.4f s over %.4f s of wall", cpu, wall);
        /* idle: every rank thread is asleep within microseconds of the replay's end */
        c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        nanosleep(&nap, NULL);
        cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        cr_assert_leq(cpu, 0.01, "mesh %s: %.4f s of CPU while the caller slept 0.05 s", meshes[m], cpu);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}

/* A timed-out step's note (issue 28): only a step that took at least half the timeout is told
 * it may be too slow for it; a short one that it was well within it. By hand: a stopped peer
 * under a 5 s timeout after 0.6 s steps; valgrind's 45.2 s steps against 60 s (the example of
 * docs/communicator.md); a first step that waited the whole timeout after 0.3 s or 20 s of
 * work, and the boundary, half the timeout. */
Test(replay, timeout_note_names_slowness_only_for_slow_steps) {
    const char *slow = "steps that slow need a longer timeout (LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)";
    char t[4096];
    ldt__timeout_note_text(t, sizeof t, "mpi all_reduce: timed out", 3, 0.6, 0.0, 5.0);
    cr_expect_str_eq(t, "mpi all_reduce: timed out; this rank's last step took 0.6 s, the communication timeout "
                        "is 5.0 s: well within it: a peer more likely stopped, died or called another collective "
                        "than ran slow");
    ldt__timeout_note_text(t, sizeof t, "m", 7, 45.2, 0.0, 60.0);
    cr_expect_str_eq(t, "m; this rank's last step took 45.2 s, the communication timeout is 60.0 s: steps that "
                        "slow need a longer timeout (LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)");
    ldt__timeout_note_text(t, sizeof t, "m", 0, 99.0, 5.3, 5.0); /* the first: last_step_s unused */
    cr_expect(strstr(t, "this first step had run 5.3 s") && strstr(t, "well within it") && !strstr(t, slow), "%s", t);
    ldt__timeout_note_text(t, sizeof t, "m", 0, 0.0, 50.0, 30.0); /* 20 s of its own */
    cr_expect(strstr(t, "this first step had run 50.0 s") && strstr(t, slow), "%s", t);
    ldt__timeout_note_text(t, sizeof t, "m", 0, 0.0, 40.0, 30.0); /* 10 s of its own */
    cr_expect(strstr(t, "well within it") && !strstr(t, slow), "%s", t);
    ldt__timeout_note_text(t, sizeof t, "m", 1, 2.5, 0.0, 5.0); /* half: slow */
    cr_expect(strstr(t, slow), "%s", t);
    ldt__timeout_note_text(t, sizeof t, "m", 1, 2.4, 0.0, 5.0);
    cr_expect(!strstr(t, slow), "%s", t);
}
