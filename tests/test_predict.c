/* ldt predict (docs/prediction.md): the parts add up to the step, the MFU is the issue's
 * formula, the parameter, gradient and optimizer bytes per rank are the model's closed form,
 * the pipeline bubble is (P-1)/V stage times, the activations follow the recomputation as
 * Korthikanti et al. count them, the update, gradient accumulation, dp reduction and backward
 * communication are Megatron-LM's; bad input is refused with a message. Small GPTs on meta
 * meshes: each run plans two small graphs (a fraction of a second). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ldt/ldt.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

#define OUT_CAP (1 << 16)
static char g_out[OUT_CAP];

/* The cases a loop runs: all of them, or under LDT_TEST_SCALE < 1 (the sanitizer builds) every
 * other one, from the first (each plans a meta step: seconds under ASan). */
static size_t ncases(size_t n) { return ldt_test_scale() >= 1 ? n : (n + 1) / 2; }
#define NCASES(a) ncases(sizeof(a) / sizeof((a)[0]))

/* A small GPT: layers 8, hidden 64, heads 4, seq 32, vocab 256 (each divisible by tp up to 4). */
#define SMALL "predict --model gpt --layers 8 --hidden 64 --heads 4 --seq 32 --vocab 256 --profile a100-80g --json "

static cJSON *predict(const char *args) {
    char cmd[1024];
    cJSON *j;
    int rc;
    snprintf(cmd, sizeof cmd, SMALL "%s", args);
    rc = run(cmd, g_out, sizeof g_out, 0);
    cr_assert_eq(rc, 0, "ldt %s: exit %d\n%s", cmd, rc, g_out);
    j = cJSON_Parse(g_out);
    cr_assert_not_null(j, "ldt %s printed no JSON object: %s", cmd, g_out);
    return j;
}

static double num(const cJSON *o, const char *path) {
    char buf[128], *save = NULL, *k;
    const cJSON *v = o;
    snprintf(buf, sizeof buf, "%s", path);
    for (k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) v = cJSON_GetObjectItem(v, k);
    cr_assert(cJSON_IsNumber(v), "no number at %s", path);
    return v->valuedouble;
}

static void expect_rel(double got, double want, double tol, const char *what) {
    cr_expect(fabs(got - want) <= tol * fabs(want) + 1e-15, "%s: %.12g, expected %.12g", what, got, want);
}

Test(predict, parts_sum_to_the_step) {
    static const char *cases[] = {
        "--global-batch 8 --micro-batch 1 --mesh pp=2,dp=2,tp=2",
        "--global-batch 8 --micro-batch 2 --mesh pp=2,dp=2,tp=2 --recompute full",
        "--global-batch 16 --micro-batch 1 --mesh pp=2,tp=4 --recompute selective --sp --schedule interleaved:2",
        "--global-batch 4 --micro-batch 1 --mesh dp=4 --schedule gpipe --dtype f32",
        "--global-batch 8 --micro-batch 1 --mesh pp=4,dp=2 --schedule gpipe --recompute full",
    };
    static const char *parts[] = {"compute", "recompute", "exposed_comm", "bubble", "optimizer"};
    for (size_t i = 0; i < NCASES(cases); i++) {
        cJSON *j = predict(cases[i]);
        double step = num(j, "modeled_step_seconds"), sum = 0;
        for (size_t k = 0; k < 5; k++) {
            double v = num(cJSON_GetObjectItem(j, "parts"), parts[k]);
            cr_expect(v >= 0, "%s: part %s %g < 0", cases[i], parts[k], v);
            sum += v;
        }
        cr_expect(step > 0, "%s", cases[i]);
        expect_rel(sum, step, 1e-6, cases[i]);
        cr_expect(num(j, "parts.compute") > 0 && num(j, "parts.optimizer") > 0, "%s", cases[i]);
        if (strstr(cases[i], "recompute")) cr_expect(num(j, "parts.recompute") > 0, "%s", cases[i]);
        else cr_expect_eq(num(j, "parts.recompute"), 0, "%s: no recomputation asked", cases[i]);
        cJSON_Delete(j);
    }
}

Test(predict, mfu_and_tokens_per_second_follow_the_formula) {
    /* mfu = 72 B s L h^2 (1 + s/(6h) + V/(12hL)) / (step x GPUs x peak), B the global batch */
    static const struct {
        const char *args;
        double peak; /* the a100-80g profile's: bf16 312 TFLOP/s, f32 19.5 */
        double gpus;
    } cases[] = {{"--global-batch 8 --micro-batch 1 --mesh pp=2,dp=2,tp=2", 312e12, 8},
                 {"--global-batch 4 --micro-batch 2 --mesh tp=2 --dtype f32 --recompute full", 19.5e12, 2},
                 {"--global-batch 16 --micro-batch 1 --mesh pp=4,dp=2 --schedule interleaved:2", 312e12, 8}};
    const double B[] = {8, 4, 16}, s = 32, L = 8, h = 64, V = 256;
    for (size_t i = 0; i < NCASES(cases); i++) {
        cJSON *j = predict(cases[i].args);
        double step = num(j, "modeled_step_seconds");
        double flops = 72 * B[i] * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
        expect_rel(num(j, "mfu"), flops / (step * cases[i].gpus * cases[i].peak), 1e-6, cases[i].args);
        expect_rel(num(j, "tokens_per_second"), B[i] * s / step, 1e-6, cases[i].args);
        cr_expect_eq(num(j, "gpus"), cases[i].gpus, "%s", cases[i].args);
        cJSON_Delete(j);
    }
}

/* Parameter elements a rank of stage i holds (of P; layers l per stage, tp t): per layer the
 * q/k/v, c_fc weights and biases and both c_proj weights split t ways (12H^2 + 7H), the two
 * norms and two c_proj biases whole (6H); the first stage the vocab-parallel wte (V H / t) and
 * wpe (S H), the last the tied head's copy of wte and the final norm (2H). */
static double stage_elems(int i, int P, double l, double t, double H, double V, double S) {
    double n = l * (12 * H * H + 7 * H) / t + l * 6 * H;
    if (P == 1) return n + V * H / t + S * H + 2 * H;
    if (i == 0) n += V * H / t + S * H;
    if (i == P - 1) n += V * H / t + 2 * H;
    return n;
}

Test(predict, params_grads_optimizer_per_rank_are_the_closed_form) {
    static const struct {
        const char *args;
        int P;
        double t, e, opt; /* bytes per element: parameter, AdamW state (bf16: f32 master, m, v) */
    } cases[] = {{"--global-batch 8 --micro-batch 1 --mesh pp=2,dp=2,tp=2", 2, 2, 2, 12},
                 {"--global-batch 8 --micro-batch 1 --mesh pp=4,tp=2 --dtype f32", 4, 2, 4, 8},
                 {"--global-batch 8 --micro-batch 1 --mesh dp=2,tp=4 --sp --recompute selective", 1, 4, 2, 12},
                 {"--global-batch 8 --micro-batch 1 --mesh pp=2,tp=4 --dtype f16", 2, 4, 2, 12}};
    for (size_t c = 0; c < NCASES(cases); c++) {
        cJSON *j = predict(cases[c].args), *st = cJSON_GetObjectItem(j, "memory_by_stage"), *e;
        double most = 0;
        int i = 0;
        cr_assert_eq(cJSON_GetArraySize(st), cases[c].P, "%s: one entry per stage", cases[c].args);
        cJSON_ArrayForEach(e, st) {
            double n = stage_elems(i, cases[c].P, 8.0 / cases[c].P, cases[c].t, 64, 256, 32);
            cr_expect_eq(num(e, "stage"), i);
            cr_expect_eq(num(e, "params"), n * cases[c].e, "%s stage %d params", cases[c].args, i);
            cr_expect_eq(num(e, "grads"), n * cases[c].e, "%s stage %d grads", cases[c].args, i);
            cr_expect_eq(num(e, "optimizer"), n * cases[c].opt, "%s stage %d optimizer", cases[c].args, i);
            cr_expect_eq(num(e, "peak"), num(e, "params") + num(e, "grads") + num(e, "optimizer") +
                                             num(e, "activations_peak"), "%s stage %d", cases[c].args, i);
            if (n > most) most = n;
            i++;
        }
        cr_expect_eq(num(j, "memory_per_rank.params"), most * cases[c].e, "%s: the busiest stage's", cases[c].args);
        cr_expect_eq(num(j, "memory_per_rank.optimizer"), most * cases[c].opt, "%s", cases[c].args);
        cJSON_Delete(j);
    }
}

Test(predict, bubble_is_p_minus_1_over_v_stage_times) {
    /* step = micro-batches x stage time + bubble + the step's own parts (dp reduction, the
     * tied embedding's reduction, the update); bubble = (P - 1) / V stage times */
    static const struct {
        const char *args;
        double P, V, nmb;
    } cases[] = {{"--global-batch 8 --micro-batch 1 --mesh pp=4,dp=2", 4, 1, 4},
                 {"--global-batch 8 --micro-batch 1 --mesh pp=4,dp=2 --schedule interleaved:2", 4, 2, 4},
                 {"--global-batch 8 --micro-batch 1 --mesh pp=4,dp=2 --schedule gpipe", 4, 1, 4},
                 {"--global-batch 4 --micro-batch 1 --mesh pp=1,tp=2", 1, 1, 4}};
    double bubble_1f1b = 0;
    for (size_t i = 0; i < NCASES(cases); i++) {
        cJSON *j = predict(cases[i].args);
        double stage = num(j, "stage_seconds"), bubble = num(j, "parts.bubble");
        double own = num(j, "exposed_comm_parts.dp") + num(j, "exposed_comm_parts.embedding") +
                     num(j, "parts.optimizer");
        cr_expect_eq(num(j, "micro_batches"), cases[i].nmb, "%s", cases[i].args);
        expect_rel(bubble, (cases[i].P - 1) / cases[i].V * stage, 1e-7, cases[i].args); /* %.9g in the JSON */
        expect_rel(num(j, "modeled_step_seconds"), cases[i].nmb * stage + bubble + own, 1e-6, cases[i].args);
        if (i == 0) bubble_1f1b = bubble;
        if (i == 1) /* interleaving: V times the send/recv a micro-batch, and a bubble near half */
            cr_expect(bubble < 0.75 * bubble_1f1b, "interleaved:2 bubble %g against 1f1b's %g", bubble, bubble_1f1b);
        if (cases[i].P == 1) cr_expect_eq(bubble, 0);
        cJSON_Delete(j);
    }
}

static double stage_saved(const cJSON *j, int i) {
    return num(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "memory_by_stage"), i), "activations_saved");
}

Test(predict, activations_follow_the_recomputation) {
    /* first stage of pp=4 under 1F1B: 4 micro-batches in flight, 2 layers each (no head).
     * Full recomputation keeps each layer's input, 2sbh bytes (16-bit, whole on each tp rank
     * without sp); no recomputation keeps the attention core's softmax output, dropout mask
     * and output beyond selective's: 5as^2b/t bytes a layer (Korthikanti et al. 2022). */
    const double s = 32, b = 2, h = 64, a = 4, t = 2, layers = 2, in_flight = 4;
    cJSON *full = predict("--global-batch 16 --micro-batch 2 --mesh pp=4,tp=2 --recompute full");
    cJSON *sel = predict("--global-batch 16 --micro-batch 2 --mesh pp=4,tp=2 --recompute selective");
    cJSON *none = predict("--global-batch 16 --micro-batch 2 --mesh pp=4,tp=2");
    cJSON *gpipe = predict("--global-batch 16 --micro-batch 2 --mesh pp=4,tp=2 --recompute full --schedule gpipe");
    cr_expect_eq(num(cJSON_GetArrayItem(cJSON_GetObjectItem(full, "memory_by_stage"), 0), "in_flight"), in_flight);
    cr_expect_eq(stage_saved(full, 0), in_flight * layers * 2 * s * b * h);
    cr_expect_eq(stage_saved(none, 0) - stage_saved(sel, 0), in_flight * layers * 5 * a * s * s * b / t);
    /* selective keeps what the planned step keeps: the layer's saved activations, per layer
     * sbh(8 + 24/t) bytes with tensor parallelism and no dropout masks (docs/planner.md) */
    cr_expect_eq(num(sel, "layer.activations_saved"), s * b * h * (8 + 24 / t));
    cr_expect_eq(stage_saved(sel, 0), in_flight * layers * s * b * h * (8 + 24 / t));
    /* GPipe keeps every micro-batch (8 of them) where 1F1B keeps P - i */
    cr_expect_eq(stage_saved(gpipe, 0), 8 * layers * 2 * s * b * h);
    cJSON_Delete(full);
    cJSON_Delete(sel);
    cJSON_Delete(none);
    cJSON_Delete(gpipe);
}

/* Each refusal: exit 2 and a message naming what was wrong and what was expected. */
static void refused(const char *args, const char *msg) {
    char cmd[1024];
    int rc;
    snprintf(cmd, sizeof cmd, "predict --model gpt --layers 8 --hidden 64 --heads 4 --seq 32 --vocab 256 "
                              "--profile a100-80g %s", args);
    rc = run_cli(cmd, g_out, sizeof g_out);
    cr_expect_eq(rc, 2, "ldt %s: exit %d, expected 2\n%s", cmd, rc, g_out);
    cr_expect(strstr(g_out, msg) != NULL, "ldt %s: '%s' not in:\n%s", cmd, msg, g_out);
}

/* The update as Megatron-LM (2022) runs it, pass by pass over the rank's N parameter elements
 * (docs/prediction.md, "The update"), each priced by the profile's roofline; and the gradient
 * added into the buffer every micro-batch (f16: 6 bytes an element, f32: 12, bf16: none, its
 * weight-gradient GEMMs accumulate in f32). One stage (P = 1), so N is the params' bytes over e. */
Test(predict, update_is_megatrons_passes) {
    static const struct {
        const char *args;
        double e, acc;           /* parameter bytes; accumulation bytes an element per micro-batch */
        double ew[7], red;       /* elementwise passes' bytes an element (0 ends), the norm's */
        double nmb;
    } cases[] = {
        {"--global-batch 4 --micro-batch 1 --mesh tp=2 --dtype f16", 2, 6, {2, 4, 6, 8, 28, 6, 0}, 4, 4},
        {"--global-batch 4 --micro-batch 2 --mesh tp=2", 2, 0, {4, 8, 28, 6, 0}, 4, 2},
        {"--global-batch 2 --micro-batch 1 --mesh tp=2 --dtype f32", 4, 12, {4, 8, 28, 0}, 4, 2},
    };
    ldt_cost_model cm;
    cr_assert_eq(ldt_cost_model_preset("a100-80g", &cm), LDT_OK);
    for (size_t c = 0; c < NCASES(cases); c++) {
        cJSON *j = predict(cases[c].args);
        double n = num(j, "memory_per_rank.params") / cases[c].e, want = 0, acc = 0;
        for (int k = 0; cases[c].ew[k] > 0; k++)
            want += ldt_cost_op_seconds(&cm, LDT_OPCLASS_ELEMENTWISE, LDT_F32, 0, cases[c].ew[k] * n, 1);
        /* bandwidth-bound: a dozen FLOPs an element at most (Adam) against 19.5 TFLOP/s is
         * well under its bytes against 2,039 GB/s, so the FLOPs do not enter the price */
        want += ldt_cost_op_seconds(&cm, LDT_OPCLASS_REDUCE, LDT_F32, 0, cases[c].red * n, 1);
        expect_rel(num(j, "parts.optimizer"), want, 1e-6, cases[c].args);
        if (cases[c].acc > 0)
            acc = cases[c].nmb * ldt_cost_op_seconds(&cm, LDT_OPCLASS_ELEMENTWISE, LDT_F32, n, cases[c].acc * n, 1);
        expect_rel(num(j, "grad_accumulation_seconds"), acc, 1e-6, cases[c].args);
        cJSON_Delete(j);
    }
}

/* The dp reduction moves Megatron's gradient buffer: 16-bit with f16, f32 with bf16 (f32
 * accumulation) as with f32, so bf16's equals f32's (same elements, same bytes) and f16's is less. */
Test(predict, dp_reduction_moves_the_gradient_buffer) {
    const char *base = "--global-batch 4 --micro-batch 1 --mesh dp=2,tp=2 --dtype ";
    double dp[3];
    const char *dts[3] = {"f16", "bf16", "f32"};
    for (int i = 0; i < 3; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s%s", base, dts[i]);
        cJSON *j = predict(args);
        dp[i] = num(j, "exposed_comm_parts.dp");
        cJSON_Delete(j);
    }
    cr_expect(dp[0] > 0 && dp[0] < dp[1], "f16 %g, bf16 %g", dp[0], dp[1]);
    expect_rel(dp[1], dp[2], 1e-9, "bf16's f32 buffer against f32's");
}

/* Megatron's backward tensor-parallel communication: without sp the conjugates of the forward's
 * two all_reduces (as much as the forward's); with sp the conjugates of its two all_gathers and
 * two reduce_scatters and the two norm outputs gathered again for the weight gradients (4
 * all_gathers and 2 reduce_scatters: 1.5 times the forward's), at micro-batch 2 too, where the
 * planner keeps the gathered outputs instead of gathering them again. */
Test(predict, backward_comm_is_megatrons) {
    static const struct {
        const char *args;
        double ratio;
    } cases[] = {{"--global-batch 4 --micro-batch 2 --mesh tp=4", 1.0},
                 {"--global-batch 4 --micro-batch 2 --mesh tp=4 --sp", 1.5},
                 {"--global-batch 4 --micro-batch 1 --mesh tp=4 --sp --recompute selective", 1.5}};
    for (size_t c = 0; c < NCASES(cases); c++) {
        cJSON *j = predict(cases[c].args);
        double f = num(j, "layer.forward_comm_seconds"), b = num(j, "layer.backward_comm_seconds");
        cr_expect(f > 0, "%s", cases[c].args);
        cr_expect(b >= cases[c].ratio * f * (1 - 1e-9), "%s: backward %g, forward %g", cases[c].args, b, f);
        cr_expect(b >= num(j, "layer.plan_comm_seconds") - f - 1e-15, "%s: never less than the plan's", cases[c].args);
        cJSON_Delete(j);
    }
}

Test(predict, refusals_name_the_problem) {
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2,xx=2", "--mesh 'pp=2,xx=2': expected pp=P,dp=D,tp=T");
    refused("--global-batch 8 --micro-batch 1 --mesh tp=2,pp=2", "--mesh 'tp=2,pp=2': expected pp=P,dp=D,tp=T");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=0", "--mesh 'pp=0': expected pp=P,dp=D,tp=T");
    refused("--global-batch 8 --micro-batch 1 --mesh dp=2,", "expected pp=P,dp=D,tp=T");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=65536,dp=65536,tp=2", "has 8589934592 ranks, expected at most 2^32");
    refused("--global-batch 4 --micro-batch 8 --mesh dp=2", "--global-batch 4 is not divisible by --micro-batch 8 x dp 2");
    refused("--global-batch 6 --micro-batch 2 --mesh dp=2",
            "--global-batch 6 is not divisible by --micro-batch 2 x dp 2");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=3", "--layers 8 is not divisible by pp 3 x 1 virtual stages");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --schedule interleaved:3",
            "--layers 8 is not divisible by pp 2 x 3 virtual stages");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --schedule zb-h1",
            "--schedule zb-h1, expected gpipe, 1f1b or interleaved:V");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --schedule interleaved:x",
            "--schedule interleaved:x, expected gpipe, 1f1b or interleaved:V");
    refused("--global-batch 6 --micro-batch 1 --mesh pp=4 --schedule interleaved:2",
            "needs pp >= 2 and the micro-batches per replica (6) divisible by pp 4");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --recompute some",
            "--recompute some, expected none, selective or full");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --dtype f64", "--dtype f64, expected bf16, f16 or f32");
    refused("--global-batch 8 --mesh pp=2", "--micro-batch is required");
    refused("--global-batch 8 --micro-batch 1 --mesh pp=2 --model mlp", "--model mlp, expected gpt");
}

Test(predict, hidden_not_divisible_by_heads_is_refused) {
    char cmd[512];
    int rc;
    snprintf(cmd, sizeof cmd, "predict --model gpt --layers 2 --hidden 66 --heads 4 --seq 8 --vocab 64 "
                              "--global-batch 2 --micro-batch 1 --mesh tp=2 --profile a100-80g");
    rc = run_cli(cmd, g_out, sizeof g_out);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(g_out, "--hidden 66 is not divisible by --heads 4") != NULL, "%s", g_out);
}

/* The planned step's split (ldt_plan_step): kernels and moves add up to the modeled step,
 * the op classes to the kernels, and the forward is part of each. */
Test(predict, plan_step_splits_its_time) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_model *m;
    ldt_plan *plan;
    ldt_plan_step st;
    ldt_cost_model cm;
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_tensor *loss, *ps[64], *gs[64];
    double classes = 0, fclasses = 0;
    int np;
    cr_assert_eq(ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_META, &mesh), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("a100-80g", &cm), LDT_OK);
    co.mesh = mesh;
    po.cost = &cm;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK);
    cr_assert_eq(ldt_model_pin(m, "megatron"), LDT_OK);
    cr_assert_not_null(loss = ldt_model_forward(m));
    np = ldt_model_nparams(m);
    cr_assert(np <= 64);
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    cr_assert_eq(ldt_grad(loss, ps, np, gs), LDT_OK);
    cr_assert_eq(ldt_plan_create(ctx, &po, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_step_get(plan, loss, &st), LDT_OK);
    cr_expect(st.compute_seconds > 0 && st.comm_seconds > 0);
    expect_rel(st.compute_seconds + st.comm_seconds, st.modeled_step_seconds, 1e-9, "kernels + moves");
    for (int c = 0; c < LDT_OPCLASS_COUNT; c++) {
        cr_expect(st.forward_class_seconds[c] <= st.class_seconds[c] + 1e-15);
        classes += st.class_seconds[c], fclasses += st.forward_class_seconds[c];
    }
    expect_rel(classes, st.compute_seconds, 1e-9, "op classes");
    expect_rel(fclasses, st.forward_compute_seconds, 1e-9, "forward op classes");
    cr_expect(st.class_seconds[LDT_OPCLASS_MATMUL] > 0 && st.forward_class_seconds[LDT_OPCLASS_MATMUL] > 0);
    cr_expect(st.forward_compute_seconds > 0 && st.forward_compute_seconds < st.compute_seconds);
    cr_expect(st.forward_comm_seconds > 0 && st.forward_comm_seconds < st.comm_seconds);
    ldt_plan_destroy(plan);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* ldt-bench gpu_gemm, the measurements the profiles' efficiency curves stand for
 * (docs/prediction.md): without a device it measures nothing and exits 0; with one (the CUDA
 * emulator of an LDT_CUDA=EMU build) every figure is its FLOPs or bytes over its time, by hand,
 * and the squares, the checks' twelve layer GEMMs and the three bandwidth kernels are there. */
Test(predict, gpu_gemm_bench_figures) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s gpu_gemm --quick --json 2>/dev/null", LDT_BENCH_PATH);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t got = fread(g_out, 1, OUT_CAP - 1, f);
    g_out[got] = '\0';
    int st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ldt-bench gpu_gemm failed: %s", g_out);
    cJSON *j = cJSON_Parse(g_out);
    cr_assert_not_null(j, "ldt-bench printed no JSON object: %s", g_out);
    const cJSON *res = cJSON_GetObjectItem(j, "results");
    cr_assert(cJSON_IsArray(res));
    int n = cJSON_GetArraySize(res);
    if (ldt_cuda_device_count() == 0) {
        cr_expect_eq(n, 0, "no device, yet %d results", n);
        cJSON_Delete(j);
        return;
    }
    int squares[3] = {0, 0, 0}, layers = 0, kernels = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, res) {
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
        const cJSON *p = cJSON_GetObjectItem(r, "params");
        double v = num(r, "value"), ns = num(p, "ns");
        cr_assert(ns > 0 && v > 0, "%s: value %g in %g ns", name, v, ns);
        if (strcmp(name, "gemm_tflops") == 0) {
            double m = num(p, "m"), nn = num(p, "n"), k = num(p, "k");
            expect_rel(v, 2 * m * nn * k / ns / 1e3, 1e-3, "gemm_tflops = 2mnk / time");
            const char *dt = cJSON_GetObjectItem(p, "dtype")->valuestring;
            if (cJSON_GetObjectItem(p, "layer")) layers++;
            else squares[strcmp(dt, "bf16") == 0 ? 0 : strcmp(dt, "f16") == 0 ? 1 : 2]++;
        } else if (strcmp(name, "membw_gbps") == 0) {
            const char *kn = cJSON_GetObjectItem(p, "kernel")->valuestring;
            double bytes = num(p, "bytes"), e = (strcmp(kn, "add") == 0 ? 3 : 2) * 2;
            expect_rel(bytes, e * num(p, "rows") * num(p, "cols"), 1e-12, "membw bytes");
            expect_rel(v, bytes / ns, 1e-3, "membw_gbps = bytes / time");
            kernels++;
        } else {
            cr_expect_str_eq(name, "gemm_efficiency");
        }
    }
    cr_expect(squares[0] >= 2 && squares[1] >= 2 && squares[2] >= 2, "squares %d %d %d",
              squares[0], squares[1], squares[2]);
    cr_expect_eq(layers, 12, "the 22B layer's 4 linears x fwd, dgrad, wgrad: %d", layers);
    cr_expect_eq(kernels, 3, "add, layer_norm, softmax: %d", kernels);
    cJSON_Delete(j);
}
