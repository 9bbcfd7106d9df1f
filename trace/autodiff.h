/* Internal: backward rules (trace/autodiff.c and the family files that add rules). */
#ifndef LDT_TRACE_AUTODIFF_H
#define LDT_TRACE_AUTODIFF_H

#include "trace/trace.h"

#define LDT__MAX_VJP_IN 16

/* A rule records, for node t whose output's gradient is g, each input's gradient into
 * gi[k] (left NULL for inputs without one), with ordinary op constructors. Errors stick on
 * the context as any op's do. */
typedef void (*ldt__vjp_fn)(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);

/* 1 when op has a rule (or has no gradient by nature). */
int ldt__has_vjp(int op);

/* A 0-dim constant 0 or 1 of dtype dt, made once per context; zeros shaped like x; g summed
 * back to `shape` after broadcasting. */
ldt_tensor *ldt__scalar_const(ldt_ctx *ctx, ldt_dtype dt, int one);
ldt_tensor *ldt__zeros_like(ldt_tensor *x);
ldt_tensor *ldt__unbroadcast(ldt_tensor *g, const ldt_shape *shape);
/* A constant with this shape, dtype and data, reused while the context holds one with the
 * same content (a few are kept): rules run every step and must not pile up constants. */
ldt_tensor *ldt__cached_constant(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, const void *data);

/* x with its gradient stopped: an alias node (attrs.i[0] = 1) that autodiff treats as a
 * constant, for values whose gradient contributions cancel (the max cross_entropy shifts its
 * rows by). */
ldt_tensor *ldt__stop_gradient(ldt_tensor *x);
/* 1 for a node made by ldt__stop_gradient (or ldt__mean_divisor, which stops it too). */
static inline int ldt__is_stop_gradient(const ldt_tensor *t) {
    return t->kind == LDT__NODE && t->op == LDT_OP_ALIAS && (t->attrs->i[0] == 1 || t->attrs->i[0] == 2);
}
/* x marked as the divisor of a mean loss (cross_entropy's count of valid targets), its
 * gradient stopped (a count has none): an alias node (attrs.i[0] = 2). ldt_grad of a loss div(a, c) with c so marked and no gradient path
 * to c gives the gradients of a divided by c, each as div(grad, c), so a data-parallel
 * synchronisation can reduce the unscaled gradient first and divide after (trace/optim.c):
 * c then needs no reduction of its own before the backward (docs/replay.md, "Gradient
 * bucketing"). */
ldt_tensor *ldt__mean_divisor(ldt_tensor *x);
/* 1 for a node made by ldt__mean_divisor. */
static inline int ldt__is_mean_divisor(const ldt_tensor *t) {
    return t->kind == LDT__NODE && t->op == LDT_OP_ALIAS && t->attrs->i[0] == 2;
}

/* Pins g, a gradient of pinned t made at or after node first_backward, to t's conjugate
 * layout (Shard and Replicate kept, Partial(sum) whole) unless g is pinned already; a leaf t
 * (a parameter) pins nothing unless `leaf` says how (autodiff.c). */
enum { LDT__PIN_NO_LEAF, LDT__PIN_AS_LEAF, LDT__PIN_LEAF_GRAD };
void ldt__pin_conjugate(const ldt_tensor *t, ldt_tensor *g, int64_t first_backward, int leaf);

/* The conjugate of t's pin (ldt__pin_conjugate's rule) into pl, one per mesh dim: 1, or 0
 * when t has none. */
int ldt__conjugate_of(const ldt_tensor *t, int leaf, ldt_placement *pl);

/* v [..., n] flattened to rows [R, n] (R the product of the leading dims), pinned as v's
 * rows are when v is pinned (a split of the leading dim or of the last stays one; a split of
 * another leading dim, the sequence under sequence parallelism, is gathered first: whole;
 * other placements pin nothing): a weight gradient's or a lookup gradient's operands then
 * stay where the forward and the output gradient are, which a profile with slow copies would
 * rather split and gather back, and a sequence-split input is gathered once (Megatron's
 * re-gather), not moved to row chunks and gathered again. */
ldt_tensor *ldt__rows_of(ldt_tensor *v, int64_t rows);

/* Pins gw, the gradient of parameter w (pinned) of node t (pinned), whose first `lead` dims
 * the parameter is broadcast over (a linear's or a norm's rows), to Megatron's layout: on a
 * mesh dim where t is split on such a dim (the batch, data parallel) and w is whole,
 * Partial(sum) (each rank's rows summed, reduced with the other gradients); elsewhere as w.
 * So a bias's or a norm's gradient is never gathered from the batch-sized values it sums.
 * Returns an unpinned alias of the pinned gw (free where the layouts agree), the gradient the
 * optimizer's data-parallel synchronisation lays out (it leaves pinned gradients alone); gw
 * itself when nothing was pinned (t or w unpinned, gw pinned already). */
ldt_tensor *ldt__param_grad(const ldt_tensor *t, const ldt_tensor *w, ldt_tensor *gw, int lead);

/* 1 when the rule running for t must give input k a gradient (others may be left NULL). */
static inline int ldt__vjp_needs(const ldt_tensor *t, int k) {
    return k >= 32 || ((t->ctx->vjp_need >> k) & 1u);
}

/* Rules of the nn and indexing families (trace/autodiff_nn.c). */
void ldt__r_softmax(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_norm(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_cross_entropy(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_dropout(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_index(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_topk(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_sdpa(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);
void ldt__r_index_put(ldt_tensor *t, ldt_tensor *g, ldt_tensor **gi);

#endif
