/* The eager runner: executes a trace node by node on one rank with the CPU kernels; it is what
 * materialization (ldt_sync, ldt_read) runs, and stays the reference path. */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "exec/kcall.h"
#include "trace/trace.h"

#define MAX_IN 64

static ldt_status run_node(ldt_ctx *ctx, ldt_tensor *t) {
    ldt__operand in[MAX_IN], out;
    if (t->nin > MAX_IN)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%d inputs; the eager runner takes up to %d", t->nin, MAX_IN);
    t->data = malloc((size_t)(ldt__nbytes(t) ? ldt__nbytes(t) : 1));
    if (!t->data) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "out of memory for %lld bytes", (long long)ldt__nbytes(t));
    for (int k = 0; k < t->nin; k++) {
        in[k].data = LDT__IN(t)[k]->data;
        in[k].shape = (*LDT__IN(t)[k]->shape);
        in[k].dtype = (ldt_dtype)LDT__IN(t)[k]->dtype;
    }
    out.data = t->data;
    out.shape = (*t->shape);
    out.dtype = (ldt_dtype)t->dtype;
    return ldt__exec_kernel(ctx, t->op, t->attrs, t->nin, in, &out, NULL, NULL);
}

/* Runs every node of the current trace; `keep_alive` (may be NULL) is not freed early. On
 * return the op results still hold data until ldt__trace_end. */
static ldt_status run_trace(ldt_ctx *ctx, const ldt_tensor *keep_alive) {
    int64_t n = ctx->nnodes, *last = NULL;
    ldt_status st = LDT_OK;
    LDT_CHECK(ldt__host_sync(ctx)); /* parameters an executable updated in place */
    if (ctx->status != LDT_OK) {
        /* the error stuck at recording is reported again now, as at compile */
        ldt__error(ctx->status, "%s", ctx->errmsg);
        return ctx->status;
    }
    if (ldt_mesh_device(ctx->mesh) == LDT_DEVICE_META && ctx->nnodes > 0)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "eager: the context's mesh is on the meta device, where nothing runs; plan "
                 "there, then materialize onto a real mesh");
    last = malloc((size_t)(n ? n : 1) * sizeof *last);
    if (!last) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "eager: out of memory");
    /* last use of each node, so intermediates are freed as soon as they are dead */
    for (int64_t i = 0; i < n; i++) last[i] = -1;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < ctx->nodes[i]->nin; k++) last[LDT__IN(ctx->nodes[i])[k]->id] = i;
    for (int64_t i = 0; i < ctx->nkeeps; i++) last[LDT__P(ctx->keeps[i])->source->id] = n;
    if (keep_alive && keep_alive->kind == LDT__NODE) last[keep_alive->id] = n;
    for (int64_t i = 0; i < n; i++) {
        ldt_tensor *t = ctx->nodes[i];
        if (t->kind == LDT__PERSISTENT) {
            if (t->op == LDT_OP_INPUT && !LDT__P(t)->bound)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE,
                              "eager: input '%s' (node %%%lld) has no data; bind it with "
                              "ldt_input_bind before the run",
                              LDT__NAME(t) ? LDT__NAME(t) : "", (long long)i);
            continue;
        }
        st = run_node(ctx, t);
        if (st != LDT_OK) {
            char d[256];
            ldt__describe(t, d, sizeof d);
            ldt__error_prefix(st, "eager: node %%%lld %s %s", (long long)i,
                              ldt__op_name(ctx, t->op), d);
            goto fail;
        }
        for (int k = 0; k < t->nin; k++) {
            ldt_tensor *u = LDT__IN(t)[k];
            if (u->kind == LDT__NODE && last[u->id] == i && u->data) {
                free(u->data);
                u->data = NULL;
            }
        }
        if (last[i] < 0 && t != keep_alive) { /* a result nobody reads */
            free(t->data);
            t->data = NULL;
        }
    }
    for (int64_t i = 0; i < ctx->nkeeps; i++) {
        ldt_tensor *k = ctx->keeps[i];
        if (ldt__nbytes(k)) ldt__copy(k->data, LDT__P(k)->source->data, (size_t)ldt__nbytes(k));
        LDT__P(k)->version++;
    }
fail:
    free(last);
    return st;
}

ldt_status ldt_sync(ldt_ctx *ctx) {
    ldt_status st;
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "sync: ctx must not be NULL");
    st = run_trace(ctx, NULL);
    if (st != LDT_OK) snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", ldt_last_error());
    ldt__trace_end(ctx);
    return st;
}

ldt_status ldt_read(ldt_tensor *t, void *dst, int64_t nbytes) {
    ldt_ctx *ctx;
    ldt_status st = LDT_OK;
    if (!t || (!dst && nbytes > 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "read: tensor and dst must not be NULL");
    ctx = t->ctx;
    if (t->kind == LDT__NODE && t->gen != ctx->gen)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "read: the tensor (%s) is from a trace that has ended; keep it with ldt_keep",
                 ldt__op_name(ctx, t->op));
    if (nbytes != ldt__nbytes(t)) {
        char d[256];
        ldt__describe(t, d, sizeof d);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "read: %lld bytes given, the tensor %s %s holds %lld",
                 (long long)nbytes, d, ldt_dtype_name((ldt_dtype)t->dtype), (long long)ldt__nbytes(t));
    }
    if (t->kind == LDT__NODE) {
        st = run_trace(ctx, t);
        if (st == LDT_OK && nbytes) ldt__copy(dst, t->data, (size_t)nbytes);
        if (st != LDT_OK) snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", ldt_last_error());
        ldt__trace_end(ctx);
        return st;
    }
    LDT_CHECK(ldt__host_sync(ctx));
    if (t->op == LDT_OP_DATA && LDT__P(t)->source) LDT_CHECK(ldt_sync(ctx)); /* its value is pending */
    if (t->op == LDT_OP_INPUT && !LDT__P(t)->bound)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "read: input '%s' has no data bound",
                 LDT__NAME(t) ? LDT__NAME(t) : "");
    if (!t->data && nbytes)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "read: '%s' is a meta tensor: it holds no data until it is materialized",
                 LDT__NAME(t) ? LDT__NAME(t) : "");
    if (nbytes) ldt__copy(dst, t->data, (size_t)nbytes);
    return LDT_OK;
}
