"""Host kernels of the cast ops: calib FP32 <-> FP16, layout NCHW <-> NHWC."""
from __future__ import annotations

import numpy as np

from pdlite.core.types import HOST, DataLayoutType, PrecisionType
from pdlite.kernels.registry import Kernel, TensorType, register_kernel

FP16, FP32 = PrecisionType.FP16, PrecisionType.FP32
ANY_LAYOUT = DataLayoutType.Any


@register_kernel("calib", precision=FP16, layout=ANY_LAYOUT, alias="fp32_to_fp16",
                 inputs={"Input": TensorType(HOST, FP32, ANY_LAYOUT)}, outputs={"Out": TensorType(HOST, FP16, ANY_LAYOUT)})
class CalibFp32ToFp16(Kernel):
    def run(self, ins):
        return {"Out": [ins["Input"][0].astype(np.float16)]}


@register_kernel("calib", precision=FP32, layout=ANY_LAYOUT, alias="fp16_to_fp32",
                 inputs={"Input": TensorType(HOST, FP16, ANY_LAYOUT)}, outputs={"Out": TensorType(HOST, FP32, ANY_LAYOUT)})
class CalibFp16ToFp32(Kernel):
    def run(self, ins):
        return {"Out": [ins["Input"][0].astype(np.float32)]}


@register_kernel("layout", precision=PrecisionType.Any, layout=DataLayoutType.NHWC, alias="nchw_to_nhwc",
                 inputs={"Input": TensorType(HOST, PrecisionType.Any, DataLayoutType.NCHW)},
                 outputs={"Out": TensorType(HOST, PrecisionType.Any, DataLayoutType.NHWC)})
class NchwToNhwc(Kernel):
    def run(self, ins):
        return {"Out": [np.asarray(ins["Input"][0].transpose(0, 2, 3, 1), order="C")]}


@register_kernel("layout", precision=PrecisionType.Any, layout=DataLayoutType.NCHW, alias="nhwc_to_nchw",
                 inputs={"Input": TensorType(HOST, PrecisionType.Any, DataLayoutType.NHWC)},
                 outputs={"Out": TensorType(HOST, PrecisionType.Any, DataLayoutType.NCHW)})
class NhwcToNchw(Kernel):
    def run(self, ins):
        return {"Out": [np.asarray(ins["Input"][0].transpose(0, 3, 1, 2), order="C")]}
