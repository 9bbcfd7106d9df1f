/* A custom op with its own sharding strategy, planned for 4 ranks and checked against one
 * device: swish_scaled(x, s) = x * sigmoid(x) * s, elementwise, so every shard follows.
 *
 *   build/examples/example_custom_op    prints the plan and "ok" when the values match */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ldt/ldt.h"

/* The shape rule: the output is shaped like x. */
static ldt_status shape_fn(int nin, const ldt_shape *in, const ldt_dtype *dts, void *user,
                           ldt_shape *out, ldt_dtype *odt, char *msg, size_t cap) {
    (void)user;
    if (nin != 1 || dts[0] != LDT_F32) {
        snprintf(msg, cap, "swish_scaled: expected one f32 input");
        return LDT_ERR_INVALID_ARGUMENT;
    }
    *out = in[0];
    *odt = LDT_F32;
    return LDT_OK;
}

/* The CPU kernel, on whatever (local) buffer it is given. */
static ldt_status cpu_fn(int nin, const void *const *in, const ldt_shape *shapes,
                         const ldt_dtype *dts, void *out, const ldt_shape *oshape, ldt_dtype odt,
                         void *user) {
    const float *x = in[0];
    float *y = out, s = *(const float *)user;
    int64_t n = 1;
    (void)nin, (void)shapes, (void)dts, (void)odt;
    for (int d = 0; d < oshape->ndim; d++) n *= oshape->dims[d];
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i])) * s;
    return LDT_OK;
}

/* Its strategies, per mesh dim: elementwise, so a shard on any dim follows the input. */
static void strategy_fn(int nin, const ldt_shape *in, const ldt_shape *out, void *user,
                        ldt_strategy_builder *b) {
    (void)nin, (void)in, (void)user;
    for (int d = 0; d < out->ndim; d++) ldt_strategy_add(b, ldt_shard(d), (ldt_placement[]){ldt_shard(d)});
}

/* y = sum over rows of swish_scaled(x @ w): x pinned S0 (batch), so the custom op runs on the
 * batch shard without any communication. */
static ldt_tensor *build(ldt_ctx *ctx, int id, const float *xd, const float *wd) {
    ldt_shape xs = {2, {6, 8}}, ws = {2, {8, 8}};
    ldt_tensor *x = ldt_input(ctx, "x", &xs, LDT_F32), *w = ldt_param(ctx, "w", &ws, LDT_F32), *h;
    if (ldt_mesh_nranks(ldt_ctx_mesh(ctx)) > 1) {
        ldt_placement s0 = ldt_shard(0);
        ldt_pin(x, &s0, 1);
    }
    ldt_input_bind(x, xd, 6 * 8 * sizeof(float));
    ldt_param_set(w, wd, 8 * 8 * sizeof(float));
    h = ldt_matmul(x, w);
    return ldt_custom(ctx, id, &h, 1);
}

int main(void) {
    float xd[48], wd[64], ref[48], got[48], scale = 0.5f;
    ldt_ctx *one, *ctx;
    ldt_mesh *mesh;
    ldt_ctx_options co = {0};
    ldt_plan *plan;
    ldt_tensor *y;
    int id, ok = 1;
    void *dst = got;
    int64_t nb = sizeof got;
    for (int i = 0; i < 48; i++) xd[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 64; i++) wd[i] = (float)((i * 53) % 13) / 13.0f - 0.5f;
    /* one device: the reference */
    if (ldt_ctx_create(NULL, &one) != LDT_OK ||
        ldt_custom_op_register(one, "swish_scaled", 1, shape_fn, cpu_fn, &scale, &id) != LDT_OK ||
        ldt_read(build(one, id, xd, wd), ref, sizeof ref) != LDT_OK) {
        fprintf(stderr, "reference: %s\n", ldt_last_error());
        return 1;
    }
    ldt_ctx_destroy(one);
    /* four ranks: register the op and its strategy, plan, run */
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK ||
        ldt_custom_op_register(ctx, "swish_scaled", 1, shape_fn, cpu_fn, &scale, &id) != LDT_OK ||
        ldt_custom_op_set_strategy(ctx, id, strategy_fn, NULL) != LDT_OK ||
        !(y = build(ctx, id, xd, wd)) || ldt_plan_create(ctx, NULL, &plan) != LDT_OK ||
        ldt_plan_run(plan, 1, &y, &dst, &nb) != LDT_OK) {
        fprintf(stderr, "planned: %s\n", ldt_last_error());
        return 1;
    }
    ldt_plan_write_program(plan, 0, stdout);
    for (int i = 0; i < 48; i++) ok &= fabsf(got[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i]));
    {
        ldt_placement pl;
        ldt_plan_placements(plan, y, &pl, 1);
        ok &= pl.kind == LDT_PLACE_SHARD && pl.dim == 0; /* it ran sharded, not replicated */
    }
    printf("%s\n", ok ? "ok" : "MISMATCH");
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return ok ? 0 : 1;
}
