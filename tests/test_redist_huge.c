/* Redistribution planning on huge meshes, by cells of coordinates: every step priced by
 * cells equals the rank-by-rank count on small meshes (random specs, uneven and interleaved
 * shards), and plans on meshes of up to 16,777,216 ranks give hand-derived figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/ldt.h"
#include "planner/memory.h"
#include "planner/plan_internal.h"
#include "planner/program.h"
#include "planner/redistribute.h"
#include "planner/region.h"
#include "tests/test_util.h"

static ldt_mesh *mesh_of(const char *text) {
    ldt_mesh *m = NULL;
    cr_assert_eq(ldt_mesh_parse(text, LDT_DEVICE_META, &m), LDT_OK, "%s: %s", text,
                 ldt_last_error());
    return m;
}

/* The plan of src -> to on one mesh under the uniform model. */
static ldt_redist_plan *plan_of(ldt_mesh *mesh, const char *shape, const char *from,
                                const char *to) {
    ldt_shape sh;
    ldt_placement pf[LDT_MAX_DIMS], pt[LDT_MAX_DIMS];
    int nf, nt;
    ldt_spec src;
    ldt_redist_plan *p = NULL;
    cr_assert_eq(ldt_shape_parse(shape, &sh), LDT_OK);
    cr_assert_eq(ldt_placements_parse(from, sh.ndim, pf, LDT_MAX_DIMS, &nf), LDT_OK);
    cr_assert_eq(ldt_placements_parse(to, sh.ndim, pt, LDT_MAX_DIMS, &nt), LDT_OK);
    cr_assert_eq(ldt_spec_init(&src, mesh, &sh, pf, nf, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_redist_plan_create(&src, NULL, pt, nt, NULL, &p), LDT_OK, "%s",
                 ldt_last_error());
    return p;
}

static void expect_step(const ldt_redist_plan *p, int i, ldt_collective c, int dim,
                        int64_t sent, int64_t recv) {
    ldt_redist_step s;
    cr_assert_eq(ldt_redist_plan_step(p, i, &s), LDT_OK);
    cr_expect_eq(s.collective, c, "step %d: %s, expected %s", i, ldt_collective_name(s.collective),
                 ldt_collective_name(c));
    cr_expect(s.ndims == 1 && s.dims[0] == dim, "step %d: %d mesh dims, first %d, expected [%d]",
              i, s.ndims, s.dims[0], dim);
    cr_expect_eq(s.bytes_sent, sent, "step %d: sent %lld, expected %lld", i,
                 (long long)s.bytes_sent, (long long)sent);
    cr_expect_eq(s.bytes_recv, recv, "step %d: recv %lld, expected %lld", i,
                 (long long)s.bytes_recv, (long long)recv);
}

/* [1024,1024] f32 S0 -> R on 2^24 ranks: chunks of ceil(1024 / 2^24) = 1 row, so ranks
 * 0..1023 hold a row of 1024 and the rest nothing. A ring all_gather moves the whole 2^20
 * elements less the rank's own chunk (received) or its successor's (sent): an empty rank
 * receives all 4 MiB, rank 1023 (successor empty) sends all 4 MiB. */
/* One-step plan src -> to of shape on m: its collective, mesh dim and bytes sent/received. */
static void expect_one_step(ldt_mesh *m, const char *shape, const char *from, const char *to, ldt_collective coll,
                            int dim, int64_t sent, int64_t recv) {
    ldt_redist_plan *p = plan_of(m, shape, from, to);
    cr_assert_eq(ldt_redist_plan_nsteps(p), 1, "%s %s -> %s", shape, from, to);
    expect_step(p, 0, coll, dim, sent, recv);
    ldt_redist_plan_destroy(p);
}

Test(redist_huge, all_gather_on_16m_ranks) {
    ldt_mesh *m = mesh_of("16777216");
    ldt_redist_plan *p = plan_of(m, "1024,1024", "S0", "R");
    cr_expect_eq(ldt_redist_plan_bytes(p), 4194304);
    ldt_redist_plan_destroy(p);
    expect_one_step(m, "1024,1024", "S0", "R", LDT_COLL_ALL_GATHER, 0, 4194304, 4194304);
    /* [7,5]: ranks 0..6 hold a row of 5; 35 elements, an empty rank receives all 140 bytes */
    expect_one_step(m, "7,5", "S0", "R", LDT_COLL_ALL_GATHER, 0, 140, 140);
    ldt_mesh_destroy(m);
}

/* n = 6 * 2^24 - 5 elements: chunks of 6 for ranks 0..2^24-2, the last rank holds 1, none is
 * empty. all_gather: the last rank receives n - 1, rank 2^24-2 sends n - 1 (its successor holds
 * 1): 4 (n - 1) = 402653160 bytes. all_reduce of the whole buffer over the ring: a rank sends
 * and receives 2n less its own segment and a neighbour's; the smallest pair is the last
 * segment (1) and rank 0's (6): 4 (2n - 7) = 805306300. reduce_scatter: B - own target chunk
 * sent, B - predecessor's received; the last rank's is 1 (and rank 0's predecessor): 4 (n - 1). */
Test(redist_huge, uneven_chunks_on_16m_ranks) {
    ldt_mesh *m = mesh_of("16777216");
    expect_one_step(m, "100663291", "S0", "R", LDT_COLL_ALL_GATHER, 0, 402653160, 402653160);
    expect_one_step(m, "100663291", "P", "R", LDT_COLL_ALL_REDUCE, 0, 805306300, 805306300);
    expect_one_step(m, "100663291", "P", "S0", LDT_COLL_REDUCE_SCATTER, 0, 402653160, 402653160);
    /* [1024,1024] P -> R: the ring over 2^24 has empty segments side by side: 2 B = 8 MiB */
    expect_one_step(m, "1024,1024", "P", "R", LDT_COLL_ALL_REDUCE, 0, 8388608, 8388608);
    ldt_mesh_destroy(m);
}

/* [1024,1024] f32 (S0,S1) -> (R,S0) on 4096x4096. Both dims chunk by 1: rank (a, b) holds
 * element (a, b) when a, b < 1024. all_gather over mesh dim 0: a column of 1024 elements, an
 * empty rank receives 4096 bytes and the rank before one sends as much. Then all_to_all over
 * mesh dim 1, (R,S1) -> (R,S0): rank b < 1024 holds column b and needs row b; it shares one
 * element with each of the 1023 other ranks b' < 1024: 4092 bytes each way. */
Test(redist_huge, two_dim_mesh_4096x4096) {
    ldt_mesh *m = mesh_of("4096x4096");
    ldt_redist_plan *p = plan_of(m, "1024,1024", "S0,S1", "R,S0");
    cr_assert_eq(ldt_redist_plan_nsteps(p), 2);
    expect_step(p, 0, LDT_COLL_ALL_GATHER, 0, 4096, 4096);
    expect_step(p, 1, LDT_COLL_ALL_TO_ALL, 1, 4092, 4092);
    cr_expect_eq(ldt_redist_plan_bytes(p), 8188);
    ldt_redist_plan_destroy(p);
    ldt_mesh_destroy(m);
}

/* ---- cells against rank-by-rank counts ---------------------------------------------------- */

static ldt_placement random_placement(uint64_t *rng, int ndim) {
    int r = (int)ldt_test_range(rng, 0, 9);
    if (r < 2) return ldt_replicate();
    if (r < 3) return ldt_partial(LDT_REDUCE_SUM);
    if (r < 4 && ndim > 0) return ldt_interleaved_shard((int)ldt_test_range(rng, 0, ndim - 1),
                                                        (int)ldt_test_range(rng, 2, 3));
    return ldt_shard(ndim > 0 ? (int)ldt_test_range(rng, 0, ndim - 1) : 0);
}

static int is_shard(const ldt_placement *p) {
    return p->kind == LDT_PLACE_SHARD || p->kind == LDT_PLACE_INTERLEAVED_SHARD;
}

/* The collective of one mesh dim changing a -> b; COUNT when not one step. */
static ldt_collective collective_of(const ldt_placement *a, const ldt_placement *b) {
    if (a->kind == LDT_PLACE_PARTIAL)
        return b->kind == LDT_PLACE_REPLICATE ? LDT_COLL_ALL_REDUCE
               : is_shard(b)                  ? LDT_COLL_REDUCE_SCATTER
                                              : LDT_COLL_COUNT;
    if (is_shard(a))
        return b->kind == LDT_PLACE_REPLICATE ? LDT_COLL_ALL_GATHER
               : is_shard(b)                  ? LDT_COLL_ALL_TO_ALL
                                              : LDT_COLL_COUNT;
    return is_shard(b) ? LDT_COLL_LOCAL_CHUNK
           : b->kind == LDT_PLACE_PARTIAL ? LDT_COLL_LOCAL_PARTIAL
                                          : LDT_COLL_COUNT;
}

/* Prices X -> Y both ways and compares; returns whether cells priced it. */
static int compare(const ldt_spec *X, const ldt_spec *Y, int ndims, const int *dims,
                   ldt_collective c) {
    ldt_redist_step a, b;
    int cells, ignored;
    char x[256], y[256];
    cr_assert_eq(ldt__redist_price(X, Y, ndims, dims, c, 0, &a, &cells), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt__redist_price(X, Y, ndims, dims, c, 1, &b, &ignored), LDT_OK, "%s",
                 ldt_last_error());
    ldt_spec_format(X, x, sizeof x);
    ldt_spec_format(Y, y, sizeof y);
    cr_expect(a.bytes_sent == b.bytes_sent && a.bytes_recv == b.bytes_recv &&
                  a.seconds == b.seconds,
              "%s -> %s by %s over %d dims (first %d): cells sent %lld recv %lld %.9g s, ranks "
              "sent %lld recv %lld %.9g s",
              x, y, ldt_collective_name(c), ndims, dims[0], (long long)a.bytes_sent,
              (long long)a.bytes_recv, a.seconds, (long long)b.bytes_sent,
              (long long)b.bytes_recv, b.seconds);
    return cells;
}

/* Every single-dim step out of random specs on random small meshes (dims up to 9, shapes up
 * to 17, so chunks are uneven and often empty), where the changed dim is its shards'
 * innermost (as the planner requires): priced by cells and rank by rank alike. */
Test(redist_huge, cells_match_ranks_single_steps) {
    uint64_t rng = 0x5eed28;
    int ncells = 0, nsteps = 0;
    for (int t = 0; t < ldt_test_cases(300); t++) {
        int64_t md[3];
        int mnd = (int)ldt_test_range(&rng, 1, 3);
        ldt_mesh *mesh = NULL;
        ldt_shape sh;
        ldt_placement pl[3];
        ldt_spec X;
        for (int i = 0; i < mnd; i++) md[i] = ldt_test_range(&rng, 1, mnd == 3 ? 4 : 9);
        cr_assert_eq(ldt_mesh_create(mnd, md, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s",
                     ldt_last_error());
        sh.ndim = (int)ldt_test_range(&rng, 1, 3);
        for (int d = 0; d < sh.ndim; d++) sh.dims[d] = ldt_test_range(&rng, 0, 17);
        for (int i = 0; i < mnd; i++) pl[i] = random_placement(&rng, sh.ndim);
        if (ldt_spec_init(&X, mesh, &sh, pl, mnd, LDT_F32) != LDT_OK) {
            ldt_mesh_destroy(mesh);
            continue;
        }
        for (int i = 0; i < mnd; i++)
            for (int k = 0; k < 12; k++) {
                ldt_spec Y = X;
                ldt_placement b = k == 0 ? ldt_replicate() : k == 1 ? ldt_partial(LDT_REDUCE_SUM)
                                  : k < 2 + sh.ndim ? ldt_shard(k - 2)
                                                    : random_placement(&rng, sh.ndim);
                ldt_collective c = collective_of(&X.placements[i], &b);
                int nested = 0;
                if (c == LDT_COLL_COUNT || ldt_placement_equal(&b, &X.placements[i])) continue;
                for (int j = i + 1; j < mnd; j++)
                    nested |= (is_shard(&X.placements[i]) && is_shard(&X.placements[j]) &&
                               X.placements[j].dim == X.placements[i].dim) ||
                              (is_shard(&b) && is_shard(&X.placements[j]) &&
                               X.placements[j].dim == b.dim);
                Y.placements[i] = b;
                if (nested || ldt_spec_check(&Y) != LDT_OK) continue;
                ncells += compare(&X, &Y, 1, &i, c);
                nsteps++;
            }
        ldt_mesh_destroy(mesh);
    }
    cr_expect_gt(nsteps, 500, "only %d steps compared", nsteps);
    cr_expect_gt(ncells, nsteps / 2, "only %d of %d steps priced by cells", ncells, nsteps);
}

/* The steps of random plans (merged ones included: one collective over several mesh dims),
 * repriced both ways. */
Test(redist_huge, cells_match_ranks_plans) {
    uint64_t rng = 0xb16;
    int nmerged = 0;
    /* the scaled count of plans, and more until a few merged steps have been compared (the
     * sanitizer builds scale the count down) */
    for (int t = 0; t < 2000 && (t < ldt_test_cases(200) || nmerged <= 5); t++) {
        int64_t md[3];
        int mnd = (int)ldt_test_range(&rng, 2, 3);
        ldt_mesh *mesh = NULL;
        ldt_shape sh;
        ldt_placement pf[3], pt[3];
        ldt_spec X;
        ldt_redist_plan *p = NULL;
        for (int i = 0; i < mnd; i++) md[i] = ldt_test_range(&rng, 1, mnd == 3 ? 4 : 7);
        cr_assert_eq(ldt_mesh_create(mnd, md, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK);
        sh.ndim = (int)ldt_test_range(&rng, 1, 3);
        for (int d = 0; d < sh.ndim; d++) sh.dims[d] = ldt_test_range(&rng, 1, 13);
        for (int i = 0; i < mnd; i++) {
            pf[i] = random_placement(&rng, sh.ndim);
            pt[i] = random_placement(&rng, sh.ndim);
        }
        if (ldt_spec_init(&X, mesh, &sh, pf, mnd, LDT_F32) != LDT_OK ||
            ldt_redist_plan_create(&X, NULL, pt, mnd, NULL, &p) != LDT_OK) {
            ldt_mesh_destroy(mesh);
            continue;
        }
        for (int i = 0; i < p->nsteps; i++) {
            const ldt__rstep *s = &p->steps[i];
            compare(&s->before, &s->after, s->pub.ndims, s->pub.dims, s->pub.collective);
            nmerged += s->pub.ndims > 1;
        }
        ldt_redist_plan_destroy(p);
        ldt_mesh_destroy(mesh);
    }
    cr_expect_gt(nmerged, 5, "only %d merged steps compared", nmerged);
}

/* all_to_all steps on mid-size 2-D meshes (up to 64 x 8 ranks, shapes up to 300, so chunks
 * are uneven and many are empty), over one or both mesh dims: priced by tensor dim over the
 * cells (exact cells on the mesh dims where overlaps depend on where chunks start) and rank
 * by rank alike. */
Test(redist_huge, all_to_all_by_dims_matches_ranks) {
    uint64_t rng = 0xa2a;
    int nexact = 0, ncells = 0;
    for (int t = 0; t < ldt_test_cases(200); t++) {
        int64_t md[2] = {ldt_test_range(&rng, 9, 64), ldt_test_range(&rng, 2, 8)};
        ldt_mesh *mesh = NULL;
        ldt_shape sh;
        ldt_placement px[2], py[2];
        ldt_spec X, Y;
        int dims[2], nd = 0, which = (int)ldt_test_range(&rng, 1, 3), nested = 0;
        cr_assert_eq(ldt_mesh_create(2, md, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK);
        sh.ndim = 2;
        sh.dims[0] = ldt_test_range(&rng, 1, 300);
        sh.dims[1] = 12 * ldt_test_range(&rng, 1, 25); /* divisible by IS blocks of 2 to 4 */
        for (int i = 0; i < 2; i++) {
            int sharded = (which >> i) & 1;
            px[i] = sharded ? (ldt_test_range(&rng, 0, 2) ? ldt_shard((int)ldt_test_range(&rng, 0, 1))
                                                           : ldt_interleaved_shard(1, (int)ldt_test_range(&rng, 2, 4)))
                            : random_placement(&rng, 2);
            py[i] = px[i];
            if (sharded) {
                /* IS1:b -> IS1:b' (b' != b) moves pieces that slide past each other slowly:
                 * overlaps change over runs of coordinates, not at one */
                int64_t b = px[i].kind == LDT_PLACE_INTERLEAVED_SHARD ? px[i].blocks : 0;
                int64_t b2 = ldt_test_range(&rng, 2, 4);
                py[i] = b && ldt_test_range(&rng, 0, 1) ? ldt_interleaved_shard(1, (int)(b2 == b ? b2 % 4 + 1 : b2))
                        : ldt_test_range(&rng, 0, 2)   ? ldt_shard((int)ldt_test_range(&rng, 0, 1))
                                                       : ldt_interleaved_shard(1, (int)b2);
                if (py[i].kind == LDT_PLACE_INTERLEAVED_SHARD && py[i].blocks == 1) py[i] = ldt_shard(1);
                dims[nd++] = i;
            }
        }
        /* the planner's nesting rule: a changed dim is its shards' innermost */
        for (int k = 0; k < nd; k++)
            for (int j = dims[k] + 1; j < 2; j++)
                nested |= (is_shard(&px[j]) && px[j].dim == px[dims[k]].dim) ||
                          (is_shard(&py[j]) && py[j].dim == py[dims[k]].dim);
        if (nested || ldt_placement_equal(&px[dims[0]], &py[dims[0]]) ||
            ldt_spec_init(&X, mesh, &sh, px, 2, LDT_F32) != LDT_OK ||
            ldt_spec_init(&Y, mesh, &sh, py, 2, LDT_F32) != LDT_OK) {
            ldt_clear_error();
            ldt_mesh_destroy(mesh);
            continue;
        }
        if (compare(&X, &Y, nd, dims, LDT_COLL_ALL_TO_ALL)) ncells++;
        else nexact++;
        ldt_mesh_destroy(mesh);
    }
    cr_expect_gt(nexact, 3, "only %d steps priced on exact cells", nexact);
    cr_expect_gt(ncells, 3, "only %d steps priced on cells of lengths", ncells);
}

/* Steps the planner never takes (a group dim's tensor dim split again by a later mesh dim off
 * the group, so the group's pieces are not one run) are still priced exactly, summed over the
 * group's coordinates. */
Test(redist_huge, all_to_all_nested_pieces_match_ranks) {
    static const char *cases[][4] = {
        {"12x5", "37,11", "S0,S0", "S1,S0"}, {"12x5", "37,11", "S1,S0", "S0,S0"},
        {"7x6", "30,20", "IS1:2,S0", "S0,S1"}, {"9x4", "41,13", "S0,S0", "S1,S1"},
    };
    int g = 0, n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ldt_mesh *m = mesh_of(cases[i][0]);
        ldt_shape sh;
        ldt_placement px[2], py[2];
        ldt_spec X, Y;
        cr_assert_eq(ldt_shape_parse(cases[i][1], &sh), LDT_OK);
        cr_assert_eq(ldt_placements_parse(cases[i][2], 2, px, 2, &n), LDT_OK);
        cr_assert_eq(ldt_placements_parse(cases[i][3], 2, py, 2, &n), LDT_OK);
        cr_assert_eq(ldt_spec_init(&X, m, &sh, px, 2, LDT_F32), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_spec_init(&Y, m, &sh, py, 2, LDT_F32), LDT_OK, "%s", ldt_last_error());
        compare(&X, &Y, 1, &g, LDT_COLL_ALL_TO_ALL);
        ldt_mesh_destroy(m);
    }
}

/* GPT-2-small's (IS1:3,S0) -> (S1,S1) of a [8192,768] f32 value over all of dp=512,tp=8, by
 * hand. Before: tp t holds rows [1024t, 1024t + 1024) and dp c < 256 columns c, c + 256 and
 * c + 512 (3072 elements). After: dp c < 384 holds columns [2c, 2c + 2), split by tp 0 and 1
 * (a column of 8192 rows each). The group is every rank, so a rank sends what it holds but
 * keeps and receives what it needs but held: at most 3072 and 8192 elements (ranks that keep
 * nothing, e.g. dp 1, tp 0: columns 1, 257, 513 against column 2). */
Test(redist_huge, gpt_all_to_all_on_4096_ranks_by_hand) {
    ldt_mesh *m = mesh_of("dp=512,tp=8");
    ldt_shape sh = {2, {8192, 768}};
    ldt_placement px[2] = {ldt_interleaved_shard(1, 3), ldt_shard(0)}, py[2] = {ldt_shard(1), ldt_shard(1)};
    ldt_spec X, Y;
    ldt_redist_step s;
    int dims[2] = {0, 1}, cells;
    cr_assert_eq(ldt_spec_init(&X, m, &sh, px, 2, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_spec_init(&Y, m, &sh, py, 2, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__redist_price(&X, &Y, 2, dims, LDT_COLL_ALL_TO_ALL, 0, &s, &cells), LDT_OK, "%s",
                 ldt_last_error());
    cr_expect_eq(s.bytes_sent, 3072 * 4);
    cr_expect_eq(s.bytes_recv, 8192 * 4);
    ldt_mesh_destroy(m);
}

/* ldt_plan_rank_classes: one rank per class of alike ranks, with its class's size. Weighted by
 * the sizes, the representatives' parameter bytes give every rank's sum, and their maxima the
 * maximum over all ranks: checked against the rank-by-rank layout on uneven and even shards
 * (a [7,5] f32 weight S0 on 4 ranks: 40, 40, 40 and 20 bytes, 140 in all, by hand). */
static void check_classes(const char *mesh_text, const char *shape_text, const char *pl_text,
                          int64_t want_total, int64_t want_max) {
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_ctx_options co = {0};
    ldt_plan *plan = NULL;
    ldt_shape s;
    ldt_placement pl[LDT_MAX_DIMS];
    int npl, nc = 0, reps[4096];
    int64_t counts[4096], sum = 0, total = 0, maxb = 0, rep_max = 0, all_total = 0;
    ldt_spec spec;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_shape_parse(shape_text, &s), LDT_OK);
    cr_assert_eq(ldt_placements_parse(pl_text, s.ndim, pl, LDT_MAX_DIMS, &npl), LDT_OK);
    ldt_tensor *w = ldt_param(ctx, "w", &s, LDT_F32);
    cr_assert_eq(ldt_pin(w, pl, npl), LDT_OK);
    ldt_tensor *y = ldt_relu(w);
    cr_assert_not_null(y);
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_rank_classes(plan, reps, counts, 4096, &nc), LDT_OK);
    cr_assert(nc >= 1 && nc <= ldt_mesh_nranks(mesh), "%s: %d classes", mesh_text, nc);
    cr_assert_eq(ldt_spec_init(&spec, mesh, &s, pl, npl, LDT_F32), LDT_OK);
    for (int i = 0; i < nc; i++) {
        ldt_region reg;
        sum += counts[i];
        cr_assert_eq(ldt_layout(&spec, reps[i], &reg), LDT_OK);
        total += counts[i] * reg.numel * 4;
        if (reg.numel * 4 > rep_max) rep_max = reg.numel * 4;
        for (int j = 0; j < i; j++) cr_assert_neq(reps[i], reps[j], "rank %d twice", reps[i]);
    }
    for (int i = 0; i < ldt_mesh_nranks(mesh); i++) {
        ldt_region reg;
        cr_assert_eq(ldt_layout(&spec, ldt_mesh_rank_at(mesh, i), &reg), LDT_OK);
        all_total += reg.numel * 4;
        if (reg.numel * 4 > maxb) maxb = reg.numel * 4;
    }
    cr_expect_eq(sum, ldt_mesh_nranks(mesh), "%s: the classes hold %lld ranks", mesh_text, (long long)sum);
    cr_expect_eq(total, all_total, "%s %s %s: weighted %lld, rank by rank %lld", mesh_text, shape_text,
                 pl_text, (long long)total, (long long)all_total);
    cr_expect_eq(rep_max, maxb, "%s: max %lld over classes, %lld over ranks", mesh_text, (long long)rep_max,
                 (long long)maxb);
    if (want_total) cr_expect_eq(all_total, want_total);
    if (want_max) cr_expect_eq(maxb, want_max);
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(redist_huge, rank_classes_weigh_to_every_rank) {
    check_classes("4", "7,5", "S0", 140, 40);          /* by hand: 2+2+2+1 rows of 20 bytes */
    check_classes("4", "8,5", "S0", 160, 40);
    check_classes("2x3", "7,5", "S0,S1", 140, 4 * 2 * 4); /* rows 4,3; cols 2,2,1 */
    check_classes("dp=2,tp=2", "9,6", "R,S0", 2 * 9 * 6 * 4, 5 * 6 * 4);
    check_classes("64x64", "1000,7", "S0,S1", 1000 * 7 * 4, 16 * 1 * 4);
    check_classes("1000", "999", "S0", 999 * 4, 4);    /* one element each, the last rank none */
}

/* ---- rank classes of a whole training plan against every rank's own program ---------------- */

/* A GPT training step (forward, gradients, AdamW), planned on mesh_text. */
static ldt_plan *train_plan_on(const char *mesh_text, ldt_device_type dev, const ldt_model_config *cfg,
                               ldt_mesh **mesh, ldt_ctx **ctx, ldt_model **m) {
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    ldt_optim *o = NULL;
    ldt_plan *plan = NULL;
    ldt_tensor *loss, *ps[64], *gs[64];
    int np;
    cr_assert_eq(ldt_mesh_parse(mesh_text, dev, mesh), LDT_OK);
    co.mesh = *mesh;
    cr_assert_eq(ldt_ctx_create(&co, ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(*ctx, "gpt", cfg, m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pin(*m, "megatron"), LDT_OK, "%s", ldt_last_error());
    cr_assert_not_null(loss = ldt_model_forward(*m), "%s", ldt_ctx_errmsg(*ctx));
    np = ldt_model_nparams(*m);
    cr_assert(np <= 64);
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(*m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW;
    oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.01;
    oc.clip_norm = 1.0, oc.total_steps = 1;
    cr_assert_eq(ldt_grad(loss, ps, np, gs), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_create(*ctx, &oc, ps, np, &o), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_step(o, gs), LDT_OK, "%s", ldt_last_error());
    ldt_optim_destroy(o);
    /* priced as DGX nodes: on cpu-threads 16 rank threads share 2 cores, compute weighs 8x
     * and the plan splits every op unevenly, leaving no two ranks alike to fold */
    ldt_cost_model cm;
    ldt_plan_options po = {0};
    cr_assert_eq(ldt_cost_model_preset("h100-80g", &cm), LDT_OK);
    po.cost = &cm;
    cr_assert_eq(ldt_plan_create(*ctx, &po, &plan), LDT_OK, "%s", ldt_last_error());
    return plan;
}

static ldt_plan *train_plan(const char *mesh_text, const ldt_model_config *cfg, ldt_mesh **mesh,
                            ldt_ctx **ctx, ldt_model **m) {
    return train_plan_on(mesh_text, LDT_DEVICE_CPU, cfg, mesh, ctx, m);
}

/* 1 when two programs hold the same values (local shapes, dtypes) and the same instructions
 * (kind, op, collective group, operands): what every per-rank figure is computed from. */
static int programs_alike(const ldt__program *a, const ldt__program *b) {
    if (a->nvals != b->nvals || a->nins != b->nins) return 0;
    for (int32_t v = 0; v < a->nvals; v++)
        if (!ldt_shape_equal(&a->vals[v].shape, &b->vals[v].shape) ||
            a->vals[v].dtype != b->vals[v].dtype)
            return 0;
    for (int64_t i = 0; i < a->nins; i++) {
        const ldt__instr *x = &a->ins[i], *y = &b->ins[i];
        if (x->kind != y->kind || x->op != y->op || x->out != y->out || x->nin != y->nin ||
            x->ndims != y->ndims || x->plan != y->plan)
            return 0;
    }
    return 1;
}

/* ldt_plan_rank_classes on whole training plans, against an explicit rank-by-rank
 * computation on 16 ranks (cheap both ways): every rank's own program is alike to a class
 * representative's, the class sizes weigh the representatives' arenas to the sum over every
 * rank, and the plan's totals (taken over the classes) are the maxima over every rank's
 * collective counts. Sizes are uneven on purpose (batch 3, seq 5, hidden 20, vocab 37 over
 * 2, 4 and 8: cuts at different coordinates, so a class missing one holds unlike ranks). */
Test(redist_huge, classes_match_every_rank_of_a_training_plan) {
    static const char *meshes[] = {"dp=4,tp=4", "dp=2,tp=8", "16", "dp=8,tp=2"};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    cfg.layers = 1, cfg.hidden = 20, cfg.heads = 2, cfg.vocab = 37, cfg.seq = 5, cfg.batch = 3;
    for (size_t mi = 0; mi < sizeof meshes / sizeof *meshes; mi++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_model *m;
        ldt_plan *plan = train_plan(meshes[mi], &cfg, &mesh, &ctx, &m);
        int nr = ldt_mesh_nranks(mesh), nc = 0, reps[16];
        int64_t counts[16], sum = 0, arena_all = 0, arena_cls = 0, colls = 0;
        ldt_plan_totals tot;
        cr_assert_eq(nr, 16);
        cr_assert_eq(ldt_plan_rank_classes(plan, reps, counts, 16, &nc), LDT_OK, "%s", ldt_last_error());
        cr_assert(nc >= 1 && nc < nr, "%s: %d classes of 16 ranks", meshes[mi], nc);
        for (int i = 0; i < nc; i++) {
            int64_t a;
            sum += counts[i];
            cr_assert_eq(ldt_plan_arena_bytes(plan, reps[i], &a), LDT_OK, "%s", ldt_last_error());
            arena_cls += counts[i] * a;
        }
        cr_expect_eq(sum, nr, "%s: the classes hold %lld ranks", meshes[mi], (long long)sum);
        for (int i = 0; i < nr; i++) {
            int r = ldt_mesh_rank_at(mesh, i), found = 0;
            int64_t a, c;
            ldt_status st;
            const ldt__program *p = ldt__plan_program(plan, r, &st);
            cr_assert_not_null(p, "%s", ldt_last_error());
            for (int j = 0; j < nc && !found; j++) {
                const ldt__program *q = ldt__plan_program(plan, reps[j], &st);
                cr_assert_not_null(q, "%s", ldt_last_error());
                found = programs_alike(p, q);
            }
            cr_expect(found, "%s: rank %d's program is like no class representative's", meshes[mi], r);
            cr_assert_eq(ldt_plan_arena_bytes(plan, r, &a), LDT_OK);
            arena_all += a;
            cr_assert_eq(ldt_plan_count(plan, LDT_COLL_COUNT, r, &c), LDT_OK);
            if (c > colls) colls = c;
        }
        cr_expect_eq(arena_cls, arena_all, "%s: arenas weighted by class %lld, rank by rank %lld",
                     meshes[mi], (long long)arena_cls, (long long)arena_all);
        cr_assert_eq(ldt_plan_totals_get(plan, &tot), LDT_OK);
        cr_expect_eq(tot.collectives, colls, "%s: %lld collectives by classes, %lld rank by rank",
                     meshes[mi], (long long)tot.collectives, (long long)colls);
        ldt_plan_destroy(plan);
        ldt_model_destroy(m);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}

/* The figures of one rank the slow way: its own program lowered and read instruction by
 * instruction (collectives, bytes and modeled seconds of every redistribution step and
 * all_reduce), and its static memory plan's arena. */
typedef struct slow_figs {
    int64_t colls, bytes, arena;
    double seconds;
} slow_figs;

static slow_figs slow_figures(ldt_plan *plan, const ldt_mesh *mesh, int rank) {
    slow_figs f = {0};
    ldt__program *p = NULL;
    ldt__mem_plan mp = {0};
    uint8_t *outside;
    cr_assert_eq(ldt__lower_program(plan, rank, &p), LDT_OK, "%s", ldt_last_error());
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_REDIST) {
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step st;
                cr_assert_eq(ldt_redist_plan_step(x->plan, s, &st), LDT_OK);
                f.colls += st.collective <= LDT_COLL_ALL_TO_ALL || st.collective == LDT_COLL_SEND_RECV;
                f.bytes += st.bytes_sent > st.bytes_recv ? st.bytes_sent : st.bytes_recv;
                f.seconds += st.seconds;
            }
        } else if (x->kind == LDT__I_ALL_REDUCE) {
            int64_t n = 1, b = ldt_dtype_size((ldt_dtype)p->vals[x->out].dtype);
            int dims[LDT_MAX_DIMS];
            for (int d = 0; d < x->ndims; d++) n *= ldt_mesh_dim_size(mesh, dims[d] = x->dims[d]);
            for (int d = 0; d < p->vals[x->out].shape.ndim; d++) b *= p->vals[x->out].shape.dims[d];
            if (n <= 1) continue;
            f.colls++;
            f.bytes += 2 * (n - 1) * b / n;
            f.seconds += ldt_cost_seconds(&plan->cost, mesh, x->ndims, dims, LDT_COLL_ALL_REDUCE,
                                          2 * (n - 1) * b / n, 0);
        }
    }
    cr_assert_not_null(outside = calloc((size_t)p->nvals + 1, 1));
    for (int64_t i = 0; i < p->nins; i++)
        if (p->ins[i].kind == LDT__I_LOAD && p->ins[i].src->op != LDT_OP_INPUT) outside[p->ins[i].out] = 1;
    cr_assert_eq(ldt__memory_plan(p, outside, NULL, &mp), LDT_OK);
    f.arena = mp.arena_bytes;
    ldt__mem_plan_free(&mp);
    free(outside);
    ldt__program_free(p);
    free(p);
    return f;
}

/* A training plan on a 4096-rank meta mesh: the totals and arenas found from one program
 * per distinct class equal the ones from lowering every class representative, and every
 * sampled rank's figures are those of one representative (uneven sizes: batch 9, vocab 5003,
 * so the classes are many and unlike). */
Test(redist_huge, class_figures_equal_lowering_every_class) {
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_plan *plan;
    ldt_plan_totals tot;
    slow_figs max = {0}, *figs;
    int nc = 0, *reps;
    int64_t *counts, sum = 0, arena_max = 0;
    uint64_t seed = 28;
    cfg.layers = 1, cfg.hidden = 64, cfg.heads = 4, cfg.vocab = 5003, cfg.seq = 24, cfg.batch = 9;
    plan = train_plan_on("dp=512,tp=8", LDT_DEVICE_META, &cfg, &mesh, &ctx, &m);
    cr_assert_eq(ldt_plan_totals_get(plan, &tot), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_rank_classes(plan, NULL, NULL, 0, &nc), LDT_OK);
    cr_assert(nc > 2 && nc < 4096, "%d classes", nc);
    reps = calloc((size_t)nc, sizeof *reps);
    counts = calloc((size_t)nc, sizeof *counts);
    figs = calloc((size_t)nc, sizeof *figs);
    cr_assert(reps && counts && figs);
    cr_assert_eq(ldt_plan_rank_classes(plan, reps, counts, nc, &nc), LDT_OK);
    for (int i = 0; i < nc; i++) {
        int64_t a;
        figs[i] = slow_figures(plan, mesh, reps[i]);
        sum += counts[i];
        if (figs[i].colls > max.colls) max.colls = figs[i].colls;
        if (figs[i].bytes > max.bytes) max.bytes = figs[i].bytes;
        if (figs[i].seconds > max.seconds) max.seconds = figs[i].seconds;
        cr_assert_eq(ldt_plan_arena_bytes(plan, reps[i], &a), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(a, figs[i].arena, "rank %d: arena %lld, lowered %lld", reps[i], (long long)a,
                     (long long)figs[i].arena);
        if (a > arena_max) arena_max = a;
    }
    cr_expect_eq(sum, 4096);
    cr_expect_eq(tot.collectives, max.colls, "collectives %lld, every class lowered %lld", (long long)tot.collectives,
                 (long long)max.colls);
    cr_expect_eq(tot.comm_bytes_per_rank, max.bytes, "bytes %lld, every class lowered %lld",
                 (long long)tot.comm_bytes_per_rank, (long long)max.bytes);
    cr_expect(fabs(tot.modeled_seconds - max.seconds) <= 1e-12 + 1e-9 * max.seconds, "seconds %.12g, lowered %.12g",
              tot.modeled_seconds, max.seconds);
    /* any rank: its figures are its class's, which are among the representatives' */
    for (int c = 0; c < ldt_test_cases(12); c++) {
        int r = (int)ldt_test_range(&seed, 0, 4095), found = 0;
        slow_figs f = slow_figures(plan, mesh, r);
        for (int i = 0; i < nc && !found; i++)
            found = f.colls == figs[i].colls && f.bytes == figs[i].bytes && f.arena == figs[i].arena;
        cr_expect(found, "rank %d: figures (%lld collectives, %lld bytes, arena %lld) of no class", r,
                  (long long)f.colls, (long long)f.bytes, (long long)f.arena);
        cr_expect(f.arena <= arena_max);
    }
    free(reps);
    free(counts);
    free(figs);
    ldt_plan_destroy(plan);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* ---- across meshes ------------------------------------------------------------------------ */

/* The send_recv step of src -> (to_mesh, to), or fails the test. */
static ldt_redist_step xmesh_step(const ldt_spec *src, const ldt_mesh *to_mesh, const ldt_placement *to,
                                  int nto) {
    ldt_redist_plan *p = NULL;
    ldt_redist_step s, found;
    int n = 0;
    cr_assert_eq(ldt_redist_plan_create(src, to_mesh, to, nto, NULL, &p), LDT_OK, "%s", ldt_last_error());
    memset(&found, 0, sizeof found);
    for (int i = 0; i < ldt_redist_plan_nsteps(p); i++) {
        cr_assert_eq(ldt_redist_plan_step(p, i, &s), LDT_OK);
        if (s.collective == LDT_COLL_SEND_RECV) found = s, n++;
    }
    ldt_redist_plan_destroy(p);
    cr_assert_eq(n, 1, "one send_recv step, got %d", n);
    return found;
}

/* [1048576,64] f32 S0 from 65,536 ranks to 32,768 (world ranks 0.. on both): a source holds
 * 16 rows (4096 B), a target 32 (8192 B), from sources 2b and 2b+1; rank 0's own rows stay
 * with it. The busiest rank sends 4096 B and receives 8192 B. Rank-by-rank pairs would be
 * 2^31 intersections; this must not take them. */
Test(redist_huge, cross_mesh_65536_to_32768) {
    ldt_mesh *a = mesh_of("65536"), *b = mesh_of("32768");
    ldt_shape sh = {2, {1048576, 64}};
    ldt_placement s0 = ldt_shard(0);
    ldt_spec X;
    ldt_redist_step s;
    cr_assert_eq(ldt_spec_init(&X, a, &sh, &s0, 1, LDT_F32), LDT_OK);
    s = xmesh_step(&X, b, &s0, 1);
    cr_expect_eq(s.bytes_sent, 4096);
    cr_expect_eq(s.bytes_recv, 8192);
    ldt_mesh_destroy(a);
    ldt_mesh_destroy(b);
}

/* [1048576,64] f32 from a 1024x1024 mesh to the same 1,048,576 ranks as one line; a target
 * b holds row b (256 B). From R,S0 (source (i,j) holds rows 1024j.. , replicated over i) the
 * replica serving b is i = b % 1024 (ldt__xmesh_is_source), so b takes its row from rank
 * (b % 1024) * 1024 + b / 1024: itself on the diagonal, else another rank, which serves no
 * other target: 256 B sent and received at most. From S0,R rank b's server is b itself:
 * nothing moves. A source replicated 1024 times must cost one lookup per target, not 1024
 * (the test's share of CI stays about a second). */
Test(redist_huge, cross_mesh_1024x1024_to_1048576) {
    ldt_mesh *a = mesh_of("1024x1024"), *b = mesh_of("1048576");
    ldt_shape sh = {2, {1048576, 64}};
    ldt_placement rs[2] = {ldt_replicate(), ldt_shard(0)}, sr[2] = {ldt_shard(0), ldt_replicate()};
    ldt_placement s0 = ldt_shard(0);
    ldt_spec X;
    ldt_redist_step s;
    cr_assert_eq(ldt_spec_init(&X, a, &sh, rs, 2, LDT_F32), LDT_OK);
    s = xmesh_step(&X, b, &s0, 1);
    cr_expect_eq(s.bytes_sent, 256);
    cr_expect_eq(s.bytes_recv, 256);
    cr_assert_eq(ldt_spec_init(&X, a, &sh, sr, 2, LDT_F32), LDT_OK);
    s = xmesh_step(&X, b, &s0, 1);
    cr_expect_eq(s.bytes_sent, 0);
    cr_expect_eq(s.bytes_recv, 0);
    ldt_mesh_destroy(a);
    ldt_mesh_destroy(b);
}

/* Random cross-mesh moves on small meshes (uneven, interleaved and replicated sources, meshes
 * with shared and with disjoint ranks) against every (source, target) pair counted here: a
 * target takes each element from the one replica ldt__xmesh_is_source names, a rank on both
 * meshes keeps what it holds. */
Test(redist_huge, cross_mesh_matches_every_pair) {
    static const char *meshes[] = {"4", "6", "2x3", "3x2", "2x2x2", "5", "[[0,2],[1,3]]", "[[4,5],[6,7]]", "3"};
    uint64_t rng = 0xc055;
    int checked = 0;
    for (int t = 0; t < ldt_test_cases(200); t++) {
        ldt_mesh *ma = mesh_of(meshes[ldt_test_range(&rng, 0, 8)]), *mb = mesh_of(meshes[ldt_test_range(&rng, 0, 8)]);
        int na = ldt_mesh_ndim(ma), nb = ldt_mesh_ndim(mb);
        ldt_shape sh;
        ldt_placement pa[3], pb[3];
        ldt_spec X, Y;
        ldt_redist_step s;
        int64_t sent[16] = {0}, recv[16] = {0}, ms = 0, mr = 0, ca[LDT_MAX_DIMS], cb[LDT_MAX_DIMS];
        sh.ndim = (int)ldt_test_range(&rng, 1, 3);
        for (int d = 0; d < sh.ndim; d++) sh.dims[d] = ldt_test_range(&rng, 1, 13);
        for (int i = 0; i < na; i++) {
            pa[i] = random_placement(&rng, sh.ndim);
            if (pa[i].kind == LDT_PLACE_PARTIAL) pa[i] = ldt_replicate();
        }
        for (int i = 0; i < nb; i++) {
            pb[i] = random_placement(&rng, sh.ndim);
            if (pb[i].kind == LDT_PLACE_PARTIAL) pb[i] = ldt_replicate();
        }
        if (ldt_spec_init(&X, ma, &sh, pa, na, LDT_F32) != LDT_OK ||
            ldt_spec_init(&Y, mb, &sh, pb, nb, LDT_F32) != LDT_OK || ldt_mesh_equal(ma, mb)) {
            ldt_clear_error();
            ldt_mesh_destroy(ma);
            ldt_mesh_destroy(mb);
            continue;
        }
        for (int q = 0; q < ldt_mesh_nranks(mb); q++) {
            ldt_region rb;
            int64_t rem = q;
            for (int i = nb - 1; i >= 0; i--) cb[i] = rem % ldt_mesh_dim_size(mb, i), rem /= ldt_mesh_dim_size(mb, i);
            cr_assert_eq(ldt_layout_coord(&Y, cb, &rb), LDT_OK);
            for (int p = 0; p < ldt_mesh_nranks(ma); p++) {
                ldt_region ra;
                int wa = ldt_mesh_rank_at(ma, p), wb = ldt_mesh_rank_at(mb, q);
                int64_t n;
                rem = p;
                for (int i = na - 1; i >= 0; i--) ca[i] = rem % ldt_mesh_dim_size(ma, i), rem /= ldt_mesh_dim_size(ma, i);
                if (wa == wb || !ldt__xmesh_is_source(&X, q, ca)) continue;
                cr_assert_eq(ldt_layout_coord(&X, ca, &ra), LDT_OK);
                n = ldt__region_isect_numel(&ra, &rb);
                sent[wa] += n;
                recv[wb] += n;
            }
        }
        for (int w = 0; w < 16; w++) {
            if (sent[w] > ms) ms = sent[w];
            if (recv[w] > mr) mr = recv[w];
        }
        s = xmesh_step(&X, mb, pb, nb);
        cr_expect(s.bytes_sent == 4 * ms && s.bytes_recv == 4 * mr,
                  "case %d: sent %lld recv %lld, every pair gives %lld and %lld", t, (long long)s.bytes_sent,
                  (long long)s.bytes_recv, (long long)(4 * ms), (long long)(4 * mr));
        checked++;
        ldt_mesh_destroy(ma);
        ldt_mesh_destroy(mb);
    }
    cr_expect_gt(checked, ldt_test_cases(200) / 3, "only %d cases checked", checked);
}

/* The DOT's "(uneven)" on a node's local shape (some rank's differs from the first rank's) is
 * decided from one rank per class of ranks alike (it looked at every rank: a 2^24-rank mesh
 * ran past two minutes); against every rank's layout of every node's output, where some nodes
 * are uneven and some are not. */
static void check_dot_uneven(ldt_plan *plan, ldt_ctx *ctx, const ldt_mesh *mesh, const char *name) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int nr = ldt_mesh_nranks(mesh), nuneven = 0, neven = 0;
    cr_assert_not_null(f);
    cr_assert_eq(ldt_plan_write_dot(plan, f), LDT_OK, "%s", ldt_last_error());
    fclose(f);
    for (int64_t v = 0; v < ctx->nnodes; v++) {
        ldt_tensor *t = ctx->nodes[v];
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_shape s;
        ldt_spec spec;
        ldt_region r0, r;
        char key[48];
        const char *line, *end, *mark;
        int uneven = 0;
        ldt_tensor_shape(t, &s);
        cr_assert_eq(ldt_plan_placements(plan, t, pl, LDT_MAX_DIMS), LDT_OK);
        cr_assert_eq(ldt_spec_init(&spec, mesh, &s, pl, ldt_mesh_ndim(mesh), ldt_tensor_dtype(t)), LDT_OK);
        cr_assert_eq(ldt_layout(&spec, ldt_mesh_rank_at(mesh, 0), &r0), LDT_OK);
        for (int i = 1; i < nr; i++) {
            cr_assert_eq(ldt_layout(&spec, ldt_mesh_rank_at(mesh, i), &r), LDT_OK);
            for (int d = 0; d < r.ndim; d++) uneven |= r.local_shape.dims[d] != r0.local_shape.dims[d];
        }
        snprintf(key, sizeof key, "\n  n%lld [label=", (long long)v);
        cr_assert_not_null(line = strstr(text, key), "%s: node %lld has no label", name, (long long)v);
        end = strchr(line + 1, '\n');
        mark = strstr(line, " (uneven)\"");
        cr_expect_eq(mark != NULL && mark < end, uneven, "%s: node %lld is %s, the DOT says otherwise: %.*s",
                     name, (long long)v, uneven ? "uneven" : "even", (int)(end - line), line);
        nuneven += uneven;
        neven += !uneven;
    }
    cr_expect(nuneven > 0 && neven > 0, "%s: %d uneven, %d even nodes", name, nuneven, neven);
    free(text);
}

/* ldt_plan_memory_get takes the most parameter bytes any rank holds from one rank per class
 * (it laid out every rank: a 2^24-rank meta-init took minutes); against every rank's shards of
 * every parameter node (the model's and Adam's states) laid out one by one, on meshes whose
 * chunks are uneven (vocab 37, hidden 20 over 5, 3, 8, 7); the same plans' DOT too. */
Test(redist_huge, parameter_memory_and_dot_by_classes_match_every_rank) {
    static const char *meshes[] = {"dp=5,tp=3", "dp=2,tp=8", "7"};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    cfg.layers = 1, cfg.hidden = 20, cfg.heads = 2, cfg.vocab = 37, cfg.seq = 5, cfg.batch = 3;
    for (size_t mi = 0; mi < sizeof meshes / sizeof *meshes; mi++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_model *m;
        ldt_plan *plan = train_plan_on(meshes[mi], LDT_DEVICE_META, &cfg, &mesh, &ctx, &m);
        ldt_plan_memory mem;
        int nr = ldt_mesh_nranks(mesh), nc = 0;
        int64_t most_bytes = 0, most_elems = 0, all = 0;
        cr_assert_eq(ldt_plan_rank_classes(plan, NULL, NULL, 0, &nc), LDT_OK);
        cr_assert_eq(ldt_plan_memory_get(plan, &mem), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < nr; i++) {
            int64_t b = 0, e = 0;
            for (int64_t k = 0; k < ctx->nnodes; k++) { /* the parameters and Adam's states */
                ldt_tensor *w = ctx->nodes[k];
                ldt_placement pl[LDT_MAX_DIMS];
                ldt_shape s;
                ldt_spec spec;
                ldt_region reg;
                if (w->kind != LDT__PERSISTENT || w->op != LDT_OP_PARAM) continue;
                ldt_tensor_shape(w, &s);
                cr_assert_eq(ldt_plan_placements(plan, w, pl, LDT_MAX_DIMS), LDT_OK);
                cr_assert_eq(ldt_spec_init(&spec, mesh, &s, pl, ldt_mesh_ndim(mesh), ldt_tensor_dtype(w)), LDT_OK);
                cr_assert_eq(ldt_layout(&spec, ldt_mesh_rank_at(mesh, i), &reg), LDT_OK);
                e += reg.numel;
                b += reg.numel * (int64_t)ldt_dtype_size(ldt_tensor_dtype(w));
                if (i == 0) {
                    int64_t n = 1;
                    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
                    all += n;
                }
            }
            if (b > most_bytes) most_bytes = b;
            if (e > most_elems) most_elems = e;
        }
        cr_expect(nc < nr, "%s: %d classes of %d ranks (nothing folded)", meshes[mi], nc, nr);
        cr_expect_eq(mem.per_rank_param_bytes_max, most_bytes, "%s: %lld bytes by classes, %lld rank by rank",
                     meshes[mi], (long long)mem.per_rank_param_bytes_max, (long long)most_bytes);
        cr_expect_eq(mem.per_rank_param_elems_max, most_elems, "%s", meshes[mi]);
        cr_expect_eq(mem.params, all, "%s: %lld parameters, %lld", meshes[mi], (long long)mem.params, (long long)all);
        check_dot_uneven(plan, ctx, mesh, meshes[mi]);
        ldt_plan_destroy(plan);
        ldt_model_destroy(m);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}
