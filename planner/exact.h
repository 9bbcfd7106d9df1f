/* Internal: the exact strategy choice (planner/exact.c, docs/planner.md "The exact search"). */
#ifndef LDT_PLANNER_EXACT_H
#define LDT_PLANNER_EXACT_H

#include "ldt/planner.h"

/* Minimises the plan's cost (each node's own seconds, each leaf's memory term under a memory
 * weight, and each producer's distinct moves: the objective plan.c's price() computes) over
 * every node's strategies, or over fixed[v] alone where fixed is not NULL and fixed[v] >= 0,
 * by variable elimination. Its dry run counts the work (table entries made) before any table:
 * past `elim_limit`, or past `hold` entries kept, it is not run; then the Lagrangian
 * relaxation's passes, together within `limit`, each counting `rebuild` entries besides its
 * tables (what remaking the relaxed problem costs), each tightened where the last misprices a
 * shared read (unrelax): *solved 0, *bound a proven lower bound on the
 * optimum, and the relaxation's cheapest plan (its relaxed optima priced exactly) in alt[] with
 * its cost in *alt_cost (INFINITY: none), for the caller to keep where it beats the
 * heuristic's. Solved: choice[] holds an optimum and *bound its cost. tying: an elimination
 * repeated on equal tables (repeated layers) reuses the table made the first time and counts
 * no work; *tied says whether that happened. Errors: out of memory only. */
ldt_status ldt__search_exact(ldt_plan *p, const int32_t *fixed, int64_t limit, int64_t rebuild,
                             int64_t elim_limit, int64_t hold, int tying, int32_t *choice, double *bound, int *solved,
                             int *tied, int32_t *alt, double *alt_cost);

/* Repairs plan c in place (primal recovery, "The exact search"): node by node, not the fixed
 * ones, the strategy whose exact share of the price (its own seconds, its value's distinct
 * moves, its inputs' distinct moves) is least, strict gains only, so the price never rises.
 * 1 done, 0 out of memory. */
int ldt__plan_repair(ldt_plan *p, const int32_t *fixed, int32_t *c);

/* The second method (planner/bnb.c): a depth-first branch and bound over the nodes in trace
 * order, memoised on the frontier, that looks for an assignment of cost at most ub (a plan's
 * cost, a little above). Visits past `limit` stop it (*solved 0); else choice[] holds an
 * optimum. Quadratic set-up in the nodes: for small graphs. Errors: out of memory only. */
ldt_status ldt__search_bnb(ldt_plan *p, const int32_t *fixed, int64_t limit, double ub,
                           int32_t *choice, int *solved);

#endif
