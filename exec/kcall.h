/* Internal: one kernel call, built-in or custom, the one way eager and program runs call
 * kernels. */
#ifndef LDT_EXEC_KCALL_H
#define LDT_EXEC_KCALL_H

#include "kernels/cpu/kernel.h"
#include "trace/trace.h"

/* Runs op (a built-in op's CPU kernel, or ctx's custom op) on contiguous operands; region and
 * global (may be NULL) place the output in the global tensor for kernels that draw by global
 * index. */
ldt_status ldt__exec_kernel(const ldt_ctx *ctx, int op, const ldt__attrs *attrs, int nin,
                            const ldt__operand *in, const ldt__operand *out,
                            const ldt_region *region, const ldt_shape *global);

#endif
