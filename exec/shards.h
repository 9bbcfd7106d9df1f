/* Internal: copying a rank's region between a full row-major tensor and its local buffer. */
#ifndef LDT_EXEC_SHARDS_H
#define LDT_EXEC_SHARDS_H

#include "ldt/core.h"

/* Copies the elements of region r between `full` (global row-major with `shape`) and
 * `local` (r's local shape, row-major). to_local != 0: full -> local; else local -> full. */
void ldt__region_copy(const ldt_region *r, const ldt_shape *shape, size_t elem, void *full,
                      void *local, int to_local);

#endif
