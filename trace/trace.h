/* Internal: the context, the trace and the tensor (node) bodies, and the recording helpers
 * every trace/ops_*.c file uses. */
#ifndef LDT_TRACE_TRACE_H
#define LDT_TRACE_TRACE_H

#include "core/arena.h"
#include "core/dtype.h"
#include "core/ops.h"
#include "ldt/trace.h"

typedef enum ldt__tensor_kind {
    LDT__NODE,      /* an op result, valid while its trace (gen) is current */
    LDT__PERSISTENT /* input, param, const or kept data: owned by the context */
} ldt__tensor_kind;

struct ldt_tensor {
    ldt_ctx *ctx;
    uint16_t op;    /* ldt_op, or a custom op id (>= LDT_OP_COUNT) */
    uint8_t dtype;
    uint8_t kind;   /* ldt__tensor_kind */
    int32_t nin;
    /* 32 bits each keep the node small: a trace of 2^31 nodes would not fit in memory, and a
     * handle 2^32 traces stale is not a mistake anyone makes */
    uint32_t gen;   /* NODE: its trace; PERSISTENT: the last trace that used it */
    int32_t id;     /* position in that trace's node list */
    /* Shared with an input when equal (most ops keep a shape), else a copy in the trace
     * arena; a persistent tensor's points at its own store. Sharing keeps nodes small:
     * recording a million-node trace is memory-bound. */
    const ldt_shape *shape;
    ldt__attrs *attrs; /* after the node for ops that have attributes, else the context's
                          all-zero no_attrs: most nodes need none, and a small node keeps
                          recording fast */
    ldt_placement *pin; /* NULL, or one placement per mesh dim */
    /* run time */
    void *data;     /* NODE: its value while the trace runs; PERSISTENT: its storage */
};

/* The nin inputs of a node, stored right after it in the trace arena (no pointer needed). */
#define LDT__IN(t) ((ldt_tensor **)((t) + 1))

/* Bytes of t's value (checked against overflow when t was made). */
static inline int64_t ldt__nbytes(const ldt_tensor *t) {
    int64_t n = (int64_t)ldt__dtype_size((ldt_dtype)t->dtype);
    for (int d = 0; d < t->shape->ndim; d++) n *= t->shape->dims[d];
    return n;
}

/* A persistent tensor: the node head plus what only persistent tensors need, kept out of
 * ldt_tensor so trace nodes stay small (recording 1M nodes is memory-bound). */
typedef struct ldt__persistent {
    struct ldt_tensor t;
    char *name;
    int bound;          /* INPUT: data has been bound */
    uint64_t version;   /* bumped whenever its data is written: compiled executables holding
                           a copy of it (a rank's shard of a parameter) reload when it moves */
    ldt_tensor *source; /* kept DATA: the node whose value it receives (current trace only) */
    ldt_placement pin_store[LDT_MAX_DIMS];
    ldt_shape shape_store;
    /* PARAM: its init recipe (ldt_param_init) */
    int has_init;
    ldt_init init;
    uint64_t init_seed, init_offset;
} ldt__persistent;

/* The persistent part of t; only for t->kind == LDT__PERSISTENT. */
#define LDT__P(tensor) ((ldt__persistent *)(tensor))
/* Its name, or NULL (any kind). */
#define LDT__NAME(tensor) ((tensor)->kind == LDT__PERSISTENT ? LDT__P(tensor)->name : NULL)

struct ldt_strategy_builder;

/* A registered custom op. */
typedef struct ldt__custom_op {
    char *name;
    int nin;
    ldt_custom_shape_fn shape_fn;
    ldt_custom_cpu_fn cpu_fn;
    void *user;
    /* sharding options (ldt_custom_op_set_strategy); NULL: only all-Replicate */
    void (*strategy_fn)(int nin, const ldt_shape *in_shapes, const ldt_shape *out_shape,
                        void *user, struct ldt_strategy_builder *b);
    void *strategy_user;
} ldt__custom_op;

struct ldt_ctx {
    ldt_mesh *mesh; /* owned copy */
    struct ldt_comm *world; /* process mode: this process's world (borrowed), else NULL */
    uint64_t seed, rng_offset;
    uint64_t trace_rng_base; /* rng_offset when the current trace started */
    ldt__attrs no_attrs;     /* all zero, never written: the attrs of nodes without any */
    /* the current trace */
    uint32_t gen;
    ldt__arena arenas[2]; /* alternate per trace: a stale handle of the last trace still reads
                             its own (expired) generation instead of a new node's */
    ldt__arena *arena;
    ldt_tensor **nodes;
    int64_t nnodes, cap_nodes;
    ldt_tensor **keeps; /* kept DATA tensors whose source is in the current trace */
    int64_t nkeeps, cap_keeps;
    /* persistent tensors */
    ldt_tensor **persist;
    int64_t npersist, cap_persist;
    /* custom ops, id = LDT_OP_COUNT + index */
    ldt__custom_op *custom;
    int ncustom;
    /* 0-dim constants 0 and 1 per dtype, made once (autodiff) */
    ldt_tensor *scalar_const[LDT_DTYPE_COUNT][2];
    /* constants backward rules make (causal masks, index lists), by content, made once */
    ldt_tensor *const_cache[16];
    uint64_t const_cache_key[16];
    int const_cache_next;
    /* while ldt_grad runs a rule: bit k set when input k needs a gradient (rules may skip
     * recording the others) */
    uint32_t vjp_need;
    /* recomputation segments of the current trace (ldt_recompute_begin/end): node id ranges
     * [rc_seg[2i], rc_seg[2i + 1]); rc_open: a segment is open since node rc_start */
    int64_t *rc_seg;
    int32_t rc_nseg, rc_cap;
    int32_t rc_open;
    int64_t rc_start;
    /* compiled executables (exec/cache.c), opaque here: trace never calls down */
    void *exec_cache;
    void (*exec_cache_free)(void *cache);
    /* user passes and bypass marks (planner/passes.c), opaque here for the same reason */
    void *passes;
    void (*passes_free)(void *passes);
    /* persistent tensors whose newest values an executable's ranks hold (assigned in place at
     * its last replay) while their host data is older: host_flush brings them home. Every
     * host reader or writer of persistent data calls ldt__host_sync first. */
    void *stale_exec;
    ldt_status (*host_flush)(ldt_ctx *ctx);
    /* the current trace's pipeline stages and schedule (trace/pipeline.c), or NULL */
    struct ldt__pp *pp;
    /* errors */
    ldt_status status; /* stuck on the current trace */
    char errmsg[1024];
};

static inline ldt_status ldt__host_sync(ldt_ctx *ctx) {
    return ctx && ctx->stale_exec && ctx->host_flush ? ctx->host_flush(ctx) : LDT_OK;
}

/* name and arity of a built-in op (arity -1: variadic) */
const char *ldt__op_name(const ldt_ctx *ctx, int op);

/* Records that an error happened in ctx: the first one sticks on the trace; the message is
 * copied from the thread's last error. Returns NULL so constructors can `return fail(...)`. */
ldt_tensor *ldt__trace_fail(ldt_ctx *ctx);
/* Sets the thread error to the formatted message and sticks it on ctx; returns NULL. */
ldt_tensor *ldt__op_error(ldt_ctx *ctx, ldt_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Checks an op's inputs (non-NULL, same context, not expired); returns the context or NULL
 * (with the error stuck where there is a context to stick it on). */
ldt_ctx *ldt__check_inputs(const char *op, ldt_tensor *const *in, int n);
/* Appends a node: op, inputs, output shape and dtype. Attributes are zero; the caller fills
 * them. Uses persistent inputs as leaves of this trace. NULL (and a stuck error) on failure. */
ldt_tensor *ldt__record(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                        const ldt_shape *shape, ldt_dtype dt);
/* The same for an op with attributes: t->attrs is its own, zeroed, for the caller to fill. */
ldt_tensor *ldt__record_a(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                          const ldt_shape *shape, ldt_dtype dt);
/* "[7,5] (S0,R)" for messages: the shape, and the pins when there are any. */
void ldt__describe(const ldt_tensor *t, char *buf, size_t cap);
/* Sticks "op: dim d is out of range for x [..] (expected ..)" on ctx; returns NULL. */
ldt_tensor *ldt__bad_dim(ldt_ctx *ctx, const char *op, int dim, const ldt_tensor *x);
/* Normalises dim against ndim (negative from the end); -1 if out of range. */
int ldt__norm_dim(int dim, int ndim);
/* Ends the current trace: op results expire, keeps are cleared, a new generation starts. */
void ldt__trace_end(ldt_ctx *ctx);
/* Drops the trace's pipeline stage tags and schedule (trace/pipeline.c). */
void ldt__pp_free(ldt_ctx *ctx);

#endif
