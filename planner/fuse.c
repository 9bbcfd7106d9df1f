/* Collective fusion on a rank's program (docs/replay.md, "Fused collectives").
 *
 * 1. In place: a redistribution that is one all_reduce step (P -> R on some mesh dims) whose
 *    source nobody else reads becomes an all_reduce on the source's own buffer; later readers
 *    of the moved value read the source.
 * 2. Buckets: all_reduces of the same group, dtype and reduce op are taken in the order their
 *    values become ready and merged into one call, up to a byte cap, while every member can
 *    still run at one point: after the last member is ready and before the first reads a
 *    result. The call is issued right after the last member is ready (data-parallel gradient
 *    buckets start during the backward). The members become one memory-plan group, placed
 *    back to back, so the fused call works in place on one contiguous range: no packing.
 *
 * Decisions must be the same on every rank (ranks meet at collectives): ldt__fuse_agreed sizes
 * each collective by its largest figure over ranks, makes every rank's decision dry, and
 * applies them only when they are one decision (the same calls with the same members, in the
 * same order); ranks' programs may differ in length. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/fuse.h"
#include "planner/redistribute.h"

/* The single all_reduce step of a redistribution, or NULL. */
static int single_all_reduce(const ldt__instr *x, ldt_redist_step *s) {
    if (x->kind != LDT__I_REDIST || ldt_redist_plan_nsteps(x->plan) != 1) return 0;
    ldt_redist_plan_step(x->plan, 0, s);
    return s->collective == LDT_COLL_ALL_REDUCE && s->ndims >= 1;
}

/* ZeRO buckets (pass 4): where rank `q`'s piece of a single-step reduce_scatter's input (or
 * all_gather's output) lies in this rank's whole local buffer: *nrun runs of *run elements,
 * *stride apart, the first at *off (elements; *cnt = *nrun * *run in all). A piece split on
 * the leading dim is one run; one split on a later dim (a [H, 3H] weight's columns) is one
 * run per row of the dims before it; where the whole buffer is interleaved (merged QKV's
 * rows), a piece of each of its blocks: one run per row and block. 0 when it is no such
 * block (then the collective is not bucketed). */
int ldt__bucket_chunk(const ldt_redist_plan *pl, int me, int q, ldt__bucket_piece *pc) {
    const ldt__rstep *s = &pl->steps[0];
    int rs = s->pub.collective == LDT_COLL_REDUCE_SCATTER;
    ldt_region X, Y;
    int64_t inner = 1, outer = 1, blocks = 1, step = 0;
    int d0 = -1;
    if (ldt_layout(rs ? &s->before : &s->after, me, &X) != LDT_OK ||
        ldt_layout(rs ? &s->after : &s->before, q, &Y) != LDT_OK)
        return 0;
    pc->off = 0;
    pc->cnt = Y.numel;
    pc->nrun = 1;
    pc->run = pc->stride = Y.numel;
    if (Y.numel == 0) return 1;
    if (X.ndim != Y.ndim) return 0;
    /* a block of runs: every dim but one (d0) as the whole buffer has it; on d0 the same
     * blocks (an interleaved dim's pieces), each a sub-range at one offset within its run */
    for (int d = 0; d < X.ndim; d++) {
        const ldt_dim_runs *a = &X.runs[d], *b = &Y.runs[d];
        if (b->start == a->start && b->len == a->len && b->blocks == a->blocks &&
            (a->blocks == 1 || b->block_stride == a->block_stride))
            continue;
        if (d0 >= 0 || b->start < a->start) return 0;
        /* the same blocks, a sub-range of each: X's runs lie a->len apart locally (a piece
         * of Y's own blocks out of a buffer whole on the dim is not taken: bucketing the
         * tensor-parallel gathers of such pieces on dp=2,tp=2 changed the losses, not yet
         * understood) */
        if (b->blocks != a->blocks || (a->blocks > 1 && b->block_stride != a->block_stride) ||
            b->start + b->len > a->start + a->len)
            return 0;
        blocks = a->blocks;
        step = a->len;
        d0 = d;
    }
    if (d0 < 0) return 1; /* the whole buffer */
    for (int d = 0; d < d0; d++) outer *= X.local_shape.dims[d];
    for (int d = d0 + 1; d < X.ndim; d++) inner *= X.local_shape.dims[d];
    /* run (r, j) of row r before d0 and block j on d0 is run r * blocks + j, step apart */
    pc->off = (Y.runs[d0].start - X.runs[d0].start) * inner;
    pc->nrun = outer * blocks;
    pc->run = Y.runs[d0].len * inner;
    pc->stride = step * inner;
    return 1;
}

/* A redistribution that ZeRO bucketing takes: one reduce_scatter or all_gather step within
 * the mesh, each piece of it one block on every rank of this rank's group (ldt__bucket_chunk). */
static int zero_member(const ldt__program *p, const ldt__instr *x) {
    ldt_redist_step s;
    const ldt_mesh *m;
    int64_t me[LDT_MAX_DIMS], c[LDT_MAX_DIMS];
    ldt__bucket_piece pc;
    if (x->kind != LDT__I_REDIST || x->async || x->nin != 1 || x->plan->cross || ldt_redist_plan_nsteps(x->plan) != 1)
        return 0;
    ldt_redist_plan_step(x->plan, 0, &s);
    if ((s.collective != LDT_COLL_REDUCE_SCATTER && s.collective != LDT_COLL_ALL_GATHER) || s.ndims < 1)
        return 0;
    m = x->plan->steps[0].before.mesh;
    if (p->vals[p->ops[x->in]].dtype != p->vals[x->out].dtype || ldt_mesh_coord(m, p->rank, me) != LDT_OK) return 0;
    {   /* a group of one rank is a copy, not a collective: nothing to bucket */
        int64_t g = 1;
        for (int k = 0; k < s.ndims; k++) g *= ldt_mesh_dim_size(m, s.dims[k]);
        if (g <= 1) return 0;
    }
    memcpy(c, me, sizeof c);
    for (int k = 0; k < s.ndims; k++) c[s.dims[k]] = 0;
    for (;;) { /* every member of this rank's group: its coordinates over the step's dims */
        int q, k;
        if (ldt_mesh_rank_of(m, c, &q) != LDT_OK || !ldt__bucket_chunk(x->plan, p->rank, q, &pc)) return 0;
        for (k = 0; k < s.ndims && ++c[s.dims[k]] == ldt_mesh_dim_size(m, s.dims[k]); k++) c[s.dims[k]] = 0;
        if (k == s.ndims) return 1;
    }
}

static void rename_reads(ldt__program *p, int64_t from_instr, int32_t old, int32_t new_) {
    for (int64_t i = from_instr; i < p->nins; i++)
        for (int k = 0; k < p->ins[i].nin; k++)
            if (p->ops[p->ins[i].in + k] == old) p->ops[p->ins[i].in + k] = new_;
    for (int64_t n = 0; n < p->nnodes; n++)
        if (p->node_val[n] == old) p->node_val[n] = new_;
}

/* Pass 1. */
static ldt_status in_place(ldt__program *p, const uint8_t *keep, ldt__fuse_stats *st) {
    int32_t *readers = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *readers);
    /* in-place all_reduces made on each value so far: a value reduced over one mesh dim and
     * then another (a Partial on two dims) is reduced in place twice */
    int32_t *done = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *done);
    if (!readers || !done) {
        free(readers);
        free(done);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "fuse: out of memory");
    }
    for (int64_t i = 0; i < p->nins; i++)
        for (int k = 0; k < p->ins[i].nin; k++) readers[p->ops[p->ins[i].in + k]]++;
    { /* divisions whose result nothing reads or keeps are dropped (ldt_grad's division of a
       * gradient that ldt_optim_sync_grads divides again after its reductions): their reads
       * would keep a gradient's reduction from being made in place */
        int64_t k = 0;
        for (int64_t i = p->nins - 1; i >= 0; i--) {
            ldt__instr *x = &p->ins[i];
            if (x->kind != LDT__I_KERNEL || x->op != LDT_OP_DIV || x->nout != 0 || readers[x->out] != 0 ||
                (keep && keep[x->out]))
                continue;
            for (int j = 0; j < x->nin; j++) readers[p->ops[x->in + j]]--;
            x->kind = LDT__I_COUNT; /* marked: removed below */
        }
        for (int64_t i = 0; i < p->nins; i++)
            if (p->ins[i].kind != LDT__I_COUNT) p->ins[k++] = p->ins[i];
        p->nins = k;
    }
    for (int64_t i = 0; i < p->nins; i++) {
        ldt__instr *x = &p->ins[i];
        ldt_redist_step s;
        int32_t src, dst;
        if (!single_all_reduce(x, &s)) continue;
        src = p->ops[x->in];
        dst = x->out;
        if (readers[src] - done[src] != 1 || (keep && keep[src]) || p->vals[src].dtype != p->vals[dst].dtype)
            continue;
        x->kind = LDT__I_ALL_REDUCE;
        x->plan = NULL;
        x->out = src;
        x->reduce = (uint8_t)s.op;
        x->ndims = (uint8_t)s.ndims;
        for (int d = 0; d < s.ndims && d < LDT_MAX_DIMS; d++) x->dims[d] = (uint8_t)s.dims[d];
        rename_reads(p, i + 1, dst, src);
        readers[src] += readers[dst];
        done[src]++;
        st->in_place++;
    }
    free(readers);
    free(done);
    return LDT_OK;
}

static int same_group(const ldt__program *p, const ldt__instr *a, const ldt__instr *b) {
    if (a->kind == LDT__I_REDIST) { /* ZeRO members: the same collective, group, dtype, op */
        ldt_redist_step x, y;
        ldt_redist_plan_step(a->plan, 0, &x);
        ldt_redist_plan_step(b->plan, 0, &y);
        return b->kind == LDT__I_REDIST && x.collective == y.collective && x.ndims == y.ndims &&
               !memcmp(x.dims, y.dims, (size_t)x.ndims * sizeof x.dims[0]) && x.op == y.op &&
               p->vals[a->out].dtype == p->vals[b->out].dtype;
    }
    if (a->reduce != b->reduce || a->ndims != b->ndims || p->vals[a->out].dtype != p->vals[b->out].dtype)
        return 0;
    for (int d = 0; d < a->ndims; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

#define MAX_OPEN 16 /* buckets open at once, one per (group, dtype, reduce op) */

static int spans(const uint8_t *dims, int ndims, int dim) {
    for (int d = 0; d < ndims; d++)
        if (dims[d] == dim) return 1;
    return dim < 0;
}

int64_t ldt__program_collectives_on(const ldt__program *p, int dim) {
    int64_t n = 0;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET) n += spans(x->dims, x->ndims, dim);
        else if (x->kind == LDT__I_REDIST)
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step rs;
                uint8_t dims[LDT_MAX_DIMS];
                ldt_redist_plan_step(x->plan, s, &rs);
                for (int d = 0; d < rs.ndims && d < LDT_MAX_DIMS; d++) dims[d] = (uint8_t)rs.dims[d];
                n += (rs.collective <= LDT_COLL_ALL_TO_ALL || rs.collective == LDT_COLL_SEND_RECV) &&
                     spans(dims, rs.ndims < LDT_MAX_DIMS ? rs.ndims : LDT_MAX_DIMS, dim);
            }
    }
    return n;
}

int64_t ldt__program_collectives(const ldt__program *p) { return ldt__program_collectives_on(p, -1); }

/* Adds a member to *m (grown as needed); 0 when out of memory. */
static int add_member(ldt__dim_member **m, int64_t *n, int64_t *cap, const ldt__dim_member *x) {
    if (*n == *cap) {
        int64_t c = *cap ? 2 * *cap : 64;
        ldt__dim_member *nm = realloc(*m, (size_t)c * sizeof *nm);
        if (!nm) return 0;
        *m = nm;
        *cap = c;
    }
    (*m)[(*n)++] = *x;
    return 1;
}

ldt_status ldt__program_dim_members(const ldt__program *p, int dim, ldt__dim_member **out, int64_t *n) {
    int32_t *dep = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *dep);
    int64_t *lastw = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *lastw), cap = 0, call = 0;
    ldt__dim_member *m = NULL;
    *out = NULL;
    *n = 0;
    if (!dep || !lastw) goto oom;
    for (int32_t v = 0; v < p->nvals; v++) lastw[v] = -1;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        ldt__dim_member mb;
        memset(&mb, 0, sizeof mb);
        mb.at = i;
        if (x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET) {
            int on = spans(x->dims, x->ndims, dim), nm = x->nin;
            mb.call = call;
            mb.coll = x->kind == LDT__I_BUCKET ? x->coll : LDT_COLL_ALL_REDUCE;
            mb.reduce = x->reduce;
            mb.ndims = x->ndims;
            memcpy(mb.dims, x->dims, sizeof mb.dims);
            for (int j = 0; j < nm; j++) {
                int32_t a = p->ops[x->in + j], b = x->kind == LDT__I_BUCKET ? p->ops[x->in + x->nin + j] : a;
                int64_t ba = ldt__value_bytes(&p->vals[a]), bb = ldt__value_bytes(&p->vals[b]);
                int32_t d = dep[a];
                if (on) {
                    mb.ready = lastw[a];
                    mb.bytes = ba > bb ? ba : bb;
                    mb.phase = d;
                    mb.dtype = p->vals[b].dtype;
                    if (!add_member(&m, n, &cap, &mb)) goto oom;
                }
                dep[b] = on ? d + 1 : d;
                lastw[b] = i;
            }
            call += on;
            continue;
        }
        if (x->kind == LDT__I_REDIST) {
            int32_t a = p->ops[x->in], d = dep[a];
            int64_t ba = ldt__value_bytes(&p->vals[a]), bb = ldt__value_bytes(&p->vals[x->out]);
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step rs;
                uint8_t dims[LDT_MAX_DIMS];
                ldt_redist_plan_step(x->plan, s, &rs);
                memset(dims, 0, sizeof dims);
                for (int k = 0; k < rs.ndims && k < LDT_MAX_DIMS; k++) dims[k] = (uint8_t)rs.dims[k];
                if (!((rs.collective <= LDT_COLL_ALL_TO_ALL || rs.collective == LDT_COLL_SEND_RECV) &&
                      spans(dims, rs.ndims < LDT_MAX_DIMS ? rs.ndims : LDT_MAX_DIMS, dim)))
                    continue;
                mb.call = call++;
                mb.ready = lastw[a];
                mb.bytes = ba > bb ? ba : bb;
                mb.phase = d++;
                mb.coll = (uint8_t)rs.collective;
                mb.reduce = (uint8_t)rs.op;
                mb.dtype = p->vals[x->out].dtype;
                mb.ndims = (uint8_t)(rs.ndims < LDT_MAX_DIMS ? rs.ndims : LDT_MAX_DIMS);
                memcpy(mb.dims, dims, sizeof dims);
                if (!add_member(&m, n, &cap, &mb)) goto oom;
            }
            dep[x->out] = d;
            lastw[x->out] = i;
            continue;
        }
        if (x->kind == LDT__I_WAIT || x->out < 0) continue; /* (a wait: its collective wrote its operands) */
        { /* work: what it makes depends on what it reads */
            int32_t d = 0;
            for (int k = 0; k < x->nin; k++)
                if (dep[p->ops[x->in + k]] > d) d = dep[p->ops[x->in + k]];
            dep[x->out] = d;
            lastw[x->out] = i;
            for (int k = 0; k < x->nout; k++) {
                dep[p->ops[x->in + x->nin + k]] = d;
                lastw[p->ops[x->in + x->nin + k]] = i;
            }
        }
    }
    free(dep);
    free(lastw);
    *out = m;
    return LDT_OK;
oom:
    free(dep);
    free(lastw);
    free(m);
    *n = 0;
    LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "fuse: out of memory");
}

/* Phase, kind, then readiness (then position): the order next fit walks. */
static int member_cmp(const void *a_, const void *b_) {
    const ldt__dim_member *a = a_, *b = b_;
    int c;
    if (a->phase != b->phase) return a->phase < b->phase ? -1 : 1;
    if (a->coll != b->coll) return a->coll < b->coll ? -1 : 1;
    if (a->reduce != b->reduce) return a->reduce < b->reduce ? -1 : 1;
    if (a->dtype != b->dtype) return a->dtype < b->dtype ? -1 : 1;
    if (a->ndims != b->ndims) return a->ndims < b->ndims ? -1 : 1;
    if ((c = memcmp(a->dims, b->dims, a->ndims)) != 0) return c;
    if (a->ready != b->ready) return a->ready < b->ready ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

ldt_status ldt__program_dim_buckets(const ldt__program *p, int dim, int64_t cap_bytes, int64_t *out) {
    ldt__dim_member *m;
    int64_t n, nb = 0, fill = 0;
    *out = 0;
    LDT_CHECK(ldt__program_dim_members(p, dim, &m, &n));
    if (n > 1) qsort(m, (size_t)n, sizeof *m, member_cmp);
    for (int64_t i = 0; i < n; i++) {
        int same = i > 0 && m[i].phase == m[i - 1].phase && m[i].coll == m[i - 1].coll &&
                   m[i].reduce == m[i - 1].reduce && m[i].dtype == m[i - 1].dtype &&
                   m[i].ndims == m[i - 1].ndims && !memcmp(m[i].dims, m[i - 1].dims, m[i].ndims);
        if (!same || fill + m[i].bytes > cap_bytes) { /* a new bucket (next fit) */
            nb++;
            fill = 0;
        }
        fill += m[i].bytes;
    }
    free(m);
    *out = nb;
    return LDT_OK;
}

ldt_status ldt__fuse_in_place(ldt__program *p, const uint8_t *keep, ldt__fuse_stats *st) {
    memset(st, 0, sizeof *st);
    st->collectives_before = ldt__program_collectives(p);
    LDT_CHECK(in_place(p, keep, st));
    st->collectives_after = ldt__program_collectives(p);
    return LDT_OK;
}

/* Whether all_reduces a and b touch a common value: each reduces its operands in place (a
 * fused bucket all of its members, not only its first, `out`). */
static int share_value(const ldt__program *p, const ldt__instr *a, const ldt__instr *b) {
    for (int m = 0; m < a->nin; m++)
        for (int k = 0; k < b->nin; k++)
            if (p->ops[a->in + m] == p->ops[b->in + k]) return 1;
    return 0;
}

/* Pass 3: runs of adjacent all_reduces that could not share a bucket (another group, dtype or
 * reduce op) and touch no common value are issued as one group (group start/end), so a
 * backend overlaps them. A value reduced over two mesh dims in two buckets (a Partial on dp
 * and tp) must see one reduction finish before the other starts: in one group a packed bucket
 * (exec/bind.c) would copy back its copy of the value over the other's result, and a backend
 * that runs a group's calls at once would race on it. Every rank has the same instructions:
 * the same groups. */
static void group_runs(ldt__program *p, ldt__fuse_stats *st) {
    for (int64_t i = 0; i < p->nins;) {
        int64_t j = i;
        while (j < p->nins && p->ins[j].kind == LDT__I_ALL_REDUCE) {
            int reads_earlier = 0;
            for (int64_t k = i; k < j && !reads_earlier; k++) reads_earlier = share_value(p, &p->ins[k], &p->ins[j]);
            if (reads_earlier) break;
            j++;
        }
        if (j - i >= 2) {
            for (int64_t k = i; k < j; k++) p->ins[k].group = k == i ? 1 : k == j - 1 ? 3 : 2;
            st->groups++;
        }
        i = j > i ? j : i + 1;
    }
}

/* Pass 2 by readiness (the one used): all_reduces are taken in the order their values become
 * ready (the instruction that last writes them), as data-parallel gradients are in a
 * backward pass, and each joins an open bucket of its (group, dtype, op) while every member
 * can still run where the bucket will: after the last member is ready and before the first
 * reads a result. A bucket is issued right after its last member is ready, so gradient
 * buckets start during the backward (a lone all_reduce too). The positions
 * depend on the program's shape only: every rank decides alike. */
typedef struct rb {
    int64_t *m; /* members, instruction indices */
    int n, cap;
    int64_t bytes, ready, need;
} rb;

/* Closes open bucket c: it joins the closed ones (its members learn their bucket) and the
 * last open one takes its slot. 0 when out of memory. */
static int close_open(rb *open, int *nopen, int c, rb **bs, int64_t *nb, int64_t *capb, int64_t *bucket_of) {
    if (*nb == *capb) {
        int64_t nc = *capb ? 2 * *capb : 16;
        rb *nbs = realloc(*bs, (size_t)nc * sizeof *nbs);
        if (!nbs) return 0;
        *bs = nbs;
        *capb = nc;
    }
    for (int j = 0; j < open[c].n; j++) bucket_of[open[c].m[j]] = *nb;
    (*bs)[(*nb)++] = open[c];
    open[c] = open[--*nopen];
    memset(&open[*nopen], 0, sizeof open[*nopen]);
    return 1;
}

/* The collective ordinal of each instruction of p (the how-manyth REDIST or ALL_REDUCE it is,
 * in program order), -1 for the others; the same collective has the same ordinal on every
 * rank. Returns the count. */
static int64_t collective_ordinals(const ldt__program *p, int64_t *ord) {
    int64_t c = 0;
    for (int64_t i = 0; i < p->nins; i++)
        ord[i] = p->ins[i].kind == LDT__I_REDIST || p->ins[i].kind == LDT__I_ALL_REDUCE ||
                         p->ins[i].kind == LDT__I_BUCKET
                     ? c++
                     : -1;
    return c;
}

/* With sig != NULL, a dry run: p is left as it is, and *sig (malloc'd, *nsig entries) says
 * what the run would issue, in terms every rank can compare: per collective call in the new
 * order, its member count, then its members' collective ordinals. */
static ldt_status buckets_by_ready(ldt__program *p, const int64_t *bytes, int64_t cap_bytes, int zero,
                                   ldt__fuse_stats *st, int64_t **sig, int64_t *nsig) {
    int64_t n = p->nins, ne = 0, *ready = NULL, *need = NULL, *order = NULL, *lastw = NULL, *pos = NULL;
    int64_t nb = 0, capb = 0, nout = 0, nops2;
    rb *bs = NULL, open[MAX_OPEN];
    int nopen = 0;
    ldt__instr *out = NULL;
    int32_t *ops2 = NULL;
    int64_t *bucket_of = NULL;
    ldt_status st_ = LDT_OK;
    memset(open, 0, sizeof open);
    ready = malloc((size_t)(n + 1) * sizeof *ready);
    need = malloc((size_t)(n + 1) * sizeof *need);
    order = malloc((size_t)(n + 1) * sizeof *order);
    lastw = malloc((size_t)(p->nvals + 1) * sizeof *lastw);
    bucket_of = malloc((size_t)(n + 1) * sizeof *bucket_of);
    if (!ready || !need || !order || !lastw || !bucket_of) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    for (int32_t v = 0; v < p->nvals; v++) lastw[v] = -1;
    for (int64_t i = 0; i < n; i++) {
        const ldt__instr *x = &p->ins[i];
        bucket_of[i] = -1;
        if (!zero && x->kind == LDT__I_ALL_REDUCE && x->nin == 1 && !x->async) {
            ready[i] = lastw[x->out];
            need[i] = n;
            for (int64_t j = ready[i] + 1; j < n && need[i] == n; j++) {
                const ldt__instr *y = &p->ins[j];
                if (j == i) continue;
                if (y->out == x->out) need[i] = j;
                for (int k = 0; k < y->nin && need[i] == n; k++)
                    if (p->ops[y->in + k] == x->out) need[i] = j;
            }
            order[ne++] = i;
        } else if (zero && zero_member(p, x) && lastw[p->ops[x->in]] >= 0 &&
                   p->ins[lastw[p->ops[x->in]]].kind != LDT__I_LOAD) {
            /* (not a value loaded from outside the arena, such as a parameter itself: the
             * bucket's grouped side is laid out in the arena) */
            /* ready: its input's last write; needed: where its output is read or written, or
             * (after it) its input overwritten */
            int32_t src = p->ops[x->in];
            ready[i] = lastw[src];
            need[i] = n;
            for (int64_t j = ready[i] + 1; j < n && need[i] == n; j++) {
                const ldt__instr *y = &p->ins[j];
                if (j == i) continue;
                if (y->out == x->out || (j > i && y->out == src)) need[i] = j;
                for (int k = 0; k < y->nin + y->nout && need[i] == n; k++)
                    if (p->ops[y->in + k] == x->out || (k >= y->nin && p->ops[y->in + k] == src && j > i))
                        need[i] = j;
            }
            order[ne++] = i;
        }
        lastw[x->out] = i;
        for (int k = 0; k < x->nout; k++) lastw[p->ops[x->in + x->nin + k]] = i;
    }
    /* readiness order, ties by position (insertion sort: stable, deterministic) */
    for (int64_t a = 1; a < ne; a++)
        for (int64_t b = a; b > 0 && (ready[order[b]] < ready[order[b - 1]]); b--) {
            int64_t t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int64_t q = 0; q <= ne; q++) {
        int64_t i = q < ne ? order[q] : -1;
        int k = -1, fresh;
        if (i >= 0)
            for (k = 0; k < nopen; k++) {
                rb *b = &open[k];
                int64_t r = ready[i] > b->ready ? ready[i] : b->ready, nd = need[i] < b->need ? need[i] : b->need;
                if (same_group(p, &p->ins[b->m[0]], &p->ins[i]) && b->bytes + bytes[i] <= cap_bytes && r < nd) break;
            }
        fresh = k == nopen; /* no open bucket takes it: a new one, after closing its kind's */
        /* close the open bucket of the same kind that cannot take it (or all, at the end) */
        for (int c = 0; c < nopen; c++) {
            int close = i < 0 || (fresh && same_group(p, &p->ins[open[c].m[0]], &p->ins[i]));
            if (!close) continue;
            if (!close_open(open, &nopen, c, &bs, &nb, &capb, bucket_of)) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
            c--;
        }
        if (i < 0) break;
        if (fresh) {
            if (nopen == MAX_OPEN && !close_open(open, &nopen, 0, &bs, &nb, &capb, bucket_of))
                LDT_FAIL_GOTO_(st_, "fuse: out of memory"); /* no room: the oldest goes out */
            k = nopen++;
            open[k].ready = ready[i];
            open[k].need = need[i];
        }
        {
            rb *b = &open[k];
            if (b->n == b->cap) {
                int c = b->cap ? 2 * b->cap : 8;
                int64_t *nm = realloc(b->m, (size_t)c * sizeof *nm);
                if (!nm) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
                b->m = nm;
                b->cap = c;
            }
            b->m[b->n++] = i;
            b->bytes += bytes[i];
            if (ready[i] > b->ready) b->ready = ready[i];
            if (need[i] < b->need) b->need = need[i];
        }
    }
    {
        int64_t members = 0;
        for (int64_t b = 0; b < nb; b++) members += bs[b].n;
        if (members != ne) LDT_FAIL_GOTO_(st_, "fuse: internal error: %lld of %lld all_reduces bucketed", (long long)members, (long long)ne);
    }
    /* where each bucket goes: right after its last member is ready */
    if (!(pos = malloc((size_t)(nb ? nb : 1) * sizeof *pos))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    for (int64_t b = 0; b < nb; b++) pos[b] = bs[b].ready;
    /* buckets of different kinds whose windows meet go to one point, side by side, so pass 3
     * issues them as one group; a kind never waits for its own next bucket */
    for (int64_t b = 0; b < nb; b++) {
        int64_t need_all = bs[b].need;
        for (int64_t d = 0; d < nb; d++)
            if (pos[d] == pos[b] && bs[d].need < need_all) need_all = bs[d].need;
        for (int64_t c = 0; c < nb; c++) {
            int clash = 0;
            if (c == b || pos[c] <= pos[b] || pos[c] >= need_all) continue;
            /* c is placed after a member of b (or of a bucket at b's point) because it reads
             * what that member makes (an all_gather of a reduce_scatter's result): b stays
             * before it */
            if (bucket_of[pos[c]] >= 0 && (bucket_of[pos[c]] == b || pos[bucket_of[pos[c]]] == pos[b]))
                continue;
            for (int64_t d = 0; d < nb && !clash; d++)
                clash = (d == b || pos[d] == pos[b]) && same_group(p, &p->ins[bs[d].m[0]], &p->ins[bs[c].m[0]]);
            if (clash) continue;
            for (int64_t d = 0; d < nb; d++)
                if (d != b && pos[d] == pos[b]) pos[d] = pos[c];
            pos[b] = pos[c];
            if (bs[c].need < need_all) need_all = bs[c].need;
        }
    }
    if (sig) { /* the dry run's account, in the order the loop below would emit */
        int64_t *ord = malloc((size_t)(n + 1) * sizeof *ord), k = 0;
        *sig = malloc((size_t)(2 * n + 1) * sizeof **sig);
        if (!ord || !*sig) {
            free(ord);
            LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        }
        collective_ordinals(p, ord);
        for (int64_t at = -1; at < n; at++) {
            if (at >= 0 && bucket_of[at] < 0 && ord[at] >= 0) {
                (*sig)[k++] = 1;
                (*sig)[k++] = ord[at];
            }
            for (int64_t b = 0; b < nb; b++) {
                if (pos[b] != at) continue;
                (*sig)[k++] = bs[b].n;
                for (int j = 0; j < bs[b].n; j++) { /* members in program order */
                    int64_t m = ord[bs[b].m[j]], c = k + j;
                    for (; c > k && (*sig)[c - 1] > m; c--) (*sig)[c] = (*sig)[c - 1];
                    (*sig)[c] = m;
                }
                k += bs[b].n;
            }
        }
        *nsig = k;
        free(ord);
        goto fail; /* st_ is LDT_OK: the common cleanup */
    }
    out = malloc((size_t)(n + 1) * sizeof *out);
    if (!out || !(ops2 = malloc((size_t)(p->nops + 2 * n + 1) * sizeof *ops2))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    memcpy(ops2, p->ops, (size_t)p->nops * sizeof *ops2);
    nops2 = p->nops;
    if (!p->vgroup) { /* the all_reduce pass makes it; the ZeRO pass adds to it */
        if (!(p->vgroup = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *p->vgroup)))
            LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        for (int32_t v = 0; v < p->nvals; v++) p->vgroup[v] = -1;
        p->ngroups = 0;
    }
    if (zero) {
        int64_t nm = 0;
        const ldt_redist_plan **np2;
        for (int64_t b = 0; b < nb; b++) nm += bs[b].n > 1 ? bs[b].n : 0;
        if (!(np2 = realloc(p->bplans, (size_t)(p->nbplans + nm + 1) * sizeof *np2))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        p->bplans = np2;
    }
    for (int64_t at = -1; at < n; at++) {
        if (at >= 0 && bucket_of[at] < 0) out[nout++] = p->ins[at];
        for (int64_t b = 0; b < nb; b++) {
            if (pos[b] != at) continue;
            if (bs[b].n == 1) {
                out[nout++] = p->ins[bs[b].m[0]];
            } else {
                ldt__instr f = p->ins[bs[b].m[0]];
                /* members in program order: the memory plan places them so */
                for (int a = 1; a < bs[b].n; a++)
                    for (int c = a; c > 0 && bs[b].m[c] < bs[b].m[c - 1]; c--) {
                        int64_t t = bs[b].m[c];
                        bs[b].m[c] = bs[b].m[c - 1];
                        bs[b].m[c - 1] = t;
                    }
                f = p->ins[bs[b].m[0]];
                f.nin = bs[b].n;
                f.in = (int32_t)nops2;
                if (zero) { /* inputs, then outputs; the side one buffer can hold is a group */
                    ldt_redist_step rs;
                    ldt_redist_plan_step(f.plan, 0, &rs);
                    f.kind = LDT__I_BUCKET;
                    f.coll = (uint8_t)rs.collective;
                    f.reduce = (uint8_t)rs.op;
                    f.ndims = (uint8_t)rs.ndims;
                    for (int d = 0; d < rs.ndims && d < LDT_MAX_DIMS; d++) f.dims[d] = (uint8_t)rs.dims[d];
                    f.nout = bs[b].n;
                    f.bplan = (int32_t)p->nbplans;
                    for (int j = 0; j < bs[b].n; j++) {
                        ops2[nops2++] = p->ops[p->ins[bs[b].m[j]].in];
                        p->bplans[p->nbplans++] = p->ins[bs[b].m[j]].plan;
                    }
                    for (int j = 0; j < bs[b].n; j++) ops2[nops2++] = p->ins[bs[b].m[j]].out;
                    for (int j = 0; j < bs[b].n; j++) {
                        int32_t v = ops2[f.in + (rs.collective == LDT_COLL_REDUCE_SCATTER ? bs[b].n : 0) + j];
                        if (p->vgroup[v] < 0) p->vgroup[v] = p->ngroups;
                    }
                } else {
                    for (int j = 0; j < bs[b].n; j++) {
                        int32_t v = p->ins[bs[b].m[j]].out;
                        ops2[nops2++] = v;
                        p->vgroup[v] = p->ngroups;
                    }
                }
                p->ngroups++;
                out[nout++] = f;
                st->fused_calls++;
                st->fused_members += bs[b].n;
            }
        }
    }
    ldt__program_set_ins(p, out, nout, ops2, nops2);
    out = NULL;
    ops2 = NULL;
fail:
    for (int64_t b = 0; b < nb; b++) free(bs[b].m);
    for (int c = 0; c < nopen; c++) free(open[c].m);
    free(bs);
    free(ready);
    free(need);
    free(order);
    free(lastw);
    free(pos);
    free(bucket_of);
    free(out);
    free(ops2);
    return st_;
}

ldt_status ldt__fuse_buckets(ldt__program *p, const int64_t *bytes, int64_t cap_bytes, int zero,
                             ldt__fuse_stats *st) {
    LDT_CHECK(buckets_by_ready(p, bytes, cap_bytes, zero, st, NULL, NULL));
    if (zero) /* a bucket may land inside a grouped run: the runs anew */
        for (int64_t i = 0; i < p->nins; i++) p->ins[i].group = 0;
    group_runs(p, st);
    st->collectives_after = ldt__program_collectives(p);
    return LDT_OK;
}

/* Before pass 2: kernels that make a few numbers (SINK_BYTES at most) from what a lone
 * all_reduce made (or from such numbers), and divisions by such numbers, move down to just
 * before their first reader, or to the end where only the step's outputs read them, so that
 * all_reduce can wait for a later bucket: a mean loss's [sum, count] pair, read by the loss's
 * value and by the gradients' division by the count after their own reduction (docs/replay.md,
 * "Gradient bucketing"; the divisions of the gradients reduced first wait for those reduced
 * later, the interleaved-sharded ones). Otherwise only small values move: work that makes
 * gradients keeps its place, so buckets start as early as before. A kernel moves only when nothing writes its inputs or its output after
 * it; collectives and every other instruction keep their order. Returns the count moved (-1:
 * out of memory). */
#define SINK_BYTES 64
static int64_t sink_late(ldt__program *p) {
    int64_t n = p->nins, moved = 0, *lastw = malloc((size_t)((p->nvals > n ? p->nvals : n) + 1) * sizeof *lastw);
    int64_t *first = malloc((size_t)(p->nvals + 1) * sizeof *first), *anchor = malloc((size_t)(n + 1) * sizeof *anchor);
    uint8_t *reach = calloc((size_t)(p->nvals + 1), 1), *cand = calloc((size_t)(n + 1), 1);
    ldt__instr *out = NULL;
    if (!lastw || !first || !anchor || !reach || !cand) {
        moved = -1;
        goto done;
    }
    for (int32_t v = 0; v < p->nvals; v++) lastw[v] = -1, first[v] = n;
    for (int64_t i = 0; i < n; i++) {
        const ldt__instr *x = &p->ins[i];
        lastw[x->out] = i;
        for (int k = 0; k < x->nout; k++) lastw[p->ops[x->in + x->nin + k]] = i;
    }
    for (int64_t i = 0; i < n; i++) { /* the candidates, fed by a lone all_reduce */
        const ldt__instr *x = &p->ins[i];
        int w = x->kind == LDT__I_KERNEL && x->nout == 0 && lastw[x->out] == i, r = 0, rs = 0;
        int c = w && ldt__value_bytes(&p->vals[x->out]) <= SINK_BYTES;
        if (x->kind == LDT__I_ALL_REDUCE && x->nin == 1) reach[x->out] = 1;
        for (int k = 0; w && k < x->nin; k++) {
            int32_t v = p->ops[x->in + k];
            w = lastw[v] < i;
            r |= reach[v];
            rs |= reach[v] && ldt__value_bytes(&p->vals[v]) <= SINK_BYTES;
        }
        cand[i] = (uint8_t)(w && ((c && r) || (x->op == LDT_OP_DIV && rs)));
        if (cand[i] && c) reach[x->out] = 1;
    }
    for (int64_t i = n - 1; i >= 0; i--) { /* where each goes: before its first reader */
        const ldt__instr *x = &p->ins[i];
        anchor[i] = cand[i] ? first[x->out] : i;
        moved += cand[i] && anchor[i] > i + 1;
        for (int k = 0; k < x->nin; k++)
            if (anchor[i] < first[p->ops[x->in + k]]) first[p->ops[x->in + k]] = anchor[i];
    }
    if (moved && !(out = malloc((size_t)n * sizeof *out))) {
        moved = -1;
        goto done;
    }
    if (moved) { /* instruction j after the candidates anchored at it; then those at the end */
        int64_t k = 0, *head = malloc((size_t)(n + 1) * sizeof *head), *last = malloc((size_t)(n + 1) * sizeof *last);
        int64_t *next = lastw; /* reused: per candidate, the next one at its anchor */
        if (!head || !last) {
            free(head);
            free(last);
            moved = -1;
            goto done;
        }
        for (int64_t j = 0; j <= n; j++) head[j] = last[j] = -1;
        for (int64_t c = 0; c < n; c++) {
            if (!cand[c]) continue;
            next[c] = -1;
            if (last[anchor[c]] < 0) head[anchor[c]] = c;
            else next[last[anchor[c]]] = c;
            last[anchor[c]] = c;
        }
        for (int64_t j = 0; j <= n; j++) {
            for (int64_t c = head[j]; c >= 0; c = next[c]) out[k++] = p->ins[c];
            if (j < n && !cand[j]) out[k++] = p->ins[j];
        }
        memcpy(p->ins, out, (size_t)n * sizeof *out);
        free(head);
        free(last);
    }
done:
    free(lastw);
    free(first);
    free(anchor);
    free(reach);
    free(cand);
    free(out);
    return moved;
}

/* The group marks of p's collectives in order (0 for a call of its own), into g; the count. */
static int64_t group_marks(const ldt__program *p, uint8_t *g) {
    int64_t k = 0;
    for (int64_t i = 0; i < p->nins; i++)
        if (p->ins[i].kind == LDT__I_REDIST || p->ins[i].kind == LDT__I_ALL_REDUCE) g[k++] = p->ins[i].group;
    return k;
}

ldt_status ldt__fuse_agreed(ldt__program *const *progs, int nprogs, int64_t cap_bytes, int zero,
                            ldt__fuse_stats *st, int *agreed) {
    int64_t ncoll = -1, *cbytes = NULL, *ref = NULL, nref = 0, **ords = NULL;
    int first = -1, ok = 1;
    ldt_status st_ = LDT_OK;
    memset(st, 0, sizeof *st);
    *agreed = 0;
    for (int r = 0; !zero && r < nprogs; r++) /* keeps every collective where it is: no decision */
        if (progs[r] && sink_late(progs[r]) < 0) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "fuse: out of memory");
    if (!(ords = calloc((size_t)(nprogs ? nprogs : 1), sizeof *ords))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "fuse: out of memory");
    /* the same collectives, in the same order, of the same kind, group, dtype and op */
    for (int r = 0; r < nprogs && ok; r++) {
        const ldt__program *p = progs[r];
        int64_t c;
        if (!p) continue;
        if (!(ords[r] = malloc((size_t)(p->nins + 1) * sizeof **ords))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        c = collective_ordinals(p, ords[r]);
        if (first < 0) {
            first = r;
            ncoll = c;
            if (!(cbytes = calloc((size_t)(c + 1), sizeof *cbytes))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        } else if (c != ncoll) {
            ok = 0;
            break;
        }
        for (int64_t i = 0, j = 0; i < p->nins && ok; i++) {
            const ldt__instr *x = &p->ins[i], *y;
            int64_t b;
            if (ords[r][i] < 0) continue;
            /* the first program's instruction with the same ordinal */
            while (ords[first][j] != ords[r][i]) j++;
            y = &progs[first]->ins[j];
            ok = x->kind == y->kind && x->nin == y->nin && x->async == y->async &&
                 (x->kind != LDT__I_ALL_REDUCE ||
                  (x->reduce == y->reduce && x->ndims == y->ndims && !memcmp(x->dims, y->dims, x->ndims) &&
                   p->vals[x->out].dtype == progs[first]->vals[y->out].dtype));
            b = !zero && x->kind == LDT__I_ALL_REDUCE ? ldt__value_bytes(&p->vals[x->out]) : 0;
            if (zero && x->kind == LDT__I_REDIST) { /* the whole tensor's bytes on a rank */
                int64_t a = ldt__value_bytes(&p->vals[p->ops[x->in]]), c = ldt__value_bytes(&p->vals[x->out]);
                b = a > c ? a : c;
            }
            if (b > cbytes[ords[r][i]]) cbytes[ords[r][i]] = b; /* the largest over ranks */
        }
    }
    if (!ok || first < 0) goto fail;
    /* every rank's decision, dry; they must be one decision */
    for (int r = 0; r < nprogs && ok; r++) {
        ldt__program *p = progs[r];
        int64_t *bytes, *sig = NULL, nsig = 0;
        ldt__fuse_stats fs;
        if (!p) continue;
        if (!(bytes = malloc((size_t)(p->nins + 1) * sizeof *bytes))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        for (int64_t i = 0; i < p->nins; i++) bytes[i] = ords[r][i] >= 0 ? cbytes[ords[r][i]] : 0;
        memset(&fs, 0, sizeof fs);
        st_ = buckets_by_ready(p, bytes, cap_bytes, zero, &fs, &sig, &nsig);
        free(bytes);
        if (st_ != LDT_OK) goto fail;
        if (!ref) {
            ref = sig;
            nref = nsig;
        } else {
            ok = nsig == nref && !memcmp(sig, ref, (size_t)nsig * sizeof *sig);
            free(sig);
        }
    }
    if (!ok) goto fail;
    /* one decision: apply it everywhere */
    for (int r = 0; r < nprogs; r++) {
        ldt__program *p = progs[r];
        int64_t *bytes;
        ldt__fuse_stats fs;
        if (!p) continue;
        if (!(bytes = malloc((size_t)(p->nins + 1) * sizeof *bytes))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        for (int64_t i = 0; i < p->nins; i++) bytes[i] = ords[r][i] >= 0 ? cbytes[ords[r][i]] : 0;
        memset(&fs, 0, sizeof fs);
        st_ = ldt__fuse_buckets(p, bytes, cap_bytes, zero, &fs);
        free(bytes);
        if (st_ != LDT_OK) goto fail;
        if (fs.fused_calls > st->fused_calls) st->fused_calls = fs.fused_calls;
        if (fs.fused_members > st->fused_members) st->fused_members = fs.fused_members;
        if (fs.groups > st->groups) st->groups = fs.groups;
    }
    *agreed = 1;
    { /* group marks follow adjacency, which other instructions can break on one rank only:
         where they differ, every collective is issued as a call of its own */
        uint8_t *g0 = malloc((size_t)(nref + 1)), *g = malloc((size_t)(nref + 1));
        int64_t n0 = -1, same = 1;
        if (!g0 || !g) {
            free(g0);
            free(g);
            LDT_FAIL_GOTO_(st_, "fuse: out of memory");
        }
        for (int r = 0; r < nprogs && same; r++) {
            int64_t n1;
            if (!progs[r]) continue;
            if (n0 < 0) {
                n0 = group_marks(progs[r], g0);
                continue;
            }
            n1 = group_marks(progs[r], g);
            same = n1 == n0 && !memcmp(g, g0, (size_t)n0);
        }
        if (!same) {
            for (int r = 0; r < nprogs; r++)
                for (int64_t i = 0; progs[r] && i < progs[r]->nins; i++) progs[r]->ins[i].group = 0;
            st->groups = 0;
        }
        free(g0);
        free(g);
    }
fail:
    for (int r = 0; r < nprogs; r++) free(ords[r]);
    free(ords);
    free(cbytes);
    free(ref);
    return st_;
}
