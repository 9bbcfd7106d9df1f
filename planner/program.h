/* Internal: the program of one rank (docs/design.md, "the program"), the builder that lowering
 * uses, and the plan that holds the chosen strategies.
 *
 * A program is a flat array of instructions over numbered values (each a local buffer with
 * its local shape and dtype). Everything is resolved at lowering: local shapes, attributes,
 * regions, redistribution plans, collective groups (as mesh dims). planner/program.c holds the
 * format's own functions; exec/interp.c runs a program unbound, exec/replay.c bound. */
#ifndef LDT_PLANNER_PROGRAM_H
#define LDT_PLANNER_PROGRAM_H

#include <stdio.h>

#include "core/dtype.h"
#include "ldt/planner.h"
#include "planner/strategy.h"

typedef enum ldt__ikind {
    LDT__I_LOAD,       /* out = this rank's region of a persistent tensor (src), or of the
                          host buffer `host` (a copy recipe) shaped like src */
    LDT__I_KERNEL,     /* out = op(in...) on local shards */
    LDT__I_REDIST,     /* out = in redistributed by plan */
    LDT__I_ALL_REDUCE, /* in place: out (== in[0]) reduced over the group of mesh dims; a
                          fused call has nin > 1 operands (one bucket), out the first */
    LDT__I_FILL,       /* out = fill value everywhere */
    LDT__I_ARANGE,     /* out = fill + step * (global row-major index), over the instruction's
                          region (init recipes) */
    LDT__I_WAIT,       /* waits for the asynchronous collective at instruction `pair`; its
                          operands are that collective's (input and output), so liveness
                          keeps them until here */
    LDT__I_BUCKET,     /* a fused bucket of single-step reduce_scatters or all_gathers (`coll`)
                          over the group of mesh dims: member j reads operand j (j < nin) and
                          writes operand nin + j (nout of them, nout == nin; out is the first),
                          one call for all (planner/fuse.c, docs/replay.md "ZeRO buckets") */
    LDT__I_SEND,       /* pipelines (docs/pipeline.md): posts operand 0 (== out) to a peer on
                          p2p channel `op` (the program's p2p table) without waiting */
    LDT__I_RECV,       /* out = the next message of channel `op`'s peer (waits for it) */
    LDT__I_SEND_WAIT,  /* waits until every send posted before has been received; its operands
                          are the values sent, so liveness keeps them until here */
    LDT__I_COUNT
} ldt__ikind;

typedef struct ldt__value {
    ldt_shape shape; /* local */
    uint8_t dtype;
    int32_t node; /* the trace node whose (local) value this is, or -1 for a temporary */
} ldt__value;

typedef struct ldt__instr {
    uint8_t kind;  /* ldt__ikind */
    uint8_t reduce; /* ALL_REDUCE: ldt_reduce_op; LOAD: 1 = zeros (a Partial(sum) leaf off
                       coordinate 0) */
    uint8_t ndims;  /* ALL_REDUCE: mesh dims of the group */
    uint8_t async;  /* REDIST, ALL_REDUCE: started here, finished by the WAIT at `pair` */
    uint8_t group;  /* ALL_REDUCE in a run issued as one group: 1 first, 2 middle, 3 last */
    uint8_t coll;   /* BUCKET: LDT_COLL_REDUCE_SCATTER or LDT_COLL_ALL_GATHER */
    uint8_t dims[LDT_MAX_DIMS];
    int32_t op;     /* KERNEL: op id */
    int32_t node;   /* the trace node it belongs to */
    int32_t out;
    int32_t nin;
    int32_t in;     /* first operand in the program's operand pool */
    int32_t nout;   /* BUCKET: outputs, the operands after the inputs; 0 for the others */
    int32_t bplan;  /* BUCKET: its members' plans, from here in the program's pool bplans */
    int32_t region; /* KERNEL: index into regions, or -1; LOAD: the rank's region */
    const ldt__attrs *attrs;     /* KERNEL: the node's, or a copy owned by the program */
    const ldt_redist_plan *plan; /* REDIST: owned by the plan; BUCKET: its first member's */
    const ldt_tensor *src;       /* LOAD: the persistent tensor */
    const void *host;            /* LOAD: read from here instead of src's data */
    double fill;
    double step;                 /* ARANGE */
    int64_t pair;   /* async collective: its WAIT; WAIT: its collective */
} ldt__instr;

typedef struct ldt__kregion {
    ldt_region region;
    ldt_shape global;
} ldt__kregion;

typedef struct ldt__program {
    int rank;
    ldt__value *vals;
    int32_t nvals, cap_vals;
    ldt__instr *ins;
    int64_t nins, cap_ins;
    int32_t *ops; /* operand pool */
    int64_t nops, cap_ops;
    ldt__attrs **attrs; /* owned attribute copies */
    int64_t nattrs, cap_attrs;
    ldt__kregion *regions;
    int32_t nregions, cap_regions;
    int32_t *node_val; /* per trace node: the value holding its chosen (output) placement */
    int64_t nnodes;
    /* fusion (planner/fuse.c): per value its bucket, or -1; a bucket's values are placed back
     * to back by the memory plan, in the order of the fused call's operands */
    int32_t *vgroup;
    int32_t ngroups;
    const ldt_redist_plan **bplans; /* BUCKET members' plans (owned by the plan), in order */
    int64_t nbplans;
    /* pipelines: the p2p channels SEND and RECV use, (peer world rank, channel k) each; the
     * k-th channel between two ranks is the k-th two-rank communicator they make */
    int32_t (*p2p)[2];
    int32_t np2p;
} ldt__program;

/* The bytes of value v (of local shape and dtype). */
static inline int64_t ldt__value_bytes(const ldt__value *v) {
    int64_t n = (int64_t)ldt__dtype_size((ldt_dtype)v->dtype);
    for (int d = 0; d < v->shape.ndim; d++) n *= v->shape.dims[d];
    return n;
}

/* Every rank's program issues the same collectives in the same order (a lowering never skips
 * one because its local shard is empty): ranks meet only at collectives. */

/* What a lowering function sees: the node, its chosen strategy and its values. */
typedef struct ldt__lnode {
    const ldt_tensor *t;
    const ldt_mesh *mesh;
    int rank;                     /* world rank being lowered */
    const ldt_placement *out;     /* nd placements of the output */
    const ldt_placement *in[LDT__SMAX_IN]; /* nd placements each input holds */
    int32_t in_val[LDT__SMAX_IN]; /* input values (already redistributed) */
    int32_t out_val;              /* the output value (local shape of `out`) */
    const ldt_region *out_region; /* this rank's region of the output */
} ldt__lnode;

typedef struct ldt__lower {
    ldt__program *p;
    const ldt_mesh *mesh;
} ldt__lower;

/* A new value of local shape and dtype (node -1: a temporary); -1 on out of memory. */
int32_t ldt__lower_value(ldt__lower *L, const ldt_shape *shape, ldt_dtype dt, int32_t node);
/* out = op(in) with attrs (copied; NULL: all zero); region/global (may be NULL) for kernels
 * that draw by global index. */
ldt_status ldt__lower_kernel(ldt__lower *L, int32_t node, int op, const ldt__attrs *attrs,
                             int nin, const int32_t *in, int32_t out, const ldt_region *region,
                             const ldt_shape *global);
/* val reduced in place with op over the group spanning mesh dims dims[0..ndims). */
ldt_status ldt__lower_all_reduce(ldt__lower *L, int32_t node, int32_t val, ldt_reduce_op op,
                                 int ndims, const int *dims);
ldt_status ldt__lower_fill(ldt__lower *L, int32_t node, int32_t val, double v);
/* Stores a region (and the global shape it lies in) in the program; *out its index. */
ldt_status ldt__lower_region(ldt__lower *L, const ldt_region *region, const ldt_shape *global,
                             int32_t *out);

/* The program that materializes params[0..n) under placements[i] on this rank (value i is
 * parameter i's shard): their init recipes as kernels drawing by global index, fills, aranges
 * and loads of host data (planner/recipes.c). */
ldt_status ldt__lower_recipes(const ldt_tensor *const *params, const ldt_placement *const *placements,
                              int n, const ldt_mesh *mesh, int rank, ldt__program **out);

/* The mesh dims on which placement list pl (nd entries) shards tensor dim d (Shard or
 * InterleavedShard); returns how many, dims in *out. */
int ldt__shard_mesh_dims(const ldt_placement *pl, int nd, int d, int *out);

/* The format's own functions (planner/program.c). */
void ldt__program_free(ldt__program *p);
/* Replaces p's instructions and operand pool with ins (nins) and ops (nops), taking them. */
void ldt__program_set_ins(ldt__program *p, ldt__instr *ins, int64_t nins, int32_t *ops, int64_t nops);
/* "load", "redistribute", "all_reduce", "fill", or the kernel's op name. */
const char *ldt__instr_name(const ldt_ctx *ctx, const ldt__instr *x);
/* "program rank 1 ..." then one line per instruction. */
ldt_status ldt__program_print(const ldt__program *p, const ldt_ctx *ctx, FILE *f);

/* The plan's view that exec needs (planner/plan.c). ldt__plan_program lowers rank's program
 * on its first call: that writes the plan (its program table and redistribution memo), so
 * rank threads may only read programs lowered before their launch (as ldt_plan_run does). */
const ldt__program *ldt__plan_program(ldt_plan *plan, int rank, ldt_status *st);
ldt_ctx *ldt__plan_ctx(const ldt_plan *plan);
const ldt_mesh *ldt__plan_mesh(const ldt_plan *plan);
/* The chosen output placements of trace node `id` (nd entries). */
const ldt_placement *ldt__plan_out(const ldt_plan *plan, int64_t id);

/* Moves every rank's program (indexed by world rank; NULL off the mesh) and the
 * redistribution plans they use out of the plan, to the caller: they outlive the plan and
 * its trace (programs copy what they need). */
ldt_status ldt__plan_take_programs(ldt_plan *plan, ldt__program ***progs, int *nprogs,
                                   ldt_redist_plan ***rplans, int64_t *nrplans);

/* Tests: the N-D strategies of node `id` (count), and planning with strategies forced per
 * node (forced[id] = strategy index, -1 free; NULL: none). */
int ldt__plan_nstrategies(const ldt_plan *plan, int64_t id);
ldt_status ldt__plan_create_forced(ldt_ctx *ctx, const ldt_plan_options *opts,
                                   const int32_t *forced, ldt_plan **out);

#endif
