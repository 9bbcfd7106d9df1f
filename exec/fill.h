/* Internal: one value written into a buffer of any dtype (rounded once), and fills. */
#ifndef LDT_EXEC_FILL_H
#define LDT_EXEC_FILL_H

#include "kernels/common/store.h"
#include "ldt/core.h"

static inline void ldt__fill_f64(void *buf, ldt_dtype dt, int64_t n, double v) {
    for (int64_t i = 0; i < n; i++) ldt__store_f64(buf, dt, i, v);
}

#endif
