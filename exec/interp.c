/* The program interpreter: runs lowered programs unbound, each rank walking its own program
 * over a buffer per value, instruction by instruction (ldt_plan_run, ldt_run_eager,
 * materialize). Collectives (redistributions, all_reduces) are the only contact between
 * ranks. A compiled executable binds its programs instead (exec/bind.c, exec/replay.c). */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/mesh.h"
#include "core/half.h"
#include "exec/fill.h"
#include "exec/kcall.h"
#include "exec/shards.h"
#include "ldt/exec.h"
#include "exec/exec_internal.h"
#include "exec/groups.h"
#include "planner/program.h"

typedef struct prun {
    const ldt__program *p;
    uint8_t *external; /* per value: its buffer was given, not allocated here */
    const ldt_ctx *ctx;
    const ldt_mesh *mesh;
    ldt_comm *world;
    void **buf;
    ldt_redist_runner **rr;          /* per instruction, made at first use */
    ldt_comm *groups[1 << LDT_MAX_DIMS]; /* per set of mesh dims */
} prun;



/* arange: element i of the global tensor is a + b * i; the local buffer walks its region's
 * runs dim by dim. */
static void fill_arange(void *buf, ldt_dtype dt, const ldt_region *r, const ldt_shape *g, double a,
                        double b) {
    int64_t idx[LDT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < r->numel; i++) {
        int64_t gi = 0;
        for (int d = 0; d < r->ndim; d++) {
            const ldt_dim_runs *run = &r->runs[d];
            gi = gi * g->dims[d] + (idx[d] / run->len) * run->block_stride + run->start + idx[d] % run->len;
        }
        ldt__store_f64(buf, dt, i, a + b * (double)gi);
        for (int d = r->ndim - 1; d >= 0; d--) { /* the next local multi-index */
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
}

static ldt_status run_instr(prun *r, int64_t i) {
    const ldt__program *p = r->p;
    const ldt__instr *x = &p->ins[i];
    switch ((ldt__ikind)x->kind) {
    case LDT__I_LOAD: {
        const ldt__kregion *kr = &p->regions[x->region];
        const ldt_tensor *t = x->src;
        if (x->reduce) { /* a Partial(sum) leaf off coordinate 0: zeros, so the sum is the value */
            memset(r->buf[x->out], 0, (size_t)ldt__value_bytes(&p->vals[x->out]));
            return LDT_OK;
        }
        if (!x->host && t->op == LDT_OP_INPUT && !LDT__P(t)->bound)
            LDT_FAIL(LDT_ERR_INVALID_USAGE, "input '%s' has no data; bind it with ldt_input_bind",
                     LDT__NAME(t) ? LDT__NAME(t) : "");
        if (kr->region.numel)
            ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype),
                             x->host ? (void *)x->host : t->data, r->buf[x->out], 1);
        return LDT_OK;
    }
    case LDT__I_ARANGE:
        fill_arange(r->buf[x->out], (ldt_dtype)p->vals[x->out].dtype, &p->regions[x->region].region,
                    &p->regions[x->region].global, x->fill, x->step);
        return LDT_OK;
    case LDT__I_KERNEL: {
        ldt__operand in[64], out;
        if (x->nin > 64) LDT_FAIL(LDT_ERR_UNSUPPORTED, "%d kernel inputs; up to 64", x->nin);
        for (int k = 0; k < x->nin; k++) {
            int32_t v = p->ops[x->in + k];
            in[k].data = r->buf[v];
            in[k].shape = p->vals[v].shape;
            in[k].dtype = (ldt_dtype)p->vals[v].dtype;
        }
        out.data = r->buf[x->out];
        out.shape = p->vals[x->out].shape;
        out.dtype = (ldt_dtype)p->vals[x->out].dtype;
        return ldt__exec_kernel(r->ctx, x->op, x->attrs, x->nin, in, &out,
                                x->region >= 0 ? &p->regions[x->region].region : NULL,
                                x->region >= 0 ? &p->regions[x->region].global : NULL);
    }
    case LDT__I_REDIST:
        if (!r->rr[i]) LDT_CHECK(ldt_redist_runner_create(r->world, x->plan, &r->rr[i]));
        return ldt_redist_runner_run(r->rr[i], r->buf[p->ops[x->in]], r->buf[x->out]);
    case LDT__I_ALL_REDUCE: {
        ldt_comm *g = NULL;
        const ldt__value *v = &p->vals[x->out];
        LDT_CHECK(ldt__instr_group(r->world, r->mesh, r->groups, x, &g));
        if (ldt_comm_size(g) == 1) return LDT_OK;
        return ldt_all_reduce(g, r->buf[x->out], r->buf[x->out],
                              ldt__value_bytes(v) / (int64_t)ldt__dtype_size((ldt_dtype)v->dtype),
                              (ldt_dtype)v->dtype, (ldt_reduce_op)x->reduce);
    }
    case LDT__I_FILL:
        ldt__fill_f64(r->buf[x->out], (ldt_dtype)p->vals[x->out].dtype,
                      ldt__value_bytes(&p->vals[x->out]) / (int64_t)ldt__dtype_size((ldt_dtype)p->vals[x->out].dtype),
                      x->fill);
        return LDT_OK;
    default:
        LDT_FAIL(LDT_ERR_INTERNAL, "program: instruction kind %d", x->kind);
    }
}

static void prun_free(prun *r) {
    if (r->buf)
        for (int32_t v = 0; v < r->p->nvals; v++)
            if (!r->external || !r->external[v]) free(r->buf[v]);
    if (r->rr)
        for (int64_t i = 0; i < r->p->nins; i++) ldt_redist_runner_destroy(r->rr[i]);
    for (unsigned m = 0; m < (1u << LDT_MAX_DIMS); m++) ldt_comm_destroy(r->groups[m]);
    free(r->buf);
    free(r->rr);
    free(r->external);
}

/* Runs p on this rank; on success r->buf holds every value (freed by prun_free). */
static ldt_status prun_run(prun *r) {
    const ldt__program *p = r->p;
    if (!r->buf) r->buf = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *r->buf);
    r->rr = calloc((size_t)(p->nins ? p->nins : 1), sizeof *r->rr);
    if (!r->buf || !r->rr) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "program: out of memory");
    for (int32_t v = 0; v < p->nvals; v++) {
        int64_t b = ldt__value_bytes(&p->vals[v]);
        if (r->external && r->external[v]) continue;
        if (!(r->buf[v] = malloc((size_t)(b ? b : 1))))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "program: out of memory for %lld bytes", (long long)b);
    }
    for (int64_t i = 0; i < p->nins; i++) {
        ldt_status st = run_instr(r, i);
        if (st != LDT_OK) {
            int node = p->ins[i].node;
            const ldt_tensor *t = node >= 0 && r->ctx && node < r->ctx->nnodes ? r->ctx->nodes[node] : NULL;
            return ldt__error_prefix(st, "program rank %d, instruction %lld (node %%%d %s)", p->rank,
                                     (long long)i, node, t ? ldt__op_name(r->ctx, t->op) : "?");
        }
    }
    return LDT_OK;
}

ldt_status ldt__instr_group(ldt_comm *world, const ldt_mesh *mesh, ldt_comm **cache,
                            const ldt__instr *x, ldt_comm **out) {
    unsigned mask = 0;
    for (int i = 0; i < x->ndims; i++) mask |= 1u << x->dims[i];
    if (!cache[mask]) {
        if (x->ndims == 1) {
            LDT_CHECK(ldt_comm_mesh_dim(world, mesh, x->dims[0], &cache[mask]));
        } else {
            int dims[LDT_MAX_DIMS];
            ldt_mesh *sub;
            ldt_status st;
            for (int i = 0; i < x->ndims; i++) dims[i] = x->dims[i];
            LDT_CHECK(ldt_mesh_submesh(mesh, ldt_comm_world_rank(world, ldt_comm_rank(world)),
                                       x->ndims, dims, &sub));
            st = ldt_comm_group(world, sub->nranks, sub->ranks, &cache[mask]);
            ldt_mesh_destroy(sub);
            LDT_CHECK(st);
        }
    }
    *out = cache[mask];
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * ldt_plan_run: every rank in a thread, outputs gathered into full host tensors.
 */
typedef struct run_state {
    ldt_plan *plan;
    const ldt_ctx *ctx;
    const ldt_mesh *mesh;
    int nout;
    ldt_tensor *const *outs;
    ldt_shards **shards;
} run_state;

static ldt_status rank_fn(ldt_comm *world, void *arg) {
    run_state *s = arg;
    int rank = ldt_comm_rank(world);
    prun r;
    ldt_status st;
    const ldt__program *p;
    if (rank > s->mesh->max_rank || s->mesh->pos_of[rank] < 0) return LDT_OK;
    memset(&r, 0, sizeof r);
    /* programs were lowered before the launch: reading them is thread-safe */
    p = ldt__plan_program(s->plan, rank, &st);
    if (!p) return st;
    r.p = p;
    r.ctx = s->ctx;
    r.mesh = s->mesh;
    r.world = world;
    st = prun_run(&r);
    for (int i = 0; st == LDT_OK && i < s->nout; i++) {
        int64_t nb;
        void *dst = ldt_shards_local(s->shards[i], rank, &nb);
        int32_t v = p->node_val[s->outs[i]->id];
        if (nb != ldt__value_bytes(&p->vals[v]))
            st = ldt__error(LDT_ERR_INTERNAL, "plan run: output %d holds %lld bytes on rank %d, "
                            "its shard %lld", i, (long long)ldt__value_bytes(&p->vals[v]), rank, (long long)nb);
        else if (nb)
            ldt__copy(dst, r.buf[v], (size_t)nb);
    }
    prun_free(&r);
    return st;
}

ldt_status ldt_plan_run(ldt_plan *plan, int nout, ldt_tensor *const *outs, void *const *dst,
                        const int64_t *nbytes) {
    run_state s;
    ldt_status st = LDT_OK;
    const ldt_mesh *mesh;
    ldt_ctx *ctx;
    if (!plan || nout < 0 || (nout > 0 && (!outs || !dst || !nbytes)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan run: plan, outs, dst and nbytes must be given");
    ctx = ldt__plan_ctx(plan);
    mesh = ldt__plan_mesh(plan);
    if (ldt_mesh_device(mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "plan run: the mesh is on the meta device, which plans "
                                        "and reports but never executes");
    LDT_CHECK(ldt__host_sync(ctx)); /* parameters an executable updated in place */
    for (int i = 0; i < nout; i++) {
        ldt_placement pl[LDT_MAX_DIMS];
        if (!outs[i]) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan run: output %d is NULL", i);
        LDT_CHECK(ldt_plan_placements(plan, outs[i], pl, LDT_MAX_DIMS));
        if (nbytes[i] != ldt__nbytes(outs[i]))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan run: output %d: %lld bytes given, it holds %lld",
                     i, (long long)nbytes[i], (long long)ldt__nbytes(outs[i]));
    }
    for (int i = 0; i < ldt_mesh_nranks(mesh); i++) /* lower all first: threads only read */
        if (!ldt__plan_program(plan, ldt_mesh_rank_at(mesh, i), &st)) return st;
    memset(&s, 0, sizeof s);
    s.plan = plan;
    s.ctx = ctx;
    s.mesh = mesh;
    s.nout = nout;
    s.outs = outs;
    if (!(s.shards = calloc((size_t)(nout ? nout : 1), sizeof *s.shards)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan run: out of memory");
    for (int i = 0; i < nout && st == LDT_OK; i++) {
        ldt_spec spec;
        st = ldt_spec_init(&spec, mesh, outs[i]->shape, ldt__plan_out(plan, outs[i]->id),
                           ldt_mesh_ndim(mesh), (ldt_dtype)outs[i]->dtype);
        if (st == LDT_OK) st = ldt_shards_create(&spec, &s.shards[i]);
    }
    if (st == LDT_OK) st = ldt_threads_launch(mesh->max_rank + 1, NULL, rank_fn, &s);
    for (int i = 0; i < nout && st == LDT_OK; i++) st = ldt_full_tensor(s.shards[i], dst[i]);
    for (int i = 0; i < nout; i++) ldt_shards_destroy(s.shards[i]);
    free(s.shards);
    return st;
}

ldt_status ldt_run_eager(ldt_ctx *ctx, const ldt_plan_options *opts, int nout,
                         ldt_tensor *const *outs, void *const *dst, const int64_t *nbytes) {
    ldt_plan *plan = NULL;
    ldt_status st;
    int n;
    ldt_tensor **o = NULL;
    void **d = NULL;
    int64_t *nb = NULL;
    if (!ctx || nout < 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "run eager: ctx is NULL");
    /* the values kept or assigned (ldt_keep, ldt_assign) are gathered with the outputs, into
     * their tensors' storage */
    n = nout + (int)ctx->nkeeps;
    o = malloc((size_t)(n ? n : 1) * sizeof *o);
    d = malloc((size_t)(n ? n : 1) * sizeof *d);
    nb = malloc((size_t)(n ? n : 1) * sizeof *nb);
    if (!o || !d || !nb) {
        st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "run eager: out of memory");
        goto done;
    }
    for (int i = 0; i < nout; i++) {
        o[i] = outs[i];
        d[i] = dst[i];
        nb[i] = nbytes[i];
    }
    for (int64_t i = 0; i < ctx->nkeeps; i++) {
        ldt_tensor *k = ctx->keeps[i];
        o[nout + i] = LDT__P(k)->source;
        d[nout + i] = k->data;
        nb[nout + i] = ldt__nbytes(k);
    }
    /* a step traced again alike takes the strategies found for it before: the same plan,
     * without the search */
    st = ldt__plan_create_cached(ctx, opts, &plan);
    /* the plan a compile of this step makes (parameters assigned where they are loaded), so
     * eager and replayed steps do the same arithmetic, bit for bit */
    if (st == LDT_OK) st = ldt__assign_in_param_placement(ctx, opts, &plan, 1);
    for (int64_t i = 0; st == LDT_OK && i < ctx->nkeeps; i++) o[nout + i] = LDT__P(ctx->keeps[i])->source;
    if (st == LDT_OK) st = ldt_plan_run(plan, n, o, d, nb);
    if (st == LDT_OK) {
        for (int64_t i = 0; i < ctx->nkeeps; i++) LDT__P(ctx->keeps[i])->version++;
        ldt__trace_end(ctx); /* the step ran: its random draws stay taken */
    }
done:
    ldt_plan_destroy(plan);
    free(o);
    free(d);
    free(nb);
    return st;
}

ldt_status ldt__program_run_into(ldt_comm *world, const ldt_mesh *mesh, const ldt_ctx *ctx,
                                 const ldt__program *p, void *const *ext) {
    prun r;
    ldt_status st;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.ctx = ctx;
    r.mesh = mesh;
    r.world = world;
    r.buf = calloc((size_t)(p->nvals ? p->nvals : 1), sizeof *r.buf);
    r.external = calloc((size_t)(p->nvals ? p->nvals : 1), 1);
    if (!r.buf || !r.external) {
        prun_free(&r);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "program: out of memory");
    }
    for (int32_t v = 0; v < p->nvals; v++)
        if (ext && ext[v]) {
            r.buf[v] = ext[v];
            r.external[v] = 1;
        }
    st = prun_run(&r);
    prun_free(&r);
    return st;
}
