/* Internal: a pipelined trace's programs (docs/pipeline.md). After every rank's program is
 * lowered for the whole step (every tensor whole on the pp mesh dim), each rank keeps only its
 * stages' instructions, in the schedule's order, with the SENDs and RECVs between stages and
 * a closing SEND_WAIT; the outputs reach every rank. */
#ifndef LDT_PLANNER_PIPELINE_H
#define LDT_PLANNER_PIPELINE_H

#include "planner/program.h"

/* What the step's results are: the trace nodes read after it (outputs and assigned values)
 * and the persistent tensors it assigns (loaded on every rank, so they update in place). */
typedef struct ldt__pp_results {
    const int64_t *nodes; /* the outputs' (nout), then the assigned values' (n - nout) */
    int n, nout;
    const ldt_tensor *const *assigned;
    int nassigned;
    /* 1: the assigned values reach every rank too (process mode, where a tensor's host copy
     * is gathered from the ranks at pp coordinate 0); 0: they stay on their stages' ranks */
    int everywhere;
} ldt__pp_results;

/* Rewrites progs[0..nr) (per world rank; NULL entries skipped) of ctx's pipelined trace on
 * mesh; a no-op without a pipeline. Refused on CUDA meshes. */
ldt_status ldt__pipeline_programs(const ldt_ctx *ctx, const ldt_mesh *mesh, ldt__program **progs, int nr,
                                  const ldt__pp_results *res);

#endif
