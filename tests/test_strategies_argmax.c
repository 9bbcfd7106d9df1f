/* argmax, argmin and topk over a sharded dim: every rank's (value, global index) winners are
 * exchanged with all_reduces into a Replicate output. Every N-D strategy, on meshes 2, 3, 4
 * and 2x2 with uneven sizes along the reduced dim (short and empty chunks, an empty chunk in
 * the middle of a nested Shard), equals one device bit for bit: ties (-0 and +0 included),
 * NaN, infinities that tie with the fills, integers at their extremes. */
#include <math.h>
#include <stdint.h>

#include "planner/plan_internal.h"
#include "tests/plan_check.h"

static const char *meshes[] = {"2", "3", "4", "2x2"};

enum { ARGMAX, ARGMIN, TOPK_V, TOPK_I };

/* Data patterns. */
enum {
    P_RANDOM, /* distinct values */
    P_TIES,   /* few values, -0 and +0 among them */
    P_NAN,    /* ties and NaN */
    P_INF,    /* -inf, +inf, -0, +0: ties with the fills */
    P_NEG_INF, /* every element -inf */
    P_POS_INF, /* every element +inf */
    P_ALL_NAN, /* every element NaN */
    P_COUNT
};

typedef struct ac {
    int op, keepdim, k, largest, pattern;
    ldt_dtype dt;
    ldt_shape shape;
    int dim;
} ac;

static double pattern_value(int pattern, uint64_t r) {
    static const double ties[] = {-1.0, -0.0, 0.0, 1.0, 2.0, 0.5};
    switch (pattern) {
    case P_RANDOM: return (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
    case P_TIES: return ties[r % 6];
    case P_NAN: return r % 5 == 0 ? NAN : ties[r % 6];
    case P_INF: {
        static const double v[] = {-INFINITY, INFINITY, -0.0, 0.0};
        return v[r % 4];
    }
    case P_NEG_INF: return -INFINITY;
    case P_POS_INF: return INFINITY;
    default: return NAN;
    }
}

/* Integers: few values with the dtype's extremes among them (the exchange sums with zeros). */
static int64_t int_value(ldt_dtype dt, int pattern, uint64_t r) {
    if (pattern == P_RANDOM) return (int64_t)(r % 1000) - 500;
    switch (r % 5) {
    case 0: return dt == LDT_I32 ? INT32_MIN : INT64_MIN;
    case 1: return dt == LDT_I32 ? INT32_MAX : INT64_MAX;
    case 2: return -1;
    case 3: return 0;
    default: return 1;
    }
}

static ldt_tensor *input_of(ldt_ctx *ctx, const ac *a) {
    int64_t n = 1;
    uint64_t st = 0x9E3779B97F4A7C15ull ^ (uint64_t)(a->pattern * 131 + a->dt);
    ldt_tensor *x = ldt_input(ctx, "x", &a->shape, a->dt);
    void *p;
    cr_assert(x != NULL, "%s", ldt_ctx_errmsg(ctx));
    for (int d = 0; d < a->shape.ndim; d++) n *= a->shape.dims[d];
    p = calloc((size_t)n, ldt_dtype_size(a->dt));
    cr_assert(p != NULL);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = ldt_test_rand(&st);
        switch (a->dt) {
        case LDT_F32: ((float *)p)[i] = (float)pattern_value(a->pattern, r); break;
        case LDT_F64: ((double *)p)[i] = pattern_value(a->pattern, r); break;
        case LDT_F16:
            ((uint16_t *)p)[i] = ldt__f32_to_f16((float)pattern_value(a->pattern, r));
            break;
        case LDT_BF16:
            ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)pattern_value(a->pattern, r));
            break;
        case LDT_I32: ((int32_t *)p)[i] = (int32_t)int_value(a->dt, a->pattern, r); break;
        case LDT_I64: ((int64_t *)p)[i] = int_value(a->dt, a->pattern, r); break;
        default: ((uint8_t *)p)[i] = (uint8_t)(r % 3); break;
        }
    }
    cr_assert_eq(ldt_input_bind(x, p, n * (int64_t)ldt_dtype_size(a->dt)), LDT_OK, "%s",
                 ldt_last_error());
    free(p);
    return x;
}

static ldt_tensor *build(ldt_ctx *ctx, void *arg) {
    const ac *a = arg;
    ldt_tensor *x = input_of(ctx, a), *t = NULL;
    switch (a->op) {
    case ARGMAX: return ldt_argmax(x, a->dim, a->keepdim);
    case ARGMIN: return ldt_argmin(x, a->dim, a->keepdim);
    case TOPK_V:
        cr_assert_eq(ldt_topk(x, a->k, a->dim, a->largest, &t, NULL), LDT_OK, "%s",
                     ldt_ctx_errmsg(ctx));
        return t;
    default:
        cr_assert_eq(ldt_topk(x, a->k, a->dim, a->largest, NULL, &t), LDT_OK, "%s",
                     ldt_ctx_errmsg(ctx));
        return t;
    }
}

/* What the planner offers for the op on `mesh_text`: the strategies whose input shards the
 * reduced dim (*sharded), and checks that each of them costs its all_reduces, gives a
 * Replicate output on those mesh dims, and lowers to 2 all_reduces (1 for topk values) on
 * every rank. Returns the number of strategies. */
static int inspect(const char *mesh_text, const ac *a, int *sharded) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_plan *plan;
    ldt_tensor *out;
    int64_t nn;
    int32_t *forced;
    int nstrat, nd;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
    nd = ldt_mesh_ndim(mesh);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    out = build(ctx, (void *)a);
    cr_assert(out != NULL);
    nn = ldt_trace_nodes(ctx);
    forced = malloc((size_t)nn * sizeof *forced);
    cr_assert(forced != NULL);
    for (int64_t i = 0; i < nn; i++) forced[i] = -1;
    cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &plan), LDT_OK, "%s", ldt_last_error());
    nstrat = ldt__plan_nstrategies(plan, nn - 1);
    *sharded = 0;
    for (int s = 0; s < nstrat; s++) {
        const ldt__sset *ss = plan->node_ss[nn - 1];
        const uint16_t *pl = LDT__SSET_PL(ss, s);
        const ldt_placement *po = ldt__plist(plan, pl[0]), *pi = ldt__plist(plan, pl[1]);
        int here = 0;
        ldt_plan *fp;
        for (int i = 0; i < nd; i++)
            if (pi[i].kind == LDT_PLACE_SHARD && pi[i].dim == a->dim) {
                here = 1;
                cr_assert_eq(po[i].kind, LDT_PLACE_REPLICATE, "mesh %s strategy %d", mesh_text, s);
            }
        if (!here) continue;
        (*sharded)++;
        cr_assert(ss->own != NULL && ss->own[s] > 0, "mesh %s strategy %d: no comm cost",
                  mesh_text, s);
        forced[nn - 1] = s;
        cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &fp), LDT_OK, "%s",
                     ldt_last_error());
        for (int i = 0; i < ldt_mesh_nranks(mesh); i++) {
            ldt_status st;
            const ldt__program *prog = ldt__plan_program(fp, ldt_mesh_rank_at(mesh, i), &st);
            int nar = 0;
            cr_assert(prog != NULL, "%s", ldt_last_error());
            for (int64_t j = 0; j < prog->nins; j++)
                if (prog->ins[j].kind == LDT__I_ALL_REDUCE && prog->ins[j].node == nn - 1) nar++;
            cr_assert_eq(nar, a->op == TOPK_V ? 1 : 2,
                         "mesh %s strategy %d rank %d: %d all_reduces", mesh_text, s, i, nar);
        }
        ldt_plan_destroy(fp);
        forced[nn - 1] = -1;
    }
    ldt_plan_destroy(plan);
    free(forced);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return nstrat;
}

/* Every strategy on every mesh, bitwise. */
static void check_all(const ac *a) {
    for (int i = 0; i < 4; i++) {
        int n = pc_check_op(meshes[i], build, (void *)a, 0);
        cr_assert(n > 1, "mesh %s: only %d strategy", meshes[i], n);
    }
}

static ac arg2(int op, ldt_dtype dt, int pattern, int64_t rows, int64_t cols, int dim) {
    ac a = {op, 0, 1, 1, pattern, dt, ldt_test_shape(2, rows, cols), dim};
    return a;
}

/* ---------------------------------------------------------------------------------------
 * The sharded options exist (and are refused where topk's k does not fit every chunk).
 */
Test(strategies_argmax, sharded_options_exist) {
    int sh;
    /* 5 over 4: 2,2,1,0 (an empty chunk); 2 over 2x2 nested: 1,0,1,0 (empty in the middle) */
    ac a = arg2(ARGMAX, LDT_F32, P_TIES, 5, 3, 0);
    cr_assert(inspect("4", &a, &sh) > 1);
    cr_assert(sh >= 1, "argmax over a sharded dim: no option");
    a = arg2(ARGMIN, LDT_F64, P_TIES, 3, 2, 1);
    a.shape = ldt_test_shape(2, 3, 2);
    cr_assert(inspect("2x2", &a, &sh) > 1);
    /* S1 on either mesh dim or on both */
    cr_assert(sh >= 3, "argmin over dim 1 on 2x2: %d sharded strategies", sh);
    /* topk k=3 over 9 on 4: 3,3,3,0 fits */
    a = arg2(TOPK_I, LDT_F32, P_TIES, 4, 9, 1);
    a.k = 3;
    inspect("4", &a, &sh);
    cr_assert(sh >= 1, "topk k=3 over 9 on 4: no sharded option");
    a.op = TOPK_V;
    inspect("4", &a, &sh);
    cr_assert(sh >= 1);
    /* topk k=2 over 7 on 3: 3,3,1 does not fit */
    a = arg2(TOPK_I, LDT_F32, P_TIES, 4, 7, 1);
    a.k = 2;
    inspect("3", &a, &sh);
    cr_assert_eq(sh, 0, "topk k=2 over 7 on 3 (a chunk of 1) must not shard the dim");
    /* ... but k=1 does */
    a.k = 1;
    inspect("3", &a, &sh);
    cr_assert(sh >= 1);
}

/* ---------------------------------------------------------------------------------------
 * argmax, argmin.
 */
static void argmax_cases(ldt_dtype dt, int p0, int p1) {
    static const int64_t sizes[] = {2, 5, 7};
    for (int op = ARGMAX; op <= ARGMIN; op++)
        for (int p = p0; p < p1; p++)
            for (int s = 0; s < 3; s++)
                for (int keep = 0; keep < 2; keep++) {
                    ac a = arg2(op, dt, p, sizes[s], 3, 0);
                    a.keepdim = keep;
                    check_all(&a);
                    a = arg2(op, dt, p, 3, sizes[s], 1);
                    a.keepdim = keep;
                    check_all(&a);
                }
}

Test(strategies_argmax, argmax_argmin_f32, .timeout = 120) { argmax_cases(LDT_F32, 0, P_COUNT); }
Test(strategies_argmax, argmax_argmin_f64, .timeout = 120) { argmax_cases(LDT_F64, P_TIES, P_ALL_NAN + 1); }

/* A 3-D input: the other dims shard too (outer and inner rows around the reduced dim). */
Test(strategies_argmax, argmax_3d) {
    for (int op = ARGMAX; op <= ARGMIN; op++)
        for (int p = P_RANDOM; p <= P_INF; p++)
            for (int keep = 0; keep < 2; keep++) {
                ac a = {op, keep, 1, 1, p, LDT_F32, ldt_test_shape(3, 3, 7, 2), 1};
                check_all(&a);
            }
}

Test(strategies_argmax, argmax_int) {
    for (int op = ARGMAX; op <= ARGMIN; op++)
        for (int p = P_RANDOM; p <= P_TIES; p++) {
            ac a = arg2(op, LDT_I32, p, 7, 3, 0);
            check_all(&a);
            a = arg2(op, LDT_I64, p, 3, 5, 1);
            a.keepdim = 1;
            check_all(&a);
            a = arg2(op, LDT_U8, p, 5, 2, 0);
            check_all(&a);
        }
}

/* ---------------------------------------------------------------------------------------
 * topk: k = 1..3, largest and smallest, values and indices.
 */
static void topk_cases(ldt_dtype dt, int p0, int p1) {
    static const int64_t sizes[] = {5, 7, 9};
    for (int op = TOPK_V; op <= TOPK_I; op++)
        for (int p = p0; p < p1; p++)
            for (int k = 1; k <= 3; k++)
                for (int largest = 0; largest < 2; largest++)
                    for (int s = 0; s < 3; s++) {
                        ac a = arg2(op, dt, p, sizes[s], 2, 0);
                        a.k = k;
                        a.largest = largest;
                        check_all(&a);
                        a = arg2(op, dt, p, 2, sizes[s], 1);
                        a.k = k;
                        a.largest = largest;
                        check_all(&a);
                    }
}

Test(strategies_argmax, topk_f32, .timeout = 240) { topk_cases(LDT_F32, 0, P_COUNT); }
Test(strategies_argmax, topk_f64, .timeout = 240) { topk_cases(LDT_F64, P_TIES, P_INF + 1); }

Test(strategies_argmax, topk_3d_and_int) {
    for (int op = TOPK_V; op <= TOPK_I; op++)
        for (int largest = 0; largest < 2; largest++) {
            ac a = {op, 0, 2, largest, P_NAN, LDT_F32, ldt_test_shape(3, 3, 8, 2), 1};
            check_all(&a);
            a.dt = LDT_I64;
            a.pattern = P_TIES;
            check_all(&a);
            a.dt = LDT_I32;
            a.k = 3;
            a.shape = ldt_test_shape(2, 9, 3);
            a.dim = 0;
            check_all(&a);
        }
}

/* Half types: values pass the exchange through f32 and back, exactly. */
Test(strategies_argmax, half_types) {
    ldt_dtype dts[] = {LDT_F16, LDT_BF16};
    for (int i = 0; i < 2; i++)
        for (int p = P_RANDOM; p <= P_INF; p++) {
            ac a = arg2(ARGMAX, dts[i], p, 7, 3, 0);
            check_all(&a);
            a = arg2(TOPK_V, dts[i], p, 3, 9, 1);
            a.k = 2;
            a.largest = p & 1;
            check_all(&a);
        }
}
