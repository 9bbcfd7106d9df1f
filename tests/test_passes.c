/* User graph passes and bypass: passes run in registration order at every plan; a pre-plan
 * pin pass changes the chosen placements; sequence-parallel LayerNorm on a GPT equals one
 * device; post-plan changes are validated and invalid ones rejected naming pass, node and op;
 * bypassed ops keep their fixed spec and equal one device; bad input to every new function. */
#include <criterion/criterion.h>

#include "ldt/models.h"
#include "tests/plan_check.h"

/* ---------------------------------------------------------------------------------------
 * A small graph: loss = sum(relu(x @ w) * 2), x [6,8], w [8,4]; *h is the matmul.
 */
typedef struct small {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_tensor *h, *loss;
} small;

static void small_build(small *g) {
    ldt_tensor *x = pc_input(g->ctx, "x", ldt_test_shape(2, 6, 8), LDT_F32, 0);
    ldt_tensor *w = pc_param(g->ctx, "w", ldt_test_shape(2, 8, 4), LDT_F32);
    g->h = ldt_matmul(x, w);
    g->loss = ldt_sum(ldt_mul_scalar(ldt_relu(g->h), 2), NULL, 0, 0);
    cr_assert(g->loss != NULL, "%s", ldt_ctx_errmsg(g->ctx));
}

static void small_open(small *g, const char *mesh_text) {
    ldt_ctx_options co = {0};
    memset(g, 0, sizeof *g);
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &g->mesh), LDT_OK);
    co.mesh = g->mesh;
    cr_assert_eq(ldt_ctx_create(&co, &g->ctx), LDT_OK);
}

static void small_close(small *g) {
    ldt_ctx_destroy(g->ctx);
    ldt_mesh_destroy(g->mesh);
}

static float small_reference(void) {
    small g;
    float l;
    small_open(&g, NULL);
    small_build(&g);
    cr_assert_eq(ldt_read(g.loss, &l, sizeof l), LDT_OK, "%s", ldt_ctx_errmsg(g.ctx));
    small_close(&g);
    return l;
}

static float run_plan(ldt_plan *plan, ldt_tensor *out) {
    float l = 0;
    void *dst = &l;
    int64_t nb = sizeof l;
    cr_assert_eq(ldt_plan_run(plan, 1, &out, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    return l;
}

static void assert_close(float got, float ref, const char *what) {
    cr_assert(fabsf(got - ref) <= 1e-5f * (1 + fabsf(ref)), "%s: %.9g, one device %.9g", what, got, ref);
}

static void assert_pl(const ldt_plan *plan, const ldt_tensor *t, const char *want) {
    ldt_placement pl[LDT_MAX_DIMS];
    char got[128];
    cr_assert_eq(ldt_plan_placements(plan, t, pl, LDT_MAX_DIMS), LDT_OK, "%s", ldt_last_error());
    ldt_placements_format(pl, ldt_mesh_ndim(ldt_ctx_mesh(ldt_tensor_ctx(t))), got, sizeof got);
    cr_assert_str_eq(got, want, "placements %s, expected %s", got, want);
}

static void assert_msg(const char *needle) {
    cr_assert(strstr(ldt_last_error(), needle) != NULL, "message \"%s\" does not name \"%s\"",
              ldt_last_error(), needle);
}

/* ---------------------------------------------------------------------------------------
 * Order.
 */
typedef struct log_user {
    char *log;
    char tag;
} log_user;

static ldt_status log_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    log_user *u = user;
    size_t n = strlen(u->log);
    (void)ctx;
    u->log[n] = u->tag;
    u->log[n + 1] = plan ? '+' : '-'; /* post-plan passes get the plan, pre-plan ones none */
    u->log[n + 2] = '\0';
    return LDT_OK;
}

Test(passes, run_in_registration_order_at_every_plan) {
    small g;
    char log[64] = "";
    log_user a = {log, 'A'}, b = {log, 'B'}, c = {log, 'C'}, d = {log, 'D'};
    ldt_plan *plan;
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "a", log_pass, &a), LDT_OK);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "b", log_pass, &b), LDT_OK);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "c", log_pass, &c), LDT_OK);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "d", log_pass, &d), LDT_OK);
    cr_assert_eq(ldt_pass_count(g.ctx), 4);
    small_build(&g);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
        ldt_plan_destroy(plan);
    }
    cr_assert_str_eq(log, "A-C-B+D+A-C-B+D+");
    /* eager steps plan too: they run the passes */
    log[0] = '\0';
    {
        float l;
        void *dst = &l;
        int64_t nb = sizeof l;
        cr_assert_eq(ldt_run_eager(g.ctx, NULL, 1, &g.loss, &dst, &nb), LDT_OK, "%s", ldt_last_error());
        assert_close(l, small_reference(), "eager with passes");
    }
    cr_assert_str_eq(log, "A-C-B+D+");
    small_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * A pre-plan pin pass.
 */
typedef struct pin_user {
    const char *op;
    ldt_placement pl[LDT_MAX_DIMS];
    int n, hits;
} pin_user;

static ldt_status pin_op_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    pin_user *u = user;
    (void)plan;
    for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) {
        ldt_tensor *t = ldt_trace_node(ctx, i);
        if (strcmp(ldt_tensor_op(t), u->op) != 0) continue;
        u->hits++;
        if (ldt_pin(t, u->pl, u->n) != LDT_OK) return ldt_ctx_status(ctx);
    }
    return LDT_OK;
}

Test(passes, pre_plan_pin_changes_the_plan) {
    small g;
    ldt_plan *before, *after;
    ldt_placement pl[1];
    pin_user u = {"matmul", {{0}}, 1, 0};
    float ref = small_reference();
    small_open(&g, "2");
    small_build(&g);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &before), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_placements(before, g.h, pl, 1), LDT_OK);
    /* whatever the search picked, the pass asks for something else */
    u.pl[0] = pl[0].kind == LDT_PLACE_SHARD && pl[0].dim == 1 ? ldt_shard(0) : ldt_shard(1);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "pin-matmul", pin_op_pass, &u), LDT_OK);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &after), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(u.hits, 1);
    assert_pl(after, g.h, u.pl[0].dim == 0 ? "S0" : "S1");
    assert_close(run_plan(after, g.loss), ref, "pinned by a pass");
    ldt_plan_destroy(before);
    ldt_plan_destroy(after);
    small_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Sequence-parallel LayerNorm on a GPT (the example's pass, in short).
 */
typedef struct sp_user {
    int nd, tp, dp, hits;
} sp_user;

static ldt_status seq_parallel_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    sp_user *u = user;
    (void)plan;
    for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) {
        ldt_tensor *t = ldt_trace_node(ctx, i);
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_shape s;
        if (strcmp(ldt_tensor_op(t), "layer_norm") != 0) continue;
        ldt_tensor_shape(t, &s);
        if (s.ndim != 3) continue; /* [batch, seq, hidden] */
        for (int d = 0; d < u->nd; d++) pl[d] = ldt_replicate();
        pl[u->tp] = ldt_shard(1);
        if (u->dp >= 0) pl[u->dp] = ldt_shard(0);
        if (ldt_pin(t, pl, u->nd) != LDT_OK) return ldt_ctx_status(ctx);
        u->hits++;
    }
    return LDT_OK;
}

typedef struct gpt_run {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_tensor *loss;
} gpt_run;

static void gpt_open(gpt_run *r, const char *mesh_text, sp_user *sp) {
    ldt_ctx_options co = {0};
    ldt_model_config cfg = ldt_model_config_default("gpt");
    memset(r, 0, sizeof *r);
    cfg.layers = 2;
    cfg.hidden = 24;
    cfg.heads = 6;
    cfg.vocab = 30;
    cfg.seq = 6;
    cfg.batch = 2;
    if (mesh_text) cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &r->mesh), LDT_OK);
    co.mesh = r->mesh;
    co.seed = 7;
    cr_assert_eq(ldt_ctx_create(&co, &r->ctx), LDT_OK);
    if (sp) {
        const ldt_mesh *m = ldt_ctx_mesh(r->ctx);
        sp->nd = ldt_mesh_ndim(m);
        if (ldt_mesh_dim_index(m, "tp", &sp->tp) != LDT_OK) sp->tp = sp->nd - 1;
        if (ldt_mesh_dim_index(m, "dp", &sp->dp) != LDT_OK) sp->dp = -1;
        ldt_clear_error();
        cr_assert_eq(ldt_pass_register(r->ctx, LDT_PASS_PRE_PLAN, "seq-parallel-ln", seq_parallel_pass, sp),
                     LDT_OK, "%s", ldt_last_error());
    }
    cr_assert_eq(ldt_model_create(r->ctx, "gpt", &cfg, &r->m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(r->m, 11), LDT_OK, "%s", ldt_last_error());
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
    if (mesh_text) cr_assert_eq(ldt_model_pin(r->m, "megatron"), LDT_OK, "%s", ldt_last_error());
    r->loss = ldt_model_forward(r->m);
    cr_assert(r->loss != NULL, "%s", ldt_ctx_errmsg(r->ctx));
}

static void gpt_close(gpt_run *r) {
    ldt_model_destroy(r->m);
    ldt_ctx_destroy(r->ctx);
    ldt_mesh_destroy(r->mesh);
}

static void check_seq_parallel(const char *mesh_text) {
    gpt_run one, r;
    sp_user sp = {0};
    float ref, got;
    ldt_plan *plan;
    int lns = 0;
    gpt_open(&one, NULL, NULL);
    cr_assert_eq(ldt_read(one.loss, &ref, sizeof ref), LDT_OK, "%s", ldt_ctx_errmsg(one.ctx));
    gpt_close(&one);
    gpt_open(&r, mesh_text, &sp);
    cr_assert_eq(ldt_plan_create(r.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(sp.hits, 5, "layer norms pinned: %d, expected 2 per layer and the final one", sp.hits);
    for (int64_t i = 0; i < ldt_trace_nodes(r.ctx); i++) {
        ldt_tensor *t = ldt_trace_node(r.ctx, i);
        ldt_placement pl[LDT_MAX_DIMS];
        if (strcmp(ldt_tensor_op(t), "layer_norm") != 0) continue;
        cr_assert_eq(ldt_plan_placements(plan, t, pl, LDT_MAX_DIMS), LDT_OK);
        cr_assert(pl[sp.tp].kind == LDT_PLACE_SHARD && pl[sp.tp].dim == 1,
                  "%s: layer_norm node %lld is not S1 on tp", mesh_text, (long long)i);
        /* and its input runs sequence-sharded too: no gather in front of it */
        cr_assert_eq(ldt_plan_input_placements(plan, t, 0, pl, LDT_MAX_DIMS), LDT_OK);
        cr_assert(pl[sp.tp].kind == LDT_PLACE_SHARD && pl[sp.tp].dim == 1);
        lns++;
    }
    cr_assert_eq(lns, 5);
    got = run_plan(plan, r.loss);
    assert_close(got, ref, mesh_text);
    ldt_plan_destroy(plan);
    gpt_close(&r);
}

Test(passes, seq_parallel_layer_norm_equals_one_device) {
    check_seq_parallel("tp=2");
    check_seq_parallel("tp=4");
    check_seq_parallel("dp=2,tp=2");
}

/* ---------------------------------------------------------------------------------------
 * Post-plan passes.
 */
typedef struct set_user {
    const char *op;
    const char *out; /* placements text */
    const char *in;  /* NULL: any inputs; else "in0;in1" */
    int ignore;      /* return LDT_OK even when the change is refused */
    ldt_tensor *foreign;
} set_user;

static ldt_status set_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    set_user *u = user;
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
    for (int64_t i = 0; i < ldt_trace_nodes(ctx); i++) {
        ldt_tensor *t = ldt_trace_node(ctx, i);
        ldt_placement out[LDT_MAX_DIMS], in[2 * LDT_MAX_DIMS];
        ldt_shape s;
        int n;
        ldt_status st;
        if (strcmp(ldt_tensor_op(t), u->op) != 0) continue;
        ldt_tensor_shape(t, &s);
        cr_assert_eq(ldt_placements_parse(u->out, s.ndim, out, LDT_MAX_DIMS, &n), LDT_OK);
        if (u->in) {
            char buf[64], *semi;
            snprintf(buf, sizeof buf, "%s", u->in);
            semi = strchr(buf, ';');
            *semi = '\0';
            for (int k = 0; k < 2; k++) {
                ldt_shape is;
                int ni;
                ldt_tensor_shape(ldt_tensor_input(t, k), &is);
                cr_assert_eq(ldt_placements_parse(k ? semi + 1 : buf, is.ndim, in + k * nd, nd, &ni), LDT_OK);
            }
        }
        st = ldt_plan_set_placements(plan, u->foreign ? u->foreign : t, out, u->in ? in : NULL, n);
        if (st != LDT_OK && !u->ignore) return st;
    }
    return LDT_OK;
}

Test(passes, post_plan_change_is_applied_and_equals_one_device) {
    small g;
    ldt_plan *plan;
    set_user u = {"matmul", "S1", NULL, 0, NULL};
    ldt_placement pl[1];
    float ref = small_reference();
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "matmul-cols", set_pass, &u), LDT_OK);
    small_build(&g);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    assert_pl(plan, g.h, "S1");
    /* the strategy behind it: x whole, w split by columns */
    cr_assert_eq(ldt_plan_input_placements(plan, g.h, 0, pl, 1), LDT_OK);
    cr_assert_eq(pl[0].kind, LDT_PLACE_REPLICATE);
    cr_assert_eq(ldt_plan_input_placements(plan, g.h, 1, pl, 1), LDT_OK);
    cr_assert(pl[0].kind == LDT_PLACE_SHARD && pl[0].dim == 1);
    assert_close(run_plan(plan, g.loss), ref, "matmul S1 by a post-plan pass");
    ldt_plan_destroy(plan);
    small_close(&g);
    /* a Partial output with its inputs named: x split on columns, w on rows */
    small_open(&g, "2");
    u.out = "P";
    u.in = "S1;S0";
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "matmul-partial", set_pass, &u), LDT_OK);
    small_build(&g);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    assert_pl(plan, g.h, "P");
    assert_close(run_plan(plan, g.loss), ref, "matmul P by a post-plan pass");
    ldt_plan_destroy(plan);
    small_close(&g);
}

static void expect_refused(set_user *u, const char *pass_name, const char *const *needles) {
    small g;
    ldt_plan *plan = (ldt_plan *)1;
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, pass_name, set_pass, u), LDT_OK);
    small_build(&g);
    {
        /* a layer_norm to change too: loss + sum(layer_norm(h)) */
        ldt_tensor *ln = ldt_layer_norm(g.h, 1, NULL, NULL, 1e-5);
        g.loss = ldt_add(g.loss, ldt_sum(ln, NULL, 0, 0));
        cr_assert(g.loss != NULL);
    }
    cr_assert_neq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s / %s was accepted", u->op, u->out);
    cr_assert_null(plan);
    for (int i = 0; needles[i]; i++) assert_msg(needles[i]);
    small_close(&g);
}

Test(passes, post_plan_invalid_change_is_rejected) {
    /* layer_norm cannot split the dim it normalises */
    set_user ln = {"layer_norm", "S1", NULL, 0, NULL};
    const char *ln_needles[] = {"pass 'ln-hidden'", "layer_norm", "node %", "S1", "no strategy", NULL};
    /* matmul's output cannot come out Partial from whole inputs */
    set_user mm = {"matmul", "P", "R;R", 0, NULL};
    const char *mm_needles[] = {"pass 'mm-partial'", "matmul", "node %", "P", "from the given inputs", NULL};
    /* a pass that ignores the refusal still fails the plan */
    set_user ig = {"layer_norm", "S1", NULL, 1, NULL};
    const char *ig_needles[] = {"pass 'ignores'", "layer_norm", "S1", NULL};
    /* P(max) out of a matmul */
    set_user mx = {"matmul", "Pmax", NULL, 0, NULL};
    const char *mx_needles[] = {"pass 'mm-max'", "matmul", "Pmax", NULL};
    expect_refused(&ln, "ln-hidden", ln_needles);
    expect_refused(&mm, "mm-partial", mm_needles);
    expect_refused(&ig, "ignores", ig_needles);
    expect_refused(&mx, "mm-max", mx_needles);
}

Test(passes, post_plan_change_is_validated_again_in_strict_mode) {
    small g;
    ldt_plan *plan;
    ldt_plan_options po = {0};
    set_user u = {"matmul", "S1", NULL, 0, NULL};
    ldt_placement s0 = ldt_shard(0), r = ldt_replicate();
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "unasked-move", set_pass, &u), LDT_OK);
    small_build(&g);
    /* pins that need no move at all (x split by rows, w whole: the matmul S0); the pass's S1
     * then needs x whole, a move nobody asked for */
    cr_assert_eq(ldt_pin(ldt_tensor_input(g.h, 0), &s0, 1), LDT_OK);
    cr_assert_eq(ldt_pin(ldt_tensor_input(g.h, 1), &r, 1), LDT_OK);
    po.strict = 1;
    cr_assert_neq(ldt_plan_create(g.ctx, &po, &plan), LDT_OK);
    assert_msg("pass 'unasked-move' (post-plan)");
    assert_msg("strict");
    small_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Bypass.
 */
static void check_bypass(const char *mesh_text, const char *spec) {
    small g;
    ldt_plan *plan;
    ldt_placement pl[LDT_MAX_DIMS];
    int n;
    float ref = small_reference();
    small_open(&g, mesh_text);
    small_build(&g);
    cr_assert_eq(ldt_placements_parse(spec, 2, pl, LDT_MAX_DIMS, &n), LDT_OK);
    cr_assert_eq(ldt_bypass(g.h, pl, n), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    assert_pl(plan, g.h, spec);
    assert_close(run_plan(plan, g.loss), ref, spec);
    ldt_plan_destroy(plan);
    small_close(&g);
}

Test(passes, bypass_keeps_its_spec_and_equals_one_device) {
    check_bypass("2", "S0");
    check_bypass("2", "S1");
    check_bypass("2", "P");
    check_bypass("2", "R");
    check_bypass("2x2", "S0,S1");
    check_bypass("2x2", "P,S0");
}

Test(passes, bypass_without_a_strategy_is_rejected) {
    small g;
    ldt_plan *plan;
    ldt_tensor *ln;
    ldt_placement s1 = ldt_shard(1);
    small_open(&g, "2");
    small_build(&g);
    ln = ldt_layer_norm(g.h, 1, NULL, NULL, 1e-5);
    g.loss = ldt_add(g.loss, ldt_sum(ln, NULL, 0, 0));
    cr_assert_eq(ldt_bypass(ln, &s1, 1), LDT_OK, "%s", ldt_last_error()); /* fits the shape */
    cr_assert_neq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK);
    assert_msg("bypass");
    assert_msg("layer_norm");
    assert_msg("S1");
    assert_msg("no strategy");
    small_close(&g);
}

Test(passes, post_plan_pass_cannot_move_a_bypassed_node) {
    small g;
    ldt_plan *plan;
    ldt_placement s0 = ldt_shard(0);
    set_user u = {"matmul", "S1", NULL, 0, NULL};
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "move-it", set_pass, &u), LDT_OK);
    small_build(&g);
    cr_assert_eq(ldt_bypass(g.h, &s0, 1), LDT_OK);
    cr_assert_neq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK);
    assert_msg("pass 'move-it'");
    assert_msg("bypassed");
    small_close(&g);
}

/* ---------------------------------------------------------------------------------------
 * Errors from passes, the cache hash, bad input.
 */
static ldt_status failing_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    (void)ctx, (void)plan, (void)user;
    return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "no layer norms found");
}

static ldt_status recording_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    (void)plan;
    ldt_relu(ldt_trace_node(ctx, 0));
    (void)user;
    return LDT_OK;
}

static ldt_status bad_pin_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    ldt_placement s5 = ldt_shard(5);
    (void)plan, (void)user;
    ldt_pin(ldt_trace_node(ctx, ldt_trace_nodes(ctx) - 1), &s5, 1);
    return LDT_OK; /* ignores it: the stuck error still fails the plan */
}

static void expect_pass_fails(ldt_pass_stage stage, ldt_pass_fn fn, const char *name, const char *needle) {
    small g;
    ldt_plan *plan;
    small_open(&g, "2");
    cr_assert_eq(ldt_pass_register(g.ctx, stage, name, fn, NULL), LDT_OK);
    small_build(&g);
    cr_assert_neq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "pass %s", name);
    {
        char want[96];
        snprintf(want, sizeof want, "pass '%s'", name);
        assert_msg(want);
    }
    assert_msg(needle);
    small_close(&g);
}

Test(passes, a_failing_pass_fails_the_plan_with_its_name) {
    expect_pass_fails(LDT_PASS_PRE_PLAN, failing_pass, "find-ln", "no layer norms found");
    expect_pass_fails(LDT_PASS_POST_PLAN, failing_pass, "find-ln-post", "no layer norms found");
    expect_pass_fails(LDT_PASS_PRE_PLAN, recording_pass, "records", "not record ops");
    expect_pass_fails(LDT_PASS_PRE_PLAN, bad_pin_pass, "bad-pin", "S5");
}

Test(passes, hash_follows_passes_and_bypass_marks) {
    small g;
    uint64_t h0, h1, h2;
    ldt_placement s0 = ldt_shard(0);
    small_open(&g, "2");
    small_build(&g);
    h0 = ldt_passes_hash(g.ctx);
    cr_assert_eq(h0, 0);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "x", failing_pass, NULL), LDT_OK);
    h1 = ldt_passes_hash(g.ctx);
    cr_assert_neq(h1, h0);
    cr_assert_eq(ldt_bypass(g.h, &s0, 1), LDT_OK);
    h2 = ldt_passes_hash(g.ctx);
    cr_assert_neq(h2, h1);
    cr_assert_eq(ldt_passes_hash(g.ctx), h2); /* deterministic */
    ldt_trace_discard(g.ctx);                 /* marks end with their trace */
    cr_assert_eq(ldt_passes_hash(g.ctx), h1);
    cr_assert_eq(ldt_passes_hash(NULL), 0);
    small_close(&g);
}

static ldt_status noop_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    (void)ctx, (void)plan, (void)user;
    return LDT_OK;
}

static ldt_status foreign_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    ldt_tensor *other = user;
    ldt_placement r = ldt_replicate(), pl[1];
    (void)ctx;
    cr_assert_eq(ldt_plan_set_placements(plan, other, &r, NULL, 1), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("another context");
    cr_assert_eq(ldt_plan_input_placements(plan, other, 0, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    return LDT_OK;
}

Test(passes, bad_input) {
    small g, h;
    ldt_plan *plan;
    ldt_placement pl[4] = {ldt_shard(0), ldt_replicate(), ldt_replicate(), ldt_replicate()};
    int pinned = 7;
    small_open(&g, "2");
    /* registration */
    cr_assert_eq(ldt_pass_register(NULL, LDT_PASS_PRE_PLAN, "a", noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("ctx");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "a", NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("fn");
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, NULL, noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_pass_register(g.ctx, (ldt_pass_stage)7, "a", noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("stage 7");
    cr_assert_eq(ldt_pass_register(g.ctx, (ldt_pass_stage)-1, "a", noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "", noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN,
                                   "a-name-much-longer-than-sixty-three-characters-is-refused-for-sure",
                                   noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_PRE_PLAN, "a", noop_pass, NULL), LDT_OK);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "a", noop_pass, NULL), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("registered already");
    cr_assert_eq(ldt_pass_count(g.ctx), 1);
    cr_assert_eq(ldt_pass_count(NULL), 0);
    small_build(&g);
    /* bypass */
    cr_assert_eq(ldt_bypass(NULL, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_bypass(g.h, NULL, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_bypass(g.h, pl, 2), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("2 placements given, the mesh has 1");
    cr_assert_eq(ldt_bypass(g.h, pl, 0), LDT_ERR_INVALID_ARGUMENT);
    {
        ldt_placement s4 = ldt_shard(4);
        cr_assert_eq(ldt_bypass(g.h, &s4, 1), LDT_ERR_INVALID_ARGUMENT);
        assert_msg("bypass: matmul");
    }
    cr_assert_eq(ldt_bypass(ldt_trace_node(g.ctx, 0), pl, 1), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("persistent");
    /* inspection */
    cr_assert_null(ldt_trace_node(g.ctx, -1));
    cr_assert_null(ldt_trace_node(g.ctx, ldt_trace_nodes(g.ctx)));
    assert_msg("out of range");
    cr_assert_null(ldt_trace_node(NULL, 0));
    cr_assert_eq(ldt_tensor_node(NULL), -1);
    cr_assert_str_eq(ldt_tensor_op(NULL), "");
    cr_assert_eq(ldt_tensor_ninputs(NULL), 0);
    cr_assert_null(ldt_tensor_input(g.h, 2));
    cr_assert_null(ldt_tensor_input(g.h, -1));
    cr_assert_null(ldt_tensor_name(g.h));
    cr_assert_str_eq(ldt_tensor_name(ldt_tensor_input(g.h, 0)), "x");
    cr_assert_str_eq(ldt_tensor_op(ldt_tensor_input(g.h, 1)), "param");
    cr_assert_eq(ldt_tensor_node(g.h), 2);
    cr_assert_eq(ldt_tensor_pin(g.h, pl, 0, &pinned), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_tensor_pin(NULL, pl, 1, &pinned), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_tensor_pin(g.h, pl, 1, &pinned), LDT_OK);
    cr_assert_eq(pinned, 0);
    /* plan edits outside a post-plan pass, and the view's bad input */
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_plan_set_placements(plan, g.h, pl, NULL, 1), LDT_ERR_INVALID_USAGE);
    assert_msg("only a post-plan pass");
    cr_assert_eq(ldt_plan_set_placements(NULL, g.h, pl, NULL, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_input_placements(NULL, g.h, 0, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_input_placements(plan, g.h, 2, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    assert_msg("has 2 inputs");
    cr_assert_eq(ldt_plan_input_placements(plan, g.h, 0, pl, 0), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_plan_input_placements(plan, ldt_tensor_input(g.h, 0), 0, pl, 1), LDT_ERR_INVALID_ARGUMENT);
    ldt_plan_destroy(plan);
    /* a tensor from another context inside a post-plan pass */
    small_open(&h, "2");
    small_build(&h);
    cr_assert_eq(ldt_pass_register(g.ctx, LDT_PASS_POST_PLAN, "foreign", foreign_pass, h.h), LDT_OK);
    cr_assert_eq(ldt_plan_create(g.ctx, NULL, &plan), LDT_ERR_INVALID_ARGUMENT); /* the refusal sticks */
    assert_msg("pass 'foreign'");
    assert_msg("another context");
    /* wrong count inside a pass */
    small_close(&h);
    small_close(&g);
}

static ldt_status wrong_count_pass(ldt_ctx *ctx, ldt_plan *plan, void *user) {
    ldt_placement pl[2] = {ldt_replicate(), ldt_replicate()};
    (void)user;
    return ldt_plan_set_placements(plan, ldt_trace_node(ctx, ldt_trace_nodes(ctx) - 1), pl, NULL, 2);
}

Test(passes, bad_placements_count_in_a_pass) {
    expect_pass_fails(LDT_PASS_POST_PLAN, wrong_count_pass, "count", "2 placements given, the mesh has 1");
}
