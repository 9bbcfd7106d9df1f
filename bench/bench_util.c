/* Benchmark helpers: clock, median, and the results collector (cJSON tree -> table or JSON). */
#include "bench_util.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_results {
    cJSON *root;    /* {"bench": name, "results": [...], "goals": [...] when any} */
    cJSON *results; /* borrowed from root */
    unsigned char *twin; /* per result: 1 when the next one is its _cpu twin */
    int ntwin;
    char **goals;   /* "text: met" lines for the table (the JSON has them as "goals") */
    int ngoals;
};

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bench_clock bench_clock_now(void) {
    bench_clock c;
    c.cpu = bench_cpu_now();
    c.wall = bench_now();
    return c;
}

bench_clock bench_clock_since(bench_clock t0, int threads) {
    bench_clock c;
    c.wall = bench_now() - t0.wall;
    c.cpu = (bench_cpu_now() - t0.cpu) / (threads > 0 ? threads : 1);
    return c;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bench_results *bench_results_create(const char *bench) {
    bench_results *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->root = cJSON_CreateObject();
    if (!r->root || !cJSON_AddStringToObject(r->root, "bench", bench) ||
        !(r->results = cJSON_AddArrayToObject(r->root, "results"))) {
        cJSON_Delete(r->root);
        free(r);
        return NULL;
    }
    return r;
}

void bench_results_destroy(bench_results *r) {
    if (!r) return;
    for (int i = 0; i < r->ngoals; i++) free(r->goals[i]);
    free(r->goals);
    free(r->twin);
    cJSON_Delete(r->root);
    free(r);
}

int bench_add(bench_results *r, const char *name, double value, const char *unit) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return -1;
    if (!cJSON_AddStringToObject(o, "name", name) || !cJSON_AddNumberToObject(o, "value", value) ||
        !cJSON_AddStringToObject(o, "unit", unit) || !cJSON_AddObjectToObject(o, "params") ||
        !cJSON_AddItemToArray(r->results, o)) {
        cJSON_Delete(o);
        return -1;
    }
    return cJSON_GetArraySize(r->results) - 1;
}

int bench_add_timed(bench_results *r, const char *name, double wall, double cpu,
                    const char *unit) {
    char cname[128];
    int idx = bench_add(r, name, wall, unit);
    if (idx < 0) return -1;
    snprintf(cname, sizeof cname, "%s_cpu", name);
    if (bench_add(r, cname, cpu, unit) != idx + 1) return -1;
    if (idx >= r->ntwin) {
        int n = idx + 64;
        unsigned char *t = realloc(r->twin, (size_t)n);
        if (!t) return -1;
        memset(t + r->ntwin, 0, (size_t)(n - r->ntwin));
        r->twin = t;
        r->ntwin = n;
    }
    r->twin[idx] = 1;
    return idx;
}

static int has_twin(const bench_results *r, int idx) {
    return idx >= 0 && idx < r->ntwin && r->twin[idx];
}

static cJSON *params_of(bench_results *r, int idx) {
    cJSON *o = idx >= 0 ? cJSON_GetArrayItem(r->results, idx) : NULL;
    return o ? cJSON_GetObjectItemCaseSensitive(o, "params") : NULL;
}

void bench_param_int(bench_results *r, int idx, const char *key, int64_t v) {
    cJSON *p = params_of(r, idx);
    if (p) cJSON_AddNumberToObject(p, key, (double)v);
    if (has_twin(r, idx) && (p = params_of(r, idx + 1))) cJSON_AddNumberToObject(p, key, (double)v);
}

void bench_param_str(bench_results *r, int idx, const char *key, const char *v) {
    cJSON *p = params_of(r, idx);
    if (p) cJSON_AddStringToObject(p, key, v);
    if (has_twin(r, idx) && (p = params_of(r, idx + 1))) cJSON_AddStringToObject(p, key, v);
}

void bench_goal(bench_results *r, int met, const char *fmt, ...) {
    char text[512];
    va_list ap;
    char **g = realloc(r->goals, (size_t)(r->ngoals + 1) * sizeof *g);
    if (!g) return;
    r->goals = g;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    size_t n = strlen(text) + 16;
    if (!(g[r->ngoals] = malloc(n))) return;
    snprintf(g[r->ngoals], n, "%s: %s", text, met ? "met" : "not met");
    r->ngoals++;
    { /* and in the JSON: "goals": [{"goal": text, "met": 0 or 1}, ...] */
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(r->root, "goals"), *o;
        if (!arr && !(arr = cJSON_AddArrayToObject(r->root, "goals"))) return;
        if (!(o = cJSON_CreateObject())) return;
        cJSON_AddStringToObject(o, "goal", text);
        cJSON_AddNumberToObject(o, "met", met ? 1 : 0);
        cJSON_AddItemToArray(arr, o);
    }
}

int bench_rounds_init(bench_rounds *t, int k, int cap) {
    t->k = k;
    t->n = 0;
    t->cap = cap;
    t->v = calloc((size_t)(k * cap > 0 ? k * cap : 1), sizeof *t->v);
    return t->v ? 0 : -1;
}

void bench_rounds_add(bench_rounds *t, const double *figures) {
    if (t->n >= t->cap) return;
    memcpy(t->v + (size_t)t->n * (size_t)t->k, figures, (size_t)t->k * sizeof *figures);
    t->n++;
}

double bench_rounds_median(const bench_rounds *t, int j) {
    double col[256];
    int n = t->n < 256 ? t->n : 256;
    for (int i = 0; i < n; i++) col[i] = t->v[(size_t)i * (size_t)t->k + (size_t)j];
    return bench_median(col, n);
}

void bench_rounds_free(bench_rounds *t) {
    free(t->v);
    t->v = NULL;
}

int bench_find(const bench_results *r, const char *name, double *value, int nkv, ...) {
    const cJSON *o;
    cJSON_ArrayForEach(o, r->results) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
        if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name) != 0) continue;
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "params");
        va_list ap;
        va_start(ap, nkv);
        int ok = 1;
        for (int i = 0; i < nkv; i++) {
            const char *key = va_arg(ap, const char *);
            int64_t want = va_arg(ap, int64_t);
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
            if (!cJSON_IsNumber(v) || (int64_t)v->valuedouble != want) ok = 0;
        }
        va_end(ap);
        if (ok) {
            *value = cJSON_GetObjectItemCaseSensitive(o, "value")->valuedouble;
            return 1;
        }
    }
    return 0;
}

void bench_note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* "ranks=4 bytes=64MiB": sizes in bytes read better in binary units. */
static void format_params(const cJSON *p, char *buf, size_t cap) {
    size_t pos = 0;
    buf[0] = '\0';
    const cJSON *kv;
    cJSON_ArrayForEach(kv, p) {
        char val[64];
        if (cJSON_IsString(kv)) {
            snprintf(val, sizeof val, "%s", kv->valuestring);
        } else {
            double v = kv->valuedouble;
            int is_bytes = strcmp(kv->string, "bytes") == 0;
            if (is_bytes && v >= 1 << 20 && (int64_t)v % (1 << 20) == 0)
                snprintf(val, sizeof val, "%lldMiB", (long long)(v / (1 << 20)));
            else if (is_bytes && v >= 1 << 10 && (int64_t)v % (1 << 10) == 0)
                snprintf(val, sizeof val, "%lldKiB", (long long)(v / (1 << 10)));
            else
                snprintf(val, sizeof val, "%.10g", v);
        }
        if (pos < cap)
            pos += (size_t)snprintf(buf + pos, cap - pos, "%s%s=%s", pos ? " " : "", kv->string,
                                    val);
    }
}

void bench_print_table(const bench_results *r, FILE *f) {
    const cJSON *bench = cJSON_GetObjectItemCaseSensitive(r->root, "bench");
    fprintf(f, "== %s ==\n", bench->valuestring);
    fprintf(f, "%-36s %14s  %-8s %s\n", "result", "value", "unit", "params");
    const cJSON *o;
    cJSON_ArrayForEach(o, r->results) {
        char params[256];
        format_params(cJSON_GetObjectItemCaseSensitive(o, "params"), params, sizeof params);
        double v = cJSON_GetObjectItemCaseSensitive(o, "value")->valuedouble;
        char num[32];
        /* JSON has no infinity: a ratio with one side 0 is 1e300 there, "inf" here */
        if (v >= 1e300) snprintf(num, sizeof num, "inf");
        else snprintf(num, sizeof num, "%.4f", v);
        fprintf(f, "%-36s %14s  %-8s %s\n", cJSON_GetObjectItemCaseSensitive(o, "name")->valuestring, num,
                cJSON_GetObjectItemCaseSensitive(o, "unit")->valuestring, params);
    }
    for (int i = 0; i < r->ngoals; i++) fprintf(f, "goal: %s\n", r->goals[i]);
}

int bench_print_json(const bench_results *r, FILE *f) {
    char *s = cJSON_PrintUnformatted(r->root);
    if (!s) return -1;
    fprintf(f, "%s\n", s);
    cJSON_free(s);
    return 0;
}
