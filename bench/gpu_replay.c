/* ldt-bench gpu_replay: one training-sized step on one GPU, replayed as a CUDA Graph against
 * the same launches issued one by one (docs/gpu.md).
 *  - replay_us_per_step: one cudaGraphLaunch of the captured step, waited for.
 *  - eager_us_per_step: the same kernels and cuBLAS calls enqueued launch by launch on the
 *    stream, waited for (no tracing or planning: only what capture saves).
 * The step: an MLP of `layers` linear + gelu blocks on x [rows, width] (f32), a dropout and a
 * scaled output. Without a CUDA device (or a CUDA build) it says so and reports nothing. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "exec/backend_cuda.h"
#include "ldt/ldt.h"
#include "trace/trace.h"

static int run(const bench_opts *o, bench_results *out, int layers, int width, int rows) {
    ldt_ctx_options co = {0};
    ldt_ctx *ctx = NULL;
    ldt_plan *plan = NULL;
    ldt__cuda_exec *x = NULL;
    ldt_status st;
    int rc = 1, reps = o->quick ? 20 : 200;
    ldt_shape xs = {2, {rows, width}}, ws = {2, {width, width}}, bs = {1, {width}};
    float *host = malloc((size_t)width * (size_t)(width > rows ? width : rows) * sizeof(float));
    co.seed = 1;
    if (!host || ldt_ctx_create(&co, &ctx) != LDT_OK) goto done;
    for (int64_t i = 0; i < (int64_t)width * (width > rows ? width : rows); i++)
        host[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    ldt_tensor *in = ldt_input(ctx, "x", &xs, LDT_F32), *h = in;
    if (ldt_input_bind(in, host, (int64_t)rows * width * 4) != LDT_OK) goto done;
    for (int l = 0; l < layers; l++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(bn, sizeof bn, "b%d", l);
        ldt_tensor *w = ldt_param(ctx, wn, &ws, LDT_F32), *b = ldt_param(ctx, bn, &bs, LDT_F32);
        if (ldt_param_set(w, host, (int64_t)width * width * 4) != LDT_OK ||
            ldt_param_set(b, host, (int64_t)width * 4) != LDT_OK)
            goto done;
        h = ldt_gelu(ldt_linear(h, w, b), 1);
    }
    h = ldt_mul_scalar(ldt_dropout(h, 0.1, 1), 0.5);
    if (!h || ldt_plan_create(ctx, NULL, &plan) != LDT_OK) goto done;
    const ldt__program *p = ldt__plan_program(plan, 0, &st);
    int32_t v = p ? p->node_val[h->id] : -1;
    if (!p || ldt__cuda_exec_create(p, &v, 1, &x) != LDT_OK) goto done;
    double t_replay[3], t_eager[3];
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        for (int i = 0; i < reps; i++)
            if (ldt__cuda_exec_replay(x) != LDT_OK) goto done;
        t_replay[r] = (bench_now() - t0) * 1e6 / reps;
        t0 = bench_now();
        for (int i = 0; i < reps; i++)
            if (ldt__cuda_exec_run_eager(x) != LDT_OK) goto done;
        t_eager[r] = (bench_now() - t0) * 1e6 / reps;
    }
    int idx = bench_add(out, "replay_us_per_step", bench_median(t_replay, 3), "us");
    int jdx = bench_add(out, "eager_us_per_step", bench_median(t_eager, 3), "us");
    for (int k = 0; k < 2; k++) {
        int i = k ? jdx : idx;
        bench_param_int(out, i, "layers", layers);
        bench_param_int(out, i, "width", width);
        bench_param_int(out, i, "rows", rows);
        bench_param_int(out, i, "graph_nodes", ldt__cuda_exec_graph_nodes(x));
    }
    rc = 0;
done:
    if (rc) bench_note("gpu_replay: %s", ldt_last_error());
    ldt__cuda_exec_destroy(x);
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    free(host);
    return rc;
}

int bench_gpu_replay(const bench_opts *o, bench_results *out) {
    if (ldt_cuda_device_count() == 0) {
        bench_note("gpu_replay: no CUDA device (%s): nothing measured",
                   ldt_built_with_cuda() ? "the runtime reports none or no driver"
                                         : "this build has no CUDA");
        return 0;
    }
    if (ldt_cuda_emulated()) { /* the CUDA emulator: a small step, to show it runs */
        bench_note("gpu_replay: the CUDA emulator (LDT_CUDA=EMU): these are CPU timings");
        return run(o, out, 4, 16, 8);
    }
    /* many small launches (where the graph saves the most), then wider layers */
    if (run(o, out, 16, 256, 32) != 0) return 1;
    return run(o, out, 8, 1024, 256);
}
