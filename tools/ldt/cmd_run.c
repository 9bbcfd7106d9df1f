/* ldt run: compile a model's forward pass for a mesh and replay it step after step with new
 * inputs, printing each step's loss, the replay time and what the compile made. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 21

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "mlp or gpt (default gpt)", NULL},
        {"mesh", 1, "device mesh of rank threads: 4, 2x2, dp=2,tp=2 (default 4)", NULL},
        CLI_MODEL_SIZE_FLAGS,
        {"dropout", 1, "gpt dropout probability, on while training (default 0)", NULL},
        CLI_PINS_FLAG,
        {"steps", 1, "replays (default 5)", NULL},
        {"seed", 1, "random stream seed (default 0)", NULL},
        {"trace", 1, "write a Chrome trace JSON of the last replay to FILE", NULL},
        {"no-fuse", 0, "keep every collective a call of its own", NULL},
        {"no-overlap", 0, "run collectives in line", NULL},
        {"overlap", 0, "run collectives on communication threads (default: when there are cores for them)", NULL},
        {"load", 1, "the weights of the checkpoint DIR (ldt ckpt import-hf's, ldt train --save's); "
                     "the model and its sizes default to its", NULL},
        CLI_PROFILE_FLAG,
        {"json", 0, "one JSON object", NULL},
        CLI_COMM_TIMEOUT_FLAG,
        {"help", 0, "this help", NULL},
    };
    return flags;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Step k's inputs: token ids (gpt) or values (mlp) from a fixed rule. */
static int bind_inputs(ldt_model *m, int k, int64_t vocab) {
    for (int i = 0; i < ldt_model_ninputs(m); i++) {
        ldt_tensor *t = ldt_model_input(m, i, NULL);
        ldt_shape s;
        int64_t n = 1, es;
        char *d;
        ldt_tensor_shape(t, &s);
        for (int j = 0; j < s.ndim; j++) n *= s.dims[j];
        es = (int64_t)ldt_dtype_size(ldt_tensor_dtype(t));
        if (!(d = malloc((size_t)(n * es > 0 ? n * es : 1)))) return 1;
        for (int64_t j = 0; j < n; j++) {
            uint64_t h = (uint64_t)(j * 2654435761u + (uint64_t)k * 40503u + (uint64_t)i * 97u);
            if (ldt_tensor_dtype(t) == LDT_I64) ((int64_t *)d)[j] = (int64_t)(h % (uint64_t)vocab);
            else ((float *)d)[j] = (float)(h % 1000) / 1000.0f - 0.5f;
        }
        if (ldt_input_bind(t, d, n * es) != LDT_OK) {
            free(d);
            return 1;
        }
        free(d);
    }
    return 0;
}

int cmd_run(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_exec *ex = NULL;
    ldt_ctx_options co = {0};
    ldt_compile_options opt = {0};
    ldt_cost_model cm;
    ldt_model_config cfg;
    ldt_exec_stats es;
    const char *kind, *pins;
    double dropout, t_compile, t_total = 0;
    int64_t steps, seed;
    float *loss = NULL;
    double *times = NULL;
    int rc = 1, json;
    if (cli_parse("run", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("run", f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt run [--model mlp|gpt] [--mesh M] [--layers N --hidden H --heads A --vocab V\n"
               "               --seq S --batch B --dropout P] [--pins megatron|none] [--steps N]\n"
               "               [--trace FILE] [--no-fuse] [--overlap|--no-overlap] [--load DIR]\n"
               "               [--profile P] [--json]\n\n"
               "Traces the model's forward pass once, compiles it for the mesh (plan, fuse,\n"
               "schedule, memory plan, bind) and replays it --steps times with new inputs on\n"
               "rank threads, printing each step's loss.\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    kind = cli_has(f, NFLAGS, "model") ? cli_get(f, NFLAGS, "model") : "gpt";
    pins = cli_has(f, NFLAGS, "pins") ? cli_get(f, NFLAGS, "pins") : CLI_DEFAULT_PINS;
    cfg = ldt_model_config_default(kind);
    if (cli_has(f, NFLAGS, "load")) { /* the model and its sizes default to the checkpoint's */
        const char *ck_kind = NULL;
        if (ldt_model_config_load(cli_get(f, NFLAGS, "load"), &cfg, &ck_kind) != LDT_OK) return cli_fail("run");
        if (cli_has(f, NFLAGS, "model") && strcmp(kind, ck_kind) != 0) {
            fprintf(stderr, "ldt run: --model %s, but %s holds a %s model\n", kind, cli_get(f, NFLAGS, "load"), ck_kind);
            return 2;
        }
        kind = ck_kind;
        if (cfg.dtype != LDT_F32) {
            fprintf(stderr, "ldt run: %s holds %s weights; ldt run reads f32 losses (import with --dtype f32)\n",
                    cli_get(f, NFLAGS, "load"), ldt_dtype_name(cfg.dtype));
            return 2;
        }
    }
    if (cli_model_sizes("run", f, NFLAGS, &cfg) || cli_real("run", f, NFLAGS, "dropout", 0, &dropout) ||
        cli_int("run", f, NFLAGS, "steps", 5, 1, &steps) || cli_int("run", f, NFLAGS, "seed", 0, 0, &seed))
        return 2;
    if (cli_has(f, NFLAGS, "load") && !cli_has(f, NFLAGS, "seq") && cfg.positions && cfg.seq > cfg.positions)
        cfg.seq = cfg.positions;
    if (!(dropout >= 0 && dropout < 1)) {
        fprintf(stderr, "ldt run: --dropout is '%s', expected 0 <= p < 1\n", cli_get(f, NFLAGS, "dropout"));
        return 2;
    }
    if (steps > ((int64_t)1 << 30)) {
        fprintf(stderr, "ldt run: --steps %lld, expected at most 2^30\n", (long long)steps);
        return 2;
    }
    cfg.dropout = dropout;
    cfg.train = dropout > 0;
    json = cli_has(f, NFLAGS, "json");
    opt.trace_path = cli_get(f, NFLAGS, "trace");
    opt.no_fuse = cli_has(f, NFLAGS, "no-fuse");
    opt.overlap = cli_has(f, NFLAGS, "no-overlap") ? -1 : cli_has(f, NFLAGS, "overlap") ? 1 : 0;
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "4", LDT_DEVICE_CPU,
                       &mesh) != LDT_OK)
        return cli_fail("run");
    if (cli_rank_threads_fit("run", mesh)) {
        ldt_mesh_destroy(mesh);
        return 1;
    }
    co.mesh = mesh;
    co.seed = (uint64_t)seed;
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) goto fail;
    opt.plan.cost = &cm;
    if (!(loss = calloc((size_t)steps, sizeof *loss)) || !(times = calloc((size_t)steps, sizeof *times))) goto fail;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, kind, &cfg, &model) != LDT_OK ||
        ldt_model_init(model, (uint64_t)seed + 1) != LDT_OK ||
        (cli_has(f, NFLAGS, "load") && ldt_model_load(model, cli_get(f, NFLAGS, "load"), 0, NULL) != LDT_OK) ||
        ldt_model_pin(model, pins) != LDT_OK)
        goto fail;
    {
        double t0 = now_s();
        ldt_tensor *l = ldt_model_forward(model);
        if (!l) {
            ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
            goto fail;
        }
        if (ldt_compile(ctx, &l, 1, &opt, &ex) != LDT_OK) goto fail;
        t_compile = now_s() - t0;
    }
    for (int k = 0; k < (int)steps; k++) {
        double t0;
        if (bind_inputs(model, k, cfg.vocab) != 0) goto fail;
        t0 = now_s();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        times[k] = now_s() - t0;
        t_total += times[k];
        if (ldt_exec_read(ex, 0, &loss[k], sizeof loss[k]) != LDT_OK) goto fail;
        if (!json) printf("step %d  loss %.6f\n", k, loss[k]);
    }
    ldt_exec_stats_get(ex, &es);
    if (json) {
        int n = (int)steps;
        qsort(times, (size_t)n, sizeof *times, cmp_d);
        printf("{");
        cli_config_json(stdout, kind, &cfg, pins, mesh);
        putchar(',');
        cli_profile_json(stdout, &cm);
        printf(",\"replays\":%d,\"losses\":[", n);
        for (int k = 0; k < n; k++) printf("%s%.9g", k ? "," : "", loss[k]);
        printf("],\"compile_seconds\":%.9g,\"step_seconds\":{\"median\":%.9g,\"min\":%.9g,\"max\":%.9g},"
               "\"instructions_per_rank\":%lld,\"arena_bytes_per_rank\":%lld,\"bound_bytes_per_rank\":%lld,"
               "\"collectives\":%lld,\"collectives_unfused\":%lld,\"modeled_step_seconds\":%.9g,"
               "\"modeled_overlap_seconds\":%.9g}\n",
               t_compile, times[n / 2], times[0], times[n - 1], (long long)es.instructions, (long long)es.arena_bytes,
               (long long)es.bound_bytes, (long long)es.collectives, (long long)es.collectives_unfused,
               es.modeled_step_seconds, es.modeled_overlap_seconds);
    } else {
        printf("compile %.3f ms, replay %.3f ms per step; %lld instructions per rank, arena %lld B "
               "(bound %lld B), %lld collective calls per step (%lld unfused)\n",
               t_compile * 1e3, t_total / (double)steps * 1e3, (long long)es.instructions, (long long)es.arena_bytes,
               (long long)es.bound_bytes, (long long)es.collectives, (long long)es.collectives_unfused);
        if (opt.trace_path) printf("wrote %s\n", opt.trace_path);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("run");
done:
    free(loss);
    free(times);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}
