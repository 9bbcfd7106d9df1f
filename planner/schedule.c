/* Overlap: collectives start as soon as their inputs are written and are waited for only
 * where their result is needed, so compute runs while data moves (docs/replay.md). Starts
 * keep program order among collectives, so every rank issues its collectives in one order on
 * one queue and ranks never deadlock on communicators used in different orders. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/ops.h"
#include "planner/profiles.h"
#include "planner/schedule.h"

static int is_coll(const ldt__instr *x) {
    return x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET;
}

static int reads(const ldt__program *p, const ldt__instr *x, int32_t v) {
    for (int k = 0; k < x->nin; k++)
        if (p->ops[x->in + k] == v) return 1;
    return 0;
}

/* Does y touch what collective x reads or writes (so y must come after x's wait)? */
static int touches(const ldt__program *p, const ldt__instr *x, const ldt__instr *y) {
    if (reads(p, y, x->out) || y->out == x->out) return 1;
    for (int k = 0; k < x->nin + x->nout; k++) /* a bucket's inputs, then its outputs */
        if (y->out == p->ops[x->in + k] || (k >= x->nin && reads(p, y, p->ops[x->in + k]))) return 1;
    return 0;
}

ldt_status ldt__schedule_overlap(ldt__program *p, int64_t *moved) {
    int64_t n = p->nins, *start = NULL, *wait = NULL, *last_write = NULL, m = 0, nw = 0, prev = -1;
    int64_t wops = 0;
    int64_t *nstart = NULL, *nwait = NULL, *at = NULL;
    ldt__instr *out = NULL;
    int32_t *ops = NULL;
    int64_t nops;
    ldt_status st = LDT_OK;
    if (moved) *moved = 0;
    /* a group is issued at its last call: with waits in between it would be read before it
     * ran, and asynchronous collectives overlap anyway */
    for (int64_t i = 0; i < n; i++) p->ins[i].group = 0;
    start = malloc((size_t)(n + 1) * sizeof *start);
    wait = malloc((size_t)(n + 1) * sizeof *wait);
    last_write = malloc((size_t)(p->nvals + 1) * sizeof *last_write);
    nstart = calloc((size_t)(n + 2), sizeof *nstart);
    nwait = calloc((size_t)(n + 2), sizeof *nwait);
    at = malloc((size_t)(n + 1) * sizeof *at);
    if (!start || !wait || !last_write || !nstart || !nwait || !at)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    for (int32_t v = 0; v < p->nvals; v++) last_write[v] = -1;
    /* where each collective starts (after instruction start[i]; -1: first) and waits (before
     * instruction wait[i]; n: at the end) */
    for (int64_t i = 0; i < n; i++) {
        const ldt__instr *x = &p->ins[i];
        start[i] = wait[i] = -2;
        if (is_coll(x)) {
            int64_t s = prev;
            for (int k = 0; k < x->nin; k++)
                if (last_write[p->ops[x->in + k]] > s) s = last_write[p->ops[x->in + k]];
            if (last_write[x->out] > s) s = last_write[x->out]; /* in place: after its writer */
            start[i] = s;
            prev = s;
            wait[i] = n;
            for (int64_t j = i + 1; j < n; j++)
                if (touches(p, x, &p->ins[j])) {
                    wait[i] = j;
                    break;
                }
            /* overlapped: some other instruction runs between its start and its wait */
            if (moved && (s < i - 1 || wait[i] > i + 1)) (*moved)++;
            nstart[s + 1]++;
            nwait[wait[i]]++;
            nw++;
            wops += x->nin + x->nout + 1;
        }
        last_write[x->out] = i;
        for (int k = 0; k < x->nout; k++) last_write[p->ops[x->in + x->nin + k]] = i;
    }
    /* the new order: at each position its waits, the instruction, then the starts after it */
    if (!(out = malloc((size_t)(n + nw + 1) * sizeof *out)) ||
        !(ops = malloc((size_t)(p->nops + wops + 1) * sizeof *ops)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    memcpy(ops, p->ops, (size_t)p->nops * sizeof *ops);
    nops = p->nops;
    for (int64_t i = 0; i < n; i++) at[i] = -1;
    for (int64_t pos = -1; pos <= n; pos++) {
        if (pos >= 0) /* waits due before instruction pos (or the end) */
            for (int64_t i = 0; i < n && nwait[pos]; i++)
                if (start[i] != -2 && wait[i] == pos) {
                    ldt__instr w;
                    const ldt__instr *c = &p->ins[i];
                    memset(&w, 0, sizeof w);
                    w.kind = LDT__I_WAIT;
                    w.node = c->node;
                    w.out = c->out;
                    w.region = -1;
                    w.pair = at[i];
                    w.in = (int32_t)nops;
                    /* a bucket's operands hold its outputs too */
                    memcpy(ops + nops, p->ops + c->in, (size_t)(c->nin + c->nout) * sizeof *ops);
                    nops += c->nin + c->nout;
                    if (!c->nout) ops[nops++] = c->out;
                    w.nin = c->nin + (c->nout ? c->nout : 1);
                    out[at[i]].pair = m;
                    out[m++] = w;
                    nwait[pos]--;
                }
        if (pos >= 0 && pos < n && start[pos] == -2) out[m++] = p->ins[pos];
        if (pos < n)
            for (int64_t i = 0; i < n && nstart[pos + 1]; i++)
                if (start[i] == pos) { /* collectives keep their relative order */
                    out[m] = p->ins[i];
                    out[m].async = 1;
                    at[i] = m++;
                    nstart[pos + 1]--;
                }
    }
    ldt__program_set_ins(p, out, m, ops, nops);
    out = NULL;
    ops = NULL;
fail:
    free(start);
    free(wait);
    free(last_write);
    free(nstart);
    free(nwait);
    free(at);
    free(out);
    free(ops);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * The modeled step.
 */
static int64_t vbytes(const ldt__program *p, int32_t v) {
    int64_t n = ldt_dtype_size((ldt_dtype)p->vals[v].dtype);
    for (int d = 0; d < p->vals[v].shape.ndim; d++) n *= p->vals[v].shape.dims[d];
    return n;
}

/* A kernel (or a load, fill, local copy) by the profile's roofline on its local shapes: the
 * same price the strategy search gives the op (planner/roofline.c). */
static double kernel_seconds(const ldt__program *p, const ldt__instr *x, const ldt_cost_model *cm,
                             const ldt_mesh *mesh) {
    double bytes = (double)vbytes(p, x->out), flops;
    int op = x->kind == LDT__I_KERNEL ? (int)x->op : LDT_OP_ALIAS; /* not a kernel: a copy */
    for (int k = 0; k < x->nin; k++) bytes += (double)vbytes(p, p->ops[x->in + k]);
    flops = ldt__op_flops(op, &p->vals[x->out].shape,
                          x->nin > 0 ? &p->vals[p->ops[x->in]].shape : NULL,
                          x->nin > 1 ? &p->vals[p->ops[x->in + 1]].shape : NULL);
    return ldt__op_seconds(cm, op, p->vals[x->out].dtype, flops, bytes, ldt_mesh_nranks(mesh));
}

/* Collective steps (not local ones) of a redistribution plan: each meets its peers. */
static int plan_meetings(const ldt_redist_plan *plan) {
    int n = 0;
    for (int k = 0; k < ldt_redist_plan_nsteps(plan); k++) {
        ldt_redist_step s;
        if (ldt_redist_plan_step(plan, k, &s) == LDT_OK &&
            (s.collective <= LDT_COLL_ALL_TO_ALL || s.collective == LDT_COLL_SEND_RECV))
            n++;
    }
    return n;
}

/* A collective instruction: its redistribution plans' prices (or a strategy's all_reduce),
 * plus the rendezvous its meetings of peers wait when the ranks share the cores: the first
 * after `since` modeled kernel seconds of running apart, the others (a plan's later steps)
 * right after it. *met (may be NULL) gets whether it meets any peers. */
static double coll_seconds(const ldt__program *p, const ldt__instr *x, const ldt_cost_model *cm,
                           const ldt_mesh *mesh, double since, int *met) {
    int nr = ldt_mesh_nranks(mesh), meets = 0;
    double s = 0, wait;
    if (x->kind == LDT__I_REDIST) {
        s = ldt_redist_plan_seconds(x->plan);
        meets = plan_meetings(x->plan);
    } else if (x->kind == LDT__I_BUCKET) { /* its members' steps (an upper bound: one latency is paid) */
        for (int k = 0; k < x->nin; k++) {
            s += ldt_redist_plan_seconds(p->bplans[x->bplan + k]);
            if (!meets) meets = plan_meetings(p->bplans[x->bplan + k]); /* one call for the bucket */
        }
    } else {
        int dims[LDT_MAX_DIMS];
        int64_t n = 1, b = 0;
        for (int d = 0; d < x->ndims; d++) {
            dims[d] = x->dims[d];
            n *= ldt_mesh_dim_size(mesh, x->dims[d]);
        }
        for (int k = 0; k < x->nin; k++) b += vbytes(p, p->ops[x->in + k]);
        if (n > 1) {
            s = ldt_cost_seconds(cm, mesh, x->ndims, dims, LDT_COLL_ALL_REDUCE, 2 * (n - 1) * b / n, 0);
            meets = 1;
        }
    }
    if (met) *met = meets > 0;
    if (meets == 0) return s;
    wait = ldt__rendezvous_seconds(cm, nr, since);
    if (meets > 1) wait += (meets - 1) * ldt__rendezvous_seconds(cm, nr, 0);
    return s + wait;
}

/* The per-op breakdown's price of one instruction: a collective's rendezvous without the
 * compute before it (which the step's model, below, charges in program order). */
double ldt__instr_model_seconds(const ldt__program *p, const ldt__instr *x, const ldt_cost_model *cm,
                                const ldt_mesh *mesh) {
    if (x->kind == LDT__I_WAIT) return 0;
    return is_coll(x) ? coll_seconds(p, x, cm, mesh, 0, NULL) : kernel_seconds(p, x, cm, mesh);
}

void ldt__model_step(const ldt__program *p, const ldt_cost_model *cm, const ldt_mesh *mesh,
                     double *serial, double *overlapped) {
    double compute = 0, comm_free = 0, total = 0, since = 0; /* since: kernels since a meeting */
    double *done = malloc((size_t)(p->nins ? p->nins : 1) * sizeof *done);
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_WAIT) {
            if (done && done[x->pair] > compute) compute = done[x->pair];
        } else if (is_coll(x)) {
            int met = 0;
            double c = coll_seconds(p, x, cm, mesh, since, &met),
                   begin = compute > comm_free ? compute : comm_free;
            if (met) since = 0;
            total += c;
            comm_free = begin + c;
            if (done) done[i] = comm_free;
            if (!x->async) compute = comm_free; /* a synchronous collective blocks compute */
        } else {
            double k = kernel_seconds(p, x, cm, mesh);
            total += k;
            compute += k;
            since += k;
        }
    }
    *serial = total;
    *overlapped = compute > comm_free ? compute : comm_free;
    free(done);
}
