/* Sharding notations of other systems: ColossalAI/Alpa, torch_xla partition specs, HLO
 * sharding strings; seeds, hand-derived blocks, random round trips, errors, `ldt spec`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "tests/cli_run.h"

#include "ldt/core.h"
#include "test_util.h"

/* A spec from text, asserting it builds. The mesh is kept in *mesh for the caller to free. */
static ldt_spec make_spec(const char *mesh_text, const char *shape_text, const char *pl_text,
                          ldt_mesh **mesh) {
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec spec;
    int n;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, mesh), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_shape_parse(shape_text, &shape), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(pl_text, shape.ndim, pl, LDT_MAX_DIMS, &n), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt_spec_init(&spec, *mesh, &shape, pl, n, LDT_F32), LDT_OK, "%s",
                 ldt_last_error());
    return spec;
}

static const char *fmt_pl(const ldt_placement *pl, int n) {
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    ldt_placements_format(pl, n, buf[k], sizeof buf[k]);
    return buf[k];
}

/* ---- the seed: R,S0 on a (2,4) mesh, 3-D tensor ----------------------------------------- */

Test(notation, seed_2x4_R_S0) {
    ldt_mesh *mesh;
    ldt_spec spec = make_spec("2x4", "4,8,8", "R,S0", &mesh);
    ldt_placement back[LDT_MAX_DIMS];
    char buf[256];
    size_t need = 0;
    int n;
    cr_assert_eq(ldt_colossal_format(spec.placements, spec.nplace, 3, buf, sizeof buf, &need), LDT_OK);
    cr_expect_str_eq(buf, "[S1,R,R]");
    cr_expect_eq(need, strlen("[S1,R,R]"));
    cr_assert_eq(ldt_xla_format(spec.placements, spec.nplace, 3, buf, sizeof buf, NULL), LDT_OK);
    cr_expect_str_eq(buf, "(1, None, None)");
    cr_assert_eq(ldt_hlo_sharding_format(&spec, buf, sizeof buf, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(buf, "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}");
    /* and back */
    cr_assert_eq(ldt_xla_parse("(1, None, None)", 2, 3, back, LDT_MAX_DIMS, &n), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(n, 2);
    cr_expect_str_eq(fmt_pl(back, n), "R,S0");
    cr_assert_eq(ldt_xla_parse("(1,None,None)", 2, 3, back, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(back, n), "R,S0");
    cr_assert_eq(ldt_colossal_parse("[S1,R,R]", 2, 3, back, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(back, n), "R,S0");
    ldt_mesh_destroy(mesh);
}

/* ---- ColossalAI's README: a 4x4 matrix on a 2x2 mesh ------------------------------------ */

/* rank (i,j) of a 2x2 mesh holds rows [r0,r0+rl) and cols [c0,c0+cl) */
typedef struct block {
    int64_t r0, rl, c0, cl;
} block;

static void expect_blocks(const char *colossal, const char *ours, const block want[4]) {
    ldt_mesh *mesh;
    ldt_shape shape = ldt_test_shape(2, 4, 4);
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec spec;
    char buf[64];
    int n;
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_META, &mesh), LDT_OK);
    cr_assert_eq(ldt_colossal_parse(colossal, 2, 2, pl, LDT_MAX_DIMS, &n), LDT_OK, "%s: %s",
                 colossal, ldt_last_error());
    cr_expect_str_eq(fmt_pl(pl, n), ours, "%s", colossal);
    cr_assert_eq(ldt_spec_init(&spec, mesh, &shape, pl, n, LDT_F32), LDT_OK);
    cr_assert_eq(ldt_colossal_format(pl, n, 2, buf, sizeof buf, NULL), LDT_OK);
    cr_expect_str_eq(buf, colossal);
    for (int r = 0; r < 4; r++) {
        ldt_region reg;
        cr_assert_eq(ldt_layout(&spec, r, &reg), LDT_OK);
        cr_expect(reg.runs[0].start == want[r].r0 && reg.runs[0].len == want[r].rl &&
                      reg.runs[1].start == want[r].c0 && reg.runs[1].len == want[r].cl,
                  "%s rank %d (%d,%d): rows [%lld,+%lld) cols [%lld,+%lld), expected rows "
                  "[%lld,+%lld) cols [%lld,+%lld)",
                  colossal, r, r / 2, r % 2, (long long)reg.runs[0].start,
                  (long long)reg.runs[0].len, (long long)reg.runs[1].start,
                  (long long)reg.runs[1].len, (long long)want[r].r0, (long long)want[r].rl,
                  (long long)want[r].c0, (long long)want[r].cl);
    }
    ldt_mesh_destroy(mesh);
}

Test(notation, colossal_readme_4x4_on_2x2) {
    /* [S0,R]: rows in 2 over mesh dim 0; both ranks of a mesh row hold the same 2x4 block */
    static const block s0r[4] = {{0, 2, 0, 4}, {0, 2, 0, 4}, {2, 2, 0, 4}, {2, 2, 0, 4}};
    /* [S01,R]: rows in 4 over mesh dims 0 then 1; rank (i,j) holds row block 2i+j, 1x4 */
    static const block s01r[4] = {{0, 1, 0, 4}, {1, 1, 0, 4}, {2, 1, 0, 4}, {3, 1, 0, 4}};
    /* [R,S1]: cols in 2 over mesh dim 1; rank (i,j) holds cols [2j,2j+2), 4x2 */
    static const block rs1[4] = {{0, 4, 0, 2}, {0, 4, 2, 2}, {0, 4, 0, 2}, {0, 4, 2, 2}};
    /* [S0,S1]: 2x2 blocks, rank (i,j) at rows 2i, cols 2j */
    static const block s0s1[4] = {{0, 2, 0, 2}, {0, 2, 2, 2}, {2, 2, 0, 2}, {2, 2, 2, 2}};
    expect_blocks("[S0,R]", "S0,R", s0r);
    expect_blocks("[S01,R]", "S0,S0", s01r);
    expect_blocks("[R,S1]", "R,S1", rs1);
    expect_blocks("[S0,S1]", "S0,S1", s0s1);
}

Test(notation, forms_and_spellings) {
    ldt_placement pl[LDT_MAX_DIMS];
    char buf[128];
    int n;
    /* Alpa's compact form, ColossalAI's spaced form, a 3-D mesh on one dim */
    cr_assert_eq(ldt_colossal_parse("S01R", 2, 2, pl, LDT_MAX_DIMS, &n), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(fmt_pl(pl, n), "S0,S0");
    cr_assert_eq(ldt_colossal_parse(" [ S1 , R ] ", 2, 2, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "R,S0");
    cr_assert_eq(ldt_colossal_parse("[R,S012]", 3, -1, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "S1,S1,S1");
    cr_assert_eq(ldt_xla_format(pl, n, 2, buf, sizeof buf, NULL), LDT_OK);
    cr_expect_str_eq(buf, "(None, (0, 1, 2))");
    cr_assert_eq(ldt_colossal_parse("[R,R,R]", 2, 3, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "R,R");
    /* one tensor dim: Python needs the trailing comma */
    pl[0] = ldt_shard(0);
    cr_assert_eq(ldt_xla_format(pl, 1, 1, buf, sizeof buf, NULL), LDT_OK);
    cr_expect_str_eq(buf, "(0,)");
    cr_assert_eq(ldt_xla_parse("(0,)", 1, 1, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "S0");
    cr_assert_eq(ldt_xla_parse("((1,), (0,))", 2, 2, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "S1,S0");
    cr_assert_eq(ldt_xla_parse("((0, 1), None)", 2, 2, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_expect_str_eq(fmt_pl(pl, n), "S0,S0");
    cr_assert_eq(ldt_xla_format(pl, n, 2, buf, sizeof buf, NULL), LDT_OK);
    cr_expect_str_eq(buf, "((0, 1), None)");
    /* asking for the length first */
    {
        size_t need = 0;
        cr_expect_eq(ldt_xla_format(pl, n, 2, NULL, 0, &need), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(need, strlen("((0, 1), None)"));
        cr_expect(strstr(ldt_last_error(), "buffer of 0 bytes") != NULL, "%s", ldt_last_error());
        cr_expect_eq(ldt_xla_format(pl, n, 2, buf, need, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_xla_format(pl, n, 2, buf, need + 1, NULL), LDT_OK);
    }
}

Test(notation, hlo_shapes_of_the_string) {
    static const struct {
        const char *mesh, *shape, *pl, *hlo;
    } rows[] = {
        {"2x4", "4,8,8", "R,S0", "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"},
        {"2x2", "4,4", "S0,S1", "{devices=[2,2]0,1,2,3}"},
        {"2x2", "4,4", "S1,S0", "{devices=[2,2]0,2,1,3}"},
        {"2x2", "4,4", "R,R", "{replicated}"},
        {"4x1", "8", "S0,R", "{devices=[4]0,1,2,3}"}, /* a size-1 replicated axis adds nothing */
        {"2x2", "4,4", "S0,S0", "{devices=[4,1]0,1,2,3}"},
        /* the rank array decides device ids: mesh position (i,j) holds rank [[0,2],[1,3]][i][j] */
        {"[[0,2],[1,3]]", "4,4", "S1,R", "{devices=[1,2,2]0,2,1,3 last_tile_dim_replicate}"},
        {"[[0,2],[1,3]]", "4,4", "S0,S1", "{devices=[2,2]0,2,1,3}"},
        {"2x3", "7,5", "R,S1", "{devices=[1,3,2]0,3,1,4,2,5 last_tile_dim_replicate}"},
        /* uneven on one mesh dim: XLA pads, torch.chunk agrees */
        {"3", "7", "S0", "{devices=[3]0,1,2}"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_mesh *mesh;
        ldt_spec spec = make_spec(rows[i].mesh, rows[i].shape, rows[i].pl, &mesh);
        char buf[256];
        cr_assert_eq(ldt_hlo_sharding_format(&spec, buf, sizeof buf, NULL), LDT_OK, "%s %s: %s",
                     rows[i].mesh, rows[i].pl, ldt_last_error());
        cr_expect_str_eq(buf, rows[i].hlo, "%s %s %s", rows[i].mesh, rows[i].shape, rows[i].pl);
        ldt_mesh_destroy(mesh);
    }
}

/* ---- random round trips ----------------------------------------------------------------- */

/* The region of one dim from a colossal entry read independently of ldt_layout: the dim is
 * split by torch.chunk over the entry's mesh dims in the order written. */
static void ref_dim(int64_t n, const char *entry, const int64_t *mdims, const int64_t *coord,
                    int64_t *start, int64_t *len) {
    *start = 0;
    *len = n;
    if (*entry == 'R') return;
    for (const char *p = entry + 1; *p >= '0' && *p <= '9'; p++) {
        int64_t k = mdims[*p - '0'], c = (*len + k - 1) / k, s = c * coord[*p - '0'], e = s + c;
        if (s > *len) s = *len;
        if (e > *len) e = *len;
        *start += s;
        *len = e - s;
    }
}

/* Parses "{devices=[t0,...]d0,d1,... [last_tile_dim_replicate]}"; returns the tile dim count. */
static int parse_hlo(const char *s, int64_t *tiles, int *devs, int cap_devs, int *ndevs, int *repl) {
    const char *p = s + strlen("{devices=[");
    char *e;
    int nt = 0;
    cr_assert(strncmp(s, "{devices=[", 10) == 0, "%s", s);
    while (*p != ']') {
        tiles[nt++] = strtoll(p, &e, 10);
        p = *e == ',' ? e + 1 : e;
    }
    p++;
    *ndevs = 0;
    while (*p >= '0' && *p <= '9') {
        cr_assert(*ndevs < cap_devs);
        devs[(*ndevs)++] = (int)strtol(p, &e, 10);
        p = *e == ',' ? e + 1 : e;
    }
    *repl = strncmp(p, " last_tile_dim_replicate}", 25) == 0;
    cr_assert(*repl || strcmp(p, "}") == 0, "tail '%s' of %s", p, s);
    return nt;
}

/* Every device named once; the device at tile t holds exactly tile t's region (XLA: dim d in
 * T_d tiles of ceil(n/T_d)) by ldt_layout. */
static void check_hlo_brute(const ldt_spec *spec, const char *hlo) {
    static int devs[1 << 12];
    int64_t tiles[LDT_MAX_DIMS + 1], idx[LDT_MAX_DIMS + 1] = {0};
    int ndevs, repl, nt, nranks = ldt_mesh_nranks(spec->mesh), nd = spec->shape.ndim;
    int seen[256] = {0};
    nt = parse_hlo(hlo, tiles, devs, 1 << 12, &ndevs, &repl);
    cr_assert_eq(nt, nd + repl, "%s: %d tile dims for a %d-dim tensor", hlo, nt, nd);
    cr_assert_eq(ndevs, nranks, "%s", hlo);
    for (int i = 0; i < ndevs; i++) {
        ldt_region reg;
        cr_assert(devs[i] >= 0 && devs[i] < 256 && !seen[devs[i]], "%s: device %d twice", hlo, devs[i]);
        seen[devs[i]] = 1;
        cr_assert_eq(ldt_layout(spec, devs[i], &reg), LDT_OK, "%s", ldt_last_error());
        for (int d = 0; d < nd; d++) {
            int64_t n = spec->shape.dims[d], c = (n + tiles[d] - 1) / tiles[d];
            int64_t s = c * idx[d] < n ? c * idx[d] : n, e = c * (idx[d] + 1) < n ? c * (idx[d] + 1) : n;
            cr_expect(reg.runs[d].len == e - s && (e == s || reg.runs[d].start == s),
                      "%s: device %d at tile %lld of dim %d holds [%lld,+%lld), the tile is "
                      "[%lld,%lld)",
                      hlo, devs[i], (long long)idx[d], d, (long long)reg.runs[d].start,
                      (long long)reg.runs[d].len, (long long)s, (long long)e);
        }
        for (int k = nt - 1; k >= 0 && ++idx[k] == tiles[k]; k--) idx[k] = 0;
    }
}

Test(notation, random_round_trips) {
    uint64_t rng = 1414;
    int cases = ldt_test_cases(400), hlo_ok = 0, hlo_refused = 0, nested = 0;
    for (int c = 0; c < cases; c++) {
        int mnd = (int)ldt_test_range(&rng, 1, 3), tnd = (int)ldt_test_range(&rng, 1, 4), n;
        int64_t mdims[LDT_MAX_DIMS], coord[LDT_MAX_DIMS];
        ldt_shape shape = {tnd, {0}};
        ldt_placement pl[LDT_MAX_DIMS], back[LDT_MAX_DIMS];
        ldt_mesh *mesh;
        ldt_spec spec;
        char col[128], xla[128], entries[LDT_MAX_DIMS][16], hlo[4096];
        ldt_status st;
        int agree = 1;
        for (int i = 0; i < mnd; i++) mdims[i] = ldt_test_range(&rng, 1, 4);
        for (int d = 0; d < tnd; d++) shape.dims[d] = ldt_test_range(&rng, 0, 9);
        for (int i = 0; i < mnd; i++)
            pl[i] = ldt_test_range(&rng, 0, 2) == 0 ? ldt_replicate()
                                                     : ldt_shard((int)ldt_test_range(&rng, 0, tnd - 1));
        cr_assert_eq(ldt_mesh_create(mnd, mdims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK);
        cr_assert_eq(ldt_spec_init(&spec, mesh, &shape, pl, mnd, LDT_F32), LDT_OK, "%s",
                     ldt_last_error());
        /* placements -> colossal -> placements, and -> xla -> placements */
        cr_assert_eq(ldt_colossal_format(pl, mnd, tnd, col, sizeof col, NULL), LDT_OK, "%s",
                     ldt_last_error());
        cr_assert_eq(ldt_colossal_parse(col, mnd, tnd, back, LDT_MAX_DIMS, &n), LDT_OK, "%s: %s",
                     col, ldt_last_error());
        cr_assert_eq(n, mnd);
        for (int i = 0; i < mnd; i++)
            cr_expect(ldt_placement_equal(&pl[i], &back[i]), "%s -> %s -> %s", fmt_pl(pl, mnd),
                      col, fmt_pl(back, n));
        cr_assert_eq(ldt_xla_format(pl, mnd, tnd, xla, sizeof xla, NULL), LDT_OK);
        cr_assert_eq(ldt_xla_parse(xla, mnd, tnd, back, LDT_MAX_DIMS, &n), LDT_OK, "%s: %s", xla,
                     ldt_last_error());
        for (int i = 0; i < mnd; i++)
            cr_expect(ldt_placement_equal(&pl[i], &back[i]), "%s -> %s -> %s", fmt_pl(pl, mnd),
                      xla, fmt_pl(back, n));
        /* the colossal entries, split out, say each rank's block: compare with ldt_layout */
        {
            const char *p = col + 1;
            for (int d = 0; d < tnd; d++) {
                size_t k = 0;
                while (*p != ',' && *p != ']') entries[d][k++] = *p++;
                entries[d][k] = '\0';
                nested += k > 2;
                p++;
            }
        }
        for (int r = 0; r < ldt_mesh_nranks(mesh); r++) {
            ldt_region reg;
            cr_assert_eq(ldt_mesh_coord(mesh, r, coord), LDT_OK);
            cr_assert_eq(ldt_layout(&spec, r, &reg), LDT_OK);
            for (int d = 0; d < tnd; d++) {
                int64_t s, l, tiles = 1, t = 0, c, ts, te;
                ref_dim(shape.dims[d], entries[d], mdims, coord, &s, &l);
                cr_expect(reg.runs[d].start == s && reg.runs[d].len == l,
                          "%s (%s) rank %d dim %d: layout [%lld,+%lld), colossal reading "
                          "[%lld,+%lld)",
                          col, fmt_pl(pl, mnd), r, d, (long long)reg.runs[d].start,
                          (long long)reg.runs[d].len, (long long)s, (long long)l);
                /* would XLA's padded tiles give the same? (the HLO refusal rule) */
                if (entries[d][0] == 'S')
                    for (const char *q = entries[d] + 1; *q; q++) {
                        tiles *= mdims[*q - '0'];
                        t = t * mdims[*q - '0'] + coord[*q - '0'];
                    }
                c = (shape.dims[d] + tiles - 1) / tiles;
                ts = c * t < shape.dims[d] ? c * t : shape.dims[d];
                te = c * (t + 1) < shape.dims[d] ? c * (t + 1) : shape.dims[d];
                if (l != te - ts || (l > 0 && s != ts)) agree = 0;
            }
        }
        st = ldt_hlo_sharding_format(&spec, hlo, sizeof hlo, NULL);
        if (agree) {
            cr_assert_eq(st, LDT_OK, "%s on %s: %s", col, fmt_pl(pl, mnd), ldt_last_error());
            if (strcmp(hlo, "{replicated}") == 0) {
                for (int i = 0; i < mnd; i++)
                    cr_expect(pl[i].kind == LDT_PLACE_REPLICATE || mdims[i] == 1, "%s: %s", col, hlo);
            } else {
                check_hlo_brute(&spec, hlo);
            }
            hlo_ok++;
        } else {
            cr_expect_eq(st, LDT_ERR_INVALID_ARGUMENT, "%s: nested uneven split accepted: %s", col, hlo);
            cr_expect(strstr(ldt_last_error(), "unevenly") != NULL, "%s", ldt_last_error());
            hlo_refused++;
        }
        ldt_mesh_destroy(mesh);
    }
    /* the generator reached the cases that matter */
    cr_expect(nested > 0 && hlo_ok > 0, "nested %d, hlo ok %d", nested, hlo_ok);
    if (cases >= 100) cr_expect(hlo_refused > 0, "no nested uneven case in %d", cases);
}

/* ---- errors ----------------------------------------------------------------------------- */

Test(notation, parse_errors_name_what) {
    static const struct {
        int xla, mesh_ndim, tensor_ndim;
        const char *text, *needle;
    } rows[] = {
        {0, 2, 2, "[S0", "missing closing ']'"},
        {0, 2, 2, "[S2,R]", "mesh dim 2 is out of range for a 2-dim mesh"},
        {0, 2, 2, "[S0,S0]", "mesh dim 0 shards both tensor dim 0 and tensor dim 1"},
        {0, 2, 2, "[S00,R]", "mesh dim 0 is repeated on tensor dim 0"},
        {0, 2, 2, "[S10,R]", "split over mesh dim 1 before mesh dim 0"},
        {0, 2, 2, "[S0,R,R]", "3 entries, expected one per tensor dim (2)"},
        {0, 2, 2, "[S0]", "1 entries, expected one per tensor dim (2)"},
        {0, 2, 2, "[X,R]", "expected R or S<mesh dims>"},
        {0, 2, 2, "[S,R]", "'S' needs the mesh dims"},
        {0, 2, 2, "[S0,]", "trailing ','"},
        {0, 2, 2, "[S0,R] junk", "unexpected text"},
        {0, 2, 2, "garbage", "expected R or S<mesh dims>"},
        {0, 0, 2, "[S0,R]", "mesh has 0 dims"},
        {1, 2, 2, "(2, None)", "mesh dim 2 is out of range for a 2-dim mesh"},
        {1, 2, 2, "(-1, None)", "mesh dim -1 is out of range"},
        {1, 2, 2, "(0, 0)", "mesh dim 0 shards both tensor dim 0 and tensor dim 1"},
        {1, 2, 2, "((0, 0), None)", "mesh dim 0 is repeated"},
        {1, 2, 2, "((1, 0), None)", "split over mesh dim 1 before mesh dim 0"},
        {1, 2, 2, "(0, None", "missing closing ')'"},
        {1, 2, 2, "((0 1), None)", "expected ',' or ')' in tensor dim 0's axes"},
        {1, 2, 2, "((0, 1", "missing ')' after tensor dim 0's axes"},
        {1, 2, 2, "((0, 1, None)", "expected a mesh axis index, None or a tuple"},
        {1, 2, 2, "0, None", "expected a tuple"},
        {1, 2, 2, "(foo, None)", "expected a mesh axis index, None or a tuple"},
        {1, 2, 2, "((), None)", "empty tuple for tensor dim 0"},
        {1, 2, 2, "(0, None) x", "unexpected text"},
        {1, 2, 2, "(None)", "1 entries, expected one per tensor dim (2)"},
        {1, 2, 2, "(0 None)", "expected ',' between entries"},
        {1, 2, 2, "garbage", "expected a tuple"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_placement pl[LDT_MAX_DIMS];
        int n = -7;
        ldt_status st = rows[i].xla ? ldt_xla_parse(rows[i].text, rows[i].mesh_ndim,
                                                    rows[i].tensor_ndim, pl, LDT_MAX_DIMS, &n)
                                    : ldt_colossal_parse(rows[i].text, rows[i].mesh_ndim,
                                                         rows[i].tensor_ndim, pl, LDT_MAX_DIMS, &n);
        cr_expect_eq(st, LDT_ERR_INVALID_ARGUMENT, "'%s' gave %d", rows[i].text, st);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) != NULL, "'%s': got '%s', wanted '%s'",
                  rows[i].text, ldt_last_error(), rows[i].needle);
        cr_expect(strstr(ldt_last_error(), rows[i].xla ? "xla" : "colossal") != NULL, "%s",
                  ldt_last_error());
        cr_expect_eq(n, -7, "'%s' wrote a count on error", rows[i].text);
    }
    {
        ldt_placement pl[1];
        int n;
        cr_expect_eq(ldt_colossal_parse(NULL, 2, 2, pl, 1, &n), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_colossal_parse("[S0,R]", 2, 2, pl, 1, &n), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "room for 1 placements") != NULL, "%s", ldt_last_error());
        cr_expect_eq(ldt_xla_parse("(0, None)", 2, 2, NULL, 2, &n), LDT_ERR_INVALID_ARGUMENT);
    }
}

Test(notation, format_errors_name_what) {
    static const struct {
        const char *pl, *needle;
    } rows[] = {
        {"P,S0", "mesh dim 0 is P (a pending sum reduction)"},
        {"S1,Pmax", "mesh dim 1 is Pmax (a pending max reduction)"},
        {"IS0:2,R", "mesh dim 0 is IS0:2 (dim 0 as 2 interleaved blocks)"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_mesh *mesh;
        ldt_spec spec = make_spec("2x2", "4,4", rows[i].pl, &mesh);
        char buf[128];
        cr_expect_eq(ldt_colossal_format(spec.placements, 2, 2, buf, sizeof buf, NULL),
                     LDT_ERR_INVALID_ARGUMENT, "%s", rows[i].pl);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) && strstr(ldt_last_error(), "colossal"),
                  "%s: %s", rows[i].pl, ldt_last_error());
        cr_expect_eq(ldt_xla_format(spec.placements, 2, 2, buf, sizeof buf, NULL),
                     LDT_ERR_INVALID_ARGUMENT, "%s", rows[i].pl);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) && strstr(ldt_last_error(), "xla"),
                  "%s: %s", rows[i].pl, ldt_last_error());
        cr_expect_eq(ldt_hlo_sharding_format(&spec, buf, sizeof buf, NULL),
                     LDT_ERR_INVALID_ARGUMENT, "%s", rows[i].pl);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) && strstr(ldt_last_error(), "hlo"),
                  "%s: %s", rows[i].pl, ldt_last_error());
        ldt_mesh_destroy(mesh);
    }
    {
        ldt_placement pl[2] = {ldt_shard(2), ldt_replicate()};
        char buf[64];
        cr_expect_eq(ldt_colossal_format(pl, 2, 2, buf, sizeof buf, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "mesh dim 0 is S2 but the tensor has 2 dims"), "%s",
                  ldt_last_error());
        cr_expect_eq(ldt_xla_format(pl, 0, 2, buf, sizeof buf, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_xla_format(NULL, 2, 2, buf, sizeof buf, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_hlo_sharding_format(NULL, buf, sizeof buf, NULL), LDT_ERR_INVALID_ARGUMENT);
    }
    {
        /* 5 rows over 2x2: nested torch.chunk 3,2 -> 2,1,1,1; XLA's tiles 2,2,1,0 */
        ldt_mesh *mesh;
        ldt_spec spec = make_spec("2x2", "5,4", "S0,S0", &mesh);
        char buf[128];
        cr_expect_eq(ldt_hlo_sharding_format(&spec, buf, sizeof buf, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "tensor dim 0 (size 5) is split unevenly over 2 mesh dims"),
                  "%s", ldt_last_error());
        ldt_mesh_destroy(mesh);
        /* 8 over 2x2 divides: fine */
        spec = make_spec("2x2", "8,4", "S0,S0", &mesh);
        cr_expect_eq(ldt_hlo_sharding_format(&spec, buf, sizeof buf, NULL), LDT_OK, "%s", ldt_last_error());
        cr_expect_str_eq(buf, "{devices=[4,1]0,1,2,3}");
        cr_expect_eq(ldt_hlo_sharding_format(&spec, buf, 10, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "buffer of 10 bytes, the text needs 23"), "%s", ldt_last_error());
        ldt_mesh_destroy(mesh);
    }
}

/* ---- ldt spec --------------------------------------------------------------------------- */


static const char *field(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItem(o, name);
    return cJSON_IsString(v) ? v->valuestring : "(missing)";
}

Test(notation, cli_json_seed_and_back) {
    static char out[1 << 14];
    static const struct {
        const char *args, *pl, *col, *xla, *hlo;
    } rows[] = {
        {"--mesh 2x4 --shape 4,8,8 --placements R,S0", "R,S0", "[S1,R,R]", "(1,None,None)",
         "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"},
        {"--mesh 2x4 --shape 4,8,8 --from-colossal '[S1,R,R]'", "R,S0", "[S1,R,R]",
         "(1,None,None)", "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"},
        {"--mesh 2x4 --shape 4,8,8 --from-xla '(1,None,None)'", "R,S0", "[S1,R,R]",
         "(1,None,None)", "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"},
        {"--mesh 2x2 --shape 4,4 --from-colossal '[S01,R]'", "S0,S0", "[S01,R]", "((0,1),None)",
         "{devices=[4,1]0,1,2,3}"},
        {"--mesh 2x2 --shape 4,4 --from-xla '((0, 1), None)'", "S0,S0", "[S01,R]",
         "((0,1),None)", "{devices=[4,1]0,1,2,3}"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char args[256];
        cJSON *j;
        snprintf(args, sizeof args, "spec %s --json", rows[i].args);
        cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s: %s", args, out);
        j = cJSON_Parse(out);
        cr_assert_not_null(j, "%s: not JSON: %s", args, out);
        cr_expect_eq(cJSON_GetArraySize(j), 4, "%s: %s", args, out);
        cr_expect_str_eq(field(j, "placements"), rows[i].pl, "%s", args);
        cr_expect_str_eq(field(j, "colossal"), rows[i].col, "%s", args);
        cr_expect_str_eq(field(j, "xla"), rows[i].xla, "%s", args);
        cr_expect_str_eq(field(j, "hlo"), rows[i].hlo, "%s", args);
        cr_expect_null(cJSON_GetObjectItem(j, "errors"));
        cJSON_Delete(j);
    }
}

Test(notation, cli_json_errors_to_and_text) {
    static char out[1 << 14];
    cJSON *j, *errs;
    cr_assert_eq(run("spec --mesh 2x2 --shape 4,4 --placements P,S1 --json", out, sizeof out, 1), 0,
                 "%s", out);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "not JSON: %s", out);
    cr_expect_str_eq(field(j, "placements"), "P,S1");
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(j, "colossal")), "%s", out);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(j, "xla")), "%s", out);
    cr_expect(cJSON_IsNull(cJSON_GetObjectItem(j, "hlo")), "%s", out);
    errs = cJSON_GetObjectItem(j, "errors");
    cr_assert(cJSON_IsObject(errs), "%s", out);
    cr_expect(strstr(field(errs, "colossal"), "pending sum reduction") != NULL, "%s", out);
    cr_expect(strstr(field(errs, "hlo"), "hlo: mesh dim 0 is P") != NULL, "%s", out);
    cr_expect_null(cJSON_GetObjectItem(errs, "placements"));
    cJSON_Delete(j);
    /* --to prints that form alone */
    cr_assert_eq(run("spec --mesh 2x4 --shape 4,8,8 --placements R,S0 --to xla", out, sizeof out, 1), 0);
    cr_expect_str_eq(out, "(1,None,None)\n"); /* the CLI's compact form, as its JSON */
    cr_assert_eq(run("spec --mesh 2x4 --shape 4,8,8 --placements R,S0 --to hlo", out, sizeof out, 1), 0);
    cr_expect_str_eq(out, "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}\n");
    cr_assert_eq(run("spec --mesh 2x2 --shape 4,4 --from-xla '((0,1),None)' --to colossal", out, sizeof out, 1), 0);
    cr_expect_str_eq(out, "[S01,R]\n");
    cr_assert_eq(run("spec --mesh 2x2 --shape 4,4 --from-colossal '[R,S0]' --to placements", out, sizeof out, 1), 0);
    cr_expect_str_eq(out, "S1,R\n");
    /* a form the sharding has none of: exit 1 and why */
    cr_expect_eq(run("spec --mesh 2x2 --shape 4,4 --placements IS0:2,R --to colossal", out, sizeof out, 1), 1);
    cr_expect(strstr(out, "interleaved") != NULL, "%s", out);
    /* the human form names every notation */
    cr_assert_eq(run("spec --mesh 2x4 --shape 4,8,8 --placements R,S0", out, sizeof out, 1), 0);
    for (const char *s = "[4,8,8] f32 (R,S0) on 2x4\0[S1,R,R]\0(1,None,None)\0last_tile_dim_replicate\0";
         *s; s += strlen(s) + 1)
        cr_expect(strstr(out, s) != NULL, "lacks %s: %s", s, out);
    cr_assert_eq(run("spec --help", out, sizeof out, 1), 0);
    cr_expect(strstr(out, "usage") != NULL, "%s", out);
    for (const char *s = "--mesh\0--shape\0--placements\0--from-colossal\0--from-xla\0--to\0--json\0";
         *s; s += strlen(s) + 1)
        cr_expect(strstr(out, s) != NULL, "help lacks %s", s);
    cr_expect(strstr(out, "(null)") == NULL, "%s", out);
    cr_assert_eq(run("--help", out, sizeof out, 1), 0);
    cr_expect(strstr(out, "spec") != NULL, "%s", out);
}

Test(notation, cli_bad_input_exits_2) {
    static const struct {
        const char *args, *needle;
    } rows[] = {
        {"spec --mesh 2x2 --shape 4,4 --from-colossal '[S0'", "--from-colossal: colossal '[S0': missing closing ']'"},
        {"spec --mesh 2x2 --shape 4,4 --from-colossal '[S2,R]'", "mesh dim 2 is out of range"},
        {"spec --mesh 2x2 --shape 4,4 --from-colossal '[S0,S0]'", "shards both tensor dim 0"},
        {"spec --mesh 2x2 --shape 4,4 --from-colossal '[S0,R,R]'", "expected one per tensor dim (2)"},
        {"spec --mesh 2x2 --shape 4,4 --from-xla '(2,None)'", "--from-xla: xla '(2,None)': mesh dim 2"},
        {"spec --mesh 2x2 --shape 4,4 --from-xla 'garbage'", "expected a tuple"},
        {"spec --mesh 2x2 --shape 4,4 --placements S0", "--placements"},
        {"spec --mesh 2x2 --shape 4,4 --placements Q,R", "unknown placement"},
        {"spec --mesh 2x0 --shape 4,4 --placements R,R", "--mesh"},
        {"spec --mesh 2x2 --shape 4,x --placements R,R", "--shape"},
        {"spec --mesh 2x2 --shape 4,4", "one of --placements, --from-colossal or --from-xla"},
        {"spec --shape 4,4 --placements R", "--mesh is required"},
        {"spec --mesh 2x2 --shape 4,4 --placements R,R --from-xla '(0,1)'", "both given"},
        {"spec --mesh 2x2 --shape 4,4 --placements R,R --to yaml", "--to is 'yaml', expected"},
        {"spec --mesh 2x2 --shape 4,4 --placements R,R --to xla --json", "--to"},
        {"spec --bogus 1", "unknown flag"},
    };
    static char out[1 << 14];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = run(rows[i].args, out, sizeof out, 1);
        cr_expect_eq(rc, 2, "'%s' exited %d: %s", rows[i].args, rc, out);
        cr_expect(strstr(out, rows[i].needle) != NULL, "'%s': %s", rows[i].args, out);
    }
}
