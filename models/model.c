/* Model builders: config checks, param and input bookkeeping, GPT-2 style init, dispatch. */
/* Written against the public API only, as a user would. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/model.h"

/* Every size field is at most 2^40, so products with small constants (4H, 12H, ...) cannot
 * overflow; the products of fields are checked one by one. */
#define MODEL_MAX_SIZE ((int64_t)1 << 40)

ldt_model_config ldt_model_config_default(const char *kind) {
    ldt_model_config c;
    (void)kind; /* both kinds share the defaults; mlp ignores heads, vocab and seq */
    memset(&c, 0, sizeof c);
    c.layers = 2;
    c.hidden = 64;
    c.heads = 4;
    c.vocab = 128;
    c.seq = 16;
    c.batch = 4;
    c.dtype = LDT_F32;
    return c;
}

/* Parameter tensors per layer and outside the layers: the list is indexed by int. */
static int64_t tensors_per_layer(model_kind k) { return k == MODEL_MLP ? 4 : 12; }
static int64_t tensors_outside(model_kind k) { return k == MODEL_MLP ? 0 : 4; }

/* The config's status, with a message naming the field and its value in buf. */
static ldt_status check_config(const char *kind, const ldt_model_config *c, model_kind *k,
                               char *buf, size_t cap) {
    const struct {
        const char *name;
        int64_t v;
        int gpt_only;
    } f[] = {{"layers", c->layers, 0}, {"hidden", c->hidden, 0}, {"heads", c->heads, 1},
             {"vocab", c->vocab, 1},   {"seq", c->seq, 1},       {"batch", c->batch, 0}};
    int64_t max_layers;
    if (!kind || (strcmp(kind, "mlp") != 0 && strcmp(kind, "gpt") != 0)) {
        snprintf(buf, cap, "model: unknown kind '%s', expected mlp or gpt", kind ? kind : "(null)");
        return LDT_ERR_INVALID_ARGUMENT;
    }
    *k = strcmp(kind, "mlp") == 0 ? MODEL_MLP : MODEL_GPT;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if ((*k == MODEL_GPT || !f[i].gpt_only) && (f[i].v < 1 || f[i].v > MODEL_MAX_SIZE)) {
            snprintf(buf, cap, "model %s: %s = %lld, expected 1 to 2^40", kind, f[i].name,
                     (long long)f[i].v);
            return f[i].v < 1 ? LDT_ERR_INVALID_ARGUMENT : LDT_ERR_OVERFLOW;
        }
    max_layers = (INT_MAX - tensors_outside(*k)) / tensors_per_layer(*k);
    if (c->layers > max_layers) {
        snprintf(buf, cap,
                 "model %s: layers = %lld, expected at most %lld (parameter tensors "
                 "are counted in an int)",
                 kind, (long long)c->layers, (long long)max_layers);
        return LDT_ERR_OVERFLOW;
    }
    {
        /* the trace's own bookkeeping grows with the layers whatever the mesh (a training
         * step records about 64 KB of nodes, shapes and names a layer): refuse at once what
         * this machine cannot hold, rather than after minutes of allocating */
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        double need = (double)c->layers * 65536.0, have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
        if (have > 0 && need > have) {
            snprintf(buf, cap,
                     "model %s: layers = %lld needs about %.3g GB of trace bookkeeping (64 KB a "
                     "layer), more than this machine's %.3g GB of memory",
                     kind, (long long)c->layers, need / 1e9, have / 1e9);
            return LDT_ERR_OUT_OF_MEMORY;
        }
    }
    if (*k == MODEL_GPT && c->positions != 0 && (c->positions < c->seq || c->positions > MODEL_MAX_SIZE)) {
        snprintf(buf, cap, "model gpt: positions = %lld, expected 0 (seq) or seq = %lld to 2^40",
                 (long long)c->positions, (long long)c->seq);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (*k == MODEL_GPT && c->hidden % c->heads != 0) {
        snprintf(buf, cap, "model gpt: hidden = %lld is not a multiple of heads = %lld",
                 (long long)c->hidden, (long long)c->heads);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (!ldt_dtype_is_float(c->dtype)) {
        snprintf(buf, cap, "model %s: dtype = %s, expected f32, f64, f16 or bf16", kind,
                 ldt_dtype_name(c->dtype));
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (!(c->dropout >= 0 && c->dropout <= 1)) {
        snprintf(buf, cap, "model %s: dropout = %g, expected 0 to 1", kind, c->dropout);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    return LDT_OK;
}

/* The largest activations (elements and bytes) must have 64-bit sizes, so a config that
 * creates fine never overflows in its forward pass. */
static ldt_status check_activations(const char *kind, model_kind k, const ldt_model_config *c) {
    int64_t B = c->batch, S = c->seq, H = c->hidden;
    const struct {
        const char *what;
        int64_t f[4];
    } gpt[] = {{"the logits [batch, seq, vocab]", {B, S, c->vocab, 1}},
               {"the attention weights [batch, heads, seq, seq]", {B, c->heads, S, S}},
               {"the MLP activations [batch, seq, 4*hidden]", {B, S, 4 * H, 1}}},
      mlp[] = {{"the MLP activations [batch, 4*hidden]", {B, 4 * H, 1, 1}}};
    int nf = k == MODEL_GPT ? 3 : 1;
    for (int i = 0; i < nf; i++) {
        const int64_t *f = k == MODEL_GPT ? gpt[i].f : mlp[i].f;
        int64_t n = (int64_t)ldt_dtype_size(c->dtype);
        int bad = 0;
        for (int j = 0; j < 4; j++) bad |= __builtin_mul_overflow(n, f[j], &n);
        if (bad)
            return ldt_set_error(LDT_ERR_OVERFLOW,
                                 "model %s: %s overflow 64-bit byte sizes "
                                 "(batch = %lld, seq = %lld, hidden = %lld, vocab = %lld, heads = "
                                 "%lld)",
                                 kind, k == MODEL_GPT ? gpt[i].what : mlp[i].what, (long long)B,
                                 (long long)S, (long long)H, (long long)c->vocab,
                                 (long long)c->heads);
    }
    return LDT_OK;
}

ldt_status ldt_model_param_count_of(const char *kind, const ldt_model_config *cfg, int64_t *out) {
    char msg[256];
    model_kind k;
    ldt_status st;
    int64_t H, n;
    if (!cfg || !out)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model: cfg and out must not be NULL");
    if ((st = check_config(kind, cfg, &k, msg, sizeof msg)) != LDT_OK)
        return ldt_set_error(st, "%s", msg);
    H = cfg->hidden;
    if (k == MODEL_MLP) {
        /* per layer: W1 [4H, H] + b1 [4H] + W2 [H, 4H] + b2 [H] */
        if (__builtin_mul_overflow(8 * H, H, &n) || __builtin_add_overflow(n, 5 * H, &n) ||
            __builtin_mul_overflow(n, cfg->layers, &n))
            return ldt_set_error(LDT_ERR_OVERFLOW,
                                 "model mlp: layers = %lld, hidden = %lld: the "
                                 "parameter count overflows 64 bits",
                                 (long long)cfg->layers, (long long)H);
    } else {
        /* wte [V, H] + wpe [P, H] + L * (12H^2 + 13H) + ln_f 2H */
        int64_t per, emb, P = cfg->positions ? cfg->positions : cfg->seq;
        if (__builtin_mul_overflow(12 * H, H, &per) || __builtin_add_overflow(per, 13 * H, &per) ||
            __builtin_mul_overflow(per, cfg->layers, &per) ||
            __builtin_mul_overflow(cfg->vocab + P, H, &emb) ||
            __builtin_add_overflow(per, emb, &n) || __builtin_add_overflow(n, 2 * H, &n))
            return ldt_set_error(LDT_ERR_OVERFLOW,
                                 "model gpt: layers = %lld, hidden = %lld, vocab "
                                 "= %lld, seq = %lld: the parameter count overflows 64 bits",
                                 (long long)cfg->layers, (long long)H, (long long)cfg->vocab,
                                 (long long)cfg->seq);
    }
    *out = n;
    return LDT_OK;
}

ldt_tensor *ldt__model_param(ldt_model *m, model_init init, const ldt_shape *shape,
                             const char *fmt, ...) {
    char name[128];
    va_list ap;
    ldt_tensor *t;
    size_t len;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (m->nparams == m->cap) {
        int cap = m->cap ? m->cap * 2 : 32; /* nparams <= INT_MAX by check_config */
        ldt_tensor **p;
        char **nm;
        model_init *in;
        if (m->cap > INT_MAX / 2) cap = INT_MAX;
        if (!(p = realloc(m->params, (size_t)cap * sizeof *p))) return NULL;
        m->params = p;
        if (!(nm = realloc(m->names, (size_t)cap * sizeof *nm))) return NULL;
        m->names = nm;
        if (!(in = realloc(m->init, (size_t)cap * sizeof *in))) return NULL;
        m->init = in;
        m->cap = cap;
    }
    if (!(t = ldt_param(m->ctx, name, shape, m->cfg.dtype))) return NULL;
    len = strlen(name) + 1;
    if (!(m->names[m->nparams] = malloc(len))) return NULL;
    memcpy(m->names[m->nparams], name, len);
    m->init[m->nparams] = init;
    m->params[m->nparams++] = t;
    return t;
}

ldt_status ldt__model_fail(const ldt_model *m) {
    ldt_status st = ldt_ctx_status(m->ctx);
    return st != LDT_OK ? st : ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model: out of memory");
}

ldt_status ldt_model_create(ldt_ctx *ctx, const char *kind, const ldt_model_config *cfg,
                            ldt_model **out) {
    char msg[256];
    model_kind k;
    ldt_status st;
    ldt_model *m;
    int64_t count, bytes;
    if (!ctx || !cfg || !out)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model: ctx, cfg and out must not be NULL");
    *out = NULL;
    if ((st = check_config(kind, cfg, &k, msg, sizeof msg)) != LDT_OK)
        return ldt_set_error(st, "%s", msg);
    if ((st = ldt_model_param_count_of(kind, cfg, &count)) != LDT_OK) return st;
    if (__builtin_mul_overflow(count, (int64_t)ldt_dtype_size(cfg->dtype), &bytes))
        return ldt_set_error(LDT_ERR_OVERFLOW,
                             "model %s: %lld parameters of %s overflow 64-bit "
                             "byte sizes",
                             kind, (long long)count, ldt_dtype_name(cfg->dtype));
    if ((st = check_activations(kind, k, cfg)) != LDT_OK) return st;
    if (!(m = calloc(1, sizeof *m)))
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->ctx = ctx;
    m->kind = k;
    m->cfg = *cfg;
    m->cfg.train = cfg->train != 0;
    st = k == MODEL_MLP ? ldt__mlp_create(m) : ldt__gpt_create(m);
    if (st != LDT_OK) {
        ldt_model_destroy(m);
        return st;
    }
    *out = m;
    return LDT_OK;
}

/* The tensors stay on the context, which owns them. */
void ldt_model_destroy(ldt_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nparams; i++) free(m->names[i]);
    free(m->names);
    free(m->params);
    free(m->init);
    free(m->recompute);
    free(m);
}

int ldt_model_nparams(const ldt_model *m) { return m ? m->nparams : 0; }

ldt_tensor *ldt_model_param(const ldt_model *m, int i, const char **name) {
    if (!m || i < 0 || i >= m->nparams) return NULL;
    if (name) *name = m->names[i];
    return m->params[i];
}

int ldt_model_ninputs(const ldt_model *m) { return m ? m->ninputs : 0; }

ldt_tensor *ldt_model_input(const ldt_model *m, int i, const char **name) {
    if (!m || i < 0 || i >= m->ninputs) return NULL;
    if (name) *name = m->input_names[i];
    return m->inputs[i];
}

/* Elements of a persistent tensor (its shape was checked when it was made). */
static int64_t numel_of(const ldt_tensor *t) {
    ldt_shape s;
    int64_t n = 0;
    if (ldt_tensor_shape(t, &s) != LDT_OK || ldt_shape_numel(&s, &n) != LDT_OK) return 0;
    return n;
}

int64_t ldt_model_param_count(const ldt_model *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->nparams; i++) n += numel_of(m->params[i]);
    return n;
}

/* n copies of 1 in dt. */
static void fill_ones(void *buf, int64_t n, ldt_dtype dt) {
    for (int64_t j = 0; j < n; j++) switch (dt) {
        case LDT_F64: ((double *)buf)[j] = 1; break;
        case LDT_F16: ((uint16_t *)buf)[j] = ldt_f32_to_f16(1); break;
        case LDT_BF16: ((uint16_t *)buf)[j] = ldt_f32_to_bf16(1); break;
        default: ((float *)buf)[j] = 1; break;
        }
}

/* One trace: the pending trace is run first (ldt_sync), the stream is set to (seed, 0), and
 * every weight, in parameter order, is drawn by its own ldt_normal(0, 0.02) - so weight i
 * holds exactly what ldt_normal of its shape gives at the offset left by weights 0..i-1. The
 * draws are flattened and concatenated (a tree of cats: the eager runner takes at most 64
 * inputs a node) into one tensor that one ldt_read brings back; each slice then goes into its
 * parameter with ldt_param_set (ldt_keep would avoid the host copy but would hold a second
 * copy of every weight on the context for good). Biases are set to 0 and layer-norm weights
 * to 1. Nothing is restored: the stream is left at (seed, offset after the last weight), so
 * later random ops continue from there. */
ldt_status ldt_model_init(ldt_model *m, uint64_t seed) {
    ldt_status st;
    ldt_dtype dt;
    int64_t es, total = 0, maxn = 0, off = 0;
    ldt_tensor **parts = NULL, *all = NULL;
    unsigned char *buf = NULL, *fill = NULL;
    int nw = 0;
    if (!m) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model init: model must not be NULL");
    dt = m->cfg.dtype;
    es = (int64_t)ldt_dtype_size(dt);
    if (ldt_ctx_is_meta(m->ctx)) { /* deferred: recipes, drawing in the same order as below */
        if ((st = ldt_ctx_set_seed(m->ctx, seed, 0)) != LDT_OK) return st;
        for (int i = 0; i < m->nparams; i++) {
            ldt_init in = {0};
            in.kind = m->init[i] == MODEL_INIT_NORMAL ? LDT_INIT_NORMAL
                      : m->init[i] == MODEL_INIT_ONE  ? LDT_INIT_ONES
                                                      : LDT_INIT_ZEROS;
            in.b = 0.02;
            if ((st = ldt_param_init(m->params[i], &in)) != LDT_OK) return st;
        }
        return LDT_OK;
    }
    if ((st = ldt_sync(m->ctx)) != LDT_OK) return st;
    if ((st = ldt_ctx_set_seed(m->ctx, seed, 0)) != LDT_OK) return st;
    for (int i = 0; i < m->nparams; i++) {
        int64_t n = numel_of(m->params[i]);
        if (m->init[i] == MODEL_INIT_NORMAL) {
            nw++;
            total += n; /* <= the checked parameter count */
        } else if (n > maxn)
            maxn = n;
    }
    if (nw > 0) {
        if (!(parts = malloc((size_t)nw * sizeof *parts)) ||
            !(buf = malloc((size_t)(total * es)))) {
            st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY,
                               "model init: out of memory for %lld "
                               "weights",
                               (long long)total);
            goto done;
        }
        nw = 0;
        for (int i = 0; i < m->nparams; i++) {
            ldt_shape s, flat;
            if (m->init[i] != MODEL_INIT_NORMAL) continue;
            ldt_tensor_shape(m->params[i], &s);
            flat.ndim = 1;
            flat.dims[0] = numel_of(m->params[i]);
            parts[nw++] = ldt_reshape(ldt_normal(m->ctx, &s, dt, 0.0, 0.02), &flat);
        }
        for (int n = nw; n > 1;) {
            int g = 0;
            for (int i = 0; i < n; i += 32)
                parts[g++] = n - i == 1 ? parts[i] : ldt_cat(parts + i, n - i < 32 ? n - i : 32, 0);
            n = g;
        }
        all = parts[0];
        if (!all) {
            st = ldt__model_fail(m);
            ldt_trace_discard(m->ctx);
            goto done;
        }
        if ((st = ldt_read(all, buf, total * es)) != LDT_OK) goto done;
    }
    if (!(fill = malloc((size_t)(maxn * es > 0 ? maxn * es : 1)))) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model init: out of memory");
        goto done;
    }
    for (int i = 0; i < m->nparams && st == LDT_OK; i++) {
        int64_t nb = numel_of(m->params[i]) * es;
        if (m->init[i] == MODEL_INIT_NORMAL) {
            st = ldt_param_set(m->params[i], buf + off, nb);
            off += nb;
            continue;
        }
        if (m->init[i] == MODEL_INIT_ONE)
            fill_ones(fill, nb / es, dt);
        else
            memset(fill, 0, (size_t)nb);
        st = ldt_param_set(m->params[i], fill, nb);
    }
done:
    free(parts);
    free(buf);
    free(fill);
    return st;
}

ldt_tensor *ldt_model_forward(ldt_model *m) {
    if (!m) {
        ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model forward: model must not be NULL");
        return NULL;
    }
    m->output = NULL;
    return m->kind == MODEL_MLP ? ldt__mlp_forward(m) : ldt__gpt_forward(m);
}

ldt_tensor *ldt_model_output(const ldt_model *m) { return m ? m->output : NULL; }

void ldt_model_set_train(ldt_model *m, int train) {
    if (m) m->cfg.train = train != 0;
}

static const char *const k_rc_names[3] = {"none", "selective", "full"};

ldt_status ldt_model_set_recompute(ldt_model *m, int64_t layer, const char *mode) {
    int rc = -1;
    if (!m) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model set_recompute: m is NULL (expected a model)");
    for (int i = 0; i < 3 && mode; i++)
        if (strcmp(mode, k_rc_names[i]) == 0) rc = i;
    if (rc < 0)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                             "model set_recompute: mode %s%s%s, expected none, selective or full",
                             mode ? "\"" : "", mode ? mode : "NULL", mode ? "\"" : "");
    if (m->kind != MODEL_GPT)
        return ldt_set_error(LDT_ERR_UNSUPPORTED,
                             "model set_recompute: the mlp model has no recomputation (expected a gpt)");
    if (layer < -1 || layer >= m->cfg.layers)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                             "model set_recompute: layer %lld, expected -1 (every layer) or 0 to %lld",
                             (long long)layer, (long long)m->cfg.layers - 1);
    if (!m->recompute) {
        if (!(m->recompute = malloc((size_t)m->cfg.layers)))
            return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model set_recompute: out of memory");
        memset(m->recompute, MODEL_RC_SELECTIVE, (size_t)m->cfg.layers);
    }
    if (layer < 0) memset(m->recompute, rc, (size_t)m->cfg.layers);
    else m->recompute[layer] = (unsigned char)rc;
    return LDT_OK;
}

const char *ldt_model_recompute(const ldt_model *m, int64_t layer) {
    if (!m || m->kind != MODEL_GPT || layer < 0 || layer >= m->cfg.layers) return NULL;
    return k_rc_names[m->recompute ? m->recompute[layer] : MODEL_RC_SELECTIVE];
}
