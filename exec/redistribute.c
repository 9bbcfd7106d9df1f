/* Running redistribution plans on a communicator: each step as its collective over the
 * step's group, with every rank's data moved by region intersections (exact for uneven and
 * interleaved shards), and cross-mesh steps as grouped point-to-point sends. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/copy.h"
#include "core/error.h"
#include "exec/calibrate_internal.h"
#include "exec/redist_record.h"
#include "ldt/exec.h"
#include "planner/redistribute.h"
#include "planner/region.h"

/* ---------------------------------------------------------------------------------------
 * Copies over an intersection. The elements of a ∩ b are walked box by box (the product of
 * each dim's matched pieces, in increasing global order) and row-major inside a box; a
 * "packed" side is that walk's order, contiguous, so both ends of a message agree on it
 * without exchanging anything. The source is laid out as region a (or packed), the
 * destination as region b (or packed). Each contiguous run goes to emit(arg, source element
 * offset, destination element offset, elements).
 */
typedef void (*run_fn)(void *arg, int64_t src, int64_t dst, int64_t n);

static ldt_status isect_walk(const ldt_region *a, const ldt_region *b, int src_packed, int dst_packed,
                             run_fn emit, void *arg) {
    int nd = a->ndim;
    int64_t nseg[LDT_MAX_DIMS], astr[LDT_MAX_DIMS], bstr[LDT_MAX_DIMS], si[LDT_MAX_DIMS] = {0};
    ldt__seg *seg[LDT_MAX_DIMS], *all;
    int64_t cap = 0, p = 0;
    if (a->numel == 0 || b->numel == 0) return LDT_OK;
    if (nd == 0) {
        emit(arg, 0, 0, 1);
        return LDT_OK;
    }
    for (int d = 0; d < nd; d++) cap += ldt__dim_isect_cap(&a->runs[d], &b->runs[d]);
    all = malloc((size_t)cap * sizeof *all);
    if (!all) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    cap = 0;
    for (int d = 0; d < nd; d++) {
        seg[d] = all + cap;
        cap += ldt__dim_isect_cap(&a->runs[d], &b->runs[d]);
        nseg[d] = ldt__dim_isect(&a->runs[d], &b->runs[d], seg[d], NULL);
        if (nseg[d] == 0) {
            free(all);
            return LDT_OK;
        }
    }
    astr[nd - 1] = bstr[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) {
        astr[d] = astr[d + 1] * a->local_shape.dims[d + 1];
        bstr[d] = bstr[d + 1] * b->local_shape.dims[d + 1];
    }
    for (;;) {
        int64_t len[LDT_MAX_DIMS], e[LDT_MAX_DIMS] = {0}, a0 = 0, b0 = 0;
        for (int d = 0; d < nd; d++) {
            const ldt__seg *s = &seg[d][si[d]];
            len[d] = s->len;
            a0 += s->a * astr[d];
            b0 += s->b * bstr[d];
        }
        for (;;) {
            int64_t ao = a0, bo = b0;
            for (int d = 0; d < nd - 1; d++) {
                ao += e[d] * astr[d];
                bo += e[d] * bstr[d];
            }
            emit(arg, src_packed ? p : ao, dst_packed ? p : bo, len[nd - 1]);
            p += len[nd - 1];
            int d = nd - 2;
            for (; d >= 0; d--) {
                if (++e[d] < len[d]) break;
                e[d] = 0;
            }
            if (d < 0) break;
        }
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++si[d] < nseg[d]) break;
            si[d] = 0;
        }
        if (d < 0) break;
    }
    free(all);
    return LDT_OK;
}

typedef struct copy_arg {
    const char *src;
    char *dst;
    size_t es;
    int64_t ps, pd, pn; /* the pending run (elements; pn 0: none) */
} copy_arg;

static void copy_flush(copy_arg *c) {
    if (c->pn) ldt__copy(c->dst + (size_t)c->pd * c->es, c->src + (size_t)c->ps * c->es, (size_t)c->pn * c->es);
    c->pn = 0;
}

/* A run, merged with the pending one where both ends continue it (as rec_run merges a
 * recording's): a chunk of rows copies as one call, not one per row. Row by row, with plain
 * memcpy, a copy whose destination lay 16 bytes past its source modulo 4 KiB (two buffers
 * malloc'd one after the other) ran at 1.9 GB/s on a 2-core machine where one memcpy of it ran
 * at 20; that offset is memcpy's slow case (core/copy.h), which ldt__copy now avoids at any
 * length, and the merge still saves a call per row. */
static void copy_run(void *arg, int64_t s, int64_t d, int64_t n) {
    copy_arg *c = arg;
    if (c->pn && c->ps + c->pn == s && c->pd + c->pn == d) {
        c->pn += n;
        return;
    }
    copy_flush(c);
    c->ps = s;
    c->pd = d;
    c->pn = n;
}

static ldt_status isect_copy(const ldt_region *a, const ldt_region *b, size_t es, const char *src,
                             int src_packed, char *dst, int dst_packed) {
    copy_arg c = {src, dst, es, 0, 0, 0};
    ldt_status st = isect_walk(a, b, src_packed, dst_packed, copy_run, &c);
    copy_flush(&c);
    return st;
}

/* The value that leaves a reduction unchanged: what Shard -> Partial pads with. */
static void fill_identity(void *buf, int64_t n, ldt_dtype dt, ldt_reduce_op op) {
    int hi = op == LDT_REDUCE_MIN; /* min pads with the largest value, max with the smallest */
    if (op == LDT_REDUCE_SUM || op == LDT_REDUCE_AVG) {
        memset(buf, 0, (size_t)n * ldt_dtype_size(dt));
        return;
    }
    for (int64_t i = 0; i < n; i++) switch (dt) {
        case LDT_F32: ((float *)buf)[i] = hi ? INFINITY : -INFINITY; break;
        case LDT_F64: ((double *)buf)[i] = hi ? INFINITY : -INFINITY; break;
        case LDT_F16: ((uint16_t *)buf)[i] = hi ? 0x7C00 : 0xFC00; break;
        case LDT_BF16: ((uint16_t *)buf)[i] = hi ? 0x7F80 : 0xFF80; break;
        case LDT_I32: ((int32_t *)buf)[i] = hi ? INT32_MAX : INT32_MIN; break;
        case LDT_I64: ((int64_t *)buf)[i] = hi ? INT64_MAX : INT64_MIN; break;
        case LDT_U8: ((uint8_t *)buf)[i] = hi ? 255 : 0; break;
        default: ((uint8_t *)buf)[i] = (uint8_t)hi; break; /* bool: AND pads true, OR false */
        }
}

/* ---------------------------------------------------------------------------------------
 * The runner: one rank's groups and buffers for a plan. It runs a plan on the CPU, or (rec
 * set) records it once for a device (exec/redist_record.h). Addresses are a buffer and a
 * byte offset (rref), so a recording names buffers it never touches.
 */
struct ldt_redist_runner {
    ldt_comm *world;
    const ldt_redist_plan *plan;
    int me;              /* world rank */
    ldt_comm **groups;   /* per step: this rank's group, or NULL (local, send_recv, absent) */
    char *buf[2];        /* ping-pong step outputs */
    int64_t bufbytes;
    char *scratch;       /* packed messages */
    int64_t scratch_cap;
    int64_t *counts;     /* 4 x (largest group or mesh) */
    ldt_region *regs;    /* 2 x that: the group's regions before and after */
    ldt__dredist *rec;   /* recording: ops are appended here and nothing runs */
    char *ptr[LDT__RB_N]; /* running: the buffers */
};

typedef struct rref {
    int buf;
    int64_t off; /* bytes */
} rref;

static rref at(int buf, int64_t off) {
    rref r = {buf, off};
    return r;
}

static char *ptr_of(ldt_redist_runner *r, rref a) {
    return a.off ? r->ptr[a.buf] + a.off : r->ptr[a.buf]; /* no offset on a NULL buffer */
}

static ldt_status rec_push(ldt_redist_runner *r, const ldt__dr_op *op) {
    ldt__dredist *d = r->rec;
    if (d->nops == d->cap) {
        int cap = d->cap ? 2 * d->cap : 8;
        ldt__dr_op *p = realloc(d->ops, (size_t)cap * sizeof *p);
        if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        d->ops = p;
        d->cap = cap;
    }
    d->ops[d->nops++] = *op;
    return LDT_OK;
}

typedef struct rec_arg {
    int64_t *runs, n, cap, s0, d0, es;
    int oom;
} rec_arg;

/* A run in bytes, merged with the previous one where both ends continue it. */
static void rec_run(void *arg, int64_t s, int64_t d, int64_t n) {
    rec_arg *a = arg;
    int64_t sb = a->s0 + s * a->es, db = a->d0 + d * a->es, nb = n * a->es;
    if (a->n && a->runs[3 * a->n - 3] + a->runs[3 * a->n - 1] == sb &&
        a->runs[3 * a->n - 2] + a->runs[3 * a->n - 1] == db) {
        a->runs[3 * a->n - 1] += nb;
        return;
    }
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 16, *p = realloc(a->runs, (size_t)cap * 3 * sizeof *p);
        if (!p) {
            a->oom = 1;
            return;
        }
        a->runs = p;
        a->cap = cap;
    }
    a->runs[3 * a->n] = sb;
    a->runs[3 * a->n + 1] = db;
    a->runs[3 * a->n + 2] = nb;
    a->n++;
}

/* Records a copy of runs[0..n) (taken) from buffer sbuf to dbuf: appended to the previous
 * copy between the same two buffers, one launch for both (its writes and these are disjoint,
 * and neither reads the other's destination buffer), or a new op. */
static ldt_status rec_copy(ldt_redist_runner *r, int sbuf, int dbuf, size_t es, int64_t *runs, int64_t n) {
    ldt__dr_op op, *last = r->rec->nops ? &r->rec->ops[r->rec->nops - 1] : NULL;
    if (last && last->kind == LDT__DR_COPY && last->src_buf == sbuf && last->dst_buf == dbuf &&
        sbuf != dbuf && last->es == (int)es) {
        int64_t *p = realloc(last->runs, (size_t)(last->nruns + n) * 3 * sizeof *p);
        if (!p) {
            free(runs);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
        }
        memcpy(p + 3 * last->nruns, runs, (size_t)n * 3 * sizeof *p);
        last->runs = p;
        last->nruns += n;
        free(runs);
        return LDT_OK;
    }
    memset(&op, 0, sizeof op);
    op.kind = LDT__DR_COPY;
    op.src_buf = sbuf;
    op.dst_buf = dbuf;
    op.es = (int)es;
    op.runs = runs;
    op.nruns = n;
    if (rec_push(r, &op) != LDT_OK) {
        free(runs);
        return ldt__trace(LDT_ERR_OUT_OF_MEMORY, __FILE__, __LINE__);
    }
    return LDT_OK;
}

/* Copies a ∩ b from src (region a, or packed) to dst (region b, or packed). */
static ldt_status r_copy(ldt_redist_runner *r, const ldt_region *a, const ldt_region *b, size_t es,
                         rref src, int src_packed, rref dst, int dst_packed) {
    rec_arg ra;
    ldt_status w;
    if (!r->rec) return isect_copy(a, b, es, ptr_of(r, src), src_packed, ptr_of(r, dst), dst_packed);
    memset(&ra, 0, sizeof ra);
    ra.s0 = src.off;
    ra.d0 = dst.off;
    ra.es = (int64_t)es;
    w = isect_walk(a, b, src_packed, dst_packed, rec_run, &ra);
    if (w != LDT_OK || ra.oom) {
        free(ra.runs);
        if (w != LDT_OK) return ldt__trace(w, __FILE__, __LINE__);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    if (!ra.n) return LDT_OK;
    return rec_copy(r, src.buf, dst.buf, es, ra.runs, ra.n);
}

/* A contiguous copy of bytes. */
static ldt_status r_memcpy(ldt_redist_runner *r, rref dst, rref src, int64_t bytes, size_t es) {
    int64_t *runs;
    if (!bytes) return LDT_OK;
    if (!r->rec) {
        if (ptr_of(r, dst) != ptr_of(r, src)) ldt__copy(ptr_of(r, dst), ptr_of(r, src), (size_t)bytes);
        return LDT_OK;
    }
    if (!(runs = malloc(3 * sizeof *runs))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    runs[0] = src.off;
    runs[1] = dst.off;
    runs[2] = bytes;
    return rec_copy(r, src.buf, dst.buf, es, runs, 1);
}

static ldt_status r_zero(ldt_redist_runner *r, rref dst, int64_t bytes, size_t es) {
    ldt__dr_op op;
    if (!bytes) return LDT_OK;
    if (!r->rec) {
        memset(ptr_of(r, dst), 0, (size_t)bytes);
        return LDT_OK;
    }
    memset(&op, 0, sizeof op);
    op.kind = LDT__DR_ZERO;
    op.dst_buf = dst.buf;
    op.dst_off = dst.off;
    op.bytes = bytes;
    op.es = (int)es;
    return rec_push(r, &op);
}

static ldt_status r_fill_identity(ldt_redist_runner *r, rref dst, int64_t n, ldt_dtype dt,
                                  ldt_reduce_op op) {
    ldt__dr_op o;
    if (!n) return LDT_OK;
    if (!r->rec) {
        fill_identity(ptr_of(r, dst), n, dt, op);
        return LDT_OK;
    }
    memset(&o, 0, sizeof o);
    o.kind = LDT__DR_FILL;
    o.dst_buf = dst.buf;
    o.dst_off = dst.off;
    o.es = (int)ldt_dtype_size(dt);
    o.bytes = n * o.es;
    fill_identity(o.pattern, 1, dt, op);
    return rec_push(r, &o);
}

static int64_t *dup_counts(const int64_t *a, int n) {
    int64_t *p;
    if (!a) return NULL;
    if ((p = malloc((size_t)(n ? n : 1) * sizeof *p))) memcpy(p, a, (size_t)n * sizeof *p);
    return p;
}

/* A collective over g: op's send and recv at the refs (its pointers are filled here). */
static ldt_status r_coll(ldt_redist_runner *r, ldt_comm *g, ldt__op op, rref send, rref recv) {
    ldt__dr_op o;
    int n = ldt_comm_size(g);
    if (!r->rec) {
        const void *s = ptr_of(r, send);
        void *d = ptr_of(r, recv);
        switch (op.kind) {
        case LDT__OP_ALL_REDUCE: return ldt_all_reduce(g, s, d, op.count, op.dtype, op.reduce);
        case LDT__OP_ALL_GATHER_V: return ldt_all_gather_v(g, s, d, op.counts, op.dtype);
        case LDT__OP_REDUCE_SCATTER_V: return ldt_reduce_scatter_v(g, s, d, op.counts, op.dtype, op.reduce);
        case LDT__OP_ALL_TO_ALL_V:
            return ldt_all_to_all_v(g, s, op.sendcounts, op.sdispls, d, op.recvcounts, op.rdispls, op.dtype);
        default: LDT_FAIL(LDT_ERR_INTERNAL, "redistribute: collective %s", ldt__comm_op_name(op.kind));
        }
    }
    memset(&o, 0, sizeof o);
    o.kind = LDT__DR_COLL;
    o.src_buf = send.buf;
    o.src_off = send.off;
    o.dst_buf = recv.buf;
    o.dst_off = recv.off;
    o.es = (int)ldt_dtype_size(op.dtype);
    o.group = g;
    o.op = op;
    o.op.counts = dup_counts(op.counts, n);
    o.op.sendcounts = dup_counts(op.sendcounts, n);
    o.op.sdispls = dup_counts(op.sdispls, n);
    o.op.recvcounts = dup_counts(op.recvcounts, n);
    o.op.rdispls = dup_counts(op.rdispls, n);
    if ((op.counts && !o.op.counts) || (op.sendcounts && !o.op.sendcounts) || (op.sdispls && !o.op.sdispls) ||
        (op.recvcounts && !o.op.recvcounts) || (op.rdispls && !o.op.rdispls) || rec_push(r, &o) != LDT_OK) {
        free((void *)o.op.counts);
        free((void *)o.op.sendcounts);
        free((void *)o.op.sdispls);
        free((void *)o.op.recvcounts);
        free((void *)o.op.rdispls);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    return LDT_OK;
}

static int in_mesh(const ldt_mesh *m, int rank) {
    for (int i = 0; i < ldt_mesh_nranks(m); i++)
        if (ldt_mesh_rank_at(m, i) == rank) return 1;
    return 0;
}

static int mesh_max_rank(const ldt_mesh *m) {
    int r = -1;
    for (int i = 0; i < ldt_mesh_nranks(m); i++)
        if (ldt_mesh_rank_at(m, i) > r) r = ldt_mesh_rank_at(m, i);
    return r;
}

void ldt_redist_runner_destroy(ldt_redist_runner *r) {
    if (!r) return;
    if (r->groups)
        for (int i = 0; i < r->plan->nsteps; i++) ldt_comm_destroy(r->groups[i]);
    free(r->groups);
    free(r->buf[0]);
    free(r->buf[1]);
    free(r->scratch);
    free(r->counts);
    free(r->regs);
    free(r);
}

static int is_collective(ldt_collective c) { return c <= LDT_COLL_ALL_TO_ALL; }

/* The runner, with its groups; its ping-pong buffers only when it runs (alloc_bufs). */
static ldt_status runner_create(ldt_comm *world, const ldt_redist_plan *plan, int alloc_bufs,
                                ldt_redist_runner **out) {
    ldt_status st = LDT_OK;
    ldt_redist_runner *r = NULL;
    int64_t bufbytes = 1, maxn;
    int need;
    if (!world || !plan || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: arguments must not be NULL");
    *out = NULL;
    need = mesh_max_rank(plan->src.mesh);
    if (mesh_max_rank(plan->dst.mesh) > need) need = mesh_max_rank(plan->dst.mesh);
    if (need >= ldt_comm_size(world))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "redistribute: the plan's meshes use world rank %d but the world has %d ranks, "
                 "expected at least %d",
                 need, ldt_comm_size(world), need + 1);
    if (ldt_mesh_device(plan->src.mesh) == LDT_DEVICE_META ||
        ldt_mesh_device(plan->dst.mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "redistribute: the plan is on a meta mesh, which plans but never runs");
    r = calloc(1, sizeof *r);
    if (!r) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    r->world = world;
    r->plan = plan;
    r->me = ldt_comm_world_rank(world, ldt_comm_rank(world));
    maxn = ldt_mesh_nranks(plan->src.mesh) > ldt_mesh_nranks(plan->dst.mesh)
               ? ldt_mesh_nranks(plan->src.mesh)
               : ldt_mesh_nranks(plan->dst.mesh);
    r->groups = calloc((size_t)(plan->nsteps ? plan->nsteps : 1), sizeof *r->groups);
    r->counts = malloc((size_t)maxn * 4 * sizeof *r->counts);
    r->regs = malloc((size_t)maxn * 2 * sizeof *r->regs);
    if (!r->groups || !r->counts || !r->regs)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    for (int i = 0; i < plan->nsteps; i++) {
        const ldt__rstep *s = &plan->steps[i];
        ldt_region y;
        if (in_mesh(s->after.mesh, r->me)) {
            LDT_CHECK_GOTO(ldt_layout(&s->after, r->me, &y));
            if (y.numel * (int64_t)ldt_dtype_size(s->after.dtype) > bufbytes)
                bufbytes = y.numel * (int64_t)ldt_dtype_size(s->after.dtype);
        }
        /* Groups in step order on every rank: the backend matches each member's k-th
         * request for a rank list with the others' k-th. */
        if (is_collective(s->pub.collective) && in_mesh(s->before.mesh, r->me)) {
            ldt_mesh *sub = NULL;
            int *ranks;
            LDT_CHECK_GOTO(ldt_mesh_submesh(s->before.mesh, r->me, s->pub.ndims, s->pub.dims, &sub));
            ranks = malloc((size_t)ldt_mesh_nranks(sub) * sizeof *ranks);
            if (!ranks) {
                ldt_mesh_destroy(sub);
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
            }
            for (int k = 0; k < ldt_mesh_nranks(sub); k++) ranks[k] = ldt_mesh_rank_at(sub, k);
            st = ldt_comm_group(world, ldt_mesh_nranks(sub), ranks, &r->groups[i]);
            free(ranks);
            ldt_mesh_destroy(sub);
            if (st != LDT_OK) {
                ldt__trace(st, __FILE__, __LINE__);
                goto fail;
            }
        }
    }
    r->bufbytes = bufbytes;
    if (alloc_bufs) {
        r->buf[0] = malloc((size_t)bufbytes);
        r->buf[1] = malloc((size_t)bufbytes);
        if (!r->buf[0] || !r->buf[1])
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory for %lld bytes",
                          (long long)bufbytes);
    }
    *out = r;
    return LDT_OK;
fail:
    ldt_redist_runner_destroy(r);
    return st;
}

ldt_status ldt_redist_runner_create(ldt_comm *world, const ldt_redist_plan *plan,
                                    ldt_redist_runner **out) {
    return runner_create(world, plan, 1, out);
}

/* Room for bytes of packed messages: the scratch buffer grows (running) or its recorded
 * size does (recording). */
static ldt_status scratch(ldt_redist_runner *r, int64_t bytes) {
    if (r->rec) {
        if (bytes > r->rec->bytes[LDT__RB_SCRATCH]) r->rec->bytes[LDT__RB_SCRATCH] = bytes;
        return LDT_OK;
    }
    if (bytes > r->scratch_cap) {
        char *p = realloc(r->scratch, (size_t)bytes);
        if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory for %lld bytes",
                         (long long)bytes);
        r->scratch = p;
        r->scratch_cap = bytes;
    }
    r->ptr[LDT__RB_SCRATCH] = r->scratch;
    return LDT_OK;
}

/* One collective step over group g: X = the members' regions before, Y after. */
static ldt_status run_collective(ldt_redist_runner *r, const ldt__rstep *s, ldt_comm *g, rref cur,
                                 rref nxt) {
    int n = ldt_comm_size(g), k = ldt_comm_rank(g);
    ldt_dtype dt = s->before.dtype;
    size_t es = ldt_dtype_size(dt);
    ldt_region *X = r->regs, *Y = r->regs + n;
    int64_t *c0 = r->counts, *c1 = c0 + n, *c2 = c1 + n, *c3 = c2 + n, tot0 = 0, tot1 = 0;
    ldt__op op;
    memset(&op, 0, sizeof op);
    op.dtype = dt;
    op.reduce = s->pub.op;
    for (int q = 0; q < n; q++) {
        int w = ldt_comm_world_rank(g, q);
        LDT_CHECK(ldt_layout(&s->before, w, &X[q]));
        LDT_CHECK(ldt_layout(&s->after, w, &Y[q]));
    }
    switch (s->pub.collective) {
    case LDT_COLL_ALL_REDUCE:
        op.kind = LDT__OP_ALL_REDUCE;
        op.count = X[k].numel;
        return r_coll(r, g, op, cur, nxt);
    case LDT_COLL_ALL_GATHER:
        /* every member's block, then each placed where it sits in the gathered region */
        for (int q = 0; q < n; q++) tot0 += c0[q] = X[q].numel;
        LDT_CHECK(scratch(r, tot0 * (int64_t)es + 1));
        op.kind = LDT__OP_ALL_GATHER_V;
        op.counts = c0;
        LDT_CHECK(r_coll(r, g, op, cur, at(LDT__RB_SCRATCH, 0)));
        for (int64_t q = 0, off = 0; q < n; off += c0[q], q++)
            LDT_CHECK(r_copy(r, &X[q], &Y[k], es, at(LDT__RB_SCRATCH, off * (int64_t)es), 0, nxt, 0));
        return LDT_OK;
    case LDT_COLL_REDUCE_SCATTER:
        /* every member holds the same (Partial) region: segment q is what q keeps */
        for (int q = 0; q < n; q++) tot0 += c0[q] = ldt__region_isect_numel(&X[k], &Y[q]);
        LDT_CHECK(scratch(r, (tot0 + c0[k]) * (int64_t)es + 1));
        for (int64_t q = 0, off = 0; q < n; off += c0[q], q++)
            LDT_CHECK(r_copy(r, &X[k], &Y[q], es, cur, 0, at(LDT__RB_SCRATCH, off * (int64_t)es), 1));
        op.kind = LDT__OP_REDUCE_SCATTER_V;
        op.counts = c0;
        LDT_CHECK(r_coll(r, g, op, at(LDT__RB_SCRATCH, 0), at(LDT__RB_SCRATCH, tot0 * (int64_t)es)));
        LDT_CHECK(r_copy(r, &X[k], &Y[k], es, at(LDT__RB_SCRATCH, tot0 * (int64_t)es), 1, nxt, 0));
        return LDT_OK;
    case LDT_COLL_ALL_TO_ALL:
        for (int q = 0; q < n; q++) {
            c1[q] = tot0;
            tot0 += c0[q] = ldt__region_isect_numel(&X[k], &Y[q]);
            c3[q] = tot1;
            tot1 += c2[q] = ldt__region_isect_numel(&X[q], &Y[k]);
        }
        LDT_CHECK(scratch(r, (tot0 + tot1) * (int64_t)es + 1));
        for (int q = 0; q < n; q++)
            LDT_CHECK(r_copy(r, &X[k], &Y[q], es, cur, 0, at(LDT__RB_SCRATCH, c1[q] * (int64_t)es), 1));
        op.kind = LDT__OP_ALL_TO_ALL_V;
        op.sendcounts = c0;
        op.sdispls = c1;
        op.recvcounts = c2;
        op.rdispls = c3;
        LDT_CHECK(r_coll(r, g, op, at(LDT__RB_SCRATCH, 0), at(LDT__RB_SCRATCH, tot0 * (int64_t)es)));
        for (int q = 0; q < n; q++)
            LDT_CHECK(r_copy(r, &X[q], &Y[k], es, at(LDT__RB_SCRATCH, (tot0 + c3[q]) * (int64_t)es), 1, nxt, 0));
        return LDT_OK;
    default:
        LDT_FAIL(LDT_ERR_INTERNAL, "redistribute: %s is not a collective",
                 ldt_collective_name(s->pub.collective));
    }
}

static ldt_status run_local(ldt_redist_runner *r, const ldt__rstep *s, rref cur, rref nxt) {
    ldt_region x, y;
    size_t es = ldt_dtype_size(s->before.dtype);
    int64_t coord[LDT_MAX_DIMS];
    LDT_CHECK(ldt_layout(&s->before, r->me, &x));
    LDT_CHECK(ldt_layout(&s->after, r->me, &y));
    switch (s->pub.collective) {
    case LDT_COLL_LOCAL_CHUNK: return r_copy(r, &x, &y, es, cur, 0, nxt, 0);
    case LDT_COLL_LOCAL_PARTIAL:
        /* sum: the value on coordinate 0, zeros elsewhere; avg/max/min: everywhere */
        LDT_CHECK(ldt_mesh_coord(s->after.mesh, r->me, coord));
        if (s->pub.op == LDT_REDUCE_SUM && coord[s->pub.dims[0]] != 0)
            return r_zero(r, nxt, y.numel * (int64_t)es, es);
        return r_memcpy(r, nxt, cur, y.numel * (int64_t)es, es);
    case LDT_COLL_LOCAL_PAD:
        LDT_CHECK(r_fill_identity(r, nxt, y.numel, s->before.dtype, s->pub.op));
        return r_copy(r, &x, &y, es, cur, 0, nxt, 0);
    default:
        LDT_FAIL(LDT_ERR_INTERNAL, "redistribute: %s is not a local op",
                 ldt_collective_name(s->pub.collective));
    }
}

/* Cross-mesh: every target rank receives each piece of its region from the one source rank
 * chosen for it (ldt__xmesh_is_source), all sends and recvs in one group over the world. */
static ldt_status run_send_recv(ldt_redist_runner *r, const ldt__rstep *s, const char *cur,
                                char *nxt) {
    ldt_status st = LDT_OK;
    const ldt_spec *X = &s->before, *Y = &s->after;
    const ldt_mesh *A = X->mesh, *B = Y->mesh;
    size_t es = ldt_dtype_size(X->dtype);
    int na = ldt_mesh_nranks(A), nb = ldt_mesh_nranks(B);
    int src = in_mesh(A, r->me), dst = in_mesh(B, r->me);
    int64_t coord[LDT_MAX_DIMS], total = 0, off = 0, mypos = -1;
    ldt_region mine_x, mine_y, other;
    char *sb = NULL;
    if (src) LDT_CHECK(ldt_layout(X, r->me, &mine_x));
    if (dst) {
        LDT_CHECK(ldt_layout(Y, r->me, &mine_y));
        for (int b = 0; b < nb; b++)
            if (ldt_mesh_rank_at(B, b) == r->me) mypos = b;
    }
    if (src) LDT_CHECK(ldt_mesh_coord(A, r->me, coord));
    /* Sizes first, so one buffer holds every packed message. */
    for (int b = 0; src && b < nb; b++) {
        int w = ldt_mesh_rank_at(B, b);
        if (w == r->me || !ldt__xmesh_is_source(X, b, coord)) continue;
        LDT_CHECK(ldt_layout(Y, w, &other));
        total += ldt__region_isect_numel(&mine_x, &other);
    }
    for (int a = 0; dst && a < na; a++) {
        int w = ldt_mesh_rank_at(A, a);
        int64_t ac[LDT_MAX_DIMS];
        LDT_CHECK(ldt_mesh_coord(A, w, ac));
        if (w == r->me || !ldt__xmesh_is_source(X, mypos, ac)) continue;
        LDT_CHECK(ldt_layout(X, w, &other));
        total += ldt__region_isect_numel(&other, &mine_y);
    }
    LDT_CHECK(scratch(r, total * (int64_t)es + 1));
    sb = r->scratch;
    LDT_CHECK(ldt_group_start());
    for (int b = 0; src && b < nb; b++) {
        int w = ldt_mesh_rank_at(B, b);
        int64_t n;
        if (w == r->me || !ldt__xmesh_is_source(X, b, coord)) continue;
        LDT_CHECK_GOTO(ldt_layout(Y, w, &other));
        n = ldt__region_isect_numel(&mine_x, &other);
        if (n == 0) continue;
        LDT_CHECK_GOTO(isect_copy(&mine_x, &other, es, cur, 0, sb + (size_t)off * es, 1));
        LDT_CHECK_GOTO(ldt_send(r->world, sb + (size_t)off * es, n, X->dtype, w));
        off += n;
    }
    for (int a = 0; dst && a < na; a++) {
        int w = ldt_mesh_rank_at(A, a);
        int64_t ac[LDT_MAX_DIMS], n;
        LDT_CHECK_GOTO(ldt_mesh_coord(A, w, ac));
        if (!ldt__xmesh_is_source(X, mypos, ac)) continue;
        LDT_CHECK_GOTO(ldt_layout(X, w, &other));
        if (w == r->me) { /* on both meshes: a local copy */
            LDT_CHECK_GOTO(isect_copy(&other, &mine_y, es, cur, 0, nxt, 0));
            continue;
        }
        n = ldt__region_isect_numel(&other, &mine_y);
        if (n == 0) continue;
        LDT_CHECK_GOTO(ldt_recv(r->world, sb + (size_t)off * es, n, X->dtype, w));
        off += n;
    }
    LDT_CHECK(ldt_group_end());
    /* Unpack in the order the recvs were posted. */
    off = 0;
    for (int b = 0; src && b < nb; b++) {
        int w = ldt_mesh_rank_at(B, b);
        if (w == r->me || !ldt__xmesh_is_source(X, b, coord)) continue;
        LDT_CHECK(ldt_layout(Y, w, &other));
        off += ldt__region_isect_numel(&mine_x, &other);
    }
    for (int a = 0; dst && a < na; a++) {
        int w = ldt_mesh_rank_at(A, a);
        int64_t ac[LDT_MAX_DIMS], n;
        LDT_CHECK(ldt_mesh_coord(A, w, ac));
        if (w == r->me || !ldt__xmesh_is_source(X, mypos, ac)) continue;
        LDT_CHECK(ldt_layout(X, w, &other));
        n = ldt__region_isect_numel(&other, &mine_y);
        LDT_CHECK(isect_copy(&other, &mine_y, es, sb + (size_t)off * es, 1, nxt, 0));
        off += n;
    }
    return LDT_OK;
fail:
    /* issue nothing of a broken group; group_end reports the first error */
    ldt_group_end();
    return st;
}

/* Every step of the plan on this rank, from IN to OUT through the ping-pong buffers. */
static ldt_status walk(ldt_redist_runner *r) {
    const ldt_redist_plan *p = r->plan;
    if (p->nsteps == 0) {
        ldt_region x;
        if (!in_mesh(p->src.mesh, r->me)) return LDT_OK;
        LDT_CHECK(ldt_layout(&p->src, r->me, &x));
        return r_memcpy(r, at(LDT__RB_OUT, 0), at(LDT__RB_IN, 0),
                        x.numel * (int64_t)ldt_dtype_size(p->src.dtype), ldt_dtype_size(p->src.dtype));
    }
    for (int i = 0; i < p->nsteps; i++) {
        const ldt__rstep *s = &p->steps[i];
        rref cur = i == 0 ? at(LDT__RB_IN, 0) : at(LDT__RB_BUF0 + (i - 1) % 2, 0);
        rref nxt = i == p->nsteps - 1 ? at(LDT__RB_OUT, 0) : at(LDT__RB_BUF0 + i % 2, 0);
        ldt_status st;
        if (s->pub.collective == LDT_COLL_SEND_RECV)
            st = r->rec ? ldt__error(LDT_ERR_UNSUPPORTED, "moving data between meshes is not "
                                     "recorded for devices yet")
                        : run_send_recv(r, s, ptr_of(r, cur), ptr_of(r, nxt));
        else if (!in_mesh(s->before.mesh, r->me))
            continue;
        else if (is_collective(s->pub.collective))
            st = run_collective(r, s, r->groups[i], cur, nxt);
        else
            st = run_local(r, s, cur, nxt);
        if (st != LDT_OK) {
            char f[256];
            ldt_redist_step_format(&s->pub, f, sizeof f);
            ldt__error_prefix(st, "redistribute step %d (%s)", i, f);
            return ldt__trace(st, __FILE__, __LINE__);
        }
    }
    return LDT_OK;
}

ldt_status ldt_redist_runner_run(ldt_redist_runner *r, const void *in, void *out) {
    const ldt_redist_plan *p;
    if (!r) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: runner must not be NULL");
    p = r->plan;
    if (in_mesh(p->src.mesh, r->me) && !in)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: rank %d holds a source shard but in is NULL",
                 r->me);
    if (in_mesh(p->dst.mesh, r->me) && !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "redistribute: rank %d holds a target shard but out is NULL", r->me);
    r->ptr[LDT__RB_IN] = (char *)in;
    r->ptr[LDT__RB_OUT] = out;
    r->ptr[LDT__RB_BUF0] = r->buf[0];
    r->ptr[LDT__RB_BUF1] = r->buf[1];
    r->ptr[LDT__RB_SCRATCH] = r->scratch;
    return walk(r);
}

void ldt__dredist_free(ldt__dredist *d) {
    if (!d) return;
    for (int i = 0; i < d->nops; i++) {
        ldt__dr_op *o = &d->ops[i];
        free(o->runs);
        free((void *)o->op.counts);
        free((void *)o->op.sendcounts);
        free((void *)o->op.sdispls);
        free((void *)o->op.recvcounts);
        free((void *)o->op.rdispls);
    }
    free(d->ops);
    ldt_redist_runner_destroy(d->runner);
    free(d);
}

ldt_status ldt__redist_record(ldt_comm *world, const ldt_redist_plan *plan, ldt__dredist **out) {
    ldt__dredist *d;
    ldt_redist_runner *r = NULL;
    ldt_region x;
    ldt_status st;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: out must not be NULL");
    *out = NULL;
    LDT_CHECK(runner_create(world, plan, 0, &r));
    if (!(d = calloc(1, sizeof *d))) {
        ldt_redist_runner_destroy(r);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    d->runner = r;
    r->rec = d;
    d->bytes[LDT__RB_BUF0] = d->bytes[LDT__RB_BUF1] = r->bufbytes;
    if (in_mesh(plan->src.mesh, r->me) && (st = ldt_layout(&plan->src, r->me, &x)) == LDT_OK)
        d->bytes[LDT__RB_IN] = x.numel * (int64_t)ldt_dtype_size(plan->src.dtype);
    if (in_mesh(plan->dst.mesh, r->me) && (st = ldt_layout(&plan->dst, r->me, &x)) == LDT_OK)
        d->bytes[LDT__RB_OUT] = x.numel * (int64_t)ldt_dtype_size(plan->dst.dtype);
    if ((st = walk(r)) != LDT_OK) {
        ldt__dredist_free(d);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    *out = d;
    return LDT_OK;
}

ldt_status ldt_redistribute(ldt_comm *world, const ldt_redist_plan *plan, const void *in,
                            void *out) {
    ldt_redist_runner *r;
    ldt_status st;
    LDT_CHECK(ldt_redist_runner_create(world, plan, &r));
    st = ldt_redist_runner_run(r, in, out);
    ldt_redist_runner_destroy(r);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

typedef struct shards_job {
    const ldt_redist_plan *plan;
    const ldt_shards *src;
    ldt_shards *dst;
    int reps;
    double *times; /* reps entries, rank 0's */
    double *harness; /* NULL, or reps entries: the two barriers alone, before each run */
} shards_job;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ldt_status shards_rank(ldt_comm *world, void *arg) {
    shards_job *j = arg;
    int me = ldt_comm_rank(world);
    ldt_redist_runner *r;
    ldt_status st;
    const void *in = ldt_shards_local(j->src, me, NULL);
    void *out = ldt_shards_local(j->dst, me, NULL);
    LDT_CHECK(ldt_redist_runner_create(world, j->plan, &r));
    st = ldt_redist_runner_run(r, in, out);
    /* Timed runs start together after a barrier and end when the slowest rank is done. */
    for (int i = 0; i < j->reps && st == LDT_OK; i++) {
        double t0;
        if (j->harness) { /* the harness right before the run, in the same world */
            if ((st = ldt_barrier(world)) != LDT_OK) break;
            t0 = now_s();
            if ((st = ldt_barrier(world)) != LDT_OK) break;
            if (me == 0) j->harness[i] = now_s() - t0;
        }
        if ((st = ldt_barrier(world)) != LDT_OK) break;
        t0 = now_s();
        if ((st = ldt_redist_runner_run(r, in, out)) != LDT_OK) break;
        if ((st = ldt_barrier(world)) != LDT_OK) break;
        if (me == 0) j->times[i] = now_s() - t0;
    }
    ldt_redist_runner_destroy(r);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Placement lists compared by value (their structs have padding bytes, so never memcmp). */
static int same_placements(const ldt_spec *a, const ldt_spec *b) {
    for (int i = 0; i < a->nplace; i++)
        if (!ldt_placement_equal(&a->placements[i], &b->placements[i])) return 0;
    return 1;
}

ldt_status ldt_redistribute_measure(const ldt_shards *src, const ldt_redist_plan *plan, int reps,
                                    double *seconds, ldt_shards **out) {
    return ldt__redistribute_runs(src, plan, reps, seconds, NULL, NULL, out);
}

ldt_status ldt__redistribute_runs(const ldt_shards *src, const ldt_redist_plan *plan, int reps,
                                  double *seconds, double *times, double *harness, ldt_shards **out) {
    ldt_status st = LDT_OK;
    ldt_shards *dst = NULL, *zero = NULL;
    shards_job job;
    int nworld;
    if (!plan || (reps > 0 && !seconds))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: arguments must not be NULL");
    if (reps < 0 || reps > 1000000)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: %d repetitions, expected 0 to 1000000",
                 reps);
    if (out) *out = NULL;
    memset(&job, 0, sizeof job);
    if (!src) {
        LDT_CHECK(ldt_shards_create(&plan->src, &zero));
        /* zeros written, so the timed runs read memory of their own: calloc'd pages never
         * written may all map the kernel's one zero page (from mmap, 128 KiB and up, or not:
         * malloc's threshold moves with what was freed), which stays in cache */
        for (int r = 0; r <= mesh_max_rank(plan->src.mesh); r++) {
            int64_t nb;
            void *b = ldt_shards_local(zero, r, &nb);
            if (b && nb > 0) memset(b, 0, (size_t)nb);
        }
        src = zero;
    } else {
        const ldt_spec *ss = ldt_shards_spec(src);
        if (!ldt_mesh_equal(ss->mesh, plan->src.mesh) || ss->nplace != plan->src.nplace ||
            !ldt_shape_equal(&ss->shape, &plan->src.shape) || ss->dtype != plan->src.dtype ||
            !same_placements(ss, &plan->src)) {
            char a[256], b[256];
            ldt_spec_format(ss, a, sizeof a);
            ldt_spec_format(&plan->src, b, sizeof b);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "redistribute: the shards are %s but the plan starts from %s", a, b);
        }
    }
    LDT_CHECK_GOTO(ldt_shards_create(&plan->dst, &dst));
    nworld = mesh_max_rank(plan->src.mesh);
    if (mesh_max_rank(plan->dst.mesh) > nworld) nworld = mesh_max_rank(plan->dst.mesh);
    job.plan = plan;
    job.src = src;
    job.dst = dst;
    job.reps = reps;
    job.harness = reps > 0 ? harness : NULL;
    if (reps > 0) {
        job.times = calloc((size_t)reps, sizeof *job.times);
        if (!job.times) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    }
    LDT_CHECK_GOTO(ldt_threads_launch(nworld + 1, NULL, shards_rank, &job));
    if (reps > 0 && times) memcpy(times, job.times, (size_t)reps * sizeof *times);
    if (reps > 0) {
        qsort(job.times, (size_t)reps, sizeof *job.times, cmp_double);
        *seconds = reps % 2 ? job.times[reps / 2]
                            : 0.5 * (job.times[reps / 2 - 1] + job.times[reps / 2]);
    }
    if (out) {
        *out = dst;
        dst = NULL;
    }
fail:
    free(job.times);
    ldt_shards_destroy(dst);
    ldt_shards_destroy(zero);
    return st;
}

ldt_status ldt_redistribute_measure_net(const ldt_redist_plan *plan, int reps, double *seconds,
                                        double *harness) {
    double *t, *h, med;
    ldt_status st;
    if (!plan || !seconds)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: plan and seconds must not be NULL");
    if (reps < 1 || reps > 1000000)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: %d repetitions, expected 1 to 1000000", reps);
    if (!(t = malloc(2 * (size_t)reps * sizeof *t)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "redistribute: out of memory");
    h = t + reps; /* the harness runs, in the same block */
    st = ldt__redistribute_runs(NULL, plan, reps, &med, t, h, NULL);
    if (st == LDT_OK) {
        qsort(h, (size_t)reps, sizeof *h, cmp_double);
        med = reps % 2 ? h[reps / 2] : 0.5 * (h[reps / 2 - 1] + h[reps / 2]);
        qsort(t, (size_t)reps, sizeof *t, cmp_double);
        *seconds = (reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2])) - med;
        if (harness) *harness = med;
    }
    free(t);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

ldt_status ldt_redistribute_shards(const ldt_shards *src, const ldt_redist_plan *plan,
                                   ldt_shards **out) {
    if (!src || !plan || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "redistribute: arguments must not be NULL");
    LDT_CHECK(ldt_redistribute_measure(src, plan, 0, NULL, out));
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Random addends for Partial placements (tests, `ldt redistribute --run`).
 */
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Element value as a double (floats) or int64 (integers); is_int says which. */
static void load_elem(const char *p, ldt_dtype dt, double *f, int64_t *i) {
    switch (dt) {
    case LDT_F32: *f = *(const float *)p; break;
    case LDT_F64: *f = *(const double *)p; break;
    case LDT_F16: *f = ldt_f16_to_f32(*(const uint16_t *)p); break;
    case LDT_BF16: *f = ldt_bf16_to_f32(*(const uint16_t *)p); break;
    case LDT_I32: *i = *(const int32_t *)p; break;
    case LDT_I64: *i = *(const int64_t *)p; break;
    default: *i = *(const uint8_t *)p; break;
    }
}

static void store_elem(char *p, ldt_dtype dt, double f, int64_t i) {
    switch (dt) {
    case LDT_F32: *(float *)p = (float)f; break;
    case LDT_F64: *(double *)p = f; break;
    case LDT_F16: *(uint16_t *)p = ldt_f32_to_f16((float)f); break;
    case LDT_BF16: *(uint16_t *)p = ldt_f32_to_bf16((float)f); break;
    case LDT_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)i; break;
    case LDT_I64: *(int64_t *)p = i; break;
    case LDT_BOOL: *(uint8_t *)p = i != 0; break;
    default: *(uint8_t *)p = (uint8_t)(uint64_t)i; break;
    }
}

/* Addend c of n whose op-reduction is v, from hash h (integer arithmetic: floats hold small
 * integers exactly, and the integer dtypes wrap as their sums do). */
static int64_t addend_i(int64_t v, int n, int64_t c, uint64_t h, ldt_reduce_op op, int is_bool,
                        int is_u8) {
    int64_t special = (int64_t)(h % (uint64_t)n), s = 0, a;
    if (n == 1) return v;
    if (is_bool) { /* OR (sum, max): v=1 needs a 1 somewhere; AND (min): v=0 needs a 0 */
        int one = (int)(mix64(h + (uint64_t)c) & 1);
        if (op == LDT_REDUCE_MIN) return v ? 1 : (c == special ? 0 : one);
        return v ? (c == special ? 1 : one) : 0;
    }
    switch (op) {
    case LDT_REDUCE_MAX: /* below v, but not below 0 where the dtype is unsigned */
        a = c == special ? v : v - 1 - (int64_t)(mix64(h + (uint64_t)c) % 3);
        return is_u8 && a < 0 ? 0 : a;
    case LDT_REDUCE_MIN:
        a = c == special ? v : v + 1 + (int64_t)(mix64(h + (uint64_t)c) % 3);
        return is_u8 && a > 255 ? 255 : a;
    default:
        /* sum: n-1 small addends and the remainder; avg: v plus zero-sum deltas */
        if (c < n - 1) {
            a = (int64_t)(mix64(h + (uint64_t)c) % 7) - 3;
            return op == LDT_REDUCE_AVG ? v + a : a;
        }
        for (int64_t k = 0; k < n - 1; k++) s += (int64_t)(mix64(h + (uint64_t)k) % 7) - 3;
        return op == LDT_REDUCE_AVG ? v - s : (int64_t)((uint64_t)v - (uint64_t)s);
    }
}

static double addend_f(double v, int n, int64_t c, uint64_t h, ldt_reduce_op op) {
    int64_t special = (int64_t)(h % (uint64_t)n), s = 0;
    if (n == 1) return v;
    switch (op) {
    case LDT_REDUCE_MAX: return c == special ? v : v - 1 - (double)(mix64(h + (uint64_t)c) % 3);
    case LDT_REDUCE_MIN: return c == special ? v : v + 1 + (double)(mix64(h + (uint64_t)c) % 3);
    default:
        if (c < n - 1) {
            double a = (double)((int64_t)(mix64(h + (uint64_t)c) % 7) - 3);
            return op == LDT_REDUCE_AVG ? v + a : a;
        }
        for (int64_t k = 0; k < n - 1; k++) s += (int64_t)(mix64(h + (uint64_t)k) % 7) - 3;
        return v - (double)s;
    }
}

ldt_status ldt_distribute_addends(const void *full, const ldt_spec *spec, uint64_t seed,
                                  ldt_shards **out) {
    ldt_status st = LDT_OK;
    ldt_shards *s = NULL;
    const ldt_mesh *m;
    size_t es;
    int is_float;
    if (!full || !spec || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "distribute_addends: arguments must not be NULL");
    *out = NULL;
    LDT_CHECK(ldt_shards_create(spec, &s));
    m = spec->mesh;
    es = ldt_dtype_size(spec->dtype);
    is_float = ldt_dtype_is_float(spec->dtype);
    for (int pos = 0; pos < ldt_mesh_nranks(m); pos++) {
        int rank = ldt_mesh_rank_at(m, pos);
        int64_t coord[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0};
        ldt_region r;
        char *local = ldt_shards_local(s, rank, NULL);
        LDT_CHECK_GOTO(ldt_mesh_coord(m, rank, coord));
        LDT_CHECK_GOTO(ldt_layout_coord(spec, coord, &r));
        for (int64_t e = 0; e < r.numel; e++) {
            /* local row-major index -> global flat index through the runs */
            int64_t g = 0, rem = e;
            double f = 0;
            int64_t iv = 0;
            uint64_t h = seed;
            for (int d = r.ndim - 1; d >= 0; d--) {
                idx[d] = rem % r.local_shape.dims[d];
                rem /= r.local_shape.dims[d];
            }
            for (int d = 0; d < r.ndim; d++) {
                const ldt_dim_runs *run = &r.runs[d];
                g = g * spec->shape.dims[d] + (idx[d] / run->len) * run->block_stride +
                    run->start + idx[d] % run->len;
            }
            load_elem((const char *)full + (size_t)g * es, spec->dtype, &f, &iv);
            h = mix64(h ^ (uint64_t)g);
            /* Split dim by dim, in mesh-dim order: each level's addends depend on the
             * coordinates above it, so any order of reducing the levels is exact. */
            for (int i = 0; i < spec->nplace; i++) {
                const ldt_placement *p = &spec->placements[i];
                int n = (int)ldt_mesh_dim_size(m, i);
                if (p->kind != LDT_PLACE_PARTIAL) continue;
                if (p->op == LDT_REDUCE_AVG && !is_float &&
                    (spec->dtype == LDT_BOOL || spec->dtype == LDT_U8)) {
                    h = mix64(h);
                    continue;
                }
                if (is_float)
                    f = addend_f(f, n, coord[i], h, p->op);
                else
                    iv = addend_i(iv, n, coord[i], h, p->op, spec->dtype == LDT_BOOL,
                                  spec->dtype == LDT_U8);
                h = mix64(h ^ ((uint64_t)coord[i] + 1) * 0x100000001b3ull);
            }
            store_elem(local + (size_t)e * es, spec->dtype, f, iv);
        }
    }
    *out = s;
    return LDT_OK;
fail:
    ldt_shards_destroy(s);
    return st;
}
