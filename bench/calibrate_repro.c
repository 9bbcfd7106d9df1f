/* ldt-bench calibrate_repro: does calibration reproduce? Two consecutive calibrations of the
 * same 4-rank threads mesh (as `ldt calibrate --mesh 4` runs it: the fastest of repeats), and
 * each figure of the two profiles side by side: the ratio max(a, b) / min(a, b) of every
 * bandwidth, FLOP/s and per-kind factor (goal: within 1.25), and of every latency (goal:
 * within 2x, or 20 us apart). Every figure is one result `ratio` with its name as the param
 * `figure` (and the two values, in the unit the name ends with, as `first` and `second`;
 * `within_goal` 1 or 0); `worst_ratio_bandwidth` (over the bandwidths, FLOP/s and factors, the
 * knee left out: its effect is in the factors) and `worst_ratio_latency` (the worst latency
 * outside its goal, 1 when none is) sum them up; `calibrate_seconds` times each run. The
 * rendezvous share, a fraction of the compute before a meeting (0 to 0.1 on a 2-core machine),
 * is within its goal at 25% or 0.1 apart: two shares 0.1 apart price a meeting's wait a tenth
 * of that compute apart, and a ratio of two fractions near 0 says nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench_util.h"
#include "ldt/ldt.h"

typedef struct figure {
    char name[48];
    double a, b;
    int latency; /* 1: within 2x or 20 us; 0: within 25%; 2: within 25% or 0.1 apart */
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

/* The figures the goal names, in the units of their names; fit_only: only those
 * ldt_cost_model_fit sets (not the compute figures, which calibration measures apart). */
static int figures(const ldt_cost_model *a, const ldt_cost_model *b, int fit_only, figure *f) {
    int n = 0;
    char nm[48];
    for (int d = 0; d < a->nlinks && d < b->nlinks; d++) {
        snprintf(nm, sizeof nm, "link%d_bandwidth_gbps", d);
        add(f, &n, nm, a->links[d].bandwidth_Bps / 1e9, b->links[d].bandwidth_Bps / 1e9, 0);
        snprintf(nm, sizeof nm, "link%d_latency_us", d);
        add(f, &n, nm, a->links[d].latency_s * 1e6, b->links[d].latency_s * 1e6, 1);
    }
    add(f, &n, "local_bandwidth_gbps", a->local_bandwidth_Bps / 1e9, b->local_bandwidth_Bps / 1e9, 0);
    if (!fit_only) {
        add(f, &n, "peak_f32_gflops", a->peak_flops[LDT_PREC_F32] / 1e9, b->peak_flops[LDT_PREC_F32] / 1e9, 0);
        add(f, &n, "memory_bandwidth_gbps", a->memory_bandwidth_Bps / 1e9, b->memory_bandwidth_Bps / 1e9, 0);
    }
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
    if (!fit_only) add(f, &n, "rendezvous_share", a->rendezvous_share, b->rendezvous_share, 2);
    add(f, &n, "overhead_us", a->overhead_s * 1e6, b->overhead_s * 1e6, 1);
    add(f, &n, "local_overhead_us", a->local_overhead_s * 1e6, b->local_overhead_s * 1e6, 1);
    if (!fit_only) {
        add(f, &n, "launch_us", a->launch_s * 1e6, b->launch_s * 1e6, 1);
        add(f, &n, "rendezvous_us", a->rendezvous_s * 1e6, b->rendezvous_s * 1e6, 1);
    }
    return n;
}

/* Each figure of a and b as one result `ratio` (params figure, first, second, within_goal,
 * and `sizes` when not NULL: a refit, whose figures are the fit's only), then worst_ratio_bandwidth and worst_ratio_latency; *worst_bw
 * and *lat_ok get the two verdicts, *bw_name and *lat_name the figures they name. */
static void report(bench_results *out, const ldt_cost_model *a, const ldt_cost_model *b, const char *sizes,
                   double *worst_bw_out, const char **bw_name, int *lat_ok_out, const char **lat_name) {
    figure f[MAX_FIGURES];
    double worst_bw = 1, worst_lat = 1;
    const char *worst_bw_name = "", *worst_lat_name = "";
    int n, idx, lat_ok = 1;
    n = figures(a, b, sizes != NULL, f);
    for (int i = 0; i < n; i++) {
        double q = ratio(f[i].a, f[i].b);
        char v[32];
        int ok = f[i].latency == 1   ? (q <= 2 || fabs(f[i].a - f[i].b) <= 20)
                 : f[i].latency == 2 ? (q <= 1.25 || fabs(f[i].a - f[i].b) <= 0.1)
                                     : q <= 1.25;
        idx = bench_add(out, "ratio", isfinite(q) ? q : 1e300, "ratio");
        bench_param_str(out, idx, "figure", f[i].name);
        snprintf(v, sizeof v, "%.4g", f[i].a);
        bench_param_str(out, idx, "first", v);
        snprintf(v, sizeof v, "%.4g", f[i].b);
        bench_param_str(out, idx, "second", v);
        bench_param_int(out, idx, "within_goal", ok);
        if (sizes) bench_param_str(out, idx, "sizes", sizes);
        bench_note("%s%s%-28s %12.4g %12.4g  %6.2fx%s", sizes ? sizes : "", sizes ? ": " : "", f[i].name, f[i].a,
                   f[i].b, q, ok ? "" : "  (outside the goal)");
        if (f[i].latency == 1) {
            lat_ok &= ok;
            if (!ok && q > worst_lat) {
                worst_lat = q;
                worst_lat_name = f[i].name;
            }
        } else if (strcmp(f[i].name, "cache_knee_kib") != 0 && (f[i].latency == 0 || !ok) && q > worst_bw) {
            worst_bw = q;
            worst_bw_name = f[i].name;
        }
    }
    idx = bench_add(out, "worst_ratio_bandwidth", isfinite(worst_bw) ? worst_bw : 1e300, "ratio");
    bench_param_str(out, idx, "figure", worst_bw_name);
    if (sizes) bench_param_str(out, idx, "sizes", sizes);
    idx = bench_add(out, "worst_ratio_latency", isfinite(worst_lat) ? worst_lat : 1e300, "ratio");
    bench_param_str(out, idx, "figure", worst_lat_name);
    bench_param_int(out, idx, "within_goal", lat_ok);
    if (sizes) bench_param_str(out, idx, "sizes", sizes);
    *worst_bw_out = worst_bw;
    *bw_name = worst_bw_name;
    *lat_ok_out = lat_ok;
    *lat_name = worst_lat_name;
}

int bench_calibrate_repro(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh = NULL;
    ldt_cost_model cm[2];
    ldt_calibrate_options copt = {o->quick, 0, 0, NULL, 0};
    double worst_bw = 1;
    const char *bw_name = "", *lat_name = "";
    int idx, lat_ok = 1;
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
    report(out, &cm[0], &cm[1], NULL, &worst_bw, &bw_name, &lat_ok, &lat_name);
    bench_goal(out, worst_bw <= 1.25, "bandwidths, FLOP/s and factors within 25%%: worst %.2fx (%s)", worst_bw,
               bw_name);
    bench_goal(out, lat_ok, "latencies within 2x or 20 us%s%s", lat_ok ? "" : ": worst outside, ", lat_name);
    return 0;
}

/* ---- ldt-bench calibrate_refit FILE1 FILE2 ---------------------------------------------- */

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
static int load_calibration(const char *path, ldt_cost_model *m, ldt_cost_sample **s, int *n) {
    char *text = slurp(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL, *arr, *e;
    int ok = 0, k = 0;
    *s = NULL;
    *n = 0;
    if (!root || ldt_cost_model_parse(text, m) != LDT_OK) goto done;
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
    int n[2] = {0, 0}, rc = 1;
    if (o->nfiles != 2) {
        /* `ldt-bench all` runs it without files: nothing to refit */
        bench_note("calibrate_refit: give two `ldt calibrate --json` outputs (ldt-bench calibrate_refit A B)");
        return o->nfiles == 0 ? 0 : 1;
    }
    for (int f = 0; f < 2; f++)
        if (!load_calibration(o->files[f], &base[f], &s[f], &n[f]) || !(t[f] = malloc((size_t)n[f] * sizeof *t[f]))) {
            bench_note("calibrate_refit: %s: not a readable `ldt calibrate --json` output with a \"fit\" sample "
                       "list%s%s",
                       o->files[f], *ldt_last_error() ? ": " : "", ldt_last_error());
            goto done;
        }
    for (int v = 0; v < 2; v++) {
        const char *sizes = v == 0 ? "all" : "calibrate";
        double worst_bw, rms;
        const char *bw_name, *lat_name;
        int lat_ok, m[2];
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
        report(out, &cm[0], &cm[1], sizes, &worst_bw, &bw_name, &lat_ok, &lat_name);
        bench_note("%s sizes: worst %.2fx (%s), latencies %s%s", sizes, worst_bw, bw_name,
                   lat_ok ? "within the goal" : "outside: ", lat_name);
    }
    rc = 0;
done:
    for (int f = 0; f < 2; f++) {
        free(s[f]);
        free(t[f]);
    }
    return rc;
}
