/* Threaded communicator backend: N ranks as threads of one process sharing memory. Every
 * collective is zero-copy: ranks publish their op descriptor (buffers included) in their slot
 * of the group's state, meet at a barrier, check that all slots agree, then read and write
 * each other's buffers directly, and meet again so nobody leaves while a peer still reads
 * its buffers. Reductions run in rank order, so results are bitwise reproducible. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "core/copy.h"
#include "core/error.h"
#include "core/half.h"
#include "exec/comm.h"
#include "exec/reduce.h"

#ifdef LDT_HAVE_OPENBLAS
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
/* OpenBLAS's pthread builds stop their server threads with this (restarted on demand);
 * serial and other builds lack it. */
int blas_thread_shutdown_(void) __attribute__((weak));
#endif

/* Rank threads already use every core: OpenBLAS threads inside each would oversubscribe, so
 * OpenBLAS runs on the calling thread. Its server threads are stopped as well: an idle one
 * spins (sched_yield) for a while after OpenBLAS starts and after each threaded call, which
 * doubled a short replay's CPU time with nothing to do. Only when the count is not 1 already:
 * setting it again would restart the server threads, and their spin. */
static void blas_single_thread(void) {
#ifdef LDT_HAVE_OPENBLAS
    if (openblas_get_num_threads() == 1) return;
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
#endif
}

/* Elements per reduction block: the accumulator lives on the stack (at most 8 KiB) and in
 * L1 while the peers' blocks stream through it. */
#define BLK 1024
/* Bytes per copy block in all_gather: a rank reads its block once, then writes it into
 * every peer's buffer from cache. */
#define COPY_BLK (64 * 1024)
/* From this tensor size on, results are written with non-temporal stores: the destination
 * is far larger than the caches, so reading it in before overwriting (write-allocate) only
 * costs bandwidth. */
#define STREAM_MIN_BYTES ((int64_t)8 << 20)

typedef struct tgroup tgroup;
typedef struct tcomm tcomm;

/* Shared state of one group of ranks (the world is one too). Barrier fields, poison and
 * the slots' publication are under mu; registry fields are under the world's mu. */
struct tgroup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    int *ranks;           /* world ranks, group order */
    int arrived;          /* members in the current barrier generation */
    _Atomic uint64_t gen; /* written under mu; also read without it by spinning waiters */
    uint64_t *arrived_at; /* member i is in generation arrived_at[i] - 1 (0: not arrived) */
    int poisoned;         /* a barrier timed out: members are out of step for good */
    char poison[768];
    ldt__op *slots;       /* each member's current op, read by all between barriers */
    /* registry */
    tgroup *next;
    int handles;          /* live communicators on it */
    int joined;           /* members that asked for it so far */
    unsigned char *has_joined;
};

/* A posted send, waiting in the receiver's mailbox. */
typedef enum { SEND_POSTED, SEND_CLAIMED, SEND_DONE, SEND_FAILED } send_state;

struct ldt__send_req {
    struct ldt_threads *w;
    tgroup *g;
    int src, dst;         /* group ranks */
    const void *buf;
    int64_t count;
    ldt_dtype dtype;
    send_state state;     /* under the world's mu */
    char err[512];        /* SEND_FAILED: the receiver's message */
    ldt__send_req *next;  /* in the destination's mailbox */
};

struct tcomm {
    struct ldt_comm base;
    struct ldt_threads *w;
    tgroup *g;
    const void **srcs; /* g->n entries: the members' send buffers, for exec/reduce.c */
};

/* What a rank's thread waits on in send and recv: a change to its mailbox (a send posted to
 * it), to a send it posted (claimed, done, failed), or the world's abort. Each rank its own,
 * so a change wakes the one thread it concerns, not every waiter of the world. */
struct mailbox {
    pthread_cond_t cv;
    _Atomic uint64_t gen; /* bumped (under the world's mu) with every broadcast of cv: polled */
};

/* What a world rank is doing, for the message of a peer that gave up waiting for it: set by
 * the rank's threads as they enter and leave calls and as its function returns, read without
 * a lock (a snapshot: it may be a moment old). */
typedef struct rank_doing {
    _Atomic(const char *) op;   /* the call it is in; NULL: none */
    _Atomic(const char *) last; /* the last call it left; NULL: none yet this run */
    _Atomic(const void *) group; /* the group of op, else of last (compared, never read) */
    _Atomic int group_n;        /* that group's size */
    _Atomic int64_t since;      /* mono_ns: when it entered op, left last, or returned */
    _Atomic int returned;       /* its function returned this run, with status ret */
    _Atomic int ret;
} rank_doing;

/* The world: the ranks' shared state, reusable across runs. */
struct ldt_threads {
    int n;
    int64_t timeout_ms;
    pthread_mutex_t mu;      /* registry, mailboxes, failure info, running */
    struct mailbox *box;     /* per world rank: where its thread waits in send and recv */
    atomic_int aborted;      /* a rank failed: failed_* are set before it and never after */
    atomic_int broken;       /* a barrier timed out: the world cannot be run again */
    int failed_rank;
    char failed_msg[1024];
    int running;
    tgroup *groups;          /* registry, the world group first */
    tgroup *world_group;
    ldt__send_req **mail;    /* per destination world rank: FIFO of posted sends */
    tcomm *world_comms;      /* one per rank */
    /* the persistent pool: ranks 1..n-1 on threads made at the first run and kept until
     * destroy; rank 0 runs on the caller's thread. A run wakes them, it does not create them */
    struct rank_run *runs;
    pthread_t *pool;
    int pool_n;              /* workers started */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;  /* a job was posted, or stop */
    pthread_cond_t done_cv;  /* a worker finished its part */
    _Atomic uint64_t job;    /* written under pool_mu; read without it by polling workers */
    _Atomic int remaining;   /* likewise, for the caller waiting on the workers */
    int stop;
    /* per world rank: nanoseconds blocked in collectives' barriers waiting for peers (the
     * rank's thread and its communication thread add to it, hence atomic) */
    _Atomic int64_t *wait_ns;
    rank_doing *doing; /* per world rank */
};

static const ldt__comm_vtable k_threads_vt;

/* ---------------------------------------------------------------------------------------
 * Time and condition variables on the monotonic clock (wall-clock jumps must not fire or
 * stretch timeouts).
 */
static struct timespec deadline_after(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The clock of what a rank is doing (rank_doing.since): coarse (a few ms), a read without a
 * system call on every kernel, so each call pays next to nothing for messages that count
 * tenths of seconds. */
static int64_t coarse_ns(void) {
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#endif
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A member that arrived at t0 (mono_ns) and waited until now for its peers. */
static void add_wait(tcomm *c, int64_t t0) {
    atomic_fetch_add_explicit(&c->w->wait_ns[c->g->ranks[c->base.rank]], mono_ns() - t0,
                              memory_order_relaxed);
}

static void doing_enter(struct ldt_threads *w, const tgroup *g, int member, const char *op) {
    rank_doing *d = &w->doing[g->ranks[member]];
    atomic_store_explicit(&d->group, (const void *)g, memory_order_relaxed);
    atomic_store_explicit(&d->group_n, g->n, memory_order_relaxed);
    atomic_store_explicit(&d->since, coarse_ns(), memory_order_relaxed);
    atomic_store_explicit(&d->op, op, memory_order_release);
}

static ldt_status doing_leave(struct ldt_threads *w, const tgroup *g, int member, ldt_status st) {
    rank_doing *d = &w->doing[g->ranks[member]];
    atomic_store_explicit(&d->last, atomic_load_explicit(&d->op, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&d->since, coarse_ns(), memory_order_relaxed);
    atomic_store_explicit(&d->op, (const char *)NULL, memory_order_release);
    return st;
}

/* Where world rank r is, seen from a member of group mine: "it waits in broadcast on this
 * group, for 1.2 s", "its function returned ok 3.0 s ago", "it is in no call of this world,
 * for 60.0 s since its all_reduce on the world". */
static void doing_text(struct ldt_threads *w, int r, const tgroup *mine, char *buf, size_t cap) {
    const rank_doing *d = &w->doing[r];
    const char *op = atomic_load_explicit(&d->op, memory_order_acquire);
    const char *last = atomic_load_explicit(&d->last, memory_order_relaxed);
    const void *g = atomic_load_explicit(&d->group, memory_order_relaxed);
    int gn = atomic_load_explicit(&d->group_n, memory_order_relaxed);
    double ago = 1e-9 * (double)(coarse_ns() - atomic_load_explicit(&d->since, memory_order_relaxed));
    char where[64];
    if (g == (const void *)w->world_group) snprintf(where, sizeof where, "the world");
    else if (g == (const void *)mine) snprintf(where, sizeof where, "this group");
    else snprintf(where, sizeof where, "another group of %d", gn);
    if (atomic_load_explicit(&d->returned, memory_order_acquire))
        snprintf(buf, cap, "its function returned %s %.1f s ago",
                 ldt_status_name((ldt_status)atomic_load_explicit(&d->ret, memory_order_relaxed)), ago);
    else if (op)
        snprintf(buf, cap, "it waits in %s on %s, for %.1f s", op, where, ago);
    else if (last)
        snprintf(buf, cap, "it is in no call of this world, for %.1f s since its %s on %s", ago, last,
                 where);
    else
        snprintf(buf, cap, "it has made no call of this world yet, for %.1f s", ago);
}

int64_t ldt__threads_wait_ns(const ldt_threads *w, int rank) {
    if (!w || rank < 0 || rank >= w->n || !w->wait_ns) return 0;
    return atomic_load_explicit(&w->wait_ns[rank], memory_order_relaxed);
}

static int cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------
 * Failure: the world aborts when a rank's function fails; everyone waiting wakes up.
 */
static ldt_status remote_error(struct ldt_threads *w, const char *op) {
    if (w->failed_rank < 0)
        return ldt__error(LDT_ERR_REMOTE, "%s: the world was aborted: %s", op, w->failed_msg);
    return ldt__error(LDT_ERR_REMOTE, "%s: rank %d failed: %s", op, w->failed_rank,
                      w->failed_msg);
}

static void mail_notify_all(struct ldt_threads *w);

static int is_aborted(struct ldt_threads *w) {
    return atomic_load_explicit(&w->aborted, memory_order_acquire);
}

static void world_abort(struct ldt_threads *w, int rank, const char *msg) {
    pthread_mutex_lock(&w->mu);
    if (!atomic_load_explicit(&w->aborted, memory_order_relaxed)) {
        w->failed_rank = rank;
        snprintf(w->failed_msg, sizeof w->failed_msg, "%s", msg);
        atomic_store_explicit(&w->aborted, 1, memory_order_release);
    }
    mail_notify_all(w);
    /* Lock order is world then group; barrier waiters hold only their group's mu, and
     * check `aborted` under it before waiting, so no wake-up is lost. */
    for (tgroup *g = w->groups; g; g = g->next) {
        pthread_mutex_lock(&g->mu);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&w->mu);
}

/* ---------------------------------------------------------------------------------------
 * Groups and their registry
 */
static void group_free(tgroup *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->ranks);
    free(g->arrived_at);
    free(g->slots);
    free(g->has_joined);
    free(g);
}

static tgroup *group_new(int n, const int *ranks) {
    tgroup *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n = n;
    g->ranks = malloc((size_t)n * sizeof *g->ranks);
    g->arrived_at = calloc((size_t)n, sizeof *g->arrived_at);
    g->slots = calloc((size_t)n, sizeof *g->slots);
    g->has_joined = calloc((size_t)n, 1);
    int ok_mu = pthread_mutex_init(&g->mu, NULL) == 0;
    int ok_cv = cond_init_monotonic(&g->cv) == 0;
    if (!g->ranks || !g->arrived_at || !g->slots || !g->has_joined || !ok_mu || !ok_cv) {
        free(g->ranks);
        free(g->arrived_at);
        free(g->slots);
        free(g->has_joined);
        if (ok_mu) pthread_mutex_destroy(&g->mu);
        if (ok_cv) pthread_cond_destroy(&g->cv);
        free(g);
        return NULL;
    }
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    return g;
}

/* Group rank and world rank list, for messages: "rank 2" or "rank 2 (world 5)". */
static void fmt_member(char *buf, size_t cap, const tgroup *g, int i, int is_world) {
    if (is_world || g->ranks[i] == i)
        snprintf(buf, cap, "%d", i);
    else
        snprintf(buf, cap, "%d (world %d)", i, g->ranks[i]);
}

/* ---------------------------------------------------------------------------------------
 * Waiting. A thread that waits for a peer (a barrier's members, the rank-thread pool's
 * workers between replays and its caller at a replay's end) polls for a bounded time, then
 * sleeps on a condition variable: peers that arrive close together meet without a wake-up
 * (tens of microseconds), and a thread with no work sleeps. Between polls it yields, which
 * hands the core to the ranks still working when there are more ranks than cores. The bound
 * is time, not a count of yields: with idle cores a yield returns at once, and the count (64,
 * 200) spun for as long as the yields lasted.
 */
#define POLL_NS 10000       /* a barrier */
#define POOL_POLL_NS 50000  /* the pool: replays come back to back */

static int64_t poll_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls ready(arg) for at most ns, yielding between polls; returns whether it became true. */
static int poll_for(int64_t ns, int (*ready)(const void *), const void *arg) {
    int64_t t0 = poll_clock_ns();
    for (;;) {
        if (ready(arg)) return 1;
        if (poll_clock_ns() - t0 > ns) return 0;
        sched_yield();
    }
}

/* The mailbox's waits (a recv for its send, a send for its copy) poll like a barrier before
 * they sleep: a send and its recv posted close together meet without a wake-up. Every change
 * under w->mu that a waiter may wait for goes through mail_notify, to the world rank whose
 * thread waits for it. */
static void mail_notify(struct ldt_threads *w, int world_rank) { /* under w->mu */
    struct mailbox *b = &w->box[world_rank];
    atomic_store_explicit(&b->gen, atomic_load_explicit(&b->gen, memory_order_relaxed) + 1,
                          memory_order_release);
    pthread_cond_broadcast(&b->cv);
}

static void mail_notify_all(struct ldt_threads *w) { /* under w->mu */
    for (int r = 0; r < w->n; r++) mail_notify(w, r);
}

typedef struct mail_watch {
    struct mailbox *b;
    uint64_t gen;
} mail_watch;

static int mail_moved(const void *arg) {
    const mail_watch *x = arg;
    return atomic_load_explicit(&x->b->gen, memory_order_acquire) != x->gen;
}

/* Polls a waiter may make in a row before it sleeps: a change that is not the one it waits
 * for (another send posted to it) moves its counter too. */
#define MAIL_POLLS 4

/* Called with w->mu held, after the caller found nothing to do; returns with it held, and the
 * caller checks again; world_rank is the waiting thread's. *poll (start it at MAIL_POLLS) is
 * how many polls (each up to POLL_NS, the lock released) may come before a sleep on its
 * mailbox's cv (until dl when not NULL): a poll that saw a change uses one, a poll that saw
 * none leaves none, and a sleep gives one back. Returns 1 when a sleep timed out. */
static int mail_wait(struct ldt_threads *w, int world_rank, int *poll, const struct timespec *dl) {
    struct mailbox *b = &w->box[world_rank];
    if (*poll > 0) {
        mail_watch x = {b, atomic_load_explicit(&b->gen, memory_order_relaxed)};
        pthread_mutex_unlock(&w->mu);
        *poll = poll_for(POLL_NS, mail_moved, &x) ? *poll - 1 : 0;
        pthread_mutex_lock(&w->mu);
        return 0;
    }
    *poll = 1;
    if (!dl) {
        pthread_cond_wait(&b->cv, &w->mu);
        return 0;
    }
    return pthread_cond_timedwait(&b->cv, &w->mu, dl) == ETIMEDOUT;
}

/* ---------------------------------------------------------------------------------------
 * Barriers.
 */

static uint64_t gen_now(tgroup *g) { return atomic_load_explicit(&g->gen, memory_order_acquire); }

static void gen_advance(tgroup *g) { /* under g->mu: the release pairs with gen_now */
    atomic_store_explicit(&g->gen, atomic_load_explicit(&g->gen, memory_order_relaxed) + 1,
                          memory_order_release);
}

typedef struct gen_wait {
    tgroup *g;
    uint64_t gen;
} gen_wait;

static int gen_moved(const void *arg) {
    const gen_wait *x = arg;
    return gen_now(x->g) != x->gen;
}

/* Called with g->mu held after arriving; returns with it held. 1 if the generation is done
 * (polled briefly: the caller sleeps on g->cv otherwise). */
static int spin_for(tgroup *g, uint64_t my_gen) {
    gen_wait x = {g, my_gen};
    pthread_mutex_unlock(&g->mu);
    int done = poll_for(POLL_NS, gen_moved, &x);
    pthread_mutex_lock(&g->mu);
    return done || gen_now(g) != my_gen;
}

/* An entry barrier starts every call: it gives up on abort or timeout, taking its arrival
 * back so the generation cannot complete without it (a late peer would otherwise run on
 * alone and read buffers of ranks that left). Once an entry barrier has passed, every member
 * is inside the same checked op and only copies, so the later barriers of that op (data
 * barriers) wait unconditionally: leaving early would free buffers peers still read. */
static ldt_status barrier_entry(tcomm *c, const char *op) {
    tgroup *g = c->g;
    struct ldt_threads *w = c->w;
    int me = c->base.rank;
    pthread_mutex_lock(&g->mu);
    if (g->poisoned) {
        char msg[sizeof g->poison];
        memcpy(msg, g->poison, sizeof msg);
        pthread_mutex_unlock(&g->mu);
        return ldt__error(LDT_ERR_TIMEOUT,
                          "%s: the group is unusable since an earlier call timed out (%s)", op,
                          msg);
    }
    if (is_aborted(w)) {
        pthread_mutex_unlock(&g->mu);
        return remote_error(w, op);
    }
    uint64_t my_gen = gen_now(g);
    g->arrived_at[me] = my_gen + 1;
    if (++g->arrived == g->n) {
        g->arrived = 0;
        gen_advance(g);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return LDT_OK;
    }
    int64_t t0 = mono_ns();
    if (spin_for(g, my_gen)) {
        pthread_mutex_unlock(&g->mu);
        add_wait(c, t0);
        return LDT_OK;
    }
    struct timespec dl = deadline_after(w->timeout_ms);
    int timed_out = 0;
    while (gen_now(g) == my_gen) {
        if (g->poisoned || is_aborted(w) || timed_out) break;
        timed_out = pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT;
    }
    add_wait(c, t0);
    if (gen_now(g) != my_gen) { /* completed, whatever else happened meanwhile */
        pthread_mutex_unlock(&g->mu);
        return LDT_OK;
    }
    g->arrived--;
    g->arrived_at[me] = 0;
    if (g->poisoned) {
        char msg[sizeof g->poison];
        memcpy(msg, g->poison, sizeof msg);
        pthread_mutex_unlock(&g->mu);
        return ldt__error(LDT_ERR_TIMEOUT, "%s: %s", op, msg);
    }
    if (is_aborted(w)) {
        pthread_mutex_unlock(&g->mu);
        return remote_error(w, op);
    }
    /* Timed out: name the members that never came and where each one is, and poison the
     * group so the members still waiting fail now with the same message instead of each
     * waiting out its own. */
    size_t pos = (size_t)snprintf(g->poison, sizeof g->poison,
                                  "timed out after %lld ms waiting for rank",
                                  (long long)w->timeout_ms);
    int missing = 0;
    for (int i = 0; i < g->n && pos < sizeof g->poison; i++) {
        if (g->arrived_at[i] == my_gen + 1 || i == me) continue;
        char who[48];
        fmt_member(who, sizeof who, g, i, c->base.is_world);
        pos += (size_t)snprintf(g->poison + pos, sizeof g->poison - pos, "%s %s",
                                missing ? "," : "", who);
        missing++;
    }
    if (pos < sizeof g->poison)
        pos += (size_t)snprintf(g->poison + pos, sizeof g->poison - pos, " of %d, which did not come",
                                g->n);
    for (int i = 0, told = 0; i < g->n && pos < sizeof g->poison; i++) {
        if (g->arrived_at[i] == my_gen + 1 || i == me) continue;
        char who[48], what[200];
        if (told++ == 3) {
            snprintf(g->poison + pos, sizeof g->poison - pos, "; ...");
            break;
        }
        fmt_member(who, sizeof who, g, i, c->base.is_world);
        doing_text(w, g->ranks[i], g, what, sizeof what);
        pos += (size_t)snprintf(g->poison + pos, sizeof g->poison - pos, "%s%s%s", missing > 1 ? "; rank " : ": ",
                                missing > 1 ? who : "", missing > 1 ? ": " : "");
        if (pos < sizeof g->poison) pos += (size_t)snprintf(g->poison + pos, sizeof g->poison - pos, "%s", what);
    }
    g->poisoned = 1;
    atomic_store_explicit(&w->broken, 1, memory_order_relaxed);
    pthread_cond_broadcast(&g->cv);
    char msg[sizeof g->poison];
    memcpy(msg, g->poison, sizeof msg);
    pthread_mutex_unlock(&g->mu);
    return ldt__error(LDT_ERR_TIMEOUT, "%s: %s", op, msg);
}

static void barrier_data(tcomm *c) {
    tgroup *g = c->g;
    pthread_mutex_lock(&g->mu);
    uint64_t my_gen = gen_now(g);
    g->arrived_at[c->base.rank] = my_gen + 1;
    if (++g->arrived == g->n) {
        g->arrived = 0;
        gen_advance(g);
        pthread_cond_broadcast(&g->cv);
    } else {
        int64_t t0 = mono_ns();
        if (!spin_for(g, my_gen))
            while (gen_now(g) == my_gen) pthread_cond_wait(&g->cv, &g->mu);
        add_wait(c, t0);
    }
    pthread_mutex_unlock(&g->mu);
}


/* ---------------------------------------------------------------------------------------
 * Copies. Large results go out with non-temporal stores where the ISA has them
 * (ldt__copy_stream, core/copy.h).
 */
static void copy_out(void *dst, const void *src, size_t bytes, int stream) {
    if (dst == src || bytes == 0) return;
    if (stream)
        ldt__copy_stream(dst, src, bytes);
    else
        ldt__copy(dst, src, bytes);
}

static char *at(const void *base, int64_t elems, size_t es) {
    return (char *)base + (size_t)elems * es;
}

/* ---------------------------------------------------------------------------------------
 * Checking that every member called the same thing. Every member runs this on the same
 * slots and so reaches the same verdict and message.
 */
static int uses_count(ldt__op_kind k) {
    return k == LDT__OP_ALL_REDUCE || k == LDT__OP_REDUCE_SCATTER || k == LDT__OP_ALL_GATHER ||
           k == LDT__OP_ALL_TO_ALL || k == LDT__OP_BROADCAST;
}

static int is_reduction(ldt__op_kind k) {
    return k == LDT__OP_ALL_REDUCE || k == LDT__OP_REDUCE_SCATTER ||
           k == LDT__OP_REDUCE_SCATTER_V;
}

/* Members p and q named into a and b: only on the way to a message (a call that agrees formats
 * nothing). */
#define NAME_PAIR(p, q)                                                                          \
    (fmt_member(a, sizeof a, g, (p), c->base.is_world),                                          \
     fmt_member(b, sizeof b, g, (q), c->base.is_world))

static int validate(const tcomm *c, char *msg, size_t cap) {
    const tgroup *g = c->g;
    const ldt__op *s = g->slots;
    int n = g->n;
    char a[48], b[48];
    for (int q = 1; q < n; q++) {
        const ldt__op *x = &s[0], *y = &s[q];
        if (x->kind != y->kind) {
            NAME_PAIR(0, q);
            snprintf(msg, cap, "ranks disagree: rank %s called %s but rank %s called %s", a,
                     ldt__comm_op_name(x->kind), b, ldt__comm_op_name(y->kind));
            return 1;
        }
        if (x->kind == LDT__OP_BARRIER) continue;
        if (x->dtype != y->dtype) {
            NAME_PAIR(0, q);
            snprintf(msg, cap, "ranks disagree: rank %s passed dtype %s but rank %s passed %s", a,
                     ldt_dtype_name(x->dtype), b, ldt_dtype_name(y->dtype));
            return 1;
        }
        if (is_reduction(x->kind) && x->reduce != y->reduce) {
            NAME_PAIR(0, q);
            snprintf(msg, cap, "ranks disagree: rank %s passed op %s but rank %s passed %s", a,
                     ldt_reduce_op_name(x->reduce), b, ldt_reduce_op_name(y->reduce));
            return 1;
        }
        if (uses_count(x->kind) && x->count != y->count) {
            NAME_PAIR(0, q);
            snprintf(msg, cap, "ranks disagree: rank %s passed count %lld but rank %s passed %lld",
                     a, (long long)x->count, b, (long long)y->count);
            return 1;
        }
        if (x->kind == LDT__OP_BROADCAST && x->root != y->root) {
            NAME_PAIR(0, q);
            snprintf(msg, cap, "ranks disagree: rank %s passed root %d but rank %s passed %d", a,
                     x->root, b, y->root);
            return 1;
        }
        if (x->counts)
            for (int i = 0; i < n; i++)
                if (x->counts[i] != y->counts[i]) {
                    NAME_PAIR(0, q);
                    snprintf(msg, cap,
                             "ranks disagree: rank %s passed counts[%d] = %lld but rank %s "
                             "passed %lld",
                             a, i, (long long)x->counts[i], b, (long long)y->counts[i]);
                    return 1;
                }
    }
    if (s[0].kind == LDT__OP_ALL_TO_ALL_V)
        for (int p = 0; p < n; p++)
            for (int q = 0; q < n; q++)
                if (s[p].sendcounts[q] != s[q].recvcounts[p]) {
                    NAME_PAIR(p, q);
                    snprintf(msg, cap,
                             "ranks disagree: rank %s sends %lld elements to rank %s, which "
                             "expects %lld from it (sendcounts[%d] vs recvcounts[%d])",
                             a, (long long)s[p].sendcounts[q], b, (long long)s[q].recvcounts[p],
                             q, p);
                    return 1;
                }
    return 0;
}
#undef NAME_PAIR

/* ---------------------------------------------------------------------------------------
 * The collectives' data phase. Between the entry barrier and the final one, member r:
 */

/* all_reduce: reduces chunk r (a 64-byte-aligned share) of every member's send and writes
 * the result into chunk r of every member's recv. Only member r touches chunk r of any
 * buffer, and it reads a whole block before writing it, so send == recv is safe. */
static void run_all_reduce(tcomm *c) {
    const ldt__op *s = c->g->slots;
    int n = c->g->n, r = c->base.rank;
    size_t es = ldt_dtype_size(s[r].dtype);
    int64_t count = s[r].count, align = 64 / (int64_t)es;
    int64_t per = (count + n - 1) / n;
    per = (per + align - 1) / align * align;
    int64_t lo = per * r < count ? per * r : count;
    int64_t hi = lo + per < count ? lo + per : count;
    int stream = count * (int64_t)es >= STREAM_MIN_BYTES;
    for (int q = 0; q < n; q++) c->srcs[q] = s[q].send;
    union { /* typed, so the kernels' stores through T* are to an object of that type */
        float f[BLK];
        double d[BLK];
        int64_t i64[BLK];
        int32_t i32[BLK];
        uint16_t h[BLK];
        uint8_t u8[BLK];
    } tmp;
    for (int64_t b = lo; b < hi; b += BLK) {
        int64_t len = hi - b < BLK ? hi - b : BLK;
        ldt__reduce_at(&tmp, c->srcs, n, b, len, s[r].dtype, s[r].reduce, n);
        for (int q = 0; q < n; q++)
            copy_out(at(s[q].recv, b, es), &tmp, (size_t)len * es, stream);
    }
    if (stream) ldt__copy_stream_fence();
}

/* reduce_scatter(_v): reduces segment r of every member's send into its own recv. recv may
 * be exactly segment r of its own send: only member r reads that segment. */
static void run_reduce_scatter(tcomm *c) {
    const ldt__op *s = c->g->slots;
    int n = c->g->n, r = c->base.rank;
    const ldt__op *me = &s[r];
    int64_t off, len;
    if (me->counts) {
        off = 0;
        for (int i = 0; i < r; i++) off += me->counts[i];
        len = me->counts[r];
    } else {
        off = me->count * r;
        len = me->count;
    }
    for (int q = 0; q < n; q++) c->srcs[q] = s[q].send;
    ldt__reduce_at(me->recv, c->srcs, n, off, len, me->dtype, me->reduce, n);
}

/* all_gather(_v): member r writes its send into segment r of every member's recv, a block
 * at a time so it reads its send once. In place (send is segment r of its own recv) the
 * self-copy is skipped and no other member writes that segment. */
static void run_all_gather(tcomm *c) {
    const ldt__op *s = c->g->slots;
    int n = c->g->n, r = c->base.rank;
    const ldt__op *me = &s[r];
    size_t es = ldt_dtype_size(me->dtype);
    int64_t off = 0, len, total;
    if (me->counts) {
        total = 0;
        for (int i = 0; i < n; i++) {
            if (i < r) off += me->counts[i];
            total += me->counts[i];
        }
        len = me->counts[r];
    } else {
        off = me->count * r;
        len = me->count;
        total = me->count * n;
    }
    size_t bytes = (size_t)len * es;
    int stream = total * (int64_t)es >= STREAM_MIN_BYTES;
    for (size_t b = 0; b < bytes; b += COPY_BLK) {
        size_t m = bytes - b < COPY_BLK ? bytes - b : COPY_BLK;
        for (int q = 0; q < n; q++)
            copy_out(at(s[q].recv, off, es) + b, (const char *)me->send + b, m, stream);
    }
    if (stream) ldt__copy_stream_fence();
}

/* all_to_all(_v): member r pulls segment r of every member's send into its own recv. */
static void run_all_to_all(tcomm *c) {
    const ldt__op *s = c->g->slots;
    int n = c->g->n, r = c->base.rank;
    const ldt__op *me = &s[r];
    size_t es = ldt_dtype_size(me->dtype);
    for (int p = 0; p < n; p++) {
        if (me->sendcounts)
            copy_out(at(me->recv, me->rdispls[p], es), at(s[p].send, s[p].sdispls[r], es),
                     (size_t)me->recvcounts[p] * es, 0);
        else
            copy_out(at(me->recv, me->count * p, es), at(s[p].send, me->count * r, es),
                     (size_t)me->count * es, 0);
    }
}

static void run_broadcast(tcomm *c) {
    const ldt__op *s = c->g->slots;
    int r = c->base.rank;
    const ldt__op *me = &s[r];
    if (r != me->root)
        copy_out(me->recv, s[me->root].recv, (size_t)me->count * ldt_dtype_size(me->dtype), 0);
}

static ldt_status collective(ldt_comm *base, const ldt__op *op) {
    tcomm *c = (tcomm *)base;
    const char *name = ldt__comm_op_name(op->kind);
    /* The slot is ours alone: peers finished reading it before the last call's final
     * barrier, which we have passed. */
    c->g->slots[base->rank] = *op;
    LDT_CHECK(barrier_entry(c, name));
    char msg[768];
    if (validate(c, msg, sizeof msg)) {
        barrier_data(c); /* every member found the same mismatch and comes here too */
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "%s: %s", name, msg);
    }
    switch (op->kind) {
    case LDT__OP_ALL_REDUCE: run_all_reduce(c); break;
    case LDT__OP_REDUCE_SCATTER:
    case LDT__OP_REDUCE_SCATTER_V: run_reduce_scatter(c); break;
    case LDT__OP_ALL_GATHER:
    case LDT__OP_ALL_GATHER_V: run_all_gather(c); break;
    case LDT__OP_ALL_TO_ALL:
    case LDT__OP_ALL_TO_ALL_V: run_all_to_all(c); break;
    case LDT__OP_BROADCAST: run_broadcast(c); break;
    case LDT__OP_BARRIER: break;
    default:
        barrier_data(c);
        LDT_FAIL(LDT_ERR_INTERNAL, "%s: not a collective", name);
    }
    barrier_data(c);
    return LDT_OK;
}

static ldt_status t_collective(ldt_comm *base, const ldt__op *op) {
    tcomm *c = (tcomm *)base;
    doing_enter(c->w, c->g, base->rank, ldt__comm_op_name(op->kind));
    return doing_leave(c->w, c->g, base->rank, collective(base, op));
}

/* ---------------------------------------------------------------------------------------
 * Point to point: a send waits in the receiver's mailbox (FIFO, matched by group and
 * source) until the receiver copies it straight from the sender's buffer.
 */
static int world_of(const tcomm *c, int member) { return c->g->ranks[member]; }

static void mail_remove(struct ldt_threads *w, ldt__send_req *req) {
    ldt__send_req **pp = &w->mail[req->g->ranks[req->dst]];
    while (*pp && *pp != req) pp = &(*pp)->next;
    if (*pp) *pp = req->next;
    req->next = NULL;
}

static ldt_status t_send_post(ldt_comm *base, const ldt__op *op, ldt__send_req **out) {
    tcomm *c = (tcomm *)base;
    struct ldt_threads *w = c->w;
    *out = NULL;
    ldt__send_req *req = calloc(1, sizeof *req);
    if (!req) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "send: out of memory");
    req->w = w;
    req->g = c->g;
    req->src = base->rank;
    req->dst = op->root;
    req->buf = op->send;
    req->count = op->count;
    req->dtype = op->dtype;
    req->state = SEND_POSTED;
    pthread_mutex_lock(&w->mu);
    if (is_aborted(w)) {
        pthread_mutex_unlock(&w->mu);
        free(req);
        return ldt__trace(remote_error(w, "send"), __FILE__, __LINE__);
    }
    ldt__send_req **pp = &w->mail[world_of(c, req->dst)];
    while (*pp) pp = &(*pp)->next;
    *pp = req;
    mail_notify(w, world_of(c, req->dst));
    pthread_mutex_unlock(&w->mu);
    *out = req;
    return LDT_OK;
}

/* Waits for a claimed send's copy to finish: it is bounded, and leaving earlier would let
 * the caller free a buffer the receiver is reading. Called with w->mu held. */
static void wait_claimed(ldt__send_req *req) {
    int poll = MAIL_POLLS;
    while (req->state == SEND_CLAIMED) mail_wait(req->w, req->g->ranks[req->src], &poll, NULL);
}

static ldt_status send_wait(ldt__send_req *req) {
    struct ldt_threads *w = req->w;
    struct timespec dl = deadline_after(w->timeout_ms);
    ldt_status st = LDT_OK;
    int timed_out = 0, poll = MAIL_POLLS;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        wait_claimed(req);
        if (req->state == SEND_DONE) break;
        if (req->state == SEND_FAILED) {
            st = ldt__error(LDT_ERR_INVALID_USAGE, "send: %s", req->err);
            break;
        }
        if (is_aborted(w)) {
            mail_remove(w, req);
            st = remote_error(w, "send");
            break;
        }
        if (timed_out) {
            char what[200];
            mail_remove(w, req);
            doing_text(w, req->g->ranks[req->dst], req->g, what, sizeof what);
            st = ldt__error(LDT_ERR_TIMEOUT,
                            "send: timed out after %lld ms: rank %d did not receive %lld %s "
                            "from rank %d; %s",
                            (long long)w->timeout_ms, req->dst, (long long)req->count,
                            ldt_dtype_name(req->dtype), req->src, what);
            break;
        }
        timed_out = mail_wait(w, req->g->ranks[req->src], &poll, &dl);
    }
    pthread_mutex_unlock(&w->mu);
    free(req);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

static ldt_status t_send_wait(ldt__send_req *req) {
    struct ldt_threads *w = req->w;
    const tgroup *g = req->g;
    int src = req->src; /* req is freed by the wait */
    doing_enter(w, g, src, "send");
    return doing_leave(w, g, src, send_wait(req));
}

static void t_send_cancel(ldt__send_req *req) {
    struct ldt_threads *w = req->w;
    pthread_mutex_lock(&w->mu);
    wait_claimed(req);
    if (req->state == SEND_POSTED) mail_remove(w, req);
    pthread_mutex_unlock(&w->mu);
    free(req);
}

static ldt_status recv_op(ldt_comm *base, const ldt__op *op) {
    tcomm *c = (tcomm *)base;
    struct ldt_threads *w = c->w;
    int me = base->rank, peer = op->root;
    struct timespec dl = deadline_after(w->timeout_ms);
    int timed_out = 0, poll = MAIL_POLLS;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        ldt__send_req *req = w->mail[world_of(c, me)];
        while (req && !(req->g == c->g && req->src == peer)) req = req->next;
        if (req) {
            int sender = req->g->ranks[req->src]; /* the world rank waiting for req */
            mail_remove(w, req);
            if (req->count != op->count || req->dtype != op->dtype) {
                char msg[sizeof req->err];
                snprintf(msg, sizeof msg, "rank %d sent %lld %s to rank %d, which expected %lld %s",
                         peer, (long long)req->count, ldt_dtype_name(req->dtype), me,
                         (long long)op->count, ldt_dtype_name(op->dtype));
                memcpy(req->err, msg, sizeof msg);
                req->state = SEND_FAILED; /* the sender frees req once it sees this */
                mail_notify(w, sender);
                pthread_mutex_unlock(&w->mu);
                LDT_FAIL(LDT_ERR_INVALID_USAGE, "recv: %s", msg);
            }
            req->state = SEND_CLAIMED;
            pthread_mutex_unlock(&w->mu);
            /* memmove: a send to oneself may pass the very buffer it receives into */
            if (op->count)
                memmove(op->recv, req->buf, (size_t)op->count * ldt_dtype_size(op->dtype));
            pthread_mutex_lock(&w->mu);
            req->state = SEND_DONE; /* the sender frees req once it sees this */
            mail_notify(w, sender);
            pthread_mutex_unlock(&w->mu);
            return LDT_OK;
        }
        if (is_aborted(w)) {
            pthread_mutex_unlock(&w->mu);
            return ldt__trace(remote_error(w, "recv"), __FILE__, __LINE__);
        }
        if (timed_out) {
            char what[200];
            pthread_mutex_unlock(&w->mu);
            doing_text(w, world_of(c, peer), c->g, what, sizeof what);
            LDT_FAIL(LDT_ERR_TIMEOUT,
                     "recv: timed out after %lld ms: rank %d sent nothing (%lld %s expected) to "
                     "rank %d; %s",
                     (long long)w->timeout_ms, peer, (long long)op->count,
                     ldt_dtype_name(op->dtype), me, what);
        }
        timed_out = mail_wait(w, world_of(c, me), &poll, &dl);
    }
}

static ldt_status t_recv(ldt_comm *base, const ldt__op *op) {
    tcomm *c = (tcomm *)base;
    doing_enter(c->w, c->g, base->rank, "recv");
    return doing_leave(c->w, c->g, base->rank, recv_op(base, op));
}

/* ---------------------------------------------------------------------------------------
 * Group communicators: the first member to ask creates the shared state; each member's
 * k-th request for a rank list joins the k-th state made for that list.
 */
static ldt_status t_group(ldt_comm *base, int n, const int *ranks, ldt_comm **out) {
    tcomm *c = (tcomm *)base;
    struct ldt_threads *w = c->w;
    int me_world = base->world_ranks[base->rank], me = 0;
    while (ranks[me] != me_world) me++; /* comm.c checked it is there */
    tcomm *h = calloc(1, sizeof *h);
    if (h) h->srcs = malloc((size_t)n * sizeof *h->srcs);
    if (!h || !h->srcs) {
        free(h);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "comm_group: out of memory");
    }
    pthread_mutex_lock(&w->mu);
    tgroup *g = w->groups;
    for (; g; g = g->next)
        if (g->n == n && !g->has_joined[me] &&
            memcmp(g->ranks, ranks, (size_t)n * sizeof *ranks) == 0)
            break;
    if (!g) {
        g = group_new(n, ranks);
        if (!g) {
            pthread_mutex_unlock(&w->mu);
            free(h->srcs);
            free(h);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "comm_group: out of memory for a group of %d", n);
        }
        /* Appended, so the registry is in creation order and each member's k-th request
         * finds the k-th state before any later one. */
        tgroup **pp = &w->groups;
        while (*pp) pp = &(*pp)->next;
        *pp = g;
    }
    g->has_joined[me] = 1;
    g->joined++;
    g->handles++;
    pthread_mutex_unlock(&w->mu);
    h->base.vt = &k_threads_vt;
    h->base.rank = me;
    h->base.size = n;
    h->base.world_size = w->n;
    h->base.world_ranks = g->ranks;
    h->base.is_world = 0;
    h->base.timeout_ms = w->timeout_ms;
    h->w = w;
    h->g = g;
    *out = &h->base;
    return LDT_OK;
}

static void t_destroy(ldt_comm *base) {
    tcomm *c = (tcomm *)base;
    struct ldt_threads *w = c->w;
    tgroup *g = c->g;
    pthread_mutex_lock(&w->mu);
    if (--g->handles == 0 && g->joined == g->n) {
        tgroup **pp = &w->groups;
        while (*pp != g) pp = &(*pp)->next;
        *pp = g->next;
        group_free(g);
    }
    pthread_mutex_unlock(&w->mu);
    free(c->srcs);
    free(c);
}

static const ldt__comm_vtable k_threads_vt = {
    .name = "threads",
    .group = t_group,
    .destroy = t_destroy,
    .collective = t_collective,
    .send_post = t_send_post,
    .send_wait = t_send_wait,
    .send_cancel = t_send_cancel,
    .recv = t_recv,
};

/* ---------------------------------------------------------------------------------------
 * Worlds and runs
 */
ldt_status ldt_threads_create(int nranks, const ldt_comm_options *opts, ldt_threads **out) {
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "threads_create: out is NULL");
    *out = NULL;
    if (nranks < 1 || nranks > LDT__COMM_MAX_RANKS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "threads_create: nranks is %d, expected 1..%d", nranks,
                 LDT__COMM_MAX_RANKS);
    int64_t timeout;
    LDT_CHECK(ldt__comm_timeout(opts, "threads_create", &timeout)); /* "forever" keeps timespecs sane */
    struct ldt_threads *w = calloc(1, sizeof *w);
    if (!w) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "threads_create: out of memory");
    w->n = nranks;
    w->timeout_ms = timeout;
    atomic_init(&w->aborted, 0);
    atomic_init(&w->broken, 0);
    w->failed_rank = -1;
    int ok_mu = pthread_mutex_init(&w->mu, NULL) == 0;
    int ok_cv = 0; /* mailboxes whose cv is made */
    w->box = calloc((size_t)nranks, sizeof *w->box);
    while (w->box && ok_cv < nranks && cond_init_monotonic(&w->box[ok_cv].cv) == 0)
        atomic_init(&w->box[ok_cv++].gen, 0);
    w->mail = calloc((size_t)nranks, sizeof *w->mail);
    w->wait_ns = calloc((size_t)nranks, sizeof *w->wait_ns);
    w->doing = calloc((size_t)nranks, sizeof *w->doing);
    w->world_comms = calloc((size_t)nranks, sizeof *w->world_comms);
    int *ranks = malloc((size_t)nranks * sizeof *ranks);
    if (ranks)
        for (int i = 0; i < nranks; i++) ranks[i] = i;
    w->world_group = ranks ? group_new(nranks, ranks) : NULL;
    free(ranks);
    if (!ok_mu || ok_cv < nranks || !w->mail || !w->wait_ns || !w->doing || !w->world_comms ||
        !w->world_group) {
        if (ok_mu) pthread_mutex_destroy(&w->mu);
        while (ok_cv > 0) pthread_cond_destroy(&w->box[--ok_cv].cv);
        free(w->box);
        free(w->mail);
        free(w->wait_ns);
        free(w->doing);
        free(w->world_comms);
        group_free(w->world_group);
        free(w);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "threads_create: out of memory for %d ranks", nranks);
    }
    tgroup *g = w->world_group;
    memset(g->has_joined, 1, (size_t)nranks); /* never matched by comm_group */
    g->joined = nranks;
    g->handles = nranks;
    w->groups = g;
    for (int r = 0; r < nranks; r++) {
        tcomm *c = &w->world_comms[r];
        c->srcs = malloc((size_t)nranks * sizeof *c->srcs);
        if (!c->srcs) {
            ldt_threads_destroy(w);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "threads_create: out of memory for %d ranks", nranks);
        }
        c->base.vt = &k_threads_vt;
        c->base.rank = r;
        c->base.size = nranks;
        c->base.world_size = nranks;
        c->base.world_ranks = g->ranks;
        c->base.is_world = 1;
        c->base.timeout_ms = w->timeout_ms;
        c->w = w;
        c->g = g;
    }
    blas_single_thread();
    *out = w;
    return LDT_OK;
}

static void pool_stop(ldt_threads *w);

void ldt_threads_destroy(ldt_threads *w) {
    if (!w) return;
    pool_stop(w);
    /* Groups whose handles were never destroyed go too (the handles then dangle). */
    tgroup *g = w->groups;
    while (g) {
        tgroup *next = g->next;
        group_free(g);
        g = next;
    }
    pthread_mutex_destroy(&w->mu);
    for (int r = 0; r < w->n; r++) pthread_cond_destroy(&w->box[r].cv);
    free(w->box);
    free(w->mail);
    free(w->wait_ns);
    free(w->doing);
    for (int r = 0; r < w->n; r++) free(w->world_comms[r].srcs);
    free(w->world_comms);
    free(w->runs);
    free(w->pool);
    free(w);
}

typedef struct rank_run {
    struct ldt_threads *w;
    int rank;
    ldt_rank_fn fn;
    void *arg;
    ldt_status st;
    char msg[1024];
    char trace[512];
} rank_run;

static void *rank_main(void *p) {
    rank_run *rr = p;
    rank_doing *d = &rr->w->doing[rr->rank];
    ldt_clear_error();
    ldt_status st = rr->fn(&rr->w->world_comms[rr->rank].base, rr->arg);
    if (ldt__group_discard() && st == LDT_OK)
        st = ldt__error(LDT_ERR_INVALID_USAGE,
                        "the rank function returned between group_start and group_end; the "
                        "queued calls were dropped");
    rr->st = st;
    if (st != LDT_OK) {
        /* The thread-local message dies with this thread: keep a copy for the caller. */
        snprintf(rr->msg, sizeof rr->msg, "%s", ldt_last_error());
        snprintf(rr->trace, sizeof rr->trace, "%s", ldt_last_error_trace());
        if (!rr->msg[0])
            snprintf(rr->msg, sizeof rr->msg, "returned %s (%d) without a message",
                     ldt_status_name(st), (int)st);
    }
    atomic_store_explicit(&d->ret, (int)st, memory_order_relaxed);
    atomic_store_explicit(&d->since, coarse_ns(), memory_order_relaxed);
    atomic_store_explicit(&d->returned, 1, memory_order_release);
    if (st != LDT_OK) world_abort(rr->w, rr->rank, rr->msg);
    return NULL;
}

typedef struct pool_arg {
    ldt_threads *w;
    int rank;
} pool_arg;

typedef struct job_wait {
    ldt_threads *w;
    uint64_t seen;
} job_wait;

static int job_posted(const void *arg) {
    const job_wait *x = arg;
    return atomic_load(&x->w->job) != x->seen;
}

static int workers_done(const void *arg) { return atomic_load(&((ldt_threads *)arg)->remaining) <= 0; }

static void *pool_main(void *p) {
    pool_arg a = *(pool_arg *)p;
    ldt_threads *w = a.w;
    uint64_t seen = 0;
    free(p);
    for (;;) {
        /* no work: a brief poll (replays may come back to back), then asleep until a job */
        job_wait x = {w, seen};
        poll_for(POOL_POLL_NS, job_posted, &x);
        pthread_mutex_lock(&w->pool_mu);
        while (atomic_load(&w->job) == seen && !w->stop) pthread_cond_wait(&w->pool_cv, &w->pool_mu);
        if (w->stop) break;
        seen = atomic_load(&w->job);
        pthread_mutex_unlock(&w->pool_mu);
        rank_main(&w->runs[a.rank]);
        pthread_mutex_lock(&w->pool_mu);
        if (atomic_fetch_sub(&w->remaining, 1) == 1) pthread_cond_signal(&w->done_cv);
        pthread_mutex_unlock(&w->pool_mu);
    }
    pthread_mutex_unlock(&w->pool_mu);
    return NULL;
}

/* Starts the workers (once); returns 0, or the pthread error. */
static int pool_start(ldt_threads *w) {
    if (w->pool) return 0;
    w->runs = calloc((size_t)w->n, sizeof *w->runs);
    w->pool = calloc((size_t)w->n, sizeof *w->pool);
    if (!w->runs || !w->pool) return ENOMEM;
    pthread_mutex_init(&w->pool_mu, NULL);
    pthread_cond_init(&w->pool_cv, NULL);
    pthread_cond_init(&w->done_cv, NULL);
    for (int r = 1; r < w->n; r++) {
        pool_arg *a = malloc(sizeof *a);
        int err;
        if (!a) return ENOMEM;
        a->w = w;
        a->rank = r;
        if ((err = pthread_create(&w->pool[r], NULL, pool_main, a)) != 0) {
            free(a);
            return err;
        }
        w->pool_n = r;
    }
    return 0;
}

static void pool_stop(ldt_threads *w) {
    if (!w->pool || !w->runs) return;
    pthread_mutex_lock(&w->pool_mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->pool_cv);
    pthread_mutex_unlock(&w->pool_mu);
    for (int r = 1; r <= w->pool_n; r++) pthread_join(w->pool[r], NULL);
    pthread_mutex_destroy(&w->pool_mu);
    pthread_cond_destroy(&w->pool_cv);
    pthread_cond_destroy(&w->done_cv);
}

ldt_status ldt_threads_run(ldt_threads *w, ldt_rank_fn fn, void *arg) {
    if (!w) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "threads_run: threads is NULL");
    if (!fn) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "threads_run: fn is NULL");
    pthread_mutex_lock(&w->mu);
    int busy = w->running;
    int aborted = is_aborted(w), broken = atomic_load(&w->broken);
    if (!busy && !aborted && !broken) w->running = 1;
    pthread_mutex_unlock(&w->mu);
    if (busy)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "threads_run: this world is already running on another thread");
    if (aborted)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "threads_run: the world was aborted by an earlier failure (rank %d: %s); "
                 "create a new one",
                 w->failed_rank, w->failed_msg);
    if (broken)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "threads_run: a collective timed out in an earlier run, so the ranks are out "
                 "of step; create a new one");
    int n = w->n, err = pool_start(w);
    rank_run *runs = w->runs;
    if (err) {
        /* Workers already started wait for jobs, not for peers: stopping them is enough. */
        char msg[160];
        snprintf(msg, sizeof msg, "could not start the rank threads (%s)", strerror(err));
        world_abort(w, -1, msg);
        pthread_mutex_lock(&w->mu);
        w->running = 0;
        pthread_mutex_unlock(&w->mu);
        LDT_FAIL(LDT_ERR_SYSTEM, "threads_run: %s", w->failed_msg);
    }
    for (int r = 0; r < n; r++) {
        rank_doing *d = &w->doing[r];
        runs[r] = (rank_run){.w = w, .rank = r, .fn = fn, .arg = arg};
        atomic_store(&d->op, (const char *)NULL);
        atomic_store(&d->last, (const char *)NULL);
        atomic_store(&d->returned, 0);
        atomic_store(&d->since, coarse_ns());
    }
    pthread_mutex_lock(&w->pool_mu);
    atomic_store(&w->remaining, n - 1);
    atomic_fetch_add(&w->job, 1);
    pthread_cond_broadcast(&w->pool_cv);
    pthread_mutex_unlock(&w->pool_mu);
    {
        /* rank 0 here: its thread-local error is this thread's, so keep the caller's */
        rank_main(&runs[0]);
    }
    poll_for(POOL_POLL_NS, workers_done, w); /* then asleep until the last worker signals */
    pthread_mutex_lock(&w->pool_mu);
    while (atomic_load(&w->remaining) > 0) pthread_cond_wait(&w->done_cv, &w->pool_mu);
    pthread_mutex_unlock(&w->pool_mu);
    pthread_mutex_lock(&w->mu);
    w->running = 0;
    pthread_mutex_unlock(&w->mu);
    /* Report the cause, not the echoes: the lowest rank that failed on its own, else the
     * lowest rank that failed because another did (LDT_ERR_REMOTE). */
    int pick = -1;
    for (int r = 0; r < n && pick < 0; r++)
        if (runs[r].st != LDT_OK && runs[r].st != LDT_ERR_REMOTE) pick = r;
    for (int r = 0; r < n && pick < 0; r++)
        if (runs[r].st != LDT_OK) pick = r;
    ldt_status st = LDT_OK;
    if (pick >= 0) {
        char msg[1100];
        snprintf(msg, sizeof msg, "rank %d: %s", pick, runs[pick].msg);
        ldt__error_set_raw(msg, runs[pick].trace);
        st = runs[pick].st;
    }
    return st;
}

ldt_status ldt_threads_launch(int nranks, const ldt_comm_options *opts, ldt_rank_fn fn,
                              void *arg) {
    ldt_threads *w;
    LDT_CHECK(ldt_threads_create(nranks, opts, &w));
    ldt_status st = ldt_threads_run(w, fn, arg);
    ldt_threads_destroy(w);
    return st;
}
