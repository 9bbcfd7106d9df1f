/* Other systems' sharding notations: ColossalAI/Alpa sharding sequences, PyTorch/XLA
 * partition specs and HLO sharding strings, to and from lazydt's per-mesh-dim placements. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"

/* Both foreign notations index by TENSOR dim; ours by MESH dim. The bridge is, per tensor dim,
 * the mesh dims that shard it in the order they split it. ldt_layout applies mesh dims in
 * increasing order, so that list is always increasing: an order it cannot hold is refused. */
typedef struct dim_axes {
    int n[LDT_MAX_DIMS];                 /* mesh dims sharding tensor dim d */
    int axis[LDT_MAX_DIMS][LDT_MAX_DIMS]; /* those mesh dims, increasing */
} dim_axes;

static ldt_status axes_of(const char *what, const ldt_placement *pl, int nplace, int tensor_ndim,
                          dim_axes *out) {
    if (!pl && nplace > 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: placements must not be NULL", what);
    if (nplace < 1 || nplace > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d placements, expected 1 to %d (one per mesh dim)",
                 what, nplace, LDT_MAX_DIMS);
    if (tensor_ndim < 0 || tensor_ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: tensor has %d dims, expected 0 to %d", what,
                 tensor_ndim, LDT_MAX_DIMS);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < nplace; i++) {
        char one[48];
        ldt_placement_format(&pl[i], one, sizeof one);
        switch (pl[i].kind) {
        case LDT_PLACE_REPLICATE: break;
        case LDT_PLACE_SHARD:
            if (pl[i].dim < 0 || pl[i].dim >= tensor_ndim)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "%s: mesh dim %d is %s but the tensor has %d dims (expected S0 to S%d)",
                         what, i, one, tensor_ndim, tensor_ndim - 1);
            out->axis[pl[i].dim][out->n[pl[i].dim]++] = i;
            break;
        case LDT_PLACE_PARTIAL:
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: mesh dim %d is %s (a pending %s reduction); the notation only says how "
                     "tensor dims are split, reduce first (P->R or P->S)",
                     what, i, one, ldt_reduce_op_name(pl[i].op));
        case LDT_PLACE_INTERLEAVED_SHARD:
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: mesh dim %d is %s (dim %d as %lld interleaved blocks); the notation "
                     "only has contiguous shards",
                     what, i, one, pl[i].dim, (long long)pl[i].blocks);
        default:
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: mesh dim %d has invalid placement kind %d",
                     what, i, (int)pl[i].kind);
        }
    }
    return LDT_OK;
}

/* The text is done: fail unless it fit in cap (the length it needs goes to *need). */
static ldt_status fits(const char *what, size_t at, size_t cap, size_t *need) {
    if (need) *need = at;
    if (at >= cap)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: buffer of %zu bytes, the text needs %zu", what,
                 cap, at + 1);
    return LDT_OK;
}

/* ---- parsing: one entry per tensor dim, each a list of mesh dims ------------------------- */

typedef struct parse_state {
    const char *what; /* "colossal '[S0,R]'" */
    int mesh_ndim;
    int used_by[LDT_MAX_DIMS]; /* tensor dim sharded by mesh dim i, or -1 */
    int ndim;                  /* entries seen */
    dim_axes axes;
} parse_state;

static ldt_status add_axis(parse_state *s, int64_t axis) {
    int d = s->ndim, *n = &s->axes.n[d];
    if (axis < 0 || axis >= s->mesh_ndim)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: mesh dim %lld is out of range for a %d-dim mesh (expected 0 to %d)", s->what,
                 (long long)axis, s->mesh_ndim, s->mesh_ndim - 1);
    if (s->used_by[axis] >= 0) {
        if (s->used_by[axis] == d)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: mesh dim %lld is repeated on tensor dim %d; a mesh dim splits a tensor "
                     "dim once",
                     s->what, (long long)axis, d);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: mesh dim %lld shards both tensor dim %d and tensor dim %d; a mesh dim shards "
                 "at most one tensor dim",
                 s->what, (long long)axis, s->used_by[axis], d);
    }
    if (*n > 0 && axis < s->axes.axis[d][*n - 1])
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: tensor dim %d is split over mesh dim %d before mesh dim %lld; lazydt splits "
                 "a dim over its mesh dims in increasing order only, so this layout has no lazydt "
                 "placements (list them increasing, which is a different layout, or permute the "
                 "mesh)",
                 s->what, d, s->axes.axis[d][*n - 1], (long long)axis);
    s->used_by[axis] = d;
    s->axes.axis[d][(*n)++] = (int)axis;
    return LDT_OK;
}

static ldt_status next_entry(parse_state *s, const char *at) {
    if (s->ndim == LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: more than %d entries at '%s' (tensors have at most "
                 "%d dims)", s->what, LDT_MAX_DIMS, at, LDT_MAX_DIMS);
    return LDT_OK;
}

static ldt_status parse_begin(parse_state *s, char *what, size_t wcap, const char *name,
                              const char *text, int mesh_ndim, int tensor_ndim,
                              const ldt_placement *out, int cap, const int *n) {
    snprintf(what, wcap, "%s '%.160s%s'", name, text ? text : "", text && strlen(text) > 160 ? "..." : "");
    if (!text || !out || !n) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: arguments must not be NULL", name);
    if (mesh_ndim < 1 || mesh_ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: mesh has %d dims, expected 1 to %d", what,
                 mesh_ndim, LDT_MAX_DIMS);
    if (tensor_ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: tensor has %d dims, expected at most %d", what,
                 tensor_ndim, LDT_MAX_DIMS);
    if (cap < mesh_ndim)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: room for %d placements, a %d-dim mesh needs %d",
                 what, cap, mesh_ndim, mesh_ndim);
    memset(s, 0, sizeof *s);
    s->what = what;
    s->mesh_ndim = mesh_ndim;
    for (int i = 0; i < LDT_MAX_DIMS; i++) s->used_by[i] = -1;
    return LDT_OK;
}

static ldt_status parse_end(const parse_state *s, int tensor_ndim, ldt_placement *out, int *n) {
    if (tensor_ndim >= 0 && s->ndim != tensor_ndim)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: %d entries, expected one per tensor dim (%d)", s->what, s->ndim, tensor_ndim);
    for (int i = 0; i < s->mesh_ndim; i++)
        out[i] = s->used_by[i] >= 0 ? ldt_shard(s->used_by[i]) : ldt_replicate();
    *n = s->mesh_ndim;
    return LDT_OK;
}

/* ---- ColossalAI / Alpa: "[S01,R]" -------------------------------------------------------- */

ldt_status ldt_colossal_format(const ldt_placement *pl, int nplace, int tensor_ndim, char *buf,
                               size_t cap, size_t *need) {
    dim_axes ax;
    size_t at = 0;
    if (!buf && cap) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "colossal: buffer must not be NULL");
    LDT_CHECK(axes_of("colossal", pl, nplace, tensor_ndim, &ax));
    if (cap) buf[0] = '\0';
    ldt__appendf(buf, cap, &at, "[");
    for (int d = 0; d < tensor_ndim; d++) {
        ldt__appendf(buf, cap, &at, "%s%s", d ? "," : "", ax.n[d] ? "S" : "R");
        for (int k = 0; k < ax.n[d]; k++) ldt__appendf(buf, cap, &at, "%d", ax.axis[d][k]);
    }
    ldt__appendf(buf, cap, &at, "]");
    LDT_CHECK(fits("colossal", at, cap, need));
    return LDT_OK;
}

ldt_status ldt_colossal_parse(const char *text, int mesh_ndim, int tensor_ndim, ldt_placement *out,
                              int cap, int *n) {
    char what[200];
    parse_state s;
    const char *p;
    int bracket;
    LDT_CHECK(parse_begin(&s, what, sizeof what, "colossal", text, mesh_ndim, tensor_ndim, out,
                          cap, n));
    p = ldt__skip_ws(text);
    bracket = *p == '[';
    if (bracket) p = ldt__skip_ws(p + 1);
    /* Alpa writes "S0R" without commas, ColossalAI "[S0, R]": an entry starts at S or R. */
    while (*p && !(bracket && *p == ']')) {
        LDT_CHECK(next_entry(&s, p));
        if (*p == 'R') {
            p++;
        } else if (*p == 'S') {
            const char *q = ++p;
            while (isdigit((unsigned char)*p)) LDT_CHECK(add_axis(&s, *p++ - '0'));
            if (p == q)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "%s: 'S' needs the mesh dims that shard tensor dim %d (S0, S01) at '%s'",
                         what, s.ndim, q);
        } else {
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "%s: expected R or S<mesh dims> (S0, S01) for tensor dim %d at '%s'", what,
                     s.ndim, p);
        }
        s.ndim++;
        p = ldt__skip_ws(p);
        if (*p == ',') {
            p = ldt__skip_ws(p + 1);
            if (!*p || *p == ']')
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: trailing ','", what);
        }
    }
    if (bracket) {
        if (*p != ']') LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: missing closing ']'", what);
        p = ldt__skip_ws(p + 1);
    }
    if (*p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: unexpected text '%s'", what, p);
    LDT_CHECK(parse_end(&s, tensor_ndim, out, n));
    return LDT_OK;
}

/* ---- PyTorch/XLA partition spec: "(1, None, None)", "((0, 1), None)" --------------------- */

ldt_status ldt_xla_format(const ldt_placement *pl, int nplace, int tensor_ndim, char *buf,
                          size_t cap, size_t *need) {
    dim_axes ax;
    size_t at = 0;
    if (!buf && cap) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "xla: buffer must not be NULL");
    LDT_CHECK(axes_of("xla", pl, nplace, tensor_ndim, &ax));
    if (cap) buf[0] = '\0';
    /* Python's repr of the tuple, so it pastes into xs.mark_sharding as is: "(1,)" for one dim. */
    ldt__appendf(buf, cap, &at, "(");
    for (int d = 0; d < tensor_ndim; d++) {
        if (d) ldt__appendf(buf, cap, &at, ", ");
        if (ax.n[d] == 0) {
            ldt__appendf(buf, cap, &at, "None");
        } else if (ax.n[d] == 1) {
            ldt__appendf(buf, cap, &at, "%d", ax.axis[d][0]);
        } else {
            ldt__appendf(buf, cap, &at, "(");
            for (int k = 0; k < ax.n[d]; k++)
                ldt__appendf(buf, cap, &at, "%s%d", k ? ", " : "", ax.axis[d][k]);
            ldt__appendf(buf, cap, &at, ")");
        }
    }
    ldt__appendf(buf, cap, &at, "%s)", tensor_ndim == 1 ? "," : "");
    LDT_CHECK(fits("xla", at, cap, need));
    return LDT_OK;
}

static ldt_status xla_axis(parse_state *s, const char *p, const char **end) {
    int64_t v;
    if (ldt__parse_i64(p, &v, end) != 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: expected a mesh axis index, None or a tuple of indices for tensor dim %d at "
                 "'%s'",
                 s->what, s->ndim, p);
    return add_axis(s, v);
}

ldt_status ldt_xla_parse(const char *text, int mesh_ndim, int tensor_ndim, ldt_placement *out,
                         int cap, int *n) {
    char what[200];
    parse_state s;
    const char *p, *e;
    LDT_CHECK(parse_begin(&s, what, sizeof what, "xla", text, mesh_ndim, tensor_ndim, out, cap, n));
    p = ldt__skip_ws(text);
    if (*p != '(')
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: expected a tuple '(' with one entry per tensor dim, e.g. (1, None)", what);
    p = ldt__skip_ws(p + 1);
    while (*p && *p != ')') {
        LDT_CHECK(next_entry(&s, p));
        if (strncmp(p, "None", 4) == 0 && !isalnum((unsigned char)p[4]) && p[4] != '_') {
            p += 4;
        } else if (*p == '(') {
            /* several mesh axes on one dim: the first is the major one */
            p = ldt__skip_ws(p + 1);
            if (*p == ')')
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "%s: empty tuple for tensor dim %d, expected mesh axes or None", what,
                         s.ndim);
            while (*p && *p != ')') {
                LDT_CHECK(xla_axis(&s, p, &e));
                p = ldt__skip_ws(e);
                if (*p == ',') p = ldt__skip_ws(p + 1);
                else if (*p && *p != ')')
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                             "%s: expected ',' or ')' in tensor dim %d's axes at '%s'", what,
                             s.ndim, p);
            }
            if (*p != ')')
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: missing ')' after tensor dim %d's axes",
                         what, s.ndim);
            p++;
        } else {
            LDT_CHECK(xla_axis(&s, p, &e));
            p = e;
        }
        s.ndim++;
        p = ldt__skip_ws(p);
        if (*p == ',') p = ldt__skip_ws(p + 1);
        else if (*p && *p != ')')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: expected ',' between entries at '%s'", what, p);
    }
    if (*p != ')') LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: missing closing ')'", what);
    p = ldt__skip_ws(p + 1);
    if (*p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: unexpected text '%s'", what, p);
    LDT_CHECK(parse_end(&s, tensor_ndim, out, n));
    return LDT_OK;
}

/* ---- HLO sharding: "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}" ---------- */

/* XLA tiles dim d into T_d pieces of ceil(n/T_d), the tile index mixing the sharding mesh
 * coords major-first. That is torch.chunk over one mesh dim, but nested torch.chunk can differ
 * when a dim is uneven (5 over 2x2: 3,2 then 2,1,1,1 vs 2,2,1,0): refuse those. */
static ldt_status check_tiles(const ldt_spec *spec, const dim_axes *ax, const int64_t *tiles) {
    const ldt_mesh *m = spec->mesh;
    int mnd = ldt_mesh_ndim(m), nranks = ldt_mesh_nranks(m);
    int64_t coord[LDT_MAX_DIMS] = {0};
    for (int p = 0; p < nranks; p++) {
        ldt_region r;
        int rest = p;
        for (int i = mnd - 1; i >= 0; i--) {
            coord[i] = rest % ldt_mesh_dim_size(m, i);
            rest /= (int)ldt_mesh_dim_size(m, i);
        }
        LDT_CHECK(ldt_layout_coord(spec, coord, &r));
        for (int d = 0; d < spec->shape.ndim; d++) {
            int64_t t = 0, s, l;
            for (int k = 0; k < ax->n[d]; k++)
                t = t * ldt_mesh_dim_size(m, ax->axis[d][k]) + coord[ax->axis[d][k]];
            ldt_chunk(spec->shape.dims[d], tiles[d], t, &s, &l);
            if (l != r.runs[d].len || (l > 0 && s != r.runs[d].start))
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "hlo: tensor dim %d (size %lld) is split unevenly over %d mesh dims: "
                         "lazydt's nested torch.chunk gives mesh position %d indices [%lld,%lld) "
                         "but XLA's padded tile %lld of %lld is [%lld,%lld); make the size a "
                         "multiple of %lld or shard it on one mesh dim",
                         d, (long long)spec->shape.dims[d], ax->n[d], p,
                         (long long)r.runs[d].start, (long long)(r.runs[d].start + r.runs[d].len),
                         (long long)t, (long long)tiles[d], (long long)s, (long long)(s + l),
                         (long long)tiles[d]);
        }
    }
    return LDT_OK;
}

ldt_status ldt_hlo_sharding_format(const ldt_spec *spec, char *buf, size_t cap, size_t *need) {
    dim_axes ax;
    int64_t tiles[LDT_MAX_DIMS], repl = 1, idx[LDT_MAX_DIMS] = {0}, size[LDT_MAX_DIMS];
    int order[LDT_MAX_DIMS], norder = 0, mnd, nranks, sharded = 0, is_repl[LDT_MAX_DIMS];
    size_t at = 0;
    if (!spec || !spec->mesh) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "hlo: spec must not be NULL");
    if (!buf && cap) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "hlo: buffer must not be NULL");
    LDT_CHECK(ldt_spec_check(spec));
    LDT_CHECK(axes_of("hlo", spec->placements, spec->nplace, spec->shape.ndim, &ax));
    mnd = ldt_mesh_ndim(spec->mesh);
    nranks = ldt_mesh_nranks(spec->mesh);
    if (cap) buf[0] = '\0';
    /* device array axes: the sharding mesh dims in tensor-dim order, then the replicated ones */
    for (int i = 0; i < mnd; i++) is_repl[i] = 1;
    for (int d = 0; d < spec->shape.ndim; d++) {
        tiles[d] = 1;
        for (int k = 0; k < ax.n[d]; k++) {
            order[norder++] = ax.axis[d][k];
            is_repl[ax.axis[d][k]] = 0;
            tiles[d] *= ldt_mesh_dim_size(spec->mesh, ax.axis[d][k]);
        }
        sharded |= tiles[d] > 1;
    }
    for (int i = 0; i < mnd; i++)
        if (is_repl[i]) {
            order[norder++] = i;
            repl *= ldt_mesh_dim_size(spec->mesh, i);
        }
    if (!sharded) {
        ldt__appendf(buf, cap, &at, "{replicated}");
        LDT_CHECK(fits("hlo", at, cap, need));
        return LDT_OK;
    }
    LDT_CHECK(check_tiles(spec, &ax, tiles));
    ldt__appendf(buf, cap, &at, "{devices=[");
    for (int d = 0; d < spec->shape.ndim; d++)
        ldt__appendf(buf, cap, &at, "%s%lld", d ? "," : "", (long long)tiles[d]);
    if (repl > 1) ldt__appendf(buf, cap, &at, ",%lld", (long long)repl);
    ldt__appendf(buf, cap, &at, "]");
    /* walk the transposed mesh row-major: idx[k] is the coordinate on mesh dim order[k] */
    for (int k = 0; k < mnd; k++) size[k] = ldt_mesh_dim_size(spec->mesh, order[k]);
    for (int n = 0; n < nranks; n++) {
        int64_t pos = 0;
        int64_t coord[LDT_MAX_DIMS];
        for (int k = 0; k < mnd; k++) coord[order[k]] = idx[k];
        for (int i = 0; i < mnd; i++) pos = pos * ldt_mesh_dim_size(spec->mesh, i) + coord[i];
        ldt__appendf(buf, cap, &at, "%s%d", n ? "," : "", ldt_mesh_rank_at(spec->mesh, (int)pos));
        for (int k = mnd - 1; k >= 0 && ++idx[k] == size[k]; k--) idx[k] = 0;
    }
    ldt__appendf(buf, cap, &at, "%s}", repl > 1 ? " last_tile_dim_replicate" : "");
    LDT_CHECK(fits("hlo", at, cap, need));
    return LDT_OK;
}
