/* lazydt tracing: ops on lazydt tensors are recorded into a graph and run when a value is
 * needed (reading it, or ldt_sync). A context owns the current trace, the persistent tensors
 * (inputs, parameters, constants, kept results) and the last error.
 *
 *   ldt_ctx *ctx;
 *   ldt_ctx_create(NULL, &ctx);                        // a 1-rank mesh, seed 0
 *   ldt_shape s = {2, {4, 8}};
 *   ldt_tensor *x = ldt_input(ctx, "x", &s, LDT_F32);  // data bound before a run
 *   ldt_tensor *w = ldt_param(ctx, "w", &s, LDT_F32);  // persistent across runs
 *   ldt_input_bind(x, xdata, sizeof xdata);
 *   ldt_param_set(w, wdata, sizeof wdata);
 *   ldt_tensor *y = ldt_sum(ldt_mul(x, w), NULL, 0, 0); // recorded, not run
 *   float out;
 *   if (ldt_read(y, &out, sizeof out) != LDT_OK)       // runs the trace, ends it
 *       puts(ldt_ctx_errmsg(ctx));                     // an op's error sticks until here
 *   ldt_ctx_destroy(ctx);
 *
 * Op results are valid until their trace ends (ldt_read, ldt_sync); ldt_keep gives a
 * persistent tensor that holds a result's value into later traces. Op constructors return
 * NULL on error; the error sticks on the context and is returned again by the next run, so a
 * chain of ops needs one check. */
#ifndef LDT_TRACE_H
#define LDT_TRACE_H

#include <stdio.h>

#include "ldt/core.h"
#include "ldt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ldt_ctx ldt_ctx;
typedef struct ldt_tensor ldt_tensor;

typedef struct ldt_ctx_options {
    const ldt_mesh *mesh; /* borrowed; NULL: a 1-D mesh of one rank */
    uint64_t seed;        /* the random stream's seed (offset starts at 0) */
    /* One process per rank (ldt_mpi_world): this process is the world's rank r and runs only
     * rank r of compiled steps; every process runs the same code (SPMD). Borrowed; NULL: all
     * ranks run here as threads. Eager runs stay local (every process computes them whole). */
    struct ldt_comm *world;
} ldt_ctx_options;

/* A context with an empty trace; opts may be NULL (a 1-rank CPU mesh, seed 0). Destroy frees
 * its tensors and the executables of its plan cache. */
LDT_API ldt_status ldt_ctx_create(const ldt_ctx_options *opts, ldt_ctx **out);
LDT_API void ldt_ctx_destroy(ldt_ctx *ctx);
/* The context's last error message ("" if none). */
LDT_API const char *ldt_ctx_errmsg(const ldt_ctx *ctx);
/* The error stuck on the current trace (LDT_OK if none); ldt_ctx_clear_error forgets it. */
LDT_API ldt_status ldt_ctx_status(const ldt_ctx *ctx);
LDT_API void ldt_ctx_clear_error(ldt_ctx *ctx);
LDT_API const ldt_mesh *ldt_ctx_mesh(const ldt_ctx *ctx);
/* The random stream's seed and current offset (advanced by each random op, by ceil(n/4)). */
LDT_API ldt_status ldt_ctx_set_seed(ldt_ctx *ctx, uint64_t seed, uint64_t offset);
LDT_API uint64_t ldt_ctx_seed(const ldt_ctx *ctx);
LDT_API uint64_t ldt_ctx_rng_offset(const ldt_ctx *ctx);

/* ---- persistent tensors ------------------------------------------------------------ */
/* An input: data bound (copied) with ldt_input_bind before each run. */
LDT_API ldt_tensor *ldt_input(ldt_ctx *ctx, const char *name, const ldt_shape *shape, ldt_dtype dt);
/* A parameter: zero-filled storage that persists across runs. */
LDT_API ldt_tensor *ldt_param(ldt_ctx *ctx, const char *name, const ldt_shape *shape, ldt_dtype dt);
/* A constant: data copied now. */
LDT_API ldt_tensor *ldt_constant(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt,
                                 const void *data);
LDT_API ldt_status ldt_input_bind(ldt_tensor *input, const void *data, int64_t nbytes);
LDT_API ldt_status ldt_param_set(ldt_tensor *param, const void *data, int64_t nbytes);
/* Init recipes (deferred init): how a parameter's values are made, recorded now and computed
 * when it is materialized, each rank computing only its shard from global indices, so every
 * sharding gives the single-device values. Random kinds take their (seed, offset) from the
 * context's stream when the recipe is given (advancing it by the single-device amount), so
 * recipes given in the same order draw the same values as ops recorded in that order.
 * Fans come from the global shape [out, in, ...]: fan_in = in * receptive, fan_out = out *
 * receptive, receptive = the product of the dims after the first two. */
typedef enum ldt_init_kind {
    LDT_INIT_ZEROS,
    LDT_INIT_ONES,
    LDT_INIT_FULL,            /* a */
    LDT_INIT_ARANGE,          /* a + b * i, i the row-major index */
    LDT_INIT_UNIFORM,         /* U[a, b) */
    LDT_INIT_NORMAL,          /* N(mean a, std b) */
    LDT_INIT_TRUNC_NORMAL,    /* N(mean a, std b) truncated to [lo, hi] */
    LDT_INIT_KAIMING_UNIFORM, /* U(-bound, bound), bound = gain sqrt(3 / fan), gain sqrt(2 / (1 + a^2)) */
    LDT_INIT_KAIMING_NORMAL,  /* N(0, gain / sqrt(fan)) */
    LDT_INIT_XAVIER_UNIFORM,  /* U(-bound, bound), bound = gain sqrt(6 / (fan_in + fan_out)), gain a (0: 1) */
    LDT_INIT_XAVIER_NORMAL,   /* N(0, gain sqrt(2 / (fan_in + fan_out))) */
    LDT_INIT_COPY,            /* from host data (borrowed until materialized), row-major */
    LDT_INIT_KIND_COUNT
} ldt_init_kind;

typedef struct ldt_init {
    ldt_init_kind kind;
    double a, b;       /* the kind's parameters, as above */
    double lo, hi;     /* trunc_normal's bounds */
    int fan_out;       /* kaiming: 1 uses fan_out, 0 fan_in */
    const void *data;  /* copy */
} ldt_init;

/* Gives param its init recipe (replacing an earlier one). Errors: bad parameters (std <= 0,
 * a >= b for uniform, lo >= hi, fans of a 0- or 1-dim tensor for kaiming/xavier, NULL data),
 * a tensor that is not a parameter. */
LDT_API ldt_status ldt_param_init(ldt_tensor *param, const ldt_init *init);
/* Its recipe, and for random kinds the (seed, offset) it draws from; LDT_ERR_INVALID_USAGE
 * when it has none. */
LDT_API ldt_status ldt_param_recipe(const ldt_tensor *param, ldt_init *init, uint64_t *seed,
                                    uint64_t *offset);
/* 1 when the context's mesh is on the meta device (tensors there hold no data). */
LDT_API int ldt_ctx_is_meta(const ldt_ctx *ctx);

/* When the trace runs, dst (a parameter) receives value's value (same shape and dtype): how a
 * step updates its parameters and optimizer state in place. One value per dst per trace. */
LDT_API ldt_status ldt_assign(ldt_tensor *dst, ldt_tensor *value);
/* A persistent tensor that receives t's value when t's trace runs; usable in later traces
 * (as a data node). NULL on error. */
LDT_API ldt_tensor *ldt_keep(ldt_tensor *t);

/* ---- materialization --------------------------------------------------------------- */
/* Runs the pending trace (eagerly, node by node) and ends it: op results of that trace
 * expire; persistent tensors stay. Returns the trace's stuck error, if any. */
LDT_API ldt_status ldt_sync(ldt_ctx *ctx);
/* Drops the current trace without running it (its random ops give their offsets back). */
LDT_API void ldt_trace_discard(ldt_ctx *ctx);
/* Copies t's value (row-major, t's dtype) into dst, running the trace first if t is
 * pending; nbytes must be t's size. */
LDT_API ldt_status ldt_read(ldt_tensor *t, void *dst, int64_t nbytes);

/* ---- introspection ----------------------------------------------------------------- */
LDT_API ldt_status ldt_tensor_shape(const ldt_tensor *t, ldt_shape *out);
LDT_API ldt_dtype ldt_tensor_dtype(const ldt_tensor *t);
LDT_API ldt_ctx *ldt_tensor_ctx(const ldt_tensor *t);
/* Nodes recorded in the current trace (leaves count once they are used). */
LDT_API int64_t ldt_trace_nodes(const ldt_ctx *ctx);
/* Structural hash (XXH3) of the current trace: ops, shapes, dtypes, attributes, pins and
 * structure, never data or names. The same step traced twice gives the same hash. */
LDT_API uint64_t ldt_trace_hash(const ldt_ctx *ctx);
/* One line per node: "%3 = add(%1, %2) [7,5] f32 pin=S0". */
LDT_API ldt_status ldt_trace_dump(const ldt_ctx *ctx, FILE *f);
/* Graphviz DOT of the current trace. */
LDT_API ldt_status ldt_trace_dot(const ldt_ctx *ctx, FILE *f);
/* Walking the current trace (user graph passes, planner.h): node i in recording order (op
 * results and the persistent tensors they read), 0 <= i < ldt_trace_nodes(ctx); NULL with the
 * thread error when out of range. */
LDT_API ldt_tensor *ldt_trace_node(const ldt_ctx *ctx, int64_t i);
/* t's index in the current trace; -1 when it is not in it (ended trace, unused leaf). */
LDT_API int64_t ldt_tensor_node(const ldt_tensor *t);
/* "matmul", "layer_norm", a custom op's name; "input", "param", "const" or "data" for
 * persistent tensors; "" for NULL. */
LDT_API const char *ldt_tensor_op(const ldt_tensor *t);
/* An op result's inputs (persistent tensors have none); input k, NULL when out of range. */
LDT_API int ldt_tensor_ninputs(const ldt_tensor *t);
LDT_API ldt_tensor *ldt_tensor_input(const ldt_tensor *t, int k);
/* A persistent tensor's name; NULL for op results. */
LDT_API const char *ldt_tensor_name(const ldt_tensor *t);
/* t's pin into out (cap >= the mesh's dims); *pinned 0 when it has none (out untouched). */
LDT_API ldt_status ldt_tensor_pin(const ldt_tensor *t, ldt_placement *out, int cap, int *pinned);

/* ---- sharding annotations ---------------------------------------------------------- */
/* Fixes t's placements on the context's mesh (like mark_sharding); one per mesh dim. */
LDT_API ldt_status ldt_pin(ldt_tensor *t, const ldt_placement *placements, int n);
/* Records an explicit redistribution of t to the given placements. */
LDT_API ldt_tensor *ldt_redistribute_to(ldt_tensor *t, const ldt_placement *placements, int n);

/* ---- pipeline stages (docs/pipeline.md) ---------------------------------------------- */
typedef enum ldt_pipe_schedule {
    LDT_PIPE_GPIPE,       /* every micro-batch's forward, then every backward */
    LDT_PIPE_1F1B,        /* warm-up forwards, then one forward one backward, then cool-down */
    LDT_PIPE_INTERLEAVED  /* 1F1B over V model chunks per rank (Megatron's interleaved order) */
} ldt_pipe_schedule;
/* Makes the current trace one pipelined step over the mesh dim named "pp" (P ranks): P x
 * chunks virtual stages (chunks 1 unless interleaved; virtual stage k on pp rank k mod P),
 * `micro` micro-batches ordered on each rank by `schedule`. Compiling the trace gives each
 * rank only its stages' work (every tensor whole on pp), joined by send/recv along pp.
 * Refused: no "pp" mesh dim, micro < 1, chunks < 1, chunks > 1 without interleaved,
 * interleaved with micro not a multiple of P. Holds until the trace ends. */
LDT_API ldt_status ldt_pipeline_begin(ldt_ctx *ctx, ldt_pipe_schedule schedule, int chunks, int micro);
/* Ops recorded from now on are the forward of micro-batch `micro` on virtual stage `stage`
 * (ldt_grad gives each backward op its forward op's stage and micro-batch); stage -1: none
 * (step-wide work such as the optimizer, placed by what it reads). Needs ldt_pipeline_begin;
 * refused outside 0..P x chunks - 1 or 0..micro - 1. */
LDT_API ldt_status ldt_pipeline_tag(ldt_ctx *ctx, int stage, int micro);

/* ---- ops: elementwise (numpy broadcasting) ----------------------------------------- */
LDT_API ldt_tensor *ldt_add(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_sub(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_mul(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_div(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_eq(ldt_tensor *a, ldt_tensor *b); /* comparisons give bool */
LDT_API ldt_tensor *ldt_ne(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_lt(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_le(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_gt(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_ge(ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_where(ldt_tensor *cond, ldt_tensor *a, ldt_tensor *b);
LDT_API ldt_tensor *ldt_add_scalar(ldt_tensor *x, double s);
LDT_API ldt_tensor *ldt_sub_scalar(ldt_tensor *x, double s);  /* x - s */
LDT_API ldt_tensor *ldt_rsub_scalar(ldt_tensor *x, double s); /* s - x */
LDT_API ldt_tensor *ldt_mul_scalar(ldt_tensor *x, double s);
LDT_API ldt_tensor *ldt_div_scalar(ldt_tensor *x, double s);  /* x / s */
LDT_API ldt_tensor *ldt_rdiv_scalar(ldt_tensor *x, double s); /* s / x */
LDT_API ldt_tensor *ldt_pow_scalar(ldt_tensor *x, double s);
LDT_API ldt_tensor *ldt_neg(ldt_tensor *x);
LDT_API ldt_tensor *ldt_exp(ldt_tensor *x);
LDT_API ldt_tensor *ldt_log(ldt_tensor *x);
LDT_API ldt_tensor *ldt_sqrt(ldt_tensor *x);
LDT_API ldt_tensor *ldt_rsqrt(ldt_tensor *x);
LDT_API ldt_tensor *ldt_tanh(ldt_tensor *x);
LDT_API ldt_tensor *ldt_relu(ldt_tensor *x);
LDT_API ldt_tensor *ldt_gelu(ldt_tensor *x, int tanh_form); /* 0: erf form, 1: tanh form */
LDT_API ldt_tensor *ldt_silu(ldt_tensor *x);
LDT_API ldt_tensor *ldt_cast(ldt_tensor *x, ldt_dtype dt);

/* ---- linear algebra ------------------------------------------------------------------ */
LDT_API ldt_tensor *ldt_matmul(ldt_tensor *a, ldt_tensor *b); /* torch.matmul */
/* x w^T + b; b may be NULL */
LDT_API ldt_tensor *ldt_linear(ldt_tensor *x, ldt_tensor *w, ldt_tensor *b);

/* ---- views and data movement (negative dims count from the end) ---------------------- */
LDT_API ldt_tensor *ldt_reshape(ldt_tensor *x, const ldt_shape *shape); /* one dim may be -1 */
LDT_API ldt_tensor *ldt_view(ldt_tensor *x, const ldt_shape *shape);    /* = reshape */
LDT_API ldt_tensor *ldt_transpose(ldt_tensor *x, int d0, int d1);
LDT_API ldt_tensor *ldt_permute(ldt_tensor *x, const int *dims, int n);
/* Python slice semantics for start/end (negative from the end, clamped); step >= 1. */
LDT_API ldt_tensor *ldt_slice(ldt_tensor *x, int dim, int64_t start, int64_t end, int64_t step);
LDT_API ldt_tensor *ldt_select(ldt_tensor *x, int dim, int64_t index);
LDT_API ldt_tensor *ldt_cat(ldt_tensor *const *xs, int n, int dim);
/* Splits dim into pieces of `size` (the last may be shorter): fills out[0..*n). */
LDT_API ldt_status ldt_split(ldt_tensor *x, int64_t size, int dim, ldt_tensor **out, int cap,
                             int *n);
LDT_API ldt_tensor *ldt_expand(ldt_tensor *x, const ldt_shape *shape); /* -1 keeps a dim */
LDT_API ldt_tensor *ldt_expand_as(ldt_tensor *x, ldt_tensor *other);
LDT_API ldt_tensor *ldt_alias(ldt_tensor *x);

/* ---- reductions (dims: NULL or n == 0 reduces every dim) ----------------------------- */
LDT_API ldt_tensor *ldt_sum(ldt_tensor *x, const int *dims, int n, int keepdim);
LDT_API ldt_tensor *ldt_mean(ldt_tensor *x, const int *dims, int n, int keepdim);
LDT_API ldt_tensor *ldt_amax(ldt_tensor *x, const int *dims, int n, int keepdim);
LDT_API ldt_tensor *ldt_amin(ldt_tensor *x, const int *dims, int n, int keepdim);
LDT_API ldt_tensor *ldt_max(ldt_tensor *x, int dim, int keepdim); /* = amax over one dim */
LDT_API ldt_tensor *ldt_min(ldt_tensor *x, int dim, int keepdim);
LDT_API ldt_tensor *ldt_argmax(ldt_tensor *x, int dim, int keepdim); /* i64 */
LDT_API ldt_tensor *ldt_argmin(ldt_tensor *x, int dim, int keepdim);
/* The k largest (or smallest) along dim, sorted; indices are i64. Either out may be NULL. */
LDT_API ldt_status ldt_topk(ldt_tensor *x, int64_t k, int dim, int largest, ldt_tensor **values,
                            ldt_tensor **indices);

/* ---- random (single-device identical under any sharding) ---------------------------- */
LDT_API ldt_tensor *ldt_rand(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt);   /* U[0,1) */
LDT_API ldt_tensor *ldt_uniform(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double lo,
                                double hi);
LDT_API ldt_tensor *ldt_randn(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt);  /* N(0,1) */
LDT_API ldt_tensor *ldt_normal(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double mean,
                               double std);
LDT_API ldt_tensor *ldt_bernoulli(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, double p);
/* N(mean, std) truncated to [a, b] (raw units, as torch.nn.init.trunc_normal_), by the
 * inverse CDF: one draw per element, no rejection. Needs std > 0 and finite a < b. */
LDT_API ldt_tensor *ldt_trunc_normal(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt,
                                     double mean, double std, double a, double b);
/* Integers in [low, high), high - low <= 2^32; dt i32, i64, u8, or a float dtype holding them
 * exactly (|v| <= 2^24 for f32). */
LDT_API ldt_tensor *ldt_randint(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, int64_t low,
                                int64_t high);

/* ---- neural-network ops ------------------------------------------------------------- */
LDT_API ldt_tensor *ldt_softmax(ldt_tensor *x, int dim);
LDT_API ldt_tensor *ldt_log_softmax(ldt_tensor *x, int dim);
/* Normalises over the last `ndims` dims; w and b (shaped like those dims) may be NULL. */
LDT_API ldt_tensor *ldt_layer_norm(ldt_tensor *x, int ndims, ldt_tensor *w, ldt_tensor *b,
                                   double eps);
LDT_API ldt_tensor *ldt_rms_norm(ldt_tensor *x, int ndims, ldt_tensor *w, double eps);
/* logits [..., C], integer targets [...]: the mean loss over targets != ignore_index. */
LDT_API ldt_tensor *ldt_cross_entropy(ldt_tensor *logits, ldt_tensor *targets,
                                      int64_t ignore_index);
/* Inverted dropout on the random stream; train == 0 (or p == 0) is the identity. */
LDT_API ldt_tensor *ldt_dropout(ldt_tensor *x, double p, int train);
LDT_API ldt_tensor *ldt_embedding(ldt_tensor *weight, ldt_tensor *indices);
LDT_API ldt_tensor *ldt_one_hot(ldt_tensor *indices, int64_t classes);
LDT_API ldt_tensor *ldt_index_select(ldt_tensor *x, int dim, ldt_tensor *index);
LDT_API ldt_tensor *ldt_gather(ldt_tensor *x, int dim, ldt_tensor *index);
LDT_API ldt_tensor *ldt_scatter(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src);
LDT_API ldt_tensor *ldt_scatter_add(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src);
LDT_API ldt_tensor *ldt_index_add(ldt_tensor *x, int dim, ldt_tensor *index, ldt_tensor *src);
/* x[indices[0][j], ..., indices[k-1][j], ...] = values[j, ...] (or += with accumulate). */
LDT_API ldt_tensor *ldt_index_put(ldt_tensor *x, ldt_tensor *const *indices, int k,
                                  ldt_tensor *values, int accumulate);
/* softmax(q k^T * scale [+ causal mask]) v, dropout p on the weights; scale <= 0 means
 * 1/sqrt(E). */
LDT_API ldt_tensor *ldt_scaled_dot_product_attention(ldt_tensor *q, ldt_tensor *k, ldt_tensor *v,
                                                     int causal, double dropout_p, double scale);

/* ---- autodiff ------------------------------------------------------------------------- */
/* Records the backward pass of `loss` (one floating value) into the current trace: grads[i]
 * is the gradient of loss with respect to wrt[i] (a parameter, input or op result of this
 * trace), shaped like it; zeros where loss does not depend on it. Backward nodes are ordinary
 * nodes, planned and run like the forward. Ops without a rule yet are an error naming them. */
LDT_API ldt_status ldt_grad(ldt_tensor *loss, ldt_tensor *const *wrt, int n, ldt_tensor **grads);

/* Activation recomputation (checkpointing, as torch.utils.checkpoint and Megatron's
 * recomputation; docs/autodiff.md, "Recomputation"): the nodes recorded between
 * ldt_recompute_begin and ldt_recompute_end form a segment whose forward ldt_grad records
 * again (the same ops, attributes, pins and random stream positions: a dropout draws the very
 * mask) just before the segment's backward, so the backward reads the recomputed values and
 * the forward's intermediates die in the forward; only the segment's inputs are kept. Values
 * are unchanged. Segments do not nest; they end with the trace. Refused: begin while a segment
 * is open, end with none open, a NULL context. */
LDT_API ldt_status ldt_recompute_begin(ldt_ctx *ctx);
LDT_API ldt_status ldt_recompute_end(ldt_ctx *ctx);

/* ---- optimizers (graph ops inside the step) ------------------------------------------ */
typedef enum ldt_optim_kind { LDT_OPTIM_SGD, LDT_OPTIM_ADAMW } ldt_optim_kind;
typedef enum ldt_lr_schedule {
    LDT_LR_CONSTANT,
    LDT_LR_WARMUP_LINEAR, /* lr (t+1) / warmup for t < warmup, then lr */
    LDT_LR_COSINE         /* the warmup, then lr_min + (lr - lr_min)(1 + cos(pi p)) / 2 */
} ldt_lr_schedule;

typedef struct ldt_optim_config {
    ldt_optim_kind kind;
    double lr;
    double momentum;       /* sgd (0: none) */
    double beta1, beta2, eps; /* adamw */
    double weight_decay;   /* sgd: added to the gradient; adamw: decoupled */
    double clip_norm;      /* clip every gradient by the global norm to this (0: no clipping) */
    ldt_lr_schedule schedule;
    int64_t warmup_steps, total_steps; /* total_steps >= 1; from then on the rate stays */
    double lr_min;         /* cosine */
} ldt_optim_config;

typedef struct ldt_optim ldt_optim;
/* An optimizer for params (floating parameters of ctx): its state (momentum, Adam's moments)
 * as parameters "<name>.m", "<name>.v", a step counter "optim.step" and the schedule's rate
 * table, all persistent. f16/bf16 parameters get f32 masters ("<name>.master", copied from
 * their values now) and f32 states: the update runs in f32, the parameter takes its rounding
 * (mixed precision). */
LDT_API ldt_status ldt_optim_create(ldt_ctx *ctx, const ldt_optim_config *cfg,
                                    ldt_tensor *const *params, int n, ldt_optim **out);
LDT_API void ldt_optim_destroy(ldt_optim *o);
/* Records one update from grads (one per parameter, this trace): clipping, the rate read at
 * the step counter, the update; parameters, state and counter are assigned (ldt_assign). */
LDT_API ldt_status ldt_optim_step(ldt_optim *o, ldt_tensor *const *grads);
/* The schedule's rate at 0-based step t (the table's entries). */
LDT_API double ldt_optim_rate(const ldt_optim_config *cfg, int64_t t);
LDT_API ldt_tensor *ldt_optim_step_counter(const ldt_optim *o);
/* Parameter i's state: which 0 the momentum or first moment, 1 the second moment, 2 the f32
 * master of a half parameter (NULL when the optimizer keeps none). */
LDT_API ldt_tensor *ldt_optim_state(const ldt_optim *o, int i, int which);
/* ZeRO-style: pins every state tensor (momentum, Adam's moments) sharded on its dim 0 over
 * mesh dim `mesh_dim` (the data-parallel one), keeping the parameter's pins elsewhere; the
 * planner then reduce-scatters the gradients, updates the shards and gathers the
 * parameters. Parameters too small to split, or already split on dim 0, keep whole states. */
LDT_API ldt_status ldt_optim_shard_states(ldt_optim *o, int mesh_dim);
/* Data parallel over mesh dim `mesh_dim` (-1: off, the default): later steps take each gradient
 * as a Partial(sum) over it and reduce it explicitly to the placement the update reads (an
 * all_reduce, or a reduce_scatter under ZeRO), so the planner keeps the backward local to each
 * rank's batch and fusion buckets the reductions (docs/replay.md, "Gradient bucketing"). */
LDT_API ldt_status ldt_optim_sync_grads(ldt_optim *o, int mesh_dim);

/* ---- custom ops ---------------------------------------------------------------------- */
/* A custom op's shape rule: the output shape and dtype from the inputs'. Returns LDT_OK, or
 * an error status with a message written into msg (it becomes the op's error). */
typedef ldt_status (*ldt_custom_shape_fn)(int nin, const ldt_shape *in_shapes,
                                          const ldt_dtype *in_dtypes, void *user,
                                          ldt_shape *out_shape, ldt_dtype *out_dtype,
                                          char *msg, size_t msg_cap);
/* Its CPU kernel on contiguous row-major buffers. */
typedef ldt_status (*ldt_custom_cpu_fn)(int nin, const void *const *in,
                                        const ldt_shape *in_shapes, const ldt_dtype *in_dtypes,
                                        void *out, const ldt_shape *out_shape,
                                        ldt_dtype out_dtype, void *user);
/* Registers a custom op on ctx; *id is above the built-in op count. nin >= 0. */
LDT_API ldt_status ldt_custom_op_register(ldt_ctx *ctx, const char *name, int nin,
                                          ldt_custom_shape_fn shape_fn, ldt_custom_cpu_fn cpu_fn,
                                          void *user, int *id);
LDT_API ldt_tensor *ldt_custom(ldt_ctx *ctx, int id, ldt_tensor *const *inputs, int nin);

#ifdef __cplusplus
}
#endif
#endif
