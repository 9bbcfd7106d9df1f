/* redistribute benchmark: a sweep of placement pairs and sizes on a 2x2 threaded mesh, each
 * plan's modeled time beside its measured time, under the default "uniform" model and under
 * a model calibrated on this machine in the same run. Results: spearman (rank correlation of
 * modeled and measured) and worst_ratio (largest of modeled/measured and its inverse), each
 * with param calibrated=true|false. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ldt/ldt.h"

#define MAX_POINTS 128

static const char *const k_pairs[][2] = {
    {"S0,R", "R,R"},   {"R,R", "S0,S1"},   {"S0,S1", "R,R"},   {"P,R", "R,R"},
    {"P,P", "R,R"},    {"P,R", "S0,R"},    {"S0,R", "S1,R"},   {"S0,S0", "R,R"},
    {"S0,S1", "S1,S0"}, {"R,S0", "S0,R"},  {"P,S0", "R,R"},    {"IS0:2,R", "R,S1"},
};

typedef struct point {
    double modeled, measured;
} point;

/* Ranks with ties averaged, for Spearman's rho (Pearson on ranks). */
static void ranks_of(const double *v, int n, double *rank) {
    for (int i = 0; i < n; i++) {
        int less = 0, equal = 0;
        for (int j = 0; j < n; j++) {
            less += v[j] < v[i];
            equal += v[j] == v[i];
        }
        rank[i] = less + (equal + 1) / 2.0;
    }
}

static double spearman(const point *p, int n) {
    double a[MAX_POINTS] = {0}, b[MAX_POINTS] = {0}, ra[MAX_POINTS], rb[MAX_POINTS];
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        a[i] = p[i].modeled;
        b[i] = p[i].measured;
    }
    ranks_of(a, n, ra);
    ranks_of(b, n, rb);
    for (int i = 0; i < n; i++) {
        ma += ra[i] / n;
        mb += rb[i] / n;
    }
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

static double worst_ratio(const point *p, int n) {
    double w = 1;
    for (int i = 0; i < n; i++) {
        double r = p[i].modeled > p[i].measured ? p[i].modeled / p[i].measured
                                                : p[i].measured / p[i].modeled;
        if (r > w) w = r;
    }
    return w;
}

/* Plans every pair at every size under cm, measures each plan; returns the point count or
 * -1 on error. */
static int sweep(const ldt_mesh *mesh, const ldt_cost_model *cm, int quick, double base,
                 point *pts) {
    static const int64_t k_sides[] = {32, 128, 512, 1024};
    int nsides = quick ? 3 : 4, reps = quick ? 5 : 11, n = 0;
    for (int s = 0; s < nsides; s++)
        for (size_t k = 0; k < sizeof k_pairs / sizeof k_pairs[0]; k++) {
            ldt_shape shape = {2, {k_sides[s], k_sides[s]}};
            ldt_placement from[2], to[2];
            int nf, nt;
            ldt_spec src;
            ldt_redist_options opt = {cm, 1, LDT_REDIST_DIJKSTRA};
            ldt_redist_plan *plan;
            double t;
            if (ldt_placements_parse(k_pairs[k][0], 2, from, 2, &nf) != LDT_OK ||
                ldt_placements_parse(k_pairs[k][1], 2, to, 2, &nt) != LDT_OK ||
                ldt_spec_init(&src, mesh, &shape, from, nf, LDT_F32) != LDT_OK ||
                ldt_redist_plan_create(&src, NULL, to, nt, &opt, &plan) != LDT_OK) {
                bench_note("redistribute: %s -> %s: %s", k_pairs[k][0], k_pairs[k][1],
                           ldt_last_error());
                return -1;
            }
            if (ldt_redistribute_measure(NULL, plan, reps, &t, NULL) != LDT_OK) {
                bench_note("redistribute: running %s -> %s: %s", k_pairs[k][0], k_pairs[k][1],
                           ldt_last_error());
                ldt_redist_plan_destroy(plan);
                return -1;
            }
            pts[n].modeled = ldt_redist_plan_seconds(plan);
            bench_note("redistribute:   %-8s -> %-8s %5lldx%-5lld %d steps modeled %10.2f us "
                       "measured %10.2f us", k_pairs[k][0], k_pairs[k][1], (long long)k_sides[s],
                       (long long)k_sides[s], ldt_redist_plan_nsteps(plan), pts[n].modeled * 1e6,
                       (t - base) * 1e6);
            /* the harness (barriers around an empty plan) is not the plan's time */
            pts[n].measured = t - base > 1e-9 ? t - base : 1e-9;
            n++;
            ldt_redist_plan_destroy(plan);
        }
    return n;
}

static int report(bench_results *out, const point *p, int n, const char *calibrated) {
    int i = bench_add(out, "spearman", spearman(p, n), "rho");
    if (i < 0) return -1;
    bench_param_str(out, i, "calibrated", calibrated);
    bench_param_int(out, i, "points", n);
    i = bench_add(out, "worst_ratio", worst_ratio(p, n), "ratio");
    if (i < 0) return -1;
    bench_param_str(out, i, "calibrated", calibrated);
    bench_param_int(out, i, "points", n);
    return 0;
}

int bench_redistribute(const bench_opts *o, bench_results *out) {
    ldt_mesh *mesh;
    ldt_cost_model uniform, cal;
    ldt_calibrate_options copt = {o->quick, 0, 0, NULL, 0};
    point before[MAX_POINTS], after[MAX_POINTS];
    int nb, na, rc = 1;
    double base = 0;
    if (ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
    if (ldt_cost_model_preset("uniform", &uniform) != LDT_OK) goto done;
    {
        ldt_shape shape = {2, {8, 8}};
        ldt_placement rr[2] = {ldt_replicate(), ldt_replicate()};
        ldt_spec s;
        ldt_redist_plan *empty;
        if (ldt_spec_init(&s, mesh, &shape, rr, 2, LDT_F32) != LDT_OK ||
            ldt_redist_plan_create(&s, NULL, rr, 2, NULL, &empty) != LDT_OK)
            goto done;
        if (ldt_redistribute_measure(NULL, empty, o->quick ? 11 : 31, &base, NULL) != LDT_OK) {
            ldt_redist_plan_destroy(empty);
            goto done;
        }
        ldt_redist_plan_destroy(empty);
    }
    bench_note("redistribute: sweep under the uniform preset");
    if ((nb = sweep(mesh, &uniform, o->quick, base, before)) < 0) goto done;
    bench_note("redistribute: calibrating the 2x2 threaded mesh");
    if (ldt_calibrate(mesh, &copt, &cal) != LDT_OK) {
        bench_note("redistribute: calibration failed: %s", ldt_last_error());
        goto done;
    }
    bench_note("redistribute: sweep under the calibrated model (overhead %.2f us, links "
               "%.2f us %.2f GB/s, %.2f us %.2f GB/s)",
               cal.overhead_s * 1e6, cal.links[0].latency_s * 1e6, cal.links[0].bandwidth_Bps / 1e9,
               cal.links[1].latency_s * 1e6, cal.links[1].bandwidth_Bps / 1e9);
    if ((na = sweep(mesh, &cal, o->quick, base, after)) < 0) goto done;
    if (report(out, before, nb, "false") != 0 || report(out, after, na, "true") != 0) goto done;
    rc = 0;
done:
    ldt_mesh_destroy(mesh);
    return rc;
}
