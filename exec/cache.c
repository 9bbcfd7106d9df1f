/* The plan cache: compiled executables of a context, keyed by what decides the result — the
 * trace's structural hash, the mesh, the cost model, the options, the persistent tensors the
 * graph reads (an executable binds to them) and the outputs. A hit discards the new trace and
 * returns the executable; any difference in the key compiles anew. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"
#include "planner/fuse.h"
#include "trace/pipeline.h"

/* An eager step's strategies: the choice its search made, by the key of the trace it planned. */
typedef struct choice_entry {
    unsigned char *key;
    size_t keylen;
    uint64_t hash;
    int64_t n;
    int32_t *choice;
} choice_entry;

#define CHOICE_ENTRIES 16 /* the traces an eager loop alternates between, at most */

typedef struct exec_cache {
    ldt_exec *head;
    int64_t hits, misses;
    choice_entry choices[CHOICE_ENTRIES]; /* the most recent first */
    int nchoices;
    int64_t plan_hits, plan_misses;
} exec_cache;

static void choice_free(choice_entry *c) {
    free(c->key);
    free(c->choice);
    memset(c, 0, sizeof *c);
}

static void cache_free(void *p) {
    exec_cache *c = p;
    if (!c) return;
    while (c->head) {
        ldt_exec *e = c->head;
        c->head = e->next;
        ldt__exec_destroy(e);
    }
    for (int i = 0; i < c->nchoices; i++) choice_free(&c->choices[i]);
    free(c);
}

static ldt_status cache_of(ldt_ctx *ctx, exec_cache **out) {
    if (!ctx->exec_cache) {
        if (!(ctx->exec_cache = calloc(1, sizeof(exec_cache))))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        ctx->exec_cache_free = cache_free;
    }
    *out = ctx->exec_cache;
    return LDT_OK;
}

typedef struct kbuf {
    unsigned char *b;
    size_t n, cap;
    int oom;
} kbuf;

static void put(kbuf *k, const void *v, size_t n) {
    if (k->oom) return;
    if (k->n + n > k->cap) {
        size_t c = k->cap ? 2 * k->cap : 512;
        unsigned char *nb;
        while (c < k->n + n) c *= 2;
        if (!(nb = realloc(k->b, c))) {
            k->oom = 1;
            return;
        }
        k->b = nb;
        k->cap = c;
    }
    memcpy(k->b + k->n, v, n);
    k->n += n;
}

static void put_i64(kbuf *k, int64_t v) { put(k, &v, sizeof v); }

/* What decides a plan of the current trace: its structure (pins included), the passes, the
 * mesh, the whole cost profile and the plan options. */
static ldt_status plan_key(ldt_ctx *ctx, const ldt_plan_options *po, kbuf *k) {
    char mesh[1024];
    ldt_cost_model cm;
    if (po && po->cost) cm = *po->cost;
    else LDT_CHECK(ldt_cost_model_default(NULL, ctx->mesh, &cm, NULL));
    put_i64(k, (int64_t)ldt_trace_hash(ctx));
    put_i64(k, (int64_t)ldt_passes_hash(ctx)); /* registered passes and this trace's bypass marks */
    put_i64(k, (int64_t)ldt__pp_hash(ctx)); /* pipeline stages and schedule (docs/pipeline.md) */
    ldt_mesh_format(ctx->mesh, mesh, sizeof mesh);
    put(k, mesh, strlen(mesh) + 1);
    { /* the whole profile, as its JSON text (every field, printed to round-trip) */
        char prof[8192];
        int n = ldt_cost_model_format(&cm, prof, sizeof prof);
        if (n < 0 || (size_t)n >= sizeof prof)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan cache: the cost profile '%.32s' is invalid "
                     "or too long to key", cm.name);
        put(k, prof, (size_t)n + 1);
    }
    put_i64(k, po ? po->search : 0);
    put_i64(k, po ? po->strict : 0);
    put_i64(k, po ? po->no_compute_cost : 0);
    put_i64(k, po ? po->plan_limit : 0);
    put(k, &(double){po ? po->memory_weight : 0}, sizeof(double)); /* it changes the plan */
    /* the persistent tensors read, in trace order */
    for (int64_t v = 0; v < ctx->nnodes; v++)
        if (ctx->nodes[v]->kind == LDT__PERSISTENT) {
            put_i64(k, v);
            put_i64(k, (int64_t)(uintptr_t)ctx->nodes[v]);
        }
    put_i64(k, ctx->nnodes);
    if (k->oom) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    return LDT_OK;
}

static ldt_status make_key(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                           const ldt_compile_options *o, kbuf *k) {
    LDT_CHECK(plan_key(ctx, o ? &o->plan : NULL, k));
    put_i64(k, o && (o->trace_path || o->profile) ? 1 : 0);
    put_i64(k, o ? o->no_fuse : 0);
    put_i64(k, o ? o->bucket_bytes : 0);
    put_i64(k, o ? o->overlap : 0);
    /* the outputs */
    put_i64(k, nout);
    for (int i = 0; i < nout; i++) put_i64(k, outputs[i]->id);
    /* the tensors the step writes, and with what */
    put_i64(k, ctx->nkeeps);
    for (int64_t i = 0; i < ctx->nkeeps; i++) {
        put_i64(k, (int64_t)(uintptr_t)ctx->keeps[i]);
        put_i64(k, LDT__P(ctx->keeps[i])->source->id);
    }
    if (k->oom) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    return LDT_OK;
}

ldt_status ldt_compile(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                       const ldt_compile_options *o, ldt_exec **out) {
    exec_cache *c = NULL;
    kbuf k = {0};
    uint64_t h;
    ldt_exec *e;
    ldt_status st;
    if (!ctx || !out || nout < 0 || (nout > 0 && !outputs))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "compile: ctx, outputs and out must be given");
    *out = NULL;
    if (ctx->status != LDT_OK) LDT_FAIL(ctx->status, "compile: the trace holds an error: %s", ctx->errmsg);
    /* what cannot run is refused before anything is planned (a 5000-rank plan takes minutes) */
    if (!ctx->world && ldt_mesh_device(ctx->mesh) == LDT_DEVICE_CPU &&
        ldt_mesh_nranks(ctx->mesh) > LDT__COMM_MAX_RANKS)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "compile: mesh of %d ranks: rank threads in one process stop at %d; run one "
                 "process per rank (ldt_mpi_world) or plan it on a meta mesh",
                 ldt_mesh_nranks(ctx->mesh), LDT__COMM_MAX_RANKS);
    for (int64_t i = 0; i < ctx->nkeeps; i++)
        if (ctx->keeps[i]->op == LDT_OP_DATA && LDT__P(ctx->keeps[i])->source->kind == LDT__PERSISTENT)
            LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a kept persistent tensor");
    for (int i = 0; i < nout; i++)
        if (!outputs[i] || outputs[i]->ctx != ctx || outputs[i]->kind != LDT__NODE ||
            outputs[i]->gen != ctx->gen)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "compile: output %d is not a result of this context's current trace", i);
    LDT_CHECK(cache_of(ctx, &c));
    if ((st = make_key(ctx, outputs, nout, o, &k)) != LDT_OK) {
        free(k.b);
        return st;
    }
    h = XXH3_64bits(k.b, k.n);
    for (e = c->head; e; e = e->next)
        if (e->hash == h && e->keylen == k.n && memcmp(e->key, k.b, k.n) == 0) break;
    if (e) {
        c->hits++;
        free(k.b);
    } else {
        if ((st = ldt__exec_build(ctx, outputs, nout, o, &e)) != LDT_OK) {
            free(k.b);
            return st;
        }
        e->key = k.b;
        e->keylen = k.n;
        e->hash = h;
        e->next = c->head;
        c->head = e;
        c->misses++;
    }
    ldt_trace_discard(ctx); /* the replay runs the step */
    *out = e;
    return LDT_OK;
}

ldt_status ldt__plan_create_cached(ldt_ctx *ctx, const ldt_plan_options *po, ldt_plan **out) {
    exec_cache *c = NULL;
    kbuf k = {0};
    uint64_t h;
    int i;
    ldt_status st;
    if (!ctx || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan: ctx and out must not be NULL");
    if (ctx->status != LDT_OK || ldt_mesh_device(ctx->mesh) == LDT_DEVICE_META)
        return ldt_plan_create(ctx, po, out); /* refusals as ldt_plan_create words them */
    LDT_CHECK(cache_of(ctx, &c));
    if ((st = plan_key(ctx, po, &k)) != LDT_OK) {
        free(k.b);
        return st;
    }
    h = XXH3_64bits(k.b, k.n);
    for (i = 0; i < c->nchoices; i++)
        if (c->choices[i].hash == h && c->choices[i].keylen == k.n &&
            memcmp(c->choices[i].key, k.b, k.n) == 0 && c->choices[i].n == ctx->nnodes)
            break;
    if (i < c->nchoices) {
        choice_entry hit = c->choices[i];
        free(k.b);
        c->plan_hits++;
        memmove(&c->choices[1], &c->choices[0], (size_t)i * sizeof *c->choices); /* to the front */
        c->choices[0] = hit;
        return ldt_plan_create_fixed(ctx, po, hit.choice, hit.n, out);
    }
    c->plan_misses++;
    if ((st = ldt_plan_create(ctx, po, out)) != LDT_OK) {
        free(k.b);
        return st;
    }
    { /* remember the choice (nothing is lost if there is no memory for it) */
        choice_entry e = {k.b, k.n, h, ctx->nnodes, malloc((size_t)(ctx->nnodes ? ctx->nnodes : 1) * sizeof(int32_t))};
        if (!e.choice || ldt_plan_choice(*out, e.choice, e.n) != LDT_OK) {
            ldt_clear_error();
            choice_free(&e);
            return LDT_OK;
        }
        if (c->nchoices == CHOICE_ENTRIES) choice_free(&c->choices[--c->nchoices]);
        memmove(&c->choices[1], &c->choices[0], (size_t)c->nchoices * sizeof *c->choices);
        c->choices[0] = e;
        c->nchoices++;
    }
    return LDT_OK;
}

ldt_status ldt__plan_cache_stats(const ldt_ctx *ctx, int64_t *hits, int64_t *misses) {
    const exec_cache *c = ctx ? ctx->exec_cache : NULL;
    *hits = c ? c->plan_hits : 0;
    *misses = c ? c->plan_misses : 0;
    return LDT_OK;
}

ldt_status ldt_exec_cache_stats(const ldt_ctx *ctx, int64_t *hits, int64_t *misses) {
    const exec_cache *c;
    if (!ctx || !hits || !misses) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec cache stats: NULL argument");
    c = ctx->exec_cache;
    *hits = c ? c->hits : 0;
    *misses = c ? c->misses : 0;
    return LDT_OK;
}

ldt_status ldt_exec_dim_calls(const ldt_exec *e, int dim, ldt_exec_call *out, int cap, int *n) {
    const ldt__program *p = NULL;
    ldt__dim_member *m = NULL;
    int64_t nm = 0, most = -1;
    if (!e || !n) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec_dim_calls: the executable and n must be given");
    *n = 0;
    if (dim < 0 || dim >= ldt_mesh_ndim(e->mesh))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec_dim_calls: mesh dim %d; expected 0 to %d", dim,
                 ldt_mesh_ndim(e->mesh) - 1);
    if (cap < 0 || (cap > 0 && !out))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec_dim_calls: cap %d with out %s; expected cap >= 0 and out for cap > 0",
                 cap, out ? "given" : "NULL");
    for (int r = 0; r < e->nprogs; r++) /* the busiest rank: the most calls on the dim */
        if (e->progs[r] && ldt__program_collectives_on(e->progs[r], dim) > most) {
            p = e->progs[r];
            most = ldt__program_collectives_on(p, dim);
        }
    if (!p) return LDT_OK;
    LDT_CHECK(ldt__program_dim_members(p, dim, &m, &nm));
    for (int64_t i = 0; i < nm; i++) {
        ldt_exec_call *c;
        int64_t k = m[i].call;
        if (k >= *n) { /* a new call */
            *n = (int)k + 1;
            if (k >= cap) continue;
            c = &out[k];
            memset(c, 0, sizeof *c);
            c->collective = (ldt_collective)m[i].coll;
            c->ndims = m[i].ndims;
            for (int d = 0; d < m[i].ndims; d++) c->dims[d] = m[i].dims[d];
            c->dtype = (ldt_dtype)m[i].dtype;
            c->phase = m[i].phase;
        }
        if (k >= cap) continue;
        c = &out[k];
        c->members++;
        c->bytes += m[i].bytes;
        if (m[i].phase > c->phase) c->phase = m[i].phase;
    }
    free(m);
    return LDT_OK;
}

ldt_status ldt_exec_stats_get(const ldt_exec *e, ldt_exec_stats *out) {
    if (!e || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec stats: NULL argument");
    memset(out, 0, sizeof *out);
    out->instructions = e->instructions;
    out->arena_bytes = e->arena_bytes;
    out->bound_bytes = e->bound_bytes;
    out->replays = e->replays;
    out->modeled_seconds = e->plan_cost;
    out->collectives = e->collectives;
    out->collectives_unfused = e->collectives_unfused;
    for (int d = 0; d < LDT_MAX_DIMS; d++) {
        out->dim_collectives[d] = e->dim_collectives[d];
        out->dim_collectives_unfused[d] = e->dim_collectives_unfused[d];
        out->dim_buckets[d] = e->dim_buckets[d];
    }
    out->pack_buckets = e->pack_buckets;
    out->packed_all_reduces = e->packed_all_reduces;
    out->modeled_step_seconds = e->model_serial;
    out->modeled_overlap_seconds = e->model_overlap;
    out->overlapped_collectives = e->moved_starts;
    out->collective_groups = e->collective_groups;
    out->fuse_agreed = e->fuse_agreed;
    out->early_all_reduces = e->early_all_reduces;
    out->assigned = e->nassign;
    out->host_copies = e->host_copies;
    for (int a = 0; e->inplace && a < e->nassign; a++) out->assigned_in_place += e->inplace[a];
    return LDT_OK;
}
