/* ldt train: a character-level GPT trained by a captured step (forward, backward, optimizer)
 * on rank threads: traced every step, compiled once (the plan cache returns it), replayed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 37
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
        {"dtype", 1, "f32, f64, bf16 or f16 (default f32)", NULL},
        {"dropout", 1, "dropout probability (default 0.1)", NULL},
        {"data", 1, "train on this text file instead of the built-in arithmetic corpus", NULL},
        {"sample", 1, "characters to generate from a prompt after training (default 40)", NULL},
        {"trace", 1, "write a Chrome trace JSON of the last step to FILE", NULL},
        {"zero", 0, "shard the optimizer state over the dp mesh dim (ZeRO)", NULL},
        {"sp", 0, "sequence parallel: norms, dropouts and the residual stream split on the sequence "
                  "over tp (pins megatron-sp)", NULL},
        {"recompute", 1, "none, selective (the attention core, the default) or full (each layer from its "
                         "input): what each layer keeps for the backward (docs/recompute.md; the losses are the same); "
                         "one for every layer or one per layer (full,selective,none,...); auto with --memory-budget", NULL},
        {"memory-budget", 1, "with --recompute auto: bytes per rank; the mix of layers full, selective and none "
                             "that fits it with the least modeled step, planned before training", NULL},
        CLI_BUCKET_FLAG,
        {"no-fuse", 0, "keep every collective a call of its own (no gradient buckets; the losses are the same)", NULL},
        CLI_PROFILE_FLAG,
        {"backend", 1, "threads (default: every rank a thread here), mpi (one process per rank, "
                       "under mpirun -np <ranks>; rank 0 prints) or nccl (mpi's processes, a GPU each, "
                       "NCCL between them: --device cuda)", NULL},
        {"device", 1, "cpu (default) or cuda: each rank's step captured into a CUDA Graph on a GPU "
                      "(rank r on GPU r mod devices; NCCL collectives between the ranks' threads)", NULL},
        {"save", 1, "save the model, the optimizer state and the training state into the checkpoint "
                     "DIR at the end (docs/training.md)", NULL},
        {"save-every", 1, "also save into --save's DIR every N steps", NULL},
        {"load", 1, "start from the weights of the checkpoint DIR (ldt ckpt import-hf's or a --save's); "
                     "the model sizes default to its", NULL},
        {"resume", 1, "continue the run saved in DIR: step, optimizer state, random stream and data "
                       "position; --steps is the total; the other settings default to the saved run's", NULL},
        {"global-batch", 1, "pipelines (a pp mesh dim): sequences a step, in micro-batches (default --batch)", NULL},
        {"micro-batch", 1, "pipelines: sequences a micro-batch on each dp replica (default 1); --global-batch / "
                           "(micro-batch x dp) micro-batches a step", NULL},
        {"schedule", 1, "pipelines: gpipe, 1f1b (default) or interleaved:V (V model chunks a rank)", NULL},
        {"stages", 1, "pipelines: layers of each (virtual) stage, e.g. 1,3 (default: balanced by modeled time)", NULL},
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

/* The training state saved with the model (docs/checkpoint.md, "Training state"). */
enum { ST_VERSION, ST_STEP, ST_SEED, ST_RNG_OFFSET, ST_DATA_POS, ST_BATCH, ST_SEQ, ST_DATA_HASH, ST_N };
enum { HP_OPTIM, HP_LR, HP_BETA1, HP_BETA2, HP_EPS, HP_WD, HP_CLIP, HP_MOMENTUM, HP_WARMUP, HP_DROPOUT, HP_ZERO,
       HP_TOTAL, HP_N };
static const char *const k_st_names[ST_N] = {"version", "step", "--seed", "rng offset", "data position", "--batch",
                                             "--seq", "the data (--data)"};
static const char *const k_hp_names[HP_N] = {"--optimizer", "--lr", "beta1", "beta2", "eps", "weight decay",
                                             "clip norm", "momentum", "warmup steps", "--dropout", "--zero", "total steps"};

/* The shortest text that reads back as x. */
static const char *real_text(double x, char *buf, size_t cap) {
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* FNV-1a of the corpus, 62 bits (an i64 in the checkpoint). */
static int64_t text_hash(const char *t, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++) h = (h ^ (unsigned char)t[i]) * 0x100000001b3ull;
    return (int64_t)(h >> 2);
}

/* A small tensor `name` of dir into buf (n elements of dt), on one rank. */
static ldt_status load_small(const char *dir, const char *name, ldt_dtype dt, int64_t n, void *buf) {
    ldt_mesh *one = NULL;
    ldt_shards *s = NULL;
    ldt_spec spec;
    ldt_placement r = ldt_replicate();
    ldt_status st;
    if ((st = ldt_mesh_parse("1", LDT_DEVICE_CPU, &one)) == LDT_OK &&
        (st = ldt_spec_init(&spec, one, &(ldt_shape){1, {n}}, &r, 1, dt)) == LDT_OK &&
        (st = ldt_ckpt_load(dir, name, &spec, &s)) == LDT_OK)
        st = ldt_to_local(s, 0, buf, n * (int64_t)ldt_dtype_size(dt));
    ldt_shards_destroy(s);
    ldt_mesh_destroy(one);
    return st;
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

/* A pipeline's settings from the flags (docs/pipeline.md): the micro-batches, the schedule
 * and the layers of each stage; the model's batch becomes one micro-batch's rows over dp.
 * Returns 0, or 2 after a message. */
typedef struct pipe_opts {
    int on;
    int64_t global, micro; /* sequences a step; a micro-batch on each dp replica */
    ldt_pipeline_config pc;
    int stage[4096];
    const char *schedule;
    int nv;                  /* virtual stages: pp x chunks */
    const char *split;       /* "modeled", "given" (--stages) or "even" (interleaved) */
    double layer_s[4096];    /* each layer's modeled seconds a micro-batch, forward and backward */
    double stage_s[4096];    /* each virtual stage's */
} pipe_opts;

static int pipe_flags(cli_flag *f, const ldt_mesh *mesh, ldt_model_config *cfg, pipe_opts *po) {
    static const char *const names[4] = {"global-batch", "micro-batch", "schedule", "stages"};
    const char *s;
    int d, P, D = 1;
    memset(po, 0, sizeof *po);
    if (ldt_mesh_dim_index(mesh, "pp", &d) != LDT_OK) {
        ldt_clear_error();
        for (int i = 0; i < 4; i++)
            if (cli_has(f, NFLAGS, names[i])) {
                fprintf(stderr, "ldt train: --%s needs a mesh dim named pp (e.g. --mesh pp=2,dp=2)\n", names[i]);
                return 2;
            }
        return 0;
    }
    po->on = 1;
    P = (int)ldt_mesh_dim_size(mesh, d);
    if (ldt_mesh_dim_index(mesh, "dp", &d) == LDT_OK) D = (int)ldt_mesh_dim_size(mesh, d);
    ldt_clear_error();
    if (cli_int("train", f, NFLAGS, "global-batch", cfg->batch, 1, &po->global) ||
        cli_int("train", f, NFLAGS, "micro-batch", 1, 1, &po->micro))
        return 2;
    if (po->global > ((int64_t)1 << 30) || po->global % (po->micro * D) != 0) {
        fprintf(stderr, "ldt train: --global-batch %lld is not a multiple of --micro-batch %lld x dp %d: expected "
                "whole micro-batches on every dp replica\n", (long long)po->global, (long long)po->micro, D);
        return 2;
    }
    po->pc.micro = (int)(po->global / (po->micro * D));
    po->pc.chunks = 1;
    po->split = "modeled";
    s = po->schedule = cli_has(f, NFLAGS, "schedule") ? cli_get(f, NFLAGS, "schedule") : "1f1b";
    if (strcmp(s, "gpipe") == 0) po->pc.schedule = LDT_PIPE_GPIPE;
    else if (strcmp(s, "1f1b") == 0) po->pc.schedule = LDT_PIPE_1F1B;
    else {
        char *end = NULL;
        long v = strncmp(s, "interleaved:", 12) == 0 ? strtol(s + 12, &end, 10) : 0;
        if (!end || *end || v < 2 || v > 64) {
            fprintf(stderr, "ldt train: --schedule %s, expected gpipe, 1f1b or interleaved:V (V = 2..64 model chunks "
                    "a rank)\n", s);
            return 2;
        }
        po->pc.schedule = LDT_PIPE_INTERLEAVED;
        po->pc.chunks = (int)v;
    }
    if (cli_has(f, NFLAGS, "stages")) {
        const char *t = cli_get(f, NFLAGS, "stages");
        int64_t l = 0;
        int ns = 0;
        while (*t) {
            char *end;
            long n = strtol(t, &end, 10);
            if (end == t || n < 1 || l + n > cfg->layers || (*end && *end != ',')) {
                fprintf(stderr, "ldt train: --stages %s, expected layers a stage (each >= 1) summing to --layers "
                        "%lld\n", cli_get(f, NFLAGS, "stages"), (long long)cfg->layers);
                return 2;
            }
            for (long i = 0; i < n; i++) po->stage[l++] = ns;
            ns++;
            t = *end ? end + 1 : end;
        }
        if (l != cfg->layers || ns != P * po->pc.chunks) {
            fprintf(stderr, "ldt train: --stages %s gives %d stages of %lld layers; expected %d stages (pp %d x %d "
                    "chunks) of --layers %lld\n", cli_get(f, NFLAGS, "stages"), ns, (long long)l, P * po->pc.chunks, P,
                    po->pc.chunks, (long long)cfg->layers);
            return 2;
        }
        po->pc.layer_stage = po->stage;
        po->split = "given";
    }
    po->nv = P * po->pc.chunks;
    if (!po->pc.layer_stage && po->pc.schedule == LDT_PIPE_INTERLEAVED) po->split = "even";
    if (cfg->layers > 4096) {
        fprintf(stderr, "ldt train: --layers %lld with a pp mesh dim, expected at most 4096\n", (long long)cfg->layers);
        return 2;
    }
    if (cli_has(f, NFLAGS, "zero") || cli_has(f, NFLAGS, "save") || cli_has(f, NFLAGS, "resume") ||
        (cli_has(f, NFLAGS, "device") && strcmp(cli_get(f, NFLAGS, "device"), "cpu") != 0)) {
        fprintf(stderr, "ldt train: a pp mesh dim trains on CPU ranks without --zero, --save or --resume "
                "(docs/pipeline.md, what is not done)\n");
        return 2;
    }
    cfg->batch = po->micro * D; /* the model's inputs: one micro-batch over dp */
    return 0;
}

/* The stage split (docs/pipeline.md, "The stage split"): each layer and end priced by the
 * planner under the run's profile, the split that balances them unless --stages gave one
 * (interleaved: Megatron's even chunks), and each virtual stage's modeled seconds. */
static ldt_status pipe_split(pipe_opts *po, ldt_model *model, const char *pins, const ldt_cost_model *cm,
                             int64_t layers) {
    double first, last;
    ldt_status st = ldt_model_stage_seconds(model, pins, cm, po->layer_s, &first, &last);
    if (st != LDT_OK) return st;
    if (strcmp(po->split, "modeled") == 0) {
        if ((st = ldt_model_pipeline_split_seconds(layers, po->layer_s, first, last, po->nv, po->stage, po->stage_s)) != LDT_OK)
            return st;
        po->pc.layer_stage = po->stage;
        return LDT_OK;
    }
    if (!po->pc.layer_stage) /* interleaved: every chunk as deep, as the model splits it */
        for (int64_t l = 0; l < layers; l++) po->stage[l] = (int)(l / (layers / po->nv));
    for (int k = 0; k < po->nv; k++) po->stage_s[k] = 0;
    for (int64_t l = 0; l < layers; l++) po->stage_s[po->stage[l]] += po->layer_s[l];
    po->stage_s[0] += first;
    po->stage_s[po->nv - 1] += last;
    return LDT_OK;
}

/* A meta mesh of m's dims, names and ranks: what --recompute auto plans on. */
static ldt_status meta_mesh(const ldt_mesh *m, ldt_mesh **out) {
    int nd = ldt_mesh_ndim(m), n = ldt_mesh_nranks(m), *ranks = malloc((size_t)n * sizeof *ranks);
    int64_t dims[LDT_MAX_DIMS];
    const char *names[LDT_MAX_DIMS];
    ldt_status st;
    if (!ranks) return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
    for (int d = 0; d < nd && d < LDT_MAX_DIMS; d++) {
        dims[d] = ldt_mesh_dim_size(m, d);
        names[d] = ldt_mesh_dim_name(m, d);
    }
    for (int i = 0; i < n; i++) ranks[i] = ldt_mesh_rank_at(m, i);
    st = ldt_mesh_create(nd, dims, ranks, nd > 0 && names[0] ? names : NULL, LDT_DEVICE_META, out);
    free(ranks);
    return st;
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
    const char *save_dir, *load_dir, *resume_dir, *from;
    int64_t save_every = 0, start = 0, st_saved[ST_N] = {0}, st_now[ST_N] = {0};
    double hp_saved[HP_N] = {0}, hp_now[HP_N] = {0};
    ldt_tensor *t_state = NULL, *t_hp = NULL, **extras = NULL;
    int nextra = 0, zero;
    ldt_dtype ck_dtype = LDT_F32;
    static pipe_opts po;
    ldt_tensor **mtok = NULL, **mtgt = NULL;
    int64_t rows, budget = 0;
    const char *rc_text;
    int rc_auto;
    unsigned char *rc_modes = NULL;
    cli_rc_choice choice = {0};
    if (cli_parse("train", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("train", f, NFLAGS) || cli_bucket_bytes("train", f, NFLAGS, &copt.bucket_bytes)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt train [--model gpt] [--layers N --hidden H --heads A --vocab V --seq S\n"
               "                 --batch B] [--mesh M] [--steps N] [--optimizer adamw|sgd] [--lr X]\n"
               "                 [--seed S] [--dtype f32|f64|bf16|f16] [--dropout P] [--data FILE]\n"
               "                 [--sample N] [--trace FILE] [--zero] [--bucket-mb X] [--no-fuse]\n"
               "                 [--recompute none|selective|full|MODE,MODE,...|auto --memory-budget BYTES]\n"
               "                 [--profile P] [--backend threads|mpi|nccl] [--device cpu|cuda]\n"
               "                 [--save DIR [--save-every N]] [--load DIR | --resume DIR] [--json]\n"
               "                 [--global-batch G --micro-batch m --schedule gpipe|1f1b|interleaved:V\n"
               "                  --stages N,N,...] (with a pp mesh dim: docs/pipeline.md)\n\n"
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
    save_dir = cli_get(f, NFLAGS, "save");
    load_dir = cli_get(f, NFLAGS, "load");
    resume_dir = cli_get(f, NFLAGS, "resume");
    from = load_dir ? load_dir : resume_dir;
    if (load_dir && resume_dir) {
        fprintf(stderr, "ldt train: --load and --resume both given; --load takes the weights only, --resume the "
                        "whole run: expected one\n");
        return 2;
    }
    if (cli_int("train", f, NFLAGS, "save-every", 0, 1, &save_every)) return 2;
    if (save_every && !save_dir) {
        fprintf(stderr, "ldt train: --save-every needs --save DIR\n");
        return 2;
    }
    if (from) { /* the model sizes default to the checkpoint's; flags that differ are refused at load */
        ldt_model_config ck = cfg;
        const char *kind = NULL;
        if (ldt_model_config_load(from, &ck, &kind) != LDT_OK) return cli_fail("train");
        if (strcmp(kind, "gpt") != 0) {
            fprintf(stderr, "ldt train: %s holds a %s model; ldt train trains gpt\n", from, kind);
            return 2;
        }
        cfg.layers = ck.layers, cfg.hidden = ck.hidden, cfg.heads = ck.heads, cfg.vocab = ck.vocab;
        cfg.positions = ck.positions;
        ck_dtype = ck.dtype;
    }
    if (resume_dir) { /* the run's settings default to the saved run's; differences are refused below */
        if (load_small(resume_dir, "train.state", LDT_I64, ST_N, st_saved) != LDT_OK ||
            load_small(resume_dir, "train.config", LDT_F64, HP_N, hp_saved) != LDT_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", ldt_last_error());
            fprintf(stderr, "ldt train: --resume %s: no training state (%s); a checkpoint of ldt train --save "
                            "resumes, --load takes weights\n", resume_dir, why);
            return 1;
        }
        if (st_saved[ST_VERSION] != 1) {
            fprintf(stderr, "ldt train: --resume %s: training state version %lld, expected 1\n", resume_dir,
                    (long long)st_saved[ST_VERSION]);
            return 1;
        }
        cfg.batch = st_saved[ST_BATCH], cfg.seq = st_saved[ST_SEQ];
    }
    if (cli_model_sizes("train", f, NFLAGS, &cfg) || cli_int("train", f, NFLAGS, "steps", 200, 1, &steps) ||
        cli_int("train", f, NFLAGS, "seed", 1, 0, &seed) || cli_int("train", f, NFLAGS, "sample", 40, 0, &nsample))
        return 2;
    if (cli_real("train", f, NFLAGS, "lr", 3e-3, &lr) || cli_real("train", f, NFLAGS, "dropout", 0.1, &dropout))
        return 2;
    /* --recompute auto chooses the mix under --memory-budget; the budget has no other use here */
    rc_text = cli_get(f, NFLAGS, "recompute");
    rc_auto = rc_text && strcmp(rc_text, "auto") == 0;
    if (cli_int("train", f, NFLAGS, "memory-budget", 0, 1, &budget)) return 2;
    if (rc_auto && !budget) {
        fprintf(stderr, "ldt train: --recompute auto needs --memory-budget BYTES (per rank: the mix of recomputed "
                        "layers that fits it)\n");
        return 2;
    }
    if (budget && !rc_auto) {
        fprintf(stderr, "ldt train: --memory-budget is only used by --recompute auto in ldt train (the mix of "
                        "recomputed layers that fits it); ldt plan --train --memory-budget plans a fixed mode's step "
                        "under it\n");
        return 2;
    }
    if (resume_dir) {
        if (!cli_has(f, NFLAGS, "seed")) seed = st_saved[ST_SEED];
        if (!cli_has(f, NFLAGS, "lr")) lr = hp_saved[HP_LR];
        if (!cli_has(f, NFLAGS, "dropout")) dropout = hp_saved[HP_DROPOUT];
    }
    if (from && !cli_has(f, NFLAGS, "seq") && cfg.seq > cfg.positions) cfg.seq = cfg.positions;
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
    s_opt = cli_has(f, NFLAGS, "optimizer") ? cli_get(f, NFLAGS, "optimizer")
            : resume_dir && hp_saved[HP_OPTIM] == LDT_OPTIM_SGD ? "sgd" : "adamw";
    zero = cli_has(f, NFLAGS, "zero") || (resume_dir && hp_saved[HP_ZERO] != 0);
    s_dt = cli_has(f, NFLAGS, "dtype") ? cli_get(f, NFLAGS, "dtype") : from ? ldt_dtype_name(ck_dtype) : "f32";
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
    copt.no_fuse = cli_has(f, NFLAGS, "no-fuse");
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
        if (save_dir) { /* every process would write the directory */
            fprintf(stderr, "ldt train: --save runs with --backend threads (one process); under mpi and nccl "
                            "each process would write DIR\n");
            free(text);
            ldt_mpi_world_destroy(world);
            return 2;
        }
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
    if (!world && cli_rank_threads_fit("train", mesh)) {
        free(text);
        ldt_mesh_destroy(mesh);
        return 1;
    }
    if (pipe_flags(f, mesh, &cfg, &po)) {
        free(text);
        ldt_mesh_destroy(mesh);
        ldt_mpi_world_destroy(world);
        return 2;
    }
    if (po.on && rc_auto) {
        fprintf(stderr, "ldt train: --recompute auto with a pp mesh dim: the chooser plans the step without stages; "
                        "give the modes per layer (--recompute full,selective,none,...; docs/recompute.md)\n");
        free(text);
        ldt_mesh_destroy(mesh);
        ldt_mpi_world_destroy(world);
        return 2;
    }
    rows = po.on ? po.global : cfg.batch; /* sequences a step */
    if (po.on) copt.no_fuse = 1; /* a pipeline's collectives run unfused (docs/pipeline.md) */
    /* the planner's numbers; under mpi, compile broadcasts rank 0's */
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) {
        free(text);
        ldt_mesh_destroy(mesh);
        ldt_mpi_world_destroy(world);
        return cli_fail("train");
    }
    /* under mpi every process takes rank 0's profile now, not only at compile: the stage
     * split is priced by it before the step is traced, and must be the same on every rank */
    if (world && ldt_broadcast(world, &cm, (int64_t)sizeof cm, LDT_U8, 0) != LDT_OK) {
        free(text);
        ldt_mesh_destroy(mesh);
        ldt_mpi_world_destroy(world);
        return cli_fail("train");
    }
    oc.kind = strcmp(s_opt, "sgd") == 0 ? LDT_OPTIM_SGD : LDT_OPTIM_ADAMW;
    oc.lr = lr;
    oc.momentum = oc.kind == LDT_OPTIM_SGD ? 0.9 : 0;
    oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.01, oc.clip_norm = 1.0;
    oc.schedule = LDT_LR_WARMUP_LINEAR;
    oc.warmup_steps = steps < 10 ? 1 : 10;
    oc.total_steps = steps;
    copt.plan.cost = &cm;
    /* --recompute auto: the mix chosen on a meta mesh of this one, with this run's model,
     * update and profile (under mpi, rank 0's: every process chooses the same; its choice is
     * broadcast all the same) */
    if (rc_auto) {
        const char *pins = cli_has(f, NFLAGS, "sp") ? "megatron-sp" : "megatron";
        cli_step_optim so;
        ldt_mesh *meta = NULL;
        ldt_status st;
        memset(&so, 0, sizeof so);
        so.oc = oc, so.zero = zero, so.sync_dp = 1;
        if (!(rc_modes = malloc((size_t)cfg.layers))) st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
        else if ((st = meta_mesh(mesh, &meta)) == LDT_OK) {
            cli_rc_job job = {"train", "gpt", &cfg, pins, meta, &copt.plan, &so};
            st = cli_recompute_choose(&job, budget, rc_modes, &choice);
        }
        ldt_mesh_destroy(meta);
        if (st == LDT_OK && world) st = ldt_broadcast(world, rc_modes, cfg.layers, LDT_U8, 0);
        if (st != LDT_OK || !choice.fits) {
            if (st == LDT_OK)
                fprintf(stderr, "ldt train: --recompute auto: no mix fits --memory-budget %lld bytes per rank: every "
                                "layer full has the least modeled peak, %lld bytes (every layer selective %lld, none "
                                "%lld; %d plans)\n", (long long)budget, (long long)choice.peak,
                        (long long)choice.uniform_peak[1], (long long)choice.uniform_peak[0], choice.plans);
            rc = st == LDT_OK ? 1 : cli_fail("train");
            free(text);
            free(rc_modes);
            ldt_mesh_destroy(mesh);
            ldt_mpi_world_destroy(world);
            return rc;
        }
    }
    co.mesh = mesh;
    co.world = world;
    co.seed = (uint64_t)seed;
    losses = calloc((size_t)steps, sizeof *losses);
    times = calloc((size_t)steps, sizeof *times);
    tok = malloc((size_t)(rows * cfg.seq) * sizeof *tok);
    tgt = malloc((size_t)(rows * cfg.seq) * sizeof *tgt);
    mtok = calloc((size_t)(po.on ? po.pc.micro : 1), sizeof *mtok);
    mtgt = calloc((size_t)(po.on ? po.pc.micro : 1), sizeof *mtgt);
    if (!losses || !times || !tok || !tgt || !mtok || !mtgt) goto fail;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, "gpt", &cfg, &model) != LDT_OK ||
        ldt_model_init(model, (uint64_t)seed) != LDT_OK || ldt_model_pin(model, cli_has(f, NFLAGS, "sp") ? "megatron-sp" : "megatron") != LDT_OK)
        goto fail;
    for (int64_t l = 0; rc_modes && l < cfg.layers; l++)
        if (ldt_model_set_recompute(model, l, cli_recompute_modes[rc_modes[l]]) != LDT_OK) goto fail;
    if (rc_text && !rc_auto && cli_recompute_set("train", model, rc_text)) {
        rc = 2;
        goto done;
    }
    /* the split (fewer layers than stages, or uneven interleaved chunks: the pipeline's forward
     * refuses them, saying why) */
    if (po.on && cfg.layers >= po.nv && (po.pc.schedule != LDT_PIPE_INTERLEAVED || cfg.layers % po.nv == 0) &&
        pipe_split(&po, model, cli_has(f, NFLAGS, "sp") ? "megatron-sp" : "megatron", &cm, cfg.layers) != LDT_OK)
        goto fail;
    np = ldt_model_nparams(model);
    if (np > 4096) {
        ldt_set_error(LDT_ERR_UNSUPPORTED, "%d parameters; this command takes up to 4096", np);
        goto fail;
    }
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(model, i, NULL);
    for (int i = 0; po.on && i < po.pc.micro; i++) { /* micro-batch i's inputs (0: the model's own) */
        ldt_placement pl[LDT_MAX_DIMS];
        int pinned = 0;
        char nm[48];
        mtok[i] = ldt_model_input(model, 0, NULL);
        mtgt[i] = ldt_model_input(model, 1, NULL);
        if (i == 0) continue;
        snprintf(nm, sizeof nm, "tokens.%d", i);
        mtok[i] = ldt_input(ctx, nm, &(ldt_shape){2, {cfg.batch, cfg.seq}}, LDT_I64);
        snprintf(nm, sizeof nm, "targets.%d", i);
        mtgt[i] = ldt_input(ctx, nm, &(ldt_shape){2, {cfg.batch, cfg.seq}}, LDT_I64);
        if (!mtok[i] || !mtgt[i] ||
            ldt_tensor_pin(ldt_model_input(model, 0, NULL), pl, LDT_MAX_DIMS, &pinned) != LDT_OK ||
            (pinned && (ldt_pin(mtok[i], pl, ldt_mesh_ndim(mesh)) != LDT_OK ||
                        ldt_pin(mtgt[i], pl, ldt_mesh_ndim(mesh)) != LDT_OK)))
            goto fail;
    }
    if (load_dir && ldt_model_load(model, load_dir, 0, NULL) != LDT_OK) goto fail;
    t_state = ldt_param(ctx, "train.state", &(ldt_shape){1, {ST_N}}, LDT_I64);
    t_hp = ldt_param(ctx, "train.config", &(ldt_shape){1, {HP_N}}, LDT_F64);
    if (!t_state || !t_hp || !(extras = malloc((size_t)(3 * np + 3) * sizeof *extras))) {
        ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    st_now[ST_VERSION] = 1, st_now[ST_SEED] = seed, st_now[ST_BATCH] = cfg.batch, st_now[ST_SEQ] = cfg.seq;
    st_now[ST_DATA_HASH] = text_hash(text, len);
    hp_now[HP_OPTIM] = oc.kind, hp_now[HP_LR] = oc.lr, hp_now[HP_BETA1] = oc.beta1, hp_now[HP_BETA2] = oc.beta2;
    hp_now[HP_EPS] = oc.eps, hp_now[HP_WD] = oc.weight_decay, hp_now[HP_CLIP] = oc.clip_norm;
    hp_now[HP_MOMENTUM] = oc.momentum, hp_now[HP_DROPOUT] = dropout, hp_now[HP_ZERO] = zero;
    if (resume_dir) { /* the run's settings must be the saved run's */
        for (int i = ST_SEED; i < ST_N; i++)
            if (i != ST_RNG_OFFSET && i != ST_DATA_POS && st_saved[i] != st_now[i]) {
                ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "--resume %s: the run was saved with %s = %lld, this run has "
                              "%lld: a resumed run continues the saved one exactly", resume_dir, k_st_names[i],
                              (long long)st_saved[i], (long long)st_now[i]);
                goto fail;
            }
        for (int i = 0; i < HP_N; i++)
            if (i != HP_WARMUP && i != HP_TOTAL && hp_saved[i] != hp_now[i]) {
                char a[32], b[32];
                ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "--resume %s: the run was saved with %s = %s, this run has "
                              "%s: a resumed run continues the saved one exactly", resume_dir, k_hp_names[i],
                              real_text(hp_saved[i], a, sizeof a), real_text(hp_now[i], b, sizeof b));
                goto fail;
            }
        start = st_saved[ST_STEP];
        if (start < 0 || start >= steps || st_saved[ST_DATA_POS] != start) {
            ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "--resume %s: the run saved has done %lld steps; --steps %lld is "
                          "the total, expected more", resume_dir, (long long)start, (long long)steps);
            goto fail;
        }
        oc.warmup_steps = (int64_t)hp_saved[HP_WARMUP]; /* the schedule of the run that began */
    }
    hp_now[HP_WARMUP] = (double)oc.warmup_steps, hp_now[HP_TOTAL] = (double)steps;
    if (ldt_optim_create(ctx, &oc, ps, np, &opt) != LDT_OK) goto fail;
    if (zero) {
        int dp;
        if (ldt_mesh_dim_index(mesh, "dp", &dp) != LDT_OK) {
            ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "--zero needs a mesh dim named dp (e.g. --mesh dp=2,tp=2)");
            goto fail;
        }
        if (ldt_optim_shard_states(opt, dp) != LDT_OK) goto fail;
    }
    if (cli_sync_grads(opt, mesh) != LDT_OK) goto fail;
    for (int i = 0; i < np; i++) /* the optimizer's persistent state, saved and resumed */
        for (int w = 0; w < 3; w++)
            if (ldt_optim_state(opt, i, w)) extras[nextra++] = ldt_optim_state(opt, i, w);
    extras[nextra++] = ldt_optim_step_counter(opt);
    if (resume_dir && ldt_model_load(model, resume_dir, nextra, extras) != LDT_OK) goto fail;
    extras[nextra++] = t_state;
    extras[nextra++] = t_hp;
    if (ldt_param_set(t_hp, hp_now, sizeof hp_now) != LDT_OK) goto fail;
    ldt_ctx_set_seed(ctx, (uint64_t)seed, resume_dir ? (uint64_t)st_saved[ST_RNG_OFFSET] : ldt_ctx_rng_offset(ctx));
    for (int k = (int)start; k < steps; k++) {
        ldt_tensor *loss, *g[4096];
        ldt_exec *ex;
        double t0 = now_s();
        batch(text, len, rows, cfg.seq, (uint64_t)seed, k, tok, tgt);
        if (po.on) { /* micro-batch i: rows [i b, (i + 1) b), b = --micro-batch x dp */
            int64_t n = cfg.batch * cfg.seq;
            for (int i = 0; i < po.pc.micro; i++)
                if (ldt_input_bind(mtok[i], tok + i * n, n * 8) != LDT_OK || ldt_input_bind(mtgt[i], tgt + i * n, n * 8) != LDT_OK)
                    goto fail;
            if (!(loss = ldt_model_forward_pipeline(model, &po.pc, mtok, mtgt))) goto fail;
        } else if (ldt_input_bind(ldt_model_input(model, 0, NULL), tok, cfg.batch * cfg.seq * 8) != LDT_OK ||
                   ldt_input_bind(ldt_model_input(model, 1, NULL), tgt, cfg.batch * cfg.seq * 8) != LDT_OK) {
            goto fail;
        } else if (!(loss = ldt_model_forward(model))) {
            ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
            goto fail;
        }
        if (ldt_grad(loss, ps, np, g) != LDT_OK || ldt_optim_step(opt, g) != LDT_OK ||
            ldt_compile(ctx, &loss, 1, &copt, &ex) != LDT_OK)
            goto fail;
        if (k == start) t_compile = now_s() - t0;
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
                    (double)(rows * cfg.seq) / times[k], times[k] * 1e3);
            if (k + 1 == steps) fputc('\n', stderr);
        }
        /* logs: the first step, then every tenth of the steps (and the last) */
        if (log_lines && !json && (k == start || (k + 1) % (steps >= 10 ? steps / 10 : 1) == 0 || k + 1 == steps)) {
            printf("step %d/%lld loss %.4f\n", k + 1, (long long)steps, losses[k]);
            fflush(stdout);
        }
        /* the step count, the stream position and the next batch: what the next step starts from */
        if (save_dir && (k + 1 == steps || (save_every && (k + 1) % save_every == 0))) {
            st_now[ST_STEP] = k + 1, st_now[ST_DATA_POS] = k + 1;
            st_now[ST_RNG_OFFSET] = (int64_t)ldt_ctx_rng_offset(ctx);
            if (ldt_param_set(t_state, st_now, sizeof st_now) != LDT_OK ||
                ldt_model_save(model, save_dir, nextra, extras) != LDT_OK)
                goto fail;
            if (log_lines && !json && k + 1 < steps) printf("saved %s at step %d\n", save_dir, k + 1);
        }
    }
    {
        int64_t nrun = steps - start;
        double *sorted = malloc((size_t)nrun * sizeof *sorted), med, lo, hi, tail = 0;
        int ntail = nrun < 10 ? (int)nrun : 10;
        if (!sorted) goto fail;
        memcpy(sorted, times + start, (size_t)nrun * sizeof *sorted);
        for (int i = 1; i < nrun; i++) /* insertion sort: steps are few */
            for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
                double x = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = x;
            }
        med = sorted[nrun / 2];
        lo = sorted[0];
        hi = sorted[nrun - 1];
        free(sorted);
        for (int i = 0; i < ntail; i++) tail += losses[steps - 1 - i] / ntail;
        if (json) {
            printf("{");
            cli_config_json(stdout, "gpt", &cfg, cli_has(f, NFLAGS, "sp") ? "megatron-sp" : "megatron", mesh);
            putchar(',');
            cli_recompute_json(stdout, model);
            if (rc_modes) /* --recompute auto: the chooser's plans and the chosen mix's modeled figures */
                printf(",\"recompute_plans\":%d,\"memory_budget\":%lld,\"modeled_peak_bytes\":%lld,"
                       "\"modeled_step_seconds\":%.9g", choice.plans, (long long)budget, (long long)choice.peak,
                       choice.seconds);
            putchar(',');
            cli_profile_json(stdout, &cm);
            printf(",\"fused\":%s", copt.no_fuse ? "false" : "true");
            if (po.on) {
                printf(",\"global_batch\":%lld,\"micro_batch\":%lld,\"micro_batches\":%d,\"schedule\":\"%s\"",
                       (long long)po.global, (long long)po.micro, po.pc.micro, po.schedule);
                /* the split: layers and modeled seconds (a micro-batch, forward and backward) per virtual stage */
                printf(",\"stage_split\":\"%s\",\"stages\":[", po.split);
                for (int k = 0, l = 0; k < po.nv; k++) {
                    int n = 0;
                    while (l < cfg.layers && po.stage[l] == k) n++, l++;
                    printf("%s%d", k ? "," : "", n);
                }
                printf("],\"stage_seconds\":[");
                for (int k = 0; k < po.nv; k++) printf("%s%.9g", k ? "," : "", po.stage_s[k]);
                printf("]");
            }
            printf(",\"first_step\":%lld,\"losses\":[", (long long)start);
            /* every digit: runs are compared with each other to 1e-9 (scripts/gpu-check.sh) */
            for (int k = (int)start; k < steps; k++) printf("%s%.17g", k > start ? "," : "", losses[k]);
            printf("],\"tokens_per_second\":%.6g,\"step_seconds\":{\"median\":%.9g,\"min\":%.9g,\"max\":%.9g},"
                   "\"compile_seconds\":%.9g,\"last10_mean_loss\":%.9g,\"ln_vocab\":%.9g}\n",
                   (double)(rows * cfg.seq) / med, med, lo, hi, t_compile, tail, log((double)cfg.vocab));
        } else {
            if (start > 0) printf("resumed %s at step %lld\n", resume_dir, (long long)start);
            printf("trained %lld steps: loss %.4f -> %.4f (mean of the last %d %.4f; ln(vocab) %.4f); "
                   "%.0f tokens/s, %.2f ms a step (median), compile %.1f ms\n",
                   (long long)nrun, losses[start], losses[steps - 1], ntail, tail, log((double)cfg.vocab),
                   (double)(rows * cfg.seq) / med, med * 1e3, t_compile * 1e3);
            if (rc_modes) {
                int64_t cnt[3] = {0, 0, 0};
                for (int64_t l = 0; l < cfg.layers; l++) cnt[rc_modes[l]]++;
                printf("recompute (auto, %d mixes planned): %lld layers full, %lld selective, %lld none; modeled peak "
                       "%lld bytes per rank within --memory-budget %lld, modeled step %.6g s\n", choice.plans,
                       (long long)cnt[2], (long long)cnt[1], (long long)cnt[0], (long long)choice.peak,
                       (long long)budget, choice.seconds);
            }
            if (copt.trace_path) printf("Chrome trace of the last step: %s\n", copt.trace_path);
            if (save_dir) printf("saved %s at step %lld\n", save_dir, (long long)steps);
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
    free(mtok);
    free(mtgt);
    free(extras);
    free(rc_modes);
    return rc;
}
