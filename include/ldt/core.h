/* lazydt core vocabulary: status codes, dtypes, shapes, device meshes, placements, specs and
 * the layout function every later layer uses to know which part of a tensor a rank holds.
 *
 *   ldt_mesh *mesh;
 *   ldt_spec spec;
 *   ldt_region reg;
 *   if (ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh) != LDT_OK) puts(ldt_last_error());
 *   ldt_shape shape = {2, {7, 5}};
 *   ldt_placement pl[2];
 *   int npl;
 *   ldt_placements_parse("S0,S1", shape.ndim, pl, 2, &npl);
 *   ldt_spec_init(&spec, mesh, &shape, pl, npl, LDT_F32);
 *   ldt_layout(&spec, 3, &reg);      // rank 3 holds rows [4,7) x cols [3,5): local [3,2]
 *   ldt_mesh_destroy(mesh);
 */
#ifndef LDT_CORE_H
#define LDT_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "ldt/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Status. Codes say whose fault it is; the message (ldt_last_error) says what and why.
 * X(enum suffix, value, name, what to do)
 */
#define LDT_STATUS_MAP(X)                                                                   \
    X(OK, 0, "ok", "no error")                                                              \
    X(ERR_INVALID_ARGUMENT, -1, "invalid argument",                                         \
      "a value passed in is wrong (shape, placement, dim, dtype, count): fix the call")     \
    X(ERR_INVALID_USAGE, -2, "invalid usage",                                               \
      "the call does not fit the object's state or the peers' calls: check call order")    \
    X(ERR_OUT_OF_MEMORY, -3, "out of memory", "an allocation failed: free memory or shrink") \
    X(ERR_OVERFLOW, -4, "overflow",                                                         \
      "a size does not fit in 64 bits: the shape is too large")                             \
    X(ERR_UNSUPPORTED, -5, "unsupported",                                                   \
      "this build or device cannot do that (no CUDA, no MPI, dtype not supported)")         \
    X(ERR_SYSTEM, -6, "system error", "the operating system refused (file, thread, clock)")   \
    X(ERR_CORRUPT, -7, "corrupt input", "a file or text is malformed or truncated")          \
    X(ERR_TIMEOUT, -8, "timeout",                                                           \
      "a peer rank did not arrive in time: a rank failed or called something else")        \
    X(ERR_REMOTE, -9, "remote error", "another rank failed; its message says why")          \
    X(ERR_CUDA, -10, "CUDA error", "the CUDA runtime, cuBLAS or NCCL reported an error")    \
    X(ERR_INTERNAL, -11, "internal error", "a bug in lazydt: please report it")

typedef enum ldt_status {
#define LDT__STATUS_ENUM(sfx, val, name, hint) LDT_##sfx = val,
    LDT_STATUS_MAP(LDT__STATUS_ENUM)
#undef LDT__STATUS_ENUM
} ldt_status;

/* Short name of a status ("invalid argument"); "unknown status" for other values. */
LDT_API const char *ldt_status_name(ldt_status s);
/* One line saying what to do about a status. */
LDT_API const char *ldt_status_hint(ldt_status s);
/* The calling thread's last error message ("" if none): names what was wrong and what was
 * expected, e.g. "spec: placement S2 shards dim 2 but the tensor has 2 dims [7,5]". */
LDT_API const char *ldt_last_error(void);
/* The file:line trail the error passed through inside the library, innermost first. */
LDT_API const char *ldt_last_error_trace(void);
/* Forget the calling thread's last error. */
LDT_API void ldt_clear_error(void);
/* Sets the calling thread's last error (for code built on lazydt's API, such as the model
 * builders, that reports its own bad input the library's way); returns st. */
LDT_API ldt_status ldt_set_error(ldt_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------------------------------
 * dtypes
 */
#define LDT_DTYPE_MAP(X)        \
    X(F32, "f32", 4, 1)         \
    X(F64, "f64", 8, 1)         \
    X(F16, "f16", 2, 1)         \
    X(BF16, "bf16", 2, 1)       \
    X(I32, "i32", 4, 0)         \
    X(I64, "i64", 8, 0)         \
    X(U8, "u8", 1, 0)           \
    X(BOOL, "bool", 1, 0)

typedef enum ldt_dtype {
#define LDT__DTYPE_ENUM(sfx, name, size, fl) LDT_##sfx,
    LDT_DTYPE_MAP(LDT__DTYPE_ENUM)
#undef LDT__DTYPE_ENUM
    LDT_DTYPE_COUNT
} ldt_dtype;

/* Bytes per element; 0 for an invalid dtype. */
LDT_API size_t ldt_dtype_size(ldt_dtype t);
/* "f32", "bf16", ...; "invalid" for an invalid dtype. */
LDT_API const char *ldt_dtype_name(ldt_dtype t);
/* 1 for floating-point dtypes (f32, f64, f16, bf16). */
LDT_API int ldt_dtype_is_float(ldt_dtype t);
LDT_API ldt_status ldt_dtype_parse(const char *text, ldt_dtype *out);

/* f16 (IEEE binary16) and bf16 bit patterns <-> f32, round to nearest even, NaN kept quiet. */
LDT_API uint16_t ldt_f32_to_f16(float f);
LDT_API float ldt_f16_to_f32(uint16_t h);
LDT_API uint16_t ldt_f32_to_bf16(float f);
LDT_API float ldt_bf16_to_f32(uint16_t h);

/* ---------------------------------------------------------------------------------------
 * Shapes: up to 8 dims of int64 sizes; element counts are checked for overflow.
 */
#define LDT_MAX_DIMS 8

typedef struct ldt_shape {
    int ndim;
    int64_t dims[LDT_MAX_DIMS];
} ldt_shape;

/* Number of elements; LDT_ERR_OVERFLOW when it exceeds INT64_MAX, LDT_ERR_INVALID_ARGUMENT
 * for a negative size or a bad ndim. A 0-dim shape has 1 element. */
LDT_API ldt_status ldt_shape_numel(const ldt_shape *s, int64_t *out);
/* Bytes of a contiguous tensor of that shape and dtype, overflow-checked. */
LDT_API ldt_status ldt_shape_nbytes(const ldt_shape *s, ldt_dtype t, int64_t *out);
/* "7,5" (also "[7,5]", "7x5"); "" or "[]" is a 0-dim shape. */
LDT_API ldt_status ldt_shape_parse(const char *text, ldt_shape *out);
/* Writes "[7,5]"; returns the length it needed (snprintf rules). */
LDT_API int ldt_shape_format(const ldt_shape *s, char *buf, size_t cap);
LDT_API int ldt_shape_equal(const ldt_shape *a, const ldt_shape *b);

/* ---------------------------------------------------------------------------------------
 * Device meshes: an N-D array of (global) ranks with optional dim names.
 */
typedef enum ldt_device_type {
    LDT_DEVICE_CPU,  /* ranks are CPU threads or processes */
    LDT_DEVICE_CUDA, /* one GPU per rank */
    LDT_DEVICE_META  /* no devices, no communicator: plans and reports only */
} ldt_device_type;

typedef struct ldt_mesh ldt_mesh;

/* ranks: row-major array of prod(dims) distinct non-negative ranks, or NULL for 0..n-1.
 * names: ndim dim names (identifiers, distinct) or NULL for unnamed dims. */
LDT_API ldt_status ldt_mesh_create(int ndim, const int64_t *dims, const int *ranks,
                                   const char *const *names, ldt_device_type dev, ldt_mesh **out);
/* "4", "2x2", "dp=2,tp=2", or an explicit rank array "[[0,2],[1,3]]". */
LDT_API ldt_status ldt_mesh_parse(const char *text, ldt_device_type dev, ldt_mesh **out);
LDT_API ldt_status ldt_mesh_clone(const ldt_mesh *m, ldt_mesh **out);
LDT_API void ldt_mesh_destroy(ldt_mesh *m);

/* Number of mesh dims (0 for NULL); sizes, rank count and device type below. */
LDT_API int ldt_mesh_ndim(const ldt_mesh *m);
LDT_API int64_t ldt_mesh_dim_size(const ldt_mesh *m, int dim); /* 0 if dim is out of range */
LDT_API int ldt_mesh_nranks(const ldt_mesh *m);
LDT_API ldt_device_type ldt_mesh_device(const ldt_mesh *m);
/* Rank at row-major position i (0 <= i < nranks); -1 out of range. */
LDT_API int ldt_mesh_rank_at(const ldt_mesh *m, int i);
/* Dim name, or NULL for unnamed meshes. */
LDT_API const char *ldt_mesh_dim_name(const ldt_mesh *m, int dim);
/* Index of the dim called name. */
LDT_API ldt_status ldt_mesh_dim_index(const ldt_mesh *m, const char *name, int *out);
/* Coordinate (ndim entries) of a rank; LDT_ERR_INVALID_ARGUMENT if the rank is not in it. */
LDT_API ldt_status ldt_mesh_coord(const ldt_mesh *m, int rank, int64_t *coord);
/* Rank at a coordinate. */
LDT_API ldt_status ldt_mesh_rank_of(const ldt_mesh *m, const int64_t *coord, int *out);
/* The ranks of the group along `dim` that contains `rank`, in coordinate order;
 * ranks must hold ldt_mesh_dim_size(m, dim) entries. */
LDT_API ldt_status ldt_mesh_group(const ldt_mesh *m, int rank, int dim, int *ranks);
/* The sub-mesh over the selected dims (in the order given) that contains `rank`
 * (DeviceMesh's mesh["tp"]). */
LDT_API ldt_status ldt_mesh_submesh(const ldt_mesh *m, int rank, int ndims, const int *dims,
                                    ldt_mesh **out);
/* Every sub-mesh over the selected dims, one per coordinate of the other dims, in row-major
 * order of those; *out is an array of *count meshes: free with ldt_mesh_list_destroy. */
LDT_API ldt_status ldt_mesh_split(const ldt_mesh *m, int ndims, const int *dims, ldt_mesh ***out,
                                  int *count);
LDT_API void ldt_mesh_list_destroy(ldt_mesh **list, int count);
/* "2x2", "dp=2,tp=2", or "[[0,2],[1,3]]" when the ranks are not 0..n-1 in order.
 * Returns the length it needed (snprintf rules). */
LDT_API int ldt_mesh_format(const ldt_mesh *m, char *buf, size_t cap);
/* Same dims, names, ranks and device. */
LDT_API int ldt_mesh_equal(const ldt_mesh *a, const ldt_mesh *b);

/* ---------------------------------------------------------------------------------------
 * Placements, one per mesh dim. Text: S0, R, P (=Psum), Pavg, Pmax, Pmin, IS0:3.
 */
typedef enum ldt_placement_kind {
    LDT_PLACE_REPLICATE,
    LDT_PLACE_SHARD,
    LDT_PLACE_PARTIAL,
    LDT_PLACE_INTERLEAVED_SHARD
} ldt_placement_kind;

typedef enum ldt_reduce_op { LDT_REDUCE_SUM, LDT_REDUCE_AVG, LDT_REDUCE_MAX, LDT_REDUCE_MIN } ldt_reduce_op;

typedef struct ldt_placement {
    ldt_placement_kind kind;
    int dim;          /* Shard / InterleavedShard: tensor dim (normalised, >= 0) */
    int64_t blocks;   /* InterleavedShard: number of interleaved blocks k */
    ldt_reduce_op op; /* Partial: the pending reduction */
} ldt_placement;

/* Placement values: Replicate, Shard(dim), Partial(op), InterleavedShard(dim, blocks).
 * Nothing is checked here; ldt_spec_init validates them against a tensor. */
LDT_API ldt_placement ldt_replicate(void);
LDT_API ldt_placement ldt_shard(int dim);
LDT_API ldt_placement ldt_partial(ldt_reduce_op op);
LDT_API ldt_placement ldt_interleaved_shard(int dim, int64_t blocks);

LDT_API const char *ldt_reduce_op_name(ldt_reduce_op op); /* "sum", "avg", "max", "min" */
LDT_API ldt_status ldt_reduce_op_parse(const char *text, ldt_reduce_op *out);

/* Parses "S0,R" (also "[S0, R]" and "Shard(0),Replicate()" forms). Negative dims are
 * normalised against tensor_ndim; pass tensor_ndim < 0 to keep them as written (then a
 * negative dim is an error). */
LDT_API ldt_status ldt_placements_parse(const char *text, int tensor_ndim, ldt_placement *out,
                                        int cap, int *n);
/* Writes "S0,R"; returns the length needed (snprintf rules). */
LDT_API int ldt_placement_format(const ldt_placement *p, char *buf, size_t cap);
LDT_API int ldt_placements_format(const ldt_placement *p, int n, char *buf, size_t cap);
LDT_API int ldt_placement_equal(const ldt_placement *a, const ldt_placement *b);

/* ---------------------------------------------------------------------------------------
 * Specs: mesh + placements + global shape/stride/dtype. The mesh is borrowed, not owned.
 */
typedef struct ldt_spec {
    const ldt_mesh *mesh;
    int nplace; /* == ldt_mesh_ndim(mesh) */
    ldt_placement placements[LDT_MAX_DIMS];
    ldt_shape shape;
    int64_t stride[LDT_MAX_DIMS]; /* global strides in elements, row-major by default */
    ldt_dtype dtype;
} ldt_spec;

/* Validates and fills a spec with a contiguous stride: one placement per mesh dim, shard
 * dims in range (negative dims normalised), InterleavedShard blocks dividing the dim and
 * its dim not sharded on another mesh dim, element count within int64. */
LDT_API ldt_status ldt_spec_init(ldt_spec *spec, const ldt_mesh *mesh, const ldt_shape *shape,
                                 const ldt_placement *placements, int nplace, ldt_dtype dtype);
/* Re-checks an existing spec (for specs filled by hand). */
LDT_API ldt_status ldt_spec_check(const ldt_spec *spec);
/* "[7,5] f32 (S0,S1) on 2x2" */
LDT_API int ldt_spec_format(const ldt_spec *spec, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------
 * Layout. Along each tensor dim a rank holds `blocks` runs of `len` indices: run j covers
 * [start + j*block_stride, start + j*block_stride + len). Shard and unsharded dims have one
 * run; InterleavedShard(d, k) has k. The local tensor is the row-major concatenation of the
 * runs, dim by dim, so local index i on dim d is global (i / len) * block_stride + start +
 * i % len. Uneven sizes follow torch.chunk: chunks of ceil(n/k), trailing ranks short or
 * empty; nested sharding splits in mesh-dim order, outer first.
 */
typedef struct ldt_dim_runs {
    int64_t start;
    int64_t len;
    int64_t blocks;
    int64_t block_stride;
} ldt_dim_runs;

typedef struct ldt_region {
    int ndim;
    ldt_shape local_shape;          /* dims[d] = runs[d].len * runs[d].blocks */
    int64_t offset[LDT_MAX_DIMS];   /* global start of the first run per dim */
    ldt_dim_runs runs[LDT_MAX_DIMS];
    int64_t nslices;                /* product of runs[d].blocks (0 if the region is empty) */
    int64_t numel;                  /* elements held */
} ldt_region;

/* The region of the global tensor that `rank` holds. */
LDT_API ldt_status ldt_layout(const ldt_spec *spec, int rank, ldt_region *out);
/* Same, by mesh coordinate. */
LDT_API ldt_status ldt_layout_coord(const ldt_spec *spec, const int64_t *coord, ldt_region *out);
/* Slice i (0 <= i < nslices, row-major over the runs of each dim) as a global offset and
 * shape. */
LDT_API ldt_status ldt_region_slice(const ldt_region *r, int64_t i, int64_t *offset,
                                    int64_t *shape);
/* torch.chunk of a dim of size n into k parts: start and length of part i. */
LDT_API void ldt_chunk(int64_t n, int64_t k, int64_t i, int64_t *start, int64_t *len);

/* ---------------------------------------------------------------------------------------
 * Other systems' sharding notations (docs/notations.md). ColossalAI/Alpa "[S01,R]" and
 * PyTorch/XLA "((0, 1), None)" have one entry per TENSOR dim naming the mesh dims that shard
 * it; our placements have one per MESH dim. A tensor dim sharded on several mesh dims lists
 * them in increasing mesh-dim order, the order ldt_layout splits it in; another order ("S10")
 * and Partial or InterleavedShard placements have no counterpart and are errors.
 * Formatters write into buf (cap bytes) and set *need (may be NULL) to the text's length;
 * a buffer too small is an error. Parsers fill mesh_ndim placements (cap >= mesh_ndim);
 * tensor_ndim >= 0 requires that many entries, < 0 takes the count as written.
 */
/* Placements -> ColossalAI/Alpa sharding sequence: R,S0 on a 2-D mesh, 3-D tensor -> "[S1,R,R]". */
LDT_API ldt_status ldt_colossal_format(const ldt_placement *pl, int nplace, int tensor_ndim,
                                       char *buf, size_t cap, size_t *need);
/* "[S0,R]", "[S01,R]", Alpa's "S01R" -> one placement per mesh dim (mesh dims it names
 * nowhere: R). */
LDT_API ldt_status ldt_colossal_parse(const char *text, int mesh_ndim, int tensor_ndim,
                                      ldt_placement *out, int cap, int *n);
/* Placements -> torch_xla partition spec as Python writes it: R,S0 -> "(1, None, None)",
 * S0,S0 (1-D tensor) -> "((0, 1),)"; the mesh axes of one dim go major first. */
LDT_API ldt_status ldt_xla_format(const ldt_placement *pl, int nplace, int tensor_ndim, char *buf,
                                  size_t cap, size_t *need);
/* "(1, None, None)", "((0, 1), None)" -> one placement per mesh dim. */
LDT_API ldt_status ldt_xla_parse(const char *text, int mesh_ndim, int tensor_ndim,
                                 ldt_placement *out, int cap, int *n);
/* The HLO sharding of a spec, device ids from the mesh's rank array: R,S0 on 2x4, 3-D ->
 * "{devices=[4,1,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"; "{replicated}" if unsharded.
 * Refuses a dim split unevenly over several mesh dims where nested torch.chunk != XLA tiles. */
LDT_API ldt_status ldt_hlo_sharding_format(const ldt_spec *spec, char *buf, size_t cap,
                                           size_t *need);

#ifdef __cplusplus
}
#endif
#endif
