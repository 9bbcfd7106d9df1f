/* The alpha-beta cost model: presets, JSON profiles (read and written), the ring formulas. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/error.h"
#include "ldt/planner.h"
#include "planner/cost_fit.h"

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

double ldt__coll_hops(ldt_collective c, int64_t n) {
    return (c == LDT_COLL_ALL_REDUCE ? 2.0 : 1.0) * (double)(n - 1);
}

ldt_status ldt_cost_model_check(const ldt_cost_model *m) {
    if (!m) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model: must not be NULL");
    if (m->nlinks < 1 || m->nlinks > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost model '%.32s': %d links, expected 1 to %d",
                 m->name, m->nlinks, LDT_MAX_DIMS);
    for (int i = 0; i < m->nlinks; i++) {
        const ldt_link *l = &m->links[i];
        if (!isfinite(l->latency_s) || l->latency_s < 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': link %d latency %g s, expected a finite value >= 0",
                     m->name, i, l->latency_s);
        if (!isfinite(l->bandwidth_Bps) || l->bandwidth_Bps <= 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "cost model '%.32s': link %d bandwidth %g B/s, expected a finite value > 0",
                     m->name, i, l->bandwidth_Bps);
    }
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
    return LDT_OK;
}

ldt_status ldt_cost_model_preset(const char *name, ldt_cost_model *out) {
    /* PyTorch's _collective_utils constants: 87.7 GB/s and 0.6 us a hop inside a host,
     * x0.22 bandwidth and 2.7 us once a dim spans hosts, 6.6 us per collective. Local
     * copies at a typical GPU memory bandwidth, so local ops stay cheap beside collectives. */
    const ldt_link nvlink = {0.6e-6, 87.7 * GB}, ib = {2.7e-6, 0.22 * 87.7 * GB};
    ldt_cost_model m;
    if (!name || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost preset: arguments must not be NULL");
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
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "cost preset: unknown preset '%s', expected uniform or nvlink-ib", name);
    }
    snprintf(m.name, sizeof m.name, "%s", name);
    *out = m;
    return LDT_OK;
}

ldt_link ldt_cost_model_link(const ldt_cost_model *m, int mesh_ndim, int dim) {
    /* Inner-aligned: the last mesh dim takes the last link. */
    int i = m->nlinks - mesh_ndim + dim;
    if (i < 0) i = 0;
    if (i >= m->nlinks) i = m->nlinks - 1;
    return m->links[i];
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

int ldt_cost_model_is_uniform(const ldt_cost_model *m, int mesh_ndim) {
    ldt_link a = ldt_cost_model_link(m, mesh_ndim, 0);
    for (int d = 1; d < mesh_ndim; d++) {
        ldt_link b = ldt_cost_model_link(m, mesh_ndim, d);
        if (a.latency_s != b.latency_s || a.bandwidth_Bps != b.bandwidth_Bps) return 0;
    }
    return 1;
}

double ldt_cost_seconds(const ldt_cost_model *m, const ldt_mesh *mesh, int ndims,
                        const int *dims, ldt_collective c, int64_t bytes, int peers) {
    int mnd = ldt_mesh_ndim(mesh);
    int64_t n = 1;
    double alpha = 0, beta = INFINITY;
    if (c == LDT_COLL_LOCAL_CHUNK || c == LDT_COLL_LOCAL_PARTIAL || c == LDT_COLL_LOCAL_PAD)
        return m->local_overhead_s + (double)bytes / m->local_bandwidth_Bps;
    if (c == LDT_COLL_SEND_RECV) {
        /* Across meshes the traffic may cross any link: price it on the slowest. */
        for (int d = 0; d < (mnd > 0 ? mnd : 1); d++) {
            ldt_link l = ldt_cost_model_link(m, mnd > 0 ? mnd : 1, d);
            if (l.latency_s > alpha) alpha = l.latency_s;
            if (l.bandwidth_Bps < beta) beta = l.bandwidth_Bps;
        }
        if (peers == 0 && bytes == 0) return 0;
        return m->overhead_s + peers * alpha + (double)bytes / beta;
    }
    /* A flattened group is one ring over all its ranks on its slowest link. */
    for (int i = 0; i < ndims; i++) {
        ldt_link l = ldt_cost_model_link(m, mnd, dims[i]);
        n *= ldt_mesh_dim_size(mesh, dims[i]);
        if (l.latency_s > alpha) alpha = l.latency_s;
        if (l.bandwidth_Bps < beta) beta = l.bandwidth_Bps;
    }
    if (n <= 1) return 0;
    /* Ring: all_reduce is a reduce_scatter then an all_gather, 2(n-1) hops; the others
     * take n-1 hops. `bytes` is already the ring volume of the busiest rank. */
    return m->overhead_s + ldt__coll_hops(c, n) * alpha + (double)bytes / beta;
}

/* ---- JSON profiles ------------------------------------------------------------------------ */

static ldt_status num_field(const cJSON *o, const char *key, const char *where, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v))
        LDT_FAIL(LDT_ERR_CORRUPT, "cost profile: %s needs a number \"%s\"", where, key);
    *out = v->valuedouble;
    return LDT_OK;
}

ldt_status ldt_cost_model_parse(const char *json, ldt_cost_model *out) {
    ldt_status st = LDT_OK;
    ldt_cost_model m;
    cJSON *root = NULL;
    const cJSON *fmt, *links, *l, *name;
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
    name = cJSON_GetObjectItemCaseSensitive(root, "name");
    snprintf(m.name, sizeof m.name, "%s", cJSON_IsString(name) ? name->valuestring : "profile");
    LDT_CHECK_GOTO(num_field(root, "overhead_s", "the top level", &m.overhead_s));
    LDT_CHECK_GOTO(num_field(root, "local_bandwidth_gbps", "the top level", &gbps));
    m.local_bandwidth_Bps = gbps * GB;
    if (cJSON_GetObjectItemCaseSensitive(root, "local_overhead_s"))
        LDT_CHECK_GOTO(num_field(root, "local_overhead_s", "the top level", &m.local_overhead_s));
    links = cJSON_GetObjectItemCaseSensitive(root, "links");
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

/* The profile's JSON text (cJSON_free it), or NULL when out of memory. */
static char *profile_json(const ldt_cost_model *m) {
    cJSON *root = cJSON_CreateObject(), *links;
    char *text = NULL;
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "format", "lazydt-cost-profile");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddStringToObject(root, "name", m->name);
    cJSON_AddNumberToObject(root, "overhead_s", m->overhead_s);
    cJSON_AddNumberToObject(root, "local_bandwidth_gbps", m->local_bandwidth_Bps / GB);
    cJSON_AddNumberToObject(root, "local_overhead_s", m->local_overhead_s);
    links = cJSON_AddArrayToObject(root, "links");
    for (int i = 0; links && i < m->nlinks; i++) {
        cJSON *l = cJSON_CreateObject();
        if (!l) break;
        cJSON_AddNumberToObject(l, "latency_s", m->links[i].latency_s);
        cJSON_AddNumberToObject(l, "bandwidth_gbps", m->links[i].bandwidth_Bps / GB);
        cJSON_AddItemToArray(links, l);
    }
    if (links && cJSON_GetArraySize(links) == m->nlinks) text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
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
