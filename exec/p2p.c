/* Pipelines' point-to-point instructions (docs/pipeline.md): SEND posts a value to the peer
 * stage and goes on, RECV waits for the next message of its channel, SEND_WAIT (the step's
 * last instruction) waits until every posted send has been received, so no buffer is
 * reused while a peer may still read it. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"

/* The p2p table's entry i as (lo, hi, k) for the order channels are made in. */
static int chan_before(const rank_state *rs, int a, int b) {
    const int32_t(*t)[2] = rs->prog->p2p;
    int me = rs->rank;
    int alo = t[a][0] < me ? t[a][0] : me, ahi = t[a][0] < me ? me : t[a][0];
    int blo = t[b][0] < me ? t[b][0] : me, bhi = t[b][0] < me ? me : t[b][0];
    if (alo != blo) return alo < blo;
    if (ahi != bhi) return ahi < bhi;
    return t[a][1] < t[b][1];
}

ldt_status ldt__p2p_channels(rank_state *rs, ldt_comm *world) {
    const ldt__program *p = rs->prog;
    int n = p->np2p, *order;
    ldt_status st = LDT_OK;
    if (!n || rs->p2p) return LDT_OK;
    if (!world) LDT_FAIL(LDT_ERR_INTERNAL, "pipeline: rank %d has no world to make its p2p channels in", rs->rank);
    rs->p2p = calloc((size_t)n, sizeof *rs->p2p);
    order = malloc((size_t)n * sizeof *order);
    if (!rs->p2p || !order) {
        free(order);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    }
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort: a handful of channels */
        for (int j = i; j > 0 && chan_before(rs, order[j], order[j - 1]); j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    /* every pair makes its channels in (lo, hi, k) order on both members: the k-th two-rank
     * group of a pair is its channel k (exec/comm_threads.c, MPI_Comm_create_group) */
    for (int i = 0; i < n && st == LDT_OK; i++) {
        int peer = p->p2p[order[i]][0];
        int ranks[2] = {peer < rs->rank ? peer : rs->rank, peer < rs->rank ? rs->rank : peer};
        st = ldt_comm_group(world, 2, ranks, &rs->p2p[order[i]]);
    }
    free(order);
    return st;
}

void ldt__p2p_free(rank_state *rs) {
    const ldt__comm_vtable *vt = NULL;
    for (int k = 0; rs->p2p && k < rs->prog->np2p && !vt; k++)
        if (rs->p2p[k]) vt = rs->p2p[k]->vt;
    for (int64_t i = 0; vt && i < rs->nsreq; i++) vt->send_cancel(rs->sreq[i]); /* a step that failed */
    free(rs->sreq);
    rs->sreq = NULL;
    rs->nsreq = rs->cap_sreq = 0;
    for (int k = 0; rs->p2p && k < rs->prog->np2p; k++) ldt_comm_destroy(rs->p2p[k]);
    free(rs->p2p);
    rs->p2p = NULL;
}

/* The channel's communicator and the peer's rank in it (the pair's lower world rank is 0). */
static ldt_status channel(binstr *b, const ldt__instr *x, ldt_comm **c, int *peer) {
    rank_state *rs = b->rs;
    int w = rs->prog->p2p[x->op][0];
    if (!rs->p2p) LDT_CHECK(ldt__p2p_channels(rs, rs->world));
    *c = rs->p2p[x->op];
    *peer = w < rs->rank ? 0 : 1;
    return LDT_OK;
}

static ldt_status w_send(const ldt__kcall *k) {
    binstr *b = BIN_OF(k);
    rank_state *rs = b->rs;
    const ldt__instr *x = &rs->prog->ins[b->idx];
    ldt__op op;
    ldt_comm *c = NULL;
    int peer = 0;
    LDT_CHECK(channel(b, x, &c, &peer));
    if (rs->nsreq == rs->cap_sreq) {
        int64_t cap = rs->cap_sreq ? 2 * rs->cap_sreq : 16;
        struct ldt__send_req **n = realloc(rs->sreq, (size_t)cap * sizeof *n);
        if (!n) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "send: out of memory");
        rs->sreq = n;
        rs->cap_sreq = cap;
    }
    memset(&op, 0, sizeof op);
    op.kind = LDT__OP_SEND;
    op.dtype = k->out.dtype;
    op.count = b->count;
    op.send = k->out.data;
    op.root = peer;
    LDT_CHECK(c->vt->send_post(c, &op, &rs->sreq[rs->nsreq]));
    rs->nsreq++;
    return LDT_OK;
}

static ldt_status w_recv(const ldt__kcall *k) {
    binstr *b = BIN_OF(k);
    const ldt__instr *x = &b->rs->prog->ins[b->idx];
    ldt__op op;
    ldt_comm *c = NULL;
    int peer = 0;
    LDT_CHECK(channel(b, x, &c, &peer));
    memset(&op, 0, sizeof op);
    op.kind = LDT__OP_RECV;
    op.dtype = k->out.dtype;
    op.count = b->count;
    op.recv = k->out.data;
    op.root = peer;
    return c->vt->recv(c, &op);
}

static ldt_status w_send_wait(const ldt__kcall *k) {
    rank_state *rs = BIN_OF(k)->rs;
    ldt_status st = LDT_OK;
    int64_t i = 0;
    for (; i < rs->nsreq && st == LDT_OK; i++) st = rs->p2p[0]->vt->send_wait(rs->sreq[i]);
    for (; i < rs->nsreq; i++) rs->p2p[0]->vt->send_cancel(rs->sreq[i]); /* after a failure */
    rs->nsreq = 0;
    return st;
}

ldt__kernel_fn ldt__p2p_fn(int kind) {
    return kind == LDT__I_SEND ? w_send : kind == LDT__I_RECV ? w_recv : w_send_wait;
}
