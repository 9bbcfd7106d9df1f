/* Optimizers inside the step: SGD with momentum and AdamW, clipping by the global norm and the
 * rate schedules, against naive references for a few steps, on one device and sharded. */
#include <criterion/criterion.h>
#include <math.h>

#include "core/half.h"
#include "tests/plan_check.h"

enum { NP = 2, STEPS = 6 };
static const int64_t k_n[NP] = {6, 10}; /* parameter sizes: [2,3] and [10] */

/* The loss sum_i c_i (p_i - target_i)^2 over both parameters: gradient 2 c (p - target). */
static double coef(int k, int64_t i) { return 0.5 + 0.25 * (double)((i + k) % 3); }
static double target(int k, int64_t i) { return sin(1.0 + (double)i + 3.0 * k); }

static ldt_tensor *loss_of(ldt_ctx *ctx, ldt_tensor **p) {
    ldt_tensor *l = NULL;
    for (int k = 0; k < NP; k++) {
        double c[10], t[10];
        ldt_shape s;
        ldt_tensor *d;
        ldt_tensor_shape(p[k], &s);
        for (int64_t i = 0; i < k_n[k]; i++) {
            c[i] = coef(k, i);
            t[i] = target(k, i);
        }
        d = ldt_sub(p[k], ldt_constant(ctx, &s, LDT_F64, t));
        d = ldt_sum(ldt_mul(ldt_mul(d, d), ldt_constant(ctx, &s, LDT_F64, c)), NULL, 0, 0);
        l = l ? ldt_add(l, d) : d;
    }
    return l;
}

/* The naive reference: params after `steps` updates of cfg. */
static void reference(const ldt_optim_config *c, double p[NP][10], int steps) {
    double m[NP][10] = {{0}}, v[NP][10] = {{0}};
    for (int t = 1; t <= steps; t++) {
        double g[NP][10], norm = 0, scale = 1, lr = ldt_optim_rate(c, t - 1);
        for (int k = 0; k < NP; k++)
            for (int64_t i = 0; i < k_n[k]; i++) {
                g[k][i] = 2 * coef(k, i) * (p[k][i] - target(k, i));
                norm += g[k][i] * g[k][i];
            }
        if (c->clip_norm > 0 && c->clip_norm / (sqrt(norm) + 1e-6) < 1) scale = c->clip_norm / (sqrt(norm) + 1e-6);
        for (int k = 0; k < NP; k++)
            for (int64_t i = 0; i < k_n[k]; i++) {
                double gi = g[k][i] * scale;
                if (c->kind == LDT_OPTIM_SGD) {
                    gi += c->weight_decay * p[k][i];
                    if (c->momentum > 0) gi = m[k][i] = c->momentum * m[k][i] + gi;
                    p[k][i] -= lr * gi;
                } else {
                    m[k][i] = c->beta1 * m[k][i] + (1 - c->beta1) * gi;
                    v[k][i] = c->beta2 * v[k][i] + (1 - c->beta2) * gi * gi;
                    p[k][i] -= lr * c->weight_decay * p[k][i];
                    p[k][i] -= lr * (m[k][i] / (1 - pow(c->beta1, t))) /
                               (sqrt(v[k][i] / (1 - pow(c->beta2, t))) + c->eps);
                }
            }
    }
}

/* Runs `steps` traced steps on mesh_text (NULL: one device, eagerly), params pinned S0 there. */
static void run(const ldt_optim_config *cfg, const char *mesh_text, double p[NP][10], int steps) {
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_tensor *ps[NP];
    ldt_optim *o;
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    for (int k = 0; k < NP; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", k);
        ps[k] = ldt_param(ctx, name, k ? &(ldt_shape){1, {10}} : &(ldt_shape){2, {2, 3}}, LDT_F64);
        cr_assert_eq(ldt_param_set(ps[k], p[k], k_n[k] * 8), LDT_OK);
        if (mesh) {
            ldt_placement pl[LDT_MAX_DIMS];
            for (int d = 0; d < ldt_mesh_ndim(mesh); d++) pl[d] = d == 0 ? ldt_shard(0) : ldt_replicate();
            cr_assert_eq(ldt_pin(ps[k], pl, ldt_mesh_ndim(mesh)), LDT_OK);
        }
    }
    cr_assert_eq(ldt_optim_create(ctx, cfg, ps, NP, &o), LDT_OK, "%s", ldt_last_error());
    for (int t = 0; t < steps; t++) {
        ldt_tensor *g[NP], *loss = loss_of(ctx, ps);
        cr_assert_eq(ldt_grad(loss, ps, NP, g), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_optim_step(o, g), LDT_OK, "%s", ldt_last_error());
        if (mesh) cr_assert_eq(ldt_run_eager(ctx, NULL, 0, NULL, NULL, NULL), LDT_OK, "%s", ldt_last_error());
        else cr_assert_eq(ldt_sync(ctx), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
    }
    for (int k = 0; k < NP; k++) cr_assert_eq(ldt_read(ps[k], p[k], k_n[k] * 8), LDT_OK);
    {
        double s;
        cr_assert_eq(ldt_read(ldt_optim_step_counter(o), &s, sizeof s), LDT_OK);
        cr_assert_eq(s, steps);
    }
    ldt_optim_destroy(o);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

static void check(const ldt_optim_config *cfg, const char *what) {
    const char *meshes[] = {NULL, "2", "2x2"};
    double ref[NP][10];
    for (int k = 0; k < NP; k++)
        for (int64_t i = 0; i < k_n[k]; i++) ref[k][i] = 0.3 * (double)i - 0.7 * k;
    {
        double p0[NP][10];
        memcpy(p0, ref, sizeof p0);
        reference(cfg, ref, STEPS);
        for (int m = 0; m < 3; m++) {
            double p[NP][10];
            memcpy(p, p0, sizeof p);
            run(cfg, meshes[m], p, STEPS);
            for (int k = 0; k < NP; k++)
                for (int64_t i = 0; i < k_n[k]; i++)
                    cr_assert(fabs(p[k][i] - ref[k][i]) <= 1e-12 * (1 + fabs(ref[k][i])),
                              "%s on %s: w%d[%lld] is %.15g, the reference %.15g", what,
                              meshes[m] ? meshes[m] : "one device", k, (long long)i, p[k][i], ref[k][i]);
        }
    }
}

Test(optim, sgd_with_momentum_and_decay) {
    ldt_optim_config c = {0};
    c.kind = LDT_OPTIM_SGD;
    c.lr = 0.05;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    c.total_steps = STEPS;
    check(&c, "sgd");
    c.momentum = 0;
    check(&c, "plain sgd");
}

Test(optim, adamw) {
    ldt_optim_config c = {0};
    c.kind = LDT_OPTIM_ADAMW;
    c.lr = 0.01;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = 0.1;
    c.total_steps = STEPS;
    check(&c, "adamw");
}

Test(optim, clipping_and_schedules) {
    ldt_optim_config c = {0};
    c.kind = LDT_OPTIM_ADAMW;
    c.lr = 0.02;
    c.beta1 = 0.8;
    c.beta2 = 0.99;
    c.eps = 1e-8;
    c.clip_norm = 0.5; /* the gradients' norm is larger: clipping acts */
    c.schedule = LDT_LR_WARMUP_LINEAR;
    c.warmup_steps = 3;
    c.total_steps = STEPS;
    check(&c, "adamw, clipped, warmup");
    c.kind = LDT_OPTIM_SGD;
    c.momentum = 0.5;
    c.schedule = LDT_LR_COSINE;
    c.warmup_steps = 1;
    c.lr_min = 0.001;
    c.total_steps = 4; /* shorter than the run: the last rate holds */
    check(&c, "sgd, clipped, cosine");
    cr_assert_float_eq(ldt_optim_rate(&c, 0), 0.02, 1e-15);
    cr_assert_float_eq(ldt_optim_rate(&c, 4), 0.001, 1e-15); /* the end of the cosine */
    cr_assert_float_eq(ldt_optim_rate(&c, 9), 0.001, 1e-15); /* and after it */
}

Test(optim, bad_config_is_refused) {
    ldt_ctx *ctx;
    ldt_tensor *w, *i;
    ldt_optim *o;
    ldt_optim_config c = {0};
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    w = ldt_param(ctx, "w", &(ldt_shape){1, {3}}, LDT_F64);
    i = ldt_param(ctx, "i", &(ldt_shape){1, {3}}, LDT_I64);
    c.kind = LDT_OPTIM_SGD;
    c.total_steps = 1;
    cr_assert_eq(ldt_optim_create(ctx, &c, &w, 1, &o), LDT_ERR_INVALID_ARGUMENT, "lr 0");
    c.lr = 0.1;
    c.momentum = 1.5;
    cr_assert_eq(ldt_optim_create(ctx, &c, &w, 1, &o), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "momentum"), "%s", ldt_last_error());
    c.momentum = 0;
    cr_assert_eq(ldt_optim_create(ctx, &c, &i, 1, &o), LDT_ERR_INVALID_ARGUMENT, "an integer parameter");
    c.schedule = LDT_LR_COSINE;
    c.warmup_steps = 1;
    cr_assert_eq(ldt_optim_create(ctx, &c, &w, 1, &o), LDT_ERR_INVALID_ARGUMENT, "warmup >= total");
    c.schedule = LDT_LR_CONSTANT;
    cr_assert_eq(ldt_optim_create(ctx, &c, &w, 1, &o), LDT_OK);
    cr_assert_eq(ldt_optim_step(o, (ldt_tensor *[]){ldt_exp(i)}), LDT_ERR_INVALID_ARGUMENT, "wrong shape or dtype");
    ldt_optim_destroy(o);
    ldt_ctx_destroy(ctx);
}

Test(optim, assign_writes_after_the_run_and_refuses_bad_input) {
    ldt_ctx *ctx;
    ldt_tensor *w, *x;
    double v[3] = {1, 2, 3}, got[3];
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    w = ldt_param(ctx, "w", &(ldt_shape){1, {3}}, LDT_F64);
    x = ldt_input(ctx, "x", &(ldt_shape){1, {3}}, LDT_F64);
    cr_assert_eq(ldt_param_set(w, v, sizeof v), LDT_OK);
    /* w <- 2 w, reading the old w during the run */
    cr_assert_eq(ldt_assign(w, ldt_mul_scalar(w, 2)), LDT_OK);
    cr_assert_eq(ldt_assign(w, ldt_mul_scalar(w, 3)), LDT_ERR_INVALID_USAGE, "twice in one trace");
    cr_assert_eq(ldt_sync(ctx), LDT_OK);
    cr_assert_eq(ldt_read(w, got, sizeof got), LDT_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(got[i], 2 * v[i]);
    cr_assert_eq(ldt_assign(x, ldt_mul_scalar(w, 2)), LDT_ERR_INVALID_ARGUMENT, "an input");
    cr_assert_eq(ldt_assign(w, ldt_sum(w, NULL, 0, 0)), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "same shape"), "%s", ldt_last_error());
    cr_assert_eq(ldt_assign(NULL, w), LDT_ERR_INVALID_ARGUMENT);
    ldt_ctx_destroy(ctx);
}

/* ZeRO: states pinned sharded over dp; the plan keeps them sharded (the update runs on shards)
 * and the parameters come out as without it. */
Test(optim, zero_sharded_states_give_the_same_parameters) {
    ldt_optim_config c = {0};
    double ref[NP][10], got[NP][10];
    c.kind = LDT_OPTIM_ADAMW;
    c.lr = 0.01, c.beta1 = 0.9, c.beta2 = 0.999, c.eps = 1e-8, c.weight_decay = 0.1;
    c.total_steps = STEPS;
    for (int k = 0; k < NP; k++)
        for (int64_t i = 0; i < k_n[k]; i++) ref[k][i] = got[k][i] = 0.3 * (double)i - 0.7 * k;
    reference(&c, ref, 3);
    {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_tensor *ps[NP];
        ldt_optim *o;
        ldt_plan *plan;
        cr_assert_eq(ldt_mesh_parse("dp=2,tp=2", LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        for (int k = 0; k < NP; k++) {
            char name[16];
            snprintf(name, sizeof name, "w%d", k);
            ps[k] = ldt_param(ctx, name, k ? &(ldt_shape){1, {10}} : &(ldt_shape){2, {2, 3}}, LDT_F64);
            cr_assert_eq(ldt_param_set(ps[k], got[k], k_n[k] * 8), LDT_OK);
        }
        cr_assert_eq(ldt_optim_create(ctx, &c, ps, NP, &o), LDT_OK);
        cr_assert_eq(ldt_optim_shard_states(o, 0), LDT_OK);
        cr_assert_eq(ldt_optim_shard_states(o, 5), LDT_ERR_INVALID_ARGUMENT);
        for (int t = 0; t < 3; t++) {
            ldt_tensor *g[NP];
            cr_assert_eq(ldt_grad(loss_of(ctx, ps), ps, NP, g), LDT_OK);
            cr_assert_eq(ldt_optim_step(o, g), LDT_OK);
            if (t == 0) { /* the moments of w1 ([10]) are held split over dp, the update on shards */
                ldt_placement pl[2];
                cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
                for (int which = 0; which < 2; which++) {
                    cr_assert_eq(ldt_plan_placements(plan, ldt_optim_state(o, 1, which), pl, 2), LDT_OK);
                    cr_assert(pl[0].kind == LDT_PLACE_SHARD && pl[0].dim == 0, "state %d of w1 is split over dp", which);
                }
                ldt_plan_destroy(plan);
            }
            cr_assert_eq(ldt_run_eager(ctx, NULL, 0, NULL, NULL, NULL), LDT_OK, "%s", ldt_last_error());
        }
        for (int k = 0; k < NP; k++) cr_assert_eq(ldt_read(ps[k], got[k], k_n[k] * 8), LDT_OK);
        ldt_optim_destroy(o);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
    for (int k = 0; k < NP; k++)
        for (int64_t i = 0; i < k_n[k]; i++)
            cr_assert(fabs(got[k][i] - ref[k][i]) <= 1e-12 * (1 + fabs(ref[k][i])), "w%d[%lld]", k, (long long)i);
}

/* Mixed precision: a bf16 parameter's update runs on its f32 master; the parameter is the
 * master rounded to bf16, the master what f32 arithmetic gives. */
Test(optim, bf16_parameters_have_f32_masters) {
    ldt_ctx *ctx;
    ldt_tensor *w, *master, *g;
    ldt_optim *o;
    ldt_optim_config c = {0};
    uint16_t wb[4], got[4];
    float w0[4] = {0.5f, -1.25f, 3.0f, 0.1f}, m[4];
    c.kind = LDT_OPTIM_SGD;
    c.lr = 0.1;
    c.total_steps = 1;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    w = ldt_param(ctx, "w", &(ldt_shape){1, {4}}, LDT_BF16);
    for (int i = 0; i < 4; i++) wb[i] = ldt__f32_to_bf16(w0[i]);
    cr_assert_eq(ldt_param_set(w, wb, sizeof wb), LDT_OK);
    cr_assert_eq(ldt_optim_create(ctx, &c, &w, 1, &o), LDT_OK, "%s", ldt_last_error());
    /* loss = sum(w^2 / 2): gradient w */
    cr_assert_eq(ldt_grad(ldt_mul_scalar(ldt_sum(ldt_mul(w, w), NULL, 0, 0), 0.5), &w, 1, &g), LDT_OK);
    cr_assert_eq(ldt_optim_step(o, &g), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_sync(ctx), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_read(w, got, sizeof got), LDT_OK);
    master = ldt_optim_state(o, 0, 2);
    cr_assert(master != NULL && ldt_tensor_dtype(master) == LDT_F32);
    {
        float mv[4];
        cr_assert_eq(ldt_read(master, mv, sizeof mv), LDT_OK);
        for (int i = 0; i < 4; i++) {
            float x = ldt__bf16_to_f32(wb[i]);
            cr_assert_eq(mv[i], x - (float)0.1 * x, "master[%d] in f32", i);
        }
    }
    for (int i = 0; i < 4; i++) {
        float x = ldt__bf16_to_f32(wb[i]), g32 = ldt__bf16_to_f32(wb[i]);
        m[i] = x - (float)0.1 * g32;
        cr_assert_eq(got[i], ldt__f32_to_bf16(m[i]), "w[%d]: %g, expected bf16(%.9g)", i,
                     ldt__bf16_to_f32(got[i]), m[i]);
    }
    ldt_optim_destroy(o);
    ldt_ctx_destroy(ctx);
}
