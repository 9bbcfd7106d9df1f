/* CPU kernels for sum, mean, amax, amin over dims, and argmax, argmin, topk along a dim. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "core/half.h"
#include "kernels/common/argreduce_plan.h"
#include "kernels/common/cast.h"
#include "kernels/common/reduce_plan.h"
#include "kernels/cpu/kernel.h"

/* Elements converted per step: big enough to amortise the dtype switch, small enough for the
 * stack, and a whole reduction never needs a row-sized buffer. */
#define RD_CHUNK 256

static const char *rd_name(int op) { return ldt__builtin_op_name(op); }

/* ---------------------------------------------------------------------------------------
 * Loading: any dtype to double (exact for every float dtype) or to int64 (exact for every
 * integer dtype), RD_CHUNK at a time.
 */
static void load_f64(ldt_dtype t, const void *src, int64_t off, int64_t n, double *dst) {
    switch (t) {
    case LDT_F32: {
        const float *s = (const float *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = s[j];
    } break;
    case LDT_F64: memcpy(dst, (const double *)src + off, (size_t)n * sizeof(double)); break;
    case LDT_F16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__f16_to_f32(s[j]);
    } break;
    case LDT_BF16: {
        const uint16_t *s = (const uint16_t *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = ldt__bf16_to_f32(s[j]);
    } break;
    default: break; /* callers send integer dtypes to load_i64 */
    }
}

static void load_i64(ldt_dtype t, const void *src, int64_t off, int64_t n, int64_t *dst) {
    switch (t) {
    case LDT_I32: {
        const int32_t *s = (const int32_t *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = s[j];
    } break;
    case LDT_I64: memcpy(dst, (const int64_t *)src + off, (size_t)n * sizeof(int64_t)); break;
    case LDT_U8: {
        const uint8_t *s = (const uint8_t *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = s[j];
    } break;
    case LDT_BOOL: {
        const uint8_t *s = (const uint8_t *)src + off;
        for (int64_t j = 0; j < n; j++) dst[j] = s[j] != 0;
    } break;
    default: break;
    }
}

static void store_f64(ldt_dtype t, void *dst, int64_t i, double v) {
    switch (t) {
    case LDT_F32: ((float *)dst)[i] = (float)v; break;
    case LDT_F64: ((double *)dst)[i] = v; break;
    case LDT_F16: ((uint16_t *)dst)[i] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(v)); break;
    case LDT_BF16: ((uint16_t *)dst)[i] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(v)); break;
    default: break;
    }
}

static void store_i64(ldt_dtype t, void *dst, int64_t i, int64_t v) {
    switch (t) {
    case LDT_I32: ((int32_t *)dst)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)dst)[i] = v; break;
    case LDT_U8: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    default: break;
    }
}

/* ---------------------------------------------------------------------------------------
 * sum, mean, amax, amin over a set of dims.
 *
 * The input is seen as groups of adjacent dims that are all reduced or all kept (size-1 dims
 * dropped, neighbours of one kind merged), e.g. [A, B, C] reducing B is kept A, reduced B,
 * kept C. It is read once, in order, in rows of the innermost group; every row adds into the
 * accumulators of its output elements. An inner kept group adds a row into a row of
 * accumulators (reducing a non-last dim stays sequential); an inner reduced group folds the
 * row into one accumulator.
 *
 * Float sums use Neumaier's variant of Kahan summation in double (a running compensation per
 * output element), so f64 sums are accurate beyond a plain double loop and f32/f16/bf16 sums
 * are rounded once, from an almost exact double.
 */
typedef ldt__rd_geom rd_geom;

/* The rows of the innermost group in input order, with each row's input offset and the
 * output index of its first accumulator (an odometer over the outer groups). */
typedef struct rd_iter {
    const rd_geom *g;
    int64_t idx[LDT_MAX_DIMS];
    int64_t in_off, out_base, rows_left;
} rd_iter;

static void rd_iter_init(rd_iter *it, const rd_geom *g) {
    memset(it, 0, sizeof *it);
    it->g = g;
    it->rows_left = g->in_numel / g->size[g->n - 1];
}

static void rd_iter_next(rd_iter *it) {
    const rd_geom *g = it->g;
    it->in_off += g->size[g->n - 1];
    for (int k = g->n - 2; k >= 0; k--) {
        it->out_base += g->ostride[k];
        if (++it->idx[k] < g->size[k]) break;
        it->out_base -= g->ostride[k] * g->size[k];
        it->idx[k] = 0;
    }
    it->rows_left--;
}

/* Floats: sum/mean (acc, comp) or amax/amin (acc) in double. */
static void rd_float(int op, ldt_dtype t, const void *src, const rd_geom *g, double *acc,
                     double *comp) {
    int is_sum = op == LDT_OP_SUM || op == LDT_OP_MEAN, is_max = op == LDT_OP_AMAX;
    int64_t L = g->size[g->n - 1];
    int inner_red = g->red[g->n - 1];
    for (int64_t i = 0; i < g->out_numel; i++) {
        acc[i] = is_sum ? 0.0 : is_max ? -INFINITY : INFINITY;
        if (comp) comp[i] = 0.0;
    }
    double buf[RD_CHUNK];
    rd_iter it;
    for (rd_iter_init(&it, g); it.rows_left > 0; rd_iter_next(&it)) {
        for (int64_t j0 = 0; j0 < L; j0 += RD_CHUNK) {
            int64_t n = L - j0 < RD_CHUNK ? L - j0 : RD_CHUNK;
            load_f64(t, src, it.in_off + j0, n, buf);
            /* a kept inner group: element j goes to its own accumulator */
            double *a = acc + it.out_base + (inner_red ? 0 : j0);
            double *cp = comp ? comp + it.out_base + (inner_red ? 0 : j0) : NULL;
            if (is_sum && inner_red) {
                double s = a[0], cc = cp[0];
                for (int64_t j = 0; j < n; j++) ldt__neumaier_add(&s, &cc, buf[j]);
                a[0] = s;
                cp[0] = cc;
            } else if (is_sum) {
                for (int64_t j = 0; j < n; j++) ldt__neumaier_add(&a[j], &cp[j], buf[j]);
            } else {
                /* NaN propagates: a NaN input replaces the accumulator, and nothing replaces a
                 * NaN accumulator (every comparison with it is false) */
                int64_t step = inner_red ? 0 : 1;
                for (int64_t j = 0; j < n; j++) {
                    double x = buf[j], *p = a + j * step;
                    if (is_max ? (x > *p || x != x) : (x < *p || x != x)) *p = x;
                }
            }
        }
    }
}

/* Integers: sum wraps in uint64 (the i64 output is the two's complement of it); amax/amin
 * exact in int64. */
static void rd_int(int op, ldt_dtype t, const void *src, const rd_geom *g, int64_t *acc) {
    int is_sum = op == LDT_OP_SUM, is_max = op == LDT_OP_AMAX;
    int64_t L = g->size[g->n - 1];
    int inner_red = g->red[g->n - 1];
    for (int64_t i = 0; i < g->out_numel; i++) acc[i] = is_sum ? 0 : is_max ? INT64_MIN : INT64_MAX;
    int64_t buf[RD_CHUNK];
    rd_iter it;
    for (rd_iter_init(&it, g); it.rows_left > 0; rd_iter_next(&it)) {
        for (int64_t j0 = 0; j0 < L; j0 += RD_CHUNK) {
            int64_t n = L - j0 < RD_CHUNK ? L - j0 : RD_CHUNK;
            load_i64(t, src, it.in_off + j0, n, buf);
            int64_t *a = acc + it.out_base + (inner_red ? 0 : j0);
            int64_t step = inner_red ? 0 : 1;
            for (int64_t j = 0; j < n; j++) {
                int64_t *p = a + j * step, x = buf[j];
                if (is_sum)
                    *p = (int64_t)((uint64_t)*p + (uint64_t)x);
                else if (is_max ? x > *p : x < *p)
                    *p = x;
            }
        }
    }
}

/* A checked reduction; acc and comp: scratch of g->out_numel accumulators (comp for sums of
 * floats) from a bound plan, or NULL to allocate them here. */
static ldt_status reduce_run(const ldt__kcall *c, const rd_geom *gp, double *acc_f, double *comp_f,
                             int64_t *acc_i) {
    const char *name = rd_name(c->op);
    const ldt__operand *x = &c->in[0];
    ldt_dtype t = x->dtype, ot = c->out.dtype;
    int isf = ldt_dtype_is_float(t);
    if (gp->count == 0) { /* an empty reduced dim: the identity */
        if (c->op == LDT_OP_MEAN) { /* 0 / 0, as torch */
            for (int64_t i = 0; i < gp->out_numel; i++) store_f64(ot, c->out.data, i, NAN);
        } else if (isf) {
            for (int64_t i = 0; i < gp->out_numel; i++) store_f64(ot, c->out.data, i, 0.0);
        } else {
            memset(c->out.data, 0, (size_t)gp->out_numel * sizeof(int64_t));
        }
        return LDT_OK;
    }
    if (gp->out_numel == 0) return LDT_OK;

    int is_sum = c->op == LDT_OP_SUM || c->op == LDT_OP_MEAN;
    size_t accn = (size_t)gp->out_numel;
    if (isf) {
        int own = !acc_f;
        double *acc = own ? malloc(accn * sizeof(double)) : acc_f;
        double *comp = !is_sum ? NULL : own ? malloc(accn * sizeof(double)) : comp_f;
        if (!acc || (is_sum && !comp)) {
            free(acc);
            free(comp);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for %lld accumulators", name,
                     (long long)gp->out_numel);
        }
        rd_float(c->op, t, x->data, gp, acc, comp);
        for (int64_t i = 0; i < gp->out_numel; i++) {
            double v = acc[i];
            /* an infinite or NaN sum has a meaningless compensation (inf - inf) */
            if (is_sum && isfinite(v)) v += comp[i];
            if (c->op == LDT_OP_MEAN) v /= (double)gp->count;
            store_f64(ot, c->out.data, i, v);
        }
        if (own) {
            free(acc);
            free(comp);
        }
        return LDT_OK;
    }
    /* integers: an i64 output is its own accumulator */
    int own = ot != LDT_I64 && !acc_i;
    int64_t *acc = ot == LDT_I64 ? (int64_t *)c->out.data : own ? malloc(accn * sizeof(int64_t)) : acc_i;
    if (!acc)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for %lld accumulators", name,
                 (long long)gp->out_numel);
    rd_int(c->op, t, x->data, gp, acc);
    if (ot != LDT_I64) {
        for (int64_t i = 0; i < gp->out_numel; i++) store_i64(ot, c->out.data, i, acc[i]);
        if (own) free(acc);
    }
    return LDT_OK;
}

static ldt_status reduce_kernel(const ldt__kcall *c) {
    rd_geom g;
    LDT_CHECK(ldt__rd_check(c, &g)); /* and amax/amin of an empty dim */
    return reduce_run(c, &g, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * argmax, argmin, topk along one dim: the input is [O, R, I] with R the dim. Values become
 * order keys (kernels/common/argreduce_plan.h): NaN the largest, -0 tied with +0.
 */

/* Keys of n elements from src[off], src[off + stride], ... */
static void load_keys(ldt_dtype t, const void *src, int64_t off, int64_t stride, int64_t n,
                      uint64_t *dst) {
    for (int64_t j = 0; j < n; j++) dst[j] = ldt__ar_key(t, src, off + j * stride);
}

static void keys_for_min(uint64_t *k, int64_t n, int isf) {
    for (int64_t j = 0; j < n; j++) k[j] = ldt__ar_key_for_min(k[j], isf);
}

/* First index of the largest key along R, for every (o, i): a running best row of I keys,
 * updated by each of the R rows in input order (sequential reads for any dim). */
static ldt_status argmax_run(const ldt__kcall *c, const ldt__ar_geom *gp, uint64_t *best_buf) {
    const char *name = rd_name(c->op);
    const ldt__ar_geom g = *gp;
    if (g.O * g.I == 0) return LDT_OK;
    ldt_dtype t = c->in[0].dtype;
    int isf = ldt_dtype_is_float(t), is_min = c->op == LDT_OP_ARGMIN;
    int64_t *out = c->out.data;
    uint64_t buf[RD_CHUNK];
    if (g.I == 1) { /* one contiguous line per output */
        for (int64_t o = 0; o < g.O; o++) {
            uint64_t best = 0;
            int64_t bi = 0;
            for (int64_t r0 = 0; r0 < g.R; r0 += RD_CHUNK) {
                int64_t n = g.R - r0 < RD_CHUNK ? g.R - r0 : RD_CHUNK;
                load_keys(t, c->in[0].data, o * g.R + r0, 1, n, buf);
                if (is_min) keys_for_min(buf, n, isf);
                for (int64_t j = 0; j < n; j++)
                    if ((r0 == 0 && j == 0) || buf[j] > best) {
                        best = buf[j];
                        bi = r0 + j;
                    }
            }
            out[o] = bi;
        }
        return LDT_OK;
    }
    uint64_t *best = best_buf ? best_buf : malloc((size_t)g.I * sizeof(uint64_t));
    if (!best)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for a row of %lld keys", name,
                 (long long)g.I);
    for (int64_t o = 0; o < g.O; o++) {
        int64_t *idx = out + o * g.I;
        for (int64_t r = 0; r < g.R; r++) {
            for (int64_t j0 = 0; j0 < g.I; j0 += RD_CHUNK) {
                int64_t n = g.I - j0 < RD_CHUNK ? g.I - j0 : RD_CHUNK;
                load_keys(t, c->in[0].data, (o * g.R + r) * g.I + j0, 1, n, buf);
                if (is_min) keys_for_min(buf, n, isf);
                for (int64_t j = 0; j < n; j++)
                    if (r == 0 || buf[j] > best[j0 + j]) {
                        best[j0 + j] = buf[j];
                        idx[j0 + j] = r;
                    }
            }
        }
    }
    if (!best_buf) free(best);
    return LDT_OK;
}

static ldt_status argmax_kernel(const ldt__kcall *c) {
    ldt__ar_geom g = {0}; /* (set by the check; zeroed for the compiler's flow analysis at -O3) */
    LDT_CHECK(ldt__ar_check(c, &g));
    return argmax_run(c, &g, NULL);
}

/* topk: sort each line by (key, index) and keep the first k. For the largest the key is
 * inverted so both directions sort ascending, and equal values keep index order. The output
 * is always sorted (a valid answer when sorted = 0 too). */
typedef struct kv {
    uint64_t key;
    int64_t idx;
} kv;

static int kv_cmp(const void *pa, const void *pb) {
    const kv *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static ldt_status topk_run(const ldt__kcall *c, const ldt__ar_geom *gp, kv *line_buf,
                           uint64_t *keys_buf) {
    const char *name = rd_name(c->op);
    const ldt__ar_geom g = *gp;
    int64_t k = g.k;
    int largest = g.largest;
    int vals = c->op == LDT_OP_TOPK_VALUES;
    ldt_dtype t = c->in[0].dtype;
    if (g.O * g.I == 0 || k == 0) return LDT_OK;
    int own = !line_buf;
    kv *line = own ? malloc((size_t)g.R * sizeof(kv)) : line_buf;
    uint64_t *keys = own ? malloc((size_t)g.R * sizeof(uint64_t)) : keys_buf;
    if (!line || !keys) {
        free(line);
        free(keys);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "%s: no memory for a line of %lld", name, (long long)g.R);
    }
    size_t esz = ldt_dtype_size(t);
    const char *src = c->in[0].data;
    for (int64_t o = 0; o < g.O; o++) {
        for (int64_t i = 0; i < g.I; i++) {
            int64_t base = o * g.R * g.I + i;
            load_keys(t, src, base, g.I, g.R, keys);
            for (int64_t r = 0; r < g.R; r++) {
                line[r].key = largest ? ~keys[r] : keys[r];
                line[r].idx = r;
            }
            qsort(line, (size_t)g.R, sizeof(kv), kv_cmp);
            /* output line: [O, k, I], element (o, j, i) */
            for (int64_t j = 0; j < k; j++) {
                int64_t oi = (o * k + j) * g.I + i;
                if (vals)
                    ldt__copy((char *)c->out.data + (size_t)oi * esz,
                           src + (size_t)(base + line[j].idx * g.I) * esz, esz);
                else
                    ((int64_t *)c->out.data)[oi] = line[j].idx;
            }
        }
    }
    if (own) {
        free(line);
        free(keys);
    }
    return LDT_OK;
}

static ldt_status topk_kernel(const ldt__kcall *c) {
    ldt__ar_geom g = {0}; /* (set by the check; zeroed for the compiler's flow analysis at -O3) */
    LDT_CHECK(ldt__ar_check(c, &g));
    return topk_run(c, &g, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * Dispatch.
 */
ldt_status ldt__k_reduce(const ldt__kcall *c) {
    switch (c->op) {
    case LDT_OP_SUM:
    case LDT_OP_MEAN:
    case LDT_OP_AMAX:
    case LDT_OP_AMIN: return reduce_kernel(c);
    default:
        LDT_FAIL(LDT_ERR_INTERNAL, "reduce kernels: op %d is not sum, mean, amax or amin", c->op);
    }
}

ldt_status ldt__k_index_reduce(const ldt__kcall *c) {
    switch (c->op) {
    case LDT_OP_ARGMAX:
    case LDT_OP_ARGMIN: return argmax_kernel(c);
    case LDT_OP_TOPK_VALUES:
    case LDT_OP_TOPK_INDICES: return topk_kernel(c);
    default:
        LDT_FAIL(LDT_ERR_INTERNAL, "index reduce kernels: op %d is not argmax, argmin or topk",
                 c->op);
    }
}

/* ---------------------------------------------------------------------------------------
 * Bound calls: the geometry checked once; the accumulators, key rows and sort lines that the
 * kernels would allocate per call live in the plan.
 */
typedef struct rd_bplan {
    rd_geom g;
    double *acc, *comp;
    int64_t *iacc;
} rd_bplan;

static ldt_status reduce_bound(const ldt__kcall *c) {
    const rd_bplan *p = (const rd_bplan *)c->plan;
    return reduce_run(c, &p->g, p->acc, p->comp, p->iacc);
}

ldt_status ldt__kb_reduce(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    rd_geom g;
    *plan = NULL;
    if (c->op != LDT_OP_SUM && c->op != LDT_OP_MEAN && c->op != LDT_OP_AMAX && c->op != LDT_OP_AMIN)
        LDT_FAIL(LDT_ERR_INTERNAL, "reduce kernels: op %d is not sum, mean, amax or amin", c->op);
    LDT_CHECK(ldt__rd_check(c, &g));
    size_t n = (size_t)(g.out_numel > 0 ? g.out_numel : 1);
    LDT_CHECK(ldt__kplan_alloc(rd_name(c->op), sizeof(rd_bplan) + 2 * n * sizeof(double), plan));
    rd_bplan *p = (rd_bplan *)*plan;
    p->g = g;
    p->acc = (double *)(p + 1);
    p->comp = p->acc + n;
    p->iacc = (int64_t *)p->acc; /* integers use the same room */
    *fn = reduce_bound;
    return LDT_OK;
}

typedef struct ar_bplan {
    ldt__ar_geom g;
    uint64_t *best; /* argmax: a row of I keys */
    kv *line;       /* topk: a line of R */
    uint64_t *keys;
} ar_bplan;

static ldt_status argmax_bound(const ldt__kcall *c) {
    const ar_bplan *p = (const ar_bplan *)c->plan;
    return argmax_run(c, &p->g, p->best);
}

static ldt_status topk_bound(const ldt__kcall *c) {
    const ar_bplan *p = (const ar_bplan *)c->plan;
    return topk_run(c, &p->g, p->line, p->keys);
}

ldt_status ldt__kb_index_reduce(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    ldt__ar_geom g = {0};
    *plan = NULL;
    if (c->op != LDT_OP_ARGMAX && c->op != LDT_OP_ARGMIN && c->op != LDT_OP_TOPK_VALUES &&
        c->op != LDT_OP_TOPK_INDICES)
        LDT_FAIL(LDT_ERR_INTERNAL, "index reduce kernels: op %d is not argmax, argmin or topk",
                 c->op);
    LDT_CHECK(ldt__ar_check(c, &g));
    int topk = c->op == LDT_OP_TOPK_VALUES || c->op == LDT_OP_TOPK_INDICES;
    size_t n = (size_t)((topk ? g.R : g.I) > 0 ? (topk ? g.R : g.I) : 1);
    size_t bytes = sizeof(ar_bplan) + (topk ? n * (sizeof(kv) + sizeof(uint64_t)) : n * sizeof(uint64_t));
    LDT_CHECK(ldt__kplan_alloc(rd_name(c->op), bytes, plan));
    ar_bplan *p = (ar_bplan *)*plan;
    p->g = g;
    if (topk) {
        p->line = (kv *)(p + 1);
        p->keys = (uint64_t *)(p->line + n);
        *fn = topk_bound;
    } else {
        p->best = (uint64_t *)(p + 1);
        *fn = argmax_bound;
    }
    return LDT_OK;
}
