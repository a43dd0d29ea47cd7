"""Command-line tools: `pdlite <command>` (run, ...) and `pdlite-opt`."""
