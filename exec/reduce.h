/* Elementwise reduction of several buffers in a fixed order: the one definition of how lazydt
 * reduces (collectives, Partial placements), so every path gives the same bits. */
#ifndef LDT_EXEC_REDUCE_H
#define LDT_EXEC_REDUCE_H

#include "ldt/core.h"

/* 1 when op is defined for dt (bool has no avg). */
int ldt__reduce_supported(ldt_dtype dt, ldt_reduce_op op);

/* dst[i] = op(srcs[0][off+i], srcs[1][off+i], ..., srcs[k-1][off+i]) for i in [0, n),
 * combined left to right: ((s0 + s1) + s2) + ... f32 and halves accumulate in f32 (halves
 * round once), f64 in f64; integer sums wrap (unsigned arithmetic), i32 and u8 avg divide the
 * exact sum; bool sum/max are OR, min is AND (any non-zero byte is true); max/min keep the
 * first NaN in source order. avg divides the sum by `divisor` (k for a plain average; the
 * avg dims' extent when Partial sum and avg mix). dst may alias a source range: each block is
 * read in full before it is written. Unsupported (dtype, op) pairs do nothing. */
void ldt__reduce_at(void *dst, const void *const *srcs, int k, int64_t off, int64_t n,
                    ldt_dtype dt, ldt_reduce_op op, int64_t divisor);

/* ldt__reduce_at with off 0 and divisor k. */
void ldt__reduce_n(void *dst, const void *const *srcs, int k, int64_t n, ldt_dtype dt,
                   ldt_reduce_op op);

#endif
