/* Internal: sharding strategies, one row per op (planner/strategies/table.c).
 *
 * An op's strategies are built per mesh dim: its `options` function lists 1-D options (what
 * one mesh dim may hold for the output and for each input); the planner takes every
 * combination over the mesh dims (the N-D strategies, as PyTorch's expand_to_full_mesh), drops
 * those whose placement lists do not fit the tensors (ldt_spec_init) or that `valid` refuses,
 * and always keeps the all-Replicate one. A strategy says what each input must be when the op
 * runs; the planner inserts the redistributions that make it so.
 *
 * Lowering: by default a strategy runs the op's own kernel on each rank's local shards (local
 * shapes from the layout function). An op whose local computation differs (mean over a
 * sharded dim, vocab-parallel embedding and cross_entropy, ...) gives a `lower` function that
 * emits its instructions itself (planner/program.h's builder calls). */
#ifndef LDT_PLANNER_STRATEGY_H
#define LDT_PLANNER_STRATEGY_H

#include "ldt/planner.h"
#include "trace/trace.h"

/* Inputs a strategy can describe; ops with more inputs (a long cat) get only all-Replicate. */
#define LDT__SMAX_IN 16

typedef struct ldt__opt1 {
    ldt_placement out;
    ldt_placement in[LDT__SMAX_IN];
} ldt__opt1;

/* The 1-D options of one node, filled by an op's `options` function. */
typedef struct ldt__opts1 {
    const ldt_tensor *t; /* the node: op, attrs, shape, dtype; inputs via LDT__IN(t) */
    int nin;
    ldt__opt1 *v;
    int n, cap;
    int oom;
    /* InterleavedShard block counts that appear in the graph's pins (options may offer
     * IS(d, k) for these k) */
    const int64_t *iks;
    int niks;
} ldt__opts1;

/* The public builder handed to custom ops' strategy functions. */
struct ldt_strategy_builder {
    ldt__opts1 *o;
};

/* Adds one option (nin input placements in `in`); duplicates are ignored. */
void ldt__opt_add(ldt__opts1 *o, ldt_placement out, const ldt_placement *in);
/* Adds the option where the output and every input hold p. */
void ldt__opt_all(ldt__opts1 *o, ldt_placement p);

/* Shapes of input k and of the output, and their ranks. */
#define LDT__SIN(o, k) (LDT__IN((o)->t)[k]->shape)
#define LDT__SOUT(o) ((o)->t->shape)

struct ldt__lower;
struct ldt__lnode;

typedef struct ldt__op_strategy {
    /* The 1-D options; NULL: only all-Replicate. */
    void (*options)(ldt__opts1 *o);
    /* Refuses an N-D combination (out: nd placements, in[k]: nd placements); NULL: all. */
    int (*valid)(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                 const ldt_placement *const *in);
    /* Emits the node's instructions for one rank; NULL: one local kernel (needs_region: with
     * the rank's region of the output, for kernels that draw by global index). */
    ldt_status (*lower)(struct ldt__lower *L, const struct ldt__lnode *n);
    int needs_region;
    /* Seconds of the collectives a `lower` issues itself for this N-D combination (the
     * search adds them to the moves); NULL: none. */
    double (*comm)(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                   const ldt_placement *const *in, const ldt_cost_model *cm);
} ldt__op_strategy;

/* The strategy row of a built-in op (a row of zeros: only all-Replicate). */
const ldt__op_strategy *ldt__op_strategy_of(int op);

/* Each family file fills its ops' rows of the table (rows has LDT_OP_COUNT entries, zeroed);
 * planner/strategies/table.c calls them once. */
void ldt__strategies_elementwise(ldt__op_strategy *rows); /* elementwise.c */
void ldt__strategies_linalg(ldt__op_strategy *rows);      /* linalg.c */
void ldt__strategies_view(ldt__op_strategy *rows);        /* view.c */
void ldt__strategies_reduce(ldt__op_strategy *rows);      /* reduce.c */
void ldt__strategies_nn(ldt__op_strategy *rows);          /* nn.c: softmax..dropout, sdpa */
void ldt__strategies_index(ldt__op_strategy *rows);       /* index.c: embedding..index_put */
void ldt__strategies_random(ldt__op_strategy *rows);      /* random.c */

/* Seconds of an all_reduce of `bytes` per rank over mesh dims dims[0..n) (0 when n is 0 or
 * the group is one rank): for `comm` functions. */
double ldt__all_reduce_seconds(const ldt_cost_model *cm, const ldt_mesh *mesh, const int *dims,
                               int n, int64_t bytes);

/* Helpers for option functions. */
/* 1 when every input and the output of t are floating point (Partial needs it). */
int ldt__s_all_float(const ldt_tensor *t);
/* Placement p with its shard dim moved to `dim` (Shard/InterleavedShard), else p. */
ldt_placement ldt__pl_on_dim(ldt_placement p, int dim);
/* 1 for Shard or InterleavedShard. */
static inline int ldt__pl_is_shard(const ldt_placement *p) {
    return p->kind == LDT_PLACE_SHARD || p->kind == LDT_PLACE_INTERLEAVED_SHARD;
}

#endif
