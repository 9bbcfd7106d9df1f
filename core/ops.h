/* The one op enum. Each layer keeps one table indexed by it (trace: name, arity and shape
 * rule; kernels: CPU and CUDA kernels; later the planner's strategies and autodiff's
 * backward rules), each with a static_assert on its length (docs/design.md, "Conventions").
 *
 * X(ENUM, "name", arity): arity is the number of tensor inputs, -1 for variadic (cat). */
#ifndef LDT_CORE_OPS_H
#define LDT_CORE_OPS_H

#include <stdint.h>

#include "ldt/core.h"

#define LDT_OP_MAP(X)                                                                      \
    /* leaves: data comes from outside the graph, no kernel */                             \
    X(INPUT, "input", 0)                                                                   \
    X(PARAM, "param", 0)                                                                   \
    X(CONST, "const", 0)                                                                   \
    X(DATA, "data", 0) /* a value kept from an earlier trace */                            \
    /* elementwise binary, broadcasting (numpy rules) */                                   \
    X(ADD, "add", 2)                                                                       \
    X(SUB, "sub", 2)                                                                       \
    X(MUL, "mul", 2)                                                                       \
    X(DIV, "div", 2)                                                                       \
    X(EQ, "eq", 2) /* comparisons give bool */                                             \
    X(NE, "ne", 2)                                                                         \
    X(LT, "lt", 2)                                                                         \
    X(LE, "le", 2)                                                                         \
    X(GT, "gt", 2)                                                                         \
    X(GE, "ge", 2)                                                                         \
    X(WHERE, "where", 3) /* where(cond bool, a, b), all three broadcast */                 \
    /* with a scalar: attrs.f[0] = s */                                                    \
    X(ADD_SCALAR, "add_scalar", 1)   /* x + s */                                           \
    X(SUB_SCALAR, "sub_scalar", 1)   /* x - s */                                           \
    X(RSUB_SCALAR, "rsub_scalar", 1) /* s - x */                                           \
    X(MUL_SCALAR, "mul_scalar", 1)   /* x * s */                                           \
    X(DIV_SCALAR, "div_scalar", 1)   /* x / s */                                           \
    X(RDIV_SCALAR, "rdiv_scalar", 1) /* s / x */                                           \
    X(POW_SCALAR, "pow_scalar", 1)   /* x ^ s */                                           \
    /* elementwise unary */                                                                \
    X(NEG, "neg", 1)                                                                       \
    X(EXP, "exp", 1)                                                                       \
    X(LOG, "log", 1)                                                                       \
    X(SQRT, "sqrt", 1)                                                                     \
    X(RSQRT, "rsqrt", 1)                                                                   \
    X(TANH, "tanh", 1)                                                                     \
    X(RELU, "relu", 1)                                                                     \
    X(GELU, "gelu", 1) /* attrs.i[0]: 0 erf form, 1 tanh form, 2 the erf form's derivative */\
    X(SILU, "silu", 1)                                                                     \
    X(CAST, "cast", 1) /* to the node's dtype */                                          \
    /* linear algebra */                                                                   \
    X(MATMUL, "matmul", 2) /* torch.matmul: 1-D, 2-D, batched with broadcast */           \
    X(LINEAR, "linear", -1) /* x @ w^T (+ b): 2 or 3 inputs, w is [out, in] */             \
    /* views and data movement (eager kernels copy into a contiguous output) */            \
    X(RESHAPE, "reshape", 1)     /* to the node's shape */                                 \
    X(PERMUTE, "permute", 1)     /* attrs.i[0..ndim): the source dim of each output dim */ \
    X(SLICE, "slice", 1)         /* attrs.i = {dim, start, end, step}; step >= 1 */        \
    X(SELECT, "select", 1)       /* attrs.i = {dim, index}: the dim is removed */          \
    X(CAT, "cat", -1)            /* attrs.i[0] = dim */                                    \
    X(EXPAND, "expand", 1)       /* broadcast to the node's shape */                       \
    X(ALIAS, "alias", 1)         /* the same value */                                      \
    X(REDISTRIBUTE, "redistribute", 1) /* to the node's pinned placements */               \
    /* reductions: attrs.i[0] = bit mask of reduced dims, attrs.i[1] = keepdim */          \
    X(SUM, "sum", 1)                                                                       \
    X(MEAN, "mean", 1)                                                                     \
    X(AMAX, "amax", 1)                                                                     \
    X(AMIN, "amin", 1)                                                                     \
    /* attrs.i = {dim, keepdim}; output i64 */                                             \
    X(ARGMAX, "argmax", 1)                                                                 \
    X(ARGMIN, "argmin", 1)                                                                 \
    /* attrs.i = {dim, k, largest, sorted}; values, and i64 indices */                     \
    X(TOPK_VALUES, "topk_values", 1)                                                       \
    X(TOPK_INDICES, "topk_indices", 1)                                                     \
    /* random, on the stream of kernels/common/philox.h: attrs.i = {seed, offset} as       \
     * int64 bit patterns; rand: f = {lo, hi}; randn: f = {mean, std}; bernoulli: f[0] = p */ \
    X(RAND, "rand", 0)                                                                     \
    X(RANDN, "randn", 0)                                                                   \
    X(BERNOULLI, "bernoulli", 0)                                                           \
    /* f = {mean, std}, i[2], i[3] = the bounds a, b as double bit patterns */             \
    X(TRUNC_NORMAL, "trunc_normal", 0)                                                     \
    X(RANDINT, "randint", 0) /* i[2], i[3] = low, high: integers in [low, high) */         \
    /* neural-network ops (kernels/cpu/nn.c) */                                            \
    X(SOFTMAX, "softmax", 1)         /* attrs.i[0] = dim */                                \
    X(LOG_SOFTMAX, "log_softmax", 1) /* attrs.i[0] = dim */                                \
    /* x, then the weight and bias when present: i = {k normalised trailing dims, has_w,    \
     * has_b}, f[0] = eps; rms_norm has no bias */                                         \
    X(LAYER_NORM, "layer_norm", -1)                                                        \
    X(RMS_NORM, "rms_norm", -1)                                                            \
    /* logits [..., C] (float), targets [...] (i32/i64): the mean over targets that are     \
     * not i[0] = ignore_index; 0-dim output; NaN when every target is ignored */          \
    X(CROSS_ENTROPY, "cross_entropy", 2)                                                   \
    /* i = {seed, offset}, f[0] = p: element j is dropped (0) where the stream's           \
     * bernoulli(p) at j is 1, else scaled by 1/(1-p) */                                    \
    X(DROPOUT, "dropout", 1)                                                               \
    /* indexing (kernels/cpu/index.c); index tensors are i32 or i64, negative counts from   \
     * the end, out of range is an error at run time */                                    \
    X(EMBEDDING, "embedding", 2)     /* weight [V, H], indices [...] -> [..., H] */        \
    X(ONE_HOT, "one_hot", 1)         /* i[0] = classes; -> [..., classes] i64 */            \
    X(INDEX_SELECT, "index_select", 2) /* x, index 1-D; i[0] = dim */                      \
    X(GATHER, "gather", 2)           /* x, index (same ndim); i[0] = dim; -> index's shape */ \
    X(SCATTER, "scatter", 3)         /* x, index, src; i[0] = dim; a copy of x updated */   \
    X(SCATTER_ADD, "scatter_add", 3) /* the same, accumulating */                          \
    X(INDEX_ADD, "index_add", 3)     /* x, index 1-D, src; i[0] = dim */                   \
    /* x, values, then i[1] index tensors (1-D, equal length L) for x's first i[1] dims;   \
     * values broadcast to [L, x's remaining dims]; i[0] = accumulate */                    \
    X(INDEX_PUT, "index_put", -1)                                                          \
    /* attention (kernels/cpu/attention.c): q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev]  \
     * -> [..., Lq, Ev]; i = {seed, offset, causal}, f = {dropout p, scale}; dropout masks   \
     * the attention weights [..., Lq, Lk] by global index, like DROPOUT */                  \
    X(SDPA, "scaled_dot_product_attention", 3)

typedef enum ldt_op {
#define LDT__OP_ENUM(e, name, arity) LDT_OP_##e,
    LDT_OP_MAP(LDT__OP_ENUM)
#undef LDT__OP_ENUM
    LDT_OP_COUNT /* custom ops get ids from here up, per context */
} ldt_op;

/* Name of a built-in op ("add"); "custom op" for other ids. */
const char *ldt__builtin_op_name(int op);
/* Tensor inputs of a built-in op; -1 for variadic ops and other ids. */
int ldt__op_arity(int op);

/* Attributes of a node: small integers (dims, masks, sizes, seeds) and scalars. */
#define LDT_ATTR_INTS (LDT_MAX_DIMS + 2)
typedef struct ldt__attrs {
    int64_t i[LDT_ATTR_INTS];
    double f[2];
} ldt__attrs;

#endif
