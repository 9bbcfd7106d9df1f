/* A CUDA mesh's executable: build (capture), replay, output reads, host copies and teardown
 * around the CUDA backend (exec/backend_cuda.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/dtype.h"
#include "core/error.h"
#include "exec/backend_cuda.h"
#include "exec/exec_internal.h"
#include "exec/shards.h"

/* ---------------------------------------------------------------------------------------
 * A CUDA mesh: each rank's program bound and captured by the CUDA backend (exec/backend_cuda.h),
 * a GPU per rank (rank r on device r % devices), the ranks of a process each in a rank thread;
 * with more than one rank, every rank's NCCL world bootstraps through the rank threads' world
 * or, in process mode, the MPI world. A training step's assigned values stay on the devices:
 * those that persist in place (ldt__find_inplace) are copied over their parameter's shard at the
 * end of the captured step; the others come home into their tensors after each replay (and so
 * are reloaded, their version having moved).
 */

/* Whether world rank r's program runs in this process. */
int ldt__cuda_local(const ldt_exec *e, int r) { return e->cuda && e->cuda[r]; }

/* Value v of rank r's program into the rank's piece of shards s (this process's ranks). */
static ldt_status cuda_shard_home(ldt_exec *e, int r, int32_t v, ldt_shards *s) {
    int64_t nb;
    void *dst = ldt_shards_local(s, r, &nb);
    if (!nb) return LDT_OK;
    return ldt__cuda_exec_read(e->cuda[r], v, dst, nb);
}

/* The host data of every tensor a CUDA executable assigned in place, from the devices: each
 * rank's shard copied back and scattered into its tensor (the CPU's ldt__host_flush, for the
 * buffers GPUs hold); in process mode through the shards, gathered over the world. */
static ldt_status host_flush_cuda(ldt_ctx *ctx) {
    ldt_exec *e = ctx->stale_exec;
    ctx->stale_exec = NULL;
    if (!e) return LDT_OK;
    e->host_copies++;
    for (int a = 0; a < e->nassign; a++) {
        ldt_tensor *t = e->outs[e->nout + a].assign_to;
        if (!e->inplace[a]) continue;
        if (e->world) {
            ldt_shards *sh = e->outs[e->nout + a].shards;
            rank_state *rs = e->ranks[e->me];
            LDT_CHECK(cuda_shard_home(e, e->me, rs->prog->ins[rs->assign_load[a]].out, sh));
            LDT_CHECK(ldt__gather_shards(e, sh));
            LDT_CHECK(ldt_full_tensor(sh, t->data));
            continue;
        }
        for (int r = 0; r < e->nranks; r++) {
            rank_state *rs = e->ranks[r];
            const ldt__instr *x;
            const ldt__kregion *kr;
            int64_t nb;
            void *tmp;
            ldt_status st;
            if (!rs || !ldt__cuda_local(e, r)) continue;
            x = &rs->prog->ins[rs->assign_load[a]];
            kr = &rs->prog->regions[x->region];
            nb = ldt__value_bytes(&rs->prog->vals[x->out]);
            if (!nb) continue;
            if (!(tmp = malloc((size_t)nb))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "host copy: out of memory");
            st = ldt__cuda_exec_read(e->cuda[r], x->out, tmp, nb);
            if (st == LDT_OK)
                ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)t->dtype), t->data, tmp, 0);
            free(tmp);
            LDT_CHECK(st);
        }
    }
    return LDT_OK;
}

/* Rank r's step: its NCCL world (more than one rank, bootstrapped through boot), then its
 * program bound, validated and captured on its device. Collective over the mesh's ranks. */
static ldt_status cuda_rank_build(ldt_exec *e, int r, ldt_comm *boot) {
    const ldt__program *p = e->progs[r];
    rank_state *rs = e->ranks[r];
    int32_t *outs = NULL, *csrc = NULL, *cdst = NULL;
    int nkeep = 0, ncopy = 0;
    ldt_status st = LDT_OK;
    LDT_CHECK(ldt__cuda_select_device(e->cuda_dev[r]));
    if (e->nranks > 1) LDT_CHECK(ldt_nccl_world(boot, e->cuda_dev[r], NULL, &e->nccl[r]));
    outs = malloc((size_t)(e->nout + e->nassign + 1) * sizeof *outs);
    csrc = malloc((size_t)(e->nassign + 1) * sizeof *csrc);
    cdst = malloc((size_t)(e->nassign + 1) * sizeof *cdst);
    if (!outs || !csrc || !cdst) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int i = 0; i < e->nout + e->nassign; i++) {
        int32_t v = p->node_val[e->outs[i].node];
        int a = i - e->nout;
        if (a >= 0 && e->inplace[a]) { /* over the parameter's shard, in the graph */
            csrc[ncopy] = v;
            cdst[ncopy++] = p->ins[rs->assign_load[a]].out;
        } else {
            outs[nkeep++] = v; /* read after each replay */
        }
    }
    {
        ldt__cuda_step cs = {outs, nkeep, csrc, cdst, ncopy, e->nranks, 0, e->nccl[r], e->mesh,
                             e->nranks > 1 ? boot : NULL};
        st = ldt__cuda_exec_create_step(p, &cs, &e->cuda[r]);
        if (st != LDT_OK) ldt__error_prefix(st, "compile rank %d", r);
    }
fail:
    free(outs);
    free(csrc);
    free(cdst);
    return st;
}

/* Process mode: each process's device is its place among the processes of its host (their
 * ranks in order) modulo the host's devices, whatever way mpirun spread the ranks over the
 * hosts. NCCL refuses two ranks of one communicator on one GPU, so a host with more processes
 * than devices is refused first, by name, on every process alike (the emulator's NCCL shares
 * a device). Collective over the world. */
static ldt_status place_processes(ldt_exec *e) {
    char host[256] = {0};
    int n = e->nranks, ndev = ldt_cuda_device_count(), local = 0, crowded = -1, on_crowded = 0;
    int64_t mine[2], *all = malloc((size_t)n * 2 * sizeof *all);
    ldt_status st;
    if (!all) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "?");
    mine[0] = (int64_t)(XXH3_64bits(host, strlen(host)) >> 1);
    mine[1] = ndev;
    st = ldt_all_gather(e->world, mine, all, 2, LDT_I64);
    for (int r = 0; r < n && st == LDT_OK; r++) {
        int on_host = 0; /* the processes on r's host */
        for (int q = 0; q < n; q++) on_host += all[2 * q] == all[2 * r];
        if (r < e->me && all[2 * r] == mine[0]) local++;
        if (crowded < 0 && on_host > all[2 * r + 1]) crowded = r, on_crowded = on_host;
    }
    if (st == LDT_OK && crowded >= 0 && !ldt_cuda_emulated()) /* the same verdict on every process */
        st = ldt__error(LDT_ERR_UNSUPPORTED, "compile: %d processes share rank %d's host, which has %lld GPUs, but "
                        "NCCL wants a GPU per rank: run at most one process per GPU", on_crowded, crowded,
                        (long long)all[2 * crowded + 1]);
    free(all);
    if (st == LDT_OK) e->cuda_dev[e->me] = local % ndev;
    return st;
}

static ldt_status cuda_build_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    return r < e->nranks && e->ranks[r] ? cuda_rank_build(e, r, world) : LDT_OK;
}

ldt_status ldt__cuda_build(ldt_exec *e) {
    ldt_status st = LDT_OK;
    for (int r = 0; r < e->nranks; r++)
        if (r >= e->nprogs || !e->progs[r])
            LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh must hold every rank from 0 to %d (rank %d "
                     "is not on it)", e->nranks - 1, r);
    for (int r = 0; r < e->nranks; r++) /* what no device could run: refused first */
        if (!e->world || r == e->me) LDT_CHECK(ldt__cuda_program_check_ranks(e->progs[r], e->nranks));
    /* (every process reaches the world's gathers below: the checks above fail alike on all) */
    if (ldt_cuda_device_count() == 0)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh, but no CUDA device (the runtime reports none "
                 "or no driver)");
    /* NCCL refuses two ranks of one communicator on one GPU (the emulator's NCCL does not) */
    if (!e->world && e->nranks > 1 && ldt_cuda_device_count() < e->nranks && !ldt_cuda_emulated())
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "compile: a CUDA mesh of %d rank threads needs a GPU per rank (NCCL "
                 "puts one rank on a GPU); this machine has %d: use a smaller mesh or a process per GPU "
                 "(--backend nccl under mpirun)", e->nranks, ldt_cuda_device_count());
    /* the devices copy parameters now: the host must hold their newest values */
    LDT_CHECK(ldt__host_sync(e->ctx));
    e->is_cuda = 1;
    e->cuda = calloc((size_t)e->nranks, sizeof *e->cuda);
    e->nccl = calloc((size_t)e->nranks, sizeof *e->nccl);
    e->cuda_dev = calloc((size_t)e->nranks, sizeof *e->cuda_dev);
    if (!e->cuda || !e->nccl || !e->cuda_dev) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    for (int r = 0; r < e->nranks; r++) e->cuda_dev[r] = r % ldt_cuda_device_count();
    for (int r = 0; r < e->nranks; r++) {
        rank_state *rs;
        if (e->world && r != e->me) continue;
        if (!(rs = e->ranks[r] = calloc(1, sizeof *rs))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
        rs->e = e;
        rs->rank = r;
        rs->prog = e->progs[r];
        rs->nins = rs->prog->nins;
    }
    LDT_CHECK(ldt__find_inplace(e));
    if (e->world) {
        LDT_CHECK(place_processes(e));
        LDT_CHECK(cuda_rank_build(e, e->me, e->world));
    } else if (e->nranks == 1) {
        LDT_CHECK(cuda_rank_build(e, 0, NULL));
    } else {
        LDT_CHECK(ldt_threads_create(e->nranks, NULL, &e->threads));
        LDT_CHECK(ldt_threads_run(e->threads, cuda_build_thread, e));
    }
    /* the parameters and constants the devices hold, with the versions they hold */
    for (int r = 0; r < e->nranks; r++)
        for (int64_t i = 0; ldt__cuda_local(e, r) && i < e->progs[r]->nins; i++) e->ncuda_src += e->progs[r]->ins[i].kind == LDT__I_LOAD;
    e->cuda_src = calloc((size_t)(e->ncuda_src ? e->ncuda_src : 1), sizeof *e->cuda_src);
    e->cuda_ver = calloc((size_t)(e->ncuda_src ? e->ncuda_src : 1), sizeof *e->cuda_ver);
    if (!e->cuda_src || !e->cuda_ver) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "compile: out of memory");
    e->ncuda_src = 0;
    for (int r = 0; r < e->nranks; r++)
        for (int64_t i = 0; ldt__cuda_local(e, r) && i < e->progs[r]->nins; i++) {
            const ldt__instr *x = &e->progs[r]->ins[i];
            int seen = 0;
            if (x->kind != LDT__I_LOAD || !x->src || x->src->op == LDT_OP_INPUT) continue;
            for (int k = 0; k < e->ncuda_src; k++) seen |= e->cuda_src[k] == x->src;
            if (seen) continue;
            e->cuda_src[e->ncuda_src] = x->src;
            e->cuda_ver[e->ncuda_src++] = LDT__P(x->src)->version;
        }
    for (int r = 0; r < e->nranks; r++) {
        if (!ldt__cuda_local(e, r)) continue;
        if (e->progs[r]->nins > e->instructions) e->instructions = e->progs[r]->nins;
        if (ldt__cuda_exec_arena_bytes(e->cuda[r]) > e->arena_bytes) e->arena_bytes = ldt__cuda_exec_arena_bytes(e->cuda[r]);
    }
    return st;
}

/* The versions the devices hold of tensor t: now `ver`. */
static void cuda_held(ldt_exec *e, const ldt_tensor *t, uint64_t ver) {
    for (int i = 0; i < e->ncuda_src; i++)
        if (e->cuda_src[i] == t) e->cuda_ver[i] = ver;
}

/* Rank r's replay at this step's place on the random stream (as the CPU replay patches it). */
static ldt_status cuda_rank_replay(ldt_exec *e, int r) {
    ldt_status st;
    LDT_CHECK(ldt__cuda_select_device(e->cuda_dev[r])); /* its stream's device, on any thread */
    LDT_CHECK(ldt__cuda_exec_set_rng(e->cuda[r], e->ctx->rng_offset - e->rng_base, 0));
    st = ldt__cuda_exec_replay(e->cuda[r]);
    if (st != LDT_OK && e->nranks > 1) return ldt__error_prefix(st, "replay rank %d", r);
    return st;
}

static ldt_status cuda_replay_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    return r < e->nranks && ldt__cuda_local(e, r) ? cuda_rank_replay(e, r) : LDT_OK;
}

ldt_status ldt__cuda_replay(ldt_exec *e) {
    /* tensors changed on the host since the devices copied them: copied again */
    for (int i = 0; i < e->ncuda_src; i++) {
        const ldt_tensor *t = e->cuda_src[i];
        if (LDT__P(t)->version == e->cuda_ver[i]) continue;
        for (int r = 0; r < e->nranks; r++)
            if (ldt__cuda_local(e, r)) LDT_CHECK(ldt__cuda_exec_reload(e->cuda[r], t));
        cuda_held(e, t, LDT__P(t)->version);
    }
    if (e->threads) LDT_CHECK(ldt_threads_run(e->threads, cuda_replay_thread, e));
    else LDT_CHECK(cuda_rank_replay(e, e->world ? e->me : 0));
    e->ctx->rng_offset += e->rng_advance;
    e->ctx->trace_rng_base = e->ctx->rng_offset;
    e->replays++;
    /* assigned values: in place, the devices hold the new version already; otherwise the
     * value comes home into its tensor (and goes to the devices again at the next replay) */
    for (int a = 0; a < e->nassign; a++) {
        ldt__exec_out *o = &e->outs[e->nout + a];
        ldt_tensor *t = o->assign_to;
        if (!e->inplace[a]) {
            for (int r = 0; r < e->nranks; r++)
                if (ldt__cuda_local(e, r)) LDT_CHECK(cuda_shard_home(e, r, e->progs[r]->node_val[o->node], o->shards));
            if (e->world) LDT_CHECK(ldt__gather_shards(e, o->shards));
            LDT_CHECK(ldt_full_tensor(o->shards, t->data));
            LDT__P(t)->version++;
            continue;
        }
        LDT__P(t)->version++;
        cuda_held(e, t, LDT__P(t)->version);
    }
    if (e->any_inplace) {
        e->ctx->stale_exec = e;
        e->ctx->host_flush = host_flush_cuda;
    }
    return LDT_OK;
}

/* Output i of the last replay: every rank's shard from its device into the output's shards
 * (in process mode gathered over the world: collective), then the full tensor. */
ldt_status ldt__cuda_read(ldt_exec *e, int i, void *dst) {
    ldt__exec_out *o = &e->outs[i];
    if (!e->world || e->gathered[i] != e->replays) {
        for (int r = 0; r < e->nranks; r++)
            if (ldt__cuda_local(e, r)) LDT_CHECK(cuda_shard_home(e, r, e->progs[r]->node_val[o->node], o->shards));
        if (e->world) {
            LDT_CHECK(ldt__gather_shards(e, o->shards));
            e->gathered[i] = e->replays;
        }
    }
    return ldt_full_tensor(o->shards, dst);
}

/* Each rank's step and NCCL world freed on its own thread (its device current). */
static ldt_status cuda_destroy_thread(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int r = ldt_comm_rank(world);
    if (r >= e->nranks) return LDT_OK;
    ldt__cuda_exec_destroy(e->cuda[r]);
    ldt_nccl_world_destroy(e->nccl[r]);
    e->cuda[r] = NULL;
    e->nccl[r] = NULL;
    return LDT_OK;
}

void ldt__cuda_destroy(ldt_exec *e) {
    if (!e->cuda) return;
    if (e->threads) ldt_threads_run(e->threads, cuda_destroy_thread, e);
    for (int r = 0; r < e->nranks; r++) { /* process mode, one rank, or threads that failed */
        ldt__cuda_exec_destroy(e->cuda[r]);
        ldt_nccl_world_destroy(e->nccl[r]);
    }
    free(e->cuda);
    free(e->nccl);
    free(e->cuda_dev);
}
