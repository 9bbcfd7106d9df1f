/* Sharded checkpoints: save -> load on other meshes and placements, merge against the
 * single-device tensors, every corruption case with its message, and a header fuzz loop. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <xxhash.h>

#include "ldt/exec.h"
#include "exec/ckpt_io.h"
#include "tests/test_util.h"

/* ---- helpers ------------------------------------------------------------------------ */

static char *tmpdir(void) {
    char *d = strdup("/tmp/ldt-ckpt-XXXXXX");
    cr_assert(d && mkdtemp(d), "mkdtemp failed");
    return d;
}

static void rmtree(char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    if (d) {
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0) rmtree(strdup(p)); /* a directory */
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static cJSON *read_manifest(const char *dir);

/* Rank r's file: as dir/manifest.json lists it, or rank-<r>.safetensors without a manifest. */
static char *rank_file(const char *dir, int r) {
    static char buf[4][512];
    static int k;
    cJSON *m = read_manifest(dir);
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/rank-%d.safetensors", dir, r);
    if (m) {
        cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "files"), r);
        if (f) snprintf(buf[k], sizeof buf[k], "%s/%s", dir, cJSON_GetObjectItem(f, "file")->valuestring);
        cJSON_Delete(m);
    }
    return buf[k];
}

static unsigned char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)*n + 1);
    cr_assert(fread(b, 1, (size_t)*n, f) == (size_t)*n);
    b[*n] = 0;
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, long n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    if (n) cr_assert(fwrite(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
}

/* dir/manifest.json parsed, or NULL when there is none. */
static cJSON *read_manifest(const char *dir) {
    char path[512];
    long n;
    unsigned char *b;
    cJSON *m;
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (access(path, F_OK) != 0) return NULL;
    b = slurp(path, &n);
    m = cJSON_ParseWithLength((char *)b, (size_t)n);
    cr_assert(m, "%s is not JSON: %s", path, b);
    free(b);
    return m;
}

/* Turns a checkpoint into one as saves wrote it before manifests: the same rank files (their
 * bytes are the same format), named rank-<r>.safetensors, and no manifest. */
static void to_legacy(const char *dir) {
    cJSON *m = read_manifest(dir), *f;
    char from[600], to[600];
    cr_assert(m, "%s has no manifest", dir);
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files")) {
        snprintf(from, sizeof from, "%s/%s", dir, cJSON_GetObjectItem(f, "file")->valuestring);
        snprintf(to, sizeof to, "%s/rank-%d.safetensors", dir,
                 (int)cJSON_GetObjectItem(f, "rank")->valuedouble);
        cr_assert_eq(rename(from, to), 0, "rename %s", from);
    }
    snprintf(from, sizeof from, "%s/manifest.json", dir);
    cr_assert_eq(unlink(from), 0);
    cJSON_Delete(m);
}

/* The names in dir, sorted, joined by spaces. */
static void dir_names(const char *dir, char *out, size_t cap) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    size_t len = 0;
    out[0] = 0;
    if (n < 0 && errno == ENOENT) return; /* not made yet */
    cr_assert(n >= 0, "scandir %s", dir);
    for (int i = 0; i < n; i++) {
        if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, ".."))
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? " " : "",
                                    list[i]->d_name);
        free(list[i]);
    }
    free(list);
}

static uint64_t le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* Distinct small integers, exact in every dtype: element i holds (i * 7 + 3) % 61 - 20
 * (unsigned and bool: their own range). */
static void fill(void *buf, int64_t n, ldt_dtype dt, int salt) {
    for (int64_t i = 0; i < n; i++) {
        int v = (int)((i * 7 + 3 + salt) % 61) - 20;
        switch (dt) {
        case LDT_F32: ((float *)buf)[i] = (float)v * 0.5f; break;
        case LDT_F64: ((double *)buf)[i] = v * 0.25; break;
        case LDT_F16: ((uint16_t *)buf)[i] = ldt_f32_to_f16((float)v); break;
        case LDT_BF16: ((uint16_t *)buf)[i] = ldt_f32_to_bf16((float)v); break;
        case LDT_I32: ((int32_t *)buf)[i] = v * 1000; break;
        case LDT_I64: ((int64_t *)buf)[i] = (int64_t)v * ((int64_t)1 << 40); break;
        case LDT_U8: ((uint8_t *)buf)[i] = (uint8_t)(v + 20); break;
        default: ((uint8_t *)buf)[i] = (uint8_t)((i * 5 + salt) % 3 == 0); break;
        }
    }
}

/* One tensor: its mesh, spec, shards and full (reduced) value. */
typedef struct tcase {
    const char *name, *mesh, *pl, *shape;
    ldt_dtype dt;
    const char *tmesh, *tpl; /* load target */
    ldt_mesh *m;
    ldt_spec spec;
    ldt_shards *sh;
    void *full;
    int64_t nbytes;
} tcase;

static void make_spec(const char *mesh_text, const char *pl_text, const char *shape_text,
                      ldt_dtype dt, ldt_mesh **m, ldt_spec *spec) {
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    int npl;
    cr_assert_eq(ldt_shape_parse(shape_text, &shape), LDT_OK);
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(pl_text, shape.ndim, pl, LDT_MAX_DIMS, &npl), LDT_OK);
    cr_assert_eq(ldt_spec_init(spec, *m, &shape, pl, npl, dt), LDT_OK, "%s", ldt_last_error());
}

static void tcase_make(tcase *t, int salt) {
    int64_t numel;
    void *src;
    make_spec(t->mesh, t->pl, t->shape, t->dt, &t->m, &t->spec);
    cr_assert_eq(ldt_shape_nbytes(&t->spec.shape, t->dt, &t->nbytes), LDT_OK);
    ldt_shape_numel(&t->spec.shape, &numel);
    src = malloc((size_t)t->nbytes + 1);
    t->full = malloc((size_t)t->nbytes + 1);
    fill(src, numel, t->dt, salt);
    /* Partial dims hold addends whose reduction is the tensor exactly */
    cr_assert_eq(ldt_distribute_addends(src, &t->spec, 7 + (uint64_t)salt, &t->sh), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt_full_tensor(t->sh, t->full), LDT_OK);
    cr_assert(memcmp(src, t->full, (size_t)t->nbytes) == 0, "%s: addends do not reduce back",
              t->name);
    free(src);
}

static void tcase_free(tcase *t) {
    ldt_shards_destroy(t->sh);
    ldt_mesh_destroy(t->m);
    free(t->full);
    t->sh = NULL;
    t->m = NULL;
    t->full = NULL;
}

static ldt_status save_cases(const char *dir, tcase *ts, int n) {
    const char *names[16];
    ldt_shards *sh[16];
    for (int i = 0; i < n; i++) {
        names[i] = ts[i].name;
        sh[i] = ts[i].sh;
    }
    return ldt_ckpt_save(dir, n, names, sh);
}

/* Loads t from dir onto (mesh, pl) and checks it against t's full value bitwise. */
static void check_load(const char *dir, const tcase *t, const char *mesh, const char *pl) {
    ldt_mesh *m;
    ldt_spec spec;
    ldt_shards *out = NULL;
    void *got = malloc((size_t)t->nbytes + 1);
    make_spec(mesh, pl, t->shape, t->dt, &m, &spec);
    cr_assert_eq(ldt_ckpt_load(dir, t->name, &spec, &out), LDT_OK, "%s onto %s (%s): %s",
                 t->name, mesh, pl, ldt_last_error());
    cr_assert_eq(ldt_full_tensor(out, got), LDT_OK, "%s onto %s (%s): %s", t->name, mesh, pl, ldt_last_error());
    cr_assert(t->nbytes == 0 || memcmp(got, t->full, (size_t)t->nbytes) == 0,
              "%s saved from %s (%s) loaded onto %s (%s) differs", t->name, t->mesh, t->pl,
              mesh, pl);
    ldt_shards_destroy(out);
    ldt_mesh_destroy(m);
    free(got);
}

/* ---- round trips -------------------------------------------------------------------- */

static tcase k_cases[] = {
    {"w.f32", "dp=2,tp=2", "S0,S1", "7,5", LDT_F32, "4", "S1", NULL, {0}, NULL, NULL, 0},
    {"w.f64", "2x2", "R,S0", "5,3", LDT_F64, "3", "S0", NULL, {0}, NULL, NULL, 0},
    {"qkv.f16", "4", "IS0:3", "6,5", LDT_F16, "2x2", "S1,R", NULL, {0}, NULL, NULL, 0},
    {"grad.i32", "2x2", "P,S1", "4,7", LDT_I32, "2", "R", NULL, {0}, NULL, NULL, 0},
    {"grad.bf16", "2x2", "Pmax,S0", "3,4", LDT_BF16, "1", "R", NULL, {0}, NULL, NULL, 0},
    {"avg.f32", "2", "Pavg", "9", LDT_F32, "4", "S0", NULL, {0}, NULL, NULL, 0},
    {"ids.i64", "[[0,2],[1,3]]", "S1,S0", "3,10", LDT_I64, "dp=2,tp=2", "IS1:2,S0", NULL, {0}, NULL, NULL, 0},
    {"bytes.u8", "4", "S0", "5,2,3", LDT_U8, "2x2", "S2,S0", NULL, {0}, NULL, NULL, 0},
    {"mask.bool", "2x2", "S0,R", "5", LDT_BOOL, "3", "S0", NULL, {0}, NULL, NULL, 0},
    {"scalar", "2x2", "R,R", "", LDT_F32, "1", "R", NULL, {0}, NULL, NULL, 0},
    {"empty", "2", "S1", "0,3", LDT_F32, "4", "S0", NULL, {0}, NULL, NULL, 0},
    {"tail.f32", "dp=2,tp=3", "S0,S0", "4,3", LDT_F32, "2", "P", NULL, {0}, NULL, NULL, 0},
};
#define NCASES ((int)(sizeof k_cases / sizeof k_cases[0]))

Test(checkpoint, save_then_load_on_other_meshes_is_bitwise_equal) {
    char *dir = tmpdir();
    for (int i = 0; i < NCASES; i++) tcase_make(&k_cases[i], i);
    cr_assert_eq(save_cases(dir, k_cases, NCASES), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < NCASES; i++) {
        check_load(dir, &k_cases[i], k_cases[i].tmesh, k_cases[i].tpl);
        check_load(dir, &k_cases[i], k_cases[i].mesh, k_cases[i].pl); /* its own spec */
    }
    /* all at once, and all or nothing */
    {
        const char *names[NCASES + 1];
        const ldt_spec *targets[NCASES + 1];
        ldt_shards *outs[NCASES + 1];
        for (int i = 0; i < NCASES; i++) {
            names[i] = k_cases[i].name;
            targets[i] = &k_cases[i].spec;
        }
        cr_assert_eq(ldt_ckpt_load_n(dir, NCASES, names, targets, outs), LDT_OK, "%s",
                     ldt_last_error());
        for (int i = 0; i < NCASES; i++) {
            void *got = malloc((size_t)k_cases[i].nbytes + 1);
            cr_assert_eq(ldt_full_tensor(outs[i], got), LDT_OK);
            cr_assert(k_cases[i].nbytes == 0 ||
                          memcmp(got, k_cases[i].full, (size_t)k_cases[i].nbytes) == 0,
                      "load_n: %s differs", names[i]);
            free(got);
            ldt_shards_destroy(outs[i]);
        }
        names[NCASES] = "absent";
        targets[NCASES] = &k_cases[0].spec;
        cr_assert_eq(ldt_ckpt_load_n(dir, NCASES + 1, names, targets, outs),
                     LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), "'absent'"), "%s", ldt_last_error());
        for (int i = 0; i <= NCASES; i++) cr_assert_null(outs[i], "half-loaded: %d", i);
    }
    /* the world is the largest rank of any mesh + 1: dp=2,tp=3 has 6 ranks */
    {
        cJSON *m = read_manifest(dir);
        char names[4096];
        cr_assert(m);
        cr_assert_eq(cJSON_GetObjectItem(m, "world_size")->valuedouble, 6);
        cJSON_Delete(m);
        for (int r = 0; r < 6; r++) cr_assert_eq(access(rank_file(dir, r), F_OK), 0, "rank %d", r);
        /* saving a smaller world into the same directory removes the larger world's files */
        cr_assert_eq(save_cases(dir, k_cases, 2), LDT_OK, "%s", ldt_last_error());
        m = read_manifest(dir);
        cr_assert_eq(cJSON_GetObjectItem(m, "world_size")->valuedouble, 4);
        cJSON_Delete(m);
        dir_names(dir, names, sizeof names);
        cr_assert(strncmp(names, "manifest.json rank-0.", 21) == 0 && strstr(names, " rank-3.") &&
                      !strstr(names, " rank-4.") && !strstr(names, ".tmp"),
                  "left in the directory: %s", names);
    }
    check_load(dir, &k_cases[1], "2", "S1");
    for (int i = 0; i < NCASES; i++) tcase_free(&k_cases[i]);
    rmtree(dir);
}

Test(checkpoint, replicated_regions_are_written_once_by_the_lowest_rank) {
    char *dir = tmpdir();
    tcase t = {"w", "[[3,1],[2,0]]", "R,S0", "4,2", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    long n0, n3;
    unsigned char *b0, *b3;
    tcase_make(&t, 0);
    cr_assert_eq(ldt_ckpt_save(dir, 1, (const char *[]){"w"}, (ldt_shards *[]){t.sh}), LDT_OK,
                 "%s", ldt_last_error());
    /* rows 0:2 live on ranks 3 and 2, rows 2:4 on 1 and 0: ranks 0 and 2 write them */
    b0 = slurp(rank_file(dir, 0), &n0);
    b3 = slurp(rank_file(dir, 3), &n3);
    cr_assert(strstr((char *)b0 + 8, "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2]"), "%.*s",
              (int)le64(b0), b0 + 8);
    cr_assert_null(strstr((char *)b3 + 8, "\"w\":{"), "rank 3 holds a replica only");
    check_load(dir, &t, "1", "R");
    free(b0);
    free(b3);
    tcase_free(&t);
    rmtree(dir);
}

/* ---- merge -------------------------------------------------------------------------- */

static void check_merged(const char *path, tcase *ts, int n) {
    long size;
    unsigned char *b = slurp(path, &size);
    uint64_t hl = le64(b);
    cJSON *h, *e;
    const char *prev = "";
    int k = 0;
    int64_t expect_off = 0;
    cr_assert(hl % 8 == 0 && (long)(8 + hl) <= size, "header length %llu", (unsigned long long)hl);
    h = cJSON_ParseWithLength((char *)b + 8, hl);
    cr_assert(h, "merged header is not JSON");
    cJSON_ArrayForEach(e, h) {
        const cJSON *off, *dt;
        int found = -1;
        if (!strcmp(e->string, "__metadata__")) continue;
        cr_assert(strcmp(prev, e->string) < 0, "names not sorted: %s after %s", e->string, prev);
        prev = e->string;
        for (int i = 0; i < n; i++)
            if (!strcmp(ts[i].name, e->string)) found = i;
        cr_assert(found >= 0, "unexpected tensor %s", e->string);
        off = cJSON_GetObjectItem(e, "data_offsets");
        dt = cJSON_GetObjectItem(e, "dtype");
        cr_assert_eq((int64_t)cJSON_GetArrayItem(off, 0)->valuedouble, expect_off, "%s", e->string);
        cr_assert_eq((int64_t)cJSON_GetArrayItem(off, 1)->valuedouble,
                     expect_off + ts[found].nbytes);
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(e, "shape")), ts[found].spec.shape.ndim);
        cr_assert(cJSON_IsString(dt));
        cr_assert(ts[found].nbytes == 0 ||
                      memcmp(b + 8 + hl + expect_off, ts[found].full, (size_t)ts[found].nbytes) == 0,
                  "merged %s differs from the single-device tensor", e->string);
        expect_off += ts[found].nbytes;
        k++;
    }
    cr_assert_eq(k, n);
    cr_assert_eq((long)(8 + hl + (uint64_t)expect_off), size, "data is not contiguous to the end");
    cJSON_Delete(h);
    free(b);
}

Test(checkpoint, merge_equals_single_device_and_a_one_rank_save_byte_for_byte) {
    char *d4 = tmpdir(), *d1 = tmpdir(), m4[600], m1[600];
    tcase four[] = {
        {"layers.0.w", "dp=2,tp=2", "R,S1", "6,5", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0},
        {"layers.0.b", "dp=2,tp=2", "S0,R", "5", LDT_BF16, NULL, NULL, NULL, {0}, NULL, NULL, 0},
        {"emb", "dp=2,tp=2", "P,IS0:2", "4,3", LDT_F64, NULL, NULL, NULL, {0}, NULL, NULL, 0},
        {"step", "dp=2,tp=2", "R,R", "", LDT_I64, NULL, NULL, NULL, {0}, NULL, NULL, 0},
        {"ids", "dp=2,tp=2", "S0,S0", "7", LDT_I32, NULL, NULL, NULL, {0}, NULL, NULL, 0},
        {"flags", "dp=2,tp=2", "S0,R", "3", LDT_BOOL, NULL, NULL, NULL, {0}, NULL, NULL, 0},
    };
    tcase one[6];
    int n = 6;
    long s4, s1;
    unsigned char *b4, *b1;
    for (int i = 0; i < n; i++) {
        tcase_make(&four[i], i);
        one[i] = four[i];
        one[i].mesh = "1";
        one[i].pl = "R";
        tcase_make(&one[i], i);
    }
    cr_assert_eq(save_cases(d4, four, n), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(save_cases(d1, one, n), LDT_OK, "%s", ldt_last_error());
    snprintf(m4, sizeof m4, "%s.merged.safetensors", d4); /* outside the checkpoint */
    snprintf(m1, sizeof m1, "%s.merged.safetensors", d1);
    cr_assert_eq(ldt_ckpt_merge(d4, m4), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_ckpt_merge(d1, m1), LDT_OK, "%s", ldt_last_error());
    check_merged(m4, four, n);
    b4 = slurp(m4, &s4);
    b1 = slurp(m1, &s1);
    cr_assert(s4 == s1 && memcmp(b4, b1, (size_t)s4) == 0,
              "the merge of a dp=2,tp=2 save differs from the merge of a 1-rank save");
    /* info lists every tensor with its sharding */
    {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        cr_assert_eq(ldt_ckpt_info(d4, f), LDT_OK, "%s", ldt_last_error());
        fclose(f);
        cr_assert(strstr(text, "4 rank files") && strstr(text, "emb  f64 [4,3]  mesh dp=2,tp=2  placements P,IS0:2"),
                  "%s", text);
        cr_assert(strstr(text, "x2 step 2"), "interleaved runs shown: %s", text);
        free(text);
    }
    free(b4);
    free(b1);
    unlink(m4);
    unlink(m1);
    for (int i = 0; i < n; i++) {
        tcase_free(&four[i]);
        tcase_free(&one[i]);
    }
    rmtree(d4);
    rmtree(d1);
}

/* ---- corruption ------------------------------------------------------------------------ */

/* A 4-rank checkpoint of "w" [8,3] (S0 over 4 ranks: rows 2r:2r+2 on rank r) and "b", in
 * the form saves wrote before manifests (rank-<r>.safetensors): these tests edit rank files
 * to reach the reader's own checks, which a manifest's header checksums would pre-empt (the
 * manifest's tests are further down). */
typedef struct fixture {
    char *dir;
    tcase w, b;
    ldt_mesh *tm;
    ldt_spec target;
} fixture;

static void fixture_make(fixture *fx) {
    fx->dir = tmpdir();
    fx->w = (tcase){"w", "4", "S0", "8,3", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    fx->b = (tcase){"b", "2x2", "R,S0", "5", LDT_I32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    tcase_make(&fx->w, 1);
    tcase_make(&fx->b, 2);
    cr_assert_eq(ldt_ckpt_save(fx->dir, 2, (const char *[]){"w", "b"},
                               (ldt_shards *[]){fx->w.sh, fx->b.sh}),
                 LDT_OK, "%s", ldt_last_error());
    to_legacy(fx->dir);
    make_spec("2", "S1", "8,3", LDT_F32, &fx->tm, &fx->target);
}

static void fixture_free(fixture *fx) {
    tcase_free(&fx->w);
    tcase_free(&fx->b);
    ldt_mesh_destroy(fx->tm);
    rmtree(fx->dir);
}

/* Loading w must fail with st and a message holding every one of the needles. */
static void expect_load_error(fixture *fx, ldt_status st, const char *const *needles, int n) {
    ldt_shards *out = (ldt_shards *)0x1;
    char merged[600];
    ldt_status got = ldt_ckpt_load(fx->dir, "w", &fx->target, &out);
    cr_assert_eq(got, st, "status %d (%s), expected %d", got, ldt_last_error(), st);
    cr_assert_null(out, "a failed load returns nothing");
    for (int i = 0; i < n; i++)
        cr_assert(strstr(ldt_last_error(), needles[i]), "message lacks '%s': %s", needles[i],
                  ldt_last_error());
    /* the merge refuses the same checkpoint and leaves no output behind */
    snprintf(merged, sizeof merged, "%s.merged", fx->dir);
    cr_assert_eq(ldt_ckpt_merge(fx->dir, merged), st, "merge: %s", ldt_last_error());
    cr_assert_neq(access(merged, F_OK), 0);
}

/* Rewrites rank r's header through fn (JSON in, JSON out), keeping the data section. */
static void edit_header(const char *dir, int r, void (*fn)(cJSON *h, void *arg), void *arg) {
    long n;
    unsigned char *b = slurp(rank_file(dir, r), &n), len8[8];
    uint64_t hl = le64(b);
    cJSON *h = cJSON_ParseWithLength((char *)b + 8, hl);
    char *text;
    size_t tl;
    FILE *f;
    cr_assert(h);
    fn(h, arg);
    text = cJSON_PrintUnformatted(h);
    tl = strlen(text);
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)tl >> (8 * i));
    f = fopen(rank_file(dir, r), "wb");
    fwrite(len8, 1, 8, f);
    fwrite(text, 1, tl, f);
    fwrite(b + 8 + hl, 1, (size_t)(n - 8 - (long)hl), f);
    fclose(f);
    cJSON_free(text);
    cJSON_Delete(h);
    free(b);
}

static void set_entry_field(cJSON *h, void *arg) {
    const char *const *kv = arg; /* tensor, field, JSON value */
    cJSON *e = cJSON_GetObjectItem(h, kv[0]);
    cr_assert(e);
    cJSON_ReplaceItemInObject(e, kv[1], cJSON_Parse(kv[2]));
}

static void set_meta_field(cJSON *h, void *arg) {
    const char *const *kv = arg;
    cJSON *meta = cJSON_GetObjectItem(h, "__metadata__");
    cJSON *m = cJSON_Parse(cJSON_GetObjectItem(meta, kv[0])->valuestring);
    char *s;
    cJSON_ReplaceItemInObject(m, kv[1], cJSON_Parse(kv[2]));
    s = cJSON_PrintUnformatted(m);
    cJSON_ReplaceItemInObject(meta, kv[0], cJSON_CreateString(s));
    cJSON_free(s);
    cJSON_Delete(m);
}

static void drop_tensor(cJSON *h, void *arg) {
    cJSON_DeleteItemFromObject(h, (const char *)arg);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(h, "__metadata__"), (const char *)arg);
}

static void write_len(const char *path, uint64_t v) {
    long n;
    unsigned char *b = slurp(path, &n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    spit(path, b, n);
    free(b);
}

Test(checkpoint, truncated_files_and_bad_header_lengths) {
    fixture fx;
    long n;
    unsigned char *b;
    fixture_make(&fx);
    b = slurp(rank_file(fx.dir, 1), &n);
    spit(rank_file(fx.dir, 1), b, 5);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-1.safetensors", "truncated", "5 bytes"}, 3);
    /* cut inside the data: w's offsets run past the end (b's 8 bytes come last) */
    spit(rank_file(fx.dir, 1), b, n - 12);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-1.safetensors", "tensor 'w'", "data_offsets"}, 3);
    /* cut inside the header */
    spit(rank_file(fx.dir, 1), b, 8 + (long)le64(b) / 2);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-1.safetensors", "truncated", "past the end"}, 3);
    spit(rank_file(fx.dir, 1), b, n);
    write_len(rank_file(fx.dir, 1), (uint64_t)1 << 40);
    expect_load_error(&fx, LDT_ERR_CORRUPT, (const char *[]){"rank-1.safetensors", "cap"}, 2);
    write_len(rank_file(fx.dir, 1), UINT64_MAX);
    expect_load_error(&fx, LDT_ERR_CORRUPT, (const char *[]){"rank-1.safetensors", "cap"}, 2);
    spit(rank_file(fx.dir, 1), b, n);
    check_load(fx.dir, &fx.w, "1", "R"); /* restored: fine again */
    free(b);
    fixture_free(&fx);
}

Test(checkpoint, bad_json_dtypes_shapes_and_offsets) {
    fixture fx;
    long n;
    unsigned char *b;
    fixture_make(&fx);
    b = slurp(rank_file(fx.dir, 2), &n);
    {
        unsigned char *c = malloc((size_t)n);
        memcpy(c, b, (size_t)n);
        c[8] = '[';
        c[9] = '}';
        spit(rank_file(fx.dir, 2), c, n);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"rank-2.safetensors", "bad JSON"}, 2);
        free(c);
    }
    struct {
        const char *kv[3];
        const char *needle;
    } edits[] = {
        {{"w", "dtype", "\"Q7\""}, "bad dtype 'Q7'"},
        {{"w", "dtype", "\"F64\""}, "data_offsets hold"},
        {{"w", "shape", "[2,-3]"}, "bad shape"},
        {{"w", "shape", "[2,3.5]"}, "bad shape"},
        {{"w", "shape", "[1,1,1,1,1,1,1,1,2,3]"}, "bad shape"},
        {{"w", "shape", "[4,3]"}, "data_offsets hold"},
        {{"w", "shape", "[9007199254740992,9007199254740992]"}, "overflows"},
        {{"w", "data_offsets", "[0,999999]"}, "bad data_offsets"},
        {{"w", "data_offsets", "[8,4]"}, "bad data_offsets"},
        {{"w", "data_offsets", "[0]"}, "bad data_offsets"},
        {{"w", "data_offsets", "\"0,24\""}, "bad data_offsets"},
        {{"w", "data_offsets", "[4,28]"}, "bad data_offsets"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        spit(rank_file(fx.dir, 2), b, n);
        edit_header(fx.dir, 2, set_entry_field, (void *)edits[i].kv);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"rank-2.safetensors", "tensor 'w'", edits[i].needle}, 3);
    }
    struct {
        const char *kv[3];
        const char *needle;
    } meta_edits[] = {
        {{"w", "dtype", "\"f64\""}, "dtype"},
        {{"w", "shape", "[8]"}, "region"},
        {{"w", "shape", "[8,2]"}, "does not fit"},
        {{"w", "region", "[[4,2,1,8],[0,3,1,3,9]]"}, "region dim 1"},
        {{"w", "region", "[[7,2,1,8],[0,3,1,3]]"}, "does not fit"},
        {{"w", "region", "[[4,1,2,0],[0,3,1,3]]"}, "does not fit"},
        {{"w", "rank", "0"}, "another rank"},
        {{"w", "xxh64", "\"zz\""}, "checksum"},
        {{"w", "mesh", "3"}, "mesh or placements"},
    };
    for (size_t i = 0; i < sizeof meta_edits / sizeof meta_edits[0]; i++) {
        spit(rank_file(fx.dir, 2), b, n);
        edit_header(fx.dir, 2, set_meta_field, (void *)meta_edits[i].kv);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"rank-2.safetensors", "tensor 'w'", meta_edits[i].needle},
                          3);
    }
    spit(rank_file(fx.dir, 2), b, n);
    check_load(fx.dir, &fx.w, "3", "S0");
    free(b);
    fixture_free(&fx);
}

Test(checkpoint, checksum_mismatch_names_file_and_tensor) {
    fixture fx;
    long n;
    unsigned char *b;
    fixture_make(&fx);
    b = slurp(rank_file(fx.dir, 3), &n);
    b[n - 1] ^= 0x40; /* the last byte of w's rows 6:8 */
    spit(rank_file(fx.dir, 3), b, n);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-3.safetensors", "tensor 'w'", "checksum mismatch"}, 3);
    free(b);
    fixture_free(&fx);
}

Test(checkpoint, missing_rank_files) {
    fixture fx;
    long n;
    unsigned char *b;
    fixture_make(&fx);
    b = slurp(rank_file(fx.dir, 2), &n);
    unlink(rank_file(fx.dir, 2));
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-2.safetensors is missing", "4 ranks"}, 2);
    spit(rank_file(fx.dir, 2), b, n);
    free(b);
    b = slurp(rank_file(fx.dir, 0), &n);
    unlink(rank_file(fx.dir, 0));
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-0.safetensors is missing", "4 ranks"}, 2);
    spit(rank_file(fx.dir, 0), b, n);
    free(b);
    check_load(fx.dir, &fx.w, "2", "S0");
    {
        char *empty = tmpdir();
        ldt_shards *out = NULL;
        cr_assert_eq(ldt_ckpt_load(empty, "w", &fx.target, &out), LDT_ERR_CORRUPT);
        cr_assert(strstr(ldt_last_error(), "no rank-<r>.safetensors"), "%s", ldt_last_error());
        rmtree(empty);
        cr_assert_eq(ldt_ckpt_load("/nonexistent/ckpt", "w", &fx.target, &out), LDT_ERR_SYSTEM);
        cr_assert(strstr(ldt_last_error(), "/nonexistent/ckpt"), "%s", ldt_last_error());
    }
    fixture_free(&fx);
}

/* Sets the save id in a file's save entry ('lazydt' in __metadata__). */
static void set_save_id(cJSON *h, void *arg) {
    cJSON *meta = cJSON_GetObjectItem(h, "__metadata__");
    cJSON *m = cJSON_Parse(cJSON_GetObjectItem(meta, "lazydt")->valuestring);
    char *s;
    cJSON_ReplaceItemInObject(m, "save_id", cJSON_CreateString((const char *)arg));
    s = cJSON_PrintUnformatted(m);
    cJSON_ReplaceItemInObject(meta, "lazydt", cJSON_CreateString(s));
    cJSON_free(s);
    cJSON_Delete(m);
}

/* What a forger who knows the format does after editing rank files: recomputes the save id
 * from every file's tensor metadata (xxh64 seeded with the world size, over each name and
 * metadata string in file order, as the save does) and writes it into every file, so only
 * the reader's other checks stand. Returns the id. */
static uint64_t reseal(const char *dir, int world) {
    XXH64_state_t *hs = XXH64_createState();
    uint64_t id;
    char hex[17];
    XXH64_reset(hs, (XXH64_hash_t)world);
    for (int r = 0; r < world; r++) {
        long n;
        unsigned char *b = slurp(rank_file(dir, r), &n);
        cJSON *h = cJSON_ParseWithLength((char *)b + 8, le64(b)), *e;
        cr_assert(h);
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(h, "__metadata__")) {
            if (!strcmp(e->string, "lazydt")) continue;
            XXH64_update(hs, e->string, strlen(e->string) + 1);
            XXH64_update(hs, e->valuestring, strlen(e->valuestring) + 1);
        }
        cJSON_Delete(h);
        free(b);
    }
    id = XXH64_digest(hs);
    XXH64_freeState(hs);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id);
    for (int r = 0; r < world; r++) edit_header(dir, r, set_save_id, hex);
    return id;
}

/* Rewrites the manifest's sizes and header checksums to match the files as they are now. */
static void reseal_manifest(const char *dir) {
    cJSON *m = read_manifest(dir), *f;
    char hex[17], path[600], *text;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files")) {
        long n;
        snprintf(path, sizeof path, "%s/%s", dir, cJSON_GetObjectItem(f, "file")->valuestring);
        unsigned char *b = slurp(path, &n);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64(b, (size_t)(8 + le64(b)), 0));
        cJSON_ReplaceItemInObject(f, "header_xxh64", cJSON_CreateString(hex));
        cJSON_ReplaceItemInObject(f, "bytes", cJSON_CreateNumber((double)n));
        free(b);
    }
    text = cJSON_Print(m);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    spit(path, text, (long)strlen(text));
    cJSON_free(text);
    cJSON_Delete(m);
}

/* Every rank file's bytes, to put back after edits. */
typedef struct snapshot {
    int world;
    unsigned char *b[8];
    long n[8];
} snapshot;

static void snap_take(snapshot *sn, const char *dir, int world) {
    sn->world = world;
    for (int r = 0; r < world; r++) sn->b[r] = slurp(rank_file(dir, r), &sn->n[r]);
}

static void snap_restore(const snapshot *sn, const char *dir) {
    for (int r = 0; r < sn->world; r++) spit(rank_file(dir, r), sn->b[r], sn->n[r]);
}

static void snap_free(snapshot *sn) {
    for (int r = 0; r < sn->world; r++) free(sn->b[r]);
}

/* Without a manifest, one file's metadata edited alone (the save id no longer matches): the
 * file that disagrees with the other shards of its tensor is named, rank 0 included; with one
 * shard on each side, both files are named. */
Test(checkpoint, the_file_whose_metadata_was_edited_is_named) {
    fixture fx;
    const char *w_pl[3] = {"w", "placements", "\"R\""}, *b_pl[3] = {"b", "placements", "\"R,R\""};
    snapshot sn;
    fixture_make(&fx);
    snap_take(&sn, fx.dir, 4);
    for (int r = 0; r < 4; r += 3) { /* w has a shard on each of the 4 ranks */
        edit_header(fx.dir, r, set_meta_field, (void *)w_pl);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){rank_file(fx.dir, r), "tensor 'w'", "disagrees", "save id",
                                           "was changed after the save"},
                          5);
        snap_restore(&sn, fx.dir);
    }
    edit_header(fx.dir, 0, set_meta_field, (void *)b_pl); /* b: R over dim 0, stored by ranks 0 and 1 */
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"tensor 'b'", "rank-0.safetensors", "rank-1.safetensors", "'R,R'",
                                       "one of the two was changed"},
                      5);
    snap_restore(&sn, fx.dir);
    snap_free(&sn);
    fixture_free(&fx);
}

Test(checkpoint, overlapping_and_missing_regions) {
    fixture fx;
    long n;
    unsigned char *b;
    const char *overlap[3] = {"w", "region", "[[1,2,1,8],[0,3,1,3]]"};
    snapshot sn;
    fixture_make(&fx);
    b = slurp(rank_file(fx.dir, 1), &n);
    snap_take(&sn, fx.dir, 4);
    /* rank 1 claims rows 1:3: row 1 is rank 0's too. Edited alone, the save id that the
     * metadata gives changes: refused as such */
    edit_header(fx.dir, 1, set_meta_field, (void *)overlap);
    expect_load_error(&fx, LDT_ERR_CORRUPT, (const char *[]){"save id", "was changed"}, 2);
    /* with the save id recomputed (a forger who knows the format), the regions are refused */
    reseal(fx.dir, 4);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"rank-1.safetensors", "tensor 'w'", "overlapping regions",
                                       "[1,0]", "rank-0.safetensors"},
                      5);
    snap_restore(&sn, fx.dir);
    edit_header(fx.dir, 1, drop_tensor, (void *)"w");
    reseal(fx.dir, 4);
    expect_load_error(&fx, LDT_ERR_CORRUPT,
                      (const char *[]){"tensor 'w'", "missing regions", "18 of 24"}, 3);
    snap_restore(&sn, fx.dir);
    /* overlap and gap that balance: the element count alone would pass */
    {
        const char *shift[3] = {"w", "region", "[[4,2,1,8],[0,3,1,3]]"};
        edit_header(fx.dir, 1, set_meta_field, (void *)shift);
        reseal(fx.dir, 4);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"tensor 'w'", "overlapping regions"}, 2);
    }
    snap_restore(&sn, fx.dir);
    /* an empty region claiming 2^53 blocks per dim: no overflow, just a gap */
    {
        const char *shape[3] = {"w", "shape", "[0,0]"}, *offs[3] = {"w", "data_offsets", "[0,0]"};
        const char *reg[3] = {"w", "region",
                              "[[0,0,9007199254740992,0],[0,0,9007199254740992,0]]"};
        edit_header(fx.dir, 1, set_entry_field, (void *)shape);
        edit_header(fx.dir, 1, set_entry_field, (void *)offs);
        edit_header(fx.dir, 1, set_meta_field, (void *)reg);
        reseal(fx.dir, 4);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"tensor 'w'", "missing regions", "18 of 24"}, 3);
    }
    snap_restore(&sn, fx.dir);
    /* a file from another save with the same world */
    {
        char *other = tmpdir();
        tcase w2 = {"w", "4", "S0", "8,3", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
        long n2;
        unsigned char *b2;
        tcase_make(&w2, 9);
        cr_assert_eq(ldt_ckpt_save(other, 1, (const char *[]){"w"}, (ldt_shards *[]){w2.sh}),
                     LDT_OK);
        b2 = slurp(rank_file(other, 3), &n2);
        spit(rank_file(fx.dir, 3), b2, n2);
        expect_load_error(&fx, LDT_ERR_CORRUPT,
                          (const char *[]){"rank-3.safetensors", "another save"}, 2);
        free(b2);
        tcase_free(&w2);
        rmtree(other);
    }
    free(b);
    snap_free(&sn);
    fixture_free(&fx);
}

Test(checkpoint, bad_arguments) {
    fixture fx;
    ldt_shards *out = NULL;
    ldt_mesh *m;
    ldt_spec spec;
    fixture_make(&fx);
    cr_assert_eq(ldt_ckpt_load(fx.dir, "nope", &fx.target, &out), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "'nope' is not in"), "%s", ldt_last_error());
    make_spec("2", "S0", "8,4", LDT_F32, &m, &spec);
    cr_assert_eq(ldt_ckpt_load(fx.dir, "w", &spec, &out), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "[8,3] f32") && strstr(ldt_last_error(), "[8,4] f32"), "%s",
              ldt_last_error());
    cr_assert_null(out);
    ldt_mesh_destroy(m);
    {
        const char *bad[] = {"", "a\nb", "\xff\xfe", "\xc0\xaf", "__metadata__", "lazydt"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            cr_assert_eq(ldt_ckpt_save(fx.dir, 1, (const char *[]){bad[i]},
                                       (ldt_shards *[]){fx.w.sh}),
                         LDT_ERR_INVALID_ARGUMENT, "name %zu accepted", i);
            cr_assert(strstr(ldt_last_error(), "not allowed"), "%s", ldt_last_error());
        }
        cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"x", "x"},
                                   (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                     LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), "'x' is given twice"), "%s", ldt_last_error());
        /* UTF-8 names are fine */
        cr_assert_eq(ldt_ckpt_save(fx.dir, 1, (const char *[]){"poids.\xc3\xa9t\xc3\xa9 \"q\""},
                                   (ldt_shards *[]){fx.w.sh}),
                     LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_ckpt_load(fx.dir, "poids.\xc3\xa9t\xc3\xa9 \"q\"", &fx.target, &out),
                     LDT_OK, "%s", ldt_last_error());
        ldt_shards_destroy(out);
    }
    fixture_free(&fx);
}

/* ---- the manifest ------------------------------------------------------------------------ */

/* Loads t from dir onto one rank: 1 when it is t's value, 0 when it loads with other values,
 * -1 when it does not load (the message is left in ldt_last_error). */
static int loads_as(const char *dir, const tcase *t) {
    ldt_mesh *m;
    ldt_spec spec;
    ldt_shards *out = NULL;
    void *got = malloc((size_t)t->nbytes + 1);
    int k = -1;
    make_spec("1", "R", t->shape, t->dt, &m, &spec);
    if (ldt_ckpt_load(dir, t->name, &spec, &out) == LDT_OK) {
        cr_assert_eq(ldt_full_tensor(out, got), LDT_OK);
        k = t->nbytes == 0 || memcmp(got, t->full, (size_t)t->nbytes) == 0;
    }
    ldt_shards_destroy(out);
    ldt_mesh_destroy(m);
    free(got);
    return k;
}

static char *info_text(const char *dir, ldt_status *st) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    *st = ldt_ckpt_info(dir, f);
    fclose(f);
    return text;
}

Test(checkpoint, manifest_lists_the_save_and_checkpoints_from_before_manifests_still_load) {
    char *dir = tmpdir(), names[4096];
    tcase w = {"w", "dp=2,tp=2", "S0,S1", "6,4", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    tcase b = {"b", "2", "R", "5", LDT_I64, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    tcase w2 = w;
    cJSON *m, *f;
    ldt_status st;
    char *text;
    int r = 0;
    tcase_make(&w, 3);
    tcase_make(&b, 4);
    tcase_make(&w2, 5);
    cr_assert_eq(ldt_ckpt_save(dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){w.sh, b.sh}),
                 LDT_OK, "%s", ldt_last_error());
    m = read_manifest(dir);
    cr_assert(m, "no manifest.json");
    cr_assert_str_eq(cJSON_GetObjectItem(m, "format")->valuestring, "lazydt-checkpoint-manifest");
    cr_assert_eq(cJSON_GetObjectItem(m, "version")->valuedouble, 1);
    cr_assert_eq(cJSON_GetObjectItem(m, "world_size")->valuedouble, 4);
    cr_assert_eq(cJSON_GetObjectItem(m, "tensors")->valuedouble, 2);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "files")), 4);
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files")) {
        const char *name = cJSON_GetObjectItem(f, "file")->valuestring;
        char path[600], prefix[32], hex[17];
        long n;
        unsigned char *bytes;
        cJSON *h, *fmt;
        snprintf(prefix, sizeof prefix, "rank-%d.", r);
        cr_assert_eq(cJSON_GetObjectItem(f, "rank")->valuedouble, r);
        cr_assert(strncmp(name, prefix, strlen(prefix)) == 0 && strlen(name) == strlen(prefix) + 16 + 12,
                  "rank %d's file is named %s", r, name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        bytes = slurp(path, &n);
        cr_assert_eq((long)cJSON_GetObjectItem(f, "bytes")->valuedouble, n, "%s", name);
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64(bytes, (size_t)(8 + le64(bytes)), 0));
        cr_assert_str_eq(cJSON_GetObjectItem(f, "header_xxh64")->valuestring, hex, "%s", name);
        h = cJSON_ParseWithLength((char *)bytes + 8, le64(bytes));
        fmt = cJSON_Parse(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "__metadata__"), "lazydt")->valuestring);
        cr_assert_str_eq(cJSON_GetObjectItem(fmt, "save_id")->valuestring,
                         cJSON_GetObjectItem(m, "save_id")->valuestring, "%s", name);
        cJSON_Delete(fmt);
        cJSON_Delete(h);
        free(bytes);
        r++;
    }
    cJSON_Delete(m);
    cr_assert_eq(loads_as(dir, &w), 1, "%s", ldt_last_error());
    cr_assert_eq(loads_as(dir, &b), 1, "%s", ldt_last_error());
    check_load(dir, &w, "4", "S1");
    text = info_text(dir, &st);
    cr_assert(st == LDT_OK && strstr(text, "listed in manifest.json") && !strstr(text, "not part of"),
              "%s", text);
    free(text);
    /* the same files as saves wrote them before manifests: rank-<r>.safetensors, no manifest */
    to_legacy(dir);
    cr_assert_eq(loads_as(dir, &w), 1, "%s", ldt_last_error());
    cr_assert_eq(loads_as(dir, &b), 1, "%s", ldt_last_error());
    check_load(dir, &w, "2x2", "S1,S0");
    text = info_text(dir, &st);
    cr_assert(st == LDT_OK && strstr(text, "no manifest.json"), "%s", text);
    free(text);
    /* a save over such a checkpoint brings the manifest and removes the old files */
    cr_assert_eq(ldt_ckpt_save(dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){w2.sh, b.sh}),
                 LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(loads_as(dir, &w2), 1, "%s", ldt_last_error());
    cr_assert_eq(loads_as(dir, &b), 1, "%s", ldt_last_error());
    dir_names(dir, names, sizeof names);
    cr_assert(!strstr(names, "rank-0.safetensors") && !strstr(names, "rank-3.safetensors") &&
                  strstr(names, "manifest.json") && strlen(names) == strlen("manifest.json") + 4 * 36,
              "left in the directory: %s", names);
    tcase_free(&w);
    tcase_free(&b);
    tcase_free(&w2);
    rmtree(dir);
}

/* ---- failing and killing the save at every step ----------------------------------------- */

/* The old checkpoint (three tensors on 6 ranks) and the new one (two, on 4 ranks), with
 * other values: a reader must see one or the other, whole. */
typedef struct two_saves {
    tcase old[3], neu[2];
} two_saves;

static void two_saves_make(two_saves *ts) {
    ts->old[0] = (tcase){"w", "dp=2,tp=3", "S0,S1", "6,6", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    ts->old[1] = (tcase){"b", "2x2", "R,S0", "5", LDT_I32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    ts->old[2] = (tcase){"x", "6", "S0", "7", LDT_F64, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    ts->neu[0] = (tcase){"w", "dp=2,tp=2", "S1,S0", "6,6", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    ts->neu[1] = (tcase){"b", "4", "S0", "5", LDT_I32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    for (int i = 0; i < 3; i++) tcase_make(&ts->old[i], 1 + i);
    for (int i = 0; i < 2; i++) tcase_make(&ts->neu[i], 11 + i);
}

static void two_saves_free(two_saves *ts) {
    for (int i = 0; i < 3; i++) tcase_free(&ts->old[i]);
    for (int i = 0; i < 2; i++) tcase_free(&ts->neu[i]);
}

enum { OLD_NONE, OLD_MANIFEST, OLD_LEGACY };
static const char *const k_old_kind[] = {"no checkpoint (a new directory)", "a checkpoint with a manifest",
                                         "a checkpoint from before manifests"};

/* dir/ck as `kind` says; returns its path (static). */
static const char *old_make(const char *dir, int kind, two_saves *ts) {
    static char ck[600];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    if (kind == OLD_NONE) return ck; /* the save makes the directory */
    cr_assert_eq(save_cases(ck, ts->old, 3), LDT_OK, "%s", ldt_last_error());
    if (kind == OLD_LEGACY) to_legacy(ck);
    return ck;
}

/* 0: ck loads as the old checkpoint, whole; 1: as the new one, whole. Anything else fails. */
static int which_save(const char *ck, int kind, two_saves *ts, const char *when) {
    int n0 = loads_as(ck, &ts->neu[0]), n1 = loads_as(ck, &ts->neu[1]);
    int o0, o1, o2;
    char err[1024];
    if (n0 == 1 && n1 == 1) {
        cr_assert_eq(loads_as(ck, &ts->old[2]), -1, "%s: the new save has no 'x', yet it loads", when);
        cr_assert(strstr(ldt_last_error(), "'x' is not in"), "%s: %s", when, ldt_last_error());
        return 1;
    }
    snprintf(err, sizeof err, "%s", ldt_last_error());
    if (kind == OLD_NONE) {
        /* the old checkpoint is none: nothing of the new one may load either */
        cr_assert(n0 == -1 && n1 == -1, "%s: a part of the new save loads (w %d, b %d)", when, n0, n1);
        return 0;
    }
    o0 = loads_as(ck, &ts->old[0]);
    o1 = loads_as(ck, &ts->old[1]);
    o2 = loads_as(ck, &ts->old[2]);
    cr_assert(o0 == 1 && o1 == 1 && o2 == 1,
              "%s: neither the old checkpoint nor the new one loads whole (old w %d b %d x %d, "
              "new w %d b %d): %s / %s",
              when, o0, o1, o2, n0, n1, err, ldt_last_error());
    return 0;
}

typedef struct fault_ctl {
    int at, kill, seen;
    char what[64][160];
} fault_ctl;

static int fault_hook(void *arg, int step, const char *what) {
    fault_ctl *f = arg;
    if (step < 64) snprintf(f->what[step], sizeof f->what[step], "%s", what);
    f->seen = step + 1;
    if (step != f->at) return 0;
    if (f->kill) raise(SIGKILL);
    return 1;
}

static ldt_status save_new(const char *ck, two_saves *ts, fault_ctl *ctl) {
    const char *names[2] = {ts->neu[0].name, ts->neu[1].name};
    ldt_shards *sh[2] = {ts->neu[0].sh, ts->neu[1].sh};
    return ldt__ckpt_save_hooked(ck, 2, names, sh, ctl ? fault_hook : NULL, ctl);
}

/* The steps of a save of the new checkpoint over `kind`, and which one renames the manifest. */
static int count_steps(int kind, two_saves *ts, fault_ctl *ctl, int *rename_step) {
    char *dir = tmpdir();
    const char *ck = old_make(dir, kind, ts);
    memset(ctl, 0, sizeof *ctl);
    ctl->at = -1;
    cr_assert_eq(save_new(ck, ts, ctl), LDT_OK, "%s", ldt_last_error());
    *rename_step = -1;
    for (int k = 0; k < ctl->seen && k < 64; k++)
        if (strncmp(ctl->what[k], "rename manifest.json.tmp", 24) == 0) *rename_step = k;
    cr_assert(*rename_step > 0 && ctl->seen < 64, "steps: %d", ctl->seen);
    rmtree(dir);
    return ctl->seen;
}

/* After any fault, the next save completes and leaves only the manifest and its files. */
static void next_save_cleans_up(const char *ck, two_saves *ts, const char *when) {
    char names[4096], *text;
    ldt_status st;
    cr_assert_eq(save_new(ck, ts, NULL), LDT_OK, "%s: the next save: %s", when, ldt_last_error());
    cr_assert_eq(which_save(ck, OLD_MANIFEST, ts, when), 1);
    dir_names(ck, names, sizeof names);
    cr_assert(strlen(names) == strlen("manifest.json") + 4 * 36, "%s: left after the next save: %s", when, names);
    text = info_text(ck, &st);
    cr_assert(st == LDT_OK && !strstr(text, "not part of"), "%s: %s", when, text);
    free(text);
}

/* ckpt info names every file in ck that is not one of the checkpoint's. */
static void info_lists_the_unlisted(const char *ck, const char *when) {
    cJSON *m = read_manifest(ck), *f;
    char left[4096], *text;
    ldt_status st;
    text = info_text(ck, &st);
    cr_assert_eq(st, LDT_OK, "%s: info: %s", when, ldt_last_error());
    dir_names(ck, left, sizeof left);
    for (char *tok = strtok(left, " "); tok; tok = strtok(NULL, " ")) {
        int listed = m && !strcmp(tok, "manifest.json"), r;
        char legacy[64];
        if (m)
            cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files"))
                listed |= !strcmp(tok, cJSON_GetObjectItem(f, "file")->valuestring);
        else
            for (r = 0; r < 6; r++) {
                snprintf(legacy, sizeof legacy, "rank-%d.safetensors", r);
                listed |= !strcmp(tok, legacy);
            }
        if (!listed)
            cr_assert(strstr(text, "not part of the checkpoint") && strstr(text, tok),
                      "%s: info does not report %s: %s", when, tok, text);
        else if (strcmp(tok, "manifest.json") != 0)
            cr_assert(!strstr(text, tok), "%s: info reports the checkpoint's own %s: %s", when, tok, text);
    }
    cJSON_Delete(m);
    free(text);
}

Test(checkpoint, a_save_failed_at_any_step_leaves_the_old_or_the_new_checkpoint_whole) {
    two_saves ts;
    fault_ctl ctl;
    two_saves_make(&ts);
    for (int kind = 0; kind < 3; kind++) {
        int rename_step, n = count_steps(kind, &ts, &ctl, &rename_step);
        fault_ctl names = ctl;
        for (int k = 0; k < n; k++) {
            char *dir = tmpdir(), before[4096], after[4096], when[400], err[2048];
            const char *ck = old_make(dir, kind, &ts);
            ldt_status st;
            int got;
            snprintf(when, sizeof when, "over %s, step %d of %d (%s) failed", k_old_kind[kind], k, n,
                     names.what[k]);
            dir_names(ck, before, sizeof before);
            memset(&ctl, 0, sizeof ctl);
            ctl.at = k;
            st = save_new(ck, &ts, &ctl);
            snprintf(err, sizeof err, "%s", ldt_last_error());
            /* a failed removal of an old file does not stop the other removals */
            cr_assert(ctl.seen == k + 1 || (k > rename_step + 1 && ctl.seen == n),
                      "%s: the save went on after the fault (%d steps)", when, ctl.seen);
            got = which_save(ck, kind, &ts, when);
            if (k <= rename_step) {
                /* before the manifest is in place: an error, the old checkpoint, nothing left */
                cr_assert_eq(st, LDT_ERR_SYSTEM, "%s: status %d", when, st);
                cr_assert(strstr(err, "Input/output error"), "%s: %s", when, err);
                cr_assert_eq(got, 0, "%s: the new checkpoint loads", when);
                dir_names(ck, after, sizeof after);
                if (kind != OLD_NONE || k > 0) /* a failed first fsync may leave the new directory */
                    cr_assert_str_eq(after, before, "%s: files left behind", when);
            } else {
                /* after it: the new checkpoint; only the directory's fsync is reported */
                cr_assert_eq(got, 1, "%s: the old checkpoint loads", when);
                if (k == rename_step + 1)
                    cr_assert(st == LDT_ERR_SYSTEM && strstr(err, "in place"), "%s: %d %s", when, st, err);
                else { /* the file it could not remove: reported, never used */
                    cr_assert_eq(st, LDT_OK, "%s: a failed removal of an old file fails the save: %s",
                                 when, err);
                    info_lists_the_unlisted(ck, when);
                }
            }
            next_save_cleans_up(ck, &ts, when);
            rmtree(dir);
        }
        cr_log_info("failed the save over %s at each of its %d steps", k_old_kind[kind], n);
    }
    two_saves_free(&ts);
}

Test(checkpoint, a_save_killed_at_any_step_leaves_the_old_or_the_new_checkpoint_whole) {
    two_saves ts;
    fault_ctl ctl;
    two_saves_make(&ts);
    for (int kind = 0; kind < 3; kind++) {
        int rename_step, n = count_steps(kind, &ts, &ctl, &rename_step);
        fault_ctl names = ctl;
        for (int k = 0; k < n; k++) {
            char *dir = tmpdir(), when[400];
            const char *ck = old_make(dir, kind, &ts);
            pid_t pid;
            int status = 0, got;
            snprintf(when, sizeof when, "over %s, killed at step %d of %d (%s)", k_old_kind[kind], k, n,
                     names.what[k]);
            fflush(NULL);
            pid = fork();
            cr_assert(pid >= 0, "fork");
            if (pid == 0) {
                memset(&ctl, 0, sizeof ctl);
                ctl.at = k;
                ctl.kill = 1;
                save_new(ck, &ts, &ctl);
                _exit(3); /* not reached: the hook kills the save at step k */
            }
            cr_assert_eq(waitpid(pid, &status, 0), pid);
            cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: the child was not killed (status %d)",
                      when, status);
            got = which_save(ck, kind, &ts, when);
            cr_assert_eq(got, k > rename_step, "%s: loads as the %s checkpoint", when, got ? "new" : "old");
            /* what the killed save left is listed by info, never used */
            if (got || kind != OLD_NONE) info_lists_the_unlisted(ck, when);
            next_save_cleans_up(ck, &ts, when);
            rmtree(dir);
        }
        cr_log_info("killed the save over %s at each of its %d steps", k_old_kind[kind], n);
    }
    two_saves_free(&ts);
}

/* ---- files the manifest does not list, files of other saves, forgeries ----------------- */

Test(checkpoint, files_not_in_the_manifest_are_reported_never_used_and_removed_by_the_next_save) {
    fixture fx;
    char path[600], names[4096], *text, *other = tmpdir();
    tcase w1 = {"w", "1", "R", "8,3", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    long n;
    unsigned char *b;
    ldt_status st;
    fixture_make(&fx);
    cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                 LDT_OK, "%s", ldt_last_error()); /* the fixture, saved with a manifest */
    /* a 1-rank save of other values: its rank-0 file */
    tcase_make(&w1, 9);
    cr_assert_eq(ldt_ckpt_save(other, 1, (const char *[]){"w"}, (ldt_shards *[]){w1.sh}), LDT_OK);
    to_legacy(other);
    b = slurp(rank_file(other, 0), &n);
    /* stale and foreign files beside the checkpoint: ignored, reported */
    snprintf(path, sizeof path, "%s/rank-0.safetensors", fx.dir); /* the copied rank-0 of a 1-rank save */
    spit(path, b, n);
    snprintf(path, sizeof path, "%s/rank-5.0123456789abcdef.safetensors", fx.dir);
    spit(path, b, n);
    snprintf(path, sizeof path, "%s/manifest.json.tmp", fx.dir);
    spit(path, "{", 1);
    snprintf(path, sizeof path, "%s/notes.txt", fx.dir);
    spit(path, "mine", 4);
    cr_assert_eq(loads_as(fx.dir, &fx.w), 1, "%s", ldt_last_error());
    cr_assert_eq(loads_as(fx.dir, &fx.b), 1, "%s", ldt_last_error());
    info_lists_the_unlisted(fx.dir, "stale files");
    text = info_text(fx.dir, &st);
    cr_assert(strstr(text, "4 files") && strstr(text, "rank-0.safetensors  (a rank file of an earlier save") &&
                  strstr(text, "notes.txt  (not a checkpoint file; saves leave it alone)"),
              "%s", text);
    free(text);
    /* the next save removes this format's stale files, and leaves the others */
    cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                 LDT_OK, "%s", ldt_last_error());
    dir_names(fx.dir, names, sizeof names);
    cr_assert(strlen(names) == strlen("manifest.json notes.txt") + 4 * 36 && strstr(names, "notes.txt"),
              "%s", names);
    /* a file of another save in place of a listed one is refused, by name */
    spit(rank_file(fx.dir, 0), b, n);
    expect_load_error(&fx, LDT_ERR_CORRUPT, (const char *[]){rank_file(fx.dir, 0), "belongs to another save",
                                                             "world size 1", "manifest.json lists world size 4"}, 4);
    text = info_text(fx.dir, &st);
    cr_assert_eq(st, LDT_ERR_CORRUPT, "info: %s", text);
    free(text);
    /* a listed file that is gone */
    cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                 LDT_OK, "%s", ldt_last_error());
    unlink(rank_file(fx.dir, 2));
    cr_assert_eq(loads_as(fx.dir, &fx.w), -1);
    cr_assert(strstr(ldt_last_error(), "is missing") && strstr(ldt_last_error(), "lists it as rank 2's file"),
              "%s", ldt_last_error());
    free(b);
    tcase_free(&w1);
    rmtree(other);
    fixture_free(&fx);
}

/* F32 -> I32 in every rank file's entry and metadata: the bytes would read as other values. */
static void forge_dtype(cJSON *h, void *arg) {
    const char *entry[3] = {"w", "dtype", "\"I32\""}, *meta[3] = {"w", "dtype", "\"i32\""};
    (void)arg;
    if (!cJSON_GetObjectItem(h, "w")) return;
    set_entry_field(h, (void *)entry);
    set_meta_field(h, (void *)meta);
}

Test(checkpoint, a_forged_but_consistent_dtype_change_is_refused) {
    char *dir = tmpdir(), merged[600];
    tcase w = {"w", "2", "S0", "4,3", LDT_F32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    tcase wi = {"w", "2", "S0", "4,3", LDT_I32, NULL, NULL, NULL, {0}, NULL, NULL, 0};
    snapshot sn;
    tcase_make(&w, 1);
    tcase_make(&wi, 1);
    snprintf(merged, sizeof merged, "%s.merged", dir);
    cr_assert_eq(ldt_ckpt_save(dir, 1, (const char *[]){"w"}, (ldt_shards *[]){w.sh}), LDT_OK);
    snap_take(&sn, dir, 2);
    for (int legacy = 0; legacy < 2; legacy++) {
        for (int r = 0; r < 2; r++) edit_header(dir, r, forge_dtype, NULL);
        if (!legacy) { /* the manifest's checksums see the edit */
            cr_assert_eq(loads_as(dir, &wi), -1, "the forged i32 tensor loads");
            cr_assert(strstr(ldt_last_error(), rank_file(dir, 0)) && strstr(ldt_last_error(), "header was changed"),
                      "%s", ldt_last_error());
            reseal_manifest(dir); /* and a forger who rewrites them too */
        }
        cr_assert_eq(loads_as(dir, &wi), -1, "the forged i32 tensor loads (%s)", legacy ? "no manifest" : "manifest");
        cr_assert(strstr(ldt_last_error(), "save id") && strstr(ldt_last_error(), "was changed after the save"),
                  "%s", ldt_last_error());
        cr_assert_eq(ldt_ckpt_merge(dir, merged), LDT_ERR_CORRUPT, "the forgery merges");
        cr_assert(strstr(ldt_last_error(), "save id"), "%s", ldt_last_error());
        cr_assert_neq(access(merged, F_OK), 0);
        snap_restore(&sn, dir);
        if (!legacy) {
            reseal_manifest(dir);
            cr_assert_eq(loads_as(dir, &w), 1, "%s", ldt_last_error());
            to_legacy(dir);
        }
    }
    cr_assert_eq(loads_as(dir, &w), 1, "%s", ldt_last_error());
    snap_free(&sn);
    tcase_free(&w);
    tcase_free(&wi);
    rmtree(dir);
}

/* Load, merge and info all refuse dir at once (a test timeout catches a hang), naming needle. */
static void refused_at_once(fixture *fx, const char *needle, const char *kind) {
    ldt_status st;
    char *text;
    expect_load_error(fx, LDT_ERR_CORRUPT, (const char *[]){needle, kind}, 2);
    cr_assert_null(strstr(ldt_last_error(), "truncated"), "%s", ldt_last_error());
    text = info_text(fx->dir, &st);
    cr_assert_eq(st, LDT_ERR_CORRUPT);
    cr_assert(strstr(ldt_last_error(), needle) && strstr(ldt_last_error(), kind), "info: %s", ldt_last_error());
    free(text);
}

Test(checkpoint, a_fifo_directory_or_device_in_place_of_a_file_is_refused_at_once, .timeout = 60) {
    fixture fx;
    snapshot sn;
    char p[600];
    fixture_make(&fx); /* rank-<r>.safetensors, no manifest */
    snap_take(&sn, fx.dir, 4);
    for (int manifest = 0; manifest < 2; manifest++) {
        for (int r = 0; r < 2; r++) { /* rank 0 is where the world size is read */
            snprintf(p, sizeof p, "%s", rank_file(fx.dir, r));
            cr_assert_eq(unlink(p), 0);
            cr_assert_eq(mkfifo(p, 0600), 0, "mkfifo %s", p);
            refused_at_once(&fx, p, "is a FIFO (named pipe), not a regular file");
            unlink(p);
            cr_assert_eq(mkdir(p, 0700), 0);
            refused_at_once(&fx, p, "is a directory, not a regular file");
            rmdir(p);
            cr_assert_eq(symlink("/dev/null", p), 0);
            refused_at_once(&fx, p, "is a character device");
            unlink(p);
            snap_restore(&sn, fx.dir);
            cr_assert_eq(loads_as(fx.dir, &fx.w), 1, "%s", ldt_last_error());
        }
        if (!manifest) { /* again with a manifest; then the manifest itself */
            snap_free(&sn);
            cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                         LDT_OK, "%s", ldt_last_error());
            snap_take(&sn, fx.dir, 4);
        }
    }
    snprintf(p, sizeof p, "%s/manifest.json", fx.dir);
    rename(p, "/tmp/ldt-ckpt-manifest.json.aside");
    cr_assert_eq(mkfifo(p, 0600), 0);
    refused_at_once(&fx, p, "FIFO");
    unlink(p);
    rename("/tmp/ldt-ckpt-manifest.json.aside", p);
    cr_assert_eq(loads_as(fx.dir, &fx.w), 1, "%s", ldt_last_error());
    snap_free(&sn);
    fixture_free(&fx);
}

static void set_fmt_field(cJSON *h, void *arg) {
    const char *const *kv = arg; /* field, JSON value */
    cJSON *meta = cJSON_GetObjectItem(h, "__metadata__");
    cJSON *m = cJSON_Parse(cJSON_GetObjectItem(meta, "lazydt")->valuestring);
    char *s;
    cJSON_ReplaceItemInObject(m, kv[0], cJSON_Parse(kv[1]));
    s = cJSON_PrintUnformatted(m);
    cJSON_ReplaceItemInObject(meta, "lazydt", cJSON_CreateString(s));
    cJSON_free(s);
    cJSON_Delete(m);
}

Test(checkpoint, when_only_rank_0s_metadata_is_edited_the_error_names_rank_0) {
    fixture fx;
    snapshot sn;
    const char *edits[][2] = {{"save_id", "\"0123456789abcdef\""}, {"world_size", "2"}, {"tensors", "3"}};
    fixture_make(&fx); /* no manifest: rank 0 is the reference, so it must be told apart */
    snap_take(&sn, fx.dir, 4);
    for (int manifest = 0; manifest < 2; manifest++) {
        for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
            char r0[600], r1[600];
            snprintf(r0, sizeof r0, "%s", rank_file(fx.dir, 0));
            snprintf(r1, sizeof r1, "%s", rank_file(fx.dir, 1));
            edit_header(fx.dir, 0, set_fmt_field, (void *)edits[i]);
            cr_assert_eq(loads_as(fx.dir, &fx.w), -1, "rank 0's %s edited: it loads", edits[i][0]);
            /* rank 0 is the file the message is about (it may name rank 1 as the witness) */
            cr_assert(strncmp(ldt_last_error(), "ckpt: ", 6) == 0 &&
                          strncmp(ldt_last_error() + 6, r0, strlen(r0)) == 0 && strstr(ldt_last_error(), r1) != ldt_last_error() + 6,
                      "rank 0's %s edited (%s): %s", edits[i][0], manifest ? "manifest" : "no manifest",
                      ldt_last_error());
            snap_restore(&sn, fx.dir);
        }
        cr_assert_eq(loads_as(fx.dir, &fx.w), 1, "%s", ldt_last_error());
        if (!manifest) {
            snap_free(&sn);
            cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                         LDT_OK, "%s", ldt_last_error());
            snap_take(&sn, fx.dir, 4);
        }
    }
    snap_free(&sn);
    fixture_free(&fx);
}

Test(checkpoint, a_merge_into_the_checkpoint_it_reads_is_refused_before_anything_is_written) {
    fixture fx;
    snapshot sn;
    char p[600], names[4096], before[4096], lnk[600];
    fixture_make(&fx);
    for (int manifest = 0; manifest < 2; manifest++) {
        const char *outs[4];
        char inside[600], sub[600];
        snap_take(&sn, fx.dir, 4);
        dir_names(fx.dir, before, sizeof before);
        snprintf(inside, sizeof inside, "%s/merged.safetensors", fx.dir);
        snprintf(sub, sizeof sub, "%s/./", fx.dir);
        outs[0] = rank_file(fx.dir, 0);
        outs[1] = inside;
        outs[2] = fx.dir;
        outs[3] = sub;
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(ldt_ckpt_merge(fx.dir, outs[i]), LDT_ERR_INVALID_ARGUMENT, "merge into %s", outs[i]);
            cr_assert(strstr(ldt_last_error(), outs[i]) && strstr(ldt_last_error(), "inside the checkpoint"),
                      "%s", ldt_last_error());
        }
        /* through a symlink or a hard link from outside */
        snprintf(lnk, sizeof lnk, "%s.link", fx.dir);
        cr_assert_eq(symlink(rank_file(fx.dir, 1), lnk), 0);
        cr_assert_eq(ldt_ckpt_merge(fx.dir, lnk), LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), lnk), "%s", ldt_last_error());
        unlink(lnk);
        cr_assert_eq(link(rank_file(fx.dir, 2), lnk), 0);
        cr_assert_eq(ldt_ckpt_merge(fx.dir, lnk), LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), lnk) && strstr(ldt_last_error(), "the checkpoint's file"), "%s",
                  ldt_last_error());
        unlink(lnk);
        /* nothing written: the same files, the same bytes, and it loads */
        dir_names(fx.dir, names, sizeof names);
        cr_assert_str_eq(names, before);
        for (int r = 0; r < 4; r++) {
            long n;
            unsigned char *b = slurp(rank_file(fx.dir, r), &n);
            cr_assert(n == sn.n[r] && memcmp(b, sn.b[r], (size_t)n) == 0, "rank %d's file changed", r);
            free(b);
        }
        cr_assert_eq(loads_as(fx.dir, &fx.w), 1, "%s", ldt_last_error());
        snprintf(p, sizeof p, "%s.merged", fx.dir); /* outside: fine */
        cr_assert_eq(ldt_ckpt_merge(fx.dir, p), LDT_OK, "%s", ldt_last_error());
        unlink(p);
        snap_free(&sn);
        if (!manifest)
            cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                         LDT_OK, "%s", ldt_last_error());
    }
    fixture_free(&fx);
}

/* ---- fuzz ------------------------------------------------------------------------------ */

/* Every number node under j, depth first. */
static int collect_numbers(cJSON *j, cJSON **out, int n, int cap) {
    cJSON *e;
    if (cJSON_IsNumber(j) && n < cap) out[n++] = j;
    cJSON_ArrayForEach(e, j) n = collect_numbers(e, out, n, cap);
    return n;
}

static const double k_odd_values[] = {0, 1, 2, 3, 7, 8, 24, -1, 0.5, 9007199254740992.0,
                                      9007199254740993.0, 1e19, 1e300, 4294967296.0};

/* Sets one random number of rank r's header, or of one tensor's metadata JSON, to an odd
 * value: the JSON stays valid, so the checks past the parser are what is exercised. */
static long mutate_number(const unsigned char *orig, long n, unsigned char *out, uint64_t *rng) {
    uint64_t hl = le64(orig);
    cJSON *h = cJSON_ParseWithLength((const char *)orig + 8, hl), *nums[256], *meta, *target;
    double v = k_odd_values[ldt_test_range(rng, 0, sizeof k_odd_values / sizeof k_odd_values[0] - 1)];
    char *text;
    long len;
    size_t tl;
    cr_assert(h);
    meta = cJSON_GetObjectItem(h, "__metadata__");
    target = cJSON_GetArrayItem(meta, (int)ldt_test_range(rng, 0, cJSON_GetArraySize(meta) - 1));
    if (ldt_test_range(rng, 0, 1)) { /* inside a metadata string */
        cJSON *m = cJSON_Parse(target->valuestring);
        int k = collect_numbers(m, nums, 0, 256);
        char *ms;
        if (k) cJSON_SetNumberValue(nums[ldt_test_range(rng, 0, k - 1)], v);
        ms = cJSON_PrintUnformatted(m);
        cJSON_ReplaceItemInObject(meta, target->string, cJSON_CreateString(ms));
        cJSON_free(ms);
        cJSON_Delete(m);
    } else {
        int k = collect_numbers(h, nums, 0, 256);
        if (k) cJSON_SetNumberValue(nums[ldt_test_range(rng, 0, k - 1)], v);
    }
    text = cJSON_PrintUnformatted(h);
    tl = strlen(text);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)tl >> (8 * i));
    memcpy(out + 8, text, tl);
    len = 8 + (long)tl;
    memcpy(out + len, orig + 8 + hl, (size_t)(n - 8 - (long)hl));
    len += n - 8 - (long)hl;
    cJSON_free(text);
    cJSON_Delete(h);
    return len;
}

/* Mutates rank 1's file again and again: every load, merge and info either refuses it or
 * gives the saved values. With a manifest, its header checksum refuses nearly every edit
 * first; without one, the reader's own checks are all there is. */
static void fuzz_headers(int manifest) {
    fixture fx;
    long n;
    unsigned char *orig, *b;
    uint64_t rng = 2024;
    int cases = ldt_test_cases(400), ok = 0;
    char merged[600];
    FILE *devnull = fopen("/dev/null", "w");
    fixture_make(&fx);
    if (manifest)
        cr_assert_eq(ldt_ckpt_save(fx.dir, 2, (const char *[]){"w", "b"}, (ldt_shards *[]){fx.w.sh, fx.b.sh}),
                     LDT_OK, "%s", ldt_last_error());
    snprintf(merged, sizeof merged, "%s.merged", fx.dir);
    orig = slurp(rank_file(fx.dir, 1), &n);
    b = malloc((size_t)n + 4096);
    for (int c = 0; c < cases; c++) {
        long len = n, hl = (long)le64(orig);
        int kind = (int)ldt_test_range(&rng, 0, 5);
        ldt_shards *out = NULL;
        ldt_status st;
        memcpy(b, orig, (size_t)n);
        if (kind == 0) { /* flip bits in the header */
            int flips = (int)ldt_test_range(&rng, 1, 4);
            for (int k = 0; k < flips; k++)
                b[ldt_test_range(&rng, 8, 8 + hl - 1)] ^= (unsigned char)(1u << ldt_test_range(&rng, 0, 7));
        } else if (kind == 1) { /* a random byte anywhere */
            b[ldt_test_range(&rng, 0, n - 1)] = (unsigned char)ldt_test_range(&rng, 0, 255);
        } else if (kind == 2) { /* truncate */
            len = (long)ldt_test_range(&rng, 0, n - 1);
        } else if (kind == 3) { /* a printable byte in the header, so the JSON may survive */
            static const char k_chars[] = "0123456789[]{},:\" -.eE";
            b[ldt_test_range(&rng, 8, 8 + hl - 1)] =
                (unsigned char)k_chars[ldt_test_range(&rng, 0, (int64_t)sizeof k_chars - 2)];
        } else if (kind == 4) { /* the length field */
            b[ldt_test_range(&rng, 0, 7)] = (unsigned char)ldt_test_range(&rng, 0, 255);
        } else { /* valid JSON, odd numbers */
            len = mutate_number(orig, n, b, &rng);
        }
        spit(rank_file(fx.dir, 1), b, len);
        st = ldt_ckpt_load(fx.dir, "w", &fx.target, &out);
        cr_assert(st == LDT_OK || (st < 0 && st >= LDT_ERR_INTERNAL && st != LDT_ERR_INTERNAL),
                  "case %d: status %d: %s", c, st, ldt_last_error());
        if (st == LDT_OK) {
            /* whatever still loads is the saved tensor: checksums and regions saw to it */
            void *got = malloc((size_t)fx.w.nbytes);
            ok++;
            cr_assert_not_null(out);
            cr_assert_eq(ldt_full_tensor(out, got), LDT_OK);
            cr_assert(memcmp(got, fx.w.full, (size_t)fx.w.nbytes) == 0,
                      "case %d (kind %d) loaded other values", c, kind);
            free(got);
            ldt_shards_destroy(out);
        } else
            cr_assert_null(out);
        st = ldt_ckpt_merge(fx.dir, merged);
        cr_assert(st == LDT_OK || (st < 0 && st != LDT_ERR_INTERNAL), "case %d: merge %d: %s", c,
                  st, ldt_last_error());
        unlink(merged);
        ldt_ckpt_info(fx.dir, devnull);
    }
    cr_log_info("fuzz (%s): %d of %d mutated checkpoints still loaded", manifest ? "manifest" : "no manifest",
                ok, cases);
    fclose(devnull);
    free(b);
    spit(rank_file(fx.dir, 1), orig, n);
    free(orig);
    fixture_free(&fx);
}

Test(checkpoint, flipped_and_truncated_headers_never_crash) { fuzz_headers(0); }

Test(checkpoint, flipped_and_truncated_headers_never_crash_with_a_manifest) { fuzz_headers(1); }
