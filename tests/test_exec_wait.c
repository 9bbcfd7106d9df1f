/* Where a replay's time goes, per rank: ldt_exec_rank_inside against the Chrome trace's own
 * instruction durations, ldt_exec_comm_wait within the bounds a late peer forces (never a
 * speed: the bounds follow from the order of events), and bad input. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/comm.h"
#include "ldt/ldt.h"

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank 1 sleeps before the all_reduce, so rank 0 blocks in it until rank 1 arrives. */
typedef struct late_peer {
    double arrive[2], leave[2];
} late_peer;

static ldt_status late_fn(ldt_comm *w, void *arg) {
    late_peer *lp = arg;
    int r = ldt_comm_rank(w);
    float x = 1, y = 0;
    ldt_status st;
    if (r == 1) nanosleep(&(struct timespec){0, 30000000L}, NULL);
    lp->arrive[r] = mono_s();
    st = ldt_all_reduce(w, &x, &y, 1, LDT_F32, LDT_REDUCE_SUM);
    lp->leave[r] = mono_s();
    if (st == LDT_OK && y != 2) return ldt_set_error(LDT_ERR_INTERNAL, "all_reduce gave %g", y);
    return st;
}

Test(exec_wait, threads_count_the_time_a_rank_waits_for_a_late_peer) {
    ldt_threads *w;
    late_peer lp = {{0}, {0}};
    double w0;
    cr_assert_eq(ldt_threads_create(2, NULL, &w), LDT_OK);
    cr_assert_eq(ldt__threads_wait_ns(w, 0), 0);
    cr_assert_eq(ldt_threads_run(w, late_fn, &lp), LDT_OK, "%s", ldt_last_error());
    w0 = (double)ldt__threads_wait_ns(w, 0) * 1e-9;
    /* rank 0 arrived before rank 1 and cannot have left the entry barrier before rank 1
     * arrived; all its waiting lies within its own call. Its wait starts a little after its
     * timestamp (the call's own entry), by microseconds (more under sanitizers): 1 ms of slack
     * against a peer 30 ms late */
    cr_assert(lp.arrive[1] > lp.arrive[0]);
    cr_assert_geq(w0, lp.arrive[1] - lp.arrive[0] - 1e-3, "waited %g s, peer late by %g s", w0,
                  lp.arrive[1] - lp.arrive[0]);
    cr_assert_leq(w0, lp.leave[0] - lp.arrive[0] + 1e-6);
    cr_assert_leq((double)ldt__threads_wait_ns(w, 1) * 1e-9, lp.leave[1] - lp.arrive[1] + 1e-6);
    cr_assert_eq(ldt__threads_wait_ns(w, 2), 0, "a rank out of range has none");
    cr_assert_eq(ldt__threads_wait_ns(NULL, 0), 0);
    ldt_threads_destroy(w);
}

/* A 2-rank matmul whose partial sums are all-reduced, compiled with a Chrome trace. */
static void build(ldt_mesh **mesh, ldt_ctx **ctx, ldt_exec **ex, const char *path, int profile) {
    ldt_ctx_options co = {0};
    ldt_compile_options o = {0};
    static float x[16], wv[16];
    ldt_tensor *tx, *tw, *ty;
    for (int i = 0; i < 16; i++) x[i] = (float)(i % 5) - 2, wv[i] = (float)(i % 3) - 1;
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_CPU, mesh), LDT_OK);
    co.mesh = *mesh;
    cr_assert_eq(ldt_ctx_create(&co, ctx), LDT_OK);
    tx = ldt_input(*ctx, "x", &(ldt_shape){2, {4, 4}}, LDT_F32);
    tw = ldt_param(*ctx, "w", &(ldt_shape){2, {4, 4}}, LDT_F32);
    cr_assert_eq(ldt_input_bind(tx, x, sizeof x), LDT_OK);
    cr_assert_eq(ldt_param_set(tw, wv, sizeof wv), LDT_OK);
    cr_assert_eq(ldt_pin(tw, (ldt_placement[]){ldt_shard(0)}, 1), LDT_OK);
    ty = ldt_redistribute_to(ldt_matmul(tx, tw), (ldt_placement[]){ldt_replicate()}, 1);
    o.trace_path = path;
    o.profile = profile;
    o.overlap = -1;
    cr_assert_eq(ldt_compile(*ctx, &ty, 1, &o, ex), LDT_OK, "%s", ldt_last_error());
}

Test(exec_wait, rank_inside_is_the_sum_of_the_traced_instructions) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_exec *ex;
    char path[64];
    static char buf[1 << 16];
    double sum[2] = {0, 0}, inside, wb[2], wa;
    int events[2] = {0, 0};
    size_t n;
    FILE *f;
    cJSON *j, *ev;
    snprintf(path, sizeof path, "/tmp/ldt_exec_wait_%d.json", (int)getpid());
    build(&mesh, &ctx, &ex, path, 0);
    cr_assert_eq(ldt_exec_rank_inside(ex, 0, &inside), LDT_ERR_INVALID_USAGE, "nothing replayed yet");
    for (int r = 0; r < 2; r++) cr_assert_eq(ldt_exec_comm_wait(ex, r, &wb[r]), LDT_OK);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    f = fopen(path, "r");
    cr_assert(f != NULL);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    remove(path);
    cr_assert(n < sizeof buf - 1, "the trace fits the buffer");
    j = cJSON_Parse(buf);
    cr_assert(j != NULL, "the trace is JSON");
    ev = cJSON_GetObjectItem(j, "traceEvents");
    for (int i = 0; i < cJSON_GetArraySize(ev); i++) {
        cJSON *e = cJSON_GetArrayItem(ev, i), *dur = cJSON_GetObjectItem(e, "dur");
        int tid = cJSON_GetObjectItem(e, "tid")->valueint;
        if (!dur) continue; /* the thread-name records */
        sum[tid] += dur->valuedouble * 1e-6;
        events[tid]++;
    }
    cJSON_Delete(j);
    for (int r = 0; r < 2; r++) {
        cr_assert_gt(events[r], 0);
        cr_assert_eq(ldt_exec_rank_inside(ex, r, &inside), LDT_OK, "%s", ldt_last_error());
        /* the trace prints microseconds to 3 decimals: 0.5 ns of rounding per event */
        cr_assert_float_eq(inside, sum[r], 1e-9 * events[r] + 1e-12, "rank %d: %g vs %g", r, inside,
                           sum[r]);
        /* collectives in line: a rank's waits lie within its instructions */
        cr_assert_eq(ldt_exec_comm_wait(ex, r, &wa), LDT_OK);
        cr_assert_geq(wa, wb[r]);
        cr_assert_leq(wa - wb[r], inside + 1e-6, "rank %d waited %g s of %g s inside", r, wa - wb[r],
                      inside);
    }
    cr_assert_eq(ldt_exec_rank_inside(ex, 2, &inside), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_rank_inside(ex, -1, &inside), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_rank_inside(NULL, 0, &inside), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_comm_wait(ex, 2, &wa), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_comm_wait(ex, 0, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_comm_wait(NULL, 0, &wa), LDT_ERR_INVALID_ARGUMENT);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(exec_wait, rank_inside_needs_a_profile) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_exec *ex;
    double s;
    build(&mesh, &ctx, &ex, NULL, 0);
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_rank_inside(ex, 0, &s), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "profile") != NULL, "%s", ldt_last_error());
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
