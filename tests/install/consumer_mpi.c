/* A consumer of the installed lazydt that calls the MPI backend, linked statically: its link
 * needs MPI's libraries from the package (pkg-config --static, lazydt::lazydt_static).
 * Without arguments it calls ldt_mpi_world on a path that starts no MPI (a NULL out), so it
 * runs anywhere; with --world (under mpirun) it makes the world and sums the ranks. */
#include <stdio.h>
#include <string.h>

#include "ldt/ldt.h"

int main(int argc, char **argv) {
    ldt_comm *world;
    ldt_status want = ldt_built_with_mpi() ? LDT_ERR_INVALID_ARGUMENT : LDT_ERR_UNSUPPORTED;
    ldt_status st = ldt_mpi_world(NULL, NULL);
    if (st != want) {
        fprintf(stderr, "consumer_mpi: ldt_mpi_world(NULL, NULL) gave %s, expected %s\n",
                ldt_status_name(st), ldt_status_name(want));
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--world")) {
        int32_t x, n;
        if (ldt_mpi_world(NULL, &world) != LDT_OK) {
            fprintf(stderr, "consumer_mpi: %s\n", ldt_last_error());
            return 1;
        }
        x = ldt_comm_rank(world);
        n = ldt_comm_size(world);
        st = ldt_all_reduce(world, &x, &x, 1, LDT_I32, LDT_REDUCE_SUM);
        ldt_mpi_world_destroy(world);
        if (st != LDT_OK || x != n * (n - 1) / 2) {
            fprintf(stderr, "consumer_mpi: all_reduce gave %d (%s)\n", (int)x, ldt_last_error());
            return 1;
        }
    }
    printf("consumer_mpi ok (MPI %s)\n", ldt_built_with_mpi() ? "built in" : "not built in");
    return 0;
}
