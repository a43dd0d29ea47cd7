"""`set_nnadapter_device_names(["auto"])` in a predictor: every call runs on the candidate the online policy
(pdlite/api/auto_policy.py) picks, timed, new shapes included; devices checked against the host on their first
calls; what was learnt cached for the next process.

The predictor is built for the host (the reference); the devices are built when the policy first picks them. A
device's outputs on its first VERIFY_SIGNATURES signatures are compared with the host's (pdlite/api/auto.py's
tolerances); one that differs, or fails to build, is refused for good and the host's outputs are used.

Fixed shapes. When the stream's first FIXED_CALLS calls share one signature (and nothing is known yet), the
careful paired measurement of `choose_device` decides on that input (what `pdlite bench --device auto` and
benchmarks/compare.py use), cached per input shape; the stream goes on online from there, so shapes that start
changing later are still priced.

Settled calls. Once a decision is reused (the same signature as the calls before it, each as dear as its model
said), one call in SAMPLE_EVERY is timed and goes through the policy; the others run straight on the candidate,
counted at its estimate (no timer, no cost model: pdlite's own time per call ~3.5 us instead of ~17, ~2 on the
device's predictor alone). A new signature, a timed call dearer than its model said (SURPRISE), or a decision
made afresh ends it at once.

Cache: `<cache dir>/auto/choices.json` (pdlite/api/auto.py), keyed on the model's content (not its path), the
threads, the candidates, the device properties and the kind of workload ("changing", or "fixed" with the shapes).
With a model cache (the config's `set_nnadapter_model_cache_dir`, or the `pdlite` command line's default) each
device's entry also names the files its compiled models were written to, and whether its first call here loaded
them: a later process prices that device's first call as a load while those files are on disk.
"""
from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pdlite import __version__
from pdlite.api import auto
from pdlite.api.auto import (
    HOST,
    AutoChoice,
    agreement,
    apply_device,
    cache_file,
    cache_key,
    copy_config,
    installed_devices,
    load_choice,
    outputs_agree,
    store_choice,
    variant_name,
    variants_of,
)
from pdlite.api.auto_policy import OnlinePolicy
from pdlite.errors import InputError, PdliteError
from pdlite.nnadapter.model_cache import cache_state, configured_dir

VERIFY_SIGNATURES = 2  # a device's outputs are checked against the host's on this many distinct signatures
FIXED_CALLS = 3  # this many calls on one signature first: the careful fixed-shape measurement decides
STORE_EVERY_MS = 2000.0  # the learnt costs are written after this much stream time, on a change, and at the end
SAMPLE_EVERY = 8  # once a decision settled (its signature repeats, its calls as expected), one call in this many is
# timed and goes through the policy; the others run straight on the candidate, counted at its estimate


def timed(name: str, sig: tuple | None, fn: Callable[[], Any]) -> float:
    """Run `fn` (candidate `name`'s call on `sig`, or its build when sig is None); the wall time in ms. Tests put
    a timer of theirs in `AutoRunner.timer` to give each candidate scripted costs."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _dynamic(device: str) -> bool:
    """Whether the device's driver declares that one compiled model serves every input shape."""
    from pdlite.nnadapter.registry import DRIVERS

    drv = DRIVERS.get(device) if device in DRIVERS else None
    return bool(getattr(drv, "dynamic_shapes", False))


def _signature(feeds: dict[str, Any]) -> tuple:
    return tuple((k, tuple(getattr(v, "shape", ())), getattr(v, "dtype", None)) for k, v in feeds.items())


def _size(sig: tuple) -> float:
    return float(sum(math.prod(shape) for _, shape, _ in sig))


def _on_disk(files: list[str], cache_dir: str | None) -> bool:
    """Whether every one of these model-cache files is there, in the model cache this process uses (a device's
    first call then loads, not compiles)."""
    if not files or not cache_dir:
        return False
    here = os.path.abspath(cache_dir)
    return all(os.path.dirname(os.path.abspath(f)) == here and os.path.isfile(f) for f in files)


def _final_store(lock: threading.Lock, policy: OnlinePolicy, base: Any, key: str, devices_key: str,
                 path: Any) -> None:
    """What the stream learnt, written when its predictor goes (or the process ends): the whole stream's."""
    with lock:
        if policy.calls and len(policy.stream_sigs) > 1:
            store_choice(base, key, policy.to_json(), path)
        if policy.first_ms_seen:
            store_choice(base, devices_key, dict(policy.first_ms_seen), path)


class AutoRunner:
    """Runs a predictor's calls for the auto device (shared by its clones; decisions under one lock)."""

    def __init__(self, base: Any, host: Any, build: Callable[[Any], Any],
                 candidates: list[str] | None = None) -> None:
        self.base = base  # a copy of the user's config (device "auto")
        self.host = host  # the host predictor: the reference
        self.build = build
        cands = candidates if candidates is not None else [HOST] + installed_devices()
        self.policy = OnlinePolicy(cands, HOST)
        self.preds: dict[str, Any] = {HOST: host}
        self.verified: dict[str, int] = {}
        self.variants: dict[str, str] = {}  # device -> the variant the fixed-shape measurement chose (its builds use it)
        self.lock = threading.Lock()
        self.timer = timed
        self.fixed: AutoChoice | None = None  # the fixed-shape measurement's choice, when the stream began fixed
        self.cached = False
        self._first_sigs: list[tuple] = []
        self._online = False  # True once the start (fixed measurement or not) is decided
        self._last_best = HOST
        self._stored_at = 0.0  # the stream time (policy.elapsed_ms) of the last write to the cache
        self._rel = agreement(host.program)
        # the settled decision: (signature, candidate, its predictor, its estimate in ms) and the calls on it left
        # before the next timed one
        self._settled: tuple[tuple, str, Any, float] | None = None
        self._untimed = 0
        self._changing_key = cache_key(base, {}, list(self.policy.cands), "changing")
        for name, c in self.policy.cands.items():
            c.per_shape = name != HOST and not _dynamic(name)
        # compiled models persist: a device's compile is paid once for this and every later process
        model_cache = configured_dir(base.options.get("nnadapter_model_cache_dir"))
        self.policy.persistent = model_cache is not None
        self.on_disk = lambda files: _on_disk(files, model_cache)
        self._devices_key = f"devices|first_ms|threads={base.threads()}|{__version__}"
        self._path = cache_file(base)  # fixed now: the process's environment may differ when the last write comes
        weakref.finalize(self, _final_store, self.lock, self.policy, base, self._changing_key, self._devices_key,
                         self._path)
        ratios = load_choice(base, self._devices_key)
        if isinstance(ratios, dict):
            self.policy.first_ms_seen.update({k: float(v) for k, v in ratios.items() if isinstance(v, (int, float))})
        hit = load_choice(base, self._changing_key)
        if isinstance(hit, dict) and hit.get("candidates"):
            self.policy.load_priors(hit, lambda files: self.on_disk(files))
            self.cached = self._online = True
            # the candidates it measured agreed with the host then
            self.verified = {d: VERIFY_SIGNATURES for d in hit["candidates"]}

    # -- one call --------------------------------------------------------------------------------
    def run(self, pred: Any, run_host: Callable[[Any], None]) -> None:
        """Run `pred`'s call (its inputs as set on this thread) on the candidate the policy picks; the outputs
        land in `pred`'s output handles. `run_host(pred)` runs it on the host (pred itself)."""
        feeds = {t.name: t.raw() for t in pred._inputs}
        if any(v is None for v in feeds.values()):
            run_host(pred)  # reports the missing input
            return
        sig = _signature(feeds)
        settled = self._settled
        if settled is not None and settled[0] == sig:
            with self.lock:
                light = self._settled is settled and self._untimed > 0
                if light:
                    self._untimed -= 1
                    self.policy.record_untimed(settled[1], settled[3])
            if light:
                if settled[1] == HOST:
                    run_host(pred)
                    return
                try:
                    self._run_on(settled[2], pred, feeds)
                    return
                except InputError:
                    raise
                except PdliteError as e:  # as on a timed call: refused for good, the host answers
                    with self.lock:
                        self._settled = None
                        self.policy.refuse(settled[1], f"{type(e).__name__}: {e}")
                        self.preds.pop(settled[1], None)
                    run_host(pred)
                    return
        size = _size(sig)
        with self.lock:
            self._settled = None
            if not self._online:
                self._start(sig, feeds)
            name = self.policy.pick(sig, size)
            cand, build_ms = self._candidate(name)
            if cand is None:  # it could not be built: refused; the host runs this call
                name, cand = HOST, self.host
            first = not self.policy.cands[name].sigs
            verify = name != HOST and self.verified.get(name, 0) < VERIFY_SIGNATURES
        host_outs, extra = None, 0.0
        if verify:  # the host's outputs first: the reference for the device's
            extra = self.timer(HOST, sig, lambda: run_host(pred))
            host_outs = [t.raw() for t in pred._outputs]
        if name == HOST:
            ms = self.timer(HOST, sig, lambda: run_host(pred))
        else:
            try:
                ms = self.timer(name, sig, lambda: self._run_on(cand, pred, feeds))
            except InputError:
                raise  # the feed's fault: the host would refuse it too
            except PdliteError as e:  # the device failed on this input: refused for good, the host answers
                with self.lock:
                    self.policy.refuse(name, f"{type(e).__name__}: {e}")
                    self.preds.pop(name, None)
                run_host(pred)
                return
        ms += build_ms
        loaded = False
        if first and name != HOST:  # did its first call load its compiled models (a model cache), or compile?
            files, loaded = cache_state(cand.runtime_program)
            if files:
                self.policy.cands[name].files = files
        with self.lock:
            if host_outs is not None:
                why = outputs_agree([np.asarray(t.raw()) for t in pred._outputs],
                                    [np.asarray(h) for h in host_outs], *self._rel)
                if why is not None:  # refused for good; the host's outputs stand
                    self.policy.refuse(name, why)
                    self.preds.pop(name, None)
                    for t, v in zip(pred._outputs, host_outs):
                        t._set(v)
                    self.policy.record(HOST, sig, size, extra, extra_ms=ms)
                    self._after()
                    return
                self.verified[name] = self.verified.get(name, 0) + 1
            self.policy.record(name, sig, size, ms, extra_ms=extra, build_ms=build_ms, loaded=loaded)
        if first and name != HOST and self.policy.cands[name].prior_unit is None:
            # its first call held its build and first compile: one more run gives what a seen signature costs
            # (unless an earlier process measured that); one dearer than the host's estimate is run once more and the
            # faster kept (warm-up: OpenVINO's second run after a compile took up to 4x its later ones, and one slow
            # sample left a faster device unused for REFRESH_CALLS calls)
            again = self.timer(name, sig, lambda: self._run_on(cand, pred, feeds))
            spent = again
            with self.lock:
                host_ms = self.policy.estimates(sig, size).get(HOST)
            if host_ms is not None and again > host_ms:
                twice = self.timer(name, sig, lambda: self._run_on(cand, pred, feeds))
                spent, again = spent + twice, min(again, twice)
            with self.lock:
                self.policy.record_seen(name, size, again, spent_ms=spent)
        with self.lock:
            self._after()
            if not first and not verify and self._online:  # (the stream's start decided: fixed or not)
                est = self.policy.settled(sig, size, name)
                if est is not None:
                    self._settled, self._untimed = (sig, name, cand, est), SAMPLE_EVERY - 1

    @staticmethod
    def _run_on(cand: Any, pred: Any, feeds: dict[str, Any]) -> None:
        """Run `feeds` on candidate predictor `cand`; its outputs land in `pred`'s output handles. A candidate that is
        one device subgraph takes the feeds straight (its direct runner, as its own run() would: no handles set)."""
        direct = getattr(cand, "_direct", None)
        if direct is not None and cand._hook is None:
            with cand._lock:
                outs = direct(feeds)
            if outs is not None:  # (None: a signature its general path must see first)
                for t, v in zip(pred._outputs, outs):
                    t._set(v)
                return
        for t in cand._inputs:
            t._set(feeds[t.name])
        cand.run()
        for t, c in zip(pred._outputs, cand._outputs):
            t._set(c.raw())

    def _candidate(self, name: str) -> tuple[Any, float]:
        """`name`'s predictor and what building it cost now (ms; 0 when built before), or None when it cannot be
        built (then refused, with the reason)."""
        if name in self.preds:
            return self.preds[name], 0.0
        cfg = copy_config(self.base)
        built: list[Any] = []
        try:
            apply_device(cfg, variant_name(name, self.variants[name]) if name in self.variants else name)
            ms = self.timer(name, None, lambda: built.append(self.build(cfg)))
        except PdliteError as e:
            self.policy.refuse(name, f"{type(e).__name__}: {e}")
            return None, 0.0
        self.preds[name] = built[0]
        return built[0], ms

    def _start(self, sig: tuple, feeds: dict[str, Any]) -> None:
        """The stream's first calls: a cached fixed-shape choice for this input is taken at once; FIXED_CALLS calls
        on one signature get the careful fixed-shape measurement; another signature among them: online."""
        self._first_sigs.append(sig)
        if len(set(self._first_sigs)) > 1:
            self._online = True
            return
        cands = list(self.policy.cands)
        key = cache_key(self.base, feeds, cands + variants_of(self.base, cands), "fixed")  # as choose_device's
        if len(self._first_sigs) == 1:
            hit = load_choice(self.base, key)
            if isinstance(hit, dict) and hit.get("device") in self.policy.cands:
                self._adopt_fixed(AutoChoice(hit["device"], dict(hit.get("medians_ms", {})),
                                             dict(hit.get("refused", {})), True,
                                             variant=str(hit.get("variant") or "")), sig, feeds)
        elif len(self._first_sigs) >= FIXED_CALLS:
            per_call = self.policy.elapsed_ms / max(self.policy.calls, 1)
            usable = [c.name for c in self.policy.usable()]
            choice = auto.choose_device(self.base, feeds, self.build, candidates=usable, keep=True,
                                        rounds=5 if per_call < 50 else 2)
            self._adopt_fixed(choice, sig, feeds)

    def _adopt_fixed(self, choice: AutoChoice, sig: tuple, feeds: dict[str, Any]) -> None:
        """Seed the policy with a fixed-shape choice: its medians as the candidates' costs on a seen `sig`."""
        self.fixed, self._online = choice, True
        self.policy._fast = None  # the calls before it decided nothing
        size = max(_size(sig), 1.0)
        for name, why in choice.refused.items():  # (a variant's refusal is not its device's)
            if name in self.policy.cands and name not in (HOST, choice.device):
                self.policy.refuse(name, why)
        for name, ms in choice.medians_ms.items():
            c = self.policy.cands.get(name)
            if c is not None:
                c.prior_unit = float(ms) / size
        if choice.device != HOST:
            self.verified[choice.device] = VERIFY_SIGNATURES  # checked against the host by the measurement
            c = self.policy.cands[choice.device]
            if choice.variant:  # the device runs as that variant here (its measured or later-built predictor)
                self.variants[choice.device] = choice.variant
                if choice.key in choice.medians_ms:
                    c.prior_unit = float(choice.medians_ms[choice.key]) / size
            if choice.predictor is not None:
                self.preds[choice.device] = choice.predictor
                c.built = True
                c.first = (0.0, size)  # its build and first call were the measurement's
                c.sigs.add(sig)
                c.seen.append((float(choice.medians_ms[choice.key]), size))
            else:
                c.prior_first_ms = 0.0  # a cached fixed choice: taken at once, as before
        choice.predictor = None

    def _store(self) -> None:
        if len(self.policy.stream_sigs) > 1:
            store_choice(self.base, self._changing_key, self.policy.to_json(), self._path)
        if self.policy.first_ms_seen:  # what a first call cost on each device, for any model's first guess
            store_choice(self.base, self._devices_key, dict(self.policy.first_ms_seen), self._path)

    def _after(self) -> None:
        """Write what was learnt to the cache when the calls move to another candidate and every STORE_EVERY_MS of
        the stream (and when the predictor goes: _final_store; a stream that stayed on one signature is cached as a
        fixed one, by choose_device). A write costs a few ms: a fast stream must not pay one every few calls."""
        n, current = self.policy.calls, self.policy.current
        if current != self._last_best and n > 1 or self.policy.elapsed_ms - self._stored_at >= STORE_EVERY_MS:
            self._last_best, self._stored_at = current, self.policy.elapsed_ms
            self._store()

    # -- reporting -------------------------------------------------------------------------------
    def choice(self) -> AutoChoice:
        """Where the calls go now, each candidate's estimated ms per call of the stream's usual size (seen and new
        signatures in the stream's proportion), the calls each ran, and the candidates refused."""
        with self.lock:
            p = self.policy
            est = p.mixed_estimates()
            calls = {c.name: c.run_count + (c.first is not None) for c in p.cands.values() if c.sigs}
            refused = {c.name: c.refused for c in p.cands.values() if c.refused is not None}
            cached = self.cached or bool(self.fixed is not None and self.fixed.cached)
            return AutoChoice(p.best_now(), {k: round(v, 4) for k, v in est.items()}, refused, cached, calls=calls)
