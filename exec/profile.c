/* Chrome trace of a replay (chrome://tracing, Perfetto): one track per rank, one complete
 * event per instruction, compute and communication in different categories. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"
#include "planner/schedule.h"

static const char *category(const ldt__instr *x) {
    switch ((ldt__ikind)x->kind) {
    case LDT__I_REDIST:
    case LDT__I_BUCKET:
    case LDT__I_ALL_REDUCE:
    case LDT__I_SEND:
    case LDT__I_RECV:
    case LDT__I_SEND_WAIT: return "comm";
    case LDT__I_LOAD: return "load";
    default: return "compute";
    }
}

/* The ranks of `rank`'s group over mesh dims dims[0..n): those that share its coordinates on
 * every other dim, in mesh order. */
static void write_group(FILE *f, const ldt_mesh *m, int rank, const int *dims, int n) {
    int64_t me[LDT_MAX_DIMS], c[LDT_MAX_DIMS];
    int first = 1;
    fputc('[', f);
    if (ldt_mesh_coord(m, rank, me) == LDT_OK)
        for (int i = 0; i < ldt_mesh_nranks(m); i++) {
            int q = ldt_mesh_rank_at(m, i), same = 1;
            if (ldt_mesh_coord(m, q, c) != LDT_OK) continue;
            for (int d = 0; d < ldt_mesh_ndim(m); d++) {
                int in = 0;
                for (int k = 0; k < n; k++) in |= dims[k] == d;
                if (!in && c[d] != me[d]) same = 0;
            }
            if (!same) continue;
            fprintf(f, "%s%d", first ? "" : ",", q);
            first = 0;
        }
    fputc(']', f);
}

/* A communication event's args (docs/cli.md): collective (steps joined by '+'), bytes (this
 * rank's buffer going in), bytes_per_rank (sent or received, the larger), mesh_dims, group
 * (this rank's group over them) and placements (from -> to: a redistribution's whole lists,
 * an all_reduce's on its mesh dims). */
static void comm_args(FILE *f, const ldt_exec *e, const ldt__program *p, const ldt__instr *x) {
    int dims[LDT_MAX_DIMS], nd = 0;
    char from[256], to[256];
    int64_t bytes = 0, traffic = 0;
    fputs(",\"collective\":\"", f);
    if (x->kind == LDT__I_REDIST) {
        const ldt_spec *a = ldt_redist_plan_source(x->plan), *b = ldt_redist_plan_target(x->plan);
        for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
            ldt_redist_step st;
            ldt_redist_plan_step(x->plan, s, &st);
            fprintf(f, "%s%s", s ? "+" : "", ldt_collective_name(st.collective));
            for (int k = 0; k < st.ndims; k++) {
                int seen = 0;
                for (int j = 0; j < nd; j++) seen |= dims[j] == st.dims[k];
                if (!seen && nd < LDT_MAX_DIMS) dims[nd++] = st.dims[k];
            }
        }
        bytes = ldt__value_bytes(&p->vals[p->ops[x->in]]);
        traffic = ldt_redist_plan_bytes(x->plan);
        ldt_placements_format(a->placements, a->nplace, from, sizeof from);
        ldt_placements_format(b->placements, b->nplace, to, sizeof to);
    } else if (x->kind == LDT__I_BUCKET) { /* a fused bucket: its members' first placements */
        const ldt_redist_plan *pl = p->bplans[x->bplan];
        const ldt_spec *a = ldt_redist_plan_source(pl), *b = ldt_redist_plan_target(pl);
        fputs(ldt__instr_name(e->ctx, x), f);
        for (int k = 0; k < x->ndims; k++) dims[nd++] = x->dims[k];
        for (int k = 0; k < x->nin; k++) {
            bytes += ldt__value_bytes(&p->vals[p->ops[x->in + k]]);
            traffic += ldt_redist_plan_bytes(p->bplans[x->bplan + k]);
        }
        ldt_placements_format(a->placements, a->nplace, from, sizeof from);
        ldt_placements_format(b->placements, b->nplace, to, sizeof to);
    } else {
        ldt_placement pp[LDT_MAX_DIMS], rr[LDT_MAX_DIMS];
        int64_t n = 1;
        fputs("all_reduce", f);
        for (int k = 0; k < x->ndims; k++) {
            dims[nd++] = x->dims[k];
            n *= ldt_mesh_dim_size(e->mesh, x->dims[k]);
            pp[k] = ldt_partial((ldt_reduce_op)x->reduce);
            rr[k] = ldt_replicate();
        }
        for (int k = 0; k < x->nin; k++) bytes += ldt__value_bytes(&p->vals[p->ops[x->in + k]]);
        traffic = n > 1 ? 2 * (n - 1) * bytes / n : 0;
        ldt_placements_format(pp, x->ndims, from, sizeof from);
        ldt_placements_format(rr, x->ndims, to, sizeof to);
    }
    fprintf(f, "\",\"bytes\":%lld,\"bytes_per_rank\":%lld,\"mesh_dims\":[", (long long)bytes, (long long)traffic);
    for (int k = 0; k < nd; k++) fprintf(f, "%s%d", k ? "," : "", dims[k]);
    fputs("],\"group\":", f);
    write_group(f, e->mesh, p->rank, dims, nd);
    fprintf(f, ",\"placements\":\"%s -> %s\"", from, to);
}

ldt_status ldt__exec_write_trace(ldt_exec *e) {
    FILE *f = fopen(e->trace_path, "w");
    int first = 1;
    if (!f) LDT_FAIL(LDT_ERR_SYSTEM, "replay: cannot write the trace '%s'", e->trace_path);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    for (int r = 0; r < e->nranks; r++) {
        const rank_state *rs = e->ranks[r];
        if (!rs) continue;
        fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"args\":{\"name\":\"rank %d\"}}",
                first ? "" : ",\n", r, r);
        first = 0;
        for (int64_t i = 0; i < rs->nins; i++) {
            const ldt__instr *x = &rs->prog->ins[i];
            fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"node\":%d,\"instruction\":%lld",
                    ldt__instr_name(e->ctx, x), category(x), r, rs->prof[i].start * 1e6,
                    (rs->prof[i].end - rs->prof[i].start) * 1e6, x->node, (long long)i);
            if (x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET)
                comm_args(f, e, rs->prog, x);
            fputs("}}", f);
        }
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0) LDT_FAIL(LDT_ERR_SYSTEM, "replay: writing the trace '%s' failed", e->trace_path);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * The breakdown by op.
 */
static double instr_flops(const ldt__program *p, const ldt__instr *x) {
    if (x->kind != LDT__I_KERNEL || x->nin < 2) return 0;
    if (x->op == LDT_OP_MATMUL || x->op == LDT_OP_LINEAR) {
        const ldt_shape *a = &p->vals[p->ops[x->in]].shape;
        double out = (double)ldt__value_bytes(&p->vals[x->out]) / (double)ldt_dtype_size((ldt_dtype)p->vals[x->out].dtype);
        return 2 * out * (double)(a->ndim ? a->dims[a->ndim - 1] : 1);
    }
    if (x->op == LDT_OP_SDPA) {
        const ldt_shape *q = &p->vals[p->ops[x->in]].shape, *k = &p->vals[p->ops[x->in + 1]].shape;
        double b = 1;
        for (int d = 0; d < q->ndim - 2; d++) b *= (double)q->dims[d];
        return 4 * b * (double)q->dims[q->ndim - 2] * (double)k->dims[k->ndim - 2] * (double)q->dims[q->ndim - 1];
    }
    return 0;
}

static double instr_bytes(const ldt_exec *e, const ldt__program *p, const ldt__instr *x) {
    if (x->kind == LDT__I_REDIST) return (double)ldt_redist_plan_bytes(x->plan);
    if (x->kind == LDT__I_SEND || x->kind == LDT__I_RECV) return (double)ldt__value_bytes(&p->vals[x->out]);
    if (x->kind == LDT__I_BUCKET) {
        double b = 0;
        for (int k = 0; k < x->nin; k++) b += (double)ldt_redist_plan_bytes(p->bplans[x->bplan + k]);
        return b;
    }
    if (x->kind == LDT__I_ALL_REDUCE) {
        double n = 1, b = 0;
        for (int d = 0; d < x->ndims; d++) n *= (double)ldt_mesh_dim_size(e->mesh, x->dims[d]);
        for (int k = 0; k < x->nin; k++) b += (double)ldt__value_bytes(&p->vals[p->ops[x->in + k]]);
        return n > 1 ? 2 * (n - 1) / n * b : 0;
    }
    return 0;
}

ldt_status ldt_exec_breakdown(const ldt_exec *e, ldt_exec_op_time *out, int cap, int *n) {
    const rank_state *busiest = NULL;
    double most = -1;
    if (!e || !out || !n || cap < 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec breakdown: NULL argument");
    if (!e->profile) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec breakdown: compile with profile (or trace_path)");
    if (!e->replays) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec breakdown: nothing has been replayed yet");
    for (int r = 0; r < e->nranks; r++) {
        const rank_state *rs = e->ranks[r];
        double s = 0;
        if (!rs) continue;
        for (int64_t i = 0; i < rs->nins; i++) s += rs->prof[i].end - rs->prof[i].start;
        if (s > most) {
            most = s;
            busiest = rs;
        }
    }
    *n = 0;
    for (int64_t i = 0; busiest && i < busiest->nins; i++) {
        const ldt__instr *x = &busiest->prog->ins[i];
        const char *name = x->kind == LDT__I_REDIST ? "redistribute" : ldt__instr_name(e->ctx, x);
        int j;
        if (x->kind == LDT__I_WAIT) continue; /* its time is the collective's */
        for (j = 0; j < *n && strcmp(out[j].name, name) != 0; j++) {}
        if (j == *n) {
            if (*n == cap) continue;
            memset(&out[j], 0, sizeof out[j]);
            snprintf(out[j].name, sizeof out[j].name, "%s", name);
            out[j].collective = x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE || x->kind == LDT__I_BUCKET;
            (*n)++;
        }
        out[j].calls++;
        out[j].seconds += busiest->prof[i].end - busiest->prof[i].start;
        out[j].flops += instr_flops(busiest->prog, x);
        out[j].bytes += instr_bytes(e, busiest->prog, x);
        if (e->model_cost.memory_bandwidth_Bps > 0) /* schedule_all resolved the profile */
            out[j].modeled_seconds += ldt__instr_model_seconds(busiest->prog, x, &e->model_cost, e->mesh);
    }
    return LDT_OK;
}

ldt_status ldt_exec_comm_wait(const ldt_exec *e, int rank, double *seconds) {
    if (!e || !seconds) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec comm wait: NULL argument");
    if (rank < 0 || rank >= e->nranks)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec comm wait: rank %d, the mesh has ranks 0..%d", rank,
                 e->nranks - 1);
    *seconds = e->is_cuda ? 0 : (double)ldt__threads_wait_ns(e->threads, rank) * 1e-9;
    return LDT_OK;
}

ldt_status ldt_exec_rank_inside(const ldt_exec *e, int rank, double *seconds) {
    const rank_state *rs;
    double s = 0;
    if (!e || !seconds) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec rank inside: NULL argument");
    if (rank < 0 || rank >= e->nranks)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec rank inside: rank %d, the mesh has ranks 0..%d", rank,
                 e->nranks - 1);
    if (!e->profile) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec rank inside: compile with profile (or trace_path)");
    if (!e->replays) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec rank inside: nothing has been replayed yet");
    if (!(rs = e->ranks ? e->ranks[rank] : NULL)) /* another process's rank, or CUDA */
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec rank inside: rank %d is not replayed by this process on the CPU",
                 rank);
    for (int64_t i = 0; i < rs->nins; i++) s += rs->prof[i].end - rs->prof[i].start;
    *seconds = s;
    return LDT_OK;
}
