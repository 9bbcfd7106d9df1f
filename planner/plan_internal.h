/* Internal: the plan's body, shared by planner/plan.c (strategies and search),
 * planner/lower.c (programs) and planner/plan_write.c (JSON, DOT). */
#ifndef LDT_PLANNER_PLAN_INTERNAL_H
#define LDT_PLANNER_PLAN_INTERNAL_H

#include "planner/program.h"

/* The N-D strategies shared by every node with the same signature (op, attributes, shapes,
 * dtypes, pin): n strategies of 1 + nin placement-list ids each, [out, in0, in1, ...]. */
typedef struct ldt__sset {
    uint64_t hash;
    size_t keylen;
    unsigned char *key;
    int nin;
    int n;
    uint16_t *pl;
    double *own; /* per strategy, the seconds of its own collectives; NULL: none */
} ldt__sset;

#define LDT__SSET_PL(ss, s) ((ss)->pl + (size_t)(s) * (size_t)(1 + (ss)->nin))

/* A priced redistribution: shape class, from, to -> seconds and the plan (made lazily). */
typedef struct ldt__redist_memo {
    uint64_t key; /* class << 32 | from << 16 | to, +1 so 0 marks an empty slot */
    double seconds;        /* the real plan's; NaN: not priced yet */
    ldt_redist_plan *plan; /* NULL until lowering asks */
    int failed;            /* no plan exists (e.g. P(sum) -> P(max)) */
} ldt__redist_memo;

typedef struct ldt__shape_class {
    ldt_shape shape;
    ldt_dtype dtype;
} ldt__shape_class;

#define LDT__PRICE_CACHE 16384
typedef struct ldt__price_slot {
    uint64_t key;
    double seconds;
} ldt__price_slot;

struct ldt_plan {
    ldt_ctx *ctx;
    const ldt_mesh *mesh;
    int nd;
    uint32_t gen;
    ldt_cost_model cost;
    ldt_plan_options opts;
    int64_t nnodes;
    /* interned placement lists, nd placements each */
    ldt_placement *plists;
    int32_t nplists, cap_plists;
    int32_t *plist_tab; /* open addressing, ids + 1 */
    int32_t plist_tab_cap;
    /* interned strategy sets */
    ldt__sset **ssets;
    int32_t nssets, cap_ssets;
    int32_t *sset_tab;
    int32_t sset_tab_cap;
    ldt__sset **node_ss; /* per node */
    int32_t *choice;     /* per node: the chosen strategy */
    int32_t *node_class; /* per node: its shape class */
    /* shape classes */
    ldt__shape_class *classes;
    int32_t nclasses, cap_classes;
    int32_t *class_tab;
    int32_t class_tab_cap;
    /* priced redistributions */
    ldt__redist_memo *memo;
    int64_t memo_cap, memo_n;
    struct ldt__step_memo **class_memo; /* per shape class: its step prices (made lazily) */
    int32_t class_memo_cap;
    ldt__price_slot price_cache[LDT__PRICE_CACHE]; /* in front of the memo's prices */
    /* consumers: per node, its users (CSR) */
    int64_t *use_off;
    int32_t *use_node;
    int8_t *use_slot;
    int compute; /* the compute term is on */
    int max_strategies;
    /* interleave block counts seen in pins */
    int64_t iks[8];
    int niks;
    /* results */
    double cost_chosen, cost_greedy, cost_global;
    double plan_seconds;
    const char *method; /* "exact", "exact-tied", "heuristic" */
    double bound;       /* a proven lower bound on the optimum (the optimum when exact) */
    double gap;         /* (cost_chosen - bound) / cost_chosen, 0 when proven optimal */
    int tied;
    ldt__program **programs; /* per world rank, lowered on demand */
    int nprograms;
    /* the maxima over every rank (plan_write.c all_totals), once computed */
    int have_totals;
    int64_t totals_colls[LDT_COLL_COUNT + 1], totals_bytes;
    double totals_seconds;
    /* with the totals: the classes of ranks (their representatives), for each the first class
     * whose program digests alike, and the arenas of those (planned with the totals; -1 for a
     * class that shares another's) */
    int ncls;
    int *cls_rank, *cls_same;
    int64_t *cls_arena;
    /* with the totals: the step's figures (plan_step.c), the maximum over ranks, and the
     * forward's last node they measured saved bytes at, plus one (0: none) */
    ldt_plan_step step;
    int64_t step_boundary;
};

/* Folds program prog's step figures (ldt_plan_step) into p->step, each the maximum. */
ldt_status ldt__plan_step_fold(ldt_plan *p, const ldt__program *prog);

/* Placement list id -> its nd placements. */
static inline const ldt_placement *ldt__plist(const ldt_plan *p, int id) {
    return p->plists + (size_t)id * (size_t)p->nd;
}
/* The redistribution of a value of shape class cls from placement list `from` to `to`: its
 * memo entry, priced with the real plan (kept when want_plan). NULL on out of memory. */
ldt__redist_memo *ldt__plan_redist(ldt_plan *p, int32_t cls, int from, int to, int want_plan);
/* The same move's modeled seconds (INFINITY when no redistribution makes it) through a small
 * direct-mapped cache in front of the memo: what the searches' inner loops ask. */
double ldt__plan_move_seconds(ldt_plan *p, int32_t cls, int from, int to);
/* The search's price of node v's input k under the chosen strategies (what the search adds
 * for that edge; tests compare it with the plan lowering runs). */
double ldt__plan_search_price(ldt_plan *p, int64_t v, int k);
/* The required placement list of input k of node v under its chosen strategy, and its
 * output's. */
static inline int ldt__chosen_in(const ldt_plan *p, int64_t v, int k) {
    return LDT__SSET_PL(p->node_ss[v], p->choice[v])[1 + k];
}
static inline int ldt__chosen_out(const ldt_plan *p, int64_t v) {
    return LDT__SSET_PL(p->node_ss[v], p->choice[v])[0];
}
/* 1 when node v's input k is an edge the planner must move (placements differ). */
static inline int ldt__edge_moves(const ldt_plan *p, int64_t v, int k) {
    const ldt_tensor *u = LDT__IN(p->ctx->nodes[v])[k];
    return ldt__chosen_out(p, u->id) != ldt__chosen_in(p, v, k);
}
/* The cost of a full assignment: each non-leaf node's own seconds, and per value each
 * distinct placement list its consumers need, other than its own, moved once (the search's
 * objective and ldt_plan_cost). */
double ldt__plan_price(ldt_plan *p, const int32_t *choice);
/* Lowers rank's program (planner/lower.c). */
ldt_status ldt__lower_program(ldt_plan *p, int rank, ldt__program **out);

#endif
