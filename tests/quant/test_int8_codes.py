"""int8 codes between ops on the PTQ models (optimizer/passes/quant_codes.py).

The passes make depthwise convs integer (quant_dwconv_int8_pass) and let integer convs hand each other int8 codes
(uint8 tensors) instead of floats (quant_codes_pass). The codes path must give the SAME bits as the float-between
path (`host_int8_codes` False: the same integer ops, floats between them, each reader quantizing): asserted with
array_equal on every PTQ fixture; where edges carry codes, the tensors between ops are uint8 and the pass counts
say what was rewritten. Accuracy against Paddle's reference stays test_int8_host.py's (it runs the default, codes on).
"""
from __future__ import annotations

import numpy as np
import pytest

from pdlite.api.config import CxxConfig
from pdlite.api.predictor import create_paddle_predictor
from pdlite.kernels.host import quant_native as qn
from tests.quant._util import ROOT, case

MODELS = sorted(p.name for p in ROOT.glob("ptq_*_qdq") if (p / "case.npz").is_file())
needs_native = pytest.mark.skipif(not qn.available(), reason="native int8 kernels unavailable in this build "
                                  "(python setup.py build_ext --inplace compiles them)")


@pytest.fixture(autouse=True)
def _native_on() -> None:
    """Codes between ops are a native-kernel form: under `--host-numpy` (the NumPy kernels) the passes rightly leave
    the program alone, so there is nothing here to check."""
    from pdlite.kernels.host import native

    if not native.DEFAULT_ON:
        pytest.skip("the host runs its NumPy kernels (--host-numpy): codes between ops are a native-kernel form")


def _predictor(name: str, codes: bool, threads: int = 1):
    c = CxxConfig()
    c.set_model_dir(ROOT / name)
    c.set_threads(threads)
    c.set_option("host_int8_codes", codes)
    return create_paddle_predictor(c)


def _outputs(p, ins: dict[str, np.ndarray]) -> list[np.ndarray]:
    out = p.predict(ins)
    return [np.asarray(v) for v in (out.values() if isinstance(out, dict) else out)]


@needs_native
@pytest.mark.parametrize("name", MODELS)
def test_codes_between_ops_are_bit_identical_to_floats_between(name: str) -> None:
    ins, _, _ = case(ROOT / name)
    a, b = _predictor(name, True), _predictor(name, False)
    for _ in range(2):  # (the second run: the runtime's steady path)
        for x, y in zip(_outputs(a, ins), _outputs(b, ins)):
            np.testing.assert_array_equal(x, y)


def _codes_ops(p) -> tuple[int, int, int]:
    """(writers of codes, readers of codes, depthwise integer convs) in the runtime program."""
    ops = [i.op for i in p.runtime_program.instructions if i.op.type == "quantized_conv2d"]
    return (sum(float(o.attrs.get("code_scale", 0)) > 0 for o in ops), sum(bool(o.attrs.get("in_codes")) for o in ops),
            sum(int(o.attrs.get("groups") or 1) > 1 for o in ops))


@needs_native
@pytest.mark.parametrize("name,depthwise", [("ptq_cnn_qdq", 1), ("ptq_ppocr_det_qdq", 1), ("ptq_res_qdq", 0)])
def test_the_passes_mark_codes_edges(name: str, depthwise: int) -> None:
    p = _predictor(name, True)
    writers, readers, dws = _codes_ops(p)
    assert writers >= 1 and readers >= writers, (writers, readers)
    assert (dws > 0) == bool(depthwise), dws
    assert _codes_ops(_predictor(name, False))[:2] == (0, 0)
    # the tensors between the ops are the codes (uint8); every reader of one reads it as codes
    ins, _, _ = case(ROOT / name)
    seen: dict[str, np.dtype] = {}
    for ins_ in p.runtime_program.instructions:
        run = ins_.kernel.run

        def spy(feeds, run=run, op=ins_.op):
            out = run(feeds)
            if op.type == "quantized_conv2d":
                seen[op.output("Output")] = out["Output"][0].dtype
                assert (feeds["Input"][0].dtype == np.uint8) == bool(op.attrs.get("in_codes")), op.input("Input")
            return out

        ins_.kernel.run = spy
    p.predict(ins)
    writes = [i.op for i in p.runtime_program.instructions if float(i.op.attrs.get("code_scale", 0)) > 0]
    assert all(seen[o.output("Output")] == np.uint8 for o in writes)

