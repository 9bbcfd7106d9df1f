/* One kernel call: the CPU kernel table for built-in ops, the registered function for custom
 * ops. */
#include <string.h>

#include "core/error.h"
#include "exec/kcall.h"

#define MAX_IN 64

static ldt_status run_custom(const ldt_ctx *ctx, int op, int nin, const ldt__operand *in,
                             const ldt__operand *out) {
    const ldt__custom_op *c;
    const void *data[MAX_IN];
    ldt_shape shapes[MAX_IN];
    ldt_dtype dts[MAX_IN];
    ldt_status st;
    if (op - LDT_OP_COUNT >= ctx->ncustom)
        LDT_FAIL(LDT_ERR_INTERNAL, "no custom op with id %d", op);
    c = &ctx->custom[op - LDT_OP_COUNT];
    for (int k = 0; k < nin; k++) {
        data[k] = in[k].data;
        shapes[k] = in[k].shape;
        dts[k] = in[k].dtype;
    }
    ldt_clear_error();
    st = c->cpu_fn(nin, data, shapes, dts, out->data, &out->shape, out->dtype, c->user);
    if (st != LDT_OK && !ldt_last_error()[0])
        ldt__error(st, "custom op kernel returned %s", ldt_status_name(st));
    return st;
}

ldt_status ldt__exec_kernel(const ldt_ctx *ctx, int op, const ldt__attrs *attrs, int nin,
                            const ldt__operand *in, const ldt__operand *out,
                            const ldt_region *region, const ldt_shape *global) {
    ldt__kcall call;
    ldt__kernel_fn fn;
    if (nin > MAX_IN)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%d inputs; kernels take up to %d", nin, MAX_IN);
    if (op >= LDT_OP_COUNT) return run_custom(ctx, op, nin, in, out);
    if (!(fn = ldt__cpu_kernel(op))) LDT_FAIL(LDT_ERR_INTERNAL, "no CPU kernel for op %d", op);
    memset(&call, 0, sizeof call);
    call.op = op;
    call.attrs = attrs;
    call.nin = nin;
    call.in = in;
    call.out = *out;
    call.region = region;
    call.global_shape = global;
    return fn(&call);
}
