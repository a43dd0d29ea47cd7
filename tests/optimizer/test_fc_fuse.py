"""fc_fuse_pass: mul / matmul / matmul_v2 + bias (+ activation) -> fc; refusals."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import model_dir
from tests.optimizer.util import Builder, check_same, op_types, optimize, refusals, rewrites, run, with_passes

RNG = np.random.default_rng(1)


def _mm(b: Builder, kind: str, x: str, w: str, out: str, **attrs) -> None:
    if kind == "mul":
        attrs.setdefault("x_num_col_dims", 1)
        attrs.setdefault("y_num_col_dims", 1)
    b.op(kind, {"X": x, "Y": w}, {"Out": out}, **attrs)


@pytest.mark.parametrize("kind,xshape,attrs,k", [
    ("matmul_v2", [2, 8], {"trans_x": False, "trans_y": False}, 1),
    ("matmul_v2", [2, 3, 8], {"trans_x": False, "trans_y": False}, 2),
    ("matmul", [2, 8], {"transpose_X": False, "transpose_Y": False, "alpha": 1.0}, 1),
    ("mul", [2, 2, 2, 2], {"x_num_col_dims": 1}, 1),
    ("mul", [2, 3, 8], {"x_num_col_dims": 2}, 2),
])
@pytest.mark.parametrize("act", ["", "relu", "gelu"])
def test_fc(kind, xshape, attrs, k, act):
    b = Builder()
    x = b.feed("x", xshape)
    w = b.param("w", RNG.standard_normal((8, 5)).astype(np.float32))
    bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
    _mm(b, kind, x, w, "y", **attrs)
    b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "z" if act else "out"}, axis=-1)
    if act:
        b.op(act, {"X": "z"}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal(xshape).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    assert op_types(res) == ["fc"] and rewrites(res, "fc_fuse_pass") == 1
    (node,) = res.graph.op_nodes()
    assert node.op.attrs["in_num_col_dims"] == k and node.op.attrs["activation_type"] == act
    assert node.op.inputs == {"Input": ["x"], "W": ["w"], "Bias": ["bias"]}


def test_fc_bias_2d_is_stored_as_a_vector():
    b = Builder()
    x = b.feed("x", [3, 8])
    w = b.param("w", RNG.standard_normal((8, 5)).astype(np.float32))
    bias = b.param("bias", RNG.standard_normal((1, 5)).astype(np.float32))
    b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"})
    b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"}, axis=-1)
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((3, 8)).astype(np.float32)}
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    (node,) = res.graph.op_nodes()
    assert res.ctx.params[node.op.input("Bias")].shape == (5,)


@pytest.mark.parametrize("case", ["trans_y", "bias_on_rows", "weight_3d", "no_bias_param", "alpha"])
def test_fc_refusals(case):
    b = Builder()
    x = b.feed("x", [5, 8])
    wshape = (2, 8, 5) if case == "weight_3d" else ((5, 8) if case == "trans_y" else (8, 5))
    w = b.param("w", RNG.standard_normal(wshape).astype(np.float32))
    if case == "trans_y":
        b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"}, trans_y=True)
    elif case == "alpha":
        b.op("matmul", {"X": x, "Y": w}, {"Out": "y"}, alpha=2.0)
    else:
        b.op("matmul_v2", {"X": x, "Y": w}, {"Out": "y"})
    if case == "bias_on_rows":
        bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
        b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"}, axis=0)
    elif case == "no_bias_param":
        other = b.feed("other", [5])
        b.op("elementwise_add", {"X": "y", "Y": other}, {"Out": "out"})
    else:
        bias = b.param("bias", RNG.standard_normal(5).astype(np.float32))
        b.op("elementwise_add", {"X": "y", "Y": bias}, {"Out": "out"})
    b.fetch("out")
    feeds = {"x": RNG.standard_normal((5, 8)).astype(np.float32)}
    if case == "no_bias_param":
        feeds["other"] = RNG.standard_normal(5).astype(np.float32)
    b.set_shapes(feeds)
    res = check_same(b, feeds, with_passes("fc_fuse_pass"))
    assert "fc" not in op_types(res)
    if case != "no_bias_param":
        assert sum(refusals(res, "fc_fuse_pass").values()) >= 1


def _siblings(n_cols: tuple[int, ...], acts: tuple[str, ...] | None = None, rows: tuple[int, ...] | None = None,
              bias: bool = True, xshape: tuple[int, ...] = (2, 6, 8), k: int = 2) -> tuple[Builder, dict]:
    """fc ops reading x (each with its W of rows[i] x n_cols[i] and act acts[i]), each output through a relu
    and fetched; an extra reader of x (a scale) to keep x shared with another op."""
    b = Builder()
    x = b.feed("x", list(xshape))
    for i, n in enumerate(n_cols):
        r = rows[i] if rows else xshape[-1]
        src = x if r == xshape[-1] else b.op("reshape2", {"X": x}, {"Out": f"x{i}"}, shape=[2, -1]).output("Out")
        ins = {"Input": src, "W": b.param(f"w{i}", RNG.standard_normal((r, n)).astype(np.float32))}
        if bias:
            ins["Bias"] = b.param(f"b{i}", RNG.standard_normal(n).astype(np.float32))
        b.op("fc", ins, {"Out": f"y{i}"}, in_num_col_dims=k if r == xshape[-1] else 1,
             activation_type=acts[i] if acts else "")
        b.op("relu", {"X": f"y{i}"}, {"Out": f"out{i}"})
    b.op("scale", {"X": x}, {"Out": "s"}, scale=2.0, bias=0.0, bias_after_scale=True)
    b.fetch(*(f"out{i}" for i in range(len(n_cols))), "s")
    feeds = {"x": RNG.standard_normal(xshape).astype(np.float32)}
    b.set_shapes(feeds)
    return b, feeds


@pytest.mark.parametrize("bias", [True, False])
def test_fc_siblings_become_one_fc_and_a_split(bias):
    """q / k / v-like fc ops on one input: one fc over [W0 W1 W2] (biases end to end) and a split of its last axis
    into the old outputs, bit-equal on the native path (each column's sums as alone), else within 1e-6."""
    b, feeds = _siblings((5, 7, 3), bias=bias)
    ref, _ = run(b, feeds, with_passes("fc_fuse_pass"))
    got, res = run(b, feeds, with_passes("fc_fuse_pass", "fc_siblings_fuse_pass"))
    assert rewrites(res, "fc_siblings_fuse_pass") == 1
    assert sorted(op_types(res)) == sorted(["fc", "split", "relu", "relu", "relu", "scale"])
    (fc,) = [n for n in res.graph.op_nodes() if n.op.type == "fc"]
    (split,) = [n for n in res.graph.op_nodes() if n.op.type == "split"]
    w = res.ctx.params[fc.op.input("W")]
    np.testing.assert_array_equal(w, np.concatenate([b.params[f"w{i}"] for i in range(3)], axis=1))
    if bias:
        np.testing.assert_array_equal(res.ctx.params[fc.op.input("Bias")],
                                      np.concatenate([b.params[f"b{i}"] for i in range(3)]))
    else:
        assert fc.op.input("Bias") is None
    assert split.op.attrs["axis"] == 2 and list(split.op.attrs["sections"]) == [5, 7, 3]
    assert split.op.outputs["Out"] == ["y0", "y1", "y2"]
    assert fc.op.attrs["in_num_col_dims"] == 2
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=1e-6 * float(np.abs(r).max()))
    res.graph.lint()


def test_fc_siblings_group_by_attributes_and_rows():
    """Only fc ops with the same attributes and W rows fuse: two relu fc's fuse, a plain one and one reading a
    reshaped x (another input) stay."""
    b, feeds = _siblings((4, 6, 5, 3), acts=("relu", "relu", "", ""), rows=(8, 8, 8, 48))
    res = check_same(b, feeds, with_passes("fc_siblings_fuse_pass"), rel=1e-6)
    assert rewrites(res, "fc_siblings_fuse_pass") == 1
    fcs = [n for n in res.graph.op_nodes() if n.op.type == "fc"]
    assert sorted(int(res.ctx.params[n.op.input("W")].shape[1]) for n in fcs) == [3, 5, 10]
    (split,) = [n for n in res.graph.op_nodes() if n.op.type == "split"]
    assert split.op.outputs["Out"] == ["y0", "y1"]


def test_fc_sibling_refusals():
    """A lone fc, and a W that is not a 2-D float32 param, are left alone (the latter counted as refused)."""
    b, feeds = _siblings((4,))
    res = check_same(b, feeds, with_passes("fc_siblings_fuse_pass"))
    assert rewrites(res, "fc_siblings_fuse_pass") == 0 and "split" not in op_types(res)
    b, feeds = _siblings((4, 5))
    b.params["w1"] = b.params["w1"].astype(np.float64)
    res = optimize(b, with_passes("fc_siblings_fuse_pass"))
    assert rewrites(res, "fc_siblings_fuse_pass") == 0
    assert refusals(res, "fc_siblings_fuse_pass") == {"W is not a 2-D float32 param": 1}


def test_fc_siblings_on_the_transformer_encoder():
    """The shared transformer_encoder's q / k / v projections (3 fc of 128 -> 128 per layer, 2 layers): two fused
    fc's of 384 columns; the outputs within 1e-5 of Paddle's reference and within 1e-6 of the program run without
    the pass."""
    from tests.optimizer.util import run_model_case

    model = model_dir("transformer_encoder")  # the repo's fixture copy (or ../shared's); skips if neither
    case = np.load(model / "case.npz")
    outs, types = [], []
    # attention_fuse_pass off in both runs (it takes the split: tests/optimizer/test_attention_fuse.py)
    for deleted in (("attention_fuse_pass",), ("attention_fuse_pass", "fc_siblings_fuse_pass")):
        t, o = run_model_case(model, deleted)
        types.append(t)
        outs.append(o)
    assert types[0].count("split") == 2 and types[0].count("fc") == 2 * 4 + 1
    assert types[1].count("split") == 0 and types[1].count("fc") == 2 * 6 + 1
    for k, got in outs[0].items():
        ref = case[k]
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
        # the fused 32 x 128 @ 128 x 384 and the unfused 128-column fc's are all past FC_PACKED_MIN (kernels/host/
        # fused.py) and run on the packed tiles (the same sums) where those are fast; elsewhere the BLAS's order
        assert np.abs(got - outs[1][k]).max() <= 1e-6 * np.abs(ref).max()


def _fc_then_scale(case: str) -> tuple[Builder, dict]:
    """fc (x [2, 6, 8] @ W [8, 12] + b) -> reshape2 [2, 6, 3, 4] -> transpose2 -> scale 0.17 -> relu, fetched; the
    variants of `case` break one condition of fc_scale_fuse_pass."""
    b = Builder()
    x = b.feed("x", [2, 6, 8])
    w = b.param("w", RNG.standard_normal((8, 12)).astype(np.float32))
    bias = b.param("b", RNG.standard_normal(12).astype(np.float32))
    b.op("fc", {"Input": x, "W": w, "Bias": bias}, {"Out": "y"}, in_num_col_dims=2,
         activation_type="relu" if case == "fc_act" else "")
    src = "y"
    if case != "direct":
        b.op("reshape2", {"X": "y"}, {"Out": "r", "XShape": "r_xs"}, shape=[2, 6, 3, 4])
        b.op("transpose2", {"X": "r"}, {"Out": "t", "XShape": "t_xs"}, axis=[0, 2, 1, 3])
        src = "t"
    b.op("scale", {"X": src}, {"Out": "s"}, scale=0.17, bias=0.5 if case == "bias" else 0.0, bias_after_scale=True)
    b.op("relu", {"X": "s"}, {"Out": "out"})
    b.fetch("out")
    if case == "read_elsewhere":
        b.fetch("r")
    feeds = {"x": RNG.standard_normal((2, 6, 8)).astype(np.float32)}
    b.set_shapes(feeds)
    return b, feeds


@pytest.mark.parametrize("case", ["layout_ops", "direct"])
def test_fc_scale_folds_into_the_weights(case):
    """s * fc(x), directly or through reshape2 / transpose2 (attention's q / sqrt(d)): the scale is gone, the fc
    holds s * W and s * b (new params, the products in float64), outputs within 1e-6 of the unfused program."""
    b, feeds = _fc_then_scale(case)
    res = check_same(b, feeds, with_passes("fc_scale_fuse_pass"), rel=1e-6)
    assert rewrites(res, "fc_scale_fuse_pass") == 1 and "scale" not in op_types(res)
    (fc,) = [n for n in res.graph.op_nodes() if n.op.type == "fc"]
    for slot, name in (("W", "w"), ("Bias", "b")):
        want = (b.params[name].astype(np.float64) * 0.17).astype(np.float32)
        np.testing.assert_array_equal(res.ctx.params[fc.op.input(slot)], want)
    res.graph.lint()


@pytest.mark.parametrize("case,reason", [
    ("bias", "the scale adds a bias"),
    ("fc_act", "the fc has an activation"),
    ("read_elsewhere", "the scale's input is read elsewhere, fetched or written in place"),
])
def test_fc_scale_refusals(case, reason):
    b, feeds = _fc_then_scale(case)
    res = check_same(b, feeds, with_passes("fc_scale_fuse_pass"), rel=1e-6)
    assert rewrites(res, "fc_scale_fuse_pass") == 0 and "scale" in op_types(res)
    assert refusals(res, "fc_scale_fuse_pass") == {reason: 1}
