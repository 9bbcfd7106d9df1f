/* ldt info: what this build holds and which devices it sees. */
#include <string.h>

#include "ldt/exec.h"
#include "tools/ldt/cli.h"

int cmd_info(int argc, char **argv) {
    if (argc > 0 && strcmp(argv[0], "--help") == 0) {
        printf("usage: ldt info\n\nPrints whether this build has CUDA, NCCL and MPI, and the "
               "number of CUDA devices the runtime reports (0 without a driver or GPU).\n");
        return 0;
    }
    if (argc > 0) {
        fprintf(stderr, "ldt info: takes no arguments (see ldt info --help)\n");
        return 2;
    }
    printf("cuda: %s\nnccl: %s\nmpi: %s\ncuda_devices: %d\n",
           ldt_cuda_emulated() ? "emulated (LDT_CUDA=EMU: on the CPU)" : ldt_built_with_cuda() ? "yes" : "no",
           ldt_cuda_emulated() ? "emulated (rank threads)" : ldt_built_with_nccl() ? "yes" : "no",
           ldt_built_with_mpi() ? "yes" : "no",
           ldt_cuda_device_count());
    return 0;
}
