/* lazydt execution layer: communicators (ranks as threads of one process, one process per
 * rank over MPI, or a GPU per rank over NCCL), sharded tensor data (ldt_shards) with the
 * helpers that move it to and from full tensors, and compiled steps replayed (ldt_compile).
 *
 *   static ldt_status step(ldt_comm *world, void *arg) {
 *       float x[4] = {1, 2, 3, (float)ldt_comm_rank(world)};
 *       (void)arg;
 *       return ldt_all_reduce(world, x, x, 4, LDT_F32, LDT_REDUCE_SUM); // x[3] = 0+1+2+3
 *   }
 *   ldt_status st = ldt_threads_launch(4, NULL, step, NULL);  // 4 ranks, one thread each
 *   if (st != LDT_OK) fprintf(stderr, "%s\n", ldt_last_error());
 *
 * Under mpirun the same step runs once per process: ldt_mpi_world(NULL, &world), then
 * step(world, NULL), then ldt_mpi_world_destroy(world).
 */
#ifndef LDT_EXEC_H
#define LDT_EXEC_H

#include <stdio.h>

#include "ldt/core.h"
#include "ldt/export.h"
#include "ldt/planner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Communicators. A communicator is one rank's handle to a group of ranks; every member
 * calls the same collectives in the same order. Collectives block until the group is done.
 * Counts are in elements. send and recv may be the same buffer (in place) for all_reduce,
 * and for broadcast there is only one buffer.
 */
typedef struct ldt_comm ldt_comm;

typedef struct ldt_comm_options {
    /* A peer that does not arrive within this many milliseconds makes the call fail with
     * LDT_ERR_TIMEOUT. 0 means the default: LDT_COMM_TIMEOUT_MS from the environment (0 there:
     * no timeout; LDT_NCCL_TIMEOUT_MS is an older name), else 60000. LDT_COMM_NO_TIMEOUT
     * waits forever (and turns the MPI watchdog off). docs/communicator.md: the failure model. */
    int64_t timeout_ms;
} ldt_comm_options;
#define LDT_COMM_NO_TIMEOUT (-1)

/* The function each rank thread runs, with its world communicator. */
typedef ldt_status (*ldt_rank_fn)(ldt_comm *world, void *arg);

/* A set of rank threads sharing memory, reusable across runs (the threaded backend). */
typedef struct ldt_threads ldt_threads;

/* A world of nranks (1..4096) rank threads, each run with ldt_threads_run; opts may be
 * NULL. Destroy stops the threads and frees the groups made on it. */
LDT_API ldt_status ldt_threads_create(int nranks, const ldt_comm_options *opts, ldt_threads **out);
LDT_API void ldt_threads_destroy(ldt_threads *t);
/* Runs fn on every rank in its own thread and waits for all. Returns LDT_OK, or the status
 * of the lowest failing rank with its message ("rank 2: ...") as this thread's last error.
 * A rank that fails aborts the world: its peers' pending and later calls return
 * LDT_ERR_REMOTE, and the world must be recreated. */
LDT_API ldt_status ldt_threads_run(ldt_threads *t, ldt_rank_fn fn, void *arg);
/* Create, run once, destroy. */
LDT_API ldt_status ldt_threads_launch(int nranks, const ldt_comm_options *opts, ldt_rank_fn fn,
                                      void *arg);

/* The MPI backend: one process per rank (mpirun). The world communicator of this process
 * over MPI_COMM_WORLD, initialising MPI (MPI_THREAD_MULTIPLE) if nobody has; or over an
 * existing communicator the caller owns: mpi_comm points to an MPI_Comm (this header does
 * not include mpi.h). Reductions give the threaded backend's bits. LDT_ERR_UNSUPPORTED in a
 * build without MPI. */
LDT_API ldt_status ldt_mpi_world(const ldt_comm_options *opts, ldt_comm **out);
LDT_API ldt_status ldt_mpi_world_from(const void *mpi_comm, const ldt_comm_options *opts,
                                      ldt_comm **out);
/* A collective that fails (a timeout, an MPI error) or a replay that fails on this process
 * aborts the world: the other processes' pending and later calls return LDT_ERR_REMOTE
 * naming this rank, and nothing communicates over it again. A call blocked inside MPI past
 * the timeout plus a grace of LDT_COMM_ABORT_GRACE_MS ends the job with MPI_Abort (the one
 * place the library ends a process: a peer that stopped cannot be recovered from). */
#define LDT_COMM_ABORT_GRACE_MS 5000
/* Frees a world made above (a collective over it); finalises MPI if ldt_mpi_world began it.
 * An aborted world is freed without communicating and MPI is left unfinalised: the process
 * should then exit with a non-zero status. */
LDT_API void ldt_mpi_world_destroy(ldt_comm *world);
/* The NCCL backend: a GPU per rank, bootstrapped through `boot`, a world over the same
 * ranks: an MPI world (one process per rank) or a rank thread's world (ldt_threads: one
 * process, a GPU per rank thread; every rank thread calls this). device is this rank's CUDA
 * device (-1: the rank modulo the devices present). Buffers given to its calls are device
 * pointers; its calls run on one stream in program order (ldt_nccl_stream) and are waited
 * for with the timeout (opts's; without one, LDT_COMM_TIMEOUT_MS from the environment, else
 * 60000), after which the communicator is aborted. NCCL reduces in its own
 * order: the other backends' results to rounding. LDT_ERR_UNSUPPORTED without CUDA and
 * NCCL, or without a device. */
LDT_API ldt_status ldt_nccl_world(ldt_comm *boot, int device, const ldt_comm_options *opts,
                                  ldt_comm **out);
LDT_API void ldt_nccl_world_destroy(ldt_comm *world);
LDT_API void *ldt_nccl_stream(const ldt_comm *c); /* its cudaStream_t; NULL for other backends */

LDT_API int ldt_comm_rank(const ldt_comm *c); /* rank within the group */
LDT_API int ldt_comm_size(const ldt_comm *c);
/* The global (world) rank of group member r; -1 if out of range. */
LDT_API int ldt_comm_world_rank(const ldt_comm *c, int r);
/* The backend's name: "threads", "mpi" or "nccl". */
LDT_API const char *ldt_comm_backend(const ldt_comm *c);

/* A communicator over world ranks `ranks` (group order), which must include the caller's.
 * Every member calls it with the same list. Destroy with ldt_comm_destroy. */
LDT_API ldt_status ldt_comm_group(ldt_comm *world, int n, const int *ranks, ldt_comm **out);
/* The group along mesh dim `dim` containing the caller (ranks are world ranks). */
LDT_API ldt_status ldt_comm_mesh_dim(ldt_comm *world, const ldt_mesh *mesh, int dim,
                                     ldt_comm **out);
/* Destroys a group communicator; the world communicator from a run is not destroyed. */
LDT_API void ldt_comm_destroy(ldt_comm *c);

/* recv[i] = op over ranks (in rank order) of send[i]. avg divides the sum by the size
 * (integer division for integer dtypes); bool sum/max are OR, min is AND, avg refused.
 * Integer sums wrap. f16/bf16 accumulate in f32 and round once. */
LDT_API ldt_status ldt_all_reduce(ldt_comm *c, const void *send, void *recv, int64_t count,
                                  ldt_dtype dt, ldt_reduce_op op);
/* send holds size*count elements; rank r receives the reduction of segment r. */
LDT_API ldt_status ldt_reduce_scatter(ldt_comm *c, const void *send, void *recv, int64_t count,
                                      ldt_dtype dt, ldt_reduce_op op);
/* Uneven: send holds sum(counts) elements, rank r receives counts[r] (segment r). */
LDT_API ldt_status ldt_reduce_scatter_v(ldt_comm *c, const void *send, void *recv,
                                        const int64_t *counts, ldt_dtype dt, ldt_reduce_op op);
/* recv holds size*count elements: rank r's send at r*count. */
LDT_API ldt_status ldt_all_gather(ldt_comm *c, const void *send, void *recv, int64_t count,
                                  ldt_dtype dt);
/* Uneven: rank r sends counts[r]; recv is their concatenation in rank order. */
LDT_API ldt_status ldt_all_gather_v(ldt_comm *c, const void *send, void *recv,
                                    const int64_t *counts, ldt_dtype dt);
/* send segment p (count elements) goes to rank p; recv segment p came from rank p. */
LDT_API ldt_status ldt_all_to_all(ldt_comm *c, const void *send, void *recv, int64_t count,
                                  ldt_dtype dt);
/* Uneven: sendcounts[p] elements at sdispls[p] go to rank p; recvcounts[p] elements from
 * rank p land at rdispls[p]. Each pair's counts must agree. */
LDT_API ldt_status ldt_all_to_all_v(ldt_comm *c, const void *send, const int64_t *sendcounts,
                                    const int64_t *sdispls, void *recv, const int64_t *recvcounts,
                                    const int64_t *rdispls, ldt_dtype dt);
LDT_API ldt_status ldt_broadcast(ldt_comm *c, void *buf, int64_t count, ldt_dtype dt, int root);
/* Point to point within the group; a send completes when the receiver has the data. */
LDT_API ldt_status ldt_send(ldt_comm *c, const void *buf, int64_t count, ldt_dtype dt, int peer);
LDT_API ldt_status ldt_recv(ldt_comm *c, void *buf, int64_t count, ldt_dtype dt, int peer);
LDT_API ldt_status ldt_barrier(ldt_comm *c);

/* Calls between group_start and group_end (on this thread) are queued and issued as one at
 * group_end, so matching sends and recvs between two ranks cannot deadlock. Errors from
 * queued calls are reported by group_end. Groups do not nest. */
LDT_API ldt_status ldt_group_start(void);
LDT_API ldt_status ldt_group_end(void);

/* ---------------------------------------------------------------------------------------
 * Sharded tensor data: a spec and every local rank's buffer (its region, row-major).
 */
typedef struct ldt_shards ldt_shards;

/* Zero-filled local buffers for every rank of the spec's mesh (copied spec; the mesh is
 * borrowed and must outlive the shards). A meta mesh holds no data: refused. Destroy frees
 * them, or, while tensors exported by ldt_to_dlpack (ldt/dlpack.h) are alive, leaves the
 * storage to the last of those (the shards themselves must not be used again). */
LDT_API ldt_status ldt_shards_create(const ldt_spec *spec, ldt_shards **out);
LDT_API void ldt_shards_destroy(ldt_shards *s);
LDT_API const ldt_spec *ldt_shards_spec(const ldt_shards *s);
/* Rank's local buffer and its size in bytes (NULL and 0 for a rank outside the mesh). */
LDT_API void *ldt_shards_local(const ldt_shards *s, int rank, int64_t *nbytes);

/* Full host tensor (row-major, spec dtype) -> each rank's shard. Partial(sum) puts the value
 * on coordinate 0 of that mesh dim and zeros elsewhere; avg, max, min put it everywhere. */
LDT_API ldt_status ldt_distribute(const void *full, const ldt_spec *spec, ldt_shards **out);
/* Shards -> full host tensor: Replicate dims read coordinate 0, Partial dims are reduced in
 * coordinate order. */
LDT_API ldt_status ldt_full_tensor(const ldt_shards *s, void *full);
/* Builds shards from every rank's local data (locals[i] is the i-th rank of the mesh in
 * row-major order, ldt_layout's local shape), copying it. */
LDT_API ldt_status ldt_from_local(const ldt_spec *spec, const void *const *locals,
                                  ldt_shards **out);
/* Copies rank's local shard out (nbytes must be its size). */
LDT_API ldt_status ldt_to_local(const ldt_shards *s, int rank, void *dst, int64_t nbytes);

/* ---------------------------------------------------------------------------------------
 * Devices.
 */
/* Number of CUDA devices: 0 when the build has no CUDA or the runtime reports any error
 * (no driver, no device). */
LDT_API int ldt_cuda_device_count(void);
/* ---------------------------------------------------------------------------------------
 * Materialization of parameters described on a meta mesh (their init recipes, trace.h).
 */
typedef struct ldt_materialize_stats {
    int64_t allocated_bytes;        /* storage made for all ranks: their shards, nothing more */
    int64_t per_rank_allocated_max; /* the largest rank's */
    int64_t tensors;
} ldt_materialize_stats;
/* Makes out[i] = params[i]'s shards on `mesh` (a real mesh) under placements[i] (one per mesh
 * dim): each rank thread allocates and computes only its region, from the global indices, so
 * every placement gives the single-device values bitwise. stats (may be NULL) accumulates. */
LDT_API ldt_status ldt_materialize(const ldt_tensor *const *params,
                                   const ldt_placement *const *placements, int n,
                                   const ldt_mesh *mesh, ldt_shards **out,
                                   ldt_materialize_stats *stats);

/* Threads each BLAS call may use (OpenBLAS); rank threads set 1, since they use the cores
 * already. Programs that do no GEMM of their own call it early to keep BLAS's pool idle. */
LDT_API void ldt_set_blas_threads(int n);
/* 1 when the library was built with CUDA, NCCL, MPI. */
LDT_API int ldt_built_with_cuda(void);
LDT_API int ldt_built_with_nccl(void);
LDT_API int ldt_built_with_mpi(void);
/* 1 when the CUDA backend runs on the CPU emulator (LDT_CUDA=EMU, docs/gpu.md): its "GPU"
 * results are real, its timings are the CPU's. */
LDT_API int ldt_cuda_emulated(void);

/* ---------------------------------------------------------------------------------------
 * Redistribution: running plans from ldt/planner.h, and measuring a communicator for the
 * cost model. (The typedefs repeat planner.h's, as C11 allows, so this header stands alone.)
 */
typedef struct ldt_redist_plan ldt_redist_plan;
typedef struct ldt_cost_model ldt_cost_model;
typedef struct ldt_redist_runner ldt_redist_runner;

/* Per rank, inside ldt_threads_run (every rank of both meshes calls it): `in` is this rank's
 * local shard of the plan's source (ignored off the source mesh), `out` gets its local shard
 * of the target (ignored off the target mesh); they must not overlap. The world holds at
 * least every rank of both meshes; a rank in neither returns at once. */
LDT_API ldt_status ldt_redistribute(ldt_comm *world, const ldt_redist_plan *plan, const void *in,
                                    void *out);
/* The same, split so the groups and buffers are made once and the plan run many times. */
LDT_API ldt_status ldt_redist_runner_create(ldt_comm *world, const ldt_redist_plan *plan,
                                            ldt_redist_runner **out);
LDT_API ldt_status ldt_redist_runner_run(ldt_redist_runner *r, const void *in, void *out);
LDT_API void ldt_redist_runner_destroy(ldt_redist_runner *r);
/* Runs the plan on a threaded world of its own (max rank of both meshes + 1 threads) from
 * shards of the plan's source spec; *out gets new shards of its target spec. */
LDT_API ldt_status ldt_redistribute_shards(const ldt_shards *src, const ldt_redist_plan *plan,
                                           ldt_shards **out);

/* Runs the plan `reps` times (after one warm-up) on a threaded world of its own from shards
 * `src` (NULL: zero-filled source shards); *seconds gets the median wall time of a run, from
 * a world barrier to the next one after it. *out (may be NULL) gets the target shards. */
LDT_API ldt_status ldt_redistribute_measure(const ldt_shards *src, const ldt_redist_plan *plan,
                                            int reps, double *seconds, ldt_shards **out);
/* The plan's own time, as ldt_redistribute_measure's world (zero-filled source shards) runs
 * it: before each of the `reps` runs (after one warm-up) a run of the harness alone (the two
 * barriers, nothing between) in the same world; *seconds gets the median run less the median
 * harness run, *harness (may be NULL) that median. A short plan's time is a few times the
 * harness's and as noisy: timed with its harness in a world of its own, a 105 KiB copy on 4
 * rank threads of a shared 2-core machine came out 1.2 to 19 us; beside it, 9.6 to 18.6. */
LDT_API ldt_status ldt_redistribute_measure_net(const ldt_redist_plan *plan, int reps, double *seconds,
                                                double *harness);

/* Like ldt_distribute, but every Partial mesh dim holds random addends whose reduction is
 * the tensor (sum: integers in [-3, 3] and a remainder; avg: the value plus deltas summing
 * to zero; max/min: values below/above it and the value itself on one coordinate), seeded
 * by `seed`. For integer-valued tensors of small magnitude every reduction order gives the
 * tensor back exactly. bool and u8 under avg (no exact signed deltas) get the value on
 * every coordinate. */
LDT_API ldt_status ldt_distribute_addends(const void *full, const ldt_spec *spec, uint64_t seed,
                                          ldt_shards **out);

typedef struct ldt_cost_sample ldt_cost_sample;

typedef struct ldt_calibrate_options {
    int quick; /* three sizes (4 KiB, 64 KiB, 1 MiB) and 3 repeats: a second or so */
    int reps;  /* runs per timing below 16 MiB (fewer above), over all rounds; 0: 9 */
    int median; /* 1: each timing the median of its repeats in one world, in one round
                   (what a step or `ldt-bench costmodel` sees on a loaded machine), in place
                   of the lower quartile of runs each in a world of its own, pooled over the
                   rounds (the reproducible figure) */
    struct ldt_comm *world; /* NULL: the mesh's ranks as rank threads; an MPI world
                               (ldt_mpi_world): every process of it calls ldt_calibrate with
                               the same arguments, each timing its own runs of each
                               one-step redistribution plan on the world (a redistribution
                               runner, as rank threads run it) and its own compute replays
                               (the world's size must be the mesh's ranks); each gets the fit
                               of its own timings */
    int rounds; /* sweeps of every timing, each with 1/rounds of the repeats, a timing the
                   lower quartile of its runs over all of them; 0: 3 (quick or median: 1) */
} ldt_calibrate_options;

/* Measures the cost model's constants on `mesh`'s ranks as rank threads: every collective
 * kind the redistribution planner issues (all_reduce, reduce_scatter, all_gather,
 * all_to_all) along each mesh dim of 2 or more ranks, at eight sizes from 4 KiB to 64 MiB,
 * and the local ops (chunk, pad), each the lower quartile of its runs (opts->median: the median),
 * less the harness (an empty plan's time); then fits them (ldt_cost_model_fit). Compute:
 * GEMM FLOP/s at square shapes (n = 32 to 1024) and an elementwise add's bandwidth (64 KiB
 * to 64 MiB), with every rank thread of the mesh computing at once (sharing the cores as a
 * step's ranks do), give one rank's f32 peak and memory bandwidth with their efficiency
 * curves; cores is the processors online, and with more ranks than cores the peaks and
 * bandwidth are scaled by ranks / cores (one rank's unshared figure: the roofline's slowdown
 * gives the shared one back); a chain of 256 one-element adds against one gives launch_s;
 * layer_norm, softmax, sum and gelu at 64 KiB to 4 MiB give the norm, softmax, reduce and
 * transcendental curves (the roofline's time at efficiency 1 over the measured time); with
 * more ranks than cores, steps of 2, 6 and 18 GEMM + all_gather rounds (GEMMs of 32, 128 and
 * 384), each beside the same GEMMs without the all_gathers, give rendezvous_s and
 * rendezvous_share; on rank threads, send/recv (Shard(0) to the ranks rotated by one)
 * gives its bytes and knee factors; ldt_broadcast along each mesh dim (on the rank threads
 * or the MPI world), less two barriers alone, gives broadcast's (samples with broadcast 1). The result starts from the shipped "cpu-threads" (what is not measured
 * keeps its values): a profile named "calibrated" with one link per mesh dim. opts may be
 * NULL. */
LDT_API ldt_status ldt_calibrate(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                                 ldt_cost_model *out);
/* The same, also giving the timings with the fit's value for each: samples has room for cap
 * (ldt_calibrate_max_samples is enough), *n (may be NULL) gets how many, *rms (may be NULL)
 * the fit's root mean square relative residual. */
LDT_API ldt_status ldt_calibrate_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts,
                                         ldt_cost_model *out, ldt_cost_sample *samples, int cap,
                                         int *n, double *rms);
/* Room for every sample ldt_calibrate_samples takes on mesh with opts (0 for NULL mesh). */
LDT_API int ldt_calibrate_max_samples(const ldt_mesh *mesh, const ldt_calibrate_options *opts);


/* ---------------------------------------------------------------------------------------
 * Running a plan (ldt/planner.h) on a threaded mesh: every rank runs its program; outputs
 * (nodes of the planned trace) are gathered into full row-major host tensors dst[i] of
 * nbytes[i] bytes. Inputs must be bound. The trace stays current (ldt_read still runs it
 * eagerly). A meta mesh is refused.
 */
typedef struct ldt_plan ldt_plan;
typedef struct ldt_tensor ldt_tensor;
/* Runs plan on its mesh's rank threads and gathers outs[i] into dst[i] (as above). */
LDT_API ldt_status ldt_plan_run(ldt_plan *plan, int nout, ldt_tensor *const *outs, void *const *dst,
                                const int64_t *nbytes);
/* One eager step on ctx's mesh: plans the current trace anew, runs it (as ldt_plan_run) and
 * ends the trace (its random draws stay taken, as ldt_sync's do). The reference a compiled
 * executable's replays are checked against. */
LDT_API ldt_status ldt_run_eager(ldt_ctx *ctx, const ldt_plan_options *opts, int nout,
                                 ldt_tensor *const *outs, void *const *dst, const int64_t *nbytes);


/* ---------------------------------------------------------------------------------------
 * Compile once, replay dispatch-free (docs/replay.md).
 *
 *   ldt_tensor *loss = ldt_model_forward(m);          // trace the step
 *   ldt_exec *ex;
 *   ldt_compile(ctx, &loss, 1, NULL, &ex);            // plan, lower, memory plan, bind
 *   for (int step = 0; step < n; step++) {
 *       ldt_input_bind(x, batch[step], nbytes);       // or ldt_exec_bind: zero-copy
 *       ldt_replay(ex);                               // one step, no dispatch
 *       ldt_exec_read(ex, 0, &l, sizeof l);
 *   }
 *
 * The executable belongs to the context's plan cache: compiling the same step again (same
 * graph hash, mesh, cost model, options, tensors) returns it without planning, and it lives
 * until the context is destroyed. Compiling ends the trace (its random ops give their offsets
 * back: each replay draws the step's amount from the stream, so replay k equals eager step k).
 */
typedef struct ldt_exec ldt_exec;

typedef struct ldt_compile_options {
    ldt_plan_options plan;
    const char *trace_path; /* write a Chrome trace JSON of each replay here (NULL: none) */
    int profile;            /* time every instruction of each replay (ldt_exec_breakdown) */
    int no_fuse;            /* keep every collective a call of its own */
    /* collectives on a communication thread per rank, overlapping compute: 1 on, -1 off, 0
     * auto (on when the machine has a core for every rank and communication thread; on
     * fewer, the threads' hand-offs cost more than the overlap gains) */
    int overlap;
    /* the cap of a fused all_reduce's bucket in bytes (docs/replay.md, "Gradient bucketing"),
     * and of a reduce_scatter's or all_gather's (ZeRO's; counted on the whole tensor, "ZeRO
     * buckets"); 0: 25 MiB, as PyTorch DDP's bucket_cap_mb */
    int64_t bucket_bytes;
} ldt_compile_options;

/* Compiles ctx's current trace with `outputs` (nodes of it) read after each replay. */
LDT_API ldt_status ldt_compile(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                               const ldt_compile_options *opts, ldt_exec **out);
/* Runs one step on every rank with the inputs' current data. A failed replay leaves the
 * executable unusable (its rank threads are aborted): compile anew. */
LDT_API ldt_status ldt_replay(ldt_exec *e);
/* Output i of the last replay as a full row-major tensor (nbytes: its size). */
LDT_API ldt_status ldt_exec_read(ldt_exec *e, int i, void *dst, int64_t nbytes);
/* Zero-copy input: later replays read input `name` from data (nbytes: its size), which must
 * stay valid and unchanged while a replay runs. Ranks that hold all of it read it in place. */
LDT_API ldt_status ldt_exec_bind(ldt_exec *e, const char *name, const void *data, int64_t nbytes);

typedef struct ldt_exec_stats {
    int64_t instructions;     /* per rank, the most */
    int64_t arena_bytes;      /* per rank, the largest arena */
    int64_t bound_bytes;      /* per rank, the largest liveness lower bound */
    int64_t replays;
    double modeled_seconds;   /* the plan's modeled communication */
    int64_t collectives;      /* calls per replay on the busiest rank, after fusion */
    int64_t collectives_unfused; /* the same before fusion */
    int64_t pack_buckets;     /* fused calls that need pack/unpack copies (0: all zero-copy;
                                 a reduce_scatter or all_gather bucket always stages its
                                 rank-interleaved side, docs/replay.md "ZeRO buckets") */
    int64_t packed_all_reduces; /* of them, fused all_reduces whose members the memory plan
                                   could not place back to back (0: every all_reduce bucket
                                   is one call in place) */
    int64_t dim_collectives[LDT_MAX_DIMS]; /* per mesh dim, the calls per replay that span it
                                              (busiest rank, after fusion): on a dp dim, the
                                              gradient buckets and what else crosses it */
    int64_t dim_collectives_unfused[LDT_MAX_DIMS]; /* the same before fusion */
    int64_t dim_buckets[LDT_MAX_DIMS]; /* per mesh dim, the buckets the bucket cap implies for
                                          the program that runs (busiest rank): its calls on the
                                          dim (ldt_exec_dim_calls) grouped by phase and kind
                                          (collective, group, dtype, reduce op), each group
                                          filled by next fit in readiness order; the same fused
                                          or not. Fusion's goal: dim_collectives <= this
                                          (docs/replay.md, "What is counted") */
    double modeled_step_seconds;    /* compute (roofline estimate) + communication, in series */
    double modeled_overlap_seconds; /* the same with collectives overlapping compute */
    int64_t overlapped_collectives; /* collectives with other work between start and wait */
    int64_t collective_groups; /* runs of unfusable collectives issued as one group (when
                                  collectives run in line; overlapped ones need none) */
    int64_t early_all_reduces; /* all_reduce calls (after fusion) issued while matmul work is
                                  still to come on the rank: in a training step, gradient
                                  buckets started during the backward */
    int64_t assigned;          /* values assigned to persistent tensors (ldt_assign) */
    int64_t assigned_in_place; /* of them, those that persist in the ranks' buffers between
                                  replays (no host copy per replay; the host's is brought up
                                  to date when read) */
    int64_t host_copies;       /* times the host's copy of them was brought up to date (a
                                  host read, an eager run, another executable): not per step */
    int fuse_agreed;           /* 1: every rank's buckets (gradient all_reduces; then
                                  reduce_scatters and all_gathers, ZeRO's) were one decision
                                  and were applied; 0: a pass's would have differed (or fusion
                                  is off), and that pass left every collective a call of its
                                  own */
} ldt_exec_stats;
/* The executable's figures above, as of its last replay. */
LDT_API ldt_status ldt_exec_stats_get(const ldt_exec *e, ldt_exec_stats *out);
/* One collective call a replay makes on a mesh dim (ldt_exec_dim_calls). */
typedef struct ldt_exec_call {
    ldt_collective collective; /* LDT_COLL_ALL_REDUCE, LDT_COLL_REDUCE_SCATTER, ... */
    int ndims;                 /* the mesh dims its group spans */
    int dims[LDT_MAX_DIMS];
    ldt_dtype dtype;
    int members;   /* collectives fused into it (1: a call of its own; a redistribution of
                      several steps on the dim is one call per step) */
    int64_t bytes; /* its members' bytes on the rank: an all_reduce's buffers, a
                      reduce_scatter's input, an all_gather's output */
    int phase;     /* 0: reads no result of a call on the dim (the backward's gradients);
                      k: reads what a phase k-1 call made (ZeRO: the clip norm of the
                      reduce_scattered gradients 1, the parameters' gathers after it 2) */
} ldt_exec_call;
/* The calls one replay of e makes on mesh dim `dim`, on the rank that makes the most, in
 * program order: the first cap of them into out[], their count into *n (which may exceed
 * cap). */
LDT_API ldt_status ldt_exec_dim_calls(const ldt_exec *e, int dim, ldt_exec_call *out, int cap, int *n);
/* The last profiled replay's time by op (kernels by op name, collectives by kind, loads), on
 * its busiest rank: calls, seconds, floating-point operations (GEMM-like ops) and bytes
 * moved (collectives: per rank, as the ring algorithms move them). Needs profile or
 * trace_path at compile. Entries in first-seen order; *n of them (at most cap). */
typedef struct ldt_exec_op_time {
    char name[48];
    int collective;
    int64_t calls;
    double seconds, flops, bytes;
    double modeled_seconds; /* the same instructions as the modeled step prices them */
} ldt_exec_op_time;
/* Fills out[0..*n) with the breakdown described above. */
LDT_API ldt_status ldt_exec_breakdown(const ldt_exec *e, ldt_exec_op_time *out, int cap, int *n);

/* The last profiled replay's summed instruction times on world rank `rank` (kernels,
 * collectives with their waits for peers, loads): what ldt_exec_breakdown splits by op on the
 * busiest rank. Needs profile or trace_path at compile. */
LDT_API ldt_status ldt_exec_rank_inside(const ldt_exec *e, int rank, double *seconds);
/* Seconds world rank `rank` has spent blocked inside collectives waiting for its peers to
 * arrive, summed over every replay of e so far (take differences around a replay), so that
 * time waiting for peers (or for a core) is not read as the collectives' own work. Rank-thread
 * meshes; other backends report 0. */
LDT_API ldt_status ldt_exec_comm_wait(const ldt_exec *e, int rank, double *seconds);

/* The context's plan cache: compiles answered from it and compiles that built anew. */
LDT_API ldt_status ldt_exec_cache_stats(const ldt_ctx *ctx, int64_t *hits, int64_t *misses);

/* ---------------------------------------------------------------------------------------
 * Sharded checkpoints (docs/checkpoint.md): one safetensors file per rank, listed by
 * DIR/manifest.json, each holding its shards with their sharding and an xxHash64 in
 * __metadata__ (checkpoints saved before manifests, DIR/rank-<r>.safetensors, still load). Replicated regions are written once (by the lowest rank holding them);
 * Partial placements are reduced before saving. Loading reshards onto any spec; a merge makes
 * one standard safetensors file of the full tensors. Corrupt or incomplete files are
 * LDT_ERR_CORRUPT with a message naming the file and tensor; a failed call returns nothing.
 *
 *   ldt_ckpt_save("ckpt", 2, (const char *[]){"w", "b"}, (ldt_shards *[]){w, b});
 *   ldt_ckpt_load("ckpt", "w", &other_spec, &w2);     // another mesh and placements
 *   ldt_ckpt_merge("ckpt", "model.safetensors");       // offline, no mesh needed
 */
/* Saves n tensors under distinct names (non-empty UTF-8, no control characters, not
 * "__metadata__" or "lazydt") into dir (created if absent). Atomic: new rank files under new
 * names, fsynced, then the manifest renamed into place; after a failure or kill at any point
 * dir loads as the old checkpoint or the new one, whole. Old files are removed after. */
LDT_API ldt_status ldt_ckpt_save(const char *dir, int n, const char *const *names,
                         ldt_shards *const *tensors);
/* Reads tensor `name` from dir as shards of `target` (its shape and dtype must match the
 * saved tensor; mesh and placements are free). Checksums and coverage are verified. */
LDT_API ldt_status ldt_ckpt_load(const char *dir, const char *name, const ldt_spec *target,
                                 ldt_shards **out);
/* Loads n tensors with one reading of the headers (cheaper than n loads): out[i] gets
 * names[i] as shards of targets[i]. All or nothing: on any error every out[i] is NULL. */
LDT_API ldt_status ldt_ckpt_load_n(const char *dir, int n, const char *const *names,
                                   const ldt_spec *const *targets, ldt_shards **out);
/* Writes every full tensor of dir into one single-device safetensors file at out_path
 * (names sorted, data contiguous, header padded to 8 bytes), via a temporary file. An
 * out_path inside dir is refused (LDT_ERR_INVALID_ARGUMENT) before anything is written. */
LDT_API ldt_status ldt_ckpt_merge(const char *dir, const char *out_path);
/* Prints dir's tensors with their dtype, shape, mesh, placements, stored shards and sizes,
 * and the files in dir that are not part of the checkpoint. Headers are checked; the data is
 * not read. */
LDT_API ldt_status ldt_ckpt_info(const char *dir, FILE *f);
/* The same as one JSON object (`ldt ckpt info --json`; keys in docs/cli.md):
 * {"dir","format","version","rank_files","stored_bytes","file_bytes","unlisted_files":[{"file",
 * "why"}],"save_id","manifest","tensors":[{"name",
 * "dtype","shape","mesh","placements","tensor_bytes","stored_bytes","shards":[{"rank",
 * "local_shape","offset","slices"?,"bytes"}]}]}. */
LDT_API ldt_status ldt_ckpt_info_json(const char *dir, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
