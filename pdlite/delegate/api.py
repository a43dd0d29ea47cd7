"""Delegate, DelegateModel, Kernel and the tensors they see."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pdlite.errors import InputError, PdliteError


class _ScopeRef:
    """The scope of the run in progress, shared by every tensor of one predictor."""

    def __init__(self) -> None:
        self.scope: dict[str, Any] = {}


class DelegateTensor:
    """A named tensor of the runtime program: read its data while executing, write outputs back."""

    def __init__(self, name: str, ref: _ScopeRef, static_shape: Sequence[int], dtype: np.dtype | None,
                 const: Any = None) -> None:
        self.name = name
        self._ref = ref
        self._static_shape = list(static_shape)
        self.dtype = dtype
        self._const = const

    @property
    def is_const(self) -> bool:
        """True for weights (persistable tensors), whose data is known before any run."""
        return self._const is not None

    def shape(self) -> list[int]:
        """The current shape (of the data in the run in progress), else the model's declared shape."""
        v = self._ref.scope.get(self.name, self._const)
        return list(v.shape) if v is not None else list(self._static_shape)

    def numpy(self) -> np.ndarray:
        v = self._ref.scope.get(self.name, self._const)
        if v is None:
            raise InputError(f"delegate tensor {self.name!r} has no data now (read it inside execute())")
        if not isinstance(v, np.ndarray):
            v = v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
        return v

    def from_numpy(self, array: Any) -> None:
        if self.is_const:
            raise PdliteError(f"delegate tensor {self.name!r} is a weight and cannot be written")
        self._ref.scope[self.name] = np.asarray(array, order="C")

    def __repr__(self) -> str:
        return f"DelegateTensor({self.name!r}, shape={self.shape()})"


class Kernel:
    """Base of a delegate's replacement kernel, built as `Kernel(inputs, outputs)`.

    `inputs` / `outputs` are the replaced run's true graph inputs and outputs
    (GraphInTensors / GraphOutTensors). `prepare()` runs once before the first `execute()`;
    `resize()` runs before an `execute()` whose input shapes differ from the previous one.
    """

    def __init__(self, inputs: Sequence[DelegateTensor], outputs: Sequence[DelegateTensor]) -> None:
        self.inputs = list(inputs)
        self.outputs = list(outputs)

    def prepare(self) -> None:  # noqa: B027 - optional hook
        """Work that needs no input data (pack weights, build an engine ...)."""

    def execute(self) -> None:
        raise NotImplementedError

    def resize(self) -> None:  # noqa: B027 - optional hook
        """Input shapes changed since the last execute()."""


class KernelView:
    """One of pdlite's own kernels as a delegate sees it: op type, attributes, input/output tensors."""

    def __init__(self, index: int, type: str, attrs: dict[str, Any], inputs: list[DelegateTensor],
                 outputs: list[DelegateTensor], slots: dict[str, dict[str, list[str]]], target: str) -> None:
        self.index = index
        self.type = type
        self.attrs = attrs
        self.inputs = inputs
        self.outputs = outputs
        self.slots = slots  # {"inputs": {slot: [names]}, "outputs": {...}}
        self.target = target

    def input(self, slot: str, i: int = 0) -> DelegateTensor | None:
        names = self.slots["inputs"].get(slot) or []
        return next((t for t in self.inputs if i < len(names) and t.name == names[i]), None)

    def output(self, slot: str, i: int = 0) -> DelegateTensor | None:
        names = self.slots["outputs"].get(slot) or []
        return next((t for t in self.outputs if i < len(names) and t.name == names[i]), None)

    def __repr__(self) -> str:
        return f"KernelView(#{self.index} {self.type} on {self.target})"


class DelegateModel:
    """The kernels in execution order; `replace(begin, end, kernel)` swaps the run [begin, end)."""

    def __init__(self, kernels: list[KernelView], fetch_names: Sequence[str]) -> None:
        self.kernels: list[Any] = list(kernels)
        self._fetch = set(fetch_names)
        # what each position stands for: the original kernel indices it covers
        self._covers: list[list[int]] = [[k.index] for k in kernels]
        self.replacements: list[tuple[list[int], Kernel]] = []

    def __len__(self) -> int:
        return len(self.kernels)

    def get_primitive(self, kernel: KernelView) -> dict[str, Any]:
        """The op's primitive: type and attributes (MindSpore's GetPrimitive)."""
        return {"type": kernel.type, "attrs": dict(kernel.attrs)}

    def _check_range(self, begin: int, end: int) -> None:
        if not (0 <= begin < end <= len(self.kernels)):
            raise PdliteError(f"DelegateModel: invalid run [{begin}, {end}) over {len(self.kernels)} kernels")
        for k in self.kernels[begin:end]:
            if not isinstance(k, KernelView):
                raise PdliteError(f"DelegateModel: run [{begin}, {end}) includes an already replaced kernel")

    def graph_inputs(self, begin: int, end: int) -> list[DelegateTensor]:
        """Tensors the run [begin, end) reads that no kernel in it writes (weights included)."""
        self._check_range(begin, end)
        produced: set[str] = set()
        out: dict[str, DelegateTensor] = {}
        for k in self.kernels[begin:end]:
            for t in k.inputs:
                if t.name not in produced and t.name not in out:
                    out[t.name] = t
            produced.update(t.name for t in k.outputs)
        return list(out.values())

    def graph_outputs(self, begin: int, end: int) -> list[DelegateTensor]:
        """Tensors the run [begin, end) writes that a later kernel reads or that the model fetches."""
        self._check_range(begin, end)
        later: set[str] = set(self._fetch)
        for k in self.kernels[end:]:
            later.update(t.name for t in k.inputs)
        out: dict[str, DelegateTensor] = {}
        for k in self.kernels[begin:end]:
            for t in k.outputs:
                if t.name in later:
                    out[t.name] = t
        return list(out.values())

    def replace(self, begin: int, end: int, kernel: Kernel) -> int:
        """Swap kernels [begin, end) (end exclusive) for `kernel`; returns the position after it."""
        self._check_range(begin, end)
        if not isinstance(kernel, Kernel):
            raise PdliteError(f"DelegateModel.replace: expected a pdlite.delegate.Kernel, got {type(kernel).__name__}")
        covered = [i for pos in range(begin, end) for i in self._covers[pos]]
        self.kernels[begin:end] = [kernel]
        self._covers[begin:end] = [covered]
        self.replacements.append((covered, kernel))
        return begin + 1


class Delegate:
    """Base of a delegate: `init()` checks the device and sets up; `build(model)` replaces runs."""

    def init(self) -> None:  # noqa: B027 - optional hook
        pass

    def build(self, model: DelegateModel) -> None:
        raise NotImplementedError
