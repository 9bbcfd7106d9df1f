"""DTensors against numpy: distribute / full_tensor / to_local by the torch.chunk rule,
redistribute between placements and meshes, from_local, meshes."""
import itertools

import numpy as np
import pytest

import lazydt as L
from conftest import torch_chunk


def local_ref(x, mesh, placements, rank):
    """Rank's local shard of x by hand: nested torch.chunk in mesh-dim order (Shard only)."""
    coord = mesh.get_coordinate(rank)
    sl = [slice(0, n) for n in x.shape]
    for d, p in enumerate(placements):
        if isinstance(p, L.Shard):
            cur = sl[p.dim]
            s, ln = torch_chunk(cur.stop - cur.start, mesh.shape[d], coord[d])
            sl[p.dim] = slice(cur.start + s, cur.start + s + ln)
    return x[tuple(sl)]


PLACEMENTS = [[L.Shard(0), L.Shard(1)], [L.Replicate(), L.Shard(0)], [L.Shard(1), L.Shard(1)],
              [L.Shard(0), L.Replicate()], [L.Replicate(), L.Replicate()],
              [L.Shard(1), L.Shard(0)]]


@pytest.mark.parametrize("shape", [(7, 5), (8, 6), (3, 1), (2, 9)])
def test_distribute_local_shards_match_numpy(shape):
    mesh = L.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for pl in PLACEMENTS:
        d = L.distribute_tensor(x, mesh, pl)
        assert d.shape == shape and d.placements == tuple(pl)
        np.testing.assert_array_equal(d.full_tensor(), x)
        for r in range(4):
            ref = local_ref(x, mesh, pl, r)
            assert d.local_shape(r) == ref.shape
            np.testing.assert_array_equal(np.asarray(d.to_local(r)), ref)


def test_redistribute_every_pair_matches_numpy():
    mesh = L.DeviceMesh.parse("dp=2,tp=2")
    x = np.arange(7 * 6, dtype=np.float64).reshape(7, 6) * 0.5
    for src, dst in itertools.product(PLACEMENTS, PLACEMENTS):
        d = L.distribute_tensor(x, mesh, src).redistribute(placements=dst)
        assert d.placements == tuple(dst)
        np.testing.assert_array_equal(d.full_tensor(), x, err_msg=f"{src} -> {dst}")
        for r in range(4):
            np.testing.assert_array_equal(np.asarray(d.to_local(r)), local_ref(x, mesh, dst, r))


def test_partial_reduces_and_interleaved_shard():
    # the README's collective: each rank holds [1, rank]; their sum is [4, 6]
    mesh = L.DeviceMesh("cpu", [0, 1, 2, 3])
    locs = [np.array([1.0, r], dtype=np.float32) for r in range(4)]
    p = L.from_local(locs, mesh, [L.Partial()])
    np.testing.assert_array_equal(p.full_tensor(), [4, 6])
    r = p.redistribute(placements=[L.Replicate()])
    for k in range(4):
        np.testing.assert_array_equal(np.asarray(r.to_local(k)), [4, 6])
    pmax = L.from_local(locs, mesh, "Pmax")
    np.testing.assert_array_equal(pmax.redistribute(placements="R").full_tensor(), [1, 3])
    # InterleavedShard(0, 3): [q; k; v] blocks of 4 rows, each split over 2 ranks
    x = np.arange(12 * 2, dtype=np.int32).reshape(12, 2)
    m2 = L.DeviceMesh.parse("2")
    d = L.distribute_tensor(x, m2, [L.InterleavedShard(0, 3)])
    np.testing.assert_array_equal(np.asarray(d.to_local(1)),
                                  np.concatenate([x[2:4], x[6:8], x[10:12]]))
    np.testing.assert_array_equal(d.redistribute(placements=[L.Shard(0)]).full_tensor(), x)


def test_redistribute_across_meshes_and_dtypes():
    x = (np.arange(10 * 4) % 7).reshape(10, 4)
    for dt in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_):
        a = x.astype(dt)
        d = L.distribute_tensor(a, L.DeviceMesh.parse("2x2"), [L.Shard(0), L.Shard(1)])
        assert d.dtype == np.dtype(dt)
        e = d.redistribute(L.DeviceMesh("cpu", [[4, 5, 6]]), [L.Replicate(), L.Shard(0)])
        assert str(e.device_mesh) == "[[4,5,6]]"
        np.testing.assert_array_equal(e.full_tensor(), a)
        np.testing.assert_array_equal(np.asarray(e.to_local(6)), a[8:10])


def test_mesh_names_submeshes_meta():
    m = L.DeviceMesh("cpu", [[0, 2], [1, 3]], mesh_dim_names=("dp", "tp"))
    assert m.shape == (2, 2) and m.ndim == 2 and m.size() == 4 and m.size("tp") == 2
    assert m.mesh_dim_names == ("dp", "tp")
    assert m.ranks() == [0, 2, 1, 3]
    assert m.get_coordinate(1) == (1, 0)
    tp = m["tp"]
    assert tp.ranks() == [0, 2] and tp.mesh_dim_names == ("tp",)
    assert [s.ranks() for s in m.split("dp")] == [[0, 1], [2, 3]]
    assert m.submesh("dp", rank=3).ranks() == [2, 3]
    meta = L.init_device_mesh("meta", (64, 64), mesh_dim_names=("dp", "tp"))
    assert meta.device_type == "meta" and meta.size() == 4096
    assert L.DeviceMesh.parse("dp=2,tp=2") == L.init_device_mesh("cpu", (2, 2),
                                                                  mesh_dim_names=("dp", "tp"))
