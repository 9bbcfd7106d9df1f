/* The ldt CLI: `ldt layout` JSON against hand-derived regions, help, and bad input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "ldt/planner.h"
#include "tests/cli_run.h"


static int64_t num(const cJSON *arr, int i) {
    return (int64_t)cJSON_GetArrayItem(arr, i)->valuedouble;
}

Test(cli, layout_json_2x3) {
    static char out[1 << 16];
    cJSON *root, *ranks;
    /* rows 7 over 2: 4,3 at 0,4; cols 5 over 3: 2,2,1 at 0,2,4 */
    static const int64_t rows_len[2] = {4, 3}, rows_off[2] = {0, 4};
    static const int64_t cols_len[3] = {2, 2, 1}, cols_off[3] = {0, 2, 4};
    cr_assert_eq(run("layout --mesh 2x3 --shape 7,5 --placements S0,S1 --json", out, sizeof out, 0), 0);
    root = cJSON_Parse(out);
    cr_assert_not_null(root, "not JSON: %s", out);
    cr_expect_str_eq(cJSON_GetObjectItem(root, "mesh")->valuestring, "2x3");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "mesh_shape")), 2);
    cr_expect_eq(num(cJSON_GetObjectItem(root, "mesh_shape"), 1), 3);
    cr_expect_eq(num(cJSON_GetObjectItem(root, "shape"), 0), 7);
    cr_expect_str_eq(cJSON_GetObjectItem(root, "placements")->valuestring, "S0,S1");
    ranks = cJSON_GetObjectItem(root, "ranks");
    cr_assert_eq(cJSON_GetArraySize(ranks), 6);
    for (int r = 0; r < 6; r++) {
        cJSON *e = cJSON_GetArrayItem(ranks, r);
        int i = r / 3, j = r % 3;
        cr_expect_eq(cJSON_GetObjectItem(e, "rank")->valueint, r);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "coord"), 0), i);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "coord"), 1), j);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "local_shape"), 0), rows_len[i], "rank %d", r);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "local_shape"), 1), cols_len[j], "rank %d", r);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "offset"), 0), rows_off[i], "rank %d", r);
        cr_expect_eq(num(cJSON_GetObjectItem(e, "offset"), 1), cols_off[j], "rank %d", r);
        cr_expect_null(cJSON_GetObjectItem(e, "slices"));
    }
    cJSON_Delete(root);
}

Test(cli, layout_json_interleaved_slices) {
    static char out[1 << 16];
    cJSON *root, *slices;
    /* 6 rows as 3 blocks of 2 over 2 ranks: rank 1 holds rows 1, 3, 5 */
    cr_assert_eq(run("layout --mesh 2 --shape 6,4 --placements IS0:3 --json", out, sizeof out, 0), 0);
    root = cJSON_Parse(out);
    cr_assert_not_null(root, "not JSON: %s", out);
    slices = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "ranks"), 1), "slices");
    cr_assert_eq(cJSON_GetArraySize(slices), 3);
    for (int k = 0; k < 3; k++) {
        cJSON *s = cJSON_GetArrayItem(slices, k);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "offset"), 0), 1 + 2 * k);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "offset"), 1), 0);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "shape"), 0), 1);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "shape"), 1), 4);
    }
    cJSON_Delete(root);
}

Test(cli, layout_table_and_help) {
    static char out[1 << 16];
    cr_assert_eq(run("layout --mesh 2x2 --shape 7,5 --placements S0,S1", out, sizeof out, 0), 0);
    cr_expect(strstr(out, "[7,5] f32 (S0,S1) on 2x2") != NULL, "%s", out);
    cr_expect(strstr(out, "[4,3]") != NULL, "rank 3's local shape missing: %s", out);
    cr_assert_eq(run("--help", out, sizeof out, 0), 0);
    cr_expect(strstr(out, "layout") != NULL, "%s", out);
    cr_assert_eq(run("layout --help", out, sizeof out, 0), 0);
    for (const char *flag = "--mesh\0--shape\0--placements\0--dtype\0--json\0"; *flag;
         flag += strlen(flag) + 1)
        cr_expect(strstr(out, flag) != NULL, "help lacks %s", flag);
    cr_assert_eq(run("info", out, sizeof out, 0), 0);
    cr_expect(strstr(out, "cuda_devices:") != NULL, "%s", out);
}

Test(cli, bad_input_exits_nonzero_with_message) {
    static const struct {
        const char *args, *needle;
    } rows[] = {
        {"layout --mesh 2x2 --shape 7,5 --placements S0", "1 placements for mesh 2x2"},
        {"layout --mesh 2x2 --shape 7,5 --placements S0,S7", "dim 7 is out of range"},
        {"layout --mesh 2x0 --shape 7,5 --placements S0,R", "mesh"},
        {"layout --mesh 2 --shape 7 --placements IS0:2", "2 equal blocks"},
        {"layout --mesh 2 --shape 7,x --placements R", "shape"},
        {"layout --mesh 2 --shape 7 --placements R --dtype f7", "unknown dtype 'f7'"},
        {"layout --mesh 2 --shape 7", "--placements is required"},
        {"layout --bogus 1", "unknown flag"},
        {"frobnicate", "unknown command"},
        {"plan --model mlp --mesh 4 --program --rank 9223372036854775807",
         "--rank 9223372036854775807 is not on mesh 4, expected 0 to 3"},
        {"plan --model mlp --mesh 4 --program --rank -1", "--rank is '-1', expected an integer >= 0"},
    };
    static char out[1 << 16];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = run(rows[i].args, out, sizeof out, 1);
        cr_expect_neq(rc, 0, "'%s' exited 0", rows[i].args);
        cr_expect(strstr(out, rows[i].needle) != NULL, "'%s': %s", rows[i].args, out);
    }
}

/* ldt plan --json: the contract's fields, Megatron's one all_reduce per mlp block (the
 * heuristic's plan, --plan-limit 1; the exact search finds a cheaper reduce_scatter plan). */
Test(cli, plan_json_megatron_mlp) {
    static char out[1 << 20];
    cJSON *j, *nodes, *tot;
    int all_reduces = 0;
    cr_assert_eq(run("plan --model mlp --layers 2 --mesh tp=4 --pins megatron --plan-limit 1 --json", out, sizeof out, 0), 0,
                 "%s", out);
    j = cJSON_Parse(out);
    cr_assert(j != NULL, "not JSON: %s", out);
    nodes = cJSON_GetObjectItem(j, "nodes");
    tot = cJSON_GetObjectItem(j, "totals");
    cr_assert(cJSON_IsArray(nodes) && cJSON_IsObject(tot));
    for (int i = 0; i < cJSON_GetArraySize(nodes); i++) {
        cJSON *n = cJSON_GetArrayItem(nodes, i), *r = cJSON_GetObjectItem(n, "redistributions");
        cr_assert(cJSON_IsString(cJSON_GetObjectItem(n, "op")));
        cr_assert(cJSON_IsArray(cJSON_GetObjectItem(n, "in")));
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(n, "out")), 1);
        for (int k = 0; k < cJSON_GetArraySize(r); k++) {
            cJSON *s = cJSON_GetArrayItem(r, k);
            const char *c = cJSON_GetObjectItem(s, "collective")->valuestring;
            cr_assert(cJSON_IsString(cJSON_GetObjectItem(s, "from")) &&
                      cJSON_IsString(cJSON_GetObjectItem(s, "to")) &&
                      cJSON_IsArray(cJSON_GetObjectItem(s, "mesh_dims")) &&
                      cJSON_GetObjectItem(s, "tensor_bytes")->valuedouble > 0);
            if (strcmp(c, "all_reduce") == 0) {
                all_reduces++;
                cr_assert_str_eq(cJSON_GetObjectItem(s, "from")->valuestring, "P");
                cr_assert_str_eq(cJSON_GetObjectItem(s, "to")->valuestring, "R");
                /* the [4, 64] f32 activation */
                cr_assert_eq(cJSON_GetObjectItem(s, "tensor_bytes")->valuedouble, 4 * 64 * 4);
            }
        }
    }
    cr_assert_eq(all_reduces, 2);
    cr_assert_eq(cJSON_GetObjectItem(tot, "collectives")->valuedouble, 2);
    cr_assert_gt(cJSON_GetObjectItem(tot, "comm_bytes_per_rank")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(tot, "modeled_comm_seconds")->valuedouble, 0);
    cr_assert_geq(cJSON_GetObjectItem(tot, "plan_seconds")->valuedouble, 0);
    /* how it was planned: past the work limit, the heuristic with a proven gap */
    cr_assert_str_eq(cJSON_GetObjectItem(tot, "plan_method")->valuestring, "heuristic");
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(tot, "plan_gap")));
    cr_assert_geq(cJSON_GetObjectItem(tot, "plan_gap")->valuedouble, 0);
    cr_assert_leq(cJSON_GetObjectItem(tot, "plan_gap")->valuedouble, 1);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(tot, "plan_tied")));
    cJSON_Delete(j);
    /* the default: the exact search, gap 0 */
    cr_assert_eq(run("plan --model mlp --layers 2 --mesh tp=4 --pins megatron --json", out, sizeof out, 0), 0,
                 "%s", out);
    j = cJSON_Parse(out);
    cr_assert(j != NULL);
    tot = cJSON_GetObjectItem(j, "totals");
    cr_assert_str_eq(cJSON_GetObjectItem(tot, "plan_method")->valuestring, "exact");
    cr_assert_eq(cJSON_GetObjectItem(tot, "plan_gap")->valuedouble, 0);
    cJSON_Delete(j);
    /* a bad --plan-limit is refused, naming the flag */
    cr_assert_eq(run("plan --model mlp --plan-limit 0", out, sizeof out, 1), 2, "%s", out);
    cr_assert(strstr(out, "--plan-limit '0'") != NULL, "%s", out);
    cr_assert_eq(run("plan --model mlp --plan-limit 12x", out, sizeof out, 1), 2, "%s", out);
    cr_assert(strstr(out, "expected a positive count") != NULL, "%s", out);
}

Test(cli, plan_dot_program_and_errors) {
    static char out[1 << 20];
    char cmd[256], path[64];
    FILE *f;
    char dot[4096];
    size_t n;
    snprintf(path, sizeof path, "/tmp/ldt_test_plan_%d.dot", (int)getpid());
    snprintf(cmd, sizeof cmd, "plan --model mlp --layers 1 --mesh tp=2 --pins megatron --plan-limit 1 --dot %s --program --rank 1",
             path);
    cr_assert_eq(run(cmd, out, sizeof out, 0), 0, "%s", out);
    cr_assert(strstr(out, "program rank 1:") && strstr(out, "all_reduce"), "%s", out);
    f = fopen(path, "r");
    cr_assert(f != NULL);
    n = fread(dot, 1, sizeof dot - 1, f);
    dot[n] = '\0';
    fclose(f);
    remove(path);
    cr_assert(strstr(dot, "digraph plan") && strstr(dot, "label=\"all_reduce\""), "%s", dot);
    cr_assert_eq(run("plan --model nope", out, sizeof out, 1), 1);
    cr_assert(strstr(out, "unknown kind 'nope'"), "%s", out);
    cr_assert_eq(run("plan --layers 2", out, sizeof out, 1), 2);
    cr_assert(strstr(out, "--model is required"), "%s", out);
    cr_assert_eq(run("plan --model mlp --pins zero", out, sizeof out, 1), 1);
    cr_assert(strstr(out, "unknown scheme 'zero'") && strstr(out, "megatron-sp"), "%s", out);
    /* --sp is sequence parallelism on the megatron pins: with other pins it is refused */
    cr_assert_eq(run("plan --model gpt --sp --pins none", out, sizeof out, 1), 2, "%s", out);
    cr_assert(strstr(out, "--sp with --pins none"), "%s", out);
    cr_assert_eq(run("plan --model mlp --mesh 4 --layers 0", out, sizeof out, 1), 2);
    cr_assert_eq(run("plan --model mlp --mesh tp=4 --pins megatron --strict", out, sizeof out, 1), 1);
    cr_assert(strstr(out, "strict"), "%s", out);
}

/* ---- ldt rand ----------------------------------------------------------------------------- */

/* `ldt rand ... --json`: the hash string and the values array (caller frees root). */
static cJSON *rand_json(const char *args, const char **hash) {
    static char out[1 << 14];
    char cmd[512];
    cJSON *root;
    snprintf(cmd, sizeof cmd, "rand %s --json", args);
    cr_assert_eq(run(cmd, out, sizeof out, 0), 0, "ldt %s failed", cmd);
    root = cJSON_Parse(out);
    cr_assert_not_null(root, "not JSON: %s", out);
    cr_assert(cJSON_IsString(cJSON_GetObjectItem(root, "xxh64")), "%s", out);
    *hash = cJSON_GetObjectItem(root, "xxh64")->valuestring;
    cr_assert_eq(strlen(*hash), 16, "%s", out);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "values")), 8, "%s", out);
    return root;
}

Test(cli, rand_same_hash_on_every_mesh) {
    static const char *dists[] = {"normal", "uniform", "trunc_normal", "bernoulli", "randint"};
    static const char *meshes[] = {"--mesh 2x3 --placements S1,S0", "--mesh 4 --placements S0",
                                   "--mesh 1", "--mesh 2x2 --placements S0,S0",
                                   "--mesh 3 --placements S1"};
    for (int d = 0; d < 5; d++) {
        char first[17] = {0}, args[256];
        char *values0 = NULL;
        for (int m = 0; m < 5; m++) {
            const char *h;
            cJSON *root;
            char *vals;
            snprintf(args, sizeof args, "%s --shape 1001,37 --dist %s --seed 7", meshes[m], dists[d]);
            root = rand_json(args, &h);
            vals = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "values"));
            if (m == 0) {
                memcpy(first, h, 16);
                values0 = vals;
            } else {
                cr_expect_str_eq(h, first, "%s: %s vs %s", args, h, first);
                cr_expect_str_eq(vals, values0, "%s", args);
                free(vals);
            }
            cJSON_Delete(root);
        }
        free(values0);
    }
}

Test(cli, rand_seed_offset_and_values) {
    const char *h;
    char h0[17] = {0};
    cJSON *root = rand_json("--mesh 2 --shape 10 --dist randint --low 0 --high 10 --seed 7", &h);
    cJSON *v = cJSON_GetObjectItem(root, "values");
    memcpy(h0, h, 16);
    for (int i = 0; i < 8; i++) {
        double x = cJSON_GetArrayItem(v, i)->valuedouble;
        cr_expect(x >= 0 && x < 10 && x == (double)(long long)x, "value %g", x);
    }
    cJSON_Delete(root);
    /* another seed, another offset: other values */
    root = rand_json("--mesh 2 --shape 10 --dist randint --seed 8", &h);
    cr_expect_str_neq(h, h0);
    cJSON_Delete(root);
    root = rand_json("--mesh 2 --shape 10 --dist randint --seed 7 --offset 1", &h);
    cr_expect_str_neq(h, h0);
    cJSON_Delete(root);
    /* trunc_normal stays in its bounds; a tiny tensor gives fewer values */
    root = rand_json("--mesh 2x2 --placements S0,S1 --shape 8,9 --dist trunc_normal --a -0.5 --b 0.25",
                     &h);
    v = cJSON_GetObjectItem(root, "values");
    for (int i = 0; i < 8; i++) {
        double x = cJSON_GetArrayItem(v, i)->valuedouble;
        cr_expect(x >= -0.5 && x <= 0.25, "value %g", x);
    }
    cJSON_Delete(root);
}

Test(cli, rand_text_help_and_bad_input) {
    static char out[1 << 14];
    cr_assert_eq(run("rand --mesh 2 --shape 3,4 --dist uniform", out, sizeof out, 0), 0);
    cr_expect(strstr(out, "xxh64") && strstr(out, "uniform"), "%s", out);
    cr_assert_eq(run("rand --help", out, sizeof out, 0), 0);
    cr_expect(strstr(out, "--dist") != NULL);
    static const struct {
        const char *args, *needle;
    } bad[] = {
        {"rand --shape 4", "--mesh is required"},
        {"rand --mesh 2", "--shape is required"},
        {"rand --mesh 2 --shape 4 --dist gamma", "--dist is 'gamma'"},
        {"rand --mesh 2 --shape 4 --seed -1", "--seed"},
        {"rand --mesh 2 --shape 4 --seed x", "--seed"},
        {"rand --mesh 2 --shape 4 --std nan", "--std"},
        {"rand --mesh 2x2 --shape 4 --placements S0", "one per mesh dim"},
        {"rand --mesh 2 --shape 4 --placements S3", "--placements"},
        {"rand --mesh 2 --shape 4 --dist trunc_normal --a 1 --b 1", "a < b"},
        {"rand --mesh 2 --shape 4 --dist normal --std -1", "std"},
        {"rand --mesh 2 --shape 4 --dist randint --low 3 --high 3", "low < high"},
        {"rand --mesh 2 --shape 4 --dist randint --high 99999999", "holds exactly"},
        {"rand --mesh 2 --shape 4 --dist bernoulli --p 2", "p = 2"},
        {"rand --mesh 2 --shape 4 --bogus 1", "unknown flag"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(run(bad[i].args, out, sizeof out, 1), 2, "ldt %s", bad[i].args);
        cr_expect(strstr(out, bad[i].needle) != NULL, "ldt %s: '%s' lacks '%s'", bad[i].args, out,
                  bad[i].needle);
    }
}

/* Every command's help: exit 0, a usage line, and every flag row names a flag (a flag table
 * whose count runs past its entries printed "--(null)"). */
Test(cli, every_command_has_whole_help) {
    static char out[1 << 16];
    static const char *cmds[] = {"layout", "info", "redistribute", "plan", "run", "train", "step-bench",
                                 "meta-init", "calibrate", "rand", "ckpt", "spec", "predict"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s: %s", cmds[i], out);
        cr_assert(strstr(out, "usage") != NULL, "%s: %s", cmds[i], out);
        cr_assert(strstr(out, "(null)") == NULL, "%s help prints a missing entry:\n%s", cmds[i], out);
    }
}

/* ---- version, help, defaults -------------------------------------------------------------- */

static const char *const k_cmds[] = {"layout", "info", "redistribute", "plan", "run", "train", "step-bench",
                                     "meta-init", "calibrate", "rand", "ckpt", "spec", "predict"};
#define NCMDS (sizeof k_cmds / sizeof k_cmds[0])

/* `ldt --version` is the CMake project's version; -h, --help and `ldt help CMD` print the same. */
Test(cli, version_and_help_everywhere) {
    static char out[1 << 16], ref[1 << 16];
    char args[128];
    cr_assert_eq(run("--version", out, sizeof out, 1), 0, "%s", out);
    cr_assert_str_eq(out, "ldt " LDT_PROJECT_VERSION "\n");
    for (size_t i = 0; i < NCMDS; i++) {
        snprintf(args, sizeof args, "%s --help", k_cmds[i]);
        cr_assert_eq(run(args, ref, sizeof ref, 1), 0, "%s: %s", args, ref);
        snprintf(args, sizeof args, "%s -h", k_cmds[i]);
        cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s: %s", args, out);
        cr_expect_str_eq(out, ref, "%s differs from --help", args);
        snprintf(args, sizeof args, "help %s", k_cmds[i]);
        cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s: %s", args, out);
        cr_expect_str_eq(out, ref, "ldt %s differs from --help", args);
    }
    /* ckpt's subcommands each have their own */
    cr_assert_eq(run("ckpt merge --help", ref, sizeof ref, 1), 0, "%s", ref);
    cr_expect(strstr(ref, "usage: ldt ckpt merge DIR OUT.safetensors") != NULL, "%s", ref);
    cr_assert_eq(run("help ckpt merge", out, sizeof out, 1), 0, "%s", out);
    cr_expect_str_eq(out, ref);
    cr_assert_eq(run("ckpt info -h", out, sizeof out, 1), 0, "%s", out);
    cr_expect(strstr(out, "usage: ldt ckpt info DIR [--json]") && strstr(out, "--json"), "%s", out);
    cr_assert_eq(run("help nope", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "unknown command 'nope'") != NULL, "%s", out);
    cr_assert_eq(run("ckpt frob", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "unknown subcommand 'frob'") != NULL, "%s", out);
}

/* The default a command's help names for --flag: the text after "(default " up to ')'. */
static int help_default(const char *help, const char *flag, char *val, size_t cap) {
    char key[64];
    const char *p, *eol, *d;
    snprintf(key, sizeof key, "  --%s VALUE ", flag);
    if (!(p = strstr(help, key))) return 0;
    eol = strchr(p, '\n');
    if (!(d = strstr(p, "(default ")) || (eol && d > eol)) return 0;
    d += strlen("(default ");
    snprintf(val, cap, "%.*s", (int)strcspn(d, ")"), d);
    return 1;
}

/* For every command that builds a model, its help names the model sizes, the pins and the mesh
 * it applies: run without those flags, the "config" it reports holds exactly those values. */
Test(cli, help_names_the_defaults_applied) {
    static char help[1 << 16], out[1 << 20];
    static const struct {
        const char *cmd, *args;
        int has_pins;
    } rows[] = {
        {"plan", "--model gpt --json", 1},
        {"run", "--steps 1 --json", 1},
        {"step-bench", "--steps 1 --json", 1},
        {"meta-init", "--model gpt --json", 1},
        {"train", "--steps 1 --sample 0 --json", 0},
    };
    static const char *sizes[] = {"layers", "hidden", "heads", "vocab", "seq", "batch"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char args[256], val[64];
        cJSON *j, *cfg;
        snprintf(args, sizeof args, "%s --help", rows[i].cmd);
        cr_assert_eq(run(args, help, sizeof help, 1), 0, "%s", help);
        snprintf(args, sizeof args, "%s %s", rows[i].cmd, rows[i].args);
        cr_assert_eq(run(args, out, sizeof out, 0), 0, "%s: %s", args, out);
        j = cJSON_Parse(out);
        cr_assert_not_null(j, "%s: not JSON: %.300s", args, out);
        cfg = cJSON_GetObjectItem(j, "config");
        cr_assert(cJSON_IsObject(cfg), "%s: no config: %.300s", args, out);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            cr_assert(help_default(help, sizes[k], val, sizeof val), "%s --help names no default for --%s",
                      rows[i].cmd, sizes[k]);
            cr_expect_eq(atoll(val), (long long)cJSON_GetObjectItem(cfg, sizes[k])->valuedouble,
                         "%s: help says --%s %s, the command applied %g", rows[i].cmd, sizes[k], val,
                         cJSON_GetObjectItem(cfg, sizes[k])->valuedouble);
        }
        cr_assert(help_default(help, "mesh", val, sizeof val), "%s --help names no default --mesh", rows[i].cmd);
        cr_expect_str_eq(val, cJSON_GetObjectItem(cfg, "mesh")->valuestring, "%s: --mesh", rows[i].cmd);
        if (rows[i].has_pins) {
            cr_assert(help_default(help, "pins", val, sizeof val), "%s --help names no default --pins", rows[i].cmd);
            cr_expect_str_eq(val, cJSON_GetObjectItem(cfg, "pins")->valuestring, "%s: --pins", rows[i].cmd);
            cr_expect_str_eq(val, "megatron", "%s: every command pins alike", rows[i].cmd);
        } else {
            cr_expect(strstr(help, "Pins: megatron") != NULL, "%s --help names its pins", rows[i].cmd);
            cr_expect_str_eq(cJSON_GetObjectItem(cfg, "pins")->valuestring, "megatron");
        }
        cJSON_Delete(j);
    }
}

/* The plan without --pins is the plan with the pins plan's help names (and not with none). */
Test(cli, plan_default_pins_plan_alike) {
    static char a[1 << 20], b[1 << 20], c[1 << 20];
    cJSON *ja, *jb, *jc;
    char *na, *nb, *nc;
    cr_assert_eq(run("plan --model mlp --mesh tp=4 --json", a, sizeof a, 0), 0, "%s", a);
    cr_assert_eq(run("plan --model mlp --mesh tp=4 --pins megatron --json", b, sizeof b, 0), 0, "%s", b);
    cr_assert_eq(run("plan --model mlp --mesh tp=4 --pins none --json", c, sizeof c, 0), 0, "%s", c);
    ja = cJSON_Parse(a), jb = cJSON_Parse(b), jc = cJSON_Parse(c);
    cr_assert(ja && jb && jc);
    na = cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "nodes"));
    nb = cJSON_PrintUnformatted(cJSON_GetObjectItem(jb, "nodes"));
    nc = cJSON_PrintUnformatted(cJSON_GetObjectItem(jc, "nodes"));
    cr_expect_str_eq(na, nb);
    cr_expect_str_neq(na, nc, "megatron and none plan alike: the comparison proves nothing");
    free(na), free(nb), free(nc);
    cJSON_Delete(ja), cJSON_Delete(jb), cJSON_Delete(jc);
}

/* A whole training step planned on a meta mesh (no data anywhere: the optimizer's updates are
 * assignments to meta tensors) is the plan the same step gets on a CPU mesh. */
Test(cli, plan_train_on_a_meta_mesh_plans_like_a_cpu_mesh) {
    static char a[1 << 20], b[1 << 20];
    cJSON *ja, *jb;
    char *na, *nb;
    const char *tot[] = {"collectives", "comm_bytes_per_rank", "redistributions", "nodes"};
    cr_assert_eq(run("plan --train --meta --model gpt --layers 2 --mesh dp=2,tp=2 --json", a, sizeof a, 0), 0, "%s", a);
    cr_assert_eq(run("plan --train --model gpt --layers 2 --mesh dp=2,tp=2 --json", b, sizeof b, 0), 0, "%s", b);
    ja = cJSON_Parse(a), jb = cJSON_Parse(b);
    cr_assert(ja && jb);
    na = cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "nodes"));
    nb = cJSON_PrintUnformatted(cJSON_GetObjectItem(jb, "nodes"));
    cr_assert(na && nb);
    cr_expect_str_eq(na, nb);
    cr_expect(strstr(na, "\"op\":\"sqrt\"") != NULL, "a training step: AdamW's update (sqrt of v) is planned");
    for (int i = 0; i < 4; i++) {
        cJSON *x = cJSON_GetObjectItem(cJSON_GetObjectItem(ja, "totals"), tot[i]);
        cJSON *y = cJSON_GetObjectItem(cJSON_GetObjectItem(jb, "totals"), tot[i]);
        cr_assert(x && y, "totals.%s", tot[i]);
        cr_expect_eq(x->valuedouble, y->valuedouble, "totals.%s: meta %g, cpu %g", tot[i], x->valuedouble,
                     y->valuedouble);
    }
    cr_expect_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(ja, "totals"), "collectives")->valuedouble, 0);
    free(na), free(nb);
    cJSON_Delete(ja), cJSON_Delete(jb);
}

/* ---- --json on info, calibrate and ckpt info ---------------------------------------------- */

Test(cli, info_json_matches_text) {
    static char out[1 << 12], text[1 << 12];
    cJSON *j;
    const char *keys[] = {"cuda", "nccl", "mpi"};
    cr_assert_eq(run("info --json", out, sizeof out, 0), 0, "%s", out);
    cr_assert_eq(run("info", text, sizeof text, 0), 0, "%s", text);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    for (int i = 0; i < 3; i++) {
        char line[64];
        const char *v = cJSON_GetObjectItem(j, keys[i])->valuestring;
        cr_assert(strcmp(v, "yes") == 0 || strcmp(v, "no") == 0 || strcmp(v, "emulated") == 0, "%s: %s", keys[i], v);
        snprintf(line, sizeof line, "%s: %s", keys[i], v); /* the text says the same, first word */
        cr_expect(strstr(text, line) != NULL, "'%s' not in:\n%s", line, text);
    }
    {
        char line[64];
        snprintf(line, sizeof line, "cuda_devices: %d\n", cJSON_GetObjectItem(j, "cuda_devices")->valueint);
        cr_expect(strstr(text, line) != NULL, "'%s' not in:\n%s", line, text);
    }
    cJSON_Delete(j);
    cr_assert_eq(run("info extra", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "unexpected argument 'extra'") != NULL, "%s", out);
}

Test(cli, calibrate_prints_without_out_and_json) {
    static char out[1 << 14], file[1 << 14];
    char path[64], args[128];
    FILE *f;
    size_t n;
    cJSON *j, *links;
    cr_assert_eq(run("calibrate --mesh dp=4 --quick", out, sizeof out, 1), 0, "%s", out);
    cr_expect(strstr(out, "latency_us") && strstr(out, "overhead_us") && !strstr(out, "wrote"), "%s", out);
    snprintf(path, sizeof path, "/tmp/ldt_test_profile_%d.json", (int)getpid());
    snprintf(args, sizeof args, "calibrate --mesh 2x2 --quick --json --out %s", path);
    cr_assert_eq(run(args, out, sizeof out, 0), 0, "%s", out);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "lazydt-cost-profile");
    cr_expect_str_eq(cJSON_GetObjectItem(j, "name")->valuestring, "calibrated");
    links = cJSON_GetObjectItem(j, "links");
    cr_assert_eq(cJSON_GetArraySize(links), 2, "one link per mesh dim: %s", out);
    for (int d = 0; d < 2; d++)
        cr_expect_gt(cJSON_GetObjectItem(cJSON_GetArrayItem(links, d), "bandwidth_gbps")->valuedouble, 0);
    cJSON_Delete(j);
    /* --out writes what --json prints */
    f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    n = fread(file, 1, sizeof file - 1, f);
    file[n] = '\0';
    fclose(f);
    remove(path);
    cr_expect_str_eq(file, out);
    cr_assert_eq(run("calibrate --quick", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "--mesh is required") != NULL, "%s", out);
    cr_assert_eq(run("calibrate --mesh 2 --backend nccl", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "--backend nccl, expected threads or mpi") != NULL, "%s", out);
}

/* --json's "fit": every timing with the fitted model's value, which is the profile's own
 * price of it (for a local op: local overhead + (its op's bytes factor times the bytes + the
 * bytes past the local knee, else the knee, times the local past-knee factor) / local
 * bandwidth, by hand); --save
 * writes the profile to the user cache, where ldt_cost_model_load reads the same links. */
Test(cli, calibrate_fit_and_save) {
    static char out[1 << 16];
    char dir[128], path[256];
    cJSON *j, *fit, *samples, *s;
    ldt_cost_model saved;
    int nlocal = 0;
    snprintf(dir, sizeof dir, "/tmp/ldt_test_cache_%d", (int)getpid());
    setenv("XDG_CACHE_HOME", dir, 1);
    cr_assert_eq(run("calibrate --mesh 2 --quick --save --json", out, sizeof out, 0), 0, "%s", out);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    fit = cJSON_GetObjectItem(j, "fit");
    cr_assert_not_null(fit, "%s", out);
    samples = cJSON_GetObjectItem(fit, "samples");
    cr_assert_gt(cJSON_GetArraySize(samples), 8);
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(fit, "rms_residual")));
    { /* what else ran on the machine meanwhile (test_core checks the counting itself) */
        cJSON *h = cJSON_GetObjectItem(fit, "host");
        cr_assert_not_null(h, "%s", out);
        cr_expect_eq(cJSON_GetObjectItem(h, "cores")->valueint, (int)sysconf(_SC_NPROCESSORS_ONLN));
        cr_expect_gt(cJSON_GetObjectItem(h, "wall_s")->valuedouble, 0);
        cr_expect_gt(cJSON_GetObjectItem(h, "own_cpu_s")->valuedouble, 0);
        if (cJSON_GetObjectItem(h, "others_share")) {
            double sh = cJSON_GetObjectItem(h, "others_share")->valuedouble;
            cr_expect(sh >= 0 && sh <= 1.05, "others_share %g", sh);
        }
        { /* the cores' round trip before and after: a time, or -1 (one CPU, or cores too busy) */
            cJSON *rt = cJSON_GetObjectItem(h, "core_round_trip_ns");
            cr_assert_eq(cJSON_GetArraySize(rt), 2, "%s", out);
            for (int i = 0; i < 2; i++) {
                double v = cJSON_GetArrayItem(rt, i)->valuedouble;
                cr_expect(v == -1 || (sysconf(_SC_NPROCESSORS_ONLN) >= 2 && v > 1 && v < 3e6), "round trip %g ns", v);
            }
        }
    }
    cJSON_ArrayForEach(s, samples) {
        const char *c = cJSON_GetObjectItem(s, "collective")->valuestring;
        double meas = cJSON_GetObjectItem(s, "measured_s")->valuedouble;
        double mod = cJSON_GetObjectItem(s, "modeled_s")->valuedouble;
        double res = cJSON_GetObjectItem(s, "residual")->valuedouble;
        cr_expect_lt(fabs(res - (meas - mod) / meas), 1e-9, "%s: residual %g", c, res);
        if (strncmp(c, "local_", 6) == 0) {
            double b = cJSON_GetObjectItem(s, "bytes")->valuedouble;
            cJSON *cache = cJSON_GetObjectItem(j, "cache"); /* the knee, if the fit found one */
            cJSON *lk = cache ? cJSON_GetObjectItem(cache, "local_bytes") : NULL;
            cJSON *lf = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "local_bytes_factor"), c);
            double knee = lk ? lk->valuedouble : cache ? cJSON_GetObjectItem(cache, "bytes")->valuedouble : 0;
            double past = cache ? cJSON_GetObjectItem(cJSON_GetObjectItem(cache, "beyond"), "local")->valuedouble : 0;
            double want = cJSON_GetObjectItem(j, "local_overhead_s")->valuedouble +
                          ((lf ? lf->valuedouble : 1) * b + (knee > 0 && b > knee ? past * (b - knee) : 0)) /
                              (cJSON_GetObjectItem(j, "local_bandwidth_gbps")->valuedouble * 1e9);
            cr_expect_lt(fabs(mod - want), 1e-9 * want + 1e-15, "%s: modeled %g, by hand %g", c, mod, want);
            nlocal++;
        }
    }
    cr_expect_gt(nlocal, 0);
    snprintf(path, sizeof path, "%s/lazydt/profile.json", dir);
    cr_assert_eq(ldt_cost_model_load(path, &saved), LDT_OK, "%s", ldt_last_error());
    cr_expect_str_eq(saved.name, "calibrated");
    cr_expect_eq(saved.nlinks, 1);
    cr_expect_lt(fabs(saved.links[0].bandwidth_Bps / 1e9 -
                      cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "links"), 0), "bandwidth_gbps")->valuedouble),
                 1e-6 * saved.links[0].bandwidth_Bps / 1e9);
    cJSON_Delete(j);
    remove(path);
    snprintf(path, sizeof path, "%s/lazydt", dir);
    rmdir(path);
    rmdir(dir);
    unsetenv("XDG_CACHE_HOME");
    cr_assert_eq(run("calibrate --mesh 2 --reps 0", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "--reps") != NULL, "%s", out);
    cr_assert_eq(run("calibrate --mesh 2 --rounds 0", out, sizeof out, 1), 2);
    cr_expect(strstr(out, "--rounds") != NULL, "%s", out);
    cr_assert_eq(run("calibrate --mesh 2 --quick --rounds 101", out, sizeof out, 1), 1);
    cr_expect(strstr(out, "101 rounds, expected 0 (the default) to 100") != NULL, "%s", out);
}

/* A checkpoint of the mlp on tp=4 (meta-init --save), described by ckpt info --json: w1 [32,8]
 * S0 is four [8,8] shards of 256 bytes at rows 0, 8, 16, 24. */
Test(cli, ckpt_info_json) {
    static char out[1 << 16];
    char dir[64], args[256];
    cJSON *j, *t, *w1 = NULL;
    snprintf(dir, sizeof dir, "/tmp/ldt-ckpt-info-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args, "meta-init --model mlp --hidden 8 --layers 1 --batch 2 --mesh tp=4 --save %s/c", dir);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    snprintf(args, sizeof args, "ckpt info %s/c --json", dir);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    cr_expect_eq(cJSON_GetObjectItem(j, "rank_files")->valueint, 4);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "lazydt-checkpoint");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tensors")), 4, "%s", out);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "tensors"))
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "l.0.w1") == 0) w1 = t;
    cr_assert_not_null(w1, "%s", out);
    cr_expect_str_eq(cJSON_GetObjectItem(w1, "placements")->valuestring, "S0");
    cr_expect_str_eq(cJSON_GetObjectItem(w1, "dtype")->valuestring, "f32");
    cr_expect_eq(num(cJSON_GetObjectItem(w1, "shape"), 0), 32);
    cr_expect_eq(cJSON_GetObjectItem(w1, "tensor_bytes")->valuedouble, 32 * 8 * 4);
    cr_expect_eq(cJSON_GetObjectItem(w1, "stored_bytes")->valuedouble, 32 * 8 * 4);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(w1, "shards")), 4);
    for (int r = 0; r < 4; r++) {
        cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(w1, "shards"), r);
        cr_expect_eq(cJSON_GetObjectItem(s, "rank")->valueint, r);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "local_shape"), 0), 8);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "local_shape"), 1), 8);
        cr_expect_eq(num(cJSON_GetObjectItem(s, "offset"), 0), 8 * r);
        cr_expect_eq(cJSON_GetObjectItem(s, "bytes")->valuedouble, 8 * 8 * 4);
    }
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(j, "manifest")), "%s", out);
    cr_expect_eq(strlen(cJSON_GetObjectItem(j, "save_id")->valuestring), 16, "%s", out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "unlisted_files")), 0, "%s", out);
    cJSON_Delete(j);
    /* a stray file (a rank file of no save) is reported, not used */
    snprintf(args, sizeof args, "touch %s/c/rank-7.safetensors %s/c/notes.txt", dir, dir);
    cr_assert_eq(system(args), 0);
    snprintf(args, sizeof args, "ckpt info %s/c --json", dir);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "unlisted_files")), 2, "%s", out);
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "unlisted_files"), 0), "file")
                         ->valuestring, "notes.txt");
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "unlisted_files"), 1), "file")
                         ->valuestring, "rank-7.safetensors");
    cr_expect(strstr(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "unlisted_files"), 1), "why")
                         ->valuestring, "not in the manifest") != NULL, "%s", out);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tensors")), 4, "%s", out);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "ckpt info %s/c --yaml", dir);
    cr_expect_eq(run(args, out, sizeof out, 1), 2);
    cr_expect(strstr(out, "unknown flag '--yaml'") != NULL, "%s", out);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}

/* ---- plan table, trace args, DOT ---------------------------------------------------------- */

/* Megatron's mlp on tp=4, 2 blocks: the table lists every op with its strategy and each
 * all_reduce of a [4,64] f32 activation: 1024 bytes, of which a ring over 4 ranks sends
 * 2 (4-1)/4 1024 = 1536 per rank; totals 2 collectives and 3072 bytes. */
/* The heuristic's plan (--plan-limit 1: the exact search prefers a reduce_scatter plan the
 * model prices lower). Under the legacy uniform preset: the residual add takes the all_reduce at %8 (cpu-threads
 * moves it to the next linear, %11: the same collectives, a local_partial more). 5 moves:
 * with elementwise ops priced by their FLOPs and a launch, the loss's mul stays Partial and
 * one local_partial of the old plan's 6 is gone, at the same collectives. */
Test(cli, plan_table_ops_and_moves) {
    static char out[1 << 16];
    int ar = 0;
    const char *p;
    cr_assert_eq(run("plan --model mlp --mesh tp=4 --pins megatron --layers 2 --plan-limit 1 --profile uniform", out, sizeof out, 0), 0, "%s", out);
    cr_expect(strstr(out, "plan of mlp on mesh tp=4: 21 ops") != NULL, "%s", out);
    /* the column heads, then rows of the real plan: the column-parallel W1, the row-parallel W2 */
    cr_expect(strstr(out, "node  op      name    shape     strategy (inputs -> output)\n") != NULL, "%s", out);
    cr_expect(strstr(out, "%1    param   l.0.w1  [256,64]  -> S0\n") != NULL, "%s", out);
    cr_expect(strstr(out, "%3    linear          [4,256]   R S0 S0 -> S1\n") != NULL, "%s", out);
    cr_expect(strstr(out, "%7    linear          [4,64]    S1 S1 P -> P\n") != NULL, "%s", out);
    cr_expect(strstr(out, "%20   mean            []        P -> P\n") != NULL, "%s", out);
    for (p = out; (p = strstr(p, "  all_reduce  ")); p++) {
        char line[256];
        long long bytes = 0, tensor = 0;
        const char *eol = strchr(p, '\n');
        snprintf(line, sizeof line, "%.*s", (int)(eol - p), p);
        cr_assert_eq(sscanf(line, " all_reduce [0] P -> R %lld %lld", &bytes, &tensor), 2, "%s", line);
        cr_expect_eq(bytes, 2 * (4 - 1) * 1024 / 4, "%s", line);
        cr_expect_eq(tensor, 4 * 64 * 4, "%s", line);
        ar++;
    }
    cr_expect_eq(ar, 2, "%s", out);
    cr_expect(strstr(out, "node  input  collective     mesh_dims  from -> to  bytes_per_rank  tensor_bytes  modeled_us\n"),
              "%s", out);
    cr_expect(strstr(out, "%8        1  all_reduce     [0]        P -> R                1536          1024") != NULL,
              "%s", out);
    cr_expect(strstr(out, "totals: 2 collectives per rank, 5 redistributions, 3072 comm bytes per rank") != NULL,
              "%s", out);
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    char *b;
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    return b;
}

/* The Chrome trace of mlp on dp=2,tp=2: rank 3's all_reduce over tp reduces its [2,64] f32
 * rows (the batch of 4 split over dp): 512 bytes, with its tp partner rank 2; a ring of 2
 * sends 2 (2-1)/2 512 = 512 bytes. */
Test(cli, trace_comm_events_carry_args) {
    static char out[1 << 16];
    char path[64], args[256];
    char *text;
    cJSON *j, *e;
    int found = 0, comm = 0;
    snprintf(path, sizeof path, "/tmp/ldt_test_trace_%d.json", (int)getpid());
    snprintf(args, sizeof args, "run --model mlp --mesh dp=2,tp=2 --layers 1 --steps 1 --trace %s", path);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    text = read_all(path);
    remove(path);
    j = cJSON_Parse(text);
    cr_assert_not_null(j, "trace is not JSON");
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents")) {
        cJSON *a = cJSON_GetObjectItem(e, "args");
        const cJSON *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(cat) || strcmp(cat->valuestring, "comm") != 0) continue;
        comm++;
        cr_assert(cJSON_IsString(cJSON_GetObjectItem(a, "collective")) &&
                      cJSON_IsNumber(cJSON_GetObjectItem(a, "bytes")) &&
                      cJSON_IsNumber(cJSON_GetObjectItem(a, "bytes_per_rank")) &&
                      cJSON_IsArray(cJSON_GetObjectItem(a, "mesh_dims")) &&
                      cJSON_IsArray(cJSON_GetObjectItem(a, "group")) &&
                      cJSON_IsString(cJSON_GetObjectItem(a, "placements")),
                  "a comm event lacks args: %s", cJSON_PrintUnformatted(e));
        /* the block's reduction of the row-parallel linear's Partial: an all_reduce, or (the
         * exact search's cheaper plan) a reduce_scatter into a sequence-parallel tail */
        if (cJSON_GetObjectItem(e, "tid")->valueint == 3 &&
            (strcmp(cJSON_GetObjectItem(a, "collective")->valuestring, "all_reduce") == 0 ||
             strcmp(cJSON_GetObjectItem(a, "collective")->valuestring, "reduce_scatter") == 0)) {
            cJSON *g = cJSON_GetObjectItem(a, "group"), *d = cJSON_GetObjectItem(a, "mesh_dims");
            int ar = strcmp(cJSON_GetObjectItem(a, "collective")->valuestring, "all_reduce") == 0;
            found++;
            cr_expect_eq(cJSON_GetObjectItem(a, "bytes")->valuedouble, 2 * 64 * 4);
            cr_expect_eq(cJSON_GetObjectItem(a, "bytes_per_rank")->valuedouble, ar ? 512 : 256);
            cr_expect(cJSON_GetArraySize(d) == 1 && num(d, 0) == 1, "mesh_dims");
            cr_expect(cJSON_GetArraySize(g) == 2 && num(g, 0) == 2 && num(g, 1) == 3, "group");
            cr_expect(strstr(cJSON_GetObjectItem(a, "placements")->valuestring, "P -> ") != NULL, "%s",
                      cJSON_GetObjectItem(a, "placements")->valuestring);
        }
    }
    cr_expect_geq(comm, 4, "comm events: %d", comm);
    cr_expect_eq(found, 1, "rank 3's reductions (the block's; the loss stays Partial): %d", found);
    cJSON_Delete(j);
    free(text);
}

/* The DOT: a title naming model and mesh, a legend of the colours in use, local shapes. */
Test(cli, plan_dot_title_legend_local_shapes) {
    static char out[1 << 16];
    char path[64], args[256];
    char *dot;
    snprintf(path, sizeof path, "/tmp/ldt_test_plan_%d_b.dot", (int)getpid());
    snprintf(args, sizeof args, "plan --model mlp --layers 1 --mesh tp=4 --dot %s", path);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    dot = read_all(path);
    remove(path);
    cr_expect(strstr(dot, "label=\"mlp (layers 1, hidden 64, batch 4) on mesh tp=4, pins megatron\";") != NULL,
              "%s", dot);
    /* w1 [256,64] S0 over 4: [64,64] on each rank; the input x whole */
    cr_expect(strstr(dot, "n1 [label=\"%1 param l.0.w1\\nS0\\nglobal [256,64] local [64,64]\", fillcolor=\"#a6cee3\"]") !=
                  NULL, "%s", dot);
    cr_expect(strstr(dot, "n0 [label=\"%0 input x\\nR\\nglobal [4,64] local [4,64]\"") != NULL, "%s", dot);
    /* the legend: each colour with its placements, the red edge */
    cr_expect(strstr(dot, "subgraph cluster_legend") != NULL, "%s", dot);
    cr_expect(strstr(dot, "[label=\"S0\", fillcolor=\"#a6cee3\"]") != NULL, "%s", dot);
    cr_expect(strstr(dot, "[label=\"P\", fillcolor=\"#fb9a99\"]") != NULL, "%s", dot);
    cr_expect(strstr(dot, "label=\"redistribution: its collectives\"") != NULL, "%s", dot);
    free(dot);
    /* uneven: hidden 6 over 4 ranks is chunks of 2,2,2,0 */
    snprintf(args, sizeof args, "plan --model mlp --layers 1 --hidden 6 --mesh tp=4 --dot %s", path);
    cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s", out);
    dot = read_all(path);
    remove(path);
    cr_expect(strstr(dot, "global [24,6] local [6,6]\"") != NULL, "%s", dot);
    free(dot);
}

/* --comm-timeout-ms on every command that runs collectives: checked, and passed to the library
 * (LDT_COMM_TIMEOUT_MS), whose refusal of a malformed environment value the flag overrides. */
Test(cli, comm_timeout_flag) {
    static char out[1 << 16];
    static const char *cmds[] = {"train", "run", "step-bench", "redistribute", "calibrate", "meta-init"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[128];
        snprintf(args, sizeof args, "%s --comm-timeout-ms -1", cmds[i]);
        cr_expect_eq(run(args, out, sizeof out, 1), 2, "%s: %s", cmds[i], out);
        cr_expect(strstr(out, "--comm-timeout-ms is '-1', expected an integer >= 0") != NULL, "%s: %s", cmds[i], out);
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        run(args, out, sizeof out, 1);
        cr_expect(strstr(out, "--comm-timeout-ms") != NULL, "%s --help: %s", cmds[i], out);
    }
    cr_expect_eq(run("run --steps 1 --comm-timeout-ms 0", out, sizeof out, 1), 0, "%s", out);
    cr_expect_eq(run("run --steps 1 --comm-timeout-ms 5000", out, sizeof out, 1), 0, "%s", out);
    cr_expect_neq(run("run --steps 1 --comm-timeout-ms 1.5", out, sizeof out, 1), 0, "%s", out);
    setenv("LDT_COMM_TIMEOUT_MS", "soon", 1);
    cr_expect_eq(run("run --steps 1", out, sizeof out, 1), 1, "%s", out);
    cr_expect(strstr(out, "LDT_COMM_TIMEOUT_MS is 'soon'") != NULL, "%s", out);
    cr_expect_eq(run("run --steps 1 --comm-timeout-ms 5000", out, sizeof out, 1), 0, "%s", out);
    unsetenv("LDT_COMM_TIMEOUT_MS");
}

/* The "profile" field of a command's JSON: which profile priced its plan. */
static void expect_profile(const char *args, const char *want) {
    static char out[1 << 20];
    cJSON *j, *p;
    cr_assert_eq(run(args, out, sizeof out, 0), 0, "ldt %s: %s", args, out);
    j = cJSON_Parse(out);
    cr_assert(j, "ldt %s: %s", args, out);
    p = cJSON_GetObjectItem(j, "profile");
    cr_expect(cJSON_IsString(p) && strcmp(p->valuestring, want) == 0, "ldt %s: profile %s, expected %s",
              args, cJSON_IsString(p) ? p->valuestring : "(none)", want);
    cJSON_Delete(j);
}

/* --profile on every command that plans, LDT_PROFILE under it, the shipped default by
 * device under that (a fresh cache directory: no saved profile), and the refusal. */
Test(cli, profile_flag_env_and_default) {
    static char out[1 << 16];
    char dir[] = "/tmp/ldt_cli_cache_XXXXXX";
    cr_assert(mkdtemp(dir));
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("LDT_PROFILE", "a100-80g", 1);
    expect_profile("plan --model mlp --layers 1 --mesh 2 --json", "a100-80g");
    expect_profile("plan --model mlp --layers 1 --mesh 2 --json --profile h100-80g", "h100-80g");
    expect_profile("run --model mlp --layers 1 --mesh 2 --steps 1 --json --profile uniform", "uniform");
    expect_profile("train --mesh dp=2 --layers 1 --hidden 16 --heads 2 --seq 8 --batch 2 --steps 1 "
                   "--json --profile nvlink-ib", "nvlink-ib");
    expect_profile("step-bench --model mlp --layers 1 --mesh 2 --steps 1 --json --profile h100-80g",
                   "h100-80g");
    expect_profile("meta-init --model mlp --layers 1 --mesh 2 --json --profile cpu-threads", "cpu-threads");
    expect_profile("redistribute --mesh 2 --shape 8 --from S0 --to R --json --profile a100-80g", "a100-80g");
    unsetenv("LDT_PROFILE");
    expect_profile("plan --model mlp --layers 1 --mesh 2 --json", "cpu-threads");
    expect_profile("plan --model mlp --layers 1 --mesh 2 --meta --json", "h100-80g");
    expect_profile("meta-init --model mlp --layers 1 --mesh 2 --json", "h100-80g");
    cr_expect_eq(run("plan --model mlp --layers 1 --mesh 2 --profile b200", out, sizeof out, 1), 1);
    cr_expect(strstr(out, "ldt plan: --profile: 'b200' is neither a profile name") != NULL, "%s", out);
    rmdir(dir);
}
