/* The CPU kernel contract: one call per node, on contiguous row-major buffers, and the table
 * of kernels indexed by op (kernels/cpu/table.c). Kernels never allocate the output (the
 * runner does) and never see the graph. */
#ifndef LDT_KERNELS_CPU_KERNEL_H
#define LDT_KERNELS_CPU_KERNEL_H

#include "core/ops.h"
#include "ldt/core.h"

/* One operand: a contiguous row-major buffer of `shape` elements of `dtype`. */
typedef struct ldt__operand {
    void *data;
    ldt_shape shape;
    ldt_dtype dtype;
} ldt__operand;

/* Everything a kernel needs: op, attributes, inputs and the output (shape and dtype already
 * inferred by the trace; buffers already allocated). */
typedef struct ldt__kcall {
    int op; /* ldt_op, or a custom op id */
    const ldt__attrs *attrs;
    int nin;
    const ldt__operand *in;
    ldt__operand out;
    /* Where the output sits in the global tensor, for kernels whose values depend on the
     * global index (random ops): NULL means out is the whole tensor. When set, out.shape is
     * region->local_shape and global_shape is the full tensor's shape. */
    const ldt_region *region;
    const ldt_shape *global_shape;
} ldt__kcall;

/* A kernel returns LDT_OK, or an error with a message (ldt__error) naming the op and what is
 * unsupported (e.g. a dtype it has no code for). */
typedef ldt_status (*ldt__kernel_fn)(const ldt__kcall *c);

/* Checks one operand of a call to op: a valid dtype, a valid shape, data where it has
 * elements. k is the input index, or -1 for the output. */
ldt_status ldt__check_operand(const char *op, const ldt__operand *x, int k);

/* The CPU kernel of a built-in op; NULL for leaves (which have no kernel). */
ldt__kernel_fn ldt__cpu_kernel(int op);

/* The families, each in its own file (kernels first, dispatch on c->op last). */
ldt_status ldt__k_binary(const ldt__kcall *c);    /* add..ge, where: elementwise.c */
ldt_status ldt__k_scalar(const ldt__kcall *c);    /* *_SCALAR: elementwise.c */
ldt_status ldt__k_unary(const ldt__kcall *c);     /* neg..silu, cast: elementwise.c */
ldt_status ldt__k_view(const ldt__kcall *c);      /* reshape..redistribute: view.c */
ldt_status ldt__k_matmul(const ldt__kcall *c);    /* matmul, linear: matmul.c */
ldt_status ldt__k_reduce(const ldt__kcall *c);    /* sum, mean, amax, amin: reduce.c */
ldt_status ldt__k_index_reduce(const ldt__kcall *c); /* argmax, argmin, topk: reduce.c */
ldt_status ldt__k_random(const ldt__kcall *c);    /* rand, randn, bernoulli: random.c */
ldt_status ldt__k_nn(const ldt__kcall *c);        /* softmax..dropout: nn.c */
ldt_status ldt__k_index(const ldt__kcall *c);     /* embedding..index_put: index.c */
ldt_status ldt__k_attention(const ldt__kcall *c); /* sdpa: attention.c */

#endif
