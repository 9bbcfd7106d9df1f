/* A small training setup the tests share: an f64 MLP (2 layers, hidden 8, batch 6) with
 * AdamW (decay and clipping optional) on a mesh given by name, Megatron pins. */
#ifndef LDT_TESTS_TRAINER_H
#define LDT_TESTS_TRAINER_H

#include <criterion/criterion.h>
#include <string.h>

#include "ldt/ldt.h"
#include "ldt/models.h"

typedef struct trainer {
    ldt_mesh *m;
    ldt_ctx *ctx;
    ldt_model *model;
    ldt_optim *opt;
    ldt_tensor *ps[16];
    int np;
} trainer;

static inline void trainer_open_on(trainer *t, const char *mesh, ldt_device_type dev,
                                   int total_steps, int decay_and_clip) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("mlp");
    ldt_optim_config oc = {0};
    memset(t, 0, sizeof *t);
    cfg.layers = 2;
    cfg.hidden = 8;
    cfg.batch = 6;
    cfg.dtype = LDT_F64;
    if (mesh) cr_assert_eq(ldt_mesh_parse(mesh, dev, &t->m), LDT_OK);
    co.mesh = t->m;
    cr_assert_eq(ldt_ctx_create(&co, &t->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(t->ctx, "mlp", &cfg, &t->model), LDT_OK);
    cr_assert_eq(ldt_model_init(t->model, 4), LDT_OK);
    if (mesh) cr_assert_eq(ldt_model_pin(t->model, "megatron"), LDT_OK);
    t->np = ldt_model_nparams(t->model);
    for (int i = 0; i < t->np; i++) t->ps[i] = ldt_model_param(t->model, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW;
    oc.lr = 0.01;
    oc.beta1 = 0.9;
    oc.beta2 = 0.99;
    oc.eps = 1e-8;
    oc.weight_decay = decay_and_clip ? 0.01 : 0;
    oc.clip_norm = decay_and_clip ? 1.0 : 0;
    oc.total_steps = total_steps;
    cr_assert_eq(ldt_optim_create(t->ctx, &oc, t->ps, t->np, &t->opt), LDT_OK, "%s", ldt_last_error());
}

static inline void trainer_open(trainer *t, const char *mesh, int total_steps, int decay_and_clip) {
    trainer_open_on(t, mesh, LDT_DEVICE_CPU, total_steps, decay_and_clip);
}

static inline void trainer_close(trainer *t) {
    ldt_optim_destroy(t->opt);
    ldt_model_destroy(t->model);
    ldt_ctx_destroy(t->ctx);
    ldt_mesh_destroy(t->m);
}

#endif
