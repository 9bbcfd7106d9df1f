/* View CPU kernels against index arithmetic, on several dtypes and random shapes. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

/* One dtype per element size, plus bool and f16 beside u8 / i32. */
static const ldt_dtype k_dtypes[] = {LDT_F32, LDT_F64, LDT_F16, LDT_U8, LDT_BOOL, LDT_I64};
#define NDTYPES (int)(sizeof k_dtypes / sizeof *k_dtypes)

typedef struct tens {
    ldt__operand o;
    int64_t n;
} tens;

/* Random bytes: every element distinct with high probability, any bit pattern (NaNs too),
 * which a byte move must keep. */
static tens mk(ldt_dtype t, const ldt_shape *s, uint64_t *st) {
    tens x;
    x.o.shape = *s;
    x.o.dtype = t;
    cr_assert(ldt_shape_numel(s, &x.n) == LDT_OK);
    size_t bytes = (size_t)(x.n > 0 ? x.n : 1) * ldt_dtype_size(t);
    x.o.data = malloc(bytes);
    cr_assert(x.o.data);
    for (size_t i = 0; i < bytes; i++)
        ((uint8_t *)x.o.data)[i] = st ? (uint8_t)ldt_test_rand(st) : 0xee;
    return x;
}

static void rm(tens *x) { free(x->o.data); }

static ldt_shape rnd_shape(uint64_t *st, int min_nd, int max_nd) {
    ldt_shape s = {(int)ldt_test_range(st, min_nd, max_nd), {0}};
    for (int d = 0; d < s.ndim; d++)
        s.dims[d] = ldt_test_range(st, 0, 12) == 0 ? 0 : ldt_test_range(st, 1, 6);
    return s;
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

static ldt_status run(int op, const ldt__attrs *at, int nin, const ldt__operand *in, tens *out) {
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.attrs = at;
    c.nin = nin;
    c.in = in;
    c.out = out->o;
    return ldt__k_view(&c);
}

/* Compares output element i with input element j, byte for byte; logs the first few. */
static int check(const tens *out, int64_t i, const tens *in, int64_t j, const char *what,
                 int bad) {
    size_t es = ldt_dtype_size(out->o.dtype);
    if (memcmp((const char *)out->o.data + i * es, (const char *)in->o.data + j * es, es) == 0)
        return bad;
    if (bad < 8)
        fprintf(stderr, "%s: output element %lld should be input element %lld\n", what,
                (long long)i, (long long)j);
    return bad + 1;
}

/* ---------------------------------------------------------------------------------------
 * Permute.
 */
static int permute_case(ldt_dtype t, const ldt_shape *is, const int *perm, uint64_t *st) {
    ldt_shape os = {is->ndim, {0}};
    ldt__attrs at;
    int64_t oi[LDT_MAX_DIMS], ii[LDT_MAX_DIMS];
    int bad = 0;
    char what[160];
    memset(&at, 0, sizeof at);
    for (int d = 0; d < is->ndim; d++) {
        at.i[d] = perm[d];
        os.dims[d] = is->dims[perm[d]];
    }
    tens x = mk(t, is, st), o = mk(t, &os, NULL);
    snprintf(what, sizeof what, "permute %s %s", ldt_dtype_name(t), ldt_test_fmt_shape(is));
    cr_assert(run(LDT_OP_PERMUTE, &at, 1, &x.o, &o) == LDT_OK, "%s: %s", what, ldt_last_error());
    for (int64_t i = 0; i < o.n; i++) {
        unravel(&os, i, oi);
        for (int d = 0; d < is->ndim; d++) ii[perm[d]] = oi[d];
        bad = check(&o, i, &x, ravel(is, ii), what, bad);
    }
    rm(&x), rm(&o);
    return bad;
}

Test(permute, all_perms_of_3d) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    uint64_t st = 1;
    int bad = 0;
    for (int d = 0; d < NDTYPES; d++)
        for (int p = 0; p < 6; p++)
            for (int r = 0; r < ldt_test_cases(8); r++) {
                ldt_shape s = rnd_shape(&st, 3, 3);
                bad += permute_case(k_dtypes[d], &s, perms[p], &st);
            }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(permute, random_perms_up_to_6d_and_large_transposes) {
    uint64_t st = 2;
    int bad = 0;
    for (int r = 0; r < ldt_test_cases(60); r++) {
        ldt_shape s = rnd_shape(&st, 0, 6);
        int perm[LDT_MAX_DIMS];
        for (int d = 0; d < s.ndim; d++) perm[d] = d;
        for (int d = s.ndim - 1; d > 0; d--) { /* Fisher-Yates */
            int k = (int)ldt_test_range(&st, 0, d), tmp = perm[d];
            perm[d] = perm[k];
            perm[k] = tmp;
        }
        bad += permute_case(k_dtypes[r % NDTYPES], &s, perm, &st);
    }
    /* sizes that are not multiples of the 32x32 tile, 2-D and batched */
    ldt_shape big = ldt_test_shape(2, 300, 257), bat = ldt_test_shape(3, 3, 70, 45), b4 = ldt_test_shape(4, 2, 33, 3, 65);
    static const int t2[2] = {1, 0}, t3[3] = {0, 2, 1}, t3b[3] = {2, 1, 0}, t4[4] = {1, 3, 0, 2};
    for (int d = 0; d < NDTYPES; d++) {
        bad += permute_case(k_dtypes[d], &big, t2, &st);
        bad += permute_case(k_dtypes[d], &bat, t3, &st);
        bad += permute_case(k_dtypes[d], &bat, t3b, &st);
        bad += permute_case(k_dtypes[d], &b4, t4, &st);
    }
    cr_assert(bad == 0, "%d elements differ", bad);
}

/* ---------------------------------------------------------------------------------------
 * Slice and select.
 */
Test(slice, random_with_steps) {
    uint64_t st = 3;
    int bad = 0;
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_dtype t = k_dtypes[r % NDTYPES];
        ldt_shape is = rnd_shape(&st, 1, 4);
        int64_t dim = ldt_test_range(&st, 0, is.ndim - 1), size = is.dims[dim];
        int64_t start = ldt_test_range(&st, 0, size), end = ldt_test_range(&st, start, size);
        int64_t step = ldt_test_range(&st, 1, 4);
        ldt__attrs at;
        memset(&at, 0, sizeof at);
        at.i[0] = dim, at.i[1] = start, at.i[2] = end, at.i[3] = step;
        ldt_shape os = is;
        os.dims[dim] = (end - start + step - 1) / step;
        tens x = mk(t, &is, &st), o = mk(t, &os, NULL);
        char what[160];
        snprintf(what, sizeof what, "slice %s %s dim %lld [%lld:%lld:%lld]", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&is), (long long)dim, (long long)start, (long long)end, (long long)step);
        cr_assert(run(LDT_OP_SLICE, &at, 1, &x.o, &o) == LDT_OK, "%s: %s", what,
                  ldt_last_error());
        for (int64_t i = 0; i < o.n; i++) {
            int64_t idx[LDT_MAX_DIMS];
            unravel(&os, i, idx);
            idx[dim] = start + idx[dim] * step;
            bad = check(&o, i, &x, ravel(&is, idx), what, bad);
        }
        rm(&x), rm(&o);
    }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(select, random) {
    uint64_t st = 4;
    int bad = 0;
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_dtype t = k_dtypes[r % NDTYPES];
        ldt_shape is = rnd_shape(&st, 1, 4);
        int64_t dim = ldt_test_range(&st, 0, is.ndim - 1);
        if (is.dims[dim] == 0) is.dims[dim] = 2;
        int64_t index = ldt_test_range(&st, 0, is.dims[dim] - 1);
        ldt__attrs at;
        memset(&at, 0, sizeof at);
        at.i[0] = dim, at.i[1] = index;
        ldt_shape os = {is.ndim - 1, {0}};
        for (int d = 0, k = 0; d < is.ndim; d++)
            if (d != dim) os.dims[k++] = is.dims[d];
        tens x = mk(t, &is, &st), o = mk(t, &os, NULL);
        char what[160];
        snprintf(what, sizeof what, "select %s %s dim %lld index %lld", ldt_dtype_name(t),
                 ldt_test_fmt_shape(&is), (long long)dim, (long long)index);
        cr_assert(run(LDT_OP_SELECT, &at, 1, &x.o, &o) == LDT_OK, "%s: %s", what,
                  ldt_last_error());
        for (int64_t i = 0; i < o.n; i++) {
            int64_t oi[LDT_MAX_DIMS], ii[LDT_MAX_DIMS];
            unravel(&os, i, oi);
            for (int d = 0, k = 0; d < is.ndim; d++) ii[d] = d == dim ? index : oi[k++];
            bad = check(&o, i, &x, ravel(&is, ii), what, bad);
        }
        rm(&x), rm(&o);
    }
    cr_assert(bad == 0, "%d elements differ", bad);
}

/* ---------------------------------------------------------------------------------------
 * Cat: three inputs along each dim, some of them empty along it.
 */
Test(cat, three_inputs_along_each_dim) {
    uint64_t st = 5;
    int bad = 0;
    for (int r = 0; r < ldt_test_cases(60); r++) {
        ldt_dtype t = k_dtypes[r % NDTYPES];
        ldt_shape base = rnd_shape(&st, 1, 4);
        for (int dim = 0; dim < base.ndim; dim++) {
            ldt_shape s[3], os = base;
            tens x[3];
            ldt__operand in[3];
            os.dims[dim] = 0;
            for (int k = 0; k < 3; k++) {
                s[k] = base;
                s[k].dims[dim] = ldt_test_range(&st, 0, 4);
                os.dims[dim] += s[k].dims[dim];
                x[k] = mk(t, &s[k], &st);
                in[k] = x[k].o;
            }
            tens o = mk(t, &os, NULL);
            ldt__attrs at;
            memset(&at, 0, sizeof at);
            at.i[0] = dim;
            char what[200];
            snprintf(what, sizeof what, "cat %s %s %s %s dim %d", ldt_dtype_name(t), ldt_test_fmt_shape(&s[0]),
                     ldt_test_fmt_shape(&s[1]), ldt_test_fmt_shape(&s[2]), dim);
            cr_assert(run(LDT_OP_CAT, &at, 3, in, &o) == LDT_OK, "%s: %s", what,
                      ldt_last_error());
            for (int64_t i = 0; i < o.n; i++) {
                int64_t idx[LDT_MAX_DIMS];
                int k = 0;
                unravel(&os, i, idx);
                while (idx[dim] >= s[k].dims[dim]) idx[dim] -= s[k++].dims[dim];
                bad = check(&o, i, &x[k], ravel(&s[k], idx), what, bad);
            }
            for (int k = 0; k < 3; k++) rm(&x[k]);
            rm(&o);
        }
    }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(cat, negative_dim_and_single_input) {
    ldt_shape a = ldt_test_shape(2, 2, 3), b = ldt_test_shape(2, 2, 1), o = ldt_test_shape(2, 2, 4);
    uint64_t st = 6;
    tens x = mk(LDT_I64, &a, &st), y = mk(LDT_I64, &b, &st), z = mk(LDT_I64, &o, NULL);
    ldt__operand in[2] = {x.o, y.o};
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    at.i[0] = -1;
    cr_assert(run(LDT_OP_CAT, &at, 2, in, &z) == LDT_OK, "%s", ldt_last_error());
    int64_t *r = z.o.data, *p = x.o.data, *q = y.o.data;
    cr_assert(r[0] == p[0] && r[2] == p[2] && r[3] == q[0] && r[4] == p[3] && r[7] == q[1]);
    tens w = mk(LDT_I64, &a, NULL);
    at.i[0] = 0;
    cr_assert(run(LDT_OP_CAT, &at, 1, in, &w) == LDT_OK);
    cr_assert(memcmp(w.o.data, x.o.data, 6 * 8) == 0);
    rm(&x), rm(&y), rm(&z), rm(&w);
}

/* ---------------------------------------------------------------------------------------
 * Expand, reshape, alias, redistribute.
 */
Test(expand, random_broadcast) {
    uint64_t st = 7;
    int bad = 0;
    for (int r = 0; r < ldt_test_cases(300); r++) {
        ldt_dtype t = k_dtypes[r % NDTYPES];
        ldt_shape os = rnd_shape(&st, 0, 5);
        int drop = (int)ldt_test_range(&st, 0, os.ndim);
        ldt_shape is = {os.ndim - drop, {0}};
        for (int d = 0; d < is.ndim; d++)
            is.dims[d] = ldt_test_range(&st, 0, 1) ? 1 : os.dims[d + drop];
        tens x = mk(t, &is, &st), o = mk(t, &os, NULL);
        char what[160];
        snprintf(what, sizeof what, "expand %s %s -> %s", ldt_dtype_name(t), ldt_test_fmt_shape(&is), ldt_test_fmt_shape(&os));
        cr_assert(run(LDT_OP_EXPAND, NULL, 1, &x.o, &o) == LDT_OK, "%s: %s", what,
                  ldt_last_error());
        for (int64_t i = 0; i < o.n; i++) {
            int64_t oi[LDT_MAX_DIMS], ii[LDT_MAX_DIMS];
            unravel(&os, i, oi);
            for (int d = 0; d < is.ndim; d++) ii[d] = is.dims[d] == 1 ? 0 : oi[d + drop];
            bad = check(&o, i, &x, ravel(&is, ii), what, bad);
        }
        rm(&x), rm(&o);
    }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(copy, reshape_alias_redistribute_and_zero_dim) {
    uint64_t st = 8;
    for (int r = 0; r < ldt_test_cases(100); r++) {
        ldt_dtype t = k_dtypes[r % NDTYPES];
        ldt_shape is = rnd_shape(&st, 0, 4), os = {0, {0}};
        int64_t n;
        ldt_shape_numel(&is, &n);
        /* the same elements as one, two or three dims */
        if (n > 0 && ldt_test_range(&st, 0, 1)) {
            os.ndim = 2;
            os.dims[0] = n % 2 == 0 ? 2 : 1;
            os.dims[1] = n / os.dims[0];
        } else if (n != 1) {
            os.ndim = 3;
            os.dims[0] = 1, os.dims[1] = n, os.dims[2] = 1;
        }
        tens x = mk(t, &is, &st), o = mk(t, &os, NULL), a = mk(t, &is, NULL);
        size_t bytes = (size_t)n * ldt_dtype_size(t);
        cr_assert(run(LDT_OP_RESHAPE, NULL, 1, &x.o, &o) == LDT_OK, "%s", ldt_last_error());
        cr_assert(n == 0 || memcmp(o.o.data, x.o.data, bytes) == 0, "reshape %s -> %s", ldt_test_fmt_shape(&is),
                  ldt_test_fmt_shape(&os));
        cr_assert(run(LDT_OP_ALIAS, NULL, 1, &x.o, &a) == LDT_OK);
        cr_assert(n == 0 || memcmp(a.o.data, x.o.data, bytes) == 0, "alias %s", ldt_test_fmt_shape(&is));
        memset(a.o.data, 0, bytes);
        cr_assert(run(LDT_OP_REDISTRIBUTE, NULL, 1, &x.o, &a) == LDT_OK);
        cr_assert(n == 0 || memcmp(a.o.data, x.o.data, bytes) == 0, "redistribute %s", ldt_test_fmt_shape(&is));
        rm(&x), rm(&o), rm(&a);
    }
    /* 0-dim in and out: expand a scalar, select down to one */
    ldt_shape sc = ldt_test_shape(0), s23 = ldt_test_shape(2, 2, 3), s1 = ldt_test_shape(1, 5);
    tens x = mk(LDT_F32, &sc, &st), o = mk(LDT_F32, &s23, NULL);
    cr_assert(run(LDT_OP_EXPAND, NULL, 1, &x.o, &o) == LDT_OK);
    for (int i = 0; i < 6; i++) cr_assert(memcmp((float *)o.o.data + i, x.o.data, 4) == 0);
    tens v = mk(LDT_F32, &s1, &st), e = mk(LDT_F32, &sc, NULL);
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    at.i[0] = 0, at.i[1] = 4;
    cr_assert(run(LDT_OP_SELECT, &at, 1, &v.o, &e) == LDT_OK);
    cr_assert(memcmp(e.o.data, (float *)v.o.data + 4, 4) == 0);
    rm(&x), rm(&o), rm(&v), rm(&e);
}

/* ---------------------------------------------------------------------------------------
 * Errors, each naming the op.
 */
static int msg_has(const char *a, const char *b) {
    const char *m = ldt_last_error();
    return strstr(m, a) && (!b || strstr(m, b));
}

Test(errors, malformed_calls) {
    ldt_shape s23 = ldt_test_shape(2, 2, 3), s32 = ldt_test_shape(2, 3, 2), s7 = ldt_test_shape(1, 7), s6 = ldt_test_shape(1, 6),
              s24 = ldt_test_shape(2, 2, 4), s3 = ldt_test_shape(1, 3), s43 = ldt_test_shape(2, 4, 3);
    tens a = mk(LDT_F32, &s23, NULL), b = mk(LDT_F32, &s32, NULL), c7 = mk(LDT_F32, &s7, NULL),
         c6 = mk(LDT_F32, &s6, NULL), d = mk(LDT_F64, &s23, NULL), e = mk(LDT_F32, &s24, NULL),
         f = mk(LDT_F32, &s3, NULL), g = mk(LDT_F32, &s43, NULL), h = mk(LDT_F32, &s23, NULL);
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    ldt__operand in[3] = {a.o, a.o, a.o};

    cr_assert(run(LDT_OP_RESHAPE, NULL, 1, in, &c7) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("reshape:", "7"));
    cr_assert(run(LDT_OP_RESHAPE, NULL, 1, in, &d) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("reshape:", "f64"));
    cr_assert(run(LDT_OP_RESHAPE, NULL, 2, in, &c6) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("reshape:", "input"));
    cr_assert(run(LDT_OP_ALIAS, NULL, 1, in, &b) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("alias:", "[3,2]"));
    cr_assert(run(LDT_OP_REDISTRIBUTE, NULL, 1, in, &c6) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("redistribute:", NULL));

    cr_assert(run(LDT_OP_PERMUTE, NULL, 1, in, &b) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("permute:", "attrs"));
    at.i[0] = 1, at.i[1] = 1; /* not a permutation */
    cr_assert(run(LDT_OP_PERMUTE, &at, 1, in, &b) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("permute:", "permutation"));
    at.i[0] = 0, at.i[1] = 2;
    cr_assert(run(LDT_OP_PERMUTE, &at, 1, in, &b) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("permute:", "permutation"));
    at.i[0] = 0, at.i[1] = 1; /* identity, but the output is [3,2] */
    cr_assert(run(LDT_OP_PERMUTE, &at, 1, in, &b) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("permute:", "[2,3]"));

    at.i[0] = 1, at.i[1] = 0, at.i[2] = 4, at.i[3] = 1; /* end > size */
    cr_assert(run(LDT_OP_SLICE, &at, 1, in, &a) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("slice:", "end 4"));
    at.i[2] = 3, at.i[3] = 0; /* step 0 */
    cr_assert(run(LDT_OP_SLICE, &at, 1, in, &a) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("slice:", "step"));
    at.i[0] = 2, at.i[3] = 1; /* dim out of range */
    cr_assert(run(LDT_OP_SLICE, &at, 1, in, &a) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("slice:", "dim 2"));
    at.i[0] = 1, at.i[1] = 0, at.i[2] = 3, at.i[3] = 2; /* output should be [2,2] */
    cr_assert(run(LDT_OP_SLICE, &at, 1, in, &a) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("slice:", "[2,2]"));

    at.i[0] = 0, at.i[1] = 2; /* index out of range */
    cr_assert(run(LDT_OP_SELECT, &at, 1, in, &f) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("select:", "index 2"));
    at.i[1] = 1; /* right index, wrong output: [3] expected, [2,3] given */
    cr_assert(run(LDT_OP_SELECT, &at, 1, in, &a) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("select:", "[3]"));

    at.i[0] = 1; /* cat along 1 needs dim 0 equal: [2,3] + [3,2] */
    in[1] = b.o;
    cr_assert(run(LDT_OP_CAT, &at, 2, in, &e) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("cat:", "input 1"));
    in[1] = a.o; /* [2,3] + [2,3] is [2,6], not [2,4] */
    cr_assert(run(LDT_OP_CAT, &at, 2, in, &e) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("cat:", "sum to 6"));
    at.i[0] = 5;
    cr_assert(run(LDT_OP_CAT, &at, 2, in, &e) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("cat:", "dim 5"));
    in[1] = d.o;
    at.i[0] = 0;
    cr_assert(run(LDT_OP_CAT, &at, 2, in, &g) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("cat:", "f64"));
    cr_assert(run(LDT_OP_CAT, &at, 0, in, &g) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("cat:", "at least one"));

    in[0] = f.o; /* [3] -> [2,4] does not broadcast; [2,3] -> [3] has too many dims */
    cr_assert(run(LDT_OP_EXPAND, NULL, 1, in, &e) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("expand:", "[2,4]"));
    in[0] = a.o;
    cr_assert(run(LDT_OP_EXPAND, NULL, 1, in, &f) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("expand:", "more dims"));

    cr_assert(run(LDT_OP_ADD, NULL, 1, in, &h) == LDT_ERR_INTERNAL && msg_has("add", NULL));
    ldt__operand nod = a.o;
    nod.data = NULL;
    cr_assert(run(LDT_OP_ALIAS, NULL, 1, &nod, &h) == LDT_ERR_INVALID_ARGUMENT &&
              msg_has("alias:", "no data"));
    rm(&a), rm(&b), rm(&c7), rm(&c6), rm(&d), rm(&e), rm(&f), rm(&g), rm(&h);
}
