"""NNAdapter: run subgraphs of a Paddle program on other runtimes through one device-neutral IR (ONNX).

- `registry`: CONVERTERS (Paddle op -> ONNX nodes, + capability predicates) and DRIVERS (devices).
- `convert`: ops -> ONNX ModelProto; `converters/`: one module per op family.
- `drivers/<device>.py`: one file per device (intel_openvino, onnxruntime).
- `partition`: device-neutral grouping of supported ops into acyclic subgraphs.
- `subgraph_kernel`: the `subgraph` op's kernel (one model for all input shapes, else per shape; host fallback).
- `dynamic`: which dims and folded values hold for every input shape; `model_cache`: compiled models on disk.
Nothing here imports onnx, onnxruntime or openvino until a model is converted or built.
"""
from __future__ import annotations
