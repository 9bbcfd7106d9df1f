/* Internal: the pieces of the alpha-beta formulas that pricing (planner/cost.c) and the fit
 * of measured timings (planner/cost_fit.c) share, so the two cannot drift apart. */
#ifndef LDT_PLANNER_COST_FIT_H
#define LDT_PLANNER_COST_FIT_H

#include "ldt/planner.h"

/* Ring hops the model charges collective c over a group of n ranks: 2(n-1) for all_reduce
 * (a reduce_scatter then an all_gather), n-1 for the others. */
double ldt__coll_hops(ldt_collective c, int64_t n);

#endif
