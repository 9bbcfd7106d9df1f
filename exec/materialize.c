/* Materialization: parameters described on a meta mesh (their init recipes) become shards on a
 * real mesh. Each rank allocates only its shard and computes only its region, every element
 * from its global index, so any placement gives exactly the single-device values
 * (docs/deferred-init.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/half.h"
#include "core/mesh.h"
#include "exec/fill.h"
#include "exec/kcall.h"
#include "exec/shards.h"
#include "ldt/exec.h"
#include "trace/trace.h"

typedef struct mat_job {
    const ldt_tensor *const *params;
    ldt_shards **shards;
    int n;
    int64_t *allocated; /* per world rank */
} mat_job;


/* arange: element i of the global tensor is a + b * i; the local buffer walks its region's
 * runs dim by dim. */
static void fill_arange(void *buf, ldt_dtype dt, const ldt_region *r, const ldt_shape *g, double a,
                        double b) {
    int nd = r->ndim;
    int64_t idx[LDT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < r->numel; i++) {
        int64_t gi = 0;
        for (int d = 0; d < nd; d++) {
            const ldt_dim_runs *run = &r->runs[d];
            gi = gi * g->dims[d] + (idx[d] / run->len) * run->block_stride + run->start + idx[d] % run->len;
        }
        ldt__store_f64(buf, dt, i, a + b * (double)gi);
        for (int d = nd - 1; d >= 0; d--) { /* the next local multi-index */
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
}

/* fan_in, fan_out of a weight [out, in, ...]. */
static void fans(const ldt_shape *s, double *fin, double *fout) {
    double rec = 1;
    for (int d = 2; d < s->ndim; d++) rec *= (double)s->dims[d];
    *fin = (double)s->dims[1] * rec;
    *fout = (double)s->dims[0] * rec;
}

/* One parameter's shard on this rank. */
static ldt_status make_shard(const ldt_tensor *t, const ldt_spec *spec, int rank, void *buf) {
    const ldt__persistent *p = LDT__P(t);
    const ldt_init *in = &p->init;
    ldt_region r;
    ldt_dtype dt = (ldt_dtype)t->dtype;
    ldt__attrs at;
    ldt__operand out;
    double fin = 0, fout = 0, gain;
    int op = -1;
    LDT_CHECK(ldt_layout(spec, rank, &r));
    if (r.numel == 0) return LDT_OK;
    memset(&at, 0, sizeof at);
    at.i[0] = (int64_t)p->init_seed;
    at.i[1] = (int64_t)p->init_offset;
    if (in->kind >= LDT_INIT_KAIMING_UNIFORM && in->kind <= LDT_INIT_XAVIER_NORMAL)
        fans(t->shape, &fin, &fout);
    switch (in->kind) {
    case LDT_INIT_ZEROS:
    case LDT_INIT_ONES:
    case LDT_INIT_FULL: {
        double v = in->kind == LDT_INIT_ZEROS ? 0 : in->kind == LDT_INIT_ONES ? 1 : in->a;
        ldt__fill_f64(buf, dt, r.numel, v);
        return LDT_OK;
    }
    case LDT_INIT_ARANGE: fill_arange(buf, dt, &r, t->shape, in->a, in->b); return LDT_OK;
    case LDT_INIT_COPY:
        ldt__region_copy(&r, t->shape, ldt__dtype_size(dt), (void *)in->data, buf, 1);
        return LDT_OK;
    case LDT_INIT_UNIFORM:
        op = LDT_OP_RAND;
        at.f[0] = in->a;
        at.f[1] = in->b;
        break;
    case LDT_INIT_NORMAL:
        op = LDT_OP_RANDN;
        at.f[0] = in->a;
        at.f[1] = in->b;
        break;
    case LDT_INIT_KAIMING_UNIFORM:
    case LDT_INIT_KAIMING_NORMAL:
        gain = sqrt(2.0 / (1.0 + in->a * in->a)); /* leaky_relu with negative slope a */
        if (in->kind == LDT_INIT_KAIMING_UNIFORM) {
            op = LDT_OP_RAND;
            at.f[1] = gain * sqrt(3.0 / (in->fan_out ? fout : fin));
            at.f[0] = -at.f[1];
        } else {
            op = LDT_OP_RANDN;
            at.f[1] = gain / sqrt(in->fan_out ? fout : fin);
        }
        break;
    case LDT_INIT_XAVIER_UNIFORM:
    case LDT_INIT_XAVIER_NORMAL:
        gain = in->a != 0 ? in->a : 1.0;
        if (in->kind == LDT_INIT_XAVIER_UNIFORM) {
            op = LDT_OP_RAND;
            at.f[1] = gain * sqrt(6.0 / (fin + fout));
            at.f[0] = -at.f[1];
        } else {
            op = LDT_OP_RANDN;
            at.f[1] = gain * sqrt(2.0 / (fin + fout));
        }
        break;
    default:
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "materialize '%s': recipe kind %d has no materialization yet",
                 p->name ? p->name : "", (int)in->kind);
    }
    out.data = buf;
    out.shape = r.local_shape;
    out.dtype = dt;
    return ldt__exec_kernel(t->ctx, op, &at, 0, NULL, &out, &r, t->shape);
}

static ldt_status rank_fn(ldt_comm *world, void *arg) {
    mat_job *j = arg;
    int rank = ldt_comm_rank(world);
    for (int i = 0; i < j->n; i++) {
        int64_t nb;
        void *buf = ldt_shards_local(j->shards[i], rank, &nb);
        if (!buf) continue; /* not on the mesh */
        j->allocated[rank] += nb;
        LDT_CHECK(make_shard(j->params[i], ldt_shards_spec(j->shards[i]), rank, buf));
    }
    return LDT_OK;
}

ldt_status ldt_materialize(const ldt_tensor *const *params, const ldt_placement *const *placements,
                           int n, const ldt_mesh *mesh, ldt_shards **out,
                           ldt_materialize_stats *stats) {
    mat_job j;
    ldt_status st = LDT_OK;
    int nranks;
    if (!params || !placements || !mesh || !out || n < 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "materialize: params, placements, mesh and out must be given");
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "materialize: the target mesh is on the meta device; "
                                           "expected a real one");
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        const ldt_tensor *t = params[i];
        ldt_spec spec;
        if (!t || t->kind != LDT__PERSISTENT || t->op != LDT_OP_PARAM)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "materialize: tensor %d is not a parameter", i);
        if (!LDT__P(t)->has_init)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE, "materialize: parameter '%s' has no init recipe "
                          "(ldt_param_init)", LDT__NAME(t) ? LDT__NAME(t) : "");
        st = ldt_spec_init(&spec, mesh, t->shape, placements[i], ldt_mesh_ndim(mesh), (ldt_dtype)t->dtype);
        if (st != LDT_OK) {
            ldt__error_prefix(st, "materialize '%s'", LDT__NAME(t) ? LDT__NAME(t) : "");
            goto fail;
        }
        LDT_CHECK_GOTO(ldt_shards_create(&spec, &out[i]));
    }
    nranks = mesh->max_rank + 1;
    memset(&j, 0, sizeof j);
    j.params = params;
    j.shards = out;
    j.n = n;
    if (!(j.allocated = calloc((size_t)nranks, sizeof *j.allocated)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "materialize: out of memory");
    st = ldt_threads_launch(nranks, NULL, rank_fn, &j);
    if (st == LDT_OK && stats) {
        for (int r = 0; r < nranks; r++) {
            stats->allocated_bytes += j.allocated[r];
            if (j.allocated[r] > stats->per_rank_allocated_max) stats->per_rank_allocated_max = j.allocated[r];
        }
        stats->tensors += n;
    }
    free(j.allocated);
    if (st == LDT_OK) return LDT_OK;
fail:
    for (int i = 0; i < n; i++) {
        ldt_shards_destroy(out[i]);
        out[i] = NULL;
    }
    return st;
}
