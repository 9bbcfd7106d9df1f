/* Chrome trace of a replay (chrome://tracing, Perfetto): one track per rank, one complete
 * event per instruction, compute and communication in different categories. */
#include <stdio.h>

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
