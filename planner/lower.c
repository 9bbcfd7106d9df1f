/* Lowering: the chosen strategies become one rank's program. Leaves load the rank's region of
 * their data; each input edge whose placements differ gets one REDIST instruction (shared by
 * every consumer that wants the same placements); each node runs its strategy's lowering (by
 * default its kernel on local shards). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mesh.h"
#include "planner/plan_internal.h"

static int grow(void **v, int64_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 16;
    void *n;
    if (need <= *cap) return 1;
    while (c < need) c *= 2;
    if (!(n = realloc(*v, (size_t)c * elem))) return 0;
    *v = n;
    *cap = c;
    return 1;
}

int32_t ldt__lower_value(ldt__lower *L, const ldt_shape *shape_in, ldt_dtype dt, int32_t node) {
    ldt__program *p = L->p;
    int64_t cap = p->cap_vals;
    /* a copy first: callers may pass another value's shape, which the growth below moves */
    const ldt_shape sh = *shape_in, *shape = &sh;
    if (!grow((void **)&p->vals, &cap, (int64_t)p->nvals + 1, sizeof *p->vals)) return -1;
    p->cap_vals = (int32_t)cap;
    memset(&p->vals[p->nvals], 0, sizeof p->vals[0]);
    p->vals[p->nvals].shape = *shape;
    p->vals[p->nvals].dtype = (uint8_t)dt;
    p->vals[p->nvals].node = node;
    return p->nvals++;
}

static ldt__instr *new_instr(ldt__lower *L, int kind, int32_t node, int32_t out) {
    ldt__program *p = L->p;
    ldt__instr *x;
    if (!grow((void **)&p->ins, &p->cap_ins, p->nins + 1, sizeof *p->ins)) return NULL;
    x = &p->ins[p->nins++];
    memset(x, 0, sizeof *x);
    x->kind = (uint8_t)kind;
    x->node = node;
    x->out = out;
    x->region = -1;
    x->in = (int32_t)p->nops;
    return x;
}

static int add_operands(ldt__lower *L, int nin, const int32_t *in) {
    ldt__program *p = L->p;
    if (nin == 0) return 1;
    if (!grow((void **)&p->ops, &p->cap_ops, p->nops + nin, sizeof *p->ops)) return 0;
    memcpy(p->ops + p->nops, in, (size_t)nin * sizeof *in);
    p->nops += nin;
    return 1;
}

static int32_t push_region(ldt__program *p, const ldt_region *region, const ldt_shape *global);

ldt_status ldt__lower_region(ldt__lower *L, const ldt_region *region, const ldt_shape *global,
                             int32_t *out) {
    if ((*out = push_region(L->p, region, global)) < 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    return LDT_OK;
}

static int32_t push_region(ldt__program *p, const ldt_region *region, const ldt_shape *global) {
    int64_t cap = p->cap_regions;
    if (!grow((void **)&p->regions, &cap, (int64_t)p->nregions + 1, sizeof *p->regions)) return -1;
    p->cap_regions = (int32_t)cap;
    p->regions[p->nregions].region = *region;
    p->regions[p->nregions].global = *global;
    return p->nregions++;
}

ldt_status ldt__lower_kernel(ldt__lower *L, int32_t node, int op, const ldt__attrs *attrs,
                             int nin, const int32_t *in, int32_t out, const ldt_region *region,
                             const ldt_shape *global) {
    ldt__program *p = L->p;
    ldt__instr *x;
    ldt__attrs *a;
    if (!grow((void **)&p->attrs, &p->cap_attrs, p->nattrs + 1, sizeof *p->attrs) ||
        !(a = calloc(1, sizeof *a)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    p->attrs[p->nattrs++] = a;
    if (attrs) *a = *attrs;
    if (!(x = new_instr(L, LDT__I_KERNEL, node, out)) || !add_operands(L, nin, in))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    x->op = op;
    x->nin = nin;
    x->attrs = a;
    if (region && (x->region = push_region(p, region, global)) < 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    return LDT_OK;
}

ldt_status ldt__lower_all_reduce(ldt__lower *L, int32_t node, int32_t val, ldt_reduce_op op,
                                 int ndims, const int *dims) {
    ldt__instr *x;
    if (ndims < 1 || ndims > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INTERNAL, "lower: all_reduce over %d mesh dims", ndims);
    if (!(x = new_instr(L, LDT__I_ALL_REDUCE, node, val)) || !add_operands(L, 1, &val))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    x->nin = 1;
    x->reduce = (uint8_t)op;
    x->ndims = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) x->dims[i] = (uint8_t)dims[i];
    return LDT_OK;
}

ldt_status ldt__lower_fill(ldt__lower *L, int32_t node, int32_t val, double v) {
    ldt__instr *x = new_instr(L, LDT__I_FILL, node, val);
    if (!x) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    x->fill = v;
    return LDT_OK;
}

int ldt__shard_mesh_dims(const ldt_placement *pl, int nd, int d, int *out) {
    int n = 0;
    for (int i = 0; i < nd; i++)
        if (ldt__pl_is_shard(&pl[i]) && pl[i].dim == d) out[n++] = i;
    return n;
}

/* ---------------------------------------------------------------------------------------
 * One rank's program.
 */
static ldt_status local_region(const ldt_plan *plan, const ldt_tensor *t, int pl, int rank,
                               ldt_region *r) {
    ldt_spec spec;
    int64_t coord[LDT_MAX_DIMS];
    LDT_CHECK(ldt_spec_init(&spec, plan->mesh, t->shape, ldt__plist(plan, pl), plan->nd,
                            (ldt_dtype)t->dtype));
    LDT_CHECK(ldt_mesh_coord(plan->mesh, rank, coord));
    ldt__layout_coord_checked(&spec, coord, r); /* the spec just checked, the rank's coords */
    return LDT_OK;
}

/* 1 when a leaf held as Partial(sum) must be zero on this rank (off coordinate 0 of a
 * Partial(sum) mesh dim), as ldt_distribute places it. */
static int partial_zero(const ldt_plan *plan, const ldt_placement *pl, int rank) {
    int64_t coord[LDT_MAX_DIMS];
    if (ldt_mesh_coord(plan->mesh, rank, coord) != LDT_OK) return 0;
    for (int d = 0; d < plan->nd; d++)
        if (pl[d].kind == LDT_PLACE_PARTIAL && pl[d].op == LDT_REDUCE_SUM && coord[d] != 0) return 1;
    return 0;
}

/* Moves of one producer already lowered: (target placement list, value). */
typedef struct moved {
    int64_t next; /* the producer's previous move, or -1 */
    int pl;
    int32_t val;
} moved;

static ldt_status input_value(ldt_plan *plan, ldt__lower *L, moved **mv, int64_t *nmv,
                              int64_t *cap, int64_t *head, int64_t v, int k, int32_t *out) {
    const ldt_tensor *u = LDT__IN(plan->ctx->nodes[v])[k];
    int from = ldt__chosen_out(plan, u->id), to = ldt__chosen_in(plan, v, k);
    ldt__redist_memo *e;
    ldt_region r;
    ldt__instr *x;
    int32_t src = L->p->node_val[u->id];
    if (from == to) {
        *out = src;
        return LDT_OK;
    }
    for (int64_t i = head[u->id]; i >= 0; i = (*mv)[i].next) /* u's earlier moves */
        if ((*mv)[i].pl == to) {
            *out = (*mv)[i].val;
            return LDT_OK;
        }
    e = ldt__plan_redist(plan, plan->node_class[u->id], from, to, 1);
    if (!e || e->failed || !e->plan)
        LDT_FAIL(LDT_ERR_INTERNAL, "lower: no redistribution plan for tensor %%%lld", (long long)u->id);
    LDT_CHECK(local_region(plan, u, to, L->p->rank, &r));
    if ((*out = ldt__lower_value(L, &r.local_shape, (ldt_dtype)u->dtype, -1)) < 0 ||
        !(x = new_instr(L, LDT__I_REDIST, (int32_t)v, *out)) || !add_operands(L, 1, &src))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    x->nin = 1;
    x->plan = e->plan;
    if (!grow((void **)mv, cap, *nmv + 1, sizeof **mv)) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    (*mv)[*nmv] = (moved){head[u->id], to, *out};
    head[u->id] = (*nmv)++;
    return LDT_OK;
}

static ldt_status lower_node(ldt_plan *plan, ldt__lower *L, int64_t v, moved **mv, int64_t *nmv,
                             int64_t *cap, int64_t *head) {
    const ldt_tensor *t = plan->ctx->nodes[v];
    const ldt__sset *ss = plan->node_ss[v];
    const uint16_t *pl = LDT__SSET_PL(ss, plan->choice[v]);
    ldt__lnode n;
    ldt_region r;
    const ldt__op_strategy *row;
    memset(&n, 0, sizeof n);
    LDT_CHECK(local_region(plan, t, pl[0], L->p->rank, &r));
    if (t->kind == LDT__PERSISTENT) {
        ldt__instr *x;
        int32_t val = ldt__lower_value(L, &r.local_shape, (ldt_dtype)t->dtype, (int32_t)v);
        if (val < 0 || !(x = new_instr(L, LDT__I_LOAD, (int32_t)v, val)))
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
        x->src = t;
        if ((x->region = push_region(L->p, &r, t->shape)) < 0)
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
        x->reduce = (uint8_t)partial_zero(plan, ldt__plist(plan, pl[0]), L->p->rank);
        L->p->node_val[v] = val;
        return LDT_OK;
    }
    n.t = t;
    n.mesh = plan->mesh;
    n.rank = L->p->rank;
    n.out = ldt__plist(plan, pl[0]);
    n.out_region = &r;
    for (int k = 0; k < t->nin; k++) {
        n.in[k] = ldt__plist(plan, pl[1 + k]);
        LDT_CHECK(input_value(plan, L, mv, nmv, cap, head, v, k, &n.in_val[k]));
    }
    if ((t->op == LDT_OP_ALIAS || t->op == LDT_OP_REDISTRIBUTE) && pl[0] == pl[1]) {
        L->p->node_val[v] = n.in_val[0]; /* the same value: no copy, no instruction */
        return LDT_OK;
    }
    if ((n.out_val = ldt__lower_value(L, &r.local_shape, (ldt_dtype)t->dtype, (int32_t)v)) < 0)
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    L->p->node_val[v] = n.out_val;
    row = t->op < LDT_OP_COUNT ? ldt__op_strategy_of(t->op) : NULL;
    if (row && row->lower) return row->lower(L, &n);
    return ldt__lower_kernel(L, (int32_t)v, t->op, t->attrs, t->nin, n.in_val, n.out_val,
                             row && row->needs_region ? &r : NULL, t->shape);
}

ldt_status ldt__lower_program(ldt_plan *plan, int rank, ldt__program **out) {
    ldt__program *p = calloc(1, sizeof *p);
    ldt__lower L;
    moved *mv = NULL;
    int64_t nmv = 0, cap = 0, *head = NULL;
    ldt_status st = LDT_OK;
    if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    p->rank = rank;
    p->nnodes = plan->nnodes;
    p->node_val = malloc((size_t)(plan->nnodes ? plan->nnodes : 1) * sizeof *p->node_val);
    head = malloc((size_t)(plan->nnodes ? plan->nnodes : 1) * sizeof *head);
    if (!p->node_val || !head) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "lower: out of memory");
    for (int64_t v = 0; v < plan->nnodes; v++) head[v] = -1;
    L.p = p;
    L.mesh = plan->mesh;
    for (int64_t v = 0; v < plan->nnodes; v++) {
        st = lower_node(plan, &L, v, &mv, &nmv, &cap, head);
        if (st != LDT_OK) {
            char d[256];
            ldt__describe(plan->ctx->nodes[v], d, sizeof d);
            ldt__error_prefix(st, "lower rank %d: node %%%lld %s %s", rank, (long long)v,
                              ldt__op_name(plan->ctx, plan->ctx->nodes[v]->op), d);
            goto fail;
        }
    }
    *out = p;
    p = NULL;
fail:
    free(mv);
    free(head);
    if (p) {
        ldt__program_free(p);
        free(p);
    }
    return st;
}

const ldt__program *ldt__plan_program(ldt_plan *plan, int rank, ldt_status *st) {
    const ldt_mesh *m = plan->mesh;
    int max_rank = 0;
    for (int i = 0; i < ldt_mesh_nranks(m); i++)
        if (ldt_mesh_rank_at(m, i) > max_rank) max_rank = ldt_mesh_rank_at(m, i);
    if (!plan->programs) {
        plan->programs = calloc((size_t)max_rank + 1, sizeof *plan->programs);
        if (!plan->programs) {
            *st = ldt__error(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            return NULL;
        }
        plan->nprograms = max_rank + 1;
    }
    if (rank < 0 || rank >= plan->nprograms) {
        *st = ldt__error(LDT_ERR_INVALID_ARGUMENT, "plan: rank %d is not on the mesh (ranks 0..%d)",
                         rank, plan->nprograms - 1);
        return NULL;
    }
    if (!plan->programs[rank]) {
        *st = ldt__lower_program(plan, rank, &plan->programs[rank]);
        if (*st != LDT_OK) return NULL;
    }
    if (!plan->programs[rank]) { /* lowered by two threads at once: the table was replaced */
        *st = ldt__error(LDT_ERR_INVALID_USAGE, "plan: rank %d's program vanished: programs were "
                         "lowered by several threads at once; lower them before the ranks start", rank);
        return NULL;
    }
    *st = LDT_OK;
    return plan->programs[rank];
}

ldt_status ldt__plan_take_programs(ldt_plan *plan, ldt__program ***progs, int *nprogs,
                                   ldt_redist_plan ***rplans, int64_t *nrplans) {
    ldt_status st;
    int64_t n = 0;
    for (int i = 0; i < ldt_mesh_nranks(plan->mesh); i++)
        if (!ldt__plan_program(plan, ldt_mesh_rank_at(plan->mesh, i), &st)) return st;
    for (int64_t i = 0; i < plan->memo_cap; i++) n += plan->memo[i].plan != NULL;
    *rplans = malloc((size_t)(n ? n : 1) * sizeof **rplans);
    if (!*rplans) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    *nrplans = 0;
    for (int64_t i = 0; i < plan->memo_cap; i++)
        if (plan->memo[i].plan) {
            (*rplans)[(*nrplans)++] = plan->memo[i].plan;
            plan->memo[i].plan = NULL;
        }
    *progs = plan->programs;
    *nprogs = plan->nprograms;
    plan->programs = NULL;
    plan->nprograms = 0;
    return LDT_OK;
}
