/* CUDA kernels against the CPU reference; skipped, with the reason, where no GPU is present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "core/error.h"
#include "exec/backend_cuda.h"
#include "exec/cuda_libs.h"
#include "kernels/cuda/convert.h"
#include "ldt/exec.h"
#include "ldt/models.h"
#include "ldt/planner.h"
#include <string.h>
#include <time.h>
#include "tests/test_util.h"
#include "tests/trainer.h"
#include "trace/trace.h"

Test(cuda, f32_to_half_and_back_matches_cpu) {
    enum { N = 100000 };
    float *src, *back;
    uint16_t *h;
    uint64_t rng = 5;
    if (ldt_cuda_device_count() == 0) {
        cr_expect_eq(ldt__cuda_convert_host(NULL, LDT_F32, NULL, LDT_F16, 0), LDT_ERR_UNSUPPORTED);
        /* printed as well as reported: ctest marks the test Skipped on this line */
        fprintf(stderr, "SKIPPED: no CUDA device (the runtime reports none or no driver): "
                        "GPU kernels not run\n");
        cr_skip("no CUDA device (the runtime reports none or no driver): GPU kernels not run");
    }
    src = malloc(N * sizeof *src);
    back = malloc(N * sizeof *back);
    h = malloc(N * sizeof *h);
    for (int i = 0; i < N; i++)
        src[i] = ldexpf((float)(ldt_test_rand(&rng) % 100000) / 1e5f - 0.5f,
                        (int)ldt_test_range(&rng, -26, 17));
    for (int bf = 0; bf < 2; bf++) {
        ldt_dtype half = bf ? LDT_BF16 : LDT_F16;
        cr_assert_eq(ldt__cuda_convert_host(src, LDT_F32, h, half, N), LDT_OK, "%s",
                     ldt_last_error());
        for (int i = 0; i < N; i++) {
            uint16_t want = bf ? ldt_f32_to_bf16(src[i]) : ldt_f32_to_f16(src[i]);
            cr_assert_eq(h[i], want, "%s %a: gpu 0x%04x cpu 0x%04x", ldt_dtype_name(half),
                         src[i], h[i], want);
        }
        cr_assert_eq(ldt__cuda_convert_host(h, half, back, LDT_F32, N), LDT_OK);
        for (int i = 0; i < N; i++) {
            float want = bf ? ldt_bf16_to_f32(h[i]) : ldt_f16_to_f32(h[i]);
            cr_assert_eq(back[i], want, "0x%04x", h[i]);
        }
    }
    cr_expect_eq(ldt__cuda_convert_host(src, LDT_I32, h, LDT_F16, 1), LDT_ERR_INVALID_ARGUMENT);
    free(src);
    free(back);
    free(h);
}

/* Tests of n ranks want n GPUs (NCCL puts one rank on a GPU; the emulator shares one). With
 * none the test is skipped as the suite is ("SKIPPED:", ctest reports the suite skipped);
 * with too few only this test is, named, while the suite's other tests count. */
static void need_gpus(int n, const char *what) {
    int have = ldt_cuda_device_count();
    if (have == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device: %s\n", what);
        cr_skip("no CUDA device");
    }
    if (!ldt_cuda_emulated() && have < n) {
        fprintf(stderr, "NOT RUN (%d GPUs, %d wanted): %s\n", have, n, what);
        cr_skip("fewer GPUs than ranks");
    }
}

/* ldt_compile on a CUDA mesh: one rank runs on one GPU (its program captured into a CUDA
 * Graph), replays equal the same step on the CPU; what the backend cannot run yet is refused
 * by name at compile, device or not. */
static ldt_tensor *step_graph_x(ldt_ctx *ctx, const float *xs, const float *ws, ldt_tensor **xo) {
    ldt_tensor *x = ldt_input(ctx, "x", &(ldt_shape){2, {4, 8}}, LDT_F32);
    if (xo) *xo = x; /* persistent: the handle outlives the trace, for binding later */
    ldt_tensor *w = ldt_param(ctx, "w", &(ldt_shape){2, {8, 3}}, LDT_F32);
    cr_assert_eq(ldt_input_bind(x, xs, 4 * 8 * 4), LDT_OK);
    cr_assert_eq(ldt_param_set(w, ws, 8 * 3 * 4), LDT_OK);
    return ldt_relu(ldt_matmul(x, w));
}
static ldt_tensor *step_graph(ldt_ctx *ctx, const float *xs, const float *ws) {
    return step_graph_x(ctx, xs, ws, NULL);
}

/* A custom op (CPU kernel only): y = 2x. */
static ldt_status same_shape(int nin, const ldt_shape *in, const ldt_dtype *dts, void *user, ldt_shape *out,
                             ldt_dtype *odt, char *msg, size_t cap) {
    (void)nin, (void)user, (void)msg, (void)cap;
    *out = in[0];
    *odt = dts[0];
    return LDT_OK;
}

static ldt_status twice_cpu(int nin, const void *const *in, const ldt_shape *shapes, const ldt_dtype *dts,
                            void *out, const ldt_shape *oshape, ldt_dtype odt, void *user) {
    int64_t n = 1;
    (void)nin, (void)shapes, (void)dts, (void)odt, (void)user;
    for (int d = 0; d < oshape->ndim; d++) n *= oshape->dims[d];
    for (int64_t i = 0; i < n; i++) ((float *)out)[i] = 2 * ((const float *)in[0])[i];
    return LDT_OK;
}

static ldt_ctx *ctx_on(const char *mesh_text, ldt_device_type dev, ldt_mesh **mesh) {
    ldt_ctx_options co = {0};
    ldt_ctx *ctx;
    cr_assert_eq(ldt_mesh_parse(mesh_text, dev, mesh), LDT_OK);
    co.mesh = *mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    return ctx;
}

/* Refused before any device work (so checked here without a GPU, in a ctest of its own that
 * is never reported as skipped): an op without a CUDA kernel (a custom op: CPU only). */
Test(cuda_refuse, what_the_cuda_backend_cannot_run_yet) {
    float xs[32], ws[24];
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_exec *ex = NULL;
    ldt_tensor *y;
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 24; i++) ws[i] = 0.25f * (float)(i % 5) - 0.5f;
    ctx = ctx_on("1", LDT_DEVICE_CUDA, &mesh);
    {
        int id = -1;
        ldt_tensor *in;
        cr_assert_eq(ldt_custom_op_register(ctx, "twice", 1, same_shape, twice_cpu, NULL, &id), LDT_OK, "%s",
                     ldt_last_error());
        in = step_graph(ctx, xs, ws);
        y = ldt_custom(ctx, id, &in, 1);
        cr_assert_not_null(y, "%s", ldt_ctx_errmsg(ctx));
    }
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "custom"), "%s", ldt_last_error());
    ldt_trace_discard(ctx);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* ---------------------------------------------------------------------------------------
 * cuBLAS and NCCL are loaded when a CUDA mesh first needs them (exec/cuda_libs.h), never by
 * CPU work: checked in the process's own mappings. No GPU needed (ctest test_cuda_libs).
 */
/* 1 when a file whose name contains `name` is mapped into this process. */
static int mapped(const char *name) {
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

Test(cuda_libs, cpu_work_loads_neither_cublas_nor_nccl) {
    float xs[32], ws[24], got[12];
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_exec *ex = NULL;
    ldt_tensor *y;
    const ldt__cublas_api *api = NULL;
    ldt_status st;
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 24; i++) ws[i] = 0.25f * (float)(i % 5) - 0.5f;
    ctx = ctx_on("2x2", LDT_DEVICE_CPU, &mesh);
    y = step_graph(ctx, xs, ws);
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 0, got, sizeof got), LDT_OK, "%s", ldt_last_error());
    for (int r = 0; r < 4; r++) { /* the step ran: relu(x @ w), row r, column 0 */
        double want = 0;
        for (int k = 0; k < 8; k++) want += (double)xs[r * 8 + k] * ws[k * 3];
        cr_assert_float_eq(got[r * 3], want > 0 ? want : 0, 1e-5, "row %d", r);
    }
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    cr_assert(!mapped("libcublas"), "CPU work mapped cuBLAS");
    cr_assert(!mapped("libnccl"), "CPU work mapped NCCL");
    /* the check sees a library once it is loaded (the real build; the emulator's is built in) */
    st = ldt__cublas_load(&api);
    if (getenv("LDT_CUBLAS_LIBRARY") == NULL && ldt_cuda_emulated()) {
        cr_assert_eq(st, LDT_OK, "%s", ldt_last_error());
    } else if (st == LDT_OK) {
        cr_assert(mapped("libcublas"), "cuBLAS loaded but not mapped");
    } else {
        cr_assert(strstr(ldt_last_error(), "cuBLAS could not be loaded ("), "%s", ldt_last_error());
    }
    if (st == LDT_OK) cr_assert(api && api->create && api->gemm_ex && api->gemm_strided_batched_ex);
#ifdef LDT_HAVE_NCCL
    {
        const ldt__nccl_api *n = NULL;
        st = ldt__nccl_load(&n);
        if (getenv("LDT_NCCL_LIBRARY") == NULL && ldt_cuda_emulated())
            cr_assert_eq(st, LDT_OK, "%s", ldt_last_error());
        else if (st == LDT_OK)
            cr_assert(mapped("libnccl"), "NCCL loaded but not mapped");
        else
            cr_assert(strstr(ldt_last_error(), "NCCL could not be loaded ("), "%s", ldt_last_error());
        if (st == LDT_OK) cr_assert(n && n == ldt__nccl_loaded() && n->comm_init_rank && n->recv);
    }
#endif
}

Test(cuda_libs, a_missing_library_is_refused_by_name) {
    ldt__cublas_api t;
    cr_assert_eq(ldt__cuda_lib_open(LDT__LIB_CUBLAS, "/nonexistent/libcublas.so.13", &t, sizeof t),
                 LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "cuBLAS could not be loaded (/nonexistent/libcublas.so.13"),
              "%s", ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "or use --device cpu"), "%s", ldt_last_error());
    /* a library that loads but lacks the functions: the first one missing is named */
    cr_assert_eq(ldt__cuda_lib_open(LDT__LIB_CUBLAS, "libc.so.6", &t, sizeof t), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "cuBLAS: libc.so.6 has no cublasCreate"), "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_lib_open(LDT__LIB_CUBLAS, NULL, &t, sizeof t - 1), LDT_ERR_INVALID_ARGUMENT);
#ifdef LDT_HAVE_NCCL
    {
        ldt__nccl_api n;
        cr_assert_eq(ldt__cuda_lib_open(LDT__LIB_NCCL, "/nonexistent/libnccl.so.2", &n, sizeof n),
                     LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), "NCCL could not be loaded (/nonexistent/libnccl.so.2"), "%s",
                  ldt_last_error());
        cr_assert_eq(ldt__cuda_lib_open(LDT__LIB_NCCL, "libc.so.6", &n, sizeof n), LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), "has no ncclGetErrorString"), "%s", ldt_last_error());
    }
#endif
}

/* The variable names the file; a missing one fails the first use with its message (a fresh
 * process: Criterion runs each test in its own). */
Test(cuda_libs, the_variable_names_the_library) {
    const ldt__cublas_api *api = NULL;
    setenv("LDT_CUBLAS_LIBRARY", "/nonexistent/cublas-override.so", 1);
    cr_assert_eq(ldt__cublas_load(&api), LDT_ERR_UNSUPPORTED);
    cr_assert_null(api);
    cr_assert(strstr(ldt_last_error(), "(/nonexistent/cublas-override.so"), "%s", ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "LDT_CUBLAS_LIBRARY"), "%s", ldt_last_error());
#ifdef LDT_HAVE_NCCL
    {
        const ldt__nccl_api *n = NULL;
        setenv("LDT_NCCL_LIBRARY", "/nonexistent/nccl-override.so", 1);
        cr_assert_eq(ldt__nccl_load(&n), LDT_ERR_UNSUPPORTED);
        cr_assert_null(ldt__nccl_loaded());
        cr_assert(strstr(ldt_last_error(), "NCCL could not be loaded (/nonexistent/nccl-override.so"),
                  "%s", ldt_last_error());
        unsetenv("LDT_NCCL_LIBRARY");
    }
#endif
    unsetenv("LDT_CUBLAS_LIBRARY");
}

Test(cuda, compile_on_a_cuda_mesh) {
    float xs[32], ws[24], got[12], want[12];
    ldt_mesh *mesh, *cpu_mesh;
    ldt_ctx *ctx, *cpu;
    ldt_exec *ex = NULL, *cx;
    ldt_tensor *y, *xg, *xc;
    ldt_status st;
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 24; i++) ws[i] = 0.25f * (float)(i % 5) - 0.5f;
    /* the step itself: compiled for the GPU, or refused for want of one */
    ctx = ctx_on("1", LDT_DEVICE_CUDA, &mesh);
    y = step_graph_x(ctx, xs, ws, &xg);
    st = ldt_compile(ctx, &y, 1, NULL, &ex);
    if (ldt_cuda_device_count() == 0) {
        cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "%s", ldt_last_error());
        cr_assert(strstr(ldt_last_error(), "device") || strstr(ldt_last_error(), "CUDA"), "%s", ldt_last_error());
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
        fprintf(stderr, "SKIPPED: no CUDA device: the compiled step was refused, as it should be\n");
        cr_skip("no CUDA device");
    }
    cr_assert_eq(st, LDT_OK, "%s", ldt_last_error());
    cpu = ctx_on("1", LDT_DEVICE_CPU, &cpu_mesh);
    {
        ldt_tensor *yc = step_graph_x(cpu, xs, ws, &xc);
        cr_assert_eq(ldt_compile(cpu, &yc, 1, NULL, &cx), LDT_OK, "%s", ldt_last_error());
    }
    for (int rep = 0; rep < 3; rep++) { /* new inputs each replay, bound on both */
        for (int i = 0; i < 32; i++) xs[i] = (float)((i + rep) % 9) - 4.0f;
        cr_assert_eq(ldt_input_bind(xg, xs, sizeof xs), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_input_bind(xc, xs, sizeof xs), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(cx), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, got, sizeof got), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(cx, 0, want, sizeof want), LDT_OK);
        for (int i = 0; i < 12; i++) cr_assert_float_eq(got[i], want[i], 1e-5, "replay %d [%d]", rep, i);
    }
    ldt_ctx_destroy(cpu);
    ldt_mesh_destroy(cpu_mesh);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* A training step on the device: an MLP with AdamW (f64), its parameters and optimizer state
 * kept on the GPU between replays, against the same steps compiled for the CPU. Half-way,
 * the host reads a weight (brought home from the device), an evaluation is compiled and run
 * separately, and the host overwrites a weight (copied to the device again). */
static void ct_bind(trainer *t, int step) {
    for (int i = 0; i < ldt_model_ninputs(t->model); i++) {
        double d[6 * 8];
        for (int k = 0; k < 6 * 8; k++) d[k] = sin(0.7 * k + 1.3 * step + 2.1 * i);
        cr_assert_eq(ldt_input_bind(ldt_model_input(t->model, i, NULL), d, sizeof d), LDT_OK);
    }
}

static void ct_run(const char *mesh, ldt_device_type dev, double *losses, double *w) {
    trainer t;
    double w_new[256];
    int nl = 0;
    int64_t n0 = 1, n2 = 1;
    ldt_shape sh;
    trainer_open_on(&t, mesh, dev, 8, 1);
    cr_assert_eq(ldt_tensor_shape(t.ps[0], &sh), LDT_OK);
    for (int d = 0; d < sh.ndim; d++) n0 *= sh.dims[d];
    cr_assert_eq(ldt_tensor_shape(t.ps[2], &sh), LDT_OK);
    for (int d = 0; d < sh.ndim; d++) n2 *= sh.dims[d];
    cr_assert(n0 <= 256 && n2 <= 256 && n0 > 1 && n2 > 1);
    for (int i = 0; i < n0; i++) w_new[i] = 0.01 * (double)(i % 7) - 0.03;
    for (int step = 0; step < 6; step++) {
        ldt_tensor *loss, *g[16];
        ldt_exec *ex;
        ldt_exec_stats es;
        ct_bind(&t, step);
        if (step == 3) { /* an evaluation compiled on its own, then a weight from the host */
            ldt_exec *ev;
            loss = ldt_model_forward(t.model);
            cr_assert_eq(ldt_compile(t.ctx, &loss, 1, NULL, &ev), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_replay(ev), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_exec_read(ev, 0, &losses[nl++], 8), LDT_OK);
            cr_assert_eq(ldt_param_set(t.ps[0], w_new, n0 * 8), LDT_OK, "%s", ldt_last_error());
        }
        loss = ldt_model_forward(t.model);
        cr_assert_eq(ldt_grad(loss, t.ps, t.np, g), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_optim_step(t.opt, g), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_compile(t.ctx, &loss, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &losses[nl++], 8), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        cr_assert_gt(es.assigned, 0);
        cr_assert_gt(es.arena_bytes, 0);
        cr_assert_gt(es.instructions, 0);
        cr_assert_eq(es.assigned_in_place, es.assigned, "%lld of %lld in place",
                     (long long)es.assigned_in_place, (long long)es.assigned);
        if (step == 1) /* from the host */
            cr_assert_eq(ldt_read(t.ps[2], w, n2 * 8), LDT_OK, "%s", ldt_last_error());
    }
    cr_assert_eq(ldt_read(t.ps[0], w + 256, n0 * 8), LDT_OK, "%s", ldt_last_error());
    w[512] = (double)(n0 + 256 * n2); /* what was read */
    trainer_close(&t);
}

static void ct_compare(const char *mesh) {
    double lc[7], lg[7], wc[513] = {0}, wg[513] = {0};
    ct_run(mesh, LDT_DEVICE_CPU, lc, wc);
    ct_run(mesh, LDT_DEVICE_CUDA, lg, wg);
    for (int i = 0; i < 7; i++)
        cr_assert(fabs(lg[i] - lc[i]) <= 1e-9 * fabs(lc[i]), "loss %d: cuda %.15g cpu %.15g", i, lg[i], lc[i]);
    cr_assert(lc[6] != lc[0], "the steps change the loss");
    cr_assert_eq(wc[512], wg[512]);
    for (int i = 0; i < 512; i++)
        cr_assert(fabs(wg[i] - wc[i]) <= 1e-9 * fabs(wc[i]) + 1e-12, "weight %d: cuda %.15g cpu %.15g", i,
                  wg[i], wc[i]);
}

Test(cuda, training_step_on_the_device_equals_cpu) {
    if (ldt_cuda_device_count() == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device: the training step was not run on a GPU\n");
        cr_skip("no CUDA device");
    }
    ct_compare("1");
}

/* The same step on a 2x2 mesh of GPUs (Megatron pins: tensor-parallel all_reduces and
 * redistributions, data-parallel gradient buckets), each rank a thread with its own NCCL
 * world: the collectives are captured NCCL calls on a communication stream. */
Test(cuda, training_step_on_a_2x2_mesh_equals_cpu) {
    need_gpus(4, "the training step was not run on GPUs");
    ct_compare("dp=2,tp=2");
}

/* Redistributions on a 2x2 CUDA mesh (recorded device copies and NCCL calls): each pair of
 * placements moves a [8,5] parameter (dim 1 uneven over 2) from its pinned placement to the
 * target, and the output, gathered from the ranks' devices, is the parameter itself; so is
 * the CPU mesh's. Partial sources hold the value on coordinate 0 and zeros (sum) or the value
 * everywhere (max) elsewhere. Two outputs: the parameter redistributed as it is loaded (an
 * all_reduce there must not reduce the loaded shard in place: the device loads it once) and
 * a value computed from it; three replays, each the same. */
static void redist_on(ldt_device_type dev, const char *from, const char *to, ldt_dtype dt, double *got) {
    ldt_mesh *mesh;
    ldt_ctx *ctx = ctx_on("2x2", dev, &mesh);
    ldt_shape sh = {2, {8, 5}};
    ldt_placement a[2], b[2];
    int na, nb;
    double src[40];
    unsigned char raw[40 * 8];
    ldt_exec *ex;
    ldt_tensor *x;
    for (int i = 0; i < 40; i++) src[i] = (double)((i * 7) % 23) - 11.0;
    for (int i = 0; i < 40; i++) {
        if (dt == LDT_F64) memcpy(raw + 8 * i, &src[i], 8);
        else if (dt == LDT_F32) {
            float f = (float)src[i];
            memcpy(raw + 4 * i, &f, 4);
        } else {
            int64_t v = (int64_t)src[i];
            memcpy(raw + 8 * i, &v, 8);
        }
    }
    cr_assert_eq(ldt_placements_parse(from, 2, a, 2, &na), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(to, 2, b, 2, &nb), LDT_OK, "%s", ldt_last_error());
    x = ldt_param(ctx, "x", &sh, dt);
    cr_assert_not_null(x, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_param_set(x, raw, 40 * (int64_t)ldt_dtype_size(dt)), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_pin(x, a, na), LDT_OK, "%s", ldt_last_error());
    {
        ldt_tensor *ys[2] = {ldt_redistribute_to(x, b, nb), ldt_redistribute_to(ldt_mul_scalar(x, 1.0), b, nb)};
        cr_assert(ys[0] && ys[1], "%s", ldt_ctx_errmsg(ctx));
        cr_assert_eq(ldt_compile(ctx, ys, 2, NULL, &ex), LDT_OK, "%s -> %s: %s", from, to, ldt_last_error());
    }
    for (int rep = 0; rep < 6; rep++) { /* three replays, both outputs */
        if (rep % 2 == 0) cr_assert_eq(ldt_replay(ex), LDT_OK, "%s -> %s: %s", from, to, ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, rep % 2, raw, 40 * (int64_t)ldt_dtype_size(dt)), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 40; i++) {
            if (dt == LDT_F64) memcpy(&got[i], raw + 8 * i, 8);
            else if (dt == LDT_F32) {
                float f;
                memcpy(&f, raw + 4 * i, 4);
                got[i] = f;
            } else {
                int64_t v;
                memcpy(&v, raw + 8 * i, 8);
                got[i] = (double)v;
            }
            cr_assert_eq(got[i], src[i], "%s %s -> %s replay %d output %d [%d]: %g, expected %g",
                         dev == LDT_DEVICE_CUDA ? "cuda" : "cpu", from, to, rep / 2, rep % 2, i, got[i], src[i]);
        }
    }
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(cuda, redistributions_on_a_2x2_mesh_equal_cpu) {
    static const struct {
        const char *from, *to;
        ldt_dtype dt;
    } cases[] = {
        {"S0,R", "R,R", LDT_F32},    {"R,R", "S1,S0", LDT_F64},   {"S0,S1", "S1,S0", LDT_F32},
        {"P,R", "R,R", LDT_F64},     {"P,P", "S0,S1", LDT_F32},   {"Pmax,R", "S1,R", LDT_F32},
        {"IS0:2,S1", "R,R", LDT_F32}, {"S1,S1", "S0,R", LDT_I64}, {"R,S1", "R,P", LDT_F64},
    };
    need_gpus(4, "no redistribution was run on GPUs");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double want[40], got[40];
        redist_on(LDT_DEVICE_CPU, cases[c].from, cases[c].to, cases[c].dt, want);
        redist_on(LDT_DEVICE_CUDA, cases[c].from, cases[c].to, cases[c].dt, got);
        for (int i = 0; i < 40; i++) cr_assert_eq(got[i], want[i]);
    }
}

/* Deferred init on the device: every recipe kind materialized on a CUDA mesh of rank threads
 * (each rank's program run once with the CUDA kernels) equals the same materialization on the
 * CPU mesh: bitwise, but for normal draws, which go through CUDA's math library (a few ulps). */
static ldt_shards *materialize_on(const char *mesh_text, ldt_device_type dev, ldt_init_kind k, ldt_dtype dt,
                                  const char *pl_text, ldt_mesh **real) {
    static double src[7 * 9];
    ldt_mesh *meta;
    ldt_ctx_options co = {0};
    ldt_ctx *ctx;
    ldt_tensor *w;
    ldt_placement pl[LDT_MAX_DIMS];
    const ldt_placement *pls = pl;
    ldt_shards *sh = NULL;
    ldt_init in;
    int npl;
    for (int i = 0; i < 7 * 9; i++) src[i] = i * 0.125 - 3;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, &meta), LDT_OK);
    cr_assert_eq(ldt_mesh_parse(mesh_text, dev, real), LDT_OK);
    co.mesh = meta;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 11, 5), LDT_OK);
    w = ldt_param(ctx, "w", &(ldt_shape){2, {7, 9}}, dt);
    memset(&in, 0, sizeof in);
    in.kind = k;
    in.a = k == LDT_INIT_UNIFORM ? -0.5 : k == LDT_INIT_ARANGE ? 1.5 : k == LDT_INIT_FULL ? 0.3 : 0.1;
    in.b = k == LDT_INIT_ARANGE ? 0.1 : 0.7; /* 0.1 * i is inexact: a fused multiply-add would differ */
    in.lo = -0.5, in.hi = 0.9;
    in.data = src;
    cr_assert_eq(ldt_param_init(w, &in), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(pl_text, 2, pl, LDT_MAX_DIMS, &npl), LDT_OK);
    cr_assert_eq(ldt_materialize((const ldt_tensor *const[]){w}, &pls, 1, *real, &sh, NULL), LDT_OK,
                 "kind %d on %s: %s", (int)k, mesh_text, ldt_last_error());
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(meta);
    return sh;
}

Test(cuda, deferred_init_on_the_device_equals_cpu) {
    static const ldt_init_kind kinds[] = {LDT_INIT_ZEROS, LDT_INIT_ONES, LDT_INIT_FULL, LDT_INIT_ARANGE,
                                          LDT_INIT_UNIFORM, LDT_INIT_NORMAL, LDT_INIT_TRUNC_NORMAL,
                                          LDT_INIT_KAIMING_UNIFORM, LDT_INIT_XAVIER_NORMAL, LDT_INIT_COPY};
    static const struct {
        const char *mesh, *pl;
    } cases[] = {{"1", "R"}, {"2x2", "S0,S1"}, {"3", "S1"}, {"4", "IS1:3"}};
    if (ldt_cuda_device_count() == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device: deferred init was not run on a GPU\n");
        cr_skip("no CUDA device");
    }
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            ldt_mesh *mc, *mg;
            ldt_shards *sc = materialize_on(cases[c].mesh, LDT_DEVICE_CPU, kinds[k], LDT_F64, cases[c].pl, &mc);
            ldt_shards *sg = materialize_on(cases[c].mesh, LDT_DEVICE_CUDA, kinds[k], LDT_F64, cases[c].pl, &mg);
            /* randn draws in f32 (Box-Muller through logf, sinf, cosf: the device's and
             * glibc's differ in the last bits, docs/random-stream.md), so a normal is equal to
             * a few f32 ulps; trunc_normal is computed in double (erfc), to 1e-12. */
            int f32_normal = kinds[k] == LDT_INIT_NORMAL || kinds[k] == LDT_INIT_XAVIER_NORMAL;
            int normal = f32_normal || kinds[k] == LDT_INIT_TRUNC_NORMAL;
            double rel = f32_normal ? 0x1p-20 : 1e-12; /* 8 ulps of f32; double's few */
            double abs_tol = f32_normal ? 1e-6 : 1e-15; /* near 0, sinf/cosf's absolute error */
            for (int r = 0; r < ldt_mesh_nranks(mc); r++) {
                int64_t nc, ng;
                const double *a = ldt_shards_local(sc, ldt_mesh_rank_at(mc, r), &nc);
                const double *b = ldt_shards_local(sg, ldt_mesh_rank_at(mg, r), &ng);
                cr_assert_eq(nc, ng);
                for (int64_t i = 0; i < nc / 8; i++) {
                    if (normal)
                        cr_assert(fabs(a[i] - b[i]) <= rel * fabs(a[i]) + abs_tol, "kind %d on %s, rank %d [%lld]: "
                                  "%.17g vs %.17g", (int)kinds[k], cases[c].mesh, r, (long long)i, b[i], a[i]);
                    else
                        cr_assert(memcmp(&a[i], &b[i], 8) == 0, "kind %d on %s, rank %d [%lld]: %.17g vs %.17g",
                                  (int)kinds[k], cases[c].mesh, r, (long long)i, b[i], a[i]);
                }
            }
            ldt_shards_destroy(sc);
            ldt_shards_destroy(sg);
            ldt_mesh_destroy(mc);
            ldt_mesh_destroy(mg);
        }
}

/* A dead peer inside a captured step: both ranks of a 2-rank CUDA mesh bind and validate a
 * step with an all_reduce; then rank 1 leaves without replaying. Rank 0's replay fails within
 * the communicators' timeout, naming NCCL, instead of hanging (on the emulator the missing
 * member fails the collective past LDT_EMU_NCCL_TIMEOUT_MS; on a GPU the backend's wait aborts
 * the communicators past their timeout). */
typedef struct dead_job {
    ldt_plan *plan;
    const ldt_mesh *mesh;
    int32_t out_node;
    ldt_status st, again;
    char err[512], err_again[512];
    double seconds;
} dead_job;

static ldt_status dead_peer_rank(ldt_comm *world, void *arg) {
    dead_job *j = arg;
    int r = ldt_comm_rank(world);
    ldt_comm_options o = {2000};
    ldt_comm *nw = NULL;
    ldt__cuda_exec *x = NULL;
    ldt_status st;
    const ldt__program *p = ldt__plan_program(j->plan, r, &st);
    if (!p) return st;
    LDT_CHECK(ldt__cuda_select_device(r % ldt_cuda_device_count()));
    LDT_CHECK(ldt_nccl_world(world, -1, &o, &nw));
    {
        int32_t v = p->node_val[j->out_node];
        ldt__cuda_step cs = {&v, 1, NULL, NULL, 0, 2, 0, nw, j->mesh, world};
        st = ldt__cuda_exec_create_step(p, &cs, &x);
    }
    if (st == LDT_OK && r == 0) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        j->st = ldt__cuda_exec_replay(x); /* rank 1 never comes */
        clock_gettime(CLOCK_MONOTONIC, &b);
        j->seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        snprintf(j->err, sizeof j->err, "%s", ldt_last_error());
        j->again = ldt__cuda_exec_replay(x); /* its communicators are aborted: refused, by name */
        snprintf(j->err_again, sizeof j->err_again, "%s", ldt_last_error());
    }
    ldt__cuda_exec_destroy(x);
    ldt_nccl_world_destroy(nw);
    return st;
}

Test(cuda, a_dead_peer_fails_the_captured_step) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_shape sh = {2, {4, 3}};
    ldt_placement s0[1];
    int n;
    float xs[12];
    ldt_tensor *x, *y;
    dead_job j;
    need_gpus(2, "no step was captured");
    /* the emulator's wait for a missing member; the set-up's collectives (the NCCL world, the
     * groups, the validation run) meet within it too, even with a rank thread held back */
    setenv("LDT_EMU_NCCL_TIMEOUT_MS", "1000", 1);
    for (int i = 0; i < 12; i++) xs[i] = (float)i;
    ctx = ctx_on("2", LDT_DEVICE_CUDA, &mesh);
    cr_assert_eq(ldt_placements_parse("S0", 2, s0, 1, &n), LDT_OK);
    x = ldt_param(ctx, "x", &sh, LDT_F32);
    cr_assert_eq(ldt_param_set(x, xs, sizeof xs), LDT_OK);
    cr_assert_eq(ldt_pin(x, s0, 1), LDT_OK);
    {
        ldt_placement r1[1];
        cr_assert_eq(ldt_placements_parse("R", 2, r1, 1, &n), LDT_OK);
        /* partial over the ranks, then replicated: an all_reduce */
        y = ldt_redistribute_to(ldt_sum(x, NULL, 0, 0), r1, 1);
    }
    cr_assert_not_null(y, "%s", ldt_ctx_errmsg(ctx));
    memset(&j, 0, sizeof j);
    cr_assert_eq(ldt_plan_create(ctx, NULL, &j.plan), LDT_OK, "%s", ldt_last_error());
    j.mesh = mesh;
    j.out_node = (int32_t)y->id;
    j.st = LDT_OK;
    for (int r = 0; r < 2; r++) { /* lowered here: rank threads only read programs */
        ldt_status lst;
        cr_assert_not_null(ldt__plan_program(j.plan, r, &lst), "%s", ldt_last_error());
    }
    cr_assert_eq(ldt_threads_launch(2, NULL, dead_peer_rank, &j), LDT_OK, "%s", ldt_last_error());
    unsetenv("LDT_EMU_NCCL_TIMEOUT_MS");
    cr_assert_neq(j.st, LDT_OK, "rank 0's replay succeeded without its peer");
    cr_assert(j.st == LDT_ERR_TIMEOUT || j.st == LDT_ERR_REMOTE, "status %d: %s", (int)j.st, j.err);
    cr_assert(strstr(j.err, "nccl") || strstr(j.err, "NCCL") || strstr(j.err, "collectives"), "%s", j.err);
    cr_assert_lt(j.seconds, 30.0, "%s", j.err);
    cr_assert_eq(j.again, LDT_ERR_INVALID_USAGE, "%s", j.err_again);
    cr_assert(strstr(j.err_again, "compile the step anew"), "%s", j.err_again);
    ldt_plan_destroy(j.plan);
    ldt_trace_discard(ctx);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* Process mode on a CUDA mesh (what `mpirun ldt train --backend nccl` runs), with rank threads
 * standing in for the processes: each thread has its own context on the dp=2,tp=2 mesh with
 * its threads world as the context's world, traces the same AdamW steps, and compiles only its
 * rank's program, whose NCCL world bootstraps through that world; losses come back through the
 * world's gathers. Each rank's losses equal the rank-thread CPU run's. */
typedef struct spmd_job {
    ldt_device_type dev;
    double losses[4][4];
    char err[4][512];
} spmd_job;

static ldt_status spmd_rank(ldt_comm *world, void *arg) {
    spmd_job *j = arg;
    int r = ldt_comm_rank(world);
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("mlp");
    ldt_optim_config oc = {0};
    ldt_mesh *m = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_optim *opt = NULL;
    ldt_tensor *ps[16];
    int np = 0;
    ldt_status st;
    cfg.layers = 2;
    cfg.hidden = 8;
    cfg.batch = 6;
    cfg.dtype = LDT_F64;
    oc.kind = LDT_OPTIM_ADAMW;
    oc.lr = 0.01;
    oc.beta1 = 0.9;
    oc.beta2 = 0.99;
    oc.eps = 1e-8;
    oc.total_steps = 8;
    if ((st = ldt_mesh_parse("dp=2,tp=2", j->dev, &m)) != LDT_OK) goto done;
    co.mesh = m;
    co.world = world;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK || (st = ldt_model_create(ctx, "mlp", &cfg, &model)) != LDT_OK ||
        (st = ldt_model_init(model, 4)) != LDT_OK || (st = ldt_model_pin(model, "megatron")) != LDT_OK)
        goto done;
    np = ldt_model_nparams(model);
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(model, i, NULL);
    if ((st = ldt_optim_create(ctx, &oc, ps, np, &opt)) != LDT_OK) goto done;
    for (int step = 0; step < 4 && st == LDT_OK; step++) {
        ldt_tensor *loss, *g[16];
        ldt_exec *ex;
        for (int i = 0; i < ldt_model_ninputs(model); i++) {
            double d[6 * 8];
            for (int k = 0; k < 6 * 8; k++) d[k] = sin(0.7 * k + 1.3 * step + 2.1 * i);
            if ((st = ldt_input_bind(ldt_model_input(model, i, NULL), d, sizeof d)) != LDT_OK) goto done;
        }
        loss = ldt_model_forward(model);
        if ((st = ldt_grad(loss, ps, np, g)) != LDT_OK || (st = ldt_optim_step(opt, g)) != LDT_OK ||
            (st = ldt_compile(ctx, &loss, 1, NULL, &ex)) != LDT_OK || (st = ldt_replay(ex)) != LDT_OK)
            goto done;
        st = ldt_exec_read(ex, 0, &j->losses[r][step], 8);
    }
done:
    if (st != LDT_OK) snprintf(j->err[r], sizeof j->err[r], "%s", ldt_last_error());
    ldt_optim_destroy(opt);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(m);
    return st;
}

Test(cuda, process_mode_on_a_cuda_mesh_equals_cpu) {
    spmd_job cj, gj;
    ldt_status st;
    need_gpus(4, "process mode was not run on GPUs");
    memset(&cj, 0, sizeof cj);
    memset(&gj, 0, sizeof gj);
    cj.dev = LDT_DEVICE_CPU;
    gj.dev = LDT_DEVICE_CUDA;
    st = ldt_threads_launch(4, NULL, spmd_rank, &cj);
    cr_assert_eq(st, LDT_OK, "cpu: %s | %s", cj.err[0], ldt_last_error());
    st = ldt_threads_launch(4, NULL, spmd_rank, &gj);
    cr_assert_eq(st, LDT_OK, "cuda: %s | %s | %s", gj.err[0], gj.err[1], ldt_last_error());
    cr_assert(cj.losses[0][3] != cj.losses[0][0], "the steps change the loss");
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(cj.losses[r][k], cj.losses[0][k], "cpu rank %d step %d", r, k);
            cr_assert(fabs(gj.losses[r][k] - cj.losses[0][k]) <= 1e-9 * fabs(cj.losses[0][k]),
                      "rank %d step %d: cuda %.15g cpu %.15g", r, k, gj.losses[r][k], cj.losses[0][k]);
        }
}

/* ldt_exec_bind on a 2-rank CUDA mesh: each replay copies the bound host buffer (each rank
 * its region) into the input's static device buffer; against the CPU mesh bound alike. */
Test(cuda, exec_bind_on_a_2_rank_cuda_mesh) {
    float xs[32], ws[24], bound[2][32], got[12], want[12];
    ldt_mesh *mesh, *cpu_mesh;
    ldt_ctx *ctx, *cpu;
    ldt_exec *ex, *cx;
    ldt_tensor *y, *yc;
    need_gpus(2, "nothing was bound on GPUs");
    for (int i = 0; i < 32; i++) xs[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 24; i++) ws[i] = 0.25f * (float)(i % 5) - 0.5f;
    ctx = ctx_on("2", LDT_DEVICE_CUDA, &mesh);
    cpu = ctx_on("2", LDT_DEVICE_CPU, &cpu_mesh);
    y = step_graph(ctx, xs, ws);
    yc = step_graph(cpu, xs, ws);
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_compile(cpu, &yc, 1, NULL, &cx), LDT_OK, "%s", ldt_last_error());
    for (int rep = 0; rep < 4; rep++) { /* two buffers, bound in turn, refilled between */
        float *b = bound[rep % 2];
        for (int i = 0; i < 32; i++) b[i] = (float)((3 * i + rep) % 11) - 5.0f;
        cr_assert_eq(ldt_exec_bind(ex, "x", b, sizeof bound[0]), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_bind(cx, "x", b, sizeof bound[0]), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(cx), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, got, sizeof got), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(cx, 0, want, sizeof want), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 12; i++) {
            float ref = 0; /* relu(b @ w), by hand */
            for (int k = 0; k < 8; k++) ref += b[(i / 3) * 8 + k] * ws[k * 3 + i % 3];
            ref = ref > 0 ? ref : 0;
            cr_assert_float_eq(want[i], ref, 1e-5, "cpu replay %d [%d]", rep, i);
            cr_assert_float_eq(got[i], want[i], 1e-5, "replay %d [%d]", rep, i);
        }
    }
    cr_assert_eq(ldt_exec_bind(ex, "nope", xs, sizeof xs), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_bind(ex, "x", xs, 8), LDT_ERR_INVALID_ARGUMENT);
    ldt_ctx_destroy(cpu);
    ldt_mesh_destroy(cpu_mesh);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
