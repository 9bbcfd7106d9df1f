/* Strategies of the view family: a shard follows the dim it moves to (permute, select, cat,
 * expand, slice off its dim, reshape within a dim group where every rank's elements line up),
 * Partial(sum) passes through data movement, and an InterleavedShard block sliced whole
 * becomes a plain shard (Megatron's fused QKV split). */
#include <stdlib.h>

#include "core/mesh.h"
#include "planner/program.h"
#include "planner/redistribute.h"
#include "planner/strategy.h"

/* k interleaved blocks fit a dim of n (non-empty blocks: the slice rule divides by n / k). */
static int ik_ok(int64_t n, int64_t k) { return k > 1 && n > 0 && n % k == 0; }

/* Option: input 0 dim j held as Shard moves to output dim d (and InterleavedShard for the
 * graph's block counts when the dim keeps its size: the runs then stay the same). */
static void follow(ldt__opts1 *o, int j, int d) {
    int64_t n = LDT__SIN(o, 0)->dims[j];
    ldt__opt_add(o, ldt_shard(d), (ldt_placement[]){ldt_shard(j)});
    if (n != LDT__SOUT(o)->dims[d]) return;
    for (int i = 0; i < o->niks; i++)
        if (ik_ok(n, o->iks[i]))
            ldt__opt_add(o, ldt_interleaved_shard(d, o->iks[i]),
                         (ldt_placement[]){ldt_interleaved_shard(j, o->iks[i])});
}

/* Data movement is linear: a pending sum stays pending (floats only, as elsewhere). */
static void partial_through(ldt__opts1 *o) {
    if (ldt__s_all_float(o->t)) ldt__opt_all(o, ldt_partial(LDT_REDUCE_SUM));
}

/* Both sides' specs of a node: input 0 and the output. */
static int specs_of(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                    const ldt_placement *in, ldt_spec *si, ldt_spec *so) {
    const ldt_tensor *x = LDT__IN(t)[0];
    int nd = ldt_mesh_ndim(mesh);
    return ldt_spec_init(si, mesh, x->shape, in, nd, (ldt_dtype)x->dtype) == LDT_OK &&
           ldt_spec_init(so, mesh, t->shape, out, nd, (ldt_dtype)t->dtype) == LDT_OK;
}

typedef int (*region_cmp)(const ldt_region *in, const ldt_region *out, const ldt_tensor *t);

/* 1 when cmp holds for the input and output regions at every mesh coordinate. Mesh dims that
 * shard neither side stay at 0, since they change no region. A sharding mesh dim is cut, as
 * the rank classes are, where a chunk length of either side changes (ldt__chunk_lengths):
 * inside an interval every run's length is the same and its start affine in the coordinates,
 * so what cmp compares (starts and lengths; the loops of same_elements) differs by an affine
 * function, which is 0 everywhere in a box when it is 0 at the box's corners. Only each
 * interval's first and last coordinate are checked: a 4096-rank mesh checks a few dozen
 * coordinates, not 4096. */
#define AGREE_LENGTHS 512

/* The coordinates of mesh dim i to check (above) into pts; returns their count. */
static int agree_points(int64_t k, const int64_t *lens, int nlens, int64_t *pts) {
    int64_t *cut = pts + 2 * (2 * nlens + 2); /* scratch after the points */
    int ncut = ldt__chunk_cuts(k, lens, nlens, cut), n = 0;
    for (int j = 0; j + 1 < ncut; j++) {
        if (cut[j + 1] <= cut[j]) continue;
        pts[n++] = cut[j];
        if (cut[j + 1] - 1 > cut[j]) pts[n++] = cut[j + 1] - 1;
    }
    return n;
}

static int regions_agree(const ldt_spec *si, const ldt_spec *so, region_cmp cmp,
                         const ldt_tensor *t) {
    int nd = si->nplace, npts[LDT_MAX_DIMS], nlens[LDT_MAX_DIMS] = {0}, idx[LDT_MAX_DIMS] = {0};
    int ok = 1, cut;
    int64_t coord[LDT_MAX_DIMS], *lens, *pts[LDT_MAX_DIMS] = {0};
    lens = malloc((size_t)LDT_MAX_DIMS * AGREE_LENGTHS * sizeof *lens);
    if (!lens) return 0;
    cut = ldt__chunk_lengths(si->mesh, &si->shape, si->placements, lens, nlens, AGREE_LENGTHS) &&
          ldt__chunk_lengths(so->mesh, &so->shape, so->placements, lens, nlens, AGREE_LENGTHS);
    for (int i = 0; i < nd && ok; i++) {
        int64_t k = ldt_mesh_dim_size(si->mesh, i);
        int sharded = ldt__pl_is_shard(&si->placements[i]) || ldt__pl_is_shard(&so->placements[i]);
        /* points, then room for the cuts agree_points sorts */
        int64_t room = cut ? 2 * (2 * (int64_t)nlens[i] + 2) + 2 * (int64_t)nlens[i] + 2 : k;
        if (!(pts[i] = malloc((size_t)(room > 0 ? room : 1) * sizeof *pts[i]))) {
            ok = 0;
            break;
        }
        if (!sharded) {
            pts[i][0] = 0;
            npts[i] = 1;
        } else if (cut) {
            npts[i] = agree_points(k, lens + (size_t)i * AGREE_LENGTHS, nlens[i], pts[i]);
        } else { /* too many lengths to cut by: every coordinate */
            for (int64_t c = 0; c < k; c++) pts[i][c] = c;
            npts[i] = (int)k;
        }
    }
    while (ok) {
        ldt_region a, b;
        for (int i = 0; i < nd; i++) coord[i] = pts[i][idx[i]];
        /* both specs made by ldt_spec_init, the coordinates on the mesh */
        ldt__layout_coord_checked(si, coord, &a);
        ldt__layout_coord_checked(so, coord, &b);
        if (!cmp(&a, &b, t)) ok = 0;
        int i = nd - 1;
        while (i >= 0 && ++idx[i] == npts[i]) idx[i--] = 0;
        if (i < 0) break;
    }
    for (int i = 0; i < nd; i++) free(pts[i]);
    free(lens);
    return ok;
}

/* ---------------------------------------------------------------------------------------
 * alias, redistribute, permute, select, expand, cat: dims move, their runs do not change.
 */

/* alias and redistribute are copies: everything follows, the node's pin included (the
 * planner forces redistribute's output to its pin and moves the input to match). */
static void so_identity(ldt__opts1 *o) {
    const ldt_tensor *t = o->t;
    for (int d = 0; d < t->shape->ndim; d++) follow(o, d, d);
    partial_through(o);
    if (t->pin)
        for (int i = 0; i < ldt_mesh_ndim(t->ctx->mesh); i++) ldt__opt_all(o, t->pin[i]);
}

/* attrs i[d]: the input dim that output dim d takes. */
static void so_permute(ldt__opts1 *o) {
    for (int d = 0; d < LDT__SOUT(o)->ndim; d++) follow(o, (int)o->t->attrs->i[d], d);
    partial_through(o);
}

/* attrs {dim, index}: the dim is removed, later dims move down by one. */
static void so_select(ldt__opts1 *o) {
    int dim = (int)o->t->attrs->i[0];
    for (int j = 0; j < LDT__SIN(o, 0)->ndim; j++)
        if (j != dim) follow(o, j, j - (j > dim));
    partial_through(o);
}

/* Output dims that are broadcast (new leading dims, or size 1 expanded) may be sharded with
 * the input Replicate: each rank expands to its own local shape. Other dims follow. */
static void so_expand(ldt__opts1 *o) {
    const ldt_shape *is = LDT__SIN(o, 0), *os = LDT__SOUT(o);
    ldt_placement R = ldt_replicate();
    for (int d = 0; d < os->ndim; d++) {
        int j = d - (os->ndim - is->ndim);
        if (j >= 0 && is->dims[j] == os->dims[d]) {
            follow(o, j, d);
            continue;
        }
        ldt__opt_add(o, ldt_shard(d), &R);
        for (int i = 0; i < o->niks; i++)
            if (ik_ok(os->dims[d], o->iks[i]))
                ldt__opt_add(o, ldt_interleaved_shard(d, o->iks[i]), &R);
    }
    partial_through(o);
}

/* attrs i[0] = dim: every input sharded alike on a dim other than the cat dim. */
static void so_cat(ldt__opts1 *o) {
    const ldt_shape *os = LDT__SOUT(o);
    int dim = (int)o->t->attrs->i[0];
    ldt_placement in[LDT__SMAX_IN];
    if (o->nin > LDT__SMAX_IN) return;
    for (int d = 0; d < os->ndim; d++) {
        if (d == dim) continue;
        for (int k = 0; k < o->nin; k++) in[k] = ldt_shard(d);
        ldt__opt_add(o, ldt_shard(d), in);
        for (int i = 0; i < o->niks; i++) {
            if (!ik_ok(os->dims[d], o->iks[i])) continue;
            for (int k = 0; k < o->nin; k++) in[k] = ldt_interleaved_shard(d, o->iks[i]);
            ldt__opt_add(o, ldt_interleaved_shard(d, o->iks[i]), in);
        }
    }
    /* k equal blocks, each split alike, are the blocks of InterleavedShard(dim, k): the
     * inverse of the slice rule's IS -> S (a fused QKV gradient from its q, k, v parts) */
    for (int i = 0; i < o->niks; i++) {
        int same = o->iks[i] == o->nin && ik_ok(os->dims[dim], o->nin);
        for (int k = 0; k < o->nin && same; k++) same = LDT__SIN(o, k)->dims[dim] == os->dims[dim] / o->nin;
        if (!same) continue;
        for (int k = 0; k < o->nin; k++) in[k] = ldt_shard(dim);
        ldt__opt_add(o, ldt_interleaved_shard(dim, o->nin), in);
    }
    partial_through(o);
}

/* ---------------------------------------------------------------------------------------
 * slice, attrs {dim, start, end, step}. Other dims follow; a whole slice is a copy. A slice of
 * exactly block b of InterleavedShard(dim, k) is Shard(dim): each rank's run b of the block
 * is its torch.chunk of the block ([3H] IS0:3 -> q = x[0:H] S0). The kernel then needs local
 * bounds, so such strategies get their own lowering.
 */
static int slice_whole(const ldt_tensor *t) {
    const int64_t *a = t->attrs->i;
    return a[1] == 0 && a[2] == LDT__IN(t)[0]->shape->dims[a[0]] && a[3] == 1;
}

static void so_slice(ldt__opts1 *o) {
    const int64_t *a = o->t->attrs->i;
    int dim = (int)a[0];
    int64_t n = LDT__SIN(o, 0)->dims[dim];
    for (int j = 0; j < LDT__SIN(o, 0)->ndim; j++)
        if (j != dim || slice_whole(o->t)) follow(o, j, j);
    for (int i = 0; i < o->niks && a[3] == 1 && !slice_whole(o->t); i++) {
        int64_t k = o->iks[i], bs = ik_ok(n, k) ? n / k : 1;
        if (ik_ok(n, k) && a[1] % bs == 0 && a[2] - a[1] == bs)
            ldt__opt_add(o, ldt_shard(dim), (ldt_placement[]){ldt_interleaved_shard(dim, k)});
    }
    partial_through(o);
}

/* The mesh dim whose placement in pl (nd entries) shards tensor dim d, or -1. */
static int sharding_mesh_dim(const ldt_placement *pl, int nd, int d) {
    int dims[LDT_MAX_DIMS];
    return ldt__shard_mesh_dims(pl, nd, d, dims) ? dims[0] : -1;
}

/* The output's chunk of the block is the input's run of it, on the slice dim. */
static int same_run(const ldt_region *in, const ldt_region *out, const ldt_tensor *t) {
    int dim = (int)t->attrs->i[0];
    return in->runs[dim].start == out->runs[dim].start && in->runs[dim].len == out->runs[dim].len;
}

/* The IS -> S case: every rank's run of the block must be its chunk of the output (true for
 * torch.chunk on both sides; checked, not assumed, in case the layout rule changes). */
static int valid_slice(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                       const ldt_placement *const *in) {
    int i = sharding_mesh_dim(in[0], ldt_mesh_ndim(mesh), (int)t->attrs->i[0]);
    ldt_spec si, so;
    if (i < 0 || in[0][i].kind != LDT_PLACE_INTERLEAVED_SHARD || out[i].kind != LDT_PLACE_SHARD)
        return 1;
    return specs_of(t, mesh, out, in[0], &si, &so) && regions_agree(&si, &so, same_run, t);
}

/* The S -> IS case: every rank's chunk of each block must be its run of that block in the
 * output, as the local cat lays them (the blocks are of one shape, so input 0 speaks for all). */
static int valid_cat(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                     const ldt_placement *const *in) {
    int dim = (int)t->attrs->i[0], i = sharding_mesh_dim(out, ldt_mesh_ndim(mesh), dim);
    ldt_spec si, so;
    if (i < 0 || out[i].kind != LDT_PLACE_INTERLEAVED_SHARD) return 1;
    return specs_of(t, mesh, out, in[0], &si, &so) && regions_agree(&si, &so, same_run, t);
}

/* Where the slice dim is sharded the node's global bounds do not fit the local buffer:
 * whole slices take the whole local dim, the IS -> S case this rank's run of block b. */
static ldt_status lower_slice(ldt__lower *L, const ldt__lnode *n) {
    const ldt_tensor *t = n->t;
    int nd = ldt_mesh_ndim(n->mesh), dim = (int)t->attrs->i[0];
    int i = sharding_mesh_dim(n->in[0], nd, dim);
    ldt__attrs a = *t->attrs;
    int64_t local = L->p->vals[n->in_val[0]].shape.dims[dim];
    if (i < 0)
        return ldt__lower_kernel(L, t->id, t->op, t->attrs, 1, n->in_val, n->out_val, NULL, NULL);
    a.i[1] = 0;
    a.i[2] = local;
    a.i[3] = 1;
    if (n->in[0][i].kind == LDT_PLACE_INTERLEAVED_SHARD && n->out[i].kind == LDT_PLACE_SHARD) {
        int64_t k = n->in[0][i].blocks, len = local / k;
        int64_t b = t->attrs->i[1] / (LDT__IN(t)[0]->shape->dims[dim] / k);
        a.i[1] = b * len;
        a.i[2] = (b + 1) * len;
    }
    return ldt__lower_kernel(L, t->id, t->op, &a, 1, n->in_val, n->out_val, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------
 * reshape. Input and output dims fall into groups of equal products ([B,S,H] -> [B*S,A,D]:
 * {B,S}->{B*S}, {H}->{A,D}); a shard can only move within its group. The options offer every
 * pair of a group's dims (nested shards can make inner dims line up too) and `valid` keeps a
 * combination only where each rank's local buffer holds the same global elements in the same
 * order on both sides, since the kernel is a plain copy.
 */

/* Group ids of the dims of is and os (-1: a trailing size-1 dim outside every group);
 * returns 0 when the shapes hold no elements (no groups then). */
static int dim_groups(const ldt_shape *is, const ldt_shape *os, int *gi, int *go) {
    int i = 0, j = 0, g = 0;
    int64_t n;
    if (ldt_shape_numel(is, &n) != LDT_OK || n == 0) return 0;
    for (int d = 0; d < is->ndim; d++) gi[d] = -1;
    for (int d = 0; d < os->ndim; d++) go[d] = -1;
    for (; i < is->ndim && j < os->ndim; g++) {
        int64_t pi = is->dims[i], po = os->dims[j];
        gi[i++] = g;
        go[j++] = g;
        while (pi != po) {
            if (pi < po && i < is->ndim) {
                pi *= is->dims[i];
                gi[i++] = g;
            } else if (po < pi && j < os->ndim) {
                po *= os->dims[j];
                go[j++] = g;
            } else {
                break;
            }
        }
    }
    return 1;
}

static void so_reshape(ldt__opts1 *o) {
    const ldt_shape *is = LDT__SIN(o, 0), *os = LDT__SOUT(o);
    int gi[LDT_MAX_DIMS], go[LDT_MAX_DIMS];
    if (dim_groups(is, os, gi, go))
        for (int j = 0; j < is->ndim; j++)
            for (int d = 0; d < os->ndim; d++)
                if (gi[j] >= 0 && gi[j] == go[d] && is->dims[j] > 1 && os->dims[d] > 1)
                    follow(o, j, d);
    partial_through(o);
}

/* The global flat indices a region holds, in local order, as nested loops (outer first):
 * base + sum over loops of index * stride. Loops of count 1 are dropped and a loop that
 * continues the one inside it is merged into it, which makes the form unique: two regions
 * hold the same elements in the same order iff their forms are equal. */
typedef struct loops {
    int n;
    int64_t base, count[2 * LDT_MAX_DIMS], stride[2 * LDT_MAX_DIMS];
} loops;

static void loops_push(loops *f, int64_t count, int64_t stride) {
    if (count == 1) return;
    if (f->n > 0 && f->stride[f->n - 1] == count * stride) {
        f->count[f->n - 1] *= count;
        f->stride[f->n - 1] = stride;
        return;
    }
    f->count[f->n] = count;
    f->stride[f->n++] = stride;
}

static void loops_of(const ldt_region *r, const ldt_shape *g, loops *f) {
    int64_t st[LDT_MAX_DIMS], acc = 1;
    for (int d = g->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= g->dims[d];
    }
    f->n = 0;
    f->base = 0;
    for (int d = 0; d < g->ndim; d++) {
        const ldt_dim_runs *u = &r->runs[d];
        f->base += u->start * st[d];
        loops_push(f, u->blocks, u->block_stride * st[d]);
        loops_push(f, u->len, st[d]);
    }
}

static int loops_equal(const loops *a, const loops *b) {
    if (a->n != b->n || a->base != b->base) return 0;
    for (int i = 0; i < a->n; i++)
        if (a->count[i] != b->count[i] || a->stride[i] != b->stride[i]) return 0;
    return 1;
}

/* The kernel is a plain copy: both buffers must hold the same elements in the same order. */
static int same_elements(const ldt_region *in, const ldt_region *out, const ldt_tensor *t) {
    loops a, b;
    if (in->numel != out->numel) return 0;
    if (in->numel == 0) return 1;
    loops_of(in, LDT__IN(t)[0]->shape, &a);
    loops_of(out, t->shape, &b);
    return loops_equal(&a, &b);
}

static int valid_reshape(const ldt_tensor *t, const ldt_mesh *mesh, const ldt_placement *out,
                         const ldt_placement *const *in) {
    int any = 0;
    ldt_spec si, so;
    for (int i = 0; i < ldt_mesh_ndim(mesh); i++)
        any |= ldt__pl_is_shard(&out[i]) || ldt__pl_is_shard(&in[0][i]);
    if (!any) return 1; /* Replicate and Partial: whole buffers */
    return specs_of(t, mesh, out, in[0], &si, &so) && regions_agree(&si, &so, same_elements, t);
}

void ldt__strategies_view(ldt__op_strategy *rows) {
    rows[LDT_OP_RESHAPE].options = so_reshape;
    rows[LDT_OP_RESHAPE].valid = valid_reshape;
    rows[LDT_OP_PERMUTE].options = so_permute;
    rows[LDT_OP_SLICE].options = so_slice;
    rows[LDT_OP_SLICE].valid = valid_slice;
    rows[LDT_OP_SLICE].lower = lower_slice;
    rows[LDT_OP_SELECT].options = so_select;
    rows[LDT_OP_CAT].options = so_cat;
    rows[LDT_OP_CAT].valid = valid_cat;
    rows[LDT_OP_EXPAND].options = so_expand;
    rows[LDT_OP_ALIAS].options = so_identity;
    rows[LDT_OP_REDISTRIBUTE].options = so_identity;
}
