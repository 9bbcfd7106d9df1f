/* ldt-bench calibrate_repro: does calibration reproduce? Two consecutive calibrations of the
 * same 4-rank threads mesh (as `ldt calibrate --mesh 4` runs it: the fastest of repeats), and
 * each figure of the two profiles side by side: the ratio max(a, b) / min(a, b) of every
 * bandwidth, FLOP/s and per-kind factor (goal: within 1.25), and of every latency (goal:
 * within 2x, or 20 us apart). Every figure is one result `ratio` with its name as the param
 * `figure` (and the two values, in the unit the name ends with, as `first` and `second`;
 * `within_goal` 1 or 0); `worst_ratio_bandwidth` (over the bandwidths, FLOP/s and factors, the
 * knee left out: its effect is in the factors) and `worst_ratio_latency` (the worst latency
 * outside its goal, 1 when none is) sum them up; `calibrate_seconds` times each run. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_util.h"
#include "ldt/ldt.h"

typedef struct figure {
    char name[48];
    double a, b;
    int latency; /* 1: within 2x or 20 us; 0: within 25% */
} figure;

#define MAX_FIGURES 64

static void add(figure *f, int *n, const char *name, double a, double b, int latency) {
    if (*n >= MAX_FIGURES) return;
    snprintf(f[*n].name, sizeof f[*n].name, "%s", name);
    f[*n].a = a;
    f[*n].b = b;
    f[*n].latency = latency;
    (*n)++;
}

static double ratio(double a, double b) {
    double lo = a < b ? a : b, hi = a < b ? b : a;
    if (hi <= 0) return 1;  /* both 0: the same */
    if (lo <= 0) return INFINITY;
    return hi / lo;
}

/* The figures the goal names, in the units of their names. */
static int figures(const ldt_cost_model *a, const ldt_cost_model *b, figure *f) {
    int n = 0;
    char nm[48];
    for (int d = 0; d < a->nlinks && d < b->nlinks; d++) {
        snprintf(nm, sizeof nm, "link%d_bandwidth_gbps", d);
        add(f, &n, nm, a->links[d].bandwidth_Bps / 1e9, b->links[d].bandwidth_Bps / 1e9, 0);
        snprintf(nm, sizeof nm, "link%d_latency_us", d);
        add(f, &n, nm, a->links[d].latency_s * 1e6, b->links[d].latency_s * 1e6, 1);
    }
    add(f, &n, "local_bandwidth_gbps", a->local_bandwidth_Bps / 1e9, b->local_bandwidth_Bps / 1e9, 0);
    add(f, &n, "peak_f32_gflops", a->peak_flops[LDT_PREC_F32] / 1e9, b->peak_flops[LDT_PREC_F32] / 1e9, 0);
    add(f, &n, "memory_bandwidth_gbps", a->memory_bandwidth_Bps / 1e9, b->memory_bandwidth_Bps / 1e9, 0);
    for (int k = 0; k < LDT_KIND_COUNT; k++) {
        snprintf(nm, sizeof nm, "bytes_factor_%s", ldt_coll_kind_name((ldt_coll_kind)k));
        add(f, &n, nm, 1 + a->bytes_extra[k], 1 + b->bytes_extra[k], 0);
    }
    /* past the knee a byte costs 1 + beyond times one below it */
    for (int k = 0; k <= LDT_KIND_COUNT; k++) {
        snprintf(nm, sizeof nm, "beyond_cache_%s",
                 k == LDT_KIND_COUNT ? "local" : ldt_coll_kind_name((ldt_coll_kind)k));
        add(f, &n, nm, 1 + a->beyond_cache[k], 1 + b->beyond_cache[k], 0);
    }
    add(f, &n, "cache_knee_kib", a->cache_bytes / 1024, b->cache_bytes / 1024, 0);
    add(f, &n, "rendezvous_share", a->rendezvous_share, b->rendezvous_share, 0);
    add(f, &n, "overhead_us", a->overhead_s * 1e6, b->overhead_s * 1e6, 1);
    add(f, &n, "local_overhead_us", a->local_overhead_s * 1e6, b->local_overhead_s * 1e6, 1);
    add(f, &n, "launch_us", a->launch_s * 1e6, b->launch_s * 1e6, 1);
    add(f, &n, "rendezvous_us", a->rendezvous_s * 1e6, b->rendezvous_s * 1e6, 1);
    return n;
}

int bench_calibrate_repro(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh = NULL;
    ldt_cost_model cm[2];
    ldt_calibrate_options copt = {o->quick, 0, 0, NULL};
    figure f[MAX_FIGURES];
    double worst_bw = 1, worst_lat = 1;
    const char *worst_bw_name = "", *worst_lat_name = "";
    int n, idx, lat_ok = 1;
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
    for (int r = 0; r < 2; r++) {
        bench_clock t0 = bench_clock_now(), dt;
        if (ldt_calibrate(mesh, &copt, &cm[r]) != LDT_OK) {
            bench_note("calibrate_repro: %s", ldt_last_error());
            ldt_mesh_destroy(mesh);
            return 1;
        }
        dt = bench_clock_since(t0, 1);
        idx = bench_add_timed(out, "calibrate_seconds", dt.wall, dt.cpu, "s");
        bench_param_int(out, idx, "run", r + 1);
        bench_param_str(out, idx, "mesh", "4");
    }
    ldt_mesh_destroy(mesh);
    n = figures(&cm[0], &cm[1], f);
    for (int i = 0; i < n; i++) {
        double q = ratio(f[i].a, f[i].b);
        char v[32];
        int ok = f[i].latency ? (q <= 2 || fabs(f[i].a - f[i].b) <= 20) : q <= 1.25;
        idx = bench_add(out, "ratio", isfinite(q) ? q : 1e300, "ratio");
        bench_param_str(out, idx, "figure", f[i].name);
        snprintf(v, sizeof v, "%.4g", f[i].a);
        bench_param_str(out, idx, "first", v);
        snprintf(v, sizeof v, "%.4g", f[i].b);
        bench_param_str(out, idx, "second", v);
        bench_param_int(out, idx, "within_goal", ok);
        bench_note("calibrate_repro: %-28s %12.4g %12.4g  %6.2fx%s", f[i].name, f[i].a, f[i].b, q,
                   ok ? "" : "  (outside the goal)");
        if (f[i].latency) {
            lat_ok &= ok;
            if (!ok && q > worst_lat) {
                worst_lat = q;
                worst_lat_name = f[i].name;
            }
        } else if (strcmp(f[i].name, "cache_knee_kib") != 0 && q > worst_bw) {
            worst_bw = q;
            worst_bw_name = f[i].name;
        }
    }
    idx = bench_add(out, "worst_ratio_bandwidth", isfinite(worst_bw) ? worst_bw : 1e300, "ratio");
    bench_param_str(out, idx, "figure", worst_bw_name);
    idx = bench_add(out, "worst_ratio_latency", isfinite(worst_lat) ? worst_lat : 1e300, "ratio");
    bench_param_str(out, idx, "figure", worst_lat_name);
    bench_param_int(out, idx, "within_goal", lat_ok);
    bench_goal(out, worst_bw <= 1.25, "bandwidths, FLOP/s and factors within 25%%: worst %.2fx (%s)", worst_bw,
               worst_bw_name);
    bench_goal(out, lat_ok, "latencies within 2x or 20 us%s%s", lat_ok ? "" : ": worst outside, ", worst_lat_name);
    return 0;
}
