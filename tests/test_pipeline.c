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

/* The FLOP split: equal layers spread evenly; a heavy head leaves the last stage fewer layers. */
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

/* The brute force: every split of n layers into k stages (cut points enumerated), the best by
 * the order ldt_model_pipeline_split_seconds documents: the largest stage cost, then the last
 * stage's layers (fewer first), then the largest cost of the stages before it, then the layers
 * of the last of those, ... (exact comparisons: the tests' costs are whole numbers). */
typedef struct split_case {
    int n, k;
    double c[12], first, last;
} split_case;

/* key[2 (k - 1 - i)] = the largest cost of stages 0..i, key[2 (k - 1 - i) + 1] = stage i's layers */
static void split_key(const split_case *sc, const int *cnt, double *key) {
    double cost[12], mx = 0;
    for (int i = 0, l = 0; i < sc->k; i++) {
        cost[i] = (i == 0 ? sc->first : 0) + (i == sc->k - 1 ? sc->last : 0);
        for (int j = 0; j < cnt[i]; j++) cost[i] += sc->c[l++];
    }
    for (int i = 0; i < sc->k; i++) {
        mx = cost[i] > mx ? cost[i] : mx;
        key[2 * (sc->k - 1 - i)] = mx;
        key[2 * (sc->k - 1 - i) + 1] = cnt[i];
    }
}

static int key_less(const double *a, const double *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return 0;
}

/* Every composition of the layers left into the stages left, stage i on. */
static void brute(const split_case *sc, int i, int left, int *cnt, double *best, int *best_cnt) {
    if (i == sc->k - 1) {
        double key[24];
        cnt[i] = left;
        split_key(sc, cnt, key);
        if (best[0] < 0 || key_less(key, best, 2 * sc->k)) {
            memcpy(best, key, sizeof key);
            memcpy(best_cnt, cnt, (size_t)sc->k * sizeof *cnt);
        }
        return;
    }
    for (int n = 1; n <= left - (sc->k - 1 - i); n++) {
        cnt[i] = n;
        brute(sc, i + 1, left - n, cnt, best, best_cnt);
    }
}

Test(pipeline, split_seconds_brute_force) {
    uint64_t rs = 26;
    int ncases = ldt_test_cases(300);
    for (int t = 0; t < ncases; t++) {
        split_case sc;
        int st[12], cnt[12], want[12], got[12] = {0};
        double best[24], ss[12];
        int spread = t % 3 == 0 ? 1 : t % 3 == 1 ? 4 : 1000; /* few values: many ties; many: few */
        sc.n = (int)ldt_test_range(&rs, 1, 10);
        sc.k = (int)ldt_test_range(&rs, 1, sc.n < 5 ? sc.n : 5);
        for (int l = 0; l < sc.n; l++) sc.c[l] = (double)ldt_test_range(&rs, 0, spread);
        sc.first = (double)ldt_test_range(&rs, 0, 2 * spread);
        sc.last = (double)ldt_test_range(&rs, 0, t % 2 ? 6 * spread : spread);
        best[0] = -1;
        brute(&sc, 0, sc.n, cnt, best, want);
        cr_assert_eq(ldt_model_pipeline_split_seconds(sc.n, sc.c, sc.first, sc.last, sc.k, st, ss), LDT_OK, "%s",
                     ldt_last_error());
        for (int l = 0; l < sc.n; l++) {
            cr_assert(st[l] >= 0 && st[l] < sc.k && (l == 0 ? st[l] == 0 : st[l] - st[l - 1] <= 1), "case %d", t);
            got[st[l]]++;
        }
        for (int i = 0; i < sc.k; i++) {
            double cost = (i == 0 ? sc.first : 0) + (i == sc.k - 1 ? sc.last : 0);
            for (int l = 0; l < sc.n; l++) cost += st[l] == i ? sc.c[l] : 0;
            cr_assert_eq(got[i], want[i], "case %d (%d layers, %d stages): stage %d has %d layers, the brute force "
                         "%d", t, sc.n, sc.k, i, got[i], want[i]);
            cr_assert_eq(ss[i], cost, "case %d: stage %d costs %g, its layers and ends %g", t, i, ss[i], cost);
        }
    }
}

Test(pipeline, split_seconds_refusals) {
    double c[4] = {1, 2, 3, 4}, bad[4] = {1, -1, 3, 4}, nan_c[4] = {1, 2, NAN, 4};
    int st[4];
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, NULL, 0, 0, 2, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "NULL layer_seconds"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, c, 0, 0, 2, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, c, 0, 0, 0, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "layers >= stages >= 1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(3, c, 0, 0, 4, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "3 layers into 4 stages"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, bad, 0, 0, 2, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "layer 1 costs -1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, nan_c, 0, 0, 2, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "layer 2 costs"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, c, INFINITY, 0, 2, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "expected finite costs >= 0"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pipeline_split_seconds(4, c, 0, -2, 2, st, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_model_pipeline_split_seconds((1 << 20) + 1, c, 0, 0, 2, st, NULL), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "up to 2^20"), "%s", ldt_last_error());
}

/* A gpt on a meta mesh, f32, megatron pins. */
static ldt_model *meta_gpt(const char *mesh_text, ldt_model_config c, ldt_mesh **mesh, ldt_ctx **ctx) {
    ldt_ctx_options co = {0};
    ldt_model *m;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, mesh), LDT_OK);
    co.mesh = *mesh;
    cr_assert_eq(ldt_ctx_create(&co, ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(*ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pin(m, "megatron"), LDT_OK);
    return m;
}

/* The modeled split, where the head is heavy (vocab 32768 against hidden 512, h100-80g): the
 * parts add up to the whole step planned at once; the last stage gets fewer layers (4,2, where
 * FLOPs say 5,1); its largest stage is no slower than the FLOP split's, both priced alike. */
Test(pipeline, split_modeled) {
    ldt_model_config c = ldt_model_config_default("gpt");
    ldt_cost_model cm;
    ldt_mesh *mesh, *sub;
    ldt_ctx *ctx, *sctx;
    ldt_model *m, *whole;
    ldt_plan *plan;
    ldt_plan_options po = {0};
    ldt_plan_step step;
    ldt_tensor *loss, *ps[128], *gs[128];
    double ls[6], lf[6], first, last, mx_mod = 0, mx_flop = 0, sum, full_first, full_last;
    int st_mod[6], st_flop[6], n_mod[2] = {0, 0};
    c.layers = 6, c.hidden = 512, c.heads = 8, c.vocab = 32768, c.seq = 256, c.batch = 2;
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &cm), LDT_OK);
    m = meta_gpt("pp=2,tp=2", c, &mesh, &ctx);
    cr_assert_eq(ldt_model_stage_seconds(m, NULL, &cm, ls, &first, &last), LDT_OK, "%s", ldt_last_error());
    cr_assert(ls[0] > 0 && first > 0 && last > ls[0], "layer %g first %g last %g", ls[0], first, last);
    for (int l = 1; l < 6; l++) cr_assert_eq(ls[l], ls[0]);
    /* the reference: the whole step (forward and backward) planned on the stage's mesh tp=2 */
    whole = meta_gpt("tp=2", c, &sub, &sctx);
    cr_assert(loss = ldt_model_forward(whole));
    cr_assert_leq(ldt_model_nparams(whole), 128);
    for (int i = 0; i < ldt_model_nparams(whole); i++) ps[i] = ldt_model_param(whole, i, NULL);
    cr_assert_eq(ldt_grad(loss, ps, ldt_model_nparams(whole), gs), LDT_OK);
    po.cost = &cm;
    cr_assert_eq(ldt_plan_create(sctx, &po, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_step_get(plan, NULL, &step), LDT_OK);
    sum = first + last + 6 * ls[0];
    cr_assert(fabs(sum - step.modeled_step_seconds) <= 0.05 * step.modeled_step_seconds,
              "parts %g (layer %g, first %g, last %g), the whole step planned %g", sum, ls[0], first, last,
              step.modeled_step_seconds);
    /* the two splits, priced by the same parts */
    cr_assert_eq(ldt_model_pipeline_split_seconds(6, ls, first, last, 2, st_mod, NULL), LDT_OK);
    cr_assert_eq(ldt_model_pipeline_split("gpt", &c, 2, st_flop), LDT_OK);
    for (int w = 0; w < 2; w++) {
        double s[2] = {first, last};
        const int *st = w ? st_flop : st_mod;
        for (int l = 0; l < 6; l++) s[st[l]] += ls[l];
        for (int k = 0; k < 2; k++) *(w ? &mx_flop : &mx_mod) = fmax(*(w ? &mx_flop : &mx_mod), s[k]);
    }
    for (int l = 0; l < 6; l++) n_mod[st_mod[l]]++;
    cr_assert_lt(n_mod[1], n_mod[0], "modeled split %d,%d", n_mod[0], n_mod[1]);
    cr_assert_leq(mx_mod, mx_flop, "modeled split's largest stage %g, the FLOP split's %g", mx_mod, mx_flop);
    /* full recomputation runs each layer's forward twice: dearer layers, the same ends */
    cr_assert_eq(ldt_model_set_recompute(m, -1, "full"), LDT_OK);
    cr_assert_eq(ldt_model_stage_seconds(m, NULL, &cm, lf, &full_first, &full_last), LDT_OK, "%s", ldt_last_error());
    cr_assert_gt(lf[0], ls[0]);
    cr_assert(fabs(full_first - first) <= 1e-9 * first && fabs(full_last - last) <= 1e-9 * last, "ends %g %g, "
              "selective's %g %g", full_first, full_last, first, last);
    cr_assert_eq(ldt_model_stage_seconds(m, NULL, NULL, lf, &first, &last), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "NULL argument"), "%s", ldt_last_error());
    ldt_plan_destroy(plan);
    ldt_model_destroy(whole);
    ldt_ctx_destroy(sctx);
    ldt_mesh_destroy(sub);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(pipeline, split_modeled_refuses_mlp) {
    ldt_model_config c = ldt_model_config_default("mlp");
    ldt_cost_model cm;
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_model *m;
    double ls[4], f, l;
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &cm), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("pp=2", LDT_DEVICE_META, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK);
    cr_assert_eq(ldt_model_stage_seconds(m, NULL, &cm, ls, &f, &l), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "only gpt"), "%s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
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
    /* a heavy head (vocab 2048 against hidden 16): the modeled split leaves the last stage one
     * layer, and the losses are still one device's */
    cr_assert_eq(cli("--vocab 2048 --mesh 1 --batch 8", a, sizeof a), 0, "%s", a);
    cr_assert_eq(cli("--vocab 2048 --mesh pp=2,dp=2 --global-batch 8 --micro-batch 2", b, sizeof b), 0, "%s", b);
    cr_assert(strstr(b, "\"stage_split\":\"modeled\",\"stages\":[3,1],\"stage_seconds\":["), "%s", b);
    losses_of(a, la);
    losses_of(b, lb);
    for (int k = 0; k < 3; k++) cr_assert(fabs(la[k] - lb[k]) <= 1e-9 * fabs(la[k]), "step %d: %.17g vs %.17g", k, la[k], lb[k]);
    /* --stages given: reported as given */
    cr_assert_eq(cli("--mesh pp=2 --global-batch 4 --stages 1,3", b, sizeof b), 0, "%s", b);
    cr_assert(strstr(b, "\"stage_split\":\"given\",\"stages\":[1,3]"), "%s", b);
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
