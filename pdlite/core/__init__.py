"""Core data structures: types and places, tensors and scopes, programs and the SSA graph."""
