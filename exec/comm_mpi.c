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
 * and its communication thread may call at once: MPI runs with MPI_THREAD_MULTIPLE.
 *
 * Failure (docs/communicator.md): a collective that times out or errs cannot be withdrawn,
 * so it aborts the world: every later call fails at once (teardown included, so a process
 * can exit), and a notice on a second communicator (ctl) tells the peers, whose pending and
 * later calls then fail with LDT_ERR_REMOTE instead of waiting out their own timeouts. A
 * monitor thread per world takes those notices and is the watchdog of the calls that block
 * inside MPI (group creation, finalize): past the timeout plus LDT_COMM_ABORT_GRACE_MS it
 * ends the job with MPI_Abort, the only way out of a call MPI does not bound. */
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
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
#include <pthread.h>
#include <stdatomic.h>

#define NOTE_BYTES 512      /* a failure notice: "rank R: why", NUL-terminated */
#define NOTE_TAG 1
#define MONITOR_PERIOD_MS 20
/* The reductions' scratch per communicator: a reduction whose receive space would need more
 * than SCRATCH_DEFAULT goes in pieces, each member's part of a piece at least PART_MIN_DEFAULT
 * (so many ranks do not make pieces of a few messages' latency); LDT_MPI_SCRATCH_BYTES (no less
 * than SCRATCH_MIN) sets the cap exactly, with no least part. Pieces keep the scratch in
 * cache: on 2 processes of a 2-core machine an all_reduce of 64 MiB took 45 ms in one piece
 * and 24 in pieces of 4 MiB (medians of six runs; docs/communicator.md). */
#define SCRATCH_DEFAULT ((int64_t)4 << 20)
#define PART_MIN_DEFAULT ((int64_t)64 << 10)
#define SCRATCH_MIN ((int64_t)4096)

/* A call that blocks inside MPI, with no request to poll: the watchdog's to time. */
typedef struct mpi_block {
    double t0;
    const char *what;
    struct mpi_block *next;
} mpi_block;

typedef struct mpi_world {
    MPI_Comm comm;     /* the world's (a duplicate of the caller's) */
    MPI_Comm ctl;      /* another duplicate that carries failure notices only */
    int initialised;   /* we called MPI_Init_thread: we finalise */
    int64_t timeout_ms;
    int64_t scratch_max; /* bytes: the least over the processes (agreed at creation) */
    int64_t part_min;    /* bytes of a member's part of a piece at least (likewise) */
    int *ranks;        /* 0..n-1 */
    int me, n;
    /* Failure: why is written once, before failed is set; neither changes after. */
    atomic_int failed;
    atomic_int refs;      /* the world and its groups: a group may outlive the world's handle */
    char why[NOTE_BYTES];
    char *note_out;       /* the notice this rank sent (MPI may read it until the peers take it) */
    char *note_in;        /* a peer's notice lands here */
    MPI_Request note_req; /* the receive of a notice; tested by the monitor only, under mu */
    int note_pending;     /* note_req is posted and not complete */
    int polling;          /* the monitor tests note_req */
    /* the monitor thread */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t monitor;
    int monitor_on, stop;
    mpi_block *blocks;
} mpi_world;

typedef struct mpi_comm {
    ldt_comm base;
    MPI_Comm comm;
    mpi_world *w;
    int *ranks; /* world ranks of the members (a group's own copy) */
    /* The reductions' receive space, kept from call to call (scratch_get): a fresh malloc of
     * tens of MiB is a fresh mapping whose every page faults on first touch, and an exchange
     * of 64 MiB into one ran at 0.86 GB/s on 2 processes of a 2-core machine where one into
     * touched memory ran at 2.8. It grows to the largest piece so far: at most the world's
     * scratch_max, or (n + 1) of its least parts where those hold more. */
    char *scratch;
    size_t scratch_cap;
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

/* ---------------------------------------------------------------------------------------
 * Failure: the world is aborted once, for a reason every later call repeats.
 */
static int world_failed(mpi_world *w) { return atomic_load_explicit(&w->failed, memory_order_acquire); }

static ldt_status aborted_error(mpi_world *w, const char *what) {
    return ldt__error(LDT_ERR_REMOTE, "mpi %s: the world was aborted: %s", what, w->why);
}

/* Marks the world failed (the first reason wins). tell: this rank's own failure, sent to
 * every peer without waiting (a stopped or dead peer never takes it: nothing waits on it);
 * a notice that came from a peer was sent to everyone already. */
static void world_fail(mpi_world *w, const char *why, int tell) {
    pthread_mutex_lock(&w->mu);
    if (world_failed(w)) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    if (tell)
        snprintf(w->why, sizeof w->why, "rank %d: %s", w->me, why);
    else
        snprintf(w->why, sizeof w->why, "%s", why);
    atomic_store_explicit(&w->failed, 1, memory_order_release);
    pthread_mutex_unlock(&w->mu);
    if (!tell || !w->note_out) return;
    memcpy(w->note_out, w->why, NOTE_BYTES);
    for (int r = 0; r < w->n; r++) {
        MPI_Request req;
        if (r != w->me && MPI_Isend(w->note_out, NOTE_BYTES, MPI_CHAR, r, NOTE_TAG, w->ctl, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

/* The world fails with this thread's last error (a collective that cannot be withdrawn). */
static ldt_status fail_with(mpi_world *w, ldt_status st) {
    world_fail(w, ldt_last_error(), 1);
    return st;
}

static void block_begin(mpi_world *w, mpi_block *b, const char *what) {
    b->t0 = now_ms();
    b->what = what;
    pthread_mutex_lock(&w->mu);
    b->next = w->blocks;
    w->blocks = b;
    pthread_mutex_unlock(&w->mu);
}

static void block_end(mpi_world *w, mpi_block *b) {
    pthread_mutex_lock(&w->mu);
    for (mpi_block **p = &w->blocks; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    pthread_mutex_unlock(&w->mu);
}

/* The monitor: takes a peer's notice, and ends the job when a call has blocked inside MPI
 * past the timeout and the grace (never without a timeout). */
static void *monitor_main(void *arg) {
    mpi_world *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec dl;
        double now;
        clock_gettime(CLOCK_MONOTONIC, &dl);
        dl.tv_nsec += MONITOR_PERIOD_MS * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &dl);
        if (w->stop) break;
        if (w->polling && w->note_pending) {
            int done = 0;
            if (MPI_Test(&w->note_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
            if (done) {
                w->note_pending = 0;
                w->note_in[NOTE_BYTES - 1] = '\0';
                pthread_mutex_unlock(&w->mu);
                world_fail(w, w->note_in, 0);
                pthread_mutex_lock(&w->mu);
            }
        }
        if (w->timeout_ms >= LDT__COMM_FOREVER_MS) continue;
        now = now_ms();
        for (mpi_block *b = w->blocks; b; b = b->next) {
            if (now - b->t0 <= (double)w->timeout_ms + LDT_COMM_ABORT_GRACE_MS) continue;
            fprintf(stderr,
                    "ldt: mpi rank %d: %s has been blocked inside MPI for %.1f s, past the communication "
                    "timeout (%lld ms) and a %d ms grace: a peer stopped or died, and MPI cannot bound the "
                    "call, so the job ends (MPI_Abort). LDT_COMM_TIMEOUT_MS (or --comm-timeout-ms) sets "
                    "the timeout; 0 waits forever.\n",
                    w->me, b->what, (now - b->t0) / 1e3, (long long)w->timeout_ms, LDT_COMM_ABORT_GRACE_MS);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1); /* the world's own may be freed by now */
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int monitor_start(mpi_world *w) {
    pthread_condattr_t attr;
    int ok = pthread_condattr_init(&attr) == 0;
    ok = ok && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&w->cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
    if (!ok) return -1;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        pthread_cond_destroy(&w->cv);
        return -1;
    }
    if (pthread_create(&w->monitor, NULL, monitor_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return -1;
    }
    w->monitor_on = 1;
    return 0;
}

static void monitor_stop(mpi_world *w) {
    if (!w->monitor_on) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->monitor, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->monitor_on = 0;
}

/* How long a wait polls MPI (yielding the core between polls) before it sleeps between them:
 * long enough for the largest transfer (a collective of tens of MiB runs for tens of ms and
 * moves only while polled; wait_req), short against a peer that is missing. */
#define WAIT_YIELD_MS 1000.0

/* Waits for req, polling, until the communicator's timeout or the world's abort. On any
 * failure the request is left to MPI (collectives cannot be cancelled): the buffers MPI may
 * still touch are leaked rather than freed. A collective's failure aborts the world (its
 * peers are then told); a send's or a receive's does not: they are withdrawn. */
static ldt_status wait_req(mpi_comm *c, MPI_Request *req, const char *what, int collective) {
    mpi_world *w = c->w;
    double t0 = now_ms();
    int done = 0, spins = 0;
    for (;;) {
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return collective ? fail_with(w, mpi_err(rc, what)) : mpi_err(rc, what);
        if (done) return LDT_OK;
        if (world_failed(w)) return aborted_error(w, what);
        if (now_ms() - t0 > (double)c->base.timeout_ms) {
            ldt_status st = ldt__error(
                LDT_ERR_TIMEOUT,
                "mpi %s: the group (%d ranks) did not complete within %lld ms: a peer is missing, "
                "stopped, dead or calling another collective (ranks that are only slow need a longer "
                "timeout: LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)",
                what, c->base.size, (long long)c->base.timeout_ms);
            return collective ? fail_with(w, st) : st;
        }
        /* MPI moves a nonblocking collective only inside MPI_Test: a sleep between polls
         * stalls every step of its protocol. A burst of polls, then polls with the core
         * yielded between them (to another process when the node has more than cores) for
         * WAIT_YIELD_MS, and only then a short sleep between polls: a wait that long is a
         * late peer. Sleeping after the burst made the collectives of 16 to 256 KiB on 2
         * processes take about 300 us in some calibrations and 15 to 50 in others (each sleep
         * 60 us or more, the kernel's timer slack), and the link's calibrated bandwidth move
         * 1.6x between two consecutive calibrations; with a yield of 2 ms, a broadcast of 64
         * MiB took 49 to 59 ms (one of 16 MiB 3.4 to 6.3), stalled after each fragment from its
         * third millisecond on, where MPI_Bcast alone took 17 and polled throughout 9. */
        if (++spins > 64) {
            if (now_ms() - t0 < WAIT_YIELD_MS) {
                sched_yield();
            } else {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
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

/* At least `bytes` of the communicator's scratch (grown, never shrunk; freed with it), or
 * NULL when out of memory. */
static char *scratch_get(mpi_comm *c, size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > c->scratch_cap) {
        free(c->scratch);
        c->scratch_cap = 0;
        if (!(c->scratch = malloc(bytes))) return NULL;
        c->scratch_cap = bytes;
    }
    return c->scratch;
}

/* A collective that failed may leave MPI writing into the scratch: it is left to MPI (leaked
 * with the aborted world), and a later call gets a new one. */
static void scratch_abandon(mpi_comm *c) {
    c->scratch = NULL;
    c->scratch_cap = 0;
}

/* The reduction: per member r, `counts[r]` elements at send + displs[r] (NULL: the counts
 * back to back) go to member r; this rank reduces the n pieces it receives (its own part,
 * counts[me]) into out; tmp holds n * counts[me] elements (the communicator's scratch). */
static ldt_status reduce_parts(mpi_comm *c, const ldt__op *op, const void *send, const int64_t *counts,
                               const int64_t *displs, char *tmp, void *out, const char *what) {
    int n = c->base.size, me = c->base.rank;
    size_t es = ldt_dtype_size(op->dtype);
    int64_t mine = counts[me];
    int *sc = malloc((size_t)n * 4 * sizeof *sc);
    const void **srcs = malloc((size_t)n * sizeof *srcs);
    MPI_Request req;
    ldt_status st = LDT_OK;
    if (!sc || !srcs) {
        st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        goto done;
    }
    int *sd = sc + n, *rc = sc + 2 * n, *rd = sc + 3 * n;
    if ((st = int_table(counts, displs, n, sc, sd, what)) != LDT_OK) goto done;
    for (int r = 0; r < n; r++) {
        rc[r] = sc[me];
        rd[r] = r * sc[me];
        if ((int64_t)r * mine > INT_MAX) {
            st = to_int((int64_t)r * mine, &rd[r], what);
            goto done;
        }
    }
    st = mpi_err(MPI_Ialltoallv(send, sc, sd, type_of(op->dtype), tmp, rc, rd, type_of(op->dtype),
                                c->comm, &req), what);
    if (st != LDT_OK) st = fail_with(c->w, st);
    else if ((st = wait_req(c, &req, what, 1)) != LDT_OK) {
        sc = NULL; /* MPI may still touch it and the scratch: leaked with the aborted world */
        scratch_abandon(c);
    }
    if (st != LDT_OK) goto done;
    for (int r = 0; r < n; r++) srcs[r] = tmp + (size_t)r * (size_t)mine * es;
    if (mine) ldt__reduce_at(out, srcs, n, 0, mine, op->dtype, op->reduce, n);
done:
    free(sc);
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
        if (st != LDT_OK) st = fail_with(c->w, st);
        else if ((st = wait_req(c, &req, what, 1)) != LDT_OK) ic = NULL; /* MPI may read it */
    }
    free(ic);
    return st;
}

/* Elements a member's part of one piece of a reduction may hold: `slots` such parts of es
 * bytes fill at most the world's scratch_max, unless that makes a part smaller than its
 * part_min (and at least one element). */
static int64_t piece_part(const mpi_comm *c, int slots, size_t es) {
    int64_t q = c->w->scratch_max / ((int64_t)slots * (int64_t)es), least = c->w->part_min / (int64_t)es;
    if (q < least) q = least;
    return q < 1 ? 1 : q;
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
    if (world_failed(c->w)) return aborted_error(c->w, what);
    switch (op->kind) {
    case LDT__OP_ALL_REDUCE: {
        /* in pieces of q elements a member at most, so that the scratch (n + 1 parts) stays
         * within the world's scratch_max; one piece (none of 0 elements: still a meeting) */
        int64_t *parts = malloc((size_t)n * sizeof *parts), o = 0, q = piece_part(c, n + 1, es);
        char *tmp, *mine;
        if (!parts) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        do {
            int64_t cnt = op->count - o < q * n ? op->count - o : q * n;
            split(cnt, n, parts);
            /* the n pieces this rank reduces, then its reduced part (which gather_v sends) */
            tmp = scratch_get(c, (size_t)(n + 1) * (size_t)parts[me] * es);
            if (!tmp) {
                st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
                break;
            }
            mine = tmp + (size_t)n * (size_t)parts[me] * es;
            st = reduce_parts(c, op, (const char *)op->send + (size_t)o * es, parts, NULL, tmp, mine, what);
            if (st == LDT_OK &&
                (st = gather_v(c, mine, (char *)op->recv + (size_t)o * es, parts, op->dtype, what)) != LDT_OK &&
                world_failed(c->w))
                scratch_abandon(c); /* MPI may still read it */
            o += cnt;
        } while (st == LDT_OK && o < op->count);
        free(parts);
        return st;
    }
    case LDT__OP_REDUCE_SCATTER:
    case LDT__OP_REDUCE_SCATTER_V: {
        /* round j reduces elements [j q, (j + 1) q) of every member's part */
        int64_t *counts = malloc((size_t)n * 3 * sizeof *counts), most = 0, j = 0, q = piece_part(c, n, es);
        if (!counts) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
        int64_t *pc = counts + n, *pd = counts + 2 * n, displ = 0;
        for (int r = 0; r < n; r++) {
            counts[r] = op->counts ? op->counts[r] : op->count;
            if (counts[r] > most) most = counts[r];
        }
        do {
            char *tmp;
            displ = 0;
            for (int r = 0; r < n; r++) {
                int64_t left = counts[r] - j;
                pc[r] = left <= 0 ? 0 : left < q ? left : q;
                pd[r] = displ + (left > 0 ? j : 0);
                displ += counts[r];
            }
            if (!(tmp = scratch_get(c, (size_t)n * (size_t)pc[me] * es))) {
                st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi %s: out of memory", what);
                break;
            }
            st = reduce_parts(c, op, op->send, pc, pd, tmp, (char *)op->recv + (size_t)j * es, what);
            j += q;
        } while (st == LDT_OK && j < most);
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
        if (st == LDT_OK) {
            st = mpi_err(MPI_Ialltoallv(op->send, t, t + n, type_of(op->dtype), op->recv, t + 2 * n,
                                        t + 3 * n, type_of(op->dtype), c->comm, &req), what);
            if (st != LDT_OK) st = fail_with(c->w, st);
            else if ((st = wait_req(c, &req, what, 1)) != LDT_OK) t = NULL; /* MPI may read it */
        }
        free(t);
        free(eq);
        return st;
    }
    case LDT__OP_BROADCAST: {
        int cnt = 0;
        LDT_CHECK(to_int(op->count, &cnt, what));
        if ((st = mpi_err(MPI_Ibcast(op->recv, cnt, type_of(op->dtype), op->root, c->comm, &req), what)) != LDT_OK)
            return fail_with(c->w, st);
        return wait_req(c, &req, what, 1);
    }
    case LDT__OP_BARRIER:
        if ((st = mpi_err(MPI_Ibarrier(c->comm, &req), what)) != LDT_OK) return fail_with(c->w, st);
        return wait_req(c, &req, what, 1);
    default:
        return ldt__error(LDT_ERR_INTERNAL, "mpi: %s is not a collective", what);
    }
}

static ldt_status m_send_post(ldt_comm *base, const ldt__op *op, ldt__send_req **out) {
    mpi_comm *c = (mpi_comm *)base;
    ldt__send_req *r;
    int cnt = 0;
    *out = NULL;
    if (world_failed(c->w)) return aborted_error(c->w, "send");
    if (!(r = malloc(sizeof *r))) return ldt__error(LDT_ERR_OUT_OF_MEMORY, "mpi send: out of memory");
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

/* Withdraws a pending request (a receive's cancel is local; a send's may wait for a peer,
 * hence the watchdog). On an aborted world a send is left to MPI: it only reads the buffer. */
static void withdraw(mpi_world *w, MPI_Request *req, int is_send) {
    mpi_block b;
    if (is_send && world_failed(w)) return;
    block_begin(w, &b, is_send ? "withdrawing a send" : "withdrawing a receive");
    MPI_Cancel(req);
    MPI_Wait(req, MPI_STATUS_IGNORE);
    block_end(w, &b);
}

static ldt_status m_send_wait(ldt__send_req *r) {
    ldt_status st = wait_req(r->c, &r->req, "send", 0);
    if (st != LDT_OK) withdraw(r->c->w, &r->req, 1); /* nobody took it: the buffer is ours again */
    free(r);
    return st;
}

static void m_send_cancel(ldt__send_req *r) {
    int done = 0;
    MPI_Test(&r->req, &done, MPI_STATUS_IGNORE);
    if (!done) withdraw(r->c->w, &r->req, 1);
    free(r);
}

static ldt_status m_recv(ldt_comm *base, const ldt__op *op) {
    mpi_comm *c = (mpi_comm *)base;
    MPI_Request req;
    int cnt = 0;
    ldt_status st;
    if (world_failed(c->w)) return aborted_error(c->w, "recv");
    LDT_CHECK(to_int(op->count, &cnt, "recv"));
    LDT_CHECK(mpi_err(MPI_Irecv(op->recv, cnt, type_of(op->dtype), op->root, 0, c->comm, &req), "recv"));
    st = wait_req(c, &req, "recv", 0);
    if (st != LDT_OK) withdraw(c->w, &req, 0); /* withdrawn: the communicator stays usable */
    return st;
}

static ldt_status m_group(ldt_comm *base, int n, const int *ranks, ldt_comm **out) {
    mpi_comm *c = (mpi_comm *)base, *g;
    MPI_Group wg, sub;
    mpi_block b;
    uint32_t tag = 2166136261u;
    int me = -1, rc;
    if (world_failed(c->w)) return aborted_error(c->w, "comm_group");
    g = calloc(1, sizeof *g);
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
    /* blocks until every member calls: no request to poll, so the watchdog times it */
    block_begin(c->w, &b, "comm_group (MPI_Comm_create_group)");
    rc = MPI_Comm_create_group(c->w->comm, sub, (int)(tag & 0x7fff), &g->comm);
    block_end(c->w, &b);
    MPI_Group_free(&sub);
    MPI_Group_free(&wg);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        free(g->ranks);
        free(g);
        return fail_with(c->w, mpi_err(rc, "comm_group"));
    }
    g->base.vt = &k_mpi_vt;
    g->base.rank = me;
    g->base.size = n;
    g->base.world_size = base->world_size;
    g->base.world_ranks = g->ranks;
    g->base.is_world = 0;
    g->base.timeout_ms = c->w->timeout_ms;
    g->w = c->w;
    atomic_fetch_add(&c->w->refs, 1);
    *out = &g->base;
    return LDT_OK;
}

static void world_release(mpi_world *w);

static void m_destroy(ldt_comm *base) {
    mpi_comm *c = (mpi_comm *)base;
    if (!c) return;
    /* on an aborted world nothing is freed through MPI: the communicator is abandoned */
    if (c->comm != MPI_COMM_NULL && !world_failed(c->w)) MPI_Comm_free(&c->comm);
    world_release(c->w);
    free(c->scratch);
    free(c->ranks);
    free(c);
}

static void m_abort(ldt_comm *base, const char *why) { world_fail(((mpi_comm *)base)->w, why, 1); }

static const ldt__comm_vtable k_mpi_vt = {
    .name = "mpi",
    .group = m_group,
    .destroy = m_destroy,
    .collective = m_collective,
    .send_post = m_send_post,
    .send_wait = m_send_wait,
    .send_cancel = m_send_cancel,
    .recv = m_recv,
    .abort = m_abort,
};

static void world_free(mpi_world *w) {
    if (!w) return;
    monitor_stop(w);
    free(w->note_in);
    free(w->note_out);
    free(w->ranks);
    free(w);
}

/* The last of the world's handle and its groups frees it (the monitor stops with the handle). */
static void world_release(mpi_world *w) {
    if (atomic_fetch_sub(&w->refs, 1) == 1) world_free(w);
}

/* The scratch cap and a part's least: LDT_MPI_SCRATCH_BYTES (bytes, at least SCRATCH_MIN) and
 * none, else the defaults. */
static ldt_status scratch_cap_env(int64_t *out) {
    const char *env = getenv("LDT_MPI_SCRATCH_BYTES");
    char *end = NULL;
    long long v;
    out[0] = SCRATCH_DEFAULT;
    out[1] = PART_MIN_DEFAULT;
    if (!env || !*env) return LDT_OK;
    v = strtoll(env, &end, 10);
    if (*end || v < SCRATCH_MIN)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: LDT_MPI_SCRATCH_BYTES is '%.40s', expected a byte "
                 "count of at least %lld (the reductions' scratch per communicator; default %lld)",
                 env, (long long)SCRATCH_MIN, (long long)SCRATCH_DEFAULT);
    out[0] = v;
    out[1] = 0;
    return LDT_OK;
}

static ldt_status make_world(MPI_Comm from, int initialised, int64_t timeout_ms, ldt_comm **out) {
    mpi_world *w;
    mpi_comm *c;
    mpi_block b;
    int n = 0, me = 0, rc;
    int64_t cap[2];
    LDT_CHECK(scratch_cap_env(cap));
    w = calloc(1, sizeof *w);
    c = calloc(1, sizeof *c);
    if (!w || !c || !(w->note_in = calloc(1, NOTE_BYTES)) || !(w->note_out = calloc(1, NOTE_BYTES))) {
        if (w) free(w->note_in);
        free(w);
        free(c);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mpi world: out of memory");
    }
    atomic_init(&w->failed, 0);
    atomic_init(&w->refs, 1);
    w->comm = w->ctl = MPI_COMM_NULL;
    w->timeout_ms = timeout_ms;
    MPI_Comm_rank(from, &w->me); /* before the monitor, which may quote it */
    if (monitor_start(w) != 0) {
        world_free(w);
        free(c);
        LDT_FAIL(LDT_ERR_SYSTEM, "mpi world: cannot start the monitor thread");
    }
    /* the duplicates are collective over the caller's communicator: timed by the watchdog */
    block_begin(w, &b, "world (MPI_Comm_dup)");
    rc = MPI_Comm_dup(from, &w->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(from, &w->ctl);
    /* every process pieces a reduction alike: the least cap */
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, cap, 2, MPI_INT64_T, MPI_MIN, w->comm);
    block_end(w, &b);
    w->scratch_max = cap[0];
    w->part_min = cap[1];
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(w->ctl, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Irecv(w->note_in, NOTE_BYTES, MPI_CHAR, MPI_ANY_SOURCE, NOTE_TAG, w->ctl, &w->note_req);
    if (rc != MPI_SUCCESS) {
        ldt_status st = mpi_err(rc, "world");
        if (w->ctl != MPI_COMM_NULL) MPI_Comm_free(&w->ctl);
        if (w->comm != MPI_COMM_NULL) MPI_Comm_free(&w->comm);
        world_free(w);
        free(c);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    pthread_mutex_lock(&w->mu);
    w->note_pending = w->polling = 1;
    pthread_mutex_unlock(&w->mu);
    MPI_Comm_size(w->comm, &n);
    MPI_Comm_rank(w->comm, &me);
    w->n = n;
    if (n > LDT__COMM_MAX_RANKS || !(w->ranks = malloc((size_t)n * sizeof *w->ranks))) {
        world_fail(w, "mpi world: not created", 0); /* the notice receive stays MPI's */
        MPI_Comm_free(&w->comm);
        w->note_in = NULL;
        world_free(w);
        free(c);
        LDT_FAIL(n > LDT__COMM_MAX_RANKS ? LDT_ERR_UNSUPPORTED : LDT_ERR_OUT_OF_MEMORY,
                 "mpi world: %d processes (at most %d)", n, LDT__COMM_MAX_RANKS);
    }
    for (int r = 0; r < n; r++) w->ranks[r] = r;
    w->initialised = initialised;
    c->base.vt = &k_mpi_vt;
    c->base.rank = me;
    c->base.size = n;
    c->base.world_size = n;
    c->base.world_ranks = w->ranks;
    c->base.is_world = 1;
    c->base.timeout_ms = timeout_ms;
    c->comm = w->comm;
    c->w = w;
    *out = &c->base;
    return LDT_OK;
}

ldt_status ldt_mpi_world(const ldt_comm_options *opts, ldt_comm **out) {
    int inited = 0, finalized = 0, provided = 0, mine = 0;
    int64_t timeout;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: out is NULL");
    *out = NULL;
    LDT_CHECK(ldt__comm_timeout(opts, "mpi world", &timeout));
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
    return make_world(MPI_COMM_WORLD, mine, timeout, out);
}

ldt_status ldt_mpi_world_from(const void *mpi_comm, const ldt_comm_options *opts, ldt_comm **out) {
    int inited = 0, provided = 0;
    int64_t timeout;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: out is NULL");
    *out = NULL;
    if (!mpi_comm) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: mpi_comm is NULL, expected an MPI_Comm *");
    LDT_CHECK(ldt__comm_timeout(opts, "mpi world", &timeout));
    MPI_Initialized(&inited);
    if (!inited) LDT_FAIL(LDT_ERR_INVALID_USAGE, "mpi world: MPI is not initialised; the caller owns "
                          "the communicator, so it initialises MPI");
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "mpi world: MPI was initialised at thread level %d, expected "
                 "MPI_THREAD_MULTIPLE", provided);
    if (*(const MPI_Comm *)mpi_comm == MPI_COMM_NULL)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mpi world: the communicator is MPI_COMM_NULL");
    return make_world(*(const MPI_Comm *)mpi_comm, 0, timeout, out);
}

void ldt_mpi_world_destroy(ldt_comm *world) {
    mpi_comm *c = (mpi_comm *)world;
    mpi_world *w;
    mpi_block b;
    int pending;
    if (!c || c->base.vt != &k_mpi_vt || !c->base.is_world) return;
    w = c->w;
    pthread_mutex_lock(&w->mu);
    w->polling = 0; /* the monitor leaves note_req alone from here on */
    pending = w->note_pending;
    pthread_mutex_unlock(&w->mu);
    if (world_failed(w)) {
        /* Nothing more over MPI: a peer may be stopped, and MPI_Comm_free or MPI_Finalize
         * would wait for it. MPI may still write the notice buffer and read the one sent. */
        w->note_in = w->note_out = NULL;
        monitor_stop(w);
        world_release(w);
        free(c);
        return;
    }
    block_begin(w, &b, "destroying the world (MPI_Comm_free, MPI_Finalize)");
    if (pending) {
        MPI_Cancel(&w->note_req);
        MPI_Wait(&w->note_req, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&w->ctl);
    MPI_Comm_free(&w->comm);
    if (w->initialised) MPI_Finalize(); /* still timed: a peer that dies now would hold it */
    block_end(w, &b);
    monitor_stop(w);
    world_release(w);
    free(c);
}

#endif
