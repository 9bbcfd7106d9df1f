/* A consumer of the installed lazydt that calls the MPI, NCCL and CUDA entry points, linked
 * statically: its link needs what the package lists for them (pkg-config --static,
 * lazydt::lazydt_static): MPI, NCCL, the CUDA runtime or the emulator's C++ runtime, each
 * when built in. Without arguments it takes paths that start nothing (NULL out-parameters),
 * so it runs anywhere; with --world (under mpirun) it makes the MPI world and sums the ranks. */
#include <stdio.h>
#include <string.h>

#include "ldt/ldt.h"

static int expect(const char *what, ldt_status got, ldt_status want) {
    if (got == want) return 0;
    fprintf(stderr, "consumer_backends: %s gave %s, expected %s\n", what, ldt_status_name(got),
            ldt_status_name(want));
    return 1;
}

int main(int argc, char **argv) {
    ldt_comm *world;
    int bad = expect("ldt_mpi_world(NULL, NULL)", ldt_mpi_world(NULL, NULL),
                     ldt_built_with_mpi() ? LDT_ERR_INVALID_ARGUMENT : LDT_ERR_UNSUPPORTED);
    bad |= expect("ldt_nccl_world(NULL, -1, NULL, NULL)", ldt_nccl_world(NULL, -1, NULL, NULL),
                  ldt_built_with_nccl() ? LDT_ERR_INVALID_ARGUMENT : LDT_ERR_UNSUPPORTED);
    if (bad) return 1;
    if (argc > 1 && !strcmp(argv[1], "--world")) {
        int32_t x, n;
        ldt_status st;
        if (ldt_mpi_world(NULL, &world) != LDT_OK) {
            fprintf(stderr, "consumer_backends: %s\n", ldt_last_error());
            return 1;
        }
        x = ldt_comm_rank(world);
        n = ldt_comm_size(world);
        st = ldt_all_reduce(world, &x, &x, 1, LDT_I32, LDT_REDUCE_SUM);
        ldt_mpi_world_destroy(world);
        if (st != LDT_OK || x != n * (n - 1) / 2) {
            fprintf(stderr, "consumer_backends: all_reduce gave %d (%s)\n", (int)x, ldt_last_error());
            return 1;
        }
    }
    printf("consumer_backends ok (MPI %s, NCCL %s, CUDA devices %d)\n",
           ldt_built_with_mpi() ? "built in" : "not built in",
           ldt_built_with_nccl() ? "built in" : "not built in", ldt_cuda_device_count());
    return 0;
}
