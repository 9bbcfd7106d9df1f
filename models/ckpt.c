/* Model checkpoints: a model's parameters (and a trainer's extra persistent tensors) saved
 * into and loaded from the sharded checkpoint format (exec/checkpoint.c), with the model's
 * configuration as the i64 tensor "lazydt.model". Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/exec.h"
#include "models/model.h"

#define CONFIG_NAME "lazydt.model"
#define CONFIG_LEN 7 /* kind, layers, hidden, heads, vocab, positions, dtype */

static const char *const k_config_fields[CONFIG_LEN] = {"kind",  "layers",    "hidden", "heads",
                                                        "vocab", "positions", "dtype"};

static void config_of(const ldt_model *m, int64_t *c) {
    c[0] = m->kind == MODEL_GPT ? 1 : 0;
    c[1] = m->cfg.layers;
    c[2] = m->cfg.hidden;
    c[3] = m->kind == MODEL_GPT ? m->cfg.heads : 0;
    c[4] = m->kind == MODEL_GPT ? m->cfg.vocab : 0;
    c[5] = m->kind == MODEL_GPT ? (m->cfg.positions ? m->cfg.positions : m->cfg.seq) : 0;
    c[6] = (int64_t)m->cfg.dtype;
}

/* A CPU mesh of the same shape and names as ctx's (shards hold host buffers). */
static ldt_status host_mesh(const ldt_ctx *ctx, ldt_mesh **out) {
    char text[512];
    const ldt_mesh *mesh = ldt_ctx_mesh(ctx);
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        return ldt_set_error(LDT_ERR_INVALID_USAGE,
                             "model checkpoint: the context's mesh is on the meta device, where "
                             "tensors hold no data; materialize the parameters first");
    if (ldt_mesh_format(mesh, text, sizeof text) >= (int)sizeof text)
        return ldt_set_error(LDT_ERR_UNSUPPORTED, "model checkpoint: the mesh's text form is too long");
    return ldt_mesh_parse(text, LDT_DEVICE_CPU, out);
}

/* t's value as shards on mesh under its pin (Replicate where it has none). */
static ldt_status shards_of(ldt_tensor *t, const ldt_mesh *mesh, ldt_shards **out) {
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec spec;
    ldt_shape s;
    ldt_status st;
    int nd = ldt_mesh_ndim(mesh), pinned = 0;
    int64_t n = 0, nb;
    void *buf;
    if ((st = ldt_tensor_shape(t, &s)) != LDT_OK || (st = ldt_shape_numel(&s, &n)) != LDT_OK) return st;
    if (ldt_tensor_pin(t, pl, LDT_MAX_DIMS, &pinned) != LDT_OK || !pinned) {
        ldt_clear_error();
        for (int d = 0; d < nd; d++) pl[d] = ldt_replicate();
    }
    if ((st = ldt_spec_init(&spec, mesh, &s, pl, nd, ldt_tensor_dtype(t))) != LDT_OK) return st;
    nb = n * (int64_t)ldt_dtype_size(ldt_tensor_dtype(t));
    if (!(buf = malloc(nb > 0 ? (size_t)nb : 1)))
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model checkpoint: out of memory for '%s'",
                             ldt_tensor_name(t) ? ldt_tensor_name(t) : "");
    st = ldt_read(t, buf, nb);
    if (st == LDT_OK) st = ldt_distribute(buf, &spec, out);
    free(buf);
    return st;
}

ldt_status ldt_model_save(ldt_model *m, const char *dir, int n, ldt_tensor *const *extra) {
    ldt_mesh *mesh = NULL, *one = NULL;
    ldt_shards **sh = NULL;
    const char **names = NULL;
    int64_t cfg[CONFIG_LEN];
    ldt_status st;
    int total, k = 0;
    if (!m || !dir || n < 0 || (n > 0 && !extra))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                             "model save: model and dir must not be NULL, n >= 0 with its tensors");
    for (int i = 0; i < n; i++)
        if (!extra[i] || !ldt_tensor_name(extra[i]) || ldt_tensor_ctx(extra[i]) != m->ctx)
            return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                                 "model save: extra tensor %d is NULL, unnamed or of another "
                                 "context; expected a named persistent tensor of the model's",
                                 i);
    if ((st = host_mesh(m->ctx, &mesh)) != LDT_OK) return st;
    total = m->nparams + n + 1;
    sh = calloc((size_t)total, sizeof *sh);
    names = calloc((size_t)total, sizeof *names);
    if (!sh || !names) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model save: out of memory");
        goto done;
    }
    for (int i = 0; i < m->nparams && st == LDT_OK; i++, k++) {
        names[k] = m->names[i];
        st = shards_of(m->params[i], mesh, &sh[k]);
    }
    for (int i = 0; i < n && st == LDT_OK; i++, k++) {
        names[k] = ldt_tensor_name(extra[i]);
        st = shards_of(extra[i], mesh, &sh[k]);
    }
    if (st != LDT_OK) goto done;
    config_of(m, cfg);
    {
        ldt_spec spec;
        ldt_placement r = ldt_replicate();
        if ((st = ldt_mesh_parse("1", LDT_DEVICE_CPU, &one)) != LDT_OK ||
            (st = ldt_spec_init(&spec, one, &(ldt_shape){1, {CONFIG_LEN}}, &r, 1, LDT_I64)) != LDT_OK ||
            (st = ldt_distribute(cfg, &spec, &sh[k])) != LDT_OK)
            goto done;
        names[k++] = CONFIG_NAME;
    }
    st = ldt_ckpt_save(dir, k, names, sh);
done:
    for (int i = 0; sh && i < total; i++) ldt_shards_destroy(sh[i]);
    free(sh);
    free(names);
    ldt_mesh_destroy(one);
    ldt_mesh_destroy(mesh);
    return st;
}

/* dir's recorded configuration. */
static ldt_status read_config(const char *dir, int64_t *cfg) {
    ldt_mesh *one = NULL;
    ldt_shards *s = NULL;
    ldt_spec spec;
    ldt_placement r = ldt_replicate();
    ldt_status st;
    if ((st = ldt_mesh_parse("1", LDT_DEVICE_CPU, &one)) != LDT_OK) return st;
    if ((st = ldt_spec_init(&spec, one, &(ldt_shape){1, {CONFIG_LEN}}, &r, 1, LDT_I64)) == LDT_OK &&
        (st = ldt_ckpt_load(dir, CONFIG_NAME, &spec, &s)) == LDT_OK)
        st = ldt_to_local(s, 0, cfg, CONFIG_LEN * 8);
    else if (st == LDT_ERR_INVALID_ARGUMENT) {
        char why[512];
        snprintf(why, sizeof why, "%s", ldt_last_error());
        st = ldt_set_error(st, "model checkpoint %s: %s (a model checkpoint records its configuration "
                           "as '" CONFIG_NAME "' i64 [%d]; ldt_model_save and ldt_hf_import write one)",
                           dir, why, CONFIG_LEN);
    }
    ldt_shards_destroy(s);
    ldt_mesh_destroy(one);
    return st;
}

ldt_status ldt_model_config_load(const char *dir, ldt_model_config *cfg, const char **kind_out) {
    int64_t c[CONFIG_LEN];
    ldt_status st;
    if (!dir || !cfg)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "model config load: dir and cfg must not be NULL");
    if ((st = read_config(dir, c)) != LDT_OK) return st;
    if ((c[0] != 0 && c[0] != 1) || c[1] < 1 || c[2] < 1 || (c[0] == 1 && (c[3] < 1 || c[4] < 1 || c[5] < 1)) ||
        c[6] < 0 || c[6] >= LDT_DTYPE_COUNT || !ldt_dtype_is_float((ldt_dtype)c[6]))
        return ldt_set_error(LDT_ERR_CORRUPT,
                             "model checkpoint %s: '" CONFIG_NAME "' holds [%lld,%lld,%lld,%lld,%lld,%lld,%lld], "
                             "expected kind 0 or 1, positive sizes and a float dtype",
                             dir, (long long)c[0], (long long)c[1], (long long)c[2], (long long)c[3],
                             (long long)c[4], (long long)c[5], (long long)c[6]);
    if (kind_out) *kind_out = c[0] == 1 ? "gpt" : "mlp";
    cfg->layers = c[1];
    cfg->hidden = c[2];
    if (c[0] == 1) {
        cfg->heads = c[3];
        cfg->vocab = c[4];
        cfg->positions = c[5];
    }
    cfg->dtype = (ldt_dtype)c[6];
    return LDT_OK;
}

ldt_status ldt_model_load(ldt_model *m, const char *dir, int n, ldt_tensor *const *extra) {
    ldt_mesh *one = NULL;
    ldt_spec *specs = NULL;
    const ldt_spec **targets = NULL;
    ldt_shards **out = NULL;
    ldt_tensor **ts = NULL;
    const char **names = NULL;
    int64_t want[CONFIG_LEN], got[CONFIG_LEN];
    ldt_status st;
    int total;
    if (!m || !dir || n < 0 || (n > 0 && !extra))
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                             "model load: model and dir must not be NULL, n >= 0 with its tensors");
    for (int i = 0; i < n; i++)
        if (!extra[i] || !ldt_tensor_name(extra[i]) || ldt_tensor_ctx(extra[i]) != m->ctx)
            return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                                 "model load: extra tensor %d is NULL, unnamed or of another "
                                 "context; expected a named persistent tensor of the model's",
                                 i);
    if ((st = read_config(dir, got)) != LDT_OK) return st;
    config_of(m, want);
    for (int i = 0; i < CONFIG_LEN; i++)
        if (want[i] != got[i]) {
            if (i == 0)
                return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                                     "model load: %s holds a %s model, this model is a %s", dir,
                                     got[0] == 1 ? "gpt" : "mlp", want[0] == 1 ? "gpt" : "mlp");
            if (i == 6)
                return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                                     "model load: %s was saved with dtype = %s, this model has dtype = %s",
                                     dir, got[6] >= 0 && got[6] < LDT_DTYPE_COUNT ? ldt_dtype_name((ldt_dtype)got[6]) : "?",
                                     ldt_dtype_name((ldt_dtype)want[6]));
            return ldt_set_error(LDT_ERR_INVALID_ARGUMENT,
                                 "model load: %s was saved with %s = %lld, this model has %s = %lld",
                                 dir, k_config_fields[i], (long long)got[i], k_config_fields[i],
                                 (long long)want[i]);
        }
    total = m->nparams + n;
    specs = calloc((size_t)total, sizeof *specs);
    targets = calloc((size_t)total, sizeof *targets);
    out = calloc((size_t)total, sizeof *out);
    ts = calloc((size_t)total, sizeof *ts);
    names = calloc((size_t)total, sizeof *names);
    if (!specs || !targets || !out || !ts || !names) {
        st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "model load: out of memory");
        goto done;
    }
    if ((st = ldt_mesh_parse("1", LDT_DEVICE_CPU, &one)) != LDT_OK) goto done;
    for (int i = 0; i < total && st == LDT_OK; i++) {
        ldt_shape s;
        ldt_placement r = ldt_replicate();
        ts[i] = i < m->nparams ? m->params[i] : extra[i - m->nparams];
        names[i] = i < m->nparams ? m->names[i] : ldt_tensor_name(ts[i]);
        if ((st = ldt_tensor_shape(ts[i], &s)) == LDT_OK)
            st = ldt_spec_init(&specs[i], one, &s, &r, 1, ldt_tensor_dtype(ts[i]));
        targets[i] = &specs[i];
    }
    if (st != LDT_OK || (st = ldt_ckpt_load_n(dir, total, names, targets, out)) != LDT_OK) goto done;
    for (int i = 0; i < total && st == LDT_OK; i++) {
        int64_t nb = 0;
        void *p = ldt_shards_local(out[i], 0, &nb);
        st = ldt_param_set(ts[i], p, nb);
    }
done:
    for (int i = 0; out && i < total; i++) ldt_shards_destroy(out[i]);
    free(out);
    free(specs);
    free(targets);
    free(ts);
    free(names);
    ldt_mesh_destroy(one);
    return st;
}
