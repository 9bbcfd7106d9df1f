/* Sharded tensor data (ldt_shards) and distribute / full_tensor / from_local / to_local. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "ldt/dlpack.h"
#include "ldt/exec.h"
#include "core/error.h"
#include "core/mesh.h"
#include "exec/reduce.h"
#include "exec/shards.h"

struct ldt_shards {
    ldt_spec spec;
    int nranks;      /* one buffer per mesh position */
    void **bufs;
    int64_t *nbytes;
    /* ldt_from_dlpack: the DLPack tensors whose memory the buffers are (NULL: ours, freed);
     * their deleters run when the storage goes */
    DLManagedTensorVersioned **ext;
    /* references on the storage: the owner's, and one per tensor ldt_to_dlpack exported */
    atomic_int refs;
};

void ldt__region_copy(const ldt_region *r, const ldt_shape *shape, size_t elem, void *full,
                      void *local, int to_local) {
    int nd = r->ndim;
    int64_t gstride[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0};
    char *f = full, *l = local;
    int64_t rows = 1, last_len, last_blocks;
    if (r->numel == 0) return;
    if (nd == 0) {
        if (to_local)
            memcpy(l, f, elem);
        else
            memcpy(f, l, elem);
        return;
    }
    gstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) gstride[d] = gstride[d + 1] * shape->dims[d + 1];
    for (int d = 0; d < nd - 1; d++) rows *= r->local_shape.dims[d];
    last_len = r->runs[nd - 1].len;
    last_blocks = r->runs[nd - 1].blocks;
    /* Each local row (all dims but the last) is `blocks` contiguous runs in the global. */
    for (int64_t row = 0; row < rows; row++) {
        int64_t g = 0;
        for (int d = 0; d < nd - 1; d++) {
            const ldt_dim_runs *run = &r->runs[d];
            g += ((idx[d] / run->len) * run->block_stride + run->start + idx[d] % run->len) *
                 gstride[d];
        }
        for (int64_t b = 0; b < last_blocks; b++) {
            int64_t gs = g + r->runs[nd - 1].start + b * r->runs[nd - 1].block_stride;
            size_t bytes = (size_t)last_len * elem;
            if (to_local)
                ldt__copy(l, f + (size_t)gs * elem, bytes);
            else
                ldt__copy(f + (size_t)gs * elem, l, bytes);
            l += bytes;
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
}

ldt_status ldt_shards_create(const ldt_spec *spec, ldt_shards **out) {
    ldt_status st = LDT_OK;
    ldt_shards *s = NULL;
    if (!spec || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "shards: arguments must not be NULL");
    *out = NULL;
    LDT_CHECK(ldt_spec_check(spec));
    if (spec->mesh->dev == LDT_DEVICE_META) {
        char buf[256];
        ldt_spec_format(spec, buf, sizeof buf);
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "shards: %s is on a meta mesh, which holds no data; use a cpu mesh", buf);
    }
    s = calloc(1, sizeof *s);
    if (!s) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "shards: out of memory");
    atomic_init(&s->refs, 1);
    s->spec = *spec;
    s->nranks = spec->mesh->nranks;
    s->bufs = calloc((size_t)s->nranks, sizeof *s->bufs);
    s->nbytes = calloc((size_t)s->nranks, sizeof *s->nbytes);
    if (!s->bufs || !s->nbytes) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "shards: out of memory");
    for (int i = 0; i < s->nranks; i++) {
        ldt_region r;
        LDT_CHECK_GOTO(ldt_layout(spec, spec->mesh->ranks[i], &r));
        s->nbytes[i] = r.numel * (int64_t)ldt_dtype_size(spec->dtype);
        /* one byte at least, so an empty shard still has a distinct, valid pointer */
        s->bufs[i] = calloc(1, (size_t)(s->nbytes[i] ? s->nbytes[i] : 1));
        if (!s->bufs[i])
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "shards: out of memory for %lld bytes on rank %d",
                          (long long)s->nbytes[i], spec->mesh->ranks[i]);
    }
    *out = s;
    return LDT_OK;
fail:
    ldt_shards_destroy(s);
    return st;
}

void ldt__shards_retain(ldt_shards *s) { atomic_fetch_add(&s->refs, 1); }

void ldt_shards_destroy(ldt_shards *s) {
    if (!s) return;
    if (atomic_fetch_sub(&s->refs, 1) != 1) return; /* an exported DLPack tensor holds it */
    if (s->bufs)
        for (int i = 0; i < s->nranks; i++) {
            DLManagedTensorVersioned *t = s->ext ? s->ext[i] : NULL;
            if (t && t->deleter) t->deleter(t);
            if (!t || s->nbytes[i] == 0) free(s->bufs[i]);
        }
    free(s->ext);
    free(s->bufs);
    free(s->nbytes);
    free(s);
}

ldt_status ldt__shards_adopt(ldt_shards *s, DLManagedTensorVersioned *const *ts,
                             void *const *data) {
    s->ext = calloc((size_t)s->nranks, sizeof *s->ext);
    if (!s->ext) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "from_dlpack: out of memory");
    for (int i = 0; i < s->nranks; i++) {
        s->ext[i] = ts[i];
        if (s->nbytes[i] == 0) continue; /* keeps its own byte: a distinct, valid pointer */
        free(s->bufs[i]);
        s->bufs[i] = data[i];
    }
    return LDT_OK;
}
const ldt_spec *ldt_shards_spec(const ldt_shards *s) { return s ? &s->spec : NULL; }

int ldt__shards_position(const ldt_shards *s, int rank) {
    const ldt_mesh *m = s->spec.mesh;
    return (rank >= 0 && rank <= m->max_rank) ? m->pos_of[rank] : -1;
}

void *ldt_shards_local(const ldt_shards *s, int rank, int64_t *nbytes) {
    int pos = s ? ldt__shards_position(s, rank) : -1;
    if (nbytes) *nbytes = pos >= 0 ? s->nbytes[pos] : 0;
    return pos >= 0 ? s->bufs[pos] : NULL;
}

ldt_status ldt_distribute(const void *full, const ldt_spec *spec, ldt_shards **out) {
    ldt_status st = LDT_OK;
    ldt_shards *s = NULL;
    if (!full || !spec || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "distribute: arguments must not be NULL");
    LDT_CHECK(ldt_shards_create(spec, &s));
    for (int i = 0; i < s->nranks; i++) {
        ldt_region r;
        int64_t coord[LDT_MAX_DIMS];
        int zero = 0;
        LDT_CHECK_GOTO(ldt_mesh_coord(spec->mesh, spec->mesh->ranks[i], coord));
        LDT_CHECK_GOTO(ldt_layout_coord(spec, coord, &r));
        /* Partial(sum): the value lives on coordinate 0, zeros elsewhere sum back to it. */
        for (int d = 0; d < spec->nplace; d++)
            if (spec->placements[d].kind == LDT_PLACE_PARTIAL &&
                spec->placements[d].op == LDT_REDUCE_SUM && coord[d] != 0)
                zero = 1;
        if (!zero)
            ldt__region_copy(&r, &spec->shape, ldt_dtype_size(spec->dtype), (void *)full,
                             s->bufs[i], 1);
    }
    *out = s;
    return LDT_OK;
fail:
    ldt_shards_destroy(s);
    return st;
}

ldt_status ldt_full_tensor(const ldt_shards *s, void *full) {
    ldt_status st = LDT_OK;
    const ldt_spec *spec;
    const ldt_mesh *m;
    int *pdims, np, nsrc;
    const void **srcs = NULL;
    void *tmp = NULL;
    ldt_reduce_op op;
    int has_avg;
    int64_t navg;
    ldt__partial_info pi;
    if (!s || !full) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "full_tensor: arguments must not be NULL");
    spec = &s->spec;
    m = spec->mesh;
    ldt__partial_info_of(spec, &pi);
    pdims = pi.pdims, np = pi.np, nsrc = pi.nsrc, op = pi.op, has_avg = pi.has_avg, navg = pi.navg;
    srcs = malloc((size_t)nsrc * sizeof *srcs);
    if (!srcs) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "full_tensor: out of memory");
    for (int i = 0; i < s->nranks; i++) {
        ldt_region r;
        int64_t coord[LDT_MAX_DIMS];
        int leader = 1;
        LDT_CHECK_GOTO(ldt_mesh_coord(m, m->ranks[i], coord));
        for (int d = 0; d < spec->nplace; d++)
            if (spec->placements[d].kind == LDT_PLACE_REPLICATE ||
                spec->placements[d].kind == LDT_PLACE_PARTIAL)
                leader &= coord[d] == 0;
        if (!leader) continue;
        LDT_CHECK_GOTO(ldt_layout_coord(spec, coord, &r));
        if (np == 0) {
            ldt__region_copy(&r, &spec->shape, ldt_dtype_size(spec->dtype), full, s->bufs[i], 0);
            continue;
        }
        /* Reduce the peers along the Partial dims, in coordinate order. */
        for (int k = 0; k < nsrc; k++) {
            int rem = k, rank;
            for (int j = np - 1; j >= 0; j--) {
                coord[pdims[j]] = rem % m->dims[pdims[j]];
                rem /= (int)m->dims[pdims[j]];
            }
            LDT_CHECK_GOTO(ldt_mesh_rank_of(m, coord, &rank));
            srcs[k] = s->bufs[ldt__shards_position(s, rank)];
        }
        free(tmp);
        tmp = malloc((size_t)(s->nbytes[i] ? s->nbytes[i] : 1));
        if (!tmp) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "full_tensor: out of memory");
        /* avg dims divide by their own extent only: (sum over S of avg over A) is the
         * sum over all, divided by |A|. */
        ldt__reduce_at(tmp, srcs, nsrc, 0, r.numel, spec->dtype,
                       has_avg ? LDT_REDUCE_AVG : op, navg);
        ldt__region_copy(&r, &spec->shape, ldt_dtype_size(spec->dtype), full, tmp, 0);
    }
fail:
    free(tmp);
    free(srcs);
    return st;
}

ldt_status ldt_from_local(const ldt_spec *spec, const void *const *locals, ldt_shards **out) {
    ldt_shards *s = NULL;
    if (!spec || !locals || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "from_local: arguments must not be NULL");
    LDT_CHECK(ldt_shards_create(spec, &s));
    for (int i = 0; i < s->nranks; i++) {
        if (!locals[i] && s->nbytes[i] > 0) {
            ldt_shards_destroy(s);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "from_local: local data of rank %d is NULL",
                     spec->mesh->ranks[i]);
        }
        if (s->nbytes[i]) ldt__copy(s->bufs[i], locals[i], (size_t)s->nbytes[i]);
    }
    *out = s;
    return LDT_OK;
}

ldt_status ldt_to_local(const ldt_shards *s, int rank, void *dst, int64_t nbytes) {
    int pos;
    if (!s || (!dst && nbytes > 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "to_local: arguments must not be NULL");
    pos = ldt__shards_position(s, rank);
    if (pos < 0) {
        char buf[256];
        ldt_mesh_format(s->spec.mesh, buf, sizeof buf);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "to_local: rank %d is not in mesh %s", rank, buf);
    }
    if (nbytes != s->nbytes[pos])
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "to_local: rank %d holds %lld bytes, the destination has %lld", rank,
                 (long long)s->nbytes[pos], (long long)nbytes);
    if (nbytes) ldt__copy(dst, s->bufs[pos], (size_t)nbytes);
    return LDT_OK;
}

void ldt__partial_info_of(const ldt_spec *spec, ldt__partial_info *out) {
    memset(out, 0, sizeof *out);
    out->nsrc = 1;
    out->navg = 1;
    out->op = LDT_REDUCE_SUM;
    for (int d = 0; d < spec->nplace; d++)
        if (spec->placements[d].kind == LDT_PLACE_PARTIAL) {
            out->pdims[out->np++] = d;
            out->nsrc *= (int)spec->mesh->dims[d];
            if (spec->placements[d].op == LDT_REDUCE_AVG) {
                out->has_avg = 1;
                out->navg *= spec->mesh->dims[d];
            } else {
                out->op = spec->placements[d].op;
            }
        }
}
