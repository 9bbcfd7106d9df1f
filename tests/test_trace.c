/* Tracing: recording and shape rules, sticky errors, the structural hash, materialization
 * (read, sync, keep), pins, dumps, custom ops, and end-to-end values through the eager runner
 * against hand-computed results. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/ops.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"
#include "ldt/ldt.h"
#include "trace/trace.h"
#include "tests/test_util.h"

static ldt_ctx *new_ctx(void) {
    ldt_ctx *ctx;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK, "%s", ldt_last_error());
    return ctx;
}

static void expect_shape(ldt_tensor *t, ldt_shape want, const char *what) {
    char a[128], b[128];
    cr_assert_not_null(t, "%s: NULL (%s)", what, ldt_last_error());
    ldt_shape_format(t->shape, a, sizeof a);
    ldt_shape_format(&want, b, sizeof b);
    cr_expect_str_eq(a, b, "%s: shape %s, want %s", what, a, b);
}

Test(ops, every_op_has_a_name_arity_and_cpu_kernel) {
    for (int op = 0; op < LDT_OP_COUNT; op++) {
        int leaf = op == LDT_OP_INPUT || op == LDT_OP_PARAM || op == LDT_OP_CONST ||
                   op == LDT_OP_DATA;
        cr_expect(strcmp(ldt__op_name(NULL, op), "unknown op") != 0, "op %d has no name", op);
        cr_expect(ldt__op_arity(op) >= -1, "op %d", op);
        if (leaf)
            cr_expect_null(ldt__cpu_kernel(op), "leaf %s has a kernel", ldt__op_name(NULL, op));
        else
            cr_expect_not_null(ldt__cpu_kernel(op), "op %s has no CPU kernel",
                               ldt__op_name(NULL, op));
    }
}

Test(record, shape_rules) {
    ldt_ctx *ctx = new_ctx();
    ldt_shape s;
    ldt_tensor *a = ldt_param(ctx, "a", &(ldt_shape){3, {3, 1, 5}}, LDT_F32);
    ldt_tensor *b = ldt_param(ctx, "b", &(ldt_shape){2, {4, 5}}, LDT_F32);
    ldt_tensor *m23 = ldt_param(ctx, "m23", &(ldt_shape){2, {2, 3}}, LDT_F32);
    ldt_tensor *m34 = ldt_param(ctx, "m34", &(ldt_shape){2, {3, 4}}, LDT_F32);
    ldt_tensor *v3 = ldt_param(ctx, "v3", &(ldt_shape){1, {3}}, LDT_F32);
    ldt_tensor *b523 = ldt_param(ctx, "b523", &(ldt_shape){3, {5, 2, 3}}, LDT_F32);
    ldt_tensor *b234 = ldt_param(ctx, "b234", &(ldt_shape){3, {2, 3, 4}}, LDT_F32);
    ldt_tensor *b2134 = ldt_param(ctx, "b2134", &(ldt_shape){4, {2, 1, 3, 4}}, LDT_F32);
    ldt_tensor *b546 = ldt_param(ctx, "b546", &(ldt_shape){3, {5, 4, 6}}, LDT_F32);
    ldt_tensor *w = ldt_param(ctx, "w", &(ldt_shape){2, {7, 3}}, LDT_F32);
    ldt_tensor *bias = ldt_param(ctx, "bias", &(ldt_shape){1, {7}}, LDT_F32);
    ldt_tensor *parts[8];
    int n;
    expect_shape(ldt_add(a, b), ldt_test_shape(3, 3, 4, 5), "add broadcast");
    expect_shape(ldt_lt(a, b), ldt_test_shape(3, 3, 4, 5), "lt");
    cr_expect_eq(ldt_tensor_dtype(ldt_lt(a, b)), LDT_BOOL);
    expect_shape(ldt_matmul(m23, m34), ldt_test_shape(2, 2, 4), "matmul 2-D");
    expect_shape(ldt_matmul(v3, v3), ldt_test_shape(0), "matmul dot");
    expect_shape(ldt_matmul(b523, v3), ldt_test_shape(2, 5, 2), "matmul N-D x 1-D");
    expect_shape(ldt_matmul(v3, b234), ldt_test_shape(2, 2, 4), "matmul 1-D x N-D");
    expect_shape(ldt_matmul(b2134, b546), ldt_test_shape(4, 2, 5, 3, 6), "matmul batched broadcast");
    expect_shape(ldt_linear(b523, w, bias), ldt_test_shape(3, 5, 2, 7), "linear");
    expect_shape(ldt_reshape(b234, &(ldt_shape){2, {-1, 4}}), ldt_test_shape(2, 6, 4), "reshape -1");
    expect_shape(ldt_transpose(b234, 0, -1), ldt_test_shape(3, 4, 3, 2), "transpose");
    expect_shape(ldt_permute(b234, (int[]){2, 0, 1}, 3), ldt_test_shape(3, 4, 2, 3), "permute");
    expect_shape(ldt_slice(b546, 2, 1, 100, 2), ldt_test_shape(3, 5, 4, 3), "slice clamped, step 2");
    expect_shape(ldt_slice(b546, -1, -2, 6, 1), ldt_test_shape(3, 5, 4, 2), "slice negative");
    expect_shape(ldt_select(b546, 1, -1), ldt_test_shape(2, 5, 6), "select");
    expect_shape(ldt_cat((ldt_tensor *[]){m23, m23, m23}, 3, 0), ldt_test_shape(2, 6, 3), "cat");
    cr_assert_eq(ldt_split(b546, 4, 2, parts, 8, &n), LDT_OK);
    cr_expect_eq(n, 2);
    expect_shape(parts[1], ldt_test_shape(3, 5, 4, 2), "split tail");
    expect_shape(ldt_expand(v3, &(ldt_shape){3, {2, 4, -1}}), ldt_test_shape(3, 2, 4, 3), "expand");
    expect_shape(ldt_expand_as(a, ldt_add(a, b)), ldt_test_shape(3, 3, 4, 5), "expand_as");
    expect_shape(ldt_sum(b234, (int[]){0, -1}, 2, 0), ldt_test_shape(1, 3), "sum dims");
    expect_shape(ldt_sum(b234, (int[]){1}, 1, 1), ldt_test_shape(3, 2, 1, 4), "sum keepdim");
    expect_shape(ldt_mean(b234, NULL, 0, 0), ldt_test_shape(0), "mean all");
    expect_shape(ldt_argmax(b234, 1, 0), ldt_test_shape(2, 2, 4), "argmax");
    cr_expect_eq(ldt_tensor_dtype(ldt_argmax(b234, 1, 0)), LDT_I64);
    {
        ldt_tensor *vals, *idx;
        cr_assert_eq(ldt_topk(b234, 2, -1, 1, &vals, &idx), LDT_OK);
        expect_shape(vals, ldt_test_shape(3, 2, 3, 2), "topk values");
        cr_expect_eq(ldt_tensor_dtype(idx), LDT_I64);
    }
    {
        ldt_tensor *i32 = ldt_param(ctx, "i", &(ldt_shape){1, {4}}, LDT_I32);
        cr_expect_eq(ldt_tensor_dtype(ldt_sum(i32, NULL, 0, 0)), LDT_I64, "integer sums widen");
        cr_expect_eq(ldt_tensor_dtype(ldt_cast(i32, LDT_BF16)), LDT_BF16);
    }
    s = ldt_test_shape(2, 5, 7);
    expect_shape(ldt_randn(ctx, &s, LDT_F32), s, "randn");
    cr_expect_eq(ldt_ctx_status(ctx), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
    ldt_ctx_destroy(ctx);
}

/* Each bad call fails with its message, the error sticks on the context, and the run reports
 * it again. */
Test(record, errors_name_the_op_and_stick) {
    static const struct {
        const char *needle;
    } rows[] = {{"add: shapes do not broadcast: a is [8,16], b is [12,4]"},
                {"matmul: inner dims differ: a is [8,16], b is [12,4]"},
                {"add: dtypes differ: a is f32, b is f64"},
                {"exp: x is i32, expected a floating dtype"},
                {"reshape: x is [8,16] (128 elements), target [5,-1] does not hold that many"},
                {"slice: dim 2 is out of range for x [8,16]"},
                {"select: index 8 is out of range for dim 0"},
                {"cat: tensor 1 is [12,4] f32, tensor 0 is [8,16] f32"},
                {"expand: x [8,16] cannot expand to [3,16]"},
                {"sum: dim 1 appears twice"},
                {"topk: k = 17, expected 0 to 16"},
                {"where: cond is f32, expected bool"},
                {"uniform: bounds [1, 1), expected finite lo < hi"},
                {"linear: inner dims differ"},
                {"permute: dim 0 appears twice"},
                {"amax: reducing dim 0 of x [0,3], which is empty"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ldt_ctx *ctx = new_ctx();
        ldt_tensor *a = ldt_param(ctx, "a", &(ldt_shape){2, {8, 16}}, LDT_F32);
        ldt_tensor *b = ldt_param(ctx, "b", &(ldt_shape){2, {12, 4}}, LDT_F32);
        ldt_tensor *d = ldt_param(ctx, "d", &(ldt_shape){2, {8, 16}}, LDT_F64);
        ldt_tensor *n = ldt_param(ctx, "n", &(ldt_shape){1, {4}}, LDT_I32);
        ldt_tensor *e = ldt_param(ctx, "e", &(ldt_shape){2, {0, 3}}, LDT_F32);
        ldt_tensor *r = NULL, *vals;
        switch (i) {
        case 0: r = ldt_add(a, b); break;
        case 1: r = ldt_matmul(a, b); break;
        case 2: r = ldt_add(a, d); break;
        case 3: r = ldt_exp(n); break;
        case 4: r = ldt_reshape(a, &(ldt_shape){2, {5, -1}}); break;
        case 5: r = ldt_slice(a, 2, 0, 1, 1); break;
        case 6: r = ldt_select(a, 0, 8); break;
        case 7: r = ldt_cat((ldt_tensor *[]){a, b}, 2, 0); break;
        case 8: r = ldt_expand(a, &(ldt_shape){2, {3, 16}}); break;
        case 9: r = ldt_sum(a, (int[]){1, -1}, 2, 0); break;
        case 10: cr_expect_neq(ldt_topk(a, 17, 1, 1, &vals, NULL), LDT_OK); break;
        case 11: r = ldt_where(a, a, a); break;
        case 12: r = ldt_uniform(ctx, &(ldt_shape){1, {3}}, LDT_F32, 1, 1); break;
        case 13: r = ldt_linear(a, b, NULL); break;
        case 14: r = ldt_permute(a, (int[]){0, 0}, 2); break;
        case 15: r = ldt_amax(e, (int[]){0}, 1, 0); break;
        }
        cr_expect_null(r, "row %zu succeeded", i);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) != NULL, "row %zu: %s", i,
                  ldt_last_error());
        cr_expect(strstr(ldt_ctx_errmsg(ctx), rows[i].needle) != NULL, "row %zu ctx: %s", i,
                  ldt_ctx_errmsg(ctx));
        /* a chain on top of the failure returns NULL and keeps the first message */
        cr_expect_null(ldt_relu(ldt_exp(r)));
        cr_expect(strstr(ldt_ctx_errmsg(ctx), rows[i].needle) != NULL, "row %zu kept: %s", i,
                  ldt_ctx_errmsg(ctx));
        cr_expect_neq(ldt_sync(ctx), LDT_OK, "row %zu: the run must report the error", i);
        cr_expect(strstr(ldt_last_error(), rows[i].needle) != NULL, "row %zu sync: %s", i,
                  ldt_last_error());
        cr_expect_eq(ldt_ctx_status(ctx), LDT_OK, "the next trace starts clean");
        ldt_ctx_destroy(ctx);
    }
    cr_expect_null(ldt_neg(NULL));
    cr_expect(strstr(ldt_last_error(), "neg: input 0 is NULL") != NULL, "%s", ldt_last_error());
}

/* A small step: the same code traced twice gives the same hash; any structural change
 * gives another; names and data never matter. */
static uint64_t step_hash(int variant) {
    ldt_ctx *ctx = new_ctx();
    ldt_tensor *x = ldt_input(ctx, variant == 5 ? "renamed" : "x", &(ldt_shape){2, {4, 8}}, LDT_F32);
    ldt_tensor *w = ldt_param(ctx, "w", &(ldt_shape){2, {8, variant == 1 ? 6 : 8}}, LDT_F32);
    ldt_tensor *h = ldt_matmul(x, w), *y;
    uint64_t h1, h2;
    h = variant == 2 ? ldt_relu(h) : ldt_tanh(h);
    h = ldt_mul_scalar(h, variant == 3 ? 0.25 : 0.5);
    if (variant == 4) ldt_pin(h, (ldt_placement[]){ldt_shard(0)}, 1);
    y = variant == 6 ? ldt_sum(ldt_add(h, ldt_rand(ctx, h->shape, LDT_F32)), NULL, 0, 0)
                     : ldt_sum(ldt_add(ldt_rand(ctx, h->shape, LDT_F32), h), NULL, 0, 0);
    cr_assert_not_null(y, "%s", ldt_ctx_errmsg(ctx));
    h1 = ldt_trace_hash(ctx);
    ldt_trace_discard(ctx);
    /* trace the same step again, after the random offset moved on */
    ldt_rand(ctx, &(ldt_shape){1, {10}}, LDT_F32);
    ldt_trace_discard(ctx);
    ldt_ctx_set_seed(ctx, 99, 1000);
    h = ldt_matmul(x, w);
    h = variant == 2 ? ldt_relu(h) : ldt_tanh(h);
    h = ldt_mul_scalar(h, variant == 3 ? 0.25 : 0.5);
    if (variant == 4) ldt_pin(h, (ldt_placement[]){ldt_shard(0)}, 1);
    y = variant == 6 ? ldt_sum(ldt_add(h, ldt_rand(ctx, h->shape, LDT_F32)), NULL, 0, 0)
                     : ldt_sum(ldt_add(ldt_rand(ctx, h->shape, LDT_F32), h), NULL, 0, 0);
    h2 = ldt_trace_hash(ctx);
    cr_expect_eq(h1, h2, "variant %d: the same step hashes differently (%llx, %llx)", variant,
                 (unsigned long long)h1, (unsigned long long)h2);
    ldt_ctx_destroy(ctx);
    return h1;
}

Test(hash, stable_and_sensitive) {
    uint64_t base = step_hash(0);
    for (int v = 1; v <= 6; v++) {
        uint64_t h = step_hash(v);
        if (v == 5)
            cr_expect_eq(h, base, "renaming an input changed the hash");
        else
            cr_expect_neq(h, base, "variant %d did not change the hash", v);
    }
}

Test(materialize, read_sync_keep_and_expiry) {
    ldt_ctx *ctx = new_ctx();
    float xv[4] = {1, -2, 3, -4}, out[4], kept[4];
    ldt_tensor *x = ldt_input(ctx, "x", &(ldt_shape){1, {4}}, LDT_F32);
    ldt_tensor *y, *k, *z;
    cr_assert_eq(ldt_input_bind(x, xv, sizeof xv), LDT_OK);
    y = ldt_mul_scalar(ldt_relu(x), 2.0); /* 2, 0, 6, 0 */
    k = ldt_keep(y);
    cr_assert_not_null(k);
    cr_expect_eq(ldt_trace_nodes(ctx), 3, "x, relu, mul");
    cr_assert_eq(ldt_read(y, out, sizeof out), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 2 && out[1] == 0 && out[2] == 6 && out[3] == 0, "%g %g %g %g", out[0],
              out[1], out[2], out[3]);
    cr_expect_eq(ldt_trace_nodes(ctx), 0, "reading ends the trace");
    /* y expired; k carries its value into the next trace */
    cr_expect_null(ldt_neg(y));
    cr_expect(strstr(ldt_ctx_errmsg(ctx), "from a trace that has ended") != NULL, "%s",
              ldt_ctx_errmsg(ctx));
    ldt_trace_discard(ctx);
    cr_assert_eq(ldt_read(k, kept, sizeof kept), LDT_OK);
    cr_expect(memcmp(kept, out, sizeof out) == 0);
    z = ldt_add(k, x); /* 3, -2, 9, -4 */
    cr_assert_eq(ldt_read(z, out, sizeof out), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 3 && out[1] == -2 && out[2] == 9 && out[3] == -4);
    /* bad reads */
    cr_expect_eq(ldt_read(x, out, 3), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "3 bytes given") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_input_bind(x, xv, 8), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "8 bytes given, expected 16") != NULL, "%s",
              ldt_last_error());
    cr_expect_eq(ldt_param_set(x, xv, sizeof xv), LDT_ERR_INVALID_ARGUMENT);
    {
        ldt_tensor *u = ldt_input(ctx, "unbound", &(ldt_shape){1, {4}}, LDT_F32);
        ldt_tensor *v = ldt_neg(u);
        cr_expect_eq(ldt_read(v, out, sizeof out), LDT_ERR_INVALID_USAGE);
        cr_expect(strstr(ldt_last_error(), "input 'unbound'") != NULL, "%s", ldt_last_error());
    }
    ldt_ctx_destroy(ctx);
}

Test(pins, pin_dump_and_dot) {
    ldt_mesh *mesh;
    ldt_ctx_options o = {NULL, 0, NULL};
    ldt_ctx *ctx;
    ldt_tensor *x, *y, *r;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_META, &mesh), LDT_OK);
    o.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&o, &ctx), LDT_OK);
    ldt_mesh_destroy(mesh); /* the context keeps its own copy */
    x = ldt_param(ctx, "x", &(ldt_shape){2, {8, 6}}, LDT_F32);
    cr_assert_eq(ldt_pin(x, (ldt_placement[]){ldt_shard(0), ldt_replicate()}, 2), LDT_OK);
    y = ldt_add_scalar(x, 1.5);
    r = ldt_redistribute_to(y, (ldt_placement[]){ldt_replicate(), ldt_shard(-1)}, 2);
    cr_assert_not_null(r, "%s", ldt_last_error());
    cr_expect_eq(ldt_pin(y, (ldt_placement[]){ldt_shard(0)}, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "1 placements for mesh 2x2, expected 2") != NULL, "%s",
              ldt_last_error());
    ldt_ctx_clear_error(ctx);
    cr_expect_eq(ldt_pin(y, (ldt_placement[]){ldt_shard(2), ldt_replicate()}, 2),
                 LDT_ERR_INVALID_ARGUMENT);
    ldt_ctx_clear_error(ctx);
    f = open_memstream(&buf, &len);
    cr_assert_eq(ldt_trace_dump(ctx, f), LDT_OK);
    fclose(f);
    cr_expect_str_eq(buf, "%0 = param \"x\" [8,6] f32 pin=S0,R\n"
                          "%1 = add_scalar(%0) s=1.5 [8,6] f32\n"
                          "%2 = redistribute(%1) [8,6] f32 pin=R,S1\n");
    free(buf);
    f = open_memstream(&buf, &len);
    cr_assert_eq(ldt_trace_dot(ctx, f), LDT_OK);
    fclose(f);
    cr_expect(strstr(buf, "digraph trace") && strstr(buf, "n1 -> n2;"), "%s", buf);
    free(buf);
    ldt_ctx_destroy(ctx);
}

/* custom op: y = 3x + c over f32 */
static ldt_status axpc_shape(int nin, const ldt_shape *in, const ldt_dtype *dt, void *user,
                             ldt_shape *out, ldt_dtype *odt, char *msg, size_t cap) {
    (void)nin;
    (void)user;
    if (dt[0] != LDT_F32) {
        snprintf(msg, cap, "x is %s, expected f32", ldt_dtype_name(dt[0]));
        return LDT_ERR_INVALID_ARGUMENT;
    }
    *out = in[0];
    *odt = LDT_F32;
    return LDT_OK;
}
static ldt_status axpc_cpu(int nin, const void *const *in, const ldt_shape *shapes,
                           const ldt_dtype *dts, void *out, const ldt_shape *oshape,
                           ldt_dtype odt, void *user) {
    int64_t n;
    (void)nin;
    (void)dts;
    (void)oshape;
    (void)odt;
    ldt_shape_numel(&shapes[0], &n);
    for (int64_t i = 0; i < n; i++)
        ((float *)out)[i] = 3 * ((const float *)in[0])[i] + *(const float *)user;
    return LDT_OK;
}

Test(custom, register_record_run_and_errors) {
    ldt_ctx *ctx = new_ctx();
    float c = 0.5f, xv[3] = {1, 2, 3}, out[3];
    int id, id2;
    ldt_tensor *x = ldt_constant(ctx, &(ldt_shape){1, {3}}, LDT_F32, xv), *y;
    ldt_tensor *i = ldt_param(ctx, "i", &(ldt_shape){1, {3}}, LDT_I32);
    cr_assert_eq(ldt_custom_op_register(ctx, "axpc", 1, axpc_shape, axpc_cpu, &c, &id), LDT_OK);
    cr_expect_geq(id, LDT_OP_COUNT);
    cr_expect_eq(ldt_custom_op_register(ctx, "axpc", 1, axpc_shape, axpc_cpu, &c, &id2),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_custom_op_register(ctx, "add", 1, axpc_shape, axpc_cpu, &c, &id2),
                 LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "built-in") != NULL, "%s", ldt_last_error());
    y = ldt_custom(ctx, id, &x, 1);
    cr_assert_not_null(y, "%s", ldt_last_error());
    cr_assert_eq(ldt_read(y, out, sizeof out), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 3.5f && out[1] == 6.5f && out[2] == 9.5f);
    cr_expect_null(ldt_custom(ctx, id, &i, 1));
    cr_expect(strstr(ldt_ctx_errmsg(ctx), "axpc: x is i32, expected f32") != NULL, "%s",
              ldt_ctx_errmsg(ctx));
    ldt_trace_discard(ctx);
    cr_expect_null(ldt_custom(ctx, id + 1, &x, 1));
    cr_expect(strstr(ldt_ctx_errmsg(ctx), "not a registered custom op") != NULL);
    ldt_trace_discard(ctx);
    cr_expect_null(ldt_custom(ctx, id, &x, 2));
    ldt_ctx_destroy(ctx);
}

/* End to end: a small expression against values computed by hand. */
Test(eager, values_by_hand) {
    ldt_ctx *ctx = new_ctx();
    float xv[6] = {1, 2, 3, 4, 5, 6}, wv[6] = {1, 0, -1, 2, 0.5f, 1}, out[4];
    ldt_tensor *x = ldt_input(ctx, "x", &(ldt_shape){2, {2, 3}}, LDT_F32);
    ldt_tensor *w = ldt_param(ctx, "w", &(ldt_shape){2, {3, 2}}, LDT_F32);
    ldt_tensor *y;
    ldt_input_bind(x, xv, sizeof xv);
    ldt_param_set(w, wv, sizeof wv);
    /* x @ w = [[1*1+2*-1+3*0.5, 1*0+2*2+3*1], [4-5+3, 0+10+6]] = [[0.5, 7], [2, 16]] */
    y = ldt_sub_scalar(ldt_matmul(x, w), 1.0); /* [[-0.5, 6], [1, 15]] */
    y = ldt_where(ldt_gt(y, ldt_constant(ctx, &(ldt_shape){0, {0}}, LDT_F32, (float[]){0})), y,
                  ldt_neg(y)); /* abs: [[0.5, 6], [1, 15]] */
    cr_assert_eq(ldt_read(y, out, sizeof out), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 0.5f && out[1] == 6 && out[2] == 1 && out[3] == 15, "%g %g %g %g",
              out[0], out[1], out[2], out[3]);
    {
        float s;
        y = ldt_sum(ldt_transpose(ldt_matmul(x, w), 0, 1), (int[]){1}, 1, 0); /* [2.5, 23] */
        y = ldt_select(y, 0, -1);
        cr_assert_eq(ldt_read(y, &s, sizeof s), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(s, 23.0f);
    }
    ldt_ctx_destroy(ctx);
}

/* Random ops take the stream at the context's offset and advance it by ceil(n/4). */
Test(eager, random_ops_follow_the_stream) {
    ldt_ctx *ctx = new_ctx();
    float u[10], z[10];
    uint8_t bits[10];
    ldt_tensor *a, *b, *c;
    cr_assert_eq(ldt_ctx_set_seed(ctx, 1234, 7), LDT_OK);
    a = ldt_rand(ctx, &(ldt_shape){1, {10}}, LDT_F32);
    b = ldt_randn(ctx, &(ldt_shape){2, {2, 5}}, LDT_F32);
    c = ldt_bernoulli(ctx, &(ldt_shape){1, {10}}, LDT_BOOL, 0.3);
    cr_expect_eq(ldt_ctx_rng_offset(ctx), 7 + 3 + 3 + 3);
    {
        ldt_tensor *ka = ldt_keep(a), *kb = ldt_keep(b);
        cr_assert(ka && kb, "%s", ldt_last_error());
        cr_assert_eq(ldt_read(c, bits, sizeof bits), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_read(ka, u, sizeof u), LDT_OK);
        cr_assert_eq(ldt_read(kb, z, sizeof z), LDT_OK);
    }
    for (int i = 0; i < 10; i++) {
        cr_expect_eq(u[i], ldt__rand_uniform_f32(1234, 7, i), "rand[%d]", i);
        cr_expect_eq(z[i], ldt__rand_normal_f32(1234, 10, i), "randn[%d]", i);
        cr_expect_eq(bits[i], ldt__rand_bernoulli(1234, 13, i, 0.3), "bernoulli[%d]", i);
    }
    cr_expect_eq(ldt_ctx_set_seed(ctx, 1, 0), LDT_OK);
    ldt_rand(ctx, &(ldt_shape){1, {1}}, LDT_F32);
    cr_expect_eq(ldt_ctx_set_seed(ctx, 1, 0), LDT_ERR_INVALID_USAGE);
    ldt_ctx_destroy(ctx);
}

/* Every op family through trace + eager, on x = [[1,2,3],[4,5,6]] (f32), against values
 * worked out by hand: catches any disagreement between recorded attributes and kernels. */
static void expect_vals(ldt_tensor *t, const float *want, int n, const char *what) {
    float got[16];
    cr_assert_not_null(t, "%s: %s", what, ldt_last_error());
    cr_assert_eq(ldt__nbytes(t), (int64_t)(n * sizeof(float)), "%s: %lld bytes", what,
                 (long long)ldt__nbytes(t));
    cr_assert_eq(ldt_read(t, got, n * (int64_t)sizeof(float)), LDT_OK, "%s: %s", what,
                 ldt_last_error());
    for (int i = 0; i < n; i++)
        cr_expect(fabsf(got[i] - want[i]) <= 1e-6f * (1 + fabsf(want[i])), "%s[%d] = %.9g, want %.9g",
                  what, i, got[i], want[i]);
}

static void expect_i64(ldt_tensor *t, const int64_t *want, int n, const char *what) {
    int64_t got[16];
    cr_assert_not_null(t, "%s: %s", what, ldt_last_error());
    cr_assert_eq(ldt_read(t, got, n * (int64_t)sizeof(int64_t)), LDT_OK, "%s: %s", what,
                 ldt_last_error());
    for (int i = 0; i < n; i++)
        cr_expect_eq(got[i], want[i], "%s[%d] = %lld, want %lld", what, i, (long long)got[i],
                     (long long)want[i]);
}

Test(eager, every_family_by_hand) {
    ldt_ctx *ctx = new_ctx();
    float xv[6] = {1, 2, 3, 4, 5, 6};
    ldt_tensor *x = ldt_constant(ctx, &(ldt_shape){2, {2, 3}}, LDT_F32, xv);
    ldt_tensor *w = ldt_constant(ctx, &(ldt_shape){2, {2, 3}}, LDT_F32,
                                 (float[]){1, 0, 1, 0, 1, 0}); /* [out=2, in=3] */
    ldt_tensor *b = ldt_constant(ctx, &(ldt_shape){1, {2}}, LDT_F32, (float[]){10, 20});
    ldt_tensor *parts[4], *vals, *idx;
    int n;
    expect_vals(ldt_linear(x, w, b), (float[]){14, 22, 20, 25}, 4, "linear");
    expect_vals(ldt_reshape(x, &(ldt_shape){2, {3, -1}}), xv, 6, "reshape");
    expect_vals(ldt_permute(x, (int[]){1, 0}, 2), (float[]){1, 4, 2, 5, 3, 6}, 6, "permute");
    expect_vals(ldt_slice(x, 1, 0, 3, 2), (float[]){1, 3, 4, 6}, 4, "slice step 2");
    expect_vals(ldt_select(x, 1, 1), (float[]){2, 5}, 2, "select");
    expect_vals(ldt_cat((ldt_tensor *[]){x, x}, 2, 1), (float[]){1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6},
                12, "cat");
    cr_assert_eq(ldt_split(x, 2, 1, parts, 4, &n), LDT_OK);
    expect_vals(parts[1], (float[]){3, 6}, 2, "split");
    expect_vals(ldt_expand(b, &(ldt_shape){2, {2, 2}}), (float[]){10, 20, 10, 20}, 4, "expand");
    expect_vals(ldt_alias(b), (float[]){10, 20}, 2, "alias");
    expect_vals(ldt_sum(x, (int[]){0}, 1, 0), (float[]){5, 7, 9}, 3, "sum dim 0");
    expect_vals(ldt_mean(x, (int[]){1}, 1, 1), (float[]){2, 5}, 2, "mean keepdim");
    expect_vals(ldt_amax(x, NULL, 0, 0), (float[]){6}, 1, "amax all");
    expect_vals(ldt_min(x, 0, 0), (float[]){1, 2, 3}, 3, "min dim 0");
    expect_i64(ldt_argmax(x, 1, 0), (int64_t[]){2, 2}, 2, "argmax");
    expect_i64(ldt_argmin(x, 0, 0), (int64_t[]){0, 0, 0}, 3, "argmin");
    cr_assert_eq(ldt_topk(x, 2, 1, 1, &vals, &idx), LDT_OK);
    cr_assert_not_null(ldt_keep(idx));
    expect_vals(vals, (float[]){3, 2, 6, 5}, 4, "topk values");
    cr_assert_eq(ldt_topk(x, 2, 1, 0, NULL, &idx), LDT_OK);
    expect_i64(idx, (int64_t[]){0, 1, 0, 1}, 4, "topk smallest indices");
    expect_vals(ldt_exp(ldt_log(x)), xv, 6, "exp(log)");
    expect_vals(ldt_rsqrt(ldt_mul(ldt_sqrt(x), ldt_sqrt(x))),
                (float[]){1, 1 / sqrtf(2), 1 / sqrtf(3), 0.5f, 1 / sqrtf(5), 1 / sqrtf(6)}, 6,
                "rsqrt(sqrt*sqrt)");
    expect_vals(ldt_pow_scalar(x, 2), (float[]){1, 4, 9, 16, 25, 36}, 6, "pow");
    expect_vals(ldt_rdiv_scalar(x, 12), (float[]){12, 6, 4, 3, 2.4f, 2}, 6, "rdiv");
    expect_vals(ldt_rsub_scalar(x, 1), (float[]){0, -1, -2, -3, -4, -5}, 6, "rsub");
    expect_vals(ldt_div(x, x), (float[]){1, 1, 1, 1, 1, 1}, 6, "div");
    expect_vals(ldt_gelu(ldt_sub_scalar(x, 1), 0),
                (float[]){0, 0.841344746f, 1.95449974f, 2.99595031f, 3.99987332f, 4.99999971f}, 6,
                "gelu erf");
    expect_vals(ldt_silu(ldt_sub_scalar(x, 1)),
                (float[]){0, 0.731058579f, 1.76159416f, 2.85772238f, 3.92805516f, 4.96653575f}, 6,
                "silu");
    expect_vals(ldt_tanh(ldt_sub_scalar(x, 1)),
                (float[]){0, 0.761594156f, 0.964027580f, 0.995054754f, 0.999329300f, 0.999909204f},
                6, "tanh");
    {
        int32_t iv[6];
        ldt_tensor *c = ldt_cast(ldt_mul_scalar(x, 1.5), LDT_I32); /* 1.5 3 4.5 6 7.5 9 */
        cr_assert_eq(ldt_read(c, iv, sizeof iv), LDT_OK, "%s", ldt_last_error());
        cr_expect(iv[0] == 1 && iv[2] == 4 && iv[4] == 7 && iv[5] == 9, "%d %d %d %d", iv[0],
                  iv[2], iv[4], iv[5]);
    }
    {
        uint8_t bv[6];
        ldt_tensor *c = ldt_ne(ldt_le(x, ldt_add_scalar(ldt_mul_scalar(x, 0), 3)),
                               ldt_ge(x, ldt_add_scalar(ldt_mul_scalar(x, 0), 5)));
        cr_assert_eq(ldt_read(c, bv, sizeof bv), LDT_OK, "%s", ldt_last_error());
        /* le3: 1 1 1 0 0 0; ge5: 0 0 0 0 1 1; ne: 1 1 1 0 1 1 */
        cr_expect(bv[0] == 1 && bv[3] == 0 && bv[4] == 1 && bv[5] == 1);
    }
    {
        /* bf16 storage with f32 math: 1/3 rounds once */
        ldt_tensor *h = ldt_div_scalar(ldt_cast(x, LDT_BF16), 3);
        uint16_t hv[6];
        cr_assert_eq(ldt_read(h, hv, sizeof hv), LDT_OK, "%s", ldt_last_error());
        cr_expect_eq(hv[0], ldt_f32_to_bf16(1.0f / 3.0f));
        cr_expect_eq(hv[5], ldt_f32_to_bf16(2.0f));
    }
    {
        ldt_tensor *ic = ldt_constant(ctx, &(ldt_shape){1, {2}}, LDT_I32, (int32_t[]){1, 2});
        cr_expect_null(ldt_add_scalar(ic, 0.5));
        cr_expect(strstr(ldt_ctx_errmsg(ctx), "not a whole number") != NULL, "%s",
                  ldt_ctx_errmsg(ctx));
        ldt_trace_discard(ctx);
    }
    ldt_ctx_destroy(ctx);
}

Test(record, nn_and_index_shape_rules_and_errors) {
    ldt_ctx *ctx = new_ctx();
    ldt_tensor *x = ldt_param(ctx, "x", &(ldt_shape){3, {2, 5, 8}}, LDT_F32);
    ldt_tensor *w8 = ldt_param(ctx, "w8", &(ldt_shape){1, {8}}, LDT_F32);
    ldt_tensor *w5 = ldt_param(ctx, "w5", &(ldt_shape){1, {5}}, LDT_F32);
    ldt_tensor *emb = ldt_param(ctx, "emb", &(ldt_shape){2, {11, 8}}, LDT_F32);
    ldt_tensor *tok = ldt_input(ctx, "tok", &(ldt_shape){2, {2, 5}}, LDT_I64);
    ldt_tensor *ftok = ldt_input(ctx, "ftok", &(ldt_shape){2, {2, 5}}, LDT_F32);
    ldt_tensor *idx1 = ldt_input(ctx, "idx1", &(ldt_shape){1, {3}}, LDT_I32);
    ldt_tensor *q = ldt_param(ctx, "q", &(ldt_shape){4, {2, 3, 5, 4}}, LDT_F32);
    ldt_tensor *v = ldt_param(ctx, "v", &(ldt_shape){4, {2, 3, 5, 6}}, LDT_F32);
    uint64_t off0;
    expect_shape(ldt_softmax(x, -1), ldt_test_shape(3, 2, 5, 8), "softmax");
    expect_shape(ldt_log_softmax(x, 1), ldt_test_shape(3, 2, 5, 8), "log_softmax");
    expect_shape(ldt_layer_norm(x, 1, w8, w8, 1e-5), ldt_test_shape(3, 2, 5, 8), "layer_norm");
    expect_shape(ldt_rms_norm(x, 1, NULL, 1e-6), ldt_test_shape(3, 2, 5, 8), "rms_norm");
    expect_shape(ldt_embedding(emb, tok), ldt_test_shape(3, 2, 5, 8), "embedding");
    expect_shape(ldt_cross_entropy(ldt_embedding(emb, tok), tok, -1), ldt_test_shape(0),
                 "cross_entropy");
    expect_shape(ldt_one_hot(idx1, 4), ldt_test_shape(2, 3, 4), "one_hot");
    expect_shape(ldt_index_select(x, 1, idx1), ldt_test_shape(3, 2, 3, 8), "index_select");
    expect_shape(ldt_gather(x, 2, ldt_cast(ldt_gt(x, x), LDT_I64)), ldt_test_shape(3, 2, 5, 8),
                 "gather");
    expect_shape(ldt_index_add(x, 1, idx1, ldt_index_select(x, 1, idx1)),
                 ldt_test_shape(3, 2, 5, 8), "index_add");
    expect_shape(ldt_index_put(x, (ldt_tensor *[]){idx1, idx1}, 2, w8, 1),
                 ldt_test_shape(3, 2, 5, 8), "index_put");
    off0 = ldt_ctx_rng_offset(ctx);
    expect_shape(ldt_dropout(x, 0.1, 1), ldt_test_shape(3, 2, 5, 8), "dropout");
    cr_expect_eq(ldt_ctx_rng_offset(ctx), off0 + 20, "dropout takes ceil(80/4) of the stream");
    cr_expect_eq(ldt_dropout(x, 0.1, 0)->op, LDT_OP_ALIAS, "eval dropout is the identity");
    expect_shape(ldt_scaled_dot_product_attention(q, q, v, 1, 0.0, 0), ldt_test_shape(4, 2, 3, 5, 6),
                 "sdpa");
    cr_expect_eq(ldt_ctx_rng_offset(ctx), off0 + 20, "sdpa without dropout takes no stream");
    cr_expect_eq(ldt_ctx_status(ctx), LDT_OK, "%s", ldt_ctx_errmsg(ctx));
    {
        static const char *const needles[] = {
            "layer_norm: weight is [5] f32, expected the last 1 dims of x [2,5,8] f32",
            "cross_entropy: targets are f32, expected i32 or i64",
            "embedding: indices is f32, expected i32 or i64",
            "softmax: dim 3 is out of range",
            "scaled_dot_product_attention: q [2,3,5,4], k [2,3,5,6]",
            "index_select: [2,5,8] and [2,5]; expected a 1-D index",
            "dropout: p = 1.5"};
        for (int i = 0; i < 7; i++) {
            ldt_tensor *r = NULL;
            ldt_trace_discard(ctx);
            switch (i) {
            case 0: r = ldt_layer_norm(x, 1, w5, NULL, 1e-5); break;
            case 1: r = ldt_cross_entropy(ldt_embedding(emb, tok), ftok, -1); break;
            case 2: r = ldt_embedding(emb, ftok); break;
            case 3: r = ldt_softmax(x, 3); break;
            case 4: r = ldt_scaled_dot_product_attention(q, v, v, 0, 0, 0); break;
            case 5: r = ldt_index_select(x, 1, tok); break;
            case 6: r = ldt_dropout(x, 1.5, 1); break;
            }
            cr_expect_null(r, "case %d", i);
            cr_expect(strstr(ldt_ctx_errmsg(ctx), needles[i]) != NULL, "case %d: %s", i,
                      ldt_ctx_errmsg(ctx));
        }
    }
    ldt_ctx_destroy(ctx);
}

/* The nn and indexing ops through trace + eager, against values by hand. */
Test(eager, nn_and_index_ops_by_hand) {
    ldt_ctx *ctx = new_ctx();
    ldt_tensor *row = ldt_constant(ctx, &(ldt_shape){2, {1, 3}}, LDT_F32, (float[]){1, 2, 3});
    ldt_tensor *tgt = ldt_constant(ctx, &(ldt_shape){1, {1}}, LDT_I64, (int64_t[]){2});
    ldt_tensor *emb = ldt_constant(ctx, &(ldt_shape){2, {3, 2}}, LDT_F32,
                                   (float[]){0, 1, 10, 11, 20, 21});
    ldt_tensor *ids = ldt_constant(ctx, &(ldt_shape){1, {3}}, LDT_I64, (int64_t[]){2, 0, 2});
    float s;
    expect_vals(ldt_softmax(row, 1), (float[]){0.0900305732f, 0.244728471f, 0.665240956f}, 3,
                "softmax");
    expect_vals(ldt_log_softmax(row, -1),
                (float[]){-2.40760596f, -1.40760596f, -0.407605964f}, 3, "log_softmax");
    expect_vals(ldt_cross_entropy(row, tgt, -1), (float[]){0.407605964f}, 1, "cross_entropy");
    expect_vals(ldt_layer_norm(row, 1, NULL, NULL, 0), (float[]){-1.22474487f, 0, 1.22474487f},
                3, "layer_norm");
    expect_vals(ldt_rms_norm(row, 1, NULL, 0),
                (float[]){0.462910049f, 0.925820099f, 1.38873015f}, 3, "rms_norm");
    expect_vals(ldt_embedding(emb, ids), (float[]){20, 21, 0, 1, 20, 21}, 6, "embedding");
    expect_i64(ldt_one_hot(ids, 3), (int64_t[]){0, 0, 1, 1, 0, 0, 0, 0, 1}, 9, "one_hot");
    expect_vals(ldt_index_select(emb, 0, ids), (float[]){20, 21, 0, 1, 20, 21}, 6,
                "index_select");
    expect_vals(ldt_index_add(emb, 0, ids, ldt_index_select(emb, 0, ids)),
                (float[]){0, 2, 10, 11, 60, 63}, 6, "index_add (duplicates add up)");
    /* causal attention: the first query sees only the first key, so row 0 is v[0] */
    {
        ldt_tensor *q = ldt_constant(ctx, &(ldt_shape){2, {2, 2}}, LDT_F32, (float[]){1, 0, 0, 1});
        ldt_tensor *v = ldt_constant(ctx, &(ldt_shape){2, {2, 2}}, LDT_F32, (float[]){5, 6, 7, 8});
        float out[4];
        ldt_tensor *y = ldt_scaled_dot_product_attention(q, q, v, 1, 0, 1.0);
        cr_assert_eq(ldt_read(y, out, sizeof out), LDT_OK, "%s", ldt_last_error());
        /* row 1: scores [0, 1] -> weights [1/(1+e), e/(1+e)] */
        {
            double w1 = exp(1.0) / (1 + exp(1.0));
            cr_expect(out[0] == 5 && out[1] == 6, "%g %g", out[0], out[1]);
            cr_expect(fabs(out[2] - (5 * (1 - w1) + 7 * w1)) < 1e-5, "%g", out[2]);
        }
    }
    /* dropout masks are the stream's bernoulli(p) values: dropped where it is 1 */
    {
        float xs[40], got[40];
        ldt_tensor *xt, *d;
        uint64_t off;
        for (int i = 0; i < 40; i++) xs[i] = (float)(i + 1);
        xt = ldt_constant(ctx, &(ldt_shape){2, {5, 8}}, LDT_F32, xs);
        ldt_ctx_set_seed(ctx, 77, 3);
        off = ldt_ctx_rng_offset(ctx);
        d = ldt_dropout(xt, 0.25, 1);
        cr_assert_eq(ldt_read(d, got, sizeof got), LDT_OK, "%s", ldt_last_error());
        for (int i = 0; i < 40; i++) {
            int drop = ldt__rand_bernoulli(77, off, i, 0.25);
            float want = drop ? 0.0f : xs[i] * (1.0f / 0.75f);
            cr_expect(got[i] == want, "dropout[%d] = %g, want %g", i, got[i], want);
        }
    }
    cr_assert_eq(ldt_read(ldt_sum(ldt_one_hot(ids, 4), NULL, 0, 0), &(int64_t){0}, 8), LDT_OK);
    (void)s;
    ldt_ctx_destroy(ctx);
}

/* A result too large for 64-bit byte counts is an error of the op that makes it, also where
 * its shape is an input's but its elements are wider; ops keeping shape and width record. */
Test(record, overflowing_results_fail_even_with_an_inputs_shape) {
    ldt_mesh *mesh;
    ldt_ctx_options co = {0};
    ldt_ctx *ctx;
    cr_assert_eq(ldt_mesh_parse("2", LDT_DEVICE_META, &mesh), LDT_OK); /* holds no data */
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK, "%s", ldt_last_error());
    /* 2^40 x 2^20 f32: 2^62 bytes, fine; as f64 2^63, one past INT64_MAX */
    ldt_tensor *x = ldt_input(ctx, "x", &(ldt_shape){2, {(int64_t)1 << 40, (int64_t)1 << 20}}, LDT_F32);
    ldt_tensor *y;
    cr_assert(x != NULL, "%s", ldt_ctx_errmsg(ctx));
    y = ldt_relu(ldt_add(x, x));
    cr_assert(y != NULL, "%s", ldt_ctx_errmsg(ctx));
    cr_assert(ldt_cast(y, LDT_F64) == NULL);
    cr_assert_neq(ldt_ctx_status(ctx), LDT_OK);
    cr_assert(strstr(ldt_ctx_errmsg(ctx), "cast: shape [1099511627776,1048576] f64: byte count exceeds") != NULL,
              "%s", ldt_ctx_errmsg(ctx));
    ldt_ctx_destroy(ctx);
    /* a new shape: [2^40, 2^20] @ [2^20, 2^40] holds 2^80 elements */
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK, "%s", ldt_last_error());
    x = ldt_input(ctx, "x", &(ldt_shape){2, {(int64_t)1 << 40, (int64_t)1 << 20}}, LDT_F32);
    y = ldt_input(ctx, "y", &(ldt_shape){2, {(int64_t)1 << 20, (int64_t)1 << 40}}, LDT_F32);
    cr_assert(ldt_matmul(x, y) == NULL);
    cr_assert_neq(ldt_ctx_status(ctx), LDT_OK);
    cr_assert(strstr(ldt_ctx_errmsg(ctx), "matmul: ") != NULL, "%s", ldt_ctx_errmsg(ctx));
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
