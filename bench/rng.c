/* ldt-bench rng: bytes of random values the CPU fillers of the stream (kernels/common/philox.h)
 * produce per second on one core, into a large f32 buffer (f64 for trunc_normal, i64 for
 * randint, as their fillers make them; counted as the f32 bytes the values would take). */
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kernels/common/philox.h"

typedef enum { RNG_UNIFORM, RNG_NORMAL, RNG_TRUNC_NORMAL, RNG_RANDINT, RNG_COUNT } rng_kind;

static const char *const k_names[RNG_COUNT] = {"uniform_gbps", "normal_gbps",
                                               "trunc_normal_gbps", "randint_gbps"};

/* One fill of n elements of kind k; wall and CPU seconds. The offset changes each rep so no
 * rep repeats. */
static bench_clock one_fill(rng_kind k, void *buf, int64_t n, uint64_t offset,
                            const ldt__trunc_normal *tn) {
    bench_clock t0 = bench_clock_now();
    switch (k) {
    case RNG_UNIFORM: ldt__rand_fill_uniform_f32(buf, 7, offset, 0, n, 0.0f, 1.0f); break;
    case RNG_NORMAL: ldt__rand_fill_normal_f32(buf, 7, offset, 0, n, 0.0f, 1.0f); break;
    case RNG_TRUNC_NORMAL: ldt__rand_fill_trunc_normal_f64(buf, 7, offset, 0, n, tn); break;
    default: ldt__rand_fill_randint_i64(buf, 7, offset, 0, n, 0, 1000); break;
    }
    return bench_clock_since(t0, 1);
}

int bench_rng(const bench_opts *o, bench_results *out) {
    int64_t n = o->quick ? (int64_t)1 << 22 : (int64_t)1 << 24; /* 16 or 64 MB of f32 */
    int reps = o->quick ? 3 : 7;
    ldt__trunc_normal tn = ldt__rand_trunc_normal_init(0.0, 1.0, -2.0, 2.0);
    double t[16], tc[16];
    void *buf = malloc((size_t)n * 8); /* room for f64 and i64 */
    if (!buf) {
        bench_note("rng: out of memory for %lld elements", (long long)n);
        return 1;
    }
    memset(buf, 0, (size_t)n * 8); /* fault the pages in before timing */
    for (int k = 0; k < RNG_COUNT; k++) {
        int64_t m = k >= RNG_TRUNC_NORMAL ? n / 4 : n; /* the slow double-precision ones: less */
        for (int r = 0; r < reps; r++) {
            bench_clock s = one_fill((rng_kind)k, buf, m, (uint64_t)r * 1000003u, &tn);
            t[r] = (double)m * 4.0 / (s.wall > 0 ? s.wall : 1e-9) / 1e9;
            tc[r] = (double)m * 4.0 / (s.cpu > 0 ? s.cpu : 1e-9) / 1e9;
        }
        int idx = bench_add_timed(out, k_names[k], bench_median(t, reps), bench_median(tc, reps), "GB/s");
        bench_param_int(out, idx, "elements", m);
        bench_param_int(out, idx, "threads", 1);
    }
    free(buf);
    return 0;
}
