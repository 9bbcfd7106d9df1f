/* Internal to exec/calibrate.c, for its tests. */
#ifndef LDT_EXEC_CALIBRATE_INTERNAL_H
#define LDT_EXEC_CALIBRATE_INTERNAL_H

#include <stdint.h>

#include "core/sysmem.h"
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

/* Fills curve e with (size[i], rate[i] / peak) for rates measured at n increasing sizes (size
 * / rate: one op's seconds; each point at most 1) and returns the peak: the best rate of the
 * ops that took 10 us or more, of all when none did (defined in exec/calibrate.c). */
double ldt__fill_curve(ldt_eff_curve *e, const double *size, const double *rate, int n);

/* A calibration as `ldt calibrate --json` prints it (cJSON_Print, the caller frees it): the
 * profile cm with "fit": each timing of s[0..n) and the fitted model's value, the relative
 * residuals' summary (rms as the fit gave it), and when hw is not NULL the host's share of
 * other processes meanwhile. NULL when out of memory. `ldt-bench calibrate_refit` reads it
 * back. */
char *ldt__calibration_json(const ldt_cost_model *cm, const ldt_cost_sample *s, int n, double rms,
                            const ldt__host_watch *hw);

#endif
