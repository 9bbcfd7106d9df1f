/* Fitting the alpha-beta model to measured timings: weighted least squares on relative error
 * (timings span four decades, so absolute error would let the largest sizes decide the
 * latencies), iteratively reweighted to shrug off outliers (a preempted thread, a page fault
 * storm), with the parameters kept non-negative by dropping a negative one and solving again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ldt/planner.h"
#include "planner/cost_fit.h"

#define NK LDT_KIND_COUNT /* the kinds the samples can be: all_reduce, reduce_scatter, all_gather,
                            all_to_all, send_recv, broadcast (ldt_coll_kind) */
#define NK_LINK 4 /* the planner kinds, whose rates a link's bandwidth is the mean of (not send_recv, broadcast) */
#define NK_OWN 3 /* the kinds with a call cost of their own in the fit (own_call) */
#define MAXP (1 + LDT_MAX_DIMS + 2 * NK * LDT_MAX_DIMS + NK_OWN)

static int is_local(ldt_collective c) {
    return c == LDT_COLL_LOCAL_CHUNK || c == LDT_COLL_LOCAL_PARTIAL || c == LDT_COLL_LOCAL_PAD;
}

static int sample_local(const ldt_cost_sample *c) { return !c->broadcast && is_local(c->collective); }

/* A collective sample's kind (ldt_coll_kind) and hops: send_recv's group is its peers, one
 * message (one latency) to each, as ldt_cost_seconds prices it; a broadcast's hops are its
 * algorithm's over the group, as ldt_cost_kind_seconds prices it. */
static int kind_of(const ldt_cost_sample *c) {
    if (c->broadcast) return LDT_KIND_BROADCAST;
    return c->collective == LDT_COLL_SEND_RECV ? LDT_KIND_SEND_RECV : (int)c->collective;
}

static double sample_hops(const ldt_cost_model *m, const ldt_cost_sample *c) {
    if (c->broadcast) return ldt__kind_hops(m, LDT_KIND_BROADCAST, c->group);
    return c->collective == LDT_COLL_SEND_RECV ? (double)c->group : ldt__coll_hops(m, c->collective, c->group);
}

/* Solves the np x np system a x = b in place by Gaussian elimination with partial pivoting;
 * 0 when it is singular. */
static int solve(int np, double a[MAXP][MAXP], double *b, double *x) {
    for (int c = 0; c < np; c++) {
        int piv = c;
        for (int r = c + 1; r < np; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        if (!(fabs(a[piv][c]) > 1e-300)) return 0;
        if (piv != c) {
            double t;
            for (int k = 0; k < np; k++) {
                t = a[c][k];
                a[c][k] = a[piv][k];
                a[piv][k] = t;
            }
            t = b[c];
            b[c] = b[piv];
            b[piv] = t;
        }
        for (int r = c + 1; r < np; r++) {
            double f = a[r][c] / a[c][c];
            for (int k = c; k < np; k++) a[r][k] -= f * a[c][k];
            b[r] -= f * b[c];
        }
    }
    for (int c = np - 1; c >= 0; c--) {
        double v = b[c];
        for (int k = c + 1; k < np; k++) v -= a[c][k] * x[k];
        x[c] = v / a[c][c];
    }
    return 1;
}

/* One problem: rows of np columns (the design), targets t, per-row weights w. Fills x with the
 * weighted least-squares solution over the columns in `use` (others 0), non-negative where
 * use[j] is 1 and of either sign where it is 2 (USE_FREE); returns 0 when no column is left.
 * Columns are scaled to unit norm first (bytes are ~1e7, hops ~1). */
#define USE_FREE 2

static int nnls_solve(int nrow, int np, const double *A, const double *t, const double *w,
                      const int *use0, double *x) {
    int use[MAXP];
    memcpy(use, use0, (size_t)np * sizeof *use);
    for (int pass = 0; pass <= np; pass++) {
        double N[MAXP][MAXP], r[MAXP], y[MAXP], scale[MAXP];
        int idx[MAXP], k = 0, worst = -1;
        for (int j = 0; j < np; j++) {
            x[j] = 0;
            if (!use[j]) continue;
            scale[j] = 0;
            for (int i = 0; i < nrow; i++) scale[j] += w[i] * A[i * np + j] * A[i * np + j];
            if (!(scale[j] > 0)) {
                use[j] = 0; /* nothing constrains it */
                continue;
            }
            scale[j] = 1 / sqrt(scale[j]);
            idx[k++] = j;
        }
        if (k == 0) return 0;
        for (int a = 0; a < k; a++) {
            r[a] = 0;
            for (int i = 0; i < nrow; i++) r[a] += w[i] * A[i * np + idx[a]] * scale[idx[a]] * t[i];
            for (int b = 0; b < k; b++) {
                double v = 0;
                for (int i = 0; i < nrow; i++)
                    v += w[i] * A[i * np + idx[a]] * A[i * np + idx[b]];
                N[a][b] = v * scale[idx[a]] * scale[idx[b]];
            }
        }
        if (!solve(k, N, r, y)) {
            /* degenerate (two columns alike): drop the last one and try again */
            use[idx[k - 1]] = 0;
            continue;
        }
        for (int a = 0; a < k; a++) {
            x[idx[a]] = y[a] * scale[idx[a]];
            if (x[idx[a]] < 0 && use[idx[a]] != USE_FREE && (worst < 0 || y[a] < y[worst])) worst = a;
        }
        if (worst < 0) return 1;
        use[idx[worst]] = 0;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Robust fit of one problem: relative least squares, then Huber and bisquare reweighting on
 * the relative residuals' MAD scale. The model of row i is off[i] + A x (off NULL: 0), its
 * residual relative to t[i] (or TIME_FLOOR, above). rw gets each row's final robust weight, x the solution. */
/* A timing's noise is relative, but never below about a microsecond (the clock's and the
 * scheduler's: a local copy of 1 KiB timed 0.085 to 1.8 us in four calibrations of one idle
 * host): each row's error is taken relative to its time or TIME_FLOOR, whichever is larger,
 * so sub-microsecond rows do not decide the slopes. */
#define TIME_FLOOR 1e-6
static double noise_scale(double t) { return t > TIME_FLOOR ? t : TIME_FLOOR; }

/* A relative residual's term in the bounded loss the knee rules compare: min(e^2, 1). */
static double bounded_sq(double e) { return e * e < 1 ? e * e : 1; }

static int robust_fit(int nrow, int np, const double *A, const double *t, const double *off,
                      const int *use, double *x, double *rw) {
    double *w = malloc((size_t)nrow * sizeof *w), *e = malloc((size_t)nrow * sizeof *e),
           *ae = malloc((size_t)nrow * sizeof *ae), *y = malloc((size_t)nrow * sizeof *y);
    int ok = 0;
    if (!w || !e || !ae || !y) goto done;
    for (int i = 0; i < nrow; i++) {
        rw[i] = 1;
        y[i] = t[i] - (off ? off[i] : 0);
    }
    for (int it = 0; it < 40; it++) {
        double s, change = 0;
        for (int i = 0; i < nrow; i++) w[i] = rw[i] / (noise_scale(t[i]) * noise_scale(t[i]));
        if (!(ok = nnls_solve(nrow, np, A, y, w, use, x))) goto done;
        for (int i = 0; i < nrow; i++) {
            double m = 0;
            for (int j = 0; j < np; j++) m += A[i * np + j] * x[j];
            e[i] = (y[i] - m) / noise_scale(t[i]);
            ae[i] = fabs(e[i]);
        }
        qsort(ae, (size_t)nrow, sizeof *ae, cmp_double);
        s = 1.4826 * (nrow % 2 ? ae[nrow / 2] : 0.5 * (ae[nrow / 2 - 1] + ae[nrow / 2]));
        if (s < 1e-9) s = 1e-9; /* noiseless data: residuals at rounding level are all inliers */
        for (int i = 0; i < nrow; i++) {
            double nw, u;
            if (it < 6) { /* Huber first: convex, so it cannot lock onto a wrong fit */
                double k = 1.345 * s;
                nw = fabs(e[i]) <= k ? 1 : k / fabs(e[i]);
            } else {
                u = e[i] / (4.685 * s);
                nw = fabs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0;
            }
            if (fabs(nw - rw[i]) > change) change = fabs(nw - rw[i]);
            rw[i] = nw;
        }
        if (it >= 6 && change < 1e-9) break;
    }
    /* the weights the last solve used are the reported ones; x is that solve's */
    for (int i = 0; i < nrow; i++) w[i] = rw[i] / (noise_scale(t[i]) * noise_scale(t[i]));
    ok = nnls_solve(nrow, np, A, y, w, use, x);
done:
    free(w);
    free(e);
    free(ae);
    free(y);
    return ok;
}

/* The fit of one problem with a knee, in two stages, so the slopes below the knee do not
 * depend on which knee is chosen: first every column but the past-knee ones (vcol[j]) from
 * the rows at or below `split` bytes (rb: each row's bytes; split the smallest knee tried, so
 * every candidate fits the same rows), then the past-knee columns from every row with the
 * first stage's model as the offset. Falls back to one joint fit when the rows at or below
 * the split do not constrain every column the first stage needs (a column only large sizes
 * measured) or are too few. x and rw as robust_fit's (rw from the second stage); sign (may
 * be NULL) marks the columns of either sign (USE_FREE; past-knee columns never are). */
static int staged_fit(int nrow, int np, const double *A, const double *t, const double *rb,
                      double split, const int *vcol, const int *sign, double *x, double *rw) {
    int use[MAXP], use2[MAXP], ns = 0, need = 0, ok = 0;
    double x2[MAXP], *As = malloc((size_t)(nrow ? nrow : 1) * np * sizeof *As),
                     *ts = malloc((size_t)(nrow ? nrow : 1) * sizeof *ts),
                     *off = calloc((size_t)(nrow ? nrow : 1), sizeof *off);
    for (int j = 0; j < np; j++) use[j] = 1;
    if (!As || !ts || !off) goto done;
    for (int i = 0; i < nrow; i++)
        if (rb[i] <= split) {
            memcpy(&As[ns * np], &A[i * np], (size_t)np * sizeof *As);
            ts[ns++] = t[i];
        }
    for (int j = 0; j < np; j++) {
        int all = 0, small = 0;
        use2[j] = vcol[j];
        if (vcol[j]) continue;
        for (int i = 0; i < nrow; i++) all |= A[i * np + j] != 0;
        for (int i = 0; i < ns; i++) small |= As[i * np + j] != 0;
        if (all && !small) ns = 0; /* this column needs large sizes: fit jointly */
        use[j] = all ? (sign && sign[j] == USE_FREE ? USE_FREE : 1) : 0;
        need += all;
    }
    if (ns <= need) {
        for (int j = 0; j < np; j++) use[j] = sign && sign[j] == USE_FREE ? USE_FREE : 1;
        ok = robust_fit(nrow, np, A, t, NULL, use, x, rw);
        goto done;
    }
    for (int j = 0; j < np; j++)
        if (vcol[j]) use[j] = 0;
    if (!(ok = robust_fit(ns, np, As, ts, NULL, use, x, rw))) goto done;
    for (int i = 0; i < nrow; i++) {
        off[i] = 0;
        for (int j = 0; j < np; j++) off[i] += A[i * np + j] * x[j];
    }
    if (robust_fit(nrow, np, A, t, off, use2, x2, rw)) {
        for (int j = 0; j < np; j++)
            if (vcol[j]) x[j] = x2[j];
    } else { /* no row past the knee: nothing to add */
        for (int i = 0; i < nrow; i++) rw[i] = 1;
    }
done:
    free(As);
    free(ts);
    free(off);
    return ok;
}

/* The spread, in log, of the kinds' knee ratios the shrinkage below assumes (tau): a slope
 * below the knee whose standard error (in log) is tau keeps half its own say. */
#define KNEE_RATIO_SPREAD 0.15

/* A knee must cut the fit's bounded loss by 2% (to KNEE_FIRST of it) to replace no knee, and
 * a larger knee by a third (to KNEE_CUT of the smaller one's) to replace a smaller one.
 * On a 2-core machine the knees cut the loss of twelve calibrations by 20 to 35%, the best
 * knee 1 or 2 MiB but 512 KiB within 0 to 12% of it: a rule of a third for the first knee
 * (2026-11-26, session 15) took a knee in 2 of the 12 and none in the others, and every
 * price past 1 MiB moved with it (1.3 to 2.4x), while without a knee the largest sizes,
 * which reproduce best (the 48 to 96 MiB all_gather and all_reduce within 25% in every pair
 * of the 12), sat 1.3 to 1.9x above the line and the fit took them for outliers. With a
 * knee at a cut of a tenth (and of 2%: the same twelve knees), the prices of the planner's
 * collectives at every timed size were within 25% (or 20 us) in 65 and 64 of the 66 pairs
 * for all_gather and all_reduce (42 and 46
 * before), 50 and 51 for all_to_all and reduce_scatter (45 and 37 before). A tenth still
 * left one calibration in a later pair without a knee (every price past 1 MiB 1.3 to 2.3x
 * off its twin's): a knee where none is costs nothing (its past-knee factors fit about 1),
 * a knee missed where one is misprices every large transfer, so the first knee's bar is
 * low. Noiseless timings without a knee lose nothing to one; with one (the tests': factors
 * 1.5 to 5 past 1 MiB) lose nearly all of the loss. */
#define KNEE_FIRST 0.98
#define KNEE_CUT (2.0 / 3.0)
/* and lower the loss by more than this (a relative residual of a tenth of a percent): among
 * noiseless timings, which every candidate fits to rounding, no knee is taken */
#define KNEE_MIN_GAIN 1e-6
/* the local ops keep their knee's term only when it cuts their own loss (over the sizes
 * from 256 KiB, fit_local) by a third: with a bar of a half, three of 23 calibrations of a
 * 2-core machine kept the line although their copies ran 10 to 14 GB/s up to 2 MiB a rank
 * and 4.5 to 5 past 4 MiB (the other 20 took 2 MiB, as all 23 do now) */
#define LOCAL_KNEE_CUT (2.0 / 3.0)
/* ... and by a mean of (5%)^2 a scored timing: timings on one line with a few percent of
 * noise would otherwise cut their small loss with a knee that fits the noise */
#define LOCAL_KNEE_MIN_GAIN 0.0025

/* The slopes below the knee, shrunk where the timings leave them loose (empirical Bayes over
 * the kinds' knee ratios), so that the factors reproduce. A kind whose timings below the knee
 * are mostly the overhead (on rank threads the in-place all_reduce, the broadcast) has a
 * slope u there that moved 1.5 to 2x between two calibrations, while its slope well past the
 * knee came back within a few percent; the link's bandwidth was then its fastest kind's 1 / u and
 * every factor is a ratio of u's (bytes factors) or (u + v) / u (knee factors), so one loose
 * u moved them all. For each cell (dim, kind) with three or more rows at or below `split`
 * and two or more past 2 C: w its slope past 2 C (plain least squares over those rows: the
 * largest sizes decide it), r = w / u its knee ratio, s^2 the variance of log u as for a
 * line through its rows below the split (relative least squares), with the noise's variance
 * the larger of the cell's own residuals' and all cells' pooled (so a cell whose few rows
 * happen to line up is not taken as pinned down). The log ratios are pooled, log r_bar their
 * mean weighted by 1 / (s^2 + tau^2) (a random-effects mean: no one cell decides it), and
 * each cell's log u becomes log u + lambda (log (w / r_bar) - log u), lambda = s^2 / (s^2 +
 * tau^2): a slope the timings pin down (s of a few percent) keeps its value, a loose one
 * takes its large-size slope over the pooled ratio. Noiseless timings have s = 0: nothing
 * moves. When something moved, the past-knee slopes v are fitted again (relative least
 * squares, robust, as the second stage) with the new u's held, from the rows at or below C
 * and past 2 C: the rows just past the knee are where a kind's timings moved most between
 * two calibrations (a broadcast of 1 MiB took 104 and 55 us), and a sharp knee prices that
 * transition worst anyway. x holds the staged fit's solution and gets the new u's and v's
 * (the samples' robust weights stay the staged fit's). */
static void shrink_slopes(int nrow, int np, const double *A, const double *t, const double *rb, double split,
                          double C, const int *vcol, double *x) {
    const double tau2 = KNEE_RATIO_SPREAD * KNEE_RATIO_SPREAD;
    double lr[MAXP], se2[MAXP], own[MAXP], wb[MAXP], x2[MAXP], num = 0, den = 0, *off;
    int ok[MAXP], moved = 0;
    double ees = 0, dof = 0, sig2;
    for (int j = 0; j < np; j++) {
        double s0 = 0, s1 = 0, s2 = 0, ee = 0, det, n0 = 0, b1 = 0, b2 = 0, t1 = 0, bt = 0;
        int nk = 0;
        ok[j] = 0;
        if (j + 1 >= np || vcol[j] || !vcol[j + 1]) continue; /* a u column, its v next */
        for (int i = 0; i < nrow; i++) {
            double b = A[i * np + j], m = 0, e, om;
            if (b == 0) continue;
            if (rb[i] > 2 * C) {
                n0 += 1;
                b1 += b;
                b2 += b * b;
                t1 += t[i];
                bt += b * t[i];
            }
            if (rb[i] > split) continue;
            for (int c = 0; c < np; c++)
                if (!vcol[c]) m += A[i * np + c] * x[c];
            e = (t[i] - m) / t[i];
            om = 1 / (t[i] * t[i]);
            ee += e * e;
            s0 += om;
            s1 += om * b;
            s2 += om * b * b;
            nk++;
        }
        det = s0 * s2 - s1 * s1;
        if (nk < 3 || !(det > 0)) continue;
        ees += ee;
        dof += nk - 2;
        if (n0 < 2 || !(n0 * b2 - b1 * b1 > 0)) continue;
        wb[j] = (n0 * bt - b1 * t1) / (n0 * b2 - b1 * b1);
        if (!(wb[j] > 0)) continue;
        ok[j] = 1;
        se2[j] = s0 / det; /* times the noise's variance, below */
        own[j] = ee / (nk - 2);
    }
    if (!(dof > 0)) return;
    sig2 = ees / dof;
    for (int j = 0; j < np; j++) {
        if (!ok[j]) continue;
        if (!(x[j] > 0)) { /* no slope below the knee at all: all from the pooled ratio */
            se2[j] = INFINITY;
            continue;
        }
        se2[j] *= (own[j] > sig2 ? own[j] : sig2) / (x[j] * x[j]);
        lr[j] = log(wb[j] / x[j]);
        num += lr[j] / (se2[j] + tau2);
        den += 1 / (se2[j] + tau2);
    }
    if (!(den > 0)) return;
    for (int j = 0; j < np; j++) {
        double lu, lam;
        if (!ok[j]) continue;
        lam = isinf(se2[j]) ? 1 : se2[j] / (se2[j] + tau2);
        lu = log(wb[j]) - num / den;
        if (lam < 1) lu = (1 - lam) * log(x[j]) + lam * lu;
        if (fabs(exp(lu) - x[j]) > 1e-12 * x[j]) moved = 1;
        x[j] = exp(lu);
    }
    if (!moved || !(off = malloc((size_t)nrow * sizeof *off))) return;
    for (int i = 0; i < nrow; i++) {
        off[i] = 0;
        for (int c = 0; c < np; c++)
            if (!vcol[c]) off[i] += A[i * np + c] * x[c];
    }
    {
        /* the rows just past the knee, (C, 2C], left out: see above */
        double *A2 = malloc((size_t)nrow * np * sizeof *A2), *t2 = malloc((size_t)nrow * sizeof *t2),
               *o2 = malloc((size_t)nrow * sizeof *o2), *w2 = malloc((size_t)nrow * sizeof *w2);
        int k = 0;
        for (int i = 0; A2 && t2 && o2 && w2 && i < nrow; i++) {
            if (rb[i] > C && rb[i] <= 2 * C) continue;
            memcpy(&A2[k * np], &A[i * np], (size_t)np * sizeof *A2);
            t2[k] = t[i];
            o2[k++] = off[i];
        }
        if (k > 0 && robust_fit(k, np, A2, t2, o2, vcol, x2, w2))
            for (int j = 0; j < np; j++)
                if (vcol[j]) x[j] = x2[j];
        free(A2);
        free(t2);
        free(o2);
        free(w2);
    }
    free(off);
}

/* The model's seconds for one sample, by the formula pricing uses. */
static double sample_seconds(const ldt_cost_model *m, const ldt_cost_sample *c) {
    if (sample_local(c))
        return ldt__local_seconds(m, c->collective, (double)c->bytes);
    return m->overhead_s + m->kind_overhead_s[kind_of(c)] + sample_hops(m, c) * m->links[c->dim].latency_s +
           ldt__eff_bytes(m, kind_of(c), (double)c->bytes) / m->links[c->dim].bandwidth_Bps;
}

/* The local knees tried (bytes a rank writes): on rank threads sharing a 2-core machine's
 * 32 MiB cache the copies ran 5 to 7 GB/s (chunks) and 10 to 18 (pads) up to 2 MiB a rank and
 * about half that from 4 MiB (2026-11-27), far past the collectives' knee (512 KiB to 1 MiB). */
static const double k_local_knees[] = {524288, 1048576, 2097152, 4194304, 8388608};

enum { NL = 2 + LDT_LOCAL_OP_COUNT }; /* the local fit's columns */

/* The bounded loss of the local fit x over its rows of rb[i] bytes from half the smallest
 * knee up (where the knees differ: the small copies' bimodal runs, 3 or 15 us, weigh the same
 * on every candidate and swamped the difference: a calibration whose copies ran 10 GB/s to
 * 2 MiB and 4.5 past 4 MiB kept the line); *nscored (may be NULL) gets their count. */
static double local_loss(int r, const double *A, const double *t, const double *rb, const double *x,
                         int *nscored) {
    double loss = 0;
    int ns = 0;
    for (int i = 0; i < r; i++) {
        double mo = 0;
        if (rb[i] < 0.5 * k_local_knees[0]) continue;
        for (int j = 0; j < NL; j++) mo += A[i * NL + j] * x[j];
        loss += bounded_sq((t[i] - mo) / noise_scale(t[i]));
        ns++;
    }
    if (nscored) *nscored = ns;
    return loss;
}

/* The local ops' fit into *m (each local sample's robust weight set): columns overhead, per
 * op the seconds per byte (u_i), and per byte past the local knee Cl (v), the knee the
 * candidate (k_local_knees, with two sizes past it and three below) of least bounded loss, a
 * larger one replacing a smaller only when it cuts the loss by a third, and taken only when
 * it cuts the line's by a third (LOCAL_KNEE_CUT) and by at least LOCAL_KNEE_MIN_GAIN a timing
 * scored (the loss is over the sizes from half the smallest knee), else none; then the local
 * bandwidth is 1 / the geometric mean of the ops' u_i, each op's factor its u_i against it,
 * and beyond_cache[local] = v times the bandwidth. A chunk copies what a pad or partial mostly
 * zero-fills: one slope for all three left the chunks 1.3 to 2.2x above their price and the
 * pads 0.5 to 1 below it in one calibration. The rows of ops with no timing leave their
 * factor at 1. */
static ldt_status fit_local(ldt_cost_sample *s, int n, double *A, double *t, double *rw, int *row_of,
                            double *rb, ldt_cost_model *m) {
    int r = 0, any_bytes = 0, use[NL], seen[NL] = {0}, best = -1;
    double x[NL], xk[NL], lline = 0, lbest = INFINITY, *rk = NULL;
    double ug = 0;
    int ng = 0, nscored = 0;
    memset(A, 0, (size_t)n * NL * sizeof *A);
    for (int i = 0; i < n; i++) {
        double b = (double)s[i].bytes;
        if (!sample_local(&s[i])) continue;
        A[r * NL + 0] = 1;
        A[r * NL + 1 + (s[i].collective - LDT_COLL_LOCAL_CHUNK)] = b;
        any_bytes |= s[i].bytes > 0;
        t[r] = s[i].seconds;
        rb[r] = b;
        row_of[r++] = i;
    }
    for (int j = 0; j < NL; j++) use[j] = j < NL - 1;
    /* One joint fit over every size: the copies of the small sizes run in about 3 or about
     * 15 us (their runs are bimodal), and a slope from those alone put the local bandwidth at
     * 6 and 19 GB/s in two calibrations. */
    if (!robust_fit(r, NL, A, t, NULL, use, x, rw))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: the local timings constrain nothing");
    lline = local_loss(r, A, t, rb, x, &nscored); /* x's knee column is 0 (unused) */
    if (!(rk = malloc((size_t)(r ? r : 1) * sizeof *rk)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cost fit: out of memory");
    use[NL - 1] = 1;
    for (size_t q = 0; q < sizeof k_local_knees / sizeof k_local_knees[0]; q++) {
        double Cl = k_local_knees[q], loss, xq[NL], past[4], below[4];
        int npast = 0, nbelow = 0;
        for (int i = 0; i < r; i++) { /* distinct sizes on each side of it */
            double b = rb[i];
            double *side = b > Cl ? past : below;
            int *ns = b > Cl ? &npast : &nbelow, dup = 0;
            for (int j = 0; j < *ns; j++) dup |= side[j] == b;
            if (!dup && *ns < 4) side[(*ns)++] = b;
            A[i * NL + NL - 1] = b > Cl ? b - Cl : 0;
        }
        if (npast < 2 || nbelow < 3) continue;
        if (!robust_fit(r, NL, A, t, NULL, use, xq, rk)) continue;
        /* a knee that leaves the bytes below it free (no op with a slope: bandwidth 1e15) is
         * not what the timings show (a 256 KiB copy takes longer than a 4 KiB one): its fit
         * put every byte past the knee; not a candidate */
        if (!(xq[1] > 1e-15 || xq[2] > 1e-15 || xq[3] > 1e-15)) continue;
        loss = local_loss(r, A, t, rb, xq, NULL);
        /* a larger knee replaces a smaller one only when it cuts the loss by a third
         * (KNEE_CUT, as the collectives' knees): the copies of 4 MiB a rank ran 420 to
         * 1130 us from one moment of a shared host to the next, and the least loss put the
         * knee at 2 MiB in one calibration and 4 MiB in the next, the price of 4 MiB 1.8 to
         * 2.1x apart */
        if (best < 0 || loss < KNEE_CUT * lbest) {
            lbest = loss;
            best = (int)q;
            memcpy(xk, xq, sizeof xk);
        }
    }
    if (best >= 0 && lbest < LOCAL_KNEE_CUT * lline && lline - lbest > LOCAL_KNEE_MIN_GAIN * nscored) {
        double Cl = k_local_knees[best];
        for (int i = 0; i < r; i++) /* the chosen knee's fit again, for its weights */
            A[i * NL + NL - 1] = rb[i] > Cl ? rb[i] - Cl : 0;
        if (robust_fit(r, NL, A, t, NULL, use, xk, rk)) {
            memcpy(x, xk, sizeof x);
            memcpy(rw, rk, (size_t)r * sizeof *rw);
            m->local_cache_bytes = Cl;
        } else {
            best = -1;
        }
    } else {
        best = -1;
    }
    free(rk);
    if (best < 0) { /* the line: no local knee (a local_cache_bytes of 0 would mean C's) */
        x[NL - 1] = 0;
        m->local_cache_bytes = 0;
    }
    for (int i = 0; i < r; i++)
        for (int j = 0; j < NL; j++) seen[j] |= A[i * NL + j] != 0;
    m->local_overhead_s = x[0];
    for (int o = 0; o < LDT_LOCAL_OP_COUNT; o++)
        if (seen[1 + o] && x[1 + o] > 0) {
            ug += log(x[1 + o]);
            ng++;
        }
    if (any_bytes) {
        ug = ng ? exp(ug / ng) : 0;
        m->local_bandwidth_Bps = ug > 0 ? 1 / ug : 1e15;
        for (int o = 0; o < LDT_LOCAL_OP_COUNT; o++) /* an op the timings put at no cost per
                                                        byte: a hundredth of the mean */
            m->local_bytes_extra[o] = seen[1 + o] && ug > 0 ? (x[1 + o] > 0.01 * ug ? x[1 + o] : 0.01 * ug) / ug - 1 : 0;
        m->beyond_cache[LDT_KIND_COUNT] = ug > 0 ? x[NL - 1] / ug : x[NL - 1] * 1e15;
    }
    for (int i = 0; i < r; i++) s[row_of[i]].weight = rw[i];
    return LDT_OK;
}

/* The kinds whose timings get an intercept of their own (their kind_overhead_s, that less the
 * overhead), not the overhead the others share: its column among the NK_OWN, or -1.
 * - send/recv: on rank threads its mailbox took 70 to 90 us a call where the others took 10
 *   to 20 (before its waits polled; 10 to 25 us since);
 * - broadcast: about 10 us where the others' line said 14 to 20;
 * - all_reduce: in place (no output to fill), its call 10 to 20 us where the others' 15 to
 *   23 (gauge_direction says how its call cost and the latencies are told apart). Under the
 *   shared overhead it cost one calibration of 2026-11-26 its knee: the overhead (20 us)
 *   sat above its three smallest timings (10.5, 14.9 and 20.7 us), the first stage of every
 *   knee's fit (4 sizes a kind below 512 KiB) clamped its slope at 0, which priced it 3 to 4x
 *   too high at every size, so no knee fitted better than none (a bounded loss of 0.18
 *   against 0.048), and without one the link's bandwidth was the slope over every size: 1.69
 *   GB/s where 23 other calibrations took a knee and gave 2.1 to 3.3. */
static int own_call(int k) {
    return k == LDT_KIND_ALL_REDUCE ? 0 : k == LDT_KIND_SEND_RECV ? 1 : k == LDT_KIND_BROADCAST ? 2 : -1;
}

/* all_reduce's hops are twice the others' on every link (2(n-1) and n-1 on a ring), so its
 * own call cost trades against the overhead and the latencies: moving the fit along z (the
 * overhead by -1, all_reduce's call cost by -2, each link's latency by 1/h, h the others'
 * hops on it, send/recv's and broadcast's call costs by minus their hops times that)
 * changes no timing's model. Fills z over the columns (0 past the intercepts and latencies:
 * column 0 the overhead, 1..L the latencies, ko.. the own call costs) and returns 1 when the
 * rows r allow it: every row on a link agrees on its h, and each own kind's rows on its shift
 * (a send/recv timed with 1 and with 3 peers pins the latency, and then the timings decide
 * the split: 0). */
static int gauge_direction(const double *A, int r, int np, int L, int ko, double *z) {
    int set[MAXP] = {0};
    for (int j = 0; j < np; j++) z[j] = 0;
    z[0] = -1;
    z[ko + own_call(LDT_KIND_ALL_REDUCE)] = -2;
    set[0] = set[ko + own_call(LDT_KIND_ALL_REDUCE)] = 1;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < r; i++) {
            const double *a = &A[i * np];
            int c = -1, d = -1;
            double want, has;
            for (int j = 0; j < np; j++)
                if (a[j] != 0 && (j == 0 || j >= ko)) c = j;
            for (int j = 1; j <= L; j++)
                if (a[j] != 0) d = j;
            if (c < 0) return 0;
            if (pass == 0) { /* the links' shifts, from the overhead's and all_reduce's rows */
                if (c != 0 && c != ko + own_call(LDT_KIND_ALL_REDUCE)) continue;
                if (d < 0) return 0; /* no hops: its model moves with the overhead */
                want = -z[c] / a[d];
                c = d;
            } else if (pass == 1) { /* the other own kinds' shifts, from their rows */
                if (c == 0 || c == ko + own_call(LDT_KIND_ALL_REDUCE)) continue;
                want = d < 0 ? 0 : -a[d] * z[d];
            } else { /* every row's model stays */
                has = z[c] + (d < 0 ? 0 : a[d] * z[d]);
                if (fabs(has) > 1e-9 * (fabs(z[c]) + (d < 0 ? 0 : fabs(a[d] * z[d])))) return 0;
                continue;
            }
            if (!set[c]) {
                z[c] = want;
                set[c] = 1;
            } else if (fabs(z[c] - want) > 1e-9 * fabs(want)) {
                return 0;
            }
        }
    return 1;
}

/* The fit with the cache knee at C bytes (0: none) into *m, each sample's robust weight set.
 * Collectives: columns overhead, latency per link, and per link and kind the seconds per byte
 * (u) and per byte past the knee (v), the loose u's shrunk (shrink_slopes) when `shrink` is
 * set and there is a knee; then per link its bandwidth is 1 / the geometric mean of its
 * planner kinds' u, and per kind bytes_extra = u beta - 1 and beyond_cache = v / u (geometric
 * and arithmetic means over the links that measured the kind). The local ops are fitted
 * apart (fit_local). */
static ldt_status fit_with_knee(ldt_cost_sample *s, int n, int ncoll, double C, double split,
                                int shrink, double *A, double *t, double *rw, int *row_of, double *rb,
                                ldt_cost_model *m) {
    int L = m->nlinks, np, use[MAXP], vcol[MAXP];
    double x[MAXP];
    m->cache_bytes = C;
    if (ncoll > 0) {
        int r = 0, ok, ko = 1 + L + 2 * NK * L; /* the own call costs' columns (own_call) */
        int ar = ko + own_call(LDT_KIND_ALL_REDUCE), gauge = 0, shared = 0, ars = 0, sign[MAXP];
        double z[MAXP];
        np = ko + NK_OWN;
        memset(A, 0, (size_t)n * MAXP * sizeof *A);
        for (int i = 0; i < n; i++) {
            int k = kind_of(&s[i]), cu = 1 + L + 2 * (s[i].dim * NK + k);
            double b = (double)s[i].bytes;
            if (sample_local(&s[i])) continue;
            if (own_call(k) >= 0) A[r * np + ko + own_call(k)] = 1;
            else A[r * np + 0] = 1;
            shared |= own_call(k) < 0;
            ars |= k == LDT_KIND_ALL_REDUCE;
            A[r * np + 1 + s[i].dim] = sample_hops(m, &s[i]);
            A[r * np + cu] = b;
            {
                double Ck = ldt__kind_knee(m, k); /* C, or a broadcast's local knee */
                A[r * np + cu + 1] = Ck > 0 && b > Ck ? b - Ck : 0;
            }
            t[r] = s[i].seconds;
            rb[r] = b;
            row_of[r++] = i;
        }
        for (int j = 0; j < np; j++) {
            use[j] = 1;
            vcol[j] = j > L && j < ko && (j - 1 - L) % 2 == 1;
        }
        /* all_reduce's own call cost where the timings pin it; else (gauge) the fit of the
         * shared overhead with latencies of either sign, then moved along z until no latency
         * is below 0: the least own call cost the timings allow (0 where every latency came
         * out >= 0: the shared overhead's fit), every timing's model unchanged. When that
         * leaves some call cost below 0, the shared overhead's fit with latencies >= 0. */
        if (shared && ars && (gauge = gauge_direction(A, r, np, L, ko, z))) {
            for (int i = 0; i < r; i++)
                if (A[i * np + ar] != 0) {
                    A[i * np + 0] = A[i * np + ar];
                    A[i * np + ar] = 0;
                }
        }
        for (int j = 0; j < np; j++) sign[j] = gauge && j >= 1 && j <= L ? USE_FREE : 1;
        for (int attempt = 0; attempt < 2; attempt++) { /* the second: latencies >= 0 */
            const int *sg = attempt ? NULL : sign;
            double a = 0, lowest = 0;
            for (int j = 0; j < np; j++) use[j] = sg && sg[j] == USE_FREE ? USE_FREE : 1;
            ok = C > 0 ? staged_fit(r, np, A, t, rb, split, vcol, sg, x, rw) : robust_fit(r, np, A, t, NULL, use, x, rw);
            if (!ok || !gauge) break;
            for (int d = 0; d < L; d++)
                if (z[1 + d] > 0 && -x[1 + d] / z[1 + d] > a) a = -x[1 + d] / z[1 + d];
            x[ar] = x[0] + a * z[ar];
            for (int j = 0; j < np; j++)
                if (j != ar && (j == 0 || (j >= 1 && j <= L) || j >= ko)) {
                    x[j] += a * z[j];
                    if (x[j] < lowest) lowest = x[j];
                }
            if (x[ar] < lowest) lowest = x[ar];
            if (lowest >= -1e-12 * (fabs(x[0]) + 1e-6)) {
                for (int j = 0; j < np; j++)
                    if (j == 0 || j == ar || (j >= 1 && j <= L) || j >= ko) x[j] = x[j] > 0 ? x[j] : 0;
                break;
            }
        }
        if (gauge) /* all_reduce's rows back on its own column, x[ar] its call cost */
            for (int i = 0; i < r; i++)
                if (A[i * np + 0] != 0 && kind_of(&s[row_of[i]]) == LDT_KIND_ALL_REDUCE) {
                    A[i * np + ar] = A[i * np + 0];
                    A[i * np + 0] = 0;
                }
        if (!ok)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: the collective timings constrain "
                     "nothing (every column is zero)");
        if (C > 0 && shrink) shrink_slopes(r, np, A, t, rb, split, C, vcol, x);
        {
            int seen[MAXP] = {0};
            double lx[NK] = {0}, yy[NK] = {0};
            int nx[NK] = {0};
            for (int i = 0; i < r; i++)
                for (int j = 0; j < np; j++) seen[j] |= A[i * np + j] != 0;
            if (seen[0]) m->overhead_s = x[0];
            for (int k = 0; k < NK; k++)
                if (own_call(k) >= 0 && seen[ko + own_call(k)])
                    m->kind_overhead_s[k] = x[ko + own_call(k)] - m->overhead_s;
            for (int d = 0; d < L; d++) {
                double umin = INFINITY, lg = 0;
                int any = 0, ng = 0;
                if (seen[1 + d]) m->links[d].latency_s = x[1 + d];
                /* the link's bandwidth is the geometric mean of its planner collectives'
                 * per-byte rates (below the knee), each kind's factor its own rate against
                 * it (some below 1); send_recv and broadcast only when the dim measured
                 * nothing else (then the fastest of them). The fastest kind alone was the
                 * reference before: one kind's slope (all_reduce's, in place and mostly its
                 * overhead below the knee) moved the bandwidth and every factor with it,
                 * 1.2 to 1.4x between calibrations whose other slopes agreed within 20%. */
                for (int pass = 0; pass < 2 && !any; pass++)
                    for (int k = pass ? NK_LINK : 0; k < (pass ? NK : NK_LINK); k++) {
                        int cu = 1 + L + 2 * (d * NK + k);
                        if (!seen[cu]) continue;
                        any = 1;
                        if (x[cu] > 0 && x[cu] < umin) umin = x[cu];
                        if (!pass && x[cu] > 0) {
                            lg += log(x[cu]);
                            ng++;
                        }
                    }
                if (!any) continue;
                if (ng) umin = exp(lg / ng);
                m->links[d].bandwidth_Bps = isfinite(umin) ? 1 / umin : 1e15;
                for (int k = 0; k < NK; k++) {
                    int cu = 1 + L + 2 * (d * NK + k);
                    if (!seen[cu]) continue;
                    if (x[cu] > 0 && isfinite(umin)) {
                        lx[k] += log(x[cu] / umin);
                        yy[k] += x[cu + 1] / x[cu];
                    } else {
                        yy[k] += x[cu + 1] * m->links[d].bandwidth_Bps;
                    }
                    nx[k]++;
                }
            }
            for (int k = 0; k < NK; k++) {
                if (!nx[k]) continue;
                m->bytes_extra[k] = exp(lx[k] / nx[k]) - 1;
                m->beyond_cache[k] = ldt__kind_knee(m, k) > 0 ? yy[k] / nx[k] : 0;
            }
        }
        for (int i = 0; i < r; i++) s[row_of[i]].weight = rw[i];
    }
    return LDT_OK;
}

/* Distinct byte counts among the collective (local 0) or local (local 1) samples; a group
 * without samples counts as enough (it has no knee to place). */
static int distinct_sizes(const ldt_cost_sample *s, int n, int local) {
    int d = 0, any = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        if (sample_local(&s[i]) != local) continue;
        any = 1;
        for (int j = 0; j < i && !seen; j++)
            seen = sample_local(&s[j]) == local && s[j].bytes == s[i].bytes;
        d += !seen;
    }
    return any ? d : 1 << 30;
}

ldt_status ldt_cost_model_fit(ldt_cost_sample *s, int n, ldt_cost_model *m, double *rms) {
    ldt_status st = LDT_OK;
    int L, ncoll = 0, nloc = 0;
    double *A = NULL, *t = NULL, *rw = NULL, *rb = NULL, sum = 0, wsum = 0;
    int *row_of = NULL;
    if (!m || (n > 0 && !s) || n < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: m must not be NULL, and s must hold n >= 0 "
                 "samples (got n = %d)", n);
    L = m->nlinks;
    if (L < 1 || L > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: the model has %d links, expected 1 to %d "
                 "(one per mesh dim)", L, LDT_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        const ldt_cost_sample *c = &s[i];
        if (c->broadcast != 0 && c->broadcast != 1)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: sample %d has broadcast %d, expected 0 "
                     "(the collective's kind) or 1 (a broadcast)", i, c->broadcast);
        if (!c->broadcast && ((int)c->collective < 0 || c->collective >= LDT_COLL_COUNT))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: sample %d has collective %d, expected "
                     "all_reduce, reduce_scatter, all_gather, all_to_all, send_recv or a local op", i,
                     (int)c->collective);
        if (!isfinite(c->seconds) || c->seconds <= 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: sample %d measured %g s, expected a "
                     "finite time > 0", i, c->seconds);
        if (c->bytes < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: sample %d moves %lld bytes, expected >= 0",
                     i, (long long)c->bytes);
        if (!sample_local(c) &&
            (c->dim < 0 || c->dim >= L ||
             c->group < (!c->broadcast && c->collective == LDT_COLL_SEND_RECV ? 1 : 2)))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost fit: sample %d (%s) is on mesh dim %d with a "
                     "group of %lld ranks, expected a dim in [0, %d) and a group of 2 or more "
                     "(send_recv: 1 or more peers)",
                     i, c->broadcast ? "broadcast" : ldt_collective_name(c->collective), c->dim,
                     (long long)c->group, L);
        if (sample_local(c)) nloc++;
        else ncoll++;
    }
    A = calloc((size_t)(n ? n : 1) * MAXP, sizeof *A);
    t = malloc((size_t)(n ? n : 1) * sizeof *t);
    rw = malloc((size_t)(n ? n : 1) * sizeof *rw);
    row_of = malloc((size_t)(n ? n : 1) * sizeof *row_of);
    rb = calloc((size_t)(n ? n : 1), sizeof *rb);
    if (!A || !t || !rw || !row_of || !rb) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "cost fit: out of memory");

    /* The cache knee is chosen from candidates by the fit itself: for each, the robust fits
     * below, scored by a bounded loss over every collective sample (mean of min(e^2, 1), e
     * the relative residual); a knee must cut the loss by 2% (KNEE_FIRST) to replace no knee,
     * and by a third (KNEE_CUT) to replace a smaller one. The local ops choose their own
     * (fit_local, once, before: the candidates' trial models start from its result). */
    if (nloc > 0) LDT_CHECK_GOTO(fit_local(s, n, A, t, rw, row_of, rb, m));
    {
        /* from 512 KiB: four or more of the calibration's sizes stay below the knee, so the
         * cache-resident slope is not decided by two points (a knee at 128 KiB moved the local
         * bandwidth 100x between two runs) */
        static const double knees[] = {0, 524288, 1048576, 2097152, 4194304};
        double best_loss = INFINITY;
        ldt_cost_model best = *m, trial;
        /* a knee needs sizes on both sides of it: only with five or more distinct sizes
         * among the collectives is one tried (a --quick calibration has 3) */
        size_t nq = distinct_sizes(s, n, 0) >= 5
                        ? sizeof knees / sizeof knees[0] : 1;
        for (size_t q = 0; q < nq; q++) {
            double loss = 0;
            trial = *m;
            LDT_CHECK_GOTO(fit_with_knee(s, n, ncoll, knees[q], knees[1], 0, A, t, rw, row_of, rb, &trial));
            for (int i = 0; i < n; i++) { /* the local ops choose their own knee (fit_local) */
                double e = (s[i].seconds - sample_seconds(&trial, &s[i])) / s[i].seconds;
                if (!sample_local(&s[i])) loss += bounded_sq(e);
            }
            loss /= ncoll > 0 ? ncoll : 1;
            if (q == 0 || (loss < (best.cache_bytes > 0 ? KNEE_CUT : KNEE_FIRST) * best_loss &&
                           best_loss - loss > KNEE_MIN_GAIN)) {
                best_loss = loss;
                best = trial;
            }
        }
        /* the chosen knee's fit once more, its loose slopes below the knee shrunk (the knees
         * are compared unshrunk: the shrinkage moves a slope the timings leave loose, not
         * which knee they show), with its robust weights */
        trial = *m;
        LDT_CHECK_GOTO(fit_with_knee(s, n, ncoll, best.cache_bytes, knees[1], 1, A, t, rw, row_of, rb, &trial));
        *m = trial;
    }
    /* the fitted model's own prices, with the formula pricing uses */
    for (int i = 0; i < n; i++) {
        ldt_cost_sample *c = &s[i];
        double e;
        c->modeled = sample_seconds(m, c);
        e = (c->seconds - c->modeled) / c->seconds;
        if (c->weight > 0) {
            sum += e * e;
            wsum += 1;
        }
    }
    if (rms) *rms = wsum > 0 ? sqrt(sum / wsum) : 0;
    st = ldt_cost_model_check(m);
fail:
    free(A);
    free(t);
    free(rw);
    free(row_of);
    free(rb);
    return st;
}

/* Least squares y ~ X[:, cols] by normal equations (at most 3 columns); 0 when singular. */
static int small_lsq(const double (*X)[3], const double *y, int n, const int *cols, int nc, double *x) {
    double a[MAXP][MAXP], b[MAXP], z[MAXP];
    for (int j = 0; j < nc; j++) {
        b[j] = 0;
        for (int k = 0; k < nc; k++) a[j][k] = 0;
        for (int i = 0; i < n; i++) {
            b[j] += X[i][cols[j]] * y[i];
            for (int k = 0; k < nc; k++) a[j][k] += X[i][cols[j]] * X[i][cols[k]];
        }
    }
    if (!solve(nc, a, b, z)) return 0;
    for (int j = 0; j < 3; j++) x[j] = 0;
    for (int j = 0; j < nc; j++) x[cols[j]] = z[j];
    return 1;
}

void ldt__fit_rendezvous(const double *calls, const double *gap, const double *measured,
                         const double *modeled, const double *scale, int n, int nranks, int cores,
                         double *per_call, double *share, double *fixed) {
    double (*X)[3], *y, x[3] = {0, 0, 0}, over;
    static const int all[3] = {0, 1, 2}, no_share[2] = {0, 1}, no_call[2] = {0, 2};
    *per_call = *share = 0;
    if (fixed) *fixed = 0;
    if (n < 3 || cores <= 0 || nranks <= cores) return;
    over = (double)nranks / cores - 1;
    X = malloc((size_t)n * sizeof *X);
    y = malloc((size_t)n * sizeof *y);
    if (!X || !y) {
        free(X);
        free(y);
        return;
    }
    for (int i = 0; i < n; i++) { /* each row over its noise scale: weighted least squares */
        double u = scale && scale[i] > 0 ? 1 / scale[i] : 1;
        X[i][0] = u;
        X[i][1] = calls[i] * over * u;
        X[i][2] = gap[i] * over * u;
        y[i] = (measured[i] - modeled[i]) * u;
    }
    if (!small_lsq((const double (*)[3])X, y, n, all, 3, x) || x[1] < 0 || x[2] < 0) {
        double p[3] = {0, 0, 0}, q[3] = {0, 0, 0};
        int okp = small_lsq((const double (*)[3])X, y, n, no_share, 2, p) && p[1] >= 0;
        int okq = small_lsq((const double (*)[3])X, y, n, no_call, 2, q) && q[2] >= 0;
        double rp = 0, rq = 0;
        for (int i = 0; i < n; i++) {
            double ep = y[i] - p[0] - p[1] * X[i][1], eq = y[i] - q[0] - q[2] * X[i][2];
            rp += ep * ep;
            rq += eq * eq;
        }
        if (okp && (!okq || rp <= rq)) memcpy(x, p, sizeof x);
        else if (okq) memcpy(x, q, sizeof x);
        else x[0] = x[1] = x[2] = 0;
    }
    free(X);
    free(y);
    *per_call = x[1] > 0 && isfinite(x[1]) ? x[1] : 0;
    *share = x[2] > 0 && isfinite(x[2]) ? x[2] : 0;
    if (fixed) *fixed = x[0];
}
