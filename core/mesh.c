/* Device meshes: N-D rank arrays with names, coordinates, groups, sub-meshes and text forms. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/mesh.h"
#include "core/text.h"

static int valid_name(const char *s) {
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

ldt_status ldt_mesh_create(int ndim, const int64_t *dims, const int *ranks,
                           const char *const *names, ldt_device_type dev, ldt_mesh **out) {
    ldt_status st = LDT_OK;
    ldt_mesh *m = NULL;
    int64_t n = 1;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: out must not be NULL");
    *out = NULL;
    if (ndim < 1 || ndim > LDT_MAX_DIMS)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: %d dims, expected 1 to %d", ndim, LDT_MAX_DIMS);
    if (!dims) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: dims must not be NULL");
    if (dev != LDT_DEVICE_CPU && dev != LDT_DEVICE_CUDA && dev != LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: unknown device type %d", (int)dev);
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 1)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: dim %d has size %lld, expected >= 1", d,
                     (long long)dims[d]);
        if (__builtin_mul_overflow(n, dims[d], &n) || n > LDT_MESH_MAX_RANKS)
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: more than %d ranks", LDT_MESH_MAX_RANKS);
    }
    if (names)
        for (int d = 0; d < ndim; d++) {
            if (!valid_name(names[d]))
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "mesh: dim %d name '%s' is not an identifier (letters, digits, _)", d,
                         names[d] ? names[d] : "(null)");
            for (int e = 0; e < d; e++)
                if (strcmp(names[d], names[e]) == 0)
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: dim name '%s' is used twice",
                             names[d]);
        }
    m = calloc(1, sizeof *m);
    if (!m) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    m->ndim = ndim;
    m->dev = dev;
    m->nranks = (int)n;
    memcpy(m->dims, dims, (size_t)ndim * sizeof dims[0]);
    m->ranks = malloc((size_t)n * sizeof(int));
    if (!m->ranks) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    m->max_rank = -1;
    for (int i = 0; i < m->nranks; i++) {
        int r = ranks ? ranks[i] : i;
        if (r < 0 || r >= LDT_MESH_MAX_RANKS)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "mesh: rank %d at position %d is out of range [0, %d)", r, i,
                          LDT_MESH_MAX_RANKS);
        m->ranks[i] = r;
        if (r > m->max_rank) m->max_rank = r;
    }
    m->pos_of = malloc((size_t)(m->max_rank + 1) * sizeof(int));
    if (!m->pos_of) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    memset(m->pos_of, 0xff, (size_t)(m->max_rank + 1) * sizeof(int));
    for (int i = 0; i < m->nranks; i++) {
        if (m->pos_of[m->ranks[i]] >= 0)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "mesh: rank %d appears twice (positions %d and %d)", m->ranks[i],
                          m->pos_of[m->ranks[i]], i);
        m->pos_of[m->ranks[i]] = i;
    }
    if (names)
        for (int d = 0; d < ndim; d++) {
            size_t len = strlen(names[d]) + 1;
            m->names[d] = malloc(len);
            if (!m->names[d]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
            memcpy(m->names[d], names[d], len);
        }
    *out = m;
    return LDT_OK;
fail:
    ldt_mesh_destroy(m);
    return st;
}

void ldt_mesh_destroy(ldt_mesh *m) {
    if (!m) return;
    for (int d = 0; d < LDT_MAX_DIMS; d++) free(m->names[d]);
    free(m->ranks);
    free(m->pos_of);
    free(m);
}

ldt_status ldt_mesh_clone(const ldt_mesh *m, ldt_mesh **out) {
    if (!m) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh clone: mesh must not be NULL");
    LDT_CHECK(ldt_mesh_create(m->ndim, m->dims, m->ranks,
                              m->names[0] ? (const char *const *)m->names : NULL, m->dev, out));
    return LDT_OK;
}

/* "[[0,2],[1,3]]": nested lists give the dims, leaves the ranks. */
static ldt_status parse_rank_array(const char *text, const char *p, int64_t *dims, int *ndim,
                                   int **ranks_out, int *nranks_out, const char **end) {
    ldt_status st = LDT_OK;
    int depth = 0, maxdepth = 0, leaf_depth = 0, cap = 16, n = 0;
    int64_t count[LDT_MAX_DIMS] = {0};
    int known[LDT_MAX_DIMS] = {0};
    int *ranks = malloc((size_t)cap * sizeof(int));
    if (!ranks) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    for (;;) {
        p = ldt__skip_ws(p);
        if (*p == '[') {
            if (depth == LDT_MAX_DIMS)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': more than %d nested dims",
                              text, LDT_MAX_DIMS);
            if (leaf_depth && depth + 1 > leaf_depth)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "mesh '%s': ranks at different nesting depths", text);
            if (depth > 0) count[depth - 1]++;
            count[depth] = 0;
            depth++;
            if (depth > maxdepth) maxdepth = depth;
            p++;
            continue;
        }
        if (*p == ']') {
            if (depth == 0) LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': unbalanced ']'", text);
            depth--;
            if (!known[depth]) {
                known[depth] = 1;
                dims[depth] = count[depth];
            } else if (dims[depth] != count[depth]) {
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "mesh '%s': rows of nesting level %d differ in length (%lld and "
                              "%lld)",
                              text, depth, (long long)dims[depth], (long long)count[depth]);
            }
            p++;
            p = ldt__skip_ws(p);
            if (depth == 0) break;
            if (*p == ',') p++;
            continue;
        }
        if (depth == 0)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': expected '['", text);
        {
            int64_t v;
            const char *e;
            if (ldt__parse_i64(p, &v, &e) != 0 || v < 0 || v >= LDT_MESH_MAX_RANKS)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "mesh '%s': expected a rank (0 to %d) at '%s'", text,
                              LDT_MESH_MAX_RANKS - 1, p);
            if (!leaf_depth) leaf_depth = depth;
            if (depth != leaf_depth)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "mesh '%s': ranks at different nesting depths", text);
            if (n == cap) {
                int *nr;
                if (cap >= LDT_MESH_MAX_RANKS)
                    LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': too many ranks", text);
                nr = realloc(ranks, (size_t)cap * 2 * sizeof(int));
                if (!nr) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
                ranks = nr;
                cap *= 2;
            }
            ranks[n++] = (int)v;
            count[depth - 1]++;
            p = ldt__skip_ws(e);
            if (*p == ',') p++;
        }
    }
    if (n == 0) LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': no ranks", text);
    {
        int64_t prod = 1;
        for (int d = 0; d < maxdepth; d++) prod *= dims[d];
        if (prod != n)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "mesh '%s': ragged rank array (%d ranks for a full array of %lld)",
                          text, n, (long long)prod);
    }
    *ndim = maxdepth;
    *ranks_out = ranks;
    *nranks_out = n;
    *end = p;
    return LDT_OK;
fail:
    free(ranks);
    return st;
}

ldt_status ldt_mesh_parse(const char *text, ldt_device_type dev, ldt_mesh **out) {
    ldt_status st = LDT_OK;
    int64_t dims[LDT_MAX_DIMS];
    char names_buf[LDT_MAX_DIMS][64];
    const char *names[LDT_MAX_DIMS];
    int ndim = 0, named = -1, nranks = 0;
    int *ranks = NULL;
    const char *p;
    if (!text || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh: text and out must not be NULL");
    *out = NULL;
    p = ldt__skip_ws(text);
    if (*p != '[') {
        while (*p && *p != ':') {
            int64_t v;
            const char *e;
            int is_named = isalpha((unsigned char)*p) || *p == '_';
            if (ndim == LDT_MAX_DIMS)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': more than %d dims", text,
                         LDT_MAX_DIMS);
            if (named >= 0 && named != is_named)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "mesh '%s': name every dim (dp=2,tp=2) or none (2x2)", text);
            named = is_named;
            if (is_named) {
                size_t len = 0;
                while (isalnum((unsigned char)p[len]) || p[len] == '_') len++;
                if (len >= sizeof names_buf[0])
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': dim name too long", text);
                memcpy(names_buf[ndim], p, len);
                names_buf[ndim][len] = '\0';
                names[ndim] = names_buf[ndim];
                p = ldt__skip_ws(p + len);
                if (*p != '=')
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                             "mesh '%s': expected '=' after dim name '%s'", text,
                             names_buf[ndim]);
                p = ldt__skip_ws(p + 1);
            }
            if (ldt__parse_i64(p, &v, &e) != 0 || v < 1 || v > LDT_MESH_MAX_RANKS)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "mesh '%s': expected a dim size >= 1 at '%s' (forms: 4, 2x2, dp=2,tp=2, "
                         "[[0,2],[1,3]])",
                         text, p);
            dims[ndim++] = v;
            p = ldt__skip_ws(e);
            if (*p == (is_named ? ',' : 'x')) {
                p = ldt__skip_ws(p + 1);
                if (!*p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': trailing separator", text);
            } else if (*p && *p != ':') {
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': unexpected '%c' at '%s'", text,
                         *p, p);
            }
        }
        if (ndim == 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': no dims", text);
        if (*p == ':') {
            int64_t adims[LDT_MAX_DIMS];
            int andim;
            LDT_CHECK(parse_rank_array(text, p + 1, adims, &andim, &ranks, &nranks, &p));
            if (andim != ndim) {
                free(ranks);
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "mesh '%s': the rank array has %d dims, the mesh %d", text, andim, ndim);
            }
            for (int d = 0; d < ndim; d++)
                if (adims[d] != dims[d]) {
                    free(ranks);
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                             "mesh '%s': rank array dim %d has %lld entries, the mesh dim %lld",
                             text, d, (long long)adims[d], (long long)dims[d]);
                }
        }
    } else {
        LDT_CHECK(parse_rank_array(text, p, dims, &ndim, &ranks, &nranks, &p));
    }
    p = ldt__skip_ws(p);
    if (*p) LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "mesh '%s': unexpected text '%s'", text, p);
    LDT_CHECK_GOTO(ldt_mesh_create(ndim, dims, ranks, named == 1 ? names : NULL, dev, out));
fail:
    free(ranks);
    return st;
}

int ldt_mesh_ndim(const ldt_mesh *m) { return m ? m->ndim : 0; }
int64_t ldt_mesh_dim_size(const ldt_mesh *m, int dim) {
    return (m && dim >= 0 && dim < m->ndim) ? m->dims[dim] : 0;
}
int ldt_mesh_nranks(const ldt_mesh *m) { return m ? m->nranks : 0; }
ldt_device_type ldt_mesh_device(const ldt_mesh *m) { return m ? m->dev : LDT_DEVICE_META; }
int ldt_mesh_rank_at(const ldt_mesh *m, int i) {
    return (m && i >= 0 && i < m->nranks) ? m->ranks[i] : -1;
}
const char *ldt_mesh_dim_name(const ldt_mesh *m, int dim) {
    return (m && dim >= 0 && dim < m->ndim) ? m->names[dim] : NULL;
}

ldt_status ldt_mesh_dim_index(const ldt_mesh *m, const char *name, int *out) {
    if (!m || !name || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh dim index: arguments must not be NULL");
    for (int d = 0; d < m->ndim; d++)
        if (m->names[d] && strcmp(m->names[d], name) == 0) {
            *out = d;
            return LDT_OK;
        }
    {
        char buf[256];
        ldt_mesh_format(m, buf, sizeof buf);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh %s has no dim named '%s'", buf, name);
    }
}

static int position_of(const ldt_mesh *m, int rank) {
    if (rank < 0 || rank > m->max_rank) return -1;
    return m->pos_of[rank];
}

static ldt_status rank_not_in(const ldt_mesh *m, int rank, const char *what) {
    char buf[256];
    ldt_mesh_format(m, buf, sizeof buf);
    return ldt__error(LDT_ERR_INVALID_ARGUMENT, "%s: rank %d is not in mesh %s", what, rank, buf);
}

ldt_status ldt_mesh_coord(const ldt_mesh *m, int rank, int64_t *coord) {
    int pos;
    if (!m || !coord) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh coord: arguments must not be NULL");
    pos = position_of(m, rank);
    if (pos < 0) return ldt__trace(rank_not_in(m, rank, "mesh coord"), __FILE__, __LINE__);
    for (int d = m->ndim - 1; d >= 0; d--) {
        coord[d] = pos % m->dims[d];
        pos = (int)(pos / m->dims[d]);
    }
    return LDT_OK;
}

ldt_status ldt_mesh_rank_of(const ldt_mesh *m, const int64_t *coord, int *out) {
    int64_t pos = 0;
    if (!m || !coord || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh rank_of: arguments must not be NULL");
    for (int d = 0; d < m->ndim; d++) {
        if (coord[d] < 0 || coord[d] >= m->dims[d])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "mesh rank_of: coordinate %lld on dim %d is out of range [0, %lld)",
                     (long long)coord[d], d, (long long)m->dims[d]);
        pos = pos * m->dims[d] + coord[d];
    }
    *out = m->ranks[pos];
    return LDT_OK;
}

static ldt_status check_dim(const ldt_mesh *m, int dim, const char *what) {
    if (dim < 0 || dim >= m->ndim)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: mesh dim %d is out of range [0, %d)", what, dim,
                 m->ndim);
    return LDT_OK;
}

ldt_status ldt_mesh_group(const ldt_mesh *m, int rank, int dim, int *ranks) {
    int64_t coord[LDT_MAX_DIMS];
    if (!m || !ranks) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh group: arguments must not be NULL");
    LDT_CHECK(check_dim(m, dim, "mesh group"));
    LDT_CHECK(ldt_mesh_coord(m, rank, coord));
    for (int64_t i = 0; i < m->dims[dim]; i++) {
        coord[dim] = i;
        LDT_CHECK(ldt_mesh_rank_of(m, coord, &ranks[i]));
    }
    return LDT_OK;
}

static ldt_status check_dim_list(const ldt_mesh *m, int ndims, const int *dims, const char *what) {
    if (ndims < 1 || ndims > m->ndim || !dims)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: %d dims selected, expected 1 to %d", what, ndims,
                 m->ndim);
    for (int i = 0; i < ndims; i++) {
        LDT_CHECK(check_dim(m, dims[i], what));
        for (int j = 0; j < i; j++)
            if (dims[i] == dims[j])
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: mesh dim %d selected twice", what,
                         dims[i]);
    }
    return LDT_OK;
}

/* The sub-mesh over `dims` through the point `base` (a full coordinate). */
static ldt_status submesh_at(const ldt_mesh *m, const int64_t *base, int ndims, const int *dims,
                             ldt_mesh **out) {
    ldt_status st;
    int64_t sdims[LDT_MAX_DIMS], coord[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0};
    const char *names[LDT_MAX_DIMS];
    int n = 1, *ranks;
    for (int i = 0; i < ndims; i++) {
        sdims[i] = m->dims[dims[i]];
        names[i] = m->names[dims[i]];
        n *= (int)sdims[i];
    }
    ranks = malloc((size_t)n * sizeof(int));
    if (!ranks) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    memcpy(coord, base, (size_t)m->ndim * sizeof coord[0]);
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < ndims; i++) coord[dims[i]] = idx[i];
        {
            int64_t pos = 0;
            for (int d = 0; d < m->ndim; d++) pos = pos * m->dims[d] + coord[d];
            ranks[k] = m->ranks[pos];
        }
        for (int i = ndims - 1; i >= 0; i--) {
            if (++idx[i] < sdims[i]) break;
            idx[i] = 0;
        }
    }
    st = ldt_mesh_create(ndims, sdims, ranks, m->names[0] ? names : NULL, m->dev, out);
    free(ranks);
    return st == LDT_OK ? LDT_OK : ldt__trace(st, __FILE__, __LINE__);
}

ldt_status ldt_mesh_submesh(const ldt_mesh *m, int rank, int ndims, const int *dims,
                            ldt_mesh **out) {
    int64_t coord[LDT_MAX_DIMS];
    if (!m || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh submesh: arguments must not be NULL");
    LDT_CHECK(check_dim_list(m, ndims, dims, "mesh submesh"));
    LDT_CHECK(ldt_mesh_coord(m, rank, coord));
    LDT_CHECK(submesh_at(m, coord, ndims, dims, out));
    return LDT_OK;
}

ldt_status ldt_mesh_split(const ldt_mesh *m, int ndims, const int *dims, ldt_mesh ***out,
                          int *count) {
    ldt_status st = LDT_OK;
    int other[LDT_MAX_DIMS], nother = 0, n = 1, made = 0;
    int64_t coord[LDT_MAX_DIMS] = {0};
    ldt_mesh **list = NULL;
    if (!m || !out || !count)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "mesh split: arguments must not be NULL");
    LDT_CHECK(check_dim_list(m, ndims, dims, "mesh split"));
    for (int d = 0; d < m->ndim; d++) {
        int sel = 0;
        for (int i = 0; i < ndims; i++) sel |= dims[i] == d;
        if (!sel) {
            other[nother++] = d;
            n *= (int)m->dims[d];
        }
    }
    list = calloc((size_t)n, sizeof *list);
    if (!list) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "mesh: out of memory");
    for (made = 0; made < n; made++) {
        LDT_CHECK_GOTO(submesh_at(m, coord, ndims, dims, &list[made]));
        for (int i = nother - 1; i >= 0; i--) {
            if (++coord[other[i]] < m->dims[other[i]]) break;
            coord[other[i]] = 0;
        }
    }
    *out = list;
    *count = n;
    return LDT_OK;
fail:
    ldt_mesh_list_destroy(list, made);
    return st;
}

void ldt_mesh_list_destroy(ldt_mesh **list, int count) {
    if (!list) return;
    for (int i = 0; i < count; i++) ldt_mesh_destroy(list[i]);
    free(list);
}

static void format_rank_array(const ldt_mesh *m, int dim, int64_t *pos, char *buf, size_t cap,
                              size_t *at) {
    ldt__appendf(buf, cap, at, "[");
    for (int64_t i = 0; i < m->dims[dim]; i++) {
        if (i) ldt__appendf(buf, cap, at, ",");
        if (dim == m->ndim - 1)
            ldt__appendf(buf, cap, at, "%d", m->ranks[(*pos)++]);
        else
            format_rank_array(m, dim + 1, pos, buf, cap, at);
    }
    ldt__appendf(buf, cap, at, "]");
}

int ldt_mesh_format(const ldt_mesh *m, char *buf, size_t cap) {
    size_t at = 0;
    int identity = 1;
    if (cap) buf[0] = '\0';
    if (!m) {
        ldt__appendf(buf, cap, &at, "(null mesh)");
        return (int)at;
    }
    for (int i = 0; i < m->nranks; i++) identity &= m->ranks[i] == i;
    if (identity || m->names[0]) {
        for (int d = 0; d < m->ndim; d++) {
            if (m->names[d])
                ldt__appendf(buf, cap, &at, "%s%s=%lld", d ? "," : "", m->names[d],
                             (long long)m->dims[d]);
            else
                ldt__appendf(buf, cap, &at, "%s%lld", d ? "x" : "", (long long)m->dims[d]);
        }
        if (!identity) ldt__appendf(buf, cap, &at, ":");
    }
    if (!identity) {
        int64_t pos = 0;
        format_rank_array(m, 0, &pos, buf, cap, &at);
    }
    return (int)at;
}

int ldt_mesh_equal(const ldt_mesh *a, const ldt_mesh *b) {
    if (a == b) return 1;
    if (!a || !b || a->ndim != b->ndim || a->dev != b->dev || a->nranks != b->nranks) return 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->dims[d] != b->dims[d]) return 0;
        if ((a->names[d] == NULL) != (b->names[d] == NULL)) return 0;
        if (a->names[d] && strcmp(a->names[d], b->names[d]) != 0) return 0;
    }
    return memcmp(a->ranks, b->ranks, (size_t)a->nranks * sizeof(int)) == 0;
}
