/* Internal: a redistribution plan recorded for a device (exec/redistribute.c, docs/gpu.md).
 *
 * The CPU runner moves data as it walks a plan. For a GPU the same walk runs once, at bind,
 * and records what it would do: copies as lists of byte runs (the intersection walks of
 * every step, merged where adjacent), collectives as comm.h op descriptors over the step's
 * group, fills with a reduction's identity and zero fills. Every address is a buffer and a
 * byte offset: the step's input and output, two ping-pong buffers and a scratch buffer for
 * packed messages, whose sizes the recording gives. The CUDA backend allocates the buffers
 * and replays the ops on its streams, with NCCL for the collectives.
 *
 *   ldt__dredist *d;
 *   LDT_CHECK(ldt__redist_record(nccl_world, plan, &d));  // collective: every rank, in order
 *   for (int i = 0; i < d->nops; i++) ... d->ops[i] ...
 *   ldt__dredist_free(d);                                 // also frees the groups it made
 */
#ifndef LDT_EXEC_REDIST_RECORD_H
#define LDT_EXEC_REDIST_RECORD_H

#include <stdint.h>

#include "exec/comm.h"

enum { LDT__RB_IN, LDT__RB_OUT, LDT__RB_BUF0, LDT__RB_BUF1, LDT__RB_SCRATCH, LDT__RB_N };

typedef enum ldt__dr_kind {
    LDT__DR_COPY, /* runs[0..nruns): {source byte, destination byte, bytes} */
    LDT__DR_COLL, /* op over group: send at src, recv at dst (the op's pointers are NULL) */
    LDT__DR_FILL, /* bytes at dst, each element `pattern` (es bytes) */
    LDT__DR_ZERO  /* bytes at dst zeroed */
} ldt__dr_kind;

typedef struct ldt__dr_op {
    ldt__dr_kind kind;
    int src_buf, dst_buf;     /* LDT__RB_* */
    int64_t src_off, dst_off; /* COLL, FILL, ZERO: byte offsets; COPY: 0 (the runs hold them) */
    int64_t bytes;            /* FILL, ZERO */
    int es;                   /* element size: every offset and length is a multiple */
    int64_t *runs;            /* COPY: 3 * nruns */
    int64_t nruns;
    ldt_comm *group;          /* COLL: borrowed from the recording */
    ldt__op op;               /* COLL: kind, dtype, reduce, count; arrays owned (counts, ...) */
    unsigned char pattern[8]; /* FILL */
} ldt__dr_op;

typedef struct ldt__dredist {
    ldt__dr_op *ops;
    int nops, cap;
    int64_t bytes[LDT__RB_N]; /* the buffers' sizes (IN, OUT: the plan's ends on this rank) */
    struct ldt_redist_runner *runner; /* owns the groups */
} ldt__dredist;

/* Records what this rank does for plan (over world, whose backend gives the groups: every
 * rank of the plan's meshes calls it, in the same order, as for ldt_redist_runner_create).
 * LDT_ERR_UNSUPPORTED for a step that moves data between meshes (not recorded yet). */
ldt_status ldt__redist_record(ldt_comm *world, const struct ldt_redist_plan *plan, ldt__dredist **out);
void ldt__dredist_free(ldt__dredist *d);

#endif
