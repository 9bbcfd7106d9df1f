/* The MPI backend of comm.h: one process per rank.
 *
 * Reductions do not use MPI's own reduce: a rank receives every member's chunk of its part
 * (all_to_all), reduces them with ldt__reduce_at in rank order and the parts are gathered
 * again (all_gather) for an all_reduce. That moves what a ring reduce-scatter + all-gather
 * moves, and every element is reduced exactly as the threaded backend reduces it (one
 * definition, exec/reduce.c): the same bits on every backend and on every rank.
 *
 * Every call is nonblocking underneath and waited on with the communicator's timeout, so a
 * peer that never arrives is an LDT_ERR_TIMEOUT, not a hang. Rank threads of the executor
 * and its communication thread may call at once: MPI runs with MPI_THREAD_MULTIPLE. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/reduce.h"

#ifndef LDT_HAVE_MPI

ldt_status ldt_mpi_world(const ldt_comm_options *opts, ldt_comm **out) {
    (void)opts;
    if (out) *out = NULL;
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "mpi: this build has no MPI backend (configure with MPI found, "
                                  "LDT_MPI=AUTO or ON)");
}

ldt_status ldt_mpi_world_from(const void *mpi_comm, const ldt_comm_options *opts, ldt_comm **out) {
    (void)mpi_comm;
    return ldt_mpi_world(opts, out);
}

void ldt_mpi_world_destroy(ldt_comm *world) { (void)world; }

#else

#include <mpi.h>

typedef struct mpi_world {
    MPI_Comm comm;     /* the world's (a duplicate of the caller's) */
    int initialised;   /* we called MPI_Init_thread: we finalise */
    int64_t timeout_ms;
    int *ranks;        /* 0..n-1 */
} mpi_world;

typedef struct mpi_comm {
    ldt_comm base;
    MPI_Comm comm;
    mpi_world *w;
    int *ranks; /* world ranks of the members (a group's own copy) */
} mpi_comm;

struct ldt__send_req {
    MPI_Request req;
    mpi_comm *c;
};

static const ldt__comm_vtable k_mpi_vt;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static ldt_status mpi_err(int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (rc == MPI_SUCCESS) return LDT_OK;
    MPI_Error_string(rc, msg, &len);
    return ldt__error(LDT_ERR_REMOTE, "mpi %s: %.*s", what, len, msg);
}

/* Waits for req, polling, until the communicator's timeout. On a timeout the request is
 * left to MPI (collectives cannot be cancelled): the buffers MPI may still touch are leaked
 * rather than freed, and the communicator is unusable (abandon the world; mpirun ends a job
 * whose process exits). */
static ldt_status wait_req(mpi_comm *c, MPI_Request *req, const char *what) {
    double t0 = now_ms();
    int done = 0, spins = 0;
    for (;;) {
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_err(rc, what);
        if (done) return LDT_OK;
        if (now_ms() - t0 > (double)c->w->timeout_ms)
            return ldt__error(LDT_ERR_TIMEOUT,
                              "mpi %s: the group (%d ranks) did not complete within %lld ms: a "
                              "peer is missing, dead or calling another collective",
                              what, c->base.size, (long long)c->w->timeout_ms);
        if (++spins > 64) { /* a short sleep after a burst of polls: leave the core to others */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* MPI element types by size: the backend only moves bytes. */
static MPI_Datatype type_of(ldt_dtype dt) {
    switch (ldt_dtype_size(dt)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
    }
}

static ldt_status to_int(int64_t v, int *out, const char *what) {
    if (v < 0 || v > INT_MAX)
        return ldt__error(LDT_ERR_UNSUPPORTED, "mpi %s: %lld elements in one message, MPI counts "
                          "stop at %d", what, (long long)v, INT_MAX);
    *out = (int)v;
    return LDT_OK;
}

/* counts and displacements as MPI ints */
static ldt_status int_table(const int64_t *counts, const int64_t *displs, int n, int *ic, int *id,
                            const char *what) {
    int64_t off = 0;
    for (int r = 0; r < n; r++) {
        LDT_CHECK(to_int(counts[r], &ic[r], what));
        LDT_CHECK(to_int(displs ? displs[r] : off, &id[r], what));
        off += counts[r];
    }
    return LDT_OK;
}

/* The reduction: per member r, `counts[r]` elements at send + sdispl[r] go to member r;
 * this rank reduces the n pieces it receives (its own part, counts[me]) into out. */
static ldt_status reduce_parts(mpi_comm *c, const ldt__op *op, const int64_t *counts, void *out,
                               const char *what) {
    int n = c->base.size, me = c->base.rank;
    size_t es = ldt_dtype_size(op->dtype);
    int64_t mine = counts[me];
    int *sc = malloc((size_t)n * 4 * sizeof *sc);
    char *tmp = malloc((size_t)(mine ? mine : 1) * (size_t)n * es);
    const void **srcs = malloc((size_t)n * sizeof *srcs);
    MPI_Request req;
    ldt_status st = LDT_OK;
    if (!sc || !tmp || !srcs) {
        st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        goto done;
    }
    int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    if ((st = int_table(counts, NULL, n, sc, sd, what)) != LDT_OK) goto done;
    for (int r = 0; r < n; r++) {
        rc[r] = sc[me];
        rd[r] = r * sc[me];
        if ((int64_t)r * mine > INT_MAX) {
            st = to_int((int64_t)r * mine, &rd[r], what);
            goto done;
        }
    }
    st = mpi_err(MPI_Ialltoallv(op->send, sc, sd, type_of(op->dtype), tmp, rc, rd, type_of(op->dtype),
                                c->comm, &req), what);
    if (st == LDT_OK && (st = wait_req(c, &req, what)) == LDT_ERR_TIMEOUT)
        sc = NULL, tmp = NULL; /* MPI may still touch them: leaked with the dead communicator */
    if (st != LDT_OK) goto done;
    for (int r = 0; r < n; r++) srcs[r] = tmp + (size_t)r * (size_t)mine * es;
    if (mine) ldt__reduce_at(out, srcs, n, 0, mine, op->dtype, op->reduce, n);
done:
    free(sc);
    free(tmp);
    free(srcs);
    return st;
}

static ldt_status gather_v(mpi_comm *c, const void *send, void *recv, const int64_t *counts,
                           ldt_dtype dt, const char *what) {
    int n = c->base.size, me = c->base.rank;
    int *ic = malloc((size_t)n * 2 * sizeof *ic);
    MPI_Request req;
    ldt_status st;
    if (!ic) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
    st = int_table(counts, NULL, n, ic, ic + n, what);
    if (st == LDT_OK) {
        size_t es = ldt_dtype_size(dt);
        const char *at = (const char *)recv + (size_t)ic[n + me] * es;
        st = mpi_err(MPI_Iallgatherv(send == at ? MPI_IN_PLACE : send, ic[me], type_of(dt), recv, ic,
                                     ic + n, type_of(dt), c->comm, &req), what);
    }
    if (st == LDT_OK && (st = wait_req(c, &req, what)) == LDT_ERR_TIMEOUT) ic = NULL; /* MPI may read it */
    free(ic);
    return st;
}

/* The even split of count elements into n parts (the first count % n one longer). */
static void split(int64_t count, int n, int64_t *parts) {
    for (int r = 0; r < n; r++) parts[r] = count / n + (r < count % n);
}

static ldt_status m_collective(ldt_comm *base, const ldt__op *op) {
    mpi_comm *c = (mpi_comm *)base;
    int n = base->size, me = base->rank;
    const char *what = ldt__comm_op_name(op->kind);
    size_t es = ldt_dtype_size(op->dtype);
    MPI_Request req;
    ldt_status st = LDT_OK;
    switch (op->kind) {
    case LDT__OP_ALL_REDUCE: {
        int64_t *parts = malloc((size_t)n * sizeof *parts);
        char *mine;
        if (!parts) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        split(op->count, n, parts);
        mine = malloc((size_t)(parts[me] ? parts[me] : 1) * es);
        if (!mine) st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        if (st == LDT_OK) st = reduce_parts(c, op, parts, mine, what);
        if (st == LDT_OK) st = gather_v(c, mine, op->recv, parts, op->dtype, what);
        if (st == LDT_ERR_TIMEOUT) mine = NULL; /* MPI may still read it */
        free(mine);
        free(parts);
        return st;
    }
    case LDT__OP_REDUCE_SCATTER:
    case LDT__OP_REDUCE_SCATTER_V: {
        int64_t *counts = malloc((size_t)n * sizeof *counts);
        if (!counts) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        for (int r = 0; r < n; r++) counts[r] = op->counts ? op->counts[r] : op->count;
        st = reduce_parts(c, op, counts, op->recv, what);
        free(counts);
        return st;
    }
    case LDT__OP_ALL_GATHER:
    case LDT__OP_ALL_GATHER_V: {
        int64_t *counts = malloc((size_t)n * sizeof *counts);
        if (!counts) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        for (int r = 0; r < n; r++) counts[r] = op->counts ? op->counts[r] : op->count;
        st = gather_v(c, op->send, op->recv, counts, op->dtype, what);
        free(counts);
        return st;
    }
    case LDT__OP_ALL_TO_ALL:
    case LDT__OP_ALL_TO_ALL_V: {
        int *t = malloc((size_t)n * 4 * sizeof *t);
        int64_t *eq = malloc((size_t)n * 2 * sizeof *eq);
        if (!t || !eq) st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        if (st == LDT_OK && op->kind == LDT__OP_ALL_TO_ALL) {
            for (int r = 0; r < n; r++) eq[r] = op->count, eq[n + r] = (int64_t)r * op->count;
            st = int_table(eq, eq + n, n, t, t + n, what);
            if (st == LDT_OK) st = int_table(eq, eq + n, n, t + 2 * n, t + 3 * n, what);
        } else if (st == LDT_OK) {
            st = int_table(op->sendcounts, op->sdispls, n, t, t + n, what);
            if (st == LDT_OK) st = int_table(op->recvcounts, op->rdispls, n, t + 2 * n, t + 3 * n, what);
        }
        if (st == LDT_OK)
            st = mpi_err(MPI_Ialltoallv(op->send, t, t + n, type_of(op->dtype), op->recv, t + 2 * n,
                                        t + 3 * n, type_of(op->dtype), c->comm, &req), what);
        if (st == LDT_OK && (st = wait_req(c, &req, what)) == LDT_ERR_TIMEOUT) t = NULL; /* MPI may read it */
        free(t);
        free(eq);
        return st;
    }
    case LDT__OP_BROADCAST: {
        int cnt = 0;
        LDT_CHECK(to_int(op->count, &cnt, what));
        LDT_CHECK(mpi_err(MPI_Ibcast(op->recv, cnt, type_of(op->dtype), op->root, c->comm, &req), what));
        return wait_req(c, &req, what);
    }
    case LDT__OP_BARRIER:
        LDT_CHECK(mpi_err(MPI_Ibarrier(c->comm, &req), what));
        return wait_req(c, &req, what);
    default:
        return ldt__error(LDT_ERR_INTERNAL, "mpi: %s is not a collective", what);
    }
}

static ldt_status m_send_post(ldt_comm *base, const ldt__op *op, ldt__send_req **out) {
    mpi_comm *c = (mpi_comm *)base;
    ldt__send_req *r = malloc(sizeof *r);
    int cnt = 0;
    *out = NULL;
    if (!r) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi send: out of memory");
    ldt_status st = to_int(op->count, &cnt, "send");
    if (st == LDT_OK)
        st = mpi_err(MPI_Isend(op->send, cnt, type_of(op->dtype), op->root, 0, c->comm, &r->req), "send");
    if (st != LDT_OK) {
        free(r);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    r->c = c;
    *out = r;
    return LDT_OK;
}

static ldt_status m_send_wait(ldt__send_req *r) {
    ldt_status st = wait_req(r->c, &r->req, "send");
    if (st != LDT_OK) { /* nobody took it: withdraw, so the buffer is ours again */
        MPI_Cancel(&r->req);
        MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    }
    free(r);
    return st;
}

static void m_send_cancel(ldt__send_req *r) {
    int done = 0;
    MPI_Test(&r->req, &done, MPI_STATUS_IGNORE);
    if (!done) {
        MPI_Cancel(&r->req);
        MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    }
    free(r);
}

static ldt_status m_recv(ldt_comm *base, const ldt__op *op) {
    mpi_comm *c = (mpi_comm *)base;
    MPI_Request req;
    int cnt = 0;
    ldt_status st;
    LDT_CHECK(to_int(op->count, &cnt, "recv"));
    LDT_CHECK(mpi_err(MPI_Irecv(op->recv, cnt, type_of(op->dtype), op->root, 0, c->comm, &req), "recv"));
    st = wait_req(c, &req, "recv");
    if (st != LDT_OK) { /* a receive can be withdrawn: the communicator stays usable */
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return st;
}

static ldt_status m_group(ldt_comm *base, int n, const int *ranks, ldt_comm **out) {
    mpi_comm *c = (mpi_comm *)base, *g = calloc(1, sizeof *g);
    MPI_Group wg, sub;
    uint32_t tag = 2166136261u;
    int me = -1, rc;
    if (!g || !(g->ranks = malloc((size_t)n * sizeof *g->ranks))) {
        free(g);
        return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi comm_group: out of memory");
    }
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    for (int i = 0; i < n; i++) {
        tag = (tag ^ (uint32_t)ranks[i]) * 16777619u; /* the same on every member */
        if (ranks[i] == base->world_ranks[base->rank]) me = i;
    }
    MPI_Comm_group(c->w->comm, &wg);
    MPI_Group_incl(wg, n, ranks, &sub);
    rc = MPI_Comm_create_group(c->w->comm, sub, (int)(tag & 0x7fff), &g->comm);
    MPI_Group_free(&sub);
    MPI_Group_free(&wg);
    if (rc != MPI_SUCCESS) {
        free(g->ranks);
        free(g);
        return mpi_err(rc, "comm_group");
    }
    g->base.vt = &k_mpi_vt;
    g->base.rank = me;
    g->base.size = n;
    g->base.world_size = base->world_size;
    g->base.world_ranks = g->ranks;
    g->base.is_world = 0;
    g->w = c->w;
    *out = &g->base;
    return LDT_OK;
}

static void m_destroy(ldt_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    if (!c) return;
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->ranks);
    free(c);
}

static const ldt__comm_vtable k_mpi_vt = {
    .name = "mpi",
    .group = m_group,
    .destroy = m_destroy,
    .collective = m_collective,
    .send_post = m_send_post,
    .send_wait = m_send_wait,
    .send_cancel = m_send_cancel,
    .recv = m_recv,
};

static ldt_status make_world(MPI_Comm from, int initialised, const ldt_comm_options *opts,
                             ldt_comm **out) {
    mpi_world *w = calloc(1, sizeof *w);
    mpi_comm *c = calloc(1, sizeof *c);
    int n = 0, me = 0, rc;
    if (!w || !c) {
        free(w);
        free(c);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mpi world: out of memory");
    }
    if ((rc = MPI_Comm_dup(from, &w->comm)) != MPI_SUCCESS) {
        free(w);
        free(c);
        return ldt__trace(mpi_err(rc, "world"), __FILE__, __LINE__);
    }
    MPI_Comm_size(w->comm, &n);
    MPI_Comm_rank(w->comm, &me);
    if (n > LDT__COMM_MAX_RANKS || !(w->ranks = malloc((size_t)n * sizeof *w->ranks))) {
        MPI_Comm_free(&w->comm);
        free(w);
        free(c);
        LDT_FAIL(n > LDT__COMM_MAX_RANKS ? LDT_ERR_UNSUPPORTED : LDT_ERR_OUT_OF_MEMORY,
                 "mpi world: %d processes (at most %d)", n, LDT__COMM_MAX_RANKS);
    }
    for (int r = 0; r < n; r++) w->ranks[r] = r;
    w->initialised = initialised;
    w->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : LDT__COMM_DEFAULT_TIMEOUT_MS;
    c->base.vt = &k_mpi_vt;
    c->base.rank = me;
    c->base.size = n;
    c->base.world_size = n;
    c->base.world_ranks = w->ranks;
    c->base.is_world = 1;
    c->comm = w->comm;
    c->w = w;
    *out = &c->base;
    return LDT_OK;
}

ldt_status ldt_mpi_world(const ldt_comm_options *opts, ldt_comm **out) {
    int inited = 0, finalized = 0, provided = 0, mine = 0;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: out is NULL");
    *out = NULL;
    MPI_Finalized(&finalized);
    if (finalized) LDT_FAIL(LDT_ERR_INVALID_USAGE, "mpi world: MPI has been finalised already");
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) return ldt__trace(mpi_err(rc, "init"), __FILE__, __LINE__);
        mine = 1;
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_MULTIPLE)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "mpi world: MPI gives thread level %d, expected "
                 "MPI_THREAD_MULTIPLE (rank threads and the communication thread call at once)",
                 provided);
    return make_world(MPI_COMM_WORLD, mine, opts, out);
}

ldt_status ldt_mpi_world_from(const void *mpi_comm, const ldt_comm_options *opts, ldt_comm **out) {
    int inited = 0, provided = 0;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: out is NULL");
    *out = NULL;
    if (!mpi_comm) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: mpi_comm is NULL, expected an MPI_Comm *");
    MPI_Initialized(&inited);
    if (!inited) LDT_FAIL(LDT_ERR_INVALID_USAGE, "mpi world: MPI is not initialised; the caller owns "
                          "the communicator, so it initialises MPI");
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "mpi world: MPI was initialised at thread level %d, expected "
                 "MPI_THREAD_MULTIPLE", provided);
    if (*(const MPI_Comm *)mpi_comm == MPI_COMM_NULL)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: the communicator is MPI_COMM_NULL");
    return make_world(*(const MPI_Comm *)mpi_comm, 0, opts, out);
}

void ldt_mpi_world_destroy(ldt_comm *world) {
    mpi_comm *c = (mpi_comm *)world;
    int fin;
    if (!c || c->base.vt != &k_mpi_vt || !c->base.is_world) return;
    fin = c->w->initialised;
    MPI_Comm_free(&c->w->comm);
    free(c->w->ranks);
    free(c->w);
    free(c);
    if (fin) MPI_Finalize();
}

#endif
