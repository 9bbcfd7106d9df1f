/* Values a step assigns to persistent tensors (ldt_assign): which persist in place in the
 * ranks' load buffers, and the host copy brought up to date from there on demand. */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/dtype.h"
#include "core/error.h"
#include "exec/exec_internal.h"
#include "exec/shards.h"

/* The host data of every tensor the stale executable assigned in place, from the ranks'
 * load buffers (each rank its region; replicated elements written alike by each holder). */
ldt_status ldt__host_flush(ldt_ctx *ctx) {
    ldt_exec *e = ctx->stale_exec;
    ctx->stale_exec = NULL;
    if (!e) return LDT_OK;
    e->host_copies++;
    for (int a = 0; a < e->nassign; a++) {
        ldt_tensor *t = e->outs[e->nout + a].assign_to;
        if (!e->inplace[a]) continue;
        if (e->world) { /* the other ranks' buffers are in other processes: through the shards */
            ldt_shards *sh = e->outs[e->nout + a].shards;
            rank_state *rs = e->ranks[e->me];
            int64_t nb;
            void *mine = ldt_shards_local(sh, e->me, &nb);
            if (nb) ldt__copy(mine, rs->ins[rs->assign_load[a]].call.out.data, (size_t)nb);
            LDT_CHECK(ldt__gather_shards(e, sh));
            LDT_CHECK(ldt_full_tensor(sh, t->data));
            continue;
        }
        for (int r = 0; r < e->nranks; r++) {
            rank_state *rs = e->ranks[r];
            const binstr *lb;
            const ldt__kregion *kr;
            if (!rs || rs->assign_load[a] < 0) continue; /* a pipeline's other stage: no copy */
            lb = &rs->ins[rs->assign_load[a]];
            kr = &rs->prog->regions[rs->prog->ins[lb->idx].region];
            if (kr->region.numel)
                ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype), t->data,
                                 lb->call.out.data, 0);
        }
    }
    return LDT_OK;
}

static int region_equal(const ldt_region *a, const ldt_region *b) {
    if (a->ndim != b->ndim || a->numel != b->numel || a->nslices != b->nslices) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->offset[d] != b->offset[d] || a->local_shape.dims[d] != b->local_shape.dims[d] ||
            a->runs[d].start != b->runs[d].start || a->runs[d].len != b->runs[d].len ||
            a->runs[d].blocks != b->runs[d].blocks || a->runs[d].block_stride != b->runs[d].block_stride)
            return 0;
    return 1;
}

/* Whether p writes value v (a pipelined step's rank holds only its stages' values). */
static int writes(const ldt__program *p, int32_t v) {
    for (int64_t i = 0; i < p->nins; i++)
        if (p->ins[i].out == v) return 1;
    return 0;
}

/* Which assigned values persist in place: on every rank the tensor is loaded exactly once,
 * and that load's region is the assigned value's, so the value can overwrite the load
 * buffer at the end of a replay and the next replay's load has nothing to do. A rank of a
 * pipelined step that neither computes the value nor loads the tensor (another stage's
 * parameter) keeps no copy: assign_load stays -1 there, and such a value must be in place
 * on the ranks that do (docs/pipeline.md). */
ldt_status ldt__find_inplace(ldt_exec *e) {
    if (!e->nassign || ldt_mesh_device(e->mesh) == LDT_DEVICE_META) return LDT_OK;
    if (!(e->inplace = calloc((size_t)e->nassign, 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs = e->ranks[r];
        if (!rs) continue;
        if (!(rs->assign_load = malloc((size_t)e->nassign * sizeof *rs->assign_load)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int a = 0; a < e->nassign; a++) rs->assign_load[a] = -1;
    }
    for (int a = 0; a < e->nassign; a++) {
        const ldt__exec_out *o = &e->outs[e->nout + a];
        int ok = 1, absent = 0;
        for (int r = 0; r < e->nranks && ok; r++) {
            rank_state *rs = e->ranks[r];
            ldt_region reg;
            int64_t found = -1, nloads = 0;
            int32_t v;
            if (!rs) continue;
            v = rs->prog->node_val[o->node];
            if (e->ctx->pp && v >= 0 && !writes(rs->prog, v)) {
                absent = 1;
                continue;
            }
            if (v < 0 || ldt_layout(ldt_shards_spec(o->shards), r, &reg) != LDT_OK) {
                ok = 0;
                break;
            }
            for (int64_t i = 0; i < rs->nins; i++) {
                const ldt__instr *x = &rs->prog->ins[i];
                if (x->kind != LDT__I_LOAD || x->src != o->assign_to) continue;
                nloads++;
                if (!x->reduce && !x->host && region_equal(&rs->prog->regions[x->region].region, &reg) &&
                    rs->prog->vals[x->out].dtype == rs->prog->vals[v].dtype)
                    found = i;
            }
            if (nloads != 1 || found < 0) ok = 0;
            else rs->assign_load[a] = found;
        }
        e->inplace[a] = (uint8_t)ok;
        if (absent && !ok)
            LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: the pipelined step assigns %s where its stage's ranks cannot "
                     "update it in place (its value is not laid out as the tensor); expected the two alike",
                     LDT__P(o->assign_to)->name ? LDT__P(o->assign_to)->name : "a persistent tensor");
    }
    if (e->world) { /* in place only where every process's rank can: gathers are collective */
        int32_t *f = malloc((size_t)e->nassign * sizeof *f);
        ldt_status st;
        if (!f) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int a = 0; a < e->nassign; a++) f[a] = e->inplace[a];
        st = ldt_all_reduce(e->world, f, f, e->nassign, LDT_I32, LDT_REDUCE_MIN);
        for (int a = 0; a < e->nassign; a++) e->inplace[a] = (uint8_t)(f[a] != 0);
        free(f);
        LDT_CHECK(st);
    }
    for (int a = 0; a < e->nassign; a++) e->any_inplace |= e->inplace[a];
    return LDT_OK;
}
