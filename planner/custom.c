/* Custom ops' strategies: the public builder over the planner's 1-D options. */
#include "core/error.h"
#include "ldt/planner.h"
#include "planner/strategy.h"

void ldt_strategy_add(ldt_strategy_builder *b, ldt_placement out, const ldt_placement *in) {
    if (b && b->o && (in || b->o->nin == 0)) ldt__opt_add(b->o, out, in);
}

ldt_status ldt_custom_op_set_strategy(ldt_ctx *ctx, int id, ldt_custom_strategy_fn fn,
                                      void *user) {
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "custom_op_set_strategy: ctx is NULL");
    if (id < LDT_OP_COUNT || id - LDT_OP_COUNT >= ctx->ncustom)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "custom_op_set_strategy: id %d is not a custom op of this context (ids %d..%d)",
                 id, LDT_OP_COUNT, LDT_OP_COUNT + ctx->ncustom - 1);
    ctx->custom[id - LDT_OP_COUNT].strategy_fn = fn;
    ctx->custom[id - LDT_OP_COUNT].strategy_user = user;
    return LDT_OK;
}
