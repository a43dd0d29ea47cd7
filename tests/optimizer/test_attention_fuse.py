"""attention_fuse_pass: the q / k / v split .. softmax .. heads side by side -> fused_attention; refusals."""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.core.types import Place, TargetType
from tests.conftest import model_dir
from tests.optimizer.util import Builder, check_same, op_types, optimize, refusals, rewrites, with_passes

RNG = np.random.default_rng(3)
PASSES = with_passes("attention_fuse_pass")


def _attention(b: int = 2, s: int = 7, h: int = 3, d: int = 5, *, kind: str = "matmul_v2", scale: float | None = None,
               alpha: float = 1.0, softmax_axis: int = -1, fetch_scores: bool = False) -> tuple[Builder, dict]:
    """qkv (b, s, 3 h d) fed, the encoder's chain after fc_siblings_fuse_pass, its output through a relu."""
    bld = Builder()
    x = bld.feed("qkv", [b, s, 3 * h * d])
    bld.op("split", {"X": x}, {"Out": ["q", "k", "v"]}, axis=2, num=0, sections=[h * d] * 3)
    for n in "qkv":
        bld.op("reshape2", {"X": n}, {"Out": f"{n}4", "XShape": f"{n}4s"}, shape=[0, 0, h, d])
        bld.op("transpose2", {"X": f"{n}4"}, {"Out": f"{n}t", "XShape": f"{n}ts"}, axis=[0, 2, 1, 3])
    if kind == "matmul_v2":
        bld.op("matmul_v2", {"X": "qt", "Y": "kt"}, {"Out": "sc"}, trans_x=False, trans_y=True)
    else:
        bld.op("matmul", {"X": "qt", "Y": "kt"}, {"Out": "sc"}, transpose_X=False, transpose_Y=True, alpha=alpha)
    src = "sc"
    if scale is not None:
        bld.op("scale", {"X": "sc"}, {"Out": "scs"}, scale=scale, bias=0.0, bias_after_scale=True)
        src = "scs"
    bld.op("softmax", {"X": src}, {"Out": "p"}, axis=softmax_axis)
    bld.op("matmul_v2", {"X": "p", "Y": "vt"}, {"Out": "o"}, trans_x=False, trans_y=False)
    bld.op("transpose2", {"X": "o"}, {"Out": "ot", "XShape": "ots"}, axis=[0, 2, 1, 3])
    bld.op("reshape2", {"X": "ot"}, {"Out": "att", "XShape": "atts"}, shape=[0, 0, h * d])
    bld.op("relu", {"X": "att"}, {"Out": "out"})
    bld.fetch("out", *(["sc"] if fetch_scores else []))
    feeds = {"qkv": RNG.standard_normal((b, s, 3 * h * d)).astype(np.float32)}
    bld.set_shapes(feeds)
    return bld, feeds


@pytest.mark.parametrize("shape,kind,scale,alpha", [
    ((2, 7, 3, 5), "matmul_v2", None, 1.0),      # odd sizes: tiles' row and column tails
    ((1, 32, 4, 32), "matmul_v2", None, 1.0),    # the transformer encoder's
    ((1, 20, 2, 16), "matmul_v2", 0.25, 1.0),    # a scale of the scores
    ((3, 17, 2, 8), "matmul", 0.5, 0.125),      # legacy matmul's alpha and a scale
])
def test_attention_becomes_one_op_within_fp32_rounding(shape, kind, scale, alpha):
    """The 13 ops become one fused_attention (alpha the matmul's times the scale's), its output within 1e-5 *
    max|ref| of the unfused ops (the scores summed in the kernel's order, not the BLAS's)."""
    b, feeds = _attention(*shape, kind=kind, scale=scale, alpha=alpha)
    res = check_same(b, feeds, PASSES, rel=1e-5)
    assert rewrites(res, "attention_fuse_pass") == 1
    assert op_types(res) == ["fused_attention", "relu"]
    (node,) = [n for n in res.graph.op_nodes() if n.op.type == "fused_attention"]
    assert node.op.attrs["head_number"] == shape[2]
    assert node.op.attrs["alpha"] == pytest.approx(alpha * (1.0 if scale is None else scale))
    res.graph.lint()


@pytest.mark.parametrize("case,reason", [
    ({"softmax_axis": 2}, "softmax"),
    ({"fetch_scores": True}, "fetched"),
])
def test_attention_refusals(case, reason):
    """A softmax over another axis, or an intermediate fetched: not fused, the reason recorded."""
    b, feeds = _attention(**case)
    res = check_same(b, feeds, PASSES, rel=1e-6)
    assert rewrites(res, "attention_fuse_pass") == 0 and "fused_attention" not in op_types(res)
    assert any(reason in r for r in refusals(res, "attention_fuse_pass")), refusals(res, "attention_fuse_pass")


def test_attention_is_left_to_devices():
    """Programs for other places keep the unfused ops (their converters know those)."""
    b, _ = _attention()
    res = optimize(b, PASSES, [Place(TargetType.NNAdapter)])
    assert "fused_attention" not in op_types(res)


def test_attention_and_skip_layernorm_on_the_transformer_encoder():
    """The shared transformer_encoder (2 layers, 4 heads of 32, 32 tokens): 2 fused_attention and 4 skip_layernorm
    ops; outputs within 1e-5 of Paddle's reference and of the program run without the two passes."""
    from tests.optimizer.util import run_model_case

    model = model_dir("transformer_encoder")  # the repo's fixture copy (or ../shared's); skips if neither
    case = np.load(model / "case.npz")
    outs, types = [], []
    for deleted in ((), ("attention_fuse_pass", "skip_layernorm_fuse_pass")):
        t, o = run_model_case(model, deleted)
        types.append(t)
        outs.append(o)
    assert types[0].count("fused_attention") == 2 and types[0].count("skip_layernorm") == 4
    assert "softmax" not in types[0] and "matmul_v2" not in types[0] and "transpose2" not in types[0]
    assert types[1].count("softmax") == 2 and "fused_attention" not in types[1]
    assert len(types[0]) == len(types[1]) - 2 * 11 - 4  # 12 ops -> 1 per layer, 2 -> 1 per residual norm
    for k, got in outs[0].items():
        ref = case[k]
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
        assert np.abs(got - outs[1][k]).max() <= 1e-5 * np.abs(ref).max()
