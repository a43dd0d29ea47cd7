"""The ordered pass list: the one place that says which passes run, and in which order.

Users print it with `pdlite.optimizer.pipeline.DEFAULT_PASSES` and override it through
`CxxConfig.set_passes(...)`; `graph_visualize` may be inserted anywhere to dump DOT.

Why this order: eliminations first (they expose adjacent ops to the fusions), then constant
folding (a reshape2 of a conv bias becomes a param the bias fusion can take), fc before
elementwise_to_scale (an fc with one output column has a one-value bias), the conv weight folds
(bias, batch_norm, scale) before the activation fusions that end a conv's chain, dead code last
among the graph rewrites, then kernel pick, cast insertion, and the memory plan over the final
runtime order (it must stay last: it records per-op release points).
"""
from __future__ import annotations

# Passes run in this order. Names refer to pdlite.optimizer.pass_registry.PASSES.
DEFAULT_PASSES: list[str] = [
    "control_flow_prepare_pass",  # tensor arrays explicit (create_array, write_to_array reads its array)
    "feed_fetch_strip_pass",
    # -- eliminations and constants -----------------------------------------------------
    "identity_dropout_eliminate_pass",
    "identity_scale_eliminate_pass",
    "identity_assign_eliminate_pass",
    "quant_state_alias_pass",  # quant ops' in-place scale outputs -> their (constant) inputs
    "quant_observer_eliminate_pass",  # host int8: only_observer QDQ pairs (identities) out, so convs fuse
    "fake_quant_to_qdq_pass",  # NNAdapter only: old fake-quant convs as QDQ with int8 weights
    "constant_folding_pass",
    # -- fusions ----------------------------------------------------------------------------
    "fc_fuse_pass",
    "conv_elementwise_add_fuse_pass",
    "conv_bn_fuse_pass",
    "elementwise_to_scale_pass",
    "scales_fuse_pass",
    "identity_scale_eliminate_pass",
    "fc_scale_fuse_pass",  # s * fc(x), through reshapes / transposes (attention's q / sqrt(d)) -> fc of s * W
    "fc_siblings_fuse_pass",  # fc ops reading one input (q / k / v) -> one wider fc + split
    "attention_fuse_pass",  # host: that split .. q k^T, softmax, .v .. heads back side by side -> fused_attention
    "skip_layernorm_fuse_pass",  # host: residual add + layer_norm of the sum -> skip_layernorm (same bits)
    "conv_scale_fuse_pass",
    "conv_residual_add_fuse_pass",  # before the activation fusions: conv + residual add (+ act) -> fused_conv2d
    "conv_activation_fuse_pass",
    "elementwise_activation_fuse_pass",
    "scale_activation_fuse_pass",
    "quant_conv_int8_pass",  # host int8: QDQ -> conv on int8 weights -> quantized_conv2d (integer sums)
    "quant_fc_int8_pass",  # ... fc / matmul -> quantized_fc
    "quant_dequant_fuse_pass",  # ... the other QDQ pairs -> quantize_dequantize_linear (one pass, same values)
    "quant_pointwise_chain_pass",  # ... per-element op runs -> the int8 conv's epilogue or one pointwise_chain
    "quant_dwconv_int8_pass",  # ... depthwise convs on an int8 grid -> quantized_conv2d (groups = channels)
    "quant_chain_fold_pass",  # ... a pointwise_chain after a quantized_conv2d -> its epilogue
    "quant_codes_pass",  # ... int8 codes (uint8) between integer convs instead of floats (same bits)
    "squeeze_excitation_fuse_pass",  # host: pool + two 1x1 convs + gate multiply -> one op (after the int8 passes)
    "dead_code_elimination_pass",
    # -- kernel pick and program generation ----------------------------------------------
    "subgraph_detect_pass",  # NNAdapter: only acts when the config names devices
    "static_kernel_pick_pass",
    "type_target_cast_pass",
    "memory_optimize_pass",
]


# The passes every program needs to run at all (no rewrites): `pdlite check`'s unfused reference run,
# `pdlite quantize`'s calibration, and the tests that separate a wrong kernel from a wrong fusion.
ESSENTIAL_PASSES: list[str] = [
    "control_flow_prepare_pass",
    "feed_fetch_strip_pass",
    "static_kernel_pick_pass",
    "type_target_cast_pass",
]


def default_passes() -> list[str]:
    """A copy of the default pipeline."""
    return list(DEFAULT_PASSES)
