/* The one op enum. Each layer keeps one table indexed by it (trace: name, arity and shape
 * rule; kernels: CPU and CUDA kernels; later the planner's strategies and autodiff's
 * backward rules), each with a static_assert on its length (STYLE.md rule 6).
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
    X(GELU, "gelu", 1) /* attrs.i[0]: 0 erf form, 1 tanh form */                          \
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
    X(BERNOULLI, "bernoulli", 0)

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
