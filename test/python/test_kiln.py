"""The Python module as a user meets it: ops against NumPy in float64,
devices, a device conflict, compile / save / load / run, ONNX import, a
small transformer block against a float64 reference, and python3 -m kiln."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def has_vulkan():
    return any(d.api == "vulkan" for d in kiln.devices())


def test_version_and_devices():
    assert kiln.__version__.count(".") == 2
    names = [d.name for d in kiln.devices()]
    assert names[0] == "cpu:0"
    assert kiln.device("cpu:0") == kiln.Device("cpu:0")
    with pytest.raises(kiln.Error, match="not a device|device"):
        kiln.device("tpu:3")


def test_ops_match_numpy():
    a, b = rand(4, 5), rand(5, 3)
    x, y = kiln.tensor(a, "cpu:0"), kiln.tensor(b, "cpu:0")
    got = kiln.softmax(kiln.relu(x @ y) * 2.0 - 1.0, axis=-1).numpy()
    z = np.maximum(a.astype(np.float64) @ b, 0) * 2 - 1
    want = np.exp(z - z.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    s = kiln.sum(kiln.exp(x), [1], keepdims=True).numpy()
    np.testing.assert_allclose(s, np.exp(a.astype(np.float64)).sum(1, keepdims=True), rtol=1e-5)
    assert (x.shape, x.dtype, x.device.name) == ((4, 5), "f32", "cpu:0")
    ints = kiln.tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert ints.dtype == "i32" and ints.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(kiln.Error, match="outside the int32"):
        kiln.tensor(np.array([2**40]))


def test_shapes_errors_name_the_line():
    x = kiln.tensor(rand(2, 3))
    with pytest.raises(kiln.Error, match="broadcast"):
        (x + kiln.tensor(rand(4))).numpy()


@pytest.mark.skipif(not has_vulkan(), reason="needs a Vulkan device beside cpu:0")
def test_device_conflict_is_an_error_naming_both():
    a = kiln.tensor(rand(3), "cpu:0")
    b = kiln.tensor(rand(3), "vulkan:0")
    with pytest.raises(kiln.DeviceMismatchError) as caught:
        (a + b).numpy()
    message = str(caught.value)
    assert "cpu:0" in message and "vulkan:0" in message
    assert "kiln_module.cpp" not in message  # Python lines, not the binding's
    assert message.count("test_kiln.py:") >= 3, message  # the add, and where a and b were made


def test_compile_save_load_run(tmp_path):
    w = rand(8, 4)
    x = kiln.tensor(np.zeros((2, 8), np.float32), "cpu:0")
    y = kiln.relu(x @ kiln.tensor(w, "cpu:0"))
    program = kiln.compile([y], [x], targets=["cpu"], input_names=["x"], output_names=["y"])
    path = str(tmp_path / "mlp.kiln")
    program.save(path)
    loaded = kiln.load(path, "cpu:0")
    assert "input x: [2, 8] f32" in loaded.signature
    data = rand(2, 8)
    want = np.maximum(data.astype(np.float64) @ w, 0)
    for out in (loaded.run([data])[0], loaded.run({"x": data})[0], program.run([data])[0]):
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.Error):
        loaded.run([rand(3, 8)])  # another shape: refused, naming the signature
    with pytest.raises(kiln.Error, match="damaged|not a .kiln"):
        (tmp_path / "bad.kiln").write_bytes(open(path, "rb").read()[:-100])
        kiln.load(str(tmp_path / "bad.kiln"), "cpu:0")


def test_import_onnx(tmp_path):
    onnx = pytest.importorskip("onnx", reason="python3-onnx builds the model")
    from onnx import helper, numpy_helper, TensorProto
    w, b = rand(6, 5), rand(5)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"]),
         helper.make_node("Relu", ["h"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = str(tmp_path / "gemm.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(kiln.Error, match="batch"):
        kiln.import_onnx(path)  # a symbolic dimension needs a shape
    model = kiln.import_onnx(path, {"x": [3, 6]})
    assert model.input_names == ["x"] and model.opset == 17
    data = rand(3, 6)
    got = model.compile(targets=["cpu"]).run({"x": data})[0]
    np.testing.assert_allclose(got, np.maximum(data.astype(np.float64) @ w + b, 0),
                               rtol=1e-5, atol=1e-6)
    assert "Gemm" in kiln.onnx_operators()


def test_transformer_block_against_float64():
    d, t, heads = 32, 6, 4
    p = {k: rand(*s) * 0.2 for k, s in
         dict(wq=(d, d), wk=(d, d), wv=(d, d), wo=(d, d), w1=(d, 4 * d), w2=(4 * d, d)).items()}
    g, beta, xs = 1 + 0.1 * rand(d), 0.1 * rand(d), rand(t, d)

    # Reference in float64.
    x64 = xs.astype(np.float64)
    P = {k: v.astype(np.float64) for k, v in p.items()}
    q, k, v = x64 @ P["wq"], x64 @ P["wk"], x64 @ P["wv"]
    hd = d // heads
    att = []
    for h in range(heads):
        s = q[:, h * hd:(h + 1) * hd] @ k[:, h * hd:(h + 1) * hd].T / np.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        att.append((s / s.sum(-1, keepdims=True)) @ v[:, h * hd:(h + 1) * hd])
    r = x64 + np.concatenate(att, 1) @ P["wo"]
    n = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + 1e-5) * g + beta
    from math import erf
    gelu = np.vectorize(lambda z: 0.5 * z * (1 + erf(z / np.sqrt(2))))
    want = n + gelu(n @ P["w1"]) @ P["w2"]

    # Kiln, on every device.
    for dev in [dd.name for dd in kiln.devices()]:
        T = lambda a: kiln.tensor(a, dev)  # noqa: E731
        x = T(xs)
        q, k, v = x @ T(p["wq"]), x @ T(p["wk"]), x @ T(p["wv"])
        heads_out = []
        for h in range(heads):
            cols = list(range(h * hd, (h + 1) * hd))
            qh = kiln.tensor(np.eye(d, dtype=np.float32)[:, cols], dev)
            s = kiln.softmax((q @ qh) @ (k @ qh).transpose(0, 1) * float(1 / np.sqrt(hd)))
            heads_out.append(s @ (v @ qh))
        r = x + kiln.concat(heads_out, 1) @ T(p["wo"])
        n = kiln.layer_norm(r, T(g), T(beta))
        got = (n + kiln.gelu(n @ T(p["w1"])) @ T(p["w2"])).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4, err_msg=dev)


def test_python_m_kiln_wraps_the_tools():
    run = subprocess.run([sys.executable, "-m", "kiln", "run", "--version"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("kiln-run (Kiln)"), run
    bad = subprocess.run([sys.executable, "-m", "kiln", "frobnicate"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
