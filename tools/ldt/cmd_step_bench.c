/* ldt step-bench: capture a model's training step (forward, backward, AdamW) once, replay it
 * N times and report where the time goes: step time, a per-op and per-collective breakdown,
 * achieved FLOP/s and bus bandwidth, modeled against measured, and the arena per rank.
 * The timed replays run with profiling off; the breakdown comes from a separate profiled
 * executable of the same step, replayed once more on its own, which also splits its busiest
 * rank's time into work, waiting for peers inside collectives, and the rest (outside). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 17
#define MAXOPS 64

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "mlp or gpt (default gpt)", NULL},
        CLI_MODEL_SIZE_FLAGS,
        {"mesh", 1, "device mesh of rank threads (default dp=2,tp=2)", NULL},
        CLI_PINS_FLAG,
        {"steps", 1, "replays to time (default 10)", NULL},
        {"forward", 0, "the forward pass only, not the training step", NULL},
        {"backend", 1, "threads (default) or mpi (one process per rank, under mpirun; rank 0 reports "
                       "its rank)", NULL},
        CLI_PROFILE_FLAG,
        {"json", 0, "one JSON object", NULL},
        CLI_BUCKET_FLAG,
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

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The step: the forward, and unless forward_only its gradients and an AdamW update. */
static ldt_status record(ldt_model *m, ldt_optim *o, int forward_only, ldt_tensor **loss) {
    ldt_tensor *ps[4096], *gs[4096];
    int np = ldt_model_nparams(m);
    ldt_status st;
    if (!(*loss = ldt_model_forward(m)))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "the forward pass failed: %s", ldt_last_error());
    if (forward_only) return LDT_OK;
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    if ((st = ldt_grad(*loss, ps, np, gs)) != LDT_OK) return st;
    return ldt_optim_step(o, gs);
}

int cmd_step_bench(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_optim *o = NULL;
    ldt_ctx_options co = {0};
    ldt_compile_options copt = {0};
    ldt_cost_model cm;
    ldt_optim_config oc = {0};
    ldt_model_config cfg;
    ldt_exec *ex = NULL;
    ldt_exec_stats es;
    ldt_exec_op_time ops[MAXOPS];
    ldt_tensor *loss, *ps[4096];
    const char *kind, *pins;
    double *t = NULL, total_flops = 0, inside = 0, prof_wall = 0, wait_frac = -1, outside_frac = 0;
    ldt_exec *pex = NULL;
    int64_t steps;
    int rc = 1, nops = 0, fwd, json, dp = -1;
    const char *b;
    ldt_comm *world = NULL;
    if (cli_parse("step-bench", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("step-bench", f, NFLAGS) || cli_bucket_bytes("step-bench", f, NFLAGS, &copt.bucket_bytes))
        return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt step-bench [--model mlp|gpt] [--layers N --hidden H --heads A --vocab V\n"
               "                      --seq S --batch B] [--mesh M] [--pins megatron|none]\n"
               "                      [--steps N] [--forward] [--backend threads|mpi] [--bucket-mb X]\n"
               "                      [--profile P] [--json]\n\n"
               "Captures the training step once, replays it N times and reports step time, a\n"
               "breakdown by op and collective (FLOP/s, bus bandwidth), modeled against measured,\n"
               "and the arena per rank.\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    kind = cli_has(f, NFLAGS, "model") ? cli_get(f, NFLAGS, "model") : "gpt";
    pins = cli_has(f, NFLAGS, "pins") ? cli_get(f, NFLAGS, "pins") : CLI_DEFAULT_PINS;
    cfg = ldt_model_config_default(kind);
    if (cli_model_sizes("step-bench", f, NFLAGS, &cfg) || cli_int("step-bench", f, NFLAGS, "steps", 10, 1, &steps))
        return 2;
    fwd = cli_has(f, NFLAGS, "forward");
    json = cli_has(f, NFLAGS, "json");
    if ((b = cli_get(f, NFLAGS, "backend")) && strcmp(b, "threads") != 0 && strcmp(b, "mpi") != 0) {
        fprintf(stderr, "ldt step-bench: --backend %s, expected threads or mpi\n", b);
        return 2;
    }
    if (b && strcmp(b, "mpi") == 0) { /* every process runs this; rank 0 reports */
        if (ldt_mpi_world(NULL, &world) != LDT_OK) return cli_fail("step-bench");
        if (ldt_comm_rank(world) != 0 && !freopen("/dev/null", "w", stdout)) return 1;
        co.world = world;
    }
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "dp=2,tp=2", LDT_DEVICE_CPU,
                       &mesh) != LDT_OK) {
        rc = cli_fail("step-bench");
        ldt_mpi_world_destroy(world);
        return rc;
    }
    if (!world && cli_rank_threads_fit("step-bench", mesh)) {
        ldt_mesh_destroy(mesh);
        return 1;
    }
    co.mesh = mesh;
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) goto fail;
    copt.plan.cost = &cm;
    if (!(t = calloc((size_t)steps, sizeof *t))) goto fail;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, kind, &cfg, &m) != LDT_OK ||
        ldt_model_init(m, 1) != LDT_OK ||
        ldt_model_pin(m, pins) != LDT_OK)
        goto fail;
    for (int i = 0; i < ldt_model_ninputs(m); i++) { /* deterministic data */
        ldt_tensor *in = ldt_model_input(m, i, NULL);
        ldt_shape s;
        int64_t n = 1, es_ = (int64_t)ldt_dtype_size(ldt_tensor_dtype(in));
        char *d;
        ldt_tensor_shape(in, &s);
        for (int k = 0; k < s.ndim; k++) n *= s.dims[k];
        if (!(d = calloc((size_t)(n * es_ > 0 ? n * es_ : 1), 1))) goto fail;
        for (int64_t k = 0; k < n; k++)
            if (ldt_tensor_dtype(in) == LDT_I64) ((int64_t *)d)[k] = (k * 7 + i) % cfg.vocab;
            else if (ldt_tensor_dtype(in) == LDT_F32) ((float *)d)[k] = (float)((k * 7 + i) % 13) / 13.0f - 0.5f;
        if (ldt_input_bind(in, d, n * es_) != LDT_OK) {
            free(d);
            goto fail;
        }
        free(d);
    }
    for (int i = 0; i < ldt_model_nparams(m) && i < 4096; i++) ps[i] = ldt_model_param(m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 1e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.total_steps = steps + 2;
    if (!fwd && (ldt_optim_create(ctx, &oc, ps, ldt_model_nparams(m), &o) != LDT_OK || cli_sync_grads(o, mesh) != LDT_OK))
        goto fail;
    copt.overlap = -1; /* collectives in line: their time is their own in the breakdown */
    for (int64_t k = 0; k < steps + 1; k++) { /* one warm-up replay, then the timed ones */
        double t0;
        if (record(m, o, fwd, &loss) != LDT_OK || ldt_compile(ctx, &loss, 1, &copt, &ex) != LDT_OK) goto fail;
        t0 = now_s();
        if (ldt_replay(ex) != LDT_OK) goto fail;
        if (k) t[k - 1] = now_s() - t0;
    }
    if (ldt_mesh_dim_index(mesh, "dp", &dp) != LDT_OK) {
        dp = -1;
        ldt_clear_error();
    }
    /* the breakdown: the same step compiled with profiling, one warm-up, one measured replay */
    copt.profile = 1;
    if (record(m, o, fwd, &loss) != LDT_OK || ldt_compile(ctx, &loss, 1, &copt, &pex) != LDT_OK ||
        ldt_replay(pex) != LDT_OK)
        goto fail;
    {
        int nr = ldt_mesh_nranks(mesh), threads = !world;
        double *w0 = calloc((size_t)nr, sizeof *w0), best = -1, t0;
        if (!w0) goto fail;
        for (int r = 0; r < nr; r++) ldt_exec_comm_wait(pex, r, &w0[r]);
        t0 = now_s();
        if (ldt_replay(pex) != LDT_OK) {
            free(w0);
            goto fail;
        }
        prof_wall = now_s() - t0;
        for (int r = 0; r < nr; r++) { /* the busiest rank: the most work, waits left out */
            double w1 = 0, in;
            if (ldt_exec_rank_inside(pex, r, &in) != LDT_OK) continue; /* another process's */
            ldt_exec_comm_wait(pex, r, &w1);
            if (in - (w1 - w0[r]) > best) {
                best = in - (w1 - w0[r]);
                wait_frac = threads ? (w1 - w0[r]) / prof_wall : -1; /* MPI: not measured */
                outside_frac = prof_wall > in ? (prof_wall - in) / prof_wall : 0;
            }
        }
        free(w0);
        ldt_clear_error();
    }
    if (ldt_exec_stats_get(ex, &es) != LDT_OK || ldt_exec_breakdown(pex, ops, MAXOPS, &nops) != LDT_OK) goto fail;
    qsort(t, (size_t)steps, sizeof *t, cmp_d);
    for (int i = 0; i < nops; i++) {
        total_flops += ops[i].flops;
        inside += ops[i].seconds;
    }
    if (json) {
        printf("{");
        cli_config_json(stdout, kind, &cfg, pins, mesh);
        putchar(',');
        cli_profile_json(stdout, &cm);
        printf(",\"replays\":%lld,\"step_seconds\":{\"median\":%.9g,\"min\":%.9g,\"max\":%.9g},\"ops\":[",
               (long long)steps, t[steps / 2], t[0], t[steps - 1]);
        for (int i = 0; i < nops; i++)
            printf("%s{\"name\":\"%s\",\"is_collective\":%s,\"calls\":%lld,\"seconds\":%.9g,\"flops\":%.9g,"
                   "\"flops_per_second\":%.9g,\"bus_bytes_per_second\":%.9g}",
                   i ? "," : "", ops[i].name, ops[i].collective ? "true" : "false", (long long)ops[i].calls,
                   ops[i].seconds, ops[i].flops, ops[i].seconds > 0 ? ops[i].flops / ops[i].seconds : 0,
                   ops[i].collective && ops[i].seconds > 0 ? ops[i].bytes / ops[i].seconds : 0);
        printf("],\"flops_per_second\":%.9g,\"modeled_step_seconds\":%.9g,"
               "\"arena_bytes_per_rank\":%lld,\"instructions_per_rank\":%lld,\"profiled_step_seconds\":%.9g,"
               "\"outside_fraction\":%.9g,\"wait_fraction\":",
               total_flops / t[steps / 2], es.modeled_step_seconds, (long long)es.arena_bytes,
               (long long)es.instructions, prof_wall, outside_frac);
        if (wait_frac >= 0)
            printf("%.9g", wait_frac);
        else
            printf("null");
        printf(",\"collectives\":%lld,\"collectives_unfused\":%lld", (long long)es.collectives, (long long)es.collectives_unfused);
        printf(",\"fuse_agreed\":%s", es.fuse_agreed ? "true" : "false");
        if (dp >= 0)
            printf(",\"dp_collectives\":{\"fused\":%lld,\"unfused\":%lld}", (long long)es.dim_collectives[dp],
                   (long long)es.dim_collectives_unfused[dp]);
        printf("}\n");
    } else {
        printf("step %.3f ms median (min %.3f, max %.3f) over %lld replays; %.2f GFLOP/s; modeled %.3f ms; "
               "arena %lld B per rank, %lld instructions\n",
               t[steps / 2] * 1e3, t[0] * 1e3, t[steps - 1] * 1e3, (long long)steps, total_flops / t[steps / 2] / 1e9,
               es.modeled_step_seconds * 1e3, (long long)es.arena_bytes, (long long)es.instructions);
        printf("profiled replay %.3f ms: busiest rank waiting for peers inside collectives ", prof_wall * 1e3);
        if (wait_frac >= 0)
            printf("%.1f%%", 100 * wait_frac);
        else
            printf("not measured (mpi)");
        printf(", outside kernels and collectives %.1f%%\n", 100 * outside_frac);
        printf("collectives %lld per step (%lld unfused)", (long long)es.collectives, (long long)es.collectives_unfused);
        if (dp >= 0)
            printf(", %lld on dp (%lld unfused)", (long long)es.dim_collectives[dp], (long long)es.dim_collectives_unfused[dp]);
        printf("\n");
        printf("%-28s %6s %10s %7s %12s %14s\n", "op (busiest rank)", "calls", "ms", "share", "GFLOP/s", "bus GB/s");
        for (int i = 0; i < nops; i++)
            printf("%-28s %6lld %10.3f %6.1f%% %12.2f %14.3f\n", ops[i].name, (long long)ops[i].calls,
                   ops[i].seconds * 1e3, inside > 0 ? 100 * ops[i].seconds / inside : 0,
                   ops[i].seconds > 0 ? ops[i].flops / ops[i].seconds / 1e9 : 0,
                   ops[i].collective && ops[i].seconds > 0 ? ops[i].bytes / ops[i].seconds / 1e9 : 0);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("step-bench");
done:
    free(t);
    ldt_optim_destroy(o);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    ldt_mpi_world_destroy(world);
    return rc;
}
