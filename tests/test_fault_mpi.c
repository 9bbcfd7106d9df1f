/* Processes that fail mid-step under mpirun, and what their peers do. A plain program (MPI
 * jobs cannot run under Criterion's forks).
 *
 * Without an argument: a process dies between steps (mpirun with orte_abort_on_non_zero_status
 * 0 leaves the others running); the survivors' replay returns an error within the
 * communicator's timeout instead of hanging, and they say so on a communicator of their own:
 * ctest matches "FAULT-OK", since the job's exit status is the dead process's.
 *
 * With a case, run by test_fault_driver (which times and checks it): every process writes
 * its pid to $LDT_FAULT_DIR/pid.<rank>, the faulting one the time of the fault to
 * $LDT_FAULT_DIR/fault, and every process that ends on its own its exit status, the
 * time and its message to $LDT_FAULT_DIR/exit.<rank>, then exits with that status. The step
 * is a custom op (the fault point) before an all_reduce, and a parameter assigned in place
 * (so teardown would gather it: ldt_ctx_destroy -> host_flush -> all_gather_v).
 *   stopped  rank 1 stops itself (SIGSTOP) in the second step
 *   killed   rank 1 is killed (SIGKILL) in the first step, before any group is used
 *   error    the op fails on ranks 0 and 1 in the second step; rank 2 is fine */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldt/ldt.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------------------
 * The driven cases
 */
typedef struct fault {
    const char *kase, *dir;
    int rank, step;
} fault;

static void write_file(const char *dir, const char *name, int rank, const char *text) {
    char path[4096];
    FILE *f;
    if (rank >= 0)
        snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    else
        snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "w"))) return;
    fputs(text, f);
    fclose(f);
}

static ldt_status same_shape(int nin, const ldt_shape *in_shapes, const ldt_dtype *in_dtypes, void *user,
                             ldt_shape *out_shape, ldt_dtype *out_dtype, char *msg, size_t msg_cap) {
    (void)nin, (void)user, (void)msg, (void)msg_cap;
    *out_shape = in_shapes[0];
    *out_dtype = in_dtypes[0];
    return LDT_OK;
}

/* The identity, except on the faulting rank at the faulting step. */
static ldt_status fault_op(int nin, const void *const *in, const ldt_shape *in_shapes, const ldt_dtype *in_dtypes,
                           void *out, const ldt_shape *out_shape, ldt_dtype out_dtype, void *user) {
    fault *f = user;
    int64_t n = 1;
    char t[64];
    (void)nin, (void)in_shapes, (void)in_dtypes, (void)out_dtype;
    for (int d = 0; d < out_shape->ndim; d++) n *= out_shape->dims[d];
    memcpy(out, in[0], (size_t)n * sizeof(float));
    snprintf(t, sizeof t, "%.6f\n", now_s());
    if (!strcmp(f->kase, "stopped") && f->rank == 1 && f->step == 1) {
        write_file(f->dir, "fault", -1, t);
        raise(SIGSTOP); /* until the driver kills it */
    }
    if (!strcmp(f->kase, "killed") && f->rank == 1 && f->step == 0) {
        write_file(f->dir, "fault", -1, t);
        raise(SIGKILL);
    }
    if (!strcmp(f->kase, "error") && f->rank <= 1 && f->step == 1) {
        if (f->rank == 0) write_file(f->dir, "fault", -1, t);
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "fault: a value out of range on rank %d", f->rank);
    }
    return LDT_OK;
}

static int driven(const char *kase) {
    fault f = {kase, getenv("LDT_FAULT_DIR"), 0, 0};
    ldt_comm *world = NULL;
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_ctx_options co = {0};
    ldt_exec *ex = NULL;
    ldt_tensor *x, *w, *y;
    ldt_placement s0 = ldt_shard(0), r = ldt_replicate();
    float xs[4 * 8], ws[8 * 3], out[4];
    char text[2048], msg[1536] = "", pid[32];
    int d = 1, id, status = 0;
    ldt_status st;
    if (!f.dir) {
        fprintf(stderr, "test_fault_mpi %s: LDT_FAULT_DIR is not set (test_fault_driver sets it)\n", kase);
        return 2;
    }
    if (strcmp(kase, "stopped") && strcmp(kase, "killed") && strcmp(kase, "error")) {
        fprintf(stderr, "test_fault_mpi: case '%s', expected stopped, killed or error\n", kase);
        return 2;
    }
    if ((st = ldt_mpi_world(NULL, &world)) != LDT_OK) goto done; /* as the CLI: MPI is ours */
    f.rank = ldt_comm_rank(world);
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    write_file(f.dir, "pid", f.rank, pid);
    snprintf(text, sizeof text, "%d", ldt_comm_size(world));
    if ((st = ldt_mesh_parse(text, LDT_DEVICE_CPU, &mesh)) != LDT_OK) goto done;
    co.mesh = mesh;
    co.world = world;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK) goto done;
    if ((st = ldt_custom_op_register(ctx, "fault", 1, same_shape, fault_op, &f, &id)) != LDT_OK) goto done;
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3;
    for (int i = 0; i < 24; i++) ws[i] = (float)(i % 5) * 0.5f;
    x = ldt_input(ctx, "x", &(ldt_shape){2, {4, 8}}, LDT_F32);
    w = ldt_param(ctx, "w", &(ldt_shape){2, {8, 3}}, LDT_F32);
    ldt_input_bind(x, xs, sizeof xs);
    ldt_param_set(w, ws, sizeof ws);
    ldt_pin(w, &s0, 1);
    /* the fault, then an all_reduce that needs it; w updated in place */
    y = ldt_redistribute_to(ldt_sum(ldt_matmul(ldt_custom(ctx, id, &x, 1), w), &d, 1, 0), &r, 1);
    ldt_assign(w, ldt_add(w, w));
    if ((st = ldt_compile(ctx, &y, 1, NULL, &ex)) != LDT_OK) goto done;
    for (f.step = 0; f.step < 3; f.step++)
        if ((st = ldt_replay(ex)) != LDT_OK || (st = ldt_exec_read(ex, 0, out, sizeof out)) != LDT_OK) goto done;
done:
    if (st != LDT_OK) {
        status = 1;
        snprintf(msg, sizeof msg, "%s", ldt_last_error());
        fprintf(stderr, "test_fault_mpi %s, rank %d: %s\n", kase, f.rank, msg);
    }
    ldt_ctx_destroy(ctx); /* must not communicate after a failure */
    ldt_mesh_destroy(mesh);
    ldt_mpi_world_destroy(world);
    snprintf(text, sizeof text, "%d %.6f %s\n", status, now_s(), status ? msg : "");
    write_file(f.dir, "exit", f.rank, text);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * A process dies between steps (ctest's own case)
 */
static int died(void) {
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

int main(int argc, char **argv) { return argc > 1 ? driven(argv[1]) : died(); }
