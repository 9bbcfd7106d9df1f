/* Autodiff: every rule against central finite differences in f64, on one device; gradients
 * of sharded graphs equal one device's; bad input. */
#include <criterion/criterion.h>
#include <math.h>

#include "tests/plan_check.h"
#include "trace/autodiff.h"

enum { MAXP = 4 };

/* A case: build records its inputs as f64 parameters named p0.. (pc_param) and returns the
 * output; the loss is sum(output * r), r a fixed weight, so every output element matters. */
typedef ldt_tensor *(*ad_build)(ldt_ctx *ctx, ldt_tensor **params, int *np, int which);

static ldt_tensor *loss_of(ldt_ctx *ctx, ldt_tensor *y) {
    ldt_shape s;
    ldt_tensor *r;
    ldt_tensor_shape(y, &s);
    r = pc_input(ctx, "r", s, LDT_F64, 0);
    return ldt_sum(ldt_mul(y, r), NULL, 0, 0);
}

static double eval_loss(ad_build build, int which, const double *const *vals, const int64_t *nel) {
    ldt_ctx *ctx;
    ldt_tensor *ps[MAXP], *y;
    int np = 0;
    double l;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    y = build(ctx, ps, &np, which);
    cr_assert(y != NULL, "%s", ldt_ctx_errmsg(ctx));
    for (int k = 0; k < np; k++) cr_assert_eq(ldt_param_set(ps[k], vals[k], nel[k] * 8), LDT_OK);
    cr_assert_eq(ldt_read(loss_of(ctx, y), &l, sizeof l), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
    ldt_ctx_destroy(ctx);
    return l;
}

/* Checks case `which`: the analytic gradient of every parameter against central differences. */
static void fd_check(ad_build build, int which, const char *what) {
    ldt_ctx *ctx;
    ldt_tensor *ps[MAXP], *gs[MAXP], *y;
    double *vals[MAXP], *grad[MAXP];
    int64_t nel[MAXP];
    int np = 0;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    y = build(ctx, ps, &np, which);
    cr_assert(y != NULL, "%s: %s", what, ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_grad(loss_of(ctx, y), ps, np, gs), LDT_OK, "%s: %s", what, ldt_last_error());
    for (int k = 0; k < np; k++) gs[k] = ldt_keep(gs[k]); /* all of them from one run */
    cr_assert_eq(ldt_sync(ctx), LDT_OK, "%s: %s", what, ldt_ctx_errmsg(ctx));
    for (int k = 0; k < np; k++) {
        ldt_shape s;
        ldt_tensor_shape(ps[k], &s);
        nel[k] = pc_nbytes(&s, LDT_F64) / 8;
        vals[k] = malloc((size_t)(nel[k] ? nel[k] : 1) * 8);
        grad[k] = malloc((size_t)(nel[k] ? nel[k] : 1) * 8);
        cr_assert(vals[k] && grad[k]);
        cr_assert_eq(ldt_read(ps[k], vals[k], nel[k] * 8), LDT_OK);
        cr_assert_eq(ldt_read(gs[k], grad[k], nel[k] * 8), LDT_OK, "%s: %s", what, ldt_ctx_errmsg(ctx));
    }
    ldt_ctx_destroy(ctx);
    for (int k = 0; k < np; k++)
        for (int64_t i = 0; i < nel[k]; i++) {
            double x0 = vals[k][i], h = 1e-6 * (1 + fabs(x0)), lp, lm, num;
            vals[k][i] = x0 + h;
            lp = eval_loss(build, which, (const double *const *)vals, nel);
            vals[k][i] = x0 - h;
            lm = eval_loss(build, which, (const double *const *)vals, nel);
            vals[k][i] = x0;
            num = (lp - lm) / (2 * h);
            cr_assert(fabs(grad[k][i] - num) <= 1e-6 * (1 + fabs(num)),
                      "%s: d/d p%d[%lld] is %.12g, finite differences %.12g", what, k, (long long)i,
                      grad[k][i], num);
        }
    for (int k = 0; k < np; k++) {
        free(vals[k]);
        free(grad[k]);
    }
}

static ldt_tensor *P(ldt_ctx *ctx, ldt_tensor **ps, int *np, ldt_shape s) {
    char name[8];
    snprintf(name, sizeof name, "p%d", *np);
    return ps[(*np)++] = pc_param(ctx, name, s, LDT_F64);
}

/* A positive parameter (for log, sqrt, rsqrt, div): exp of one. */
static ldt_tensor *Ppos(ldt_ctx *ctx, ldt_tensor **ps, int *np, ldt_shape s) {
    return ldt_add_scalar(ldt_exp(P(ctx, ps, np, s)), 0.5);
}

static ldt_tensor *b_elementwise(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_shape s = {2, {3, 4}}, row = {1, {4}}, col = {2, {3, 1}};
    ldt_tensor *a = P(ctx, ps, np, s);
    switch (w) {
    case 0: return ldt_add(a, P(ctx, ps, np, row));
    case 1: return ldt_sub(P(ctx, ps, np, col), a);
    case 2: return ldt_mul(a, P(ctx, ps, np, col));
    case 3: return ldt_div(a, Ppos(ctx, ps, np, row));
    case 4: return ldt_where(ldt_gt(a, P(ctx, ps, np, row)), a, ldt_mul_scalar(a, 3));
    case 5: return ldt_add_scalar(ldt_mul_scalar(ldt_sub_scalar(a, 2), -1.5), 7);
    case 6: return ldt_div_scalar(ldt_rsub_scalar(a, 1), 3);
    case 7: return ldt_rdiv_scalar(ldt_add_scalar(ldt_exp(a), 0.1), 2);
    case 8: return ldt_pow_scalar(ldt_add_scalar(ldt_exp(a), 0.1), 2.5);
    case 9: return ldt_neg(ldt_exp(a));
    case 10: return ldt_log(Ppos(ctx, ps, np, s));
    case 11: return ldt_sqrt(Ppos(ctx, ps, np, s));
    case 12: return ldt_rsqrt(Ppos(ctx, ps, np, s));
    case 13: return ldt_tanh(a);
    case 14: return ldt_relu(a);
    case 15: return ldt_silu(a);
    case 16: return ldt_gelu(a, 1);
    case 17: return ldt_gelu(a, 0);
    default: return ldt_cast(a, LDT_F64);
    }
}

Test(autodiff, elementwise_rules_match_finite_differences) {
    for (int w = 0; w < 19; w++) {
        char what[32];
        snprintf(what, sizeof what, "elementwise %d", w);
        fd_check(b_elementwise, w, what);
    }
}

static ldt_tensor *b_linalg(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    switch (w) {
    case 0: return ldt_matmul(P(ctx, ps, np, (ldt_shape){2, {3, 4}}), P(ctx, ps, np, (ldt_shape){2, {4, 2}}));
    case 1: /* batched times one matrix: broadcast */
        return ldt_matmul(P(ctx, ps, np, (ldt_shape){3, {2, 3, 4}}), P(ctx, ps, np, (ldt_shape){2, {4, 2}}));
    case 2: return ldt_matmul(P(ctx, ps, np, (ldt_shape){1, {4}}), P(ctx, ps, np, (ldt_shape){3, {2, 4, 3}}));
    case 3: return ldt_matmul(P(ctx, ps, np, (ldt_shape){2, {3, 4}}), P(ctx, ps, np, (ldt_shape){1, {4}}));
    case 4: return ldt_matmul(P(ctx, ps, np, (ldt_shape){1, {4}}), P(ctx, ps, np, (ldt_shape){1, {4}}));
    case 5:
        return ldt_linear(P(ctx, ps, np, (ldt_shape){3, {2, 3, 4}}), P(ctx, ps, np, (ldt_shape){2, {5, 4}}),
                          P(ctx, ps, np, (ldt_shape){1, {5}}));
    default: return ldt_linear(P(ctx, ps, np, (ldt_shape){2, {3, 4}}), P(ctx, ps, np, (ldt_shape){2, {2, 4}}), NULL);
    }
}

Test(autodiff, linalg_rules_match_finite_differences) {
    for (int w = 0; w < 7; w++) {
        char what[32];
        snprintf(what, sizeof what, "linalg %d", w);
        fd_check(b_linalg, w, what);
    }
}

static ldt_tensor *b_view(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_tensor *a = P(ctx, ps, np, (ldt_shape){3, {2, 3, 4}});
    switch (w) {
    case 0: return ldt_reshape(a, &(ldt_shape){2, {6, 4}});
    case 1: return ldt_permute(a, (int[]){2, 0, 1}, 3);
    case 2: return ldt_slice(a, 2, 1, 3, 1);
    case 3: return ldt_slice(a, 1, 0, 3, 2);
    case 4: return ldt_select(a, 1, -1);
    case 5: return ldt_cat((ldt_tensor *[]){a, P(ctx, ps, np, (ldt_shape){3, {2, 1, 4}}), a}, 3, 1);
    case 6: return ldt_expand(P(ctx, ps, np, (ldt_shape){2, {3, 1}}), &(ldt_shape){3, {2, 3, 5}});
    default: return ldt_transpose(ldt_alias(a), 0, 2);
    }
}

Test(autodiff, view_rules_match_finite_differences) {
    for (int w = 0; w < 8; w++) {
        char what[32];
        snprintf(what, sizeof what, "view %d", w);
        fd_check(b_view, w, what);
    }
}

static ldt_tensor *b_reduce(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_tensor *a = P(ctx, ps, np, (ldt_shape){3, {2, 3, 4}});
    switch (w) {
    case 0: return ldt_sum(a, (int[]){1}, 1, 0);
    case 1: return ldt_sum(a, (int[]){0, 2}, 2, 1);
    case 2: return ldt_mean(a, (int[]){2}, 1, 0);
    case 3: return ldt_mean(a, NULL, 0, 0);
    case 4: return ldt_amax(a, (int[]){1}, 1, 0);
    default: return ldt_amin(a, (int[]){0, 2}, 2, 1);
    }
}

Test(autodiff, reduction_rules_match_finite_differences) {
    for (int w = 0; w < 6; w++) {
        char what[32];
        snprintf(what, sizeof what, "reduce %d", w);
        fd_check(b_reduce, w, what);
    }
}

/* A composite: an MLP block's loss, through broadcasts, shared parameters (used twice) and
 * fan-out, checked the same way. */
static ldt_tensor *b_mlp(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_tensor *x = P(ctx, ps, np, (ldt_shape){2, {3, 4}}), *w1 = P(ctx, ps, np, (ldt_shape){2, {5, 4}});
    ldt_tensor *b1 = P(ctx, ps, np, (ldt_shape){1, {5}}), *w2 = P(ctx, ps, np, (ldt_shape){2, {4, 5}});
    ldt_tensor *h = ldt_tanh(ldt_linear(x, w1, b1));
    (void)w;
    return ldt_add(x, ldt_mul(ldt_linear(h, w2, NULL), ldt_silu(x))); /* x used three times */
}

Test(autodiff, composite_mlp_matches_finite_differences) { fd_check(b_mlp, 0, "mlp block"); }

/* The gradient of a graph planned on meshes equals one device's. */
static ldt_tensor *g_build(ldt_ctx *ctx, void *arg) {
    ldt_tensor *ps[MAXP], *gs[MAXP], *y, *loss;
    int np = 0;
    y = b_mlp(ctx, ps, &np, 0);
    loss = loss_of(ctx, y);
    cr_assert_eq(ldt_grad(loss, ps, np, gs), LDT_OK, "%s", ldt_last_error());
    return gs[*(int *)arg]; /* the last recorded node must be the one compared: sum it up */
}

Test(autodiff, sharded_gradients_equal_one_device) {
    const char *meshes[] = {"2", "4", "2x2"};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 3; m++) {
            ldt_ctx *one, *ctx;
            ldt_mesh *mesh;
            ldt_ctx_options co = {0};
            ldt_tensor *g;
            ldt_plan *plan;
            ldt_shape s;
            double ref[64], got[64];
            void *dst = got;
            int64_t nb;
            cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
            g = g_build(one, &k);
            ldt_tensor_shape(g, &s);
            nb = pc_nbytes(&s, LDT_F64);
            cr_assert_eq(ldt_read(g, ref, nb), LDT_OK, "%s", ldt_ctx_errmsg(one));
            ldt_ctx_destroy(one);
            cr_assert_eq(ldt_mesh_parse(meshes[m], LDT_DEVICE_CPU, &mesh), LDT_OK);
            co.mesh = mesh;
            cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
            g = g_build(ctx, &k);
            cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_plan_run(plan, 1, &g, &dst, &nb), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(pc_compare(LDT_F64, got, ref, nb / 8, 1e-12), -1, "gradient %d on %s", k, meshes[m]);
            ldt_plan_destroy(plan);
            ldt_ctx_destroy(ctx);
            ldt_mesh_destroy(mesh);
        }
}

Test(autodiff, bad_input_and_missing_rules) {
    ldt_ctx *ctx;
    ldt_tensor *x, *w, *g, *i64;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    x = pc_param(ctx, "x", (ldt_shape){2, {3, 4}}, LDT_F64);
    w = pc_param(ctx, "w", (ldt_shape){1, {4}}, LDT_F64);
    i64 = pc_input(ctx, "i", (ldt_shape){1, {3}}, LDT_I64, 4);
    cr_assert_eq(ldt_grad(NULL, &x, 1, &g), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_grad(ldt_mul(x, w), &x, 1, &g), LDT_ERR_INVALID_ARGUMENT, "not one value");
    cr_assert(strstr(ldt_last_error(), "one floating value"), "%s", ldt_last_error());
    cr_assert_eq(ldt_grad(ldt_sum(x, NULL, 0, 0), &i64, 1, &g), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "floating"), "%s", ldt_last_error());
    /* w does not reach this loss: zeros */
    cr_assert_eq(ldt_grad(ldt_sum(x, NULL, 0, 0), &w, 1, &g), LDT_OK);
    {
        double z[4] = {1, 1, 1, 1};
        cr_assert_eq(ldt_read(g, z, sizeof z), LDT_OK);
        for (int i = 0; i < 4; i++) cr_assert_eq(z[i], 0.0);
    }
    /* a wrt from another context */
    {
        ldt_ctx *other;
        ldt_tensor *y;
        cr_assert_eq(ldt_ctx_create(NULL, &other), LDT_OK);
        y = pc_param(other, "y", (ldt_shape){1, {2}}, LDT_F64);
        cr_assert_eq(ldt_grad(ldt_sum(x, NULL, 0, 0), &y, 1, &g), LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), "another context"), "%s", ldt_last_error());
        ldt_ctx_destroy(other);
    }
    ldt_ctx_destroy(ctx);
}

/* Every op has a rule, or no gradient by nature (the table is checked, not trusted). */
Test(autodiff, every_op_has_a_rule) {
    for (int op = 0; op < LDT_OP_COUNT; op++)
        cr_assert(ldt__has_vjp(op), "op %s has no backward rule", ldt__builtin_op_name(op));
}

/* ---------------------------------------------------------------------------------------
 * nn and indexing rules.
 */
static ldt_tensor *I(ldt_ctx *ctx, const char *name, ldt_shape s, int64_t range) {
    return pc_input(ctx, name, s, LDT_I64, range);
}

static ldt_tensor *b_nn(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_shape s = {3, {2, 3, 5}};
    ldt_tensor *x = P(ctx, ps, np, s);
    switch (w) {
    case 0: return ldt_softmax(x, -1);
    case 1: return ldt_softmax(x, 1);
    case 2: return ldt_log_softmax(x, -1);
    case 3: return ldt_layer_norm(x, 1, P(ctx, ps, np, (ldt_shape){1, {5}}), P(ctx, ps, np, (ldt_shape){1, {5}}), 1e-5);
    case 4: return ldt_layer_norm(x, 2, NULL, NULL, 1e-5);
    case 5: return ldt_rms_norm(x, 1, P(ctx, ps, np, (ldt_shape){1, {5}}), 1e-6);
    case 6: return ldt_rms_norm(x, 2, NULL, 1e-6);
    case 7: /* targets with an ignored one (-1) */
        return ldt_mul_scalar(ldt_cross_entropy(x, ldt_sub_scalar(I(ctx, "t", (ldt_shape){2, {2, 3}}, 6), 1), -1), 1.0);
    case 8: return ldt_dropout(x, 0.3, 1);
    default: return ldt_cross_entropy(x, I(ctx, "t", (ldt_shape){2, {2, 3}}, 5), -100);
    }
}

static ldt_tensor *b_sdpa(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    ldt_tensor *q = P(ctx, ps, np, (ldt_shape){4, {2, 2, 3, 4}}), *k = P(ctx, ps, np, (ldt_shape){4, {2, 2, 5, 4}});
    ldt_tensor *v = P(ctx, ps, np, (ldt_shape){4, {2, 2, 5, 3}});
    return ldt_scaled_dot_product_attention(q, k, v, w & 1, w & 2 ? 0.25 : 0, w & 4 ? 0.7 : 0);
}

Test(autodiff, attention_rule_matches_finite_differences) {
    for (int w = 0; w < 8; w++) {
        char what[32];
        snprintf(what, sizeof what, "sdpa %d", w);
        fd_check(b_sdpa, w, what);
    }
}

Test(autodiff, nn_rules_match_finite_differences) {
    for (int w = 0; w < 10; w++) {
        char what[32];
        snprintf(what, sizeof what, "nn %d", w);
        fd_check(b_nn, w, what);
    }
}

static ldt_tensor *b_index(ldt_ctx *ctx, ldt_tensor **ps, int *np, int w) {
    switch (w) {
    case 0: /* embedding with repeated and negative indices */
        return ldt_embedding(P(ctx, ps, np, (ldt_shape){2, {6, 3}}),
                             ldt_sub_scalar(I(ctx, "i", (ldt_shape){2, {2, 4}}, 9), 3));
    case 1: return ldt_index_select(P(ctx, ps, np, (ldt_shape){2, {5, 3}}), 0, I(ctx, "i", (ldt_shape){1, {7}}, 5));
    case 2: return ldt_gather(P(ctx, ps, np, (ldt_shape){2, {4, 5}}), 1, I(ctx, "i", (ldt_shape){2, {4, 3}}, 5));
    case 3: { /* distinct positions per row, so the overwrite is well defined */
        int64_t idx[8] = {0, 2, 4, 1, 3, 0, 1, 2};
        ldt_tensor *ix = ldt_input(ctx, "i", &(ldt_shape){2, {2, 4}}, LDT_I64);
        cr_assert_eq(ldt_input_bind(ix, idx, sizeof idx), LDT_OK);
        return ldt_scatter(P(ctx, ps, np, (ldt_shape){2, {2, 5}}), 1, ix, P(ctx, ps, np, (ldt_shape){2, {2, 4}}));
    }
    case 4: return ldt_scatter_add(P(ctx, ps, np, (ldt_shape){2, {3, 5}}), 1, I(ctx, "i", (ldt_shape){2, {3, 4}}, 5),
                                   P(ctx, ps, np, (ldt_shape){2, {3, 4}}));
    case 5: return ldt_index_add(P(ctx, ps, np, (ldt_shape){2, {5, 3}}), 0, I(ctx, "i", (ldt_shape){1, {6}}, 5),
                                 P(ctx, ps, np, (ldt_shape){2, {6, 3}}));
    case 6: {
        ldt_tensor *v = NULL;
        cr_assert_eq(ldt_topk(P(ctx, ps, np, (ldt_shape){2, {3, 6}}), 2, 1, 1, &v, NULL), LDT_OK);
        return v;
    }
    default: { /* index_put over 2 of 3 dims, distinct positions (one negative), set and add */
        int64_t i0[3] = {0, 1, -2}, i1[3] = {2, 0, 1};
        ldt_tensor *ix[2];
        ix[0] = ldt_input(ctx, "i0", &(ldt_shape){1, {3}}, LDT_I64);
        ix[1] = ldt_input(ctx, "i1", &(ldt_shape){1, {3}}, LDT_I64);
        cr_assert_eq(ldt_input_bind(ix[0], i0, sizeof i0), LDT_OK);
        cr_assert_eq(ldt_input_bind(ix[1], i1, sizeof i1), LDT_OK);
        return ldt_index_put(P(ctx, ps, np, (ldt_shape){3, {3, 4, 2}}), ix, 2,
                             P(ctx, ps, np, (ldt_shape){1, {2}}), w == 8);
    }
    }
}

Test(autodiff, index_rules_match_finite_differences) {
    for (int w = 0; w < 9; w++) {
        char what[32];
        snprintf(what, sizeof what, "index %d", w);
        fd_check(b_index, w, what);
    }
}

/* ---------------------------------------------------------------------------------------
 * Whole models: the MLP's parameter gradients on tp=2, dp=2 and dp=2,tp=2 (Megatron pins)
 * equal one device's.
 */
#include "ldt/models.h"

typedef struct grads_run {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    int np;
    ldt_tensor *g[64];
} grads_run;

static void grads_open(grads_run *r, const char *kind, const char *mesh_text) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default(kind);
    ldt_tensor *ps[64], *loss;
    memset(r, 0, sizeof *r);
    cfg.layers = 2;
    cfg.hidden = 8;
    cfg.heads = 2;
    cfg.vocab = 11;
    cfg.seq = 3;
    cfg.batch = 5;
    cfg.dtype = LDT_F64;
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &r->mesh), LDT_OK);
    co.mesh = r->mesh;
    cr_assert_eq(ldt_ctx_create(&co, &r->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(r->ctx, "mlp", &cfg, &r->m), LDT_OK);
    cr_assert_eq(ldt_model_init(r->m, 3), LDT_OK);
    for (int i = 0; i < ldt_model_ninputs(r->m); i++) {
        const char *name;
        ldt_tensor *t = ldt_model_input(r->m, i, &name);
        ldt_shape s;
        void *d;
        ldt_tensor_shape(t, &s);
        d = pc_data(name, &s, ldt_tensor_dtype(t), cfg.vocab);
        cr_assert_eq(ldt_input_bind(t, d, pc_nbytes(&s, ldt_tensor_dtype(t))), LDT_OK);
        free(d);
    }
    if (mesh_text) cr_assert_eq(ldt_model_pin(r->m, "megatron"), LDT_OK);
    loss = ldt_model_forward(r->m);
    r->np = ldt_model_nparams(r->m);
    for (int i = 0; i < r->np; i++) ps[i] = ldt_model_param(r->m, i, NULL);
    cr_assert_eq(ldt_grad(loss, ps, r->np, r->g), LDT_OK, "%s", ldt_last_error());
}

static void grads_close(grads_run *r) {
    ldt_model_destroy(r->m);
    ldt_ctx_destroy(r->ctx);
    ldt_mesh_destroy(r->mesh);
}

static void model_grads(const char *kind) {
    const char *meshes[] = {"tp=2", "dp=2", "dp=2,tp=2"};
    grads_run one;
    double *ref[64], *got[64];
    int64_t nb[64];
    grads_open(&one, kind, NULL);
    for (int i = 0; i < one.np; i++) {
        ldt_shape s;
        ldt_tensor_shape(one.g[i], &s);
        nb[i] = pc_nbytes(&s, LDT_F64);
        ref[i] = malloc((size_t)nb[i]);
        got[i] = malloc((size_t)nb[i]);
        one.g[i] = ldt_keep(one.g[i]);
    }
    cr_assert_eq(ldt_sync(one.ctx), LDT_OK, "%s", ldt_ctx_errmsg(one.ctx));
    for (int i = 0; i < one.np; i++) cr_assert_eq(ldt_read(one.g[i], ref[i], nb[i]), LDT_OK);
    for (int m = 0; m < 3; m++) {
        grads_run r;
        ldt_plan *plan;
        grads_open(&r, kind, meshes[m]);
        cr_assert_eq(ldt_plan_create(r.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_plan_run(plan, r.np, r.g, (void *const *)got, nb), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < r.np; i++)
            cr_assert_eq(pc_compare(LDT_F64, got[i], ref[i], nb[i] / 8, 1e-12), -1, "%s parameter %d on %s",
                         kind, i, meshes[m]);
        ldt_plan_destroy(plan);
        grads_close(&r);
    }
    for (int i = 0; i < one.np; i++) {
        free(ref[i]);
        free(got[i]);
    }
    grads_close(&one);
}

Test(autodiff, model_gradients_on_meshes_equal_one_device) {
    model_grads("mlp");
    model_grads("gpt");
}

/* ---------------------------------------------------------------------------------------
 * For every strategy of an op (forced on the forward node, the rest planned around it), the
 * gradients of its inputs on a sharded mesh equal one device's.
 */
typedef ldt_tensor *(*op_build)(ldt_ctx *ctx, ldt_tensor **ps, int *np);

static ldt_tensor *o_mul(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_mul(P(c, ps, np, (ldt_shape){2, {5, 6}}), P(c, ps, np, (ldt_shape){1, {6}}));
}
static ldt_tensor *o_matmul(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_matmul(P(c, ps, np, (ldt_shape){3, {2, 5, 6}}), P(c, ps, np, (ldt_shape){2, {6, 3}}));
}
static ldt_tensor *o_linear(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_linear(P(c, ps, np, (ldt_shape){2, {5, 6}}), P(c, ps, np, (ldt_shape){2, {7, 6}}),
                      P(c, ps, np, (ldt_shape){1, {7}}));
}
static ldt_tensor *o_softmax(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_softmax(P(c, ps, np, (ldt_shape){2, {5, 6}}), 1); }
static ldt_tensor *o_norm(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_layer_norm(P(c, ps, np, (ldt_shape){2, {5, 6}}), 1, P(c, ps, np, (ldt_shape){1, {6}}),
                          P(c, ps, np, (ldt_shape){1, {6}}), 1e-5);
}
static ldt_tensor *o_sum(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_sum(P(c, ps, np, (ldt_shape){2, {5, 6}}), (int[]){0}, 1, 0); }
static ldt_tensor *o_amax(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_amax(P(c, ps, np, (ldt_shape){2, {5, 6}}), (int[]){1}, 1, 1); }
static ldt_tensor *o_ce(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_cross_entropy(P(c, ps, np, (ldt_shape){2, {5, 6}}), I(c, "t", (ldt_shape){1, {5}}, 6), -1);
}
static ldt_tensor *o_emb(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_embedding(P(c, ps, np, (ldt_shape){2, {7, 4}}), I(c, "t", (ldt_shape){2, {3, 5}}, 7));
}
static ldt_tensor *o_sdpa(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_scaled_dot_product_attention(P(c, ps, np, (ldt_shape){3, {3, 4, 2}}), P(c, ps, np, (ldt_shape){3, {3, 5, 2}}),
                                            P(c, ps, np, (ldt_shape){3, {3, 5, 3}}), 0, 0.2, 0);
}

#define S56 ((ldt_shape){2, {5, 6}})
static ldt_tensor *o_sub(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_sub(P(c, ps, np, S56), P(c, ps, np, (ldt_shape){1, {6}})); }
static ldt_tensor *o_div(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_div(P(c, ps, np, S56), Ppos(c, ps, np, S56)); }
static ldt_tensor *o_where(ldt_ctx *c, ldt_tensor **ps, int *np) {
    ldt_tensor *a = P(c, ps, np, S56), *b = P(c, ps, np, S56);
    return ldt_where(ldt_gt(a, b), a, b);
}
static ldt_tensor *o_exp(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_exp(P(c, ps, np, S56)); }
static ldt_tensor *o_log(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_log(Ppos(c, ps, np, S56)); }
static ldt_tensor *o_sqrt(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_sqrt(Ppos(c, ps, np, S56)); }
static ldt_tensor *o_pow(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_pow_scalar(Ppos(c, ps, np, S56), 2.5); }
static ldt_tensor *o_tanh(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_tanh(P(c, ps, np, S56)); }
static ldt_tensor *o_gelu(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_gelu(P(c, ps, np, S56), 0); }
static ldt_tensor *o_silu(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_silu(P(c, ps, np, S56)); }
static ldt_tensor *o_dropout(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_dropout(P(c, ps, np, S56), 0.3, 1); }
static ldt_tensor *o_mean(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_mean(P(c, ps, np, S56), (int[]){1}, 1, 0); }
static ldt_tensor *o_amin(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_amin(P(c, ps, np, S56), (int[]){0}, 1, 0); }
static ldt_tensor *o_log_softmax(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_log_softmax(P(c, ps, np, S56), 1); }
static ldt_tensor *o_rms(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_rms_norm(P(c, ps, np, S56), 1, P(c, ps, np, (ldt_shape){1, {6}}), 1e-6);
}
static ldt_tensor *o_reshape(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_reshape(P(c, ps, np, S56), &(ldt_shape){2, {3, 10}}); }
static ldt_tensor *o_permute(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_permute(P(c, ps, np, (ldt_shape){3, {2, 5, 6}}), (int[]){2, 0, 1}, 3);
}
static ldt_tensor *o_slice(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_slice(P(c, ps, np, S56), 1, 1, 6, 2); }
static ldt_tensor *o_select(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_select(P(c, ps, np, S56), 0, 2); }
static ldt_tensor *o_cat(ldt_ctx *c, ldt_tensor **ps, int *np) {
    ldt_tensor *xs[2];
    xs[0] = P(c, ps, np, S56);
    xs[1] = P(c, ps, np, (ldt_shape){2, {5, 2}});
    return ldt_cat(xs, 2, 1);
}
static ldt_tensor *o_expand(ldt_ctx *c, ldt_tensor **ps, int *np) { return ldt_expand(P(c, ps, np, (ldt_shape){2, {1, 6}}), &S56); }
static ldt_tensor *o_gather(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_gather(P(c, ps, np, S56), 1, I(c, "t", (ldt_shape){2, {5, 3}}, 6));
}
static ldt_tensor *o_index_select(ldt_ctx *c, ldt_tensor **ps, int *np) {
    return ldt_index_select(P(c, ps, np, S56), 0, I(c, "t", (ldt_shape){1, {4}}, 5));
}
static ldt_tensor *o_index_add(ldt_ctx *c, ldt_tensor **ps, int *np) {
    ldt_tensor *x = P(c, ps, np, S56), *src = P(c, ps, np, (ldt_shape){2, {3, 6}});
    return ldt_index_add(x, 0, I(c, "t", (ldt_shape){1, {3}}, 5), src);
}
static ldt_tensor *o_scatter_add(ldt_ctx *c, ldt_tensor **ps, int *np) {
    ldt_tensor *x = P(c, ps, np, S56), *src = P(c, ps, np, (ldt_shape){2, {5, 2}});
    return ldt_scatter_add(x, 1, I(c, "t", (ldt_shape){2, {5, 2}}, 6), src);
}

/* Builds the op, its loss and gradients; *op_id gets the op node's id; grads kept. */
static void op_grads(ldt_ctx *ctx, op_build b, ldt_tensor **gs, int *np, int64_t *op_id) {
    ldt_tensor *ps[MAXP], *y = b(ctx, ps, np);
    cr_assert(y != NULL, "%s", ldt_ctx_errmsg(ctx));
    *op_id = ldt_trace_nodes(ctx) - 1;
    cr_assert_eq(ldt_grad(loss_of(ctx, y), ps, *np, gs), LDT_OK, "%s", ldt_last_error());
}

Test(autodiff, every_forward_strategy_gives_one_device_gradients) {
    const op_build ops[] = {o_mul,      o_matmul,  o_linear,  o_softmax,       o_norm,    o_sum,
                            o_amax,     o_ce,      o_emb,     o_sdpa,          o_sub,     o_div,
                            o_where,    o_exp,     o_log,     o_sqrt,          o_pow,     o_tanh,
                            o_gelu,     o_silu,    o_dropout, o_mean,          o_amin,    o_log_softmax,
                            o_rms,      o_reshape, o_permute, o_slice,         o_select,  o_cat,
                            o_expand,   o_gather,  o_index_select, o_index_add, o_scatter_add};
    const char *meshes[] = {"2", "2x2", "3"};
    for (size_t b = 0; b < sizeof ops / sizeof ops[0]; b++) {
        ldt_ctx *one;
        ldt_tensor *gs[MAXP];
        double ref[MAXP][128];
        int64_t nb[MAXP], id;
        int np = 0;
        cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
        op_grads(one, ops[b], gs, &np, &id);
        for (int k = 0; k < np; k++) {
            ldt_shape s;
            ldt_tensor_shape(gs[k], &s);
            nb[k] = pc_nbytes(&s, LDT_F64);
            cr_assert_leq(nb[k], (int64_t)sizeof ref[k]);
            gs[k] = ldt_keep(gs[k]);
        }
        cr_assert_eq(ldt_sync(one), LDT_OK, "%s", ldt_ctx_errmsg(one));
        for (int k = 0; k < np; k++) cr_assert_eq(ldt_read(gs[k], ref[k], nb[k]), LDT_OK);
        ldt_ctx_destroy(one);
        for (int m = 0; m < 3; m++) {
            ldt_mesh *mesh;
            ldt_ctx *ctx;
            ldt_ctx_options co = {0};
            ldt_plan *plan;
            int32_t *forced;
            int nstrat;
            np = 0;
            cr_assert_eq(ldt_mesh_parse(meshes[m], LDT_DEVICE_CPU, &mesh), LDT_OK);
            co.mesh = mesh;
            cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
            op_grads(ctx, ops[b], gs, &np, &id);
            forced = malloc((size_t)ldt_trace_nodes(ctx) * sizeof *forced);
            for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) forced[i] = -1;
            cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &plan), LDT_OK, "%s", ldt_last_error());
            nstrat = ldt__plan_nstrategies(plan, id);
            ldt_plan_destroy(plan);
            cr_assert_gt(nstrat, 1);
            for (int s = 0; s < nstrat; s++) {
                double got[MAXP][128];
                void *dst[MAXP];
                forced[id] = s;
                for (int k = 0; k < np; k++) dst[k] = got[k];
                cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &plan), LDT_OK, "%s", ldt_last_error());
                cr_assert_eq(ldt_plan_run(plan, np, gs, dst, nb), LDT_OK, "op %zu on %s, strategy %d: %s", b,
                             meshes[m], s, ldt_last_error());
                for (int k = 0; k < np; k++)
                    cr_assert_eq(pc_compare(LDT_F64, got[k], ref[k], nb[k] / 8, 1e-12), -1,
                                 "op %zu on %s, strategy %d: the gradient of input %d differs", b, meshes[m], s, k);
                ldt_plan_destroy(plan);
            }
            free(forced);
            ldt_ctx_destroy(ctx);
            ldt_mesh_destroy(mesh);
        }
    }
}

/* Data-parallel gradient synchronisation: an MLP with its batch sharded over dp=2 and its
 * parameters replicated, compiled: the gradients' all_reduces are fused into buckets issued
 * as soon as their last gradient is ready, while the backward still has matmuls to run, and
 * the gradients equal one device's. */
static void dp_grads(const char *mesh_text, int64_t cap, double **out, int64_t *nb, int *np,
                     ldt_exec_stats *es) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("mlp");
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_tensor *ps[64], *g[64], *loss;
    ldt_placement s0 = ldt_shard(0), r = ldt_replicate();
    cfg.layers = 3;
    cfg.hidden = 8;
    cfg.batch = 512; /* activations outweigh the weights: their gradients are what is reduced */
    cfg.dtype = LDT_F64;
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(ctx, "mlp", &cfg, &m), LDT_OK);
    cr_assert_eq(ldt_model_init(m, 3), LDT_OK);
    for (int i = 0; i < ldt_model_ninputs(m); i++) {
        const char *name;
        ldt_tensor *t = ldt_model_input(m, i, &name);
        ldt_shape s;
        void *d;
        ldt_tensor_shape(t, &s);
        d = pc_data(name, &s, ldt_tensor_dtype(t), 7);
        cr_assert_eq(ldt_input_bind(t, d, pc_nbytes(&s, ldt_tensor_dtype(t))), LDT_OK);
        free(d);
        if (mesh) cr_assert_eq(ldt_pin(t, &s0, 1), LDT_OK);
    }
    loss = ldt_model_forward(m);
    *np = ldt_model_nparams(m);
    for (int i = 0; i < *np; i++) {
        ps[i] = ldt_model_param(m, i, NULL);
        if (mesh) cr_assert_eq(ldt_pin(ps[i], &r, 1), LDT_OK);
    }
    cr_assert_eq(ldt_grad(loss, ps, *np, g), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < *np; i++) {
        ldt_shape s;
        if (mesh) g[i] = ldt_redistribute_to(g[i], &r, 1); /* as a replicated update needs them */
        ldt_tensor_shape(g[i], &s);
        nb[i] = pc_nbytes(&s, LDT_F64);
        out[i] = malloc((size_t)nb[i]);
    }
    if (!mesh) {
        for (int i = 0; i < *np; i++) g[i] = ldt_keep(g[i]);
        cr_assert_eq(ldt_sync(ctx), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
        for (int i = 0; i < *np; i++) cr_assert_eq(ldt_read(g[i], out[i], nb[i]), LDT_OK);
    } else {
        ldt_compile_options o = {0};
        ldt_exec *ex;
        o.bucket_bytes = cap;
        cr_assert_eq(ldt_compile(ctx, g, *np, &o, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < *np; i++) cr_assert_eq(ldt_exec_read(ex, i, out[i], nb[i]), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, es), LDT_OK);
    }
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(autodiff, dp_gradient_buckets_start_during_the_backward) {
    double *ref[64], *got[64];
    int64_t nb[64];
    int np;
    ldt_exec_stats es;
    dp_grads(NULL, 0, ref, nb, &np, NULL);
    for (int cap = 0; cap < 2; cap++) {
        dp_grads("dp=2", cap ? 4000 : 0, got, nb, &np, &es); /* 4000 B: two or so gradients a bucket */
        for (int i = 0; i < np; i++) {
            cr_assert_eq(pc_compare(LDT_F64, got[i], ref[i], nb[i] / 8, 1e-12), -1, "parameter %d", i);
            free(got[i]);
        }
        cr_assert_geq(es.collectives_unfused, 3, "all_reduces of every layer's gradients before fusion: %lld for %d",
                      (long long)es.collectives_unfused, np);
        cr_assert_lt(es.collectives, es.collectives_unfused, "fused: %lld of %lld", (long long)es.collectives,
                     (long long)es.collectives_unfused);
        if (cap)
            cr_assert_geq(es.early_all_reduces, 1, "a bucket starts before the last backward matmul "
                          "(%lld calls)", (long long)es.collectives);
        cr_assert_eq(es.packed_all_reduces, 0);
    }
    for (int i = 0; i < np; i++) free(ref[i]);
}
