/* Elementwise CPU kernels and kernels/common/math.h against a naive reference in double. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/common/math.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

#define NDT LDT_DTYPE_COUNT
static const ldt_dtype k_all[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                  LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};

/* ---------------------------------------------------------------------------------------
 * Values: decoding and once-rounding written here, independently of core/half.h.
 */
static int is_flt(ldt_dtype t) {
    return t == LDT_F32 || t == LDT_F64 || t == LDT_F16 || t == LDT_BF16;
}
static int is_hlf(ldt_dtype t) { return t == LDT_F16 || t == LDT_BF16; }

static long double half_value(uint16_t h, ldt_dtype t) {
    int neg = h >> 15;
    long double v;
    if (t == LDT_F16) {
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31) return m ? NAN : (neg ? -INFINITY : INFINITY);
        v = e ? ldexpl(1024 + m, e - 25) : ldexpl(m, -24);
    } else {
        int e = (h >> 7) & 255, m = h & 127;
        if (e == 255) return m ? NAN : (neg ? -INFINITY : INFINITY);
        v = e ? ldexpl(128 + m, e - 134) : ldexpl(m, -133);
    }
    return neg ? -v : v;
}

/* Nearest half to v, ties to even, by looking at the candidates around a first guess. */
static uint16_t round_half(long double v, ldt_dtype t) {
    uint16_t inf = t == LDT_F16 ? 0x7c00 : 0x7f80, sign = signbit(v) ? 0x8000 : 0;
    long double a = fabsl(v);
    long double limit = t == LDT_F16 ? 65520.0L : ldexpl(2.0L - ldexpl(1, -8), 127);
    if (isnan(v)) return t == LDT_F16 ? 0x7e00 : 0x7fc0;
    if (a >= limit) return sign | inf;
    /* binary search for the largest finite magnitude <= a */
    uint16_t lo = 0, hi = inf - 1;
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (half_value(mid, t) <= a)
            lo = mid;
        else
            hi = (uint16_t)(mid - 1);
    }
    uint16_t best = lo;
    if (half_value(lo, t) != a && lo + 1 < inf) {
        long double d0 = a - half_value(lo, t), d1 = half_value((uint16_t)(lo + 1), t) - a;
        if (d1 < d0 || (d1 == d0 && ((lo + 1) & 1) == 0)) best = (uint16_t)(lo + 1);
    } else if (half_value(lo, t) != a) { /* between max and the overflow limit */
        best = lo;
    }
    return sign | best;
}

static double rnd_unit(uint64_t *st) { return (double)(ldt_test_rand(st) >> 11) * 0x1p-53; }
static double rnd_in(uint64_t *st, double lo, double hi) { return lo + (hi - lo) * rnd_unit(st); }

/* Element i of a buffer, as double (floats) or int64 (integers, bool as the stored byte). */
static double getf(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    default: return (double)half_value(((const uint16_t *)p)[i], t);
    }
}

static int64_t geti(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* Stores v rounded once to t (floats). */
static void putf(ldt_dtype t, void *p, int64_t i, long double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = (double)v; break;
    default: ((uint16_t *)p)[i] = round_half(v, t); break;
    }
}

/* Stores v modulo the width of t (integers), 0/1 for bool. */
static void puti(ldt_dtype t, void *p, int64_t i, uint64_t v) {
    switch (t) {
    case LDT_I32: {
        uint32_t u = (uint32_t)v;
        memcpy((int32_t *)p + i, &u, 4);
        break;
    }
    case LDT_I64: memcpy((int64_t *)p + i, &v, 8); break;
    case LDT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

/* The float's bits as a signed position on the number line, for ulp distances. */
static int64_t ord(ldt_dtype t, double v) {
    int64_t mag, neg;
    if (t == LDT_F64) {
        uint64_t u;
        memcpy(&u, &v, 8);
        neg = (int64_t)(u >> 63);
        mag = (int64_t)(u & 0x7fffffffffffffffull);
    } else if (t == LDT_F32) {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        neg = u >> 31;
        mag = u & 0x7fffffff;
    } else {
        uint16_t h = round_half(v, t); /* exact: v holds a half value */
        neg = h >> 15;
        mag = h & 0x7fff;
    }
    return neg ? -mag : mag;
}

static int64_t ulps(ldt_dtype t, double a, double b) {
    int64_t d = ord(t, a) - ord(t, b);
    return d < 0 ? -d : d;
}

/* The value of one unit in the last place at v, for f32 / f64. */
static double ulp_at(ldt_dtype t, double v) {
    int e;
    int mant = t == LDT_F64 ? 53 : 24, emin = t == LDT_F64 ? -1074 : -149;
    frexp(v, &e);
    return ldexp(1.0, e - mant > emin ? e - mant : emin);
}

/* ---------------------------------------------------------------------------------------
 * Buffers and shapes.
 */
typedef struct tens {
    ldt__operand o;
    int64_t n;
} tens;

static tens mk(ldt_dtype t, const ldt_shape *s) {
    tens x;
    x.o.shape = *s;
    x.o.dtype = t;
    cr_assert(ldt_shape_numel(s, &x.n) == LDT_OK);
    x.o.data = calloc((size_t)(x.n > 0 ? x.n : 1), ldt_dtype_size(t));
    cr_assert(x.o.data);
    return x;
}

static void rm(tens *x) { free(x->o.data); }

/* A random output shape of 0..4 dims, sizes 0..6 (mostly non-zero). */
static ldt_shape rnd_shape(uint64_t *st, int min_nd) {
    ldt_shape s = {(int)ldt_test_range(st, min_nd, 4), {0}};
    for (int d = 0; d < s.ndim; d++)
        s.dims[d] = ldt_test_range(st, 0, 15) == 0 ? 0 : ldt_test_range(st, 1, 6);
    return s;
}

/* An input shape that broadcasts to out: leading dims dropped, some dims set to 1. */
static ldt_shape rnd_bcast(uint64_t *st, const ldt_shape *out) {
    int drop = ldt_test_range(st, 0, 3) == 0 ? (int)ldt_test_range(st, 0, out->ndim) : 0;
    ldt_shape s = {out->ndim - drop, {0}};
    for (int d = 0; d < s.ndim; d++)
        s.dims[d] = ldt_test_range(st, 0, 2) == 0 ? 1 : out->dims[d + drop];
    return s;
}

/* Flat index in `in` (broadcast to out) of the output element at flat index i. */
static int64_t bc_index(const ldt_shape *in, const ldt_shape *out, int64_t i) {
    int64_t idx[LDT_MAX_DIMS], off = 0, stride = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        idx[d] = i % out->dims[d];
        i /= out->dims[d];
    }
    for (int d = in->ndim - 1; d >= 0; d--) {
        int od = d + out->ndim - in->ndim;
        off += (in->dims[d] == 1 ? 0 : idx[od]) * stride;
        stride *= in->dims[d];
    }
    return off;
}

/* Random contents: floats from [lo, hi] with a few specials, integers over the full range
 * with small values mixed in, bool 0/1. */
static void fill(tens *x, uint64_t *st, double lo, double hi, int specials) {
    static const double sp[] = {0.0, -0.0, NAN, 1.0, -1.0};
    for (int64_t i = 0; i < x->n; i++) {
        ldt_dtype t = x->o.dtype;
        if (is_flt(t)) {
            double v = rnd_in(st, lo, hi);
            if (specials && ldt_test_range(st, 0, 9) == 0) v = sp[ldt_test_range(st, 0, 4)];
            putf(t, x->o.data, i, v);
        } else if (t == LDT_BOOL) {
            puti(t, x->o.data, i, ldt_test_rand(st) & 1);
        } else {
            uint64_t v = ldt_test_rand(st);
            if (ldt_test_range(st, 0, 1)) v = (uint64_t)ldt_test_range(st, -20, 20);
            puti(t, x->o.data, i, v);
        }
    }
}

static ldt__kcall call(int op, const ldt__attrs *at, int nin, const ldt__operand *in, tens *out) {
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.attrs = at;
    c.nin = nin;
    c.in = in;
    c.out = out->o;
    return c;
}

/* Reports up to 8 mismatches; returns the count so far. */
static int miss(int bad, const char *what, int64_t i, const char *fmtv, ...) {
    if (bad < 8) {
        char buf[256];
        va_list ap;
        va_start(ap, fmtv);
        vsnprintf(buf, sizeof buf, fmtv, ap);
        va_end(ap);
        fprintf(stderr, "%s: element %lld: %s\n", what, (long long)i, buf);
    }
    return bad + 1;
}

static int same_f(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* ---------------------------------------------------------------------------------------
 * Binary ops and where on random broadcast shapes.
 */
static const int k_arith[] = {LDT_OP_ADD, LDT_OP_SUB, LDT_OP_MUL, LDT_OP_DIV};
static const int k_cmp[] = {LDT_OP_EQ, LDT_OP_NE, LDT_OP_LT, LDT_OP_LE, LDT_OP_GT, LDT_OP_GE};

static int arith_ok(int op, ldt_dtype t) { (void)op; return t != LDT_BOOL; }

/* In double: correctly rounded for f64, and innocuous double rounding for f32 and halves
 * (53 >= 2p + 2); long double would round twice for f64. */
static double ref_arith_f(int op, double x, double y) {
    switch (op) {
    case LDT_OP_ADD: return x + y;
    case LDT_OP_SUB: return x - y;
    case LDT_OP_MUL: return x * y;
    default: return x / y;
    }
}

/* Integer reference: wrapping through uint64, truncating division with MIN / -1 = MIN. */
static uint64_t ref_arith_i(int op, ldt_dtype t, int64_t x, int64_t y) {
    switch (op) {
    case LDT_OP_ADD: return (uint64_t)x + (uint64_t)y;
    case LDT_OP_SUB: return (uint64_t)x - (uint64_t)y;
    case LDT_OP_MUL: return (uint64_t)x * (uint64_t)y;
    default:
        if (t == LDT_I64 && x == INT64_MIN && y == -1) return (uint64_t)INT64_MIN;
        return (uint64_t)(x / y); /* i32: INT32_MIN / -1 = 2^31 wraps to INT32_MIN */
    }
}

static int ref_cmp(int op, long double x, long double y) {
    switch (op) {
    case LDT_OP_EQ: return x == y;
    case LDT_OP_NE: return x != y;
    case LDT_OP_LT: return x < y;
    case LDT_OP_LE: return x <= y;
    case LDT_OP_GT: return x > y;
    default: return x >= y;
    }
}

static long double val(ldt_dtype t, const void *p, int64_t i) {
    if (is_flt(t)) return getf(t, p, i);
    if (t == LDT_BOOL) return ((const uint8_t *)p)[i] != 0;
    return (long double)geti(t, p, i);
}

static const char *opname(int op) {
    static const char *const names[] = {
#define N_(e, name, arity) name,
        LDT_OP_MAP(N_)
#undef N_
    };
    return names[op];
}

/* One random binary case: returns the number of mismatching elements. */
static int binary_case(int op, ldt_dtype t, uint64_t *st) {
    ldt_shape os = rnd_shape(st, 0), as = rnd_bcast(st, &os), bs = rnd_bcast(st, &os);
    int cmp = op >= LDT_OP_EQ && op <= LDT_OP_GE;
    tens a = mk(t, &as), b = mk(t, &bs), o = mk(cmp ? LDT_BOOL : t, &os);
    int bad = 0;
    fill(&a, st, -8, 8, 1);
    fill(&b, st, -8, 8, 1);
    if (cmp && is_flt(t)) /* equal values are what eq/le/ge are about */
        for (int64_t i = 0; i < b.n && a.n; i++)
            if (ldt_test_range(st, 0, 2) == 0)
                putf(t, b.o.data, i, getf(t, a.o.data, i % a.n));
    if (op == LDT_OP_DIV && !is_flt(t))
        for (int64_t i = 0; i < b.n; i++)
            if (geti(t, b.o.data, i) == 0) puti(t, b.o.data, i, 3);
    ldt__operand in[2] = {a.o, b.o};
    ldt__kcall c = call(op, NULL, 2, in, &o);
    ldt_status s = ldt__k_binary(&c);
    cr_assert(s == LDT_OK, "%s %s %s %s -> %s: %s", opname(op), ldt_dtype_name(t), ldt_test_fmt_shape(&as),
              ldt_test_fmt_shape(&bs), ldt_test_fmt_shape(&os), ldt_last_error());
    for (int64_t i = 0; i < o.n; i++) {
        int64_t ia = bc_index(&as, &os, i), ib = bc_index(&bs, &os, i);
        long double x = val(t, a.o.data, ia), y = val(t, b.o.data, ib);
        char what[160];
        snprintf(what, sizeof what, "%s %s %s %s", opname(op), ldt_dtype_name(t), ldt_test_fmt_shape(&as),
                 ldt_test_fmt_shape(&bs));
        if (cmp) {
            int want = ref_cmp(op, x, y), got = ((uint8_t *)o.o.data)[i];
            if (got != want)
                bad = miss(bad, what, i, "%Lg vs %Lg: got %d, want %d", x, y, got, want);
        } else if (is_flt(t)) {
            tens w = mk(t, &(ldt_shape){0, {0}});
            putf(t, w.o.data, 0, ref_arith_f(op, (double)x, (double)y));
            double want = getf(t, w.o.data, 0), got = getf(t, o.o.data, i);
            rm(&w);
            if (!same_f(got, want))
                bad = miss(bad, what, i, "%.9Lg, %.9Lg: got %.17g, want %.17g", x, y, got, want);
        } else {
            tens w = mk(t, &(ldt_shape){0, {0}});
            puti(t, w.o.data, 0, ref_arith_i(op, t, (int64_t)x, (int64_t)y));
            int64_t want = geti(t, w.o.data, 0), got = geti(t, o.o.data, i);
            rm(&w);
            if (got != want)
                bad = miss(bad, what, i, "%Lg, %Lg: got %lld, want %lld", x, y, (long long)got,
                           (long long)want);
        }
    }
    rm(&a);
    rm(&b);
    rm(&o);
    return bad;
}

Test(binary, random_broadcast_every_op_and_dtype) {
    uint64_t st = 11;
    int cases = ldt_test_cases(20), bad = 0;
    for (size_t k = 0; k < 4; k++)
        for (int d = 0; d < NDT; d++)
            if (arith_ok(k_arith[k], k_all[d]))
                for (int r = 0; r < cases; r++) bad += binary_case(k_arith[k], k_all[d], &st);
    for (size_t k = 0; k < 6; k++)
        for (int d = 0; d < NDT; d++)
            for (int r = 0; r < cases; r++) bad += binary_case(k_cmp[k], k_all[d], &st);
    cr_assert(bad == 0, "%d elements differ (first ones logged above)", bad);
}

Test(binary, where_random_broadcast_every_dtype) {
    uint64_t st = 12;
    int bad = 0;
    for (int d = 0; d < NDT; d++)
        for (int r = 0; r < ldt_test_cases(15); r++) {
            ldt_dtype t = k_all[d];
            ldt_shape os = rnd_shape(&st, 0), cs = rnd_bcast(&st, &os), as = rnd_bcast(&st, &os),
                      bs = rnd_bcast(&st, &os);
            tens cnd = mk(LDT_BOOL, &cs), a = mk(t, &as), b = mk(t, &bs), o = mk(t, &os);
            fill(&cnd, &st, 0, 0, 0);
            fill(&a, &st, -8, 8, 1);
            fill(&b, &st, -8, 8, 1);
            for (int64_t i = 0; i < cnd.n; i++) /* any non-zero byte is true */
                if (((uint8_t *)cnd.o.data)[i] && ldt_test_range(&st, 0, 3) == 0)
                    ((uint8_t *)cnd.o.data)[i] = 7;
            ldt__operand in[3] = {cnd.o, a.o, b.o};
            ldt__kcall c = call(LDT_OP_WHERE, NULL, 3, in, &o);
            cr_assert(ldt__k_binary(&c) == LDT_OK, "%s", ldt_last_error());
            size_t es = ldt_dtype_size(t);
            for (int64_t i = 0; i < o.n; i++) {
                int pick = ((uint8_t *)cnd.o.data)[bc_index(&cs, &os, i)] != 0;
                const char *src = pick ? (const char *)a.o.data + bc_index(&as, &os, i) * es
                                       : (const char *)b.o.data + bc_index(&bs, &os, i) * es;
                if (memcmp((char *)o.o.data + i * es, src, es))
                    bad = miss(bad, "where", i, "%s cond %s a %s b %s: wrong element",
                               ldt_dtype_name(t), ldt_test_fmt_shape(&cs), ldt_test_fmt_shape(&as), ldt_test_fmt_shape(&bs));
            }
            rm(&cnd);
            rm(&a);
            rm(&b);
            rm(&o);
        }
    cr_assert(bad == 0, "%d elements differ", bad);
}

/* Large same-shape and broadcast adds go through the vectorised paths; in place too. */
Test(binary, large_fast_paths_and_in_place) {
    int64_t n = 1 << 20;
    ldt_shape s1 = ldt_test_shape(1, (int)n), col = ldt_test_shape(2, 1024, 1), row = ldt_test_shape(2, 1, 1024),
              sq = ldt_test_shape(2, 1024, 1024), sc = ldt_test_shape(0);
    tens a = mk(LDT_F32, &s1), b = mk(LDT_F32, &s1), o = mk(LDT_F32, &s1);
    for (int64_t i = 0; i < n; i++) {
        ((float *)a.o.data)[i] = (float)i * 0.25f;
        ((float *)b.o.data)[i] = 1.0f - (float)(i % 977);
    }
    ldt__operand in[2] = {a.o, b.o};
    ldt__kcall c = call(LDT_OP_ADD, NULL, 2, in, &o);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    for (int64_t i = 0; i < n; i++) {
        float want = (float)((double)((float)i * 0.25f) + (1.0 - (double)(i % 977)));
        if (((float *)o.o.data)[i] != want)
            cr_assert_fail("add: element %lld: got %g want %g", (long long)i,
                           ((float *)o.o.data)[i], want);
    }
    /* in place: out is a */
    c.out.data = a.o.data;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(memcmp(a.o.data, o.o.data, (size_t)n * 4) == 0, "in-place add differs");

    /* [1024,1] * [1,1024] -> [1024,1024] and [1024,1024] - scalar */
    tens x = mk(LDT_F32, &col), y = mk(LDT_F32, &row), z = mk(LDT_F32, &sq), s = mk(LDT_F32, &sc);
    for (int i = 0; i < 1024; i++) {
        ((float *)x.o.data)[i] = (float)i;
        ((float *)y.o.data)[i] = (float)(i - 512) * 0.5f;
    }
    ((float *)s.o.data)[0] = 3.0f;
    ldt__operand in2[2] = {x.o, y.o};
    c = call(LDT_OP_MUL, NULL, 2, in2, &z);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    for (int i = 0; i < 1024; i++)
        for (int j = 0; j < 1024; j++)
            if (((float *)z.o.data)[i * 1024 + j] != (float)i * ((float)(j - 512) * 0.5f))
                cr_assert_fail("outer mul: [%d,%d] got %g", i, j,
                               ((float *)z.o.data)[i * 1024 + j]);
    ldt__operand in3[2] = {z.o, s.o};
    c = call(LDT_OP_SUB, NULL, 2, in3, &z); /* in place with a broadcast scalar */
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(((float *)z.o.data)[5 * 1024 + 7] == 5.0f * ((float)(7 - 512) * 0.5f) - 3.0f);
    rm(&a), rm(&b), rm(&o), rm(&x), rm(&y), rm(&z), rm(&s);
}

Test(binary, zero_dim_and_empty) {
    ldt_shape sc = ldt_test_shape(0), e = ldt_test_shape(3, 2, 0, 3), e1 = ldt_test_shape(3, 2, 1, 3);
    tens a = mk(LDT_F64, &sc), b = mk(LDT_F64, &sc), o = mk(LDT_F64, &sc);
    ((double *)a.o.data)[0] = 1.5;
    ((double *)b.o.data)[0] = -4.0;
    ldt__operand in[2] = {a.o, b.o};
    ldt__kcall c = call(LDT_OP_DIV, NULL, 2, in, &o);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(((double *)o.o.data)[0] == -0.375);
    /* zero-size output, an input of size 1 on that dim: nothing to do, no reads */
    tens p = mk(LDT_I32, &e1), q = mk(LDT_I32, &e), r = mk(LDT_I32, &e);
    ldt__operand in2[2] = {p.o, q.o};
    c = call(LDT_OP_DIV, NULL, 2, in2, &r); /* b is empty: no division by zero to find */
    cr_assert(ldt__k_binary(&c) == LDT_OK, "%s", ldt_last_error());
    rm(&a), rm(&b), rm(&o), rm(&p), rm(&q), rm(&r);
}

Test(binary, integer_wrap_div_and_division_by_zero) {
    ldt_shape s4 = ldt_test_shape(1, 4);
    tens a = mk(LDT_I32, &s4), b = mk(LDT_I32, &s4), o = mk(LDT_I32, &s4);
    int32_t av[4] = {INT32_MIN, 7, -7, INT32_MAX}, bv[4] = {-1, -2, 2, 2};
    memcpy(a.o.data, av, sizeof av);
    memcpy(b.o.data, bv, sizeof bv);
    ldt__operand in[2] = {a.o, b.o};
    ldt__kcall c = call(LDT_OP_DIV, NULL, 2, in, &o);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    int32_t *r = o.o.data;
    cr_assert(r[0] == INT32_MIN && r[1] == -3 && r[2] == -3 && r[3] == 1073741823,
              "div: got %d %d %d %d", r[0], r[1], r[2], r[3]);
    c.op = LDT_OP_MUL;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == INT32_MIN && r[1] == -14 && r[2] == -14 && r[3] == -2, "mul wraps: %d %d",
              r[0], r[3]);
    c.op = LDT_OP_ADD;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == INT32_MAX && r[3] == INT32_MIN + 1, "add wraps: %d %d", r[0], r[3]);
    /* division by zero: an error naming the op, output untouched */
    ((int32_t *)b.o.data)[2] = 0;
    memset(o.o.data, 0x5a, 16);
    c.op = LDT_OP_DIV;
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "div: integer division by zero"), "%s", ldt_last_error());
    cr_assert(((uint8_t *)o.o.data)[0] == 0x5a);
    /* i64 MIN / -1 and u8 */
    tens a8 = mk(LDT_I64, &s4), b8 = mk(LDT_I64, &s4), o8 = mk(LDT_I64, &s4);
    int64_t a8v[4] = {INT64_MIN, INT64_MAX, -9, 9}, b8v[4] = {-1, -1, 4, -4};
    memcpy(a8.o.data, a8v, sizeof a8v);
    memcpy(b8.o.data, b8v, sizeof b8v);
    ldt__operand in8[2] = {a8.o, b8.o};
    c = call(LDT_OP_DIV, NULL, 2, in8, &o8);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    int64_t *r8 = o8.o.data;
    cr_assert(r8[0] == INT64_MIN && r8[1] == -INT64_MAX && r8[2] == -2 && r8[3] == -2);
    tens u = mk(LDT_U8, &s4), v = mk(LDT_U8, &s4), w = mk(LDT_U8, &s4);
    uint8_t uv[4] = {250, 3, 200, 0}, vv[4] = {10, 5, 2, 0};
    memcpy(u.o.data, uv, 4);
    memcpy(v.o.data, vv, 4);
    ldt__operand inu[2] = {u.o, v.o};
    c = call(LDT_OP_SUB, NULL, 2, inu, &w);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    uint8_t *ru = w.o.data;
    cr_assert(ru[0] == 240 && ru[1] == 254 && ru[2] == 198 && ru[3] == 0);
    c.op = LDT_OP_DIV;
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "div: integer division by zero"));
    rm(&a), rm(&b), rm(&o), rm(&a8), rm(&b8), rm(&o8), rm(&u), rm(&v), rm(&w);
}

Test(binary, comparisons_nan_and_bool_bytes) {
    ldt_shape s3 = ldt_test_shape(1, 3);
    tens a = mk(LDT_F32, &s3), b = mk(LDT_F32, &s3), o = mk(LDT_BOOL, &s3);
    float av[3] = {NAN, 1.0f, -0.0f}, bv[3] = {NAN, NAN, 0.0f};
    memcpy(a.o.data, av, sizeof av);
    memcpy(b.o.data, bv, sizeof bv);
    ldt__operand in[2] = {a.o, b.o};
    ldt__kcall c = call(LDT_OP_EQ, NULL, 2, in, &o);
    uint8_t *r = o.o.data;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == 0 && r[1] == 0 && r[2] == 1, "eq: %d %d %d", r[0], r[1], r[2]);
    c.op = LDT_OP_NE;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == 1 && r[1] == 1 && r[2] == 0);
    c.op = LDT_OP_LE;
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == 0 && r[1] == 0 && r[2] == 1);
    tens p = mk(LDT_BOOL, &s3), q = mk(LDT_BOOL, &s3);
    uint8_t pv[3] = {2, 0, 1}, qv[3] = {1, 0, 0};
    memcpy(p.o.data, pv, 3);
    memcpy(q.o.data, qv, 3);
    ldt__operand inb[2] = {p.o, q.o};
    c = call(LDT_OP_EQ, NULL, 2, inb, &o);
    cr_assert(ldt__k_binary(&c) == LDT_OK);
    cr_assert(r[0] == 1 && r[1] == 1 && r[2] == 0, "bool eq: %d %d %d", r[0], r[1], r[2]);
    rm(&a), rm(&b), rm(&o), rm(&p), rm(&q);
}

/* ---------------------------------------------------------------------------------------
 * Scalar ops.
 */
static double ref_scalar(int op, double x, double s) {
    switch (op) {
    case LDT_OP_ADD_SCALAR: return x + s;
    case LDT_OP_SUB_SCALAR: return x - s;
    case LDT_OP_RSUB_SCALAR: return s - x;
    case LDT_OP_MUL_SCALAR: return x * s;
    case LDT_OP_DIV_SCALAR: return x / s;
    case LDT_OP_RDIV_SCALAR: return s / x;
    default: return pow(x, s);
    }
}

static int scalar_ok(int op, ldt_dtype t) {
    if (is_flt(t)) return 1;
    return t != LDT_BOOL && op != LDT_OP_POW_SCALAR;
}

/* Truncating division, x / -1 wrapping (the integer scalar ops are done in int64). */
static int64_t tdiv(int64_t a, int64_t b) { return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }

/* Transcendental results: f32 / f64 must lie within 4 ulp of f over [x(1-8eps), x(1+8eps)]
 * (the conditioning of f at x, plus rounding); halves within 1 ulp of f(x) rounded once. */
typedef double (*ref_fn)(double x, double s);

static int close_enough(ldt_dtype t, double x, double s, double got, ref_fn f, int exact) {
    double want = f(x, s);
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want)) return got == want;
    if (exact || is_hlf(t)) {
        tens w = mk(t, &(ldt_shape){0, {0}});
        putf(t, w.o.data, 0, want);
        double wr = getf(t, w.o.data, 0);
        rm(&w);
        if (isinf(wr) || isinf(got)) return wr == got;
        return exact ? got == wr : ulps(t, got, wr) <= 1;
    }
    double eps = t == LDT_F64 ? DBL_EPSILON : FLT_EPSILON;
    double lo = want, hi = want;
    for (int k = -1; k <= 1; k += 2) {
        double v = f(x * (1 + k * 8 * eps), s);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
    }
    double tol = 4 * ulp_at(t, fmax(fabs(lo), fabs(hi)));
    return got >= lo - tol && got <= hi + tol;
}

static double f_pow(double x, double s) { return pow(x, s); }

Test(scalar, random_every_op_and_dtype) {
    static const double svals[] = {0.5, -1.25, 3.0, 2.0, 0.375, -2.0};
    static const double ivals[] = {-3, 0, 1, 7, 300, -1000000, 1099511627776.0};
    uint64_t st = 21;
    int bad = 0;
    for (int op = LDT_OP_ADD_SCALAR; op <= LDT_OP_POW_SCALAR; op++)
        for (int d = 0; d < NDT; d++) {
            ldt_dtype t = k_all[d];
            if (!scalar_ok(op, t)) continue;
            for (int r = 0; r < ldt_test_cases(15); r++) {
                ldt_shape s = rnd_shape(&st, 0);
                tens x = mk(t, &s), o = mk(t, &s);
                ldt__attrs at;
                memset(&at, 0, sizeof at);
                at.f[0] = is_flt(t) ? svals[ldt_test_range(&st, 0, 5)]
                                    : ivals[ldt_test_range(&st, 0, 6)];
                if (op == LDT_OP_POW_SCALAR)
                    fill(&x, &st, ldt_test_range(&st, 0, 1) ? 0.05 : -4, 4, 1);
                else
                    fill(&x, &st, -8, 8, 1);
                if (!is_flt(t) && op == LDT_OP_DIV_SCALAR && at.f[0] == 0) at.f[0] = -1;
                if (!is_flt(t) && op == LDT_OP_RDIV_SCALAR)
                    for (int64_t i = 0; i < x.n; i++)
                        if (geti(t, x.o.data, i) == 0) puti(t, x.o.data, i, (uint64_t)-1);
                ldt__kcall c = call(op, &at, 1, &x.o, &o);
                cr_assert(ldt__k_scalar(&c) == LDT_OK, "%s", ldt_last_error());
                /* f32 and halves see the scalar as an f32 (exact for these values) */
                for (int64_t i = 0; i < x.n; i++) {
                    if (is_flt(t)) {
                        double xv = getf(t, x.o.data, i), got = getf(t, o.o.data, i);
                        int ok;
                        if (op == LDT_OP_POW_SCALAR) {
                            ok = close_enough(t, xv, at.f[0], got, f_pow, 0);
                        } else {
                            tens w = mk(t, &(ldt_shape){0, {0}});
                            putf(t, w.o.data, 0, ref_scalar(op, xv, at.f[0]));
                            ok = same_f(getf(t, w.o.data, 0), got);
                            rm(&w);
                        }
                        if (!ok)
                            bad = miss(bad, opname(op), i, "%s x=%.9g s=%g: got %.17g",
                                       ldt_dtype_name(t), xv, at.f[0], got);
                    } else {
                        int64_t xv = geti(t, x.o.data, i), sv = (int64_t)at.f[0];
                        uint64_t want = op == LDT_OP_ADD_SCALAR   ? (uint64_t)xv + (uint64_t)sv
                                        : op == LDT_OP_SUB_SCALAR ? (uint64_t)xv - (uint64_t)sv
                                        : op == LDT_OP_RSUB_SCALAR ? (uint64_t)sv - (uint64_t)xv
                                        : op == LDT_OP_MUL_SCALAR  ? (uint64_t)xv * (uint64_t)sv
                                        : op == LDT_OP_DIV_SCALAR  ? (uint64_t)tdiv(xv, sv)
                                                                   : (uint64_t)tdiv(sv, xv);
                        tens w = mk(t, &(ldt_shape){0, {0}});
                        puti(t, w.o.data, 0, want);
                        if (geti(t, w.o.data, 0) != geti(t, o.o.data, i))
                            bad = miss(bad, opname(op), i, "%s x=%lld s=%lld: got %lld want %lld",
                                       ldt_dtype_name(t), (long long)xv, (long long)sv,
                                       (long long)geti(t, o.o.data, i),
                                       (long long)geti(t, w.o.data, 0));
                        rm(&w);
                    }
                }
                rm(&x);
                rm(&o);
            }
        }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(scalar, hand_values) {
    ldt_shape s3 = ldt_test_shape(1, 3);
    tens x = mk(LDT_F32, &s3), o = mk(LDT_F32, &s3);
    float xv[3] = {2.0f, -8.0f, 0.0f};
    memcpy(x.o.data, xv, sizeof xv);
    ldt__attrs at = {{0}, {3.0, 0}};
    ldt__kcall c = call(LDT_OP_POW_SCALAR, &at, 1, &x.o, &o);
    float *r = o.o.data;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == 8.0f && r[1] == -512.0f && r[2] == 0.0f, "pow: %g %g %g", r[0], r[1], r[2]);
    c.op = LDT_OP_RDIV_SCALAR;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == 1.5f && r[1] == -0.375f && isinf(r[2]) && r[2] > 0);
    /* the scalar is rounded to f32 first: 0.1 as f32 plus 1 */
    at.f[0] = 0.1;
    c.op = LDT_OP_ADD_SCALAR;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == 2.0f + 0.1f);
    rm(&x), rm(&o);
}

Test(scalar, integer_division) {
    ldt_shape s4 = ldt_test_shape(1, 4);
    tens x = mk(LDT_I32, &s4), o = mk(LDT_I32, &s4);
    int32_t xv[4] = {INT32_MIN, 7, -7, 0};
    memcpy(x.o.data, xv, sizeof xv);
    ldt__attrs at = {{0}, {-1.0, 0}};
    ldt__kcall c = call(LDT_OP_DIV_SCALAR, &at, 1, &x.o, &o);
    int32_t *r = o.o.data;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == INT32_MIN && r[1] == -7 && r[2] == 7 && r[3] == 0);
    at.f[0] = 2;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == -1073741824 && r[1] == 3 && r[2] == -3 && r[3] == 0);
    at.f[0] = 1099511627776.0; /* 2^40: quotient 0, not a division by 2^40 mod 2^32 = 0 */
    cr_assert(ldt__k_scalar(&c) == LDT_OK, "%s", ldt_last_error());
    cr_assert(r[0] == 0 && r[1] == 0);
    at.f[0] = 0;
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "div_scalar: integer division by zero"));
    at.f[0] = 5; /* 5 / x with x[3] = 0 */
    c.op = LDT_OP_RDIV_SCALAR;
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "rdiv_scalar: integer division by zero"));
    ((int32_t *)x.o.data)[3] = -2;
    cr_assert(ldt__k_scalar(&c) == LDT_OK);
    cr_assert(r[0] == 0 && r[1] == 0 && r[2] == 0 && r[3] == -2);
    rm(&x), rm(&o);
}

/* ---------------------------------------------------------------------------------------
 * Unary ops.
 */
static double f_neg(double x, double s) { (void)s; return -x; }
static double f_exp(double x, double s) { (void)s; return exp(x); }
static double f_log(double x, double s) { (void)s; return log(x); }
static double f_sqrt(double x, double s) { (void)s; return sqrt(x); }
static double f_rsqrt(double x, double s) { (void)s; return 1.0 / sqrt(x); }
static double f_tanh(double x, double s) { (void)s; return tanh(x); }
static double f_relu(double x, double s) { (void)s; return x < 0 ? 0.0 : x; }
/* 1 + erf(z) = erfc(-z) and 0.5 (1 + tanh u) = 1 / (1 + e^-2u): the same functions, kept
 * from cancelling so the f64 comparison means something in the negative tail. */
static double f_gelu(double x, double s) { (void)s; return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double f_gelut(double x, double s) {
    (void)s;
    double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}
static double f_silu(double x, double s) { (void)s; return x / (1.0 + exp(-x)); }

typedef struct unary_case {
    int op, form; /* form: gelu's attrs.i[0] */
    ref_fn f;
    int exact, ints; /* exact: correctly rounded; ints: also on i32, i64, u8 */
    double lo, hi;   /* domain of the random inputs (log-uniform when lo > 0) */
} unary_case;

static const unary_case k_unary_cases[] = {
    {LDT_OP_NEG, 0, f_neg, 1, 1, -8, 8},       {LDT_OP_EXP, 0, f_exp, 0, 0, -10, 10},
    {LDT_OP_LOG, 0, f_log, 0, 0, 1e-4, 1e4},   {LDT_OP_SQRT, 0, f_sqrt, 1, 0, 1e-4, 1e4},
    {LDT_OP_RSQRT, 0, f_rsqrt, 0, 0, 1e-4, 1e4}, {LDT_OP_TANH, 0, f_tanh, 0, 0, -6, 6},
    {LDT_OP_RELU, 0, f_relu, 1, 1, -8, 8},     {LDT_OP_GELU, 0, f_gelu, 0, 0, -9, 9},
    {LDT_OP_GELU, 1, f_gelut, 0, 0, -9, 9},    {LDT_OP_SILU, 0, f_silu, 0, 0, -30, 30},
};

Test(unary, random_every_op_and_dtype) {
    uint64_t st = 31;
    int bad = 0;
    for (size_t k = 0; k < sizeof k_unary_cases / sizeof *k_unary_cases; k++)
        for (int d = 0; d < NDT; d++) {
            const unary_case *u = &k_unary_cases[k];
            ldt_dtype t = k_all[d];
            if (!is_flt(t) && !(u->ints && t != LDT_BOOL)) continue;
            for (int r = 0; r < ldt_test_cases(20); r++) {
                ldt_shape s = rnd_shape(&st, 0);
                tens x = mk(t, &s), o = mk(t, &s);
                ldt__attrs at;
                memset(&at, 0, sizeof at);
                at.i[0] = u->form;
                if (u->lo > 0 && is_flt(t))
                    for (int64_t i = 0; i < x.n; i++)
                        putf(t, x.o.data, i, exp(rnd_in(&st, log(u->lo), log(u->hi))));
                else
                    fill(&x, &st, u->lo, u->hi, 1);
                if (x.n > 2 && is_flt(t) && u->lo > 0) { /* the edges of the domain */
                    putf(t, x.o.data, 0, 0.0);
                    putf(t, x.o.data, 1, -1.0);
                }
                ldt__kcall c = call(u->op, &at, 1, &x.o, &o);
                cr_assert(ldt__k_unary(&c) == LDT_OK, "%s", ldt_last_error());
                for (int64_t i = 0; i < x.n; i++) {
                    if (is_flt(t)) {
                        double xv = getf(t, x.o.data, i), got = getf(t, o.o.data, i);
                        if (!close_enough(t, xv, 0, got, u->f, u->exact))
                            bad = miss(bad, opname(u->op), i,
                                       "%s form %d x=%.9g: got %.17g, want ~%.17g",
                                       ldt_dtype_name(t), u->form, xv, got, u->f(xv, 0));
                    } else {
                        int64_t xv = geti(t, x.o.data, i);
                        uint64_t want = u->op == LDT_OP_NEG ? 0 - (uint64_t)xv
                                                            : (uint64_t)(xv < 0 ? 0 : xv);
                        tens w = mk(t, &(ldt_shape){0, {0}});
                        puti(t, w.o.data, 0, want);
                        if (geti(t, w.o.data, 0) != geti(t, o.o.data, i))
                            bad = miss(bad, opname(u->op), i, "%s x=%lld: got %lld",
                                       ldt_dtype_name(t), (long long)xv,
                                       (long long)geti(t, o.o.data, i));
                        rm(&w);
                    }
                }
                rm(&x);
                rm(&o);
            }
        }
    cr_assert(bad == 0, "%d elements differ", bad);
}

/* Values computed with mpmath at 100 digits. */
Test(unary, hand_values_math_h) {
    cr_assert(fabs(ldt__gelu_erf_f64(1.0) - 0.8413447460685429) <= 2e-16, "%.17g",
              ldt__gelu_erf_f64(1.0));
    cr_assert(fabs(ldt__gelu_tanh_f64(1.0) - 0.8411919906082768) <= 2e-16, "%.17g",
              ldt__gelu_tanh_f64(1.0));
    cr_assert(fabsf(ldt__gelu_erf_f32(1.0f) - 0.84134474606854f) <= 1.2e-7f);
    cr_assert(fabsf(ldt__gelu_tanh_f32(1.0f) - 0.84119199060828f) <= 1.2e-7f);
    cr_assert(fabs(ldt__gelu_erf_f64(-3.0) / -0.00404969409489028358 - 1) <= 1e-14);
    cr_assert(fabs(ldt__gelu_tanh_f64(-3.0) / -0.0036373920817730188378 - 1) <= 1e-14);
    /* deep tails keep relative accuracy, where 1 + erf / 1 + tanh would give 0 or noise */
    cr_assert(fabs(ldt__gelu_erf_f64(-10.0) / -7.6198530241605260647e-23 - 1) < 1e-13, "%g",
              ldt__gelu_erf_f64(-10.0));
    cr_assert(fabs(ldt__gelu_tanh_f64(-10.0) / -1.2040923482098059937e-37 - 1) < 1e-12, "%g",
              ldt__gelu_tanh_f64(-10.0));
    cr_assert(fabs(ldt__silu_f64(-1.0) - -0.26894142136999512075) <= 1e-16);
    cr_assert(fabs(ldt__silu_f64(20.0) - 19.999999958776927636) <= 8e-15);
    float s = ldt__silu_f32(-100.0f);
    cr_assert(isfinite(s) && s <= 0 && s > -1e-40f, "silu(-100) f32 = %g", s);
    cr_assert(fabs(ldt__silu_f64(-100.0) / -3.720075976020835963e-42 - 1) < 1e-13);
    /* limits: no overflow, no NaN from inf * 0 */
    cr_assert(ldt__silu_f32(-1000.0f) == 0.0f && ldt__silu_f32(1000.0f) == 1000.0f);
    cr_assert(ldt__silu_f32(-INFINITY) == 0.0f && ldt__silu_f32(INFINITY) == INFINITY);
    cr_assert(ldt__gelu_erf_f32(-INFINITY) == 0.0f && ldt__gelu_erf_f32(INFINITY) == INFINITY);
    cr_assert(ldt__gelu_tanh_f64(-INFINITY) == 0.0 && ldt__gelu_tanh_f64(INFINITY) == INFINITY);
    cr_assert(isnan(ldt__gelu_erf_f32(NAN)) && isnan(ldt__gelu_tanh_f32(NAN)) &&
              isnan(ldt__silu_f64(NAN)) && isnan(ldt__relu_f32(NAN)));
    cr_assert(ldt__rsqrt_f32(4.0f) == 0.5f && ldt__rsqrt_f64(0.0) == INFINITY);
    cr_assert(isnan(ldt__rsqrt_f64(-1.0)) && ldt__relu_f64(-2.0) == 0.0);
}

Test(unary, hand_values_kernel) {
    ldt_shape s4 = ldt_test_shape(1, 4);
    tens x = mk(LDT_F32, &s4), o = mk(LDT_F32, &s4);
    float xv[4] = {1.0f, -100.0f, 0.0f, -1.0f};
    memcpy(x.o.data, xv, sizeof xv);
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    ldt__kcall c = call(LDT_OP_GELU, &at, 1, &x.o, &o);
    float *r = o.o.data;
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    cr_assert(fabsf(r[0] - 0.8413447460685429f) <= 1.2e-7f && r[1] == 0.0f && r[2] == 0.0f);
    at.i[0] = 1;
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    cr_assert(fabsf(r[0] - 0.8411919906082768f) <= 1.2e-7f, "gelu tanh(1) = %.9g", r[0]);
    c.op = LDT_OP_SILU;
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    cr_assert(isfinite(r[1]) && r[1] > -1e-40f && fabsf(r[3] + 0.26894142f) < 1e-7f);
    c.op = LDT_OP_LOG;
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    cr_assert(r[0] == 0.0f && isnan(r[1]) && r[2] == -INFINITY);
    /* bf16 gelu(1) rounds once: 0.84134 -> 0.83984375 (0x3f57) */
    tens h = mk(LDT_BF16, &s4), ho = mk(LDT_BF16, &s4);
    ((uint16_t *)h.o.data)[0] = 0x3f80; /* 1.0 */
    at.i[0] = 0;
    c = call(LDT_OP_GELU, &at, 1, &h.o, &ho);
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    cr_assert(((uint16_t *)ho.o.data)[0] == 0x3f57, "bf16 gelu(1) = %#x",
              ((uint16_t *)ho.o.data)[0]);
    rm(&x), rm(&o), rm(&h), rm(&ho);
}

/* ---------------------------------------------------------------------------------------
 * Casts: every pair of dtypes, random and special values, against casting rules written
 * out here (truncate, saturate, NaN -> 0, != 0 for bool, once-rounding to halves).
 */
static void ref_cast(ldt_dtype from, const void *src, int64_t i, ldt_dtype to, void *dst) {
    if (is_flt(from)) {
        double v = getf(from, src, i);
        if (is_flt(to)) {
            putf(to, dst, 0, v);
        } else if (to == LDT_BOOL) {
            ((uint8_t *)dst)[0] = v != 0;
        } else {
            double lo = to == LDT_I32 ? -2147483648.0 : to == LDT_I64 ? -9223372036854775808.0 : 0;
            double hi = to == LDT_I32 ? 2147483647.0 : to == LDT_I64 ? 9223372036854775807.0 : 255;
            double tv = isnan(v) ? 0 : trunc(v);
            int64_t r;
            if (tv <= lo)
                r = to == LDT_I64 ? INT64_MIN : (int64_t)lo;
            else if (tv >= hi)
                r = to == LDT_I64 ? INT64_MAX : (int64_t)hi;
            else
                r = (int64_t)tv;
            puti(to, dst, 0, (uint64_t)r);
        }
    } else {
        int64_t v = geti(from, src, i);
        if (from == LDT_BOOL) v = v != 0;
        if (is_flt(to))
            putf(to, dst, 0, (long double)v); /* exact in long double, rounded once */
        else
            puti(to, dst, 0, (uint64_t)v);
    }
}

static void fill_cast_source(tens *x, uint64_t *st) {
    static const double fsp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 3.9, -3.9, 1e10, -1e10,
                                 255.5, 256.0, -0.5, 2147483647.5, 2147483648.0, -2147483649.0,
                                 9.3e18, -9.3e18, 1e30, 65519.99, 65520.0, 1.00048828125,
                                 1.00048828125 + 0x1p-40, 1.0 + 0x1p-24 + 0x1p-50, 0x1p-25,
                                 3e-41, 127.5, 128.5};
    static const int64_t isp[] = {0, 1, -1, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                                  (1ll << 40) + (1ll << 32) + 1, (1ll << 24) + 1, 65519, 65521,
                                  255, 256, -129, (1ll << 53) + 1};
    ldt_dtype t = x->o.dtype;
    for (int64_t i = 0; i < x->n; i++) {
        int k = (int)ldt_test_range(st, 0, 3);
        if (is_flt(t)) {
            double v = k == 0 ? fsp[ldt_test_range(st, 0, sizeof fsp / sizeof *fsp - 1)]
                       : k == 1 ? rnd_in(st, -1e6, 1e6)
                                : rnd_in(st, -300, 300);
            putf(t, x->o.data, i, v);
        } else if (t == LDT_BOOL) {
            ((uint8_t *)x->o.data)[i] = (uint8_t)ldt_test_range(st, 0, 2); /* 2 is true too */
        } else {
            uint64_t v = k == 0 ? (uint64_t)isp[ldt_test_range(st, 0, sizeof isp / sizeof *isp - 1)]
                         : k == 1 ? ldt_test_rand(st)
                                  : (uint64_t)ldt_test_range(st, -300, 300);
            puti(t, x->o.data, i, v);
        }
    }
}

Test(cast, every_pair_against_reference) {
    uint64_t st = 41;
    int bad = 0;
    for (int f = 0; f < NDT; f++)
        for (int g = 0; g < NDT; g++) {
            ldt_dtype from = k_all[f], to = k_all[g];
            ldt_shape s = ldt_test_shape(1, (int)(ldt_test_cases(400) + 300)); /* > one 256 chunk */
            tens x = mk(from, &s), o = mk(to, &s), w = mk(to, &(ldt_shape){0, {0}});
            fill_cast_source(&x, &st);
            ldt__kcall c = call(LDT_OP_CAST, NULL, 1, &x.o, &o);
            cr_assert(ldt__k_unary(&c) == LDT_OK, "%s", ldt_last_error());
            size_t es = ldt_dtype_size(to);
            for (int64_t i = 0; i < x.n; i++) {
                ref_cast(from, x.o.data, i, to, w.o.data);
                int eq = memcmp((char *)o.o.data + i * es, w.o.data, es) == 0;
                if (!eq && is_flt(to)) /* NaN payloads may differ */
                    eq = isnan(getf(to, o.o.data, i)) && isnan(getf(to, w.o.data, 0));
                if (!eq) {
                    char what[64];
                    snprintf(what, sizeof what, "cast %s -> %s", ldt_dtype_name(from),
                             ldt_dtype_name(to));
                    if (is_flt(from) && is_flt(to))
                        bad = miss(bad, what, i, "%.17g: got %.17g want %.17g",
                                   getf(from, x.o.data, i), getf(to, o.o.data, i),
                                   getf(to, w.o.data, 0));
                    else if (is_flt(from))
                        bad = miss(bad, what, i, "%.17g: got %lld want %lld",
                                   getf(from, x.o.data, i), (long long)geti(to, o.o.data, i),
                                   (long long)geti(to, w.o.data, 0));
                    else if (is_flt(to))
                        bad = miss(bad, what, i, "%lld: got %.17g want %.17g",
                                   (long long)geti(from, x.o.data, i), getf(to, o.o.data, i),
                                   getf(to, w.o.data, 0));
                    else
                        bad = miss(bad, what, i, "%lld: got %lld want %lld",
                                   (long long)geti(from, x.o.data, i),
                                   (long long)geti(to, o.o.data, i),
                                   (long long)geti(to, w.o.data, 0));
                }
            }
            rm(&x), rm(&o), rm(&w);
        }
    cr_assert(bad == 0, "%d elements differ", bad);
}

Test(cast, hand_values) {
    ldt_shape s6 = ldt_test_shape(1, 6);
    tens x = mk(LDT_F64, &s6), o = mk(LDT_I32, &s6);
    double xv[6] = {3.9, -3.9, 1e10, NAN, -1e10, -0.99};
    memcpy(x.o.data, xv, sizeof xv);
    ldt__kcall c = call(LDT_OP_CAST, NULL, 1, &x.o, &o);
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    int32_t *r = o.o.data;
    cr_assert(r[0] == 3 && r[1] == -3 && r[2] == INT32_MAX && r[3] == 0 && r[4] == INT32_MIN &&
                  r[5] == 0,
              "f64 -> i32: %d %d %d %d %d %d", r[0], r[1], r[2], r[3], r[4], r[5]);
    /* f64 -> f16 rounds once: 1 + 2^-11 + 2^-40 is just above a tie and rounds up, where
     * going through f32 would land on the tie and round to even (1.0) */
    tens h = mk(LDT_F16, &s6);
    double hv[6] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11, 65519.0, 65520.0, -0.0, 0x1p-25};
    memcpy(x.o.data, hv, sizeof hv);
    c = call(LDT_OP_CAST, NULL, 1, &x.o, &h);
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    uint16_t *hr = h.o.data;
    cr_assert(hr[0] == 0x3c01 && hr[1] == 0x3c00 && hr[2] == 0x7bff && hr[3] == 0x7c00 &&
                  hr[4] == 0x8000 && hr[5] == 0x0000,
              "f64 -> f16: %#x %#x %#x %#x %#x %#x", hr[0], hr[1], hr[2], hr[3], hr[4], hr[5]);
    /* i64 -> bf16: 2^40 + 2^32 + 1 is above the tie, rounds up to 2^40 + 2^33 */
    tens i = mk(LDT_I64, &s6), b = mk(LDT_BF16, &s6);
    ((int64_t *)i.o.data)[0] = (1ll << 40) + (1ll << 32) + 1;
    ((int64_t *)i.o.data)[1] = (1ll << 40) + (1ll << 32);
    c = call(LDT_OP_CAST, NULL, 1, &i.o, &b);
    cr_assert(ldt__k_unary(&c) == LDT_OK);
    uint16_t *br = b.o.data;
    cr_assert(br[0] == 0x5381 && br[1] == 0x5380, "i64 -> bf16: %#x %#x", br[0], br[1]);
    rm(&x), rm(&o), rm(&h), rm(&i), rm(&b);
}

/* ---------------------------------------------------------------------------------------
 * Errors: every unsupported (op, dtype), and each malformed call, with the op named.
 */
static int msg_has(const char *a, const char *b) {
    const char *m = ldt_last_error();
    return strstr(m, a) && (!b || strstr(m, b));
}

Test(errors, every_unsupported_op_dtype) {
    ldt_shape s = ldt_test_shape(1, 2);
    int checked = 0;
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    at.f[0] = 2.0;
    for (int op = LDT_OP_ADD; op <= LDT_OP_CAST; op++)
        for (int d = 0; d < NDT; d++) {
            ldt_dtype t = k_all[d];
            int cmp = op >= LDT_OP_EQ && op <= LDT_OP_GE;
            int supported;
            if (op <= LDT_OP_DIV) supported = arith_ok(op, t);
            else if (op <= LDT_OP_WHERE) supported = 1;
            else if (op <= LDT_OP_POW_SCALAR) supported = scalar_ok(op, t);
            else if (op == LDT_OP_NEG || op == LDT_OP_RELU) supported = t != LDT_BOOL;
            else if (op == LDT_OP_CAST) supported = 1;
            else supported = is_flt(t);
            tens a = mk(op == LDT_OP_WHERE ? LDT_BOOL : t, &s), b = mk(t, &s), cc = mk(t, &s),
                 o = mk(cmp ? LDT_BOOL : t, &s);
            ldt__operand in[3] = {a.o, b.o, cc.o};
            int nin = op == LDT_OP_WHERE ? 3 : op <= LDT_OP_GE ? 2 : 1;
            if (!is_flt(t) && op != LDT_OP_WHERE) /* no zero divisors */
                for (int i = 0; i < 2; i++) puti(t, a.o.data, i, 1), puti(t, b.o.data, i, 1);
            if (nin == 2) in[0] = b.o, in[1] = b.o;
            ldt__kcall c = call(op, &at, nin, in, &o);
            ldt_status st = op <= LDT_OP_WHERE     ? ldt__k_binary(&c)
                            : op <= LDT_OP_POW_SCALAR ? ldt__k_scalar(&c)
                                                      : ldt__k_unary(&c);
            if (supported) {
                cr_assert(st == LDT_OK, "%s %s: %s", opname(op), ldt_dtype_name(t),
                          ldt_last_error());
            } else {
                char want[64];
                snprintf(want, sizeof want, "%s: dtype %s", opname(op), ldt_dtype_name(t));
                cr_assert(st == LDT_ERR_UNSUPPORTED && msg_has(want, NULL),
                          "%s %s: status %d, message '%s'", opname(op), ldt_dtype_name(t), st,
                          ldt_last_error());
                checked++;
            }
            rm(&a), rm(&b), rm(&cc), rm(&o);
        }
    /* arith on bool, scalar ops on bool, pow_scalar on ints, neg and relu on bool, exp..silu
     * (7) on ints and bool */
    cr_assert(checked == 4 + 7 + 3 + 2 + 7 * 4,
              "unsupported pairs: %d", checked);
}

Test(errors, malformed_calls) {
    ldt_shape s3 = ldt_test_shape(1, 3), s4 = ldt_test_shape(1, 4), s23 = ldt_test_shape(2, 2, 3), s123 = ldt_test_shape(3, 1, 2, 3);
    tens f3 = mk(LDT_F32, &s3), d3 = mk(LDT_F64, &s3), f4 = mk(LDT_F32, &s4),
         f23 = mk(LDT_F32, &s23), f123 = mk(LDT_F32, &s123), b3 = mk(LDT_BOOL, &s3),
         o3 = mk(LDT_F32, &s3), i3 = mk(LDT_I32, &s3);
    ldt__attrs at;
    memset(&at, 0, sizeof at);
    ldt__operand in[3];
    ldt__kcall c;

    in[0] = f3.o, in[1] = d3.o; /* dtypes differ */
    c = call(LDT_OP_ADD, NULL, 2, in, &o3);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("add:", "f64"));
    in[0] = f3.o, in[1] = f4.o; /* [3] vs [4] */
    c = call(LDT_OP_MUL, NULL, 2, in, &o3);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("mul:", "[4]"), "%s",
              ldt_last_error());
    in[0] = f123.o, in[1] = f3.o; /* more dims than the output */
    c = call(LDT_OP_SUB, NULL, 2, in, &f23);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("sub:", "more dims"));
    in[0] = f3.o, in[1] = f3.o; /* comparison into f32 */
    c = call(LDT_OP_LT, NULL, 2, in, &o3);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("lt:", "bool"));
    c = call(LDT_OP_ADD, NULL, 1, in, &o3); /* arity */
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("add:", "2 inputs"));
    in[0] = f3.o, in[1] = f3.o, in[2] = f3.o; /* where with a float cond */
    c = call(LDT_OP_WHERE, NULL, 3, in, &o3);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("where:", "cond"));
    in[0] = b3.o, in[1] = f3.o, in[2] = d3.o;
    c = call(LDT_OP_WHERE, NULL, 3, in, &o3);
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("where:", NULL));
    c = call(LDT_OP_EXP, NULL, 2, in, &o3); /* not a binary op */
    cr_assert(ldt__k_binary(&c) == LDT_ERR_INTERNAL && msg_has("exp", NULL));

    c = call(LDT_OP_EXP, NULL, 1, &f3.o, &f4); /* shape differs */
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("exp:", "[4]"));
    c = call(LDT_OP_EXP, NULL, 1, &d3.o, &o3); /* dtype changes without cast */
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("exp:", "cast"));
    at.i[0] = 3; /* 0, 1 and 2 (the erf form's derivative) are the forms */
    c = call(LDT_OP_GELU, &at, 1, &f3.o, &o3);
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("gelu:", "tanh"));
    c = call(LDT_OP_ADD, NULL, 1, &f3.o, &o3);
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INTERNAL);

    c = call(LDT_OP_ADD_SCALAR, NULL, 1, &f3.o, &o3); /* no scalar */
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("add_scalar:", NULL));
    at.f[0] = 2.5;
    c = call(LDT_OP_MUL_SCALAR, &at, 1, &i3.o, &i3); /* non-integer scalar on i32 */
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("mul_scalar:", "2.5"));
    at.f[0] = NAN;
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT);
    at.f[0] = 1e300;
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT);
    at.f[0] = 1;
    c = call(LDT_OP_ADD_SCALAR, &at, 1, &f3.o, &d3); /* dtype changes */
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("add_scalar:", "f64"));
    c = call(LDT_OP_ADD_SCALAR, &at, 1, &f3.o, &f4);
    cr_assert(ldt__k_scalar(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("add_scalar:", "shape"));

    ldt__operand bad = f3.o; /* invalid dtype, negative size, missing data */
    bad.dtype = (ldt_dtype)99;
    c = call(LDT_OP_NEG, NULL, 1, &bad, &o3);
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("neg:", "dtype"));
    bad = f3.o;
    bad.shape.dims[0] = -3;
    c = call(LDT_OP_NEG, NULL, 1, &bad, &o3);
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("neg:", "negative"));
    bad = f3.o;
    bad.data = NULL;
    c = call(LDT_OP_NEG, NULL, 1, &bad, &o3);
    cr_assert(ldt__k_unary(&c) == LDT_ERR_INVALID_ARGUMENT && msg_has("neg:", "no data"));
    rm(&f3), rm(&d3), rm(&f4), rm(&f23), rm(&f123), rm(&b3), rm(&o3), rm(&i3);
}
