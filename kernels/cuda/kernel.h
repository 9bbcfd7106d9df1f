/* The CUDA kernel contract: the CPU call (kernels/cpu/kernel.h, ldt__kcall) with device
 * pointers in every operand's data, plus the stream and library handles to launch on, and
 * the table of launchers indexed by op (kernels/cuda/table.cu).
 *
 * A launcher checks its call on the host (arity, dtypes, shapes, attributes: the same
 * checks and messages as the CPU kernel), then only enqueues work on env->stream: no
 * allocation, no synchronisation, no host<->device copy, so that every launcher can be
 * captured into a CUDA Graph (docs/gpu.md). It returns LDT_OK, or an error naming the op
 * and, for a failed launch or library call, the CUDA or cuBLAS error.
 *
 *   ldt__cuda_kernel_fn fn;
 *   LDT_CHECK(ldt__cuda_kernel_lookup(LDT_OP_GELU, &fn)); // refuses ops with no kernel
 *   LDT_CHECK(fn(&call, &env));                           // enqueued on env.stream
 *
 * C and C++ (nvcc) both include this header; it needs no CUDA header. */
#ifndef LDT_KERNELS_CUDA_KERNEL_H
#define LDT_KERNELS_CUDA_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CPU contract's headers are C: their functions have C linkage */
#endif

#include "kernels/cpu/kernel.h"

/* Data errors that a kernel finds on the device, where it cannot return a status: it stores
 * the first one into env->err (atomically), and the runner reports it after the step. */
enum {
    LDT__CUDA_DERR_NONE = 0,
    LDT__CUDA_DERR_INT_DIV_ZERO = 1, /* integer division by zero: the element is set to 0 */
    LDT__CUDA_DERR_TARGET_RANGE = 2, /* cross_entropy target out of range: its row skipped */
    LDT__CUDA_DERR_INDEX_RANGE = 3,  /* an index op's index out of range: its writes skipped */
};
/* "integer division by zero", ... for a device error code. */
const char *ldt__cuda_derr_text(int code);

/* Where a launcher enqueues its work. Pointers are the CUDA types (cudaStream_t,
 * cublasHandle_t) without their headers. */
typedef struct ldt__cuda_env {
    struct CUstream_st *stream;  /* NULL: the legacy default stream */
    struct cublasContext *blas;  /* matmul and linear; its stream and workspace already set */
    /* the cuBLAS functions to call it with, loaded at first use (exec/cuda_libs.h) */
    const struct ldt__cublas_api *blas_api;
    int *err;                    /* device word for data errors (above); NULL: not recorded */
    /* device word added to every random op's offset (rand..randint, dropout): the step's
     * place on the random stream, which a captured step reads at each replay and the backend
     * advances in the graph, so replays draw anew without re-capture; NULL: 0 */
    const uint64_t *rng_delta;
    /* device scratch for a kernel's partial results (cross_entropy's blocks), shared by the
     * step's kernels, which run one after another on `stream`; NULL: none (one block) */
    void *scratch;
    size_t scratch_bytes;
} ldt__cuda_env;

/* The scratch a backend gives its kernels (ldt__cuda_env.scratch). */
#define LDT__CUDA_KSCRATCH ((size_t)4 << 20)

typedef ldt_status (*ldt__cuda_kernel_fn)(const ldt__kcall *c, const ldt__cuda_env *env);

/* The CUDA launcher of a built-in op; NULL where there is none yet (and for leaves). */
ldt__cuda_kernel_fn ldt__cuda_kernel(int op);
/* Same, as a status: LDT_ERR_UNSUPPORTED naming the op when it has no CUDA kernel, so a
 * program is refused when it is bound, not when it runs. */
ldt_status ldt__cuda_kernel_lookup(int op, ldt__cuda_kernel_fn *out);

/* The families, one per file (kernels first, launchers last). */
ldt_status ldt__cuda_k_binary(const ldt__kcall *c, const ldt__cuda_env *env); /* add..ge, where */
ldt_status ldt__cuda_k_scalar(const ldt__kcall *c, const ldt__cuda_env *env); /* *_SCALAR */
ldt_status ldt__cuda_k_unary(const ldt__kcall *c, const ldt__cuda_env *env);  /* neg..silu, cast */
ldt_status ldt__cuda_k_view(const ldt__kcall *c, const ldt__cuda_env *env);   /* reshape..redistribute */
ldt_status ldt__cuda_k_reduce(const ldt__kcall *c, const ldt__cuda_env *env); /* sum, mean, amax, amin */
ldt_status ldt__cuda_k_random(const ldt__kcall *c, const ldt__cuda_env *env); /* rand..randint */
ldt_status ldt__cuda_k_nn(const ldt__kcall *c, const ldt__cuda_env *env);     /* softmax..dropout */
ldt_status ldt__cuda_k_matmul(const ldt__kcall *c, const ldt__cuda_env *env); /* matmul, linear */
ldt_status ldt__cuda_k_index(const ldt__kcall *c, const ldt__cuda_env *env);  /* embedding..index_put */
/* argmax, argmin, topk_values, topk_indices */
ldt_status ldt__cuda_k_argreduce(const ldt__kcall *c, const ldt__cuda_env *env);
ldt_status ldt__cuda_k_attention(const ldt__kcall *c, const ldt__cuda_env *env); /* sdpa */

/* out = v everywhere, rounded once to out's dtype as the CPU does (kernels/common/store.h;
 * the FILL instruction). */
ldt_status ldt__cuda_fill(const ldt__operand *out, double v, const ldt__cuda_env *env);
/* out (this rank's region of a tensor of shape global) = a + b * i at global row-major index
 * i, rounded once (the ARANGE instruction of init recipes). */
ldt_status ldt__cuda_arange(const ldt__operand *out, const ldt_region *region,
                            const ldt_shape *global, double a, double b, const ldt__cuda_env *env);

/* Copies runs[0..nruns) of bytes, each {source offset, destination offset, length} (device
 * memory; multiples of es, 1, 2, 4 or 8), from src to dst: a redistribution's pack and unpack
 * on the device (exec/redist_record.h). */
ldt_status ldt__cuda_copy_runs(const void *src, void *dst, const int64_t *runs, int64_t nruns,
                               int es, const ldt__cuda_env *env);

/* The step's random-stream state in device memory, state[3] = {delta, advance, step}: a
 * captured step ends with this launch, state[0] += state[1] and state[2] += 1, so each replay
 * draws the next values (env->rng_delta = &state[0]) and counts itself. */
ldt_status ldt__cuda_rng_advance(uint64_t *state, const ldt__cuda_env *env);

#ifdef __cplusplus
}
#endif
#endif
