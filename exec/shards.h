/* Internal: copying a rank's region between a full row-major tensor and its local buffer. */
#ifndef LDT_EXEC_SHARDS_H
#define LDT_EXEC_SHARDS_H

#include "ldt/core.h"
#include "ldt/dlpack.h"

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

/* One more reference on s's storage (ldt_shards_destroy drops one; the last frees it). */
void ldt__shards_retain(ldt_shards *s);
/* Mesh position of a rank in s (-1 if it is not in the mesh). */
int ldt__shards_position(const ldt_shards *s, int rank);
/* Makes every position i's buffer data[i], owned by DLPack tensor ts[i] (deleted with the
 * storage); the buffers allocated for them are freed (empty shards keep theirs). All or
 * nothing: on failure (out of memory) s is unchanged and owns none of ts. */
ldt_status ldt__shards_adopt(ldt_shards *s, DLManagedTensorVersioned *const *ts,
                             void *const *data);
#endif
