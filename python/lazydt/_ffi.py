"""The C library, loaded through cffi in ABI mode: the declarations of the public API the
package uses (include/ldt/*.h), where the library is found, and C errors as exceptions."""
import os
import subprocess
import sys
import threading

from cffi import FFI

ffi = FFI()
# Enums are passed as int (their C ABI); the structs repeat include/ldt/*.h field for field.
ffi.cdef(r"""
typedef int ldt_status;
typedef int ldt_dtype;
const char *ldt_status_name(ldt_status s);
const char *ldt_last_error(void);
void ldt_clear_error(void);
size_t ldt_dtype_size(ldt_dtype t);
const char *ldt_dtype_name(ldt_dtype t);
ldt_status ldt_dtype_parse(const char *text, ldt_dtype *out);

typedef struct { int ndim; int64_t dims[8]; } ldt_shape;
typedef struct ldt_mesh ldt_mesh;
ldt_status ldt_mesh_create(int ndim, const int64_t *dims, const int *ranks,
                           const char *const *names, int dev, ldt_mesh **out);
ldt_status ldt_mesh_parse(const char *text, int dev, ldt_mesh **out);
void ldt_mesh_destroy(ldt_mesh *m);
int ldt_mesh_ndim(const ldt_mesh *m);
int64_t ldt_mesh_dim_size(const ldt_mesh *m, int dim);
int ldt_mesh_nranks(const ldt_mesh *m);
int ldt_mesh_device(const ldt_mesh *m);
int ldt_mesh_rank_at(const ldt_mesh *m, int i);
const char *ldt_mesh_dim_name(const ldt_mesh *m, int dim);
ldt_status ldt_mesh_dim_index(const ldt_mesh *m, const char *name, int *out);
ldt_status ldt_mesh_coord(const ldt_mesh *m, int rank, int64_t *coord);
ldt_status ldt_mesh_submesh(const ldt_mesh *m, int rank, int ndims, const int *dims,
                            ldt_mesh **out);
ldt_status ldt_mesh_split(const ldt_mesh *m, int ndims, const int *dims, ldt_mesh ***out,
                          int *count);
void ldt_mesh_list_destroy(ldt_mesh **list, int count);
int ldt_mesh_format(const ldt_mesh *m, char *buf, size_t cap);
int ldt_mesh_equal(const ldt_mesh *a, const ldt_mesh *b);

typedef struct { int kind; int dim; int64_t blocks; int op; } ldt_placement;
ldt_status ldt_placements_parse(const char *text, int tensor_ndim, ldt_placement *out, int cap,
                                int *n);
int ldt_placements_format(const ldt_placement *p, int n, char *buf, size_t cap);
typedef struct {
    const ldt_mesh *mesh; int nplace; ldt_placement placements[8]; ldt_shape shape;
    int64_t stride[8]; int dtype;
} ldt_spec;
ldt_status ldt_spec_init(ldt_spec *spec, const ldt_mesh *mesh, const ldt_shape *shape,
                         const ldt_placement *placements, int nplace, int dtype);
int ldt_spec_format(const ldt_spec *spec, char *buf, size_t cap);
typedef struct { int64_t start, len, blocks, block_stride; } ldt_dim_runs;
typedef struct {
    int ndim; ldt_shape local_shape; int64_t offset[8]; ldt_dim_runs runs[8];
    int64_t nslices; int64_t numel;
} ldt_region;
ldt_status ldt_layout(const ldt_spec *spec, int rank, ldt_region *out);

typedef struct ldt_shards ldt_shards;
ldt_status ldt_shards_create(const ldt_spec *spec, ldt_shards **out);
void ldt_shards_destroy(ldt_shards *s);
const ldt_spec *ldt_shards_spec(const ldt_shards *s);
void *ldt_shards_local(const ldt_shards *s, int rank, int64_t *nbytes);
ldt_status ldt_distribute(const void *full, const ldt_spec *spec, ldt_shards **out);
ldt_status ldt_full_tensor(const ldt_shards *s, void *full);

typedef struct ldt_redist_plan ldt_redist_plan;
ldt_status ldt_redist_plan_create(const ldt_spec *src, const ldt_mesh *to_mesh,
                                  const ldt_placement *to, int nto, const void *opts,
                                  ldt_redist_plan **out);
void ldt_redist_plan_destroy(ldt_redist_plan *p);
int ldt_redist_plan_nsteps(const ldt_redist_plan *p);
int64_t ldt_redist_plan_bytes(const ldt_redist_plan *p);
ldt_status ldt_redistribute_shards(const ldt_shards *src, const ldt_redist_plan *plan,
                                   ldt_shards **out);

typedef struct ldt_ctx ldt_ctx;
typedef struct ldt_tensor ldt_tensor;
typedef struct { const ldt_mesh *mesh; uint64_t seed; void *world; } ldt_ctx_options;
ldt_status ldt_ctx_create(const ldt_ctx_options *opts, ldt_ctx **out);
void ldt_ctx_destroy(ldt_ctx *ctx);
const char *ldt_ctx_errmsg(const ldt_ctx *ctx);
ldt_status ldt_ctx_status(const ldt_ctx *ctx);
void ldt_ctx_clear_error(ldt_ctx *ctx);
ldt_status ldt_ctx_set_seed(ldt_ctx *ctx, uint64_t seed, uint64_t offset);
int ldt_ctx_is_meta(const ldt_ctx *ctx);
ldt_tensor *ldt_input(ldt_ctx *ctx, const char *name, const ldt_shape *shape, int dt);
ldt_tensor *ldt_param(ldt_ctx *ctx, const char *name, const ldt_shape *shape, int dt);
ldt_tensor *ldt_constant(ldt_ctx *ctx, const ldt_shape *shape, int dt, const void *data);
ldt_status ldt_input_bind(ldt_tensor *input, const void *data, int64_t nbytes);
ldt_status ldt_param_set(ldt_tensor *param, const void *data, int64_t nbytes);
typedef struct {
    int kind; double a, b; double lo, hi; int fan_out; const void *data;
} ldt_init;
ldt_status ldt_param_init(ldt_tensor *param, const ldt_init *init);
ldt_status ldt_assign(ldt_tensor *dst, ldt_tensor *value);
ldt_tensor *ldt_keep(ldt_tensor *t);
ldt_status ldt_sync(ldt_ctx *ctx);
void ldt_trace_discard(ldt_ctx *ctx);
ldt_status ldt_read(ldt_tensor *t, void *dst, int64_t nbytes);
ldt_status ldt_tensor_shape(const ldt_tensor *t, ldt_shape *out);
int ldt_tensor_dtype(const ldt_tensor *t);
const char *ldt_tensor_name(const ldt_tensor *t);
ldt_status ldt_pin(ldt_tensor *t, const ldt_placement *placements, int n);
ldt_tensor *ldt_redistribute_to(ldt_tensor *t, const ldt_placement *placements, int n);
ldt_tensor *ldt_add(ldt_tensor *a, ldt_tensor *b);
ldt_tensor *ldt_sub(ldt_tensor *a, ldt_tensor *b);
ldt_tensor *ldt_mul(ldt_tensor *a, ldt_tensor *b);
ldt_tensor *ldt_div(ldt_tensor *a, ldt_tensor *b);
ldt_tensor *ldt_matmul(ldt_tensor *a, ldt_tensor *b);
ldt_tensor *ldt_linear(ldt_tensor *x, ldt_tensor *w, ldt_tensor *b);
ldt_tensor *ldt_add_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_sub_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_rsub_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_mul_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_div_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_rdiv_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_pow_scalar(ldt_tensor *x, double s);
ldt_tensor *ldt_neg(ldt_tensor *x);
ldt_tensor *ldt_exp(ldt_tensor *x);
ldt_tensor *ldt_log(ldt_tensor *x);
ldt_tensor *ldt_sqrt(ldt_tensor *x);
ldt_tensor *ldt_tanh(ldt_tensor *x);
ldt_tensor *ldt_relu(ldt_tensor *x);
ldt_tensor *ldt_gelu(ldt_tensor *x, int tanh_form);
ldt_tensor *ldt_silu(ldt_tensor *x);
ldt_tensor *ldt_cast(ldt_tensor *x, int dt);
ldt_tensor *ldt_reshape(ldt_tensor *x, const ldt_shape *shape);
ldt_tensor *ldt_transpose(ldt_tensor *x, int d0, int d1);
ldt_tensor *ldt_sum(ldt_tensor *x, const int *dims, int n, int keepdim);
ldt_tensor *ldt_mean(ldt_tensor *x, const int *dims, int n, int keepdim);
ldt_tensor *ldt_amax(ldt_tensor *x, const int *dims, int n, int keepdim);
ldt_tensor *ldt_softmax(ldt_tensor *x, int dim);
ldt_tensor *ldt_layer_norm(ldt_tensor *x, int ndims, ldt_tensor *w, ldt_tensor *b, double eps);
ldt_tensor *ldt_cross_entropy(ldt_tensor *logits, ldt_tensor *targets, int64_t ignore_index);
ldt_tensor *ldt_normal(ldt_ctx *ctx, const ldt_shape *shape, int dt, double mean, double std);
ldt_tensor *ldt_uniform(ldt_ctx *ctx, const ldt_shape *shape, int dt, double lo, double hi);
ldt_status ldt_grad(ldt_tensor *loss, ldt_tensor *const *wrt, int n, ldt_tensor **grads);

typedef struct ldt_exec ldt_exec;
ldt_status ldt_compile(ldt_ctx *ctx, ldt_tensor *const *outputs, int nout, const void *opts,
                       ldt_exec **out);
ldt_status ldt_replay(ldt_exec *e);
ldt_status ldt_exec_read(ldt_exec *e, int i, void *dst, int64_t nbytes);
ldt_status ldt_exec_bind(ldt_exec *e, const char *name, const void *data, int64_t nbytes);

typedef struct {
    int64_t allocated_bytes; int64_t per_rank_allocated_max; int64_t tensors;
} ldt_materialize_stats;
ldt_status ldt_materialize(const ldt_tensor *const *params,
                           const ldt_placement *const *placements, int n, const ldt_mesh *mesh,
                           ldt_shards **out, ldt_materialize_stats *stats);

ldt_status ldt_ckpt_save(const char *dir, int n, const char *const *names,
                         ldt_shards *const *tensors);
ldt_status ldt_ckpt_load(const char *dir, const char *name, const ldt_spec *target,
                         ldt_shards **out);
ldt_status ldt_ckpt_merge(const char *dir, const char *out_path);

typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t *shape;
    int64_t *strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor; void *manager_ctx; void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version; void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self); uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
ldt_status ldt_to_dlpack(ldt_shards *s, int rank, uint64_t flags,
                         DLManagedTensorVersioned **out);
ldt_status ldt_to_dlpack_unversioned(ldt_shards *s, int rank, DLManagedTensor **out);
ldt_status ldt_from_dlpack(const ldt_spec *spec, DLManagedTensorVersioned *const *locals,
                           ldt_shards **out);
ldt_status ldt_dlpack_from_unversioned(DLManagedTensor *legacy,
                                       DLManagedTensorVersioned **out);
""")

# enum values (include/ldt/core.h, trace.h)
STATUS_NAMES = {0: "OK", -1: "INVALID_ARGUMENT", -2: "INVALID_USAGE", -3: "OUT_OF_MEMORY",
                -4: "OVERFLOW", -5: "UNSUPPORTED", -6: "SYSTEM", -7: "CORRUPT", -8: "TIMEOUT",
                -9: "REMOTE", -10: "CUDA", -11: "INTERNAL"}
DEVICE = {"cpu": 0, "cuda": 1, "meta": 2}
DEVICE_NAMES = {v: k for k, v in DEVICE.items()}


class LdtError(RuntimeError):
    """An error reported by the C library: `status` is its code's name ("INVALID_ARGUMENT",
    ...), `code` the ldt_status value, and the message is the library's (ldt_last_error)."""

    def __init__(self, code, message):
        self.code = code
        self.status = STATUS_NAMES.get(code, str(code))
        self.message = message
        super().__init__(f"{message} [{self.status.lower().replace('_', ' ')}]")


class _Lib:
    """The loaded library, found on first use (see find_library)."""

    _lock = threading.Lock()
    _lib = None

    def __getattr__(self, name):
        if _Lib._lib is None:
            with _Lib._lock:
                if _Lib._lib is None:
                    _Lib._lib = ffi.dlopen(find_library())
        return getattr(_Lib._lib, name)


lib = _Lib()

_LIBNAME = "liblazydt.dylib" if sys.platform == "darwin" else "liblazydt.so"


def _source_dir():
    """The lazydt checkout this package came from: recorded at pip install (a regular
    install), or the package's own location (an editable install, or python/ on sys.path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    up = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(up, "include", "ldt", "core.h")):
        return up
    try:
        from lazydt import _build_info  # written by setup.py at install time
        src = _build_info.SOURCE_DIR
        if os.path.isfile(os.path.join(src, "include", "ldt", "core.h")):
            return src
    except ImportError:
        pass
    return None


def find_library():
    """The path of liblazydt.so, in this order:
    1. the environment variable LDT_LIBRARY (a path to the built library);
    2. <checkout>/build/liblazydt.so, the build `make` and the README's cmake lines make;
    3. <checkout>/build-python/liblazydt.so, building it there first with CMake (a Release
       build of the library target only, CUDA and MPI off) when it is not there yet.
    Raises LdtError(UNSUPPORTED) saying what was tried when none works."""
    env = os.environ.get("LDT_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise LdtError(-5, f"LDT_LIBRARY={env} is not a file; expected the path of a built "
                               f"{_LIBNAME} (e.g. build/{_LIBNAME})")
        return env
    src = _source_dir()
    if src is None:
        raise LdtError(-5, "lazydt: cannot find the C library: LDT_LIBRARY is not set and this "
                           "package does not know its source checkout; set LDT_LIBRARY to the "
                           f"path of {_LIBNAME}")
    for sub in ("build", "build-python"):
        cand = os.path.join(src, sub, _LIBNAME)
        if os.path.isfile(cand):
            return cand
    out = os.path.join(src, "build-python")
    cmds = [["cmake", "-S", src, "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DLDT_CUDA=OFF",
             "-DLDT_MPI=OFF"],
            ["cmake", "--build", out, "--target", "lazydt", "-j", str(os.cpu_count() or 2)]]
    sys.stderr.write(f"lazydt: building {_LIBNAME} in {out} (first use; set LDT_LIBRARY to "
                     "skip)\n")
    for c in cmds:
        try:
            r = subprocess.run(c, capture_output=True, text=True)
        except OSError as e:
            raise LdtError(-5, f"lazydt: cannot build the C library: {' '.join(c)}: {e}; "
                               f"install cmake and a C compiler, or set LDT_LIBRARY") from None
        if r.returncode != 0:
            tail = (r.stdout + r.stderr)[-2000:]
            raise LdtError(-5, f"lazydt: building the C library failed ({' '.join(c)}, exit "
                               f"{r.returncode}); scripts/deps.sh lists the packages it needs, "
                               f"or set LDT_LIBRARY:\n{tail}")
    return os.path.join(out, _LIBNAME)


def last_error():
    return ffi.string(lib.ldt_last_error()).decode("utf-8", "replace")


def check(st):
    """Raises LdtError with the library's message when st is not LDT_OK."""
    if st != 0:
        raise LdtError(st, last_error())


def text(fn, *args):
    """The string a snprintf-style formatter writes (ldt_mesh_format, ...)."""
    buf = ffi.new("char[]", 512)
    n = fn(*args, buf, 512)
    if n >= 512:
        buf = ffi.new("char[]", n + 1)
        fn(*args, buf, n + 1)
    return ffi.string(buf).decode()
