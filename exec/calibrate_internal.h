/* Internal to exec/calibrate.c, for its tests. */
#ifndef LDT_EXEC_CALIBRATE_INTERNAL_H
#define LDT_EXEC_CALIBRATE_INTERNAL_H

#include <stdint.h>

#include "ldt/exec.h"
#include "ldt/planner.h"

/* One of the rendezvous steps on mesh's rank threads (k rounds of an n x n GEMM on Shard(0)
 * rows, with `meet` each followed by an all_gather, without it one all_gather at the end),
 * compiled under cm and replayed once: *measured its time, *modeled the step model's,
 * *calls the meetings the model counts (0 when the mesh has no more ranks than cm->cores). */
ldt_status ldt__calibrate_rounds(const ldt_mesh *mesh, int64_t n, int k, const ldt_cost_model *cm, int meet,
                                 double *measured, double *modeled, double *calls);

/* ldt_redistribute_measure with every timed run's seconds (rank 0's, in run order) in
 * times[0..reps) when times is not NULL, and when harness is not NULL, before each run a run
 * of the harness alone (its two barriers) in the same world, its seconds in harness[0..reps)
 * (defined in exec/redistribute.c). */
ldt_status ldt__redistribute_runs(const ldt_shards *src, const ldt_redist_plan *plan, int reps,
                                  double *seconds, double *times, double *harness, ldt_shards **out);

#endif
