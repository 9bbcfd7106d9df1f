/* CPU kernels of softmax, log_softmax, layer_norm, rms_norm, cross_entropy and dropout. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/nn_math.h"
#include "kernels/common/nn_plan.h"
#include "kernels/common/philox.h"
#include "kernels/common/random_plan.h" /* ldt__region_check */
#include "kernels/cpu/kernel.h"

/* Mask bytes made per step of dropout: the stream is filled a chunk at a time. */
#define NN_CHUNK 256

static const char *nn_name(int op) { return ldt__builtin_op_name(op); }

static int64_t nn_numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Rows in and out. A row is n elements `stride` apart from `base`. Rows of f32, f16 and bf16
 * are computed in f32 (the half types widen exactly), rows of f64 in f64.
 */
static void load_row_f32(ldt_dtype t, const void *src, int64_t base, int64_t stride, int64_t n,
                         float *dst) {
    switch (t) {
    case LDT_F32: {
        const float *s = (const float *)src + base;
        if (stride == 1)
            memcpy(dst, s, (size_t)n * sizeof(float));
        else
            for (int64_t j = 0; j < n; j++) dst[j] = s[j * stride];
    } break;
    case LDT_F16: {
        const uint16_t *s = (const uint16_t *)src + base;
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__f16_to_f32(s[j * stride]);
    } break;
    case LDT_BF16: {
        const uint16_t *s = (const uint16_t *)src + base;
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__bf16_to_f32(s[j * stride]);
    } break;
    default: break; /* the dispatch lets only float dtypes in */
    }
}

static void load_row_f64(const void *src, int64_t base, int64_t stride, int64_t n, double *dst) {
    const double *s = (const double *)src + base;
    if (stride == 1)
        memcpy(dst, s, (size_t)n * sizeof(double));
    else
        for (int64_t j = 0; j < n; j++) dst[j] = s[j * stride];
}

/* f32 values out: f32 as is, the half types rounded once from f32. */
static void store_row_f32(ldt_dtype t, void *dst, int64_t base, int64_t stride, int64_t n,
                          const float *src) {
    switch (t) {
    case LDT_F32: {
        float *d = (float *)dst + base;
        if (stride == 1)
            memcpy(d, src, (size_t)n * sizeof(float));
        else
            for (int64_t j = 0; j < n; j++) d[j * stride] = src[j];
    } break;
    case LDT_F16: {
        uint16_t *d = (uint16_t *)dst + base;
        for (int64_t j = 0; j < n; j++) d[j * stride] = ldt__f32_to_f16(src[j]);
    } break;
    case LDT_BF16: {
        uint16_t *d = (uint16_t *)dst + base;
        for (int64_t j = 0; j < n; j++) d[j * stride] = ldt__f32_to_bf16(src[j]);
    } break;
    default: break;
    }
}

static void store_row_f64(void *dst, int64_t base, int64_t stride, int64_t n, const double *src) {
    double *d = (double *)dst + base;
    if (stride == 1)
        memcpy(d, src, (size_t)n * sizeof(double));
    else
        for (int64_t j = 0; j < n; j++) d[j * stride] = src[j];
}

/* One double value out, rounded once to the dtype. */
static void store_one(ldt_dtype t, void *dst, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)dst)[i] = (float)v; break;
    case LDT_F64: ((double *)dst)[i] = v; break;
    case LDT_F16: ((uint16_t *)dst)[i] = ldt__f64_to_f16_once(v); break;
    case LDT_BF16: ((uint16_t *)dst)[i] = ldt__f64_to_bf16_once(v); break;
    default: break;
    }
}

/* m values of a norm's weight or bias as double, or `absent` each where there is none. */
static void load_param(ldt_dtype t, const ldt__operand *p, int64_t m, double absent, double *dst) {
    for (int64_t j = 0; j < m; j++) {
        if (!p)
            dst[j] = absent;
        else if (t == LDT_F64)
            dst[j] = ((const double *)p->data)[j];
        else if (t == LDT_F32)
            dst[j] = ((const float *)p->data)[j];
        else if (t == LDT_F16)
            dst[j] = ldt__f16_to_f32(((const uint16_t *)p->data)[j]);
        else
            dst[j] = ldt__bf16_to_f32(((const uint16_t *)p->data)[j]);
    }
}

/* A row buffer of n elements of the compute type (f64 for f64, else f32). */
static void *row_alloc(const char *name, ldt_dtype t, int64_t n, ldt_status *st) {
    size_t esz = t == LDT_F64 ? sizeof(double) : sizeof(float);
    void *p = malloc((size_t)(n > 0 ? n : 1) * esz);
    *st = p ? LDT_OK
            : ldt__trace(ldt__error(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for a row of %lld", name,
                                    (long long)n),
                         __FILE__, __LINE__);
    return p;
}

/* A row buffer given by a bound plan (given), or one allocated here; row_put frees only the
 * latter. */
static void *row_get(void *given, const char *name, ldt_dtype t, int64_t n, ldt_status *st) {
    if (given) {
        *st = LDT_OK;
        return given;
    }
    return row_alloc(name, t, n, st);
}

static void row_put(void *given, void *p) {
    if (p != given) free(p);
}

/* ---------------------------------------------------------------------------------------
 * softmax, log_softmax along dim: x is [outer, n, inner], each (outer, inner) pair a row of n
 * elements `inner` apart. A 0-dim x is one row of one element.
 */
static ldt_status softmax_kernel(const ldt__kcall *c, int dim, void *given) {
    const ldt__operand *x = &c->in[0];
    ldt_dtype t = x->dtype;
    int log_form = c->op == LDT_OP_LOG_SOFTMAX;
    int64_t outer = 1, n = x->shape.ndim ? x->shape.dims[dim] : 1, inner = 1;
    ldt_status st;
    for (int d = 0; d < dim; d++) outer *= x->shape.dims[d];
    for (int d = dim + 1; d < x->shape.ndim; d++) inner *= x->shape.dims[d];
    if (outer * n * inner == 0) return LDT_OK;
    void *row = row_get(given, nn_name(c->op), t, n, &st);
    if (!row) return st;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            if (t == LDT_F64) {
                double *r = row;
                load_row_f64(x->data, base, inner, n, r);
                if (log_form)
                    ldt__log_softmax_row_f64(r, n);
                else
                    ldt__softmax_row_f64(r, n);
                store_row_f64(c->out.data, base, inner, n, r);
            } else {
                float *r = row;
                load_row_f32(t, x->data, base, inner, n, r);
                if (log_form)
                    ldt__log_softmax_row_f32(r, n);
                else
                    ldt__softmax_row_f32(r, n);
                store_row_f32(t, c->out.data, base, inner, n, r);
            }
        }
    row_put(given, row);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * layer_norm, rms_norm over the last k dims: x is [rows, m]; the weight and bias are [m].
 * Statistics in double (ldt__norm_stats_*); each output (x - mean) * rstd * w + b is formed
 * in double and rounded once.
 */
static ldt_status norm_kernel(const ldt__kcall *c, int k, const ldt__operand *w,
                              const ldt__operand *b, void *given, double *given_wb) {
    const ldt__operand *x = &c->in[0];
    ldt_dtype t = x->dtype;
    int center = c->op == LDT_OP_LAYER_NORM;
    double eps = c->attrs->f[0];
    int64_t m = 1, rows, total = nn_numel(&x->shape);
    ldt_status st = LDT_OK;
    for (int d = x->shape.ndim - k; d < x->shape.ndim; d++) m *= x->shape.dims[d];
    if (total == 0) return LDT_OK;
    rows = total / m;
    void *row = row_get(given, nn_name(c->op), t, m, &st);
    double *wb = !row ? NULL : given_wb ? given_wb : malloc((size_t)m * 2 * sizeof(double));
    if (!wb) {
        row_put(given, row);
        if (st != LDT_OK) return st;
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for the weight and bias of %lld",
                 nn_name(c->op), (long long)m);
    }
    /* the affine parameters once, as double: w (1 when absent), then b (0 when absent) */
    load_param(t, w, m, 1.0, wb);
    load_param(t, b, m, 0.0, wb + m);
    for (int64_t r = 0; r < rows; r++) {
        double mean, rstd;
        if (t == LDT_F64) {
            double *xr = row;
            load_row_f64(x->data, r * m, 1, m, xr);
            ldt__norm_stats_f64(xr, m, center, eps, &mean, &rstd);
            for (int64_t j = 0; j < m; j++)
                store_one(t, c->out.data, r * m + j, (xr[j] - mean) * rstd * wb[j] + wb[m + j]);
        } else {
            float *xr = row;
            load_row_f32(t, x->data, r * m, 1, m, xr);
            ldt__norm_stats_f32(xr, m, center, eps, &mean, &rstd);
            for (int64_t j = 0; j < m; j++)
                store_one(t, c->out.data, r * m + j,
                          ((double)xr[j] - mean) * rstd * wb[j] + wb[m + j]);
        }
    }
    row_put(given, row);
    if (wb != given_wb) free(wb);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * cross_entropy: logits [rows, C], targets [rows]; the mean of -log_softmax(row)[target] over
 * the rows whose target is not the ignore index, in double, rounded once; NaN with no such
 * row (0 / 0, as torch gives).
 */
static ldt_status cross_entropy_kernel(const ldt__kcall *c, void *given) {
    const ldt__operand *x = &c->in[0], *tg = &c->in[1];
    ldt_dtype t = x->dtype;
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = nn_numel(&tg->shape), used = 0;
    int64_t ignore = c->attrs->i[0];
    double total = 0.0;
    ldt_status st;
    void *row = row_get(given, "cross_entropy", t, C, &st);
    if (!row) return st;
    for (int64_t r = 0; r < rows; r++) {
        int64_t k = tg->dtype == LDT_I32 ? ((const int32_t *)tg->data)[r]
                                         : ((const int64_t *)tg->data)[r];
        if (k == ignore) continue;
        if (k < 0 || k >= C) {
            row_put(given, row);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cross_entropy: target %lld at row %lld is out of range for %lld classes "
                     "(expected 0..%lld or the ignore index %lld)",
                     (long long)k, (long long)r, (long long)C, (long long)C - 1, (long long)ignore);
        }
        if (t == LDT_F64) {
            load_row_f64(x->data, r * C, 1, C, row);
            total += ldt__cross_entropy_row_f64(row, C, k);
        } else {
            load_row_f32(t, x->data, r * C, 1, C, row);
            total += ldt__cross_entropy_row_f32(row, C, k);
        }
        used++;
    }
    row_put(given, row);
    store_one(c->out.dtype, c->out.data, 0, used ? total / (double)used : NAN);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * dropout: element with global index g is 0 where the stream's bernoulli(p) at g is 1, else
 * x * (1/(1-p)) with the factor in the compute type ((float)(1/(1-p)) for f32 and the half
 * types, whose product is rounded once to the half). Dropped elements are +0 whatever x is.
 */
typedef struct dp_params {
    ldt_dtype t;
    const void *x;
    void *y;
    uint64_t seed, offset;
    int64_t base; /* attrs i[3]: added to every global index (a pipeline's micro-batch) */
    double p;
} dp_params;

/* n local elements from li whose global indices are g0, g0 + 1, ... */
static void dropout_run(const dp_params *p, int64_t li, int64_t g0, int64_t n) {
    uint8_t mask[NN_CHUNK];
    double sd = ldt__dropout_scale(p->p);
    float sf = (float)sd;
    for (int64_t k0 = 0; k0 < n; k0 += NN_CHUNK) {
        int64_t len = n - k0 < NN_CHUNK ? n - k0 : NN_CHUNK, at = li + k0;
        ldt__rand_fill_bernoulli_u8(mask, p->seed, p->offset, p->base + g0 + k0, len, p->p);
        switch (p->t) {
        case LDT_F32: {
            const float *x = (const float *)p->x + at;
            float *y = (float *)p->y + at;
            for (int64_t j = 0; j < len; j++) y[j] = mask[j] ? 0.0f : x[j] * sf;
        } break;
        case LDT_F64: {
            const double *x = (const double *)p->x + at;
            double *y = (double *)p->y + at;
            for (int64_t j = 0; j < len; j++) y[j] = mask[j] ? 0.0 : x[j] * sd;
        } break;
        case LDT_F16: {
            const uint16_t *x = (const uint16_t *)p->x + at;
            uint16_t *y = (uint16_t *)p->y + at;
            for (int64_t j = 0; j < len; j++)
                y[j] = mask[j] ? 0 : ldt__f32_to_f16(ldt__f16_to_f32(x[j]) * sf);
        } break;
        case LDT_BF16: {
            const uint16_t *x = (const uint16_t *)p->x + at;
            uint16_t *y = (uint16_t *)p->y + at;
            for (int64_t j = 0; j < len; j++)
                y[j] = mask[j] ? 0 : ldt__f32_to_bf16(ldt__bf16_to_f32(x[j]) * sf);
        } break;
        default: break;
        }
    }
}

/* A shard: along dim d local index i is global (i / len) * block_stride + start + i % len
 * (include/ldt/core.h), so each run of `len` local elements on the last dim is `len`
 * consecutive global elements (as kernels/cpu/random.c walks it). */
static void dropout_region(const dp_params *p, const ldt_region *r, const ldt_shape *gs) {
    int nd = r->ndim;
    if (nd == 0) { /* a 0-dim tensor is its one element, global index 0 */
        dropout_run(p, 0, 0, 1);
        return;
    }
    int64_t gstride[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0}, rows = 1;
    gstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) gstride[d] = gstride[d + 1] * gs->dims[d + 1];
    for (int d = 0; d < nd - 1; d++) rows *= r->local_shape.dims[d];
    const ldt_dim_runs *in = &r->runs[nd - 1];
    int64_t inner = r->local_shape.dims[nd - 1];
    for (int64_t row = 0; row < rows; row++) {
        int64_t gbase = 0;
        for (int d = 0; d < nd - 1; d++) {
            const ldt_dim_runs *rd = &r->runs[d];
            gbase += ((idx[d] / rd->len) * rd->block_stride + rd->start + idx[d] % rd->len) *
                     gstride[d];
        }
        for (int64_t b = 0; b < in->blocks; b++)
            dropout_run(p, row * inner + b * in->len, gbase + in->start + b * in->block_stride,
                        in->len);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* checked: p and the region were checked at bind (attrs' p is fixed; the offset is read
 * here, as a replay patches it). */
static ldt_status dropout_kernel(const ldt__kcall *c, int checked) {
    dp_params p;
    p.t = c->in[0].dtype;
    p.x = c->in[0].data;
    p.y = c->out.data;
    p.seed = (uint64_t)c->attrs->i[0];
    p.offset = (uint64_t)c->attrs->i[1];
    p.base = c->attrs->i[3];
    p.p = c->attrs->f[0];
    if (!checked && !(p.p >= 0.0 && p.p <= 1.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: p = %g; expected 0 <= p <= 1", p.p);
    int64_t n = nn_numel(&c->out.shape);
    if (c->region) {
        if (!checked) LDT_CHECK(ldt__region_check("dropout", c));
        if (n > 0) dropout_region(&p, c->region, c->global_shape);
        return LDT_OK;
    }
    dropout_run(&p, 0, 0, n); /* the whole tensor: global index = local index */
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: the family's checks (kernels/common/nn_plan.h), then the op's kernel.
 */
ldt_status ldt__k_nn(const ldt__kcall *c) {
    ldt__nn_plan p;
    LDT_CHECK(ldt__nn_check(c, &p));
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: return softmax_kernel(c, p.dim, NULL);
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM: return norm_kernel(c, p.k, p.w, p.b, NULL, NULL);
    case LDT_OP_CROSS_ENTROPY: return cross_entropy_kernel(c, NULL);
    default: return dropout_kernel(c, 0); /* LDT_OP_DROPOUT */
    }
}

/* ---------------------------------------------------------------------------------------
 * Bound calls: the family's checks once; the row (and the norms' weight and bias as double)
 * that the kernels would allocate per call live in the plan.
 */
typedef struct nn_bplan {
    int dim, k;
    int wi, bi;   /* norms: the inputs holding weight and bias, -1 where absent */
    void *row;    /* a row of the compute type */
    double *wb;   /* norms: 2 m doubles */
} nn_bplan;

static ldt_status nn_bound(const ldt__kcall *c) {
    const nn_bplan *p = (const nn_bplan *)c->plan;
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: return softmax_kernel(c, p->dim, p->row);
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM:
        return norm_kernel(c, p->k, p->wi >= 0 ? &c->in[p->wi] : NULL,
                           p->bi >= 0 ? &c->in[p->bi] : NULL, p->row, p->wb);
    case LDT_OP_CROSS_ENTROPY: return cross_entropy_kernel(c, p->row);
    default: return dropout_kernel(c, 1); /* LDT_OP_DROPOUT */
    }
}

ldt_status ldt__kb_nn(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    ldt__nn_plan q;
    int64_t rown = 1, wbn = 0;
    *plan = NULL;
    LDT_CHECK(ldt__nn_check(c, &q));
    if (c->op == LDT_OP_DROPOUT) {
        double pr = c->attrs->f[0];
        if (!(pr >= 0.0 && pr <= 1.0))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: p = %g; expected 0 <= p <= 1", pr);
        if (c->region) LDT_CHECK(ldt__region_check("dropout", c));
    }
    const ldt_shape *xs = &c->in[0].shape;
    switch (c->op) {
    case LDT_OP_SOFTMAX:
    case LDT_OP_LOG_SOFTMAX: rown = xs->ndim ? xs->dims[q.dim] : 1; break;
    case LDT_OP_LAYER_NORM:
    case LDT_OP_RMS_NORM:
        for (int d = xs->ndim - q.k; d < xs->ndim; d++) rown *= xs->dims[d];
        wbn = 2 * rown;
        break;
    case LDT_OP_CROSS_ENTROPY: rown = xs->dims[xs->ndim - 1]; break;
    default: rown = 0; break;
    }
    if (rown < 1) rown = 1;
    LDT_CHECK(ldt__kplan_alloc(nn_name(c->op),
                               sizeof(nn_bplan) + (size_t)(rown + wbn) * sizeof(double), plan));
    nn_bplan *p = (nn_bplan *)*plan;
    p->dim = q.dim;
    p->k = q.k;
    p->wi = q.w ? (int)(q.w - c->in) : -1;
    p->bi = q.b ? (int)(q.b - c->in) : -1;
    p->row = (double *)(p + 1); /* room for rown doubles: enough for f32 rows too */
    p->wb = wbn ? (double *)(p + 1) + rown : NULL;
    *fn = nn_bound;
    return LDT_OK;
}
