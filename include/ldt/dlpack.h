/* DLPack exchange: a rank's local shard handed to another framework (numpy, PyTorch, JAX,
 * CuPy) and taken from one, without copying the data (docs/python.md, "DLPack").
 *
 * The structs below are the DLPack 1.x ABI, written from the specification
 * (https://dmlc.github.io/dlpack/latest/): their layout is the contract between producer and
 * consumer, so they match the specification's field for field. A program that includes the
 * project's own dlpack.h first keeps those definitions (they are the same ABI).
 *
 *   DLManagedTensorVersioned *t;
 *   ldt_to_dlpack(shards, 2, 0, &t);        // rank 2's shard, no copy; shards stay alive
 *   float *p = t->dl_tensor.data;           //   while t lives, even past ldt_shards_destroy
 *   t->deleter(t);                          // the consumer's last step
 *
 *   DLManagedTensorVersioned *locals[4] = ...; // one per mesh rank, row-major mesh order
 *   ldt_from_dlpack(&spec, locals, &shards);   // shards now own locals[] (their deleters)
 */
#ifndef LDT_DLPACK_H
#define LDT_DLPACK_H

#include <stdint.h>

#include "ldt/core.h"
#include "ldt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

/* The version of the specification these structs follow (DLManagedTensorVersioned.version
 * of the tensors lazydt makes). Consumers accept any minor version of major 1. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

/* A (major, minor) pair; a consumer refuses a major version it does not know. */
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Where the data lives. Values fixed by the specification. */
typedef enum {
    kDLCPU = 1,          /* host memory */
    kDLCUDA = 2,         /* CUDA device memory */
    kDLCUDAHost = 3,     /* pinned host memory (cudaMallocHost) */
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13, /* CUDA unified memory */
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17
} DLDeviceType;

/* A device: its type and its index among devices of that type (0 for the host). */
typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

/* Kinds of element. */
typedef enum {
    kDLInt = 0U,          /* signed integer */
    kDLUInt = 1U,         /* unsigned integer */
    kDLFloat = 2U,        /* IEEE floating point */
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,       /* bfloat16 */
    kDLComplex = 5U,
    kDLBool = 6U,         /* one byte per element, 0 or 1 */
    kDLFloat8_e3m4 = 7U,
    kDLFloat8_e4m3 = 8U,
    kDLFloat8_e4m3b11fnuz = 9U,
    kDLFloat8_e4m3fn = 10U,
    kDLFloat8_e4m3fnuz = 11U,
    kDLFloat8_e5m2 = 12U,
    kDLFloat8_e5m2fnuz = 13U,
    kDLFloat8_e8m0fnu = 14U,
    kDLFloat6_e2m3fn = 15U,
    kDLFloat6_e3m2fn = 16U,
    kDLFloat4_e2m1fn = 17U
} DLDataTypeCode;

/* An element type: code (a DLDataTypeCode), bits per lane, lanes (1 for scalars). */
typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

/* A strided view of memory. Element (i0, i1, ...) is at (char *)data + byte_offset +
 * (i0 * strides[0] + i1 * strides[1] + ...) * element size; strides are in elements, and a
 * NULL strides means compact row-major. shape and strides hold ndim entries each. */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

/* The unversioned (pre-1.0, "legacy") managed tensor: the consumer calls deleter(self)
 * once when it is done; manager_ctx is the producer's. */
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

/* Flags of DLManagedTensorVersioned. READ_ONLY: the consumer must not write the data.
 * IS_COPIED: the producer made a copy for this exchange (writes are not seen by the
 * producer's object). IS_SUBBYTE_TYPE_PADDED: sub-byte elements are padded to a byte. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ULL << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1ULL << 2)

/* The versioned managed tensor (DLPack >= 1.0): version first so a consumer can check it
 * before reading anything else; deleter(self) frees it (may be NULL: nothing to free). */
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* DLPACK_DLPACK_H_ */

typedef struct ldt_shards ldt_shards;

/* ---------------------------------------------------------------------------------------
 * Out: rank `rank`'s local shard of s as a DLPack tensor, zero-copy. The tensor is host
 * memory (kDLCPU, device 0: ldt_shards hold host data on every mesh), compact row-major
 * with explicit strides, ldt_layout's local shape, dtype mapped as f32/f64/f16 -> kDLFloat,
 * bf16 -> kDLBfloat 16, i32/i64 -> kDLInt, u8 -> kDLUInt 8, bool -> kDLBool 8.
 * flags: 0 or DLPACK_FLAG_BITMASK_READ_ONLY (a promise asked of the consumer); others are
 * refused. Ownership: *out belongs to the caller, who calls (*out)->deleter(*out) exactly once.
 * It holds a reference on s's storage: the data stays valid until both ldt_shards_destroy(s)
 * and every exported tensor's deleter have run (in any order, from any thread). Writes
 * through either side are seen by the other. Errors: NULL arguments, a rank outside s's
 * mesh, unknown flags. */
LDT_API ldt_status ldt_to_dlpack(ldt_shards *s, int rank, uint64_t flags,
                                 DLManagedTensorVersioned **out);
/* The same as an unversioned DLManagedTensor, for consumers older than DLPack 1.0 (numpy <
 * 2.1, Python's "dltensor" capsules); the same ownership rules (no read-only flag). */
LDT_API ldt_status ldt_to_dlpack_unversioned(ldt_shards *s, int rank, DLManagedTensor **out);

/* In: shards of spec whose local buffers are the given tensors' memory, zero-copy.
 * locals[i] is the i-th rank of spec's mesh in row-major order (ldt_mesh_rank_at) and must be
 * a writable host tensor (kDLCPU or kDLCUDAHost), of spec's dtype (the mapping above; lanes
 * 1), of that rank's local shape (ldt_layout), compact row-major (NULL strides, or strides
 * that are row-major where a dim's size exceeds 1), its data aligned to the element size, of
 * DLPack major version 1. Ownership: on success the shards own every locals[i]: they call
 * locals[i]->deleter(locals[i]) when destroyed (ldt_shards_destroy, and the last exported
 * tensor gone), and the caller must not use or delete them. On failure nothing is taken: the
 * caller still owns every locals[i]. A meta mesh, a read-only tensor (the library writes
 * shards in place), and every mismatch above are refused with a message naming the rank and
 * what was expected. */
LDT_API ldt_status ldt_from_dlpack(const ldt_spec *spec, DLManagedTensorVersioned *const *locals,
                                   ldt_shards **out);
/* Wraps an unversioned tensor as a versioned one (version 1.0, flags 0) so ldt_from_dlpack
 * takes it. On success *out owns legacy: its deleter calls legacy's deleter, then frees the
 * wrapper; the caller hands *out on (or deletes it) and no longer deletes legacy itself. On
 * failure (NULL arguments, out of memory) legacy stays the caller's. */
LDT_API ldt_status ldt_dlpack_from_unversioned(DLManagedTensor *legacy,
                                               DLManagedTensorVersioned **out);

#ifdef __cplusplus
}
#endif
#endif
