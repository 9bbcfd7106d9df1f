/* ldt-bench trace: nanoseconds per recorded op for graphs of 1k to 1M nodes (a chain of
 * layers built from the core ops), and structural-hash time per node, each with its _cpu
 * twin (the process's CPU time over the same interval). Goal: record_ns_per_op_cpu <= 40 ns
 * at every size. */
#include "bench_util.h"
#include "ldt/ldt.h"

/* One layer, 8 ops: y = gelu(x @ w + b) * s - x, then a sum over rows to keep it honest. */
static ldt_tensor *layer(ldt_tensor *x, ldt_tensor *w, ldt_tensor *b) {
    ldt_tensor *h = ldt_matmul(x, w);
    h = ldt_add(h, b);
    h = ldt_gelu(h, 1);
    h = ldt_mul_scalar(h, 0.5);
    h = ldt_sub(h, x);
    h = ldt_relu(h);
    h = ldt_add_scalar(h, 1.0);
    return ldt_tanh(h);
}

/* Records `nodes` nodes in a fresh trace; the recording's wall and CPU seconds in *rec, the
 * hash's in *hsh. */
static int one_run(ldt_ctx *ctx, ldt_tensor *x, ldt_tensor *w, ldt_tensor *b, int64_t nodes,
                   bench_clock *rec, bench_clock *hsh) {
    ldt_tensor *h = x;
    volatile uint64_t sink;
    bench_clock c0 = bench_clock_now();
    while (ldt_trace_nodes(ctx) < nodes) {
        h = layer(h, w, b);
        if (!h) return -1;
    }
    *rec = bench_clock_since(c0, 1);
    c0 = bench_clock_now();
    sink = ldt_trace_hash(ctx);
    (void)sink;
    *hsh = bench_clock_since(c0, 1);
    return 0;
}

int bench_trace(const bench_opts *o, bench_results *out) {
    static const int64_t sizes[] = {1000, 10000, 100000, 1000000};
    int nsizes = o->quick ? 3 : 4;
    ldt_ctx *ctx;
    ldt_shape sx = {2, {8, 8}}, sb = {1, {8}};
    ldt_tensor *x, *w, *b;
    if (ldt_ctx_create(NULL, &ctx) != LDT_OK) return 1;
    x = ldt_input(ctx, "x", &sx, LDT_F32);
    w = ldt_param(ctx, "w", &sx, LDT_F32);
    b = ldt_param(ctx, "b", &sb, LDT_F32);
    for (int i = 0; i < nsizes; i++) {
        int64_t n = sizes[i];
        int reps = n >= 1000000 ? 5 : n >= 100000 ? 7 : 20;
        double rec[20], rec_c[20], hsh[20], hsh_c[20], med;
        int idx;
        for (int r = 0; r < reps; r++) {
            bench_clock rs, hs;
            double nn;
            if (one_run(ctx, x, w, b, n, &rs, &hs) != 0) {
                bench_note("trace: recording failed: %s", ldt_ctx_errmsg(ctx));
                ldt_ctx_destroy(ctx);
                return 1;
            }
            nn = (double)ldt_trace_nodes(ctx);
            rec[r] = rs.wall * 1e9 / nn;
            rec_c[r] = rs.cpu * 1e9 / nn;
            hsh[r] = hs.wall * 1e9 / nn;
            hsh_c[r] = hs.cpu * 1e9 / nn;
            /* end the trace without running it: discard by clearing through a failed sync
             * would run kernels, so drop it with an explicit reset */
            ldt_trace_discard(ctx);
        }
        med = bench_median(rec_c, reps);
        idx = bench_add_timed(out, "record_ns_per_op", bench_median(rec, reps), med, "ns");
        bench_param_int(out, idx, "nodes", n);
        idx = bench_add_timed(out, "hash_ns_per_node", bench_median(hsh, reps), bench_median(hsh_c, reps),
                              "ns");
        bench_param_int(out, idx, "nodes", n);
        bench_goal(out, med <= 40, "record_ns_per_op_cpu <= 40 ns at %lld nodes (%.1f)", (long long)n, med);
    }
    ldt_ctx_destroy(ctx);
    return 0;
}
