"""The online policy behind `auto`: which candidate (the host or a device) runs the next call, from what each
has cost so far. Pure bookkeeping: no clock, no predictors (pdlite/api/auto_online.py runs the calls).

Costs (a candidate's model: pdlite/api/auto_costs.py). Every call's wall time is recorded against the candidate
that ran it, with the call's size (the elements of its feeds) and whether its signature (input shapes and dtypes)
was new to that candidate: a new signature costs a device a conversion and a compile (or a dynamic-shape
reshape), the host a plan. A candidate's model:

    seen(size) = unit * size            unit: median ms per element of its calls on signatures it had run
    new(size)  = seen(size) + over      over: median extra ms of its calls on signatures new to it

A candidate's first call (building it: loading, its first compile) is a one-time cost kept apart, and a repeat
of it gives its first `seen` sample. Until a new signature measures its `over`: a device that declares it
compiles per input shape is priced as its first run (less the build); one that declares dynamic shapes, at nil
(one that still pays per shape pays that once, then its model and the realized-cost rule send the calls back).

Choice. A call goes to the built candidate whose model says it is cheapest for this call (new to it or not); a
device only when it beats the host by MARGIN (5%), and only while what it really cost over the calls it ran is
within MARGIN of what the host's model says those calls would have cost the host. So a wrong model cannot keep
a slow device: the realized costs overrule it. Across processes too: what a device's calls really cost against
the host's model (`realized`) prices it when it is not built here, and a process whose device's first call loaded
its compiled model (a purchase) caches what all its calls cost there, the load included (`bought`): one that was
not faster than the host by MARGIN is not bought again by a stream not expected to be more than twice as long as
that process's, for the next BOUGHT_KEEP processes (then it is bought and judged again, and a second miss keeps it
twice as long, ...) (the model misses costs a process pays around the measured calls, e.g. a loaded model's first
run at each new shape).

Exploration, bounded. Trying a candidate (its first call), measuring its `over` on a new signature, and trying
one again after a while (the interval doubles each time) happen only while the exploration spent so far (what
those calls cost beyond the chosen candidate's estimate) plus the try's estimated cost stays within
EXPLORE_SHARE of the time the stream has taken (plus what earlier runs of the model left of their share, up to as
much again). A short stream (one image) stays on the host; a long one tries everything; a run never spends more
than twice that share exploring, except on a first call whose compile persists (below): over the model's runs,
exploration stays within EXPLORE_SHARE of their time all the same.

Known candidates (priors from the cache of an earlier process): switching to one not built yet costs its first
call again, so it is bought as in ski rental: once the savings its model says the calls so far have missed reach
that cost, or at once when those its model promises over the stream still expected (as long as the earlier
stream) do. At worst twice the better of the two, never a first call paid for a stream too short to repay it.

First calls: a compile, or a load. With a model cache (the compiled models persist, model_cache.py), a device's
first call in a later process loads what an earlier one compiled: the policy keeps both costs per candidate
(`first_ms`: compiling; `load_ms`: loading, measured when a first call loaded) with the cache files they wrote,
and prices the next first call as a load while those files are on disk (LOAD_GUESS of the compile until a load
was measured). A compile that persists is paid once for every later run: its exploration may then spend what
earlier runs of the model left of their share, not only up to this run's own.
"""
from __future__ import annotations

import statistics
from collections.abc import Hashable, Iterable
from typing import Any

from pdlite.api.auto_costs import BOUGHT_KEEP, LOAD_GUESS, Candidate, as_number

__all__ = ["BOUGHT_KEEP", "LOAD_GUESS", "OnlinePolicy"]  # (the cost model's constants, read by the tests too)

MARGIN = 1.05  # a device must beat the host by this factor (model and realized cost alike)
EXPLORE_SHARE = 0.1  # exploration costs at most this share of the stream's time so far (over this model's runs)
FIRST_GUESS = 5.0  # an untried candidate's first call, guessed as this many times the stream's mean call ...
FIRST_GUESS_MS = 500.0  # ... or at least this (building a device and its first compile), or what it cost last time
FIRST_PER_HOST = 25.0  # ... or less for a small model: this many times the host's first call (its plan and run)
REFRESH_EXTRA = 0.5  # a candidate is measured again only on a call its model prices within this share over the best
MIN_SIZE = 1.0
REUSE_CALLS = 7  # calls on the signature of the last decision take it again this many times (a fixed stream's
# calls cost no bookkeeping beyond recording their time), then it is made afresh
SURPRISE = 1.5  # a call this many times dearer than its model said ends the reuse of the last decision
PROBATION = 4  # the realized-cost rule judges a candidate once it ran this many calls (after its first)
PRIOR_CALLS = 12  # an earlier stream's share of repeated signatures weighs as this many calls of this one


class OnlinePolicy:
    """Which candidate runs each call (`pick`), from the costs `record` is told; see the module docstring."""

    def __init__(self, candidates: Iterable[str], host: str = "host") -> None:
        self.host = host
        self.cands: dict[str, Candidate] = {n: Candidate(n) for n in candidates}
        if host not in self.cands:
            self.cands = {host: Candidate(host), **self.cands}
        self.cands[host].built = True
        self.calls = 0
        self.elapsed_ms = 0.0
        self.explore_ms = 0.0
        self.stream_sigs: set[Hashable] = set()
        self.new_calls = 0  # calls whose signature the stream had not seen
        self.current = host
        # earlier processes on this model (the cache): their stream time and exploration; what they left of their
        # share carries over, up to this run's own share (a run spends at most twice its share) ...
        self.past_elapsed_ms = 0.0
        self.past_explore_ms = 0.0
        # ... and what a device's first call (build, first compile) last cost, on any model: the guess for an
        # untried one (mostly fixed costs: a small model's calls say little about it)
        self.first_ms_seen: dict[str, float] = {}
        self.expected_calls = 0  # the stream length an earlier process saw ...
        self.prior_new_share = 0.0  # ... the share of its calls on new signatures, and their median size
        self.prior_size = 0.0
        self._pending: tuple[str, float] | None = None
        self.persistent = False  # the devices' compiled models persist (a model cache): compiles are paid once
        self._fast: tuple[Hashable, str, int] | None = None  # (signature, choice, calls it may still decide)  # (explored candidate, the estimate it displaced)

    # -- the choice ---------------------------------------------------------------------------------
    def usable(self) -> list[Candidate]:
        return [c for c in self.cands.values() if c.refused is None]

    def _sync_drift(self) -> None:
        """Priors were measured under that process's load: scale them by the host's speed now against then (the
        host's own samples here over its prior), so a device known from before is compared at today's speed."""
        h = self.cands[self.host]
        drift = 1.0
        if h.prior_unit and (h.seen or h.new or h.first is not None):
            own = h.unit()
            if own:
                drift = own / h.prior_unit
        for c in self.cands.values():
            c.drift = drift

    def estimates(self, sig: Hashable, size: float) -> dict[str, float]:
        self._sync_drift()
        size = max(float(size), MIN_SIZE)
        out = {}
        for c in self.usable():
            e = c.estimate(size, sig not in c.sigs)
            if e is not None:
                out[c.name] = e
        return self._as_realized(out)

    def realized(self, c: Candidate) -> tuple[float, float, float] | None:
        """What `c`'s calls after its first really cost (ms), what the host's model says they would have cost the
        host, and how many: this process's calls, with earlier processes' weighing as the calls it lacks here to
        PROBATION."""
        h = self.cands[self.host]
        spent = host = 0.0
        n: float = len(c.runs)  # calls here, plus earlier processes' weighted share below
        if n and h.known():
            spent, host = self._runs_against_host(c)
        if n < PROBATION and c.prior_realized is not None:
            ps, ph, pn = c.prior_realized
            w = min(pn, PROBATION - n) / pn
            spent, host, n = spent + w * ps, host + w * ph, n + w * pn
        return (spent, host, n) if spent > 0 and host > 0 else None

    def _runs_against_host(self, c: Candidate) -> tuple[float, float]:
        """What `c`'s recent runs (after its first call) cost, and what the host's model says they would have cost
        the host (ms)."""
        h = self.cands[self.host]
        return sum(ms for ms, _, _ in c.runs), sum(h.estimate(s, hn) or 0.0 for _, s, hn in c.runs)

    def bought(self, c: Candidate) -> tuple[float, float, float, float, float] | None:
        """Whether buying `c` paid, the last time a process did (its first call loaded its compiled model): what all
        its calls there cost, the load included, what the host's model says they would have cost the host, the
        calls of that process's stream, the processes since (this one counted), and for how many processes one
        that did not pay keeps it off (twice the last's after a second miss)."""
        h = self.cands[self.host]
        prior = c.prior_bought
        if c.loaded and c.first is not None and h.known():
            spent, host = c.first[0], h.estimate(c.first[1], c.first_host_new) or 0.0
            if c.runs:  # the recent runs stand for all of them (a long stream's load is spread over all its calls)
                scale = c.run_count / len(c.runs)
                runs, runs_host = self._runs_against_host(c)
                spent, host = spent + scale * runs, host + scale * runs_host
            keep = 2 * prior[4] if prior is not None and prior[0] * MARGIN > prior[1] else float(BOUGHT_KEEP)
            return (spent, host, float(self.calls), 0.0, keep) if host > 0 else None
        return None if prior is None else (*prior[:3], prior[3] + 1, prior[4])

    def _as_realized(self, est: dict[str, float]) -> dict[str, float]:
        """A candidate not built here is priced at least as dear, against the host, as its calls really were in the
        processes that ran it: its model (unit, over) misses what those processes paid around the measured calls (a
        loaded model's first runs at each new shape, threads that disturb each other), and buying it on the model
        alone sent every later `pdlite ocr` run's rec to OpenVINO, slower for it than the host."""
        if self.host not in est:
            return est
        for name in est:
            c = self.cands[name]
            real = None if name == self.host or c.built else self.realized(c)
            if real is not None and real[2] >= PROBATION:
                est[name] = max(est[name], est[self.host] * real[0] / real[1])
        return est

    def trusted(self, name: str) -> bool:
        """The MARGIN rule on realized costs: over the calls `name` ran (after its first; judged from PROBATION
        calls on, a wrong model costs at most that many), it cost at most MARGIN times what the host's model says
        those calls would have cost the host."""
        c, h = self.cands[name], self.cands[self.host]
        if name == self.host or len(c.runs) < PROBATION or not h.known():
            return True
        key = (len(c.runs), c.runs[-1], h.unit(), h.over())
        if c.__dict__.get("_trust", (None,))[0] != key:
            spent = sum(ms for ms, _, _ in c.runs)
            host = sum(h.estimate(s, hn) or 0.0 for _, s, hn in c.runs)
            c.__dict__["_trust"] = (key, spent <= MARGIN * host)
        return c.__dict__["_trust"][1]

    def exploit(self, est: dict[str, float]) -> str:
        """The cheapest built candidate for this call; a device only by MARGIN over the host and while trusted."""
        if self.host not in est:
            return self.host
        best, best_e = self.host, est[self.host]
        for name, e in sorted(est.items(), key=lambda kv: kv[1]):
            c = self.cands[name]
            if name == self.host or not c.built:
                continue
            if e * MARGIN < est[self.host] and e < best_e and self.trusted(name):
                best, best_e = name, e
        return best

    def pick(self, sig: Hashable, size: float) -> str:
        """The candidate that runs the call with signature `sig` and `size` elements."""
        fast = self._fast
        if fast is not None and fast[0] == sig and fast[2] > 0:  # the same input as the last calls: as then
            self._fast = (sig, fast[1], fast[2] - 1)
            return fast[1]
        h = self.cands[self.host]
        est = self.estimates(sig, size)
        if not h.known():
            return self.host  # the host's first call: the reference every device is checked against
        best = self.exploit(est)
        buy = self._buy(est, best)
        if buy is not None:
            return buy
        x = self._explore(sig, size, est, best)
        if x is not None:
            self._pending = (x, est[best])
            return x
        self._fast = (sig, best, REUSE_CALLS)
        return best

    def _buy(self, est: dict[str, float], best: str) -> str | None:
        """A candidate known from an earlier process, not built yet, once building it pays: the savings its model
        promises over the calls still expected (as many as the earlier stream had, at least as many as so far),
        or those the calls so far missed, reach what its first call costs beyond a call. (A device faster on shapes
        it has run but dearer on new ones gets the new ones when their expected repeats repay it: `_invests`.)"""
        waiting = [c for c in self.usable() if not c.built and c.name in est]
        if not waiting or self.cands[self.host].from_prior():
            return None  # (the host runs a call here first: the earlier process's costs are taken at today's speed)
        horizon = max(self.expected_calls - self.calls, self.calls)
        mixed = self.mixed_estimates()  # per call of the stream's usual size, new signatures in their share
        for c in waiting:
            if c.name not in mixed or best not in mixed \
                    or not mixed[c.name] * MARGIN < mixed[best]:
                continue
            paid = self.bought(c)
            if paid is not None and paid[0] * MARGIN > paid[1] and max(self.expected_calls, self.calls) <= 2 * paid[2] \
                    and paid[3] <= paid[4]:
                continue  # the last process that bought it was slower than the host would have been: not again
            cost = max((c.prior_first_ms or 0.0) - est[c.name], 0.0)
            promise = (mixed[best] - mixed[c.name]) * horizon
            if c.regret_ms >= cost or promise >= cost:  # a purchase its promise repays, not exploration
                return c.name
        return None

    def _explore(self, sig: Hashable, size: float, est: dict[str, float], best: str) -> str | None:
        now = EXPLORE_SHARE * (self.elapsed_ms + est[best])
        left = max(EXPLORE_SHARE * self.past_elapsed_ms - self.past_explore_ms, 0.0)
        budget = now + min(left, now) - self.explore_ms
        # a first call whose compile persists (a model cache) is paid once for every later run: it may spend all
        # that earlier runs of the model left of their share
        lasting = now + left - self.explore_ms if self.persistent else budget
        changing = len(self.stream_sigs) > 1
        tries: list[tuple[float, str, float]] = []  # (extra cost, candidate, the budget it may use)
        for c in self.usable():
            if c.name == best:
                continue
            if not c.built:
                if c.known():
                    continue  # known from an earlier process: bought (above), not explored
                if c.prior_first_ms is not None:  # this model's own first call, measured before
                    guess = c.prior_first_ms
                else:
                    guess = max(FIRST_GUESS * self.mean_call_ms(), self.first_ms_seen.get(c.name, self._first_guess()))
                tries.append((guess - est[best], c.name, lasting))
            elif c.name in est:
                extra = est[c.name] - est[best]
                could_win = (c.estimate(size, False) or 0.0) * MARGIN < est[self.host]
                learn_over = sig not in c.sigs and changing and not (c.new and c.seen or c.prior_over is not None) \
                    and could_win
                stale = self.calls - c.last_call >= c.refresh and extra <= REFRESH_EXTRA * est[best]
                if learn_over or stale or self._invests(c, sig, size, est, best):
                    tries.append((extra, c.name, budget))
        fits = [(max(extra, 0.0), n) for extra, n, limit in tries if max(extra, 0.0) <= limit]  # the cheapest first
        return min(fits)[1] if fits else None

    def _first_guess(self) -> float:
        """An untried device's first call (its build, conversion and compile) when nothing measured it on any model:
        FIRST_GUESS_MS, less for a model whose host's first call is small (ERNIE-like encoder: 2 ms on the host, 25-60
        ms a device's first call; a floor of 500 ms kept a 1000-call stream on the host, 5x slower than a device)."""
        h = self.cands[self.host]
        return FIRST_GUESS_MS if h.first is None else min(FIRST_GUESS_MS, FIRST_PER_HOST * h.first[0])

    def expected_repeats(self) -> float:
        """How many more calls a signature the stream has seen is expected to get: the calls still expected (as
        many as an earlier process's stream had, at least as many as so far) that repeat a signature (the share
        of the stream's calls, pooled with the earlier stream's as PRIOR_CALLS calls), spread over the signatures
        seen."""
        if not self.stream_sigs:
            return 0.0
        rate = self.new_rate()
        remaining = max(self.expected_calls - self.calls, self.calls)
        return (1.0 - rate) * remaining / len(self.stream_sigs)

    def _invests(self, c: Candidate, sig: Hashable, size: float, est: dict[str, float], best: str) -> bool:
        """Whether to run this signature, new to built device `c`, on it though `best` is cheaper now: what it costs
        `c` now and on its expected repeats (cheaper there than on `best`) beats `best` by MARGIN. Its cost over
        `best`'s is exploration (bounded), and the MARGIN rule does not count it against `c`."""
        if sig in c.sigs or best != self.host or not self.trusted(c.name):
            return False
        seen_c, seen_best = c.estimate(size, False), self.cands[best].estimate(size, False)
        if seen_c is None or seen_best is None or not seen_c * MARGIN < seen_best:
            return False
        r = self.expected_repeats()
        return (est[c.name] + r * seen_c) * MARGIN < est[best] + r * seen_best

    # -- what happened -------------------------------------------------------------------------------
    def record(self, name: str, sig: Hashable, size: float, ms: float, *, extra_ms: float = 0.0,
               build_ms: float = 0.0, loaded: bool = False) -> None:
        """Candidate `name` ran a call (`sig`, `size` elements) in `ms` (of which `build_ms` building it);
        `extra_ms`: checking it against the host cost that much more (exploration); `loaded`: on its first call,
        its compiled models were loaded from the model cache (the cost of a load, not of a compile)."""
        size = max(float(size), MIN_SIZE)
        c, h = self.cands[name], self.cands[self.host]
        waiting = [o for o in self.usable() if not o.built and o.known()]
        if waiting:  # what the calls would have saved on a known candidate not built yet
            est = self.estimates(sig, size)
            ran = est.get(name)
            for o in waiting:
                e = o.estimate(size, True)
                if ran is not None and e is not None and o.name in est:
                    o.regret_ms += max(0.0, ran - max(e, est[o.name]))
        expected = c.estimate(size, sig not in c.sigs)
        if expected is None or ms > SURPRISE * expected:
            self._fast = None  # a call dearer than its model said: decide afresh on the next
        stream_new = sig not in self.stream_sigs
        self.stream_sigs.add(sig)
        self.new_calls += stream_new
        if not c.sigs:  # its first call in this process (a device: built for it)
            self._fast = None  # news: the next call is decided afresh (the host's first call frees a purchase)
            c.first, c.build_ms, c.loaded = (ms, size), build_ms, loaded
            c.first_host_new, c.first_call = sig not in h.sigs, self.calls
            if name != self.host and not loaded:  # a compile: the guess for this device on another model
                self.first_ms_seen[name] = ms
        elif sig in c.sigs:
            c.seen.append((ms, size))
            c.runs.append((ms, size, sig not in h.sigs))
            c.run_count += 1
        else:
            c.run_count += 1
            c.new.append((ms, size))
            # an explored new signature: its cost over the best's then is exploration, not the device's record
            pending = self._pending[1] if self._pending is not None and self._pending[0] == name else ms
            c.runs.append((min(ms, pending), size, sig not in h.sigs))
        c.built = True
        c.sigs.add(sig)
        if self._pending is not None and self._pending[0] == name:
            self.explore_ms += max(0.0, ms - self._pending[1])
            if self.calls - c.last_call >= c.refresh:
                c.refresh *= 2
        self.explore_ms += extra_ms
        self._pending = None
        c.last_call = self.calls
        self.calls += 1
        self.elapsed_ms += ms + extra_ms
        self.current = name

    def record_untimed(self, name: str, ms: float) -> None:
        """A call that `name` ran on the signature the last decision is reused for, not timed (the runner times one
        call in SAMPLE_EVERY once the decision settled): counted at `ms`, its estimate."""
        c = self.cands[name]
        c.run_count += 1
        c.last_call = self.calls
        self.calls += 1
        self.elapsed_ms += ms

    def settled(self, sig: Hashable, size: float, name: str) -> float | None:
        """After a call `name` ran on `sig`: when the decision for `sig` is being reused (`pick`'s fast path) and
        nothing waits on this call's outcome, `name`'s estimate for it (ms): the calls that repeat it need not be
        timed, one in SAMPLE_EVERY is; else None."""
        fast = self._fast
        if fast is None or fast[0] != sig or fast[1] != name or self._pending is not None:
            return None
        c = self.cands[name]
        return c.estimate(max(float(size), MIN_SIZE), False) if sig in c.sigs and c.seen else None

    def record_seen(self, name: str, size: float, ms: float, spent_ms: float | None = None) -> None:
        """A repeat of the call `name` just ran (same signature), timed: a seen-signature sample; exploration
        (`spent_ms`: what the repeats cost, when more than the one sample)."""
        self.cands[name].seen.append((ms, max(float(size), MIN_SIZE)))
        spent = ms if spent_ms is None else spent_ms
        self.explore_ms += spent
        self.elapsed_ms += spent

    def refuse(self, name: str, why: str) -> None:
        self.cands[name].refused = why
        self._fast = None

    # -- reporting and the cache ---------------------------------------------------------------------
    def mean_call_ms(self) -> float:
        """What a call of the stream cost on average so far (the unit of the guess of a first call's cost)."""
        return self.elapsed_ms / self.calls if self.calls else 0.0

    def usual_size(self) -> float:
        """The median size of the stream's calls (an earlier process's, before this one has its own)."""
        sizes = [s for c in self.cands.values() for _, s, _ in c.runs]
        if len(sizes) < 4 and self.prior_size:
            return self.prior_size
        sizes += [c.first[1] for c in self.cands.values() if c.first is not None]
        return statistics.median(sizes) if sizes else MIN_SIZE

    def new_rate(self) -> float:
        """The share of the stream's calls on signatures it had not seen, pooled with an earlier process's stream
        (which weighs as PRIOR_CALLS calls, fewer when it had fewer)."""
        prior = min(self.expected_calls, PRIOR_CALLS) if self.prior_new_share else 0
        if not self.calls + prior:
            return 0.0
        return (self.new_calls + self.prior_new_share * prior) / (self.calls + prior)

    def mixed_estimates(self) -> dict[str, float]:
        """Each known candidate's estimated ms for a call of the stream's median size, seen and new signatures
        mixed in the stream's proportion (candidates not built count only with a prior)."""
        size = self.usual_size()
        rate = self.new_rate()
        return self._as_realized(
            {c.name: (1 - rate) * (c.estimate(size, False) or 0.0) + rate * (c.estimate(size, True) or 0.0)
             for c in self.usable() if c.known() and (c.built or c.prior_first_ms is not None)})

    def best_now(self) -> str:
        """The candidate the policy keeps for the stream as it goes (the host unless a device beats it by
        MARGIN and is trusted)."""
        est = self.mixed_estimates()
        if self.host not in est:
            return self.host
        best = min(est, key=est.__getitem__)
        return best if best != self.host and est[best] * MARGIN < est[self.host] and self.trusted(best) \
            else self.host

    def to_json(self) -> dict[str, Any]:
        known = {n: c.summary() if c.known() else c.prior for n, c in self.cands.items()
                 if c.refused is None and (c.known() or c.prior)}  # a device not run here: what was known
        for n, s in known.items():
            c = self.cands[n]
            real, paid = (self.realized(c), self.bought(c)) if n != self.host else (None, None)
            if isinstance(s, dict) and real is not None:
                s = known[n] = {**s, "realized": [round(v, 3) for v in real]}
            if isinstance(s, dict) and paid is not None:
                known[n] = {**s, "bought": [round(v, 3) for v in paid]}
        return {"candidates": known,
                "refused": {n: c.refused for n, c in self.cands.items() if c.refused is not None},
                "calls": self.calls, "new_share": round(self.new_calls / max(self.calls, 1), 4),
                "elapsed_ms": round(self.past_elapsed_ms + self.elapsed_ms, 3),
                "explore_ms": round(self.past_explore_ms + self.explore_ms, 3),
                "size": self.usual_size(),
                "best": self.best_now()}

    def load_priors(self, data: dict[str, Any], on_disk: Any = lambda files: False) -> None:
        """Seed the candidates with what an earlier process measured (`to_json`); `on_disk(files)`: whether those
        model-cache files are all there (a first call then loads them)."""
        for name, s in (data.get("candidates") or {}).items():
            c = self.cands.get(name)
            if c is None or not isinstance(s, dict) or not isinstance(s.get("unit"), (int, float)):
                continue
            if name != self.host:
                c.load_first_priors(s, on_disk)
                if not s.get("over_known"):
                    continue  # its cost of a new shape was never measured: it is explored again, not bought
            c.prior_unit = float(s["unit"])
            c.prior_over = float(s.get("over") or 0.0)
        self.past_elapsed_ms = as_number(data.get("elapsed_ms"))
        self.past_explore_ms = as_number(data.get("explore_ms"))
        calls = data.get("calls")
        self.expected_calls = int(calls) if isinstance(calls, int) else 0
        size = data.get("size")
        self.prior_size = float(size) if isinstance(size, (int, float)) else 0.0
        share = data.get("new_share")
        self.prior_new_share = float(share) if isinstance(share, (int, float)) else 0.0
        for name, why in (data.get("refused") or {}).items():
            if name in self.cands and name != self.host:
                self.cands[name].refused = str(why)
