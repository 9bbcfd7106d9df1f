/* The NCCL backend on rank threads: one process, a GPU per rank thread (rank r on device
 * r % devices), bootstrapped through the threads' world. The checks of tests/nccl_check.h, a
 * mesh-dim group, and a receive from a silent peer that fails within the timeout. Skipped
 * without a CUDA device; runs on the CUDA emulator (LDT_CUDA=EMU), whose NCCL joins threads. */
#include <criterion/criterion.h>

#include "core/error.h"
#include "exec/comm_nccl.h"
#include "tests/nccl_check.h"

static ldt_status rank_fn(ldt_comm *world, void *arg) {
    int *fails = arg, members[64];
    ldt_comm *nw = NULL, *q = NULL;
    g_rank = ldt_comm_rank(world);
    g_size = ldt_comm_size(world);
    g_fail = 0;
    OK(ldt_nccl_world(world, -1, NULL, &nw));
    if (nw) {
        for (int r = 0; r < g_size; r++) members[r] = r;
        CHECK(strcmp(ldt_comm_backend(nw), "nccl") == 0, "backend %s", ldt_comm_backend(nw));
        CHECK(ldt_comm_rank(nw) == g_rank && ldt_comm_size(nw) == g_size, "rank %d of %d",
              ldt_comm_rank(nw), ldt_comm_size(nw));
        check_all_reduce(nw, members);
        check_others(nw, members);
        { /* a group per mesh dim: the columns of 2x2 */
            ldt_mesh *mesh;
            ldt_comm *g = NULL;
            OK(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh));
            OK(ldt_comm_mesh_dim(nw, mesh, 0, &g));
            if (g) {
                int gm[64];
                for (int m = 0; m < ldt_comm_size(g); m++) gm[m] = ldt_comm_world_rank(g, m);
                CHECK(ldt_comm_size(g) == 2, "group of %d", ldt_comm_size(g));
                check_all_reduce(g, gm);
                ldt_comm_destroy(g);
            }
            ldt_mesh_destroy(mesh);
        }
        ldt_nccl_world_destroy(nw);
    }
    { /* a silent peer: rank 0's receive fails within the timeout, then the communicator refuses */
        ldt_comm_options qo = {300};
        OK(ldt_nccl_world(world, -1, &qo, &q));
        if (q && g_rank == 0) {
            void *d = dev_copy(NULL, 8);
            ldt_status st = ldt_recv(q, d, 2, LDT_F32, 1);
            CHECK(st == LDT_ERR_TIMEOUT || st == LDT_ERR_REMOTE, "recv from a silent peer: %s", ldt_last_error());
            CHECK(ldt_barrier(q) == LDT_ERR_REMOTE, "an aborted communicator refuses: %s", ldt_last_error());
            cudaFree(d);
        }
        OK(ldt_barrier(world));
        if (q) ldt_nccl_world_destroy(q);
    }
    __atomic_add_fetch(fails, g_fail, __ATOMIC_SEQ_CST);
    return LDT_OK;
}

Test(nccl_threads, every_collective_with_a_gpu_per_rank_thread) {
    int fails = 0, ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        fprintf(stderr, "SKIPPED: no CUDA device: the NCCL backend was not run\n");
        cr_skip("no CUDA device");
    }
    if (!ldt_cuda_emulated() && ndev < 4) { /* NCCL puts one rank on a GPU */
        fprintf(stderr, "SKIPPED: %d GPUs, 4 wanted: the NCCL backend was not run on rank threads\n", ndev);
        cr_skip("fewer than 4 GPUs");
    }
    /* the emulator's NCCL gives up on a silent peer after this long (a GPU's NCCL waits, and
     * the communicator's timeout aborts it); every collective's members must meet within it,
     * so it leaves room for a rank thread held back on a loaded machine (sanitizers, 2 cores) */
    setenv("LDT_EMU_NCCL_TIMEOUT_MS", "1000", 1);
    cr_assert_eq(ldt_threads_launch(4, NULL, rank_fn, &fails), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(fails, 0, "%d failed checks (stderr names them)", fails);
}

Test(nccl_threads, a_world_that_cannot_bootstrap_is_refused) {
    ldt_comm *w = NULL;
    cr_assert_eq(ldt_nccl_world(NULL, -1, NULL, &w), ldt_built_with_nccl() ? LDT_ERR_INVALID_ARGUMENT
                                                                              : LDT_ERR_UNSUPPORTED);
    cr_assert_null(w);
}

/* The timeout a world gets without options: LDT_NCCL_TIMEOUT_MS, else 60 s; options win. */
static ldt_status timeout_rank(ldt_comm *world, void *arg) {
    int64_t *got = arg;
    ldt_comm *a = NULL, *b = NULL;
    ldt_comm_options o = {777};
    LDT_CHECK(ldt_nccl_world(world, -1, NULL, &a));
    got[0] = ldt__nccl_timeout_ms(a);
    ldt_nccl_world_destroy(a);
    LDT_CHECK(ldt_nccl_world(world, -1, &o, &b));
    got[1] = ldt__nccl_timeout_ms(b);
    ldt_nccl_world_destroy(b);
    return LDT_OK;
}

Test(nccl_threads, the_timeout_comes_from_the_options_or_the_environment) {
    int64_t got[2] = {0, 0};
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        fprintf(stderr, "SKIPPED: no CUDA device: the NCCL backend was not run\n");
        cr_skip("no CUDA device");
    }
    setenv("LDT_NCCL_TIMEOUT_MS", "4321", 1);
    cr_assert_eq(ldt_threads_launch(1, NULL, timeout_rank, got), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(got[0], 4321);
    cr_assert_eq(got[1], 777);
    setenv("LDT_NCCL_TIMEOUT_MS", "nonsense", 1);
    cr_assert_eq(ldt_threads_launch(1, NULL, timeout_rank, got), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(got[0], 60000, "a value that is not a positive number: the default");
    unsetenv("LDT_NCCL_TIMEOUT_MS");
}
