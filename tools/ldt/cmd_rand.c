/* ldt rand: materializes a random tensor sharded on a threaded mesh, gathers it, and prints its
 * XXH64 and first values: the same for every mesh and placements (docs/random-stream.md). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "ldt/exec.h"
#include "ldt/planner.h"
#include "ldt/trace.h"
#include "tools/ldt/cli.h"

#define NFLAGS 17
#define NVALUES 8

static const char *const k_dists[] = {"normal", "uniform", "trunc_normal", "bernoulli", "randint"};
#define NDISTS ((int)(sizeof k_dists / sizeof k_dists[0]))

static void fill_flags(cli_flag *f) {
    cli_flag def[NFLAGS] = {
        {"mesh", 1, "device mesh: 4, 2x3, dp=2,tp=2 or [[0,2],[1,3]] (required)", NULL},
        {"shape", 1, "global tensor shape, e.g. 1001,37 (required)", NULL},
        {"placements", 1, "one per mesh dim: S<d>, IS<d>:<k>, R (default R on every dim)", NULL},
        {"dist", 1, "normal (default), uniform, trunc_normal, bernoulli, randint", NULL},
        {"seed", 1, "the stream's seed (default 0)", NULL},
        {"offset", 1, "the stream's offset (default 0)", NULL},
        {"mean", 1, "normal, trunc_normal: mean (default 0)", NULL},
        {"std", 1, "normal, trunc_normal: standard deviation (default 1)", NULL},
        {"a", 1, "trunc_normal: lower bound, raw units (default -2)", NULL},
        {"b", 1, "trunc_normal: upper bound (default 2)", NULL},
        {"lo", 1, "uniform: lower bound (default 0)", NULL},
        {"hi", 1, "uniform: upper bound, excluded (default 1)", NULL},
        {"p", 1, "bernoulli: probability of a 1 (default 0.5)", NULL},
        {"low", 1, "randint: lowest value (default 0)", NULL},
        {"high", 1, "randint: one past the highest value (default 10)", NULL},
        {"json", 0, "print exactly one JSON object", NULL},
        {"help", 0, "this help", NULL},
    };
    memcpy(f, def, sizeof def);
}

static int help(void) {
    cli_flag flags[NFLAGS];
    fill_flags(flags);
    printf("usage: ldt rand --mesh M --shape S [--placements P] [--dist D] [--seed N]\n"
           "                [--offset N] [distribution flags] [--json]\n\n"
           "Records one random op on a context over the threaded mesh, pins it to the\n"
           "placements, plans and runs it (each rank makes its own shard from global indices)\n"
           "and gathers the tensor. Prints XXH64 (seed 0) of its little-endian row-major f32\n"
           "bytes and its first %d values (%%.9g): identical for every mesh and placements.\n"
           "bernoulli and randint are made as f32 holding 0/1 and integers.\n\nflags:\n",
           NVALUES);
    cli_flag *f = flags;
    cli_print_flags(stdout, f, NFLAGS);
    return 0;
}

/* Flag `name` as an unsigned 64-bit integer (decimal or 0x hex). */
static int flag_u64(const cli_flag *flags, const char *name, uint64_t *out) {
    const char *v = cli_get(flags, NFLAGS, name);
    char *end;
    *out = 0;
    if (!v) return 0;
    errno = 0;
    *out = strtoull(v, &end, 0);
    if (*v == '\0' || *v == '-' || *end != '\0' || errno == ERANGE) {
        fprintf(stderr, "ldt rand: --%s is '%s', expected an integer in [0, 2^64)\n", name, v);
        return 2;
    }
    return 0;
}

/* Flag `name` as a signed 64-bit integer. */
static int flag_i64(const cli_flag *flags, const char *name, int64_t def, int64_t *out) {
    const char *v = cli_get(flags, NFLAGS, name);
    char *end;
    *out = def;
    if (!v) return 0;
    errno = 0;
    *out = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno == ERANGE) {
        fprintf(stderr, "ldt rand: --%s is '%s', expected an integer\n", name, v);
        return 2;
    }
    return 0;
}

/* XXH64 (seed 0) of n f32 values as little-endian bytes, whatever the host's byte order. */
static uint64_t hash_f32_le(const float *v, int64_t n) {
    XXH64_state_t *st = XXH64_createState();
    unsigned char buf[4096];
    uint64_t h;
    if (!st) return 0;
    XXH64_reset(st, 0);
    for (int64_t i = 0; i < n;) {
        size_t k = 0;
        for (; k + 4 <= sizeof buf && i < n; i++, k += 4) {
            uint32_t b;
            memcpy(&b, &v[i], 4);
            buf[k] = (unsigned char)b;
            buf[k + 1] = (unsigned char)(b >> 8);
            buf[k + 2] = (unsigned char)(b >> 16);
            buf[k + 3] = (unsigned char)(b >> 24);
        }
        XXH64_update(st, buf, k);
    }
    h = XXH64_digest(st);
    XXH64_freeState(st);
    return h;
}

int cmd_rand(int argc, char **argv) {
    cli_flag flags[NFLAGS];
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_plan *plan = NULL;
    ldt_tensor *t = NULL;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    int npl = 0, dist = 0, rc = 2, json;
    uint64_t seed, offset;
    double mean, std, a, b, lo, hi, p;
    int64_t low, high, numel = 1, nbytes;
    float *data = NULL;
    const char *dname, *pltext;
    char pls[256];
    fill_flags(flags);
    if (cli_parse("rand", argc, argv, flags, NFLAGS)) return 2;
    if (cli_has(flags, NFLAGS, "help")) return help();
    json = cli_has(flags, NFLAGS, "json");
    for (int i = 0; i < 2; i++)
        if (!flags[i].value) {
            fprintf(stderr, "ldt rand: --%s is required (see ldt rand --help)\n", flags[i].name);
            return 2;
        }
    dname = cli_get(flags, NFLAGS, "dist");
    if (dname) {
        for (dist = 0; dist < NDISTS && strcmp(dname, k_dists[dist]) != 0; dist++) {
        }
        if (dist == NDISTS) {
            fprintf(stderr,
                    "ldt rand: --dist is '%s', expected normal, uniform, trunc_normal, bernoulli "
                    "or randint\n",
                    dname);
            return 2;
        }
    }
    if (flag_u64(flags, "seed", &seed) || flag_u64(flags, "offset", &offset) ||
        cli_real("rand", flags, NFLAGS, "mean", 0.0, &mean) || cli_real("rand", flags, NFLAGS, "std", 1.0, &std) ||
        cli_real("rand", flags, NFLAGS, "a", -2.0, &a) || cli_real("rand", flags, NFLAGS, "b", 2.0, &b) ||
        cli_real("rand", flags, NFLAGS, "lo", 0.0, &lo) || cli_real("rand", flags, NFLAGS, "hi", 1.0, &hi) ||
        cli_real("rand", flags, NFLAGS, "p", 0.5, &p) || flag_i64(flags, "low", 0, &low) ||
        flag_i64(flags, "high", 10, &high))
        return 2;
    if (ldt_shape_parse(cli_get(flags, NFLAGS, "shape"), &shape) != LDT_OK ||
        ldt_shape_numel(&shape, &numel) != LDT_OK) {
        fprintf(stderr, "ldt rand: --shape: %s\n", ldt_last_error());
        return 2;
    }
    if (ldt_mesh_parse(cli_get(flags, NFLAGS, "mesh"), LDT_DEVICE_CPU, &mesh) != LDT_OK) {
        fprintf(stderr, "ldt rand: --mesh: %s\n", ldt_last_error());
        return 2;
    }
    if (cli_rank_threads_fit("rand", mesh)) {
        ldt_mesh_destroy(mesh);
        return 1;
    }
    pltext = cli_get(flags, NFLAGS, "placements");
    if (pltext) {
        if (ldt_placements_parse(pltext, shape.ndim, pl, LDT_MAX_DIMS, &npl) != LDT_OK) {
            fprintf(stderr, "ldt rand: --placements: %s\n", ldt_last_error());
            goto done;
        }
        if (npl != ldt_mesh_ndim(mesh)) {
            fprintf(stderr, "ldt rand: --placements '%s' has %d entries, expected one per mesh "
                            "dim (%d)\n",
                    pltext, npl, ldt_mesh_ndim(mesh));
            goto done;
        }
    } else {
        npl = ldt_mesh_ndim(mesh);
        for (int d = 0; d < npl; d++) pl[d] = ldt_replicate();
    }
    if ((size_t)numel > SIZE_MAX / sizeof(float) / 2) {
        fprintf(stderr, "ldt rand: --shape holds %lld elements, too many to gather here\n",
                (long long)numel);
        goto done;
    }
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_ctx_set_seed(ctx, seed, offset) != LDT_OK) {
        rc = cli_fail("rand");
        goto done;
    }
    switch (dist) {
    case 0: t = ldt_normal(ctx, &shape, LDT_F32, mean, std); break;
    case 1: t = ldt_uniform(ctx, &shape, LDT_F32, lo, hi); break;
    case 2: t = ldt_trunc_normal(ctx, &shape, LDT_F32, mean, std, a, b); break;
    case 3: t = ldt_bernoulli(ctx, &shape, LDT_F32, p); break;
    default: t = ldt_randint(ctx, &shape, LDT_F32, low, high); break;
    }
    /* the op's parameters and the placements come from flags: their errors are usage errors */
    if (!t) {
        fprintf(stderr, "ldt rand: %s\n", ldt_ctx_errmsg(ctx));
        goto done;
    }
    if (ldt_pin(t, pl, npl) != LDT_OK) {
        fprintf(stderr, "ldt rand: --placements: %s\n", ldt_last_error());
        goto done;
    }
    nbytes = numel * (int64_t)sizeof(float);
    data = malloc((size_t)(nbytes ? nbytes : 1));
    if (!data) {
        fprintf(stderr, "ldt rand: out of memory for %lld elements\n", (long long)numel);
        rc = 1;
        goto done;
    }
    if (ldt_plan_create(ctx, &po, &plan) != LDT_OK ||
        ldt_plan_run(plan, 1, &t, (void *const *)&data, &nbytes) != LDT_OK) {
        rc = cli_fail("rand");
        goto done;
    }
    {
        uint64_t h = hash_f32_le(data, numel);
        int nv = numel < NVALUES ? (int)numel : NVALUES;
        if (json) {
            printf("{\"xxh64\":\"%016llx\",\"values\":[", (unsigned long long)h);
            for (int i = 0; i < nv; i++) printf("%s%.9g", i ? "," : "", (double)data[i]);
            printf("]}\n");
        } else {
            char sh[128];
            ldt_shape_format(&shape, sh, sizeof sh);
            ldt_placements_format(pl, npl, pls, sizeof pls);
            printf("%s %s f32, seed %llu offset %llu, on mesh %s as %s\n", k_dists[dist], sh,
                   (unsigned long long)seed, (unsigned long long)offset,
                   cli_get(flags, NFLAGS, "mesh"), pls);
            printf("xxh64   %016llx\nvalues ", (unsigned long long)h);
            for (int i = 0; i < nv; i++) printf(" %.9g", (double)data[i]);
            printf("\n");
        }
    }
    rc = 0;
done:
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    free(data);
    return rc;
}
