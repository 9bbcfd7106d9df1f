/* Compiling an executable (docs/replay.md): plan the trace, lower every rank's program, fuse
 * and schedule its collectives, bind every rank (exec/bind.c, or exec/replay_cuda.c on a CUDA
 * mesh); and destroying one. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/error.h"
#include "core/mesh.h"
#include "exec/exec_internal.h"
#include "planner/fuse.h"
#include "planner/pipeline.h"
#include "planner/schedule.h"

/* Process mode: the processes must have planned alike (same trace, same numbers). Each hashes
 * every rank's program per trace node; the totals are compared and, on a difference, the
 * first node whose hash differs from rank 0's is named. */
static ldt_status agree(ldt_exec *e) {
    int n = e->nranks;
    int64_t nn = 0, *nodes = NULL, *counts = NULL, total = 0, *all = NULL, *sum = NULL;
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nprogs; r++)
        if (e->progs[r] && e->progs[r]->nnodes > nn) nn = e->progs[r]->nnodes;
    nodes = calloc((size_t)(nn + 1), sizeof *nodes);
    counts = calloc((size_t)n, sizeof *counts);
    sum = calloc((size_t)n * 2, sizeof *sum);
    if (!nodes || !counts || !sum) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nprogs; r++) {
        const ldt__program *p = e->progs[r];
        for (int64_t i = 0; p && i < p->nins; i++) {
            const ldt__instr *x = &p->ins[i];
            const ldt__value *v = &p->vals[x->out];
            int64_t h[4 + LDT_MAX_DIMS] = {x->kind, x->op, r, v->dtype};
            int64_t node = x->node >= 0 && x->node < nn ? x->node : nn;
            for (int d = 0; d < v->shape.ndim; d++) h[4 + d] = v->shape.dims[d];
            nodes[node] = (int64_t)(XXH3_64bits_withSeed(h, sizeof h, (uint64_t)nodes[node]) >> 1);
        }
    }
    sum[0] = nn;
    sum[1] = (int64_t)(XXH3_64bits(nodes, (size_t)(nn + 1) * sizeof *nodes) >> 1);
    {
        int64_t pair[2] = {sum[0], sum[1]};
        LDT_CHECK_GOTO(ldt_all_gather(e->world, pair, sum, 2, LDT_I64));
    }
    {
        int same = 1;
        for (int r = 1; r < n; r++) same &= sum[2 * r] == sum[0] && sum[2 * r + 1] == sum[1];
        if (same) goto done;
    }
    for (int r = 0; r < n; r++) total += counts[r] = sum[2 * r] + 1;
    if (!(all = malloc((size_t)total * sizeof *all))) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    {
        int64_t at = 0;
        for (int r = 0; r < e->me; r++) at += counts[r];
        memcpy(all + at, nodes, (size_t)(nn + 1) * sizeof *nodes);
        LDT_CHECK_GOTO(ldt_all_gather_v(e->world, all + at, all, counts, LDT_I64));
    }
    {
        int64_t at = counts[0];
        for (int r = 1; r < n; r++) {
            for (int64_t k = 0; k < counts[r] && k < counts[0]; k++)
                if (all[at + k] != all[k]) {
                    const char *op = k < e->ctx->nnodes ? ldt__op_name(e->ctx, e->ctx->nodes[k]->op) : "?";
                    LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE, "compile: the processes planned differently: rank %d's "
                                  "programs differ from rank 0's first at node %%%lld (%s); every process must "
                                  "trace the same step with the same inputs' shapes and options", r, (long long)k, op);
                }
            if (counts[r] != counts[0])
                LDT_FAIL_GOTO(LDT_ERR_INVALID_USAGE, "compile: the processes planned differently: rank %d traced "
                              "%lld nodes, rank 0 %lld", r, (long long)counts[r] - 1, (long long)counts[0] - 1);
            at += counts[r];
        }
    }
done:
fail:
    free(nodes);
    free(counts);
    free(sum);
    free(all);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Compile and destroy.
 */
int ldt__exec_binding_of(ldt_exec *e, const ldt_tensor *t) {
    for (int i = 0; i < e->nbindings; i++)
        if (e->bindings[i].t == t) return i;
    return -1;
}

void ldt__exec_destroy(ldt_exec *e) {
    if (!e) return;
    if (e->ctx && e->ctx->stale_exec == e) e->ctx->host_flush(e->ctx); /* its ranks hold the newest values */
    ldt__cuda_destroy(e);
    free(e->cuda_src);
    free(e->cuda_ver);
    for (int r = 0; e->ranks && r < e->nranks; r++) {
        rank_state *rs = e->ranks[r];
        if (!rs) continue;
        ldt__commq_stop(rs);
        ldt__p2p_free(rs);
        for (int64_t i = 0; rs->ins && i < rs->nins; i++) {
            ldt_redist_runner_destroy(rs->ins[i].runner);
            free(rs->ins[i].scratch);
            free(rs->ins[i].zb);
        }
        for (int64_t i = 0; rs->ins && rs->prog && i < rs->prog->nins; i++)
            free((void *)rs->ins[i].call.plan); /* kernel plans (ldt__cpu_kernel_bind) */
        free(rs->ccalls);
        free(rs->cin);
        free(rs->cshapes);
        free(rs->cdtypes);
        for (unsigned m = 0; m < (1u << LDT_MAX_DIMS); m++) ldt_comm_destroy(rs->groups[m]);
        for (int32_t v = 0; rs->val && v < rs->prog->nvals; v++)
            if (rs->mem.offset && rs->mem.offset[v] < 0 && rs->val[v]) free(rs->val[v]);
        ldt__mem_plan_free(&rs->mem);
        free(rs->arena);
        free(rs->val);
        free(rs->val_now);
        free(rs->whole_input);
        free(rs->hot);
        free(rs->kcalls);
        free(rs->ins);
        free(rs->opnds);
        free(rs->rand);
        free(rs->prof);
        free(rs->assign_load);
        free(rs);
    }
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program_free(e->progs[r]);
        free(e->progs[r]);
    }
    for (int64_t i = 0; i < e->nrplans; i++) ldt_redist_plan_destroy(e->rplans[i]);
    for (int i = 0; i < e->nout + e->nassign; i++) ldt_shards_destroy(e->outs[i].shards);
    ldt_threads_destroy(e->threads);
    free(e->progs);
    free(e->rplans);
    free(e->ranks);
    free(e->outs);
    free(e->inplace);
    free(e->gathered);
    free(e->bindings);
    free(e->trace_path);
    free(e->key);
    free(e);
}

/* Collective fusion on every rank's program, with the same decisions on every rank. */
static ldt_status fuse_all(ldt_exec *e, const ldt_compile_options *o) {
    int64_t cap = o && o->bucket_bytes > 0 ? o->bucket_bytes : 25 << 20;
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program *p = e->progs[r];
        uint8_t *keep;
        ldt__fuse_stats fs;
        if (!p) continue;
        e->collectives_unfused = ldt__program_collectives(p) > e->collectives_unfused
                                     ? ldt__program_collectives(p) : e->collectives_unfused;
        for (int d = 0; d < ldt_mesh_ndim(e->mesh) && d < LDT_MAX_DIMS; d++) {
            int64_t c = ldt__program_collectives_on(p, d);
            if (c > e->dim_collectives_unfused[d]) e->dim_collectives_unfused[d] = c;
        }
        if (o && o->no_fuse) continue;
        if (!(keep = calloc((size_t)(p->nvals ? p->nvals : 1), 1))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        for (int i = 0; i < e->nout + e->nassign; i++) keep[p->node_val[e->outs[i].node]] = 1;
        /* a GPU loads a parameter's shard once, not every step (the CPU reloads zeros): an
         * all_reduce in place over it would reduce it again at every replay */
        for (int64_t i = 0; ldt_mesh_device(e->mesh) == LDT_DEVICE_CUDA && i < p->nins; i++)
            if (p->ins[i].kind == LDT__I_LOAD && p->ins[i].src->op != LDT_OP_INPUT) keep[p->ins[i].out] = 1;
        st = ldt__fuse_in_place(p, keep, &fs);
        free(keep);
        LDT_CHECK(st);
    }
    if (o && o->no_fuse) goto count;
    { /* one decision for every rank (planner/fuse.c): programs may differ in length */
        ldt__fuse_stats fs;
        int agreed;
        LDT_CHECK(ldt__fuse_agreed(e->progs, e->nprogs, cap, 0, &fs, &agreed));
        if (fs.groups > e->collective_groups) e->collective_groups = fs.groups;
        e->fuse_agreed = agreed;
        /* ZeRO's reduce_scatters and all_gathers, bucketed alike (not on a CUDA mesh yet: its
         * steps are recorded per redistribution) */
        if (agreed && ldt_mesh_device(e->mesh) != LDT_DEVICE_CUDA) {
            LDT_CHECK(ldt__fuse_agreed(e->progs, e->nprogs, cap, 1, &fs, &agreed));
            if (fs.groups > e->collective_groups) e->collective_groups = fs.groups;
            e->fuse_agreed = e->fuse_agreed && agreed;
        }
    }
count:
    for (int r = 0; r < e->nprogs; r++) {
        const ldt__program *p = e->progs[r];
        int64_t last_mm = -1, early = 0;
        if (!p) continue;
        if (ldt__program_collectives(p) > e->collectives) e->collectives = ldt__program_collectives(p);
        for (int d = 0; d < ldt_mesh_ndim(e->mesh) && d < LDT_MAX_DIMS; d++) {
            int64_t c = ldt__program_collectives_on(p, d), nb;
            if (c > e->dim_collectives[d]) e->dim_collectives[d] = c;
            LDT_CHECK(ldt__program_dim_buckets(p, d, cap, &nb));
            if (nb > e->dim_buckets[d]) e->dim_buckets[d] = nb;
        }
        for (int64_t i = 0; i < p->nins; i++)
            if (p->ins[i].kind == LDT__I_KERNEL && (p->ins[i].op == LDT_OP_MATMUL || p->ins[i].op == LDT_OP_LINEAR))
                last_mm = i;
        for (int64_t i = 0; i < last_mm; i++) early += p->ins[i].kind == LDT__I_ALL_REDUCE;
        if (early > e->early_all_reduces) e->early_all_reduces = early;
    }
    return LDT_OK;
}

/* Overlap: every rank's collectives split into start and wait; the modeled step with and
 * without it. */
static ldt_status schedule_all(ldt_exec *e, const ldt_compile_options *o) {
    ldt_cost_model cm;
    if (o && o->plan.cost) cm = *o->plan.cost;
    else LDT_CHECK(ldt_cost_model_default(NULL, e->mesh, &cm, NULL));
    e->model_cost = cm;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int overlap = o && o->overlap ? o->overlap > 0 : cores >= 2L * ldt_mesh_nranks(e->mesh);
    if (overlap) e->collective_groups = 0; /* the schedule issues them one by one, overlapped */
    for (int r = 0; r < e->nprogs; r++) {
        ldt__program *p = e->progs[r];
        double serial, over;
        int64_t moved = 0;
        if (!p) continue;
        ldt__model_step(p, &cm, e->mesh, &serial, &over);
        if (overlap) {
            LDT_CHECK(ldt__schedule_overlap(p, &moved));
            ldt__model_step(p, &cm, e->mesh, &serial, &over);
        }
        if (serial > e->model_serial) e->model_serial = serial;
        if (over > e->model_overlap) e->model_overlap = over;
        if (moved > e->moved_starts) e->moved_starts = moved;
    }
    return LDT_OK;
}

/* Parameters persist in place only if the value assigned to each is in the placement the
 * parameter is loaded in. Where the plan chose another (say, an update on dp shards), the
 * assigned value is redistributed to the parameter's placement inside the step (the gather
 * ZeRO does) and the step planned again with the parameters held where they were. */
ldt_status ldt__assign_in_param_placement(ldt_ctx *ctx, const ldt_plan_options *po, ldt_plan **plan,
                                          int cached) {
    ldt_placement *saved = NULL;
    ldt_tensor **pinned = NULL;
    int npinned = 0, nd = ldt_mesh_ndim(ctx->mesh);
    ldt_status st = LDT_OK;
    if (ldt_mesh_device(ctx->mesh) == LDT_DEVICE_META || !ctx->nkeeps) return LDT_OK;
    for (int64_t k = 0; k < ctx->nkeeps && st == LDT_OK; k++) {
        ldt_tensor *p = ctx->keeps[k], *src = LDT__P(p)->source, *r;
        ldt_placement pp[LDT_MAX_DIMS], ps[LDT_MAX_DIMS];
        int same = 1;
        if (p->op != LDT_OP_PARAM || !src) continue;
        if (ldt_plan_placements(*plan, p, pp, LDT_MAX_DIMS) != LDT_OK) continue; /* not read in the step */
        if ((st = ldt_plan_placements(*plan, src, ps, LDT_MAX_DIMS)) != LDT_OK) break;
        for (int d = 0; d < nd; d++) same &= ldt_placement_equal(&pp[d], &ps[d]);
        if (same) continue;
        if (!pinned) {
            pinned = calloc((size_t)ctx->nkeeps, sizeof *pinned);
            saved = calloc((size_t)ctx->nkeeps * LDT_MAX_DIMS + 1, sizeof *saved);
            if (!pinned || !saved) {
                st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
                break;
            }
        }
        if (!(r = ldt_redistribute_to(src, pp, nd))) {
            st = ldt__error(ctx->status, "compile: %s", ctx->errmsg);
            break;
        }
        LDT__P(p)->source = r;
        /* the parameter held where it is for the second plan; the pin is put back after */
        pinned[npinned] = p;
        if (p->pin) memcpy(&saved[(size_t)npinned * LDT_MAX_DIMS], p->pin, (size_t)nd * sizeof *saved);
        else saved[(size_t)npinned * LDT_MAX_DIMS].kind = 0xff; /* none */
        npinned++;
        st = ldt_pin(p, pp, nd);
    }
    if (st == LDT_OK && npinned) {
        ldt_plan_destroy(*plan);
        *plan = NULL;
        st = cached ? ldt__plan_create_cached(ctx, po, plan) : ldt_plan_create(ctx, po, plan);
    }
    for (int i = 0; i < npinned; i++) {
        if (saved[(size_t)i * LDT_MAX_DIMS].kind == 0xff) pinned[i]->pin = NULL;
        else memcpy(pinned[i]->pin, &saved[(size_t)i * LDT_MAX_DIMS], (size_t)nd * sizeof *saved);
    }
    free(pinned);
    free(saved);
    return st;
}

ldt_status ldt__exec_build(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                           const ldt_compile_options *o, ldt_exec **out) {
    ldt_exec *e = calloc(1, sizeof *e);
    ldt_plan *plan = NULL;
    ldt_status st = LDT_OK;
    const ldt_mesh *mesh = ctx->mesh;
    ldt_compile_options oc, pc;
    ldt_cost_model cm;
    if (!e) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    memset(&oc, 0, sizeof oc);
    memset(&pc, 0, sizeof pc);
    e->me = -1;
    e->ctx = ctx;
    e->mesh = mesh;
    e->rng_base = ctx->trace_rng_base;
    e->rng_advance = ctx->rng_offset - ctx->trace_rng_base;
    if (o && o->trace_path && !(e->trace_path = strdup(o->trace_path)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->profile = e->trace_path != NULL || (o && o->profile);
    if (ctx->world) { /* process mode: one rank here; every process plans with rank 0's numbers */
        e->world = ctx->world;
        e->me = ldt_comm_rank(ctx->world);
        if (ldt_comm_size(ctx->world) != mesh->max_rank + 1)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "compile: the mesh has %d ranks but the world %d "
                          "processes; expected one process per rank", mesh->max_rank + 1,
                          ldt_comm_size(ctx->world));
        if (o) oc = *o;
        /* rank 0's profile (given, or the default it resolves), broadcast: every process
         * plans with the same prices; a rank 0 that cannot resolve one sends a blank model,
         * which every rank refuses */
        memset(&cm, 0, sizeof cm);
        if (e->me == 0) {
            if (o && o->plan.cost) cm = *o->plan.cost;
            else st = ldt_cost_model_default(NULL, mesh, &cm, NULL);
        }
        if (st != LDT_OK) memset(&cm, 0, sizeof cm);
        {
            ldt_status bst = ldt_broadcast(ctx->world, &cm, (int64_t)sizeof cm, LDT_U8, 0);
            if (st != LDT_OK) goto fail;
            LDT_CHECK_GOTO(bst);
        }
        LDT_CHECK_GOTO(ldt_cost_model_check(&cm));
        oc.plan.cost = &cm;
        o = &oc;
        if (e->trace_path && e->me > 0) { /* each process writes its rank's trace */
            char *p = malloc(strlen(e->trace_path) + 16);
            if (!p) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
            sprintf(p, "%s.rank%d", e->trace_path, e->me);
            free(e->trace_path);
            e->trace_path = p;
        }
    }
    LDT_CHECK_GOTO(ldt_plan_create(ctx, o ? &o->plan : NULL, &plan));
    LDT_CHECK_GOTO(ldt__assign_in_param_placement(ctx, o ? &o->plan : NULL, &plan, 0));
    e->plan_cost = ldt_plan_cost(plan);
    /* outputs, then the values assigned to persistent tensors (ldt_assign, ldt_keep): their
     * shape, dtype and chosen placements, and shards to gather into */
    if (!(e->outs = calloc((size_t)(nout + ctx->nkeeps ? nout + ctx->nkeeps : 1), sizeof *e->outs)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->nout = nout;
    e->nassign = (int)ctx->nkeeps;
    for (int i = 0; i < nout + e->nassign; i++) {
        ldt_spec spec;
        ldt_placement pl[LDT_MAX_DIMS];
        ldt_tensor *src = i < nout ? outputs[i] : LDT__P(ctx->keeps[i - nout])->source;
        if (i >= nout) e->outs[i].assign_to = ctx->keeps[i - nout];
        LDT_CHECK_GOTO(ldt_plan_placements(plan, src, pl, LDT_MAX_DIMS));
        e->outs[i].node = src->id;
        e->outs[i].nbytes = ldt__nbytes(src);
        LDT_CHECK_GOTO(ldt_spec_init(&spec, mesh, src->shape, pl, ldt_mesh_ndim(mesh),
                                     (ldt_dtype)src->dtype));
        if (ldt_mesh_device(mesh) != LDT_DEVICE_META) LDT_CHECK_GOTO(ldt_shards_create(&spec, &e->outs[i].shards));
    }
    /* inputs, by name */
    for (int64_t v = 0; v < ctx->nnodes; v++)
        if (ctx->nodes[v]->op == LDT_OP_INPUT && ctx->nodes[v]->kind == LDT__PERSISTENT) e->nbindings++;
    if (!(e->bindings = calloc((size_t)(e->nbindings ? e->nbindings : 1), sizeof *e->bindings)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->nbindings = 0;
    for (int64_t v = 0; v < ctx->nnodes; v++)
        if (ctx->nodes[v]->op == LDT_OP_INPUT && ctx->nodes[v]->kind == LDT__PERSISTENT)
            e->bindings[e->nbindings++].t = ctx->nodes[v];
    LDT_CHECK_GOTO(ldt__plan_take_programs(plan, &e->progs, &e->nprogs, &e->rplans, &e->nrplans));
    e->nranks = mesh->max_rank + 1;
    if (ctx->pp) { /* pipelines (docs/pipeline.md): each rank its stages; collectives unfused, in line */
        int64_t *nodes = malloc((size_t)(e->nout + e->nassign + 1) * sizeof *nodes);
        const ldt_tensor **asg = malloc((size_t)(e->nassign + 1) * sizeof *asg);
        ldt__pp_results res = {nodes, e->nout + e->nassign, e->nout, asg, e->nassign, e->world != NULL};
        if (nodes && asg) {
            for (int i = 0; i < e->nout + e->nassign; i++) nodes[i] = e->outs[i].node;
            for (int a = 0; a < e->nassign; a++) asg[a] = e->outs[e->nout + a].assign_to;
            st = ldt__pipeline_programs(ctx, mesh, e->progs, e->nprogs, &res);
        } else {
            st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        }
        free(nodes);
        free((void *)asg);
        if (st != LDT_OK) goto fail;
        if (o) pc = *o;
        pc.no_fuse = 1;
        pc.overlap = -1;
        o = &pc;
    }
    LDT_CHECK_GOTO(fuse_all(e, o));
    LDT_CHECK_GOTO(schedule_all(e, o));
    if (!(e->ranks = calloc((size_t)e->nranks, sizeof *e->ranks)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (e->world) LDT_CHECK_GOTO(agree(e));
    if (ldt_mesh_device(mesh) == LDT_DEVICE_CUDA) {
        LDT_CHECK_GOTO(ldt__cuda_build(e));
        if (e->world && !(e->gathered = calloc((size_t)(e->nout ? e->nout : 1), sizeof *e->gathered)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        *out = e;
        e = NULL;
        goto fail;
    }
    for (int r = 0; r < e->nprogs && r < e->nranks; r++) {
        rank_state *rs;
        if (!e->progs[r] || (e->world && r != e->me)) continue;
        if (!(rs = e->ranks[r] = calloc(1, sizeof *rs))) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        rs->e = e;
        rs->rank = r;
        rs->prog = e->progs[r];
        LDT_CHECK_GOTO(ldt__bind_rank(e, rs));
        if (e->world) LDT_CHECK_GOTO(ldt__bind_groups(e, rs));
        if (!(rs->val_now = malloc((size_t)(rs->prog->nvals ? rs->prog->nvals : 1) * sizeof *rs->val_now)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        memcpy(rs->val_now, rs->val, (size_t)rs->prog->nvals * sizeof *rs->val_now);
        if (e->profile && !(rs->prof = calloc((size_t)(rs->nins ? rs->nins : 1), sizeof *rs->prof)))
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        e->arena_bytes = rs->mem.arena_bytes > e->arena_bytes ? rs->mem.arena_bytes : e->arena_bytes;
        e->bound_bytes = rs->mem.bound_bytes > e->bound_bytes ? rs->mem.bound_bytes : e->bound_bytes;
        e->instructions = rs->nins > e->instructions ? rs->nins : e->instructions;
    }
    LDT_CHECK_GOTO(ldt__find_inplace(e));
    if (e->world && !(e->gathered = calloc((size_t)(e->nout ? e->nout : 1), sizeof *e->gathered)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (ldt_mesh_device(mesh) != LDT_DEVICE_META && !e->world)
        LDT_CHECK_GOTO(ldt_threads_create(e->nranks, NULL, &e->threads));
    *out = e;
    e = NULL;
fail:
    ldt_plan_destroy(plan);
    ldt__exec_destroy(e);
    return st;
}
