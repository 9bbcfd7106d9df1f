/* The CUDA backend for one rank's program: bind once, validate with an eager run, capture
 * into a CUDA Graph, replay with one launch (exec/backend_cuda.h, docs/gpu.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "exec/backend_cuda.h"
#include "ldt/exec.h"

/* Instruction i's name for messages: "instruction 7 (gelu of node %5)". */
static const char *kind_name(const ldt__instr *x) {
    switch ((ldt__ikind)x->kind) {
    case LDT__I_LOAD: return "load";
    case LDT__I_KERNEL: return x->op < LDT_OP_COUNT ? ldt__builtin_op_name(x->op) : "custom op";
    case LDT__I_REDIST: return "redistribute";
    case LDT__I_ALL_REDUCE: return "all_reduce";
    case LDT__I_FILL: return "fill";
    case LDT__I_ARANGE: return "arange";
    case LDT__I_WAIT: return "wait";
    default: return "?";
    }
}

#ifndef LDT_HAVE_CUDA

static ldt_status no_cuda(void) {
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "cuda backend: this build has no CUDA (configure with LDT_CUDA=ON)");
}

ldt_status ldt__cuda_program_check(const ldt__program *p) {
    (void)p;
    (void)kind_name;
    return no_cuda();
}
ldt_status ldt__cuda_program_check_ranks(const ldt__program *p, int nranks) {
    (void)p, (void)nranks;
    return no_cuda();
}
ldt_status ldt__cuda_exec_create(const ldt__program *p, const int32_t *outs, int nouts,
                                 ldt__cuda_exec **out) {
    (void)p, (void)outs, (void)nouts;
    if (out) *out = NULL;
    return no_cuda();
}
ldt_status ldt__cuda_exec_create_step(const ldt__program *p, const ldt__cuda_step *s,
                                      ldt__cuda_exec **out) {
    return ldt__cuda_exec_create(p, s ? s->outs : NULL, s ? s->nouts : 0, out);
}
ldt_status ldt__cuda_exec_reload(ldt__cuda_exec *x, const struct ldt_tensor *t) {
    (void)x, (void)t;
    return no_cuda();
}
ldt_status ldt__cuda_exec_bind_input(ldt__cuda_exec *x, const struct ldt_tensor *t, const void *data) {
    (void)x, (void)t, (void)data;
    return no_cuda();
}
ldt_status ldt__cuda_exec_replay(ldt__cuda_exec *x) { return (void)x, no_cuda(); }
ldt_status ldt__cuda_exec_run_eager(ldt__cuda_exec *x) { return (void)x, no_cuda(); }
ldt_status ldt__cuda_exec_read(ldt__cuda_exec *x, int32_t v, void *dst, int64_t nbytes) {
    (void)x, (void)v, (void)dst, (void)nbytes;
    return no_cuda();
}
ldt_status ldt__cuda_exec_set_rng(ldt__cuda_exec *x, uint64_t delta, uint64_t advance) {
    (void)x, (void)delta, (void)advance;
    return no_cuda();
}
ldt_status ldt__cuda_exec_rng(ldt__cuda_exec *x, uint64_t *delta, uint64_t *steps) {
    (void)x, (void)delta, (void)steps;
    return no_cuda();
}
ldt_status ldt__cuda_select_device(int d) { return (void)d, no_cuda(); }
int64_t ldt__cuda_exec_arena_bytes(const ldt__cuda_exec *x) { return (void)x, 0; }
int64_t ldt__cuda_exec_graph_nodes(const ldt__cuda_exec *x) { return (void)x, 0; }
void ldt__cuda_exec_destroy(ldt__cuda_exec *x) { (void)x; }

#else

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <time.h>

#include "exec/comm_nccl.h"
#include "exec/cuda_libs.h"
#include "exec/groups.h"
#include "exec/redist_record.h"
#include "exec/shards.h"
#include "kernels/cuda/kernel.h"
#include "planner/memory.h"
#include "trace/trace.h"

/* cuBLAS's workspace, preallocated and bound before capture so that no GEMM allocates inside
 * the graph (32 MiB: what cuBLAS itself recommends for Hopper). */
#define LDT__CUDA_WORKSPACE ((size_t)32 << 20)

/* A runtime call; needs `st` and `fail:`. */
#define CU_TRY(call)                                                                        \
    do {                                                                                    \
        cudaError_t e_ = (call);                                                            \
        if (e_ != cudaSuccess)                                                              \
            LDT_FAIL_GOTO(LDT_ERR_CUDA, "cuda backend: %s failed: %s (%s)", #call,          \
                          cudaGetErrorString(e_), cudaGetErrorName(e_));                    \
    } while (0)

/* A cuBLAS call through x's table: named as cuBLAS names it (what) in the message. */
#define BLAS_TRY(what, call)                                                                \
    do {                                                                                    \
        cublasStatus_t s_ = (call);                                                         \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                    \
            LDT_FAIL_GOTO(LDT_ERR_CUDA, "cuda backend: %s failed: %s (%s)", (what),         \
                          x->blas_api->status_string(s_), x->blas_api->status_name(s_));    \
    } while (0)

/* What one instruction enqueues: a kernel launch, a fill, zeros, an input's copy from its
 * pinned staging buffer, or (a one-rank redistribution) a device copy. Parameter loads
 * enqueue nothing (their shards were copied once); one-rank all_reduces and waits nothing. */
typedef enum {
    STEP_KERNEL,
    STEP_FILL,
    STEP_ZERO,
    STEP_INPUT,
    STEP_COPY,
    STEP_ARANGE,
    STEP_COLL,   /* an all_reduce (a bucket: in place, or packed into coll_buf and back) */
    STEP_REDIST, /* a recorded redistribution: device copies and NCCL calls */
    STEP_WAIT    /* joins the asynchronous collective of step `pair` */
} step_kind;

typedef struct cstep {
    step_kind kind;
    int64_t idx; /* the instruction */
    ldt__cuda_kernel_fn fn;
    ldt__kcall call; /* device pointers; FILL, ZERO, INPUT: call.out */
    double fill, step; /* FILL: the value; ARANGE: a + step * i */
    void *staging; /* INPUT: pinned host buffer of `bytes` */
    const void *bound; /* INPUT: read from here (ldt_exec_bind), not the tensor's data */
    int64_t bytes;
    /* COLL, REDIST: on the communication stream, `done` recorded after; joined at once or,
     * async, at the WAIT whose `pair` is this step */
    int async;
    int64_t pair;
    cudaEvent_t done;
    ldt_comm *group; /* COLL: NULL over one rank (nothing to do) */
    ldt__op op;      /* COLL: the all_reduce, in place on op.recv */
    void *coll_buf;  /* COLL, packed bucket: its operands back to back (the shared pack) */
    int64_t coll_bytes;
    ldt__dredist *dr; /* REDIST */
    void *rbuf[LDT__RB_N]; /* REDIST: the recording's buffers (IN, OUT: values; the others
                              the step's shared ones) */
    void **rdev;      /* REDIST: per op, its runs (COPY) or identity pattern (FILL) on the device */
} cstep;

struct ldt__cuda_exec {
    const ldt__program *p;
    ldt__mem_plan mem;
    int have_mem;
    cudaStream_t stream;
    cublasHandle_t blas;
    const ldt__cublas_api *blas_api; /* loaded at the first bind (exec/cuda_libs.h) */
    void *workspace;
    void *kscratch;  /* the kernels' scratch (ldt__cuda_env.scratch), step stream only */
    char *arena;
    void **val;      /* per value: its device buffer */
    uint8_t *own;    /* per value: val[v] is its own allocation (a persistent shard) */
    ldt__operand *opnds;
    cstep *steps;
    int64_t nsteps;
    int *derr;       /* device: the first data error of the step */
    int *derr_host;  /* pinned: its copy, written by the step's last node */
    uint64_t *rng;   /* device: {delta, advance, step} (ldt__cuda_rng_advance) */
    ldt__cuda_env env;
    cudaGraph_t graph;
    cudaGraphExec_t gexec;
    size_t nodes;
    int32_t *copy_src, *copy_dst; /* step-end copies: assigned values over their shards */
    int ncopies;
    int nranks;
    int device;
    ldt_comm *world;                /* NCCL, more than one rank */
    const ldt_mesh *mesh;
    ldt_comm *groups[1u << LDT_MAX_DIMS]; /* all_reduce groups by mesh-dim mask */
    ldt_comm **comms;               /* every communicator the step calls (checked at the wait) */
    int ncomms;
    cudaStream_t cstream;           /* collectives, in program order */
    cudaEvent_t fork;
    int64_t *step_of;               /* per instruction: its step, or -1 */
    int broken;                     /* a step's collectives failed: its communicators are aborted */
    /* one set of redistribution buffers and one pack buffer for the whole step: all their
     * users run on the communication stream, one after another */
    void *rshared[LDT__RB_N];
    int64_t rshared_bytes[LDT__RB_N];
    void *pack;
    int64_t pack_bytes;
};

static ldt_status refuse(const ldt__program *p, int64_t i, const char *why) {
    const ldt__instr *x = &p->ins[i];
    LDT_FAIL(LDT_ERR_UNSUPPORTED, "cuda backend: instruction %lld (%s of node %%%d): %s",
             (long long)i, kind_name(x), x->node, why);
}

/* st, its message prefixed with instruction i (for the failures of a bind helper). */
static ldt_status at_instr(ldt_status st, const ldt__program *p, int64_t i) {
    if (st == LDT_OK) return LDT_OK;
    return ldt__error_prefix(st, "cuda backend: instruction %lld (%s of node %%%d)", (long long)i,
                             kind_name(&p->ins[i]), p->ins[i].node);
}

/* ldt__cuda_program_check for a program of a mesh of nranks ranks. */
static ldt_status program_check(const ldt__program *p, int nranks) {
    if (!p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: no program");
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        ldt__cuda_kernel_fn fn;
        switch ((ldt__ikind)x->kind) {
        case LDT__I_LOAD:
        case LDT__I_FILL: break;
        case LDT__I_KERNEL:
            if (x->op >= LDT_OP_COUNT)
                return refuse(p, i, "custom ops have no CUDA kernels yet");
            if (ldt__cuda_kernel_lookup(x->op, &fn) != LDT_OK)
                return ldt__error_prefix(LDT_ERR_UNSUPPORTED,
                                         "cuda backend: instruction %lld (node %%%d)",
                                         (long long)i, x->node);
            break;
        case LDT__I_REDIST:
            if (nranks == 1 && ldt__value_bytes(&p->vals[x->out]) == ldt__value_bytes(&p->vals[p->ops[x->in]]))
                break; /* one rank: the same elements, copied */
            if (nranks == 1) return refuse(p, i, "a redistribution on one rank that changes the value's size");
            /* fall through */
        case LDT__I_ALL_REDUCE:
        case LDT__I_WAIT:
            if (nranks == 1) break; /* over one rank: nothing to do */
#ifndef LDT_HAVE_NCCL
            return refuse(p, i, "collectives on CUDA need NCCL, which this build has not");
#endif
            if (nranks > 1) break; /* NCCL: checked when bound */
            return refuse(p, i, "a collective, but the mesh's ranks are not known");
        case LDT__I_ARANGE: break;
        default: return refuse(p, i, "unknown instruction kind");
        }
    }
    return LDT_OK;
}

ldt_status ldt__cuda_program_check(const ldt__program *p) { return program_check(p, 0); }
ldt_status ldt__cuda_program_check_ranks(const ldt__program *p, int nranks) {
    return program_check(p, nranks);
}

/* The communication stream takes over from the step's stream here. */
static ldt_status comm_fork(ldt__cuda_exec *x) {
    ldt_status st = LDT_OK;
    CU_TRY(cudaEventRecord(x->fork, x->stream));
    CU_TRY(cudaStreamWaitEvent(x->cstream, x->fork, 0));
fail:
    return st;
}

/* A packed bucket's operands into its pack buffer (unpack 0) or back out (unpack 1), on the
 * communication stream. */
static ldt_status pack_bucket(ldt__cuda_exec *x, const cstep *c, int unpack) {
    ldt_status st = LDT_OK;
    const ldt__program *p = x->p;
    const ldt__instr *in = &p->ins[c->idx];
    int64_t off = 0;
    for (int k = 0; c->coll_buf && k < in->nin; k++) {
        int64_t b = ldt__value_bytes(&p->vals[p->ops[in->in + k]]);
        char *packed = (char *)c->coll_buf + off;
        if (b) CU_TRY(cudaMemcpyAsync(unpack ? c->call.in[k].data : packed, unpack ? packed : c->call.in[k].data,
                                      (size_t)b, cudaMemcpyDeviceToDevice, x->cstream));
        off += b;
    }
fail:
    return st;
}

/* Step c's `done` event after its work on the communication stream, joined now unless the
 * collective is asynchronous. */
static ldt_status comm_done(ldt__cuda_exec *x, const cstep *c) {
    ldt_status st = LDT_OK;
    CU_TRY(cudaEventRecord(c->done, x->cstream));
    if (!c->async) CU_TRY(cudaStreamWaitEvent(x->stream, c->done, 0));
fail:
    return st;
}

/* The last step of the grouped all_reduce run that starts at step s (s itself when it
 * starts none, or a member packs: those go call by call). */
static int64_t run_end(const ldt__cuda_exec *x, int64_t s) {
    int64_t e = s;
    if (x->steps[s].kind != STEP_COLL || x->p->ins[x->steps[s].idx].group != 1 || x->steps[s].coll_buf)
        return s;
    while (e + 1 < x->nsteps && x->steps[e + 1].kind == STEP_COLL && !x->steps[e + 1].coll_buf &&
           x->p->ins[x->steps[e + 1].idx].group >= 2) {
        e++;
        if (x->p->ins[x->steps[e].idx].group == 3) return e;
    }
    return s; /* not a whole run: call by call */
}

/* A run of all_reduces the planner grouped (steps first..last, none packed): one NCCL group,
 * so NCCL launches them together. */
static ldt_status enqueue_run(ldt__cuda_exec *x, int64_t first, int64_t last) {
    ldt_status st = LDT_OK, end;
    LDT_CHECK(comm_fork(x));
    LDT_CHECK(ldt__nccl_group_start());
    for (int64_t k = first; k <= last && st == LDT_OK; k++)
        if (x->steps[k].group) st = ldt__nccl_enqueue(x->steps[k].group, &x->steps[k].op, x->cstream);
    end = ldt__nccl_group_end();
    LDT_CHECK(st);
    LDT_CHECK(end);
    for (int64_t k = first; k <= last; k++) LDT_CHECK(comm_done(x, &x->steps[k]));
    return LDT_OK;
}

/* Collective step c's work on the communication stream, then its `done` event (joined now
 * unless it is asynchronous). */
static ldt_status enqueue_comm(ldt__cuda_exec *x, cstep *c) {
    ldt_status st = LDT_OK;
    ldt__cuda_env env = x->env;
    env.stream = x->cstream;
    env.scratch = NULL; /* the step stream's: a kernel here could run beside one there */
    env.scratch_bytes = 0;
    LDT_CHECK(comm_fork(x));
    if (c->kind == STEP_COLL && c->group) {
        LDT_CHECK(pack_bucket(x, c, 0));
        LDT_CHECK(ldt__nccl_enqueue(c->group, &c->op, x->cstream));
        LDT_CHECK(pack_bucket(x, c, 1));
    }
    for (int i = 0; c->kind == STEP_REDIST && i < c->dr->nops; i++) {
        const ldt__dr_op *o = &c->dr->ops[i];
        char *src = c->rbuf[o->src_buf], *dst = c->rbuf[o->dst_buf];
        switch (o->kind) {
        case LDT__DR_COPY:
            LDT_CHECK(ldt__cuda_copy_runs(src, dst, c->rdev[i], o->nruns, o->es, &env));
            break;
        case LDT__DR_FILL:
            CU_TRY(cudaMemcpyAsync(dst + o->dst_off, c->rdev[i], (size_t)o->bytes,
                                   cudaMemcpyDeviceToDevice, x->cstream));
            break;
        case LDT__DR_ZERO: CU_TRY(cudaMemsetAsync(dst + o->dst_off, 0, (size_t)o->bytes, x->cstream)); break;
        case LDT__DR_COLL: {
            ldt__op op = o->op;
            op.send = src + o->src_off;
            op.recv = dst + o->dst_off;
            LDT_CHECK(ldt__nccl_enqueue(o->group, &op, x->cstream));
            break;
        }
        }
    }
    LDT_CHECK(comm_done(x, c));
fail:
    return st;
}

/* Enqueues the step on x->stream: the error word cleared, every instruction, the assigned
 * values over their persistent shards (unless `validate`), the error word copied out. The
 * same calls run eagerly and under capture. */
static ldt_status enqueue(ldt__cuda_exec *x, int validate) {
    ldt_status st = LDT_OK;
    CU_TRY(cudaMemsetAsync(x->derr, 0, sizeof(int), x->stream));
    for (int64_t s = 0; s < x->nsteps; s++) {
        cstep *c = &x->steps[s];
        switch (c->kind) {
        case STEP_KERNEL: st = c->fn(&c->call, &x->env); break;
        case STEP_FILL: st = ldt__cuda_fill(&c->call.out, c->fill, &x->env); break;
        case STEP_ARANGE:
            st = ldt__cuda_arange(&c->call.out, c->call.region, c->call.global_shape, c->fill,
                                  c->step, &x->env);
            break;
        case STEP_ZERO:
            if (c->bytes) CU_TRY(cudaMemsetAsync(c->call.out.data, 0, (size_t)c->bytes, x->stream));
            break;
        case STEP_INPUT:
            if (c->bytes)
                CU_TRY(cudaMemcpyAsync(c->call.out.data, c->staging, (size_t)c->bytes,
                                       cudaMemcpyHostToDevice, x->stream));
            break;
        case STEP_COPY:
            if (c->bytes && c->call.out.data != c->call.in[0].data)
                CU_TRY(cudaMemcpyAsync(c->call.out.data, c->call.in[0].data, (size_t)c->bytes,
                                       cudaMemcpyDeviceToDevice, x->stream));
            break;
        case STEP_COLL:
        case STEP_REDIST: {
            int64_t e = run_end(x, s);
            if (e > s) {
                st = enqueue_run(x, s, e);
                s = e;
            } else {
                st = enqueue_comm(x, c);
            }
            break;
        }
        case STEP_WAIT: CU_TRY(cudaStreamWaitEvent(x->stream, x->steps[c->pair].done, 0)); break;
        }
        if (st != LDT_OK) {
            const ldt__instr *in = &x->p->ins[c->idx];
            return ldt__error_prefix(st, "cuda backend: instruction %lld (%s of node %%%d)",
                                     (long long)c->idx, kind_name(in), in->node);
        }
    }
    for (int k = 0; k < x->ncopies && !validate; k++) {
        void *dst = x->val[x->copy_dst[k]], *src = x->val[x->copy_src[k]];
        int64_t b = ldt__value_bytes(&x->p->vals[x->copy_dst[k]]);
        if (b && dst != src)
            CU_TRY(cudaMemcpyAsync(dst, src, (size_t)b, cudaMemcpyDeviceToDevice, x->stream));
    }
    LDT_CHECK(ldt__cuda_rng_advance(x->rng, &x->env)); /* the next step draws further on */
    CU_TRY(cudaMemcpyAsync(x->derr_host, x->derr, sizeof(int), cudaMemcpyDeviceToHost, x->stream));
fail:
    return st;
}

/* The inputs' current host data into their pinned staging buffers (this rank's region). */
static ldt_status stage_inputs(ldt__cuda_exec *x) {
    for (int64_t s = 0; s < x->nsteps; s++) {
        cstep *c = &x->steps[s];
        if (c->kind != STEP_INPUT || !c->bytes) continue;
        const ldt__instr *in = &x->p->ins[c->idx];
        const ldt__kregion *kr = &x->p->regions[in->region];
        const void *src = c->bound ? c->bound : in->host ? in->host : in->src->data;
        if (!src)
            LDT_FAIL(LDT_ERR_INVALID_USAGE, "cuda backend: input of node %%%d has no data; bind "
                     "it with ldt_input_bind", in->node);
        ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)in->src->dtype),
                         (void *)src, c->staging, 1);
    }
    return LDT_OK;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Waits for a step with collectives: polls the stream and the communicators' asynchronous
 * errors, and aborts them all past the timeout, so a dead peer is an error, not a hang. */
static ldt_status wait_comms(ldt__cuda_exec *x) {
    double t0 = now_ms();
    int64_t timeout = 0;
    for (int k = 0; k < x->ncomms; k++)
        if (ldt__nccl_timeout_ms(x->comms[k]) > timeout) timeout = ldt__nccl_timeout_ms(x->comms[k]);
    for (;;) {
        cudaError_t q = cudaStreamQuery(x->stream);
        if (q != cudaSuccess && q != cudaErrorNotReady)
            LDT_FAIL(LDT_ERR_CUDA, "cuda backend: the step failed: %s (%s)", cudaGetErrorString(q),
                     cudaGetErrorName(q));
        for (int k = 0; k < x->ncomms; k++) LDT_CHECK(ldt__nccl_check(x->comms[k]));
        if (q == cudaSuccess) return LDT_OK;
        if (now_ms() - t0 > (double)timeout) {
            for (int k = 0; k < x->ncomms; k++) ldt__nccl_abort(x->comms[k]);
            LDT_FAIL(LDT_ERR_TIMEOUT, "cuda backend: the step's collectives did not complete within "
                     "%lld ms: a peer is missing or dead (its communicators are aborted)", (long long)timeout);
        }
        {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Waits for the step and reports a data error a kernel recorded. */
static ldt_status finish(ldt__cuda_exec *x) {
    ldt_status st = LDT_OK;
    if (x->ncomms && (st = wait_comms(x)) != LDT_OK) {
        x->broken = 1; /* the graph's NCCL calls name aborted communicators now */
        return st;
    }
    CU_TRY(cudaStreamSynchronize(x->stream));
    if (*x->derr_host)
        LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "cuda backend: a kernel found %s in its data",
                      ldt__cuda_derr_text(*x->derr_host));
fail:
    return st;
}

/* A parameter or constant shard: its region of the tensor's host data, copied once. */
static ldt_status load_persistent(ldt__cuda_exec *x, const ldt__instr *in, void *dev) {
    ldt_status st = LDT_OK;
    int64_t b = ldt__value_bytes(&x->p->vals[in->out]);
    const ldt__kregion *kr = &x->p->regions[in->region];
    const void *src = in->host ? in->host : in->src->data;
    void *tmp = NULL;
    if (!b) return LDT_OK;
    if (in->reduce) {
        CU_TRY(cudaMemsetAsync(dev, 0, (size_t)b, x->stream));
        return LDT_OK;
    }
    if (!src)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "cuda backend: parameter of node %%%d has no data; "
                 "initialise it first", in->node);
    if (!(tmp = malloc((size_t)b))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    ldt__region_copy(&kr->region, &kr->global, ldt__dtype_size((ldt_dtype)in->src->dtype),
                     (void *)src, tmp, 1);
    /* on the step's stream, so the step reads it (the legacy stream would not order it with
     * a non-blocking one); a pageable source is staged before the call returns */
    CU_TRY(cudaMemcpyAsync(dev, tmp, (size_t)b, cudaMemcpyHostToDevice, x->stream));
fail:
    free(tmp);
    return st;
}

/* Adds communicator g to those the step checks at its wait (once). */
static ldt_status add_comm(ldt__cuda_exec *x, ldt_comm *g) {
    ldt_comm **p;
    for (int k = 0; k < x->ncomms; k++)
        if (x->comms[k] == g) return LDT_OK;
    if (!(p = realloc(x->comms, (size_t)(x->ncomms + 1) * sizeof *p)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    x->comms = p;
    x->comms[x->ncomms++] = g;
    return LDT_OK;
}

/* An all_reduce over more than one rank: its group (NULL where it spans one rank), the NCCL
 * call in place over the value or, for a bucket, over its operands, which lie back to back
 * in the arena (the memory plan's groups) or are packed into a buffer of their own. */
static ldt_status bind_all_reduce(ldt__cuda_exec *x, const ldt__instr *in, cstep *c) {
    const ldt__program *p = x->p;
    ldt_status st = LDT_OK;
    int64_t total = 0;
    int contiguous = 1;
    ldt_comm *g = NULL;
    LDT_CHECK(ldt__instr_group(x->world, x->mesh, x->groups, in, &g));
    if (ldt_comm_size(g) == 1) return LDT_OK;
    if (!ldt__nccl_is(g))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: the world is %s, expected NCCL (ldt_nccl_world)",
                 ldt_comm_backend(g));
    LDT_CHECK(add_comm(x, g));
    for (int k = 0; k < in->nin; k++) {
        int32_t v = p->ops[in->in + k];
        if (k && (char *)x->val[v] != (char *)c->call.in[0].data + total) contiguous = 0;
        total += ldt__value_bytes(&p->vals[v]);
    }
    c->group = g;
    c->op.kind = LDT__OP_ALL_REDUCE;
    c->op.dtype = c->call.out.dtype;
    c->op.reduce = (ldt_reduce_op)in->reduce;
    c->op.count = total / (int64_t)ldt__dtype_size(c->call.out.dtype);
    if (!contiguous) { /* the shared pack buffer, allocated once bind knows its size */
        c->coll_bytes = total;
        if (total > x->pack_bytes) x->pack_bytes = total;
    }
    c->op.send = c->op.recv = c->call.in[0].data;
    return st;
}

/* A redistribution over more than one rank: recorded (its groups made now, in program order
 * on every rank), its buffers and each op's runs or identity pattern on the device. */
static ldt_status bind_redist(ldt__cuda_exec *x, const ldt__instr *in, cstep *c) {
    const ldt__program *p = x->p;
    ldt_status st = LDT_OK;
    ldt__dredist *d;
    LDT_CHECK(ldt__redist_record(x->world, in->plan, &c->dr));
    d = c->dr;
    if (d->bytes[LDT__RB_IN] > ldt__value_bytes(&p->vals[p->ops[in->in]]) ||
        d->bytes[LDT__RB_OUT] > ldt__value_bytes(&p->vals[in->out]))
        LDT_FAIL(LDT_ERR_INTERNAL, "cuda backend: redistribution of node %%%d: the plan's shards do not "
                 "fit the program's values", in->node);
    c->rbuf[LDT__RB_IN] = x->val[p->ops[in->in]];
    c->rbuf[LDT__RB_OUT] = x->val[in->out];
    for (int b = LDT__RB_BUF0; b < LDT__RB_N; b++) { /* the shared ones' sizes */
        int used = 0;
        for (int i = 0; i < d->nops; i++) used |= d->ops[i].src_buf == b || d->ops[i].dst_buf == b;
        if (used && d->bytes[b] > x->rshared_bytes[b]) x->rshared_bytes[b] = d->bytes[b];
    }
    if (!(c->rdev = calloc((size_t)(d->nops ? d->nops : 1), sizeof *c->rdev)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    for (int i = 0; i < d->nops; i++) {
        const ldt__dr_op *o = &d->ops[i];
        if (o->kind == LDT__DR_COPY) {
            size_t b = (size_t)o->nruns * 3 * sizeof(int64_t);
            CU_TRY(cudaMalloc(&c->rdev[i], b));
            CU_TRY(cudaMemcpyAsync(c->rdev[i], o->runs, b, cudaMemcpyHostToDevice, x->stream));
        } else if (o->kind == LDT__DR_FILL) {
            char *h = malloc((size_t)o->bytes);
            if (!h) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
            for (int64_t k = 0; k < o->bytes; k += o->es) memcpy(h + k, o->pattern, (size_t)o->es);
            if (cudaMalloc(&c->rdev[i], (size_t)o->bytes) == cudaSuccess)
                st = cudaMemcpyAsync(c->rdev[i], h, (size_t)o->bytes, cudaMemcpyHostToDevice, x->stream) == cudaSuccess
                         ? LDT_OK : ldt__error(LDT_ERR_CUDA, "cuda backend: cudaMemcpy failed");
            else
                st = ldt__error(LDT_ERR_CUDA, "cuda backend: cudaMalloc of %lld bytes failed",
                                (long long)o->bytes);
            free(h);
            LDT_CHECK(st);
        } else if (o->kind == LDT__DR_COLL) {
            if (!ldt__nccl_is(o->group))
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: the world is %s, expected NCCL "
                         "(ldt_nccl_world)", ldt_comm_backend(o->group));
            LDT_CHECK(add_comm(x, o->group));
        }
    }
fail:
    return st;
}

static ldt_status bind(ldt__cuda_exec *x, const int32_t *outs, int nouts) {
    const ldt__program *p = x->p;
    int32_t nv = p->nvals ? p->nvals : 1;
    uint8_t *outside = calloc((size_t)nv, 1), *keep = calloc((size_t)nv, 1);
    int64_t nops = 0;
    ldt_status st = LDT_OK;
    x->val = calloc((size_t)nv, sizeof *x->val);
    x->own = calloc((size_t)nv, 1);
    x->steps = calloc((size_t)(p->nins ? p->nins : 1), sizeof *x->steps);
    x->step_of = malloc((size_t)(p->nins ? p->nins : 1) * sizeof *x->step_of);
    if (!outside || !keep || !x->val || !x->own || !x->steps || !x->step_of)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *in = &p->ins[i];
        nops += in->nin;
        if (in->kind == LDT__I_LOAD && in->src->op != LDT_OP_INPUT) outside[in->out] = 1;
    }
    for (int k = 0; k < nouts; k++) {
        if (outs[k] < 0 || outs[k] >= p->nvals)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "cuda backend: output value %d of %d",
                          outs[k], p->nvals);
        keep[outs[k]] = 1;
    }
    for (int k = 0; k < x->ncopies; k++) {
        int32_t a = x->copy_src[k], b = x->copy_dst[k];
        if (a < 0 || a >= p->nvals || b < 0 || b >= p->nvals || !outside[b] ||
            ldt__value_bytes(&p->vals[a]) != ldt__value_bytes(&p->vals[b]))
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "cuda backend: step-end copy %d: value %d over "
                          "%d, expected a value over a persistent shard of its size", k, a, b);
        keep[a] = 1; /* alive until the step's end */
    }
    LDT_CHECK_GOTO(ldt__memory_plan(p, outside, keep, &x->mem));
    x->have_mem = 1;
    if (x->mem.arena_bytes) CU_TRY(cudaMalloc((void **)&x->arena, (size_t)x->mem.arena_bytes));
    for (int32_t v = 0; v < p->nvals; v++) {
        if (outside[v]) {
            int64_t b = ldt__value_bytes(&p->vals[v]);
            CU_TRY(cudaMalloc(&x->val[v], (size_t)(b ? b : 1)));
            x->own[v] = 1;
        } else if (x->mem.offset[v] >= 0) {
            x->val[v] = x->arena + x->mem.offset[v];
        }
    }
    if (!(x->opnds = calloc((size_t)(nops ? nops : 1), sizeof *x->opnds)))
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    nops = 0;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *in = &p->ins[i];
        cstep *c = &x->steps[x->nsteps];
        memset(c, 0, sizeof *c);
        x->step_of[i] = -1;
        c->idx = i;
        c->call.op = in->op;
        c->call.attrs = in->attrs;
        c->call.nin = in->nin;
        c->call.in = x->opnds + nops;
        for (int k = 0; k < in->nin; k++) {
            int32_t v = p->ops[in->in + k];
            x->opnds[nops].data = x->val[v];
            x->opnds[nops].shape = p->vals[v].shape;
            x->opnds[nops++].dtype = (ldt_dtype)p->vals[v].dtype;
        }
        c->call.out.data = x->val[in->out];
        c->call.out.shape = p->vals[in->out].shape;
        c->call.out.dtype = (ldt_dtype)p->vals[in->out].dtype;
        c->bytes = ldt__value_bytes(&p->vals[in->out]);
        switch ((ldt__ikind)in->kind) {
        case LDT__I_LOAD:
            if (in->src->op != LDT_OP_INPUT) { /* persistent: loaded now, nothing per step */
                LDT_CHECK_GOTO(load_persistent(x, in, x->val[in->out]));
                continue;
            }
            c->kind = in->reduce ? STEP_ZERO : STEP_INPUT;
            if (c->kind == STEP_INPUT && c->bytes)
                CU_TRY(cudaMallocHost(&c->staging, (size_t)c->bytes));
            break;
        case LDT__I_KERNEL:
            c->kind = STEP_KERNEL;
            if (in->region >= 0) {
                c->call.region = &p->regions[in->region].region;
                c->call.global_shape = &p->regions[in->region].global;
            }
            LDT_CHECK_GOTO(ldt__cuda_kernel_lookup(in->op, &c->fn));
            break;
        case LDT__I_FILL:
            c->kind = STEP_FILL;
            c->fill = in->fill;
            break;
        case LDT__I_ARANGE:
            c->kind = STEP_ARANGE;
            c->fill = in->fill;
            c->step = in->step;
            c->call.region = &p->regions[in->region].region;
            c->call.global_shape = &p->regions[in->region].global;
            break;
        case LDT__I_REDIST:
            if (x->nranks == 1) {
                c->kind = STEP_COPY;
                break;
            }
            c->kind = STEP_REDIST;
            c->async = in->async;
            CU_TRY(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
            LDT_CHECK_GOTO(at_instr(bind_redist(x, in, c), p, i));
            break;
        case LDT__I_ALL_REDUCE:
            if (x->nranks == 1) continue; /* over one rank: nothing */
            c->kind = STEP_COLL;
            c->async = in->async;
            CU_TRY(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
            LDT_CHECK_GOTO(at_instr(bind_all_reduce(x, in, c), p, i));
            break;
        case LDT__I_WAIT:
            if (x->nranks == 1) continue;
            if (in->pair < 0 || in->pair >= i || x->step_of[in->pair] < 0)
                LDT_CHECK_GOTO(refuse(p, i, "waits for no collective before it"));
            c->kind = STEP_WAIT;
            c->pair = x->step_of[in->pair];
            break;
        default: LDT_CHECK_GOTO(refuse(p, i, "not supported on CUDA yet"));
        }
        x->step_of[i] = x->nsteps++;
    }
    for (int b = LDT__RB_BUF0; b < LDT__RB_N; b++)
        if (x->rshared_bytes[b]) CU_TRY(cudaMalloc(&x->rshared[b], (size_t)x->rshared_bytes[b]));
    if (x->pack_bytes) CU_TRY(cudaMalloc(&x->pack, (size_t)x->pack_bytes));
    for (int64_t k = 0; k < x->nsteps; k++) {
        cstep *c = &x->steps[k];
        if (c->kind == STEP_REDIST)
            for (int b = LDT__RB_BUF0; b < LDT__RB_N; b++) c->rbuf[b] = x->rshared[b];
        if (c->kind == STEP_COLL && c->coll_bytes) c->coll_buf = c->op.recv = x->pack, c->op.send = x->pack;
    }
fail:
    free(outside);
    free(keep);
    return st;
}

ldt_status ldt__cuda_exec_create(const ldt__program *p, const int32_t *outs, int nouts,
                                 ldt__cuda_exec **out) {
    ldt__cuda_step s = {outs, nouts, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    return ldt__cuda_exec_create_step(p, &s, out);
}

ldt_status ldt__cuda_exec_create_step(const ldt__program *p, const ldt__cuda_step *sp,
                                      ldt__cuda_exec **out) {
    ldt__cuda_step none = {NULL, 0, NULL, NULL, 0, 0, 0, NULL, NULL, NULL};
    const ldt__cuda_step *s = sp ? sp : &none;
    const int32_t *outs = s->outs, *copy_src = s->copy_src, *copy_dst = s->copy_dst;
    int nouts = s->nouts, ncopies = s->ncopies;
    ldt__cuda_exec *x = NULL;
    ldt_status st = LDT_OK;
    int capturing = 0;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: out must not be NULL");
    *out = NULL;
    if (nouts < 0 || (nouts > 0 && !outs))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: %d outputs but no list", nouts);
    if (ncopies < 0 || (ncopies > 0 && (!copy_src || !copy_dst)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: %d step-end copies but no list", ncopies);
    LDT_CHECK(program_check(p, s->nranks)); /* before any device work: refused without a GPU too */
    if (s->nranks > 1 && (!s->world || !s->mesh))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: a step of %d ranks needs this rank's NCCL world "
                 "and the mesh", s->nranks);
    if (s->nranks > 1 && ldt_comm_size(s->world) < s->nranks)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: a step of %d ranks, but the world has %d",
                 s->nranks, ldt_comm_size(s->world));
    if (ldt_cuda_device_count() == 0)
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "cuda backend: no CUDA device (the runtime reports none "
                 "or no driver)");
    if (!(x = calloc(1, sizeof *x))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
    x->p = p;
    x->nranks = s->nranks;
    x->world = s->world;
    x->mesh = s->mesh;
    CU_TRY(cudaGetDevice(&x->device));
    if (ncopies) {
        x->copy_src = malloc((size_t)ncopies * sizeof *x->copy_src);
        x->copy_dst = malloc((size_t)ncopies * sizeof *x->copy_dst);
        if (!x->copy_src || !x->copy_dst)
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "cuda backend: out of memory");
        memcpy(x->copy_src, copy_src, (size_t)ncopies * sizeof *copy_src);
        memcpy(x->copy_dst, copy_dst, (size_t)ncopies * sizeof *copy_dst);
        x->ncopies = ncopies;
    }
    CU_TRY(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    if (s->nranks > 1) {
        CU_TRY(cudaStreamCreateWithFlags(&x->cstream, cudaStreamNonBlocking));
        CU_TRY(cudaEventCreateWithFlags(&x->fork, cudaEventDisableTiming));
    }
    if ((st = ldt__cublas_load(&x->blas_api)) != LDT_OK) goto fail;
    BLAS_TRY("cublasCreate", x->blas_api->create(&x->blas));
    BLAS_TRY("cublasSetStream", x->blas_api->set_stream(x->blas, x->stream));
    CU_TRY(cudaMalloc(&x->workspace, LDT__CUDA_WORKSPACE));
    BLAS_TRY("cublasSetWorkspace",
             x->blas_api->set_workspace(x->blas, x->workspace, LDT__CUDA_WORKSPACE));
    CU_TRY(cudaMalloc(&x->kscratch, LDT__CUDA_KSCRATCH));
    CU_TRY(cudaMalloc((void **)&x->derr, sizeof(int)));
    CU_TRY(cudaMallocHost((void **)&x->derr_host, sizeof(int)));
    CU_TRY(cudaMalloc((void **)&x->rng, 3 * sizeof(uint64_t)));
    CU_TRY(cudaMemsetAsync(x->rng, 0, 3 * sizeof(uint64_t), x->stream));
    x->env.stream = x->stream;
    x->env.blas = x->blas;
    x->env.blas_api = x->blas_api;
    x->env.err = x->derr;
    x->env.rng_delta = x->rng;
    x->env.scratch = x->kscratch;
    x->env.scratch_bytes = LDT__CUDA_KSCRATCH;
    st = bind(x, outs, nouts);
    if (s->boot && s->nranks > 1) { /* every rank bound, or none goes on */
        int32_t ok = st == LDT_OK, all = 0;
        ldt_status a = ldt_all_reduce(s->boot, &ok, &all, 1, LDT_I32, LDT_REDUCE_MIN);
        if (st == LDT_OK && a != LDT_OK) st = a;
        else if (st == LDT_OK && !all)
            st = ldt__error(LDT_ERR_REMOTE, "cuda backend: another rank could not bind its step");
    }
    LDT_CHECK_GOTO(st);
    CU_TRY(cudaStreamSynchronize(x->stream)); /* the shards and tables bind copied are in */
    /* one eager run: launch errors and data errors show up here, named, not in a graph */
    LDT_CHECK_GOTO(stage_inputs(x));
    LDT_CHECK_GOTO(enqueue(x, 1));
    LDT_CHECK_GOTO(finish(x));
    if (s->run_once) { /* the run was the work: nothing to capture */
        *out = x;
        return LDT_OK;
    }
    CU_TRY(cudaMemsetAsync(x->rng, 0, 3 * sizeof(uint64_t), x->stream)); /* the validation run did not count */
    /* capture: thread-local mode, so other threads' CUDA calls neither join nor break it */
    CU_TRY(cudaStreamBeginCapture(x->stream, cudaStreamCaptureModeThreadLocal));
    capturing = 1;
    LDT_CHECK_GOTO(enqueue(x, 0));
    capturing = 0;
    CU_TRY(cudaStreamEndCapture(x->stream, &x->graph));
    CU_TRY(cudaGraphGetNodes(x->graph, NULL, &x->nodes));
    CU_TRY(cudaGraphInstantiate(&x->gexec, x->graph, 0));
    *out = x;
    return LDT_OK;
fail:
    if (capturing) { /* abandon the capture; its error, if any, is the one already set */
        cudaGraph_t g = NULL;
        cudaStreamEndCapture(x->stream, &g);
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
    }
    ldt__cuda_exec_destroy(x);
    return st;
}

ldt_status ldt__cuda_exec_replay(ldt__cuda_exec *x) {
    ldt_status st = LDT_OK;
    if (!x || !x->gexec)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: no captured executable (run_once)");
    if (x->broken)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "cuda backend: an earlier step's collectives failed and their NCCL "
                 "communicators were aborted: compile the step anew");
    LDT_CHECK(stage_inputs(x));
    CU_TRY(cudaGraphLaunch(x->gexec, x->stream));
    return finish(x);
fail:
    return st;
}

ldt_status ldt__cuda_exec_run_eager(ldt__cuda_exec *x) {
    if (!x) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: no executable");
    if (x->broken)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "cuda backend: an earlier step's collectives failed and their NCCL "
                 "communicators were aborted: compile the step anew");
    LDT_CHECK(stage_inputs(x));
    LDT_CHECK(enqueue(x, 0));
    return finish(x);
}

ldt_status ldt__cuda_exec_bind_input(ldt__cuda_exec *x, const struct ldt_tensor *t, const void *data) {
    if (!x || !t) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: bind: NULL argument");
    for (int64_t s = 0; s < x->nsteps; s++)
        if (x->steps[s].kind == STEP_INPUT && x->p->ins[x->steps[s].idx].src == t) x->steps[s].bound = data;
    return LDT_OK;
}

/* Makes x's device the calling thread's current one; *prev the one it was. */
static ldt_status on_device(const ldt__cuda_exec *x, int *prev) {
    ldt_status st = LDT_OK;
    CU_TRY(cudaGetDevice(prev));
    if (*prev != x->device) CU_TRY(cudaSetDevice(x->device));
fail:
    return st;
}

ldt_status ldt__cuda_exec_reload(ldt__cuda_exec *x, const struct ldt_tensor *t) {
    ldt_status st = LDT_OK;
    int prev;
    if (!x || !t) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: reload: NULL argument");
    LDT_CHECK(on_device(x, &prev));
    for (int64_t i = 0; i < x->p->nins && st == LDT_OK; i++) {
        const ldt__instr *in = &x->p->ins[i];
        if (in->kind != LDT__I_LOAD || in->src != t || t->op == LDT_OP_INPUT) continue;
        st = load_persistent(x, in, x->val[in->out]);
    }
    if (st == LDT_OK && cudaStreamSynchronize(x->stream) != cudaSuccess)
        st = ldt__error(LDT_ERR_CUDA, "cuda backend: reload: %s", cudaGetErrorString(cudaGetLastError()));
    if (prev != x->device) cudaSetDevice(prev);
    return st;
}

ldt_status ldt__cuda_exec_read(ldt__cuda_exec *x, int32_t v, void *dst, int64_t nbytes) {
    ldt_status st = LDT_OK;
    if (!x || v < 0 || v >= x->p->nvals || !x->val[v])
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: value %d is not held (keep it as an "
                 "output at create)", v);
    int64_t b = ldt__value_bytes(&x->p->vals[v]);
    int prev;
    if (nbytes != b)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: value %d has %lld bytes, not %lld", v,
                 (long long)b, (long long)nbytes);
    LDT_CHECK(on_device(x, &prev));
    if (b) CU_TRY(cudaMemcpyAsync(dst, x->val[v], (size_t)b, cudaMemcpyDeviceToHost, x->stream));
    CU_TRY(cudaStreamSynchronize(x->stream));
fail:
    if (prev != x->device) cudaSetDevice(prev);
    return st;
}

ldt_status ldt__cuda_exec_set_rng(ldt__cuda_exec *x, uint64_t delta, uint64_t advance) {
    ldt_status st = LDT_OK;
    uint64_t v[2] = {delta, advance};
    if (!x) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: no executable");
    CU_TRY(cudaMemcpyAsync(x->rng, v, sizeof v, cudaMemcpyHostToDevice, x->stream)); /* before the next step */
fail:
    return st;
}

ldt_status ldt__cuda_exec_rng(ldt__cuda_exec *x, uint64_t *delta, uint64_t *steps) {
    ldt_status st = LDT_OK;
    uint64_t v[3];
    if (!x) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cuda backend: no executable");
    CU_TRY(cudaMemcpyAsync(v, x->rng, sizeof v, cudaMemcpyDeviceToHost, x->stream));
    CU_TRY(cudaStreamSynchronize(x->stream));
    if (delta) *delta = v[0];
    if (steps) *steps = v[2];
fail:
    return st;
}

ldt_status ldt__cuda_select_device(int d) {
    ldt_status st = LDT_OK;
    CU_TRY(cudaSetDevice(d));
fail:
    return st;
}

int64_t ldt__cuda_exec_arena_bytes(const ldt__cuda_exec *x) {
    return x ? x->mem.arena_bytes : 0;
}

int64_t ldt__cuda_exec_graph_nodes(const ldt__cuda_exec *x) { return x ? (int64_t)x->nodes : 0; }

void ldt__cuda_exec_destroy(ldt__cuda_exec *x) {
    if (!x) return;
    if (x->stream) cudaStreamSynchronize(x->stream);
    if (x->gexec) cudaGraphExecDestroy(x->gexec);
    if (x->graph) cudaGraphDestroy(x->graph);
    /* the steps bound, and the one whose binding failed */
    for (int64_t s = 0; x->steps && s < x->nsteps + (x->nsteps < x->p->nins); s++) {
        cstep *c = &x->steps[s];
        cudaFreeHost(c->staging);
        if (c->done) cudaEventDestroy(c->done);
        for (int i = 0; c->rdev && i < c->dr->nops; i++) cudaFree(c->rdev[i]);
        free(c->rdev);
        ldt__dredist_free(c->dr); /* and its groups */
    }
    for (int b = 0; b < LDT__RB_N; b++) cudaFree(x->rshared[b]);
    cudaFree(x->pack);
    for (unsigned m = 0; m < (1u << LDT_MAX_DIMS); m++) ldt_comm_destroy(x->groups[m]);
    free(x->comms);
    free(x->step_of);
    if (x->fork) cudaEventDestroy(x->fork);
    if (x->cstream) cudaStreamDestroy(x->cstream);
    if (x->val && x->own)
        for (int32_t v = 0; v < x->p->nvals; v++)
            if (x->own[v]) cudaFree(x->val[v]);
    cudaFree(x->arena);
    cudaFree(x->derr);
    cudaFreeHost(x->derr_host);
    cudaFree(x->rng);
    if (x->blas) x->blas_api->destroy(x->blas);
    cudaFree(x->workspace);
    cudaFree(x->kscratch);
    if (x->stream) cudaStreamDestroy(x->stream);
    cudaGetLastError(); /* leave no sticky error from teardown behind */
    if (x->have_mem) ldt__mem_plan_free(&x->mem);
    free(x->val);
    free(x->own);
    free(x->opnds);
    free(x->steps);
    free(x->copy_src);
    free(x->copy_dst);
    free(x);
}

#endif
