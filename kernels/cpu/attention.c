/* CPU kernel of scaled dot-product attention: softmax(q k^T * scale [+ causal mask]) v, in
 * double, with dropout on the weights by their global index in [..., Lq, Lk] (single device:
 * the region of a sharded call is not supported yet and is refused). */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"

static double ld(ldt_dtype t, const void *p, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    default: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void st(ldt_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)p)[i] = (float)v; break;
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt__f32_to_f16((float)v); break;
    default: ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)v); break;
    }
}

ldt_status ldt__k_attention(const ldt__kcall *c) {
    const ldt__operand *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
    int n = q->shape.ndim, causal;
    int64_t B = 1, Lq, Lk, E, Ev;
    uint64_t seed, off;
    double p, scale, keep;
    double *w;
    if (c->nin != 3 || n < 2 || !ldt_dtype_is_float(q->dtype) || k->dtype != q->dtype ||
        v->dtype != q->dtype || c->out.dtype != q->dtype)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "scaled_dot_product_attention: expected q, k, v and output of one float dtype");
    if (c->region)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "scaled_dot_product_attention: sharded (region) calls are not supported yet");
    Lq = q->shape.dims[n - 2];
    E = q->shape.dims[n - 1];
    Lk = k->shape.dims[n - 2];
    Ev = v->shape.dims[n - 1];
    for (int d = 0; d < n - 2; d++) B *= q->shape.dims[d];
    seed = (uint64_t)c->attrs->i[0];
    off = (uint64_t)c->attrs->i[1];
    causal = (int)c->attrs->i[2];
    p = c->attrs->f[0];
    scale = c->attrs->f[1];
    keep = p < 1 ? 1.0 / (1.0 - p) : 0;
    w = malloc((size_t)(Lk ? Lk : 1) * sizeof *w);
    if (!w) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "scaled_dot_product_attention: out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Lq; i++) {
            double mx = -INFINITY, sum = 0;
            int64_t last = causal ? (i < Lk - 1 ? i : Lk - 1) : Lk - 1;
            for (int64_t j = 0; j <= last; j++) {
                double s = 0;
                for (int64_t e = 0; e < E; e++)
                    s += ld(q->dtype, q->data, (b * Lq + i) * E + e) *
                         ld(k->dtype, k->data, (b * Lk + j) * E + e);
                w[j] = s * scale;
                if (w[j] > mx) mx = w[j];
            }
            for (int64_t j = 0; j <= last; j++) sum += (w[j] = exp(w[j] - mx));
            for (int64_t j = 0; j <= last; j++) {
                w[j] /= sum;
                if (p > 0) w[j] = ldt__rand_bernoulli(seed, off, (b * Lq + i) * Lk + j, p) ? 0 : w[j] * keep;
            }
            for (int64_t e = 0; e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j <= last; j++) o += w[j] * ld(v->dtype, v->data, (b * Lk + j) * Ev + e);
                st(c->out.dtype, c->out.data, (b * Lq + i) * Ev + e, o);
            }
        }
    free(w);
    return LDT_OK;
}
