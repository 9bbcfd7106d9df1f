/* The static memory plan of one rank's program: every value not held elsewhere gets an
 * offset in one arena, from liveness.
 *
 * A value lives from the instruction that first writes it to the last one that reads it (to
 * the end for values the caller keeps). Placement is greedy by size with best fit (as in
 * TFLite's arena planner): values in decreasing size (ties: earlier definition first, then
 * lower id), each at the smallest gap between already placed values whose lifetimes overlap
 * it that holds it, else at the end. The lower bound reported beside the arena is the
 * largest sum of bytes live at one instruction. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/memory.h"

#define ALIGN 64
#define MAX_LEVELS 8  /* bucket levels (64 instructions, then LEVEL_SPAN times longer each) */
#define LEVEL_SPAN 8
#define SPAN_MAX 4    /* a value goes in the lowest level where it spans at most this many */

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int64_t value_bytes(const ldt__value *v) {
    int64_t n = ldt_dtype_size((ldt_dtype)v->dtype);
    for (int d = 0; d < v->shape.ndim; d++) n *= v->shape.dims[d];
    return n;
}

ldt_status ldt__liveness(const ldt__program *p, const uint8_t *keep, int64_t *first,
                         int64_t *last) {
    for (int32_t v = 0; v < p->nvals; v++) first[v] = last[v] = -1;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        for (int k = 0; k < x->nin; k++) {
            int32_t v = p->ops[x->in + k];
            if (first[v] < 0)
                LDT_FAIL(LDT_ERR_INTERNAL, "memory: value v%d is read at instruction %lld before "
                         "it is written", v, (long long)i);
            last[v] = i;
        }
        for (int k = 0; k < (x->nout ? x->nout : 1); k++) { /* a bucket writes nout values */
            int32_t v = x->nout ? p->ops[x->in + x->nin + k] : x->out;
            if (first[v] < 0) first[v] = i;
            if (last[v] < i) last[v] = i;
        }
    }
    for (int32_t v = 0; v < p->nvals; v++)
        if (first[v] >= 0 && keep && keep[v]) last[v] = p->nins;
    return LDT_OK;
}

typedef struct item {
    int32_t v; /* the value, or -1 - g for fusion bucket g */
    int64_t size, first, last, off;
} item;

static int by_size(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->v < y->v ? -1 : 1;
}

typedef struct span {
    int64_t off, end;
} span;

/* Spans in increasing offset (the order among equal offsets does not change the gaps found
 * below). Inline rather than qsort: it runs once per placed value, on the values that
 * overlap it. */
static void sort_spans(span *a, int32_t n) {
    while (n > 16) {
        int32_t i = 0, j = n - 1, m = n / 2;
        span t;
        /* median of three as the pivot */
        if (a[m].off < a[0].off) t = a[m], a[m] = a[0], a[0] = t;
        if (a[j].off < a[0].off) t = a[j], a[j] = a[0], a[0] = t;
        if (a[j].off < a[m].off) t = a[j], a[j] = a[m], a[m] = t;
        int64_t pv = a[m].off;
        while (i <= j) {
            while (a[i].off < pv) i++;
            while (a[j].off > pv) j--;
            if (i <= j) {
                t = a[i], a[i] = a[j], a[j] = t;
                i++;
                j--;
            }
        }
        /* the smaller side by recursion, the larger by the loop: depth stays logarithmic */
        if (j + 1 < n - i) {
            sort_spans(a, j + 1);
            a += i;
            n -= i;
        } else {
            sort_spans(a + i, n - i);
            n = j + 1;
        }
    }
    for (int32_t i = 1; i < n; i++) {
        span t = a[i];
        int32_t j = i;
        while (j > 0 && a[j - 1].off > t.off) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = t;
    }
}

/* The same for many spans, by offset in ALIGN units, least significant RADIX_BITS digit
 * first (stable passes; passes whose digit is the same everywhere are skipped); tmp holds n
 * spans. The long-lived values of a huge program overlap thousands of others each. */
#define RADIX_BITS 11
static void sort_spans_radix(span *a, span *tmp, int32_t n) {
    int64_t hi = 0;
    uint32_t count[1u << RADIX_BITS];
    span *src = a, *dst = tmp;
    for (int32_t i = 0; i < n; i++)
        if (a[i].off > hi) hi = a[i].off;
    hi /= ALIGN;
    for (int shift = 0; shift < 63 && (hi >> shift) != 0; shift += RADIX_BITS) {
        uint32_t sum = 0, mask = (1u << RADIX_BITS) - 1;
        span *t;
        memset(count, 0, sizeof count);
        for (int32_t i = 0; i < n; i++) count[(uint32_t)((src[i].off / ALIGN) >> shift) & mask]++;
        if (count[(uint32_t)((src[0].off / ALIGN) >> shift) & mask] == (uint32_t)n) continue;
        for (uint32_t d = 0; d <= mask; d++) {
            uint32_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (int32_t i = 0; i < n; i++) dst[count[(uint32_t)((src[i].off / ALIGN) >> shift) & mask]++] = src[i];
        t = src, src = dst, dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Placed items of a span of time, in offset order. */
typedef struct tbucket {
    int32_t *v;
    int32_t n, cap;
} tbucket;

/* Adds placed item a to bucket b, after the members at or below its offset; 0 when out of
 * memory. */
static int bucket_put(tbucket *b, const item *it, int32_t a) {
    int32_t lo = 0, hi = b->n;
    if (b->n == b->cap) {
        int32_t c = b->cap ? 2 * b->cap : 8, *nv = realloc(b->v, (size_t)c * sizeof *nv);
        if (!nv) return 0;
        b->v = nv;
        b->cap = c;
    }
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (it[b->v[mid]].off <= it[a].off) lo = mid + 1;
        else hi = mid;
    }
    memmove(b->v + lo + 1, b->v + lo, (size_t)(b->n - lo) * sizeof *b->v);
    b->v[lo] = a;
    b->n++;
    return 1;
}

ldt_status ldt__memory_plan(const ldt__program *p, const uint8_t *outside, const uint8_t *keep,
                            ldt__mem_plan *out) {
    int64_t *first = NULL, *last = NULL, *delta = NULL, live = 0;
    item *it = NULL;
    span *sp = NULL, *sp2 = NULL;
    int32_t n = 0, *seen = NULL, *gitem = NULL;
    int64_t nb = 0, bsize = 1, lsize[MAX_LEVELS], lnb[MAX_LEVELS], lbase[MAX_LEVELS];
    int nlev = 1;
    tbucket *bucket = NULL;
    int64_t nball = 0;
    ldt_status st = LDT_OK;
    memset(out, 0, sizeof *out);
    out->offset = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *out->offset);
    first = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *first);
    last = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *last);
    it = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *it);
    sp = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *sp);
    sp2 = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *sp2);
    delta = calloc((size_t)p->nins + 2, sizeof *delta);
    if (!out->offset || !first || !last || !it || !sp || !sp2 || !delta)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory for %d values", p->nvals);
    LDT_CHECK_GOTO(ldt__liveness(p, keep, first, last));
    /* a fusion bucket is one item: its values back to back, lifetime the union of theirs */
    if (p->vgroup && p->ngroups) {
        gitem = malloc((size_t)p->ngroups * sizeof *gitem);
        if (!gitem) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory");
        for (int32_t g = 0; g < p->ngroups; g++) gitem[g] = -1;
    }
    for (int32_t v = 0; v < p->nvals; v++) {
        int32_t g = p->vgroup && p->ngroups ? p->vgroup[v] : -1;
        int64_t b = value_bytes(&p->vals[v]);
        out->offset[v] = -1;
        if (first[v] < 0 || (outside && outside[v])) continue;
        if (g >= 0 && gitem[g] >= 0) { /* joins its bucket's item */
            item *x = &it[gitem[g]];
            x->size += b;
            if (first[v] < x->first) x->first = first[v];
            if (last[v] > x->last) x->last = last[v];
            continue;
        }
        it[n].v = g >= 0 ? -1 - g : v;
        it[n].size = b;
        it[n].first = first[v];
        it[n].last = last[v];
        if (g >= 0) gitem[g] = n;
        n++;
    }
    for (int32_t a = 0; a < n; a++) {
        it[a].size = align_up(it[a].size);
        if (it[a].size == 0) { /* empty shards need no bytes, only a valid address */
            if (it[a].v >= 0) out->offset[it[a].v] = 0;
            it[a--] = it[--n];
            continue;
        }
    }
    for (int32_t a = 0; a < n; a++) {
        delta[it[a].first] += it[a].size;
        delta[it[a].last + 1] -= it[a].size;
    }
    for (int64_t i = 0; i <= p->nins; i++) {
        live += delta[i];
        if (live > out->bound_bytes) out->bound_bytes = live;
    }
    qsort(it, (size_t)n, sizeof *it, by_size);
    /* placed values by time bucket, so finding the ones that overlap a lifetime looks at
     * its buckets only (programs are long, most values short-lived). Every value is held in
     * each short bucket (64 instructions) that its lifetime meets, in offset order: a
     * lifetime within one bucket finds its overlaps there, in order. A longer lifetime looks
     * them up in levels of buckets, each LEVEL_SPAN times as long as the one below, where a
     * value is held only in the lowest level at which it spans at most SPAN_MAX buckets (a
     * long-lived value a few times, not once per short bucket), and sorts what it found. */
    nb = p->nins / 64 + 1;
    bsize = (p->nins + 1 + nb - 1) / nb;
    for (int l = 0;; l++) {
        lsize[l] = l == 0 ? bsize : lsize[l - 1] * LEVEL_SPAN;
        lnb[l] = (p->nins + 1 + lsize[l] - 1) / lsize[l];
        lbase[l] = l == 0 ? nb : lbase[l - 1] + lnb[l - 1];
        if (lnb[l] <= SPAN_MAX || l == MAX_LEVELS - 1) { /* the top level: any lifetime */
            nlev = l + 1;
            break;
        }
    }
    nball = lbase[nlev - 1] + lnb[nlev - 1];
    bucket = calloc((size_t)nball, sizeof *bucket);
    seen = calloc((size_t)(n ? n : 1), sizeof *seen);
    if (!bucket || !seen) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory");
    for (int32_t a = 0; a < n; a++) {
        int32_t ns = 0, lv = nlev - 1;
        int64_t best = -1, best_gap = INT64_MAX, prev_end = 0;
        int64_t b0 = it[a].first / bsize, b1 = it[a].last / bsize;
        for (int l = 0; l < nlev; l++)
            if (it[a].last / lsize[l] - it[a].first / lsize[l] < SPAN_MAX) {
                lv = l;
                break;
            }
        if (b0 == b1) { /* one bucket, kept in offset order: no sort */
            for (int32_t j = 0; j < bucket[b0].n; j++) {
                int32_t o = bucket[b0].v[j];
                if (it[o].first <= it[a].last && it[a].first <= it[o].last) {
                    sp[ns].off = it[o].off;
                    sp[ns++].end = it[o].off + it[o].size;
                }
            }
        } else {
            for (int l = 0; l < nlev; l++)
                for (int64_t b = lbase[l] + it[a].first / lsize[l]; b <= lbase[l] + it[a].last / lsize[l]; b++)
                    for (int32_t j = 0; j < bucket[b].n; j++) {
                        int32_t o = bucket[b].v[j];
                        if (seen[o] == a + 1) continue;
                        seen[o] = a + 1;
                        if (it[o].first <= it[a].last && it[a].first <= it[o].last) {
                            sp[ns].off = it[o].off;
                            sp[ns++].end = it[o].off + it[o].size;
                        }
                    }
            if (ns > 512) sort_spans_radix(sp, sp2, ns);
            else sort_spans(sp, ns);
        }
        for (int32_t s = 0; s < ns; s++) {
            int64_t gap = sp[s].off - prev_end;
            if (gap >= it[a].size && gap < best_gap) {
                best = prev_end;
                best_gap = gap;
            }
            if (sp[s].end > prev_end) prev_end = sp[s].end;
        }
        if (best < 0) best = prev_end;
        it[a].off = best;
        if (it[a].v >= 0) out->offset[it[a].v] = best;
        if (best + it[a].size > out->arena_bytes) out->arena_bytes = best + it[a].size;
        for (int64_t b = b0; b <= b1; b++)
            if (!bucket_put(&bucket[b], it, a)) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory");
        for (int64_t b = lbase[lv] + it[a].first / lsize[lv]; b <= lbase[lv] + it[a].last / lsize[lv]; b++)
            if (!bucket_put(&bucket[b], it, a)) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory");
    }
    /* bucket members: back to back from their item's offset, in operand order (the fused
     * call's order, which is value order within the bucket: members are made in order). A
     * value reduced in two buckets (over dp, then over tp) belongs to one group, the last
     * that took it: it is placed once, where it first appears, so each group's values fill
     * its item exactly and no more (a bucket with another group's member is not contiguous;
     * exec/bind.c packs it) */
    if (gitem) {
        int64_t *at = malloc((size_t)p->ngroups * sizeof *at);
        uint8_t *placed = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
        if (!at || !placed) {
            free(at);
            free(placed);
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "memory: out of memory");
        }
        for (int32_t g = 0; g < p->ngroups; g++) at[g] = -1;
        for (int32_t a = 0; a < n; a++)
            if (it[a].v < 0) at[-1 - it[a].v] = it[a].off;
        for (int64_t i = 0; i < p->nins; i++) {
            const ldt__instr *x = &p->ins[i];
            /* a ZeRO bucket's grouped side: a reduce_scatter's outputs, an all_gather's inputs */
            int from = x->kind == LDT__I_BUCKET && x->coll == LDT_COLL_REDUCE_SCATTER ? x->nin : 0;
            if ((x->kind != LDT__I_ALL_REDUCE && x->kind != LDT__I_BUCKET) || x->nin < 2) continue;
            for (int k = from; k < from + x->nin; k++) {
                int32_t v = p->ops[x->in + k], g = p->vgroup[v];
                if (g < 0 || at[g] < 0 || placed[v]) continue;
                placed[v] = 1;
                out->offset[v] = at[g];
                at[g] += value_bytes(&p->vals[v]);
            }
        }
        free(at);
        free(placed);
    }
fail:
    free(gitem);
    free(first);
    free(last);
    free(it);
    free(sp);
    free(sp2);
    for (int64_t b = 0; bucket && b < nball; b++) free(bucket[b].v);
    free(bucket);
    free(seen);
    free(delta);
    if (st != LDT_OK) {
        free(out->offset);
        out->offset = NULL;
    }
    return st;
}

void ldt__mem_plan_free(ldt__mem_plan *m) {
    if (!m) return;
    free(m->offset);
    m->offset = NULL;
}
