/* CPU random kernels: whole tensors and every kind of shard, bitwise against the stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "core/ops.h"
#include "kernels/common/philox.h"
#include "kernels/cpu/kernel.h"
#include "tests/layout_ref.h"
#include "tests/test_util.h"

static const ldt_dtype k_all[8] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                   LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};

#define S(...)                                                                                     \
    shp((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static ldt_shape shp(int ndim, const int64_t *dims) {
    ldt_shape s = {ndim, {0}};
    for (int d = 0; d < ndim; d++) s.dims[d] = dims[d];
    return s;
}

static int64_t numel(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* One random op's parameters, as the kernel gets them. */
typedef struct rparams {
    int op;
    uint64_t seed, offset;
    double f0, f1;
} rparams;

static const char *opname(int op) {
    return op == LDT_OP_RAND ? "rand" : op == LDT_OP_RANDN ? "randn" : "bernoulli";
}

static ldt_status run(const rparams *p, ldt_dtype t, ldt_shape s, void *out, const ldt_region *r,
                      const ldt_shape *gs) {
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = (int64_t)p->seed;
    a.i[1] = (int64_t)p->offset;
    a.f[0] = p->f0;
    a.f[1] = p->f1;
    ldt__kcall c = {p->op, &a, 0, NULL, {out, s, t}, r, gs, NULL};
    return ldt__k_random(&c);
}

/* The expected element at global index i, encoded in dtype t, from the single-element stream
 * functions: f32 values widened or rounded, bernoulli 0/1. */
static void expect_elem(const rparams *p, ldt_dtype t, int64_t i, void *dst) {
    float f;
    int bit = 0;
    if (p->op == LDT_OP_RAND)
        f = ldt__rand_uniform_scale_f32(ldt__rand_uniform_f32(p->seed, p->offset, i), (float)p->f0,
                                        (float)p->f1);
    else if (p->op == LDT_OP_RANDN)
        f = ldt__rand_mul_add_f32((float)p->f0, (float)p->f1,
                                  ldt__rand_normal_f32(p->seed, p->offset, i));
    else {
        bit = ldt__rand_bernoulli(p->seed, p->offset, i, p->f0);
        f = (float)bit;
    }
    switch (t) {
    case LDT_F32: memcpy(dst, &f, 4); break;
    case LDT_F64: {
        double d = f;
        memcpy(dst, &d, 8);
    } break;
    case LDT_F16: {
        uint16_t h = ldt__f32_to_f16(f);
        memcpy(dst, &h, 2);
    } break;
    case LDT_BF16: {
        uint16_t h = ldt__f32_to_bf16(f);
        memcpy(dst, &h, 2);
    } break;
    case LDT_I32: {
        int32_t v = bit;
        memcpy(dst, &v, 4);
    } break;
    case LDT_I64: {
        int64_t v = bit;
        memcpy(dst, &v, 8);
    } break;
    default: *(uint8_t *)dst = (uint8_t)bit; break;
    }
}

static double as_double(ldt_dtype t, const void *p) {
    switch (t) {
    case LDT_F32: return *(const float *)p;
    case LDT_F64: return *(const double *)p;
    case LDT_F16: return ldt__f16_to_f32(*(const uint16_t *)p);
    case LDT_BF16: return ldt__bf16_to_f32(*(const uint16_t *)p);
    case LDT_I32: return *(const int32_t *)p;
    case LDT_I64: return (double)*(const int64_t *)p;
    default: return *(const uint8_t *)p;
    }
}

/* local[k] must be bitwise the stream value of global index gidx[k] (gidx NULL: k itself).
 * Prints the first values that differ. */
static int compare(const char *what, const rparams *p, ldt_dtype t, const void *local,
                   const int64_t *gidx, int64_t n) {
    size_t es = ldt_dtype_size(t);
    int bad = 0;
    for (int64_t k = 0; k < n; k++) {
        char want[8];
        int64_t g = gidx ? gidx[k] : k;
        expect_elem(p, t, g, want);
        if (memcmp((const char *)local + (size_t)k * es, want, es) != 0 && bad++ < 8)
            fprintf(stderr, "%s: %s %s local %lld (global %lld): got %.9g, want %.9g\n", what,
                    opname(p->op), ldt_dtype_name(t), (long long)k, (long long)g,
                    as_double(t, (const char *)local + (size_t)k * es), as_double(t, want));
    }
    return bad;
}

static const rparams k_params[] = {
    {LDT_OP_RAND, 0, 0, 0.0, 1.0},
    {LDT_OP_RAND, 0x123456789abcdef0ull, 0x0000000500000007ull, -3.0, 5.5},
    {LDT_OP_RAND, 42, 7, 1.0, 2.0}, /* where lo + (hi - lo) u can round up to hi: clamped */
    {LDT_OP_RANDN, 0, 0, 0.0, 1.0},
    {LDT_OP_RANDN, 0xfedcba9876543210ull, 0xffffffff00000001ull, 10.0, 3.0},
    {LDT_OP_BERNOULLI, 0, 0, 0.5, 0},
    {LDT_OP_BERNOULLI, 0xdeadbeefcafef00dull, 1ull << 40, 0.3, 0},
    {LDT_OP_BERNOULLI, 5, 5, 0.0, 0},
    {LDT_OP_BERNOULLI, 5, 5, 1.0, 0},
};
#define NPARAMS ((int)(sizeof k_params / sizeof k_params[0]))

static int supported(int op, ldt_dtype t) {
    return ldt_dtype_is_float(t) || op == LDT_OP_BERNOULLI;
}

/* ---------------------------------------------------------------------------------------
 * Whole tensors (no region): local index = global index.
 */
Test(random, whole_tensor_every_dtype) {
    const ldt_shape shapes[] = {{0, {0}}, S(1), S(7), S(7, 5), S(3, 4, 5), S(0, 3), S(33, 129)};
    for (int pi = 0; pi < NPARAMS; pi++)
        for (int di = 0; di < 8; di++) {
            ldt_dtype t = k_all[di];
            if (!supported(k_params[pi].op, t)) continue;
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                int64_t n = numel(&shapes[si]);
                void *out = malloc((size_t)(n ? n : 1) * 8);
                memset(out, 0x5a, (size_t)(n ? n : 1) * 8);
                ldt_status st = run(&k_params[pi], t, shapes[si], out, NULL, NULL);
                cr_assert_eq(st, LDT_OK, "%s %s: %s", opname(k_params[pi].op), ldt_dtype_name(t),
                             ldt_last_error());
                char what[64];
                ldt_shape_format(&shapes[si], what, sizeof what);
                int bad = compare(what, &k_params[pi], t, out, NULL, n);
                cr_assert_eq(bad, 0, "%s %s %s (params %d): %d of %lld differ",
                             opname(k_params[pi].op), ldt_dtype_name(t), what, pi, bad,
                             (long long)n);
                free(out);
            }
        }
}

/* The values make sense: rand in [lo, hi), bernoulli exact at p = 0 and 1 (the bitwise test
 * already pins them to the stream; this guards the parameter plumbing). */
Test(random, ranges_and_extremes) {
    float out[1000];
    rparams p = {LDT_OP_RAND, 9, 9, -2.0, 3.0};
    cr_assert_eq(run(&p, LDT_F32, S(1000), out, NULL, NULL), LDT_OK);
    for (int i = 0; i < 1000; i++)
        cr_assert(out[i] >= -2.0f && out[i] < 3.0f, "rand[%d] = %g outside [-2, 3)", i, out[i]);
    uint8_t b[1000];
    p.op = LDT_OP_BERNOULLI;
    p.f0 = 0.0;
    cr_assert_eq(run(&p, LDT_BOOL, S(1000), b, NULL, NULL), LDT_OK);
    for (int i = 0; i < 1000; i++) cr_assert(b[i] == 0, "bernoulli(0)[%d] = %d", i, b[i]);
    p.f0 = 1.0;
    cr_assert_eq(run(&p, LDT_U8, S(1000), b, NULL, NULL), LDT_OK);
    for (int i = 0; i < 1000; i++) cr_assert(b[i] == 1, "bernoulli(1)[%d] = %d", i, b[i]);
}

/* ---------------------------------------------------------------------------------------
 * Shards: each rank's local output, at its global positions, is the whole tensor.
 */

/* Runs every rank of spec with the kernel and checks each local element against the global
 * index the brute-force layout reference gives it (ascending global order is local order),
 * and that the ranks together cover every element. Returns the number of mismatches. */
static int check_spec(const char *what, const rparams *p, ldt_dtype t, const ldt_spec *spec) {
    int64_t n = numel(&spec->shape);
    int64_t *owned = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    char *covered = calloc((size_t)(n ? n : 1), 1);
    int bad = 0;
    for (int pos = 0; pos < ldt_mesh_nranks(spec->mesh); pos++) {
        int rank = ldt_mesh_rank_at(spec->mesh, pos);
        int64_t coord[LDT_MAX_DIMS];
        ldt_region r;
        cr_assert_eq(ldt_layout(spec, rank, &r), LDT_OK, "%s: %s", what, ldt_last_error());
        ldt_mesh_coord(spec->mesh, rank, coord);
        int64_t ln = ref_owned(spec, coord, owned);
        cr_assert_eq(ln, numel(&r.local_shape), "%s rank %d: layout and reference disagree", what,
                     rank);
        void *local = malloc((size_t)(ln ? ln : 1) * 8);
        memset(local, 0x5a, (size_t)(ln ? ln : 1) * 8);
        ldt_status st = run(p, t, r.local_shape, local, &r, &spec->shape);
        cr_assert_eq(st, LDT_OK, "%s rank %d: %s", what, rank, ldt_last_error());
        char w[160];
        snprintf(w, sizeof w, "%s rank %d", what, rank);
        bad += compare(w, p, t, local, owned, ln);
        for (int64_t k = 0; k < ln; k++) covered[owned[k]] = 1;
        free(local);
    }
    for (int64_t i = 0; i < n; i++)
        if (!covered[i] && bad++ < 8)
            fprintf(stderr, "%s: element %lld held by no rank\n", what, (long long)i);
    free(owned);
    free(covered);
    return bad;
}

static void check_named(const char *mesh_text, ldt_shape shape, const char *pl_text) {
    ldt_mesh *m;
    ldt_spec spec;
    ldt_placement pl[LDT_MAX_DIMS];
    int npl;
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_placements_parse(pl_text, shape.ndim, pl, LDT_MAX_DIMS, &npl), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt_spec_init(&spec, m, &shape, pl, npl, LDT_F32), LDT_OK, "%s", ldt_last_error());
    char what[128];
    ldt_spec_format(&spec, what, sizeof what);
    for (int pi = 0; pi < NPARAMS; pi++)
        for (int di = 0; di < 8; di++) {
            if (!supported(k_params[pi].op, k_all[di])) continue;
            int bad = check_spec(what, &k_params[pi], k_all[di], &spec);
            cr_assert_eq(bad, 0, "%s: %s %s: %d mismatches", what, opname(k_params[pi].op),
                         ldt_dtype_name(k_all[di]), bad);
        }
    ldt_mesh_destroy(m);
}

Test(random, named_specs) {
    check_named("2x2", S(7, 5), "S0,S1"); /* uneven on both dims */
    check_named("2x2", S(7, 5), "S1,S0");
    check_named("2x2", S(7, 5), "S0,S0");    /* nested: rows in quarters, uneven */
    check_named("2x2", S(7, 5), "R,S1");     /* replicated: two ranks make the same values */
    check_named("2x2", S(6, 5), "IS0:3,S1"); /* interleaved: three row blocks per rank */
    check_named("2x2", S(6, 5), "S1,IS0:2");
    check_named("2x2", S(5, 6), "S0,IS1:3"); /* interleaved innermost dim: runs within a row */
    check_named("4", S(3, 5), "S0");         /* rank 3 empty */
    check_named("8", S(5, 3), "S1");         /* columns: five ranks empty */
    check_named("2x3", S(4, 6, 5), "S2,IS1:2");
    check_named("3", S(7), "S0");               /* 1-D: 3, 3, 1 */
    check_named("2", (ldt_shape){0, {0}}, "R"); /* 0-dim */
}

Test(random, random_specs) {
    uint64_t rng = 17;
    int cases = ldt_test_cases(150);
    for (int c = 0; c < cases; c++) {
        ldt_mesh *m;
        ldt_spec spec;
        ldt_dtype t = k_all[c % 8];
        rparams p = k_params[(c / 8) % NPARAMS];
        if (!supported(p.op, t)) p = k_params[5 + c % 4]; /* a bernoulli */
        p.seed = ldt_test_rand(&rng);
        p.offset = ldt_test_rand(&rng) >> (c % 64);
        ref_random_spec(&rng, 0, t, &m, &spec);
        char what[160];
        ldt_spec_format(&spec, what, sizeof what);
        int bad = check_spec(what, &p, t, &spec);
        cr_assert_eq(bad, 0, "case %d %s: %s %s: %d mismatches", c, what, opname(p.op),
                     ldt_dtype_name(t), bad);
        ldt_mesh_destroy(m);
    }
}

/* A region built by hand: rows {1, 2, 5, 6} (two runs of 2, every 4) x columns {3, 4} of a
 * [7, 5] tensor, and an interleaved inner dim: columns {0, 3} of [2, 5]. */
Test(random, hand_built_regions) {
    ldt_shape gs = S(7, 5);
    ldt_region r;
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.local_shape = S(4, 2);
    r.runs[0] = (ldt_dim_runs){1, 2, 2, 4};
    r.runs[1] = (ldt_dim_runs){3, 2, 1, 2};
    r.offset[0] = 1;
    r.offset[1] = 3;
    r.nslices = 2;
    r.numel = 8;
    const int64_t want[8] = {1 * 5 + 3, 1 * 5 + 4, 2 * 5 + 3, 2 * 5 + 4,
                             5 * 5 + 3, 5 * 5 + 4, 6 * 5 + 3, 6 * 5 + 4};
    for (int pi = 0; pi < NPARAMS; pi++) {
        float out[8];
        cr_assert_eq(run(&k_params[pi], LDT_F32, r.local_shape, out, &r, &gs), LDT_OK, "%s",
                     ldt_last_error());
        cr_assert_eq(compare("hand region", &k_params[pi], LDT_F32, out, want, 8), 0);
    }
    ldt_shape gs2 = S(2, 5);
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.local_shape = S(2, 2);
    r.runs[0] = (ldt_dim_runs){0, 2, 1, 2};
    r.runs[1] = (ldt_dim_runs){0, 1, 2, 3};
    r.nslices = 2;
    r.numel = 4;
    const int64_t want2[4] = {0, 3, 5, 8};
    for (int pi = 0; pi < NPARAMS; pi++) {
        double out[4];
        cr_assert_eq(run(&k_params[pi], LDT_F64, r.local_shape, out, &r, &gs2), LDT_OK, "%s",
                     ldt_last_error());
        cr_assert_eq(compare("hand interleaved region", &k_params[pi], LDT_F64, out, want2, 4), 0);
    }
}

/* ---------------------------------------------------------------------------------------
 * Errors.
 */
Test(random, errors) {
    float out[16];
    for (int op = LDT_OP_RAND; op <= LDT_OP_RANDN; op++)
        for (int di = 4; di < 8; di++) {
            rparams p = {op, 0, 0, 0.0, 1.0};
            ldt_status st = run(&p, k_all[di], S(4), out, NULL, NULL);
            cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "%s %s: %d", opname(op),
                         ldt_dtype_name(k_all[di]), st);
            cr_assert(strstr(ldt_last_error(), opname(op)) &&
                          strstr(ldt_last_error(), ldt_dtype_name(k_all[di])),
                      "%s", ldt_last_error());
        }
    rparams bad_range = {LDT_OP_RAND, 0, 0, 1.0, 1.0};
    cr_assert_eq(run(&bad_range, LDT_F32, S(4), out, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "rand: range"), "%s", ldt_last_error());
    bad_range.f0 = -INFINITY;
    cr_assert_eq(run(&bad_range, LDT_F32, S(4), out, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    rparams bad_std = {LDT_OP_RANDN, 0, 0, 0.0, -1.0};
    cr_assert_eq(run(&bad_std, LDT_F32, S(4), out, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "randn"), "%s", ldt_last_error());
    rparams bad_p = {LDT_OP_BERNOULLI, 0, 0, 1.5, 0};
    cr_assert_eq(run(&bad_p, LDT_F32, S(4), out, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "bernoulli: p = 1.5"), "%s", ldt_last_error());
    bad_p.f0 = NAN;
    cr_assert_eq(run(&bad_p, LDT_F32, S(4), out, NULL, NULL), LDT_ERR_INVALID_ARGUMENT);

    /* regions that do not fit the output or the global shape */
    rparams ok = {LDT_OP_RAND, 0, 0, 0.0, 1.0};
    ldt_shape gs = S(7, 5);
    ldt_region r;
    memset(&r, 0, sizeof r);
    r.ndim = 2;
    r.local_shape = S(2, 5);
    r.runs[0] = (ldt_dim_runs){0, 2, 1, 2};
    r.runs[1] = (ldt_dim_runs){0, 5, 1, 5};
    cr_assert_eq(run(&ok, LDT_F32, S(2, 5), out, &r, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "global shape"), "%s", ldt_last_error());
    cr_assert_eq(run(&ok, LDT_F32, S(2, 4), out, &r, &gs), LDT_ERR_INVALID_ARGUMENT);
    r.runs[0].start = 6; /* rows 6, 7 of 7 */
    cr_assert_eq(run(&ok, LDT_F32, S(2, 5), out, &r, &gs), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "region dim 0"), "%s", ldt_last_error());
    r.runs[0].start = 5;
    cr_assert_eq(run(&ok, LDT_F32, S(2, 5), out, &r, &gs), LDT_OK, "%s", ldt_last_error());

    ldt__attrs a;
    memset(&a, 0, sizeof a);
    ldt__kcall c = {LDT_OP_SUM, &a, 0, NULL, {out, S(4), LDT_F32}, NULL, NULL, NULL};
    cr_assert_eq(ldt__k_random(&c), LDT_ERR_INTERNAL);
    c.op = LDT_OP_RAND;
    c.attrs = NULL;
    cr_assert_eq(ldt__k_random(&c), LDT_ERR_INVALID_ARGUMENT);
}
