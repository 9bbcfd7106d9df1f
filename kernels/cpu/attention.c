/* CPU kernel of scaled dot-product attention: softmax(q k^T * scale, causal mask) v, by GEMM. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/nn_math.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"

#define AT_NAME "scaled_dot_product_attention"

/* Query rows per block: the scores of a block, [AT_QBLOCK, Lk], are all that is held, so memory
 * stays O(Lk) per block however long the sequence is. */
#define AT_QBLOCK 64
/* Dropout mask bytes made per step. */
#define AT_CHUNK 256

/* One call's sizes: q [B, Lq, E], k [B, Lk, E], v [B, Lk, Ev], out [B, Lq, Ev], B the product
 * of the batch dims. */
typedef struct at_plan {
    int64_t B, Lq, Lk, E, Ev;
    int causal;
    double scale, p, keep; /* keep = 1/(1-p), 0 for p = 1 */
    uint64_t seed, offset;
    const int64_t *gb; /* per local batch index its global one (a sharded call), or NULL */
} at_plan;

/* The keys query i sees: j < at_keys(i). torch's is_causal=True aligns the mask top-left
 * (j <= i) whatever Lq and Lk are; without the mask, all Lk. */
static int64_t at_keys(const at_plan *p, int64_t i) {
    if (!p->causal) return p->Lk;
    return i + 1 < p->Lk ? i + 1 : p->Lk;
}

/* ---------------------------------------------------------------------------------------
 * One block of rows of one batch, in f32 (f32, f16, bf16) or f64: scores S = scale q k^T for
 * the keys the block can see (ncols; fewer under the causal mask), a max-subtracted softmax
 * per row over its visible keys, dropout on the weights by their global index
 * (b*Lq + i)*Lk + j in [..., Lq, Lk], then O = S v. Masked weights are 0 in S, so the one
 * GEMM over ncols keys gives each row exactly its own sum.
 */
#define AT_BLOCK(T, S_, GEMM)                                                                   \
    static void at_block_##S_(const at_plan *p, int64_t b, int64_t i0, int64_t m, const T *q,  \
                              const T *k, const T *v, T *s, T *o) {                           \
        int64_t ncols = at_keys(p, i0 + m - 1);                                                \
        uint8_t drop[AT_CHUNK];                                                                \
        if (ncols == 0 || p->Ev == 0) { /* no keys: softmax over nothing, the output is 0 */   \
            memset(o, 0, (size_t)(m * p->Ev) * sizeof(T));                                     \
            return;                                                                            \
        }                                                                                      \
        if (p->E == 0)                                                                         \
            memset(s, 0, (size_t)(m * ncols) * sizeof(T));                                     \
        else                                                                                   \
            GEMM##gemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)ncols, (int)p->E, \
                       (T)p->scale, q + i0 * p->E, (int)p->E, k, (int)p->E, (T)0, s,         \
                       (int)ncols);                                                            \
        for (int64_t r = 0; r < m; r++) {                                                      \
            T *row = s + r * ncols;                                                            \
            int64_t n = at_keys(p, i0 + r);                                                    \
            ldt__softmax_row_##S_(row, n);                                                     \
            for (int64_t j = n; j < ncols; j++) row[j] = 0;                                    \
            if (p->p <= 0.0) continue;                                                         \
            int64_t g = (((p->gb ? p->gb[b] : b) * p->Lq) + i0 + r) * p->Lk;                                        \
            for (int64_t j0 = 0; j0 < n; j0 += AT_CHUNK) {                                     \
                int64_t len = n - j0 < AT_CHUNK ? n - j0 : AT_CHUNK;                           \
                ldt__rand_fill_bernoulli_u8(drop, p->seed, p->offset, g + j0, len, p->p);       \
                for (int64_t j = 0; j < len; j++)                                              \
                    row[j0 + j] = drop[j] ? (T)0 : row[j0 + j] * (T)p->keep;                   \
            }                                                                                  \
        }                                                                                      \
        GEMM##gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)p->Ev, (int)ncols,   \
                   (T)1, s, (int)ncols, v, (int)p->Ev, (T)0, o, (int)p->Ev);                   \
    }

AT_BLOCK(float, f32, cblas_s)
AT_BLOCK(double, f64, cblas_d)

/* The half types widen into f32 copies of one batch's q, k, v; the output block is rounded
 * once from f32. */
static void at_widen(ldt_dtype t, const void *src, int64_t off, int64_t n, float *dst) {
    const uint16_t *s = (const uint16_t *)src + off;
    if (t == LDT_F16)
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__f16_to_f32(s[j]);
    else
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__bf16_to_f32(s[j]);
}

static void at_narrow(ldt_dtype t, const float *src, int64_t n, void *dst, int64_t off) {
    uint16_t *d = (uint16_t *)dst + off;
    if (t == LDT_F16)
        for (int64_t j = 0; j < n; j++) d[j] = ldt__f32_to_f16(src[j]);
    else
        for (int64_t j = 0; j < n; j++) d[j] = ldt__f32_to_bf16(src[j]);
}

static ldt_status attention_kernel(const ldt__kcall *c, const at_plan *p) {
    ldt_dtype t = c->in[0].dtype;
    int dbl = t == LDT_F64, half = t == LDT_F16 || t == LDT_BF16;
    size_t esz = dbl ? sizeof(double) : sizeof(float);
    int64_t qn = p->Lq * p->E, kn = p->Lk * p->E, vn = p->Lk * p->Ev, on = p->Lq * p->Ev;
    /* scores of one block; for the half types also f32 q, k, v of a batch and an output block */
    size_t scores = (size_t)(AT_QBLOCK * (p->Lk ? p->Lk : 1));
    size_t extra = half ? (size_t)(qn + kn + vn + AT_QBLOCK * p->Ev) : 0;
    char *buf = malloc((scores + extra) * esz);
    if (!buf)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, AT_NAME ": no memory for %lld scores",
                 (long long)scores);
    for (int64_t b = 0; b < p->B; b++) {
        if (dbl) {
            const double *q = (const double *)c->in[0].data + b * qn;
            const double *k = (const double *)c->in[1].data + b * kn;
            const double *v = (const double *)c->in[2].data + b * vn;
            double *o = (double *)c->out.data + b * on;
            for (int64_t i0 = 0; i0 < p->Lq; i0 += AT_QBLOCK) {
                int64_t m = p->Lq - i0 < AT_QBLOCK ? p->Lq - i0 : AT_QBLOCK;
                at_block_f64(p, b, i0, m, q, k, v, (double *)buf, o + i0 * p->Ev);
            }
        } else if (!half) {
            const float *q = (const float *)c->in[0].data + b * qn;
            const float *k = (const float *)c->in[1].data + b * kn;
            const float *v = (const float *)c->in[2].data + b * vn;
            float *o = (float *)c->out.data + b * on;
            for (int64_t i0 = 0; i0 < p->Lq; i0 += AT_QBLOCK) {
                int64_t m = p->Lq - i0 < AT_QBLOCK ? p->Lq - i0 : AT_QBLOCK;
                at_block_f32(p, b, i0, m, q, k, v, (float *)buf, o + i0 * p->Ev);
            }
        } else {
            float *q = (float *)buf + scores, *k = q + qn, *v = k + kn, *o = v + vn;
            at_widen(t, c->in[0].data, b * qn, qn, q);
            at_widen(t, c->in[1].data, b * kn, kn, k);
            at_widen(t, c->in[2].data, b * vn, vn, v);
            for (int64_t i0 = 0; i0 < p->Lq; i0 += AT_QBLOCK) {
                int64_t m = p->Lq - i0 < AT_QBLOCK ? p->Lq - i0 : AT_QBLOCK;
                at_block_f32(p, b, i0, m, q, k, v, (float *)buf, o);
                at_narrow(t, o, m * p->Ev, c->out.data, b * on + i0 * p->Ev);
            }
        }
    }
    free(buf);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: dtypes, shapes and attributes, then the plan.
 *
 * A region (a sharded call) places the output in the global tensor. Without dropout every
 * output row depends only on local rows of q, k, v. With dropout the mask is drawn by the
 * weights' global index ((b * Lq + i) * Lk + j): the region must hold whole Lq rows, and its
 * batch dims (any Shard or InterleavedShard runs) give each local batch its global index.
 */
/* Global flattened batch index of each local batch of region r (batch dims: the first nb). */
static int64_t *global_batches(const ldt_region *r, const ldt_shape *global, int nb, int64_t B) {
    int64_t *gb = malloc((size_t)(B ? B : 1) * sizeof *gb);
    if (!gb) return NULL;
    for (int64_t lb = 0; lb < B; lb++) {
        int64_t rest = lb, g = 0, stride = 1;
        for (int d = nb - 1; d >= 0; d--) {
            const ldt_dim_runs *run = &r->runs[d];
            int64_t loc = r->local_shape.dims[d] ? rest % r->local_shape.dims[d] : 0;
            int64_t gi = (loc / run->len) * run->block_stride + run->start + loc % run->len;
            rest = r->local_shape.dims[d] ? rest / r->local_shape.dims[d] : 0;
            g += gi * stride;
            stride *= global->dims[d];
        }
        gb[lb] = g;
    }
    return gb;
}

ldt_status ldt__k_attention(const ldt__kcall *c) {
    if (c->op != LDT_OP_SDPA)
        LDT_FAIL(LDT_ERR_INTERNAL, "attention kernels: op %d (%s) is not " AT_NAME, c->op,
                 ldt__builtin_op_name(c->op));
    if (c->nin != 3 || !c->attrs)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, AT_NAME ": %d inputs%s; expected q, k, v and attributes",
                 c->nin, c->attrs ? "" : " and no attributes");
    for (int i = 0; i < 3; i++) LDT_CHECK(ldt__check_operand(AT_NAME, &c->in[i], i));
    LDT_CHECK(ldt__check_operand(AT_NAME, &c->out, -1));
    const ldt__operand *q = &c->in[0], *k = &c->in[1], *v = &c->in[2];
    ldt_dtype t = q->dtype;
    if (!ldt_dtype_is_float(t))
        LDT_FAIL(LDT_ERR_UNSUPPORTED, AT_NAME ": dtype %s is not supported (f32, f64, f16, bf16)",
                 ldt_dtype_name(t));
    if (k->dtype != t || v->dtype != t || c->out.dtype != t)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, AT_NAME ": q, k, v and the output are %s %s %s %s; "
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
                 AT_NAME ": q %s, k %s, v %s, output %s; expected q [..., Lq, E], k [..., Lk, E], "
                 "v [..., Lk, Ev] with equal batch dims and output [..., Lq, Ev]",
                 qs, ks, vs, os);
    }
    at_plan p;
    memset(&p, 0, sizeof p);
    p.B = 1;
    for (int d = 0; d < n - 2; d++) p.B *= q->shape.dims[d];
    p.Lq = q->shape.dims[n - 2];
    p.E = q->shape.dims[n - 1];
    p.Lk = k->shape.dims[n - 2];
    p.Ev = v->shape.dims[n - 1];
    p.seed = (uint64_t)c->attrs->i[0];
    p.offset = (uint64_t)c->attrs->i[1];
    p.causal = c->attrs->i[2] != 0;
    p.p = c->attrs->f[0];
    p.scale = c->attrs->f[1];
    p.keep = ldt__dropout_scale(p.p);
    if (!(p.p >= 0.0 && p.p <= 1.0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, AT_NAME ": dropout p = %g; expected 0 <= p <= 1", p.p);
    if (!isfinite(p.scale))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, AT_NAME ": scale %g; expected a finite number",
                 p.scale);
    if (c->region && p.p > 0.0) {
        const ldt_region *r = c->region;
        if (!c->global_shape || c->global_shape->ndim != n || r->ndim != n ||
            r->runs[n - 2].start != 0 || r->runs[n - 2].blocks != 1 ||
            r->runs[n - 2].len != c->global_shape->dims[n - 2])
            LDT_FAIL(LDT_ERR_UNSUPPORTED,
                     AT_NAME ": dropout on a shard needs whole query rows (the mask is drawn by "
                     "the weights' global index); the region splits Lq");
    }
    /* cblas takes int sizes and leading dimensions */
    if (p.Lq > INT_MAX || p.Lk > INT_MAX || p.E > INT_MAX || p.Ev > INT_MAX)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, AT_NAME ": Lq %lld, Lk %lld, E %lld, Ev %lld; cblas takes "
                 "sizes up to %d", (long long)p.Lq, (long long)p.Lk, (long long)p.E,
                 (long long)p.Ev, INT_MAX);
    if (p.B * p.Lq * p.Ev == 0) return LDT_OK;
    if (c->region && p.p > 0.0) {
        ldt_status st;
        int64_t *gb = global_batches(c->region, c->global_shape, n - 2, p.B);
        if (!gb) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, AT_NAME ": out of memory");
        p.gb = gb;
        st = attention_kernel(c, &p);
        free(gb);
        return st;
    }
    return attention_kernel(c, &p);
}
