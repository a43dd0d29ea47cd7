"""Predictors under threads (clone, one predictor shared, BLAS thread counts) and copy semantics."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from pdlite.lite import CxxConfig, MobileConfig, create_paddle_predictor
from pdlite.runtime import threads as rt_threads
from tests.conftest import assert_close_rel, load_case, model_dir, on_threads

NAME = "ppocr_cls_v2"


def _cxx(name: str = NAME, **options):
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(name)))
    for k, v in options.items():
        if k == "devices":
            cfg.set_nnadapter_device_names(v)
        else:
            cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


def _light(tmp_path, name: str = NAME):
    nb = _cxx(name).save_optimized_model(str(tmp_path / "m"))
    cfg = MobileConfig()
    cfg.set_model_from_file(nb)
    return create_paddle_predictor(cfg)


def _inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    x = load_case(NAME)[0]["x"]
    rng = np.random.default_rng(seed)
    return [(x + 0.2 * rng.standard_normal(x.shape)).astype(np.float32) for _ in range(n)]


def _handles_run(pred, x: np.ndarray) -> np.ndarray:
    pred.get_input(0).from_numpy(x)
    pred.run()
    return pred.get_output(0).numpy()


@pytest.mark.parametrize("kind", ["cxx", "light", "onnxruntime", "intel_openvino", "cuda_kernels_on_cpu"])
def test_clones_share_and_run_concurrently_bit_exact(kind, tmp_path):
    """4 clones on 4 threads give exactly the serial outputs (Cxx, Light, and NNAdapter subgraph kernels, which
    keep per-run device state and are entered one run at a time)."""
    if kind in ("onnxruntime", "intel_openvino"):
        pytest.importorskip("openvino" if kind == "intel_openvino" else "onnxruntime")
        base = _cxx(devices=[kind])
        assert any(i.op.type == "subgraph" for i in base.runtime_program.instructions)
    elif kind == "cuda_kernels_on_cpu":  # the CUDA target's kernels (torch), on torch's CPU device
        pytest.importorskip("torch")
        from pdlite.lite import Place, TargetType

        cfg = CxxConfig()
        cfg.set_model_dir(str(model_dir(NAME)))
        cfg.set_valid_places([Place(TargetType.CUDA), Place(TargetType.Host)])
        cfg.set_cuda_device("cpu")
        base = create_paddle_predictor(cfg)
    else:
        base = _cxx() if kind == "cxx" else _light(tmp_path)
    xs = [_inputs(3, seed=i) for i in range(4)]
    serial = [[_handles_run(base, x) for x in xs[i]] for i in range(4)]
    clones = [base.clone() for _ in range(4)]
    for c in clones:
        assert c._params is base._params and c.runtime_program is base.runtime_program
        assert c.get_input(0) is not base.get_input(0)
    got: list[list[np.ndarray]] = [[] for _ in range(4)]
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        barrier.wait()
        for _ in range(2):
            got[i] = [_handles_run(clones[i], x) for x in xs[i]]

    on_threads(4, work)
    for i in range(4):
        for g, s in zip(got[i], serial[i]):
            assert np.array_equal(g, s), f"{kind} clone {i} differs from the serial run"


def test_one_predictor_shared_by_threads_is_never_silently_wrong():
    """Four threads set inputs, run and read outputs on ONE predictor at once: each gets its own result."""
    pred = _cxx()
    xs = _inputs(4, seed=7)
    want = [_handles_run(pred, x) for x in xs]
    got: dict[int, list[np.ndarray]] = {}
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        got[i] = []
        for _ in range(2):  # every thread sets its input before any runs, and runs before any reads
            pred.get_input(0).from_numpy(xs[i])
            barrier.wait()
            pred.run()
            barrier.wait()
            got[i].append(pred.get_output(0).numpy())
        got[i] += [pred.predict({"x": xs[i]})[0] for _ in range(2)]

    on_threads(4, work)
    for i in range(4):
        for g in got[i]:
            assert np.array_equal(g, want[i]), f"thread {i} got another thread's result"


def test_handles_set_in_one_thread_are_seen_from_another():
    """A predictor made and fed in one thread can be run and read from another (single user, handed over)."""
    pred = _cxx()
    x = _inputs(1)[0]
    want = _handles_run(pred, x)
    pred.get_input(0).from_numpy(x)
    out: list[np.ndarray] = []
    on_threads(1, lambda i: (pred.run(), out.append(pred.get_output(0).numpy())))
    assert np.array_equal(out[0], want)
    assert np.array_equal(pred.get_output(0).numpy(), want)  # the run's outputs, read back in this thread


def test_blas_threads_per_run_and_restored_after():
    tpc = pytest.importorskip("threadpoolctl")
    if not rt_threads.blas_thread_control():
        pytest.skip("NumPy's BLAS thread count cannot be set here")
    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(NAME)))
    cfg.set_threads(1)
    cfg.set_option("host_native", False)  # the NumPy kernels: BLAS runs the GEMMs with set_threads' count
    pred = create_paddle_predictor(cfg)
    seen: set[int | None] = set()
    pred.set_hook(lambda inst, dt, scope: seen.add(rt_threads.get_blas_threads()))
    with tpc.threadpool_limits(limits=2, user_api="blas"):
        assert rt_threads.get_blas_threads() == 2
        pred.predict(load_case(NAME)[0])
        assert seen == {1}, "BLAS did not run with the predictor's thread count"
        assert rt_threads.get_blas_threads() == 2, "the user's BLAS thread count was not restored"
        # overlapping runs on threads: the count the user had comes back once the last run ends
        clones = [pred.clone() for _ in range(3)]
        on_threads(3, lambda i: [clones[i].predict(load_case(NAME)[0]) for _ in range(2)])
        assert rt_threads.get_blas_threads() == 2


def test_run_threads_restores_when_overlapping():
    if not rt_threads.blas_thread_control():
        pytest.skip("NumPy's BLAS thread count cannot be set here")
    before = rt_threads.get_blas_threads()
    with rt_threads.run_threads(1):
        assert rt_threads.get_blas_threads() == 1
        with rt_threads.run_threads(2, native_gemm=True):
            assert rt_threads.get_blas_threads() == 1
        assert rt_threads.get_blas_threads() == 1  # a run is still in progress
    assert rt_threads.get_blas_threads() == before


def test_torch_threads_follow_set_threads_on_the_cuda_target_and_are_restored():
    """The CUDA target on torch's CPU runs its kernels with the predictor's thread count (torch's intra-op pools,
    MKL's included), whatever the user set torch to, and torch gets the user's count back after the run."""
    torch = pytest.importorskip("torch")
    from pdlite.lite import Place, PrecisionType, TargetType

    cfg = CxxConfig()
    cfg.set_model_dir(str(model_dir(NAME)))
    cfg.set_valid_places([Place(TargetType.CUDA, PrecisionType.FP32), Place(TargetType.Host, PrecisionType.FP32)])
    cfg.set_cuda_device("cpu")
    cfg.set_threads(1)
    pred = create_paddle_predictor(cfg)
    seen: set[int] = set()
    pred.set_hook(lambda inst, dt, scope: seen.add(torch.get_num_threads()))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        out = pred.predict(load_case(NAME)[0])
        assert seen == {1}, f"torch ran with {seen} threads, not the predictor's 1"
        assert torch.get_num_threads() == 2, "the user's torch thread count was not restored"
        torch.set_num_threads(1)  # the same result whatever torch was set to before the run
        np.testing.assert_array_equal(np.asarray(pred.predict(load_case(NAME)[0])[0]), np.asarray(out[0]))
    finally:
        torch.set_num_threads(before)


# -- copy semantics -------------------------------------------------------------------------------

def test_from_numpy_copies_and_outputs_are_not_overwritten(tmp_path):
    for pred in (_cxx(), _light(tmp_path)):
        a, b = _inputs(2, seed=3)
        want_a, want_b = _handles_run(pred, a), _handles_run(pred, b)
        x = a.copy()
        pred.get_input(0).from_numpy(x)
        x[...] = 0  # changing the array after from_numpy does not change the run
        pred.run()
        first = pred.get_output(0).numpy()
        assert np.array_equal(first, want_a)
        held = pred.get_output(0).raw()
        predicted = pred.predict([a])[0]
        pred.get_input(0).from_numpy(b)
        pred.run()  # a later run writes new arrays: what was handed out before keeps its values
        assert np.array_equal(first, want_a) and np.array_equal(held, want_a) and np.array_equal(predicted, want_a)
        assert np.array_equal(pred.get_output(0).numpy(), want_b)
        out = pred.get_output(0).numpy()
        out[...] = -1  # numpy() is a copy: the handle keeps the run's values
        assert np.array_equal(pred.get_output(0).numpy(), want_b)


def test_outputs_sharing_memory_with_params_or_inputs_are_copied():
    pred = _cxx()
    param = next(iter(pred._params.values()))
    x = np.arange(6, dtype=np.float32)
    fed = {id(x)}
    assert pred._private(param.reshape(-1), set()) is not param  # a view of a weight: copied
    assert np.shares_memory(pred._private(param.reshape(-1), set()), param) is False
    assert not np.shares_memory(pred._private(x[1:], fed), x)  # a view of an input: copied
    fresh = np.ones(4, dtype=np.float32)
    assert pred._private(fresh, fed) is fresh  # made by the run: handed over as it is
    ro = np.frombuffer(b"\0" * 16, dtype=np.float32)
    assert pred._private(ro, set()) is not ro  # memory the run does not own (a file buffer): copied


def test_typed_data_setters_and_getters():
    """paddlelite's set_float_data / float_data and friends (resize first, as paddlelite requires)."""
    pred = _cxx()
    x = load_case(NAME)[0]["x"]
    t = pred.get_input(0)
    t.resize(list(x.shape))
    t.set_float_data(x.reshape(-1).tolist())
    pred.run()
    want = _handles_run(_cxx(), x)
    assert_close_rel(np.asarray(pred.get_output(0).float_data()).reshape(want.shape), want, 1e-6)
    t2 = _cxx().get_input(0)
    with pytest.raises(Exception, match="resize"):
        t2.set_float_data([1.0, 2.0])  # the declared shape has free dims
    t2.resize([2, 2])
    t2.set_int32_data([1, 2, 3, 4])
    assert t2.int32_data() == [1, 2, 3, 4] and t2.numpy().dtype == np.int32
    t2.set_uint8_data([1, 2, 3, 250])
    assert t2.uint8_data() == [1, 2, 3, 250]
    t2.set_int8_data([-1, 2, 3, 4])
    assert t2.int8_data() == [-1, 2, 3, 4]
    with pytest.raises(Exception, match="4 values"):
        t2.set_float_data([1.0, 2.0, 3.0])


def test_serial_small_instructions_keep_results_and_the_pool_count(monkeypatch):
    """At 2 threads the runtime runs its small instructions on one native thread (instruction.SERIAL_WORK): the
    PP-OCR classifier's outputs are bit-equal to a 1-thread run and to a 2-thread run with every instruction on the
    pool, and after each run the pool has the thread count the run set."""
    from pdlite.kernels.host import native
    from pdlite.runtime import instruction, runtime_program

    if not native.available() or not native.use_native(None):
        pytest.skip("the host kernels run on their NumPy path in this process (--host-numpy, or no native build): "
                    "the native pool's split, and its thread-count-independent sums, are what this checks")
    if native._cpus() < 2:
        pytest.skip("one CPU available: the native pool runs one thread")
    monkeypatch.setattr(instruction, "SPLIT_SMALL", True)  # off by default (slower on a quiet machine)
    x = _inputs(1, seed=3)[0]
    outs, serial, seen = {}, {}, []
    real = runtime_program.RuntimeProgram._run_split
    runtime_program.RuntimeProgram._run_split = lambda self, scope, pool: (seen.append(self), real(self, scope, pool))
    try:
        for key, threads, split in (("t1", 1, True), ("t2", 2, True), ("t2 pool", 2, False)):
            cfg = CxxConfig()
            cfg.set_model_dir(str(model_dir(NAME)))
            cfg.set_threads(threads)
            pred = create_paddle_predictor(cfg)
            _handles_run(pred, x)
            if threads == 2:
                if not split:
                    for inst in seen[-1].instructions:
                        inst.serial = False
                serial[key] = sum(i.serial for i in seen[-1].instructions)
            outs[key] = _handles_run(pred, x).copy()
            if threads == 2:
                assert native.get_num_threads() == 2
    finally:
        runtime_program.RuntimeProgram._run_split = real
    assert serial["t2"] > 0 and serial["t2 pool"] == 0
    np.testing.assert_array_equal(outs["t2"], outs["t1"])
    np.testing.assert_array_equal(outs["t2 pool"], outs["t1"])


_NUMPY_BLAS_SCRIPT = r"""
import os, sys, threading
import numpy as np
import cv2  # noqa: F401  (loads OpenCV's own OpenBLAS beside NumPy's)
import threadpoolctl
numpy_libs = os.path.realpath(os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs"))
def is_numpy(i):
    return os.path.realpath(i["filepath"]).startswith(numpy_libs + os.sep)
info = [i for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
if len(info) < 2 or sum(map(is_numpy, info)) != 1:
    print("SKIP", [i["filepath"] for i in info]); sys.exit(0)
real = threadpoolctl.threadpool_info  # another OpenBLAS listed first (threadpoolctl's order moves with the hash seed)
threadpoolctl.threadpool_info = lambda *a, **k: sorted(real(*a, **k), key=is_numpy)
numpy_ctl = [c for c in threadpoolctl.ThreadpoolController().lib_controllers if is_numpy(vars(c))][0]
numpy_ctl.set_num_threads(4)  # the main thread sets NumPy's count: threadpoolctl's setter now works only here
from pdlite.lite import CxxConfig, create_paddle_predictor
cfg = CxxConfig()
cfg.set_model_dir(sys.argv[1])
cfg.set_threads(1)
cfg.set_option("host_native", False)  # NumPy kernels: np.matmul runs the GEMMs on NumPy's OpenBLAS
pred = create_paddle_predictor(cfg)
seen = set()
pred.set_hook(lambda inst, dt, scope: seen.add(numpy_ctl.get_num_threads()))
x = np.zeros([1, 3, 48, 192], np.float32)
t = threading.Thread(target=pred.predict, args=([x],))
t.start(); t.join()
print("SEEN", sorted(seen), "AFTER", numpy_ctl.get_num_threads())
"""


def test_blas_threads_set_on_numpys_openblas_whatever_else_is_loaded():
    """The BLAS pdlite sets per run is the OpenBLAS NumPy is linked against, also where another OpenBLAS is loaded
    and listed first (OpenCV's wheels bundle one; threadpoolctl's order of loaded libraries changes with
    PYTHONHASHSEED) and the run is on a worker thread: binding the first one listed left NumPy's matmul on the
    count the main thread had set (threadpoolctl's setter does nothing off that thread), so the same run's last
    bits changed from process to process (issue 42: the served OCR app's scores)."""
    import subprocess
    import sys

    pytest.importorskip("cv2", reason="needs OpenCV's wheel (its own OpenBLAS): pip install pdlite[ocr]")
    pytest.importorskip("threadpoolctl")
    r = subprocess.run([sys.executable, "-c", _NUMPY_BLAS_SCRIPT, str(model_dir(NAME))], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    if r.stdout.startswith("SKIP"):
        pytest.skip(f"needs NumPy's wheel OpenBLAS and a second OpenBLAS loaded (found {r.stdout[5:].strip()})")
    assert "SEEN [1] AFTER 4" in r.stdout, r.stdout
