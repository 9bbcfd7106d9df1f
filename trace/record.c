/* Recording: the op table (names, arities), input checks, appending nodes, the structural
 * hash, and the text and DOT dumps of a trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/error.h"
#include "trace/trace.h"

const char *ldt__op_name(const ldt_ctx *ctx, int op) {
    if (op >= 0 && op < LDT_OP_COUNT) return ldt__builtin_op_name(op);
    if (ctx && op >= LDT_OP_COUNT && op < LDT_OP_COUNT + ctx->ncustom)
        return ctx->custom[op - LDT_OP_COUNT].name;
    return "unknown op";
}


/* Out of line, so the common case below stays a leaf function with no frame to set up. */
__attribute__((noinline)) static ldt_ctx *inputs_error(const char *op, ldt_tensor *const *in, int n) {
    ldt_ctx *ctx = NULL;
    for (int i = 0; i < n; i++)
        if (in[i]) {
            ctx = in[i]->ctx;
            break;
        }
    for (int i = 0; i < n; i++) {
        if (!in[i]) {
            /* an earlier op failed: its error is stuck already; keep it */
            if (ctx && ctx->status != LDT_OK) return NULL;
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: input %d is NULL", op, i),
                   NULL;
        }
        if (in[i]->ctx != ctx)
            return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                                 "%s: input %d belongs to another context", op, i),
                   NULL;
        if (in[i]->kind == LDT__NODE && in[i]->gen != ctx->gen) {
            char d[256];
            ldt__describe(in[i], d, sizeof d);
            return ldt__op_error(ctx, LDT_ERR_INVALID_USAGE,
                                 "%s: input %d (%s %s = %s) is from a trace that has ended; keep "
                                 "a result across ldt_sync / ldt_read with ldt_keep",
                                 op, i, d, ldt_dtype_name((ldt_dtype)in[i]->dtype),
                                 ldt__op_name(ctx, in[i]->op)),
                   NULL;
        }
    }
    return ctx;
}

ldt_ctx *ldt__check_inputs(const char *op, ldt_tensor *const *in, int n) {
    ldt_ctx *ctx;
    int i = 0;
    if (n <= 0 || !in[0]) return inputs_error(op, in, n);
    ctx = in[0]->ctx; /* every input fine, the common case: one pass */
    for (; i < n; i++) {
        const ldt_tensor *x = in[i];
        if (!x || x->ctx != ctx || (x->kind == LDT__NODE && x->gen != ctx->gen)) break;
    }
    return i == n ? ctx : inputs_error(op, in, n); /* the slow path names what is wrong */
}

ldt_tensor *ldt__bad_dim(ldt_ctx *ctx, const char *op, int dim, const ldt_tensor *x) {
    char d[256];
    ldt__describe(x, d, sizeof d);
    return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                         "%s: dim %d is out of range for x %s (expected %d to %d)", op, dim, d,
                         -x->shape->ndim, x->shape->ndim - 1);
}

static int grow_nodes(ldt_ctx *ctx) {
    int64_t cap = ctx->cap_nodes ? ctx->cap_nodes * 2 : 1024;
    ldt_tensor **p = realloc(ctx->nodes, (size_t)cap * sizeof *p);
    if (!p) return -1;
    ctx->nodes = p;
    ctx->cap_nodes = cap;
    return 0;
}

static inline int push_node(ldt_ctx *ctx, ldt_tensor *t) {
    if (ctx->nnodes >= INT32_MAX) return -1; /* ids are 32-bit; no machine holds that trace */
    if (ctx->nnodes == ctx->cap_nodes && grow_nodes(ctx) != 0) return -1;
    t->id = (int32_t)ctx->nnodes;
    ctx->nodes[ctx->nnodes++] = t;
    return 0;
}

/* A node's fields, written one by one: zeroing the whole node first would write it twice. */
static inline ldt_tensor *fill_node(ldt_tensor *t, ldt_ctx *ctx, int op, ldt_tensor *const *in,
                                    int nin, const ldt_shape *sh, ldt_dtype dt, int with_attrs) {
    t->ctx = ctx;
    t->op = (uint16_t)op;
    t->dtype = (uint8_t)dt;
    t->kind = LDT__NODE;
    t->nin = nin;
    t->gen = ctx->gen;
    t->shape = sh;
    t->pin = NULL;
    t->data = NULL;
    for (int i = 0; i < nin; i++) LDT__IN(t)[i] = in[i];
    if (with_attrs) {
        ldt__attrs *a = (ldt__attrs *)(LDT__IN(t) + nin);
        /* element by element: -O2 makes a few vector stores of it, where memset of the
         * whole struct became `rep stos`, whose start-up cost was 30% of recording an op */
        for (int k = 0; k < LDT_ATTR_INTS; k++) a->i[k] = 0;
        a->f[0] = 0;
        a->f[1] = 0;
        t->attrs = a;
    } else {
        t->attrs = &ctx->no_attrs;
    }
    return t;
}

static size_t node_bytes(int nin, int with_attrs) {
    return sizeof(ldt_tensor) + (size_t)nin * sizeof(ldt_tensor *) + (with_attrs ? sizeof(ldt__attrs) : 0);
}

/* Every case: persistent inputs joining the trace, a new shape (checked for overflow and
 * copied), a new arena chunk, a longer node list. Out of line, so record_fast has no frame. */
__attribute__((noinline)) static ldt_tensor *record_slow(ldt_ctx *ctx, int op, ldt_tensor *const *in,
                                                       int nin, const ldt_shape *shape, ldt_dtype dt,
                                                       int with_attrs) {
    ldt_tensor *t;
    const ldt_shape *sh = NULL;
    int64_t nbytes = (int64_t)ldt__dtype_size(dt);
    int ok = 1, same = -1;
    /* an input with the very shape: the output shares it (most ops) */
    for (int i = 0; i < nin && same < 0; i++) {
        const ldt_shape *s = in[i]->shape;
        int eq = s->ndim == shape->ndim;
        for (int d = 0; eq && d < s->ndim; d++) eq = s->dims[d] == shape->dims[d];
        if (eq) same = i;
    }
    /* fast path: shape rules give valid dims, so only overflow needs checking here, and not
     * even that where an input of that shape has elements as wide (its size was checked when
     * it was made); on overflow the full check decides (a later zero dim can still make it
     * empty) */
    if (same < 0 || ldt__dtype_size(dt) > ldt__dtype_size((ldt_dtype)in[same]->dtype)) {
        for (int d = 0; d < shape->ndim; d++) ok &= !__builtin_mul_overflow(nbytes, shape->dims[d], &nbytes);
        if (!ok && ldt_shape_nbytes(shape, dt, &nbytes) != LDT_OK) {
            ldt__error_prefix(LDT_ERR_OVERFLOW, "%s", ldt__op_name(ctx, op));
            return ldt__trace_fail(ctx);
        }
    }
    /* persistent inputs join this trace as leaves, in first-use order, so the node list (and
     * the hash) of a step is the same every time the step is traced */
    for (int i = 0; i < nin; i++)
        if (in[i]->kind == LDT__PERSISTENT && in[i]->gen != ctx->gen) {
            if (in[i]->op == LDT_OP_DATA && LDT__P(in[i])->source)
                return ldt__op_error(ctx, LDT_ERR_INVALID_USAGE,
                                     "%s: input %d is kept from this same trace; use the op "
                                     "result itself until the trace runs",
                                     ldt__op_name(ctx, op), i);
            in[i]->gen = ctx->gen;
            if (push_node(ctx, in[i]) != 0)
                return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory",
                                     ldt__op_name(ctx, op));
        }
    /* an input's shape when equal (shared), else a copy in the trace arena */
    if (same >= 0) {
        sh = in[same]->shape;
    } else {
        ldt_shape *copy = ldt__arena_alloc_raw(ctx->arena, sizeof *copy);
        if (!copy)
            return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory",
                                 ldt__op_name(ctx, op));
        *copy = *shape;
        sh = copy;
    }
    t = ldt__arena_alloc_fast(ctx->arena, node_bytes(nin, with_attrs));
    if (!t || push_node(ctx, t) != 0)
        return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory",
                             ldt__op_name(ctx, op));
    return fill_node(t, ctx, op, in, nin, sh, dt, with_attrs);
}

/* The common case: every input a node of this trace or a persistent tensor already in it,
 * the output shaped as its first input of that shape with elements no wider (so its size
 * needs no check), and room in the arena's chunk and the node list. NULL, having changed
 * nothing, where any of that does not hold. */
static inline ldt_tensor *record_fast(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                                      const ldt_shape *shape, ldt_dtype dt, int with_attrs) {
    const ldt_shape *sh = NULL;
    ldt__arena *ar = ctx->arena;
    size_t size = (node_bytes(nin, with_attrs) + 15) & ~(size_t)15; /* as arena_alloc_fast */
    ldt_tensor *t;
    for (int i = 0; i < nin; i++) {
        const ldt_tensor *x = in[i];
        if (x->kind == LDT__PERSISTENT && x->gen != ctx->gen) return NULL;
        if (!sh) {
            const ldt_shape *s = x->shape;
            int eq = s->ndim == shape->ndim;
            for (int d = 0; eq && d < s->ndim; d++) eq = s->dims[d] == shape->dims[d];
            if (eq) {
                if (ldt__dtype_size(dt) > ldt__dtype_size((ldt_dtype)x->dtype)) return NULL;
                sh = s;
            }
        }
    }
    if (!sh || !ar->cur || (size_t)(ar->end - ar->cur) < size || ctx->nnodes >= ctx->cap_nodes ||
        ctx->nnodes >= INT32_MAX)
        return NULL;
    t = (ldt_tensor *)(void *)ar->cur;
    ar->cur += size;
    t->id = (int32_t)ctx->nnodes;
    ctx->nodes[ctx->nnodes++] = t;
    return fill_node(t, ctx, op, in, nin, sh, dt, with_attrs);
}

static inline ldt_tensor *record(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                                 const ldt_shape *shape, ldt_dtype dt, int with_attrs) {
    ldt_tensor *t = record_fast(ctx, op, in, nin, shape, dt, with_attrs);
    return t ? t : record_slow(ctx, op, in, nin, shape, dt, with_attrs);
}

ldt_tensor *ldt__record(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                        const ldt_shape *shape, ldt_dtype dt) {
    return record(ctx, op, in, nin, shape, dt, 0);
}

ldt_tensor *ldt__record_a(ldt_ctx *ctx, int op, ldt_tensor *const *in, int nin,
                          const ldt_shape *shape, ldt_dtype dt) {
    return record(ctx, op, in, nin, shape, dt, 1);
}

/* ---- structural hash ------------------------------------------------------------------ */

/* What of a node enters the hash: never addresses, data or names. Random ops hash their
 * offset relative to the trace's start (a per-step value, not structure) and not the seed. */
typedef struct {
    int32_t op, dtype, kind, nin, ndim, npin;
    int64_t dims[LDT_MAX_DIMS];
    ldt__attrs attrs;
} hash_rec;

uint64_t ldt_trace_hash(const ldt_ctx *ctx) {
    XXH3_state_t *st;
    uint64_t h;
    int npin;
    if (!ctx) return 0;
    st = XXH3_createState();
    if (!st) return 0;
    npin = ldt_mesh_ndim(ctx->mesh);
    XXH3_64bits_reset(st);
    for (int64_t i = 0; i < ctx->nnodes; i++) {
        const ldt_tensor *t = ctx->nodes[i];
        hash_rec r;
        memset(&r, 0, sizeof r);
        r.op = t->op;
        r.dtype = t->dtype;
        r.kind = t->kind;
        r.nin = t->nin;
        r.ndim = t->shape->ndim;
        memcpy(r.dims, t->shape->dims, (size_t)t->shape->ndim * sizeof r.dims[0]);
        if (t->kind == LDT__NODE) r.attrs = *t->attrs;
        if (t->op == LDT_OP_RAND || t->op == LDT_OP_RANDN || t->op == LDT_OP_BERNOULLI ||
            t->op == LDT_OP_TRUNC_NORMAL || t->op == LDT_OP_RANDINT ||
            ((t->op == LDT_OP_DROPOUT || t->op == LDT_OP_SDPA) && t->attrs->f[0] > 0)) {
            r.attrs.i[0] = 0;
            r.attrs.i[1] = (int64_t)((uint64_t)t->attrs->i[1] - ctx->trace_rng_base);
        }
        r.npin = t->pin ? npin : 0;
        XXH3_64bits_update(st, &r, sizeof r);
        for (int k = 0; k < t->nin; k++) {
            int64_t id = LDT__IN(t)[k]->id;
            XXH3_64bits_update(st, &id, sizeof id);
        }
        /* field by field: a placement struct's padding bytes are not part of its value */
        for (int k = 0; t->pin && k < npin; k++) {
            int64_t p[4] = {t->pin[k].kind, t->pin[k].dim, t->pin[k].blocks, t->pin[k].op};
            XXH3_64bits_update(st, p, sizeof p);
        }
        if (t->op >= LDT_OP_COUNT) {
            const char *name = ldt__op_name(ctx, t->op);
            XXH3_64bits_update(st, name, strlen(name));
        }
    }
    h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

/* ---- dumps -------------------------------------------------------------------------------- */

static void attrs_text(const ldt_tensor *t, char *buf, size_t cap) {
    const ldt__attrs *a = t->attrs;
    buf[0] = '\0';
    switch (t->op) {
    case LDT_OP_ADD_SCALAR: case LDT_OP_SUB_SCALAR: case LDT_OP_RSUB_SCALAR:
    case LDT_OP_MUL_SCALAR: case LDT_OP_DIV_SCALAR: case LDT_OP_RDIV_SCALAR:
    case LDT_OP_POW_SCALAR:
        snprintf(buf, cap, " s=%g", a->f[0]);
        break;
    case LDT_OP_GELU: snprintf(buf, cap, " form=%s", a->i[0] ? "tanh" : "erf"); break;
    case LDT_OP_SLICE:
        snprintf(buf, cap, " dim=%lld start=%lld end=%lld step=%lld", (long long)a->i[0],
                 (long long)a->i[1], (long long)a->i[2], (long long)a->i[3]);
        break;
    case LDT_OP_SELECT:
        snprintf(buf, cap, " dim=%lld index=%lld", (long long)a->i[0], (long long)a->i[1]);
        break;
    case LDT_OP_CAT: snprintf(buf, cap, " dim=%lld", (long long)a->i[0]); break;
    case LDT_OP_PERMUTE: {
        size_t at = (size_t)snprintf(buf, cap, " perm=");
        for (int d = 0; d < t->shape->ndim && at < cap; d++)
            at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? "," : "", (long long)a->i[d]);
        break;
    }
    case LDT_OP_SUM: case LDT_OP_MEAN: case LDT_OP_AMAX: case LDT_OP_AMIN:
        snprintf(buf, cap, " dims=0x%llx keepdim=%lld", (unsigned long long)a->i[0],
                 (long long)a->i[1]);
        break;
    case LDT_OP_ARGMAX: case LDT_OP_ARGMIN:
        snprintf(buf, cap, " dim=%lld keepdim=%lld", (long long)a->i[0], (long long)a->i[1]);
        break;
    case LDT_OP_TOPK_VALUES: case LDT_OP_TOPK_INDICES:
        snprintf(buf, cap, " dim=%lld k=%lld largest=%lld", (long long)a->i[0],
                 (long long)a->i[1], (long long)a->i[2]);
        break;
    case LDT_OP_RAND: case LDT_OP_RANDN: case LDT_OP_BERNOULLI:
        snprintf(buf, cap, " seed=%llu offset=%llu f=%g,%g", (unsigned long long)a->i[0],
                 (unsigned long long)a->i[1], a->f[0], a->f[1]);
        break;
    case LDT_OP_TRUNC_NORMAL: {
        double lo, hi;
        memcpy(&lo, &a->i[2], sizeof lo);
        memcpy(&hi, &a->i[3], sizeof hi);
        snprintf(buf, cap, " seed=%llu offset=%llu mean=%g std=%g a=%g b=%g",
                 (unsigned long long)a->i[0], (unsigned long long)a->i[1], a->f[0], a->f[1], lo, hi);
        break;
    }
    case LDT_OP_RANDINT:
        snprintf(buf, cap, " seed=%llu offset=%llu low=%lld high=%lld", (unsigned long long)a->i[0],
                 (unsigned long long)a->i[1], (long long)a->i[2], (long long)a->i[3]);
        break;
    default: break;
    }
}

ldt_status ldt_trace_dump(const ldt_ctx *ctx, FILE *f) {
    int npin;
    if (!ctx || !f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "trace_dump: arguments must not be NULL");
    npin = ldt_mesh_ndim(ctx->mesh);
    for (int64_t i = 0; i < ctx->nnodes; i++) {
        const ldt_tensor *t = ctx->nodes[i];
        char sh[256], at[256], pin[256];
        ldt_shape_format(t->shape, sh, sizeof sh);
        attrs_text(t, at, sizeof at);
        fprintf(f, "%%%lld = %s", (long long)i, ldt__op_name(ctx, t->op));
        if (LDT__NAME(t)) fprintf(f, " \"%s\"", LDT__NAME(t));
        if (t->nin) {
            fprintf(f, "(");
            for (int k = 0; k < t->nin; k++)
                fprintf(f, "%s%%%lld", k ? ", " : "", (long long)LDT__IN(t)[k]->id);
            fprintf(f, ")");
        }
        fprintf(f, "%s %s %s", at, sh, ldt_dtype_name((ldt_dtype)t->dtype));
        if (t->pin) {
            ldt_placements_format(t->pin, npin, pin, sizeof pin);
            fprintf(f, " pin=%s", pin);
        }
        fprintf(f, "\n");
    }
    return ferror(f) ? ldt__trace(ldt__error(LDT_ERR_SYSTEM, "trace_dump: write failed"),
                                  __FILE__, __LINE__)
                     : LDT_OK;
}

ldt_status ldt_trace_dot(const ldt_ctx *ctx, FILE *f) {
    int npin;
    if (!ctx || !f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "trace_dot: arguments must not be NULL");
    npin = ldt_mesh_ndim(ctx->mesh);
    fprintf(f, "digraph trace {\n  node [shape=box, fontname=\"monospace\"];\n");
    for (int64_t i = 0; i < ctx->nnodes; i++) {
        const ldt_tensor *t = ctx->nodes[i];
        char sh[256], pin[256] = "";
        ldt_shape_format(t->shape, sh, sizeof sh);
        if (t->pin) ldt_placements_format(t->pin, npin, pin, sizeof pin);
        fprintf(f, "  n%lld [label=\"%%%lld %s%s%s\\n%s %s%s%s\"%s];\n", (long long)i,
                (long long)i, ldt__op_name(ctx, t->op), LDT__NAME(t) ? " " : "",
                LDT__NAME(t) ? LDT__NAME(t) : "", sh, ldt_dtype_name((ldt_dtype)t->dtype),
                t->pin ? " " : "", pin,
                t->kind == LDT__PERSISTENT ? ", style=filled, fillcolor=\"#e8e8e8\"" : "");
        for (int k = 0; k < t->nin; k++)
            fprintf(f, "  n%lld -> n%lld;\n", (long long)LDT__IN(t)[k]->id, (long long)i);
    }
    fprintf(f, "}\n");
    return ferror(f) ? ldt__trace(ldt__error(LDT_ERR_SYSTEM, "trace_dot: write failed"),
                                  __FILE__, __LINE__)
                     : LDT_OK;
}
