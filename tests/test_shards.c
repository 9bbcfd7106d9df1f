/* ldt_shards: distribute / full_tensor / from_local / to_local against the brute-force layout
 * reference and hand-derived Partial cases. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/exec.h"
#include "tests/layout_ref.h"

static const ldt_dtype k_dtypes[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                     LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};

/* Small integer values, exact in every dtype: element i holds i % 7 (bool: i % 2). */
static void fill_pattern(void *buf, int64_t n, ldt_dtype dt) {
    for (int64_t i = 0; i < n; i++) {
        int v = dt == LDT_BOOL ? (int)(i % 2) : (int)(i % 7);
        switch (dt) {
        case LDT_F32: ((float *)buf)[i] = (float)v; break;
        case LDT_F64: ((double *)buf)[i] = v; break;
        case LDT_F16: ((uint16_t *)buf)[i] = ldt_f32_to_f16((float)v); break;
        case LDT_BF16: ((uint16_t *)buf)[i] = ldt_f32_to_bf16((float)v); break;
        case LDT_I32: ((int32_t *)buf)[i] = v; break;
        case LDT_I64: ((int64_t *)buf)[i] = v; break;
        default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
        }
    }
}

Test(shards, distribute_matches_reference_and_round_trips) {
    uint64_t rng = 99;
    int cases = ldt_test_cases(1500);
    int64_t *owned = malloc(10000 * sizeof *owned);
    for (int c = 0; c < cases; c++) {
        ldt_dtype dt = k_dtypes[c % 8];
        size_t es = ldt_dtype_size(dt);
        ldt_mesh *mesh;
        ldt_spec spec;
        ldt_shards *sh;
        int64_t numel;
        char *full, *back;
        char sbuf[128];
        /* Partial avg with bool is refused by the reducer; keep Partial to the other dtypes */
        ref_random_spec(&rng, dt != LDT_BOOL, dt, &mesh, &spec);
        ldt_spec_format(&spec, sbuf, sizeof sbuf);
        cr_assert_eq(ldt_shape_numel(&spec.shape, &numel), LDT_OK);
        full = malloc((size_t)numel * es + 1);
        back = malloc((size_t)numel * es + 1);
        fill_pattern(full, numel, dt);
        memset(back, 0x5a, (size_t)numel * es);
        cr_assert_eq(ldt_distribute(full, &spec, &sh), LDT_OK, "%s: %s", sbuf, ldt_last_error());
        for (int p = 0; p < ldt_mesh_nranks(mesh); p++) {
            int rank = ldt_mesh_rank_at(mesh, p), zero = 0;
            int64_t coord[LDT_MAX_DIMS], nb, n;
            const char *local = ldt_shards_local(sh, rank, &nb);
            ldt_mesh_coord(mesh, rank, coord);
            n = ref_owned(&spec, coord, owned);
            cr_assert_eq(nb, n * (int64_t)es, "case %d %s rank %d: %lld bytes", c, sbuf, rank,
                         (long long)nb);
            for (int i = 0; i < spec.nplace; i++)
                zero |= spec.placements[i].kind == LDT_PLACE_PARTIAL &&
                        spec.placements[i].op == LDT_REDUCE_SUM && coord[i] != 0;
            for (int64_t i = 0; i < n; i++) {
                char want[8] = {0};
                if (!zero) memcpy(want, full + owned[i] * (int64_t)es, es);
                cr_assert(memcmp(local + i * (int64_t)es, want, es) == 0,
                          "case %d %s rank %d: local %lld differs from global %lld", c, sbuf, rank,
                          (long long)i, (long long)owned[i]);
            }
        }
        cr_assert_eq(ldt_full_tensor(sh, back), LDT_OK, "%s: %s", sbuf, ldt_last_error());
        for (int64_t i = 0; i < numel; i++)
            cr_assert(memcmp(back + i * (int64_t)es, full + i * (int64_t)es, es) == 0,
                      "case %d %s: element %lld differs after the round trip", c, sbuf,
                      (long long)i);
        ldt_shards_destroy(sh);
        free(full);
        free(back);
        ldt_mesh_destroy(mesh);
    }
    free(owned);
}

/* Partial values set by hand: full_tensor reduces them in coordinate order. */
Test(shards, partial_reductions_by_hand) {
    static const struct {
        const char *pl;
        float want;
    } rows[] = {{"P", 1 + 2 + 3 + 4}, {"Pavg", (1 + 2 + 3 + 4) / 4.0f}, {"Pmax", 4}, {"Pmin", 1}};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        ldt_mesh *m;
        ldt_shape s = {1, {3}};
        ldt_placement p[1];
        ldt_spec spec;
        ldt_shards *sh;
        float locals[4][3], full[3];
        const void *ptrs[4];
        int n;
        cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &m), LDT_OK);
        cr_assert_eq(ldt_placements_parse(rows[k].pl, 1, p, 1, &n), LDT_OK);
        cr_assert_eq(ldt_spec_init(&spec, m, &s, p, 1, LDT_F32), LDT_OK);
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < 3; i++) locals[r][i] = (float)(r + 1) * (float)(i + 1);
            ptrs[r] = locals[r];
        }
        cr_assert_eq(ldt_from_local(&spec, ptrs, &sh), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_full_tensor(sh, full), LDT_OK);
        for (int i = 0; i < 3; i++)
            cr_expect_float_eq(full[i], rows[k].want * (float)(i + 1), 1e-6, "%s [%d] = %g",
                               rows[k].pl, i, full[i]);
        ldt_shards_destroy(sh);
        ldt_mesh_destroy(m);
    }
    /* sum with avg on a 2x2 mesh: sum over dim 0 of the avg over dim 1 */
    {
        ldt_mesh *m;
        ldt_shape s = {0, {0}};
        ldt_placement p[2] = {ldt_partial(LDT_REDUCE_SUM), ldt_partial(LDT_REDUCE_AVG)};
        ldt_spec spec;
        ldt_shards *sh;
        double v[4] = {1, 3, 10, 30}, full; /* avg(1,3) + avg(10,30) = 2 + 20 */
        const void *ptrs[4] = {&v[0], &v[1], &v[2], &v[3]};
        cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &m), LDT_OK);
        cr_assert_eq(ldt_spec_init(&spec, m, &s, p, 2, LDT_F64), LDT_OK);
        cr_assert_eq(ldt_from_local(&spec, ptrs, &sh), LDT_OK);
        cr_assert_eq(ldt_full_tensor(sh, &full), LDT_OK);
        cr_expect_eq(full, 22.0, "%g", full);
        ldt_shards_destroy(sh);
        ldt_mesh_destroy(m);
    }
}

Test(shards, from_local_to_local_round_trip) {
    ldt_mesh *m;
    ldt_shape s = {2, {5, 3}};
    ldt_placement p[2] = {ldt_shard(0), ldt_replicate()};
    ldt_spec spec;
    ldt_shards *sh;
    int32_t data[4][15], out[15];
    const void *ptrs[4];
    cr_assert_eq(ldt_mesh_parse("[[3,1],[0,2]]", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_spec_init(&spec, m, &s, p, 2, LDT_I32), LDT_OK);
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 15; j++) data[i][j] = 100 * i + j;
        ptrs[i] = data[i];
    }
    cr_assert_eq(ldt_from_local(&spec, ptrs, &sh), LDT_OK, "%s", ldt_last_error());
    /* rank 0 is mesh position 2 = coordinate [1,0]: rows 3..4 (2 rows x 3) */
    cr_assert_eq(ldt_to_local(sh, 0, out, 6 * 4), LDT_OK, "%s", ldt_last_error());
    for (int j = 0; j < 6; j++) cr_expect_eq(out[j], 200 + j);
    cr_expect_eq(ldt_to_local(sh, 0, out, 4), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "holds 24 bytes") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_to_local(sh, 7, out, 24), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rank 7 is not in mesh") != NULL, "%s", ldt_last_error());
    cr_expect_null(ldt_shards_local(sh, 9, NULL));
    cr_expect_eq(ldt_shards_spec(sh)->dtype, LDT_I32);
    ldt_shards_destroy(sh);
    ptrs[1] = NULL;
    cr_expect_eq(ldt_from_local(&spec, ptrs, &sh), LDT_ERR_INVALID_ARGUMENT);
    ldt_mesh_destroy(m);
}

Test(shards, meta_mesh_and_bad_specs_refused) {
    ldt_mesh *m;
    ldt_shape s = {1, {4}};
    ldt_placement p[1] = {ldt_shard(0)};
    ldt_spec spec;
    ldt_shards *sh = (ldt_shards *)1;
    float full[4] = {0};
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_META, &m), LDT_OK);
    cr_assert_eq(ldt_spec_init(&spec, m, &s, p, 1, LDT_F32), LDT_OK);
    cr_expect_eq(ldt_distribute(full, &spec, &sh), LDT_ERR_INVALID_USAGE);
    cr_expect(strstr(ldt_last_error(), "meta mesh") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_shards_create(NULL, &sh), LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_full_tensor(NULL, full), LDT_ERR_INVALID_ARGUMENT);
    spec.nplace = 2; /* corrupted by hand */
    cr_expect_eq(ldt_shards_create(&spec, &sh), LDT_ERR_INVALID_ARGUMENT);
    ldt_mesh_destroy(m);
}
