/* User graph passes (pre- and post-plan) and bypass marks: their registration on the context,
 * the runs planner/plan.c makes at every plan, and the post-plan view and edits of a plan.
 * The list hangs off the context as an opaque pointer (trace never calls down); bypass marks
 * are (trace generation, node id, placements), so they expire with their trace by themselves. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/error.h"
#include "planner/passes.h"

typedef struct pass {
    ldt_pass_stage stage;
    char name[64];
    ldt_pass_fn fn;
    void *user;
} pass;

typedef struct mark {
    int64_t id;
    ldt_placement pl[LDT_MAX_DIMS];
} mark;

typedef struct passes {
    pass *v;
    int n, cap;
    uint32_t gen; /* the trace the marks belong to */
    mark *marks;
    int64_t nmarks, cap_marks;
    /* while a pass runs: its stage, and for post-plan passes the plan it may change */
    int running;
    ldt_pass_stage stage;
    ldt_plan *plan;
    /* a change the running pass made that was refused sticks here, so a pass that ignores
     * the returned status still fails the plan */
    ldt_status edit_status;
    char edit_msg[1024];
} passes;

static const char *stage_name(ldt_pass_stage s) { return s == LDT_PASS_PRE_PLAN ? "pre-plan" : "post-plan"; }

static void passes_free(void *v) {
    passes *s = v;
    if (!s) return;
    free(s->v);
    free(s->marks);
    free(s);
}

/* ctx's list, made when make is set; NULL when there is none (or out of memory). */
static passes *state(ldt_ctx *ctx, int make) {
    if (!ctx->passes && make) {
        ctx->passes = calloc(1, sizeof(passes));
        if (ctx->passes) ctx->passes_free = passes_free;
    }
    return ctx->passes;
}

/* The current trace's marks (older ones are dropped on first look). */
static passes *marks_of(ldt_ctx *ctx, int make) {
    passes *s = state(ctx, make);
    if (s && s->gen != ctx->gen) {
        s->gen = ctx->gen;
        s->nmarks = 0;
    }
    return s;
}

static const mark *mark_of(ldt_ctx *ctx, int64_t id) {
    passes *s = marks_of(ctx, 0);
    for (int64_t i = 0; s && i < s->nmarks; i++)
        if (s->marks[i].id == id) return &s->marks[i];
    return NULL;
}

ldt_status ldt_pass_register(ldt_ctx *ctx, ldt_pass_stage stage, const char *name, ldt_pass_fn fn,
                             void *user) {
    passes *s;
    size_t len;
    if (!ctx || !name || !fn)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pass_register: ctx, name and fn must not be NULL");
    len = strlen(name);
    if ((int)stage < 0 || stage >= LDT_PASS_STAGE_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "pass_register '%s': stage %d, expected LDT_PASS_PRE_PLAN (0) or LDT_PASS_POST_PLAN (1)",
                 name, (int)stage);
    if (len == 0 || len >= sizeof ((pass *)0)->name)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pass_register: name '%s' has %zu characters, expected 1 to 63",
                 name, len);
    s = state(ctx, 1);
    if (!s) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "pass_register: out of memory");
    if (s->running)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "pass_register '%s': called while a pass runs; register passes "
                 "before planning", name);
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->v[i].name, name) == 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pass_register: a pass named '%s' is registered already", name);
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        pass *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "pass_register: out of memory");
        s->v = v;
        s->cap = cap;
    }
    memset(&s->v[s->n], 0, sizeof s->v[0]);
    s->v[s->n].stage = stage;
    memcpy(s->v[s->n].name, name, len + 1);
    s->v[s->n].fn = fn;
    s->v[s->n].user = user;
    s->n++;
    return LDT_OK;
}

int ldt_pass_count(const ldt_ctx *ctx) {
    return ctx && ctx->passes ? ((const passes *)ctx->passes)->n : 0;
}

ldt_status ldt_bypass(ldt_tensor *t, const ldt_placement *out, int n) {
    ldt_ctx *ctx;
    passes *s;
    ldt_spec spec;
    mark *m = NULL;
    char d[256];
    int nd;
    if (!t || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bypass: tensor and placements must not be NULL");
    ctx = t->ctx;
    nd = ldt_mesh_ndim(ctx->mesh);
    ldt__describe(t, d, sizeof d);
    if (t->kind == LDT__PERSISTENT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bypass: %s '%s' %s is a persistent tensor, not an op result; "
                 "fix its placements with ldt_pin", ldt__op_name(ctx, t->op), LDT__NAME(t) ? LDT__NAME(t) : "", d);
    if (ldt_tensor_node(t) < 0)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "bypass: %s %s is from a trace that has ended",
                 ldt__op_name(ctx, t->op), d);
    if (n != nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bypass: %s (node %%%d) %s: %d placements given, the mesh has %d dims",
                 ldt__op_name(ctx, t->op), t->id, d, n, nd);
    /* normalised (negative dims resolved) and checked against the shape through the spec */
    if (ldt_spec_init(&spec, ctx->mesh, t->shape, out, n, (ldt_dtype)t->dtype) != LDT_OK)
        return ldt__trace(ldt__error_prefix(LDT_ERR_INVALID_ARGUMENT, "bypass: %s (node %%%d)",
                                            ldt__op_name(ctx, t->op), t->id),
                          __FILE__, __LINE__);
    if (!(s = marks_of(ctx, 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "bypass: out of memory");
    for (int64_t i = 0; i < s->nmarks && !m; i++)
        if (s->marks[i].id == t->id) m = &s->marks[i]; /* a second mark replaces the first */
    if (!m) {
        if (s->nmarks == s->cap_marks) {
            int64_t cap = s->cap_marks ? 2 * s->cap_marks : 16;
            mark *v = realloc(s->marks, (size_t)cap * sizeof *v);
            if (!v) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "bypass: out of memory");
            s->marks = v;
            s->cap_marks = cap;
        }
        m = &s->marks[s->nmarks++];
        memset(m, 0, sizeof *m);
        m->id = t->id;
    }
    memcpy(m->pl, spec.placements, (size_t)nd * sizeof *m->pl);
    return LDT_OK;
}

/* Placements as integers (the struct has padding): for hashing. */
static void pl_words(const ldt_placement *pl, int nd, int64_t *k) {
    for (int i = 0; i < nd; i++) {
        k[4 * i] = pl[i].kind;
        k[4 * i + 1] = pl[i].kind == LDT_PLACE_REPLICATE ? 0 : pl[i].dim;
        k[4 * i + 2] = pl[i].kind == LDT_PLACE_INTERLEAVED_SHARD ? pl[i].blocks : 0;
        k[4 * i + 3] = pl[i].kind == LDT_PLACE_PARTIAL ? pl[i].op : 0;
    }
}

uint64_t ldt_passes_hash(const ldt_ctx *ctx) {
    const passes *s = ctx ? ctx->passes : NULL;
    uint64_t h = 0;
    int nd;
    if (!s) return 0;
    nd = ldt_mesh_ndim(ctx->mesh);
    for (int i = 0; i < s->n; i++) {
        int64_t st = s->v[i].stage;
        h = XXH3_64bits_withSeed(&st, sizeof st, h);
        h = XXH3_64bits_withSeed(s->v[i].name, strlen(s->v[i].name), h);
        h = XXH3_64bits_withSeed(&s->v[i].fn, sizeof s->v[i].fn, h);
        h = XXH3_64bits_withSeed(&s->v[i].user, sizeof s->v[i].user, h);
    }
    if (s->gen == ctx->gen)
        for (int64_t i = 0; i < s->nmarks; i++) {
            int64_t k[1 + 4 * LDT_MAX_DIMS];
            k[0] = s->marks[i].id;
            pl_words(s->marks[i].pl, nd, k + 1);
            h = XXH3_64bits_withSeed(k, (size_t)(1 + 4 * nd) * sizeof k[0], h);
        }
    return h;
}

/* ---------------------------------------------------------------------------------------
 * Runs.
 */
ldt_status ldt__passes_run(ldt_ctx *ctx, ldt_pass_stage stage, ldt_plan *plan,
                           ldt_status (*check)(ldt_plan *plan)) {
    passes *s = ctx->passes;
    for (int i = 0; s && i < s->n; i++) {
        const pass *ps = &s->v[i];
        int64_t nodes = ctx->nnodes;
        ldt_status rc;
        char msg[1024];
        if (ps->stage != stage) continue;
        s->running = 1;
        s->stage = stage;
        s->plan = plan;
        s->edit_status = LDT_OK;
        ldt_clear_error();
        rc = ps->fn(ctx, plan, ps->user);
        s->running = 0;
        s->plan = NULL;
        if (rc != LDT_OK) {
            snprintf(msg, sizeof msg, "%s", ldt_last_error()[0] ? ldt_last_error() : ldt_status_name(rc));
            LDT_FAIL(rc < 0 ? rc : LDT_ERR_INVALID_USAGE, "pass '%s' (%s) failed: %s", ps->name,
                     stage_name(stage), msg);
        }
        if (s->edit_status != LDT_OK)
            LDT_FAIL(s->edit_status, "pass '%s' (%s): %s", ps->name, stage_name(stage), s->edit_msg);
        if (ctx->nnodes != nodes)
            LDT_FAIL(LDT_ERR_INVALID_USAGE,
                     "pass '%s' (%s) recorded %lld nodes; a pass may pin and bypass nodes and "
                     "change the plan's choices, not record ops", ps->name, stage_name(stage),
                     (long long)(ctx->nnodes - nodes));
        if (ctx->status != LDT_OK) /* e.g. a pin that did not fit: it stuck on the trace */
            LDT_FAIL(ctx->status, "pass '%s' (%s): %s", ps->name, stage_name(stage), ctx->errmsg);
        if (check && (rc = check(plan)) != LDT_OK)
            return ldt__trace(ldt__error_prefix(rc, "pass '%s' (%s)", ps->name, stage_name(stage)),
                              __FILE__, __LINE__);
    }
    return LDT_OK;
}

/* "R, S0, S1" (at most 8) for messages: the distinct outputs node v's strategies give. */
static void outputs_text(const ldt_plan *p, int64_t v, char *buf, size_t cap) {
    const ldt__sset *ss = p->node_ss[v];
    int seen[8], ns = 0;
    size_t len = 0;
    buf[0] = '\0';
    for (int s = 0; s < ss->n && len + 1 < cap; s++) {
        int pl = LDT__SSET_PL(ss, s)[0], j;
        char t[128];
        for (j = 0; j < ns && seen[j] != pl; j++) {}
        if (j < ns) continue;
        if (ns == 8) {
            snprintf(buf + len, cap - len, ", ...");
            return;
        }
        seen[ns++] = pl;
        ldt_placements_format(ldt__plist(p, pl), p->nd, t, sizeof t);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", ns > 1 ? ", " : "", t);
    }
}

static int plist_is(const ldt_plan *p, int id, const ldt_placement *pl) {
    const ldt_placement *a = ldt__plist(p, id);
    for (int d = 0; d < p->nd; d++)
        if (!ldt_placement_equal(&a[d], &pl[d])) return 0;
    return 1;
}

ldt_status ldt__bypass_apply(ldt_plan *p) {
    passes *s = p->ctx->passes;
    if (!s || s->gen != p->gen) return LDT_OK;
    for (int64_t i = 0; i < s->nmarks; i++) {
        int64_t v = s->marks[i].id;
        const ldt__sset *ss;
        ldt__sset *one;
        int found = -1;
        if (v < 0 || v >= p->nnodes) continue;
        ss = p->node_ss[v];
        for (int k = 0; k < ss->n && found < 0; k++)
            if (plist_is(p, LDT__SSET_PL(ss, k)[0], s->marks[i].pl)) found = k;
        if (found < 0) {
            char want[128], have[512], d[256];
            const ldt_tensor *t = p->ctx->nodes[v];
            ldt_placements_format(s->marks[i].pl, p->nd, want, sizeof want);
            outputs_text(p, v, have, sizeof have);
            ldt__describe(t, d, sizeof d);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "plan: bypass of node %%%lld (%s %s) fixes its output to %s, but no strategy of "
                     "the op gives that output (its strategies give: %s)",
                     (long long)v, ldt__op_name(p->ctx, t->op), d, want, have);
        }
        /* a set of that one strategy, owned by the plan like the interned ones but never found
         * by a lookup (a 1-byte key: real keys are whole 8-byte words) */
        if (p->nssets == p->cap_ssets) {
            int32_t cap = p->cap_ssets ? 2 * p->cap_ssets : 16;
            ldt__sset **nv = realloc(p->ssets, (size_t)cap * sizeof *nv);
            if (!nv) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            p->ssets = nv;
            p->cap_ssets = cap;
        }
        if (!(one = calloc(1, sizeof *one))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        p->ssets[p->nssets++] = one;
        one->nin = ss->nin;
        one->n = 1;
        one->keylen = 1;
        one->key = calloc(1, 1);
        one->pl = malloc((size_t)(1 + ss->nin) * sizeof *one->pl);
        if (ss->own) one->own = malloc(sizeof *one->own);
        if (!one->key || !one->pl || (ss->own && !one->own))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        memcpy(one->pl, LDT__SSET_PL(ss, found), (size_t)(1 + ss->nin) * sizeof *one->pl);
        if (ss->own) one->own[0] = ss->own[found];
        p->node_ss[v] = one;
    }
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * The post-plan view and edits.
 */
/* Node id of t in plan p, or a negative status with the message set. */
static ldt_status node_in_plan(const ldt_plan *p, const ldt_tensor *t, const char *what, int64_t *v) {
    if (t->ctx != p->ctx)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: the tensor belongs to another context than the plan", what);
    if (t->gen != p->gen || p->ctx->gen != p->gen || t->id < 0 || t->id >= p->nnodes ||
        p->ctx->nodes[t->id] != t)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "%s: the tensor is not in the planned trace", what);
    *v = t->id;
    return LDT_OK;
}

ldt_status ldt_plan_input_placements(const ldt_plan *p, const ldt_tensor *t, int k,
                                     ldt_placement *out, int cap) {
    int64_t v;
    if (!p || !t || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan input placements: NULL argument");
    LDT_CHECK(node_in_plan(p, t, "plan input placements", &v));
    if (k < 0 || k >= ldt_tensor_ninputs(t))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan input placements: %s (node %%%lld) has %d inputs, asked for input %d",
                 ldt__op_name(p->ctx, t->op), (long long)v, ldt_tensor_ninputs(t), k);
    if (cap < p->nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan input placements: room for %d placements, the mesh has %d dims",
                 cap, p->nd);
    memcpy(out, ldt__plist(p, ldt__chosen_in(p, v, k)), (size_t)p->nd * sizeof *out);
    return LDT_OK;
}

/* Records a refused change on the running pass and returns it (the message is set). */
static ldt_status refuse(passes *s, ldt_status st) {
    if (s && s->edit_status == LDT_OK) {
        s->edit_status = st;
        snprintf(s->edit_msg, sizeof s->edit_msg, "%s", ldt_last_error());
    }
    return st;
}

/* Normalises pl (n placements) against tensor u's shape into dst; a message on failure. */
static ldt_status normalise(const ldt_plan *p, const ldt_tensor *u, const ldt_placement *pl,
                            ldt_placement *dst) {
    ldt_spec spec;
    LDT_CHECK(ldt_spec_init(&spec, p->mesh, u->shape, pl, p->nd, (ldt_dtype)u->dtype));
    memcpy(dst, spec.placements, (size_t)p->nd * sizeof *dst);
    return LDT_OK;
}

ldt_status ldt_plan_set_placements(ldt_plan *p, ldt_tensor *t, const ldt_placement *out,
                                   const ldt_placement *in, int n) {
    passes *s;
    int64_t v;
    int nin, best = -1, best_moves = 0;
    const ldt__sset *ss;
    ldt_placement want[1 + LDT__SMAX_IN][LDT_MAX_DIMS];
    char d[256], ws[128], have[512];
    ldt_status st;
    if (!p || !t || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan set placements: NULL argument");
    s = p->ctx->passes;
    if (!s || !s->running || s->stage != LDT_PASS_POST_PLAN || s->plan != p)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "plan set placements: only a post-plan pass (ldt_pass_register) "
                 "may change a plan, which is validated again when the pass returns");
    if ((st = node_in_plan(p, t, "plan set placements", &v)) != LDT_OK) return refuse(s, st);
    ldt__describe(t, d, sizeof d);
    nin = p->node_ss[v]->nin;
    if (n != p->nd) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "plan set placements: %s (node %%%lld) %s: %d placements given, "
                   "the mesh has %d dims", ldt__op_name(p->ctx, t->op), (long long)v, d, n, p->nd);
        return refuse(s, LDT_ERR_INVALID_ARGUMENT);
    }
    if (in && nin > LDT__SMAX_IN) {
        ldt__error(LDT_ERR_UNSUPPORTED, "plan set placements: %s (node %%%lld) has %d inputs; input "
                   "placements can be given for at most %d", ldt__op_name(p->ctx, t->op), (long long)v,
                   nin, LDT__SMAX_IN);
        return refuse(s, LDT_ERR_UNSUPPORTED);
    }
    if ((st = normalise(p, t, out, want[0])) != LDT_OK) {
        ldt__error_prefix(st, "plan set placements: output of %s (node %%%lld)", ldt__op_name(p->ctx, t->op),
                          (long long)v);
        return refuse(s, st);
    }
    for (int k = 0; in && k < nin; k++)
        if ((st = normalise(p, LDT__IN(t)[k], in + (size_t)k * (size_t)n, want[1 + k])) != LDT_OK) {
            ldt__error_prefix(st, "plan set placements: input %d of %s (node %%%lld)", k,
                              ldt__op_name(p->ctx, t->op), (long long)v);
            return refuse(s, st);
        }
    ss = p->node_ss[v];
    for (int c = 0; c < ss->n; c++) {
        const uint16_t *pl = LDT__SSET_PL(ss, c);
        int ok = plist_is(p, pl[0], want[0]), moves = 0;
        for (int k = 0; ok && in && k < nin; k++) ok = plist_is(p, pl[1 + k], want[1 + k]);
        if (!ok) continue;
        for (int k = 0; k < nin; k++) moves += ldt__chosen_out(p, LDT__IN(t)[k]->id) != pl[1 + k];
        /* the current choice when it fits (no change), else the fewest moves, lower index */
        if (c == p->choice[v]) moves = -1;
        if (best < 0 || moves < best_moves) {
            best = c;
            best_moves = moves;
        }
    }
    if (best >= 0) {
        p->choice[v] = best;
        p->have_totals = 0; /* figures taken before the change are stale */
        return LDT_OK;
    }
    ldt_placements_format(want[0], p->nd, ws, sizeof ws);
    outputs_text(p, v, have, sizeof have);
    ldt__error(LDT_ERR_INVALID_ARGUMENT,
               "node %%%lld (%s %s): no strategy of the op gives output %s%s (its strategies give: "
               "%s)%s", (long long)v, ldt__op_name(p->ctx, t->op), d, ws,
               in ? " from the given inputs" : "", have,
               mark_of(p->ctx, v) ? "; the node is bypassed (ldt_bypass), its strategy fixed" : "");
    return refuse(s, LDT_ERR_INVALID_ARGUMENT);
}
