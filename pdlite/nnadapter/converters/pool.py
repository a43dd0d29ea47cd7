"""Converter of pool2d (max / avg; global, adaptive, ceil_mode, exclusive, SAME / VALID / EXPLICIT).

- global_pooling, and adaptive avg to 1x1: GlobalAveragePool / GlobalMaxPool.
- adaptive avg to (oh, ow) with in % out == 0: AveragePool with kernel = stride = in / out.
- other adaptive avg sizes, and an input size known only at run time (PP-LiteSeg's context module):
  Paddle's bins [floor(i * in / out), ceil((i + 1) * in / out)) per axis, as Slice + ReduceMean +
  Concat along H, then along W (a mean over a rectangle is the mean over rows of the means over its
  columns); the bin bounds are int64 arithmetic on Shape(x) when the size is not known. At most
  MAX_BINS bins per axis.
- Adaptive max is refused: Paddle's CPU kernel runs it with the ksize/strides windows (a quirk
  the host kernel keeps), which no ONNX pooling expresses.
- ceil_mode: Paddle's out = (in - k + p0 + p1 + s - 1) // s + 1 is ONNX's floor rule with s - 1
  more padding at the end; the extra pixels are -inf for max and excluded from avg counts.
- exclusive=False (count_include_pad) is converted only with symmetric pads and no ceil_mode,
  where Paddle's divisor is always k_h * k_w.
"""
from __future__ import annotations

from pdlite.core.program import OpDesc
from pdlite.nnadapter.convert import ConvertContext, TensorInfo
from pdlite.nnadapter.converters.common import pair
from pdlite.nnadapter.registry import ConversionError, register_converter
from pdlite.operators.geometry import resolve_padding
from pdlite.operators.nn import is_channel_last

MAX_BINS = 32


def _spatial(info: TensorInfo, x: str | None) -> list[int] | None:
    s = info.shape(x) if x else None
    if s is None or len(s) != 4 or s[2] < 0 or s[3] < 0:
        return None
    return [int(s[2]), int(s[3])]


def _raise(msg: str) -> list[int]:
    raise ConversionError(msg)


def _explicit_pads(op: OpDesc, hw: list[int] | None) -> list[int] | None:
    """[top, bottom, left, right], or None for SAME with an unknown input size."""
    a = op.attrs
    return resolve_padding(a["padding_algorithm"], a["paddings"], hw, pair(a["strides"]), pair(a["ksize"]),
                           fail=_raise)[0]


def _refusal(op: OpDesc, info: TensorInfo) -> str | None:
    a = op.attrs
    x = op.input("X")
    if is_channel_last(a["data_format"]):
        return "data_format NHWC"
    if a.get("pooling_type") not in ("max", "avg"):
        return f"pooling_type {a.get('pooling_type')!r}"
    if info.rank(x) not in (None, 4):
        return "input is not 4-D"
    if a.get("ksize") is None:
        return "no ksize"
    if a.get("global_pooling"):
        return "global_pooling together with adaptive" if a.get("adaptive") else None
    kh, kw = pair(a["ksize"])
    if a.get("adaptive"):
        if a["pooling_type"] == "max":
            return "adaptive max pooling (Paddle runs it with ksize windows)"
        if (kh, kw) == (1, 1):
            return None
        hw = _spatial(info, x)
        if (hw is None or hw[0] % kh or hw[1] % kw) and max(kh, kw) > MAX_BINS:
            return f"adaptive avg pooling to {kh}x{kw} of an uneven or unknown input size (more than {MAX_BINS} bins)"
        return None
    if a["pooling_type"] == "avg" and not a["exclusive"]:
        if a.get("ceil_mode"):
            return "avg pooling with exclusive=False and ceil_mode"
        p = _explicit_pads(op, _spatial(info, x))
        if p is None or p[0] != p[1] or p[2] != p[3]:
            return "avg pooling with exclusive=False and asymmetric (or unknown SAME) paddings"
    if a.get("ceil_mode") and str(a.get("padding_algorithm")) == "SAME" and _spatial(info, x) is None:
        return "SAME padding with ceil_mode needs the input size"
    if a.get("ceil_mode"):
        p = _explicit_pads(op, _spatial(info, x))
        sh, sw = pair(a["strides"])
        if p is not None and (p[1] + sh - 1 >= kh or p[3] + sw - 1 >= kw):
            return "ceil_mode with an end padding of a whole window (ONNX pads must be smaller than the kernel)"
    hw, p = _spatial(info, x), None
    if hw is not None:
        p = _explicit_pads(op, hw)
    if p is not None:
        sh, sw = pair(a["strides"]) if a.get("ceil_mode") else (1, 1)
        if hw[0] + p[0] + p[1] + sh - 1 < kh or hw[1] + p[2] + p[3] + sw - 1 < kw:
            return (f"a {kh}x{kw} window larger than the padded {hw[0]}x{hw[1]} input "
                    "(OpenVINO refuses it at run time)")
    return None


@register_converter("pool2d", supports=_refusal)
def _pool2d(ctx: ConvertContext, op: OpDesc) -> None:
    a = op.attrs
    is_max = a["pooling_type"] == "max"
    x = op.input("X")
    xo, out = ctx.input(op, "X"), ctx.output(op, "Out")
    kh, kw = pair(a["ksize"])
    if a.get("global_pooling") or (a.get("adaptive") and (kh, kw) == (1, 1)):
        ctx.add("GlobalMaxPool" if is_max else "GlobalAveragePool", [xo], [out])
        return
    hw = _spatial(ctx.info, x)
    if a.get("adaptive"):
        if hw is not None and hw[0] % kh == 0 and hw[1] % kw == 0:
            k = [hw[0] // kh, hw[1] // kw]
            ctx.add("AveragePool", [xo], [out], kernel_shape=k, strides=k, pads=[0, 0, 0, 0], count_include_pad=0)
        else:
            rows = _adaptive_bins(ctx, xo, 2, kh, hw[0] if hw else None)
            ctx.add("Identity", [_adaptive_bins(ctx, rows, 3, kw, hw[1] if hw else None)], [out])
        return
    strides = pair(a["strides"])
    p = _explicit_pads(op, hw)
    kw_args: dict = {"kernel_shape": [kh, kw], "strides": strides}
    if p is None:
        kw_args["auto_pad"] = "SAME_UPPER"
    else:
        top, bottom, left, right = p
        if a.get("ceil_mode"):
            bottom += strides[0] - 1
            right += strides[1] - 1
        kw_args["pads"] = [top, left, bottom, right]
    if is_max:
        ctx.add("MaxPool", [xo], [out], **kw_args)
    else:
        ctx.add("AveragePool", [xo], [out], count_include_pad=0 if a["exclusive"] else 1, **kw_args)


def _adaptive_bins(ctx: ConvertContext, t: str, axis: int, bins: int, size: int | None) -> str:
    """Paddle's adaptive avg pooling along one axis: the means of [floor(i*n/o), ceil((i+1)*n/o))."""
    if size is None:
        n = ctx.add("Slice", [ctx.add("Shape", [t]), ctx.ints([axis]), ctx.ints([axis + 1])])
    parts = []
    for i in range(bins):
        if size is not None:
            lo, hi = ctx.ints([i * size // bins]), ctx.ints([-(-(i + 1) * size // bins)])
        else:
            lo = ctx.add("Div", [ctx.add("Mul", [n, ctx.ints([i])]), ctx.ints([bins])])
            hi = ctx.add("Div", [ctx.add("Add", [ctx.add("Mul", [n, ctx.ints([i + 1])]), ctx.ints([bins - 1])]),
                                 ctx.ints([bins])])
        part = ctx.add("Slice", [t, lo, hi, ctx.ints([axis])])
        parts.append(ctx.add("ReduceMean", [part], axes=[axis], keepdims=1))
    return parts[0] if bins == 1 else ctx.add("Concat", parts, axis=axis)
