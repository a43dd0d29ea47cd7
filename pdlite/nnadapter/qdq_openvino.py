"""Rewrites of the converted int8 (QDQ) graph for OpenVINO (convert.DEVICE_REWRITES["intel_openvino"]).

OpenVINO runs Paddle's QDQ layout in int8 as it is (qdq_fusion/'s rewrites, written for ONNX Runtime, made it
slower). One exception measured: a ConvTranspose with few output channels. Its int8 kernel vectorises along the
output channels, so with fewer than THIN_CHANNELS of them it wastes most of its lanes: PP-OCRv4 det's last
upsampling (24 -> 1 channel, 2x2 stride 2 to 320x320) took 1.35 ms in int8 (AMX) against 0.57 ms in fp32 on an
Intel Xeon (Emerald Rapids), one thread, while its 24 -> 24 one was faster in int8.

``float_thin_deconv_weights``: such a ConvTranspose reads its weights as a float initializer holding exactly the
values its DequantizeLinear gave ((w8 - zero point) * scale in float32), so OpenVINO runs it in fp32; its input's
quantize / dequantize pair stays, so it computes what Paddle's fp32 simulation of the program computes (the
device's int8 kernel differed from that by its int32 accumulation only).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pdlite.nnadapter.qdq_fusion.graph import _attr, _Graph

THIN_CHANNELS = 16  # output channels below which a ConvTranspose's weights stay float


def float_thin_deconv_weights(model: Any, properties: Mapping[str, str] | None = None) -> int:
    """In place on an ONNX model: each ConvTranspose with fewer than THIN_CHANNELS output channels whose weights
    are DequantizeLinear(int8 initializer, constant scale[, zero point]) reads their float values instead (the
    DequantizeLinear dropped when nothing else reads it). Returns how many were rewritten. (`properties`: the
    device's context properties, as convert.DEVICE_REWRITES pass them; none changes this rewrite.)"""
    g = _Graph(model.graph)
    done = 0
    for node in g.nodes:
        if node.op_type != "ConvTranspose" or len(node.input) < 2:
            continue
        dq = g.producer.get(node.input[1])
        if dq is None or dq.op_type != "DequantizeLinear" or any(i and i not in g.inits for i in dq.input):
            continue
        q = g.const(dq.input[0])
        if q.ndim < 3 or q.shape[1] * int(_attr(node, "group", 1)) >= THIN_CHANNELS:
            continue
        s = g.const(dq.input[1]).astype(np.float32)
        zp = g.const(dq.input[2]).astype(np.float32) if len(dq.input) > 2 and dq.input[2] else np.zeros_like(s)
        if s.size > 1:  # per channel along `axis`
            shape = [1] * q.ndim
            shape[int(_attr(dq, "axis", 1)) % q.ndim] = -1
            s, zp = s.reshape(shape), zp.reshape(shape)
        name = dq.output[0] + ".float"
        g.inits[name] = g.nh.from_array(((q.astype(np.float32) - zp) * s).astype(np.float32), name)
        node.input[1] = name
        done += 1
    if done:
        g.commit()  # drops the DequantizeLinears nothing reads any more, and their initializers
    return done
