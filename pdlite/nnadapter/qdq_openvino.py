"""Rewrites of the converted int8 (QDQ) graph for OpenVINO (convert.DEVICE_REWRITES["intel_openvino"]).

OpenVINO runs Paddle's QDQ layout in int8 as it is (qdq_fusion.py's rewrites, written for ONNX Runtime, made it
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

from typing import Any

import numpy as np

THIN_CHANNELS = 16  # output channels below which a ConvTranspose's weights stay float


def _attr(node: Any, name: str, default: int) -> int:
    for a in node.attribute:
        if a.name == name:
            return int(a.i)
    return default


def float_thin_deconv_weights(model: Any) -> int:
    """In place on an ONNX model: each ConvTranspose with fewer than THIN_CHANNELS output channels whose weights
    are DequantizeLinear(int8 initializer, constant scale[, zero point]) reads their float values instead (the
    DequantizeLinear dropped when nothing else reads it). Returns how many were rewritten."""
    from onnx import numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers: dict[str, int] = {}
    for n in g.node:
        for name in n.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in g.output}
    done, dropped = 0, []
    for node in g.node:
        if node.op_type != "ConvTranspose" or len(node.input) < 2:
            continue
        dq = producer.get(node.input[1])
        if dq is None or dq.op_type != "DequantizeLinear" or any(i and i not in inits for i in dq.input):
            continue
        q = numpy_helper.to_array(inits[dq.input[0]])
        if q.ndim < 3 or q.shape[1] * _attr(node, "group", 1) >= THIN_CHANNELS:
            continue
        s = numpy_helper.to_array(inits[dq.input[1]]).astype(np.float32)
        zp = (numpy_helper.to_array(inits[dq.input[2]]).astype(np.float32) if len(dq.input) > 2 and dq.input[2]
              else np.zeros_like(s))
        if s.size > 1:  # per channel along `axis`
            shape = [1] * q.ndim
            shape[_attr(dq, "axis", 1) % q.ndim] = -1
            s, zp = s.reshape(shape), zp.reshape(shape)
        w = ((q.astype(np.float32) - zp) * s).astype(np.float32)
        name = dq.output[0] + ".float"
        g.initializer.append(numpy_helper.from_array(w, name))
        readers[dq.output[0]] -= 1
        node.input[1] = name
        if readers[dq.output[0]] == 0 and dq.output[0] not in outputs:
            dropped.append(dq)
        done += 1
    for dq in dropped:
        g.node.remove(dq)
    still_read = {name for n in g.node for name in n.input}
    unused = [i for i in g.initializer if i.name not in still_read and any(i.name in dq.input for dq in dropped)]
    for i in unused:
        g.initializer.remove(i)
    return done
