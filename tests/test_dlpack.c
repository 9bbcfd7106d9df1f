/* DLPack exchange (include/ldt/dlpack.h): the ABI's layout against the specification's
 * offsets, shards out and back in without a copy (writes seen through both sides), every
 * dtype's code and bits, the lifetime rules (the data outlives ldt_shards_destroy while a
 * tensor is out; the producer's deleter runs once, when the shards go) and the refusals. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/dlpack.h"
#include "ldt/exec.h"

/* The specification's x86-64 / aarch64 layout (LP64), by hand. */
Test(dlpack, abi_layout) {
    cr_expect_eq(sizeof(DLDevice), 8);
    cr_expect_eq(sizeof(DLDataType), 4);
    cr_expect_eq(offsetof(DLTensor, device), 8);
    cr_expect_eq(offsetof(DLTensor, ndim), 16);
    cr_expect_eq(offsetof(DLTensor, dtype), 20);
    cr_expect_eq(offsetof(DLTensor, shape), 24);
    cr_expect_eq(offsetof(DLTensor, strides), 32);
    cr_expect_eq(offsetof(DLTensor, byte_offset), 40);
    cr_expect_eq(sizeof(DLTensor), 48);
    cr_expect_eq(offsetof(DLManagedTensor, manager_ctx), 48);
    cr_expect_eq(offsetof(DLManagedTensor, deleter), 56);
    cr_expect_eq(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
    cr_expect_eq(offsetof(DLManagedTensorVersioned, deleter), 16);
    cr_expect_eq(offsetof(DLManagedTensorVersioned, flags), 24);
    cr_expect_eq(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
    cr_expect_eq(kDLCPU, 1);
    cr_expect_eq(kDLCUDA, 2);
    cr_expect_eq(kDLBfloat, 4);
    cr_expect_eq(kDLBool, 6);
    cr_expect_eq(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
}

/* A 2x2 mesh, a [7,5] tensor under (S0,S1): uneven shards, rank 3 holds [3,2]. */
static ldt_mesh *g_mesh;
static ldt_spec g_spec;
static float g_full[35];

static void setup_spec(ldt_dtype dt) {
    ldt_shape shape = {2, {7, 5}};
    ldt_placement pl[2] = {ldt_shard(0), ldt_shard(1)};
    cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &g_mesh), LDT_OK);
    cr_assert_eq(ldt_spec_init(&g_spec, g_mesh, &shape, pl, 2, dt), LDT_OK);
    for (int i = 0; i < 35; i++) g_full[i] = (float)i;
}

Test(dlpack, out_describes_the_local_shard_zero_copy) {
    ldt_shards *s;
    DLManagedTensorVersioned *t;
    int64_t nb;
    float *local;
    setup_spec(LDT_F32);
    cr_assert_eq(ldt_distribute(g_full, &g_spec, &s), LDT_OK);
    cr_assert_eq(ldt_to_dlpack(s, 3, 0, &t), LDT_OK, "%s", ldt_last_error());
    local = ldt_shards_local(s, 3, &nb);
    cr_expect_eq(t->version.major, 1);
    cr_expect_eq(t->flags, 0);
    cr_expect_eq(t->dl_tensor.data, local, "the data is the shard's buffer, not a copy");
    cr_expect_eq(t->dl_tensor.byte_offset, 0);
    cr_expect_eq(t->dl_tensor.device.device_type, kDLCPU);
    cr_expect_eq(t->dl_tensor.ndim, 2);
    cr_expect_eq(t->dl_tensor.shape[0], 3); /* rows [4,7) */
    cr_expect_eq(t->dl_tensor.shape[1], 2); /* cols [3,5) */
    cr_expect_eq(t->dl_tensor.strides[0], 2);
    cr_expect_eq(t->dl_tensor.strides[1], 1);
    cr_expect_eq(t->dl_tensor.dtype.code, kDLFloat);
    cr_expect_eq(t->dl_tensor.dtype.bits, 32);
    cr_expect_eq(t->dl_tensor.dtype.lanes, 1);
    /* element (i, j) of rank 3 is global (4 + i, 3 + j) = (4 + i) * 5 + 3 + j */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            cr_expect_eq(((float *)t->dl_tensor.data)[i * 2 + j], (float)((4 + i) * 5 + 3 + j));
    /* a write through the DLPack side is the shard's value */
    ((float *)t->dl_tensor.data)[5] = -1.0f;
    {
        float full[35];
        cr_assert_eq(ldt_full_tensor(s, full), LDT_OK);
        cr_expect_eq(full[6 * 5 + 4], -1.0f);
    }
    /* the data outlives the shards while the tensor is out */
    ldt_shards_destroy(s);
    cr_expect_eq(((float *)t->dl_tensor.data)[0], 23.0f);
    t->deleter(t);
    ldt_mesh_destroy(g_mesh);
}

Test(dlpack, read_only_flag_and_unversioned) {
    ldt_shards *s;
    DLManagedTensorVersioned *t;
    DLManagedTensor *u;
    setup_spec(LDT_F32);
    cr_assert_eq(ldt_distribute(g_full, &g_spec, &s), LDT_OK);
    cr_assert_eq(ldt_to_dlpack(s, 0, DLPACK_FLAG_BITMASK_READ_ONLY, &t), LDT_OK);
    cr_expect_eq(t->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    cr_assert_eq(ldt_to_dlpack_unversioned(s, 1, &u), LDT_OK);
    cr_expect_eq(u->dl_tensor.shape[0], 4); /* rank 1: rows [0,4) x cols [3,5) */
    cr_expect_eq(u->dl_tensor.shape[1], 2);
    cr_expect_eq(((float *)u->dl_tensor.data)[2], 8.0f); /* (1, 3) */
    ldt_shards_destroy(s);
    t->deleter(t);
    u->deleter(u);
    ldt_mesh_destroy(g_mesh);
}

/* A producer of plain host tensors that counts its deleter's calls. */
typedef struct {
    DLManagedTensorVersioned m;
    int64_t shape[LDT_MAX_DIMS], strides[LDT_MAX_DIMS];
    int *deleted;
} producer;

static void producer_delete(DLManagedTensorVersioned *self) {
    producer *p = (producer *)self;
    (*p->deleted)++;
    free(self->dl_tensor.data);
    free(p);
}

static producer *make_producer(const ldt_shape *shape, DLDataType dt, size_t es, int *deleted) {
    producer *p = calloc(1, sizeof *p);
    int64_t n = 1;
    p->m.version.major = 1;
    p->m.version.minor = 0;
    p->m.deleter = producer_delete;
    p->m.manager_ctx = p;
    p->m.dl_tensor.device.device_type = kDLCPU;
    p->m.dl_tensor.ndim = shape->ndim;
    p->m.dl_tensor.dtype = dt;
    for (int d = shape->ndim - 1; d >= 0; d--) {
        p->shape[d] = shape->dims[d];
        p->strides[d] = n;
        n *= shape->dims[d];
    }
    p->m.dl_tensor.shape = p->shape;
    p->m.dl_tensor.strides = p->strides;
    p->m.dl_tensor.data = calloc((size_t)(n ? n : 1), es);
    p->deleted = deleted;
    return p;
}

/* Round trip for every dtype: shards out as DLPack, their data copied into producer tensors,
 * taken back in by ldt_from_dlpack: the same full tensor, and the producer's memory is the
 * shards' (written on one side, read on the other). */
Test(dlpack, round_trip_every_dtype_zero_copy) {
    static const ldt_dtype dts[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                    LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};
    static const unsigned codes[] = {kDLFloat, kDLFloat, kDLFloat, kDLBfloat,
                                     kDLInt,   kDLInt,   kDLUInt,  kDLBool};
    static const unsigned bits[] = {32, 64, 16, 16, 32, 64, 8, 8};
    for (int k = 0; k < 8; k++) {
        ldt_dtype dt = dts[k];
        size_t es = ldt_dtype_size(dt);
        unsigned char full[35 * 8], back[35 * 8];
        ldt_shards *s, *s2;
        DLManagedTensorVersioned *locals[4];
        int deleted = 0;
        setup_spec(dt);
        for (int i = 0; i < 35 * (int)es; i++) full[i] = (unsigned char)(dt == LDT_BOOL ? i % 2 : i * 7 % 251);
        if (dt == LDT_F16 || dt == LDT_BF16 || dt == LDT_F32 || dt == LDT_F64)
            for (int i = 0; i < 35; i++) { /* finite values only */
                if (dt == LDT_F32) ((float *)full)[i] = (float)i * 0.5f;
                if (dt == LDT_F64) ((double *)full)[i] = i * 0.25;
                if (dt == LDT_F16) ((uint16_t *)full)[i] = ldt_f32_to_f16((float)i);
                if (dt == LDT_BF16) ((uint16_t *)full)[i] = ldt_f32_to_bf16((float)i);
            }
        cr_assert_eq(ldt_distribute(full, &g_spec, &s), LDT_OK);
        for (int i = 0; i < 4; i++) {
            DLManagedTensorVersioned *t;
            ldt_region r;
            producer *p;
            cr_assert_eq(ldt_to_dlpack(s, i, 0, &t), LDT_OK);
            cr_expect_eq(t->dl_tensor.dtype.code, codes[k], "%s", ldt_dtype_name(dt));
            cr_expect_eq(t->dl_tensor.dtype.bits, bits[k], "%s", ldt_dtype_name(dt));
            cr_assert_eq(ldt_layout(&g_spec, i, &r), LDT_OK);
            p = make_producer(&r.local_shape, t->dl_tensor.dtype, es, &deleted);
            memcpy(p->m.dl_tensor.data, t->dl_tensor.data, (size_t)r.numel * es);
            locals[i] = &p->m;
            t->deleter(t);
        }
        cr_assert_eq(ldt_from_dlpack(&g_spec, locals, &s2), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_full_tensor(s2, back), LDT_OK);
        cr_expect_eq(memcmp(full, back, 35 * es), 0, "%s round trip", ldt_dtype_name(dt));
        /* zero-copy: the shard's buffer is the producer's memory */
        for (int i = 0; i < 4; i++)
            cr_expect_eq(ldt_shards_local(s2, i, NULL), locals[i]->dl_tensor.data);
        /* write through the producer, read through lazydt: rank 2 holds rows [4,7) x [0,3) */
        memset(locals[2]->dl_tensor.data, 1, es);
        cr_assert_eq(ldt_full_tensor(s2, back), LDT_OK);
        cr_expect_eq(memcmp(back + 20 * es, locals[2]->dl_tensor.data, es), 0);
        cr_expect_eq(deleted, 0);
        ldt_shards_destroy(s2);
        cr_expect_eq(deleted, 4, "every producer tensor deleted once with the shards");
        ldt_shards_destroy(s);
        ldt_mesh_destroy(g_mesh);
    }
}

/* Byte offsets, degenerate strides on size-1 dims, NULL strides, and an unversioned
 * producer wrapped by ldt_dlpack_from_unversioned, on a 1-D mesh with an empty shard. */
Test(dlpack, offsets_strides_unversioned_and_empty_shards) {
    ldt_mesh *mesh;
    ldt_spec spec;
    ldt_shape shape = {2, {3, 1}}; /* dim 0 of 3 over 4 ranks: 1,1,1,0 */
    ldt_placement pl = ldt_shard(0);
    DLManagedTensorVersioned *locals[4];
    ldt_shards *s;
    int deleted = 0, legacy_deleted = 0;
    float full[3];
    cr_assert_eq(ldt_mesh_parse("4", LDT_DEVICE_CPU, &mesh), LDT_OK);
    cr_assert_eq(ldt_spec_init(&spec, mesh, &shape, &pl, 1, LDT_F32), LDT_OK);
    for (int i = 0; i < 4; i++) {
        ldt_shape ls = {2, {i < 3 ? 1 : 0, 1}};
        producer *p = make_producer(&ls, (DLDataType){kDLFloat, 32, 1}, 4, &deleted);
        free(p->m.dl_tensor.data);
        p->m.dl_tensor.data = malloc(16);
        ((float *)p->m.dl_tensor.data)[2] = (float)(10 + i);
        p->m.dl_tensor.byte_offset = 8; /* the element is the third float */
        if (i == 0) p->m.dl_tensor.strides = NULL;
        if (i == 1) p->strides[0] = 99, p->strides[1] = 42; /* size-1 dims: any stride */
        locals[i] = &p->m;
    }
    {
        /* rank 2's tensor comes from an unversioned producer */
        typedef struct {
            DLManagedTensor m;
            int64_t shape[2];
            int *deleted;
        } legacy_t;
        legacy_t *l = calloc(1, sizeof *l);
        DLManagedTensorVersioned *w;
        l->shape[0] = l->shape[1] = 1;
        l->m.dl_tensor = locals[2]->dl_tensor;
        l->m.dl_tensor.shape = l->shape;
        l->m.dl_tensor.strides = NULL;
        l->m.dl_tensor.data = malloc(4);
        l->m.dl_tensor.byte_offset = 0;
        ((float *)l->m.dl_tensor.data)[0] = 12.0f;
        l->deleted = &legacy_deleted;
        l->m.manager_ctx = l;
        l->m.deleter = NULL;
        cr_assert_eq(ldt_dlpack_from_unversioned(&l->m, &w), LDT_OK);
        cr_expect_eq(w->version.major, 1);
        cr_expect_eq(w->dl_tensor.data, l->m.dl_tensor.data);
        locals[2]->deleter(locals[2]);
        deleted = 0;
        locals[2] = w;
        cr_assert_eq(ldt_from_dlpack(&spec, locals, &s), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_full_tensor(s, full), LDT_OK);
        cr_expect_eq(full[0], 10.0f);
        cr_expect_eq(full[1], 11.0f);
        cr_expect_eq(full[2], 12.0f);
        cr_expect_neq(ldt_shards_local(s, 3, NULL), NULL, "an empty shard has a valid pointer");
        ldt_shards_destroy(s);
        cr_expect_eq(deleted, 3);
        free(l->m.dl_tensor.data);
        free(l);
    }
    ldt_mesh_destroy(mesh);
}

/* Every refusal names what was wrong; on failure nothing is taken (no deleter runs). */
Test(dlpack, refusals) {
    ldt_shards *s = NULL;
    DLManagedTensorVersioned *locals[4], *t;
    int deleted = 0;
    setup_spec(LDT_F32);
    for (int i = 0; i < 4; i++) {
        ldt_region r;
        cr_assert_eq(ldt_layout(&g_spec, i, &r), LDT_OK);
        locals[i] = &make_producer(&r.local_shape, (DLDataType){kDLFloat, 32, 1}, 4, &deleted)->m;
    }
#define REFUSED(code, text)                                                                   \
    do {                                                                                      \
        cr_expect_eq(ldt_from_dlpack(&g_spec, locals, &s), code, "%s", ldt_last_error());      \
        cr_expect(strstr(ldt_last_error(), text) != NULL, "message: %s", ldt_last_error());   \
        cr_expect_eq(s, NULL);                                                                \
        cr_expect_eq(deleted, 0);                                                             \
    } while (0)
    locals[1]->dl_tensor.device.device_type = kDLCUDA;
    REFUSED(LDT_ERR_UNSUPPORTED, "rank 1's tensor is on device type 2");
    locals[1]->dl_tensor.device.device_type = kDLCPU;
    locals[2]->dl_tensor.dtype.bits = 64;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "rank 2's tensor has dtype float64 (lanes 1); expected f32");
    locals[2]->dl_tensor.dtype.code = kDLComplex;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "dtype complex64");
    locals[2]->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 4};
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "lanes 4");
    locals[2]->dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
    locals[3]->dl_tensor.shape[0] = 4;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "rank 3's tensor has shape [4,2]; expected its local shape [3,2]");
    locals[3]->dl_tensor.shape[0] = 3;
    locals[3]->dl_tensor.strides[0] = 1, locals[3]->dl_tensor.strides[1] = 3; /* column-major */
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "stride 3 on dim 1; expected compact row-major");
    locals[3]->dl_tensor.strides[0] = 2, locals[3]->dl_tensor.strides[1] = 1;
    locals[0]->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "rank 0's tensor is read-only");
    locals[0]->flags = 0;
    locals[0]->version.major = 2;
    REFUSED(LDT_ERR_UNSUPPORTED, "DLPack version 2.0; expected major version 1");
    locals[0]->version.major = 1;
    locals[0]->dl_tensor.byte_offset = 2;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "not aligned to its 4-byte elements");
    locals[0]->dl_tensor.byte_offset = 0;
    locals[0]->dl_tensor.ndim = 1;
    REFUSED(LDT_ERR_INVALID_ARGUMENT, "rank 0's tensor has 1 dims; expected its local shape [4,3]");
    locals[0]->dl_tensor.ndim = 2;
    {
        DLManagedTensorVersioned *keep = locals[1];
        locals[1] = locals[0];
        REFUSED(LDT_ERR_INVALID_ARGUMENT, "the same managed tensor");
        locals[1] = NULL;
        REFUSED(LDT_ERR_INVALID_ARGUMENT, "the tensor of rank 1 (mesh position 1) is NULL");
        locals[1] = keep;
    }
    {
        ldt_mesh *meta;
        ldt_spec ms = g_spec;
        cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_META, &meta), LDT_OK);
        ms.mesh = meta;
        cr_expect_eq(ldt_from_dlpack(&ms, locals, &s), LDT_ERR_INVALID_USAGE);
        cr_expect(strstr(ldt_last_error(), "meta") != NULL, "%s", ldt_last_error());
        ldt_mesh_destroy(meta);
    }
    cr_expect_eq(ldt_from_dlpack(NULL, locals, &s), LDT_ERR_INVALID_ARGUMENT);
    /* now the good ones are taken */
    cr_assert_eq(ldt_from_dlpack(&g_spec, locals, &s), LDT_OK, "%s", ldt_last_error());
    /* out: a rank not in the mesh, unknown flags */
    cr_expect_eq(ldt_to_dlpack(s, 4, 0, &t), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "rank 4 is not in mesh 2x2") != NULL, "%s", ldt_last_error());
    cr_expect_eq(ldt_to_dlpack(s, 0, DLPACK_FLAG_BITMASK_IS_COPIED, &t), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "flags 0x2; expected 0 or DLPACK_FLAG_BITMASK_READ_ONLY") != NULL,
              "%s", ldt_last_error());
    cr_expect_eq(ldt_to_dlpack(NULL, 0, 0, &t), LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_to_dlpack_unversioned(s, -1, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_dlpack_from_unversioned(NULL, &t), LDT_ERR_INVALID_ARGUMENT);
    ldt_shards_destroy(s);
    cr_expect_eq(deleted, 4);
    ldt_mesh_destroy(g_mesh);
}
