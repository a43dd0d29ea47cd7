"""The PIR op table, part 2: convolution, pooling, normalisation, interpolation, detection and
sequence ops (the idiom is described in pdlite.model_parser.pir_mapping)."""
from __future__ import annotations

from typing import Any

from pdlite.model_parser.pir_convert import (
    PIR_OPS,
    IntArg,
    PirConverter,
    ScalarArg,
    const_ints,
    inputs,
    legacy_attrs,
    op_map,
    operand,
    register_pir,
    scalar_arg,
)
from pdlite.model_parser.pir_decode import PirOp

_CONV_IO = (("Input", "Filter"), ("Output",))
_KSIZE = {"kernel_size": "ksize"}


@register_pir("pd_op.pool2d", produces="pool2d")
def _pool2d(c: PirConverter, op: PirOp) -> None:
    """pool2d: kernel_size (an IntArray operand) -> ksize."""
    attrs = legacy_attrs(c, op)
    ins = inputs(c, op, ("X",))
    ksize = const_ints(c, op, 1)
    if ksize is None:
        raise c.unsupported(op, "kernel_size must be a constant (pd_op.full_int_array)")
    attrs["ksize"] = ksize
    c.emit("pool2d", ins, c.outputs(op, ("Out",)), attrs)


def _interp(method: str) -> Any:
    """*_interp -> *_interp_v2: a constant out_size folds into out_d/out_h/out_w; else OutSize,
    SizeTensor (a vector of scalars) and Scale tensors; data_format -> data_layout."""

    def conv(c: PirConverter, op: PirOp) -> None:
        attrs = legacy_attrs(c, op, {"data_format": "data_layout"})
        ins = inputs(c, op, ("X", None, "SizeTensor", "Scale"))
        if operand(op, 1):
            size = const_ints(c, op, 1)
            if size is not None and len(size) in (1, 2, 3):
                for k, v in zip(("out_d", "out_h", "out_w")[3 - len(size):], size):
                    attrs[k] = v
            else:
                ins["OutSize"] = [c.name(op, operand(op, 1))]
        c.emit(f"{method}_interp_v2", ins, c.outputs(op, ("Out",)), attrs)

    conv.__doc__ = f"-> {method}_interp_v2"
    conv.produces = (f"{method}_interp_v2",)  # type: ignore[attr-defined]
    return conv


_DROPOUT_MODES = {"upscale_in_train": "upscale_in_train", "downscale_in_infer": "downgrade_in_infer",
                  "downgrade_in_infer": "downgrade_in_infer"}


@register_pir("pd_op.dropout", produces="dropout")
def _dropout(c: PirConverter, op: PirOp) -> None:
    """dropout: p (a Scalar operand) -> dropout_prob; mode downscale_in_infer -> downgrade_in_infer."""
    mode = op.attrs.get("mode", "upscale_in_train")
    if mode not in _DROPOUT_MODES:
        raise c.fail(op, f"unknown dropout mode {mode!r}")
    attrs = {"is_test": bool(op.attrs.get("is_test", True)), "dropout_implementation": _DROPOUT_MODES[mode],
             "seed": int(op.attrs.get("seed", 0)), "fix_seed": bool(op.attrs.get("fix_seed", False)),
             "dropout_prob": float(op.attrs.get("p", 0.5))}
    ins = inputs(c, op, ("X",))
    scalar_arg(c, op, 2, ScalarArg("dropout_prob"), attrs, ins)
    c.emit("dropout", ins, c.outputs(op, ("Out", "Mask")), attrs)


@register_pir("pd_op.rnn", produces="rnn")
def _rnn(c: PirConverter, op: PirOp) -> None:
    """rnn: x, pre_state (vector), weight_list (vector), sequence_length, dropout_state_in (not read
    at inference) -> Out, DropoutState, State (vector), Reserve."""
    ins = inputs(c, op, ("Input", "PreState", "WeightList", "SequenceLength", None))
    c.emit("rnn", ins, c.outputs(op, ("Out", "DropoutState", "State", "Reserve")), legacy_attrs(c, op))


TABLE: dict[str, Any] = {
    # convolution
    "pd_op.conv2d": op_map("conv2d", *_CONV_IO),
    "pd_op.depthwise_conv2d": op_map("depthwise_conv2d", *_CONV_IO),
    "pd_op.conv3d": op_map("conv3d", *_CONV_IO),
    "pd_op.conv2d_transpose": op_map("conv2d_transpose", ("Input", "Filter", None), ("Output",),
                                     args={2: IntArg("output_size")}),
    "pd_op.depthwise_conv2d_transpose": op_map("depthwise_conv2d_transpose", ("Input", "Filter", None),
                                               ("Output",), args={2: IntArg("output_size")}),
    "pd_op.conv3d_transpose": op_map("conv3d_transpose", ("Input", "Filter", None), ("Output",),
                                     args={2: IntArg("output_size")}),
    "pd_op.deformable_conv": op_map("deformable_conv", ("Input", "Offset", "Filter", "Mask"), ("Output",)),
    # pooling
    "pd_op.pool3d": op_map("pool3d", attrs=_KSIZE),
    "pd_op.max_pool2d_with_index": op_map("max_pool2d_with_index", outs=("Out", "Mask"), attrs=_KSIZE),
    "pd_op.max_pool3d_with_index": op_map("max_pool3d_with_index", outs=("Out", "Mask"), attrs=_KSIZE),
    "pd_op.unpool": op_map("unpool", ("X", "Indices"), attrs={"padding": "paddings"},
                           args={2: IntArg("output_size")}),
    # normalisation
    "pd_op.batch_norm": op_map("batch_norm", ("X", "Mean", "Variance", "Scale", "Bias"),
                               ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
                               attrs={"data_format": "data_layout"}),
    "pd_op.layer_norm": op_map("layer_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance")),
    "pd_op.group_norm": op_map("group_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance"),
                               attrs={"data_format": "data_layout"}),
    "pd_op.instance_norm": op_map("instance_norm", ("X", "Scale", "Bias"), ("Y", "SavedMean", "SavedVariance")),
    "pd_op.affine_channel": op_map("affine_channel", ("X", "Scale", "Bias"), attrs={"data_format": "data_layout"}),
    "pd_op.lrn": op_map("lrn", outs=("Out", "MidOut")),
    "pd_op.temporal_shift": op_map("temporal_shift"),
    # resampling, padding, rearranging
    "pd_op.nearest_interp": _interp("nearest"),
    "pd_op.bilinear_interp": _interp("bilinear"),
    "pd_op.bicubic_interp": _interp("bicubic"),
    "pd_op.linear_interp": _interp("linear"),
    "pd_op.trilinear_interp": _interp("trilinear"),
    "pd_op.pixel_shuffle": op_map("pixel_shuffle"),
    "pd_op.pixel_unshuffle": op_map("pixel_unshuffle"),
    "pd_op.channel_shuffle": op_map("channel_shuffle"),
    "pd_op.pad3d": op_map("pad3d", attrs={"pad_value": "value"}, args={1: IntArg("paddings", "Paddings")}),
    "pd_op.pad": op_map("pad", args={1: ScalarArg("pad_value")}),
    "pd_op.maxout": op_map("maxout"),
    "pd_op.unfold": op_map("unfold", outs=("Y",)),
    "pd_op.grid_sample": op_map("grid_sampler", ("X", "Grid"), ("Output",)),
    "pd_op.affine_grid": op_map("affine_grid", ("Theta",), ("Output",),
                                args={1: IntArg("output_shape", "OutputShape")}),
    # detection
    "pd_op.prior_box": op_map("prior_box", ("Input", "Image"), ("Boxes", "Variances")),
    "pd_op.density_prior_box": op_map("density_prior_box", ("Input", "Image"), ("Boxes", "Variances")),
    "pd_op.anchor_generator": op_map("anchor_generator", ("Input",), ("Anchors", "Variances")),
    "pd_op.box_coder": op_map("box_coder", ("PriorBox", "PriorBoxVar", "TargetBox"), ("OutputBox",)),
    "pd_op.yolo_box": op_map("yolo_box", ("X", "ImgSize"), ("Boxes", "Scores")),
    "pd_op.multiclass_nms3": op_map("multiclass_nms3", ("BBoxes", "Scores", "RoisNum"),
                                    ("Out", "Index", "NmsRoisNum")),
    "pd_op.matrix_nms": op_map("matrix_nms", ("BBoxes", "Scores"), ("Out", "Index", "RoisNum")),
    "pd_op.nms": op_map("nms", ("Boxes",), ("KeepBoxesIdxs",), attrs={"threshold": "iou_threshold"}),
    "pd_op.generate_proposals": op_map(
        "generate_proposals_v2", ("Scores", "BboxDeltas", "ImShape", "Anchors", "Variances"),
        ("RpnRois", "RpnRoiProbs", "RpnRoisNum"),
        attrs={"pre_nms_top_n": "pre_nms_topN", "post_nms_top_n": "post_nms_topN"}),
    "pd_op.distribute_fpn_proposals": op_map("distribute_fpn_proposals", ("FpnRois", "RoisNum"),
                                             ("MultiFpnRois", "MultiLevelRoIsNum", "RestoreIndex")),
    "pd_op.collect_fpn_proposals": op_map(
        "collect_fpn_proposals", ("MultiLevelRois", "MultiLevelScores", "MultiLevelRoIsNum"), ("FpnRois", "RoisNum"),
        attrs={"post_nms_topn": "post_nms_topN"}),
    "pd_op.roi_align": op_map("roi_align", ("X", "ROIs", "RoisNum")),
    "pd_op.roi_pool": op_map("roi_pool", ("X", "ROIs", "RoisNum"), ("Out", "Argmax")),
    "pd_op.psroi_pool": op_map("psroi_pool", ("X", "ROIs", "RoisNum")),
    "pd_op.box_clip": op_map("box_clip", ("Input", "ImInfo"), ("Output",)),
    "pd_op.bipartite_match": op_map("bipartite_match", ("DistMat",), ("ColToRowMatchIndices",
                                                                       "ColToRowMatchDist")),
}
for _name, _fn in TABLE.items():
    PIR_OPS.add(_name, _fn)
