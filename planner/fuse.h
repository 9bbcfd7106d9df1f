/* Internal: collective fusion on a rank's program (planner/fuse.c). */
#ifndef LDT_PLANNER_FUSE_H
#define LDT_PLANNER_FUSE_H

#include "planner/program.h"

/* LDT_FAIL_GOTO with a named status variable. */
#define LDT_FAIL_GOTO_(var, ...)                                                              \
    do {                                                                                     \
        var = ldt__trace(ldt__error(LDT_ERR_OUT_OF_MEMORY, __VA_ARGS__), __FILE__, __LINE__); \
        goto fail;                                                                           \
    } while (0)

typedef struct ldt__fuse_stats {
    int64_t collectives_before, collectives_after; /* calls per step on this rank */
    int64_t in_place;      /* redistributions turned into in-place all_reduces */
    int64_t fused_calls;   /* calls that merge several all_reduces */
    int64_t fused_members; /* all_reduces merged into them */
    int64_t groups;        /* runs of unfusable all_reduces issued as one group */
} ldt__fuse_stats;

/* Collective calls one run of p makes. */
int64_t ldt__program_collectives(const ldt__program *p);
/* The same, those that span mesh dim `dim` (a redistribution step or all_reduce over it). */
int64_t ldt__program_collectives_on(const ldt__program *p, int dim);
/* Pass 1 on p: single-step all_reduce redistributions become in-place all_reduces where
 * nobody else reads the source (keep[v]: values read after the run). Resets *st. */
ldt_status ldt__fuse_in_place(ldt__program *p, const uint8_t *keep, ldt__fuse_stats *st);
/* Pass 2 on p: all_reduce buckets up to cap_bytes; bytes[i] is the rank-independent size of
 * instruction i's value (the same array for every rank). Sets p->vgroup and p->ngroups.
 * With zero = 1, pass 4 instead: single-step reduce_scatters and all_gathers (ZeRO's gradient
 * and parameter collectives) bucketed alike into BUCKET instructions; bytes[i] is then the
 * whole tensor's (the reduce_scatter's input, the all_gather's output). */
ldt_status ldt__fuse_buckets(ldt__program *p, const int64_t *bytes, int64_t cap_bytes, int zero,
                             ldt__fuse_stats *st);
/* Where group member q's piece of a bucketable reduce_scatter's input (all_gather's output)
 * lies in rank me's whole local buffer, in elements: nrun runs of run elements, stride apart,
 * the first at off; cnt = nrun * run. One run (nrun 1) for a split of the leading dim. */
typedef struct ldt__bucket_piece {
    int64_t off, cnt, nrun, run, stride;
} ldt__bucket_piece;
/* The piece above into *pc; 0 if it is no such block (a split of several dims, uneven
 * slices): then the collective is not bucketed. */
int ldt__bucket_chunk(const ldt_redist_plan *pl, int me, int q, ldt__bucket_piece *pc);
/* Passes 2 and 3 on every rank's program (NULL entries skipped) as one decision: each
 * collective is sized by its largest figure over ranks, each rank's buckets are worked out
 * without changing anything, and they are applied only if every rank would issue the same
 * calls with the same members in the same order (*agreed = 1); otherwise nothing changes
 * (*agreed = 0). Group marks are dropped everywhere if they would differ. *st: the largest
 * counts over ranks. zero: pass 4 (ZeRO buckets) instead of pass 2, as ldt__fuse_buckets. */
ldt_status ldt__fuse_agreed(ldt__program *const *progs, int nprogs, int64_t cap_bytes, int zero,
                            ldt__fuse_stats *st, int *agreed);

/* A collective on one mesh dim as the program issues it (ldt__program_dim_members): one member
 * of call `call` (the how-manyth call on the dim, in program order; a fused call has several
 * members, a redistribution of several steps on the dim is one call per step). */
typedef struct ldt__dim_member {
    int64_t call;
    int64_t at;    /* its instruction */
    int64_t ready; /* the last write of what it reads before `at` (-1: none) */
    int64_t bytes; /* on this rank: an all_reduce's buffer, the larger of the input and output
                      (a reduce_scatter's input, an all_gather's output) */
    int phase;     /* 0: reads no result of a call on the dim; k: reads what a phase k-1 call
                      on the dim made (through any work between) */
    uint8_t coll, reduce, dtype, ndims;
    uint8_t dims[LDT_MAX_DIMS];
} ldt__dim_member;
/* Every member of every call of p on mesh dim `dim`, in program order, into *out (malloc'd,
 * *n of them). */
ldt_status ldt__program_dim_members(const ldt__program *p, int dim, ldt__dim_member **out, int64_t *n);
/* The buckets cap_bytes implies on mesh dim `dim` of p: its members (above) grouped by phase
 * and kind (collective, the group's dims, dtype, reduce op), each group filled by next fit in
 * the order its members become ready; the count into *out. A call fused or not counts alike,
 * so the figure is the same for p before and after fusion. */
ldt_status ldt__program_dim_buckets(const ldt__program *p, int dim, int64_t cap_bytes, int64_t *out);

#endif
