/* Meta meshes: tensors hold no data, parameters take init recipes drawing the stream in
 * order, planning reports per-rank parameter memory; bad input is reported. */
#include <criterion/criterion.h>
#include <string.h>

#include "ldt/ldt.h"

static ldt_ctx *meta_ctx(const char *mesh_text, ldt_mesh **mesh) {
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_META, mesh), LDT_OK);
    co.mesh = *mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    return ctx;
}

Test(meta, tensors_hold_no_data_and_say_so) {
    ldt_mesh *mesh;
    ldt_ctx *ctx = meta_ctx("2x2", &mesh);
    ldt_shape s = {2, {1 << 20, 1 << 20}}; /* 4 TiB of f32: fine, nothing is allocated */
    ldt_tensor *w = ldt_param(ctx, "w", &s, LDT_F32), *x;
    float v[4] = {0};
    cr_assert(w != NULL, "%s", ldt_ctx_errmsg(ctx));
    cr_assert(ldt_ctx_is_meta(ctx));
    cr_assert_eq(ldt_param_set(w, v, 16), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "meta") && strstr(ldt_last_error(), "'w'"), "%s", ldt_last_error());
    x = ldt_param(ctx, "x", &(ldt_shape){1, {4}}, LDT_F32);
    cr_assert_eq(ldt_read(x, v, sizeof v), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "meta tensor"), "%s", ldt_last_error());
    cr_assert(ldt_exp(x) != NULL);
    cr_assert_eq(ldt_sync(ctx), LDT_ERR_INVALID_USAGE, "nothing runs on a meta mesh");
    cr_assert(strstr(ldt_last_error(), "meta"), "%s", ldt_last_error());
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(meta, recipes_take_their_stream_positions_in_order) {
    ldt_mesh *mesh;
    ldt_ctx *ctx = meta_ctx("4", &mesh);
    ldt_tensor *a = ldt_param(ctx, "a", &(ldt_shape){2, {5, 7}}, LDT_F32);
    ldt_tensor *b = ldt_param(ctx, "b", &(ldt_shape){1, {9}}, LDT_F32);
    ldt_tensor *c = ldt_param(ctx, "c", &(ldt_shape){2, {3, 3}}, LDT_F32);
    ldt_init in = {0}, got;
    uint64_t seed, off;
    cr_assert_eq(ldt_ctx_set_seed(ctx, 42, 10), LDT_OK);
    in.kind = LDT_INIT_NORMAL;
    in.b = 0.02;
    cr_assert_eq(ldt_param_init(a, &in), LDT_OK);
    in.kind = LDT_INIT_ZEROS; /* not random: takes no stream */
    cr_assert_eq(ldt_param_init(b, &in), LDT_OK);
    in.kind = LDT_INIT_KAIMING_UNIFORM;
    cr_assert_eq(ldt_param_init(c, &in), LDT_OK);
    cr_assert_eq(ldt_param_recipe(a, &got, &seed, &off), LDT_OK);
    cr_assert(got.kind == LDT_INIT_NORMAL && seed == 42 && off == 10);
    cr_assert_eq(ldt_param_recipe(c, &got, &seed, &off), LDT_OK);
    cr_assert_eq(off, 10 + 9, "a's 35 elements take ceil(35/4) = 9 blocks");
    cr_assert_eq(ldt_ctx_rng_offset(ctx), 10 + 9 + 3);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

Test(meta, bad_recipes_are_refused) {
    ldt_mesh *mesh;
    ldt_ctx *ctx = meta_ctx("2", &mesh);
    ldt_tensor *v = ldt_param(ctx, "v", &(ldt_shape){1, {8}}, LDT_F32);
    ldt_tensor *x = ldt_input(ctx, "x", &(ldt_shape){1, {8}}, LDT_F32);
    ldt_init in = {0};
    ldt_init got;
    in.kind = LDT_INIT_NORMAL; /* std 0 */
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "std"), "%s", ldt_last_error());
    in.kind = LDT_INIT_UNIFORM;
    in.a = 1;
    in.b = 1;
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    in.kind = LDT_INIT_KAIMING_NORMAL; /* a 1-dim tensor has no fans */
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "fans"), "%s", ldt_last_error());
    in.kind = LDT_INIT_TRUNC_NORMAL;
    in.b = 1;
    in.lo = 2;
    in.hi = -2;
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    in.kind = LDT_INIT_COPY;
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    in.kind = (ldt_init_kind)99;
    cr_assert_eq(ldt_param_init(v, &in), LDT_ERR_INVALID_ARGUMENT);
    in.kind = LDT_INIT_ONES;
    cr_assert_eq(ldt_param_init(x, &in), LDT_ERR_INVALID_ARGUMENT, "inputs take no recipe");
    cr_assert_eq(ldt_param_recipe(v, &got, NULL, NULL), LDT_ERR_INVALID_USAGE, "none was accepted");
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* GPT-3 175B described, initialised (recipes) and planned on a dp=8,tp=8 meta mesh: the
 * parameter count by the formula, and Megatron's per-rank share: the tensor-parallel weights
 * an eighth each, the rest whole on every rank. */
Test(meta, gpt175b_plans_on_meta) {
    ldt_mesh *mesh;
    ldt_ctx *ctx = meta_ctx("dp=8,tp=8", &mesh);
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_model *m;
    ldt_plan *plan;
    ldt_plan_memory mem;
    int64_t H = 12288, V = 50257, S = 2048, L = 96, count;
    cfg.layers = L;
    cfg.hidden = H;
    cfg.heads = 96;
    cfg.vocab = V;
    cfg.seq = S;
    cfg.batch = 8;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &cfg, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(m, 1), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_pin(m, "megatron"), LDT_OK);
    cr_assert(ldt_model_forward(m) != NULL, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_memory_get(plan, &mem), LDT_OK);
    count = V * H + S * H + L * (12 * H * H + 13 * H) + 2 * H;
    cr_assert_eq(mem.params, count);
    cr_assert_eq(mem.param_bytes, 4 * count);
    /* pinned on tp: wte, the qkv/proj/fc weights and the qkv and fc biases, an eighth each;
     * the rest (wpe, norms, projection biases) is the planner's choice: at most whole */
    {
        int64_t sharded = V * H + L * (12 * H * H + 3 * H + 4 * H), whole = count - sharded;
        cr_assert_leq(mem.per_rank_param_elems_max, sharded / 8 + whole + 8);
        cr_assert_geq(mem.per_rank_param_elems_max, sharded / 8);
        cr_assert_eq(mem.per_rank_param_bytes_max, 4 * mem.per_rank_param_elems_max);
    }
    ldt_plan_destroy(plan);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
