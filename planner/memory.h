/* Internal: the static memory plan of a rank's program (planner/memory.c). */
#ifndef LDT_PLANNER_MEMORY_H
#define LDT_PLANNER_MEMORY_H

#include "planner/program.h"

typedef struct ldt__mem_plan {
    int64_t *offset;      /* per value: its offset in the arena, -1 when held outside */
    int64_t arena_bytes;  /* the arena's size */
    int64_t bound_bytes;  /* the liveness lower bound: most bytes live at one instruction */
} ldt__mem_plan;

/* Per value, the first instruction that writes it and the last that reads it (-1, -1 when
 * unused); values with keep[v] live to the end (nins). */
ldt_status ldt__liveness(const ldt__program *p, const uint8_t *keep, int64_t *first,
                         int64_t *last);
/* Plans offsets for every value except those with outside[v] (held elsewhere: persistent
 * storage, inputs bound by pointer). keep[v] (may be NULL): live to the end. Sizes are
 * rounded up to 64 bytes. */
ldt_status ldt__memory_plan(const ldt__program *p, const uint8_t *outside, const uint8_t *keep,
                            ldt__mem_plan *out);
void ldt__mem_plan_free(ldt__mem_plan *m);

#endif
