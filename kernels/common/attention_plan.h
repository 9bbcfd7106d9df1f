/* Host-side checks and plan of scaled_dot_product_attention, and the global batch index of a
 * sharded call's dropout, as inline functions for CPU and CUDA (kernels/cpu/attention.c,
 * kernels/cuda/attention.cu), so both accept the same calls and fail with the same messages.
 *
 *   ldt__at_plan p;
 *   LDT_CHECK(ldt__at_check(c, &p));   // arity, dtypes, shapes, p, scale, region
 *   // q [p.B, p.Lq, p.E], k [p.B, p.Lk, p.E], v [p.B, p.Lk, p.Ev] -> out [p.B, p.Lq, p.Ev]
 *
 * Valid C11 and C++ (nvcc compiles the .cu files as C++). */
#ifndef LDT_KERNELS_COMMON_ATTENTION_PLAN_H
#define LDT_KERNELS_COMMON_ATTENTION_PLAN_H

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
#include "kernels/common/nn_math.h" /* ldt__dropout_scale */

#define LDT__AT_NAME "scaled_dot_product_attention"

/* One call's sizes: q [B, Lq, E], k [B, Lk, E], v [B, Lk, Ev], out [B, Lq, Ev], B the product
 * of the batch dims. */
typedef struct ldt__at_plan {
    int64_t B, Lq, Lk, E, Ev;
    int causal;
    double scale, p, keep; /* keep = 1/(1-p), 0 for p = 1 */
    uint64_t seed, offset;
    int64_t base;      /* attrs i[3]: the weights' global index of element 0 (a pipeline's micro-batch) */
    const int64_t *gb; /* CPU: per local batch index its global one (a sharded call), or NULL */
    int sharded_dropout; /* dropout on a region: batches need their global index (below) */
} ldt__at_plan;

/* The keys query i sees: j < ldt__at_keys(i). torch's is_causal=True aligns the mask top-left
 * (j <= i) whatever Lq and Lk are; without the mask, all Lk. */
LDT_HD int64_t ldt__at_keys(int causal, int64_t Lk, int64_t i) {
    if (!causal) return Lk;
    return i + 1 < Lk ? i + 1 : Lk;
}

/* The batch dims of a region (the first nb dims): local dims, runs, global dims. */
typedef struct ldt__at_batches {
    int nb;
    int64_t ldims[LDT_MAX_DIMS], start[LDT_MAX_DIMS], len[LDT_MAX_DIMS], bstride[LDT_MAX_DIMS];
    int64_t gdims[LDT_MAX_DIMS];
    int64_t base; /* ldt__at_plan's base, for the CUDA kernels */
} ldt__at_batches;

static inline void ldt__at_batches_make(const ldt_region *r, const ldt_shape *global, int nb,
                                        ldt__at_batches *out) {
    memset(out, 0, sizeof *out);
    out->nb = nb;
    for (int d = 0; d < nb; d++) {
        out->ldims[d] = r->local_shape.dims[d];
        out->start[d] = r->runs[d].start;
        out->len[d] = r->runs[d].len;
        out->bstride[d] = r->runs[d].block_stride;
        out->gdims[d] = global->dims[d];
    }
}

/* Global flattened batch index of local batch lb. */
LDT_HD int64_t ldt__at_global_batch(const ldt__at_batches *r, int64_t lb) {
    int64_t rest = lb, g = 0, stride = 1;
    for (int d = r->nb - 1; d >= 0; d--) {
        int64_t loc = r->ldims[d] ? rest % r->ldims[d] : 0;
        int64_t gi = (loc / r->len[d]) * r->bstride[d] + r->start[d] + loc % r->len[d];
        rest = r->ldims[d] ? rest / r->ldims[d] : 0;
        g += gi * stride;
        stride *= r->gdims[d];
    }
    return g;
}

/* Dtypes, shapes and attributes, then the plan. A region (a sharded call) places the output
 * in the global tensor. Without dropout every output row depends only on local rows of q, k,
 * v. With dropout the mask is drawn by the weights' global index ((b * Lq + i) * Lk + j): the
 * region must hold whole Lq rows, and its batch dims give each local batch its global index. */
static inline ldt_status ldt__at_check(const ldt__kcall *c, ldt__at_plan *p) {
    if (c->op != LDT_OP_SDPA)
        LDT_FAIL(LDT_ERR_INTERNAL, "attention kernels: op %d (%s) is not " LDT__AT_NAME, c->op,
                 ldt__builtin_op_name(c->op));
    if (c->nin != 3 || !c->attrs || !c->in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, LDT__AT_NAME ": %d inputs%s; expected q, k, v and attributes",
                 c->nin, c->attrs ? "" : " and no attributes");
    for (int i = 0; i < 3; i++) LDT_CHECK(ldt__check_operand(LDT__AT_NAME, &c->in[i], i));
    LDT_CHECK(ldt__check_operand(LDT__AT_NAME, &c->out, -1));
    const ldt__operand *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
    ldt_dtype t = q->dtype;
    if (!ldt_dtype_is_float(t))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, LDT__AT_NAME ": dtype %s is not supported (f32, f64, f16, bf16)",
                 ldt_dtype_name(t));
    if (k->dtype != t || v->dtype != t || c->out.dtype != t)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, LDT__AT_NAME ": q, k, v and the output are %s %s %s %s; "
                 "expected one dtype", ldt_dtype_name(t), ldt_dtype_name(k->dtype),
                 ldt_dtype_name(v->dtype), ldt_dtype_name(c->out.dtype));
    int n = q->shape.ndim;
    int ok = n >= 2 && k->shape.ndim == n && v->shape.ndim == n && c->out.shape.ndim == n;
    for (int d = 0; ok && d < n - 2; d++)
        ok = k->shape.dims[d] == q->shape.dims[d] && v->shape.dims[d] == q->shape.dims[d] &&
             c->out.shape.dims[d] == q->shape.dims[d];
    ok = ok && k->shape.dims[n - 1] == q->shape.dims[n - 1] &&
         v->shape.dims[n - 2] == k->shape.dims[n - 2] &&
         c->out.shape.dims[n - 2] == q->shape.dims[n - 2] &&
         c->out.shape.dims[n - 1] == v->shape.dims[n - 1];
    if (!ok) {
        char qs[128], ks[128], vs[128], os[128];
        ldt_shape_format(&q->shape, qs, sizeof qs);
        ldt_shape_format(&k->shape, ks, sizeof ks);
        ldt_shape_format(&v->shape, vs, sizeof vs);
        ldt_shape_format(&c->out.shape, os, sizeof os);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 LDT__AT_NAME ": q %s, k %s, v %s, output %s; expected q [..., Lq, E], k [..., Lk, E], "
                 "v [..., Lk, Ev] with equal batch dims and output [..., Lq, Ev]",
                 qs, ks, vs, os);
    }
    memset(p, 0, sizeof *p);
    p->B = 1;
    for (int d = 0; d < n - 2; d++) p->B *= q->shape.dims[d];
    p->Lq = q->shape.dims[n - 2];
    p->E = q->shape.dims[n - 1];
    p->Lk = k->shape.dims[n - 2];
    p->Ev = v->shape.dims[n - 1];
    p->seed = (uint64_t)c->attrs->i[0];
    p->offset = (uint64_t)c->attrs->i[1];
    p->base = c->attrs->i[3];
    p->causal = c->attrs->i[2] != 0;
    p->p = c->attrs->f[0];
    p->scale = c->attrs->f[1];
    p->keep = ldt__dropout_scale(p->p);
    if (!(p->p >= 0.0 && p->p <= 1.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, LDT__AT_NAME ": dropout p = %g; expected 0 <= p <= 1", p->p);
    if (!isfinite(p->scale))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, LDT__AT_NAME ": scale %g; expected a finite number",
                 p->scale);
    if (c->region && p->p > 0.0) {
        const ldt_region *r = c->region;
        if (!c->global_shape || c->global_shape->ndim != n || r->ndim != n ||
            r->runs[n - 2].start != 0 || r->runs[n - 2].blocks != 1 ||
            r->runs[n - 2].len != c->global_shape->dims[n - 2])
            LDT_FAIL(LDT_ERR_UNSUPPORTED,
                     LDT__AT_NAME ": dropout on a shard needs whole query rows (the mask is drawn by "
                     "the weights' global index); the region splits Lq");
        p->sharded_dropout = 1;
    }
    return LDT_OK;
}

#endif
