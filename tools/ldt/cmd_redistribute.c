/* ldt redistribute: plan (and with --run execute and verify) a redistribution between two
 * placement lists, on one mesh or onto another. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 16
#define REPS 5

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"mesh", 1, "source device mesh: 4, 2x3, dp=2,tp=2 or [[0,2],[1,3]] (required)", NULL},
        {"shape", 1, "global tensor shape, e.g. 8,6 (required)", NULL},
        {"from", 1, "source placements, one per mesh dim: S<d>, R, P, Pavg, Pmax, Pmin, "
                    "IS<d>:<k> (required)", NULL},
        {"to", 1, "target placements, one per dim of the target mesh (required)", NULL},
        {"to-mesh", 1, "target mesh when it differs (cross-mesh: another shape or rank set)",
         NULL},
        {"dtype", 1, "element type (default f32): f32 f64 f16 bf16 i32 i64 u8 bool", NULL},
        CLI_PROFILE_FLAG,
        {"latency-us", 1, "override latency per mesh dim, microseconds, e.g. 2.7,0.6", NULL},
        {"bandwidth-gbps", 1, "override bandwidth per mesh dim, GB/s, e.g. 19.3,87.7", NULL},
        {"naive", 0, "plan the naive route (everything to Replicate, then chunk)", NULL},
        {"no-merge", 0, "never merge steps onto flattened groups", NULL},
        {"run", 0, "execute on the threaded mesh with known values and verify the result",
         NULL},
        {"print-local", 0, "with --run: values are global row-major indices; print each target "
                           "rank's local shard", NULL},
        {"json", 0, "print exactly one JSON object", NULL},
        CLI_COMM_TIMEOUT_FLAG,
        {"help", 0, "this help", NULL},
    };
    return flags;
}

static int help(void) {
    printf("usage: ldt redistribute --mesh M --shape S --from P --to P [--to-mesh M] [--dtype T]\n"
           "         [--profile P] [--latency-us L] [--bandwidth-gbps B]\n"
           "         [--naive] [--no-merge] [--run [--print-local]] [--json]\n\n"
           "Plans the cheapest list of transforms from --from to --to under the cost model:\n"
           "each step is one collective (all_reduce, reduce_scatter, all_gather, all_to_all)\n"
           "or local op (local_chunk, local_partial, local_pad) on one mesh dim, or on several\n"
           "merged into one flattened group; with --to-mesh one send_recv step moves the\n"
           "intersections of source and target regions. Byte figures are per rank, the maximum\n"
           "over ranks; comm_bytes_per_rank sums max(sent, recv) over steps. --run fills the\n"
           "source with known values (Partial sources: random addends whose reduction is the\n"
           "known tensor), runs on rank threads, compares the full result with the original\n"
           "(\"verified\") and reports the median time of %d runs (\"measured_seconds\").\n"
           "With --print-local the known values are the global row-major indices and \"locals\"\n"
           "lists each target rank's local shard, row-major (interleaved: its slices in order).\n"
           "Exits 1 on bad input or when --run does not verify.\n\nflags:\n",
           REPS);
    cli_print_flags(stdout, flag_table(), NFLAGS);
    return 0;
}

/* "2.7,0.6" -> n doubles; 0 when the count or a number is wrong. */
static int parse_list(const char *text, double *out, int want) {
    int n = 0;
    const char *p = text;
    while (*p && n < LDT_MAX_DIMS) {
        char *end;
        double v = strtod(p, &end);
        if (end == p) return 0;
        out[n++] = v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return 0;
    }
    return n == want && !*p;
}

/* 0, or prints the problem and returns 1. */
static int load_model(const cli_flag *f, const ldt_mesh *mesh, ldt_cost_model *cm) {
    const char *lat = cli_get(f, NFLAGS, "latency-us"), *bw = cli_get(f, NFLAGS, "bandwidth-gbps");
    double v[LDT_MAX_DIMS];
    int mesh_ndim = ldt_mesh_ndim(mesh);
    ldt_status st = cli_profile(f, NFLAGS, mesh, cm);
    /* overrides are per mesh dim: the profile's link of each dim first (node packing) */
    if (st == LDT_OK && (lat || bw)) st = ldt_cost_model_for_mesh(cm, mesh, cm);
    if (st != LDT_OK) return cli_fail("redistribute");
    if (!lat && !bw) return 0;
    if (lat) {
        if (!parse_list(lat, v, mesh_ndim)) {
            fprintf(stderr, "ldt redistribute: --latency-us '%s': expected %d numbers (one per "
                    "mesh dim) separated by commas\n", lat, mesh_ndim);
            return 1;
        }
        for (int d = 0; d < mesh_ndim; d++) cm->links[d].latency_s = v[d] * 1e-6;
    }
    if (bw) {
        if (!parse_list(bw, v, mesh_ndim)) {
            fprintf(stderr, "ldt redistribute: --bandwidth-gbps '%s': expected %d numbers (one "
                    "per mesh dim) separated by commas\n", bw, mesh_ndim);
            return 1;
        }
        for (int d = 0; d < mesh_ndim; d++) cm->links[d].bandwidth_Bps = v[d] * 1e9;
    }
    return ldt_cost_model_check(cm) != LDT_OK ? cli_fail("redistribute") : 0;
}

/* Element i of a dtype from an integer, as C converts it (bool: i != 0, u8 wraps). */
static void put(void *buf, int64_t i, ldt_dtype dt, int64_t v) {
    switch (dt) {
    case LDT_F32: ((float *)buf)[i] = (float)v; break;
    case LDT_F64: ((double *)buf)[i] = (double)v; break;
    case LDT_F16: ((uint16_t *)buf)[i] = ldt_f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)buf)[i] = ldt_f32_to_bf16((float)v); break;
    case LDT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case LDT_I64: ((int64_t *)buf)[i] = v; break;
    case LDT_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
    default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    }
}

static double get(const void *buf, int64_t i, ldt_dtype dt) {
    switch (dt) {
    case LDT_F32: return ((const float *)buf)[i];
    case LDT_F64: return ((const double *)buf)[i];
    case LDT_F16: return ldt_f16_to_f32(((const uint16_t *)buf)[i]);
    case LDT_BF16: return ldt_bf16_to_f32(((const uint16_t *)buf)[i]);
    case LDT_I32: return ((const int32_t *)buf)[i];
    case LDT_I64: return (double)((const int64_t *)buf)[i];
    default: return ((const uint8_t *)buf)[i];
    }
}

typedef struct run_result {
    int verified;
    double seconds;
    ldt_shards *out;
} run_result;

/* Known values in, redistribute, full tensor out, compare. */
static ldt_status run_plan(const ldt_redist_plan *plan, int indices, run_result *res) {
    const ldt_spec *src = ldt_redist_plan_source(plan);
    int64_t numel, nbytes;
    char *full = NULL, *back = NULL;
    ldt_shards *in = NULL;
    ldt_status st;
    int partial = 0;
    uint64_t h = 0x1234;
    if ((st = ldt_shape_numel(&src->shape, &numel)) != LDT_OK) return st;
    if ((st = ldt_shape_nbytes(&src->shape, src->dtype, &nbytes)) != LDT_OK) return st;
    full = malloc((size_t)nbytes + 1);
    back = malloc((size_t)nbytes + 1);
    if (!full || !back) {
        st = LDT_ERR_OUT_OF_MEMORY;
        fprintf(stderr, "ldt redistribute: out of memory for %lld bytes\n", (long long)nbytes);
        goto done;
    }
    for (int64_t i = 0; i < numel; i++) {
        /* small integers otherwise: exact in every dtype and under every reduction order */
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        put(full, i, src->dtype, indices ? i : (int64_t)((h >> 33) % 17) - 8);
    }
    for (int i = 0; i < src->nplace; i++) partial |= src->placements[i].kind == LDT_PLACE_PARTIAL;
    st = partial ? ldt_distribute_addends(full, src, 42, &in) : ldt_distribute(full, src, &in);
    if (st != LDT_OK) goto done;
    if ((st = ldt_redistribute_measure(in, plan, REPS, &res->seconds, &res->out)) != LDT_OK)
        goto done;
    if ((st = ldt_full_tensor(res->out, back)) != LDT_OK) goto done;
    res->verified = memcmp(full, back, (size_t)nbytes) == 0;
done:
    ldt_shards_destroy(in);
    free(full);
    free(back);
    return st;
}

static cJSON *int_array(const int *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static int by_rank(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static cJSON *locals_json(const ldt_shards *out) {
    const ldt_spec *spec = ldt_shards_spec(out);
    int n = ldt_mesh_nranks(spec->mesh), *ranks = malloc((size_t)n * sizeof *ranks);
    cJSON *arr = cJSON_CreateArray();
    if (!ranks) return arr;
    for (int i = 0; i < n; i++) ranks[i] = ldt_mesh_rank_at(spec->mesh, i);
    qsort(ranks, (size_t)n, sizeof *ranks, by_rank);
    for (int i = 0; i < n; i++) {
        int64_t nb;
        const void *buf = ldt_shards_local(out, ranks[i], &nb);
        int64_t count = nb / (int64_t)ldt_dtype_size(spec->dtype);
        cJSON *o = cJSON_CreateObject(), *vals = cJSON_CreateArray();
        cJSON_AddNumberToObject(o, "rank", ranks[i]);
        for (int64_t k = 0; k < count; k++)
            cJSON_AddItemToArray(vals, cJSON_CreateNumber(get(buf, k, spec->dtype)));
        cJSON_AddItemToObject(o, "values", vals);
        cJSON_AddItemToArray(arr, o);
    }
    free(ranks);
    return arr;
}

static void print_human(const ldt_redist_plan *plan, const char *model, const run_result *run) {
    char a[512], b[512];
    ldt_spec_format(ldt_redist_plan_source(plan), a, sizeof a);
    ldt_spec_format(ldt_redist_plan_target(plan), b, sizeof b);
    printf("%s -> %s, cost model %s\n", a, b, model);
    printf("%-4s %-14s %-10s %-22s %12s %12s %12s\n", "step", "collective", "mesh_dims",
           "from -> to", "sent/rank", "recv/rank", "modeled_s");
    for (int i = 0; i < ldt_redist_plan_nsteps(plan); i++) {
        ldt_redist_step s;
        char dims[64] = "", ft[1100];
        size_t at = 0;
        ldt_redist_plan_step(plan, i, &s);
        for (int k = 0; k < s.ndims; k++)
            at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%d", k ? "," : "", s.dims[k]);
        if (s.collective == LDT_COLL_SEND_RECV) snprintf(dims, sizeof dims, "world");
        ldt_placements_format(s.from, s.nfrom, a, sizeof a);
        ldt_placements_format(s.to, s.nto, b, sizeof b);
        snprintf(ft, sizeof ft, "%s -> %s", a, b);
        printf("%-4d %-14s [%-8s] %-22s %12lld %12lld %12.3g\n", i,
               ldt_collective_name(s.collective), dims, ft, (long long)s.bytes_sent,
               (long long)s.bytes_recv, s.seconds);
    }
    printf("comm_bytes_per_rank: %lld\nmodeled_seconds: %.6g\n",
           (long long)ldt_redist_plan_bytes(plan), ldt_redist_plan_seconds(plan));
    if (run) printf("verified: %s\nmeasured_seconds: %.6g\n", run->verified ? "true" : "false",
                    run->seconds);
}

static cJSON *plan_json(const ldt_redist_plan *plan) {
    cJSON *root = cJSON_CreateObject(), *steps = cJSON_AddArrayToObject(root, "steps");
    int cross = ldt_redist_plan_is_cross_mesh(plan);
    for (int i = 0; i < ldt_redist_plan_nsteps(plan); i++) {
        ldt_redist_step s;
        char buf[512];
        cJSON *o = cJSON_CreateObject();
        ldt_redist_plan_step(plan, i, &s);
        cJSON_AddItemToObject(o, "mesh_dims", int_array(s.dims, s.ndims));
        if (cross)
            cJSON_AddStringToObject(o, "on_mesh", s.collective == LDT_COLL_SEND_RECV ? "both"
                                               : s.mesh ? "target" : "source");
        ldt_placements_format(s.from, s.nfrom, buf, sizeof buf);
        cJSON_AddStringToObject(o, "from", buf);
        ldt_placements_format(s.to, s.nto, buf, sizeof buf);
        cJSON_AddStringToObject(o, "to", buf);
        cJSON_AddStringToObject(o, "collective", ldt_collective_name(s.collective));
        cJSON_AddNumberToObject(o, "bytes_sent_per_rank", (double)s.bytes_sent);
        cJSON_AddNumberToObject(o, "bytes_recv_per_rank", (double)s.bytes_recv);
        cJSON_AddNumberToObject(o, "modeled_seconds", s.seconds);
        cJSON_AddItemToArray(steps, o);
    }
    cJSON_AddNumberToObject(root, "comm_bytes_per_rank", (double)ldt_redist_plan_bytes(plan));
    cJSON_AddNumberToObject(root, "modeled_seconds", ldt_redist_plan_seconds(plan));
    return root;
}

int cmd_redistribute(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL, *to_mesh = NULL;
    ldt_shape shape;
    ldt_placement from[LDT_MAX_DIMS], to[LDT_MAX_DIMS];
    int nfrom, nto, rc = 1, do_run, json;
    ldt_dtype dt = LDT_F32;
    ldt_spec src;
    ldt_cost_model cm;
    ldt_redist_plan *plan = NULL;
    ldt_redist_options opt;
    run_result run = {0, 0, NULL};
    const char *need[4] = {"mesh", "shape", "from", "to"};
    if (cli_parse("redistribute", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("redistribute", f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) return help();
    for (int i = 0; i < 4; i++)
        if (!cli_has(f, NFLAGS, need[i])) {
            fprintf(stderr, "ldt redistribute: --%s is required (see ldt redistribute --help)\n",
                    need[i]);
            return 2;
        }
    do_run = cli_has(f, NFLAGS, "run");
    json = cli_has(f, NFLAGS, "json");
    if (cli_has(f, NFLAGS, "print-local") && !do_run) {
        fprintf(stderr, "ldt redistribute: --print-local needs --run\n");
        return 2;
    }
    if (ldt_shape_parse(cli_get(f, NFLAGS, "shape"), &shape) != LDT_OK ||
        ldt_mesh_parse(cli_get(f, NFLAGS, "mesh"), LDT_DEVICE_CPU, &mesh) != LDT_OK ||
        (cli_has(f, NFLAGS, "to-mesh") &&
         ldt_mesh_parse(cli_get(f, NFLAGS, "to-mesh"), LDT_DEVICE_CPU, &to_mesh) != LDT_OK) ||
        ldt_placements_parse(cli_get(f, NFLAGS, "from"), shape.ndim, from, LDT_MAX_DIMS,
                             &nfrom) != LDT_OK ||
        ldt_placements_parse(cli_get(f, NFLAGS, "to"), shape.ndim, to, LDT_MAX_DIMS, &nto) !=
            LDT_OK ||
        (cli_has(f, NFLAGS, "dtype") && ldt_dtype_parse(cli_get(f, NFLAGS, "dtype"), &dt) != LDT_OK) ||
        ldt_spec_init(&src, mesh, &shape, from, nfrom, dt) != LDT_OK) {
        rc = cli_fail("redistribute");
        goto done;
    }
    if (do_run && (cli_rank_threads_fit("redistribute", mesh) || (to_mesh && cli_rank_threads_fit("redistribute", to_mesh))))
        goto done;
    if (load_model(f, mesh, &cm)) goto done;
    opt.cost = &cm;
    opt.merge = !cli_has(f, NFLAGS, "no-merge");
    opt.search = cli_has(f, NFLAGS, "naive") ? LDT_REDIST_NAIVE : LDT_REDIST_DIJKSTRA;
    if (ldt_redist_plan_create(&src, to_mesh, to, nto, &opt, &plan) != LDT_OK ||
        (do_run && run_plan(plan, cli_has(f, NFLAGS, "print-local"), &run) != LDT_OK)) {
        rc = cli_fail("redistribute");
        goto done;
    }
    if (json) {
        cJSON *root = plan_json(plan);
        char *text;
        cJSON_AddStringToObject(root, "profile", cm.name);
        if (do_run) {
            cJSON_AddBoolToObject(root, "verified", run.verified);
            cJSON_AddNumberToObject(root, "measured_seconds", run.seconds);
            if (cli_has(f, NFLAGS, "print-local"))
                cJSON_AddItemToObject(root, "locals", locals_json(run.out));
        }
        text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!text) {
            fprintf(stderr, "ldt redistribute: out of memory\n");
            goto done;
        }
        printf("%s\n", text);
        cJSON_free(text);
    } else {
        print_human(plan, cm.name, do_run ? &run : NULL);
        if (do_run && cli_has(f, NFLAGS, "print-local")) {
            cJSON *l = locals_json(run.out);
            cJSON *e;
            cJSON_ArrayForEach(e, l) {
                char *v = cJSON_PrintUnformatted(cJSON_GetObjectItem(e, "values"));
                printf("rank %d: %s\n", cJSON_GetObjectItem(e, "rank")->valueint, v ? v : "");
                cJSON_free(v);
            }
            cJSON_Delete(l);
        }
    }
    rc = do_run && !run.verified ? 1 : 0;
    if (rc) fprintf(stderr, "ldt redistribute: the result differs from the original tensor\n");
done:
    ldt_shards_destroy(run.out);
    ldt_redist_plan_destroy(plan);
    ldt_mesh_destroy(to_mesh);
    ldt_mesh_destroy(mesh);
    return rc;
}
