/* ldt train: a character-level GPT trained by a captured step (forward, backward, optimizer)
 * on rank threads: traced every step, compiled once (the plan cache returns it), replayed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 25
/* The sizes ldt train applies (the demo's model), in CLI_MODEL_SIZE_FLAGS_AT's order. */
#define TRAIN_SIZES 2, 128, 4, 256, 64, 8
static const int64_t k_train_sizes[6] = {TRAIN_SIZES};

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "gpt (default)", NULL},
        CLI_MODEL_SIZE_FLAGS_AT(TRAIN_SIZES),
        {"mesh", 1, "device mesh of rank threads: dp=2,tp=2, tp=4, 1, ... (default dp=2,tp=2)", NULL},
        {"steps", 1, "training steps (default 200)", NULL},
        {"optimizer", 1, "adamw or sgd (default adamw)", NULL},
        {"lr", 1, "learning rate (default 3e-3)", NULL},
        {"seed", 1, "seed of the init, the data order and dropout (default 1)", NULL},
        {"dtype", 1, "f32, f64 or bf16 (default f32)", NULL},
        {"dropout", 1, "dropout probability (default 0.1)", NULL},
        {"data", 1, "train on this text file instead of the built-in arithmetic corpus", NULL},
        {"sample", 1, "characters to generate from a prompt after training (default 40)", NULL},
        {"trace", 1, "write a Chrome trace JSON of the last step to FILE", NULL},
        {"zero", 0, "shard the optimizer state over the dp mesh dim (ZeRO)", NULL},
        CLI_BUCKET_FLAG,
        CLI_PROFILE_FLAG,
        {"backend", 1, "threads (default: every rank a thread here), mpi (one process per rank, "
                       "under mpirun -np <ranks>; rank 0 prints) or nccl (mpi's processes, a GPU each, "
                       "NCCL between them: --device cuda)", NULL},
        {"device", 1, "cpu (default) or cuda: each rank's step captured into a CUDA Graph on a GPU "
                      "(rank r on GPU r mod devices; NCCL collectives between the ranks' threads)", NULL},
        {"json", 0, "one JSON object", NULL},
        CLI_COMM_TIMEOUT_FLAG,
        {"help", 0, "this help", NULL},
    };
    return flags;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The built-in corpus: arithmetic with its results, "17+25=42\n", something a tiny model
 * visibly learns (the format at once, the sums slowly). */
static char *arithmetic_corpus(uint64_t seed, int64_t *len) {
    int64_t cap = 1 << 20, n = 0;
    char *c = malloc((size_t)cap);
    uint64_t s = seed * 7919 + 1;
    if (!c) return NULL;
    while (n < cap - 32) {
        int a = (int)(mix(&s) % 100), b = (int)(mix(&s) % 100), op = (int)(mix(&s) % 3);
        int r = op == 0 ? a + b : op == 1 ? a - b : a * (b % 10);
        n += snprintf(c + n, (size_t)(cap - n), "%d%c%d=%d\n", a, "+-*"[op], op == 2 ? b % 10 : b, r);
    }
    *len = n;
    return c;
}

static char *read_file(const char *path, int64_t *len) {
    FILE *f = fopen(path, "rb");
    char *c;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 2 || fseek(f, 0, SEEK_SET) != 0 ||
        !(c = malloc((size_t)n))) {
        fclose(f);
        return NULL;
    }
    *len = (int64_t)fread(c, 1, (size_t)n, f);
    fclose(f);
    return c;
}

/* Step k's batch: B windows of S + 1 characters at seeded places; tokens the first S, targets
 * the last S. */
static void batch(const char *text, int64_t len, int64_t B, int64_t S, uint64_t seed, int k,
                  int64_t *tok, int64_t *tgt) {
    uint64_t s = seed * 1000003u + (uint64_t)k;
    for (int64_t b = 0; b < B; b++) {
        int64_t at = (int64_t)(mix(&s) % (uint64_t)(len - S - 1));
        for (int64_t i = 0; i < S; i++) {
            tok[b * S + i] = (unsigned char)text[at + i];
            tgt[b * S + i] = (unsigned char)text[at + i + 1];
        }
    }
}

/* Greedy decode: the prompt, then n characters, each the argmax of the logits at the last
 * filled position (the window's other rows repeat the first; dropout off). Writes into out. */
static int sample(ldt_ctx *ctx, ldt_model *m, const ldt_model_config *cfg, const char *prompt,
                  int64_t n, char *out) {
    int64_t B = cfg->batch, S = cfg->seq, V = cfg->vocab, len = (int64_t)strlen(prompt);
    int64_t *tok = calloc((size_t)(B * S), sizeof *tok), *tgt = calloc((size_t)(B * S), sizeof *tgt);
    float *logits = malloc((size_t)(B * S * V) * sizeof *logits);
    ldt_exec *ex = NULL;
    int rc = 1;
    if (!tok || !tgt || !logits || cfg->dtype != LDT_F32) goto done;
    if (len > S - 1) len = S - 1;
    memcpy(out, prompt, (size_t)len);
    ldt_model_set_train(m, 0);
    for (int64_t k = 0; k < n; k++) {
        int64_t cur = len + k, start = cur >= S ? cur - S + 1 : 0, pos = cur - 1 - start, best = 0;
        ldt_tensor *loss, *lg;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < S; i++) tok[b * S + i] = start + i < cur ? (unsigned char)out[start + i] : '\n';
        if (ldt_input_bind(ldt_model_input(m, 0, NULL), tok, B * S * 8) != LDT_OK ||
            ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, B * S * 8) != LDT_OK || !(loss = ldt_model_forward(m)) ||
            !(lg = ldt_model_output(m)) || ldt_compile(ctx, &lg, 1, NULL, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK ||
            ldt_exec_read(ex, 0, logits, B * S * V * 4) != LDT_OK)
            goto done;
        (void)loss;
        for (int64_t c = 1; c < V; c++)
            if (logits[pos * V + c] > logits[pos * V + best]) best = c;
        out[cur] = (char)(best >= 32 && best < 127 ? best : best == '\n' ? '\n' : '?');
    }
    out[len + n] = '\0';
    rc = 0;
done:
    free(tok);
    free(tgt);
    free(logits);
    return rc;
}

/* One line: the text with C escapes (\\n, \\t, \\\\, \\xNN), so a sample never breaks a log. */
static void print_escaped(const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c >= 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\n');
}

int cmd_train(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_optim *opt = NULL;
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_optim_config oc = {0};
    ldt_compile_options copt = {0};
    ldt_tensor *ps[4096];
    double *losses = NULL, *times = NULL, t_compile = 0, dropout = 0.1, lr = 3e-3;
    int64_t steps, seed, nsample, len = 0, *tok = NULL, *tgt = NULL;
    char *text = NULL;
    const char *s_opt, *s_dt, *v;
    int rc = 1, np, json, tty = isatty(2), log_lines = !isatty(1), nccl;
    ldt_comm *world = NULL;
    ldt_cost_model cm;
    if (cli_parse("train", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("train", f, NFLAGS) || cli_bucket_bytes("train", f, NFLAGS, &copt.bucket_bytes)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt train [--model gpt] [--layers N --hidden H --heads A --vocab V --seq S\n"
               "                 --batch B] [--mesh M] [--steps N] [--optimizer adamw|sgd] [--lr X]\n"
               "                 [--seed S] [--dtype f32|f64|bf16] [--dropout P] [--data FILE]\n"
               "                 [--sample N] [--trace FILE] [--zero] [--bucket-mb X]\n"
               "                 [--profile P] [--backend threads|mpi|nccl] [--device cpu|cuda] [--json]\n\n"
               "Trains a character-level GPT: each step (forward, backward, optimizer) is traced,\n"
               "compiled once for the mesh and replayed for every batch.\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        printf("\nPins: megatron. Without a terminal (stdout not a tty), and under mpirun, a loss line every tenth of the steps.\n");
        return 0;
    }
    if (cli_has(f, NFLAGS, "model") && strcmp(cli_get(f, NFLAGS, "model"), "gpt") != 0) {
        fprintf(stderr, "ldt train: --model %s; only gpt trains on characters\n", cli_get(f, NFLAGS, "model"));
        return 2;
    }
    cfg.layers = k_train_sizes[0], cfg.hidden = k_train_sizes[1], cfg.heads = k_train_sizes[2];
    cfg.vocab = k_train_sizes[3], cfg.seq = k_train_sizes[4], cfg.batch = k_train_sizes[5];
    if (cli_model_sizes("train", f, NFLAGS, &cfg) || cli_int("train", f, NFLAGS, "steps", 200, 1, &steps) ||
        cli_int("train", f, NFLAGS, "seed", 1, 0, &seed) || cli_int("train", f, NFLAGS, "sample", 40, 0, &nsample))
        return 2;
    if (cli_real("train", f, NFLAGS, "lr", 3e-3, &lr) || cli_real("train", f, NFLAGS, "dropout", 0.1, &dropout))
        return 2;
    if (!(lr > 0 && lr <= 1e3)) {
        fprintf(stderr, "ldt train: --lr is '%s', expected a positive number up to 1000\n", cli_get(f, NFLAGS, "lr"));
        return 2;
    }
    if (!(dropout >= 0 && dropout < 1)) {
        fprintf(stderr, "ldt train: --dropout is '%s', expected 0 <= p < 1\n", cli_get(f, NFLAGS, "dropout"));
        return 2;
    }
    /* every size the step multiplies, checked before any arithmetic: a batch of tokens and
     * the sample's window are allocated on the host */
    {
        const int64_t k_max = (int64_t)1 << 30;
        const char *too = cfg.seq > k_max ? "seq" : nsample > k_max ? "sample" : steps > k_max ? "steps" : NULL;
        if (too) {
            fprintf(stderr, "ldt train: --%s is '%s', expected at most 2^30\n", too, cli_get(f, NFLAGS, too));
            return 2;
        }
        if (cfg.batch > k_max / cfg.seq) {
            fprintf(stderr, "ldt train: --batch %lld x --seq %lld tokens a step, expected at most 2^30\n",
                    (long long)cfg.batch, (long long)cfg.seq);
            return 2;
        }
    }
    s_opt = cli_has(f, NFLAGS, "optimizer") ? cli_get(f, NFLAGS, "optimizer") : "adamw";
    s_dt = cli_has(f, NFLAGS, "dtype") ? cli_get(f, NFLAGS, "dtype") : "f32";
    if (strcmp(s_opt, "adamw") != 0 && strcmp(s_opt, "sgd") != 0) {
        fprintf(stderr, "ldt train: --optimizer %s, expected adamw or sgd\n", s_opt);
        return 2;
    }
    if (ldt_dtype_parse(s_dt, &cfg.dtype) != LDT_OK || !ldt_dtype_is_float(cfg.dtype)) {
        fprintf(stderr, "ldt train: --dtype %s, expected f32, f64, bf16 or f16\n", s_dt);
        return 2;
    }
    cfg.dropout = dropout;
    cfg.train = dropout > 0;
    json = cli_has(f, NFLAGS, "json");
    copt.trace_path = cli_get(f, NFLAGS, "trace");
    text = cli_has(f, NFLAGS, "data") ? read_file(cli_get(f, NFLAGS, "data"), &len)
                                      : arithmetic_corpus((uint64_t)seed, &len);
    if (!text || len < cfg.seq + 2) {
        fprintf(stderr, "ldt train: %s\n", cli_has(f, NFLAGS, "data") ? "cannot read --data, or it is shorter "
                                                                          "than one window" : "out of memory");
        free(text);
        return 1;
    }
    if ((v = cli_get(f, NFLAGS, "backend")) && strcmp(v, "threads") != 0 && strcmp(v, "mpi") != 0 &&
        strcmp(v, "nccl") != 0) {
        fprintf(stderr, "ldt train: --backend %s, expected threads, mpi or nccl\n", v);
        free(text);
        return 2;
    }
    nccl = v && strcmp(v, "nccl") == 0;
    if (nccl && cli_has(f, NFLAGS, "device") && strcmp(cli_get(f, NFLAGS, "device"), "cuda") != 0) {
        fprintf(stderr, "ldt train: --backend nccl runs on GPUs, expected --device cuda (or no --device)\n");
        free(text);
        return 2;
    }
    if (v && (strcmp(v, "mpi") == 0 || nccl)) { /* every process runs this; rank 0 speaks */
        if (ldt_mpi_world(NULL, &world) != LDT_OK) {
            free(text);
            return cli_fail("train");
        }
        /* mpirun hands its processes a pseudo-terminal whatever its own output is: rank 0
         * logs lines (no progress bar), the others are silent */
        tty = 0;
        log_lines = ldt_comm_rank(world) == 0;
        if (ldt_comm_rank(world) != 0 && !freopen("/dev/null", "w", stdout)) log_lines = 0;
    }
    if ((v = cli_get(f, NFLAGS, "device")) && strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
        fprintf(stderr, "ldt train: --device %s, expected cpu or cuda\n", v);
        free(text);
        ldt_mpi_world_destroy(world);
        return 2;
    }
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "dp=2,tp=2",
                       nccl || (v && strcmp(v, "cuda") == 0) ? LDT_DEVICE_CUDA : LDT_DEVICE_CPU, &mesh) != LDT_OK) {
        free(text);
        ldt_mpi_world_destroy(world);
        return cli_fail("train");
    }
    /* the planner's numbers; under mpi, compile broadcasts rank 0's */
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) {
        free(text);
        ldt_mesh_destroy(mesh);
        ldt_mpi_world_destroy(world);
        return cli_fail("train");
    }
    copt.plan.cost = &cm;
    co.mesh = mesh;
    co.world = world;
    co.seed = (uint64_t)seed;
    losses = calloc((size_t)steps, sizeof *losses);
    times = calloc((size_t)steps, sizeof *times);
    tok = malloc((size_t)(cfg.batch * cfg.seq) * sizeof *tok);
    tgt = malloc((size_t)(cfg.batch * cfg.seq) * sizeof *tgt);
    if (!losses || !times || !tok || !tgt) goto fail;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, "gpt", &cfg, &model) != LDT_OK ||
        ldt_model_init(model, (uint64_t)seed) != LDT_OK || ldt_model_pin(model, "megatron") != LDT_OK)
        goto fail;
    np = ldt_model_nparams(model);
    if (np > 4096) {
        ldt_set_error(LDT_ERR_UNSUPPORTED, "%d parameters; this command takes up to 4096", np);
        goto fail;
    }
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(model, i, NULL);
    oc.kind = strcmp(s_opt, "sgd") == 0 ? LDT_OPTIM_SGD : LDT_OPTIM_ADAMW;
    oc.lr = lr;
    oc.momentum = oc.kind == LDT_OPTIM_SGD ? 0.9 : 0;
    oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.01, oc.clip_norm = 1.0;
    oc.schedule = LDT_LR_WARMUP_LINEAR;
    oc.warmup_steps = steps < 10 ? 1 : 10;
    oc.total_steps = steps;
    if (ldt_optim_create(ctx, &oc, ps, np, &opt) != LDT_OK) goto fail;
    if (cli_has(f, NFLAGS, "zero")) {
        int dp;
        if (ldt_mesh_dim_index(mesh, "dp", &dp) != LDT_OK) {
            ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "--zero needs a mesh dim named dp (e.g. --mesh dp=2,tp=2)");
            goto fail;
        }
        if (ldt_optim_shard_states(opt, dp) != LDT_OK) goto fail;
    }
    if (cli_sync_grads(opt, mesh) != LDT_OK) goto fail;
    ldt_ctx_set_seed(ctx, (uint64_t)seed, ldt_ctx_rng_offset(ctx));
    for (int k = 0; k < steps; k++) {
        ldt_tensor *loss, *g[4096];
        ldt_exec *ex;
        double t0 = now_s();
        batch(text, len, cfg.batch, cfg.seq, (uint64_t)seed, k, tok, tgt);
        if (ldt_input_bind(ldt_model_input(model, 0, NULL), tok, cfg.batch * cfg.seq * 8) != LDT_OK ||
            ldt_input_bind(ldt_model_input(model, 1, NULL), tgt, cfg.batch * cfg.seq * 8) != LDT_OK)
            goto fail;
        if (!(loss = ldt_model_forward(model))) {
            ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
            goto fail;
        }
        if (ldt_grad(loss, ps, np, g) != LDT_OK || ldt_optim_step(opt, g) != LDT_OK ||
            ldt_compile(ctx, &loss, 1, &copt, &ex) != LDT_OK)
            goto fail;
        if (k == 0) t_compile = now_s() - t0;
        t0 = now_s();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        times[k] = now_s() - t0;
        if (cfg.dtype == LDT_F64) {
            if (ldt_exec_read(ex, 0, &losses[k], 8) != LDT_OK) goto fail;
        } else if (cfg.dtype == LDT_F32) {
            float l;
            if (ldt_exec_read(ex, 0, &l, 4) != LDT_OK) goto fail;
            losses[k] = l;
        } else { /* a 2-byte loss: f16 or bf16, each by its own format */
            uint16_t h;
            if (ldt_exec_read(ex, 0, &h, 2) != LDT_OK) goto fail;
            losses[k] = cfg.dtype == LDT_F16 ? ldt_f16_to_f32(h) : ldt_bf16_to_f32(h);
        }
        if (tty && !json) {
            int w = (int)(30L * (k + 1) / steps);
            fprintf(stderr, "\r[%.*s%*s] step %d/%lld  loss %.4f  %.0f tok/s  %.1f ms/step ", w,
                    "##############################", 30 - w, "", k + 1, (long long)steps, losses[k],
                    (double)(cfg.batch * cfg.seq) / times[k], times[k] * 1e3);
            if (k + 1 == steps) fputc('\n', stderr);
        }
        /* logs: the first step, then every tenth of the steps (and the last) */
        if (log_lines && !json && (k == 0 || (k + 1) % (steps >= 10 ? steps / 10 : 1) == 0 || k + 1 == steps)) {
            printf("step %d/%lld loss %.4f\n", k + 1, (long long)steps, losses[k]);
            fflush(stdout);
        }
    }
    {
        double *sorted = malloc((size_t)steps * sizeof *sorted), med, lo, hi, tail = 0;
        int ntail = steps < 10 ? (int)steps : 10;
        if (!sorted) goto fail;
        memcpy(sorted, times, (size_t)steps * sizeof *sorted);
        for (int i = 1; i < steps; i++) /* insertion sort: steps are few */
            for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
                double x = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = x;
            }
        med = sorted[steps / 2];
        lo = sorted[0];
        hi = sorted[steps - 1];
        free(sorted);
        for (int i = 0; i < ntail; i++) tail += losses[steps - 1 - i] / ntail;
        if (json) {
            printf("{");
            cli_config_json(stdout, "gpt", &cfg, "megatron", mesh);
            putchar(',');
            cli_profile_json(stdout, &cm);
            printf(",\"losses\":[");
            /* every digit: runs are compared with each other to 1e-9 (scripts/gpu-check.sh) */
            for (int k = 0; k < steps; k++) printf("%s%.17g", k ? "," : "", losses[k]);
            printf("],\"tokens_per_second\":%.6g,\"step_seconds\":{\"median\":%.9g,\"min\":%.9g,\"max\":%.9g},"
                   "\"compile_seconds\":%.9g,\"last10_mean_loss\":%.9g,\"ln_vocab\":%.9g}\n",
                   (double)(cfg.batch * cfg.seq) / med, med, lo, hi, t_compile, tail, log((double)cfg.vocab));
        } else {
            printf("trained %lld steps: loss %.4f -> %.4f (mean of the last %d %.4f; ln(vocab) %.4f); "
                   "%.0f tokens/s, %.2f ms a step (median), compile %.1f ms\n",
                   (long long)steps, losses[0], losses[steps - 1], ntail, tail, log((double)cfg.vocab),
                   (double)(cfg.batch * cfg.seq) / med, med * 1e3, t_compile * 1e3);
            if (copt.trace_path) printf("Chrome trace of the last step: %s\n", copt.trace_path);
        }
    }
    if (nsample > 0 && !json && cfg.dtype == LDT_F32) {
        char *txt = malloc((size_t)(cfg.seq + nsample + 1));
        const char *prompt = cli_has(f, NFLAGS, "data") ? "\n" : "12+34=";
        if (!txt || sample(ctx, model, &cfg, prompt, nsample, txt) != 0) {
            free(txt);
            goto fail;
        }
        printf("sample (greedy, from \"%s\"):\n", prompt[0] == '\n' ? "\\n" : prompt);
        print_escaped(txt);
        free(txt);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("train");
done:
    ldt_optim_destroy(opt);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    ldt_mpi_world_destroy(world);
    free(text);
    free(losses);
    free(times);
    free(tok);
    free(tgt);
    return rc;
}
