/* Host-side checks and the geometry of sum, mean, amax, amin over dims, and the compensated
 * add they use, as inline functions for CPU and CUDA (kernels/cpu/reduce.c,
 * kernels/cuda/reduce.cu), so both accept the same calls, fail with the same messages and
 * add the same way.
 *
 *   ldt__rd_geom g;
 *   LDT_CHECK(ldt__rd_check(c, &g));   // arity, mask, dtypes, output shape; empty amax
 *   // g.count inputs per output element, g.out_numel outputs
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_REDUCE_PLAN_H
#define LDT_KERNELS_COMMON_REDUCE_PLAN_H

#include <math.h>
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

/* The input seen as groups of adjacent dims that are all reduced or all kept (size-1 dims
 * dropped, neighbours of one kind merged), e.g. [A, B, C] reducing B is kept A, reduced B,
 * kept C. Every output element reads its inputs in increasing input order. */
typedef struct ldt__rd_geom {
    int n;
    int64_t size[LDT_MAX_DIMS];
    int red[LDT_MAX_DIMS];
    int64_t ostride[LDT_MAX_DIMS];      /* output stride of a kept group, 0 for a reduced one */
    int64_t in_numel, out_numel, count; /* count: inputs per output element */
} ldt__rd_geom;

static inline void ldt__rd_geom_build(const ldt_shape *s, uint64_t mask, ldt__rd_geom *g) {
    memset(g, 0, sizeof *g);
    g->in_numel = g->out_numel = g->count = 1;
    for (int d = 0; d < s->ndim; d++) {
        int64_t n = s->dims[d];
        int red = (int)((mask >> d) & 1u);
        g->in_numel *= n;
        if (red)
            g->count *= n;
        else
            g->out_numel *= n;
        if (n == 1) continue;
        if (g->n > 0 && g->red[g->n - 1] == red)
            g->size[g->n - 1] *= n;
        else {
            g->size[g->n] = n;
            g->red[g->n] = red;
            g->n++;
        }
    }
    if (g->n == 0) { /* every dim is 1: one kept element */
        g->size[0] = 1;
        g->n = 1;
    }
    int64_t st = 1;
    for (int k = g->n - 1; k >= 0; k--) {
        g->ostride[k] = g->red[k] ? 0 : st;
        if (!g->red[k]) st *= g->size[k];
    }
}

/* The call's checks (attrs.i[0] the dim mask, attrs.i[1] keepdim) and its geometry. An empty
 * reduced dim is fine for sum and mean (the identity, 0/0 = NaN for mean) and an error for
 * amax and amin, which have no value there. */
static inline ldt_status ldt__rd_check(const ldt__kcall *c, ldt__rd_geom *g) {
    const char *name = ldt__builtin_op_name(c->op);
    if (c->nin != 1 || !c->in || !c->attrs)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: takes 1 input and attributes", name);
    const ldt__operand *x = &c->in[0];
    ldt_dtype t = x->dtype, ot = c->out.dtype;
    if ((unsigned)t >= LDT_DTYPE_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: invalid input dtype %d", name, (int)t);
    int isf = ldt_dtype_is_float(t);
    uint64_t mask = (uint64_t)c->attrs->i[0];
    int keepdim = c->attrs->i[1] != 0;
    char sh[128]; /* x's shape, formatted only for a message */
#define LDT__RD_SH (ldt_shape_format(&x->shape, sh, sizeof sh), sh)
    if (x->shape.ndim < 64 && (mask >> x->shape.ndim) != 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: dim mask 0x%llx names dims beyond the %d of %s",
                 name, (unsigned long long)mask, x->shape.ndim, LDT__RD_SH);
    /* dtypes: integer sums give i64; mean is float only; amax/amin keep any dtype but bool */
    if (c->op == LDT_OP_MEAN && !isf)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "mean: dtype %s is not supported (float dtypes only)",
                 ldt_dtype_name(t));
    if ((c->op == LDT_OP_AMAX || c->op == LDT_OP_AMIN) && t == LDT_BOOL)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: dtype bool is not supported", name);
    ldt_dtype want_t = (c->op == LDT_OP_SUM && !isf) ? LDT_I64 : t;
    if (ot != want_t)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: output dtype is %s, expected %s for a %s input",
                 name, ldt_dtype_name(ot), ldt_dtype_name(want_t), ldt_dtype_name(t));
    ldt_shape want = {0, {0}};
    for (int d = 0; d < x->shape.ndim; d++) {
        if (!((mask >> d) & 1u))
            want.dims[want.ndim++] = x->shape.dims[d];
        else if (keepdim)
            want.dims[want.ndim++] = 1;
    }
    if (!ldt_shape_equal(&want, &c->out.shape)) {
        char w[128], o[128];
        ldt_shape_format(&want, w, sizeof w);
        ldt_shape_format(&c->out.shape, o, sizeof o);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: output shape is %s, expected %s for %s, mask 0x%llx", name, o, w, LDT__RD_SH,
                 (unsigned long long)mask);
    }
    ldt__rd_geom_build(&x->shape, mask, g);
    if (g->count == 0 && (c->op == LDT_OP_AMAX || c->op == LDT_OP_AMIN))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: reducing an empty dim of %s (mask 0x%llx) has no value; expected every "
                 "reduced dim to be non-empty",
                 name, LDT__RD_SH, (unsigned long long)mask);
    return LDT_OK;
#undef LDT__RD_SH
}

/* Neumaier's variant of Kahan summation: the compensation catches what the sum drops,
 * whichever of the two is larger. No product, so no contraction into an FMA can change it. */
LDT_HD void ldt__neumaier_add(double *s, double *comp, double x) {
    double t = *s + x;
    if (fabs(*s) >= fabs(x))
        *comp += (*s - t) + x;
    else
        *comp += (x - t) + *s;
    *s = t;
}

#endif
