/* Host-side checks and the broadcast plan of the elementwise ops, as inline functions for CPU
 * and CUDA (kernels/cpu/elementwise.c, kernels/cuda/elementwise.cu), so both accept the same
 * calls, broadcast the same way and fail with the same messages.
 *
 *   LDT_CHECK(ldt__ew_check_binary(c, op));   // arity, operands, dtypes of a, b, cond, out
 *   if (!((mask >> a->dtype) & 1u)) return ldt__ew_fail_dtype(op, a->dtype, mask, "");
 *   ldt__bc_plan plan;
 *   LDT_CHECK(ldt__bc_make(op, &c->out.shape, nin, c->in, names, &plan));
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_ELEMENTWISE_PLAN_H
#define LDT_KERNELS_COMMON_ELEMENTWISE_PLAN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif

/* Broadcasting (numpy rules, right-aligned). The plan gives each input a stride of 0 on the
 * dims it repeats, drops size-1 dims and merges dims that are contiguous for every operand,
 * so a same-shape op becomes one dim of numel elements and [N,1] + [1,M] becomes N x M. In
 * the last dim every input's stride is 0 or 1. */
typedef struct ldt__bc_plan {
    int nd;
    int64_t dims[LDT_MAX_DIMS];
    int64_t st[3][LDT_MAX_DIMS]; /* [input][dim]: element strides, 0 where repeated */
} ldt__bc_plan;

/* The plan of nin (<= 3) inputs broadcast to out; names[k] names input k in messages. */
static inline ldt_status ldt__bc_make(const char *op, const ldt_shape *out, int nin,
                                      const ldt__operand *in, const char *const *names,
                                      ldt__bc_plan *p) {
    int n = out->ndim;
    int64_t st[3][LDT_MAX_DIMS];
    char b1[192], b2[192];
    for (int k = 0; k < nin; k++) {
        const ldt_shape *s = &in[k].shape;
        int64_t stride = 1;
        if (s->ndim > n) {
            ldt_shape_format(s, b1, sizeof b1);
            ldt_shape_format(out, b2, sizeof b2);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s %s has more dims than the output %s", op,
                     names[k], b1, b2);
        }
        for (int d = n - 1; d >= 0; d--) {
            int sd = d - (n - s->ndim);
            int64_t sz = sd >= 0 ? s->dims[sd] : 1;
            if (sz != out->dims[d] && sz != 1) {
                ldt_shape_format(s, b1, sizeof b1);
                ldt_shape_format(out, b2, sizeof b2);
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "%s: %s %s does not broadcast to the output %s (dim %d is %lld, not 1 "
                         "or %lld)",
                         op, names[k], b1, b2, sd, (long long)sz, (long long)out->dims[d]);
            }
            st[k][d] = sz == 1 ? 0 : stride;
            stride *= sz;
        }
    }
    p->nd = 0;
    for (int d = 0; d < n; d++) {
        int last = p->nd - 1, merge = last >= 0;
        if (out->dims[d] == 1) continue;
        for (int k = 0; k < nin && merge; k++)
            merge = p->st[k][last] == st[k][d] * out->dims[d];
        if (merge) {
            p->dims[last] *= out->dims[d];
            for (int k = 0; k < nin; k++) p->st[k][last] = st[k][d];
        } else {
            p->dims[p->nd] = out->dims[d];
            for (int k = 0; k < nin; k++) p->st[k][p->nd] = st[k][d];
            p->nd++;
        }
    }
    return LDT_OK;
}

/* Arity, dtypes in range, valid shapes, data present where there are elements. */
static inline ldt_status ldt__ew_check_call(const ldt__kcall *c, const char *op, int nin) {
    if (c->nin != nin || (nin > 0 && !c->in))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expects %d inputs, got %d", op, nin, c->nin);
    for (int k = -1; k < nin; k++)
        LDT_CHECK(ldt__check_operand(op, k < 0 ? &c->out : &c->in[k], k));
    return LDT_OK;
}

/* "add: dtype bool is not supported (f32, f64, ...)", listing mask's dtypes (bit d: dtype
 * d); where: "" on CPU, " on CUDA". */
static inline ldt_status ldt__ew_fail_dtype(const char *op, ldt_dtype t, unsigned mask,
                                            const char *where) {
    char list[128];
    size_t pos = 0;
    list[0] = '\0';
    for (int d = 0; d < LDT_DTYPE_COUNT; d++)
        if ((mask >> d) & 1u)
            pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s%s", pos ? ", " : "",
                                    ldt_dtype_name((ldt_dtype)d));
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported%s (%s)", op, ldt_dtype_name(t),
             where, list);
}

static inline ldt_status ldt__ew_fail_same_shape(const char *op, const ldt__kcall *c) {
    char b1[192], b2[192];
    ldt_shape_format(&c->in[0].shape, b1, sizeof b1);
    ldt_shape_format(&c->out.shape, b2, sizeof b2);
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output shape %s differs from the input's %s", op, b2,
             b1);
}

/* add..ge, where: the op range, the call, a and b of one dtype, where's bool cond and out of
 * a's dtype, the others' out of a's dtype (bool for comparisons). The backend then checks
 * that it has code for a's dtype. */
static inline ldt_status ldt__ew_check_binary(const ldt__kcall *c, const char *op) {
    int is_where = c->op == LDT_OP_WHERE, is_cmp = c->op >= LDT_OP_EQ && c->op <= LDT_OP_GE;
    int nin = is_where ? 3 : 2;
    if (c->op < LDT_OP_ADD || c->op > LDT_OP_WHERE)
        LDT_FAIL(LDT_ERR_INTERNAL, "binary kernel: %s is not a binary op", op);
    LDT_CHECK(ldt__ew_check_call(c, op, nin));
    const ldt__operand *a = &c->in[nin - 2], *b = &c->in[nin - 1];
    if (a->dtype != b->dtype)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: a is %s but b is %s (cast one first)", op,
                 ldt_dtype_name(a->dtype), ldt_dtype_name(b->dtype));
    if (is_where) {
        if (c->in[0].dtype != LDT_BOOL)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "where: cond must be bool, got %s",
                     ldt_dtype_name(c->in[0].dtype));
        if (c->out.dtype != a->dtype)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "where: output is %s but a and b are %s",
                     ldt_dtype_name(c->out.dtype), ldt_dtype_name(a->dtype));
    } else {
        ldt_dtype want = is_cmp ? LDT_BOOL : a->dtype;
        if (c->out.dtype != want)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s, expected %s", op,
                     ldt_dtype_name(c->out.dtype), ldt_dtype_name(want));
    }
    return LDT_OK;
}

/* add_scalar..pow_scalar, before the backend's dtype check: the op range, the call, the
 * scalar (into *s), out of x's shape and dtype. */
static inline ldt_status ldt__ew_check_scalar(const ldt__kcall *c, const char *op, double *s) {
    if (c->op < LDT_OP_ADD_SCALAR || c->op > LDT_OP_POW_SCALAR)
        LDT_FAIL(LDT_ERR_INTERNAL, "scalar kernel: %s is not an op with a scalar", op);
    LDT_CHECK(ldt__ew_check_call(c, op, 1));
    const ldt__operand *x = &c->in[0];
    if (!c->attrs) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: attrs (the scalar) missing", op);
    *s = c->attrs->f[0];
    if (!ldt_shape_equal(&x->shape, &c->out.shape)) return ldt__ew_fail_same_shape(op, c);
    if (c->out.dtype != x->dtype)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output is %s but the input is %s", op,
                 ldt_dtype_name(c->out.dtype), ldt_dtype_name(x->dtype));
    return LDT_OK;
}

/* After the backend's dtype check: an integer x takes an int64 integer scalar, and no
 * division by a zero one. */
static inline ldt_status ldt__ew_check_scalar_value(const ldt__kcall *c, const char *op,
                                                    double s) {
    ldt_dtype t = c->in[0].dtype;
    if (!ldt_dtype_is_float(t) &&
        !(s == floor(s) && s >= -9223372036854775808.0 && s < 9223372036854775808.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: scalar %g is not an int64 integer, and the input is %s (cast it to a "
                 "float dtype first)",
                 op, s, ldt_dtype_name(t));
    if (!ldt_dtype_is_float(t) && c->op == LDT_OP_DIV_SCALAR && s == 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "div_scalar: integer division by zero (%s)",
                 ldt_dtype_name(t));
    return LDT_OK;
}

/* neg..silu, cast: the op range, the call, out of x's shape; x's element count into *n. */
static inline ldt_status ldt__ew_check_unary(const ldt__kcall *c, const char *op, int64_t *n) {
    if (c->op < LDT_OP_NEG || c->op > LDT_OP_CAST)
        LDT_FAIL(LDT_ERR_INTERNAL, "unary kernel: %s is not a unary op", op);
    LDT_CHECK(ldt__ew_check_call(c, op, 1));
    if (!ldt_shape_equal(&c->in[0].shape, &c->out.shape)) return ldt__ew_fail_same_shape(op, c);
    LDT_CHECK(ldt_shape_numel(&c->in[0].shape, n));
    return LDT_OK;
}

/* Past cast: out of x's dtype, and gelu's form (attrs.i[0]: 0 erf, 1 tanh, 2 the erf form's
 * derivative; 0 without attrs) into *form. */
static inline ldt_status ldt__ew_check_unary_math(const ldt__kcall *c, const char *op,
                                                  int *form) {
    const ldt__operand *x = &c->in[0];
    *form = 0;
    if (c->out.dtype != x->dtype)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: output is %s but the input is %s (only cast changes dtype)", op,
                 ldt_dtype_name(c->out.dtype), ldt_dtype_name(x->dtype));
    if (c->op == LDT_OP_GELU && c->attrs) {
        if (c->attrs->i[0] < 0 || c->attrs->i[0] > 2)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "gelu: attrs.i[0] must be 0 (erf form), 1 (tanh form) or 2 (the erf form's "
                     "derivative), got %lld",
                     (long long)c->attrs->i[0]);
        *form = (int)c->attrs->i[0];
    }
    return LDT_OK;
}

#endif
