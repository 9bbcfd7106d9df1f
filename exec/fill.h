/* Internal: one value written into a buffer of any dtype (rounded once), and fills. */
#ifndef LDT_EXEC_FILL_H
#define LDT_EXEC_FILL_H

#include "core/half.h"
#include "ldt/core.h"

static inline void ldt__store_f64(void *buf, ldt_dtype dt, int64_t i, double v) {
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

static inline void ldt__fill_f64(void *buf, ldt_dtype dt, int64_t n, double v) {
    for (int64_t i = 0; i < n; i++) ldt__store_f64(buf, dt, i, v);
}

#endif
