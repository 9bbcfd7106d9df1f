/* comm_threads benchmark: all_reduce and all_gather (f32 sum) bus bandwidth on 2, 4 and 8
 * rank threads from 4 KiB to 256 MiB, beside single-thread memcpy bandwidth measured in the
 * same run. Bus bandwidth follows nccl-tests: algorithm bandwidth = tensor bytes / time,
 * times 2(n-1)/n for all_reduce and (n-1)/n for all_gather. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct run_ctx {
    int nsizes;
    int64_t sizes[MAX_SIZES]; /* full tensor bytes */
    int reps[MAX_SIZES];
    int64_t max_bytes;
    double ar_s[MAX_SIZES]; /* median seconds, written by rank 0 */
    double ag_s[MAX_SIZES];
} run_ctx;

static int reps_for(int64_t bytes, int quick) {
    int64_t budget = quick ? 32 * MiB : 512 * MiB; /* bytes moved per point, roughly */
    int64_t r = budget / bytes;
    int lo = quick ? 3 : 5;
    return r < lo ? lo : r > MAX_REPS ? MAX_REPS : (int)r;
}

/* Times `reps` calls after a warm-up; rank 0 returns the median through *out. Every call
 * starts after a barrier, so the time is from the last rank's arrival to the end. */
typedef ldt_status (*op_fn)(ldt_comm *w, float *send, float *recv, int64_t bytes);

static ldt_status op_all_reduce(ldt_comm *w, float *send, float *recv, int64_t bytes) {
    return ldt_all_reduce(w, send, recv, bytes / 4, LDT_F32, LDT_REDUCE_SUM);
}

static ldt_status op_all_gather(ldt_comm *w, float *send, float *recv, int64_t bytes) {
    return ldt_all_gather(w, send, recv, bytes / 4 / ldt_comm_size(w), LDT_F32);
}

static ldt_status time_op(ldt_comm *w, op_fn fn, float *send, float *recv, int64_t bytes,
                          int reps, double *out) {
    double t[MAX_REPS];
    ldt_status st;
    for (int i = 0; i < 2; i++)
        if ((st = fn(w, send, recv, bytes)) != LDT_OK) return st;
    for (int i = 0; i < reps; i++) {
        if ((st = ldt_barrier(w)) != LDT_OK) return st;
        double t0 = bench_now();
        if ((st = fn(w, send, recv, bytes)) != LDT_OK) return st;
        t[i] = bench_now() - t0;
    }
    if (ldt_comm_rank(w) == 0) *out = bench_median(t, reps);
    return LDT_OK;
}

static ldt_status rank_fn(ldt_comm *w, void *arg) {
    run_ctx *ctx = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    size_t cap = (size_t)ctx->max_bytes;
    float *send = malloc(cap), *recv = malloc(cap);
    ldt_status st = LDT_OK;
    if (!send || !recv) {
        st = LDT_ERR_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t i = 0; i < cap / 4; i++) send[i] = (float)(r + 1);
    memset(recv, 0, cap); /* fault the pages in before timing */
    for (int s = 0; s < ctx->nsizes && st == LDT_OK; s++) {
        int64_t bytes = ctx->sizes[s], count = bytes / 4;
        st = time_op(w, op_all_reduce, send, recv, bytes, ctx->reps[s], &ctx->ar_s[s]);
        /* A benchmark of wrong results is worthless: check the ends. */
        if (st == LDT_OK && (recv[0] != (float)(n * (n + 1) / 2) ||
                             recv[count - 1] != (float)(n * (n + 1) / 2)))
            st = LDT_ERR_INTERNAL;
        if (st == LDT_OK)
            st = time_op(w, op_all_gather, send, recv, bytes, ctx->reps[s], &ctx->ag_s[s]);
        if (st == LDT_OK && (recv[0] != 1.0f || recv[count - 1] != (float)n))
            st = LDT_ERR_INTERNAL;
    }
done:
    free(send);
    free(recv);
    return st;
}

static double memcpy_seconds(int64_t bytes, int reps) {
    char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
    double t[MAX_REPS];
    if (!src || !dst) {
        free(src);
        free(dst);
        return -1;
    }
    memset(src, 1, (size_t)bytes);
    memset(dst, 2, (size_t)bytes);
    memcpy_fn(dst, src, (size_t)bytes);
    /* Small copies are repeated within a rep so each rep spans far more than the clock's
     * resolution. */
    int inner = bytes < MiB ? (int)(MiB / bytes) : 1;
    for (int i = 0; i < reps; i++) {
        double t0 = bench_now();
        for (int k = 0; k < inner; k++) memcpy_fn(dst, src, (size_t)bytes);
        t[i] = (bench_now() - t0) / inner;
    }
    free(src);
    free(dst);
    return bench_median(t, reps);
}

/* Keeps every world's buffers (2 x max bytes per rank) within half the memory. */
static int64_t memory_cap(void) {
#ifdef _SC_PHYS_PAGES
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (int64_t)pages * page / 2;
#endif
    return (int64_t)8 << 30;
}

static int add_point(bench_results *out, const char *name, double gbps, int ranks,
                     int64_t bytes) {
    int i = bench_add(out, name, gbps, "GB/s");
    if (i < 0) return -1;
    bench_param_int(out, i, "ranks", ranks);
    bench_param_int(out, i, "bytes", bytes);
    return 0;
}

int bench_comm_threads(const bench_opts *o, bench_results *out) {
    static const int k_ranks[] = {2, 4, 8};
    int64_t top = o->quick ? 16 * MiB : 256 * MiB;
    int64_t mem = memory_cap();

    /* memcpy at every size any world uses (64 MiB included for the ratio). */
    for (int64_t b = 4 * KiB; b <= (top > 64 * MiB ? top : 64 * MiB); b *= 4) {
        if (2 * b > mem) break;
        double s = memcpy_seconds(b, reps_for(b, o->quick));
        if (s <= 0) return 1;
        if (add_point(out, "memcpy_gbps", (double)b / s / 1e9, 1, b) != 0) return 1;
    }

    for (size_t k = 0; k < sizeof k_ranks / sizeof k_ranks[0]; k++) {
        int n = k_ranks[k];
        run_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        for (int64_t b = 4 * KiB; b <= top && ctx.nsizes < MAX_SIZES; b *= 4) {
            if ((int64_t)n * 2 * b > mem) {
                bench_note("comm_threads: skipping %lld MiB on %d ranks: not enough memory",
                           (long long)(b / MiB), n);
                break;
            }
            ctx.sizes[ctx.nsizes++] = b;
        }
        if (o->quick && n == 4 && (int64_t)n * 2 * 64 * MiB <= mem) /* the ratio's point */
            ctx.sizes[ctx.nsizes++] = 64 * MiB;
        for (int s = 0; s < ctx.nsizes; s++) {
            ctx.reps[s] = reps_for(ctx.sizes[s], o->quick);
            if (ctx.sizes[s] > ctx.max_bytes) ctx.max_bytes = ctx.sizes[s];
        }
        bench_note("comm_threads: %d ranks, %d sizes up to %lld KiB", n, ctx.nsizes,
                   (long long)(ctx.max_bytes / KiB));
        ldt_status st = ldt_threads_launch(n, NULL, rank_fn, &ctx);
        if (st != LDT_OK) {
            bench_note("comm_threads: %d ranks failed: %s (%s)", n, ldt_status_name(st),
                       ldt_last_error());
            return 1;
        }
        for (int s = 0; s < ctx.nsizes; s++) {
            double b = (double)ctx.sizes[s];
            double ar_bus = b / ctx.ar_s[s] / 1e9 * 2.0 * (n - 1) / n;
            double ag_bus = b / ctx.ag_s[s] / 1e9 * (double)(n - 1) / n;
            if (add_point(out, "allreduce_gbps", ar_bus, n, ctx.sizes[s]) != 0 ||
                add_point(out, "allgather_gbps", ag_bus, n, ctx.sizes[s]) != 0)
                return 1;
        }
    }

    double ar, mc;
    if (bench_find(out, "allreduce_gbps", &ar, 2, "ranks", (int64_t)4, "bytes", 64 * MiB) &&
        bench_find(out, "memcpy_gbps", &mc, 1, "bytes", 64 * MiB)) {
        int i = bench_add(out, "allreduce_over_memcpy", ar / mc, "ratio");
        if (i < 0) return 1;
        bench_param_int(out, i, "ranks", 4);
        bench_param_int(out, i, "bytes", 64 * MiB);
    }
    return 0;
}
