/* The cost model's prices and its calibration: the fit recovers known parameters from
 * synthetic timings (exactly without noise, robustly with an outlier and with noise), its
 * refusals; the search prices a move with the very plan lowering runs (one price). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/exec.h"
#include "ldt/planner.h"
#include "exec/calibrate_internal.h"
#include "planner/cost_fit.h"
#include "planner/plan_internal.h"
#include "tests/test_util.h"

/* Known constants: two links (a slow outer, a fast inner), an overhead, local terms. */
static ldt_cost_model truth(void) {
    ldt_cost_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "truth");
    m.nlinks = 2;
    m.links[0].latency_s = 7.5e-6;
    m.links[0].bandwidth_Bps = 3.2e9;
    m.links[1].latency_s = 1.25e-6;
    m.links[1].bandwidth_Bps = 11.0e9;
    m.overhead_s = 4.0e-6;
    m.local_overhead_s = 0.8e-6;
    m.local_bandwidth_Bps = 6.5e9;
    return m;
}

/* Timings the truth gives, by its formula written out here (not the library's): every
 * collective kind at 8 sizes on dim 0 (4 ranks) and dim 1 (2 ranks), and local ops. */
static int synth(ldt_cost_sample *s, const ldt_cost_model *m) {
    static const ldt_collective kinds[] = {LDT_COLL_ALL_REDUCE, LDT_COLL_REDUCE_SCATTER,
                                           LDT_COLL_ALL_GATHER, LDT_COLL_ALL_TO_ALL};
    const int64_t groups[2] = {4, 2};
    int n = 0;
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++)
            for (int z = 0; z < 8; z++) {
                int64_t bytes = (int64_t)3 << (12 + 2 * z); /* 12 KiB .. 192 MiB */
                double hops = (kinds[k] == LDT_COLL_ALL_REDUCE ? 2.0 : 1.0) * (double)(groups[d] - 1);
                memset(&s[n], 0, sizeof s[n]);
                s[n].collective = kinds[k];
                s[n].dim = d;
                s[n].group = groups[d];
                s[n].bytes = bytes;
                double past = m->cache_bytes > 0 && (double)bytes > m->cache_bytes
                                  ? (double)bytes - m->cache_bytes : 0;
                s[n].seconds = m->overhead_s + m->kind_overhead_s[k] + hops * m->links[d].latency_s +
                               (1 + m->bytes_extra[k]) * ((double)bytes + m->beyond_cache[k] * past) /
                                   m->links[d].bandwidth_Bps;
                n++;
            }
    for (int k = 0; k < 2; k++)
        for (int z = 0; z < 8; z++) {
            int64_t bytes = (int64_t)1 << (12 + 2 * z);
            memset(&s[n], 0, sizeof s[n]);
            s[n].collective = k ? LDT_COLL_LOCAL_PAD : LDT_COLL_LOCAL_CHUNK;
            s[n].group = 1;
            s[n].bytes = bytes;
            double past = m->cache_bytes > 0 && (double)bytes > m->cache_bytes
                              ? (double)bytes - m->cache_bytes : 0;
            s[n].seconds = m->local_overhead_s +
                           ((double)bytes + m->beyond_cache[LDT_KIND_COUNT] * past) / m->local_bandwidth_Bps;
            n++;
        }
    return n;
}

static void expect_close(double got, double want, double rel, const char *what) {
    cr_expect(fabs(got - want) <= rel * fabs(want), "%s: got %.9g, expected %.9g (within %g relative)",
              what, got, want, rel);
}

/* Model m in the fit's terms, its prices unchanged: each link's bandwidth 1 / the geometric
 * mean of the four planner kinds' seconds per byte on it, each kind's bytes factor against
 * that (what a noiseless fit gives back). */
static ldt_cost_model as_fitted(ldt_cost_model m) {
    double lg = 0, g;
    for (int k = 0; k < 4; k++) lg += log(1 + m.bytes_extra[k]);
    g = exp(lg / 4);
    for (int d = 0; d < m.nlinks; d++) m.links[d].bandwidth_Bps /= g;
    for (int k = 0; k < LDT_KIND_COUNT; k++) m.bytes_extra[k] = (1 + m.bytes_extra[k]) / g - 1;
    return m;
}

static void expect_recovers(const ldt_cost_model *fit, const ldt_cost_model *m, double rel) {
    for (int d = 0; d < 2; d++) {
        expect_close(fit->links[d].latency_s, m->links[d].latency_s, rel, "latency");
        expect_close(fit->links[d].bandwidth_Bps, m->links[d].bandwidth_Bps, rel, "bandwidth");
    }
    expect_close(fit->overhead_s, m->overhead_s, rel, "overhead");
    expect_close(fit->local_overhead_s, m->local_overhead_s, rel, "local overhead");
    expect_close(fit->local_bandwidth_Bps, m->local_bandwidth_Bps, rel, "local bandwidth");
}

/* A start far from the truth, so a fit that changed nothing fails. */
static ldt_cost_model start(void) {
    ldt_cost_model f;
    cr_assert_eq(ldt_cost_model_preset("nvlink-ib", &f), LDT_OK);
    return f;
}

Test(costfit, recovers_known_parameters_exactly) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    ldt_mesh *mesh;
    double rms = -1;
    int n = synth(s, &m);
    int64_t dims[2] = {4, 2};
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, &rms), LDT_OK, "%s", ldt_last_error());
    expect_recovers(&f, &m, 1e-6);
    cr_expect_lt(rms, 1e-9);
    /* the fitted prices are the library's pricing formula: ldt_cost_seconds agrees */
    cr_assert_eq(ldt_mesh_create(2, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < n; i++) {
        double want = ldt_cost_seconds(&f, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0);
        expect_close(s[i].modeled, want, 1e-12, "modeled vs ldt_cost_seconds");
        expect_close(s[i].modeled, s[i].seconds, 1e-6, "modeled vs measured");
        cr_expect_gt(s[i].weight, 0.99);
    }
    ldt_mesh_destroy(mesh);
}

/* Kinds that move bytes slower than the link's fastest kind, and a cache knee past which
 * every kind and the local ops slow down: the fit finds the knee among its candidates and
 * gives back each factor. */
Test(costfit, recovers_kind_factors_and_a_cache_knee) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start(), mf;
    int64_t dims[2] = {4, 2};
    ldt_mesh *mesh;
    double rms = -1;
    int n;
    m.bytes_extra[LDT_KIND_REDUCE_SCATTER] = 0.5;
    m.bytes_extra[LDT_KIND_ALL_GATHER] = 1.25;
    m.bytes_extra[LDT_KIND_ALL_TO_ALL] = 2.0;
    m.cache_bytes = 1048576;
    m.beyond_cache[LDT_KIND_ALL_REDUCE] = 1.5;
    m.beyond_cache[LDT_KIND_REDUCE_SCATTER] = 3.0;
    m.beyond_cache[LDT_KIND_ALL_GATHER] = 4.0;
    m.beyond_cache[LDT_KIND_ALL_TO_ALL] = 2.5;
    m.beyond_cache[LDT_KIND_COUNT] = 5.0;
    n = synth(s, &m);
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, &rms), LDT_OK, "%s", ldt_last_error());
    mf = as_fitted(m);
    expect_recovers(&f, &mf, 1e-6);
    cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g, expected %g", f.cache_bytes, m.cache_bytes);
    for (int k = 0; k < 4; k++) {
        expect_close(1 + f.bytes_extra[k], 1 + mf.bytes_extra[k], 1e-6, "bytes factor");
        expect_close(f.beyond_cache[k], m.beyond_cache[k], 1e-6, "beyond-cache factor");
    }
    expect_close(f.beyond_cache[LDT_KIND_COUNT], m.beyond_cache[LDT_KIND_COUNT], 1e-6, "local beyond-cache");
    cr_expect_lt(rms, 1e-9);
    /* and the library prices with them */
    cr_assert_eq(ldt_mesh_create(2, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < n; i++)
        expect_close(ldt_cost_seconds(&f, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0), s[i].seconds,
                     1e-6, "ldt_cost_seconds vs the truth");
    ldt_mesh_destroy(mesh);
}

/* An all_reduce whose call costs less than the others' (in place: 1.5 us where they take 4,
 * and its slope the fastest), with a knee at 1 MiB. Under one overhead for the four planner
 * kinds, the first stage of a knee's fit (the sizes below 512 KiB) clamped all_reduce's slope
 * at 0 on a calibration like this, and the fit took no knee. all_reduce's hops being twice
 * the others', its call cost trades against the latencies: with send/recv timed at 1 and 3
 * peers (which pins the outer link's latency) the fit gives back the truth; without, every
 * price is the truth's and the split is the least own call cost that keeps every latency >=
 * 0: moved by a = -1.25 us along the trade (overhead 4 - a, all_reduce's call cost -2.5 - a,
 * the latencies 7.5 + a / 3 and 1.25 + a us), the inner link's latency 0. */
Test(costfit, recovers_all_reduces_own_call_cost_and_the_knee) {
    for (int c = 0; c < 2; c++) {
        ldt_cost_sample s[112];
        ldt_cost_model m = truth(), f = start(), mf, want;
        int64_t dims[2] = {4, 2};
        ldt_mesh *mesh;
        int n;
        m.kind_overhead_s[LDT_KIND_ALL_REDUCE] = -2.5e-6;
        m.bytes_extra[LDT_KIND_ALL_REDUCE] = -0.6;
        m.bytes_extra[LDT_KIND_ALL_GATHER] = 0.25;
        m.bytes_extra[LDT_KIND_ALL_TO_ALL] = 1.0;
        m.cache_bytes = 1048576;
        for (int k = 0; k < 4; k++) m.beyond_cache[k] = 1.5 + 0.5 * k;
        n = synth(s, &m);
        for (int peers = 1; c == 0 && peers <= 3; peers += 2) /* send/recv, outer link */
            for (int z = 0; z < 8; z++) {
                int64_t bytes = (int64_t)5 << (11 + 2 * z);
                double past = (double)bytes > m.cache_bytes ? (double)bytes - m.cache_bytes : 0;
                memset(&s[n], 0, sizeof s[n]);
                s[n].collective = LDT_COLL_SEND_RECV;
                s[n].group = peers;
                s[n].bytes = bytes;
                s[n].seconds = m.overhead_s + peers * m.links[0].latency_s +
                               ((double)bytes + m.beyond_cache[LDT_KIND_SEND_RECV] * past) / m.links[0].bandwidth_Bps;
                n++;
            }
        cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
        mf = as_fitted(m);
        want = mf;
        if (c == 1) { /* the least own call cost: a = -1.25 us along the trade */
            want.overhead_s = 5.25e-6;
            want.kind_overhead_s[LDT_KIND_ALL_REDUCE] = -1.25e-6;
            want.links[0].latency_s = 7.5e-6 - 1.25e-6 / 3;
            want.links[1].latency_s = 0;
        }
        expect_close(f.links[0].latency_s, want.links[0].latency_s, 1e-6, "outer latency");
        cr_expect(fabs(f.links[1].latency_s - want.links[1].latency_s) <= 1e-12, "inner latency %g s, expected %g",
                  f.links[1].latency_s, want.links[1].latency_s);
        for (int d = 0; d < 2; d++) expect_close(f.links[d].bandwidth_Bps, want.links[d].bandwidth_Bps, 1e-6, "bandwidth");
        expect_close(f.overhead_s, want.overhead_s, 1e-6, "overhead");
        cr_expect(fabs(f.kind_overhead_s[LDT_KIND_ALL_REDUCE] - want.kind_overhead_s[LDT_KIND_ALL_REDUCE]) <= 1e-11,
                  "all_reduce call overhead %g s, expected %g", f.kind_overhead_s[LDT_KIND_ALL_REDUCE],
                  want.kind_overhead_s[LDT_KIND_ALL_REDUCE]);
        cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g, expected %g", f.cache_bytes, m.cache_bytes);
        for (int k = 0; k < 4; k++) {
            expect_close(1 + f.bytes_extra[k], 1 + mf.bytes_extra[k], 1e-6, "bytes factor");
            expect_close(f.beyond_cache[k], m.beyond_cache[k], 1e-6, "beyond-cache factor");
        }
        cr_assert_eq(ldt_mesh_create(2, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < n; i++) {
            double got = s[i].collective == LDT_COLL_SEND_RECV
                             ? ldt_cost_seconds(&f, mesh, 0, NULL, LDT_COLL_SEND_RECV, s[i].bytes, (int)s[i].group)
                             : ldt_cost_seconds(&f, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0);
            expect_close(got, s[i].seconds, 1e-6, "ldt_cost_seconds vs the truth");
        }
        ldt_mesh_destroy(mesh);
    }
}

/* The threads calibration's shape: one link of 4 ranks, every kind timed on it, send/recv with
 * one peer, a broadcast (direct: 3 hops), no latency, and call costs of their own below and
 * above the overhead (all_reduce 10 us, send/recv 23, broadcast 9, the others 18). The
 * timings leave the latency free (every kind's intercept has its own term but the shared
 * three's), and the fit takes the least own call cost for all_reduce that keeps the latency
 * >= 0: the truth's, latency 0, every call cost and price given back. */
Test(costfit, one_link_call_costs_of_their_own) {
    static const ldt_collective kinds[] = {LDT_COLL_ALL_REDUCE, LDT_COLL_REDUCE_SCATTER, LDT_COLL_ALL_GATHER,
                                           LDT_COLL_ALL_TO_ALL, LDT_COLL_SEND_RECV};
    const double factor[6] = {0.4, 1.2, 1.1, 2.0, 1.5, 0.4};
    ldt_cost_sample s[48];
    ldt_cost_model m, f = start(), mf;
    int n = 0;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "truth");
    m.nlinks = 1;
    m.links[0].bandwidth_Bps = 2.2e9;
    m.overhead_s = 18e-6;
    m.kind_overhead_s[LDT_KIND_ALL_REDUCE] = -8e-6;
    m.kind_overhead_s[LDT_KIND_SEND_RECV] = 5e-6;
    m.kind_overhead_s[LDT_KIND_BROADCAST] = -9e-6;
    m.cache_bytes = 524288;
    m.algo[LDT_KIND_BROADCAST] = f.algo[LDT_KIND_BROADCAST] = LDT_ALGO_DIRECT;
    for (int k = 0; k < 6; k++) {
        m.bytes_extra[k] = factor[k] - 1;
        m.beyond_cache[k] = 1.25 + 0.25 * k;
        for (int z = 0; z < 8; z++) {
            int64_t bytes = (int64_t)3 << (10 + 2 * z); /* 3 KiB .. 48 MiB */
            double past = (double)bytes > m.cache_bytes ? (double)bytes - m.cache_bytes : 0;
            memset(&s[n], 0, sizeof s[n]);
            if (k < 5) s[n].collective = kinds[k];
            s[n].broadcast = k == 5;
            s[n].group = k == 4 ? 1 : 4;
            s[n].bytes = bytes;
            s[n].seconds = m.overhead_s + m.kind_overhead_s[k] + factor[k] * ((double)bytes + m.beyond_cache[k] * past) /
                                                                     m.links[0].bandwidth_Bps;
            n++;
        }
    }
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    mf = as_fitted(m);
    expect_close(f.links[0].bandwidth_Bps, mf.links[0].bandwidth_Bps, 1e-6, "bandwidth");
    cr_expect(fabs(f.links[0].latency_s) <= 1e-12, "latency %g s, expected 0", f.links[0].latency_s);
    expect_close(f.overhead_s, m.overhead_s, 1e-6, "overhead");
    for (int k = 0; k < 6; k++) {
        cr_expect(fabs(f.kind_overhead_s[k] - m.kind_overhead_s[k]) <= 1e-11, "kind %d call overhead %g s, expected %g",
                  k, f.kind_overhead_s[k], m.kind_overhead_s[k]);
        expect_close(1 + f.bytes_extra[k], 1 + mf.bytes_extra[k], 1e-6, "bytes factor");
    }
    cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g, expected %g", f.cache_bytes, m.cache_bytes);
    for (int i = 0; i < n; i++) { /* on the link fitted (send/recv: n - 1 the peers) */
        int k = s[i].broadcast ? LDT_KIND_BROADCAST : i / 8;
        expect_close(ldt_cost_kind_seconds(&f, f.links[0], k == LDT_KIND_SEND_RECV ? 2 : 4, (ldt_coll_kind)k,
                                           s[i].bytes),
                     s[i].seconds, 1e-6, "price vs the truth");
    }
}

/* A curve's peak is the best rate of the ops that took 10 us or more: adds of 64 KiB to
 * 4 MiB at 80, 60, 50 and 20 GB/s take 0.8, 4.4, 21 and 210 us, so the peak is 50 GB/s and
 * the points 1 (capped), 1 (capped), 1 and 0.4; when no op takes 10 us, the best of all. */
Test(costfit, a_curves_peak_comes_from_ops_of_10_us) {
    const double size[4] = {65536, 262144, 1048576, 4194304}, rate[4] = {80e9, 60e9, 50e9, 20e9};
    const double want[4] = {1, 1, 1, 0.4}, fast[3] = {4e9, 8e9, 6e9}, small[3] = {1e3, 4e3, 16e3};
    ldt_eff_curve e;
    expect_close(ldt__fill_curve(&e, size, rate, 4), 50e9, 1e-12, "peak");
    cr_assert_eq(e.npoints, 4);
    for (int i = 0; i < 4; i++) {
        expect_close(e.size[i], size[i], 1e-12, "curve size");
        expect_close(e.eff[i], want[i], 1e-12, "curve point");
    }
    expect_close(ldt__fill_curve(&e, small, fast, 3), 8e9, 1e-12, "peak of ops all under 10 us");
    expect_close(e.eff[0], 0.5, 1e-12, "curve point");
    expect_close(e.eff[2], 0.75, 1e-12, "curve point");
}

/* A knee in the collectives only: the local copies on one line beside them (+-2% noise on
 * every timing). The fit takes the knee for the collectives and keeps the local ops a line
 * (their knee term must cut their own loss by a third): local bandwidth and overhead as the
 * truth's, local knee factor 0. Fitted with a knee, the local line's noise alone put a
 * knee factor on it. */
Test(costfit, a_knee_in_the_collectives_leaves_the_local_line) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    uint64_t x = 0x2545F4914F6CDD1Dull;
    int n;
    m.cache_bytes = 1048576;
    for (int k = 0; k < 4; k++) m.beyond_cache[k] = 2.0 + k;
    m.beyond_cache[LDT_KIND_COUNT] = 0;
    n = synth(s, &m);
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s[i].seconds *= 1 + 0.02 * (2.0 * (double)(x >> 11) / 9007199254740992.0 - 1);
    }
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g, expected %g", f.cache_bytes, m.cache_bytes);
    cr_expect_eq(f.beyond_cache[LDT_KIND_COUNT], 0, "local knee factor %g", f.beyond_cache[LDT_KIND_COUNT]);
    expect_close(f.local_bandwidth_Bps, m.local_bandwidth_Bps, 0.03, "local bandwidth");
    for (int k = 0; k < 4; k++) expect_close(f.beyond_cache[k], m.beyond_cache[k], 0.1, "a collective's knee factor");
}

/* Send/recv timings (one and three peers, on the outer link) beside every other kind: the
 * fit gives back send_recv's bytes factor (0.6 and, in a second case, 1.75 times the fastest
 * collective's time per byte: against the planner kinds' geometric mean, the link's, 0.49 and
 * 1.43) and its knee factor; the library's price of each is the truth's. */
Test(costfit, recovers_a_send_recv_factor) {
    static const double factors[] = {0.6, 1.75};
    for (int c = 0; c < 2; c++) {
        ldt_cost_sample s[128];
        ldt_cost_model m = truth(), f = start(), mf;
        int64_t dims[2] = {4, 2};
        ldt_mesh *mesh;
        int n;
        m.bytes_extra[LDT_KIND_ALL_GATHER] = 1.25;
        m.bytes_extra[LDT_KIND_SEND_RECV] = factors[c] - 1;
        m.cache_bytes = 1048576;
        m.beyond_cache[LDT_KIND_ALL_GATHER] = 4.0;
        m.beyond_cache[LDT_KIND_SEND_RECV] = 2.0 + c;
        m.kind_overhead_s[LDT_KIND_SEND_RECV] = c ? 7e-5 : 0; /* a mailbox's call, and none */
        n = synth(s, &m);
        for (int peers = 1; peers <= 3; peers += 2)
            for (int z = 0; z < 8; z++) {
                int64_t bytes = (int64_t)5 << (11 + 2 * z);
                double past = (double)bytes > m.cache_bytes ? (double)bytes - m.cache_bytes : 0;
                memset(&s[n], 0, sizeof s[n]);
                s[n].collective = LDT_COLL_SEND_RECV;
                s[n].dim = 0;
                s[n].group = peers;
                s[n].bytes = bytes;
                s[n].seconds = m.overhead_s + m.kind_overhead_s[LDT_KIND_SEND_RECV] + peers * m.links[0].latency_s +
                               factors[c] * ((double)bytes + m.beyond_cache[LDT_KIND_SEND_RECV] * past) /
                                   m.links[0].bandwidth_Bps;
                n++;
            }
        cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
        mf = as_fitted(m);
        expect_recovers(&f, &mf, 1e-6);
        expect_close(1 + f.bytes_extra[LDT_KIND_SEND_RECV], 1 + mf.bytes_extra[LDT_KIND_SEND_RECV], 1e-6,
                     "send_recv bytes factor");
        expect_close(f.beyond_cache[LDT_KIND_SEND_RECV], m.beyond_cache[LDT_KIND_SEND_RECV], 1e-6,
                     "send_recv beyond-cache factor");
        cr_expect(fabs(f.kind_overhead_s[LDT_KIND_SEND_RECV] - m.kind_overhead_s[LDT_KIND_SEND_RECV]) <= 1e-11,
                  "send_recv call overhead %g s, expected %g", f.kind_overhead_s[LDT_KIND_SEND_RECV],
                  m.kind_overhead_s[LDT_KIND_SEND_RECV]);
        cr_expect(fabs(f.kind_overhead_s[LDT_KIND_BROADCAST]) <= 1e-11, "no broadcast: its call overhead stays 0");
        /* priced on the slowest link (dim 0 here) by its peers */
        cr_assert_eq(ldt_mesh_create(2, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < n; i++)
            if (s[i].collective == LDT_COLL_SEND_RECV)
                expect_close(ldt_cost_seconds(&f, mesh, 0, NULL, LDT_COLL_SEND_RECV, s[i].bytes, (int)s[i].group),
                             s[i].seconds, 1e-6, "send_recv price vs the truth");
        ldt_mesh_destroy(mesh);
    }
}

/* Broadcast timings (their own samples: no redistribution step issues one) beside every other
 * kind, on both links (groups of 4 and 2), under a tree algorithm (ceil(log2 n) hops: 2 and
 * 1), with a bytes factor of 1.4 and a knee factor of 2.5: the fit gives both back and the
 * library's price of each broadcast (ldt_cost_kind_seconds) is the truth's. */
Test(costfit, recovers_a_broadcast_factor) {
    ldt_cost_sample s[160];
    ldt_cost_model m = truth(), f = start(), mf;
    const int64_t groups[2] = {4, 2};
    const double tree_hops[2] = {2, 1};
    int n;
    m.bytes_extra[LDT_KIND_ALL_GATHER] = 1.25;
    m.bytes_extra[LDT_KIND_BROADCAST] = 0.4;
    m.cache_bytes = 1048576;
    m.beyond_cache[LDT_KIND_ALL_GATHER] = 4.0;
    m.beyond_cache[LDT_KIND_BROADCAST] = 2.5;
    m.algo[LDT_KIND_BROADCAST] = LDT_ALGO_TREE;
    f.algo[LDT_KIND_BROADCAST] = LDT_ALGO_TREE;
    m.kind_overhead_s[LDT_KIND_BROADCAST] = 3e-6;
    n = synth(s, &m);
    for (int d = 0; d < 2; d++)
        for (int z = 0; z < 8; z++) {
            int64_t bytes = (int64_t)1 << (12 + 2 * z); /* 4 KiB .. 64 MiB */
            double past = (double)bytes > m.cache_bytes ? (double)bytes - m.cache_bytes : 0;
            memset(&s[n], 0, sizeof s[n]);
            s[n].broadcast = 1;
            s[n].dim = d;
            s[n].group = groups[d];
            s[n].bytes = bytes;
            s[n].seconds = m.overhead_s + 3e-6 + tree_hops[d] * m.links[d].latency_s +
                           1.4 * ((double)bytes + 2.5 * past) / m.links[d].bandwidth_Bps;
            n++;
        }
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    mf = as_fitted(m);
    expect_recovers(&f, &mf, 1e-6);
    cr_expect_eq(f.cache_bytes, m.cache_bytes);
    expect_close(1 + f.bytes_extra[LDT_KIND_BROADCAST], 1 + mf.bytes_extra[LDT_KIND_BROADCAST], 1e-6,
                 "broadcast bytes factor");
    expect_close(f.beyond_cache[LDT_KIND_BROADCAST], 2.5, 1e-6, "broadcast beyond-cache factor");
    expect_close(f.kind_overhead_s[LDT_KIND_BROADCAST], 3e-6, 1e-6, "broadcast call overhead");
    for (int i = 0; i < n; i++) {
        if (!s[i].broadcast) continue;
        expect_close(ldt_cost_kind_seconds(&f, f.links[s[i].dim], s[i].group, LDT_KIND_BROADCAST, s[i].bytes),
                     s[i].seconds, 1e-6, "broadcast price vs the truth");
        expect_close(s[i].modeled, s[i].seconds, 1e-6, "broadcast modeled vs measured");
    }
    /* refused: a broadcast flag other than 0 or 1, a broadcast over one rank */
    s[n - 1].broadcast = 2;
    cr_expect_eq(ldt_cost_model_fit(&s[n - 1], 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "broadcast 2, expected 0") != NULL, "%s", ldt_last_error());
    s[n - 1].broadcast = 1;
    s[n - 1].group = 1;
    cr_expect_eq(ldt_cost_model_fit(&s[n - 1], 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "(broadcast) is on mesh dim 1 with a group of 1") != NULL, "%s",
              ldt_last_error());
}

/* A kind's call overhead: absent from the shipped profiles, written when set and read back,
 * added once to the kind's price (and to no other kind's), negative down to a fixed cost of
 * 0, refused below that, for an unknown kind or when not a number. */
Test(costfit, kind_overhead_profile_field_and_price) {
    ldt_cost_model m, back;
    char buf[16384];
    const char *bad[] = {"\"kind_overhead_s\": {\"send_recv\": \"fast\"}", "\"kind_overhead_s\": {\"gossip\": 1e-5}",
                         "\"kind_overhead_s\": 3"};
    static char plain[16384], doc[16384 + 256];
    const char *want[] = {"kind_overhead_s.send_recv must be a number", "unknown collective kind \"gossip\"",
                          "must be an object of kind: seconds"};
    double p0, p1, q0, q1;
    ldt_link l;
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &m), LDT_OK);
    for (int k = 0; k < LDT_KIND_COUNT; k++) cr_expect_eq(m.kind_overhead_s[k], 0);
    cr_assert_gt(ldt_cost_model_format(&m, plain, sizeof plain), 0);
    cr_expect(strstr(plain, "kind_overhead_s") == NULL, "%s", plain);
    l = ldt_cost_model_link(&m, 1, 0);
    p0 = ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_SEND_RECV, 65536);
    q0 = ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_ALL_GATHER, 65536);
    m.kind_overhead_s[LDT_KIND_SEND_RECV] = 7e-5;
    p1 = ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_SEND_RECV, 65536);
    q1 = ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_ALL_GATHER, 65536);
    cr_expect(fabs(p1 - p0 - 7e-5) <= 1e-15, "send_recv priced %g then %g s", p0, p1);
    cr_expect_eq(q1, q0, "all_gather moved: %g then %g s", q0, q1);
    cr_assert_lt(ldt_cost_model_format(&m, buf, sizeof buf), (int)sizeof buf);
    cr_assert_eq(ldt_cost_model_parse(buf, &back), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(back.kind_overhead_s[LDT_KIND_SEND_RECV], 7e-5);
    cr_expect_eq(back.kind_overhead_s[LDT_KIND_BROADCAST], 0);
    for (int i = 0; i < 3; i++) { /* the field spliced in as the shipped profile's first key */
        snprintf(doc, sizeof doc, "{%s,%s", bad[i], strchr(plain, '{') + 1);
        cr_expect_eq(ldt_cost_model_parse(doc, &back), LDT_ERR_CORRUPT, "case %d", i);
        cr_expect(strstr(ldt_last_error(), want[i]) != NULL, "case %d: %s", i, ldt_last_error());
    }
    /* negative: a call cheaper than the overhead, down to a fixed cost of 0 and no lower */
    m.kind_overhead_s[LDT_KIND_BROADCAST] = -0.5 * m.overhead_s;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_OK, "%s", ldt_last_error());
    cr_expect(fabs(ldt_cost_kind_seconds(&m, l, 4, LDT_KIND_BROADCAST, 65536) + 0.5 * m.overhead_s -
                   ldt_cost_kind_seconds(&back, l, 4, LDT_KIND_BROADCAST, 65536)) <= 1e-15);
    m.kind_overhead_s[LDT_KIND_BROADCAST] = -m.overhead_s - 1e-6;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "broadcast call overhead") != NULL, "%s", ldt_last_error());
}

/* Local op rows from s[n] on, by the formula written out: each op (chunk, partial, pad) at
 * 4 KiB to 64 MiB by 2x, factor fac[op], knee Cl with past-knee factor yl, under m's local
 * overhead and bandwidth. Returns the new count. */
static int synth_local(ldt_cost_sample *s, int n, const ldt_cost_model *m, const double *fac, double Cl, double yl) {
    for (int o = 0; o < LDT_LOCAL_OP_COUNT; o++)
        for (int64_t b = 4096; b <= (64 << 20); b *= 2) {
            double past = (double)b > Cl ? (double)b - Cl : 0;
            memset(&s[n], 0, sizeof s[n]);
            s[n].collective = (ldt_collective)(LDT_COLL_LOCAL_CHUNK + o);
            s[n].group = 1;
            s[n].bytes = b;
            s[n].seconds = m->local_overhead_s + (fac[o] * (double)b + yl * past) / m->local_bandwidth_Bps;
            n++;
        }
    return n;
}

/* Local ops of their own: a chunk copies what a pad or partial zero-fills, so each op has its
 * own factor on the local bandwidth, and the local ops have their own knee (2 MiB here, the
 * collectives' at 512 KiB). Timings by the formula written out here, every op at 4 KiB to
 * 64 MiB by 2x: the fit gives back the local knee, the bandwidth (1 / the geometric mean of
 * the ops' seconds per byte: the factors' product is 1 here), each factor, the past-knee
 * factor and the collectives' knee; the library prices each timing as the truth; and with
 * +-3% noise on every timing the same knee and each figure within 6%. */
Test(costfit, recovers_local_op_factors_and_their_own_knee) {
    static const double fac[LDT_LOCAL_OP_COUNT] = {1.6, 0.9, 1 / (1.6 * 0.9)}; /* chunk, partial, pad */
    ldt_cost_model m = truth();
    int64_t dims[2] = {4, 2};
    ldt_mesh *mesh;
    m.cache_bytes = 524288;
    for (int k = 0; k < 4; k++) m.beyond_cache[k] = 1.5 + k;
    cr_assert_eq(ldt_mesh_create(2, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
    for (int noisy = 0; noisy < 2; noisy++) {
        ldt_cost_sample s[160];
        ldt_cost_model f = start();
        uint64_t x = 0xD1B54A32D192ED03ull;
        double tol = noisy ? 0.06 : 1e-6, Cl = 2097152, yl = 1.5;
        int n = synth(s, &m);
        n = synth_local(s, n - 16, &m, fac, Cl, yl); /* in place of synth's local rows */
        for (int i = 0; noisy && i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s[i].seconds *= 1 + 0.03 * (2.0 * (double)(x >> 11) / 9007199254740992.0 - 1);
        }
        cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(f.local_cache_bytes, Cl, "noisy %d: local knee at %g", noisy, f.local_cache_bytes);
        cr_expect_eq(f.cache_bytes, m.cache_bytes, "noisy %d: knee at %g", noisy, f.cache_bytes);
        expect_close(f.local_bandwidth_Bps, m.local_bandwidth_Bps, tol, "local bandwidth");
        for (int o = 0; o < LDT_LOCAL_OP_COUNT; o++)
            expect_close(1 + f.local_bytes_extra[o], fac[o], tol, "a local op's factor");
        expect_close(f.beyond_cache[LDT_KIND_COUNT], yl, noisy ? 0.1 : 1e-6, "local past-knee factor");
        for (int i = 0; !noisy && i < n; i++)
            expect_close(ldt_cost_seconds(&f, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0), s[i].seconds,
                         1e-6, "ldt_cost_seconds vs the truth");
    }
    ldt_mesh_destroy(mesh);
}

/* A broadcast is a plain copy on each receiving rank: with local ops among the timings, its
 * knee is theirs (here 4 MiB), not the collectives' (512 KiB). Truth written out: the
 * collectives and local ops as above, broadcasts on both links (groups of 4 and 2, a tree:
 * 2 and 1 hops) with a bytes factor of 0.5 and a knee factor of 1.8 past 4 MiB; the fit
 * gives both back, each broadcast's price is its timing, and a broadcast past 512 KiB but
 * below 4 MiB is priced without any knee term. Without local ops it keeps the collectives'
 * knee (recovers_a_broadcast_factor). */
Test(costfit, broadcast_takes_the_local_knee) {
    static const double fac[LDT_LOCAL_OP_COUNT] = {1.6, 0.9, 1 / (1.6 * 0.9)};
    const int64_t groups[2] = {4, 2};
    const double tree_hops[2] = {2, 1}, Cl = 4194304, yl = 1.2, fb = 0.5, yb = 1.8;
    ldt_cost_model m = truth(), f = start(), mf;
    ldt_cost_sample s[200];
    double b2m;
    int n;
    m.cache_bytes = 524288;
    for (int k = 0; k < 4; k++) m.beyond_cache[k] = 1.5 + k;
    f.algo[LDT_KIND_BROADCAST] = LDT_ALGO_TREE;
    n = synth_local(s, synth(s, &m) - 16, &m, fac, Cl, yl); /* in place of synth's local rows */
    for (int d = 0; d < 2; d++)
        for (int z = 0; z < 8; z++) {
            int64_t bytes = (int64_t)1 << (12 + 2 * z); /* 4 KiB .. 64 MiB */
            double past = (double)bytes > Cl ? (double)bytes - Cl : 0;
            memset(&s[n], 0, sizeof s[n]);
            s[n].broadcast = 1;
            s[n].dim = d;
            s[n].group = groups[d];
            s[n].bytes = bytes;
            s[n].seconds = m.overhead_s + tree_hops[d] * m.links[d].latency_s +
                           fb * ((double)bytes + yb * past) / m.links[d].bandwidth_Bps;
            n++;
        }
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(f.local_cache_bytes, Cl, "local knee at %g", f.local_cache_bytes);
    cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g", f.cache_bytes);
    mf = as_fitted(m);
    expect_recovers(&f, &mf, 1e-6);
    /* the planner kinds' factors are 1 here, so the links' bandwidths are the truth's */
    expect_close(1 + f.bytes_extra[LDT_KIND_BROADCAST], fb, 1e-6, "broadcast bytes factor");
    expect_close(f.beyond_cache[LDT_KIND_BROADCAST], yb, 1e-6, "broadcast beyond-cache factor");
    for (int i = 0; i < n; i++)
        if (s[i].broadcast)
            expect_close(ldt_cost_kind_seconds(&f, f.links[s[i].dim], s[i].group, LDT_KIND_BROADCAST, s[i].bytes),
                         s[i].seconds, 1e-6, "broadcast price vs the truth");
    /* 2 MiB: past the collectives' knee, below the local one: the plain line */
    b2m = m.overhead_s + 2 * m.links[0].latency_s + fb * 2097152.0 / m.links[0].bandwidth_Bps;
    expect_close(ldt_cost_kind_seconds(&f, f.links[0], 4, LDT_KIND_BROADCAST, 2097152), b2m, 1e-6,
                 "a broadcast of 2 MiB");
}

/* The local ops' fields in a profile: "local_bytes_factor" {op: factor} and
 * "cache": {"local_bytes"}: written only when set, read back, priced (each op its own factor,
 * the knee its own), and bad values refused with a message naming the field. */
Test(costfit, local_op_profile_fields_and_price) {
    ldt_cost_model m, back;
    static char plain[16384], doc[16384 + 256], buf[16384];
    const char *bad[] = {"\"local_bytes_factor\": {\"local_pad\": 0}", "\"local_bytes_factor\": {\"local_copy\": 1}",
                         "\"local_bytes_factor\": {\"local_chunk\": \"x\"}", "\"local_bytes_factor\": [1]"};
    const char *want[] = {"local_bytes_factor.local_pad must be a number > 0", "unknown local op \"local_copy\"",
                          "local_bytes_factor.local_chunk must be a number", "must be an object of local op: factor"};
    ldt_mesh *mesh;
    int dim0 = 0;
    double c0, c1, p1, big;
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_META, &mesh), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &m), LDT_OK);
    cr_assert_gt(ldt_cost_model_format(&m, plain, sizeof plain), 0);
    cr_expect(strstr(plain, "local_bytes") == NULL, "%s", plain);
    c0 = ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_CHUNK, 65536, 0);
    cr_expect_eq(ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_PAD, 65536, 0), c0);
    m.local_bytes_extra[0] = 0.5; /* chunk 1.5x per byte */
    m.local_bytes_extra[2] = -0.25;
    c1 = ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_CHUNK, 65536, 0);
    p1 = ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_PAD, 65536, 0);
    expect_close(c1 - m.local_overhead_s, 1.5 * (c0 - m.local_overhead_s), 1e-12, "chunk at 1.5x");
    expect_close(p1 - m.local_overhead_s, 0.75 * (c0 - m.local_overhead_s), 1e-12, "pad at 0.75x");
    cr_expect_eq(ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_PARTIAL, 65536, 0), c0);
    m.local_cache_bytes = 1 << 20;
    m.beyond_cache[LDT_KIND_COUNT] = 2;
    big = ldt_cost_seconds(&m, mesh, 1, &dim0, LDT_COLL_LOCAL_PARTIAL, 3 << 20, 0);
    expect_close(big, m.local_overhead_s + ((double)(3 << 20) + 2.0 * (2 << 20)) / m.local_bandwidth_Bps, 1e-12,
                 "partial past its own knee");
    cr_assert_lt(ldt_cost_model_format(&m, buf, sizeof buf), (int)sizeof buf);
    cr_assert_eq(ldt_cost_model_parse(buf, &back), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(back.local_bytes_extra[0], 0.5);
    cr_expect_eq(back.local_bytes_extra[1], 0);
    cr_expect_eq(back.local_bytes_extra[2], -0.25);
    cr_expect_eq(back.local_cache_bytes, 1 << 20);
    cr_expect_eq(ldt_cost_seconds(&back, mesh, 1, &dim0, LDT_COLL_LOCAL_PARTIAL, 3 << 20, 0), big);
    for (int i = 0; i < 4; i++) { /* the field spliced in as the shipped profile's first key */
        snprintf(doc, sizeof doc, "{%s,%s", bad[i], strchr(plain, '{') + 1);
        cr_expect_eq(ldt_cost_model_parse(doc, &back), LDT_ERR_CORRUPT, "case %d", i);
        cr_expect(strstr(ldt_last_error(), want[i]) != NULL, "case %d: %s", i, ldt_last_error());
    }
    m.local_bytes_extra[1] = -1;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "local_partial bytes factor 0") != NULL, "%s", ldt_last_error());
    m.local_bytes_extra[1] = 0;
    m.local_cache_bytes = -1;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "local_cache_bytes -1") != NULL, "%s", ldt_last_error());
    ldt_mesh_destroy(mesh);
}

/* The slopes below the knee come from the sizes below the smallest knee tried (512 KiB), so
 * what the large sizes do cannot move them: timings with a knee at 1 MiB, and the same with
 * every timing past 512 KiB 1.3 times slower (a loaded machine's memory), give the same link
 * and local bandwidths, overhead, latencies and bytes factors; only the past-knee factors
 * move (and the knee may). */
Test(costfit, bandwidths_do_not_follow_the_large_sizes) {
    ldt_cost_sample s[96], s2[96];
    ldt_cost_model m = truth(), f = start(), f2 = start(), mf;
    int n;
    m.bytes_extra[LDT_KIND_ALL_GATHER] = 1.25;
    m.bytes_extra[LDT_KIND_ALL_TO_ALL] = 2.0;
    m.cache_bytes = 1048576;
    for (int k = 0; k < 4; k++) m.beyond_cache[k] = 1.5 + k;
    m.beyond_cache[LDT_KIND_COUNT] = 5.0;
    n = synth(s, &m);
    memcpy(s2, s, sizeof s);
    for (int i = 0; i < n; i++)
        if (s2[i].bytes > 524288) s2[i].seconds *= 1.3;
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_cost_model_fit(s2, n, &f2, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_gt(f2.cache_bytes, 0, "the slower large sizes still show a knee");
    mf = as_fitted(m);
    expect_recovers(&f2, &f, 1e-6);
    expect_recovers(&f, &mf, 1e-6);
    for (int k = 0; k < 4; k++)
        expect_close(1 + f2.bytes_extra[k], 1 + mf.bytes_extra[k], 1e-6, "bytes factor");
    cr_expect_gt(f2.beyond_cache[LDT_KIND_COUNT], f.beyond_cache[LDT_KIND_COUNT] * 1.1,
                 "the local past-knee factor takes the slowdown: %g against %g",
                 f2.beyond_cache[LDT_KIND_COUNT], f.beyond_cache[LDT_KIND_COUNT]);
}

/* One link of 4 rank threads measured as `ldt calibrate` does (tensors of 4 KiB to 64 MiB by
 * 4x; each kind's busiest-rank bytes), under `m`, each timing times 1 + e, e uniform (a fixed
 * xorshift stream from `seed`) in +-`ar_near` for all_reduce at or below 512 KiB, +-3% for the
 * other kinds there and +-2% past it. */
static int synth_threads(ldt_cost_sample *s, const ldt_cost_model *m, uint64_t seed, double ar_near) {
    static const ldt_collective kinds[] = {LDT_COLL_ALL_REDUCE, LDT_COLL_REDUCE_SCATTER,
                                           LDT_COLL_ALL_GATHER, LDT_COLL_ALL_TO_ALL};
    static const double share[] = {1.5, 0.75, 0.75, 0.1875}; /* busiest rank's bytes per tensor byte */
    int n = 0;
    for (int k = 0; k < 4; k++)
        for (int z = 0; z < 8; z++) {
            double b = share[k] * (double)((int64_t)4096 << (2 * z)), hops = k == 0 ? 6 : 3;
            double past = b > m->cache_bytes ? b - m->cache_bytes : 0;
            memset(&s[n], 0, sizeof s[n]);
            s[n].collective = kinds[k];
            s[n].group = 4;
            s[n].bytes = (int64_t)b;
            s[n].seconds = m->overhead_s + hops * m->links[0].latency_s +
                           (1 + m->bytes_extra[k]) * (b + m->beyond_cache[k] * past) / m->links[0].bandwidth_Bps;
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            s[n].seconds *= 1 + (b > 524288 ? 0.02 : k == 0 ? ar_near : 0.03) *
                                    (2.0 * (double)(seed >> 11) / 9007199254740992.0 - 1);
            n++;
        }
    return n;
}

/* A kind whose timings below the knee are mostly the overhead (all_reduce on fast threads:
 * its bytes there are 2 to 60% of its time) and carry more noise than the others' (+-25%
 * against +-3%; six noise streams, as six calibrations of one machine): its slope there is
 * loose. When the link's bandwidth was its fastest kind's (this one's), it set the bandwidth and
 * every other factor was a ratio to it: without the shrinkage the six fits gave bandwidths of
 * 23.5 to 47.8 GB/s (truth 30) and the reduce_scatter factor 4.7 to 9.6 (truth 6), every
 * factor 1.5x off in the worst stream; with it, 25.6 to 33.7 GB/s and 5.1 to 6.5. Now the
 * link is the four kinds' geometric mean (the truth's, in those terms: as_fitted). Every kind's knee ratio
 * is about 2 (knee factors 0.9 to 1.1): each fit gives the link's bandwidth, every bytes
 * factor and knee factor within 20% of the truth (they come within 15%), the knee exactly,
 * and prices the sizes past twice the knee within 5% of the truth's prices. */
Test(costfit, a_loose_fastest_slope_moves_no_factor) {
    static const uint64_t seeds[] = {0x9E3779B97F4A7C15ull, 0x2545F4914F6CDD1Dull, 0xD1B54A32D192ED03ull,
                                     0x94D049BB133111EBull, 0xBF58476D1CE4E5B9ull, 0x632BE59BD9B4E5D1ull};
    ldt_cost_model m = truth(), mf;
    int64_t dims[1] = {4};
    ldt_mesh *mesh;
    m.nlinks = 1;
    m.links[0].latency_s = 0;
    m.links[0].bandwidth_Bps = 30e9;
    m.overhead_s = 7e-6;
    m.bytes_extra[LDT_KIND_REDUCE_SCATTER] = 5;
    m.bytes_extra[LDT_KIND_ALL_GATHER] = 4;
    m.bytes_extra[LDT_KIND_ALL_TO_ALL] = 8;
    m.cache_bytes = 524288;
    m.beyond_cache[LDT_KIND_ALL_REDUCE] = 1.0;
    m.beyond_cache[LDT_KIND_REDUCE_SCATTER] = 0.9;
    m.beyond_cache[LDT_KIND_ALL_GATHER] = 1.1;
    m.beyond_cache[LDT_KIND_ALL_TO_ALL] = 1.0;
    mf = as_fitted(m);
    cr_assert_eq(ldt_mesh_create(1, dims, NULL, NULL, LDT_DEVICE_META, &mesh), LDT_OK, "%s", ldt_last_error());
    for (int p = 0; p < 6; p++) {
        ldt_cost_sample s[32];
        ldt_cost_model f = start();
        int n = synth_threads(s, &m, seeds[p], 0.25);
        f.nlinks = 1;
        cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(f.cache_bytes, m.cache_bytes, "knee at %g", f.cache_bytes);
        expect_close(f.links[0].bandwidth_Bps, mf.links[0].bandwidth_Bps, 0.20, "link bandwidth");
        for (int k = 0; k < 4; k++) {
            expect_close(1 + f.bytes_extra[k], 1 + mf.bytes_extra[k], 0.20, "bytes factor");
            expect_close(1 + f.beyond_cache[k], 1 + m.beyond_cache[k], 0.20, "knee factor");
        }
        for (int i = 0; i < n; i++)
            if (s[i].bytes > 2 * m.cache_bytes)
                expect_close(ldt_cost_seconds(&f, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0),
                             ldt_cost_seconds(&m, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0), 0.05,
                             "a large size's price");
    }
    ldt_mesh_destroy(mesh);
}

/* Local copies of a few KiB take a fraction of a microsecond, and their timings carry the
 * clock's and the scheduler's noise of about a microsecond whatever their size (recorded on
 * an idle 16-core host: a 1 KiB chunk 0.085, 1.4, 1.6 and 1.8 us in four calibrations). Their
 * relative error is then 100% or more, and weighed by relative error alone they pulled the
 * local slope below the knee (and so the local knee factor, relative to it) 1.4 to 2.3x
 * between calibrations. The fit weighs each row by its time or 1 us, whichever is larger:
 * six noise streams of +-1 us on the local rows under 64 KiB (and +-3% on every row), truth
 * 30 GB/s, overhead 0.3 us, a knee factor of 2.5 at 512 KiB: each fit finds that local knee
 * and gives the local bandwidth and its knee factor within 20% of the truth (without the floor three of the six
 * missed, the worst at 515 GB/s and a knee factor of 65). */
Test(costfit, microsecond_noise_on_small_copies_moves_no_local_figure) {
    static const uint64_t seeds[] = {0x9E3779B97F4A7C15ull, 0x2545F4914F6CDD1Dull, 0xD1B54A32D192ED03ull,
                                     0x94D049BB133111EBull, 0xBF58476D1CE4E5B9ull, 0x632BE59BD9B4E5D1ull};
    ldt_cost_model m = truth();
    m.nlinks = 1;
    m.links[0].latency_s = 0;
    m.links[0].bandwidth_Bps = 30e9;
    m.overhead_s = 7e-6;
    m.cache_bytes = 524288;
    m.local_bandwidth_Bps = 30e9;
    m.local_overhead_s = 0.3e-6;
    m.beyond_cache[LDT_KIND_COUNT] = 2.5;
    for (int p = 0; p < 6; p++) {
        ldt_cost_sample s[64];
        ldt_cost_model f = start();
        uint64_t x = seeds[p] * 3 + 1;
        int n = synth_threads(s, &m, seeds[p], 0.03);
        f.nlinks = 1;
        for (int kind = 0; kind < 2; kind++)
            for (int z = 0; z < 8; z++) {
                double b = (double)((int64_t)(kind ? 4096 : 1024) << (2 * z)), past, u1, u2;
                past = b > m.cache_bytes ? b - m.cache_bytes : 0;
                memset(&s[n], 0, sizeof s[n]);
                s[n].collective = kind ? LDT_COLL_LOCAL_PAD : LDT_COLL_LOCAL_CHUNK;
                s[n].group = 1;
                s[n].bytes = (int64_t)b;
                s[n].seconds = m.local_overhead_s + (b + m.beyond_cache[LDT_KIND_COUNT] * past) / m.local_bandwidth_Bps;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                u1 = 2.0 * (double)(x >> 11) / 9007199254740992.0 - 1;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                u2 = 2.0 * (double)(x >> 11) / 9007199254740992.0 - 1;
                s[n].seconds *= 1 + 0.03 * u1;
                if (b < 65536) s[n].seconds = fmax(0.05e-6, s[n].seconds + 1e-6 * u2);
                n++;
            }
        cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
        /* the local ops' own knee (the collectives here have none) */
        cr_expect_eq(f.local_cache_bytes, m.cache_bytes, "stream %d: local knee at %g", p, f.local_cache_bytes);
        expect_close(f.local_bandwidth_Bps, m.local_bandwidth_Bps, 0.20, "local bandwidth");
        expect_close(1 + f.beyond_cache[LDT_KIND_COUNT], 1 + m.beyond_cache[LDT_KIND_COUNT], 0.20,
                     "local knee factor");
    }
}

/* Local timings flat up to 512 KiB (the overhead alone) and steep past it: a knee at
 * 512 KiB would fit them with no cost per byte below it (a bandwidth of 1e15), which the
 * fit refuses as a candidate; it keeps a finite local bandwidth. */
Test(costfit, no_knee_that_makes_bytes_free) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    int n = synth(s, &m);
    for (int i = 0; i < n; i++)
        if (s[i].collective == LDT_COLL_LOCAL_CHUNK || s[i].collective == LDT_COLL_LOCAL_PAD) {
            double past = s[i].bytes > 524288 ? (double)(s[i].bytes - 524288) : 0;
            s[i].seconds = 5e-6 + past / 1e9;
        }
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_lt(f.local_bandwidth_Bps, 1e15, "local bandwidth %g", f.local_bandwidth_Bps);
    cr_expect_neq(f.cache_bytes, 524288);
}

Test(costfit, rejects_an_outlier) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    int n = synth(s, &m);
    /* a preempted thread: one small all_gather on dim 1 took 20x, one local chunk 50x */
    s[32 + 2 * 8 + 1].seconds *= 20;
    s[64 + 3].seconds *= 50;
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    expect_recovers(&f, &m, 1e-6);
    cr_expect_lt(s[32 + 2 * 8 + 1].weight, 1e-6, "the outlier keeps weight %g", s[32 + 2 * 8 + 1].weight);
    cr_expect_lt(s[64 + 3].weight, 1e-6);
}

Test(costfit, noisy_timings_with_outliers) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    int n = synth(s, &m);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    /* +-3% multiplicative noise (a fixed xorshift stream) and two wild timings */
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s[i].seconds *= 1 + 0.03 * (2.0 * (double)(x >> 11) / 9007199254740992.0 - 1);
    }
    s[5].seconds *= 8;
    s[40].seconds *= 0.1;
    cr_assert_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_OK, "%s", ldt_last_error());
    /* bandwidths from the large sizes are tight; latencies are a small part of any timing */
    for (int d = 0; d < 2; d++) {
        expect_close(f.links[d].bandwidth_Bps, m.links[d].bandwidth_Bps, 0.03, "bandwidth");
        expect_close(f.links[d].latency_s, m.links[d].latency_s, 0.5, "latency");
    }
    expect_close(f.overhead_s, m.overhead_s, 0.5, "overhead");
    expect_close(f.local_bandwidth_Bps, m.local_bandwidth_Bps, 0.03, "local bandwidth");
    cr_expect_lt(s[5].weight, 0.01);
    cr_expect_lt(s[40].weight, 0.01);
    /* the truth has no knee: the noise is not mistaken for one */
    cr_expect_eq(f.cache_bytes, 0, "a knee at %g in timings without one", f.cache_bytes);
}

Test(costfit, refusals) {
    ldt_cost_sample s[96];
    ldt_cost_model m = truth(), f = start();
    int n = synth(s, &m);
    ldt_cost_sample bad;
    cr_expect_eq(ldt_cost_model_fit(s, n, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "must not be NULL") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_cost_model_fit(NULL, 3, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    f.nlinks = 0;
    cr_expect_eq(ldt_cost_model_fit(s, n, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "0 links") != NULL, "%s", ldt_last_error());
    f = start();
    bad = s[0];
    bad.collective = LDT_COLL_COUNT;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "collective 8") != NULL, "%s", ldt_last_error());
    bad = s[0];
    bad.collective = LDT_COLL_SEND_RECV;
    bad.group = 0;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "1 or more peers") != NULL, "%s", ldt_last_error());
    bad = s[0];
    bad.seconds = 0;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "finite time > 0") != NULL, "%s", ldt_last_error());
    bad = s[0];
    bad.bytes = -1;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "-1 bytes") != NULL, "%s", ldt_last_error());
    bad = s[0];
    bad.dim = 2;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "mesh dim 2") != NULL, "%s", ldt_last_error());
    bad = s[0];
    bad.group = 1;
    cr_expect_eq(ldt_cost_model_fit(&bad, 1, &f, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "group of 1 ranks") != NULL, "%s", ldt_last_error());
}

/* A quick calibration on four rank threads: every kind measured, each sample's modeled value
 * is the fitted model's price of it, and too little room or bad repeats are refused. */
Test(calibrate, measures_every_kind_and_reports_the_fit) {
    ldt_mesh *mesh;
    ldt_calibrate_options o = {1, 0, 0, NULL, 0};
    ldt_cost_model cm;
    ldt_cost_sample *s;
    int cap, n = 0, seen[LDT_COLL_COUNT] = {0}, bcasts = 0;
    double rms = -1;
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
    cap = ldt_calibrate_max_samples(mesh, &o);
    cr_assert_eq(cap, (5 + 1 + 3) * 3); /* per size: 5 kinds on the dim, send_recv, 3 local ops */
    s = calloc((size_t)cap, sizeof *s);
    cr_assert_eq(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, &rms), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(cm.name, "calibrated");
    cr_expect_geq(rms, 0);
    for (int i = 0; i < n; i++) {
        double want = s[i].broadcast
                          ? ldt_cost_kind_seconds(&cm, cm.links[s[i].dim], s[i].group, LDT_KIND_BROADCAST, s[i].bytes)
                      : s[i].collective == LDT_COLL_SEND_RECV
                          ? ldt_cost_seconds(&cm, mesh, 0, NULL, LDT_COLL_SEND_RECV, s[i].bytes, (int)s[i].group)
                          : ldt_cost_seconds(&cm, mesh, 1, &s[i].dim, s[i].collective, s[i].bytes, 0);
        if (s[i].broadcast) {
            bcasts++;
            cr_expect_eq(s[i].group, 4);
        } else {
            seen[s[i].collective]++;
        }
        cr_expect_gt(s[i].seconds, 0);
        expect_close(s[i].modeled, want, 1e-12, "a sample's modeled value");
    }
    /* a kind may lose a size whose time the harness swallowed, never all of them */
    for (int c = 0; c <= LDT_COLL_ALL_TO_ALL; c++)
        cr_expect_gt(seen[c], 0, "%s never measured", ldt_collective_name((ldt_collective)c));
    cr_expect_gt(seen[LDT_COLL_LOCAL_CHUNK] + seen[LDT_COLL_LOCAL_PAD] + seen[LDT_COLL_LOCAL_PARTIAL], 0);
    cr_expect_gt(seen[LDT_COLL_SEND_RECV], 0, "send_recv never measured");
    cr_expect_gt(bcasts, 0, "broadcast never measured");
    cr_expect_eq(ldt_calibrate_samples(mesh, &o, &cm, s, 2, &n, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "pass cap >=") != NULL, "%s", ldt_last_error());
    o.reps = -1;
    cr_expect_eq(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "-1 repeats") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_calibrate_samples(mesh, NULL, &cm, NULL, 5, &n, NULL), LDT_ERR_INVALID_ARGUMENT);
    free(s);
    ldt_mesh_destroy(mesh);
}

/* Rounds: every timing is swept three times and its runs pooled, so each (kind, dim, size)
 * is one sample (the rounds' runs of it merged), as many as one round gives, within the room
 * ldt_calibrate_max_samples names; rounds out of range are refused. */
Test(calibrate, rounds_pool_each_timing_into_one_sample) {
    ldt_mesh *mesh;
    ldt_calibrate_options o = {1, 1, 0, NULL, 3};
    ldt_cost_model cm;
    ldt_cost_sample *s;
    int cap, n = 0;
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    cap = ldt_calibrate_max_samples(mesh, &o);
    s = calloc((size_t)cap, sizeof *s);
    cr_assert_eq(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, NULL), LDT_OK, "%s", ldt_last_error());
    cr_expect_leq(n, cap);
    for (int i = 0; i < n; i++) {
        cr_expect_gt(s[i].seconds, 0);
        for (int j = 0; j < i; j++)
            cr_expect(!(s[i].broadcast == s[j].broadcast && (s[i].broadcast || s[i].collective == s[j].collective) &&
                        s[i].dim == s[j].dim && s[i].bytes == s[j].bytes),
                      "samples %d and %d are one timing (%s, %lld bytes)", j, i,
                      s[i].broadcast ? "broadcast" : ldt_collective_name(s[i].collective), (long long)s[i].bytes);
    }
    /* (a timing the harness swallowed is dropped, more of them on a loaded machine: only
     * that some are left is certain) */
    cr_expect_gt(n, 0);
    o.rounds = -1;
    cr_expect_eq(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "-1 rounds") != NULL, "%s", ldt_last_error());
    o.rounds = 101;
    cr_expect_eq(ldt_calibrate_samples(mesh, &o, &cm, s, cap, &n, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "101 rounds") != NULL, "%s", ldt_last_error());
    free(s);
    ldt_mesh_destroy(mesh);
}

/* ---- the rendezvous ---------------------------------------------------------------------- */

/* Steps with known meetings and compute before them, a known shared excess, a known wait
 * per meeting and share of the compute: the fit gives all three back exactly, and within a
 * few percent under 1% noise on the measured times; a negative term is fixed at 0. */
Test(rendezvous, fit_recovers_the_wait_per_meeting_and_share) {
    static const struct { int ranks, cores; double w, share, fixed; } cases[] = {
        {4, 2, 3.5e-4, 1.5, 2.0e-4}, {6, 4, 1.25e-3, 0.25, 0}, {8, 2, 7.0e-5, 0, 4.0e-3}, {4, 2, 0, 0.8, 1e-3}};
    double calls[6] = {2, 6, 18, 2, 6, 18}, gap[6], meas[6], mod[6], fixed = -1, w, sh;
    for (int i = 0; i < 6; i++) gap[i] = calls[i] * (i < 3 ? 2.5e-4 : 6.75e-3); /* two GEMM sizes */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double over = (double)cases[c].ranks / cases[c].cores - 1;
        for (int i = 0; i < 6; i++) {
            mod[i] = 1e-3 * (1 + i * 0.37); /* anything: the fit works on measured - modeled */
            meas[i] = mod[i] + cases[c].fixed + (calls[i] * cases[c].w + gap[i] * cases[c].share) * over;
        }
        ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, cases[c].ranks, cases[c].cores, &w, &sh, &fixed);
        cr_expect(fabs(w - cases[c].w) <= 1e-9 * (cases[c].w + 1e-3), "case %zu: per meeting %.9g, expected %.9g",
                  c, w, cases[c].w);
        cr_expect(fabs(sh - cases[c].share) <= 1e-9, "case %zu: share %.9g, expected %.9g", c, sh, cases[c].share);
        cr_expect(fabs(fixed - cases[c].fixed) <= 1e-12, "intercept %g, expected %g", fixed, cases[c].fixed);
        for (int i = 0; i < 6; i++) /* +-1%, alternating */
            meas[i] = mod[i] + (cases[c].fixed + (calls[i] * cases[c].w + gap[i] * cases[c].share) * over) *
                                   (i % 2 ? 1.01 : 0.99);
        ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, cases[c].ranks, cases[c].cores, &w, &sh, NULL);
        if (cases[c].share > 0) expect_close(sh, cases[c].share, 0.05, "share under noise");
        if (cases[c].w > 1e-4) expect_close(w, cases[c].w, 0.10, "per meeting under noise");
    }
    /* no sharing, too few steps: nothing to fit */
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, 2, 2, &w, &sh, NULL);
    cr_expect(w == 0 && sh == 0);
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, 4, 0, &w, &sh, NULL);
    cr_expect(w == 0 && sh == 0);
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 2, 4, 2, &w, &sh, NULL);
    cr_expect(w == 0 && sh == 0);
    /* a negative share (steps with more compute waited less): fixed at 0, the wait refitted */
    for (int i = 0; i < 6; i++) meas[i] = mod[i] + 1e-3 * calls[i] - 0.1 * gap[i];
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, 4, 2, &w, &sh, NULL);
    cr_expect(sh == 0 && w >= 0, "share %g, per meeting %g", sh, w);
    /* timings below the model: both 0, never negative */
    for (int i = 0; i < 6; i++) meas[i] = mod[i] - 1e-5 * calls[i] - 0.01 * gap[i];
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, 4, 2, &w, &sh, NULL);
    cr_expect(w == 0 && sh == 0, "per meeting %g, share %g", w, sh);
}

/* Noise a few percent of each step's time (what a shared host gives): weighted by the steps'
 * times, the short steps decide the wait per meeting and the fit finds it within 10%; with
 * equal weights the long steps' noise (2% of milliseconds against waits of tens of
 * microseconds) takes it half off. Hand-derived: w 20 us, share 0.15, steps of 2, 6 and 18
 * meetings after 37 us and 1 ms of compute each, each taking twice its compute plus 60 us a
 * meeting, the excess off by +2, +2, -2, -2, +2 and -2% of the step. */
Test(rendezvous, weighted_by_step_time_the_short_steps_decide_the_wait) {
    const double w = 2e-5, share = 0.15, sign[6] = {1, 1, -1, -1, 1, -1};
    double calls[6] = {2, 6, 18, 2, 6, 18}, gap[6], meas[6], mod[6], took[6], pw, ps;
    for (int i = 0; i < 6; i++) {
        double per = i < 3 ? 3.7e-5 : 1e-3;
        gap[i] = calls[i] * per;
        took[i] = calls[i] * (2 * per + 6e-5);
        mod[i] = 1e-4;
        meas[i] = mod[i] + w * calls[i] + share * gap[i] + 0.02 * took[i] * sign[i];
    }
    ldt__fit_rendezvous(calls, gap, meas, mod, took, 6, 4, 2, &pw, &ps, NULL);
    expect_close(pw, w, 0.10, "per meeting, weighted");
    expect_close(ps, share, 0.12, "share, weighted");
    ldt__fit_rendezvous(calls, gap, meas, mod, NULL, 6, 4, 2, &pw, &ps, NULL);
    cr_expect(fabs(pw - w) > 0.3 * w, "equal weights: per meeting %g (the premise: their noise moves it)", pw);
}

/* The profile field: written when set, read back, absent in the shipped profiles, refused
 * when negative. */
/* The rendezvous steps' twins compute alike: under a profile whose communication and
 * launches are free, the step with k meetings and its twin without them are priced the same,
 * each round a GEMM on Shard(0) rows (a quarter of an n x n GEMM on each of 4 ranks, by the
 * roofline: 2k rounds cost k such GEMMs more than k rounds), and the model counts k meetings.
 * (Left to the plan, one twin computed its GEMMs whole, so the measured difference of the two
 * was mostly GEMM time.) */
Test(rendezvous, calibration_twins_compute_the_same_gemms) {
    ldt_mesh *mesh;
    ldt_cost_model cm;
    const int64_t n = 128;
    const int k = 3;
    double meas[2], mod[2], calls[2], mod2k, calls2k, shard;
    ldt_link free_link = {0, 1e18};
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &cm), LDT_OK);
    cm.overhead_s = cm.local_overhead_s = 0;
    cm.launch_s = 1e-15;
    cm.local_bandwidth_Bps = 1e18;
    cm.node_link = cm.network_link = free_link;
    for (int i = 0; i < cm.nlinks; i++) cm.links[i] = free_link;
    cm.cores = 2; /* 4 ranks on 2 cores: the meetings are counted */
    cm.rendezvous_s = cm.rendezvous_share = 0;
    for (int meet = 0; meet < 2; meet++)
        cr_assert_eq(ldt__calibrate_rounds(mesh, n, k, &cm, meet, &meas[meet], &mod[meet], &calls[meet]), LDT_OK,
                     "%s", ldt_last_error());
    cr_assert_eq(ldt__calibrate_rounds(mesh, n, 2 * k, &cm, 0, &meas[0], &mod2k, &calls2k), LDT_OK, "%s",
                 ldt_last_error());
    shard = ldt_cost_op_seconds(&cm, LDT_OPCLASS_MATMUL, LDT_F32, 2.0 * (double)(n / 4) * (double)n * (double)n,
                                4.0 * (double)(n / 4 * n + n * n + n / 4 * n), 4);
    cr_expect(fabs(mod[1] - mod[0]) <= 1e-6 * mod[0], "modeled %.9g with meetings, %.9g without", mod[1], mod[0]);
    expect_close(mod2k - mod[0], k * shard, 0.02, "k more rounds: k GEMMs on shards");
    cr_expect(fabs(calls[1] - k) < 1e-6, "meetings counted: %g, expected %d", calls[1], k);
    cr_expect_gt(meas[0], 0);
    cr_expect_gt(meas[1], 0);
    ldt_mesh_destroy(mesh);
}

Test(rendezvous, profile_field) {
    ldt_cost_model m, back;
    char buf[16384];
    cr_assert_eq(ldt_cost_model_preset("cpu-threads", &m), LDT_OK);
    cr_expect_eq(m.rendezvous_s, 0);
    cr_assert_gt(ldt_cost_model_format(&m, buf, sizeof buf), 0);
    cr_expect(strstr(buf, "rendezvous_s") == NULL, "%s", buf);
    cr_expect(strstr(buf, "rendezvous_share") == NULL, "%s", buf);
    m.rendezvous_share = 0.75;
    cr_assert_lt(ldt_cost_model_format(&m, buf, sizeof buf), (int)sizeof buf);
    cr_assert_eq(ldt_cost_model_parse(buf, &back), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(back.rendezvous_share, 0.75);
    cr_expect_eq(back.rendezvous_s, 0);
    m.rendezvous_share = 0;
    m.rendezvous_s = 2.5e-4;
    cr_assert_lt(ldt_cost_model_format(&m, buf, sizeof buf), (int)sizeof buf);
    cr_assert_eq(ldt_cost_model_parse(buf, &back), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(back.rendezvous_s, 2.5e-4);
    {
        static char neg[16400];
        char *at = strstr(buf, "\"rendezvous_s\":");
        size_t head;
        cr_assert_not_null(at, "%s", buf);
        head = (size_t)(at - buf) + strlen("\"rendezvous_s\":");
        while (buf[head] == ' ' || buf[head] == '\t' || buf[head] == '\n') head++;
        memcpy(neg, buf, head);
        neg[head] = '-'; /* the same figure, negative */
        strcpy(neg + head + 1, buf + head);
        cr_expect_eq(ldt_cost_model_parse(neg, &back), LDT_ERR_CORRUPT);
    }
    cr_expect(strstr(ldt_last_error(), "compute.rendezvous_s") != NULL, "%s", ldt_last_error());
    m.rendezvous_s = -1;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rendezvous") != NULL, "%s", ldt_last_error());
    m.rendezvous_s = 0;
    m.rendezvous_share = NAN;
    cr_expect_eq(ldt_cost_model_check(&m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rendezvous share") != NULL, "%s", ldt_last_error());
}

/* The modeled step charges each meeting of peers the rendezvous, ranks / cores - 1 times:
 * three rounds of Replicate -> Shard(0) (a local chunk) -> Replicate (an all_gather) and a
 * mul on four rank threads sharing two cores add 3 (4/2 - 1) rendezvous_s to the step, and
 * nothing when the profile gives four cores; the share of compute adds (4/cores - 1) times
 * the kernels' seconds before the meetings: some, and on one core six times what it adds on
 * two (three times the factor, and kernels twice as slow: no launch term here). */
Test(rendezvous, step_model_charges_each_meeting) {
    static const struct { int cores; double want; } cases[] = {{2, 3 * 1e-3}, {4, 0}, {1, 3 * 3e-3}};
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_shape sh = {2, {64, 32}};
    ldt_placement r = ldt_replicate(), s0 = ldt_shard(0);
    ldt_tensor *x, *y;
    double by_share[3];
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK, "%s", ldt_last_error());
    x = ldt_input(ctx, "x", &sh, LDT_F32);
    cr_assert_not_null(x);
    cr_assert_eq(ldt_pin(x, &r, 1), LDT_OK);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ldt_cost_model cm;
        ldt_compile_options o = {0};
        ldt_exec *e[3];
        ldt_exec_stats st[3];
        cr_assert_eq(ldt_cost_model_preset("cpu-threads", &cm), LDT_OK);
        cm.cores = cases[c].cores;
        cm.launch_s = 1e-300; /* kernels all roofline, so they scale with the sharing */
        o.plan.cost = &cm;
        o.overlap = -1;
        for (int z = 0; z < 3; z++) { /* a compile ends the trace: record it again */
            y = x;
            for (int k = 0; k < 3; k++) {
                y = ldt_redistribute_to(y, &s0, 1);
                y = ldt_redistribute_to(y, &r, 1);
                y = ldt_mul(y, y);
            }
            cr_assert_not_null(y, "%s", ldt_ctx_errmsg(ctx));
            cr_assert_eq(ldt_pin(y, &r, 1), LDT_OK);
            cm.rendezvous_s = z == 1 ? 1e-3 : 0;
            cm.rendezvous_share = z == 2 ? 1 : 0;
            cr_assert_eq(ldt_compile(ctx, &y, 1, &o, &e[z]), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_exec_stats_get(e[z], &st[z]), LDT_OK);
        }
        cr_expect(fabs(st[1].modeled_step_seconds - st[0].modeled_step_seconds - cases[c].want) <= 1e-12,
                  "%d cores: the step grew by %.9g s, expected %.9g", cases[c].cores,
                  st[1].modeled_step_seconds - st[0].modeled_step_seconds, cases[c].want);
        by_share[c] = st[2].modeled_step_seconds - st[0].modeled_step_seconds;
    }
    cr_expect_gt(by_share[0], 0);
    cr_expect_eq(by_share[1], 0);
    expect_close(by_share[2], 6 * by_share[0], 1e-9, "the share on one core against two");
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* ---- one price --------------------------------------------------------------------------- */

/* x pinned `from`, redistributed to `to`: the search's price of that edge, and the modeled
 * seconds of a redistribution plan made apart with the same model. */
static void one_move(const char *mesh_s, const ldt_shape *shape, const ldt_placement *from,
                     const ldt_placement *to, double *search, double *planned, ldt_redist_plan **rp) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_plan *p;
    ldt_tensor *x, *y;
    ldt_spec src;
    ldt_redist_options ro = {NULL, 1, LDT_REDIST_DIJKSTRA};
    ldt_cost_model cm;
    int nd;
    cr_assert_eq(ldt_mesh_parse(mesh_s, LDT_DEVICE_META, &mesh), LDT_OK);
    nd = ldt_mesh_ndim(mesh);
    cr_assert_eq(ldt_cost_model_preset("uniform", &cm), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK, "%s", ldt_last_error());
    x = ldt_input(ctx, "x", shape, LDT_F32);
    cr_assert_not_null(x, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_pin(x, from, nd), LDT_OK, "%s", ldt_last_error());
    y = ldt_redistribute_to(x, to, nd);
    cr_assert_not_null(y, "%s", ldt_ctx_errmsg(ctx));
    po.cost = &cm;
    po.no_compute_cost = 1;
    cr_assert_eq(ldt_plan_create(ctx, &po, &p), LDT_OK, "%s", ldt_last_error());
    *search = ldt__plan_search_price(p, y->id, 0);
    /* the search's objective is the reported cost: this one move */
    cr_expect_eq(ldt_plan_cost(p), *search);
    ro.cost = &cm;
    cr_assert_eq(ldt_spec_init(&src, mesh, shape, from, nd, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_redist_plan_create(&src, NULL, to, nd, &ro, rp), LDT_OK, "%s", ldt_last_error());
    *planned = ldt_redist_plan_seconds(*rp);
    ldt_plan_destroy(p);
    ldt_ctx_destroy(ctx);
    /* the redistribution plan borrows the mesh: the caller frees both */
    (void)mesh;
}

Test(oneprice, search_price_is_the_lowered_plan_price) {
    static const char *const meshes[] = {"4", "2x2", "3", "2x3"};
    ldt_placement opts[] = {ldt_replicate(), ldt_shard(0), ldt_shard(1), ldt_partial(LDT_REDUCE_SUM)};
    uint64_t seed = 12345;
    int cases = ldt_test_cases(200), checked = 0;
    for (int c = 0; c < cases; c++) {
        ldt_placement from[2], to[2];
        ldt_shape shape = {2, {0, 0}};
        double search, planned;
        ldt_redist_plan *rp = NULL;
        const char *ms = meshes[c % 4];
        int nd = strchr(ms, 'x') ? 2 : 1;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        shape.dims[0] = 1 + (int64_t)((seed >> 20) % 37);
        shape.dims[1] = 1 + (int64_t)((seed >> 40) % 29);
        for (int i = 0; i < nd; i++) {
            from[i] = opts[(seed >> (8 + 4 * i)) % 4];
            to[i] = opts[(seed >> (24 + 4 * i)) % 4];
        }
        one_move(ms, &shape, from, to, &search, &planned, &rp);
        cr_expect_eq(search, planned, "case %d on %s: the search prices %.17g, the plan %.17g", c, ms,
                     search, planned);
        {
            const ldt_spec *sp = ldt_redist_plan_source(rp);
            ldt_mesh *m = (ldt_mesh *)sp->mesh;
            ldt_redist_plan_destroy(rp);
            ldt_mesh_destroy(m);
        }
        checked++;
    }
    cr_expect_eq(checked, cases);
}

Test(oneprice, shard_to_partial_is_priced_as_its_local_pad) {
    ldt_shape shape = {2, {512, 512}};
    ldt_placement from[1] = {ldt_shard(0)}, to[1] = {ldt_partial(LDT_REDUCE_SUM)};
    ldt_redist_plan *rp = NULL;
    ldt_redist_step st;
    ldt_cost_model cm;
    double search, planned, gather_route;
    ldt_mesh *m;
    one_move("4", &shape, from, to, &search, &planned, &rp);
    cr_assert_eq(ldt_redist_plan_nsteps(rp), 1);
    cr_assert_eq(ldt_redist_plan_step(rp, 0, &st), LDT_OK);
    cr_expect_eq(st.collective, LDT_COLL_LOCAL_PAD);
    cr_assert_eq(ldt_cost_model_preset("uniform", &cm), LDT_OK);
    /* by hand: each rank writes its 512 x 512 f32 tensor (its 128 rows, zeros elsewhere) */
    cr_expect_eq(search, cm.local_overhead_s + 512.0 * 512 * 4 / cm.local_bandwidth_Bps,
                 "the move is priced %.9g s", search);
    cr_expect_eq(search, planned);
    /* the all_gather + local_partial route the search used to price it by costs far more */
    m = (ldt_mesh *)ldt_redist_plan_source(rp)->mesh;
    {
        int dim = 0;
        gather_route = ldt_cost_seconds(&cm, m, 1, &dim, LDT_COLL_ALL_GATHER, 512 * 512 * 4 * 3 / 4, 0) +
                       ldt_cost_seconds(&cm, m, 1, &dim, LDT_COLL_LOCAL_PARTIAL, 512 * 512 * 4, 0);
    }
    cr_expect_lt(5 * search, gather_route, "local pad %.3g s vs gather route %.3g s", search, gather_route);
    ldt_redist_plan_destroy(rp);
    ldt_mesh_destroy(m);
}
