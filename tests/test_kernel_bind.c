/* Bound kernel calls (ldt__cpu_kernel_bind) against the unbound kernels (ldt__cpu_kernel) on
 * the same inputs: identical output bytes, identical failures, bad calls refused at bind with
 * the unbound kernel's message; inputs re-pointed between calls as a replay does. The unbound
 * kernels are checked against independent references in tests/test_kernels_*.c; integer
 * division by a scalar, whose bound form is new code, also against C's division here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static const ldt_dtype k_all[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                  LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};
#define NALL ((int)(sizeof k_all / sizeof k_all[0]))

static int64_t numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* n values of t: integers in [lo, hi] (no zero when nz), floats in [lo, hi) with fractions. */
static void fill(void *d, ldt_dtype t, int64_t n, uint64_t *st, int lo, int hi, int nz) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        double f = lo + (hi - lo) * (double)(ldt_test_rand(st) >> 11) / 9007199254740992.0;
        do v = ldt_test_range(st, lo, hi);
        while (nz && v == 0);
        switch (t) {
        case LDT_F32: ((float *)d)[i] = (float)f; break;
        case LDT_F64: ((double *)d)[i] = f; break;
        case LDT_F16: ((uint16_t *)d)[i] = ldt__f32_to_f16((float)f); break;
        case LDT_BF16: ((uint16_t *)d)[i] = ldt__f32_to_bf16((float)f); break;
        case LDT_I32: ((int32_t *)d)[i] = (int32_t)v; break;
        case LDT_I64: ((int64_t *)d)[i] = v; break;
        case LDT_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
        default: ((uint8_t *)d)[i] = (uint8_t)(v & 1); break;
        }
    }
}

/* One call under test: up to 4 inputs, each with the range its values are drawn from. */
typedef struct tc {
    ldt__kcall c;
    ldt__operand in[4];
    ldt__attrs at;
    int lo[4], hi[4], nz[4];
    uint64_t seed;
} tc;

static void tc_init(tc *t, int op, int nin, ldt_dtype ot, ldt_shape os) {
    memset(t, 0, sizeof *t);
    t->c.op = op;
    t->c.attrs = &t->at;
    t->c.nin = nin;
    t->c.in = t->in;
    t->c.out.dtype = ot;
    t->c.out.shape = os;
    t->seed = 0x5eed0000u + (uint64_t)op;
    for (int k = 0; k < 4; k++) t->lo[k] = -4, t->hi[k] = 4;
}

static void tc_in(tc *t, int k, ldt_dtype dt, ldt_shape s) {
    t->in[k].dtype = dt;
    t->in[k].shape = s;
}

/* Fresh buffers with fresh values for every input (a replay re-pointing its inputs). */
static void tc_refill(tc *t, void **bufs) {
    for (int k = 0; k < t->c.nin; k++) {
        int64_t n = numel(&t->in[k].shape);
        free(bufs[k]);
        bufs[k] = malloc((size_t)(n ? n : 1) * ldt_dtype_size(t->in[k].dtype));
        cr_assert(bufs[k]);
        fill(bufs[k], t->in[k].dtype, n, &t->seed, t->lo[k], t->hi[k], t->nz[k]);
        t->in[k].data = bufs[k];
    }
}

/* Ops whose attrs.i[1] is the random offset, which a replay patches each step. */
static int draws(int op) {
    return (op >= LDT_OP_RAND && op <= LDT_OP_RANDINT) || op == LDT_OP_DROPOUT || op == LDT_OP_SDPA;
}

enum { RAN = 0, REFUSED_AT_BIND = 1, FAILED_AT_CALL = 2 };

/* Binds the call, then over three rounds of re-pointed inputs (and random offsets moved on, as
 * a replay patches them) runs the unbound and the bound kernel and compares. */
static int run_same(tc *t, const char *what) {
    void *bufs[4] = {NULL, NULL, NULL, NULL};
    char ubuf[512], bmsg[512];
    int64_t on = numel(&t->c.out.shape);
    size_t ob = (size_t)(on ? on : 1) * ldt_dtype_size(t->c.out.dtype);
    void *ou = malloc(ob), *obb = malloc(ob), *plan = (void *)1;
    ldt__kernel_fn fn = NULL, un = ldt__cpu_kernel(t->c.op);
    int result = RAN;
    cr_assert(ou && obb && un, "%s", what);
    tc_refill(t, bufs);
    ldt__kcall cu = t->c, cb = t->c;
    cu.out.data = ou;
    cb.out.data = obb;
    ldt_status sb = ldt__cpu_kernel_bind(&cb, &fn, &plan);
    if (sb != LDT_OK) {
        snprintf(bmsg, sizeof bmsg, "%s", ldt_last_error());
        cr_assert_null(plan, "%s: a refused bind leaves no plan", what);
        cr_assert_null(fn, "%s", what);
        ldt_status su = un(&cu);
        cr_assert_eq(su, sb, "%s: bind says %d (%s), the kernel %d (%s)", what, sb, bmsg, su,
                     ldt_last_error());
        cr_assert_str_eq(ldt_last_error(), bmsg, "%s", what);
        result = REFUSED_AT_BIND;
    } else {
        cr_assert_eq(cb.plan, plan, "%s: the plan is stored in the call", what);
        for (int round = 0; round < 3; round++) {
            if (round) {
                tc_refill(t, bufs);
                if (draws(t->c.op)) t->at.i[1] += 977; /* this replay's offset */
            }
            memset(ou, 0xA5, ob);
            memset(obb, 0xA5, ob);
            ldt_status su = un(&cu);
            snprintf(ubuf, sizeof ubuf, "%s", su == LDT_OK ? "" : ldt_last_error());
            ldt_status sc = fn(&cb);
            cr_assert_eq(sc, su, "%s round %d: bound %d (%s), unbound %d (%s)", what, round, sc,
                         sc == LDT_OK ? "" : ldt_last_error(), su, ubuf);
            if (su != LDT_OK) {
                cr_assert_str_eq(ldt_last_error(), ubuf, "%s", what);
                result = FAILED_AT_CALL;
            } else {
                cr_assert(memcmp(ou, obb, ob) == 0, "%s round %d: outputs differ", what, round);
            }
        }
        free(plan);
    }
    for (int k = 0; k < 4; k++) free(bufs[k]);
    free(ou);
    free(obb);
    return result;
}

#define S0 ldt_test_shape(0)
#define S1(a) ldt_test_shape(1, a)
#define S2(a, b) ldt_test_shape(2, a, b)
#define S3(a, b, c) ldt_test_shape(3, a, b, c)
#define S4(a, b, c, d) ldt_test_shape(4, a, b, c, d)

/* ---------------------------------------------------------------------------------------
 * Elementwise.
 */
Test(kernel_bind, binary_all_ops_dtypes_and_broadcasts) {
    struct {
        ldt_shape a, b, o;
    } sh[] = {
        {S2(3, 5), S2(3, 5), S2(3, 5)},       /* same shape: the direct row */
        {S2(3, 1), S2(1, 5), S2(3, 5)},       /* outer product */
        {S1(5), S3(2, 3, 5), S3(2, 3, 5)},    /* a repeated */
        {S3(2, 3, 5), S3(2, 1, 5), S3(2, 3, 5)},
        {S0, S1(37), S1(37)},                 /* a scalar */
        {S2(2, 3), S2(4, 3), S2(2, 3)},       /* does not broadcast: refused */
        {S2(0, 3), S2(1, 3), S2(0, 3)},       /* empty */
        {S3(1, 40, 1), S3(1, 40, 1), S3(1, 40, 1)},
    };
    int ran = 0, refused = 0;
    for (int op = LDT_OP_ADD; op <= LDT_OP_GE; op++)
        for (int d = 0; d < NALL; d++)
            for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
                tc t;
                int cmp = op >= LDT_OP_EQ;
                tc_init(&t, op, 2, cmp ? LDT_BOOL : k_all[d], sh[s].o);
                tc_in(&t, 0, k_all[d], sh[s].a);
                tc_in(&t, 1, k_all[d], sh[s].b);
                t.lo[0] = t.lo[1] = -9;
                t.hi[0] = t.hi[1] = 9;
                if (k_all[d] == LDT_U8) t.lo[0] = t.lo[1] = 0, t.hi[0] = t.hi[1] = 255;
                t.nz[1] = op == LDT_OP_DIV; /* by-zero: below */
                char what[96];
                snprintf(what, sizeof what, "%s %s shapes %zu", ldt__builtin_op_name(op),
                         ldt_dtype_name(k_all[d]), s);
                int r = run_same(&t, what);
                cr_assert_neq(r, FAILED_AT_CALL, "%s", what);
                if (s == 5) cr_assert_eq(r, REFUSED_AT_BIND, "%s: a bad broadcast", what);
                ran += r == RAN;
                refused += r == REFUSED_AT_BIND;
            }
    cr_assert_gt(ran, 300);
    cr_assert_gt(refused, 50); /* bad broadcasts, and bool arithmetic */
}

Test(kernel_bind, binary_refusals_match) {
    tc t;
    /* dtypes differ */
    tc_init(&t, LDT_OP_ADD, 2, LDT_F32, S1(4));
    tc_in(&t, 0, LDT_F32, S1(4));
    tc_in(&t, 1, LDT_F64, S1(4));
    cr_assert_eq(run_same(&t, "add f32+f64"), REFUSED_AT_BIND);
    cr_assert(strstr(ldt_last_error(), "add: a is f32 but b is f64"), "%s", ldt_last_error());
    /* bool arithmetic */
    tc_init(&t, LDT_OP_MUL, 2, LDT_BOOL, S1(4));
    tc_in(&t, 0, LDT_BOOL, S1(4));
    tc_in(&t, 1, LDT_BOOL, S1(4));
    cr_assert_eq(run_same(&t, "mul bool"), REFUSED_AT_BIND);
    cr_assert(strstr(ldt_last_error(), "mul: dtype bool is not supported"), "%s", ldt_last_error());
    /* wrong arity */
    tc_init(&t, LDT_OP_SUB, 1, LDT_F32, S1(4));
    tc_in(&t, 0, LDT_F32, S1(4));
    cr_assert_eq(run_same(&t, "sub 1 input"), REFUSED_AT_BIND);
    /* output dtype */
    tc_init(&t, LDT_OP_LT, 2, LDT_F32, S1(4));
    tc_in(&t, 0, LDT_F32, S1(4));
    tc_in(&t, 1, LDT_F32, S1(4));
    cr_assert_eq(run_same(&t, "lt to f32"), REFUSED_AT_BIND);
    cr_assert(strstr(ldt_last_error(), "expected bool"), "%s", ldt_last_error());
}

Test(kernel_bind, integer_division_negative_operands_and_zero) {
    const ldt_dtype ints[] = {LDT_I32, LDT_I64, LDT_U8};
    for (int d = 0; d < 3; d++) {
        for (int zero = 0; zero < 2; zero++) {
            tc t;
            tc_init(&t, LDT_OP_DIV, 2, ints[d], S2(7, 9));
            tc_in(&t, 0, ints[d], S2(7, 9));
            tc_in(&t, 1, ints[d], zero ? S2(7, 9) : S1(9));
            t.lo[0] = ints[d] == LDT_U8 ? 0 : -1000;
            t.hi[0] = 1000;
            t.lo[1] = ints[d] == LDT_U8 ? 0 : -7;
            t.hi[1] = 7;
            t.nz[1] = !zero; /* 63 divisors in [-7, 7]: a zero in every round */
            char what[64];
            snprintf(what, sizeof what, "div %s %s", ldt_dtype_name(ints[d]),
                     zero ? "with zeros" : "broadcast divisor");
            int r = run_same(&t, what);
            cr_assert_eq(r, zero ? FAILED_AT_CALL : RAN, "%s", what);
            if (zero)
                cr_assert(strstr(ldt_last_error(), "div: integer division by zero (b["), "%s",
                          ldt_last_error());
        }
    }
    /* INT_MIN / -1 wraps, in the bound form as in the kernel */
    int32_t a[2] = {INT32_MIN, 7}, b[2] = {-1, -1}, o[2] = {0, 0};
    ldt__operand in[2] = {{a, S1(2), LDT_I32}, {b, S1(2), LDT_I32}};
    ldt__kcall c = {LDT_OP_DIV, NULL, 2, in, {o, S1(2), LDT_I32}, NULL, NULL, NULL};
    ldt__kernel_fn fn;
    void *plan;
    cr_assert_eq(ldt__cpu_kernel_bind(&c, &fn, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(fn(&c), LDT_OK);
    cr_assert_eq(o[0], INT32_MIN);
    cr_assert_eq(o[1], -7);
    free(plan);
}

Test(kernel_bind, scalar_ops_all_dtypes_and_divisors) {
    const double scalars[] = {2.5, 3, -1, 1, 4, -8, 0, 1099511627776.0, -2, 64, 7, -0.5};
    int ran = 0;
    for (int op = LDT_OP_ADD_SCALAR; op <= LDT_OP_POW_SCALAR; op++)
        for (int d = 0; d < NALL; d++)
            for (size_t s = 0; s < sizeof scalars / sizeof scalars[0]; s++) {
                tc t;
                tc_init(&t, op, 1, k_all[d], S2(5, 7));
                tc_in(&t, 0, k_all[d], S2(5, 7));
                t.at.f[0] = scalars[s];
                t.lo[0] = k_all[d] == LDT_U8 ? 0 : -300;
                t.hi[0] = k_all[d] == LDT_U8 ? 255 : 300;
                if (ldt_dtype_is_float(k_all[d])) t.lo[0] = -3, t.hi[0] = 3;
                t.nz[0] = op == LDT_OP_RDIV_SCALAR;
                char what[96];
                snprintf(what, sizeof what, "%s %s s=%g", ldt__builtin_op_name(op),
                         ldt_dtype_name(k_all[d]), scalars[s]);
                int r = run_same(&t, what);
                cr_assert_neq(r, FAILED_AT_CALL, "%s", what);
                if (!ldt_dtype_is_float(k_all[d]) && k_all[d] != LDT_BOOL && op == LDT_OP_DIV_SCALAR &&
                    scalars[s] == 0)
                    cr_assert_eq(r, REFUSED_AT_BIND, "%s", what);
                ran += r == RAN;
            }
    cr_assert_gt(ran, 250);
    /* rdiv_scalar on integers with a zero in x fails per call, as the kernel does */
    tc t;
    tc_init(&t, LDT_OP_RDIV_SCALAR, 1, LDT_I32, S1(200));
    tc_in(&t, 0, LDT_I32, S1(200));
    t.at.f[0] = 12;
    t.lo[0] = -2, t.hi[0] = 2;
    cr_assert_eq(run_same(&t, "rdiv_scalar with zeros"), FAILED_AT_CALL);
    cr_assert(strstr(ldt_last_error(), "rdiv_scalar: integer division by zero (x["), "%s",
              ldt_last_error());
}

/* The bound integer division by a scalar (copy, negation, shifts, plain division) against C's
 * truncating division, wrapped to the type. */
Test(kernel_bind, integer_div_scalar_against_c_division) {
    const int64_t divs[] = {1, -1, 2, -2, 4, -8, 16, 3, -7, 1024, -4096, (int64_t)1 << 40,
                            -((int64_t)1 << 62), INT64_MIN, INT64_MAX};
    uint64_t st = 99;
    enum { N = 67 };
    for (size_t s = 0; s < sizeof divs / sizeof divs[0]; s++) {
        int64_t x64[N], o64[N];
        int32_t x32[N], o32[N];
        uint8_t x8[N], o8[N];
        for (int i = 0; i < N; i++) {
            x64[i] = i < 3 ? (int64_t[]){INT64_MIN, INT64_MAX, -1}[i]
                           : (int64_t)ldt_test_rand(&st) >> ldt_test_range(&st, 0, 62);
            x32[i] = i < 3 ? (int32_t[]){INT32_MIN, INT32_MAX, -1}[i] : (int32_t)x64[i];
            x8[i] = (uint8_t)x64[i];
        }
        void *xs[3] = {x64, x32, x8}, *os[3] = {o64, o32, o8};
        ldt_dtype ts[3] = {LDT_I64, LDT_I32, LDT_U8};
        for (int k = 0; k < 3; k++) {
            ldt__attrs at = {{0}, {(double)divs[s], 0}};
            ldt__operand in = {xs[k], S1(N), ts[k]};
            ldt__kcall c = {LDT_OP_DIV_SCALAR, &at, 1, &in, {os[k], S1(N), ts[k]}, NULL, NULL, NULL};
            ldt__kernel_fn fn;
            void *plan;
            int64_t sv = (int64_t)at.f[0];
            if ((double)divs[s] >= 9223372036854775808.0) continue; /* not an int64 scalar */
            cr_assert_eq(ldt__cpu_kernel_bind(&c, &fn, &plan), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(fn(&c), LDT_OK);
            for (int i = 0; i < N; i++) {
                int64_t x = k == 0 ? x64[i] : k == 1 ? x32[i] : x8[i];
                int64_t q = sv == -1 ? (int64_t)(0 - (uint64_t)x) : x / sv;
                int64_t got = k == 0 ? o64[i] : k == 1 ? o32[i] : o8[i];
                int64_t want = k == 0 ? q : k == 1 ? (int64_t)(int32_t)(uint32_t)(uint64_t)q
                                                   : (int64_t)(uint8_t)q;
                cr_assert_eq(got, want, "%s %lld / %lld: %lld, expected %lld",
                             ldt_dtype_name(ts[k]), (long long)x, (long long)sv, (long long)got,
                             (long long)want);
            }
            free(plan);
        }
    }
}

Test(kernel_bind, unary_and_cast) {
    int ran = 0;
    for (int op = LDT_OP_NEG; op <= LDT_OP_SILU; op++)
        for (int d = 0; d < NALL; d++)
            for (int form = 0; form < (op == LDT_OP_GELU ? 4 : 1); form++) {
                tc t;
                tc_init(&t, op, 1, k_all[d], S3(3, 4, 45));
                tc_in(&t, 0, k_all[d], S3(3, 4, 45));
                t.lo[0] = op == LDT_OP_LOG || op == LDT_OP_SQRT || op == LDT_OP_RSQRT ? 0 : -5;
                t.at.i[0] = form; /* gelu 3: refused */
                char what[64];
                snprintf(what, sizeof what, "%s %s form %d", ldt__builtin_op_name(op),
                         ldt_dtype_name(k_all[d]), form);
                int r = run_same(&t, what);
                cr_assert_neq(r, FAILED_AT_CALL, "%s", what);
                if (form == 3) cr_assert_eq(r, REFUSED_AT_BIND, "%s", what);
                ran += r == RAN;
            }
    cr_assert_gt(ran, 40);
    for (int a = 0; a < NALL; a++)
        for (int b = 0; b < NALL; b++) {
            tc t;
            tc_init(&t, LDT_OP_CAST, 1, k_all[b], S1(300));
            tc_in(&t, 0, k_all[a], S1(300));
            t.lo[0] = -200, t.hi[0] = 300;
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", ldt_dtype_name(k_all[a]),
                     ldt_dtype_name(k_all[b]));
            cr_assert_eq(run_same(&t, what), RAN, "%s", what);
        }
    tc t; /* shapes differ */
    tc_init(&t, LDT_OP_EXP, 1, LDT_F32, S1(5));
    tc_in(&t, 0, LDT_F32, S1(4));
    cr_assert_eq(run_same(&t, "exp [4] -> [5]"), REFUSED_AT_BIND);
}

Test(kernel_bind, where_broadcast) {
    const ldt_dtype ts[] = {LDT_F32, LDT_F64, LDT_BF16, LDT_I64, LDT_U8, LDT_BOOL};
    for (size_t d = 0; d < sizeof ts / sizeof ts[0]; d++) {
        tc t;
        tc_init(&t, LDT_OP_WHERE, 3, ts[d], S3(2, 3, 17));
        tc_in(&t, 0, LDT_BOOL, S3(2, 1, 17));
        tc_in(&t, 1, ts[d], S1(17));
        tc_in(&t, 2, ts[d], S3(2, 3, 17));
        cr_assert_eq(run_same(&t, "where broadcast"), RAN, "%s", ldt_dtype_name(ts[d]));
        tc_init(&t, LDT_OP_WHERE, 3, ts[d], S1(33));
        tc_in(&t, 0, LDT_BOOL, S1(33));
        tc_in(&t, 1, ts[d], S1(33));
        tc_in(&t, 2, ts[d], S1(33));
        cr_assert_eq(run_same(&t, "where same"), RAN, "%s", ldt_dtype_name(ts[d]));
    }
    tc t;
    tc_init(&t, LDT_OP_WHERE, 3, LDT_F32, S1(4));
    tc_in(&t, 0, LDT_F32, S1(4));
    tc_in(&t, 1, LDT_F32, S1(4));
    tc_in(&t, 2, LDT_F32, S1(4));
    cr_assert_eq(run_same(&t, "where f32 cond"), REFUSED_AT_BIND);
    cr_assert(strstr(ldt_last_error(), "cond must be bool"), "%s", ldt_last_error());
}

/* ---------------------------------------------------------------------------------------
 * matmul, linear.
 */
Test(kernel_bind, matmul_and_linear) {
    const ldt_dtype fl[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16, LDT_I32};
    struct {
        ldt_shape a, b, o;
        int ok;
    } mm[] = {
        {S2(3, 4), S2(4, 5), S2(3, 5), 1},
        {S4(2, 1, 3, 4), S3(3, 4, 2), S4(2, 3, 3, 2), 1}, /* broadcast batches */
        {S3(6, 3, 4), S2(4, 5), S3(6, 3, 5), 1},          /* folds into one GEMM */
        {S1(4), S2(4, 5), S1(5), 1},
        {S3(2, 3, 4), S1(4), S2(2, 3), 1},
        {S2(3, 0), S2(0, 5), S2(3, 5), 1}, /* K = 0: the empty sum */
        {S2(0, 4), S2(4, 5), S2(0, 5), 1},
        {S2(3, 4), S2(5, 5), S2(3, 5), 0}, /* inner dims differ */
        {S2(3, 4), S2(4, 5), S2(3, 6), 0}, /* output shape */
        {S3(2, 3, 4), S3(3, 4, 5), S3(2, 3, 5), 0},
    };
    for (size_t d = 0; d < sizeof fl / sizeof fl[0]; d++)
        for (size_t s = 0; s < sizeof mm / sizeof mm[0]; s++) {
            tc t;
            tc_init(&t, LDT_OP_MATMUL, 2, fl[d], mm[s].o);
            tc_in(&t, 0, fl[d], mm[s].a);
            tc_in(&t, 1, fl[d], mm[s].b);
            char what[64];
            snprintf(what, sizeof what, "matmul %s case %zu", ldt_dtype_name(fl[d]), s);
            cr_assert_eq(run_same(&t, what), mm[s].ok && fl[d] != LDT_I32 ? RAN : REFUSED_AT_BIND,
                         "%s", what);
        }
    struct {
        ldt_shape x, w, b, o;
        int nin, ok;
    } ln[] = {
        {S3(2, 3, 4), S2(5, 4), S1(5), S3(2, 3, 5), 3, 1},
        {S2(3, 4), S2(5, 4), S0, S2(3, 5), 2, 1},
        {S1(4), S2(5, 4), S1(5), S1(5), 3, 1},
        {S2(3, 0), S2(5, 0), S1(5), S2(3, 5), 3, 1},
        {S2(3, 4), S2(5, 3), S0, S2(3, 5), 2, 0}, /* in features differ */
        {S2(3, 4), S2(5, 4), S1(4), S2(3, 5), 3, 0}, /* bias */
    };
    for (size_t d = 0; d < sizeof fl / sizeof fl[0]; d++)
        for (size_t s = 0; s < sizeof ln / sizeof ln[0]; s++) {
            tc t;
            tc_init(&t, LDT_OP_LINEAR, ln[s].nin, fl[d], ln[s].o);
            tc_in(&t, 0, fl[d], ln[s].x);
            tc_in(&t, 1, fl[d], ln[s].w);
            if (ln[s].nin == 3) tc_in(&t, 2, fl[d], ln[s].b);
            char what[64];
            snprintf(what, sizeof what, "linear %s case %zu", ldt_dtype_name(fl[d]), s);
            int r = run_same(&t, what);
            cr_assert_eq(r, ln[s].ok && fl[d] != LDT_I32 ? RAN : REFUSED_AT_BIND, "%s", what);
            if (s == 4 && fl[d] == LDT_F32)
                cr_assert(strstr(ldt_last_error(), "x is [3,4], w is [5,3]"), "%s", ldt_last_error());
        }
}

/* ---------------------------------------------------------------------------------------
 * The other families: reductions, nn, index, view, attention, random.
 */
Test(kernel_bind, reductions) {
    const ldt_dtype ts[] = {LDT_F32, LDT_F64, LDT_F16, LDT_I32, LDT_U8, LDT_BOOL};
    const int ops[] = {LDT_OP_SUM, LDT_OP_MEAN, LDT_OP_AMAX, LDT_OP_AMIN};
    const uint64_t masks[] = {1, 2, 5, 7, 8};
    for (size_t o = 0; o < 4; o++)
        for (size_t d = 0; d < sizeof ts / sizeof ts[0]; d++)
            for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++)
                for (int keep = 0; keep < 2; keep++) {
                    ldt_shape x = S3(3, 4, 5), out = {0, {0}};
                    for (int k = 0; k < 3; k++)
                        if (!((masks[m] >> k) & 1))
                            out.dims[out.ndim++] = x.dims[k];
                        else if (keep)
                            out.dims[out.ndim++] = 1;
                    int isf = ldt_dtype_is_float(ts[d]);
                    ldt_dtype ot = ops[o] == LDT_OP_SUM && !isf ? LDT_I64 : ts[d];
                    tc t;
                    tc_init(&t, ops[o], 1, ot, out);
                    tc_in(&t, 0, ts[d], x);
                    t.at.i[0] = (int64_t)masks[m];
                    t.at.i[1] = keep;
                    char what[64];
                    snprintf(what, sizeof what, "%s %s mask %llu keep %d",
                             ldt__builtin_op_name(ops[o]), ldt_dtype_name(ts[d]),
                             (unsigned long long)masks[m], keep);
                    int r = run_same(&t, what);
                    int bad = masks[m] == 8 || (ops[o] == LDT_OP_MEAN && !isf) ||
                              (ops[o] != LDT_OP_SUM && ops[o] != LDT_OP_MEAN && ts[d] == LDT_BOOL);
                    cr_assert_eq(r, bad ? REFUSED_AT_BIND : RAN, "%s", what);
                }
    /* argmax, argmin along each dim; topk */
    for (int op = LDT_OP_ARGMAX; op <= LDT_OP_ARGMIN; op++)
        for (int dim = -1; dim < 3; dim++) {
            ldt_shape x = S3(3, 4, 5), out = {0, {0}};
            int nd = dim < 0 ? 2 : dim;
            for (int k = 0; k < 3; k++)
                if (k != nd) out.dims[out.ndim++] = x.dims[k];
            tc t;
            tc_init(&t, op, 1, LDT_I64, out);
            tc_in(&t, 0, LDT_F32, x);
            t.at.i[0] = dim;
            cr_assert_eq(run_same(&t, "argmax/argmin"), RAN, "%d dim %d", op, dim);
        }
    for (int op = LDT_OP_TOPK_VALUES; op <= LDT_OP_TOPK_INDICES; op++)
        for (int k = 0; k < 6; k++) {
            tc t;
            tc_init(&t, op, 1, op == LDT_OP_TOPK_VALUES ? LDT_F64 : LDT_I64, S3(3, k, 5));
            tc_in(&t, 0, LDT_F64, S3(3, 4, 5));
            t.at.i[0] = 1, t.at.i[1] = k, t.at.i[2] = k & 1;
            cr_assert_eq(run_same(&t, "topk"), k <= 4 ? RAN : REFUSED_AT_BIND, "k %d", k);
        }
}

Test(kernel_bind, nn_family) {
    const ldt_dtype ts[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16, LDT_I32};
    for (size_t d = 0; d < sizeof ts / sizeof ts[0]; d++) {
        int ok = ts[d] != LDT_I32;
        for (int op = LDT_OP_SOFTMAX; op <= LDT_OP_LOG_SOFTMAX; op++)
            for (int dim = 0; dim < 4; dim++) {
                tc t;
                tc_init(&t, op, 1, ts[d], S3(3, 4, 5));
                tc_in(&t, 0, ts[d], S3(3, 4, 5));
                t.at.i[0] = dim;
                cr_assert_eq(run_same(&t, "softmax"), ok && dim < 3 ? RAN : REFUSED_AT_BIND,
                             "%d %s dim %d", op, ldt_dtype_name(ts[d]), dim);
            }
        for (int op = LDT_OP_LAYER_NORM; op <= LDT_OP_RMS_NORM; op++)
            for (int aff = 0; aff < 4; aff++) {
                int has_w = aff & 1, has_b = aff >> 1;
                tc t;
                tc_init(&t, op, 1 + has_w + has_b, ts[d], S3(3, 4, 6));
                tc_in(&t, 0, ts[d], S3(3, 4, 6));
                if (has_w) tc_in(&t, 1, ts[d], S2(4, 6));
                if (has_b) tc_in(&t, 1 + has_w, ts[d], S2(4, 6));
                t.at.i[0] = 2, t.at.i[1] = has_w, t.at.i[2] = has_b;
                t.at.f[0] = 1e-5;
                int want = ok && !(op == LDT_OP_RMS_NORM && has_b) ? RAN : REFUSED_AT_BIND;
                cr_assert_eq(run_same(&t, "norm"), want, "%d %s aff %d", op,
                             ldt_dtype_name(ts[d]), aff);
            }
        if (!ok) continue;
        tc t;
        tc_init(&t, LDT_OP_CROSS_ENTROPY, 2, ts[d], S0);
        tc_in(&t, 0, ts[d], S2(6, 7));
        tc_in(&t, 1, LDT_I64, S1(6));
        t.lo[1] = 0, t.hi[1] = 6;
        t.at.i[0] = 3; /* the ignore index */
        cr_assert_eq(run_same(&t, "cross_entropy"), RAN);
        t.lo[1] = -3, t.hi[1] = 12; /* targets out of range: fails per call, like the kernel */
        cr_assert_eq(run_same(&t, "cross_entropy bad target"), FAILED_AT_CALL);
        tc_init(&t, LDT_OP_DROPOUT, 1, ts[d], S2(8, 9));
        tc_in(&t, 0, ts[d], S2(8, 9));
        t.at.i[0] = 17, t.at.i[1] = 1000, t.at.f[0] = 0.3;
        cr_assert_eq(run_same(&t, "dropout"), RAN);
        t.at.f[0] = 1.5;
        cr_assert_eq(run_same(&t, "dropout p 1.5"), REFUSED_AT_BIND);
    }
}

Test(kernel_bind, dropout_and_random_on_a_region) {
    /* rows 2..5 (of 8) and columns 3..8 (of 9): the global index decides every value */
    ldt_region r;
    ldt_shape g = S2(8, 9);
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.local_shape = S2(4, 6);
    r.runs[0].start = 2, r.runs[0].len = 4, r.runs[0].blocks = 1, r.runs[0].block_stride = 4;
    r.runs[1].start = 3, r.runs[1].len = 6, r.runs[1].blocks = 1, r.runs[1].block_stride = 6;
    r.numel = 24;
    tc t;
    tc_init(&t, LDT_OP_DROPOUT, 1, LDT_F32, S2(4, 6));
    tc_in(&t, 0, LDT_F32, S2(4, 6));
    t.c.region = &r;
    t.c.global_shape = &g;
    t.at.i[0] = 5, t.at.i[1] = 64, t.at.f[0] = 0.5;
    cr_assert_eq(run_same(&t, "dropout region"), RAN);
    const int ops[] = {LDT_OP_RAND, LDT_OP_RANDN, LDT_OP_BERNOULLI, LDT_OP_RANDINT};
    for (int k = 0; k < 4; k++)
        for (int reg = 0; reg < 2; reg++) {
            tc_init(&t, ops[k], 0, ops[k] == LDT_OP_RANDINT ? LDT_I32 : LDT_F32,
                    reg ? S2(4, 6) : S2(8, 9));
            if (reg) t.c.region = &r, t.c.global_shape = &g;
            t.at.i[0] = 11, t.at.i[1] = 4096;
            t.at.f[0] = ops[k] == LDT_OP_BERNOULLI ? 0.25 : -1, t.at.f[1] = 2;
            t.at.i[2] = -5, t.at.i[3] = 20;
            cr_assert_eq(run_same(&t, "random"), RAN, "%s region %d",
                         ldt__builtin_op_name(ops[k]), reg);
        }
    tc_init(&t, LDT_OP_RAND, 0, LDT_I32, S1(5)); /* rand of i32: refused */
    t.at.f[0] = 0, t.at.f[1] = 1;
    cr_assert_eq(run_same(&t, "rand i32"), REFUSED_AT_BIND);
    tc_init(&t, LDT_OP_RANDN, 0, LDT_F32, S2(4, 5)); /* a region that does not fit */
    t.c.region = &r, t.c.global_shape = &g;
    cr_assert_eq(run_same(&t, "randn bad region"), REFUSED_AT_BIND);
}

Test(kernel_bind, index_family) {
    tc t;
    tc_init(&t, LDT_OP_EMBEDDING, 2, LDT_F32, S3(2, 5, 4));
    tc_in(&t, 0, LDT_F32, S2(10, 4));
    tc_in(&t, 1, LDT_I64, S2(2, 5));
    t.lo[1] = -10, t.hi[1] = 9;
    cr_assert_eq(run_same(&t, "embedding"), RAN);
    t.hi[1] = 30; /* indices out of range: checked per call */
    cr_assert_eq(run_same(&t, "embedding out of range"), FAILED_AT_CALL);
    tc_init(&t, LDT_OP_INDEX_SELECT, 2, LDT_F64, S2(3, 7));
    tc_in(&t, 0, LDT_F64, S2(3, 5));
    tc_in(&t, 1, LDT_I32, S1(7));
    t.lo[1] = 0, t.hi[1] = 4;
    t.at.i[0] = 1;
    cr_assert_eq(run_same(&t, "index_select"), RAN);
    tc_init(&t, LDT_OP_GATHER, 2, LDT_F32, S2(3, 6));
    tc_in(&t, 0, LDT_F32, S2(3, 5));
    tc_in(&t, 1, LDT_I64, S2(3, 6));
    t.lo[1] = 0, t.hi[1] = 4;
    t.at.i[0] = 1;
    cr_assert_eq(run_same(&t, "gather"), RAN);
    tc_init(&t, LDT_OP_EMBEDDING, 2, LDT_F32, S3(2, 5, 4)); /* float indices: refused */
    tc_in(&t, 0, LDT_F32, S2(10, 4));
    tc_in(&t, 1, LDT_F32, S2(2, 5));
    cr_assert_eq(run_same(&t, "embedding f32 indices"), REFUSED_AT_BIND);
}

Test(kernel_bind, view_family) {
    tc t;
    tc_init(&t, LDT_OP_PERMUTE, 1, LDT_F32, S3(5, 3, 4));
    tc_in(&t, 0, LDT_F32, S3(3, 4, 5));
    t.at.i[0] = 2, t.at.i[1] = 0, t.at.i[2] = 1;
    cr_assert_eq(run_same(&t, "permute"), RAN);
    tc_init(&t, LDT_OP_RESHAPE, 1, LDT_I64, S2(6, 10));
    tc_in(&t, 0, LDT_I64, S3(3, 4, 5));
    cr_assert_eq(run_same(&t, "reshape"), RAN);
    tc_init(&t, LDT_OP_SLICE, 1, LDT_BF16, S2(3, 2));
    tc_in(&t, 0, LDT_BF16, S2(3, 5));
    t.at.i[0] = 1, t.at.i[1] = 1, t.at.i[2] = 5, t.at.i[3] = 2;
    cr_assert_eq(run_same(&t, "slice"), RAN);
    tc_init(&t, LDT_OP_CAT, 2, LDT_F32, S2(3, 7));
    tc_in(&t, 0, LDT_F32, S2(3, 5));
    tc_in(&t, 1, LDT_F32, S2(3, 2));
    t.at.i[0] = 1;
    cr_assert_eq(run_same(&t, "cat"), RAN);
    tc_init(&t, LDT_OP_RESHAPE, 1, LDT_F32, S2(6, 11)); /* element counts differ */
    tc_in(&t, 0, LDT_F32, S3(3, 4, 5));
    cr_assert_eq(run_same(&t, "bad reshape"), REFUSED_AT_BIND);
}

Test(kernel_bind, attention) {
    const ldt_dtype ts[] = {LDT_F32, LDT_F64, LDT_BF16};
    for (size_t d = 0; d < 3; d++)
        for (int causal = 0; causal < 2; causal++)
            for (int drop = 0; drop < 2; drop++) {
                tc t;
                tc_init(&t, LDT_OP_SDPA, 3, ts[d], S4(2, 2, 5, 3));
                tc_in(&t, 0, ts[d], S4(2, 2, 5, 4));
                tc_in(&t, 1, ts[d], S4(2, 2, 7, 4));
                tc_in(&t, 2, ts[d], S4(2, 2, 7, 3));
                t.at.i[0] = 3, t.at.i[1] = 128, t.at.i[2] = causal;
                t.at.f[0] = drop ? 0.25 : 0, t.at.f[1] = 0.5;
                cr_assert_eq(run_same(&t, "sdpa"), RAN, "%s causal %d drop %d",
                             ldt_dtype_name(ts[d]), causal, drop);
            }
    tc t;
    tc_init(&t, LDT_OP_SDPA, 3, LDT_F32, S3(2, 5, 3));
    tc_in(&t, 0, LDT_F32, S3(2, 5, 4));
    tc_in(&t, 1, LDT_F32, S3(2, 7, 5)); /* E differs */
    tc_in(&t, 2, LDT_F32, S3(2, 7, 3));
    t.at.f[1] = 1;
    cr_assert_eq(run_same(&t, "sdpa bad"), REFUSED_AT_BIND);
}

Test(kernel_bind, leaves_have_no_kernel) {
    ldt__kcall c;
    ldt__kernel_fn fn = (ldt__kernel_fn)1;
    void *plan = (void *)1;
    memset(&c, 0, sizeof c);
    c.op = LDT_OP_INPUT;
    cr_assert_eq(ldt__cpu_kernel_bind(&c, &fn, &plan), LDT_ERR_INTERNAL);
    cr_assert_null(fn);
    cr_assert_null(plan);
    cr_assert(strstr(ldt_last_error(), "no CPU kernel for op"), "%s", ldt_last_error());
}
