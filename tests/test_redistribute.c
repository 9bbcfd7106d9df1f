/* Redistribution: random placement pairs and meshes (same mesh and across meshes) executed on
 * rank threads and compared with the original tensor; planned cost against the naive route;
 * hand-derived classic plans; the cost model and profiles; bad input and its messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ldt/ldt.h"
#include "tests/test_util.h"

static const ldt_dtype k_dtypes[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                     LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};

/* Small integers: exact in every dtype, and sums of a few of them too. */
static void fill_known(void *buf, int64_t n, ldt_dtype dt, uint64_t *rng) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = dt == LDT_BOOL ? ldt_test_range(rng, 0, 1)
                    : dt == LDT_U8 ? ldt_test_range(rng, 0, 16)
                                   : ldt_test_range(rng, -8, 8);
        switch (dt) {
        case LDT_F32: ((float *)buf)[i] = (float)v; break;
        case LDT_F64: ((double *)buf)[i] = (double)v; break;
        case LDT_F16: ((uint16_t *)buf)[i] = ldt_f32_to_f16((float)v); break;
        case LDT_BF16: ((uint16_t *)buf)[i] = ldt_f32_to_bf16((float)v); break;
        case LDT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
        case LDT_I64: ((int64_t *)buf)[i] = v; break;
        default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
        }
    }
}

/* A random mesh of 1-3 dims and at most 8 ranks; with `perm`, its ranks are a random
 * selection of 0..7 in random order (for cross-mesh cases). */
static void random_mesh(uint64_t *rng, int perm, ldt_mesh **out) {
    int64_t dims[3];
    int nd = (int)ldt_test_range(rng, 1, 3), total = 1, ranks[8], pool[8];
    for (int i = 0; i < nd; i++) {
        dims[i] = ldt_test_range(rng, 1, 8 / total > 4 ? 4 : 8 / total);
        total *= (int)dims[i];
    }
    for (int i = 0; i < 8; i++) pool[i] = i;
    for (int i = 7; i > 0; i--) {
        int j = (int)ldt_test_range(rng, 0, i), t = pool[i];
        pool[i] = pool[j];
        pool[j] = t;
    }
    for (int i = 0; i < total; i++) ranks[i] = perm ? pool[i] : i;
    cr_assert_eq(ldt_mesh_create(nd, dims, ranks, NULL, LDT_DEVICE_CPU, out), LDT_OK, "%s",
                 ldt_last_error());
}

/* Random placements for a mesh and shape; Partial ops that combine (one of max/min, or
 * sum/avg mixed), never avg for bool. Returns 0 if the draw is not a valid spec. */
static int random_placements(uint64_t *rng, const ldt_mesh *mesh, const ldt_shape *shape,
                             ldt_dtype dt, ldt_spec *spec) {
    ldt_placement pl[LDT_MAX_DIMS];
    int nd = ldt_mesh_ndim(mesh);
    int family = (int)ldt_test_range(rng, 0, 2); /* 0: sum/avg, 1: max, 2: min */
    for (int i = 0; i < nd; i++) {
        int kind = (int)ldt_test_range(rng, 0, 5);
        if (shape->ndim == 0 && (kind == 0 || kind == 1 || kind == 4)) kind = 2;
        if (kind <= 1) {
            pl[i] = ldt_shard((int)ldt_test_range(rng, 0, shape->ndim - 1));
        } else if (kind == 2 || kind == 3) {
            pl[i] = kind == 2 ? ldt_replicate()
                              : ldt_partial(family == 1   ? LDT_REDUCE_MAX
                                            : family == 2 ? LDT_REDUCE_MIN
                                            : dt != LDT_BOOL && ldt_test_range(rng, 0, 1)
                                                ? LDT_REDUCE_AVG
                                                : LDT_REDUCE_SUM);
        } else if (kind == 4) {
            int d = (int)ldt_test_range(rng, 0, shape->ndim - 1);
            int64_t k = ldt_test_range(rng, 1, 3);
            if (shape->dims[d] % k) k = 1;
            pl[i] = ldt_interleaved_shard(d, k);
        } else {
            pl[i] = ldt_replicate();
        }
    }
    ldt_status st = ldt_spec_init(spec, mesh, shape, pl, nd, dt);
    ldt_clear_error();
    return st == LDT_OK;
}

static int has_partial(const ldt_spec *s) {
    for (int i = 0; i < s->nplace; i++)
        if (s->placements[i].kind == LDT_PLACE_PARTIAL) return 1;
    return 0;
}

/* Runs src -> (to_mesh, target placements) on known data and checks the result: every
 * local shard bitwise against ldt_distribute when no Partial is involved, else the full
 * tensor (Partial reductions of small integers are exact). */
static void check_case(int c, const ldt_spec *src, const ldt_spec *dst, const ldt_cost_model *cm,
                       int merge, uint64_t *rng) {
    ldt_redist_options opt = {cm, merge, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *plan = NULL;
    ldt_shards *in = NULL, *out = NULL, *want = NULL;
    int64_t numel, nbytes;
    char *full, *back, a[256], b[256];
    ldt_spec_format(src, a, sizeof a);
    ldt_spec_format(dst, b, sizeof b);
    cr_assert_eq(ldt_shape_numel(&src->shape, &numel), LDT_OK);
    nbytes = numel * (int64_t)ldt_dtype_size(src->dtype);
    full = malloc((size_t)nbytes + 1);
    back = malloc((size_t)nbytes + 1);
    fill_known(full, numel, src->dtype, rng);
    cr_assert_eq(ldt_redist_plan_create(src, dst->mesh, dst->placements, dst->nplace, &opt, &plan),
                 LDT_OK, "case %d %s -> %s: %s", c, a, b, ldt_last_error());
    if (has_partial(src)) {
        cr_assert_eq(ldt_distribute_addends(full, src, (uint64_t)c, &in), LDT_OK, "%s",
                     ldt_last_error());
        /* the addends themselves reduce to the tensor */
        cr_assert_eq(ldt_full_tensor(in, back), LDT_OK);
        cr_assert(memcmp(full, back, (size_t)nbytes) == 0, "case %d %s: addends do not reduce "
                  "to the tensor", c, a);
    } else {
        cr_assert_eq(ldt_distribute(full, src, &in), LDT_OK);
    }
    cr_assert_eq(ldt_redistribute_shards(in, plan, &out), LDT_OK, "case %d %s -> %s: %s", c, a,
                 b, ldt_last_error());
    if (!has_partial(src) && !has_partial(dst)) {
        const ldt_mesh *m = dst->mesh;
        cr_assert_eq(ldt_distribute(full, ldt_redist_plan_target(plan), &want), LDT_OK);
        for (int p = 0; p < ldt_mesh_nranks(m); p++) {
            int r = ldt_mesh_rank_at(m, p);
            int64_t n1, n2;
            const char *x = ldt_shards_local(out, r, &n1), *y = ldt_shards_local(want, r, &n2);
            cr_assert_eq(n1, n2);
            for (int64_t k = 0; k < n1; k++)
                cr_assert(x[k] == y[k], "case %d %s -> %s (%d steps): rank %d byte %lld is %d, "
                          "expected %d", c, a, b, ldt_redist_plan_nsteps(plan), r, (long long)k,
                          x[k], y[k]);
        }
    } else {
        cr_assert_eq(ldt_full_tensor(out, back), LDT_OK, "%s", ldt_last_error());
        for (int64_t k = 0; k < nbytes; k++)
            cr_assert(full[k] == back[k], "case %d %s -> %s (%d steps): byte %lld of the full "
                      "tensor is %d, expected %d", c, a, b, ldt_redist_plan_nsteps(plan),
                      (long long)k, back[k], full[k]);
    }
    ldt_shards_destroy(want);
    ldt_shards_destroy(out);
    ldt_shards_destroy(in);
    ldt_redist_plan_destroy(plan);
    free(full);
    free(back);
}

/* Never above the naive route's modeled cost; never more bytes under a uniform model. */
static void check_cost(int c, const ldt_spec *src, const ldt_spec *dst, const ldt_cost_model *cm) {
    ldt_redist_options best = {cm, 1, LDT_REDIST_DIJKSTRA}, naive = {cm, 0, LDT_REDIST_NAIVE};
    ldt_redist_plan *p, *q;
    char a[256], b[256];
    ldt_spec_format(src, a, sizeof a);
    ldt_spec_format(dst, b, sizeof b);
    cr_assert_eq(ldt_redist_plan_create(src, NULL, dst->placements, dst->nplace, &best, &p), LDT_OK);
    cr_assert_eq(ldt_redist_plan_create(src, NULL, dst->placements, dst->nplace, &naive, &q), LDT_OK);
    cr_assert(ldt_redist_plan_seconds(p) <= ldt_redist_plan_seconds(q),
              "case %d %s -> %s under %s: planned %g s, naive %g s", c, a, b, cm->name,
              ldt_redist_plan_seconds(p), ldt_redist_plan_seconds(q));
    if (ldt_cost_model_is_uniform(cm, src->nplace))
        cr_assert(ldt_redist_plan_bytes(p) <= ldt_redist_plan_bytes(q),
                  "case %d %s -> %s: planned %lld bytes, naive %lld", c, a, b,
                  (long long)ldt_redist_plan_bytes(p), (long long)ldt_redist_plan_bytes(q));
    ldt_redist_plan_destroy(p);
    ldt_redist_plan_destroy(q);
}

static void random_shape(uint64_t *rng, ldt_shape *s) {
    s->ndim = (int)ldt_test_range(rng, 0, 3);
    for (int d = 0; d < s->ndim; d++) s->dims[d] = ldt_test_range(rng, 0, 6);
}

Test(redistribute, property_same_mesh) {
    uint64_t rng = 2024;
    int cases = ldt_test_cases(10000), done = 0, multi = 0;
    ldt_cost_model presets[2];
    cr_assert_eq(ldt_cost_model_preset("uniform", &presets[0]), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &presets[1]), LDT_OK);
    while (done < cases) {
        ldt_mesh *mesh;
        ldt_shape shape;
        ldt_spec src, dst;
        ldt_dtype dt = k_dtypes[done % 8];
        random_mesh(&rng, 0, &mesh);
        random_shape(&rng, &shape);
        if (random_placements(&rng, mesh, &shape, dt, &src) &&
            random_placements(&rng, mesh, &shape, dt, &dst)) {
            /* P -> P with another op is an error (tested below), not a case */
            int bad = 0;
            for (int i = 0; i < src.nplace; i++)
                bad |= src.placements[i].kind == LDT_PLACE_PARTIAL &&
                       dst.placements[i].kind == LDT_PLACE_PARTIAL &&
                       src.placements[i].op != dst.placements[i].op;
            if (!bad) {
                const ldt_cost_model *cm = &presets[done % 2];
                check_case(done, &src, &dst, cm, done % 5 != 0, &rng);
                check_cost(done, &src, &dst, cm);
                multi += ldt_mesh_ndim(mesh) > 1;
                done++;
            }
        }
        ldt_mesh_destroy(mesh);
    }
    cr_assert(multi > cases / 3, "too few N-D meshes: %d of %d", multi, cases);
}

Test(redistribute, property_cross_mesh) {
    uint64_t rng = 77;
    int cases = ldt_test_cases(2000), done = 0;
    ldt_cost_model cm;
    cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &cm), LDT_OK);
    while (done < cases) {
        ldt_mesh *a, *b;
        ldt_shape shape;
        ldt_spec src, dst;
        ldt_dtype dt = k_dtypes[done % 8];
        random_mesh(&rng, 1, &a);
        random_mesh(&rng, 1, &b);
        random_shape(&rng, &shape);
        if (!ldt_mesh_equal(a, b) && random_placements(&rng, a, &shape, dt, &src) &&
            random_placements(&rng, b, &shape, dt, &dst)) {
            check_case(done, &src, &dst, &cm, 1, &rng);
            done++;
        }
        ldt_mesh_destroy(a);
        ldt_mesh_destroy(b);
    }
}

/* ---- hand-derived plans ------------------------------------------------------------------ */

static ldt_redist_plan *plan_of(const char *mesh_text, ldt_device_type dev, const char *shape_text,
                                const char *from, const char *to, const char *preset,
                                ldt_mesh **mesh) {
    ldt_shape shape;
    ldt_placement pf[LDT_MAX_DIMS], pt[LDT_MAX_DIMS];
    int nf, nt;
    ldt_spec src;
    ldt_cost_model cm;
    ldt_redist_options opt = {&cm, 1, LDT_REDIST_DIJKSTRA};
    ldt_redist_plan *p;
    cr_assert_eq(ldt_mesh_parse(mesh_text, dev, mesh), LDT_OK);
    cr_assert_eq(ldt_shape_parse(shape_text, &shape), LDT_OK);
    cr_assert_eq(ldt_placements_parse(from, shape.ndim, pf, LDT_MAX_DIMS, &nf), LDT_OK);
    cr_assert_eq(ldt_placements_parse(to, shape.ndim, pt, LDT_MAX_DIMS, &nt), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src, *mesh, &shape, pf, nf, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset(preset, &cm), LDT_OK);
    cr_assert_eq(ldt_redist_plan_create(&src, NULL, pt, nt, &opt, &p), LDT_OK, "%s",
                 ldt_last_error());
    return p;
}

static ldt_redist_step step_of(const ldt_redist_plan *p, int i) {
    ldt_redist_step s;
    cr_assert_eq(ldt_redist_plan_step(p, i, &s), LDT_OK);
    return s;
}

Test(redistribute, classic_shard_to_replicate_moves_three_quarters) {
    ldt_mesh *m;
    ldt_redist_plan *p = plan_of("4", LDT_DEVICE_CPU, "8,6", "S0", "R", "uniform", &m);
    ldt_redist_step s;
    cr_assert_eq(ldt_redist_plan_nsteps(p), 1);
    s = step_of(p, 0);
    cr_expect_eq(s.collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(s.ndims, 1);
    cr_expect_eq(s.dims[0], 0);
    /* 8x6 f32 = 192 bytes; each rank holds 48 and receives the other 144 */
    cr_expect_eq(s.bytes_recv, 144);
    cr_expect_eq(s.bytes_sent, 144);
    cr_expect_eq(ldt_redist_plan_bytes(p), 144);
    /* the ring formula: overhead + 3 hops + 144 B at 87.7 GB/s */
    cr_expect(fabs(s.seconds - (6.6e-6 + 3 * 0.6e-6 + 144 / 87.7e9)) < 1e-15, "%g", s.seconds);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, classic_uneven_gather_counts_exact_bytes) {
    ldt_mesh *m;
    /* 5 rows over 4 ranks: 2,2,1,0 rows of 3 f32; rank 3 receives all 60 bytes, rank 2
     * forwards every chunk but rank 3's empty one: 5 rows minus 0 = 60 */
    ldt_redist_plan *p = plan_of("4", LDT_DEVICE_CPU, "5,3", "S0", "R", "uniform", &m);
    ldt_redist_step s = step_of(p, 0);
    cr_expect_eq(s.collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(s.bytes_recv, 60);
    cr_expect_eq(s.bytes_sent, 60);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, classic_partial_to_replicate_is_one_all_reduce) {
    ldt_mesh *m;
    ldt_redist_plan *p = plan_of("4", LDT_DEVICE_CPU, "8,6", "P", "R", "uniform", &m);
    ldt_redist_step s;
    cr_assert_eq(ldt_redist_plan_nsteps(p), 1);
    s = step_of(p, 0);
    cr_expect_eq(s.collective, LDT_COLL_ALL_REDUCE);
    cr_expect_eq(s.op, LDT_REDUCE_SUM);
    /* ring: 2 (n-1)/n of 192 bytes */
    cr_expect_eq(s.bytes_recv, 288);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, classic_s0s0_to_replicate_merges_when_small) {
    ldt_mesh *m;
    ldt_redist_plan *p = plan_of("2x2", LDT_DEVICE_CPU, "8,6", "S0,S0", "R,R", "uniform", &m);
    ldt_redist_step s;
    /* two all_gathers become one over the 4 ranks: one call instead of two */
    cr_assert_eq(ldt_redist_plan_nsteps(p), 1);
    s = step_of(p, 0);
    cr_expect_eq(s.collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(s.ndims, 2);
    cr_expect_eq(s.dims[0], 0);
    cr_expect_eq(s.dims[1], 1);
    cr_expect_eq(s.bytes_recv, 144);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, classic_s0s0_to_replicate_spares_the_slow_link_when_large) {
    ldt_mesh *m;
    /* 4 MiB on nvlink-ib. Gathering the inner dim first (PyTorch's order) sends 2 MiB over
     * the slow outer link. Cheaper: an all_to_all on the fast inner link (S0 -> S1) makes the
     * outer Shard(0) innermost, the slow link gathers only 1 MiB, the fast one the rest. */
    ldt_redist_plan *p =
        plan_of("2x2", LDT_DEVICE_META, "1024,1024", "S0,S0", "R,R", "nvlink-ib", &m);
    double inner_first = (6.6e-6 + 0.6e-6 + (1 << 20) / 87.7e9) +
                         (6.6e-6 + 2.7e-6 + (2 << 20) / (0.22 * 87.7e9));
    cr_assert_eq(ldt_redist_plan_nsteps(p), 3);
    cr_expect_eq(step_of(p, 0).collective, LDT_COLL_ALL_TO_ALL);
    cr_expect_eq(step_of(p, 0).dims[0], 1);
    cr_expect_eq(step_of(p, 1).collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(step_of(p, 1).dims[0], 0);
    cr_expect_eq(step_of(p, 1).bytes_recv, 1 << 20);
    cr_expect_eq(step_of(p, 2).collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(step_of(p, 2).dims[0], 1);
    cr_expect_eq(step_of(p, 2).bytes_recv, 2 << 20);
    cr_expect(ldt_redist_plan_seconds(p) < inner_first, "%g >= %g", ldt_redist_plan_seconds(p),
              inner_first);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, nested_shard_beats_greedy_route) {
    ldt_mesh *m;
    /* PyTorch's greedy route: all_gather dim 1, all_gather dim 0, chunk dim 1 (3 steps,
     * 3/4 of the tensor into each rank). Any plan found moves less. */
    ldt_redist_plan *p =
        plan_of("2x2", LDT_DEVICE_META, "1024,1024", "S0,S0", "R,S0", "uniform", &m);
    cr_expect(ldt_redist_plan_bytes(p) < 3 << 20, "%lld bytes",
              (long long)ldt_redist_plan_bytes(p));
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, no_op_has_zero_steps) {
    ldt_mesh *m;
    ldt_redist_plan *p = plan_of("2x2", LDT_DEVICE_CPU, "8,6", "S0,Pmax", "S0,Pmax", "uniform", &m);
    cr_expect_eq(ldt_redist_plan_nsteps(p), 0);
    cr_expect_eq(ldt_redist_plan_bytes(p), 0);
    cr_expect_eq(ldt_redist_plan_seconds(p), 0);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

Test(redistribute, shard_to_partial_pads_and_replicate_to_partial_is_local) {
    ldt_mesh *m;
    ldt_redist_plan *p = plan_of("4", LDT_DEVICE_CPU, "8", "S0", "P", "uniform", &m);
    cr_assert_eq(ldt_redist_plan_nsteps(p), 1);
    cr_expect_eq(step_of(p, 0).collective, LDT_COLL_LOCAL_PAD);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
    p = plan_of("4", LDT_DEVICE_CPU, "8", "S0", "Pavg", "uniform", &m);
    /* never S -> Pavg directly: through Replicate */
    cr_assert_eq(ldt_redist_plan_nsteps(p), 2);
    cr_expect_eq(step_of(p, 0).collective, LDT_COLL_ALL_GATHER);
    cr_expect_eq(step_of(p, 1).collective, LDT_COLL_LOCAL_PARTIAL);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

/* ---- bad input ------------------------------------------------------------------------------ */

static void expect_error(ldt_status got, ldt_status want, const char *needle) {
    cr_expect_eq(got, want, "status %s, expected %s (%s)", ldt_status_name(got),
                 ldt_status_name(want), ldt_last_error());
    cr_expect(strstr(ldt_last_error(), needle) != NULL, "message '%s' lacks '%s'",
              ldt_last_error(), needle);
}

Test(redistribute, bad_input_messages) {
    ldt_mesh *m;
    ldt_shape shape = {2, {8, 6}}, huge = {2, {(int64_t)1 << 40, (int64_t)1 << 40}};
    ldt_placement s0r[2] = {ldt_shard(0), ldt_replicate()};
    ldt_placement three[3] = {ldt_replicate(), ldt_replicate(), ldt_replicate()};
    ldt_placement s2[2] = {ldt_shard(2), ldt_replicate()};
    ldt_placement psum[2] = {ldt_partial(LDT_REDUCE_SUM), ldt_replicate()};
    ldt_placement pmax[2] = {ldt_partial(LDT_REDUCE_MAX), ldt_replicate()};
    ldt_spec src, ps, bigspec;
    ldt_redist_plan *p = NULL;
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src, m, &shape, s0r, 2, LDT_F32), LDT_OK);
    expect_error(ldt_redist_plan_create(&src, NULL, three, 3, NULL, &p), LDT_ERR_INVALID_ARGUMENT,
                 "3 target placements for mesh 2x2 with 2 dims");
    expect_error(ldt_redist_plan_create(&src, NULL, s2, 2, NULL, &p), LDT_ERR_INVALID_ARGUMENT,
                 "shards tensor dim 2 but the tensor has 2 dims");
    cr_assert_eq(ldt_spec_init(&ps, m, &shape, psum, 2, LDT_F32), LDT_OK);
    expect_error(ldt_redist_plan_create(&ps, NULL, pmax, 2, NULL, &p), LDT_ERR_INVALID_ARGUMENT,
                 "P->P with another op");
    expect_error(ldt_spec_init(&bigspec, m, &huge, s0r, 2, LDT_F32), LDT_ERR_OVERFLOW, "");
    expect_error(ldt_redist_plan_create(NULL, NULL, s0r, 2, NULL, &p), LDT_ERR_INVALID_ARGUMENT,
                 "must not be NULL");
    {
        ldt_cost_model bad;
        ldt_redist_options o = {&bad, 1, LDT_REDIST_DIJKSTRA};
        cr_assert_eq(ldt_cost_model_preset("uniform", &bad), LDT_OK);
        bad.links[0].bandwidth_Bps = -1;
        expect_error(ldt_redist_plan_create(&src, NULL, s0r, 2, &o, &p), LDT_ERR_INVALID_ARGUMENT,
                     "bandwidth -1 B/s");
        cr_assert_eq(ldt_cost_model_preset("uniform", &bad), LDT_OK);
        o.search = (ldt_redist_search)7;
        expect_error(ldt_redist_plan_create(&src, NULL, s0r, 2, &o, &p), LDT_ERR_INVALID_ARGUMENT,
                     "invalid search 7");
    }
    cr_expect_null(p);
    {
        ldt_redist_step s;
        cr_assert_eq(ldt_redist_plan_create(&src, NULL, s0r, 2, NULL, &p), LDT_OK);
        expect_error(ldt_redist_plan_step(p, 0, &s), LDT_ERR_INVALID_ARGUMENT,
                     "step 0 out of range [0, 0)");
        ldt_redist_plan_destroy(p);
    }
    ldt_mesh_destroy(m);
}

static ldt_status run_small_world(ldt_comm *w, void *arg) {
    return ldt_redistribute(w, arg, NULL, NULL);
}

Test(redistribute, bad_execution_messages) {
    ldt_mesh *m, *other, *meta;
    ldt_shape shape = {1, {8}};
    ldt_placement s0 = ldt_shard(0), r = ldt_replicate();
    ldt_spec src, src2, msrc;
    ldt_redist_plan *p, *mp;
    ldt_shards *sh, *out = NULL;
    double t;
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_CPU, &other), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_META, &meta), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src, m, &shape, &s0, 1, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src2, other, &shape, &s0, 1, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_spec_init(&msrc, meta, &shape, &s0, 1, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_redist_plan_create(&src, NULL, &r, 1, NULL, &p), LDT_OK);
    cr_assert_eq(ldt_redist_plan_create(&msrc, NULL, &r, 1, NULL, &mp), LDT_OK);
    /* a world with fewer ranks than the mesh */
    expect_error(ldt_threads_launch(2, NULL, run_small_world, p), LDT_ERR_INVALID_ARGUMENT,
                 "the world has 2 ranks, expected at least 4");
    expect_error(ldt_threads_launch(4, NULL, run_small_world, mp), LDT_ERR_INVALID_USAGE,
                 "meta mesh");
    /* a rank of the source mesh without its input */
    expect_error(ldt_threads_launch(4, NULL, run_small_world, p), LDT_ERR_INVALID_ARGUMENT,
                 "holds a source shard but in is NULL");
    cr_assert_eq(ldt_shards_create(&src2, &sh), LDT_OK);
    expect_error(ldt_redistribute_shards(sh, p, &out), LDT_ERR_INVALID_ARGUMENT,
                 "but the plan starts from [8] f32 (S0) on 4");
    cr_expect_null(out);
    expect_error(ldt_redistribute_measure(NULL, p, -1, &t, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "-1 repetitions");
    expect_error(ldt_redistribute_measure_net(p, 0, &t, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "0 repetitions, expected 1 to 1000000");
    expect_error(ldt_redistribute_measure_net(NULL, 3, &t, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "plan and seconds must not be NULL");
    expect_error(ldt_redistribute_measure_net(p, 3, NULL, NULL), LDT_ERR_INVALID_ARGUMENT,
                 "plan and seconds must not be NULL");
    ldt_shards_destroy(sh);
    ldt_redist_plan_destroy(p);
    ldt_redist_plan_destroy(mp);
    ldt_mesh_destroy(m);
    ldt_mesh_destroy(other);
    ldt_mesh_destroy(meta);
}

/* The net time is the runs' median less the harness's: a 16 MiB all_gather on 4 rank threads
 * takes milliseconds, its harness (two barriers) microseconds to tens of them. */
Test(redistribute, measure_net_is_the_run_less_its_harness) {
    ldt_mesh *m;
    ldt_shape shape = {1, {4 << 20}};
    ldt_placement s0 = ldt_shard(0), r = ldt_replicate();
    ldt_spec src;
    ldt_redist_plan *p;
    double net = -1, harness = -1, gross = -1;
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src, m, &shape, &s0, 1, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_redist_plan_create(&src, NULL, &r, 1, NULL, &p), LDT_OK);
    cr_assert_eq(ldt_redistribute_measure_net(p, 3, &net, &harness), LDT_OK);
    cr_assert_eq(ldt_redistribute_measure(NULL, p, 3, &gross, NULL), LDT_OK);
    cr_expect(harness > 0, "harness %g s", harness);
    cr_expect(net > harness, "net %g s, harness %g s", net, harness);
    cr_expect(net < 10 * gross, "net %g s, gross %g s", net, gross);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

/* ---- cost model ----------------------------------------------------------------------------- */

Test(cost, presets_links_and_formulas) {
    ldt_cost_model cm, e;
    ldt_mesh *m;
    int dims[2] = {0, 1};
    cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &cm), LDT_OK);
    /* inner-aligned: on a 3-D mesh dims 0 and 1 get the slow link, dim 2 the fast one */
    cr_expect_eq(ldt_cost_model_link(&cm, 3, 2).bandwidth_Bps, 87.7e9);
    cr_expect_eq(ldt_cost_model_link(&cm, 3, 1).latency_s, 2.7e-6);
    cr_expect_eq(ldt_cost_model_link(&cm, 3, 0).latency_s, 2.7e-6);
    cr_expect(!ldt_cost_model_is_uniform(&cm, 2));
    cr_expect(ldt_cost_model_is_uniform(&cm, 1));
    cr_assert_eq(ldt_cost_model_expand(&cm, 3, &e), LDT_OK);
    cr_expect_eq(e.nlinks, 3);
    cr_expect_eq(e.links[1].latency_s, 2.7e-6);
    cr_assert_eq(ldt_mesh_parse("2x4", LDT_DEVICE_META, &m), LDT_OK);
    /* all_reduce on the inner dim: 6.6 us + 2*3 hops of 0.6 us + bytes / 87.7 GB/s */
    cr_expect(fabs(ldt_cost_seconds(&cm, m, 1, &dims[1], LDT_COLL_ALL_REDUCE, 877, 0) -
                   (6.6e-6 + 6 * 0.6e-6 + 1e-8)) < 1e-15);
    /* flattened 2x4: 7 hops on the slow link */
    cr_expect(fabs(ldt_cost_seconds(&cm, m, 2, dims, LDT_COLL_ALL_GATHER, 0, 0) -
                   (6.6e-6 + 7 * 2.7e-6)) < 1e-15);
    /* a local step: the fixed overhead plus bytes at the local copy bandwidth */
    cr_expect(fabs(ldt_cost_seconds(&cm, m, 1, dims, LDT_COLL_LOCAL_CHUNK, 1000, 0) -
                   (cm.local_overhead_s + 1000 / cm.local_bandwidth_Bps)) < 1e-15);
    cr_expect_str_eq(ldt_collective_name(LDT_COLL_REDUCE_SCATTER), "reduce_scatter");
    cr_expect_str_eq(ldt_collective_name((ldt_collective)99), "invalid");
    expect_error(ldt_cost_model_preset("dragonfly", &cm), LDT_ERR_INVALID_ARGUMENT,
                 "unknown preset 'dragonfly', expected a100-80g, cpu-threads, h100-80g, uniform or nvlink-ib");
    ldt_mesh_destroy(m);
}

Test(cost, profile_round_trip_and_errors) {
    char path[] = "/tmp/ldt_profile_XXXXXX";
    int fd = mkstemp(path);
    ldt_cost_model cm, back;
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &cm), LDT_OK);
    cm.overhead_s = 3e-6;
    cr_assert_eq(ldt_cost_model_save(&cm, path), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_cost_model_load(path, &back), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(back.nlinks, 2);
    cr_expect(fabs(back.links[0].bandwidth_Bps - cm.links[0].bandwidth_Bps) < 1);
    cr_expect_eq(back.links[1].latency_s, 0.6e-6);
    cr_expect_eq(back.overhead_s, 3e-6);
    cr_expect_str_eq(back.name, "nvlink-ib");
    remove(path);
    expect_error(ldt_cost_model_load(path, &back), LDT_ERR_SYSTEM, "cannot open");
    expect_error(ldt_cost_model_parse("[1,2]", &back), LDT_ERR_CORRUPT, "not a JSON object");
    expect_error(ldt_cost_model_parse("{\"format\":\"x\"}", &back), LDT_ERR_CORRUPT,
                 "\"format\" must be \"lazydt-cost-profile\"");
    expect_error(ldt_cost_model_parse("{\"format\":\"lazydt-cost-profile\",\"overhead_s\":0,"
                                      "\"local_bandwidth_gbps\":1,\"links\":[]}",
                                      &back),
                 LDT_ERR_CORRUPT, "\"links\" must be an array of 1 to 8");
    expect_error(ldt_cost_model_parse("{\"format\":\"lazydt-cost-profile\",\"overhead_s\":0,"
                                      "\"local_bandwidth_gbps\":1,\"links\":[{\"latency_s\":1}]}",
                                      &back),
                 LDT_ERR_CORRUPT, "links[0] needs a number \"bandwidth_gbps\"");
    expect_error(ldt_cost_model_parse("{\"format\":\"lazydt-cost-profile\",\"overhead_s\":-1,"
                                      "\"local_bandwidth_gbps\":1,\"links\":[{\"latency_s\":1,"
                                      "\"bandwidth_gbps\":1}]}",
                                      &back),
                 LDT_ERR_INVALID_ARGUMENT, "overhead -1 s");
}

Test(cost, calibrate_measures_every_dim) {
    ldt_mesh *m, *meta;
    ldt_cost_model cm;
    ldt_calibrate_options o = {1, 0, 0, NULL, 0};
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_calibrate(m, &o, &cm), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(cm.nlinks, 2);
    cr_expect_str_eq(cm.name, "calibrated");
    for (int d = 0; d < 2; d++) {
        cr_expect(cm.links[d].bandwidth_Bps > 1e6 && cm.links[d].bandwidth_Bps < 1e13, "%g",
                  cm.links[d].bandwidth_Bps);
        cr_expect(cm.links[d].latency_s >= 0 && cm.links[d].latency_s < 0.1);
    }
    cr_expect(cm.overhead_s >= 0 && cm.overhead_s < 0.1);
    cr_expect_eq(ldt_cost_model_check(&cm), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_META, &meta), LDT_OK);
    expect_error(ldt_calibrate(meta, NULL, &cm), LDT_ERR_INVALID_USAGE, "meta device");
    ldt_mesh_destroy(meta);
    ldt_mesh_destroy(m);
}
