/* The communicator on the threaded backend: every collective on 1..8 ranks, every dtype and
 * reduce op, even and uneven counts, against a serial reference written here; groups and mesh
 * dims, send/recv and group_start/end, timeouts, failing ranks, mismatched calls and every
 * bad-input path. Rank functions cannot use Criterion's asserts (they run on other threads):
 * they return LDT_ERR_INTERNAL with a message naming the values that differ, which
 * ldt_threads_run hands back as "rank N: ...". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "core/error.h"
#include "exec/comm.h"
#include "exec/reduce.h"
#include "ldt/exec.h"
#include "tests/test_util.h"

static const ldt_dtype k_dtypes[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                     LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};
static const ldt_reduce_op k_ops[] = {LDT_REDUCE_SUM, LDT_REDUCE_AVG, LDT_REDUCE_MAX,
                                      LDT_REDUCE_MIN};
#define NDT 8
#define NOPS 4
#define MAXR 8

/* ---------------------------------------------------------------------------------------
 * Helpers
 */

/* A rank-side failure: the message travels back through ldt_threads_run. */
static ldt_status fail(const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ldt__error(LDT_ERR_INTERNAL, "%s", msg);
}

/* Checks inside rank functions; they return from the rank function on failure. */
#define RCHECK(cond, ...)                         \
    do {                                          \
        if (!(cond)) return fail(__VA_ARGS__);    \
    } while (0)

#define ROK(call)                                                                        \
    do {                                                                                 \
        ldt_status st_ = (call);                                                         \
        if (st_ != LDT_OK) {                                                             \
            char m_[700];                                                                \
            snprintf(m_, sizeof m_, "%s", ldt_last_error());                             \
            return fail("line %d: %s returned %s: %s", __LINE__, #call,                  \
                        ldt_status_name(st_), m_);                                       \
        }                                                                                \
    } while (0)

/* The call fails with `want` and a message containing `substr`. */
#define RERR(call, want, substr)                                                         \
    do {                                                                                 \
        ldt_status st_ = (call);                                                         \
        char m_[700];                                                                    \
        snprintf(m_, sizeof m_, "%s", ldt_last_error());                                 \
        if (st_ != (want))                                                               \
            return fail("line %d: %s returned %s, expected %s (message: %s)", __LINE__,  \
                        #call, ldt_status_name(st_), ldt_status_name(want), m_);         \
        if (!strstr(m_, (substr)))                                                       \
            return fail("line %d: %s: message '%s' does not mention '%s'", __LINE__,     \
                        #call, m_, (substr));                                            \
    } while (0)

/* The same, on the test's own thread. */
#define EXPECT_ERR(call, want, substr)                                                       \
    do {                                                                                     \
        ldt_status st_ = (call);                                                             \
        cr_assert_eq(st_, (want), "%s returned %s, expected %s (message: %s)", #call,        \
                     ldt_status_name(st_), ldt_status_name(want), ldt_last_error());         \
        cr_assert(strstr(ldt_last_error(), (substr)) != NULL,                                \
                  "%s: message '%s' does not mention '%s'", #call, ldt_last_error(), (substr)); \
    } while (0)

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash3(uint64_t seed, int rank, int64_t i) {
    return mix64(seed * 0x9E3779B97F4A7C15ull + mix64((uint64_t)rank + 1) + mix64((uint64_t)i));
}

/* Value of element i of rank `rank`'s input: floats of varied magnitude (so the summation
 * order shows in the bits), full-range integers (so sums wrap), bools 0/1. */
static void gen(ldt_dtype dt, uint64_t seed, int rank, int64_t i, void *out) {
    static const float scales[4] = {1.0f / 1024, 1.0f / 8, 1.0f, 64.0f};
    uint64_t h = hash3(seed, rank, i);
    float f = (float)((int32_t)((h >> 32) & 0xFFFFFF) - 0x800000) / 8388608.0f * scales[h & 3];
    switch (dt) {
    case LDT_F32: memcpy(out, &f, 4); break;
    case LDT_F64: {
        double d = (double)f + (double)(h >> 40) * 1e-12;
        memcpy(out, &d, 8);
        break;
    }
    case LDT_F16: {
        uint16_t v = ldt_f32_to_f16(f);
        memcpy(out, &v, 2);
        break;
    }
    case LDT_BF16: {
        uint16_t v = ldt_f32_to_bf16(f);
        memcpy(out, &v, 2);
        break;
    }
    case LDT_I32: {
        int32_t v = (int32_t)(uint32_t)h;
        memcpy(out, &v, 4);
        break;
    }
    case LDT_I64: {
        int64_t v = (int64_t)h;
        memcpy(out, &v, 8);
        break;
    }
    case LDT_U8: *(uint8_t *)out = (uint8_t)h; break;
    default: *(uint8_t *)out = (uint8_t)((h >> 7) & 1); break;
    }
}

static void gen_fill(ldt_dtype dt, uint64_t seed, int rank, int64_t first, int64_t n, void *buf) {
    size_t es = ldt_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) gen(dt, seed, rank, first + i, (char *)buf + (size_t)i * es);
}

/* Serial reference, written independently of the library: a plain loop over the ranks in
 * order. max/min keep the first NaN; halves accumulate in f32 and round once; integer sums
 * wrap (done in unsigned types); i32 and u8 avg divide the exact sum; bool is OR / AND. */
static float fcomb(float a, float x, ldt_reduce_op op) {
    if (op == LDT_REDUCE_SUM || op == LDT_REDUCE_AVG) return a + x;
    if (a != a) return a;
    if (x != x) return x;
    return op == LDT_REDUCE_MAX ? (x > a ? x : a) : (x < a ? x : a);
}

static double dcomb(double a, double x, ldt_reduce_op op) {
    if (op == LDT_REDUCE_SUM || op == LDT_REDUCE_AVG) return a + x;
    if (a != a) return a;
    if (x != x) return x;
    return op == LDT_REDUCE_MAX ? (x > a ? x : a) : (x < a ? x : a);
}

/* Reduces value i of the n inputs vals[q] (each an array of dt) into out. */
static void ref_reduce(ldt_dtype dt, ldt_reduce_op op, int n, const void *const *vals, int64_t i,
                       void *out) {
    size_t es = ldt_dtype_size(dt);
#define V(q) ((const char *)vals[q] + (size_t)i * es)
    switch (dt) {
    case LDT_F32:
    case LDT_F16:
    case LDT_BF16: {
        float acc = 0;
        for (int q = 0; q < n; q++) {
            float x;
            uint16_t h;
            if (dt == LDT_F32) {
                memcpy(&x, V(q), 4);
            } else {
                memcpy(&h, V(q), 2);
                x = dt == LDT_F16 ? ldt_f16_to_f32(h) : ldt_bf16_to_f32(h);
            }
            acc = q == 0 ? x : fcomb(acc, x, op);
        }
        if (op == LDT_REDUCE_AVG) acc = acc / (float)n;
        if (dt == LDT_F32) {
            memcpy(out, &acc, 4);
        } else {
            uint16_t h = dt == LDT_F16 ? ldt_f32_to_f16(acc) : ldt_f32_to_bf16(acc);
            memcpy(out, &h, 2);
        }
        break;
    }
    case LDT_F64: {
        double acc = 0;
        for (int q = 0; q < n; q++) {
            double x;
            memcpy(&x, V(q), 8);
            acc = q == 0 ? x : dcomb(acc, x, op);
        }
        if (op == LDT_REDUCE_AVG) acc = acc / (double)n;
        memcpy(out, &acc, 8);
        break;
    }
    case LDT_I32: {
        uint32_t usum = 0;
        int64_t exact = 0;
        int32_t m = 0;
        for (int q = 0; q < n; q++) {
            int32_t x;
            memcpy(&x, V(q), 4);
            usum += (uint32_t)x;
            exact += x;
            if (q == 0 || (op == LDT_REDUCE_MAX ? x > m : x < m)) m = x;
        }
        int32_t r = op == LDT_REDUCE_SUM   ? (int32_t)usum
                    : op == LDT_REDUCE_AVG ? (int32_t)(uint32_t)(uint64_t)(exact / n)
                                           : m;
        memcpy(out, &r, 4);
        break;
    }
    case LDT_I64: {
        uint64_t usum = 0;
        int64_t m = 0;
        for (int q = 0; q < n; q++) {
            int64_t x;
            memcpy(&x, V(q), 8);
            usum += (uint64_t)x;
            if (q == 0 || (op == LDT_REDUCE_MAX ? x > m : x < m)) m = x;
        }
        int64_t r = op == LDT_REDUCE_SUM   ? (int64_t)usum
                    : op == LDT_REDUCE_AVG ? (int64_t)usum / n
                                           : m;
        memcpy(out, &r, 8);
        break;
    }
    case LDT_U8: {
        unsigned sum = 0, m = 0;
        for (int q = 0; q < n; q++) {
            unsigned x = *(const uint8_t *)V(q);
            sum += x;
            if (q == 0 || (op == LDT_REDUCE_MAX ? x > m : x < m)) m = x;
        }
        unsigned r = op == LDT_REDUCE_SUM   ? sum % 256
                     : op == LDT_REDUCE_AVG ? sum / (unsigned)n
                                            : m;
        *(uint8_t *)out = (uint8_t)r;
        break;
    }
    default: {
        int any = 0, all = 1;
        for (int q = 0; q < n; q++) {
            int x = *(const uint8_t *)V(q) != 0;
            any |= x;
            all &= x;
        }
        *(uint8_t *)out = (uint8_t)(op == LDT_REDUCE_MIN ? all : any);
        break;
    }
    }
#undef V
}

/* "1.5 (0x3e00)" for messages. */
static void fmt_val(ldt_dtype dt, const void *p, char *buf, size_t cap) {
    switch (dt) {
    case LDT_F32: {
        float v;
        uint32_t u;
        memcpy(&v, p, 4);
        memcpy(&u, p, 4);
        snprintf(buf, cap, "%.9g (0x%08x)", (double)v, u);
        break;
    }
    case LDT_F64: {
        double v;
        memcpy(&v, p, 8);
        snprintf(buf, cap, "%.17g", v);
        break;
    }
    case LDT_F16:
    case LDT_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        snprintf(buf, cap, "%.6g (0x%04x)",
                 (double)(dt == LDT_F16 ? ldt_f16_to_f32(h) : ldt_bf16_to_f32(h)), h);
        break;
    }
    case LDT_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        snprintf(buf, cap, "%d", v);
        break;
    }
    case LDT_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        snprintf(buf, cap, "%lld", (long long)v);
        break;
    }
    default: snprintf(buf, cap, "%u", *(const uint8_t *)p); break;
    }
}

static int is_nan(ldt_dtype dt, const void *p) {
    float f;
    double d;
    uint16_t h;
    switch (dt) {
    case LDT_F32: memcpy(&f, p, 4); return f != f;
    case LDT_F64: memcpy(&d, p, 8); return d != d;
    case LDT_F16: memcpy(&h, p, 2); return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case LDT_BF16: memcpy(&h, p, 2); return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    default: return 0;
    }
}

/* Compares n elements bit for bit, except that any two NaNs match: which NaN operand an
 * addition returns is up to the compiler and the ISA. On the first difference returns a
 * failure naming it. */
static ldt_status compare(const char *what, ldt_dtype dt, const void *got, const void *want,
                          int64_t n) {
    size_t es = ldt_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        const char *g = (const char *)got + (size_t)i * es;
        const char *w = (const char *)want + (size_t)i * es;
        if (memcmp(g, w, es) != 0 && !(is_nan(dt, g) && is_nan(dt, w))) {
            char gs[64], ws[64];
            fmt_val(dt, g, gs, sizeof gs);
            fmt_val(dt, w, ws, sizeof ws);
            return fail("%s %s: element %lld of %lld: got %s, want %s", what, ldt_dtype_name(dt),
                        (long long)i, (long long)n, gs, ws);
        }
    }
    return LDT_OK;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    cr_assert_not_null(p, "out of memory for %zu bytes", n);
    return p;
}

/* Counts for rank-count n, case c: even cases give every rank the same count; uneven ones
 * draw 0..max per rank (zeros included). */
static void draw_counts(uint64_t *rng, int n, int64_t max, int64_t *counts) {
    for (int r = 0; r < n; r++)
        counts[r] = ldt_test_range(rng, 0, 3) == 0 ? 0 : ldt_test_range(rng, 0, max);
}

static ldt_comm_options opts_ms(int64_t ms) {
    ldt_comm_options o = {ms};
    return o;
}

/* ---------------------------------------------------------------------------------------
 * Every collective against the reference, on 1..8 ranks. Each rank regenerates every rank's
 * input from the seed (gen is a pure function), so it needs nothing but its own result.
 */
typedef struct coll_ctx {
    uint64_t seed;
    int ncounts;
    int64_t counts[32]; /* the even counts tried */
    int uneven_cases;
} coll_ctx;

static void coll_ctx_init(coll_ctx *c, uint64_t seed) {
    /* The last one gives every rank of 8 full 1024-element kernel blocks at scale 1. */
    double scale = ldt_test_scale() < 1 ? ldt_test_scale() : 1;
    const int64_t fixed[] = {0, 1, 5, 1031, (int64_t)(2 * 1024 * MAXR * scale) + 77};
    uint64_t rng = seed;
    memset(c, 0, sizeof *c);
    c->seed = seed;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) c->counts[c->ncounts++] = fixed[i];
    int extra = ldt_test_cases(3);
    for (int i = 0; i < extra && c->ncounts < 32; i++)
        c->counts[c->ncounts++] = ldt_test_range(&rng, 2, 3000);
    c->uneven_cases = ldt_test_cases(3);
}

/* Checks a reduction's output: element i must be the reduction over ranks of input element
 * first + i. Long outputs are sampled (both ends, and every 13th element, which lands in every
 * 1024-element block of the kernels) to keep the n^2 reference cost down. */
static ldt_status expect_reduced(const char *what, ldt_dtype dt, ldt_reduce_op op, int n,
                                 uint64_t seed, int64_t first, int64_t len, const void *got) {
    size_t es = ldt_dtype_size(dt);
    char vals[MAXR][8], want[8];
    const void *ptrs[MAXR];
    for (int q = 0; q < n; q++) ptrs[q] = vals[q];
    for (int64_t i = 0; i < len; i++) {
        if (len > 4096 && i >= 64 && i < len - 64 && i % 13 != 0) continue;
        for (int q = 0; q < n; q++) gen(dt, seed, q, first + i, vals[q]);
        ref_reduce(dt, op, n, ptrs, 0, want);
        const char *g = (const char *)got + (size_t)i * es;
        if (memcmp(g, want, es) != 0 && !(is_nan(dt, g) && is_nan(dt, want))) {
            char gs[64], ws[64];
            fmt_val(dt, g, gs, sizeof gs);
            fmt_val(dt, want, ws, sizeof ws);
            return fail("%s %s: element %lld of %lld: got %s, want %s", what, ldt_dtype_name(dt),
                        (long long)i, (long long)len, gs, ws);
        }
    }
    return LDT_OK;
}

static ldt_status rank_all_reduce(ldt_comm *w, void *arg) {
    const coll_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    for (int d = 0; d < NDT; d++)
        for (int o = 0; o < NOPS; o++) {
            ldt_dtype dt = k_dtypes[d];
            ldt_reduce_op op = k_ops[o];
            if (dt == LDT_BOOL && op == LDT_REDUCE_AVG) continue;
            size_t es = ldt_dtype_size(dt);
            for (int k = 0; k < c->ncounts; k++) {
                int64_t count = c->counts[k];
                uint64_t seed = c->seed + (uint64_t)(d * 1000 + o * 100 + k);
                char *send = malloc((size_t)count * es + 1), *recv = malloc((size_t)count * es + 1);
                gen_fill(dt, seed, r, 0, count, send);
                int in_place = k % 2;
                char what[128];
                snprintf(what, sizeof what, "all_reduce %s n=%d count=%lld%s",
                         ldt_reduce_op_name(op), n, (long long)count, in_place ? " in place" : "");
                ldt_status st;
                if (in_place) {
                    st = ldt_all_reduce(w, send, send, count, dt, op);
                } else {
                    memset(recv, 0xa5, (size_t)count * es);
                    st = ldt_all_reduce(w, send, recv, count, dt, op);
                }
                if (st == LDT_OK)
                    st = expect_reduced(what, dt, op, n, seed, 0, count, in_place ? send : recv);
                else
                    st = fail("%s: %s", what, ldt_last_error());
                free(send);
                free(recv);
                if (st != LDT_OK) return st;
            }
        }
    return LDT_OK;
}

static ldt_status rank_reduce_scatter(ldt_comm *w, void *arg) {
    const coll_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    uint64_t rng = c->seed ^ 0x5eed;
    for (int d = 0; d < NDT; d++)
        for (int o = 0; o < NOPS; o++) {
            ldt_dtype dt = k_dtypes[d];
            ldt_reduce_op op = k_ops[o];
            if (dt == LDT_BOOL && op == LDT_REDUCE_AVG) continue;
            size_t es = ldt_dtype_size(dt);
            int cases = c->ncounts + c->uneven_cases;
            for (int k = 0; k < cases; k++) {
                int uneven = k >= c->ncounts;
                int64_t counts[MAXR], off = 0, total = 0;
                if (uneven) {
                    draw_counts(&rng, n, 1500, counts);
                } else {
                    for (int q = 0; q < n; q++) counts[q] = c->counts[k] / n + (k == 4 ? 1024 : 0);
                }
                for (int q = 0; q < n; q++) {
                    if (q < r) off += counts[q];
                    total += counts[q];
                }
                uint64_t seed = c->seed + (uint64_t)(d * 1000 + o * 100 + k);
                char *send = malloc((size_t)total * es + 1);
                char *recv = malloc((size_t)counts[r] * es + 1);
                gen_fill(dt, seed, r, 0, total, send);
                int in_place = k % 2;
                char *out = in_place ? send + (size_t)off * es : recv;
                char what[128];
                snprintf(what, sizeof what, "reduce_scatter%s %s n=%d rank %d count=%lld%s",
                         uneven ? "_v" : "", ldt_reduce_op_name(op), n, r, (long long)counts[r],
                         in_place ? " in place" : "");
                ldt_status st = uneven ? ldt_reduce_scatter_v(w, send, out, counts, dt, op)
                                       : ldt_reduce_scatter(w, send, out, counts[0], dt, op);
                if (st == LDT_OK)
                    st = expect_reduced(what, dt, op, n, seed, off, counts[r], out);
                else
                    st = fail("%s: %s", what, ldt_last_error());
                free(send);
                free(recv);
                if (st != LDT_OK) return st;
            }
        }
    return LDT_OK;
}

static ldt_status rank_all_gather(ldt_comm *w, void *arg) {
    const coll_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    uint64_t rng = c->seed ^ 0xa11;
    for (int d = 0; d < NDT; d++) {
        ldt_dtype dt = k_dtypes[d];
        size_t es = ldt_dtype_size(dt);
        int cases = c->ncounts + c->uneven_cases;
        for (int k = 0; k < cases; k++) {
            int uneven = k >= c->ncounts;
            int64_t counts[MAXR], off = 0, total = 0;
            if (uneven)
                draw_counts(&rng, n, 1500, counts);
            else
                for (int q = 0; q < n; q++) counts[q] = c->counts[k];
            for (int q = 0; q < n; q++) {
                if (q < r) off += counts[q];
                total += counts[q];
            }
            uint64_t seed = c->seed + (uint64_t)(d * 100 + k);
            char *recv = malloc((size_t)total * es + 1), *want = malloc((size_t)total * es + 1);
            char *send = malloc((size_t)counts[r] * es + 1);
            int in_place = k % 2;
            memset(recv, 0x5a, (size_t)total * es);
            char *src = in_place ? recv + (size_t)off * es : send;
            gen_fill(dt, seed, r, 0, counts[r], src);
            for (int q = 0, o = 0; q < n; o += (int)counts[q], q++)
                gen_fill(dt, seed, q, 0, counts[q], want + (size_t)o * es);
            char what[128];
            snprintf(what, sizeof what, "all_gather%s n=%d rank %d total=%lld%s",
                     uneven ? "_v" : "", n, r, (long long)total, in_place ? " in place" : "");
            ldt_status st = uneven ? ldt_all_gather_v(w, src, recv, counts, dt)
                                   : ldt_all_gather(w, src, recv, counts[0], dt);
            if (st == LDT_OK)
                st = compare(what, dt, recv, want, total);
            else
                st = fail("%s: %s", what, ldt_last_error());
            free(recv);
            free(want);
            free(send);
            if (st != LDT_OK) return st;
        }
    }
    return LDT_OK;
}

/* all_to_all_v counts: what rank p sends to rank q, known to every rank. */
static int64_t a2a_count(uint64_t seed, int p, int q, int64_t max) {
    uint64_t h = hash3(seed, p * 64 + q, -1);
    return h % 4 == 0 ? 0 : (int64_t)(h % (uint64_t)(max + 1));
}

static ldt_status rank_all_to_all(ldt_comm *w, void *arg) {
    const coll_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    const int64_t stride = 1 << 20; /* element index space of each (src, dst) pair */
    for (int d = 0; d < NDT; d++) {
        ldt_dtype dt = k_dtypes[d];
        size_t es = ldt_dtype_size(dt);
        int cases = c->ncounts + c->uneven_cases;
        for (int k = 0; k < cases; k++) {
            int uneven = k >= c->ncounts;
            uint64_t seed = c->seed + (uint64_t)(d * 100 + k);
            int64_t sc[MAXR], sd[MAXR], rc[MAXR], rd[MAXR], stot = 0, rtot = 0;
            for (int p = 0; p < n; p++) {
                sc[p] = uneven ? a2a_count(seed, r, p, 700) : c->counts[k] / n;
                rc[p] = uneven ? a2a_count(seed, p, r, 700) : c->counts[k] / n;
            }
            /* Uneven: sends packed with a one-element gap, receives packed in reverse order,
             * so the displacements matter. */
            for (int p = 0; p < n; p++) {
                sd[p] = stot;
                stot += sc[p] + (uneven ? 1 : 0);
            }
            for (int p = n - 1; p >= 0; p--) {
                rd[p] = uneven ? rtot : rc[p] * p;
                rtot += rc[p];
            }
            char *send = malloc((size_t)stot * es + 1), *recv = malloc((size_t)rtot * es + 1);
            char *want = malloc((size_t)rtot * es + 1);
            memset(send, 0, (size_t)stot * es);
            for (int p = 0; p < n; p++) {
                gen_fill(dt, seed, r, p * stride, sc[p], send + (size_t)sd[p] * es);
                gen_fill(dt, seed, p, r * stride, rc[p], want + (size_t)rd[p] * es);
            }
            char what[128];
            snprintf(what, sizeof what, "all_to_all%s n=%d rank %d", uneven ? "_v" : "", n, r);
            ldt_status st = uneven ? ldt_all_to_all_v(w, send, sc, sd, recv, rc, rd, dt)
                                   : ldt_all_to_all(w, send, recv, sc[0], dt);
            if (st == LDT_OK)
                st = compare(what, dt, recv, want, rtot);
            else
                st = fail("%s: %s", what, ldt_last_error());
            free(send);
            free(recv);
            free(want);
            if (st != LDT_OK) return st;
        }
    }
    return LDT_OK;
}

static ldt_status rank_broadcast(ldt_comm *w, void *arg) {
    const coll_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    for (int d = 0; d < NDT; d++) {
        ldt_dtype dt = k_dtypes[d];
        size_t es = ldt_dtype_size(dt);
        for (int k = 0; k < c->ncounts; k++) {
            int64_t count = c->counts[k];
            int root = (k + d) % n;
            uint64_t seed = c->seed + (uint64_t)(d * 100 + k);
            char *buf = malloc((size_t)count * es + 1), *want = malloc((size_t)count * es + 1);
            gen_fill(dt, seed, root, 0, count, want);
            if (r == root)
                memcpy(buf, want, (size_t)count * es);
            else
                gen_fill(dt, seed, r, 0, count, buf);
            char what[128];
            snprintf(what, sizeof what, "broadcast n=%d root %d rank %d", n, root, r);
            ldt_status st = ldt_broadcast(w, buf, count, dt, root);
            if (st == LDT_OK)
                st = compare(what, dt, buf, want, count);
            else
                st = fail("%s: %s", what, ldt_last_error());
            free(buf);
            free(want);
            if (st != LDT_OK) return st;
        }
    }
    return ldt_barrier(w);
}

static void run_on_1_to_8(ldt_rank_fn fn, uint64_t seed) {
    coll_ctx c;
    coll_ctx_init(&c, seed);
    for (int n = 1; n <= MAXR; n++) {
        ldt_status st = ldt_threads_launch(n, NULL, fn, &c);
        cr_assert_eq(st, LDT_OK, "%d ranks: %s", n, ldt_last_error());
    }
}

Test(comm, all_reduce_every_dtype_op_and_rank_count) { run_on_1_to_8(rank_all_reduce, 11); }
Test(comm, reduce_scatter_even_uneven_in_place) { run_on_1_to_8(rank_reduce_scatter, 22); }
Test(comm, all_gather_even_uneven_in_place) { run_on_1_to_8(rank_all_gather, 33); }
Test(comm, all_to_all_even_uneven) { run_on_1_to_8(rank_all_to_all, 44); }
Test(comm, broadcast_every_root) { run_on_1_to_8(rank_broadcast, 55); }

/* ---------------------------------------------------------------------------------------
 * The collective reduction and exec/reduce.c (Partial placements) give the same bits, also
 * for NaN, infinities, signed zeros and integer overflow.
 */
typedef struct special_ctx {
    int64_t count;
    void *vals[NDT][MAXR];
} special_ctx;

static void special_value(ldt_dtype dt, uint64_t h, void *out) {
    static const float fs[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, -65504.0f, 3.0e38f, 1e-8f};
    uint32_t nan1 = 0x7fc00001u, nan2 = 0xffc12345u, inf = 0x7f800000u, ninf = 0xff800000u;
    float f;
    int k = (int)(h % 12);
    if (k < 8) f = fs[k];
    else {
        uint32_t u = k == 8 ? nan1 : k == 9 ? nan2 : k == 10 ? inf : ninf;
        memcpy(&f, &u, 4);
    }
    switch (dt) {
    case LDT_F32: memcpy(out, &f, 4); break;
    case LDT_F64: {
        double d = f;
        memcpy(out, &d, 8);
        break;
    }
    case LDT_F16: {
        uint16_t v = ldt_f32_to_f16(f);
        memcpy(out, &v, 2);
        break;
    }
    case LDT_BF16: {
        uint16_t v = ldt_f32_to_bf16(f);
        memcpy(out, &v, 2);
        break;
    }
    case LDT_I32: {
        int32_t v = (h >> 8) % 2 ? INT32_MAX - (int32_t)(h % 5) : INT32_MIN + (int32_t)(h % 5);
        memcpy(out, &v, 4);
        break;
    }
    case LDT_I64: {
        int64_t v = (h >> 8) % 2 ? INT64_MAX - (int64_t)(h % 5) : INT64_MIN + (int64_t)(h % 5);
        memcpy(out, &v, 8);
        break;
    }
    case LDT_U8: *(uint8_t *)out = (uint8_t)(250 + h % 6); break;
    default: *(uint8_t *)out = (uint8_t)(h % 2); break;
    }
}

static ldt_status rank_special(ldt_comm *w, void *arg) {
    special_ctx *c = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    for (int d = 0; d < NDT; d++)
        for (int o = 0; o < NOPS; o++) {
            ldt_dtype dt = k_dtypes[d];
            ldt_reduce_op op = k_ops[o];
            if (dt == LDT_BOOL && op == LDT_REDUCE_AVG) continue;
            size_t es = ldt_dtype_size(dt);
            char *recv = malloc((size_t)c->count * es), *want = malloc((size_t)c->count * es);
            ROK(ldt_all_reduce(w, c->vals[d][r], recv, c->count, dt, op));
            ldt__reduce_n(want, (const void *const *)c->vals[d], n, c->count, dt, op);
            char what[96];
            snprintf(what, sizeof what, "all_reduce %s n=%d vs ldt__reduce_n",
                     ldt_reduce_op_name(op), n);
            ldt_status st = compare(what, dt, recv, want, c->count);
            if (st == LDT_OK) { /* and the independent reference agrees too */
                for (int64_t i = 0; i < c->count && st == LDT_OK; i++)
                    ref_reduce(dt, op, n, (const void *const *)c->vals[d], i,
                               want + (size_t)i * es);
                snprintf(what, sizeof what, "all_reduce %s n=%d special values vs reference",
                         ldt_reduce_op_name(op), n);
                st = compare(what, dt, recv, want, c->count);
            }
            free(recv);
            free(want);
            if (st != LDT_OK) return st;
        }
    return LDT_OK;
}

Test(comm, reduction_matches_exec_reduce_on_special_values) {
    for (int n = 1; n <= MAXR; n++) {
        special_ctx c;
        c.count = 3000;
        for (int d = 0; d < NDT; d++)
            for (int q = 0; q < n; q++) {
                size_t es = ldt_dtype_size(k_dtypes[d]);
                c.vals[d][q] = xmalloc((size_t)c.count * es);
                for (int64_t i = 0; i < c.count; i++)
                    special_value(k_dtypes[d], hash3(7, q, i),
                                  (char *)c.vals[d][q] + i * (int64_t)es);
            }
        ldt_status st = ldt_threads_launch(n, NULL, rank_special, &c);
        cr_assert_eq(st, LDT_OK, "%d ranks: %s", n, ldt_last_error());
        for (int d = 0; d < NDT; d++)
            for (int q = 0; q < n; q++) free(c.vals[d][q]);
    }
}

/* ---------------------------------------------------------------------------------------
 * Groups: arbitrary rank lists and mesh dims.
 */
static ldt_status rank_mesh_2x3(ldt_comm *w, void *arg) {
    const ldt_mesh *mesh = arg;
    int r = ldt_comm_rank(w);
    ldt_comm *row = NULL, *col = NULL;
    ROK(ldt_comm_mesh_dim(w, mesh, 1, &row));
    ROK(ldt_comm_mesh_dim(w, mesh, 0, &col));
    RCHECK(ldt_comm_size(row) == 3 && ldt_comm_size(col) == 2, "group sizes %d %d, want 3 2",
           ldt_comm_size(row), ldt_comm_size(col));
    RCHECK(ldt_comm_rank(row) == r % 3 && ldt_comm_world_rank(row, r % 3) == r,
           "rank %d: row rank %d", r, ldt_comm_rank(row));
    RCHECK(ldt_comm_rank(col) == r / 3 && ldt_comm_world_rank(col, 1 - r / 3) == (r + 3) % 6,
           "rank %d: col rank %d", r, ldt_comm_rank(col));
    RCHECK(strcmp(ldt_comm_backend(row), "threads") == 0, "backend %s", ldt_comm_backend(row));
    /* sum along dim 1 then dim 0 is the sum over all six ranks */
    int64_t x[3] = {r, 10 * r, 100 + r};
    ROK(ldt_all_reduce(row, x, x, 3, LDT_I64, LDT_REDUCE_SUM));
    int64_t row_sum = (r / 3) * 9 + 3;
    RCHECK(x[0] == row_sum, "rank %d: row sum %lld, want %lld", r, (long long)x[0],
           (long long)row_sum);
    ROK(ldt_all_reduce(col, x, x, 3, LDT_I64, LDT_REDUCE_SUM));
    RCHECK(x[0] == 15 && x[1] == 150 && x[2] == 615,
           "rank %d: total %lld %lld %lld, want 15 150 615",
           r, (long long)x[0], (long long)x[1], (long long)x[2]);
    /* a gather along dim 0 sees the column in coordinate order */
    int32_t me = r, got[2];
    ROK(ldt_all_gather(col, &me, got, 1, LDT_I32));
    RCHECK(got[0] == r % 3 && got[1] == r % 3 + 3, "rank %d: column gather %d %d", r, got[0],
           got[1]);
    ldt_comm_destroy(row);
    ldt_comm_destroy(col);
    return LDT_OK;
}

Test(comm, mesh_dims_2x3) {
    ldt_mesh *mesh;
    cr_assert_eq(ldt_mesh_parse("2x3", LDT_DEVICE_CPU, &mesh), LDT_OK, "%s", ldt_last_error());
    for (int rep = 0; rep < 3; rep++) {
        ldt_status st = ldt_threads_launch(6, NULL, rank_mesh_2x3, mesh);
        cr_assert_eq(st, LDT_OK, "%s", ldt_last_error());
    }
    ldt_mesh_destroy(mesh);
}

/* Group {3, 1} of 4 ranks (group order is list order), used twice, while ranks 0 and 2 run
 * their own group; the world stays usable after. */
static ldt_status rank_groups(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    const int odd[2] = {3, 1}, even[2] = {0, 2};
    ldt_comm *g = NULL, *g2 = NULL;
    ROK(ldt_comm_group(w, 2, r % 2 ? odd : even, &g));
    ROK(ldt_comm_group(w, 2, r % 2 ? odd : even, &g2)); /* a second, separate instance */
    int me = ldt_comm_rank(g);
    RCHECK(me == (r % 2 ? (r == 3 ? 0 : 1) : r / 2), "world %d has group rank %d", r, me);
    int32_t v = r, got[2];
    ROK(ldt_all_gather(g2, &v, got, 1, LDT_I32));
    ROK(ldt_all_gather(g, &v, got, 1, LDT_I32));
    if (r % 2)
        RCHECK(got[0] == 3 && got[1] == 1, "odd group gathered %d %d, want 3 1", got[0], got[1]);
    else
        RCHECK(got[0] == 0 && got[1] == 2, "even group gathered %d %d, want 0 2", got[0], got[1]);
    ldt_comm_destroy(g);
    ldt_comm_destroy(g2);
    int32_t s = 1;
    ROK(ldt_all_reduce(w, &s, &s, 1, LDT_I32, LDT_REDUCE_SUM));
    RCHECK(s == 4, "world sum %d", s);
    /* A one-rank group of oneself works without anyone else. */
    ldt_comm *solo = NULL;
    ROK(ldt_comm_group(w, 1, &r, &solo));
    ROK(ldt_all_reduce(solo, &s, &s, 1, LDT_I32, LDT_REDUCE_SUM));
    ldt_comm_destroy(solo);
    return LDT_OK;
}

Test(comm, groups_over_rank_lists) {
    ldt_threads *t;
    cr_assert_eq(ldt_threads_create(4, NULL, &t), LDT_OK);
    for (int i = 0; i < 3; i++) /* the world is reusable across runs */
        cr_assert_eq(ldt_threads_run(t, rank_groups, NULL), LDT_OK, "run %d: %s", i,
                     ldt_last_error());
    ldt_threads_destroy(t);
}

/* ---------------------------------------------------------------------------------------
 * send / recv and groups of calls
 */
static ldt_status rank_p2p(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    /* Ring shift, everyone sending first: only a group makes this safe. */
    float out[100], in[100];
    for (int i = 0; i < 100; i++) out[i] = (float)(r * 1000 + i);
    ROK(ldt_group_start());
    ROK(ldt_send(w, out, 100, LDT_F32, next));
    ROK(ldt_recv(w, in, 100, LDT_F32, prev));
    ROK(ldt_group_end());
    for (int i = 0; i < 100; i++)
        RCHECK(in[i] == (float)(prev * 1000 + i), "rank %d: ring got %g at %d, want %d", r,
               (double)in[i], i, prev * 1000 + i);
    /* Blocking pairs: even ranks send three messages to the next, which receives in order. */
    if (r % 2 == 0 && r + 1 < n) {
        for (int m = 0; m < 3; m++) {
            int64_t v = r * 10 + m;
            ROK(ldt_send(w, &v, 1, LDT_I64, r + 1));
        }
    } else if (r % 2 == 1) {
        for (int m = 0; m < 3; m++) {
            int64_t v = -1;
            ROK(ldt_recv(w, &v, 1, LDT_I64, r - 1));
            RCHECK(v == (r - 1) * 10 + m, "rank %d: message %d is %lld, want %d (FIFO)", r, m,
                   (long long)v, (r - 1) * 10 + m);
        }
    }
    /* A group mixing a collective, a send to self and a zero-length exchange. */
    int32_t self_out = 42 + r, self_in = 0, sum = 1;
    ROK(ldt_group_start());
    ROK(ldt_recv(w, &self_in, 1, LDT_I32, r));
    ROK(ldt_all_reduce(w, &sum, &sum, 1, LDT_I32, LDT_REDUCE_SUM));
    ROK(ldt_send(w, &self_out, 1, LDT_I32, r));
    ROK(ldt_send(w, NULL, 0, LDT_I32, next));
    ROK(ldt_recv(w, NULL, 0, LDT_I32, prev));
    ROK(ldt_group_end());
    RCHECK(self_in == 42 + r && sum == n, "rank %d: self %d sum %d", r, self_in, sum);
    return LDT_OK;
}

Test(comm, send_recv_and_groups) {
    for (int n = 1; n <= MAXR; n++)
        cr_assert_eq(ldt_threads_launch(n, NULL, rank_p2p, NULL), LDT_OK, "%d ranks: %s", n,
                     ldt_last_error());
}

static ldt_status rank_p2p_mismatch(ldt_comm *w, void *arg) {
    (void)arg;
    float buf[8] = {0};
    if (ldt_comm_rank(w) == 0)
        RERR(ldt_send(w, buf, 4, LDT_F32, 1), LDT_ERR_INVALID_USAGE, "expected 5 f32");
    else
        RERR(ldt_recv(w, buf, 5, LDT_F32, 0), LDT_ERR_INVALID_USAGE, "sent 4 f32");
    if (ldt_comm_rank(w) == 0)
        RERR(ldt_send(w, buf, 4, LDT_F32, 1), LDT_ERR_INVALID_USAGE, "expected 4 i32");
    else
        RERR(ldt_recv(w, buf, 4, LDT_I32, 0), LDT_ERR_INVALID_USAGE, "sent 4 f32");
    return LDT_OK;
}

Test(comm, send_recv_mismatch_fails_on_both_sides) {
    cr_assert_eq(ldt_threads_launch(2, NULL, rank_p2p_mismatch, NULL), LDT_OK, "%s",
                 ldt_last_error());
}

/* Rank 1 does nothing: rank 0's recv from it and rank 2's send to it time out. */
static ldt_status rank_p2p_timeout(ldt_comm *w, void *arg) {
    (void)arg;
    float buf[4] = {0};
    if (ldt_comm_rank(w) == 0)
        RERR(ldt_recv(w, buf, 4, LDT_F32, 1), LDT_ERR_TIMEOUT, "rank 1 sent nothing");
    if (ldt_comm_rank(w) == 2)
        RERR(ldt_send(w, buf, 4, LDT_F32, 1), LDT_ERR_TIMEOUT, "rank 1 did not receive");
    return LDT_OK;
}

Test(comm, send_recv_timeout) {
    ldt_comm_options o = opts_ms(200);
    cr_assert_eq(ldt_threads_launch(3, &o, rank_p2p_timeout, NULL), LDT_OK, "%s",
                 ldt_last_error());
}

/* A group whose receive times out reports it from group_end and withdraws its posted send,
 * whether or not the peer took it. Rank 1 receives rank 0's send but sends nothing back;
 * rank 2 does nothing, so rank 0's send to it is never taken. */
static ldt_status rank_group_fails(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    float out[3] = {1, 2, 3}, in[3] = {0};
    if (r == 0) {
        ROK(ldt_group_start());
        ROK(ldt_send(w, out, 3, LDT_F32, 1));
        ROK(ldt_send(w, out, 3, LDT_F32, 2));
        ROK(ldt_recv(w, in, 3, LDT_F32, 1));
        RERR(ldt_group_end(), LDT_ERR_TIMEOUT, "rank 1 sent nothing");
    } else if (r == 1) {
        ROK(ldt_recv(w, in, 3, LDT_F32, 0));
        RCHECK(in[2] == 3.0f, "rank 1 received %g", (double)in[2]);
    }
    return LDT_OK;
}

Test(comm, group_end_reports_a_failed_call_and_withdraws_sends) {
    /* long enough that rank 1's receive is served on a loaded machine (sanitizers, 2 cores) */
    ldt_comm_options o = opts_ms(1500);
    cr_assert_eq(ldt_threads_launch(3, &o, rank_group_fails, NULL), LDT_OK, "%s",
                 ldt_last_error());
}

/* ---------------------------------------------------------------------------------------
 * Failures: timeouts, failing ranks, mismatched calls.
 */
static ldt_status rank_stops_calling(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    if (r == 2) return LDT_OK; /* never calls */
    float x = 1;
    ldt_status st = ldt_all_reduce(w, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
    RCHECK(st == LDT_ERR_TIMEOUT, "rank %d: all_reduce returned %s, want timeout (%s)", r,
           ldt_status_name(st), ldt_last_error());
    RCHECK(strstr(ldt_last_error(), "all_reduce") && strstr(ldt_last_error(), "rank 2") &&
               strstr(ldt_last_error(), "200 ms"),
           "rank %d: message '%s' should name all_reduce, rank 2 and 200 ms", r, ldt_last_error());
    return st;
}

Test(comm, timeout_names_the_missing_rank) {
    ldt_comm_options o = opts_ms(200);
    ldt_status st = ldt_threads_launch(3, &o, rank_stops_calling, NULL);
    cr_assert_eq(st, LDT_ERR_TIMEOUT, "got %s: %s", ldt_status_name(st), ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "rank 0: all_reduce") != NULL, "%s", ldt_last_error());
    /* and says where the missing rank is: its function returned, without calling */
    cr_assert(strstr(ldt_last_error(), "rank 2 of 3, which did not come: its function returned ok"),
              "%s", ldt_last_error());

    /* After a timeout the world refuses to run again. */
    ldt_threads *t;
    cr_assert_eq(ldt_threads_create(3, &o, &t), LDT_OK);
    cr_assert_eq(ldt_threads_run(t, rank_stops_calling, NULL), LDT_ERR_TIMEOUT);
    EXPECT_ERR(ldt_threads_run(t, rank_stops_calling, NULL), LDT_ERR_INVALID_USAGE,
               "create a new one");
    ldt_threads_destroy(t);
}

/* A timeout says where the rank that did not come is: waiting in another call (named, with
 * its group), or returned. The late rank enters its call 0.5 s after the others enter theirs,
 * so it is still there when their 1.5 s run out. */
static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static ldt_status rank_waits_elsewhere(ldt_comm *w, void *arg) {
    int r = ldt_comm_rank(w), mode = *(const int *)arg;
    float x = 1;
    if (mode == 0) { /* ranks 0 and 1 in an all_reduce of the world, rank 2 in one of {1, 2} */
        if (r == 2) {
            int ranks[2] = {1, 2};
            ldt_comm *g = NULL;
            ldt_status st = ldt_comm_group(w, 2, ranks, &g);
            if (st != LDT_OK) return st;
            sleep_ms(500);
            st = ldt_all_reduce(g, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
            ldt_comm_destroy(g);
            return st;
        }
        return ldt_all_reduce(w, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
    }
    /* mode 1: rank 0 receives from rank 1, which waits in a barrier of the world */
    if (r == 2) return LDT_OK;
    if (r == 1) {
        sleep_ms(500);
        return ldt_barrier(w);
    }
    return ldt_recv(w, &x, 1, LDT_F32, 1);
}

Test(comm, a_timeout_says_where_the_missing_rank_waits) {
    ldt_comm_options o = opts_ms(1500);
    int mode = 0;
    ldt_status st = ldt_threads_launch(3, &o, rank_waits_elsewhere, &mode);
    cr_assert_eq(st, LDT_ERR_TIMEOUT, "got %s: %s", ldt_status_name(st), ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "rank 0: all_reduce: timed out after 1500 ms waiting for rank 2 of 3, "
                                       "which did not come: it waits in all_reduce on another group of 2"),
              "%s", ldt_last_error());
    mode = 1;
    st = ldt_threads_launch(3, &o, rank_waits_elsewhere, &mode);
    cr_assert_eq(st, LDT_ERR_TIMEOUT, "got %s: %s", ldt_status_name(st), ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "rank 0: recv: timed out after 1500 ms: rank 1 sent nothing") &&
                  strstr(ldt_last_error(), "; it waits in barrier on the world"),
              "%s", ldt_last_error());
}

/* One timeout for every backend: options, else LDT_COMM_TIMEOUT_MS (0: none), else the older
 * LDT_NCCL_TIMEOUT_MS, else 60 s; a malformed value is refused when the world is made. */
Test(comm, one_timeout_from_the_environment) {
    ldt_comm_options o = opts_ms(200), never = opts_ms(LDT_COMM_NO_TIMEOUT), neg = opts_ms(-5);
    int64_t t = 0;
    ldt_threads *w = NULL;
    ldt_status st;
    unsetenv("LDT_COMM_TIMEOUT_MS");
    unsetenv("LDT_NCCL_TIMEOUT_MS");
    cr_assert_eq(ldt__comm_timeout(NULL, "t", &t), LDT_OK);
    cr_expect_eq(t, 60000);
    setenv("LDT_COMM_TIMEOUT_MS", "200", 1);
    st = ldt_threads_launch(3, NULL, rank_stops_calling, NULL); /* rank_stops_calling wants 200 ms */
    cr_assert_eq(st, LDT_ERR_TIMEOUT, "got %s: %s", ldt_status_name(st), ldt_last_error());
    setenv("LDT_COMM_TIMEOUT_MS", "999999", 1); /* options win */
    cr_assert_eq(ldt_threads_launch(3, &o, rank_stops_calling, NULL), LDT_ERR_TIMEOUT, "%s", ldt_last_error());
    setenv("LDT_COMM_TIMEOUT_MS", "0", 1);
    cr_assert_eq(ldt__comm_timeout(NULL, "t", &t), LDT_OK);
    cr_expect_eq(t, LDT__COMM_FOREVER_MS, "0 in the environment is no timeout, got %lld", (long long)t);
    cr_assert_eq(ldt__comm_timeout(&never, "t", &t), LDT_OK);
    cr_expect_eq(t, LDT__COMM_FOREVER_MS);
    setenv("LDT_COMM_TIMEOUT_MS", "12s", 1);
    EXPECT_ERR(ldt_threads_create(2, NULL, &w), LDT_ERR_INVALID_ARGUMENT, "LDT_COMM_TIMEOUT_MS is '12s'");
    cr_assert_null(w);
    EXPECT_ERR(ldt__comm_timeout(&neg, "t", &t), LDT_ERR_INVALID_ARGUMENT, "timeout_ms is -5");
    unsetenv("LDT_COMM_TIMEOUT_MS");
    setenv("LDT_NCCL_TIMEOUT_MS", "200", 1); /* the older name */
    cr_assert_eq(ldt_threads_launch(3, NULL, rank_stops_calling, NULL), LDT_ERR_TIMEOUT, "%s", ldt_last_error());
    setenv("LDT_NCCL_TIMEOUT_MS", "nonsense", 1); /* read as before: ignored */
    cr_assert_eq(ldt__comm_timeout(NULL, "t", &t), LDT_OK);
    cr_expect_eq(t, 60000);
}

static ldt_status rank_fails(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    if (r == 1) return ldt__error(LDT_ERR_INVALID_ARGUMENT, "boom: bad shape [3,4]");
    float x = 1;
    ldt_status st = ldt_all_reduce(w, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
    RCHECK(st == LDT_ERR_REMOTE, "rank %d: all_reduce returned %s, want remote error (%s)", r,
           ldt_status_name(st), ldt_last_error());
    RCHECK(strstr(ldt_last_error(), "rank 1 failed") && strstr(ldt_last_error(), "boom"),
           "rank %d: message '%s' should say rank 1 failed: boom", r, ldt_last_error());
    /* later calls fail at once too */
    float y[8];
    RERR(ldt_all_gather(w, &x, y, 1, LDT_F32), LDT_ERR_REMOTE, "rank 1 failed");
    RERR(ldt_recv(w, y, 1, LDT_F32, (r + 1) % ldt_comm_size(w)), LDT_ERR_REMOTE, "rank 1 failed");
    return st;
}

Test(comm, failing_rank_aborts_the_world) {
    ldt_threads *t;
    cr_assert_eq(ldt_threads_create(4, NULL, &t), LDT_OK); /* default 60 s timeout: no waiting */
    ldt_status st = ldt_threads_run(t, rank_fails, NULL);
    cr_assert_eq(st, LDT_ERR_INVALID_ARGUMENT, "got %s: %s", ldt_status_name(st),
                 ldt_last_error());
    cr_assert_str_eq(ldt_last_error(), "rank 1: boom: bad shape [3,4]");
    EXPECT_ERR(ldt_threads_run(t, rank_fails, NULL), LDT_ERR_INVALID_USAGE, "aborted");
    ldt_threads_destroy(t);
}

/* A rank blocked in a group's collective wakes when a rank outside that group fails. */
static ldt_status rank_fails_elsewhere(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    if (r == 2) return ldt__error(LDT_ERR_INVALID_ARGUMENT, "rank two gives up");
    const int pair[2] = {0, 1};
    if (r < 2) {
        ldt_comm *g;
        ROK(ldt_comm_group(w, 2, pair, &g));
        float x = 1;
        if (r == 0) { /* rank 1 never joins the call: rank 0 waits until the abort */
            ldt_status st = ldt_all_reduce(g, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
            ldt_comm_destroy(g);
            RCHECK(st == LDT_ERR_REMOTE, "rank 0 got %s: %s", ldt_status_name(st),
                   ldt_last_error());
            return st;
        }
        ldt_comm_destroy(g);
    }
    float y = 0;
    return ldt_recv(w, &y, 1, LDT_F32, 0); /* waits for a send that never comes */
}

Test(comm, abort_wakes_waiters_in_groups_and_recv) {
    ldt_status st = ldt_threads_launch(4, NULL, rank_fails_elsewhere, NULL);
    cr_assert_eq(st, LDT_ERR_INVALID_ARGUMENT, "%s", ldt_last_error());
    cr_assert_str_eq(ldt_last_error(), "rank 2: rank two gives up");
}

typedef struct mismatch_ctx {
    int which;
} mismatch_ctx;

static ldt_status rank_mismatch(ldt_comm *w, void *arg) {
    const mismatch_ctx *m = arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    float x[16] = {0}, y[64];
    int64_t counts[3] = {1, 2, 3}, c2[3] = {1, 2, 3}, d[3] = {0, 1, 3};
    switch (m->which) {
    case 0:
        if (r == 2)
            RERR(ldt_all_gather(w, x, y, 4, LDT_F32), LDT_ERR_INVALID_USAGE,
                 "rank 2 called all_gather");
        else
            RERR(ldt_all_reduce(w, x, y, 4, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_USAGE,
                 "rank 2 called all_gather");
        break;
    case 1:
        RERR(ldt_all_reduce(w, x, y, r == 1 ? 5 : 4, LDT_F32, LDT_REDUCE_SUM),
             LDT_ERR_INVALID_USAGE, "count 4 but rank 1 passed 5");
        break;
    case 2:
        RERR(ldt_all_reduce(w, x, y, 4, r == 2 ? LDT_I32 : LDT_F32, LDT_REDUCE_SUM),
             LDT_ERR_INVALID_USAGE, "dtype f32 but rank 2 passed i32");
        break;
    case 3:
        RERR(ldt_all_reduce(w, x, y, 4, LDT_F32, r == 1 ? LDT_REDUCE_MAX : LDT_REDUCE_SUM),
             LDT_ERR_INVALID_USAGE, "op sum but rank 1 passed max");
        break;
    case 4:
        RERR(ldt_broadcast(w, x, 4, LDT_F32, r == 2 ? 1 : 0), LDT_ERR_INVALID_USAGE,
             "root 0 but rank 2 passed 1");
        break;
    case 5:
        if (r == 1) c2[2] = 4;
        RERR(ldt_all_gather_v(w, x, y, c2, LDT_F32), LDT_ERR_INVALID_USAGE,
             "counts[2] = 3 but rank 1 passed 4");
        break;
    case 6: { /* rank 1 sends 2 to rank 2, which expects 3 */
        int64_t sc[3] = {1, 1, r == 1 ? 2 : 1}, rc[3] = {1, 1, 1};
        RERR(ldt_all_to_all_v(w, x, sc, d, y, rc, d, LDT_F32), LDT_ERR_INVALID_USAGE,
             "rank 1 sends 2 elements to rank 2");
        break;
    }
    case 7:
        if (r == 0)
            RERR(ldt_barrier(w), LDT_ERR_INVALID_USAGE, "rank 0 called barrier");
        else
            RERR(ldt_reduce_scatter_v(w, x, y, counts, LDT_F32, LDT_REDUCE_SUM),
                 LDT_ERR_INVALID_USAGE, "rank 0 called barrier but rank 1 called reduce_scatter_v");
        break;
    }
    /* The mismatch left the group in step: a correct call works. */
    float s = 1;
    ROK(ldt_all_reduce(w, &s, &s, 1, LDT_F32, LDT_REDUCE_SUM));
    RCHECK(s == (float)n, "sum after mismatch %g", (double)s);
    return LDT_OK;
}

Test(comm, mismatched_calls_fail_on_every_rank) {
    for (int k = 0; k < 8; k++) {
        mismatch_ctx m = {k};
        ldt_comm_options o = opts_ms(5000);
        cr_assert_eq(ldt_threads_launch(3, &o, rank_mismatch, &m), LDT_OK, "case %d: %s", k,
                     ldt_last_error());
    }
}

/* ---------------------------------------------------------------------------------------
 * Bad input: status and a message naming the problem.
 */
static ldt_status rank_bad_input(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w);
    float x[8] = {0}, y[64] = {0};
    int64_t counts[2] = {1, 1}, neg[2] = {1, -2}, d[2] = {0, 1}, negd[2] = {0, -1};
    ldt_comm *g = NULL;

    RERR(ldt_all_reduce(NULL, x, y, 1, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "all_reduce: comm is NULL");
    RERR(ldt_all_reduce(w, NULL, y, 1, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "send is NULL");
    RERR(ldt_all_reduce(w, x, NULL, 1, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "recv is NULL");
    RERR(ldt_all_reduce(w, x, y, -1, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "count is -1, expected >= 0");
    RERR(ldt_all_reduce(w, x, y, 1, (ldt_dtype)99, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "invalid dtype 99");
    RERR(ldt_all_reduce(w, x, y, 1, (ldt_dtype)-1, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "invalid dtype -1");
    RERR(ldt_all_reduce(w, x, y, 1, LDT_F32, (ldt_reduce_op)7), LDT_ERR_INVALID_ARGUMENT,
         "invalid reduce op 7");
    RERR(ldt_all_reduce(w, x, y, 1, LDT_BOOL, LDT_REDUCE_AVG), LDT_ERR_INVALID_ARGUMENT,
         "avg is not defined for bool");
    RERR(ldt_all_reduce(w, x, y, INT64_MAX / 2, LDT_F64, LDT_REDUCE_SUM), LDT_ERR_OVERFLOW,
         "overflows");
    RERR(ldt_all_reduce(w, x, x + 1, 4, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "overlap");
    RERR(ldt_reduce_scatter(w, x, y, -3, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "reduce_scatter: count is -3");
    RERR(ldt_reduce_scatter(w, y, y + 1, 2, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "recv must be send + rank*count");
    RERR(ldt_reduce_scatter_v(w, x, y, NULL, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "counts is NULL, expected 2 entries");
    RERR(ldt_reduce_scatter_v(w, x, y, neg, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "counts[1] is -2");
    RERR(ldt_all_gather(w, NULL, y, 2, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "all_gather: send is NULL");
    RERR(ldt_all_gather(w, y + 1, y, 2, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "send must be recv + rank*count");
    RERR(ldt_all_gather_v(w, x, NULL, counts, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "all_gather_v: recv is NULL");
    RERR(ldt_all_gather_v(w, x, y, neg, LDT_F32), LDT_ERR_INVALID_ARGUMENT, "counts[1] is -2");
    RERR(ldt_all_to_all(w, y, y, 2, LDT_F32), LDT_ERR_INVALID_ARGUMENT, "no in-place form");
    RERR(ldt_all_to_all(w, x, y, 2, (ldt_dtype)8), LDT_ERR_INVALID_ARGUMENT, "invalid dtype 8");
    RERR(ldt_all_to_all_v(w, x, NULL, d, y, counts, d, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "sendcounts is NULL");
    RERR(ldt_all_to_all_v(w, x, counts, negd, y, counts, d, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "sdispls[1] is -1");
    RERR(ldt_all_to_all_v(w, x, counts, d, y, counts, NULL, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "rdispls is NULL");
    int64_t huge[2] = {INT64_MAX / 4, INT64_MAX / 4}, hd[2] = {INT64_MAX / 4, 0};
    RERR(ldt_all_gather_v(w, x, y, huge, LDT_F32), LDT_ERR_OVERFLOW, "counts overflow");
    RERR(ldt_all_to_all_v(w, x, counts, hd, y, counts, d, LDT_F32), LDT_ERR_OVERFLOW,
         "sdispls[0] + sendcounts[0] overflows");
    RERR(ldt_all_to_all_v(w, x, counts, d, y, neg, d, LDT_F32), LDT_ERR_INVALID_ARGUMENT,
         "recvcounts[1] is -2");
    RERR(ldt_broadcast(w, x, 1, LDT_F32, 2), LDT_ERR_INVALID_ARGUMENT,
         "root is 2, expected a rank in 0..1");
    RERR(ldt_broadcast(w, x, 1, LDT_F32, -1), LDT_ERR_INVALID_ARGUMENT, "root is -1");
    RERR(ldt_broadcast(w, NULL, 1, LDT_F32, 0), LDT_ERR_INVALID_ARGUMENT, "buf is NULL");
    RERR(ldt_send(w, x, 1, LDT_F32, 5), LDT_ERR_INVALID_ARGUMENT, "send: peer is 5");
    RERR(ldt_recv(w, x, 1, LDT_F32, -1), LDT_ERR_INVALID_ARGUMENT, "recv: peer is -1");
    RERR(ldt_send(w, NULL, 3, LDT_F32, 0), LDT_ERR_INVALID_ARGUMENT, "buf is NULL");
    RERR(ldt_send(w, x, 1, LDT_F32, r), LDT_ERR_INVALID_USAGE, "is the calling rank");
    RERR(ldt_barrier(NULL), LDT_ERR_INVALID_ARGUMENT, "barrier: comm is NULL");

    /* groups */
    const int dup[2] = {0, 0}, other[1] = {1 - r}, out_of_range[2] = {0, 7}, both[2] = {0, 1};
    RERR(ldt_comm_group(w, 2, dup, &g), LDT_ERR_INVALID_ARGUMENT, "rank 0 appears twice");
    RERR(ldt_comm_group(w, 1, other, &g), LDT_ERR_INVALID_ARGUMENT,
         "does not contain the calling rank");
    RERR(ldt_comm_group(w, 2, out_of_range, &g), LDT_ERR_INVALID_ARGUMENT, "ranks[1] is 7");
    RERR(ldt_comm_group(w, 0, both, &g), LDT_ERR_INVALID_ARGUMENT, "n is 0, expected 1..2");
    RERR(ldt_comm_group(w, 3, both, &g), LDT_ERR_INVALID_ARGUMENT, "n is 3");
    RERR(ldt_comm_group(w, 2, NULL, &g), LDT_ERR_INVALID_ARGUMENT, "ranks is NULL");
    RERR(ldt_comm_group(w, 2, both, NULL), LDT_ERR_INVALID_ARGUMENT, "out is NULL");
    RERR(ldt_comm_group(NULL, 2, both, &g), LDT_ERR_INVALID_ARGUMENT, "comm is NULL");
    ldt_mesh *mesh = NULL, *meta = NULL, *big = NULL;
    ROK(ldt_mesh_parse("4", LDT_DEVICE_CPU, &big));
    ldt_status st0 = ldt_comm_mesh_dim(w, big, 0, &g);
    char m0[512];
    snprintf(m0, sizeof m0, "%s", ldt_last_error());
    ldt_mesh_destroy(big);
    RCHECK(st0 == LDT_ERR_INVALID_ARGUMENT &&
               strstr(m0, "mesh dim 0 has 4 ranks but the world has 2"),
           "mesh larger than the world: %s", m0);
    ROK(ldt_mesh_parse("2", LDT_DEVICE_CPU, &mesh));
    ROK(ldt_mesh_parse("2", LDT_DEVICE_META, &meta));
    ldt_status st1 = ldt_comm_mesh_dim(w, mesh, 1, &g);
    char m1[512];
    snprintf(m1, sizeof m1, "%s", ldt_last_error());
    ldt_status st2 = ldt_comm_mesh_dim(w, meta, 0, &g);
    char m2[512];
    snprintf(m2, sizeof m2, "%s", ldt_last_error());
    ldt_status st3 = ldt_comm_mesh_dim(w, NULL, 0, &g);
    ldt_mesh_destroy(mesh);
    ldt_mesh_destroy(meta);
    RCHECK(st1 == LDT_ERR_INVALID_ARGUMENT && strstr(m1, "dim is 1, expected 0..0"),
           "mesh dim 1: %s", m1);
    RCHECK(st2 == LDT_ERR_INVALID_ARGUMENT && strstr(m2, "meta"), "meta mesh: %s", m2);
    RCHECK(st3 == LDT_ERR_INVALID_ARGUMENT, "NULL mesh: %s", ldt_status_name(st3));

    /* group_start / group_end */
    RERR(ldt_group_end(), LDT_ERR_INVALID_USAGE, "no group_start");
    ROK(ldt_group_start());
    RERR(ldt_group_start(), LDT_ERR_INVALID_USAGE, "groups do not nest");
    RERR(ldt_all_reduce(w, x, y, -5, LDT_F32, LDT_REDUCE_SUM), LDT_ERR_INVALID_ARGUMENT,
         "count is -5");
    ROK(ldt_all_reduce(w, x, y, 1, LDT_F32, LDT_REDUCE_SUM)); /* queued, then dropped */
    RERR(ldt_group_end(), LDT_ERR_INVALID_ARGUMENT, "nothing was issued: all_reduce: count is -5");
    RERR(ldt_group_end(), LDT_ERR_INVALID_USAGE, "no group_start");

    /* accessors */
    RCHECK(ldt_comm_rank(NULL) == -1 && ldt_comm_size(NULL) == 0 &&
               ldt_comm_world_rank(w, 2) == -1 && ldt_comm_world_rank(w, r) == r &&
               ldt_comm_world_rank(NULL, 0) == -1,
           "accessors on bad input");
    ldt_comm_destroy(NULL);
    ldt_comm_destroy(w); /* the world communicator is not destroyed */
    /* the world is still fine */
    float s = 1;
    ROK(ldt_all_reduce(w, &s, &s, 1, LDT_F32, LDT_REDUCE_SUM));
    RCHECK(s == 2.0f, "sum %g", (double)s);
    return LDT_OK;
}

Test(comm, bad_input_in_rank_calls) {
    ldt_status st = ldt_threads_launch(2, NULL, rank_bad_input, NULL);
    cr_assert_eq(st, LDT_OK, "%s", ldt_last_error());
}

static ldt_status rank_ok(ldt_comm *w, void *arg) {
    (void)w;
    (void)arg;
    return LDT_OK;
}

static ldt_status rank_leaves_group_open(ldt_comm *w, void *arg) {
    (void)arg;
    float x = 0;
    ldt_group_start();
    ldt_all_reduce(w, &x, &x, 1, LDT_F32, LDT_REDUCE_SUM);
    return LDT_OK;
}

static ldt_status rank_silent_failure(ldt_comm *w, void *arg) {
    (void)arg;
    ldt_clear_error();
    return ldt_comm_rank(w) == 0 ? LDT_ERR_SYSTEM : LDT_OK;
}

Test(comm, bad_input_to_worlds) {
    ldt_threads *t = (ldt_threads *)1;
    ldt_comm_options neg = opts_ms(-5);
    EXPECT_ERR(ldt_threads_create(0, NULL, &t), LDT_ERR_INVALID_ARGUMENT,
               "nranks is 0, expected 1..4096");
    cr_assert_null(t);
    EXPECT_ERR(ldt_threads_create(5000, NULL, &t), LDT_ERR_INVALID_ARGUMENT, "nranks is 5000");
    EXPECT_ERR(ldt_threads_create(-3, NULL, &t), LDT_ERR_INVALID_ARGUMENT, "nranks is -3");
    EXPECT_ERR(ldt_threads_create(2, &neg, &t), LDT_ERR_INVALID_ARGUMENT, "timeout_ms is -5");
    EXPECT_ERR(ldt_threads_create(2, NULL, NULL), LDT_ERR_INVALID_ARGUMENT, "out is NULL");
    EXPECT_ERR(ldt_threads_launch(2, NULL, NULL, NULL), LDT_ERR_INVALID_ARGUMENT, "fn is NULL");
    EXPECT_ERR(ldt_threads_run(NULL, rank_ok, NULL), LDT_ERR_INVALID_ARGUMENT, "threads is NULL");
    EXPECT_ERR(ldt_threads_launch(2, NULL, rank_leaves_group_open, NULL), LDT_ERR_INVALID_USAGE,
               "rank 0: the rank function returned between group_start and group_end");
    EXPECT_ERR(ldt_threads_launch(2, NULL, rank_silent_failure, NULL), LDT_ERR_SYSTEM,
               "rank 0: returned system error");
    EXPECT_ERR(ldt_group_end(), LDT_ERR_INVALID_USAGE, "no group_start");
    ldt_threads_destroy(NULL);
    cr_assert_eq(ldt_threads_launch(1, NULL, rank_ok, NULL), LDT_OK, "%s", ldt_last_error());
}

/* More ranks than cores by far: 33 threads, exact integer sums. */
static ldt_status rank_many(ldt_comm *w, void *arg) {
    (void)arg;
    int r = ldt_comm_rank(w), n = ldt_comm_size(w);
    int64_t x[100];
    for (int rep = 0; rep < 5; rep++) {
        for (int i = 0; i < 100; i++) x[i] = r * i + rep;
        ROK(ldt_all_reduce(w, x, x, 100, LDT_I64, LDT_REDUCE_SUM));
        for (int i = 0; i < 100; i++)
            RCHECK(x[i] == (int64_t)n * (n - 1) / 2 * i + (int64_t)n * rep,
                   "rank %d rep %d: x[%d] = %lld", r, rep, i, (long long)x[i]);
    }
    return LDT_OK;
}

Test(comm, many_ranks) {
    cr_assert_eq(ldt_threads_launch(33, NULL, rank_many, NULL), LDT_OK, "%s", ldt_last_error());
}
