/* Host-side checks of the nn family (softmax, log_softmax, layer_norm, rms_norm,
 * cross_entropy, dropout), as inline functions for CPU and CUDA (kernels/cpu/nn.c,
 * kernels/cuda/nn.cu), so both accept the same calls and fail with the same messages.
 *
 *   ldt__nn_plan p;
 *   LDT_CHECK(ldt__nn_check(c, &p));   // arity, operands, dtypes, shapes, dims
 *   // p.dim (softmax), p.k, p.w, p.b (norms: the last k dims, weight and bias or NULL)
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_NN_PLAN_H
#define LDT_KERNELS_COMMON_NN_PLAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

typedef struct ldt__nn_plan {
    int dim;                     /* softmax, log_softmax: the dim (0 for a 0-dim x) */
    int k;                       /* norms: the last k dims are normalised */
    const ldt__operand *w, *b;   /* norms: weight and bias, NULL where absent */
} ldt__nn_plan;

/* x is a float tensor and out has its dtype and the shape `want`. */
static inline ldt_status ldt__nn_check_x_out(const ldt__kcall *c, const ldt_shape *want) {
    const char *name = ldt__builtin_op_name(c->op);
    const ldt__operand *x = &c->in[0];
    if (!ldt_dtype_is_float(x->dtype))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f64, f16, bf16)", name,
                 ldt_dtype_name(x->dtype));
    if (c->out.dtype != x->dtype || !ldt_shape_equal(&c->out.shape, want)) {
        char xs[128], os[128], ws[128];
        ldt_shape_format(&x->shape, xs, sizeof xs);
        ldt_shape_format(&c->out.shape, os, sizeof os);
        ldt_shape_format(want, ws, sizeof ws);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: x is %s %s and the output %s %s; expected %s %s",
                 name, xs, ldt_dtype_name(x->dtype), os, ldt_dtype_name(c->out.dtype), ws,
                 ldt_dtype_name(x->dtype));
    }
    return LDT_OK;
}

static inline ldt_status ldt__nn_check_norm(const ldt__kcall *c, int *k, const ldt__operand **w,
                                const ldt__operand **b) {
    const char *name = ldt__builtin_op_name(c->op);
    const ldt__operand *x = &c->in[0];
    int has_w = c->attrs->i[1] != 0, has_b = c->attrs->i[2] != 0;
    char xs[128]; /* x's shape, formatted only for a message */
    *k = (int)c->attrs->i[0];
    if (c->attrs->i[0] < 1 || c->attrs->i[0] > x->shape.ndim) {
        ldt_shape_format(&x->shape, xs, sizeof xs);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: normalising the last %lld dims of x %s; expected 1 to %d",
                 name, (long long)c->attrs->i[0], xs, x->shape.ndim);
    }
    if (c->op == LDT_OP_RMS_NORM && has_b)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "rms_norm: has no bias (attrs i[2] = %lld)",
                 (long long)c->attrs->i[2]);
    if (c->nin != 1 + has_w + has_b)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs; expected %d (x%s%s)", name, c->nin,
                 1 + has_w + has_b, has_w ? ", weight" : "", has_b ? ", bias" : "");
    *w = has_w ? &c->in[1] : NULL;
    *b = has_b ? &c->in[1 + has_w] : NULL;
    for (int i = 1; i < c->nin; i++) {
        const ldt__operand *a = &c->in[i];
        int ok = a->dtype == x->dtype && a->shape.ndim == *k;
        for (int d = 0; ok && d < *k; d++)
            ok = a->shape.dims[d] == x->shape.dims[x->shape.ndim - *k + d];
        if (!ok) {
            char as[128];
            ldt_shape_format(&a->shape, as, sizeof as);
            ldt_shape_format(&x->shape, xs, sizeof xs);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: %s is %s %s; expected the last %d dims of x %s %s", name,
                     (i == 1 && has_w) ? "weight" : "bias", as, ldt_dtype_name(a->dtype), *k, xs,
                     ldt_dtype_name(x->dtype));
        }
    }
    return LDT_OK;
}

static inline ldt_status ldt__nn_check_cross_entropy(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0], *t = &c->in[1];
    int ok = x->shape.ndim >= 1 && t->shape.ndim == x->shape.ndim - 1;
    for (int d = 0; ok && d < t->shape.ndim; d++) ok = t->shape.dims[d] == x->shape.dims[d];
    if (t->dtype != LDT_I32 && t->dtype != LDT_I64)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "cross_entropy: targets of dtype %s are not supported (i32, i64)",
                 ldt_dtype_name(t->dtype));
    if (!ok) {
        char xs[128], ts[128];
        ldt_shape_format(&x->shape, xs, sizeof xs);
        ldt_shape_format(&t->shape, ts, sizeof ts);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cross_entropy: logits are %s and targets %s; expected logits [..., C] and "
                 "targets [...]",
                 xs, ts);
    }
    return LDT_OK;
}

/* The family's checks, then each op's shapes. */
static inline ldt_status ldt__nn_check(const ldt__kcall *c, ldt__nn_plan *p) {
    const char *name = ldt__builtin_op_name(c->op);
    int want_nin = c->op == LDT_OP_CROSS_ENTROPY ? 2 : 1;
    ldt_shape scalar = {0, {0}};
    p->dim = p->k = 0;
    p->w = p->b = NULL;
    if (c->op != LDT_OP_SOFTMAX && c->op != LDT_OP_LOG_SOFTMAX && c->op != LDT_OP_LAYER_NORM &&
        c->op != LDT_OP_RMS_NORM && c->op != LDT_OP_CROSS_ENTROPY && c->op != LDT_OP_DROPOUT)
        LDT_FAIL(LDT_ERR_INTERNAL, "nn kernels: op %d (%s) is not softmax..dropout", c->op, name);
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: no attributes", name);
    if (c->op == LDT_OP_LAYER_NORM || c->op == LDT_OP_RMS_NORM) {
        if (c->nin < 1 || c->nin > (c->op == LDT_OP_LAYER_NORM ? 3 : 2))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs; expected x, then the weight%s",
                     name, c->nin, c->op == LDT_OP_LAYER_NORM ? " and bias when present" : "");
    } else if (c->nin != want_nin)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs; expected %d", name, c->nin, want_nin);
    if (!c->in) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: inputs missing", name);
    for (int i = 0; i < c->nin; i++) LDT_CHECK(ldt__check_operand(name, &c->in[i], i));
    LDT_CHECK(ldt__check_operand(name, &c->out, -1));
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: {
        int64_t dim = c->attrs->i[0];
        int nd = c->in[0].shape.ndim;
        LDT_CHECK(ldt__nn_check_x_out(c, &c->in[0].shape));
        if (dim < 0 || dim >= (nd ? nd : 1)) {
            char xs[128];
            ldt_shape_format(&c->in[0].shape, xs, sizeof xs);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: dim %lld is out of range for x %s", name,
                     (long long)dim, xs);
        }
        p->dim = (int)dim;
        return LDT_OK;
    }
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM:
        LDT_CHECK(ldt__nn_check_x_out(c, &c->in[0].shape));
        return ldt__nn_check_norm(c, &p->k, &p->w, &p->b);
    case LDT_OP_CROSS_ENTROPY:
        LDT_CHECK(ldt__nn_check_x_out(c, &scalar));
        return ldt__nn_check_cross_entropy(c);
    default: /* LDT_OP_DROPOUT */
        return ldt__nn_check_x_out(c, &c->in[0].shape);
    }
}

#endif
