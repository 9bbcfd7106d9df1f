/* Chrome trace of a replay (chrome://tracing, Perfetto): one track per rank, one complete
 * event per instruction, compute and communication in different categories. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "exec/exec_internal.h"

static const char *category(const ldt__instr *x) {
    switch ((ldt__ikind)x->kind) {
    case LDT__I_REDIST:
    case LDT__I_ALL_REDUCE: return "comm";
    case LDT__I_LOAD: return "load";
    default: return "compute";
    }
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
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"node\":%d,\"instruction\":%lld}}",
                    ldt__instr_name(e->ctx, x), category(x), r, rs->prof[i].start * 1e6,
                    (rs->prof[i].end - rs->prof[i].start) * 1e6, x->node, (long long)i);
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
            out[j].collective = x->kind == LDT__I_REDIST || x->kind == LDT__I_ALL_REDUCE;
            (*n)++;
        }
        out[j].calls++;
        out[j].seconds += busiest->prof[i].end - busiest->prof[i].start;
        out[j].flops += instr_flops(busiest->prog, x);
        out[j].bytes += instr_bytes(e, busiest->prog, x);
    }
    return LDT_OK;
}
