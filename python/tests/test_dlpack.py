"""Local shards out and in through DLPack without a copy: numpy sees the shard's memory and
lazydt sees numpy's (writes through one side read on the other), capsule versions, lifetimes,
and the refusals as exceptions carrying the library's message."""
import gc

import numpy as np
import pytest

import lazydt as L


def test_zero_copy_out_and_in():
    mesh = L.DeviceMesh.parse("2x2")
    x = np.arange(35, dtype=np.float32).reshape(7, 5)
    d = L.distribute_tensor(x, mesh, [L.Shard(0), L.Shard(1)])
    # out: numpy views of rank 3's shard ([4,7) x [3,5)), no copy
    v = np.from_dlpack(d.to_local(3))
    assert v.ctypes.data == d.to_local(3).data_ptr()
    np.testing.assert_array_equal(v, x[4:7, 3:5])
    v[2, 1] = -7.0                         # write through numpy ...
    assert d.full_tensor()[6, 4] == -7.0   # ... read through lazydt
    assert d.redistribute(placements="R,R").full_tensor()[6, 4] == -7.0
    # in: numpy arrays become the shards' memory
    locs = [np.zeros(d.local_shape(r), dtype=np.float32) for r in range(4)]
    e = L.from_local(locs, mesh, [L.Shard(0), L.Shard(1)], shape=(7, 5))
    for r in range(4):
        assert e.to_local(r).data_ptr() == locs[r].ctypes.data
    locs[1][...] = 5.0                     # numpy writes, lazydt reads
    np.testing.assert_array_equal(e.full_tensor()[0:4, 3:5], 5.0)
    w = np.asarray(e.to_local(2))          # lazydt's export of numpy's memory, a view
    w[0, 0] = 9.0
    assert locs[2][0, 0] == 9.0
    assert e.full_tensor()[4, 0] == 9.0


def test_lifetimes():
    d = L.distribute_tensor(np.arange(8.0), L.DeviceMesh.parse("2"), [L.Shard(0)])
    v = np.from_dlpack(d.to_local(1))
    del d
    gc.collect()
    np.testing.assert_array_equal(v, [4, 5, 6, 7])  # the view keeps the storage alive
    a = np.arange(4, dtype=np.int64)
    e = L.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(e.full_tensor(), [0, 1, 2, 3])  # the shard keeps the array


def test_capsules_versions_and_keywords():
    d = L.distribute_tensor(np.ones((2, 3), np.float64), L.DeviceMesh.parse("1"), "R")
    lt = d.to_local()
    assert lt.__dlpack_device__() == (1, 0)
    assert '"dltensor_versioned"' in repr(lt.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(lt.__dlpack__())
    assert '"dltensor"' in repr(lt.__dlpack__(max_version=(0, 8)))
    np.testing.assert_array_equal(np.from_dlpack(lt), np.ones((2, 3)))
    c = np.from_dlpack(lt, copy=True)
    c[0, 0] = 3
    assert d.full_tensor()[0, 0] == 1  # a copy
    with pytest.raises(BufferError):
        lt.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        lt.__dlpack__(dl_device=(2, 0))
    # a legacy-only producer is taken through ldt_dlpack_from_unversioned
    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    e = L.from_dlpack(Legacy(a))
    a[1, 2] = 42
    assert e.full_tensor()[1, 2] == 42


def test_refusals_carry_the_library_message():
    mesh = L.DeviceMesh.parse("2")
    with pytest.raises(L.LdtError, match="read-only") as ei:
        ro = np.zeros(2, np.float32)
        ro.flags.writeable = False
        L.from_local([ro, np.zeros(2, np.float32)], mesh, [L.Shard(0)])
    assert ei.value.status == "INVALID_ARGUMENT"
    with pytest.raises(L.LdtError, match=r"rank 1's tensor has dtype float64 \(lanes 1\); "
                                         r"expected f32"):
        L.from_local([np.zeros(2, np.float32), np.zeros(2, np.float64)], mesh, [L.Shard(0)])
    with pytest.raises(L.LdtError, match=r"rank 0's tensor has stride 2 on dim 1; expected "
                                         r"compact row-major"):
        b = np.zeros((2, 6), np.float32)[:, ::2]
        L.from_local([b, np.zeros((2, 3), np.float32)], mesh, [L.Shard(0)], shape=(4, 3))
    with pytest.raises(L.LdtError, match=r"rank 1's tensor has shape \[3\]; expected its "
                                         r"local shape \[2\]"):
        L.from_local([np.zeros(2, np.float32), np.zeros(3, np.float32)], mesh, [L.Shard(0)])
    with pytest.raises(L.LdtError, match="DLPack dtype"):
        L.from_local([np.zeros(2, np.complex64)] * 2, mesh, [L.Shard(0)])
    with pytest.raises(L.LdtError, match="expected one per rank"):
        L.from_local([np.zeros(2, np.float32)], mesh, [L.Shard(0)])
    with pytest.raises(TypeError, match="DLPack producer"):
        L._dlpack.take([1, 2])
    d = L.distribute_tensor(np.zeros(4, np.float32), mesh, [L.Shard(0)])
    with pytest.raises(L.LdtError, match="to_local: the mesh 2 has 2 ranks"):
        d.to_local()
    with pytest.raises(L.LdtError, match="rank 5 is not in mesh 2"):
        np.from_dlpack(d.to_local(5))


def test_torch_sees_the_shard_where_installed():
    torch = pytest.importorskip("torch")
    d = L.distribute_tensor(np.arange(12, dtype=np.float32).reshape(4, 3),
                            L.DeviceMesh.parse("2"), [L.Shard(0)])
    t = torch.from_dlpack(d.to_local(1))
    assert t.shape == (2, 3) and t[0, 0].item() == 6.0
    t[1, 2] = -1.0
    assert d.full_tensor()[3, 2] == -1.0
    u = torch.arange(4, dtype=torch.int64)
    e = L.from_dlpack(u)
    u[0] = 9
    assert e.full_tensor()[0] == 9
