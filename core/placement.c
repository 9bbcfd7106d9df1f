/* Placements (S<d>, R, P<op>, IS<d>:<k>) and specs: constructors, text forms, validation. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/mesh.h"
#include "core/text.h"

ldt_placement ldt_replicate(void) {
    ldt_placement p = {LDT_PLACE_REPLICATE, 0, 0, LDT_REDUCE_SUM};
    return p;
}
ldt_placement ldt_shard(int dim) {
    ldt_placement p = {LDT_PLACE_SHARD, dim, 0, LDT_REDUCE_SUM};
    return p;
}
ldt_placement ldt_partial(ldt_reduce_op op) {
    ldt_placement p = {LDT_PLACE_PARTIAL, 0, 0, op};
    return p;
}
ldt_placement ldt_interleaved_shard(int dim, int64_t blocks) {
    ldt_placement p = {LDT_PLACE_INTERLEAVED_SHARD, dim, blocks, LDT_REDUCE_SUM};
    return p;
}

static const char *const k_reduce_names[] = {"sum", "avg", "max", "min"};

const char *ldt_reduce_op_name(ldt_reduce_op op) {
    return ((int)op >= 0 && op <= LDT_REDUCE_MIN) ? k_reduce_names[op] : "invalid";
}

ldt_status ldt_reduce_op_parse(const char *text, ldt_reduce_op *out) {
    if (!text || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "reduce op: arguments must not be NULL");
    for (int i = 0; i <= LDT_REDUCE_MIN; i++)
        if (strcmp(text, k_reduce_names[i]) == 0) {
            *out = (ldt_reduce_op)i;
            return LDT_OK;
        }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "reduce op: unknown '%s', expected sum, avg, max or min",
             text);
}

/* Matches a word at p (case-sensitive) not followed by an identifier character. */
static int word(const char *p, const char *w, const char **end) {
    size_t n = strlen(w);
    if (strncmp(p, w, n) != 0) return 0;
    *end = p + n;
    return 1;
}

static ldt_status parse_dim(const char *text, const char *p, int tensor_ndim, int *dim,
                            const char **end) {
    int64_t v;
    if (ldt__parse_i64(p, &v, end) != 0 || v < -LDT_MAX_DIMS || v >= LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "placements '%s': expected a tensor dim (-%d to %d) at '%s'", text, LDT_MAX_DIMS,
                 LDT_MAX_DIMS - 1, p);
    if (tensor_ndim >= 0) {
        if (v < -tensor_ndim || v >= tensor_ndim)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "placements '%s': dim %lld is out of range for a %d-dim tensor (expected "
                     "%d to %d)",
                     text, (long long)v, tensor_ndim, -tensor_ndim, tensor_ndim - 1);
        if (v < 0) v += tensor_ndim;
    } else if (v < 0) {
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "placements '%s': negative dim %lld needs the tensor's dim count", text,
                 (long long)v);
    }
    *dim = (int)v;
    return LDT_OK;
}

static ldt_status parse_blocks(const char *text, const char *p, int64_t *k, const char **end) {
    if (ldt__parse_i64(p, k, end) != 0 || *k < 1)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "placements '%s': expected an interleave block count >= 1 at '%s'", text, p);
    return LDT_OK;
}

static ldt_status parse_one(const char *text, const char *p, int tensor_ndim, ldt_placement *pl,
                            const char **end) {
    const char *e;
    if (word(p, "InterleavedShard(", &e)) {
        int d;
        int64_t k;
        LDT_CHECK(parse_dim(text, ldt__skip_ws(e), tensor_ndim, &d, &e));
        e = ldt__skip_ws(e);
        if (*e != ',')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': expected ', k)' at '%s'", text, e);
        LDT_CHECK(parse_blocks(text, ldt__skip_ws(e + 1), &k, &e));
        e = ldt__skip_ws(e);
        if (*e != ')')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': expected ')' at '%s'", text, e);
        *pl = ldt_interleaved_shard(d, k);
        *end = e + 1;
        return LDT_OK;
    }
    if (word(p, "Shard(", &e)) {
        int d;
        LDT_CHECK(parse_dim(text, ldt__skip_ws(e), tensor_ndim, &d, &e));
        e = ldt__skip_ws(e);
        if (*e != ')')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': expected ')' at '%s'", text, e);
        *pl = ldt_shard(d);
        *end = e + 1;
        return LDT_OK;
    }
    if (word(p, "Replicate()", &e)) {
        *pl = ldt_replicate();
        *end = e;
        return LDT_OK;
    }
    if (word(p, "Partial(", &e)) {
        ldt_reduce_op op = LDT_REDUCE_SUM;
        char name[8] = {0};
        size_t n = 0;
        e = ldt__skip_ws(e);
        while (isalpha((unsigned char)e[n]) && n < sizeof name - 1) {
            name[n] = e[n];
            n++;
        }
        if (n) LDT_CHECK(ldt_reduce_op_parse(name, &op));
        e = ldt__skip_ws(e + n);
        if (*e != ')')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': expected ')' at '%s'", text, e);
        *pl = ldt_partial(op);
        *end = e + 1;
        return LDT_OK;
    }
    if (p[0] == 'I' && p[1] == 'S') {
        int d;
        int64_t k;
        LDT_CHECK(parse_dim(text, p + 2, tensor_ndim, &d, &e));
        if (*e != ':')
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "placements '%s': InterleavedShard needs ':k' (e.g. IS0:3) at '%s'", text, e);
        LDT_CHECK(parse_blocks(text, e + 1, &k, &e));
        *pl = ldt_interleaved_shard(d, k);
        *end = e;
        return LDT_OK;
    }
    if (p[0] == 'S') {
        int d;
        LDT_CHECK(parse_dim(text, p + 1, tensor_ndim, &d, &e));
        *pl = ldt_shard(d);
        *end = e;
        return LDT_OK;
    }
    if (p[0] == 'R') {
        *pl = ldt_replicate();
        *end = p + 1;
        return LDT_OK;
    }
    if (p[0] == 'P') {
        static const char *const forms[] = {"Psum", "Pavg", "Pmax", "Pmin"};
        for (int i = 0; i < 4; i++)
            if (word(p, forms[i], &e)) {
                *pl = ldt_partial((ldt_reduce_op)i);
                *end = e;
                return LDT_OK;
            }
        if (!isalnum((unsigned char)p[1])) {
            *pl = ldt_partial(LDT_REDUCE_SUM);
            *end = p + 1;
            return LDT_OK;
        }
    }
    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
             "placements '%s': unknown placement at '%s', expected S<d>, R, P, Psum, Pavg, Pmax, "
             "Pmin or IS<d>:<k>",
             text, p);
}

ldt_status ldt_placements_parse(const char *text, int tensor_ndim, ldt_placement *out, int cap,
                                int *n) {
    const char *p;
    int count = 0, bracket = 0;
    if (!text || !out || !n)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements: arguments must not be NULL");
    p = ldt__skip_ws(text);
    if (*p == '[' || *p == '(') {
        bracket = *p == '[' ? ']' : ')';
        p = ldt__skip_ws(p + 1);
    }
    while (*p && *p != bracket) {
        ldt_placement pl;
        const char *e = p;
        LDT_CHECK(parse_one(text, p, tensor_ndim, &pl, &e));
        if (count == cap)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': more than %d placements", text,
                     cap);
        out[count++] = pl;
        p = ldt__skip_ws(e);
        if (*p == ',') {
            p = ldt__skip_ws(p + 1);
            if (!*p || *p == bracket)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': trailing ','", text);
        } else if (*p && *p != bracket) {
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "placements '%s': expected ',' between placements at '%s'", text, p);
        }
    }
    if (bracket) {
        if (*p != bracket)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': missing closing '%c'", text,
                     bracket);
        p = ldt__skip_ws(p + 1);
    }
    if (*p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': unexpected text '%s'", text, p);
    if (count == 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "placements '%s': none given", text);
    *n = count;
    return LDT_OK;
}

int ldt_placement_format(const ldt_placement *p, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = '\0';
    switch (p->kind) {
    case LDT_PLACE_REPLICATE: ldt__appendf(buf, cap, &at, "R"); break;
    case LDT_PLACE_SHARD: ldt__appendf(buf, cap, &at, "S%d", p->dim); break;
    case LDT_PLACE_PARTIAL:
        if (p->op == LDT_REDUCE_SUM)
            ldt__appendf(buf, cap, &at, "P");
        else
            ldt__appendf(buf, cap, &at, "P%s", ldt_reduce_op_name(p->op));
        break;
    case LDT_PLACE_INTERLEAVED_SHARD:
        ldt__appendf(buf, cap, &at, "IS%d:%lld", p->dim, (long long)p->blocks);
        break;
    default: ldt__appendf(buf, cap, &at, "?"); break;
    }
    return (int)at;
}

int ldt_placements_format(const ldt_placement *p, int n, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        char one[48];
        ldt_placement_format(&p[i], one, sizeof one);
        ldt__appendf(buf, cap, &at, "%s%s", i ? "," : "", one);
    }
    return (int)at;
}

int ldt_placement_equal(const ldt_placement *a, const ldt_placement *b) {
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case LDT_PLACE_SHARD: return a->dim == b->dim;
    case LDT_PLACE_PARTIAL: return a->op == b->op;
    case LDT_PLACE_INTERLEAVED_SHARD: return a->dim == b->dim && a->blocks == b->blocks;
    default: return 1;
    }
}

/* ---- specs ------------------------------------------------------------------------------ */

static ldt_status spec_fail(const ldt_spec *s, const char *why) {
    char sh[256], pl[256];
    ldt_shape_format(&s->shape, sh, sizeof sh);
    ldt_placements_format(s->placements, s->nplace, pl, sizeof pl);
    return ldt__error(LDT_ERR_INVALID_ARGUMENT, "spec %s (%s): %s", sh, pl, why);
}

static ldt_status spec_validate(ldt_spec *s, int normalise) {
    char why[256];
    int ndim = s->shape.ndim;
    if (!s->mesh) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: mesh must not be NULL");
    if ((size_t)s->dtype >= LDT_DTYPE_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: invalid dtype %d", (int)s->dtype);
    LDT_CHECK(ldt_shape_nbytes(&s->shape, s->dtype, NULL));
    if (s->nplace != s->mesh->ndim) {
        char m[128];
        ldt_mesh_format(s->mesh, m, sizeof m);
        snprintf(why, sizeof why, "%d placements for mesh %s with %d dims, expected one per mesh dim",
                 s->nplace, m, s->mesh->ndim);
        return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
    }
    for (int i = 0; i < s->nplace; i++) {
        ldt_placement *p = &s->placements[i];
        switch (p->kind) {
        case LDT_PLACE_REPLICATE: break;
        case LDT_PLACE_PARTIAL:
            if ((int)p->op < 0 || p->op > LDT_REDUCE_MIN) {
                snprintf(why, sizeof why, "mesh dim %d: invalid reduce op %d", i, (int)p->op);
                return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
            }
            break;
        case LDT_PLACE_SHARD:
        case LDT_PLACE_INTERLEAVED_SHARD:
            if (normalise && p->dim < 0 && p->dim >= -ndim) p->dim += ndim;
            if (p->dim < 0 || p->dim >= ndim) {
                snprintf(why, sizeof why,
                         "mesh dim %d shards tensor dim %d but the tensor has %d dims", i, p->dim,
                         ndim);
                return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
            }
            if (p->kind == LDT_PLACE_INTERLEAVED_SHARD) {
                if (p->blocks < 1 || s->shape.dims[p->dim] % p->blocks != 0) {
                    snprintf(why, sizeof why,
                             "mesh dim %d: InterleavedShard needs dim %d (size %lld) to split "
                             "into %lld equal blocks",
                             i, p->dim, (long long)s->shape.dims[p->dim], (long long)p->blocks);
                    return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
                }
            }
            break;
        default:
            snprintf(why, sizeof why, "mesh dim %d: invalid placement kind %d", i, (int)p->kind);
            return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
        }
    }
    /* Partial ops on different mesh dims must combine into one reduction: the same op, or
     * sum with avg (both linear). */
    for (int i = 0; i < s->nplace; i++)
        for (int j = 0; j < i; j++) {
            const ldt_placement *a = &s->placements[i], *b = &s->placements[j];
            if (a->kind == LDT_PLACE_PARTIAL && b->kind == LDT_PLACE_PARTIAL && a->op != b->op &&
                !((a->op == LDT_REDUCE_SUM || a->op == LDT_REDUCE_AVG) &&
                  (b->op == LDT_REDUCE_SUM || b->op == LDT_REDUCE_AVG))) {
                snprintf(why, sizeof why,
                         "mesh dims %d and %d are Partial with %s and %s; mixed Partial ops must "
                         "be sum with avg",
                         j, i, ldt_reduce_op_name(b->op), ldt_reduce_op_name(a->op));
                return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
            }
        }
    /* A dim under InterleavedShard is sharded on no other mesh dim. */
    for (int i = 0; i < s->nplace; i++) {
        if (s->placements[i].kind != LDT_PLACE_INTERLEAVED_SHARD) continue;
        for (int j = 0; j < s->nplace; j++) {
            const ldt_placement *q = &s->placements[j];
            if (j != i && (q->kind == LDT_PLACE_SHARD || q->kind == LDT_PLACE_INTERLEAVED_SHARD) &&
                q->dim == s->placements[i].dim) {
                snprintf(why, sizeof why,
                         "tensor dim %d is InterleavedShard on mesh dim %d and sharded again on "
                         "mesh dim %d; an interleaved dim is sharded once",
                         q->dim, i, j);
                return ldt__trace(spec_fail(s, why), __FILE__, __LINE__);
            }
        }
    }
    return LDT_OK;
}

ldt_status ldt_spec_init(ldt_spec *spec, const ldt_mesh *mesh, const ldt_shape *shape,
                         const ldt_placement *placements, int nplace, ldt_dtype dtype) {
    ldt_spec s;
    if (!spec || !shape || (nplace > 0 && !placements))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: arguments must not be NULL");
    if (shape->ndim < 0 || shape->ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: shape has %d dims, expected 0 to %d",
                 shape->ndim, LDT_MAX_DIMS);
    if (nplace < 0 || nplace > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: %d placements, expected 1 to %d", nplace,
                 LDT_MAX_DIMS);
    memset(&s, 0, sizeof s);
    s.mesh = mesh;
    s.nplace = nplace;
    if (nplace) memcpy(s.placements, placements, (size_t)nplace * sizeof *placements);
    s.shape = *shape;
    s.dtype = dtype;
    LDT_CHECK(spec_validate(&s, 1));
    {
        int64_t st = 1;
        for (int d = shape->ndim - 1; d >= 0; d--) {
            s.stride[d] = st;
            st *= shape->dims[d] ? shape->dims[d] : 1; /* cannot overflow: numel checked */
        }
    }
    *spec = s;
    return LDT_OK;
}

ldt_status ldt_spec_check(const ldt_spec *spec) {
    ldt_spec s;
    if (!spec) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: must not be NULL");
    if (spec->shape.ndim < 0 || spec->shape.ndim > LDT_MAX_DIMS || spec->nplace < 0 ||
        spec->nplace > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "spec: shape has %d dims and %d placements, expected "
                 "0 to %d each", spec->shape.ndim, spec->nplace, LDT_MAX_DIMS);
    s = *spec;
    LDT_CHECK(spec_validate(&s, 0));
    return LDT_OK;
}

int ldt_spec_format(const ldt_spec *spec, char *buf, size_t cap) {
    char sh[256], pl[256], m[256];
    size_t at = 0;
    ldt_shape_format(&spec->shape, sh, sizeof sh);
    ldt_placements_format(spec->placements, spec->nplace, pl, sizeof pl);
    ldt_mesh_format(spec->mesh, m, sizeof m);
    if (cap) buf[0] = '\0';
    ldt__appendf(buf, cap, &at, "%s %s (%s) on %s", sh, ldt_dtype_name(spec->dtype), pl, m);
    return (int)at;
}
