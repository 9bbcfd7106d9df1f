/* Internal: overlap of communication with compute (planner/schedule.c). */
#ifndef LDT_PLANNER_SCHEDULE_H
#define LDT_PLANNER_SCHEDULE_H

#include "planner/program.h"

/* Splits every collective of p into an asynchronous start, moved up to just after the
 * instruction that last writes its inputs (never before an earlier collective's start:
 * every rank starts its collectives in program order), and a WAIT just before the first
 * instruction that touches its output or writes its input. *moved (may be NULL) gets how
 * many overlap some other instruction. The same on every rank: it looks only at the program's shape. */
ldt_status ldt__schedule_overlap(ldt__program *p, int64_t *moved);

/* Modeled seconds of one run of p: compute by a roofline estimate of each kernel on the
 * cost model's local bandwidth and flops_per_s, collectives by the cost model. *serial:
 * everything one after another; *overlapped: compute on one stream, collectives on another
 * in program order, each starting at its start and joined at its wait. */
void ldt__model_step(const ldt__program *p, const ldt_cost_model *cm, const ldt_mesh *mesh,
                     double *serial, double *overlapped);

/* The modeled seconds of one instruction of p, as ldt__model_step prices it (0 for a wait). */
double ldt__instr_model_seconds(const ldt__program *p, const ldt__instr *x, const ldt_cost_model *cm,
                                const ldt_mesh *mesh);

#endif
