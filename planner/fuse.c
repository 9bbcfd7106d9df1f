/* Collective fusion on a rank's program (docs/replay.md, "Fused collectives").
 *
 * 1. In place: a redistribution that is one all_reduce step (P -> R on some mesh dims) whose
 *    source nobody else reads becomes an all_reduce on the source's own buffer; later readers
 *    of the moved value read the source.
 * 2. Buckets: consecutive-in-effect all_reduces of the same group, dtype and reduce op are
 *    delayed and merged into one call, up to a byte cap, the bucket closing before the first
 *    instruction that reads one of its values (or before any other collective, so every rank
 *    issues its collectives in one order). The members become one memory-plan group, placed
 *    back to back, so the fused call works in place on one contiguous range: no packing.
 *
 * Decisions must be the same on every rank (ranks meet at collectives), so sizes come from
 * `bytes`, one figure per instruction position that the caller makes rank-independent (the
 * largest over ranks); every rank's program has the same instructions in the same order. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/fuse.h"

static int is_collective(const ldt__instr *x) {
    return x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE;
}

/* The single all_reduce step of a redistribution, or NULL. */
static int single_all_reduce(const ldt__instr *x, ldt_redist_step *s) {
    if (x->kind != LDT__I_REDIST || ldt_redist_plan_nsteps(x->plan) != 1) return 0;
    ldt_redist_plan_step(x->plan, 0, s);
    return s->collective == LDT_COLL_ALL_REDUCE && s->ndims >= 1;
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
    if (!readers) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "fuse: out of memory");
    for (int64_t i = 0; i < p->nins; i++)
        for (int k = 0; k < p->ins[i].nin; k++) readers[p->ops[p->ins[i].in + k]]++;
    for (int64_t i = 0; i < p->nins; i++) {
        ldt__instr *x = &p->ins[i];
        ldt_redist_step s;
        int32_t src, dst;
        if (!single_all_reduce(x, &s)) continue;
        src = p->ops[x->in];
        dst = x->out;
        if (readers[src] != 1 || (keep && keep[src]) || p->vals[src].dtype != p->vals[dst].dtype)
            continue;
        x->kind = LDT__I_ALL_REDUCE;
        x->plan = NULL;
        x->out = src;
        x->reduce = (uint8_t)s.op;
        x->ndims = (uint8_t)s.ndims;
        for (int d = 0; d < s.ndims; d++) x->dims[d] = (uint8_t)s.dims[d];
        rename_reads(p, i + 1, dst, src);
        readers[src] += readers[dst];
        st->in_place++;
    }
    free(readers);
    return LDT_OK;
}

static int same_group(const ldt__program *p, const ldt__instr *a, const ldt__instr *b) {
    if (a->reduce != b->reduce || a->ndims != b->ndims || p->vals[a->out].dtype != p->vals[b->out].dtype)
        return 0;
    for (int d = 0; d < a->ndims; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

typedef struct bucket {
    int64_t *members; /* instruction indices, in program order */
    int n, cap;
    int64_t bytes;
} bucket;

#define MAX_OPEN 16 /* buckets open at once, one per (group, dtype, reduce op) */

/* The call of bucket b, appended to out: one member stays as it was; more become one call
 * whose operands are the members, placed back to back by the memory plan. */
static void emit_bucket(ldt__program *p, bucket *b, ldt__instr *out, int64_t *n, int32_t *ops2,
                        int64_t *nops2, uint8_t *in_bucket, ldt__fuse_stats *st) {
    if (b->n == 1) {
        out[(*n)++] = p->ins[b->members[0]];
    } else {
        ldt__instr f = p->ins[b->members[0]];
        f.nin = b->n;
        f.in = (int32_t)*nops2;
        for (int j = 0; j < b->n; j++) {
            int32_t v = p->ins[b->members[j]].out;
            ops2[(*nops2)++] = v;
            p->vgroup[v] = p->ngroups;
        }
        p->ngroups++;
        out[(*n)++] = f;
        st->fused_calls++;
        st->fused_members += b->n;
    }
    for (int j = 0; j < b->n; j++) in_bucket[p->ins[b->members[j]].out] = 0;
    b->n = 0;
    b->bytes = 0;
}

/* Pass 2: the fused program (instructions in order, buckets where they close). Several
 * buckets stay open at once, one per (group, dtype, reduce op); when any must close (a reader
 * of one of its values, another kind of collective, or the end) all close, in the order they
 * opened, side by side, so pass 3 can issue them as one group. A bucket that would pass the
 * cap closes alone and starts again. */
static ldt_status buckets(ldt__program *p, const int64_t *bytes, int64_t cap_bytes,
                          ldt__fuse_stats *st) {
    ldt__instr *out = malloc((size_t)(p->nins ? p->nins : 1) * sizeof *out);
    uint8_t *in_bucket = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    int32_t *ops2 = NULL;
    int64_t n = 0, nops2 = 0;
    bucket bs[MAX_OPEN];
    int nb = 0;
    ldt_status st_ = LDT_OK;
    memset(bs, 0, sizeof bs);
    if (!out || !in_bucket) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    /* fused calls take one operand per member: at most as many operands again */
    if (!(ops2 = malloc((size_t)(p->nops + p->nins + 1) * sizeof *ops2))) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    memcpy(ops2, p->ops, (size_t)p->nops * sizeof *ops2);
    nops2 = p->nops;
    if (!(p->vgroup = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *p->vgroup)))
        LDT_FAIL_GOTO_(st_, "fuse: out of memory");
    for (int32_t v = 0; v < p->nvals; v++) p->vgroup[v] = -1;
    for (int64_t i = 0; i <= p->nins; i++) {
        const ldt__instr *x = i < p->nins ? &p->ins[i] : NULL;
        int close = !x, k;
        if (x && x->kind == LDT__I_ALL_REDUCE && x->nin == 1) {
            for (k = 0; k < nb && !same_group(p, &p->ins[bs[k].members[0]], x); k++) {}
            if (k < nb && bs[k].bytes + bytes[i] > cap_bytes) /* full: it goes out now */
                emit_bucket(p, &bs[k], out, &n, ops2, &nops2, in_bucket, st);
            if (k == nb && nb == MAX_OPEN) close = 1; /* no room: everything goes out */
        } else if (x) {
            if (is_collective(x)) close = 1; /* collectives keep their order on every rank */
            for (int j = 0; !close && j < x->nin; j++) close = in_bucket[p->ops[x->in + j]];
        }
        if (close) {
            for (int j = 0; j < nb; j++)
                if (bs[j].n) emit_bucket(p, &bs[j], out, &n, ops2, &nops2, in_bucket, st);
            for (int j = 0; j < nb; j++) free(bs[j].members);
            memset(bs, 0, sizeof bs);
            nb = 0;
        }
        if (!x) break;
        if (x->kind == LDT__I_ALL_REDUCE && x->nin == 1) {
            bucket *b;
            for (k = 0; k < nb && (!bs[k].n || !same_group(p, &p->ins[bs[k].members[0]], x)); k++) {}
            if (k == nb) {
                for (k = 0; k < nb && bs[k].n; k++) {} /* an emptied slot, else a new one */
                if (k == nb) nb++;
            }
            b = &bs[k];
            if (b->n == b->cap) {
                int c = b->cap ? 2 * b->cap : 16;
                int64_t *m = realloc(b->members, (size_t)c * sizeof *m);
                if (!m) LDT_FAIL_GOTO_(st_, "fuse: out of memory");
                b->members = m;
                b->cap = c;
            }
            b->members[b->n++] = i;
            b->bytes += bytes[i];
            in_bucket[x->out] = 1;
        } else {
            out[n++] = *x;
        }
    }
    free(p->ins);
    p->ins = out;
    p->nins = n;
    p->cap_ins = p->nins ? p->nins : 1;
    out = NULL;
    free(p->ops);
    p->ops = ops2;
    p->nops = nops2;
    p->cap_ops = p->nops + p->nins + 1;
    ops2 = NULL;
fail:
    free(out);
    free(ops2);
    free(in_bucket);
    for (int j = 0; j < nb; j++) free(bs[j].members);
    return st_;
}

int64_t ldt__program_collectives(const ldt__program *p) {
    int64_t n = 0;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_ALL_REDUCE) n++;
        else if (x->kind == LDT__I_REDIST)
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step rs;
                ldt_redist_plan_step(x->plan, s, &rs);
                n += rs.collective <= LDT_COLL_ALL_TO_ALL || rs.collective == LDT_COLL_SEND_RECV;
            }
    }
    return n;
}

ldt_status ldt__fuse_in_place(ldt__program *p, const uint8_t *keep, ldt__fuse_stats *st) {
    memset(st, 0, sizeof *st);
    st->collectives_before = ldt__program_collectives(p);
    LDT_CHECK(in_place(p, keep, st));
    st->collectives_after = ldt__program_collectives(p);
    return LDT_OK;
}

/* Pass 3: runs of adjacent all_reduces that could not share a bucket (another group, dtype or
 * reduce op) and do not read each other's results are issued as one group (group start/end),
 * so a backend overlaps them. Every rank has the same instructions: the same groups. */
static void group_runs(ldt__program *p, ldt__fuse_stats *st) {
    for (int64_t i = 0; i < p->nins;) {
        int64_t j = i;
        while (j < p->nins && p->ins[j].kind == LDT__I_ALL_REDUCE) {
            int reads_earlier = 0;
            for (int64_t k = i; k < j && !reads_earlier; k++)
                for (int m = 0; m < p->ins[j].nin; m++)
                    if (p->ops[p->ins[j].in + m] == p->ins[k].out) reads_earlier = 1;
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

ldt_status ldt__fuse_buckets(ldt__program *p, const int64_t *bytes, int64_t cap_bytes,
                             ldt__fuse_stats *st) {
    LDT_CHECK(buckets(p, bytes, cap_bytes, st));
    group_runs(p, st);
    st->collectives_after = ldt__program_collectives(p);
    return LDT_OK;
}
