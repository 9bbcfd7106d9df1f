/* CPU kernel of scaled dot-product attention: softmax(q k^T * scale, causal mask) v, by GEMM. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/attention_plan.h"
#include "kernels/common/nn_math.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"

#define AT_NAME LDT__AT_NAME

/* Query rows per block: the scores of a block, [AT_QBLOCK, Lk], are all that is held, so memory
 * stays O(Lk) per block however long the sequence is. */
#define AT_QBLOCK 64
/* Dropout mask bytes made per step. */
#define AT_CHUNK 256

typedef ldt__at_plan at_plan; /* kernels/common/attention_plan.h */

static int64_t at_keys(const at_plan *p, int64_t i) { return ldt__at_keys(p->causal, p->Lk, i); }

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
            int64_t g = p->base + (((p->gb ? p->gb[b] : b) * p->Lq) + i0 + r) * p->Lk;                             \
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

/* given: scratch of at_scratch_elems(p, t) elements from a bound plan, or NULL. */
static size_t at_scratch_elems(const at_plan *p, ldt_dtype t) {
    int half = t == LDT_F16 || t == LDT_BF16;
    int64_t qn = p->Lq * p->E, kn = p->Lk * p->E, vn = p->Lk * p->Ev;
    size_t scores = (size_t)(AT_QBLOCK * (p->Lk ? p->Lk : 1));
    return scores + (half ? (size_t)(qn + kn + vn + AT_QBLOCK * p->Ev) : 0);
}

static ldt_status attention_kernel(const ldt__kcall *c, const at_plan *p, void *given) {
    ldt_dtype t = c->in[0].dtype;
    int dbl = t == LDT_F64, half = t == LDT_F16 || t == LDT_BF16;
    size_t esz = dbl ? sizeof(double) : sizeof(float);
    int64_t qn = p->Lq * p->E, kn = p->Lk * p->E, vn = p->Lk * p->Ev, on = p->Lq * p->Ev;
    /* scores of one block; for the half types also f32 q, k, v of a batch and an output block */
    size_t scores = (size_t)(AT_QBLOCK * (p->Lk ? p->Lk : 1));
    size_t extra = half ? (size_t)(qn + kn + vn + AT_QBLOCK * p->Ev) : 0;
    char *buf = given ? (char *)given : malloc((scores + extra) * esz);
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
    if (!given) free(buf);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: the shared checks (kernels/common/attention_plan.h), then the plan. With dropout
 * on a region each local batch gets its global index.
 */
static int64_t *global_batches(const ldt_region *r, const ldt_shape *global, int nb, int64_t B) {
    int64_t *gb = malloc((size_t)(B ? B : 1) * sizeof *gb);
    ldt__at_batches bt;
    if (!gb) return NULL;
    ldt__at_batches_make(r, global, nb, &bt);
    for (int64_t lb = 0; lb < B; lb++) gb[lb] = ldt__at_global_batch(&bt, lb);
    return gb;
}

ldt_status ldt__k_attention(const ldt__kcall *c) {
    at_plan p;
    LDT_CHECK(ldt__at_check(c, &p));
    int n = c->in[0].shape.ndim;
    /* cblas takes int sizes and leading dimensions */
    if (p.Lq > INT_MAX || p.Lk > INT_MAX || p.E > INT_MAX || p.Ev > INT_MAX)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, AT_NAME ": Lq %lld, Lk %lld, E %lld, Ev %lld; cblas takes "
                 "sizes up to %d", (long long)p.Lq, (long long)p.Lk, (long long)p.E,
                 (long long)p.Ev, INT_MAX);
    if (p.B * p.Lq * p.Ev == 0) return LDT_OK;
    if (p.sharded_dropout) {
        ldt_status st;
        int64_t *gb = global_batches(c->region, c->global_shape, n - 2, p.B);
        if (!gb) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, AT_NAME ": out of memory");
        p.gb = gb;
        st = attention_kernel(c, &p, NULL);
        free(gb);
        return st;
    }
    return attention_kernel(c, &p, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Bound calls: the checks once; the global batch indices of a sharded dropout and the score
 * scratch made at bind. The seed and offset are read per call (a replay patches them).
 */
typedef struct at_bplan {
    at_plan p;
    void *buf;
} at_bplan;

static ldt_status at_nothing(const ldt__kcall *c) {
    (void)c;
    return LDT_OK;
}

static ldt_status attention_bound(const ldt__kcall *c) {
    const at_bplan *b = (const at_bplan *)c->plan;
    at_plan p = b->p;
    p.seed = (uint64_t)c->attrs->i[0];
    p.offset = (uint64_t)c->attrs->i[1];
    return attention_kernel(c, &p, b->buf);
}

ldt_status ldt__kb_attention(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    at_plan p;
    *plan = NULL;
    LDT_CHECK(ldt__at_check(c, &p));
    if (p.Lq > INT_MAX || p.Lk > INT_MAX || p.E > INT_MAX || p.Ev > INT_MAX)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, AT_NAME ": Lq %lld, Lk %lld, E %lld, Ev %lld; cblas takes "
                 "sizes up to %d", (long long)p.Lq, (long long)p.Lk, (long long)p.E,
                 (long long)p.Ev, INT_MAX);
    if (p.B * p.Lq * p.Ev == 0) {
        *fn = at_nothing;
        return LDT_OK;
    }
    ldt_dtype t = c->in[0].dtype;
    size_t esz = t == LDT_F64 ? sizeof(double) : sizeof(float);
    size_t gbn = p.sharded_dropout ? (size_t)p.B : 0;
    /* layout: the plan, the global batches, then the scratch (8-byte aligned) */
    LDT_CHECK(ldt__kplan_alloc(AT_NAME, sizeof(at_bplan) + gbn * sizeof(int64_t) +
                                            at_scratch_elems(&p, t) * esz, plan));
    at_bplan *b = (at_bplan *)*plan;
    int64_t *gb = (int64_t *)(b + 1);
    if (p.sharded_dropout) {
        ldt__at_batches bt;
        ldt__at_batches_make(c->region, c->global_shape, c->in[0].shape.ndim - 2, &bt);
        for (int64_t lb = 0; lb < p.B; lb++) gb[lb] = ldt__at_global_batch(&bt, lb);
        p.gb = gb;
    }
    b->p = p;
    b->buf = gb + gbn;
    *fn = attention_bound;
    return LDT_OK;
}
