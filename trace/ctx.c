/* Contexts: errors, persistent tensors (inputs, params, constants, kept values), pins, custom
 * op registration and the end of a trace. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "trace/trace.h"

#define TRACE_CHUNK (1 << 20)

ldt_status ldt_ctx_create(const ldt_ctx_options *opts, ldt_ctx **out) {
    ldt_ctx *ctx;
    ldt_status st;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ctx_create: out must not be NULL");
    *out = NULL;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ctx_create: out of memory");
    if (opts && opts->mesh) {
        st = ldt_mesh_clone(opts->mesh, &ctx->mesh);
    } else {
        int64_t one = 1;
        st = ldt_mesh_create(1, &one, NULL, NULL, LDT_DEVICE_CPU, &ctx->mesh);
    }
    if (st != LDT_OK) {
        free(ctx);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    ctx->seed = opts ? opts->seed : 0;
    ctx->world = opts ? opts->world : NULL;
    ldt__arena_init(&ctx->arenas[0], TRACE_CHUNK);
    ldt__arena_init(&ctx->arenas[1], TRACE_CHUNK);
    ctx->arena = &ctx->arenas[1]; /* gen 1 uses arena 1 (gen & 1), as ldt__trace_end picks */
    ctx->gen = 1;
    *out = ctx;
    return LDT_OK;
}

static void free_persistent(ldt_tensor *t) {
    free(t->data);
    free(LDT__P(t)->name);
    free(LDT__P(t));
}

void ldt_ctx_destroy(ldt_ctx *ctx) {
    if (!ctx) return;
    if (ctx->exec_cache_free) ctx->exec_cache_free(ctx->exec_cache); /* before what it holds */
    if (ctx->passes_free) ctx->passes_free(ctx->passes);
    for (int64_t i = 0; i < ctx->nnodes; i++)
        if (ctx->nodes[i]->kind == LDT__NODE) free(ctx->nodes[i]->data);
    for (int64_t i = 0; i < ctx->npersist; i++) free_persistent(ctx->persist[i]);
    for (int i = 0; i < ctx->ncustom; i++) free(ctx->custom[i].name);
    free(ctx->custom);
    free(ctx->persist);
    free(ctx->nodes);
    free(ctx->keeps);
    free(ctx->rc_seg);
    ldt__pp_free(ctx);
    ldt__arena_destroy(&ctx->arenas[0]);
    ldt__arena_destroy(&ctx->arenas[1]);
    ldt_mesh_destroy(ctx->mesh);
    free(ctx);
}

const char *ldt_ctx_errmsg(const ldt_ctx *ctx) { return ctx ? ctx->errmsg : ""; }
ldt_status ldt_ctx_status(const ldt_ctx *ctx) {
    return ctx ? ctx->status : LDT_ERR_INVALID_ARGUMENT;
}
void ldt_ctx_clear_error(ldt_ctx *ctx) {
    if (!ctx) return;
    ctx->status = LDT_OK;
    ctx->errmsg[0] = '\0';
}
const ldt_mesh *ldt_ctx_mesh(const ldt_ctx *ctx) { return ctx ? ctx->mesh : NULL; }

ldt_status ldt_ctx_set_seed(ldt_ctx *ctx, uint64_t seed, uint64_t offset) {
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ctx_set_seed: ctx must not be NULL");
    if (ctx->nnodes > 0)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "ctx_set_seed: the current trace has %lld nodes; set the seed between traces "
                 "(after ldt_sync)",
                 (long long)ctx->nnodes);
    ctx->seed = seed;
    ctx->rng_offset = ctx->trace_rng_base = offset;
    return LDT_OK;
}
uint64_t ldt_ctx_seed(const ldt_ctx *ctx) { return ctx ? ctx->seed : 0; }
uint64_t ldt_ctx_rng_offset(const ldt_ctx *ctx) { return ctx ? ctx->rng_offset : 0; }

/* ---- errors ----------------------------------------------------------------------------- */

ldt_tensor *ldt__trace_fail(ldt_ctx *ctx) {
    if (ctx && ctx->status == LDT_OK) {
        ctx->status = LDT_ERR_INVALID_ARGUMENT;
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", ldt_last_error());
    }
    return NULL;
}

ldt_tensor *ldt__op_error(ldt_ctx *ctx, ldt_status st, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ldt__error(st, "%s", msg);
    if (ctx && ctx->status == LDT_OK) {
        ctx->status = st;
        snprintf(ctx->errmsg, sizeof ctx->errmsg, "%s", msg);
    }
    return NULL;
}

void ldt__describe(const ldt_tensor *t, char *buf, size_t cap) {
    int n = ldt_shape_format(t->shape, buf, cap);
    if (t->pin && n >= 0 && (size_t)n + 4 < cap) {
        buf[n] = ' ';
        buf[n + 1] = '(';
        n += 2 + ldt_placements_format(t->pin, ldt_mesh_ndim(t->ctx->mesh), buf + n + 2,
                                       cap - (size_t)n - 2);
        if ((size_t)n + 1 < cap) {
            buf[n] = ')';
            buf[n + 1] = '\0';
        }
    }
}

int ldt__norm_dim(int dim, int ndim) {
    if (dim < -ndim || dim >= ndim) return -1;
    return dim < 0 ? dim + ndim : dim;
}

/* ---- persistent tensors ------------------------------------------------------------------ */

static ldt_tensor *persistent(ldt_ctx *ctx, int op, const char *what, const char *name,
                              const ldt_shape *shape, ldt_dtype dt) {
    ldt__persistent *p;
    ldt_tensor *t;
    int64_t nbytes;
    if (!ctx) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "%s: ctx must not be NULL", what);
        return NULL;
    }
    if (!shape) return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: shape is NULL", what);
    if ((unsigned)dt >= LDT_DTYPE_COUNT)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", what, (int)dt);
    if (ldt_shape_nbytes(shape, dt, &nbytes) != LDT_OK) {
        ldt__error_prefix(LDT_ERR_INVALID_ARGUMENT, "%s", what);
        return ldt__trace_fail(ctx);
    }
    if (ctx->npersist == ctx->cap_persist) {
        int64_t cap = ctx->cap_persist ? ctx->cap_persist * 2 : 64;
        ldt_tensor **p = realloc(ctx->persist, (size_t)cap * sizeof *p);
        if (!p) return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        ctx->persist = p;
        ctx->cap_persist = cap;
    }
    p = calloc(1, sizeof *p);
    if (!p) return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    t = &p->t;
    t->kind = LDT__PERSISTENT;
    t->attrs = &ctx->no_attrs;
    /* on a meta mesh inputs and parameters hold nothing: a 175B-parameter model is described
     * in kilobytes; constants carry their data (they are given it now) */
    if (ldt_mesh_device(ctx->mesh) != LDT_DEVICE_META || op == LDT_OP_CONST)
        t->data = calloc(1, (size_t)(nbytes ? nbytes : 1));
    if (name) {
        p->name = malloc(strlen(name) + 1);
        if (p->name) memcpy(p->name, name, strlen(name) + 1);
    }
    if ((!t->data && (ldt_mesh_device(ctx->mesh) != LDT_DEVICE_META || op == LDT_OP_CONST)) ||
        (name && !p->name)) {
        free_persistent(t);
        return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld bytes",
                             what, (long long)nbytes);
    }
    t->ctx = ctx;
    t->op = (uint16_t)op;
    t->dtype = (uint8_t)dt;
    t->kind = LDT__PERSISTENT;
    p->shape_store = *shape;
    t->shape = &p->shape_store;
    t->id = -1;
    ctx->persist[ctx->npersist++] = t;
    return t;
}

ldt_tensor *ldt_input(ldt_ctx *ctx, const char *name, const ldt_shape *shape, ldt_dtype dt) {
    return persistent(ctx, LDT_OP_INPUT, "input", name, shape, dt);
}

ldt_tensor *ldt_param(ldt_ctx *ctx, const char *name, const ldt_shape *shape, ldt_dtype dt) {
    return persistent(ctx, LDT_OP_PARAM, "param", name, shape, dt);
}

ldt_tensor *ldt_constant(ldt_ctx *ctx, const ldt_shape *shape, ldt_dtype dt, const void *data) {
    ldt_tensor *t;
    if (ctx && !data)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "constant: data is NULL");
    t = persistent(ctx, LDT_OP_CONST, "constant", NULL, shape, dt);
    if (t && ldt__nbytes(t)) memcpy(t->data, data, (size_t)ldt__nbytes(t));
    return t;
}

static ldt_status set_data(ldt_tensor *t, int op, const char *what, const void *data,
                           int64_t nbytes) {
    char d[256];
    if (!t || (!data && nbytes > 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: tensor and data must not be NULL", what);
    if (t->kind != LDT__PERSISTENT || t->op != op)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: the tensor is a %s, expected a %s", what,
                 ldt__op_name(t->ctx, t->op), ldt__op_name(t->ctx, op));
    if (!t->data)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "%s '%s': the context's mesh is on the meta device, where tensors hold no data; "
                 "give parameters an init recipe (ldt_param_init) and materialize them on a real "
                 "mesh", what, LDT__NAME(t) ? LDT__NAME(t) : "");
    if (nbytes != ldt__nbytes(t)) {
        ldt_shape_format(t->shape, d, sizeof d);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s '%s': %lld bytes given, expected %lld (%s %s)",
 what, LDT__NAME(t) ? LDT__NAME(t) : "", (long long)nbytes, (long long)ldt__nbytes(t), d,
                 ldt_dtype_name((ldt_dtype)t->dtype));
    }
    /* a parameter an executable updated in place: its newer values first, then overwritten
     * (inputs are never assigned: binding one each step must not bring parameters home) */
    if (op != LDT_OP_INPUT) LDT_CHECK(ldt__host_sync(t->ctx));
    if (nbytes) memcpy(t->data, data, (size_t)nbytes);
    LDT__P(t)->bound = 1;
    LDT__P(t)->version++;
    return LDT_OK;
}

ldt_status ldt_input_bind(ldt_tensor *input, const void *data, int64_t nbytes) {
    return set_data(input, LDT_OP_INPUT, "input_bind", data, nbytes);
}

ldt_status ldt_param_set(ldt_tensor *param, const void *data, int64_t nbytes) {
    return set_data(param, LDT_OP_PARAM, "param_set", data, nbytes);
}

ldt_status ldt_assign(ldt_tensor *dst, ldt_tensor *value) {
    ldt_ctx *ctx;
    char d[256], v[256];
    if (!dst || !value) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "assign: dst and value must not be NULL");
    if (!(ctx = ldt__check_inputs("assign", &value, 1)))
        return LDT_ERR_INVALID_ARGUMENT; /* the message says which: NULL, expired, ... */
    if (dst->ctx != ctx || dst->kind != LDT__PERSISTENT || (dst->op != LDT_OP_PARAM && dst->op != LDT_OP_DATA))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "assign: dst must be a parameter (or kept tensor) of the "
                 "value's context");
    ldt__describe(dst, d, sizeof d);
    ldt__describe(value, v, sizeof v);
    if (dst->dtype != value->dtype || !ldt_shape_equal(dst->shape, value->shape))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "assign '%s': dst %s %s, value %s %s; expected the same "
                 "shape and dtype", LDT__NAME(dst) ? LDT__NAME(dst) : "", d,
                 ldt_dtype_name((ldt_dtype)dst->dtype), v, ldt_dtype_name((ldt_dtype)value->dtype));
    /* on a meta mesh a step is traced to be planned, never run: parameters hold no data there,
     * and an assignment is part of the step's plan (a training step's updates) */
    if (!dst->data && ldt__nbytes(dst) && ldt_mesh_device(ctx->mesh) != LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "assign '%s': a meta tensor holds no data", LDT__NAME(dst) ? LDT__NAME(dst) : "");
    if (LDT__P(dst)->source)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "assign '%s': it already receives a value in this trace",
                 LDT__NAME(dst) ? LDT__NAME(dst) : "");
    if (value->kind == LDT__PERSISTENT) value = ldt_alias(value); /* a node of this trace */
    if (!value) return ctx->status;
    if (ctx->nkeeps == ctx->cap_keeps) {
        int64_t cap = ctx->cap_keeps ? ctx->cap_keeps * 2 : 16;
        ldt_tensor **p = realloc(ctx->keeps, (size_t)cap * sizeof *p);
        if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "assign: out of memory");
        ctx->keeps = p;
        ctx->cap_keeps = cap;
    }
    LDT__P(dst)->source = value;
    ctx->keeps[ctx->nkeeps++] = dst;
    return LDT_OK;
}

ldt_tensor *ldt_keep(ldt_tensor *t) {
    ldt_ctx *ctx;
    ldt_tensor *k;
    if (!(ctx = ldt__check_inputs("keep", &t, 1))) return NULL;
    if (t->kind == LDT__PERSISTENT) return t;
    k = persistent(ctx, LDT_OP_DATA, "keep", NULL, t->shape, (ldt_dtype)t->dtype);
    if (!k) return NULL;
    if (t->pin) {
        memcpy(LDT__P(k)->pin_store, t->pin, (size_t)ldt_mesh_ndim(ctx->mesh) * sizeof *t->pin);
        k->pin = LDT__P(k)->pin_store;
    }
    if (ctx->nkeeps == ctx->cap_keeps) {
        int64_t cap = ctx->cap_keeps ? ctx->cap_keeps * 2 : 16;
        ldt_tensor **p = realloc(ctx->keeps, (size_t)cap * sizeof *p);
        if (!p) return ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "keep: out of memory");
        ctx->keeps = p;
        ctx->cap_keeps = cap;
    }
    LDT__P(k)->source = t;
    ctx->keeps[ctx->nkeeps++] = k;
    return k;
}

/* ---- introspection ------------------------------------------------------------------------ */

ldt_status ldt_tensor_shape(const ldt_tensor *t, ldt_shape *out) {
    if (!t || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "tensor_shape: arguments must not be NULL");
    *out = (*t->shape);
    return LDT_OK;
}
ldt_dtype ldt_tensor_dtype(const ldt_tensor *t) { return t ? (ldt_dtype)t->dtype : LDT_F32; }
ldt_ctx *ldt_tensor_ctx(const ldt_tensor *t) { return t ? t->ctx : NULL; }
int64_t ldt_trace_nodes(const ldt_ctx *ctx) { return ctx ? ctx->nnodes : 0; }

/* ---- pins ---------------------------------------------------------------------------------- */

static ldt_status check_placements(ldt_ctx *ctx, const ldt_tensor *t, const char *what,
                                   const ldt_placement *pl, int n) {
    ldt_spec spec;
    char d[256];
    if (!pl || n != ldt_mesh_ndim(ctx->mesh)) {
        ldt_mesh_format(ctx->mesh, d, sizeof d);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d placements for mesh %s, expected %d", what,
                 pl ? n : 0, d, ldt_mesh_ndim(ctx->mesh));
    }
    if (ldt_spec_init(&spec, ctx->mesh, t->shape, pl, n, (ldt_dtype)t->dtype) != LDT_OK)
        return ldt__trace(ldt__error_prefix(LDT_ERR_INVALID_ARGUMENT, "%s", what), __FILE__,
                          __LINE__);
    return LDT_OK;
}

ldt_status ldt_pin(ldt_tensor *t, const ldt_placement *placements, int n) {
    ldt_ctx *ctx = ldt__check_inputs("pin", &t, 1);
    ldt_spec spec;
    if (!ctx) return t && t->ctx && t->ctx->status ? t->ctx->status : LDT_ERR_INVALID_ARGUMENT;
    if (check_placements(ctx, t, "pin", placements, n) != LDT_OK) {
        ldt__trace_fail(ctx);
        return LDT_ERR_INVALID_ARGUMENT;
    }
    /* normalised (negative dims resolved) through the spec */
    ldt_spec_init(&spec, ctx->mesh, t->shape, placements, n, (ldt_dtype)t->dtype);
    if (t->kind == LDT__PERSISTENT) {
        t->pin = LDT__P(t)->pin_store;
    } else if (!t->pin) {
        t->pin = ldt__arena_alloc(ctx->arena, (size_t)n * sizeof *t->pin);
        if (!t->pin) {
            ldt__op_error(ctx, LDT_ERR_OUT_OF_MEMORY, "pin: out of memory");
            return LDT_ERR_OUT_OF_MEMORY;
        }
    }
    memcpy(t->pin, spec.placements, (size_t)n * sizeof *t->pin);
    return LDT_OK;
}

ldt_tensor *ldt_redistribute_to(ldt_tensor *t, const ldt_placement *placements, int n) {
    ldt_ctx *ctx = ldt__check_inputs("redistribute_to", &t, 1);
    ldt_tensor *r;
    if (!ctx) return NULL;
    if (check_placements(ctx, t, "redistribute_to", placements, n) != LDT_OK)
        return ldt__trace_fail(ctx);
    r = ldt__record(ctx, LDT_OP_REDISTRIBUTE, &t, 1, t->shape, (ldt_dtype)t->dtype);
    if (r && ldt_pin(r, placements, n) != LDT_OK) return NULL;
    return r;
}

/* ---- custom ops ----------------------------------------------------------------------------- */

ldt_status ldt_custom_op_register(ldt_ctx *ctx, const char *name, int nin,
                                  ldt_custom_shape_fn shape_fn, ldt_custom_cpu_fn cpu_fn,
                                  void *user, int *id) {
    ldt__custom_op *ops;
    if (!ctx || !name || !shape_fn || !cpu_fn || !id)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "custom_op_register: ctx, name, shape_fn, cpu_fn and id must not be NULL");
    if (nin < 0 || nin > 64)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "custom_op_register '%s': %d inputs, expected 0 to 64",
                 name, nin);
    if (LDT_OP_COUNT + ctx->ncustom >= UINT16_MAX)
        LDT_FAIL(LDT_ERR_INVALID_USAGE, "custom_op_register: too many custom ops");
    for (int i = 0; i < ctx->ncustom; i++)
        if (strcmp(ctx->custom[i].name, name) == 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "custom_op_register: '%s' is registered already",
                     name);
    for (int i = 0; i < LDT_OP_COUNT; i++)
        if (strcmp(ldt__op_name(ctx, i), name) == 0)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "custom_op_register: '%s' is a built-in op", name);
    ops = realloc(ctx->custom, (size_t)(ctx->ncustom + 1) * sizeof *ops);
    if (!ops) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "custom_op_register: out of memory");
    ctx->custom = ops;
    ops[ctx->ncustom].name = malloc(strlen(name) + 1);
    if (!ops[ctx->ncustom].name) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "custom_op_register: out of memory");
    memcpy(ops[ctx->ncustom].name, name, strlen(name) + 1);
    ops[ctx->ncustom].nin = nin;
    ops[ctx->ncustom].shape_fn = shape_fn;
    ops[ctx->ncustom].cpu_fn = cpu_fn;
    ops[ctx->ncustom].user = user;
    ops[ctx->ncustom].strategy_fn = NULL; /* ldt_custom_op_set_strategy */
    ops[ctx->ncustom].strategy_user = NULL;
    *id = LDT_OP_COUNT + ctx->ncustom++;
    return LDT_OK;
}

ldt_tensor *ldt_custom(ldt_ctx *ctx, int id, ldt_tensor *const *inputs, int nin) {
    const ldt__custom_op *op;
    ldt_shape in_shapes[64], out_shape;
    ldt_dtype in_dtypes[64], out_dtype;
    char msg[512] = "";
    ldt_status st;
    if (!ctx) {
        ldt__error(LDT_ERR_INVALID_ARGUMENT, "custom: ctx must not be NULL");
        return NULL;
    }
    if (id < LDT_OP_COUNT || id >= LDT_OP_COUNT + ctx->ncustom)
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT,
                             "custom: op id %d is not a registered custom op (ids %d to %d)", id,
                             LDT_OP_COUNT, LDT_OP_COUNT + ctx->ncustom - 1);
    op = &ctx->custom[id - LDT_OP_COUNT];
    if (nin != op->nin || (nin > 0 && !inputs))
        return ldt__op_error(ctx, LDT_ERR_INVALID_ARGUMENT, "%s: %d inputs given, expected %d",
                             op->name, nin, op->nin);
    if (nin > 0 && !ldt__check_inputs(op->name, inputs, nin)) return ldt__trace_fail(ctx);
    for (int i = 0; i < nin; i++) {
        in_shapes[i] = (*inputs[i]->shape);
        in_dtypes[i] = (ldt_dtype)inputs[i]->dtype;
    }
    out_dtype = nin ? in_dtypes[0] : LDT_F32;
    out_shape = nin ? in_shapes[0] : (ldt_shape){0, {0}};
    st = op->shape_fn(nin, in_shapes, in_dtypes, op->user, &out_shape, &out_dtype, msg, sizeof msg);
    if (st != LDT_OK)
        return ldt__op_error(ctx, st, "%s: %s", op->name, msg[0] ? msg : "shape rule failed");
    return ldt__record(ctx, id, inputs, nin, &out_shape, out_dtype);
}

void ldt_trace_discard(ldt_ctx *ctx) {
    if (!ctx) return;
    ctx->rng_offset = ctx->trace_rng_base;
    ldt__trace_end(ctx);
    ctx->errmsg[0] = '\0';
}

/* ---- end of a trace ------------------------------------------------------------------------ */

void ldt__trace_end(ldt_ctx *ctx) {
    for (int64_t i = 0; i < ctx->nnodes; i++) {
        ldt_tensor *t = ctx->nodes[i];
        if (t->kind == LDT__NODE) {
            free(t->data);
            t->data = NULL;
        }
    }
    for (int64_t i = 0; i < ctx->nkeeps; i++) LDT__P(ctx->keeps[i])->source = NULL;
    ctx->nkeeps = 0;
    ctx->nnodes = 0;
    ctx->rc_nseg = 0;
    ctx->rc_open = 0;
    ldt__pp_free(ctx); /* the stage tags belong to the trace */
    if (++ctx->gen == 0) ctx->gen = 1; /* 0 is what an unused persistent tensor holds */
    ctx->arena = &ctx->arenas[ctx->gen & 1];
    ldt__arena_reset(ctx->arena);
    ctx->trace_rng_base = ctx->rng_offset;
    ctx->status = LDT_OK;
}
