/* ldt-bench gpu_gemm: what one GPU's kernels achieve, the measurements the device profiles'
 * efficiency curves stand for (docs/prediction.md, "The profile's numbers and their sources").
 *  - gemm_tflops (params m, n, k, dtype, ns: one GEMM's time): C[m,n] = A[m,k] B[k,n]
 *    through the library's CUDA backend (cuBLAS GemmEx, f32 accumulation; f32 with TF32
 *    off, cuBLAS's default math), 2mnk FLOPs over the time of one GEMM. gemm_efficiency:
 *    the same over the peak of the shipped profile the device's name matches (A100:
 *    a100-80g; H100, H200: h100-80g), else over SMs x clock x the architecture's dense FLOPs
 *    per SM-clock (sm_80, sm_90), else not given.
 *  - Sizes: squares 512..8192 (bf16, f16, f32) and the linears of issue 26's four checks on
 *    their tp = 8 shards (bf16): 22B (h 6144, b*s 4*2048) and 175B (h 12288, b*s 2048), each
 *    linear forward [b*s, k] x [k, n], its input gradient [b*s, n] x [n, k] and its weight
 *    gradient [k, b*s] x [b*s, n] (row-major, no transposes: cuBLAS's NN layout).
 *  - membw_gbps (params kernel, rows, cols, dtype, bytes, ns): an elementwise add (3 e n
 *    bytes), a layer norm over the last dim and a softmax over the last dim (2 e n bytes each)
 *    at the checks' activation sizes; param efficiency_pct: over the runtime's memory
 *    bandwidth (memory clock x bus width), else the profile's.
 * One GEMM's time is the slope between CUDA Graph replays of R and 2R independent copies
 * (R chosen so a replay holds about 1e11 FLOPs), which removes the launch and wait of a
 * replay; the median of 3 rounds. Without a CUDA device (or a CUDA build) it says so and
 * reports nothing; on the CUDA emulator (LDT_CUDA=EMU) it runs small sizes (CPU timings). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/half.h"
#include "exec/backend_cuda.h"
#include "ldt/ldt.h"
#include "trace/trace.h"

typedef struct dev_info {
    char name[256];
    double peak[3];   /* FLOP/s: bf16, f16, f32; 0 where not known */
    double mem_Bps;   /* 0 where not known */
    const char *peak_from;
} dev_info;

static const char *dt_name(ldt_dtype t) {
    return t == LDT_BF16 ? "bf16" : t == LDT_F16 ? "f16" : "f32";
}

static double dt_peak(const dev_info *d, ldt_dtype t) {
    return d->peak[t == LDT_BF16 ? 0 : t == LDT_F16 ? 1 : 2];
}

/* size elements of dtype t, values in [-1, 1) from a hash of the index */
static void *make_host(ldt_dtype t, int64_t n) {
    size_t es = ldt_dtype_size(t);
    unsigned char *p = malloc((size_t)n * es);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((uint32_t)(i * 2654435761u) % 2001u) / 1000.0f - 1.0f;
        if (t == LDT_F32) {
            memcpy(p + i * 4, &v, 4);
        } else {
            uint16_t h = t == LDT_BF16 ? ldt__f32_to_bf16(v) : ldt__f32_to_f16(v);
            memcpy(p + i * 2, &h, 2);
        }
    }
    return p;
}

/* The kernels measured: a GEMM, or one bandwidth-bound kernel over [rows, cols]. */
typedef enum { K_GEMM, K_ADD, K_NORM, K_SOFTMAX } kind;

/* Seconds of one replay of a graph with `copies` independent copies of the kernel, the median
 * of 3 rounds of `reps` replays; < 0 on failure (a note says why). */
static double time_copies(kind k, ldt_dtype t, int64_t m, int64_t n, int64_t kk, int copies,
                          int reps, const void *host) {
    ldt_ctx_options co = {0};
    ldt_ctx *ctx = NULL;
    ldt_plan *plan = NULL;
    ldt__cuda_exec *x = NULL;
    ldt_status st;
    double secs = -1;
    int32_t *outs = calloc((size_t)copies, sizeof *outs);
    ldt_tensor **res = calloc((size_t)copies, sizeof *res);
    co.seed = 1;
    if (!outs || !res || ldt_ctx_create(&co, &ctx) != LDT_OK) goto done;
    for (int c = 0; c < copies; c++) {
        char an[32], bn[32];
        snprintf(an, sizeof an, "a%d", c);
        snprintf(bn, sizeof bn, "b%d", c);
        if (k == K_GEMM) {
            ldt_shape as = {2, {m, kk}}, bs = {2, {kk, n}};
            ldt_tensor *a = ldt_param(ctx, an, &as, t), *b = ldt_param(ctx, bn, &bs, t);
            if (ldt_param_set(a, host, m * kk * (int64_t)ldt_dtype_size(t)) != LDT_OK ||
                ldt_param_set(b, host, kk * n * (int64_t)ldt_dtype_size(t)) != LDT_OK)
                goto done;
            res[c] = ldt_matmul(a, b);
        } else {
            ldt_shape xs = {2, {m, n}};
            ldt_tensor *a = ldt_param(ctx, an, &xs, t);
            if (ldt_param_set(a, host, m * n * (int64_t)ldt_dtype_size(t)) != LDT_OK) goto done;
            if (k == K_ADD) {
                ldt_tensor *b = ldt_param(ctx, bn, &xs, t);
                if (ldt_param_set(b, host, m * n * (int64_t)ldt_dtype_size(t)) != LDT_OK) goto done;
                res[c] = ldt_add(a, b);
            } else if (k == K_NORM) {
                ldt_shape ws = {1, {n}};
                ldt_tensor *w = ldt_param(ctx, bn, &ws, t);
                if (ldt_param_set(w, host, n * (int64_t)ldt_dtype_size(t)) != LDT_OK) goto done;
                res[c] = ldt_layer_norm(a, 1, w, NULL, 1e-5);
            } else {
                res[c] = ldt_softmax(a, 1);
            }
        }
        if (!res[c]) goto done;
    }
    if (ldt_plan_create(ctx, NULL, &plan) != LDT_OK) goto done;
    const ldt__program *p = ldt__plan_program(plan, 0, &st);
    if (!p) goto done;
    for (int c = 0; c < copies; c++) outs[c] = p->node_val[res[c]->id];
    if (ldt__cuda_exec_create(p, outs, copies, &x) != LDT_OK) goto done;
    if (ldt__cuda_exec_replay(x) != LDT_OK) goto done; /* warm: clocks, cuBLAS heuristics */
    /* a round of about 0.05 s at the speed measured (a slow kernel would otherwise take the
     * peak's estimate of reps: 85x too many for a 39 GB/s layer norm) */
    double t_one = bench_now();
    if (ldt__cuda_exec_replay(x) != LDT_OK) goto done;
    t_one = bench_now() - t_one;
    if (t_one > 0 && reps > 2 && (double)reps * t_one > 0.05) {
        reps = (int)(0.05 / t_one);
        reps = reps < 2 ? 2 : reps;
    }
    double t_r[3];
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now();
        for (int i = 0; i < reps; i++)
            if (ldt__cuda_exec_replay(x) != LDT_OK) goto done;
        t_r[r] = (bench_now() - t0) / reps;
    }
    secs = bench_median(t_r, 3);
done:
    if (secs < 0) bench_note("gpu_gemm: %s", ldt_last_error());
    ldt__cuda_exec_destroy(x);
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    free(outs);
    free(res);
    return secs;
}

/* Seconds of one kernel: the slope between R and 2R copies (never below a tenth of the
 * 2R replay's share, should noise make the slope vanish). */
static double time_one(kind k, ldt_dtype t, int64_t m, int64_t n, int64_t kk, double work,
                       double peak, int quick, double *host_cap, void **host) {
    int64_t need = k == K_GEMM ? (m * kk > kk * n ? m * kk : kk * n) : m * n;
    if ((double)need > *host_cap) { /* one host buffer, large enough for every input */
        free(*host);
        *host = make_host(t, need);
        *host_cap = *host ? (double)need : 0;
        if (!*host) return -1;
    }
    int R = (int)ceil((k == K_GEMM ? 1e11 : 2e9) / (work > 1 ? work : 1));
    R = R < 1 ? 1 : R > 32 ? 32 : R;
    if (ldt_cuda_emulated()) R = 1; /* CPU timings: the copies only cost time */
    /* replays: about 0.05 s of work at the peak (989 TFLOP/s, 2 TB/s if not known) a round,
     * at least 2 */
    double est = R * work / (peak > 0 ? peak : k == K_GEMM ? 989e12 : 2e12);
    int reps = (int)(0.05 / (est > 1e-6 ? est : 1e-6));
    reps = reps < 2 ? 2 : reps > 200 ? 200 : reps;
    if (quick) reps = reps > 5 ? 5 : reps;
    if (ldt_cuda_emulated()) reps = 2;
    double t1 = time_copies(k, t, m, n, kk, R, reps, *host);
    double t2 = t1 < 0 ? -1 : time_copies(k, t, m, n, kk, 2 * R, reps, *host);
    if (t2 < 0) return -1;
    double s = (t2 - t1) / R;
    return s > t2 / (20.0 * R) ? s : t2 / (20.0 * R);
}

typedef struct host_buf {
    void *p[3]; /* per dtype: bf16, f16, f32 */
    double cap[3];
} host_buf;

static int dt_slot(ldt_dtype t) { return t == LDT_BF16 ? 0 : t == LDT_F16 ? 1 : 2; }

static void gemm(bench_results *out, const dev_info *d, host_buf *hb, ldt_dtype t, int64_t m,
                 int64_t n, int64_t k, const char *layer, int quick) {
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int s = dt_slot(t);
    double sec = time_one(K_GEMM, t, m, n, k, flops, dt_peak(d, t), quick, &hb->cap[s], &hb->p[s]);
    if (sec <= 0) return;
    int idx = bench_add(out, "gemm_tflops", flops / sec / 1e12, "TFLOP/s");
    int jdx = dt_peak(d, t) > 0 ? bench_add(out, "gemm_efficiency", flops / sec / dt_peak(d, t), "")
                                : -1;
    for (int q = 0; q < 2; q++) {
        int i = q ? jdx : idx;
        if (i < 0) continue;
        bench_param_int(out, i, "m", m);
        bench_param_int(out, i, "n", n);
        bench_param_int(out, i, "k", k);
        bench_param_str(out, i, "dtype", dt_name(t));
        bench_param_int(out, i, "ns", (int64_t)llround(sec * 1e9));
        if (layer) bench_param_str(out, i, "layer", layer);
    }
}

static void membw(bench_results *out, const dev_info *d, host_buf *hb, kind k, int64_t rows,
                  int64_t cols, const char *what, int quick) {
    ldt_dtype t = LDT_BF16;
    double bytes = (k == K_ADD ? 3.0 : 2.0) * 2.0 * (double)rows * (double)cols;
    double sec = time_one(k, t, rows, cols, 0, bytes, d->mem_Bps, quick, &hb->cap[0], &hb->p[0]);
    if (sec <= 0) return;
    int i = bench_add(out, "membw_gbps", bytes / sec / 1e9, "GB/s");
    bench_param_str(out, i, "kernel", k == K_ADD ? "add" : k == K_NORM ? "layer_norm" : "softmax");
    bench_param_int(out, i, "rows", rows);
    bench_param_int(out, i, "cols", cols);
    bench_param_str(out, i, "dtype", dt_name(t));
    bench_param_int(out, i, "bytes", (int64_t)bytes);
    bench_param_int(out, i, "ns", (int64_t)llround(sec * 1e9));
    if (d->mem_Bps > 0)
        bench_param_int(out, i, "efficiency_pct",
                        (int64_t)llround(100.0 * bytes / sec / d->mem_Bps));
    bench_param_str(out, i, "size_of", what);
}

static void describe(dev_info *d) {
    int sms = 0, cc = 0;
    double clock = 0, mem = 0;
    memset(d, 0, sizeof *d);
    d->peak_from = "unknown";
    if (!ldt_cuda_emulated())
        ldt__cuda_device_info(d->name, sizeof d->name, &sms, &cc, &clock, &mem);
    d->mem_Bps = mem;
    const char *prof = strstr(d->name, "A100") ? "a100-80g"
                       : strstr(d->name, "H100") || strstr(d->name, "H200") ? "h100-80g"
                                                                             : NULL;
    ldt_cost_model cm;
    if (prof && ldt_cost_model_preset(prof, &cm) == LDT_OK) {
        d->peak[0] = d->peak[1] = cm.peak_flops[LDT_PREC_BF16];
        d->peak[2] = cm.peak_flops[LDT_PREC_F32];
        if (d->mem_Bps <= 0) d->mem_Bps = cm.memory_bandwidth_Bps;
        d->peak_from = prof;
    } else if ((cc == 80 || cc == 90) && sms > 0 && clock > 0) {
        /* dense 16-bit tensor-core and f32 FLOPs per SM-clock (A100: 2048 and 128; H100: 4096
         * and 256), the figures the datasheets' peaks are made of */
        double t16 = cc == 80 ? 2048 : 4096, f32 = cc == 80 ? 128 : 256;
        d->peak[0] = d->peak[1] = sms * clock * t16;
        d->peak[2] = sms * clock * f32;
        d->peak_from = "cudaGetDeviceProperties";
    }
}

int bench_gpu_gemm(const bench_opts *o, bench_results *out) {
    if (ldt_cuda_device_count() == 0) {
        bench_note("gpu_gemm: no CUDA device (%s): nothing measured",
                   ldt_built_with_cuda() ? "the runtime reports none or no driver"
                                         : "this build has no CUDA");
        return 0;
    }
    dev_info d;
    describe(&d);
    host_buf hb = {{NULL, NULL, NULL}, {0, 0, 0}};
    const ldt_dtype dts[3] = {LDT_BF16, LDT_F16, LDT_F32};
    int emu = ldt_cuda_emulated();
    if (emu) bench_note("gpu_gemm: the CUDA emulator (LDT_CUDA=EMU): these are CPU timings");
    else bench_note("gpu_gemm: %s, efficiency over %s", d.name, d.peak_from);
    /* squares */
    int64_t lo = emu ? 32 : 512, hi = emu ? (o->quick ? 64 : 128) : o->quick ? 4096 : 8192;
    for (int di = 0; di < 3; di++)
        for (int64_t s = lo; s <= hi; s *= 2) gemm(out, &d, &hb, dts[di], s, s, s, NULL, o->quick);
    /* the checks' linears on tp = 8 shards; the emulator: h and b*s divided by 64 */
    static const struct {
        const char *model;
        int64_t h, bs;
    } models[2] = {{"22B", 6144, 4 * 2048}, {"175B", 12288, 2048}};
    const int64_t tp = 8, div = emu ? 64 : 1;
    for (int mi = 0; mi < (o->quick ? 1 : 2); mi++) {
        int64_t h = models[mi].h / div, bs = models[mi].bs / div;
        /* [b*s, k] x [k, n]: qkv (h -> 3h/t), proj (h/t -> h), fc1 (h -> 4h/t), fc2 (4h/t -> h) */
        const struct {
            const char *name;
            int64_t k, n;
        } lin[4] = {{"qkv", h, 3 * h / tp}, {"proj", h / tp, h}, {"fc1", h, 4 * h / tp},
                    {"fc2", 4 * h / tp, h}};
        for (int li = 0; li < 4; li++) {
            char tag[64];
            snprintf(tag, sizeof tag, "%s %s fwd", models[mi].model, lin[li].name);
            gemm(out, &d, &hb, LDT_BF16, bs, lin[li].n, lin[li].k, tag, o->quick);
            snprintf(tag, sizeof tag, "%s %s dgrad", models[mi].model, lin[li].name);
            gemm(out, &d, &hb, LDT_BF16, bs, lin[li].k, lin[li].n, tag, o->quick);
            snprintf(tag, sizeof tag, "%s %s wgrad", models[mi].model, lin[li].name);
            gemm(out, &d, &hb, LDT_BF16, lin[li].k, lin[li].n, bs, tag, o->quick);
        }
        /* bandwidth: the residual add and layer norm over [b*s, h], softmax over the scores
         * [b (a/t) s, s] (a/t = 8 heads a rank for 22B, 12 for 175B) */
        int64_t s = 2048 / div, heads = mi == 0 ? 8 : 12, b = mi == 0 ? 4 : 1;
        char tag[32];
        snprintf(tag, sizeof tag, "%s", models[mi].model);
        membw(out, &d, &hb, K_ADD, bs, h, tag, o->quick);
        membw(out, &d, &hb, K_NORM, bs, h, tag, o->quick);
        membw(out, &d, &hb, K_SOFTMAX, b * heads * s, s, tag, o->quick);
    }
    for (int i = 0; i < 3; i++) free(hb.p[i]);
    return 0;
}
