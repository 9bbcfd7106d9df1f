/* The program format's own functions (planner/program.h, docs/program.md): replacing a
 * program's instructions, freeing it, naming and printing its instructions. Lowering builds
 * programs (planner/lower.c); exec runs them (exec/interp.c unbound, exec/replay.c bound). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/program.h"
#include "trace/trace.h"

void ldt__program_set_ins(ldt__program *p, ldt__instr *ins, int64_t nins, int32_t *ops, int64_t nops) {
    free(p->ins);
    p->ins = ins;
    p->nins = nins;
    p->cap_ins = nins ? nins : 1;
    free(p->ops);
    p->ops = ops;
    p->nops = nops;
    p->cap_ops = nops + 1;
}

void ldt__program_free(ldt__program *p) {
    if (!p) return;
    for (int64_t i = 0; i < p->nattrs; i++) free(p->attrs[i]);
    free(p->attrs);
    free(p->vals);
    free(p->ins);
    free(p->ops);
    free(p->regions);
    free(p->node_val);
    free(p->vgroup);
    free(p->bplans);
    free(p->p2p);
    memset(p, 0, sizeof *p);
}

const char *ldt__instr_name(const ldt_ctx *ctx, const ldt__instr *x) {
    switch ((ldt__ikind)x->kind) {
    case LDT__I_LOAD: return "load";
    case LDT__I_KERNEL: return ldt__op_name(ctx, x->op);
    case LDT__I_REDIST: return "redistribute";
    case LDT__I_ALL_REDUCE: return "all_reduce";
    case LDT__I_FILL: return "fill";
    case LDT__I_WAIT: return "wait";
    case LDT__I_ARANGE: return "arange";
    case LDT__I_BUCKET: return x->coll == LDT_COLL_REDUCE_SCATTER ? "reduce_scatter" : "all_gather";
    case LDT__I_SEND: return "send";
    case LDT__I_RECV: return "recv";
    case LDT__I_SEND_WAIT: return "send_wait";
    default: return "?";
    }
}

static void print_val(FILE *f, const ldt__program *p, int32_t v) {
    const ldt__value *x = &p->vals[v];
    fprintf(f, "v%d[", v);
    for (int d = 0; d < x->shape.ndim; d++) fprintf(f, "%s%" PRId64, d ? "," : "", x->shape.dims[d]);
    fprintf(f, "]%s", ldt_dtype_name((ldt_dtype)x->dtype));
}

ldt_status ldt__program_print(const ldt__program *p, const ldt_ctx *ctx, FILE *f) {
    fprintf(f, "program rank %d: %d values, %" PRId64 " instructions\n", p->rank, p->nvals, p->nins);
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        fputs("  ", f);
        switch ((ldt__ikind)x->kind) {
        case LDT__I_LOAD:
            print_val(f, p, x->out);
            fprintf(f, " = load %s", LDT__NAME(x->src) ? LDT__NAME(x->src) : "const");
            break;
        case LDT__I_KERNEL:
            print_val(f, p, x->out);
            fprintf(f, " = %s(", ldt__op_name(ctx, x->op));
            for (int k = 0; k < x->nin; k++) fprintf(f, "%sv%d", k ? ", " : "", p->ops[x->in + k]);
            fputc(')', f);
            if (x->region >= 0) fputs(" by global index", f);
            break;
        case LDT__I_REDIST:
            print_val(f, p, x->out);
            fprintf(f, " = %sredistribute(v%d):", x->async ? "start " : "", p->ops[x->in]);
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step st;
                char b[256];
                ldt_redist_plan_step(x->plan, s, &st);
                ldt_redist_step_format(&st, b, sizeof b);
                fprintf(f, "%s %s", s ? ";" : "", b);
            }
            break;
        case LDT__I_ALL_REDUCE:
            fprintf(f, "%sall_reduce %s v%d%s over mesh dims [", x->async ? "start " : "",
                    ldt_reduce_op_name((ldt_reduce_op)x->reduce), x->out, x->nin > 1 ? " (fused bucket)" : "");
            for (int d = 0; d < x->ndims; d++) fprintf(f, "%s%d", d ? "," : "", x->dims[d]);
            fputc(']', f);
            break;
        case LDT__I_BUCKET:
            fprintf(f, "%s%s", x->async ? "start " : "", ldt__instr_name(ctx, x));
            for (int k = 0; k < x->nout; k++)
                fprintf(f, "%s v%d <- v%d", k ? "," : "", p->ops[x->in + x->nin + k], p->ops[x->in + k]);
            fprintf(f, " (fused bucket of %d) over mesh dims [", x->nin);
            for (int d = 0; d < x->ndims; d++) fprintf(f, "%s%d", d ? "," : "", x->dims[d]);
            fputc(']', f);
            break;
        case LDT__I_FILL:
            print_val(f, p, x->out);
            fprintf(f, " = fill %g", x->fill);
            break;
        case LDT__I_WAIT:
            fprintf(f, "wait %lld (v%d)", (long long)x->pair, x->out);
            break;
        case LDT__I_ARANGE:
            print_val(f, p, x->out);
            fprintf(f, " = arange %g + %g i by global index", x->fill, x->step);
            break;
        case LDT__I_SEND:
        case LDT__I_RECV:
            if (x->kind == LDT__I_RECV) {
                print_val(f, p, x->out);
                fputs(" = ", f);
            }
            fprintf(f, "%s v%d %s rank %d (channel %d)", x->kind == LDT__I_SEND ? "send" : "recv", x->out,
                    x->kind == LDT__I_SEND ? "to" : "from", p->p2p[x->op][0], p->p2p[x->op][1]);
            break;
        case LDT__I_SEND_WAIT:
            fprintf(f, "send_wait (%d sends)", x->nin);
            break;
        default:
            fprintf(f, "? kind %d", x->kind);
        }
        fprintf(f, "   # %%%d\n", x->node);
    }
    return ferror(f) ? ldt__error(LDT_ERR_SYSTEM, "program: write failed") : LDT_OK;
}
