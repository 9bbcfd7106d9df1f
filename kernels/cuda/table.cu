// The CUDA launcher of every built-in op, one row per op in core/ops.h order (NULL: no CUDA
// kernel yet), and the helpers the launchers share.
#include "kernels/common/elementwise_plan.h" /* ldt__ew_fail_dtype */
#include "kernels/cuda/common.cuh"

static const ldt__cuda_kernel_fn k_cuda[LDT_OP_COUNT] = {
    /* INPUT, PARAM, CONST, DATA: leaves, no kernel */ NULL, NULL, NULL, NULL,
    /* ADD..GE, WHERE */
    ldt__cuda_k_binary, ldt__cuda_k_binary, ldt__cuda_k_binary, ldt__cuda_k_binary,
    ldt__cuda_k_binary, ldt__cuda_k_binary, ldt__cuda_k_binary, ldt__cuda_k_binary,
    ldt__cuda_k_binary, ldt__cuda_k_binary, ldt__cuda_k_binary,
    /* ADD_SCALAR..POW_SCALAR */
    ldt__cuda_k_scalar, ldt__cuda_k_scalar, ldt__cuda_k_scalar, ldt__cuda_k_scalar,
    ldt__cuda_k_scalar, ldt__cuda_k_scalar, ldt__cuda_k_scalar,
    /* NEG..SILU, CAST */
    ldt__cuda_k_unary, ldt__cuda_k_unary, ldt__cuda_k_unary, ldt__cuda_k_unary,
    ldt__cuda_k_unary, ldt__cuda_k_unary, ldt__cuda_k_unary, ldt__cuda_k_unary,
    ldt__cuda_k_unary, ldt__cuda_k_unary,
    /* MATMUL, LINEAR */ ldt__cuda_k_matmul, ldt__cuda_k_matmul,
    /* RESHAPE, PERMUTE, SLICE, SELECT, CAT, EXPAND, ALIAS, REDISTRIBUTE */
    ldt__cuda_k_view, ldt__cuda_k_view, ldt__cuda_k_view, ldt__cuda_k_view,
    ldt__cuda_k_view, ldt__cuda_k_view, ldt__cuda_k_view, ldt__cuda_k_view,
    /* SUM, MEAN, AMAX, AMIN */
    ldt__cuda_k_reduce, ldt__cuda_k_reduce, ldt__cuda_k_reduce, ldt__cuda_k_reduce,
    /* ARGMAX, ARGMIN, TOPK_VALUES, TOPK_INDICES */
    ldt__cuda_k_argreduce, ldt__cuda_k_argreduce, ldt__cuda_k_argreduce, ldt__cuda_k_argreduce,
    /* RAND, RANDN, BERNOULLI, TRUNC_NORMAL, RANDINT */
    ldt__cuda_k_random, ldt__cuda_k_random, ldt__cuda_k_random, ldt__cuda_k_random,
    ldt__cuda_k_random,
    /* SOFTMAX, LOG_SOFTMAX, LAYER_NORM, RMS_NORM, CROSS_ENTROPY */
    ldt__cuda_k_nn, ldt__cuda_k_nn, ldt__cuda_k_nn, ldt__cuda_k_nn, ldt__cuda_k_nn,
    /* DROPOUT */ ldt__cuda_k_nn,
    /* EMBEDDING, ONE_HOT, INDEX_SELECT, GATHER, SCATTER, SCATTER_ADD, INDEX_ADD, INDEX_PUT */
    ldt__cuda_k_index, ldt__cuda_k_index, ldt__cuda_k_index, ldt__cuda_k_index,
    ldt__cuda_k_index, ldt__cuda_k_index, ldt__cuda_k_index, ldt__cuda_k_index,
    /* SDPA */ ldt__cuda_k_attention,
};
static_assert(sizeof k_cuda / sizeof k_cuda[0] == LDT_OP_COUNT, "one CUDA kernel row per op");
// Rows are positional (C++ has no designated array initializers): pin the anchors.
static_assert(LDT_OP_ADD == 4 && LDT_OP_ADD_SCALAR == 15 && LDT_OP_NEG == 22 &&
                  LDT_OP_MATMUL == 32 && LDT_OP_RESHAPE == 34 && LDT_OP_SUM == 42 &&
                  LDT_OP_ARGMAX == 46 && LDT_OP_RAND == 50 && LDT_OP_SOFTMAX == 55 &&
                  LDT_OP_DROPOUT == 60 && LDT_OP_EMBEDDING == 61 && LDT_OP_SDPA == 69,
              "the CUDA table's rows follow core/ops.h");

extern "C" ldt__cuda_kernel_fn ldt__cuda_kernel(int op) {
    return op >= 0 && op < LDT_OP_COUNT ? k_cuda[op] : NULL;
}

extern "C" ldt_status ldt__cuda_kernel_lookup(int op, ldt__cuda_kernel_fn *out) {
    *out = ldt__cuda_kernel(op);
    if (*out) return LDT_OK;
    if (op < 0 || op >= LDT_OP_COUNT)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "op %d: custom ops have no CUDA kernel yet (only CPU "
                 "functions can be registered)", op);
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: no CUDA kernel yet (docs/gpu.md lists the ops that have one)",
             ldt__builtin_op_name(op));
}

extern "C" const char *ldt__cuda_derr_text(int code) {
    switch (code) {
    case LDT__CUDA_DERR_NONE: return "no error";
    case LDT__CUDA_DERR_INT_DIV_ZERO: return "integer division by zero";
    case LDT__CUDA_DERR_TARGET_RANGE:
        return "a cross_entropy target out of range (expected 0..C-1 or the ignore index)";
    case LDT__CUDA_DERR_INDEX_RANGE:
        return "an index out of range in embedding, one_hot, index_select, gather, scatter, "
               "scatter_add, index_add or index_put (expected -n..n-1 for a dim of n)";
    default: return "unknown device error";
    }
}

ldt_status ldt__cuda_fail_dtype(const char *op, ldt_dtype t, unsigned mask) {
    return ldt__ew_fail_dtype(op, t, mask, " on CUDA");
}
