/* The CPU replay (docs/replay.md) and the executable's entry points: ldt_replay,
 * ldt_exec_read, ldt_exec_bind.
 *
 * Compile (exec/compile.c) plans the trace, lowers every rank's program, gives each rank one
 * arena from the memory plan, and binds every instruction once (exec/bind.c): kernel function
 * pointers resolved, operands pointing into the arena (or at persistent per-rank copies of
 * parameters and constants, or at an input's own buffer when the rank holds all of it).
 * Replay: each rank thread walks its array of bound instructions calling one function pointer
 * each; no lookup, allocation, hashing or propagation. Ranks meet only at collectives. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/copy.h"
#include "core/error.h"
#include "exec/backend_cuda.h"
#include "exec/comm.h"
#include "exec/exec_internal.h"

/* ---------------------------------------------------------------------------------------
 * Replay.
 */
/* Inputs that zero-copy bindings would let a rank use in place: the value points at the
 * bound buffer (re-pointed each replay, since the user may bind another). */
static void repoint_inputs(rank_state *rs) {
    const ldt__program *p = rs->prog;
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        binstr *b = &rs->ins[i];
        const ldt__binding *bd;
        if (x->kind != LDT__I_LOAD || x->src->op != LDT_OP_INPUT || !rs->whole_input[b->aux]) continue;
        bd = &rs->e->bindings[b->aux];
        rs->val_now[x->out] = bd->ptr ? (void *)bd->ptr : rs->val[x->out];
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Operand pointers of values bound to an input buffer follow the current binding. */
static void patch_pointers(rank_state *rs) {
    const ldt__program *p = rs->prog;
    int64_t k = 0;
    for (int64_t i = 0; i < rs->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        for (int j = 0; j < x->nin; j++, k++) {
            rs->opnds[k].data = rs->val_now[p->ops[x->in + j]];
            if (rs->ins[i].custom) rs->ins[i].custom->in[j] = rs->opnds[k].data;
        }
        rs->ins[i].call.out.data = rs->val_now[x->out];
        if (rs->ins[i].hcall) rs->ins[i].hcall->out.data = rs->ins[i].call.out.data;
        if (rs->ins[i].custom) rs->ins[i].custom->out = rs->ins[i].call.out.data;
    }
}

static ldt_status rank_replay(ldt_comm *world, void *arg) {
    ldt_exec *e = arg;
    int rank = ldt_comm_rank(world);
    rank_state *rs;
    const ldt__hot *hot;
    int64_t n, i;
    ldt_status st = LDT_OK;
    if (rank >= e->nranks || !(rs = e->ranks[rank])) return LDT_OK;
    rs->world = world;
    if (rs->has_async) { /* a new replay: waits look for this generation */
        pthread_mutex_lock(&rs->q.mu);
        rs->q.gen++;
        pthread_mutex_unlock(&rs->q.mu);
    }
    for (int64_t i = 0; i < rs->nrand; i++) /* this step's place on the random stream */
        rs->rand[i].attrs->i[1] = (int64_t)(rs->rand[i].offset - e->rng_base + e->rng_now);
    if (e->rebind) {
        repoint_inputs(rs);
        patch_pointers(rs);
    }
    hot = rs->hot;
    n = rs->nins;
    if (!e->profile) {
        for (i = 0; i < n; i++) /* the replay loop: one indirect call per instruction */
            if ((st = hot[i].fn(hot[i].call)) != LDT_OK) break;
    } else {
        for (i = 0; i < n; i++) {
            double t0 = now_s();
            st = hot[i].fn(hot[i].call);
            rs->prof[i].start = t0 - e->t_origin;
            rs->prof[i].end = now_s() - e->t_origin;
            if (st != LDT_OK) break;
        }
    }
    if (st != LDT_OK) {
        return ldt__error_prefix(st, "replay rank %d, instruction %lld (%s of node %%%d)", rank,
                                 (long long)i, ldt__instr_name(e->ctx, &rs->prog->ins[i]),
                                 rs->prog->ins[i].node);
    }
    /* outputs into the gathering shards; assigned values into their tensors' load buffers
     * (in place: the next replay's load finds them there) or, failing that, shards too */
    for (int i = 0; i < e->nout + e->nassign; i++) {
        int64_t nb;
        void *dst;
        int32_t v = rs->prog->node_val[e->outs[i].node];
        if (i >= e->nout && e->inplace && e->inplace[i - e->nout]) {
            void *buf;
            if (rs->assign_load[i - e->nout] < 0) continue; /* a pipeline's other stage */
            buf = rs->ins[rs->assign_load[i - e->nout]].call.out.data;
            nb = ldt__value_bytes(&rs->prog->vals[v]);
            if (nb && buf != rs->val_now[v]) ldt__copy(buf, rs->val_now[v], (size_t)nb);
            continue;
        }
        dst = ldt_shards_local(e->outs[i].shards, rank, &nb);
        if (nb) ldt__copy(dst, rs->val_now[v], (size_t)nb);
    }
    return LDT_OK;
}


static ldt_status replay_step(ldt_exec *e);

void ldt__timeout_note_text(char *out, size_t cap, const char *msg, int64_t replays, double last_step_s,
                            double ran_s, double timeout_s) {
    /* the first step's own time: what it had run, less the one call's wait that timed out */
    double own = replays ? last_step_s : ran_s - timeout_s;
    const char *slow = "steps that slow need a longer timeout (LDT_COMM_TIMEOUT_MS or --comm-timeout-ms)",
               *fast = "well within it: a peer more likely stopped, died or called another collective "
                       "than ran slow";
    if (replays)
        snprintf(out, cap, "%s; this rank's last step took %.1f s, the communication timeout is %.1f s: %s", msg,
                 last_step_s, timeout_s, own >= timeout_s / 2 ? slow : fast);
    else
        snprintf(out, cap, "%s; this first step had run %.1f s, the communication timeout is %.1f s: %s", msg, ran_s,
                 timeout_s, own >= timeout_s / 2 ? slow : fast);
}

/* A timeout in a step that runs about as long as the timeout is slowness, not a dead peer:
 * the message says how long the step took against the timeout, and how to wait longer when
 * that is the likelier cause (ldt__timeout_note_text). */
static ldt_status timeout_note(ldt_exec *e, ldt_status st, double ran_s) {
    char msg[1536], note[2048];
    int64_t tmo = 0;
    if (st != LDT_ERR_TIMEOUT) return st;
    if (e->world) tmo = e->world->timeout_ms;
    else if (ldt__comm_timeout(NULL, "replay", &tmo) != LDT_OK) return st;
    snprintf(msg, sizeof msg, "%s", ldt_last_error());
    ldt__timeout_note_text(note, sizeof note, msg, e->replays, e->last_step_s, ran_s, (double)tmo / 1e3);
    return ldt__error(st, "%s", note);
}

ldt_status ldt_replay(ldt_exec *e) {
    double t0 = now_s();
    ldt_status st;
    if (!e) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "replay: the executable is NULL");
    st = replay_step(e);
    if (st == LDT_OK) {
        e->last_step_s = now_s() - t0;
        return LDT_OK;
    }
    st = timeout_note(e, st, now_s() - t0);
    /* Process mode: the peers cannot see that this process left the step, and would wait out
     * their timeouts in the collectives it never joins (or mistake its teardown's for the
     * step's). Aborting the world fails their calls now, and keeps ours from communicating. */
    if (e->world) ldt__comm_abort(e->world, ldt_last_error());
    return ldt__trace(st, __FILE__, __LINE__);
}

static ldt_status replay_step(ldt_exec *e) {
    ldt_status st;
    if (e->ctx->stale_exec && e->ctx->stale_exec != e) LDT_CHECK(ldt__host_sync(e->ctx));
    if (e->is_cuda) return ldt__cuda_replay(e);
    e->rng_now = e->ctx->rng_offset;
    if (e->profile) e->t_origin = now_s();
    if (e->world) { /* process mode: this process's rank, here */
        st = rank_replay(e->world, e); /* its errors name the rank already */
    } else {
        st = ldt_threads_run(e->threads, rank_replay, e);
    }
    e->rebind = 0;
    if (st != LDT_OK) return st;
    e->ctx->rng_offset += e->rng_advance; /* as the eager step would have */
    e->ctx->trace_rng_base = e->ctx->rng_offset;
    e->replays++;
    /* assigned values are their tensors' new versions. In place, they already sit in the
     * ranks' load buffers, which now hold that version (the host copy follows on demand,
     * ldt__host_flush); otherwise they land in the host data and every rank reloads its shard */
    for (int i = e->nout; i < e->nout + e->nassign; i++) {
        ldt_tensor *t = e->outs[i].assign_to;
        int a = i - e->nout;
        if (e->inplace && e->inplace[a]) {
            LDT__P(t)->version++;
            for (int r = 0; r < e->nranks; r++)
                if (e->ranks[r] && e->ranks[r]->assign_load[a] >= 0)
                    e->ranks[r]->ins[e->ranks[r]->assign_load[a]].version = LDT__P(t)->version;
            continue;
        }
        if (e->world) LDT_CHECK(ldt__gather_shards(e, e->outs[i].shards));
        LDT_CHECK(ldt_full_tensor(e->outs[i].shards, t->data));
        LDT__P(t)->version++;
    }
    if (e->any_inplace) {
        e->ctx->stale_exec = e;
        e->ctx->host_flush = ldt__host_flush;
    }
    if (e->trace_path) LDT_CHECK(ldt__exec_write_trace(e));
    return LDT_OK;
}

ldt_status ldt_exec_read(ldt_exec *e, int i, void *dst, int64_t nbytes) {
    if (!e || (!dst && nbytes > 0)) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: NULL argument");
    if (i < 0 || i >= e->nout)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: output %d, the executable has %d", i, e->nout);
    if (nbytes != e->outs[i].nbytes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec read: output %d holds %lld bytes, %lld given", i,
                 (long long)e->outs[i].nbytes, (long long)nbytes);
    if (!e->replays) LDT_FAIL(LDT_ERR_INVALID_USAGE, "exec read: nothing has been replayed yet");
    if (e->is_cuda) return ldt__cuda_read(e, i, dst);
    if (e->world && e->gathered[i] != e->replays) { /* a collective: every process reads it */
        LDT_CHECK(ldt__gather_shards(e, e->outs[i].shards));
        e->gathered[i] = e->replays;
    }
    return ldt_full_tensor(e->outs[i].shards, dst);
}

ldt_status ldt_exec_bind(ldt_exec *e, const char *name, const void *data, int64_t nbytes) {
    if (!e || !name || (!data && nbytes > 0)) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind: NULL argument");
    for (int i = 0; i < e->nbindings; i++) {
        const ldt_tensor *t = e->bindings[i].t;
        const char *nm = LDT__P(t)->name; /* inputs are persistent */
        if (!nm || strcmp(nm, name) != 0) continue;
        if (nbytes != ldt__nbytes(t))
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind '%s': %lld bytes given, the input holds %lld",
                     name, (long long)nbytes, (long long)ldt__nbytes(t));
        e->bindings[i].ptr = data;
        e->rebind = 1;
        for (int r = 0; e->is_cuda && r < e->nranks; r++) /* copied from there to the device */
            if (ldt__cuda_local(e, r)) LDT_CHECK(ldt__cuda_exec_bind_input(e->cuda[r], t, data));
        return LDT_OK;
    }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "exec bind: the executable has no input named '%s'", name);
}
