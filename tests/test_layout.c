/* The layout function against a brute-force owner assignment, over thousands of random
 * meshes, shapes and placements, plus hand-derived cases and error paths. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/core.h"
#include "tests/layout_ref.h"

/* Global flat index of local flat index li, through the region's runs (the documented rule). */
static int64_t global_of_local(const ldt_region *r, const ldt_shape *shape, int64_t li) {
    int64_t g = 0, stride = 1;
    for (int d = r->ndim - 1; d >= 0; d--) {
        int64_t i = li % r->local_shape.dims[d];
        li /= r->local_shape.dims[d];
        g += ((i / r->runs[d].len) * r->runs[d].block_stride + r->runs[d].start +
              i % r->runs[d].len) *
             stride;
        stride *= shape->dims[d];
    }
    return g;
}

Test(layout, matches_brute_force_reference) {
    uint64_t rng = 2024;
    int cases = ldt_test_cases(6000);
    int64_t *want = malloc(10000 * sizeof *want);
    for (int c = 0; c < cases; c++) {
        ldt_mesh *mesh;
        ldt_spec spec;
        ref_random_spec(&rng, 1, LDT_F32, &mesh, &spec);
        for (int p = 0; p < ldt_mesh_nranks(mesh); p++) {
            int rank = ldt_mesh_rank_at(mesh, p);
            int64_t coord[LDT_MAX_DIMS], n;
            ldt_region r;
            char sbuf[128];
            cr_assert_eq(ldt_mesh_coord(mesh, rank, coord), LDT_OK);
            cr_assert_eq(ldt_layout(&spec, rank, &r), LDT_OK, "%s", ldt_last_error());
            n = ref_owned(&spec, coord, want);
            ldt_spec_format(&spec, sbuf, sizeof sbuf);
            cr_assert_eq(r.numel, n, "case %d %s rank %d: holds %lld, reference %lld", c, sbuf,
                         rank, (long long)r.numel, (long long)n);
            for (int64_t i = 0; i < n; i++) {
                int64_t g = global_of_local(&r, &spec.shape, i);
                cr_assert_eq(g, want[i], "case %d %s rank %d: local %lld is global %lld, want %lld",
                             c, sbuf, rank, (long long)i, (long long)g, (long long)want[i]);
            }
            /* slices tile the region in local order */
            {
                int64_t total = 0, off[LDT_MAX_DIMS], sh[LDT_MAX_DIMS];
                for (int64_t k = 0; k < r.nslices; k++) {
                    int64_t vol = 1;
                    cr_assert_eq(ldt_region_slice(&r, k, off, sh), LDT_OK);
                    for (int d = 0; d < r.ndim; d++) vol *= sh[d];
                    total += vol;
                }
                cr_assert_eq(total, r.numel, "case %d %s rank %d: slices", c, sbuf, rank);
            }
        }
        ldt_mesh_destroy(mesh);
    }
    free(want);
}

static ldt_region layout_of(const char *mesh_text, const char *shape_text, const char *pl_text,
                            int rank) {
    ldt_mesh *m;
    ldt_shape s;
    ldt_placement p[8];
    ldt_spec spec;
    ldt_region r;
    int n;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, &m), LDT_OK);
    cr_assert_eq(ldt_shape_parse(shape_text, &s), LDT_OK);
    cr_assert_eq(ldt_placements_parse(pl_text, s.ndim, p, 8, &n), LDT_OK);
    cr_assert_eq(ldt_spec_init(&spec, m, &s, p, n, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_layout(&spec, rank, &r), LDT_OK, "%s", ldt_last_error());
    ldt_mesh_destroy(m);
    return r;
}

Test(layout, hand_derived_cases) {
    /* 5 over 4 ranks: 2,2,1,0 (torch.chunk) */
    static const int64_t len5[4] = {2, 2, 1, 0}, off5[4] = {0, 2, 4, 5};
    for (int r = 0; r < 4; r++) {
        ldt_region reg = layout_of("4", "5", "S0", r);
        cr_expect_eq(reg.local_shape.dims[0], len5[r], "rank %d", r);
        cr_expect_eq(reg.offset[0], off5[r], "rank %d", r);
    }
    /* 7x5 on 2x3 (S0,S1): rank 5 = [1,2] holds rows 4..6, col 4 */
    {
        ldt_region reg = layout_of("2x3", "7,5", "S0,S1", 5);
        cr_expect(reg.local_shape.dims[0] == 3 && reg.local_shape.dims[1] == 1);
        cr_expect(reg.offset[0] == 4 && reg.offset[1] == 4);
    }
    /* nested: 10 rows over (S0,S0) on 2x2: outer halves 5,5, then 3,2 each */
    {
        static const int64_t len[4] = {3, 2, 3, 2}, off[4] = {0, 3, 5, 8};
        for (int r = 0; r < 4; r++) {
            ldt_region reg = layout_of("2x2", "10", "S0,S0", r);
            cr_expect(reg.local_shape.dims[0] == len[r] && reg.offset[0] == off[r], "rank %d", r);
        }
    }
    /* merged QKV: 12 rows as 3 blocks of 4 over 2 ranks: rank 1 holds rows 2,3,6,7,10,11 */
    {
        ldt_region reg = layout_of("2", "12,2", "IS0:3", 1);
        int64_t off[2], sh[2];
        cr_expect_eq(reg.local_shape.dims[0], 6);
        cr_expect_eq(reg.nslices, 3);
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(ldt_region_slice(&reg, k, off, sh), LDT_OK);
            cr_expect(off[0] == 2 + 4 * k && sh[0] == 2 && off[1] == 0 && sh[1] == 2, "slice %d",
                      k);
        }
        cr_expect_eq(ldt_region_slice(&reg, 3, off, sh), LDT_ERR_INVALID_ARGUMENT);
    }
    /* Replicate and Partial hold everything; a 0-dim tensor is one element */
    {
        ldt_region reg = layout_of("2x2", "3,3", "R,P", 3);
        cr_expect(reg.numel == 9 && reg.offset[0] == 0);
        reg = layout_of("4", "", "R", 2);
        cr_expect(reg.ndim == 0 && reg.numel == 1);
    }
    /* explicit rank order: rank 1 sits at coordinate [1,0] of [[0,2],[1,3]] */
    {
        ldt_region reg = layout_of("[[0,2],[1,3]]", "4,4", "S0,S1", 1);
        cr_expect(reg.offset[0] == 2 && reg.offset[1] == 0);
    }
}

Test(layout, errors) {
    ldt_mesh *m;
    ldt_shape s = {2, {4, 4}};
    ldt_placement p[2] = {ldt_shard(0), ldt_replicate()};
    ldt_spec spec;
    ldt_region r;
    int64_t coord[2] = {0, 2};
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_spec_init(&spec, m, &s, p, 2, LDT_F32), LDT_OK);
    cr_expect_eq(ldt_layout(&spec, 4, &r), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rank 4 is not in mesh 2x2") != NULL, "%s",
              ldt_last_error());
    cr_expect_eq(ldt_layout_coord(&spec, coord, &r), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "coordinate 2 on mesh dim 1") != NULL, "%s",
              ldt_last_error());
    spec.placements[0].dim = 5; /* corrupted by hand */
    cr_expect_eq(ldt_layout(&spec, 0, &r), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "shards tensor dim 5") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_layout(NULL, 0, &r), LDT_ERR_INVALID_ARGUMENT);
    ldt_mesh_destroy(m);
}

Test(layout, chunk_rule) {
    int64_t s, l;
    ldt_chunk(0, 4, 2, &s, &l);
    cr_expect(s == 0 && l == 0);
    ldt_chunk(3, 8, 2, &s, &l); /* ceil(3/8) = 1: ranks 0..2 one each, the rest empty */
    cr_expect(s == 2 && l == 1);
    ldt_chunk(3, 8, 5, &s, &l);
    cr_expect(s == 3 && l == 0);
    ldt_chunk(10, 4, 3, &s, &l); /* chunks of 3: 3,3,3,1 */
    cr_expect(s == 9 && l == 1);
}
