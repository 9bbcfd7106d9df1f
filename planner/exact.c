/* The exact strategy choice (docs/planner.md, "The exact search"): min-sum variable
 * elimination (bucket elimination) over the plan's cost function.
 *
 * Variables: one per node, its strategy (the node's domain: every strategy, or the one a
 * bypass or a fixed plan gives it; a node with one strategy is a constant and joins no
 * table). Factors: each node's own seconds (unary; a leaf's is its memory term under
 * ldt_plan_options.memory_weight, the weight times its resident shard's bytes, so a budget's
 * penalized objective is searched exactly too), and per producer u one factor
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
 * factor's least entry. No step depends on addresses, hash order or time.
 *
 * Before each elimination its bucket's factors whose scope lies within another's are added
 * into it (fold_bucket), so the inner sum reads few tables.
 *
 * Tying (the default; ldt_plan_options.no_tying turns it off): repeated layers make equal
 * tables, and eliminating a variable over equal tables in the same places makes an equal
 * table. Each producer table is keyed by what it is computed from (producer_key), each
 * elimination by its bucket's table classes, their variables' places in the new scope, the
 * domain sizes and the eliminated unary (memo_key); a key seen before reuses the table made
 * then (shared, never written: folding copies it first) and counts no work. The work limit
 * thus counts each distinct table once, and a stack of L equal layers costs about one layer
 * plus what joins them. Equal keys are compared in full, never by hash alone, so the result is
 * exactly the untied optimum: tying is a reduction of the work, not a constraint on the
 * strategies (ldt_plan_tied says whether any table was reused). The dry run (scopes only)
 * keys its eliminations the same way, its new factors taking the class the key gives, so it
 * reuses and counts exactly as the real run will: a graph past the limit is still known
 * before any elimination table is made. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/error.h"
#include "planner/exact.h"
#include "planner/plan_internal.h"

#define STRICT_PENALTY 1e9

/* Passes of the relaxation (ldt__search_exact) at most; together within the work limit. Its
 * weights move by Polyak steps (relax_polyak) of theta POLYAK_THETA, halved after POLYAK_STALL
 * passes that did not raise the bound. */
#define RELAX_PASSES 12
#define POLYAK_THETA 2.0
#define POLYAK_STALL 3
/* After each pass, a relaxed value the pass's optimum misprices (its uses' shares of the moves
 * it asks do not sum to the moves) gets its exact table again (unrelax), where that table is
 * at most UNRELAX_CAP entries (its domain times its consumers'). */
#define UNRELAX_CAP 50000

typedef struct fac {
    int nv;
    int32_t *vars; /* ascending node ids, each with a domain of 2 or more */
    int64_t size;
    double *tab; /* row-major: the last var varies fastest */
    int alive;
    int owns;    /* tab is this factor's to free */
    int shared;  /* tab is a repeated elimination's result (others read it): never written */
    int64_t tid; /* the table's class: equal classes, equal tables (tying) */
} fac;

/* A repeated elimination (tying): the key (the eliminated domain and unary, the new scope's
 * domains, the bucket's table classes and their variables' places) and what it made. */
typedef struct ment {
    uint64_t h;
    int64_t off, len; /* the key in mkeys */
    int64_t tid;      /* the class of the table it made */
    double *tab;      /* the table (NULL in the dry run) */
    double value;     /* the constant it made, for an empty new scope (a producer: its least) */
} ment;

typedef struct memo {
    ment *me;
    int64_t nme, capme;
    int64_t *mkeys, nmk, capmk;
    int64_t *mht, mhtcap; /* entry index + 1, 0 empty */
} memo;

/* The relaxation (relax_factors): per value whose moves the exact search splits by target, its
 * distinct targets and a weight per (use, target); the weights of a target sum to 1. */
typedef struct relax {
    unsigned char *on; /* per node: its moves are relaxed (the exact pass split them by target) */
    int **tl;          /* per relaxed value: its distinct targets */
    int *ntl;
    double **lam; /* per relaxed value: [use - use_off[u]][target] */
    unsigned char **may; /* per relaxed value: [use][target] 1 where the use may ask it */
    int active;   /* 1: producer_factor builds the relaxed factors */
} relax;

typedef struct solver {
    ldt_plan *p;
    relax *R;
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
    int64_t held, hold; /* entries of the elimination tables made, and their bound */
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
    /* tying: repeated eliminations made once */
    int tying;
    int64_t ntid, ntid_base;
    memo em; /* eliminations */
    memo pm; /* producer tables */
    int64_t hits;
    double **pool; /* tables replaced by folding, freed at the end */
    int64_t npool, cappool;
    int64_t *key, capkey, *kord, capkord;
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
    x->owns = 1;
    x->shared = 0;
    x->tid = -1;
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

static int room_i64(int64_t **a, int64_t *cap, int64_t need);
static int64_t memo_find(const solver *S, const memo *M, int64_t len, uint64_t h);
static int64_t memo_add(solver *S, memo *M, int64_t len, uint64_t h, double *tab, double value);

/* The key of producer u's table (what it is computed from): u's class, the strict flag, the
 * scope's domain sizes, the list u gives per domain entry, and per use (in order) its place
 * in the scope and the list it asks per domain entry. Its length in S->key, or -1. */
static int64_t producer_key(solver *S, int32_t u, const int32_t *vars, int nv, int upos,
                            const int32_t *svar, const int32_t *spos) {
    ldt_plan *p = S->p;
    int64_t a = p->use_off[u], b = p->use_off[u + 1], len = 0, need = 6 + nv + S->nd[u] + 1;
    for (int64_t j = a; j < b; j++) need += 1 + (spos[j - a] >= 0 ? S->nd[vars[spos[j - a]]] : 1);
    if (!room_i64(&S->key, &S->capkey, need)) return -1;
    S->key[len++] = p->node_class[u];
    S->key[len++] = p->opts.strict;
    S->key[len++] = nv;
    for (int i = 0; i < nv; i++) S->key[len++] = S->nd[vars[i]];
    S->key[len++] = upos;
    for (int i = 0; i < (upos >= 0 ? S->nd[u] : 1); i++)
        S->key[len++] = LDT__SSET_PL(p->node_ss[u], S->dom[u][i])[0];
    S->key[len++] = b - a;
    for (int64_t j = a; j < b; j++) {
        int32_t x = svar[j - a];
        int m = spos[j - a] >= 0 ? S->nd[vars[spos[j - a]]] : 1;
        S->key[len++] = spos[j - a];
        for (int di = 0; di < m; di++) S->key[len++] = x >= S->n ? S->dom[x][di] : slot_req(S, j, di);
    }
    return len;
}

/* The producer factor of node u: the moves of its value. With one consumer node, over u and
 * it; with several, over u and one request variable per use (what that use asks), so the
 * table grows with the distinct lists asked, not with the consumers' strategies. Variables
 * with a domain of 1 are constants and join no table (a scope of none adds to the constant).
 * 1 done, 0 out of memory, -1 over the limit. */
static int relax_factors(solver *S, int32_t u, double *lb);

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
    if (S->R && S->R->active && S->R->on[u]) return relax_factors(S, u, lb);
    for (int64_t j = a; j < b; j++) {
        int32_t w = p->use_node[j];
        if (S->nd[w] < 2) continue;
        if (first < 0) first = w;
        if (w != first) ncons = 2;
        else if (!ncons) ncons = 1;
    }
    req_mode = ncons > 1;
    if (req_mode && S->R && !S->R->active) S->R->on[u] = 1; /* the relaxation splits these */
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
    if (size > S->limit || S->work + size > S->limit) goto over;
    S->work += size;
    for (int i = 0; i < nv; i++) digit[i] = 0;
    {
        int upos = -1;
        int64_t klen = 0, hit = -1;
        uint64_t kh = 0;
        int32_t *spos = malloc((size_t)nslot * sizeof *spos);
        if (!spos) goto oom;
        for (int i = 0; i < nv; i++)
            if (vars[i] == u) upos = i;
        for (int64_t j = a; j < b; j++) {
            spos[j - a] = -1;
            for (int i = 0; i < nv; i++)
                if (vars[i] == svar[j - a]) spos[j - a] = i;
        }
        /* with tying, a table made before from the same inputs is shared */
        if (S->tying && nv > 0) {
            klen = producer_key(S, u, vars, nv, upos, svar, spos);
            if (klen < 0) {
                free(spos);
                goto oom;
            }
            kh = XXH64(S->key, (size_t)klen * sizeof *S->key, 1);
            hit = memo_find(S, &S->pm, klen, kh);
        }
        if (hit >= 0) {
            free(spos);
            free(svar);
            free(tg);
            *lb += S->pm.me[hit].value;
            if (!add_fac(S, vars, nv, size, S->pm.me[hit].tab)) return 0;
            S->f[S->nf - 1].owns = 0;
            S->f[S->nf - 1].shared = 1;
            return 1;
        }
        if (!(tab = malloc((size_t)size * sizeof *tab))) {
            free(spos);
            goto oom;
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
        if (klen > 0 && memo_add(S, &S->pm, klen, kh, tab, mn) < 0) {
            free(tab);
            goto oom;
        }
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
    if (S->tying) S->f[S->nf - 1].shared = 1; /* the producer memo hands it out */
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

/* The relaxed moves of value u (Lagrangian, issue 24's dp=8,tp=8 training graphs): the move to
 * each distinct target t is paid once however many uses ask it, which ties u and all its
 * consumers in one table. Here use j pays lam[j][t] of it instead, the weights of t summing to
 * 1: sum_t price(t) * [some use asks t] >= sum_t price(t) * sum_{j asks t} lam[j][t] for every
 * assignment, so the minimum of the relaxed sum is a lower bound of the optimum, and the
 * relaxed sum splits into one table per (u, consumer). Equal where every asked target's
 * weights lie on the uses that ask it. 1 done, 0 out of memory, -1 over the limit. */
static int relax_factors(solver *S, int32_t u, double *lb) {
    ldt_plan *p = S->p;
    relax *R = S->R;
    int64_t a = p->use_off[u], b = p->use_off[u + 1];
    int nt = R->ntl[u], mu = S->nd[u], r = 1;
    /* the move from each of u's strategies to each target, priced once (0 where it gives it) */
    double *mvc = malloc((size_t)mu * (size_t)(nt ? nt : 1) * sizeof *mvc);
    int64_t *jj = malloc((size_t)(b - a) * sizeof *jj);
    int *kk = malloc((size_t)(b - a) * sizeof *kk);
    if (!mvc || !jj || !kk) {
        r = 0;
        goto out;
    }
    for (int su = 0; su < mu; su++) {
        int from = LDT__SSET_PL(p->node_ss[u], S->dom[u][su])[0];
        for (int k = 0; k < nt; k++) {
            double mv = 0;
            if (R->tl[u][k] != from) {
                ldt__redist_memo *m = ldt__plan_redist(p, p->node_class[u], from, R->tl[u][k], 0);
                mv = m ? m->seconds : INFINITY;
                if (p->opts.strict) mv += STRICT_PENALTY;
            }
            mvc[(int64_t)su * nt + k] = mv;
        }
    }
    for (int64_t j0 = a; j0 < b && r == 1; j0++) {
        int32_t w = p->use_node[j0];
        int dup = 0, mw = S->nd[w];
        double *tab, mn = INFINITY;
        for (int64_t i = a; i < j0 && !dup; i++) dup = p->use_node[i] == w;
        if (dup) continue; /* one table per consumer, for all its uses of u */
        if (!(tab = malloc((size_t)mu * (size_t)mw * sizeof *tab))) {
            r = 0;
            break;
        }
        for (int sw = 0; sw < mw; sw++) {
            int nk = 0;
            /* w's uses of u under sw: the target each asks (a target not listed — none are:
             * the lists come from the same domains — pays nothing) */
            for (int64_t j = j0; j < b; j++) {
                int to, k;
                if (p->use_node[j] != w) continue;
                to = slot_req(S, j, sw);
                for (k = 0; k < nt && R->tl[u][k] != to; k++) {}
                if (k == nt) continue;
                jj[nk] = j;
                kk[nk++] = k;
            }
            for (int su = 0; su < mu; su++) {
                double c = 0;
                for (int q = 0; q < nk; q++) {
                    double l = R->lam[u][(jj[q] - a) * nt + kk[q]];
                    if (l > 0) c += l * mvc[(int64_t)su * nt + kk[q]]; /* 0 x inf would be NaN */
                }
                tab[(int64_t)su * mw + sw] = c;
                if (c < mn) mn = c;
            }
        }
        *lb += mn;
        if (mu > 1 && mw > 1) {
            if (w < u) { /* rows by the lower id */
                double *t2 = malloc((size_t)mu * (size_t)mw * sizeof *t2);
                if (!t2) {
                    free(tab);
                    r = 0;
                    break;
                }
                for (int su = 0; su < mu; su++)
                    for (int sw = 0; sw < mw; sw++) t2[(int64_t)sw * mu + su] = tab[(int64_t)su * mw + sw];
                free(tab);
                tab = t2;
            }
            r = pair_factor(S, u < w ? u : w, u < w ? w : u, tab);
        } else {
            for (int su = 0; su < mu; su++)
                for (int sw = 0; sw < mw; sw++) {
                    double c = tab[(int64_t)su * mw + sw];
                    if (mu > 1) S->unary[u][su] += c;
                    else if (mw > 1) S->unary[w][sw] += c;
                    else S->constant += c;
                }
            free(tab);
        }
    }
out:
    free(mvc);
    free(jj);
    free(kk);
    return r;
}

/* The neighbours of v among live factors (ascending unless unsorted, v left out) into out;
 * their count (-1: more than cap). The dead factors are dropped from v's list as it is read
 * (the order of the rest kept; the dry run restores the lists after). */
static int neighbours_(solver *S, int32_t v, int32_t *out, int cap, int unsorted) {
    int n = 0;
    int64_t keep = 0;
    S->stamp++;
    S->mark[v] = S->stamp;
    for (int64_t i = 0; i < S->nvf[v]; i++) {
        const fac *x = &S->f[S->vf[v][i]];
        if (!x->alive) continue;
        S->vf[v][keep++] = S->vf[v][i];
        for (int j = 0; j < x->nv; j++) {
            int32_t w = x->vars[j];
            if (S->mark[w] == S->stamp) continue;
            S->mark[w] = S->stamp;
            if (n >= cap) return -1;
            out[n++] = w;
        }
    }
    S->nvf[v] = keep;
    if (unsorted) return n;
    if (n > 16) {
        qsort(out, (size_t)n, sizeof *out, cmp_i32);
    } else {
        for (int i = 1; i < n; i++) {
            int32_t x = out[i];
            int j = i - 1;
            while (j >= 0 && out[j] > x) {
                out[j + 1] = out[j];
                j--;
            }
            out[j + 1] = x;
        }
    }
    return n;
}

static int neighbours(solver *S, int32_t v, int32_t *out, int cap) { return neighbours_(S, v, out, cap, 0); }

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
    int n = neighbours_(S, v, nb, NB_CAP, 1); /* a product: in any order */
    if (n < 0) return INT64_MAX;
    return dom_product(S, nb, n, INT64_MAX / 2);
}



/* Makes b's table its own before it is written (a shared one is copied; the old one, if b
 * owned it, is kept to the end: a repeated elimination may still hand it out). */
static int own_table(solver *S, fac *b) {
    double *c;
    if (!b->shared) return 1;
    if (!(c = malloc((size_t)b->size * sizeof *c))) return 0;
    memcpy(c, b->tab, (size_t)b->size * sizeof *c);
    if (b->owns) {
        if (S->npool == S->cappool) {
            int64_t cap = S->cappool ? 2 * S->cappool : 64;
            double **np = realloc(S->pool, (size_t)cap * sizeof *np);
            if (!np) {
                free(c);
                return 0;
            }
            S->pool = np;
            S->cappool = cap;
        }
        S->pool[S->npool++] = b->tab;
    }
    b->tab = c;
    b->owns = 1;
    b->shared = 0;
    return 1;
}

/* The place of w in the new scope nb (n variables, ascending); n for the eliminated v. */
static int64_t scope_pos(const int32_t *nb, int n, int32_t v, int32_t w) {
    int lo = 0, hi = n - 1;
    if (w == v) return n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (nb[mid] < w) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int room_i64(int64_t **a, int64_t *cap, int64_t need) {
    int64_t c = *cap;
    int64_t *n;
    if (need <= c) return 1;
    while (c < need) c = c ? 2 * c : 256;
    if (!(n = realloc(*a, (size_t)c * sizeof *n))) return 0;
    *a = n;
    *cap = c;
    return 1;
}

/* 1 when bucket factor block a sorts before block b (tid, then the places). */
static int block_less(const int64_t *k, int64_t a, int64_t b) {
    int64_t la = 2 + k[a + 1], lb = 2 + k[b + 1];
    for (int64_t i = 0; i < la && i < lb; i++)
        if (k[a + i] != k[b + i]) return k[a + i] < k[b + i];
    return la < lb;
}

/* The key of eliminating v (its bucket ids, new scope nb) into S->key: v's domain size and
 * unary, the new scope's domain sizes, and per bucket factor (sorted) its table class and the
 * places of its variables. Two eliminations with equal keys make equal tables. Its length, or
 * -1 (out of memory). */
static int64_t memo_key(solver *S, int32_t v, const int32_t *nb, int n, const int64_t *ids, int nf) {
    int64_t hdr = 3 + n + S->nd[v], blocks = 0, len;
    for (int i = 0; i < nf; i++) blocks += 2 + S->f[ids[i]].nv;
    if (!room_i64(&S->key, &S->capkey, hdr + 2 * blocks) || !room_i64(&S->kord, &S->capkord, nf + 1))
        return -1;
    S->key[0] = S->nd[v];
    S->key[1] = n;
    for (int i = 0; i < n; i++) S->key[2 + i] = S->nd[nb[i]];
    for (int i = 0; i < S->nd[v]; i++) memcpy(&S->key[2 + n + i], &S->unary[v][i], sizeof(double));
    S->key[hdr - 1] = nf;
    /* the blocks in a scratch area after the key, then sorted into place */
    {
        int64_t o = hdr + blocks;
        for (int i = 0; i < nf; i++) {
            const fac *x = &S->f[ids[i]];
            S->kord[i] = o;
            S->key[o++] = x->tid;
            S->key[o++] = x->nv;
            for (int j = 0; j < x->nv; j++) S->key[o++] = scope_pos(nb, n, v, x->vars[j]);
        }
    }
    for (int i = 1; i < nf; i++) {
        int64_t x = S->kord[i];
        int j = i - 1;
        while (j >= 0 && block_less(S->key, x, S->kord[j])) {
            S->kord[j + 1] = S->kord[j];
            j--;
        }
        S->kord[j + 1] = x;
    }
    len = hdr;
    for (int i = 0; i < nf; i++) {
        int64_t b = S->kord[i], l = 2 + S->key[b + 1];
        memmove(&S->key[len], &S->key[b], (size_t)l * sizeof *S->key);
        len += l;
    }
    return len;
}

/* The entry of M with the key in S->key[0..len), or -1. */
static int64_t memo_find(const solver *S, const memo *M, int64_t len, uint64_t h) {
    if (!M->mhtcap) return -1;
    for (int64_t i = (int64_t)(h & (uint64_t)(M->mhtcap - 1));; i = (i + 1) & (M->mhtcap - 1)) {
        int64_t e = M->mht[i] - 1;
        if (e < 0) return -1;
        if (M->me[e].h == h && M->me[e].len == len &&
            !memcmp(&M->mkeys[M->me[e].off], S->key, (size_t)len * sizeof *S->key))
            return e;
    }
}

/* Records in M the key in S->key[0..len) with what it made (class: the next one); the entry's
 * index, or -1. */
static int64_t memo_add(solver *S, memo *M, int64_t len, uint64_t h, double *tab, double value) {
    ment *x;
    if (2 * (M->nme + 1) > M->mhtcap) {
        int64_t cap = M->mhtcap ? 2 * M->mhtcap : 1024;
        int64_t *ht = calloc((size_t)cap, sizeof *ht);
        if (!ht) return -1;
        for (int64_t e = 0; e < M->nme; e++) {
            int64_t i = (int64_t)(M->me[e].h & (uint64_t)(cap - 1));
            while (ht[i]) i = (i + 1) & (cap - 1);
            ht[i] = e + 1;
        }
        free(M->mht);
        M->mht = ht;
        M->mhtcap = cap;
    }
    if (M->nme == M->capme) {
        int64_t cap = M->capme ? 2 * M->capme : 256;
        ment *n = realloc(M->me, (size_t)cap * sizeof *n);
        if (!n) return -1;
        M->me = n;
        M->capme = cap;
    }
    if (!room_i64(&M->mkeys, &M->capmk, M->nmk + len)) return -1;
    memcpy(&M->mkeys[M->nmk], S->key, (size_t)len * sizeof *S->key);
    x = &M->me[M->nme];
    x->h = h;
    x->off = M->nmk;
    x->len = len;
    x->tid = S->ntid++;
    x->tab = tab;
    x->value = value;
    M->nmk += len;
    {
        int64_t i = (int64_t)(h & (uint64_t)(M->mhtcap - 1));
        while (M->mht[i]) i = (i + 1) & (M->mhtcap - 1);
        M->mht[i] = M->nme + 1;
    }
    return M->nme++;
}

/* Forgets every repeated elimination (after the dry run: the real one makes them again). */
static void memo_reset(solver *S) {
    S->em.nme = 0;
    S->em.nmk = 0;
    S->hits = 0;
    S->ntid = S->ntid_base;
    if (S->em.mht) memset(S->em.mht, 0, (size_t)S->em.mhtcap * sizeof *S->em.mht);
}

/* The class of every factor made so far (the problem's own tables): equal tables of equal
 * size share one. -1 when out of memory. */
static int intern_tables(solver *S) {
    int64_t cap = 1024, *ht;
    S->ntid = 0;
    while (cap < 2 * S->nf) cap *= 2;
    if (!(ht = calloc((size_t)cap, sizeof *ht))) return -1;
    for (int64_t f = 0; f < S->nf; f++) {
        fac *x = &S->f[f];
        uint64_t h = XXH64(x->tab, (size_t)x->size * sizeof *x->tab, (uint64_t)x->size);
        int64_t i = (int64_t)(h & (uint64_t)(cap - 1));
        for (;; i = (i + 1) & (cap - 1)) {
            int64_t g = ht[i] - 1;
            if (g < 0) {
                ht[i] = f + 1;
                x->tid = S->ntid++;
                break;
            }
            if (S->f[g].size == x->size &&
                !memcmp(S->f[g].tab, x->tab, (size_t)x->size * sizeof *x->tab)) {
                x->tid = S->f[g].tid;
                break;
            }
        }
    }
    free(ht);
    /* the work: each distinct table once */
    S->work = 0;
    {
        int64_t next = 0;
        for (int64_t f = 0; f < S->nf; f++)
            if (S->f[f].tid == next) {
                S->work += S->f[f].size;
                next++;
            }
    }
    S->ntid_base = S->ntid;
    return 0;
}

/* 1 when the scope of a (ascending) is a subset of b's. */
static int scope_within(const fac *a, const fac *b) {
    int j = 0;
    if (a->nv > b->nv) return 0;
    for (int i = 0; i < a->nv; i++) {
        while (j < b->nv && b->vars[j] < a->vars[i]) j++;
        if (j == b->nv || b->vars[j] != a->vars[i]) return 0;
        j++;
    }
    return 1;
}

/* Adds factor a's table into b's (a's scope within b's): b then stands for both. */
static void fold_into(const solver *S, const fac *a, fac *b) {
    int64_t st[64], idx = 0, s = 1;
    int32_t digit[64];
    int k = a->nv - 1;
    for (int j = b->nv - 1; j >= 0; j--) {
        st[j] = 0;
        digit[j] = 0;
        if (k >= 0 && a->vars[k] == b->vars[j]) {
            st[j] = s;
            s *= S->nd[a->vars[k]];
            k--;
        }
    }
    for (int64_t e = 0; e < b->size; e++) {
        b->tab[e] += a->tab[idx];
        for (int j = b->nv - 1; j >= 0; j--) {
            if (++digit[j] < S->nd[b->vars[j]]) {
                idx += st[j];
                break;
            }
            digit[j] = 0;
            idx -= (int64_t)(S->nd[b->vars[j]] - 1) * st[j];
        }
    }
}

/* Folds each bucket factor whose scope lies within a larger (or later equal) one's into the
 * smallest such, so the elimination sums fewer tables per entry (the same function: the
 * bucket keeps the folded-into factor, and the decode reads it). ids: the bucket, rewritten in
 * place; its new count (-1: out of memory). Fixed order: by size, then factor id. */
static int fold_bucket(solver *S, int64_t *ids, int nf) {
    int out = 0;
    if (nf < 3) return nf;
    for (int i = 1; i < nf; i++) { /* insertion sort by (size, id): buckets are short */
        int64_t x = ids[i];
        int j = i - 1;
        while (j >= 0 && (S->f[ids[j]].size > S->f[x].size ||
                          (S->f[ids[j]].size == S->f[x].size && ids[j] > x))) {
            ids[j + 1] = ids[j];
            j--;
        }
        ids[j + 1] = x;
    }
    for (int i = 0; i < nf; i++) {
        int j;
        for (j = i + 1; j < nf; j++)
            if (S->f[ids[j]].nv <= 64 && scope_within(&S->f[ids[i]], &S->f[ids[j]])) break;
        if (j < nf) {
            if (!own_table(S, &S->f[ids[j]])) return -1;
            fold_into(S, &S->f[ids[i]], &S->f[ids[j]]);
            S->f[ids[i]].alive = 0;
        } else {
            ids[out++] = ids[i];
        }
    }
    return out;
}

/* Eliminates v, its neighbours nb[0..n) (n -1: too many): 1 done, 0 out of memory, -1 over
 * the limit. With tying, an elimination whose
 * key (memo_key) was seen before makes no table: its new factor reads the one made then, and
 * no work is counted; the dry run does the same with the keys alone, so it counts exactly the
 * work the real run will do. */
static int eliminate(solver *S, int32_t v, int32_t *nb, int n) {
    int nf = 0;
    int64_t size, *ids, klen = 0, hit = -1, ent;
    uint64_t kh = 0;
    int32_t *vars = NULL;
    double *tab = NULL;
    int64_t *st = NULL, *sv = NULL, *base = NULL;
    int32_t *digit = NULL;
    const double *un = S->unary[v];
    if (n < 0) return -1;
    size = dom_product(S, nb, n, S->limit);
    ids = malloc((size_t)(S->nvf[v] ? S->nvf[v] : 1) * sizeof *ids);
    if (!ids) return 0;
    for (int64_t i = 0; i < S->nvf[v]; i++)
        if (S->f[S->vf[v][i]].alive) ids[nf++] = S->vf[v][i];
    if (S->tying && size <= S->limit) {
        if ((klen = memo_key(S, v, nb, n, ids, nf)) < 0) goto oom;
        kh = XXH64(S->key, (size_t)klen * sizeof *S->key, 0);
        hit = memo_find(S, &S->em, klen, kh);
    }
    if (hit < 0 && (size > S->limit / S->nd[v] || S->work + size * S->nd[v] > S->limit ||
                    (n > 0 && S->held + size > S->hold))) {
        free(ids);
        return -1;
    }
    if (n > 0 && !(vars = malloc((size_t)n * sizeof *vars))) goto oom;
    if (n > 0) memcpy(vars, nb, (size_t)n * sizeof *vars);
    if (hit >= 0) { /* made before: read that table */
        for (int i = 0; i < nf; i++) S->f[ids[i]].alive = 0;
        S->bucket[v] = ids;
        S->nbucket[v] = nf;
        S->order[S->norder++] = v;
        S->hits++;
        if (n == 0) {
            if (!S->dry) S->constant += S->em.me[hit].value;
            return 1;
        }
        if (!add_fac(S, vars, n, size, S->em.me[hit].tab)) return 0;
        S->f[S->nf - 1].owns = 0;
        S->f[S->nf - 1].shared = 1;
        S->f[S->nf - 1].tid = S->em.me[hit].tid;
        return 1;
    }
    S->work += size * S->nd[v];
    if (n > 0) S->held += size;
    if (S->dry) {
        for (int i = 0; i < nf; i++) S->f[ids[i]].alive = 0;
        S->bucket[v] = ids;
        S->nbucket[v] = nf;
        S->order[S->norder++] = v;
        ent = S->tying ? memo_add(S, &S->em, klen, kh, NULL, 0) : 0;
        if (ent < 0) return 0;
        if (n == 0) return 1;
        if (!add_fac(S, vars, n, size, NULL)) return 0;
        if (S->tying) S->f[S->nf - 1].tid = S->em.me[ent].tid;
        return 1;
    }
    tab = malloc((size_t)size * sizeof *tab);
    st = calloc((size_t)(nf ? nf : 1) * (size_t)(n ? n : 1), sizeof *st);
    sv = calloc((size_t)(nf ? nf : 1), sizeof *sv);
    base = calloc((size_t)(nf ? nf : 1), sizeof *base);
    digit = calloc((size_t)(n ? n : 1), sizeof *digit);
    if (!tab || !st || !sv || !base || !digit) goto oom;
    if ((nf = fold_bucket(S, ids, nf)) < 0) goto oom;
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
    st = sv = base = NULL;
    digit = NULL;
    ent = 0;
    if (S->tying && (ent = memo_add(S, &S->em, klen, kh, n ? tab : NULL, tab[0])) < 0) goto oom;
    for (int i = 0; i < nf; i++) S->f[ids[i]].alive = 0;
    S->bucket[v] = ids;
    S->nbucket[v] = nf;
    S->order[S->norder++] = v;
    if (n == 0) {
        S->constant += tab[0];
        free(tab);
        return 1;
    }
    if (!add_fac(S, vars, n, size, tab)) return 0;
    if (S->tying) {
        S->f[S->nf - 1].shared = 1; /* the memo hands it out */
        S->f[S->nf - 1].tid = S->em.me[ent].tid;
    }
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
        if (S->f[i].owns) free(S->f[i].tab);
    }
    for (int64_t i = 0; i < S->npool; i++) free(S->pool[i]);
    free(S->pool);
    free(S->em.me);
    free(S->em.mkeys);
    free(S->em.mht);
    free(S->pm.me);
    free(S->pm.mkeys);
    free(S->pm.mht);
    free(S->key);
    free(S->kord);
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

/* One search: exact (R inactive) or relaxed (R active); as ldt__search_exact, and *work the
 * table entries it made (solved only). */
static ldt_status solve(ldt_plan *p, const int32_t *fixed, int64_t limit, int64_t hold, int tying, relax *R,
                        int32_t *choice, double *bound, int *solved, int *tied, int64_t *work) {
    solver S;
    int64_t n = p->nnodes;
    int32_t *nb = NULL, *nb2 = NULL, *pick = NULL;
    hent *h = NULL;
    int64_t hn = 0, hcap = 0;
    double lb = 0;
    ldt_status st = LDT_OK;
    int r = 1;
    memset(&S, 0, sizeof S);
    S.p = p;
    S.R = R;
    S.n = n;
    S.limit = limit;
    S.hold = hold;
    S.tying = tying;
    *solved = 0;
    *tied = 0;
    *bound = 0;
    S.nvars = n;
    if (!grow_vars(&S, n + 1)) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    nb = malloc(NB_CAP * sizeof *nb);
    nb2 = malloc(NB_CAP * sizeof *nb2);
    if (!nb || !nb2)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    /* domains and unary costs */
    for (int64_t v = 0; v < n; v++) {
        const ldt__sset *ss = p->node_ss[v];
        const ldt_tensor *t = p->ctx->nodes[v];
        int m = fixed && fixed[v] >= 0 ? 1 : ss->n, only = fixed && fixed[v] >= 0 ? fixed[v] : -1;
        double mn = INFINITY;
        /* a leaf nobody reads, or a node with one strategy, is a constant: its least memory
         * term (the first such; strategy 0 without a memory weight) */
        if (only < 0 && is_leaf(t) && p->use_off[v] == p->use_off[v + 1]) {
            m = 1;
            only = 0;
            for (int s = 1; ss->own && s < ss->n; s++)
                if (ss->own[s] < ss->own[only]) only = s;
        }
        S.nd[v] = m;
        S.dom[v] = malloc((size_t)m * sizeof *S.dom[v]);
        S.unary[v] = malloc((size_t)m * sizeof *S.unary[v]);
        if (!S.dom[v] || !S.unary[v]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        for (int i = 0; i < m; i++) {
            int s = only >= 0 ? only : i;
            S.dom[v][i] = s;
            /* a node's own seconds; a leaf's memory term (memory_weight x its resident shard's
             * bytes, plan.c's leaf_costs; none without a weight) */
            S.unary[v][i] = ss->own ? ss->own[s] : 0;
            if (S.unary[v][i] < mn) mn = S.unary[v][i];
        }
        lb += mn;
        if (m == 1) S.constant += S.unary[v][0];
    }
    /* producer factors (with tying, all of them: each is at most Y_MODE_SIZE entries, and the
     * work counts each distinct table once, below) */
    if (S.tying && limit > 0) S.limit = INT64_MAX / 4;
    for (int64_t u = 0; u < n && r == 1; u++) {
        r = producer_factor(&S, (int32_t)u, &lb);
        if (r == 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    }
    S.limit = limit;
    *bound = lb;
    if (r < 0) goto done; /* over the limit: the caller uses the heuristic */
    if (S.tying && intern_tables(&S) < 0)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    if (S.work > S.limit) goto done;
    /* eliminate every variable with a domain of 2 or more: first dry (scopes only, the order
     * and the work, reuse by key included), then, within the limit, the same order with the
     * tables */
    {
        int64_t nf0 = S.nf, work0 = S.work, *nvf0 = malloc((size_t)(S.nvars ? S.nvars : 1) * sizeof *nvf0),
                nvf_all = 0;
        int64_t *vf0 = NULL;
        for (int64_t v = 0; v < S.nvars; v++) nvf_all += S.nvf[v];
        if (!nvf0 || !(vf0 = malloc((size_t)(nvf_all ? nvf_all : 1) * sizeof *vf0))) {
            free(nvf0);
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        }
        /* the factor lists as they are (the dry run drops its dead factors from them too) */
        if (S.nvars) memcpy(nvf0, S.nvf, (size_t)S.nvars * sizeof *nvf0);
        nvf_all = 0;
        for (int64_t v = 0; v < S.nvars; v++) { /* (an empty list may have no storage) */
            if (S.nvf[v]) memcpy(vf0 + nvf_all, S.vf[v], (size_t)S.nvf[v] * sizeof *vf0);
            nvf_all += S.nvf[v];
        }
        S.dry = 1;
        for (int64_t v = 0; v < S.nvars && r == 1; v++)
            if (S.nd[v] > 1 && !hpush(&h, &hn, &hcap, (hent){elim_key(&S, (int32_t)v, nb), (int32_t)v}))
                r = 0;
        while (hn > 0 && r == 1) {
            hent x = hpop(h, &hn);
            int64_t key;
            int nn;
            if (S.bucket[x.v]) continue; /* eliminated already */
            nn = neighbours(&S, x.v, nb, NB_CAP);
            key = nn < 0 ? INT64_MAX : dom_product(&S, nb, nn, INT64_MAX / 2);
            if (key != x.key) {
                if (!hpush(&h, &hn, &hcap, (hent){key, x.v})) r = 0;
                continue;
            }
            if (nn > 0) memcpy(nb2, nb, (size_t)nn * sizeof *nb2);
            r = eliminate(&S, x.v, nb, nn);
            for (int i = 0; i < nn && r == 1; i++)
                if (!hpush(&h, &hn, &hcap, (hent){elim_key(&S, nb2[i], nb), nb2[i]})) r = 0;
        }
        /* back to the factors before the dry run */
        for (int64_t i = nf0; i < S.nf; i++) free(S.f[i].vars);
        S.nf = nf0;
        for (int64_t i = 0; i < nf0; i++) S.f[i].alive = 1;
        if (S.nvars) memcpy(S.nvf, nvf0, (size_t)S.nvars * sizeof *nvf0);
        nvf_all = 0;
        for (int64_t v = 0; v < S.nvars; v++) {
            if (S.nvf[v]) memcpy(S.vf[v], vf0 + nvf_all, (size_t)S.nvf[v] * sizeof *vf0);
            nvf_all += S.nvf[v];
        }
        free(nvf0);
        free(vf0);
        for (int64_t v = 0; v < S.nvars; v++) {
            free(S.bucket[v]);
            S.bucket[v] = NULL;
            S.nbucket[v] = 0;
        }
        S.work = work0;
        S.held = 0;
        S.dry = 0;
        memo_reset(&S);
        if (r == 0) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
        if (r < 0) goto done; /* over the limit, found before any table was made */
        {
            int64_t n_el = S.norder;
            int32_t *ord = malloc((size_t)(n_el ? n_el : 1) * sizeof *ord);
            if (!ord) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            if (n_el) memcpy(ord, S.order, (size_t)n_el * sizeof *ord);
            S.norder = 0;
            for (int64_t i = 0; i < n_el && r == 1; i++)
                r = eliminate(&S, ord[i], nb, neighbours(&S, ord[i], nb, NB_CAP));
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
    *tied = S.hits > 0;
    *work = S.work;
done:
fail:
    free(h);
    free(nb);
    free(nb2);
    free(pick);
    solver_free(&S);
    return st;
}

/* The relaxation's weights to start: each target's split evenly over the uses that may ask it
 * (their consumers' strategies in the search's domains). 1 done, 0 out of memory. */
static int relax_init(ldt_plan *p, const int32_t *fixed, relax *R) {
    int64_t n = p->nnodes;
    if (!(R->tl = calloc((size_t)n, sizeof *R->tl)) || !(R->ntl = calloc((size_t)n, sizeof *R->ntl)) ||
        !(R->lam = calloc((size_t)n, sizeof *R->lam)) || !(R->may = calloc((size_t)n, sizeof *R->may)))
        return 0;
    for (int64_t u = 0; u < n; u++) {
        int64_t a = p->use_off[u], b = p->use_off[u + 1];
        int nt = 0, cap = 0;
        if (!R->on[u]) continue;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: the distinct targets; pass 1: each use's share */
            for (int64_t j = a; j < b; j++) {
                int32_t w = p->use_node[j];
                const ldt__sset *ss = p->node_ss[w];
                int lo = fixed && fixed[w] >= 0 ? fixed[w] : 0, hi = fixed && fixed[w] >= 0 ? fixed[w] + 1 : ss->n;
                for (int sw = lo; sw < hi; sw++) {
                    int to = LDT__SSET_PL(ss, sw)[1 + p->use_slot[j]], k;
                    for (k = 0; k < nt && R->tl[u][k] != to; k++) {}
                    if (pass == 1) {
                        R->lam[u][(j - a) * nt + k] = 1; /* may ask: counted below */
                        continue;
                    }
                    if (k < nt) continue;
                    if (nt == cap) {
                        int *t2 = realloc(R->tl[u], (size_t)(cap = cap ? 2 * cap : 16) * sizeof *t2);
                        if (!t2) return 0;
                        R->tl[u] = t2;
                    }
                    R->tl[u][nt++] = to;
                }
            }
            if (pass == 0) {
                R->ntl[u] = nt;
                if (!(R->lam[u] = calloc((size_t)(b - a) * (size_t)(nt ? nt : 1), sizeof *R->lam[u])) ||
                    !(R->may[u] = calloc((size_t)(b - a) * (size_t)(nt ? nt : 1), 1)))
                    return 0;
            }
        }
        for (int k = 0; k < nt; k++) {
            int cnt = 0;
            for (int64_t j = a; j < b; j++) R->may[u][(j - a) * nt + k] = R->lam[u][(j - a) * nt + k] > 0;
            for (int64_t j = a; j < b; j++) cnt += R->lam[u][(j - a) * nt + k] > 0;
            for (int64_t j = a; j < b; j++)
                if (R->lam[u][(j - a) * nt + k] > 0) R->lam[u][(j - a) * nt + k] = 1.0 / cnt;
        }
    }
    return 1;
}

/* The subgradient of the relaxed minimum at the weights, for the relaxed optimum c: use j of
 * value u, target t: the move's price from what u gives under c, where j asks t under c. */
static double relax_grad(ldt_plan *p, const relax *R, const int32_t *c, int64_t u, int k, int64_t j) {
    int from = LDT__SSET_PL(p->node_ss[u], c[u])[0], to = R->tl[u][k];
    ldt__redist_memo *m;
    double mv;
    if (to == from || LDT__SSET_PL(p->node_ss[p->use_node[j]], c[p->use_node[j]])[1 + p->use_slot[j]] != to) return 0;
    m = ldt__plan_redist(p, p->node_class[u], from, to, 0);
    mv = m ? m->seconds : INFINITY;
    if (p->opts.strict) mv += STRICT_PENALTY;
    return mv;
}

/* y[0..m) onto the simplex (x >= 0, sum 1), in place; z: scratch of m. */
static void simplex_project(double *y, double *z, int m) {
    double cum = 0, tau = 0;
    for (int i = 0; i < m; i++) { /* z: y descending */
        int j = i - 1;
        double x = y[i];
        while (j >= 0 && z[j] < x) {
            z[j + 1] = z[j];
            j--;
        }
        z[j + 1] = x;
    }
    for (int i = 0; i < m; i++) {
        cum += z[i];
        if (z[i] - (cum - 1) / (i + 1) > 0) tau = (cum - 1) / (i + 1);
    }
    for (int i = 0; i < m; i++) y[i] = y[i] - tau > 0 ? y[i] - tau : 0;
}

/* A Polyak step of the weights: along the subgradient at the relaxed optimum c, of length
 * theta (ub - lb) / |g|^2 (ub: the best plan's cost, lb: the relaxed minimum at the weights),
 * each target's weights then projected back onto the simplex over the uses that may ask it.
 * 0 when the subgradient is 0 (nothing to move), 1 done, -1 out of memory. */
static int relax_polyak(ldt_plan *p, relax *R, const int32_t *c, double lb, double ub, double theta) {
    double norm2 = 0, step;
    double *y = NULL, *z = NULL;
    int64_t *js = NULL, cap = 0;
    for (int64_t u = 0; u < p->nnodes; u++) {
        int64_t a = p->use_off[u], b = p->use_off[u + 1];
        if (!R->on[u]) continue;
        if (b - a > cap) cap = b - a;
        for (int k = 0; k < R->ntl[u]; k++)
            for (int64_t j = a; j < b; j++)
                if (R->may[u][(j - a) * R->ntl[u] + k]) {
                    double g = relax_grad(p, R, c, u, k, j);
                    norm2 += g * g;
                }
    }
    if (!(norm2 > 0) || !isfinite(norm2) || !isfinite(ub) || !(ub > lb)) return 0;
    step = theta * (ub - lb) / norm2;
    y = malloc((size_t)(cap ? cap : 1) * sizeof *y);
    z = malloc((size_t)(cap ? cap : 1) * sizeof *z);
    js = malloc((size_t)(cap ? cap : 1) * sizeof *js);
    if (!y || !z || !js) {
        free(y);
        free(z);
        free(js);
        return -1;
    }
    for (int64_t u = 0; u < p->nnodes; u++) {
        int64_t a = p->use_off[u], b = p->use_off[u + 1];
        int nt = R->ntl[u];
        if (!R->on[u]) continue;
        for (int k = 0; k < nt; k++) {
            int m = 0;
            for (int64_t j = a; j < b; j++)
                if (R->may[u][(j - a) * nt + k]) {
                    js[m] = j;
                    y[m++] = R->lam[u][(j - a) * nt + k] + step * relax_grad(p, R, c, u, k, j);
                }
            if (m < 2) continue;
            simplex_project(y, z, m);
            for (int i = 0; i < m; i++) R->lam[u][(js[i] - a) * nt + k] = y[i];
        }
    }
    free(y);
    free(z);
    free(js);
    return 1;
}

/* The repair of a plan (primal recovery): node by node (not the fixed ones, nor a leaf nobody
 * reads), the strategy whose exact share of the price is least — its own seconds, its value's
 * distinct moves, and its inputs' distinct moves, the only terms of price() its choice changes
 * — taking strict gains only, so the price never rises; sweeps until none (at most
 * REPAIR_SWEEPS). The lists other nodes ask of v and of v's inputs are gathered once per node,
 * so a strategy costs its own slots only. */
#define REPAIR_SWEEPS 4

typedef struct rscratch {
    uint32_t *seen, stamp; /* per placement list */
    int *tl;               /* target lists */
    int64_t ntl, cap;
} rscratch;

static void rs_next(ldt_plan *p, rscratch *r) {
    if (++r->stamp == 0) { /* wrapped: clear */
        memset(r->seen, 0, (size_t)p->nplists * sizeof *r->seen);
        r->stamp = 1;
    }
}

static int rs_push(rscratch *r, int t) {
    if (r->ntl == r->cap) {
        int64_t c = r->cap ? 2 * r->cap : 256;
        int *n = realloc(r->tl, (size_t)c * sizeof *n);
        if (!n) return 0;
        r->tl = n;
        r->cap = c;
    }
    r->tl[r->ntl++] = t;
    return 1;
}

static double move_price(ldt_plan *p, int64_t u, int from, int to) {
    ldt__redist_memo *m;
    if (from == to) return 0;
    m = ldt__plan_redist(p, p->node_class[u], from, to, 0);
    return m ? m->seconds : INFINITY;
}

/* The distinct lists the uses of u other than node v's ask under c, appended to r->tl. */
static int asked_by_others(ldt_plan *p, const int32_t *c, int64_t u, int64_t v, rscratch *r) {
    rs_next(p, r);
    for (int64_t j = p->use_off[u]; j < p->use_off[u + 1]; j++) {
        int32_t w = p->use_node[j];
        int to;
        if (w == v) continue;
        to = LDT__SSET_PL(p->node_ss[w], c[w])[1 + p->use_slot[j]];
        if (r->seen[to] == r->stamp) continue;
        r->seen[to] = r->stamp;
        if (!rs_push(r, to)) return 0;
    }
    return 1;
}

#define REPAIR_MAXIN 64

/* v's share of the price under strategy s (c[v] is s); ins/off/base: per distinct input, its
 * node, its others' lists in r->tl[off[i]..off[i+1]) and their moves' sum; v's own asks in
 * r->tl[0..na). */
static double repair_share(ldt_plan *p, const int32_t *c, int64_t v, int s, int na, const int64_t *ins,
                           int nins, const int64_t *off, const double *base, rscratch *r) {
    const ldt__sset *ss = p->node_ss[v];
    const ldt_tensor *t = p->ctx->nodes[v];
    int give = LDT__SSET_PL(ss, s)[0];
    double x = ss->own ? ss->own[s] : 0;
    for (int i = 0; i < na; i++)
        if (r->tl[i] != give) x += move_price(p, v, give, r->tl[i]);
    for (int i = 0; i < nins; i++) {
        int64_t u = ins[i];
        int from = LDT__SSET_PL(p->node_ss[u], c[u])[0];
        x += base[i];
        for (int k = 0; k < t->nin; k++) {
            int to = LDT__SSET_PL(ss, s)[1 + k], dup = to == from;
            if (LDT__IN(t)[k]->id != u) continue;
            for (int64_t q = off[i]; q < off[i + 1] && !dup; q++) dup = r->tl[q] == to;
            for (int k2 = 0; k2 < k && !dup; k2++)
                dup = LDT__IN(t)[k2]->id == u && LDT__SSET_PL(ss, s)[1 + k2] == to;
            if (!dup) x += move_price(p, u, from, to);
        }
    }
    return x;
}

int ldt__plan_repair(ldt_plan *p, const int32_t *fixed, int32_t *c) {
    rscratch r = {0};
    int64_t ins[REPAIR_MAXIN], off[REPAIR_MAXIN + 1];
    double base[REPAIR_MAXIN];
    int ok = 1;
    /* after the first sweep only the nodes next to a change are looked at again */
    unsigned char *dirty = malloc((size_t)(p->nnodes ? p->nnodes : 1));
    if (!dirty || !(r.seen = calloc((size_t)(p->nplists ? p->nplists : 1), sizeof *r.seen))) {
        free(dirty);
        return 0;
    }
    memset(dirty, 1, (size_t)p->nnodes);
    for (int sweep = 0; sweep < REPAIR_SWEEPS && ok; sweep++) {
        int changed = 0;
        for (int64_t v = 0; v < p->nnodes && ok; v++) {
            const ldt_tensor *t = p->ctx->nodes[v];
            int cur = c[v], best = cur, n = p->node_ss[v]->n, na, nins = 0;
            double bc;
            if (!dirty[v]) continue;
            dirty[v] = 0;
            if (n < 2 || (fixed && fixed[v] >= 0) ||
                (t->kind == LDT__PERSISTENT && p->use_off[v] == p->use_off[v + 1]))
                continue;
            /* what v's readers ask of it; then per distinct input what its other readers ask */
            r.ntl = 0;
            if (!(ok = asked_by_others(p, c, v, -1, &r))) break;
            na = (int)r.ntl;
            off[0] = r.ntl;
            if (t->kind != LDT__PERSISTENT)
                for (int k = 0; k < t->nin && ok; k++) {
                    int64_t u = LDT__IN(t)[k]->id;
                    int dup = 0, from;
                    for (int i = 0; i < nins && !dup; i++) dup = ins[i] == u;
                    if (dup) continue;
                    if (nins == REPAIR_MAXIN) {
                        nins = -1; /* too many to keep: v stays */
                        break;
                    }
                    if (!(ok = asked_by_others(p, c, u, v, &r))) break;
                    from = LDT__SSET_PL(p->node_ss[u], c[u])[0];
                    base[nins] = 0;
                    for (int64_t q = off[nins]; q < r.ntl; q++)
                        if (r.tl[q] != from) base[nins] += move_price(p, u, from, r.tl[q]);
                    ins[nins++] = u;
                    off[nins] = r.ntl;
                }
            if (!ok) break;
            if (nins < 0) continue;
            bc = repair_share(p, c, v, cur, na, ins, nins, off, base, &r);
            for (int s2 = 0; s2 < n; s2++) {
                double x;
                if (s2 == cur) continue;
                x = repair_share(p, c, v, s2, na, ins, nins, off, base, &r);
                if (x < bc * (1 - 1e-12) - 1e-18) {
                    bc = x;
                    best = s2;
                }
            }
            c[v] = best;
            if (best == cur) continue;
            changed = 1;
            /* v's readers, its inputs and their other readers now price differently */
            for (int64_t j = p->use_off[v]; j < p->use_off[v + 1]; j++) dirty[p->use_node[j]] = 1;
            for (int i = 0; i < nins; i++) {
                dirty[ins[i]] = 1;
                for (int64_t j = p->use_off[ins[i]]; j < p->use_off[ins[i] + 1]; j++) dirty[p->use_node[j]] = 1;
            }
        }
        if (!changed) break;
    }
    free(dirty);
    free(r.seen);
    free(r.tl);
    return ok;
}

/* The moves value u's uses ask under the assignment c: exact, each distinct list other than
 * what u gives once (*ex), and relaxed, each use its share of what it asks (*rl). */
static void relax_charge(ldt_plan *p, const relax *R, const int32_t *c, int64_t u, double *ex, double *rl) {
    int64_t a = p->use_off[u], b = p->use_off[u + 1];
    int nt = R->ntl[u], from = LDT__SSET_PL(p->node_ss[u], c[u])[0];
    *ex = *rl = 0;
    for (int k = 0; k < nt; k++) {
        int to = R->tl[u][k], asked = 0;
        double share = 0, mv;
        ldt__redist_memo *m;
        if (to == from) continue;
        for (int64_t j = a; j < b; j++)
            if (LDT__SSET_PL(p->node_ss[p->use_node[j]], c[p->use_node[j]])[1 + p->use_slot[j]] == to) {
                asked = 1;
                share += R->lam[u][(j - a) * nt + k];
            }
        if (!asked) continue;
        m = ldt__plan_redist(p, p->node_class[u], from, to, 0);
        mv = m ? m->seconds : INFINITY;
        if (p->opts.strict) mv += STRICT_PENALTY;
        *ex += mv;
        if (share > 0) *rl += share * mv;
    }
}

/* Tightening the relaxation where it errs: each relaxed value whose relaxed charge under the
 * pass's optimum c differs from its exact one (a target asked by uses whose shares do not sum
 * to 1) and whose exact table (its domain times its distinct consumers', under fixed) is at
 * most UNRELAX_CAP entries is no longer relaxed: the next pass gives it its exact table. Exact
 * terms are never below the relaxed ones for any weights, so every later minimum is still a
 * lower bound, and the next optimum can no longer be mispriced there. The values changed go
 * to out (the caller relaxes them again if the next pass does not fit); their count. */
static int64_t unrelax(ldt_plan *p, const int32_t *fixed, relax *R, const int32_t *c, int64_t *out) {
    int64_t n = 0;
    for (int64_t u = 0; u < p->nnodes; u++) {
        int64_t a = p->use_off[u], b = p->use_off[u + 1];
        double ex, rl, size;
        if (!R->on[u]) continue;
        relax_charge(p, R, c, u, &ex, &rl);
        if (!(fabs(ex - rl) > 1e-12 * (ex > 0 ? ex : 1))) continue;
        size = fixed && fixed[u] >= 0 ? 1 : p->node_ss[u]->n;
        for (int64_t j = a; j < b && size <= UNRELAX_CAP; j++) {
            int32_t w = p->use_node[j];
            int dup = 0;
            for (int64_t i = a; i < j && !dup; i++) dup = p->use_node[i] == w;
            if (!dup && !(fixed && fixed[w] >= 0)) size *= p->node_ss[w]->n;
        }
        if (size > UNRELAX_CAP) continue;
        R->on[u] = 0;
        out[n++] = u;
    }
    return n;
}

static void relax_free(ldt_plan *p, relax *R) {
    for (int64_t u = 0; R->tl && u < p->nnodes; u++) {
        free(R->tl[u]);
        free(R->lam[u]);
        if (R->may) free(R->may[u]);
    }
    free(R->may);
    free(R->tl);
    free(R->ntl);
    free(R->lam);
    free(R->on);
}

ldt_status ldt__search_exact(ldt_plan *p, const int32_t *fixed, int64_t limit, int64_t rebuild,
                             int64_t elim_limit, int64_t hold, int tying, int32_t *choice, double *bound, int *solved,
                             int *tied, int32_t *alt, double *alt_cost) {
    relax R;
    int32_t *cand = NULL, *fix = NULL;
    double best_lb, best_ub = INFINITY, theta = POLYAK_THETA;
    int64_t used = 0, *undo = NULL, nundo = 0;
    int any = 0, stall = 0, cut = 1;
    ldt_status st;
    memset(&R, 0, sizeof R);
    *alt_cost = INFINITY;
    if (!(R.on = calloc((size_t)(p->nnodes ? p->nnodes : 1), 1)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    st = solve(p, fixed, elim_limit, hold, tying, &R, choice, bound, solved, tied, &used);
    for (int64_t u = 0; u < p->nnodes && !any; u++) any = R.on[u];
    if (st != LDT_OK || *solved || limit <= 0 || !any) goto out;
    if (!relax_init(p, fixed, &R) || !(cand = malloc((size_t)p->nnodes * sizeof *cand)) ||
        !(fix = malloc((size_t)p->nnodes * sizeof *fix)) || !(undo = malloc((size_t)p->nnodes * sizeof *undo)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
    best_lb = *bound;
    R.active = 1;
    used = 0;
    for (int it = 0; it < RELAX_PASSES && used + rebuild < limit; it++) {
        double lbi, fc, ub;
        int ok = 0, ti = 0, r;
        int64_t w = 0;
        if ((st = solve(p, fixed, limit - used - rebuild, hold, tying, &R, cand, &lbi, &ok, &ti, &w)) != LDT_OK)
            break;
        used += rebuild;
        if (!ok) {
            /* the exact tables given back last pass do not fit what is left: relax them
             * again, give no more back, and make the pass again */
            if (nundo == 0) break;
            for (int64_t i = 0; i < nundo; i++) R.on[undo[i]] = 1;
            nundo = 0;
            cut = 0;
            it--;
            continue;
        }
        nundo = 0;
        used += w;
        /* theta halves after POLYAK_STALL passes that do not raise the bound */
        if (lbi > best_lb) {
            best_lb = lbi;
            stall = 0;
        } else if (++stall >= POLYAK_STALL) {
            theta *= 0.5;
            stall = 0;
        }
        fc = ldt__plan_price(p, cand);
        if (fc < best_ub) {
            best_ub = fc;
            memcpy(alt, cand, (size_t)p->nnodes * sizeof *cand);
            *alt_cost = fc;
            *tied = ti;
        }
        if (isfinite(best_ub) && best_ub - best_lb <= 1e-12 * best_ub) {
            /* only a proven plan is handed back as the choice: the fallbacks start from choice
             * as it was */
            memcpy(choice, alt, (size_t)p->nnodes * sizeof *alt);
            *solved = 1;
            break;
        }
        /* the step aims at the best plan known (the greedy one's cost before any) */
        ub = best_ub < p->cost_greedy ? best_ub : p->cost_greedy;
        if ((r = relax_polyak(p, &R, cand, lbi, ub, theta)) < 0)
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
        if (r == 0) break; /* nothing to move: the bound cannot rise */
        if (cut) nundo = unrelax(p, fixed, &R, cand, undo);
    }
    /* the cheapest relaxed optimum, repaired (the price only falls), maybe meets the bound */
    if (!*solved && isfinite(best_ub) && !p->opts.strict) {
        double fc;
        memcpy(fix, alt, (size_t)p->nnodes * sizeof *alt);
        if (!ldt__plan_repair(p, fixed, fix)) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for the exact search");
        if ((fc = ldt__plan_price(p, fix)) < best_ub) {
            best_ub = *alt_cost = fc;
            memcpy(alt, fix, (size_t)p->nnodes * sizeof *fix);
        }
        if (best_ub - best_lb <= 1e-12 * best_ub) {
            memcpy(choice, alt, (size_t)p->nnodes * sizeof *alt);
            *solved = 1;
        }
    }
    *bound = best_lb;
out:
fail:
    free(cand);
    free(fix);
    free(undo);
    relax_free(p, &R);
    return st;
}
