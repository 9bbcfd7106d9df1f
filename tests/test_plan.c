/* The planner: numeric identity of every elementwise and linalg strategy with one device,
 * on 1-D meshes of 2, 3, 4 ranks and a 2x2 mesh with uneven shapes. */
#include <criterion/criterion.h>

#include "tests/plan_check.h"

static const char *const k_meshes[] = {"2", "3", "4", "2x2"};

typedef struct bin_case {
    int op; /* 0 add, 1 sub, 2 mul, 3 div, 4 lt, 5 where */
    ldt_shape a, b;
    ldt_dtype dt;
} bin_case;

static ldt_tensor *build_binary(ldt_ctx *ctx, void *arg) {
    const bin_case *c = arg;
    ldt_tensor *a = pc_input(ctx, "a", c->a, c->dt, 0), *b = pc_input(ctx, "b", c->b, c->dt, 0);
    switch (c->op) {
    case 0: return ldt_add(a, b);
    case 1: return ldt_sub(a, b);
    case 2: return ldt_mul(a, b);
    case 3: return ldt_div(a, b);
    case 4: return ldt_lt(a, b);
    default: return ldt_where(ldt_lt(a, b), a, b);
    }
}

Test(plan, elementwise_binary_identity) {
    const ldt_shape shapes[][2] = {
        {{2, {7, 5}}, {2, {7, 5}}},
        {{2, {7, 5}}, {1, {5}}},       /* broadcast a row */
        {{3, {3, 1, 5}}, {2, {6, 5}}}, /* broadcast both ways */
    };
    for (int op = 0; op < 6; op++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (size_t m = 0; m < 4; m++) {
                bin_case c = {op, shapes[s][0], shapes[s][1], LDT_F32};
                int n = pc_check_op(k_meshes[m], build_binary, &c, 0);
                cr_assert_gt(n, 1, "op %d: only %d strategies", op, n);
            }
}

typedef struct un_case {
    int op; /* 0 neg, 1 exp, 2 mul_scalar, 3 gelu, 4 cast f64, 5 relu */
    ldt_shape s;
    ldt_dtype dt;
} un_case;

static ldt_tensor *build_unary(ldt_ctx *ctx, void *arg) {
    const un_case *c = arg;
    ldt_tensor *x = pc_input(ctx, "x", c->s, c->dt, 0);
    switch (c->op) {
    case 0: return ldt_neg(x);
    case 1: return ldt_exp(x);
    case 2: return ldt_mul_scalar(x, 0.37);
    case 3: return ldt_gelu(x, 1);
    case 4: return ldt_cast(x, LDT_F64);
    default: return ldt_relu(x);
    }
}

Test(plan, elementwise_unary_identity) {
    for (int op = 0; op < 6; op++)
        for (size_t m = 0; m < 4; m++) {
            un_case c = {op, {3, {5, 3, 7}}, op == 3 ? LDT_BF16 : LDT_F32};
            cr_assert_gt(pc_check_op(k_meshes[m], build_unary, &c, 0), 1);
        }
}

typedef struct mm_case {
    int linear, bias;
    ldt_shape a, b;
    ldt_dtype dt;
} mm_case;

static ldt_tensor *build_mm(ldt_ctx *ctx, void *arg) {
    const mm_case *c = arg;
    ldt_tensor *a = pc_input(ctx, "a", c->a, c->dt, 0), *b = pc_param(ctx, "w", c->b, c->dt);
    if (!c->linear) return ldt_matmul(a, b);
    return ldt_linear(a, b, c->bias ? pc_param(ctx, "bias", (ldt_shape){1, {c->b.dims[0]}}, c->dt) : NULL);
}

/* Reductions inside GEMM reorder with shapes: f32 within 1e-5, f64 within 1e-12 of the
 * magnitudes (inputs in [-1, 1), so max |ref| + 1 bounds the terms' sum up to K). */
Test(plan, matmul_and_linear_identity) {
    const mm_case cases[] = {
        {0, 0, {2, {7, 6}}, {2, {6, 5}}, LDT_F32},
        {0, 0, {3, {3, 7, 6}}, {2, {6, 5}}, LDT_F32},       /* batched x 2-D */
        {0, 0, {3, {3, 7, 6}}, {3, {3, 6, 5}}, LDT_F64},    /* batched x batched */
        {0, 0, {1, {6}}, {2, {6, 5}}, LDT_F32},             /* vector x matrix */
        {0, 0, {2, {7, 6}}, {1, {6}}, LDT_F32},             /* matrix x vector */
        {1, 0, {2, {7, 6}}, {2, {5, 6}}, LDT_F32},
        {1, 1, {3, {3, 7, 6}}, {2, {5, 6}}, LDT_F32},
        {1, 1, {2, {7, 6}}, {2, {5, 6}}, LDT_F64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t m = 0; m < 4; m++) {
            double tol = cases[i].dt == LDT_F64 ? 1e-12 : 1e-5;
            cr_assert_gt(pc_check_op(k_meshes[m], build_mm, (void *)&cases[i], tol), 1);
        }
}

/* ---------------------------------------------------------------------------------------
 * Random DAGs of square [n, n] tensors: adds, muls, matmuls, gelus and transposes over a few
 * pinned leaves, each op reading random earlier values (fan-out makes them DAGs, not trees).
 */
typedef struct dag_case {
    uint64_t seed;
    int nops;
    const char *mesh;
} dag_case;

static ldt_tensor *build_dag(ldt_ctx *ctx, void *arg) {
    const dag_case *c = arg;
    uint64_t st = c->seed;
    ldt_tensor *v[64];
    int n = 0, nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
    for (int i = 0; i < 4; i++) {
        char name[16];
        ldt_placement pl[LDT_MAX_DIMS];
        snprintf(name, sizeof name, "x%d", i);
        v[n] = pc_input(ctx, name, (ldt_shape){2, {6, 6}}, LDT_F64, 0);
        /* as many draws on every mesh, so the 1-rank reference records the same DAG */
        for (int d = 0; d < LDT_MAX_DIMS; d++) {
            int k = (int)ldt_test_range(&st, 0, 3);
            pl[d] = k == 0 ? ldt_shard(0) : k == 1 ? ldt_shard(1) : ldt_replicate();
        }
        if (ldt_test_range(&st, 0, 2) && ldt_mesh_nranks(ldt_ctx_mesh(ctx)) > 1)
            cr_assert_eq(ldt_pin(v[n], pl, nd), LDT_OK);
        n++;
    }
    for (int i = 0; i < c->nops && n < 64; i++) {
        ldt_tensor *a = v[ldt_test_range(&st, 0, n - 1)], *b = v[ldt_test_range(&st, 0, n - 1)];
        switch (ldt_test_range(&st, 0, 4)) {
        case 0: v[n++] = ldt_add(a, b); break;
        case 1: v[n++] = ldt_mul(a, b); break;
        case 2: v[n++] = ldt_matmul(a, b); break;
        case 3: v[n++] = ldt_gelu(a, 0); break;
        default: v[n++] = ldt_transpose(a, 0, 1); break;
        }
    }
    /* one sink that reads every value, so the whole DAG is live */
    for (int i = n - 2; i >= 0; i--) v[n - 1] = ldt_add(v[n - 1], v[i]);
    return v[n - 1];
}

/* The plans the planner picks for random DAGs (pins, fan-out, matmuls) run to the
 * single-device values. */
Test(plan, random_dags_equal_one_device) {
    const char *meshes[] = {"4", "2x2", "3"};
    for (int i = 0; i < ldt_test_cases(24); i++) {
        dag_case c = {(uint64_t)i * 104729u + 3, 4 + i % 12, meshes[i % 3]};
        ldt_ctx *one, *ctx;
        ldt_mesh *mesh;
        ldt_ctx_options co = {0};
        ldt_plan *plan;
        ldt_tensor *out;
        double ref[36], got[36];
        void *dst = got;
        int64_t nb = sizeof got;
        cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
        out = build_dag(one, &c);
        cr_assert_eq(ldt_read(out, ref, sizeof ref), LDT_OK, "%s", ldt_ctx_errmsg(one));
        ldt_ctx_destroy(one);
        cr_assert_eq(ldt_mesh_parse(c.mesh, LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        out = build_dag(ctx, &c);
        cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_plan_run(plan, 1, &out, &dst, &nb), LDT_OK, "%s", ldt_last_error());
        if (pc_compare(LDT_F64, got, ref, 36, 1e-12) != -1 && getenv("LDT_TEST_DEBUG")) {
            ldt_plan_write_json(plan, stderr);
            for (int r = 0; r < 4; r++) ldt_plan_write_program(plan, r, stderr);
        }
        cr_assert_eq(pc_compare(LDT_F64, got, ref, 36, 1e-12), -1, "case %d on %s", i, c.mesh);
        ldt_plan_destroy(plan);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}

/* Bad input: every public planner call reports it with a message naming what was wrong. */
Test(plan, bad_input_is_reported) {
    ldt_mesh *mesh, *meta;
    ldt_ctx *ctx, *mctx;
    ldt_ctx_options co = {0};
    ldt_plan *plan = NULL;
    ldt_tensor *x, *y, *z;
    ldt_placement pl[2];
    float buf[35];
    void *dst = buf;
    int64_t nb = sizeof buf, small = 4;
    int id = 0;
    cr_assert_eq(ldt_plan_create(NULL, NULL, &plan), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    x = pc_input(ctx, "x", (ldt_shape){2, {7, 5}}, LDT_F32, 0);
    y = ldt_exp(x);
    /* a pin no strategy of the op can give: exp of [7,5] cannot be Partial(max) */
    pl[0] = ldt_partial(LDT_REDUCE_MAX);
    pl[1] = ldt_replicate();
    z = ldt_tanh(y);
    cr_assert_eq(ldt_pin(z, pl, 2), LDT_OK);
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "tanh") && strstr(ldt_last_error(), "Pmax"), "%s",
              ldt_last_error());
    ldt_trace_discard(ctx);
    /* a bad cost model */
    {
        ldt_cost_model cm;
        ldt_plan_options po = {0};
        cr_assert_eq(ldt_cost_model_preset("uniform", &cm), LDT_OK);
        cm.links[0].bandwidth_Bps = -1;
        po.cost = &cm;
        y = ldt_exp(x);
        cr_assert_eq(ldt_plan_create(ctx, &po, &plan), LDT_ERR_INVALID_ARGUMENT);
    }
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK);
    /* wrong sizes, NULLs, and tensors that are not in the planned trace */
    cr_assert_eq(ldt_plan_run(plan, 1, &y, &dst, &small), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "4 bytes given"), "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_run(plan, 1, NULL, &dst, &nb), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_placements(plan, y, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_write_program(plan, 9, stdout), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_count(plan, (ldt_collective)99, -1, &nb), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_run(plan, 1, &y, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    ldt_plan_destroy(plan);
    ldt_sync(ctx); /* y's trace ends: a plan of the new trace does not know it */
    z = ldt_exp(x);
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK);
    cr_assert_eq(ldt_plan_placements(plan, y, pl, 2), LDT_ERR_INVALID_USAGE);
    cr_assert_eq(ldt_plan_placements(plan, z, pl, 2), LDT_OK);
    ldt_plan_destroy(plan);
    /* custom strategies only for this context's custom ops */
    cr_assert_eq(ldt_custom_op_set_strategy(ctx, 3, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_custom_op_set_strategy(ctx, LDT_OP_COUNT + id, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "not a custom op"), "%s", ldt_last_error());
    /* a meta mesh plans but never runs */
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_META, &meta), LDT_OK);
    co.mesh = meta;
    cr_assert_eq(ldt_ctx_create(&co, &mctx), LDT_OK);
    x = ldt_input(mctx, "x", &(ldt_shape){2, {7, 5}}, LDT_F32);
    y = ldt_exp(x);
    cr_assert_eq(ldt_plan_create(mctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_run(plan, 1, &y, &dst, &nb), LDT_ERR_INVALID_USAGE);
    cr_assert(strstr(ldt_last_error(), "meta"), "%s", ldt_last_error());
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(mctx);
    ldt_mesh_destroy(meta);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* A node with more inputs than the planner's strategies take (17 joined by one cat) is
 * refused with a message, not planned past the end of its input arrays. */
Test(plan, a_node_with_too_many_inputs_is_refused) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_plan *plan = NULL;
    ldt_tensor *xs[17], *y;
    char name[16];
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    for (int i = 0; i < 17; i++) {
        snprintf(name, sizeof name, "x%d", i);
        xs[i] = pc_input(ctx, name, (ldt_shape){1, {2}}, LDT_F32, 0);
    }
    y = ldt_cat(xs, 17, 0);
    cr_assert(y != NULL, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "17 inputs") && strstr(ldt_last_error(), "at most 16"), "%s",
              ldt_last_error());
    /* 16 still plan */
    ldt_ctx_destroy(ctx);
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "x%d", i);
        xs[i] = pc_input(ctx, name, (ldt_shape){1, {2}}, LDT_F32, 0);
    }
    cr_assert(ldt_cat(xs, 16, 0) != NULL);
    cr_assert_eq(ldt_plan_create(ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    ldt_plan_destroy(plan);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
