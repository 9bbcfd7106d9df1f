/* One double written into a buffer of any dtype, rounded once (halves through f32, as every
 * kernel rounds them; one-byte dtypes store v != 0): what FILL and ARANGE store on the CPU
 * (exec/fill.h) and on CUDA (kernels/cuda/fill.cu). */
#ifndef LDT_KERNELS_COMMON_STORE_H
#define LDT_KERNELS_COMMON_STORE_H

#include <stdint.h>

#include "core/half.h" /* LDT_HD */
#include "ldt/core.h"

LDT_HD void ldt__store_f64(void *buf, ldt_dtype dt, int64_t i, double v) {
    switch (dt) {
    case LDT_F32: ((float *)buf)[i] = (float)v; break;
    case LDT_F64: ((double *)buf)[i] = v; break;
    case LDT_F16: ((uint16_t *)buf)[i] = ldt__f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)buf)[i] = ldt__f32_to_bf16((float)v); break;
    case LDT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: ((uint8_t *)buf)[i] = (uint8_t)(v != 0); break;
    }
}

#endif
