/* The exact search's second method (docs/planner.md, "The exact search"): a depth-first
 * branch and bound over the nodes in trace order, seeded with a plan's cost, memoised on the
 * frontier. At depth i the cost still to come depends only on the strategies of the nodes
 * before i that produce a value read at i or later, and of the consumers (before i) of those
 * values (which moves were already paid); those strategies key the memo. A node's cost is
 * its own seconds (a leaf's: its memory term under a memory weight) and, per input, the move
 * from its producer's output unless an earlier use of the same value asked the same placement
 * list (price() in plan.c). Bound: the cost so far plus every later node's least own seconds.
 * Work: nodes visited, past `limit` it gives up. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/exact.h"
#include "planner/plan_internal.h"

typedef struct bent {
    uint64_t h;
    int64_t key; /* offset of the key in the pool; -1: empty */
    double val;
    int exact;
} bent;

typedef struct bb {
    ldt_plan *p;
    const int32_t *fixed;
    int64_t n;
    int32_t *a;
    double *rest; /* rest[i]: the least own seconds of nodes i.. */
    int64_t *koff; /* key of depth i: knode[koff[i] .. koff[i+1]) */
    int32_t *knode;
    bent *tab;
    int64_t cap, used;
    int32_t *pool;
    int64_t npool, cappool;
    int64_t visits, limit;
    int over, oom;
} bb;

static int is_leaf(const ldt_tensor *t) { return t->kind == LDT__PERSISTENT; }

/* What node v at strategy a[v] pays for its input k (slot j of its producer's uses). */
static double slot_cost(bb *B, int64_t v, int k) {
    ldt_plan *p = B->p;
    const ldt_tensor *t = p->ctx->nodes[v];
    int64_t u = LDT__IN(t)[k]->id;
    int from = LDT__SSET_PL(p->node_ss[u], B->a[u])[0];
    int to = LDT__SSET_PL(p->node_ss[v], B->a[v])[1 + k];
    double m;
    if (from == to) return 0;
    for (int64_t j = p->use_off[u]; j < p->use_off[u + 1]; j++) {
        int32_t w = p->use_node[j];
        if (w > v || (w == v && p->use_slot[j] >= k)) break; /* uses are in (node, slot) order */
        if (LDT__SSET_PL(p->node_ss[w], B->a[w])[1 + p->use_slot[j]] == to) return 0;
    }
    m = ldt__plan_move_seconds(p, p->node_class[u], from, to);
    return m + (p->opts.strict ? 1e9 : 0);
}

static double node_cost(bb *B, int64_t v) {
    ldt_plan *p = B->p;
    const ldt_tensor *t = p->ctx->nodes[v];
    double c;
    /* own seconds, or a leaf's memory term (no inputs) */
    c = p->node_ss[v]->own ? p->node_ss[v]->own[B->a[v]] : 0;
    for (int k = 0; k < t->nin; k++) c += slot_cost(B, v, k);
    return c;
}

static uint64_t key_hash(int64_t depth, const int32_t *a, const int32_t *kn, int64_t nk) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)depth;
    for (int64_t i = 0; i < nk; i++) {
        h ^= (uint64_t)(uint32_t)a[kn[i]] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9ull;
    }
    return h ^ (h >> 31);
}

/* The memo slot of depth i's key (found, or the empty slot it would take). */
static bent *memo_slot(bb *B, int64_t i, uint64_t h) {
    const int32_t *kn = B->knode + B->koff[i];
    int64_t nk = B->koff[i + 1] - B->koff[i];
    uint64_t s = h & (uint64_t)(B->cap - 1);
    for (;;) {
        bent *e = &B->tab[s];
        if (e->key < 0) return e;
        if (e->h == h) {
            const int32_t *k = B->pool + e->key;
            int same = k[0] == (int32_t)i;
            for (int64_t j = 0; same && j < nk; j++) same = k[1 + j] == B->a[kn[j]];
            if (same) return e;
        }
        s = (s + 1) & (uint64_t)(B->cap - 1);
    }
}

static void memo_put(bb *B, int64_t i, uint64_t h, double val, int exact) {
    const int32_t *kn = B->knode + B->koff[i];
    int64_t nk = B->koff[i + 1] - B->koff[i];
    bent *e = memo_slot(B, i, h);
    if (e->key >= 0) {
        if (exact || (!e->exact && val > e->val)) {
            e->val = val;
            e->exact = exact;
        }
        return;
    }
    if (10 * (B->used + 1) > 7 * B->cap) return; /* full: no more memo (still exact) */
    if (B->npool + nk + 1 > B->cappool) {
        int64_t c = B->cappool ? 2 * B->cappool : 4096;
        int32_t *np;
        while (c < B->npool + nk + 1) c *= 2;
        if (!(np = realloc(B->pool, (size_t)c * sizeof *np))) {
            B->oom = 1;
            return;
        }
        B->pool = np;
        B->cappool = c;
    }
    e->h = h;
    e->key = B->npool;
    B->pool[B->npool++] = (int32_t)i;
    for (int64_t j = 0; j < nk; j++) B->pool[B->npool++] = B->a[kn[j]];
    e->val = val;
    e->exact = exact;
    B->used++;
}

/* The least cost of nodes i.. given a[0..i): exact (*exact 1) when below budget, else a
 * lower bound >= budget (*exact 0). */
static double solve(bb *B, int64_t i, double budget, int *exact) {
    ldt_plan *p = B->p;
    uint64_t h;
    bent *e;
    double best = INFINITY;
    int all = 1, m, fixed_s;
    if (i == B->n) {
        *exact = 1;
        return 0;
    }
    if (++B->visits > B->limit || B->oom) {
        B->over = 1;
        *exact = 0;
        return budget;
    }
    h = key_hash(i, B->a, B->knode + B->koff[i], B->koff[i + 1] - B->koff[i]);
    e = memo_slot(B, i, h);
    if (e->key >= 0 && (e->exact || e->val >= budget)) {
        *exact = e->exact;
        return e->val;
    }
    if (B->rest[i] >= budget) {
        *exact = 0;
        return B->rest[i];
    }
    fixed_s = B->fixed && B->fixed[i] >= 0 ? B->fixed[i] : -1;
    /* a leaf nobody reads takes its least memory term (strategy 0 without a weight) */
    m = p->node_ss[i]->n;
    if (is_leaf(p->ctx->nodes[i]) && p->use_off[i] == p->use_off[i + 1] && fixed_s < 0) {
        const double *own = p->node_ss[i]->own;
        fixed_s = 0;
        for (int s = 1; own && s < m; s++)
            if (own[s] < own[fixed_s]) fixed_s = s;
    }
    for (int s = 0; s < m && !B->over; s++) {
        double c, r, lim;
        int ex;
        if (fixed_s >= 0 && s != fixed_s) continue;
        B->a[i] = s;
        c = node_cost(B, i);
        lim = best < budget ? best : budget;
        if (c + B->rest[i + 1] >= lim) {
            all = 0;
            continue;
        }
        r = solve(B, i + 1, lim - c, &ex);
        if (!ex) all = 0; /* r only bounds it: c + r reaches the limit */
        else if (c + r < best) best = c + r;
    }
    if (B->over) {
        *exact = 0;
        return budget;
    }
    if (best < budget) all = 1; /* what was pruned could not beat best */
    memo_put(B, i, h, all ? best : budget, all);
    *exact = all;
    return all ? best : budget;
}

ldt_status ldt__search_bnb(ldt_plan *p, const int32_t *fixed, int64_t limit, double ub,
                           int32_t *choice, int *solved) {
    bb B;
    int64_t n = p->nnodes;
    ldt_status st = LDT_OK;
    double best, need;
    int ex;
    char *in = NULL;
    memset(&B, 0, sizeof B);
    *solved = 0;
    B.p = p;
    B.fixed = fixed;
    B.n = n;
    B.limit = limit;
    B.a = calloc((size_t)(n ? n : 1), sizeof *B.a);
    B.rest = calloc((size_t)n + 1, sizeof *B.rest);
    B.koff = calloc((size_t)n + 2, sizeof *B.koff);
    in = calloc((size_t)(n ? n : 1), 1);
    B.cap = 1 << 16;
    while (B.cap < limit / 4 && B.cap < (1 << 22)) B.cap *= 2;
    B.tab = malloc((size_t)B.cap * sizeof *B.tab);
    if (!B.a || !B.rest || !B.koff || !in || !B.tab)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the branch and bound");
    for (int64_t s = 0; s < B.cap; s++) B.tab[s].key = -1;
    for (int64_t i = n - 1; i >= 0; i--) {
        const ldt__sset *ss = p->node_ss[i];
        double mn = INFINITY;
        for (int s = 0; s < ss->n; s++) {
            double c = ss->own ? ss->own[s] : 0; /* a leaf's: its memory term */
            if (fixed && fixed[i] >= 0 && s != fixed[i]) continue;
            if (c < mn) mn = c;
        }
        B.rest[i] = B.rest[i + 1] + mn;
    }
    /* the keys: at depth i, producers before i with a use at i or later, and their earlier
     * consumers; a node leaves the frontier once its last use is behind */
    {
        int64_t total = 0, cap = 0;
        int64_t *last = calloc((size_t)(n ? n : 1), sizeof *last);
        if (!last) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        for (int64_t u = 0; u < n; u++) last[u] = p->use_off[u] < p->use_off[u + 1] ? p->use_node[p->use_off[u + 1] - 1] : -1;
        for (int64_t i = 0; i <= n; i++) {
            int64_t nk = 0;
            B.koff[i] = total;
            memset(in, 0, (size_t)(n ? n : 1));
            for (int64_t u = 0; u < i; u++) {
                if (last[u] < i) continue;
                in[u] = 1;
                for (int64_t j = p->use_off[u]; j < p->use_off[u + 1] && p->use_node[j] < i; j++)
                    in[p->use_node[j]] = 1;
            }
            for (int64_t u = 0; u < i; u++) nk += in[u];
            if (total + nk > cap) {
                int64_t c = cap ? 2 * cap : 1024;
                int32_t *nkn;
                while (c < total + nk) c *= 2;
                if (!(nkn = realloc(B.knode, (size_t)c * sizeof *nkn))) {
                    free(last);
                    LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
                }
                B.knode = nkn;
                cap = c;
            }
            for (int64_t u = 0; u < i; u++)
                if (in[u]) B.knode[total++] = (int32_t)u;
            /* quadratic in nodes: only small graphs get here (the caller's limit) */
        }
        B.koff[n + 1] = total;
        free(last);
    }
    best = solve(&B, 0, ub, &ex);
    if (B.oom) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the branch and bound");
    if (B.over || !ex) goto fail; /* gave up, or nothing below ub: the seed is optimal (caller) */
    /* the assignment: at each depth the first strategy whose cost and rest reach the optimum */
    need = best;
    for (int64_t i = 0; i < n; i++) {
        int found = 0;
        for (int s = 0; s < p->node_ss[i]->n && !found; s++) {
            double c, r;
            int e2;
            if (fixed && fixed[i] >= 0 && s != fixed[i]) continue;
            B.a[i] = s;
            c = node_cost(&B, i);
            if (c > need + 1e-12 * (fabs(best) + 1e-300)) continue;
            r = solve(&B, i + 1, need - c + 1e-12 * (fabs(best) + 1e-300), &e2);
            if (e2 && c + r <= need + 1e-12 * (fabs(best) + 1e-300)) {
                found = 1;
                need -= c;
            }
        }
        if (!found || B.over) goto fail; /* float trouble or the limit: leave the seed */
    }
    memcpy(choice, B.a, (size_t)n * sizeof *choice);
    *solved = 1;
fail:
    free(B.a);
    free(B.rest);
    free(B.koff);
    free(B.knode);
    free(B.tab);
    free(B.pool);
    free(in);
    return st;
}
