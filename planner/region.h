/* Internal: the geometry of two regions of one global tensor (ldt_layout's runs), their
 * intersection per dim as matched pieces. The planner counts with it; exec copies with it. */
#ifndef LDT_PLANNER_REGION_H
#define LDT_PLANNER_REGION_H

#include "ldt/core.h"

/* One piece of a dim where a run of region a meets a run of region b: `len` indices that
 * sit at local index `a` in a and `b` in b. Pieces come in increasing global order. */
typedef struct ldt__seg {
    int64_t a, b, len;
} ldt__seg;

/* Upper bound on the pieces of one dim: enough for ldt__dim_isect's out. */
static inline int64_t ldt__dim_isect_cap(const ldt_dim_runs *a, const ldt_dim_runs *b) {
    return a->blocks + b->blocks;
}

/* The pieces of dim runs a and b (empty runs meet nothing); out may be NULL to count only.
 * Returns the number of pieces; *total (may be NULL) gets their summed length. */
int64_t ldt__dim_isect(const ldt_dim_runs *a, const ldt_dim_runs *b, ldt__seg *out,
                       int64_t *total);

/* Elements two regions of the same tensor share. */
int64_t ldt__region_isect_numel(const ldt_region *a, const ldt_region *b);

#endif
