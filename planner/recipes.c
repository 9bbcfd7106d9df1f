/* Lowering init recipes (deferred init) to a rank's program: one value per parameter (its
 * shard on this rank) and the instruction that fills it from global indices, so the same
 * program runs on the CPU now and on a device later. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "planner/program.h"

/* fan_in, fan_out of a weight [out, in, ...]. */
static void fans(const ldt_shape *s, double *fin, double *fout) {
    double rec = 1;
    for (int d = 2; d < s->ndim; d++) rec *= (double)s->dims[d];
    *fin = (double)s->dims[1] * rec;
    *fout = (double)s->dims[0] * rec;
}

/* The random op and its (f0, f1) that draw recipe `in`; 0 for the non-random kinds.
 * trunc_normal's bounds go to i[2], i[3] as double bits, as ldt_trunc_normal records them. */
static int random_op(const ldt_init *in, const ldt_shape *s, double *f0, double *f1, int64_t *i2,
                     int64_t *i3) {
    double fin = 0, fout = 0, gain;
    if (in->kind >= LDT_INIT_KAIMING_UNIFORM && in->kind <= LDT_INIT_XAVIER_NORMAL) fans(s, &fin, &fout);
    switch (in->kind) {
    case LDT_INIT_UNIFORM: *f0 = in->a, *f1 = in->b; return LDT_OP_RAND;
    case LDT_INIT_NORMAL: *f0 = in->a, *f1 = in->b; return LDT_OP_RANDN;
    case LDT_INIT_TRUNC_NORMAL:
        *f0 = in->a, *f1 = in->b;
        memcpy(i2, &in->lo, sizeof *i2);
        memcpy(i3, &in->hi, sizeof *i3);
        return LDT_OP_TRUNC_NORMAL;
    case LDT_INIT_KAIMING_UNIFORM:
        gain = sqrt(2.0 / (1.0 + in->a * in->a)); /* leaky_relu with negative slope a */
        *f1 = gain * sqrt(3.0 / (in->fan_out ? fout : fin));
        *f0 = -*f1;
        return LDT_OP_RAND;
    case LDT_INIT_KAIMING_NORMAL:
        gain = sqrt(2.0 / (1.0 + in->a * in->a));
        *f0 = 0, *f1 = gain / sqrt(in->fan_out ? fout : fin);
        return LDT_OP_RANDN;
    case LDT_INIT_XAVIER_UNIFORM:
        gain = in->a != 0 ? in->a : 1.0;
        *f1 = gain * sqrt(6.0 / (fin + fout));
        *f0 = -*f1;
        return LDT_OP_RAND;
    case LDT_INIT_XAVIER_NORMAL:
        gain = in->a != 0 ? in->a : 1.0;
        *f0 = 0, *f1 = gain * sqrt(2.0 / (fin + fout));
        return LDT_OP_RANDN;
    default: return 0;
    }
}

static ldt_status lower_one(ldt__lower *L, const ldt_tensor *t, const ldt_placement *pl, int rank,
                            int32_t node) {
    const ldt__persistent *p = LDT__P(t);
    const ldt_init *in = &p->init;
    ldt_spec spec;
    ldt_region r;
    int32_t v;
    double f0 = 0, f1 = 0;
    int64_t i2 = 0, i3 = 0;
    int op;
    LDT_CHECK(ldt_spec_init(&spec, L->mesh, t->shape, pl, ldt_mesh_ndim(L->mesh), (ldt_dtype)t->dtype));
    LDT_CHECK(ldt_layout(&spec, rank, &r));
    if ((v = ldt__lower_value(L, &r.local_shape, (ldt_dtype)t->dtype, node)) < 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "recipes: out of memory");
    if ((op = random_op(in, t->shape, &f0, &f1, &i2, &i3)) != 0) {
        ldt__attrs a;
        memset(&a, 0, sizeof a);
        a.i[0] = (int64_t)p->init_seed;
        a.i[1] = (int64_t)p->init_offset;
        a.i[2] = i2;
        a.i[3] = i3;
        a.f[0] = f0;
        a.f[1] = f1;
        return ldt__lower_kernel(L, node, op, &a, 0, NULL, v, &r, t->shape);
    }
    switch (in->kind) {
    case LDT_INIT_ZEROS: return ldt__lower_fill(L, node, v, 0);
    case LDT_INIT_ONES: return ldt__lower_fill(L, node, v, 1);
    case LDT_INIT_FULL: return ldt__lower_fill(L, node, v, in->a);
    case LDT_INIT_ARANGE:
    case LDT_INIT_COPY: {
        ldt__instr *x;
        /* the region rides on a kernel-less instruction: made by ldt__lower_fill, then turned */
        LDT_CHECK(ldt__lower_fill(L, node, v, in->a));
        x = &L->p->ins[L->p->nins - 1];
        if (ldt__lower_region(L, &r, t->shape, &x->region) != LDT_OK)
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "recipes: out of memory");
        x->src = t;
        if (in->kind == LDT_INIT_ARANGE) {
            x->kind = LDT__I_ARANGE;
            x->step = in->b;
        } else {
            x->kind = LDT__I_LOAD;
            x->host = in->data;
        }
        return LDT_OK;
    }
    default:
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "materialize '%s': recipe kind %d has no lowering yet",
                 p->name ? p->name : "", (int)in->kind);
    }
}

ldt_status ldt__lower_recipes(const ldt_tensor *const *params, const ldt_placement *const *placements,
                              int n, const ldt_mesh *mesh, int rank, ldt__program **out) {
    ldt__program *p = calloc(1, sizeof *p);
    ldt__lower L;
    ldt_status st = LDT_OK;
    if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "recipes: out of memory");
    p->rank = rank;
    L.p = p;
    L.mesh = mesh;
    for (int i = 0; i < n && st == LDT_OK; i++) {
        st = lower_one(&L, params[i], placements[i], rank, i);
        if (st != LDT_OK) ldt__error_prefix(st, "materialize '%s'", LDT__NAME(params[i]) ? LDT__NAME(params[i]) : "");
    }
    if (st != LDT_OK) {
        ldt__program_free(p);
        free(p);
        return st;
    }
    *out = p;
    return LDT_OK;
}
