/* Calibration: measures the cost model's constants on the threaded communicator by timing
 * real redistributions (all_gather steps, as ldt_redistribute runs them, packing included),
 * so the planner prices what the engine actually does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "ldt/exec.h"
#include "ldt/planner.h"

/* Median seconds of one run of the plan from -> to for a 1-D f32 tensor of n elements. */
static ldt_status time_plan(const ldt_mesh *mesh, int64_t n, const ldt_placement *from,
                            const ldt_placement *to, int reps, const ldt_cost_model *cm,
                            double *out) {
    ldt_spec src;
    ldt_shape shape = {1, {n}};
    ldt_redist_options opt = {cm, 0, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan;
    ldt_status st;
    LDT_CHECK(ldt_spec_init(&src, mesh, &shape, from, ldt_mesh_ndim(mesh), LDT_F32));
    LDT_CHECK(ldt_redist_plan_create(&src, NULL, to, ldt_mesh_ndim(mesh), &opt, &plan));
    st = ldt_redistribute_measure(NULL, plan, reps, out, NULL);
    ldt_redist_plan_destroy(plan);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

/* Shard(0) -> Replicate on mesh dim `dim` (Replicate elsewhere), `per_rank` elements on each
 * rank of the group, minus the harness time `base`. */
static ldt_status time_gather(const ldt_mesh *mesh, int dim, int64_t per_rank, int reps,
                              const ldt_cost_model *cm, double base, double *out) {
    ldt_placement from[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
    for (int i = 0; i < ldt_mesh_ndim(mesh); i++) from[i] = to[i] = ldt_replicate();
    from[dim] = ldt_shard(0);
    LDT_CHECK(time_plan(mesh, per_rank * ldt_mesh_dim_size(mesh, dim), from, to, reps, cm, out));
    *out -= base;
    return LDT_OK;
}

/* A 1-D mesh over the first n ranks of `mesh`, in its order. */
static ldt_status line_mesh(const ldt_mesh *mesh, int n, ldt_mesh **out) {
    int ranks[4096];
    int64_t dims[1] = {n};
    for (int i = 0; i < n; i++) ranks[i] = ldt_mesh_rank_at(mesh, i);
    LDT_CHECK(ldt_mesh_create(1, dims, ranks, NULL, LDT_DEVICE_CPU, out));
    return LDT_OK;
}

static double memcpy_bandwidth(int64_t bytes, int reps) {
    char *a = malloc((size_t)bytes), *b = malloc((size_t)bytes);
    double best = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, (size_t)bytes);
    memset(b, 2, (size_t)bytes);
    for (int i = 0; i < reps; i++) {
        struct timespec t0, t1;
        double s;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        memcpy(b, a, (size_t)bytes);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        /* a[0] from b keeps the copy observable */
        a[0] = b[bytes - 1];
        if (s > 0 && (double)bytes / s > best) best = (double)bytes / s;
    }
    free(a);
    free(b);
    return best;
}

ldt_status ldt_calibrate(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                         ldt_cost_model *out) {
    int quick = opts ? opts->quick : 0;
    int reps = quick ? 5 : 15, n = 0;
    int64_t small = 16, large = quick ? (64 << 10) : (256 << 10); /* f32 elements per rank */
    ldt_cost_model cm, res;
    double l2 = 0, ln = 0, alpha_ref = 0, overhead, base, tloc;
    ldt_placement rr[LDT_MAX_DIMS], sr[LDT_MAX_DIMS];
    if (!mesh || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: arguments must not be NULL");
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "calibrate: the mesh is on the meta device, which has "
                 "no communicator to measure; use a cpu mesh");
    if (ldt_mesh_nranks(mesh) > 4096)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d ranks, expected at most 4096 threads",
                 ldt_mesh_nranks(mesh));
    n = ldt_mesh_nranks(mesh);
    LDT_CHECK(ldt_cost_model_preset("uniform", &cm));
    memset(&res, 0, sizeof res);
    snprintf(res.name, sizeof res.name, "calibrated");
    res.nlinks = ldt_mesh_ndim(mesh);
    for (int i = 0; i < ldt_mesh_ndim(mesh); i++) rr[i] = sr[i] = ldt_replicate();
    sr[0] = ldt_shard(0);
    /* The harness (two barriers around an empty plan) is not part of any step. */
    LDT_CHECK(time_plan(mesh, small, rr, rr, reps, &cm, &base));

    /* The fixed part of a step grows with the group: L(n) = overhead + (n-1) alpha. Two
     * group sizes (2 ranks and all of them) separate the two. */
    if (n >= 2) {
        ldt_mesh *line = NULL;
        LDT_CHECK(line_mesh(mesh, 2, &line));
        ldt_status st = time_gather(line, 0, small, reps, &cm, base, &l2);
        ldt_mesh_destroy(line);
        LDT_CHECK(st);
    }
    if (n > 2) {
        ldt_mesh *line = NULL;
        LDT_CHECK(line_mesh(mesh, n, &line));
        ldt_status st = time_gather(line, 0, small, reps, &cm, base, &ln);
        ldt_mesh_destroy(line);
        LDT_CHECK(st);
        alpha_ref = (ln - l2) / (n - 2);
        if (alpha_ref < 0) alpha_ref = 0;
    }
    overhead = l2 - alpha_ref;
    if (overhead < 0) overhead = 0;
    res.overhead_s = overhead;

    /* Per mesh dim: two sizes give the slope (bandwidth) and intercept (latency). */
    for (int d = 0; d < ldt_mesh_ndim(mesh); d++) {
        int64_t k = ldt_mesh_dim_size(mesh, d);
        double ts, tl, beta, lat;
        if (k < 2) {
            res.links[d].latency_s = alpha_ref;
            res.links[d].bandwidth_Bps = 1e12; /* nothing moves on a 1-rank dim */
            continue;
        }
        LDT_CHECK(time_gather(mesh, d, small, reps, &cm, base, &ts));
        LDT_CHECK(time_gather(mesh, d, large, quick ? 3 : 7, &cm, base, &tl));
        beta = tl > ts ? (double)(k - 1) * (double)(large - small) * 4.0 / (tl - ts) : 1e12;
        lat = (ts - overhead - (double)(k - 1) * (double)small * 4.0 / beta) / (double)(k - 1);
        res.links[d].latency_s = lat > 0 ? lat : 0;
        res.links[d].bandwidth_Bps = beta;
    }
    res.local_bandwidth_Bps = memcpy_bandwidth(quick ? (4 << 20) : (16 << 20), quick ? 3 : 7);
    if (res.local_bandwidth_Bps <= 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory for the copy measurement");
    /* A local step (Replicate -> Shard chunk) of a small tensor: its fixed cost. */
    LDT_CHECK(time_plan(mesh, small, rr, sr, reps, &cm, &tloc));
    res.local_overhead_s = tloc - base > 0 ? tloc - base : 0;
    /* not measured here: the algorithms and compute a version 1 profile loads with */
    memcpy(res.algo, cm.algo, sizeof res.algo);
    for (int p = 0; p < LDT_PREC_COUNT; p++) res.peak_flops[p] = 50e9;
    res.memory_bandwidth_Bps = res.local_bandwidth_Bps;
    LDT_CHECK(ldt_cost_model_check(&res));
    *out = res;
    return LDT_OK;
}
