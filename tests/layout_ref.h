/* An independent reference for the layout rule, by brute force: each element of the global
 * tensor is assigned to its owners by simulating torch.chunk mesh dim by mesh dim. */
#ifndef LDT_TESTS_LAYOUT_REF_H
#define LDT_TESTS_LAYOUT_REF_H

#include <stdint.h>

#include "ldt/core.h"
#include "tests/test_util.h"

/* Whether the rank at mesh coordinate `coord` holds global element `idx` (a full index). */
static inline int ref_owns(const ldt_spec *spec, const int64_t *coord, const int64_t *idx) {
    int64_t lo[LDT_MAX_DIMS], len[LDT_MAX_DIMS];
    for (int d = 0; d < spec->shape.ndim; d++) {
        lo[d] = 0;
        len[d] = spec->shape.dims[d];
    }
    for (int i = 0; i < spec->nplace; i++) {
        const ldt_placement *p = &spec->placements[i];
        int64_t m = ldt_mesh_dim_size(spec->mesh, i);
        if (p->kind == LDT_PLACE_SHARD) {
            /* chunk [lo, lo+len) into parts of ceil(len/m); which part holds idx? */
            int d = p->dim;
            int64_t c = (len[d] + m - 1) / m, owner;
            if (c == 0) return 0;
            owner = (idx[d] - lo[d]) / c;
            if (owner != coord[i]) return 0;
            lo[d] += owner * c;
            len[d] = len[d] - owner * c < c ? len[d] - owner * c : c;
        } else if (p->kind == LDT_PLACE_INTERLEAVED_SHARD) {
            int d = p->dim;
            int64_t bs = spec->shape.dims[d] / p->blocks, c = (bs + m - 1) / m;
            if (c == 0 || (idx[d] % bs) / c != coord[i]) return 0;
        }
    }
    return 1;
}

/* Fills out[] with the row-major global indices (flat) that coord owns, ascending; returns the
 * count. out must hold numel entries. */
static inline int64_t ref_owned(const ldt_spec *spec, const int64_t *coord, int64_t *out) {
    int64_t numel = 1, n = 0, idx[LDT_MAX_DIMS] = {0};
    for (int d = 0; d < spec->shape.ndim; d++) numel *= spec->shape.dims[d];
    for (int64_t flat = 0; flat < numel; flat++) {
        int64_t rem = flat;
        for (int d = spec->shape.ndim - 1; d >= 0; d--) {
            idx[d] = rem % spec->shape.dims[d];
            rem /= spec->shape.dims[d];
        }
        if (ref_owns(spec, coord, idx)) out[n++] = flat;
    }
    return n;
}

/* A random valid spec: mesh of 1-4 dims (at most 16 ranks), shape of 0-4 dims with sizes
 * 0-9 (often smaller than the rank count), random placements including nested sharding,
 * InterleavedShard (on a divisible dim not sharded elsewhere) and Partial. The mesh must be
 * destroyed by the caller. */
static inline void ref_random_spec(uint64_t *rng, int allow_partial, ldt_dtype dt,
                                   ldt_mesh **mesh, ldt_spec *spec) {
    int64_t mdims[LDT_MAX_DIMS];
    int mnd = (int)ldt_test_range(rng, 1, 4), total = 1;
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    for (int i = 0; i < mnd; i++) {
        int64_t max = 16 / total;
        mdims[i] = ldt_test_range(rng, 1, max < 5 ? max : 5);
        total *= (int)mdims[i];
    }
    ldt_mesh_create(mnd, mdims, NULL, NULL, LDT_DEVICE_CPU, mesh);
    shape.ndim = (int)ldt_test_range(rng, 0, 4);
    for (int d = 0; d < shape.ndim; d++) shape.dims[d] = ldt_test_range(rng, 0, 9);
    for (;;) {
        int ok = 1;
        for (int i = 0; i < mnd; i++) {
            int kind = (int)ldt_test_range(rng, 0, allow_partial ? 4 : 3);
            if (shape.ndim == 0 && kind != 4) kind = 1;
            if (kind == 0 || kind == 2) { /* Shard twice as likely */
                pl[i] = ldt_shard((int)ldt_test_range(rng, 0, shape.ndim - 1));
            } else if (kind == 1) {
                pl[i] = ldt_replicate();
            } else if (kind == 3) {
                int d = (int)ldt_test_range(rng, 0, shape.ndim - 1);
                int64_t k = ldt_test_range(rng, 1, 3);
                shape.dims[d] = (shape.dims[d] / k) * k;
                pl[i] = ldt_interleaved_shard(d, k);
            } else {
                pl[i] = ldt_partial((ldt_reduce_op)ldt_test_range(rng, 0, 3));
            }
        }
        /* an interleaved dim is sharded once; Partial ops must combine */
        for (int i = 0; i < mnd; i++)
            for (int j = 0; j < mnd; j++) {
                if (i == j) continue;
                if (pl[i].kind == LDT_PLACE_INTERLEAVED_SHARD &&
                    (pl[j].kind == LDT_PLACE_SHARD || pl[j].kind == LDT_PLACE_INTERLEAVED_SHARD) &&
                    pl[j].dim == pl[i].dim)
                    ok = 0;
                if (pl[i].kind == LDT_PLACE_PARTIAL && pl[j].kind == LDT_PLACE_PARTIAL)
                    pl[j].op = pl[i].op;
            }
        if (ok) break;
    }
    ldt_spec_init(spec, *mesh, &shape, pl, mnd, dt);
}

#endif
