/* Internal: user graph passes and bypass marks (planner/passes.c), run by planner/plan.c. */
#ifndef LDT_PLANNER_PASSES_H
#define LDT_PLANNER_PASSES_H

#include "planner/plan_internal.h"

/* Runs ctx's passes of `stage` in registration order (plan NULL before planning). After each
 * post-plan pass check(plan) validates the plan again. Any failure names the pass. */
ldt_status ldt__passes_run(ldt_ctx *ctx, ldt_pass_stage stage, ldt_plan *plan,
                           ldt_status (*check)(ldt_plan *plan));
/* Gives every bypassed node of the planned trace its fixed strategy (a set of one), or fails
 * naming the node when no strategy of its op has the fixed output. */
ldt_status ldt__bypass_apply(ldt_plan *p);

#endif
