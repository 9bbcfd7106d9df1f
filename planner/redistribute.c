/* Redistribution planning: step pricing from every rank's region, Dijkstra over placement
 * states, merging onto flattened groups, the naive route every plan must beat, and plans
 * across two meshes. Nothing here moves data; exec/redistribute.c runs the steps. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/error.h"
#include "core/mesh.h"
#include "planner/profiles.h"
#include "planner/redistribute.h"
#include "planner/region.h"

/* A search that would visit more states than this (huge meshes with many tensor dims)
 * returns the naive route instead: planning time stays bounded. */
#define MAX_NODES 100000
/* A step that only enumerating the ranks can price (an all_to_all whose overlaps depend on
 * where chunks start, see class_ok) is not considered on meshes of more ranks than this: the
 * search and the merging skip it, so planning stays proportional to what is printed. Every
 * plan keeps a route without such steps (the naive one). */
#define MAX_ENUM_RANKS 65536

/* Placement lists compared by value (their structs have padding bytes, so never memcmp). */
static int same_placements(const ldt_placement *a, const ldt_placement *b, int n) {
    for (int i = 0; i < n; i++)
        if (!ldt_placement_equal(&a[i], &b[i])) return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Pricing. A step's figures are the maximum over ranks of what each rank sends and receives,
 * counted exactly from the regions before and after it, so uneven and interleaved shards are
 * exact. Ranks are not enumerated: along a mesh dim of size k a rank's chunk of a length L is
 * full below a = L / ceil(L/k), short at a and empty above, so the coordinates fall into a few
 * cells over which every chunk length that any spec of the search can produce is the same
 * (cut at every such a and a + 1, each interval's ends cells of their own so a ring
 * neighbour of an interior coordinate stays in its interval). A step whose figures depend on
 * lengths only (all but some all_to_all: see class_ok) is priced from one rank per
 * combination of cells, its group sums counted cell by cell; an all_to_all by tensor dim
 * (price_a2a), on cells of alike coordinates where its overlaps depend on where chunks start
 * (exact_cells); with no cells (too many lengths) the ranks are enumerated.
 */
#define MAX_LENGTHS 4096
/* The lengths one tensor dim can take at one mesh dim of one spec (3 per sharding mesh dim
 * before it: full, short, empty; deduplicated, so few). */
#define MAX_CHAIN 512

typedef struct pricer {
    const ldt_mesh *mesh;
    const ldt_cost_model *cm;
    int nd, N;
    size_t es;
    int64_t mstride[LDT_MAX_DIMS]; /* row-major position strides of the mesh */
    int classes;                   /* 0: the cells could not be built, enumerate */
    int ncell[LDT_MAX_DIMS];
    int64_t *cell_at[LDT_MAX_DIMS], *cell_n[LDT_MAX_DIMS]; /* first coordinate, size */
    /* The cells of the step being priced (step_cells): cut only by what its two specs chunk,
     * so a step costs what its specs need, not what every spec of the search could. */
    int sncell[LDT_MAX_DIMS];
    int64_t *scell_at[LDT_MAX_DIMS], *scell_n[LDT_MAX_DIMS];
    int64_t *slens;                /* scratch: LDT_MAX_DIMS x MAX_LENGTHS lengths */
    /* Enumeration, allocated on first need. */
    int64_t *coords;               /* N x LDT_MAX_DIMS */
    ldt_region *rx, *ry;           /* every position's region before / after */
    int *members;                  /* N scratch */
    int64_t *ftab;                 /* price_a2a's per-dim tables, ftab_cap entries */
    size_t ftab_cap;
    ldt__step_memo *memo;          /* step prices of this (mesh, shape, dtype, model); NULL: none */
    /* The search's cells are built on the first step the memo does not hold (most searches
     * of a plan find every step there); from these specs, borrowed. */
    const ldt_spec *csrc, *cdst;
} pricer;

static void pricer_free(pricer *pr) {
    free(pr->coords);
    free(pr->rx);
    free(pr->ry);
    free(pr->members);
    for (int d = 0; d < LDT_MAX_DIMS; d++) {
        free(pr->cell_at[d]);
        free(pr->cell_n[d]);
        free(pr->scell_at[d]);
        free(pr->scell_n[d]);
    }
    free(pr->slens);
    free(pr->ftab);
    memset(pr, 0, sizeof *pr);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Adds v to the set (n entries, sorted on use); 0 when full. */
static int set_add(int64_t *set, int *n, int cap, int64_t v) {
    for (int i = 0; i < *n; i++)
        if (set[i] == v) return 1;
    if (*n == cap) return 0;
    set[(*n)++] = v;
    return 1;
}

int ldt__chunk_cuts(int64_t k, const int64_t *lens, int nlens, int64_t *cut) {
    int ncut = 0;
    cut[ncut++] = 0;
    cut[ncut++] = k;
    for (int j = 0; j < nlens; j++) {
        int64_t L = lens[j], ch, a;
        if (L <= 0) continue;
        ch = L / k + (L % k != 0);
        a = L / ch;
        if (a < k) cut[ncut++] = a;
        if (a + 1 < k) cut[ncut++] = a + 1;
    }
    qsort(cut, (size_t)ncut, sizeof *cut, cmp_i64);
    return ncut;
}

/* The cells of mesh dim i: cut where the chunk of any length in `lens` over k changes; into
 * *at, *n (replacing what they held) and *count. */
static ldt_status cut_cells(const pricer *pr, int i, const int64_t *lens, int nlens, int ends,
                            int64_t **at, int64_t **n, int *count) {
    int64_t k = ldt_mesh_dim_size(pr->mesh, i), *cut = malloc((size_t)(2 * nlens + 2) * sizeof *cut);
    int ncut, nc = 0;
    if (!cut) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    ncut = ldt__chunk_cuts(k, lens, nlens, cut);
    free(*at);
    free(*n);
    *at = malloc((size_t)(3 * ncut) * sizeof(int64_t));
    *n = malloc((size_t)(3 * ncut) * sizeof(int64_t));
    if (!*at || !*n) {
        free(cut);
        free(*at);
        free(*n);
        *at = *n = NULL;
        *count = 0;
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    for (int j = 0; j + 1 < ncut; j++) {
        int64_t lo = cut[j], hi = cut[j + 1];
        if (hi <= lo) continue;
        if (!ends) { /* the interval whole */
            (*at)[nc] = lo;
            (*n)[nc++] = hi - lo;
            continue;
        }
        (*at)[nc] = lo;
        (*n)[nc++] = 1;
        if (hi - lo >= 3) {
            (*at)[nc] = lo + 1;
            (*n)[nc++] = hi - lo - 2;
        }
        if (hi - lo >= 2) {
            (*at)[nc] = hi - 1;
            (*n)[nc++] = 1;
        }
    }
    *count = nc;
    free(cut);
    return LDT_OK;
}

static ldt_status build_cells(pricer *pr, int i, const int64_t *lens, int nlens) {
    return cut_cells(pr, i, lens, nlens, 1, &pr->cell_at[i], &pr->cell_n[i], &pr->ncell[i]);
}

int ldt__chunk_lengths(const ldt_mesh *mesh, const ldt_shape *shape, const ldt_placement *pl,
                       int64_t *lens, int *nlens, int cap) {
    int nd = ldt_mesh_ndim(mesh);
    for (int d = 0; d < shape->ndim; d++) {
        int64_t cur[MAX_CHAIN], next[MAX_CHAIN];
        int ncur = 1;
        cur[0] = shape->dims[d];
        for (int i = 0; i < nd; i++) {
            const ldt_placement *p = &pl[i];
            int64_t k = ldt_mesh_dim_size(mesh, i);
            int nn = 0;
            if ((p->kind != LDT_PLACE_SHARD && p->kind != LDT_PLACE_INTERLEAVED_SHARD) || p->dim != d)
                continue;
            if (p->kind == LDT_PLACE_INTERLEAVED_SHARD) { /* the blocks are chunked, once */
                cur[0] = p->blocks > 0 ? shape->dims[d] / p->blocks : 0;
                ncur = 1;
            }
            for (int j = 0; j < ncur; j++) {
                int64_t L = cur[j], ch, a;
                if (!set_add(lens + (size_t)i * (size_t)cap, &nlens[i], cap, L)) return 0;
                if (L <= 0) {
                    if (!set_add(next, &nn, MAX_CHAIN, 0)) return 0;
                    continue;
                }
                ch = L / k + (L % k != 0);
                a = L / ch;
                if (!set_add(next, &nn, MAX_CHAIN, ch) ||
                    (a < k && !set_add(next, &nn, MAX_CHAIN, L - a * ch)) ||
                    (a + 1 < k && !set_add(next, &nn, MAX_CHAIN, 0)))
                    return 0;
            }
            memcpy(cur, next, (size_t)nn * sizeof *cur);
            ncur = nn;
        }
    }
    return 1;
}

/* The cells of step X -> Y: every mesh dim cut only where a length that X or Y chunks along
 * it changes chunk (a mesh dim chunking nothing in either is one cell, or three on a ring).
 * Within a cell, X's and Y's regions have the same lengths, as with the cells of the whole
 * search (pricer_cells), which are their superset. 0 when a set of lengths is full: the
 * caller uses those. */
static ldt_status step_cells(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                             const ldt_redist_step *s, int *ok) {
    /* a ring neighbour is priced (all_gather, reduce_scatter) along the group's dims: there
     * each interval's ends are cells of their own, so an interior rank's neighbour stays in
     * its interval; elsewhere an interval is one cell */
    unsigned ring = 0;
    int nlens[LDT_MAX_DIMS] = {0};
    *ok = 0;
    if (!pr->slens && !(pr->slens = malloc((size_t)(pr->nd ? pr->nd : 1) * MAX_LENGTHS * sizeof *pr->slens)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    if (!ldt__chunk_lengths(pr->mesh, &X->shape, X->placements, pr->slens, nlens, MAX_LENGTHS) ||
        !ldt__chunk_lengths(pr->mesh, &Y->shape, Y->placements, pr->slens, nlens, MAX_LENGTHS))
        return LDT_OK;
    if (s->collective == LDT_COLL_ALL_GATHER || s->collective == LDT_COLL_REDUCE_SCATTER)
        for (int j = 0; j < s->ndims; j++) ring |= 1u << s->dims[j];
    for (int i = 0; i < pr->nd; i++)
        LDT_CHECK(cut_cells(pr, i, pr->slens + (size_t)i * MAX_LENGTHS, nlens[i], (ring >> i) & 1,
                            &pr->scell_at[i], &pr->scell_n[i], &pr->sncell[i]));
    *ok = 1;
    return LDT_OK;
}


/* Cells for every spec the plan may price: any mesh dims may Shard any tensor dim (outer ones
 * first), and InterleavedShard(d, b) chunks n_d / b. */
static ldt_status pricer_cells(pricer *pr, const ldt_spec *src, const ldt_spec *dst) {
    ldt_status st = LDT_OK;
    int64_t *lens[LDT_MAX_DIMS] = {0}, *all = NULL;
    int nlen[LDT_MAX_DIMS] = {0}, ndim = src->shape.ndim, ok = 1;
    all = malloc((size_t)MAX_LENGTHS * sizeof *all);
    if (!all) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    for (int d = 0; d < ndim; d++) {
        lens[d] = malloc((size_t)MAX_LENGTHS * sizeof *lens[d]);
        if (!lens[d]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        lens[d][nlen[d]++] = src->shape.dims[d];
    }
    for (int i = 0; i < pr->nd && ok; i++) {
        int64_t k = ldt_mesh_dim_size(pr->mesh, i);
        int nall = 0;
        for (int d = 0; d < ndim && ok; d++)
            for (int j = 0; j < nlen[d] && ok; j++) ok = set_add(all, &nall, MAX_LENGTHS, lens[d][j]);
        for (int s = 0; s < 2 && ok; s++) {
            const ldt_spec *sp = s ? dst : src;
            for (int m = 0; m < sp->nplace && ok; m++)
                if (sp->placements[m].kind == LDT_PLACE_INTERLEAVED_SHARD)
                    ok = set_add(all, &nall, MAX_LENGTHS,
                                 sp->shape.dims[sp->placements[m].dim] / sp->placements[m].blocks);
        }
        if (!ok) break;
        LDT_CHECK_GOTO(build_cells(pr, i, all, nall));
        /* what dim i's chunks leave for the dims after it */
        for (int d = 0; d < ndim && ok; d++)
            for (int j = 0, n0 = nlen[d]; j < n0 && ok; j++) {
                int64_t L = lens[d][j], ch, a;
                if (L <= 0) continue;
                ch = L / k + (L % k != 0);
                a = L / ch;
                ok = set_add(lens[d], &nlen[d], MAX_LENGTHS, ch);
                if (ok && a < k) ok = set_add(lens[d], &nlen[d], MAX_LENGTHS, L - a * ch);
                if (ok && a + 1 < k) ok = set_add(lens[d], &nlen[d], MAX_LENGTHS, 0);
            }
    }
    pr->classes = ok;
fail:
    for (int d = 0; d < ndim; d++) free(lens[d]);
    free(all);
    return st;
}

static ldt_status pricer_init(pricer *pr, const ldt_mesh *mesh, const ldt_cost_model *cm,
                              const ldt_spec *src, const ldt_spec *dst) {
    memset(pr, 0, sizeof *pr);
    pr->mesh = mesh;
    pr->cm = cm;
    pr->nd = ldt_mesh_ndim(mesh);
    pr->N = ldt_mesh_nranks(mesh);
    pr->es = ldt_dtype_size(src->dtype);
    for (int d = pr->nd - 1, s = 1; d >= 0; d--) {
        pr->mstride[d] = s;
        s *= (int)ldt_mesh_dim_size(mesh, d);
    }
    /* built now where the search's edges need them (priceable, past MAX_ENUM_RANKS), else
     * on first use (pricer_ready) */
    if (dst && pr->N > MAX_ENUM_RANKS) {
        ldt_status st = pricer_cells(pr, src, dst);
        if (st != LDT_OK) {
            pricer_free(pr);
            return ldt__trace(st, __FILE__, __LINE__);
        }
    } else if (dst) {
        pr->csrc = src;
        pr->cdst = dst;
    }
    return LDT_OK;
}

/* The search's cells, built if pricer_init deferred them. */
static ldt_status pricer_ready(pricer *pr) {
    const ldt_spec *src = pr->csrc, *dst = pr->cdst;
    if (!src) return LDT_OK;
    pr->csrc = pr->cdst = NULL;
    LDT_CHECK(pricer_cells(pr, src, dst));
    return LDT_OK;
}

/* The per-rank arrays of enumeration. */
static ldt_status pricer_enumerate(pricer *pr) {
    if (pr->coords) return LDT_OK;
    pr->coords = malloc((size_t)pr->N * LDT_MAX_DIMS * sizeof *pr->coords);
    pr->rx = malloc((size_t)pr->N * sizeof *pr->rx);
    pr->ry = malloc((size_t)pr->N * sizeof *pr->ry);
    pr->members = malloc((size_t)pr->N * sizeof *pr->members);
    if (!pr->coords || !pr->rx || !pr->ry || !pr->members) {
        free(pr->coords);
        free(pr->rx);
        free(pr->ry);
        free(pr->members);
        pr->coords = NULL;
        pr->rx = pr->ry = NULL;
        pr->members = NULL;
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory for a mesh of %d ranks",
                 pr->N);
    }
    for (int p = 0; p < pr->N; p++)
        for (int d = 0; d < pr->nd; d++)
            pr->coords[p * LDT_MAX_DIMS + d] = (p / pr->mstride[d]) % ldt_mesh_dim_size(pr->mesh, d);
    return LDT_OK;
}

static ldt_status layouts(pricer *pr, const ldt_spec *s, ldt_region *r) {
    for (int p = 0; p < pr->N; p++) ldt__layout_coord_checked(s, &pr->coords[p * LDT_MAX_DIMS], &r[p]);
    return LDT_OK;
}
/* The positions of the group over `dims` (ascending) through position p, in group order
 * (row-major over those dims); returns the group size and p's index in *k. */
static int group_of(const pricer *pr, int p, int ndims, const int *dims, int *members, int *k) {
    const int64_t *c = &pr->coords[p * LDT_MAX_DIMS];
    int64_t base = p, n = 1, idx = 0;
    for (int i = 0; i < ndims; i++) {
        base -= c[dims[i]] * pr->mstride[dims[i]];
        idx = idx * ldt_mesh_dim_size(pr->mesh, dims[i]) + c[dims[i]];
        n *= ldt_mesh_dim_size(pr->mesh, dims[i]);
    }
    for (int64_t g = 0; g < n; g++) {
        int64_t rem = g, pos = base;
        for (int i = ndims - 1; i >= 0; i--) {
            int64_t sz = ldt_mesh_dim_size(pr->mesh, dims[i]);
            pos += (rem % sz) * pr->mstride[dims[i]];
            rem /= sz;
        }
        members[g] = (int)pos;
    }
    *k = (int)idx;
    return (int)n;
}

static int64_t sat_mul(int64_t a, int64_t b) { return b != 0 && a > INT64_MAX / b ? INT64_MAX : a * b; }

/* Fills the byte counts and seconds of step s (collective, dims set) from regions rx -> ry.
 * The per-rank counts follow the ring: in an all_gather rank k forwards every chunk but its
 * successor's and receives every chunk but its own; a reduce_scatter mirrors that; an
 * all_reduce is both over n segments of the buffer; all_to_all sends each peer what it
 * needs directly. */
static void price_regions(pricer *pr, const ldt_redist_step *s, int64_t *ms, int64_t *mr,
                          int64_t *mw) {
    int64_t maxs = 0, maxr = 0, maxw = 0;
    for (int p = 0; p < pr->N; p++) {
        int k, *m = pr->members;
        int n = group_of(pr, p, s->ndims, s->dims, m, &k);
        int64_t sent = 0, recv = 0, tot = 0, B, l0, l1, lp, st;
        switch (s->collective) {
        case LDT_COLL_ALL_GATHER:
            for (int q = 0; q < n; q++) tot += pr->rx[m[q]].numel;
            recv = tot - pr->rx[m[k]].numel;
            sent = tot - pr->rx[m[(k + 1) % n]].numel;
            break;
        case LDT_COLL_REDUCE_SCATTER:
            B = pr->rx[p].numel;
            sent = B - pr->ry[m[k]].numel;
            recv = B - pr->ry[m[(k + n - 1) % n]].numel;
            break;
        case LDT_COLL_ALL_REDUCE:
            B = pr->rx[p].numel;
            ldt_chunk(B, n, k, &st, &l0);
            ldt_chunk(B, n, (k + 1) % n, &st, &l1);
            ldt_chunk(B, n, (k + n - 1) % n, &st, &lp);
            sent = sat_mul(B, 2) - l0 - l1;
            recv = sat_mul(B, 2) - lp - l0;
            break;
        case LDT_COLL_ALL_TO_ALL:
            for (int q = 0; q < n; q++) {
                if (q == k) continue;
                sent += ldt__region_isect_numel(&pr->rx[p], &pr->ry[m[q]]);
                recv += ldt__region_isect_numel(&pr->rx[m[q]], &pr->ry[p]);
            }
            break;
        default: /* local ops write their output */
            if (pr->ry[p].numel > maxw) maxw = pr->ry[p].numel;
            break;
        }
        if (sent > maxs) maxs = sent;
        if (recv > maxr) maxr = recv;
    }
    *ms = maxs;
    *mr = maxr;
    *mw = maxw;
}

static int shards(const ldt_placement *p, int d) {
    return (p->kind == LDT_PLACE_SHARD || p->kind == LDT_PLACE_INTERLEAVED_SHARD) && p->dim == d;
}

/* Whether an all_to_all's figures depend on chunk lengths only: per tensor dim, the mesh dims
 * sharding it before and after form one list and a longer one that extends it, so one side's
 * run lies inside the other's and an intersection is the inner run's length. (S0 -> IS0:2 on
 * one mesh dim is not such a step: the overlap depends on where the chunks start.) */
static int dim_ok(const ldt_spec *X, const ldt_spec *Y, int d) {
    int cx[LDT_MAX_DIMS], cy[LDT_MAX_DIMS], nx = 0, ny = 0;
    for (int i = 0; i < X->nplace; i++) {
        if (shards(&X->placements[i], d)) cx[nx++] = i;
        if (shards(&Y->placements[i], d)) cy[ny++] = i;
    }
    for (int j = 0; j < nx && j < ny; j++)
        if (cx[j] != cy[j] || !ldt_placement_equal(&X->placements[cx[j]], &Y->placements[cy[j]]))
            return 0;
    return 1;
}

static int class_ok(const ldt_spec *X, const ldt_spec *Y, ldt_collective c) {
    if (c != LDT_COLL_ALL_TO_ALL) return 1;
    for (int d = 0; d < X->shape.ndim; d++)
        if (!dim_ok(X, Y, d)) return 0;
    return 1;
}

/* Smallest l(k) + l(k+1 mod n) over the ring of n, l the torch.chunk lengths of B: the pairs
 * are (full, full) below a - 1, then around a, then (0, 0), and the wrap. */
static int64_t min_pair(int64_t B, int64_t n) {
    int64_t ch = n > 0 ? B / n + (B % n != 0) : 0, a = ch > 0 ? B / ch : 0, best = INT64_MAX;
    int64_t cand[7] = {0, a - 2, a - 1, a, a + 1, n - 2, n - 1};
    for (int i = 0; i < 7; i++) {
        int64_t k = cand[i], st, l0, l1;
        if (k < 0 || k >= n) continue;
        ldt_chunk(B, n, k, &st, &l0);
        ldt_chunk(B, n, (k + 1) % n, &st, &l1);
        if (l0 + l1 < best) best = l0 + l1;
    }
    return best;
}

/* c moved by one step (+1 or -1) along the group's row-major order over dims, with carry. */
static void ring_step(const pricer *pr, const int64_t *c, int ndims, const int *dims, int dir,
                      int64_t *out) {
    memcpy(out, c, LDT_MAX_DIMS * sizeof *out);
    for (int i = ndims - 1; i >= 0; i--) {
        int64_t sz = ldt_mesh_dim_size(pr->mesh, dims[i]);
        out[dims[i]] += dir;
        if (out[dims[i]] >= 0 && out[dims[i]] < sz) return;
        out[dims[i]] = dir > 0 ? 0 : sz - 1;
    }
}

/* Sum over the group of rank c (over dims) of f(q) = numel of (X's region of q) when y == NULL,
 * else |x ∩ Y's region of q| (q's role swapped when swap): one rank per cell, times the
 * cell's size. */
static ldt_status group_sum(const pricer *pr, const int64_t *c, int ndims, const int *dims,
                            const ldt_spec *S, const ldt_region *other, int swap, int64_t *out) {
    int idx[LDT_MAX_DIMS] = {0};
    int64_t q[LDT_MAX_DIMS], sum = 0;
    memcpy(q, c, sizeof q);
    for (;;) {
        ldt_region r;
        int64_t cnt = 1, v;
        for (int i = 0; i < ndims; i++) {
            q[dims[i]] = pr->scell_at[dims[i]][idx[i]];
            cnt *= pr->scell_n[dims[i]][idx[i]];
        }
        ldt__layout_coord_checked(S, q, &r);
        v = !other ? r.numel : swap ? ldt__region_isect_numel(&r, other)
                                    : ldt__region_isect_numel(other, &r);
        sum += v * cnt; /* the total over ranks of a tensor's pieces: no overflow */
        int i = ndims - 1;
        while (i >= 0 && ++idx[i] == pr->sncell[dims[i]]) idx[i--] = 0;
        if (i < 0) break;
    }
    *out = sum;
    return LDT_OK;
}

/* The runs of tensor dim d that S gives the rank at coordinate c, as ldt__layout_coord_checked
 * lays that dim out, with the mesh dims in `skip` left unsplit (as if S replicated there). Only
 * the coordinates of the mesh dims sharding d are read. */
static void run_at(const ldt_spec *S, int d, const int64_t *c, unsigned skip, ldt_dim_runs *r) {
    int64_t n = S->shape.dims[d], st, len;
    r->start = 0;
    r->len = n;
    r->blocks = 1;
    r->block_stride = n;
    for (int i = 0; i < S->nplace; i++) {
        const ldt_placement *p = &S->placements[i];
        if (!shards(p, d) || ((skip >> i) & 1u)) continue;
        if (p->kind == LDT_PLACE_SHARD) {
            ldt_chunk(r->len, S->mesh->dims[i], c[i], &st, &len);
            r->start += st;
            r->len = len;
        } else {
            int64_t bs = n / p->blocks;
            ldt_chunk(bs, S->mesh->dims[i], c[i], &st, &len);
            r->start = st;
            r->len = len;
            r->blocks = p->blocks;
            r->block_stride = bs;
        }
    }
}

/* What runs a and b share (ldt__dim_isect's total; one run each met inline). */
static int64_t runs_isect(const ldt_dim_runs *a, const ldt_dim_runs *b) {
    int64_t t;
    if (a->blocks == 1 && b->blocks == 1) {
        int64_t lo = a->start > b->start ? a->start : b->start;
        int64_t ae = a->start + a->len, be = b->start + b->len, hi = ae < be ? ae : be;
        return a->len > 0 && b->len > 0 && hi > lo ? hi - lo : 0;
    }
    ldt__dim_isect(a, b, NULL, &t);
    return t;
}

/* The mesh dims where S shards tensor dim d. */
static unsigned shard_mask(const ldt_spec *S, int d) {
    unsigned m = 0;
    for (int i = 0; i < S->nplace; i++)
        if (shards(&S->placements[i], d)) m |= 1u << i;
    return m;
}

/* Whether the pieces of tensor dim d that S gives the group (mesh dims `group`) through one
 * rank are disjoint and together are S's run with the group dims unsplit: no mesh dim after a
 * group dim sharding d, off the group, splits d again. */
static int dim_union_ok(const ldt_spec *S, int d, unsigned group) {
    unsigned m = shard_mask(S, d);
    for (int g = 0; g < S->nplace; g++)
        if ((m & group & (1u << g)))
            for (int j = g + 1; j < S->nplace; j++)
                if ((m & (1u << j)) && !(group & (1u << j))) return 0;
    return 1;
}

/* Sum over every coordinate of the group dims in `vary` of |a ∩ S's run of d at c with those
 * coordinates|, a fixed (swap: |S's run ∩ a|). Coordinate by coordinate: along a mesh dim that
 * shards d on both sides a rank meets its own coordinate's piece, not its cell's. */
static int64_t dim_group_sum(const pricer *pr, const ldt_spec *S, int d, const int64_t *c,
                             unsigned vary, const ldt_dim_runs *a, int swap) {
    int dims[LDT_MAX_DIMS], n = 0;
    int64_t q[LDT_MAX_DIMS], sum = 0;
    memcpy(q, c, sizeof q);
    for (int i = 0; i < pr->nd; i++)
        if ((vary >> i) & 1u) {
            dims[n++] = i;
            q[i] = 0;
        }
    for (;;) {
        ldt_dim_runs r;
        int i;
        run_at(S, d, q, 0, &r);
        sum += swap ? runs_isect(&r, a) : runs_isect(a, &r);
        for (i = n - 1; i >= 0; i--) {
            if (++q[dims[i]] < ldt_mesh_dim_size(pr->mesh, dims[i])) break;
            q[dims[i]] = 0;
        }
        if (i < 0) break;
    }
    return sum;
}

static int64_t mul_sat(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* An all_to_all's figures over the step's cells, as price_classes would count them position by
 * position, but by tensor dim: a region is the product of its dims' runs, and a dim's run
 * depends only on the coordinates of the mesh dims that shard that dim. So what rank c shares
 * with itself, sends (its region met with every group member's region after) and receives
 * factor into per-dim figures: each group mesh dim shards at most one tensor dim per spec, so
 * the sum over the group is the product over tensor dims of sums over the group dims sharding
 * that dim (one intersection with their union where it is one run, dim_union_ok), times the
 * group dims the other spec does not shard. Each dim's figures are tabulated once per
 * combination of the cells of its own mesh dims; the positions then only multiply table
 * entries, and mesh dims that shard nothing in either spec are not visited at all. */
static ldt_status price_a2a(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                            const ldt_redist_step *s, int64_t *ms, int64_t *mr) {
    int ndim = X->shape.ndim, nd = pr->nd, idx[LDT_MAX_DIMS] = {0}, used[LDT_MAX_DIMS], nused = 0;
    unsigned group = 0, dep[LDT_MAX_DIMS], any = 0;
    int64_t rep_x = 1, rep_y = 1, size[LDT_MAX_DIMS], at[LDT_MAX_DIMS] = {0}, total = 0;
    int64_t stride[LDT_MAX_DIMS][LDT_MAX_DIMS], *tab[LDT_MAX_DIMS], maxs = 0, maxr = 0;
    for (int d = 0; d < ndim; d++)
        if (X->shape.dims[d] == 0) { /* nothing anywhere */
            *ms = *mr = 0;
            return LDT_OK;
        }
    for (int i = 0; i < s->ndims; i++) {
        int g = s->dims[i];
        group |= 1u << g;
        if (!shards(&X->placements[g], X->placements[g].dim)) rep_x *= ldt_mesh_dim_size(pr->mesh, g);
        if (!shards(&Y->placements[g], Y->placements[g].dim)) rep_y *= ldt_mesh_dim_size(pr->mesh, g);
    }
    for (int d = 0; d < ndim; d++) {
        dep[d] = shard_mask(X, d) | shard_mask(Y, d);
        any |= dep[d];
        size[d] = 1;
        for (int i = nd - 1; i >= 0; i--) {
            stride[d][i] = (dep[d] >> i) & 1u ? size[d] : 0;
            if ((dep[d] >> i) & 1u) size[d] *= pr->sncell[i];
        }
        total += 3 * size[d];
    }
    for (int i = 0; i < nd; i++)
        if ((any >> i) & 1u) used[nused++] = i;
    if ((size_t)total > pr->ftab_cap) {
        int64_t *t = realloc(pr->ftab, (size_t)total * sizeof *t);
        if (!t) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        pr->ftab = t;
        pr->ftab_cap = (size_t)total;
    }
    /* per tensor dim, per combination of its mesh dims' cells: self, sent, received */
    total = 0;
    for (int d = 0; d < ndim; d++) {
        int ux = dim_union_ok(X, d, group), uy = dim_union_ok(Y, d, group), k = 0, j[LDT_MAX_DIMS] = {0};
        unsigned vx = shard_mask(X, d) & group, vy = shard_mask(Y, d) & group;
        int64_t c[LDT_MAX_DIMS] = {0}, *t = tab[d] = pr->ftab + total;
        total += 3 * size[d];
        for (;;) {
            ldt_dim_runs xr, yr, u;
            int i;
            for (i = 0; i < nd; i++)
                if ((dep[d] >> i) & 1u) c[i] = pr->scell_at[i][j[i]];
            run_at(X, d, c, 0, &xr);
            run_at(Y, d, c, 0, &yr);
            t[3 * k] = runs_isect(&xr, &yr);
            if (uy) {
                run_at(Y, d, c, group, &u);
                t[3 * k + 1] = runs_isect(&xr, &u);
            } else {
                t[3 * k + 1] = dim_group_sum(pr, Y, d, c, vy, &xr, 0);
            }
            if (ux) {
                run_at(X, d, c, group, &u);
                t[3 * k + 2] = runs_isect(&u, &yr);
            } else {
                t[3 * k + 2] = dim_group_sum(pr, X, d, c, vx, &yr, 1);
            }
            k++;
            for (i = nd - 1; i >= 0; i--) {
                if (!((dep[d] >> i) & 1u)) continue;
                if (++j[i] < pr->sncell[i]) break;
                j[i] = 0;
            }
            if (i < 0) break;
        }
    }
    /* every combination of the cells of the mesh dims that shard something */
    for (;;) {
        int64_t self = 1, sent = rep_y, recv = rep_x;
        int u;
        for (int d = 0; d < ndim; d++) {
            const int64_t *e = tab[d] + 3 * at[d];
            self *= e[0];
            sent = mul_sat(sent, e[1]);
            recv = mul_sat(recv, e[2]);
        }
        if (sent - self > maxs) maxs = sent - self;
        if (recv - self > maxr) maxr = recv - self;
        for (u = nused - 1; u >= 0; u--) {
            int i = used[u];
            for (int d = 0; d < ndim; d++) at[d] += stride[d][i];
            if (++idx[i] < pr->sncell[i]) break;
            for (int d = 0; d < ndim; d++) at[d] -= stride[d][i] * pr->sncell[i];
            idx[i] = 0;
        }
        if (u < 0) break;
    }
    *ms = maxs;
    *mr = maxr;
    return LDT_OK;
}

/* price_regions' figures from one rank per combination of cells (see Pricing). */
static ldt_status price_classes(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                                ldt_redist_step *s, int64_t *ms, int64_t *mr, int64_t *mw) {
    int idx[LDT_MAX_DIMS] = {0}, n = 1;
    int64_t c[LDT_MAX_DIMS] = {0}, nb[LDT_MAX_DIMS];
    if (s->collective == LDT_COLL_ALL_TO_ALL) {
        int64_t a = 0, b = 0;
        LDT_CHECK(price_a2a(pr, X, Y, s, &a, &b));
        if (a > *ms) *ms = a;
        if (b > *mr) *mr = b;
        return LDT_OK;
    }
    for (int i = 0; i < s->ndims; i++) n *= (int)ldt_mesh_dim_size(pr->mesh, s->dims[i]);
    for (;;) {
        ldt_region rx, ry, rn;
        int64_t sent = 0, recv = 0, tot, B;
        for (int d = 0; d < pr->nd; d++) c[d] = pr->scell_at[d][idx[d]];
        ldt__layout_coord_checked(X, c, &rx);
        ldt__layout_coord_checked(Y, c, &ry);
        switch (s->collective) {
        case LDT_COLL_ALL_GATHER:
            LDT_CHECK(group_sum(pr, c, s->ndims, s->dims, X, NULL, 0, &tot));
            ring_step(pr, c, s->ndims, s->dims, 1, nb);
            ldt__layout_coord_checked(X, nb, &rn);
            recv = tot - rx.numel;
            sent = tot - rn.numel;
            break;
        case LDT_COLL_REDUCE_SCATTER:
            ring_step(pr, c, s->ndims, s->dims, -1, nb);
            ldt__layout_coord_checked(Y, nb, &rn);
            sent = rx.numel - ry.numel;
            recv = rx.numel - rn.numel;
            break;
        case LDT_COLL_ALL_REDUCE:
            /* the same buffer on every rank of the group: the worst ring position */
            B = rx.numel;
            sent = recv = sat_mul(B, 2) - min_pair(B, n);
            break;
        default:
            if (ry.numel > *mw) *mw = ry.numel;
            break;
        }
        if (sent > *ms) *ms = sent;
        if (recv > *mr) *mr = recv;
        int d = pr->nd - 1;
        while (d >= 0 && ++idx[d] == pr->sncell[d]) idx[d--] = 0;
        if (d < 0) break;
    }
    return LDT_OK;
}

/* Floor and ceiling of a / b, b > 0. */
static int64_t fdiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }

/* Marks (mark[lo + t] = 1: a cell starts there) the offsets t in (0, n) where the overlap of a
 * run set A with a run set B that starts delta0 + D t after it may change, B's runs at offsets
 * o = ia * strideA - ib * strideB from A's: each pair of runs overlaps by a trapezoid in delta,
 * 0 up to e0 = o - lB, rising to m = min(lA, lB) at e1, flat to e2 = o + lA - m, falling to 0
 * at e3 = o + lA. Offsets where delta crosses a corner start a cell, and offsets where delta is
 * on a slope are cells of their own; between, the overlap is constant. Returns 0 when that
 * would cut more than `budget` offsets (the caller cuts every coordinate). */
static int mark_overlap(const ldt_dim_runs *a, const ldt_dim_runs *b, int64_t delta0, int64_t D,
                        int64_t n, uint8_t *mark, int64_t *budget) {
    int64_t m;
    if (D == 0 || a->len <= 0 || b->len <= 0) return 1; /* constant along this cell */
    m = a->len < b->len ? a->len : b->len;
    if (a->blocks * b->blocks > 64) return 0;
    for (int64_t ia = 0; ia < a->blocks; ia++)
        for (int64_t ib = 0; ib < b->blocks; ib++) {
            int64_t o = ia * a->block_stride - ib * b->block_stride;
            int64_t e[4] = {o - b->len, o - b->len + m, o + a->len - m, o + a->len};
            for (int j = 0; j < 4; j++) {
                /* the first offsets where delta is >= e[j] and > e[j] (D > 0), or < and <= */
                int64_t t1 = D > 0 ? cdiv(e[j] - delta0, D) : fdiv(delta0 - e[j], -D) + 1;
                int64_t t2 = D > 0 ? fdiv(e[j] - delta0, D) + 1 : cdiv(delta0 - e[j], -D);
                if (t1 > 0 && t1 < n) mark[t1] = 1;
                if (t2 > 0 && t2 < n) mark[t2] = 1;
            }
            for (int j = 0; j < 4; j += 2) { /* the slopes: (e0, e1) and (e2, e3) */
                int64_t lo = e[j], hi = e[j + 1], t0, t1;
                if (hi - lo < 2) continue; /* no integer strictly inside */
                t0 = D > 0 ? fdiv(lo - delta0, D) + 1 : fdiv(delta0 - hi, -D) + 1;
                t1 = D > 0 ? cdiv(hi - delta0, D) - 1 : cdiv(delta0 - lo, -D) - 1;
                if (t0 < 0) t0 = 0;
                if (t1 > n - 1) t1 = n - 1;
                if (t1 - t0 + 1 > *budget) return 0;
                for (int64_t t = t0; t <= t1; t++) {
                    mark[t] = 1;
                    if (t + 1 < n) mark[t + 1] = 1;
                }
                if (t1 >= t0) *budget -= t1 - t0 + 1;
            }
        }
    return 1;
}

/* The cells of exact mesh dim i (see exact_cells) by symmetry: within a cell of lengths the
 * runs' starts move by a fixed amount per coordinate, so the overlaps that price the step (a
 * rank's runs before and after, and each met with the union of the group's other side) change
 * only near the coordinates where their difference crosses a corner of the overlap; the
 * coordinates between are alike. Computed for every coordinate of the other mesh dims of each
 * tensor dim concerned (those are exact too). Into mark[0..k) (1: a cell starts there);
 * returns 0 when it cannot (a union that is not one run, many interleaved blocks, too many
 * cuts, or more work than cutting every coordinate). */
static int exact_cuts(pricer *pr, const ldt_spec *X, const ldt_spec *Y, unsigned group, int i,
                      const int64_t *lat, const int64_t *ln, int lnc, uint8_t *mark) {
    int64_t k = ldt_mesh_dim_size(pr->mesh, i), budget = k / 4, work = 0;
    for (int d = 0; d < X->shape.ndim; d++) {
        unsigned dep = shard_mask(X, d) | shard_mask(Y, d), others;
        int od[LDT_MAX_DIMS], no = 0;
        if (dim_ok(X, Y, d) || !((dep >> i) & 1u)) continue;
        if (!dim_union_ok(X, d, group) || !dim_union_ok(Y, d, group)) return 0;
        others = dep & ~(1u << i);
        work += lnc;
        for (int j = 0; j < pr->nd; j++)
            if ((others >> j) & 1u) {
                od[no++] = j;
                work *= ldt_mesh_dim_size(pr->mesh, j);
            }
        if (work >= k) return 0; /* no cheaper than a cell per coordinate */
        for (int cl = 0; cl < lnc; cl++) {
            int64_t c[LDT_MAX_DIMS] = {0}, lo = lat[cl], n = ln[cl];
            for (;;) {
                int j;
                /* the three overlaps: own runs, sent (X with Y's union), received */
                for (int pair = 0; pair < 3; pair++) {
                    const ldt_spec *A = X, *B = Y;
                    unsigned sa = pair == 2 ? group : 0, sb = pair == 1 ? group : 0;
                    ldt_dim_runs a0, b0, a1, b1;
                    int64_t delta0, D = 0;
                    c[i] = lo;
                    run_at(A, d, c, sa, &a0);
                    run_at(B, d, c, sb, &b0);
                    delta0 = b0.start - a0.start;
                    if (n >= 2) {
                        c[i] = lo + 1;
                        run_at(A, d, c, sa, &a1);
                        run_at(B, d, c, sb, &b1);
                        if (a1.len != a0.len || b1.len != b0.len || a1.blocks != a0.blocks ||
                            b1.blocks != b0.blocks || a1.block_stride != a0.block_stride ||
                            b1.block_stride != b0.block_stride)
                            return 0;
                        D = (b1.start - a1.start) - delta0;
                    }
                    if (!mark_overlap(&a0, &b0, delta0, D, n, mark + lo, &budget)) return 0;
                }
                for (j = no - 1; j >= 0; j--) {
                    if (++c[od[j]] < ldt_mesh_dim_size(pr->mesh, od[j])) break;
                    c[od[j]] = 0;
                }
                if (j < 0) break;
            }
        }
    }
    for (int cl = 0; cl < lnc; cl++) mark[lat[cl]] = 1;
    return 1;
}

/* An all_to_all that class_ok refuses: its overlaps depend on where chunks start, but only
 * along the tensor dims that fail dim_ok, and those starts only on the coordinates of the mesh
 * dims sharding them. Those mesh dims get cells of alike coordinates (exact_cuts: a 512-rank
 * dim a few dozen) or else a cell per coordinate, the others keep the step's cells: one
 * position per combination, as many as the ranks at most, and often far fewer (a Replicate
 * mesh dim of 512 ranks is one cell, not 512 positions). */
static ldt_status exact_cells(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                              const ldt_redist_step *s) {
    unsigned exact = 0, group = 0;
    int64_t *lat[LDT_MAX_DIMS] = {0}, *ln[LDT_MAX_DIMS] = {0};
    int lnc[LDT_MAX_DIMS] = {0};
    ldt_status st = LDT_OK;
    for (int d = 0; d < X->shape.ndim; d++)
        if (!dim_ok(X, Y, d))
            for (int i = 0; i < pr->nd; i++)
                if (shards(&X->placements[i], d) || shards(&Y->placements[i], d)) exact |= 1u << i;
    for (int j = 0; j < s->ndims; j++) group |= 1u << s->dims[j];
    /* every exact dim's cells of lengths, kept while the others are cut (they iterate
     * coordinates, not these cells) */
    for (int i = 0; i < pr->nd; i++) {
        if (!(exact & (1u << i))) continue;
        lat[i] = pr->scell_at[i];
        ln[i] = pr->scell_n[i];
        lnc[i] = pr->sncell[i];
        pr->scell_at[i] = pr->scell_n[i] = NULL;
        pr->sncell[i] = 0;
    }
    for (int i = 0; i < pr->nd; i++) {
        int64_t k = ldt_mesh_dim_size(pr->mesh, i), *at, *n, nc = 0;
        uint8_t *mark;
        if (!(exact & (1u << i))) continue;
        at = malloc((size_t)k * sizeof *at);
        n = malloc((size_t)k * sizeof *n);
        mark = calloc((size_t)k, 1);
        if (!at || !n || !mark) {
            free(at);
            free(n);
            free(mark);
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        }
        if (!exact_cuts(pr, X, Y, group, i, lat[i], ln[i], lnc[i], mark))
            memset(mark, 1, (size_t)k);
        for (int64_t c = 0; c < k; c++) {
            if (mark[c] || c == 0) {
                at[nc] = c;
                n[nc++] = 0;
            }
            n[nc - 1]++;
        }
        free(mark);
        pr->scell_at[i] = at;
        pr->scell_n[i] = n;
        pr->sncell[i] = (int)nc;
    }
fail:
    for (int i = 0; i < pr->nd; i++) {
        free(lat[i]);
        free(ln[i]);
    }
    return st;
}

/* Whether X -> Y by collective c can be priced within the bounds above. */
static int priceable(const pricer *pr, const ldt_spec *X, const ldt_spec *Y, ldt_collective c) {
    return pr->N <= MAX_ENUM_RANKS || (pr->classes && class_ok(X, Y, c));
}

/* ---- step prices, memoized across plans ------------------------------------------------
 * A step's figures depend only on the mesh, shape, dtype and model (fixed per memo) and on
 * its two placement lists, collective and dims: the whole-graph planner asks thousands of
 * (from, to) pairs of one shape, whose searches price the same steps again and again. */
#define MEMO_KEY (2 * LDT_MAX_DIMS + 2)
/* An entry is 3 + nk words: seconds (its bits), bytes sent, received, then the key's nk
 * words; nk = 2 * nplace + 2 is fixed per memo (its specs are all on one mesh), so an
 * entry is as wide as its key (9 words on a 2-dim mesh) and a hit reads one or two lines.
 * The hashes are in an array of their own: a probe reads 8 slots a cache line and touches
 * an entry only on a hash match. */
#define MEMO_VALS 3
struct ldt__step_memo {
    uint64_t *h; /* 0: empty */
    uint64_t *w; /* cap entries of MEMO_VALS + nk words */
    int nk;      /* 0 until the first entry */
    int64_t n, cap;
};

ldt__step_memo *ldt__step_memo_create(void) { return calloc(1, sizeof(ldt__step_memo)); }

void ldt__step_memo_destroy(ldt__step_memo *m) {
    if (!m) return;
    free(m->h);
    free(m->w);
    free(m);
}

static uint64_t pl_word(const ldt_placement *p) {
    return (uint64_t)(p->kind & 0xff) | (uint64_t)(p->dim & 0xff) << 8 | (uint64_t)(p->op & 0xff) << 16 |
           (uint64_t)p->blocks << 24;
}

/* The key: the two placement lists (nplace words each) and the step's collective, dims, into
 * k (*nk words); a multiply-add hash of those few words (this lookup is the search's inner
 * loop). */
static uint64_t memo_key(const ldt_spec *X, const ldt_spec *Y, const ldt_redist_step *s, uint64_t *k,
                         int *nk) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    int n = 0;
    for (int i = 0; i < X->nplace; i++) k[n++] = pl_word(&X->placements[i]);
    for (int i = 0; i < X->nplace; i++) k[n++] = pl_word(&Y->placements[i]);
    k[n++] = (uint64_t)s->collective | (uint64_t)s->ndims << 8 | (uint64_t)X->nplace << 16;
    k[n] = 0;
    for (int i = 0; i < s->ndims && i < 8; i++) k[n] |= (uint64_t)(s->dims[i] & 0xff) << (8 * i);
    n++;
    /* each word times its own odd constant, summed (the products are independent, so they
     * pipeline), then mixed */
    for (int i = 0; i < n; i++) h += k[i] * (0xBF58476D1CE4E5B9ull + (uint64_t)i * 0x3C6EF372FE94F82Aull);
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    *nk = n;
    return h ? h : 1;
}

/* The entry of key k (nk words, hash h); NULL when absent. */
static uint64_t *memo_find(ldt__step_memo *m, const uint64_t *k, int nk, uint64_t h) {
    uint64_t mask, i;
    size_t width = (size_t)(MEMO_VALS + nk);
    if (!m->cap || nk != m->nk) return NULL;
    mask = (uint64_t)m->cap - 1;
    for (i = h & mask; m->h[i]; i = (i + 1) & mask)
        if (m->h[i] == h) {
            uint64_t *e = m->w + i * width;
            int j = 0;
            while (j < nk && e[MEMO_VALS + j] == k[j]) j++;
            if (j == nk) return e;
        }
    return NULL;
}

/* Remembers a priced step; a full memo that cannot grow just forgets (it is only a cache), as
 * does one whose keys have another width. */
static void memo_put(ldt__step_memo *m, const uint64_t *k, int nk, uint64_t h, const ldt_redist_step *s) {
    uint64_t mask, i, *e;
    size_t width = (size_t)(MEMO_VALS + nk);
    if (m->cap && nk != m->nk) return;
    if (2 * (m->n + 1) > m->cap) {
        int64_t nc = m->cap ? 2 * m->cap : 256;
        uint64_t *nh = calloc((size_t)nc, sizeof *nh);
        uint64_t *nw = malloc((size_t)nc * width * sizeof *nw);
        if (!nh || !nw) {
            free(nh);
            free(nw);
            return;
        }
        for (int64_t j = 0; j < m->cap; j++)
            if (m->h[j]) {
                uint64_t x = m->h[j] & (uint64_t)(nc - 1);
                while (nh[x]) x = (x + 1) & (uint64_t)(nc - 1);
                nh[x] = m->h[j];
                memcpy(nw + x * width, m->w + (size_t)j * width, width * sizeof *nw);
            }
        free(m->h);
        free(m->w);
        m->h = nh;
        m->w = nw;
        m->cap = nc;
        m->nk = nk;
    }
    mask = (uint64_t)m->cap - 1;
    for (i = h & mask; m->h[i]; i = (i + 1) & mask) {}
    e = m->w + i * width;
    m->h[i] = h;
    memcpy(&e[0], &s->seconds, sizeof e[0]);
    e[1] = (uint64_t)s->bytes_sent;
    e[2] = (uint64_t)s->bytes_recv;
    memcpy(e + MEMO_VALS, k, (size_t)nk * sizeof *k);
    m->n++;
}

static ldt_status price_step_raw(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                                 ldt_redist_step *s);

/* Fills s's byte counts and seconds for X -> Y (s's collective and dims set). */
static ldt_status price_step(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                             ldt_redist_step *s) {
    uint64_t k[MEMO_KEY], h, *e;
    int nk;
    if (!pr->memo) return price_step_raw(pr, X, Y, s);
    h = memo_key(X, Y, s, k, &nk);
    if ((e = memo_find(pr->memo, k, nk, h))) {
        memcpy(&s->seconds, &e[0], sizeof s->seconds);
        s->bytes_sent = (int64_t)e[1];
        s->bytes_recv = (int64_t)e[2];
        return LDT_OK;
    }
    LDT_CHECK(price_step_raw(pr, X, Y, s));
    memo_put(pr->memo, k, nk, h, s);
    return LDT_OK;
}

static ldt_status price_step_raw(pricer *pr, const ldt_spec *X, const ldt_spec *Y,
                             ldt_redist_step *s) {
    int64_t maxs = 0, maxr = 0, maxw = 0;
    int ok = 0;
    LDT_CHECK(pricer_ready(pr));
    /* checked once here: the pricing below lays them out at many coordinates unchecked */
    LDT_CHECK(ldt_spec_check(X));
    LDT_CHECK(ldt_spec_check(Y));
    if (pr->classes && !class_ok(X, Y, s->collective)) {
        /* the step's cells, exact along the dims whose starts matter (exact_cells) */
        LDT_CHECK(step_cells(pr, X, Y, s, &ok));
        if (ok) LDT_CHECK(exact_cells(pr, X, Y, s));
    }
    if (ok) {
        LDT_CHECK(price_classes(pr, X, Y, s, &maxs, &maxr, &maxw));
    } else if (pr->classes && class_ok(X, Y, s->collective)) {
        LDT_CHECK(step_cells(pr, X, Y, s, &ok));
        if (!ok) /* the search's cells, which hold every length of this step too */
            for (int i = 0; i < pr->nd; i++) {
                int64_t *at = malloc((size_t)pr->ncell[i] * sizeof *at),
                        *n = malloc((size_t)pr->ncell[i] * sizeof *n);
                if (!at || !n) {
                    free(at);
                    free(n);
                    LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
                }
                memcpy(at, pr->cell_at[i], (size_t)pr->ncell[i] * sizeof *at);
                memcpy(n, pr->cell_n[i], (size_t)pr->ncell[i] * sizeof *n);
                free(pr->scell_at[i]);
                free(pr->scell_n[i]);
                pr->scell_at[i] = at;
                pr->scell_n[i] = n;
                pr->sncell[i] = pr->ncell[i];
            }
        LDT_CHECK(price_classes(pr, X, Y, s, &maxs, &maxr, &maxw));
    } else {
        LDT_CHECK(pricer_enumerate(pr));
        LDT_CHECK(layouts(pr, X, pr->rx));
        LDT_CHECK(layouts(pr, Y, pr->ry));
        price_regions(pr, s, &maxs, &maxr, &maxw);
    }
    s->bytes_sent = sat_mul(maxs, (int64_t)pr->es);
    s->bytes_recv = sat_mul(maxr, (int64_t)pr->es);
    s->seconds = ldt_cost_seconds(pr->cm, pr->mesh, s->ndims, s->dims, s->collective,
                                  s->collective <= LDT_COLL_ALL_TO_ALL
                                      ? (s->bytes_sent > s->bytes_recv ? s->bytes_sent
                                                                       : s->bytes_recv)
                                      : sat_mul(maxw, (int64_t)pr->es),
                                  0);
    return LDT_OK;
}

ldt_status ldt__redist_price(const ldt_spec *X, const ldt_spec *Y, int ndims, const int *dims,
                             ldt_collective c, int enumerate, ldt_redist_step *out,
                             int *by_cells) {
    ldt_status st;
    ldt_cost_model cm;
    pricer pr;
    if (!X || !Y || !out || ndims < 0 || ndims > X->nplace || (ndims > 0 && !dims))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute price: invalid arguments");
    LDT_CHECK(ldt_cost_model_preset("uniform", &cm));
    LDT_CHECK(pricer_init(&pr, X->mesh, &cm, X, Y));
    if ((st = pricer_ready(&pr)) != LDT_OK) {
        pricer_free(&pr);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    if (enumerate) pr.classes = 0;
    memset(out, 0, sizeof *out);
    out->collective = c;
    out->ndims = ndims;
    for (int i = 0; i < ndims; i++) out->dims[i] = dims[i];
    *by_cells = pr.classes && class_ok(X, Y, c);
    st = price_step(&pr, X, Y, out);
    pricer_free(&pr);
    return st;
}

/* A step from spec X to spec Y over `dims`, priced, built in place in *out (X and Y must not
 * be within *out). */
static ldt_status make_step(pricer *pr, const ldt_spec *X, const ldt_spec *Y, int ndims,
                            const int *dims, ldt_collective c, ldt__rstep *out) {
    ldt_redist_step *s = &out->pub;
    memset(s, 0, sizeof *s);
    s->collective = c;
    s->ndims = s->nfrom = s->nto = ndims;
    for (int i = 0; i < ndims; i++) {
        s->dims[i] = dims[i];
        s->from[i] = X->placements[dims[i]];
        s->to[i] = Y->placements[dims[i]];
    }
    s->op = c == LDT_COLL_LOCAL_PARTIAL || c == LDT_COLL_LOCAL_PAD ? Y->placements[dims[0]].op
                                                                   : X->placements[dims[0]].op;
    out->before = *X;
    out->after = *Y;
    LDT_CHECK(price_step(pr, X, Y, s));
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Transforms. A mesh dim changes from placement a to b by:
 *   P -> R all_reduce, P -> S/IS reduce_scatter, S/IS -> R all_gather,
 *   S/IS -> another S/IS all_to_all, R -> S/IS local chunk, R -> P local partial,
 *   S/IS -> P(sum|max|min) local pad; never P -> P with another op, never S -> P(avg).
 * Nested sharding: with Shard(d) on mesh dims i < j, mesh dim i splits d first and j splits
 * each of those chunks again. Along mesh dim i (others fixed) the ranks then hold pieces
 * that are not one contiguous chunk of anything j leaves whole, so a Shard(d) on i can only
 * be gathered, exchanged or created (chunk, scatter) while no mesh dim after i shards d:
 * i must be d's innermost sharding. The search only takes such edges.
 */
static ldt_collective classify(const ldt_placement *a, const ldt_placement *b,
                               const ldt_placement *target, int *ok) {
    int a_sh = a->kind == LDT_PLACE_SHARD || a->kind == LDT_PLACE_INTERLEAVED_SHARD;
    int b_sh = b->kind == LDT_PLACE_SHARD || b->kind == LDT_PLACE_INTERLEAVED_SHARD;
    /* A Partial is only entered toward the target's Partial on this dim. */
    int b_target_p = b->kind == LDT_PLACE_PARTIAL && ldt_placement_equal(b, target);
    *ok = 1;
    if (a->kind == LDT_PLACE_PARTIAL) {
        if (b->kind == LDT_PLACE_REPLICATE) return LDT_COLL_ALL_REDUCE;
        if (b_sh) return LDT_COLL_REDUCE_SCATTER;
    } else if (a_sh) {
        if (b->kind == LDT_PLACE_REPLICATE) return LDT_COLL_ALL_GATHER;
        if (b_sh) return LDT_COLL_ALL_TO_ALL;
        if (b_target_p && b->op != LDT_REDUCE_AVG) return LDT_COLL_LOCAL_PAD;
    } else {
        if (b_sh) return LDT_COLL_LOCAL_CHUNK;
        if (b_target_p) return LDT_COLL_LOCAL_PARTIAL;
    }
    *ok = 0;
    return LDT_COLL_COUNT;
}

/* Whether changing mesh dim i from pl_old to pl[i] respects nesting (above) and keeps a
 * valid spec: Partial ops that combine (same, or sum with avg), an interleaved dim sharded
 * nowhere else. Checked here rather than by ldt_spec_check so a rejected edge leaves no
 * error message behind. */
static int edge_ok(const ldt_placement *pl, int nd, int i, const ldt_placement *pl_old,
                   int int_dtype) {
    const ldt_placement *b = &pl[i];
    /* Integer avg truncates, so Partial sum over S with avg over A means trunc(sum / |A|)
     * only when the sums come first: an avg dim is reduced once no sum dim is left. */
    if (int_dtype && pl_old->kind == LDT_PLACE_PARTIAL && pl_old->op == LDT_REDUCE_AVG &&
        b->kind != LDT_PLACE_PARTIAL)
        for (int j = 0; j < nd; j++)
            if (j != i && pl[j].kind == LDT_PLACE_PARTIAL && pl[j].op == LDT_REDUCE_SUM) return 0;
    for (int j = i + 1; j < nd; j++) {
        if (pl_old->kind == LDT_PLACE_SHARD && shards(&pl[j], pl_old->dim)) return 0;
        if (b->kind == LDT_PLACE_SHARD && shards(&pl[j], b->dim)) return 0;
    }
    for (int j = 0; j < nd; j++) {
        if (j == i) continue;
        if (b->kind == LDT_PLACE_PARTIAL && pl[j].kind == LDT_PLACE_PARTIAL && b->op != pl[j].op &&
            !((b->op == LDT_REDUCE_SUM || b->op == LDT_REDUCE_AVG) &&
              (pl[j].op == LDT_REDUCE_SUM || pl[j].op == LDT_REDUCE_AVG)))
            return 0;
        if (b->kind == LDT_PLACE_INTERLEAVED_SHARD && shards(&pl[j], b->dim)) return 0;
        if (b->kind == LDT_PLACE_SHARD && pl[j].kind == LDT_PLACE_INTERLEAVED_SHARD &&
            pl[j].dim == b->dim)
            return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Routes: a list of priced steps.
 */
typedef struct route {
    int n, cap;
    ldt__rstep *s;
} route;

static void route_free(route *r) {
    free(r->s);
    memset(r, 0, sizeof *r);
}

/* Room for one more step. */
static ldt_status route_reserve(route *r) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        ldt__rstep *ns = realloc(r->s, (size_t)cap * sizeof *ns);
        if (!ns) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        r->s = ns;
        r->cap = cap;
    }
    return LDT_OK;
}

static ldt_status route_push(route *r, const ldt__rstep *s) {
    LDT_CHECK(route_reserve(r));
    r->s[r->n++] = *s;
    return LDT_OK;
}

static double route_seconds(const route *r) {
    double t = 0;
    for (int i = 0; i < r->n; i++) t += r->s[i].pub.seconds;
    return t;
}

static int64_t step_bytes(const ldt_redist_step *s) {
    return s->bytes_sent > s->bytes_recv ? s->bytes_sent : s->bytes_recv;
}

static int64_t route_bytes(const route *r) {
    int64_t b = 0;
    for (int i = 0; i < r->n; i++) b += step_bytes(&r->s[i].pub);
    return b;
}

/* One single-dim step from X changing mesh dim i to p, appended to r; X becomes Y. */
static ldt_status push_edge(pricer *pr, route *r, ldt_spec *X, int i, ldt_placement p,
                            ldt_collective c) {
    ldt_spec Y = *X;
    Y.placements[i] = p;
    LDT_CHECK(route_reserve(r));
    LDT_CHECK(make_step(pr, X, &Y, 1, &i, c, &r->s[r->n])); /* built in place */
    r->n++;
    *X = Y;
    return LDT_OK;
}

/* Naive: reduce every Partial, then gather every Shard innermost first (so it is innermost
 * when gathered), then chunk / make Partial outermost first (so every new Shard
 * is innermost when made). */
static ldt_status naive_route(pricer *pr, const ldt_spec *src, const ldt_spec *dst, route *r) {
    ldt_spec X = *src;
    int ok;
    if (same_placements(src->placements, dst->placements, src->nplace))
        return LDT_OK;
    /* Partials first, avg ones last (see edge_ok), then the shards. */
    for (int pass = 0; pass < 3; pass++)
        for (int i = X.nplace - 1; i >= 0; i--) {
            ldt_placement R = ldt_replicate(), *x = &X.placements[i];
            int want = x->kind != LDT_PLACE_PARTIAL ? 2 : x->op == LDT_REDUCE_AVG ? 1 : 0;
            if (x->kind == LDT_PLACE_REPLICATE || want != pass) continue;
            LDT_CHECK(push_edge(pr, r, &X, i, R, classify(x, &R, &dst->placements[i], &ok)));
        }
    for (int i = 0; i < X.nplace; i++) {
        if (dst->placements[i].kind == LDT_PLACE_REPLICATE) continue;
        LDT_CHECK(push_edge(pr, r, &X, i, dst->placements[i],
                            classify(&X.placements[i], &dst->placements[i], &dst->placements[i], &ok)));
    }
    return LDT_OK;
}

/* ---- Dijkstra over placement states ------------------------------------------------------ */

typedef struct node {
    uint64_t code;
    double cost;
    int64_t bytes;
    int nsteps;
    int prev;  /* node we came from, -1 at the start */
    int dim;   /* mesh dim the edge into this node changed */
    int done;
} node;

typedef struct hentry {
    double cost;
    int64_t bytes;
    int nsteps;
    uint64_t code;
    int idx;
} hentry;

typedef struct search {
    int nd;
    int ncand[LDT_MAX_DIMS];
    ldt_placement cand[LDT_MAX_DIMS][LDT_MAX_DIMS + 5];
    uint64_t radix[LDT_MAX_DIMS];
    node *nodes;
    int nnodes, capnodes;
    uint64_t *hkeys; /* code + 1, 0 = empty */
    int *hvals;
    int64_t hcap, hcap0; /* hcap0: the table's first size */
    hentry *heap;
    int nheap, capheap;
} search;

static void search_free(search *s) {
    free(s->nodes);
    free(s->hkeys);
    free(s->hvals);
    free(s->heap);
}

/* Deterministic order: cost, then bytes, then fewer steps, then the state code. */
static int hless(const hentry *a, const hentry *b) {
    if (a->cost != b->cost) return a->cost < b->cost;
    if (a->bytes != b->bytes) return a->bytes < b->bytes;
    if (a->nsteps != b->nsteps) return a->nsteps < b->nsteps;
    return a->code < b->code;
}

static int heap_push(search *s, hentry e) {
    if (s->nheap == s->capheap) {
        int cap = s->capheap ? 2 * s->capheap : (int)(s->hcap0 > 32 ? s->hcap0 / 2 : 16);
        hentry *h = realloc(s->heap, (size_t)cap * sizeof *h);
        if (!h) return -1;
        s->heap = h;
        s->capheap = cap;
    }
    int i = s->nheap++;
    while (i > 0 && hless(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
    return 0;
}

static hentry heap_pop(search *s) {
    hentry top = s->heap[0], last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->nheap) break;
        if (c + 1 < s->nheap && hless(&s->heap[c + 1], &s->heap[c])) c++;
        if (!hless(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap > 0) s->heap[i] = last;
    return top;
}

static uint64_t hash64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The node of a state code, created (unvisited, infinite cost) if new; -1 out of memory. */
static int node_of(search *s, uint64_t code) {
    if ((int64_t)(s->nnodes + 1) * 2 > s->hcap) {
        int64_t cap = s->hcap ? 2 * s->hcap : s->hcap0 ? s->hcap0 : 1024;
        uint64_t *k = calloc((size_t)cap, sizeof *k);
        int *v = malloc((size_t)cap * sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return -1;
        }
        for (int64_t i = 0; i < s->hcap; i++) {
            if (!s->hkeys[i]) continue;
            int64_t j = (int64_t)(hash64(s->hkeys[i]) & (uint64_t)(cap - 1));
            while (k[j]) j = (j + 1) & (cap - 1);
            k[j] = s->hkeys[i];
            v[j] = s->hvals[i];
        }
        free(s->hkeys);
        free(s->hvals);
        s->hkeys = k;
        s->hvals = v;
        s->hcap = cap;
    }
    int64_t j = (int64_t)(hash64(code + 1) & (uint64_t)(s->hcap - 1));
    while (s->hkeys[j]) {
        if (s->hkeys[j] == code + 1) return s->hvals[j];
        j = (j + 1) & (s->hcap - 1);
    }
    if (s->nnodes == s->capnodes) {
        int cap = s->capnodes ? 2 * s->capnodes : (int)(s->hcap0 > 32 ? s->hcap0 / 2 : 16);
        node *n = realloc(s->nodes, (size_t)cap * sizeof *n);
        if (!n) return -1;
        s->nodes = n;
        s->capnodes = cap;
    }
    s->hkeys[j] = code + 1;
    s->hvals[j] = s->nnodes;
    s->nodes[s->nnodes] = (node){code, INFINITY, 0, 0, -1, -1, 0};
    return s->nnodes++;
}

static int cand_index(const search *s, int i, const ldt_placement *p) {
    for (int k = 0; k < s->ncand[i]; k++)
        if (ldt_placement_equal(&s->cand[i][k], p)) return k;
    return -1;
}

static uint64_t encode(const search *s, const ldt_placement *pl) {
    uint64_t c = 0;
    for (int i = 0; i < s->nd; i++) c += (uint64_t)cand_index(s, i, &pl[i]) * s->radix[i];
    return c;
}

static void decode(const search *s, uint64_t code, ldt_placement *pl) {
    for (int i = 0; i < s->nd; i++) pl[i] = s->cand[i][(code / s->radix[i]) % (uint64_t)s->ncand[i]];
}

static void add_cand(search *s, int i, ldt_placement p) {
    if (cand_index(s, i, &p) < 0) s->cand[i][s->ncand[i]++] = p;
}

/* Shortest path from src to dst placements. States are the placement tuples whose entries
 * come from: Replicate, Shard of any tensor dim, and the source's and target's own Partial
 * and InterleavedShard placements on that mesh dim. *found = 0 when the search was cut at
 * MAX_NODES (the caller then takes the naive route). */
static ldt_status dijkstra(pricer *pr, const ldt_spec *src, const ldt_spec *dst, route *r,
                           int *found) {
    ldt_status st = LDT_OK;
    search s;
    int start, goal = -1;
    uint64_t target, states = 1;
    ldt_spec X, Y;
    ldt_redist_step step;
    int int_dtype = !ldt_dtype_is_float(src->dtype);
    memset(&s, 0, sizeof s);
    *found = 0;
    s.nd = src->nplace;
    for (int i = 0; i < s.nd; i++) {
        add_cand(&s, i, ldt_replicate());
        for (int d = 0; d < src->shape.ndim; d++) add_cand(&s, i, ldt_shard(d));
        if (src->placements[i].kind != LDT_PLACE_SHARD) add_cand(&s, i, src->placements[i]);
        if (dst->placements[i].kind != LDT_PLACE_SHARD) add_cand(&s, i, dst->placements[i]);
    }
    for (int i = s.nd - 1; i >= 0; i--) s.radix[i] = i == s.nd - 1 ? 1 : s.radix[i + 1] * (uint64_t)s.ncand[i + 1];
    /* the state table sized to the problem (a few dozen states on small meshes) */
    for (int i = 0; i < s.nd && states <= MAX_NODES; i++) states *= (uint64_t)s.ncand[i];
    s.hcap0 = 16;
    while ((uint64_t)s.hcap0 < 2 * states + 2 && s.hcap0 < 1024) s.hcap0 *= 2;
    target = encode(&s, dst->placements);
    start = node_of(&s, encode(&s, src->placements));
    if (start < 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    s.nodes[start].cost = 0;
    if (heap_push(&s, (hentry){0, 0, 0, s.nodes[start].code, start}) != 0)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    /* One spec pair and one step reused across the edges (only the changed mesh dim and the
     * step's collective, dims differ per edge; pricing reads nothing else of the step). A
     * candidate's index along mesh dim i is its digit in the state code (candidates are
     * distinct), so a neighbour's code is the current one with that digit replaced. */
    X = *src;
    Y = *src;
    memset(&step, 0, sizeof step);
    step.ndims = 1;
    while (s.nheap > 0) {
        hentry e = heap_pop(&s);
        node cur = s.nodes[e.idx];
        if (cur.done || e.cost != cur.cost || e.bytes != cur.bytes || e.nsteps != cur.nsteps) continue;
        s.nodes[e.idx].done = 1;
        if (cur.code == target) {
            goal = e.idx;
            break;
        }
        if (s.nnodes > MAX_NODES) goto fail; /* too big: naive */
        decode(&s, cur.code, X.placements);
        memcpy(Y.placements, X.placements, (size_t)s.nd * sizeof *Y.placements);
        for (int i = 0; i < s.nd; i++) {
            int ci = (int)((cur.code / s.radix[i]) % (uint64_t)s.ncand[i]);
            uint64_t base = cur.code - (uint64_t)ci * s.radix[i];
            for (int k = 0; k < s.ncand[i]; k++) {
                int ok, idx;
                ldt_collective c;
                if (k == ci) continue;
                c = classify(&X.placements[i], &s.cand[i][k], &dst->placements[i], &ok);
                if (!ok) continue;
                Y.placements[i] = s.cand[i][k];
                if (!edge_ok(Y.placements, s.nd, i, &X.placements[i], int_dtype) ||
                    !priceable(pr, &X, &Y, c)) {
                    Y.placements[i] = X.placements[i];
                    continue;
                }
                step.collective = c;
                step.dims[0] = i;
                LDT_CHECK_GOTO(price_step(pr, &X, &Y, &step));
                Y.placements[i] = X.placements[i];
                hentry ne = {cur.cost + step.seconds, cur.bytes + step_bytes(&step), cur.nsteps + 1,
                             base + (uint64_t)k * s.radix[i], 0};
                idx = node_of(&s, ne.code);
                if (idx < 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
                node *nn = &s.nodes[idx];
                hentry old = {nn->cost, nn->bytes, nn->nsteps, nn->code, idx};
                if (nn->done || !hless(&ne, &old)) continue;
                nn->cost = ne.cost;
                nn->bytes = ne.bytes;
                nn->nsteps = ne.nsteps;
                nn->prev = e.idx;
                nn->dim = i;
                ne.idx = idx;
                if (heap_push(&s, ne) != 0)
                    LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
            }
        }
    }
    if (goal >= 0) {
        /* Walk back, then replay the edges forward as priced steps. */
        int len = 0, *path;
        for (int v = goal; v != start; v = s.nodes[v].prev) len++;
        path = malloc((size_t)(len + 1) * sizeof *path);
        if (!path) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        for (int v = goal, j = len; j >= 0; v = s.nodes[v].prev, j--) {
            path[j] = v;
            if (v == start) break;
        }
        X = *src;
        for (int j = 1; j <= len && st == LDT_OK; j++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int i = s.nodes[path[j]].dim, ok;
            decode(&s, s.nodes[path[j]].code, pl);
            st = push_edge(pr, r, &X, i, pl[i], classify(&X.placements[i], &pl[i], &dst->placements[i], &ok));
        }
        free(path);
        if (st != LDT_OK) goto fail;
        *found = 1;
    }
fail:
    search_free(&s);
    return st;
}

/* ---- merging ---------------------------------------------------------------------------- */

static int mergeable(const ldt__rstep *a, const ldt__rstep *b) {
    ldt_collective c = a->pub.collective;
    if (c != b->pub.collective || a->pub.mesh != b->pub.mesh || c > LDT_COLL_ALL_TO_ALL) return 0;
    /* one reduction over the flattened group: the same op on both */
    if ((c == LDT_COLL_ALL_REDUCE || c == LDT_COLL_REDUCE_SCATTER) && a->pub.op != b->pub.op)
        return 0;
    for (int i = 0; i < a->pub.ndims; i++)
        for (int j = 0; j < b->pub.ndims; j++)
            if (a->pub.dims[i] == b->pub.dims[j]) return 0;
    return 1;
}

/* Consecutive steps of one collective on different mesh dims become one collective over the
 * flattened group (their dims together) where the model prices that lower: one call's
 * overhead saved against a ring over more ranks on the slower of the links. */
static ldt_status merge_route(pricer *pr, route *r) {
    int changed = 1;
    while (changed) {
        changed = 0;
        for (int k = 0; k + 1 < r->n; k++) {
            ldt__rstep *a = &r->s[k], *b = &r->s[k + 1], m;
            int dims[LDT_MAX_DIMS], n = 0;
            if (!mergeable(a, b) || !priceable(pr, &a->before, &b->after, a->pub.collective))
                continue;
            for (int d = 0; d < pr->nd; d++) {
                int in = 0;
                for (int i = 0; i < a->pub.ndims; i++) in |= a->pub.dims[i] == d;
                for (int i = 0; i < b->pub.ndims; i++) in |= b->pub.dims[i] == d;
                if (in) dims[n++] = d;
            }
            LDT_CHECK(make_step(pr, &a->before, &b->after, n, dims, a->pub.collective, &m));
            m.pub.mesh = a->pub.mesh;
            if (!(m.pub.seconds < a->pub.seconds + b->pub.seconds)) continue;
            *a = m;
            memmove(b, b + 1, (size_t)(r->n - k - 2) * sizeof *b);
            r->n--;
            changed = 1;
            break;
        }
    }
    return LDT_OK;
}

/* ---- one mesh ------------------------------------------------------------------------------ */

/* Route for src -> dst on one mesh: Dijkstra (+ merging), kept only when it is no worse than
 * the naive route in modeled time and, under a uniform model, in bytes; else naive. */
static ldt_status plan_one_mesh(const ldt_spec *src, const ldt_spec *dst, const ldt_cost_model *cm,
                                int merge, ldt_redist_search search, int mesh_id,
                                ldt__step_memo *memo, route *out) {
    ldt_status st = LDT_OK;
    pricer pr;
    route naive = {0}, best = {0}, merged = {0};
    int found = 0, uniform = ldt__cost_mesh_uniform(cm, src->mesh);
    if (same_placements(src->placements, dst->placements, src->nplace))
        return LDT_OK; /* a no-op has zero steps */
    LDT_CHECK(pricer_init(&pr, src->mesh, cm, src, dst));
    pr.memo = memo;
    LDT_CHECK_GOTO(naive_route(&pr, src, dst, &naive));
    if (search == LDT_REDIST_DIJKSTRA) LDT_CHECK_GOTO(dijkstra(&pr, src, dst, &best, &found));
    if (found) {
        double tn = route_seconds(&naive);
        int64_t bn = route_bytes(&naive);
        if (merge) {
            merged.s = malloc((size_t)(best.n ? best.n : 1) * sizeof *merged.s);
            if (!merged.s) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
            merged.n = merged.cap = best.n;
            memcpy(merged.s, best.s, (size_t)best.n * sizeof *best.s);
            LDT_CHECK_GOTO(merge_route(&pr, &merged));
            if (route_seconds(&merged) <= tn && (!uniform || route_bytes(&merged) <= bn)) {
                route t = best;
                best = merged;
                merged = t;
            }
        }
        if (route_seconds(&best) <= tn && (!uniform || route_bytes(&best) <= bn)) {
            route t = naive;
            naive = best;
            best = t;
        }
    }
    for (int i = 0; i < naive.n; i++) naive.s[i].pub.mesh = mesh_id;
    *out = naive;
    naive.s = NULL;
fail:
    route_free(&naive);
    route_free(&best);
    route_free(&merged);
    pricer_free(&pr);
    return st;
}

/* ---- across meshes ------------------------------------------------------------------------ */

int ldt__xmesh_is_source(const ldt_spec *src, int64_t target_pos, const int64_t *src_coord) {
    int64_t nrep = 1, rem;
    for (int i = 0; i < src->nplace; i++)
        if (src->placements[i].kind == LDT_PLACE_REPLICATE) nrep *= ldt_mesh_dim_size(src->mesh, i);
    rem = target_pos % nrep;
    for (int i = src->nplace - 1; i >= 0; i--) {
        int64_t sz;
        if (src->placements[i].kind != LDT_PLACE_REPLICATE) continue;
        sz = ldt_mesh_dim_size(src->mesh, i);
        if (src_coord[i] != rem % sz) return 0;
        rem /= sz;
    }
    return 1;
}

/* The bounding interval of runs u: [lo, hi). */
static void runs_bound(const ldt_dim_runs *u, int64_t *lo, int64_t *hi) {
    *lo = u->start;
    *hi = u->blocks > 0 && u->len > 0 ? u->start + (u->blocks - 1) * u->block_stride + u->len : u->start;
}

/* A source piece's run on one tensor dim: where it starts and its length. Its blocks and their
 * stride are the spec's, alike for every rank (xmesh_runs). */
typedef struct xrun {
    int64_t start, len;
} xrun;

static ldt_dim_runs xmesh_runs(const xrun *x, const ldt_dim_runs *tpl) {
    ldt_dim_runs r = {x->start, x->len, tpl->blocks, tpl->block_stride};
    return r;
}

/* Sources by the start of their bounding interval on one tensor dim, with the running
 * largest end, so a target finds the sources that can overlap it without trying them all. */
typedef struct xindex {
    int d;
    int *by_lo;       /* source positions, by bounding start */
    int64_t *lo;      /* their starts, ascending */
    int64_t *max_hi;  /* the largest end among by_lo[0..i] */
} xindex;

typedef struct xkey {
    int64_t lo;
    int pos;
} xkey;

static int xkey_cmp(const void *a, const void *b) {
    const xkey *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->pos - y->pos;
}

/* The dim whose bounding intervals cover the least of it on average (the most selective),
 * indexed. xr: each source's runs per tensor dim, N x ndim, with the blocks of tpl. */
static ldt_status xindex_build(const xrun *xr, const ldt_dim_runs *tpl, int N, const ldt_shape *shape,
                               xindex *ix) {
    int ndim = shape->ndim;
    double best = -1;
    xkey *k;
    memset(ix, 0, sizeof *ix);
    for (int d = 0; d < ndim; d++) {
        double w = 0;
        for (int a = 0; a < N; a++) {
            int64_t lo, hi;
            ldt_dim_runs r = xmesh_runs(&xr[(size_t)a * ndim + d], &tpl[d]);
            runs_bound(&r, &lo, &hi);
            w += (double)(hi - lo) / (double)(shape->dims[d] > 0 ? shape->dims[d] : 1);
        }
        if (best < 0 || w < best) best = w, ix->d = d;
    }
    k = malloc((size_t)(N ? N : 1) * sizeof *k);
    ix->by_lo = malloc((size_t)(N ? N : 1) * sizeof *ix->by_lo);
    ix->lo = malloc((size_t)(N ? N : 1) * sizeof *ix->lo);
    ix->max_hi = malloc((size_t)(N ? N : 1) * sizeof *ix->max_hi);
    if (!k || !ix->by_lo || !ix->lo || !ix->max_hi) {
        free(k);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    /* a 0-D tensor has no dims to bound: every piece is [0, 1) (xr holds nothing) */
    for (int a = 0; a < N; a++) {
        int64_t hi;
        k[a].lo = 0;
        if (ndim) {
            ldt_dim_runs r = xmesh_runs(&xr[(size_t)a * ndim + ix->d], &tpl[ix->d]);
            runs_bound(&r, &k[a].lo, &hi);
        }
        k[a].pos = a;
    }
    qsort(k, (size_t)N, sizeof *k, xkey_cmp);
    for (int i = 0; i < N; i++) {
        int64_t lo, hi = 1;
        if (ndim) {
            ldt_dim_runs r = xmesh_runs(&xr[(size_t)k[i].pos * ndim + ix->d], &tpl[ix->d]);
            runs_bound(&r, &lo, &hi);
        }
        ix->by_lo[i] = k[i].pos;
        ix->lo[i] = k[i].lo;
        ix->max_hi[i] = i && ix->max_hi[i - 1] > hi ? ix->max_hi[i - 1] : hi;
    }
    free(k);
    return LDT_OK;
}

static void xindex_free(xindex *ix) {
    free(ix->by_lo);
    free(ix->lo);
    free(ix->max_hi);
}

/* The send_recv step from X (source mesh, no Partial) to Y (target mesh, no Partial):
 * bytes per world rank summed over its peers (a rank on both meshes copies to itself for
 * free), peers counted for the latency term. */
static ldt_status price_xmesh(const ldt_spec *X, const ldt_spec *Y, const ldt_cost_model *cm,
                              ldt__rstep *out) {
    ldt_status st = LDT_OK;
    pricer pa, pb;
    int maxw = 0;
    int64_t *sent = NULL, *recv = NULL, ms = 0, mr = 0, nrep = 1;
    int *peers = NULL, maxp = 0, *reps = NULL, nreps = 0, nt = X->shape.ndim;
    xrun *xr = NULL;             /* each source piece's runs, nreps x nt */
    ldt_dim_runs tpl[LDT_MAX_DIMS]; /* their blocks, per tensor dim */
    ldt__rstep s;
    xindex ix;
    memset(&s, 0, sizeof s);
    memset(&ix, 0, sizeof ix);
    memset(tpl, 0, sizeof tpl);
    LDT_CHECK(pricer_init(&pa, X->mesh, cm, X, NULL));
    st = pricer_init(&pb, Y->mesh, cm, Y, NULL);
    if (st != LDT_OK) {
        pricer_free(&pa);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    for (int p = 0; p < pa.N; p++)
        if (ldt_mesh_rank_at(X->mesh, p) > maxw) maxw = ldt_mesh_rank_at(X->mesh, p);
    for (int p = 0; p < pb.N; p++)
        if (ldt_mesh_rank_at(Y->mesh, p) > maxw) maxw = ldt_mesh_rank_at(Y->mesh, p);
    sent = calloc((size_t)maxw + 1, sizeof *sent);
    recv = calloc((size_t)maxw + 1, sizeof *recv);
    peers = calloc((size_t)maxw + 1, sizeof *peers);
    if (!sent || !recv || !peers) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    /* Replicas of a source piece hold the same region, and a target takes it from one
     * replica only (ldt__xmesh_is_source): only one position per piece (its replicated
     * coordinates 0) is indexed, by its bounding box, and a target finds the replica that
     * serves it by putting its own choice of replica coordinates in (a replicated source
     * mesh of 1024 x 1024 costs a lookup per target, not 1024). Regions are laid out when
     * needed, one at a time: no per-rank region is stored on either side. */
    for (int i = 0; i < X->nplace; i++)
        if (X->placements[i].kind == LDT_PLACE_REPLICATE) nrep *= ldt_mesh_dim_size(X->mesh, i);
    nreps = pa.N / (int)nrep;
    reps = malloc((size_t)(nreps ? nreps : 1) * sizeof *reps);
    xr = malloc((size_t)(nreps ? nreps : 1) * (size_t)(nt ? nt : 1) * sizeof *xr);
    if (!reps || !xr) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    for (int a = 0, k = 0; a < pa.N; a++) {
        int64_t c[LDT_MAX_DIMS];
        int first = 1;
        ldt_region rx;
        for (int d = 0; d < pa.nd; d++) {
            c[d] = (a / pa.mstride[d]) % ldt_mesh_dim_size(X->mesh, d);
            if (X->placements[d].kind == LDT_PLACE_REPLICATE && c[d] != 0) first = 0;
        }
        if (!first) continue;
        ldt__layout_coord_checked(X, c, &rx);
        for (int d = 0; d < nt; d++) {
            xr[(size_t)k * nt + d].start = rx.runs[d].start;
            xr[(size_t)k * nt + d].len = rx.runs[d].len;
            tpl[d] = rx.runs[d];
        }
        reps[k++] = a;
    }
    LDT_CHECK_GOTO(xindex_build(xr, tpl, nreps, &X->shape, &ix));
    for (int b = 0; b < pb.N; b++) {
        int64_t tlo, thi, add = 0, rem = b % nrep, c[LDT_MAX_DIMS];
        int top, wb = ldt_mesh_rank_at(Y->mesh, b);
        ldt_region ry;
        for (int d = 0; d < pb.nd; d++) c[d] = (b / pb.mstride[d]) % ldt_mesh_dim_size(Y->mesh, d);
        ldt__layout_coord_checked(Y, c, &ry);
        if (ry.numel == 0) continue;
        for (int i = X->nplace - 1; i >= 0; i--) { /* the replica ldt__xmesh_is_source chooses */
            int64_t sz;
            if (X->placements[i].kind != LDT_PLACE_REPLICATE) continue;
            sz = ldt_mesh_dim_size(X->mesh, i);
            add += (rem % sz) * pa.mstride[i];
            rem /= sz;
        }
        if (nt) runs_bound(&ry.runs[ix.d], &tlo, &thi);
        else tlo = 0, thi = 1; /* a 0-D tensor: as xindex_build bounds it */
        /* the last source starting before the target ends, then back while any can reach it */
        {
            int l = 0, h = nreps;
            while (l < h) {
                int m = l + (h - l) / 2;
                if (ix.lo[m] < thi) l = m + 1;
                else h = m;
            }
            top = l - 1;
        }
        for (int i = top; i >= 0 && ix.max_hi[i] > tlo; i--) {
            int apos = reps[ix.by_lo[i]] + (int)add, wa = ldt_mesh_rank_at(X->mesh, apos);
            const xrun *x = &xr[(size_t)ix.by_lo[i] * nt];
            int64_t n = 1;
            if (wa == wb) continue;
            /* the piece's runs (every replica holds them) met with the target's dim by dim */
            for (int d = 0; d < nt && n; d++) {
                ldt_dim_runs r = xmesh_runs(&x[d], &tpl[d]);
                n *= runs_isect(&r, &ry.runs[d]);
            }
            if (n == 0) continue;
            sent[wa] += n;
            recv[wb] += n;
            peers[wa]++;
            peers[wb]++;
        }
    }
    for (int w = 0; w <= maxw; w++) {
        if (sent[w] > ms) ms = sent[w];
        if (recv[w] > mr) mr = recv[w];
        if (peers[w] > maxp) maxp = peers[w];
    }
    s.pub.collective = LDT_COLL_SEND_RECV;
    s.pub.nfrom = X->nplace;
    s.pub.nto = Y->nplace;
    memcpy(s.pub.from, X->placements, sizeof s.pub.from);
    memcpy(s.pub.to, Y->placements, sizeof s.pub.to);
    s.pub.bytes_sent = sat_mul(ms, (int64_t)pa.es);
    s.pub.bytes_recv = sat_mul(mr, (int64_t)pa.es);
    {
        int64_t b = step_bytes(&s.pub);
        double ta = ldt_cost_seconds(cm, X->mesh, 0, NULL, LDT_COLL_SEND_RECV, b, maxp);
        double tb = ldt_cost_seconds(cm, Y->mesh, 0, NULL, LDT_COLL_SEND_RECV, b, maxp);
        s.pub.seconds = ta > tb ? ta : tb;
    }
    s.before = *X;
    s.after = *Y;
    *out = s;
fail:
    xindex_free(&ix);
    free(reps);
    free(xr);
    free(sent);
    free(recv);
    free(peers);
    pricer_free(&pa);
    pricer_free(&pb);
    return st;
}

/* ---- the public plan ---------------------------------------------------------------------- */

static void replace_partial(ldt_spec *s) {
    for (int i = 0; i < s->nplace; i++)
        if (s->placements[i].kind == LDT_PLACE_PARTIAL) s->placements[i] = ldt_replicate();
}

ldt_status ldt_redist_plan_create(const ldt_spec *src, const ldt_mesh *to_mesh,
                                  const ldt_placement *to, int nto,
                                  const ldt_redist_options *opts, ldt_redist_plan **out) {
    LDT_CHECK(ldt__redist_plan_create_memo(src, to_mesh, to, nto, opts, NULL, out));
    return LDT_OK;
}

ldt_status ldt__redist_plan_create_memo(const ldt_spec *src, const ldt_mesh *to_mesh,
                                        const ldt_placement *to, int nto,
                                        const ldt_redist_options *opts, ldt__step_memo *memo,
                                        ldt_redist_plan **out) {
    ldt_status st = LDT_OK;
    ldt_redist_plan *p = NULL;
    ldt_cost_model dcm;
    const ldt_cost_model *cm = &dcm; /* the caller's, borrowed (not copied: planners call this
                                      * thousands of times), or the default */
    route a = {0}, b = {0}, c = {0};
    int merge = opts ? opts->merge : 1;
    ldt_redist_search search = opts ? opts->search : LDT_REDIST_DIJKSTRA;
    char m[128];
    if (!src || !out || (nto > 0 && !to))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: arguments must not be NULL");
    *out = NULL;
    LDT_CHECK(ldt_spec_check(src));
    if (opts && opts->cost) {
        LDT_CHECK(ldt_cost_model_check(opts->cost));
        cm = opts->cost;
    } else {
        LDT_CHECK(ldt_cost_model_default(NULL, src->mesh, &dcm, NULL));
    }
    if ((int)search < LDT_REDIST_DIJKSTRA || search > LDT_REDIST_NAIVE)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: invalid search %d, expected dijkstra "
                 "or naive", (int)search);
    if (!to_mesh || ldt_mesh_equal(to_mesh, src->mesh)) to_mesh = src->mesh;
    if (nto != ldt_mesh_ndim(to_mesh)) {
        ldt_mesh_format(to_mesh, m, sizeof m);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "redistribute: %d target placements for mesh %s with %d dims, expected one per "
                 "mesh dim", nto, m, ldt_mesh_ndim(to_mesh));
    }
    p = calloc(1, sizeof *p);
    if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    p->src = *src;
    st = ldt_spec_init(&p->dst, to_mesh, &src->shape, to, nto, src->dtype);
    if (st != LDT_OK) {
        ldt__error_prefix(st, "redistribute: target");
        ldt__trace(st, __FILE__, __LINE__);
        goto fail;
    }
    p->cross = to_mesh != src->mesh;
    if (!p->cross) {
        for (int i = 0; i < nto; i++) {
            const ldt_placement *x = &src->placements[i], *y = &p->dst.placements[i];
            if (x->kind == LDT_PLACE_PARTIAL && y->kind == LDT_PLACE_PARTIAL && x->op != y->op)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "redistribute: mesh dim %d goes from Partial(%s) to Partial(%s); a "
                              "Partial never changes its reduce op (P->P with another op): "
                              "reduce it first, to R or S",
                              i, ldt_reduce_op_name(x->op), ldt_reduce_op_name(y->op));
        }
        LDT_CHECK_GOTO(plan_one_mesh(src, &p->dst, cm, merge, search, 0, memo, &a));
    } else {
        /* Reduce on the source mesh, move by intersections, make Partials on the target. */
        ldt_spec xr = *src, yr = p->dst;
        ldt__rstep x;
        replace_partial(&xr);
        replace_partial(&yr);
        LDT_CHECK_GOTO(plan_one_mesh(src, &xr, cm, merge, search, 0, NULL, &a));
        LDT_CHECK_GOTO(price_xmesh(&xr, &yr, cm, &x));
        LDT_CHECK_GOTO(route_push(&a, &x));
        LDT_CHECK_GOTO(plan_one_mesh(&yr, &p->dst, cm, merge, search, 1, NULL, &b));
        for (int i = 0; i < b.n; i++) LDT_CHECK_GOTO(route_push(&a, &b.s[i]));
    }
    p->nsteps = a.n;
    p->steps = a.s;
    a.s = NULL;
    for (int i = 0; i < p->nsteps; i++) {
        p->seconds += p->steps[i].pub.seconds;
        p->bytes += step_bytes(&p->steps[i].pub);
    }
    *out = p;
    p = NULL;
fail:
    route_free(&a);
    route_free(&b);
    route_free(&c);
    ldt_redist_plan_destroy(p);
    return st;
}

void ldt_redist_plan_destroy(ldt_redist_plan *p) {
    if (!p) return;
    free(p->steps);
    free(p);
}

int ldt_redist_plan_nsteps(const ldt_redist_plan *p) { return p ? p->nsteps : 0; }

ldt_status ldt_redist_plan_step(const ldt_redist_plan *p, int i, ldt_redist_step *out) {
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute plan: arguments must not be NULL");
    if (i < 0 || i >= p->nsteps)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute plan: step %d out of range [0, %d)", i,
                 p->nsteps);
    *out = p->steps[i].pub;
    return LDT_OK;
}

int64_t ldt_redist_plan_bytes(const ldt_redist_plan *p) { return p ? p->bytes : 0; }
double ldt_redist_plan_seconds(const ldt_redist_plan *p) { return p ? p->seconds : 0; }
const ldt_spec *ldt_redist_plan_source(const ldt_redist_plan *p) { return p ? &p->src : NULL; }
const ldt_spec *ldt_redist_plan_target(const ldt_redist_plan *p) { return p ? &p->dst : NULL; }
int ldt_redist_plan_is_cross_mesh(const ldt_redist_plan *p) { return p ? p->cross : 0; }

int ldt_redist_step_format(const ldt_redist_step *s, char *buf, size_t cap) {
    char from[256], to[256], dims[64];
    size_t at = 0;
    ldt_placements_format(s->from, s->nfrom, from, sizeof from);
    ldt_placements_format(s->to, s->nto, to, sizeof to);
    dims[0] = '\0';
    for (int i = 0; i < s->ndims; i++)
        at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%d", i ? "," : "", s->dims[i]);
    return snprintf(buf, cap, "%s [%s] %s->%s sent %lldB recv %lldB %.3gs",
                    ldt_collective_name(s->collective), dims, from, to, (long long)s->bytes_sent,
                    (long long)s->bytes_recv, s->seconds);
}
