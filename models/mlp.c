/* The mlp model: `layers` residual blocks x + W2 gelu(W1 x + b1) + b2, then an MSE loss. */
/* hidden -> 4 hidden -> hidden with the erf GELU; the loss is the mean over all elements. */
#include "models/model.h"

/* The parameters of one block, in creation order. */
enum { W1, B1, W2, B2, PER_LAYER };

ldt_status ldt__mlp_create(ldt_model *m) {
    int64_t H = m->cfg.hidden, B = m->cfg.batch;
    ldt_shape xs = {2, {B, H}};
    static const char *const names[PER_LAYER] = {"w1", "b1", "w2", "b2"};
    const model_init init[PER_LAYER] = {MODEL_INIT_NORMAL, MODEL_INIT_ZERO, MODEL_INIT_NORMAL,
                                        MODEL_INIT_ZERO};
    const ldt_shape shapes[PER_LAYER] = {{2, {4 * H, H}}, {1, {4 * H}}, {2, {H, 4 * H}}, {1, {H}}};
    m->inputs[0] = ldt_input(m->ctx, "x", &xs, m->cfg.dtype);      /* [B, H] */
    m->inputs[1] = ldt_input(m->ctx, "target", &xs, m->cfg.dtype); /* [B, H] */
    m->input_names[0] = "x";
    m->input_names[1] = "target";
    m->ninputs = 2;
    if (!m->inputs[0] || !m->inputs[1]) return ldt__model_fail(m);
    for (int64_t l = 0; l < m->cfg.layers; l++)
        for (int k = 0; k < PER_LAYER; k++)
            if (!ldt__model_param(m, init[k], &shapes[k], "l.%lld.%s", (long long)l, names[k]))
                return ldt__model_fail(m);
    return LDT_OK;
}

ldt_tensor *ldt__mlp_forward(ldt_model *m) {
    ldt_tensor *x = m->inputs[0], *d;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        ldt_tensor **p = &m->params[PER_LAYER * l];
        x = ldt_add(x, ldt_linear(ldt_gelu(ldt_linear(x, p[W1], p[B1]), 0), p[W2], p[B2]));
    }
    m->output = x; /* [B, H] */
    d = ldt_sub(x, m->inputs[1]);
    return ldt_mean(ldt_mul(d, d), NULL, 0, 0);
}
