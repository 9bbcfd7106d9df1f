/* Internal: the CUDA backend for one rank's program (exec/backend_cuda.c, docs/gpu.md).
 *
 * Create binds the program once: a device arena from the memory plan, persistent device
 * copies of the parameter and constant shards, static device buffers (and pinned host
 * staging) for the inputs, every kernel resolved to its CUDA launcher with device pointers.
 * It then runs the step once, launch by launch, to validate it, and captures the same
 * launches into a CUDA Graph. A replay stages the inputs, launches the graph once and waits.
 *
 *   ldt__cuda_exec *x;
 *   LDT_CHECK(ldt__cuda_exec_create(prog, &out_val, 1, &x)); // refuses what it cannot run
 *   for (int s = 0; s < steps; s++) LDT_CHECK(ldt__cuda_exec_replay(x));
 *   LDT_CHECK(ldt__cuda_exec_read(x, out_val, host, nbytes));
 *   ldt__cuda_exec_destroy(x);
 *
 * The header compiles in every build; without CUDA the functions return LDT_ERR_UNSUPPORTED. */
#ifndef LDT_EXEC_BACKEND_CUDA_H
#define LDT_EXEC_BACKEND_CUDA_H

#include "ldt/exec.h"
#include "planner/program.h"

typedef struct ldt__cuda_exec ldt__cuda_exec;

/* The current CUDA device as the runtime describes it (for benchmarks: bench/gpu_gemm.c):
 * its name (into name[0..n)), multiprocessors, compute capability (major x 10 + minor), peak
 * SM clock in Hz and memory bandwidth in bytes/s (memory clock x 2 transfers x bus width).
 * Returns 1, or 0 (outputs zeroed) without CUDA, on the emulator, or on any runtime error. */
int ldt__cuda_device_info(char *name, size_t n, int *sms, int *cc, double *clock_hz,
                          double *mem_Bps);

/* Whether the CUDA backend can run program p: LDT_ERR_UNSUPPORTED naming the first
 * instruction it cannot (a collective, a redistribution, arange, a custom op, an op with no
 * CUDA kernel yet). Needs no device. */
ldt_status ldt__cuda_program_check(const ldt__program *p);
/* The same for a program of a mesh of nranks ranks (collectives over NCCL where the build has
 * it). */
ldt_status ldt__cuda_program_check_ranks(const ldt__program *p, int nranks);

/* Binds p (which must outlive the executable) on the current device, validates the step
 * with one eager run and captures it into a CUDA Graph. outs[0..nouts) are the values to be
 * readable after a replay. LDT_ERR_UNSUPPORTED without CUDA, without a device, or for a
 * program ldt__cuda_program_check refuses; LDT_ERR_CUDA naming the CUDA error otherwise. */
ldt_status ldt__cuda_exec_create(const ldt__program *p, const int32_t *outs, int nouts,
                                 ldt__cuda_exec **out);
/* What a step needs beyond its program: the values to read after a replay; for a step that
 * assigns persistent tensors (a training step), copies made at the end of each step, inside
 * the graph, of value copy_src[k] over value copy_dst[k] (a parameter's persistent shard), so
 * the next step reads the update where it loads the parameter (the validation run at create
 * makes none: the first replay is the first update); and the mesh's ranks: on one rank every
 * collective is a local copy or nothing. */
typedef struct ldt__cuda_step {
    const int32_t *outs;
    int nouts;
    const int32_t *copy_src, *copy_dst;
    int ncopies;
    int nranks; /* 0: not known (every collective refused) */
    int run_once; /* create runs the program once and captures nothing (materialization) */
    /* more than one rank: this rank's NCCL world (ldt_nccl_world) and the program's mesh.
     * Create is then collective: every rank of the mesh creates its step at once (its groups
     * are made, and the validation run meets the others at each collective), and so is each
     * replay. Collectives go on a communication stream in program order, forked from and
     * joined to the step's stream by events (an asynchronous one joins at its wait); a
     * redistribution runs as recorded device copies and NCCL calls (exec/redist_record.h). */
    ldt_comm *world;
    const ldt_mesh *mesh;
    /* the host world the ranks bootstrapped through (rank threads' or MPI; may be NULL): after
     * binding, the ranks agree there that every one bound its step before any meets another
     * at a collective, so a rank that failed (out of memory) fails the others at once, with
     * LDT_ERR_REMOTE, instead of their waiting out the timeout */
    ldt_comm *boot;
} ldt__cuda_step;
ldt_status ldt__cuda_exec_create_step(const ldt__program *p, const ldt__cuda_step *s,
                                      ldt__cuda_exec **out);
/* Copies tensor t's shards (every persistent load of t) from its host data to the device
 * again: after the host changed it. Not while a step runs. */
ldt_status ldt__cuda_exec_reload(ldt__cuda_exec *x, const struct ldt_tensor *t);
/* Input tensor t's data comes from host buffer data (the whole tensor, row-major) at the next
 * steps instead of the tensor's own (NULL: the tensor's again): ldt_exec_bind. */
ldt_status ldt__cuda_exec_bind_input(ldt__cuda_exec *x, const struct ldt_tensor *t, const void *data);
/* One step: inputs copied in from their tensors' host data, one graph launch, a wait; a data
 * error found on the device (integer division by zero) comes back as
 * LDT_ERR_INVALID_ARGUMENT. With collectives the wait lasts at most the NCCL communicators'
 * timeout: then they are aborted and the step fails (LDT_ERR_TIMEOUT); an asynchronous NCCL
 * error fails it too (LDT_ERR_REMOTE). */
ldt_status ldt__cuda_exec_replay(ldt__cuda_exec *x);
/* The same step issued launch by launch on the stream, without the graph (what capture
 * saves: the `eager` column of bench gpu_replay). */
ldt_status ldt__cuda_exec_run_eager(ldt__cuda_exec *x);
/* Copies value v (one of create's outs, or a parameter shard) into host dst of nbytes. */
ldt_status ldt__cuda_exec_read(ldt__cuda_exec *x, int32_t v, void *dst, int64_t nbytes);
/* The random stream in device memory: every random op of the step draws at its lowered
 * offset + delta, and each step (replay or eager run) ends by adding `advance` to delta on
 * the device, inside the graph, so replays draw anew without re-capture. After create: delta
 * 0, advance 0 (every step draws what the program was lowered with), 0 steps. */
ldt_status ldt__cuda_exec_set_rng(ldt__cuda_exec *x, uint64_t delta, uint64_t advance);
/* The current delta and the steps run since create (read from the device). */
ldt_status ldt__cuda_exec_rng(ldt__cuda_exec *x, uint64_t *delta, uint64_t *steps);
/* Makes device d the calling thread's current one (LDT_ERR_CUDA naming the error). */
ldt_status ldt__cuda_select_device(int d);
/* Figures: the device arena's bytes, and the graph's node count (0 before capture). */
int64_t ldt__cuda_exec_arena_bytes(const ldt__cuda_exec *x);
int64_t ldt__cuda_exec_graph_nodes(const ldt__cuda_exec *x);
void ldt__cuda_exec_destroy(ldt__cuda_exec *x);

#endif
