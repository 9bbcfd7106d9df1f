/* The mlp model: `layers` residual blocks x + W2 gelu(W1 x + b1) + b2 (hidden -> 4 hidden ->
 * hidden), then the mean-squared error against a target. */
#include "models/model.h"

ldt_status mlp_create(ldt_model *m) {
    int64_t H = m->cfg.hidden, B = m->cfg.batch;
    ldt_shape xs = {2, {B, H}};
    m->inputs[0] = ldt_input(m->ctx, "x", &xs, m->cfg.dtype);
    m->inputs[1] = ldt_input(m->ctx, "target", &xs, m->cfg.dtype);
    m->input_names[0] = "x";
    m->input_names[1] = "target";
    m->ninputs = 2;
    if (!m->inputs[0] || !m->inputs[1]) return ldt_ctx_status(m->ctx);
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        if (!model_param(m, &(ldt_shape){2, {4 * H, H}}, "l.%lld.w1", (long long)l) ||
            !model_param(m, &(ldt_shape){1, {4 * H}}, "l.%lld.b1", (long long)l) ||
            !model_param(m, &(ldt_shape){2, {H, 4 * H}}, "l.%lld.w2", (long long)l) ||
            !model_param(m, &(ldt_shape){1, {H}}, "l.%lld.b2", (long long)l))
            return ldt_ctx_status(m->ctx) ? ldt_ctx_status(m->ctx) : LDT_ERR_OUT_OF_MEMORY;
    }
    return LDT_OK;
}

ldt_tensor *mlp_forward(ldt_model *m) {
    ldt_tensor *x = m->inputs[0], *d;
    for (int64_t l = 0; l < m->cfg.layers; l++) {
        ldt_tensor **p = &m->params[4 * l];
        x = ldt_add(x, ldt_linear(ldt_gelu(ldt_linear(x, p[0], p[1]), 0), p[2], p[3]));
    }
    m->output = x;
    d = ldt_sub(x, m->inputs[1]);
    return ldt_mean(ldt_mul(d, d), NULL, 0, 0);
}
