"""The analysis phase: passes over the SSA graph, run in the order of one pipeline list."""
