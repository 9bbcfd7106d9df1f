/* The CPU kernel of every built-in op, one row per op in core/ops.h order. */
#include <stdlib.h>

#include "core/error.h"
#include "kernels/cpu/kernel.h"

static const ldt__kernel_fn k_cpu[LDT_OP_COUNT] = {
    [LDT_OP_INPUT] = NULL,
    [LDT_OP_PARAM] = NULL,
    [LDT_OP_CONST] = NULL,
    [LDT_OP_DATA] = NULL,
    [LDT_OP_ADD] = ldt__k_binary,
    [LDT_OP_SUB] = ldt__k_binary,
    [LDT_OP_MUL] = ldt__k_binary,
    [LDT_OP_DIV] = ldt__k_binary,
    [LDT_OP_EQ] = ldt__k_binary,
    [LDT_OP_NE] = ldt__k_binary,
    [LDT_OP_LT] = ldt__k_binary,
    [LDT_OP_LE] = ldt__k_binary,
    [LDT_OP_GT] = ldt__k_binary,
    [LDT_OP_GE] = ldt__k_binary,
    [LDT_OP_WHERE] = ldt__k_binary,
    [LDT_OP_ADD_SCALAR] = ldt__k_scalar,
    [LDT_OP_SUB_SCALAR] = ldt__k_scalar,
    [LDT_OP_RSUB_SCALAR] = ldt__k_scalar,
    [LDT_OP_MUL_SCALAR] = ldt__k_scalar,
    [LDT_OP_DIV_SCALAR] = ldt__k_scalar,
    [LDT_OP_RDIV_SCALAR] = ldt__k_scalar,
    [LDT_OP_POW_SCALAR] = ldt__k_scalar,
    [LDT_OP_NEG] = ldt__k_unary,
    [LDT_OP_EXP] = ldt__k_unary,
    [LDT_OP_LOG] = ldt__k_unary,
    [LDT_OP_SQRT] = ldt__k_unary,
    [LDT_OP_RSQRT] = ldt__k_unary,
    [LDT_OP_TANH] = ldt__k_unary,
    [LDT_OP_RELU] = ldt__k_unary,
    [LDT_OP_GELU] = ldt__k_unary,
    [LDT_OP_SILU] = ldt__k_unary,
    [LDT_OP_CAST] = ldt__k_unary,
    [LDT_OP_MATMUL] = ldt__k_matmul,
    [LDT_OP_LINEAR] = ldt__k_matmul,
    [LDT_OP_RESHAPE] = ldt__k_view,
    [LDT_OP_PERMUTE] = ldt__k_view,
    [LDT_OP_SLICE] = ldt__k_view,
    [LDT_OP_SELECT] = ldt__k_view,
    [LDT_OP_CAT] = ldt__k_view,
    [LDT_OP_EXPAND] = ldt__k_view,
    [LDT_OP_ALIAS] = ldt__k_view,
    [LDT_OP_REDISTRIBUTE] = ldt__k_view,
    [LDT_OP_SUM] = ldt__k_reduce,
    [LDT_OP_MEAN] = ldt__k_reduce,
    [LDT_OP_AMAX] = ldt__k_reduce,
    [LDT_OP_AMIN] = ldt__k_reduce,
    [LDT_OP_ARGMAX] = ldt__k_index_reduce,
    [LDT_OP_ARGMIN] = ldt__k_index_reduce,
    [LDT_OP_TOPK_VALUES] = ldt__k_index_reduce,
    [LDT_OP_TOPK_INDICES] = ldt__k_index_reduce,
    [LDT_OP_RAND] = ldt__k_random,
    [LDT_OP_RANDN] = ldt__k_random,
    [LDT_OP_BERNOULLI] = ldt__k_random,
    [LDT_OP_TRUNC_NORMAL] = ldt__k_random,
    [LDT_OP_RANDINT] = ldt__k_random,
    [LDT_OP_SOFTMAX] = ldt__k_nn,
    [LDT_OP_LOG_SOFTMAX] = ldt__k_nn,
    [LDT_OP_LAYER_NORM] = ldt__k_nn,
    [LDT_OP_RMS_NORM] = ldt__k_nn,
    [LDT_OP_CROSS_ENTROPY] = ldt__k_nn,
    [LDT_OP_DROPOUT] = ldt__k_nn,
    [LDT_OP_EMBEDDING] = ldt__k_index,
    [LDT_OP_ONE_HOT] = ldt__k_index,
    [LDT_OP_INDEX_SELECT] = ldt__k_index,
    [LDT_OP_GATHER] = ldt__k_index,
    [LDT_OP_SCATTER] = ldt__k_index,
    [LDT_OP_SCATTER_ADD] = ldt__k_index,
    [LDT_OP_INDEX_ADD] = ldt__k_index,
    [LDT_OP_INDEX_PUT] = ldt__k_index,
    [LDT_OP_SDPA] = ldt__k_attention,
};
_Static_assert(sizeof k_cpu / sizeof k_cpu[0] == LDT_OP_COUNT, "one CPU kernel row per op");

ldt_status ldt__check_operand(const char *op, const ldt__operand *x, int k) {
    int64_t n;
    ldt_status st;
    if ((unsigned)x->dtype >= (unsigned)LDT_DTYPE_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s %d has an invalid dtype (%d)", op,
                 k < 0 ? "output" : "input", k < 0 ? 0 : k, (int)x->dtype);
    st = ldt_shape_numel(&x->shape, &n);
    if (st != LDT_OK) return ldt__trace(ldt__error_prefix(st, "%s", op), __FILE__, __LINE__);
    if (n > 0 && !x->data)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s %d has %lld elements but no data", op,
                 k < 0 ? "output" : "input", k < 0 ? 0 : k, (long long)n);
    return LDT_OK;
}

ldt__kernel_fn ldt__cpu_kernel(int op) {
    return op >= 0 && op < LDT_OP_COUNT ? k_cpu[op] : NULL;
}

/* The binder of each family (kernels/cpu/kernel.h), by the family's kernel. */
static ldt__kernel_bind_fn binder_of(ldt__kernel_fn k) {
    static const struct {
        ldt__kernel_fn k;
        ldt__kernel_bind_fn b;
    } rows[] = {
        {ldt__k_binary, ldt__kb_binary},       {ldt__k_scalar, ldt__kb_scalar},
        {ldt__k_unary, ldt__kb_unary},         {ldt__k_view, ldt__kb_view},
        {ldt__k_matmul, ldt__kb_matmul},       {ldt__k_reduce, ldt__kb_reduce},
        {ldt__k_index_reduce, ldt__kb_index_reduce}, {ldt__k_random, ldt__kb_random},
        {ldt__k_nn, ldt__kb_nn},               {ldt__k_index, ldt__kb_index},
        {ldt__k_attention, ldt__kb_attention},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].k == k) return rows[i].b;
    return NULL;
}

ldt_status ldt__cpu_kernel_bind(ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    ldt__kernel_fn k;
    ldt__kernel_bind_fn b;
    *fn = NULL;
    *plan = NULL;
    c->plan = NULL;
    if (!(k = ldt__cpu_kernel(c->op)))
        LDT_FAIL(LDT_ERR_INTERNAL, "no CPU kernel for op %d", c->op);
    if (!(b = binder_of(k))) LDT_FAIL(LDT_ERR_INTERNAL, "no CPU kernel binder for op %d", c->op);
    LDT_CHECK(b(c, fn, plan));
    c->plan = *plan;
    return LDT_OK;
}

ldt_status ldt__kplan_alloc(const char *op, size_t bytes, void **plan) {
    if (!(*plan = calloc(1, bytes ? bytes : 1)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for a kernel plan of %zu bytes", op, bytes);
    return LDT_OK;
}
