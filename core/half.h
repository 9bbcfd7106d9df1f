/* f16 and bf16 <-> f32 conversions as inline functions, one definition for host and CUDA
 * code. Round to nearest even; NaNs stay NaN (quieted), overflow goes to infinity. */
#ifndef LDT_CORE_HALF_H
#define LDT_CORE_HALF_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define LDT_HD __host__ __device__ __forceinline__
#else
#define LDT_HD static inline
#endif

LDT_HD uint32_t ldt__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

LDT_HD float ldt__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

LDT_HD uint16_t ldt__f32_to_f16(float f) {
    uint32_t x = ldt__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf, nan: keep some payload, force quiet */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0u));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (absx < 0x38800000u) {                                  /* f16 subnormal or zero */
        if (absx <= 0x33000000u) return (uint16_t)sign;         /* <= 2^-25: ties to 0 */
        uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* value / 2^-24 = m >> shift */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = (((absx >> 23) - 112u) << 10) | ((absx & 0x7fffffu) >> 13);
    uint32_t rem = absx & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry into exponent is right */
    return (uint16_t)(sign | h);
}

LDT_HD float ldt__f16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu, m = (uint32_t)h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24, exact */
        return sign ? -v : v;
    }
    if (e == 31) return ldt__bits_f32(sign | 0x7f800000u | (m << 13));
    return ldt__bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

LDT_HD uint16_t ldt__f32_to_bf16(float f) {
    uint32_t x = ldt__f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

LDT_HD float ldt__bf16_to_f32(uint16_t h) { return ldt__bits_f32((uint32_t)h << 16); }

#endif
