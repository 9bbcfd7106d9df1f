/* The ldt command line: dispatches to one subcommand per file (cmd_<name>.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ldt/exec.h"
#include "tools/ldt/cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command k_commands[] = {
    {"layout", cmd_layout, "each rank's local shape and region for a mesh, shape and placements"},
    {"info", cmd_info, "what this build holds (CUDA, NCCL, MPI) and the devices it sees"},
    {"redistribute", cmd_redistribute, "plan (and --run) a redistribution between placements or meshes"},
    {"plan", cmd_plan, "plan a model's forward pass for a mesh: strategies, collectives, programs"},
    {"run", cmd_run, "compile a model's forward pass and replay it on rank threads (--trace FILE)"},
    {"train", cmd_train, "train a character-level GPT by a captured step, compiled once and replayed"},
    {"step-bench", cmd_step_bench, "capture a training step, replay it, report where the time goes"},
    {"predict", cmd_predict, "predict the step time and memory per rank of a large GPT training job (pp x dp x tp)"},
    {"meta-init", cmd_meta_init, "describe a model on a meta mesh and report its memory per rank"},
    {"calibrate", cmd_calibrate, "measure latency and bandwidth per mesh dim into a cost profile"},
    {"rand", cmd_rand, "make a random tensor sharded on a mesh; its hash is the same on every mesh"},
    {"ckpt", cmd_ckpt, "sharded checkpoints: merge into one safetensors file, info, GPT-2 weights in and out (import-hf, export-hf)"},
    {"spec", cmd_spec, "one sharding in ColossalAI, torch_xla and HLO notation (and back)"},
};

#ifndef LDT_VERSION
#error "LDT_VERSION (the CMake project version) must be defined"
#endif

static void usage(FILE *f) {
    fprintf(f, "usage: ldt <command> [flags]   (ldt <command> --help, or ldt help <command>, for its flags)\n"
               "       ldt --version\n\n"
               "lazydt: distributed tensors traced lazily, planned as a whole, replayed.\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].help);
}

int main(int argc, char **argv) {
    /* The CLI's GEMMs run inside rank threads: OpenBLAS's own pool would only compete, and
     * it reads OPENBLAS_NUM_THREADS once, when it loads (its threads then spin at start): so
     * set it and start again, once. */
    if (!getenv("OPENBLAS_NUM_THREADS") && setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0)
        execv("/proc/self/exe", argv); /* on failure, go on as we are */
    ldt_set_blas_threads(1);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("ldt %s\n", LDT_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        (strcmp(argv[1], "help") == 0 && argc == 2)) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "help") == 0) { /* ldt help CMD [SUB]: CMD's help, as CMD --help prints it */
        char *help_argv[3] = {argc > 3 ? argv[3] : "--help", "--help", NULL};
        if (argc > 4) {
            fprintf(stderr, "ldt help: expected one command (and a ckpt subcommand), got %d words\n", argc - 2);
            return 2;
        }
        for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
            if (strcmp(argv[2], k_commands[i].name) == 0)
                return k_commands[i].fn(argc > 3 ? 2 : 1, help_argv);
        fprintf(stderr, "ldt help: unknown command '%s'\n\n", argv[2]);
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(argv[1], k_commands[i].name) == 0) return k_commands[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "ldt: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
