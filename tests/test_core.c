/* Core vocabulary: status table, dtypes and half conversions, shapes, meshes, placements,
 * specs — values against hand-derived cases and independent references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "core/copy.h"
#include "core/sysmem.h"
#include "ldt/core.h"
#include "tests/test_util.h"

/* ---- status ---------------------------------------------------------------------------- */

Test(status, names_and_hints_cover_every_code) {
#define CHECK_ROW(sfx, val, name, hint)                                             \
    cr_expect_str_eq(ldt_status_name(LDT_##sfx), name);                             \
    cr_expect_str_eq(ldt_status_hint(LDT_##sfx), hint);                             \
    cr_expect_eq((int)LDT_##sfx, val);
    LDT_STATUS_MAP(CHECK_ROW)
#undef CHECK_ROW
    cr_expect_str_eq(ldt_status_name((ldt_status)-999), "unknown status");
}

Test(status, error_message_and_trace) {
    ldt_shape s = {2, {-1, 3}};
    ldt_clear_error();
    cr_expect_str_eq(ldt_last_error(), "");
    cr_assert_eq(ldt_shape_numel(&s, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "[-1,3]") != NULL, "message: %s", ldt_last_error());
    cr_expect(strstr(ldt_last_error(), "negative") != NULL, "message: %s", ldt_last_error());
    cr_expect(strstr(ldt_last_error_trace(), "shape.c:") != NULL, "trace: %s",
              ldt_last_error_trace());
    ldt_clear_error();
    cr_expect_str_eq(ldt_last_error_trace(), "");
}

/* ---- dtypes ---------------------------------------------------------------------------- */

Test(dtype, sizes_names_parse) {
    static const struct {
        ldt_dtype t;
        const char *name;
        size_t size;
        int fl;
    } rows[] = {{LDT_F32, "f32", 4, 1}, {LDT_F64, "f64", 8, 1}, {LDT_F16, "f16", 2, 1},
                {LDT_BF16, "bf16", 2, 1}, {LDT_I32, "i32", 4, 0}, {LDT_I64, "i64", 8, 0},
                {LDT_U8, "u8", 1, 0},   {LDT_BOOL, "bool", 1, 0}};
    cr_assert_eq(sizeof rows / sizeof rows[0], (size_t)LDT_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_dtype t;
        cr_expect_eq(ldt_dtype_size(rows[i].t), rows[i].size, "%s", rows[i].name);
        cr_expect_str_eq(ldt_dtype_name(rows[i].t), rows[i].name);
        cr_expect_eq(ldt_dtype_is_float(rows[i].t), rows[i].fl, "%s", rows[i].name);
        cr_assert_eq(ldt_dtype_parse(rows[i].name, &t), LDT_OK);
        cr_expect_eq(t, rows[i].t);
    }
    cr_expect_eq(ldt_dtype_size((ldt_dtype)99), 0);
    cr_expect_str_eq(ldt_dtype_name((ldt_dtype)-1), "invalid");
    {
        ldt_dtype t;
        cr_expect_eq(ldt_dtype_parse("float16", &t), LDT_OK);
        cr_expect_eq(t, LDT_F16);
        cr_expect_eq(ldt_dtype_parse("f8", &t), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "'f8'") != NULL, "%s", ldt_last_error());
        cr_expect_eq(ldt_dtype_parse(NULL, &t), LDT_ERR_INVALID_ARGUMENT);
    }
}

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Independent f16 decoder: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024. */
static double f16_ref_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m / 1024.0, -14) : ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

Test(dtype, f16_known_values) {
    cr_expect_eq(ldt_f32_to_f16(1.0f), 0x3c00);
    cr_expect_eq(ldt_f32_to_f16(-2.0f), 0xc000);
    cr_expect_eq(ldt_f32_to_f16(65504.0f), 0x7bff);
    cr_expect_eq(ldt_f32_to_f16(65519.99f), 0x7bff);
    cr_expect_eq(ldt_f32_to_f16(65520.0f), 0x7c00); /* tie rounds to even: infinity */
    cr_expect_eq(ldt_f32_to_f16(ldexpf(1, -24)), 0x0001);
    cr_expect_eq(ldt_f32_to_f16(ldexpf(1, -25)), 0x0000);        /* tie to even: 0 */
    cr_expect_eq(ldt_f32_to_f16(ldexpf(1.5f, -25)), 0x0001);
    cr_expect_eq(ldt_f32_to_f16(ldexpf(3, -25)), 0x0002);        /* 1.5 ulp tie: to 2 */
    cr_expect_eq(ldt_f32_to_f16(-0.0f), 0x8000);
    cr_expect_eq(ldt_f32_to_f16(INFINITY), 0x7c00);
    cr_expect_eq(ldt_f32_to_f16(-INFINITY), 0xfc00);
    cr_expect_eq(ldt_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie: stays even */
    cr_expect_eq(ldt_f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    {
        uint16_t h = ldt_f32_to_f16(NAN);
        cr_expect((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0, "NaN -> 0x%04x", h);
        cr_expect(isnan(ldt_f16_to_f32(0x7e00)));
    }
    cr_expect_eq(ldt_f16_to_f32(0x3555), (float)f16_ref_value(0x3555));
}

Test(dtype, f16_every_pattern_roundtrips_and_decodes) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ldt_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 31;
        if (e == 31 && (h & 1023)) {
            cr_assert(isnan(f), "0x%04x should decode to NaN", h);
            continue;
        }
        if (e == 31) {
            cr_assert(isinf(f) && (f < 0) == (h >> 15), "0x%04x", h);
        } else {
            cr_assert_eq((double)f, f16_ref_value((uint16_t)h), "0x%04x decodes to %a", h, f);
        }
        cr_assert_eq(ldt_f32_to_f16(f), h, "0x%04x -> %a -> 0x%04x", h, f, ldt_f32_to_f16(f));
    }
}

/* Reference rounding: the nearest f16 by exhaustive search, ties to even mantissa. */
static uint16_t f16_ref_round(float f) {
    double x = f;
    uint16_t best = 0;
    double bestd = INFINITY;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (fabs(x) >= 65520.0) return sign | 0x7c00;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double d = fabs(fabs(x) - f16_ref_value((uint16_t)h));
        if (d < bestd || (d == bestd && (h & 1) == 0)) {
            bestd = d;
            best = (uint16_t)h;
        }
    }
    return sign | best;
}

Test(dtype, f16_rounding_matches_exhaustive_reference) {
    uint64_t st = 42;
    int n = ldt_test_cases(300);
    for (int i = 0; i < n; i++) {
        /* exponents across the f16 range, subnormals included */
        float f = ldexpf((float)(ldt_test_rand(&st) % 0x1000000) / 0x1000000 + 0.5f,
                         (int)ldt_test_range(&st, -27, 16));
        if (i & 1) f = -f;
        cr_assert_eq(ldt_f32_to_f16(f), f16_ref_round(f), "%a: got 0x%04x want 0x%04x", f,
                     ldt_f32_to_f16(f), f16_ref_round(f));
    }
}

Test(dtype, bf16_known_values_and_rounding) {
    cr_expect_eq(ldt_f32_to_bf16(1.0f), 0x3f80);
    cr_expect_eq(ldt_f32_to_bf16(3.14159274f), 0x4049);
    cr_expect_eq(ldt_f32_to_bf16(from_bits(0x3f808000)), 0x3f80); /* tie: even */
    cr_expect_eq(ldt_f32_to_bf16(from_bits(0x3f818000)), 0x3f82); /* tie: up to even */
    cr_expect_eq(ldt_f32_to_bf16(from_bits(0x3f808001)), 0x3f81);
    cr_expect_eq(ldt_f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80); /* overflow to inf */
    cr_expect_eq(ldt_f32_to_bf16(-0.0f), 0x8000);
    {
        uint16_t h = ldt_f32_to_bf16(from_bits(0x7f800001)); /* signalling NaN stays NaN */
        cr_expect(isnan(ldt_bf16_to_f32(h)), "0x%04x", h);
    }
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = ldt_bf16_to_f32((uint16_t)h);
        cr_assert_eq(bits(f), h << 16);
        if (!isnan(f)) cr_assert_eq(ldt_f32_to_bf16(f), h, "0x%04x", h);
    }
    /* against an independent reference: the nearer of the two truncations, ties to even */
    {
        uint64_t st = 7;
        for (int i = 0; i < ldt_test_cases(20000); i++) {
            uint32_t u = (uint32_t)ldt_test_rand(&st) & 0x7f7fffffu; /* finite */
            float f = from_bits(u), lo = from_bits(u & 0xffff0000u),
                  hi = from_bits((u & 0xffff0000u) + 0x10000u);
            double dl = (double)f - lo, dh = (double)hi - f;
            uint16_t want = (uint16_t)((dl < dh || (dl == dh && !((u >> 16) & 1))) ? u >> 16
                                                                                   : (u >> 16) + 1);
            cr_assert_eq(ldt_f32_to_bf16(f), want, "0x%08x", u);
        }
    }
}

/* ---- shapes ---------------------------------------------------------------------------- */

Test(shape, numel_and_overflow) {
    ldt_shape s = {3, {7, 5, 2}}, z = {2, {0, 5}}, sc = {0, {0}};
    ldt_shape big = {2, {(int64_t)1 << 32, (int64_t)1 << 31}};
    ldt_shape big0 = {3, {(int64_t)1 << 62, (int64_t)1 << 62, 0}};
    ldt_shape bad = {9, {0}};
    int64_t n;
    cr_assert_eq(ldt_shape_numel(&s, &n), LDT_OK);
    cr_expect_eq(n, 70);
    cr_assert_eq(ldt_shape_numel(&z, &n), LDT_OK);
    cr_expect_eq(n, 0);
    cr_assert_eq(ldt_shape_numel(&sc, &n), LDT_OK);
    cr_expect_eq(n, 1);
    cr_assert_eq(ldt_shape_numel(&big0, &n), LDT_OK); /* a zero dim makes any shape empty */
    cr_expect_eq(n, 0);
    cr_expect_eq(ldt_shape_numel(&big, &n), LDT_ERR_OVERFLOW);
    cr_expect(strstr(ldt_last_error(), "[4294967296,2147483648]") != NULL, "%s",
              ldt_last_error());
    cr_expect_eq(ldt_shape_numel(&bad, &n), LDT_ERR_INVALID_ARGUMENT);
    {
        ldt_shape b = {1, {(int64_t)1 << 62}};
        cr_expect_eq(ldt_shape_nbytes(&b, LDT_F32, &n), LDT_ERR_OVERFLOW);
        cr_expect_eq(ldt_shape_nbytes(&s, LDT_F64, &n), LDT_OK);
        cr_expect_eq(n, 560);
        cr_expect_eq(ldt_shape_nbytes(&s, (ldt_dtype)42, &n), LDT_ERR_INVALID_ARGUMENT);
    }
}

Test(shape, parse_and_format) {
    static const struct {
        const char *text;
        int ndim;
        int64_t d0, d1;
    } ok[] = {{"7,5", 2, 7, 5}, {"[7, 5]", 2, 7, 5}, {"7x5", 2, 7, 5},
              {"(3)", 1, 3, 0}, {"", 0, 0, 0},      {"[]", 0, 0, 0}};
    static const char *bad[] = {"7,", "a", "7,-1", "[7,5", "7;5", "1,2,3,4,5,6,7,8,9",
                                "99999999999999999999", "7,5]"};
    char buf[64];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ldt_shape s;
        cr_assert_eq(ldt_shape_parse(ok[i].text, &s), LDT_OK, "%s: %s", ok[i].text,
                     ldt_last_error());
        cr_expect_eq(s.ndim, ok[i].ndim, "%s", ok[i].text);
        if (s.ndim > 0) cr_expect_eq(s.dims[0], ok[i].d0);
        if (s.ndim > 1) cr_expect_eq(s.dims[1], ok[i].d1);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ldt_shape s;
        ldt_status st = ldt_shape_parse(bad[i], &s);
        cr_expect(st == LDT_ERR_INVALID_ARGUMENT || st == LDT_ERR_OVERFLOW, "'%s' gave %d",
                  bad[i], st);
        cr_expect(strstr(ldt_last_error(), "shape") != NULL, "%s", ldt_last_error());
    }
    {
        ldt_shape s = {3, {7, 0, 12}};
        cr_expect_eq(ldt_shape_format(&s, buf, sizeof buf), 8);
        cr_expect_str_eq(buf, "[7,0,12]");
        cr_expect_eq(ldt_shape_format(&s, buf, 4), 8); /* truncated, length still reported */
        cr_expect_str_eq(buf, "[7,");
    }
    {
        ldt_shape a, b = {2, {2, 3}};
        cr_assert_eq(ldt_shape_parse("2,3", &a), LDT_OK);
        cr_expect(ldt_shape_equal(&a, &b));
        b.dims[1] = 4;
        cr_expect(!ldt_shape_equal(&a, &b));
    }
}

/* ---- meshes ---------------------------------------------------------------------------- */

Test(mesh, parse_forms_and_format) {
    static const struct {
        const char *text, *formatted;
        int ndim, nranks;
    } rows[] = {{"4", "4", 1, 4},
                {"2x2", "2x2", 2, 4},
                {"2x3x1", "2x3x1", 3, 6},
                {"dp=2,tp=4", "dp=2,tp=4", 2, 8},
                {"[[0,2],[1,3]]", "[[0,2],[1,3]]", 2, 4},
                {"[[0,1],[2,3]]", "2x2", 2, 4},
                {"[5,7,9]", "[5,7,9]", 1, 3},
                {"dp=2,tp=2:[[3,2],[1,0]]", "dp=2,tp=2:[[3,2],[1,0]]", 2, 4}};
    char buf[128];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_mesh *m, *m2;
        cr_assert_eq(ldt_mesh_parse(rows[i].text, LDT_DEVICE_CPU, &m), LDT_OK, "%s: %s",
                     rows[i].text, ldt_last_error());
        cr_expect_eq(ldt_mesh_ndim(m), rows[i].ndim, "%s", rows[i].text);
        cr_expect_eq(ldt_mesh_nranks(m), rows[i].nranks, "%s", rows[i].text);
        ldt_mesh_format(m, buf, sizeof buf);
        cr_expect_str_eq(buf, rows[i].formatted);
        cr_assert_eq(ldt_mesh_parse(buf, LDT_DEVICE_CPU, &m2), LDT_OK); /* round trip */
        cr_expect(ldt_mesh_equal(m, m2), "%s", buf);
        ldt_mesh_destroy(m2);
        cr_assert_eq(ldt_mesh_clone(m, &m2), LDT_OK);
        cr_expect(ldt_mesh_equal(m, m2));
        ldt_mesh_destroy(m2);
        ldt_mesh_destroy(m);
    }
}

Test(mesh, bad_text) {
    static const char *bad[] = {"",         "0",          "2x",           "2x0",
                                "dp=2,4",   "dp=2,dp=2",  "[[0,1],[2]]",  "[[0,1],[1,2]]",
                                "[0,[1]]",  "[[0,1],[2,3]",  "dp=2:[[0,1]]", "2x2x2x2x2x2x2x2x2",
                                "x2",       "[-1,0]",     "2x3junk",      "[]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ldt_mesh *m = (ldt_mesh *)1;
        cr_expect_eq(ldt_mesh_parse(bad[i], LDT_DEVICE_CPU, &m), LDT_ERR_INVALID_ARGUMENT,
                     "'%s' was accepted", bad[i]);
        cr_expect_null(m, "'%s'", bad[i]);
        cr_expect(strstr(ldt_last_error(), "mesh") != NULL, "'%s': %s", bad[i],
                  ldt_last_error());
    }
}

Test(mesh, create_errors) {
    int64_t dims[2] = {2, 2};
    int dup[4] = {0, 1, 1, 2};
    const char *names[2] = {"dp", "2x"};
    ldt_mesh *m;
    cr_expect_eq(ldt_mesh_create(2, dims, dup, NULL, LDT_DEVICE_CPU, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rank 1 appears twice") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_mesh_create(2, dims, NULL, names, LDT_DEVICE_CPU, &m),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "'2x'") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_mesh_create(0, dims, NULL, NULL, LDT_DEVICE_CPU, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_mesh_create(2, dims, NULL, NULL, (ldt_device_type)7, &m),
                 LDT_ERR_INVALID_ARGUMENT);
    {
        int64_t huge[2] = {1 << 20, 1 << 20};
        cr_expect_eq(ldt_mesh_create(2, huge, NULL, NULL, LDT_DEVICE_META, &m),
                     LDT_ERR_INVALID_ARGUMENT);
    }
}

Test(mesh, coords_groups_names) {
    ldt_mesh *m;
    int64_t c[2];
    int g[4], r, idx;
    /* explicit ranks: position (i,j) holds rank [[0,2],[1,3]][i][j] */
    cr_assert_eq(ldt_mesh_parse("[[0,2],[1,3]]", LDT_DEVICE_CPU, &m), LDT_OK);
    cr_assert_eq(ldt_mesh_coord(m, 2, c), LDT_OK);
    cr_expect(c[0] == 0 && c[1] == 1, "rank 2 at [%lld,%lld]", (long long)c[0], (long long)c[1]);
    cr_assert_eq(ldt_mesh_coord(m, 1, c), LDT_OK);
    cr_expect(c[0] == 1 && c[1] == 0);
    cr_assert_eq(ldt_mesh_rank_of(m, c, &r), LDT_OK);
    cr_expect_eq(r, 1);
    cr_assert_eq(ldt_mesh_group(m, 1, 0, g), LDT_OK); /* column through rank 1: 0, 1 */
    cr_expect(g[0] == 0 && g[1] == 1, "%d %d", g[0], g[1]);
    cr_assert_eq(ldt_mesh_group(m, 1, 1, g), LDT_OK); /* row through rank 1: 1, 3 */
    cr_expect(g[0] == 1 && g[1] == 3, "%d %d", g[0], g[1]);
    cr_expect_eq(ldt_mesh_coord(m, 4, c), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rank 4 is not in mesh [[0,2],[1,3]]") != NULL, "%s",
              ldt_last_error());
    cr_expect_eq(ldt_mesh_group(m, 0, 2, g), LDT_ERR_INVALID_ARGUMENT);
    {
        int64_t bad[2] = {0, 2};
        cr_expect_eq(ldt_mesh_rank_of(m, bad, &r), LDT_ERR_INVALID_ARGUMENT);
    }
    cr_expect_null(ldt_mesh_dim_name(m, 0));
    cr_expect_eq(ldt_mesh_dim_index(m, "tp", &idx), LDT_ERR_INVALID_ARGUMENT);
    ldt_mesh_destroy(m);

    cr_assert_eq(ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_META, &m), LDT_OK);
    cr_expect_str_eq(ldt_mesh_dim_name(m, 1), "tp");
    cr_assert_eq(ldt_mesh_dim_index(m, "tp", &idx), LDT_OK);
    cr_expect_eq(idx, 1);
    cr_expect_eq(ldt_mesh_device(m), LDT_DEVICE_META);
    cr_expect_eq(ldt_mesh_dim_size(m, 5), 0);
    ldt_mesh_destroy(m);
}

/* Independent: rank at row-major position with the given coordinate. */
static int rank_at_coord(const ldt_mesh *m, const int64_t *c) {
    int64_t pos = 0;
    for (int d = 0; d < ldt_mesh_ndim(m); d++) pos = pos * ldt_mesh_dim_size(m, d) + c[d];
    return ldt_mesh_rank_at(m, (int)pos);
}

Test(mesh, submesh_and_split) {
    ldt_mesh *m, *sub, **list;
    int count;
    char buf[128];
    /* 2x3x2 mesh of ranks 0..11 */
    cr_assert_eq(ldt_mesh_parse("a=2,b=3,c=2", LDT_DEVICE_CPU, &m), LDT_OK);
    {
        int dims[2] = {2, 0}; /* c then a: order as given */
        cr_assert_eq(ldt_mesh_submesh(m, 7, 2, dims, &sub), LDT_OK, "%s", ldt_last_error());
        /* rank 7 = coord [1,0,1]; sub over (c, a) with b=0: [[c=0,a=0],[c=0,a=1]],... */
        cr_expect_eq(ldt_mesh_ndim(sub), 2);
        cr_expect_str_eq(ldt_mesh_dim_name(sub, 0), "c");
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                int64_t c[3] = {j, 0, i};
                cr_expect_eq(ldt_mesh_rank_at(sub, i * 2 + j), rank_at_coord(m, c));
            }
        ldt_mesh_format(sub, buf, sizeof buf);
        cr_expect_str_eq(buf, "c=2,a=2:[[0,6],[1,7]]");
        ldt_mesh_destroy(sub);
    }
    {
        int dims[1] = {1};
        cr_assert_eq(ldt_mesh_split(m, 1, dims, &list, &count), LDT_OK);
        cr_expect_eq(count, 4);
        for (int k = 0; k < count; k++) {
            int64_t c[3] = {k / 2, 0, k % 2};
            for (int j = 0; j < 3; j++) {
                c[1] = j;
                cr_expect_eq(ldt_mesh_rank_at(list[k], j), rank_at_coord(m, c), "split %d", k);
            }
        }
        ldt_mesh_list_destroy(list, count);
    }
    {
        int twice[2] = {1, 1}, out_of_range[1] = {3};
        cr_expect_eq(ldt_mesh_split(m, 2, twice, &list, &count), LDT_ERR_INVALID_ARGUMENT);
        cr_expect(strstr(ldt_last_error(), "selected twice") != NULL, "%s", ldt_last_error());
        cr_expect_eq(ldt_mesh_submesh(m, 0, 1, out_of_range, &sub), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_mesh_submesh(m, 12, 1, twice, &sub), LDT_ERR_INVALID_ARGUMENT);
    }
    ldt_mesh_destroy(m);
}

/* ---- placements and specs -------------------------------------------------------------- */

Test(placement, parse_and_format) {
    ldt_placement p[8];
    int n;
    char buf[128];
    cr_assert_eq(ldt_placements_parse("S0,R,P,Pavg,Pmax,Pmin,IS1:3,S-1", 2, p, 8, &n), LDT_OK,
                 "%s", ldt_last_error());
    cr_expect_eq(n, 8);
    cr_expect(p[0].kind == LDT_PLACE_SHARD && p[0].dim == 0);
    cr_expect(p[1].kind == LDT_PLACE_REPLICATE);
    cr_expect(p[2].kind == LDT_PLACE_PARTIAL && p[2].op == LDT_REDUCE_SUM);
    cr_expect(p[3].op == LDT_REDUCE_AVG && p[4].op == LDT_REDUCE_MAX && p[5].op == LDT_REDUCE_MIN);
    cr_expect(p[6].kind == LDT_PLACE_INTERLEAVED_SHARD && p[6].dim == 1 && p[6].blocks == 3);
    cr_expect(p[7].kind == LDT_PLACE_SHARD && p[7].dim == 1, "S-1 normalised to S%d", p[7].dim);
    ldt_placements_format(p, n, buf, sizeof buf);
    cr_expect_str_eq(buf, "S0,R,P,Pavg,Pmax,Pmin,IS1:3,S1");
    cr_assert_eq(ldt_placements_parse("[Shard(-2), Replicate(), Partial(max), "
                                      "InterleavedShard(0, 2), Psum]",
                                      3, p, 8, &n),
                 LDT_OK, "%s", ldt_last_error());
    ldt_placements_format(p, n, buf, sizeof buf);
    cr_expect_str_eq(buf, "S1,R,Pmax,IS0:2,P");
    {
        ldt_placement a = ldt_shard(1), b = ldt_shard(1), c = ldt_partial(LDT_REDUCE_MAX);
        cr_expect(ldt_placement_equal(&a, &b));
        cr_expect(!ldt_placement_equal(&a, &c));
    }
}

Test(placement, bad_text) {
    static const struct {
        const char *text;
        const char *needle;
    } bad[] = {{"S2", "out of range for a 2-dim tensor"},
               {"S-3", "out of range"},
               {"X", "unknown placement"},
               {"S0,", "trailing"},
               {"IS0", "':k'"},
               {"IS0:0", "block count"},
               {"Pfoo", "unknown placement"},
               {"Partial(prod)", "unknown 'prod'"},
               {"S0 R", "expected ','"},
               {"", "none given"},
               {"R,R,R,R,R,R,R,R,R", "more than 8"}};
    ldt_placement p[8];
    int n;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(ldt_placements_parse(bad[i].text, 2, p, 8, &n), LDT_ERR_INVALID_ARGUMENT,
                     "'%s' accepted", bad[i].text);
        cr_expect(strstr(ldt_last_error(), bad[i].needle) != NULL, "'%s': %s", bad[i].text,
                  ldt_last_error());
    }
    cr_expect_eq(ldt_placements_parse("S-1", -1, p, 8, &n), LDT_ERR_INVALID_ARGUMENT);
}

static ldt_status spec_from(const char *mesh, const char *shape, const char *pl, ldt_dtype dt,
                            ldt_spec *spec, ldt_mesh **m) {
    ldt_shape s;
    ldt_placement p[8];
    int n;
    ldt_status st;
    if ((st = ldt_mesh_parse(mesh, LDT_DEVICE_CPU, m)) != LDT_OK) return st;
    if ((st = ldt_shape_parse(shape, &s)) != LDT_OK) return st;
    if ((st = ldt_placements_parse(pl, s.ndim, p, 8, &n)) != LDT_OK) return st;
    return ldt_spec_init(spec, *m, &s, p, n, dt);
}

Test(spec, validation_errors) {
    static const struct {
        const char *mesh, *shape, *pl;
        ldt_status st;
        const char *needle;
    } rows[] = {
        {"2x2", "8,6", "S0", LDT_ERR_INVALID_ARGUMENT, "1 placements for mesh 2x2 with 2 dims"},
        {"2x2", "8,6", "S0,S2", LDT_ERR_INVALID_ARGUMENT, "dim 2 is out of range for a 2-dim tensor"},
        {"2", "7,6", "IS0:2", LDT_ERR_INVALID_ARGUMENT, "split into 2 equal blocks"},
        {"2x2", "6,6", "IS0:3,S0", LDT_ERR_INVALID_ARGUMENT, "sharded again"},
        {"2x2", "6,6", "Pmax,P", LDT_ERR_INVALID_ARGUMENT, "mixed Partial ops"},
        {"2x2", "4294967296,4294967296", "R,R", LDT_ERR_OVERFLOW, "exceeds"},
        {"2x2", "1152921504606846976,4", "R,R", LDT_ERR_OVERFLOW, "byte count"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_spec spec;
        ldt_mesh *m = NULL;
        ldt_status st = spec_from(rows[i].mesh, rows[i].shape, rows[i].pl, LDT_F32, &spec, &m);
        cr_expect_eq(st, rows[i].st, "%s %s %s gave %d: %s", rows[i].mesh, rows[i].shape,
                     rows[i].pl, st, ldt_last_error());
        cr_expect(strstr(ldt_last_error(), rows[i].needle) != NULL, "%s: %s", rows[i].pl,
                  ldt_last_error());
        ldt_mesh_destroy(m);
    }
    {
        ldt_spec spec;
        ldt_mesh *m = NULL;
        char buf[128];
        cr_assert_eq(spec_from("2x2", "6,6", "P,Pavg", LDT_BF16, &spec, &m), LDT_OK); /* sum+avg */
        ldt_mesh_destroy(m);
        cr_assert_eq(spec_from("2x2", "6,6", "S-1,IS0:2", LDT_BF16, &spec, &m), LDT_OK);
        cr_expect_eq(spec.placements[0].dim, 1);
        cr_expect(spec.stride[0] == 6 && spec.stride[1] == 1);
        ldt_spec_format(&spec, buf, sizeof buf);
        cr_expect_str_eq(buf, "[6,6] bf16 (S1,IS0:2) on 2x2");
        {
            /* negative dims from the constructors are normalised by spec_init */
            ldt_placement q[2] = {ldt_shard(-2), ldt_interleaved_shard(-1, 3)};
            ldt_spec s2;
            cr_assert_eq(ldt_spec_init(&s2, m, &spec.shape, q, 2, LDT_F32), LDT_OK);
            cr_expect(s2.placements[0].dim == 0 && s2.placements[1].dim == 1);
            q[0] = ldt_shard(-3);
            cr_expect_eq(ldt_spec_init(&s2, m, &spec.shape, q, 2, LDT_F32),
                         LDT_ERR_INVALID_ARGUMENT);
        }
        spec.dtype = (ldt_dtype)77;
        cr_expect_eq(ldt_spec_check(&spec), LDT_ERR_INVALID_ARGUMENT);
        ldt_mesh_destroy(m);
    }
}

/* ---- the host watch (core/sysmem.h): other processes' CPU time over an interval ---------- */

static double ru_cpu_s(const struct rusage *u) {
    return (double)u->ru_utime.tv_sec + u->ru_utime.tv_usec * 1e-6 + (double)u->ru_stime.tv_sec +
           u->ru_stime.tv_usec * 1e-6;
}

/* A child process that spins 0.5 s of its own CPU while the watch runs is another process:
 * the watch counts at least that much (the kernel's rusage of the child, less the clock
 * ticks' rounding), and no more than the cores could give; this process, asleep in waitpid,
 * used next to none. */
Test(host_watch, counts_another_process) {
    ldt__host_watch w = {0};
    struct rusage r0, r1;
    int status = 0;
    pid_t pid;
    cr_assert_eq(getrusage(RUSAGE_CHILDREN, &r0), 0);
    ldt__host_watch_start(&w);
    if (!w.known) cr_skip_test("no /proc/stat on this system");
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct timespec t;
        volatile double x = 1;
        do {
            for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        } while ((double)t.tv_sec + t.tv_nsec * 1e-9 < 0.5);
        _exit(0);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    ldt__host_watch_stop(&w);
    cr_assert_eq(getrusage(RUSAGE_CHILDREN, &r1), 0);
    double child = ru_cpu_s(&r1) - ru_cpu_s(&r0);
    cr_expect_geq(child, 0.45, "the child spun %g s", child);
    cr_expect_gt(w.cores, 0);
    cr_expect_geq(w.wall_s, child / w.cores, "wall %g s, the child's CPU %g s", w.wall_s, child);
    cr_expect_geq(w.others_cpu_s, 0.8 * child, "others %g s, the child alone %g s", w.others_cpu_s, child);
    cr_expect_leq(w.others_cpu_s, w.wall_s * w.cores * 1.05 + 0.05, "others %g s over %g s on %d cores",
                  w.others_cpu_s, w.wall_s, w.cores);
    cr_expect_lt(w.own_cpu_s, 0.2, "this process %g s", w.own_cpu_s);
    cr_expect_lt(fabs(w.others_share - w.others_cpu_s / (w.wall_s * w.cores)), 1e-12);
}

/* The cores' round trip: a time per trip when the machine has two CPUs (a cache line's trip
 * between cores is tens to hundreds of nanoseconds on idle cores; on busy ones a run counts
 * with 100 trips in 250 ms, so under 2.5 ms; with eight busy loops on 2 cores one probe in
 * four still got -1), -1 with one CPU; only with probe set, at start and at stop. */
Test(host_watch, times_a_round_trip_between_two_cores) {
    ldt__host_watch w = {0};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double rt = ldt__core_round_trip_ns();
    if (cpus < 2) {
        cr_expect_eq(rt, -1);
    } else {
        /* cores busy enough that the two threads seldom run at once give -1: try again */
        for (int k = 0; k < 5 && rt == -1; k++) rt = ldt__core_round_trip_ns();
        if (rt == -1) cr_skip_test("the cores are too busy to time a round trip (-1 six times)");
        cr_expect(rt > 1 && rt < 3e6, "round trip %g ns", rt);
    }
    ldt__host_watch_start(&w);
    ldt__host_watch_stop(&w);
    cr_expect_eq(w.round_trip_ns[0], -1, "no probe asked: %g", w.round_trip_ns[0]);
    cr_expect_eq(w.round_trip_ns[1], -1);
    w.probe = 1;
    ldt__host_watch_start(&w);
    ldt__host_watch_stop(&w);
    for (int i = 0; i < 2; i++)
        cr_expect(w.round_trip_ns[i] == -1 || (cpus >= 2 && w.round_trip_ns[i] > 1 && w.round_trip_ns[i] < 3e6),
                  "reading %d: %g ns", i, w.round_trip_ns[i]);
    /* more than 1.5x apart is a shift; unknown readings never are */
    cr_expect(!ldt__round_trip_shifted(100, 149));
    cr_expect(!ldt__round_trip_shifted(149, 100));
    cr_expect(ldt__round_trip_shifted(100, 151));
    cr_expect(ldt__round_trip_shifted(500, 110));
    cr_expect(!ldt__round_trip_shifted(-1, 500));
    cr_expect(!ldt__round_trip_shifted(110, 0));
}

/* ---- ldt__copy, ldt__move ---------------------------------------------------------------- */

/* Every size around the aliased path's threshold and its 64-byte blocks, at every relative
 * offset of destination to source modulo 4 KiB that takes the block loop (1 to 63) and some
 * that do not, each against a byte-by-byte copy of a pattern, with the bytes around the
 * destination untouched. */
Test(copy, equals_a_byte_copy_at_every_aliased_offset) {
    static const size_t sizes[] = {0, 1, 63, 64, 65, 1023, 1024, 1025, 1087, 4096, 4161, 70000};
    static const size_t rels[] = {0, 1, 8, 15, 16, 31, 32, 48, 63, 64, 65, 2048, 4095};
    size_t cap = 20 * 4096; /* aligned_alloc: a multiple of the alignment */
    unsigned char *src = aligned_alloc(4096, cap), *dst = aligned_alloc(4096, cap + 4096);
    cr_assert(src && dst);
    for (size_t i = 0; i < cap; i++) src[i] = (unsigned char)(i * 131u + 7u);
    for (size_t a = 0; a < sizeof rels / sizeof rels[0]; a++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            size_t n = sizes[z], so = 4096 - 1 - a, off = so + rels[a]; /* dst - src = rels[a] mod 4 KiB */
            memset(dst, 0xA5, cap + 4096);
            ldt__copy(dst + off, src + so, n);
            cr_expect_eq(ldt__copy_aliased(dst + off, src + so, n), n >= 1024 && rels[a] >= 1 && rels[a] <= 63);
            int bad = 0;
            for (size_t i = 0; i < n && !bad; i++) bad = dst[off + i] != src[so + i];
            cr_expect(!bad, "copy of %zu bytes, destination %zu past the source: bytes differ", n, rels[a]);
            cr_expect(off == 0 || dst[off - 1] == 0xA5, "byte before the destination written (n %zu)", n);
            cr_expect(dst[off + n] == 0xA5, "byte after the destination written (n %zu, rel %zu)", n, rels[a]);
        }
    free(src);
    free(dst);
}

/* ldt__move: overlapping ranges either way give what memmove of a copy would. */
Test(copy, move_handles_overlap_either_way) {
    enum { N = 9000 };
    static const long shifts[] = {-4097, -64, -16, -1, 0, 1, 16, 63, 64, 4097, 9000};
    unsigned char *buf = malloc(3 * N), *ref = malloc(3 * N);
    cr_assert(buf && ref);
    for (size_t k = 0; k < sizeof shifts / sizeof shifts[0]; k++)
        for (size_t n = 1000; n <= 5000; n += 4000) {
            for (size_t i = 0; i < 3 * N; i++) buf[i] = ref[i] = (unsigned char)(i * 37u + 11u);
            size_t s = N, d = (size_t)((long)N + shifts[k]);
            /* the reference: byte by byte through a temporary */
            unsigned char *tmp = malloc(n);
            cr_assert(tmp);
            for (size_t i = 0; i < n; i++) tmp[i] = ref[s + i];
            for (size_t i = 0; i < n; i++) ref[d + i] = tmp[i];
            free(tmp);
            ldt__move(buf + d, buf + s, n);
            cr_expect(memcmp(buf, ref, 3 * N) == 0, "move of %zu bytes by %ld differs", n, shifts[k]);
        }
    free(buf);
    free(ref);
}
