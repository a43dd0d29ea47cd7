"""Host kernels of pdlite.operators.bitwise: bitwise ops (logical on bool), float-class predicates,
elementwise_fmax / fmin (NaN-ignoring, NumPy's fmax/fmin) and elementwise_heaviside."""
from __future__ import annotations

import numpy as np

from pdlite.kernels.host.elementwise import broadcast_operands
from pdlite.kernels.host.extra import Ins, Outs, generic
from pdlite.kernels.registry import Kernel
from pdlite.operators.bitwise import BITWISE_BINARY, FLOAT_PREDICATES, NAN_AWARE

_FUNCS = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
          "isnan_v2": np.isnan, "isinf_v2": np.isinf, "isfinite_v2": np.isfinite,
          "elementwise_fmax": np.fmax, "elementwise_fmin": np.fmin, "elementwise_heaviside": np.heaviside}


class Binary(Kernel):
    def run(self, ins: Ins) -> Outs:
        x, y = broadcast_operands(ins["X"][0], ins["Y"][0], int(self.attrs.get("axis", -1)))
        out = np.asarray(_FUNCS[self.op.type](x, y))
        return {"Out": [out.astype(ins["X"][0].dtype, copy=False)]}


class Unary(Kernel):
    def run(self, ins: Ins) -> Outs:
        x = ins["X"][0]
        if self.op.type == "bitwise_not":
            return {"Out": [np.invert(x)]}
        if x.dtype.kind in "iub":  # integers are always finite
            return {"Out": [np.full(x.shape, self.op.type == "isfinite_v2")]}
        return {"Out": [np.asarray(_FUNCS[self.op.type](x))]}


for _t in (*BITWISE_BINARY, *NAN_AWARE):
    generic(_t)(type(_t.title().replace("_", ""), (Binary,), {}))
for _t in ("bitwise_not", *FLOAT_PREDICATES):
    generic(_t)(type(_t.title().replace("_", ""), (Unary,), {}))
