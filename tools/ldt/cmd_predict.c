/* ldt predict: the modeled step time and memory per rank of a large GPT training job on a
 * pp x dp x tp mesh, before it has the GPUs (docs/prediction.md). One pipeline stage's
 * training step (forward and backward of one micro-batch) is traced and planned on a meta
 * dp x tp mesh with Megatron pins, at one and two layers: their difference is one layer's
 * figures (kernels, collectives, saved activations, parameters), the rest the embedding and
 * head. The step is composed from them: micro-batches, recomputation, the pipeline bubble, the
 * send/recv between stages, the data-parallel gradient reduction and the AdamW update. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 17
#define CMD "predict"

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "gpt (the only model predicted)", NULL},
        {"layers", 1, "transformer blocks L (required)", NULL},
        {"hidden", 1, "hidden size H (required)", NULL},
        {"heads", 1, "attention heads A (required)", NULL},
        {"seq", 1, "sequence length S (required)", NULL},
        {"vocab", 1, "vocabulary V (required)", NULL},
        {"global-batch", 1, "sequences per step G (required)", NULL},
        {"micro-batch", 1, "sequences per micro-batch m (required; G divisible by m x dp)", NULL},
        {"mesh", 1, "pp=P,dp=D,tp=T (dims in that order, any left out are 1; required)", NULL},
        {"sp", 0, "sequence parallelism over tp (pins megatron-sp)", NULL},
        {"recompute", 1, "none, selective (the attention core) or full (every layer) (default none)", NULL},
        {"schedule", 1, "gpipe, 1f1b or interleaved:V (default 1f1b; L divisible by P x V)", NULL},
        {"dtype", 1, "bf16, f16 or f32 (default bf16: bf16 weights, activations and gradients, f32 "
                     "master weights and Adam states; f16: the same bytes, with Megatron's --fp16 gradient "
                     "bookkeeping)", NULL},
        CLI_PROFILE_FLAG,
        {"json", 0, "one JSON object: modeled_step_seconds, parts, tokens_per_second, mfu, "
                    "memory_per_rank, memory_by_stage (docs/cli.md)", NULL},
        {"plan-limit", 1, "work limit of the exact search of each stage plan (default: the planner's)", NULL},
        {"help", 0, "this help", NULL},
    };
    return flags;
}

/* One planned stage step (forward and backward of one micro-batch, no update): busiest rank. */
typedef struct stage_fig {
    double compute, comm, fwd_compute, fwd_comm, gemm, fwd_gemm, plan_seconds;
    int64_t saved, param_elems;
} stage_fig;

typedef enum { RC_NONE, RC_SELECTIVE, RC_FULL } recompute_kind;
typedef enum { SCHED_GPIPE, SCHED_1F1B, SCHED_INTERLEAVED } sched_kind;

/* --mesh pp=P,dp=D,tp=T: the three sizes (1 where left out). Returns 0, or prints why, 2. */
static int parse_mesh(const char *text, int64_t dims[3]) {
    static const char *names[3] = {"pp", "dp", "tp"};
    const char *p = text;
    int next = 0;
    dims[0] = dims[1] = dims[2] = 1;
    if (!*p) goto bad;
    while (*p) {
        int k = -1;
        char *end = NULL;
        long long v;
        for (int i = 0; i < 3; i++)
            if (strncmp(p, names[i], 2) == 0 && p[2] == '=') k = i;
        if (k < 0 || k < next) goto bad;
        p += 3;
        if (*p < '0' || *p > '9') goto bad;
        v = strtoll(p, &end, 10);
        if (v < 1 || v > (1LL << 24) || (*end && *end != ',')) goto bad;
        dims[k] = v;
        next = k + 1;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) goto bad;
    }
    return 0;
bad:
    fprintf(stderr, "ldt " CMD ": --mesh '%s': expected pp=P,dp=D,tp=T (named dims pp, dp, tp in that "
                    "order, each a size >= 1, any left out being 1)\n", text);
    return 2;
}

/* The stage's forward and backward at cfg (batch = micro-batch x dp) on the meta mesh,
 * planned with Megatron pins; the busiest rank's figures. */
static ldt_status plan_stage(const ldt_mesh *mesh, const ldt_cost_model *cm, const ldt_model_config *cfg,
                             const char *pins, int64_t plan_limit, stage_fig *out) {
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_plan *plan = NULL;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_tensor *loss, **ps = NULL, **gs = NULL;
    ldt_plan_step *step = NULL;
    ldt_plan_memory pm;
    ldt_status st;
    int np;
    co.mesh = (ldt_mesh *)mesh;
    po.cost = cm;
    po.plan_limit = plan_limit;
    memset(out, 0, sizeof *out);
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK || (st = ldt_model_create(ctx, "gpt", cfg, &model)) != LDT_OK ||
        (st = ldt_model_pin(model, pins)) != LDT_OK)
        goto done;
    if (!(loss = ldt_model_forward(model))) {
        st = ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
        goto done;
    }
    np = ldt_model_nparams(model);
    ps = malloc((size_t)np * sizeof *ps);
    gs = malloc((size_t)np * sizeof *gs);
    step = malloc(sizeof *step);
    if (!ps || !gs || !step) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, CMD ": out of memory");
        goto done;
    }
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(model, i, NULL);
    if ((st = ldt_grad(loss, ps, np, gs)) != LDT_OK || (st = ldt_plan_create(ctx, &po, &plan)) != LDT_OK ||
        (st = ldt_plan_step_get(plan, loss, step)) != LDT_OK || (st = ldt_plan_memory_get(plan, &pm)) != LDT_OK)
        goto done;
    out->compute = step->compute_seconds;
    out->comm = step->comm_seconds;
    out->fwd_compute = step->forward_compute_seconds;
    out->fwd_comm = step->forward_comm_seconds;
    out->gemm = step->class_seconds[LDT_OPCLASS_MATMUL];
    out->fwd_gemm = step->forward_class_seconds[LDT_OPCLASS_MATMUL];
    out->saved = step->saved_bytes;
    out->param_elems = pm.per_rank_param_elems_max;
    out->plan_seconds = ldt_plan_seconds(plan);
done:
    free(ps);
    free(gs);
    free(step);
    ldt_plan_destroy(plan);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    return st;
}

/* One layer's kernels outside its GEMMs, per rank and micro-batch, as Megatron-LM runs them
 * (fused), each priced through the profile's roofline by op class (docs/prediction.md); and
 * the attention GEMMs of the traced step, to take them out of the plan's matmul seconds. */
typedef struct layer_prices {
    double core_fwd;    /* attention core: QK^T, fused scale-mask-softmax, dropout, attention over V */
    double core_bwd;    /* its backward: dV, dP, dropout, softmax backward, dQ, dK */
    double fused_fwd;   /* 2 layer norms, bias-GeLU, 2 bias-dropout-adds */
    double fused_bwd;   /* their backward, the residual gradient adds and the bias gradients */
    double traced_attn_fwd; /* the plan's sdpa kernel */
    double traced_attn_bwd; /* the plan's five attention GEMMs of the backward */
    double core_stored; /* what the core keeps without recomputation: softmax output, dropout
                           mask and output (5as^2b bytes at 16 bits) */
} layer_prices;

static double op_s(const ldt_cost_model *cm, ldt_op_class c, int dt, double flops, double bytes) {
    return ldt_cost_op_seconds(cm, c, dt, flops, bytes, 1);
}

static layer_prices price_layer(const ldt_cost_model *cm, int dt, double e, double b, double s, double h,
                                double heads_loc, double d, double t, int sp) {
    layer_prices p;
    double sc = b * heads_loc * s * s;    /* attention scores on a rank */
    double qkv = b * heads_loc * s * d;   /* one of q, k, v on a rank */
    double nh = b * s * h / (sp ? t : 1); /* the residual stream on a rank */
    double nf = b * s * 4 * h / t;        /* the MLP's hidden activation on a rank */
    double gemm = op_s(cm, LDT_OPCLASS_MATMUL, dt, 2 * b * heads_loc * s * s * d, (2 * qkv + sc) * e);
    ldt_op_class gelu = cm->eff[LDT_OPCLASS_TRANSCENDENTAL].npoints > 0 ? LDT_OPCLASS_TRANSCENDENTAL
                                                                          : LDT_OPCLASS_ELEMENTWISE;
    double softmax_f = op_s(cm, LDT_OPCLASS_SOFTMAX, dt, 5 * sc, 2 * sc * e),
           softmax_b = op_s(cm, LDT_OPCLASS_SOFTMAX, dt, 5 * sc, 3 * sc * e),
           dropout_f = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, sc, (2 * e + 1) * sc),
           dropout_b = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, sc, (2 * e + 1) * sc);
    double ln_f = op_s(cm, LDT_OPCLASS_NORM, dt, 8 * nh, 2 * nh * e),
           ln_b = op_s(cm, LDT_OPCLASS_NORM, dt, 8 * nh, 3 * nh * e),
           bda_f = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, 2 * nh, (3 * e + 1) * nh),
           bda_b = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, nh, (2 * e + 1) * nh),
           resid_b = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, nh, 3 * e * nh),
           gelu_f = op_s(cm, gelu, dt, nf, 2 * nf * e), gelu_b = op_s(cm, gelu, dt, nf, 3 * nf * e),
           bias_g = op_s(cm, LDT_OPCLASS_REDUCE, dt, nf + 3 * b * s * h / t + 2 * nh,
                         (nf + 3 * b * s * h / t + 2 * nh) * e);
    p.core_fwd = gemm + softmax_f + dropout_f + gemm;
    p.core_bwd = 2 * gemm + dropout_b + softmax_b + 2 * gemm;
    /* Megatron-LM's ColumnParallelLinear adds its bias in a kernel of its own unless the bias
     * is fused further on (skip_bias_add): of the four linears only the q/k/v one does */
    double qkv_bias = op_s(cm, LDT_OPCLASS_ELEMENTWISE, dt, 3 * b * s * h / t, 2 * e * 3 * b * s * h / t);
    p.fused_fwd = 2 * ln_f + gelu_f + 2 * bda_f + qkv_bias;
    p.fused_bwd = 2 * ln_b + gelu_b + 2 * bda_b + 2 * resid_b + bias_g;
    p.traced_attn_fwd = op_s(cm, LDT_OPCLASS_MATMUL, dt, 4 * b * heads_loc * s * s * d, 4 * qkv * e);
    p.traced_attn_bwd = 5 * gemm;
    p.core_stored = (2 * e + 1) * sc;
    return p;
}

/* The update and the gradient bookkeeping as Megatron-LM (2022: local DDP with a contiguous
 * gradient buffer, Float16OptimizerWithFloat16Params or FP32Optimizer, Apex FusedAdam) runs
 * them, each a pass over the rank's n parameter elements (docs/prediction.md, "The update"):
 * bytes per element read and written, and its op class. `per_mb` are the passes every
 * micro-batch's backward adds (the gradient added into the buffer by a hook; bf16 has the
 * weight-gradient GEMM accumulate into its f32 buffer instead). Returns the step's seconds. */
typedef struct update_pass {
    ldt_op_class c;
    double bytes, flops;
} update_pass;

static double update_seconds(const ldt_cost_model *cm, ldt_dtype dt, double n, double *per_mb) {
    /* f16 (--fp16): 16-bit gradient buffer, loss scaling, master weights */
    static const update_pass f16[] = {
        {LDT_OPCLASS_ELEMENTWISE, 2, 1},  /* zero the gradient buffer */
        {LDT_OPCLASS_ELEMENTWISE, 4, 1},  /* the buffer divided by dp (every step, dp = 1 too) */
        {LDT_OPCLASS_ELEMENTWISE, 6, 1},  /* gradients to f32 (.float()) */
        {LDT_OPCLASS_ELEMENTWISE, 8, 2},  /* unscale and the inf/nan check */
        {LDT_OPCLASS_REDUCE, 4, 2},       /* the gradient norm (multi_tensor_l2norm) */
        {LDT_OPCLASS_ELEMENTWISE, 28, 12}, /* Adam: read g, p, m, v; write p, m, v */
        {LDT_OPCLASS_ELEMENTWISE, 6, 1},  /* master weights to the 16-bit parameters */
    };
    /* bf16: f32 gradient buffer (forced), no loss scaler, master weights */
    static const update_pass bf16[] = {
        {LDT_OPCLASS_ELEMENTWISE, 4, 1}, {LDT_OPCLASS_ELEMENTWISE, 8, 1}, {LDT_OPCLASS_REDUCE, 4, 2},
        {LDT_OPCLASS_ELEMENTWISE, 28, 12}, {LDT_OPCLASS_ELEMENTWISE, 6, 1},
    };
    /* f32: f32 parameters and buffer, no master copy */
    static const update_pass f32[] = {
        {LDT_OPCLASS_ELEMENTWISE, 4, 1}, {LDT_OPCLASS_ELEMENTWISE, 8, 1}, {LDT_OPCLASS_REDUCE, 4, 2},
        {LDT_OPCLASS_ELEMENTWISE, 28, 12},
    };
    const update_pass *ps = dt == LDT_F16 ? f16 : dt == LDT_BF16 ? bf16 : f32;
    size_t np = dt == LDT_F16 ? sizeof f16 / sizeof f16[0] : dt == LDT_BF16 ? sizeof bf16 / sizeof bf16[0]
                                                                         : sizeof f32 / sizeof f32[0];
    double t = 0, acc = dt == LDT_F16 ? 6 : dt == LDT_BF16 ? 0 : 12; /* main_grad.add_(grad) */
    for (size_t i = 0; i < np; i++) t += ldt_cost_op_seconds(cm, ps[i].c, LDT_F32, ps[i].flops * n, ps[i].bytes * n, 1);
    *per_mb = acc > 0 ? ldt_cost_op_seconds(cm, LDT_OPCLASS_ELEMENTWISE, LDT_F32, n, acc * n, 1) : 0;
    return t;
}

/* The link between consecutive pipeline stages: stage boundaries cross a node when some rank
 * r of a stage and its peer r + D*T lie in different nodes (ranks packed ranks_per_node to a
 * node, the last mesh dim fastest). */
static ldt_link pp_link(const ldt_cost_model *cm, int64_t P, int64_t stage_ranks, int *across) {
    *across = 0;
    if (cm->nlinks > 0) return ldt_cost_model_link(cm, 3, 0);
    if (cm->ranks_per_node <= 0 || P * stage_ranks <= cm->ranks_per_node) return cm->node_link;
    for (int64_t r = 0; r < (P - 1) * stage_ranks && !*across; r++)
        *across = r / cm->ranks_per_node != (r + stage_ranks) / cm->ranks_per_node;
    return *across ? cm->network_link : cm->node_link;
}

/* In-flight micro-batch chunks (each of the stage's L/(P V) layers) that stage i keeps
 * activations for at its peak: GPipe every micro-batch, 1F1B P - i, interleaved Megatron's
 * warm-up (P - i - 1) 2 + (V - 1) P, plus one; never more than the step has. */
static int64_t in_flight_chunks(sched_kind sk, int64_t P, int64_t V, int64_t i, int64_t nmb) {
    int64_t n;
    if (sk == SCHED_GPIPE) return nmb;
    if (sk == SCHED_1F1B) n = P - i;
    else n = (P - i - 1) * 2 + (V - 1) * P + 1;
    return n < nmb * V ? n : nmb * V;
}

int cmd_predict(int argc, char **argv) {
    cli_flag *f = flag_table();
    int64_t L = 0, H = 0, A = 0, S = 0, Vocab = 0, G = 0, mb = 0, dims[3], plan_limit = 0;
    int64_t P, D, T, Vv = 1, nmb, lps, lpc, nstage;
    const char *rc_text, *sched_text, *dt_text, *pins;
    recompute_kind rk = RC_NONE;
    sched_kind sk = SCHED_1F1B;
    ldt_dtype dt = LDT_BF16, plan_dt;
    ldt_mesh *mesh = NULL;
    ldt_cost_model cm;
    ldt_model_config cfg;
    stage_fig one, two;
    char mtext[128];
    int rc = 1;
    if (cli_parse(CMD, argc, argv, f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt predict --model gpt --layers L --hidden H --heads A --seq S --vocab V\n"
               "                   --global-batch G --micro-batch m --mesh pp=P,dp=D,tp=T [--sp]\n"
               "                   [--recompute none|selective|full] [--schedule gpipe|1f1b|interleaved:V]\n"
               "                   --profile a100-80g|h100-80g|FILE [--dtype bf16|f16|f32] [--json]\n\n"
               "Predicts the step time and memory per rank of training the GPT on the mesh: one\n"
               "pipeline stage's forward and backward of a micro-batch is traced and planned on a\n"
               "meta dp x tp mesh with Megatron pins, and the step composed from it (micro-batches\n"
               "G / (m D), recomputation, pipeline bubble, send/recv between stages, the dp gradient\n"
               "reduction, the AdamW update) under the profile (docs/prediction.md).\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    if (cli_has(f, NFLAGS, "model") && strcmp(cli_get(f, NFLAGS, "model"), "gpt") != 0) {
        fprintf(stderr, "ldt " CMD ": --model %s, expected gpt (the only model predicted)\n", cli_get(f, NFLAGS, "model"));
        return 2;
    }
    {
        static const char *req[] = {"layers", "hidden", "heads", "seq", "vocab", "global-batch", "micro-batch", "mesh"};
        for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
            if (!cli_has(f, NFLAGS, req[i])) {
                fprintf(stderr, "ldt " CMD ": --%s is required (see ldt predict --help)\n", req[i]);
                return 2;
            }
    }
    if (cli_int(CMD, f, NFLAGS, "layers", 0, 1, &L) || cli_int(CMD, f, NFLAGS, "hidden", 0, 1, &H) ||
        cli_int(CMD, f, NFLAGS, "heads", 0, 1, &A) || cli_int(CMD, f, NFLAGS, "seq", 0, 1, &S) ||
        cli_int(CMD, f, NFLAGS, "vocab", 0, 1, &Vocab) || cli_int(CMD, f, NFLAGS, "global-batch", 0, 1, &G) ||
        cli_int(CMD, f, NFLAGS, "micro-batch", 0, 1, &mb) || cli_int(CMD, f, NFLAGS, "plan-limit", 0, 1, &plan_limit))
        return 2;
    if (H % A != 0) {
        fprintf(stderr, "ldt " CMD ": --hidden %lld is not divisible by --heads %lld (expected a whole head size)\n",
                (long long)H, (long long)A);
        return 2;
    }
    if (parse_mesh(cli_get(f, NFLAGS, "mesh"), dims)) return 2;
    P = dims[0], D = dims[1], T = dims[2];
    if ((double)P * (double)D * (double)T > (double)(1LL << 32)) {
        fprintf(stderr, "ldt " CMD ": --mesh %s has %.0f ranks, expected at most 2^32\n", cli_get(f, NFLAGS, "mesh"),
                (double)P * (double)D * (double)T);
        return 2;
    }
    rc_text = cli_has(f, NFLAGS, "recompute") ? cli_get(f, NFLAGS, "recompute") : "none";
    if (strcmp(rc_text, "none") == 0) rk = RC_NONE;
    else if (strcmp(rc_text, "selective") == 0) rk = RC_SELECTIVE;
    else if (strcmp(rc_text, "full") == 0) rk = RC_FULL;
    else {
        fprintf(stderr, "ldt " CMD ": --recompute %s, expected none, selective or full\n", rc_text);
        return 2;
    }
    sched_text = cli_has(f, NFLAGS, "schedule") ? cli_get(f, NFLAGS, "schedule") : "1f1b";
    if (strcmp(sched_text, "gpipe") == 0) sk = SCHED_GPIPE;
    else if (strcmp(sched_text, "1f1b") == 0) sk = SCHED_1F1B;
    else if (strncmp(sched_text, "interleaved:", 12) == 0 && sched_text[12] >= '1' && sched_text[12] <= '9') {
        char *end = NULL;
        long long v = strtoll(sched_text + 12, &end, 10);
        if (*end || v < 1 || v > 4096) goto bad_schedule;
        sk = SCHED_INTERLEAVED, Vv = v;
    } else {
    bad_schedule:
        fprintf(stderr, "ldt " CMD ": --schedule %s, expected gpipe, 1f1b or interleaved:V (V >= 1 virtual "
                        "stages per rank)\n", sched_text);
        return 2;
    }
    dt_text = cli_has(f, NFLAGS, "dtype") ? cli_get(f, NFLAGS, "dtype") : "bf16";
    if (ldt_dtype_parse(dt_text, &dt) != LDT_OK || (dt != LDT_BF16 && dt != LDT_F16 && dt != LDT_F32)) {
        ldt_clear_error();
        fprintf(stderr, "ldt " CMD ": --dtype %s, expected bf16, f16 or f32\n", dt_text);
        return 2;
    }
    plan_dt = dt == LDT_F32 ? LDT_F32 : LDT_BF16; /* f16 has bf16's bytes, policy and peak */
    if (mb > G || D > G / mb || G % (mb * D) != 0) {
        fprintf(stderr, "ldt " CMD ": --global-batch %lld is not divisible by --micro-batch %lld x dp %lld "
                        "(expected whole micro-batches on every data-parallel replica)\n",
                (long long)G, (long long)mb, (long long)D);
        return 2;
    }
    nmb = G / (mb * D);
    if (L % (P * Vv) != 0) {
        fprintf(stderr, "ldt " CMD ": --layers %lld is not divisible by pp %lld x %lld virtual stages "
                        "(expected the same layers in every stage)\n", (long long)L, (long long)P, (long long)Vv);
        return 2;
    }
    if (sk == SCHED_INTERLEAVED && Vv > 1 && (P < 2 || nmb % P != 0)) {
        fprintf(stderr, "ldt " CMD ": --schedule %s needs pp >= 2 and the micro-batches per replica (%lld) "
                        "divisible by pp %lld (Megatron's interleaved schedule)\n",
                sched_text, (long long)nmb, (long long)P);
        return 2;
    }
    lps = L / P;          /* layers a rank holds */
    lpc = L / (P * Vv);   /* layers of one chunk (virtual stage) */
    snprintf(mtext, sizeof mtext, "dp=%lld,tp=%lld", (long long)D, (long long)T);
    if (ldt_mesh_parse(mtext, LDT_DEVICE_META, &mesh) != LDT_OK) return cli_fail(CMD);
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) goto fail;
    pins = cli_has(f, NFLAGS, "sp") ? "megatron-sp" : "megatron";
    cfg = ldt_model_config_default("gpt");
    cfg.hidden = H, cfg.heads = A, cfg.vocab = Vocab, cfg.seq = S, cfg.positions = S;
    cfg.batch = mb * D, cfg.dtype = plan_dt, cfg.dropout = 0;
    /* the stage: its L/P layers (at least 2) with the embedding and head; and one layer, so
     * that the difference over the layers between is one layer's figures */
    cfg.layers = L / P > 1 ? L / P : 2;
    if (plan_stage(mesh, &cm, &cfg, pins, plan_limit, &two) != LDT_OK) goto fail;
    nstage = cfg.layers;
    cfg.layers = 1;
    if (plan_stage(mesh, &cm, &cfg, pins, plan_limit, &one) != LDT_OK) goto fail;
    {
        double k = (double)(nstage - 1);
        two.compute = one.compute + (two.compute - one.compute) / k;
        two.comm = one.comm + (two.comm - one.comm) / k;
        two.fwd_comm = one.fwd_comm + (two.fwd_comm - one.fwd_comm) / k;
        two.gemm = one.gemm + (two.gemm - one.gemm) / k;
        two.fwd_gemm = one.fwd_gemm + (two.fwd_gemm - one.fwd_gemm) / k;
        two.saved = one.saved + (two.saved - one.saved) / (nstage - 1);
        two.param_elems = one.param_elems + (two.param_elems - one.param_elems) / (nstage - 1);
    }
    {
        /* one layer (the difference of the two plans) and the rest (embedding, final norm, head, loss) */
        double e = (double)ldt_dtype_size(dt), peak = cm.peak_flops[plan_dt == LDT_F32 ? LDT_PREC_F32 : LDT_PREC_BF16];
        double lc = two.compute - one.compute, lk = two.comm - one.comm, lfk = two.fwd_comm - one.fwd_comm;
        double lg = two.gemm - one.gemm, lfg = two.fwd_gemm - one.fwd_gemm;
        double xc = one.compute - lc, xk = one.comm - lk;
        int64_t lsaved = two.saved - one.saved, xsaved = one.saved - lsaved;
        int64_t lpe = two.param_elems - one.param_elems, xpe = one.param_elems - lpe;
        int64_t wte = xpe - S * H - 2 * H; /* the vocab-parallel table's shard (the head's weight, tied) */
        int sp = cli_has(f, NFLAGS, "sp");
        double heads_loc = (double)((A + T - 1) / T);
        layer_prices lp = price_layer(&cm, (int)plan_dt, e, (double)mb, (double)S, (double)H, heads_loc,
                                      (double)(H / A), (double)T, sp);
        /* the layer's GEMMs as planned (the attention's taken out), then Megatron's other kernels */
        double gemm_fwd = lfg - lp.traced_attn_fwd, gemm_bwd = (lg - lfg) - lp.traced_attn_bwd;
        double layer_fwd = gemm_fwd + lp.core_fwd + lp.fused_fwd;
        double layer_compute = layer_fwd + gemm_bwd + lp.core_bwd + lp.fused_bwd;
        double layer_recompute = rk == RC_FULL ? layer_fwd + lfk : rk == RC_SELECTIVE ? lp.core_fwd : 0;
        /* the layer's backward tp communication as Megatron runs it: the conjugates of the
         * forward's collectives and, with sp, the all_gathers of the two norm outputs again for
         * the weight gradients (4 all_gathers and 2 reduce_scatters of the forward's sizes, 1.5
         * times the forward's 2 + 2); the plan's when it has more (at micro-batch >= 2 the
         * planner keeps the gathered outputs instead) */
        double lbk = lk - lfk, mbk = (sp ? 1.5 : 1.0) * lfk;
        double layer_comm = lfk + (mbk > lbk ? mbk : lbk);
        int across = 0;
        ldt_link link = pp_link(&cm, P, D * T, &across);
        double act_bytes = (double)mb * S * H * e / (double)T; /* a stage's output, per rank */
        double p2p = 0, gather = 0, p2p_mb = 0;
        double stage_compute, stage_recompute, stage_comm, stage_time, bubble, dp_reduce = 0, emb_reduce = 0;
        double optimizer, step, model_flops, mfu, accum_mb = 0;
        int dp_dim = 0, tp_dim = 1;
        int64_t grad_bytes_max = 0;
        /* the last stage's parameter elements, whose gradients every micro-batch adds up */
        int64_t last_elems = lps * lpe + (P == 1 ? xpe : wte + 2 * H);
        if (P > 1) {
            p2p = ldt_cost_kind_seconds(&cm, link, 2, LDT_KIND_SEND_RECV, (int64_t)act_bytes);
            /* Megatron's scatter-gather: without sp each tp rank sends its 1/t of the (replicated)
             * activation and the receivers all-gather it on the node */
            if (!sp && T > 1)
                gather = ldt_cost_seconds(&cm, mesh, 1, &tp_dim, LDT_COLL_ALL_GATHER,
                                          (int64_t)(act_bytes * (double)(T - 1)), 0);
            p2p_mb = 2.0 * (double)Vv * (p2p + gather); /* forward activation and backward gradient, per chunk */
        }
        /* the busiest stage: the last (its layers and the head, loss and final norm; P = 1: all) */
        (void)update_seconds(&cm, dt, (double)last_elems, &accum_mb);
        stage_compute = (double)lps * layer_compute + xc + accum_mb;
        stage_recompute = (double)lps * layer_recompute;
        stage_comm = (double)lps * layer_comm + xk + p2p_mb;
        stage_time = stage_compute + stage_recompute + stage_comm;
        bubble = (double)(P - 1) / (double)Vv * stage_time;
        /* memory per stage, and the stage's gradient bytes for the dp reduction */
        if (!cli_has(f, NFLAGS, "json")) printf("%-6s %8s %16s %16s %16s %18s %16s\n", "stage", "layers",
                                                "params", "grads", "optimizer", "activations_peak", "peak");
        int64_t mx[6] = {0, 0, 0, 0, 0, 0};
        int64_t stage_elems_max = 0;
        char *by_stage = NULL;
        size_t by_len = 0;
        FILE *bs = open_memstream(&by_stage, &by_len);
        if (!bs) {
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY, CMD ": out of memory");
            goto fail;
        }
        fputc('[', bs);
        for (int64_t i = 0; i < P; i++) {
            int64_t elems = lps * lpe, chunks = in_flight_chunks(sk, P, Vv, i, nmb), v[6];
            double per_layer, stored, working;
            int last = i == P - 1;
            if (P == 1) elems += xpe;
            else if (i == 0) elems += wte + S * H;
            else if (last) elems += wte + 2 * H;
            if (rk == RC_FULL) per_layer = (double)mb * S * H * e / (sp ? (double)T : 1.0);
            else if (rk == RC_SELECTIVE) per_layer = (double)lsaved;
            else per_layer = (double)lsaved + lp.core_stored;
            stored = (double)chunks * (double)lpc * per_layer + (last ? (double)xsaved : 0);
            /* the layer being recomputed keeps, until its backward, what no recomputation keeps */
            working = rk == RC_FULL ? (double)lsaved + lp.core_stored : 0;
            v[0] = elems * (int64_t)e;
            v[1] = v[0];
            v[2] = elems * (plan_dt == LDT_F32 ? 8 : 12);
            v[3] = (int64_t)(stored + working);
            v[4] = v[0] + v[1] + v[2] + v[3];
            v[5] = (int64_t)stored;
            for (int k = 0; k < 6; k++)
                if (v[k] > mx[k]) mx[k] = v[k];
            if (elems > stage_elems_max) stage_elems_max = elems;
            fprintf(bs, "%s{\"stage\":%lld,\"layers\":%lld,\"params\":%lld,\"grads\":%lld,\"optimizer\":%lld,"
                        "\"activations_peak\":%lld,\"peak\":%lld,\"activations_saved\":%lld,\"in_flight\":%lld}",
                    i ? "," : "", (long long)i, (long long)lps, (long long)v[0], (long long)v[1], (long long)v[2],
                    (long long)v[3], (long long)v[4], (long long)v[5], (long long)chunks);
            if (!cli_has(f, NFLAGS, "json") && (i < 3 || i >= P - 2))
                printf("%-6lld %8lld %16lld %16lld %16lld %18lld %16lld\n", (long long)i, (long long)lps,
                       (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4]);
        }
        fputc(']', bs);
        if (fclose(bs) != 0) {
            free(by_stage);
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY, CMD ": out of memory");
            goto fail;
        }
        /* the buffer reduced over dp: 16-bit with f16, f32 with bf16 (Megatron accumulates and
         * reduces bf16 gradients in f32) and f32 */
        grad_bytes_max = stage_elems_max * (dt == LDT_F16 ? 2 : 4);
        if (D > 1) {
            /* once per step after the pipeline flush, in buckets of 25 MiB (ring all_reduce):
             * exposed, as Megatron-LM (2022) reduces after the last backward */
            const int64_t cap = 25 << 20;
            int64_t full = grad_bytes_max / cap, rest = grad_bytes_max % cap;
            double ring = 2.0 * (double)(D - 1) / (double)D;
            dp_reduce = (double)full * ldt_cost_seconds(&cm, mesh, 1, &dp_dim, LDT_COLL_ALL_REDUCE,
                                                         (int64_t)(ring * (double)cap), 0);
            if (rest) dp_reduce += ldt_cost_seconds(&cm, mesh, 1, &dp_dim, LDT_COLL_ALL_REDUCE,
                                                    (int64_t)(ring * (double)rest), 0);
        }
        if (P > 1) /* the tied embedding's gradient, between the first and last stage */
            emb_reduce = ldt_cost_kind_seconds(&cm, link, 2, LDT_KIND_ALL_REDUCE, wte * (int64_t)e);
        /* the update as Megatron runs it (update_seconds), over the largest stage's elements */
        {
            double unused;
            optimizer = update_seconds(&cm, dt, (double)stage_elems_max, &unused);
        }
        step = (double)nmb * stage_time + bubble + dp_reduce + emb_reduce + optimizer;
        model_flops = 72.0 * (double)G * S * L * (double)H * H *
                      (1 + (double)S / (6.0 * H) + (double)Vocab / (12.0 * H * L));
        mfu = model_flops / (step * (double)(P * D * T) * peak);
        if (cli_has(f, NFLAGS, "json")) {
            printf("{\"config\":{\"model\":\"gpt\",\"layers\":%lld,\"hidden\":%lld,\"heads\":%lld,\"seq\":%lld,"
                   "\"vocab\":%lld,\"global_batch\":%lld,\"micro_batch\":%lld,\"mesh\":\"pp=%lld,dp=%lld,tp=%lld\","
                   "\"sp\":%s,\"recompute\":\"%s\",\"schedule\":\"%s\",\"dtype\":\"%s\",\"pins\":\"%s\"},",
                   (long long)L, (long long)H, (long long)A, (long long)S, (long long)Vocab, (long long)G,
                   (long long)mb, (long long)P, (long long)D, (long long)T, cli_has(f, NFLAGS, "sp") ? "true" : "false",
                   rc_text, sched_text, ldt_dtype_name(dt), pins);
            cli_profile_json(stdout, &cm);
            printf(",\"gpus\":%lld,\"micro_batches\":%lld,\"modeled_step_seconds\":%.9g,"
                   "\"parts\":{\"compute\":%.9g,\"recompute\":%.9g,\"exposed_comm\":%.9g,\"bubble\":%.9g,"
                   "\"optimizer\":%.9g},",
                   (long long)(P * D * T), (long long)nmb, step, (double)nmb * stage_compute,
                   (double)nmb * stage_recompute, (double)nmb * stage_comm + dp_reduce + emb_reduce, bubble, optimizer);
            printf("\"stage_seconds\":%.9g,\"exposed_comm_parts\":{\"tp\":%.9g,\"p2p\":%.9g,\"dp\":%.9g,"
                   "\"embedding\":%.9g,\"dp_overlap\":\"exposed\",\"p2p_across_nodes\":%s},",
                   stage_time, (double)nmb * ((double)lps * layer_comm + xk), (double)nmb * p2p_mb, dp_reduce, emb_reduce,
                   across ? "true" : "false");
            printf("\"tokens_per_second\":%.9g,\"mfu\":%.9g,\"model_flops\":%.9g,", (double)G * S / step, mfu,
                   model_flops);
            printf("\"memory_per_rank\":{\"params\":%lld,\"grads\":%lld,\"optimizer\":%lld,\"activations_peak\":%lld,"
                   "\"peak\":%lld,\"activations_saved\":%lld},\"memory_by_stage\":%s,",
                   (long long)mx[0], (long long)mx[1], (long long)mx[2], (long long)mx[3], (long long)mx[4],
                   (long long)mx[5], by_stage);
            printf("\"layer\":{\"plan_compute_seconds\":%.9g,\"plan_comm_seconds\":%.9g,\"gemm_forward_seconds\":%.9g,"
                   "\"gemm_backward_seconds\":%.9g,\"attention_core_forward_seconds\":%.9g,"
                   "\"attention_core_backward_seconds\":%.9g,\"fused_forward_seconds\":%.9g,"
                   "\"fused_backward_seconds\":%.9g,\"forward_comm_seconds\":%.9g,\"backward_comm_seconds\":%.9g,"
                   "\"activations_saved\":%lld,\"params\":%lld},",
                   lc, lk, gemm_fwd, gemm_bwd, lp.core_fwd, lp.core_bwd, lp.fused_fwd, lp.fused_bwd, lfk,
                   layer_comm - lfk, (long long)lsaved, (long long)lpe);
            printf("\"grad_accumulation_seconds\":%.9g,", (double)nmb * accum_mb);
            printf("\"plan_seconds\":%.9g}\n", one.plan_seconds + two.plan_seconds);
        } else {
            printf("\nmodeled step %.4f s on %lld GPUs (%s): compute %.4f, recompute %.4f, exposed comm %.4f, "
                   "bubble %.4f, optimizer %.4f\n",
                   step, (long long)(P * D * T), cm.name, (double)nmb * stage_compute, (double)nmb * stage_recompute,
                   (double)nmb * stage_comm + dp_reduce + emb_reduce, bubble, optimizer);
            printf("%lld micro-batches per replica, stage time %.6f s; %.0f tokens/s, MFU %.1f%%\n", (long long)nmb,
                   stage_time, (double)G * S / step, 100 * mfu);
        }
        free(by_stage);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail(CMD);
done:
    ldt_mesh_destroy(mesh);
    return rc;
}
