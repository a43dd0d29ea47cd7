"""One padding resolver and one set of conv/pool geometry helpers (pdlite.operators.geometry), and
every user agrees on them: every padding algorithm (EXPLICIT symmetric and asymmetric, SAME,
VALID), dilation 1 and 2, strides 1 and 2, ranks 1, 2 and 3.

- Output sizes from the helpers match Paddle's own (F.conv1d/2d/3d, F.max_pool1d/2d/3d, in a
  subprocess; skipped without paddle).
- Values: the host kernels (conv2d, conv3d, pool2d, pool3d), the CUDA kernels on torch's CPU
  device, the ONNX converters run by onnxruntime and the reference delegate's convolution all
  equal a brute-force N-d convolution/pooling over the pads and dilations the resolver gives
  (fp32: |got - ref| <= 1e-4 * max|ref|; max pooling exactly).
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from pdlite.operators.geometry import conv_out_sizes, pool_out_sizes, resolve_padding
from tests.kernels._util import make_op, run_op

RNG = np.random.default_rng(7)
ALGOS = [("EXPLICIT", "sym"), ("EXPLICIT", "asym"), ("SAME", None), ("VALID", None)]
REL = 1e-4


def _paddings(kind: str | None, nd: int) -> list[int]:
    if kind == "sym":
        return [1] * nd
    if kind == "asym":
        return [v for pair in [[0, 2], [1, 0], [2, 1]][:nd] for v in pair]
    return [3] * nd  # ignored by SAME / VALID


def _in_size(nd: int) -> tuple[int, ...]:
    return (9, 8, 7)[:nd]


def _kernel(nd: int) -> tuple[int, ...]:
    return (3, 2, 3)[:nd]


def _cases(nd: int):
    for (algo, kind), d, s in itertools.product(ALGOS, (1, 2), (1, 2)):
        yield algo, _paddings(kind, nd), d, s


def _resolved(algo, paddings, nd, d, s, kernel):
    return resolve_padding(algo, paddings, _in_size(nd), (s,) * nd, kernel, (d,) * nd)


# -- brute force references ----------------------------------------------------------------------
def naive_conv(x: np.ndarray, w: np.ndarray, strides, pads, dil) -> np.ndarray:
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(nd)])
    k = w.shape[2:]
    out_size = [(xp.shape[2 + i] - (dil[i] * (k[i] - 1) + 1)) // strides[i] + 1 for i in range(nd)]
    out = np.zeros((x.shape[0], w.shape[0], *out_size))
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[i] * dil[i], tap[i] * dil[i] + strides[i] * (out_size[i] - 1) + 1, strides[i])
                   for i in range(nd))
        out += np.einsum("nc...,oc->no...", xp[(slice(None), slice(None), *sl)], w[(slice(None), slice(None), *tap)])
    return out


def naive_max_pool(x: np.ndarray, k, strides, pads, out_size) -> np.ndarray:
    nd = x.ndim - 2
    out = np.full((*x.shape[:2], *out_size), -np.inf)
    for idx in np.ndindex(*out_size):
        sl = []
        for i in range(nd):
            lo = idx[i] * strides[i] - pads[2 * i]
            sl.append(slice(max(lo, 0), min(lo + k[i], x.shape[2 + i])))
        out[(slice(None), slice(None), *idx)] = x[(slice(None), slice(None), *sl)].max(axis=tuple(range(2, 2 + nd)))
    return out


# -- the helpers against Paddle -------------------------------------------------------------------
PADDLE_SHAPES = """
import json, sys
import numpy as np
import paddle
import paddle.nn.functional as F
paddle.disable_static()
out = []
for c in json.loads(sys.argv[1]):
    nd, kind = c["nd"], c["kind"]
    x = paddle.to_tensor(np.zeros([1, 2, *c["in"]], "float32"))
    pad = c["algo"] if c["algo"] in ("SAME", "VALID") else c["paddings"]
    if kind == "conv":
        w = paddle.to_tensor(np.zeros([3, 2, *c["k"]], "float32"))
        f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        y = f(x, w, stride=c["s"], padding=pad, dilation=c["d"])
    else:
        f = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]
        y = f(x, c["k"], stride=c["s"], padding=pad, ceil_mode=c["ceil"])
    out.append(list(y.shape[2:]))
print(json.dumps(out))
"""


def _paddle_pads(paddings: list[int], nd: int) -> list:
    if len(paddings) == nd:
        return paddings
    return [[0, 0], [0, 0]] + [paddings[2 * i:2 * i + 2] for i in range(nd)]


def test_geometry_matches_paddle_on_every_rank_algorithm_and_dilation() -> None:
    if importlib.util.find_spec("paddle") is None:
        pytest.skip("paddle (the test oracle) not installed")
    cases, mine = [], []
    for nd in (1, 2, 3):
        k = _kernel(nd)
        for algo, paddings, d, s in _cases(nd):
            if nd == 1 and algo == "EXPLICIT" and len(paddings) == 2:
                continue  # F.conv1d takes asymmetric pads only as [[0,0],[0,0],[b,a]]: covered by 2-d/3-d
            pads, dil = _resolved(algo, paddings, nd, d, s, k)
            cases.append({"nd": nd, "kind": "conv", "in": _in_size(nd), "k": k, "s": s, "d": d, "algo": algo,
                          "paddings": _paddle_pads(paddings, nd), "ceil": False})
            mine.append(conv_out_sizes(_in_size(nd), k, dil, pads, (s,) * nd))
            if d == 1 and not (algo == "EXPLICIT" and max(paddings) * 2 > min(k)):  # pool pads <= k/2
                for ceil in (False, True) if algo == "EXPLICIT" else (False,):  # Paddle: no ceil_mode there
                    pads, _ = _resolved(algo, paddings, nd, 1, s, k)
                    cases.append({**cases[-1], "kind": "pool", "ceil": ceil})
                    mine.append(pool_out_sizes(_in_size(nd), k, pads, (s,) * nd, ceil))
    proc = subprocess.run([sys.executable, "-c", PADDLE_SHAPES, json.dumps(cases)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [(c, m, t) for c, m, t in zip(cases, mine, theirs) if list(m) != list(t)]
    assert not bad, f"{len(bad)} of {len(cases)} geometries differ from Paddle's: {bad[:5]}"
    assert len(cases) > 60


def test_same_resets_dilation_and_ignores_paddings() -> None:
    pads, dil = resolve_padding("SAME", [5, 5], (9, 8), (2, 1), (3, 2), (2, 3))
    assert dil == (1, 1)
    assert pads == [1, 1, 0, 1]  # out = ceil(in / s) = (5, 8): pad_sum = (2, 1), the smaller half before
    assert resolve_padding("VALID", [5, 5], (9, 8), (2, 1), (3, 2), (2, 3)) == ([0, 0, 0, 0], (2, 3))
    assert resolve_padding("SAME", None, None, (1,), (3,)) == (None, (1,))  # unknown size: ONNX SAME_UPPER


# -- every user agrees, on values --------------------------------------------------------------------
def _conv_attrs(algo, paddings, d, s, nd):
    return {"strides": [s] * nd, "paddings": paddings, "dilations": [d] * nd, "padding_algorithm": algo, "groups": 1}


def _conv_ref(x, w, attrs):
    nd = x.ndim - 2
    pads, dil = resolve_padding(attrs["padding_algorithm"], attrs["paddings"], x.shape[2:], attrs["strides"],
                                w.shape[2:], attrs["dilations"])
    return naive_conv(x, w, attrs["strides"], pads, dil) if nd else None


def _close(got, ref, what):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    tol = REL * max(np.abs(ref).max(), 1e-6)
    assert np.abs(got - ref).max() <= tol, f"{what}: max diff {np.abs(got - ref).max()} > {tol}"


@pytest.mark.parametrize("algo, paddings, d, s", list(_cases(2)))
def test_conv2d_host_cuda_onnx_and_reference_delegate_agree(algo, paddings, d, s) -> None:
    x = RNG.standard_normal((2, 3, *_in_size(2))).astype(np.float32)
    w = RNG.standard_normal((4, 3, *_kernel(2))).astype(np.float32)
    attrs = _conv_attrs(algo, paddings, d, s, 2)
    ref = _conv_ref(x, w, attrs)
    host = run_op("conv2d", {"Input": x, "Filter": w}, attrs, {"Output": 1})["Output"][0]
    _close(host, ref, "host conv2d")

    from pdlite.delegate.reference import conv2d_nchw

    full = make_op("conv2d", {"Input": x, "Filter": w}, attrs, {"Output": 1}).attrs
    _close(conv2d_nchw(x, w, full), ref, "reference delegate conv2d")

    if importlib.util.find_spec("torch") is not None:
        from tests.kernels.test_cuda_kernels import run_cuda

        got = run_cuda("conv2d", {"Input": x, "Filter": w}, attrs, params=("Filter",), outs={"Output": 1})
        _close(got["Output"][0], ref, "CUDA conv2d (torch CPU)")
    if importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None:
        _close(_onnx_run("conv2d", {"Input": x}, {"Filter": w}, attrs, "Output"), ref, "ONNX conv2d")


@pytest.mark.parametrize("algo, paddings, s, ceil", [(a, p, s, c) for a, p, d, s in _cases(2) if d == 1
                                                      for c in (False, True)])
def test_max_pool2d_host_cuda_and_onnx_agree(algo, paddings, s, ceil) -> None:
    x = RNG.standard_normal((2, 3, *_in_size(2))).astype(np.float32)
    k = [3, 3]
    attrs = {"pooling_type": "max", "ksize": k, "strides": [s, s], "paddings": paddings, "padding_algorithm": algo,
             "ceil_mode": ceil}
    full = make_op("pool2d", {"X": x}, attrs).attrs
    pads, _ = resolve_padding(algo, paddings, x.shape[2:], (s, s), k)
    ref = naive_max_pool(x, k, (s, s), pads, pool_out_sizes(x.shape[2:], k, pads, (s, s), ceil))
    host = run_op("pool2d", {"X": x}, full)["Out"][0]
    np.testing.assert_array_equal(host, ref.astype(np.float32), err_msg="host pool2d")
    if importlib.util.find_spec("torch") is not None:
        from tests.kernels.test_cuda_kernels import run_cuda

        np.testing.assert_array_equal(run_cuda("pool2d", {"X": x}, attrs)["Out"][0], ref.astype(np.float32),
                                      err_msg="CUDA pool2d (torch CPU)")
    if importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None:
        got = _onnx_run("pool2d", {"X": x}, {}, attrs, "Out")
        if got is not None:  # None: the converter refused the op (it stays on the host)
            np.testing.assert_array_equal(got, ref.astype(np.float32), err_msg="ONNX pool2d")


@pytest.mark.parametrize("algo, paddings, d, s", list(_cases(3)))
def test_conv3d_and_pool3d_host_agree_with_the_resolver(algo, paddings, d, s) -> None:
    x = RNG.standard_normal((1, 2, *_in_size(3))).astype(np.float32)
    w = RNG.standard_normal((3, 2, *_kernel(3))).astype(np.float32)
    attrs = _conv_attrs(algo, paddings, d, s, 3)
    host = run_op("conv3d", {"Input": x, "Filter": w}, attrs, {"Output": 1})["Output"][0]
    _close(host, _conv_ref(x, w, attrs), "host conv3d")
    if d == 1:
        k = [3, 3, 3]
        pattrs = {"pooling_type": "max", "ksize": k, "strides": [s] * 3, "paddings": paddings,
                  "padding_algorithm": algo}
        pads, _ = resolve_padding(algo, paddings, x.shape[2:], (s,) * 3, k)
        if algo == "EXPLICIT" and max(pads) > 1:
            return  # a window wholly in the padding: Paddle's max is -FLT_MAX there, not a value of x
        ref = naive_max_pool(x, k, (s,) * 3, pads, pool_out_sizes(x.shape[2:], k, pads, (s,) * 3))
        np.testing.assert_array_equal(run_op("pool3d", {"X": x}, pattrs)["Out"][0], ref.astype(np.float32))


def _onnx_run(op_type: str, feeds: dict[str, np.ndarray], params: dict[str, np.ndarray], attrs: dict,
              out_slot: str) -> np.ndarray | None:
    from pdlite.core.program import OpDesc
    from tests.nnadapter._util import Case, host_run, onnx_model, ort_run

    ins = {**{k: f"in_{k}" for k in feeds}, **{k: f"p_{k}" for k in params}}
    desc = OpDesc(op_type, {k: [v] for k, v in ins.items()}, {out_slot: ["y"]}, dict(attrs))
    case = Case("geometry", [desc], {f"in_{k}": v for k, v in feeds.items()},
                {f"p_{k}": v for k, v in params.items()}, ["y"], dynamic=False)
    from pdlite.nnadapter.registry import ConversionError

    try:
        model = onnx_model(case, host_run(case))
    except ConversionError:
        return None
    (got,) = ort_run(model, case.feeds)
    return got
