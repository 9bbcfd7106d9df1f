/* ldt-bench: one program for every benchmark. `ldt-bench <name> [--json] [--quick]` runs one,
 * `ldt-bench all` runs them all; each prints a table, or with --json one JSON object a line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

/* The benchmarks: X(name, description). Adding one is a line here and a bench/<name>.c
 * defining `int bench_<name>(const bench_opts *, bench_results *)` (0 on success). */
#define LDT_BENCHES(X)                                                                     \
    X(comm_threads, "all_reduce and all_gather algorithm and bus bandwidth, and a send/recv "  \
                    "ring, on 2, 4, 8 rank threads, interleaved with a memcpy by as many "   \
                    "threads")                                                              \
    X(trace, "ns per recorded op for 1k to 1M-node graphs, and hash ns per node")          \
    X(redistribute, "modeled vs measured redistribution time on a 2x2 threaded mesh, before " \
                    "and after calibration (spearman, worst_ratio)")                        \
    X(plan, "whole-graph plan time per node for 1k to 100k-node GPT graphs, and the greedy " \
            "plan's modeled cost over the whole-graph plan's")                               \
    X(replay, "replay ns per instruction and per node of an add chain beside their floors, "  \
              "eager over replay for the GPT forward on 4 ranks, plan-cache hit time")       \
    X(fusion, "collective calls (on dp) and step time of the demo GPT training step on dp=4 "  \
              "and dp=2,tp=2, and of a gradient-sync pattern, with and without fusion")      \
    X(meta_init, "GPT-3 175B and a 1T GPT described, initialised and planned on a meta mesh: "  \
                 "seconds and host bytes")                                                      \
    X(train_step, "the demo's training step replayed against eager on dp=2,tp=2: speed-up, "    \
                  "and time waiting in collectives and outside kernels and collectives")       \
    X(costmodel, "does the model predict time? a profile calibrated by the bench, then random "  \
                 "redistributions and captured steps on 4 and 2x2 threads, measured vs modeled") \
    X(calibrate_repro, "does calibration reproduce? two consecutive calibrations of 4 rank threads, "  \
                       "each bandwidth, FLOP/s, factor and latency of the two side by side (ratio)")  \
    X(calibrate_refit, "the fit of two saved `ldt calibrate --json` outputs redone from their "  \
                       "\"fit\" samples (all sizes, and calibrate's eight): each figure's ratio")     \
    X(rng, "random values per second on one core from the stream's CPU fillers: uniform, "   \
           "normal, trunc_normal, randint (GB/s of f32)")                                     \
    X(gpu_replay, "one GPU: an MLP step replayed as a CUDA Graph against the same launches "  \
                  "issued one by one (us per step); reports nothing without a device")         \
    X(gpu_gemm, "one GPU: cuBLAS GEMM TFLOP/s and efficiency (bf16, f16, f32 without TF32) "   \
                "at squares and issue 26's layer shapes, and memory GB/s of add, layer norm "  \
                "and softmax; reports nothing without a device")

#define BENCH_DECL(name, desc) int bench_##name(const bench_opts *o, bench_results *out);
LDT_BENCHES(BENCH_DECL)
#undef BENCH_DECL

typedef struct bench_entry {
    const char *name;
    const char *desc;
    int (*fn)(const bench_opts *o, bench_results *out);
} bench_entry;

static const bench_entry k_benches[] = {
#define BENCH_ROW(name, desc) {#name, desc, bench_##name},
    LDT_BENCHES(BENCH_ROW)
#undef BENCH_ROW
};
static const int k_nbenches = (int)(sizeof k_benches / sizeof k_benches[0]);

static void usage(FILE *f) {
    fprintf(f,
            "usage: ldt-bench <name>|all [--json] [--quick]\n"
            "       ldt-bench calibrate_refit FILE1 FILE2 [--json]\n"
            "  every timing <result> has a <result>_cpu twin (docs/benchmarks.md)\n"
            "  --json   print one JSON object per benchmark, one per line\n"
            "  --quick  smaller sizes, fewer repetitions\n"
            "benchmarks:\n");
    for (int i = 0; i < k_nbenches; i++)
        fprintf(f, "  %-14s %s\n", k_benches[i].name, k_benches[i].desc);
}

static int run_one(const bench_entry *b, const bench_opts *o) {
    bench_results *r = bench_results_create(b->name);
    if (!r) {
        fprintf(stderr, "ldt-bench: out of memory\n");
        return 1;
    }
    int rc = b->fn(o, r);
    if (rc != 0) {
        fprintf(stderr, "ldt-bench: %s failed\n", b->name);
    } else if (o->json) {
        if (bench_print_json(r, stdout) != 0) rc = 1;
    } else {
        bench_print_table(r, stdout);
    }
    fflush(stdout);
    bench_results_destroy(r);
    return rc;
}

int main(int argc, char **argv) {
    /* OpenBLAS reads OPENBLAS_NUM_THREADS once, when it loads, and its pool would compete with
     * the rank threads being measured: set it and start again, once */
    if (!getenv("OPENBLAS_NUM_THREADS") && setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0)
        execv("/proc/self/exe", argv);
    bench_opts o = {0, 0, 0, {NULL, NULL}};
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            o.json = 1;
        } else if (strcmp(argv[i], "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && name && strcmp(name, "calibrate_refit") == 0 && o.nfiles < 2) {
            o.files[o.nfiles++] = argv[i];
        } else if (argv[i][0] == '-' || name) {
            fprintf(stderr, "ldt-bench: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            name = argv[i];
        }
    }
    if (!name) {
        usage(stderr);
        return 2;
    }
    if (strcmp(name, "all") == 0) {
        int rc = 0;
        for (int i = 0; i < k_nbenches; i++) rc |= run_one(&k_benches[i], &o);
        return rc;
    }
    for (int i = 0; i < k_nbenches; i++)
        if (strcmp(name, k_benches[i].name) == 0) return run_one(&k_benches[i], &o);
    fprintf(stderr, "ldt-bench: no benchmark called '%s'\n", name);
    usage(stderr);
    return 2;
}
