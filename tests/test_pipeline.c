/* Pipeline parallelism (docs/pipeline.md): a tiny f64 GPT trained by a pipelined step on the
 * rank threads (pp=2,dp=2, pp=4, pp=2,tp=2; GPipe, 1F1B, interleaved) loses exactly what one
 * device loses on the same global batch, step after step; and the refusals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "ldt/ldt.h"
#include "ldt/models.h"
#include "test_util.h"

#define L 4
#define H 16
#define A 2
#define VOC 32
#define S 8
#define G 8 /* the global batch */

static ldt_model_config tiny(int64_t batch) {
    ldt_model_config c = ldt_model_config_default("gpt");
    c.layers = L, c.hidden = H, c.heads = A, c.vocab = VOC, c.seq = S, c.batch = batch;
    c.dtype = LDT_F64;
    c.dropout = 0.1; /* each micro-batch draws its rows of the single-device masks */
    c.train = 1;
    return c;
}

/* Step k's global batch: row b of tokens and targets. */
static void rows(int k, int64_t *tok, int64_t *tgt) {
    for (int64_t i = 0; i < G * S; i++) {
        tok[i] = (i * 7 + k * 3 + i / 5) % VOC;
        tgt[i] = (i * 5 + k + 1 + i / 3) % VOC;
    }
}

typedef struct run {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    ldt_tensor *ps[64], *tok[G], *tgt[G];
    int np, micro, dp;
} run;

/* A run on mesh_text: one device when micro is 0, else a pipeline of `micro` micro-batches
 * (each of G / micro rows, split over dp). */
static void open_run(run *r, const char *mesh_text, int micro) {
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    ldt_model_config cfg = tiny(micro ? G / micro : G);
    int d;
    memset(r, 0, sizeof *r);
    r->micro = micro;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &r->mesh), LDT_OK);
    co.mesh = r->mesh;
    co.seed = 5;
    cr_assert_eq(ldt_ctx_create(&co, &r->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(r->ctx, "gpt", &cfg, &r->m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(r->m, 5), LDT_OK);
    cr_assert_eq(ldt_model_pin(r->m, "megatron"), LDT_OK);
    r->np = ldt_model_nparams(r->m);
    cr_assert_leq(r->np, 64);
    for (int i = 0; i < r->np; i++) r->ps[i] = ldt_model_param(r->m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.weight_decay = 0.01, oc.clip_norm = 1.0, oc.total_steps = 100;
    cr_assert_eq(ldt_optim_create(r->ctx, &oc, r->ps, r->np, &r->o), LDT_OK, "%s", ldt_last_error());
    r->dp = ldt_mesh_dim_index(r->mesh, "dp", &d) == LDT_OK;
    if (r->dp) cr_assert_eq(ldt_optim_sync_grads(r->o, d), LDT_OK);
    ldt_clear_error();
    for (int i = 0; micro && i < micro; i++) { /* micro-batch 0 reads the model's own inputs */
        ldt_placement pl[LDT_MAX_DIMS];
        int np = 0, nd = ldt_mesh_ndim(r->mesh);
        char name[32];
        if (i == 0) {
            r->tok[0] = ldt_model_input(r->m, 0, NULL);
            r->tgt[0] = ldt_model_input(r->m, 1, NULL);
            continue;
        }
        snprintf(name, sizeof name, "tokens.%d", i);
        r->tok[i] = ldt_input(r->ctx, name, &(ldt_shape){2, {cfg.batch, S}}, LDT_I64);
        snprintf(name, sizeof name, "targets.%d", i);
        r->tgt[i] = ldt_input(r->ctx, name, &(ldt_shape){2, {cfg.batch, S}}, LDT_I64);
        cr_assert(r->tok[i] && r->tgt[i]);
        cr_assert_eq(ldt_tensor_pin(r->tok[0], pl, LDT_MAX_DIMS, &np), LDT_OK);
        if (np) {
            cr_assert_eq(ldt_pin(r->tok[i], pl, nd), LDT_OK);
            cr_assert_eq(ldt_pin(r->tgt[i], pl, nd), LDT_OK);
        }
    }
}

static void close_run(run *r) {
    ldt_optim_destroy(r->o);
    ldt_model_destroy(r->m);
    ldt_ctx_destroy(r->ctx);
    ldt_mesh_destroy(r->mesh);
}

/* Step k: binds the batch, traces, compiles (the cache returns the step) and replays; the loss. */
static double step_ex(run *r, const ldt_pipeline_config *pc, int k, ldt_exec **exo) {
    int64_t tok[G * S], tgt[G * S];
    ldt_tensor *loss, *g[64];
    ldt_exec *ex;
    double l;
    rows(k, tok, tgt);
    if (!r->micro) {
        cr_assert_eq(ldt_input_bind(ldt_model_input(r->m, 0, NULL), tok, sizeof tok), LDT_OK);
        cr_assert_eq(ldt_input_bind(ldt_model_input(r->m, 1, NULL), tgt, sizeof tgt), LDT_OK);
        cr_assert(loss = ldt_model_forward(r->m), "%s", ldt_last_error());
    } else {
        int64_t n = (int64_t)(G / r->micro) * S; /* micro-batch i: rows [i G/M, (i+1) G/M) */
        for (int i = 0; i < r->micro; i++) {
            cr_assert_eq(ldt_input_bind(r->tok[i], tok + i * n, n * 8), LDT_OK);
            cr_assert_eq(ldt_input_bind(r->tgt[i], tgt + i * n, n * 8), LDT_OK);
        }
        cr_assert(loss = ldt_model_forward_pipeline(r->m, pc, r->tok, r->tgt), "%s", ldt_last_error());
    }
    cr_assert_eq(ldt_grad(loss, r->ps, r->np, g), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_step(r->o, g), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_compile(r->ctx, &loss, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 0, &l, 8), LDT_OK);
    if (exo) *exo = ex;
    return l;
}

static double step(run *r, const ldt_pipeline_config *pc, int k) { return step_ex(r, pc, k, NULL); }

static int nsteps(void) {
    int n = ldt_test_cases(20);
    return n < 3 ? 3 : n;
}

/* Every parameter of r, one after the other (malloc'd; *n elements). */
static double *params_of(run *r, int64_t *n) {
    double *all = NULL;
    *n = 0;
    for (int i = 0; i < r->np; i++) {
        ldt_shape sh;
        int64_t k = 1;
        cr_assert_eq(ldt_tensor_shape(r->ps[i], &sh), LDT_OK);
        for (int d = 0; d < sh.ndim; d++) k *= sh.dims[d];
        cr_assert(all = realloc(all, (size_t)(*n + k) * sizeof *all));
        cr_assert_eq(ldt_read(r->ps[i], all + *n, k * 8), LDT_OK, "%s", ldt_last_error());
        *n += k;
    }
    return all;
}

/* One device's losses over the steps, and its parameters after them (computed once). */
static double *ref_params;
static int64_t ref_nparams;
static const double *reference(void) {
    static double ref[64];
    static int done;
    if (!done) {
        run r;
        open_run(&r, "1", 0);
        for (int k = 0; k < nsteps() && k < 64; k++) ref[k] = step(&r, NULL, k);
        ref_params = params_of(&r, &ref_nparams);
        close_run(&r);
        done = 1;
    }
    return ref;
}

static void check(const char *mesh, ldt_pipe_schedule s, int chunks, int micro) {
    const double *ref = reference();
    ldt_pipeline_config pc = {s, chunks, micro, NULL};
    run r;
    open_run(&r, mesh, micro);
    for (int k = 0; k < nsteps() && k < 64; k++) {
        double l = step(&r, &pc, k);
        cr_assert(fabs(l - ref[k]) <= 1e-9 * fabs(ref[k]), "%s schedule %d chunks %d: step %d loss %.17g, one device %.17g",
                  mesh, (int)s, chunks, k, l, ref[k]);
    }
    { /* the parameters each stage updated, read back (from the ranks of their stages) */
        int64_t n;
        double *p = params_of(&r, &n);
        cr_assert_eq(n, ref_nparams);
        for (int64_t i = 0; i < n; i++)
            cr_assert(fabs(p[i] - ref_params[i]) <= 1e-9 * (1 + fabs(ref_params[i])), "%s: parameter element %lld "
                      "%.17g, one device %.17g", mesh, (long long)i, p[i], ref_params[i]);
        free(p);
    }
    close_run(&r);
}

Test(pipeline, gpipe_pp2_dp2) { check("pp=2,dp=2", LDT_PIPE_GPIPE, 1, 4); }
Test(pipeline, f1b1_pp2_dp2) { check("pp=2,dp=2", LDT_PIPE_1F1B, 1, 4); }
Test(pipeline, gpipe_pp4) { check("pp=4", LDT_PIPE_GPIPE, 1, 4); }
Test(pipeline, f1b1_pp4) { check("pp=4", LDT_PIPE_1F1B, 1, 8); }
Test(pipeline, gpipe_pp2_tp2) { check("pp=2,tp=2", LDT_PIPE_GPIPE, 1, 2); }
Test(pipeline, f1b1_pp2_tp2) { check("pp=2,tp=2", LDT_PIPE_1F1B, 1, 4); }
Test(pipeline, interleaved_pp2_dp2) { check("pp=2,dp=2", LDT_PIPE_INTERLEAVED, 2, 4); }
Test(pipeline, interleaved_pp2_tp2) { check("pp=2,tp=2", LDT_PIPE_INTERLEAVED, 2, 2); }
/* one micro-batch: the tied embedding's update reaches the first stage too (it was kept on the
 * last stage only, and the first read a stale table from the second step on) */
Test(pipeline, one_micro_batch_pp2) { check("pp=2", LDT_PIPE_1F1B, 1, 1); }

/* Each rank runs only its stage: on pp=4 a rank's program is a fraction of pp=1's (the same
 * step, every stage on one rank), sends and receives included; the losses agree. */
Test(pipeline, each_rank_its_stage) {
    ldt_pipeline_config pc = {LDT_PIPE_1F1B, 1, 4, NULL};
    ldt_exec_stats s1, s4;
    ldt_exec *e1, *e4;
    run r1, r4;
    double l1, l4;
    open_run(&r1, "pp=1", 4);
    open_run(&r4, "pp=4", 4);
    l1 = step_ex(&r1, &pc, 0, &e1);
    l4 = step_ex(&r4, &pc, 0, &e4);
    cr_assert_eq(ldt_exec_stats_get(e1, &s1), LDT_OK);
    cr_assert_eq(ldt_exec_stats_get(e4, &s4), LDT_OK);
    cr_assert(fabs(l1 - l4) <= 1e-12 * fabs(l1), "%.17g vs %.17g", l1, l4);
    cr_assert(s4.instructions * 2 < s1.instructions, "pp=4: %lld instructions on a rank, pp=1: %lld",
              (long long)s4.instructions, (long long)s1.instructions);
    close_run(&r1);
    close_run(&r4);
}

/* Memory in flight: GPipe holds every micro-batch's activations before the first backward,
 * 1F1B at most P on the first stage, so its arena (the memory plan over the schedule's
 * order) is smaller. */
Test(pipeline, f1b1_holds_less_than_gpipe) {
    ldt_pipeline_config g = {LDT_PIPE_GPIPE, 1, 8, NULL}, f = {LDT_PIPE_1F1B, 1, 8, NULL};
    ldt_exec_stats sg, sf;
    ldt_exec *eg, *ef;
    run rg, rf;
    open_run(&rg, "pp=2", 8);
    open_run(&rf, "pp=2", 8);
    step_ex(&rg, &g, 0, &eg);
    step_ex(&rf, &f, 0, &ef);
    cr_assert_eq(ldt_exec_stats_get(eg, &sg), LDT_OK);
    cr_assert_eq(ldt_exec_stats_get(ef, &sf), LDT_OK);
    cr_assert(sf.arena_bytes < sg.arena_bytes, "arena 1f1b %lld, gpipe %lld (live bound %lld, %lld)",
              (long long)sf.arena_bytes, (long long)sg.arena_bytes, (long long)sf.bound_bytes, (long long)sg.bound_bytes);
    close_run(&rg);
    close_run(&rf);
}

/* The split balances modeled time: equal layers spread evenly; a heavy head leaves the last
 * stage fewer layers. */
Test(pipeline, split) {
    ldt_model_config c = tiny(G);
    int st[16];
    c.layers = 8;
    cr_assert_eq(ldt_model_pipeline_split("gpt", &c, 4, st), LDT_OK);
    for (int l = 0; l < 8; l++) cr_assert_eq(st[l], l / 2, "layer %d on stage %d", l, st[l]);
    c.vocab = 4096; /* the head: 2 B S H V against a layer's 24 B S H^2 + 4 B S^2 H, ~ 20 layers */
    c.layers = 6;
    cr_assert_eq(ldt_model_pipeline_split("gpt", &c, 2, st), LDT_OK);
    for (int l = 0; l < 5; l++) cr_assert_eq(st[l], 0, "layer %d on stage %d", l, st[l]);
    cr_assert_eq(st[5], 1);
    cr_assert_neq(ldt_model_pipeline_split("gpt", &c, 7, st), LDT_OK);
    cr_assert(strstr(ldt_last_error(), "at least one layer"), "%s", ldt_last_error());
}

static void refused(const char *mesh, ldt_pipeline_config pc, const char *want) {
    run r;
    ldt_tensor *loss;
    open_run(&r, mesh, pc.micro);
    loss = ldt_model_forward_pipeline(r.m, &pc, r.tok, r.tgt);
    cr_assert_null(loss, "%s: expected a refusal", mesh);
    cr_assert(strstr(ldt_last_error(), want), "expected '%s' in: %s", want, ldt_last_error());
    close_run(&r);
}

Test(pipeline, refusals) {
    refused("pp=8", (ldt_pipeline_config){LDT_PIPE_1F1B, 1, 2, NULL}, "at least one layer a stage");
    refused("pp=2", (ldt_pipeline_config){LDT_PIPE_INTERLEAVED, 4, 2, NULL}, "at least one layer a stage");
    refused("pp=2", (ldt_pipeline_config){LDT_PIPE_INTERLEAVED, 2, 1, NULL}, "multiple of 2");
    refused("pp=2", (ldt_pipeline_config){LDT_PIPE_GPIPE, 2, 2, NULL}, "interleaved schedule");
    refused("pp=2", (ldt_pipeline_config){(ldt_pipe_schedule)7, 1, 2, NULL}, "expected gpipe, 1f1b or interleaved");
    refused("dp=2", (ldt_pipeline_config){LDT_PIPE_1F1B, 1, 2, NULL}, "no dim named pp");
    {
        static const int bad[L] = {0, 1, 0, 1};
        refused("pp=2", (ldt_pipeline_config){LDT_PIPE_1F1B, 1, 2, bad}, "in order");
    }
}

/* The tagging API's own refusals. */
Test(pipeline, tag_refusals) {
    run r;
    open_run(&r, "pp=2", 2);
    cr_assert_eq(ldt_pipeline_tag(r.ctx, 0, 0), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "ldt_pipeline_begin first"), "%s", ldt_last_error());
    cr_assert_eq(ldt_pipeline_begin(NULL, LDT_PIPE_1F1B, 1, 2), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_pipeline_begin(r.ctx, LDT_PIPE_1F1B, 1, 0), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "0 micro-batches"), "%s", ldt_last_error());
    cr_assert_eq(ldt_pipeline_begin(r.ctx, LDT_PIPE_1F1B, 1, 2), LDT_OK);
    cr_assert_eq(ldt_pipeline_tag(r.ctx, 2, 0), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "expected -1 or 0..1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_pipeline_tag(r.ctx, 1, 2), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "micro-batch 2, expected 0..1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_pipeline_tag(r.ctx, 1, 1), LDT_OK);
    cr_assert_eq(ldt_pipeline_tag(r.ctx, -1, 0), LDT_OK);
    close_run(&r);
}

Test(pipeline, refusals_layers_not_divisible) {
    /* interleaved: every model chunk as deep (8 layers over pp=3 x 2 chunks) */
    run r;
    ldt_model_config cfg = tiny(G);
    ldt_ctx_options co = {0};
    ldt_model *m;
    ldt_tensor *tok[2], *tgt[2];
    ldt_pipeline_config pc = {LDT_PIPE_INTERLEAVED, 2, 3, NULL};
    memset(&r, 0, sizeof r);
    cfg.layers = 8;
    cfg.batch = 2;
    cr_assert_eq(ldt_mesh_parse("pp=3", LDT_DEVICE_CPU, &r.mesh), LDT_OK);
    co.mesh = r.mesh;
    cr_assert_eq(ldt_ctx_create(&co, &r.ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(r.ctx, "gpt", &cfg, &m), LDT_OK);
    tok[0] = tok[1] = ldt_model_input(m, 0, NULL);
    tgt[0] = tgt[1] = ldt_model_input(m, 1, NULL);
    cr_assert_null(ldt_model_forward_pipeline(m, &pc, tok, tgt));
    cr_assert(strstr(ldt_last_error(), "multiple of 6"), "%s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(r.ctx);
    ldt_mesh_destroy(r.mesh);
}

/* ldt train's pipeline flags: a run on pp=2,dp=2 loses what --mesh 1 loses on the same
 * global batch, and the flags' refusals name what was wrong. */
static int cli(const char *args, char *out, size_t cap) {
    char cmd[1024];
    FILE *f;
    size_t n;
    int st;
    snprintf(cmd, sizeof cmd, "%s train --dtype f64 --layers 4 --hidden 16 --heads 2 --vocab 128 --seq 8 --steps 3 "
             "--dropout 0.1 --sample 0 --json %s 2>&1", LDT_CLI_PATH, args);
    cr_assert(f = popen(cmd, "r"));
    n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void losses_of(const char *json, double *l) {
    const char *at = strstr(json, "\"losses\":[");
    cr_assert(at, "%s", json);
    at += strlen("\"losses\":[");
    for (int k = 0; k < 3; k++) {
        char *end;
        l[k] = strtod(at, &end);
        cr_assert(end != at, "%s", json);
        at = end + 1;
    }
}

Test(pipeline, cli) {
    static char a[1 << 14], b[1 << 14];
    double la[3], lb[3];
    cr_assert_eq(cli("--mesh 1 --batch 8", a, sizeof a), 0, "%s", a);
    cr_assert_eq(cli("--mesh pp=2,dp=2 --global-batch 8 --micro-batch 2 --schedule gpipe", b, sizeof b), 0, "%s", b);
    cr_assert(strstr(b, "\"micro_batches\":2") && strstr(b, "\"schedule\":\"gpipe\""), "%s", b);
    losses_of(a, la);
    losses_of(b, lb);
    for (int k = 0; k < 3; k++) cr_assert(fabs(la[k] - lb[k]) <= 1e-9 * fabs(la[k]), "step %d: %.17g vs %.17g", k, la[k], lb[k]);
}

static void cli_refused(const char *args, const char *want) {
    static char out[1 << 14];
    cr_assert_neq(cli(args, out, sizeof out), 0, "%s: expected a refusal", args);
    cr_assert(strstr(out, want), "%s: expected '%s' in: %s", args, want, out);
}

Test(pipeline, cli_refusals) {
    cli_refused("--mesh pp=2,dp=2 --global-batch 6 --micro-batch 2", "not a multiple of --micro-batch 2 x dp 2");
    cli_refused("--mesh pp=2 --schedule zigzag", "expected gpipe, 1f1b or interleaved:V");
    cli_refused("--mesh pp=2 --schedule interleaved:1", "expected gpipe, 1f1b or interleaved:V");
    cli_refused("--mesh pp=2 --global-batch 4 --schedule interleaved:4", "at least one layer a stage");
    cli_refused("--mesh pp=2 --global-batch 4 --schedule interleaved:3 --layers 9", "multiple of 6");
    cli_refused("--mesh pp=8 --global-batch 8", "at least one layer a stage");
    cli_refused("--mesh dp=2 --micro-batch 2", "needs a mesh dim named pp");
    cli_refused("--mesh pp=2 --stages 1,1", "expected 2 stages (pp 2 x 1 chunks) of --layers 4");
    cli_refused("--mesh pp=2 --stages 0,4", "expected layers a stage");
    cli_refused("--mesh pp=2 --stages 1,1,2", "expected 2 stages");
    cli_refused("--mesh pp=2 --zero", "without --zero");
}
