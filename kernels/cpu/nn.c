/* CPU kernels of the neural-network ops: softmax, log_softmax, layer_norm, rms_norm,
 * cross_entropy and dropout. Values are computed in double and rounded once to the output
 * dtype (f16/bf16 through f32); every reduction subtracts the row max or uses two passes. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"

/* ---- loads and stores ------------------------------------------------------------------ */

static double ld(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

static void st(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt__f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)v); break;
    default: break;
    }
}

static int64_t ld_index(ldt_dtype t, const void *p, int64_t i) {
    return t == LDT_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* softmax / log_softmax along dim: rows of n elements `inner` apart. */
static void softmax_kernel(const ldt__operand *x, const ldt__operand *y, int dim, int log_form) {
    int64_t outer = 1, n = x->shape.dims[dim], inner = 1;
    for (int d = 0; d < dim; d++) outer *= x->shape.dims[d];
    for (int d = dim + 1; d < x->shape.ndim; d++) inner *= x->shape.dims[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; j++) {
                double v = ld(x->dtype, x->data, base + j * inner);
                if (v > mx || v != v) mx = v;
            }
            for (int64_t j = 0; j < n; j++) sum += exp(ld(x->dtype, x->data, base + j * inner) - mx);
            for (int64_t j = 0; j < n; j++) {
                double z = ld(x->dtype, x->data, base + j * inner) - mx;
                st(y->dtype, y->data, base + j * inner, log_form ? z - log(sum) : exp(z) / sum);
            }
        }
}

/* layer_norm / rms_norm over rows of m elements (the last k dims). */
static void norm_kernel(const ldt__kcall *c, int rms) {
    const ldt__operand *x = &c->in[0];
    int k = (int)c->attrs->i[0], has_w = (int)c->attrs->i[1], has_b = !rms && c->attrs->i[2];
    const ldt__operand *w = has_w ? &c->in[1] : NULL, *b = has_b ? &c->in[1 + has_w] : NULL;
    double eps = c->attrs->f[0];
    int64_t m = 1, rows;
    for (int d = x->shape.ndim - k; d < x->shape.ndim; d++) m *= x->shape.dims[d];
    rows = m ? numel_of(&x->shape) / m : 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t base = r * m;
        double mean = 0, var = 0, inv;
        if (!rms) {
            for (int64_t j = 0; j < m; j++) mean += ld(x->dtype, x->data, base + j);
            mean /= (double)m;
        }
        /* second pass around the mean: stable where E[x^2] - E[x]^2 cancels */
        for (int64_t j = 0; j < m; j++) {
            double dv = ld(x->dtype, x->data, base + j) - mean;
            var += dv * dv;
        }
        var /= (double)m;
        inv = 1.0 / sqrt(var + eps);
        for (int64_t j = 0; j < m; j++) {
            double v = (ld(x->dtype, x->data, base + j) - mean) * inv;
            if (w) v *= ld(w->dtype, w->data, j);
            if (b) v += ld(b->dtype, b->data, j);
            st(c->out.dtype, c->out.data, base + j, v);
        }
    }
}

static ldt_status cross_entropy_kernel(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0], *t = &c->in[1];
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = numel_of(&t->shape), count = 0;
    int64_t ignore = c->attrs->i[0];
    double total = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t tg = ld_index(t->dtype, t->data, r), base = r * C;
        double mx = -INFINITY, sum = 0;
        if (tg == ignore) continue;
        if (tg < 0 || tg >= C)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cross_entropy: target %lld at row %lld is out of range for %lld classes",
                     (long long)tg, (long long)r, (long long)C);
        for (int64_t j = 0; j < C; j++) {
            double v = ld(x->dtype, x->data, base + j);
            if (v > mx || v != v) mx = v;
        }
        for (int64_t j = 0; j < C; j++) sum += exp(ld(x->dtype, x->data, base + j) - mx);
        total += log(sum) + mx - ld(x->dtype, x->data, base + tg);
        count++;
    }
    st(c->out.dtype, c->out.data, 0, count ? total / (double)count : NAN);
    return LDT_OK;
}

/* Global flat index of local element li (row-major local index) under the region. */
static int64_t global_index(const ldt_region *r, const ldt_shape *g, int64_t li) {
    int64_t gi = 0, stride = 1;
    for (int d = r->ndim - 1; d >= 0; d--) {
        int64_t i = li % r->local_shape.dims[d];
        li /= r->local_shape.dims[d];
        gi += ((i / r->runs[d].len) * r->runs[d].block_stride + r->runs[d].start +
               i % r->runs[d].len) *
              stride;
        stride *= g->dims[d];
    }
    return gi;
}

/* Inverted dropout: element j is dropped where the stream's bernoulli(p) at its global index
 * is 1, so a sharded run reproduces the single-device mask. */
static void dropout_kernel(const ldt__kcall *c) {
    const ldt__operand *x = &c->in[0];
    uint64_t seed = (uint64_t)c->attrs->i[0], off = (uint64_t)c->attrs->i[1];
    double p = c->attrs->f[0], keep = p < 1 ? 1.0 / (1.0 - p) : 0;
    int64_t n = numel_of(&x->shape);
    for (int64_t j = 0; j < n; j++) {
        int64_t gj = c->region ? global_index(c->region, c->global_shape, j) : j;
        int drop = ldt__rand_bernoulli(seed, off, gj, p);
        /* keep is applied in f32 for f32 data so kept values equal x * (1/(1-p)) in f32 */
        if (c->out.dtype == LDT_F64)
            st(c->out.dtype, c->out.data, j, drop ? 0.0 : ld(x->dtype, x->data, j) * keep);
        else
            st(c->out.dtype, c->out.data, j,
               drop ? 0.0 : (double)((float)ld(x->dtype, x->data, j) * (float)keep));
    }
}

/* ---- dispatch ------------------------------------------------------------------------------ */

ldt_status ldt__k_nn(const ldt__kcall *c) {
    const char *name = ldt__builtin_op_name(c->op);
    if (c->nin < 1 || !ldt_dtype_is_float(c->in[0].dtype) || c->in[0].dtype != c->out.dtype)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: input is %s and output %s, expected one float dtype",
                 name, c->nin ? ldt_dtype_name(c->in[0].dtype) : "missing",
                 ldt_dtype_name(c->out.dtype));
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: {
        int dim = (int)c->attrs->i[0];
        if (dim < 0 || dim >= c->in[0].shape.ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: dim %d out of range", name, dim);
        softmax_kernel(&c->in[0], &c->out, dim, c->op == LDT_OP_LOG_SOFTMAX);
        return LDT_OK;
    }
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM: {
        int k = (int)c->attrs->i[0];
        int want = 1 + (int)c->attrs->i[1] + (c->op == LDT_OP_LAYER_NORM ? (int)c->attrs->i[2] : 0);
        if (k < 1 || k > c->in[0].shape.ndim || c->nin != want)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs normalising %d dims of a %d-dim x",
                     name, c->nin, k, c->in[0].shape.ndim);
        for (int i = 1; i < c->nin; i++)
            if (c->in[i].dtype != c->in[0].dtype)
                LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s: affine parameter %d is %s, x is %s", name, i,
                         ldt_dtype_name(c->in[i].dtype), ldt_dtype_name(c->in[0].dtype));
        norm_kernel(c, c->op == LDT_OP_RMS_NORM);
        return LDT_OK;
    }
    case LDT_OP_CROSS_ENTROPY:
        if (c->nin != 2 || (c->in[1].dtype != LDT_I32 && c->in[1].dtype != LDT_I64) ||
            c->in[0].shape.ndim < 1)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cross_entropy: expected logits [..., C] and i32/i64 targets");
        return cross_entropy_kernel(c);
    case LDT_OP_DROPOUT:
        if (c->region && !c->global_shape)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: a region needs the global shape");
        dropout_kernel(c);
        return LDT_OK;
    default: LDT_FAIL(LDT_ERR_INTERNAL, "nn kernels: op %s is not theirs", name);
    }
}
