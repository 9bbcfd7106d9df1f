/* comm_threads benchmark: all_reduce and all_gather (f32 sum) on 2, 4 and 8 rank threads from
 * 4 KiB to 256 MiB, each beside a memcpy by the same threads timed in the same rounds: per
 * round, the threads copy size/n bytes each at once (memcpy bandwidth = size / time), then
 * pass size/n bytes each around a ring with send/recv (sendrecv_gbps = size/n / time: what
 * one rank receives), then run the all_reduce, then the all_gather; each starts after a barrier and is timed from
 * there to its end (the copy ends at a barrier, as the collectives do); medians over the
 * rounds. Bandwidths follow nccl-tests: algorithm bandwidth = tensor bytes / time, bus
 * bandwidth = algorithm bandwidth x 2(n-1)/n for all_reduce and (n-1)/n for all_gather.
 * Every figure has its _cpu twin: the same with the process's CPU seconds over the interval,
 * divided by the n threads, in place of wall seconds. allreduce_over_memcpy (64 MiB, 4 ranks)
 * is the all_reduce bus bandwidth over that memcpy bandwidth. recv_wait_cpu_share: on 4 rank
 * threads, rank 0 waits in a recv for rank 1, which sends after ranks 2 and 3 have passed
 * 1 KiB back and forth some thousands of times (rank 1 waits at a barrier of the three):
 * the CPU time rank 0's thread used over its wait (0: it slept; near 1: it spun). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "ldt/exec.h"

#define KiB ((int64_t)1 << 10)
#define MiB ((int64_t)1 << 20)
#define MAX_SIZES 16
#define MAX_REPS 200

/* The call cannot be proven useless and dropped, as a plain memcpy into a buffer nobody
 * reads afterwards can. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

enum { OP_MEMCPY, OP_SEND_RECV, OP_ALL_REDUCE, OP_ALL_GATHER, NOPS };

typedef struct run_ctx {
    int nsizes;
    int64_t sizes[MAX_SIZES]; /* full tensor bytes */
    int reps[MAX_SIZES];
    int64_t max_bytes;
    /* medians, written by rank 0: seconds per op, wall and CPU (over the n threads) */
    double wall[MAX_SIZES][NOPS], cpu[MAX_SIZES][NOPS];
} run_ctx;

static int reps_for(int64_t bytes, int quick) {
    int64_t budget = quick ? 32 * MiB : 512 * MiB; /* bytes moved per point, roughly */
    int64_t r = budget / bytes;
    int lo = quick ? 3 : 5;
    return r < lo ? lo : r > MAX_REPS ? MAX_REPS : (int)r;
}

typedef struct bufs {
    float *send, *recv;
    char *copy; /* the memcpy's destination: size/n bytes */
} bufs;

static ldt_status run_op(ldt_comm *w, int op, const bufs *b, int64_t bytes) {
    int n = ldt_comm_size(w);
    switch (op) {
    case OP_MEMCPY:
        memcpy_fn(b->copy, (const char *)b->send, (size_t)(bytes / n));
        return ldt_barrier(w); /* the copy is done when every thread's is */
    case OP_SEND_RECV: { /* a ring: size/n bytes to the next rank, from the previous one */
        int r = ldt_comm_rank(w);
        ldt_status st = ldt_group_start();
        if (st != LDT_OK) return st;
        st = ldt_send(w, b->send, bytes / 4 / n, LDT_F32, (r + 1) % n);
        ldt_status st2 = ldt_recv(w, b->recv, bytes / 4 / n, LDT_F32, (r + n - 1) % n);
        ldt_status st3 = ldt_group_end();
        return st != LDT_OK ? st : st2 != LDT_OK ? st2 : st3;
    }
    case OP_ALL_REDUCE: return ldt_all_reduce(w, b->send, b->recv, bytes / 4, LDT_F32, LDT_REDUCE_SUM);
    default: return ldt_all_gather(w, b->send, b->recv, bytes / 4 / n, LDT_F32);
    }
}

/* Times `reps` rounds of the three ops after a warm-up round; rank 0 keeps the medians. */
static ldt_status time_size(ldt_comm *w, run_ctx *ctx, int s, const bufs *b) {
    double t[NOPS][2][MAX_REPS];
    int64_t bytes = ctx->sizes[s];
    int reps = ctx->reps[s], n = ldt_comm_size(w);
    ldt_status st;
    for (int op = 0; op < NOPS; op++)
        if ((st = run_op(w, op, b, bytes)) != LDT_OK) return st;
    for (int i = 0; i < reps; i++)
        for (int op = 0; op < NOPS; op++) {
            bench_clock c0, d;
            if ((st = ldt_barrier(w)) != LDT_OK) return st;
            c0 = bench_clock_now();
            if ((st = run_op(w, op, b, bytes)) != LDT_OK) return st;
            d = bench_clock_since(c0, n);
            t[op][0][i] = d.wall;
            t[op][1][i] = d.cpu;
        }
    if (ldt_comm_rank(w) == 0)
        for (int op = 0; op < NOPS; op++) {
            ctx->wall[s][op] = bench_median(t[op][0], reps);
            ctx->cpu[s][op] = bench_median(t[op][1], reps);
        }
    return LDT_OK;
}

static ldt_status rank_fn(ldt_comm *w, void *arg) {
    run_ctx *ctx = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    size_t cap = (size_t)ctx->max_bytes;
    bufs b = {malloc(cap), malloc(cap), malloc(cap / (size_t)n + 64)};
    ldt_status st = LDT_OK;
    if (!b.send || !b.recv || !b.copy) {
        st = LDT_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t i = 0; i < cap / 4; i++) b.send[i] = (float)(r + 1);
    memset(b.recv, 0, cap); /* fault the pages in before timing */
    memset(b.copy, 0, cap / (size_t)n + 64);
    for (int s = 0; s < ctx->nsizes && st == LDT_OK; s++) {
        int64_t bytes = ctx->sizes[s], count = bytes / 4;
        st = time_size(w, ctx, s, &b);
        /* A benchmark of wrong results is worthless: check the ends (all_gather ran last,
         * and an all_reduce once more). */
        if (st == LDT_OK && (b.recv[0] != 1.0f || b.recv[count - 1] != (float)n))
            st = LDT_ERR_INTERNAL;
        if (st == LDT_OK) st = run_op(w, OP_SEND_RECV, &b, bytes);
        if (st == LDT_OK && (b.recv[0] != (float)((r + n - 1) % n + 1) ||
                             b.recv[count / n - 1] != (float)((r + n - 1) % n + 1)))
            st = LDT_ERR_INTERNAL;
        if (st == LDT_OK) st = run_op(w, OP_ALL_REDUCE, &b, bytes);
        if (st == LDT_OK && (b.recv[0] != (float)(n * (n + 1) / 2) ||
                             b.recv[count - 1] != (float)(n * (n + 1) / 2)))
            st = LDT_ERR_INTERNAL;
    }
done:
    free(b.send);
    free(b.recv);
    free(b.copy);
    return st;
}

/* Keeps every world's buffers (2 x max bytes per rank) within half the memory. */
static int64_t memory_cap(void) {
#ifdef _SC_PHYS_PAGES
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (int64_t)pages * page / 2;
#endif
    return (int64_t)8 << 30;
}

static int add_point(bench_results *out, const char *name, double gbps, double gbps_cpu, int ranks,
                     int64_t bytes) {
    int i = bench_add_timed(out, name, gbps, gbps_cpu, "GB/s");
    if (i < 0) return -1;
    bench_param_int(out, i, "ranks", ranks);
    bench_param_int(out, i, "bytes", bytes);
    return 0;
}

static double thread_cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct wait_ctx {
    int exchanges;
    double cpu, wall; /* rank 0's, over its recv */
} wait_ctx;

static ldt_status wait_fn(ldt_comm *w, void *arg) {
    wait_ctx *x = arg;
    int r = ldt_comm_rank(w);
    float b[512] = {0};
    ldt_status st = LDT_OK;
    ldt_comm *three = NULL;
    static const int k_three[] = {1, 2, 3};
    if (r == 0) {
        double c0 = thread_cpu_s(), t0 = bench_now();
        st = ldt_recv(w, b, 256, LDT_F32, 1);
        x->cpu = thread_cpu_s() - c0;
        x->wall = bench_now() - t0;
        return st;
    }
    if ((st = ldt_comm_group(w, 3, k_three, &three)) != LDT_OK) return st;
    for (int i = 0; r > 1 && i < x->exchanges && st == LDT_OK; i++) {
        int peer = r == 2 ? 3 : 2;
        if ((st = ldt_group_start()) != LDT_OK) break;
        ldt_status a = ldt_send(w, b, 256, LDT_F32, peer), c = ldt_recv(w, b + 256, 256, LDT_F32, peer);
        st = ldt_group_end();
        if (st == LDT_OK) st = a != LDT_OK ? a : c;
    }
    if (st == LDT_OK) st = ldt_barrier(three);
    if (st == LDT_OK && r == 1) st = ldt_send(w, b, 256, LDT_F32, 0);
    ldt_comm_destroy(three);
    return st;
}

int bench_comm_threads(const bench_opts *o, bench_results *out) {
    static const int k_ranks[] = {2, 4, 8};
    int64_t top = o->quick ? 16 * MiB : 256 * MiB;
    int64_t mem = memory_cap();

    for (size_t k = 0; k < sizeof k_ranks / sizeof k_ranks[0]; k++) {
        int n = k_ranks[k];
        run_ctx *ctx = calloc(1, sizeof *ctx);
        if (!ctx) return 1;
        for (int64_t b = 4 * KiB; b <= top && ctx->nsizes < MAX_SIZES; b *= 4) {
            if ((int64_t)n * 2 * b + b > mem) {
                bench_note("comm_threads: skipping %lld MiB on %d ranks: not enough memory",
                           (long long)(b / MiB), n);
                break;
            }
            ctx->sizes[ctx->nsizes++] = b;
        }
        if (o->quick && n == 4 && (int64_t)n * 2 * 64 * MiB <= mem) /* the ratio's point */
            ctx->sizes[ctx->nsizes++] = 64 * MiB;
        for (int s = 0; s < ctx->nsizes; s++) {
            ctx->reps[s] = reps_for(ctx->sizes[s], o->quick);
            if (ctx->sizes[s] > ctx->max_bytes) ctx->max_bytes = ctx->sizes[s];
        }
        bench_note("comm_threads: %d ranks, %d sizes up to %lld KiB", n, ctx->nsizes,
                   (long long)(ctx->max_bytes / KiB));
        ldt_status st = ldt_threads_launch(n, NULL, rank_fn, ctx);
        if (st != LDT_OK) {
            bench_note("comm_threads: %d ranks failed: %s (%s)", n, ldt_status_name(st),
                       ldt_last_error());
            free(ctx);
            return 1;
        }
        for (int s = 0; s < ctx->nsizes; s++) {
            double b = (double)ctx->sizes[s], arf = 2.0 * (n - 1) / n, agf = (double)(n - 1) / n;
            double *w = ctx->wall[s], *c = ctx->cpu[s];
            if (add_point(out, "memcpy_gbps", b / w[OP_MEMCPY] / 1e9, b / c[OP_MEMCPY] / 1e9, n,
                          ctx->sizes[s]) != 0 ||
                add_point(out, "sendrecv_gbps", b / n / w[OP_SEND_RECV] / 1e9,
                          b / n / c[OP_SEND_RECV] / 1e9, n, ctx->sizes[s]) != 0 ||
                add_point(out, "allreduce_gbps", arf * b / w[OP_ALL_REDUCE] / 1e9,
                          arf * b / c[OP_ALL_REDUCE] / 1e9, n, ctx->sizes[s]) != 0 ||
                add_point(out, "allreduce_algbw_gbps", b / w[OP_ALL_REDUCE] / 1e9,
                          b / c[OP_ALL_REDUCE] / 1e9, n, ctx->sizes[s]) != 0 ||
                add_point(out, "allgather_gbps", agf * b / w[OP_ALL_GATHER] / 1e9,
                          agf * b / c[OP_ALL_GATHER] / 1e9, n, ctx->sizes[s]) != 0 ||
                add_point(out, "allgather_algbw_gbps", b / w[OP_ALL_GATHER] / 1e9,
                          b / c[OP_ALL_GATHER] / 1e9, n, ctx->sizes[s]) != 0) {
                free(ctx);
                return 1;
            }
        }
        free(ctx);
    }

    double ar, mc, arc, mcc;
    if (bench_find(out, "allreduce_gbps", &ar, 2, "ranks", (int64_t)4, "bytes", 64 * MiB) &&
        bench_find(out, "memcpy_gbps", &mc, 2, "ranks", (int64_t)4, "bytes", 64 * MiB) &&
        bench_find(out, "allreduce_gbps_cpu", &arc, 2, "ranks", (int64_t)4, "bytes", 64 * MiB) &&
        bench_find(out, "memcpy_gbps_cpu", &mcc, 2, "ranks", (int64_t)4, "bytes", 64 * MiB)) {
        int i = bench_add_timed(out, "allreduce_over_memcpy", ar / mc, arc / mcc, "ratio");
        if (i < 0) return 1;
        bench_param_int(out, i, "ranks", 4);
        bench_param_int(out, i, "bytes", 64 * MiB);
        bench_goal(out, ar / mc >= 0.4, "allreduce_over_memcpy >= 0.4 at 64 MiB on 4 ranks (%.3f)",
                   ar / mc);
    }
    {
        wait_ctx x = {o->quick ? 2000 : 20000, 0, 0};
        ldt_status st = ldt_threads_launch(4, NULL, wait_fn, &x);
        if (st != LDT_OK) {
            bench_note("comm_threads: the recv wait failed: %s (%s)", ldt_status_name(st), ldt_last_error());
            return 1;
        }
        int i = bench_add(out, "recv_wait_cpu_share", x.wall > 0 ? x.cpu / x.wall : 0, "ratio");
        if (i < 0) return 1;
        bench_param_int(out, i, "ranks", 4);
        bench_param_int(out, i, "exchanges", x.exchanges);
        bench_note("comm_threads: rank 0 waited %.1f ms in a recv while 2 and 3 exchanged %d times, using %.1f ms "
                   "of CPU", x.wall * 1e3, x.exchanges, x.cpu * 1e3);
    }
    return 0;
}
