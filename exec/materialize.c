/* Materialization: parameters described on a meta mesh (their init recipes) become shards on a
 * real mesh. Each rank allocates only its shard and computes only its region, every element
 * from its global index, so any placement gives exactly the single-device values
 * (docs/deferred-init.md). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "exec/comm.h"
#include "core/mesh.h"
#include "core/sysmem.h"
#include "exec/backend_cuda.h"
#include "exec/groups.h"
#include "exec/shards.h"
#include "ldt/exec.h"
#include "trace/trace.h"

typedef struct mat_job {
    const ldt_mesh *mesh;
    const ldt_placement *const *placements;
    const ldt_tensor *const *params;
    ldt_shards **shards;
    int n;
    int64_t *allocated; /* per world rank */
} mat_job;


/* A CUDA mesh: the rank's program runs once on its GPU (device rank % devices) with the CUDA
 * kernels, and each shard is copied home into ext[i]. */
static ldt_status run_on_device(const ldt__program *p, int rank, int n, void *const *ext) {
    int32_t *outs = malloc((size_t)(n ? n : 1) * sizeof *outs);
    int ndev = ldt_cuda_device_count();
    ldt__cuda_exec *x = NULL;
    ldt_status st;
    if (!outs) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "materialize: out of memory");
    for (int i = 0; i < n; i++) outs[i] = i;
    st = ndev > 0 ? ldt__cuda_select_device(rank % ndev) : LDT_OK;
    if (st == LDT_OK) {
        ldt__cuda_step s = {outs, n, NULL, NULL, 0, 1, 1, NULL, NULL, NULL};
        st = ldt__cuda_exec_create_step(p, &s, &x);
    }
    for (int i = 0; i < n && st == LDT_OK; i++) {
        int64_t nb = ldt__value_bytes(&p->vals[i]);
        if (nb) st = ldt__cuda_exec_read(x, i, ext[i], nb);
    }
    ldt__cuda_exec_destroy(x);
    free(outs);
    return st == LDT_OK ? LDT_OK
                        : ldt__error_prefix(st, "materialize on the GPU of rank %d", rank);
}

/* One rank: the recipes lowered to its program, run into its shards (value i is parameter
 * i's shard, so the program allocates nothing). */
static ldt_status rank_fn(ldt_comm *world, void *arg) {
    mat_job *j = arg;
    int rank = ldt_comm_rank(world);
    ldt__program *p;
    void **ext;
    ldt_status st;
    if (rank > j->mesh->max_rank || j->mesh->pos_of[rank] < 0) return LDT_OK; /* not on the mesh */
    LDT_CHECK(ldt__lower_recipes(j->params, j->placements, j->n, j->mesh, rank, &p));
    if (!(ext = calloc((size_t)(j->n ? j->n : 1), sizeof *ext))) {
        ldt__program_free(p);
        free(p);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "materialize: out of memory");
    }
    for (int i = 0; i < j->n; i++) {
        int64_t nb;
        ext[i] = ldt_shards_local(j->shards[i], rank, &nb);
        j->allocated[rank] += nb;
        if (!ext[i] || !nb) ext[i] = &ext[i]; /* an empty shard: any address, never written */
    }
    if (ldt_mesh_device(j->mesh) == LDT_DEVICE_CUDA) st = run_on_device(p, rank, j->n, ext);
    else st = ldt__program_run_into(world, j->mesh, NULL, p, ext);
    free(ext);
    ldt__program_free(p);
    free(p);
    return st;
}

/* Every rank of a CPU mesh holds its shards in this process: refuse, before allocating any,
 * what this machine's memory cannot hold (a 175B model on dp=8,tp=8 is 2.8 TB of shards). */
static ldt_status check_fits(const ldt_tensor *const *params, const ldt_placement *const *placements,
                             int n, const ldt_mesh *mesh) {
    double need = 0, have = ldt__machine_memory_bytes();
    int nr = ldt_mesh_nranks(mesh);
    if (ldt_mesh_device(mesh) != LDT_DEVICE_CPU || have <= 0) return LDT_OK;
    for (int i = 0; i < n; i++) {
        const ldt_tensor *t = params[i];
        ldt_spec spec;
        if (!t || t->kind != LDT__PERSISTENT || !placements[i] ||
            ldt_spec_init(&spec, mesh, t->shape, placements[i], ldt_mesh_ndim(mesh), (ldt_dtype)t->dtype) != LDT_OK)
            continue; /* the main loop reports it */
        for (int r = 0; r < nr; r++) {
            ldt_region reg;
            if (ldt_layout(&spec, ldt_mesh_rank_at(mesh, r), &reg) == LDT_OK)
                need += (double)reg.numel * (double)ldt_dtype_size((ldt_dtype)t->dtype);
        }
    }
    ldt_clear_error();
    if (need > have)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY,
                 "materialize: the shards of %d parameters take %.4g GB on the %d ranks of this "
                 "process, more than this machine's %.4g GB of memory; materialize one process per "
                 "rank (MPI), on GPUs, or fewer parameters at a time",
                 n, need / 1e9, nr, have / 1e9);
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
    /* one rank thread per rank: refused before the shards are sized rank by rank */
    if (mesh->max_rank + 1 > LDT__COMM_MAX_RANKS)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "materialize: mesh of %d ranks: rank threads in one process stop at %d; "
                 "materialize one process per rank (MPI) or fewer ranks", mesh->max_rank + 1, LDT__COMM_MAX_RANKS);
    LDT_CHECK(check_fits(params, placements, n, mesh));
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
    j.placements = placements;
    j.mesh = mesh;
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
