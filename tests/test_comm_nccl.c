/* The NCCL backend as an MPI job of 2 processes, one GPU each. Without a CUDA device it says
 * "SKIPPED: no CUDA device" and passes (ctest skips it). With one: the checks of
 * tests/nccl_check.h, a mesh-dim group, and a receive from a silent peer that times out and
 * aborts the communicator. */
#include <mpi.h>

#include "tests/nccl_check.h"

int main(void) {
    ldt_comm *mpi, *world = NULL;
    int ndev = 0, total = 0, members[64];
    if (ldt_mpi_world(NULL, &mpi) != LDT_OK) {
        fprintf(stderr, "mpi world: %s\n", ldt_last_error());
        return 1;
    }
    g_rank = ldt_comm_rank(mpi);
    g_size = ldt_comm_size(mpi);
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        /* the library says so too, with a status */
        CHECK(ldt_nccl_world(mpi, -1, NULL, &world) == LDT_ERR_UNSUPPORTED, "no device: %s", ldt_last_error());
        if (g_rank == 0) printf("SKIPPED: no CUDA device (the NCCL backend needs one GPU per process)\n");
        ldt_mpi_world_destroy(mpi);
        return g_fail != 0;
    }
    if (ndev < g_size) { /* one host here (ctest): NCCL puts one process on a GPU */
        if (g_rank == 0) printf("SKIPPED: %d GPUs for %d processes (the NCCL backend needs one GPU per process)\n",
                                ndev, g_size);
        ldt_mpi_world_destroy(mpi);
        return 0;
    }
    OK(ldt_nccl_world(mpi, -1, NULL, &world));
    if (world) {
        for (int r = 0; r < g_size; r++) members[r] = r;
        CHECK(strcmp(ldt_comm_backend(world), "nccl") == 0, "backend");
        check_all_reduce(world, members);
        check_others(world, members);
        if (g_size % 2 == 0) { /* a group per mesh dim */
            char text[32];
            ldt_mesh *mesh;
            ldt_comm *g = NULL;
            snprintf(text, sizeof text, "2x%d", g_size / 2);
            OK(ldt_mesh_parse(text, LDT_DEVICE_CPU, &mesh));
            OK(ldt_comm_mesh_dim(world, mesh, 0, &g));
            if (g) {
                int gm[64];
                for (int m = 0; m < ldt_comm_size(g); m++) gm[m] = ldt_comm_world_rank(g, m);
                check_all_reduce(g, gm);
                ldt_comm_destroy(g);
            }
            ldt_mesh_destroy(mesh);
        }
        ldt_nccl_world_destroy(world);
    }
    /* a silent peer: the receive times out and the communicator is aborted, then refuses */
    {
        ldt_comm_options qo = {500};
        ldt_comm *q = NULL;
        OK(ldt_nccl_world(mpi, -1, &qo, &q));
        if (q && g_size > 1 && g_rank == 0) {
            void *d = dev_copy(NULL, 8);
            ldt_status st = ldt_recv(q, d, 2, LDT_F32, 1);
            CHECK(st == LDT_ERR_TIMEOUT, "recv from a silent peer: %s", ldt_last_error());
            CHECK(ldt_barrier(q) == LDT_ERR_REMOTE, "an aborted communicator refuses: %s", ldt_last_error());
            cudaFree(d);
        }
        ldt_barrier(mpi);
        if (q) ldt_nccl_world_destroy(q);
    }
    ldt_all_reduce(mpi, &g_fail, &total, 1, LDT_I32, LDT_REDUCE_SUM);
    if (g_rank == 0) printf("test_comm_nccl: %d processes, %d failed checks\n", g_size, total);
    ldt_mpi_world_destroy(mpi);
    return total != 0;
}
