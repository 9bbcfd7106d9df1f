/* Strategies of the view family: the 1-D options each op offers, the layouts reshape and the
 * InterleavedShard slice accept or refuse, and every N-D strategy of every view op run on
 * meshes 2, 3, 4 and 2x2 with uneven shapes, bitwise equal to one device. */
#include "planner/strategy.h"
#include "tests/plan_check.h"

#define S1(a) ldt_test_shape(1, a)
#define S2(a, b) ldt_test_shape(2, a, b)
#define S3(a, b, c) ldt_test_shape(3, a, b, c)
#define S4(a, b, c, d) ldt_test_shape(4, a, b, c, d)

static ldt_tensor *rs(ldt_tensor *x, ldt_shape s) { return ldt_reshape(x, &s); }
static ldt_tensor *ex(ldt_tensor *x, ldt_shape s) { return ldt_expand(x, &s); }

/* ---------------------------------------------------------------------------------------
 * Options and `valid`, called directly on recorded nodes.
 */
typedef struct fix {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
} fix;

static fix fix_make(const char *mesh_text) {
    fix f;
    ldt_ctx_options co = {0};
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &f.mesh), LDT_OK);
    co.mesh = f.mesh;
    cr_assert_eq(ldt_ctx_create(&co, &f.ctx), LDT_OK);
    return f;
}

static void fix_free(fix *f) {
    ldt_ctx_destroy(f->ctx);
    ldt_mesh_destroy(f->mesh);
}

static ldt_tensor *in_f32(fix *f, const char *name, ldt_shape s) {
    ldt_tensor *t = ldt_input(f->ctx, name, &s, LDT_F32);
    cr_assert(t != NULL, "%s", ldt_ctx_errmsg(f->ctx));
    return t;
}

/* The 1-D options of node t with the graph's InterleavedShard block counts iks. */
static ldt__opts1 opts_of(const ldt_tensor *t, const int64_t *iks, int niks) {
    ldt__opts1 o;
    cr_assert(t != NULL, "%s", ldt_last_error());
    memset(&o, 0, sizeof o);
    o.t = t;
    o.nin = t->nin;
    o.iks = iks;
    o.niks = niks;
    cr_assert(ldt__op_strategy_of(t->op)->options != NULL, "op %d has no options", t->op);
    ldt__op_strategy_of(t->op)->options(&o);
    cr_assert(!o.oom);
    return o;
}

static ldt_placement pl1(const char *text) {
    ldt_placement p;
    int n;
    cr_assert_eq(ldt_placements_parse(text, -1, &p, 1, &n), LDT_OK, "%s", text);
    return p;
}

/* 1 when o holds the option out <- in (every input given the same placement). */
static int has(const ldt__opts1 *o, const char *out, const char *in) {
    ldt_placement po = pl1(out), pi = pl1(in);
    for (int i = 0; i < o->n; i++) {
        int ok = ldt_placement_equal(&o->v[i].out, &po);
        for (int k = 0; ok && k < o->nin; k++) ok = ldt_placement_equal(&o->v[i].in[k], &pi);
        if (ok) return 1;
    }
    return 0;
}

static void expect(const ldt__opts1 *o, const char *out, const char *in, int want) {
    cr_expect_eq(has(o, out, in), want, "option %s <- %s: %s", out, in,
                 want ? "missing" : "offered but wrong");
}

/* The op's `valid` on an N-D combination given as text ("S0,R"); 1 when it has none. */
static int valid_of(fix *f, const ldt_tensor *t, const char *out, const char *in) {
    const ldt__op_strategy *row = ldt__op_strategy_of(t->op);
    ldt_placement po[LDT_MAX_DIMS], pi[LDT_MAX_DIMS];
    const ldt_placement *ins[1] = {pi};
    int n;
    cr_assert_eq(ldt_placements_parse(out, t->shape->ndim, po, LDT_MAX_DIMS, &n), LDT_OK);
    cr_assert_eq(ldt_placements_parse(in, LDT__IN(t)[0]->shape->ndim, pi, LDT_MAX_DIMS, &n),
                 LDT_OK);
    return row->valid ? row->valid(t, f->mesh, po, ins) : 1;
}

Test(strategies_view_options, permute_select_alias) {
    fix f = fix_make("4");
    ldt_tensor *x = in_f32(&f, "x", S3(7, 5, 3));
    ldt__opts1 o = opts_of(ldt_permute(x, (int[]){2, 0, 1}, 3), NULL, 0);
    expect(&o, "S1", "S0", 1);
    expect(&o, "S2", "S1", 1);
    expect(&o, "S0", "S2", 1);
    expect(&o, "S0", "S0", 0);
    expect(&o, "P", "P", 1);
    free(o.v);
    o = opts_of(ldt_select(x, 1, 2), NULL, 0);
    expect(&o, "S0", "S0", 1);
    expect(&o, "S1", "S2", 1);
    expect(&o, "S1", "S1", 0); /* the selected dim never shards */
    free(o.v);
    o = opts_of(ldt_alias(x), (int64_t[]){5}, 1);
    expect(&o, "S2", "S2", 1);
    expect(&o, "IS1:5", "IS1:5", 1);
    expect(&o, "P", "P", 1);
    free(o.v);
    fix_free(&f);
}

/* Integers have no Partial anywhere in the planner. */
Test(strategies_view_options, no_partial_for_ints) {
    fix f = fix_make("2");
    ldt_shape s = S2(4, 6);
    ldt_tensor *x = ldt_input(f.ctx, "x", &s, LDT_I32);
    ldt__opts1 o = opts_of(ldt_transpose(x, 0, 1), NULL, 0);
    expect(&o, "S0", "S1", 1);
    expect(&o, "P", "P", 0);
    free(o.v);
    fix_free(&f);
}

Test(strategies_view_options, cat_expand) {
    fix f = fix_make("4");
    ldt_tensor *a = in_f32(&f, "a", S3(7, 2, 6)), *b = in_f32(&f, "b", S3(7, 3, 6));
    ldt__opts1 o = opts_of(ldt_cat((ldt_tensor *[]){a, b}, 2, 1), (int64_t[]){3}, 1);
    expect(&o, "S0", "S0", 1);
    expect(&o, "S2", "S2", 1);
    expect(&o, "IS2:3", "IS2:3", 1);
    expect(&o, "S1", "S1", 0); /* the cat dim */
    expect(&o, "P", "P", 1);
    free(o.v);
    o = opts_of(ex(in_f32(&f, "e", S2(1, 5)), S3(3, 7, 5)), NULL, 0);
    expect(&o, "S2", "S1", 1); /* follows */
    expect(&o, "S1", "R", 1);  /* expanded from 1: each rank expands to its local size */
    expect(&o, "S0", "R", 1);  /* new leading dim */
    expect(&o, "S1", "S0", 0);
    free(o.v);
    fix_free(&f);
}

Test(strategies_view_options, slice) {
    fix f = fix_make("2");
    ldt_tensor *x = in_f32(&f, "x", S2(5, 12));
    int64_t k3[] = {3};
    ldt__opts1 o = opts_of(ldt_slice(x, 1, 4, 8, 1), k3, 1);
    expect(&o, "S0", "S0", 1);
    expect(&o, "S1", "IS1:3", 1); /* block 1 of 3 */
    expect(&o, "S1", "S1", 0);
    free(o.v);
    o = opts_of(ldt_slice(x, 1, 4, 9, 1), k3, 1); /* not a whole block */
    expect(&o, "S1", "IS1:3", 0);
    free(o.v);
    o = opts_of(ldt_slice(x, 1, 4, 8, 2), k3, 1); /* strided */
    expect(&o, "S1", "IS1:3", 0);
    free(o.v);
    o = opts_of(ldt_slice(x, 0, 0, 5, 1), k3, 1); /* whole: a copy */
    expect(&o, "S0", "S0", 1);
    expect(&o, "S1", "S1", 1);
    free(o.v);
    fix_free(&f);
}

/* [B,S,H] -> [B,S,A,D] and back: a shard of H moves to A; B*S merges keep S0. */
Test(strategies_view_options, reshape_groups) {
    fix f = fix_make("4");
    ldt_tensor *x = in_f32(&f, "x", S3(2, 5, 12));
    ldt_tensor *h = rs(x, S4(2, 5, 4, 3));
    ldt__opts1 o = opts_of(h, NULL, 0);
    expect(&o, "S2", "S2", 1);
    expect(&o, "S1", "S1", 1);
    expect(&o, "S0", "S0", 1);
    expect(&o, "S3", "S1", 0); /* other groups */
    free(o.v);
    o = opts_of(rs(h, S3(2, 5, 12)), NULL, 0);
    expect(&o, "S2", "S2", 1);
    free(o.v);
    o = opts_of(rs(x, S2(10, 12)), (int64_t[]){3}, 1);
    expect(&o, "S0", "S0", 1);
    expect(&o, "IS1:3", "IS2:3", 1); /* a dim kept whole keeps its runs */
    free(o.v);
    fix_free(&f);
}

/* valid accepts exactly the combinations whose local buffers line up, uneven ones too. */
Test(strategies_view_options, reshape_valid) {
    fix f = fix_make("4"), g = fix_make("2x2"), t3 = fix_make("3");
    ldt_tensor *x = in_f32(&f, "x", S3(2, 5, 12));
    ldt_tensor *h = rs(x, S4(2, 5, 4, 3));
    cr_expect(valid_of(&f, h, "S2", "S2"));  /* 4 heads on 4 ranks */
    cr_expect(valid_of(&f, h, "S0", "S0"));  /* 2 over 4: 1,1,0,0 both sides */
    cr_expect(!valid_of(&f, h, "S3", "S2")); /* D is not where H's chunks go */
    /* uneven: 7 rows of 5 over 4 ranks hold 10,10,10,5 elements; 35 over 4 is 9,9,9,8 */
    ldt_tensor *r = rs(in_f32(&f, "r", S2(7, 5)), S1(35));
    cr_expect(!valid_of(&f, r, "S0", "S0"));
    cr_expect(valid_of(&f, rs(in_f32(&f, "u", S3(7, 2, 3)), S2(7, 6)), "S0",
                       "S0")); /* 7 stays a dim: uneven but equal */
    /* 3 heads of 3 on 3 ranks line up; on 2 ranks H's chunks (5, 4) split a head */
    ldt_tensor *y = rs(in_f32(&t3, "y", S2(5, 9)), S3(5, 3, 3));
    cr_expect(valid_of(&t3, y, "S1", "S1"));
    fix z = fix_make("2");
    ldt_tensor *y2 = rs(in_f32(&z, "y", S2(5, 9)), S3(5, 3, 3));
    cr_expect(!valid_of(&z, y2, "S1", "S1"));
    /* nested: [2,6] (S0,S1) -> [12] (S0,S0): each rank holds 3 consecutive elements */
    ldt_tensor *n = rs(in_f32(&g, "n", S2(2, 6)), S1(12));
    cr_expect(valid_of(&g, n, "S0,S0", "S0,S1"));
    cr_expect(!valid_of(&g, n, "S0,S0", "S1,S0"));
    /* [6,4] (S0,S0): 6 -> 3,3 -> 2,1: rank 0 holds 8, the [24] side 6 */
    ldt_tensor *m = rs(in_f32(&g, "m", S2(6, 4)), S1(24));
    cr_expect(!valid_of(&g, m, "S0,S0", "S0,S0"));
    fix_free(&z);
    fix_free(&t3);
    fix_free(&g);
    fix_free(&f);
}

Test(strategies_view_options, slice_is_valid) {
    fix f = fix_make("4");
    ldt_tensor *x = in_f32(&f, "x", S2(3, 30)); /* blocks of 10 over 4 ranks: 3,3,3,1 */
    ldt_tensor *s = ldt_slice(x, 1, 20, 30, 1);
    cr_expect(valid_of(&f, s, "S1", "IS1:3"));
    cr_expect(valid_of(&f, s, "S0", "S0"));
    fix_free(&f);
}

/* ---------------------------------------------------------------------------------------
 * Every N-D strategy equals one device, bitwise.
 */
typedef struct tc {
    ldt_dtype dt;
    int v;
} tc;

static const char *meshes[] = {"2", "3", "4", "2x2"};

static void check_all(pc_build_fn f, ldt_dtype dt, int v, double tol) {
    tc a = {dt, v};
    for (int i = 0; i < 4; i++) {
        int n = pc_check_op(meshes[i], f, &a, tol);
        cr_assert(n > 1, "mesh %s case %d: only %d strategy", meshes[i], v, n);
    }
}

static ldt_tensor *b_permute(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(7, 5, 3), a->dt, 0);
    switch (a->v) {
    case 0: return ldt_permute(x, (int[]){2, 0, 1}, 3);
    case 1: return ldt_transpose(x, 0, 1);
    default: return ldt_permute(x, (int[]){1, 2, 0}, 3);
    }
}

Test(strategies_view, permute) {
    for (int v = 0; v < 3; v++) check_all(b_permute, LDT_F32, v, 0);
    check_all(b_permute, LDT_I64, 0, 0);
}

static ldt_tensor *b_slice(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(7, 5, 6), a->dt, 0);
    switch (a->v) {
    case 0: return ldt_slice(x, 0, 1, 6, 2);
    case 1: return ldt_slice(x, 1, 1, 4, 1);
    case 2: return ldt_slice(x, 2, -4, 100, 3);
    case 3: return ldt_slice(x, 0, 0, 7, 1); /* whole: sharded on its dim too */
    default: return ldt_slice(x, 1, 3, 3, 1); /* empty */
    }
}

Test(strategies_view, slice) {
    for (int v = 0; v < 5; v++) check_all(b_slice, LDT_F32, v, 0);
    check_all(b_slice, LDT_U8, 1, 0);
}

static ldt_tensor *b_select(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(7, 5, 3), a->dt, 0);
    switch (a->v) {
    case 0: return ldt_select(x, 1, 2);
    case 1: return ldt_select(x, 0, 6);
    default: return ldt_select(x, -1, 0);
    }
}

Test(strategies_view, select) {
    for (int v = 0; v < 3; v++) check_all(b_select, LDT_F32, v, 0);
}

static ldt_tensor *b_cat(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(7, 2, 5), a->dt, 0);
    ldt_tensor *y = pc_input(ctx, "y", S3(7, 3, 5), a->dt, 0);
    ldt_tensor *z = pc_input(ctx, "z", S3(7, 1, 5), a->dt, 0);
    if (a->v == 0) return ldt_cat((ldt_tensor *[]){x, y, z}, 3, 1);
    return ldt_cat((ldt_tensor *[]){ldt_transpose(x, 0, 1), ldt_transpose(y, 0, 1)}, 2, 0);
}

Test(strategies_view, cat) {
    for (int v = 0; v < 2; v++) check_all(b_cat, LDT_F32, v, 0);
    check_all(b_cat, LDT_I32, 0, 0);
}

static ldt_tensor *b_expand(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    if (a->v == 0)
        return ex(pc_input(ctx, "x", S3(7, 1, 5), a->dt, 0), S4(3, 7, 4, 5));
    return ex(pc_input(ctx, "x", S1(5), a->dt, 0), S2(7, 5));
}

Test(strategies_view, expand) {
    for (int v = 0; v < 2; v++) check_all(b_expand, LDT_F32, v, 0);
}

/* alias, and redistribute to a pin (S1 on the first mesh dim, the rest Replicate). */
static ldt_tensor *b_alias(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S2(7, 5), a->dt, 0);
    ldt_placement pl[LDT_MAX_DIMS];
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
    if (a->v == 0) return ldt_alias(x);
    for (int i = 0; i < nd; i++) pl[i] = i == 0 ? ldt_shard(1) : ldt_replicate();
    if (a->v == 2) /* blocks of 1: most ranks hold empty runs */
        for (int i = 0; i < nd; i++) pl[i] = i == nd - 1 ? ldt_interleaved_shard(1, 5) : ldt_shard(0);
    return ldt_redistribute_to(x, pl, nd);
}

Test(strategies_view, alias) { check_all(b_alias, LDT_F32, 0, 0); }

/* Redistribute is pinned: its one strategy is the pin, so only bitwise identity is checked. */
Test(strategies_view, redistribute) {
    for (int v = 1; v < 3; v++) {
        tc a = {LDT_F32, v};
        for (int i = 0; i < 4; i++) cr_assert_geq(pc_check_op(meshes[i], b_alias, &a, 0), 1);
    }
}

/* reshape: merges, splits, uneven shapes, the GPT heads split and merge. */
static ldt_tensor *b_reshape(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    switch (a->v) {
    case 0: return rs(pc_input(ctx, "x", S2(7, 6), a->dt, 0), S1(42));
    case 1: return rs(pc_input(ctx, "x", S1(42), a->dt, 0), S2(7, 6));
    case 2: return rs(pc_input(ctx, "x", S2(6, 7), a->dt, 0), S3(2, 3, 7));
    case 3: return rs(pc_input(ctx, "x", S3(2, 3, 7), a->dt, 0), S2(6, 7));
    case 4: /* heads split [B,S,H] -> [B,S,A,D] */
        return rs(pc_input(ctx, "x", S3(2, 5, 12), a->dt, 0), S4(2, 5, 4, 3));
    case 5: /* and merge */
        return rs(pc_input(ctx, "x", S4(2, 5, 4, 3), a->dt, 0), S3(2, 5, 12));
    case 6: return rs(pc_input(ctx, "x", S2(7, 5), a->dt, 0), S3(1, 7, 5));
    case 7: return rs(pc_input(ctx, "x", S3(5, 1, 9), a->dt, 0), S3(5, 3, 3));
    case 8: return rs(pc_input(ctx, "x", S2(4, 6), a->dt, 0), S3(2, 2, 6));
    default: /* on 2x2, (S0,S1) -> (S0,S0) lines up: 3 consecutive elements per rank */
        return rs(pc_input(ctx, "x", S2(2, 6), a->dt, 0), S1(12));
    }
}

Test(strategies_view, reshape) {
    for (int v = 0; v < 10; v++) check_all(b_reshape, LDT_F32, v, 0);
    check_all(b_reshape, LDT_I64, 4, 0);
}

/* Partial(sum) flows through the views: x @ w with K sharded arrives Partial. */
static ldt_tensor *b_partial(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *y = ldt_matmul(pc_input(ctx, "x", S2(5, 6), a->dt, 0),
                               pc_param(ctx, "w", S2(6, 4), a->dt));
    switch (a->v) {
    case 0: return ldt_transpose(y, 0, 1);
    case 1: return rs(y, S3(5, 2, 2));
    case 2: return ldt_slice(y, 1, 1, 3, 1);
    case 3: return ldt_select(y, 0, 3);
    case 4: return ex(rs(y, S3(5, 1, 4)), S3(5, 3, 4));
    default: return ldt_cat((ldt_tensor *[]){y, y}, 2, 0);
    }
}

Test(strategies_view, partial_through) {
    for (int v = 0; v < 6; v++) check_all(b_partial, LDT_F32, v, 1e-5);
}

/* Megatron QKV: x [3, 3H] pinned InterleavedShard(1, 3) on one mesh dim, split into q, k, v;
 * v (block v of 3) is the node under test. H = 5 gives runs of 3,2 (mesh 2), 2,2,1 (mesh 3)
 * and 2,2,1,0 (mesh 4). */
static ldt_tensor *b_qkv(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx)), n;
    ldt_tensor *x = pc_input(ctx, "x", S2(3, 15), a->dt, 0), *parts[3];
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_tensor *y;
    int b = a->v % 3;
    for (int i = 0; i < nd; i++) pl[i] = i == nd - 1 ? ldt_interleaved_shard(1, 3) : ldt_shard(0);
    if (ldt_mesh_nranks(ldt_ctx_mesh(ctx)) > 1) cr_assert_eq(ldt_pin(x, pl, nd), LDT_OK);
    cr_assert_eq(ldt_split(x, 5, 1, parts, 3, &n), LDT_OK); /* q, k, v planned freely */
    y = ldt_slice(x, 1, 5 * b, 5 * b + 5, 1);
    if (a->v < 3 || ldt_mesh_nranks(ldt_ctx_mesh(ctx)) == 1) return y;
    /* pinned to Shard(1) where x is interleaved: only the IS -> S strategy is left */
    pl[nd - 1] = ldt_shard(1);
    cr_assert_eq(ldt_pin(y, pl, nd), LDT_OK);
    return y;
}

Test(strategies_view, qkv_interleaved_slice) {
    for (int v = 0; v < 3; v++) check_all(b_qkv, LDT_F32, v, 0);
}

/* Pinned, the slice has the one IS -> S strategy, lowered with local bounds. */
Test(strategies_view, qkv_interleaved_slice_pinned) {
    for (int v = 3; v < 6; v++) {
        tc a = {LDT_F32, v};
        for (int i = 0; i < 4; i++) cr_assert_eq(pc_check_op(meshes[i], b_qkv, &a, 0), 1);
    }
}
