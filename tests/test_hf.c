/* Hugging Face GPT-2 weights (ldt_hf_import / ldt_hf_export, ldt ckpt import-hf / export-hf).
 * The test writes its own small GPT-2-layout safetensors files (random weights from a fixed
 * seed: 2 layers, hidden 32, 4 heads, vocab 64, 16 positions), imports them, runs the built-in
 * gpt through lazydt on 1 rank and on dp=2,tp=2, and compares the logits with a GPT-2 forward
 * written here from GPT-2's definition in double precision (HF's [in, out] Conv1D layout, no
 * lazydt kernel). Export must give back the source's bytes; bad files are refused by name. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldt/ldt.h"
#include "tests/cli_run.h"
#include "tests/test_util.h"

enum { L = 2, H = 32, A = 4, V = 64, P = 16, NT_MAX = 64 };

typedef struct {
    char name[96];
    char dtype[8]; /* "F32", "F16", "BF16", or another tag written as 4-byte elements */
    int ndim;
    int64_t shape[2];
    double *v; /* the values (as stored, after rounding to the dtype) */
} tens;

typedef struct {
    int n;
    tens t[NT_MAX];
} model_file;

static int64_t numel(const tens *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

static void add(model_file *f, const char *name, int ndim, int64_t d0, int64_t d1, double mean, double spread,
                uint64_t *rng) {
    tens *t = &f->t[f->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "F32");
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->v = malloc((size_t)numel(t) * sizeof *t->v);
    for (int64_t i = 0; i < numel(t); i++) {
        double u = (double)(ldt_test_rand(rng) >> 11) / 9007199254740992.0; /* [0, 1) */
        t->v[i] = (float)(mean + spread * (2 * u - 1));
    }
}

/* GPT-2's tensors in HF's layout (Conv1D weights [in, out]). */
static void make_gpt2(model_file *f, uint64_t seed) {
    uint64_t rng = seed;
    char n[96];
    f->n = 0;
    add(f, "wte.weight", 2, V, H, 0, 0.5, &rng);
    add(f, "wpe.weight", 2, P, H, 0, 0.2, &rng);
    for (int l = 0; l < L; l++) {
#define ADD(suffix, nd, a, b, mean, spread)                                                                            \
    snprintf(n, sizeof n, "h.%d.%s", l, suffix);                                                                       \
    add(f, n, nd, a, b, mean, spread, &rng)
        ADD("ln_1.weight", 1, H, 0, 1, 0.2);
        ADD("ln_1.bias", 1, H, 0, 0, 0.1);
        ADD("attn.c_attn.weight", 2, H, 3 * H, 0, 0.3);
        ADD("attn.c_attn.bias", 1, 3 * H, 0, 0, 0.1);
        ADD("attn.c_proj.weight", 2, H, H, 0, 0.2);
        ADD("attn.c_proj.bias", 1, H, 0, 0, 0.1);
        ADD("ln_2.weight", 1, H, 0, 1, 0.2);
        ADD("ln_2.bias", 1, H, 0, 0, 0.1);
        ADD("mlp.c_fc.weight", 2, H, 4 * H, 0, 0.2);
        ADD("mlp.c_fc.bias", 1, 4 * H, 0, 0, 0.1);
        ADD("mlp.c_proj.weight", 2, 4 * H, H, 0, 0.1);
        ADD("mlp.c_proj.bias", 1, H, 0, 0, 0.1);
#undef ADD
    }
    add(f, "ln_f.weight", 1, H, 0, 1, 0.2, &rng);
    add(f, "ln_f.bias", 1, H, 0, 0, 0.1, &rng);
}

static void free_file(model_file *f) {
    for (int i = 0; i < f->n; i++) free(f->t[i].v);
    f->n = 0;
}

static tens *get(model_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    cr_assert_fail("no tensor %s", name);
    return NULL;
}

static int by_name(const void *a, const void *b) { return strcmp(((const tens *)a)->name, ((const tens *)b)->name); }

/* Rounds every value to its dtype (so the reference sees what the file holds). */
static void round_to_dtypes(model_file *f) {
    for (int i = 0; i < f->n; i++)
        for (int64_t j = 0; j < numel(&f->t[i]); j++) {
            float x = (float)f->t[i].v[j];
            if (strcmp(f->t[i].dtype, "F16") == 0) x = ldt_f16_to_f32(ldt_f32_to_f16(x));
            else if (strcmp(f->t[i].dtype, "BF16") == 0) x = ldt_bf16_to_f32(ldt_f32_to_bf16(x));
            f->t[i].v[j] = x;
        }
}

/* A safetensors file as Python's safetensors writes one: metadata first, the tensors sorted
 * by name in data order, compact JSON, spaces to a multiple of 8 bytes. `prefix` goes before
 * every name. */
static void write_file(model_file *f, const char *path, const char *prefix) {
    char *hdr = malloc(1 << 16);
    size_t hn;
    int64_t off = 0;
    FILE *o;
    qsort(f->t, (size_t)f->n, sizeof f->t[0], by_name);
    hn = (size_t)sprintf(hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < f->n; i++) {
        tens *t = &f->t[i];
        int64_t es = strcmp(t->dtype, "F16") == 0 || strcmp(t->dtype, "BF16") == 0 ? 2 : 4;
        hn += (size_t)sprintf(hdr + hn, ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%lld", prefix, t->name, t->dtype,
                              (long long)t->shape[0]);
        if (t->ndim == 2) hn += (size_t)sprintf(hdr + hn, ",%lld", (long long)t->shape[1]);
        hn += (size_t)sprintf(hdr + hn, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                              (long long)(off + numel(t) * es));
        off += numel(t) * es;
    }
    hdr[hn++] = '}';
    while (hn % 8) hdr[hn++] = ' ';
    cr_assert_not_null(o = fopen(path, "wb"));
    for (int i = 0; i < 8; i++) fputc((int)(((uint64_t)hn >> (8 * i)) & 255), o);
    fwrite(hdr, 1, hn, o);
    for (int i = 0; i < f->n; i++)
        for (int64_t j = 0; j < numel(&f->t[i]); j++) {
            float x = (float)f->t[i].v[j];
            if (strcmp(f->t[i].dtype, "F16") == 0 || strcmp(f->t[i].dtype, "BF16") == 0) {
                uint16_t h = strcmp(f->t[i].dtype, "F16") == 0 ? ldt_f32_to_f16(x) : ldt_f32_to_bf16(x);
                fwrite(&h, 2, 1, o);
            } else
                fwrite(&x, 4, 1, o);
        }
    fclose(o);
    free(hdr);
}

static char *slurp(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    char *b;
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)*n + 1);
    cr_assert_eq(fread(b, 1, (size_t)*n, f), (size_t)*n);
    fclose(f);
    return b;
}

/* ---- the reference: GPT-2's forward from its definition, double precision --------------- */
static void layer_norm(const double *x, const double *g, const double *b, double *y) {
    double mu = 0, var = 0;
    for (int i = 0; i < H; i++) mu += x[i] / H;
    for (int i = 0; i < H; i++) var += (x[i] - mu) * (x[i] - mu) / H;
    for (int i = 0; i < H; i++) y[i] = (x[i] - mu) / sqrt(var + 1e-5) * g[i] + b[i];
}

/* y[out] = x[in] @ W[in, out] + b (HF Conv1D) */
static void conv1d(const double *x, int in, int out, const double *w, const double *b, double *y) {
    for (int o = 0; o < out; o++) {
        double s = b[o];
        for (int i = 0; i < in; i++) s += x[i] * w[(int64_t)i * out + o];
        y[o] = s;
    }
}

static double gelu_new(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }

/* logits [S, V] of one sequence of S tokens */
static void gpt2_forward(model_file *f, const int64_t *tok, int S, double *logits) {
    double(*x)[H] = calloc((size_t)S, sizeof *x), (*hs)[H] = calloc((size_t)S, sizeof *hs);
    double(*qkv)[3 * H] = calloc((size_t)S, sizeof *qkv), (*att)[H] = calloc((size_t)S, sizeof *att);
    double t[4 * H], u[H], *wte = get(f, "wte.weight")->v, *wpe = get(f, "wpe.weight")->v;
    char n[96];
#define W(suffix) (snprintf(n, sizeof n, "h.%d.%s", l, suffix), get(f, n)->v)
    for (int s = 0; s < S; s++)
        for (int i = 0; i < H; i++) x[s][i] = wte[tok[s] * H + i] + wpe[s * H + i];
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < S; s++) {
            layer_norm(x[s], W("ln_1.weight"), W("ln_1.bias"), hs[s]);
            conv1d(hs[s], H, 3 * H, W("attn.c_attn.weight"), W("attn.c_attn.bias"), qkv[s]);
        }
        for (int a = 0; a < A; a++) /* head a: q, k, v are columns a*D.. of each third */
            for (int s = 0; s < S; s++) {
                const int D = H / A;
                double w[P], mx = -1e300, z = 0;
                for (int r = 0; r <= s; r++) { /* causal: keys up to the query's position */
                    double d = 0;
                    for (int e = 0; e < D; e++) d += qkv[s][a * D + e] * qkv[r][H + a * D + e];
                    w[r] = d / sqrt((double)D);
                    if (w[r] > mx) mx = w[r];
                }
                for (int r = 0; r <= s; r++) z += (w[r] = exp(w[r] - mx));
                for (int e = 0; e < D; e++) {
                    double y = 0;
                    for (int r = 0; r <= s; r++) y += w[r] / z * qkv[r][2 * H + a * D + e];
                    att[s][a * D + e] = y;
                }
            }
        for (int s = 0; s < S; s++) {
            conv1d(att[s], H, H, W("attn.c_proj.weight"), W("attn.c_proj.bias"), u);
            for (int i = 0; i < H; i++) x[s][i] += u[i];
            layer_norm(x[s], W("ln_2.weight"), W("ln_2.bias"), hs[s]);
            conv1d(hs[s], H, 4 * H, W("mlp.c_fc.weight"), W("mlp.c_fc.bias"), t);
            for (int i = 0; i < 4 * H; i++) t[i] = gelu_new(t[i]);
            conv1d(t, 4 * H, H, W("mlp.c_proj.weight"), W("mlp.c_proj.bias"), u);
            for (int i = 0; i < H; i++) x[s][i] += u[i];
        }
    }
#undef W
    for (int s = 0; s < S; s++) {
        layer_norm(x[s], get(f, "ln_f.weight")->v, get(f, "ln_f.bias")->v, hs[s]);
        for (int c = 0; c < V; c++) { /* the head tied to wte */
            double d = 0;
            for (int i = 0; i < H; i++) d += hs[s][i] * wte[c * H + i];
            logits[s * V + c] = d;
        }
    }
    free(x);
    free(hs);
    free(qkv);
    free(att);
}

/* ---- helpers ------------------------------------------------------------------------------ */
static char g_dir[256];

static void make_tmp(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ldt_test_hf_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void rm_tmp(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
}

/* The built-in gpt loaded from ckpt on mesh_text: logits [B, S, V] of tokens. */
static void lazydt_logits(const char *ckpt, const char *mesh_text, int B, int S, const int64_t *tok, float *out) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_model *m;
    ldt_exec *ex;
    ldt_tensor *loss, *lg;
    int64_t *tgt = calloc((size_t)(B * S), sizeof *tgt);
    const char *kind;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK, "%s", ldt_last_error());
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_config_load(ckpt, &cfg, &kind), LDT_OK, "%s", ldt_last_error());
    cr_assert_str_eq(kind, "gpt");
    cr_assert(cfg.layers == L && cfg.hidden == H && cfg.heads == A && cfg.vocab == V && cfg.positions == P);
    cfg.seq = S;
    cfg.batch = B;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_load(m, ckpt, 0, NULL), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pin(m, "megatron"), LDT_OK);
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 0, NULL), tok, B * S * 8), LDT_OK);
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, B * S * 8), LDT_OK);
    cr_assert_not_null(loss = ldt_model_forward(m), "%s", ldt_ctx_errmsg(ctx));
    cr_assert_not_null(lg = ldt_model_output(m));
    cr_assert_eq(ldt_compile(ctx, &lg, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_read(ex, 0, out, (int64_t)B * S * V * 4), LDT_OK, "%s", ldt_last_error());
    (void)loss;
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    free(tgt);
}

/* Imports path (heads A) on mesh_text into dir/name; the status, with the message in msg. */
static ldt_status import(const char *src, const char *name, const char *mesh_text, int64_t heads, char *out_dir) {
    ldt_mesh *mesh;
    ldt_hf_options o = {heads, LDT_F32};
    ldt_status st;
    snprintf(out_dir, 300, "%s/%s", g_dir, name);
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    st = ldt_hf_import(src, out_dir, mesh, &o, NULL);
    ldt_mesh_destroy(mesh);
    return st;
}

/* ---- tests -------------------------------------------------------------------------------- */
Test(hf, gpt2_logits_match_a_double_precision_gpt2, .init = make_tmp, .fini = rm_tmp) {
    model_file f;
    char src[300], ck[300];
    const int B = 2, S = 12; /* fewer positions than the table's 16 */
    int64_t tok[2 * 12];
    double *ref = malloc(sizeof(double) * B * S * V), mx = 0, diff = 0;
    float *got = malloc(sizeof(float) * B * S * V);
    uint64_t rng = 7;
    const char *imports[] = {"1", "dp=2,tp=2"}, *meshes[] = {"1", "dp=2,tp=2", "tp=4"};
    make_gpt2(&f, 12345);
    snprintf(src, sizeof src, "%s/model.safetensors", g_dir);
    write_file(&f, src, "");
    for (int i = 0; i < B * S; i++) tok[i] = ldt_test_range(&rng, 0, V - 1);
    for (int b = 0; b < B; b++) gpt2_forward(&f, tok + b * S, S, ref + b * S * V);
    for (int i = 0; i < B * S * V; i++) mx = fmax(mx, fabs(ref[i]));
    cr_assert_gt(mx, 0.5, "the logits are not all tiny: %g", mx);
    for (int im = 0; im < 2; im++) {
        char name[32];
        snprintf(name, sizeof name, "ck%d", im);
        cr_assert_eq(import(src, name, imports[im], A, ck), LDT_OK, "%s", ldt_last_error());
        for (int me = 0; me < 3; me++) {
            double d = 0;
            lazydt_logits(ck, meshes[me], B, S, tok, got);
            for (int i = 0; i < B * S * V; i++) d = fmax(d, fabs(got[i] - ref[i]));
            cr_assert_leq(d, 1e-5 * mx + 1e-6, "imported on %s, run on %s: max |diff| %g, max |logit| %g",
                          imports[im], meshes[me], d, mx);
            diff = fmax(diff, d);
        }
    }
    /* the comparison can fail: a weight not transposed would be far off */
    cr_assert_gt(diff, 0, "f32 against double differs somewhere");
    free(ref);
    free(got);
    free_file(&f);
}

/* export-hf gives the source file back: the same bytes (a file laid out as Python's
 * safetensors lays it out), for f32, f16 with the "transformer." prefix, and bf16. */
Test(hf, export_gives_the_source_bytes_back, .init = make_tmp, .fini = rm_tmp) {
    const char *dts[] = {"F32", "F16", "BF16"}, *prefixes[] = {"", "transformer.", ""};
    for (int k = 0; k < 3; k++) {
        model_file f;
        char src[300], out[300], ck[300], name[16];
        long n1, n2;
        char *a, *b;
        make_gpt2(&f, 99 + (uint64_t)k);
        for (int i = 0; i < f.n; i++) snprintf(f.t[i].dtype, sizeof f.t[i].dtype, "%s", dts[k]);
        round_to_dtypes(&f);
        snprintf(src, sizeof src, "%s/src%d.safetensors", g_dir, k);
        snprintf(out, sizeof out, "%s/out%d.safetensors", g_dir, k);
        snprintf(name, sizeof name, "ck%d", k);
        write_file(&f, src, prefixes[k]);
        cr_assert_eq(import(src, name, "dp=2,tp=2", A, ck), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_hf_export(ck, out, LDT_DTYPE_COUNT), LDT_OK, "%s", ldt_last_error());
        a = slurp(src, &n1);
        b = slurp(out, &n2);
        cr_assert_eq(n1, n2, "%s: %ld bytes back, %ld in", dts[k], n2, n1);
        cr_assert(memcmp(a, b, (size_t)n1) == 0, "%s: the exported bytes differ from the source", dts[k]);
        free(a);
        free(b);
        free_file(&f);
    }
}

/* A directory with model.safetensors.index.json and two shards imports as the one file does;
 * lm_head.weight equal to wte is accepted; n_head comes from config.json. */
Test(hf, sharded_index_config_json_and_tied_head, .init = make_tmp, .fini = rm_tmp) {
    model_file f, a = {0}, b = {0};
    char path[300], ck1[300], ck2[300], out1[300], out2[300];
    long n1, n2;
    char *x, *y;
    FILE *o;
    make_gpt2(&f, 5);
    snprintf(path, sizeof path, "%s/one.safetensors", g_dir);
    write_file(&f, path, "");
    cr_assert_eq(import(path, "ck1", "1", A, ck1), LDT_OK, "%s", ldt_last_error());
    snprintf(path, sizeof path, "%s/sharded", g_dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    /* shard 1: the embeddings, ln_f and a tied head; shard 2: the blocks */
    for (int i = 0; i < f.n; i++) (strncmp(f.t[i].name, "h.", 2) == 0 ? &b : &a)->t[(strncmp(f.t[i].name, "h.", 2) == 0 ? &b : &a)->n++] = f.t[i];
    /* a causal mask buffer as older files hold them (its dtype is not read: it is skipped) */
    b.t[b.n] = *get(&f, "wpe.weight");
    snprintf(b.t[b.n].name, sizeof b.t[0].name, "h.0.attn.bias");
    snprintf(b.t[b.n++].dtype, sizeof b.t[0].dtype, "BOOL");
    a.t[a.n] = *get(&f, "wte.weight");
    snprintf(a.t[a.n++].name, sizeof a.t[0].name, "lm_head.weight");
    snprintf(path, sizeof path, "%s/sharded/model-00001-of-00002.safetensors", g_dir);
    write_file(&a, path, "transformer.");
    snprintf(path, sizeof path, "%s/sharded/model-00002-of-00002.safetensors", g_dir);
    write_file(&b, path, "transformer.");
    snprintf(path, sizeof path, "%s/sharded/model.safetensors.index.json", g_dir);
    cr_assert_not_null(o = fopen(path, "w"));
    fprintf(o, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (int i = 0; i < a.n; i++) fprintf(o, "%s\"transformer.%s\":\"model-00001-of-00002.safetensors\"", i ? "," : "", a.t[i].name);
    for (int i = 0; i < b.n; i++) fprintf(o, ",\"transformer.%s\":\"model-00002-of-00002.safetensors\"", b.t[i].name);
    fprintf(o, "}}\n");
    fclose(o);
    snprintf(path, sizeof path, "%s/sharded/config.json", g_dir);
    cr_assert_not_null(o = fopen(path, "w"));
    fprintf(o, "{\"model_type\":\"gpt2\",\"n_head\":%d,\"n_embd\":%d,\"activation_function\":\"gelu_new\","
               "\"layer_norm_epsilon\":1e-05}\n", A, H);
    fclose(o);
    snprintf(path, sizeof path, "%s/sharded", g_dir);
    cr_assert_eq(import(path, "ck2", "dp=2,tp=2", 0, ck2), LDT_OK, "%s", ldt_last_error());
    snprintf(out1, sizeof out1, "%s/out1.safetensors", g_dir);
    snprintf(out2, sizeof out2, "%s/out2.safetensors", g_dir);
    cr_assert_eq(ldt_hf_export(ck1, out1, LDT_F32), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_hf_export(ck2, out2, LDT_DTYPE_COUNT), LDT_OK, "%s", ldt_last_error());
    x = slurp(out1, &n1);
    y = slurp(out2, &n2);
    /* the same tensors; the sharded one's names carry the prefix it had */
    cr_assert_eq(n2, n1 + (long)((f.n * strlen("transformer.") + 7) / 8 * 8), "%ld vs %ld", n2, n1);
    cr_assert(memcmp(x + n1 - 1000, y + n2 - 1000, 1000) == 0, "the data sections end alike");
    cr_assert_not_null(strstr(y + 8, "\"transformer.h.1.mlp.c_proj.weight\""));
    free(x);
    free(y);
    free_file(&f);
}

/* A refusal for each kind of bad file, naming what is wrong. */
Test(hf, bad_files_are_refused_by_name, .init = make_tmp, .fini = rm_tmp) {
    char path[300], ck[300];
    struct {
        const char *what, *expect;
        ldt_status st;
        int64_t heads;
    } cases[] = {
        {"unknown", "unknown tensor 'h.0.attn.c_attnx.weight'", LDT_ERR_INVALID_ARGUMENT, A},
        {"missing", "missing tensor 'h.1.mlp.c_fc.bias'", LDT_ERR_INVALID_ARGUMENT, A},
        {"shape", "tensor 'h.0.mlp.c_fc.weight' is [128,32], expected [32,128]", LDT_ERR_INVALID_ARGUMENT, A},
        {"dtype", "tensor 'h.0.ln_1.bias' has dtype I32, expected F32, F16 or BF16", LDT_ERR_UNSUPPORTED, A},
        {"heads", "--heads", LDT_ERR_INVALID_ARGUMENT, 0},
        {"head", "lm_head.weight differs from wte.weight", LDT_ERR_UNSUPPORTED, A},
        {"notst", "not a safetensors file", LDT_ERR_CORRUPT, A},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        model_file f;
        ldt_status st;
        make_gpt2(&f, 3);
        snprintf(path, sizeof path, "%s/%s.safetensors", g_dir, cases[c].what);
        if (strcmp(cases[c].what, "unknown") == 0) snprintf(f.t[f.n - 1].name, sizeof f.t[0].name, "h.0.attn.c_attnx.weight");
        if (strcmp(cases[c].what, "missing") == 0) {
            tens *t = get(&f, "h.1.mlp.c_fc.bias");
            free(t->v);
            *t = f.t[--f.n];
        }
        if (strcmp(cases[c].what, "shape") == 0) {
            tens *t = get(&f, "h.0.mlp.c_fc.weight");
            t->shape[0] = 4 * H, t->shape[1] = H; /* [out, in]: not transposed */
        }
        if (strcmp(cases[c].what, "dtype") == 0) snprintf(get(&f, "h.0.ln_1.bias")->dtype, 8, "I32");
        if (strcmp(cases[c].what, "head") == 0) {
            f.t[f.n] = *get(&f, "wte.weight");
            f.t[f.n].v = malloc(V * H * sizeof(double));
            memcpy(f.t[f.n].v, get(&f, "wte.weight")->v, V * H * sizeof(double));
            f.t[f.n].v[77] += 0.25;
            snprintf(f.t[f.n++].name, sizeof f.t[0].name, "lm_head.weight");
        }
        if (strcmp(cases[c].what, "notst") == 0) {
            FILE *o = fopen(path, "w");
            fputs("not a checkpoint at all, just text\n", o);
            fclose(o);
        } else
            write_file(&f, path, "");
        st = import(path, cases[c].what, "1", cases[c].heads, ck);
        cr_assert_eq(st, cases[c].st, "%s: status %d: %s", cases[c].what, st, ldt_last_error());
        cr_assert_not_null(strstr(ldt_last_error(), cases[c].expect), "%s: %s", cases[c].what, ldt_last_error());
        cr_assert_neq(access(ck, F_OK), 0, "%s: nothing is written", cases[c].what);
        free_file(&f);
    }
}

/* The model checkpoint API refuses what does not fit: a config that differs, by name. */
Test(hf, model_load_names_the_difference, .init = make_tmp, .fini = rm_tmp) {
    model_file f;
    char src[300], ck[300];
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_model_config cfg = ldt_model_config_default("gpt");
    make_gpt2(&f, 1);
    snprintf(src, sizeof src, "%s/m.safetensors", g_dir);
    write_file(&f, src, "");
    cr_assert_eq(import(src, "ck", "1", A, ck), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    cfg.layers = L, cfg.hidden = H, cfg.heads = A, cfg.vocab = V, cfg.seq = 8, cfg.positions = P, cfg.batch = 1;
    cfg.heads = 8;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK);
    cr_assert_eq(ldt_model_load(m, ck, 0, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "saved with heads = 4, this model has heads = 8"), "%s", ldt_last_error());
    ldt_model_destroy(m);
    cr_assert_neq(ldt_model_config_load(g_dir, &cfg, NULL), LDT_OK, "not a checkpoint");
    cr_assert_eq(ldt_hf_export(ck, NULL, LDT_F32), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_hf_export(ck, src, LDT_I32), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "expected f32, f16 or bf16"), "%s", ldt_last_error());
    ldt_ctx_destroy(ctx);
    free_file(&f);
}

/* The CLI: import-hf onto dp=2,tp=2, ldt run and ldt train from it on other meshes, export-hf
 * back to the same bytes, and the flags' refusals. */
Test(hf, cli_import_run_train_export, .init = make_tmp, .fini = rm_tmp) {
    static char out[1 << 16];
    char cmd[1200], src[300], back[300];
    model_file f;
    long n1, n2;
    char *a, *b;
    make_gpt2(&f, 11);
    snprintf(src, sizeof src, "%s/model.safetensors", g_dir);
    snprintf(back, sizeof back, "%s/back.safetensors", g_dir);
    write_file(&f, src, "");
    snprintf(cmd, sizeof cmd, "ckpt import-hf %s %s/ck --mesh dp=2,tp=2 --heads 4", src, g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "layers 2, hidden 32, heads 4, vocab 64, positions 16"), "%s", out);
    snprintf(cmd, sizeof cmd, "run --load %s/ck --mesh tp=2 --steps 1 --batch 2", g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "train --load %s/ck --mesh 1 --steps 2 --batch 2 --sample 0 --json", g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "\"seq\":16"), "the sizes are the checkpoint's: %s", out);
    snprintf(cmd, sizeof cmd, "ckpt export-hf %s/ck %s", g_dir, back);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s", out);
    a = slurp(src, &n1);
    b = slurp(back, &n2);
    cr_assert(n1 == n2 && memcmp(a, b, (size_t)n1) == 0, "export-hf gives the source's bytes");
    free(a);
    free(b);
    snprintf(cmd, sizeof cmd, "ckpt import-hf %s %s/ck2", src, g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "--heads"), "%s", out);
    snprintf(cmd, sizeof cmd, "ckpt import-hf %s %s/ck2 --heads 0", src, g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 2, "%s", out);
    snprintf(cmd, sizeof cmd, "ckpt export-hf %s/ck %s --dtype f64", g_dir, back);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "f32, f16 or bf16"), "%s", out);
    snprintf(cmd, sizeof cmd, "train --load %s/ck --hidden 64 --steps 1", g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "saved with hidden = 32, this model has hidden = 64"), "%s", out);
    free_file(&f);
}

/* The other refusals of the import, the export and the model checkpoint API. */
Test(hf, more_refusals, .init = make_tmp, .fini = rm_tmp) {
    static char out[1 << 14];
    model_file f;
    char path[300], src[300], ck[300], cmd[1024];
    ldt_mesh *meta, *one;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_model *m;
    ldt_model_config cfg = ldt_model_config_default("mlp");
    ldt_hf_options bad = {-1, LDT_F32}, i32 = {A, LDT_I32};
    FILE *o;
    make_gpt2(&f, 2);
    snprintf(src, sizeof src, "%s/model.safetensors", g_dir);
    write_file(&f, src, "");
    cr_assert_eq(ldt_mesh_parse("1", LDT_DEVICE_CPU, &one), LDT_OK);
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_META, &meta), LDT_OK);
    snprintf(ck, sizeof ck, "%s/ck", g_dir);
    /* arguments */
    cr_assert_eq(ldt_hf_import(NULL, ck, one, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_hf_import(src, ck, one, &bad, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "heads = -1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_hf_import(src, ck, one, &i32, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "dtype i32"), "%s", ldt_last_error());
    cr_assert_eq(ldt_hf_import(src, ck, meta, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "meta device"), "%s", ldt_last_error());
    /* a config.json that describes another function */
    {
        const char *rows[][2] = {{"\"activation_function\":\"relu\"", "activation_function is 'relu'"},
                                 {"\"layer_norm_epsilon\":1e-6", "layer_norm_epsilon is 1e-06"},
                                 {"\"scale_attn_weights\":false", "scale_attn_weights is false"}};
        snprintf(path, sizeof path, "%s/config.json", g_dir);
        for (int i = 0; i < 3; i++) {
            cr_assert_not_null(o = fopen(path, "w"));
            fprintf(o, "{\"n_head\":4,%s}", rows[i][0]);
            fclose(o);
            cr_assert_eq(ldt_hf_import(src, ck, one, NULL, NULL), LDT_ERR_UNSUPPORTED, "%s", rows[i][0]);
            cr_assert_not_null(strstr(ldt_last_error(), rows[i][1]), "%s", ldt_last_error());
        }
        unlink(path);
    }
    /* directories: nothing to read, an index listing a tensor its file lacks, one tensor twice */
    cr_assert_eq(ldt_hf_import(g_dir, ck, one, &(ldt_hf_options){A, LDT_F32}, NULL), LDT_OK, "model.safetensors "
                 "in a directory: %s", ldt_last_error());
    snprintf(path, sizeof path, "%s/empty", g_dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    cr_assert_eq(ldt_hf_import(path, ck, one, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "neither model.safetensors.index.json nor"), "%s", ldt_last_error());
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", g_dir);
    cr_assert_not_null(o = fopen(path, "w"));
    fprintf(o, "{\"weight_map\":{\"wte.weight\":\"model.safetensors\",\"h.7.ln_1.weight\":\"model.safetensors\"}}");
    fclose(o);
    cr_assert_eq(ldt_hf_import(g_dir, ck, one, NULL, NULL), LDT_ERR_CORRUPT);
    cr_assert_not_null(strstr(ldt_last_error(), "lists tensor 'h.7.ln_1.weight' in model.safetensors, which does not "
                              "hold it"), "%s", ldt_last_error());
    cr_assert_not_null(o = fopen(path, "w"));
    fprintf(o, "{\"weight_map\":{\"wte.weight\":\"model.safetensors\",\"wpe.weight\":\"copy.safetensors\"}}");
    fclose(o);
    snprintf(path, sizeof path, "%s/copy.safetensors", g_dir);
    write_file(&f, path, "");
    cr_assert_eq(ldt_hf_import(g_dir, ck, one, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "tensor 'h.0.attn.c_attn.bias' appears twice"), "%s", ldt_last_error());
    /* shapes of the embeddings, a head of another shape, no blocks */
    {
        model_file g;
        make_gpt2(&g, 2);
        get(&g, "wpe.weight")->shape[1] = H / 2;
        get(&g, "wpe.weight")->shape[0] = 2 * P;
        snprintf(path, sizeof path, "%s/wpe.safetensors", g_dir);
        write_file(&g, path, "");
        cr_assert_eq(ldt_hf_import(path, ck, one, &(ldt_hf_options){A, LDT_F32}, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(ldt_last_error(), "wte.weight is [64,32] and wpe.weight [32,16]"), "%s", ldt_last_error());
        free_file(&g);
        make_gpt2(&g, 2);
        g.t[g.n] = *get(&g, "wpe.weight");
        g.t[g.n].v = malloc(P * H * sizeof(double));
        memcpy(g.t[g.n].v, get(&g, "wpe.weight")->v, P * H * sizeof(double));
        snprintf(g.t[g.n++].name, sizeof g.t[0].name, "lm_head.weight");
        snprintf(path, sizeof path, "%s/head.safetensors", g_dir);
        write_file(&g, path, "");
        cr_assert_eq(ldt_hf_import(path, ck, one, &(ldt_hf_options){A, LDT_F32}, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(ldt_last_error(), "lm_head.weight's shape differs"), "%s", ldt_last_error());
        free_file(&g);
        make_gpt2(&g, 2);
        for (int i = 0; i < g.n;)
            if (strncmp(g.t[i].name, "h.", 2) == 0) {
                free(g.t[i].v);
                g.t[i] = g.t[--g.n];
            } else
                i++;
        snprintf(path, sizeof path, "%s/noblocks.safetensors", g_dir);
        write_file(&g, path, "");
        cr_assert_eq(ldt_hf_import(path, ck, one, &(ldt_hf_options){A, LDT_F32}, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(ldt_last_error(), "holds no block"), "%s", ldt_last_error());
        free_file(&g);
    }
    /* the model checkpoint API: NULLs, a meta mesh, an mlp where a gpt is expected */
    co.mesh = meta;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "mlp", &cfg, &m), LDT_OK);
    cr_assert_eq(ldt_model_save(m, ck, 0, NULL), LDT_ERR_INVALID_USAGE);
    cr_assert_not_null(strstr(ldt_last_error(), "meta device"), "%s", ldt_last_error());
    cr_assert_eq(ldt_model_save(m, NULL, 0, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_model_save(m, ck, 1, (ldt_tensor *[]){NULL}), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_model_load(m, ck, -1, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_model_load(m, ck, 0, NULL), LDT_ERR_INVALID_ARGUMENT, "a gpt checkpoint into an mlp");
    cr_assert_not_null(strstr(ldt_last_error(), "holds a gpt model, this model is a mlp"), "%s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    co.mesh = one;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "mlp", &cfg, &m), LDT_OK);
    snprintf(path, sizeof path, "%s/mlp", g_dir);
    cr_assert_eq(ldt_model_save(m, path, 0, NULL), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_hf_export(path, src, LDT_F32), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(ldt_last_error(), "holds a mlp model, expected gpt"), "%s", ldt_last_error());
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    /* the CLI: a weights-only checkpoint does not resume; ldt run's --model must be the checkpoint's */
    snprintf(cmd, sizeof cmd, "train --resume %s --steps 2", ck);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "no training state"), "%s", out);
    snprintf(cmd, sizeof cmd, "run --load %s --model mlp --steps 1", ck);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--model mlp, but"), "%s", out);
    snprintf(cmd, sizeof cmd, "ckpt import-hf %s %s/f16 --heads 4 --dtype f16", src, g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 0, "%s", out);
    snprintf(cmd, sizeof cmd, "run --load %s/f16 --steps 1", g_dir);
    cr_assert_eq(run_cli(cmd, out, sizeof out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "holds f16 weights"), "%s", out);
    ldt_mesh_destroy(meta);
    ldt_mesh_destroy(one);
    free_file(&f);
}
