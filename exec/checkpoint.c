/* Sharded checkpoints in the safetensors format: save, load onto any spec, offline merge, info
 * (docs/checkpoint.md). Every byte read from a file is bounds-checked before it is used. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "core/copy.h"
#include "ldt/exec.h"
#include "core/error.h"
#include "core/mesh.h"
#include "exec/ckpt_io.h"
#include "exec/reduce.h"
#include "exec/shards.h"

#define CKPT_FORMAT "lazydt-checkpoint"
#define CKPT_VERSION 1
#define CKPT_MANIFEST "manifest.json" /* the file that says which rank files are the checkpoint */
#define CKPT_MANIFEST_FORMAT "lazydt-checkpoint-manifest"
#define CKPT_MANIFEST_VERSION 1
#define CKPT_MAX_MANIFEST (256LL << 20) /* manifests above this are refused */
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

/* What a directory entry is to the checkpoint format (*rank gets r where there is one). */
enum {
    CK_NAME_OTHER,      /* not a name this format uses: saves leave it alone */
    CK_NAME_LEGACY,     /* rank-<r>.safetensors: a rank file of a save without a manifest */
    CK_NAME_LEGACY_TMP, /* rank-<r>.safetensors.tmp: such a save's temporary */
    CK_NAME_RANK,       /* rank-<r>.<16 hex>.safetensors: a rank file of a manifest save */
    CK_NAME_MANIFEST_TMP /* manifest.json.tmp */
};

static int ckpt_name_kind(const char *name, int *rank) {
    const char *p = name;
    long r = 0;
    int digits = 0;
    *rank = -1;
    if (strcmp(name, CKPT_MANIFEST ".tmp") == 0) return CK_NAME_MANIFEST_TMP;
    if (strncmp(p, "rank-", 5) != 0) return CK_NAME_OTHER;
    for (p += 5; *p >= '0' && *p <= '9'; p++, digits++)
        if (digits < 10) r = r * 10 + (*p - '0');
    if (digits == 0 || digits > 9 || (digits > 1 && name[5] == '0')) return CK_NAME_OTHER;
    *rank = (int)r;
    if (strcmp(p, ".safetensors") == 0) return CK_NAME_LEGACY;
    if (strcmp(p, ".safetensors.tmp") == 0) return CK_NAME_LEGACY_TMP;
    if (p[0] != '.') return CK_NAME_OTHER;
    for (int i = 1; i <= 16; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return CK_NAME_OTHER;
    if (strcmp(p + 17, ".safetensors") == 0) return CK_NAME_RANK;
    return CK_NAME_OTHER;
}

/* A save in progress: the fault hook and the step count it sees. */
typedef struct saver {
    ldt__ckpt_hook hook;
    void *arg;
    int step;
} saver;

/* Announces the next step to the hook: 0 to go on, -1 with errno EIO when the hook fails it
 * (the caller then takes the path a real I/O error takes). */
static int save_step(saver *s, const char *fmt, ...) LDT__PRINTF(2, 3);
static int save_step(saver *s, const char *fmt, ...) {
    char what[512];
    va_list ap;
    int k = s->step++;
    if (!s->hook) return 0;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (s->hook(s->arg, k, what) != 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

/* One rank file of a save: its name in dir, and what the manifest records of it. */
typedef struct save_file {
    char *name, *path;
    int64_t bytes;
    uint64_t header_hash; /* xxh64 of the 8-byte length and the header */
    int made;             /* created by this save: removed again if the save fails */
} save_file;

/* Writes one rank's file (pieces[lo, hi) all belong to it) to a new file, fsynced. */
static ldt_status write_rank(saver *s, save_file *sf, int rank, int world, int ntensors,
                             uint64_t save_id, const char *const *names, const ldt_spec *const *specs,
                             const save_piece *pieces, int lo, int hi) {
    ldt_status st = LDT_OK;
    sbuf h = {0}, fmt = {0};
    int fd = -1;
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
    put_le64(len8, (uint64_t)h.len);
    {
        XXH64_state_t *hs = XXH64_createState();
        if (!hs) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
        XXH64_reset(hs, 0);
        XXH64_update(hs, len8, 8);
        XXH64_update(hs, h.p, h.len);
        sf->header_hash = XXH64_digest(hs);
        XXH64_freeState(hs);
    }
    /* a new name: O_EXCL, so no file of the checkpoint in place is ever opened for writing */
    if (save_step(s, "create %s", sf->name) != 0 ||
        (fd = open(sf->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) < 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot create %s: %s", sf->path, strerror(errno));
    sf->made = 1;
    if (ldt__write_all(fd, len8, 8) != 0 || ldt__write_all(fd, h.p, h.len) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing %s: %s", sf->path, strerror(errno));
    if (save_step(s, "write the data of %s", sf->name) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing %s: %s", sf->path, strerror(errno));
    for (int i = lo; i < hi; i++)
        if (pieces[i].nbytes && ldt__write_all(fd, pieces[i].data, (size_t)pieces[i].nbytes) != 0)
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing tensor '%s' to %s: %s",
                          names[pieces[i].tensor], sf->path, strerror(errno));
    if (save_step(s, "fsync %s", sf->name) != 0 || fsync(fd) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: fsync of %s: %s", sf->path, strerror(errno));
    if (close(fd) != 0) {
        fd = -1;
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: closing %s: %s", sf->path, strerror(errno));
    }
    fd = -1;
    sf->bytes = 8 + (int64_t)h.len + off;
fail:
    if (fd >= 0) close(fd);
    free(h.p);
    free(fmt.p);
    return st;
}

/* A token unique to this save, for its file names: the time, the process and the content. */
static uint64_t save_token(uint64_t save_id, int attempt) {
    struct timespec a = {0, 0}, b = {0, 0};
    uint64_t v[6];
    clock_gettime(CLOCK_REALTIME, &a);
    clock_gettime(CLOCK_MONOTONIC, &b);
    v[0] = save_id;
    v[1] = (uint64_t)a.tv_sec;
    v[2] = (uint64_t)a.tv_nsec;
    v[3] = (uint64_t)b.tv_sec;
    v[4] = (uint64_t)b.tv_nsec;
    v[5] = (uint64_t)getpid();
    return XXH64(v, sizeof v, (XXH64_hash_t)attempt);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* After the manifest is in place: removes the files of this format's names that it does not
 * list (rank files of earlier saves, temporaries of interrupted ones), in name order. Other
 * files are left alone. A removal that fails leaves a file that loaders ignore: not an error. */
static void remove_unlisted(saver *s, const char *dir, const save_file *files, int world) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **gone = NULL;
    int n = 0, cap = 0;
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        int r, kind = ckpt_name_kind(e->d_name, &r);
        char **p;
        if (kind == CK_NAME_OTHER) continue;
        if (kind == CK_NAME_RANK && r < world && strcmp(e->d_name, files[r].name) == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            p = realloc(gone, (size_t)cap * sizeof *p);
            if (!p) break;
            gone = p;
        }
        if (!(gone[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (n > 1) qsort(gone, (size_t)n, sizeof *gone, cmp_str);
    for (int i = 0; i < n; i++) {
        char *p = path_join(dir, gone[i]);
        if (p && save_step(s, "remove %s", gone[i]) == 0) unlink(p);
        free(p);
        free(gone[i]);
    }
    free(gone);
}

/* The manifest's text: the save, its world, and each rank file with its size and header hash. */
static char *manifest_text(uint64_t save_id, int world, int ntensors, const save_file *files) {
    sbuf m = {0};
    sb_printf(&m, "{\"format\":\"%s\",\"version\":%d,\"save_id\":\"%016llx\",\"world_size\":%d,"
                  "\"tensors\":%d,\"files\":[",
              CKPT_MANIFEST_FORMAT, CKPT_MANIFEST_VERSION, (unsigned long long)save_id, world,
              ntensors);
    for (int r = 0; r < world; r++)
        sb_printf(&m, "%s\n  {\"rank\":%d,\"file\":\"%s\",\"bytes\":%lld,\"header_xxh64\":\"%016llx\"}",
                  r ? "," : "", r, files[r].name, (long long)files[r].bytes,
                  (unsigned long long)files[r].header_hash);
    sb_puts(&m, "\n]}\n");
    if (m.oom) {
        free(m.p);
        return NULL;
    }
    return m.p;
}

/* Makes dir if absent; a new directory's entry is made durable in its parent. */
static ldt_status make_dir(saver *s, const char *dir) {
    char *parent, *slash;
    if (mkdir(dir, 0777) != 0) {
        if (errno == EEXIST) {
            struct stat sb;
            if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
                LDT_FAIL(LDT_ERR_SYSTEM, "ckpt save: %s is %s, not a directory", dir,
                         ldt__file_kind(sb.st_mode));
            return LDT_OK;
        }
        LDT_FAIL(LDT_ERR_SYSTEM, "ckpt save: cannot create directory %s: %s", dir, strerror(errno));
    }
    parent = strdup(dir);
    if (!parent) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') { /* "a/b/" */
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    if (save_step(s, "fsync %s (the new directory's parent)", parent) != 0 || ldt__fsync_dir(parent) != 0) {
        ldt_status st = ldt__error(LDT_ERR_SYSTEM, "ckpt save: fsync of %s, the parent of the new directory %s: %s",
                                   parent, dir, strerror(errno));
        free(parent);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    free(parent);
    return LDT_OK;
}

ldt_status ldt_ckpt_save(const char *dir, int n, const char *const *names,
                         ldt_shards *const *tensors) {
    return ldt__ckpt_save_hooked(dir, n, names, tensors, NULL, NULL);
}

/* The save: new rank files under names unique to it, each fsynced; then the manifest, written
 * to a temporary, fsynced and renamed into place (the one atomic step that replaces the
 * checkpoint), the directory fsynced; then the files the manifest does not list are removed.
 * Until the rename a reader sees the old checkpoint, after it the new one. */
ldt_status ldt__ckpt_save_hooked(const char *dir, int n, const char *const *names,
                                 ldt_shards *const *tensors, ldt__ckpt_hook hook, void *arg) {
    ldt_status st = LDT_OK;
    save_piece *pieces = NULL;
    const ldt_spec **specs = NULL;
    save_file *files = NULL;
    char *mtext = NULL, *mtmp = NULL, *mpath = NULL;
    int np = 0, cap = 0, world = 1, mfd = -1, mmade = 0, committed = 0;
    uint64_t save_id, token = 0;
    XXH64_state_t *hs = NULL;
    saver sv = {hook, arg, 0};
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
    /* The save id ties the rank files of one save together: a hash of all their metadata,
     * recomputed by every reader. */
    hs = XXH64_createState();
    if (!hs) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    XXH64_reset(hs, (XXH64_hash_t)world);
    for (int i = 0; i < np; i++) {
        XXH64_update(hs, names[pieces[i].tensor], strlen(names[pieces[i].tensor]) + 1);
        XXH64_update(hs, pieces[i].meta, strlen(pieces[i].meta) + 1);
    }
    save_id = XXH64_digest(hs);
    LDT_CHECK_GOTO(make_dir(&sv, dir));
    files = calloc((size_t)world, sizeof *files);
    mpath = path_join(dir, CKPT_MANIFEST);
    mtmp = path_join(dir, CKPT_MANIFEST ".tmp");
    if (!files || !mpath || !mtmp) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    /* names no file in dir has: the checkpoint in place is never written over */
    for (int attempt = 0, clash = 1; clash; attempt++) {
        struct stat sb;
        if (attempt == 16)
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: %s: no unused name for the new rank files", dir);
        token = save_token(save_id, attempt);
        clash = 0;
        for (int r = 0; r < world && !clash; r++) {
            char name[64];
            snprintf(name, sizeof name, "rank-%d.%016llx.safetensors", r, (unsigned long long)token);
            free(files[r].name);
            free(files[r].path);
            files[r].name = strdup(name);
            files[r].path = path_join(dir, name);
            if (!files[r].name || !files[r].path)
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
            clash = lstat(files[r].path, &sb) == 0 || errno != ENOENT;
        }
    }
    for (int r = 0, lo = 0; r < world; r++) {
        int hi = lo;
        while (hi < np && pieces[hi].rank == r) hi++;
        LDT_CHECK_GOTO(write_rank(&sv, &files[r], r, world, n, save_id, names, specs, pieces, lo, hi));
        lo = hi;
    }
    mtext = manifest_text(save_id, world, n, files);
    if (!mtext) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt save: out of memory");
    /* the temporary is this format's own name: a stale one (even a FIFO) is replaced */
    if (unlink(mtmp) != 0 && errno != ENOENT)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot replace %s: %s", mtmp, strerror(errno));
    if (save_step(&sv, "write %s.tmp", CKPT_MANIFEST) != 0 ||
        (mfd = open(mtmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) < 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot create %s: %s", mtmp, strerror(errno));
    mmade = 1;
    if (ldt__write_all(mfd, mtext, strlen(mtext)) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: writing %s: %s", mtmp, strerror(errno));
    if (save_step(&sv, "fsync %s.tmp", CKPT_MANIFEST) != 0 || fsync(mfd) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: fsync of %s: %s", mtmp, strerror(errno));
    if (close(mfd) != 0) {
        mfd = -1;
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: closing %s: %s", mtmp, strerror(errno));
    }
    mfd = -1;
    if (save_step(&sv, "rename %s.tmp to %s", CKPT_MANIFEST, CKPT_MANIFEST) != 0 ||
        rename(mtmp, mpath) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt save: cannot rename %s to %s: %s", mtmp, mpath,
                      strerror(errno));
    committed = 1; /* from here on the directory holds the new checkpoint */
    if (save_step(&sv, "fsync the directory %s", dir) != 0 || ldt__fsync_dir(dir) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM,
                      "ckpt save: fsync of the directory %s: %s (the new checkpoint is in place "
                      "but may not survive a power loss)",
                      dir, strerror(errno));
    remove_unlisted(&sv, dir, files, world);
fail:
    if (mfd >= 0) close(mfd);
    if (!committed) { /* the old checkpoint stays as it was: take back what this save made */
        if (mmade) unlink(mtmp);
        if (files)
            for (int r = 0; r < world; r++)
                if (files[r].made) unlink(files[r].path);
    }
    if (files)
        for (int r = 0; r < world; r++) {
            free(files[r].name);
            free(files[r].path);
        }
    free(files);
    free(mtext);
    free(mtmp);
    free(mpath);
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
    char *path, *name;  /* name: as the manifest lists it (NULL without a manifest) */
    int64_t size;
    cJSON *header;
    dev_t dev;          /* the file's identity, so that a merge never writes over it */
    ino_t ino;
    int64_t want_bytes; /* the manifest's size and header hash */
    uint64_t want_hash;
    int64_t world, tensors; /* the file's own save entry */
    uint64_t save_id;
} ck_file;

typedef struct ckpt {
    char *dir;
    int manifest; /* 1: the manifest lists the files; 0: rank-<r>.safetensors, as before it */
    uint64_t save_id;
    int world;
    int tensors; /* as the manifest (or rank 0's format entry) says */
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
            free(c->files[i].name);
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
                              int64_t *ntensors, cJSON **out, int64_t *fsize, int64_t *hlen,
                              uint64_t *hhash, struct stat *sb) {
    ldt_status st = LDT_OK;
    FILE *f = NULL;
    unsigned char len8[8];
    uint64_t n = 0;
    char *buf = NULL;
    const char *end = NULL, *fmt;
    cJSON *root = NULL, *meta, *info = NULL;
    int64_t size, v;
    *out = NULL;
    LDT_CHECK(ldt__open_regular("ckpt", path, 1, &f, sb)); /* a FIFO or directory: said, never waited on */
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
    { /* the header's hash, which the manifest records */
        XXH64_state_t *hs = XXH64_createState();
        if (!hs) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        XXH64_reset(hs, 0);
        XXH64_update(hs, len8, 8);
        XXH64_update(hs, buf, (size_t)n);
        *hhash = XXH64_digest(hs);
        XXH64_freeState(hs);
    }
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
        LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s holds no checkpoint: no %s and no rank-<r>.safetensors files", dir, CKPT_MANIFEST);
    *world = -2 - found; /* read it from that rank */
    return LDT_OK;
}

static int parse_hex64(const char *s, uint64_t *out) {
    char *e = NULL;
    if (!s || strlen(s) != 16) return 0;
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
            return 0;
    *out = strtoull(s, &e, 16);
    return e && !*e;
}

/* dir/manifest.json, when there is one: the save, its world and its files (c->manifest = 1).
 * Without one, c is left for the rank-<r>.safetensors files of a save made before manifests. */
static ldt_status read_manifest(ckpt *c) {
    ldt_status st = LDT_OK;
    char *path = path_join(c->dir, CKPT_MANIFEST), *buf = NULL;
    FILE *f = NULL;
    struct stat sb;
    cJSON *root = NULL, *files, *e;
    int64_t v, world, ntens;
    const char *end = NULL;
    int r = 0;
    if (!path) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    if (stat(path, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
        free(path);
        return LDT_OK;
    }
    LDT_CHECK_GOTO(ldt__open_regular("ckpt", path, 1, &f, &sb));
    if (sb.st_size > CKPT_MAX_MANIFEST)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s is %lld bytes, above the %lld-byte cap for a manifest",
                      path, (long long)sb.st_size, (long long)CKPT_MAX_MANIFEST);
    buf = malloc((size_t)sb.st_size + 1);
    if (!buf) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: %s: out of memory", path);
    if (fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt: cannot read %s: %s", path, strerror(errno));
    buf[sb.st_size] = '\0';
    root = cJSON_ParseWithLengthOpts(buf, (size_t)sb.st_size, &end, 0);
    if (!cJSON_IsObject(root))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: bad JSON near byte %lld (a manifest is one JSON object)",
                      path, (long long)(end && end >= buf && end <= buf + sb.st_size ? end - buf : 0));
    if (!json_str(root, "format") || strcmp(json_str(root, "format"), CKPT_MANIFEST_FORMAT) != 0)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: 'format' is not \"%s\": not a lazydt checkpoint manifest",
                      path, CKPT_MANIFEST_FORMAT);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(root, "version"), &v))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: the manifest version is missing", path);
    if (v != CKPT_MANIFEST_VERSION)
        LDT_FAIL_GOTO(LDT_ERR_UNSUPPORTED, "ckpt: %s: manifest version %lld; this build reads version %d",
                      path, (long long)v, CKPT_MANIFEST_VERSION);
    if (!parse_hex64(json_str(root, "save_id"), &c->save_id))
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: 'save_id' is not 16 hexadecimal digits", path);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(root, "world_size"), &world) || world < 1 ||
        world > LDT_MESH_MAX_RANKS)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: 'world_size' is missing or not in 1..%d", path,
                      LDT_MESH_MAX_RANKS);
    if (!json_i64(cJSON_GetObjectItemCaseSensitive(root, "tensors"), &ntens) || ntens > INT32_MAX)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: 'tensors' is missing or out of range", path);
    files = cJSON_GetObjectItemCaseSensitive(root, "files");
    if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != world)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: 'files' must list one file per rank (world size %lld)",
                      path, (long long)world);
    c->files = calloc((size_t)world, sizeof *c->files);
    if (!c->files) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    c->world = (int)world;
    c->tensors = (int)ntens;
    cJSON_ArrayForEach(e, files) {
        ck_file *cf = &c->files[r];
        const char *name = json_str(e, "file");
        int64_t rank;
        int nr;
        if (!json_i64(cJSON_GetObjectItemCaseSensitive(e, "rank"), &rank) || rank != r)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: files[%d] is not rank %d's entry", path, r, r);
        /* a plain name of this format: nothing outside dir is ever read */
        if (!name || ckpt_name_kind(name, &nr) != CK_NAME_RANK || nr != r)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: rank %d's file %s%s%s is not named "
                          "rank-%d.<16 hex digits>.safetensors",
                          path, r, name ? "'" : "", name ? name : "(missing)", name ? "'" : "", r);
        if (!json_i64(cJSON_GetObjectItemCaseSensitive(e, "bytes"), &cf->want_bytes) ||
            !parse_hex64(json_str(e, "header_xxh64"), &cf->want_hash))
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s: rank %d's 'bytes' or 'header_xxh64' is missing or bad",
                          path, r);
        cf->name = strdup(name);
        cf->path = path_join(c->dir, name);
        if (!cf->name || !cf->path) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        r++;
    }
    c->manifest = 1;
fail:
    cJSON_Delete(root);
    free(buf);
    if (f) fclose(f);
    free(path);
    return st;
}

/* The save id recomputed from the files' metadata, as the save computed it: a forged but
 * consistent edit (a dtype changed in every file) changes it. */
static ldt_status recompute_save_id(const ckpt *c, uint64_t *out) {
    XXH64_state_t *hs = XXH64_createState();
    if (!hs) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    XXH64_reset(hs, (XXH64_hash_t)c->world);
    for (int r = 0; r < c->world; r++) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(c->files[r].header, "__metadata__"), *e;
        cJSON_ArrayForEach(e, meta) {
            if (!e->string || strcmp(e->string, "lazydt") == 0 || !cJSON_IsString(e)) continue;
            XXH64_update(hs, e->string, strlen(e->string) + 1);
            XXH64_update(hs, e->valuestring, strlen(e->valuestring) + 1);
        }
    }
    *out = XXH64_digest(hs);
    XXH64_freeState(hs);
    return LDT_OK;
}

/* Without a manifest, rank 0's save entry is the reference; when a file disagrees, the one
 * named is the file that is odd: rank 0 itself when its save id is not the one the metadata
 * gives, when every other rank agrees against it, or when the larger world the others claim
 * is all there. */
static ldt_status legacy_claims(const ckpt *c, uint64_t recomputed) {
    const ck_file *f0 = &c->files[0], *fo;
    int odd = -1, blame0;
    for (int r = 1; r < c->world && odd < 0; r++)
        if (c->files[r].world != f0->world || c->files[r].save_id != f0->save_id) odd = r;
    if (odd < 0) return LDT_OK;
    fo = &c->files[odd];
    blame0 = f0->save_id != recomputed && fo->save_id == recomputed;
    if (!blame0 && c->world > 2) {
        blame0 = 1;
        for (int r = 1; r < c->world; r++)
            if (c->files[r].world != fo->world || c->files[r].save_id != fo->save_id) blame0 = 0;
    }
    if (!blame0 && fo->world > f0->world && fo->world <= LDT_MESH_MAX_RANKS) {
        blame0 = 1; /* rank 0 says fewer ranks than the files there are */
        for (int64_t k = f0->world; k < fo->world && blame0; k++) {
            char *p = rank_path(c->dir, (int)k, "");
            blame0 = p && access(p, F_OK) == 0;
            free(p);
        }
    }
    if (blame0)
        LDT_FAIL(LDT_ERR_CORRUPT,
                 "ckpt: %s: its save entry (world size %lld, save id %016llx) disagrees with %s "
                 "(world size %lld, save id %016llx) and with the metadata of the files: "
                 "rank 0's metadata was changed after the save",
                 f0->path, (long long)f0->world, (unsigned long long)f0->save_id, fo->path,
                 (long long)fo->world, (unsigned long long)fo->save_id);
    LDT_FAIL(LDT_ERR_CORRUPT,
             "ckpt: %s belongs to another save (world size %lld, save id %016llx; "
             "rank-0.safetensors has %lld, %016llx)",
             fo->path, (long long)fo->world, (unsigned long long)fo->save_id, (long long)f0->world,
             (unsigned long long)f0->save_id);
}

/* Two shards of one tensor that describe it alike (dtype, global shape, mesh, placements). */
static int pieces_agree(const ck_piece *a, const ck_piece *b) {
    return a->dtype == b->dtype && ldt_shape_equal(&a->gshape, &b->gshape) &&
           (a->mesh && b->mesh ? strcmp(a->mesh, b->mesh) == 0 : a->mesh == b->mesh) &&
           (a->placements && b->placements ? strcmp(a->placements, b->placements) == 0
                                           : a->placements == b->placements);
}

/* When the metadata no longer gives the save id: a shard that fewer than half of its
 * tensor's shards agree with (its file was edited; *tie 0), else two shards of one tensor that
 * disagree, as many on each side (one of the two files was edited; *tie 1, the other in
 * *other); -1 when every shard agrees (every file changed alike). Sorts the pieces by name. */
static int odd_metadata_piece(ckpt *c, int *tie, int *other) {
    int first_tie = -1, first_other = -1;
    *tie = 0;
    *other = -1;
    if (c->npieces > 1) qsort(c->pieces, (size_t)c->npieces, sizeof *c->pieces, cmp_ck_piece);
    for (int lo = 0, hi; lo < c->npieces; lo = hi) {
        for (hi = lo + 1; hi < c->npieces && strcmp(c->pieces[hi].name, c->pieces[lo].name) == 0; hi++) {}
        for (int i = lo; i < hi; i++) {
            int agree = 0, differs = -1;
            for (int j = lo; j < hi; j++) {
                if (pieces_agree(&c->pieces[i], &c->pieces[j])) agree++;
                else if (differs < 0) differs = j;
            }
            if (2 * agree < hi - lo) return i;
            if (differs >= 0 && first_tie < 0) first_tie = i, first_other = differs;
        }
    }
    if (first_tie >= 0) {
        *tie = 1;
        *other = first_other;
    }
    return first_tie;
}

static ldt_status ckpt_open(const char *dir, ckpt **out) {
    ldt_status st = LDT_OK;
    ckpt *c = NULL;
    int probe = -1, odd = -1, tie = 0, other = -1;
    uint64_t recomputed = 0;
    *out = NULL;
    if (!little_endian())
        LDT_FAIL(LDT_ERR_UNSUPPORTED, "ckpt: safetensors data is little-endian; this host is not");
    c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
    }
    c->open_idx = -1;
    LDT_CHECK_GOTO(read_manifest(c));
    if (!c->manifest) LDT_CHECK_GOTO(find_world(dir, &probe));
    if (probe <= -2) {
        /* rank 0 is missing: say so, with the world size another rank's header gives */
        int k = -2 - probe;
        char *p = rank_path(dir, k, ""), *p0 = rank_path(dir, 0, "");
        cJSON *h = NULL;
        int64_t fs, hl, world = 0, ntens = 0;
        uint64_t id, hh;
        struct stat sb;
        if (!p || !p0) {
            free(p);
            free(p0);
            LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        }
        st = read_header(k, p, &world, &id, &ntens, &h, &fs, &hl, &hh, &sb);
        cJSON_Delete(h);
        if (st == LDT_OK)
            st = ldt__error(LDT_ERR_CORRUPT, "ckpt: %s is missing (the checkpoint has %lld ranks, "
                                             "as %s says)", p0, (long long)world, p);
        free(p);
        free(p0);
        goto fail;
    }
    for (int r = 0; r < (c->world ? c->world : 1); r++) {
        char *path = c->manifest ? c->files[r].path : rank_path(dir, r, "");
        cJSON *h = NULL, *e;
        const cJSON *meta;
        int64_t fsize = 0, hlen = 0, w = 0, ntens = 0;
        uint64_t id = 0, hh = 0;
        struct stat sb;
        ck_file *cf;
        if (!path) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
        if (!c->manifest && r > 0 && access(path, F_OK) != 0 && errno == ENOENT) {
            st = ldt__trace(ldt__error(LDT_ERR_CORRUPT,
                                       "ckpt: %s is missing (the checkpoint has %d ranks)", path,
                                       c->world),
                            __FILE__, __LINE__);
            free(path);
            goto fail;
        }
        if (c->manifest && access(path, F_OK) != 0 && errno == ENOENT)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT, "ckpt: %s is missing (%s/%s lists it as rank %d's file)",
                          path, dir, CKPT_MANIFEST, r);
        st = read_header(r, path, &w, &id, &ntens, &h, &fsize, &hlen, &hh, &sb);
        if (st != LDT_OK) {
            if (!c->manifest) free(path);
            goto fail;
        }
        if (!c->manifest && r == 0) {
            c->world = (int)w;
            c->files = calloc((size_t)w, sizeof *c->files);
            if (!c->files) {
                free(path);
                cJSON_Delete(h);
                LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt: out of memory");
            }
            c->tensors = (int)(ntens > INT32_MAX ? INT32_MAX : ntens);
        }
        cf = &c->files[r];
        cf->path = path;
        cf->header = h;
        cf->size = fsize;
        cf->dev = sb.st_dev;
        cf->ino = sb.st_ino;
        cf->world = w;
        cf->save_id = id;
        cf->tensors = ntens;
        if (c->manifest) { /* every listed file is of the manifest's save, as it was written */
            if (w != c->world || id != c->save_id || ntens != c->tensors)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s belongs to another save (world size %lld, save id %016llx, "
                              "%lld tensors; %s/%s lists world size %d, save id %016llx, %d tensors)",
                              path, (long long)w, (unsigned long long)id, (long long)ntens, dir,
                              CKPT_MANIFEST, c->world, (unsigned long long)c->save_id, c->tensors);
            if (hh != cf->want_hash)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s: its header's xxh64 is %016llx; %s/%s lists %016llx: the "
                              "header was changed after the save",
                              path, (unsigned long long)hh, dir, CKPT_MANIFEST,
                              (unsigned long long)cf->want_hash);
            if (fsize != cf->want_bytes)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s is %lld bytes; %s/%s lists %lld: the file was cut or "
                              "extended after the save",
                              path, (long long)fsize, dir, CKPT_MANIFEST, (long long)cf->want_bytes);
        }
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
    LDT_CHECK_GOTO(recompute_save_id(c, &recomputed));
    if (!c->manifest) {
        LDT_CHECK_GOTO(legacy_claims(c, recomputed));
        c->save_id = c->files[0].save_id;
    }
    if (recomputed != c->save_id && (odd = odd_metadata_piece(c, &tie, &other)) >= 0) {
        const ck_piece *a = &c->pieces[odd];
        if (!tie)
            LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                          "ckpt: %s: tensor '%s': its metadata (dtype, shape, mesh or placements) "
                          "disagrees with the other files' and the files no longer give the save id "
                          "%016llx: its metadata was changed after the save",
                          c->files[a->file].path, a->name, (unsigned long long)c->save_id);
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                      "ckpt: tensor '%s': %s and %s disagree on its metadata (dtype, shape, mesh or "
                      "placements: '%s' against '%s') and the files no longer give the save id %016llx: "
                      "one of the two was changed after the save",
                      a->name, c->files[a->file].path, c->files[c->pieces[other].file].path,
                      a->placements ? a->placements : "", c->pieces[other].placements ? c->pieces[other].placements : "",
                      (unsigned long long)c->save_id);
    }
    if (recomputed != c->save_id)
        LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                      "ckpt: %s: the files' tensor metadata gives save id %016llx, but the save "
                      "was %016llx: a file's metadata (a dtype, shape or sharding) was changed "
                      "after the save",
                      dir, (unsigned long long)recomputed, (unsigned long long)c->save_id);
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
        /* without a manifest, a file whose tensor count alone is off is named */
        for (int r = 0; r < c->world && !c->manifest; r++)
            if (c->files[r].tensors != distinct && c->files[r ? 0 : (c->world > 1)].tensors == distinct)
                LDT_FAIL_GOTO(LDT_ERR_CORRUPT,
                              "ckpt: %s says its save wrote %lld tensors; the files hold %d: its "
                              "metadata was changed after the save",
                              c->files[r].path, (long long)c->files[r].tensors, distinct);
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
        struct stat sb;
        if (c->open) fclose(c->open);
        c->open = NULL;
        c->open_idx = -1;
        LDT_CHECK(ldt__open_regular("ckpt", path, 1, &c->open, &sb));
        c->open_idx = pc->file;
        if (sb.st_dev != c->files[pc->file].dev || sb.st_ino != c->files[pc->file].ino)
            LDT_FAIL(LDT_ERR_CORRUPT, "ckpt: %s was replaced while it was read", path);
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
            if (full) ldt__copy(full + (size_t)gs * elem, local, (size_t)last->len * elem);
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
                if (nb) ldt__copy(local, buf, (size_t)nb);
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

/* 1 when the resolved path rpath is rdir or lies under it. */
static int path_inside(const char *rdir, const char *rpath) {
    size_t n = strlen(rdir);
    if (strcmp(rdir, "/") == 0) return 1;
    return strncmp(rpath, rdir, n) == 0 && (rpath[n] == '\0' || rpath[n] == '/');
}

/* A merge never writes into the checkpoint it reads: an output inside dir, or one that
 * resolves (through symlinks) into it, is refused before anything is written. */
static ldt_status merge_output_outside(const char *dir, const char *out_path) {
    ldt_status st = LDT_OK;
    char *rdir = ldt__realpath(dir), *parent = NULL, *rpar = NULL, *rout = NULL, *slash;
    if (!rdir) return LDT_OK; /* opening the checkpoint says what is wrong with dir */
    parent = strdup(out_path);
    if (!parent) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "ckpt merge: out of memory");
    slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    rpar = ldt__realpath(parent);
    rout = ldt__realpath(out_path); /* NULL when it does not exist yet */
    if ((rpar && path_inside(rdir, rpar)) || (rout && path_inside(rdir, rout)))
        LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                      "ckpt merge: the output %s is inside the checkpoint directory %s (%s): a "
                      "merge must not write into the checkpoint it reads; choose a path outside it",
                      out_path, dir, rout && path_inside(rdir, rout) ? rout : rpar);
fail:
    free(rdir);
    free(parent);
    free(rpar);
    free(rout);
    return st;
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
    LDT_CHECK(merge_output_outside(dir, out_path));
    LDT_CHECK(ckpt_open(dir, &c));
    { /* nor over one of its files from outside (a hard link) */
        struct stat sb;
        if (stat(out_path, &sb) == 0)
            for (int r = 0; r < c->world; r++)
                if (sb.st_dev == c->files[r].dev && sb.st_ino == c->files[r].ino)
                    LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                                  "ckpt merge: the output %s is the checkpoint's file %s: a merge "
                                  "must not write over the checkpoint it reads",
                                  out_path, c->files[r].path);
    }
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
    { /* a fresh temporary (a stale one, even a FIFO, is replaced, never opened) */
        int fd;
        if (unlink(tmp) != 0 && errno != ENOENT)
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: cannot replace %s: %s", tmp, strerror(errno));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 || !(f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            free(tmp);
            tmp = NULL; /* not ours to remove */
            LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: cannot create %s.tmp: %s", out_path, strerror(e));
        }
    }
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
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "ckpt merge: writing %s: %s", tmp, strerror(errno));
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

/* Every entry of c's directory that is not part of the checkpoint, with what it is: loaders
 * ignore them, and saves remove those of this format's names. */
/* What a file in c's directory that is not part of the checkpoint is (for ckpt info). */
static const char *unlisted_why(const ckpt *c, const char *name) {
    int r;
    switch (ckpt_name_kind(name, &r)) {
    case CK_NAME_RANK:
        return c->manifest ? "a rank file of another save, not in the manifest; the next save removes it"
                           : "a rank file of an interrupted save; the next save removes it";
    case CK_NAME_LEGACY:
        return c->manifest ? "a rank file of an earlier save, not in the manifest; the next save removes it"
                           : "a rank file beyond the world size; the next save removes it";
    case CK_NAME_LEGACY_TMP:
    case CK_NAME_MANIFEST_TMP: return "a temporary file of an interrupted save; the next save removes it";
    default: return "not a checkpoint file; saves leave it alone";
    }
}

/* The files in c's directory that are not part of the checkpoint, sorted; *n of them (the
 * caller frees each and the array). */
static char **unlisted_files(const ckpt *c, int *n_out) {
    DIR *d = opendir(c->dir);
    struct dirent *e;
    char **names = NULL;
    int n = 0, cap = 0;
    *n_out = 0;
    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        int r, kind = ckpt_name_kind(e->d_name, &r);
        char **p;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (c->manifest && strcmp(e->d_name, CKPT_MANIFEST) == 0) continue;
        if (c->manifest && kind == CK_NAME_RANK && r < c->world && strcmp(e->d_name, c->files[r].name) == 0)
            continue;
        if (!c->manifest && kind == CK_NAME_LEGACY && r < c->world) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            p = realloc(names, (size_t)cap * sizeof *p);
            if (!p) break;
            names = p;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *n_out = n;
    return names;
}

static void sb_unlisted(sbuf *b, const ckpt *c) {
    int n;
    char **names = unlisted_files(c, &n);
    if (n)
        sb_printf(b, "not part of the checkpoint (%d file%s, ignored by loads):\n", n, n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) {
        sb_puts(b, "  ");
        sb_puts(b, names[i]);
        sb_printf(b, "  (%s)\n", unlisted_why(c, names[i]));
        free(names[i]);
    }
    free(names);
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
    if (c->manifest)
        sb_printf(&b, "save %016llx, listed in %s\n", (unsigned long long)c->save_id, CKPT_MANIFEST);
    else
        sb_printf(&b, "save %016llx, no %s (saved before manifests): rank-<r>.safetensors files\n",
                  (unsigned long long)c->save_id, CKPT_MANIFEST);
    sb_unlisted(&b, c);
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
    {
        char id[20];
        int n;
        char **names = unlisted_files(c, &n);
        cJSON *un = cJSON_AddArrayToObject(root, "unlisted_files");
        snprintf(id, sizeof id, "%016llx", (unsigned long long)c->save_id);
        cJSON_AddStringToObject(root, "save_id", id);
        cJSON_AddBoolToObject(root, "manifest", c->manifest != 0);
        for (int i = 0; i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "file", names[i]);
            cJSON_AddStringToObject(o, "why", unlisted_why(c, names[i]));
            cJSON_AddItemToArray(un, o);
            free(names[i]);
        }
        free(names);
    }
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
