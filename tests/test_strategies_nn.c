/* Strategies of the reduce, nn, index and random families: every N-D strategy of each op, run
 * on meshes 2, 3, 4 and 2x2 with uneven shapes (short and empty shards), equals one device. */
#include <math.h>

#include "kernels/cpu/kernel.h"
#include "tests/plan_check.h"

#define S1(a) ldt_test_shape(1, a)
#define S2(a, b) ldt_test_shape(2, a, b)
#define S3(a, b, c) ldt_test_shape(3, a, b, c)
#define S4(a, b, c, d) ldt_test_shape(4, a, b, c, d)

/* What a build function varies: the float dtype and one small integer. */
typedef struct tc {
    ldt_dtype dt;
    int v;
} tc;

static const char *meshes[] = {"2", "3", "4", "2x2"};

/* Every strategy on every mesh; each op must have more than all-Replicate. */
static void check_all(pc_build_fn f, ldt_dtype dt, int v, double tol) {
    tc a = {dt, v};
    for (int i = 0; i < 4; i++) {
        int n = pc_check_op(meshes[i], f, &a, tol);
        cr_assert(n > 1, "mesh %s: only %d strategy", meshes[i], n);
    }
}

/* ---------------------------------------------------------------------------------------
 * Reductions. x is [5,7,3]: 5 rows on 4 ranks give 2,2,1,0 (an empty shard).
 */
static ldt_tensor *b_reduce(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(5, 7, 3), a->dt, 0);
    static const int d0[] = {0}, d02[] = {0, 2}, d1[] = {1};
    switch (a->v) {
    case 0: return ldt_sum(x, d0, 1, 0);
    case 1: return ldt_sum(x, d02, 2, 1);
    case 2: return ldt_mean(x, d0, 1, 0);
    case 3: return ldt_mean(x, d02, 2, 0);
    case 4: return ldt_mean(x, NULL, 0, 0);
    case 5: return ldt_amax(x, d0, 1, 0);
    case 6: return ldt_amin(x, d02, 2, 1);
    case 7: return ldt_amax(x, d1, 1, 0);
    default: return ldt_sum(x, d1, 1, 0);
    }
}

Test(strategies_reduce, sum_mean_amax_amin_f32) {
    for (int v = 0; v < 9; v++) check_all(b_reduce, LDT_F32, v, 1e-5);
}

Test(strategies_reduce, f64) {
    for (int v = 2; v < 5; v++) check_all(b_reduce, LDT_F64, v, 1e-12);
}

/* Integer sums have no Partial: only kept dims shard, and they are exact. */
Test(strategies_reduce, int_sum_bitwise) {
    check_all(b_reduce, LDT_I32, 0, 0);
    check_all(b_reduce, LDT_I64, 5, 0);
}

/* A Partial(sum) input to sum stays Partial: sum(x @ w) where the matmul's K is sharded. */
static ldt_tensor *b_sum_partial(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S2(5, 6), a->dt, 0);
    ldt_tensor *w = pc_param(ctx, "w", S2(6, 3), a->dt);
    static const int d1[] = {1};
    return ldt_sum(ldt_matmul(x, w), d1, 1, 0);
}

Test(strategies_reduce, partial_input) { check_all(b_sum_partial, LDT_F32, 0, 1e-5); }

static ldt_tensor *b_argtopk(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(5, 6, 3), a->dt, 0), *t = NULL;
    switch (a->v) {
    case 0: return ldt_argmax(x, 1, 0);
    case 1: return ldt_argmin(x, 0, 1);
    case 2: return ldt_argmax(x, 2, 0);
    case 3: cr_assert_eq(ldt_topk(x, 2, 1, 1, &t, NULL), LDT_OK); return t;
    default: cr_assert_eq(ldt_topk(x, 3, 0, 0, NULL, &t), LDT_OK); return t;
    }
}

Test(strategies_reduce, argmax_argmin_topk) {
    for (int v = 0; v < 5; v++) check_all(b_argtopk, LDT_F32, v, 0);
}

/* ---------------------------------------------------------------------------------------
 * nn ops.
 */
static ldt_tensor *b_softmax_norm(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S3(5, 3, 6), a->dt, 0);
    switch (a->v) {
    case 0: return ldt_softmax(x, 1);
    case 1: return ldt_log_softmax(x, -1);
    case 2:
        return ldt_layer_norm(x, 1, pc_param(ctx, "w", S1(6), a->dt),
                              pc_param(ctx, "b", S1(6), a->dt), 1e-5);
    case 3: return ldt_layer_norm(x, 2, NULL, NULL, 1e-5);
    default: return ldt_rms_norm(x, 1, pc_param(ctx, "w", S1(6), a->dt), 1e-6);
    }
}

Test(strategies_nn, softmax_and_norms) {
    for (int v = 0; v < 5; v++) check_all(b_softmax_norm, LDT_F32, v, 1e-5);
    check_all(b_softmax_norm, LDT_F64, 2, 1e-12);
}

static ldt_tensor *b_dropout(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S2(5, 7), a->dt, 0);
    if (a->v) x = ldt_matmul(x, pc_param(ctx, "w", S2(7, 3), a->dt)); /* may arrive Partial */
    return ldt_dropout(x, 0.3, 1);
}

Test(strategies_nn, dropout_bitwise) {
    check_all(b_dropout, LDT_F32, 0, 0);
    check_all(b_dropout, LDT_F32, 1, 1e-5);
}

/* v 0: [5,7] with no ignored target; v 1: [3,5,6] ignoring class 2; v 2: every target
 * ignored (NaN, as one device). */
static ldt_tensor *b_cross_entropy(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    if (a->v == 0)
        return ldt_cross_entropy(pc_input(ctx, "x", S2(5, 7), a->dt, 0),
                                 pc_input(ctx, "t", S1(5), LDT_I64, 7), -100);
    if (a->v == 1)
        return ldt_cross_entropy(pc_input(ctx, "x", S3(3, 5, 6), a->dt, 0),
                                 pc_input(ctx, "t", S2(3, 5), LDT_I32, 6), 2);
    return ldt_cross_entropy(pc_input(ctx, "x", S2(3, 5), a->dt, 0),
                             pc_input(ctx, "t", S1(3), LDT_I64, 1), 0);
}

Test(strategies_nn, cross_entropy) {
    for (int v = 0; v < 3; v++) check_all(b_cross_entropy, LDT_F32, v, 1e-5);
    check_all(b_cross_entropy, LDT_F64, 1, 1e-12);
}

/* q [3,2,5,4], k [3,2,6,4], v [3,2,6,3]: v 0 plain, 1 causal, 2 with dropout. */
static ldt_tensor *b_sdpa(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *q = pc_input(ctx, "q", S4(3, 2, 5, 4), a->dt, 0);
    ldt_tensor *k = pc_input(ctx, "k", S4(3, 2, 6, 4), a->dt, 0);
    ldt_tensor *v = pc_input(ctx, "v", S4(3, 2, 6, 3), a->dt, 0);
    return ldt_scaled_dot_product_attention(q, k, v, a->v == 1, a->v == 2 ? 0.25 : 0, 0);
}

Test(strategies_nn, sdpa) {
    for (int v = 0; v < 3; v++) check_all(b_sdpa, LDT_F32, v, 1e-5);
    check_all(b_sdpa, LDT_F64, 1, 1e-12);
}

/* ---------------------------------------------------------------------------------------
 * Indexing ops.
 */
static ldt_tensor *b_embedding(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *w = pc_param(ctx, "w", S2(a->v ? 5 : 7, 6), a->dt);
    return ldt_embedding(w, pc_input(ctx, "ix", S2(5, 3), a->v ? LDT_I32 : LDT_I64, a->v ? 5 : 7));
}

Test(strategies_index, embedding_vocab_parallel) {
    check_all(b_embedding, LDT_F32, 0, 0);
    check_all(b_embedding, LDT_F32, 1, 0); /* 5 rows on 4 ranks: one holds none */
    check_all(b_embedding, LDT_F64, 0, 0);
}

static ldt_tensor *b_index(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S2(5, 7), a->dt, 0), *ix[1];
    switch (a->v) {
    case 0: return ldt_one_hot(pc_input(ctx, "i", S2(5, 3), LDT_I64, 4), 4);
    case 1: return ldt_index_select(x, 1, pc_input(ctx, "i", S1(5), LDT_I64, 7));
    case 2: return ldt_index_select(x, 0, pc_input(ctx, "i", S1(6), LDT_I32, 5));
    case 3: return ldt_gather(x, 1, pc_input(ctx, "i", S2(5, 9), LDT_I64, 7));
    case 4: return ldt_gather(x, 0, pc_input(ctx, "i", S2(3, 7), LDT_I64, 5));
    case 5:
        return ldt_scatter(x, 1, pc_input(ctx, "i", S2(5, 3), LDT_I64, 7),
                           pc_input(ctx, "s", S2(5, 4), a->dt, 0));
    case 6:
        return ldt_scatter_add(x, 0, pc_input(ctx, "i", S2(6, 7), LDT_I64, 5),
                               pc_input(ctx, "s", S2(6, 7), a->dt, 0));
    case 7:
        return ldt_index_add(x, 0, pc_input(ctx, "i", S1(4), LDT_I64, 5),
                             pc_input(ctx, "s", S2(4, 7), a->dt, 0));
    case 8:
        ix[0] = pc_input(ctx, "i", S1(3), LDT_I64, 5);
        return ldt_index_put(x, ix, 1, pc_input(ctx, "s", S2(3, 7), a->dt, 0), 0);
    default:
        ix[0] = pc_input(ctx, "i", S1(4), LDT_I64, 5);
        return ldt_index_put(x, ix, 1, pc_input(ctx, "s", S1(7), a->dt, 0), 1);
    }
}

Test(strategies_index, select_gather_scatter_put) {
    /* bitwise, but the accumulating ones (scatter_add, index_add, index_put +=) */
    for (int v = 0; v < 10; v++)
        check_all(b_index, LDT_F32, v, v == 6 || v == 7 || v == 9 ? 1e-5 : 0);
    check_all(b_index, LDT_F64, 6, 1e-12);
}

/* ---------------------------------------------------------------------------------------
 * Random ops: any placement draws exactly the one-device tensor.
 */
static ldt_tensor *b_random(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_shape s1 = S2(5, 7), s2 = S3(3, 5, 2), s3 = S2(7, 3);
    ldt_tensor *t = ldt_rand(ctx, &s1, a->dt); /* advances the stream: the next op's offset */
    if (a->v == 0) return t;
    if (a->v == 1) return ldt_randn(ctx, &s2, a->dt);
    return ldt_bernoulli(ctx, &s3, a->dt, 0.4);
}

Test(strategies_random, rand_randn_bernoulli_bitwise) {
    for (int v = 0; v < 3; v++) check_all(b_random, LDT_F32, v, 0);
    check_all(b_random, LDT_F64, 1, 0);
}

/* ---------------------------------------------------------------------------------------
 * The embedding kernel's range mode against a hand-computed lookup.
 */
Test(strategies_index, embedding_range_kernel) {
    float w[3 * 2] = {1, 2, 3, 4, 5, 6}; /* rows 4..6 of a 9-row table */
    int64_t ix[5] = {4, 0, 6, -3, -5};   /* -3 is row 6, -5 row 4 */
    float out[5 * 2], want[5 * 2] = {1, 2, 0, 0, 5, 6, 5, 6, 1, 2};
    ldt__attrs at = {{1, 4, 9}, {0}};
    ldt__operand in[2] = {{w, S2(3, 2), LDT_F32}, {ix, S1(5), LDT_I64}};
    ldt__kcall c = {LDT_OP_EMBEDDING, &at, 2, in, {out, S2(5, 2), LDT_F32}, NULL, NULL, NULL};
    cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < 10; i++)
        cr_assert_eq(out[i], want[i], "out[%d] = %g, want %g", i, out[i], want[i]);
    ix[1] = 9; /* out of range of the whole table */
    cr_assert_eq(ldt__k_index(&c), LDT_ERR_INVALID_ARGUMENT);
    at.i[1] = 7; /* rows [7, 10) do not fit 9 */
    ix[1] = 0;
    cr_assert_eq(ldt__k_index(&c), LDT_ERR_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------------------------------------
 * InterleavedShard: a pin IS1:3 (mesh dim 0) makes the ops offer IS options on that count.
 */
static void pin_is(ldt_ctx *ctx, ldt_tensor *t) {
    ldt_placement pl[LDT_MAX_DIMS];
    int nd = ldt_mesh_ndim(ldt_ctx_mesh(ctx));
    pl[0] = ldt_interleaved_shard(1, 3);
    for (int d = 1; d < nd; d++) pl[d] = ldt_replicate();
    cr_assert_eq(ldt_pin(t, pl, nd), LDT_OK, "%s", ldt_last_error());
}

static ldt_tensor *b_interleaved(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_tensor *x = pc_input(ctx, "x", S2(5, 6), a->dt, 0);
    static const int d1[] = {1};
    pin_is(ctx, x);
    switch (a->v) {
    case 0: return ldt_sum(x, d1, 1, 0);
    case 1: return ldt_mean(x, d1, 1, 1);
    case 2: return ldt_amax(x, d1, 1, 0);
    case 3: return ldt_softmax(x, 0);
    default: return ldt_dropout(x, 0.5, 1);
    }
}

Test(strategies_nn, interleaved_shard) {
    for (int v = 0; v < 5; v++) check_all(b_interleaved, LDT_F32, v, v == 4 ? 0 : 1e-5);
}

/* A random op pinned IS1:3 itself: its one strategy draws the one-device values. */
static ldt_tensor *b_rand_is(ldt_ctx *ctx, void *arg) {
    const tc *a = arg;
    ldt_shape s = S2(5, 6);
    ldt_tensor *t = a->v ? ldt_randn(ctx, &s, a->dt) : ldt_rand(ctx, &s, a->dt);
    pin_is(ctx, t);
    return t;
}

Test(strategies_random, interleaved_pin) {
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < 4; i++) {
            tc a = {LDT_F32, v};
            cr_assert_eq(pc_check_op(meshes[i], b_rand_is, &a, 0), 1);
        }
}

/* ---------------------------------------------------------------------------------------
 * The 1-D options themselves: the ones the rules promise are offered (or refused).
 */
static int has_opt(const ldt_tensor *t, const char *out, const char *ins) {
    ldt__opts1 o = {0};
    ldt_placement po, pi[LDT__SMAX_IN];
    int n = 0, found = 0;
    o.t = t;
    o.nin = t->nin;
    cr_assert_eq(ldt_placements_parse(out, t->shape->ndim, &po, 1, &n), LDT_OK);
    for (int k = 0; k < t->nin; k++) {
        char one[16];
        const char *s = ins;
        for (int j = 0; j < k; j++) s = strchr(s, ';') + 1;
        snprintf(one, sizeof one, "%.*s", (int)strcspn(s, ";"), s);
        cr_assert_eq(ldt_placements_parse(one, LDT__IN(t)[k]->shape->ndim, &pi[k], 1, &n), LDT_OK,
                     "%s", one);
    }
    ldt__op_strategy_of(t->op)->options(&o);
    for (int i = 0; i < o.n && !found; i++) {
        found = ldt_placement_equal(&o.v[i].out, &po);
        for (int k = 0; k < t->nin && found; k++)
            found = ldt_placement_equal(&o.v[i].in[k], &pi[k]);
    }
    free(o.v);
    return found;
}

Test(strategies_nn, options_promised) {
    ldt_ctx *ctx;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    ldt_tensor *w = pc_param(ctx, "w", S2(7, 6), LDT_F32);
    ldt_tensor *ix = pc_input(ctx, "ix", S2(5, 3), LDT_I64, 7);
    ldt_tensor *e = ldt_embedding(w, ix);
    cr_assert(has_opt(e, "P", "S0;R"), "embedding: vocab-parallel");
    cr_assert(has_opt(e, "S2", "S1;R"), "embedding: hidden");
    cr_assert(has_opt(e, "S1", "R;S1"), "embedding: batch follows the indices");
    /* cross_entropy is recorded as reductions and a gather: vocab-parallel logits give a
     * Partial target logit, and the gradient (scatter_add) and an embedding's (index_add)
     * stay sharded along the indexed dim */
    ldt_tensor *lg = pc_input(ctx, "lg", S2(5, 7), LDT_F32, 0);
    ldt_tensor *ti = pc_input(ctx, "ti", S2(5, 1), LDT_I64, 7);
    cr_assert(has_opt(ldt_gather(lg, 1, ti), "P", "S1;R"), "gather: vocab-parallel");
    cr_assert(has_opt(ldt_gather(lg, 1, ti), "S0", "S0;S0"), "gather: batch");
    cr_assert(has_opt(ldt_scatter_add(lg, 1, ti, pc_input(ctx, "src", S2(5, 1), LDT_F32, 0)), "S1",
                      "S1;R;R"), "scatter_add: vocab-parallel");
    cr_assert(has_opt(ldt_index_add(w, 0, pc_input(ctx, "i1", S1(4), LDT_I64, 7),
                                    pc_input(ctx, "rows", S2(4, 6), LDT_F32, 0)),
                      "S0", "S0;R;R"), "index_add: vocab-parallel");
    ldt_tensor *x = pc_input(ctx, "x", S2(5, 6), LDT_F32, 0);
    static const int d0[] = {0};
    cr_assert(has_opt(ldt_amax(x, d0, 1, 0), "Pmax", "S0"));
    cr_assert(has_opt(ldt_amin(x, d0, 1, 0), "Pmin", "S0"));
    cr_assert(has_opt(ldt_mean(x, d0, 1, 0), "P", "P"));
    cr_assert(has_opt(ldt_sum(x, d0, 1, 0), "S0", "S1"));
    cr_assert(!has_opt(ldt_softmax(x, 1), "S1", "S1"), "softmax: its dim stays whole");
    tc d = {LDT_F32, 2};
    ldt_tensor *att = b_sdpa(ctx, &d); /* with dropout: batch and heads, never query rows */
    cr_assert(has_opt(att, "S0", "S0;S0;S0"));
    cr_assert(has_opt(att, "S1", "S1;S1;S1"));
    cr_assert(!has_opt(att, "S2", "S2;R;R"));
    cr_assert(has_opt(att, "S3", "R;R;S3"));
    ldt_ctx_destroy(ctx);
}
