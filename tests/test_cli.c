/* The ldt CLI: `ldt layout` JSON against hand-derived regions, help, and bad input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>

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
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "mesh")), 2);
    cr_expect_eq(num(cJSON_GetObjectItem(root, "mesh"), 1), 3);
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
    };
    static char out[1 << 16];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = run(rows[i].args, out, sizeof out, 1);
        cr_expect_neq(rc, 0, "'%s' exited 0", rows[i].args);
        cr_expect(strstr(out, rows[i].needle) != NULL, "'%s': %s", rows[i].args, out);
    }
}

/* ldt plan --json: the contract's fields, Megatron's one all_reduce per mlp block. */
Test(cli, plan_json_megatron_mlp) {
    static char out[1 << 20];
    cJSON *j, *nodes, *tot;
    int all_reduces = 0;
    cr_assert_eq(run("plan --model mlp --layers 2 --mesh tp=4 --pins megatron --json", out, sizeof out, 0), 0,
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
    cr_assert_gt(cJSON_GetObjectItem(tot, "modeled_seconds")->valuedouble, 0);
    cr_assert_geq(cJSON_GetObjectItem(tot, "plan_seconds")->valuedouble, 0);
    cJSON_Delete(j);
}

Test(cli, plan_dot_program_and_errors) {
    static char out[1 << 20];
    char cmd[256], path[64];
    FILE *f;
    char dot[4096];
    size_t n;
    snprintf(path, sizeof path, "/tmp/ldt_test_plan_%d.dot", (int)getpid());
    snprintf(cmd, sizeof cmd, "plan --model mlp --layers 1 --mesh tp=2 --pins megatron --dot %s --program --rank 1",
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
    cr_assert(strstr(out, "unknown scheme 'zero'"), "%s", out);
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
                                 "meta-init", "calibrate", "rand", "ckpt", "spec"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        cr_assert_eq(run(args, out, sizeof out, 1), 0, "%s: %s", cmds[i], out);
        cr_assert(strstr(out, "usage") != NULL, "%s: %s", cmds[i], out);
        cr_assert(strstr(out, "(null)") == NULL, "%s help prints a missing entry:\n%s", cmds[i], out);
    }
}
