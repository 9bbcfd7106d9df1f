/* Internal: the compiled executable's body, shared by the files that build and run it
 * (docs/replay.md): exec/compile.c, exec/bind.c, exec/commq.c, exec/replay.c, exec/host.c,
 * exec/gather.c, exec/replay_cuda.c, exec/cache.c, exec/profile.c. */
#ifndef LDT_EXEC_EXEC_INTERNAL_H
#define LDT_EXEC_EXEC_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "kernels/cpu/kernel.h"
#include "ldt/exec.h"
#include "planner/memory.h"
#include "planner/program.h"

typedef struct rank_state rank_state;

typedef struct binstr binstr;

/* A custom op's call, prepared at bind so a replay makes one more indirect call, no more.
 * The calls of a rank's custom instructions lie in one array of their own, one cache line
 * each, and the hot pair's argument points at the call itself: a custom kernel's replay reads
 * the hot pair and this line, nothing of the cold record. */
typedef struct ldt__custom_call {
    _Alignas(64) ldt_custom_cpu_fn fn;
    void *user;
    const void **in;
    ldt_shape *shapes;
    ldt_dtype *dtypes;
    void *out;
    const binstr *b; /* its cold record: the output shape, and the op's name in messages */
    int16_t nin;
    int16_t out_dtype;
} ldt__custom_call;
_Static_assert(sizeof(ldt__custom_call) == 64, "a custom call is one cache line");

/* The array the replay loop walks (hot): per instruction, the function it calls and the
 * argument it calls it with, 16 bytes, four to a cache line. `call` points at the
 * instruction's cold record (binstr), whose first member is its prepared kernel call; for a
 * custom op, at its ldt__custom_call (rank_state.ccalls). */
typedef struct ldt__hot {
    ldt__kernel_fn fn;
    const ldt__kcall *call;
} ldt__hot;
_Static_assert(sizeof(ldt__hot) == 16, "the hot pair is two pointers");

/* One bound instruction's cold record: everything but the hot pair. A kernel reads its call;
 * a wrapper (load, collectives, fill, custom, start, wait) finds the rest of its record from
 * the call pointer it is given (BIN_OF). */
struct binstr {
    ldt__kcall call; /* first: the hot array's argument */
    rank_state *rs;
    int64_t idx;      /* in the program */
    ldt__kernel_fn fn; /* the bound function: what the hot array calls (ldt__exec_bind_noop
                          puts it back) */
    int aux;          /* LOAD of an input: its binding */
    uint64_t version; /* LOAD of a parameter/constant: the version its copy holds */
    ldt_comm *comm;   /* ALL_REDUCE: the group, made at the first replay */
    ldt_redist_runner *runner; /* REDIST: made at the first replay */
    ldt__custom_call *custom; /* KERNEL of a custom op: its call (rank_state.ccalls), else NULL */
    ldt__kcall *hcall; /* KERNEL of a built-in op: the copy of `call` the hot array points at
                          (rank_state.kcalls), kept in step with it; else NULL */
    int64_t count;  /* ALL_REDUCE: elements reduced (a fused one: in the bucket) */
    void *scratch;  /* fused ALL_REDUCE that must pack: the bucket's staging buffer; BUCKET:
                       its packed side (reduce_scatter's input, all_gather's output) */
    int64_t *zb;    /* BUCKET: per group member q its count, then per member j and q the
                       piece's offset, count, run length and run stride (exec/bind.c; made at
                       its first replay, with its group) */
    ldt__kernel_fn afn;  /* async collective: what the communication thread runs */
    ldt__kernel_fn gfn;  /* grouped collective: the call inside the group */
    uint64_t done_gen;   /* async collective: the replay it last finished (under the queue lock) */
    ldt_status astatus;  /* its status then */
};

/* A rank's communication thread and its queue: collectives start in program order and run
 * there one after another, while the rank's thread goes on computing until a WAIT. */
typedef struct ldt__commq {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    binstr **items; /* ring */
    int64_t cap, head, tail;
    int stop;
    uint64_t gen; /* the current replay */
} ldt__commq;

typedef struct ldt__rand_slot {
    ldt__attrs *attrs; /* the program's copy, patched each replay */
    uint64_t offset;   /* as traced */
} ldt__rand_slot;

typedef struct ldt__prof {
    double start, end;
} ldt__prof;

struct rank_state {
    ldt_exec *e;
    int rank;
    const ldt__program *prog;
    ldt__mem_plan mem;
    char *arena;
    void **val;     /* per value: its buffer as bound */
    void **val_now; /* per value: its buffer this replay (inputs may be re-pointed) */
    uint8_t *whole_input; /* per binding: this rank holds the whole input */
    ldt__hot *hot; /* what the replay loop walks (64-byte aligned) */
    binstr *ins;   /* the cold records, in program order (64-byte aligned) */
    ldt__kcall *kcalls; /* the built-in kernels' calls, copied out of their cold records in
                           program order, back to back: what a kernel's replay reads (64-byte
                           aligned) */
    int64_t nins;
    ldt__operand *opnds;
    ldt__rand_slot *rand;
    int64_t nrand;
    ldt__custom_call *ccalls; /* the custom ops' calls, in program order (64-byte aligned) */
    const void **cin; /* the custom ops' argument pools */
    ldt_shape *cshapes;
    ldt_dtype *cdtypes;
    ldt_comm *world;
    ldt_comm *groups[1 << LDT_MAX_DIMS];
    ldt__prof *prof;
    int64_t *assign_load; /* per assigned value: the LOAD instruction of its tensor whose
                             buffer it is written into (in place), or -1 */
    ldt__commq q;
    int has_async;
    /* pipelines (exec/p2p.c): the program's p2p channels' communicators (made at the first
     * replay, or at compile in process mode), and the sends posted and not yet waited for */
    ldt_comm **p2p;
    struct ldt__send_req **sreq;
    int64_t nsreq, cap_sreq;
    char err[1024]; /* the communication thread's last error, for the wait that reports it */
};

typedef struct ldt__binding {
    const ldt_tensor *t; /* the input */
    const void *ptr;     /* ldt_exec_bind's buffer, or NULL: the input's own data */
} ldt__binding;

typedef struct ldt__exec_out {
    int64_t node;
    int64_t nbytes;
    ldt_shards *shards;
    ldt_tensor *assign_to; /* an assigned value: the persistent tensor it lands in */
} ldt__exec_out;

struct ldt_exec {
    ldt_ctx *ctx;
    const ldt_mesh *mesh;
    ldt__program **progs; /* per world rank */
    int nprogs;
    ldt_redist_plan **rplans;
    int64_t nrplans;
    int nranks;
    rank_state **ranks;
    ldt_threads *threads;
    ldt_comm *world; /* process mode (ctx->world): this process runs rank `me` only */
    int is_cuda;                  /* a CUDA mesh: each rank's program on a GPU */
    struct ldt__cuda_exec **cuda; /* per world rank: this process's ranks' (NULL elsewhere) */
    ldt_comm **nccl;              /* per world rank: its NCCL world (more than one rank) */
    int *cuda_dev;                /* per world rank: its device (rank threads: rank % devices;
                                     processes: the rank's place among its host's % devices) */
    const ldt_tensor **cuda_src; /* their parameters and constants, with the versions copied */
    uint64_t *cuda_ver;
    int ncuda_src;
    int me;
    int64_t *gathered; /* process mode, per output: the replay its shards were gathered at */
    ldt__exec_out *outs; /* the nout outputs, then the nassign assigned values */
    int nout, nassign;
    uint8_t *inplace; /* per assigned value: it persists in the ranks' load buffers (its
                         tensor's host data is brought up to date on demand) */
    int any_inplace;
    int64_t host_copies; /* times host_flush brought its in-place values home */
    ldt__binding *bindings;
    int nbindings;
    int rebind;
    uint64_t rng_base, rng_advance, rng_now;
    int64_t replays;
    double last_step_s; /* the last replay that completed, in seconds (timeouts quote it) */
    int profile;
    char *trace_path;
    double t_origin;
    /* figures */
    double plan_cost;
    int64_t arena_bytes, bound_bytes, instructions;
    int64_t collectives, collectives_unfused, pack_buckets, packed_all_reduces, moved_starts, collective_groups;
    int64_t dim_collectives[LDT_MAX_DIMS], dim_collectives_unfused[LDT_MAX_DIMS]; /* per mesh dim */
    int64_t dim_buckets[LDT_MAX_DIMS]; /* per mesh dim, the buckets the cap implies (ldt__program_dim_buckets) */
    int fuse_agreed; /* the ranks' buckets were one decision and were applied (planner/fuse.c) */
    int64_t early_all_reduces; /* in-place all_reduce calls with matmul work after them */
    double model_serial, model_overlap;
    ldt_cost_model model_cost; /* the profile the modeled figures priced with */
    /* the cache's */
    unsigned char *key;
    size_t keylen;
    uint64_t hash;
    ldt_exec *next;
};

/* A bound instruction from its call (wrappers find the rest of their instruction around it). */
#define BIN_OF(c) ((binstr *)((char *)(c) - offsetof(binstr, call)))

/* Where a plan assigns a parameter in another placement than it loads it in, the assigned
 * value is redistributed to the load placement and the step planned again with the parameter
 * pinned there (compile and eager runs alike, so both do the same arithmetic). */
ldt_status ldt__assign_in_param_placement(ldt_ctx *ctx, const ldt_plan_options *po, ldt_plan **plan,
                                          int cached);
/* ldt_plan_create for the eager path (exec/cache.c): a trace planned before on this context
 * (same structure, pins, passes, mesh, profile, options and persistent tensors) takes the
 * strategies its search chose then, by ldt_plan_create_fixed, instead of searching again. */
ldt_status ldt__plan_create_cached(ldt_ctx *ctx, const ldt_plan_options *po, ldt_plan **out);
/* The eager plan cache's hits and misses. */
ldt_status ldt__plan_cache_stats(const ldt_ctx *ctx, int64_t *hits, int64_t *misses);
/* exec/compile.c */
ldt_status ldt__exec_build(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout,
                           const ldt_compile_options *o, ldt_exec **out);
void ldt__exec_destroy(ldt_exec *e);
int ldt__exec_binding_of(ldt_exec *e, const ldt_tensor *t);
/* exec/replay.c: what a timed-out step's error adds to msg (into out, cap bytes): this rank's
 * time in the step (replays > 0: the last completed step's, last_step_s; else the first step's
 * ran_s, less the timeout it waited) against the timeout. A step that took at least half the
 * timeout is told it may be too slow for it and how to raise it; a shorter one that it was
 * well within it, so a peer more likely stopped, died or called another collective. */
void ldt__timeout_note_text(char *out, size_t cap, const char *msg, int64_t replays, double last_step_s,
                            double ran_s, double timeout_s);
/* Writes the last replay's Chrome trace JSON to e->trace_path (exec/profile.c). */
ldt_status ldt__exec_write_trace(ldt_exec *e);

/* exec/bind.c: rank rs's arena, buffers and bound instructions (its communication thread
 * started if it has asynchronous collectives). */
ldt_status ldt__bind_rank(ldt_exec *e, rank_state *rs);
/* Process mode: every communicator rank rs's program uses, made now in program order. */
ldt_status ldt__bind_groups(ldt_exec *e, rank_state *rs);
/* Measurement only (benchmarks): rewrites every local rank's hot array to call fn for every
 * instruction (the replay loop is unchanged); fn NULL puts the bound functions back. CPU
 * executables only. */
ldt_status ldt__exec_bind_noop(ldt_exec *e, ldt__kernel_fn fn);

/* exec/commq.c: the rank's communication thread, started with a queue of cap entries and
 * stopped (joined); the start and wait wrappers of an asynchronous collective. */
ldt_status ldt__commq_start(rank_state *rs, int64_t cap);
void ldt__commq_stop(rank_state *rs);
ldt_status ldt__w_start(const ldt__kcall *c);
ldt_status ldt__w_wait(const ldt__kcall *c);

/* exec/host.c: which assigned values persist in place (e->inplace, rs->assign_load); the
 * host data of the tensors ctx's stale executable assigned in place (ctx->host_flush). */
ldt_status ldt__find_inplace(ldt_exec *e);
ldt_status ldt__host_flush(ldt_ctx *ctx);

/* exec/gather.c: process mode, every rank's piece of shards s into every process's copy
 * (collective over the world). */
ldt_status ldt__gather_shards(ldt_exec *e, ldt_shards *s);

/* exec/replay_cuda.c: a CUDA mesh's build, replay, output read and teardown; whether world
 * rank r runs in this process. */
ldt_status ldt__cuda_build(ldt_exec *e);
ldt_status ldt__cuda_replay(ldt_exec *e);
ldt_status ldt__cuda_read(ldt_exec *e, int i, void *dst);
void ldt__cuda_destroy(ldt_exec *e);
int ldt__cuda_local(const ldt_exec *e, int r);

/* exec/p2p.c (pipelines, docs/pipeline.md): the bound functions of SEND, RECV and SEND_WAIT;
 * the rank's p2p channels made (each pair's in the one order both members use); and freed
 * with any send still posted. */
ldt__kernel_fn ldt__p2p_fn(int kind);
ldt_status ldt__p2p_channels(rank_state *rs, ldt_comm *world);
void ldt__p2p_free(rank_state *rs);

#endif
