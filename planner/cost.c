/* The alpha-beta cost model: presets, JSON profiles (read and written), the ring formulas. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "ldt/planner.h"
#include "planner/cost_fit.h"
#include "planner/profiles.h"

#define GB 1e9

static const char *const k_coll_names[] = {
#define LDT__COLL_NAME(sfx, name) name,
    LDT_COLLECTIVE_MAP(LDT__COLL_NAME)
#undef LDT__COLL_NAME
};
_Static_assert(sizeof k_coll_names / sizeof k_coll_names[0] == LDT_COLL_COUNT,
               "one name per collective");

const char *ldt_collective_name(ldt_collective c) {
    return (int)c >= 0 && c < LDT_COLL_COUNT ? k_coll_names[c] : "invalid";
}

static const char *const k_kind_names[LDT_KIND_COUNT] = {
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv", "broadcast"};
static const char *const k_algo_names[LDT_ALGO_COUNT] = {"ring", "tree", "direct"};
static const char *const k_prec_names[LDT_PREC_COUNT] = {"f32", "bf16", "f64"};
static const char *const k_class_names[LDT_OPCLASS_COUNT] = {"matmul", "elementwise", "norm",
                                                             "softmax", "reduce", "transcendental"};

const char *ldt_coll_kind_name(ldt_coll_kind k) {
    return (int)k >= 0 && k < LDT_KIND_COUNT ? k_kind_names[k] : "invalid";
}
const char *ldt_coll_algo_name(ldt_coll_algo a) {
    return (int)a >= 0 && a < LDT_ALGO_COUNT ? k_algo_names[a] : "invalid";
}
const char *ldt_precision_name(ldt_precision p) {
    return (int)p >= 0 && p < LDT_PREC_COUNT ? k_prec_names[p] : "invalid";
}
const char *ldt_op_class_name(ldt_op_class c) {
    return (int)c >= 0 && c < LDT_OPCLASS_COUNT ? k_class_names[c] : "invalid";
}

static ldt_status check_link(const ldt_cost_model *m, const ldt_link *l, const char *which) {
    if (!isfinite(l->latency_s) || l->latency_s < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': %s latency %g s, expected a finite value >= 0", m->name,
                 which, l->latency_s);
    if (!isfinite(l->bandwidth_Bps) || l->bandwidth_Bps <= 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': %s bandwidth %g B/s, expected a finite value > 0", m->name,
                 which, l->bandwidth_Bps);
    return LDT_OK;
}

ldt_status ldt_cost_model_check(const ldt_cost_model *m) {
    if (!m) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model: must not be NULL");
    if (m->nlinks < 0 || m->nlinks > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': %d links, expected 0 (link classes) to %d", m->name,
                 m->nlinks, LDT_MAX_DIMS);
    for (int i = 0; i < m->nlinks; i++) {
        char which[16];
        snprintf(which, sizeof which, "link %d", i);
        LDT_CHECK(check_link(m, &m->links[i], which));
    }
    if (m->ranks_per_node < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': ranks_per_node %d, expected >= 0 (0: one node)", m->name,
                 m->ranks_per_node);
    if (m->nlinks == 0) {
        LDT_CHECK(check_link(m, &m->node_link, "node link"));
        if (m->ranks_per_node > 0) LDT_CHECK(check_link(m, &m->network_link, "network link"));
    }
    for (int k = 0; k < LDT_KIND_COUNT; k++)
        if ((int)m->algo[k] < 0 || m->algo[k] >= LDT_ALGO_COUNT)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s algorithm %d, expected ring, tree or direct",
                     m->name, k_kind_names[k], (int)m->algo[k]);
    if (!isfinite(m->overhead_s) || m->overhead_s < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': overhead %g s, expected a finite value >= 0", m->name,
                 m->overhead_s);
    if (!isfinite(m->local_overhead_s) || m->local_overhead_s < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': local overhead %g s, expected a finite value >= 0", m->name,
                 m->local_overhead_s);
    if (!isfinite(m->local_bandwidth_Bps) || m->local_bandwidth_Bps <= 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': local bandwidth %g B/s, expected a finite value > 0",
                 m->name, m->local_bandwidth_Bps);
    for (int p = 0; p < LDT_PREC_COUNT; p++)
        if (!isfinite(m->peak_flops[p]) || m->peak_flops[p] <= 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s peak %g FLOP/s, expected a finite value > 0",
                     m->name, k_prec_names[p], m->peak_flops[p]);
    if (!isfinite(m->memory_bandwidth_Bps) || m->memory_bandwidth_Bps <= 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': memory bandwidth %g B/s, expected a finite value > 0",
                 m->name, m->memory_bandwidth_Bps);
    for (int c = 0; c < LDT_OPCLASS_COUNT; c++) {
        const ldt_eff_curve *e = &m->eff[c];
        if (e->npoints < 0 || e->npoints > LDT_EFF_MAX_POINTS)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s efficiency curve of %d points, expected 0 to %d",
                     m->name, k_class_names[c], e->npoints, LDT_EFF_MAX_POINTS);
        for (int i = 0; i < e->npoints; i++) {
            if (!isfinite(e->size[i]) || e->size[i] <= 0 || (i > 0 && e->size[i] <= e->size[i - 1]))
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "cost model '%.32s': %s efficiency point %d has size %g, expected "
                         "finite sizes > 0 in increasing order", m->name, k_class_names[c], i,
                         e->size[i]);
            if (!isfinite(e->eff[i]) || e->eff[i] <= 0 || e->eff[i] > 1)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "cost model '%.32s': %s efficiency point %d is %g, expected a value "
                         "in (0, 1]", m->name, k_class_names[c], i, e->eff[i]);
        }
    }
    for (int k = 0; k <= LDT_KIND_COUNT; k++) {
        const char *kn = k < LDT_KIND_COUNT ? k_kind_names[k] : "local";
        if (k < LDT_KIND_COUNT && (!isfinite(m->bytes_extra[k]) || m->bytes_extra[k] <= -1))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s bytes factor %g, expected a finite value > 0",
                     m->name, kn, 1 + m->bytes_extra[k]);
        if (k < LDT_KIND_COUNT &&
            (!isfinite(m->kind_overhead_s[k]) || m->overhead_s + m->kind_overhead_s[k] < 0))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s call overhead %g s, expected a finite value that "
                     "leaves the call's whole fixed cost (overhead %g s plus it) >= 0",
                     m->name, kn, m->kind_overhead_s[k], m->overhead_s);
        if (!isfinite(m->beyond_cache[k]) || m->beyond_cache[k] < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s beyond-cache factor %g, expected a finite value >= 0",
                     m->name, kn, m->beyond_cache[k]);
    }
    if (!isfinite(m->cache_bytes) || m->cache_bytes < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': cache_bytes %g, expected a finite value >= 0 (0: no knee)",
                 m->name, m->cache_bytes);
    for (int i = 0; i < LDT_LOCAL_OP_COUNT; i++)
        if (!isfinite(m->local_bytes_extra[i]) || m->local_bytes_extra[i] <= -1)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': %s bytes factor %g, expected a finite value > 0",
                     m->name, ldt_collective_name((ldt_collective)(LDT_COLL_LOCAL_CHUNK + i)),
                     1 + m->local_bytes_extra[i]);
    if (!isfinite(m->local_cache_bytes) || m->local_cache_bytes < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': local_cache_bytes %g, expected a finite value >= 0 (0: "
                 "cache_bytes)", m->name, m->local_cache_bytes);
    if (!isfinite(m->launch_s) || m->launch_s < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': launch %g s, expected a finite value >= 0 (0: the local "
                 "overhead)", m->name, m->launch_s);
    if (!isfinite(m->rendezvous_s) || m->rendezvous_s < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': rendezvous %g s, expected a finite value >= 0 (0: none)",
                 m->name, m->rendezvous_s);
    if (!isfinite(m->rendezvous_share) || m->rendezvous_share < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': rendezvous share %g, expected a finite value >= 0 (0: none)",
                 m->name, m->rendezvous_share);
    if (m->cores < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost model '%.32s': %d cores, expected >= 0 (0: a device per rank)", m->name,
                 m->cores);
    return LDT_OK;
}

/* What a profile without compute figures (version 1, the legacy presets) prices compute
 * with: the flat 50 GFLOP/s and local bandwidth the planner used before profiles had them. */
static void legacy_compute(ldt_cost_model *m) {
    for (int p = 0; p < LDT_PREC_COUNT; p++) m->peak_flops[p] = 50e9;
    m->memory_bandwidth_Bps = m->local_bandwidth_Bps;
    memset(m->eff, 0, sizeof m->eff);
    m->cores = 0;
}

static void default_algos(ldt_cost_model *m) {
    for (int k = 0; k < LDT_KIND_COUNT; k++) m->algo[k] = LDT_ALGO_RING;
    m->algo[LDT_KIND_ALL_TO_ALL] = LDT_ALGO_DIRECT;
    m->algo[LDT_KIND_SEND_RECV] = LDT_ALGO_DIRECT;
}

static ldt_status legacy_preset(const char *name, ldt_cost_model *out) {
    /* PyTorch's _collective_utils constants: 87.7 GB/s and 0.6 us a hop inside a host,
     * x0.22 bandwidth and 2.7 us once a dim spans hosts, 6.6 us per collective. Local
     * copies at a typical GPU memory bandwidth, so local ops stay cheap beside collectives. */
    const ldt_link nvlink = {0.6e-6, 87.7 * GB}, ib = {2.7e-6, 0.22 * 87.7 * GB};
    ldt_cost_model m;
    memset(&m, 0, sizeof m);
    m.overhead_s = 6.6e-6;
    m.local_bandwidth_Bps = 1000 * GB;
    m.local_overhead_s = 1e-6; /* about a kernel launch */
    if (strcmp(name, "uniform") == 0) {
        m.nlinks = 1;
        m.links[0] = nvlink;
    } else if (strcmp(name, "nvlink-ib") == 0) {
        m.nlinks = 2;
        m.links[0] = ib;
        m.links[1] = nvlink;
    } else {
        return LDT_ERR_INVALID_ARGUMENT;
    }
    default_algos(&m);
    legacy_compute(&m);
    snprintf(m.name, sizeof m.name, "%s", name);
    *out = m;
    return LDT_OK;
}

/* The shipped profiles, parsed once. */
#define MAX_SHIPPED 16
static pthread_once_t g_shipped_once = PTHREAD_ONCE_INIT;
static ldt_cost_model g_shipped[MAX_SHIPPED];
static ldt_status g_shipped_st[MAX_SHIPPED];
static char g_shipped_err[MAX_SHIPPED][256];

static void parse_shipped(void) {
    for (int i = 0; i < ldt__profile_nshipped() && i < MAX_SHIPPED; i++) {
        g_shipped_st[i] = ldt_cost_model_parse(ldt__profile_shipped_json(i), &g_shipped[i]);
        if (g_shipped_st[i] != LDT_OK) snprintf(g_shipped_err[i], sizeof g_shipped_err[i], "%s", ldt_last_error());
    }
}

static const char *const k_legacy[] = {"uniform", "nvlink-ib"};

const char *ldt_cost_model_preset_name(int i) {
    int n = ldt__profile_nshipped();
    if (i < 0) return NULL;
    if (i < n) return ldt__profile_shipped_name(i);
    i -= n;
    return i < (int)(sizeof k_legacy / sizeof k_legacy[0]) ? k_legacy[i] : NULL;
}

ldt_status ldt_cost_model_preset(const char *name, ldt_cost_model *out) {
    char known[160];
    size_t len = 0;
    if (!name || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost preset: arguments must not be NULL");
    pthread_once(&g_shipped_once, parse_shipped);
    for (int i = 0; i < ldt__profile_nshipped() && i < MAX_SHIPPED; i++)
        if (strcmp(name, ldt__profile_shipped_name(i)) == 0) {
            if (g_shipped_st[i] != LDT_OK)
                LDT_FAIL(LDT_ERR_INTERNAL, "cost preset '%s': the shipped profile does not parse: %s",
                         name, g_shipped_err[i]);
            *out = g_shipped[i];
            return LDT_OK;
        }
    if (legacy_preset(name, out) == LDT_OK) return LDT_OK;
    known[0] = '\0';
    for (int i = 0; ldt_cost_model_preset_name(i); i++) {
        const char *sep = !ldt_cost_model_preset_name(i + 1) ? " or " : i ? ", " : "";
        int w = snprintf(known + len, sizeof known - len, "%s%s", sep, ldt_cost_model_preset_name(i));
        if (w > 0 && (size_t)w < sizeof known - len) len += (size_t)w;
    }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost preset: unknown preset '%s', expected %s", name, known);
}

ldt_link ldt_cost_model_link(const ldt_cost_model *m, int mesh_ndim, int dim) {
    /* Inner-aligned: the last mesh dim takes the last link. */
    int i = m->nlinks - mesh_ndim + dim;
    if (m->nlinks == 0) return m->node_link;
    if (i < 0) i = 0;
    if (i >= m->nlinks) i = m->nlinks - 1;
    return m->links[i];
}

ldt_link ldt_cost_model_mesh_link(const ldt_cost_model *m, const ldt_mesh *mesh, int dim) {
    int nd = ldt_mesh_ndim(mesh);
    int64_t inner = 1;
    if (m->nlinks > 0) return ldt_cost_model_link(m, nd, dim);
    if (m->ranks_per_node <= 0 || ldt_mesh_nranks(mesh) <= m->ranks_per_node) return m->node_link;
    /* ranks packed in mesh order: dim's groups span an aligned block of prod(sizes[dim..]) */
    for (int d = dim < 0 ? 0 : dim; d < nd; d++) inner *= ldt_mesh_dim_size(mesh, d);
    return inner <= m->ranks_per_node && m->ranks_per_node % inner == 0 ? m->node_link
                                                                         : m->network_link;
}

ldt_status ldt_cost_model_expand(const ldt_cost_model *m, int mesh_ndim, ldt_cost_model *out) {
    ldt_cost_model e;
    LDT_CHECK(ldt_cost_model_check(m));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model expand: out must not be NULL");
    if (mesh_ndim < 1 || mesh_ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model expand: mesh has %d dims, expected 1 to %d",
                 mesh_ndim, LDT_MAX_DIMS);
    e = *m;
    e.nlinks = mesh_ndim;
    for (int d = 0; d < mesh_ndim; d++) e.links[d] = ldt_cost_model_link(m, mesh_ndim, d);
    *out = e;
    return LDT_OK;
}

ldt_status ldt_cost_model_for_mesh(const ldt_cost_model *m, const ldt_mesh *mesh,
                                   ldt_cost_model *out) {
    ldt_cost_model e;
    int nd;
    LDT_CHECK(ldt_cost_model_check(m));
    if (!mesh || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model for mesh: arguments must not be NULL");
    nd = ldt_mesh_ndim(mesh);
    e = *m;
    e.nlinks = nd;
    for (int d = 0; d < nd; d++) e.links[d] = ldt_cost_model_mesh_link(m, mesh, d);
    *out = e;
    return LDT_OK;
}

int ldt_cost_model_is_uniform(const ldt_cost_model *m, int mesh_ndim) {
    ldt_link a = ldt_cost_model_link(m, mesh_ndim, 0);
    if (m->nlinks == 0)
        return m->ranks_per_node <= 0 ||
               (m->node_link.latency_s == m->network_link.latency_s &&
                m->node_link.bandwidth_Bps == m->network_link.bandwidth_Bps);
    for (int d = 1; d < mesh_ndim; d++) {
        ldt_link b = ldt_cost_model_link(m, mesh_ndim, d);
        if (a.latency_s != b.latency_s || a.bandwidth_Bps != b.bandwidth_Bps) return 0;
    }
    return 1;
}

int ldt__cost_mesh_uniform(const ldt_cost_model *m, const ldt_mesh *mesh) {
    ldt_link a = ldt_cost_model_mesh_link(m, mesh, 0);
    for (int d = 1; d < ldt_mesh_ndim(mesh); d++) {
        ldt_link b = ldt_cost_model_mesh_link(m, mesh, d);
        if (a.latency_s != b.latency_s || a.bandwidth_Bps != b.bandwidth_Bps) return 0;
    }
    return 1;
}

static double hops(ldt_coll_algo a, ldt_coll_kind k, int64_t n) {
    double h = (double)(n - 1);
    if (a == LDT_ALGO_TREE) h = ceil(log2((double)n));
    return k == LDT_KIND_ALL_REDUCE ? 2 * h : h;
}

double ldt__coll_hops(const ldt_cost_model *m, ldt_collective c, int64_t n) {
    ldt_coll_kind k = c == LDT_COLL_ALL_REDUCE       ? LDT_KIND_ALL_REDUCE
                      : c == LDT_COLL_REDUCE_SCATTER ? LDT_KIND_REDUCE_SCATTER
                      : c == LDT_COLL_ALL_GATHER     ? LDT_KIND_ALL_GATHER
                                                     : LDT_KIND_ALL_TO_ALL;
    return n <= 1 ? 0 : hops(m->algo[k], k, n);
}

double ldt__kind_hops(const ldt_cost_model *m, ldt_coll_kind k, int64_t n) {
    if (n <= 1 || (int)k < 0 || k >= LDT_KIND_COUNT) return 0;
    return k == LDT_KIND_SEND_RECV ? (double)(n - 1) : hops(m->algo[k], k, n);
}

double ldt__kind_knee(const ldt_cost_model *m, int k) {
    return k == LDT_KIND_BROADCAST && m->local_cache_bytes > 0 ? m->local_cache_bytes : m->cache_bytes;
}

double ldt__eff_bytes(const ldt_cost_model *m, int k, double b) {
    double C = ldt__kind_knee(m, k);
    double over = C > 0 && b > C ? b - C : 0;
    double e = b + m->beyond_cache[k] * over;
    return k < LDT_KIND_COUNT ? (1 + m->bytes_extra[k]) * e : e;
}

double ldt__local_seconds(const ldt_cost_model *m, ldt_collective c, double b) {
    double C = m->local_cache_bytes > 0 ? m->local_cache_bytes : m->cache_bytes;
    double over = C > 0 && b > C ? b - C : 0;
    int i = (int)c - (int)LDT_COLL_LOCAL_CHUNK;
    double f = i >= 0 && i < LDT_LOCAL_OP_COUNT ? 1 + m->local_bytes_extra[i] : 1;
    return m->local_overhead_s + (f * b + m->beyond_cache[LDT_KIND_COUNT] * over) / m->local_bandwidth_Bps;
}

double ldt_cost_kind_seconds(const ldt_cost_model *m, ldt_link l, int64_t n, ldt_coll_kind k,
                             int64_t bytes) {
    double b;
    if (n <= 1 || (int)k < 0 || k >= LDT_KIND_COUNT) return 0;
    b = ldt__eff_bytes(m, k, (double)bytes);
    /* send_recv: one message to each peer, whatever the algorithm */
    return m->overhead_s + m->kind_overhead_s[k] + ldt__kind_hops(m, k, n) * l.latency_s + b / l.bandwidth_Bps;
}

double ldt_cost_seconds(const ldt_cost_model *m, const ldt_mesh *mesh, int ndims,
                        const int *dims, ldt_collective c, int64_t bytes, int peers) {
    int mnd = ldt_mesh_ndim(mesh);
    int64_t n = 1;
    ldt_link slow = {0, INFINITY};
    ldt_coll_kind k;
    if (c == LDT_COLL_LOCAL_CHUNK || c == LDT_COLL_LOCAL_PARTIAL || c == LDT_COLL_LOCAL_PAD)
        return ldt__local_seconds(m, c, (double)bytes);
    if (c == LDT_COLL_SEND_RECV) {
        /* Across meshes the traffic may cross any link: price it on the slowest. */
        for (int d = 0; d < (mnd > 0 ? mnd : 1); d++) {
            ldt_link l = mnd > 0 ? ldt_cost_model_mesh_link(m, mesh, d) : ldt_cost_model_link(m, 1, 0);
            if (l.latency_s > slow.latency_s) slow.latency_s = l.latency_s;
            if (l.bandwidth_Bps < slow.bandwidth_Bps) slow.bandwidth_Bps = l.bandwidth_Bps;
        }
        if (peers == 0 && bytes == 0) return 0;
        return m->overhead_s + m->kind_overhead_s[LDT_KIND_SEND_RECV] + peers * slow.latency_s +
               ldt__eff_bytes(m, LDT_KIND_SEND_RECV, (double)bytes) / slow.bandwidth_Bps;
    }
    /* A flattened group is one group over all its ranks on its slowest link. */
    for (int i = 0; i < ndims; i++) {
        ldt_link l = ldt_cost_model_mesh_link(m, mesh, dims[i]);
        n *= ldt_mesh_dim_size(mesh, dims[i]);
        if (l.latency_s > slow.latency_s) slow.latency_s = l.latency_s;
        if (l.bandwidth_Bps < slow.bandwidth_Bps) slow.bandwidth_Bps = l.bandwidth_Bps;
    }
    if (n <= 1) return 0;
    switch (c) {
    case LDT_COLL_ALL_REDUCE: k = LDT_KIND_ALL_REDUCE; break;
    case LDT_COLL_REDUCE_SCATTER: k = LDT_KIND_REDUCE_SCATTER; break;
    case LDT_COLL_ALL_GATHER: k = LDT_KIND_ALL_GATHER; break;
    default: k = LDT_KIND_ALL_TO_ALL; break;
    }
    /* `bytes` is already the volume of the busiest rank. */
    return ldt_cost_kind_seconds(m, slow, n, k, bytes);
}

/* ---- compute: the roofline ------------------------------------------------------------- */

double ldt_cost_efficiency(const ldt_cost_model *m, ldt_op_class c, double size) {
    const ldt_eff_curve *e;
    double t;
    if (!m || (int)c < 0 || c >= LDT_OPCLASS_COUNT) return 1;
    e = &m->eff[c];
    if (c == LDT_OPCLASS_TRANSCENDENTAL && e->npoints <= 0) e = &m->eff[LDT_OPCLASS_ELEMENTWISE];
    if (e->npoints <= 0) return 1;
    if (!(size > e->size[0])) return e->eff[0];
    for (int i = 1; i < e->npoints; i++)
        if (size < e->size[i]) {
            t = (log(size) - log(e->size[i - 1])) / (log(e->size[i]) - log(e->size[i - 1]));
            return e->eff[i - 1] + t * (e->eff[i] - e->eff[i - 1]);
        }
    return e->eff[e->npoints - 1];
}

double ldt_cost_op_seconds(const ldt_cost_model *m, ldt_op_class c, int dt, double flops,
                           double bytes, int nranks) {
    ldt_precision p = dt == LDT_F64 ? LDT_PREC_F64
                      : (dt == LDT_BF16 || dt == LDT_F16) ? LDT_PREC_BF16 : LDT_PREC_F32;
    double eff = ldt_cost_efficiency(m, c, c == LDT_OPCLASS_MATMUL ? flops : bytes);
    double tf = flops / (m->peak_flops[p] * eff), tb = bytes / (m->memory_bandwidth_Bps * eff);
    double slow = m->cores > 0 && nranks > m->cores ? (double)nranks / m->cores : 1;
    return slow * (tf > tb ? tf : tb) + (m->launch_s > 0 ? m->launch_s : m->local_overhead_s);
}

double ldt__rendezvous_seconds(const ldt_cost_model *m, int nranks, double compute) {
    if (m->cores <= 0 || nranks <= m->cores) return 0;
    return (m->rendezvous_s + m->rendezvous_share * compute) * ((double)nranks / m->cores - 1);
}

/* ---- JSON profiles ------------------------------------------------------------------------ */

static ldt_status num_field(const cJSON *o, const char *key, const char *where, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: %s needs a number \"%s\"", where, key);
    *out = v->valuedouble;
    return LDT_OK;
}

static ldt_status link_field(const cJSON *o, const char *key, ldt_link *out) {
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, key);
    double gbps = 0;
    if (!cJSON_IsObject(l))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: \"%s\" must be a {\"latency_s\",\"bandwidth_gbps\"} "
                 "object", key);
    LDT_CHECK(num_field(l, "latency_s", key, &out->latency_s));
    LDT_CHECK(num_field(l, "bandwidth_gbps", key, &gbps));
    out->bandwidth_Bps = gbps * GB;
    return LDT_OK;
}

static ldt_status parse_algos(const cJSON *root, ldt_cost_model *m) {
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(root, "algorithms"), *v;
    default_algos(m);
    if (!al) return LDT_OK;
    if (!cJSON_IsObject(al))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: \"algorithms\" must be an object of kind: algorithm");
    cJSON_ArrayForEach(v, al) {
        int k = 0, a = 0;
        while (k < LDT_KIND_COUNT && strcmp(v->string, k_kind_names[k]) != 0) k++;
        if (k == LDT_KIND_COUNT)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: unknown collective kind \"%s\" in \"algorithms\", "
                     "expected all_reduce, reduce_scatter, all_gather, all_to_all, send_recv or "
                     "broadcast", v->string);
        while (a < LDT_ALGO_COUNT && !(cJSON_IsString(v) && strcmp(v->valuestring, k_algo_names[a]) == 0)) a++;
        if (a == LDT_ALGO_COUNT)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: algorithm of \"%s\" must be \"ring\", \"tree\" "
                     "or \"direct\"", v->string);
        m->algo[k] = (ldt_coll_algo)a;
    }
    return LDT_OK;
}

/* Index of kind name `s` (LDT_KIND_COUNT for "local" when allow_local), -1 if unknown. */
static int kind_index(const char *s, int allow_local) {
    for (int k = 0; k < LDT_KIND_COUNT; k++)
        if (strcmp(s, k_kind_names[k]) == 0) return k;
    return allow_local && strcmp(s, "local") == 0 ? LDT_KIND_COUNT : -1;
}

/* The object `field` of root, {key: number} over names[0..count) (absent: nothing): each
 * finite number into v[i], and given[i] set; an unknown name (a `what`) is refused, the
 * message listing `expected`. */
static ldt_status named_numbers(const cJSON *root, const char *field, const char *unit,
                                const char *const *names, int count, const char *key,
                                const char *what, const char *expected, double *v, int *given) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, field), *x;
    for (int k = 0; k < count; k++) given[k] = 0;
    if (o && !cJSON_IsObject(o))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: \"%s\" must be an object of %s: %s", field, key, unit);
    cJSON_ArrayForEach(x, o) {
        int k = 0;
        while (k < count && strcmp(x->string, names[k]) != 0) k++;
        if (k == count)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: unknown %s \"%s\" in \"%s\", expected %s", what,
                     x->string, field, expected);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: %s.%s must be a number (%s)", field, x->string, unit);
        v[k] = x->valuedouble;
        given[k] = 1;
    }
    return LDT_OK;
}

/* {kind: number} over the collective kinds (named_numbers). */
static ldt_status kind_numbers(const cJSON *root, const char *field, const char *unit, double *v,
                               int *given) {
    return named_numbers(root, field, unit, k_kind_names, LDT_KIND_COUNT, "kind", "collective kind",
                         "all_reduce, reduce_scatter, all_gather, all_to_all, send_recv or broadcast",
                         v, given);
}

static const char *const k_local_names[LDT_LOCAL_OP_COUNT] = {"local_chunk", "local_partial", "local_pad"};

/* "bytes_factor": {kind: factor > 0}, "kind_overhead_s": {kind: seconds},
 * "cache": {"bytes": C, "beyond": {kind|"local": y}}. */
static ldt_status parse_bytes_terms(const cJSON *root, ldt_cost_model *m) {
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(root, "cache"), *bc, *v;
    double f[LDT_KIND_COUNT], o[LDT_KIND_COUNT];
    int gf[LDT_KIND_COUNT], go[LDT_KIND_COUNT];
    LDT_CHECK(kind_numbers(root, "bytes_factor", "factor", f, gf));
    LDT_CHECK(kind_numbers(root, "kind_overhead_s", "seconds", o, go));
    for (int k = 0; k < LDT_KIND_COUNT; k++) {
        if (gf[k] && !(f[k] > 0))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: bytes_factor.%s must be a number > 0", k_kind_names[k]);
        if (gf[k]) m->bytes_extra[k] = f[k] - 1;
        if (go[k]) m->kind_overhead_s[k] = o[k]; /* overhead_s + it >= 0: ldt_cost_model_check */
    }
    {
        double lf[LDT_LOCAL_OP_COUNT];
        int gl[LDT_LOCAL_OP_COUNT];
        LDT_CHECK(named_numbers(root, "local_bytes_factor", "factor", k_local_names, LDT_LOCAL_OP_COUNT,
                                "local op", "local op", "local_chunk, local_partial or local_pad", lf, gl));
        for (int i = 0; i < LDT_LOCAL_OP_COUNT; i++) {
            if (gl[i] && !(lf[i] > 0))
                LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: local_bytes_factor.%s must be a number > 0",
                         k_local_names[i]);
            if (gl[i]) m->local_bytes_extra[i] = lf[i] - 1;
        }
    }
    if (!ca) return LDT_OK;
    if (!cJSON_IsObject(ca))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: \"cache\" must be an object {\"bytes\":.., \"beyond\":{..}}");
    LDT_CHECK(num_field(ca, "bytes", "cache", &m->cache_bytes));
    if (!(m->cache_bytes >= 0))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: cache.bytes is %g, expected >= 0", m->cache_bytes);
    if (cJSON_GetObjectItemCaseSensitive(ca, "local_bytes")) {
        LDT_CHECK(num_field(ca, "local_bytes", "cache", &m->local_cache_bytes));
        if (!(m->local_cache_bytes >= 0))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: cache.local_bytes is %g, expected >= 0 (0: "
                     "cache.bytes)", m->local_cache_bytes);
    }
    bc = cJSON_GetObjectItemCaseSensitive(ca, "beyond");
    if (bc && !cJSON_IsObject(bc))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: cache.beyond must be an object of kind: factor");
    cJSON_ArrayForEach(v, bc) {
        int k = kind_index(v->string, 1);
        if (k < 0)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: unknown kind \"%s\" in cache.beyond, expected "
                     "a collective kind or \"local\"", v->string);
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !isfinite(v->valuedouble))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: cache.beyond.%s must be a number >= 0", v->string);
        m->beyond_cache[k] = v->valuedouble;
    }
    return LDT_OK;
}

static ldt_status parse_compute(const cJSON *root, ldt_cost_model *m) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "compute"), *peak, *eff, *v;
    double x = 0;
    if (!c) {
        legacy_compute(m);
        return LDT_OK;
    }
    if (!cJSON_IsObject(c)) LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: \"compute\" must be an object");
    peak = cJSON_GetObjectItemCaseSensitive(c, "peak_tflops");
    if (!cJSON_IsObject(peak))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute needs \"peak_tflops\": "
                 "{\"f32\":..,\"bf16\":..,\"f64\":..}");
    for (int p = 0; p < LDT_PREC_COUNT; p++) {
        LDT_CHECK(num_field(peak, k_prec_names[p], "compute.peak_tflops", &x));
        m->peak_flops[p] = x * 1e12;
    }
    LDT_CHECK(num_field(c, "memory_bandwidth_gbps", "compute", &x));
    m->memory_bandwidth_Bps = x * GB;
    if (cJSON_GetObjectItemCaseSensitive(c, "cores")) {
        LDT_CHECK(num_field(c, "cores", "compute", &x));
        if (x != floor(x) || x < 0 || x > 1e6)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.cores is %g, expected a whole number >= 0", x);
        m->cores = (int)x;
    }
    if (cJSON_GetObjectItemCaseSensitive(c, "launch_s")) {
        LDT_CHECK(num_field(c, "launch_s", "compute", &m->launch_s));
        if (!(m->launch_s >= 0))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.launch_s is %g, expected >= 0 "
                     "(0: the local overhead)", m->launch_s);
    }
    if (cJSON_GetObjectItemCaseSensitive(c, "rendezvous_s")) {
        LDT_CHECK(num_field(c, "rendezvous_s", "compute", &m->rendezvous_s));
        if (!(m->rendezvous_s >= 0) || !isfinite(m->rendezvous_s))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.rendezvous_s is %g, expected a "
                     "finite value >= 0 (0: none)", m->rendezvous_s);
    }
    if (cJSON_GetObjectItemCaseSensitive(c, "rendezvous_share")) {
        LDT_CHECK(num_field(c, "rendezvous_share", "compute", &m->rendezvous_share));
        if (!(m->rendezvous_share >= 0) || !isfinite(m->rendezvous_share))
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.rendezvous_share is %g, expected a "
                     "finite value >= 0 (0: none)", m->rendezvous_share);
    }
    eff = cJSON_GetObjectItemCaseSensitive(c, "efficiency");
    if (!eff) return LDT_OK;
    if (!cJSON_IsObject(eff))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.efficiency must be an object of class: "
                 "[[size, efficiency], ...]");
    cJSON_ArrayForEach(v, eff) {
        int k = 0;
        const cJSON *pt;
        ldt_eff_curve *e;
        while (k < LDT_OPCLASS_COUNT && strcmp(v->string, k_class_names[k]) != 0) k++;
        if (k == LDT_OPCLASS_COUNT)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: unknown op class \"%s\" in compute.efficiency, "
                     "expected matmul, elementwise, norm, softmax, reduce or transcendental", v->string);
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > LDT_EFF_MAX_POINTS)
            LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.efficiency.%s must be an array of 0 to "
                     "%d [size, efficiency] pairs", v->string, LDT_EFF_MAX_POINTS);
        e = &m->eff[k];
        e->npoints = 0;
        cJSON_ArrayForEach(pt, v) {
            const cJSON *sz = cJSON_GetArrayItem(pt, 0), *ef = cJSON_GetArrayItem(pt, 1);
            if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 || !cJSON_IsNumber(sz) ||
                !cJSON_IsNumber(ef))
                LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: compute.efficiency.%s[%d] must be a "
                         "[size, efficiency] pair of numbers", v->string, e->npoints);
            e->size[e->npoints] = sz->valuedouble;
            e->eff[e->npoints++] = ef->valuedouble;
        }
    }
    return LDT_OK;
}

ldt_status ldt_cost_model_parse(const char *json, ldt_cost_model *out) {
    ldt_status st = LDT_OK;
    ldt_cost_model m;
    cJSON *root = NULL;
    const cJSON *fmt, *links, *l, *name, *ver, *rpn;
    double gbps = 0;
    if (!json || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: arguments must not be NULL");
    memset(&m, 0, sizeof m);
    root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "cost profile: not a JSON object");
    fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "lazydt-cost-profile") != 0)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                      "cost profile: \"format\" must be \"lazydt-cost-profile\"");
    ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (ver && !(cJSON_IsNumber(ver) && (ver->valuedouble == 1 || ver->valuedouble == 2)))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "cost profile: \"version\" must be 1 or 2");
    name = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(m.name, sizeof m.name, "%s", cJSON_IsString(name) ? name->valuestring : "profile");
    LDT_CHECK_GOTO(num_field(root, "overhead_s", "the top level", &m.overhead_s));
    LDT_CHECK_GOTO(num_field(root, "local_bandwidth_gbps", "the top level", &gbps));
    m.local_bandwidth_Bps = gbps * GB;
    if (cJSON_GetObjectItemCaseSensitive(root, "local_overhead_s"))
        LDT_CHECK_GOTO(num_field(root, "local_overhead_s", "the top level", &m.local_overhead_s));
    links = cJSON_GetObjectItemCaseSensitive(root, "links");
    if (links) {
        if (!cJSON_IsArray(links) || cJSON_GetArraySize(links) < 1 ||
            cJSON_GetArraySize(links) > LDT_MAX_DIMS)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "cost profile: \"links\" must be an array of 1 to %d "
                          "{\"latency_s\",\"bandwidth_gbps\"} objects", LDT_MAX_DIMS);
        cJSON_ArrayForEach(l, links) {
            char where[32];
            snprintf(where, sizeof where, "links[%d]", m.nlinks);
            LDT_CHECK_GOTO(num_field(l, "latency_s", where, &m.links[m.nlinks].latency_s));
            LDT_CHECK_GOTO(num_field(l, "bandwidth_gbps", where, &gbps));
            m.links[m.nlinks++].bandwidth_Bps = gbps * GB;
        }
    } else {
        if (!cJSON_GetObjectItemCaseSensitive(root, "node_link"))
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "cost profile: needs \"links\" (one per mesh dim) or "
                          "\"node_link\" (link classes)");
        LDT_CHECK_GOTO(link_field(root, "node_link", &m.node_link));
        rpn = cJSON_GetObjectItemCaseSensitive(root, "ranks_per_node");
        if (rpn) {
            if (!cJSON_IsNumber(rpn) || rpn->valuedouble != floor(rpn->valuedouble) ||
                rpn->valuedouble < 0 || rpn->valuedouble > 1e9)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "cost profile: \"ranks_per_node\" must be a whole "
                              "number >= 0 (0: one node)");
            m.ranks_per_node = (int)rpn->valuedouble;
        }
        if (m.ranks_per_node > 0) LDT_CHECK_GOTO(link_field(root, "network_link", &m.network_link));
    }
    LDT_CHECK_GOTO(parse_algos(root, &m));
    LDT_CHECK_GOTO(parse_bytes_terms(root, &m));
    LDT_CHECK_GOTO(parse_compute(root, &m));
    LDT_CHECK_GOTO(ldt_cost_model_check(&m));
    *out = m;
fail:
    cJSON_Delete(root);
    return st;
}

ldt_status ldt_cost_model_load(const char *path, ldt_cost_model *out) {
    FILE *f;
    char *text;
    long n;
    ldt_status st;
    if (!path || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: arguments must not be NULL");
    f = fopen(path, "rb");
    if (!f) LDT_FAIL(LDT_ERR_SYSTEM, "cost profile: cannot open '%s'", path);
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        n > (1 << 20)) {
        fclose(f);
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: '%s' is not a readable file under 1 MiB", path);
    }
    text = malloc((size_t)n + 1);
    if (!text) {
        fclose(f);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cost profile: out of memory");
    }
    if (fread(text, 1, (size_t)n, f) != (size_t)n) {
        free(text);
        fclose(f);
        LDT_FAIL(LDT_ERR_SYSTEM, "cost profile: reading '%s' failed", path);
    }
    fclose(f);
    text[n] = '\0';
    st = ldt_cost_model_parse(text, out);
    free(text);
    if (st != LDT_OK) {
        ldt__error_prefix(st, "%s", path);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    return LDT_OK;
}

static cJSON *link_json(const ldt_link *l) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "latency_s", l->latency_s);
    cJSON_AddNumberToObject(o, "bandwidth_gbps", l->bandwidth_Bps / GB);
    return o;
}

/* The profile's JSON text (cJSON_free it), or NULL when out of memory. cJSON prints numbers
 * with enough digits to read the same double back. */
static char *profile_json(const ldt_cost_model *m) {
    cJSON *root = cJSON_CreateObject(), *links, *al, *c, *peak, *eff;
    char *text = NULL;
    int ok = 1;
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", "lazydt-cost-profile");
    cJSON_AddNumberToObject(root, "version", 2);
    cJSON_AddStringToObject(root, "name", m->name);
    cJSON_AddNumberToObject(root, "overhead_s", m->overhead_s);
    cJSON_AddNumberToObject(root, "local_bandwidth_gbps", m->local_bandwidth_Bps / GB);
    cJSON_AddNumberToObject(root, "local_overhead_s", m->local_overhead_s);
    if (m->nlinks > 0) {
        links = cJSON_AddArrayToObject(root, "links");
        for (int i = 0; links && i < m->nlinks; i++) {
            cJSON *l = link_json(&m->links[i]);
            if (!l) break;
            cJSON_AddItemToArray(links, l);
        }
        ok &= links && cJSON_GetArraySize(links) == m->nlinks;
    } else {
        cJSON *n = link_json(&m->node_link);
        cJSON_AddNumberToObject(root, "ranks_per_node", m->ranks_per_node);
        ok &= n && cJSON_AddItemToObject(root, "node_link", n);
        if (m->ranks_per_node > 0) {
            cJSON *w = link_json(&m->network_link);
            ok &= w && cJSON_AddItemToObject(root, "network_link", w);
        }
    }
    al = cJSON_AddObjectToObject(root, "algorithms");
    for (int k = 0; al && k < LDT_KIND_COUNT; k++)
        ok &= cJSON_AddStringToObject(al, k_kind_names[k], k_algo_names[m->algo[k]]) != NULL;
    { /* written only where a profile has them, so profiles without stay as they were */
        int any = 0, anyc = 0, anyo = 0, anyl = 0;
        for (int k = 0; k < LDT_KIND_COUNT; k++) any |= m->bytes_extra[k] != 0;
        for (int i = 0; i < LDT_LOCAL_OP_COUNT; i++) anyl |= m->local_bytes_extra[i] != 0;
        for (int k = 0; k < LDT_KIND_COUNT; k++) anyo |= m->kind_overhead_s[k] != 0;
        for (int k = 0; k <= LDT_KIND_COUNT; k++) anyc |= m->beyond_cache[k] != 0;
        if (any) {
            cJSON *bf = cJSON_AddObjectToObject(root, "bytes_factor");
            for (int k = 0; bf && k < LDT_KIND_COUNT; k++)
                ok &= cJSON_AddNumberToObject(bf, k_kind_names[k], 1 + m->bytes_extra[k]) != NULL;
            ok &= bf != NULL;
        }
        if (anyo) {
            cJSON *ko = cJSON_AddObjectToObject(root, "kind_overhead_s");
            for (int k = 0; ko && k < LDT_KIND_COUNT; k++)
                ok &= cJSON_AddNumberToObject(ko, k_kind_names[k], m->kind_overhead_s[k]) != NULL;
            ok &= ko != NULL;
        }
        if (anyl) {
            cJSON *lf = cJSON_AddObjectToObject(root, "local_bytes_factor");
            for (int i = 0; lf && i < LDT_LOCAL_OP_COUNT; i++)
                ok &= cJSON_AddNumberToObject(lf, k_local_names[i], 1 + m->local_bytes_extra[i]) != NULL;
            ok &= lf != NULL;
        }
        if (m->cache_bytes > 0 || m->local_cache_bytes > 0 || anyc) {
            cJSON *ca = cJSON_AddObjectToObject(root, "cache"), *bc;
            ok &= ca && cJSON_AddNumberToObject(ca, "bytes", m->cache_bytes) != NULL;
            if (m->local_cache_bytes > 0)
                ok &= ca && cJSON_AddNumberToObject(ca, "local_bytes", m->local_cache_bytes) != NULL;
            bc = ca ? cJSON_AddObjectToObject(ca, "beyond") : NULL;
            for (int k = 0; bc && k <= LDT_KIND_COUNT; k++)
                ok &= cJSON_AddNumberToObject(bc, k < LDT_KIND_COUNT ? k_kind_names[k] : "local",
                                              m->beyond_cache[k]) != NULL;
            ok &= bc != NULL;
        }
    }
    c = cJSON_AddObjectToObject(root, "compute");
    peak = c ? cJSON_AddObjectToObject(c, "peak_tflops") : NULL;
    for (int p = 0; peak && p < LDT_PREC_COUNT; p++)
        ok &= cJSON_AddNumberToObject(peak, k_prec_names[p], m->peak_flops[p] / 1e12) != NULL;
    if (c) {
        cJSON_AddNumberToObject(c, "memory_bandwidth_gbps", m->memory_bandwidth_Bps / GB);
        cJSON_AddNumberToObject(c, "cores", m->cores);
        if (m->launch_s > 0) cJSON_AddNumberToObject(c, "launch_s", m->launch_s);
        if (m->rendezvous_s > 0) cJSON_AddNumberToObject(c, "rendezvous_s", m->rendezvous_s);
        if (m->rendezvous_share > 0) cJSON_AddNumberToObject(c, "rendezvous_share", m->rendezvous_share);
    }
    eff = c ? cJSON_AddObjectToObject(c, "efficiency") : NULL;
    for (int k = 0; eff && k < LDT_OPCLASS_COUNT; k++) {
        cJSON *arr;
        if (k == LDT_OPCLASS_TRANSCENDENTAL && m->eff[k].npoints == 0) continue; /* elementwise's */
        arr = cJSON_AddArrayToObject(eff, k_class_names[k]);
        for (int i = 0; arr && i < m->eff[k].npoints; i++) {
            double pair[2] = {m->eff[k].size[i], m->eff[k].eff[i]};
            cJSON *pt = cJSON_CreateDoubleArray(pair, 2);
            ok &= pt && cJSON_AddItemToArray(arr, pt);
        }
        ok &= arr != NULL;
    }
    ok &= al && peak && eff;
    if (ok) text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

int ldt_cost_model_format(const ldt_cost_model *m, char *buf, size_t cap) {
    char *text;
    int n;
    if (!m || ldt_cost_model_check(m) != LDT_OK || !(text = profile_json(m))) return -1;
    n = snprintf(buf, cap, "%s", text);
    cJSON_free(text);
    return n;
}

ldt_status ldt_cost_model_save(const ldt_cost_model *m, const char *path) {
    ldt_status st = LDT_OK;
    char *text = NULL;
    FILE *f = NULL;
    LDT_CHECK(ldt_cost_model_check(m));
    if (!path) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: path must not be NULL");
    if (!(text = profile_json(m))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cost profile: out of memory");
    f = fopen(path, "wb");
    if (!f) LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: cannot create '%s'", path);
    if (fputs(text, f) < 0 || fputc('\n', f) == EOF)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: writing '%s' failed", path);
fail:
    if (f && fclose(f) != 0 && st == LDT_OK)
        st = ldt__trace(ldt__error(LDT_ERR_SYSTEM, "cost profile: closing '%s' failed", path),
                        __FILE__, __LINE__);
    cJSON_free(text);
    return st;
}

ldt_status ldt_cost_model_write(const ldt_cost_model *m, FILE *f) {
    ldt_status st = LDT_OK;
    char *text;
    LDT_CHECK(ldt_cost_model_check(m));
    if (!f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: stream must not be NULL");
    if (!(text = profile_json(m))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cost profile: out of memory");
    if (fputs(text, f) < 0 || fputc('\n', f) == EOF)
        st = ldt__error(LDT_ERR_SYSTEM, "cost profile: writing the profile failed");
    cJSON_free(text);
    return st;
}
