/* The memory budget as a constraint of the search (docs/planner.md, "Memory budget"):
 * ldt_plan_options.memory_weight and ldt_plan_create_budget on a small graph whose resident
 * bytes are known by hand (a [64,64] f32 weight: 16384 bytes replicated, 8192 split on tp=2),
 * and their refusals. The GPT-2 case is in test_meta.c (cli_plan_budget_gpt2_tp4). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "test_util.h"

typedef struct graph {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_tensor *w, *w2;
} graph;

/* y = relu(x @ w) @ w2, x [8,64] an input split on the batch, w and w2 [64,64] parameters, on a
 * meta tp=2 mesh: without a weight the cheapest plan keeps w and w2 replicated (no move). */
static void build(graph *g) {
    ldt_ctx_options co = {0};
    ldt_shape xs = {2, {8, 64}}, ws = {2, {64, 64}};
    ldt_tensor *x, *y;
    cr_assert_eq(ldt_mesh_parse("tp=2", LDT_DEVICE_META, &g->mesh), LDT_OK);
    co.mesh = g->mesh;
    cr_assert_eq(ldt_ctx_create(&co, &g->ctx), LDT_OK);
    x = ldt_input(g->ctx, "x", &xs, LDT_F32);
    cr_assert_eq(ldt_pin(x, (ldt_placement[]){ldt_shard(0)}, 1), LDT_OK); /* batch split */
    g->w = ldt_param(g->ctx, "w", &ws, LDT_F32);
    g->w2 = ldt_param(g->ctx, "w2", &ws, LDT_F32);
    y = ldt_matmul(ldt_relu(ldt_matmul(x, g->w)), g->w2);
    cr_assert(y != NULL, "%s", ldt_ctx_errmsg(g->ctx));
}

static void drop(graph *g) {
    ldt_ctx_destroy(g->ctx);
    ldt_mesh_destroy(g->mesh);
}

/* The bytes of t's shard on rank 0 under the plan (by the layout, not the planner's figure). */
static int64_t shard_bytes(ldt_plan *plan, const ldt_mesh *mesh, ldt_tensor *t) {
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_shape s;
    ldt_spec spec;
    ldt_region reg;
    ldt_tensor_shape(t, &s);
    cr_assert_eq(ldt_plan_placements(plan, t, pl, LDT_MAX_DIMS), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_spec_init(&spec, mesh, &s, pl, ldt_mesh_ndim(mesh), ldt_tensor_dtype(t)), LDT_OK);
    cr_assert_eq(ldt_layout(&spec, 0, &reg), LDT_OK);
    return reg.numel * 4;
}

static int calls;

/* The figure the tests bound: the two weights' shards on a rank. */
static ldt_status weights_peak(ldt_plan *plan, void *user, int64_t *peak) {
    graph *g = user;
    calls++;
    *peak = shard_bytes(plan, g->mesh, g->w) + shard_bytes(plan, g->mesh, g->w2);
    return LDT_OK;
}

static ldt_status failing_peak(ldt_plan *plan, void *user, int64_t *peak) {
    (void)plan, (void)user, (void)peak;
    return ldt_set_error(LDT_ERR_INTERNAL, "the test's peak function fails");
}

static ldt_status negative_peak(ldt_plan *plan, void *user, int64_t *peak) {
    (void)plan, (void)user;
    *peak = -5;
    return LDT_OK;
}

Test(plan_budget, weight_shards_weights_and_costs_stay_seconds) {
    graph g;
    ldt_plan *free_, *heavy, *fixed;
    ldt_plan_options po = {0};
    int64_t n;
    int32_t *choice;
    build(&g);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &free_), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(shard_bytes(free_, g.mesh, g.w) + shard_bytes(free_, g.mesh, g.w2), 2 * 16384,
                 "without a weight both weights stay replicated");
    po.memory_weight = 1; /* a second per byte: memory dominates */
    cr_assert_eq(ldt_plan_create(g.ctx, &po, &heavy), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(shard_bytes(heavy, g.mesh, g.w), 8192);
    cr_assert_eq(shard_bytes(heavy, g.mesh, g.w2), 8192);
    /* the plan's cost is its seconds: the same choice fixed and planned without a weight */
    n = ldt_trace_nodes(g.ctx);
    choice = malloc((size_t)n * sizeof *choice);
    cr_assert(choice);
    cr_assert_eq(ldt_plan_choice(heavy, choice, n), LDT_OK);
    cr_assert_eq(ldt_plan_create_fixed(g.ctx, NULL, choice, n, &fixed), LDT_OK, "%s", ldt_last_error());
    cr_assert_float_eq(ldt_plan_cost(heavy), ldt_plan_cost(fixed), 1e-12 * (1 + ldt_plan_cost(fixed)),
                       "weighted plan %.9g s, the same choice unweighted %.9g s", ldt_plan_cost(heavy),
                       ldt_plan_cost(fixed));
    cr_assert_geq(ldt_plan_cost(heavy), ldt_plan_cost(free_) * (1 - 1e-12), "memory is bought with time");
    free(choice);
    ldt_plan_destroy(fixed);
    ldt_plan_destroy(heavy);
    ldt_plan_destroy(free_);
    drop(&g);
}

Test(plan_budget, search_fits_or_returns_the_least_peak) {
    graph g;
    ldt_plan *plan;
    ldt_plan_budget b = {0};
    ldt_plan_budget_info info;
    build(&g);
    b.peak = weights_peak;
    b.user = &g;
    /* a budget that does not bind: one plan, no weight */
    b.budget = 2 * 16384;
    calls = 0;
    cr_assert_eq(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), LDT_OK, "%s", ldt_last_error());
    cr_assert(info.fits);
    cr_assert_eq(info.plans, 1);
    cr_assert_eq(calls, 1);
    cr_assert_eq(info.memory_weight, 0);
    cr_assert_eq(info.peak, 2 * 16384);
    cr_assert_eq(info.peak_free, 2 * 16384);
    ldt_plan_destroy(plan);
    /* room for one replicated weight and one split: the search finds a weight that splits */
    b.budget = 16384 + 8192;
    calls = 0;
    cr_assert_eq(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), LDT_OK, "%s", ldt_last_error());
    cr_assert(info.fits);
    cr_assert_gt(info.memory_weight, 0);
    cr_assert_eq(info.plans, LDT_PLAN_BUDGET_PLANS);
    cr_assert_eq(calls, info.plans);
    cr_assert_eq(info.peak_free, 2 * 16384);
    cr_assert_eq(info.peak, shard_bytes(plan, g.mesh, g.w) + shard_bytes(plan, g.mesh, g.w2));
    cr_assert_leq(info.peak, b.budget);
    cr_assert_geq(ldt_plan_cost(plan), info.cost_free * (1 - 1e-12));
    ldt_plan_destroy(plan);
    /* below what any plan keeps (both split: 16384): the least peak, not fitting */
    b.budget = 16383;
    b.max_plans = 6;
    cr_assert_eq(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), LDT_OK, "%s", ldt_last_error());
    cr_assert(!info.fits);
    cr_assert_eq(info.plans, 6);
    cr_assert_eq(info.peak, 16384);
    cr_assert_eq(shard_bytes(plan, g.mesh, g.w) + shard_bytes(plan, g.mesh, g.w2), 16384);
    ldt_plan_destroy(plan);
    /* without a limit of plans: the unweighted one, then weights 16^0 .. 16^5 times the scale
     * (higher ones plan alike) */
    b.max_plans = 0;
    cr_assert_eq(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), LDT_OK, "%s", ldt_last_error());
    cr_assert(!info.fits);
    cr_assert_eq(info.plans, 7);
    cr_assert_eq(info.peak, 16384);
    ldt_plan_destroy(plan);
    drop(&g);
}

static void expect_refused(ldt_status st, const char *what) {
    cr_assert_neq(st, LDT_OK, "expected a refusal naming '%s'", what);
    cr_assert(strstr(ldt_last_error(), what), "'%s' not in: %s", what, ldt_last_error());
}

Test(plan_budget, refusals) {
    graph g;
    ldt_plan *plan = (ldt_plan *)&g;
    ldt_plan_budget b = {0};
    ldt_plan_budget_info info;
    ldt_plan_options po = {0};
    build(&g);
    b.budget = 1000;
    b.peak = weights_peak;
    b.user = &g;
    expect_refused(ldt_plan_create_budget(NULL, NULL, &b, &plan, &info), "must not be NULL");
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, NULL, &plan, &info), "must not be NULL");
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, NULL, &info), "must not be NULL");
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, NULL), "must not be NULL");
    b.budget = 0;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "expected > 0");
    cr_assert_null(plan);
    b.budget = 1000;
    b.peak = NULL;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "no peak function");
    b.peak = weights_peak;
    b.max_plans = 1;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "max_plans 1, expected 2 to 64");
    b.max_plans = 65;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "max_plans 65");
    b.max_plans = 0;
    b.peak = failing_peak;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "the test's peak function fails");
    cr_assert_null(plan);
    b.peak = negative_peak;
    expect_refused(ldt_plan_create_budget(g.ctx, NULL, &b, &plan, &info), "expected >= 0");
    po.memory_weight = -1;
    expect_refused(ldt_plan_create(g.ctx, &po, &plan), "memory_weight -1");
    po.memory_weight = NAN;
    expect_refused(ldt_plan_create(g.ctx, &po, &plan), "expected a finite number of seconds per byte");
    po.memory_weight = INFINITY;
    expect_refused(ldt_plan_create(g.ctx, &po, &plan), "memory_weight inf");
    drop(&g);
}
