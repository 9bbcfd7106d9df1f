/* The exact strategy choice (docs/planner.md, "The exact search"): min-sum variable
 * elimination (bucket elimination) over the plan's cost function.
 *
 * Variables: one per node, its strategy (the node's domain: every strategy, or the one a
 * bypass or a fixed plan gives it; a node with one strategy is a constant and joins no
 * table). Factors: each non-leaf node's own seconds (unary), and per producer u one factor
 * over u and its distinct consumers: the sum over the distinct placement lists its consumers'
 * strategies ask of u, other than the one u's strategy gives, of the move's price (the plan's
 * one price, ldt__plan_redist; a value asked twice the same way moves once, as lowering does).
 * That is exactly price() in plan.c, so the minimum found is the plan's cost.
 *
 * Elimination picks the variable whose new table is smallest (the product of its neighbours'
 * domain sizes; ties: the lower node id) from a heap with lazy keys, sums its bucket's tables
 * with its unary, minimises it out, and leaves the new table to its neighbours; the choice is
 * then decoded in reverse order. The work is the table entries made times the eliminated
 * domain; past `limit` it stops and reports failure (the caller falls back to the heuristic),
 * with a proven lower bound: the sum of each node's least own seconds and each producer
 * factor's least entry. No step depends on addresses, hash order or time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/exact.h"
#include "planner/plan_internal.h"

#define STRICT_PENALTY 1e9

typedef struct fac {
    int nv;
    int32_t *vars; /* ascending node ids, each with a domain of 2 or more */
    int64_t size;
    double *tab; /* row-major: the last var varies fastest */
    int alive;
} fac;

typedef struct solver {
    ldt_plan *p;
    int64_t n;     /* node variables: 0..n */
    int64_t nvars; /* and request variables: n..nvars */
    int64_t capvars;
    int32_t *nd;    /* domain size per node */
    int32_t **dom;  /* domain: strategy indexes */
    double **unary; /* per node, per domain entry */
    fac *f;
    int64_t nf, capf;
    int64_t **vf; /* per node, the ids of factors holding it */
    int64_t *nvf, *capvf;
    int64_t work, limit;
    int failed_oom;
    int dry; /* eliminations make scopes only (the work is counted before any table) */
    /* elimination record */
    int32_t *order;
    int64_t norder;
    int64_t **bucket; /* per node, the factors summed when it was eliminated */
    int64_t *nbucket;
    double constant;
    /* scratch */
    uint32_t *mark;
    uint32_t stamp;
} solver;

static int push_vf(solver *S, int32_t v, int64_t id) {
    if (S->nvf[v] == S->capvf[v]) {
        int64_t c = S->capvf[v] ? 2 * S->capvf[v] : 4;
        int64_t *n = realloc(S->vf[v], (size_t)c * sizeof *n);
        if (!n) return 0;
        S->vf[v] = n;
        S->capvf[v] = c;
    }
    S->vf[v][S->nvf[v]++] = id;
    return 1;
}

/* A new factor over vars (ascending, nv of them) with its table; takes ownership. */
static int add_fac(solver *S, int32_t *vars, int nv, int64_t size, double *tab) {
    fac *x;
    if (S->nf == S->capf) {
        int64_t c = S->capf ? 2 * S->capf : 64;
        fac *n = realloc(S->f, (size_t)c * sizeof *n);
        if (!n) return 0;
        S->f = n;
        S->capf = c;
    }
    x = &S->f[S->nf];
    x->nv = nv;
    x->vars = vars;
    x->size = size;
    x->tab = tab;
    x->alive = 1;
    for (int i = 0; i < nv; i++)
        if (!push_vf(S, vars[i], S->nf)) return 0;
    S->nf++;
    return 1;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The product of the domains of vars, capped at cap + 1. */
static int64_t dom_product(const solver *S, const int32_t *vars, int nv, int64_t cap) {
    int64_t s = 1;
    for (int i = 0; i < nv; i++) {
        if (s > cap / S->nd[vars[i]]) return cap + 1;
        s *= S->nd[vars[i]];
    }
    return s;
}

static int is_leaf(const ldt_tensor *t) { return t->kind == LDT__PERSISTENT; }

/* Room for `need` variables in every per-variable array (new entries zeroed). */
static int grow_vars(solver *S, int64_t need) {
    int64_t c = S->capvars;
    if (need <= c) return 1;
    while (c < need) c = c ? 2 * c : 1024;
#define GROW(arr)                                                                                  \
    do {                                                                                           \
        void *nv_ = realloc(S->arr, (size_t)c * sizeof *S->arr);                                   \
        if (!nv_) return 0;                                                                        \
        S->arr = nv_;                                                                              \
        memset(S->arr + S->capvars, 0, (size_t)(c - S->capvars) * sizeof *S->arr);                 \
    } while (0)
    GROW(nd);
    GROW(dom);
    GROW(unary);
    GROW(vf);
    GROW(nvf);
    GROW(capvf);
    GROW(bucket);
    GROW(nbucket);
    GROW(order);
    GROW(mark);
#undef GROW
    S->capvars = c;
    return 1;
}

/* A new variable with domain 0..m-1 (dom filled by the caller) and zero unary; its id or -1. */
static int64_t new_var(solver *S, int m) {
    int64_t r = S->nvars;
    if (!grow_vars(S, r + 1)) return -1;
    if (!(S->dom[r] = malloc((size_t)(m ? m : 1) * sizeof *S->dom[r])) ||
        !(S->unary[r] = calloc((size_t)(m ? m : 1), sizeof *S->unary[r])))
        return -1;
    S->nd[r] = m;
    S->nvars++;
    return r;
}

/* The placement list slot j (a use of u) asks of u under domain entry i of its consumer. */
static int slot_req(const solver *S, int64_t j, int i) {
    const ldt_plan *p = S->p;
    int32_t w = p->use_node[j];
    return LDT__SSET_PL(p->node_ss[w], S->dom[w][i])[1 + p->use_slot[j]];
}

/* A request variable for use j of a value: its domain the distinct lists the consumer's
 * strategies ask, tied to the consumer by a factor (0 where they agree, infinite elsewhere).
 * Its id, or -1 on out of memory, -2 over the limit. */
static int64_t request_var(solver *S, int64_t j) {
    int32_t w = S->p->use_node[j], r, m = 0;
    int32_t *vars;
    double *tab;
    int64_t size, rv = new_var(S, S->nd[w]);
    if (rv < 0) return -1;
    r = (int32_t)rv;
    for (int i = 0; i < S->nd[w]; i++) {
        int to = slot_req(S, j, i), k;
        for (k = 0; k < m && S->dom[r][k] != to; k++) {}
        if (k == m) S->dom[r][m++] = to;
    }
    S->nd[r] = m;
    if (m == 1) return r; /* a constant request */
    size = (int64_t)S->nd[w] * m;
    if (S->work + size > S->limit) return -2;
    S->work += size;
    vars = malloc(2 * sizeof *vars);
    tab = malloc((size_t)size * sizeof *tab);
    if (!vars || !tab) {
        free(vars);
        free(tab);
        return -1;
    }
    vars[0] = w;
    vars[1] = r;
    for (int i = 0; i < S->nd[w]; i++) {
        int to = slot_req(S, j, i);
        for (int k = 0; k < m; k++) tab[(int64_t)i * m + k] = S->dom[r][k] == to ? 0 : INFINITY;
    }
    if (!add_fac(S, vars, 2, size, tab)) return -1;
    return r;
}

/* Beyond this many entries a producer's table over its uses' requests is split by target
 * (target_factors). */
#define Y_MODE_SIZE 4096

/* A factor over two variables (a < b) from a table; 1 done, 0 out of memory, -1 over the limit. */
static int pair_factor(solver *S, int32_t a, int32_t b, double *tab) {
    int32_t *vars;
    int64_t size = (int64_t)S->nd[a] * S->nd[b];
    if (S->work + size > S->limit) {
        free(tab);
        return -1;
    }
    S->work += size;
    if (!(vars = malloc(2 * sizeof *vars))) {
        free(tab);
        return 0;
    }
    vars[0] = a;
    vars[1] = b;
    if (!add_fac(S, vars, 2, size, tab)) return 0;
    return 1;
}

/* The moves of u's value split by target: for each placement list t some use may ask, a
 * binary variable y_t (t is asked: its move is paid once, price(out(u), t), nothing when u
 * gives t), tied to each use's request variable (asking t forces y_t = 1). The minimum over
 * the y's is the sum over the distinct lists asked: the same function as the one table, in
 * factors of two variables. svar: per use, its request variable (or a constant consumer). */
static int target_factors(solver *S, int32_t u, const int32_t *svar) {
    ldt_plan *p = S->p;
    int64_t a = p->use_off[u], b = p->use_off[u + 1];
    int *tl = NULL, nt = 0, cap = 0, r = 1;
    int64_t *yv = NULL;
    /* the distinct targets, in a fixed order (uses in order, domains in order) */
    for (int64_t j = a; j < b && r == 1; j++) {
        int32_t x = svar[j - a];
        int m = x >= S->n ? S->nd[x] : 1;
        for (int i = 0; i < m; i++) {
            int to = x >= S->n ? S->dom[x][i] : slot_req(S, j, 0), k;
            for (k = 0; k < nt && tl[k] != to; k++) {}
            if (k < nt) continue;
            if (nt == cap) {
                int *n2;
                cap = cap ? 2 * cap : 16;
                if (!(n2 = realloc(tl, (size_t)cap * sizeof *n2))) r = 0;
                else tl = n2;
                if (!r) break;
            }
            tl[nt++] = to;
        }
    }
    if (r == 1 && !(yv = malloc((size_t)(nt ? nt : 1) * sizeof *yv))) r = 0;
    for (int k = 0; k < nt && r == 1; k++) {
        int64_t y = new_var(S, 2);
        if (y < 0) {
            r = 0;
            break;
        }
        S->dom[y][0] = 0;
        S->dom[y][1] = 1;
        yv[k] = y;
        /* paying the move: a factor with u, or a unary when u is a constant */
        if (S->nd[u] > 1) {
            double *tab = malloc((size_t)S->nd[u] * 2 * sizeof *tab);
            if (!tab) {
                r = 0;
                break;
            }
            for (int i = 0; i < S->nd[u]; i++) {
                int from = LDT__SSET_PL(p->node_ss[u], S->dom[u][i])[0];
                double c = 0;
                if (from != tl[k]) {
                    ldt__redist_memo *m = ldt__plan_redist(p, p->node_class[u], from, tl[k], 0);
                    c = m ? m->seconds : INFINITY;
                    if (p->opts.strict) c += STRICT_PENALTY;
                }
                tab[2 * i] = 0;
                tab[2 * i + 1] = c;
            }
            r = pair_factor(S, u, (int32_t)y, tab);
        } else {
            int from = LDT__SSET_PL(p->node_ss[u], S->dom[u][0])[0];
            double c = 0;
            if (from != tl[k]) {
                ldt__redist_memo *m = ldt__plan_redist(p, p->node_class[u], from, tl[k], 0);
                c = m ? m->seconds : INFINITY;
                if (p->opts.strict) c += STRICT_PENALTY;
            }
            S->unary[y][1] = c;
        }
    }
    /* asking t forces y_t */
    for (int64_t j = a; j < b && r == 1; j++) {
        int32_t x = svar[j - a];
        if (x < S->n || S->nd[x] < 2) { /* a constant request: y_t must be 1 */
            int to = x >= S->n ? S->dom[x][0] : slot_req(S, j, 0), k;
            for (k = 0; k < nt && tl[k] != to; k++) {}
            S->unary[yv[k]][0] = INFINITY;
            continue;
        }
        for (int k = 0; k < nt && r == 1; k++) {
            double *tab;
            int has = 0;
            for (int i = 0; i < S->nd[x]; i++) has |= S->dom[x][i] == tl[k];
            if (!has) continue;
            if (!(tab = malloc((size_t)S->nd[x] * 2 * sizeof *tab))) {
                r = 0;
                break;
            }
            for (int i = 0; i < S->nd[x]; i++) {
                tab[2 * i] = S->dom[x][i] == tl[k] ? INFINITY : 0;
                tab[2 * i + 1] = 0;
            }
            r = pair_factor(S, x, (int32_t)yv[k], tab);
        }
    }
    free(tl);
    free(yv);
    return r;
}

/* The producer factor of node u: the moves of its value. With one consumer node, over u and
 * it; with several, over u and one request variable per use (what that use asks), so the
 * table grows with the distinct lists asked, not with the consumers' strategies. Variables
 * with a domain of 1 are constants and join no table (a scope of none adds to the constant).
 * 1 done, 0 out of memory, -1 over the limit. */
static int producer_factor(solver *S, int32_t u, double *lb) {
    ldt_plan *p = S->p;
    int64_t a = p->use_off[u], b = p->use_off[u + 1], size, nslot = b - a;
    int32_t *vars, nv = 0, ncons = 0, first = -1;
    int32_t digit[64];
    int32_t *svar = NULL; /* per use: its variable (a consumer node or a request variable) */
    int *tg = NULL;
    double *tab, mn = INFINITY;
    int req_mode;
    if (a == b) return 1;
    for (int64_t j = a; j < b; j++) {
        int32_t w = p->use_node[j];
        if (S->nd[w] < 2) continue;
        if (first < 0) first = w;
        if (w != first) ncons = 2;
        else if (!ncons) ncons = 1;
    }
    req_mode = ncons > 1;
    vars = malloc((size_t)(nslot + 1) * sizeof *vars);
    svar = malloc((size_t)nslot * sizeof *svar);
    tg = malloc((size_t)nslot * sizeof *tg);
    if (!vars || !svar || !tg) goto oom;
    if (S->nd[u] > 1) vars[nv++] = u;
    for (int64_t j = a; j < b; j++) {
        int32_t w = p->use_node[j];
        svar[j - a] = w;
        if (S->nd[w] < 2) continue;
        if (req_mode) {
            int64_t r = request_var(S, j);
            if (r == -1) goto oom;
            if (r == -2) goto over;
            svar[j - a] = (int32_t)r;
            if (S->nd[r] > 1) vars[nv++] = (int32_t)r;
        } else if (nv == 0 || vars[nv - 1] != w) {
            vars[nv++] = w;
        }
    }
    qsort(vars, (size_t)nv, sizeof *vars, cmp_i32);
    size = dom_product(S, vars, nv, S->limit);
    if (req_mode && (nv > 64 || size > Y_MODE_SIZE)) {
        int r = target_factors(S, u, svar);
        free(vars);
        free(svar);
        free(tg);
        return r;
    }
    if (nv > 64) goto over;
    if (size > S->limit || S->work + size > S->limit) goto over;
    S->work += size;
    if (!(tab = malloc((size_t)size * sizeof *tab))) goto oom;
    for (int i = 0; i < nv; i++) digit[i] = 0;
    {
        int upos = -1;
        int32_t *spos = malloc((size_t)nslot * sizeof *spos);
        if (!spos) {
            free(tab);
            goto oom;
        }
        for (int i = 0; i < nv; i++)
            if (vars[i] == u) upos = i;
        for (int64_t j = a; j < b; j++) {
            spos[j - a] = -1;
            for (int i = 0; i < nv; i++)
                if (vars[i] == svar[j - a]) spos[j - a] = i;
        }
        for (int64_t e = 0; e < size; e++) {
            int su = S->dom[u][upos >= 0 ? digit[upos] : 0];
            int from = LDT__SSET_PL(p->node_ss[u], su)[0];
            double c = 0;
            for (int64_t j = a; j < b; j++) {
                int32_t x = svar[j - a];
                int di = spos[j - a] >= 0 ? digit[spos[j - a]] : 0;
                int to = x >= S->n ? S->dom[x][di] : slot_req(S, j, di);
                int dup = 0;
                tg[j - a] = to;
                for (int64_t i = a; i < j && !dup; i++) dup = tg[i - a] == to;
                if (dup || to == from) continue;
                {
                    ldt__redist_memo *m = ldt__plan_redist(p, p->node_class[u], from, to, 0);
                    c += m ? m->seconds : INFINITY;
                }
                if (p->opts.strict) c += STRICT_PENALTY;
            }
            tab[e] = c;
            if (c < mn) mn = c;
            for (int i = nv - 1; i >= 0; i--) {
                if (++digit[i] < S->nd[vars[i]]) break;
                digit[i] = 0;
            }
        }
        free(spos);
    }
    free(svar);
    free(tg);
    *lb += mn;
    if (nv == 0) {
        S->constant += tab[0];
        free(tab);
        free(vars);
        return 1;
    }
    if (!add_fac(S, vars, nv, size, tab)) return 0;
    return 1;
oom:
    free(vars);
    free(svar);
    free(tg);
    return 0;
over:
    free(vars);
    free(svar);
    free(tg);
    return -1;
}

/* The neighbours of v among live factors (ascending, v left out) into out; their count. */
static int neighbours(solver *S, int32_t v, int32_t *out, int cap) {
    int n = 0;
    S->stamp++;
    S->mark[v] = S->stamp;
    for (int64_t i = 0; i < S->nvf[v]; i++) {
        const fac *x = &S->f[S->vf[v][i]];
        if (!x->alive) continue;
        for (int j = 0; j < x->nv; j++) {
            int32_t w = x->vars[j];
            if (S->mark[w] == S->stamp) continue;
            S->mark[w] = S->stamp;
            if (n >= cap) return -1;
            out[n++] = w;
        }
    }
    qsort(out, (size_t)n, sizeof *out, cmp_i32);
    return n;
}

/* The heap of (key, node), smallest key first, ties to the lower node. */
typedef struct hent {
    int64_t key;
    int32_t v;
} hent;

static int hless(const hent *a, const hent *b) {
    return a->key < b->key || (a->key == b->key && a->v < b->v);
}

static int hpush(hent **h, int64_t *n, int64_t *cap, hent x) {
    int64_t i;
    if (*n == *cap) {
        int64_t c = *cap ? 2 * *cap : 1024;
        hent *nh = realloc(*h, (size_t)c * sizeof *nh);
        if (!nh) return 0;
        *h = nh;
        *cap = c;
    }
    i = (*n)++;
    while (i > 0 && hless(&x, &(*h)[(i - 1) / 2])) {
        (*h)[i] = (*h)[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    (*h)[i] = x;
    return 1;
}

static hent hpop(hent *h, int64_t *n) {
    hent top = h[0], last = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && hless(&h[c + 1], &h[c])) c++;
        if (!hless(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

#define NB_CAP 4096

static int64_t elim_key(solver *S, int32_t v, int32_t *nb) {
    int n = neighbours(S, v, nb, NB_CAP);
    if (n < 0) return INT64_MAX;
    return dom_product(S, nb, n, INT64_MAX / 2);
}

/* Eliminates v: 1 done, 0 out of memory, -1 over the limit. */
static int eliminate(solver *S, int32_t v, int32_t *nb) {
    int n = neighbours(S, v, nb, NB_CAP), nf = 0;
    int64_t size, *ids;
    int32_t *vars = NULL;
    double *tab = NULL;
    int64_t *st = NULL, *sv = NULL, *base = NULL;
    int32_t *digit = NULL;
    const double *un = S->unary[v];
    if (n < 0) return -1;
    size = dom_product(S, nb, n, S->limit);
    if (size > S->limit / S->nd[v] || S->work + size * S->nd[v] > S->limit) return -1;
    S->work += size * S->nd[v];
    ids = malloc((size_t)(S->nvf[v] ? S->nvf[v] : 1) * sizeof *ids);
    if (!ids) return 0;
    for (int64_t i = 0; i < S->nvf[v]; i++)
        if (S->f[S->vf[v][i]].alive) ids[nf++] = S->vf[v][i];
    if (S->dry) {
        for (int i = 0; i < nf; i++) S->f[ids[i]].alive = 0;
        S->bucket[v] = ids;
        S->nbucket[v] = nf;
        S->order[S->norder++] = v;
        if (n == 0) return 1;
        if (!(vars = malloc((size_t)n * sizeof *vars))) return 0;
        memcpy(vars, nb, (size_t)n * sizeof *vars);
        return add_fac(S, vars, n, size, NULL) ? 1 : 0;
    }
    vars = malloc((size_t)(n ? n : 1) * sizeof *vars);
    tab = malloc((size_t)size * sizeof *tab);
    st = calloc((size_t)(nf ? nf : 1) * (size_t)(n ? n : 1), sizeof *st);
    sv = calloc((size_t)(nf ? nf : 1), sizeof *sv);
    base = calloc((size_t)(nf ? nf : 1), sizeof *base);
    digit = calloc((size_t)(n ? n : 1), sizeof *digit);
    if (!vars || !tab || !st || !sv || !base || !digit) goto oom;
    memcpy(vars, nb, (size_t)n * sizeof *vars);
    /* each factor's stride for every new var (0 where it lacks it) and for v */
    for (int i = 0; i < nf; i++) {
        const fac *x = &S->f[ids[i]];
        int64_t s = 1;
        for (int j = x->nv - 1; j >= 0; j--) {
            int32_t w = x->vars[j];
            if (w == v) {
                sv[i] = s;
            } else {
                int k;
                for (k = 0; k < n && vars[k] != w; k++) {}
                st[(size_t)i * (size_t)n + (size_t)k] = s;
            }
            s *= S->nd[w];
        }
    }
    for (int64_t e = 0; e < size; e++) {
        double best = INFINITY;
        for (int xi = 0; xi < S->nd[v]; xi++) {
            double c = un[xi];
            for (int i = 0; i < nf; i++) c += S->f[ids[i]].tab[base[i] + xi * sv[i]];
            if (c < best) best = c;
        }
        tab[e] = best;
        for (int j = n - 1; j >= 0; j--) {
            if (++digit[j] < S->nd[vars[j]]) {
                for (int i = 0; i < nf; i++) base[i] += st[(size_t)i * (size_t)n + (size_t)j];
                break;
            }
            digit[j] = 0;
            for (int i = 0; i < nf; i++)
                base[i] -= (int64_t)(S->nd[vars[j]] - 1) * st[(size_t)i * (size_t)n + (size_t)j];
        }
    }
    free(st);
    free(sv);
    free(base);
    free(digit);
    for (int i = 0; i < nf; i++) S->f[ids[i]].alive = 0;
    S->bucket[v] = ids;
    S->nbucket[v] = nf;
    S->order[S->norder++] = v;
    if (n == 0) {
        S->constant += tab[0];
        free(tab);
        free(vars);
        return 1;
    }
    if (!add_fac(S, vars, n, size, tab)) return 0;
    return 1;
oom:
    free(ids);
    free(vars);
    free(tab);
    free(st);
    free(sv);
    free(base);
    free(digit);
    return 0;
}

/* v's value in factor x under the assignment pick (domain positions), with v at xi. */
static double fac_at(const solver *S, const fac *x, const int32_t *pick, int32_t v, int xi) {
    int64_t idx = 0;
    for (int j = 0; j < x->nv; j++) {
        int32_t w = x->vars[j];
        idx = idx * S->nd[w] + (w == v ? xi : pick[w]);
    }
    return x->tab[idx];
}

static void solver_free(solver *S) {
    for (int64_t i = 0; i < S->nf; i++) {
        free(S->f[i].vars);
        free(S->f[i].tab);
    }
    free(S->f);
    for (int64_t v = 0; v < S->capvars; v++) {
        if (S->vf) free(S->vf[v]);
        if (S->bucket) free(S->bucket[v]);
        if (S->dom) free(S->dom[v]);
        if (S->unary) free(S->unary[v]);
    }
    free(S->vf);
    free(S->nvf);
    free(S->capvf);
    free(S->bucket);
    free(S->nbucket);
    free(S->dom);
    free(S->unary);
    free(S->nd);
    free(S->order);
    free(S->mark);
}

ldt_status ldt__search_exact(ldt_plan *p, const int32_t *fixed, int64_t limit, int32_t *choice,
                             double *bound, int *solved) {
    solver S;
    int64_t n = p->nnodes;
    int32_t *nb = NULL, *pick = NULL;
    hent *h = NULL;
    int64_t hn = 0, hcap = 0;
    double lb = 0;
    ldt_status st = LDT_OK;
    int r = 1;
    memset(&S, 0, sizeof S);
    S.p = p;
    S.n = n;
    S.limit = limit;
    *solved = 0;
    *bound = 0;
    S.nvars = n;
    if (!grow_vars(&S, n + 1)) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    nb = malloc(NB_CAP * sizeof *nb);
    if (!nb)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    /* domains and unary costs */
    for (int64_t v = 0; v < n; v++) {
        const ldt__sset *ss = p->node_ss[v];
        const ldt_tensor *t = p->ctx->nodes[v];
        int m = fixed && fixed[v] >= 0 ? 1 : ss->n;
        double mn = INFINITY;
        /* a leaf nobody reads, or a node with one strategy, is a constant */
        if (is_leaf(t) && p->use_off[v] == p->use_off[v + 1]) m = 1;
        S.nd[v] = m;
        S.dom[v] = malloc((size_t)m * sizeof *S.dom[v]);
        S.unary[v] = malloc((size_t)m * sizeof *S.unary[v]);
        if (!S.dom[v] || !S.unary[v]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        for (int i = 0; i < m; i++) {
            int s = fixed && fixed[v] >= 0 ? fixed[v] : i;
            S.dom[v][i] = s;
            S.unary[v][i] = !is_leaf(t) && ss->own ? ss->own[s] : 0;
            if (S.unary[v][i] < mn) mn = S.unary[v][i];
        }
        lb += mn;
        if (m == 1) S.constant += S.unary[v][0];
    }
    /* producer factors */
    for (int64_t u = 0; u < n && r == 1; u++) {
        r = producer_factor(&S, (int32_t)u, &lb);
        if (r == 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    }
    *bound = lb;
    if (r < 0) goto done; /* over the limit: the caller uses the heuristic */
    /* eliminate every variable with a domain of 2 or more: first dry (scopes only, the order
     * and the work), then, within the limit, the same order with the tables */
    {
        int64_t nf0 = S.nf, work0 = S.work, *nvf0 = malloc((size_t)S.nvars * sizeof *nvf0);
        if (!nvf0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        memcpy(nvf0, S.nvf, (size_t)S.nvars * sizeof *nvf0);
        S.dry = 1;
        for (int64_t v = 0; v < S.nvars && r == 1; v++)
            if (S.nd[v] > 1 && !hpush(&h, &hn, &hcap, (hent){elim_key(&S, (int32_t)v, nb), (int32_t)v}))
                r = 0;
        while (hn > 0 && r == 1) {
            hent x = hpop(h, &hn);
            int64_t key;
            int nn;
            if (S.bucket[x.v]) continue; /* eliminated already */
            key = elim_key(&S, x.v, nb);
            if (key != x.key) {
                if (!hpush(&h, &hn, &hcap, (hent){key, x.v})) r = 0;
                continue;
            }
            nn = neighbours(&S, x.v, nb, NB_CAP);
            {
                int32_t *copy = NULL;
                if (nn > 0 && !(copy = malloc((size_t)nn * sizeof *copy))) {
                    r = 0;
                    break;
                }
                if (nn > 0) memcpy(copy, nb, (size_t)nn * sizeof *copy);
                r = eliminate(&S, x.v, nb);
                for (int i = 0; i < nn && r == 1; i++)
                    if (!hpush(&h, &hn, &hcap, (hent){elim_key(&S, copy[i], nb), copy[i]})) r = 0;
                free(copy);
            }
        }
        /* back to the factors before the dry run */
        for (int64_t i = nf0; i < S.nf; i++) free(S.f[i].vars);
        S.nf = nf0;
        for (int64_t i = 0; i < nf0; i++) S.f[i].alive = 1;
        memcpy(S.nvf, nvf0, (size_t)S.nvars * sizeof *nvf0);
        free(nvf0);
        for (int64_t v = 0; v < S.nvars; v++) {
            free(S.bucket[v]);
            S.bucket[v] = NULL;
            S.nbucket[v] = 0;
        }
        S.work = work0;
        S.dry = 0;
        if (r == 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
        if (r < 0) goto done; /* over the limit, found before any table was made */
        {
            int64_t n_el = S.norder;
            int32_t *ord = malloc((size_t)(n_el ? n_el : 1) * sizeof *ord);
            if (!ord) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            memcpy(ord, S.order, (size_t)n_el * sizeof *ord);
            S.norder = 0;
            for (int64_t i = 0; i < n_el && r == 1; i++) r = eliminate(&S, ord[i], nb);
            free(ord);
            if (r == 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
            if (r < 0) goto done;
        }
    }
    /* decode in reverse elimination order */
    if (!(pick = calloc((size_t)S.nvars, sizeof *pick)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    for (int64_t i = S.norder - 1; i >= 0; i--) {
        int32_t v = S.order[i];
        int best = 0;
        double bc = INFINITY;
        for (int xi = 0; xi < S.nd[v]; xi++) {
            double c = S.unary[v][xi];
            for (int64_t j = 0; j < S.nbucket[v]; j++) c += fac_at(&S, &S.f[S.bucket[v][j]], pick, v, xi);
            if (c < bc) {
                bc = c;
                best = xi;
            }
        }
        pick[v] = best;
    }
    for (int64_t v = 0; v < n; v++) choice[v] = S.dom[v][pick[v]];
    *bound = S.constant;
    *solved = 1;
done:
fail:
    free(h);
    free(nb);
    free(pick);
    solver_free(&S);
    return st;
}
