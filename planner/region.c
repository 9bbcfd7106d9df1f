/* Intersections of two regions of one tensor: per dim, a merge of two sorted run lists. */
#include "planner/region.h"

int64_t ldt__dim_isect(const ldt_dim_runs *a, const ldt_dim_runs *b, ldt__seg *out,
                       int64_t *total) {
    int64_t n = 0, sum = 0, i = 0, j = 0;
    if (a->len <= 0 || b->len <= 0) {
        if (total) *total = 0;
        return 0;
    }
    /* Runs of each side are disjoint and increasing (block_stride >= len): walk both lists
     * once, advancing whichever run ends first. */
    while (i < a->blocks && j < b->blocks) {
        int64_t as = a->start + i * a->block_stride, ae = as + a->len;
        int64_t bs = b->start + j * b->block_stride, be = bs + b->len;
        int64_t lo = as > bs ? as : bs, hi = ae < be ? ae : be;
        if (lo < hi) {
            if (out) {
                out[n].a = i * a->len + (lo - as);
                out[n].b = j * b->len + (lo - bs);
                out[n].len = hi - lo;
            }
            n++;
            sum += hi - lo;
        }
        if (ae <= be) i++;
        if (be <= ae) j++;
    }
    if (total) *total = sum;
    return n;
}

int64_t ldt__region_isect_numel(const ldt_region *a, const ldt_region *b) {
    int64_t n = 1;
    if (a->numel == 0 || b->numel == 0) return 0;
    for (int d = 0; d < a->ndim; d++) {
        int64_t t;
        ldt__dim_isect(&a->runs[d], &b->runs[d], NULL, &t);
        n *= t;
        if (n == 0) return 0;
    }
    return n;
}
