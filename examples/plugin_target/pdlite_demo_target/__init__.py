"""pdlite plugin: the DemoCPU target. `register()` is the entry point pdlite calls on first use."""
from __future__ import annotations

import numpy as np

from pdlite.core.types import DataLayoutType, PrecisionType, TargetType, register_target
from pdlite.kernels.registry import Kernel, TensorType, register_kernel

# how many times each DemoCPU kernel ran (lets tests see the target was really used)
CALLS: dict[str, int] = {}


def register() -> None:
    demo = register_target("DemoCPU")
    host = TargetType.Host
    any_p, any_l = PrecisionType.Any, DataLayoutType.Any

    def count(name: str) -> None:
        CALLS[name] = CALLS.get(name, 0) + 1

    @register_kernel("io_copy", target=demo, precision=any_p, layout=any_l, alias="host_to_demo",
                     inputs={"Input": TensorType(host, any_p, any_l)}, outputs={"Out": TensorType(demo, any_p, any_l)})
    class HostToDemo(Kernel):
        def run(self, ins):
            count("io_copy")
            return {"Out": [np.array(ins["Input"][0], copy=True)]}

    @register_kernel("io_copy", target=demo, precision=any_p, layout=any_l, alias="demo_to_host",
                     inputs={"Input": TensorType(demo, any_p, any_l)}, outputs={"Out": TensorType(host, any_p, any_l)})
    class DemoToHost(Kernel):
        def run(self, ins):
            count("io_copy")
            return {"Out": [np.array(ins["Input"][0], copy=True)]}

    @register_kernel("relu", target=demo)
    class Relu(Kernel):
        def run(self, ins):
            count("relu")
            return {"Out": [np.maximum(ins["X"][0], np.float32(0))]}

    @register_kernel("relu6", target=demo)
    class Relu6(Kernel):
        def run(self, ins):
            count("relu6")
            return {"Out": [np.clip(ins["X"][0], np.float32(0), np.float32(self.attrs["threshold"]))]}

    @register_kernel("hard_swish", target=demo)
    class HardSwish(Kernel):
        def run(self, ins):
            count("hard_swish")
            x = ins["X"][0]
            a = self.attrs
            t, s, o = np.float32(a["threshold"]), np.float32(a["scale"]), np.float32(a["offset"])
            return {"Out": [x * np.clip(x + o, np.float32(0), t) / s]}

    @register_kernel("elementwise_add", target=demo)
    class Add(Kernel):
        def run(self, ins):
            count("elementwise_add")
            x, y = ins["X"][0], ins["Y"][0]
            axis = self.attrs.get("axis", -1)
            if y.ndim < x.ndim and axis != -1:
                y = y.reshape(y.shape + (1,) * (x.ndim - axis - y.ndim))
            return {"Out": [x + y]}

    @register_kernel("pool2d", target=demo)
    class GlobalPool(Kernel):
        """Global / 1x1-adaptive pooling only: `supports` keeps other pools on the host."""

        @classmethod
        def supports(cls, op):
            a = op.attrs
            return bool(a.get("global_pooling") or (a.get("adaptive") and list(a.get("ksize", [])) == [1, 1]))

        def run(self, ins):
            count("pool2d")
            x = ins["X"][0]
            a = self.attrs
            red = np.max if a["pooling_type"] == "max" else np.mean
            return {"Out": [red(x, axis=(2, 3), keepdims=True).astype(x.dtype)]}


def register_device_and_pass() -> None:
    """A subgraph device and a pass, from the same plugin package (second entry point)."""
    from pdlite.nnadapter.drivers.base import Driver
    from pdlite.nnadapter.registry import register_driver
    from pdlite.optimizer.pass_registry import Pass, register_pass

    @register_driver("demo_reference")
    class DemoReferenceDriver(Driver):
        """Runs subgraphs with ONNX's own reference evaluator (pure Python): slow, but a real second runtime."""

        packages = ("onnx",)
        extra = "onnx"
        auto_candidate = False  # a checking runtime: the `auto` device never measures it
        dynamic_shapes = False  # declared static: pdlite builds one model per input shape (bounded LRU)
        prefix = "DEMO_REFERENCE_"
        properties = {"DEMO_REFERENCE_VERBOSE": "0 or 1"}

        def build(self, model, props, cache_path=None):
            import onnx
            from onnx.reference import ReferenceEvaluator

            self.own_properties(props)
            proto = onnx.load_from_string(model)
            CALLS["demo_reference_build"] = CALLS.get("demo_reference_build", 0) + 1
            return ReferenceEvaluator(proto), [i.name for i in proto.graph.input]

        def run(self, compiled, inputs):
            sess, names = compiled
            CALLS["demo_reference_run"] = CALLS.get("demo_reference_run", 0) + 1
            return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))]

    @register_pass("demo_op_census_pass")
    class OpCensusPass(Pass):
        """Records how many ops of each type the graph has (a pass users can put in their pipeline)."""

        def apply(self, graph, ctx):
            census: dict[str, int] = {}
            for node in graph.op_nodes():
                census[node.op.type] = census.get(node.op.type, 0) + 1
            ctx.meta["demo_op_census"] = census
            return False
