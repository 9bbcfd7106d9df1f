/* Flag parsing and error printing shared by the ldt subcommands. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/core.h"
#include "ldt/models.h"
#include "ldt/planner.h"
#include "tools/ldt/cli.h"

static cli_flag *find(cli_flag *flags, int nflags, const char *name, size_t len) {
    for (int i = 0; i < nflags; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

int cli_parse(const char *cmd, int argc, char **argv, cli_flag *flags, int nflags) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq;
        cli_flag *f;
        size_t len;
        if (strcmp(a, "-h") == 0 && (f = find(flags, nflags, "help", 4))) { /* -h is --help */
            f->value = "1";
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "ldt %s: unexpected argument '%s' (see ldt %s --help)\n", cmd, a, cmd);
            return 2;
        }
        a += 2;
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        f = find(flags, nflags, a, len);
        if (!f) {
            fprintf(stderr, "ldt %s: unknown flag '%s' (see ldt %s --help)\n", cmd, argv[i], cmd);
            return 2;
        }
        if (!f->takes_value) {
            if (eq) {
                fprintf(stderr, "ldt %s: --%s takes no value\n", cmd, f->name);
                return 2;
            }
            f->value = "1";
        } else if (eq) {
            f->value = eq + 1;
        } else if (i + 1 < argc) {
            f->value = argv[++i];
        } else {
            fprintf(stderr, "ldt %s: --%s needs a value\n", cmd, f->name);
            return 2;
        }
    }
    return 0;
}

const char *cli_get(const cli_flag *flags, int nflags, const char *name) {
    for (int i = 0; i < nflags; i++)
        if (strcmp(flags[i].name, name) == 0) return flags[i].value;
    return NULL;
}

int cli_has(const cli_flag *flags, int nflags, const char *name) {
    return cli_get(flags, nflags, name) != NULL;
}

void cli_print_flags(FILE *f, const cli_flag *flags, int nflags) {
    for (int i = 0; i < nflags; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s", flags[i].name, flags[i].takes_value ? " VALUE" : "");
        fprintf(f, "  %-22s %s\n", left, flags[i].help);
    }
}

int cli_fail(const char *cmd) {
    fprintf(stderr, "ldt %s: %s\n", cmd, ldt_last_error());
    return 1;
}

int cli_rank_threads_fit(const char *cmd, const ldt_mesh *mesh) {
    if (ldt_mesh_device(mesh) != LDT_DEVICE_CPU || ldt_mesh_nranks(mesh) <= CLI_MAX_RANK_THREADS) return 0;
    fprintf(stderr, "ldt %s: mesh of %d ranks: rank threads in one process stop at %d; run one process per "
                    "rank (--backend mpi, where the command has it) or plan it on a meta mesh\n",
            cmd, ldt_mesh_nranks(mesh), CLI_MAX_RANK_THREADS);
    return 1;
}

int cli_int(const char *cmd, const cli_flag *flags, int nflags, const char *name, int64_t def,
            int64_t lo, int64_t *out) {
    const char *v = cli_get(flags, nflags, name);
    char *end;
    *out = def;
    if (!v) return 0;
    errno = 0;
    *out = strtoll(v, &end, 10);
    if (errno == ERANGE) {
        fprintf(stderr, "ldt %s: --%s is '%s', out of the 64-bit range; expected an integer from %lld to %lld\n",
                cmd, name, v, (long long)lo, (long long)INT64_MAX);
        return 2;
    }
    if (*v == '\0' || *end != '\0' || *out < lo) {
        fprintf(stderr, "ldt %s: --%s is '%s', expected an integer >= %lld\n", cmd, name, v,
                (long long)lo);
        return 2;
    }
    return 0;
}

int cli_real(const char *cmd, const cli_flag *flags, int nflags, const char *name, double def, double *out) {
    const char *v = cli_get(flags, nflags, name);
    char *end;
    *out = def;
    if (!v) return 0;
    errno = 0;
    *out = strtod(v, &end);
    if (*v == '\0' || end == v || *end != '\0' || errno == ERANGE || isnan(*out) || isinf(*out)) {
        fprintf(stderr, "ldt %s: --%s is '%s', expected a finite number\n", cmd, name, v);
        return 2;
    }
    return 0;
}

int cli_comm_timeout(const char *cmd, const cli_flag *flags, int nflags) {
    int64_t ms;
    if (!cli_has(flags, nflags, "comm-timeout-ms")) return 0;
    if (cli_int(cmd, flags, nflags, "comm-timeout-ms", 0, 0, &ms)) return 2;
    if (setenv("LDT_COMM_TIMEOUT_MS", cli_get(flags, nflags, "comm-timeout-ms"), 1) != 0) {
        fprintf(stderr, "ldt %s: cannot set LDT_COMM_TIMEOUT_MS for --comm-timeout-ms\n", cmd);
        return 2;
    }
    return 0;
}

int cli_bucket_bytes(const char *cmd, const cli_flag *flags, int nflags, int64_t *bytes) {
    double mb;
    *bytes = 0;
    if (!cli_has(flags, nflags, "bucket-mb")) return 0;
    if (cli_real(cmd, flags, nflags, "bucket-mb", 25, &mb)) return 2;
    if (!(mb > 0 && mb <= 1048576) || (int64_t)(mb * 1048576) < 1) {
        fprintf(stderr, "ldt %s: --bucket-mb is '%s', expected a size in MiB > 0 (at most 1048576)\n", cmd,
                cli_get(flags, nflags, "bucket-mb"));
        return 2;
    }
    *bytes = (int64_t)(mb * 1048576);
    return 0;
}

ldt_status cli_sync_grads(ldt_optim *o, const ldt_mesh *mesh) {
    int dp;
    if (ldt_mesh_dim_index(mesh, "dp", &dp) != LDT_OK) {
        ldt_clear_error();
        return LDT_OK;
    }
    return ldt_optim_sync_grads(o, dp);
}

int cli_model_sizes(const char *cmd, const cli_flag *flags, int nflags, ldt_model_config *cfg) {
    const struct {
        const char *name;
        int64_t *field;
    } f[] = {{"layers", &cfg->layers}, {"hidden", &cfg->hidden}, {"heads", &cfg->heads},
             {"vocab", &cfg->vocab},   {"seq", &cfg->seq},       {"batch", &cfg->batch}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (cli_int(cmd, flags, nflags, f[i].name, *f[i].field, 1, f[i].field)) return 2;
    return 0;
}

/* The optimizer's bytes per element of a parameter of dtype dt: AdamW's two states, f32 for a
 * half parameter (with its f32 master as a third), else in the parameter's dtype. */
static int64_t optimizer_bytes_per_elem(ldt_dtype dt) {
    return dt == LDT_F16 || dt == LDT_BF16 ? 12 : 2 * (int64_t)ldt_dtype_size(dt);
}

ldt_status cli_memory_per_rank(ldt_plan *plan, ldt_model *m, const ldt_mesh *mesh, cli_memory *out) {
    return cli_memory_per_rank_optim(plan, m, NULL, mesh, out);
}

/* The bytes on rank `rank` of tensor t under the plan. */
static ldt_status planned_bytes(ldt_plan *plan, ldt_tensor *t, const ldt_mesh *mesh, int rank, int64_t *bytes) {
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_shape s;
    ldt_spec spec;
    ldt_region reg;
    ldt_status st;
    ldt_tensor_shape(t, &s);
    if ((st = ldt_plan_placements(plan, t, pl, LDT_MAX_DIMS)) != LDT_OK ||
        (st = ldt_spec_init(&spec, mesh, &s, pl, ldt_mesh_ndim(mesh), ldt_tensor_dtype(t))) != LDT_OK ||
        (st = ldt_layout(&spec, rank, &reg)) != LDT_OK)
        return st;
    *bytes = reg.numel * (int64_t)ldt_dtype_size(ldt_tensor_dtype(t));
    return LDT_OK;
}

ldt_status cli_memory_per_rank_optim(ldt_plan *plan, ldt_model *m, const ldt_optim *o, const ldt_mesh *mesh,
                                     cli_memory *out) {
    /* one rank per class of ranks alike: a huge meta mesh costs what a few ranks do */
    int nr = 0, np = ldt_model_nparams(m), *ranks = NULL;
    int64_t *bytes = NULL, *opt = NULL, *counts = NULL;
    ldt_status st = ldt_plan_rank_classes(plan, NULL, NULL, 0, &nr);
    memset(out, 0, sizeof *out);
    out->activations_saved = -1;
    if (st != LDT_OK) return st;
    bytes = calloc((size_t)nr, sizeof *bytes);
    opt = calloc((size_t)nr, sizeof *opt);
    counts = calloc((size_t)nr, sizeof *counts);
    ranks = calloc((size_t)nr, sizeof *ranks);
    if (!bytes || !opt || !counts || !ranks) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "memory per rank: out of memory");
        goto done;
    }
    if ((st = ldt_plan_rank_classes(plan, ranks, counts, nr, &nr)) != LDT_OK) goto done;
    for (int i = 0; i < np && st == LDT_OK; i++) {
        ldt_tensor *w = ldt_model_param(m, i, NULL);
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_shape s;
        ldt_spec spec;
        ldt_dtype dt = ldt_tensor_dtype(w);
        ldt_tensor_shape(w, &s);
        if ((st = ldt_plan_placements(plan, w, pl, LDT_MAX_DIMS)) != LDT_OK ||
            (st = ldt_spec_init(&spec, mesh, &s, pl, ldt_mesh_ndim(mesh), dt)) != LDT_OK)
            break;
        for (int r = 0; r < nr && st == LDT_OK; r++) {
            ldt_region reg;
            if ((st = ldt_layout(&spec, ranks[r], &reg)) != LDT_OK) break;
            bytes[r] += reg.numel * (int64_t)ldt_dtype_size(dt);
            if (!o) opt[r] += reg.numel * optimizer_bytes_per_elem(dt);
            for (int k = 0; o && k < 3 && st == LDT_OK; k++) { /* the optimizer's own states, as planned */
                ldt_tensor *t = ldt_optim_state(o, i, k);
                int64_t b = 0;
                if (t && (st = planned_bytes(plan, t, mesh, ranks[r], &b)) == LDT_OK) opt[r] += b;
            }
        }
    }
    for (int r = 0; r < nr && st == LDT_OK; r++) {
        int64_t arena, peak;
        if ((st = ldt_plan_arena_bytes(plan, ranks[r], &arena)) != LDT_OK) break;
        peak = 2 * bytes[r] + opt[r] + arena;
        out->params_all_ranks += (double)bytes[r] * (double)counts[r];
        if (bytes[r] > out->params) out->params = out->grads = bytes[r];
        if (opt[r] > out->optimizer) out->optimizer = opt[r];
        if (arena > out->activations_peak) out->activations_peak = arena;
        if (peak > out->peak) out->peak = peak;
    }
done:
    free(bytes);
    free(opt);
    free(counts);
    free(ranks);
    return st;
}

void cli_memory_json(FILE *f, const cli_memory *m) {
    fprintf(f, "\"memory_per_rank\":{\"params\":%lld,\"grads\":%lld,\"optimizer\":%lld,"
               "\"activations_peak\":%lld,\"peak\":%lld",
            (long long)m->params, (long long)m->grads, (long long)m->optimizer, (long long)m->activations_peak,
            (long long)m->peak);
    if (m->activations_saved >= 0) fprintf(f, ",\"activations_saved\":%lld", (long long)m->activations_saved);
    fputc('}', f);
}

void cli_config_json(FILE *f, const char *kind, const ldt_model_config *c, const char *pins,
                     const ldt_mesh *mesh) {
    char m[256];
    ldt_mesh_format(mesh, m, sizeof m);
    fprintf(f, "\"config\":{\"model\":\"%s\",\"layers\":%lld,\"hidden\":%lld,\"heads\":%lld,\"vocab\":%lld,"
               "\"seq\":%lld,\"batch\":%lld,\"dtype\":\"%s\",\"pins\":\"%s\",\"mesh\":\"%s\"}",
            kind, (long long)c->layers, (long long)c->hidden, (long long)c->heads, (long long)c->vocab,
            (long long)c->seq, (long long)c->batch, ldt_dtype_name(c->dtype), pins, m);
}

ldt_status cli_profile(const cli_flag *flags, int nflags, const ldt_mesh *mesh, ldt_cost_model *cm) {
    return ldt_cost_model_default(cli_get(flags, nflags, "profile"), mesh, cm, NULL);
}

void cli_profile_json(FILE *f, const ldt_cost_model *cm) {
    fputs("\"profile\":\"", f);
    for (const char *c = cm->name; c < cm->name + sizeof cm->name && *c; c++) {
        if (*c == '"' || *c == '\\') fputc('\\', f);
        if ((unsigned char)*c >= 0x20) fputc(*c, f);
    }
    fputc('"', f);
}
