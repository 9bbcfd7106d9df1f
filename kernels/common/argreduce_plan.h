/* Host-side checks and the order keys of argmax, argmin, topk_values, topk_indices, as inline
 * functions for CPU and CUDA (kernels/cpu/reduce.c, kernels/cuda/argreduce.cu), so both accept
 * the same calls, fail with the same messages and order values the same way.
 *
 *   ldt__ar_geom g;
 *   LDT_CHECK(ldt__ar_check(c, &g));    // arity, dtype, dim, k, output; empty argmax dim
 *   // input [g.O, g.R, g.I] with R the dim; g.k, g.largest (topk)
 *   uint64_t key = ldt__ar_key(t, src, i); // host and device: compares like the values
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_ARGREDUCE_PLAN_H
#define LDT_KERNELS_COMMON_ARGREDUCE_PLAN_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif
#include "core/error.h"
#include "kernels/cpu/kernel.h"
#ifdef __cplusplus
}
#endif
#include "core/half.h" /* LDT_HD */

/* Values become order keys, uint64 that compare like the values: floats by their bits (sign
 * flipped, negatives inverted), every NaN one key above +inf and -0 equal to +0 (they compare
 * equal, so a tie); integers with the sign bit flipped. One comparison then serves every
 * dtype, NaN is the largest value (torch's topk rule) and "first NaN wins" for argmax falls
 * out of "first maximum wins". */
#define LDT__AR_KEY_NAN UINT64_C(0xFFF8000000000000) /* the key of the canonical +NaN */

LDT_HD uint64_t ldt__ar_key_f64(double d) {
    if (d != d) return LDT__AR_KEY_NAN;
    if (d == 0.0) d = 0.0;
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return (b >> 63) ? ~b : b | (UINT64_C(1) << 63);
}

/* The key of element i of src (dtype t; bool has none: 0). */
LDT_HD uint64_t ldt__ar_key(ldt_dtype t, const void *src, int64_t i) {
    switch (t) {
    case LDT_F32: return ldt__ar_key_f64(((const float *)src)[i]);
    case LDT_F64: return ldt__ar_key_f64(((const double *)src)[i]);
    case LDT_F16: return ldt__ar_key_f64(ldt__f16_to_f32(((const uint16_t *)src)[i]));
    case LDT_BF16: return ldt__ar_key_f64(ldt__bf16_to_f32(((const uint16_t *)src)[i]));
    case LDT_I32: return (uint64_t)(int64_t)((const int32_t *)src)[i] ^ (UINT64_C(1) << 63);
    case LDT_I64: return (uint64_t)((const int64_t *)src)[i] ^ (UINT64_C(1) << 63);
    case LDT_U8: return ((const uint8_t *)src)[i];
    default: return 0;
    }
}

/* argmin as "first maximum" of a reversed key in which NaN is still the largest. */
LDT_HD uint64_t ldt__ar_key_for_min(uint64_t k, int isf) {
    return (isf && k == LDT__AR_KEY_NAN) ? UINT64_MAX : ~k;
}

typedef struct ldt__ar_geom {
    int64_t O, R, I;
    int dim;
    int64_t k;   /* topk: how many */
    int largest; /* topk: the largest (else the smallest) */
} ldt__ar_geom;

/* Checks dtype and dim, normalises the dim and builds [O, R, I]. A 0-dim input is one
 * element along dim 0 (or -1), as in torch. */
static inline ldt_status ldt__ar_geom_build(const ldt__kcall *c, int64_t dim, ldt__ar_geom *g) {
    const char *name = ldt__builtin_op_name(c->op);
    const ldt_shape *s = &c->in[0].shape;
    ldt_dtype t = c->in[0].dtype;
    if (t == LDT_BOOL || (unsigned)t >= LDT_DTYPE_COUNT)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype %s is not supported (numeric dtypes only)", name,
                 ldt_dtype_name(t));
    int nd = s->ndim > 0 ? s->ndim : 1;
    if (dim < -nd || dim >= nd) {
        char sh[128];
        ldt_shape_format(s, sh, sizeof sh);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: dim %lld is out of range for %s (expected [%d, %d))", name, (long long)dim,
                 sh, -nd, nd);
    }
    if (dim < 0) dim += nd;
    g->dim = (int)dim;
    g->O = g->I = 1;
    g->R = s->ndim > 0 ? s->dims[dim] : 1;
    for (int d = 0; d < s->ndim; d++) {
        if (d < dim) g->O *= s->dims[d];
        if (d > dim) g->I *= s->dims[d];
    }
    return LDT_OK;
}

static inline ldt_status ldt__ar_check_out(const ldt__kcall *c, const ldt_shape *want,
                                           ldt_dtype wt) {
    const char *name = ldt__builtin_op_name(c->op);
    if (c->out.dtype != wt)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output dtype is %s, expected %s", name,
                 ldt_dtype_name(c->out.dtype), ldt_dtype_name(wt));
    if (!ldt_shape_equal(want, &c->out.shape)) {
        char w[128], o[128], in[128];
        ldt_shape_format(want, w, sizeof w);
        ldt_shape_format(&c->out.shape, o, sizeof o);
        ldt_shape_format(&c->in[0].shape, in, sizeof in);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output shape is %s, expected %s for input %s", name,
                 o, w, in);
    }
    return LDT_OK;
}

/* argmax, argmin: attrs i[0] the dim, i[1] keepdim; an i64 output; a non-empty dim. */
static inline ldt_status ldt__ar_check_arg(const ldt__kcall *c, ldt__ar_geom *g) {
    const char *name = ldt__builtin_op_name(c->op);
    LDT_CHECK(ldt__ar_geom_build(c, c->attrs->i[0], g));
    const ldt_shape *s = &c->in[0].shape;
    ldt_shape want = {0, {0}};
    for (int d = 0; d < s->ndim; d++) {
        if (d != g->dim)
            want.dims[want.ndim++] = s->dims[d];
        else if (c->attrs->i[1])
            want.dims[want.ndim++] = 1;
    }
    LDT_CHECK(ldt__ar_check_out(c, &want, LDT_I64));
    if (g->R == 0) {
        char sh[128];
        ldt_shape_format(s, sh, sizeof sh);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: reducing an empty dim %d of %s; expected it non-empty", name, g->dim, sh);
    }
    return LDT_OK;
}

/* topk_values, topk_indices: attrs i[0] the dim, i[1] k, i[2] largest; the output is the
 * input with k along the dim (values in its dtype, indices i64). */
static inline ldt_status ldt__ar_check_topk(const ldt__kcall *c, ldt__ar_geom *g) {
    const char *name = ldt__builtin_op_name(c->op);
    LDT_CHECK(ldt__ar_geom_build(c, c->attrs->i[0], g));
    int64_t k = c->attrs->i[1];
    const ldt_shape *s = &c->in[0].shape;
    g->k = k;
    g->largest = c->attrs->i[2] != 0;
    if (k < 0 || k > g->R || (s->ndim == 0 && k != 1)) {
        char sh[128];
        ldt_shape_format(s, sh, sizeof sh);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: k = %lld is out of range for dim %d of %s (expected 0..%lld)", name,
                 (long long)k, g->dim, sh, (long long)g->R);
    }
    ldt_shape want = *s;
    if (s->ndim > 0) want.dims[g->dim] = k;
    return ldt__ar_check_out(c, &want, c->op == LDT_OP_TOPK_VALUES ? c->in[0].dtype : LDT_I64);
}

/* The family's checks, by op. */
static inline ldt_status ldt__ar_check(const ldt__kcall *c, ldt__ar_geom *g) {
    const char *name = ldt__builtin_op_name(c->op);
    g->k = 0;
    g->largest = 0;
    if (c->op != LDT_OP_ARGMAX && c->op != LDT_OP_ARGMIN && c->op != LDT_OP_TOPK_VALUES &&
        c->op != LDT_OP_TOPK_INDICES)
        LDT_FAIL(LDT_ERR_INTERNAL, "index reduce kernels: op %d is not argmax, argmin or topk",
                 c->op);
    if (c->nin != 1 || !c->in || !c->attrs)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: takes 1 input and attributes", name);
    if (c->op == LDT_OP_ARGMAX || c->op == LDT_OP_ARGMIN) return ldt__ar_check_arg(c, g);
    return ldt__ar_check_topk(c, g);
}

#endif
