/* Internal: cuBLAS and NCCL, loaded when a CUDA mesh first needs them (exec/cuda_libs.c).
 *
 * A CUDA build links neither: loading them (and cublasLt behind cuBLAS) costs about 200 MB and
 * half a second, which every process would pay at start, `ldt --version` and CPU plans
 * included. The CUDA backend and the NCCL communicator instead load each library on first use
 * (dlopen of its soname, or the path in LDT_CUBLAS_LIBRARY / LDT_NCCL_LIBRARY) and call
 * through the table of the functions this project uses; a missing library is a status and a
 * message naming it, never a failure to start. The libraries stay loaded until exit.
 * The emulator build (LDT_CUDA=EMU) has its cuBLAS and NCCL built in: the tables point at
 * them unless a variable names a library to load. docs/gpu.md says how libraries are found.
 *
 * C and C++ (nvcc: kernels/cuda/matmul.cu calls GEMMs through the table) include this. */
#ifndef LDT_EXEC_CUDA_LIBS_H
#define LDT_EXEC_CUDA_LIBS_H

#include <stddef.h>

#include <cublas_v2.h>
#ifdef LDT_HAVE_NCCL
#include <nccl.h>
#endif

#include "ldt/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLAS functions the project calls (the _v2 entry points cublas_v2.h names). */
typedef struct ldt__cublas_api {
    cublasStatus_t (*create)(cublasHandle_t *h);
    cublasStatus_t (*destroy)(cublasHandle_t h);
    cublasStatus_t (*set_stream)(cublasHandle_t h, cudaStream_t s);
    cublasStatus_t (*set_workspace)(cublasHandle_t h, void *ws, size_t bytes);
    const char *(*status_string)(cublasStatus_t s);
    const char *(*status_name)(cublasStatus_t s);
    cublasStatus_t (*gemm_ex)(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const void *alpha, const void *A, cudaDataType at,
                              int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                              void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                              cublasGemmAlgo_t algo);
    cublasStatus_t (*gemm_strided_batched_ex)(
        cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
        const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
        cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct,
        int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);
} ldt__cublas_api;

/* cuBLAS's table, loaded on the first call (thread-safe; later calls return the same table).
 * LDT_ERR_UNSUPPORTED naming the library and why when it cannot be loaded or lacks a
 * function. */
ldt_status ldt__cublas_load(const ldt__cublas_api **out);

#ifdef LDT_HAVE_NCCL
/* The NCCL functions the project calls. */
typedef struct ldt__nccl_api {
    const char *(*get_error_string)(ncclResult_t r);
    ncclResult_t (*get_unique_id)(ncclUniqueId *id);
    ncclResult_t (*comm_init_rank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*comm_destroy)(ncclComm_t comm);
    ncclResult_t (*comm_abort)(ncclComm_t comm);
    ncclResult_t (*comm_get_async_error)(ncclComm_t comm, ncclResult_t *err);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*all_reduce)(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t s);
    ncclResult_t (*reduce)(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s);
    ncclResult_t (*reduce_scatter)(const void *send, void *recv, size_t recvcount,
                                   ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t s);
    ncclResult_t (*all_gather)(const void *send, void *recv, size_t sendcount, ncclDataType_t t,
                               ncclComm_t comm, cudaStream_t s);
    ncclResult_t (*broadcast)(const void *send, void *recv, size_t count, ncclDataType_t t,
                              int root, ncclComm_t comm, cudaStream_t s);
    ncclResult_t (*send)(const void *send, size_t count, ncclDataType_t t, int peer,
                         ncclComm_t comm, cudaStream_t s);
    ncclResult_t (*recv)(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                         cudaStream_t s);
} ldt__nccl_api;

/* NCCL's table, as ldt__cublas_load. */
ldt_status ldt__nccl_load(const ldt__nccl_api **out);
/* The table once ldt__nccl_load succeeded; NULL before. */
const ldt__nccl_api *ldt__nccl_loaded(void);
#endif

/* Which library: cuBLAS or NCCL. */
typedef enum { LDT__LIB_CUBLAS = 0, LDT__LIB_NCCL = 1 } ldt__cuda_lib;

/* Loads library `which` from `file` (a soname or a path; NULL: the default search, as the
 * loaders above) into a table of `bytes` bytes (the api struct), without caching: what the
 * loaders do once, exposed for tests of the failures' messages. */
ldt_status ldt__cuda_lib_open(ldt__cuda_lib which, const char *file, void *table, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
