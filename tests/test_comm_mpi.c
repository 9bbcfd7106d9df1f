/* The MPI backend, run as an MPI job (mpirun -np 2 and -np 4: see tests/CMakeLists.txt).
 * A plain program, not Criterion: Criterion forks every test, and an MPI process must not.
 *
 * Every process makes every rank's input itself (a function of rank and index), so it knows
 * the answer: sums, maxima and minima of small exact numbers computed here in double (an
 * independent reference), and every result also bit for bit against ldt__reduce_n over the
 * ranks in order, which is what the threaded backend computes. Exit status: 0 when every
 * check on every rank held. */
#include <mpi.h>

#include "tests/comm_check.h"

static const ldt_dtype k_dts[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16, LDT_I32, LDT_I64, LDT_U8, LDT_BOOL};
static const ldt_reduce_op k_ops[] = {LDT_REDUCE_SUM, LDT_REDUCE_MAX, LDT_REDUCE_MIN, LDT_REDUCE_AVG};

static int is_float(ldt_dtype dt) { return dt == LDT_F32 || dt == LDT_F64 || dt == LDT_F16 || dt == LDT_BF16; }

/* all_reduce on c (members: its world ranks), out of place and in place, for every dtype and
 * op and a few counts (uneven parts, fewer elements than ranks, none). */
static void check_all_reduce(ldt_comm *c, const int *members, const char *where) {
    static const int64_t counts[] = {0, 1, 3, 7, 1000};
    int k = ldt_comm_size(c), me = members[ldt_comm_rank(c)];
    for (size_t d = 0; d < sizeof k_dts / sizeof k_dts[0]; d++)
        for (size_t o = 0; o < sizeof k_ops / sizeof k_ops[0]; o++)
            for (size_t q = 0; q < sizeof counts / sizeof counts[0]; q++) {
                ldt_dtype dt = k_dts[d];
                ldt_reduce_op op = k_ops[o];
                int64_t n = counts[q];
                size_t es = ldt_dtype_size(dt), nb = (size_t)(n ? n : 1) * es;
                void *send, *recv, *ref;
                if (dt == LDT_BOOL && op == LDT_REDUCE_AVG) continue;
                send = malloc(nb);
                recv = malloc(nb);
                fill(send, dt, me, 0, n);
                ref = reference(members, k, dt, op, 0, n);
                OK(ldt_all_reduce(c, send, recv, n, dt, op));
                CHECK(memcmp(recv, ref, (size_t)n * es) == 0, "%s all_reduce %s op %d n %lld differs from "
                      "the reduction in rank order", where, ldt_dtype_name(dt), (int)op, (long long)n);
                if (is_float(dt))
                    for (int64_t i = 0; i < n; i++) {
                        double want = by_hand(members, k, dt, op, i), got = get(recv, dt, i);
                        if (op == LDT_REDUCE_AVG && dt != LDT_F64) {
                            /* the sum (exact here) divided in f32, as the library does: by 3
                             * ranks the f32 quotient is not the double one rounded */
                            char tmp[8];
                            want = (double)((float)by_hand(members, k, dt, LDT_REDUCE_SUM, i) / (float)k);
                            put(tmp, dt, 0, want); /* halves: the average rounded once */
                            want = get(tmp, dt, 0);
                        }
                        if (got != want) {
                            CHECK(0, "%s all_reduce %s op %d [%lld] = %g, by hand %g", where,
                                  ldt_dtype_name(dt), (int)op, (long long)i, got, want);
                            break;
                        }
                    }
                OK(ldt_all_reduce(c, send, send, n, dt, op)); /* in place */
                CHECK(memcmp(send, ref, (size_t)n * es) == 0, "%s in-place all_reduce %s differs", where,
                      ldt_dtype_name(dt));
                free(send);
                free(recv);
                free(ref);
            }
}

static void check_others(ldt_comm *c, const int *members, const char *where) {
    int k = ldt_comm_size(c), r = ldt_comm_rank(c), me = members[r];
    int64_t cnt = 5, *counts = malloc((size_t)k * sizeof *counts), total = 0, off = 0;
    float *send = malloc(sizeof(float) * 4096), *recv = malloc(sizeof(float) * 4096), *ref;
    for (int m = 0; m < k; m++) total += counts[m] = m % 3; /* 0,1,2,0,...: some empty */
    /* reduce_scatter: member r gets part r of the sum */
    fill(send, LDT_F32, me, 0, cnt * k);
    OK(ldt_reduce_scatter(c, send, recv, cnt, LDT_F32, LDT_REDUCE_SUM));
    ref = reference(members, k, LDT_F32, LDT_REDUCE_SUM, cnt * r, cnt);
    CHECK(memcmp(recv, ref, (size_t)cnt * 4) == 0, "%s reduce_scatter", where);
    OK(ldt_reduce_scatter(c, send, send + cnt * r, cnt, LDT_F32, LDT_REDUCE_SUM)); /* in place */
    CHECK(memcmp(send + cnt * r, ref, (size_t)cnt * 4) == 0, "%s in-place reduce_scatter", where);
    free(ref);
    /* The reductions' scratch, kept from call to call: a large all_reduce (the scratch grows
     * past a fresh mapping's size), a small one and a large reduce_scatter into it, each against
     * the reference */
    {
        static const int64_t big[] = {(1 << 20) + 5, 7, (1 << 19) + 3};
        for (int i = 0; i < 3; i++) {
            int64_t n = big[i], in = i == 2 ? n * k : n; /* reduce_scatter: n to each member */
            float *bs = malloc(sizeof(float) * (size_t)in), *br = malloc(sizeof(float) * (size_t)n), *bref;
            CHECK(bs && br, "%s: out of memory", where);
            fill(bs, LDT_F32, me, 7 * i, in);
            if (i == 2) OK(ldt_reduce_scatter(c, bs, br, n, LDT_F32, LDT_REDUCE_SUM));
            else OK(ldt_all_reduce(c, bs, br, n, LDT_F32, LDT_REDUCE_SUM));
            bref = reference(members, k, LDT_F32, LDT_REDUCE_SUM, 7 * i + (i == 2 ? n * r : 0), n);
            CHECK(memcmp(br, bref, (size_t)n * 4) == 0, "%s %s of %lld elements (the scratch kept)", where,
                  i == 2 ? "reduce_scatter" : "all_reduce", (long long)n);
            free(bref);
            free(bs);
            free(br);
        }
    }
    /* reduce_scatter_v */
    for (int m = 0; m < r; m++) off += counts[m];
    fill(send, LDT_F32, me, 0, total);
    OK(ldt_reduce_scatter_v(c, send, recv, counts, LDT_F32, LDT_REDUCE_MAX));
    ref = reference(members, k, LDT_F32, LDT_REDUCE_MAX, off, counts[r]);
    CHECK(memcmp(recv, ref, (size_t)counts[r] * 4) == 0, "%s reduce_scatter_v", where);
    free(ref);
    /* all_gather: member m's block holds member m's values */
    fill(send, LDT_F32, me, 100, 3);
    OK(ldt_all_gather(c, send, recv, 3, LDT_F32));
    for (int m = 0; m < k; m++)
        for (int i = 0; i < 3; i++)
            CHECK(recv[m * 3 + i] == (float)value(members[m], 100 + i), "%s all_gather [%d][%d]", where, m, i);
    fill(recv + 3 * r, LDT_F32, me, 200, 3);
    OK(ldt_all_gather(c, recv + 3 * r, recv, 3, LDT_F32)); /* in place */
    for (int m = 0; m < k; m++)
        CHECK(recv[m * 3] == (float)value(members[m], 200), "%s in-place all_gather [%d]", where, m);
    /* all_gather_v */
    fill(send, LDT_F32, me, 300, counts[r]);
    OK(ldt_all_gather_v(c, send, recv, counts, LDT_F32));
    {
        int64_t at = 0;
        for (int m = 0; m < k; m++)
            for (int64_t i = 0; i < counts[m]; i++, at++)
                CHECK(recv[at] == (float)value(members[m], 300 + i), "%s all_gather_v [%d][%lld]", where, m,
                      (long long)i);
    }
    /* all_to_all: block m of member r goes to member m's block r */
    for (int m = 0; m < k; m++)
        for (int i = 0; i < 2; i++) send[m * 2 + i] = (float)(1000 * me + 10 * members[m] + i);
    OK(ldt_all_to_all(c, send, recv, 2, LDT_F32));
    for (int m = 0; m < k; m++)
        for (int i = 0; i < 2; i++)
            CHECK(recv[m * 2 + i] == (float)(1000 * members[m] + 10 * me + i), "%s all_to_all [%d][%d]", where,
                  m, i);
    /* all_to_all_v: member r sends m+1 elements to member m */
    {
        int64_t *sc = calloc((size_t)k * 4, sizeof *sc), *sd = sc + k, *rc = sc + 2 * k, *rd = sc + 3 * k, s = 0, t = 0;
        for (int m = 0; m < k; m++) {
            sc[m] = m + 1, sd[m] = s, s += sc[m];
            rc[m] = r + 1, rd[m] = t, t += rc[m];
            for (int64_t i = 0; i < sc[m]; i++) send[sd[m] + i] = (float)(100 * me + members[m] + 0.5 * (double)i);
        }
        OK(ldt_all_to_all_v(c, send, sc, sd, recv, rc, rd, LDT_F32));
        for (int m = 0; m < k; m++)
            for (int64_t i = 0; i < rc[m]; i++)
                CHECK(recv[rd[m] + i] == (float)(100 * members[m] + me + 0.5 * (double)i), "%s all_to_all_v", where);
        free(sc);
    }
    /* broadcast from the last member */
    fill(send, LDT_F32, me, 400, 9);
    OK(ldt_broadcast(c, send, 9, LDT_F32, k - 1));
    for (int i = 0; i < 9; i++) CHECK(send[i] == (float)value(members[k - 1], 400 + i), "%s broadcast", where);
    OK(ldt_barrier(c));
    /* a ring of sends and receives in one group: no deadlock, each gets its left neighbour's */
    if (k > 1) {
        fill(send, LDT_F32, me, 500, 4);
        OK(ldt_group_start());
        OK(ldt_send(c, send, 4, LDT_F32, (r + 1) % k));
        OK(ldt_recv(c, recv, 4, LDT_F32, (r + k - 1) % k));
        OK(ldt_group_end());
        for (int i = 0; i < 4; i++)
            CHECK(recv[i] == (float)value(members[(r + k - 1) % k], 500 + i), "%s send/recv ring", where);
    }
    free(counts);
    free(send);
    free(recv);
}

/* max and min keep the first NaN in rank order, as the threaded backend does. */
static void check_nan(ldt_comm *c, const int *members) {
    int k = ldt_comm_size(c), me = members[ldt_comm_rank(c)];
    float x[8], *ref;
    const void **srcs = malloc((size_t)k * sizeof *srcs);
    float (*all)[8] = malloc((size_t)k * sizeof *all);
    for (int m = 0; m < k; m++) {
        for (int i = 0; i < 8; i++) all[m][i] = (float)value(members[m], i);
        if (members[m] == 1) all[m][2] = NAN, all[m][5] = -NAN;
        if (members[m] == 0) all[m][5] = NAN;
        srcs[m] = all[m];
    }
    ref = malloc(sizeof x);
    for (int o = 1; o <= 2; o++) {
        ldt_reduce_op op = o == 1 ? LDT_REDUCE_MAX : LDT_REDUCE_MIN;
        memcpy(x, all[ldt_comm_rank(c)], sizeof x);
        ldt__reduce_n(ref, srcs, k, 8, LDT_F32, op);
        OK(ldt_all_reduce(c, x, x, 8, LDT_F32, op));
        CHECK(memcmp(x, ref, sizeof x) == 0, "NaN under op %d differs from rank order", (int)op);
    }
    (void)me;
    free(ref);
    free(all);
    free(srcs);
}

/* Process mode (ldt_ctx_options.world): a compiled matmul + sum over a 1-D mesh of all the
 * processes gives what the same graph gives on rank threads inside this one process; and
 * when one process traces another shape, compile fails on every process, naming a node. */
static ldt_tensor *graph(ldt_ctx *ctx, int64_t k, float *xs, float *ws) {
    ldt_shape sx = {2, {6, k}}, sw = {2, {k, 5}};
    ldt_tensor *x = ldt_input(ctx, "x", &sx, LDT_F32), *w = ldt_param(ctx, "w", &sw, LDT_F32);
    ldt_placement s1 = ldt_shard(1), s0 = ldt_shard(0);
    int d = 1;
    for (int64_t i = 0; i < 6 * k; i++) xs[i] = (float)value((int)(i % 5), i) * 0.5f;
    for (int64_t i = 0; i < k * 5; i++) ws[i] = (float)value(3, i) * 0.25f;
    OK(ldt_input_bind(x, xs, 6 * k * 4));
    OK(ldt_param_set(w, ws, k * 5 * 4));
    OK(ldt_pin(x, &s1, 1));
    OK(ldt_pin(w, &s0, 1));
    return ldt_sum(ldt_matmul(x, w), &d, 1, 0);
}

static void check_process_mode(ldt_comm *world) {
    char text[16];
    ldt_mesh *mesh;
    ldt_ctx_options co = {0};
    ldt_ctx *local, *spmd;
    ldt_exec *el, *es;
    float xs[6 * 16], ws[16 * 5], want[6], got[6];
    snprintf(text, sizeof text, "%d", g_size);
    OK(ldt_mesh_parse(text, LDT_DEVICE_CPU, &mesh));
    co.mesh = mesh;
    OK(ldt_ctx_create(&co, &local));
    co.world = world;
    OK(ldt_ctx_create(&co, &spmd));
    {
        ldt_tensor *yl = graph(local, 11, xs, ws), *ys = graph(spmd, 11, xs, ws);
        OK(ldt_compile(local, &yl, 1, NULL, &el));
        OK(ldt_replay(el));
        OK(ldt_exec_read(el, 0, want, sizeof want));
        OK(ldt_compile(spmd, &ys, 1, NULL, &es));
        OK(ldt_replay(es));
        OK(ldt_exec_read(es, 0, got, sizeof got));
        CHECK(memcmp(want, got, sizeof got) == 0, "process mode differs from rank threads: %g vs %g", got[0], want[0]);
    }
    /* rank 1 traces k = 12, the others 11: nobody runs a plan the others do not share */
    if (g_size > 1) {
        ldt_tensor *y = graph(spmd, g_rank == 1 ? 12 : 11, xs, ws);
        ldt_exec *bad = NULL;
        ldt_status st = y ? ldt_compile(spmd, &y, 1, NULL, &bad) : LDT_ERR_INVALID_ARGUMENT;
        CHECK(st == LDT_ERR_INVALID_USAGE && strstr(ldt_last_error(), "planned differently") &&
                  strstr(ldt_last_error(), "node"),
              "a different trace on rank 1: %s: %s", ldt_status_name(st), ldt_last_error());
        ldt_trace_discard(spmd);
    }
    ldt_ctx_destroy(spmd);
    ldt_ctx_destroy(local);
    ldt_mesh_destroy(mesh);
}

int main(int argc, char **argv) {
    ldt_comm *world, *quick = NULL;
    ldt_comm_options qo = {300};
    MPI_Comm dup;
    int *members, total = 0;
    (void)argc;
    (void)argv;
    if (ldt_mpi_world(NULL, &world) != LDT_OK) {
        fprintf(stderr, "mpi world: %s\n", ldt_last_error());
        return 1;
    }
    g_rank = ldt_comm_rank(world);
    g_size = ldt_comm_size(world);
    CHECK(strcmp(ldt_comm_backend(world), "mpi") == 0, "backend %s", ldt_comm_backend(world));
    members = malloc((size_t)g_size * sizeof *members);
    for (int r = 0; r < g_size; r++) members[r] = r;
    check_all_reduce(world, members, "world");
    check_others(world, members, "world");
    check_nan(world, members);
    /* groups per mesh dim: a 2 x (n/2) mesh */
    if (g_size >= 2 && g_size % 2 == 0) {
        char text[32];
        ldt_mesh *mesh;
        snprintf(text, sizeof text, "2x%d", g_size / 2);
        OK(ldt_mesh_parse(text, LDT_DEVICE_CPU, &mesh));
        for (int d = 0; d < 2; d++) {
            ldt_comm *g = NULL;
            int gm[LDT_MAX_DIMS * 64];
            char where[32];
            OK(ldt_comm_mesh_dim(world, mesh, d, &g));
            if (!g) continue;
            for (int m = 0; m < ldt_comm_size(g); m++) gm[m] = ldt_comm_world_rank(g, m);
            snprintf(where, sizeof where, "mesh dim %d", d);
            check_all_reduce(g, gm, where);
            check_others(g, gm, where);
            ldt_comm_destroy(g);
        }
        ldt_mesh_destroy(mesh);
    }
    check_process_mode(world);
    /* a mesh over an existing communicator: the world split in halves, each its own 2-rank
     * mesh in process mode */
    if (g_size == 4) {
        MPI_Comm half;
        ldt_comm *hw = NULL;
        MPI_Comm_split(MPI_COMM_WORLD, g_rank / 2, g_rank, &half);
        OK(ldt_mpi_world_from(&half, NULL, &hw));
        if (hw) {
            int save_rank = g_rank, save_size = g_size;
            CHECK(ldt_comm_size(hw) == 2 && ldt_comm_rank(hw) == g_rank % 2, "half world %d/%d",
                  ldt_comm_rank(hw), ldt_comm_size(hw));
            g_rank = ldt_comm_rank(hw), g_size = 2; /* graph() and the checks read these */
            check_process_mode(hw);
            g_rank = save_rank, g_size = save_size;
            ldt_mpi_world_destroy(hw);
        }
        MPI_Comm_free(&half);
    }
    /* bad input */
    CHECK(ldt_mpi_world_from(NULL, NULL, &quick) == LDT_ERR_INVALID_ARGUMENT && strstr(ldt_last_error(), "NULL"),
          "a NULL communicator: %s", ldt_last_error());
    CHECK(ldt_all_reduce(world, NULL, NULL, 4, LDT_F32, LDT_REDUCE_SUM) == LDT_ERR_INVALID_ARGUMENT,
          "NULL buffers are refused before any message");
    /* a scratch cap below the least: refused by name on every process, before any message */
    {
        const char *was = getenv("LDT_MPI_SCRATCH_BYTES");
        char *keep = was ? strdup(was) : NULL;
        MPI_Comm bad;
        ldt_comm *bw = NULL;
        ldt_status st;
        MPI_Comm_dup(MPI_COMM_WORLD, &bad);
        setenv("LDT_MPI_SCRATCH_BYTES", "12", 1);
        st = ldt_mpi_world_from(&bad, NULL, &bw);
        CHECK(st == LDT_ERR_INVALID_ARGUMENT && !bw &&
                  strstr(ldt_last_error(), "LDT_MPI_SCRATCH_BYTES is '12', expected a byte count of at least 4096"),
              "a 12-byte scratch cap: %s (%s)", ldt_status_name(st), ldt_last_error());
        setenv("LDT_MPI_SCRATCH_BYTES", "4096x", 1);
        st = ldt_mpi_world_from(&bad, NULL, &bw);
        CHECK(st == LDT_ERR_INVALID_ARGUMENT && !bw, "a scratch cap of '4096x': %s", ldt_status_name(st));
        if (bw) ldt_mpi_world_destroy(bw);
        if (keep) setenv("LDT_MPI_SCRATCH_BYTES", keep, 1);
        else unsetenv("LDT_MPI_SCRATCH_BYTES");
        free(keep);
        MPI_Comm_free(&bad);
    }
    /* a peer that never sends: the receive times out (and is withdrawn) instead of hanging */
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    OK(ldt_mpi_world_from(&dup, &qo, &quick));
    if (quick && g_size > 1 && g_rank == 0) {
        float z[2];
        ldt_status st = ldt_recv(quick, z, 2, LDT_F32, 1);
        CHECK(st == LDT_ERR_TIMEOUT && strstr(ldt_last_error(), "300 ms"), "recv from a silent peer: %s (%s)",
              ldt_status_name(st), ldt_last_error());
    }
    if (quick) ldt_mpi_world_destroy(quick);
    MPI_Comm_free(&dup);
    /* every rank's verdict */
    OK(ldt_all_reduce(world, &g_fail, &total, 1, LDT_I32, LDT_REDUCE_SUM));
    if (g_rank == 0) printf("test_comm_mpi: %d processes, %d failed checks\n", g_size, total);
    free(members);
    ldt_mpi_world_destroy(world);
    return total != 0;
}
