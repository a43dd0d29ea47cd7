"""A small progress line for long work, shown only when stderr is a terminal."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str, stream=None) -> None:
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.n = 0
        self._last = 0.0

    def update(self, k: int = 1) -> None:
        self.n += k
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and self.n < self.total:
            return
        self._last = now
        width = 30
        fill = int(width * self.n / self.total)
        self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {self.n}/{self.total}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (len(self.label) + 45) + "\r")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
