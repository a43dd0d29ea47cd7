"""Conformance-zoo cases for control flow (issue #11; see make_conformance_models.py).

`define(m)` registers the cases with the generator module `m`. Written from Paddle's definitions
(paddle/fluid/operators/controlflow: while runs its block while Condition holds, conditional_block
once when Cond holds, select_input picks X[Mask]; the tensor-array ops), built with Paddle's own
static control-flow API (`paddle.static.nn.cond` / `while_loop`, `paddle.tensor.array_*`), so the
legacy programs hold the ops Paddle itself emits (cond is built as Paddle's legacy `cond` builds it,
conditional_block per branch + select_input, since `paddle.static.nn.cond` no longer runs in
legacy-static mode under Paddle 3.3):
- cf_cond_branches: two conds on feed values, one taken, one not (each branch with other ops), one
  of them with two results: conditional_block + select_input, both branches' paths.
- cf_while_sum: a loop whose trip count is a feed value, summing with a counter advanced by
  `increment` (less_than, while, loop-carried tensors).
- cf_while_array: a loop writing rows into a tensor array, then stacked, concatenated, read back by
  index and measured (write_to_array, read_from_array, lod_array_length, tensor_array_to_tensor).
- cf_cond_in_loop: a cond nested in a loop body, taking each branch on alternate iterations.
"""
from __future__ import annotations

from typing import Any


def _cond(m: Any, pred: Any, true_fn: Any, false_fn: Any) -> Any:
    """Paddle's legacy cond: a conditional_block per branch, each assigning its results to parent
    vars, and select_input(X=[false, true], Mask=cast(pred, int32)) per result."""
    import paddle
    from paddle.base.layer_helper import LayerHelper
    from paddle.static.nn.control_flow import ConditionalBlock, copy_var_to_parent_block

    helper = LayerHelper("cond")
    not_pred = m._op("logical_not", {"X": pred}, outs={"Out": "bool"})
    branches = []
    for p, fn in ((pred, true_fn), (not_pred, false_fn)):
        cb = ConditionalBlock([p], is_scalar_condition=True)
        with cb.block():
            outs = fn()
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            parents = []
            for o in outs:
                parent = copy_var_to_parent_block(o, helper)
                helper.main_program.current_block().append_op(type="assign", inputs={"X": [o]},
                                                               outputs={"Out": [parent]})
                parents.append(parent)
        branches.append(parents)
    mask = m._op("cast", {"X": pred}, {"in_dtype": paddle.base.core.VarDesc.VarType.BOOL,
                                       "out_dtype": paddle.base.core.VarDesc.VarType.INT32}, {"Out": "int32"})
    res = [m._op("select_input", {"X": [f, t], "Mask": mask}, {}, {"Out": t.dtype})
           for t, f in zip(branches[0], branches[1])]
    return res[0] if len(res) == 1 else res


def define(m: Any) -> None:
    import paddle

    model, F32 = m.model, m.F32
    while_loop = paddle.static.nn.while_loop

    def cond(pred: Any, true_fn: Any, false_fn: Any) -> Any:
        return _cond(m, pred, true_fn, false_fn)

    @model("cf_cond_branches", ("x", [2, 3], F32, None))
    def _(x):
        s = paddle.mean(x)
        taken = cond(s > -100.0, lambda: m.u("relu", x) * 2.0, lambda: m.u("tanh", x) - 1.0)
        a, b = cond(s > 100.0, lambda: (x + 1.0, m.red("reduce_sum", x, [1])),
                    lambda: (m.u("exp", x) * 0.5, m.red("reduce_max", x, [1])))
        return [taken, a, b]

    @model("cf_while_sum", ("x", [3], F32, None), ("n", [1], "int64", (2, 7)))
    def _(x, n):
        i = paddle.zeros([1], "int64")
        acc = paddle.zeros([3], F32)

        def body(i, acc):
            acc = acc + x * paddle.cast(i, F32)
            return [paddle.increment(i), acc]

        i, acc = while_loop(lambda i, acc: i < n, body, [i, acc])
        return [acc, i]

    @model("cf_while_array", ("x", [4, 3], F32, None))
    def _(x):
        arr = paddle.tensor.create_array(F32)
        i = paddle.zeros([1], "int64")
        limit = paddle.full([1], 4, "int64")

        def body(i):
            row = paddle.gather(x, i) * (paddle.cast(i, F32) + 1.0)
            paddle.tensor.array_write(row, i, array=arr)
            return [paddle.increment(i)]

        while_loop(lambda i: i < limit, body, [i])
        stacked, _ = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=1, use_stack=True)
        concat, _ = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=0)  # OutIndex: Paddle
        # Inference leaves it unset when fetched
        second = paddle.tensor.array_read(arr, paddle.full([1], 2, "int64"))
        return [stacked, concat, second, paddle.tensor.array_length(arr)]

    @model("cf_cond_in_loop", ("x", [2, 2], F32, None))
    def _(x):
        i = paddle.zeros([1], "int64")
        acc = paddle.assign(x)
        two = paddle.full([1], 2, "int64")

        def body(i, acc):
            even = paddle.equal(paddle.remainder(i, two), paddle.zeros([1], "int64"))
            acc = cond(paddle.reshape(even, []), lambda: acc * 0.5 + 1.0, lambda: acc - m.u("abs", x))
            return [paddle.increment(i), acc]

        i, acc = while_loop(lambda i, acc: i < paddle.full([1], 5, "int64"), body, [i, acc])
        return [acc]
