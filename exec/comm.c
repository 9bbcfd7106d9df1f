/* Communicator entry points: argument checks with messages, dispatch to the backend vtable,
 * and the thread-local group_start/group_end queue. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/comm.h"

static const char *const k_op_names[] = {
#define LDT__OP_NAME(sfx, name) name,
    LDT__OP_MAP(LDT__OP_NAME)
#undef LDT__OP_NAME
};
_Static_assert(sizeof k_op_names / sizeof k_op_names[0] == LDT__OP_COUNT,
               "one name per ldt__op_kind");

const char *ldt__comm_op_name(ldt__op_kind k) {
    return (int)k >= 0 && k < LDT__OP_COUNT ? k_op_names[k] : "invalid op";
}

/* ---------------------------------------------------------------------------------------
 * Accessors
 */
int ldt_comm_rank(const ldt_comm *c) { return c ? c->rank : -1; }
int ldt_comm_size(const ldt_comm *c) { return c ? c->size : 0; }
int ldt_comm_world_rank(const ldt_comm *c, int r) {
    return c && r >= 0 && r < c->size ? c->world_ranks[r] : -1;
}
const char *ldt_comm_backend(const ldt_comm *c) { return c ? c->vt->name : "none"; }

void ldt__comm_abort(ldt_comm *c, const char *why) {
    if (c && c->vt->abort) c->vt->abort(c, why ? why : "");
}

ldt_status ldt__comm_timeout(const ldt_comm_options *opts, const char *who, int64_t *out) {
    const char *env;
    int64_t t = opts ? opts->timeout_ms : 0;
    if (t < 0 && t != LDT_COMM_NO_TIMEOUT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: timeout_ms is %lld, expected > 0, 0 for the default (LDT_COMM_TIMEOUT_MS, "
                 "else %d) or LDT_COMM_NO_TIMEOUT",
                 who, (long long)t, LDT__COMM_DEFAULT_TIMEOUT_MS);
    if (t == 0 && (env = getenv("LDT_COMM_TIMEOUT_MS")) != NULL) {
        char *end;
        errno = 0;
        long long v = strtoll(env, &end, 10);
        if (*env == '\0' || *end != '\0' || v < 0 || errno)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: LDT_COMM_TIMEOUT_MS is '%.40s', expected milliseconds (0: no timeout)",
                     who, env);
        t = v ? (int64_t)v : LDT_COMM_NO_TIMEOUT;
    }
    if (t == 0 && (env = getenv("LDT_NCCL_TIMEOUT_MS")) != NULL && atoll(env) > 0) t = atoll(env);
    if (t == 0) t = LDT__COMM_DEFAULT_TIMEOUT_MS;
    *out = t == LDT_COMM_NO_TIMEOUT || t > LDT__COMM_FOREVER_MS ? LDT__COMM_FOREVER_MS : t;
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Argument checks. Each returns LDT_OK or sets a message naming the op, the argument, its
 * value and what was expected.
 */
static ldt_status check_comm(const ldt_comm *c, const char *op) {
    if (!c) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: comm is NULL", op);
    return LDT_OK;
}

static ldt_status check_dtype(ldt_dtype dt, const char *op) {
    if ((int)dt < 0 || dt >= LDT_DTYPE_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: invalid dtype %d, expected one of f32 f64 f16 bf16 i32 i64 u8 bool", op,
                 (int)dt);
    return LDT_OK;
}

static ldt_status check_reduce(ldt_reduce_op rop, ldt_dtype dt, const char *op) {
    if ((int)rop < LDT_REDUCE_SUM || rop > LDT_REDUCE_MIN)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: invalid reduce op %d, expected sum, avg, max or min", op, (int)rop);
    if (rop == LDT_REDUCE_AVG && dt == LDT_BOOL)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: avg is not defined for bool, expected sum or max (OR) or min (AND)", op);
    return LDT_OK;
}

/* count >= 0 and count * mult elements of dt fit in int64 bytes. */
static ldt_status check_count(int64_t count, int64_t mult, ldt_dtype dt, const char *op,
                              const char *what) {
    if (count < 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s is %lld, expected >= 0", op, what,
                            (long long)count);
    int64_t es = (int64_t)ldt_dtype_size(dt);
    if (count > INT64_MAX / mult / es)
        LDT_FAIL(LDT_ERR_OVERFLOW, "%s: %s %lld of %s (x%lld) overflows a 64-bit byte size", op,
                 what, (long long)count, ldt_dtype_name(dt), (long long)mult);
    return LDT_OK;
}

static ldt_status check_buf(const void *p, int64_t count, const char *op, const char *what) {
    if (!p && count > 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s is NULL but it should hold %lld elements", op,
                 what, (long long)count);
    return LDT_OK;
}

/* An array of n non-negative counts whose sum fits; *total gets the sum. */
static ldt_status check_counts(const int64_t *counts, int n, ldt_dtype dt, const char *op,
                               const char *what, int64_t *total) {
    if (!counts)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s is NULL, expected %d entries (one per rank)",
                 op, what, n);
    int64_t es = (int64_t)ldt_dtype_size(dt), sum = 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s[%d] is %lld, expected >= 0", op, what, i,
                     (long long)counts[i]);
        if (counts[i] > INT64_MAX / es - sum)
            LDT_FAIL(LDT_ERR_OVERFLOW, "%s: %s overflow a 64-bit byte size at [%d]", op, what, i);
        sum += counts[i];
    }
    *total = sum;
    return LDT_OK;
}

static int64_t prefix_sum(const int64_t *counts, int upto) {
    int64_t s = 0;
    for (int i = 0; i < upto; i++) s += counts[i];
    return s;
}

/* Byte ranges [a, a+an) and [b, b+bn) intersect (empty ranges never do). Compared as
 * integers: relational operators on pointers to different objects are undefined. */
static int overlaps(const void *a, int64_t an, const void *b, int64_t bn) {
    if (an <= 0 || bn <= 0) return 0;
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b; /* distances, so huge sizes cannot wrap */
    return x >= y ? x - y < (uintptr_t)bn : y - x < (uintptr_t)an;
}

/* Overlapping send and recv is refused except in the layouts the backends handle in place:
 * `exact` is where recv (or send) must then start. */
static ldt_status check_overlap(const void *send, int64_t sbytes, const void *recv,
                                int64_t rbytes, const void *exact, const char *op,
                                const char *allowed) {
    if (!overlaps(send, sbytes, recv, rbytes)) return LDT_OK;
    if (exact) return LDT_OK;
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: send and recv overlap; %s", op, allowed);
}

/* ---------------------------------------------------------------------------------------
 * The group queue: calls between group_start and group_end on this thread.
 */
typedef struct queued {
    ldt_comm *c;
    ldt__op op;
    int64_t *owned; /* copies of the op's count arrays: the caller's may be gone by then */
} queued;

typedef struct group_queue {
    int active;
    queued *items;
    int n, cap;
    ldt_status err; /* the first error of a call inside the group, reported by group_end */
    char msg[1024];
} group_queue;

static _Thread_local group_queue tl_group;

static void group_free(void) {
    for (int i = 0; i < tl_group.n; i++) free(tl_group.items[i].owned);
    free(tl_group.items);
    tl_group.items = NULL;
    tl_group.n = tl_group.cap = 0;
    tl_group.active = 0;
    tl_group.err = LDT_OK;
    tl_group.msg[0] = '\0';
}

int ldt__group_discard(void) {
    int was = tl_group.active;
    group_free();
    return was;
}

/* Inside a group the first error sticks until group_end, as NCCL's do. */
static ldt_status group_note(ldt_status st) {
    if (st != LDT_OK && tl_group.active && tl_group.err == LDT_OK) {
        tl_group.err = st;
        snprintf(tl_group.msg, sizeof tl_group.msg, "%s", ldt_last_error());
    }
    return st;
}

static int64_t *dup_counts(const int64_t *a, int n, int64_t *dst) {
    if (!a) return NULL;
    memcpy(dst, a, (size_t)n * sizeof *dst);
    return dst;
}

static ldt_status enqueue(ldt_comm *c, const ldt__op *op) {
    if (tl_group.n == tl_group.cap) {
        int cap = tl_group.cap ? 2 * tl_group.cap : 16;
        queued *items = realloc(tl_group.items, (size_t)cap * sizeof *items);
        if (!items)
            return group_note(ldt__error(LDT_ERR_OUT_OF_MEMORY, "group: out of memory queueing %s",
                                         ldt__comm_op_name(op->kind)));
        tl_group.items = items;
        tl_group.cap = cap;
    }
    queued q = {c, *op, NULL};
    int arrays = (op->counts != NULL) + 4 * (op->sendcounts != NULL);
    if (arrays) {
        q.owned = malloc((size_t)arrays * (size_t)c->size * sizeof *q.owned);
        if (!q.owned)
            return group_note(ldt__error(LDT_ERR_OUT_OF_MEMORY, "group: out of memory queueing %s",
                                         ldt__comm_op_name(op->kind)));
        int64_t *p = q.owned;
        if (op->counts) {
            q.op.counts = dup_counts(op->counts, c->size, p);
            p += c->size;
        }
        if (op->sendcounts) {
            q.op.sendcounts = dup_counts(op->sendcounts, c->size, p);
            q.op.sdispls = dup_counts(op->sdispls, c->size, p + c->size);
            q.op.recvcounts = dup_counts(op->recvcounts, c->size, p + 2 * c->size);
            q.op.rdispls = dup_counts(op->rdispls, c->size, p + 3 * c->size);
        }
    }
    tl_group.items[tl_group.n++] = q;
    return LDT_OK;
}

/* Runs a checked op now, or queues it inside a group. */
static ldt_status submit(ldt_comm *c, const ldt__op *op) {
    if (tl_group.active) return enqueue(c, op);
    if (op->kind == LDT__OP_SEND) {
        ldt__send_req *req = NULL;
        LDT_CHECK(c->vt->send_post(c, op, &req));
        LDT_CHECK(c->vt->send_wait(req));
        return LDT_OK;
    }
    if (op->kind == LDT__OP_RECV) {
        LDT_CHECK(c->vt->recv(c, op));
        return LDT_OK;
    }
    LDT_CHECK(c->vt->collective(c, op));
    return LDT_OK;
}

ldt_status ldt_group_start(void) {
    if (tl_group.active)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "group_start: groups do not nest: this thread already called group_start, "
                 "expected group_end first");
    group_free();
    tl_group.active = 1;
    return LDT_OK;
}

ldt_status ldt_group_end(void) {
    if (!tl_group.active)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "group_end: no group_start on this thread");
    tl_group.active = 0; /* calls from here on run at once */
    if (tl_group.err != LDT_OK) {
        ldt_status st = tl_group.err;
        ldt__error(st, "group_end: a call in the group failed, nothing was issued: %s",
                   tl_group.msg);
        group_free();
        return ldt__trace(st, __FILE__, __LINE__);
    }
    int n = tl_group.n;
    queued *items = tl_group.items;
    ldt__send_req **reqs = n ? calloc((size_t)n, sizeof *reqs) : NULL;
    ldt_status st = LDT_OK;
    if (n && !reqs) {
        group_free();
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "group_end: out of memory for %d queued calls", n);
    }
    /* Sends first without waiting, then collectives in call order, then receives, then the
     * sends' completion: two ranks that each send to and receive from the other in a group
     * both find their peer's send posted when they reach their receive. */
    for (int i = 0; i < n && st == LDT_OK; i++)
        if (items[i].op.kind == LDT__OP_SEND)
            st = items[i].c->vt->send_post(items[i].c, &items[i].op, &reqs[i]);
    for (int i = 0; i < n && st == LDT_OK; i++) {
        ldt__op_kind k = items[i].op.kind;
        if (k != LDT__OP_SEND && k != LDT__OP_RECV)
            st = items[i].c->vt->collective(items[i].c, &items[i].op);
    }
    for (int i = 0; i < n && st == LDT_OK; i++)
        if (items[i].op.kind == LDT__OP_RECV) st = items[i].c->vt->recv(items[i].c, &items[i].op);
    for (int i = 0; i < n; i++) {
        if (!reqs[i]) continue;
        if (st == LDT_OK)
            st = items[i].c->vt->send_wait(reqs[i]);
        else
            items[i].c->vt->send_cancel(reqs[i]);
    }
    free(reqs);
    group_free();
    if (st != LDT_OK) return ldt__trace(ldt__error_prefix(st, "group_end"), __FILE__, __LINE__);
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * Communicator construction
 */
ldt_status ldt_comm_group(ldt_comm *c, int n, const int *ranks, ldt_comm **out) {
    LDT_CHECK(check_comm(c, "comm_group"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_group: out is NULL");
    *out = NULL;
    if (n < 1 || n > c->world_size)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_group: n is %d, expected 1..%d (the world size)",
                 n, c->world_size);
    if (!ranks) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_group: ranks is NULL, expected %d", n);
    int me = c->world_ranks[c->rank], found = 0;
    unsigned char *seen = calloc((size_t)c->world_size, 1);
    if (!seen) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "comm_group: out of memory");
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= c->world_size) {
            free(seen);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "comm_group: ranks[%d] is %d, expected a world rank in 0..%d", i, ranks[i],
                     c->world_size - 1);
        }
        if (seen[ranks[i]]) {
            free(seen);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "comm_group: rank %d appears twice in ranks, expected distinct ranks",
                     ranks[i]);
        }
        seen[ranks[i]] = 1;
        found |= ranks[i] == me;
    }
    free(seen);
    if (!found)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "comm_group: ranks does not contain the calling rank %d (world), expected every "
                 "member to call with a list that holds it",
                 me);
    LDT_CHECK(c->vt->group(c, n, ranks, out));
    return LDT_OK;
}

ldt_status ldt_comm_mesh_dim(ldt_comm *c, const ldt_mesh *mesh, int dim, ldt_comm **out) {
    LDT_CHECK(check_comm(c, "comm_mesh_dim"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_mesh_dim: out is NULL");
    *out = NULL;
    if (!mesh) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_mesh_dim: mesh is NULL");
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "comm_mesh_dim: the mesh is on the meta device, which has no communicator");
    int ndim = ldt_mesh_ndim(mesh);
    if (dim < 0 || dim >= ndim)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "comm_mesh_dim: dim is %d, expected 0..%d", dim,
                 ndim - 1);
    int64_t n = ldt_mesh_dim_size(mesh, dim);
    if (n < 1 || n > c->world_size)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "comm_mesh_dim: mesh dim %d has %lld ranks but the world has %d", dim,
                 (long long)n, c->world_size);
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (!ranks) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "comm_mesh_dim: out of memory");
    ldt_status st = ldt_mesh_group(mesh, c->world_ranks[c->rank], dim, ranks);
    if (st != LDT_OK) {
        free(ranks);
        ldt__error_prefix(st, "comm_mesh_dim");
        return ldt__trace(st, __FILE__, __LINE__);
    }
    st = ldt_comm_group(c, (int)n, ranks, out);
    free(ranks);
    if (st != LDT_OK) return ldt__trace(st, __FILE__, __LINE__);
    return LDT_OK;
}

void ldt_comm_destroy(ldt_comm *c) {
    if (c && !c->is_world) c->vt->destroy(c);
}

/* ---------------------------------------------------------------------------------------
 * Collectives: check, then run or queue. The checks are the same inside a group, so a bad
 * call is reported at once as well as by group_end.
 */
static ldt_status check_reduce_args(ldt_comm *c, ldt_dtype dt, ldt_reduce_op rop,
                                    const char *op) {
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_reduce(rop, dt, op));
    return LDT_OK;
}

/* An all_reduce's arguments but the communicator. */
static ldt_status check_all_reduce(const void *send, const void *recv, int64_t count,
                                   ldt_dtype dt, ldt_reduce_op rop) {
    const char *op = "all_reduce";
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_reduce(rop, dt, op));
    LDT_CHECK(check_count(count, 1, dt, op, "count"));
    LDT_CHECK(check_buf(send, count, op, "send"));
    LDT_CHECK(check_buf(recv, count, op, "recv"));
    int64_t bytes = count * (int64_t)ldt_dtype_size(dt);
    LDT_CHECK(check_overlap(send, bytes, recv, bytes, send == recv ? recv : NULL, op,
                            "in place, send and recv must be the same pointer"));
    return LDT_OK;
}

static ldt_status all_reduce_submit(ldt_comm *c, const void *send, void *recv, int64_t count,
                                    ldt_dtype dt, ldt_reduce_op rop) {
    ldt__op o = {.kind = LDT__OP_ALL_REDUCE, .dtype = dt, .reduce = rop, .count = count,
                 .send = send, .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

static ldt_status all_reduce(ldt_comm *c, const void *send, void *recv, int64_t count,
                             ldt_dtype dt, ldt_reduce_op rop) {
    LDT_CHECK(check_comm(c, "all_reduce"));
    LDT_CHECK(check_all_reduce(send, recv, count, dt, rop));
    return all_reduce_submit(c, send, recv, count, dt, rop);
}

ldt_status ldt__all_reduce_check(const void *send, const void *recv, int64_t count, ldt_dtype dt,
                                 ldt_reduce_op rop) {
    return check_all_reduce(send, recv, count, dt, rop);
}

ldt_status ldt__all_reduce_bound(ldt_comm *c, const void *send, void *recv, int64_t count,
                                 ldt_dtype dt, ldt_reduce_op rop) {
    return group_note(all_reduce_submit(c, send, recv, count, dt, rop));
}

ldt_status ldt_all_reduce(ldt_comm *c, const void *send, void *recv, int64_t count, ldt_dtype dt,
                          ldt_reduce_op rop) {
    return group_note(all_reduce(c, send, recv, count, dt, rop));
}

static ldt_status reduce_scatter(ldt_comm *c, const void *send, void *recv, int64_t count,
                                 ldt_dtype dt, ldt_reduce_op rop) {
    const char *op = "reduce_scatter";
    LDT_CHECK(check_reduce_args(c, dt, rop, op));
    LDT_CHECK(check_count(count, c->size, dt, op, "count"));
    LDT_CHECK(check_buf(send, count * c->size, op, "send"));
    LDT_CHECK(check_buf(recv, count, op, "recv"));
    int64_t es = (int64_t)ldt_dtype_size(dt);
    const char *mine = (const char *)send + (send ? count * es * c->rank : 0);
    LDT_CHECK(check_overlap(send, count * es * c->size, recv, count * es,
                            mine == (const char *)recv ? recv : NULL, op,
                            "in place, recv must be send + rank*count"));
    ldt__op o = {.kind = LDT__OP_REDUCE_SCATTER, .dtype = dt, .reduce = rop, .count = count,
                 .send = send, .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_reduce_scatter(ldt_comm *c, const void *send, void *recv, int64_t count,
                              ldt_dtype dt, ldt_reduce_op rop) {
    return group_note(reduce_scatter(c, send, recv, count, dt, rop));
}

static ldt_status reduce_scatter_v(ldt_comm *c, const void *send, void *recv,
                                   const int64_t *counts, ldt_dtype dt, ldt_reduce_op rop) {
    const char *op = "reduce_scatter_v";
    int64_t total;
    LDT_CHECK(check_reduce_args(c, dt, rop, op));
    LDT_CHECK(check_counts(counts, c->size, dt, op, "counts", &total));
    LDT_CHECK(check_buf(send, total, op, "send"));
    LDT_CHECK(check_buf(recv, counts[c->rank], op, "recv"));
    int64_t es = (int64_t)ldt_dtype_size(dt);
    const char *mine = (const char *)send + (send ? prefix_sum(counts, c->rank) * es : 0);
    LDT_CHECK(check_overlap(send, total * es, recv, counts[c->rank] * es,
                            mine == (const char *)recv ? recv : NULL, op,
                            "in place, recv must be send + sum(counts[0..rank))"));
    ldt__op o = {.kind = LDT__OP_REDUCE_SCATTER_V, .dtype = dt, .reduce = rop, .counts = counts,
                 .send = send, .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_reduce_scatter_v(ldt_comm *c, const void *send, void *recv, const int64_t *counts,
                                ldt_dtype dt, ldt_reduce_op rop) {
    return group_note(reduce_scatter_v(c, send, recv, counts, dt, rop));
}

static ldt_status all_gather(ldt_comm *c, const void *send, void *recv, int64_t count,
                             ldt_dtype dt) {
    const char *op = "all_gather";
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_count(count, c->size, dt, op, "count"));
    LDT_CHECK(check_buf(send, count, op, "send"));
    LDT_CHECK(check_buf(recv, count * c->size, op, "recv"));
    int64_t es = (int64_t)ldt_dtype_size(dt);
    const char *mine = (const char *)recv + (recv ? count * es * c->rank : 0);
    LDT_CHECK(check_overlap(send, count * es, recv, count * es * c->size,
                            mine == (const char *)send ? send : NULL, op,
                            "in place, send must be recv + rank*count"));
    ldt__op o = {.kind = LDT__OP_ALL_GATHER, .dtype = dt, .count = count, .send = send,
                 .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_all_gather(ldt_comm *c, const void *send, void *recv, int64_t count,
                          ldt_dtype dt) {
    return group_note(all_gather(c, send, recv, count, dt));
}

static ldt_status all_gather_v(ldt_comm *c, const void *send, void *recv, const int64_t *counts,
                               ldt_dtype dt) {
    const char *op = "all_gather_v";
    int64_t total;
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_counts(counts, c->size, dt, op, "counts", &total));
    LDT_CHECK(check_buf(send, counts[c->rank], op, "send"));
    LDT_CHECK(check_buf(recv, total, op, "recv"));
    int64_t es = (int64_t)ldt_dtype_size(dt);
    const char *mine = (const char *)recv + (recv ? prefix_sum(counts, c->rank) * es : 0);
    LDT_CHECK(check_overlap(send, counts[c->rank] * es, recv, total * es,
                            mine == (const char *)send ? send : NULL, op,
                            "in place, send must be recv + sum(counts[0..rank))"));
    ldt__op o = {.kind = LDT__OP_ALL_GATHER_V, .dtype = dt, .counts = counts, .send = send,
                 .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_all_gather_v(ldt_comm *c, const void *send, void *recv, const int64_t *counts,
                            ldt_dtype dt) {
    return group_note(all_gather_v(c, send, recv, counts, dt));
}

static ldt_status all_to_all(ldt_comm *c, const void *send, void *recv, int64_t count,
                             ldt_dtype dt) {
    const char *op = "all_to_all";
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_count(count, c->size, dt, op, "count"));
    LDT_CHECK(check_buf(send, count * c->size, op, "send"));
    LDT_CHECK(check_buf(recv, count * c->size, op, "recv"));
    int64_t bytes = count * c->size * (int64_t)ldt_dtype_size(dt);
    LDT_CHECK(check_overlap(send, bytes, recv, bytes, NULL, op,
                            "all_to_all has no in-place form, expected separate buffers"));
    ldt__op o = {.kind = LDT__OP_ALL_TO_ALL, .dtype = dt, .count = count, .send = send,
                 .recv = recv};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_all_to_all(ldt_comm *c, const void *send, void *recv, int64_t count,
                          ldt_dtype dt) {
    return group_note(all_to_all(c, send, recv, count, dt));
}

/* counts[p] elements at displs[p] for every p: non-negative, and the extent (the largest
 * displs[p] + counts[p] over non-empty segments) fits; *extent gets it. */
static ldt_status check_displs(const int64_t *counts, const int64_t *displs, int n, ldt_dtype dt,
                               const char *op, const char *cname, const char *dname,
                               int64_t *extent) {
    int64_t total;
    LDT_CHECK(check_counts(counts, n, dt, op, cname, &total));
    if (!displs)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s is NULL, expected %d entries (one per rank)",
                 op, dname, n);
    int64_t es = (int64_t)ldt_dtype_size(dt), ext = 0;
    for (int p = 0; p < n; p++) {
        if (displs[p] < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %s[%d] is %lld, expected >= 0", op, dname, p,
                     (long long)displs[p]);
        if (counts[p] == 0) continue;
        if (displs[p] > INT64_MAX / es - counts[p])
            LDT_FAIL(LDT_ERR_OVERFLOW, "%s: %s[%d] + %s[%d] overflows a 64-bit byte size", op,
                     dname, p, cname, p);
        if (displs[p] + counts[p] > ext) ext = displs[p] + counts[p];
    }
    *extent = ext;
    return LDT_OK;
}

static ldt_status all_to_all_v(ldt_comm *c, const void *send, const int64_t *sendcounts,
                               const int64_t *sdispls, void *recv, const int64_t *recvcounts,
                               const int64_t *rdispls, ldt_dtype dt) {
    const char *op = "all_to_all_v";
    int64_t sext, rext;
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_displs(sendcounts, sdispls, c->size, dt, op, "sendcounts", "sdispls", &sext));
    LDT_CHECK(check_displs(recvcounts, rdispls, c->size, dt, op, "recvcounts", "rdispls", &rext));
    LDT_CHECK(check_buf(send, sext, op, "send"));
    LDT_CHECK(check_buf(recv, rext, op, "recv"));
    int64_t es = (int64_t)ldt_dtype_size(dt);
    LDT_CHECK(check_overlap(send, sext * es, recv, rext * es, NULL, op,
                            "all_to_all_v has no in-place form, expected separate buffers"));
    ldt__op o = {.kind = LDT__OP_ALL_TO_ALL_V, .dtype = dt, .send = send, .recv = recv,
                 .sendcounts = sendcounts, .sdispls = sdispls, .recvcounts = recvcounts,
                 .rdispls = rdispls};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_all_to_all_v(ldt_comm *c, const void *send, const int64_t *sendcounts,
                            const int64_t *sdispls, void *recv, const int64_t *recvcounts,
                            const int64_t *rdispls, ldt_dtype dt) {
    return group_note(
        all_to_all_v(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, dt));
}

static ldt_status broadcast(ldt_comm *c, void *buf, int64_t count, ldt_dtype dt, int root) {
    const char *op = "broadcast";
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_count(count, 1, dt, op, "count"));
    LDT_CHECK(check_buf(buf, count, op, "buf"));
    if (root < 0 || root >= c->size)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: root is %d, expected a rank in 0..%d", op, root,
                 c->size - 1);
    ldt__op o = {.kind = LDT__OP_BROADCAST, .dtype = dt, .count = count, .send = buf,
                 .recv = buf, .root = root};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_broadcast(ldt_comm *c, void *buf, int64_t count, ldt_dtype dt, int root) {
    return group_note(broadcast(c, buf, count, dt, root));
}

static ldt_status p2p(ldt_comm *c, const void *sbuf, void *rbuf, int64_t count, ldt_dtype dt,
                      int peer, ldt__op_kind kind) {
    const char *op = ldt__comm_op_name(kind);
    LDT_CHECK(check_comm(c, op));
    LDT_CHECK(check_dtype(dt, op));
    LDT_CHECK(check_count(count, 1, dt, op, "count"));
    LDT_CHECK(check_buf(kind == LDT__OP_SEND ? sbuf : rbuf, count, op, "buf"));
    if (peer < 0 || peer >= c->size)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: peer is %d, expected a rank in 0..%d", op, peer,
                 c->size - 1);
    /* Alone, a blocking send to oneself can never be received (and a recv never sent). */
    if (peer == c->rank && !tl_group.active)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "%s: peer %d is the calling rank; to self it only works inside "
                 "group_start/group_end",
                 op, peer);
    ldt__op o = {.kind = kind, .dtype = dt, .count = count, .send = sbuf, .recv = rbuf,
                 .root = peer};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_send(ldt_comm *c, const void *buf, int64_t count, ldt_dtype dt, int peer) {
    return group_note(p2p(c, buf, NULL, count, dt, peer, LDT__OP_SEND));
}

ldt_status ldt_recv(ldt_comm *c, void *buf, int64_t count, ldt_dtype dt, int peer) {
    return group_note(p2p(c, NULL, buf, count, dt, peer, LDT__OP_RECV));
}

static ldt_status barrier(ldt_comm *c) {
    LDT_CHECK(check_comm(c, "barrier"));
    ldt__op o = {.kind = LDT__OP_BARRIER, .dtype = LDT_U8};
    LDT_CHECK(submit(c, &o));
    return LDT_OK;
}

ldt_status ldt_barrier(ldt_comm *c) { return group_note(barrier(c)); }
