/* Numerical identity of planned programs with one device, for the strategy tests.
 *
 * pc_check_op(mesh, build, arg, tol): `build` records an op on a context (its inputs made
 * with pc_input / pc_param, which bind deterministic data) and returns its output. The op is
 * built on a 1-rank context and read eagerly (the reference), then on a context over `mesh`;
 * for every N-D strategy of the output node a plan with that strategy forced is run on the
 * threaded mesh and the gathered output compared with the reference: bitwise when tol == 0,
 * else |got - ref| <= tol * (1 + max |ref|). Returns the number of strategies checked. */
#ifndef LDT_TESTS_PLAN_CHECK_H
#define LDT_TESTS_PLAN_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "core/half.h"
#include "ldt/exec.h"
#include "ldt/planner.h"
#include "planner/program.h"
#include "tests/test_util.h"

typedef ldt_tensor *(*pc_build_fn)(ldt_ctx *ctx, void *arg);

/* Deterministic data for a tensor named `name`: floats in [-1, 1), integers in [0, range)
 * (range 0: [0, 7)), bool 0/1. */
static inline void *pc_data(const char *name, const ldt_shape *s, ldt_dtype dt, int64_t range) {
    int64_t n = 1;
    uint64_t st = 1469598103934665603ull;
    void *p;
    for (const char *c = name; *c; c++) st = (st ^ (unsigned char)*c) * 1099511628211ull;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    p = calloc((size_t)(n ? n : 1), ldt_dtype_size(dt));
    cr_assert(p != NULL);
    if (range <= 0) range = 7;
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = ldt_test_rand(&st);
        double f = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
        switch (dt) {
        case LDT_F32: ((float *)p)[i] = (float)f; break;
        case LDT_F64: ((double *)p)[i] = f; break;
        case LDT_F16: ((uint16_t *)p)[i] = ldt__f32_to_f16((float)f); break;
        case LDT_BF16: ((uint16_t *)p)[i] = ldt__f32_to_bf16((float)f); break;
        case LDT_I32: ((int32_t *)p)[i] = (int32_t)(r % (uint64_t)range); break;
        case LDT_I64: ((int64_t *)p)[i] = (int64_t)(r % (uint64_t)range); break;
        default: ((uint8_t *)p)[i] = (uint8_t)(r & 1); break;
        }
    }
    return p;
}

static inline int64_t pc_nbytes(const ldt_shape *s, ldt_dtype dt) {
    int64_t n = (int64_t)ldt_dtype_size(dt);
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

/* An input with deterministic data bound (integers in [0, range)). */
static inline ldt_tensor *pc_input(ldt_ctx *ctx, const char *name, ldt_shape s, ldt_dtype dt,
                                   int64_t range) {
    ldt_tensor *t = ldt_input(ctx, name, &s, dt);
    void *d = pc_data(name, &s, dt, range);
    cr_assert(t != NULL, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_input_bind(t, d, pc_nbytes(&s, dt)), LDT_OK, "%s", ldt_last_error());
    free(d);
    return t;
}

/* A parameter with deterministic values. */
static inline ldt_tensor *pc_param(ldt_ctx *ctx, const char *name, ldt_shape s, ldt_dtype dt) {
    ldt_tensor *t = ldt_param(ctx, name, &s, dt);
    void *d = pc_data(name, &s, dt, 0);
    cr_assert(t != NULL, "%s", ldt_ctx_errmsg(ctx));
    cr_assert_eq(ldt_param_set(t, d, pc_nbytes(&s, dt)), LDT_OK, "%s", ldt_last_error());
    free(d);
    return t;
}

static inline double pc_get(ldt_dtype dt, const void *p, int64_t i) {
    switch (dt) {
    case LDT_F32: return ((const float *)p)[i];
    case LDT_F64: return ((const double *)p)[i];
    case LDT_F16: return ldt__f16_to_f32(((const uint16_t *)p)[i]);
    case LDT_BF16: return ldt__bf16_to_f32(((const uint16_t *)p)[i]);
    case LDT_I32: return ((const int32_t *)p)[i];
    case LDT_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* Compares got with ref (n elements of dt); returns the first bad index or -1. */
static inline int64_t pc_compare(ldt_dtype dt, const void *got, const void *ref, int64_t n,
                                 double tol) {
    double mx = 0;
    if (tol == 0) {
        size_t es = ldt_dtype_size(dt);
        for (int64_t i = 0; i < n; i++)
            if (memcmp((const char *)got + i * es, (const char *)ref + i * es, es)) return i;
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        if (fabs(pc_get(dt, ref, i)) > mx) mx = fabs(pc_get(dt, ref, i));
    for (int64_t i = 0; i < n; i++) {
        double g = pc_get(dt, got, i), r = pc_get(dt, ref, i);
        if (isnan(r) && isnan(g)) continue;
        if (!(fabs(g - r) <= tol * (1 + mx))) return i;
    }
    return -1;
}

/* Checks one already-built output on ctx's mesh with strategy s of its node forced. */
static inline void pc_check_strategy(ldt_ctx *ctx, ldt_tensor *out, int s, const void *ref,
                                     double tol, const char *mesh_text) {
    ldt_shape shape;
    ldt_dtype dt = ldt_tensor_dtype(out);
    int64_t nb, n = 1, nn = ldt_trace_nodes(ctx), bad;
    int32_t *forced = malloc((size_t)nn * sizeof *forced);
    ldt_plan *plan = NULL;
    void *got;
    ldt_placement pl[LDT_MAX_DIMS];
    char pls[128];
    ldt_tensor_shape(out, &shape);
    for (int d = 0; d < shape.ndim; d++) n *= shape.dims[d];
    nb = pc_nbytes(&shape, dt);
    got = calloc((size_t)(nb ? nb : 1), 1);
    cr_assert(forced && got);
    for (int64_t i = 0; i < nn; i++) forced[i] = -1;
    forced[nn - 1] = s; /* the op under test is the last node recorded */
    cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &plan), LDT_OK, "mesh %s strategy %d: %s",
                 mesh_text, s, ldt_last_error());
    cr_assert_eq(ldt_plan_placements(plan, out, pl, LDT_MAX_DIMS), LDT_OK);
    ldt_placements_format(pl, ldt_mesh_ndim(ldt_ctx_mesh(ctx)), pls, sizeof pls);
    cr_assert_eq(ldt_plan_run(plan, 1, &out, &got, &nb), LDT_OK, "mesh %s strategy %d (out %s): %s",
                 mesh_text, s, pls, ldt_last_error());
    bad = pc_compare(dt, got, ref, n, tol);
    if (bad >= 0) {
        fprintf(stderr, "mesh %s strategy %d (out %s): element %lld is %.17g, expected %.17g\n",
                mesh_text, s, pls, (long long)bad, pc_get(dt, got, bad), pc_get(dt, ref, bad));
        ldt_plan_write_program(plan, 1, stderr);
    }
    cr_assert(bad < 0, "mesh %s strategy %d (out %s) differs from one device at element %lld",
              mesh_text, s, pls, (long long)bad);
    ldt_plan_destroy(plan);
    free(got);
    free(forced);
}

static inline int pc_check_op(const char *mesh_text, pc_build_fn build, void *arg, double tol) {
    ldt_ctx *one, *ctx;
    ldt_mesh *mesh;
    ldt_tensor *out;
    ldt_shape shape;
    ldt_ctx_options co = {0};
    ldt_plan *plan;
    int64_t nb, nn;
    int32_t *forced;
    int nstrat;
    void *ref;
    /* the reference: one device, eager */
    cr_assert_eq(ldt_ctx_create(NULL, &one), LDT_OK);
    out = build(one, arg);
    cr_assert(out != NULL, "build: %s", ldt_ctx_errmsg(one));
    ldt_tensor_shape(out, &shape);
    nb = pc_nbytes(&shape, ldt_tensor_dtype(out));
    ref = calloc((size_t)(nb ? nb : 1), 1);
    cr_assert(ref != NULL);
    cr_assert_eq(ldt_read(out, ref, nb), LDT_OK, "reference: %s", ldt_ctx_errmsg(one));
    ldt_ctx_destroy(one);
    /* the mesh */
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK, "%s", ldt_last_error());
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    out = build(ctx, arg);
    cr_assert(out != NULL, "build on %s: %s", mesh_text, ldt_ctx_errmsg(ctx));
    nn = ldt_trace_nodes(ctx);
    forced = malloc((size_t)nn * sizeof *forced);
    cr_assert(forced != NULL);
    for (int64_t i = 0; i < nn; i++) forced[i] = -1;
    cr_assert_eq(ldt__plan_create_forced(ctx, NULL, forced, &plan), LDT_OK, "%s", ldt_last_error());
    nstrat = ldt__plan_nstrategies(plan, nn - 1);
    ldt_plan_destroy(plan);
    free(forced);
    for (int s = 0; s < nstrat; s++) pc_check_strategy(ctx, out, s, ref, tol, mesh_text);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    free(ref);
    return nstrat;
}

#endif
