"""The runtime's Instruction: kernel outputs checked against shape inference, once per set of input shapes."""
from __future__ import annotations

import numpy as np
import pytest

import pdlite.kernels.host  # noqa: F401  (registers the host kernels)
import pdlite.operators  # noqa: F401  (registers the ops)
from pdlite.core.program import OpDesc
from pdlite.core.types import FP32, HOST
from pdlite.errors import KernelError
from pdlite.kernels.registry import KERNELS
from pdlite.operators.registry import OPS
from pdlite.runtime.instruction import Instruction


def _relu_instruction() -> Instruction:
    op = OPS["relu"].attach(OpDesc("relu", {"X": ["x"]}, {"Out": ["y"]}, {}))
    kd = next(d for k, d in KERNELS.items() if k.op_type == "relu" and k.target == HOST and k.precision == FP32)
    return Instruction(op, OPS["relu"], kd)


def test_outputs_are_checked_once_per_input_shapes():
    """The first run on a set of input shapes checks each output against shape inference (a kernel's wrong shape
    is a KernelError naming the op); later runs on the same shapes store the outputs unchecked; new input shapes
    are checked again."""
    inst = _relu_instruction()
    x = np.array([[-1.0, 2.0]], np.float32)
    scope = {"x": x}
    inst.run(scope)
    np.testing.assert_array_equal(scope["y"], [[0.0, 2.0]])
    inst.run(scope)  # the same shapes again: now marked checked
    assert inst._checked is inst._shape_cache

    real = inst.kernel.run
    inst.kernel.run = lambda ins: {"Out": [np.zeros((3,), np.float32)]}  # a kernel gone wrong
    scope2 = {"x": np.ones((2, 5), np.float32)}  # new shapes: checked
    with pytest.raises(KernelError, match=r"relu\(y\).*produced Out\[0\] \('y'\) of shape \[3\] but shape "
                                          r"inference says \[2, 5\]"):
        inst.run(scope2)
    inst.kernel.run = real
    inst.run(scope2)
    np.testing.assert_array_equal(scope2["y"], np.ones((2, 5), np.float32))
    assert inst._checked is inst._shape_cache  # (inferred in the failed run, checked and marked in this one)
    inst.kernel.run = lambda ins: {"Out": [np.zeros((3,), np.float32)]}
    inst.run(scope2)  # marked: stored unchecked (the kernels' output shapes follow from their input shapes)
    assert scope2["y"].shape == (3,)


def test_alternating_input_shapes_reuse_their_inference():
    """Shapes that alternate (a dynamic batch of 1..8 requests on clones that share instructions) infer shapes
    once each: the last RECENT_SHAPES sets are kept, with their checked mark."""
    from pdlite.kernels.registry import RECENT_SHAPES

    inst = _relu_instruction()
    calls = []
    real = inst.opdef.infer_shape
    inst.opdef = type(inst.opdef).__new__(type(inst.opdef))
    inst.opdef.__dict__.update(OPS["relu"].__dict__)
    object.__setattr__(inst.opdef, "infer_shape", lambda ctx: calls.append(1) or real(ctx))
    xs = [np.full((b, 3), -1.0, np.float32) for b in range(1, RECENT_SHAPES + 1)]
    for _ in range(3):
        for x in xs:
            scope = {"x": x}
            inst.run(scope)
            np.testing.assert_array_equal(scope["y"], np.zeros_like(x))
    assert len(calls) == len(xs)  # once per shape, not once per run
    assert inst._checked is inst._shape_cache  # the restored entry keeps its checked mark
    inst.run({"x": np.ones((RECENT_SHAPES + 9, 3), np.float32)})  # a new shape: inferred, the oldest dropped
    assert len(calls) == len(xs) + 1 and len(inst._recent) == RECENT_SHAPES


def test_small_instructions_are_marked_serial_by_their_work(monkeypatch):
    """Shape inference marks an instruction whose work (elements read and written, multiply-adds through a weight)
    is under SERIAL_WORK: RuntimeProgram.run runs those on one native thread; new input shapes decide again."""
    from pdlite.runtime import instruction
    from pdlite.runtime.instruction import SERIAL_WORK, work_estimate

    monkeypatch.setattr(instruction, "SPLIT_SMALL", True)  # off by default: then nothing is marked
    inst = _relu_instruction()
    inst.run({"x": np.ones((1, 64), np.float32)})
    assert inst.serial
    inst.run({"x": np.ones((1, SERIAL_WORK), np.float32)})  # reads and writes 2 * SERIAL_WORK elements
    assert not inst.serial
    # a 1x1 conv from 576 to 144 channels on a 1x1 map (a squeeze-and-excitation's): 576 + 144 + 83k weights +
    # 144 outputs * 576 multiply-adds; the same conv on a 7x7 map is 49x the multiply-adds
    w = np.zeros((144, 576, 1, 1), np.float32)
    se = work_estimate({"Input": [np.zeros((1, 576, 1, 1), np.float32)], "Filter": [w]}, {"Output": [(1, 144, 1, 1)]})
    assert se == 576 + w.size + 144 * 576
    big = work_estimate({"Input": [np.zeros((1, 576, 7, 7), np.float32)], "Filter": [w]}, {"Output": [(1, 144, 7, 7)]})
    assert big == 576 * 49 + w.size + 144 * 49 * 576
    assert se < SERIAL_WORK < big
    fc = work_estimate({"Input": [np.zeros((2, 100), np.float32)], "W": [np.zeros((100, 10), np.float32)]},
                       {"Out": [(2, 10)]})
    assert fc == 200 + 1000 + 20 * 100
