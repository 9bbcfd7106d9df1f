/* CPU kernels for rand, randn, bernoulli, trunc_normal and randint, by global index on the
 * philox stream. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/half.h"
#include "kernels/common/cast.h" /* ldt__cast_f64_to_f32_odd: one rounding to the halves */
#include "kernels/common/philox.h"
#include "kernels/common/random_plan.h"
#include "kernels/cpu/kernel.h"

/* Values are made in f32 (or bytes) this many at a time, then converted to the dtype. */
#define RN_CHUNK 256

static const char *rn_name(int op) {
    switch (op) {
    case LDT_OP_RAND: return "rand";
    case LDT_OP_RANDN: return "randn";
    case LDT_OP_BERNOULLI: return "bernoulli";
    case LDT_OP_TRUNC_NORMAL: return "trunc_normal";
    default: return "randint";
    }
}

/* n doubles (trunc_normal values) into the output dtype, each rounded once. */
static void rn_store_f64(ldt_dtype t, void *dst, const double *v, int64_t n) {
    switch (t) {
    case LDT_F64: memcpy(dst, v, (size_t)n * sizeof *v); break;
    case LDT_F32:
        for (int64_t j = 0; j < n; j++) ((float *)dst)[j] = (float)v[j];
        break;
    case LDT_F16:
        for (int64_t j = 0; j < n; j++)
            ((uint16_t *)dst)[j] = ldt__f32_to_f16(ldt__cast_f64_to_f32_odd(v[j]));
        break;
    case LDT_BF16:
        for (int64_t j = 0; j < n; j++)
            ((uint16_t *)dst)[j] = ldt__f32_to_bf16(ldt__cast_f64_to_f32_odd(v[j]));
        break;
    default: break; /* rejected by the caller */
    }
}

/* n integers (randint values, already checked to fit and to be exact in t) into dtype t. */
static void rn_store_i64(ldt_dtype t, void *dst, const int64_t *v, int64_t n) {
    switch (t) {
    case LDT_I64: memcpy(dst, v, (size_t)n * sizeof *v); break;
    case LDT_I32:
        for (int64_t j = 0; j < n; j++) ((int32_t *)dst)[j] = (int32_t)v[j];
        break;
    case LDT_U8:
        for (int64_t j = 0; j < n; j++) ((uint8_t *)dst)[j] = (uint8_t)v[j];
        break;
    case LDT_F64:
        for (int64_t j = 0; j < n; j++) ((double *)dst)[j] = (double)v[j];
        break;
    case LDT_F32:
        for (int64_t j = 0; j < n; j++) ((float *)dst)[j] = (float)v[j];
        break;
    case LDT_F16:
        for (int64_t j = 0; j < n; j++) ((uint16_t *)dst)[j] = ldt__f32_to_f16((float)v[j]);
        break;
    case LDT_BF16:
        for (int64_t j = 0; j < n; j++) ((uint16_t *)dst)[j] = ldt__f32_to_bf16((float)v[j]);
        break;
    default: break;
    }
}

/* Stream values of global elements [start, start + n) into dst[0..n) of the output dtype. */
static void rn_fill_run(const ldt__rn_params *p, void *dst, int64_t start, int64_t n) {
    size_t esz = ldt_dtype_size(p->dtype);
    if (p->op == LDT_OP_TRUNC_NORMAL) { /* doubles, each rounded once to the dtype */
        if (p->dtype == LDT_F64) {
            ldt__rand_fill_trunc_normal_f64(dst, p->seed, p->offset, start, n, &p->tn);
            return;
        }
        double v[RN_CHUNK];
        for (int64_t k0 = 0; k0 < n; k0 += RN_CHUNK) {
            int64_t m = n - k0 < RN_CHUNK ? n - k0 : RN_CHUNK;
            ldt__rand_fill_trunc_normal_f64(v, p->seed, p->offset, start + k0, m, &p->tn);
            rn_store_f64(p->dtype, (char *)dst + (size_t)k0 * esz, v, m);
        }
        return;
    }
    if (p->op == LDT_OP_RANDINT) {
        if (p->dtype == LDT_I64) {
            ldt__rand_fill_randint_i64(dst, p->seed, p->offset, start, n, p->low, p->range);
            return;
        }
        int64_t v[RN_CHUNK];
        for (int64_t k0 = 0; k0 < n; k0 += RN_CHUNK) {
            int64_t m = n - k0 < RN_CHUNK ? n - k0 : RN_CHUNK;
            ldt__rand_fill_randint_i64(v, p->seed, p->offset, start + k0, m, p->low, p->range);
            rn_store_i64(p->dtype, (char *)dst + (size_t)k0 * esz, v, m);
        }
        return;
    }
    /* the fillers' own dtypes go straight into the output */
    if (p->dtype == LDT_F32 && p->op == LDT_OP_RAND) {
        ldt__rand_fill_uniform_f32(dst, p->seed, p->offset, start, n, p->a, p->b);
        return;
    }
    if (p->dtype == LDT_F32 && p->op == LDT_OP_RANDN) {
        ldt__rand_fill_normal_f32(dst, p->seed, p->offset, start, n, p->a, p->b);
        return;
    }
    if (p->dtype == LDT_F32 && p->op == LDT_OP_BERNOULLI) {
        ldt__rand_fill_bernoulli_f32(dst, p->seed, p->offset, start, n, p->p);
        return;
    }
    if (p->dtype == LDT_BOOL || p->dtype == LDT_U8) {
        ldt__rand_fill_bernoulli_u8(dst, p->seed, p->offset, start, n, p->p);
        return;
    }
    /* the rest: f32 (or 0/1 bytes) in chunks, then widened or rounded; any chunk start is
     * fine, the fillers do not care where a fill begins */
    float f[RN_CHUNK];
    uint8_t u[RN_CHUNK];
    for (int64_t k0 = 0; k0 < n; k0 += RN_CHUNK) {
        int64_t m = n - k0 < RN_CHUNK ? n - k0 : RN_CHUNK;
        if (p->op == LDT_OP_RAND)
            ldt__rand_fill_uniform_f32(f, p->seed, p->offset, start + k0, m, p->a, p->b);
        else if (p->op == LDT_OP_RANDN)
            ldt__rand_fill_normal_f32(f, p->seed, p->offset, start + k0, m, p->a, p->b);
        else
            ldt__rand_fill_bernoulli_u8(u, p->seed, p->offset, start + k0, m, p->p);
        int bern = p->op == LDT_OP_BERNOULLI;
        switch (p->dtype) {
        case LDT_F64: {
            double *d = (double *)dst + k0;
            for (int64_t j = 0; j < m; j++) d[j] = bern ? (double)u[j] : (double)f[j];
        } break;
        case LDT_F16: {
            uint16_t *d = (uint16_t *)dst + k0;
            for (int64_t j = 0; j < m; j++) d[j] = ldt__f32_to_f16(bern ? (float)u[j] : f[j]);
        } break;
        case LDT_BF16: {
            uint16_t *d = (uint16_t *)dst + k0;
            for (int64_t j = 0; j < m; j++) d[j] = ldt__f32_to_bf16(bern ? (float)u[j] : f[j]);
        } break;
        case LDT_I32: {
            int32_t *d = (int32_t *)dst + k0;
            for (int64_t j = 0; j < m; j++) d[j] = u[j];
        } break;
        case LDT_I64: {
            int64_t *d = (int64_t *)dst + k0;
            for (int64_t j = 0; j < m; j++) d[j] = u[j];
        } break;
        default: break; /* rejected by the caller */
        }
    }
}

/* A shard: walk the local tensor in runs of the innermost dim. Along dim d, local index i is
 * global (i / len) * block_stride + start + i % len (include/ldt/core.h), so each run of `len`
 * local elements on the last dim is `len` consecutive global elements: one fill each. */
static void rn_fill_region(const ldt__rn_params *p, void *out, const ldt_region *r,
                           const ldt_shape *gs) {
    int nd = r->ndim;
    size_t esz = ldt_dtype_size(p->dtype);
    if (nd == 0) { /* a 0-dim tensor is its one element, global index 0 */
        rn_fill_run(p, out, 0, 1);
        return;
    }
    int64_t gstride[LDT_MAX_DIMS];
    gstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) gstride[d] = gstride[d + 1] * gs->dims[d + 1];
    const ldt_dim_runs *in = &r->runs[nd - 1];
    int64_t inner = r->local_shape.dims[nd - 1];
    int64_t rows = 1;
    for (int d = 0; d < nd - 1; d++) rows *= r->local_shape.dims[d];
    int64_t idx[LDT_MAX_DIMS] = {0}; /* local multi-index over dims 0..nd-2 */
    for (int64_t row = 0; row < rows; row++) {
        int64_t gbase = 0;
        for (int d = 0; d < nd - 1; d++) {
            const ldt_dim_runs *rd = &r->runs[d];
            int64_t g = (idx[d] / rd->len) * rd->block_stride + rd->start + idx[d] % rd->len;
            gbase += g * gstride[d];
        }
        for (int64_t b = 0; b < in->blocks; b++) {
            char *dst = (char *)out + (size_t)(row * inner + b * in->len) * esz;
            rn_fill_run(p, dst, gbase + in->start + b * in->block_stride, in->len);
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
}

static ldt_status random_kernel(const ldt__kcall *c) {
    const char *name = rn_name(c->op);
    ldt__rn_params p;
    LDT_CHECK(ldt__rn_params_make(c, name, 0, &p));
    int64_t n;
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &n));
    if (c->region) {
        LDT_CHECK(ldt__region_check(name, c));
        if (n > 0) rn_fill_region(&p, c->out.data, c->region, c->global_shape);
        return LDT_OK;
    }
    rn_fill_run(&p, c->out.data, 0, n); /* the whole tensor: global index = local index */
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Dispatch.
 */
ldt_status ldt__k_random(const ldt__kcall *c) {
    switch (c->op) {
    case LDT_OP_RAND:
    case LDT_OP_RANDN:
    case LDT_OP_BERNOULLI:
    case LDT_OP_TRUNC_NORMAL:
    case LDT_OP_RANDINT: return random_kernel(c);
    default:
        LDT_FAIL(LDT_ERR_INTERNAL,
                 "random kernels: op %d is not rand, randn, bernoulli, trunc_normal or randint",
                 c->op);
    }
}

/* ---------------------------------------------------------------------------------------
 * Bound calls: the parameters and the region checked once; the seed and offset are read per
 * call (a replay patches the offset to its place on the stream).
 */
typedef struct rn_bplan {
    ldt__rn_params p;
    int64_t n;
} rn_bplan;

static ldt_status random_bound(const ldt__kcall *c) {
    const rn_bplan *b = (const rn_bplan *)c->plan;
    ldt__rn_params p = b->p;
    p.seed = (uint64_t)c->attrs->i[0];
    p.offset = (uint64_t)c->attrs->i[1];
    if (c->region) {
        if (b->n > 0) rn_fill_region(&p, c->out.data, c->region, c->global_shape);
        return LDT_OK;
    }
    rn_fill_run(&p, c->out.data, 0, b->n);
    return LDT_OK;
}

ldt_status ldt__kb_random(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    const char *name = rn_name(c->op);
    rn_bplan b;
    *plan = NULL;
    if (c->op != LDT_OP_RAND && c->op != LDT_OP_RANDN && c->op != LDT_OP_BERNOULLI &&
        c->op != LDT_OP_TRUNC_NORMAL && c->op != LDT_OP_RANDINT)
        LDT_FAIL(LDT_ERR_INTERNAL,
                 "random kernels: op %d is not rand, randn, bernoulli, trunc_normal or randint",
                 c->op);
    LDT_CHECK(ldt__rn_params_make(c, name, 0, &b.p));
    LDT_CHECK(ldt_shape_numel(&c->out.shape, &b.n));
    if (c->region) LDT_CHECK(ldt__region_check(name, c));
    LDT_CHECK(ldt__kplan_alloc(name, sizeof b, plan));
    memcpy(*plan, &b, sizeof b);
    *fn = random_bound;
    return LDT_OK;
}
