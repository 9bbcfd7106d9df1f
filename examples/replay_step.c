/* Trace a step once, compile it for 4 rank threads, replay it with new inputs: the README's
 * example. y = relu(x @ w1) @ w2 with the hidden dim split Megatron-style by two pins. */
#include <stdio.h>

#include "ldt/ldt.h"

int main(void) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_exec *ex;
    ldt_shape xs = {2, {8, 16}}, w1s = {2, {16, 64}}, w2s = {2, {64, 16}};
    ldt_placement col = ldt_shard(1), row = ldt_shard(0);
    float x[8 * 16], w1[16 * 64], w2[64 * 16], y[8 * 16];
    ldt_tensor *tx, *tw1, *tw2, *ty;
    for (int i = 0; i < 16 * 64; i++) w1[i] = w2[i] = (float)(i % 7) / 7.0f - 0.4f;
    if (ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh) != LDT_OK) return 1;
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK) return 1;
    tx = ldt_input(ctx, "x", &xs, LDT_F32);
    tw1 = ldt_param(ctx, "w1", &w1s, LDT_F32);
    tw2 = ldt_param(ctx, "w2", &w2s, LDT_F32);
    ldt_param_set(tw1, w1, sizeof w1);
    ldt_param_set(tw2, w2, sizeof w2);
    ldt_pin(tw1, &col, 1); /* column parallel: the hidden dim split */
    ldt_pin(tw2, &row, 1); /* row parallel: one all_reduce at the end */
    ty = ldt_matmul(ldt_relu(ldt_matmul(tx, tw1)), tw2);     /* recorded, not run */
    if (ldt_compile(ctx, &ty, 1, NULL, &ex) != LDT_OK) {     /* plan, lower, bind */
        fprintf(stderr, "%s\n", ldt_last_error());
        return 1;
    }
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 8 * 16; i++) x[i] = (float)((i + step) % 5) - 2;
        if (ldt_input_bind(tx, x, sizeof x) != LDT_OK || ldt_replay(ex) != LDT_OK ||
            ldt_exec_read(ex, 0, y, sizeof y) != LDT_OK) {
            fprintf(stderr, "%s\n", ldt_last_error());
            return 1;
        }
        printf("step %d: y[0] = %g\n", step, y[0]);
    }
    ldt_ctx_destroy(ctx); /* the compiled step goes with its context */
    ldt_mesh_destroy(mesh);
    return 0;
}
