"""lazydt for Python: a thin layer over the C library's public API (include/ldt/*.h).

Names follow torch.distributed.tensor where the concept is the same: DeviceMesh, Shard,
Replicate, Partial, InterleavedShard, distribute_tensor, DTensor.redistribute / to_local /
full_tensor / from_local. Tracing (Context, Tensor), compile and replay, meta init and
materialize, sharded checkpoints, and DLPack exchange of local shards. docs/python.md.
"""
from dataclasses import dataclass

import numpy as np

from . import _dlpack
from ._ffi import LdtError, check, ffi, find_library, last_error, lib, text
from ._ffi import DEVICE as _DEVICE, DEVICE_NAMES as _DEVICE_NAMES

__all__ = [
    "LdtError", "DeviceMesh", "init_device_mesh", "Placement", "Shard", "Replicate", "Partial",
    "InterleavedShard", "DTensor", "LocalTensor", "distribute_tensor", "from_local",
    "from_dlpack", "Context", "Tensor", "Step", "compile", "init", "materialize", "save",
    "load", "load_state_dict", "merge", "find_library",
]

# ---- dtypes ---------------------------------------------------------------------------
_DTYPES = ["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"]  # ldt_dtype order
_NUMPY = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.int32, 5: np.int64, 6: np.uint8,
          7: np.bool_}
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items()}
_DL = {(2, 32): 0, (2, 64): 1, (2, 16): 2, (4, 16): 3, (0, 32): 4, (0, 64): 5, (1, 8): 6,
       (6, 8): 7}  # DLPack (code, bits) -> ldt dtype


def _dtype(dt):
    """ldt dtype enum from "f32", a numpy dtype or type, or the enum itself."""
    if isinstance(dt, int) and not isinstance(dt, bool) and 0 <= dt < len(_DTYPES):
        return dt
    if isinstance(dt, str) and dt in _DTYPES:
        return _DTYPES.index(dt)
    try:
        nd = np.dtype(dt)
    except TypeError:
        nd = None
    if nd is not None and nd in _FROM_NUMPY:
        return _FROM_NUMPY[nd]
    raise LdtError(-1, f"dtype {dt!r} is not supported; expected one of {', '.join(_DTYPES)} "
                       "or numpy float32/float64/float16/int32/int64/uint8/bool")


def _np_dtype(dt):
    if dt not in _NUMPY:
        raise LdtError(-5, f"dtype {_DTYPES[dt]} has no numpy counterpart (bf16: use "
                           "DLPack with a framework that has it, or cast to f32)")
    return np.dtype(_NUMPY[dt])


def _shape(shape):
    shape = tuple(int(d) for d in shape)
    if len(shape) > 8:
        raise LdtError(-1, f"shape {list(shape)} has {len(shape)} dims; at most 8")
    s = ffi.new("ldt_shape *")
    s.ndim = len(shape)
    for i, d in enumerate(shape):
        s.dims[i] = d
    return s


def _tuple(s):
    return tuple(int(s.dims[i]) for i in range(s.ndim))


# ---- meshes ---------------------------------------------------------------------------
class DeviceMesh:
    """An N-D array of ranks, optionally with named dims, on "cpu" (rank threads), "cuda" or
    "meta" (plans only, no data): DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=("dp",
    "tp")), or DeviceMesh.parse("dp=2,tp=2")."""

    def __init__(self, device_type, mesh, *, mesh_dim_names=None):
        arr = np.asarray(mesh, dtype=np.int64)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        dims = ffi.new("int64_t[]", list(arr.shape))
        ranks = ffi.new("int[]", [int(r) for r in arr.ravel()])
        names = ffi.NULL
        keep = []
        if mesh_dim_names is not None:
            keep = [ffi.new("char[]", str(n).encode()) for n in mesh_dim_names]
            if len(keep) != arr.ndim:
                raise LdtError(-1, f"mesh_dim_names {tuple(mesh_dim_names)} has {len(keep)} "
                                   f"names; expected one per mesh dim ({arr.ndim})")
            names = ffi.new("char *[]", keep)
        out = ffi.new("ldt_mesh **")
        check(lib.ldt_mesh_create(arr.ndim, dims, ranks, names, _device(device_type), out))
        self._ptr = ffi.gc(out[0], lib.ldt_mesh_destroy)

    @classmethod
    def parse(cls, text_, device_type="cpu"):
        """A mesh from its text: "4", "2x2", "dp=2,tp=2", "[[0,2],[1,3]]"."""
        out = ffi.new("ldt_mesh **")
        check(lib.ldt_mesh_parse(str(text_).encode(), _device(device_type), out))
        return cls._wrap(out[0])

    @classmethod
    def _wrap(cls, ptr):
        m = cls.__new__(cls)
        m._ptr = ffi.gc(ptr, lib.ldt_mesh_destroy)
        return m

    @property
    def ndim(self):
        return lib.ldt_mesh_ndim(self._ptr)

    @property
    def shape(self):
        return tuple(int(lib.ldt_mesh_dim_size(self._ptr, d)) for d in range(self.ndim))

    def size(self, mesh_dim=None):
        """Ranks in the mesh, or along one dim (an index or a name)."""
        if mesh_dim is None:
            return lib.ldt_mesh_nranks(self._ptr)
        return self.shape[self._dim(mesh_dim)]

    @property
    def device_type(self):
        return _DEVICE_NAMES[lib.ldt_mesh_device(self._ptr)]

    @property
    def mesh_dim_names(self):
        if self.ndim == 0 or lib.ldt_mesh_dim_name(self._ptr, 0) == ffi.NULL:
            return None
        return tuple(ffi.string(lib.ldt_mesh_dim_name(self._ptr, d)).decode()
                     for d in range(self.ndim))

    @property
    def mesh(self):
        """The ranks as a numpy array of the mesh's shape."""
        n = self.size()
        return np.array([lib.ldt_mesh_rank_at(self._ptr, i) for i in range(n)],
                        dtype=np.int64).reshape(self.shape)

    def ranks(self):
        """The ranks in row-major mesh order (the order of from_local's local tensors)."""
        return [int(r) for r in self.mesh.ravel()]

    def get_coordinate(self, rank):
        c = ffi.new("int64_t[8]")
        check(lib.ldt_mesh_coord(self._ptr, rank, c))
        return tuple(int(c[i]) for i in range(self.ndim))

    def _dim(self, d):
        if isinstance(d, str):
            out = ffi.new("int *")
            check(lib.ldt_mesh_dim_index(self._ptr, d.encode(), out))
            return out[0]
        return int(d)

    def submesh(self, mesh_dims, rank=None):
        """The sub-mesh over mesh_dims (names or indices) that contains `rank` (default: the
        mesh's first rank) — what torch's mesh["tp"] gives the calling rank."""
        dims = [mesh_dims] if isinstance(mesh_dims, (str, int)) else list(mesh_dims)
        cd = ffi.new("int[]", [self._dim(d) for d in dims])
        out = ffi.new("ldt_mesh **")
        r = self.ranks()[0] if rank is None else rank
        check(lib.ldt_mesh_submesh(self._ptr, r, len(dims), cd, out))
        return DeviceMesh._wrap(out[0])

    def __getitem__(self, mesh_dims):
        return self.submesh(mesh_dims)

    def split(self, mesh_dims):
        """Every sub-mesh over mesh_dims, one per coordinate of the other dims."""
        dims = [mesh_dims] if isinstance(mesh_dims, (str, int)) else list(mesh_dims)
        cd = ffi.new("int[]", [self._dim(d) for d in dims])
        out = ffi.new("ldt_mesh ***")
        count = ffi.new("int *")
        check(lib.ldt_mesh_split(self._ptr, len(dims), cd, out, count))
        try:
            copies = []
            for i in range(count[0]):
                c = ffi.new("ldt_mesh **")
                check(lib.ldt_mesh_parse(text(lib.ldt_mesh_format, out[0][i]).encode(),
                                         lib.ldt_mesh_device(out[0][i]), c))
                copies.append(DeviceMesh._wrap(c[0]))
            return copies
        finally:
            lib.ldt_mesh_list_destroy(out[0], count[0])

    def __eq__(self, other):
        return isinstance(other, DeviceMesh) and bool(lib.ldt_mesh_equal(self._ptr, other._ptr))

    def __hash__(self):
        return hash((str(self), self.device_type))

    def __str__(self):
        return text(lib.ldt_mesh_format, self._ptr)

    def __repr__(self):
        return f"DeviceMesh({self.device_type!r}, {str(self)!r})"


def _device(d):
    if d not in _DEVICE:
        raise LdtError(-1, f"device_type {d!r} is not known; expected 'cpu', 'cuda' or 'meta'")
    return _DEVICE[d]


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """A mesh of ranks 0..n-1 in row-major order, as torch's init_device_mesh."""
    n = int(np.prod(mesh_shape))
    return DeviceMesh(device_type, np.arange(n).reshape(tuple(mesh_shape)),
                      mesh_dim_names=mesh_dim_names)


# ---- placements -----------------------------------------------------------------------
class Placement:
    """One mesh dim's placement of a tensor."""

    def is_shard(self, dim=None):
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self):
        return isinstance(self, Replicate)

    def is_partial(self):
        return isinstance(self, Partial)


@dataclass(frozen=True)
class Shard(Placement):
    dim: int

    def __str__(self):
        return f"S{self.dim}"


@dataclass(frozen=True)
class Replicate(Placement):
    def __str__(self):
        return "R"


_OPS = ["sum", "avg", "max", "min"]


@dataclass(frozen=True)
class Partial(Placement):
    reduce_op: str = "sum"

    def __str__(self):
        return "P" if self.reduce_op == "sum" else f"P{self.reduce_op}"


@dataclass(frozen=True)
class InterleavedShard(Placement):
    """veScale's InterleavedShard: dim seen as interleaved_size blocks, each sharded."""
    dim: int
    interleaved_size: int

    def __str__(self):
        return f"IS{self.dim}:{self.interleaved_size}"


def _placements_c(placements, ndim=-1):
    """ldt_placement[] from Placement objects or their text ("S0,R")."""
    if isinstance(placements, str):
        out = ffi.new("ldt_placement[8]")
        n = ffi.new("int *")
        check(lib.ldt_placements_parse(placements.encode(), ndim, out, 8, n))
        return out, n[0]
    placements = list(placements)
    out = ffi.new("ldt_placement[]", max(len(placements), 1))
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            out[i].kind, out[i].dim = 1, p.dim
        elif isinstance(p, Replicate):
            out[i].kind = 0
        elif isinstance(p, Partial):
            if p.reduce_op not in _OPS:
                raise LdtError(-1, f"Partial reduce_op {p.reduce_op!r}; expected one of "
                                   f"{', '.join(_OPS)}")
            out[i].kind, out[i].op = 2, _OPS.index(p.reduce_op)
        elif isinstance(p, InterleavedShard):
            out[i].kind, out[i].dim, out[i].blocks = 3, p.dim, p.interleaved_size
        else:
            raise LdtError(-1, f"placement {p!r} is not a Shard, Replicate, Partial or "
                               "InterleavedShard")
        if ndim >= 0 and out[i].kind in (1, 3) and out[i].dim < 0:
            out[i].dim += ndim
    return out, len(placements)


def _placement_py(p):
    if p.kind == 1:
        return Shard(p.dim)
    if p.kind == 2:
        return Partial(_OPS[p.op])
    if p.kind == 3:
        return InterleavedShard(p.dim, p.blocks)
    return Replicate()


def _spec(mesh, shape, placements, dtype):
    spec = ffi.new("ldt_spec *")
    pl, n = _placements_c(placements, len(tuple(shape)))
    check(lib.ldt_spec_init(spec, mesh._ptr, _shape(shape), pl, n, _dtype(dtype)))
    return spec


# ---- DTensors -------------------------------------------------------------------------
class DTensor:
    """A tensor sharded over a mesh: every rank's local shard, held in this process (the
    ranks are threads). Made by distribute_tensor, from_local, redistribute, materialize and
    load."""

    def __init__(self, shards, mesh):
        # the shards borrow the mesh's ldt_mesh: the destructor keeps the mesh alive
        self._shards = ffi.gc(shards, lambda p, m=mesh: lib.ldt_shards_destroy(p))
        self._mesh = mesh
        self._spec = lib.ldt_shards_spec(self._shards)

    @property
    def device_mesh(self):
        return self._mesh

    @property
    def placements(self):
        return tuple(_placement_py(self._spec.placements[i]) for i in range(self._spec.nplace))

    @property
    def shape(self):
        return _tuple(self._spec.shape)

    @property
    def ndim(self):
        return self._spec.shape.ndim

    @property
    def dtype(self):
        """The numpy dtype (bf16 tensors: the string "bf16")."""
        return _np_dtype(self._spec.dtype) if self._spec.dtype in _NUMPY else "bf16"

    def __repr__(self):
        return f"DTensor({text(lib.ldt_spec_format, self._spec)})"

    def full_tensor(self):
        """The global tensor as a numpy array (Partial dims reduced, Replicate read once)."""
        out = np.empty(self.shape, dtype=_np_dtype(self._spec.dtype))
        check(lib.ldt_full_tensor(self._shards, ffi.from_buffer(out)))
        return out

    def local_shape(self, rank):
        r = ffi.new("ldt_region *")
        check(lib.ldt_layout(self._spec, rank, r))
        return _tuple(r.local_shape)

    def to_local(self, rank=None):
        """Rank's local shard, zero-copy: a LocalTensor (a DLPack producer; np.asarray or
        np.from_dlpack of it shares the shard's memory). rank defaults to the only rank of a
        1-rank mesh; this process holds every rank, so larger meshes need it said."""
        if rank is None:
            ranks = self._mesh.ranks()
            if len(ranks) != 1:
                raise LdtError(-1, f"to_local: the mesh {self._mesh} has {len(ranks)} ranks, "
                                   "all held by this process; expected to_local(rank) with a "
                                   f"rank of {ranks}")
            rank = ranks[0]
        return LocalTensor(self, int(rank))

    def local_tensors(self):
        """Every rank's LocalTensor, in row-major mesh order."""
        return [LocalTensor(self, r) for r in self._mesh.ranks()]

    def redistribute(self, device_mesh=None, placements=None):
        """The same tensor under other placements (and optionally another mesh), moved by the
        planner's cheapest list of collectives, run on rank threads."""
        mesh = device_mesh or self._mesh
        pl, n = _placements_c(placements if placements is not None else self.placements,
                              self.ndim)
        plan = ffi.new("ldt_redist_plan **")
        check(lib.ldt_redist_plan_create(self._spec, mesh._ptr, pl, n, ffi.NULL, plan))
        try:
            out = ffi.new("ldt_shards **")
            check(lib.ldt_redistribute_shards(self._shards, plan[0], out))
        finally:
            lib.ldt_redist_plan_destroy(plan[0])
        return DTensor(out[0], mesh)

    from_local = staticmethod(lambda *a, **k: from_local(*a, **k))


class LocalTensor:
    """One rank's local shard of a DTensor, exchanged without a copy through DLPack
    (__dlpack__ / __dlpack_device__): numpy, torch and others see the shard's memory, and it
    stays valid while they hold it, even after the DTensor is gone."""

    def __init__(self, dtensor, rank):
        self._dt = dtensor
        self.rank = rank
        self.shape = dtensor.local_shape(rank)
        self.dtype = dtensor.dtype

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None:
            raise BufferError("lazydt local shards are host memory: stream must be None")
        if dl_device is not None and tuple(dl_device) != (_dlpack.KDLCPU, 0):
            raise BufferError(f"dl_device {tuple(dl_device)}: lazydt local shards are host "
                              "memory (kDLCPU, 0); copy them to the device yourself")
        if copy:
            return np.array(self.numpy(), copy=True).__dlpack__(max_version=max_version)
        return _dlpack.export(self._dt._shards, self.rank, max_version)

    def __dlpack_device__(self):
        return (_dlpack.KDLCPU, 0)

    def data_ptr(self):
        """The shard's address (the same memory every DLPack consumer sees)."""
        return int(ffi.cast("uintptr_t", lib.ldt_shards_local(self._dt._shards, self.rank,
                                                               ffi.NULL)))

    def numpy(self):
        """A numpy array over the shard's memory (no copy)."""
        return np.from_dlpack(self)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if copy:
            a = a.copy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self):
        return f"LocalTensor(rank={self.rank}, shape={self.shape}, dtype={self.dtype})"


def distribute_tensor(tensor, device_mesh, placements):
    """Each rank's shard of a full tensor (numpy or array-like; copied into the shards)."""
    a = np.ascontiguousarray(tensor)
    dt = _dtype(a.dtype)
    spec = _spec(device_mesh, a.shape, placements, dt)
    out = ffi.new("ldt_shards **")
    check(lib.ldt_distribute(ffi.from_buffer(a), spec, out))
    return DTensor(out[0], device_mesh)


def _global_shape(local, mesh, placements):
    shape = list(local)
    for d, p in enumerate(placements):
        if isinstance(p, (Shard, InterleavedShard)):
            shape[p.dim] *= mesh.shape[d]
    return tuple(shape)


def from_local(local_tensors, device_mesh, placements, *, shape=None):
    """A DTensor whose shards ARE the given local tensors (zero-copy through DLPack): one per
    mesh rank in row-major mesh order (a single tensor on a 1-rank mesh), each a writable,
    contiguous host DLPack producer (numpy arrays; other array-likes are copied first) of
    the same dtype with that rank's local shape. shape (the global shape) defaults to the
    first rank's local shape times the mesh dims that shard each dim (even sharding)."""
    if not isinstance(local_tensors, (list, tuple)):
        local_tensors = [local_tensors]
    n = device_mesh.size()
    if len(local_tensors) != n:
        raise LdtError(-1, f"from_local: {len(local_tensors)} local tensors for mesh "
                           f"{device_mesh} of {n} ranks; expected one per rank")
    objs = [t if hasattr(t, "__dlpack__") else np.ascontiguousarray(t) for t in local_tensors]
    taken = []
    try:
        for o in objs:
            taken.append(_dlpack.take(o)[0])
        code, bits, lanes = _dlpack.dtype_code(taken[0])
        if (code, bits) not in _DL:
            raise LdtError(-1, f"from_local: DLPack dtype (code {code}, {bits} bits) is not "
                               f"supported; expected one of {', '.join(_DTYPES)}")
        dt = _DL[(code, bits)]
        if isinstance(placements, str):
            pl, k = _placements_c(placements, taken[0].dl_tensor.ndim)
            placements = [_placement_py(pl[i]) for i in range(k)]
        if shape is None:
            t0 = taken[0].dl_tensor
            shape = _global_shape([t0.shape[i] for i in range(t0.ndim)], device_mesh,
                                  placements)
        spec = _spec(device_mesh, shape, placements, dt)
        arr = ffi.new("DLManagedTensorVersioned *[]", taken)
        out = ffi.new("ldt_shards **")
        check(lib.ldt_from_dlpack(spec, arr, out))
        taken = []  # the shards own them now
        return DTensor(out[0], device_mesh)
    finally:
        for t in taken:
            _dlpack.delete(t)


def from_dlpack(tensor, device_mesh=None):
    """A DTensor over one DLPack producer's memory (zero-copy), replicated on a 1-rank mesh
    (device_mesh, default a 1-rank cpu mesh)."""
    mesh = device_mesh or DeviceMesh("cpu", [0])
    if mesh.size() != 1:
        raise LdtError(-1, f"from_dlpack: mesh {mesh} has {mesh.size()} ranks; expected one "
                           "(use from_local with one tensor per rank)")
    return from_local([tensor], mesh, [Replicate()] * mesh.ndim)


# ---- tracing, compile and replay ------------------------------------------------------
class Context:
    """A lazydt context: a mesh, a random stream (seed), and the current trace. Ops on its
    Tensors are recorded, run when a value is read (Tensor.numpy) or compiled into a Step."""

    def __init__(self, device_mesh=None, seed=0):
        self._mesh = device_mesh
        opts = ffi.new("ldt_ctx_options *")
        opts.mesh = device_mesh._ptr if device_mesh is not None else ffi.NULL
        opts.seed = seed
        out = ffi.new("ldt_ctx **")
        check(lib.ldt_ctx_create(opts, out))
        # the context borrows the mesh: its destructor keeps the mesh alive until it has run
        self._ptr = ffi.gc(out[0], lambda p, m=device_mesh: lib.ldt_ctx_destroy(p))
        self._keep = []  # host data the C side borrows (init copies)

    @property
    def device_mesh(self):
        return self._mesh

    @property
    def is_meta(self):
        return bool(lib.ldt_ctx_is_meta(self._ptr))

    def _t(self, ptr):
        if ptr == ffi.NULL:
            code = lib.ldt_ctx_status(self._ptr) or -1
            msg = ffi.string(lib.ldt_ctx_errmsg(self._ptr)).decode() or last_error()
            lib.ldt_ctx_clear_error(self._ptr)
            raise LdtError(code, msg)
        return Tensor(self, ptr)

    def input(self, name, shape, dtype="f32"):
        """An input: data bound before each run (Tensor.bind, or Step.replay(name=array))."""
        return self._t(lib.ldt_input(self._ptr, name.encode(), _shape(shape), _dtype(dtype)))

    def param(self, name, shape, dtype="f32", *, init=None, value=None):
        """A parameter (persistent, zero-filled); init gives its recipe (lazydt.init.*),
        value its data now."""
        t = self._t(lib.ldt_param(self._ptr, name.encode(), _shape(shape), _dtype(dtype)))
        if init is not None:
            t.init(init)
        if value is not None:
            t.set(value)
        return t

    def constant(self, array):
        a = np.ascontiguousarray(array)
        return self._t(lib.ldt_constant(self._ptr, _shape(a.shape), _dtype(a.dtype),
                                        ffi.from_buffer(a)))

    def normal(self, shape, mean=0.0, std=1.0, dtype="f32"):
        return self._t(lib.ldt_normal(self._ptr, _shape(shape), _dtype(dtype), mean, std))

    def uniform(self, shape, low=0.0, high=1.0, dtype="f32"):
        return self._t(lib.ldt_uniform(self._ptr, _shape(shape), _dtype(dtype), low, high))

    def sync(self):
        """Runs the pending trace eagerly and ends it."""
        check(lib.ldt_sync(self._ptr))

    def discard(self):
        lib.ldt_trace_discard(self._ptr)

    def compile(self, outputs):
        """Compiles the current trace, reading `outputs` after each replay: a Step."""
        return Step(self, outputs)


def _dims(dim):
    if dim is None:
        return ffi.NULL, 0
    dims = [dim] if isinstance(dim, int) else list(dim)
    return ffi.new("int[]", dims), len(dims)


class Tensor:
    """A lazily traced tensor of a Context (global shape; the planner shards it)."""

    def __init__(self, ctx, ptr):
        self.ctx = ctx
        self._ptr = ptr

    @property
    def shape(self):
        s = ffi.new("ldt_shape *")
        check(lib.ldt_tensor_shape(self._ptr, s))
        return _tuple(s)

    @property
    def dtype(self):
        return _DTYPES[lib.ldt_tensor_dtype(self._ptr)]

    @property
    def name(self):
        n = lib.ldt_tensor_name(self._ptr)
        return None if n == ffi.NULL else ffi.string(n).decode()

    def _nbytes(self):
        return int(np.prod(self.shape, dtype=np.int64)) * lib.ldt_dtype_size(
            _dtype(self.dtype))

    # data in and out
    def bind(self, array):
        """An input's data for the next run (copied)."""
        a = np.ascontiguousarray(array, dtype=_np_dtype(_dtype(self.dtype)))
        check(lib.ldt_input_bind(self._ptr, ffi.from_buffer(a), a.nbytes))
        return self

    def set(self, array):
        """A parameter's value (copied)."""
        a = np.ascontiguousarray(array, dtype=_np_dtype(_dtype(self.dtype)))
        check(lib.ldt_param_set(self._ptr, ffi.from_buffer(a), a.nbytes))
        return self

    def init(self, recipe):
        """Gives a parameter its init recipe (lazydt.init.*), run at materialize."""
        c = ffi.new("ldt_init *")
        c.kind, c.a, c.b, c.lo, c.hi, c.fan_out = (recipe.kind, recipe.a, recipe.b, recipe.lo,
                                                   recipe.hi, int(recipe.fan_out))
        if recipe.data is not None:
            data = np.ascontiguousarray(recipe.data, dtype=_np_dtype(_dtype(self.dtype)))
            self.ctx._keep.append(data)  # borrowed until materialized
            c.data = ffi.from_buffer(data)
        check(lib.ldt_param_init(self._ptr, c))
        return self

    def numpy(self):
        """The value (runs the pending trace eagerly first)."""
        out = np.empty(self.shape, dtype=_np_dtype(_dtype(self.dtype)))
        check(lib.ldt_read(self._ptr, ffi.from_buffer(out), out.nbytes))
        return out

    # sharding annotations
    def pin(self, placements):
        """Fixes this tensor's placements (one per mesh dim)."""
        pl, n = _placements_c(placements, len(self.shape))
        check(lib.ldt_pin(self._ptr, pl, n))
        return self

    def redistribute(self, placements):
        pl, n = _placements_c(placements, len(self.shape))
        return self.ctx._t(lib.ldt_redistribute_to(self._ptr, pl, n))

    def keep(self):
        return self.ctx._t(lib.ldt_keep(self._ptr))

    def assign(self, value):
        """When the trace runs, this parameter takes value's value (a step's update)."""
        check(lib.ldt_assign(self._ptr, value._ptr))

    # ops
    def _bin(self, other, fn, scalar_fn, rev=False):
        if isinstance(other, Tensor):
            return self.ctx._t(fn(other._ptr, self._ptr) if rev else fn(self._ptr, other._ptr))
        if isinstance(other, (int, float)):
            return self.ctx._t(scalar_fn(self._ptr, float(other)))
        return NotImplemented

    def __add__(self, o): return self._bin(o, lib.ldt_add, lib.ldt_add_scalar)
    def __radd__(self, o): return self._bin(o, lib.ldt_add, lib.ldt_add_scalar, True)
    def __sub__(self, o): return self._bin(o, lib.ldt_sub, lib.ldt_sub_scalar)
    def __rsub__(self, o): return self._bin(o, lib.ldt_sub, lib.ldt_rsub_scalar, True)
    def __mul__(self, o): return self._bin(o, lib.ldt_mul, lib.ldt_mul_scalar)
    def __rmul__(self, o): return self._bin(o, lib.ldt_mul, lib.ldt_mul_scalar, True)
    def __truediv__(self, o): return self._bin(o, lib.ldt_div, lib.ldt_div_scalar)
    def __rtruediv__(self, o): return self._bin(o, lib.ldt_div, lib.ldt_rdiv_scalar, True)
    def __pow__(self, s): return self.ctx._t(lib.ldt_pow_scalar(self._ptr, float(s)))
    def __neg__(self): return self.ctx._t(lib.ldt_neg(self._ptr))

    def __matmul__(self, o):
        return self.ctx._t(lib.ldt_matmul(self._ptr, o._ptr))

    def relu(self): return self.ctx._t(lib.ldt_relu(self._ptr))
    def exp(self): return self.ctx._t(lib.ldt_exp(self._ptr))
    def log(self): return self.ctx._t(lib.ldt_log(self._ptr))
    def sqrt(self): return self.ctx._t(lib.ldt_sqrt(self._ptr))
    def tanh(self): return self.ctx._t(lib.ldt_tanh(self._ptr))
    def silu(self): return self.ctx._t(lib.ldt_silu(self._ptr))

    def gelu(self, approximate="none"):
        return self.ctx._t(lib.ldt_gelu(self._ptr, 1 if approximate == "tanh" else 0))

    def to(self, dtype):
        return self.ctx._t(lib.ldt_cast(self._ptr, _dtype(dtype)))

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return self.ctx._t(lib.ldt_reshape(self._ptr, _shape(shape)))

    def transpose(self, d0, d1):
        return self.ctx._t(lib.ldt_transpose(self._ptr, d0, d1))

    def sum(self, dim=None, keepdim=False):
        d, n = _dims(dim)
        return self.ctx._t(lib.ldt_sum(self._ptr, d, n, int(keepdim)))

    def mean(self, dim=None, keepdim=False):
        d, n = _dims(dim)
        return self.ctx._t(lib.ldt_mean(self._ptr, d, n, int(keepdim)))

    def amax(self, dim=None, keepdim=False):
        d, n = _dims(dim)
        return self.ctx._t(lib.ldt_amax(self._ptr, d, n, int(keepdim)))

    def softmax(self, dim):
        return self.ctx._t(lib.ldt_softmax(self._ptr, dim))

    def __repr__(self):
        return f"Tensor({self.name or 'op'}, shape={self.shape}, dtype={self.dtype})"


def linear(x, w, b=None):
    """x w^T + b."""
    return x.ctx._t(lib.ldt_linear(x._ptr, w._ptr, b._ptr if b is not None else ffi.NULL))


def layer_norm(x, ndims=1, weight=None, bias=None, eps=1e-5):
    return x.ctx._t(lib.ldt_layer_norm(x._ptr, ndims, weight._ptr if weight else ffi.NULL,
                                       bias._ptr if bias else ffi.NULL, eps))


def cross_entropy(logits, targets, ignore_index=-100):
    return logits.ctx._t(lib.ldt_cross_entropy(logits._ptr, targets._ptr, ignore_index))


def grad(loss, wrt):
    """Records the backward pass: the gradients of loss with respect to each of wrt."""
    wrt = list(wrt)
    w = ffi.new("ldt_tensor *[]", [t._ptr for t in wrt])
    g = ffi.new("ldt_tensor *[]", len(wrt))
    check(lib.ldt_grad(loss._ptr, w, len(wrt), g))
    return [Tensor(loss.ctx, g[i]) for i in range(len(wrt))]


class Step:
    """A compiled step: the trace planned, lowered and bound once; replay runs it on every
    rank thread with no tracing, planning or dispatch."""

    def __init__(self, ctx, outputs):
        self.single = isinstance(outputs, Tensor)
        outs = [outputs] if self.single else list(outputs)
        self.ctx = ctx
        self._shapes = [(o.shape, _np_dtype(_dtype(o.dtype))) for o in outs]
        arr = ffi.new("ldt_tensor *[]", [o._ptr for o in outs])
        e = ffi.new("ldt_exec **")
        check(lib.ldt_compile(ctx._ptr, arr, len(outs), ffi.NULL, e))
        self._exec = e[0]  # lives with its context (the plan cache)
        self._bound = {}

    def bind(self, name, array):
        """Zero-copy input: later replays read `name` from array (kept alive here)."""
        a = np.ascontiguousarray(array)
        check(lib.ldt_exec_bind(self._exec, name.encode(), ffi.from_buffer(a), a.nbytes))
        self._bound[name] = a

    def replay(self, **inputs):
        """Binds the named inputs (zero-copy), runs one step and returns the outputs (numpy;
        one array when compiled from one tensor)."""
        for k, v in inputs.items():
            self.bind(k, v)
        check(lib.ldt_replay(self._exec))
        outs = []
        for i, (shape, dt) in enumerate(self._shapes):
            o = np.empty(shape, dtype=dt)
            check(lib.ldt_exec_read(self._exec, i, ffi.from_buffer(o), o.nbytes))
            outs.append(o)
        return outs[0] if self.single else tuple(outs)

    __call__ = replay


def compile(fn, ctx, *args, **kwargs):
    """Traces fn(*args, **kwargs) (Tensors of ctx in, a Tensor or a tuple of them out) and
    compiles it into a Step."""
    return Step(ctx, fn(*args, **kwargs))


# ---- meta init and materialize --------------------------------------------------------
@dataclass(frozen=True)
class Init:
    """An init recipe (include/ldt/trace.h ldt_init): kind and parameters."""
    kind: int
    a: float = 0.0
    b: float = 0.0
    lo: float = 0.0
    hi: float = 0.0
    fan_out: bool = False
    data: object = None


class init:
    """Init recipes, as torch.nn.init: given to Context.param(init=...)."""
    zeros = staticmethod(lambda: Init(0))
    ones = staticmethod(lambda: Init(1))
    full = staticmethod(lambda value: Init(2, a=value))
    arange = staticmethod(lambda start=0.0, step=1.0: Init(3, a=start, b=step))
    uniform = staticmethod(lambda a=0.0, b=1.0: Init(4, a=a, b=b))
    normal = staticmethod(lambda mean=0.0, std=1.0: Init(5, a=mean, b=std))
    trunc_normal = staticmethod(lambda mean=0.0, std=1.0, a=-2.0, b=2.0:
                                Init(6, a=mean, b=std, lo=a, hi=b))
    kaiming_uniform = staticmethod(lambda a=0.0, mode="fan_in":
                                   Init(7, a=a, fan_out=mode == "fan_out"))
    kaiming_normal = staticmethod(lambda a=0.0, mode="fan_in":
                                  Init(8, a=a, fan_out=mode == "fan_out"))
    xavier_uniform = staticmethod(lambda gain=1.0: Init(9, a=gain))
    xavier_normal = staticmethod(lambda gain=1.0: Init(10, a=gain))
    copy = staticmethod(lambda data: Init(11, data=data))


def materialize(params, placements, device_mesh):
    """Each parameter's shards on a real mesh from its init recipe (params of a meta or any
    context): every rank computes only its shard, and any placement gives the single-device
    values. placements: one list per parameter, or one list for all. Returns DTensors."""
    params = list(params)
    if placements and isinstance(placements[0], Placement) or isinstance(placements, str):
        placements = [placements] * len(params)
    if len(placements) != len(params):
        raise LdtError(-1, f"materialize: {len(placements)} placement lists for {len(params)} "
                           "parameters; expected one each (or one for all)")
    cps = [_placements_c(p, len(t.shape))[0] for p, t in zip(placements, params)]
    pp = ffi.new("ldt_tensor *[]", [t._ptr for t in params])
    pl = ffi.new("ldt_placement *[]", cps)
    out = ffi.new("ldt_shards *[]", len(params))
    check(lib.ldt_materialize(pp, pl, len(params), device_mesh._ptr, out, ffi.NULL))
    return [DTensor(out[i], device_mesh) for i in range(len(params))]


# ---- checkpoints ----------------------------------------------------------------------
def save(directory, state_dict):
    """Saves {name: DTensor} as a sharded checkpoint in directory (docs/checkpoint.md)."""
    names = [ffi.new("char[]", str(k).encode()) for k in state_dict]
    arr = ffi.new("char *[]", names)
    shards = ffi.new("ldt_shards *[]", [v._shards for v in state_dict.values()])
    check(lib.ldt_ckpt_save(str(directory).encode(), len(names), arr, shards))


def load(directory, name, device_mesh, placements, shape, dtype):
    """Tensor `name` of a checkpoint as a DTensor on any mesh and placements (resharded)."""
    spec = _spec(device_mesh, shape, placements, dtype)
    out = ffi.new("ldt_shards **")
    check(lib.ldt_ckpt_load(str(directory).encode(), name.encode(), spec, out))
    return DTensor(out[0], device_mesh)


def load_state_dict(directory, like):
    """{name: DTensor} loaded with the meshes, placements, shapes and dtypes of `like`."""
    return {k: load(directory, k, v.device_mesh, v.placements, v.shape, _dtype_of(v))
            for k, v in like.items()}


def _dtype_of(dt):
    return dt._spec.dtype


def merge(directory, out_path):
    """One single-device safetensors file of every full tensor of a sharded checkpoint."""
    check(lib.ldt_ckpt_merge(str(directory).encode(), str(out_path).encode()))
