/* ldt info: what this build holds and which devices it sees. */
#include <string.h>

#include "ldt/exec.h"
#include "tools/ldt/cli.h"

#define NFLAGS 2

int cmd_info(int argc, char **argv) {
    cli_flag f[NFLAGS] = {
        {"json", 0, "one JSON object: cuda, nccl, mpi (\"yes\", \"no\" or \"emulated\"), cuda_devices", NULL},
        {"help", 0, "this help", NULL},
    };
    const char *cuda, *nccl, *mpi;
    if (cli_parse("info", argc, argv, f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt info [--json]\n\nPrints whether this build has CUDA, NCCL and MPI, and the "
               "number of CUDA devices the runtime reports (0 without a driver or GPU).\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    cuda = ldt_cuda_emulated() ? "emulated" : ldt_built_with_cuda() ? "yes" : "no";
    nccl = ldt_cuda_emulated() ? "emulated" : ldt_built_with_nccl() ? "yes" : "no";
    mpi = ldt_built_with_mpi() ? "yes" : "no";
    if (cli_has(f, NFLAGS, "json")) {
        printf("{\"cuda\":\"%s\",\"nccl\":\"%s\",\"mpi\":\"%s\",\"cuda_devices\":%d}\n", cuda, nccl, mpi,
               ldt_cuda_device_count());
        return 0;
    }
    printf("cuda: %s\nnccl: %s\nmpi: %s\ncuda_devices: %d\n",
           ldt_cuda_emulated() ? "emulated (LDT_CUDA=EMU: on the CPU)" : cuda,
           ldt_cuda_emulated() ? "emulated (rank threads)" : nccl, mpi, ldt_cuda_device_count());
    return 0;
}
