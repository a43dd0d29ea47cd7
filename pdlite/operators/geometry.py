"""Convolution and pooling geometry of any rank (1-d, 2-d, 3-d): Paddle's rules, written once.

Every user (the op definitions' shape functions and geometry objects, the host and CUDA kernels
through them, the ONNX converters and the reference delegate) resolves paddings and output
sizes here:

- `paddings` has nd values (symmetric) or 2*nd: [before_0, after_0, before_1, after_1, ...].
- `padding_algorithm` (Paddle's UpdatePaddingAndDilation): "SAME": out = ceil(in / stride),
  pad_sum = max((out - 1) * stride + k - in, 0) with the undilated k, pad_before = pad_sum // 2,
  the rest after, and the dilations reset to 1; "VALID": all pads 0; "EXPLICIT" (or anything
  else): `paddings` as given.
- convolution: out = (in + before + after - (d * (k - 1) + 1)) // s + 1; transposed:
  out = (in - 1) * s - before - after + d * (k - 1) + 1.
- pooling: out = (in - k + before + after [+ s - 1 with ceil_mode]) / s + 1 with C++ truncating
  division (a negative numerator rounds towards zero).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from pdlite.errors import InputError

Fail = Callable[[str], NoReturn]

ALGORITHMS = ("EXPLICIT", "SAME", "VALID")


def raiser(op_type: str) -> Fail:
    """A `fail` that raises InputError naming the op."""

    def fail(msg: str) -> NoReturn:
        raise InputError(f"op {op_type}: {msg}")

    return fail


def spatial(v: Any, nd: int, name: str, fail: Fail) -> tuple[int, ...]:
    """An attribute of one value per spatial axis (a single value is repeated nd times)."""
    vals = [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    if len(vals) == 1:
        vals = vals * nd
    if len(vals) != nd:
        fail(f"{name} must have {nd} values, got {v!r}")
    return tuple(vals)


def expand_paddings(paddings: Sequence[int], fail: Fail, nd: int = 2) -> list[int]:
    """[before, after] per spatial axis from Paddle's `paddings` of nd (symmetric) or 2*nd values."""
    p = [int(v) for v in paddings]
    if len(p) == nd:
        return [v for v in p for _ in range(2)]
    if len(p) == 2 * nd:
        return p
    fail(f"paddings must have {nd} or {2 * nd} values, got {list(paddings)}")


def same_paddings(in_size: Sequence[int], strides: Sequence[int], kernel: Sequence[int]) -> list[int]:
    """Paddle's SAME paddings [before, after] per axis (kernel extent undilated)."""
    pads: list[int] = []
    for size, s, k in zip(in_size, strides, kernel):
        out = (int(size) + s - 1) // s
        pad_sum = max((out - 1) * s + k - int(size), 0)
        pads += [pad_sum // 2, pad_sum - pad_sum // 2]
    return pads


def resolve_padding(algorithm: Any, paddings: Sequence[int] | None, in_size: Sequence[int] | None,
                    strides: Sequence[int], kernel: Sequence[int], dilations: Sequence[int] | None = None,
                    fail: Fail | None = None) -> tuple[list[int] | None, tuple[int, ...]]:
    """(pads [before, after] per axis, dilations) after `padding_algorithm`, for any rank.

    SAME needs the input size: with `in_size` None (unknown), the pads are None (a converter may
    then use ONNX's SAME_UPPER, which is the same rule). SAME resets the dilations to 1."""
    fail = fail or raiser("conv/pool")
    nd = len(kernel)
    dil = tuple(int(d) for d in dilations) if dilations is not None else (1,) * nd
    algo = str(algorithm or "EXPLICIT")
    if algo == "SAME":
        if in_size is None or any(int(v) < 0 for v in in_size):
            return None, (1,) * nd
        return same_paddings(in_size, strides, kernel), (1,) * nd
    if algo == "VALID":
        return [0] * (2 * nd), dil
    return expand_paddings(paddings if paddings is not None else [0] * nd, fail, nd), dil


def conv_out_size(size: int, k: int, d: int, before: int, after: int, s: int) -> int:
    """Output extent of a convolution along one axis."""
    return (size + before + after - (d * (k - 1) + 1)) // s + 1


def conv_transpose_out_size(size: int, k: int, d: int, before: int, after: int, s: int) -> int:
    """Output extent of a transposed convolution along one axis (before output_size/output_padding)."""
    return (size - 1) * s - before - after + d * (k - 1) + 1


def pool_out_size(size: int, k: int, before: int, after: int, s: int, ceil_mode: bool = False) -> int:
    """Output extent of a pooling along one axis (C++ truncating division, as Paddle's)."""
    num = size - k + before + after + (s - 1 if ceil_mode else 0)
    return num // s + 1 if num >= 0 else -((-num) // s) + 1


def conv_out_sizes(in_size: Sequence[int], kernel: Sequence[int], dilations: Sequence[int], pads: Sequence[int],
                   strides: Sequence[int]) -> list[int]:
    return [conv_out_size(int(in_size[i]), int(kernel[i]), int(dilations[i]), pads[2 * i], pads[2 * i + 1],
                          int(strides[i])) for i in range(len(kernel))]


def pool_out_sizes(in_size: Sequence[int], kernel: Sequence[int], pads: Sequence[int], strides: Sequence[int],
                   ceil_mode: bool = False) -> list[int]:
    return [pool_out_size(int(in_size[i]), int(kernel[i]), pads[2 * i], pads[2 * i + 1], int(strides[i]), ceil_mode)
            for i in range(len(kernel))]


def pool_window(attrs: dict[str, Any], in_size: Sequence[int], fail: Fail) -> tuple[
        tuple[int, ...], tuple[int, ...], list[int], tuple[int, ...]]:
    """(kernel, strides, pads [before, after] per axis, output size) of a pool of any rank (Paddle's
    UpdateKernelSize / UpdatePadding / PoolOutputSize): global_pooling takes the whole input as kernel,
    global_pooling or adaptive zero the paddings, adaptive output size is `ksize`."""
    nd = len(in_size)
    if attrs.get("pooling_type") not in ("max", "avg"):
        fail(f"pooling_type must be 'max' or 'avg', got {attrs.get('pooling_type')!r}")
    if attrs.get("ksize") is None:
        fail("attribute 'ksize' is required")
    k = spatial(attrs["ksize"], nd, "ksize", fail)
    strides = spatial(attrs["strides"], nd, "strides", fail)
    if attrs["global_pooling"]:
        k = tuple(int(v) for v in in_size)
    pads = resolve_padding(attrs["padding_algorithm"], attrs["paddings"], in_size, strides, k, fail=fail)[0]
    assert pads is not None
    if attrs["global_pooling"] or attrs["adaptive"]:
        pads = [0] * (2 * nd)
    if attrs["adaptive"]:
        out = k
    else:
        if min(strides) <= 0 or min(k) <= 0:
            fail(f"ksize {k} and strides {strides} must be positive")
        out = tuple(pool_out_sizes(in_size, k, pads, strides, bool(attrs["ceil_mode"])))
    if min(out) <= 0:
        fail(f"output size {out} <= 0 for input size {tuple(in_size)}")
    return k, strides, pads, out


def conv_window(attrs: dict[str, Any], in_size: Sequence[int], kernel: Sequence[int], fail: Fail) -> tuple[
        tuple[int, ...], tuple[int, ...], list[int], int]:
    """(strides, dilations, pads [before, after] per axis, groups) of a (transposed) convolution of any rank,
    after `padding_algorithm` (SAME resets the dilations to 1)."""
    nd = len(kernel)
    strides = spatial(attrs["strides"], nd, "strides", fail)
    dil = spatial(attrs["dilations"], nd, "dilations", fail)
    groups = int(attrs["groups"] or 1)
    if min(strides) <= 0 or min(dil) <= 0 or groups <= 0:
        fail(f"strides {strides}, dilations {dil} and groups {groups} must be positive")
    pads, dil = resolve_padding(attrs["padding_algorithm"], attrs["paddings"], in_size, strides, kernel, dil, fail)
    assert pads is not None
    if min(pads) < 0:
        fail(f"paddings must be >= 0, got {pads}")
    return strides, dil, pads, groups


def conv_channels(c: int, w_shape: Sequence[int], groups: int, fail: Fail) -> int:
    """Output channels of a convolution with filter [Cout, Cin / groups, *k], checking the input's `c`."""
    oc = int(w_shape[0])
    if int(w_shape[1]) * groups != c:
        fail(f"input has {c} channels but filter {tuple(w_shape)} with groups={groups} expects "
             f"{int(w_shape[1]) * groups}")
    if oc % groups:
        fail(f"filter output channels {oc} are not divisible by groups={groups}")
    return oc


def checked_conv_out_sizes(in_size: Sequence[int], kernel: Sequence[int], dilations: Sequence[int],
                           pads: Sequence[int], strides: Sequence[int], fail: Fail) -> tuple[int, ...]:
    """`conv_out_sizes`, failing on an empty output."""
    out = conv_out_sizes(in_size, kernel, dilations, pads, strides)
    if min(out) <= 0:
        fail(f"output size {tuple(out)} <= 0 for input size {tuple(in_size)}, kernel {tuple(kernel)}, dilations "
             f"{tuple(dilations)}, paddings {list(pads)}, strides {tuple(strides)}")
    return tuple(out)
