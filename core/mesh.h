/* Internal body of ldt_mesh. */
#ifndef LDT_CORE_MESH_H
#define LDT_CORE_MESH_H

#include "ldt/core.h"

/* Meshes of up to 2^24 ranks: a rank -> position table stays small enough to build. */
#define LDT_MESH_MAX_RANKS (1 << 24)

struct ldt_mesh {
    int ndim;
    int64_t dims[LDT_MAX_DIMS];
    int nranks;
    int *ranks;  /* row-major, nranks entries */
    int max_rank;
    int *pos_of; /* pos_of[rank] = row-major position, or -1; max_rank + 1 entries */
    char *names[LDT_MAX_DIMS]; /* all NULL for an unnamed mesh */
    ldt_device_type dev;
};

/* ldt_layout_coord for a spec already checked (ldt_spec_init) and coordinates inside the
 * mesh: no checks (core/layout.c). For the redistribution pricer, which lays out the same
 * few specs at thousands of coordinates. */
void ldt__layout_coord_checked(const ldt_spec *spec, const int64_t *coord, ldt_region *out);

#endif
