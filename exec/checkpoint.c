/* Sharded checkpoints in the safetensors format: save, load onto any spec, offline merge, info
 * (docs/checkpoint.md). Every byte read from a file is bounds-checked before it is used. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "ldt/exec.h"
#include "core/error.h"
#include "core/mesh.h"
#include "exec/reduce.h"
#include "exec/shards.h"

#define CKPT_FORMAT "lazydt-checkpoint"
#define CKPT_VERSION 1
#define CKPT_MAX_HEADER (100LL << 20) /* safetensors headers above this are refused */
#define CKPT_MAX_INT 9007199254740992.0 /* 2^53: JSON numbers are doubles */

/* safetensors dtype names, in ldt_dtype order. */
static const char *const k_st_dtype[] = {"F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL"};
_Static_assert(sizeof k_st_dtype / sizeof k_st_dtype[0] == LDT_DTYPE_COUNT,
               "one safetensors name per dtype");

static int st_dtype_parse(const char *s, ldt_dtype *out) {
    for (int i = 0; i < LDT_DTYPE_COUNT; i++)
        if (strcmp(s, k_st_dtype[i]) == 0) {
            *out = (ldt_dtype)i;
            return 1;
        }
    return 0;
}

static int little_endian(void) {
    uint16_t x = 1;
    unsigned char c;
    memcpy(&c, &x, 1);
    return c == 1;
}

/* ---------------------------------------------------------------------------------------
 * A growing string with JSON escaping; out-of-memory sticks and is checked once at the end.
 */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_grow(sbuf *b, size_t more) {
    size_t cap;
    char *p;
    if (b->oom || b->len + more + 1 <= b->cap) return;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) cap *= 2;
    p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_putn(sbuf *b, const char *s, size_t n) {
    sb_grow(b, n);
    if (b->oom) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) LDT__PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_putn(b, tmp, (size_t)n);
        return;
    }
    sb_grow(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A JSON string literal: quotes, backslashes and control bytes escaped, UTF-8 kept. */
static void sb_json_str(sbuf *b, const char *s) {
    sb_putn(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_putn(b, e, 2);
        } else if (c < 0x20)
            sb_printf(b, "\\u%04x", c);
        else
            sb_putn(b, (const char *)&c, 1);
    }
    sb_putn(b, "\"", 1);
}

static void sb_ints(sbuf *b, const int64_t *v, int n) {
    sb_putn(b, "[", 1);
    for (int i = 0; i < n; i++) sb_printf(b, "%s%lld", i ? "," : "", (long long)v[i]);
    sb_putn(b, "]", 1);
}

/* ---------------------------------------------------------------------------------------
 * Small shared helpers.
 */
static int mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return 0;
    if (a != 0 && b > INT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static int add_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}

static void region_from_runs(int ndim, const ldt_dim_runs *runs, ldt_region *r) {
    memset(r, 0, sizeof *r);
    r->ndim = ndim;
    r->local_shape.ndim = ndim;
    r->numel = 1;
    r->nslices = 1;
    for (int d = 0; d < ndim; d++) {
        r->runs[d] = runs[d];
        r->offset[d] = runs[d].start;
        r->local_shape.dims[d] = runs[d].len * runs[d].blocks;
        r->numel *= r->local_shape.dims[d]; /* checked by the caller */
        /* an empty run may claim many blocks: saturate rather than overflow */
        if (!mul_ok(r->nslices, runs[d].blocks, &r->nslices)) r->nslices = INT64_MAX;
    }
    if (r->numel == 0) r->nslices = 0;
}

static int region_equal(const ldt_region *a, const ldt_region *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->runs[d].start != b->runs[d].start || a->runs[d].len != b->runs[d].len ||
            a->runs[d].blocks != b->runs[d].blocks ||
            (a->runs[d].blocks > 1 && a->runs[d].block_stride != b->runs[d].block_stride))
            return 0;
    return 1;
}

/* 1 when global index idx (ndim entries) lies in region r. */
static int region_contains(const ldt_region *r, const int64_t *idx) {
    for (int d = 0; d < r->ndim; d++) {
        const ldt_dim_runs *u = &r->runs[d];
        int64_t rel = idx[d] - u->start, j;
        if (rel < 0 || u->len == 0) return 0;
        j = u->blocks > 1 ? rel / u->block_stride : 0;
        if (j >= u->blocks || rel - j * (u->blocks > 1 ? u->block_stride : 0) >= u->len)
            return 0;
    }
    return r->numel > 0;
}

/* "[0:4,2:3]" with "a:b x k step s" for interleaved dims. */
static void sb_region(sbuf *b, const ldt_region *r) {
    sb_putn(b, "[", 1);
    for (int d = 0; d < r->ndim; d++) {
        const ldt_dim_runs *u = &r->runs[d];
        sb_printf(b, "%s%lld:%lld", d ? "," : "", (long long)u->start,
                  (long long)(u->start + u->len));
        if (u->blocks > 1)
            sb_printf(b, " x%lld step %lld", (long long)u->blocks, (long long)u->block_stride);
    }
    sb_putn(b, "]", 1);
}

static int valid_name(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    if (!*p) return 0;
    while (*p) {
        int n;
        uint32_t cp;
        if (*p < 0x20 || *p == 0x7f) return 0;
        if (*p < 0x80) {
            p++;
            continue;
        }
        if ((*p & 0xe0) == 0xc0) n = 1, cp = *p & 0x1f;
        else if ((*p & 0xf0) == 0xe0) n = 2, cp = *p & 0x0f;
        else if ((*p & 0xf8) == 0xf0) n = 3, cp = *p & 0x07;
        else return 0;
        p++;
        for (int i = 0; i < n; i++, p++) {
            if ((*p & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (*p & 0x3f);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0))
            return 0;
    }
    return 1;
}

static char *path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static char *rank_path(const char *dir, int rank, const char *suffix) {
    char name[64];
    snprintf(name, sizeof name, "rank-%d.safetensors%s", rank, suffix);
    return path_join(dir, name);
}

static void put_le64(unsigned char *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* ---------------------------------------------------------------------------------------
 * Save.
 */
typedef struct save_piece {
    int tensor;
    int rank;     /* the lowest rank holding the region: the file it goes into */
    int leader;   /* mesh position whose coordinate the data is reduced around */
    ldt_region region;
    const void *data;
    void *owned;  /* reduced copy for Partial specs */
    int64_t nbytes;
    uint64_t hash;
    char *meta;   /* the JSON text stored in __metadata__ */
} save_piece;

static int cmp_piece(const void *a, const void *b) {
    const save_piece *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* The reduction over the Partial mesh dims of the region at position `leader`, in
 * coordinate order (as ldt_full_tensor reduces). */
static ldt_status reduce_partial(const ldt_shards *s, const char *name, int leader,
                                 save_piece *pc) {
    const ldt_spec *spec = ldt_shards_spec(s);
    const ldt_mesh *m = spec->mesh;
    ldt__partial_info pi;
    int *pdims, np, nsrc, has_avg;
    int64_t navg, coord[LDT_MAX_DIMS];
    ldt_reduce_op op;
    const void **srcs;
    ldt__partial_info_of(spec, &pi);
    pdims = pi.pdims, np = pi.np, nsrc = pi.nsrc, op = pi.op, has_avg = pi.has_avg, navg = pi.navg;
    if (!ldt__reduce_supported(spec->dtype, has_avg ? LDT_REDUCE_AVG : op))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt save: tensor '%s': %s cannot reduce its Partial(%s)",
                 name, ldt_dtype_name(spec->dtype),
                 ldt_reduce_op_name(has_avg ? LDT_REDUCE_AVG : op));
    srcs = malloc((size_t)nsrc * sizeof *srcs);
    pc->owned = malloc((size_t)(pc->nbytes ? pc->nbytes : 1));
    if (!srcs || !pc->owned) {
        free(srcs);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt save: tensor '%s': out of memory", name);
    }
    LDT_CHECK(ldt_mesh_coord(m, m->ranks[leader], coord));
    for (int k = 0; k < nsrc; k++) {
        int rem = k, rank;
        for (int j = np - 1; j >= 0; j--) {
            coord[pdims[j]] = rem % m->dims[pdims[j]];
            rem /= (int)m->dims[pdims[j]];
        }
        if (ldt_mesh_rank_of(m, coord, &rank) != LDT_OK) {
            free(srcs);
            LDT_FAIL(LDT_ERR_INTERNAL, "ckpt save: tensor '%s': no rank at a Partial peer", name);
        }
        srcs[k] = ldt_shards_local(s, rank, NULL);
    }
    ldt__reduce_at(pc->owned, srcs, nsrc, 0, pc->region.numel, spec->dtype,
                   has_avg ? LDT_REDUCE_AVG : op, navg);
    free(srcs);
    pc->data = pc->owned;
    return LDT_OK;
}

static char *piece_meta(const ldt_spec *spec, const save_piece *pc) {
    sbuf b = {0};
    char buf[1024];
    int64_t run[4];
    sb_puts(&b, "{\"mesh\":");
    ldt_mesh_format(spec->mesh, buf, sizeof buf);
    sb_json_str(&b, buf);
    sb_puts(&b, ",\"placements\":");
    ldt_placements_format(spec->placements, spec->nplace, buf, sizeof buf);
    sb_json_str(&b, buf);
    sb_puts(&b, ",\"shape\":");
    sb_ints(&b, spec->shape.dims, spec->shape.ndim);
    sb_printf(&b, ",\"dtype\":\"%s\",\"rank\":%d,\"region\":[", ldt_dtype_name(spec->dtype),
              pc->rank);
    for (int d = 0; d < pc->region.ndim; d++) {
        run[0] = pc->region.runs[d].start;
        run[1] = pc->region.runs[d].len;
        run[2] = pc->region.runs[d].blocks;
        run[3] = pc->region.runs[d].block_stride;
        if (d) sb_puts(&b, ",");
        sb_ints(&b, run, 4);
    }
    sb_printf(&b, "],\"xxh64\":\"%016llx\"}", (unsigned long long)pc->hash);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

/* The pieces of tensor t: one per distinct non-empty region (an empty tensor keeps one). */
static ldt_status plan_tensor(int t, const char *name, const ldt_shards *s, save_piece **pieces,
                              int *np, int *cap) {
    const ldt_spec *spec = ldt_shards_spec(s);
    const ldt_mesh *m = spec->mesh;
    int first = *np, partial = 0;
    int64_t gnumel;
    LDT_CHECK(ldt_shape_numel(&spec->shape, &gnumel));
    for (int d = 0; d < spec->nplace; d++) partial |= spec->placements[d].kind == LDT_PLACE_PARTIAL;
    for (int pos = 0; pos < m->nranks; pos++) {
        ldt_region r;
        int dup = 0;
        LDT_CHECK(ldt_layout(spec, m->ranks[pos], &r));
        if (r.numel == 0 && (gnumel != 0 || *np > first)) continue;
        for (int i = first; i < *np && !dup; i++)
            if (region_equal(&(*pieces)[i].region, &r)) {
                dup = 1;
                if (m->ranks[pos] < (*pieces)[i].rank) (*pieces)[i].rank = m->ranks[pos];
            }
        if (dup) continue;
        if (*np == *cap) {
            int nc = *cap ? *cap * 2 : 64;
            save_piece *p = realloc(*pieces, (size_t)nc * sizeof *p);
            if (!p) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
            *pieces = p;
            *cap = nc;
        }
        save_piece *pc = &(*pieces)[(*np)++];
        memset(pc, 0, sizeof *pc);
        pc->tensor = t;
        pc->rank = m->ranks[pos];
        pc->leader = pos;
        pc->region = r;
        pc->nbytes = r.numel * (int64_t)ldt_dtype_size(spec->dtype);
    }
    for (int i = first; i < *np; i++) {
        save_piece *pc = &(*pieces)[i];
        if (partial)
            LDT_CHECK(reduce_partial(s, name, pc->leader, pc));
        else
            pc->data = ldt_shards_local(s, pc->rank, NULL);
        pc->hash = XXH64(pc->data, (size_t)pc->nbytes, 0);
        pc->meta = piece_meta(spec, pc);
        if (!pc->meta) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    }
    return LDT_OK;
}

/* Writes one rank's file (pieces[lo, hi) all belong to it) to path. */
static ldt_status write_rank(const char *path, int rank, int world, int ntensors,
                             uint64_t save_id, const char *const *names, const ldt_spec *const *specs,
                             const save_piece *pieces, int lo, int hi) {
    ldt_status st = LDT_OK;
    sbuf h = {0}, fmt = {0};
    FILE *f = NULL;
    int64_t off = 0;
    unsigned char len8[8];
    sb_printf(&fmt, "{\"format\":\"%s\",\"version\":%d,\"world_size\":%d,\"rank\":%d,"
                    "\"tensors\":%d,\"save_id\":\"%016llx\"}",
              CKPT_FORMAT, CKPT_VERSION, world, rank, ntensors, (unsigned long long)save_id);
    sb_puts(&h, "{\"__metadata__\":{\"lazydt\":");
    sb_json_str(&h, fmt.p ? fmt.p : "");
    for (int i = lo; i < hi; i++) {
        sb_puts(&h, ",");
        sb_json_str(&h, names[pieces[i].tensor]);
        sb_puts(&h, ":");
        sb_json_str(&h, pieces[i].meta);
    }
    sb_puts(&h, "}");
    for (int i = lo; i < hi; i++) {
        const ldt_region *r = &pieces[i].region;
        int64_t b[2] = {off, off + pieces[i].nbytes};
        sb_puts(&h, ",");
        sb_json_str(&h, names[pieces[i].tensor]);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":", k_st_dtype[specs[pieces[i].tensor]->dtype]);
        sb_ints(&h, r->local_shape.dims, r->ndim);
        sb_puts(&h, ",\"data_offsets\":");
        sb_ints(&h, b, 2);
        sb_puts(&h, "}");
        off = b[1];
    }
    sb_puts(&h, "}");
    while (!h.oom && h.len % 8) sb_puts(&h, " "); /* 8-byte aligned data, as safetensors pads */
    if (h.oom || fmt.oom) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    f = fopen(path, "wb");
    if (!f) LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot create %s: %s", path, strerror(errno));
    put_le64(len8, (uint64_t)h.len);
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.len, f) != h.len)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing %s: %s", path, strerror(errno));
    for (int i = lo; i < hi; i++)
        if (pieces[i].nbytes &&
            fwrite(pieces[i].data, 1, (size_t)pieces[i].nbytes, f) != (size_t)pieces[i].nbytes)
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing tensor '%s' to %s: %s",
                          names[pieces[i].tensor], path, strerror(errno));
    if (fclose(f) != 0) {
        f = NULL;
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: closing %s: %s", path, strerror(errno));
    }
    f = NULL;
fail:
    if (f) fclose(f);
    free(h.p);
    free(fmt.p);
    return st;
}

/* Removes rank-<k>.safetensors files with k >= world left by an earlier, larger save. */
static void remove_stale(const char *dir, int world) {
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        int k, n = 0;
        if (sscanf(e->d_name, "rank-%d.safetensors%n", &k, &n) == 1 && n > 0 &&
            e->d_name[n] == '\0' && k >= world) {
            char *p = path_join(dir, e->d_name);
            if (p) unlink(p);
            free(p);
        }
    }
    closedir(d);
}

ldt_status ldt_ckpt_save(const char *dir, int n, const char *const *names,
                         ldt_shards *const *tensors) {
    ldt_status st = LDT_OK;
    save_piece *pieces = NULL;
    const ldt_spec **specs = NULL;
    char **tmp = NULL;
    int np = 0, cap = 0, world = 1;
    uint64_t save_id;
    XXH64_state_t *hs = NULL;
    if (!dir || n < 0 || (n > 0 && (!names || !tensors)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt save: arguments must not be NULL");
    if (!little_endian())
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "ckpt save: safetensors data is little-endian; this host is not");
    specs = calloc((size_t)(n ? n : 1), sizeof *specs);
    if (!specs) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i])
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT, "ckpt save: name or tensor %d is NULL", i);
        if (!valid_name(names[i]) || strcmp(names[i], "__metadata__") == 0 ||
            strcmp(names[i], "lazydt") == 0)
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "ckpt save: tensor %d: name '%s' is not allowed: names are non-empty "
                          "UTF-8 without control characters, and not '__metadata__' or 'lazydt'",
                          i, names[i]);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "ckpt save: tensor name '%s' is given twice (%d and %d)", names[i], j,
                              i);
        specs[i] = ldt_shards_spec(tensors[i]);
        if (specs[i]->mesh->max_rank + 1 > world) world = specs[i]->mesh->max_rank + 1;
    }
    for (int i = 0; i < n; i++) LDT_CHECK_GOTO(plan_tensor(i, names[i], tensors[i], &pieces, &np, &cap));
    if (np > 1) qsort(pieces, (size_t)np, sizeof *pieces, cmp_piece);
    /* The save id ties the rank files of one save together: a hash of all their metadata. */
    hs = XXH64_createState();
    if (!hs) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    XXH64_reset(hs, (XXH64_hash_t)world);
    for (int i = 0; i < np; i++) {
        XXH64_update(hs, names[pieces[i].tensor], strlen(names[pieces[i].tensor]) + 1);
        XXH64_update(hs, pieces[i].meta, strlen(pieces[i].meta) + 1);
    }
    save_id = XXH64_digest(hs);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot create directory %s: %s", dir,
                      strerror(errno));
    tmp = calloc((size_t)world, sizeof *tmp);
    if (!tmp) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    /* Every rank's file is written under a temporary name first, then all are renamed: a
     * failed save leaves no new rank file beside old ones. */
    for (int r = 0, lo = 0; r < world; r++) {
        int hi = lo;
        while (hi < np && pieces[hi].rank == r) hi++;
        tmp[r] = rank_path(dir, r, ".tmp");
        if (!tmp[r]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
        LDT_CHECK_GOTO(write_rank(tmp[r], r, world, n, save_id, names, specs, pieces, lo, hi));
        lo = hi;
    }
    for (int r = 0; r < world; r++) {
        char *final = rank_path(dir, r, "");
        if (!final) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
        if (rename(tmp[r], final) != 0) {
            int e = errno;
            free(final);
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot rename %s: %s", tmp[r], strerror(e));
        }
        free(final);
        free(tmp[r]);
        tmp[r] = NULL;
    }
    remove_stale(dir, world);
fail:
    if (tmp)
        for (int r = 0; r < world; r++)
            if (tmp[r]) {
                unlink(tmp[r]);
                free(tmp[r]);
            }
    free(tmp);
    if (hs) XXH64_freeState(hs);
    for (int i = 0; i < np; i++) {
        free(pieces[i].owned);
        free(pieces[i].meta);
    }
    free(pieces);
    free(specs);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Reading: a checkpoint directory's files and the pieces their headers describe.
 */
typedef struct ck_piece {
    const char *name; /* borrowed from its file's header */
    int file;
    int rank;
    ldt_dtype dtype;
    ldt_shape gshape;
    ldt_region region;
    int64_t begin, nbytes; /* absolute file offset and size of the data */
    uint64_t hash;
    const char *mesh, *placements; /* borrowed */
} ck_piece;

typedef struct ck_file {
    char *path;
    int64_t size;
    cJSON *header;
} ck_file;

typedef struct ckpt {
    char *dir;
    int world;
    int tensors; /* as the format entry says */
    ck_file *files;
    ck_piece *pieces;
    int npieces, cap;
    cJSON **metas; /* parsed metadata strings, owned */
    int nmetas, metacap;
    FILE *open;   /* the last file read from */
    int open_idx;
} ckpt;

static void ckpt_close(ckpt *c) {
    if (!c) return;
    if (c->files)
        for (int i = 0; i < c->world; i++) {
            free(c->files[i].path);
            cJSON_Delete(c->files[i].header);
        }
    for (int i = 0; i < c->nmetas; i++) cJSON_Delete(c->metas[i]);
    if (c->open) fclose(c->open);
    free(c->metas);
    free(c->files);
    free(c->pieces);
    free(c->dir);
    free(c);
}

/* A JSON number that is a non-negative integer a double holds exactly. */
static int json_i64(const cJSON *j, int64_t *out) {
    double v;
    if (!cJSON_IsNumber(j)) return 0;
    v = j->valuedouble;
    if (!(v >= 0 && v <= CKPT_MAX_INT) || v != (double)(int64_t)v) return 0;
    *out = (int64_t)v;
    return 1;
}

/* An array of at most cap such integers. */
static int json_ints(const cJSON *j, int64_t *out, int cap, int *n) {
    int k = 0;
    const cJSON *e;
    if (!cJSON_IsArray(j)) return 0;
    cJSON_ArrayForEach(e, j) {
        if (k >= cap || !json_i64(e, &out[k])) return 0;
        k++;
    }
    *n = k;
    return 1;
}

static const char *json_str(const cJSON *obj, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(j) && j->valuestring ? j->valuestring : NULL;
}

static ldt_status keep_meta(ckpt *c, cJSON *j) {
    if (c->nmetas == c->metacap) {
        int nc = c->metacap ? c->metacap * 2 : 64;
        cJSON **p = realloc(c->metas, (size_t)nc * sizeof *p);
        if (!p) {
            cJSON_Delete(j);
            LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        }
        c->metas = p;
        c->metacap = nc;
    }
    c->metas[c->nmetas++] = j;
    return LDT_OK;
}

/* Reads and checks a file's header: length, JSON, the format entry. */
static ldt_status read_header(int r, const char *path, int64_t *world, uint64_t *save_id,
                              int64_t *ntensors, cJSON **out, int64_t *fsize, int64_t *hlen) {
    ldt_status st = LDT_OK;
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    uint64_t n = 0;
    char *buf = NULL;
    const char *end = NULL, *fmt;
    cJSON *root = NULL, *meta, *info = NULL;
    int64_t size, v;
    *out = NULL;
    if (!f) {
        if (errno == ENOENT)
            LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s is missing", path);
        LDT_FAIL(LDT_ERR_SYSTEM, "ckpt: cannot open %s: %s", path, strerror(errno));
    }
    if (fseeko(f, 0, SEEK_END) != 0 || (size = (int64_t)ftello(f)) < 0 || fseeko(f, 0, SEEK_SET) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt: cannot read %s: %s", path, strerror(errno));
    if (size < 8)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                      "ckpt: %s is truncated: %lld bytes, shorter than the 8-byte header length",
                      path, (long long)size);
    if (fread(len8, 1, 8, f) != 8)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s is truncated in the header length", path);
    for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
    if (n > (uint64_t)CKPT_MAX_HEADER)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: header length %llu exceeds the %lld-byte cap",
                      path, (unsigned long long)n, (long long)CKPT_MAX_HEADER);
    if ((int64_t)n > size - 8)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                      "ckpt: %s is truncated: header length %llu runs past the end of the file "
                      "(%lld bytes)",
                      path, (unsigned long long)n, (long long)size);
    buf = malloc(n ? (size_t)n : 1);
    if (!buf) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: %s: out of memory for the header", path);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s is truncated in the header", path);
    root = cJSON_ParseWithLengthOpts(buf, (size_t)n, &end, 0);
    if (!root || !cJSON_IsObject(root))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: bad JSON header near byte %lld", path,
                      (long long)(end && end >= buf && end <= buf + n ? end - buf : 0));
    for (const char *p = end; p && p < buf + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: bad JSON header: text after the object at byte %lld",
                          path, (long long)(p - buf));
    meta = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    if (!cJSON_IsObject(meta))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the header has no __metadata__ object: not a lazydt checkpoint file", path);
    fmt = json_str(meta, "lazydt");
    if (!fmt)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: __metadata__ has no 'lazydt' string: not a lazydt checkpoint file", path);
    info = cJSON_Parse(fmt);
    if (!cJSON_IsObject(info) || !json_str(info, "format") ||
        strcmp(json_str(info, "format"), CKPT_FORMAT) != 0)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the 'lazydt' metadata is not a %s entry", path, CKPT_FORMAT);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(info, "version"), &v))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the format version is missing", path);
    if (v != CKPT_VERSION)
        LDT_FAIL_GOTO(LDT_ERR_UNSUPPORTED, "ckpt: %s: format version %lld; this build reads version %d",
                      path, (long long)v, CKPT_VERSION);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(info, "world_size"), world) || *world < 1 ||
        *world > LDT_MESH_MAX_RANKS)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: world_size is missing or out of range", path);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(info, "rank"), &v) || v != r)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: its metadata names another rank than %d", path, r);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(info, "tensors"), ntensors))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the tensor count is missing", path);
    {
        const char *id = json_str(info, "save_id");
        char *e = NULL;
        if (!id || strlen(id) != 16)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the save id is missing", path);
        *save_id = strtoull(id, &e, 16);
        if (!e || *e)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the save id is not hexadecimal", path);
    }
    *out = root;
    root = NULL;
    *fsize = size;
    *hlen = (int64_t)n;
fail:
    cJSON_Delete(info);
    cJSON_Delete(root);
    free(buf);
    fclose(f);
    return st;
}

static ldt_status add_piece(ckpt *c, int r, const char *path, const cJSON *entry,
                            const cJSON *meta, int64_t data_start, int64_t data_size) {
    ldt_status st = LDT_OK;
    const char *name = entry->string, *s;
    const cJSON *j;
    ck_piece pc;
    cJSON *m = NULL;
    int64_t local[LDT_MAX_DIMS + 1], offs[3], numel = 1, nbytes = -1;
    int nl = 0, no = 0, ng = 0, nreg = 0;
    ldt_dim_runs runs[LDT_MAX_DIMS];
    memset(&pc, 0, sizeof pc);
    pc.name = name;
    pc.file = r;
    if (!cJSON_IsObject(entry))
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the entry is not an object", path, name);
    s = json_str(entry, "dtype");
    if (!s || !st_dtype_parse(s, &pc.dtype))
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': bad dtype %s%s%s", path, name,
                 s ? "'" : "", s ? s : "(missing)", s ? "'" : "");
    if (!json_ints(cJSON_GetObjectItemCaseSensitive(entry, "shape"), local, LDT_MAX_DIMS, &nl))
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': bad shape (non-negative integers, at most %d dims)",
                 path, name, LDT_MAX_DIMS);
    if (!json_ints(cJSON_GetObjectItemCaseSensitive(entry, "data_offsets"), offs, 3, &no) ||
        no != 2 || offs[0] > offs[1] || offs[1] > data_size)
        LDT_FAIL(LDT_ERR_CORRUPT,
                 "ckpt: %s: tensor '%s': bad data_offsets (two integers within the %lld-byte data section)",
                 path, name, (long long)data_size);
    for (int d = 0; d < nl; d++)
        if (!mul_ok(numel, local[d], &numel))
            LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the shape overflows", path, name);
    if (!mul_ok(numel, (int64_t)ldt_dtype_size(pc.dtype), &nbytes) || nbytes != offs[1] - offs[0])
        LDT_FAIL(LDT_ERR_CORRUPT,
                 "ckpt: %s: tensor '%s': data_offsets hold %lld bytes, its shape and dtype need %lld",
                 path, name, (long long)(offs[1] - offs[0]), (long long)nbytes);
    pc.begin = data_start + offs[0];
    pc.nbytes = nbytes;
    /* the sharding, from __metadata__ */
    s = json_str(meta, name);
    if (!s)
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s' has no sharding string in __metadata__",
                 path, name);
    m = cJSON_Parse(s);
    if (!cJSON_IsObject(m))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': its sharding metadata is not a JSON object",
                      path, name);
    {
        ldt_dtype mdt;
        const char *ds = json_str(m, "dtype"), *hs = json_str(m, "xxh64");
        char *e = NULL;
        int64_t rank;
        if (!ds || ldt_dtype_parse(ds, &mdt) != LDT_OK || mdt != pc.dtype)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                          "ckpt: %s: tensor '%s': metadata dtype %s does not match the entry's %s",
                          path, name, ds ? ds : "(missing)", k_st_dtype[pc.dtype]);
        if (!hs || strlen(hs) != 16)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the checksum is missing", path, name);
        pc.hash = strtoull(hs, &e, 16);
        if (!e || *e)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the checksum is not hexadecimal",
                          path, name);
        if (!json_i64(cJSON_GetObjectItemCaseSensitive(m, "rank"), &rank) || rank != r)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': metadata names another rank than %d",
                          path, name, r);
        pc.rank = r;
    }
    pc.mesh = json_str(m, "mesh");
    pc.placements = json_str(m, "placements");
    if (!pc.mesh || !pc.placements)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': mesh or placements missing", path, name);
    if (!json_ints(cJSON_GetObjectItemCaseSensitive(m, "shape"), pc.gshape.dims, LDT_MAX_DIMS, &ng))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': bad global shape", path, name);
    pc.gshape.ndim = ng;
    {
        int64_t gn;
        if (ldt_shape_numel(&pc.gshape, &gn) != LDT_OK)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the global shape overflows", path, name);
        if (!mul_ok(gn, (int64_t)ldt_dtype_size(pc.dtype), &gn))
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the global shape overflows", path, name);
    }
    j = cJSON_GetObjectItemCaseSensitive(m, "region");
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != ng)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the region needs one run per dim of %d",
                      path, name, ng);
    if (nl != ng)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': local shape has %d dims, global %d",
                      path, name, nl, ng);
    {
        const cJSON *e;
        cJSON_ArrayForEach(e, j) {
            int64_t v[5], end, last;
            int k = 0;
            ldt_dim_runs *u = &runs[nreg];
            if (!json_ints(e, v, 5, &k) || k != 4)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s: tensor '%s': region dim %d is not [start,len,blocks,stride]",
                              path, name, nreg);
            u->start = v[0];
            u->len = v[1];
            u->blocks = v[2];
            u->block_stride = v[3];
            /* runs in bounds and apart: start + (blocks-1)*stride + len <= n, stride >= len */
            if (u->blocks < 1 || (u->blocks > 1 && u->block_stride < u->len) ||
                !mul_ok(u->blocks - 1, u->blocks > 1 ? u->block_stride : 0, &last) ||
                !add_ok(u->start, last, &end) || !add_ok(end, u->len, &end) ||
                end > pc.gshape.dims[nreg] || !mul_ok(u->len, u->blocks, &last) ||
                last != local[nreg])
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s: tensor '%s': region dim %d [%lld,%lld,%lld,%lld] does not "
                              "fit the global size %lld and local size %lld",
                              path, name, nreg, (long long)v[0], (long long)v[1], (long long)v[2],
                              (long long)v[3], (long long)pc.gshape.dims[nreg], (long long)local[nreg]);
            nreg++;
        }
    }
    region_from_runs(ng, runs, &pc.region);
    if (c->npieces == c->cap) {
        int nc = c->cap ? c->cap * 2 : 64;
        ck_piece *p = realloc(c->pieces, (size_t)nc * sizeof *p);
        if (!p) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        c->pieces = p;
        c->cap = nc;
    }
    c->pieces[c->npieces++] = pc;
    LDT_CHECK(keep_meta(c, m)); /* mesh and placements point into it */
    return LDT_OK;
fail:
    cJSON_Delete(m);
    return st;
}

static int cmp_ck_piece(const void *a, const void *b) {
    const ck_piece *x = a, *y = b;
    int k = strcmp(x->name, y->name);
    if (k) return k;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The world size: from rank-0's file, or (when it is missing) from any rank file present. */
static ldt_status find_world(const char *dir, int *world) {
    DIR *d;
    struct dirent *e;
    char *p0 = rank_path(dir, 0, "");
    struct stat sb;
    int found = -1;
    if (!p0) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    if (stat(p0, &sb) == 0) {
        free(p0);
        *world = -1; /* read it from rank 0 */
        return LDT_OK;
    }
    free(p0);
    d = opendir(dir);
    if (!d) LDT_FAIL(LDT_ERR_SYSTEM, "ckpt: cannot open the directory %s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        int k, n = 0;
        if (sscanf(e->d_name, "rank-%d.safetensors%n", &k, &n) == 1 && n > 0 &&
            e->d_name[n] == '\0' && k > 0 && (found < 0 || k < found))
            found = k;
    }
    closedir(d);
    if (found < 0)
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s holds no rank-<r>.safetensors files", dir);
    *world = -2 - found; /* read it from that rank */
    return LDT_OK;
}

static ldt_status ckpt_open(const char *dir, ckpt **out) {
    ldt_status st = LDT_OK;
    ckpt *c = NULL;
    int probe = -1;
    int64_t world = 0, ntens = 0, first_tens = 0;
    uint64_t first_id = 0;
    *out = NULL;
    if (!little_endian())
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "ckpt: safetensors data is little-endian; this host is not");
    LDT_CHECK(find_world(dir, &probe));
    c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    }
    c->open_idx = -1;
    if (probe <= -2) {
        /* rank 0 is missing: say so, with the world size another rank's header gives */
        int k = -2 - probe;
        char *p = rank_path(dir, k, ""), *p0 = rank_path(dir, 0, "");
        cJSON *h = NULL;
        int64_t fs, hl;
        uint64_t id;
        if (!p || !p0) {
            free(p);
            free(p0);
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        }
        st = read_header(k, p, &world, &id, &ntens, &h, &fs, &hl);
        cJSON_Delete(h);
        if (st == LDT_OK)
            st = ldt__error(LDT_ERR_CORRUPT, "ckpt: %s is missing (the checkpoint has %lld ranks, "
                                             "as %s says)", p0, (long long)world, p);
        free(p);
        free(p0);
        goto fail;
    }
    for (int r = 0; r < (c->world ? c->world : 1); r++) {
        char *path = rank_path(dir, r, "");
        cJSON *h = NULL, *e;
        const cJSON *meta;
        int64_t fsize = 0, hlen = 0, w = 0;
        uint64_t id = 0;
        if (!path) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        if (r > 0 && access(path, F_OK) != 0 && errno == ENOENT) {
            st = ldt__trace(ldt__error(LDT_ERR_CORRUPT,
                                       "ckpt: %s is missing (the checkpoint has %d ranks)", path,
                                       c->world),
                            __FILE__, __LINE__);
            free(path);
            goto fail;
        }
        st = read_header(r, path, &w, &id, &ntens, &h, &fsize, &hlen);
        if (st != LDT_OK) {
            free(path);
            goto fail;
        }
        if (r == 0) {
            c->world = (int)w;
            c->files = calloc((size_t)w, sizeof *c->files);
            if (!c->files) {
                free(path);
                cJSON_Delete(h);
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
            }
            first_id = id;
            first_tens = ntens;
            c->tensors = (int)(ntens > INT32_MAX ? INT32_MAX : ntens);
        } else if (w != c->world || id != first_id || ntens != first_tens) {
            ldt__error(LDT_ERR_CORRUPT,
                       "ckpt: %s belongs to another save (world size %lld, save id %016llx; "
                       "rank-0.safetensors has %d, %016llx)",
                       path, (long long)w, (unsigned long long)id, c->world,
                       (unsigned long long)first_id);
            st = LDT_ERR_CORRUPT;
            free(path);
            cJSON_Delete(h);
            goto fail;
        }
        c->files[r].path = path;
        c->files[r].header = h;
        c->files[r].size = fsize;
        meta = cJSON_GetObjectItemCaseSensitive(h, "__metadata__");
        cJSON_ArrayForEach(e, h) {
            if (!e->string)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: a header entry has no name", path);
            if (strcmp(e->string, "__metadata__") == 0) continue;
            LDT_CHECK_GOTO(add_piece(c, r, path, e, meta, 8 + hlen, fsize - 8 - hlen));
        }
        /* every metadata key but 'lazydt' must describe an entry of this file */
        cJSON_ArrayForEach(e, meta) {
            if (!e->string || strcmp(e->string, "lazydt") == 0) continue;
            if (!cJSON_GetObjectItemCaseSensitive(h, e->string))
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s: tensor '%s' has sharding metadata but no entry", path,
                              e->string);
        }
    }
    if (c->npieces > 1) qsort(c->pieces, (size_t)c->npieces, sizeof *c->pieces, cmp_ck_piece);
    /* one shard per tensor per file, and the same tensor everywhere */
    {
        int distinct = 0;
        for (int i = 0; i < c->npieces; i++) {
            const ck_piece *a = &c->pieces[i - (i > 0)], *b = &c->pieces[i];
            if (i == 0 || strcmp(a->name, b->name) != 0) {
                distinct++;
                continue;
            }
            if (a->rank == b->rank)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s' appears twice",
                              c->files[b->file].path, b->name);
            if (a->dtype != b->dtype || !ldt_shape_equal(&a->gshape, &b->gshape))
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: tensor '%s': %s and %s disagree on its global shape or dtype",
                              b->name, c->files[a->file].path, c->files[b->file].path);
        }
        if (distinct != c->tensors)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                          "ckpt: %s: the files hold %d tensors, the save wrote %d: a file is from "
                          "another save or was cut",
                          dir, distinct, c->tensors);
    }
    *out = c;
    return LDT_OK;
fail:
    ckpt_close(c);
    return st;
}

/* [lo, hi): the pieces of the tensor called name (the pieces are sorted by name). */
static int find_tensor(const ckpt *c, const char *name, int *lo, int *hi) {
    int a = 0, b = c->npieces;
    while (a < b) {
        int mid = a + (b - a) / 2;
        if (strcmp(c->pieces[mid].name, name) < 0) a = mid + 1;
        else b = mid;
    }
    *lo = a;
    while (b < c->npieces && strcmp(c->pieces[b].name, name) == 0) b++;
    *hi = b;
    return b > a;
}

static ldt_status read_bytes(ckpt *c, const ck_piece *pc, void *dst) {
    const char *path = c->files[pc->file].path;
    if (c->open_idx != pc->file) {
        if (c->open) fclose(c->open);
        c->open = fopen(path, "rb");
        c->open_idx = c->open ? pc->file : -1;
        if (!c->open) {
            if (errno == ENOENT) LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s is missing", path);
            LDT_FAIL(LDT_ERR_SYSTEM, "ckpt: cannot open %s: %s", path, strerror(errno));
        }
    }
    if (pc->nbytes == 0) return LDT_OK;
    if (fseeko(c->open, (off_t)pc->begin, SEEK_SET) != 0 ||
        fread(dst, 1, (size_t)pc->nbytes, c->open) != (size_t)pc->nbytes)
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s' is truncated: %lld bytes at %lld", path,
                 pc->name, (long long)pc->nbytes, (long long)pc->begin);
    return LDT_OK;
}

/* Copies a piece's local data into the full tensor (full NULL: only marks), marking each
 * element in `seen`; an element seen before is an overlap. Returns -1 when fine, else the global linear index of
 * the first overlapping element. */
static int64_t place_piece(const ck_piece *pc, size_t elem, const char *local, char *full,
                           unsigned char *seen) {
    const ldt_region *r = &pc->region;
    const ldt_shape *shape = &pc->gshape;
    int nd = r->ndim;
    int64_t gstride[LDT_MAX_DIMS], idx[LDT_MAX_DIMS] = {0}, rows = 1;
    if (r->numel == 0) return -1;
    if (nd == 0) {
        if (seen[0] & 1) return 0;
        seen[0] |= 1;
        if (full) memcpy(full, local, elem);
        return -1;
    }
    gstride[nd - 1] = 1;
    for (int d = nd - 2; d >= 0; d--) gstride[d] = gstride[d + 1] * shape->dims[d + 1];
    for (int d = 0; d < nd - 1; d++) rows *= r->local_shape.dims[d];
    for (int64_t row = 0; row < rows; row++) {
        int64_t g = 0;
        const ldt_dim_runs *last = &r->runs[nd - 1];
        for (int d = 0; d < nd - 1; d++) {
            const ldt_dim_runs *u = &r->runs[d];
            g += ((idx[d] / u->len) * u->block_stride + u->start + idx[d] % u->len) * gstride[d];
        }
        for (int64_t b = 0; b < last->blocks; b++) {
            int64_t gs = g + last->start + b * last->block_stride;
            for (int64_t k = gs; k < gs + last->len; k++) {
                if (seen[k >> 3] & (1u << (k & 7))) return k;
                seen[k >> 3] |= (unsigned char)(1u << (k & 7));
            }
            if (full) memcpy(full + (size_t)gs * elem, local, (size_t)last->len * elem);
            local += (size_t)last->len * elem;
        }
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < r->local_shape.dims[d]) break;
            idx[d] = 0;
        }
    }
    return -1;
}

static void unravel(const ldt_shape *s, int64_t k, int64_t *idx) {
    for (int d = s->ndim - 1; d >= 0; d--) {
        idx[d] = s->dims[d] ? k % s->dims[d] : 0;
        k = s->dims[d] ? k / s->dims[d] : 0;
    }
}

static void fmt_index(const ldt_shape *s, const int64_t *idx, char *buf, size_t cap) {
    ldt_shape t = *s;
    for (int d = 0; d < s->ndim; d++) t.dims[d] = idx[d];
    ldt_shape_format(&t, buf, cap);
}

/* The full tensor of pieces [lo, hi) into *out (malloc'd, *nbytes bytes): every checksum
 * verified, every element covered exactly once. */
/* Piece i of tensor lo..: its bytes into buf, its checksum checked, its elements marked in
 * seen (and copied into full unless NULL); an element marked before is an overlap. */
static ldt_status take_piece(ckpt *c, int lo, int i, char *buf, char *full, unsigned char *seen) {
    const ck_piece *pc = &c->pieces[i];
    uint64_t h;
    int64_t k, idx[LDT_MAX_DIMS];
    char ib[256];
    LDT_CHECK(read_bytes(c, pc, buf));
    h = XXH64(buf, (size_t)pc->nbytes, 0);
    if (h != pc->hash)
        LDT_FAIL(LDT_ERR_CORRUPT,
                 "ckpt: %s: tensor '%s': checksum mismatch (xxh64 %016llx, the header says %016llx): "
                 "the data is damaged",
                 c->files[pc->file].path, pc->name, (unsigned long long)h, (unsigned long long)pc->hash);
    if ((k = place_piece(pc, ldt_dtype_size(pc->dtype), buf, full, seen)) >= 0) {
        const char *other = "another shard";
        unravel(&pc->gshape, k, idx);
        fmt_index(&pc->gshape, idx, ib, sizeof ib);
        for (int j = lo; j < i; j++)
            if (region_contains(&c->pieces[j].region, idx)) {
                other = c->files[c->pieces[j].file].path;
                break;
            }
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': overlapping regions: element %s is also stored in %s",
                 c->files[pc->file].path, pc->name, ib, other);
    }
    return LDT_OK;
}

/* Every element of p0's tensor marked in seen, or the first missing one named. */
static ldt_status all_covered(const ckpt *c, const ck_piece *p0, int64_t numel, const unsigned char *seen) {
    int64_t idx[LDT_MAX_DIMS];
    char ib[256], sb[128];
    for (int64_t k = 0; k < numel; k++)
        if (!(seen[k >> 3] & (1u << (k & 7)))) {
            unravel(&p0->gshape, k, idx);
            fmt_index(&p0->gshape, idx, ib, sizeof ib);
            ldt_shape_format(&p0->gshape, sb, sizeof sb);
            LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: tensor '%s' %s: missing regions: element %s is in no shard in %s",
                     p0->name, sb, ib, c->dir);
        }
    return LDT_OK;
}

/* Tensor lo..hi's element count into *numel; fewer stored elements than that means missing
 * regions: said before anything of the tensor's size is allocated. */
static ldt_status stored_enough(const ckpt *c, int lo, int hi, int64_t *numel) {
    const ck_piece *p0 = &c->pieces[lo];
    int64_t stored = 0;
    char sb[128];
    LDT_CHECK(ldt_shape_numel(&p0->gshape, numel));
    for (int i = lo; i < hi; i++) stored += c->pieces[i].region.numel; /* each <= file size */
    if (stored >= *numel) return LDT_OK;
    ldt_shape_format(&p0->gshape, sb, sizeof sb);
    LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: tensor '%s' %s: missing regions: its shards in %s hold %lld of %lld elements",
             p0->name, sb, c->dir, (long long)stored, (long long)*numel);
}

static ldt_status assemble(ckpt *c, int lo, int hi, void **out, int64_t *nbytes) {
    ldt_status st = LDT_OK;
    const ck_piece *p0 = &c->pieces[lo];
    size_t elem = ldt_dtype_size(p0->dtype);
    int64_t numel, total;
    char *full = NULL, *buf = NULL;
    unsigned char *seen = NULL;
    *out = NULL;
    LDT_CHECK(stored_enough(c, lo, hi, &numel));
    total = numel * (int64_t)elem; /* checked when the piece was read */
    full = malloc((size_t)(total ? total : 1));
    seen = calloc((size_t)(numel / 8 + 1), 1);
    if (!full || !seen) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: tensor '%s': out of memory", p0->name);
    for (int i = lo; i < hi; i++) {
        const ck_piece *pc = &c->pieces[i];
        free(buf);
        buf = malloc((size_t)(pc->nbytes ? pc->nbytes : 1));
        if (!buf) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: tensor '%s': out of memory", pc->name);
        LDT_CHECK_GOTO(take_piece(c, lo, i, buf, full, seen));
    }
    LDT_CHECK_GOTO(all_covered(c, p0, numel, seen));
    *out = full;
    *nbytes = total;
    full = NULL;
fail:
    free(full);
    free(buf);
    free(seen);
    return st;
}

/* Tensor lo..hi of c as shards of target, moved there from the mesh it was saved on: each
 * saved rank's shard is rebuilt from the stored pieces (a replica from the one copy stored),
 * then the cross-mesh redistribution moves it onto the target mesh and placements. The full
 * tensor is never assembled; every piece's checksum, overlaps and gaps are checked as the
 * merge checks them. Partial tensors were reduced at save: their saved placements count as
 * Replicate on those mesh dims. */
static ldt_status load_tensor(ckpt *c, int lo, int hi, const ldt_spec *target, ldt_shards **out) {
    ldt_status st = LDT_OK;
    const ck_piece *p0 = &c->pieces[lo];
    int64_t numel;
    ldt_mesh *sm = NULL;
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec sspec;
    ldt_shards *src = NULL, *moved = NULL;
    ldt_redist_plan *plan = NULL;
    ldt_region *regs = NULL;
    unsigned char *seen = NULL, *filled = NULL;
    char *buf = NULL;
    int npl = 0, nranks;
    *out = NULL;
    LDT_CHECK(stored_enough(c, lo, hi, &numel));
    for (int i = lo; i < hi; i++)
        if (!c->pieces[i].mesh || !c->pieces[i].placements || strcmp(c->pieces[i].mesh, p0->mesh) != 0 ||
            strcmp(c->pieces[i].placements, p0->placements) != 0)
            LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': its shards disagree on the mesh or placements "
                     "it was saved with", c->files[c->pieces[i].file].path, p0->name);
    if (ldt_mesh_parse(p0->mesh, LDT_DEVICE_CPU, &sm) != LDT_OK ||
        ldt_placements_parse(p0->placements, p0->gshape.ndim, pl, LDT_MAX_DIMS, &npl) != LDT_OK)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the saved mesh '%s' or placements '%s' do not "
                      "read: %s", c->files[p0->file].path, p0->name, p0->mesh, p0->placements, ldt_last_error());
    for (int d = 0; d < npl; d++)
        if (pl[d].kind == LDT_PLACE_PARTIAL) pl[d] = ldt_replicate(); /* reduced at save */
    if (ldt_spec_init(&sspec, sm, &p0->gshape, pl, npl, p0->dtype) != LDT_OK)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': the saved mesh '%s' and placements '%s' do not "
                      "fit its shape: %s", c->files[p0->file].path, p0->name, p0->mesh, p0->placements,
                      ldt_last_error());
    nranks = sm->max_rank + 1;
    LDT_CHECK_GOTO(ldt_shards_create(&sspec, &src));
    regs = calloc((size_t)nranks, sizeof *regs);
    filled = calloc((size_t)nranks, 1);
    seen = calloc((size_t)(numel / 8 + 1), 1);
    if (!regs || !filled || !seen) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: tensor '%s': out of memory", p0->name);
    for (int r = 0; r < nranks; r++)
        if (ldt_layout(&sspec, r, &regs[r]) != LDT_OK) filled[r] = 1; /* not in the mesh: nothing to hold */
    for (int i = lo; i < hi; i++) {
        const ck_piece *pc = &c->pieces[i];
        int matched = 0;
        free(buf);
        buf = malloc((size_t)(pc->nbytes ? pc->nbytes : 1));
        if (!buf) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: tensor '%s': out of memory", pc->name);
        LDT_CHECK_GOTO(take_piece(c, lo, i, buf, NULL, seen));
        for (int r = 0; r < nranks; r++) /* this shard and its replicas */
            if (!filled[r] && region_equal(&regs[r], &pc->region)) {
                int64_t nb = 0;
                void *local = ldt_shards_local(src, r, &nb);
                if (nb != pc->nbytes)
                    LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': %lld bytes stored for a region of "
                                  "%lld", c->files[pc->file].path, pc->name, (long long)pc->nbytes, (long long)nb);
                if (nb) memcpy(local, buf, (size_t)nb);
                filled[r] = 1;
                matched = 1;
            }
        if (!matched && pc->region.numel > 0)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: tensor '%s': a stored region that no rank of the saved "
                          "mesh %s (%s) holds", c->files[pc->file].path, pc->name, p0->mesh, p0->placements);
    }
    LDT_CHECK_GOTO(all_covered(c, p0, numel, seen));
    for (int r = 0; r < nranks; r++)
        if (!filled[r] && regs[r].numel > 0)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: tensor '%s': rank %d's shard on the saved mesh %s is not "
                          "stored as one piece", p0->name, r, p0->mesh);
    LDT_CHECK_GOTO(ldt_redist_plan_create(&sspec, target->mesh, target->placements, target->nplace, NULL, &plan));
    LDT_CHECK_GOTO(ldt_redistribute_shards(src, plan, &moved));
    { /* the moved shards may borrow the saved mesh, freed here: the caller's spec instead */
        int n = target->mesh->nranks;
        const void **locals = calloc((size_t)n, sizeof *locals);
        if (!locals) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: tensor '%s': out of memory", p0->name);
        for (int i = 0; i < n; i++) /* from_local takes the mesh's ranks in row-major order */
            locals[i] = ldt_shards_local(moved, target->mesh->ranks[i], NULL);
        st = ldt_from_local(target, locals, out);
        free(locals);
        if (st != LDT_OK) goto fail;
    }
fail:
    ldt_shards_destroy(moved);
    ldt_redist_plan_destroy(plan);
    ldt_shards_destroy(src);
    ldt_mesh_destroy(sm);
    free(regs);
    free(filled);
    free(seen);
    free(buf);
    return st;
}

/* ---------------------------------------------------------------------------------------
 * Load, merge, info.
 */
ldt_status ldt_ckpt_load_n(const char *dir, int n, const char *const *names,
                           const ldt_spec *const *targets, ldt_shards **out) {
    ldt_status st = LDT_OK;
    ckpt *c = NULL;
    if (!dir || n < 0 || (n > 0 && (!names || !targets || !out)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt load: arguments must not be NULL");
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!names[i] || !targets[i])
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt load: name or target %d is NULL", i);
        LDT_CHECK(ldt_spec_check(targets[i]));
    }
    LDT_CHECK(ckpt_open(dir, &c));
    for (int i = 0; i < n; i++) {
        const ldt_spec *target = targets[i];
        int lo, hi;
        if (!find_tensor(c, names[i], &lo, &hi))
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "ckpt load: tensor '%s' is not in the checkpoint %s", names[i], dir);
        if (c->pieces[lo].dtype != target->dtype ||
            !ldt_shape_equal(&c->pieces[lo].gshape, &target->shape)) {
            char a[128], b[128];
            ldt_shape_format(&c->pieces[lo].gshape, a, sizeof a);
            ldt_shape_format(&target->shape, b, sizeof b);
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "ckpt load: tensor '%s' is %s %s in %s; the target spec asks for %s %s",
                          names[i], a, ldt_dtype_name(c->pieces[lo].dtype), dir, b,
                          ldt_dtype_name(target->dtype));
        }
        LDT_CHECK_GOTO(load_tensor(c, lo, hi, target, &out[i]));
    }
fail:
    if (st != LDT_OK) /* all or nothing */
        for (int i = 0; i < n; i++) {
            ldt_shards_destroy(out[i]);
            out[i] = NULL;
        }
    ckpt_close(c);
    return st;
}

ldt_status ldt_ckpt_load(const char *dir, const char *name, const ldt_spec *target,
                         ldt_shards **out) {
    if (!name || !target || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt load: arguments must not be NULL");
    LDT_CHECK(ldt_ckpt_load_n(dir, 1, &name, &target, out));
    return LDT_OK;
}

ldt_status ldt_ckpt_merge(const char *dir, const char *out_path) {
    ldt_status st = LDT_OK;
    ckpt *c = NULL;
    sbuf h = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    int64_t off = 0;
    unsigned char len8[8];
    void *full = NULL;
    if (!dir || !out_path) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt merge: arguments must not be NULL");
    LDT_CHECK(ckpt_open(dir, &c));
    /* The header: tensors by name (the pieces are sorted so), data back to back. */
    sb_puts(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int lo = 0, hi; lo < c->npieces; lo = hi) {
        const ck_piece *pc = &c->pieces[lo];
        int64_t numel, nb, end;
        find_tensor(c, pc->name, &lo, &hi);
        if (ldt_shape_numel(&pc->gshape, &numel) != LDT_OK ||
            !mul_ok(numel, (int64_t)ldt_dtype_size(pc->dtype), &nb) || !add_ok(off, nb, &end))
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt merge: tensor '%s': its size overflows", pc->name);
        sb_puts(&h, ",");
        sb_json_str(&h, pc->name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":", k_st_dtype[pc->dtype]);
        sb_ints(&h, pc->gshape.dims, pc->gshape.ndim);
        sb_printf(&h, ",\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)end);
        off = end;
    }
    sb_puts(&h, "}");
    while (!h.oom && h.len % 8) sb_puts(&h, " ");
    if (h.oom) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt merge: out of memory");
    tmp = malloc(strlen(out_path) + 5);
    if (!tmp) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt merge: out of memory");
    sprintf(tmp, "%s.tmp", out_path);
    f = fopen(tmp, "wb");
    if (!f) LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: cannot create %s: %s", tmp, strerror(errno));
    put_le64(len8, (uint64_t)h.len);
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(h.p, 1, h.len, f) != h.len)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: writing %s: %s", tmp, strerror(errno));
    for (int lo = 0, hi; lo < c->npieces; lo = hi) {
        int64_t nb = 0;
        find_tensor(c, c->pieces[lo].name, &lo, &hi);
        LDT_CHECK_GOTO(assemble(c, lo, hi, &full, &nb));
        if (nb && fwrite(full, 1, (size_t)nb, f) != (size_t)nb)
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: writing tensor '%s' to %s: %s",
                          c->pieces[lo].name, tmp, strerror(errno));
        free(full);
        full = NULL;
    }
    if (fclose(f) != 0) {
        f = NULL;
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: closing %s: %s", tmp, strerror(errno));
    }
    f = NULL;
    if (rename(tmp, out_path) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: cannot rename %s to %s: %s", tmp, out_path,
                      strerror(errno));
    free(tmp);
    tmp = NULL;
fail:
    if (f) fclose(f);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    free(full);
    free(h.p);
    ckpt_close(c);
    return st;
}

ldt_status ldt_ckpt_info(const char *dir, FILE *out) {
    ckpt *c = NULL;
    sbuf b = {0};
    int64_t stored_all = 0, files_all = 0;
    int ntensors = 0;
    if (!dir || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt info: arguments must not be NULL");
    LDT_CHECK(ckpt_open(dir, &c));
    for (int r = 0; r < c->world; r++) files_all += c->files[r].size;
    for (int i = 0; i < c->npieces; i++) stored_all += c->pieces[i].nbytes;
    for (int lo = 0, hi; lo < c->npieces; lo = hi, ntensors++) find_tensor(c, c->pieces[lo].name, &lo, &hi);
    sb_printf(&b, "checkpoint %s: format %s v%d, %d rank files, %d tensors, %lld bytes of data "
                  "(%lld on disk)\n",
              dir, CKPT_FORMAT, CKPT_VERSION, c->world, ntensors, (long long)stored_all,
              (long long)files_all);
    for (int lo = 0, hi; lo < c->npieces; lo = hi) {
        const ck_piece *pc = &c->pieces[lo];
        int64_t numel = 0, stored = 0;
        char sb[128];
        find_tensor(c, pc->name, &lo, &hi);
        ldt_shape_numel(&pc->gshape, &numel);
        for (int i = lo; i < hi; i++) stored += c->pieces[i].nbytes;
        ldt_shape_format(&pc->gshape, sb, sizeof sb);
        sb_printf(&b, "%s  %s %s  mesh %s  placements %s  %lld bytes full, %lld stored in %d "
                      "shard%s\n",
                  pc->name, ldt_dtype_name(pc->dtype), sb, pc->mesh, pc->placements,
                  (long long)(numel * (int64_t)ldt_dtype_size(pc->dtype)), (long long)stored,
                  hi - lo, hi - lo == 1 ? "" : "s");
        for (int i = lo; i < hi; i++) {
            const ck_piece *q = &c->pieces[i];
            ldt_shape_format(&q->region.local_shape, sb, sizeof sb);
            sb_printf(&b, "    rank %d: local %s at ", q->rank, sb);
            sb_region(&b, &q->region);
            sb_printf(&b, ", %lld bytes\n", (long long)q->nbytes);
        }
    }
    ckpt_close(c);
    if (b.oom) {
        free(b.p);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt info: out of memory");
    }
    if (b.p) fputs(b.p, out);
    free(b.p);
    return LDT_OK;
}

static cJSON *json_i64s(const int64_t *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* The shards of ldt_ckpt_info as `ldt layout --json` writes a rank: local_shape, offset and,
 * when interleaved, slices. */
static cJSON *json_shard(const ck_piece *q) {
    cJSON *o = cJSON_CreateObject();
    int interleaved = 0;
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "rank", q->rank);
    cJSON_AddItemToObject(o, "local_shape", json_i64s(q->region.local_shape.dims, q->region.ndim));
    cJSON_AddItemToObject(o, "offset", json_i64s(q->region.offset, q->region.ndim));
    for (int d = 0; d < q->region.ndim; d++) interleaved |= q->region.runs[d].blocks > 1;
    if (interleaved) {
        cJSON *sl = cJSON_AddArrayToObject(o, "slices");
        for (int64_t k = 0; sl && k < q->region.nslices; k++) {
            int64_t off[LDT_MAX_DIMS], sh[LDT_MAX_DIMS];
            cJSON *x = cJSON_CreateObject();
            ldt_region_slice(&q->region, k, off, sh);
            cJSON_AddItemToObject(x, "offset", json_i64s(off, q->region.ndim));
            cJSON_AddItemToObject(x, "shape", json_i64s(sh, q->region.ndim));
            cJSON_AddItemToArray(sl, x);
        }
    }
    cJSON_AddNumberToObject(o, "bytes", (double)q->nbytes);
    return o;
}

ldt_status ldt_ckpt_info_json(const char *dir, FILE *out) {
    ckpt *c = NULL;
    cJSON *root, *tensors;
    char *text;
    int64_t stored_all = 0, files_all = 0;
    if (!dir || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "ckpt info: arguments must not be NULL");
    LDT_CHECK(ckpt_open(dir, &c));
    for (int r = 0; r < c->world; r++) files_all += c->files[r].size;
    for (int i = 0; i < c->npieces; i++) stored_all += c->pieces[i].nbytes;
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "dir", dir);
    cJSON_AddStringToObject(root, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(root, "version", CKPT_VERSION);
    cJSON_AddNumberToObject(root, "rank_files", c->world);
    cJSON_AddNumberToObject(root, "stored_bytes", (double)stored_all);
    cJSON_AddNumberToObject(root, "file_bytes", (double)files_all);
    tensors = cJSON_AddArrayToObject(root, "tensors");
    for (int lo = 0, hi; tensors && lo < c->npieces; lo = hi) {
        const ck_piece *pc = &c->pieces[lo];
        int64_t numel = 0, stored = 0;
        cJSON *t = cJSON_CreateObject(), *shards;
        find_tensor(c, pc->name, &lo, &hi);
        ldt_shape_numel(&pc->gshape, &numel);
        for (int i = lo; i < hi; i++) stored += c->pieces[i].nbytes;
        cJSON_AddStringToObject(t, "name", pc->name);
        cJSON_AddStringToObject(t, "dtype", ldt_dtype_name(pc->dtype));
        cJSON_AddItemToObject(t, "shape", json_i64s(pc->gshape.dims, pc->gshape.ndim));
        cJSON_AddStringToObject(t, "mesh", pc->mesh);
        cJSON_AddStringToObject(t, "placements", pc->placements);
        cJSON_AddNumberToObject(t, "tensor_bytes", (double)(numel * (int64_t)ldt_dtype_size(pc->dtype)));
        cJSON_AddNumberToObject(t, "stored_bytes", (double)stored);
        shards = cJSON_AddArrayToObject(t, "shards");
        for (int i = lo; shards && i < hi; i++) cJSON_AddItemToArray(shards, json_shard(&c->pieces[i]));
        cJSON_AddItemToArray(tensors, t);
    }
    ckpt_close(c);
    text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt info: out of memory");
    fprintf(out, "%s\n", text);
    cJSON_free(text);
    return ferror(out) ? ldt__error(LDT_ERR_SYSTEM, "ckpt info: writing failed") : LDT_OK;
}
