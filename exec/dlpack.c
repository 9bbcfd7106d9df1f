/* DLPack exchange of local shards (include/ldt/dlpack.h): out by reference on the shards'
 * storage, in by adopting the producer's tensors as the shards' buffers. */
#include <stdlib.h>
#include <string.h>

#include "ldt/dlpack.h"
#include "ldt/exec.h"
#include "core/error.h"
#include "exec/shards.h"

/* ldt dtype <-> DLPack (code, bits). */
static DLDataType dl_dtype_of(ldt_dtype dt) {
    DLDataType t = {kDLFloat, 32, 1};
    switch (dt) {
    case LDT_F32: break;
    case LDT_F64: t.bits = 64; break;
    case LDT_F16: t.bits = 16; break;
    case LDT_BF16: t.code = kDLBfloat, t.bits = 16; break;
    case LDT_I32: t.code = kDLInt, t.bits = 32; break;
    case LDT_I64: t.code = kDLInt, t.bits = 64; break;
    case LDT_U8: t.code = kDLUInt, t.bits = 8; break;
    case LDT_BOOL: t.code = kDLBool, t.bits = 8; break;
    default: t.code = kDLOpaqueHandle, t.bits = 0; break;
    }
    return t;
}

static const char *dl_code_name(unsigned code) {
    switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kDLBool: return "bool";
    default: return "float8/6/4 or unknown";
    }
}

/* One block: the managed tensor with its shape and strides after it. */
typedef struct {
    DLManagedTensorVersioned m;
    int64_t shape[LDT_MAX_DIMS];
    int64_t strides[LDT_MAX_DIMS];
} exported;

typedef struct {
    DLManagedTensor m;
    int64_t shape[LDT_MAX_DIMS];
    int64_t strides[LDT_MAX_DIMS];
} exported_unversioned;

static void exported_delete(DLManagedTensorVersioned *self) {
    if (!self) return;
    ldt_shards_destroy(self->manager_ctx); /* drops the reference taken at export */
    free(self);
}

static void exported_unversioned_delete(DLManagedTensor *self) {
    if (!self) return;
    ldt_shards_destroy(self->manager_ctx);
    free(self);
}

/* Fills a DLTensor describing rank's shard of s (shape and strides into the given arrays). */
static ldt_status describe(ldt_shards *s, int rank, const char *who, DLTensor *t, int64_t *shape,
                           int64_t *strides) {
    const ldt_spec *spec = ldt_shards_spec(s);
    ldt_region r;
    int64_t nbytes;
    void *data = ldt_shards_local(s, rank, &nbytes);
    if (!data) {
        char buf[256];
        ldt_mesh_format(spec->mesh, buf, sizeof buf);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: rank %d is not in mesh %s; expected one of its %d ranks",
                 who, rank, buf, ldt_mesh_nranks(spec->mesh));
    }
    LDT_CHECK(ldt_layout(spec, rank, &r));
    memset(t, 0, sizeof *t);
    t->data = data;
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->ndim = r.local_shape.ndim;
    t->dtype = dl_dtype_of(spec->dtype);
    for (int d = t->ndim - 1; d >= 0; d--) {
        shape[d] = r.local_shape.dims[d];
        strides[d] = d == t->ndim - 1 ? 1 : strides[d + 1] * shape[d + 1];
    }
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 0;
    return LDT_OK;
}

ldt_status ldt_to_dlpack(ldt_shards *s, int rank, uint64_t flags, DLManagedTensorVersioned **out) {
    exported *e;
    if (!s || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "to_dlpack: arguments must not be NULL");
    *out = NULL;
    if (flags & ~(uint64_t)DLPACK_FLAG_BITMASK_READ_ONLY)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "to_dlpack: flags 0x%llx; expected 0 or DLPACK_FLAG_BITMASK_READ_ONLY (0x1)",
                 (unsigned long long)flags);
    e = calloc(1, sizeof *e);
    if (!e) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "to_dlpack: out of memory");
    {
        ldt_status st = describe(s, rank, "to_dlpack", &e->m.dl_tensor, e->shape, e->strides);
        if (st != LDT_OK) {
            free(e);
            return st;
        }
    }
    e->m.version.major = DLPACK_MAJOR_VERSION;
    e->m.version.minor = DLPACK_MINOR_VERSION;
    e->m.flags = flags;
    e->m.manager_ctx = s;
    e->m.deleter = exported_delete;
    ldt__shards_retain(s);
    *out = &e->m;
    return LDT_OK;
}

ldt_status ldt_to_dlpack_unversioned(ldt_shards *s, int rank, DLManagedTensor **out) {
    exported_unversioned *e;
    if (!s || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "to_dlpack_unversioned: arguments must not be NULL");
    *out = NULL;
    e = calloc(1, sizeof *e);
    if (!e) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "to_dlpack_unversioned: out of memory");
    {
        ldt_status st =
            describe(s, rank, "to_dlpack_unversioned", &e->m.dl_tensor, e->shape, e->strides);
        if (st != LDT_OK) {
            free(e);
            return st;
        }
    }
    e->m.manager_ctx = s;
    e->m.deleter = exported_unversioned_delete;
    ldt__shards_retain(s);
    *out = &e->m;
    return LDT_OK;
}

static void upgraded_delete(DLManagedTensorVersioned *self) {
    DLManagedTensor *legacy;
    if (!self) return;
    legacy = self->manager_ctx;
    if (legacy && legacy->deleter) legacy->deleter(legacy);
    free(self);
}

ldt_status ldt_dlpack_from_unversioned(DLManagedTensor *legacy, DLManagedTensorVersioned **out) {
    DLManagedTensorVersioned *v;
    if (!legacy || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dlpack_from_unversioned: arguments must not be NULL");
    v = calloc(1, sizeof *v);
    if (!v) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "dlpack_from_unversioned: out of memory");
    v->version.major = 1;
    v->version.minor = 0;
    v->manager_ctx = legacy;
    v->deleter = upgraded_delete;
    v->flags = 0;
    v->dl_tensor = legacy->dl_tensor;
    *out = v;
    return LDT_OK;
}

/* Checks that t can be rank's local buffer under spec (region r); returns its data. */
static ldt_status check_local(const ldt_spec *spec, int rank, const ldt_region *r,
                              const DLManagedTensorVersioned *m, void **data) {
    const DLTensor *t = &m->dl_tensor;
    DLDataType want = dl_dtype_of(spec->dtype);
    size_t es = ldt_dtype_size(spec->dtype);
    int64_t expect = 1;
    char lbuf[128];
    ldt_shape_format(&r->local_shape, lbuf, sizeof lbuf);
    if (m->version.major != 1)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "from_dlpack: rank %d's tensor is DLPack version %u.%u; expected major version 1",
                 rank, (unsigned)m->version.major, (unsigned)m->version.minor);
    if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
        LDT_FAIL(LDT_ERR_UNSUPPORTED,
                 "from_dlpack: rank %d's tensor is on device type %d (id %d); expected host "
                 "memory (kDLCPU = 1 or kDLCUDAHost = 3): ldt_shards hold host data",
                 rank, (int)t->device.device_type, (int)t->device.device_id);
    if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "from_dlpack: rank %d's tensor is read-only; expected a writable tensor "
                 "(shards are written in place): pass a writable one or a copy", rank);
    if (t->dtype.code != want.code || t->dtype.bits != want.bits || t->dtype.lanes != 1)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "from_dlpack: rank %d's tensor has dtype %s%u (lanes %u); expected %s (%s%u, "
                 "1 lane)", rank, dl_code_name(t->dtype.code), (unsigned)t->dtype.bits,
                 (unsigned)t->dtype.lanes, ldt_dtype_name(spec->dtype), dl_code_name(want.code),
                 (unsigned)want.bits);
    if (t->ndim != r->local_shape.ndim || (t->ndim > 0 && !t->shape))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "from_dlpack: rank %d's tensor has %d dims; expected its local shape %s", rank,
                 (int)t->ndim, lbuf);
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != r->local_shape.dims[d]) {
            char got[128];
            ldt_shape s2 = {t->ndim, {0}};
            for (int k = 0; k < t->ndim; k++) s2.dims[k] = t->shape[k];
            ldt_shape_format(&s2, got, sizeof got);
            LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                     "from_dlpack: rank %d's tensor has shape %s; expected its local shape %s",
                     rank, got, lbuf);
        }
    if (t->strides)
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (t->shape[d] > 1 && t->strides[d] != expect)
                LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                         "from_dlpack: rank %d's tensor has stride %lld on dim %d; expected "
                         "compact row-major strides (%lld there): make it contiguous first",
                         rank, (long long)t->strides[d], d, (long long)expect);
            expect *= t->shape[d];
        }
    *data = (char *)t->data + t->byte_offset;
    if (r->numel > 0 && (!t->data || ((uintptr_t)*data % es) != 0))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "from_dlpack: rank %d's data %p is not aligned to its %zu-byte elements", rank,
                 *data, es);
    return LDT_OK;
}

ldt_status ldt_from_dlpack(const ldt_spec *spec, DLManagedTensorVersioned *const *locals,
                           ldt_shards **out) {
    ldt_status st = LDT_OK;
    ldt_shards *s = NULL;
    int n;
    void **data = NULL;
    if (!spec || !locals || !out)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "from_dlpack: arguments must not be NULL");
    *out = NULL;
    LDT_CHECK(ldt_spec_check(spec));
    if (ldt_mesh_device(spec->mesh) == LDT_DEVICE_META)
        LDT_FAIL(LDT_ERR_INVALID_USAGE,
                 "from_dlpack: the spec's mesh is meta, which holds no data; use a cpu mesh");
    n = ldt_mesh_nranks(spec->mesh);
    data = calloc((size_t)n, sizeof *data);
    if (!data) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "from_dlpack: out of memory");
    /* Check everything first: on failure nothing is taken. */
    for (int i = 0; i < n; i++) {
        int rank = ldt_mesh_rank_at(spec->mesh, i);
        ldt_region r;
        if (!locals[i])
            LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                          "from_dlpack: the tensor of rank %d (mesh position %d) is NULL", rank, i);
        for (int j = 0; j < i; j++)
            if (locals[j] == locals[i])
                LDT_FAIL_GOTO(LDT_ERR_INVALID_ARGUMENT,
                              "from_dlpack: ranks %d and %d are given the same managed tensor; "
                              "expected one per rank (each is deleted once)",
                              ldt_mesh_rank_at(spec->mesh, j), rank);
        LDT_CHECK_GOTO(ldt_layout(spec, rank, &r));
        LDT_CHECK_GOTO(check_local(spec, rank, &r, locals[i], &data[i]));
    }
    LDT_CHECK_GOTO(ldt_shards_create(spec, &s));
    LDT_CHECK_GOTO(ldt__shards_adopt(s, locals, data));
    free(data);
    *out = s;
    return LDT_OK;
fail:
    ldt_shards_destroy(s); /* owns none of locals: adoption is all or nothing */
    free(data);
    return st;
}
