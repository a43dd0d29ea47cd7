"""pdlite-opt --quant_model true --quant_type QUANT_INT8|QUANT_INT16: weight-only quantization.

Checks: the .nb stores conv / fc / matmul weights as int8 / int16 (a smaller file), the loaded model
dequantizes them once at prepare, and its outputs stay within the quantization error of the float model:
max|got - ref| <= 2e-2 * max|ref| for int8 and 1e-4 * max|ref| for int16 (per-channel abs-max weights
move each weight by at most s/254 resp. s/65534); ppocr_cls keeps its class.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdlite import create_paddle_predictor
from pdlite.api.mobile import MobileConfig
from pdlite.tools.opt import main as opt_main
from tests.quant._util import max_rel_err

FIX = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = {"conv_variants": FIX / "conformance" / "conv_variants", "fc_linear": FIX / "conformance" / "fc_linear",
          "attention_block": FIX / "conformance" / "attention_block", "ppocr_cls_v2": FIX / "models" / "ppocr_cls_v2"}
TOL = {"QUANT_INT8": 2e-2, "QUANT_INT16": 1e-4}


def _nb(model: Path, out: Path, *quant: str) -> Path:
    assert opt_main(["--model_dir", str(model), "--optimize_out", str(out), "--quiet", *quant]) == 0
    return out.with_suffix(".nb")


def _run(nb: Path, ins: dict[str, np.ndarray]):
    cfg = MobileConfig()
    cfg.set_model_from_file(str(nb))
    pred = create_paddle_predictor(cfg)
    return pred, dict(zip(pred.get_output_names(), pred.predict({k: v.copy() for k, v in ins.items()})))


@pytest.mark.parametrize("quant_type", sorted(TOL))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_weight_quantized_nb(name: str, quant_type: str, tmp_path: Path) -> None:
    z = np.load(MODELS[name] / "case.npz")
    ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
    ref = {k[4:]: z[k] for k in z.files if k.startswith("out:")}
    fp32 = _nb(MODELS[name], tmp_path / "fp32")
    q = _nb(MODELS[name], tmp_path / "q", "--quant_model", "true", "--quant_type", quant_type)
    pred, got = _run(q, ins)
    dq = [i.kernel for i in pred.runtime_program.instructions if i.op.type == "dequantize_linear"]
    assert dq, "no weight was quantized"
    assert all(k._weight is not None for k in dq), "weights must be dequantized once, at prepare"
    want = np.int8 if quant_type == "QUANT_INT8" else np.int16
    from pdlite.model_parser.naive_buffer import load_naive_buffer

    params = load_naive_buffer(q).params
    ints = [n for n in params if n.endswith(f"@{quant_type.lower()}")]
    assert len(ints) == len(dq) and all(np.asarray(params[n]).dtype == want for n in ints)
    if name == "ppocr_cls_v2":  # a model whose weights dominate the file
        ratio = q.stat().st_size / fp32.stat().st_size
        assert ratio < (0.5 if quant_type == "QUANT_INT8" else 0.7), f".nb size ratio {ratio:.2f}"
    for k, r in ref.items():
        assert max_rel_err(got[k], r) <= TOL[quant_type], f"{name} {k}: {max_rel_err(got[k], r):.3g}"
        if name == "ppocr_cls_v2":
            assert np.array_equal(got[k].argmax(-1), r.argmax(-1))


def test_bad_quant_type_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        opt_main(["--model_dir", str(MODELS["fc_linear"]), "--optimize_out", str(tmp_path / "x"),
                  "--quant_model", "true", "--quant_type", "QUANT_INT4"])
    assert "QUANT_INT4" in capsys.readouterr().err
