/* View CPU kernels: reshape, permute, slice, select, cat, expand, alias, redistribute's copy. */
#include <stdint.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "kernels/common/view_plan.h"
#include "kernels/cpu/kernel.h"

/* ---------------------------------------------------------------------------------------
 * Kernels. Every view but cat is a strided gather: output element (i0..in-1), row-major, is
 * source element sum(i_d * st[d]) from a base offset, with st[d] = 0 on broadcast dims.
 */

/* One row of len elements of es bytes, source stride s elements (0: one value repeated). */
static void copy_row(char *dst, const char *src, int64_t len, int64_t s, size_t es) {
    if (s == 1) {
        ldt__copy(dst, src, (size_t)len * es);
        return;
    }
    switch (es) {
    case 1:
        for (int64_t i = 0; i < len; i++) ((uint8_t *)dst)[i] = ((const uint8_t *)src)[i * s];
        break;
    case 2:
        for (int64_t i = 0; i < len; i++) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i * s];
        break;
    case 4:
        for (int64_t i = 0; i < len; i++) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i * s];
        break;
    case 8:
        for (int64_t i = 0; i < len; i++) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i * s];
        break;
    default:
        for (int64_t i = 0; i < len; i++)
            memcpy(dst + (size_t)i * es, src + i * s * (int64_t)es, es);
        break;
    }
}

/* Transposed tile: the output row dim (len, source stride s) and the dim above it (rows,
 * source stride 1, output stride len). Going through 32x32 tiles reads and writes whole cache
 * lines instead of touching one element per line on the strided side. */
static void copy_transposed(char *dst, const char *src, int64_t rows, int64_t len, int64_t s,
                            size_t es) {
    enum { T = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += T)
        for (int64_t c0 = 0; c0 < len; c0 += T) {
            int64_t r1 = r0 + T < rows ? r0 + T : rows, c1 = c0 + T < len ? c0 + T : len;
            for (int64_t r = r0; r < r1; r++)
                copy_row(dst + (r * len + c0) * (int64_t)es, src + (r + c0 * s) * (int64_t)es,
                         c1 - c0, s, es);
        }
}

/* dst[row-major over dims] = src[base + sum(i_d * st[d])]. Size-1 dims are dropped and dims
 * contiguous in the source are merged, so a plain copy is one memcpy and a slice of whole
 * rows is one memcpy per run. */
static void gather(char *dst, const char *src, int nd, const int64_t *dims, const int64_t *st,
                   size_t es) {
    int64_t cd[LDT_MAX_DIMS], cs[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0}, off = 0, rows = 1;
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (dims[d] == 1) continue;
        if (m > 0 && cs[m - 1] == st[d] * dims[d]) {
            cd[m - 1] *= dims[d];
            cs[m - 1] = st[d];
        } else {
            cd[m] = dims[d];
            cs[m] = st[d];
            m++;
        }
    }
    if (m == 0) {
        memcpy(dst, src, es);
        return;
    }
    int64_t len = cd[m - 1], s = cs[m - 1];
    int outer = m - 1; /* dims walked by the odometer */
    /* A transpose (row strided, the dim above contiguous) goes tile by tile. */
    int tiled = m >= 2 && s != 1 && s != 0 && cs[m - 2] == 1;
    if (tiled) outer = m - 2;
    for (int d = 0; d < outer; d++) rows *= cd[d];
    int64_t block = tiled ? cd[m - 2] * len : len;
    for (int64_t r = 0; r < rows; r++) {
        char *o = dst + r * block * (int64_t)es;
        const char *i = src + off * (int64_t)es;
        if (tiled)
            copy_transposed(o, i, cd[m - 2], len, s, es);
        else
            copy_row(o, i, len, s, es);
        for (int d = outer - 1; d >= 0; d--) {
            off += cs[d];
            if (++idx[d] < cd[d]) break;
            off -= cs[d] * cd[d];
            idx[d] = 0;
        }
    }
}

/* cat along dim: for every outer index each input contributes one contiguous run of
 * d_k * inner (kernels/common/view_plan.h). */
static void cat_run(const ldt__kcall *c, int dim, size_t es) {
    const ldt_shape *os = &c->out.shape;
    int64_t outer, inner;
    ldt__view_cat_geom(os, dim, &outer, &inner);
    int64_t orow = os->dims[dim] * inner * (int64_t)es; /* bytes per outer index in out */
    int64_t at = 0;                                      /* byte offset of input k in a row */
    for (int k = 0; k < c->nin; k++) {
        int64_t run = c->in[k].shape.dims[dim] * inner * (int64_t)es;
        if (run > 0)
            for (int64_t o = 0; o < outer; o++)
                ldt__copy((char *)c->out.data + o * orow + at,
                       (const char *)c->in[k].data + o * run, (size_t)run);
        at += run;
    }
}

/* ---------------------------------------------------------------------------------------
 * Dispatch: the checks and the plan (kernels/common/view_plan.h), then one of the moves
 * above.
 */
static ldt_status view_run(const ldt__kcall *c, const ldt__view_plan *pp) {
    char *dst = (char *)c->out.data;
    const char *src = (const char *)c->in[0].data;
    if (pp->n == 0) return LDT_OK;
    switch (pp->kind) {
    case LDT__VIEW_COPY:
        if (dst != src) ldt__move(dst, src, (size_t)pp->n * pp->es);
        return LDT_OK;
    case LDT__VIEW_GATHER:
        gather(dst, src + pp->base * (int64_t)pp->es, pp->nd, pp->dims, pp->st, pp->es);
        return LDT_OK;
    default: cat_run(c, pp->dim, pp->es); return LDT_OK;
    }
}

ldt_status ldt__k_view(const ldt__kcall *c) {
    ldt__view_plan p;
    LDT_CHECK(ldt__view_plan_make(c, &p));
    return view_run(c, &p);
}

/* Bound calls: the plan made and checked once. */
static ldt_status view_copy_bound(const ldt__kcall *c) {
    const ldt__view_plan *p = (const ldt__view_plan *)c->plan;
    if (c->out.data != c->in[0].data) ldt__move(c->out.data, c->in[0].data, (size_t)p->n * p->es);
    return LDT_OK;
}

static ldt_status view_bound(const ldt__kcall *c) {
    return view_run(c, (const ldt__view_plan *)c->plan);
}

ldt_status ldt__kb_view(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan) {
    ldt__view_plan p;
    *plan = NULL;
    LDT_CHECK(ldt__view_plan_make(c, &p));
    LDT_CHECK(ldt__kplan_alloc(ldt__builtin_op_name(c->op), sizeof p, plan));
    memcpy(*plan, &p, sizeof p);
    *fn = p.n > 0 && p.kind == LDT__VIEW_COPY ? view_copy_bound : view_bound;
    return LDT_OK;
}
