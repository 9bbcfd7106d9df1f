/* Binding one rank's program for the CPU replay (docs/replay.md): its arena and buffers,
 * every instruction's function and prepared call, the wrappers that run the instructions that
 * are not kernels (loads, fills, custom ops, collectives), and, in process mode, its groups. */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/dtype.h"
#include "core/error.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"
#include "exec/fill.h"
#include "exec/groups.h"
#include "exec/shards.h"
#include "planner/fuse.h"

/* ---------------------------------------------------------------------------------------
 * Bound instructions: a kernel call, or a wrapper with the same signature that finds its
 * instruction around the call (BIN_OF, exec/exec_internal.h).
 */
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

/* A custom op: c is its ldt__custom_call (the hot pair's argument), not a kernel call. */
static ldt_status w_custom(const ldt__kcall *c) {
    const ldt__custom_call *k = (const ldt__custom_call *)(const void *)c;
    ldt_status st;
    st = k->fn(k->nin, k->in, k->shapes, k->dtypes, k->out, &k->b->call.out.shape, (ldt_dtype)k->out_dtype,
               k->user);
    if (st != LDT_OK && !ldt_last_error()[0])
        ldt__error(st, "custom op %s: kernel returned %s", ldt__op_name(k->b->rs->e->ctx, k->b->call.op),
                   ldt_status_name(st));
    return st;
}

/* The custom call of instruction b: its arguments from the rank's pools, in order. */
static void bind_custom(rank_state *rs, binstr *b, int64_t *nc, int64_t *narg) {
    const ldt__custom_op *op = &rs->e->ctx->custom[b->call.op - LDT_OP_COUNT];
    ldt__custom_call *k = &rs->ccalls[*nc];
    (*nc)++;
    b->custom = k;
    k->b = b;
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


/* An all_reduce's group communicator: made at its first replay, kept in its record. */
static ldt_status group_of(binstr *b, const ldt__instr *x, ldt_comm **g) {
    if (!b->comm) LDT_CHECK(ldt__instr_group(b->rs->world, b->rs->e->mesh, b->rs->groups, x, &b->comm));
    *g = b->comm;
    return LDT_OK;
}

static ldt_status w_all_reduce(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    ldt_comm *g = NULL;
    LDT_CHECK(group_of(b, x, &g));
    if (ldt_comm_size(g) == 1) return LDT_OK;
    return ldt__all_reduce_bound(g, c->out.data, c->out.data, b->count, c->out.dtype, (ldt_reduce_op)x->reduce);
}

/* A packed bucket's reduced scratch back into its members. */
static void all_reduce_unpack(const binstr *b) {
    const ldt__program *p = b->rs->prog;
    const ldt__instr *x = &p->ins[b->idx];
    const char *at = b->scratch;
    for (int k = 0; k < b->call.nin; k++) {
        size_t nb = (size_t)ldt__value_bytes(&p->vals[p->ops[x->in + k]]);
        ldt__copy(b->call.in[k].data, at, nb);
        at += nb;
    }
}

/* A bucket that could not be placed contiguously: packed into scratch, reduced, unpacked. In
 * a grouped run the reduction is only queued until the run's last call (w_grouped): the
 * unpacking waits for it there. */
static ldt_status w_all_reduce_packed(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    ldt_comm *g = NULL;
    char *at = b->scratch;
    LDT_CHECK(group_of(b, x, &g));
    if (ldt_comm_size(g) == 1) return LDT_OK;
    for (int k = 0; k < c->nin; k++) {
        size_t nb = (size_t)ldt__value_bytes(&rs->prog->vals[rs->prog->ops[x->in + k]]);
        ldt__copy(at, c->in[k].data, nb);
        at += nb;
    }
    LDT_CHECK(ldt__all_reduce_bound(g, b->scratch, b->scratch, b->count, c->out.dtype, (ldt_reduce_op)x->reduce));
    if (!x->group) all_reduce_unpack(b);
    return LDT_OK;
}

/* ZeRO buckets (docs/replay.md, "ZeRO buckets"): a fused reduce_scatter or all_gather of
 * several tensors is one ldt_reduce_scatter_v / ldt_all_gather_v over the group. The side of
 * it that is one rank's own (the reduce_scatter's outputs, the all_gather's inputs) is one
 * memory-plan group, placed back to back in member order, so the call reads or writes it in
 * place; the side made of every rank's pieces of each member (the reduce_scatter's input, the
 * all_gather's output) needs them side by side by rank, which the members' own buffers are
 * not: it is packed (or unpacked) through the staging buffer, each piece a block of runs
 * (ldt__bucket_chunk: one run for a leading-dim split, one per row for a later dim's). The
 * layout is worked out at the first replay, when the group is made: b->zb holds the count per
 * group member q, then per member j and q its piece (ZP entries: offset and count in the
 * member's whole buffer, run length, run stride), then 1 where the own side is back to back. */
#define ZP 4
static ldt_status bucket_layout(binstr *b, const ldt__instr *x, ldt_comm *g) {
    rank_state *rs = b->rs;
    const ldt__program *p = rs->prog;
    int n = ldt_comm_size(g), k = x->nin, rsc = x->coll == LDT_COLL_REDUCE_SCATTER, me = ldt_comm_rank(g);
    size_t es = ldt__dtype_size((ldt_dtype)p->vals[x->out].dtype);
    int64_t *z = calloc((size_t)(n + ZP * (int64_t)k * n + 1), sizeof *z), total = 0, own = 0;
    const char *at;
    if (!z) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "replay: out of memory for a bucket of %d", k);
    for (int j = 0; j < k; j++)
        for (int q = 0; q < n; q++) {
            int64_t *pc = z + n + ZP * ((int64_t)j * n + q);
            ldt__bucket_piece bp;
            if (!ldt__bucket_chunk(p->bplans[x->bplan + j], rs->rank, ldt_comm_world_rank(g, q), &bp)) {
                free(z);
                LDT_FAIL(LDT_ERR_INTERNAL, "replay: rank %d, instruction %lld: bucket member %d is not one block "
                         "for group member %d", rs->rank, (long long)b->idx, j, q);
            }
            pc[0] = bp.off, pc[1] = bp.cnt, pc[2] = bp.run, pc[3] = bp.stride;
            z[q] += pc[1];
            total += pc[1];
        }
    /* the own side: member j's value holds exactly its piece for this rank, back to back */
    at = rs->val[p->ops[x->in + (rsc ? k : 0)]];
    z[n + ZP * (int64_t)k * n] = 1;
    for (int j = 0; j < k; j++) {
        int32_t v = p->ops[x->in + (rsc ? k : 0) + j];
        int64_t piece = z[n + ZP * ((int64_t)j * n + me) + 1];
        if (ldt__value_bytes(&p->vals[v]) != piece * (int64_t)es) {
            free(z);
            LDT_FAIL(LDT_ERR_INTERNAL, "replay: rank %d, instruction %lld: bucket member %d holds %lld bytes, "
                     "its piece %lld", rs->rank, (long long)b->idx, j, (long long)ldt__value_bytes(&p->vals[v]),
                     (long long)(piece * (int64_t)es));
        }
        if (rs->val[v] != at) z[n + ZP * (int64_t)k * n] = 0;
        at = (const char *)rs->val[v] + piece * (int64_t)es;
        own += piece;
    }
    if (!(b->scratch = malloc((size_t)(total + own) * es + 1))) {
        free(z);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "replay: out of memory for a bucket of %lld bytes", (long long)(total * (int64_t)es));
    }
    b->zb = z;
    return LDT_OK;
}

/* Copies piece pc (ZP entries, above) of a member's whole buffer `whole` to or from the
 * packed run at `packed` (unpack: packed into whole); es bytes an element. */
static void piece_copy(char *whole, char *packed, const int64_t *pc, size_t es, int unpack) {
    int64_t nrun = pc[2] ? pc[1] / pc[2] : 0;
    size_t rb = (size_t)(pc[2] * (int64_t)es);
    for (int64_t r = 0; r < nrun; r++) {
        char *w = whole + (pc[0] + r * pc[3]) * (int64_t)es, *s = packed + r * (int64_t)rb;
        if (unpack) ldt__copy(w, s, rb);
        else ldt__copy(s, w, rb);
    }
}

static ldt_status w_bucket(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    rank_state *rs = b->rs;
    const ldt__program *p = rs->prog;
    const ldt__instr *x = &p->ins[b->idx];
    int k = x->nin, rsc = x->coll == LDT_COLL_REDUCE_SCATTER, n, me;
    size_t es = ldt__dtype_size(c->out.dtype);
    ldt_comm *g = NULL;
    char *stage, *own;
    int64_t total = 0;
    const int64_t *z;
    LDT_CHECK(group_of(b, x, &g));
    if (!b->zb) LDT_CHECK(bucket_layout(b, x, g));
    n = ldt_comm_size(g);
    me = ldt_comm_rank(g);
    z = b->zb;
    for (int q = 0; q < n; q++) total += z[q];
    stage = b->scratch;
    /* the own side in place when back to back, else after the staged side */
    own = !z[n + ZP * (int64_t)k * n] ? stage + total * (int64_t)es
          : rsc                          ? (char *)rs->val[p->ops[x->in + k]]
                                         : (char *)(uintptr_t)c->in[0].data;
    if (rsc) {
        char *at = stage;
        for (int q = 0; q < n; q++) /* by rank, then member: each rank's segment is one run */
            for (int j = 0; j < k; j++) {
                const int64_t *pc = z + n + ZP * ((int64_t)j * n + q);
                if (pc[1]) piece_copy((char *)(uintptr_t)c->in[j].data, at, pc, es, 0);
                at += pc[1] * (int64_t)es;
            }
        LDT_CHECK(ldt_reduce_scatter_v(g, stage, own, z, c->out.dtype, (ldt_reduce_op)x->reduce));
        if (own != (char *)rs->val[p->ops[x->in + k]])
            for (int64_t j = 0, off = 0; j < k; j++) {
                int64_t nb = z[n + ZP * (j * n + me) + 1] * (int64_t)es;
                if (nb) ldt__copy(rs->val[p->ops[x->in + k + j]], own + off, (size_t)nb);
                off += nb;
            }
        return LDT_OK;
    }
    if (own != (char *)c->in[0].data)
        for (int64_t j = 0, off = 0; j < k; j++) {
            int64_t nb = z[n + ZP * (j * n + me) + 1] * (int64_t)es;
            if (nb) ldt__copy(own + off, c->in[j].data, (size_t)nb);
            off += nb;
        }
    LDT_CHECK(ldt_all_gather_v(g, own, stage, z, c->out.dtype));
    {
        char *at = stage;
        for (int q = 0; q < n; q++)
            for (int j = 0; j < k; j++) {
                const int64_t *pc = z + n + ZP * ((int64_t)j * n + q);
                if (pc[1]) piece_copy((char *)rs->val[p->ops[x->in + k + j]], at, pc, es, 1);
                at += pc[1] * (int64_t)es;
            }
    }
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
        /* the run's calls have run: its packed buckets unpack now */
        for (int64_t i = b->idx; st == LDT_OK && i >= 0; i--) {
            const binstr *r = &b->rs->ins[i];
            if (r->gfn == w_all_reduce_packed && ldt_comm_size(r->comm) > 1) all_reduce_unpack(r);
            if (b->rs->prog->ins[i].group == 1) break;
        }
    }
    return st;
}

static ldt_status w_redist(const ldt__kcall *c) {
    binstr *b = BIN_OF(c);
    if (!b->runner) LDT_CHECK(ldt_redist_runner_create(b->rs->world, b->rs->prog->ins[b->idx].plan, &b->runner));
    return ldt_redist_runner_run(b->runner, c->in[0].data, c->out.data);
}

/* ---------------------------------------------------------------------------------------
 * THE CHOICE OF A KERNEL INSTRUCTION'S FUNCTION: the one place. Called once per KERNEL
 * instruction at bind, after its call is complete (operands, shapes, dtypes, attributes,
 * buffers, region). A custom op runs through w_custom (its call prepared by bind_custom); a
 * built-in op through its CPU kernel. Bind-time kernel plans (ldt__cpu_kernel_bind: the
 * function and b->call.plan chosen here, checked once) belong here; a plan made here is freed
 * with the cold records (ldt__exec_destroy, exec/compile.c).
 */
static ldt_status bind_kernel_fn(rank_state *rs, binstr *b, ldt__kernel_fn *fn) {
    const ldt__instr *x = &rs->prog->ins[b->idx];
    if (x->op >= LDT_OP_COUNT) {
        *fn = w_custom;
        return LDT_OK;
    }
    { /* checked once here (kernels/cpu/kernel.h); the plan, b->call.plan, is freed with the
       * cold records */
        void *kplan = NULL;
        ldt_status st = ldt__cpu_kernel_bind(&b->call, fn, &kplan);
        if (st != LDT_OK)
            return ldt__error_prefix(st, "compile: rank %d, instruction %lld (%s of node %%%d)", rs->rank,
                                     (long long)b->idx, ldt__instr_name(rs->e->ctx, x), x->node);
    }
    return LDT_OK;
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

ldt_status ldt__bind_rank(ldt_exec *e, rank_state *rs) {
    const ldt__program *p = rs->prog;
    uint8_t *outside = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    uint8_t *keep = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    int64_t nops = 0, nrand = 0, ncustom = 0, ncarg = 0;
    ldt_status st = LDT_OK;
    if (!outside || !keep) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    rs->val = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *rs->val);
    rs->whole_input = calloc((size_t)(e->nbindings ? e->nbindings : 1), 1);
    /* 64-byte aligned: four hot pairs to a cache line (sizes rounded up, as aligned_alloc
     * asks) */
    rs->hot = aligned_alloc(64, ((size_t)(p->nins ? p->nins : 1) * sizeof *rs->hot + 63) / 64 * 64);
    rs->ins = aligned_alloc(64, ((size_t)(p->nins ? p->nins : 1) * sizeof *rs->ins + 63) / 64 * 64);
    if (rs->ins) memset(rs->ins, 0, (size_t)(p->nins ? p->nins : 1) * sizeof *rs->ins);
    if (!rs->val || !rs->whole_input || !rs->hot || !rs->ins)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
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
    rs->ccalls = aligned_alloc(64, (size_t)(ncustom ? ncustom : 1) * sizeof *rs->ccalls);
    if (rs->ccalls) memset(rs->ccalls, 0, (size_t)(ncustom ? ncustom : 1) * sizeof *rs->ccalls);
    if (!rs->cin || !rs->cshapes || !rs->cdtypes || !rs->ccalls)
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
            if (x->op >= LDT_OP_COUNT) bind_custom(rs, b, &ncustom, &ncarg);
            LDT_CHECK_GOTO(bind_kernel_fn(rs, b, &b->fn));
            if (draws_random(x)) {
                rs->rand[rs->nrand].attrs = (ldt__attrs *)x->attrs; /* the program's own copy */
                rs->rand[rs->nrand++].offset = (uint64_t)x->attrs->i[1];
            }
            break;
        case LDT__I_REDIST: b->fn = w_redist; break;
        case LDT__I_ALL_REDUCE:
            b->fn = w_all_reduce;
            b->count = ldt__value_bytes(&p->vals[x->out]) / (int64_t)ldt__dtype_size(b->call.out.dtype);
            if (x->nin > 1) { /* a fused bucket: contiguous (the memory plan's groups) or packed */
                int64_t total = 0;
                int contiguous = 1;
                for (int k = 0; k < x->nin; k++) {
                    int32_t v = p->ops[x->in + k];
                    if (k && (char *)rs->val[v] != (char *)b->call.in[0].data + total) contiguous = 0;
                    total += ldt__value_bytes(&p->vals[v]);
                }
                b->count = total / (int64_t)ldt__dtype_size(b->call.out.dtype);
                /* contiguous: one in-place call over the whole range (out is the first member) */
                b->fn = contiguous ? w_all_reduce : w_all_reduce_packed;
                if (!contiguous) {
                    if (!(b->scratch = malloc((size_t)(total ? total : 1))))
                        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
                    rs->e->pack_buckets++;
                    rs->e->packed_all_reduces++;
                }
            }
            { /* its arguments checked once, here: the replay's call checks nothing */
                void *buf = b->scratch ? b->scratch : x->nin > 1 ? b->call.in[0].data : b->call.out.data;
                if ((st = ldt__all_reduce_check(buf, buf, b->count, b->call.out.dtype, (ldt_reduce_op)x->reduce)) != LDT_OK) {
                    st = ldt__error_prefix(st, "compile: rank %d, instruction %lld", rs->rank, (long long)i);
                    goto fail;
                }
            }
            break;
        case LDT__I_BUCKET:
            b->fn = w_bucket;
            rs->e->pack_buckets++; /* one side is always staged (bucket_layout) */
            break;
        case LDT__I_FILL: b->fn = w_fill; break;
        case LDT__I_WAIT: b->fn = ldt__w_wait; break;
        case LDT__I_SEND:
        case LDT__I_RECV:
        case LDT__I_SEND_WAIT:
            b->fn = ldt__p2p_fn(x->kind);
            b->count = ldt__value_bytes(&p->vals[x->out]) / (int64_t)ldt__dtype_size(b->call.out.dtype);
            break;
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
            if ((p->ins[i].kind == LDT__I_REDIST || p->ins[i].kind == LDT__I_ALL_REDUCE ||
                 p->ins[i].kind == LDT__I_BUCKET) && p->ins[i].async) {
                rs->ins[i].afn = rs->ins[i].fn;
                rs->ins[i].fn = ldt__w_start;
                rs->ins[i].done_gen = UINT64_MAX;
                nasync++;
            }
        if (nasync) {
            rs->has_async = 1;
            LDT_CHECK_GOTO(ldt__commq_start(rs, nasync));
        }
    }
    { /* a built-in kernel's call, copied back to back with the others': its replay reads the
       * hot pair, this call, its operands and its plan, and no cold record (a wrapper finds its
       * record from its call, BIN_OF, so wrapped instructions keep pointing there) */
        int64_t nk = 0;
        for (int64_t i = 0; i < p->nins; i++)
            nk += p->ins[i].kind == LDT__I_KERNEL && !rs->ins[i].custom && rs->ins[i].fn != w_grouped;
        rs->kcalls = aligned_alloc(64, ((size_t)(nk ? nk : 1) * sizeof *rs->kcalls + 63) / 64 * 64);
        if (!rs->kcalls) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        nk = 0;
        for (int64_t i = 0; i < p->nins; i++)
            if (p->ins[i].kind == LDT__I_KERNEL && !rs->ins[i].custom && rs->ins[i].fn != w_grouped) {
                rs->kcalls[nk] = rs->ins[i].call;
                rs->ins[i].hcall = &rs->kcalls[nk++];
            }
    }
    for (int64_t i = 0; i < p->nins; i++) { /* the hot array: the functions chosen above */
        rs->hot[i].fn = rs->ins[i].fn;
        /* a custom op's argument is its call, on a line of its own (w_custom) */
        rs->hot[i].call = rs->ins[i].custom ? (const ldt__kcall *)(const void *)rs->ins[i].custom
                          : rs->ins[i].hcall ? rs->ins[i].hcall
                                             : &rs->ins[i].call;
    }
fail:
    free(outside);
    free(keep);
    return st;
}

/* Process mode: every communicator the rank's program uses, made now in program order (each
 * a collective over its members), so that a replay only calls collectives, which time out
 * and fail the world, and never group creation, which MPI cannot bound. */
ldt_status ldt__bind_groups(ldt_exec *e, rank_state *rs) {
    LDT_CHECK(ldt__p2p_channels(rs, e->world)); /* first: each pair's, in one order on both */
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &rs->prog->ins[i];
        binstr *b = &rs->ins[i];
        if ((x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET) && !b->comm)
            LDT_CHECK(ldt__instr_group(e->world, e->mesh, rs->groups, x, &b->comm));
        else if (x->kind == LDT__I_REDIST && !b->runner)
            LDT_CHECK(ldt_redist_runner_create(e->world, x->plan, &b->runner));
    }
    return LDT_OK;
}

ldt_status ldt__exec_bind_noop(ldt_exec *e, ldt__kernel_fn fn) {
    if (!e) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind noop: the executable is NULL");
    if (e->is_cuda) LDT_FAIL(LDT_ERR_UNSUPPORTED, "exec bind noop: a CUDA executable has no CPU replay loop");
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs = e->ranks[r];
        for (int64_t i = 0; rs && rs->hot && i < rs->nins; i++) rs->hot[i].fn = fn ? fn : rs->ins[i].fn;
    }
    return LDT_OK;
}
