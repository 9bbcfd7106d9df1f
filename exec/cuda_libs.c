/* cuBLAS and NCCL loaded on first use (exec/cuda_libs.h): dlopen, then every function the
 * project calls resolved into a table, or a status naming what is missing. The tables are
 * process-wide, like the libraries themselves: written once under a lock, published through
 * an atomic pointer, never unloaded. */
#include <stdint.h>

#include "core/error.h"

#ifdef LDT_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "exec/cuda_libs.h"

#define STR_(x) #x
#define XSTR(x) STR_(x)

/* One function: its exported name (after cublas_v2.h's macros: cublasCreate_v2) and its
 * field. */
typedef struct sym {
    const char *name;
    size_t offset;
} sym;

#define CB(field, fn) {XSTR(fn), offsetof(ldt__cublas_api, field)}
static const sym k_cublas_syms[] = {
    CB(create, cublasCreate),
    CB(destroy, cublasDestroy),
    CB(set_stream, cublasSetStream),
    CB(set_workspace, cublasSetWorkspace),
    CB(status_string, cublasGetStatusString),
    CB(status_name, cublasGetStatusName),
    CB(gemm_ex, cublasGemmEx),
    CB(gemm_strided_batched_ex, cublasGemmStridedBatchedEx),
};

#ifdef LDT_HAVE_NCCL
#define NC(field, fn) {#fn, offsetof(ldt__nccl_api, field)}
static const sym k_nccl_syms[] = {
    NC(get_error_string, ncclGetErrorString),
    NC(get_unique_id, ncclGetUniqueId),
    NC(comm_init_rank, ncclCommInitRank),
    NC(comm_destroy, ncclCommDestroy),
    NC(comm_abort, ncclCommAbort),
    NC(comm_get_async_error, ncclCommGetAsyncError),
    NC(group_start, ncclGroupStart),
    NC(group_end, ncclGroupEnd),
    NC(all_reduce, ncclAllReduce),
    NC(reduce, ncclReduce),
    NC(reduce_scatter, ncclReduceScatter),
    NC(all_gather, ncclAllGather),
    NC(broadcast, ncclBroadcast),
    NC(send, ncclSend),
    NC(recv, ncclRecv),
};
#endif

/* The tables' fields have the headers' types: checked without referencing the functions
 * (a reference would link the library again). */
#if defined(__GNUC__) && !defined(LDT_CUDA_EMU)
#define SAME_TYPE(T, field, fn)                                                             \
    _Static_assert(__builtin_types_compatible_p(__typeof__(((T *)0)->field), __typeof__(&fn)), \
                   #fn " does not match the table's " #field)
SAME_TYPE(ldt__cublas_api, create, cublasCreate);
SAME_TYPE(ldt__cublas_api, destroy, cublasDestroy);
SAME_TYPE(ldt__cublas_api, set_stream, cublasSetStream);
SAME_TYPE(ldt__cublas_api, set_workspace, cublasSetWorkspace);
SAME_TYPE(ldt__cublas_api, status_string, cublasGetStatusString);
SAME_TYPE(ldt__cublas_api, status_name, cublasGetStatusName);
SAME_TYPE(ldt__cublas_api, gemm_ex, cublasGemmEx);
SAME_TYPE(ldt__cublas_api, gemm_strided_batched_ex, cublasGemmStridedBatchedEx);
#ifdef LDT_HAVE_NCCL
SAME_TYPE(ldt__nccl_api, get_error_string, ncclGetErrorString);
SAME_TYPE(ldt__nccl_api, get_unique_id, ncclGetUniqueId);
SAME_TYPE(ldt__nccl_api, comm_init_rank, ncclCommInitRank);
SAME_TYPE(ldt__nccl_api, comm_destroy, ncclCommDestroy);
SAME_TYPE(ldt__nccl_api, comm_abort, ncclCommAbort);
SAME_TYPE(ldt__nccl_api, comm_get_async_error, ncclCommGetAsyncError);
SAME_TYPE(ldt__nccl_api, group_start, ncclGroupStart);
SAME_TYPE(ldt__nccl_api, group_end, ncclGroupEnd);
SAME_TYPE(ldt__nccl_api, all_reduce, ncclAllReduce);
SAME_TYPE(ldt__nccl_api, reduce, ncclReduce);
SAME_TYPE(ldt__nccl_api, reduce_scatter, ncclReduceScatter);
SAME_TYPE(ldt__nccl_api, all_gather, ncclAllGather);
SAME_TYPE(ldt__nccl_api, broadcast, ncclBroadcast);
SAME_TYPE(ldt__nccl_api, send, ncclSend);
SAME_TYPE(ldt__nccl_api, recv, ncclRecv);
#endif
#endif

typedef struct lib_info {
    const char *title;   /* for messages */
    const char *env;     /* the variable that names the file */
    const char *soname;  /* the default: the major version this build was compiled against */
    const char *install; /* what to do when it is missing */
    const sym *syms;
    int nsyms;
    size_t bytes;
} lib_info;

static int lib_info_of(ldt__cuda_lib which, lib_info *li) {
    memset(li, 0, sizeof *li);
    if (which == LDT__LIB_CUBLAS) {
        li->title = "cuBLAS";
        li->env = "LDT_CUBLAS_LIBRARY";
#ifdef CUBLAS_VER_MAJOR
        li->soname = "libcublas.so." XSTR(CUBLAS_VER_MAJOR);
#else
        li->soname = "libcublas.so";
#endif
        li->install = "install the CUDA toolkit's cuBLAS (or set LDT_CUBLAS_LIBRARY to its path) "
                      "or use --device cpu";
        li->syms = k_cublas_syms;
        li->nsyms = (int)(sizeof k_cublas_syms / sizeof k_cublas_syms[0]);
        li->bytes = sizeof(ldt__cublas_api);
        return 1;
    }
#ifdef LDT_HAVE_NCCL
    if (which == LDT__LIB_NCCL) {
        li->title = "NCCL";
        li->env = "LDT_NCCL_LIBRARY";
#ifdef NCCL_MAJOR
        li->soname = "libnccl.so." XSTR(NCCL_MAJOR);
#else
        li->soname = "libnccl.so";
#endif
        li->install = "install NCCL (or set LDT_NCCL_LIBRARY to its path) or use --device cpu";
        li->syms = k_nccl_syms;
        li->nsyms = (int)(sizeof k_nccl_syms / sizeof k_nccl_syms[0]);
        li->bytes = sizeof(ldt__nccl_api);
        return 1;
    }
#endif
    return 0;
}

ldt_status ldt__cuda_lib_open(ldt__cuda_lib which, const char *file, void *table, size_t bytes) {
    lib_info li;
    void *h;
    const char *name;
    if (!lib_info_of(which, &li) || !table || bytes != li.bytes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda libraries: no library %d with a table of %zu bytes",
                 (int)which, bytes);
    name = file && *file ? file : li.soname;
    dlerror();
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "%s could not be loaded (%s): %s", li.title,
                 why ? why : name, li.install);
    }
    for (int i = 0; i < li.nsyms; i++) {
        void *f;
        dlerror();
        f = dlsym(h, li.syms[i].name);
        if (!f) {
            /* a library older than the headers this build was compiled with */
            ldt_status st = ldt__error(LDT_ERR_UNSUPPORTED,
                                       "%s: %s has no %s, which this build needs: install the "
                                       "version it was built for (%s) or use --device cpu",
                                       li.title, name, li.syms[i].name, li.soname);
            dlclose(h);
            return st;
        }
        memcpy((char *)table + li.syms[i].offset, &f, sizeof f);
    }
    return LDT_OK; /* the handle is kept: the library stays loaded until exit */
}

/* One library's table, made once. */
typedef struct lib_slot {
    pthread_mutex_t lock;
    _Atomic(const void *) ready;
    union {
        ldt__cublas_api cublas;
#ifdef LDT_HAVE_NCCL
        ldt__nccl_api nccl;
#endif
    } table;
} lib_slot;

static lib_slot g_cublas = {.lock = PTHREAD_MUTEX_INITIALIZER};
#ifdef LDT_HAVE_NCCL
static lib_slot g_nccl = {.lock = PTHREAD_MUTEX_INITIALIZER};
#endif

#ifdef LDT_CUDA_EMU
/* The emulator's built-in libraries (kernels/cuda/emu). */
static int builtin(ldt__cuda_lib which, void *table) {
    if (which == LDT__LIB_CUBLAS) {
        ldt__cublas_api *t = table;
        t->create = cublasCreate;
        t->destroy = cublasDestroy;
        t->set_stream = cublasSetStream;
        t->set_workspace = cublasSetWorkspace;
        t->status_string = cublasGetStatusString;
        t->status_name = cublasGetStatusName;
        t->gemm_ex = cublasGemmEx;
        t->gemm_strided_batched_ex = cublasGemmStridedBatchedEx;
        return 1;
    }
    if (which == LDT__LIB_NCCL) {
        ldt__nccl_api *t = table;
        t->get_error_string = ncclGetErrorString;
        t->get_unique_id = ncclGetUniqueId;
        t->comm_init_rank = ncclCommInitRank;
        t->comm_destroy = ncclCommDestroy;
        t->comm_abort = ncclCommAbort;
        t->comm_get_async_error = ncclCommGetAsyncError;
        t->group_start = ncclGroupStart;
        t->group_end = ncclGroupEnd;
        t->all_reduce = ncclAllReduce;
        t->reduce = ncclReduce;
        t->reduce_scatter = ncclReduceScatter;
        t->all_gather = ncclAllGather;
        t->broadcast = ncclBroadcast;
        t->send = ncclSend;
        t->recv = ncclRecv;
        return 1;
    }
    return 0;
}
#endif

static ldt_status load(lib_slot *s, ldt__cuda_lib which, size_t bytes, const void **out) {
    ldt_status st = LDT_OK;
    const void *t = atomic_load_explicit(&s->ready, memory_order_acquire);
    if (t) {
        *out = t;
        return LDT_OK;
    }
    pthread_mutex_lock(&s->lock);
    if (!(t = atomic_load_explicit(&s->ready, memory_order_relaxed))) {
        lib_info li;
        const char *file;
        lib_info_of(which, &li);
        file = getenv(li.env);
#ifdef LDT_CUDA_EMU
        if (!(file && *file) && builtin(which, &s->table)) st = LDT_OK;
        else
#endif
            st = ldt__cuda_lib_open(which, file, &s->table, bytes);
        if (st == LDT_OK) {
            t = &s->table;
            atomic_store_explicit(&s->ready, t, memory_order_release);
        }
    }
    pthread_mutex_unlock(&s->lock);
    *out = t;
    return st;
}

ldt_status ldt__cublas_load(const ldt__cublas_api **out) {
    const void *t = NULL;
    ldt_status st = load(&g_cublas, LDT__LIB_CUBLAS, sizeof(ldt__cublas_api), &t);
    *out = t;
    return st;
}

#ifdef LDT_HAVE_NCCL
ldt_status ldt__nccl_load(const ldt__nccl_api **out) {
    const void *t = NULL;
    ldt_status st = load(&g_nccl, LDT__LIB_NCCL, sizeof(ldt__nccl_api), &t);
    *out = t;
    return st;
}

const ldt__nccl_api *ldt__nccl_loaded(void) {
    return atomic_load_explicit(&g_nccl.ready, memory_order_acquire);
}
#endif

#else

/* A build without CUDA has nothing to load. */
typedef int ldt__no_cuda_libs;

#endif
