/* Compiled executables and the CPU replay backend (docs/replay.md).
 *
 * Compile: plan the trace, lower every rank's program, give each rank one arena from the
 * memory plan, and bind every instruction once: kernel function pointers resolved, operands
 * pointing into the arena (or at persistent per-rank copies of parameters and constants, or
 * at an input's own buffer when the rank holds all of it). Replay: each rank thread walks its
 * array of bound instructions calling one function pointer each; no lookup, allocation,
 * hashing or propagation. Ranks meet only at collectives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/mesh.h"
#include "exec/backend_cuda.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"
#include "exec/fill.h"
#include "exec/groups.h"
#include "exec/kcall.h"
#include "exec/shards.h"
#include "planner/fuse.h"
#include "planner/memory.h"
#include "planner/schedule.h"

/* ---------------------------------------------------------------------------------------
 * Bound instructions: a kernel call, or a wrapper with the same signature that finds its
 * instruction around the call (container_of).
 */
#define BIN_OF(c) ((binstr *)((char *)(c) - offsetof(binstr, call)))

static ldt_status w_load(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    const ldt_tensor *t = x->src;
    const ldt__kregion *kr = &rs->prog->regions[x->region];
    const void *src = t->data;
    if (x->reduce) {
        memset(c->out.data, 0, (size_t)ldt__value_bytes(&rs->prog->vals[x->out]));
        return LDT_OK;
    }
    if (t->op == LDT_OP_INPUT) {
        const ldt__binding *bd = &rs->e->bindings[b->aux];
        if (bd->ptr) src = bd->ptr;
        else if (!LDT__P(t)->bound)
            LDT_FAIL(LDT_ERR_INVALID_USAGE, "input '%s' has no data; bind it with ldt_input_bind "
                     "or ldt_exec_bind", LDT__NAME(t) ? LDT__NAME(t) : "");
        if (bd->ptr && rs->whole_input[b->aux]) return LDT_OK; /* the value is the buffer */
    } else if (b->version == LDT__P(t)->version) {
        return LDT_OK; /* a parameter or constant shard already loaded */
    }
    if (kr->region.numel)
        ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype), (void *)src,
                         c->out.data, 1);
    b->version = LDT__P(t)->version;
    return LDT_OK;
}

static ldt_status w_custom(const ldt__kcall *c) {
    const ldt__custom_call *k = &BIN_OF(c)->custom_call;
    ldt_status st;
    st = k->fn(k->nin, k->in, k->shapes, k->dtypes, k->out, &c->out.shape, (ldt_dtype)k->out_dtype, k->user);
    if (st != LDT_OK && !ldt_last_error()[0])
        ldt__error(st, "custom op %s: kernel returned %s", ldt__op_name(BIN_OF(c)->rs->e->ctx, c->op),
                   ldt_status_name(st));
    return st;
}

/* The custom call of instruction b: its arguments from the rank's pools, in order. */
static void bind_custom(rank_state *rs, binstr *b, int64_t *nc, int64_t *narg) {
    const ldt__custom_op *op = &rs->e->ctx->custom[b->call.op - LDT_OP_COUNT];
    ldt__custom_call *k = &b->custom_call;
    (*nc)++;
    b->custom = k;
    k->fn = op->cpu_fn;
    k->user = op->user;
    k->in = rs->cin + *narg;
    k->shapes = rs->cshapes + *narg;
    k->dtypes = rs->cdtypes + *narg;
    k->out = b->call.out.data;
    k->nin = (int16_t)b->call.nin;
    k->out_dtype = (int16_t)b->call.out.dtype;
    *narg += b->call.nin;
    for (int i = 0; i < b->call.nin; i++) {
        k->in[i] = b->call.in[i].data;
        k->shapes[i] = b->call.in[i].shape;
        k->dtypes[i] = b->call.in[i].dtype;
    }
}


static ldt_status w_fill(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    int64_t n = ldt__value_bytes(&b->rs->prog->vals[b->rs->prog->ins[b->idx].out]) /
                (int64_t)ldt__dtype_size(c->out.dtype);
    ldt__fill_f64(c->out.data, c->out.dtype, n, b->rs->prog->ins[b->idx].fill);
    return LDT_OK;
}


static ldt_status w_all_reduce(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    ldt_comm *g = b->comm;
    if (!g) {
        LDT_CHECK(ldt__instr_group(rs->world, rs->e->mesh, rs->groups, x, &g));
        b->comm = g;
    }
    if (ldt_comm_size(g) == 1) return LDT_OK;
    return ldt_all_reduce(g, c->out.data, c->out.data,
                          ldt__value_bytes(&rs->prog->vals[x->out]) / (int64_t)ldt__dtype_size(c->out.dtype),
                          c->out.dtype, (ldt_reduce_op)x->reduce);
}

/* A bucket placed back to back: one call over the whole range, in place. */
static ldt_status w_all_reduce_fused(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    ldt_comm *g = b->comm;
    if (!g) {
        LDT_CHECK(ldt__instr_group(rs->world, rs->e->mesh, rs->groups, x, &g));
        b->comm = g;
    }
    if (ldt_comm_size(g) == 1) return LDT_OK;
    return ldt_all_reduce(g, c->in[0].data, c->in[0].data, b->count, c->out.dtype,
                          (ldt_reduce_op)x->reduce);
}

/* A bucket that could not be placed contiguously: packed into scratch, reduced, unpacked. */
static ldt_status w_all_reduce_packed(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    size_t es = ldt__dtype_size(c->out.dtype);
    ldt_comm *g = b->comm;
    char *at = b->scratch;
    if (!g) {
        LDT_CHECK(ldt__instr_group(rs->world, rs->e->mesh, rs->groups, x, &g));
        b->comm = g;
    }
    if (ldt_comm_size(g) == 1) return LDT_OK;
    for (int k = 0; k < c->nin; k++) {
        size_t nb = (size_t)ldt__value_bytes(&rs->prog->vals[rs->prog->ops[x->in + k]]);
        memcpy(at, c->in[k].data, nb);
        at += nb;
    }
    LDT_CHECK(ldt_all_reduce(g, b->scratch, b->scratch, b->count, c->out.dtype, (ldt_reduce_op)x->reduce));
    at = b->scratch;
    for (int k = 0; k < c->nin; k++) {
        size_t nb = (size_t)ldt__value_bytes(&rs->prog->vals[rs->prog->ops[x->in + k]]);
        memcpy(c->in[k].data, at, nb);
        at += nb;
    }
    (void)es;
    return LDT_OK;
}

/* A grouped run: the first opens the group, the last closes it (issuing them all). */
static ldt_status w_grouped(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    int g = b->rs->prog->ins[b->idx].group;
    ldt_status st;
    if (g == 1) LDT_CHECK(ldt_group_start());
    st = b->gfn(c);
    if (g == 3) {
        ldt_status end = ldt_group_end();
        if (st == LDT_OK) st = end;
    }
    return st;
}

static ldt_status w_redist(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    if (!b->runner) LDT_CHECK(ldt_redist_runner_create(b->rs->world, b->rs->prog->ins[b->idx].plan, &b->runner));
    return ldt_redist_runner_run(b->runner, c->in[0].data, c->out.data);
}

/* ---------------------------------------------------------------------------------------
 * Asynchronous collectives: a start queues the collective for the rank's communication
 * thread; a wait blocks until that thread has finished it in this replay.
 */
static void *comm_main(void *arg) {
    rank_state *rs = arg;
    ldt__commq *q = &rs->q;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        binstr *b;
        uint64_t gen;
        while (q->head == q->tail && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (q->head == q->tail && q->stop) break;
        b = q->items[q->head % q->cap];
        q->head++;
        gen = q->gen;
        pthread_mutex_unlock(&q->mu);
        {
            ldt_status st = b->afn(&b->call);
            if (st != LDT_OK) st = ldt__error_prefix(st, "communication thread of rank %d", rs->rank);
            pthread_mutex_lock(&q->mu);
            b->astatus = st;
            b->done_gen = gen;
            if (st != LDT_OK) snprintf(b->rs->err, sizeof b->rs->err, "%s", ldt_last_error());
            pthread_cond_broadcast(&q->cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static ldt_status w_start(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    ldt__commq *q = &b->rs->q;
    pthread_mutex_lock(&q->mu);
    q->items[q->tail % q->cap] = b;
    q->tail++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return LDT_OK;
}

static ldt_status w_wait(const ldt__kcall *c) {
    binstr *b = BIN_OF(c), *coll = &b->rs->ins[b->rs->prog->ins[b->idx].pair];
    ldt__commq *q = &b->rs->q;
    ldt_status st;
    pthread_mutex_lock(&q->mu);
    while (coll->done_gen != q->gen) pthread_cond_wait(&q->cv, &q->mu);
    st = coll->astatus;
    if (st != LDT_OK) ldt__error(st, "%s", b->rs->err);
    pthread_mutex_unlock(&q->mu);
    return st;
}

static ldt_status commq_start(rank_state *rs, int64_t cap) {
    ldt__commq *q = &rs->q;
    if (!(q->items = calloc((size_t)(cap ? cap : 1), sizeof *q->items)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    q->cap = cap ? cap : 1;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->gen = 0;
    if (pthread_create(&q->thread, NULL, comm_main, rs) != 0)
        LDT_FAIL(LDT_ERR_SYSTEM, "compile: cannot start the communication thread of rank %d", rs->rank);
    q->started = 1;
    return LDT_OK;
}

static void commq_stop(rank_state *rs) {
    ldt__commq *q = &rs->q;
    if (!q->started) return;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->items);
    q->started = 0;
}

/* ---------------------------------------------------------------------------------------
 * Binding one rank.
 */
static int draws_random(const ldt__instr *x) {
    switch (x->op) {
    case LDT_OP_RAND:
    case LDT_OP_RANDN:
    case LDT_OP_BERNOULLI:
    case LDT_OP_TRUNC_NORMAL:
    case LDT_OP_RANDINT: return 1;
    case LDT_OP_DROPOUT:
    case LDT_OP_SDPA: return x->attrs->f[0] > 0;
    default: return 0;
    }
}

static ldt_status bind_rank(ldt_exec *e, rank_state *rs) {
    const ldt__program *p = rs->prog;
    uint8_t *outside = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    uint8_t *keep = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    int64_t nops = 0, nrand = 0, ncustom = 0, ncarg = 0;
    ldt_status st = LDT_OK;
    if (!outside || !keep) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    rs->val = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *rs->val);
    rs->whole_input = calloc((size_t)(e->nbindings ? e->nbindings : 1), 1);
    /* 64-byte aligned: each instruction's hot part (fn and a custom call) is one cache line */
    rs->ins = aligned_alloc(64, (size_t)(p->nins ? p->nins : 1) * sizeof *rs->ins);
    if (rs->ins) memset(rs->ins, 0, (size_t)(p->nins ? p->nins : 1) * sizeof *rs->ins);
    if (!rs->val || !rs->whole_input || !rs->ins) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    /* held outside the arena: parameter and constant shards (persistent per rank) */
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        nops += x->nin;
        if (x->kind == LDT__I_LOAD && x->src->op != LDT_OP_INPUT) outside[x->out] = 1;
        if (x->kind == LDT__I_KERNEL && draws_random(x)) nrand++;
        if (x->kind == LDT__I_KERNEL && x->op >= LDT_OP_COUNT) {
            ncustom++;
            ncarg += x->nin;
        }
    }
    rs->cin = calloc((size_t)(ncarg ? ncarg : 1), sizeof *rs->cin);
    rs->cshapes = calloc((size_t)(ncarg ? ncarg : 1), sizeof *rs->cshapes);
    rs->cdtypes = calloc((size_t)(ncarg ? ncarg : 1), sizeof *rs->cdtypes);
    if (!rs->cin || !rs->cshapes || !rs->cdtypes)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    ncustom = ncarg = 0;
    for (int i = 0; i < e->nout + e->nassign; i++) keep[p->node_val[e->outs[i].node]] = 1;
    LDT_CHECK_GOTO(ldt__memory_plan(p, outside, keep, &rs->mem));
    rs->arena = malloc((size_t)(rs->mem.arena_bytes ? rs->mem.arena_bytes : 1));
    rs->opnds = calloc((size_t)(nops ? nops : 1), sizeof *rs->opnds);
    rs->rand = calloc((size_t)(nrand ? nrand : 1), sizeof *rs->rand);
    if (!rs->arena || !rs->opnds || !rs->rand) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory "
                                                              "for a %lld-byte arena", (long long)rs->mem.arena_bytes);
    for (int32_t v = 0; v < p->nvals; v++) {
        if (outside[v]) {
            int64_t b = ldt__value_bytes(&p->vals[v]);
            if (!(rs->val[v] = malloc((size_t)(b ? b : 1))))
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        } else if (rs->mem.offset[v] >= 0) {
            rs->val[v] = rs->arena + rs->mem.offset[v];
        }
    }
    nops = 0;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        binstr *b = &rs->ins[i];
        b->rs = rs;
        b->idx = i;
        b->version = UINT64_MAX;
        b->call.op = x->op;
        b->call.attrs = x->attrs;
        b->call.nin = x->nin;
        b->call.in = rs->opnds + nops;
        for (int k = 0; k < x->nin; k++) {
            int32_t v = p->ops[x->in + k];
            rs->opnds[nops].data = rs->val[v];
            rs->opnds[nops].shape = p->vals[v].shape;
            rs->opnds[nops++].dtype = (ldt_dtype)p->vals[v].dtype;
        }
        b->call.out.data = rs->val[x->out];
        b->call.out.shape = p->vals[x->out].shape;
        b->call.out.dtype = (ldt_dtype)p->vals[x->out].dtype;
        switch ((ldt__ikind)x->kind) {
        case LDT__I_LOAD:
            b->fn = w_load;
            if (x->src->op == LDT_OP_INPUT) {
                const ldt__kregion *kr = &p->regions[x->region];
                b->aux = ldt__exec_binding_of(e, x->src);
                int64_t whole = 1;
                for (int d = 0; d < kr->global.ndim; d++) whole *= kr->global.dims[d];
                /* the rank holds all of it: a bound buffer can be used in place */
                rs->whole_input[b->aux] = kr->region.numel == whole && !x->reduce;
            }
            break;
        case LDT__I_KERNEL:
            if (x->region >= 0) {
                b->call.region = &p->regions[x->region].region;
                b->call.global_shape = &p->regions[x->region].global;
            }
            if (x->op >= LDT_OP_COUNT) {
                b->fn = w_custom;
                bind_custom(rs, b, &ncustom, &ncarg);
            } else { /* checked once here; the plan is freed with the executable */
                void *kplan = NULL;
                if ((st = ldt__cpu_kernel_bind(&b->call, &b->fn, &kplan)) != LDT_OK) {
                    st = ldt__error_prefix(st, "compile: rank %d, instruction %lld (%s of node %%%d)",
                                           rs->rank, (long long)i, ldt__instr_name(e->ctx, x), x->node);
                    goto fail;
                }
            }
            if (draws_random(x)) {
                rs->rand[rs->nrand].attrs = (ldt__attrs *)x->attrs; /* the program's own copy */
                rs->rand[rs->nrand++].offset = (uint64_t)x->attrs->i[1];
            }
            break;
        case LDT__I_REDIST: b->fn = w_redist; break;
        case LDT__I_ALL_REDUCE:
            b->fn = w_all_reduce;
            if (x->nin > 1) { /* a fused bucket: contiguous (the memory plan's groups) or packed */
                int64_t total = 0;
                int contiguous = 1;
                for (int k = 0; k < x->nin; k++) {
                    int32_t v = p->ops[x->in + k];
                    if (k && (char *)rs->val[v] != (char *)b->call.in[0].data + total) contiguous = 0;
                    total += ldt__value_bytes(&p->vals[v]);
                }
                b->count = total / (int64_t)ldt__dtype_size(b->call.out.dtype);
                b->fn = contiguous ? w_all_reduce_fused : w_all_reduce_packed;
                if (!contiguous) {
                    if (!(b->scratch = malloc((size_t)(total ? total : 1))))
                        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
                    rs->e->pack_buckets++;
                }
            }
            break;
        case LDT__I_FILL: b->fn = w_fill; break;
        case LDT__I_WAIT: b->fn = w_wait; break;
        default: LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "compile: instruction kind %d", x->kind);
        }
    }
    rs->nins = p->nins;
    for (int64_t i = 0; i < p->nins; i++) /* grouped runs (before the async wrap below) */
        if (p->ins[i].group) {
            rs->ins[i].gfn = rs->ins[i].fn;
            rs->ins[i].fn = w_grouped;
        }
    {
        int64_t nasync = 0;
        for (int64_t i = 0; i < p->nins; i++)
            if ((p->ins[i].kind == LDT__I_REDIST || p->ins[i].kind == LDT__I_ALL_REDUCE) && p->ins[i].async) {
                rs->ins[i].afn = rs->ins[i].fn;
                rs->ins[i].fn = w_start;
                rs->ins[i].done_gen = UINT64_MAX;
                nasync++;
            }
        if (nasync) {
            rs->has_async = 1;
            LDT_CHECK_GOTO(commq_start(rs, nasync));
        }
    }
fail:
    free(outside);
    free(keep);
    return st;
}

/* Process mode: every communicator the rank's program uses, made now in program order (each
 * a collective over its members), so that a replay only calls collectives, which time out
 * and fail the world, and never group creation, which MPI cannot bound. */
static ldt_status make_groups(ldt_exec *e, rank_state *rs) {
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &rs->prog->ins[i];
        binstr *b = &rs->ins[i];
        if (x->kind == LDT__I_ALL_REDUCE && !b->comm)
            LDT_CHECK(ldt__instr_group(e->world, e->mesh, rs->groups, x, &b->comm));
        else if (x->kind == LDT__I_REDIST && !b->runner)
            LDT_CHECK(ldt_redist_runner_create(e->world, x->plan, &b->runner));
    }
    return LDT_OK;
}

/* Inputs that zero-copy bindings would let a rank use in place: the value points at the
 * bound buffer (re-pointed each replay, since the user may bind another). */
static void repoint_inputs(rank_state *rs) {
    const ldt__program *p = rs->prog;
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        binstr *b = &rs->ins[i];
        const ldt__binding *bd;
        if (x->kind != LDT__I_LOAD || x->src->op != LDT_OP_INPUT || !rs->whole_input[b->aux]) continue;
        bd = &rs->e->bindings[b->aux];
        rs->val_now[x->out] = bd->ptr ? (void *)bd->ptr : rs->val[x->out];
    }
}

/* ---------------------------------------------------------------------------------------
 * Replay.
 */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Operand pointers of values bound to an input buffer follow the current binding. */
static void patch_pointers(rank_state *rs) {
    const ldt__program *p = rs->prog;
    int64_t k = 0;
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        for (int j = 0; j < x->nin; j++, k++) {
            rs->opnds[k].data = rs->val_now[p->ops[x->in + j]];
            if (rs->ins[i].custom) rs->ins[i].custom->in[j] = rs->opnds[k].data;
        }
        rs->ins[i].call.out.data = rs->val_now[x->out];
        if (rs->ins[i].custom) rs->ins[i].custom->out = rs->ins[i].call.out.data;
    }
}

static ldt_status rank_replay(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int rank = ldt_comm_rank(world);
    rank_state *rs;
    binstr *ins;
    int64_t n, i;
    ldt_status st = LDT_OK;
    if (rank >= e->nranks || !(rs = e->ranks[rank])) return LDT_OK;
    rs->world = world;
    if (rs->has_async) { /* a new replay: waits look for this generation */
        pthread_mutex_lock(&rs->q.mu);
        rs->q.gen++;
        pthread_mutex_unlock(&rs->q.mu);
    }
    for (int64_t i = 0; i < rs->nrand; i++) /* this step's place on the random stream */
        rs->rand[i].attrs->i[1] = (int64_t)(rs->rand[i].offset - e->rng_base + e->rng_now);
    if (e->rebind) {
        repoint_inputs(rs);
        patch_pointers(rs);
    }
    ins = rs->ins;
    n = rs->nins;
    if (e->noop) { /* measurement only: the same loop over a kernel that does nothing */
        ldt__kernel_fn volatile nf = e->noop;
        for (i = 0; i < n; i++)
            if ((st = nf(&ins[i].call)) != LDT_OK) break;
        return st;
    }
    if (!e->profile) {
        for (i = 0; i < n; i++) /* the replay loop: one indirect call per instruction */
            if ((st = ins[i].fn(&ins[i].call)) != LDT_OK) break;
    } else {
        for (i = 0; i < n; i++) {
            double t0 = now_s();
            st = ins[i].fn(&ins[i].call);
            rs->prof[i].start = t0 - e->t_origin;
            rs->prof[i].end = now_s() - e->t_origin;
            if (st != LDT_OK) break;
        }
    }
    if (st != LDT_OK) {
        return ldt__error_prefix(st, "replay rank %d, instruction %lld (%s of node %%%d)", rank,
                                 (long long)i, ldt__instr_name(e->ctx, &rs->prog->ins[i]),
                                 rs->prog->ins[i].node);
    }
    /* outputs into the gathering shards; assigned values into their tensors' load buffers
     * (in place: the next replay's load finds them there) or, failing that, shards too */
    for (int i = 0; i < e->nout + e->nassign; i++) {
        int64_t nb;
        void *dst;
        int32_t v = rs->prog->node_val[e->outs[i].node];
        if (i >= e->nout && e->inplace && e->inplace[i - e->nout]) {
            void *buf = rs->ins[rs->assign_load[i - e->nout]].call.out.data;
            nb = ldt__value_bytes(&rs->prog->vals[v]);
            if (nb && buf != rs->val_now[v]) memcpy(buf, rs->val_now[v], (size_t)nb);
            continue;
        }
        dst = ldt_shards_local(e->outs[i].shards, rank, &nb);
        if (nb) memcpy(dst, rs->val_now[v], (size_t)nb);
    }
    return LDT_OK;
}

/* Process mode: every rank's local piece of shards s into every process's copy (this
 * process's own piece already in place). A collective over the world: every process calls it
 * at the same point of the same code. */
static ldt_status gather_shards(ldt_exec *e, ldt_shards *s) {
    int n = e->nranks;
    int64_t *counts = calloc((size_t)n, sizeof *counts), total = 0, at = 0, mine = 0;
    char *buf = NULL;
    ldt_status st = LDT_OK;
    if (!counts) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "gather: out of memory");
    for (int r = 0; r < n; r++) {
        ldt_shards_local(s, r, &counts[r]);
        total += counts[r];
    }
    for (int r = 0; r < e->me; r++) at += counts[r];
    mine = counts[e->me];
    if (!(buf = malloc((size_t)(total ? total : 1)))) {
        free(counts);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "gather: out of memory for %lld bytes", (long long)total);
    }
    if (mine) memcpy(buf + at, ldt_shards_local(s, e->me, NULL), (size_t)mine);
    st = ldt_all_gather_v(e->world, buf + at, buf, counts, LDT_U8);
    at = 0;
    for (int r = 0; r < n && st == LDT_OK; r++) {
        if (counts[r] && r != e->me) memcpy(ldt_shards_local(s, r, NULL), buf + at, (size_t)counts[r]);
        at += counts[r];
    }
    free(buf);
    free(counts);
    return st == LDT_OK ? LDT_OK : ldt__trace(ldt__error_prefix(st, "gather the ranks' shards"), __FILE__, __LINE__);
}

/* The host data of every tensor the stale executable assigned in place, from the ranks'
 * load buffers (each rank its region; replicated elements written alike by each holder). */
static ldt_status host_flush(ldt_ctx *ctx) {
    ldt_exec *e = ctx->stale_exec;
    ctx->stale_exec = NULL;
    if (!e) return LDT_OK;
    e->host_copies++;
    for (int a = 0; a < e->nassign; a++) {
        ldt_tensor *t = e->outs[e->nout + a].assign_to;
        if (!e->inplace[a]) continue;
        if (e->world) { /* the other ranks' buffers are in other processes: through the shards */
            ldt_shards *sh = e->outs[e->nout + a].shards;
            rank_state *rs = e->ranks[e->me];
            int64_t nb;
            void *mine = ldt_shards_local(sh, e->me, &nb);
            if (nb) memcpy(mine, rs->ins[rs->assign_load[a]].call.out.data, (size_t)nb);
            LDT_CHECK(gather_shards(e, sh));
            LDT_CHECK(ldt_full_tensor(sh, t->data));
            continue;
        }
        for (int r = 0; r < e->nranks; r++) {
            rank_state *rs = e->ranks[r];
            const binstr *lb;
            const ldt__kregion *kr;
            if (!rs) continue;
            lb = &rs->ins[rs->assign_load[a]];
            kr = &rs->prog->regions[rs->prog->ins[lb->idx].region];
            if (kr->region.numel)
                ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype), t->data,
                                 lb->call.out.data, 0);
        }
    }
    return LDT_OK;
}

static int region_equal(const ldt_region *a, const ldt_region *b) {
    if (a->ndim != b->ndim || a->numel != b->numel || a->nslices != b->nslices) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->offset[d] != b->offset[d] || a->local_shape.dims[d] != b->local_shape.dims[d] ||
            a->runs[d].start != b->runs[d].start || a->runs[d].len != b->runs[d].len ||
            a->runs[d].blocks != b->runs[d].blocks || a->runs[d].block_stride != b->runs[d].block_stride)
            return 0;
    return 1;
}

/* Which assigned values persist in place: on every rank the tensor is loaded exactly once,
 * and that load's region is the assigned value's, so the value can overwrite the load
 * buffer at the end of a replay and the next replay's load has nothing to do. */
static ldt_status find_inplace(ldt_exec *e) {
    if (!e->nassign || ldt_mesh_device(e->mesh) == LDT_DEVICE_META) return LDT_OK;
    if (!(e->inplace = calloc((size_t)e->nassign, 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs = e->ranks[r];
        if (!rs) continue;
        if (!(rs->assign_load = malloc((size_t)e->nassign * sizeof *rs->assign_load)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int a = 0; a < e->nassign; a++) rs->assign_load[a] = -1;
    }
    for (int a = 0; a < e->nassign; a++) {
        const ldt__exec_out *o = &e->outs[e->nout + a];
        int ok = 1;
        for (int r = 0; r < e->nranks && ok; r++) {
            rank_state *rs = e->ranks[r];
            ldt_region reg;
            int64_t found = -1, nloads = 0;
            int32_t v;
            if (!rs) continue;
            v = rs->prog->node_val[o->node];
            if (v < 0 || ldt_layout(ldt_shards_spec(o->shards), r, &reg) != LDT_OK) {
                ok = 0;
                break;
            }
            for (int64_t i = 0; i < rs->nins; i++) {
                const ldt__instr *x = &rs->prog->ins[i];
                if (x->kind != LDT__I_LOAD || x->src != o->assign_to) continue;
                nloads++;
                if (!x->reduce && !x->host && region_equal(&rs->prog->regions[x->region].region, &reg) &&
                    rs->prog->vals[x->out].dtype == rs->prog->vals[v].dtype)
                    found = i;
            }
            if (nloads != 1 || found < 0) ok = 0;
            else rs->assign_load[a] = found;
        }
        e->inplace[a] = (uint8_t)ok;
    }
    if (e->world) { /* in place only where every process's rank can: gathers are collective */
        int32_t *f = malloc((size_t)e->nassign * sizeof *f);
        ldt_status st;
        if (!f) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int a = 0; a < e->nassign; a++) f[a] = e->inplace[a];
        st = ldt_all_reduce(e->world, f, f, e->nassign, LDT_I32, LDT_REDUCE_MIN);
        for (int a = 0; a < e->nassign; a++) e->inplace[a] = (uint8_t)(f[a] != 0);
        free(f);
        LDT_CHECK(st);
    }
    for (int a = 0; a < e->nassign; a++) e->any_inplace |= e->inplace[a];
    return LDT_OK;
}

/* Process mode: the processes must have planned alike (same trace, same numbers). Each hashes
 * every rank's program per trace node; the totals are compared and, on a difference, the
 * first node whose hash differs from rank 0's is named. */
static ldt_status agree(ldt_exec *e) {
    int n = e->nranks;
    int64_t nn = 0, *nodes = NULL, *counts = NULL, total = 0, *all = NULL, *sum = NULL;
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nprogs; r++)
        if (e->progs[r] && e->progs[r]->nnodes > nn) nn = e->progs[r]->nnodes;
    nodes = calloc((size_t)(nn + 1), sizeof *nodes);
    counts = calloc((size_t)n, sizeof *counts);
    sum = calloc((size_t)n * 2, sizeof *sum);
    if (!nodes || !counts || !sum) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nprogs; r++) {
        const ldt__program *p = e->progs[r];
        for (int64_t i = 0; p && i < p->nins; i++) {
            const ldt__instr *x = &p->ins[i];
            const ldt__value *v = &p->vals[x->out];
            int64_t h[4 + LDT_MAX_DIMS] = {x->kind, x->op, r, v->dtype};
            int64_t node = x->node >= 0 && x->node < nn ? x->node : nn;
            for (int d = 0; d < v->shape.ndim; d++) h[4 + d] = v->shape.dims[d];
            nodes[node] = (int64_t)(XXH3_64bits_withSeed(h, sizeof h, (uint64_t)nodes[node]) >> 1);
        }
    }
    sum[0] = nn;
    sum[1] = (int64_t)(XXH3_64bits(nodes, (size_t)(nn + 1) * sizeof *nodes) >> 1);
    {
        int64_t pair[2] = {sum[0], sum[1]};
        LDT_CHECK_GOTO(ldt_all_gather(e->world, pair, sum, 2, LDT_I64));
    }
    {
        int same = 1;
        for (int r = 1; r < n; r++) same &= sum[2 * r] == sum[0] && sum[2 * r + 1] == sum[1];
        if (same) goto done;
    }
    for (int r = 0; r < n; r++) total += counts[r] = sum[2 * r] + 1;
    if (!(all = malloc((size_t)total * sizeof *all))) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    {
        int64_t at = 0;
        for (int r = 0; r < e->me; r++) at += counts[r];
        memcpy(all + at, nodes, (size_t)(nn + 1) * sizeof *nodes);
        LDT_CHECK_GOTO(ldt_all_gather_v(e->world, all + at, all, counts, LDT_I64));
    }
    {
        int64_t at = counts[0];
        for (int r = 1; r < n; r++) {
            for (int64_t k = 0; k < counts[r] && k < counts[0]; k++)
                if (all[at + k] != all[k]) {
                    const char *op = k < e->ctx->nnodes ? ldt__op_name(e->ctx, e->ctx->nodes[k]->op) : "?";
                    LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE, "compile: the processes planned differently: rank %d's "
                                  "programs differ from rank 0's first at node %%%lld (%s); every process must "
                                  "trace the same step with the same inputs' shapes and options", r, (long long)k, op);
                }
            if (counts[r] != counts[0])
                LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE, "compile: the processes planned differently: rank %d traced "
                              "%lld nodes, rank 0 %lld", r, (long long)counts[r] - 1, (long long)counts[0] - 1);
            at += counts[r];
        }
    }
done:
fail:
    free(nodes);
    free(counts);
    free(sum);
    free(all);
    return st;
}

/* A CUDA mesh's replay, output reads and teardown (below, with its build). */
static ldt_status replay_cuda(ldt_exec *e);
static ldt_status read_cuda(ldt_exec *e, int i, void *dst);
static void destroy_cuda(ldt_exec *e);
static int cuda_local(const ldt_exec *e, int r);

static ldt_status replay_step(ldt_exec *e);

/* A timeout in a step that runs about as long as the timeout is slowness, not a dead peer:
 * the message says how long the last step took and how to wait longer. */
static ldt_status timeout_note(ldt_exec *e, ldt_status st, double ran_s) {
    char msg[1536];
    int64_t tmo = 0;
    if (st != LDT_ERR_TIMEOUT) return st;
    if (e->world) tmo = e->world->timeout_ms;
    else if (ldt__comm_timeout(NULL, "replay", &tmo) != LDT_OK) return st;
    snprintf(msg, sizeof msg, "%s", ldt_last_error());
    if (e->replays)
        return ldt__error(st, "%s; this rank's last step took %.1f s, the communication timeout is %.1f s: steps "
                          "that slow need a longer timeout (LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)",
                          msg, e->last_step_s, (double)tmo / 1e3);
    return ldt__error(st, "%s; this first step had run %.1f s, the communication timeout is %.1f s: steps "
                      "that slow need a longer timeout (LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)",
                      msg, ran_s, (double)tmo / 1e3);
}

ldt_status ldt_replay(ldt_exec *e) {
    double t0 = now_s();
    ldt_status st;
    if (!e) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "replay: the executable is NULL");
    st = replay_step(e);
    if (st == LDT_OK) {
        e->last_step_s = now_s() - t0;
        return LDT_OK;
    }
    st = timeout_note(e, st, now_s() - t0);
    /* Process mode: the peers cannot see that this process left the step, and would wait out
     * their timeouts in the collectives it never joins (or mistake its teardown's for the
     * step's). Aborting the world fails their calls now, and keeps ours from communicating. */
    if (e->world) ldt__comm_abort(e->world, ldt_last_error());
    return ldt__trace(st, __FILE__, __LINE__);
}

static ldt_status replay_step(ldt_exec *e) {
    ldt_status st;
    if (e->ctx->stale_exec && e->ctx->stale_exec != e) LDT_CHECK(ldt__host_sync(e->ctx));
    if (e->is_cuda) return replay_cuda(e);
    e->rng_now = e->ctx->rng_offset;
    if (e->profile) e->t_origin = now_s();
    if (e->world) { /* process mode: this process's rank, here */
        st = rank_replay(e->world, e); /* its errors name the rank already */
    } else {
        st = ldt_threads_run(e->threads, rank_replay, e);
    }
    e->rebind = 0;
    if (st != LDT_OK) return st;
    e->ctx->rng_offset += e->rng_advance; /* as the eager step would have */
    e->ctx->trace_rng_base = e->ctx->rng_offset;
    e->replays++;
    /* assigned values are their tensors' new versions. In place, they already sit in the
     * ranks' load buffers, which now hold that version (the host copy follows on demand,
     * host_flush); otherwise they land in the host data and every rank reloads its shard */
    for (int i = e->nout; i < e->nout + e->nassign; i++) {
        ldt_tensor *t = e->outs[i].assign_to;
        int a = i - e->nout;
        if (e->inplace && e->inplace[a]) {
            LDT__P(t)->version++;
            for (int r = 0; r < e->nranks; r++)
                if (e->ranks[r]) e->ranks[r]->ins[e->ranks[r]->assign_load[a]].version = LDT__P(t)->version;
            continue;
        }
        if (e->world) LDT_CHECK(gather_shards(e, e->outs[i].shards));
        LDT_CHECK(ldt_full_tensor(e->outs[i].shards, t->data));
        LDT__P(t)->version++;
    }
    if (e->any_inplace) {
        e->ctx->stale_exec = e;
        e->ctx->host_flush = host_flush;
    }
    if (e->trace_path) LDT_CHECK(ldt__exec_write_trace(e));
    return LDT_OK;
}

ldt_status ldt_exec_read(ldt_exec *e, int i, void *dst, int64_t nbytes) {
    if (!e || (!dst && nbytes > 0)) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: NULL argument");
    if (i < 0 || i >= e->nout)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: output %d, the executable has %d", i, e->nout);
    if (nbytes != e->outs[i].nbytes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: output %d holds %lld bytes, %lld given", i,
                 (long long)e->outs[i].nbytes, (long long)nbytes);
    if (!e->replays) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec read: nothing has been replayed yet");
    if (e->is_cuda) return read_cuda(e, i, dst);
    if (e->world && e->gathered[i] != e->replays) { /* a collective: every process reads it */
        LDT_CHECK(gather_shards(e, e->outs[i].shards));
        e->gathered[i] = e->replays;
    }
    return ldt_full_tensor(e->outs[i].shards, dst);
}

ldt_status ldt_exec_bind(ldt_exec *e, const char *name, const void *data, int64_t nbytes) {
    if (!e || !name || (!data && nbytes > 0)) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind: NULL argument");
    for (int i = 0; i < e->nbindings; i++) {
        const ldt_tensor *t = e->bindings[i].t;
        const char *nm = LDT__P(t)->name; /* inputs are persistent */
        if (!nm || strcmp(nm, name) != 0) continue;
        if (nbytes != ldt__nbytes(t))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind '%s': %lld bytes given, the input holds %lld",
                     name, (long long)nbytes, (long long)ldt__nbytes(t));
        e->bindings[i].ptr = data;
        e->rebind = 1;
        for (int r = 0; e->is_cuda && r < e->nranks; r++) /* copied from there to the device */
            if (cuda_local(e, r)) LDT_CHECK(ldt__cuda_exec_bind_input(e->cuda[r], t, data));
        return LDT_OK;
    }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind: the executable has no input named '%s'", name);
}

/* ---------------------------------------------------------------------------------------
 * Compile and destroy.
 */
int ldt__exec_binding_of(ldt_exec *e, const ldt_tensor *t) {
    for (int i = 0; i < e->nbindings; i++)
        if (e->bindings[i].t == t) return i;
    return -1;
}

void ldt__exec_destroy(ldt_exec *e) {
    if (!e) return;
    if (e->ctx && e->ctx->stale_exec == e) e->ctx->host_flush(e->ctx); /* its ranks hold the newest values */
    destroy_cuda(e);
    free(e->cuda_src);
    free(e->cuda_ver);
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs = e->ranks[r];
        if (!rs) continue;
        commq_stop(rs);
        for (int64_t i = 0; rs->ins && i < rs->nins; i++) {
            ldt_redist_runner_destroy(rs->ins[i].runner);
            free(rs->ins[i].scratch);
        }
        for (int64_t i = 0; rs->ins && rs->prog && i < rs->prog->nins; i++)
            free((void *)rs->ins[i].call.plan); /* kernel plans (ldt__cpu_kernel_bind) */
        free(rs->cin);
        free(rs->cshapes);
        free(rs->cdtypes);
        for (unsigned m = 0; m < (1u << LDT_MAX_DIMS); m++) ldt_comm_destroy(rs->groups[m]);
        for (int32_t v = 0; rs->val && v < rs->prog->nvals; v++)
            if (rs->mem.offset && rs->mem.offset[v] < 0 && rs->val[v]) free(rs->val[v]);
        ldt__mem_plan_free(&rs->mem);
        free(rs->arena);
        free(rs->val);
        free(rs->val_now);
        free(rs->whole_input);
        free(rs->ins);
        free(rs->opnds);
        free(rs->rand);
        free(rs->prof);
        free(rs->assign_load);
        free(rs);
    }
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program_free(e->progs[r]);
        free(e->progs[r]);
    }
    for (int64_t i = 0; i < e->nrplans; i++) ldt_redist_plan_destroy(e->rplans[i]);
    for (int i = 0; i < e->nout + e->nassign; i++) ldt_shards_destroy(e->outs[i].shards);
    ldt_threads_destroy(e->threads);
    free(e->progs);
    free(e->rplans);
    free(e->ranks);
    free(e->outs);
    free(e->inplace);
    free(e->gathered);
    free(e->bindings);
    free(e->trace_path);
    free(e->key);
    free(e);
}

/* Collective fusion on every rank's program, with the same decisions on every rank. */
static ldt_status fuse_all(ldt_exec *e, const ldt_compile_options *o) {
    int64_t nins = -1, *bytes = NULL, cap = o && o->bucket_bytes > 0 ? o->bucket_bytes : 25 << 20;
    int same = 1;
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program *p = e->progs[r];
        uint8_t *keep;
        ldt__fuse_stats fs;
        if (!p) continue;
        e->collectives_unfused = ldt__program_collectives(p) > e->collectives_unfused
                                     ? ldt__program_collectives(p) : e->collectives_unfused;
        for (int d = 0; d < ldt_mesh_ndim(e->mesh) && d < LDT_MAX_DIMS; d++) {
            int64_t c = ldt__program_collectives_on(p, d);
            if (c > e->dim_collectives_unfused[d]) e->dim_collectives_unfused[d] = c;
        }
        if (o && o->no_fuse) continue;
        if (!(keep = calloc((size_t)(p->nvals ? p->nvals : 1), 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int i = 0; i < e->nout + e->nassign; i++) keep[p->node_val[e->outs[i].node]] = 1;
        /* a GPU loads a parameter's shard once, not every step (the CPU reloads zeros): an
         * all_reduce in place over it would reduce it again at every replay */
        for (int64_t i = 0; ldt_mesh_device(e->mesh) == LDT_DEVICE_CUDA && i < p->nins; i++)
            if (p->ins[i].kind == LDT__I_LOAD && p->ins[i].src->op != LDT_OP_INPUT) keep[p->ins[i].out] = 1;
        st = ldt__fuse_in_place(p, keep, &fs);
        free(keep);
        LDT_CHECK(st);
        if (nins >= 0 && p->nins != nins) same = 0;
        nins = p->nins;
    }
    if (o && o->no_fuse) goto count;
    if (same && nins > 0) {
        if (!(bytes = calloc((size_t)nins, sizeof *bytes))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int r = 0; r < e->nprogs; r++) /* the largest over ranks: every rank decides alike */
            for (int64_t i = 0; e->progs[r] && i < nins; i++) {
                const ldt__program *p = e->progs[r];
                int64_t b = ldt__value_bytes(&p->vals[p->ins[i].out]);
                if (b > bytes[i]) bytes[i] = b;
            }
        for (int r = 0; r < e->nprogs && st == LDT_OK; r++) {
            ldt__fuse_stats fs;
            memset(&fs, 0, sizeof fs);
            if (e->progs[r]) st = ldt__fuse_buckets(e->progs[r], bytes, cap, &fs);
            if (st == LDT_OK && fs.groups > e->collective_groups) e->collective_groups = fs.groups;
        }
        free(bytes);
        LDT_CHECK(st);
    }
count:
    for (int r = 0; r < e->nprogs; r++) {
        const ldt__program *p = e->progs[r];
        int64_t last_mm = -1, early = 0;
        if (!p) continue;
        if (ldt__program_collectives(p) > e->collectives) e->collectives = ldt__program_collectives(p);
        for (int d = 0; d < ldt_mesh_ndim(e->mesh) && d < LDT_MAX_DIMS; d++) {
            int64_t c = ldt__program_collectives_on(p, d);
            if (c > e->dim_collectives[d]) e->dim_collectives[d] = c;
        }
        for (int64_t i = 0; i < p->nins; i++)
            if (p->ins[i].kind == LDT__I_KERNEL && (p->ins[i].op == LDT_OP_MATMUL || p->ins[i].op == LDT_OP_LINEAR))
                last_mm = i;
        for (int64_t i = 0; i < last_mm; i++) early += p->ins[i].kind == LDT__I_ALL_REDUCE;
        if (early > e->early_all_reduces) e->early_all_reduces = early;
    }
    return LDT_OK;
}

/* Overlap: every rank's collectives split into start and wait; the modeled step with and
 * without it. */
static ldt_status schedule_all(ldt_exec *e, const ldt_compile_options *o) {
    ldt_cost_model cm;
    if (o && o->plan.cost) cm = *o->plan.cost;
    else LDT_CHECK(ldt_cost_model_preset("uniform", &cm));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int overlap = o && o->overlap ? o->overlap > 0 : cores >= 2L * ldt_mesh_nranks(e->mesh);
    if (overlap) e->collective_groups = 0; /* the schedule issues them one by one, overlapped */
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program *p = e->progs[r];
        double serial, over;
        int64_t moved = 0;
        if (!p) continue;
        ldt__model_step(p, &cm, e->mesh, &serial, &over);
        if (overlap) {
            LDT_CHECK(ldt__schedule_overlap(p, &moved));
            ldt__model_step(p, &cm, e->mesh, &serial, &over);
        }
        if (serial > e->model_serial) e->model_serial = serial;
        if (over > e->model_overlap) e->model_overlap = over;
        if (moved > e->moved_starts) e->moved_starts = moved;
    }
    return LDT_OK;
}

/* Parameters persist in place only if the value assigned to each is in the placement the
 * parameter is loaded in. Where the plan chose another (say, an update on dp shards), the
 * assigned value is redistributed to the parameter's placement inside the step (the gather
 * ZeRO does) and the step planned again with the parameters held where they were. */
static ldt_status assign_in_param_placement(ldt_ctx *ctx, const ldt_compile_options *o, ldt_plan **plan) {
    ldt_placement *saved = NULL;
    ldt_tensor **pinned = NULL;
    int npinned = 0, nd = ldt_mesh_ndim(ctx->mesh);
    ldt_status st = LDT_OK;
    if (ldt_mesh_device(ctx->mesh) == LDT_DEVICE_META || !ctx->nkeeps) return LDT_OK;
    for (int64_t k = 0; k < ctx->nkeeps && st == LDT_OK; k++) {
        ldt_tensor *p = ctx->keeps[k], *src = LDT__P(p)->source, *r;
        ldt_placement pp[LDT_MAX_DIMS], ps[LDT_MAX_DIMS];
        int same = 1;
        if (p->op != LDT_OP_PARAM || !src) continue;
        if (ldt_plan_placements(*plan, p, pp, LDT_MAX_DIMS) != LDT_OK) continue; /* not read in the step */
        if ((st = ldt_plan_placements(*plan, src, ps, LDT_MAX_DIMS)) != LDT_OK) break;
        for (int d = 0; d < nd; d++) same &= ldt_placement_equal(&pp[d], &ps[d]);
        if (same) continue;
        if (!pinned) {
            pinned = calloc((size_t)ctx->nkeeps, sizeof *pinned);
            saved = calloc((size_t)ctx->nkeeps * LDT_MAX_DIMS + 1, sizeof *saved);
            if (!pinned || !saved) {
                st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
                break;
            }
        }
        if (!(r = ldt_redistribute_to(src, pp, nd))) {
            st = ldt__error(ctx->status, "compile: %s", ctx->errmsg);
            break;
        }
        LDT__P(p)->source = r;
        /* the parameter held where it is for the second plan; the pin is put back after */
        pinned[npinned] = p;
        if (p->pin) memcpy(&saved[(size_t)npinned * LDT_MAX_DIMS], p->pin, (size_t)nd * sizeof *saved);
        else saved[(size_t)npinned * LDT_MAX_DIMS].kind = 0xff; /* none */
        npinned++;
        st = ldt_pin(p, pp, nd);
    }
    if (st == LDT_OK && npinned) {
        ldt_plan_destroy(*plan);
        *plan = NULL;
        st = ldt_plan_create(ctx, o ? &o->plan : NULL, plan);
    }
    for (int i = 0; i < npinned; i++) {
        if (saved[(size_t)i * LDT_MAX_DIMS].kind == 0xff) pinned[i]->pin = NULL;
        else memcpy(pinned[i]->pin, &saved[(size_t)i * LDT_MAX_DIMS], (size_t)nd * sizeof *saved);
    }
    free(pinned);
    free(saved);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * A CUDA mesh: each rank's program bound and captured by the CUDA backend (exec/backend_cuda.h),
 * a GPU per rank (rank r on device r % devices), the ranks of a process each in a rank thread;
 * with more than one rank, every rank's NCCL world bootstraps through the rank threads' world
 * or, in process mode, the MPI world. A training step's assigned values stay on the devices:
 * those that persist in place (find_inplace) are copied over their parameter's shard at the
 * end of the captured step; the others come home into their tensors after each replay (and so
 * are reloaded, their version having moved).
 */

/* Whether world rank r's program runs in this process. */
static int cuda_local(const ldt_exec *e, int r) { return e->cuda && e->cuda[r]; }

/* Value v of rank r's program into the rank's piece of shards s (this process's ranks). */
static ldt_status cuda_shard_home(ldt_exec *e, int r, int32_t v, ldt_shards *s) {
    int64_t nb;
    void *dst = ldt_shards_local(s, r, &nb);
    if (!nb) return LDT_OK;
    return ldt__cuda_exec_read(e->cuda[r], v, dst, nb);
}

/* The host data of every tensor a CUDA executable assigned in place, from the devices: each
 * rank's shard copied back and scattered into its tensor (the CPU's host_flush, for the
 * buffers GPUs hold); in process mode through the shards, gathered over the world. */
static ldt_status host_flush_cuda(ldt_ctx *ctx) {
    ldt_exec *e = ctx->stale_exec;
    ctx->stale_exec = NULL;
    if (!e) return LDT_OK;
    e->host_copies++;
    for (int a = 0; a < e->nassign; a++) {
        ldt_tensor *t = e->outs[e->nout + a].assign_to;
        if (!e->inplace[a]) continue;
        if (e->world) {
            ldt_shards *sh = e->outs[e->nout + a].shards;
            rank_state *rs = e->ranks[e->me];
            LDT_CHECK(cuda_shard_home(e, e->me, rs->prog->ins[rs->assign_load[a]].out, sh));
            LDT_CHECK(gather_shards(e, sh));
            LDT_CHECK(ldt_full_tensor(sh, t->data));
            continue;
        }
        for (int r = 0; r < e->nranks; r++) {
            rank_state *rs = e->ranks[r];
            const ldt__instr *x;
            const ldt__kregion *kr;
            int64_t nb;
            void *tmp;
            ldt_status st;
            if (!rs || !cuda_local(e, r)) continue;
            x = &rs->prog->ins[rs->assign_load[a]];
            kr = &rs->prog->regions[x->region];
            nb = ldt__value_bytes(&rs->prog->vals[x->out]);
            if (!nb) continue;
            if (!(tmp = malloc((size_t)nb))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "host copy: out of memory");
            st = ldt__cuda_exec_read(e->cuda[r], x->out, tmp, nb);
            if (st == LDT_OK)
                ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype), t->data, tmp, 0);
            free(tmp);
            LDT_CHECK(st);
        }
    }
    return LDT_OK;
}

/* Rank r's step: its NCCL world (more than one rank, bootstrapped through boot), then its
 * program bound, validated and captured on its device. Collective over the mesh's ranks. */
static ldt_status cuda_rank_build(ldt_exec *e, int r, ldt_comm *boot) {
    const ldt__program *p = e->progs[r];
    rank_state *rs = e->ranks[r];
    int32_t *outs = NULL, *csrc = NULL, *cdst = NULL;
    int nkeep = 0, ncopy = 0;
    ldt_status st = LDT_OK;
    LDT_CHECK(ldt__cuda_select_device(e->cuda_dev[r]));
    if (e->nranks > 1) LDT_CHECK(ldt_nccl_world(boot, e->cuda_dev[r], NULL, &e->nccl[r]));
    outs = malloc((size_t)(e->nout + e->nassign + 1) * sizeof *outs);
    csrc = malloc((size_t)(e->nassign + 1) * sizeof *csrc);
    cdst = malloc((size_t)(e->nassign + 1) * sizeof *cdst);
    if (!outs || !csrc || !cdst) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int i = 0; i < e->nout + e->nassign; i++) {
        int32_t v = p->node_val[e->outs[i].node];
        int a = i - e->nout;
        if (a >= 0 && e->inplace[a]) { /* over the parameter's shard, in the graph */
            csrc[ncopy] = v;
            cdst[ncopy++] = p->ins[rs->assign_load[a]].out;
        } else {
            outs[nkeep++] = v; /* read after each replay */
        }
    }
    {
        ldt__cuda_step cs = {outs, nkeep, csrc, cdst, ncopy, e->nranks, 0, e->nccl[r], e->mesh,
                             e->nranks > 1 ? boot : NULL};
        st = ldt__cuda_exec_create_step(p, &cs, &e->cuda[r]);
        if (st != LDT_OK) ldt__error_prefix(st, "compile rank %d", r);
    }
fail:
    free(outs);
    free(csrc);
    free(cdst);
    return st;
}

/* Process mode: each process's device is its place among the processes of its host (their
 * ranks in order) modulo the host's devices, whatever way mpirun spread the ranks over the
 * hosts. NCCL refuses two ranks of one communicator on one GPU, so a host with more processes
 * than devices is refused first, by name, on every process alike (the emulator's NCCL shares
 * a device). Collective over the world. */
static ldt_status place_processes(ldt_exec *e) {
    char host[256] = {0};
    int n = e->nranks, ndev = ldt_cuda_device_count(), local = 0, crowded = -1, on_crowded = 0;
    int64_t mine[2], *all = malloc((size_t)n * 2 * sizeof *all);
    ldt_status st;
    if (!all) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "?");
    mine[0] = (int64_t)(XXH3_64bits(host, strlen(host)) >> 1);
    mine[1] = ndev;
    st = ldt_all_gather(e->world, mine, all, 2, LDT_I64);
    for (int r = 0; r < n && st == LDT_OK; r++) {
        int on_host = 0; /* the processes on r's host */
        for (int q = 0; q < n; q++) on_host += all[2 * q] == all[2 * r];
        if (r < e->me && all[2 * r] == mine[0]) local++;
        if (crowded < 0 && on_host > all[2 * r + 1]) crowded = r, on_crowded = on_host;
    }
    if (st == LDT_OK && crowded >= 0 && !ldt_cuda_emulated()) /* the same verdict on every process */
        st = ldt__error(LDT_ERR_UNSUPPORTED, "compile: %d processes share rank %d's host, which has %lld GPUs, but "
                        "NCCL wants a GPU per rank: run at most one process per GPU", on_crowded, crowded,
                        (long long)all[2 * crowded + 1]);
    free(all);
    if (st == LDT_OK) e->cuda_dev[e->me] = local % ndev;
    return st;
}

static ldt_status cuda_build_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    return r < e->nranks && e->ranks[r] ? cuda_rank_build(e, r, world) : LDT_OK;
}

static ldt_status build_cuda(ldt_exec *e) {
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nranks; r++)
        if (r >= e->nprogs || !e->progs[r])
            LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh must hold every rank from 0 to %d (rank %d "
                     "is not on it)", e->nranks - 1, r);
    for (int r = 0; r < e->nranks; r++) /* what no device could run: refused first */
        if (!e->world || r == e->me) LDT_CHECK(ldt__cuda_program_check_ranks(e->progs[r], e->nranks));
    /* (every process reaches the world's gathers below: the checks above fail alike on all) */
    if (ldt_cuda_device_count() == 0)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh, but no CUDA device (the runtime reports none "
                 "or no driver)");
    /* NCCL refuses two ranks of one communicator on one GPU (the emulator's NCCL does not) */
    if (!e->world && e->nranks > 1 && ldt_cuda_device_count() < e->nranks && !ldt_cuda_emulated())
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh of %d rank threads needs a GPU per rank (NCCL "
                 "puts one rank on a GPU); this machine has %d: use a smaller mesh or a process per GPU "
                 "(--backend nccl under mpirun)", e->nranks, ldt_cuda_device_count());
    /* the devices copy parameters now: the host must hold their newest values */
    LDT_CHECK(ldt__host_sync(e->ctx));
    e->is_cuda = 1;
    e->cuda = calloc((size_t)e->nranks, sizeof *e->cuda);
    e->nccl = calloc((size_t)e->nranks, sizeof *e->nccl);
    e->cuda_dev = calloc((size_t)e->nranks, sizeof *e->cuda_dev);
    if (!e->cuda || !e->nccl || !e->cuda_dev) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nranks; r++) e->cuda_dev[r] = r % ldt_cuda_device_count();
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs;
        if (e->world && r != e->me) continue;
        if (!(rs = e->ranks[r] = calloc(1, sizeof *rs))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        rs->e = e;
        rs->rank = r;
        rs->prog = e->progs[r];
        rs->nins = rs->prog->nins;
    }
    LDT_CHECK(find_inplace(e));
    if (e->world) {
        LDT_CHECK(place_processes(e));
        LDT_CHECK(cuda_rank_build(e, e->me, e->world));
    } else if (e->nranks == 1) {
        LDT_CHECK(cuda_rank_build(e, 0, NULL));
    } else {
        LDT_CHECK(ldt_threads_create(e->nranks, NULL, &e->threads));
        LDT_CHECK(ldt_threads_run(e->threads, cuda_build_thread, e));
    }
    /* the parameters and constants the devices hold, with the versions they hold */
    for (int r = 0; r < e->nranks; r++)
        for (int64_t i = 0; cuda_local(e, r) && i < e->progs[r]->nins; i++) e->ncuda_src += e->progs[r]->ins[i].kind == LDT__I_LOAD;
    e->cuda_src = calloc((size_t)(e->ncuda_src ? e->ncuda_src : 1), sizeof *e->cuda_src);
    e->cuda_ver = calloc((size_t)(e->ncuda_src ? e->ncuda_src : 1), sizeof *e->cuda_ver);
    if (!e->cuda_src || !e->cuda_ver) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->ncuda_src = 0;
    for (int r = 0; r < e->nranks; r++)
        for (int64_t i = 0; cuda_local(e, r) && i < e->progs[r]->nins; i++) {
            const ldt__instr *x = &e->progs[r]->ins[i];
            int seen = 0;
            if (x->kind != LDT__I_LOAD || !x->src || x->src->op == LDT_OP_INPUT) continue;
            for (int k = 0; k < e->ncuda_src; k++) seen |= e->cuda_src[k] == x->src;
            if (seen) continue;
            e->cuda_src[e->ncuda_src] = x->src;
            e->cuda_ver[e->ncuda_src++] = LDT__P(x->src)->version;
        }
    for (int r = 0; r < e->nranks; r++) {
        if (!cuda_local(e, r)) continue;
        if (e->progs[r]->nins > e->instructions) e->instructions = e->progs[r]->nins;
        if (ldt__cuda_exec_arena_bytes(e->cuda[r]) > e->arena_bytes) e->arena_bytes = ldt__cuda_exec_arena_bytes(e->cuda[r]);
    }
    return st;
}

/* The versions the devices hold of tensor t: now `ver`. */
static void cuda_held(ldt_exec *e, const ldt_tensor *t, uint64_t ver) {
    for (int i = 0; i < e->ncuda_src; i++)
        if (e->cuda_src[i] == t) e->cuda_ver[i] = ver;
}

/* Rank r's replay at this step's place on the random stream (as the CPU replay patches it). */
static ldt_status cuda_rank_replay(ldt_exec *e, int r) {
    ldt_status st;
    LDT_CHECK(ldt__cuda_select_device(e->cuda_dev[r])); /* its stream's device, on any thread */
    LDT_CHECK(ldt__cuda_exec_set_rng(e->cuda[r], e->ctx->rng_offset - e->rng_base, 0));
    st = ldt__cuda_exec_replay(e->cuda[r]);
    if (st != LDT_OK && e->nranks > 1) return ldt__error_prefix(st, "replay rank %d", r);
    return st;
}

static ldt_status cuda_replay_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    return r < e->nranks && cuda_local(e, r) ? cuda_rank_replay(e, r) : LDT_OK;
}

static ldt_status replay_cuda(ldt_exec *e) {
    /* tensors changed on the host since the devices copied them: copied again */
    for (int i = 0; i < e->ncuda_src; i++) {
        const ldt_tensor *t = e->cuda_src[i];
        if (LDT__P(t)->version == e->cuda_ver[i]) continue;
        for (int r = 0; r < e->nranks; r++)
            if (cuda_local(e, r)) LDT_CHECK(ldt__cuda_exec_reload(e->cuda[r], t));
        cuda_held(e, t, LDT__P(t)->version);
    }
    if (e->threads) LDT_CHECK(ldt_threads_run(e->threads, cuda_replay_thread, e));
    else LDT_CHECK(cuda_rank_replay(e, e->world ? e->me : 0));
    e->ctx->rng_offset += e->rng_advance;
    e->ctx->trace_rng_base = e->ctx->rng_offset;
    e->replays++;
    /* assigned values: in place, the devices hold the new version already; otherwise the
     * value comes home into its tensor (and goes to the devices again at the next replay) */
    for (int a = 0; a < e->nassign; a++) {
        ldt__exec_out *o = &e->outs[e->nout + a];
        ldt_tensor *t = o->assign_to;
        if (!e->inplace[a]) {
            for (int r = 0; r < e->nranks; r++)
                if (cuda_local(e, r)) LDT_CHECK(cuda_shard_home(e, r, e->progs[r]->node_val[o->node], o->shards));
            if (e->world) LDT_CHECK(gather_shards(e, o->shards));
            LDT_CHECK(ldt_full_tensor(o->shards, t->data));
            LDT__P(t)->version++;
            continue;
        }
        LDT__P(t)->version++;
        cuda_held(e, t, LDT__P(t)->version);
    }
    if (e->any_inplace) {
        e->ctx->stale_exec = e;
        e->ctx->host_flush = host_flush_cuda;
    }
    return LDT_OK;
}

/* Output i of the last replay: every rank's shard from its device into the output's shards
 * (in process mode gathered over the world: collective), then the full tensor. */
static ldt_status read_cuda(ldt_exec *e, int i, void *dst) {
    ldt__exec_out *o = &e->outs[i];
    if (!e->world || e->gathered[i] != e->replays) {
        for (int r = 0; r < e->nranks; r++)
            if (cuda_local(e, r)) LDT_CHECK(cuda_shard_home(e, r, e->progs[r]->node_val[o->node], o->shards));
        if (e->world) {
            LDT_CHECK(gather_shards(e, o->shards));
            e->gathered[i] = e->replays;
        }
    }
    return ldt_full_tensor(o->shards, dst);
}

/* Each rank's step and NCCL world freed on its own thread (its device current). */
static ldt_status cuda_destroy_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    if (r >= e->nranks) return LDT_OK;
    ldt__cuda_exec_destroy(e->cuda[r]);
    ldt_nccl_world_destroy(e->nccl[r]);
    e->cuda[r] = NULL;
    e->nccl[r] = NULL;
    return LDT_OK;
}

static void destroy_cuda(ldt_exec *e) {
    if (!e->cuda) return;
    if (e->threads) ldt_threads_run(e->threads, cuda_destroy_thread, e);
    for (int r = 0; r < e->nranks; r++) { /* process mode, one rank, or threads that failed */
        ldt__cuda_exec_destroy(e->cuda[r]);
        ldt_nccl_world_destroy(e->nccl[r]);
    }
    free(e->cuda);
    free(e->nccl);
    free(e->cuda_dev);
}

ldt_status ldt__exec_build(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                           const ldt_compile_options *o, ldt_exec **out) {
    ldt_exec *e = calloc(1, sizeof *e);
    ldt_plan *plan = NULL;
    ldt_status st = LDT_OK;
    const ldt_mesh *mesh = ctx->mesh;
    ldt_compile_options oc;
    ldt_cost_model cm;
    if (!e) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    memset(&oc, 0, sizeof oc);
    e->me = -1;
    e->ctx = ctx;
    e->mesh = mesh;
    e->rng_base = ctx->trace_rng_base;
    e->rng_advance = ctx->rng_offset - ctx->trace_rng_base;
    if (o && o->trace_path && !(e->trace_path = strdup(o->trace_path)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->profile = e->trace_path != NULL || (o && o->profile);
    if (ctx->world) { /* process mode: one rank here; every process plans with rank 0's numbers */
        e->world = ctx->world;
        e->me = ldt_comm_rank(ctx->world);
        if (ldt_comm_size(ctx->world) != mesh->max_rank + 1)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "compile: the mesh has %d ranks but the world %d "
                          "processes; expected one process per rank", mesh->max_rank + 1,
                          ldt_comm_size(ctx->world));
        if (o) oc = *o;
        if (o && o->plan.cost) {
            cm = *o->plan.cost;
            LDT_CHECK_GOTO(ldt_broadcast(ctx->world, &cm, (int64_t)sizeof cm, LDT_U8, 0));
            oc.plan.cost = &cm;
        }
        o = &oc;
        if (e->trace_path && e->me > 0) { /* each process writes its rank's trace */
            char *p = malloc(strlen(e->trace_path) + 16);
            if (!p) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
            sprintf(p, "%s.rank%d", e->trace_path, e->me);
            free(e->trace_path);
            e->trace_path = p;
        }
    }
    LDT_CHECK_GOTO(ldt_plan_create(ctx, o ? &o->plan : NULL, &plan));
    LDT_CHECK_GOTO(assign_in_param_placement(ctx, o, &plan));
    e->plan_cost = ldt_plan_cost(plan);
    /* outputs, then the values assigned to persistent tensors (ldt_assign, ldt_keep): their
     * shape, dtype and chosen placements, and shards to gather into */
    if (!(e->outs = calloc((size_t)(nout + ctx->nkeeps ? nout + ctx->nkeeps : 1), sizeof *e->outs)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->nout = nout;
    e->nassign = (int)ctx->nkeeps;
    for (int i = 0; i < nout + e->nassign; i++) {
        ldt_spec spec;
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_tensor *src = i < nout ? outputs[i] : LDT__P(ctx->keeps[i - nout])->source;
        if (i >= nout) e->outs[i].assign_to = ctx->keeps[i - nout];
        LDT_CHECK_GOTO(ldt_plan_placements(plan, src, pl, LDT_MAX_DIMS));
        e->outs[i].node = src->id;
        e->outs[i].nbytes = ldt__nbytes(src);
        LDT_CHECK_GOTO(ldt_spec_init(&spec, mesh, src->shape, pl, ldt_mesh_ndim(mesh),
                                     (ldt_dtype)src->dtype));
        if (ldt_mesh_device(mesh) != LDT_DEVICE_META) LDT_CHECK_GOTO(ldt_shards_create(&spec, &e->outs[i].shards));
    }
    /* inputs, by name */
    for (int64_t v = 0; v < ctx->nnodes; v++)
        if (ctx->nodes[v]->op == LDT_OP_INPUT && ctx->nodes[v]->kind == LDT__PERSISTENT) e->nbindings++;
    if (!(e->bindings = calloc((size_t)(e->nbindings ? e->nbindings : 1), sizeof *e->bindings)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->nbindings = 0;
    for (int64_t v = 0; v < ctx->nnodes; v++)
        if (ctx->nodes[v]->op == LDT_OP_INPUT && ctx->nodes[v]->kind == LDT__PERSISTENT)
            e->bindings[e->nbindings++].t = ctx->nodes[v];
    LDT_CHECK_GOTO(ldt__plan_take_programs(plan, &e->progs, &e->nprogs, &e->rplans, &e->nrplans));
    e->nranks = mesh->max_rank + 1;
    LDT_CHECK_GOTO(fuse_all(e, o));
    LDT_CHECK_GOTO(schedule_all(e, o));
    if (!(e->ranks = calloc((size_t)e->nranks, sizeof *e->ranks)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (e->world) LDT_CHECK_GOTO(agree(e));
    if (ldt_mesh_device(mesh) == LDT_DEVICE_CUDA) {
        LDT_CHECK_GOTO(build_cuda(e));
        if (e->world && !(e->gathered = calloc((size_t)(e->nout ? e->nout : 1), sizeof *e->gathered)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        *out = e;
        e = NULL;
        goto fail;
    }
    for (int r = 0; r < e->nprogs && r < e->nranks; r++) {
        rank_state *rs;
        if (!e->progs[r] || (e->world && r != e->me)) continue;
        if (!(rs = e->ranks[r] = calloc(1, sizeof *rs))) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        rs->e = e;
        rs->rank = r;
        rs->prog = e->progs[r];
        LDT_CHECK_GOTO(bind_rank(e, rs));
        if (e->world) LDT_CHECK_GOTO(make_groups(e, rs));
        if (!(rs->val_now = malloc((size_t)(rs->prog->nvals ? rs->prog->nvals : 1) * sizeof *rs->val_now)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        memcpy(rs->val_now, rs->val, (size_t)rs->prog->nvals * sizeof *rs->val_now);
        if (e->profile && !(rs->prof = calloc((size_t)(rs->nins ? rs->nins : 1), sizeof *rs->prof)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        e->arena_bytes = rs->mem.arena_bytes > e->arena_bytes ? rs->mem.arena_bytes : e->arena_bytes;
        e->bound_bytes = rs->mem.bound_bytes > e->bound_bytes ? rs->mem.bound_bytes : e->bound_bytes;
        e->instructions = rs->nins > e->instructions ? rs->nins : e->instructions;
    }
    LDT_CHECK_GOTO(find_inplace(e));
    if (e->world && !(e->gathered = calloc((size_t)(e->nout ? e->nout : 1), sizeof *e->gathered)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (ldt_mesh_device(mesh) != LDT_DEVICE_META && !e->world)
        LDT_CHECK_GOTO(ldt_threads_create(e->nranks, NULL, &e->threads));
    *out = e;
    e = NULL;
fail:
    ldt_plan_destroy(plan);
    ldt__exec_destroy(e);
    return st;
}
