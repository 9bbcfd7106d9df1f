/* Indexing CPU kernels against naive loops written here: hand cases, random shapes, dims, dtypes and negative indices, and every error path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static const ldt_dtype k_all[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                  LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};
#define NALL (int)(sizeof k_all / sizeof *k_all)
#define NACC (NALL - 1) /* k_all without bool: the dtypes that accumulate */

typedef struct tens {
    ldt__operand o;
    int64_t n;
} tens;

/* ---------------------------------------------------------------------------------------
 * Tensors, element access, multi-indices.
 */

static tens mk(ldt_dtype t, const ldt_shape *s) {
    tens x;
    x.o.shape = *s;
    x.o.dtype = t;
    cr_assert(ldt_shape_numel(s, &x.n) == LDT_OK, "bad shape %s", ldt_test_fmt_shape(s));
    size_t bytes = (size_t)(x.n > 0 ? x.n : 1) * ldt_dtype_size(t);
    x.o.data = malloc(bytes);
    cr_assert(x.o.data);
    memset(x.o.data, 0xee, bytes); /* a sentinel the kernel must overwrite */
    return x;
}

static void rm(tens *x) { free(x->o.data); }

/* Random bytes: any bit pattern, NaNs too, which a copy must keep. */
static tens mk_bytes(ldt_dtype t, const ldt_shape *s, uint64_t *st) {
    tens x = mk(t, s);
    for (size_t i = 0; i < (size_t)x.n * ldt_dtype_size(t); i++)
        ((uint8_t *)x.o.data)[i] = (uint8_t)ldt_test_rand(st);
    return x;
}

static double getd(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt_f16_to_f32(((const uint16_t *)p)[i]);
    case LDT_BF16: return ldt_bf16_to_f32(((const uint16_t *)p)[i]);
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static void setd(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt_f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)p)[i] = ldt_f32_to_bf16((float)v); break;
    case LDT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: ((uint8_t *)p)[i] = (uint8_t)v; break;
    }
}

/* Small integers in [lo, hi] (u8: [0, hi]): sums of a few stay exact in every dtype, so an
 * accumulation matches the f64 reference whatever its order. */
static tens mk_small(ldt_dtype t, const ldt_shape *s, uint64_t *st, int lo, int hi) {
    tens x = mk(t, s);
    if (t == LDT_U8) lo = 0;
    for (int64_t i = 0; i < x.n; i++) setd(t, x.o.data, i, (double)ldt_test_range(st, lo, hi));
    return x;
}

/* Indices in [-n, n) of dtype t (i32 or i64); n = 0 needs an empty shape. */
static tens mk_index(ldt_dtype t, const ldt_shape *s, int64_t n, uint64_t *st) {
    tens x = mk(t, s);
    for (int64_t i = 0; i < x.n; i++) {
        int64_t v = ldt_test_range(st, -n, n - 1);
        if (t == LDT_I32) ((int32_t *)x.o.data)[i] = (int32_t)v;
        else ((int64_t *)x.o.data)[i] = v;
    }
    return x;
}

static int64_t ixv(const tens *ix, int64_t i, int64_t n) {
    int64_t v = ix->o.dtype == LDT_I32 ? ((const int32_t *)ix->o.data)[i]
                                       : ((const int64_t *)ix->o.data)[i];
    return v < 0 ? v + n : v;
}

static void unravel(const ldt_shape *s, int64_t i, int64_t *idx) {
    for (int d = s->ndim - 1; d >= 0; d--) {
        idx[d] = i % s->dims[d];
        i /= s->dims[d];
    }
}

static int64_t ravel(const ldt_shape *s, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < s->ndim; d++) off = off * s->dims[d] + idx[d];
    return off;
}

static ldt_shape rnd_shape(uint64_t *st, int min_nd, int max_nd) {
    ldt_shape s = {(int)ldt_test_range(st, min_nd, max_nd), {0}};
    for (int d = 0; d < s.ndim; d++)
        s.dims[d] = ldt_test_range(st, 0, 15) == 0 ? 0 : ldt_test_range(st, 1, 5);
    return s;
}

static ldt_dtype rnd_ixdt(uint64_t *st) { return ldt_test_range(st, 0, 1) ? LDT_I64 : LDT_I32; }

static ldt_status run(int op, const ldt__attrs *at, int nin, const ldt__operand *in,
                      ldt__operand out) {
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.attrs = at;
    c.nin = nin;
    c.in = in;
    c.out = out;
    return ldt__k_index(&c);
}

static ldt__attrs attrs_of(int64_t i0, int64_t i1) {
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = i0;
    a.i[1] = i1;
    return a;
}

/* Byte comparison of out with want (same dtype and count); prints the first few. */
static int cmp_bytes(const tens *out, const void *want, const char *what) {
    size_t es = ldt_dtype_size(out->o.dtype);
    int bad = 0;
    for (int64_t i = 0; i < out->n; i++) {
        const uint8_t *g = (const uint8_t *)out->o.data + i * (int64_t)es;
        const uint8_t *w = (const uint8_t *)want + i * (int64_t)es;
        if (memcmp(g, w, es) == 0) continue;
        if (bad++ < 6) {
            char gs[24] = "", ws[24] = "";
            for (size_t b = 0; b < es; b++) {
                sprintf(gs + 2 * b, "%02x", g[es - 1 - b]);
                sprintf(ws + 2 * b, "%02x", w[es - 1 - b]);
            }
            fprintf(stderr, "%s: element %lld is 0x%s, want 0x%s\n", what, (long long)i, gs, ws);
        }
    }
    return bad;
}

/* Value comparison of out with the f64 reference; prints the first few. */
static int cmp_vals(const tens *out, const double *want, const char *what) {
    int bad = 0;
    for (int64_t i = 0; i < out->n; i++) {
        double g = getd(out->o.dtype, out->o.data, i);
        if (g == want[i]) continue;
        if (bad++ < 6)
            fprintf(stderr, "%s: element %lld is %.17g, want %.17g\n", what, (long long)i, g,
                    want[i]);
    }
    return bad;
}

/* The status and, when needle is set, a message containing it. */
static void expect_err(ldt_status got, ldt_status want, const char *needle, const char *what) {
    cr_expect_eq(got, want, "%s: status %d, want %d (message: %s)", what, (int)got, (int)want,
                 ldt_last_error());
    if (needle)
        cr_expect(strstr(ldt_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"",
                  what, ldt_last_error(), needle);
}

#define OPND(ptr, dt, ...) ((ldt__operand){(ptr), ldt_test_shape(__VA_ARGS__), (dt)})

/* ---------------------------------------------------------------------------------------
 * Hand-computed cases.
 */

Test(hand, embedding_3x4) {
    float w[12] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}, out[16];
    int64_t ids[4] = {2, 0, -1, 1};
    const float want[16] = {20, 21, 22, 23, 0, 1, 2, 3, 20, 21, 22, 23, 10, 11, 12, 13};
    ldt__operand in[2] = {OPND(w, LDT_F32, 2, 3, 4), OPND(ids, LDT_I64, 2, 2, 2)};
    cr_assert_eq(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 3, 2, 2, 4)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 16; i++) cr_expect_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
}

Test(hand, one_hot_of_0_2_1) {
    int32_t ids[3] = {0, 2, 1};
    const int want[9] = {1, 0, 0, 0, 0, 1, 0, 1, 0};
    ldt__attrs a = attrs_of(3, 0);
    ldt__operand in = OPND(ids, LDT_I32, 1, 3);
    static const ldt_dtype outs[] = {LDT_I64, LDT_I32, LDT_F32, LDT_F64, LDT_F16, LDT_BF16, LDT_U8, LDT_BOOL};
    for (int k = 0; k < 8; k++) {
        tens o = mk(outs[k], &(ldt_shape){2, {3, 3}});
        cr_assert_eq(run(LDT_OP_ONE_HOT, &a, 1, &in, o.o), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 9; i++)
            cr_expect_eq(getd(outs[k], o.o.data, i), want[i], "one_hot %s [%d] = %g, want %d",
                         ldt_dtype_name(outs[k]), i, getd(outs[k], o.o.data, i), want[i]);
        rm(&o);
    }
}

Test(hand, gather_dim1_of_2x3) {
    float x[6] = {1, 2, 3, 4, 5, 6}, out[4];
    int32_t ix[4] = {2, 0, 1, -3}; /* [[2,0],[1,-3]] */
    const float want[4] = {3, 1, 5, 4};
    ldt__attrs a = attrs_of(1, 0);
    ldt__operand in[2] = {OPND(x, LDT_F32, 2, 2, 3), OPND(ix, LDT_I32, 2, 2, 2)};
    cr_assert_eq(run(LDT_OP_GATHER, &a, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 4; i++) cr_expect_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
    /* a negative dim counts from the end too */
    a.i[0] = -1;
    memset(out, 0, sizeof out);
    cr_assert_eq(run(LDT_OP_GATHER, &a, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 4; i++) cr_expect_eq(out[i], want[i], "dim -1: out[%d] = %g", i, out[i]);
}

Test(hand, index_select_rows_and_columns) {
    int64_t x[6] = {1, 2, 3, 4, 5, 6}, out[6]; /* [3,2] */
    int64_t rows[3] = {2, -3, 2}, cols[2] = {1, 1};
    const int64_t want_r[6] = {5, 6, 1, 2, 5, 6}, want_c[6] = {2, 2, 4, 4, 6, 6};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[2] = {OPND(x, LDT_I64, 2, 3, 2), OPND(rows, LDT_I64, 1, 3)};
    cr_assert_eq(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_I64, 2, 3, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want_r[i], "rows: out[%d] = %lld", i, (long long)out[i]);
    a.i[0] = 1;
    in[1] = OPND(cols, LDT_I64, 1, 2);
    cr_assert_eq(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_I64, 2, 3, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want_c[i], "cols: out[%d] = %lld", i, (long long)out[i]);
}

Test(hand, scatter_add_duplicates_sum) {
    float x[5] = {0}, out[5], src[5] = {1, 2, 3, 4, 5};
    int64_t ix[5] = {0, 1, 0, 3, -5};
    const float want[5] = {9, 2, 0, 4, 0};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(x, LDT_F32, 1, 5), OPND(ix, LDT_I64, 1, 5), OPND(src, LDT_F32, 1, 5)};
    cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(out, LDT_F32, 1, 5)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 5; i++) cr_expect_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
    /* 2-D along dim 0: out[index[i][j]][j] += src[i][j] */
    float x2[6] = {0}, o2[6], s2[6] = {1, 2, 3, 4, 5, 6};
    int32_t i2[6] = {1, 0, 1, 1, 1, 0};
    const float w2[6] = {0, 2, 6, 5, 5, 3};
    ldt__operand in2[3] = {OPND(x2, LDT_F32, 2, 2, 3), OPND(i2, LDT_I32, 2, 2, 3), OPND(s2, LDT_F32, 2, 2, 3)};
    cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, in2, OPND(o2, LDT_F32, 2, 2, 3)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(o2[i], w2[i], "2-D: out[%d] = %g, want %g", i, o2[i], w2[i]);
    /* in place (out is x) gives the same */
    cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, in2, OPND(x2, LDT_F32, 2, 2, 3)), LDT_OK);
    for (int i = 0; i < 6; i++) cr_expect_eq(x2[i], w2[i], "in place: out[%d] = %g", i, x2[i]);
}

Test(hand, scatter_last_write_wins_and_small_index) {
    int32_t x[6] = {1, 1, 1, 1, 1, 1}, out[6], src[9] = {5, 6, 7, 8, 9, 10, 11, 12, 13};
    int64_t ix[2] = {1, 1}; /* [1,2] of a [3,3] src along dim 0 of a [2,3] x */
    const int32_t want[6] = {1, 1, 1, 5, 6, 1};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(x, LDT_I32, 2, 2, 3), OPND(ix, LDT_I64, 2, 1, 2),
                          OPND(src, LDT_I32, 2, 3, 3)};
    cr_assert_eq(run(LDT_OP_SCATTER, &a, 3, in, OPND(out, LDT_I32, 2, 2, 3)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want[i], "out[%d] = %d, want %d", i, out[i], want[i]);
    int64_t dup[3] = {2, 2, -2}; /* along dim 1: out[0][2] = 5, then 6; out[0][1] = 7 */
    const int32_t want2[6] = {1, 7, 6, 1, 1, 1};
    a.i[0] = 1;
    in[1] = OPND(dup, LDT_I64, 2, 1, 3);
    cr_assert_eq(run(LDT_OP_SCATTER, &a, 3, in, OPND(out, LDT_I32, 2, 2, 3)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want2[i], "dup: out[%d] = %d, want %d", i, out[i], want2[i]);
}

Test(hand, index_add_duplicates) {
    double x[6] = {1, 1, 1, 1, 1, 1}, out[6], src[6] = {1, 2, 3, 4, 5, 6}; /* x [3,2], src [3,2] */
    int32_t ix[3] = {0, 2, -3};
    const double want[6] = {1 + 1 + 5, 1 + 2 + 6, 1, 1, 1 + 3, 1 + 4};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(x, LDT_F64, 2, 3, 2), OPND(ix, LDT_I32, 1, 3), OPND(src, LDT_F64, 2, 3, 2)};
    cr_assert_eq(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_F64, 2, 3, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
}

Test(hand, index_put_accumulate_and_last_wins) {
    float x[6] = {0}, out[6], v[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* x [3,2], values [4,2] */
    int64_t rows[4] = {0, 2, 0, -3};
    const float want_acc[6] = {1 + 5 + 7, 2 + 6 + 8, 0, 0, 3, 4}, want_put[6] = {7, 8, 0, 0, 3, 4};
    ldt__attrs a = attrs_of(1, 1);
    ldt__operand in[3] = {OPND(x, LDT_F32, 2, 3, 2), OPND(v, LDT_F32, 2, 4, 2), OPND(rows, LDT_I64, 1, 4)};
    cr_assert_eq(run(LDT_OP_INDEX_PUT, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want_acc[i], "acc: out[%d] = %g, want %g", i, out[i], want_acc[i]);
    a.i[0] = 0;
    cr_assert_eq(run(LDT_OP_INDEX_PUT, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_OK);
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], want_put[i], "put: out[%d] = %g, want %g", i, out[i], want_put[i]);
    /* two index tensors and a 0-dim value broadcast: x[0][2] += 10 twice, x[1][2] += 10 */
    int32_t x2[6] = {0}, o2[6], ten = 10, r[3] = {0, 1, 0}, cl[3] = {2, -1, -1};
    const int32_t w2[6] = {0, 0, 20, 0, 0, 10};
    ldt__attrs a2 = attrs_of(1, 2);
    ldt__operand in2[4] = {OPND(x2, LDT_I32, 2, 2, 3), OPND(&ten, LDT_I32, 0),
                           OPND(r, LDT_I32, 1, 3), OPND(cl, LDT_I32, 1, 3)};
    cr_assert_eq(run(LDT_OP_INDEX_PUT, &a2, 4, in2, OPND(o2, LDT_I32, 2, 2, 3)), LDT_OK, "%s",
                 ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(o2[i], w2[i], "two indices: out[%d] = %d, want %d", i, o2[i], w2[i]);
}

Test(hand, integers_wrap) {
    int32_t x32 = INT32_MAX, o32, s32 = 1;
    int64_t x64 = INT64_MAX, o64, s64 = 2, ix = 0;
    uint8_t x8 = 250, o8, s8 = 10;
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(&x32, LDT_I32, 1, 1), OPND(&ix, LDT_I64, 1, 1), OPND(&s32, LDT_I32, 1, 1)};
    cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(&o32, LDT_I32, 1, 1)), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(o32, INT32_MIN, "i32: %d", o32);
    in[0] = OPND(&x64, LDT_I64, 1, 1);
    in[2] = OPND(&s64, LDT_I64, 1, 1);
    cr_assert_eq(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(&o64, LDT_I64, 1, 1)), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(o64, INT64_MIN + 1, "i64: %lld", (long long)o64);
    a = attrs_of(1, 1);
    ldt__operand in3[3] = {OPND(&x8, LDT_U8, 1, 1), OPND(&s8, LDT_U8, 1, 1), OPND(&ix, LDT_I64, 1, 1)};
    cr_assert_eq(run(LDT_OP_INDEX_PUT, &a, 3, in3, OPND(&o8, LDT_U8, 1, 1)), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(o8, 4, "u8: %d", o8);
}

/* Halves accumulate through f32 and round after every addition (documented in index.c):
 * bf16 256 + 1 is a tie that rounds back to 256, so four additions of 1 leave 256 where
 * one rounding of the f32 sum would give 260; f16 2048 + 1 likewise stays 2048. */
Test(hand, halves_round_after_each_addition) {
    static const ldt_dtype ts[2] = {LDT_BF16, LDT_F16};
    static const float base[2] = {256, 2048};
    int64_t ix[4] = {0, 0, 0, 0};
    ldt__attrs a = attrs_of(0, 0);
    for (int k = 0; k < 2; k++) {
        int bf = ts[k] == LDT_BF16;
        uint16_t one = bf ? ldt_f32_to_bf16(1) : ldt_f32_to_f16(1), o = 0;
        uint16_t x = bf ? ldt_f32_to_bf16(base[k]) : ldt_f32_to_f16(base[k]), s[4] = {one, one, one, one};
        ldt__operand in[3] = {OPND(&x, ts[k], 1, 1), OPND(ix, LDT_I64, 1, 4), OPND(s, ts[k], 1, 4)};
        cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(&o, ts[k], 1, 1)), LDT_OK, "%s", ldt_last_error());
        float got = bf ? ldt_bf16_to_f32(o) : ldt_f16_to_f32(o);
        cr_expect_eq(got, base[k], "%s: %g, want %g", ldt_dtype_name(ts[k]), got, base[k]);
    }
}

Test(hand, empty_tensors) {
    float w[6] = {1, 2, 3, 4, 5, 6}, out[6];
    int64_t none[1] = {0};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(w, LDT_F32, 2, 3, 2), OPND(none, LDT_I64, 1, 0)};
    cr_expect_eq(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 0, 2)), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_F32, 2, 0, 2)), LDT_OK, "%s", ldt_last_error());
    /* index_add with no entries is a copy */
    in[2] = OPND(w, LDT_F32, 2, 0, 2);
    memset(out, 0, sizeof out);
    cr_expect_eq(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < 6; i++) cr_expect_eq(out[i], w[i], "out[%d] = %g", i, out[i]);
}

/* ---------------------------------------------------------------------------------------
 * Random shapes, dims and dtypes against the naive loops.
 */

Test(random, embedding_and_one_hot) {
    uint64_t st = 101;
    int bad = 0;
    char what[160];
    for (int r = 0; r < ldt_test_cases(200); r++) {
        ldt_dtype t = k_all[r % NALL];
        int64_t V = ldt_test_range(&st, 1, 9), H = ldt_test_range(&st, 0, 6);
        ldt_shape ws = {2, {V, H}}, is = rnd_shape(&st, 0, 3), os = is;
        os.dims[os.ndim++] = H;
        tens w = mk_bytes(t, &ws, &st), ix = mk_index(rnd_ixdt(&st), &is, V, &st), o = mk(t, &os);
        char *want = malloc((size_t)(o.n > 0 ? o.n : 1) * ldt_dtype_size(t));
        size_t row = (size_t)H * ldt_dtype_size(t);
        for (int64_t i = 0; i < ix.n; i++)
            memcpy(want + (size_t)i * row, (char *)w.o.data + (size_t)ixv(&ix, i, V) * row, row);
        snprintf(what, sizeof what, "embedding %s w %s idx %s", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&ws), ldt_test_fmt_shape(&is));
        cr_assert_eq(run(LDT_OP_EMBEDDING, NULL, 2, (ldt__operand[]){w.o, ix.o}, o.o), LDT_OK,
                     "%s: %s", what, ldt_last_error());
        bad += cmp_bytes(&o, want, what);
        free(want);
        rm(&o);

        /* one_hot of the same indices, V classes, in a random output dtype */
        ldt_shape hs = is;
        hs.dims[hs.ndim++] = V;
        ldt_dtype ht = k_all[ldt_test_range(&st, 0, NALL - 1)];
        ldt__attrs a = attrs_of(V, 0);
        tens h = mk(ht, &hs);
        double *hw = calloc((size_t)(h.n > 0 ? h.n : 1), sizeof *hw);
        for (int64_t i = 0; i < ix.n; i++) hw[i * V + ixv(&ix, i, V)] = 1;
        snprintf(what, sizeof what, "one_hot -> %s idx %s classes %lld", ldt_dtype_name(ht),
                 ldt_test_fmt_shape(&is), (long long)V);
        cr_assert_eq(run(LDT_OP_ONE_HOT, &a, 1, &ix.o, h.o), LDT_OK, "%s: %s", what, ldt_last_error());
        bad += cmp_vals(&h, hw, what);
        free(hw);
        rm(&h), rm(&w), rm(&ix);
    }
    cr_assert_eq(bad, 0, "%d elements differ", bad);
}

/* index_select (copies, every dtype) and index_add (small integers, every dtype but bool). */
Test(random, index_select_and_index_add) {
    uint64_t st = 202;
    int bad = 0;
    char what[200];
    int64_t oi[LDT_MAX_DIMS];
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_shape xs = rnd_shape(&st, 1, 4);
        int dim = (int)ldt_test_range(&st, 0, xs.ndim - 1);
        int64_t n = xs.dims[dim], L = n == 0 ? 0 : ldt_test_range(&st, 0, 7);
        ldt_shape is = {1, {L}}, os = xs;
        os.dims[dim] = L;
        tens ix = mk_index(rnd_ixdt(&st), &is, n, &st);
        ldt__attrs a = attrs_of(r % 3 == 0 ? dim - xs.ndim : dim, 0); /* negative dims too */

        ldt_dtype t = k_all[r % NALL];
        tens x = mk_bytes(t, &xs, &st), o = mk(t, &os);
        size_t es = ldt_dtype_size(t);
        char *want = malloc((size_t)(o.n > 0 ? o.n : 1) * es);
        for (int64_t i = 0; i < o.n; i++) {
            unravel(&os, i, oi);
            oi[dim] = ixv(&ix, oi[dim], n);
            memcpy(want + i * (int64_t)es, (char *)x.o.data + ravel(&xs, oi) * (int64_t)es, es);
        }
        snprintf(what, sizeof what, "index_select %s x %s dim %d idx [%lld]", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&xs), dim, (long long)L);
        cr_assert_eq(run(LDT_OP_INDEX_SELECT, &a, 2, (ldt__operand[]){x.o, ix.o}, o.o), LDT_OK,
                     "%s: %s", what, ldt_last_error());
        bad += cmp_bytes(&o, want, what);
        free(want), rm(&x), rm(&o);

        t = k_all[r % NACC];
        x = mk_small(t, &xs, &st, -8, 8);
        tens src = mk_small(t, &os, &st, -3, 3);
        o = mk(t, &xs);
        double *wv = malloc((size_t)(x.n > 0 ? x.n : 1) * sizeof *wv);
        for (int64_t i = 0; i < x.n; i++) wv[i] = getd(t, x.o.data, i);
        for (int64_t i = 0; i < src.n; i++) {
            unravel(&os, i, oi);
            oi[dim] = ixv(&ix, oi[dim], n);
            wv[ravel(&xs, oi)] += getd(t, src.o.data, i);
        }
        snprintf(what, sizeof what, "index_add %s x %s dim %d idx [%lld]", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&xs), dim, (long long)L);
        cr_assert_eq(run(LDT_OP_INDEX_ADD, &a, 3, (ldt__operand[]){x.o, ix.o, src.o}, o.o), LDT_OK,
                     "%s: %s", what, ldt_last_error());
        bad += cmp_vals(&o, wv, what);
        free(wv), rm(&x), rm(&o), rm(&src), rm(&ix);
    }
    cr_assert_eq(bad, 0, "%d elements differ", bad);
}

/* gather, scatter (bytes, every dtype) and scatter_add (values, every dtype but bool), with
 * an index smaller than x (and src) where torch allows it. */
Test(random, gather_scatter_scatter_add) {
    uint64_t st = 303;
    int bad = 0;
    char what[200];
    int64_t p[LDT_MAX_DIMS];
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_shape xs = rnd_shape(&st, 1, 4), is = xs, ss = xs;
        int dim = (int)ldt_test_range(&st, 0, xs.ndim - 1);
        int64_t n = xs.dims[dim];
        for (int d = 0; d < xs.ndim; d++) {
            is.dims[d] = d == dim ? (n == 0 ? 0 : ldt_test_range(&st, 1, 6))
                                  : ldt_test_range(&st, xs.dims[d] > 0 ? 1 : 0, xs.dims[d]);
            ss.dims[d] = is.dims[d] + ldt_test_range(&st, 0, 2);
        }
        tens ix = mk_index(rnd_ixdt(&st), &is, n, &st);
        ldt__attrs a = attrs_of(dim, 0);

        /* gather */
        ldt_dtype t = k_all[r % NALL];
        size_t es = ldt_dtype_size(t);
        tens x = mk_bytes(t, &xs, &st), o = mk(t, &is);
        char *want = malloc((size_t)((x.n > ix.n ? x.n : ix.n) + 1) * es);
        for (int64_t i = 0; i < ix.n; i++) {
            unravel(&is, i, p);
            p[dim] = ixv(&ix, i, n);
            memcpy(want + i * (int64_t)es, (char *)x.o.data + ravel(&xs, p) * (int64_t)es, es);
        }
        snprintf(what, sizeof what, "gather %s x %s dim %d index %s", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&xs), dim, ldt_test_fmt_shape(&is));
        cr_assert_eq(run(LDT_OP_GATHER, &a, 2, (ldt__operand[]){x.o, ix.o}, o.o), LDT_OK, "%s: %s",
                     what, ldt_last_error());
        bad += cmp_bytes(&o, want, what);
        rm(&o);

        /* scatter: a copy of x, then row-major writes, the last one winning */
        tens src = mk_bytes(t, &ss, &st);
        o = mk(t, &xs);
        memcpy(want, x.o.data, (size_t)x.n * es);
        for (int64_t i = 0; i < ix.n; i++) {
            unravel(&is, i, p);
            int64_t so = ravel(&ss, p);
            p[dim] = ixv(&ix, i, n);
            memcpy(want + ravel(&xs, p) * (int64_t)es, (char *)src.o.data + so * (int64_t)es, es);
        }
        snprintf(what, sizeof what, "scatter %s x %s dim %d index %s src %s", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&xs), dim, ldt_test_fmt_shape(&is), ldt_test_fmt_shape(&ss));
        cr_assert_eq(run(LDT_OP_SCATTER, &a, 3, (ldt__operand[]){x.o, ix.o, src.o}, o.o), LDT_OK,
                     "%s: %s", what, ldt_last_error());
        bad += cmp_bytes(&o, want, what);
        free(want), rm(&o), rm(&src), rm(&x);

        /* scatter_add */
        t = k_all[r % NACC];
        x = mk_small(t, &xs, &st, -8, 8);
        src = mk_small(t, &ss, &st, -3, 3);
        o = mk(t, &xs);
        double *wv = malloc((size_t)(x.n > 0 ? x.n : 1) * sizeof *wv);
        for (int64_t i = 0; i < x.n; i++) wv[i] = getd(t, x.o.data, i);
        for (int64_t i = 0; i < ix.n; i++) {
            unravel(&is, i, p);
            double v = getd(t, src.o.data, ravel(&ss, p));
            p[dim] = ixv(&ix, i, n);
            wv[ravel(&xs, p)] += v;
        }
        snprintf(what, sizeof what, "scatter_add %s x %s dim %d index %s src %s",
                 ldt_dtype_name(t), ldt_test_fmt_shape(&xs), dim, ldt_test_fmt_shape(&is),
                 ldt_test_fmt_shape(&ss));
        cr_assert_eq(run(LDT_OP_SCATTER_ADD, &a, 3, (ldt__operand[]){x.o, ix.o, src.o}, o.o),
                     LDT_OK, "%s: %s", what, ldt_last_error());
        bad += cmp_vals(&o, wv, what);
        free(wv), rm(&o), rm(&src), rm(&x), rm(&ix);
    }
    cr_assert_eq(bad, 0, "%d elements differ", bad);
}

/* index_put with k index tensors and values broadcast to [L, x.dims[k:]], both modes. */
Test(random, index_put) {
    uint64_t st = 404;
    int bad = 0;
    char what[240];
    int64_t q[LDT_MAX_DIMS], xi[LDT_MAX_DIMS], vi[LDT_MAX_DIMS];
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_shape xs = rnd_shape(&st, 1, 4);
        int k = (int)ldt_test_range(&st, 1, xs.ndim), acc = r % 2, empty = 0;
        for (int i = 0; i < k; i++) empty |= xs.dims[i] == 0;
        int64_t L = empty ? 0 : ldt_test_range(&st, 0, 6);
        ldt_shape full = {1 + xs.ndim - k, {L}}, vs;
        for (int d = 1; d < full.ndim; d++) full.dims[d] = xs.dims[k + d - 1];
        vs.ndim = (int)ldt_test_range(&st, 0, full.ndim); /* trailing dims of full, some 1 */
        for (int d = 0; d < vs.ndim; d++) {
            vs.dims[d] = full.dims[full.ndim - vs.ndim + d];
            if (ldt_test_range(&st, 0, 2) == 0) vs.dims[d] = 1;
        }
        ldt_dtype t = acc ? k_all[(r / 2) % NACC] : k_all[(r / 2) % NALL];
        size_t es = ldt_dtype_size(t);
        tens in_t[2 + LDT_MAX_DIMS];
        ldt__operand in[2 + LDT_MAX_DIMS];
        in_t[0] = acc ? mk_small(t, &xs, &st, -8, 8) : mk_bytes(t, &xs, &st);
        in_t[1] = acc ? mk_small(t, &vs, &st, -3, 3) : mk_bytes(t, &vs, &st);
        for (int i = 0; i < k; i++)
            in_t[2 + i] = mk_index(rnd_ixdt(&st), &(ldt_shape){1, {L}}, xs.dims[i], &st);
        for (int i = 0; i < 2 + k; i++) in[i] = in_t[i].o;
        tens x = in_t[0], v = in_t[1], o = mk(t, &xs);
        char *want = malloc((size_t)(x.n > 0 ? x.n : 1) * es);
        double *wv = malloc((size_t)(x.n > 0 ? x.n : 1) * sizeof *wv);
        memcpy(want, x.o.data, (size_t)x.n * es);
        for (int64_t i = 0; i < x.n; i++) wv[i] = getd(t, x.o.data, i);
        int64_t fn;
        cr_assert(ldt_shape_numel(&full, &fn) == LDT_OK);
        for (int64_t f = 0; f < fn; f++) { /* f walks [L, x.dims[k:]] row-major: j is q[0] */
            unravel(&full, f, q);
            for (int i = 0; i < k; i++) xi[i] = ixv(&in_t[2 + i], q[0], xs.dims[i]);
            for (int d = k; d < xs.ndim; d++) xi[d] = q[d - k + 1];
            for (int d = 0; d < vs.ndim; d++)
                vi[d] = vs.dims[d] == 1 ? 0 : q[full.ndim - vs.ndim + d];
            int64_t xo = ravel(&xs, xi), vo = ravel(&vs, vi);
            if (acc)
                wv[xo] += getd(t, v.o.data, vo);
            else
                memcpy(want + xo * (int64_t)es, (char *)v.o.data + vo * (int64_t)es, es);
        }
        ldt__attrs a = attrs_of(acc, k);
        snprintf(what, sizeof what, "index_put%s %s x %s k %d L %lld values %s",
                 acc ? " accumulate" : "", ldt_dtype_name(t), ldt_test_fmt_shape(&xs), k,
                 (long long)L, ldt_test_fmt_shape(&vs));
        cr_assert_eq(run(LDT_OP_INDEX_PUT, &a, 2 + k, in, o.o), LDT_OK, "%s: %s", what,
                     ldt_last_error());
        bad += acc ? cmp_vals(&o, wv, what) : cmp_bytes(&o, want, what);
        free(want), free(wv), rm(&o);
        for (int i = 0; i < 2 + k; i++) rm(&in_t[i]);
    }
    cr_assert_eq(bad, 0, "%d elements differ", bad);
}

/* A larger embedding and index_select, for the row-copy paths. */
Test(random, large_rows) {
    uint64_t st = 505;
    ldt_shape ws = {2, {1000, 96}}, is = {2, {16, 64}}, os = {3, {16, 64, 96}};
    tens w = mk_bytes(LDT_BF16, &ws, &st), ix = mk_index(LDT_I32, &is, 1000, &st), o = mk(LDT_BF16, &os);
    char *want = malloc((size_t)o.n * 2);
    for (int64_t i = 0; i < ix.n; i++)
        memcpy(want + i * 192, (char *)w.o.data + ixv(&ix, i, 1000) * 192, 192);
    cr_assert_eq(run(LDT_OP_EMBEDDING, NULL, 2, (ldt__operand[]){w.o, ix.o}, o.o), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(cmp_bytes(&o, want, "embedding 1000x96 bf16"), 0);
    free(want), rm(&w), rm(&ix), rm(&o);
}

/* ---------------------------------------------------------------------------------------
 * Errors: status, a message naming the op and the culprit, and the output left untouched.
 */

static int untouched(const void *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i++)
        if (((const uint8_t *)p)[i] != 0xee) return 0;
    return 1;
}

Test(errors, bad_index_dtype) {
    float x[6] = {0}, fidx[2] = {0, 1}, out[6];
    uint8_t uidx[2] = {0, 1};
    int64_t good[2] = {0, 1};
    ldt__attrs a = attrs_of(0, 1);
    struct { int op, nin, ixpos; ldt__operand out; } cs[] = {
        {LDT_OP_EMBEDDING, 2, 1, OPND(out, LDT_F32, 2, 2, 2)},
        {LDT_OP_ONE_HOT, 1, 0, OPND(out, LDT_I64, 2, 2, 3)},
        {LDT_OP_INDEX_SELECT, 2, 1, OPND(out, LDT_F32, 2, 2, 2)},
        {LDT_OP_GATHER, 2, 1, OPND(out, LDT_F32, 2, 2, 1)},
        {LDT_OP_SCATTER, 3, 1, OPND(out, LDT_F32, 2, 3, 2)},
        {LDT_OP_SCATTER_ADD, 3, 1, OPND(out, LDT_F32, 2, 3, 2)},
        {LDT_OP_INDEX_ADD, 3, 1, OPND(out, LDT_F32, 2, 3, 2)},
        {LDT_OP_INDEX_PUT, 3, 2, OPND(out, LDT_F32, 2, 3, 2)},
    };
    for (size_t k = 0; k < sizeof cs / sizeof *cs; k++) {
        ldt__operand in[3] = {OPND(x, LDT_F32, 2, 3, 2), OPND(x, LDT_F32, 2, 2, 1), OPND(x, LDT_F32, 2, 2, 1)};
        if (cs[k].op == LDT_OP_INDEX_SELECT || cs[k].op == LDT_OP_INDEX_ADD) in[2] = OPND(x, LDT_F32, 2, 2, 2);
        if (cs[k].op == LDT_OP_ONE_HOT) a.i[0] = 3;
        else if (cs[k].op == LDT_OP_INDEX_PUT) a.i[0] = 0;
        else a.i[0] = 0;
        for (int bad = 0; bad < 2; bad++) {
            ldt_dtype bt = bad ? LDT_U8 : LDT_F32;
            in[cs[k].ixpos] = cs[k].op == LDT_OP_GATHER || cs[k].op == LDT_OP_SCATTER ||
                                      cs[k].op == LDT_OP_SCATTER_ADD
                                  ? (ldt__operand){bad ? (void *)uidx : (void *)fidx, {2, {2, 1}}, bt}
                                  : (ldt__operand){bad ? (void *)uidx : (void *)fidx, {1, {2}}, bt};
            if (cs[k].op == LDT_OP_INDEX_PUT) in[1] = OPND(x, LDT_F32, 1, 2);
            char needle[96], what[64];
            snprintf(needle, sizeof needle, "%s: indices are %s", ldt__builtin_op_name(cs[k].op),
                     ldt_dtype_name(bt));
            snprintf(what, sizeof what, "%s with %s indices", ldt__builtin_op_name(cs[k].op),
                     ldt_dtype_name(bt));
            memset(out, 0xee, sizeof out);
            expect_err(run(cs[k].op, &a, cs[k].nin, in, cs[k].out), LDT_ERR_INVALID_ARGUMENT,
                       needle, what);
            cr_expect(untouched(out, sizeof out), "%s: output written", what);
        }
    }
    /* index_put: the second index tensor is checked too */
    ldt__operand in4[4] = {OPND(x, LDT_F32, 2, 3, 2), OPND(x, LDT_F32, 0), OPND(good, LDT_I64, 1, 2),
                           OPND(fidx, LDT_F32, 1, 2)};
    ldt__attrs a2 = attrs_of(0, 2);
    expect_err(run(LDT_OP_INDEX_PUT, &a2, 4, in4, OPND(out, LDT_F32, 2, 3, 2)),
               LDT_ERR_INVALID_ARGUMENT, "index_put: indices are f32 (input 3)", "index_put idx 1");
}

Test(errors, index_out_of_range_names_value_and_position) {
    float w[20] = {0}, out[64];
    int64_t ids[6] = {0, 1, 2, 3, 4, 12};
    int32_t neg[3] = {0, -10, -11};
    ldt__operand in[3] = {OPND(w, LDT_F32, 2, 10, 2), OPND(ids, LDT_I64, 1, 6)};
    memset(out, 0xee, sizeof out);
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 6, 2)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: index 12 at position 5 is out of range for 10 rows", "embedding 12");
    cr_expect(untouched(out, sizeof out), "embedding: output written before the bad index");
    in[1] = OPND(neg, LDT_I32, 1, 3);
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: index -11 at position 2 is out of range for 10 rows", "embedding -11");

    ldt__attrs a = attrs_of(3, 0);
    int64_t cls[2] = {1, 3};
    ldt__operand oh = OPND(cls, LDT_I64, 1, 2);
    expect_err(run(LDT_OP_ONE_HOT, &a, 1, &oh, OPND(out, LDT_I64, 2, 2, 3)), LDT_ERR_INVALID_ARGUMENT,
               "one_hot: index 3 at position 1 is out of range for 3 classes", "one_hot");

    /* gather, a multi-dim index: the coordinates and the dim are named */
    int64_t gi[6] = {0, 1, 2, 0, 1, 5};
    a = attrs_of(1, 0);
    in[0] = OPND(w, LDT_F32, 2, 2, 3);
    in[1] = OPND(gi, LDT_I64, 2, 2, 3);
    expect_err(run(LDT_OP_GATHER, &a, 2, in, OPND(out, LDT_F32, 2, 2, 3)), LDT_ERR_INVALID_ARGUMENT,
               "gather: index 5 at position 5 [1,2] is out of range for 3 entries of dim 1", "gather");

    /* scatter_add: x is not copied into the output before the check */
    float src[6] = {1, 1, 1, 1, 1, 1};
    in[2] = OPND(src, LDT_F32, 2, 2, 3);
    memset(out, 0xee, sizeof out);
    expect_err(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 2, 3)),
               LDT_ERR_INVALID_ARGUMENT, "scatter_add: index 5 at position 5", "scatter_add");
    cr_expect(untouched(out, sizeof out), "scatter_add: output written before the bad index");

    int32_t si[2] = {-4, 0};
    a = attrs_of(0, 0);
    in[0] = OPND(w, LDT_F32, 2, 3, 2);
    in[1] = OPND(si, LDT_I32, 1, 2);
    expect_err(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_select: index -4 at position 0 is out of range for 3 entries of dim 0", "index_select");
    in[2] = OPND(src, LDT_F32, 2, 2, 2);
    expect_err(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_add: index -4 at position 0", "index_add");

    /* index_put: the tensor and the dim it indexes are named */
    int64_t r[2] = {0, 1}, cl[2] = {1, 2};
    float v = 1;
    ldt__attrs a2 = attrs_of(1, 2);
    ldt__operand in4[4] = {OPND(w, LDT_F32, 2, 3, 2), OPND(&v, LDT_F32, 0), OPND(r, LDT_I64, 1, 2),
                           OPND(cl, LDT_I64, 1, 2)};
    memset(out, 0xee, sizeof out);
    expect_err(run(LDT_OP_INDEX_PUT, &a2, 4, in4, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: index 2 at position 1 of index tensor 1 is out of range for 2 entries of dim 1",
               "index_put");
    cr_expect(untouched(out, sizeof out), "index_put: output written before the bad index");
}

Test(errors, shape_mismatches) {
    float x[64] = {0}, out[64];
    int64_t ix[8] = {0};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[4];
    /* embedding: weight not 2-D; output of the wrong shape; the wrong output dtype */
    in[0] = OPND(x, LDT_F32, 3, 2, 2, 2);
    in[1] = OPND(ix, LDT_I64, 1, 2);
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: weight is [2,2,2], expected [V, H]", "embedding 3-D weight");
    in[0] = OPND(x, LDT_F32, 2, 4, 3);
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 2, 4)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: output is [2,4], expected [2,3]", "embedding out shape");
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F64, 2, 2, 3)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: output is f64, expected f32", "embedding out dtype");
    /* index_select: a 2-D index */
    in[1] = OPND(ix, LDT_I64, 2, 1, 2);
    expect_err(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_F32, 2, 2, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_select: index is [1,2], expected 1-D", "index_select 2-D index");
    /* gather: ndim differs; index larger than x outside dim */
    in[0] = OPND(x, LDT_F32, 2, 4, 3);
    in[1] = OPND(ix, LDT_I64, 1, 2);
    expect_err(run(LDT_OP_GATHER, &a, 2, in, OPND(out, LDT_F32, 1, 2)), LDT_ERR_INVALID_ARGUMENT,
               "gather: index is [2] and x [4,3]", "gather ndim");
    in[1] = OPND(ix, LDT_I64, 2, 2, 4);
    expect_err(run(LDT_OP_GATHER, &a, 2, in, OPND(out, LDT_F32, 2, 2, 4)), LDT_ERR_INVALID_ARGUMENT,
               "gather: index [2,4] is larger than x [4,3] in dim 1", "gather index too big");
    /* scatter: index larger than src; src of another dtype; output not x's shape */
    in[1] = OPND(ix, LDT_I64, 2, 2, 2);
    in[2] = OPND(x, LDT_F32, 2, 1, 3);
    expect_err(run(LDT_OP_SCATTER, &a, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "scatter: index [2,2] is larger than src [1,3] in dim 0", "scatter src too small");
    in[2] = OPND(x, LDT_F64, 2, 2, 2);
    expect_err(run(LDT_OP_SCATTER, &a, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "scatter: src is f64 but x is f32", "scatter src dtype");
    in[2] = OPND(x, LDT_F32, 2, 2, 2);
    expect_err(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_ERR_INVALID_ARGUMENT,
               "scatter_add: output is [2,2], expected [4,3]", "scatter_add out shape");
    /* index_add: src not x's shape with len(index) along dim */
    in[1] = OPND(ix, LDT_I64, 1, 2);
    in[2] = OPND(x, LDT_F32, 2, 2, 2);
    expect_err(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_add: src is [2,2], expected [2,3]", "index_add src");
    /* index_put: index tensors of different lengths; values that do not broadcast; k and
     * the number of inputs disagree; k out of range */
    ldt__attrs p = attrs_of(0, 2);
    in[1] = OPND(x, LDT_F32, 0);
    in[2] = OPND(ix, LDT_I64, 1, 2);
    in[3] = OPND(ix, LDT_I64, 1, 3);
    expect_err(run(LDT_OP_INDEX_PUT, &p, 4, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: index tensor 1 is [3], expected 1-D of length 2", "index_put lengths");
    p = attrs_of(0, 1);
    in[1] = OPND(x, LDT_F32, 2, 2, 2);
    expect_err(run(LDT_OP_INDEX_PUT, &p, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: values [2,2] do not broadcast to [2,3]", "index_put values");
    in[1] = OPND(x, LDT_F32, 3, 1, 2, 3);
    expect_err(run(LDT_OP_INDEX_PUT, &p, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: values [1,2,3] do not broadcast", "index_put values ndim");
    expect_err(run(LDT_OP_INDEX_PUT, &p, 4, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: 4 inputs for 1 index tensors", "index_put nin");
    p = attrs_of(0, 3);
    expect_err(run(LDT_OP_INDEX_PUT, &p, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: 3 index tensors (attrs.i[1]) for x [4,3]", "index_put k");
    in[1] = OPND(x, LDT_I32, 0);
    p = attrs_of(0, 1);
    expect_err(run(LDT_OP_INDEX_PUT, &p, 3, in, OPND(out, LDT_F32, 2, 4, 3)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: values is i32 but x is f32", "index_put values dtype");
}

Test(errors, bool_cannot_accumulate_but_copies) {
    uint8_t x[4] = {0, 1, 0, 1}, src[4] = {1, 1, 1, 1}, out[4];
    int64_t ix[2] = {0, 1};
    ldt__attrs a = attrs_of(0, 0);
    ldt__operand in[3] = {OPND(x, LDT_BOOL, 1, 4), OPND(ix, LDT_I64, 1, 2), OPND(src, LDT_BOOL, 1, 2)};
    expect_err(run(LDT_OP_SCATTER_ADD, &a, 3, in, OPND(out, LDT_BOOL, 1, 4)), LDT_ERR_UNSUPPORTED,
               "scatter_add: cannot accumulate bool", "scatter_add bool");
    expect_err(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_BOOL, 1, 4)), LDT_ERR_UNSUPPORTED,
               "index_add: cannot accumulate bool", "index_add bool");
    cr_expect_eq(run(LDT_OP_SCATTER, &a, 3, in, OPND(out, LDT_BOOL, 1, 4)), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 1 && out[1] == 1 && out[2] == 0 && out[3] == 1, "scatter bool: %d %d %d %d",
              out[0], out[1], out[2], out[3]);
    ldt__attrs p = attrs_of(1, 1);
    ldt__operand pin[3] = {OPND(x, LDT_BOOL, 1, 4), OPND(src, LDT_BOOL, 1, 2), OPND(ix, LDT_I64, 1, 2)};
    expect_err(run(LDT_OP_INDEX_PUT, &p, 3, pin, OPND(out, LDT_BOOL, 1, 4)), LDT_ERR_UNSUPPORTED,
               "index_put: cannot accumulate bool", "index_put bool");
    p.i[0] = 0;
    cr_expect_eq(run(LDT_OP_INDEX_PUT, &p, 3, pin, OPND(out, LDT_BOOL, 1, 4)), LDT_OK, "%s", ldt_last_error());
}

Test(errors, calls_dims_and_attrs) {
    float x[6] = {0}, out[6];
    int64_t ix[2] = {0, 1};
    ldt__attrs a = attrs_of(2, 0);
    ldt__operand in[3] = {OPND(x, LDT_F32, 2, 3, 2), OPND(ix, LDT_I64, 1, 2), OPND(x, LDT_F32, 2, 3, 2)};
    expect_err(run(LDT_OP_INDEX_SELECT, &a, 2, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_select: dim 2 is out of range for x [3,2]", "dim 2");
    a.i[0] = -3;
    expect_err(run(LDT_OP_INDEX_ADD, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_add: dim -3 is out of range", "dim -3");
    expect_err(run(LDT_OP_GATHER, NULL, 2, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "gather: attrs missing", "no attrs");
    expect_err(run(LDT_OP_GATHER, &a, 3, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "gather: expects 2 input(s), got 3", "gather arity");
    expect_err(run(LDT_OP_INDEX_PUT, &a, 2, in, OPND(out, LDT_F32, 2, 3, 2)), LDT_ERR_INVALID_ARGUMENT,
               "index_put: expects x, values and at least one index tensor", "index_put arity");
    a = attrs_of(-1, 0);
    expect_err(run(LDT_OP_ONE_HOT, &a, 1, &in[1], OPND(out, LDT_I64, 2, 2, 0)), LDT_ERR_INVALID_ARGUMENT,
               "one_hot: -1 classes", "one_hot classes");
    a = attrs_of(2, 0);
    expect_err(run(LDT_OP_ONE_HOT, &a, 1, &in[1], OPND(out, LDT_I64, 2, 2, 3)), LDT_ERR_INVALID_ARGUMENT,
               "one_hot: output is [2,3], expected [2,2]", "one_hot out shape");
    in[0].data = NULL;
    expect_err(run(LDT_OP_EMBEDDING, NULL, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_ERR_INVALID_ARGUMENT,
               "embedding: input 0 has 6 elements but no data", "no data");
    expect_err(run(LDT_OP_ADD, &a, 2, in, OPND(out, LDT_F32, 2, 2, 2)), LDT_ERR_INTERNAL, "add",
               "not an indexing op");
}
