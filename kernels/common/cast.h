/* Scalar conversions of the cast op and integer arithmetic helpers, as inline functions for
 * CPU and CUDA (kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu), so both round,
 * saturate and wrap the same way.
 *
 *   f16 of a double   ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(d))   (one rounding)
 *   i32 of a double   ldt__cast_sat_i32(d)   (truncate, saturate, NaN -> 0)
 *   i32 of an int64   ldt__cast_wrap_i32(v)  (modulo 2^32)
 */
#ifndef LDT_KERNELS_COMMON_CAST_H
#define LDT_KERNELS_COMMON_CAST_H

#include <math.h>
#include <stdint.h>

#include "core/half.h" /* LDT_HD, ldt__f32_bits */

/* Round to f32 with round-to-odd: when inexact, pick the neighbour with an odd last bit.
 * Rounding that result to nearest even at <= 22 bits (f16: 11, bf16: 8) gives exactly the
 * once-rounded value, which f64 -> f32 -> f16 with two nearest-even steps does not. */
LDT_HD float ldt__cast_f64_to_f32_odd(double d) {
    float f = (float)d; /* +-inf beyond the f32 range (IEEE, Annex F) */
    if ((double)f == d || d != d) return f;
    uint32_t u = ldt__f32_bits(f);
    if (u & 1u) return f;
    return ldt__bits_f32(fabs((double)f) > fabs(d) ? u - 1u : u + 1u);
}

/* int64 to f32 with round-to-odd (for the same reason): 24 significant bits, a sticky bit. */
LDT_HD float ldt__cast_i64_to_f32_odd(int64_t v) {
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    uint64_t q = m;
    int sh = 0;
    while (q >= (1ull << 24)) {
        q >>= 1;
        sh++;
    }
    if (sh && (m & ((1ull << sh) - 1))) q |= 1; /* sticky: inexact -> odd */
    float f = ldexpf((float)q, sh);              /* q < 2^24: both steps exact */
    return v < 0 ? -f : f;
}

/* Float -> integer: truncate toward zero, saturate at the type's range, NaN -> 0; written
 * with comparisons first so the C conversion only ever sees in-range values (no UB). */
LDT_HD int32_t ldt__cast_sat_i32(double d) {
    if (d != d) return 0;
    if (d >= 2147483647.0) return INT32_MAX;
    if (d <= -2147483648.0) return INT32_MIN;
    return (int32_t)d;
}

LDT_HD int64_t ldt__cast_sat_i64(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775808.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

LDT_HD uint8_t ldt__cast_sat_u8(double d) {
    if (d != d || d <= 0.0) return 0;
    if (d >= 255.0) return 255;
    return (uint8_t)d;
}

/* Integer -> i32 wraps modulo 2^32 (as torch's .to(int32) does), without relying on the
 * implementation-defined conversion of out-of-range values. */
LDT_HD int32_t ldt__cast_wrap_i32(int64_t v) {
    uint32_t u = (uint32_t)(uint64_t)v;
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) + INT32_MIN;
}

/* Truncating int64 division where / -1 is a wrapping negation (no INT64_MIN / -1 trap).
 * b != 0: callers check zero divisors first. */
LDT_HD int64_t ldt__idiv64(int64_t a, int64_t b) {
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}

#endif
