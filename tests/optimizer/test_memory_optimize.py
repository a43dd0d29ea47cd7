"""memory_optimize_pass: lifetimes, release points, the shared-buffer plan, and the runtime honouring it."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pdlite.errors import PdliteError
from pdlite.optimizer.passes.memory_optimize import plan_memory
from tests.optimizer.util import BASE, Builder, optimize, run_result

RNG = np.random.default_rng(5)
MEM = [*BASE, "memory_optimize_pass"]


def test_plan_on_a_chain_shares_two_buffers():
    # x -> a -> b -> c -> d -> out, each intermediate 100 bytes; out is fetched
    steps = [(["x"], ["a"]), (["a"], ["b"]), (["b"], ["c"]), (["c"], ["d"]), (["d"], ["out"])]
    plan = plan_memory(steps, lambda n: n not in ("x", "out"), lambda n: 100)
    assert plan.release == [[], ["a"], ["b"], ["c"], ["d"]]
    assert plan.lifetime == {"a": (0, 1), "b": (1, 2), "c": (2, 3), "d": (3, 4)}
    assert plan.bytes_no_reuse == 400 and plan.bytes_shared_buffers == 200 and plan.peak_live_bytes == 200
    assert plan.buffer_of["a"] == plan.buffer_of["c"] != plan.buffer_of["b"] == plan.buffer_of["d"]


def test_plan_with_branches_unused_outputs_and_best_fit():
    steps = [(["x"], ["a"]), (["a"], ["b"]), (["a", "b"], ["c"]), (["c"], ["out", "unused"])]
    size = {"a": 100, "b": 50, "c": 100, "unused": 10}
    plan = plan_memory(steps, lambda n: n in size, size.__getitem__)
    assert plan.release == [[], [], ["a", "b"], ["c", "unused"]]
    assert plan.peak_live_bytes == 250
    # c cannot take a's or b's buffer (they are its inputs); `unused` takes b's (best fit)
    assert plan.buffer_of["unused"] == plan.buffer_of["b"] and plan.bytes_shared_buffers == 250
    assert plan.bytes_no_reuse == 260


def _chain(n_ops: int = 8, size: int = 1 << 18) -> tuple[Builder, dict[str, np.ndarray]]:
    b = Builder()
    x = b.feed("x", [1, size])
    prev = x
    acts = ["relu", "sigmoid", "tanh", "abs"]
    for i in range(n_ops):
        b.op(acts[i % len(acts)], {"X": prev}, {"Out": f"t{i}"})
        prev = f"t{i}"
    b.fetch(prev)
    for i in range(n_ops):
        b.block.vars[f"t{i}"].shape = [-1, size]
    return b, {"x": RNG.standard_normal((1, size)).astype(np.float32)}


def test_runtime_drops_intermediates_and_outputs_are_unchanged():
    b, feeds = _chain()
    res = optimize(b, MEM)
    plan = res.ctx.meta["memory_plan"]
    assert plan["tensors"] == 7 and plan["bytes_no_reuse"] == 7 * 4 * (1 << 18)
    assert plan["bytes_shared_buffers"] == 2 * 4 * (1 << 18) and plan["peak_live_bytes"] == 2 * 4 * (1 << 18)
    scope = run_result(res, feeds, keep_scope=True)
    assert not any(f"t{i}" in scope for i in range(7)), "every intermediate was released"
    ref = run_result(optimize(b, BASE), feeds)
    np.testing.assert_array_equal(scope["t7"], ref[0])


def _peak(res, feeds) -> int:
    res.runtime.prepare(res.ctx.params)
    tracemalloc.start()
    try:
        scope = dict(res.ctx.params)
        scope.update(feeds)
        res.runtime.run(scope)
        del scope
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_traced_memory_really_falls():
    b, feeds = _chain(n_ops=10, size=1 << 18)  # 1 MiB per intermediate
    without = _peak(optimize(b, BASE), feeds)
    with_plan = _peak(optimize(b, MEM), feeds)
    assert without >= 10 * (1 << 20), without
    assert with_plan <= 0.4 * without, (with_plan, without)


def test_changing_the_graph_after_the_plan_is_refused():
    b = Builder()
    x = b.feed("x", [4])
    b.op("relu", {"X": x}, {"Out": "a"})
    b.op("scale", {"X": "a"}, {"Out": "s"}, scale=1.0, bias=0.0)
    b.op("sigmoid", {"X": "s"}, {"Out": "c"})
    b.op("tanh", {"X": "c"}, {"Out": "out"})
    b.fetch("out")
    with pytest.raises(PdliteError, match="memory_optimize_pass"):
        optimize(b, [*MEM, "identity_scale_eliminate_pass"])
