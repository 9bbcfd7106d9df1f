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
    /* The plan made by ldt__cpu_kernel_bind for the function it returned (NULL: none). The
     * unbound kernels (ldt__cpu_kernel) ignore it. */
    const void *plan;
} ldt__kcall;

/* A kernel returns LDT_OK, or an error with a message (ldt__error) naming the op and what is
 * unsupported (e.g. a dtype it has no code for). */
typedef ldt_status (*ldt__kernel_fn)(const ldt__kcall *c);

/* Checks one operand of a call to op: a valid dtype, a valid shape, data where it has
 * elements. k is the input index, or -1 for the output. */
ldt_status ldt__check_operand(const char *op, const ldt__operand *x, int k);

/* The CPU kernel of a built-in op; NULL for leaves (which have no kernel). */
ldt__kernel_fn ldt__cpu_kernel(int op);

/* Binds a complete call (op, attrs, operand shapes and dtypes, buffers, region) once: checks
 * it exactly as the kernel does (same statuses and messages), then gives the function to call
 * at replay and its plan (malloc'd, the caller frees it with free(); NULL when none), also
 * stored in c->plan. The bound function trusts the plan: no validation, formatting, dtype
 * table lookup or allocation per call. Between calls buffers may be re-pointed (c->in[k].data,
 * c->out.data, and attrs that a replay patches, such as random offsets), never shapes, dtypes
 * or other attributes. What depends on the data (integer division by zero, an index out of
 * range) is still checked per call and fails with the kernel's message. */
ldt_status ldt__cpu_kernel_bind(ldt__kcall *c, ldt__kernel_fn *fn, void **plan);

/* A family's binder (the contract of ldt__cpu_kernel_bind, c->plan left to the caller). */
typedef ldt_status (*ldt__kernel_bind_fn)(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);

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

/* Their binders, beside each kernel. */
ldt_status ldt__kb_binary(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_scalar(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_unary(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_view(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_matmul(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_reduce(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_index_reduce(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_random(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_nn(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_index(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);
ldt_status ldt__kb_attention(const ldt__kcall *c, ldt__kernel_fn *fn, void **plan);

/* A plan of `bytes` (zeroed) into *plan, or an out-of-memory status naming op. */
ldt_status ldt__kplan_alloc(const char *op, size_t bytes, void **plan);

#endif
