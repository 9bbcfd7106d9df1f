/* Model builders: configs and their checks, parameter and input bookkeeping, GPT-2 style
 * initialisation, and dispatch to the mlp and gpt builders. Public API only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

ldt_model_config ldt_model_config_default(const char *kind) {
    ldt_model_config c;
    (void)kind;
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

/* A config error: the status, and a message in buf naming the field. */
static ldt_status check_config(const char *kind, const ldt_model_config *c, model_kind *k,
                               char *buf, size_t cap) {
    const struct {
        const char *name;
        int64_t v;
        int gpt_only;
    } f[] = {{"layers", c->layers, 0}, {"hidden", c->hidden, 0}, {"batch", c->batch, 0},
             {"heads", c->heads, 1},   {"vocab", c->vocab, 1},   {"seq", c->seq, 1}};
    if (!kind || (strcmp(kind, "mlp") != 0 && strcmp(kind, "gpt") != 0)) {
        snprintf(buf, cap, "model: unknown kind '%s', expected mlp or gpt", kind ? kind : "(null)");
        return LDT_ERR_INVALID_ARGUMENT;
    }
    *k = strcmp(kind, "mlp") == 0 ? MODEL_MLP : MODEL_GPT;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if ((*k == MODEL_GPT || !f[i].gpt_only) && (f[i].v < 1 || f[i].v > ((int64_t)1 << 40))) {
            snprintf(buf, cap, "model %s: %s = %lld, expected 1 to 2^40", kind, f[i].name,
                     (long long)f[i].v);
            return LDT_ERR_INVALID_ARGUMENT;
        }
    if (*k == MODEL_GPT && c->hidden % c->heads != 0) {
        snprintf(buf, cap, "model gpt: hidden = %lld is not a multiple of heads = %lld",
                 (long long)c->hidden, (long long)c->heads);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (!ldt_dtype_is_float(c->dtype)) {
        snprintf(buf, cap, "model %s: dtype %s, expected f32 f64 f16 or bf16", kind,
                 ldt_dtype_name(c->dtype));
        return LDT_ERR_INVALID_ARGUMENT;
    }
    if (!(c->dropout >= 0 && c->dropout <= 1)) {
        snprintf(buf, cap, "model %s: dropout = %g, expected 0 to 1", kind, c->dropout);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    return LDT_OK;
}

ldt_status ldt_model_param_count_of(const char *kind, const ldt_model_config *cfg, int64_t *out) {
    char msg[256];
    model_kind k;
    ldt_status st;
    int64_t H, n;
    if (!cfg || !out) return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model: cfg and out must not be NULL");
    if ((st = check_config(kind, cfg, &k, msg, sizeof msg)) != LDT_OK) return ldt_set_error(st, "%s", msg);
    H = cfg->hidden;
    if (k == MODEL_MLP) {
        /* per layer W1 4H*H + b1 4H + W2 H*4H + b2 H */
        if (__builtin_mul_overflow(8 * H, H, &n) || __builtin_add_overflow(n, 5 * H, &n) ||
            __builtin_mul_overflow(n, cfg->layers, &n))
            return ldt_set_error(LDT_ERR_OVERFLOW, "model mlp: the parameter count overflows 64 bits");
    } else {
        int64_t per, emb;
        if (__builtin_mul_overflow(12 * H, H, &per) || __builtin_add_overflow(per, 13 * H, &per) ||
            __builtin_mul_overflow(per, cfg->layers, &per) ||
            __builtin_mul_overflow(cfg->vocab + cfg->seq, H, &emb) ||
            __builtin_add_overflow(per, emb, &n) || __builtin_add_overflow(n, 2 * H, &n))
            return ldt_set_error(LDT_ERR_OVERFLOW, "model gpt: the parameter count overflows 64 bits");
    }
    *out = n;
    return LDT_OK;
}

ldt_tensor *model_param(ldt_model *m, const ldt_shape *shape, const char *fmt, ...) {
    char name[128];
    va_list ap;
    ldt_tensor *t;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (m->nparams == m->cap) {
        int cap = m->cap ? m->cap * 2 : 32;
        ldt_tensor **p = realloc(m->params, (size_t)cap * sizeof *p);
        char **nm = p ? realloc(m->names, (size_t)cap * sizeof *nm) : NULL;
        if (p) m->params = p;
        if (!p || !nm) return NULL;
        m->names = nm;
        m->cap = cap;
    }
    t = ldt_param(m->ctx, name, shape, m->cfg.dtype);
    if (!t) return NULL;
    m->names[m->nparams] = malloc(strlen(name) + 1);
    if (!m->names[m->nparams]) return NULL;
    memcpy(m->names[m->nparams], name, strlen(name) + 1);
    m->params[m->nparams++] = t;
    return t;
}

ldt_status ldt_model_create(ldt_ctx *ctx, const char *kind, const ldt_model_config *cfg,
                            ldt_model **out) {
    char msg[256];
    model_kind k;
    ldt_status st;
    ldt_model *m;
    int64_t count;
    if (!ctx || !cfg || !out)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model: ctx, cfg and out must not be NULL");
    *out = NULL;
    if ((st = check_config(kind, cfg, &k, msg, sizeof msg)) != LDT_OK) return ldt_set_error(st, "%s", msg);
    if ((st = ldt_model_param_count_of(kind, cfg, &count)) != LDT_OK) return st;
    m = calloc(1, sizeof *m);
    if (!m) return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->ctx = ctx;
    m->kind = k;
    m->cfg = *cfg;
    st = k == MODEL_MLP ? mlp_create(m) : gpt_create(m);
    if (st != LDT_OK) {
        ldt_model_destroy(m);
        return st;
    }
    *out = m;
    return LDT_OK;
}

void ldt_model_destroy(ldt_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nparams; i++) free(m->names[i]);
    free(m->names);
    free(m->params);
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

int64_t ldt_model_param_count(const ldt_model *m) {
    int64_t n = 0;
    for (int i = 0; m && i < m->nparams; i++) {
        ldt_shape s;
        int64_t k;
        ldt_tensor_shape(m->params[i], &s);
        ldt_shape_numel(&s, &k);
        n += k;
    }
    return n;
}

/* The kind of initial value a parameter takes, from its name. */
static int is_bias(const char *name) {
    size_t n = strlen(name);
    return (n >= 2 && strcmp(name + n - 2, ".b") == 0) || (n >= 3 && name[n - 3] == '.' && name[n - 2] == 'b');
}
static int is_norm_weight(const char *name) { return strstr(name, "ln_") && name[strlen(name) - 1] == 'w'; }

ldt_status ldt_model_init(ldt_model *m, uint64_t seed) {
    ldt_status st;
    void *buf = NULL;
    if (!m) return LDT_ERR_INVALID_ARGUMENT;
    if ((st = ldt_sync(m->ctx)) != LDT_OK) return st;
    if ((st = ldt_ctx_set_seed(m->ctx, seed, 0)) != LDT_OK) return st;
    for (int i = 0; i < m->nparams; i++) {
        ldt_shape s;
        int64_t n, nb;
        ldt_dtype dt = m->cfg.dtype;
        ldt_tensor_shape(m->params[i], &s);
        ldt_shape_numel(&s, &n);
        nb = n * (int64_t)ldt_dtype_size(dt);
        free(buf);
        buf = calloc(1, (size_t)(nb ? nb : 1));
        if (!buf) return LDT_ERR_OUT_OF_MEMORY;
        if (is_norm_weight(m->names[i])) {
            for (int64_t j = 0; j < n; j++) switch (dt) {
                case LDT_F64: ((double *)buf)[j] = 1; break;
                case LDT_F16: ((uint16_t *)buf)[j] = ldt_f32_to_f16(1); break;
                case LDT_BF16: ((uint16_t *)buf)[j] = ldt_f32_to_bf16(1); break;
                default: ((float *)buf)[j] = 1; break;
                }
        } else if (!is_bias(m->names[i])) {
            ldt_tensor *w = ldt_normal(m->ctx, &s, dt, 0.0, 0.02);
            if ((st = ldt_read(w, buf, nb)) != LDT_OK) break;
        }
        if ((st = ldt_param_set(m->params[i], buf, nb)) != LDT_OK) break;
    }
    free(buf);
    return st;
}

ldt_tensor *ldt_model_forward(ldt_model *m) {
    if (!m) return NULL;
    return m->kind == MODEL_MLP ? mlp_forward(m) : gpt_forward(m);
}

ldt_tensor *ldt_model_output(const ldt_model *m) { return m ? m->output : NULL; }

void ldt_model_set_train(ldt_model *m, int train) {
    if (m) m->cfg.train = train != 0;
}
