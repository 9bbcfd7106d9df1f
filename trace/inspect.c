/* Read-only walking of the current trace, for user graph passes (planner.h) and tools. */
#include <string.h>

#include "core/error.h"
#include "trace/trace.h"

ldt_tensor *ldt_trace_node(const ldt_ctx *ctx, int64_t i) {
    if (!ctx) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "trace_node: ctx is NULL");
        return NULL;
    }
    if (i < 0 || i >= ctx->nnodes) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "trace_node: node %lld is out of range (the trace has %lld)",
                   (long long)i, (long long)ctx->nnodes);
        return NULL;
    }
    return ctx->nodes[i];
}

int64_t ldt_tensor_node(const ldt_tensor *t) {
    /* a persistent tensor keeps the id of the last trace that used it: valid only there */
    if (!t || t->gen != t->ctx->gen || t->id < 0 || t->id >= t->ctx->nnodes ||
        t->ctx->nodes[t->id] != t)
        return -1;
    return t->id;
}

const char *ldt_tensor_op(const ldt_tensor *t) { return t ? ldt__op_name(t->ctx, t->op) : ""; }

int ldt_tensor_ninputs(const ldt_tensor *t) {
    return t && t->kind == LDT__NODE ? t->nin : 0;
}

ldt_tensor *ldt_tensor_input(const ldt_tensor *t, int k) {
    return k >= 0 && k < ldt_tensor_ninputs(t) ? LDT__IN(t)[k] : NULL;
}

const char *ldt_tensor_name(const ldt_tensor *t) { return t ? LDT__NAME(t) : NULL; }

ldt_status ldt_tensor_pin(const ldt_tensor *t, ldt_placement *out, int cap, int *pinned) {
    int nd;
    if (!t || !out || !pinned) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "tensor_pin: arguments must not be NULL");
    nd = ldt_mesh_ndim(t->ctx->mesh);
    if (cap < nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "tensor_pin: room for %d placements, the mesh has %d dims", cap, nd);
    *pinned = t->pin != NULL;
    if (t->pin) memcpy(out, t->pin, (size_t)nd * sizeof *out);
    return LDT_OK;
}
