/* Hugging Face GPT-2 weights in and out: a safetensors file (or the shards a
 * model.safetensors.index.json lists) into a lazydt model checkpoint for the built-in gpt, and
 * back into one safetensors file. Written against the public API only (and cJSON). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldt/exec.h"
#include "models/model.h"

#define HF_INFO_NAME "lazydt.hf" /* i64 [3]: source dtype, "transformer." prefix, lm_head stored */
#define HF_MAX_FILE ((int64_t)1 << 40)
#define HF_PREFIX "transformer."

typedef struct {
    char *name; /* without the prefix */
    ldt_dtype dtype;
    int ndim;
    int64_t shape[LDT_MAX_DIMS];
    const unsigned char *data;
    int64_t numel;
    const char *file; /* borrowed from the source */
    int used;
} hf_tensor;

typedef struct {
    int nfiles;
    char **paths;
    unsigned char **bufs;
    hf_tensor *t;
    int n, cap;
    int prefix;      /* names carried "transformer." */
    char dir[PATH_MAX];
} hf_src;

static void src_free(hf_src *s) {
    for (int i = 0; i < s->nfiles; i++) {
        free(s->bufs[i]);
        free(s->paths[i]);
    }
    for (int i = 0; i < s->n; i++) free(s->t[i].name);
    free(s->bufs);
    free(s->paths);
    free(s->t);
    memset(s, 0, sizeof *s);
}

static ldt_status read_all(const char *path, unsigned char **out, int64_t *len) {
    struct stat sb;
    FILE *f;
    unsigned char *b;
    if (stat(path, &sb) != 0)
        return ldt_set_error(LDT_ERR_SYSTEM, "import-hf: cannot open %s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s is not a regular file", path);
    if ((int64_t)sb.st_size > HF_MAX_FILE)
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s is larger than 1 TiB", path);
    if (!(f = fopen(path, "rb")))
        return ldt_set_error(LDT_ERR_SYSTEM, "import-hf: cannot open %s: %s", path, strerror(errno));
    if (!(b = malloc(sb.st_size > 0 ? (size_t)sb.st_size : 1))) {
        fclose(f);
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "import-hf: out of memory for %s (%lld bytes)", path,
                             (long long)sb.st_size);
    }
    if (fread(b, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        fclose(f);
        free(b);
        return ldt_set_error(LDT_ERR_SYSTEM, "import-hf: cannot read %s", path);
    }
    fclose(f);
    *out = b;
    *len = (int64_t)sb.st_size;
    return LDT_OK;
}

static int parse_dtype(const char *s, ldt_dtype *dt) {
    if (strcmp(s, "F32") == 0) *dt = LDT_F32;
    else if (strcmp(s, "F16") == 0) *dt = LDT_F16;
    else if (strcmp(s, "BF16") == 0) *dt = LDT_BF16;
    else return 0;
    return 1;
}

static const char *dtype_tag(ldt_dtype dt) { return dt == LDT_F16 ? "F16" : dt == LDT_BF16 ? "BF16" : "F32"; }

/* A JSON number that is an integer in [0, 2^53]. */
static int json_count(const cJSON *j, int64_t *v) {
    double d;
    if (!cJSON_IsNumber(j)) return 0;
    d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(int64_t)d) return 0;
    *v = (int64_t)d;
    return 1;
}

/* "h.{i}.<suffix>" with a suffix of GPT-2's block: i, and whether it is a mask buffer. */
static int block_index(const char *n, int64_t *layer, int *buffer) {
    static const char *const k[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                                    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                                    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
                                    "attn.bias",          "attn.masked_bias"};
    char *end;
    long long i;
    if (strncmp(n, "h.", 2) != 0 || n[2] < '0' || n[2] > '9') return 0;
    errno = 0;
    i = strtoll(n + 2, &end, 10);
    if (errno || *end != '.' || i < 0 || i > 100000) return 0;
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++)
        if (strcmp(end + 1, k[j]) == 0) {
            *layer = i;
            *buffer = j >= 12;
            return 1;
        }
    return 0;
}

/* Adds every tensor of one safetensors file. */
static ldt_status add_file(hf_src *s, const char *path) {
    unsigned char *buf;
    int64_t len, hlen = 0;
    cJSON *root = NULL;
    ldt_status st;
    const char *file;
    char **paths;
    unsigned char **bufs;
    if ((st = read_all(path, &buf, &len)) != LDT_OK) return st;
    if (!(paths = realloc(s->paths, (size_t)(s->nfiles + 1) * sizeof *paths))) goto oom;
    s->paths = paths;
    if (!(bufs = realloc(s->bufs, (size_t)(s->nfiles + 1) * sizeof *bufs))) goto oom;
    s->bufs = bufs;
    if (!(s->paths[s->nfiles] = strdup(path))) goto oom;
    s->bufs[s->nfiles++] = buf;
    file = s->paths[s->nfiles - 1];
    if (len < 8) return ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s is %lld bytes, shorter than the 8-byte header length", file, (long long)len);
    for (int i = 7; i >= 0; i--) hlen = hlen * 256 + buf[i];
    if (hlen < 2 || hlen > len - 8 || hlen > ((int64_t)100 << 20))
        return ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: header length %lld does not fit the file (%lld bytes) "
                             "or the 100 MiB cap: not a safetensors file", file, (long long)hlen, (long long)len);
    if (!(root = cJSON_ParseWithLength((const char *)buf + 8, (size_t)hlen)) || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: the header is not a JSON object: not a safetensors file", file);
    }
    for (cJSON *e = root->child; e; e = e->next) {
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape"),
                    *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        hf_tensor t = {0};
        int64_t a, b, es;
        const char *nm = e->string;
        if (strcmp(nm, "__metadata__") == 0) continue;
        {
            const char *bare = strncmp(nm, HF_PREFIX, strlen(HF_PREFIX)) == 0 ? nm + strlen(HF_PREFIX) : nm;
            int64_t l;
            int buffer = 0;
            if (block_index(bare, &l, &buffer) && buffer) continue; /* the causal mask buffers, any dtype */
        }
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: tensor '%s' lacks dtype, shape or data_offsets", file, nm);
            goto fail;
        }
        if (!parse_dtype(dt->valuestring, &t.dtype)) {
            st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: tensor '%s' has dtype %s, expected F32, F16 or BF16",
                               file, nm, dt->valuestring);
            goto fail;
        }
        t.ndim = cJSON_GetArraySize(sh);
        if (t.ndim > LDT_MAX_DIMS) {
            st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: tensor '%s' has %d dims, at most %d", file, nm,
                               t.ndim, LDT_MAX_DIMS);
            goto fail;
        }
        t.numel = 1;
        for (int d = 0; d < t.ndim; d++) {
            if (!json_count(cJSON_GetArrayItem(sh, d), &t.shape[d]) || t.shape[d] > HF_MAX_FILE ||
                __builtin_mul_overflow(t.numel, t.shape[d], &t.numel)) {
                st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: tensor '%s' has a bad shape", file, nm);
                goto fail;
            }
        }
        es = (int64_t)ldt_dtype_size(t.dtype);
        if (!json_count(cJSON_GetArrayItem(off, 0), &a) || !json_count(cJSON_GetArrayItem(off, 1), &b) || a > b ||
            b > len - 8 - hlen || t.numel > HF_MAX_FILE || b - a != t.numel * es) {
            st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: tensor '%s' has data_offsets that do not fit its "
                               "shape and dtype or the file", file, nm);
            goto fail;
        }
        t.data = buf + 8 + hlen + a;
        t.file = file;
        if (strncmp(nm, HF_PREFIX, strlen(HF_PREFIX)) == 0) {
            nm += strlen(HF_PREFIX);
            s->prefix = 1;
        }
        for (int i = 0; i < s->n; i++)
            if (strcmp(s->t[i].name, nm) == 0) {
                st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: tensor '%s' appears twice (%s and %s)", nm,
                                   s->t[i].file, file);
                goto fail;
            }
        if (s->n == s->cap) {
            int cap = s->cap ? 2 * s->cap : 64;
            hf_tensor *p = realloc(s->t, (size_t)cap * sizeof *p);
            if (!p) goto oom_json;
            s->t = p;
            s->cap = cap;
        }
        if (!(t.name = strdup(nm))) goto oom_json;
        s->t[s->n++] = t;
    }
    cJSON_Delete(root);
    return LDT_OK;
oom_json:
    cJSON_Delete(root);
    return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "import-hf: out of memory");
fail:
    cJSON_Delete(root);
    return st;
oom:
    if (!s->nfiles || s->bufs[s->nfiles - 1] != buf) free(buf);
    return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "import-hf: out of memory");
}

static cJSON *read_json(const char *path, ldt_status *st) {
    unsigned char *buf;
    int64_t len;
    cJSON *j;
    if ((*st = read_all(path, &buf, &len)) != LDT_OK) return NULL;
    j = cJSON_ParseWithLength((const char *)buf, (size_t)len);
    free(buf);
    if (!j) *st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s is not valid JSON", path);
    return j;
}

/* The source: a file, or a directory with an index (or one model.safetensors). */
static ldt_status open_src(const char *src, hf_src *s) {
    struct stat sb;
    char path[PATH_MAX + 64];
    ldt_status st = LDT_OK;
    if (stat(src, &sb) != 0)
        return ldt_set_error(LDT_ERR_SYSTEM, "import-hf: cannot open %s: %s", src, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        const char *slash = strrchr(src, '/');
        if (slash) snprintf(s->dir, sizeof s->dir, "%.*s", (int)(slash - src), src);
        else snprintf(s->dir, sizeof s->dir, ".");
        if (!s->dir[0]) snprintf(s->dir, sizeof s->dir, "/");
        return add_file(s, src);
    }
    snprintf(s->dir, sizeof s->dir, "%s", src);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", src);
    if (access(path, F_OK) == 0) {
        cJSON *idx = read_json(path, &st), *wm;
        if (!idx) return st;
        wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
        if (!cJSON_IsObject(wm)) {
            cJSON_Delete(idx);
            return ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s has no \"weight_map\" object", path);
        }
        for (cJSON *e = wm->child; e && st == LDT_OK; e = e->next) {
            char fp[PATH_MAX + 64];
            int seen = 0;
            if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || strcmp(e->valuestring, "..") == 0) {
                st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: weight_map entry '%s' is not a file name in %s",
                                   path, e->string, src);
                break;
            }
            snprintf(fp, sizeof fp, "%s/%s", src, e->valuestring);
            for (int i = 0; i < s->nfiles; i++) seen |= strcmp(s->paths[i], fp) == 0;
            if (!seen) st = add_file(s, fp);
        }
        /* every listed tensor must be in the files */
        for (cJSON *e = wm->child; e && st == LDT_OK; e = e->next) {
            const char *nm = e->string;
            int found = 0, buffer = 0;
            int64_t l;
            if (strncmp(nm, HF_PREFIX, strlen(HF_PREFIX)) == 0) nm += strlen(HF_PREFIX);
            if (block_index(nm, &l, &buffer) && buffer) continue; /* skipped when read */
            for (int i = 0; i < s->n && !found; i++) found = strcmp(s->t[i].name, nm) == 0;
            if (!found)
                st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s lists tensor '%s' in %s, which does not hold it",
                                   path, e->string, e->valuestring);
        }
        cJSON_Delete(idx);
        return st;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    if (access(path, F_OK) == 0) return add_file(s, path);
    return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                         "import-hf: directory %s holds neither model.safetensors.index.json nor "
                         "model.safetensors", src);
}

static hf_tensor *find(hf_src *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0) return &s->t[i];
    return NULL;
}

static double load_elem(const unsigned char *p, ldt_dtype dt, int64_t i) {
    if (dt == LDT_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    } else {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return dt == LDT_F16 ? ldt_f16_to_f32(h) : ldt_bf16_to_f32(h);
    }
}

static void store_elem(void *p, ldt_dtype dt, int64_t i, double v) {
    switch (dt) {
    case LDT_F64: ((double *)p)[i] = v; break;
    case LDT_F16: ((uint16_t *)p)[i] = ldt_f32_to_f16((float)v); break;
    case LDT_BF16: ((uint16_t *)p)[i] = ldt_f32_to_bf16((float)v); break;
    default: ((float *)p)[i] = (float)v; break;
    }
}

/* The HF name of model parameter n ("h.0.ln_1.w" -> "h.0.ln_1.weight"), and whether its
 * weight is a Conv1D ([in, out] in the file, [out, in] in the model). */
static void hf_name(const char *n, char *out, size_t cap, int *conv1d) {
    size_t len = strlen(n);
    *conv1d = 0;
    if (strcmp(n, "wte") == 0 || strcmp(n, "wpe") == 0) {
        snprintf(out, cap, "%s.weight", n);
        return;
    }
    if (len >= 2 && strcmp(n + len - 2, ".w") == 0) {
        snprintf(out, cap, "%.*s.weight", (int)(len - 2), n);
        *conv1d = strstr(n, "c_attn.w") || strstr(n, "c_proj.w") || strstr(n, "c_fc.w");
    } else if (len >= 2 && strcmp(n + len - 2, ".b") == 0)
        snprintf(out, cap, "%.*s.bias", (int)(len - 2), n);
    else
        snprintf(out, cap, "%s", n);
}

/* n_head (and checks that the config describes GPT-2's function) from dir/config.json. */
static ldt_status config_json(const char *dir, int64_t *heads) {
    char path[PATH_MAX + 32];
    cJSON *j, *v;
    ldt_status st = LDT_OK;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, F_OK) != 0) return LDT_OK;
    if (!(j = read_json(path, &st))) return st;
    if (*heads == 0 && (v = cJSON_GetObjectItemCaseSensitive(j, "n_head")) && !json_count(v, heads))
        st = ldt_set_error(LDT_ERR_CORRUPT, "import-hf: %s: n_head is not a count", path);
    v = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
    if (st == LDT_OK && cJSON_IsString(v) && strcmp(v->valuestring, "gelu_new") != 0 &&
        strcmp(v->valuestring, "gelu_pytorch_tanh") != 0)
        st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: activation_function is '%s'; the built-in gpt has "
                           "gelu_new (the tanh form)", path, v->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(j, "layer_norm_epsilon");
    if (st == LDT_OK && cJSON_IsNumber(v) && (v->valuedouble < 0.99e-5 || v->valuedouble > 1.01e-5))
        st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: layer_norm_epsilon is %g; the built-in gpt has 1e-5",
                           path, v->valuedouble);
    v = cJSON_GetObjectItemCaseSensitive(j, "scale_attn_weights");
    if (st == LDT_OK && cJSON_IsFalse(v))
        st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: scale_attn_weights is false; the built-in gpt "
                           "scales by 1/sqrt(head_dim)", path);
    cJSON_Delete(j);
    return st;
}

static int same_shape(const hf_tensor *t, int ndim, const int64_t *dims) {
    if (t->ndim != ndim) return 0;
    for (int d = 0; d < ndim; d++)
        if (t->shape[d] != dims[d]) return 0;
    return 1;
}

static void shape_text(int ndim, const int64_t *dims, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? "," : "", (long long)dims[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

ldt_status ldt_hf_import(const char *src, const char *out_dir, const ldt_mesh *mesh,
                         const ldt_hf_options *opts, ldt_model_config *cfg_out) {
    hf_src s = {0};
    ldt_status st;
    hf_tensor *wte, *wpe, *head;
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_ctx_options co = {0};
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    ldt_mesh *host = NULL;
    void *buf = NULL;
    int64_t layers = 0, heads = opts ? opts->heads : 0, info[3];
    ldt_tensor *info_t;
    char text[512];
    if (!src || !out_dir || !mesh)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: src, out_dir and mesh must not be NULL");
    cfg.dtype = opts ? opts->dtype : LDT_F32;
    if (!ldt_dtype_is_float(cfg.dtype))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: dtype %s, expected f32, f64, f16 or bf16",
                             ldt_dtype_name(cfg.dtype));
    if (heads < 0)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: heads = %lld, expected >= 1 (0: config.json)",
                             (long long)heads);
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: the mesh is on the meta device; expected a real mesh");
    if ((st = open_src(src, &s)) != LDT_OK) goto done;
    /* names first: anything that is not GPT-2's is refused before sizes are trusted */
    for (int i = 0; i < s.n; i++) {
        const char *n = s.t[i].name;
        int64_t l;
        int buffer;
        if (strcmp(n, "wte.weight") == 0 || strcmp(n, "wpe.weight") == 0 || strcmp(n, "ln_f.weight") == 0 ||
            strcmp(n, "ln_f.bias") == 0 || strcmp(n, "lm_head.weight") == 0)
            continue;
        if (!block_index(n, &l, &buffer)) {
            st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                               "import-hf: %s: unknown tensor '%s%s', expected GPT-2's names (wte, wpe, h.{i}.ln_1, "
                               "attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, ln_f, lm_head)",
                               s.t[i].file, s.prefix ? HF_PREFIX : "", n);
            goto done;
        }
        if (l + 1 > layers) layers = l + 1;
    }
    if (!(wte = find(&s, "wte.weight")) || !(wpe = find(&s, "wpe.weight"))) {
        st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s: missing tensor '%s%s'", src, s.prefix ? HF_PREFIX : "",
                           find(&s, "wte.weight") ? "wpe.weight" : "wte.weight");
        goto done;
    }
    if (wte->ndim != 2 || wpe->ndim != 2 || wpe->shape[1] != wte->shape[1] || wte->shape[0] < 1 || wte->shape[1] < 1 ||
        wpe->shape[0] < 1) {
        char a[64], b[64];
        shape_text(wte->ndim, wte->shape, a, sizeof a);
        shape_text(wpe->ndim, wpe->shape, b, sizeof b);
        st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: wte.weight is %s and wpe.weight %s, expected [vocab, "
                           "hidden] and [positions, hidden]", a, b);
        goto done;
    }
    if (layers < 1) {
        st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s holds no block (h.0.*): missing tensor 'h.0.ln_1.weight'", src);
        goto done;
    }
    if ((st = config_json(s.dir, &heads)) != LDT_OK) goto done;
    if (heads == 0) {
        st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: the number of attention heads is not in the weights: "
                           "give it (--heads, ldt_hf_options.heads) or put GPT-2's config.json (n_head) beside %s", src);
        goto done;
    }
    cfg.layers = layers;
    cfg.hidden = wte->shape[1];
    cfg.vocab = wte->shape[0];
    cfg.positions = wpe->shape[0];
    cfg.heads = heads;
    cfg.seq = 1;
    cfg.batch = 1;
    if (ldt_mesh_format(mesh, text, sizeof text) >= (int)sizeof text) {
        st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: the mesh's text form is too long");
        goto done;
    }
    if ((st = ldt_mesh_parse(text, LDT_DEVICE_CPU, &host)) != LDT_OK) goto done;
    co.mesh = host;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK || (st = ldt_model_create(ctx, "gpt", &cfg, &m)) != LDT_OK ||
        (st = ldt_model_pin(m, "megatron")) != LDT_OK)
        goto done;
    for (int i = 0; i < ldt_model_nparams(m); i++) {
        const char *pn;
        ldt_tensor *p = ldt_model_param(m, i, &pn);
        char hn[160], want[96], have[96];
        int conv, transposed;
        ldt_shape ps;
        int64_t hs[2];
        hf_tensor *t;
        hf_name(pn, hn, sizeof hn, &conv);
        ldt_tensor_shape(p, &ps);
        if (!(t = find(&s, hn))) {
            st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s: missing tensor '%s%s' (a %lld-layer GPT-2)", src,
                               s.prefix ? HF_PREFIX : "", hn, (long long)layers);
            goto done;
        }
        hs[0] = conv ? ps.dims[1] : ps.dims[0];
        hs[1] = conv ? ps.dims[0] : ps.ndim > 1 ? ps.dims[1] : 0;
        if (!same_shape(t, ps.ndim, hs)) {
            shape_text(ps.ndim, hs, want, sizeof want);
            shape_text(t->ndim, t->shape, have, sizeof have);
            st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                               "import-hf: %s: tensor '%s%s' is %s, expected %s (hidden %lld, vocab %lld from wte%s)",
                               t->file, s.prefix ? HF_PREFIX : "", hn, have, want, (long long)cfg.hidden,
                               (long long)cfg.vocab, conv ? "; a Conv1D weight is [in, out]" : "");
            goto done;
        }
        free(buf);
        if (!(buf = malloc((size_t)(t->numel > 0 ? t->numel : 1) * ldt_dtype_size(cfg.dtype)))) {
            st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "import-hf: out of memory for '%s'", hn);
            goto done;
        }
        transposed = conv;
        for (int64_t j = 0; j < t->numel; j++) {
            /* element j of the model's [out, in] is the file's [in, out] element (j % in, j / in) */
            int64_t from = transposed ? (j % ps.dims[1]) * ps.dims[0] + j / ps.dims[1] : j;
            size_t es = ldt_dtype_size(t->dtype);
            if (t->dtype == cfg.dtype) /* the same format: the bits as they are (NaN payloads too) */
                memcpy((unsigned char *)buf + (size_t)j * es, t->data + (size_t)from * es, es);
            else
                store_elem(buf, cfg.dtype, j, load_elem(t->data, t->dtype, from));
        }
        if ((st = ldt_param_set(p, buf, t->numel * (int64_t)ldt_dtype_size(cfg.dtype))) != LDT_OK) goto done;
        t->used = 1;
    }
    if ((head = find(&s, "lm_head.weight"))) {
        if (!same_shape(head, 2, wte->shape)) {
            st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s: lm_head.weight's shape differs from wte.weight's; "
                               "the built-in gpt ties the head to the token embedding", head->file);
            goto done;
        }
        for (int64_t j = 0; j < wte->numel; j++)
            if (load_elem(head->data, head->dtype, j) != load_elem(wte->data, wte->dtype, j)) {
                st = ldt_set_error(LDT_ERR_UNSUPPORTED, "import-hf: %s: lm_head.weight differs from wte.weight (element %lld); "
                                   "the built-in gpt ties the head to the token embedding", head->file, (long long)j);
                goto done;
            }
        head->used = 1;
    }
    for (int i = 0; i < s.n; i++)
        if (!s.t[i].used) { /* h.{i}.* beyond what the model reads cannot happen; kept as a guard */
            st = ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "import-hf: %s: unknown tensor '%s'", s.t[i].file, s.t[i].name);
            goto done;
        }
    info[0] = (int64_t)wte->dtype;
    info[1] = s.prefix;
    info[2] = head != NULL;
    if (!(info_t = ldt_param(ctx, HF_INFO_NAME, &(ldt_shape){1, {3}}, LDT_I64))) {
        st = ldt_ctx_status(ctx);
        goto done;
    }
    if ((st = ldt_param_set(info_t, info, sizeof info)) != LDT_OK ||
        (st = ldt_model_save(m, out_dir, 1, &info_t)) != LDT_OK)
        goto done;
    if (cfg_out) *cfg_out = cfg;
done:
    free(buf);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(host);
    src_free(&s);
    return st;
}

typedef struct {
    char name[176];
    int ndim;
    int64_t shape[2];
    unsigned char *data;
    int64_t nbytes;
} out_tensor;

static int by_name(const void *a, const void *b) {
    return strcmp(((const out_tensor *)a)->name, ((const out_tensor *)b)->name);
}

ldt_status ldt_hf_export(const char *dir, const char *out_path, ldt_dtype dtype) {
    ldt_model_config cfg = ldt_model_config_default("gpt");
    const char *kind = NULL;
    ldt_status st;
    ldt_mesh *one = NULL;
    ldt_ctx_options co = {0};
    ldt_ctx *ctx = NULL;
    ldt_model *m = NULL;
    out_tensor *ot = NULL;
    int np = 0, prefix = 0;
    int64_t info[3] = {LDT_F32, 0, 0}, off = 0, hlen;
    char *hdr = NULL, tmp[PATH_MAX + 8];
    size_t hcap = 0, hn = 0;
    FILE *f = NULL;
    void *full = NULL;
    if (!dir || !out_path)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "export-hf: dir and out_path must not be NULL");
    if (dtype != LDT_DTYPE_COUNT && dtype != LDT_F32 && dtype != LDT_F16 && dtype != LDT_BF16)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "export-hf: dtype %s, expected f32, f16 or bf16",
                             ldt_dtype_name(dtype));
    if (strlen(out_path) > PATH_MAX)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "export-hf: the output path is too long");
    if ((st = ldt_model_config_load(dir, &cfg, &kind)) != LDT_OK) return st;
    if (strcmp(kind, "gpt") != 0)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "export-hf: %s holds a %s model, expected gpt", dir, kind);
    cfg.seq = 1;
    cfg.batch = 1;
    if ((st = ldt_mesh_parse("1", LDT_DEVICE_CPU, &one)) != LDT_OK) return st;
    co.mesh = one;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK || (st = ldt_model_create(ctx, "gpt", &cfg, &m)) != LDT_OK)
        goto done;
    {
        ldt_tensor *it = ldt_param(ctx, HF_INFO_NAME, &(ldt_shape){1, {3}}, LDT_I64);
        if (!it) {
            st = ldt_ctx_status(ctx);
            goto done;
        }
        if (ldt_model_load(m, dir, 1, &it) == LDT_OK) { /* imported: the source's dtype and prefix */
            if ((st = ldt_read(it, info, sizeof info)) != LDT_OK) goto done;
        } else if ((st = ldt_model_load(m, dir, 0, NULL)) != LDT_OK)
            goto done;
    }
    if (info[0] != LDT_F32 && info[0] != LDT_F16 && info[0] != LDT_BF16) info[0] = LDT_F32;
    prefix = info[1] != 0;
    if (dtype == LDT_DTYPE_COUNT) dtype = (ldt_dtype)info[0];
    np = ldt_model_nparams(m);
    if (!(ot = calloc((size_t)np, sizeof *ot))) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "export-hf: out of memory");
        goto done;
    }
    for (int i = 0; i < np; i++) {
        const char *pn;
        ldt_tensor *p = ldt_model_param(m, i, &pn);
        ldt_shape ps;
        int conv;
        int64_t n = 1;
        char hn[150];
        ldt_tensor_shape(p, &ps);
        hf_name(pn, hn, sizeof hn, &conv);
        snprintf(ot[i].name, sizeof ot[i].name, "%s%s", prefix ? HF_PREFIX : "", hn);
        ot[i].ndim = ps.ndim;
        for (int d = 0; d < ps.ndim; d++) n *= ps.dims[d];
        ot[i].shape[0] = conv ? ps.dims[1] : ps.dims[0];
        if (ps.ndim > 1) ot[i].shape[1] = conv ? ps.dims[0] : ps.dims[1];
        ot[i].nbytes = n * (int64_t)ldt_dtype_size(dtype);
        free(full);
        full = malloc((size_t)(n > 0 ? n : 1) * ldt_dtype_size(cfg.dtype));
        if (!full || !(ot[i].data = malloc((size_t)(ot[i].nbytes > 0 ? ot[i].nbytes : 1)))) {
            st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "export-hf: out of memory for '%s'", hn);
            goto done;
        }
        if ((st = ldt_read(p, full, n * (int64_t)ldt_dtype_size(cfg.dtype))) != LDT_OK) goto done;
        for (int64_t j = 0; j < n; j++) {
            /* file element j of [in, out] is the model's [out, in] element (j % out, j / out) */
            int64_t from = conv ? (j % ps.dims[0]) * ps.dims[1] + j / ps.dims[0] : j;
            double v;
            if (cfg.dtype == dtype) { /* the same format: the bits as they are */
                size_t es = ldt_dtype_size(dtype);
                memcpy(ot[i].data + (size_t)j * es, (unsigned char *)full + (size_t)from * es, es);
                continue;
            }
            switch (cfg.dtype) {
            case LDT_F64: v = ((double *)full)[from]; break;
            case LDT_F16: v = ldt_f16_to_f32(((uint16_t *)full)[from]); break;
            case LDT_BF16: v = ldt_bf16_to_f32(((uint16_t *)full)[from]); break;
            default: v = ((float *)full)[from]; break;
            }
            store_elem(ot[i].data, dtype, j, v);
        }
    }
    qsort(ot, (size_t)np, sizeof *ot, by_name);
    /* the header as Python's safetensors writes it: metadata first, then the tensors in data
     * order, compact JSON, spaces to a multiple of 8 bytes */
    hcap = (size_t)np * 512 + 64; /* an entry: a name of at most 176 bytes, numbers of at most 20 digits */
    if (!(hdr = malloc(hcap))) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "export-hf: out of memory");
        goto done;
    }
    hn = (size_t)snprintf(hdr, hcap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < np; i++) {
        hn += (size_t)snprintf(hdr + hn, hcap - hn, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld", ot[i].name,
                               dtype_tag(dtype), (long long)ot[i].shape[0]);
        if (ot[i].ndim > 1) hn += (size_t)snprintf(hdr + hn, hcap - hn, ",%lld", (long long)ot[i].shape[1]);
        hn += (size_t)snprintf(hdr + hn, hcap - hn, "],\"data_offsets\":[%lld,%lld]}", (long long)off,
                               (long long)(off + ot[i].nbytes));
        off += ot[i].nbytes;
    }
    hdr[hn++] = '}';
    while (hn % 8) hdr[hn++] = ' ';
    hlen = (int64_t)hn;
    snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
    if (!(f = fopen(tmp, "wb"))) {
        st = ldt_set_error(LDT_ERR_SYSTEM, "export-hf: cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    {
        unsigned char le[8];
        int ok = 1;
        for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
        ok &= fwrite(le, 1, 8, f) == 8 && fwrite(hdr, 1, hn, f) == hn;
        for (int i = 0; i < np && ok; i++) ok &= fwrite(ot[i].data, 1, (size_t)ot[i].nbytes, f) == (size_t)ot[i].nbytes;
        ok &= fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok &= fclose(f) == 0;
        f = NULL;
        if (!ok || rename(tmp, out_path) != 0) {
            st = ldt_set_error(LDT_ERR_SYSTEM, "export-hf: cannot write %s: %s", out_path, strerror(errno));
            unlink(tmp);
            goto done;
        }
    }
done:
    if (f) {
        fclose(f);
        unlink(tmp);
    }
    for (int i = 0; ot && i < np; i++) free(ot[i].data);
    free(ot);
    free(hdr);
    free(full);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(one);
    return st;
}
