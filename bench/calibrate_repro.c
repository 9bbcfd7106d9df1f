/* ldt-bench calibrate_repro: does calibration reproduce? Two consecutive calibrations of the
 * same 4-rank threads mesh (as `ldt calibrate --mesh 4` runs it: each timing the lower
 * quartile of its runs over three rounds), and each figure of the two profiles side by side,
 * as the ratio max(a, b) / min(a, b): the bandwidths and FLOP/s the profile states (goal:
 * within 1.25); its latencies and the priced waits of a meeting (within 2x, or 20 us apart);
 * the rendezvous share (within 1.25, or 0.1 apart: a fraction of the compute before a
 * meeting, and a ratio of two fractions near 0 says nothing); the prices of every kind at
 * every size the first calibration timed, of the local ops, GEMMs and adds (within 1.25, or
 * 20 us apart); and the fit's parameters (bytes and knee factors, the knee), shown but not a
 * goal: they trade against each other, and the prices are what they set. Every figure is one
 * result `ratio` with its name as the param `figure` (the two values, in the unit the name
 * ends with, as `first` and `second`; `within_goal` 1 or 0); `worst_ratio_bandwidth`,
 * `worst_ratio_price`, `worst_ratio_parameter`, `worst_ratio_latency` and (when the mesh
 * has more ranks than cores) `worst_ratio_share` sum them up (see report), each class its
 * own goal; `calibrate_seconds` times each run, and `others_share` says what share of the
 * machine's cores other processes kept busy meanwhile (core/sysmem.h; where /proc/stat is).
 * With LDT_REPRO_DIR set to a folder, both calibrations go there as `ldt calibrate --json`
 * prints them (cal-1.json, cal-2.json: profile and timings), for `calibrate_refit` to fit
 * again after a change to the fit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_util.h"
#include "core/sysmem.h"
#include "exec/calibrate_internal.h"
#include "ldt/ldt.h"

/* What a figure is, and so its goal. */
enum {
    FIG_RATE,      /* a bandwidth or FLOP/s the profile states: within 25% */
    FIG_LATENCY,   /* a latency the profile states: within 2x or 20 us apart */
    FIG_SHARE,     /* the rendezvous share: within 25% or 0.1 apart */
    FIG_PARAMETER, /* a fit parameter (bytes and knee factors, the knee): within 25%, shown
                      but not a goal: the prices below are what it sets */
    FIG_PRICE      /* a price in microseconds: within 25% or 20 us apart */
};

typedef struct figure {
    char name[48];
    double a, b;
    int cls; /* FIG_* */
} figure;

#define MAX_FIGURES 256

static void add(figure *f, int *n, const char *name, double a, double b, int cls) {
    if (*n >= MAX_FIGURES) return;
    snprintf(f[*n].name, sizeof f[*n].name, "%s", name);
    f[*n].a = a;
    f[*n].b = b;
    f[*n].cls = cls;
    (*n)++;
}

static double ratio(double a, double b) {
    double lo = a < b ? a : b, hi = a < b ? b : a;
    if (hi <= 0) return 1;  /* both 0: the same */
    if (lo <= 0) return INFINITY;
    return hi / lo;
}

/* "4k", "1.5m": a size in bytes for a figure's name. */
static void size_name(char *buf, size_t cap, double b) {
    if (b >= 1 << 20) snprintf(buf, cap, "%gm", b / (1 << 20));
    else snprintf(buf, cap, "%gk", b / 1024);
}

/* 1 when c is a local op's timing (chunk, partial or pad). */
static int sample_is_local(const ldt_cost_sample *c) {
    return !c->broadcast && (c->collective == LDT_COLL_LOCAL_CHUNK || c->collective == LDT_COLL_LOCAL_PARTIAL ||
                             c->collective == LDT_COLL_LOCAL_PAD);
}

/* Seconds profile m prices sample c at: a collective as ldt_cost_kind_seconds (send/recv's
 * group is its peers), a local op as ldt_cost_seconds of that op on mesh dim 0. */
static double sample_price(const ldt_cost_model *m, const ldt_mesh *mesh, const ldt_cost_sample *c) {
    int dim0 = 0;
    if (sample_is_local(c))
        return ldt_cost_seconds(m, mesh, 1, &dim0, c->collective, c->bytes, 0);
    if (c->dim < 0 || c->dim >= m->nlinks) return 0;
    if (c->broadcast) return ldt_cost_kind_seconds(m, m->links[c->dim], c->group, LDT_KIND_BROADCAST, c->bytes);
    if (c->collective == LDT_COLL_SEND_RECV)
        return ldt_cost_kind_seconds(m, m->links[c->dim], c->group + 1, LDT_KIND_SEND_RECV, c->bytes);
    return ldt_cost_kind_seconds(m, m->links[c->dim], c->group, (ldt_coll_kind)c->collective, c->bytes);
}

/* What each profile prices, at the sizes and shapes calibration measured (s, n: the first
 * calibration's samples; fit_only: only what ldt_cost_model_fit sets): each collective kind
 * on its link and each local op at every size it was timed, and without
 * fit_only a GEMM of 32 to 1024 square, an add of 64 KiB to 64 MiB, and a meeting's wait
 * after 10 us to 10 ms of compute (a latency: within 2x or 20 us; on mesh: the 4 rank
 * threads both were calibrated on). The
 * parameters of a fit trade against each other (a knee at 512 KiB with a larger past-knee
 * factor prices the sizes past 2 MiB as a knee at 2 MiB with a smaller one does), so two
 * profiles whose parameters differ can price every size alike; the prices are what plans see. */
static int prices(const ldt_cost_model *a, const ldt_cost_model *b, const ldt_mesh *mesh,
                  const ldt_cost_sample *s, int ns, int fit_only, figure *f, int n) {
    char nm[48], sz[16];
    int nr = ldt_mesh_nranks(mesh);
    for (int i = 0; i < ns; i++) {
        const char *kind = s[i].broadcast ? "broadcast" : ldt_collective_name(s[i].collective);
        int dup = 0, local = sample_is_local(&s[i]);
        for (int j = 0; j < i && !dup; j++) /* a local op's price is the same on every dim */
            dup = s[j].bytes == s[i].bytes && s[j].broadcast == s[i].broadcast &&
                  (s[i].broadcast || s[j].collective == s[i].collective) && (local || s[j].dim == s[i].dim);
        if (dup) continue;
        size_name(sz, sizeof sz, (double)s[i].bytes);
        if (local) snprintf(nm, sizeof nm, "price_%s_%s_us", kind, sz); /* price_local_pad_4m_us */
        else snprintf(nm, sizeof nm, "price%d_%s_%s_us", s[i].dim, kind, sz);
        add(f, &n, nm, sample_price(a, mesh, &s[i]) * 1e6, sample_price(b, mesh, &s[i]) * 1e6, FIG_PRICE);
    }
    if (fit_only) return n;
    for (int64_t g = 32; g <= 1024; g *= 2) {
        double fl = 2.0 * (double)g * (double)g * (double)g, by = 12.0 * (double)g * (double)g;
        snprintf(nm, sizeof nm, "price_gemm_%d_us", (int)g);
        add(f, &n, nm, ldt_cost_op_seconds(a, LDT_OPCLASS_MATMUL, LDT_F32, fl, by, nr) * 1e6,
            ldt_cost_op_seconds(b, LDT_OPCLASS_MATMUL, LDT_F32, fl, by, nr) * 1e6, FIG_PRICE);
    }
    for (int64_t by = 64 << 10; by <= (64 << 20); by *= 4) {
        size_name(sz, sizeof sz, (double)by);
        snprintf(nm, sizeof nm, "price_add_%s_us", sz);
        add(f, &n, nm, ldt_cost_op_seconds(a, LDT_OPCLASS_ELEMENTWISE, LDT_F32, (double)by / 12, (double)by, nr) * 1e6,
            ldt_cost_op_seconds(b, LDT_OPCLASS_ELEMENTWISE, LDT_F32, (double)by / 12, (double)by, nr) * 1e6,
            FIG_PRICE);
    }
    for (double c = 1e-5; c <= 1.001e-2; c *= 10) { /* as the step model prices a meeting */
        double wa = a->cores > 0 && nr > a->cores ? (a->rendezvous_s + a->rendezvous_share * c) * ((double)nr / a->cores - 1) : 0,
               wb = b->cores > 0 && nr > b->cores ? (b->rendezvous_s + b->rendezvous_share * c) * ((double)nr / b->cores - 1) : 0;
        snprintf(nm, sizeof nm, "price_wait_after_%.0fus_us", c * 1e6);
        add(f, &n, nm, wa * 1e6, wb * 1e6, FIG_LATENCY); /* a meeting's wait: a latency */
    }
    return n;
}

/* The figures the goal names, in the units of their names, then the prices; fit_only: only
 * those ldt_cost_model_fit sets (not the compute figures, which calibration measures apart). */
static int figures(const ldt_cost_model *a, const ldt_cost_model *b, const ldt_mesh *mesh, const ldt_cost_sample *s,
                   int ns, int fit_only, figure *f) {
    int n = 0;
    char nm[48];
    for (int d = 0; d < a->nlinks && d < b->nlinks; d++) {
        snprintf(nm, sizeof nm, "link%d_bandwidth_gbps", d);
        add(f, &n, nm, a->links[d].bandwidth_Bps / 1e9, b->links[d].bandwidth_Bps / 1e9, FIG_RATE);
        snprintf(nm, sizeof nm, "link%d_latency_us", d);
        add(f, &n, nm, a->links[d].latency_s * 1e6, b->links[d].latency_s * 1e6, FIG_LATENCY);
    }
    add(f, &n, "local_bandwidth_gbps", a->local_bandwidth_Bps / 1e9, b->local_bandwidth_Bps / 1e9, FIG_RATE);
    if (!fit_only) {
        add(f, &n, "peak_f32_gflops", a->peak_flops[LDT_PREC_F32] / 1e9, b->peak_flops[LDT_PREC_F32] / 1e9, FIG_RATE);
        add(f, &n, "memory_bandwidth_gbps", a->memory_bandwidth_Bps / 1e9, b->memory_bandwidth_Bps / 1e9, FIG_RATE);
    }
    for (int k = 0; k < LDT_KIND_COUNT; k++) {
        snprintf(nm, sizeof nm, "bytes_factor_%s", ldt_coll_kind_name((ldt_coll_kind)k));
        add(f, &n, nm, 1 + a->bytes_extra[k], 1 + b->bytes_extra[k], FIG_PARAMETER);
    }
    /* past the knee a byte costs 1 + beyond times one below it */
    for (int k = 0; k <= LDT_KIND_COUNT; k++) {
        snprintf(nm, sizeof nm, "beyond_cache_%s",
                 k == LDT_KIND_COUNT ? "local" : ldt_coll_kind_name((ldt_coll_kind)k));
        add(f, &n, nm, 1 + a->beyond_cache[k], 1 + b->beyond_cache[k], FIG_PARAMETER);
    }
    add(f, &n, "cache_knee_kib", a->cache_bytes / 1024, b->cache_bytes / 1024, FIG_PARAMETER);
    for (int i = 0; i < LDT_LOCAL_OP_COUNT; i++) {
        snprintf(nm, sizeof nm, "bytes_factor_%s", ldt_collective_name((ldt_collective)(LDT_COLL_LOCAL_CHUNK + i)));
        add(f, &n, nm, 1 + a->local_bytes_extra[i], 1 + b->local_bytes_extra[i], FIG_PARAMETER);
    }
    add(f, &n, "local_knee_kib", a->local_cache_bytes / 1024, b->local_cache_bytes / 1024, FIG_PARAMETER);
    if (!fit_only) add(f, &n, "rendezvous_share", a->rendezvous_share, b->rendezvous_share, FIG_SHARE);
    add(f, &n, "overhead_us", a->overhead_s * 1e6, b->overhead_s * 1e6, FIG_LATENCY);
    for (int k = 0; k < LDT_KIND_COUNT; k++) { /* the kinds that have their own (the fit's) */
        if (k != LDT_KIND_ALL_REDUCE && k != LDT_KIND_SEND_RECV && k != LDT_KIND_BROADCAST) continue;
        /* the call's whole fixed cost, overhead + the kind's (which may be negative) */
        snprintf(nm, sizeof nm, "overhead_%s_us", ldt_coll_kind_name((ldt_coll_kind)k));
        add(f, &n, nm, (a->overhead_s + a->kind_overhead_s[k]) * 1e6, (b->overhead_s + b->kind_overhead_s[k]) * 1e6,
            FIG_LATENCY);
    }
    add(f, &n, "local_overhead_us", a->local_overhead_s * 1e6, b->local_overhead_s * 1e6, FIG_LATENCY);
    if (!fit_only) {
        add(f, &n, "launch_us", a->launch_s * 1e6, b->launch_s * 1e6, FIG_LATENCY);
        add(f, &n, "rendezvous_us", a->rendezvous_s * 1e6, b->rendezvous_s * 1e6, FIG_LATENCY);
    }
    return prices(a, b, mesh, s, ns, fit_only, f, n);
}

/* The verdicts of one comparison: the worst ratio of each class (prices: over those more
 * than 20 us apart; latencies: over those outside their goal, 1 when none is) and the figure
 * it names. */
typedef struct verdict {
    double bw, price, param, lat, share;
    const char *bw_name, *price_name, *param_name, *lat_name;
    int lat_ok, price_ok, share_ok, has_share;
} verdict;

static void worst(double q, const char *name, double *w, const char **wn) {
    if (q > *w) {
        *w = q;
        *wn = name;
    }
}

/* Each figure of a and b as one result `ratio` (params figure, first, second, within_goal,
 * and `sizes` when not NULL: a refit, whose figures are the fit's only), then
 * worst_ratio_bandwidth, worst_ratio_price, worst_ratio_parameter and worst_ratio_latency
 * into *v. */
/* Figure f as one result `ratio` (params figure, first, second, within_goal, and sizes when
 * not NULL) and a note line; returns whether it is within its class's goal, *q its ratio. */
static int emit(bench_results *out, const figure *f, const char *sizes, double *q) {
    double apart = fabs(f->a - f->b);
    char val[32];
    int idx, ok;
    *q = ratio(f->a, f->b);
    ok = f->cls == FIG_LATENCY ? (*q <= 2 || apart <= 20)
         : f->cls == FIG_SHARE ? (*q <= 1.25 || apart <= 0.1)
         : f->cls == FIG_PRICE ? (*q <= 1.25 || apart <= 20)
                               : *q <= 1.25;
    idx = bench_add(out, "ratio", isfinite(*q) ? *q : 1e300, "ratio");
    bench_param_str(out, idx, "figure", f->name);
    snprintf(val, sizeof val, "%.4g", f->a);
    bench_param_str(out, idx, "first", val);
    snprintf(val, sizeof val, "%.4g", f->b);
    bench_param_str(out, idx, "second", val);
    bench_param_int(out, idx, "within_goal", ok);
    if (sizes) bench_param_str(out, idx, "sizes", sizes);
    bench_note("%s%s%-32s %12.4g %12.4g  %6.2fx%s%s", sizes ? sizes : "", sizes ? ": " : "", f->name, f->a, f->b, *q,
               ok ? "" : "  (outside", ok ? "" : f->cls == FIG_PARAMETER ? " 25%: not a goal)" : " the goal)");
    return ok;
}

static void report(bench_results *out, const ldt_cost_model *a, const ldt_cost_model *b, const ldt_mesh *mesh,
                   const ldt_cost_sample *s, int ns, const char *sizes, verdict *v) {
    static figure f[MAX_FIGURES];
    int n, idx;
    v->bw = v->price = v->param = v->lat = v->share = 1;
    v->bw_name = v->price_name = v->param_name = v->lat_name = "";
    v->lat_ok = v->price_ok = v->share_ok = 1;
    v->has_share = 0;
    n = figures(a, b, mesh, s, ns, sizes != NULL, f);
    for (int i = 0; i < n; i++) {
        double q, apart = fabs(f[i].a - f[i].b);
        int ok = emit(out, &f[i], sizes, &q);
        switch (f[i].cls) {
        case FIG_LATENCY:
            v->lat_ok &= ok;
            if (!ok) worst(q, f[i].name, &v->lat, &v->lat_name);
            break;
        case FIG_PRICE:
            v->price_ok &= ok;
            if (apart > 20) worst(q, f[i].name, &v->price, &v->price_name);
            break;
        case FIG_PARAMETER:
            if (strcmp(f[i].name, "cache_knee_kib") != 0) worst(q, f[i].name, &v->param, &v->param_name);
            break;
        case FIG_SHARE: /* a fraction of compute, not a rate: a goal of its own */
            v->share = q;
            v->share_ok = ok;
            v->has_share = 1;
            break;
        default: worst(q, f[i].name, &v->bw, &v->bw_name);
        }
    }
    {
        const struct { const char *result; double w; const char *name; int ok; } sum[5] = {
            {"worst_ratio_bandwidth", v->bw, v->bw_name, v->bw <= 1.25},
            {"worst_ratio_price", v->price, v->price_name, v->price_ok},
            {"worst_ratio_parameter", v->param, v->param_name, v->param <= 1.25},
            {"worst_ratio_latency", v->lat, v->lat_name, v->lat_ok},
            {"worst_ratio_share", v->share, "rendezvous_share", v->share_ok}};
        for (int i = 0; i < (v->has_share ? 5 : 4); i++) {
            idx = bench_add(out, sum[i].result, isfinite(sum[i].w) ? sum[i].w : 1e300, "ratio");
            bench_param_str(out, idx, "figure", sum[i].name);
            bench_param_int(out, idx, "within_goal", sum[i].ok);
            if (sizes) bench_param_str(out, idx, "sizes", sizes);
        }
    }
}

/* Writes calibration r (1 or 2) as `ldt calibrate --json` would, into dir/cal-r.json, for
 * `ldt-bench calibrate_refit` to fit again later; a note when it cannot. */
static void save_calibration(const char *dir, int r, const ldt_cost_model *cm, const ldt_cost_sample *s, int n,
                             double rms, const ldt__host_watch *hw) {
    char path[4096], *text = ldt__calibration_json(cm, s, n, rms, hw);
    FILE *f;
    snprintf(path, sizeof path, "%s/cal-%d.json", dir, r);
    if (!text || !(f = fopen(path, "w"))) {
        bench_note("calibrate_repro: could not write %s", path);
        cJSON_free(text);
        return;
    }
    fprintf(f, "%s\n", text);
    if (fclose(f) != 0) bench_note("calibrate_repro: could not write %s", path);
    cJSON_free(text);
}

/* The cores' round trips around two calibrations (rt[f][0] before calibration f + 1, [1]
 * after; <= 0: not measured) as results `core_round_trip_ns` (params calibration, at) and a
 * note: "steady", or "changed" when any two readings are more than 1.5x apart (a virtual
 * machine whose cores moved: 195 and 594 ns minutes apart on one 2-core guest, its MPI
 * calibrations' link bandwidth 1.5 and 1.2 GB/s), so figures that differ may be the
 * machine's and not the calibration's. */
static void round_trips(bench_results *out, double rt[2][2]) {
    double lo = INFINITY, hi = 0;
    char txt[2][64];
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < 2; i++) {
            int idx;
            if (!(rt[f][i] > 0)) continue;
            if (rt[f][i] < lo) lo = rt[f][i];
            if (rt[f][i] > hi) hi = rt[f][i];
            idx = bench_add(out, "core_round_trip_ns", rt[f][i], "ns");
            bench_param_int(out, idx, "calibration", f + 1);
            bench_param_str(out, idx, "at", i ? "end" : "start");
        }
        snprintf(txt[f], sizeof txt[f], "%.0f -> %.0f", rt[f][0], rt[f][1]);
    }
    if (!(hi > 0)) return;
    bench_note("machine: a round trip between two cores took %s ns around calibration 1 and %s ns around 2: %s",
               txt[0], txt[1],
               ldt__round_trip_shifted(lo, hi) ? "changed: the cores' links changed speed, so figures that differ "
                                                 "may be the machine's, not the calibration's"
                                               : "steady");
}

int bench_calibrate_repro(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh = NULL;
    ldt_cost_model cm[2];
    ldt_calibrate_options copt = {o->quick, 0, 0, NULL, 0};
    ldt_cost_sample *s = NULL, *s2 = NULL;
    verdict v;
    ldt__host_watch hw[2] = {{0}};
    const char *dir = getenv("LDT_REPRO_DIR");
    int idx, cap, ns = 0, ns2 = 0;
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
    cap = ldt_calibrate_max_samples(mesh, &copt);
    s = calloc((size_t)(cap > 0 ? cap : 1), sizeof *s);
    s2 = calloc((size_t)(cap > 0 ? cap : 1), sizeof *s2);
    if (!s || !s2) {
        ldt_mesh_destroy(mesh);
        free(s);
        free(s2);
        return 1;
    }
    for (int r = 0; r < 2; r++) {
        bench_clock t0 = bench_clock_now(), dt;
        double rms = 0;
        hw[r].probe = 1;
        ldt__host_watch_start(&hw[r]);
        if (ldt_calibrate_samples(mesh, &copt, &cm[r], r ? s2 : s, cap, r ? &ns2 : &ns, &rms) != LDT_OK) {
            bench_note("calibrate_repro: %s", ldt_last_error());
            ldt_mesh_destroy(mesh);
            free(s);
            free(s2);
            return 1;
        }
        dt = bench_clock_since(t0, 1);
        ldt__host_watch_stop(&hw[r]);
        if (dir && *dir) save_calibration(dir, r + 1, &cm[r], r ? s2 : s, r ? ns2 : ns, rms, &hw[r]);
        idx = bench_add_timed(out, "calibrate_seconds", dt.wall, dt.cpu, "s");
        bench_param_int(out, idx, "run", r + 1);
        bench_param_str(out, idx, "mesh", "4");
        if (hw[r].known) {
            idx = bench_add(out, "others_share", hw[r].others_share, "ratio");
            bench_param_int(out, idx, "run", r + 1);
        }
    }
    report(out, &cm[0], &cm[1], mesh, s, ns, NULL, &v);
    {
        double rt[2][2] = {{hw[0].round_trip_ns[0], hw[0].round_trip_ns[1]},
                           {hw[1].round_trip_ns[0], hw[1].round_trip_ns[1]}};
        round_trips(out, rt);
    }
    ldt_mesh_destroy(mesh);
    free(s);
    free(s2);
    bench_goal(out, v.bw <= 1.25, "bandwidths and FLOP/s within 25%%: worst %.2fx%s%s", v.bw, *v.bw_name ? ", " : "",
               v.bw_name);
    bench_goal(out, v.price_ok, "prices at every size within 25%% or 20 us: worst %.2fx%s%s", v.price,
               *v.price_name ? ", " : "", v.price_name);
    bench_goal(out, v.lat_ok, "latencies within 2x or 20 us%s%s", v.lat_ok ? "" : ": worst outside, ", v.lat_name);
    if (v.has_share)
        bench_goal(out, v.share_ok, "rendezvous share within 25%% or 0.1 (ranks over cores only): %.2fx", v.share);
    bench_note("fit parameters (not a goal; the prices are what they set): worst %.2fx%s%s", v.param,
               *v.param_name ? ", " : "", v.param_name);
    if (hw[0].known && hw[1].known)
        bench_note("host: other processes kept %.0f%% and %.0f%% of the %d cores busy during the two "
                   "calibrations%s",
                   100 * hw[0].others_share, 100 * hw[1].others_share, hw[0].cores,
                   hw[0].others_share > 0.1 || hw[1].others_share > 0.1
                       ? ": a busy machine, whatever the goals say"
                       : "");
    return 0;
}

/* ---- ldt-bench calibrate_refit FILE1 FILE2 ---------------------------------------------- */
/* The two files' timings fitted again (each file's profile the start), every figure the fit
 * sets compared as calibrate_repro's, with every sample (sizes "all") and with calibrate's
 * eight sizes only ("calibrate"); and the compute figures as the files saved them (sizes
 * "saved": the f32 peak and the memory bandwidth, which no fit sets), so that two
 * calibrations under MPI (`ldt calibrate --backend mpi --json`, twice) compare in one command. */

/* The text of file path (malloc'd), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long len;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)len + 1)) != NULL) {
        if (fread(text, 1, (size_t)len, f) != (size_t)len) {
            free(text);
            text = NULL;
        } else {
            text[len] = 0;
        }
    }
    fclose(f);
    return text;
}

/* A saved calibration: its profile (the fit's starting point: links, algorithms, compute) and
 * its "fit" samples; 0 when the file is not one. */
static int load_calibration(const char *path, ldt_cost_model *m, ldt_cost_sample **s, int *n, double rt[2]) {
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL, *arr, *e;
    int ok = 0, k = 0;
    *s = NULL;
    *n = 0;
    rt[0] = rt[1] = -1;
    if (!root || ldt_cost_model_parse(text, m) != LDT_OK) goto done;
    arr = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "fit"), "host"), "core_round_trip_ns");
    for (int i = 0; i < 2 && cJSON_GetArraySize(arr) == 2; i++)
        if (cJSON_IsNumber(cJSON_GetArrayItem(arr, i))) rt[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(arr, i));
    arr = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "fit"), "samples");
    if (!cJSON_IsArray(arr) || !(*s = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof **s))) goto done;
    cJSON_ArrayForEach(e, arr) {
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(e, "collective"));
        ldt_cost_sample *x = &(*s)[k];
        int known = 0;
        if (!c) goto done;
        if (strcmp(c, "broadcast") == 0) {
            x->broadcast = 1;
            known = 1;
        }
        for (int j = 0; j < LDT_COLL_COUNT && !known; j++)
            if (strcmp(c, ldt_collective_name((ldt_collective)j)) == 0) {
                x->collective = (ldt_collective)j;
                known = 1;
            }
        if (!known) goto done;
        x->dim = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "mesh_dim"));
        x->group = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "group"));
        x->bytes = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "bytes"));
        x->seconds = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "measured_s"));
        k++;
    }
    *n = k;
    ok = k > 0;
done:
    if (!ok) {
        free(*s);
        *s = NULL;
    }
    cJSON_Delete(root);
    free(text);
    return ok;
}

static int same_series(const ldt_cost_sample *a, const ldt_cost_sample *b) {
    return a->broadcast == b->broadcast && (a->broadcast || a->collective == b->collective) && a->dim == b->dim &&
           a->group == b->group;
}

/* Keeps the samples of the sizes `ldt calibrate` takes (4 KiB to 64 MiB by 4x): those whose
 * bytes are the largest of their series' over a power of 4 (every series has the 64 MiB
 * one, and the busiest rank's bytes are a fixed share of the tensor's). Returns the count. */
static int calibrate_sizes(ldt_cost_sample *s, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        int64_t top = 0;
        double q;
        for (int j = 0; j < n; j++)
            if (same_series(&s[i], &s[j]) && s[j].bytes > top) top = s[j].bytes;
        q = s[i].bytes > 0 ? log((double)top / (double)s[i].bytes) / log(4.0) : 0.5;
        if (fabs(q - floor(q + 0.5)) < 1e-6) s[k++] = s[i];
    }
    return k;
}

/* Relative residuals of a fit: root mean square and largest over the samples it kept (weight
 * > 0, as `ldt calibrate --json` reports them) and over every sample. */
static void residuals(bench_results *out, const ldt_cost_sample *s, int n, int file, const char *sizes) {
    double sk = 0, mk = 0, sa = 0, ma = 0;
    int nk = 0, idx;
    for (int i = 0; i < n; i++) {
        double e = fabs((s[i].seconds - s[i].modeled) / s[i].seconds);
        sa += e * e;
        if (e > ma) ma = e;
        if (s[i].weight > 0) {
            sk += e * e;
            nk++;
            if (e > mk) mk = e;
        }
    }
    sk = nk ? sqrt(sk / nk) : 0;
    sa = n ? sqrt(sa / n) : 0;
    bench_note("%s: file %d: residual rms %.3f max %.3f over the %d kept samples; rms %.3f max %.3f over all %d",
               sizes, file, sk, mk, nk, sa, ma, n);
    for (int q = 0; q < 4; q++) { /* rms and max, over the kept samples and over all */
        idx = bench_add(out, q % 2 ? "max_residual" : "rms_residual", q == 0 ? sk : q == 1 ? mk : q == 2 ? sa : ma,
                        "ratio");
        bench_param_int(out, idx, "file", file);
        bench_param_str(out, idx, "sizes", sizes);
        bench_param_str(out, idx, "samples", q < 2 ? "kept" : "all");
    }
}

int bench_calibrate_refit(const bench_opts *o, bench_results *out) {
    ldt_cost_model base[2], cm[2];
    ldt_cost_sample *s[2] = {NULL, NULL}, *t[2] = {NULL, NULL};
    ldt_mesh *mesh = NULL;
    int n[2] = {0, 0}, rc = 1;
    double rt[2][2];
    if (o->nfiles != 2) {
        /* `ldt-bench all` runs it without files: nothing to refit */
        bench_note("calibrate_refit: give two `ldt calibrate --json` outputs (ldt-bench calibrate_refit A B)");
        return o->nfiles == 0 ? 0 : 1;
    }
    for (int f = 0; f < 2; f++)
        if (!load_calibration(o->files[f], &base[f], &s[f], &n[f], rt[f]) ||
            !(t[f] = malloc((size_t)n[f] * sizeof *t[f]))) {
            bench_note("calibrate_refit: %s: not a readable `ldt calibrate --json` output with a \"fit\" sample "
                       "list%s%s",
                       o->files[f], *ldt_last_error() ? ": " : "", ldt_last_error());
            goto done;
        }
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) goto done;
    { /* the compute figures as saved (no fit sets them): `ratio` with sizes "saved" */
        figure f[2];
        int n = 0;
        double q;
        add(f, &n, "peak_f32_gflops", base[0].peak_flops[LDT_PREC_F32] / 1e9, base[1].peak_flops[LDT_PREC_F32] / 1e9,
            FIG_RATE);
        add(f, &n, "memory_bandwidth_gbps", base[0].memory_bandwidth_Bps / 1e9, base[1].memory_bandwidth_Bps / 1e9,
            FIG_RATE);
        for (int i = 0; i < n; i++) emit(out, &f[i], "saved", &q);
    }
    round_trips(out, rt);
    for (int v = 0; v < 2; v++) {
        const char *sizes = v == 0 ? "all" : "calibrate";
        double rms;
        verdict w;
        int m[2];
        for (int f = 0; f < 2; f++) {
            memcpy(t[f], s[f], (size_t)n[f] * sizeof *t[f]);
            m[f] = v == 0 ? n[f] : calibrate_sizes(t[f], n[f]);
            cm[f] = base[f];
            if (ldt_cost_model_fit(t[f], m[f], &cm[f], &rms) != LDT_OK) {
                bench_note("calibrate_refit: %s: %s", o->files[f], ldt_last_error());
                goto done;
            }
            residuals(out, t[f], m[f], f + 1, sizes);
        }
        report(out, &cm[0], &cm[1], mesh, t[0], m[0], sizes, &w);
        bench_note("%s sizes: bandwidths worst %.2fx (%s), prices %s (worst %.2fx %s), latencies %s%s, parameters "
                   "worst %.2fx (%s)", sizes, w.bw, w.bw_name, w.price_ok ? "within the goal" : "outside",
                   w.price, w.price_name, w.lat_ok ? "within the goal" : "outside: ", w.lat_name, w.param,
                   w.param_name);
    }
    rc = 0;
done:
    ldt_mesh_destroy(mesh);
    for (int f = 0; f < 2; f++) {
        free(s[f]);
        free(t[f]);
    }
    return rc;
}
