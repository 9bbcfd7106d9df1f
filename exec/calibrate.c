/* Calibration: times every collective kind the redistribution planner issues (all_reduce,
 * reduce_scatter, all_gather, all_to_all) and broadcast along each mesh dim, and the local
 * ops (chunk, pad, partial), at sizes from 4 KiB to 64 MiB, as ldt_redistribute runs them (packing
 * included), so the planner prices what the engine does; then fits the cost model's constants to the
 * lower quartile of each timing's runs over three rounds with ldt_cost_model_fit (robust
 * least squares on relative error). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "ldt/exec.h"
#include "ldt/planner.h"
#include "ldt/trace.h"
#include "planner/profiles.h"
#include "core/ops.h"
#include "exec/calibrate_internal.h"
#include "planner/cost_fit.h"

/* Tensor sizes (bytes of the full f32 tensor): 4 KiB to 64 MiB by 4x; quick: three of them. */
static const int64_t k_sizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                  1 << 20, 4 << 20,  16 << 20, 64 << 20};
static const int64_t k_quick_sizes[] = {4 << 10, 64 << 10, 1 << 20};
/* The local ops' sizes: those and two more around the cache knees tried (512 KiB to 4 MiB of
 * the busiest rank's bytes on 4 ranks: 128 and 512 KiB): a local copy of the smaller sizes
 * takes about a microsecond, within its timing noise, so without them two sizes decided the
 * local slope below the knee (it moved 1.3 to 1.7x between calibrations of an idle host). */
static const int64_t k_local_sizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20,
                                        2 << 20, 4 << 20,  8 << 20,  16 << 20,  32 << 20, 64 << 20};
#define LOCAL_EXTRA 4 /* k_local_sizes less k_sizes: with 8 and 32 MiB, the local knee (2 to
                         4 MiB a rank, fit_local) has sizes on both sides of it */
#define LOCAL_OPS 3   /* chunk, pad, partial */

/* A rows x cols f32 shape of `bytes`, as square as the powers of two allow. */
static ldt_shape square_shape(int64_t bytes) {
    int64_t e = bytes / 4, r = 1;
    ldt_shape s;
    while (r * r < e) r *= 2;
    if (r * r > e) r /= 2;
    s.ndim = 2;
    s.dims[0] = r;
    s.dims[1] = e / r;
    return s;
}

static int cmp_d(const void *a, const void *b);
static double mono_s(void);

/* Every run of one timing, over every round and world (each already less its harness); the
 * timing is their lower quartile (runs_stat). The fastest of repeats was a rare event's: a
 * local chunk of 1 MiB ran in 40 us once in 60 runs of one idle 2-core machine, 60 us once,
 * and 78 to 100 us in half of them, so the fastest of three moved 3.7x from one try to the
 * next where the lower quartile of nine moves a few percent. */
#define MAX_RUNS 192
#define LDT_CAL_MAX_PER 64 /* runs of one world (time_plan_worlds) */
typedef struct runs {
    double t[MAX_RUNS];
    int n;
} runs;

static void runs_add(runs *r, double t) {
    if (r && r->n < MAX_RUNS) r->t[r->n++] = t;
}

/* The lower quartile of the runs (with median: their median; the fastest of four or fewer). */
static double runs_stat(runs *r, int median) {
    if (r->n == 0) return 0;
    qsort(r->t, (size_t)r->n, sizeof *r->t, cmp_d);
    return r->t[median ? r->n / 2 : (r->n - 1) / 4];
}

/* Replays ex once to warm it (first touch of the arena), then `reps` times, each timed into
 * t[0..reps), and returns the median (median != 0) or the least disturbed (fastest) run;
 * every run's time also goes into *all when not NULL (with median only the median). */
static ldt_status time_replays(ldt_exec *ex, int reps, int median, double *t, double *out, runs *all) {
    if (reps > 64) reps = 64;
    if (reps < 1) reps = 1;
    LDT_CHECK(ldt_replay(ex));
    for (int r = 0; r < reps; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        LDT_CHECK(ldt_replay(ex));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        t[r] = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    *out = t[median ? reps / 2 : 0];
    for (int r = 0; r < (median ? 1 : reps); r++) runs_add(all, median ? *out : t[r]);
    return LDT_OK;
}

/* The runs a plan under 1 ms whose fastest run took `fastest` seconds gets in one of `rounds`
 * rounds: 2 ms of runs (at most 101) over all of them, odd. */
static int short_plan_runs(double fastest, int rounds) {
    int more = (int)(2e-3 / (fastest > 2e-5 ? fastest : 2e-5)) | 1;
    if (more > 101) more = 101;
    return more / (rounds > 0 ? rounds : 1) | 1;
}

/* Least seconds of the plan from -> to on `mesh` for shape `shape` (every run's time also
 * into *all when not NULL; with median only the median); *step gets its one step (*nsteps
 * its step count: the caller keeps only one-step plans of the kind it asked). */
static ldt_status time_plan_to(const ldt_mesh *mesh, const ldt_mesh *to_mesh, const ldt_shape *shape,
                               const ldt_placement *from, const ldt_placement *to, int reps, int median,
                               int rounds, const ldt_cost_model *cm, double *out, runs *all,
                               ldt_redist_step *step, int *nsteps) {
    ldt_spec src;
    ldt_redist_options opt = {cm, 0, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan;
    ldt_status st = LDT_OK;
    LDT_CHECK(ldt_spec_init(&src, mesh, shape, from, ldt_mesh_ndim(mesh), LDT_F32));
    LDT_CHECK(ldt_redist_plan_create(&src, to_mesh, to, ldt_mesh_ndim(to_mesh ? to_mesh : mesh), &opt, &plan));
    *nsteps = ldt_redist_plan_nsteps(plan);
    if (step && *nsteps == 1) ldt_redist_plan_step(plan, 0, step);
    /* `reps` runs, each in a world of its own after a warm-up (a world whose threads the
     * scheduler placed badly stays slow for its life); with median, one world's median */
    *out = INFINITY;
    if (median) st = ldt_redistribute_measure(NULL, plan, reps, out, NULL);
    for (int r = 0; r < reps && st == LDT_OK && !median; r++) {
        double t;
        st = ldt_redistribute_measure(NULL, plan, 1, &t, NULL);
        if (st == LDT_OK && t < *out) *out = t;
        if (st == LDT_OK) runs_add(all, t);
    }
    /* a short plan (under 1 ms) gets more repeats, up to 2 ms of runs (at most 101) over all
     * `rounds` of the calibration: its time is a few times the harness's and as noisy, and
     * runs are cheap */
    if (st == LDT_OK && *out < 1e-3 && reps > 1) {
        int more = short_plan_runs(*out, rounds);
        if (more > reps && median) {
            st = ldt_redistribute_measure(NULL, plan, more, out, NULL);
        } else {
            for (int r = reps; r < more && st == LDT_OK; r++) {
                double t;
                st = ldt_redistribute_measure(NULL, plan, 1, &t, NULL);
                if (st == LDT_OK && t < *out) *out = t;
                if (st == LDT_OK && !median) runs_add(all, t);
            }
        }
    }
    if (st == LDT_OK && median) runs_add(all, *out);
    ldt_redist_plan_destroy(plan);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

static ldt_status time_plan(const ldt_mesh *mesh, const ldt_shape *shape, const ldt_placement *from,
                            const ldt_placement *to, int reps, int median, int rounds,
                            const ldt_cost_model *cm, double *out, runs *all, ldt_redist_step *step,
                            int *nsteps) {
    return time_plan_to(mesh, NULL, shape, from, to, reps, median, rounds, cm, out, all, step, nsteps);
}

/* time_plan under an MPI world: the plan from -> to (for its steps) run on the world by a
 * redistribution runner from this process's source shard to its target shard, as
 * ldt_redistribute_measure runs it on rank threads: a warm-up, then each run from a barrier
 * of the world to the next one after it (local: a local op's plan, which meets no peer, its
 * runs back to back after one barrier, as a replay runs it: a barrier's few microseconds and
 * the processes' skew swamped the copies of 512 KiB and less); *out the fastest (or median)
 * of this process's runs.
 * Until 2026-11-27 it timed replays of a compiled program (an input pinned `from`,
 * redistributed to `to`), and each replay loaded its input again (a copy of the rank's whole
 * source region), which no step's redistribution pays: a chunk of 16 MiB a rank from a
 * Replicate tensor of 32 MiB took 11 to 13 ms there, where the plan's step takes a third. */
static ldt_status time_plan_world(ldt_comm *world, const ldt_mesh *mesh, const ldt_shape *shape,
                                  const ldt_placement *from, const ldt_placement *to, int reps,
                                  int median, int rounds, int local, const ldt_cost_model *cm,
                                  double *out, runs *all, ldt_redist_step *step, int *nsteps) {
    ldt_spec src, dst;
    ldt_redist_options opt = {cm, 0, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan = NULL;
    ldt_redist_runner *run = NULL;
    ldt_region rin, rout;
    int nd = ldt_mesh_ndim(mesh), me = ldt_comm_rank(world);
    char *in = NULL, *outb = NULL;
    double t[101], fastest;
    int more;
    ldt_status st = LDT_OK;
    LDT_CHECK(ldt_spec_init(&src, mesh, shape, from, nd, LDT_F32));
    LDT_CHECK(ldt_spec_init(&dst, mesh, shape, to, nd, LDT_F32));
    LDT_CHECK(ldt_redist_plan_create(&src, NULL, to, nd, &opt, &plan));
    *nsteps = ldt_redist_plan_nsteps(plan);
    if (step && *nsteps == 1) ldt_redist_plan_step(plan, 0, step);
    if (reps > 64) reps = 64;
    if (reps < 1) reps = 1;
    LDT_CHECK_GOTO(ldt_layout(&src, me, &rin));
    LDT_CHECK_GOTO(ldt_layout(&dst, me, &rout));
    /* zeros written: the runs read memory of their own, not the kernel's one zero page */
    {
        size_t nin = (size_t)(rin.numel > 0 ? rin.numel : 1) * 4, nout = (size_t)(rout.numel > 0 ? rout.numel : 1) * 4;
        in = malloc(nin);
        outb = malloc(nout);
        if (!in || !outb) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
        memset(in, 0, nin);
        memset(outb, 0, nout);
    }
    LDT_CHECK_GOTO(ldt_redist_runner_create(world, plan, &run));
    LDT_CHECK_GOTO(ldt_redist_runner_run(run, in, outb)); /* warm-up: first touch, scratch */
    /* a short plan (under 1 ms on the slowest process: every process runs as many) gets more
     * runs, up to 2 ms of them (at most 101) over the calibration's rounds, as on rank threads
     * (time_plan_to) */
    more = reps;
    if (local) LDT_CHECK_GOTO(ldt_barrier(world));
    for (int r = 0; r < more; r++) {
        double t0;
        if (!local) LDT_CHECK_GOTO(ldt_barrier(world));
        t0 = mono_s();
        LDT_CHECK_GOTO(ldt_redist_runner_run(run, in, outb));
        if (!local) LDT_CHECK_GOTO(ldt_barrier(world));
        t[r] = mono_s() - t0;
        if (r == reps - 1 && reps > 1 && !median) {
            fastest = t[0];
            for (int q = 1; q < reps; q++)
                if (t[q] < fastest) fastest = t[q];
            LDT_CHECK_GOTO(ldt_all_reduce(world, &fastest, &fastest, 1, LDT_F64, LDT_REDUCE_MAX));
            if (fastest < 1e-3) {
                more = short_plan_runs(fastest, rounds);
                if (more < reps) more = reps;
            }
        }
    }
    reps = more;
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    *out = t[median ? reps / 2 : 0];
    for (int r = 0; r < (median ? 1 : reps); r++) runs_add(all, median ? *out : t[r]);
fail:
    ldt_redist_runner_destroy(run);
    ldt_redist_plan_destroy(plan);
    free(in);
    free(outb);
    return st;
}

/* time_plan on the mesh's rank threads, or time_plan_world under an MPI world. */
static ldt_status timed(ldt_comm *world, const ldt_mesh *mesh, const ldt_shape *shape,
                        const ldt_placement *from, const ldt_placement *to, int reps, int median,
                        int rounds, const ldt_cost_model *cm, double *out, runs *all,
                        ldt_redist_step *step, int *nsteps) {
    if (world)
        return time_plan_world(world, mesh, shape, from, to, reps, median, rounds, 0, cm, out, all, step, nsteps);
    return time_plan(mesh, shape, from, to, reps, median, rounds, cm, out, all, step, nsteps);
}

/* Repeats per size: the small ones are noisy and cheap, the large ones steady and slow. */
static int reps_for(int64_t bytes, int base) {
    if (bytes >= (16 << 20)) return base < 6 ? base : 6;
    return base;
}

/* Rounds of the whole sweep (collectives, broadcasts, local ops, send/recv, GEMMs and adds),
 * each with a third of the repeats, every timing's runs pooled over the rounds (their lower
 * quartile, runs_stat): a host slow for a
 * few seconds (the scheduler's placement, another job) slowed every repeat of the sizes it
 * overlapped when the repeats ran back to back (a reduce_scatter of 768 KiB a rank: 297, 419
 * and 767 us in three calibrations of an idle 2-core machine), now one round of them. */
#define CAL_ROUNDS 3

/* Per-round repeats: a third of the calibration's (at least 1). */
static int round_reps(int reps, int rounds) { return reps <= 1 ? 1 : (reps + rounds - 1) / rounds; }

typedef struct sink {
    ldt_cost_sample *s;
    runs *r; /* each sample's runs (its seconds: their runs_stat) */
    int cap, n;
} sink;

/* The runs v, each less `less`, of a sample of collective c, or of a broadcast (bcast 1; c is
 * then ignored): a new sample, or more runs of an earlier round's. */
static void add_sample_of(sink *k, ldt_collective c, int bcast, int dim, int64_t group, int64_t bytes,
                          const runs *v, double less) {
    int i, stored = k->n < k->cap ? k->n : k->cap;
    for (i = 0; i < stored; i++) {
        const ldt_cost_sample *x = &k->s[i];
        if (x->broadcast == bcast && (bcast || x->collective == c) && x->dim == dim && x->bytes == bytes) break;
    }
    if (i == stored) { /* a new one (counted past the room too: the caller reports it) */
        if (k->n++ >= k->cap) return;
        i = k->n - 1;
        memset(&k->s[i], 0, sizeof k->s[i]);
        k->s[i].collective = c;
        k->s[i].broadcast = bcast;
        k->s[i].dim = dim;
        k->s[i].group = group;
        k->s[i].bytes = bytes;
        k->r[i].n = 0;
    }
    for (int j = 0; j < v->n; j++) runs_add(&k->r[i], v->t[j] - less);
}

static void add_sample(sink *k, ldt_collective c, int dim, int64_t group, int64_t bytes, const runs *v,
                       double less) {
    add_sample_of(k, c, 0, dim, group, bytes, v, less);
}

/* ---- broadcast ------------------------------------------------------------------------ */

/* One broadcast timing: `bytes` from group rank 0 along mesh dim `dim`, each run between two
 * barriers of the group, interleaved with as many runs of the harness (the two barriers
 * alone); *bcast and *harness get the fastest (or median) and the lower quartile (or median)
 * of each, and *all every run less that harness, as world rank 0 saw them (every process its
 * own under MPI: mine). */
typedef struct bcast_job {
    const ldt_mesh *mesh;
    int dim, reps, median, mine;
    int64_t bytes;
    double bcast, harness;
    runs *all; /* every run less the harness's lower quartile (with median: the median's) */
} bcast_job;

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static ldt_status bcast_rank(ldt_comm *world, void *arg) {
    bcast_job *j = arg;
    ldt_comm *g = NULL;
    int64_t count = j->bytes / 4;
    float *buf = calloc((size_t)(count > 0 ? count : 1), sizeof *buf);
    double *tb = malloc((size_t)j->reps * sizeof *tb), *th = malloc((size_t)j->reps * sizeof *th);
    ldt_status st = LDT_OK;
    if (!buf || !tb || !th) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    for (int64_t i = 0; i < count; i++) buf[i] = 1.0f; /* the root reads memory, not the zero page */
    LDT_CHECK_GOTO(ldt_comm_mesh_dim(world, j->mesh, j->dim, &g));
    LDT_CHECK_GOTO(ldt_broadcast(g, buf, count, LDT_F32, 0)); /* warm-up: first touch */
    for (int r = 0; r < j->reps; r++) {
        double t0;
        LDT_CHECK_GOTO(ldt_barrier(g));
        t0 = mono_s();
        LDT_CHECK_GOTO(ldt_barrier(g));
        th[r] = mono_s() - t0;
        LDT_CHECK_GOTO(ldt_barrier(g));
        t0 = mono_s();
        LDT_CHECK_GOTO(ldt_broadcast(g, buf, count, LDT_F32, 0));
        LDT_CHECK_GOTO(ldt_barrier(g));
        tb[r] = mono_s() - t0;
    }
    if (j->mine || ldt_comm_rank(world) == 0) {
        qsort(tb, (size_t)j->reps, sizeof *tb, cmp_d);
        qsort(th, (size_t)j->reps, sizeof *th, cmp_d);
        j->bcast = tb[j->median ? j->reps / 2 : 0];
        j->harness = th[j->median ? j->reps / 2 : (j->reps - 1) / 4];
        for (int r = 0; r < (j->median ? 1 : j->reps); r++) runs_add(j->all, (j->median ? j->bcast : tb[r]) - j->harness);
    }
fail:
    ldt_comm_destroy(g);
    free(buf);
    free(tb);
    free(th);
    return st;
}

/* Broadcasts along each mesh dim of two or more ranks at every size (the tensor's bytes, the
 * buffer each non-root receives), on the mesh's rank threads or the MPI world: samples of the
 * broadcast kind, less their harness (on rank threads only for a mesh of ranks 0..n-1, the
 * threads' world ranks; others keep broadcast's factors). A size under 1 MiB gets 101 repeats (each run is tens
 * of microseconds, as noisy as the harness it is less). */
static ldt_status time_broadcasts(ldt_comm *world, const ldt_mesh *mesh, const int64_t *sizes, int nsizes,
                                  int reps, int median, int rounds, sink *k) {
    int nr = ldt_mesh_nranks(mesh);
    for (int i = 0; i < nr && !world; i++) /* rank threads 0..nr-1 are the mesh's ranks */
        if (ldt_mesh_rank_at(mesh, i) < 0 || ldt_mesh_rank_at(mesh, i) >= nr) return LDT_OK;
    for (int d = 0; d < ldt_mesh_ndim(mesh); d++) {
        int64_t g = ldt_mesh_dim_size(mesh, d);
        if (g < 2) continue;
        for (int z = 0; z < nsizes; z++) {
            runs rv;
            bcast_job j = {mesh, d,
                           round_reps(sizes[z] < (1 << 20) && reps > 1 ? 101 : reps_for(sizes[z], reps), rounds),
                           median, world != NULL, sizes[z], 0, 0, &rv};
            rv.n = 0;
            if (world) LDT_CHECK(bcast_rank(world, &j));
            else LDT_CHECK(ldt_threads_launch(nr, NULL, bcast_rank, &j));
            add_sample_of(k, LDT_COLL_ALL_GATHER, 1, d, g, sizes[z], &rv, 0);
        }
    }
    return LDT_OK;
}

/* The bytes ldt_cost_seconds takes for a measured step: for collectives the busiest rank's
 * sent or received bytes; for local ops the bytes written, which the step does not carry,
 * read back from its price under a model whose local op costs one second per byte. */
static int64_t step_bytes(const ldt_redist_step *s) {
    if (s->collective <= LDT_COLL_ALL_TO_ALL || s->collective == LDT_COLL_SEND_RECV)
        return s->bytes_sent > s->bytes_recv ? s->bytes_sent : s->bytes_recv;
    return (int64_t)llround(s->seconds);
}

/* The cores the rank threads share: the processors online (what exec/compile.c weighs
 * overlap by). */
static int online_cores(void) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 && c < 1000000 ? (int)c : 1;
}

/* ---- compute --------------------------------------------------------------------------- */

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The one-op programs compute calibration times. */
enum { OP_GEMM, OP_ADD, OP_GELU, OP_NORM, OP_SOFTMAX, OP_SUM, OP_CHAIN };

/* Least seconds of one replay of a one-op program on `mesh` with everything Replicate (so
 * every rank thread runs the whole op at once, sharing the cores as a step's ranks do), less
 * `base` (a tiny step's): OP_GEMM a [m,k] x [k,n] matmul; OP_ADD an add of two [m] vectors;
 * OP_GELU, OP_NORM (layer_norm), OP_SOFTMAX, OP_SUM (over the last dim) on an [m/256, 256]
 * tensor; OP_CHAIN k adds of one element in a row (dispatch, not work). OP_GEMM (square: m = k
 * = n) and OP_ADD run `chain` times in a row, each on the last one's result (y = op(y, b)), and
 * *out is one op's share of the step less base: an op of a microsecond, timed alone, is within
 * the timing's noise and the base's, so small ones are timed as chains of tens of microseconds.
 * *flops and *bytes get one op's FLOPs and bytes read and written as the roofline counts them. */
static ldt_status time_op(ldt_comm *world, const ldt_mesh *mesh, int op, int64_t m, int64_t k, int64_t n,
                          int chain, int reps, int median, double base, double *out, runs *all,
                          double *flops, double *bytes) {
    ldt_ctx *ctx = NULL;
    ldt_exec *ex = NULL;
    ldt_ctx_options co = {0};
    int64_t cols = 256, rows = m / 256 > 0 ? m / 256 : 1;
    ldt_shape sa = {2, {m, k}}, sb = {2, {k, n}}, sv = {1, {m}}, sr = {2, {rows, cols}},
              s1 = {1, {1}};
    const ldt_shape *sha, *shb;
    ldt_tensor *a, *b = NULL, *y = NULL;
    float *da = NULL, *db = NULL;
    ldt_status st = LDT_OK;
    double t[64];
    ldt_placement rr[LDT_MAX_DIMS];
    ldt_compile_options copt = {0};
    int64_t na, nb;
    int last = 1;
    sha = op == OP_GEMM ? &sa : op == OP_ADD ? &sv : op == OP_CHAIN ? &s1 : &sr;
    shb = op == OP_GEMM ? &sb : op == OP_ADD ? &sv : &s1;
    na = sha->ndim == 2 ? sha->dims[0] * sha->dims[1] : sha->dims[0];
    nb = shb->ndim == 2 ? shb->dims[0] * shb->dims[1] : shb->dims[0];
    co.mesh = mesh;
    co.world = world;
    if (reps > 64) reps = 64;
    for (int i = 0; i < ldt_mesh_ndim(mesh); i++) rr[i] = ldt_replicate();
    copt.plan.strict = 1; /* no move: every rank computes the whole op */
    da = malloc((size_t)na * sizeof *da);
    db = malloc((size_t)nb * sizeof *db);
    if (!da || !db) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    if (chain < 1 || (op != OP_GEMM && op != OP_ADD) || (op == OP_GEMM && (m != k || k != n))) chain = 1;
    for (int64_t i = 0; i < na; i++) da[i] = (float)(i % 7) * 0.25f;
    /* a GEMM's b has column sums about 1, so a chain of them keeps its values' scale */
    for (int64_t i = 0; i < nb; i++) db[i] = (float)(i % 5) * 0.5f / (op == OP_GEMM ? (float)k : 1.0f);
    LDT_CHECK_GOTO(ldt_ctx_create(&co, &ctx));
    a = ldt_input(ctx, "a", sha, LDT_F32);
    if (op == OP_GEMM || op == OP_ADD || op == OP_CHAIN) b = ldt_input(ctx, "b", shb, LDT_F32);
    if (!a || ((op == OP_GEMM || op == OP_ADD || op == OP_CHAIN) && !b))
        LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "calibrate: %s", ldt_ctx_errmsg(ctx));
    LDT_CHECK_GOTO(ldt_input_bind(a, da, na * 4));
    LDT_CHECK_GOTO(ldt_pin(a, rr, ldt_mesh_ndim(mesh)));
    if (b) {
        LDT_CHECK_GOTO(ldt_input_bind(b, db, nb * 4));
        LDT_CHECK_GOTO(ldt_pin(b, rr, ldt_mesh_ndim(mesh)));
    }
    switch (op) {
    case OP_GEMM:
        y = a;
        for (int i = 0; i < chain && y; i++) y = ldt_matmul(y, b);
        break;
    case OP_ADD:
        y = a;
        for (int i = 0; i < chain && y; i++) y = ldt_add(y, b);
        break;
    case OP_GELU: y = ldt_gelu(a, 0); break;
    case OP_NORM: y = ldt_layer_norm(a, 1, NULL, NULL, 1e-5); break;
    case OP_SOFTMAX: y = ldt_softmax(a, 1); break;
    case OP_SUM: y = ldt_sum(a, &last, 1, 0); break;
    default:
        y = a;
        for (int64_t i = 0; i < k && y; i++) y = ldt_add(y, b);
        break;
    }
    if (!y) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "calibrate: %s", ldt_ctx_errmsg(ctx));
    LDT_CHECK_GOTO(ldt_pin(y, rr, ldt_mesh_ndim(mesh)));
    LDT_CHECK_GOTO(ldt_compile(ctx, &y, 1, &copt, &ex));
    /* zero-copy: every rank holds all of each input (Replicate) and reads it in place, so a
     * replay is the ops alone; bound by copy, each replay loaded its inputs again, which no
     * step's intermediate value pays: an add of 4 MiB of traffic on 4 rank threads took 1.9
     * to 2.4 ms so, 0.39 to 0.44 in place, one of 64 MiB 37 to 39 against 17 to 22 */
    LDT_CHECK_GOTO(ldt_exec_bind(ex, "a", da, na * 4));
    if (b) LDT_CHECK_GOTO(ldt_exec_bind(ex, "b", db, nb * 4));
    LDT_CHECK_GOTO(time_replays(ex, reps, median, t, out, NULL));
    *out = *out - base > 1e-9 ? (*out - base) / chain : 1e-9;
    for (int r = 0; all && r < (median ? 1 : reps); r++) /* t is sorted */
        runs_add(all, median ? *out : t[r] - base > 1e-9 ? (t[r] - base) / chain : 1e-9);
    if (flops || bytes) {
        ldt_shape so;
        double outn = 1, fl;
        int opc = op == OP_GEMM ? LDT_OP_MATMUL : op == OP_GELU ? LDT_OP_GELU : op == OP_NORM
                  ? LDT_OP_LAYER_NORM : op == OP_SOFTMAX ? LDT_OP_SOFTMAX : op == OP_SUM ? LDT_OP_SUM
                  : LDT_OP_ADD;
        LDT_CHECK_GOTO(ldt_tensor_shape(y, &so));
        for (int d = 0; d < so.ndim; d++) outn *= (double)so.dims[d];
        fl = ldt__op_flops(opc, &so, sha, b ? shb : NULL);
        if (flops) *flops = fl;
        if (bytes) *bytes = 4.0 * ((double)na + (b ? (double)nb : 0) + outn);
    }
fail:
    free(da);
    free(db);
    ldt_ctx_destroy(ctx); /* it owns its executables */
    return st;
}

/* The shortest timing a curve's peak comes from (ldt__fill_curve). */
#define PEAK_MIN_S 10e-6

/* Adds (size, rate / peak) points to curve e from rates measured at increasing sizes (size /
 * rate: one op's seconds), the shorter ones' capped at 1; the peak is the best rate of the ops
 * that took PEAK_MIN_S or more (of all, when none did): a rate the memory sets, not a cache
 * or a launch. The best of all was the add of 64 or 256 KiB of traffic (2 and 8 us an op, its
 * data in a core's cache), and its rate moved most between calibrations: the memory
 * bandwidth 1.29x in one pair (2026-11-27), 64 to 87 GB/s over 28 calibrations of one 2-core
 * machine (69 of their 378 pairs more than 25% apart), where the 1 MiB add's (40 us) is 43 to
 * 56 (7 pairs). The small adds' prices rise by what their cap takes: a microsecond or two. */
double ldt__fill_curve(ldt_eff_curve *e, const double *size, const double *rate, int n) {
    double peak = 0, best = 0;
    for (int i = 0; i < n; i++) {
        if (rate[i] > best) best = rate[i];
        if (rate[i] > peak && size[i] / rate[i] >= PEAK_MIN_S) peak = rate[i];
    }
    if (!(peak > 0)) peak = best;
    e->npoints = 0;
    for (int i = 0; i < n && i < LDT_EFF_MAX_POINTS; i++) {
        double f = rate[i] / peak;
        e->size[e->npoints] = size[i];
        e->eff[e->npoints++] = f > 1e-3 ? (f < 1 ? f : 1) : 1e-3;
    }
    return peak;
}

/* GEMM FLOP/s at square shapes and elementwise bandwidth at sizes from 64 KiB to 64 MiB, on
 * every rank thread of the mesh at once: the f32 peak and memory bandwidth of one rank while
 * its peers share the cores (as in a step), with their efficiency curves (bf16 and f64 peaks
 * keep the base profile's ratios to f32). The sharing is measured, so `cores` is 0 (no
 * further slowdown). Then a kernel's launch (a chain of 256 one-element adds against one) and
 * the norm, softmax, reduce and transcendental classes' curves: each size's roofline time at
 * efficiency 1 under the peak and bandwidth just measured over its measured time (less the
 * tiny step's, so the launch is not in it). */
#define GEMM_WORLDS 3

static const int64_t k_gemm_n[] = {32, 64, 128, 256, 512, 1024};
static const int64_t k_add_bytes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};

/* What the compute rounds measure: the tiny step's time (base), and every run of each GEMM
 * and add (one op's seconds). */
typedef struct compute_acc {
    double base;
    runs gemm[6], add[6];
} compute_acc;

/* A chain long enough that the step is about a millisecond: 32 MFLOP of GEMMs, or 32 MiB of
 * an add's traffic (a chain of 1 MiB, tens of microseconds, moved 2x between calibrations of
 * an idle 2-core machine: its 4 rank threads' wake-ups are as long; one of 8 MiB, 15%). */
static int gemm_chain(int64_t n) {
    double f = 2.0 * (double)n * (double)n * (double)n;
    return f >= 32e6 ? 1 : (int)(32e6 / f + 0.5);
}
static int add_chain(int64_t bytes) { return bytes >= (32 << 20) ? 1 : (int)((32 << 20) / bytes); }
/* --quick (a second or so, and what the tests run, under the sanitizers too) caps every chain
 * at QUICK_CHAIN: compiling a chain of 500 ops took most of a quick calibration's 26 s under
 * ASan; the short chains' timings are noisier, which a quick calibration accepts. */
#define QUICK_CHAIN 32
static int chain_for(int quick, int chain) { return quick && chain > QUICK_CHAIN ? QUICK_CHAIN : chain; }

/* One round of the GEMMs and adds, `worlds` worlds of their own each (fresh rank threads),
 * every run kept (with median: each world's median). A step waits for its slowest rank, and a
 * world whose threads the scheduler placed badly stays slow for its life (one idle 16-core
 * host gave 18 and 31 GFLOP/s, and memory bandwidths of 18 and 28 GB/s, in consecutive
 * calibrations of one world each); and a host slow for a few seconds slows one round, not
 * every run of a size (the rounds are interleaved with the collectives'). */
static ldt_status compute_round(ldt_comm *world, const ldt_mesh *mesh, int quick, int reps, int median,
                                int worlds, compute_acc *acc) {
    int ng = quick ? 3 : 6, na = quick ? 3 : 6;
    double t;
    for (int i = 0; i < ng + na; i++) {
        int g = i < ng;
        int64_t n = g ? k_gemm_n[i] : 0, b = g ? 0 : quick ? k_add_bytes[2 * (i - ng)] : k_add_bytes[i - ng];
        for (int w = 0; w < worlds; w++) {
            if (g)
                LDT_CHECK(time_op(world, mesh, OP_GEMM, n, n, n, chain_for(quick, gemm_chain(n)), n >= 512 ? 3 : reps,
                                  median, acc->base, &t, &acc->gemm[i], NULL, NULL));
            else
                LDT_CHECK(time_op(world, mesh, OP_ADD, b / 12, 1, 1, chain_for(quick, add_chain(b)),
                                  b >= (16 << 20) ? 3 : reps, median, acc->base, &t, &acc->add[i - ng], NULL, NULL));
        }
    }
    return LDT_OK;
}

static ldt_status compute_begin(ldt_comm *world, const ldt_mesh *mesh, int reps, int median, compute_acc *acc) {
    runs rb;
    rb.n = 0;
    for (int i = 0; i < 6; i++) acc->gemm[i].n = acc->add[i].n = 0;
    LDT_CHECK(time_op(world, mesh, OP_ADD, 1, 1, 1, 1, 3 * reps, median, 0, &acc->base, &rb, NULL, NULL)); /* one tiny add */
    acc->base = runs_stat(&rb, median);
    return LDT_OK;
}

static ldt_status calibrate_compute(ldt_comm *world, const ldt_mesh *mesh, int quick, int reps, int median,
                                    compute_acc *acc, ldt_cost_model *m) {
    static const int64_t cls_bytes[] = {64 << 10, 256 << 10, 1 << 20, 4 << 20};
    static const struct { int op; ldt_op_class c; } cls[] = {
        {OP_NORM, LDT_OPCLASS_NORM}, {OP_SOFTMAX, LDT_OPCLASS_SOFTMAX},
        {OP_SUM, LDT_OPCLASS_REDUCE}, {OP_GELU, LDT_OPCLASS_TRANSCENDENTAL}};
    int ng = quick ? 3 : 6, na = quick ? 3 : 6, nc = quick ? 2 : 4;
    double size[8], rate[8], base = acc->base, f32 = m->peak_flops[LDT_PREC_F32], peak, t1, t32;
    for (int i = 0; i < ng; i++) {
        int64_t n = k_gemm_n[i];
        size[i] = 2.0 * (double)n * (double)n * (double)n;
        rate[i] = size[i] / runs_stat(&acc->gemm[i], median);
    }
    peak = ldt__fill_curve(&m->eff[LDT_OPCLASS_MATMUL], size, rate, ng);
    for (int p = 0; p < LDT_PREC_COUNT; p++)
        if (p != LDT_PREC_F32) m->peak_flops[p] = m->peak_flops[p] / f32 * peak;
    m->peak_flops[LDT_PREC_F32] = peak;
    for (int i = 0; i < na; i++) {
        int64_t b = quick ? k_add_bytes[2 * i] : k_add_bytes[i];
        size[i] = (double)(b / 12) * 12.0; /* two operands read, one written */
        rate[i] = size[i] / runs_stat(&acc->add[i], median);
    }
    m->memory_bandwidth_Bps = ldt__fill_curve(&m->eff[LDT_OPCLASS_ELEMENTWISE], size, rate, na);
    /* the launch: what each further instruction of a step adds */
    LDT_CHECK(time_op(world, mesh, OP_CHAIN, 1, 1, 1, 1, 3 * reps, median, 0, &t1, NULL, NULL, NULL));
    LDT_CHECK(time_op(world, mesh, OP_CHAIN, 1, chain_for(quick, 256), 1, 1, 3 * reps, median, 0, &t32, NULL,
                      NULL, NULL));
    m->launch_s = t32 > t1 ? (t32 - t1) / (chain_for(quick, 256) - 1) : 1e-9;
    if (m->launch_s < 1e-9) m->launch_s = 1e-9;
    for (size_t c = 0; c < sizeof cls / sizeof cls[0]; c++) {
        ldt_eff_curve *e = &m->eff[cls[c].c];
        e->npoints = 0;
        for (int i = 0; i < nc; i++) {
            int64_t b = quick ? cls_bytes[2 * i] : cls_bytes[i];
            double t, fl, by, ideal, f;
            LDT_CHECK(time_op(world, mesh, cls[c].op, b / 8, 1, 1, 1, reps, median, base, &t, NULL, &fl, &by));
            ideal = fl / m->peak_flops[LDT_PREC_F32] > by / m->memory_bandwidth_Bps
                        ? fl / m->peak_flops[LDT_PREC_F32] : by / m->memory_bandwidth_Bps;
            f = ideal / t; /* t is past the tiny step's launch already */
            e->size[e->npoints] = by;
            e->eff[e->npoints++] = f > 1e-3 ? (f < 1 ? f : 1) : 1e-3;
        }
        for (int i = 1; i < e->npoints; i++) /* sizes must increase (rows round down) */
            if (!(e->size[i] > e->size[i - 1])) e->size[i] = e->size[i - 1] * 1.0001;
    }
    /* The figures are one rank's while every rank shares the cores: with more ranks than
     * cores, a rank alone would run ranks / cores times faster, and the roofline's slowdown
     * gives the shared figure back on this mesh (and a fair one on meshes of other sizes). */
    m->cores = online_cores();
    if (ldt_mesh_nranks(mesh) > m->cores) {
        double f = (double)ldt_mesh_nranks(mesh) / m->cores;
        for (int p = 0; p < LDT_PREC_COUNT; p++) m->peak_flops[p] *= f;
        m->memory_bandwidth_Bps *= f;
    }
    return LDT_OK;
}

/* A step of k rounds, each a GEMM of an n x n input by an n x n weight (both Replicate) on
 * Shard(0) rows on every mesh dim (a quarter of it on each of 4 ranks) whose result, with
 * `meet`, goes back to Replicate (an all_gather: the peers meet), the next round's input;
 * without, the next GEMM takes the shard, and one all_gather ends the step: compiled (its
 * context, program and inputs in *rs), with the step model's time under cm (without any
 * rendezvous) in rs->modeled, the meetings it counts in rs->calls and their compute since
 * the previous meeting, summed, in rs->gap (from the model under rendezvous_s 1, then share
 * 1). */
typedef struct rounds_step {
    ldt_ctx *ctx;
    ldt_exec *ex;
    float *dx, *dw;
    double modeled, calls, gap;
} rounds_step;

static void rounds_free(rounds_step *rs) {
    ldt_ctx_destroy(rs->ctx);
    free(rs->dx);
    free(rs->dw);
    memset(rs, 0, sizeof *rs);
}

static ldt_status build_rounds(ldt_comm *world, const ldt_mesh *mesh, int64_t n, int k, const ldt_cost_model *cm,
                               int meet, rounds_step *rs) {
    ldt_exec *ex1 = NULL, *ex2 = NULL;
    ldt_ctx_options co = {0};
    ldt_compile_options copt = {0}, copt1, copt2;
    ldt_cost_model base = *cm, one = *cm, two = *cm;
    ldt_shape sh = {2, {n, n}};
    ldt_placement rr[LDT_MAX_DIMS], ss[LDT_MAX_DIMS];
    ldt_tensor *x, *w, *y;
    ldt_exec_stats st0, st1, st2;
    int nd = ldt_mesh_ndim(mesh), nr = ldt_mesh_nranks(mesh);
    ldt_status st = LDT_OK;
    memset(rs, 0, sizeof *rs);
    rs->dx = malloc((size_t)(n * n) * sizeof *rs->dx);
    rs->dw = malloc((size_t)(n * n) * sizeof *rs->dw);
    if (!rs->dx || !rs->dw) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    for (int64_t i = 0; i < n * n; i++) {
        rs->dx[i] = (float)(i % 7) * 0.25f;
        rs->dw[i] = 1.0f / (float)n; /* row means: values stay bounded over the rounds */
    }
    for (int i = 0; i < nd; i++) {
        rr[i] = ldt_replicate();
        ss[i] = ldt_shard(0);
    }
    co.mesh = mesh;
    co.world = world;
    LDT_CHECK_GOTO(ldt_ctx_create(&co, &rs->ctx));
    x = ldt_input(rs->ctx, "x", &sh, LDT_F32);
    w = ldt_input(rs->ctx, "w", &sh, LDT_F32);
    if (!x || !w) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "calibrate: %s", ldt_ctx_errmsg(rs->ctx));
    LDT_CHECK_GOTO(ldt_input_bind(x, rs->dx, n * n * 4));
    LDT_CHECK_GOTO(ldt_input_bind(w, rs->dw, n * n * 4));
    LDT_CHECK_GOTO(ldt_pin(x, rr, nd));
    LDT_CHECK_GOTO(ldt_pin(w, rr, nd));
    base.rendezvous_s = base.rendezvous_share = 0;
    copt.plan.cost = &base;
    copt.overlap = -1; /* in line, as the model's serial step */
    copt1 = copt2 = copt;
    one.rendezvous_s = 1;
    one.rendezvous_share = 0;
    copt1.plan.cost = &one;
    two.rendezvous_s = 0;
    two.rendezvous_share = 1;
    copt2.plan.cost = &two;
    for (int z = 0; z < (meet ? 3 : 1); z++) { /* a compile ends the trace: record it again */
        y = x;
        for (int r = 0; r < k && y; r++) {
            y = ldt_matmul(y, w);
            /* each GEMM on Shard(0) rows in both twins, as a step's sharded compute (left
             * to the plan, one twin ran its GEMMs whole and the other on shards, and the
             * difference of the two steps was mostly the GEMMs' and their prices') */
            if (y && ldt_pin(y, ss, nd) != LDT_OK) y = NULL;
            if (y && meet) y = ldt_redistribute_to(y, rr, nd);
        }
        if (y && !meet) y = ldt_redistribute_to(y, rr, nd); /* the last GEMM on shards too */
        if (!y) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "calibrate: %s", ldt_ctx_errmsg(rs->ctx));
        LDT_CHECK_GOTO(ldt_pin(y, rr, nd));
        /* the first compile is the one timed; the others only price (the context owns all) */
        LDT_CHECK_GOTO(ldt_compile(rs->ctx, &y, 1, z == 2 ? &copt2 : z ? &copt1 : &copt,
                                   z == 2 ? &ex2 : z ? &ex1 : &rs->ex));
    }
    LDT_CHECK_GOTO(ldt_exec_stats_get(rs->ex, &st0));
    st1 = st2 = st0;
    if (meet) {
        LDT_CHECK_GOTO(ldt_exec_stats_get(ex1, &st1));
        LDT_CHECK_GOTO(ldt_exec_stats_get(ex2, &st2));
    }
    rs->modeled = st0.modeled_step_seconds;
    rs->calls = rs->gap = 0;
    if (cm->cores > 0 && nr > cm->cores) {
        double over = (double)nr / cm->cores - 1;
        rs->calls = (st1.modeled_step_seconds - st0.modeled_step_seconds) / over;
        rs->gap = (st2.modeled_step_seconds - st0.modeled_step_seconds) / over;
    }
    return LDT_OK;
fail:
    rounds_free(rs);
    return st;
}

/* The twins (k rounds of GEMMs of n with meetings, and without), each replayed once to warm
 * it, then `reps` times each, alternating, so that both see the same moments of a shared
 * host: every run into *rm and *r0, and each pair's difference (the run with meetings less
 * its twin's right after it) into *rd (with median only each one's median); their models
 * into *meet and *alone. Timed one after the other, twins whose steps took 3 to 30 ms on a shared
 * 2-core machine differed by up to 2 ms more than the meetings explain from one calibration
 * to the next. */
static ldt_status time_twins(ldt_comm *world, const ldt_mesh *mesh, int64_t n, int k, int reps, int median,
                             const ldt_cost_model *cm, runs *rm, runs *r0, runs *rd, rounds_step *meet,
                             rounds_step *alone) {
    double tm[64], t0[64], td[64];
    ldt_status st = LDT_OK;
    memset(meet, 0, sizeof *meet);
    memset(alone, 0, sizeof *alone);
    if (reps > 64) reps = 64;
    if (reps < 1) reps = 1;
    LDT_CHECK_GOTO(build_rounds(world, mesh, n, k, cm, 1, meet));
    LDT_CHECK_GOTO(build_rounds(world, mesh, n, k, cm, 0, alone));
    LDT_CHECK_GOTO(ldt_replay(meet->ex));
    LDT_CHECK_GOTO(ldt_replay(alone->ex));
    for (int r = 0; r < reps; r++) {
        double a = mono_s();
        LDT_CHECK_GOTO(ldt_replay(meet->ex));
        tm[r] = mono_s() - a;
        a = mono_s();
        LDT_CHECK_GOTO(ldt_replay(alone->ex));
        t0[r] = mono_s() - a;
        td[r] = tm[r] - t0[r]; /* the pair's difference: both saw the same moment */
    }
    qsort(tm, (size_t)reps, sizeof *tm, cmp_d);
    qsort(t0, (size_t)reps, sizeof *t0, cmp_d);
    qsort(td, (size_t)reps, sizeof *td, cmp_d);
    for (int r = 0; r < (median ? 1 : reps); r++) {
        runs_add(rm, median ? tm[reps / 2] : tm[r]);
        runs_add(r0, median ? t0[reps / 2] : t0[r]);
        runs_add(rd, median ? td[reps / 2] : td[r]);
    }
fail:
    { /* the models stay; the programs go */
        rounds_step km = *meet, ka = *alone;
        rounds_free(meet);
        rounds_free(alone);
        meet->modeled = km.modeled;
        meet->calls = km.calls;
        meet->gap = km.gap;
        alone->modeled = ka.modeled;
    }
    return st;
}

ldt_status ldt__calibrate_rounds(const ldt_mesh *mesh, int64_t n, int k, const ldt_cost_model *cm, int meet,
                                 double *measured, double *modeled, double *calls) {
    rounds_step rs;
    double t;
    LDT_CHECK(build_rounds(NULL, mesh, n, k, cm, meet, &rs));
    ldt_status st = time_replays(rs.ex, 1, 0, &t, measured, NULL);
    *modeled = rs.modeled;
    *calls = rs.calls;
    rounds_free(&rs);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

/* The rendezvous steps take this many times the sweep's runs: their waiting is a difference
 * of two step timings, and twelve calibrations of a 2-core machine with the sweep's runs (9
 * a step) gave a share of 0.025 to 0.57 and a wait per meeting of 0 to 39 us; six with 36
 * gave 0.045 to 0.17 and 0 to 16 us. The steps are short (the calibration took 29.5 to 32.4
 * s, 29 to 31 before). */
#define RENDEZVOUS_RUNS 4

/* The rendezvous (ldt_cost_model.rendezvous_s and rendezvous_share): steps of 2, 6 and 18
 * rounds (time_rounds) with GEMMs of 32, 128 and 384 (64 and 1728 times the compute between
 * meetings of the first: next to none, so its steps' waiting is the meetings' own),
 * each measured beside the same rounds without the meetings (the same GEMMs on the same
 * shards, one all_gather at the end): the difference measured against the model's
 * difference (the collectives' own prices) is the waiting,
 * fitted by least squares (ldt__fit_rendezvous) as a cost per meeting and a share of the
 * compute before it. The GEMMs' own time cancels, whatever the load did to it since the
 * compute figures were taken. Only when the mesh has more ranks than cores (otherwise 0). */
static ldt_status calibrate_rendezvous(ldt_comm *world, const ldt_mesh *mesh, int quick, int reps, int median,
                                       int passes, ldt_cost_model *m) {
    static const int rounds[] = {2, 6, 18}, quick_rounds[] = {2, 18};
    /* With GEMMs of 128 and 384 alone, the fit put the wait per meeting at 0 to 30 us from one
     * calibration to the next (a 2-core machine, 2026-11-27: five in a row gave 2.6 to 26 us),
     * where steps of GEMMs of 32 waited 1 to 4 us a meeting: w came from the slope of the
     * GEMMs of 128's waits over 2, 6 and 18 meetings, against an intercept of -10 to -100 us.
     * With the steps of 32, five calibrations gave w 0 to 4.7 us. */
    static const int64_t gemm[] = {32, 128, 384};
    enum { NG = sizeof gemm / sizeof gemm[0], NSTEPS = 3 * NG };
    double calls[NSTEPS], gap[NSTEPS], meas[NSTEPS], mod[NSTEPS], mod0[NSTEPS], noise[NSTEPS];
    runs *rm = NULL, *r0 = NULL, *rd = NULL;
    int nrounds = quick ? 2 : 3, n = 0;
    ldt_status st = LDT_OK;
    m->rendezvous_s = m->rendezvous_share = 0;
    if (m->cores <= 0 || ldt_mesh_nranks(mesh) <= m->cores) return LDT_OK;
    /* in `passes` passes over the nine steps, a third of the repeats each (as the sweep's
     * rounds), each step's pairs pooled: the waiting is a difference of two
     * timings tens of microseconds apart, and a fastest of repeats had it at 0 and 28 us a
     * meeting in two calibrations of an idle machine */
    rm = calloc(NSTEPS, sizeof *rm);
    r0 = calloc(NSTEPS, sizeof *r0);
    rd = calloc(NSTEPS, sizeof *rd);
    if (!rm || !r0 || !rd) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    for (int p = 0; p < passes; p++) {
        n = 0;
        for (int g = 0; g < NG; g++)
            for (int i = 0; i < nrounds; i++, n++) {
                int k = quick ? quick_rounds[i] : rounds[i];
                rounds_step sm, s0;
                LDT_CHECK_GOTO(time_twins(world, mesh, gemm[g], k, round_reps(RENDEZVOUS_RUNS * reps, passes),
                                          median, m, &rm[n], &r0[n], &rd[n], &sm, &s0));
                mod[n] = sm.modeled;
                mod0[n] = s0.modeled;
                calls[n] = sm.calls;
                gap[n] = sm.gap;
            }
    }
    for (int i = 0; i < n; i++) {
        /* each step's noise scale the square root of its time: its waits add up meeting by
         * meeting, their noise as a sum of independent ones. Scaled by the time itself (the
         * noise a fixed share of the step), the steps of GEMMs of 384 counted for next to
         * nothing and the share came from the waits of 5 to 10 us after GEMMs of 128: over
         * 20 calibrations in a row (a 2-core machine, 2026-11-27, the steps of 32 in), the
         * share within its goal (1.25x or 0.1) from one to the next in 10 of 19 pairs, the wait
         * after 1 ms of compute (2x or 20 us) in 13; by the square root, 14 and 18, and the
         * wait per meeting within 20 us in all 19 either way */
        noise[i] = sqrt(runs_stat(&rm[i], median));
        /* the median of the pairs' differences, not a difference of two quartiles: each
         * pair's two runs saw one moment of the host, which cancels in its difference, where
         * the quartiles of the two sides come from different moments (over eight
         * calibrations of a 2-core machine the share came out 0 to 0.24, three of them 0 or
         * 0.03, with the quartiles; 0.05 to 0.18, six of them 0.12 to 0.18, paired) */
        meas[i] = runs_stat(&rd[i], 1);
        mod[i] -= mod0[i];
    }
    ldt__fit_rendezvous(calls, gap, meas, mod, noise, n, ldt_mesh_nranks(mesh), m->cores, &m->rendezvous_s,
                        &m->rendezvous_share, NULL);
fail:
    free(rm);
    free(r0);
    free(rd);
    return st;
}

/* The harness a short timing t (under 1 ms) is less: the lesser of the one measured at the
 * start (base) and one measured right beside it (rank threads), so a load spike during either
 * cannot inflate it and push every small timing towards 0; a longer one keeps base. */
static ldt_status near_base(ldt_comm *world, const ldt_mesh *mesh, const ldt_shape *tiny,
                            const ldt_placement *rr, double t, int reps, int median, int rounds,
                            const ldt_cost_model *probe, double base, double *out) {
    double b;
    runs rb;
    int nst;
    *out = base;
    if (world || t >= 1e-3) return LDT_OK;
    rb.n = 0;
    LDT_CHECK(time_plan(mesh, tiny, rr, rr, reps, median, rounds, probe, &b, &rb, NULL, &nst));
    b = runs_stat(&rb, median);
    if (b < *out) *out = b;
    return LDT_OK;
}

/* Local ops on rank threads are timed as a replay runs them: LOCAL_WORLDS worlds a round, each
 * of a warm-up and then LOCAL_RUNS runs back to back, each right after a run of the harness
 * alone (two barriers) in the same world; every run into *all, and *base the harness runs'
 * statistic (their lower quartile, or with median their median). A world of one timed run
 * each, as the collectives are timed, caught a copy with its data in another core's cache,
 * and a harness timed in worlds of its own caught other moments of a shared host: on a
 * 2-core machine a zero-padded copy of 105 KiB a rank took 19 us as the lower quartile of 27
 * such worlds, and 1.2 to 19 us as the median of 41 runs of one world less its harness's
 * (the validation's statistic before), where the harness interleaved gave 9.6 to 18.6 us in
 * four tries. Copies of 400 KiB and more agree either way (within 20%). */
#define LOCAL_WORLDS 3
#define LOCAL_RUNS 15
static ldt_status time_plan_worlds(const ldt_mesh *mesh, const ldt_shape *shape, const ldt_placement *from,
                                   const ldt_placement *to, int worlds, int per, int median,
                                   const ldt_cost_model *cm, runs *all, double *base, ldt_redist_step *step,
                                   int *nsteps) {
    ldt_spec src;
    ldt_redist_options opt = {cm, 0, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan = NULL;
    double t[LDT_CAL_MAX_PER], h[LDT_CAL_MAX_PER], med;
    runs hb;
    int nd = ldt_mesh_ndim(mesh);
    ldt_status st = LDT_OK;
    if (per > LDT_CAL_MAX_PER) per = LDT_CAL_MAX_PER;
    hb.n = 0;
    LDT_CHECK(ldt_spec_init(&src, mesh, shape, from, nd, LDT_F32));
    LDT_CHECK(ldt_redist_plan_create(&src, NULL, to, nd, &opt, &plan));
    *nsteps = ldt_redist_plan_nsteps(plan);
    if (step && *nsteps == 1) ldt_redist_plan_step(plan, 0, step);
    for (int w = 0; w < worlds; w++) {
        LDT_CHECK_GOTO(ldt__redistribute_runs(NULL, plan, per, &med, t, h, NULL));
        for (int r = 0; r < per; r++) {
            runs_add(all, t[r]);
            runs_add(&hb, h[r]);
        }
    }
    *base = runs_stat(&hb, median);
fail:
    ldt_redist_plan_destroy(plan);
    return st;
}

/* One round of the communication timings (see ldt_calibrate_samples) into k: a sample of the
 * same (kind, dim, bytes) as an earlier round's adds its runs to that one's. */
static ldt_status collect_round(ldt_comm *world, const ldt_mesh *mesh, int quick, int reps, int median,
                                int rounds, const ldt_cost_model *probe, double base, sink *k) {
    const int64_t *sizes = quick ? k_quick_sizes : k_sizes;
    int nsizes = quick ? 3 : 8, nd = ldt_mesh_ndim(mesh), nst;
    ldt_placement rr[LDT_MAX_DIMS];
    ldt_shape tiny = {2, {8, 8}};
    ldt_status st = LDT_OK;
    double tb = 0;
    runs rv;
    for (int i = 0; i < nd; i++) rr[i] = ldt_replicate();
    for (int d = 0; d < nd; d++) {
        int64_t g = ldt_mesh_dim_size(mesh, d);
        /* kind: from -> to on dim d (others Replicate) */
        struct { ldt_collective c; ldt_placement from, to; } kinds[4] = {
            {LDT_COLL_ALL_REDUCE, ldt_partial(LDT_REDUCE_SUM), ldt_replicate()},
            {LDT_COLL_REDUCE_SCATTER, ldt_partial(LDT_REDUCE_SUM), ldt_shard(0)},
            {LDT_COLL_ALL_GATHER, ldt_shard(0), ldt_replicate()},
            {LDT_COLL_ALL_TO_ALL, ldt_shard(0), ldt_shard(1)},
        };
        if (g < 2) continue;
        for (int c = 0; c < 4; c++)
            for (int z = 0; z < nsizes; z++) {
                ldt_placement from[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
                ldt_shape shape = square_shape(sizes[z]);
                ldt_redist_step step;
                double t;
                memcpy(from, rr, sizeof from);
                memcpy(to, rr, sizeof to);
                from[d] = kinds[c].from;
                to[d] = kinds[c].to;
                rv.n = 0;
                LDT_CHECK(timed(world, mesh, &shape, from, to, round_reps(reps_for(sizes[z], reps), rounds), median,
                                rounds, probe, &t, &rv, &step, &nst));
                LDT_CHECK(near_base(world, mesh, &tiny, rr, t, round_reps(reps, rounds), median, rounds, probe,
                                    base, &tb));
                if (nst != 1 || step.collective != kinds[c].c) continue;
                add_sample(k, kinds[c].c, d, g, step_bytes(&step), &rv, tb);
            }
    }
    LDT_CHECK(time_broadcasts(world, mesh, sizes, nsizes, reps, median, rounds, k));
    /* Local ops on the first dim with more than one rank: Replicate -> Shard (a chunk copy),
     * Shard -> Partial (a zero-padded copy) and Replicate -> Partial (one rank's copy, the
     * others zero-filled). */
    for (int d = 0; d < nd; d++) {
        if (ldt_mesh_dim_size(mesh, d) < 2) continue;
        for (int c = 0; c < LOCAL_OPS; c++)
            for (int z = 0; z < (quick ? nsizes : nsizes + LOCAL_EXTRA); z++) {
                ldt_placement from[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
                int64_t bytes = quick ? sizes[z] : k_local_sizes[z];
                ldt_shape shape = square_shape(bytes);
                ldt_redist_step step;
                ldt_collective want = c == 0   ? LDT_COLL_LOCAL_CHUNK
                                      : c == 1 ? LDT_COLL_LOCAL_PAD
                                               : LDT_COLL_LOCAL_PARTIAL;
                double t;
                memcpy(from, rr, sizeof from);
                memcpy(to, rr, sizeof to);
                if (c == 0) {
                    to[d] = ldt_shard(0);
                } else {
                    if (c == 1) from[d] = ldt_shard(0);
                    to[d] = ldt_partial(LDT_REDUCE_SUM);
                }
                rv.n = 0;
                if (!world) {
                    LDT_CHECK(time_plan_worlds(mesh, &shape, from, to, LOCAL_WORLDS,
                                               bytes >= (16 << 20) ? LOCAL_RUNS / 3 : LOCAL_RUNS, median, probe,
                                               &rv, &tb, &step, &nst));
                } else { /* less a tiny chunk's runs, timed the same way */
                    runs rt;
                    ldt_placement s0[LDT_MAX_DIMS];
                    int nt;
                    memcpy(s0, rr, sizeof s0);
                    s0[d] = ldt_shard(0);
                    rt.n = 0;
                    LDT_CHECK(time_plan_world(world, mesh, &shape, from, to, round_reps(reps_for(bytes, reps), rounds),
                                              median, rounds, 1, probe, &t, &rv, &step, &nst));
                    LDT_CHECK(time_plan_world(world, mesh, &tiny, rr, s0, round_reps(reps, rounds), median, rounds, 1,
                                              probe, &tb, &rt, NULL, &nt));
                    tb = runs_stat(&rt, median);
                }
                if (nst != 1 || step.collective != want) continue;
                add_sample(k, want, d, 1, step_bytes(&step), &rv, tb);
            }
        break;
    }
    /* Send/recv (rank threads only): Shard(0) from the mesh's ranks in order to the same
     * ranks rotated by one (a 1-D mesh of all of them each way), so each rank sends its shard
     * to one peer and receives one: the cross-mesh step, fitted on mesh dim 0's link with
     * one peer (ldt_cost_seconds prices it on the slowest link by its peers). */
    if (!world && ldt_mesh_nranks(mesh) >= 2) {
        int nr = ldt_mesh_nranks(mesh), *ra = NULL, *rb = NULL;
        int64_t dims1[1] = {nr};
        ldt_mesh *ma = NULL, *mb = NULL;
        ldt_placement s0 = ldt_shard(0);
        ra = malloc((size_t)nr * sizeof *ra);
        rb = malloc((size_t)nr * sizeof *rb);
        if (!ra || !rb) {
            free(ra);
            free(rb);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
        }
        for (int i = 0; i < nr; i++) {
            ra[i] = ldt_mesh_rank_at(mesh, i);
            rb[i] = ldt_mesh_rank_at(mesh, (i + 1) % nr);
        }
        st = ldt_mesh_create(1, dims1, ra, NULL, LDT_DEVICE_CPU, &ma);
        if (st == LDT_OK) st = ldt_mesh_create(1, dims1, rb, NULL, LDT_DEVICE_CPU, &mb);
        free(ra);
        free(rb);
        for (int z = 0; z < nsizes && st == LDT_OK; z++) {
            ldt_shape shape = square_shape(sizes[z]);
            ldt_redist_step step;
            double t;
            rv.n = 0;
            st = time_plan_to(ma, mb, &shape, &s0, &s0, round_reps(reps_for(sizes[z], reps), rounds), median,
                              rounds, probe, &t, &rv, &step, &nst);
            if (st == LDT_OK && nst == 1 && step.collective == LDT_COLL_SEND_RECV)
                add_sample(k, LDT_COLL_SEND_RECV, 0, 1, step_bytes(&step), &rv, base);
        }
        ldt_mesh_destroy(ma);
        ldt_mesh_destroy(mb);
        if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    }
    return LDT_OK;
}

ldt_status ldt_calibrate_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                                 ldt_cost_model *out, ldt_cost_sample *samples, int cap, int *n,
                                 double *rms) {
    int quick = opts ? opts->quick : 0, median = opts ? opts->median != 0 : 0;
    ldt_comm *world = opts ? opts->world : NULL;
    int reps = opts && opts->reps > 0 ? opts->reps : quick ? 3 : 9;
    /* a median is of one world's repeats, and --quick is a second or so: one round */
    int rounds = opts && opts->rounds > 0 ? opts->rounds : median || quick ? 1 : CAL_ROUNDS, nd, nst;
    ldt_cost_model probe, res;
    ldt_placement rr[LDT_MAX_DIMS];
    ldt_shape tiny = {2, {8, 8}};
    compute_acc acc;
    runs rb = {{0}, 0};
    double base;
    sink k = {0};
    ldt_status st = LDT_OK;
    if (!mesh || !out || (cap > 0 && !samples) || cap < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: mesh and out must not be NULL, and samples "
                 "must have room for cap >= 0 entries");
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "calibrate: the mesh is on the meta device, which has "
                 "no communicator to measure; use a cpu mesh");
    if (ldt_mesh_nranks(mesh) > 4096)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d ranks, expected at most 4096 threads",
                 ldt_mesh_nranks(mesh));
    if (opts && (opts->reps < 0 || opts->reps > 1000))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d repeats, expected 0 (the default) to 1000",
                 opts->reps);
    if (opts && (opts->rounds < 0 || opts->rounds > 100))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d rounds, expected 0 (the default) to 100",
                 opts->rounds);
    if (world && ldt_comm_size(world) != ldt_mesh_nranks(mesh))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: the world has %d processes but the mesh %d "
                 "ranks, expected one process per rank", ldt_comm_size(world), ldt_mesh_nranks(mesh));
    nd = ldt_mesh_ndim(mesh);
    /* The probe model makes a local step's price its byte count (see step_bytes). */
    LDT_CHECK(ldt_cost_model_preset("uniform", &probe));
    probe.local_overhead_s = 0;
    probe.local_bandwidth_Bps = 1;
    /* Start from the shipped cpu-threads profile: a link no timing constrains (a mesh dim
     * of one rank: nothing crosses it) keeps its constants, and so do the curves of the op
     * classes not measured here (norm, softmax, reduce). */
    LDT_CHECK(ldt_cost_model_preset("cpu-threads", &res));
    LDT_CHECK(ldt_cost_model_expand(&res, nd, &res));
    snprintf(res.name, sizeof res.name, "calibrated");
    k.cap = cap;
    k.s = samples;
    if (!k.s) { /* the caller does not want them: room of our own */
        k.cap = ldt_calibrate_max_samples(mesh, opts);
        if (!(k.s = calloc((size_t)k.cap, sizeof *k.s)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    }
    if (!(k.r = malloc((size_t)(k.cap > 0 ? k.cap : 1) * sizeof *k.r)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    for (int i = 0; i < nd; i++) rr[i] = ldt_replicate();
    /* The harness (two barriers around an empty plan) is not part of any step. */
    if (world) { /* a tiny local chunk between two barriers of the world */
        ldt_placement s0[LDT_MAX_DIMS];
        memcpy(s0, rr, sizeof s0);
        s0[0] = ldt_shard(0);
        LDT_CHECK_GOTO(time_plan_world(world, mesh, &tiny, rr, s0, 3 * reps, median, 1, 0, &probe, &base, &rb, NULL,
                                       &nst));
    } else {
        LDT_CHECK_GOTO(time_plan(mesh, &tiny, rr, rr, 3 * reps, median, 1, &probe, &base, &rb, NULL, &nst));
    }
    base = runs_stat(&rb, median);
    LDT_CHECK_GOTO(compute_begin(world, mesh, reps, median, &acc));
    for (int r = 0; r < rounds; r++) {
        LDT_CHECK_GOTO(collect_round(world, mesh, quick, reps, median, rounds, &probe, base, &k));
        LDT_CHECK_GOTO(compute_round(world, mesh, quick, reps, median, rounds > 1 ? 2 : GEMM_WORLDS, &acc));
    }
    if (k.n > k.cap)
        LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d samples measured but room for %d; "
                      "pass cap >= %d", k.n, k.cap, k.n);
    { /* each sample's seconds: its runs' statistic; one not above its harness is dropped */
        int kept = 0;
        for (int i = 0; i < k.n; i++) {
            double t = runs_stat(&k.r[i], median);
            if (!(t > 0)) continue;
            k.s[kept] = k.s[i];
            k.s[kept++].seconds = t;
        }
        k.n = kept;
    }
    LDT_CHECK_GOTO(ldt_cost_model_fit(k.s, k.n, &res, rms));
    LDT_CHECK_GOTO(calibrate_compute(world, mesh, quick, reps, median, &acc, &res));
    LDT_CHECK_GOTO(calibrate_rendezvous(world, mesh, quick, reps, median, rounds, &res));
    LDT_CHECK_GOTO(ldt_cost_model_check(&res));
    *out = res;
    if (n) *n = k.n;
fail:
    if (k.s != samples) free(k.s);
    free(k.r);
    return st;
}

ldt_status ldt_calibrate(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                         ldt_cost_model *out) {
    LDT_CHECK(ldt_calibrate_samples(mesh, opts, out, NULL, 0, NULL, NULL));
    return LDT_OK;
}

int ldt_calibrate_max_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts) {
    int quick = opts && opts->quick, nsizes = quick ? 3 : 8;
    return mesh ? (ldt_mesh_ndim(mesh) * 5 + 1 + LOCAL_OPS) * nsizes + (quick ? 0 : LOCAL_OPS * LOCAL_EXTRA) : 0;
}

/* See exec/calibrate_internal.h. */
char *ldt__calibration_json(const ldt_cost_model *cm, const ldt_cost_sample *s, int n, double rms,
                            const ldt__host_watch *hw) {
    char *text = NULL, *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cJSON *root = NULL, *fit, *arr;
    double worst = 0;
    if (!f) return NULL;
    if (ldt_cost_model_write(cm, f) != LDT_OK) {
        fclose(f);
        free(text);
        return NULL;
    }
    fclose(f);
    root = cJSON_Parse(text);
    free(text);
    if (!root) return NULL;
    fit = cJSON_AddObjectToObject(root, "fit");
    arr = fit ? cJSON_AddArrayToObject(fit, "samples") : NULL;
    for (int i = 0; arr && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        double r = (s[i].seconds - s[i].modeled) / s[i].seconds;
        if (!o) break;
        cJSON_AddStringToObject(o, "collective",
                                s[i].broadcast ? "broadcast" : ldt_collective_name(s[i].collective));
        cJSON_AddNumberToObject(o, "mesh_dim", s[i].dim);
        cJSON_AddNumberToObject(o, "group", (double)s[i].group);
        cJSON_AddNumberToObject(o, "bytes", (double)s[i].bytes);
        cJSON_AddNumberToObject(o, "measured_s", s[i].seconds);
        cJSON_AddNumberToObject(o, "modeled_s", s[i].modeled);
        cJSON_AddNumberToObject(o, "residual", r);
        cJSON_AddNumberToObject(o, "weight", s[i].weight);
        cJSON_AddItemToArray(arr, o);
        if (s[i].weight > 0 && fabs(r) > worst) worst = fabs(r);
    }
    if (fit) {
        cJSON_AddNumberToObject(fit, "rms_residual", rms);
        cJSON_AddNumberToObject(fit, "max_residual", worst);
    }
    if (fit && hw) { /* what else ran on the machine meanwhile */
        cJSON *h = cJSON_AddObjectToObject(fit, "host");
        if (!h) goto fail;
        cJSON_AddNumberToObject(h, "cores", hw->cores);
        cJSON_AddNumberToObject(h, "wall_s", hw->wall_s);
        cJSON_AddNumberToObject(h, "own_cpu_s", hw->own_cpu_s);
        if (hw->known) {
            cJSON_AddNumberToObject(h, "others_cpu_s", hw->others_cpu_s);
            cJSON_AddNumberToObject(h, "others_share", hw->others_share);
        }
        if (hw->probe) { /* the cores' round trip at start and end (-1: not measured) */
            cJSON *rt = cJSON_AddArrayToObject(h, "core_round_trip_ns");
            for (int i = 0; rt && i < 2; i++) cJSON_AddItemToArray(rt, cJSON_CreateNumber(hw->round_trip_ns[i]));
        }
    }
    if (arr && cJSON_GetArraySize(arr) == n) out = cJSON_Print(root);
fail:
    cJSON_Delete(root);
    return out;
}
