/* Elementwise CPU kernels: broadcasting binary ops and where, scalar ops, unary math, casts. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/common/cast.h"
#include "kernels/common/elementwise_plan.h"
#include "kernels/common/math.h"
#include "kernels/cpu/kernel.h"

/* The tables below are indexed by op ranges: keep the enum order they rely on. */
_Static_assert(LDT_OP_WHERE - LDT_OP_ADD == 10, "binary ops: add..ge, where");
_Static_assert(LDT_OP_POW_SCALAR - LDT_OP_ADD_SCALAR == 6, "scalar ops: add_scalar..pow_scalar");
_Static_assert(LDT_OP_SILU - LDT_OP_NEG == 8 && LDT_OP_CAST == LDT_OP_SILU + 1,
               "unary ops: neg..silu, then cast");

/* ---------------------------------------------------------------------------------------
 * Loops. GCC at -O2 (the default build) vectorises only loops whose trip count is a known
 * multiple of the vector width, and only without possible aliasing; so rows are cut into
 * blocks of 16 with an ivdep inner loop (out may equal an input, which is a same-index
 * dependency, not a loop-carried one), then a scalar tail.
 */
#if defined(__GNUC__) && !defined(__clang__) /* clang -O2 vectorises with runtime checks */
#define LDT__IVDEP _Pragma("GCC ivdep")
#else
#define LDT__IVDEP
#endif

/* Runs the statements (which use `i`) for i in [0, n). */
#define LDT__VLOOP(n, ...)                                                                 \
    do {                                                                                   \
        int64_t i_ = 0;                                                                    \
        for (; i_ + 16 <= (n); i_ += 16) {                                                 \
            LDT__IVDEP for (int64_t j_ = 0; j_ < 16; j_++) {                               \
                int64_t i = i_ + j_;                                                       \
                __VA_ARGS__                                                                \
            }                                                                              \
        }                                                                                  \
        for (int64_t i = i_; i < (n); i++) {                                               \
            __VA_ARGS__                                                                    \
        }                                                                                  \
    } while (0)

/* Halves are computed in f32 chunks that fit in L1: convert in, run the f32 row, round once
 * on the way out. */
#define LDT__CHUNK 256

static void half_load(float *d, const void *src, int64_t n, ldt_dtype t) {
    const uint16_t *h = (const uint16_t *)src;
    if (t == LDT_F16)
        LDT__VLOOP(n, d[i] = ldt__f16_to_f32(h[i]););
    else
        LDT__VLOOP(n, d[i] = ldt__bf16_to_f32(h[i]););
}

static void half_store(void *dst, const float *s, int64_t n, ldt_dtype t) {
    uint16_t *h = (uint16_t *)dst;
    if (t == LDT_F16)
        LDT__VLOOP(n, h[i] = ldt__f32_to_f16(s[i]););
    else
        LDT__VLOOP(n, h[i] = ldt__f32_to_bf16(s[i]););
}

static int is_half(ldt_dtype t) { return t == LDT_F16 || t == LDT_BF16; }

/* ---------------------------------------------------------------------------------------
 * Binary rows: o[i] = a[i*sa] op b[i*sb] for i < n, where sa and sb are 0 (a broadcast
 * scalar) or 1 (contiguous); the broadcast iterator below only makes such rows.
 */
typedef void (*bin_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);

#define BIN_ROW(NAME, TI, TO, EXPR)                                                        \
    static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,     \
                     int64_t n) {                                                          \
        TO *o = (TO *)o_;                                                                  \
        const TI *a = (const TI *)a_, *b = (const TI *)b_;                                 \
        if (sa && sb) {                                                                    \
            LDT__VLOOP(n, TI x = a[i]; TI y = b[i]; o[i] = (TO)(EXPR););                   \
        } else if (sb) {                                                                   \
            const TI x = a[0];                                                             \
            LDT__VLOOP(n, TI y = b[i]; o[i] = (TO)(EXPR););                                \
        } else if (sa) {                                                                   \
            const TI y = b[0];                                                             \
            LDT__VLOOP(n, TI x = a[i]; o[i] = (TO)(EXPR););                                \
        } else {                                                                           \
            const TI x = a[0], y = b[0];                                                   \
            const TO v = (TO)(EXPR);                                                       \
            LDT__VLOOP(n, o[i] = v;);                                                      \
        }                                                                                  \
    }

/* Floats: IEEE arithmetic in the type itself (halves come here as f32). */
#define FLOAT_ARITH_ROWS(SFX, T)                                                           \
    BIN_ROW(add_##SFX, T, T, x + y)                                                        \
    BIN_ROW(sub_##SFX, T, T, x - y)                                                        \
    BIN_ROW(mul_##SFX, T, T, x * y)                                                        \
    BIN_ROW(div_##SFX, T, T, x / y)
FLOAT_ARITH_ROWS(f32, float)
FLOAT_ARITH_ROWS(f64, double)

/* Integers wrap: computed in the unsigned type UT (modular, no signed-overflow UB), then
 * converted back (two's complement on every compiler we build with). */
#define INT_ARITH_ROWS(SFX, T, UT)                                                         \
    BIN_ROW(add_##SFX, T, T, (UT)x + (UT)y)                                                \
    BIN_ROW(sub_##SFX, T, T, (UT)x - (UT)y)                                                \
    BIN_ROW(mul_##SFX, T, T, (UT)x * (UT)y)
INT_ARITH_ROWS(i32, int32_t, uint32_t)
INT_ARITH_ROWS(i64, int64_t, uint64_t)
INT_ARITH_ROWS(u8, uint8_t, unsigned)

/* Integer division truncates toward zero; the caller has checked b for zeros. x / -1 is
 * computed as a wrapping negation so that INT_MIN / -1 gives INT_MIN instead of trapping. */
#define SIGNED_DIV_ROW(NAME, T, UT)                                                        \
    static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,     \
                     int64_t n) {                                                          \
        T *o = (T *)o_;                                                                    \
        const T *a = (const T *)a_, *b = (const T *)b_;                                    \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T x = a[i * sa], y = b[i * sb];                                                \
            o[i] = y == -1 ? (T)(0 - (UT)x) : (T)(x / y);                                  \
        }                                                                                  \
    }
SIGNED_DIV_ROW(div_i32, int32_t, uint32_t)
SIGNED_DIV_ROW(div_i64, int64_t, uint64_t)
BIN_ROW(div_u8, uint8_t, uint8_t, x / y)

/* Comparisons write bool (one byte, 0 or 1); bool inputs compare as 0/1 whatever byte they
 * hold. */
#define CMP_SAME(v) (v)
#define CMP_BOOL(v) ((v) != 0)
#define CMP_ROWS(SFX, T, N)                                                                \
    BIN_ROW(eq_##SFX, T, uint8_t, N(x) == N(y))                                            \
    BIN_ROW(ne_##SFX, T, uint8_t, N(x) != N(y))                                            \
    BIN_ROW(lt_##SFX, T, uint8_t, N(x) < N(y))                                             \
    BIN_ROW(le_##SFX, T, uint8_t, N(x) <= N(y))                                            \
    BIN_ROW(gt_##SFX, T, uint8_t, N(x) > N(y))                                             \
    BIN_ROW(ge_##SFX, T, uint8_t, N(x) >= N(y))
CMP_ROWS(f32, float, CMP_SAME)
CMP_ROWS(f64, double, CMP_SAME)
CMP_ROWS(i32, int32_t, CMP_SAME)
CMP_ROWS(i64, int64_t, CMP_SAME)
CMP_ROWS(u8, uint8_t, CMP_SAME)
CMP_ROWS(bool, uint8_t, CMP_BOOL)

/* [op - ADD][dtype]; halves use the f32 row through f32 chunks, NULL is unsupported. */
#define ROWS_OF(OP)                                                                        \
    {[LDT_F32] = OP##_f32, [LDT_F64] = OP##_f64, [LDT_F16] = OP##_f32, [LDT_BF16] = OP##_f32, \
     [LDT_I32] = OP##_i32, [LDT_I64] = OP##_i64, [LDT_U8] = OP##_u8}
#define CMP_ROWS_OF(OP)                                                                    \
    {[LDT_F32] = OP##_f32, [LDT_F64] = OP##_f64, [LDT_F16] = OP##_f32, [LDT_BF16] = OP##_f32, \
     [LDT_I32] = OP##_i32, [LDT_I64] = OP##_i64, [LDT_U8] = OP##_u8, [LDT_BOOL] = OP##_bool}
static const bin_fn k_binary[LDT_OP_WHERE - LDT_OP_ADD][LDT_DTYPE_COUNT] = {
    ROWS_OF(add),    ROWS_OF(sub),    ROWS_OF(mul),    ROWS_OF(div),    CMP_ROWS_OF(eq),
    CMP_ROWS_OF(ne), CMP_ROWS_OF(lt), CMP_ROWS_OF(le), CMP_ROWS_OF(gt), CMP_ROWS_OF(ge),
};

/* where(cond, a, b) moves elements, so one row per element size serves every dtype. */
typedef void (*where_fn)(void *o, const uint8_t *cd, int64_t sc, const void *a, int64_t sa,
                         const void *b, int64_t sb, int64_t n);
#define WHERE_ROW(NAME, T)                                                                 \
    static void NAME(void *o_, const uint8_t *cd, int64_t sc, const void *a_, int64_t sa,  \
                     const void *b_, int64_t sb, int64_t n) {                              \
        T *o = (T *)o_;                                                                    \
        const T *a = (const T *)a_, *b = (const T *)b_;                                    \
        if (sc && sa && sb)                                                                \
            LDT__VLOOP(n, o[i] = cd[i] ? a[i] : b[i];);                                    \
        else                                                                               \
            for (int64_t i = 0; i < n; i++) o[i] = cd[i * sc] ? a[i * sa] : b[i * sb];     \
    }
WHERE_ROW(where_1, uint8_t)
WHERE_ROW(where_2, uint16_t)
WHERE_ROW(where_4, uint32_t)
WHERE_ROW(where_8, uint64_t)

/* ---------------------------------------------------------------------------------------
 * Scalar rows: o[i] = x[i] op s on same-shape contiguous buffers. Floats convert s to the
 * compute type first (f32 for f32 and halves), as torch does with a wrapped scalar.
 */
typedef void (*scalar_fn)(void *o, const void *x, int64_t n, double s);

#define SCALAR_ROW(NAME, T, CT, CONV, EXPR)                                                \
    static void NAME(void *o_, const void *x_, int64_t n, double s_) {                     \
        T *o = (T *)o_;                                                                    \
        const T *xp = (const T *)x_;                                                       \
        const CT s = (CT)(CONV);                                                           \
        LDT__VLOOP(n, T x = xp[i]; o[i] = (T)(EXPR););                                     \
    }
#define FLOAT_SCALAR_ROWS(SFX, T)                                                          \
    SCALAR_ROW(adds_##SFX, T, T, s_, x + s)                                                \
    SCALAR_ROW(subs_##SFX, T, T, s_, x - s)                                                \
    SCALAR_ROW(rsubs_##SFX, T, T, s_, s - x)                                               \
    SCALAR_ROW(muls_##SFX, T, T, s_, x * s)                                                \
    SCALAR_ROW(divs_##SFX, T, T, s_, x / s)                                                \
    SCALAR_ROW(rdivs_##SFX, T, T, s_, s / x)                                               \
    SCALAR_ROW(pows_##SFX, T, T, s_, ldt__pow_##SFX(x, s))
FLOAT_SCALAR_ROWS(f32, float)
FLOAT_SCALAR_ROWS(f64, double)

/* Integers: s has been checked to be an integer in int64 range (a fractional scalar on an
 * integer tensor is an error: cast first); arithmetic wraps modulo the type (unsigned). */
#define INT_SCALAR_ROWS(SFX, T, UT)                                                        \
    SCALAR_ROW(adds_##SFX, T, UT, (uint64_t)(int64_t)s_, (UT)x + s)                        \
    SCALAR_ROW(subs_##SFX, T, UT, (uint64_t)(int64_t)s_, (UT)x - s)                        \
    SCALAR_ROW(rsubs_##SFX, T, UT, (uint64_t)(int64_t)s_, s - (UT)x)                       \
    SCALAR_ROW(muls_##SFX, T, UT, (uint64_t)(int64_t)s_, (UT)x * s)
INT_SCALAR_ROWS(i32, int32_t, uint32_t)
INT_SCALAR_ROWS(i64, int64_t, uint64_t)
INT_SCALAR_ROWS(u8, uint8_t, unsigned)

/* Integer division with a scalar is done in int64 on the scalar as given (x / 2^40 is 0, not
 * a division by 2^40 wrapped to 0), then wrapped to the type. The caller has checked for
 * zero divisors. */
#define INT_DIV_SCALAR_ROWS(SFX, T, WRAP)                                                  \
    static void divs_##SFX(void *o_, const void *x_, int64_t n, double s_) {               \
        T *o = (T *)o_;                                                                    \
        const T *x = (const T *)x_;                                                        \
        const int64_t s = (int64_t)s_;                                                     \
        for (int64_t i = 0; i < n; i++) o[i] = (T)WRAP(ldt__idiv64(x[i], s));              \
    }                                                                                      \
    static void rdivs_##SFX(void *o_, const void *x_, int64_t n, double s_) {              \
        T *o = (T *)o_;                                                                    \
        const T *x = (const T *)x_;                                                        \
        const int64_t s = (int64_t)s_;                                                     \
        for (int64_t i = 0; i < n; i++) o[i] = (T)WRAP(ldt__idiv64(s, x[i]));              \
    }
#define WRAP_SAME(v) (v)
INT_DIV_SCALAR_ROWS(i32, int32_t, ldt__cast_wrap_i32)
INT_DIV_SCALAR_ROWS(i64, int64_t, WRAP_SAME)
INT_DIV_SCALAR_ROWS(u8, uint8_t, (uint8_t))

#define FLOAT_ROWS_OF(OP)                                                                  \
    {[LDT_F32] = OP##_f32, [LDT_F64] = OP##_f64, [LDT_F16] = OP##_f32, [LDT_BF16] = OP##_f32}
static const scalar_fn k_scalar[LDT_OP_POW_SCALAR - LDT_OP_ADD_SCALAR + 1][LDT_DTYPE_COUNT] = {
    ROWS_OF(adds), ROWS_OF(subs), ROWS_OF(rsubs),      ROWS_OF(muls),
    ROWS_OF(divs), ROWS_OF(rdivs), FLOAT_ROWS_OF(pows),
};

/* ---------------------------------------------------------------------------------------
 * Unary rows on same-shape contiguous buffers.
 */
typedef void (*unary_fn)(void *o, const void *x, int64_t n);

#define UNARY_ROW(NAME, T, EXPR)                                                           \
    static void NAME(void *o_, const void *x_, int64_t n) {                                \
        T *o = (T *)o_;                                                                    \
        const T *xp = (const T *)x_;                                                       \
        LDT__VLOOP(n, T x = xp[i]; o[i] = (T)(EXPR););                                     \
    }
#define FLOAT_UNARY_ROWS(SFX, T)                                                           \
    UNARY_ROW(neg_##SFX, T, -x)                                                            \
    UNARY_ROW(exp_##SFX, T, ldt__exp_##SFX(x))                                             \
    UNARY_ROW(log_##SFX, T, ldt__log_##SFX(x))                                             \
    UNARY_ROW(sqrt_##SFX, T, ldt__sqrt_##SFX(x))                                           \
    UNARY_ROW(rsqrt_##SFX, T, ldt__rsqrt_##SFX(x))                                         \
    UNARY_ROW(tanh_##SFX, T, ldt__tanh_##SFX(x))                                           \
    UNARY_ROW(relu_##SFX, T, ldt__relu_##SFX(x))                                           \
    UNARY_ROW(gelu_##SFX, T, ldt__gelu_erf_##SFX(x))                                       \
    UNARY_ROW(silu_##SFX, T, ldt__silu_##SFX(x))                                           \
    UNARY_ROW(gelut_##SFX, T, ldt__gelu_tanh_##SFX(x))                                     \
    UNARY_ROW(geluerfg_##SFX, T, ldt__gelu_erf_grad_##SFX(x))
FLOAT_UNARY_ROWS(f32, float)
FLOAT_UNARY_ROWS(f64, double)

/* Integer neg wraps (-INT_MIN = INT_MIN, -u8 is 256 - x); relu of u8 is the identity. */
UNARY_ROW(neg_i32, int32_t, 0 - (uint32_t)x)
UNARY_ROW(neg_i64, int64_t, 0 - (uint64_t)x)
UNARY_ROW(neg_u8, uint8_t, 0u - (unsigned)x)
UNARY_ROW(relu_i32, int32_t, x < 0 ? 0 : x)
UNARY_ROW(relu_i64, int64_t, x < 0 ? 0 : x)
UNARY_ROW(relu_u8, uint8_t, x)

#define U_(OP) (LDT_OP_##OP - LDT_OP_NEG)
static const unary_fn k_unary[LDT_OP_SILU - LDT_OP_NEG + 1][LDT_DTYPE_COUNT] = {
    [U_(NEG)] = {[LDT_F32] = neg_f32, [LDT_F64] = neg_f64, [LDT_F16] = neg_f32,
                 [LDT_BF16] = neg_f32, [LDT_I32] = neg_i32, [LDT_I64] = neg_i64,
                 [LDT_U8] = neg_u8},
    [U_(EXP)] = FLOAT_ROWS_OF(exp),
    [U_(LOG)] = FLOAT_ROWS_OF(log),
    [U_(SQRT)] = FLOAT_ROWS_OF(sqrt),
    [U_(RSQRT)] = FLOAT_ROWS_OF(rsqrt),
    [U_(TANH)] = FLOAT_ROWS_OF(tanh),
    [U_(RELU)] = {[LDT_F32] = relu_f32, [LDT_F64] = relu_f64, [LDT_F16] = relu_f32,
                  [LDT_BF16] = relu_f32, [LDT_I32] = relu_i32, [LDT_I64] = relu_i64,
                  [LDT_U8] = relu_u8},
    [U_(GELU)] = FLOAT_ROWS_OF(gelu),
    [U_(SILU)] = FLOAT_ROWS_OF(silu),
};
static const unary_fn k_gelu_tanh[LDT_DTYPE_COUNT] = FLOAT_ROWS_OF(gelut);
static const unary_fn k_gelu_erf_grad[LDT_DTYPE_COUNT] = FLOAT_ROWS_OF(geluerfg);
#undef U_

/* ---------------------------------------------------------------------------------------
 * Casts, through one of two wide forms: floats load exactly into double, integers and bool
 * into int64; then one store per destination type (the scalar conversions, shared with CUDA,
 * are in kernels/common/cast.h). Chunked so each loop is a plain one.
 */

static void cast_load_float(double *d, const void *src, int64_t n, ldt_dtype t) {
    switch (t) {
    case LDT_F32: LDT__VLOOP(n, d[i] = ((const float *)src)[i];); break;
    case LDT_F64: memcpy(d, src, (size_t)n * sizeof *d); break;
    case LDT_F16:
        for (int64_t i = 0; i < n; i++) d[i] = ldt__f16_to_f32(((const uint16_t *)src)[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++) d[i] = ldt__bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    }
}

static void cast_load_int(int64_t *d, const void *src, int64_t n, ldt_dtype t) {
    switch (t) {
    case LDT_I32: LDT__VLOOP(n, d[i] = ((const int32_t *)src)[i];); break;
    case LDT_I64: memcpy(d, src, (size_t)n * sizeof *d); break;
    case LDT_U8: LDT__VLOOP(n, d[i] = ((const uint8_t *)src)[i];); break;
    default: LDT__VLOOP(n, d[i] = ((const uint8_t *)src)[i] != 0;); break;
    }
}

static void cast_store_float(void *dst, const double *d, int64_t n, ldt_dtype t) {
    switch (t) {
    case LDT_F32: LDT__VLOOP(n, ((float *)dst)[i] = (float)d[i];); break;
    case LDT_F64: memcpy(dst, d, (size_t)n * sizeof *d); break;
    case LDT_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(d[i]));
        break;
    case LDT_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(d[i]));
        break;
    case LDT_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = ldt__cast_sat_i32(d[i]);
        break;
    case LDT_I64:
        for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = ldt__cast_sat_i64(d[i]);
        break;
    case LDT_U8:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = ldt__cast_sat_u8(d[i]);
        break;
    default: LDT__VLOOP(n, ((uint8_t *)dst)[i] = d[i] != 0.0;); break; /* NaN -> true */
    }
}

static void cast_store_int(void *dst, const int64_t *v, int64_t n, ldt_dtype t) {
    switch (t) {
    case LDT_F32: LDT__VLOOP(n, ((float *)dst)[i] = (float)v[i];); break;
    case LDT_F64: LDT__VLOOP(n, ((double *)dst)[i] = (double)v[i];); break;
    case LDT_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__cast_i64_to_f32_odd(v[i]));
        break;
    case LDT_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__cast_i64_to_f32_odd(v[i]));
        break;
    case LDT_I32:
        for (int64_t i = 0; i < n; i++) ((int32_t *)dst)[i] = ldt__cast_wrap_i32(v[i]);
        break;
    case LDT_I64: memcpy(dst, v, (size_t)n * sizeof *v); break;
    case LDT_U8: LDT__VLOOP(n, ((uint8_t *)dst)[i] = (uint8_t)v[i];); break; /* mod 256 */
    default: LDT__VLOOP(n, ((uint8_t *)dst)[i] = v[i] != 0;); break;
    }
}

static void cast_run(void *dst, ldt_dtype to, const void *src, ldt_dtype from, int64_t n) {
    double fbuf[LDT__CHUNK];
    int64_t ibuf[LDT__CHUNK];
    size_t ies = ldt_dtype_size(from), oes = ldt_dtype_size(to);
    if (from == to && to != LDT_BOOL) { /* bool -> bool still maps every non-zero byte to 1 */
        if (dst != src) ldt__move(dst, src, (size_t)n * ies);
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += LDT__CHUNK) {
        int64_t m = n - i0 < LDT__CHUNK ? n - i0 : LDT__CHUNK;
        const char *s = (const char *)src + (size_t)i0 * ies;
        char *d = (char *)dst + (size_t)i0 * oes;
        if (ldt_dtype_is_float(from)) {
            cast_load_float(fbuf, s, m, from);
            cast_store_float(d, fbuf, m, to);
        } else {
            cast_load_int(ibuf, s, m, from);
            cast_store_int(d, ibuf, m, to);
        }
    }
}

/* ---------------------------------------------------------------------------------------
 * Broadcasting: the plan (kernels/common/elementwise_plan.h) walked in rows. In the last
 * (row) dim every input's stride is 0 or 1, which is what the rows expect.
 */
/* A row callback: inputs at in[k] with row strides st[k] (0 or 1), n outputs at o. */
typedef void (*row_cb)(const void *ctx, void *o, const void *const *in, const int64_t *st,
                       int64_t n);

/* Calls cb once per row of the plan, walking the outer dims with an odometer. */
static void bc_run(const ldt__bc_plan *p, int nin, char *o, size_t oes, const ldt__operand *in,
                   const size_t *ies, row_cb cb, const void *ctx) {
    const void *ptr[3];
    int64_t rs[3] = {0, 0, 0}, off[3] = {0, 0, 0}, idx[LDT_MAX_DIMS] = {0};
    int64_t rows = 1, len = 1;
    int last = p->nd - 1;
    if (p->nd > 0) {
        len = p->dims[last];
        for (int k = 0; k < nin; k++) rs[k] = p->st[k][last];
        for (int d = 0; d < last; d++) rows *= p->dims[d];
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int k = 0; k < nin; k++)
            ptr[k] = (const char *)in[k].data + off[k] * (int64_t)ies[k];
        cb(ctx, o + r * len * (int64_t)oes, ptr, rs, len);
        for (int d = last - 1; d >= 0; d--) {
            for (int k = 0; k < nin; k++) off[k] += p->st[k][d];
            if (++idx[d] < p->dims[d]) break;
            for (int k = 0; k < nin; k++) off[k] -= p->st[k][d] * p->dims[d];
            idx[d] = 0;
        }
    }
}

typedef struct ew_ctx {
    bin_fn bin;
    where_fn where;
    ldt_dtype half;   /* F16 / BF16 when inputs go through f32 chunks */
    int out_half;     /* the f32 row's output is rounded back to `half` (else it is bool) */
} ew_ctx;

static void bin_cb(const void *ctx, void *o, const void *const *in, const int64_t *st,
                   int64_t n) {
    ((const ew_ctx *)ctx)->bin(o, in[0], st[0], in[1], st[1], n);
}

static void bin_half_cb(const void *ctx_, void *o, const void *const *in, const int64_t *st,
                        int64_t n) {
    const ew_ctx *ctx = (const ew_ctx *)ctx_;
    float a[LDT__CHUNK], b[LDT__CHUNK], r[LDT__CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += LDT__CHUNK) {
        int64_t m = n - i0 < LDT__CHUNK ? n - i0 : LDT__CHUNK;
        half_load(a, (const uint16_t *)in[0] + i0 * st[0], st[0] ? m : 1, ctx->half);
        half_load(b, (const uint16_t *)in[1] + i0 * st[1], st[1] ? m : 1, ctx->half);
        if (ctx->out_half) {
            ctx->bin(r, a, st[0], b, st[1], m);
            half_store((uint16_t *)o + i0, r, m, ctx->half);
        } else {
            ctx->bin((uint8_t *)o + i0, a, st[0], b, st[1], m);
        }
    }
}

static void where_cb(const void *ctx, void *o, const void *const *in, const int64_t *st,
                     int64_t n) {
    ((const ew_ctx *)ctx)->where(o, (const uint8_t *)in[0], st[0], in[1], st[1], in[2], st[2], n);
}

/* ---------------------------------------------------------------------------------------
 * Integer divisors: the index of the first zero of n elements, or -1. One OR-reduction over
 * the whole row (vectorised), then a search for the index only when there is a zero.
 */
typedef int64_t (*zscan_fn)(const void *b, int64_t n);
#define ZSCAN(NAME, T)                                                                     \
    static int64_t NAME(const void *b_, int64_t n) {                                       \
        const T *b = (const T *)b_;                                                        \
        unsigned z = 0;                                                                    \
        for (int64_t i = 0; i < n; i++) z |= b[i] == 0;                                    \
        if (!z) return -1;                                                                 \
        for (int64_t i = 0; i < n; i++)                                                    \
            if (b[i] == 0) return i;                                                       \
        return -1;                                                                         \
    }
ZSCAN(zscan_i32, int32_t)
ZSCAN(zscan_i64, int64_t)
ZSCAN(zscan_u8, uint8_t)

static zscan_fn zscan_of(ldt_dtype t) {
    return t == LDT_I32 ? zscan_i32 : t == LDT_I64 ? zscan_i64 : zscan_u8;
}

/* "div: integer division by zero (b[3] is 0, dtype i32)", formatted only on failure. */
static ldt_status zero_check(zscan_fn scan, const void *b, int64_t n, const char *op,
                             const char *what, ldt_dtype t) {
    int64_t i = n > 0 ? scan(b, n) : -1;
    if (i >= 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: integer division by zero (%s[%lld] is 0, dtype %s)",
                 op, what, (long long)i, ldt_dtype_name(t));
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: checks (arity, dtypes, shapes) with messages naming the op, then the rows.
 */
static const char *op_name(int op) { return ldt__builtin_op_name(op); }

/* Bit d set when a row table has an entry for dtype d. */
#define SUPPORTED_MASK(row, mask)                                                          \
    do {                                                                                   \
        (mask) = 0;                                                                        \
        for (int d_ = 0; d_ < LDT_DTYPE_COUNT; d_++)                                       \
            if ((row)[d_]) (mask) |= 1u << d_;                                             \
    } while (0)

ldt_status ldt__k_binary(const ldt__kcall *c) {
    const char *op = op_name(c->op);
    static const char *const names2[] = {"a", "b"}, *const names3[] = {"cond", "a", "b"};
    int is_where = c->op == LDT_OP_WHERE, is_cmp = c->op >= LDT_OP_EQ && c->op <= LDT_OP_GE;
    int nin = is_where ? 3 : 2;
    ew_ctx ctx = {NULL, NULL, LDT_F32, 0};
    row_cb cb = bin_cb;
    ldt__bc_plan plan = {0};
    int64_t n;
    LDT_CHECK(ldt__ew_check_binary(c, op));
    const ldt__operand *a = &c->in[nin - 2], *b = &c->in[nin - 1];
    if (is_where) {
        switch (ldt_dtype_size(a->dtype)) {
        case 1: ctx.where = where_1; break;
        case 2: ctx.where = where_2; break;
        case 4: ctx.where = where_4; break;
        default: ctx.where = where_8; break;
        }
        cb = where_cb;
    } else {
        const bin_fn *row = k_binary[c->op - LDT_OP_ADD];
        if (!row[a->dtype]) {
            unsigned mask;
            SUPPORTED_MASK(row, mask);
            return ldt__ew_fail_dtype(op, a->dtype, mask, "");
        }
        ctx.bin = row[a->dtype];
        if (is_half(a->dtype)) {
            ctx.half = a->dtype;
            ctx.out_half = !is_cmp;
            cb = bin_half_cb;
        }
    }
    LDT_CHECK(ldt__bc_make(op, &c->out.shape, nin, c->in, is_where ? names3 : names2, &plan));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (n == 0) return LDT_OK;
    if (c->op == LDT_OP_DIV && !ldt_dtype_is_float(b->dtype)) {
        /* Checked before writing anything: a failed division leaves the output untouched. */
        int64_t nb;
        LDT_CHECK(ldt_shape_numel(&b->shape, &nb));
        LDT_CHECK(zero_check(zscan_of(b->dtype), b->data, nb, "div", "b", b->dtype));
    }
    size_t ies[3];
    for (int k = 0; k < nin; k++) ies[k] = ldt_dtype_size(c->in[k].dtype);
    bc_run(&plan, nin, (char *)c->out.data, ldt_dtype_size(c->out.dtype), c->in, ies, cb, &ctx);
    return LDT_OK;
}

ldt_status ldt__k_scalar(const ldt__kcall *c) {
    const char *op = op_name(c->op);
    int64_t n;
    double s = 0; /* set by ldt__ew_check_scalar */
    LDT_CHECK(ldt__ew_check_scalar(c, op, &s));
    const ldt__operand *x = &c->in[0];
    const scalar_fn *row = k_scalar[c->op - LDT_OP_ADD_SCALAR];
    if (!row[x->dtype]) {
        unsigned mask;
        SUPPORTED_MASK(row, mask);
        return ldt__ew_fail_dtype(op, x->dtype, mask, "");
    }
    LDT_CHECK(ldt__ew_check_scalar_value(c, op, s));
    LDT_CHECK(ldt_shape_numel(&x->shape, &n));
    if (!ldt_dtype_is_float(x->dtype) && c->op == LDT_OP_RDIV_SCALAR)
        /* before writing: a failed op leaves out untouched */
        LDT_CHECK(zero_check(zscan_of(x->dtype), x->data, n, "rdiv_scalar", "x", x->dtype));
    if (!is_half(x->dtype)) {
        row[x->dtype](c->out.data, x->data, n, s);
        return LDT_OK;
    }
    float t[LDT__CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += LDT__CHUNK) {
        int64_t m = n - i0 < LDT__CHUNK ? n - i0 : LDT__CHUNK;
        half_load(t, (const uint16_t *)x->data + i0, m, x->dtype);
        row[x->dtype](t, t, m, s);
        half_store((uint16_t *)c->out.data + i0, t, m, x->dtype);
    }
    return LDT_OK;
}

ldt_status ldt__k_unary(const ldt__kcall *c) {
    const char *op = op_name(c->op);
    int64_t n;
    LDT_CHECK(ldt__ew_check_unary(c, op, &n));
    const ldt__operand *x = &c->in[0];
    if (c->op == LDT_OP_CAST) {
        cast_run(c->out.data, c->out.dtype, x->data, x->dtype, n);
        return LDT_OK;
    }
    int form = 0; /* gelu: 0 erf, 1 tanh, 2 the erf form's derivative */
    LDT_CHECK(ldt__ew_check_unary_math(c, op, &form));
    const unary_fn *row = form == 1   ? k_gelu_tanh
                          : form == 2 ? k_gelu_erf_grad
                                      : k_unary[c->op - LDT_OP_NEG];
    if (!row[x->dtype]) {
        unsigned mask;
        SUPPORTED_MASK(row, mask);
        return ldt__ew_fail_dtype(op, x->dtype, mask, "");
    }
    if (!is_half(x->dtype)) {
        row[x->dtype](c->out.data, x->data, n);
        return LDT_OK;
    }
    float t[LDT__CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += LDT__CHUNK) {
        int64_t m = n - i0 < LDT__CHUNK ? n - i0 : LDT__CHUNK;
        half_load(t, (const uint16_t *)x->data + i0, m, x->dtype);
        row[x->dtype](t, t, m);
        half_store((uint16_t *)c->out.data + i0, t, m, x->dtype);
    }
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Bound calls (ldt__cpu_kernel_bind): the checks above run once, at bind; the plan holds the
 * dtype row, the broadcast walk and, for integer division, the divisor's handling.
 */
static ldt_status k_nothing(const ldt__kcall *c) {
    (void)c;
    return LDT_OK;
}

/* binary and where: a same-shape call goes straight to its row; others walk the plan. */
typedef struct ew_bplan {
    ew_ctx ctx;
    row_cb cb;
    ldt__bc_plan bc;
    int nin;
    size_t oes, ies[3];
    int64_t n;      /* output elements */
    zscan_fn zscan; /* integer div: the divisor's zero scan over nb elements */
    int64_t nb;
    ldt_dtype bt;
} ew_bplan;

static ldt_status bin_same_bound(const ldt__kcall *c) {
    const ew_bplan *p = (const ew_bplan *)c->plan;
    p->ctx.bin(c->out.data, c->in[0].data, 1, c->in[1].data, 1, p->n);
    return LDT_OK;
}

static ldt_status bin_bound(const ldt__kcall *c) {
    const ew_bplan *p = (const ew_bplan *)c->plan;
    if (p->zscan) LDT_CHECK(zero_check(p->zscan, c->in[1].data, p->nb, "div", "b", p->bt));
    bc_run(&p->bc, p->nin, (char *)c->out.data, p->oes, c->in, p->ies, p->cb, &p->ctx);
    return LDT_OK;
}

/* Same-shape entries with the row called directly (inlined): one indirect call per node. */
#define SB(R)                                                                              \
    static ldt_status sb_##R(const ldt__kcall *c) {                                        \
        R(c->out.data, c->in[0].data, 1, c->in[1].data, 1, ((const ew_bplan *)c->plan)->n); \
        return LDT_OK;                                                                     \
    }
#define SB_ARITH(OP) SB(OP##_f32) SB(OP##_f64) SB(OP##_i32) SB(OP##_i64) SB(OP##_u8)
#define SB_CMP(OP) SB_ARITH(OP) SB(OP##_bool)
SB_ARITH(add)
SB_ARITH(sub)
SB_ARITH(mul)
SB(div_f32)
SB(div_f64)
SB_CMP(eq)
SB_CMP(ne)
SB_CMP(lt)
SB_CMP(le)
SB_CMP(gt)
SB_CMP(ge)
#define SB_ROWS_OF(OP)                                                                     \
    {[LDT_F32] = sb_##OP##_f32, [LDT_F64] = sb_##OP##_f64, [LDT_I32] = sb_##OP##_i32,       \
     [LDT_I64] = sb_##OP##_i64, [LDT_U8] = sb_##OP##_u8}
#define SB_CMP_ROWS_OF(OP)                                                                 \
    {[LDT_F32] = sb_##OP##_f32, [LDT_F64] = sb_##OP##_f64, [LDT_I32] = sb_##OP##_i32,       \
     [LDT_I64] = sb_##OP##_i64, [LDT_U8] = sb_##OP##_u8, [LDT_BOOL] = sb_##OP##_bool}
/* [op - ADD][dtype]; NULL where the general entry serves (halves, integer division). */
static const ldt__kernel_fn k_same_bound[LDT_OP_WHERE - LDT_OP_ADD][LDT_DTYPE_COUNT] = {
    SB_ROWS_OF(add), SB_ROWS_OF(sub), SB_ROWS_OF(mul),
    {[LDT_F32] = sb_div_f32, [LDT_F64] = sb_div_f64},
    SB_CMP_ROWS_OF(eq), SB_CMP_ROWS_OF(ne), SB_CMP_ROWS_OF(lt), SB_CMP_ROWS_OF(le),
    SB_CMP_ROWS_OF(gt), SB_CMP_ROWS_OF(ge),
};

ldt_status ldt__kb_binary(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    const char *op = op_name(c->op);
    static const char *const names2[] = {"a", "b"}, *const names3[] = {"cond", "a", "b"};
    ew_bplan q;
    int is_where = c->op == LDT_OP_WHERE, is_cmp = c->op >= LDT_OP_EQ && c->op <= LDT_OP_GE;
    memset(&q, 0, sizeof q);
    *plan = NULL;
    LDT_CHECK(ldt__ew_check_binary(c, op));
    q.nin = is_where ? 3 : 2;
    const ldt__operand *a = &c->in[q.nin - 2], *b = &c->in[q.nin - 1];
    q.cb = bin_cb;
    q.ctx.half = LDT_F32;
    if (is_where) {
        switch (ldt_dtype_size(a->dtype)) {
        case 1: q.ctx.where = where_1; break;
        case 2: q.ctx.where = where_2; break;
        case 4: q.ctx.where = where_4; break;
        default: q.ctx.where = where_8; break;
        }
        q.cb = where_cb;
    } else {
        const bin_fn *row = k_binary[c->op - LDT_OP_ADD];
        if (!row[a->dtype]) {
            unsigned mask;
            SUPPORTED_MASK(row, mask);
            return ldt__ew_fail_dtype(op, a->dtype, mask, "");
        }
        q.ctx.bin = row[a->dtype];
        if (is_half(a->dtype)) {
            q.ctx.half = a->dtype;
            q.ctx.out_half = !is_cmp;
            q.cb = bin_half_cb;
        }
    }
    LDT_CHECK(ldt__bc_make(op, &c->out.shape, q.nin, c->in, is_where ? names3 : names2, &q.bc));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &q.n));
    if (q.n == 0) {
        *fn = k_nothing;
        return LDT_OK;
    }
    if (c->op == LDT_OP_DIV && !ldt_dtype_is_float(b->dtype)) {
        LDT_CHECK(ldt_shape_numel(&b->shape, &q.nb));
        q.zscan = zscan_of(b->dtype);
        q.bt = b->dtype;
    }
    q.oes = ldt_dtype_size(c->out.dtype);
    for (int k = 0; k < q.nin; k++) q.ies[k] = ldt_dtype_size(c->in[k].dtype);
    int same = q.bc.nd <= 1 && !is_where && !q.zscan && q.cb == bin_cb;
    for (int k = 0; k < q.nin && same && q.bc.nd == 1; k++) same = q.bc.st[k][0] == 1;
    LDT_CHECK(ldt__kplan_alloc(op, sizeof q, plan));
    memcpy(*plan, &q, sizeof q);
    *fn = !same ? bin_bound
          : k_same_bound[c->op - LDT_OP_ADD][a->dtype] ? k_same_bound[c->op - LDT_OP_ADD][a->dtype]
                                                       : bin_same_bound;
    return LDT_OK;
}

/* scalar ops: the row and the scalar; integer division by the scalar is analysed here (1:
 * a copy, -1: a wrapping negation, a power of two: shifts); rdiv scans x per call. */
typedef void (*idiv_fn)(void *o, const void *x, int64_t n, int64_t s, int k);
typedef struct sc_bplan {
    scalar_fn row;
    idiv_fn idiv; /* integer div_scalar by a power of two (2^k, k in 1..62, sign of s) */
    unary_fn un;  /* integer div_scalar by 1 or -1 */
    double s;
    int64_t si;
    int k;
    int64_t n;
    ldt_dtype t;
    int half;
    zscan_fn zscan; /* integer rdiv_scalar */
} sc_bplan;

static void copy_1(void *o, const void *x, int64_t n) { ldt__move(o, x, (size_t)n); }
static void copy_4(void *o, const void *x, int64_t n) { ldt__move(o, x, (size_t)n * 4); }
static void copy_8(void *o, const void *x, int64_t n) { ldt__move(o, x, (size_t)n * 8); }

/* Truncating division by +-2^k: add 2^k - 1 to negative x, shift; negate (wrapping) for a
 * negative divisor. Computed in int64, then wrapped to the type as ldt__idiv64's users do. */
#define POW2_DIV_ROW(NAME, T, WRAP)                                                        \
    static void NAME(void *o_, const void *x_, int64_t n, int64_t s, int k) {              \
        T *o = (T *)o_;                                                                    \
        const T *xp = (const T *)x_;                                                       \
        const int64_t bias = ((int64_t)1 << k) - 1;                                        \
        if (s > 0)                                                                         \
            LDT__VLOOP(n, int64_t x = xp[i]; o[i] = (T)WRAP((x + ((x >> 63) & bias)) >> k););  \
        else                                                                               \
            LDT__VLOOP(n, int64_t x = xp[i];                                               \
                       o[i] = (T)WRAP((int64_t)(0 - (uint64_t)((x + ((x >> 63) & bias)) >> k)));); \
    }
POW2_DIV_ROW(pow2div_i32, int32_t, ldt__cast_wrap_i32)
POW2_DIV_ROW(pow2div_i64, int64_t, WRAP_SAME)
POW2_DIV_ROW(pow2div_u8, uint8_t, (uint8_t))

static ldt_status scalar_row_bound(const ldt__kcall *c) {
    const sc_bplan *p = (const sc_bplan *)c->plan;
    p->row(c->out.data, c->in[0].data, p->n, p->s);
    return LDT_OK;
}

static ldt_status scalar_rdiv_int_bound(const ldt__kcall *c) {
    const sc_bplan *p = (const sc_bplan *)c->plan;
    LDT_CHECK(zero_check(p->zscan, c->in[0].data, p->n, "rdiv_scalar", "x", p->t));
    p->row(c->out.data, c->in[0].data, p->n, p->s);
    return LDT_OK;
}

static ldt_status scalar_un_bound(const ldt__kcall *c) {
    const sc_bplan *p = (const sc_bplan *)c->plan;
    p->un(c->out.data, c->in[0].data, p->n);
    return LDT_OK;
}

static ldt_status scalar_pow2_bound(const ldt__kcall *c) {
    const sc_bplan *p = (const sc_bplan *)c->plan;
    p->idiv(c->out.data, c->in[0].data, p->n, p->si, p->k);
    return LDT_OK;
}

static ldt_status scalar_half_bound(const ldt__kcall *c) {
    const sc_bplan *p = (const sc_bplan *)c->plan;
    float t[LDT__CHUNK];
    for (int64_t i0 = 0; i0 < p->n; i0 += LDT__CHUNK) {
        int64_t m = p->n - i0 < LDT__CHUNK ? p->n - i0 : LDT__CHUNK;
        half_load(t, (const uint16_t *)c->in[0].data + i0, m, p->t);
        p->row(t, t, m, p->s);
        half_store((uint16_t *)c->out.data + i0, t, m, p->t);
    }
    return LDT_OK;
}

ldt_status ldt__kb_scalar(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    const char *op = op_name(c->op);
    sc_bplan q;
    memset(&q, 0, sizeof q);
    *plan = NULL;
    LDT_CHECK(ldt__ew_check_scalar(c, op, &q.s));
    const ldt__operand *x = &c->in[0];
    const scalar_fn *row = k_scalar[c->op - LDT_OP_ADD_SCALAR];
    if (!row[x->dtype]) {
        unsigned mask;
        SUPPORTED_MASK(row, mask);
        return ldt__ew_fail_dtype(op, x->dtype, mask, "");
    }
    LDT_CHECK(ldt__ew_check_scalar_value(c, op, q.s));
    LDT_CHECK(ldt_shape_numel(&x->shape, &q.n));
    if (q.n == 0) {
        *fn = k_nothing;
        return LDT_OK;
    }
    q.row = row[x->dtype];
    q.t = x->dtype;
    q.half = is_half(x->dtype);
    if (!ldt_dtype_is_float(x->dtype) && c->op == LDT_OP_RDIV_SCALAR) q.zscan = zscan_of(x->dtype);
    if (!ldt_dtype_is_float(x->dtype) && c->op == LDT_OP_DIV_SCALAR) {
        int64_t s = (int64_t)q.s;
        uint64_t m = s < 0 ? 0 - (uint64_t)s : (uint64_t)s;
        size_t es = ldt_dtype_size(x->dtype);
        q.si = s;
        if (s == 1)
            q.un = es == 1 ? copy_1 : es == 4 ? copy_4 : copy_8;
        else if (s == -1)
            q.un = x->dtype == LDT_I32 ? neg_i32 : x->dtype == LDT_I64 ? neg_i64 : neg_u8;
        else if ((m & (m - 1)) == 0 && m < ((uint64_t)1 << 63)) {
            while (((uint64_t)1 << q.k) != m) q.k++;
            q.idiv = x->dtype == LDT_I32 ? pow2div_i32 : x->dtype == LDT_I64 ? pow2div_i64 : pow2div_u8;
        }
    }
    LDT_CHECK(ldt__kplan_alloc(op, sizeof q, plan));
    memcpy(*plan, &q, sizeof q);
    *fn = q.zscan  ? scalar_rdiv_int_bound
          : q.un   ? scalar_un_bound
          : q.idiv ? scalar_pow2_bound
          : q.half ? scalar_half_bound
                   : scalar_row_bound;
    return LDT_OK;
}

/* unary ops and cast: the row (or the cast's dtypes) and the element count. */
typedef struct un_bplan {
    unary_fn row;
    int64_t n;
    ldt_dtype t, to;
} un_bplan;

static ldt_status unary_bound(const ldt__kcall *c) {
    const un_bplan *p = (const un_bplan *)c->plan;
    p->row(c->out.data, c->in[0].data, p->n);
    return LDT_OK;
}

static ldt_status unary_half_bound(const ldt__kcall *c) {
    const un_bplan *p = (const un_bplan *)c->plan;
    float t[LDT__CHUNK];
    for (int64_t i0 = 0; i0 < p->n; i0 += LDT__CHUNK) {
        int64_t m = p->n - i0 < LDT__CHUNK ? p->n - i0 : LDT__CHUNK;
        half_load(t, (const uint16_t *)c->in[0].data + i0, m, p->t);
        p->row(t, t, m);
        half_store((uint16_t *)c->out.data + i0, t, m, p->t);
    }
    return LDT_OK;
}

static ldt_status cast_bound(const ldt__kcall *c) {
    const un_bplan *p = (const un_bplan *)c->plan;
    cast_run(c->out.data, p->to, c->in[0].data, p->t, p->n);
    return LDT_OK;
}

ldt_status ldt__kb_unary(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    const char *op = op_name(c->op);
    un_bplan q;
    memset(&q, 0, sizeof q);
    *plan = NULL;
    LDT_CHECK(ldt__ew_check_unary(c, op, &q.n));
    const ldt__operand *x = &c->in[0];
    q.t = x->dtype;
    q.to = c->out.dtype;
    if (c->op == LDT_OP_CAST) {
        *fn = cast_bound;
    } else {
        int form = 0;
        LDT_CHECK(ldt__ew_check_unary_math(c, op, &form));
        const unary_fn *row = form == 1   ? k_gelu_tanh
                              : form == 2 ? k_gelu_erf_grad
                                          : k_unary[c->op - LDT_OP_NEG];
        if (!row[x->dtype]) {
            unsigned mask;
            SUPPORTED_MASK(row, mask);
            return ldt__ew_fail_dtype(op, x->dtype, mask, "");
        }
        q.row = row[x->dtype];
        *fn = is_half(x->dtype) ? unary_half_bound : unary_bound;
    }
    if (q.n == 0) {
        *fn = k_nothing;
        return LDT_OK;
    }
    LDT_CHECK(ldt__kplan_alloc(op, sizeof q, plan));
    memcpy(*plan, &q, sizeof q);
    return LDT_OK;
}
