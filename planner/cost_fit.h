/* Internal: the pieces of the alpha-beta formulas that pricing (planner/cost.c) and the fit
 * of measured timings (planner/cost_fit.c) share, so the two cannot drift apart. */
#ifndef LDT_PLANNER_COST_FIT_H
#define LDT_PLANNER_COST_FIT_H

#include "ldt/planner.h"

/* Hops m charges collective c (all_reduce, reduce_scatter, all_gather or all_to_all) over a
 * group of n ranks, by the algorithm m gives its kind (ring and direct n-1, tree
 * ceil(log2 n); all_reduce twice that). */
double ldt__coll_hops(const ldt_cost_model *m, ldt_collective c, int64_t n);

/* Hops m charges a collective of kind k over a group of n ranks, by the kind's algorithm (as
 * ldt_cost_kind_seconds prices it; send_recv: n - 1, one message to each peer). */
double ldt__kind_hops(const ldt_cost_model *m, ldt_coll_kind k, int64_t n);

/* Collective kind index k's cache knee under m: cache_bytes, but a broadcast's is the local
 * ops' (local_cache_bytes) when m has one (on rank threads a broadcast is a plain copy on
 * each receiving rank); 0: no knee. */
double ldt__kind_knee(const ldt_cost_model *m, int k);

/* The bytes term's effective byte count for collective kind index k under m: (1 +
 * bytes_extra[k]) (b + beyond_cache[k] max(0, b - C)), C = ldt__kind_knee (no knee when it
 * is 0). The local ops are priced by ldt__local_seconds. */
double ldt__eff_bytes(const ldt_cost_model *m, int k, double b);

/* Seconds m gives local op c (local_chunk, local_partial or local_pad) writing b bytes:
 * local_overhead_s + ((1 + local_bytes_extra[i]) b + beyond_cache[LDT_KIND_COUNT] max(0,
 * b - C)) / local_bandwidth_Bps, i = c - LDT_COLL_LOCAL_CHUNK, C the local knee
 * (local_cache_bytes, else cache_bytes; 0: none). */
double ldt__local_seconds(const ldt_cost_model *m, ldt_collective c, double b);

/* The rendezvous fit: steps i = 0..n-1 were measured at measured[i] seconds and modeled at
 * modeled[i] without any rendezvous; in them peers met calls[i] times, after gap[i] modeled
 * kernel seconds in all of running apart (each meeting's compute since the previous one,
 * summed). The excess measured - modeled is fitted by least squares as
 * a + (w calls + share gap) (nranks / cores - 1), a what the steps share (a replay's own
 * start), w and share kept >= 0 (a negative one is fixed at 0 and the rest fitted again).
 * *per_call gets w, *share the share, *fixed (may be NULL) a; all 0 when nranks <= cores,
 * cores is 0, or fewer than 3 steps. scale (may be NULL: equal weights) is each step's noise
 * scale, its time: the rows are weighted by 1 / scale^2, so the short steps, whose excess is
 * mostly the waits per meeting, decide w, and the long ones' noise (a few percent of tens of
 * milliseconds) does not. */
void ldt__fit_rendezvous(const double *calls, const double *gap, const double *measured,
                         const double *modeled, const double *scale, int n, int nranks, int cores,
                         double *per_call, double *share, double *fixed);

#endif
