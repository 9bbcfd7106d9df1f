/* One price for an op's compute, shared by the strategy search (planner/plan.c) and the
 * modeled step (planner/schedule.c): its class, its FLOPs from its shapes, and the profile's
 * roofline (ldt_cost_op_seconds, docs/cost-model.md). */
#include "core/ops.h"
#include "planner/profiles.h"

ldt_op_class ldt__op_class(int op) {
    switch (op) {
    case LDT_OP_MATMUL:
    case LDT_OP_LINEAR:
    case LDT_OP_SDPA: return LDT_OPCLASS_MATMUL;
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM: return LDT_OPCLASS_NORM;
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX:
    case LDT_OP_CROSS_ENTROPY: return LDT_OPCLASS_SOFTMAX;
    case LDT_OP_SUM:
    case LDT_OP_MEAN:
    case LDT_OP_AMAX:
    case LDT_OP_AMIN:
    case LDT_OP_ARGMAX:
    case LDT_OP_ARGMIN:
    case LDT_OP_TOPK_VALUES:
    case LDT_OP_TOPK_INDICES: return LDT_OPCLASS_REDUCE;
    case LDT_OP_GELU:
    case LDT_OP_TANH: return LDT_OPCLASS_TRANSCENDENTAL;
    default: return LDT_OPCLASS_ELEMENTWISE;
    }
}

static double elems(const ldt_shape *s) {
    double n = 1;
    if (!s) return 0;
    for (int d = 0; d < s->ndim; d++) n *= (double)s->dims[d];
    return n;
}

double ldt__op_flops(int op, const ldt_shape *out, const ldt_shape *in0, const ldt_shape *in1) {
    switch (ldt__op_class(op)) {
    case LDT_OPCLASS_MATMUL:
        if (op == LDT_OP_SDPA && in0 && in1 && in0->ndim >= 2 && in1->ndim >= 2) {
            /* QK^T and PV: 2 * 2 * batch * Lq * Lk * d */
            double b = 1;
            for (int d = 0; d < in0->ndim - 2; d++) b *= (double)in0->dims[d];
            return 4 * b * (double)in0->dims[in0->ndim - 2] * (double)in1->dims[in1->ndim - 2] *
                   (double)in0->dims[in0->ndim - 1];
        }
        if (op != LDT_OP_SDPA && in0 && in1) /* 2 * output elements * contraction length */
            return 2 * elems(out) * (double)(in0->ndim ? in0->dims[in0->ndim - 1] : 1);
        return 0;
    case LDT_OPCLASS_NORM: return 8 * elems(in0); /* mean, variance, scale, shift */
    case LDT_OPCLASS_SOFTMAX: return 5 * elems(in0); /* max, exp, sum, divide */
    case LDT_OPCLASS_REDUCE: return elems(in0);
    default: return elems(out);
    }
}

double ldt__op_seconds(const ldt_cost_model *cm, int op, int dtype, double flops, double bytes,
                       int nranks) {
    return ldt_cost_op_seconds(cm, ldt__op_class(op), dtype, flops, bytes, nranks);
}
