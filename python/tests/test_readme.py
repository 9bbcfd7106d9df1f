"""The README's examples in Python (docs/python.md has them too), each checked against an
independent numpy computation: a traced step compiled and replayed, the layout and the
collective, meta init and materialize equal to a single-device init, a checkpoint round trip."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import lazydt as L


def test_replay_step():
    # y = relu(x @ w1) @ w2, hidden dim split Megatron-style by two pins, 4 rank threads
    mesh = L.DeviceMesh.parse("4")
    ctx = L.Context(mesh)
    w = ((np.arange(16 * 64) % 7) / 7.0 - 0.4).astype(np.float32)
    w1, w2 = w.reshape(16, 64), w.reshape(64, 16)
    x = ctx.input("x", (8, 16))
    p1 = ctx.param("w1", (16, 64), value=w1).pin([L.Shard(1)])  # column parallel
    p2 = ctx.param("w2", (64, 16), value=w2).pin([L.Shard(0)])  # row parallel
    step = L.compile(lambda a, b, c: (a @ b).relu() @ c, ctx, x, p1, p2)
    for s in range(3):
        xv = ((np.arange(8 * 16) + s) % 5 - 2).astype(np.float32).reshape(8, 16)
        y = step.replay(x=xv)
        ref = np.maximum(xv.astype(np.float64) @ w1, 0) @ w2
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_eager_ops_and_grad():
    ctx = L.Context(L.DeviceMesh.parse("2"))
    a = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
    x = ctx.input("x", (2, 3)).bind(a)
    w = ctx.param("w", (2, 3), value=a * 2)
    loss = (x * w).sum()
    (g,) = L.grad(loss, [w])
    np.testing.assert_allclose(g.numpy(), a)       # d sum(x*w) / dw = x
    y = ((x + 1.0) * 2.0 - x / 2.0).softmax(1)
    z = np.exp((a + 1) * 2 - a / 2)
    np.testing.assert_allclose(y.numpy(), z / z.sum(1, keepdims=True), rtol=1e-6)


def test_layout_example():
    # rank 3 of a 2x2 mesh holds rows [4,7) x cols [3,5) of a [7,5] tensor under (S0,S1)
    d = L.distribute_tensor(np.zeros((7, 5), np.float32), L.DeviceMesh.parse("2x2"),
                            [L.Shard(0), L.Shard(1)])
    assert d.local_shape(3) == (3, 2)


def test_meta_init_materialize_equals_single_device():
    meta = L.DeviceMesh.parse("dp=2,tp=2", "meta")
    ctx = L.Context(meta, seed=7)
    w = ctx.param("w", (9, 6), init=L.init.normal(0.0, 0.02))
    b = ctx.param("b", (9,), init=L.init.arange(1.0, 0.5))
    u = ctx.param("u", (5, 4), init=L.init.uniform(-1.0, 1.0))
    assert ctx.is_meta
    mesh = L.DeviceMesh.parse("dp=2,tp=2")
    dw, db, du = L.materialize([w, b, u], [[L.Shard(0), L.Shard(1)], [L.Replicate(),
                               L.Shard(0)], [L.InterleavedShard(1, 2), L.Replicate()]], mesh)
    # single device: the same draws as random ops recorded in that order on one rank
    one = L.Context(L.DeviceMesh.parse("1"), seed=7)
    rw = one.normal((9, 6), 0.0, 0.02).numpy()
    np.testing.assert_array_equal(db.full_tensor(), 1.0 + 0.5 * np.arange(9))
    ru = one.uniform((5, 4), -1.0, 1.0).numpy()
    np.testing.assert_array_equal(dw.full_tensor(), rw)
    np.testing.assert_array_equal(du.full_tensor(), ru)
    assert abs(rw.std() - 0.02) < 0.01 and (np.abs(ru) <= 1).all()


def test_checkpoint_round_trip(tmp_path):
    x = np.random.default_rng(3).standard_normal((7, 5)).astype(np.float32)
    y = np.arange(6, dtype=np.int64)
    d = L.distribute_tensor(x, L.DeviceMesh.parse("2x2"), [L.Shard(0), L.Shard(1)])
    e = L.distribute_tensor(y, L.DeviceMesh.parse("2"), [L.Shard(0)])
    L.save(tmp_path / "ck", {"w": d, "b": e})
    m3 = L.DeviceMesh.parse("3")
    w2 = L.load(tmp_path / "ck", "w", m3, [L.Shard(1)], (7, 5), np.float32)
    np.testing.assert_array_equal(w2.full_tensor(), x)
    np.testing.assert_array_equal(np.asarray(w2.to_local(2)), x[:, 4:5])
    sd = L.load_state_dict(tmp_path / "ck", {"w": w2, "b": e})
    np.testing.assert_array_equal(sd["b"].full_tensor(), y)
    L.merge(tmp_path / "ck", tmp_path / "m.safetensors")
    raw = (tmp_path / "m.safetensors").read_bytes()      # safetensors by hand
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    s, t = hdr["w"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(raw[8 + n + s:8 + n + t], np.float32)
                                  .reshape(hdr["w"]["shape"]), x)
    with pytest.raises(L.LdtError, match="ck") as ei:
        L.load(tmp_path / "ck", "nope", m3, [L.Shard(1)], (7, 5), np.float32)
    assert "nope" in str(ei.value)


def test_errors_become_exceptions():
    mesh = L.DeviceMesh.parse("2x2")
    with pytest.raises(L.LdtError, match="S2") as ei:
        L.distribute_tensor(np.zeros((7, 5), np.float32), mesh, [L.Shard(0), L.Shard(2)])
    assert ei.value.status == "INVALID_ARGUMENT" and ei.value.code == -1
    with pytest.raises(L.LdtError, match="placement"):
        L.distribute_tensor(np.zeros(4, np.float32), mesh, [L.Shard(0)])
    with pytest.raises(L.LdtError):
        L.DeviceMesh.parse("2x")
    with pytest.raises(L.LdtError, match="device_type 'tpu'"):
        L.DeviceMesh("tpu", [0])
    with pytest.raises(L.LdtError, match="dtype"):
        L.distribute_tensor(np.zeros(4, np.complex64), mesh, "R,R")
    ctx = L.Context(mesh)
    a, b = ctx.input("a", (2, 3)), ctx.input("b", (4, 5))
    with pytest.raises(L.LdtError, match=r"\[2,3\]") as ei:
        a @ b
    assert ei.value.message in str(ei.value)
    c = (a + 1.0).sum()                       # the context is usable after the error
    a.bind(np.ones((2, 3), np.float32))
    assert c.numpy() == 12.0
    with pytest.raises(L.LdtError, match="meta"):
        L.from_local([np.zeros(1, np.float32)] * 4, L.DeviceMesh.parse("2x2", "meta"), "R,R")


def test_library_not_found_is_a_clear_error(tmp_path):
    code = ("import lazydt\ntry:\n    lazydt.DeviceMesh.parse('2')\nexcept lazydt.LdtError as e:"
            "\n    print(e)\n")
    env = dict(os.environ, LDT_LIBRARY=str(tmp_path / "missing.so"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert "missing.so is not a file; expected the path of a built liblazydt.so" in out.stdout


def _python_blocks(path):
    import re
    with open(path) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("page", ["README.md", "docs/python.md"])
def test_the_pages_python_runs_as_written(page, capsys):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, page)
    if not os.path.isfile(path):
        pytest.skip(f"{page} is not beside this test (an installed copy)")
    blocks = _python_blocks(path)
    assert blocks, f"{page} shows no Python"
    env = {}
    for b in blocks:  # a page's blocks build on each other
        exec(compile(b, page, "exec"), env)
    if page == "README.md":  # the C example's printout, from the same step
        out = capsys.readouterr().out.splitlines()
        assert out[:3] == ["step 0: y[0] = 0.617143", "step 1: y[0] = -1.48",
                           "step 2: y[0] = -0.440816"]
