"""The execution phase: a runtime program of instructions (op + chosen kernel) run over a scope."""
