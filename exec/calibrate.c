/* Calibration: times every collective kind the redistribution planner issues (all_reduce,
 * reduce_scatter, all_gather, all_to_all) along each mesh dim, and the local ops (chunk,
 * pad), at sizes from 4 KiB to 64 MiB, as ldt_redistribute runs them (packing included), so
 * the planner prices what the engine does; then fits the cost model's constants to the
 * medians with ldt_cost_model_fit (robust least squares on relative error). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ldt/exec.h"
#include "ldt/planner.h"

/* Tensor sizes (bytes of the full f32 tensor): 4 KiB to 64 MiB by 4x; quick: three of them. */
static const int64_t k_sizes[] = {4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                  1 << 20, 4 << 20,  16 << 20, 64 << 20};
static const int64_t k_quick_sizes[] = {4 << 10, 64 << 10, 1 << 20};

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

/* Median seconds of the plan from -> to on `mesh` for shape `shape`; *step gets its one
 * step (*nsteps its step count: the caller keeps only one-step plans of the kind it asked). */
static ldt_status time_plan(const ldt_mesh *mesh, const ldt_shape *shape, const ldt_placement *from,
                            const ldt_placement *to, int reps, const ldt_cost_model *cm,
                            double *out, ldt_redist_step *step, int *nsteps) {
    ldt_spec src;
    ldt_redist_options opt = {cm, 0, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan;
    ldt_status st;
    LDT_CHECK(ldt_spec_init(&src, mesh, shape, from, ldt_mesh_ndim(mesh), LDT_F32));
    LDT_CHECK(ldt_redist_plan_create(&src, NULL, to, ldt_mesh_ndim(mesh), &opt, &plan));
    *nsteps = ldt_redist_plan_nsteps(plan);
    if (step && *nsteps == 1) ldt_redist_plan_step(plan, 0, step);
    st = ldt_redistribute_measure(NULL, plan, reps, out, NULL);
    ldt_redist_plan_destroy(plan);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

/* Repeats per size: the small ones are noisy and cheap, the large ones steady and slow. */
static int reps_for(int64_t bytes, int base) {
    if (bytes >= (16 << 20)) return base < 3 ? base : 3;
    if (bytes >= (1 << 20)) return base < 5 ? base : (base + 1) / 2 + 1;
    return base;
}

typedef struct sink {
    ldt_cost_sample *s;
    int cap, n;
} sink;

static void add_sample(sink *k, ldt_collective c, int dim, int64_t group, int64_t bytes, double t) {
    if (k->n < k->cap) {
        ldt_cost_sample *x = &k->s[k->n];
        memset(x, 0, sizeof *x);
        x->collective = c;
        x->dim = dim;
        x->group = group;
        x->bytes = bytes;
        x->seconds = t;
    }
    k->n++;
}

/* The bytes ldt_cost_seconds takes for a measured step: for collectives the busiest rank's
 * sent or received bytes; for local ops the bytes written, which the step does not carry,
 * read back from its price under a model whose local op costs one second per byte. */
static int64_t step_bytes(const ldt_redist_step *s) {
    if (s->collective <= LDT_COLL_ALL_TO_ALL)
        return s->bytes_sent > s->bytes_recv ? s->bytes_sent : s->bytes_recv;
    return (int64_t)llround(s->seconds);
}

ldt_status ldt_calibrate_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                                 ldt_cost_model *out, ldt_cost_sample *samples, int cap, int *n,
                                 double *rms) {
    int quick = opts ? opts->quick : 0;
    int reps = opts && opts->reps > 0 ? opts->reps : quick ? 3 : 9;
    const int64_t *sizes = quick ? k_quick_sizes : k_sizes;
    int nsizes = quick ? 3 : 8, nd, nst;
    ldt_cost_model probe, res;
    ldt_placement rr[LDT_MAX_DIMS];
    ldt_shape tiny = {2, {8, 8}};
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
    nd = ldt_mesh_ndim(mesh);
    /* The probe model makes a local step's price its byte count (see step_bytes). */
    LDT_CHECK(ldt_cost_model_preset("uniform", &probe));
    probe.local_overhead_s = 0;
    probe.local_bandwidth_Bps = 1;
    /* Start from the uniform preset's constants: a link no timing constrains (a mesh dim of
     * one rank: nothing crosses it) keeps them. */
    LDT_CHECK(ldt_cost_model_preset("uniform", &res));
    LDT_CHECK(ldt_cost_model_expand(&res, nd, &res));
    snprintf(res.name, sizeof res.name, "calibrated");
    k.cap = cap;
    k.s = samples;
    if (!k.s) { /* the caller does not want them: room of our own */
        k.cap = (nd * 4 + 2) * nsizes;
        if (!(k.s = calloc((size_t)k.cap, sizeof *k.s)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "calibrate: out of memory");
    }
    for (int i = 0; i < nd; i++) rr[i] = ldt_replicate();
    /* The harness (two barriers around an empty plan) is not part of any step. */
    LDT_CHECK_GOTO(time_plan(mesh, &tiny, rr, rr, 3 * reps, &probe, &base, NULL, &nst));

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
                LDT_CHECK_GOTO(time_plan(mesh, &shape, from, to, reps_for(sizes[z], reps), &probe,
                                         &t, &step, &nst));
                if (nst != 1 || step.collective != kinds[c].c || t - base <= 0) continue;
                add_sample(&k, kinds[c].c, d, g, step_bytes(&step), t - base);
            }
    }
    /* Local ops on the first dim with more than one rank: Replicate -> Shard (a chunk copy)
     * and Shard -> Partial (a zero-padded copy). */
    for (int d = 0; d < nd; d++) {
        if (ldt_mesh_dim_size(mesh, d) < 2) continue;
        for (int c = 0; c < 2; c++)
            for (int z = 0; z < nsizes; z++) {
                ldt_placement from[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
                ldt_shape shape = square_shape(sizes[z]);
                ldt_redist_step step;
                ldt_collective want = c == 0 ? LDT_COLL_LOCAL_CHUNK : LDT_COLL_LOCAL_PAD;
                double t;
                memcpy(from, rr, sizeof from);
                memcpy(to, rr, sizeof to);
                if (c == 0) {
                    to[d] = ldt_shard(0);
                } else {
                    from[d] = ldt_shard(0);
                    to[d] = ldt_partial(LDT_REDUCE_SUM);
                }
                LDT_CHECK_GOTO(time_plan(mesh, &shape, from, to, reps_for(sizes[z], reps), &probe,
                                         &t, &step, &nst));
                if (nst != 1 || step.collective != want || t - base <= 0) continue;
                add_sample(&k, want, d, 1, step_bytes(&step), t - base);
            }
        break;
    }
    if (k.n > k.cap)
        LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "calibrate: %d samples measured but room for %d; "
                      "pass cap >= %d", k.n, k.cap, k.n);
    LDT_CHECK_GOTO(ldt_cost_model_fit(k.s, k.n, &res, rms));
    *out = res;
    if (n) *n = k.n;
fail:
    if (k.s != samples) free(k.s);
    return st;
}

ldt_status ldt_calibrate(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                         ldt_cost_model *out) {
    LDT_CHECK(ldt_calibrate_samples(mesh, opts, out, NULL, 0, NULL, NULL));
    return LDT_OK;
}

int ldt_calibrate_max_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts) {
    int nsizes = opts && opts->quick ? 3 : 8;
    return mesh ? (ldt_mesh_ndim(mesh) * 4 + 2) * nsizes : 0;
}
