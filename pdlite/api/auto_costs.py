"""The cost model of one candidate of the online `auto` (pdlite/api/auto_policy.py): what its calls cost so far
(its first call apart, then on signatures it had run and on signatures new to it), what an earlier process
cached about it, and what its next call is estimated to cost. Pure bookkeeping, no clock."""
from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

WINDOW = 24  # samples per kind kept (recent ones: costs move when a device's caches warm up)
REFRESH_CALLS = 16  # a candidate not run for this many calls is measured again (then twice that, ...)
LOAD_GUESS = 0.5  # a first call that loads the compiled model, before one was measured: this share of compiling it
BOUGHT_KEEP = 8  # a purchase that did not pay is not made again for this many processes (then twice as many, ...)


def as_number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


@dataclass
class Candidate:
    """What one candidate has cost: its first call apart, then calls on signatures it had run (`seen`) and on
    signatures new to it (`new`), as (ms, size); `runs`: its calls after the first as (ms, size, new to the host)
    for the MARGIN rule. `prior_*`: from an earlier process, used while its own samples are missing."""

    name: str
    first: tuple[float, float] | None = None
    seen: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    new: deque = field(default_factory=lambda: deque(maxlen=WINDOW))
    runs: deque = field(default_factory=lambda: deque(maxlen=2 * WINDOW))
    sigs: set = field(default_factory=set)
    refused: str | None = None
    per_shape: bool = False  # it declares that it compiles once per input shape (no dynamic shapes)
    build_ms: float = 0.0  # of its first call: building it
    built: bool = False
    last_call: int = -1
    refresh: int = REFRESH_CALLS
    regret_ms: float = 0.0  # savings its model says the calls so far missed (for a known candidate not built)
    prior_unit: float | None = None
    prior_over: float | None = None
    drift: float = 1.0  # how much slower this machine runs the host now than when the priors were taken
    prior_first_ms: float | None = None  # what its first call is expected to cost here (a compile or a load)
    loaded: bool = False  # its first call here loaded its compiled models from the model cache
    files: list = field(default_factory=list)  # the model cache's files of its compiled models
    prior_compile_ms: float | None = None  # an earlier process's first call that compiled ...
    prior_load_ms: float | None = None  # ... and one that loaded
    prior: dict | None = None  # what an earlier process cached about it (kept as it was while it runs nothing here)
    # what its calls after its first really cost in earlier processes, what the host's model said those calls would
    # have cost the host, and how many: (ms, host ms, calls); pooled with this process's until it ran PROBATION here
    prior_realized: tuple[float, float, float] | None = None
    # the last process whose first call of it loaded its compiled model (a purchase): what all its calls there cost,
    # that first call included, what the host's model said they would have cost the host, the calls that process's
    # stream had, the processes since, and how many processes a purchase that did not pay keeps it off
    prior_bought: tuple[float, float, float, float, float] | None = None
    first_host_new: bool = True  # its first call's signature was new to the host then
    first_call: int = -1  # the stream's call its first call here was (reports: when it was tried)
    run_count: int = 0  # its calls here after its first (`runs` keeps the recent ones)

    def _memo(self, what: str, fn: Any) -> Any:
        """fn() cached until the samples or priors change (a call's pick reads them several times)."""
        key = (len(self.seen), self.seen[-1] if self.seen else None, len(self.new), self.new[-1] if self.new else None,
               self.first, self.prior_unit, self.prior_over, self.per_shape)
        memo = self.__dict__.setdefault("_memo_cache", {})
        hit = memo.get(what)
        if hit is None or hit[0] != key:
            hit = memo[what] = (key, fn())
        return hit[1]

    def unit(self) -> float | None:
        return self._memo("unit", self._unit)

    def over(self) -> float:
        return self._memo("over", self._over)

    def _unit(self) -> float | None:
        if self.seen:
            return statistics.median(ms / s for ms, s in self.seen)
        if self.prior_unit is not None:  # an earlier process's (new signatures here then measure the over)
            return self.prior_unit
        if self.new:  # only new signatures so far: their costs include the over (pessimistic)
            return statistics.median(ms / s for ms, s in self.new)
        if self.first is not None:
            return self.first[0] / self.first[1]
        return None

    def _over(self) -> float:
        u = self.unit()
        if u is None:
            return 0.0
        if self.new and (self.seen or self.prior_unit is not None):
            return statistics.median(max(0.0, ms - u * s) for ms, s in self.new)
        if self.new:
            return 0.0  # new signatures only: the unit holds their over
        if self.prior_over is not None:
            return self.prior_over
        if self.per_shape and self.first is not None:  # it compiles per shape: as its first run did
            return max(0.0, self.first[0] - self.build_ms - u * self.first[1])
        # a device that declares dynamic shapes: nothing assumed until its next new signature measures it (a
        # device that still pays per shape pays that once; the realized-cost rule then sends the calls back)
        return 0.0

    def estimate(self, size: float, new: bool) -> float | None:
        u = self.unit()
        if u is None:
            return None
        est = u * size + (self.over() if new else 0.0)
        return est * self.drift if self.from_prior() else est

    def from_prior(self) -> bool:
        """Its costs are an earlier process's (it has run nothing here)."""
        return self.first is None and not self.seen and not self.new and self.prior_unit is not None

    def first_cost(self) -> float | None:
        """What building it and its first call cost (ms), when known."""
        if self.first is not None:
            return self.first[0]
        return self.prior_first_ms

    def known(self) -> bool:
        return self.unit() is not None

    def summary(self) -> dict[str, Any]:
        # `over` is a measurement only once a new shape was timed after a seen one (or the device declares per-shape
        # models, or it came measured from an earlier process): a nil taken on trust must not be cached as one
        over_known = bool(self.new and self.seen) or self.prior_over is not None or self.per_shape
        first = self.first[0] if self.first is not None else None
        compile_ms = self.prior_compile_ms if self.loaded or first is None else first
        load_ms = first if self.loaded else self.prior_load_ms
        over = self.over()
        if self.prior_over is not None and len(self.new) < 2:
            # one new-signature call here is not a measurement to replace an earlier process's: PP-OCRv4 rec's host
            # over was cached as 115 ms from its one new call in a process (9 ms before), and every later process
            # then sent rec to OpenVINO, slower per process than the host, never re-measuring the host's new shapes
            over = self.prior_over
        out: dict[str, Any] = {"unit": self.unit(), "over": over, "first_ms": compile_ms,
                               "over_known": over_known, "calls": self.run_count + (self.first is not None)}
        if load_ms is not None:
            out["load_ms"] = load_ms
        if self.files:
            out["files"] = list(self.files)
        return {k: (round(v, 9) if isinstance(v, float) else v) for k, v in out.items()}

    def load_first_priors(self, s: dict[str, Any], on_disk: Any) -> None:
        """Its first-call costs from an earlier process's summary `s`: a load while its compiled models' files
        are on disk (`on_disk(files)`), else a compile."""
        self.prior = dict(s)
        compile_ms, load_ms = s.get("first_ms"), s.get("load_ms")
        self.prior_compile_ms = float(compile_ms) if isinstance(compile_ms, (int, float)) else None
        self.prior_load_ms = float(load_ms) if isinstance(load_ms, (int, float)) else None
        self.files = [str(f) for f in s.get("files") or []]
        real, bought = s.get("realized"), s.get("bought")
        if isinstance(real, (list, tuple)) and len(real) == 3 and all(as_number(v) > 0 for v in real):
            self.prior_realized = (as_number(real[0]), as_number(real[1]), as_number(real[2]))
        if isinstance(bought, (list, tuple)) and len(bought) in (3, 5) and all(as_number(v) > 0 for v in bought[:3]):
            age, keep = (as_number(bought[3]), as_number(bought[4])) if len(bought) == 5 else (0.0, float(BOUGHT_KEEP))
            self.prior_bought = (as_number(bought[0]), as_number(bought[1]), as_number(bought[2]), age, keep)
        self.prior_first_ms = self.prior_compile_ms
        if self.files and on_disk(self.files):
            if self.prior_load_ms is not None:
                self.prior_first_ms = self.prior_load_ms
            elif self.prior_compile_ms is not None:
                self.prior_first_ms = LOAD_GUESS * self.prior_compile_ms
