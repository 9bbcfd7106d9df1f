/* The figures of one planned step on a rank (ldt_plan_step): its modeled time, its traffic by
 * mesh dims and collective, and what its forward keeps for the backward. Computed from each
 * class of ranks' program while the totals lower it (plan_write.c class_totals), so a huge
 * mesh costs no extra lowering. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/ops.h"
#include "planner/profiles.h"
#include "planner/memory.h"
#include "planner/plan_internal.h"
#include "planner/redistribute.h"
#include "planner/schedule.h"

static int is_coll(ldt_collective c) { return c <= LDT_COLL_ALL_TO_ALL || c == LDT_COLL_SEND_RECV; }

/* Arena values written by the forward (instructions of trace nodes below `end`) and read
 * after it: their bytes. Parameter, state and constant loads are held outside the arena. */
static ldt_status saved_bytes(const ldt__program *p, int64_t end, int64_t *out) {
    int64_t *first, *last, n = p->nvals ? p->nvals : 1;
    ldt_status st = LDT_OK;
    *out = 0;
    first = malloc((size_t)n * sizeof *first);
    last = malloc((size_t)n * sizeof *last);
    if (!first || !last) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan step: out of memory for %d values", p->nvals);
    LDT_CHECK_GOTO(ldt__liveness(p, NULL, first, last));
    for (int32_t v = 0; v < p->nvals; v++) {
        const ldt__instr *d;
        if (first[v] < 0) continue;
        d = &p->ins[first[v]];
        if (d->kind == LDT__I_LOAD && d->src && d->src->op != LDT_OP_INPUT) continue;
        if (d->node < end && p->ins[last[v]].node >= end) *out += ldt__value_bytes(&p->vals[v]);
    }
fail:
    free(first);
    free(last);
    return st;
}

ldt_status ldt__plan_step_fold(ldt_plan *plan, const ldt__program *p) {
    ldt_plan_step *s = &plan->step;
    double serial = 0, overlapped = 0;
    int64_t saved = 0;
    /* traffic of this rank, added up per (dims, collective) before taking the maximum */
    int64_t (*b)[LDT_COLL_COUNT] = calloc(LDT_PLAN_DIM_SETS, sizeof *b);
    if (!b) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan step: out of memory");
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_REDIST) {
            for (int k = 0; k < ldt_redist_plan_nsteps(x->plan); k++) {
                ldt_redist_step st;
                unsigned set = 0;
                ldt_redist_plan_step(x->plan, k, &st);
                if (!is_coll(st.collective)) continue;
                for (int d = 0; d < st.ndims; d++) set |= 1u << st.dims[d];
                b[set][st.collective] += st.bytes_sent > st.bytes_recv ? st.bytes_sent : st.bytes_recv;
            }
        } else if (x->kind == LDT__I_ALL_REDUCE) { /* a strategy's own: a ring all_reduce */
            int64_t n = 1;
            unsigned set = 0;
            for (int d = 0; d < x->ndims; d++) {
                n *= ldt_mesh_dim_size(plan->mesh, x->dims[d]);
                set |= 1u << x->dims[d];
            }
            if (n > 1) b[set][LDT_COLL_ALL_REDUCE] += 2 * (n - 1) * ldt__value_bytes(&p->vals[x->out]) / n;
        }
    }
    for (int m = 0; m < LDT_PLAN_DIM_SETS; m++)
        for (int c = 0; c < LDT_COLL_COUNT; c++)
            if (b[m][c] > s->comm_bytes[m][c]) s->comm_bytes[m][c] = b[m][c];
    free(b);
    ldt__model_step(p, &plan->cost, plan->mesh, &serial, &overlapped);
    if (serial > s->modeled_step_seconds || (s->compute_seconds == 0 && s->comm_seconds == 0)) {
        /* the split of the busiest rank's time: kernels and moves, forward and the rest */
        double k = 0, c = 0, fk = 0, fc = 0, cls[LDT_OPCLASS_COUNT] = {0}, fcls[LDT_OPCLASS_COUNT] = {0};
        for (int64_t i = 0; i < p->nins; i++) {
            const ldt__instr *x = &p->ins[i];
            double t = ldt__instr_model_seconds(p, x, &plan->cost, plan->mesh);
            int comm = x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET,
                fwd = plan->step_boundary > 0 && x->node < plan->step_boundary;
            if (x->kind == LDT__I_WAIT) continue;
            if (comm) c += t, fc += fwd ? t : 0;
            else {
                int oc = x->kind == LDT__I_KERNEL ? (int)ldt__op_class(x->op) : (int)LDT_OPCLASS_ELEMENTWISE;
                k += t, fk += fwd ? t : 0;
                cls[oc] += t, fcls[oc] += fwd ? t : 0;
            }
        }
        /* the instructions' own prices add up to the serial figure but for the rendezvous
         * (CPU profiles with more ranks than cores): that goes with the communication */
        if (serial > k + c) c = serial - k;
        s->compute_seconds = k, s->comm_seconds = c;
        s->forward_compute_seconds = fk, s->forward_comm_seconds = fc;
        memcpy(s->class_seconds, cls, sizeof cls);
        memcpy(s->forward_class_seconds, fcls, sizeof fcls);
    }
    if (serial > s->modeled_step_seconds) s->modeled_step_seconds = serial;
    if (plan->step_boundary > 0) {
        LDT_CHECK(saved_bytes(p, plan->step_boundary, &saved));
        if (saved > s->saved_bytes) s->saved_bytes = saved;
    }
    return LDT_OK;
}

ldt_status ldt_plan_step_get(ldt_plan *p, const ldt_tensor *boundary, ldt_plan_step *out) {
    ldt_plan_totals t;
    int64_t end;
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan step: NULL argument (expected a plan and out)");
    if (boundary && (boundary->ctx != p->ctx || boundary->id < 0 || boundary->id >= p->nnodes ||
                     p->ctx->nodes[boundary->id] != boundary))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan step: the boundary is not a node of the planned trace "
                 "(expected a tensor of the plan's context recorded before planning)");
    end = boundary ? (int64_t)boundary->id + 1 : 0;
    if (end != p->step_boundary) { /* figures taken at another boundary: again */
        p->step_boundary = end;
        p->have_totals = 0;
    }
    LDT_CHECK(ldt_plan_totals_get(p, &t));
    *out = p->step;
    return LDT_OK;
}
