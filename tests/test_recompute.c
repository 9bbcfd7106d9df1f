/* Activation recomputation (docs/recompute.md): a tiny f64 GPT with dropout trained a few
 * steps with every layer's recomputation none, selective or full gives the same losses and
 * gradients (1e-12 relative) on one rank, tp=2 and dp=2 (rank threads), and so does a mix of
 * modes per layer; on a meta plan the saved activations and the arena shrink from none to
 * selective to full by the tensors a layer no longer keeps (derived by hand below); the CLI's
 * per-layer lists and ldt train --recompute auto under a memory budget train to none's
 * losses; the refusals name what was wrong. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "ldt/models.h"
#include "ldt/planner.h"
#include "cli_run.h"

#include <cjson/cJSON.h>

#define STEPS 3
#define MAXP 64
#define MAXG 4096 /* gradient elements kept per run (the tiny model's all) */

static double g_dropout = 0.2;
static int64_t g_layers = 2;

static ldt_model_config tiny(void) {
    ldt_model_config cfg = ldt_model_config_default("gpt");
    cfg.layers = g_layers, cfg.hidden = 8, cfg.heads = 2, cfg.vocab = 16, cfg.seq = 8, cfg.batch = 4;
    cfg.dtype = LDT_F64, cfg.dropout = g_dropout, cfg.train = 1;
    return cfg;
}

typedef struct train_run {
    double loss[STEPS];
    double grad[MAXG]; /* the last step's gradients, every parameter's in order */
    int64_t ngrad;
} train_run;

/* STEPS AdamW steps of the tiny GPT (pinned megatron) on mesh_text with every layer's
 * recomputation `mode`, or with "a,b,c" layer l's the l-th, each a compiled step (loss and
 * every gradient its outputs). */
static void train(const char *mesh_text, const char *mode, train_run *out) {
    ldt_model_config cfg = tiny();
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    ldt_tensor *ps[MAXP];
    int np, dp = -1;
    memset(out, 0, sizeof *out);
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    co.seed = 3;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(m, 3), LDT_OK);
    cr_assert_eq(ldt_model_pin(m, "megatron"), LDT_OK);
    if (strchr(mode, ',')) { /* one per layer */
        char buf[128], *save = NULL, *tok;
        int64_t l = 0;
        snprintf(buf, sizeof buf, "%s", mode);
        for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), l++)
            cr_assert_eq(ldt_model_set_recompute(m, l, tok), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(l, cfg.layers, "%s: one mode per layer", mode);
        cr_assert_str_eq(ldt_model_recompute(m, l - 1), strrchr(mode, ',') + 1);
    } else {
        cr_assert_eq(ldt_model_set_recompute(m, -1, mode), LDT_OK, "%s", ldt_last_error());
    }
    np = ldt_model_nparams(m);
    cr_assert_leq(np, MAXP);
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 1e-2, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.weight_decay = 0.01, oc.total_steps = STEPS;
    cr_assert_eq(ldt_optim_create(ctx, &oc, ps, np, &o), LDT_OK, "%s", ldt_last_error());
    if (ldt_mesh_dim_index(mesh, "dp", &dp) == LDT_OK) cr_assert_eq(ldt_optim_sync_grads(o, dp), LDT_OK);
    ldt_clear_error();
    for (int k = 0; k < STEPS; k++) {
        int64_t n = cfg.batch * cfg.seq, tok[64], tgt[64];
        ldt_tensor *outs[1 + MAXP], *g[MAXP];
        ldt_exec *ex;
        for (int64_t i = 0; i < n; i++) {
            tok[i] = (i * 7 + k * 3) % cfg.vocab;
            tgt[i] = i % 9 == 4 ? -1 : (i * 5 + k + 1) % cfg.vocab;
        }
        cr_assert_eq(ldt_input_bind(ldt_model_input(m, 0, NULL), tok, n * 8), LDT_OK);
        cr_assert_eq(ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, n * 8), LDT_OK);
        cr_assert(outs[0] = ldt_model_forward(m), "%s", ldt_last_error());
        cr_assert_eq(ldt_grad(outs[0], ps, np, g), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < np; i++) outs[1 + i] = g[i];
        cr_assert_eq(ldt_optim_step(o, g), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_compile(ctx, outs, 1 + np, NULL, &ex), LDT_OK, "%s %s: %s", mesh_text, mode,
                     ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &out->loss[k], 8), LDT_OK, "%s", ldt_last_error());
        if (k == STEPS - 1) {
            out->ngrad = 0;
            for (int i = 0; i < np; i++) {
                ldt_shape s;
                int64_t e = 1;
                ldt_tensor_shape(ps[i], &s);
                for (int d = 0; d < s.ndim; d++) e *= s.dims[d];
                cr_assert_leq(out->ngrad + e, MAXG);
                cr_assert_eq(ldt_exec_read(ex, 1 + i, out->grad + out->ngrad, e * 8), LDT_OK, "%s",
                             ldt_last_error());
                out->ngrad += e;
            }
        }
    }
    ldt_optim_destroy(o);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

static void expect_close(double got, double want, const char *what, const char *mesh, const char *mode, int64_t i) {
    cr_expect(fabs(got - want) <= 1e-12 * fmax(fabs(want), 1e-300) || got == want,
              "%s %lld on %s with %s: %.17g, none gives %.17g", what, (long long)i, mesh, mode, got, want);
}

static void same_as_none(const char *mesh_text, int nmodes, const char *const *modes) {
    train_run ref, r;
    train(mesh_text, "none", &ref);
    for (int k = 1; k < STEPS; k++) cr_assert_neq(ref.loss[k], ref.loss[0], "the steps train");
    for (int mi = 0; mi < nmodes; mi++) {
        train(mesh_text, modes[mi], &r);
        cr_assert_eq(r.ngrad, ref.ngrad);
        for (int k = 0; k < STEPS; k++) expect_close(r.loss[k], ref.loss[k], "loss of step", mesh_text, modes[mi], k);
        for (int64_t i = 0; i < r.ngrad; i++) expect_close(r.grad[i], ref.grad[i], "gradient element", mesh_text, modes[mi], i);
    }
}

static const char *const k_uniform[2] = {"selective", "full"};
/* three layers, each its own mode */
static const char *const k_mixed[1] = {"full,none,selective"};

Test(recompute, same_losses_and_gradients_one_rank) { same_as_none("1", 2, k_uniform); }
Test(recompute, same_losses_and_gradients_tp2) { same_as_none("tp=2", 2, k_uniform); }
Test(recompute, same_losses_and_gradients_dp2) { same_as_none("dp=2", 2, k_uniform); }
Test(recompute, mixed_layers_same_losses_one_rank) {
    g_layers = 3;
    same_as_none("1", 1, k_mixed);
}
Test(recompute, mixed_layers_same_losses_tp2) {
    g_layers = 3;
    same_as_none("tp=2", 1, k_mixed);
}

/* Dropout really draws (the losses differ without it), so the equal losses above say the
 * recomputed dropouts drew the forward's masks. */
Test(recompute, dropout_draws) {
    train_run a, b;
    train("1", "full", &a);
    g_dropout = 0;
    train("1", "full", &b);
    g_dropout = 0.2;
    cr_assert(fabs(a.loss[0] - b.loss[0]) > 1e-6 * fabs(b.loss[0]), "%.17g %.17g", a.loss[0], b.loss[0]);
}

/* A meta plan of the tiny model's training step (mesh 1, f64) with layer 0's mode `mode0` and
 * layer 1's `mode1`: the saved activations and the arena. */
static void meta_plan(const char *mode0, const char *mode1, int64_t *saved, int64_t *arena) {
    ldt_model_config cfg = tiny();
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    ldt_plan_step ps;
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    ldt_plan *plan;
    ldt_tensor *loss, *p[MAXP], *g[MAXP];
    int np;
    cr_assert_eq(ldt_mesh_parse("1", LDT_DEVICE_META, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_set_recompute(m, 0, mode0), LDT_OK);
    cr_assert_eq(ldt_model_set_recompute(m, 1, mode1), LDT_OK);
    cr_assert_str_eq(ldt_model_recompute(m, 0), mode0);
    cr_assert_str_eq(ldt_model_recompute(m, 1), mode1);
    np = ldt_model_nparams(m);
    for (int i = 0; i < np; i++) p[i] = ldt_model_param(m, i, NULL);
    cr_assert(loss = ldt_model_forward(m), "%s", ldt_last_error());
    cr_assert_eq(ldt_grad(loss, p, np, g), LDT_OK, "%s", ldt_last_error());
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 1e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.total_steps = 1;
    cr_assert_eq(ldt_optim_create(ctx, &oc, p, np, &o), LDT_OK);
    cr_assert_eq(ldt_optim_step(o, g), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_step_get(plan, loss, &ps), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_arena_bytes(plan, 0, arena), LDT_OK);
    *saved = ps.saved_bytes;
    ldt_plan_destroy(plan);
    ldt_optim_destroy(o);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* By hand, one layer of the tiny model (B 4, S 8, H 8, A 2; f64, 8 bytes an element):
 * - none keeps, beyond selective, the attention weights after softmax (softmax's backward
 *   reads them) and after dropout (the attention over v reads them): 2 B A S^2 elements;
 * - selective keeps 16 BSH elements a layer (docs/planner.md's table: the block input 1, the
 *   first norm's output 1, q, k, v 3, the attention output 1, the residual sum 1, the second
 *   norm's output 1, c_fc's output 4, gelu's output 4); full keeps only the block input, the
 *   rest recomputed in the backward: 15 BSH fewer. */
Test(recompute, saved_activations_by_hand) {
    const int64_t B = 4, S = 8, H = 8, A = 2, e = 8;
    int64_t s_nn, s_sn, s_ss, s_fs, s_ff, a_nn, a_ss, a_ff, a_tmp;
    meta_plan("none", "none", &s_nn, &a_nn);
    meta_plan("selective", "none", &s_sn, &a_tmp);
    meta_plan("selective", "selective", &s_ss, &a_ss);
    meta_plan("full", "selective", &s_fs, &a_tmp);
    meta_plan("full", "full", &s_ff, &a_ff);
    cr_expect_eq(s_nn - s_sn, 2 * B * A * S * S * e, "none - selective, one layer: %lld", (long long)(s_nn - s_sn));
    cr_expect_eq(s_sn - s_ss, 2 * B * A * S * S * e, "none - selective, the other layer: %lld",
                 (long long)(s_sn - s_ss));
    cr_expect_eq(s_ss - s_fs, 15 * B * S * H * e, "selective - full, one layer: %lld", (long long)(s_ss - s_fs));
    cr_expect_eq(s_fs - s_ff, 15 * B * S * H * e, "selective - full, the other layer: %lld",
                 (long long)(s_fs - s_ff));
    cr_expect_lt(a_ff, a_ss, "activations_peak: full %lld, selective %lld", (long long)a_ff, (long long)a_ss);
    cr_expect_lt(a_ss, a_nn, "activations_peak: selective %lld, none %lld", (long long)a_ss, (long long)a_nn);
}

Test(recompute, refusals) {
    ldt_model_config cfg = tiny(), mcfg = ldt_model_config_default("mlp");
    ldt_ctx *ctx;
    ldt_model *m, *mlp;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "mlp", &mcfg, &mlp), LDT_OK);
    cr_assert_str_eq(ldt_model_recompute(m, 1), "selective", "the default");
    cr_assert_eq(ldt_model_set_recompute(m, 0, "some"), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "mode \"some\", expected none, selective or full"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_set_recompute(m, 0, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "mode NULL, expected none"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_set_recompute(m, 2, "full"), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "layer 2, expected -1 (every layer) or 0 to 1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_set_recompute(mlp, 0, "full"), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "mlp model has no recomputation"), "%s", ldt_last_error());
    cr_assert_null(ldt_model_recompute(mlp, 0));
    cr_assert_null(ldt_model_recompute(m, 2));
    cr_assert_str_eq(ldt_model_recompute(m, 0), "selective", "unchanged by the refusals");
    /* segments */
    cr_assert_eq(ldt_recompute_end(ctx), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "no segment is open"), "%s", ldt_last_error());
    cr_assert_eq(ldt_recompute_begin(ctx), LDT_OK);
    cr_assert_eq(ldt_recompute_begin(ctx), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "segments do not nest"), "%s", ldt_last_error());
    cr_assert_eq(ldt_recompute_end(ctx), LDT_OK);
    cr_assert_eq(ldt_recompute_begin(NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "ctx is NULL"), "%s", ldt_last_error());
    cr_assert_eq(ldt_recompute_end(NULL), LDT_ERR_INVALID_ARGUMENT);
    ldt_model_destroy(mlp);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

/* ---- the CLI: ldt train / ldt plan --recompute ------------------------------------------ */
#define PLAN_ARGS "plan --model gpt --train --meta --layers 4 --hidden 64 --heads 4 --vocab 128 --seq 64 --batch 4 --mesh 1"

static cJSON *run_json(const char *args, int want_rc) {
    static char out[1 << 20];
    cJSON *j;
    int rc = run(args, out, sizeof out, 0);
    cr_assert_eq(rc, want_rc, "ldt %s: exit %d", args, rc);
    cr_assert(j = cJSON_Parse(out), "ldt %s: not JSON: %.300s", args, out);
    return j;
}

static double jnum_at(const cJSON *j, const char *obj, const char *k) {
    const cJSON *o = obj ? cJSON_GetObjectItem(j, obj) : j, *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(v), "no %s.%s", obj ? obj : "", k);
    return v->valuedouble;
}

/* Every mode's losses of `ldt train --dtype f64` equal none's, and a list's with each layer
 * its own mode; the JSON names the mode per layer. */
Test(recompute, cli_train_losses_and_json) {
    static const char *const modes[4] = {"none", "selective", "full", "selective,full,none"};
    double ref[3] = {0};
    for (int i = 0; i < 4; i++) {
        char args[512];
        cJSON *j, *l, *r;
        snprintf(args, sizeof args, "train --mesh 1 --layers 3 --hidden 16 --heads 2 --seq 16 --batch 2 --steps 3 "
                 "--dtype f64 --dropout 0.2 --sample 0 --json --recompute %s", modes[i]);
        j = run_json(args, 0);
        l = cJSON_GetObjectItem(j, "losses");
        r = cJSON_GetObjectItem(j, "recompute");
        cr_assert_eq(cJSON_GetArraySize(l), 3);
        cr_assert_eq(cJSON_GetArraySize(r), 3);
        if (i < 3) {
            cr_expect_str_eq(cJSON_GetArrayItem(r, 1)->valuestring, modes[i]);
            cr_expect_eq(jnum_at(j, "recompute_mix", modes[i]), 3);
        } else { /* layer l the l-th of the list */
            for (int k = 0; k < 3; k++) {
                cr_expect_str_eq(cJSON_GetArrayItem(r, k)->valuestring, modes[(k + 1) % 3], "layer %d", k);
                cr_expect_eq(jnum_at(j, "recompute_mix", modes[k]), 1);
            }
        }
        for (int k = 0; k < 3; k++) {
            double v = cJSON_GetArrayItem(l, k)->valuedouble;
            if (i == 0) ref[k] = v;
            else cr_expect(fabs(v - ref[k]) <= 1e-12 * fabs(ref[k]), "%s step %d: %.17g, none %.17g", modes[i], k, v, ref[k]);
        }
        cJSON_Delete(j);
    }
}

/* --recompute auto: a budget between the none and full peaks (below selective's) gets a mix
 * with full layers that fits, no slower than every layer full; one byte under full's peak is
 * refused, naming that peak. */
Test(recompute, cli_plan_auto) {
    static const char *const modes[3] = {"none", "selective", "full"};
    double peak[3], sec[3];
    char args[512], out[8192];
    int64_t budget;
    cJSON *j, *mix;
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, PLAN_ARGS " --json --recompute %s", modes[i]);
        j = run_json(args, 0);
        peak[i] = jnum_at(j, "memory_per_rank", "peak");
        sec[i] = jnum_at(j, NULL, "modeled_step_seconds");
        cJSON_Delete(j);
    }
    cr_assert(peak[2] < peak[1] && peak[1] < peak[0], "peaks none %g selective %g full %g", peak[0], peak[1], peak[2]);
    budget = (int64_t)((peak[1] + peak[2]) / 2);
    snprintf(args, sizeof args, PLAN_ARGS " --json --recompute auto --memory-budget %lld", (long long)budget);
    j = run_json(args, 0);
    mix = cJSON_GetObjectItem(j, "recompute_mix");
    cr_expect_leq(jnum_at(j, "memory_per_rank", "peak"), (double)budget);
    cr_expect_geq(jnum_at(mix, NULL, "full"), 1, "selective's peak is over the budget: some layer full");
    cr_expect_eq(jnum_at(mix, NULL, "full") + jnum_at(mix, NULL, "selective") + jnum_at(mix, NULL, "none"), 4);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "recompute")), 4);
    cr_expect_leq(jnum_at(j, NULL, "modeled_step_seconds"), sec[2], "no slower than every layer full");
    cr_expect_geq(jnum_at(j, NULL, "recompute_plans"), 3);
    cJSON_Delete(j);
    snprintf(args, sizeof args, PLAN_ARGS " --recompute auto --memory-budget %lld", (long long)peak[2] - 1);
    cr_assert_eq(run_cli(args, out, sizeof out), 1, "%s", out);
    snprintf(args, sizeof args, "is %lld bytes", (long long)peak[2]);
    cr_expect(strstr(out, args), "the least peak named: %s", out);
    cr_expect(strstr(out, "every layer full has the least peak"), "%s", out);
}

Test(recompute, cli_refusals) {
    char out[8192];
    cr_expect_eq(run_cli(PLAN_ARGS " --recompute some", out, sizeof out), 2);
    cr_expect(strstr(out, "--recompute some, expected none, selective or full"), "%s", out);
    cr_expect_eq(run_cli(PLAN_ARGS " --recompute auto", out, sizeof out), 2);
    cr_expect(strstr(out, "--recompute auto needs --train and --memory-budget BYTES"), "%s", out);
    cr_expect_eq(run_cli("plan --model mlp --recompute full", out, sizeof out), 2);
    cr_expect(strstr(out, "only the gpt recomputes"), "%s", out);
    /* per-layer lists: exactly --layers modes, each none, selective or full */
    cr_expect_eq(run_cli(PLAN_ARGS " --recompute full,selective,none", out, sizeof out), 2);
    cr_expect(strstr(out, "ldt plan: --recompute full,selective,none gives 3 modes for --layers 4"), "%s", out);
    cr_expect_eq(run_cli(PLAN_ARGS " --recompute full,some,none,full", out, sizeof out), 2);
    cr_expect(strstr(out, "layer 1's mode 'some', expected none, selective or full"), "%s", out);
    cr_expect_eq(run_cli("train --mesh 1 --layers 3 --steps 1 --recompute full,none,,", out, sizeof out), 2);
    cr_expect(strstr(out, "ldt train: --recompute full,none,, gives 4 modes for --layers 3"), "%s", out);
    cr_expect_eq(run_cli("train --mesh 1 --layers 3 --steps 1 --recompute full,,none", out, sizeof out), 2);
    cr_expect(strstr(out, "layer 1's mode '', expected none"), "%s", out);
    /* train's auto: only with a budget, the budget only with auto, no pp */
    cr_expect_eq(run_cli("train --mesh 1 --steps 1 --recompute auto", out, sizeof out), 2);
    cr_expect(strstr(out, "ldt train: --recompute auto needs --memory-budget BYTES"), "%s", out);
    cr_expect_eq(run_cli("train --mesh 1 --steps 1 --recompute full --memory-budget 100000000", out, sizeof out), 2);
    cr_expect(strstr(out, "--memory-budget is only used by --recompute auto in ldt train"), "%s", out);
    cr_expect_eq(run_cli("train --mesh 1 --steps 1 --memory-budget 100000000", out, sizeof out), 2);
    cr_expect(strstr(out, "--memory-budget is only used by --recompute auto"), "%s", out);
    cr_expect_eq(run_cli("train --mesh pp=2 --steps 1 --recompute auto --memory-budget 100000000", out, sizeof out), 2);
    cr_expect(strstr(out, "--recompute auto with a pp mesh dim"), "%s", out);
}

/* ldt train --recompute auto: a budget between the full and selective peaks of ldt plan's
 * training step of the same model (f64, dropout 0, --mesh 1) trains with some layer full,
 * reports the mix and its modeled peak within the budget, and its losses are
 * --recompute none's; a budget under every layer full's peak is refused, naming it. */
#define TRAIN_SIZES "--layers 3 --hidden 16 --heads 2 --vocab 128 --seq 32 --batch 2 --mesh 1 --profile cpu-threads"
#define TRAIN_ARGS "train " TRAIN_SIZES " --steps 3 --dtype f64 --dropout 0 --sample 0 --json"

Test(recompute, cli_train_auto) {
    double peak[3], budget;
    char args[512], out[8192];
    cJSON *j, *ref, *l, *lr, *mix;
    for (int i = 0; i < 3; i++) {
        static const char *const modes[3] = {"none", "selective", "full"};
        snprintf(args, sizeof args, "plan --model gpt --train --meta --dtype f64 " TRAIN_SIZES " --json --recompute %s",
                 modes[i]);
        j = run_json(args, 0);
        peak[i] = jnum_at(j, "memory_per_rank", "peak");
        cJSON_Delete(j);
    }
    cr_assert(peak[2] < peak[1] && peak[1] < peak[0], "peaks none %g selective %g full %g", peak[0], peak[1], peak[2]);
    budget = floor((peak[1] + peak[2]) / 2);
    ref = run_json(TRAIN_ARGS " --recompute none", 0);
    snprintf(args, sizeof args, TRAIN_ARGS " --recompute auto --memory-budget %.0f", budget);
    j = run_json(args, 0);
    mix = cJSON_GetObjectItem(j, "recompute_mix");
    cr_expect_geq(jnum_at(mix, NULL, "full"), 1, "selective's peak is over the budget: some layer full");
    cr_expect_eq(jnum_at(mix, NULL, "full") + jnum_at(mix, NULL, "selective") + jnum_at(mix, NULL, "none"), 3);
    cr_expect_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "recompute"), 0)->valuestring, "full",
                     "the first layers full");
    cr_expect_eq(jnum_at(j, NULL, "memory_budget"), budget);
    cr_expect_leq(jnum_at(j, NULL, "modeled_peak_bytes"), budget);
    cr_expect_geq(jnum_at(j, NULL, "modeled_peak_bytes"), peak[2] * 0.9, "about every layer full's peak or more");
    cr_expect_geq(jnum_at(j, NULL, "recompute_plans"), 3);
    l = cJSON_GetObjectItem(j, "losses");
    lr = cJSON_GetObjectItem(ref, "losses");
    cr_assert_eq(cJSON_GetArraySize(l), 3);
    cr_assert_eq(cJSON_GetArraySize(lr), 3);
    for (int k = 0; k < 3; k++) {
        double a = cJSON_GetArrayItem(l, k)->valuedouble, b = cJSON_GetArrayItem(lr, k)->valuedouble;
        cr_expect(fabs(a - b) <= 1e-12 * fabs(b), "step %d: auto %.17g, none %.17g", k, a, b);
    }
    cJSON_Delete(j);
    cJSON_Delete(ref);
    /* a budget every layer full exceeds: refused before training, naming the least peak */
    cr_assert_eq(run_cli(TRAIN_ARGS " --recompute auto --memory-budget 1000", out, sizeof out), 1, "%s", out);
    cr_expect(strstr(out, "ldt train: --recompute auto: no mix fits --memory-budget 1000 bytes per rank: every layer "
                          "full has the least modeled peak"), "%s", out);
    cr_expect(strchr(out, '{') == NULL, "nothing trained: %s", out);
}

/* A pipeline (pp=2, four micro-batches) takes a per-layer list by global layer: each stage's
 * layers in their modes, the losses none's. */
Test(recompute, cli_train_pipeline_list) {
    static const char *const lists[2] = {"full,selective", "none,full"};
    cJSON *ref = run_json("train --mesh pp=2 --global-batch 4 --micro-batch 1 --layers 2 --hidden 16 --heads 2 --seq 16 "
                          "--steps 3 --dtype f64 --dropout 0.2 --sample 0 --json --recompute none", 0);
    const cJSON *lr = cJSON_GetObjectItem(ref, "losses");
    cr_assert_eq(cJSON_GetArraySize(lr), 3);
    for (int i = 0; i < 2; i++) {
        char args[512];
        cJSON *j, *l, *r;
        snprintf(args, sizeof args, "train --mesh pp=2 --global-batch 4 --micro-batch 1 --layers 2 --hidden 16 "
                 "--heads 2 --seq 16 --steps 3 --dtype f64 --dropout 0.2 --sample 0 --json --recompute %s", lists[i]);
        j = run_json(args, 0);
        l = cJSON_GetObjectItem(j, "losses");
        r = cJSON_GetObjectItem(j, "recompute");
        cr_assert_eq(cJSON_GetArraySize(l), 3);
        cr_expect_str_eq(cJSON_GetArrayItem(r, 0)->valuestring, i == 0 ? "full" : "none");
        cr_expect_str_eq(cJSON_GetArrayItem(r, 1)->valuestring, i == 0 ? "selective" : "full");
        for (int k = 0; k < 3; k++) {
            double a = cJSON_GetArrayItem(l, k)->valuedouble, b = cJSON_GetArrayItem(lr, k)->valuedouble;
            cr_expect(fabs(a - b) <= 1e-12 * fabs(b), "%s step %d: %.17g, none %.17g", lists[i], k, a, b);
        }
        cJSON_Delete(j);
    }
    cJSON_Delete(ref);
}
