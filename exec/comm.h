/* Communicator internals: the op descriptor every call is reduced to, the backend vtable
 * (threads now; MPI and NCCL later implement the same table) and the struct ldt_comm head.
 *
 * comm.c checks arguments once and hands a backend a validated ldt__op, so backends never
 * re-check user input; it also owns the thread-local group_start/group_end queue, which only
 * needs a backend to post a send without waiting (send_post) and to finish it later. */
#ifndef LDT_EXEC_COMM_H
#define LDT_EXEC_COMM_H

#include <stdint.h>

#include "ldt/exec.h"

/* Upper bound on ranks in one communicator: keeps every count * size product and every
 * per-rank table small and overflow-free. */
#define LDT__COMM_MAX_RANKS 4096
#define LDT__COMM_DEFAULT_TIMEOUT_MS 60000
/* "No timeout" as a number of milliseconds every backend can add to a clock (as threads
 * does with timespecs) without overflow: about 146 million years. */
#define LDT__COMM_FOREVER_MS (INT64_MAX / 2)

/* The timeout a backend waits with (LDT__COMM_FOREVER_MS for none): opts's timeout_ms, else
 * LDT_COMM_TIMEOUT_MS from the environment (0 there: none), else the older name
 * LDT_NCCL_TIMEOUT_MS (a positive number, read as before), else the default. `who` names the
 * caller in the error for a negative timeout_ms or a malformed LDT_COMM_TIMEOUT_MS. */
ldt_status ldt__comm_timeout(const ldt_comm_options *opts, const char *who, int64_t *out);

/* X(enum suffix, name). The order is the descriptor's kind value; names appear in errors. */
#define LDT__OP_MAP(X)                        \
    X(ALL_REDUCE, "all_reduce")               \
    X(REDUCE_SCATTER, "reduce_scatter")       \
    X(REDUCE_SCATTER_V, "reduce_scatter_v")   \
    X(ALL_GATHER, "all_gather")               \
    X(ALL_GATHER_V, "all_gather_v")           \
    X(ALL_TO_ALL, "all_to_all")               \
    X(ALL_TO_ALL_V, "all_to_all_v")           \
    X(BROADCAST, "broadcast")                 \
    X(BARRIER, "barrier")                     \
    X(SEND, "send")                           \
    X(RECV, "recv")

typedef enum ldt__op_kind {
#define LDT__OP_ENUM(sfx, name) LDT__OP_##sfx,
    LDT__OP_MAP(LDT__OP_ENUM)
#undef LDT__OP_ENUM
    LDT__OP_COUNT
} ldt__op_kind;

const char *ldt__comm_op_name(ldt__op_kind k);

/* One call, already checked by comm.c. Fields a kind does not use are zero / NULL.
 * counts: size entries (the _v reductions and gathers); the all_to_all_v arrays likewise.
 * Arrays are borrowed from the caller (or from the group queue) for the call's duration. */
typedef struct ldt__op {
    ldt__op_kind kind;
    ldt_dtype dtype;
    ldt_reduce_op reduce;
    int64_t count;          /* elements; for send/recv the message size */
    const int64_t *counts;  /* _v reductions and gathers */
    const int64_t *sendcounts, *sdispls, *recvcounts, *rdispls; /* all_to_all_v */
    const void *send;
    void *recv;             /* broadcast: the one buffer; recv: the destination */
    int root;               /* broadcast root, or the send/recv peer (group rank) */
} ldt__op;

/* A posted send a backend finishes later (opaque to comm.c). */
typedef struct ldt__send_req ldt__send_req;

typedef struct ldt__comm_vtable {
    const char *name; /* ldt_comm_backend() */
    /* A communicator over world ranks `ranks` (already checked: distinct, in range, the
     * caller among them). */
    ldt_status (*group)(ldt_comm *c, int n, const int *ranks, ldt_comm **out);
    void (*destroy)(ldt_comm *c);
    /* Every collective kind, barrier included. */
    ldt_status (*collective)(ldt_comm *c, const ldt__op *op);
    /* Makes a send visible to the peer and returns without waiting for it. */
    ldt_status (*send_post)(ldt_comm *c, const ldt__op *op, ldt__send_req **req);
    /* Waits until the peer has the data (or the timeout, or an abort) and frees req. */
    ldt_status (*send_wait)(ldt__send_req *req);
    /* Withdraws a send nobody took yet, or waits for one in progress; frees req. Used when
     * a group fails before its sends complete, so no peer reads a buffer after we return. */
    void (*send_cancel)(ldt__send_req *req);
    ldt_status (*recv)(ldt_comm *c, const ldt__op *op);
    /* Optional: this rank cannot go on (why: its error); the peers' pending and later calls
     * fail instead of waiting for it. Backends whose worlds abort otherwise leave it NULL. */
    void (*abort)(ldt_comm *c, const char *why);
} ldt__comm_vtable;

/* The head of every backend's communicator (backends embed it first). */
struct ldt_comm {
    const ldt__comm_vtable *vt;
    int rank;               /* within the group */
    int size;
    int world_size;
    const int *world_ranks; /* size entries, owned by the backend */
    int is_world;           /* world communicators are not destroyed by ldt_comm_destroy */
    int64_t timeout_ms;     /* what its calls wait for a peer; LDT__COMM_FOREVER_MS: no limit */
};

/* A bound all_reduce (exec/bind.c): its arguments checked once at bind, with ldt_all_reduce's
 * statuses and messages (all but the communicator, made at the first replay); then run, or
 * queued inside a group, with no checks. What can only fail at replay (a peer that disagrees,
 * is lost or times out) still fails with a message. */
ldt_status ldt__all_reduce_check(const void *send, const void *recv, int64_t count, ldt_dtype dt,
                                 ldt_reduce_op rop);
ldt_status ldt__all_reduce_bound(ldt_comm *c, const void *send, void *recv, int64_t count,
                                 ldt_dtype dt, ldt_reduce_op rop);

/* A process-per-rank world is told this rank failed (a no-op where the backend has no
 * abort): see ldt__comm_vtable.abort. */
void ldt__comm_abort(ldt_comm *c, const char *why);

/* Discards a group left open on this thread (a rank function that returned between
 * group_start and group_end); returns 1 if there was one. */
int ldt__group_discard(void);

/* Nanoseconds world rank `rank` of a rank-threads world has spent blocked in collectives
 * waiting for its peers to arrive (its own thread and its communication thread), since the
 * world was created; 0 for a NULL world or a rank out of range (exec/comm_threads.c). */
int64_t ldt__threads_wait_ns(const ldt_threads *w, int rank);

#endif
