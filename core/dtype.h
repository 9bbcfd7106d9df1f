/* Internal inline dtype queries for hot paths (recording runs them for every op); the public
 * ldt_dtype_size / ldt_dtype_is_float give the same answers from the same table. */
#ifndef LDT_CORE_DTYPE_H
#define LDT_CORE_DTYPE_H

#include "ldt/core.h"

static inline size_t ldt__dtype_size(ldt_dtype t) {
    static const unsigned char k_size[] = {
#define LDT__DTYPE_SIZE(sfx, name, size, fl) size,
        LDT_DTYPE_MAP(LDT__DTYPE_SIZE)
#undef LDT__DTYPE_SIZE
    };
    return (unsigned)t < (unsigned)LDT_DTYPE_COUNT ? k_size[t] : 0;
}

static inline int ldt__dtype_is_float(ldt_dtype t) {
    static const unsigned char k_float[] = {
#define LDT__DTYPE_FLOAT(sfx, name, size, fl) fl,
        LDT_DTYPE_MAP(LDT__DTYPE_FLOAT)
#undef LDT__DTYPE_FLOAT
    };
    return (unsigned)t < (unsigned)LDT_DTYPE_COUNT && k_float[t];
}

#endif
