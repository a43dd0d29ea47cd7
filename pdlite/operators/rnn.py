"""The rnn op (Paddle's cuDNN-style multi-layer LSTM / GRU / simple RNN): shapes per Paddle's RnnInferMeta."""
from __future__ import annotations

from pdlite.operators.registry import Shape, ShapeContext, register_op

Shapes = dict[str, list[Shape]]

RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


@register_op("rnn", inputs=["Input", "WeightList"], outputs=["Out"], optional_inputs=["PreState", "SequenceLength"],
             optional_outputs=["State", "Reserve", "DropoutState"],
             defaults={"dropout_prob": 0.0, "is_bidirec": False, "input_size": 10, "hidden_size": 100,
                       "num_layers": 1, "mode": "RNN_TANH", "seed": 0, "is_test": True})
def _rnn(ctx: ShapeContext) -> Shapes:
    x = ctx.shape("Input")
    ctx.require(len(x) == 3, f"Input must be [time, batch, features], got {list(x)}")
    mode = ctx.attrs["mode"]
    ctx.require(mode in RNN_GATES, f"mode {mode!r} is not one of {sorted(RNN_GATES)}")
    dirs = 2 if ctx.attrs["is_bidirec"] else 1
    hidden, layers = int(ctx.attrs["hidden_size"]), int(ctx.attrs["num_layers"])
    ctx.require(ctx.count("WeightList") == 4 * layers * dirs,
                f"WeightList has {ctx.count('WeightList')} tensors, expected {4 * layers * dirs}")
    state = (layers * dirs, x[1], hidden)
    return {"Out": [(x[0], x[1], dirs * hidden)], "State": [state] * len(ctx.op.outputs.get("State") or [])}
