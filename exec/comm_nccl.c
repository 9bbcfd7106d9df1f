/* The NCCL backend of comm.h: a GPU per rank, bootstrapped through an MPI world (a process
 * per rank) or the rank threads' world (one process, a GPU per rank thread).
 *
 * Buffers are device pointers. Every call of a communicator goes on its one stream, in
 * program order (NCCL's advice for capture: differing orders deadlock), and is waited for by
 * polling the stream and ncclCommGetAsyncError until the communicator's timeout; a timeout or
 * an asynchronous error aborts the communicator (ncclCommAbort), so a dead peer is an error,
 * not a hang. Groups are bootstrapped member-only: the members' MPI group broadcasts a unique
 * id (comm.c's contract: only members call ldt_comm_group).
 *
 * NCCL reduces in its own order (ring or tree, per message size): results match the threaded
 * and MPI backends to rounding, not bit for bit. The _v collectives have no NCCL call: a
 * gather_v is one broadcast per member inside a group, a reduce_scatter_v one reduce per
 * member, all_to_all(_v) grouped sends and receives. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/comm_nccl.h"

#if !defined(LDT_HAVE_NCCL) || !defined(LDT_HAVE_CUDA)

ldt_status ldt_nccl_world(ldt_comm *mpi_world, int device, const ldt_comm_options *opts, ldt_comm **out) {
    (void)mpi_world, (void)device, (void)opts;
    if (out) *out = NULL;
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "nccl: this build has no NCCL backend (it needs CUDA and NCCL "
                                  "found at configure)");
}

void ldt_nccl_world_destroy(ldt_comm *world) { (void)world; }

void *ldt_nccl_stream(const ldt_comm *c) {
    (void)c;
    return NULL;
}

static ldt_status no_nccl(void) {
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "nccl: this build has no NCCL backend");
}
int ldt__nccl_is(const ldt_comm *c) { return (void)c, 0; }
ldt_status ldt__nccl_enqueue(ldt_comm *c, const ldt__op *op, void *stream) {
    (void)c, (void)op, (void)stream;
    return no_nccl();
}
ldt_status ldt__nccl_group_start(void) { return no_nccl(); }
ldt_status ldt__nccl_group_end(void) { return no_nccl(); }
ldt_status ldt__nccl_check(ldt_comm *c) { return (void)c, no_nccl(); }
void ldt__nccl_abort(ldt_comm *c) { (void)c; }
int64_t ldt__nccl_timeout_ms(const ldt_comm *c) { return (void)c, 0; }

#else

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "exec/cuda_libs.h"

/* NCCL's functions: loaded (exec/cuda_libs.h) by make() before any communicator exists, so
 * every call below, on a communicator or its errors, finds the table. */
#define NC ldt__nccl_loaded()

typedef struct nccl_comm {
    ldt_comm base;
    ncclComm_t comm;
    cudaStream_t stream;
    ldt_comm *mpi;    /* the world that bootstraps groups: MPI or rank threads (borrowed) */
    int device;
    int64_t timeout_ms;
    int *ranks;       /* world ranks of the members */
    int dead;         /* aborted: every later call fails */
    void *scratch;    /* a device int for barrier */
    /* sends posted and not yet issued: issued with the next receive (in one NCCL group) or
     * alone when waited for */
    struct ldt__send_req **pending;
    int npending, cappending;
} nccl_comm;

struct ldt__send_req {
    nccl_comm *c;
    ldt__op op;
    int issued;
};

static const ldt__comm_vtable k_nccl_vt;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static ldt_status nccl_err(ncclResult_t r, const char *what) {
    if (r == ncclSuccess) return LDT_OK;
    return ldt__error(LDT_ERR_CUDA, "nccl %s: %s", what, NC->get_error_string(r));
}

static ldt_status cuda_err(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return LDT_OK;
    return ldt__error(LDT_ERR_CUDA, "nccl %s: CUDA %s", what, cudaGetErrorString(e));
}

static ldt_status dead(nccl_comm *c, const char *what) {
    return c->dead ? ldt__error(LDT_ERR_REMOTE, "nccl %s: the communicator was aborted after an "
                                "earlier failure; make a new world", what)
                   : LDT_OK;
}

/* Aborts c's NCCL communicator, which also frees it: once (the handle is dropped). */
static void abort_comm(nccl_comm *c) {
    if (c->comm) NC->comm_abort(c->comm);
    c->comm = NULL;
    c->dead = 1;
}

/* Waits for everything on the stream, or the timeout, or an asynchronous NCCL error; both
 * of the latter abort the communicator. */
static ldt_status drain(nccl_comm *c, const char *what) {
    double t0 = now_ms();
    for (;;) {
        ncclResult_t async = ncclSuccess;
        cudaError_t q = cudaStreamQuery(c->stream);
        if (q != cudaSuccess && q != cudaErrorNotReady) {
            c->dead = 1;
            return cuda_err(q, what);
        }
        /* an asynchronous error fails the call even when the stream has drained */
        if (NC->comm_get_async_error(c->comm, &async) != ncclSuccess || async != ncclSuccess) {
            abort_comm(c);
            return ldt__error(LDT_ERR_REMOTE, "nccl %s: %s (the communicator is aborted)", what,
                              NC->get_error_string(async));
        }
        if (q == cudaSuccess) return LDT_OK;
        if (now_ms() - t0 > (double)c->timeout_ms) {
            abort_comm(c);
            return ldt__error(LDT_ERR_TIMEOUT,
                              "nccl %s: the group (%d ranks) did not complete within %lld ms: a peer "
                              "is missing, dead or calling another collective (the communicator is "
                              "aborted)", what, c->base.size, (long long)c->timeout_ms);
        }
        {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Writes *out on every path (ncclUint8 when refused), so no caller reads it uninitialized:
 * gcc -O3 cannot see that ldt__error never returns LDT_OK. */
static ldt_status type_of(ldt_dtype dt, ncclDataType_t *out) {
    *out = ncclUint8;
    switch (dt) {
    case LDT_F32: *out = ncclFloat32; return LDT_OK;
    case LDT_F64: *out = ncclFloat64; return LDT_OK;
    case LDT_F16: *out = ncclFloat16; return LDT_OK;
    case LDT_BF16: *out = ncclBfloat16; return LDT_OK;
    case LDT_I32: *out = ncclInt32; return LDT_OK;
    case LDT_I64: *out = ncclInt64; return LDT_OK;
    case LDT_U8:
    case LDT_BOOL: *out = ncclUint8; return LDT_OK;
    default: return ldt__error(LDT_ERR_UNSUPPORTED, "nccl: dtype %s has no NCCL type", ldt_dtype_name(dt));
    }
}

/* bool sum is OR (as the reduction definition says): max of 0/1 bytes. Integer avg would
 * divide differently from exec/reduce.c: refused. */
static ldt_status op_of(ldt_reduce_op op, ldt_dtype dt, ncclRedOp_t *out) {
    switch (op) {
    case LDT_REDUCE_SUM: *out = dt == LDT_BOOL ? ncclMax : ncclSum; return LDT_OK;
    case LDT_REDUCE_MAX: *out = ncclMax; return LDT_OK;
    case LDT_REDUCE_MIN: *out = ncclMin; return LDT_OK;
    case LDT_REDUCE_AVG:
        if (dt == LDT_F32 || dt == LDT_F64 || dt == LDT_F16 || dt == LDT_BF16) {
            *out = ncclAvg;
            return LDT_OK;
        }
        return ldt__error(LDT_ERR_UNSUPPORTED, "nccl: avg of %s (integer averages round differently "
                          "from the other backends)", ldt_dtype_name(dt));
    default: return ldt__error(LDT_ERR_UNSUPPORTED, "nccl: reduce op %d", (int)op);
    }
}

static int64_t prefix(const int64_t *a, int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += a[i];
    return s;
}

static ldt_status issue(nccl_comm *c, const ldt__op *op, cudaStream_t stream) {
    ncclDataType_t t;
    ncclRedOp_t r = ncclSum;
    int n = c->base.size, me = c->base.rank;
    size_t es = ldt_dtype_size(op->dtype);
    const char *what = ldt__comm_op_name(op->kind);
    if (op->kind != LDT__OP_BARRIER) LDT_CHECK(type_of(op->dtype, &t));
    switch (op->kind) {
    case LDT__OP_ALL_REDUCE:
        LDT_CHECK(op_of(op->reduce, op->dtype, &r));
        return nccl_err(NC->all_reduce(op->send, op->recv, (size_t)op->count, t, r, c->comm, stream), what);
    case LDT__OP_REDUCE_SCATTER:
        LDT_CHECK(op_of(op->reduce, op->dtype, &r));
        return nccl_err(NC->reduce_scatter(op->send, op->recv, (size_t)op->count, t, r, c->comm, stream), what);
    case LDT__OP_REDUCE_SCATTER_V: {
        ncclResult_t e = ncclSuccess;
        LDT_CHECK(op_of(op->reduce, op->dtype, &r));
        NC->group_start();
        for (int k = 0; k < n && e == ncclSuccess; k++)
            e = NC->reduce((const char *)op->send + (size_t)prefix(op->counts, k) * es, k == me ? op->recv : NULL,
                           (size_t)op->counts[k], t, r, k, c->comm, stream);
        NC->group_end();
        return nccl_err(e, what);
    }
    case LDT__OP_ALL_GATHER:
        return nccl_err(NC->all_gather(op->send, op->recv, (size_t)op->count, t, c->comm, stream), what);
    case LDT__OP_ALL_GATHER_V: {
        ncclResult_t e = ncclSuccess;
        NC->group_start();
        for (int k = 0; k < n && e == ncclSuccess; k++)
            e = NC->broadcast(k == me ? op->send : NULL, (char *)op->recv + (size_t)prefix(op->counts, k) * es,
                              (size_t)op->counts[k], t, k, c->comm, stream);
        NC->group_end();
        return nccl_err(e, what);
    }
    case LDT__OP_ALL_TO_ALL:
    case LDT__OP_ALL_TO_ALL_V: {
        ncclResult_t e = ncclSuccess;
        NC->group_start();
        for (int k = 0; k < n && e == ncclSuccess; k++) {
            int64_t sc = op->sendcounts ? op->sendcounts[k] : op->count;
            int64_t rc = op->recvcounts ? op->recvcounts[k] : op->count;
            int64_t sd = op->sdispls ? op->sdispls[k] : (int64_t)k * op->count;
            int64_t rd = op->rdispls ? op->rdispls[k] : (int64_t)k * op->count;
            if (sc) e = NC->send((const char *)op->send + (size_t)sd * es, (size_t)sc, t, k, c->comm, stream);
            if (rc && e == ncclSuccess)
                e = NC->recv((char *)op->recv + (size_t)rd * es, (size_t)rc, t, k, c->comm, stream);
        }
        NC->group_end();
        return nccl_err(e, what);
    }
    case LDT__OP_BROADCAST:
        return nccl_err(NC->broadcast(op->recv, op->recv, (size_t)op->count, t, op->root, c->comm, stream), what);
    case LDT__OP_BARRIER:
        return nccl_err(NC->all_reduce(c->scratch, c->scratch, 1, ncclInt32, ncclSum, c->comm, stream), what);
    default: return ldt__error(LDT_ERR_INTERNAL, "nccl: %s is not a collective", what);
    }
}

static ldt_status n_collective(ldt_comm *base, const ldt__op *op) {
    nccl_comm *c = (nccl_comm *)base;
    const char *what = ldt__comm_op_name(op->kind);
    LDT_CHECK(dead(c, what));
    LDT_CHECK(cuda_err(cudaSetDevice(c->device), what));
    LDT_CHECK(issue(c, op, c->stream));
    return drain(c, what);
}

static ldt_status n_send_post(ldt_comm *base, const ldt__op *op, ldt__send_req **out) {
    nccl_comm *c = (nccl_comm *)base;
    ldt__send_req *r;
    *out = NULL;
    LDT_CHECK(dead(c, "send"));
    if (c->npending == c->cappending) {
        int cap = c->cappending ? 2 * c->cappending : 8;
        ldt__send_req **p = realloc(c->pending, (size_t)cap * sizeof *p);
        if (!p) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "nccl send: out of memory");
        c->pending = p;
        c->cappending = cap;
    }
    if (!(r = calloc(1, sizeof *r))) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "nccl send: out of memory");
    r->c = c;
    r->op = *op;
    c->pending[c->npending++] = r;
    *out = r;
    return LDT_OK;
}

/* Issues every pending send of c (inside the caller's NCCL group). */
static ncclResult_t issue_pending(nccl_comm *c) {
    ncclResult_t e = ncclSuccess;
    for (int i = 0; i < c->npending && e == ncclSuccess; i++) {
        ldt__send_req *r = c->pending[i];
        ncclDataType_t t;
        if (type_of(r->op.dtype, &t) != LDT_OK) return ncclInvalidArgument;
        e = NC->send(r->op.send, (size_t)r->op.count, t, r->op.root, c->comm, c->stream);
        r->issued = 1;
    }
    c->npending = 0;
    return e;
}

static void forget(nccl_comm *c, ldt__send_req *r) {
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i] == r) {
            c->pending[i] = c->pending[--c->npending];
            break;
        }
}

static ldt_status n_send_wait(ldt__send_req *r) {
    nccl_comm *c = r->c;
    ldt_status st = LDT_OK;
    if (!r->issued) { /* no receive took it along: alone now */
        ncclResult_t e;
        forget(c, r);
        if ((st = dead(c, "send")) == LDT_OK && (st = cuda_err(cudaSetDevice(c->device), "send")) == LDT_OK) {
            ncclDataType_t t;
            if ((st = type_of(r->op.dtype, &t)) == LDT_OK) {
                e = NC->send(r->op.send, (size_t)r->op.count, t, r->op.root, c->comm, c->stream);
                st = nccl_err(e, "send");
            }
        }
    }
    if (st == LDT_OK) st = drain(c, "send");
    free(r);
    return st;
}

static void n_send_cancel(ldt__send_req *r) {
    if (!r->issued) forget(r->c, r);
    else drain(r->c, "send"); /* issued: the buffer is ours again only once it is done */
    free(r);
}

static ldt_status n_recv(ldt_comm *base, const ldt__op *op) {
    nccl_comm *c = (nccl_comm *)base;
    ncclDataType_t t;
    ncclResult_t e, e2;
    LDT_CHECK(dead(c, "recv"));
    LDT_CHECK(type_of(op->dtype, &t));
    LDT_CHECK(cuda_err(cudaSetDevice(c->device), "recv"));
    NC->group_start(); /* with this rank's pending sends: both sides of an exchange can progress */
    e = issue_pending(c);
    e2 = NC->recv(op->recv, (size_t)op->count, t, op->root, c->comm, c->stream);
    NC->group_end();
    LDT_CHECK(nccl_err(e != ncclSuccess ? e : e2, "recv"));
    return drain(c, "recv");
}

/* A communicator over the members (world ranks), bootstrapped through their MPI group. */
static ldt_status make(ldt_comm *mpi, int device, int64_t timeout_ms, int n, const int *ranks, int me,
                       int world_size, int is_world, nccl_comm **out) {
    nccl_comm *c = calloc(1, sizeof *c);
    ldt_comm *mg = NULL;
    const ldt__nccl_api *api;
    ncclUniqueId id;
    ldt_status st = LDT_OK;
    if (!c || !(c->ranks = malloc((size_t)n * sizeof *c->ranks))) {
        free(c);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "nccl: out of memory");
    }
    memcpy(c->ranks, ranks, (size_t)n * sizeof *ranks);
    c->mpi = mpi;
    c->device = device;
    c->timeout_ms = timeout_ms;
    if ((st = ldt__nccl_load(&api)) != LDT_OK) goto fail;
    if ((st = cuda_err(cudaSetDevice(device), "init")) != LDT_OK) goto fail;
    if (is_world) mg = mpi;
    else if ((st = ldt_comm_group(mpi, n, ranks, &mg)) != LDT_OK) goto fail;
    memset(&id, 0, sizeof id);
    if (me == 0 && (st = nccl_err(NC->get_unique_id(&id), "init")) != LDT_OK) goto fail;
    if ((st = ldt_broadcast(mg, &id, (int64_t)sizeof id, LDT_U8, 0)) != LDT_OK) goto fail;
    if ((st = cuda_err(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "init")) != LDT_OK) goto fail;
    if ((st = cuda_err(cudaMalloc(&c->scratch, sizeof(int32_t)), "init")) != LDT_OK) goto fail;
    if ((st = nccl_err(NC->comm_init_rank(&c->comm, n, id, me), "init")) != LDT_OK) goto fail;
    c->base.vt = &k_nccl_vt;
    c->base.rank = me;
    c->base.size = n;
    c->base.world_size = world_size;
    c->base.world_ranks = c->ranks;
    c->base.is_world = is_world;
    c->base.timeout_ms = timeout_ms;
    if (!is_world) ldt_comm_destroy(mg);
    *out = c;
    return LDT_OK;
fail:
    if (mg && !is_world) ldt_comm_destroy(mg);
    if (c->scratch) cudaFree(c->scratch);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c->ranks);
    free(c);
    return ldt__trace(st, __FILE__, __LINE__);
}

static ldt_status n_group(ldt_comm *base, int n, const int *ranks, ldt_comm **out) {
    nccl_comm *c = (nccl_comm *)base, *g = NULL;
    int me = -1;
    LDT_CHECK(dead(c, "comm_group"));
    for (int i = 0; i < n; i++)
        if (ranks[i] == base->world_ranks[base->rank]) me = i;
    LDT_CHECK(make(c->mpi, c->device, c->timeout_ms, n, ranks, me, base->world_size, 0, &g));
    *out = &g->base;
    return LDT_OK;
}

static void n_destroy(ldt_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->dead) abort_comm(c);
    else if (c->comm) NC->comm_destroy(c->comm);
    cudaStreamDestroy(c->stream);
    cudaFree(c->scratch);
    for (int i = 0; i < c->npending; i++) free(c->pending[i]);
    free(c->pending);
    free(c->ranks);
    free(c);
}

static const ldt__comm_vtable k_nccl_vt = {
    .name = "nccl",
    .group = n_group,
    .destroy = n_destroy,
    .collective = n_collective,
    .send_post = n_send_post,
    .send_wait = n_send_wait,
    .send_cancel = n_send_cancel,
    .recv = n_recv,
};

ldt_status ldt_nccl_world(ldt_comm *mpi_world, int device, const ldt_comm_options *opts, ldt_comm **out) {
    int ndev = 0, n, *ranks;
    int64_t timeout;
    nccl_comm *c = NULL;
    ldt_status st;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "nccl world: out is NULL");
    *out = NULL;
    /* A compiled CUDA step waits this long for its collectives: a step whose compute alone
     * takes longer needs more. */
    LDT_CHECK(ldt__comm_timeout(opts, "nccl world", &timeout));
    if (!mpi_world || (strcmp(ldt_comm_backend(mpi_world), "mpi") != 0 &&
                       strcmp(ldt_comm_backend(mpi_world), "threads") != 0) ||
        !mpi_world->is_world)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "nccl world: expected an MPI world (ldt_mpi_world) or a rank "
                 "thread's world (ldt_threads) to bootstrap through, got %s",
                 mpi_world ? ldt_comm_backend(mpi_world) : "NULL");
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "nccl world: no CUDA device on this process's machine");
    if (device < 0) device = ldt_comm_rank(mpi_world) % ndev;
    if (device >= ndev)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "nccl world: device %d, this machine has %d (0..%d)", device, ndev,
                 ndev - 1);
    n = ldt_comm_size(mpi_world);
    if (!(ranks = malloc((size_t)n * sizeof *ranks))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "nccl world: out of memory");
    for (int r = 0; r < n; r++) ranks[r] = r;
    st = make(mpi_world, device, timeout, n, ranks, ldt_comm_rank(mpi_world), n, 1, &c);
    free(ranks);
    LDT_CHECK(st);
    *out = &c->base;
    return LDT_OK;
}

void ldt_nccl_world_destroy(ldt_comm *world) {
    if (world && world->vt == &k_nccl_vt && world->is_world) n_destroy(world);
}

void *ldt_nccl_stream(const ldt_comm *c) {
    return c && c->vt == &k_nccl_vt ? (void *)((const nccl_comm *)c)->stream : NULL;
}

int ldt__nccl_is(const ldt_comm *c) { return c && c->vt == &k_nccl_vt; }

ldt_status ldt__nccl_enqueue(ldt_comm *base, const ldt__op *op, void *stream) {
    nccl_comm *c = (nccl_comm *)base;
    if (!ldt__nccl_is(base)) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "nccl: not an NCCL communicator");
    LDT_CHECK(dead(c, ldt__comm_op_name(op->kind)));
    return issue(c, op, (cudaStream_t)stream);
}

ldt_status ldt__nccl_group_start(void) {
    const ldt__nccl_api *api;
    LDT_CHECK(ldt__nccl_load(&api));
    return nccl_err(api->group_start(), "group start");
}
ldt_status ldt__nccl_group_end(void) {
    const ldt__nccl_api *api;
    LDT_CHECK(ldt__nccl_load(&api));
    return nccl_err(api->group_end(), "group end");
}

ldt_status ldt__nccl_check(ldt_comm *base) {
    nccl_comm *c = (nccl_comm *)base;
    ncclResult_t async = ncclSuccess;
    if (!ldt__nccl_is(base)) return LDT_OK;
    LDT_CHECK(dead(c, "step"));
    if (NC->comm_get_async_error(c->comm, &async) != ncclSuccess || async != ncclSuccess) {
        abort_comm(c);
        return ldt__error(LDT_ERR_REMOTE, "nccl: %s (the communicator of %d ranks is aborted)",
                          NC->get_error_string(async), c->base.size);
    }
    return LDT_OK;
}

void ldt__nccl_abort(ldt_comm *base) {
    if (ldt__nccl_is(base)) abort_comm((nccl_comm *)base);
}

int64_t ldt__nccl_timeout_ms(const ldt_comm *base) {
    return ldt__nccl_is(base) ? ((const nccl_comm *)base)->timeout_ms : 0;
}

#endif
