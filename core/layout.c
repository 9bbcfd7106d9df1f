/* The layout function: which region of the global tensor a rank holds under a spec. */
#include "core/error.h"
#include "core/mesh.h"

void ldt_chunk(int64_t n, int64_t k, int64_t i, int64_t *start, int64_t *len) {
    /* torch.chunk: parts of ceil(n/k); trailing parts short or empty. */
    int64_t c = k > 0 ? n / k + (n % k != 0) : 0;
    int64_t s = c * i, e = s + c;
    if (s > n) s = n;
    if (e > n) e = n;
    *start = s;
    *len = e - s;
}

ldt_status ldt_layout_coord(const ldt_spec *spec, const int64_t *coord, ldt_region *out) {
    if (!spec || !coord || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "layout: arguments must not be NULL");
    LDT_CHECK(ldt_spec_check(spec));
    for (int i = 0; i < spec->nplace; i++)
        if (coord[i] < 0 || coord[i] >= spec->mesh->dims[i])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "layout: coordinate %lld on mesh dim %d is out of range [0, %lld)",
                     (long long)coord[i], i, (long long)spec->mesh->dims[i]);
    ldt__layout_coord_checked(spec, coord, out);
    return LDT_OK;
}

void ldt__layout_coord_checked(const ldt_spec *spec, const int64_t *coord, ldt_region *out) {
    ldt_region r;
    int ndim = spec->shape.ndim;
    r.ndim = ndim;
    r.local_shape.ndim = ndim;
    for (int d = 0; d < LDT_MAX_DIMS; d++) {
        int64_t n = d < ndim ? spec->shape.dims[d] : 0;
        r.runs[d].start = 0;
        r.runs[d].len = n;
        r.runs[d].blocks = 1;
        r.runs[d].block_stride = n;
    }
    /* Outer mesh dims first: each Shard splits what the earlier ones left. */
    for (int i = 0; i < spec->nplace; i++) {
        const ldt_placement *p = &spec->placements[i];
        ldt_dim_runs *run = &r.runs[p->dim];
        int64_t s, l;
        if (p->kind == LDT_PLACE_SHARD) {
            ldt_chunk(run->len, spec->mesh->dims[i], coord[i], &s, &l);
            run->start += s;
            run->len = l;
        } else if (p->kind == LDT_PLACE_INTERLEAVED_SHARD) {
            int64_t bs = spec->shape.dims[p->dim] / p->blocks;
            ldt_chunk(bs, spec->mesh->dims[i], coord[i], &s, &l);
            run->start = s;
            run->len = l;
            run->blocks = p->blocks;
            run->block_stride = bs;
        }
    }
    r.numel = 1;
    r.nslices = 1;
    for (int d = 0; d < ndim; d++) {
        r.local_shape.dims[d] = r.runs[d].len * r.runs[d].blocks;
        r.offset[d] = r.runs[d].start;
        r.numel *= r.local_shape.dims[d]; /* <= the global count: no overflow */
        r.nslices *= r.runs[d].blocks;
    }
    for (int d = ndim; d < LDT_MAX_DIMS; d++) {
        r.local_shape.dims[d] = 0;
        r.offset[d] = 0;
    }
    if (r.numel == 0) r.nslices = 0;
    *out = r;
}

ldt_status ldt_layout(const ldt_spec *spec, int rank, ldt_region *out) {
    int64_t coord[LDT_MAX_DIMS];
    if (!spec || !spec->mesh || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "layout: arguments must not be NULL");
    LDT_CHECK(ldt_mesh_coord(spec->mesh, rank, coord));
    LDT_CHECK(ldt_layout_coord(spec, coord, out));
    return LDT_OK;
}

ldt_status ldt_region_slice(const ldt_region *r, int64_t i, int64_t *offset, int64_t *shape) {
    if (!r || !offset || !shape)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "region slice: arguments must not be NULL");
    if (i < 0 || i >= r->nslices)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "region slice: index %lld out of range [0, %lld)",
                 (long long)i, (long long)r->nslices);
    for (int d = r->ndim - 1; d >= 0; d--) {
        int64_t j = i % r->runs[d].blocks;
        i /= r->runs[d].blocks;
        offset[d] = r->runs[d].start + j * r->runs[d].block_stride;
        shape[d] = r->runs[d].len;
    }
    return LDT_OK;
}
