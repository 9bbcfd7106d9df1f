/* Pipelined steps (docs/pipeline.md): every rank's program, lowered for the whole step with
 * every tensor whole on the pp mesh dim, keeps only its stages' instructions, ordered by the
 * schedule; a value a rank reads but another stage computes is sent there (SEND right after
 * its last write, never waiting) and received (RECV right before its first read). Outputs
 * and assigned values reach every rank, so reading results and parameters works as for any
 * step. Channels: per pair of ranks, the fewest two-rank communicators on which each one's
 * sends and the peer's receives come in one order (FIFO matching, no tags). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mesh.h"
#include "planner/pipeline.h"
#include "trace/pipeline.h"

enum { C_LEAF, C_TAGGED, C_FWD, C_WILD };

typedef struct need {
    int32_t v;
    int src;      /* pp coordinate it comes from */
    int64_t pos;  /* received before the instruction at this position of the order */
    int64_t seq;  /* its place among the rank's receives */
} need;

typedef struct xfer {
    int32_t v;
    int from, to;     /* world ranks */
    int64_t spos;     /* sent after the sender's instruction at this position */
    int64_t sseq, rseq;
    int ch;
} xfer;

typedef struct rplan {
    int coord;
    int64_t *order, norder; /* kept instructions (original indices) in the final order */
    int64_t *opos;          /* per original instruction: its position in order, or -1 */
    int64_t *lw;            /* per value: its last kept writer (original index), or -1 */
    need *needs;
    int64_t nneeds;
} rplan;

/* The order of micro-batch units on pp coordinate c: pos[(phase - 1) M V + micro V + chunk]
 * = 1.. (0: the loads, 2 M V + 1: the step-wide rest). */
static void schedule_units(const ldt__pp *pp, int c, int32_t *pos) {
    int P = pp->P, V = pp->V, M = pp->M, k = 1, total = M * V;
#define UF(m, ch) pos[(m) * V + (ch)] = k++
#define UB(m, ch) pos[M * V + (m) * V + (ch)] = k++
    if (pp->schedule == LDT_PIPE_GPIPE) {
        for (int m = 0; m < M; m++) UF(m, 0);
        for (int m = 0; m < M; m++) UB(m, 0);
    } else if (pp->schedule == LDT_PIPE_1F1B) {
        int w = P - 1 - c < M ? P - 1 - c : M;
        for (int m = 0; m < w; m++) UF(m, 0);
        for (int i = 0; i < M - w; i++) {
            UF(w + i, 0);
            UB(i, 0);
        }
        for (int i = M - w; i < M; i++) UB(i, 0);
    } else { /* Megatron's interleaved order: virtual micro-batch k is (micro, chunk) below */
        int w = (P - c - 1) * 2 + (V - 1) * P;
        if (w > total || M == P) w = total;
#define FM(q) (((q) / (P * V)) * P + (q) % P)
#define FC(q) (((q) % (P * V)) / P)
        for (int q = 0; q < w; q++) UF(FM(q), FC(q));
        for (int i = 0; i < total - w; i++) {
            UF(FM(w + i), FC(w + i));
            UB(FM(i), V - 1 - FC(i));
        }
        for (int i = total - w; i < total; i++) UB(FM(i), V - 1 - FC(i));
#undef FM
#undef FC
    }
#undef UF
#undef UB
}

static int lowest_bit(uint64_t m) {
    int b = 0;
    while (b < 63 && !(m & (1ull << b))) b++;
    return b;
}

static int by_need(const void *a, const void *b) {
    const need *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static int by_send(const void *a, const void *b) {
    const xfer *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->spos != y->spos) return x->spos < y->spos ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return x->v < y->v ? -1 : x->v > y->v;
}

static int by_pair(const void *a, const void *b) {
    const xfer *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return x->sseq < y->sseq ? -1 : x->sseq > y->sseq;
}

/* Sort key of a kept instruction: its unit, then its place in the lowered program. */
typedef struct okey {
    int64_t unit, i;
} okey;

static int by_okey(const void *a, const void *b) {
    const okey *x = a, *y = b;
    if (x->unit != y->unit) return x->unit < y->unit ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Node masks: pp coordinates that compute each node. Tagged ops: their stage's rank;
 * untagged ops (the optimizer, step-wide sums): where all the tagged or placed ops they read
 * are, else wherever any is; untagged ops that read only persistent tensors: where their
 * readers are (everywhere when nothing reads them). */
static ldt_status node_masks(const ldt_ctx *ctx, uint64_t *mask, uint8_t *cls, ldt__pp_tag *tag) {
    const ldt__pp *pp = ctx->pp;
    int64_t nn = ctx->nnodes;
    uint64_t all = pp->P >= 64 ? ~0ull : (1ull << pp->P) - 1, *acc = calloc((size_t)(nn ? nn : 1), sizeof *acc);
    if (!acc) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    for (int64_t v = 0; v < nn; v++) {
        const ldt_tensor *t = ctx->nodes[v];
        tag[v] = ldt__pp_tag_of(ctx, v);
        mask[v] = 0;
        if (t->kind == LDT__PERSISTENT) {
            cls[v] = C_LEAF;
        } else if (tag[v].stage >= 0) {
            cls[v] = C_TAGGED;
            mask[v] = 1ull << (tag[v].stage % pp->P);
        } else {
            uint64_t I = all, U = 0;
            int any = 0;
            for (int k = 0; k < t->nin; k++) {
                int64_t u = LDT__IN(t)[k]->id;
                if (cls[u] != C_TAGGED && cls[u] != C_FWD) continue;
                I &= mask[u];
                U |= mask[u];
                any = 1;
            }
            cls[v] = any ? C_FWD : C_WILD;
            mask[v] = any ? (I ? I : U) : 0;
        }
    }
    for (int64_t v = nn - 1; v >= 0; v--) {
        const ldt_tensor *t = ctx->nodes[v];
        if (cls[v] == C_LEAF) continue;
        if (cls[v] == C_WILD) mask[v] = acc[v] ? acc[v] : all;
        for (int k = 0; k < t->nin; k++)
            if (cls[LDT__IN(t)[k]->id] == C_WILD) acc[LDT__IN(t)[k]->id] |= mask[v];
    }
    free(acc);
    return LDT_OK;
}

/* Rank r's kept instructions, their order and what it receives. */
static ldt_status plan_rank(const ldt_ctx *ctx, const ldt__pp_results *res, const ldt__program *p, int c,
                            const uint64_t *mask, const ldt__pp_tag *tag, const int32_t *pos, rplan *rp) {
    const ldt__pp *pp = ctx->pp;
    int64_t n = p->nins, tail = 2LL * pp->M * pp->V + 1, nn = ctx->nnodes;
    uint8_t *keep = calloc((size_t)(n ? n : 1), 1), *read = calloc((size_t)(p->nvals ? p->nvals : 1), 1),
            *needed = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    int64_t *unit = malloc((size_t)(n ? n : 1) * sizeof *unit), *wany = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *wany);
    okey *ok = malloc((size_t)(n ? n : 1) * sizeof *ok);
    uint8_t *asg_read = NULL;
    ldt_status st = LDT_OK;
    rp->coord = c;
    rp->order = malloc((size_t)(n ? n : 1) * sizeof *rp->order);
    rp->opos = malloc((size_t)(n ? n : 1) * sizeof *rp->opos);
    rp->lw = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *rp->lw);
    rp->needs = malloc((size_t)(p->nvals ? p->nvals : 1) * sizeof *rp->needs);
    if (!keep || !read || !needed || !unit || !wany || !ok || !rp->order || !rp->opos || !rp->lw || !rp->needs)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    for (int32_t v = 0; v < p->nvals; v++) rp->lw[v] = wany[v] = -1;
    for (int64_t i = 0; i < n; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind != LDT__I_KERNEL && x->kind != LDT__I_LOAD && x->kind != LDT__I_REDIST &&
            x->kind != LDT__I_ALL_REDUCE && x->kind != LDT__I_FILL && x->kind != LDT__I_ARANGE)
            LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: instruction %lld of kind %d before the pipeline pass",
                          (long long)i, x->kind);
        if (x->node < 0 || x->node >= nn) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: instruction %lld has no node", (long long)i);
        wany[x->out] = i;
        if (x->kind != LDT__I_LOAD && (mask[x->node] >> c & 1)) {
            keep[i] = 1;
            for (int k = 0; k < x->nin; k++) read[p->ops[x->in + k]] = 1;
        }
    }
    for (int i = 0; i < (res->everywhere ? res->n : res->nout); i++) {
        int32_t v = p->node_val[res->nodes[i]];
        if (v >= 0) read[v] = 1;
    }
    for (int64_t i = 0; i < n; i++) { /* loads: where read (an assigned tensor's everywhere when its
                                         * value goes everywhere: it is updated in place) */
        const ldt__instr *x = &p->ins[i];
        if (x->kind != LDT__I_LOAD) continue;
        keep[i] = read[x->out];
        for (int a = 0; !keep[i] && res->everywhere && a < res->nassigned; a++) keep[i] = x->src == res->assigned[a];
    }
    rp->norder = 0;
    for (int64_t i = 0; i < n; i++) {
        const ldt__instr *x = &p->ins[i];
        ldt__pp_tag t = tag[x->node];
        if (!keep[i]) continue;
        int64_t own = t.stage >= 0 ? pos[(t.phase == LDT__PP_BWD ? pp->M * pp->V : 0) + t.micro * pp->V + t.stage / pp->P]
                                   : tail;
        if (x->kind == LDT__I_LOAD) unit[i] = 0;
        else if (t.stage >= 0 && x->kind != LDT__I_REDIST) unit[i] = own;
        else { /* step-wide: as soon as what it reads is here; after everything if a peer sends it.
                * A redistribution (shared by its consumers, a parameter's by every micro-batch):
                * as soon as its input is here, else with its first consumer */
            unit[i] = 0;
            for (int k = 0; k < x->nin; k++) {
                int64_t w = rp->lw[p->ops[x->in + k]];
                int64_t u = w >= 0 ? unit[w] : own;
                if (u > unit[i]) unit[i] = u;
            }
        }
        rp->lw[x->out] = i;
        ok[rp->norder++] = (okey){unit[i], i};
    }
    qsort(ok, (size_t)rp->norder, sizeof *ok, by_okey);
    for (int64_t i = 0; i < n; i++) rp->opos[i] = -1;
    for (int64_t k = 0; k < rp->norder; k++) {
        rp->order[k] = ok[k].i;
        rp->opos[ok[k].i] = k;
    }
    /* reads: a local value written before in the order; a peer's received once, before its
     * first reader */
    rp->nneeds = 0;
    for (int64_t k = 0; k < rp->norder; k++) {
        const ldt__instr *x = &p->ins[rp->order[k]];
        for (int kk = 0; kk < x->nin; kk++) {
            int32_t v = p->ops[x->in + kk];
            int64_t w = rp->lw[v];
            if (w >= 0) {
                if (rp->opos[w] > k || (rp->opos[w] == k && x->out != v))
                    LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: on pp rank %d node %%%d (%s, unit %lld) reads v%d before "
                                  "the schedule writes it (node %%%d, %s, unit %lld)", c, x->node,
                                  ldt__instr_name(ctx, x), (long long)unit[rp->order[k]], v, p->ins[w].node,
                                  ldt__instr_name(ctx, &p->ins[w]), (long long)unit[w]);
                continue;
            }
            if (needed[v]) continue;
            if (wany[v] < 0 || !mask[p->ins[wany[v]].node])
                LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: v%d (node %%%d) is read on pp rank %d but computed nowhere",
                              v, x->node, c);
            needed[v] = 1;
            rp->needs[rp->nneeds++] = (need){v, lowest_bit(mask[p->ins[wany[v]].node]), k, 0};
        }
    }
    if (!(asg_read = calloc((size_t)(res->nassigned ? res->nassigned : 1), 1)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    for (int64_t i = 0; i < n; i++) /* the assigned tensors this rank reads (their loads' values) */
        if (p->ins[i].kind == LDT__I_LOAD && read[p->ins[i].out])
            for (int a = 0; a < res->nassigned; a++)
                if (p->ins[i].src == res->assigned[a]) asg_read[a] = 1;
    for (int i = 0; i < res->n; i++) { /* outputs reach every rank; an assigned value every rank
                                           * that reads its tensor (the tied embedding, read by the
                                           * first and last stages, or all of them in process mode) */
        int32_t v = p->node_val[res->nodes[i]];
        if (i >= res->nout && !res->everywhere && !asg_read[i - res->nout]) continue;
        if (v < 0 || rp->lw[v] >= 0 || needed[v]) continue;
        if (wany[v] < 0 || !mask[p->ins[wany[v]].node])
            LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: output v%d is computed nowhere", v);
        needed[v] = 1;
        rp->needs[rp->nneeds++] = (need){v, lowest_bit(mask[p->ins[wany[v]].node]), rp->norder, 0};
    }
    qsort(rp->needs, (size_t)rp->nneeds, sizeof *rp->needs, by_need);
    for (int64_t j = 0; j < rp->nneeds; j++) rp->needs[j].seq = j;
fail:
    free(asg_read);
    free(keep);
    free(read);
    free(needed);
    free(unit);
    free(wany);
    free(ok);
    return st;
}

static void rplan_free(rplan *rp) {
    free(rp->order);
    free(rp->opos);
    free(rp->lw);
    free(rp->needs);
}

/* The p2p table index of (peer, k) in tab (n entries). */
static int32_t chan_index(int32_t (*tab)[2], int32_t n, int peer, int k) {
    for (int32_t i = 0; i < n; i++)
        if (tab[i][0] == peer && tab[i][1] == k) return i;
    return -1;
}

/* Rank r's final program: the kept instructions in order with its receives and sends. */
static ldt_status emit_rank(ldt__program *p, const rplan *rp, const xfer *xs, int64_t nx, int r, const int *nch,
                            int nranks) {
    int64_t nsend = 0, nrecv = rp->nneeds, cap, nops, ni = 0, si = 0, ri = 0, *sidx = NULL;
    int32_t (*tab)[2] = NULL, ntab = 0, *ops = NULL;
    ldt__instr *ins = NULL;
    ldt_status st = LDT_OK;
    int64_t *rch = NULL;
    for (int64_t j = 0; j < nx; j++) nsend += xs[j].from == r;
    for (int q = 0; q < nranks; q++) ntab += nch[(int64_t)r * nranks + q];
    cap = rp->norder + nsend + nrecv + 1;
    nops = p->nops + nsend * 2;
    ins = calloc((size_t)cap, sizeof *ins);
    ops = malloc((size_t)(nops ? nops : 1) * sizeof *ops);
    tab = malloc((size_t)(ntab ? ntab : 1) * sizeof *tab);
    sidx = malloc((size_t)(nsend ? nsend : 1) * sizeof *sidx);
    rch = malloc((size_t)(nrecv ? nrecv : 1) * sizeof *rch);
    if (!ins || !ops || !tab || !sidx || !rch) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    ntab = 0;
    for (int q = 0; q < nranks; q++)
        for (int k = 0; k < nch[(int64_t)r * nranks + q]; k++) {
            tab[ntab][0] = q;
            tab[ntab++][1] = k;
        }
    memcpy(ops, p->ops, (size_t)p->nops * sizeof *ops);
    nops = p->nops;
    nsend = 0;
    for (int64_t j = 0; j < nx; j++) /* xs is sorted by sender, then position */
        if (xs[j].from == r) sidx[nsend++] = j;
    for (int64_t j = 0; j < nx; j++)
        if (xs[j].to == r) rch[xs[j].rseq] = j;
    for (int64_t k = 0; k <= rp->norder; k++) {
        while (ri < nrecv && rp->needs[ri].pos == k) {
            const xfer *x = &xs[rch[rp->needs[ri].seq]];
            ldt__instr *y = &ins[ni++];
            y->kind = LDT__I_RECV;
            y->node = k < rp->norder ? p->ins[rp->order[k]].node : ni > 1 ? ins[ni - 2].node : 0;
            y->out = x->v;
            y->in = (int32_t)nops;
            y->region = -1;
            y->op = chan_index(tab, ntab, x->from, x->ch);
            ri++;
        }
        if (k == rp->norder) break;
        ins[ni++] = p->ins[rp->order[k]];
        while (si < nsend && xs[sidx[si]].spos == k) {
            const xfer *x = &xs[sidx[si]];
            ldt__instr *y = &ins[ni++];
            y->kind = LDT__I_SEND;
            y->node = ins[ni - 2].node;
            y->out = x->v;
            y->nin = 1;
            y->in = (int32_t)nops;
            ops[nops++] = x->v;
            y->region = -1;
            y->op = chan_index(tab, ntab, x->to, x->ch);
            si++;
        }
    }
    if (ri != nrecv || si != nsend) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: rank %d placed %lld of %lld receives and "
                                                  "%lld of %lld sends", r, (long long)ri, (long long)nrecv, (long long)si,
                                                  (long long)nsend);
    if (nsend) {
        ldt__instr *y = &ins[ni++];
        y->kind = LDT__I_SEND_WAIT;
        y->node = ins[ni - 2].node;
        y->out = xs[sidx[0]].v;
        y->nin = (int32_t)nsend;
        y->in = (int32_t)nops;
        y->region = -1;
        for (int64_t j = 0; j < nsend; j++) ops[nops++] = xs[sidx[j]].v;
    }
    ldt__program_set_ins(p, ins, ni, ops, nops);
    ins = NULL;
    ops = NULL;
    free(p->p2p);
    p->p2p = tab;
    p->np2p = ntab;
    tab = NULL;
fail:
    free(ins);
    free(ops);
    free(tab);
    free(sidx);
    free(rch);
    return st;
}

ldt_status ldt__pipeline_programs(const ldt_ctx *ctx, const ldt_mesh *mesh, ldt__program **progs, int nr,
                                  const ldt__pp_results *res) {
    const ldt__pp *pp = ctx->pp;
    int P, nd = ldt_mesh_ndim(mesh);
    int64_t nn = ctx->nnodes, nx = 0, npos;
    uint64_t *mask = NULL;
    uint8_t *cls = NULL;
    ldt__pp_tag *tag = NULL;
    int32_t *pos = NULL;
    int *ppc = NULL, *peer = NULL, *nch = NULL;
    int64_t(*co)[LDT_MAX_DIMS] = NULL;
    rplan *rp = NULL;
    xfer *xs = NULL;
    ldt_status st = LDT_OK;
    if (!pp) return LDT_OK;
    if (ldt_mesh_device(mesh) == LDT_DEVICE_CUDA)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: pipelines run on CPU meshes only (rank threads or mpi), not CUDA yet");
    P = pp->P;
    npos = 2LL * pp->M * pp->V;
    mask = malloc((size_t)(nn ? nn : 1) * sizeof *mask);
    cls = malloc((size_t)(nn ? nn : 1));
    tag = malloc((size_t)(nn ? nn : 1) * sizeof *tag);
    pos = malloc((size_t)P * (size_t)npos * sizeof *pos);
    ppc = malloc((size_t)(nr ? nr : 1) * sizeof *ppc);
    peer = malloc((size_t)(nr ? nr : 1) * (size_t)P * sizeof *peer);
    nch = calloc((size_t)(nr ? nr : 1) * (size_t)(nr ? nr : 1), sizeof *nch);
    co = malloc((size_t)(nr ? nr : 1) * sizeof *co);
    rp = calloc((size_t)(nr ? nr : 1), sizeof *rp);
    if (!mask || !cls || !tag || !pos || !ppc || !peer || !nch || !co || !rp)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    LDT_CHECK_GOTO(node_masks(ctx, mask, cls, tag));
    for (int c = 0; c < P; c++) schedule_units(pp, c, pos + (int64_t)c * npos);
    for (int r = 0; r < nr; r++) {
        ppc[r] = -1;
        for (int c = 0; c < P; c++) peer[(int64_t)r * P + c] = -1;
        if (!progs[r]) continue;
        LDT_CHECK_GOTO(ldt_mesh_coord(mesh, r, co[r]));
        ppc[r] = (int)co[r][pp->dim];
    }
    for (int r = 0; r < nr; r++)
        for (int q = 0; ppc[r] >= 0 && q < nr; q++) {
            int same = ppc[q] >= 0;
            for (int d = 0; same && d < nd; d++) same = d == pp->dim || co[q][d] == co[r][d];
            if (same) peer[(int64_t)r * P + ppc[q]] = q;
        }
    for (int r = 0; r < nr; r++)
        if (progs[r])
            LDT_CHECK_GOTO(plan_rank(ctx, res, progs[r], ppc[r], mask, tag, pos + (int64_t)ppc[r] * npos, &rp[r]));
    /* the transfers: each receive's sender, and where the sender's last write of it is */
    for (int r = 0; r < nr; r++) nx += progs[r] ? rp[r].nneeds : 0;
    if (!(xs = malloc((size_t)(nx ? nx : 1) * sizeof *xs))) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    nx = 0;
    for (int r = 0; r < nr; r++)
        for (int64_t j = 0; progs[r] && j < rp[r].nneeds; j++) {
            const need *nq = &rp[r].needs[j];
            int s = peer[(int64_t)r * P + nq->src];
            const ldt__program *ps = s >= 0 ? progs[s] : NULL;
            int64_t w;
            if (!ps || ps->nvals != progs[r]->nvals || (w = rp[s].lw[nq->v]) < 0 ||
                !ldt_shape_equal(&ps->vals[nq->v].shape, &progs[r]->vals[nq->v].shape))
                LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: rank %d's v%d has no like value on pp rank %d", r, nq->v,
                              nq->src);
            xs[nx++] = (xfer){nq->v, s, r, rp[s].opos[w], 0, nq->seq, 0};
        }
    qsort(xs, (size_t)nx, sizeof *xs, by_send);
    for (int64_t j = 0; j < nx; j++) xs[j].sseq = j;
    /* channels: per sender and receiver, sends in the sender's order; each goes on the first
     * channel whose last receive comes before its own on the receiver */
    qsort(xs, (size_t)nx, sizeof *xs, by_pair);
    for (int64_t j = 0, start = 0; j < nx; j++) {
        int64_t last[64];
        int nc = 0;
        if (j > start && (xs[j].from != xs[j - 1].from || xs[j].to != xs[j - 1].to)) start = j;
        if (j != start) continue;
        for (int64_t q = start; q < nx && xs[q].from == xs[start].from && xs[q].to == xs[start].to; q++) {
            int ch = 0;
            while (ch < nc && last[ch] > xs[q].rseq) ch++;
            if (ch == nc) {
                if (nc == 64) LDT_FAIL_GOTO(LDT_ERR_INTERNAL, "pipeline: more than 64 channels between two ranks");
                nc++;
            }
            last[ch] = xs[q].rseq;
            xs[q].ch = ch;
        }
        { /* both members make the pair's channels: the most either direction needs */
            int a = xs[start].from, b = xs[start].to;
            if (nc > nch[(int64_t)a * nr + b]) nch[(int64_t)a * nr + b] = nch[(int64_t)b * nr + a] = nc;
        }
    }
    qsort(xs, (size_t)nx, sizeof *xs, by_send);
    for (int r = 0; r < nr; r++)
        if (progs[r]) LDT_CHECK_GOTO(emit_rank(progs[r], &rp[r], xs, nx, r, nch, nr));
fail:
    for (int r = 0; rp && r < nr; r++) rplan_free(&rp[r]);
    free(rp);
    free(xs);
    free(mask);
    free(cls);
    free(tag);
    free(pos);
    free(ppc);
    free(peer);
    free(nch);
    free(co);
    return st;
}
