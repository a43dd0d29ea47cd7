"""OpenCL conv2d / depthwise_conv2d kernels and fused_conv2d (act(conv + Bias + ResidualData)).

Four forms, picked per geometry: a 1x1 stride-1 unpadded ungrouped conv is a GEMM per image
(W [OC, C] @ X[n] [C, H*W], matmul.gemm, bias per row); a depthwise conv (one input channel per
group) loops over its window only; any other conv is an implicit GEMM per image and group (the
im2col columns formed tile by tile in local memory, never stored; dilation, groups and asymmetric
pads included); a transposed conv gathers, per output, the inputs whose strided window covers it. Bias,
ResidualData and the activation are applied as each output is stored. Geometry (SAME / VALID,
paddings, output_size / output_padding) comes from the op definition's helpers. NHWC runs on the
host (`supports` refuses it; docs/opencl.md).
"""
from __future__ import annotations

from typing import Any

from pdlite.core.program import OpDesc
from pdlite.kernels.opencl.base import WEIGHT, OpenCLKernel, act_args, add_source, opencl_kernel
from pdlite.kernels.opencl.matmul import TILE, gemm
from pdlite.operators.fused import base_desc, split_activation
from pdlite.operators.nn import ConvGeometry, conv2d_geometry, conv2d_transpose_geometry, is_channel_last

add_source("conv", r"""
#define CONV_ARGS __global const T* x, __global const T* w, __global const T* bias, __global const T* res, \
    __global T* y, int N, int C, int H, int W, int OC, int OH, int OW, int KH, int KW, int SH, int SW, int PT, \
    int PL, int DH, int DW, int G, int has_bias, int has_res, int act, float a, float b, float c
#define CONV_INDEX \
    int i = get_global_id(0); \
    if (i >= N * OC * OH * OW) return; \
    int ow = i % OW, t = i / OW; \
    int oh = t % OH; t /= OH; \
    int oc = t % OC, n = t / OC; \
    int ih0 = oh * SH - PT, iw0 = ow * SW - PL;
#define CONV_STORE \
    if (has_bias) acc += LD(bias, oc); \
    if (has_res) acc += LD(res, i); \
    ST(y, i, act_fn(acc, act, a, b, c));

/* the window of output (ih0, iw0) over one input plane (xc) and one filter plane (wc), padding skipped */
float window_dot(__global const T* x, __global const T* w, int xc, int wc, int ih0, int iw0, int H, int W, int KH,
                 int KW, int DH, int DW) {
    float acc = 0.0f;
    for (int kh = 0; kh < KH; ++kh) {
        int ih = ih0 + kh * DH;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < KW; ++kw) {
            int iw = iw0 + kw * DW;
            if (iw >= 0 && iw < W) acc += LD(x, xc + ih * W + iw) * LD(w, wc + kh * KW + kw);
        }
    }
    return acc;
}
/* any other conv as an implicit GEMM per (image, group): W [OC/G, C/G*KH*KW] @ columns [C/G*KH*KW, OH*OW], the
   columns (im2col) formed tile by tile in local memory, never stored; 16x16 tiles as the gemm kernel's */
__kernel void conv2d_igemm(CONV_ARGS) {
    int p = get_global_id(0), m = get_global_id(1), ng = get_global_id(2);
    int ln = get_local_id(0), lm = get_local_id(1);
    int n = ng / G, g = ng % G;
    int cg = C / G, ocg = OC / G, kk2 = KH * KW, K = cg * kk2, P = OH * OW;
    int oc = g * ocg + m, oh = p / OW, ow = p % OW;
    int ih0 = oh * SH - PT, iw0 = ow * SW - PL;
    __local float As[TS][TS + 1];
    __local float Bs[TS][TS + 1];
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        int ka = k0 + ln, kb = k0 + lm;
        As[lm][ln] = (m < ocg && ka < K) ? LD(w, oc * K + ka) : 0.0f;
        float v = 0.0f;
        if (p < P && kb < K) {
            int ci = kb / kk2, r = kb % kk2;
            int ih = ih0 + (r / KW) * DH, iw = iw0 + (r % KW) * DW;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) v = LD(x, ((n * C + g * cg + ci) * H + ih) * W + iw);
        }
        Bs[lm][ln] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k) acc += As[lm][k] * Bs[k][ln];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m >= ocg || p >= P) return;
    int i = ((n * OC + oc) * OH + oh) * OW + ow;
    CONV_STORE
}
/* one input channel per group: output channel oc reads input channel oc / (OC / C) */
__kernel void conv2d_depthwise(CONV_ARGS) {
    CONV_INDEX
    float acc = window_dot(x, w, (n * C + oc / (OC / C)) * H * W, oc * KH * KW, ih0, iw0, H, W, KH, KW, DH, DW);
    CONV_STORE
}
/* transposed: w [C, OC / G, KH, KW]; output (oh, ow) gathers the inputs whose window covers it */
__kernel void conv2d_transpose(CONV_ARGS) {
    CONV_INDEX
    int ocg = OC / G, cg = C / G, g = oc / ocg, o = oc % ocg;
    float acc = 0.0f;
    for (int kh = 0; kh < KH; ++kh) {
        int th = oh + PT - kh * DH;
        if (th < 0 || th % SH) continue;
        int ih = th / SH;
        if (ih >= H) continue;
        for (int kw = 0; kw < KW; ++kw) {
            int tw = ow + PL - kw * DW;
            if (tw < 0 || tw % SW) continue;
            int iw = tw / SW;
            if (iw >= W) continue;
            for (int ci = g * cg; ci < (g + 1) * cg; ++ci)
                acc += LD(x, ((n * C + ci) * H + ih) * W + iw) * LD(w, ((ci * ocg + o) * KH + kh) * KW + kw);
        }
    }
    CONV_STORE
}
""")


def conv_form(g: ConvGeometry, transpose: bool = False) -> str:
    """Which kernel computes a conv of this geometry: "gemm", "depthwise", "igemm" or "transpose"."""
    if transpose:
        return "transpose"
    if (g.kh, g.kw, g.sh, g.sw, g.groups) == (1, 1, 1, 1, 1) and not any(g.pads):
        return "gemm"
    if g.groups == g.c and g.groups > 1:
        return "depthwise"
    return "igemm"


def conv2d(k: OpenCLKernel, x: Any, w: Any, bias: Any, res: Any, g: ConvGeometry, act: tuple,
           transpose: bool = False) -> Any:
    """act(conv(x, w) + bias + res) (or the transposed conv) in NCHW on the device."""
    y = k.empty((g.n, g.oc, g.oh, g.ow))
    if not y.size:
        return y
    form = conv_form(g, transpose)
    if form == "gemm":
        hw = g.h * g.w
        gemm(k, w, x, y, g.oc, hw, g.c, (g.c, 1), (hw, 1), batch=g.n, batch_strides=(0, g.c * hw, g.oc * hw),
             bias=bias, bias_mode=2, res=res, act=act)
        return y
    dummy = k.dummy()
    if form == "igemm":
        k.launch("conv2d_igemm", (g.oh * g.ow, g.oc // g.groups, g.n * g.groups), x, w, dummy if bias is None else bias,
                 dummy if res is None else res, y, g.n, g.c, g.h, g.w, g.oc, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw,
                 g.pads[0], g.pads[2], g.dh, g.dw, g.groups, bias is not None, res is not None, *act,
                 local=(TILE, TILE, 1))
        return y
    k.launch(f"conv2d_{form}", y.size, x, w, dummy if bias is None else bias, dummy if res is None else res, y,
             g.n, g.c, g.h, g.w, g.oc, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pads[0], g.pads[2], g.dh, g.dw,
             g.groups, bias is not None, res is not None, *act, local=(64,))
    return y


class _Conv(OpenCLKernel):
    """Output = act(conv(Input, Filter) + Bias + ResidualData); `act` from the fused op's attributes."""

    @classmethod
    def supports(cls, op: OpDesc) -> bool:
        if op.type != "fused_conv2d":
            return not is_channel_last(op.attrs["data_format"])
        conv_type = str(op.attrs["conv_type"])
        return conv_type in CONV_TYPES and not is_channel_last(base_desc(op, conv_type).attrs["data_format"])

    def run(self, ins: dict[str, list[Any]]) -> dict[str, list[Any]]:
        x, w = self.tensor(ins, "Input"), self.tensor(ins, "Filter")
        cache = self.__dict__.setdefault("_geo", {})
        key = (x.shape, w.shape)
        conv_type = str(self.attrs.get("conv_type", self.op.type))
        transpose = "transpose" in conv_type
        if key not in cache:
            attrs = self.attrs
            if self.op.type == "fused_conv2d":  # the base conv's attributes, its defaults filled in
                attrs = base_desc(self.op, conv_type).attrs
            geometry = conv2d_transpose_geometry if transpose else conv2d_geometry
            cache[key] = geometry(attrs, x.shape, w.shape)
        act = act_args(*split_activation(dict(self.attrs))) if self.op.type == "fused_conv2d" else act_args("", {})
        y = conv2d(self, x, w, self.tensor(ins, "Bias"), self.tensor(ins, "ResidualData"), cache[key], act,
                   transpose)
        return {"Output": [y]}


CONV_TYPES = ("conv2d", "depthwise_conv2d", "conv2d_transpose", "depthwise_conv2d_transpose")
opencl_kernel([*CONV_TYPES, "fused_conv2d"], inputs={"Filter": WEIGHT, "Bias": WEIGHT})(_Conv)
