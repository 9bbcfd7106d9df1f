/* Whole-graph strategy choice: every node's N-D strategies (interned by signature, so the
 * repeated blocks of a model share them), the redistribution prices between them, and the
 * search (docs/planner.md):
 *  - greedy: nodes in order, each picks the strategy whose inputs are cheapest to reach from
 *    what its producers chose (PyTorch's op-by-op dispatch);
 *  - global: a forward pass computes, per node and strategy, the cheapest cost of reaching it
 *    (its producers' best costs, shared among a producer's consumers, plus the moves); a
 *    backward pass fixes sinks first, then each node given its fixed consumers; then passes of
 *    single-node improvements. Exact on chains and in-trees; on DAGs a heuristic, so both
 *    plans are priced with the real redistribution plans and the cheaper is kept.
 * Ties go to the lower strategy index (enumeration order), never to addresses or hashes.
 * Under a memory weight (ldt_plan_options.memory_weight) persistent tensors' strategies cost
 * the weight times their resident shard's bytes; ldt_plan_create_budget searches the weight
 * that keeps a plan within a per-rank budget (docs/planner.md, "Memory budget"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "core/error.h"
#include "core/mesh.h"
#include "planner/exact.h"
#include "planner/passes.h"
#include "planner/plan_internal.h"
#include "planner/redistribute.h"
#include "planner/profiles.h"
#include "trace/pipeline.h"

#define STRICT_PENALTY 1e9
/* Graphs up to this many nodes get the branch and bound when the elimination gives up. */
#define BNB_MAX_NODES 256

/* Under the default work limit (plan_limit 0) the exact elimination runs where its dry run
 * counts at most PLAN_EXACT_SCALE times the limit in work and PLAN_HOLD_SCALE times it in table
 * entries kept (8 bytes each: 320 MB), and the relaxation's passes together PLAN_RELAX_SCALE times
 * it; the branch and bound keeps the limit (issue 25: GPT-2-small's training step on tp=4, 8e7
 * entries, and GPT-2 large's, between 1e8 and 2e8, exact by default; issue 24: the 96-layer GPT's forward and backward on dp=8,tp=8, five
 * passes of 2.2e6 entries and 1.6e6 for remaking each). An explicit limit bounds them all, in
 * table entries only. */
#define PLAN_EXACT_SCALE 40
#define PLAN_HOLD_SCALE 8
#define PLAN_RELAX_SCALE 6
/* ... and there each relaxation pass counts PLAN_RELAX_NODE_WORK entries a node besides its
 * tables: remaking the relaxed problem (every producer table keyed or made, the interning, the
 * dry run) is most of a pass's time on big graphs (the 175B training step's 58,000 nodes). */
#define PLAN_RELAX_NODE_WORK 100

/* ---------------------------------------------------------------------------------------
 * Growing arrays and open-addressing tables of ids.
 */
static int grow(void **v, int64_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 16;
    void *n;
    if (need <= *cap) return 1;
    while (c < need) c *= 2;
    n = realloc(*v, (size_t)c * elem);
    if (!n) return 0;
    *v = n;
    *cap = c;
    return 1;
}

static int grow32(void **v, int32_t *cap, int32_t need, size_t elem) {
    int64_t c = *cap;
    int ok = grow(v, &c, need, elem);
    if (ok) *cap = (int32_t)c;
    return ok;
}

/* A table of ids + 1 keyed by 64-bit hashes; eq(ctx, id) says whether id is the key. */
typedef int (*id_eq)(const void *ctx, int32_t id, const void *key);

static int32_t tab_find(const int32_t *tab, int32_t cap, uint64_t h, id_eq eq, const void *ctx,
                        const void *key, int32_t *slot) {
    uint32_t mask = (uint32_t)cap - 1, i = (uint32_t)h & mask;
    while (tab[i]) {
        if (eq(ctx, tab[i] - 1, key)) {
            *slot = (int32_t)i;
            return tab[i] - 1;
        }
        i = (i + 1) & mask;
    }
    *slot = (int32_t)i;
    return -1;
}

/* Doubles the table when half full; rehash(ctx, id) gives an id's hash. */
static int tab_grow(int32_t **tab, int32_t *cap, int32_t n, uint64_t (*rehash)(const void *, int32_t),
                    const void *ctx) {
    int32_t nc = *cap ? *cap : 64, *nt;
    if (*cap && 2 * (n + 1) <= *cap) return 1;
    while (2 * (n + 1) > nc) nc *= 2;
    nt = calloc((size_t)nc, sizeof *nt);
    if (!nt) return 0;
    for (int32_t id = 0; id < n; id++) {
        uint32_t i = (uint32_t)rehash(ctx, id) & (uint32_t)(nc - 1);
        while (nt[i]) i = (i + 1) & (uint32_t)(nc - 1);
        nt[i] = id + 1;
    }
    free(*tab);
    *tab = nt;
    *cap = nc;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Placement lists, interned (field by field: the struct has padding).
 */
static size_t pl_key(const ldt_placement *pl, int nd, int64_t *k) {
    for (int i = 0; i < nd; i++) {
        k[4 * i] = pl[i].kind;
        k[4 * i + 1] = pl[i].kind == LDT_PLACE_REPLICATE ? 0 : pl[i].dim;
        k[4 * i + 2] = pl[i].kind == LDT_PLACE_INTERLEAVED_SHARD ? pl[i].blocks : 0;
        k[4 * i + 3] = pl[i].kind == LDT_PLACE_PARTIAL ? pl[i].op : 0;
    }
    return (size_t)nd * 4 * sizeof *k;
}

static int pl_equal_list(const ldt_placement *a, const ldt_placement *b, int nd) {
    for (int i = 0; i < nd; i++)
        if (!ldt_placement_equal(&a[i], &b[i])) return 0;
    return 1;
}

static int plist_eq(const void *ctx, int32_t id, const void *key) {
    const ldt_plan *p = ctx;
    return pl_equal_list(ldt__plist(p, id), key, p->nd);
}

static uint64_t plist_hash(const ldt_plan *p, const ldt_placement *pl) {
    int64_t k[4 * LDT_MAX_DIMS];
    return XXH3_64bits(k, pl_key(pl, p->nd, k));
}

static uint64_t plist_rehash(const void *ctx, int32_t id) {
    return plist_hash(ctx, ldt__plist(ctx, id));
}

/* The id of placement list pl (nd entries), interned; -1 on out of memory or overflow. */
static int plist_id(ldt_plan *p, const ldt_placement *pl) {
    uint64_t h = plist_hash(p, pl);
    int32_t slot, id;
    if (p->plist_tab_cap) {
        id = tab_find(p->plist_tab, p->plist_tab_cap, h, plist_eq, p, pl, &slot);
        if (id >= 0) return id;
    }
    if (p->nplists >= 65535) return -1; /* ids are 16-bit in strategy sets */
    if (!tab_grow(&p->plist_tab, &p->plist_tab_cap, p->nplists, plist_rehash, p)) return -1;
    if (!grow32((void **)&p->plists, &p->cap_plists, (p->nplists + 1) * p->nd,
                sizeof *p->plists))
        return -1;
    memcpy(p->plists + (size_t)p->nplists * (size_t)p->nd, pl, (size_t)p->nd * sizeof *pl);
    tab_find(p->plist_tab, p->plist_tab_cap, h, plist_eq, p, pl, &slot);
    p->plist_tab[slot] = p->nplists + 1;
    return p->nplists++;
}

/* ---------------------------------------------------------------------------------------
 * Shape classes (shape + dtype), interned.
 */
static int class_eq(const void *ctx, int32_t id, const void *key) {
    const ldt_plan *p = ctx;
    const ldt__shape_class *a = &p->classes[id], *b = key;
    if (a->dtype != b->dtype || a->shape.ndim != b->shape.ndim) return 0;
    return memcmp(a->shape.dims, b->shape.dims, (size_t)a->shape.ndim * sizeof a->shape.dims[0]) == 0;
}

static uint64_t class_hash(const ldt__shape_class *c) {
    int64_t k[LDT_MAX_DIMS + 2];
    k[0] = c->dtype;
    k[1] = c->shape.ndim;
    memcpy(k + 2, c->shape.dims, (size_t)c->shape.ndim * sizeof k[0]);
    return XXH3_64bits(k, (size_t)(c->shape.ndim + 2) * sizeof k[0]);
}

static uint64_t class_rehash(const void *ctx, int32_t id) {
    return class_hash(&((const ldt_plan *)ctx)->classes[id]);
}

static int32_t class_id(ldt_plan *p, const ldt_shape *s, ldt_dtype dt) {
    ldt__shape_class c;
    int32_t slot, id;
    uint64_t h;
    memset(&c, 0, sizeof c);
    c.shape = *s;
    c.dtype = dt;
    h = class_hash(&c);
    if (p->class_tab_cap) {
        id = tab_find(p->class_tab, p->class_tab_cap, h, class_eq, p, &c, &slot);
        if (id >= 0) return id;
    }
    if (!tab_grow(&p->class_tab, &p->class_tab_cap, p->nclasses, class_rehash, p) ||
        !grow32((void **)&p->classes, &p->cap_classes, p->nclasses + 1, sizeof c))
        return -1;
    p->classes[p->nclasses] = c;
    tab_find(p->class_tab, p->class_tab_cap, h, class_eq, p, &c, &slot);
    p->class_tab[slot] = p->nclasses + 1;
    return p->nclasses++;
}

/* ---------------------------------------------------------------------------------------
 * Strategy sets.
 */
typedef struct skey {
    unsigned char *buf;
    size_t len, cap;
} skey;

static int skey_put(skey *k, const void *v, size_t n) {
    if (k->len + n > k->cap) {
        size_t c = k->cap ? k->cap * 2 : 256;
        unsigned char *b;
        while (c < k->len + n) c *= 2;
        if (!(b = realloc(k->buf, c))) return 0;
        k->buf = b;
        k->cap = c;
    }
    memcpy(k->buf + k->len, v, n);
    k->len += n;
    return 1;
}

static int skey_shape(skey *k, const ldt_shape *s, int dt) {
    int64_t h[2] = {s->ndim, dt};
    return skey_put(k, h, sizeof h) &&
           skey_put(k, s->dims, (size_t)s->ndim * sizeof s->dims[0]);
}

/* The signature of node t: what its strategies depend on. */
static int node_key(const ldt_plan *p, const ldt_tensor *t, skey *k) {
    int64_t head[3] = {t->kind == LDT__PERSISTENT ? -1 : t->op, t->nin, t->pin != NULL};
    int64_t pk[4 * LDT_MAX_DIMS];
    int ok;
    k->len = 0;
    ok = skey_put(k, head, sizeof head) && skey_shape(k, t->shape, t->dtype);
    if (ok && t->kind != LDT__PERSISTENT) {
        ok = skey_put(k, t->attrs, sizeof *t->attrs);
        for (int i = 0; ok && i < t->nin; i++)
            ok = skey_shape(k, LDT__IN(t)[i]->shape, LDT__IN(t)[i]->dtype);
    }
    if (ok && t->pin) ok = skey_put(k, pk, pl_key(t->pin, p->nd, pk));
    return ok;
}

static int sset_eq(const void *ctx, int32_t id, const void *key) {
    const ldt_plan *p = ctx;
    const skey *k = key;
    return p->ssets[id]->keylen == k->len && memcmp(p->ssets[id]->key, k->buf, k->len) == 0;
}

static uint64_t sset_rehash(const void *ctx, int32_t id) {
    return ((const ldt_plan *)ctx)->ssets[id]->hash;
}

static ldt_status spec_fits(const ldt_plan *p, const ldt_shape *s, ldt_dtype dt,
                            const ldt_placement *pl) {
    ldt_spec spec;
    return ldt_spec_init(&spec, p->mesh, s, pl, p->nd, dt);
}

/* Adds the N-D strategies of node t from its 1-D options (all combinations over mesh dims). */
static ldt_status enumerate(ldt_plan *p, const ldt_tensor *t, const ldt__opts1 *o, ldt__sset *ss) {
    int nd = p->nd, nin = ss->nin, m = o->n;
    int64_t total = 1, cap = 0;
    const ldt__op_strategy *row =
        t->kind == LDT__PERSISTENT ? NULL : ldt__op_strategy_of(t->op);
    ldt_placement out[LDT_MAX_DIMS], ins[LDT__SMAX_IN][LDT_MAX_DIMS];
    const ldt_placement *inp[LDT__SMAX_IN];
    for (int d = 0; d < nd; d++) total *= m;
    for (int k = 0; k < nin && k < LDT__SMAX_IN; k++) inp[k] = ins[k];
    /* a pipeline's dim (docs/pipeline.md): everything whole on it, option 0 (all Replicate) */
    int ppd = p->ctx->pp ? p->ctx->pp->dim : -1;
    for (int64_t c = 0; c < total; c++) {
        int64_t r = c;
        int ok = 1;
        uint16_t ids[1 + LDT__SMAX_IN];
        /* digit d of c (mesh dim d) picks the option; dim 0 is the most significant so the
         * order is row-major and the all-first-option strategy comes first */
        for (int d = nd - 1; d >= 0; d--) {
            const ldt__opt1 *x = &o->v[r % m];
            if (d == ppd && r % m != 0) ok = 0;
            r /= m;
            out[d] = x->out;
            for (int k = 0; k < nin; k++) ins[k][d] = x->in[k];
        }
        if (!ok || (t->pin && !pl_equal_list(out, t->pin, nd))) continue;
        if (spec_fits(p, t->shape, (ldt_dtype)t->dtype, out) != LDT_OK) ok = 0;
        for (int k = 0; ok && k < nin; k++)
            if (spec_fits(p, LDT__IN(t)[k]->shape, (ldt_dtype)LDT__IN(t)[k]->dtype, ins[k]) != LDT_OK)
                ok = 0;
        if (ok && row && row->valid && !row->valid(t, p->mesh, out, inp)) ok = 0;
        if (!ok) continue;
        for (int k = -1; k < nin; k++) {
            int id = plist_id(p, k < 0 ? out : ins[k]);
            if (id < 0) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for placement lists");
            ids[k + 1] = (uint16_t)id;
        }
        if (!grow((void **)&ss->pl, &cap, (int64_t)(ss->n + 1) * (1 + nin), sizeof *ss->pl))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for strategies");
        memcpy(LDT__SSET_PL(ss, ss->n), ids, (size_t)(1 + nin) * sizeof ids[0]);
        ss->n++;
    }
    ldt_clear_error();
    return LDT_OK;
}

/* The 1-D options of node t. */
static ldt_status options_of(ldt_plan *p, const ldt_tensor *t, ldt__opts1 *o) {
    memset(o, 0, sizeof *o);
    if (t->kind != LDT__PERSISTENT && t->nin > LDT__SMAX_IN)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan: node %lld (%s) has %d inputs, expected at most %d (join them in steps: "
                 "a cat of cats)",
                 (long long)t->id, ldt__op_name(p->ctx, t->op), t->nin, LDT__SMAX_IN);
    o->t = t;
    o->nin = t->kind == LDT__PERSISTENT ? 0 : t->nin;
    o->iks = p->iks;
    o->niks = p->niks;
    ldt__opt_all(o, ldt_replicate()); /* first: strategy 0 is all-Replicate */
    if (t->kind == LDT__PERSISTENT) {
        if (t->pin) /* a pinned leaf holds exactly its pin */
            for (int d = 0; d < p->nd; d++) ldt__opt_all(o, t->pin[d]);
        for (int d = 0; d < t->shape->ndim; d++) ldt__opt_all(o, ldt_shard(d));
    } else if (t->nin <= LDT__SMAX_IN && t->op < LDT_OP_COUNT) {
        const ldt__op_strategy *row = ldt__op_strategy_of(t->op);
        if (row->options) row->options(o);
    } else if (t->nin <= LDT__SMAX_IN) {
        const ldt__custom_op *c = &p->ctx->custom[t->op - LDT_OP_COUNT];
        ldt_shape in[LDT__SMAX_IN];
        ldt_strategy_builder b = {o};
        for (int k = 0; k < t->nin; k++) in[k] = *LDT__IN(t)[k]->shape;
        if (c->strategy_fn) c->strategy_fn(t->nin, in, t->shape, c->strategy_user, &b);
    }
    if (o->oom) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for options");
    return LDT_OK;
}

/* Floating-point operations of one node on one device (GEMM-like ops; 0 for the rest). */
/* The node's FLOPs on its global shapes (the roofline's count, planner/roofline.c). */
static double node_flops(const ldt_tensor *t) {
    return ldt__op_flops(t->op, t->shape, t->nin > 0 ? LDT__IN(t)[0]->shape : NULL,
                         t->nin > 1 ? LDT__IN(t)[1]->shape : NULL);
}

/* The seconds each strategy costs of its own: the collectives its lowering issues, and (the
 * optional compute term) its work on one rank by a roofline on the cost model's local
 * bandwidth and a flops rate: the bytes of its local shards, and the GEMM flops split by the
 * mesh dims that shard the output (or split the contraction into a Partial). */
/* The number of pieces placement list pl cuts a tensor into (Shard, InterleavedShard). */
static double pieces(const ldt_plan *p, const ldt_placement *pl) {
    double n = 1;
    for (int i = 0; i < p->nd; i++)
        if (ldt__pl_is_shard(&pl[i])) n *= (double)ldt_mesh_dim_size(p->mesh, i);
    return n;
}

/* The bytes of the largest shard of t under placement list pl: what a rank keeps resident.
 * Uneven splits follow torch.chunk (chunks of ceil(n/k), trailing ranks short), so the rank at
 * mesh coordinate 0 holds the largest: its region by the layout function, not nbytes / pieces
 * (a [6,24] tensor split 4 ways keeps 2 rows, not 1.5). */
static double shard_bytes(const ldt_plan *p, const ldt_tensor *t, const ldt_placement *pl) {
    ldt_spec spec;
    ldt_region reg;
    int64_t coord[LDT_MAX_DIMS] = {0};
    if (ldt_spec_init(&spec, p->mesh, t->shape, pl, p->nd, (ldt_dtype)t->dtype) != LDT_OK)
        return ceil((double)ldt__nbytes(t) / pieces(p, pl)); /* (strategies passed spec_init) */
    ldt__layout_coord_checked(&spec, coord, &reg);
    return (double)reg.numel * (double)ldt_dtype_size((ldt_dtype)t->dtype);
}

/* A persistent tensor's strategies cost the memory weight times the bytes of the shard each
 * keeps on a rank (parameters and optimizer states: what a memory budget bounds first). */
static ldt_status leaf_costs(ldt_plan *p, const ldt_tensor *t, ldt__sset *ss) {
    if (!(p->opts.memory_weight > 0) || ss->n == 0) return LDT_OK;
    if (!(ss->own = malloc((size_t)ss->n * sizeof *ss->own)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    for (int s = 0; s < ss->n; s++)
        ss->own[s] = p->opts.memory_weight * shard_bytes(p, t, ldt__plist(p, LDT__SSET_PL(ss, s)[0]));
    return LDT_OK;
}

static ldt_status own_costs(ldt_plan *p, const ldt_tensor *t, ldt__sset *ss) {
    const ldt__op_strategy *row = NULL;
    double flops = 0;
    if (t->kind == LDT__PERSISTENT) return leaf_costs(p, t, ss);
    if (ss->n == 0) return LDT_OK;
    if (t->op < LDT_OP_COUNT) row = ldt__op_strategy_of(t->op);
    if (!(row && row->comm) && !p->compute) return LDT_OK;
    if (!(ss->own = malloc((size_t)ss->n * sizeof *ss->own)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    flops = node_flops(t);
    for (int s = 0; s < ss->n; s++) {
        const uint16_t *pl = LDT__SSET_PL(ss, s);
        const ldt_placement *in[LDT__SMAX_IN], *out = ldt__plist(p, pl[0]);
        double split = 1, bytes, secs;
        for (int k = 0; k < ss->nin && k < LDT__SMAX_IN; k++) in[k] = ldt__plist(p, pl[1 + k]);
        ss->own[s] = row && row->comm ? row->comm(t, p->mesh, out, in, &p->cost) : 0;
        if (!p->compute) continue;
        for (int i = 0; i < p->nd; i++) {
            int split_here = ldt__pl_is_shard(&out[i]);
            /* Partial out of sharded inputs: the contraction is split */
            for (int k = 0; !split_here && out[i].kind == LDT_PLACE_PARTIAL && k < ss->nin && k < LDT__SMAX_IN; k++)
                split_here = ldt__pl_is_shard(&in[k][i]);
            if (split_here) split *= (double)ldt_mesh_dim_size(p->mesh, i);
        }
        /* the local bytes read and written: each operand's shard */
        bytes = (double)ldt__nbytes(t) / pieces(p, out);
        for (int k = 0; k < ss->nin && k < LDT__SMAX_IN; k++)
            bytes += (double)ldt__nbytes(LDT__IN(t)[k]) / pieces(p, in[k]);
        secs = ldt__op_seconds(&p->cost, t->op, t->dtype, flops / split, bytes,
                               ldt_mesh_nranks(p->mesh));
        ss->own[s] += secs;
    }
    return LDT_OK;
}

double ldt__all_reduce_seconds(const ldt_cost_model *cm, const ldt_mesh *mesh, const int *dims,
                               int n, int64_t bytes) {
    int64_t g = 1;
    for (int i = 0; i < n; i++) g *= ldt_mesh_dim_size(mesh, dims[i]);
    if (n == 0 || g <= 1) return 0;
    return ldt_cost_seconds(cm, mesh, n, dims, LDT_COLL_ALL_REDUCE, 2 * (g - 1) * bytes / g, 0);
}

static ldt_status node_sset(ldt_plan *p, const ldt_tensor *t, skey *k, ldt__sset **out) {
    int32_t slot, id;
    uint64_t h;
    ldt__sset *ss;
    ldt__opts1 o;
    ldt_status st;
    if (!node_key(p, t, k)) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    h = XXH3_64bits(k->buf, k->len);
    if (p->sset_tab_cap) {
        id = tab_find(p->sset_tab, p->sset_tab_cap, h, sset_eq, p, k, &slot);
        if (id >= 0) {
            *out = p->ssets[id];
            return LDT_OK;
        }
    }
    if (!tab_grow(&p->sset_tab, &p->sset_tab_cap, p->nssets, sset_rehash, p) ||
        !grow32((void **)&p->ssets, &p->cap_ssets, p->nssets + 1, sizeof *p->ssets) ||
        !(ss = calloc(1, sizeof *ss)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    p->ssets[p->nssets] = ss; /* owned from here, even if filling fails */
    ss->hash = h;
    ss->nin = t->kind == LDT__PERSISTENT ? 0 : t->nin;
    ss->keylen = k->len;
    if (!(ss->key = malloc(k->len ? k->len : 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    memcpy(ss->key, k->buf, k->len);
    tab_find(p->sset_tab, p->sset_tab_cap, h, sset_eq, p, k, &slot);
    p->sset_tab[slot] = ++p->nssets;
    st = options_of(p, t, &o);
    if (st == LDT_OK) st = enumerate(p, t, &o, ss);
    free(o.v);
    LDT_CHECK(st);
    LDT_CHECK(own_costs(p, t, ss));
    if (ss->n == 0) {
        char pin[128], d[256];
        ldt__describe(t, d, sizeof d);
        ldt_placements_format(t->pin, p->nd, pin, sizeof pin);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan: %s %s: no strategy of the op gives the pinned placements (%s); pin its "
                 "inputs, or redistribute its result with ldt_redistribute_to",
                 ldt__op_name(p->ctx, t->op), d, pin);
    }
    *out = ss;
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Redistribution prices.
 */
/* A 64-bit mix for the memo's keys (the splitmix64 finalizer): this lookup is the search's
 * inner loop, so it must cost a few instructions, not a general hash. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The memo entry of (cls, from, to), made (unpriced) if new; NULL on out of memory. */
static ldt__redist_memo *memo_entry(ldt_plan *p, int32_t cls, int from, int to) {
    uint64_t key = (((uint64_t)(uint32_t)cls << 32) | ((uint64_t)from << 16) | (uint64_t)to) + 1;
    uint64_t i, mask;
    if (2 * (p->memo_n + 1) > p->memo_cap) {
        int64_t nc = p->memo_cap ? 2 * p->memo_cap : 1024;
        ldt__redist_memo *nm = calloc((size_t)nc, sizeof *nm);
        if (!nm) return NULL;
        for (int64_t j = 0; j < p->memo_cap; j++)
            if (p->memo[j].key) {
                uint64_t s = mix64(p->memo[j].key) & (uint64_t)(nc - 1);
                while (nm[s].key) s = (s + 1) & (uint64_t)(nc - 1);
                nm[s] = p->memo[j];
            }
        free(p->memo);
        p->memo = nm;
        p->memo_cap = nc;
    }
    mask = (uint64_t)p->memo_cap - 1;
    i = mix64(key) & mask;
    while (p->memo[i].key && p->memo[i].key != key) i = (i + 1) & mask;
    if (!p->memo[i].key) {
        p->memo_n++;
        p->memo[i].key = key;
        p->memo[i].seconds = NAN;
    }
    return &p->memo[i];
}

/* Shape class cls's step-price memo, made on first use; NULL (no memo: slower, same prices)
 * when out of memory. */
static ldt__step_memo *class_memo(ldt_plan *p, int32_t cls) {
    if (cls >= p->class_memo_cap) {
        int32_t nc = p->nclasses > cls ? p->nclasses : cls + 1;
        ldt__step_memo **nm = realloc(p->class_memo, (size_t)nc * sizeof *nm);
        if (!nm) return NULL;
        memset(nm + p->class_memo_cap, 0, (size_t)(nc - p->class_memo_cap) * sizeof *nm);
        p->class_memo = nm;
        p->class_memo_cap = nc;
    }
    if (!p->class_memo[cls]) p->class_memo[cls] = ldt__step_memo_create();
    return p->class_memo[cls];
}

ldt__redist_memo *ldt__plan_redist(ldt_plan *p, int32_t cls, int from, int to, int want_plan) {
    ldt__redist_memo *e = memo_entry(p, cls, from, to);
    if (!e || e->failed || (!isnan(e->seconds) && (!want_plan || e->plan))) return e;
    {
        ldt_spec src;
        ldt_redist_options ro = {&p->cost, 1, LDT_REDIST_DIJKSTRA};
        ldt_redist_plan *rp = NULL;
        ldt__step_memo *sm = class_memo(p, cls);
        if (ldt_spec_init(&src, p->mesh, &p->classes[cls].shape, ldt__plist(p, from), p->nd,
                          p->classes[cls].dtype) != LDT_OK ||
            ldt__redist_plan_create_memo(&src, NULL, ldt__plist(p, to), p->nd, &ro, sm, &rp) != LDT_OK) {
            e->failed = 1;
            e->seconds = INFINITY;
            ldt_clear_error();
            return e;
        }
        e->seconds = ldt_redist_plan_seconds(rp);
        if (want_plan) e->plan = rp;
        else ldt_redist_plan_destroy(rp);
    }
    return e;
}

/* The search's price of moving a value of class cls from `from` to `to` into node v;
 * strict mode makes any move not into a redistribute node prohibitive. */
double ldt__plan_move_seconds(ldt_plan *p, int32_t cls, int from, int to) {
    ldt__redist_memo *e;
    uint64_t key;
    ldt__price_slot *slot;
    double c;
    if (from == to) return 0;
    /* a small direct-mapped cache in front of the memo: the search asks the same few moves
     * over and over, and this stays in the first-level cache */
    key = (((uint64_t)(uint32_t)cls << 32) | ((uint64_t)from << 16) | (uint64_t)to) + 1;
    slot = &p->price_cache[mix64(key) & (LDT__PRICE_CACHE - 1)];
    if (slot->key == key) {
        c = slot->seconds;
    } else {
        /* one price: the modeled seconds of the redistribution plan that lowering will run
         * (made once per pair and memoized), never a separate estimate that can disagree */
        if (!(e = ldt__plan_redist(p, cls, from, to, 0))) return INFINITY;
        c = e->seconds;
        slot->key = key;
        slot->seconds = c;
    }
    return c;
}

static double move_cost(ldt_plan *p, int32_t cls, int from, int to, const ldt_tensor *v) {
    double c;
    if (from == to) return 0;
    c = ldt__plan_move_seconds(p, cls, from, to);
    if (p->opts.strict && v->op != LDT_OP_REDISTRIBUTE) return c + STRICT_PENALTY;
    return c;
}

double ldt__plan_search_price(ldt_plan *p, int64_t v, int k) {
    const ldt_tensor *t = p->ctx->nodes[v];
    const ldt_tensor *u = LDT__IN(t)[k];
    return move_cost(p, p->node_class[u->id], ldt__chosen_out(p, u->id), ldt__chosen_in(p, v, k), t);
}

/* The real price of a move (its redistribution plan's modeled seconds). */
static double real_cost(ldt_plan *p, int32_t cls, int from, int to) {
    ldt__redist_memo *e;
    if (from == to) return 0;
    e = ldt__plan_redist(p, cls, from, to, 0);
    return e ? e->seconds : INFINITY;
}

/* ---------------------------------------------------------------------------------------
 * The searches.
 */
static int is_leaf(const ldt_tensor *t) { return t->kind == LDT__PERSISTENT; }

/* Cost of node v's input edges under strategy s, given its producers' choices. */
static double in_cost(ldt_plan *p, const int32_t *choice, int64_t v, int s) {
    const ldt_tensor *t = p->ctx->nodes[v];
    const ldt__sset *ss = p->node_ss[v];
    double c = ss->own ? ss->own[s] : 0;
    if (is_leaf(t)) return 0;
    for (int k = 0; k < t->nin; k++) {
        const ldt_tensor *u = LDT__IN(t)[k];
        int from = LDT__SSET_PL(p->node_ss[u->id], choice[u->id])[0];
        c += move_cost(p, p->node_class[u->id], from, LDT__SSET_PL(ss, s)[1 + k], t);
    }
    return c;
}


/* Per-strategy costs of node v given its neighbours' choices, into cost[0..n): its own
 * cost, plus (with_in) its input moves and (with_out) its output moves. Strategies repeat
 * placement lists, so each distinct list is priced once per edge (a cache indexed by list
 * id, invalidated by a stamp). */
typedef struct eval_scratch {
    double *val;
    uint32_t *stamp;
    uint32_t now;
    int32_t cap;
} eval_scratch;

static int scratch_fit(eval_scratch *e, int32_t n) {
    if (n <= e->cap) return 1;
    free(e->val);
    free(e->stamp);
    e->val = malloc((size_t)n * sizeof *e->val);
    e->stamp = calloc((size_t)n, sizeof *e->stamp);
    e->cap = e->val && e->stamp ? n : 0;
    e->now = 0;
    return e->cap == n;
}

static void eval_node(ldt_plan *p, const int32_t *choice, int64_t v, int with_in, int with_out,
                      eval_scratch *e, double *cost) {
    const ldt_tensor *t = p->ctx->nodes[v];
    const ldt__sset *ss = p->node_ss[v];
    for (int s = 0; s < ss->n; s++) cost[s] = ss->own ? ss->own[s] : 0;
    if (with_in && !is_leaf(t))
        for (int k = 0; k < t->nin; k++) {
            const ldt_tensor *u = LDT__IN(t)[k];
            int from = LDT__SSET_PL(p->node_ss[u->id], choice[u->id])[0];
            e->now++;
            for (int s = 0; s < ss->n; s++) {
                int to = LDT__SSET_PL(ss, s)[1 + k];
                if (e->stamp[to] != e->now) {
                    e->stamp[to] = e->now;
                    e->val[to] = move_cost(p, p->node_class[u->id], from, to, t);
                }
                cost[s] += e->val[to];
            }
        }
    if (with_out && p->use_off[v] < p->use_off[v + 1]) {
        e->now++;
        for (int s = 0; s < ss->n; s++) {
            int from = LDT__SSET_PL(ss, s)[0];
            if (e->stamp[from] != e->now) {
                double c = 0;
                for (int64_t j = p->use_off[v]; j < p->use_off[v + 1]; j++) {
                    int32_t w = p->use_node[j];
                    int to = LDT__SSET_PL(p->node_ss[w], choice[w])[1 + p->use_slot[j]];
                    c += move_cost(p, p->node_class[v], from, to, p->ctx->nodes[w]);
                }
                e->stamp[from] = e->now;
                e->val[from] = c;
            }
            cost[s] += e->val[from];
        }
    }
}

static int argmin(const double *c, int n) {
    int best = 0;
    for (int s = 1; s < n; s++)
        if (c[s] < c[best]) best = s; /* ties: the lower index */
    return best;
}

static ldt_status search_greedy(ldt_plan *p, int32_t *choice) {
    eval_scratch e = {0};
    double *cost = malloc((size_t)(p->max_strategies ? p->max_strategies : 1) * sizeof *cost);
    if (!cost || !scratch_fit(&e, p->nplists)) {
        free(cost);
        free(e.val);
        free(e.stamp);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    }
    for (int64_t v = 0; v < p->nnodes; v++) {
        choice[v] = 0;
        if (is_leaf(p->ctx->nodes[v])) continue; /* leaves: strategy 0 (R, or the pin) */
        eval_node(p, choice, v, 1, 0, &e, cost);
        choice[v] = argmin(cost, p->node_ss[v]->n);
    }
    free(cost);
    free(e.val);
    free(e.stamp);
    return LDT_OK;
}

/* Distinct output placement lists of u with the least f over strategies giving each. */
typedef struct group {
    int pl;
    double f;
} group;

static int by_f(const void *a, const void *b) {
    const group *x = a, *y = b;
    if (x->f != y->f) return x->f < y->f ? -1 : 1;
    return x->pl - y->pl; /* a fixed order for ties */
}

/* ... sorted by f, so a scan can stop once f alone exceeds the best found (moves cost >= 0). */
static int groups_of(const ldt_plan *p, int64_t u, const double *f, group *g) {
    const ldt__sset *ss = p->node_ss[u];
    int n = 0;
    for (int s = 0; s < ss->n; s++) {
        int pl = LDT__SSET_PL(ss, s)[0], j;
        for (j = 0; j < n && g[j].pl != pl; j++) {}
        if (j == n) {
            g[n].pl = pl;
            g[n++].f = f[s];
        } else if (f[s] < g[j].f) {
            g[j].f = f[s];
        }
    }
    qsort(g, (size_t)n, sizeof *g, by_f);
    return n;
}

static ldt_status search_global(ldt_plan *p, int32_t *choice) {
    int64_t n = p->nnodes, total = 0, *off;
    double *f, *cost = NULL;
    char *dirty = NULL;
    eval_scratch e = {0};
    group *g = NULL;
    int gcap = 0;
    ldt_status st = LDT_OK;
    off = malloc((size_t)(n + 1) * sizeof *off);
    if (!off) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    for (int64_t v = 0; v < n; v++) {
        off[v] = total;
        total += p->node_ss[v]->n;
        if (p->node_ss[v]->n > gcap) gcap = p->node_ss[v]->n;
    }
    off[n] = total;
    f = malloc((size_t)(total ? total : 1) * sizeof *f);
    g = malloc((size_t)(gcap ? gcap : 1) * sizeof *g);
    cost = malloc((size_t)(gcap ? gcap : 1) * sizeof *cost);
    dirty = malloc((size_t)(n ? n : 1));
    if (!f || !g || !cost || !dirty || !scratch_fit(&e, p->nplists))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    /* forward: f[v][s] = sum over inputs of min over the producer's output groups of
     * (its best cost shared among its consumers + the move) */
    for (int64_t v = 0; v < n; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        const ldt__sset *ss = p->node_ss[v];
        for (int s = 0; s < ss->n; s++) f[off[v] + s] = ss->own ? ss->own[s] : 0;
        if (is_leaf(t)) continue;
        for (int k = 0; k < t->nin; k++) {
            int64_t u = LDT__IN(t)[k]->id;
            double share = 1.0 / (double)(p->use_off[u + 1] - p->use_off[u]);
            int ng = groups_of(p, u, f + off[u], g);
            e.now++;
            for (int s = 0; s < ss->n; s++) {
                int to = LDT__SSET_PL(ss, s)[1 + k];
                if (e.stamp[to] != e.now) { /* strategies repeat an input's placement list */
                    double best = INFINITY;
                    for (int j = 0; j < ng && g[j].f * share < best; j++) {
                        double c = g[j].f * share + move_cost(p, p->node_class[u], g[j].pl, to, t);
                        if (c < best) best = c;
                    }
                    e.stamp[to] = e.now;
                    e.val[to] = best;
                }
                f[off[v] + s] += e.val[to];
            }
        }
    }
    /* backward: sinks take their best; every other node its best given fixed consumers (the
     * forward costs already hold its own cost and its inputs') */
    for (int64_t v = n - 1; v >= 0; v--) {
        const ldt__sset *ss = p->node_ss[v];
        choice[v] = 0;
        eval_node(p, choice, v, 0, 1, &e, cost);
        for (int s = 0; s < ss->n; s++) cost[s] += f[off[v] + s] - (ss->own ? ss->own[s] : 0);
        choice[v] = argmin(cost, ss->n);
    }
    /* improvement passes: one node at a time, only strict gains (so it ends); after the first
     * pass only nodes next to a change are looked at again */
    for (int64_t v = 0; v < n; v++) dirty[v] = 1;
    for (int pass = 0; pass < 4; pass++) {
        int changed = 0;
        for (int64_t v = 0; v < n; v++) {
            const ldt__sset *ss = p->node_ss[v];
            int cur = choice[v], best;
            if (!dirty[v] || ss->n < 2) continue;
            dirty[v] = 0;
            eval_node(p, choice, v, 1, 1, &e, cost);
            best = argmin(cost, ss->n);
            if (best == cur || !(cost[best] < cost[cur] * (1 - 1e-12) - 1e-15)) continue;
            choice[v] = best;
            changed = 1;
            /* its producers and consumers may now prefer something else */
            if (!is_leaf(p->ctx->nodes[v]))
                for (int k = 0; k < p->ctx->nodes[v]->nin; k++) dirty[LDT__IN(p->ctx->nodes[v])[k]->id] = 1;
            for (int64_t j = p->use_off[v]; j < p->use_off[v + 1]; j++) dirty[p->use_node[j]] = 1;
        }
        if (!changed) break;
    }
fail:
    free(off);
    free(f);
    free(g);
    free(cost);
    free(dirty);
    free(e.val);
    free(e.stamp);
    return st;
}

/* The real cost of a choice: each distinct (producer, target placements) move once, priced
 * with the redistribution planner. */
static double price_of(ldt_plan *p, const int32_t *choice, int with_memory) {
    double c = 0;
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (is_leaf(t)) { /* the memory term (a weight of 0 makes none) */
            if (with_memory && p->node_ss[v]->own) c += p->node_ss[v]->own[choice[v]];
            continue;
        }
        if (p->node_ss[v]->own) c += p->node_ss[v]->own[choice[v]];
        for (int k = 0; k < t->nin; k++) {
            int64_t u = LDT__IN(t)[k]->id;
            int from = LDT__SSET_PL(p->node_ss[u], choice[u])[0];
            int to = LDT__SSET_PL(p->node_ss[v], choice[v])[1 + k];
            int dup = 0;
            /* an earlier consumer (or input slot) asking the same move shares it */
            for (int64_t j = p->use_off[u]; j < p->use_off[u + 1] && !dup; j++) {
                int32_t w = p->use_node[j];
                if (w > v || (w == v && p->use_slot[j] >= k)) continue;
                dup = LDT__SSET_PL(p->node_ss[w], choice[w])[1 + p->use_slot[j]] == to;
            }
            if (!dup) c += real_cost(p, p->node_class[u], from, to);
        }
    }
    return c;
}

/* The search's objective: seconds and, under a memory weight, the memory term. */
static double price(ldt_plan *p, const int32_t *choice) { return price_of(p, choice, 1); }

double ldt__plan_price(ldt_plan *p, const int32_t *choice) { return price(p, choice); }

/* ---------------------------------------------------------------------------------------
 * Create and destroy.
 */
static ldt_status build_uses(ldt_plan *p) {
    int64_t n = p->nnodes, e = 0;
    int64_t *fill;
    p->use_off = calloc((size_t)n + 1, sizeof *p->use_off);
    if (!p->use_off) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    for (int64_t v = 0; v < n; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (is_leaf(t)) continue;
        for (int k = 0; k < t->nin; k++) p->use_off[LDT__IN(t)[k]->id + 1]++;
        e += t->nin;
    }
    for (int64_t v = 0; v < n; v++) p->use_off[v + 1] += p->use_off[v];
    p->use_node = malloc((size_t)(e ? e : 1) * sizeof *p->use_node);
    p->use_slot = malloc((size_t)(e ? e : 1) * sizeof *p->use_slot);
    fill = malloc((size_t)(n ? n : 1) * sizeof *fill);
    if (!p->use_node || !p->use_slot || !fill) {
        free(fill);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    }
    memcpy(fill, p->use_off, (size_t)n * sizeof *fill);
    for (int64_t v = 0; v < n; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (is_leaf(t)) continue;
        for (int k = 0; k < t->nin; k++) {
            int64_t u = LDT__IN(t)[k]->id;
            p->use_node[fill[u]] = (int32_t)v;
            p->use_slot[fill[u]++] = (int8_t)(k < 127 ? k : 127);
        }
    }
    free(fill);
    return LDT_OK;
}

static void collect_iks(ldt_plan *p) {
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (!t->pin) continue;
        for (int d = 0; d < p->nd; d++) {
            int j;
            if (t->pin[d].kind != LDT_PLACE_INTERLEAVED_SHARD) continue;
            for (j = 0; j < p->niks && p->iks[j] != t->pin[d].blocks; j++) {}
            if (j == p->niks && p->niks < 8) p->iks[p->niks++] = t->pin[d].blocks;
        }
    }
}

void ldt_plan_destroy(ldt_plan *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->nssets; i++) {
        free(p->ssets[i]->key);
        free(p->ssets[i]->pl);
        free(p->ssets[i]->own);
        free(p->ssets[i]);
    }
    for (int64_t i = 0; i < p->memo_cap; i++) ldt_redist_plan_destroy(p->memo[i].plan);
    for (int32_t i = 0; i < p->class_memo_cap; i++) ldt__step_memo_destroy(p->class_memo[i]);
    free(p->class_memo);
    for (int i = 0; i < p->nprograms; i++) {
        if (p->programs[i]) ldt__program_free(p->programs[i]);
        free(p->programs[i]);
    }
    free(p->programs);
    free(p->cls_rank);
    free(p->cls_same);
    free(p->cls_arena);
    free(p->memo);
    free(p->ssets);
    free(p->sset_tab);
    free(p->plists);
    free(p->plist_tab);
    free(p->classes);
    free(p->class_tab);
    free(p->node_ss);
    free(p->choice);
    free(p->node_class);
    free(p->use_off);
    free(p->use_node);
    free(p->use_slot);
    free(p);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Strict mode: the first move the user did not ask for, as an error. */
static ldt_status strict_check(ldt_plan *p) {
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (is_leaf(t) || t->op == LDT_OP_REDISTRIBUTE) continue;
        for (int k = 0; k < t->nin; k++) {
            const ldt_tensor *u = LDT__IN(t)[k];
            char from[128], to[128], d[256];
            const char *name = LDT__NAME(u);
            if (!ldt__edge_moves(p, v, k)) continue;
            ldt_placements_format(ldt__plist(p, ldt__chosen_out(p, u->id)), p->nd, from, sizeof from);
            ldt_placements_format(ldt__plist(p, ldt__chosen_in(p, v, k)), p->nd, to, sizeof to);
            ldt__describe(u, d, sizeof d);
            LDT_FAIL(LDT_ERR_INVALID_USAGE,
                     "plan (strict): op %s (node %%%lld) needs input %d, tensor %%%lld%s%s%s %s, "
                     "redistributed %s -> %s; redistribute it explicitly with "
                     "ldt_redistribute_to, or change the pins",
                     ldt__op_name(p->ctx, t->op), (long long)v, k, (long long)u->id,
                     name ? " '" : "", name ? name : "", name ? "'" : "", d, from, to);
        }
    }
    return LDT_OK;
}

/* After a post-plan pass: the changed choices priced again (every move must have a
 * redistribution) and strict mode checked again. */
static ldt_status revalidate(ldt_plan *p) {
    p->cost_chosen = price(p, p->choice);
    if (!isfinite(p->cost_chosen))
        for (int64_t v = 0; v < p->nnodes; v++) {
            const ldt_tensor *t = p->ctx->nodes[v];
            if (is_leaf(t)) continue;
            for (int k = 0; k < t->nin; k++) {
                int64_t u = LDT__IN(t)[k]->id;
                char from[128], to[128];
                if (isfinite(real_cost(p, p->node_class[u], ldt__chosen_out(p, u), ldt__chosen_in(p, v, k))))
                    continue;
                ldt_placements_format(ldt__plist(p, ldt__chosen_out(p, u)), p->nd, from, sizeof from);
                ldt_placements_format(ldt__plist(p, ldt__chosen_in(p, v, k)), p->nd, to, sizeof to);
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "op %s (node %%%lld) needs input %d as %s, but its producer (node %%%lld) "
                         "gives %s and no redistribution makes one from the other",
                         ldt__op_name(p->ctx, t->op), (long long)v, k, to, (long long)u, from);
            }
        }
    if (p->opts.strict) LDT_CHECK(strict_check(p));
    return LDT_OK;
}

/* The heuristic's forced path: the forced nodes fixed, the rest greedy around them (the
 * internal probe's behaviour tests rely on), into p->choice. */
static void forced_greedy(ldt_plan *p, const int32_t *forced) {
    ldt_ctx *ctx = p->ctx;
    for (int64_t v = 0; v < p->nnodes; v++) {
        double best = INFINITY;
        p->choice[v] = 0;
        if (forced[v] >= 0 && forced[v] < p->node_ss[v]->n) { /* a bypass has one */
            p->choice[v] = forced[v];
            continue;
        }
        if (is_leaf(ctx->nodes[v])) continue;
        for (int s = 0; s < p->node_ss[v]->n; s++) {
            double c = in_cost(p, p->choice, v, s);
            if (c < best) {
                best = c;
                p->choice[v] = s;
            }
        }
    }
    /* leaves take what their first consumer asks, so a forced strategy is seen whole */
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = ctx->nodes[v];
        if (!is_leaf(t) || t->pin || forced[v] >= 0 || p->use_off[v] == p->use_off[v + 1]) continue;
        {
            int32_t w = p->use_node[p->use_off[v]];
            int to = ldt__chosen_in(p, w, p->use_slot[p->use_off[v]]);
            for (int s = 0; s < p->node_ss[v]->n; s++)
                if (LDT__SSET_PL(p->node_ss[v], s)[0] == to) p->choice[v] = s;
        }
    }
}

/* forced: the internal probe (forced nodes, greedy around them); fixed: the public one
 * (fixed nodes, the exact search around them). */
static ldt_status plan_create(ldt_ctx *ctx, const ldt_plan_options *opts, const int32_t *forced,
                              const int32_t *fixed, ldt_plan **out) {
    ldt_plan *p;
    ldt_status st = LDT_OK;
    skey key = {0};
    int32_t *greedy = NULL, *alt = NULL;
    double t0 = now_s();
    if (!ctx || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan: ctx and out must not be NULL");
    *out = NULL;
    if (ctx->status != LDT_OK)
        LDT_FAIL(ctx->status, "plan: the trace holds an error: %s", ctx->errmsg);
    LDT_CHECK(ldt__passes_run(ctx, LDT_PASS_PRE_PLAN, NULL, NULL)); /* they may pin: first */
    if (!(p = calloc(1, sizeof *p))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    p->ctx = ctx;
    p->mesh = ctx->mesh;
    p->nd = ldt_mesh_ndim(ctx->mesh);
    p->gen = ctx->gen;
    p->nnodes = ctx->nnodes;
    if (opts) p->opts = *opts;
    if (p->opts.cost) {
        LDT_CHECK_GOTO(ldt_cost_model_check(p->opts.cost));
        p->cost = *p->opts.cost;
    } else {
        LDT_CHECK_GOTO(ldt_cost_model_default(NULL, ctx->mesh, &p->cost, NULL));
    }
    p->opts.cost = NULL; /* not kept: the copy is */
    if (!(p->opts.memory_weight >= 0) || !isfinite(p->opts.memory_weight))
        LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                      "plan: memory_weight %g, expected a finite number of seconds per byte >= 0 (0: off)",
                      p->opts.memory_weight);
    p->compute = !p->opts.no_compute_cost;
    p->node_ss = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->node_ss);
    p->choice = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->choice);
    p->node_class = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->node_class);
    greedy = calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *greedy);
    if (!p->node_ss || !p->choice || !p->node_class || !greedy)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for %lld nodes", (long long)p->nnodes);
    LDT_CHECK_GOTO(build_uses(p));
    collect_iks(p);
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = ctx->nodes[v];
        LDT_CHECK_GOTO(node_sset(p, t, &key, &p->node_ss[v]));
        if ((p->node_class[v] = class_id(p, t->shape, (ldt_dtype)t->dtype)) < 0)
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        if (p->node_ss[v]->n > p->max_strategies) p->max_strategies = p->node_ss[v]->n;
        if (forced && forced[v] >= p->node_ss[v]->n)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "plan: node %%%lld has %d strategies, %d forced",
                          (long long)v, p->node_ss[v]->n, forced[v]);
        if (fixed && (fixed[v] < -1 || fixed[v] >= p->node_ss[v]->n))
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "plan fixed: node %lld has strategies 0..%d, fixed[%lld] is %d (expected "
                          "one of them, or -1 to let the search choose)",
                          (long long)v, p->node_ss[v]->n - 1, (long long)v, (int)fixed[v]);
    }
    LDT_CHECK_GOTO(ldt__bypass_apply(p));
    LDT_CHECK_GOTO(search_greedy(p, greedy));
    p->cost_greedy = price(p, greedy);
    {
        int64_t limit = p->opts.plan_limit == 0 ? LDT_PLAN_LIMIT_DEFAULT : p->opts.plan_limit, elim, hold;
        int solved = 0, tied = 0;
        double alt_cost = INFINITY;
        p->method = "heuristic";
        /* the exact search (limit 0 only computes the lower bound) */
        if (forced || (p->opts.search == LDT_PLAN_GREEDY && !fixed) || limit < 0) limit = 0;
        /* the default lets the elimination itself run where its dry count is within
         * PLAN_EXACT_SCALE times the limit, holding PLAN_HOLD_SCALE times it in table entries;
         * an explicit limit bounds it as it bounds the rest */
        elim = limit;
        hold = limit;
        if (p->opts.plan_limit == 0 && limit > 0) {
            elim = LDT_PLAN_LIMIT_DEFAULT * PLAN_EXACT_SCALE;
            hold = LDT_PLAN_LIMIT_DEFAULT * PLAN_HOLD_SCALE;
        }
        if (!(alt = malloc((size_t)(p->nnodes ? p->nnodes : 1) * sizeof *alt)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for %lld nodes", (long long)p->nnodes);
        LDT_CHECK_GOTO(ldt__search_exact(p, forced ? forced : fixed,
                                         p->opts.plan_limit == 0 ? limit * PLAN_RELAX_SCALE : limit,
                                         p->opts.plan_limit == 0 ? PLAN_RELAX_NODE_WORK * p->nnodes : 0, elim,
                                         hold, !p->opts.no_tying,
                                         p->choice, &p->bound, &solved, &tied, alt, &alt_cost));
        if (solved) {
            p->method = "exact";
            p->tied = tied;
            p->cost_global = price(p, p->choice);
        } else if (p->opts.search == LDT_PLAN_GREEDY && !forced && !fixed) {
            memcpy(p->choice, greedy, (size_t)p->nnodes * sizeof *greedy);
            p->cost_global = p->cost_greedy;
        } else if (forced || fixed) {
            forced_greedy(p, forced ? forced : fixed);
            p->cost_global = price(p, p->choice);
        } else {
            LDT_CHECK_GOTO(search_global(p, p->choice));
            p->cost_global = price(p, p->choice);
            if (p->cost_greedy < p->cost_global) {
                memcpy(p->choice, greedy, (size_t)p->nnodes * sizeof *greedy);
            }
        }
        /* where the relaxation ran: the plan taken, repaired as its plan was (the price only
         * falls), or the relaxation's plan where that is cheaper */
        if (!solved && !forced && isfinite(alt_cost) && (fixed || p->opts.search != LDT_PLAN_GREEDY)) {
            if (!p->opts.strict && !ldt__plan_repair(p, fixed, p->choice))
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory for %lld nodes", (long long)p->nnodes);
            if (alt_cost < price(p, p->choice)) memcpy(p->choice, alt, (size_t)p->nnodes * sizeof *alt);
            p->cost_global = price(p, p->choice);
        }
        /* past the elimination's limit, a small graph gets the branch and bound, seeded with
         * the heuristic's plan (a twentieth of the limit in nodes visited) */
        if (!solved && !forced && limit > 0 && p->nnodes <= BNB_MAX_NODES &&
            (fixed || p->opts.search != LDT_PLAN_GREEDY)) {
            double c = price(p, p->choice);
            if (isfinite(c)) {
                LDT_CHECK_GOTO(ldt__search_bnb(p, fixed, limit / 20 + 1, c * (1 + 1e-9) + 1e-300,
                                               greedy, &solved));
                if (solved) {
                    memcpy(p->choice, greedy, (size_t)p->nnodes * sizeof *greedy);
                    p->method = "exact";
                    p->cost_global = price(p, p->choice);
                    p->bound = p->cost_global;
                }
            }
        }
    }
    p->cost_chosen = price(p, p->choice);
    if (!isfinite(p->cost_chosen)) {
        LDT_CHECK_GOTO(revalidate(p)); /* names the move that has no redistribution */
        LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "plan: no finite-cost plan (a move has no redistribution)");
    }
    LDT_CHECK_GOTO(ldt__passes_run(ctx, LDT_PASS_POST_PLAN, p, revalidate));
    if (p->opts.strict) LDT_CHECK_GOTO(strict_check(p));
    /* the proven gap (float noise in the sums is no gap) */
    p->gap = 0;
    if (p->cost_chosen > 0 && p->cost_chosen - p->bound > 1e-12 * p->cost_chosen)
        p->gap = (p->cost_chosen - p->bound) / p->cost_chosen;
    if (p->gap > 1) p->gap = 1;
    /* the reported costs are seconds: the memory term was the search's only */
    if (p->opts.memory_weight > 0) {
        p->cost_chosen = price_of(p, p->choice, 0);
        p->cost_greedy = price_of(p, greedy, 0);
    }
    p->plan_seconds = now_s() - t0;
    *out = p;
    p = NULL;
fail:
    free(key.buf);
    free(greedy);
    free(alt);
    ldt_plan_destroy(p);
    return st;
}

ldt_status ldt_plan_create(ldt_ctx *ctx, const ldt_plan_options *opts, ldt_plan **out) {
    return plan_create(ctx, opts, NULL, NULL, out);
}

ldt_status ldt_plan_create_fixed(ldt_ctx *ctx, const ldt_plan_options *opts, const int32_t *fixed,
                                 int64_t n, ldt_plan **out) {
    if (!ctx || !fixed || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan fixed: ctx, fixed and out must not be NULL");
    if (n != ctx->nnodes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan fixed: %lld choices given, expected one per node of the trace (%lld)",
                 (long long)n, (long long)ctx->nnodes);
    return plan_create(ctx, opts, NULL, fixed, out);
}

ldt_status ldt__plan_create_forced(ldt_ctx *ctx, const ldt_plan_options *opts,
                                   const int32_t *forced, ldt_plan **out) {
    return plan_create(ctx, opts, forced, NULL, out);
}

/* One plan of the budget search: made with memory weight w, its peak measured. */
static ldt_status budget_try(ldt_ctx *ctx, const ldt_plan_options *opts, const ldt_plan_budget *b,
                             double w, ldt_plan **plan, int64_t *peak) {
    ldt_plan_options o = *opts;
    ldt_status st;
    o.memory_weight = w;
    *plan = NULL;
    LDT_CHECK(plan_create(ctx, &o, NULL, NULL, plan));
    if ((st = b->peak(*plan, b->user, peak)) != LDT_OK) {
        ldt_plan_destroy(*plan);
        *plan = NULL;
        return st;
    }
    if (*peak < 0) {
        ldt_plan_destroy(*plan);
        *plan = NULL;
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan budget: the peak function gave %lld bytes, expected >= 0",
                 (long long)*peak);
    }
    return LDT_OK;
}

ldt_status ldt_plan_create_budget(ldt_ctx *ctx, const ldt_plan_options *opts, const ldt_plan_budget *b,
                                  ldt_plan **out, ldt_plan_budget_info *info) {
    ldt_plan_options o0;
    ldt_plan *best = NULL, *least = NULL, *pl = NULL; /* the cheapest that fits; the least peak */
    int64_t peak = 0, least_peak = 0, best_peak = 0;
    double lo = 0, hi, w, best_w = 0, least_w = 0, scale;
    int max, made = 0;
    ldt_status st = LDT_OK;
    double t0 = now_s();
    if (!ctx || !b || !out || !info)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan budget: ctx, budget, out and info must not be NULL");
    *out = NULL;
    memset(info, 0, sizeof *info);
    if (b->budget <= 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan budget: budget %lld bytes, expected > 0",
                 (long long)b->budget);
    if (!b->peak)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan budget: no peak function, expected the figure the "
                 "budget bounds (bytes per rank of a plan)");
    max = b->max_plans ? b->max_plans : LDT_PLAN_BUDGET_PLANS;
    if (max < 2 || max > 64)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan budget: max_plans %d, expected 2 to 64 (0: %d)",
                 b->max_plans, LDT_PLAN_BUDGET_PLANS);
    if (opts) o0 = *opts;
    else memset(&o0, 0, sizeof o0);
    /* without a weight first: a budget that does not bind changes nothing */
    LDT_CHECK(budget_try(ctx, &o0, b, 0, &least, &least_peak));
    made = 1;
    info->peak_free = least_peak;
    info->cost_free = ldt_plan_cost(least);
    if (least_peak <= b->budget) {
        best = least, best_peak = least_peak;
        least = NULL;
        goto done;
    }
    /* the scale: the weight at which the whole peak costs as much as the plan's seconds */
    scale = info->cost_free > 0 ? info->cost_free / (double)least_peak : 1e-12;
    hi = scale;
    while (made < max) {
        /* up by 16 until a plan fits, then bisect [lo, hi] in log scale (lo 0: hi / 16) */
        w = best ? (lo > 0 ? sqrt(lo * hi) : hi / 16) : hi;
        LDT_CHECK_GOTO(budget_try(ctx, &o0, b, w, &pl, &peak));
        made++;
        if (peak <= b->budget) {
            if (!best || ldt_plan_cost(pl) < ldt_plan_cost(best)) {
                ldt_plan_destroy(best);
                best = pl, best_peak = peak, best_w = w;
                pl = NULL;
            }
            hi = w;
        } else {
            if (peak < least_peak) {
                ldt_plan_destroy(least);
                least = pl, least_peak = peak, least_w = w;
                pl = NULL;
            }
            lo = w;
            if (!best) hi = w * 16;
        }
        ldt_plan_destroy(pl);
        pl = NULL;
        /* past 16^5 times the scale a byte outweighs the step a million times: higher weights
         * plan alike, so a budget nothing fits ends here */
        if (!best && hi > scale * 1048576 * 1.5) break;
    }
done:
    info->plans = made;
    info->seconds = now_s() - t0;
    if (best) {
        info->fits = 1;
        info->memory_weight = best_w;
        info->peak = best_peak;
        *out = best;
        best = NULL;
    } else {
        info->memory_weight = least_w;
        info->peak = least_peak;
        *out = least;
        least = NULL;
    }
fail:
    ldt_plan_destroy(pl);
    ldt_plan_destroy(best);
    ldt_plan_destroy(least);
    return st;
}

int ldt__plan_nstrategies(const ldt_plan *plan, int64_t id) {
    return plan && id >= 0 && id < plan->nnodes ? plan->node_ss[id]->n : 0;
}

ldt_ctx *ldt__plan_ctx(const ldt_plan *plan) { return plan->ctx; }
const ldt_mesh *ldt__plan_mesh(const ldt_plan *plan) { return plan->mesh; }

const ldt_placement *ldt__plan_out(const ldt_plan *plan, int64_t id) {
    return ldt__plist(plan, ldt__chosen_out(plan, id));
}

double ldt_plan_cost(const ldt_plan *p) { return p ? p->cost_chosen : 0; }
double ldt_plan_greedy_cost(const ldt_plan *p) { return p ? p->cost_greedy : 0; }
double ldt_plan_seconds(const ldt_plan *p) { return p ? p->plan_seconds : 0; }

ldt_status ldt_plan_placements(const ldt_plan *p, const ldt_tensor *t, ldt_placement *out,
                               int cap) {
    if (!p || !t || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan placements: NULL argument");
    if (t->ctx != p->ctx || t->gen != p->gen || p->ctx->gen != p->gen ||
        t->id < 0 || t->id >= p->nnodes || p->ctx->nodes[t->id] != t)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "plan placements: the tensor is not in the planned trace");
    if (cap < p->nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan placements: room for %d placements, the mesh has %d dims",
                 cap, p->nd);
    memcpy(out, ldt__plan_out(p, t->id), (size_t)p->nd * sizeof *out);
    return LDT_OK;
}
