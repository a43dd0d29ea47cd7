"""Kernels per target: `kernels/<target>/`, registered by (op type, target, precision, layout)."""
