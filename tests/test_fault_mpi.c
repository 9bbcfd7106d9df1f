/* A process that dies mid-step (mpirun with orte_abort_on_non_zero_status 0, so the job is
 * not torn down at once): the survivors' replay returns an error within the communicator's
 * timeout instead of hanging, and they say so. A plain program: ctest matches its output
 * ("FAULT-OK"), since the job's exit status is the dead process's. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldt/ldt.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    int provided, rank, size, ok = 1, both = 0;
    MPI_Comm comm = MPI_COMM_WORLD, survivors;
    ldt_comm *world, *tail;
    ldt_comm_options opts = {1500};
    ldt_ctx_options co = {0};
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_exec *ex;
    ldt_tensor *x, *w, *y;
    ldt_placement s1 = ldt_shard(1), s0 = ldt_shard(0), r = ldt_replicate();
    float xs[4 * 8], ws[8 * 3], out[4];
    char text[16];
    int d = 1;
    double t0;
    ldt_status st;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* the survivors' own communicator, made while everyone is alive */
    MPI_Comm_split(comm, rank == 1 ? MPI_UNDEFINED : 0, rank, &survivors);
    if (ldt_mpi_world_from(&comm, &opts, &world) != LDT_OK) {
        printf("rank %d: %s\n", rank, ldt_last_error());
        return 1;
    }
    snprintf(text, sizeof text, "%d", size);
    ldt_mesh_parse(text, LDT_DEVICE_CPU, &mesh);
    co.mesh = mesh;
    co.world = world;
    ldt_ctx_create(&co, &ctx);
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3;
    for (int i = 0; i < 24; i++) ws[i] = (float)(i % 5) * 0.5f;
    x = ldt_input(ctx, "x", &(ldt_shape){2, {4, 8}}, LDT_F32);
    w = ldt_param(ctx, "w", &(ldt_shape){2, {8, 3}}, LDT_F32);
    ldt_input_bind(x, xs, sizeof xs);
    ldt_param_set(w, ws, sizeof ws);
    ldt_pin(x, &s1, 1);
    ldt_pin(w, &s0, 1);
    y = ldt_redistribute_to(ldt_sum(ldt_matmul(x, w), &d, 1, 0), &r, 1); /* an all_reduce */
    if (ldt_compile(ctx, &y, 1, NULL, &ex) != LDT_OK || ldt_replay(ex) != LDT_OK ||
        ldt_exec_read(ex, 0, out, sizeof out) != LDT_OK) {
        printf("rank %d: the healthy step failed: %s\n", rank, ldt_last_error());
        return 1;
    }
    if (rank == 1) _exit(3); /* dies between steps, without a word (a non-zero status: mpirun,
                              told not to abort on one, leaves the others running) */
    t0 = now_s();
    st = ldt_replay(ex);
    if (st == LDT_OK || now_s() - t0 > 10) ok = 0;
    printf("rank %d: replay after a peer died: %s after %.1f s: %s\n", rank, ldt_status_name(st), now_s() - t0,
           ldt_last_error());
    fflush(stdout);
    /* the survivors compare notes on their own communicator */
    if (ldt_mpi_world_from(&survivors, NULL, &tail) == LDT_OK) {
        ldt_all_reduce(tail, &ok, &both, 1, LDT_I32, LDT_REDUCE_MIN);
        if (ldt_comm_rank(tail) == 0 && both) printf("FAULT-OK: %d survivors reported the error\n", size - 1);
        fflush(stdout);
    }
    _exit(0); /* MPI cannot finalize with a dead peer's collectives pending */
}
