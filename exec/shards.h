/* Internal: copying a rank's region between a full row-major tensor and its local buffer. */
#ifndef LDT_EXEC_SHARDS_H
#define LDT_EXEC_SHARDS_H

#include "ldt/core.h"

/* Copies the elements of region r between `full` (global row-major with `shape`) and
 * `local` (r's local shape, row-major). to_local != 0: full -> local; else local -> full. */
void ldt__region_copy(const ldt_region *r, const ldt_shape *shape, size_t elem, void *full,
                      void *local, int to_local);

/* The Partial mesh dims of spec: their count, the sources a reduction combines (the product
 * of their sizes), the non-avg reduce op (sum if none) and whether avg is among them with the
 * product of the avg dims' sizes. */
typedef struct ldt__partial_info {
    int pdims[LDT_MAX_DIMS], np, nsrc, has_avg;
    ldt_reduce_op op;
    int64_t navg;
} ldt__partial_info;
void ldt__partial_info_of(const ldt_spec *spec, ldt__partial_info *out);

#endif
