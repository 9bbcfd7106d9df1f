/* Init recipes: recorded on parameters, computed at materialization (exec). Random kinds take
 * their place on the context's stream now, in recipe order, as a random op would. */
#include <math.h>

#include "core/error.h"
#include "trace/trace.h"

static const char *const k_names[LDT_INIT_KIND_COUNT] = {
    "zeros", "ones", "full", "arange", "uniform", "normal", "trunc_normal", "kaiming_uniform",
    "kaiming_normal", "xavier_uniform", "xavier_normal", "copy"};

static int is_random(ldt_init_kind k) {
    return k == LDT_INIT_UNIFORM || k == LDT_INIT_NORMAL || k == LDT_INIT_TRUNC_NORMAL ||
           (k >= LDT_INIT_KAIMING_UNIFORM && k <= LDT_INIT_XAVIER_NORMAL);
}

static ldt_status check(const ldt_tensor *t, const ldt_init *in) {
    const char *name = LDT__NAME(t) ? LDT__NAME(t) : "";
    const char *kind = (unsigned)in->kind < LDT_INIT_KIND_COUNT ? k_names[in->kind] : "?";
    if ((unsigned)in->kind >= LDT_INIT_KIND_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s': kind %d, expected 0..%d", name,
                 (int)in->kind, LDT_INIT_KIND_COUNT - 1);
    if (!isfinite(in->a) || !isfinite(in->b))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' %s: parameters %g, %g must be finite",
                 name, kind, in->a, in->b);
    if (in->kind == LDT_INIT_UNIFORM && !(in->a < in->b))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' uniform: [%g, %g) is empty; expected a < b",
                 name, in->a, in->b);
    if ((in->kind == LDT_INIT_NORMAL || in->kind == LDT_INIT_TRUNC_NORMAL) && !(in->b > 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' %s: std %g, expected > 0", name, kind, in->b);
    if (in->kind == LDT_INIT_TRUNC_NORMAL && !(in->lo < in->hi))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' trunc_normal: bounds [%g, %g], expected lo < hi",
                 name, in->lo, in->hi);
    if (in->kind >= LDT_INIT_KAIMING_UNIFORM && in->kind <= LDT_INIT_XAVIER_NORMAL) {
        if (t->shape->ndim < 2)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' %s: fans need at least 2 dims, the "
                     "tensor has %d", name, kind, t->shape->ndim);
        for (int d = 0; d < t->shape->ndim; d++)
            if (t->shape->dims[d] == 0)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' %s: a fan of 0 (dim %d is 0)", name,
                         kind, d);
    }
    if (in->kind == LDT_INIT_COPY && !in->data && ldt__nbytes(t))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init '%s' copy: data is NULL", name);
    return LDT_OK;
}

ldt_status ldt_param_init(ldt_tensor *t, const ldt_init *in) {
    ldt_ctx *ctx;
    int64_t numel = 1;
    if (!t || !in) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init: tensor and init must not be NULL");
    if (t->kind != LDT__PERSISTENT || t->op != LDT_OP_PARAM)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_init: the tensor is a %s, expected a param",
                 ldt__op_name(t->ctx, t->op));
    LDT_CHECK(check(t, in));
    ctx = t->ctx;
    for (int d = 0; d < t->shape->ndim; d++) numel *= t->shape->dims[d];
    LDT__P(t)->init = *in;
    LDT__P(t)->has_init = 1;
    LDT__P(t)->init_seed = ctx->seed;
    LDT__P(t)->init_offset = ctx->rng_offset;
    if (is_random(in->kind)) ctx->rng_offset += (uint64_t)((numel + 3) / 4);
    return LDT_OK;
}

ldt_status ldt_param_recipe(const ldt_tensor *t, ldt_init *in, uint64_t *seed, uint64_t *offset) {
    if (!t || !in) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "param_recipe: NULL argument");
    if (t->kind != LDT__PERSISTENT || t->op != LDT_OP_PARAM || !LDT__P(t)->has_init)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "param_recipe: the tensor has no init recipe");
    *in = LDT__P(t)->init;
    if (seed) *seed = LDT__P(t)->init_seed;
    if (offset) *offset = LDT__P(t)->init_offset;
    return LDT_OK;
}

int ldt_ctx_is_meta(const ldt_ctx *ctx) {
    return ctx && ldt_mesh_device(ctx->mesh) == LDT_DEVICE_META;
}
