"""DLPack capsules (the Python protocol: __dlpack__ / __dlpack_device__ / from_dlpack) over
the C functions of include/ldt/dlpack.h, through Python's capsule API (ctypes.pythonapi)."""
import ctypes

from ._ffi import LdtError, check, ffi, lib

VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
LEGACY = b"dltensor"
USED_LEGACY = b"used_dltensor"
READ_ONLY = 1
KDLCPU = 1

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


# The capsule destructors: a capsule nobody consumed still owns its tensor and deletes it.
# They take the capsule as a plain pointer (it is being freed: no new reference to it).
@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _delete_versioned(cap):
    if _api.PyCapsule_IsValid(cap, VERSIONED):
        p = ffi.cast("DLManagedTensorVersioned *", _api.PyCapsule_GetPointer(cap, VERSIONED))
        if p.deleter != ffi.NULL:
            p.deleter(p)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _delete_legacy(cap):
    if _api.PyCapsule_IsValid(cap, LEGACY):
        p = ffi.cast("DLManagedTensor *", _api.PyCapsule_GetPointer(cap, LEGACY))
        if p.deleter != ffi.NULL:
            p.deleter(p)


_DESTRUCTORS = {VERSIONED: ctypes.cast(_delete_versioned, ctypes.c_void_p).value,
                LEGACY: ctypes.cast(_delete_legacy, ctypes.c_void_p).value}


def export(shards, rank, max_version=None, read_only=False):
    """A capsule holding rank's shard of `shards` (cffi ldt_shards *): the versioned one when
    the consumer takes DLPack >= 1.0, the legacy one otherwise."""
    if max_version is not None and tuple(max_version)[0] >= 1:
        out = ffi.new("DLManagedTensorVersioned **")
        check(lib.ldt_to_dlpack(shards, rank, READ_ONLY if read_only else 0, out))
        return _api.PyCapsule_New(int(ffi.cast("uintptr_t", out[0])), VERSIONED,
                                  _DESTRUCTORS[VERSIONED])
    out = ffi.new("DLManagedTensor **")
    check(lib.ldt_to_dlpack_unversioned(shards, rank, out))
    return _api.PyCapsule_New(int(ffi.cast("uintptr_t", out[0])), LEGACY, _DESTRUCTORS[LEGACY])


def take(obj):
    """Asks obj (any DLPack producer) for a capsule and takes its tensor: returns a cffi
    DLManagedTensorVersioned * the caller owns (hand it to ldt_from_dlpack, or delete it) and
    the capsule (marked used). Legacy capsules are wrapped by ldt_dlpack_from_unversioned."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} is not a DLPack producer (no __dlpack__); "
                        "pass a numpy array, a torch tensor or another DLPack object")
    try:
        cap = obj.__dlpack__(max_version=(1, 1))
    except TypeError:  # a producer that predates the max_version keyword
        cap = obj.__dlpack__()
    if _api.PyCapsule_IsValid(id(cap), VERSIONED):
        ptr = _api.PyCapsule_GetPointer(id(cap), VERSIONED)
        _api.PyCapsule_SetName(cap, USED_VERSIONED)
        return ffi.cast("DLManagedTensorVersioned *", ptr), cap
    if _api.PyCapsule_IsValid(id(cap), LEGACY):
        legacy = ffi.cast("DLManagedTensor *", _api.PyCapsule_GetPointer(id(cap), LEGACY))
        out = ffi.new("DLManagedTensorVersioned **")
        check(lib.ldt_dlpack_from_unversioned(legacy, out))
        _api.PyCapsule_SetName(cap, USED_LEGACY)  # the wrapper owns it now
        return out[0], cap
    raise LdtError(-1, f"{type(obj).__name__}.__dlpack__() gave no unused DLPack capsule "
                       "(expected one named 'dltensor_versioned' or 'dltensor')")


def delete(t):
    """Deletes a tensor taken with take() that was not handed on."""
    if t != ffi.NULL and t.deleter != ffi.NULL:
        t.deleter(t)


def dtype_code(t):
    """(code, bits, lanes) of a taken tensor."""
    d = t.dl_tensor.dtype
    return d.code, d.bits, d.lanes
