/* ldt train: the captured training step end to end. Every mesh matches one device (f64 within
 * 1e-9 for 20 steps with dropout on; f32 within 1e-5 at step 0 and 1e-3 at step 19), the JSON
 * contract, the loss falling below 0.6 ln(vocab) in 200 steps, bad flags. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>

#include "tests/cli_run.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>


/* The losses of a run, and its JSON object (caller deletes). */
static cJSON *train(const char *args, double *losses, int n) {
    static char out[1 << 16];
    char cmd[512];
    cJSON *j, *l;
    snprintf(cmd, sizeof cmd, "train --json %s", args);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s: %s", args, out);
    j = cJSON_Parse(out);
    cr_assert(j != NULL, "%s", out);
    l = cJSON_GetObjectItem(j, "losses");
    cr_assert(cJSON_IsArray(l) && cJSON_GetArraySize(l) == n);
    for (int i = 0; i < n; i++) losses[i] = cJSON_GetArrayItem(l, i)->valuedouble;
    return j;
}

Test(train, every_mesh_matches_one_device) {
    const char *meshes[] = {"dp=2,tp=2", "tp=4", "dp=4", "tp=2", "dp=2,tp=2 --zero"};
    const char *small = "--steps 20 --hidden 32 --heads 4 --seq 16 --batch 4 --dropout 0.1";
    double ref64[20], ref32[20], got[20];
    char args[256];
    snprintf(args, sizeof args, "%s --dtype f64 --mesh 1", small);
    cJSON_Delete(train(args, ref64, 20));
    snprintf(args, sizeof args, "%s --dtype f32 --mesh 1", small);
    cJSON_Delete(train(args, ref32, 20));
    cr_assert_lt(ref64[19], ref64[0], "the loss falls");
    for (int m = 0; m < 5; m++) {
        snprintf(args, sizeof args, "%s --dtype f64 --mesh %s", small, meshes[m]);
        cJSON_Delete(train(args, got, 20));
        for (int i = 0; i < 20; i++)
            cr_assert(fabs(got[i] - ref64[i]) <= 1e-9 * fabs(ref64[i]), "f64 on %s, step %d: %.12g vs %.12g",
                      meshes[m], i, got[i], ref64[i]);
        snprintf(args, sizeof args, "%s --dtype f32 --mesh %s", small, meshes[m]);
        cJSON_Delete(train(args, got, 20));
        cr_assert(fabs(got[0] - ref32[0]) <= 1e-5 * fabs(ref32[0]), "f32 on %s, step 0", meshes[m]);
        cr_assert(fabs(got[19] - ref32[19]) <= 1e-3 * fabs(ref32[19]), "f32 on %s, step 19", meshes[m]);
    }
}

/* The demo model on the 4-rank threaded mesh: 200 steps bring the mean of the last
 * 10 losses to at most 0.6 ln(vocab). */
Test(train, the_loss_falls) {
    double l[200];
    cJSON *j = train("--layers 2 --hidden 128 --heads 4 --vocab 256 --seq 64 --batch 8 --mesh dp=2,tp=2 "
                     "--steps 200", l, 200);
    double tail = 0;
    for (int i = 190; i < 200; i++) tail += l[i] / 10;
    cr_assert_leq(tail, 0.6 * log(256.0), "last-10 mean %.4f", tail);
    cr_assert_float_eq(cJSON_GetObjectItem(j, "last10_mean_loss")->valuedouble, tail, 1e-6);
    cr_assert_gt(cJSON_GetObjectItem(j, "tokens_per_second")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "step_seconds"), "median")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(j, "compile_seconds")->valuedouble, 0);
    cJSON_Delete(j);
}

Test(train, bad_flags) {
    static char out[1 << 14];
    cr_assert_eq(run_cli("train --optimizer lamb", out, sizeof out), 2);
    cr_assert(strstr(out, "adamw or sgd"), "%s", out);
    cr_assert_eq(run_cli("train --dtype i32", out, sizeof out), 2);
    cr_assert_eq(run_cli("train --lr -1", out, sizeof out), 2);
    cr_assert_eq(run_cli("train --model mlp", out, sizeof out), 2);
    cr_assert_eq(run_cli("train --data /nonexistent/file", out, sizeof out), 1);
    cr_assert(strstr(out, "--data"), "%s", out);
    cr_assert_eq(run_cli("train --hidden 30 --heads 4 --steps 1", out, sizeof out), 1);
    cr_assert(strstr(out, "multiple"), "%s", out);
    cr_assert_eq(run_cli("train --steps 1 --profile /nonexistent/profile.json", out, sizeof out), 1);
    cr_assert(strstr(out, "/nonexistent/profile.json"), "%s", out);
    cr_assert_eq(run_cli("train --steps 1 --backend pigeon", out, sizeof out), 2);
    /* numbers that are not what they look like are refused, never clamped or read as 0 */
    static const struct {
        const char *args, *needle;
    } rows[] = {
        {"train --dropout ''", "--dropout is '', expected a finite number"},
        {"train --lr nan", "--lr is 'nan', expected a finite number"},
        {"train --seed 99999999999999999999", "out of the 64-bit range"},
        {"train --steps 1.5", "--steps is '1.5', expected an integer"},
        {"train --seq 99999999999", "--seq is '99999999999', expected at most 2^30"},
        {"train --sample 9999999999999", "--sample is '9999999999999', expected at most 2^30"},
        {"train --batch 99999 --seq 99999", "--batch 99999 x --seq 99999 tokens a step"},
        {"train --steps 9999999999", "--steps is '9999999999', expected at most 2^30"},
        {"run --steps 1.5", "--steps is '1.5', expected an integer"},
        {"run --seed 1e3", "--seed is '1e3', expected an integer"},
        {"run --dropout 2", "--dropout is '2', expected 0 <= p < 1"},
        /* 10^8 layers would take terabytes of trace: refused before any of it is made */
        {"train --layers 99999999 --steps 1", "layers = 99999999 needs about"},
        /* more rank threads than a process runs: refused before anything is planned */
        {"run --mesh 5000 --steps 1", "mesh of 5000 ranks: rank threads in one process stop at 4096"},
        {"train --mesh 5000 --steps 1", "mesh of 5000 ranks: rank threads in one process stop at 4096"},
        /* ... and refused as soon as the mesh is parsed: a 2^24-rank rand ran past a minute, a
         * redistribute --run filled 4.6 GB of shards, a meta-init --materialize laid out every
         * rank's parameters (minutes) before the threads refused them */
        {"rand --mesh 16777216 --shape 6,4 --placements S0", "mesh of 16777216 ranks: rank threads in one process stop at 4096"},
        {"redistribute --mesh 16777216 --shape 8,6 --from S0 --to R --run",
         "mesh of 16777216 ranks: rank threads in one process stop at 4096"},
        {"meta-init --model gpt --mesh 16777216 --materialize", "materialize: mesh of 16777216 ranks: rank threads"},
        /* a 175B model's shards on 64 rank threads: hundreds of GB, refused before allocating */
        {"meta-init --model gpt --layers 96 --hidden 12288 --heads 96 --vocab 50257 --seq 2048 "
         "--mesh dp=8,tp=8 --materialize", "GB of memory"},
        {"meta-init --model gpt --layers 96 --hidden 12288 --heads 96 --vocab 50257 --seq 2048 "
         "--mesh dp=8,tp=8 --save /tmp/ldt-never-written", "--save keeps the shards of every rank"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int rc = run_cli(rows[i].args, out, sizeof out);
        cr_expect_neq(rc, 0, "'%s' exited 0", rows[i].args);
        cr_expect(strstr(out, rows[i].needle) != NULL, "'%s': %s", rows[i].args, out);
    }
}

/* f16 trains and its losses are read as f16 (they were read as bf16: 4224 at step 1): within
 * 1e-2 of f32's, which start at ln(vocab)-ish. */
Test(train, f16_losses_are_read_as_f16) {
    double l16[5], l32[5];
    cJSON_Delete(train("--steps 5 --dtype f16 --hidden 32 --heads 4 --seq 16 --batch 4", l16, 5));
    cJSON_Delete(train("--steps 5 --dtype f32 --hidden 32 --heads 4 --seq 16 --batch 4", l32, 5));
    for (int i = 0; i < 5; i++)
        cr_expect(fabs(l16[i] - l32[i]) < 1e-2, "step %d: f16 %.6f, f32 %.6f", i, l16[i], l32[i]);
}

/* A cost profile may change the plan, never the numbers: losses with the nvlink-ib preset equal
 * the default's on dp=2,tp=2. */
Test(train, a_cost_profile_keeps_the_losses) {
    double a[4], b[4];
    cJSON *j = train("--mesh dp=2,tp=2 --steps 4 --dtype f64", a, 4);
    cJSON_Delete(j);
    j = train("--mesh dp=2,tp=2 --steps 4 --dtype f64 --profile nvlink-ib", b, 4);
    cJSON_Delete(j);
    for (int i = 0; i < 4; i++) cr_assert(fabs(a[i] - b[i]) <= 1e-9 * fabs(a[i]), "step %d: %.17g vs %.17g", i, a[i], b[i]);
}

/* Gradient buckets change the calls, never the numbers: --no-fuse (every collective a call of
 * its own) gives the fused step's f64 losses within 1e-12, with and without ZeRO. */
Test(train, no_fuse_keeps_the_losses) {
    const char *meshes[] = {"dp=2,tp=2", "dp=4 --zero"};
    double a[3], b[3];
    char args[256];
    for (int m = 0; m < 2; m++) {
        snprintf(args, sizeof args, "--mesh %s --steps 3 --dtype f64 --hidden 32 --heads 4 --seq 16 --batch 4", meshes[m]);
        cJSON *j = train(args, a, 3);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "fused")), "%s: fused by default", meshes[m]);
        cJSON_Delete(j);
        strcat(args, " --no-fuse");
        j = train(args, b, 3);
        cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "fused")), "%s --no-fuse: \"fused\":false", meshes[m]);
        cJSON_Delete(j);
        for (int i = 0; i < 3; i++)
            cr_expect(fabs(a[i] - b[i]) <= 1e-12 * fabs(a[i]), "%s step %d: fused %.17g, unfused %.17g", meshes[m], i,
                      a[i], b[i]);
    }
}

/* ldt plan --train plans the whole step: more nodes than the forward, the gradients' and the
 * update's collectives included, the same JSON. */
Test(train, plan_train_json) {
    static char out[1 << 20];
    cJSON *fwd, *step;
    cr_assert_eq(run_cli("plan --model mlp --mesh dp=2,tp=2 --pins megatron --json", out, sizeof out), 0, "%s", out);
    fwd = cJSON_Parse(out);
    cr_assert_eq(run_cli("plan --model mlp --mesh dp=2,tp=2 --pins megatron --train --json", out, sizeof out), 0,
                 "%s", out);
    step = cJSON_Parse(out);
    cr_assert(fwd && step, "%s", out);
    cr_assert_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(step, "totals"), "nodes")->valuedouble,
                 2 * cJSON_GetObjectItem(cJSON_GetObjectItem(fwd, "totals"), "nodes")->valuedouble);
    /* data parallel: the weight gradients are reduced over dp, so the step communicates more */
    cr_assert_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(step, "totals"), "collectives")->valuedouble,
                 cJSON_GetObjectItem(cJSON_GetObjectItem(fwd, "totals"), "collectives")->valuedouble);
    cJSON_Delete(fwd);
    cJSON_Delete(step);
}

Test(train, step_bench_json) {
    static char out[1 << 18];
    cJSON *j, *ops;
    double sum = 0;
    cr_assert_eq(run_cli("step-bench --model mlp --hidden 16 --batch 4 --mesh dp=2,tp=2 --steps 3 --json", out,
                         sizeof out), 0, "%s", out);
    j = cJSON_Parse(out);
    cr_assert(j != NULL, "%s", out);
    cr_assert_gt(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "step_seconds"), "median")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(j, "arena_bytes_per_rank")->valuedouble, 0);
    cr_assert_gt(cJSON_GetObjectItem(j, "modeled_step_seconds")->valuedouble, 0);
    ops = cJSON_GetObjectItem(j, "ops");
    cr_assert(cJSON_IsArray(ops) && cJSON_GetArraySize(ops) > 3);
    for (int i = 0; i < cJSON_GetArraySize(ops); i++) {
        cJSON *o = cJSON_GetArrayItem(ops, i);
        cr_assert(cJSON_IsString(cJSON_GetObjectItem(o, "name")));
        sum += cJSON_GetObjectItem(o, "flops")->valuedouble;
    }
    /* the linears' forward and backward GEMMs: the FLOP count is not zero */
    cr_assert_gt(sum, 0);
    cJSON_Delete(j);
    cr_assert_eq(run_cli("step-bench --steps 0", out, sizeof out), 2);
}

/* Without a terminal (popen: stdout is a pipe) the text output logs the loss at step 1 and
 * every tenth of the steps, the very losses --json reports; the sample is one line, escaped. */
Test(train, log_lines_and_escaped_sample) {
    static char out[1 << 16];
    const char *small = "--steps 20 --hidden 32 --heads 4 --seq 16 --batch 4 --mesh dp=2,tp=2";
    double l[20];
    char cmd[512];
    const char *p;
    int lines = 0;
    cJSON_Delete(train(small, l, 20));
    snprintf(cmd, sizeof cmd, "train %s --sample 30", small);
    cr_assert_eq(run(cmd, out, sizeof out, 0), 0, "%s", out);
    for (int k = 1; k <= 20; k++) {
        char line[64];
        if (k != 1 && k % 2 != 0) continue; /* a tenth of 20 steps: every 2nd */
        snprintf(line, sizeof line, "step %d/20 loss %.4f\n", k, l[k - 1]);
        cr_expect(strstr(out, line) != NULL, "'%s' missing:\n%s", line, out);
        lines++;
    }
    for (p = out; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, "step ", 5) == 0) lines--;
    cr_expect_eq(lines, 0, "other step lines:\n%s", out);
    cr_expect(strstr(out, "trained 20 steps: loss ") != NULL, "the summary stays:\n%s", out);
    /* after the header, the prompt and 30 characters on one line: newlines written as \n */
    p = strstr(out, "sample (greedy, from \"12+34=\"):\n");
    cr_assert_not_null(p, "%s", out);
    p = strchr(p, '\n') + 1;
    {
        size_t len = strcspn(p, "\n"), chars = 0;
        cr_expect_str_eq(p + len, "\n", "the sample ends the output on its line:\n%s", p);
        for (size_t i = 0; i < len; i++, chars++) {
            cr_assert(p[i] >= 32 && p[i] < 127, "raw byte %d in the sample", p[i]);
            if (p[i] == '\\') {
                i++;
                cr_assert(p[i] == 'n' || p[i] == 't' || p[i] == 'r' || p[i] == '\\' || p[i] == 'x', "%s", p);
                if (p[i] == 'x') i += 2;
            }
        }
        cr_expect_eq(chars, 6 + 30, "'%.*s' holds %zu characters", (int)len, p, chars);
    }
}

/* --save and --resume: 10 steps saved, then resumed to --steps 20 (the total), give the f64
 * losses of 20 uninterrupted steps bit for bit, dropout on (the random stream resumes), with
 * AdamW's moments and step and the data position, on dp=2,tp=2 (and with ZeRO) and 1 rank.
 * --save-every saves on the way without changing the run. Resuming with other settings is
 * refused, naming the difference. */
Test(train, save_and_resume_are_exact) {
    static char out[1 << 14];
    const char *meshes[] = {"dp=2,tp=2", "1", "dp=2,tp=2 --zero"};
    const char *small = "--hidden 32 --heads 4 --seq 16 --batch 4 --dropout 0.1 --dtype f64 --sample 0";
    char dir[] = "/tmp/ldt_test_resume_XXXXXX", args[400], cmd[1024]; /* args fit train()'s 512 */
    double ref[20], got[20];
    cr_assert_not_null(mkdtemp(dir));
    for (int m = 0; m < 3; m++) {
        cJSON *j;
        snprintf(args, sizeof args, "%s --mesh %s --steps 20", small, meshes[m]);
        cJSON_Delete(train(args, ref, 20));
        snprintf(args, sizeof args, "%s --mesh %s --steps 10 --save %s/ck%d", small, meshes[m], dir, m);
        cJSON_Delete(train(args, got, 10));
        for (int i = 0; i < 10; i++) cr_assert(got[i] == ref[i], "%s: step %d saving: %.17g vs %.17g", meshes[m], i, got[i], ref[i]);
        if (m == 1) /* the sizes and settings default to the saved run's */
            snprintf(args, sizeof args, "--sample 0 --mesh 1 --steps 20 --resume %s/ck%d", dir, m);
        else
            snprintf(args, sizeof args, "%s --mesh %s --steps 20 --resume %s/ck%d", small, meshes[m], dir, m);
        j = train(args, got, 10);
        cr_assert_eq(cJSON_GetObjectItem(j, "first_step")->valueint, 10);
        cJSON_Delete(j);
        for (int i = 0; i < 10; i++)
            cr_assert(got[i] == ref[10 + i], "%s: step %d resumed: %.17g vs %.17g", meshes[m], 10 + i, got[i], ref[10 + i]);
    }
    /* saves every 5 steps and at the end (12) leave the run unchanged; it resumes from 12 */
    snprintf(args, sizeof args, "%s --mesh 1 --steps 20", small);
    cJSON_Delete(train(args, ref, 20));
    snprintf(args, sizeof args, "%s --mesh 1 --steps 12 --save %s/every --save-every 5", small, dir);
    cJSON_Delete(train(args, got, 12));
    for (int i = 0; i < 12; i++) cr_assert(got[i] == ref[i], "step %d with --save-every", i);
    snprintf(args, sizeof args, "%s --mesh 1 --steps 20 --resume %s/every", small, dir);
    cJSON_Delete(train(args, got, 8));
    for (int i = 0; i < 8; i++) cr_assert(got[i] == ref[12 + i], "step %d resumed at 12", 12 + i);
    /* refusals */
    {
        static const struct {
            const char *extra, *needle;
            int rc;
        } rows[] = {
            {"--steps 20 --lr 0.01", "was saved with --lr = 0.003, this run has 0.01", 1},
            {"--steps 20 --hidden 64", "was saved with hidden = 32, this model has hidden = 64", 1},
            {"--steps 20 --batch 2", "was saved with --batch = 4, this run has 2", 1},
            {"--steps 20 --dtype f32", "was saved with dtype = f64, this model has dtype = f32", 1},
            {"--steps 10", "has done 10 steps; --steps 10 is the total, expected more", 1},
            {"--steps 20 --load /nonexistent", "--load and --resume both given", 2},
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            snprintf(cmd, sizeof cmd, "train %s --mesh 1 --resume %s/ck1 %s", small, dir, rows[i].extra);
            cr_expect_eq(run_cli(cmd, out, sizeof out), rows[i].rc, "%s: %s", rows[i].extra, out);
            cr_expect(strstr(out, rows[i].needle) != NULL, "%s: %s", rows[i].extra, out);
        }
        cr_expect_eq(run_cli("train --steps 1 --save-every 5", out, sizeof out), 2);
        cr_expect(strstr(out, "--save-every needs --save") != NULL, "%s", out);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
