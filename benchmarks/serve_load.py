"""Load on pdlite's serving integrations (docs/serving.md), 127.0.0.1 only, a bounded closed-loop generator:
C client threads each send one request, wait for the answer, send the next, for a fixed time (at most C in
flight, nothing unbounded). Numbers: answered requests/s, p50 / p99 latency of the 200s, other answers.

    python benchmarks/serve_load.py sweep    [--seconds 4] [--concurrency 1,2,4,8,16] [--models cnn,ocr] [--device host]
    python benchmarks/serve_load.py batching [--seconds 5] [--rounds 3] [--concurrency 8] [--servers mlserver,ray]
                                             [--model mnv3|alexnet|DIR] [--device host] [--warmup 1.5]
                                             [--unbatched-configs 2x1] [--batch-configs 2x1,1x2/4]
    python benchmarks/serve_load.py overload [--seconds 10] [--clients 32]
    python benchmarks/serve_load.py soak     [--soak-minutes 10]
    python benchmarks/serve_load.py shutdown

sweep: MobileNetV3-small (tests/fixtures) and the OCR app (examples/images/sample_en.png) against
  - `mlserver`: `mlserver start` with pdlite's runtime (2 predictor clones, 1 thread each, on `--device`), CNN over MLServer's
    gRPC with raw tensor bytes (JSON would make the test a JSON-parsing benchmark), OCR over REST;
  - `mlserver+batch`: the same with pdlite's batching (extra.max_batch_size 8, batch_wait_timeout_s 2 ms);
  - `ort-peer`, `ort-peer+batch`: the same model exported to ONNX (`pdlite export-onnx`) in a plain
    onnxruntime MLModel (1 intra-op thread, 2 runs at once), the peer: no MLServer ONNX/OpenVINO runtime
    installs beside MLServer 1.7; its batching is MLServer's adaptive batching (8, 2 ms);
  - `ray`, `ray+batch`: pdlite's Ray Serve deployment (REST with binary tensors), batching off / on (pdlite's
    batcher, max_batch_size 8, 2 ms) on a local Ray (num_cpus=2).
  Cells are interleaved by concurrency (every server once per concurrency level) to spread the noise.
batching: the CNN (MobileNetV3-small, or AlexNet made once with paddle: benchmarks/bench_models.py) on --device at
  one concurrency (8): unbatched (clones x threads) against pdlite's batching (and Ray Serve's @serve.batch,
  MLServer's adaptive batching with --mlserver-adaptive), each MLServer config's answers first checked bit for bit
  against the local predictor (rows of the same stacked batch), and a model that does nothing
  on each server (its own cost per request: the most any batching can gain; on MLServer also the same model on
  MLServer's own raw-bytes path, bytes -> Python list -> array, which pdlite's runtime skips); a batched config
  WxT/N: W clones x T threads, max_batch_size N (8 without /N); rounds interleaved, medians;
  server CPU per request (MLServer's processes, or all of Ray's: raylet, GCS, proxy, replicas, with their idle
  work) and the load generator's own CPU per request. Run one server at a time (--servers) for clean figures.
overload: 32 clients against an OCR service that admits 4 (MLServer: `max_queued` 4; Ray Serve:
  max_ongoing_requests 2 + max_queued_requests 2): 503s, bounded latency of the admitted, no crash; and the
  same load with no bound (max_queued 1000) for the latency it would otherwise cost.
soak: CNN at concurrency 4 plus OCR at 1 against one mlserver for N minutes; the server's resident memory
  sampled every 10 s; growth = last minute's mean over the second minute's mean (after warm-up); errors.
shutdown: 4 OCR requests in flight (1 worker: they queue), SIGTERM after 0.3 s: every one finishes with 200,
  the server exits 0; the same on Ray Serve with `serve.delete` of the application.
"""
from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import bench_models  # noqa: E402
from proc_usage import cpu_s, descendants, rss_kib  # noqa: E402

from pdlite.integrations.batching import DEFAULT_BATCH_WAIT_S  # noqa: E402
from tests.integrations.serve_util import (  # noqa: E402
    CNN,
    IMAGE,
    free_port,
    kernels_changed,
    mlserver,
    write_repository,
)

PEER = "serve_load.OnnxRuntimePeer"

# -- the peer: plain onnxruntime in an MLServer runtime ----------------------------------------------------------
try:
    from mlserver import MLModel
    from mlserver.codecs import NumpyCodec
    from mlserver.types import InferenceRequest, InferenceResponse

    class OnnxRuntimePeer(MLModel):
        """The ONNX export of the same model on onnxruntime (1 intra-op thread; 2 runs at once, like pdlite's 2
        clones): what a user would write without pdlite."""

        async def load(self) -> bool:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            self.session = ort.InferenceSession(self.settings.parameters.uri, opts, providers=["CPUExecutionProvider"])
            self.pool = ThreadPoolExecutor(2)
            return True

        async def predict(self, payload: InferenceRequest) -> InferenceResponse:
            import asyncio

            feeds = {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}
            outs = await asyncio.get_running_loop().run_in_executor(self.pool, self.session.run, None, feeds)
            names = [o.name for o in self.session.get_outputs()]
            return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output(n, a)
                                                                    for n, a in zip(names, outs)])
    class NullModel(MLModel):
        """Decodes the input as pdlite's runtime does (gRPC raw bytes as an array) and answers 1000 zeros:
        MLServer's own cost per request."""

        def __init__(self, settings: Any) -> None:
            from pdlite.integrations.mlserver import _RAW_MODELS

            super().__init__(settings)
            _RAW_MODELS.add(self.name)

        async def predict(self, payload: InferenceRequest) -> InferenceResponse:
            from pdlite.integrations.mlserver import _tensor

            x = _tensor(payload.inputs[0])
            return InferenceResponse(model_name=self.name, outputs=[
                NumpyCodec.encode_output("y", np.zeros((x.shape[0], 1000), np.float32))])

    class NullListModel(NullModel):
        """The null model on MLServer 1.7's own gRPC path: raw bytes unpacked into a Python list (`inject_raw`),
        read back into an array: what pdlite's runtime cost MLServer's event loop before it kept raw bytes."""

        def __init__(self, settings: Any) -> None:
            MLModel.__init__(self, settings)
except ImportError:  # the benchmark's main() says what to install
    MLModel = None


# -- clients -----------------------------------------------------------------------------------------------------
class Rest:
    """POST a prebuilt body on a kept-alive connection (one per client thread)."""

    def __init__(self, port: int, path: str, body: bytes, headers: dict[str, str]) -> None:
        self.port, self.path, self.body, self.headers = port, path, body, headers
        self.local = threading.local()
        self.batches: list[int] = []  # parameters.batch_size of the answers that have one (pdlite's Ray Serve)
        if "Inference-Header-Content-Length" in headers:  # the CNN's "x" in the binary extension
            self.sized = lambda xk: Rest(port, path, *v2_binary("x", xk))

    def __call__(self) -> int:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request("POST", self.path, self.body, self.headers)
            r = conn.getresponse()
            data = r.read()
            at = data.rfind(b'"batch_size":')
            if at >= 0:
                self.batches.append(int(data[at + 13:at + 20].split(b"}")[0].split(b",")[0]))
            return r.status
        except (OSError, http.client.HTTPException):
            self.local.conn = None
            conn.close()
            return -1


class Grpc:
    """MLServer's gRPC ModelInfer with the tensor as raw bytes (its own generated stubs)."""

    def __init__(self, port: int, model: str, name: str, x: np.ndarray) -> None:
        import grpc
        from mlserver.grpc import dataplane_pb2 as pb
        from mlserver.grpc import dataplane_pb2_grpc as pbg

        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 1 << 28)])
        self.stub = pbg.GRPCInferenceServiceStub(self.channel)
        self.req = pb.ModelInferRequest(model_name=model, inputs=[
            pb.ModelInferRequest.InferInputTensor(name=name, datatype="FP32", shape=list(x.shape))],
            raw_input_contents=[x.tobytes()])
        self.grpc = grpc
        self.batches: list[int] = []  # parameters.batch_size of the answers that have one
        self.sized = lambda xk: Grpc(port, model, name, xk)  # the same request with another tensor

    def answer(self) -> tuple[int, np.ndarray]:
        """One request: (its batch size, its first output as an array)."""
        from mlserver.codecs import NumpyCodec
        from mlserver.grpc.converters import ModelInferResponseConverter

        r = ModelInferResponseConverter.to_types(self.stub.ModelInfer(self.req, timeout=120))
        k = int((r.parameters.model_extra or {}).get("batch_size", 1)) if r.parameters else 1
        return k, NumpyCodec.decode_output(r.outputs[0])

    def __call__(self) -> int:
        try:
            r = self.stub.ModelInfer(self.req, timeout=120)
            if "batch_size" in r.parameters:
                self.batches.append(r.parameters["batch_size"].int64_param)
            return 200
        except self.grpc.RpcError as e:
            return {self.grpc.StatusCode.INVALID_ARGUMENT: 400, self.grpc.StatusCode.UNAVAILABLE: 503}.get(e.code(), 500)


def cnn_input() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)


def v2_json_ocr() -> bytes:
    return json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1],
                                   "data": [base64.b64encode(IMAGE.read_bytes()).decode()]}]}).encode()


def v2_binary(name: str, x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    head = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": list(x.shape),
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    return head + x.tobytes(), {"Content-Type": "application/octet-stream",
                                "Inference-Header-Content-Length": str(len(head))}


JSON = {"Content-Type": "application/json"}


# -- the generator -----------------------------------------------------------------------------------------------
def load(call: Callable[[], int], clients: int, seconds: float) -> dict[str, Any]:
    """CLIENTS threads calling CALL back to back for SECONDS: rate of 200s, p50/p99 of their latency, statuses."""
    lat: list[float] = []
    codes: Counter[int] = Counter()
    lock = threading.Lock()
    end = time.perf_counter() + seconds

    def client() -> None:
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                return
            code = call()
            dt = time.perf_counter() - t0
            with lock:
                codes[code] += 1
                if code == 200:
                    lat.append(dt)

    t0, cpu0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    lat.sort()
    pct = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3) if lat else (lambda q: float("nan"))
    return {"rps": len(lat) / wall, "p50": pct(0.5), "p99": pct(0.99), "ok": len(lat),
            "other": {k: v for k, v in codes.items() if k != 200},
            "client_ms": cpu / max(1, sum(codes.values())) * 1e3}  # this process's CPU per request


def row(server: str, model: str, c: int, r: dict[str, Any]) -> str:
    other = ", ".join(f"{k}: {v}" for k, v in sorted(r["other"].items())) or "-"
    return f"| {server} | {model} | {c} | {r['rps']:.1f} | {r['p50']:.0f} | {r['p99']:.0f} | {r['ok']} | {other} |"


HEAD = "| server | model | concurrency | req/s | p50 ms | p99 ms | 200s | other answers |\n|---|---|---|---|---|---|---|---|"


# -- servers -----------------------------------------------------------------------------------------------------
def mlserver_repo(folder: Path, onnx: Path | None, device: str = "host") -> dict[str, int]:
    batch = {"max_batch_size": 8, "max_batch_time": 0.002}  # MLServer's adaptive batching (the peer)
    models: dict[str, dict[str, Any]] = {
        "mnv3": {"uri": CNN, "extra": {"workers": 2, "max_queued": 64, "device": device}},
        "mnv3b": {"uri": CNN, "extra": {"workers": 2, "max_queued": 64, "device": device, "max_batch_size": 8,
                                        "batch_wait_timeout_s": DEFAULT_BATCH_WAIT_S}},
        "ocr": {"extra": {"app": "ocr", "workers": 2, "max_queued": 64}},
    }
    ports = write_repository(folder, models)
    if onnx is not None:
        for name, extra in (("ort", {}), ("ortb", batch)):
            (folder / name).mkdir(exist_ok=True)
            (folder / name / "model-settings.json").write_text(json.dumps(
                {"name": name, "implementation": PEER, "parameters": {"uri": str(onnx)}, **extra}))
    return ports


def export_onnx(folder: Path) -> Path | None:
    out = folder / "mnv3.onnx"
    r = subprocess.run([sys.executable, "-m", "pdlite", "export-onnx", str(CNN), "-o", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"(no ONNX peer: export-onnx failed: {r.stderr.strip()[-300:]})")
        return None
    return out


def with_peer_path() -> None:
    os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parent) + os.pathsep + os.environ.get("PYTHONPATH", "")


def start_ray(apps: dict[str, Any]) -> int:
    """A local Ray (2 CPUs) serving APPS: name -> pdlite `deployment()` keywords, or a bound application."""
    import ray
    from ray import serve

    from pdlite.integrations.ray_serve import deployment

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    for i, (name, kw) in enumerate(apps.items()):
        app = deployment(name=name, **kw) if isinstance(kw, dict) else kw
        serve.run(app, name=name, route_prefix="/" if i == 0 else f"/v2/models/{name}")
    return port


def null_ray_app() -> Any:
    """A Ray Serve deployment that parses the V2 request as pdlite's does and answers 1000 zeros (no model)."""
    from ray import serve
    from starlette.responses import JSONResponse

    from pdlite.integrations.serving import encode_v2_json, split_v2_body

    @serve.deployment(name="null", max_ongoing_requests=32, ray_actor_options={"num_cpus": 0})
    class NullV2:
        async def __call__(self, request: Any) -> JSONResponse:
            _, binary = split_v2_body(await request.body(), request.headers.get("inference-header-content-length"))
            x = np.frombuffer(binary, np.float32).reshape(-1, 3, 224, 224)
            return JSONResponse(encode_v2_json("null", {"y": np.zeros((x.shape[0], 1000), np.float32)}))

    return NullV2.bind()


def stop_ray() -> None:
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


# -- modes -------------------------------------------------------------------------------------------------------
def sweep(args: argparse.Namespace) -> None:
    levels = [int(c) for c in args.concurrency.split(",")]
    models = args.models.split(",")
    x = cnn_input()
    body_ocr = v2_json_ocr()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        onnx = export_onnx(Path(tmp))
        ports = mlserver_repo(folder, onnx, args.device)
        with_peer_path()
        dev = {"model": CNN, "workers": 2, "device": args.device}
        ray_port = start_ray({"mnv3": {**dev, "max_batch_size": 1},
                              "mnv3b": {**dev, "max_batch_size": 8, "batch_wait_timeout_s": DEFAULT_BATCH_WAIT_S},
                              "ocr": {"app": "ocr", "workers": 2}})
        try:
            with mlserver(folder, Path(tmp) / "mlserver.log"):
                g = ports["grpc_port"]
                rb, rh = v2_binary("x", x)
                targets: dict[str, list[tuple[str, Callable[[], Callable[[], int]]]]] = {"cnn": [
                    ("mlserver", lambda: Grpc(g, "mnv3", "x", x)),
                    ("mlserver+batch", lambda: Grpc(g, "mnv3b", "x", x)),
                    ("ray", lambda: Rest(ray_port, "/v2/models/mnv3/infer", rb, rh)),
                    ("ray+batch", lambda: Rest(ray_port, "/v2/models/mnv3b/infer", rb, rh)),
                ], "ocr": [
                    ("mlserver", lambda: Rest(ports["http_port"], "/v2/models/ocr/infer", body_ocr, JSON)),
                    ("ray", lambda: Rest(ray_port, "/v2/models/ocr/infer", body_ocr, JSON)),
                ]}
                if onnx is not None:
                    targets["cnn"][2:2] = [("ort-peer", lambda: Grpc(g, "ort", "x", x)),
                                           ("ort-peer+batch", lambda: Grpc(g, "ortb", "x", x))]
                for model in models:
                    secs = args.seconds * (2 if model == "ocr" else 1)
                    for _, make in targets[model]:  # warm-up: first runs, connections
                        load(make(), 2, 1.0)
                    print(f"\n{model}: {secs:.0f} s per cell\n{HEAD}", flush=True)
                    for c in levels:
                        for name, make in targets[model]:
                            print(row(name, model, c, load(make(), c, secs)), flush=True)
        finally:
            stop_ray()


def batching(args: argparse.Namespace) -> None:
    """Unbatched against batched on the CNN (--model, on --device) at one concurrency, cells interleaved (every
    config once per round), medians over the rounds; the ratio of the medians is the figure (the issue's bar:
    >= 1.5x at c=8). First a check: every config's answers bit for bit against the local predictor."""
    x = cnn_input()
    cnn, dev = bench_models.model_dir(args.model), {"device": args.device}
    c = 8 if "," in args.concurrency else int(args.concurrency)
    servers = args.servers.split(",")
    shapes = [(*(int(v) for v in wt.split("/")[0].split("x")), int((wt.split("/") + ["8"])[1]))
              for wt in args.batch_configs.split(",")]  # WxT or WxT/N (N: max_batch_size, default 8)
    plain = [tuple(int(v) for v in wt.split("x")) for wt in args.unbatched_configs.split(",")]
    bat = {"batch_wait_timeout_s": args.batch_wait}
    unb = {"workers": 2, "threads": 1}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        extra = {"max_queued": 64, **dev}
        models: dict[str, dict[str, Any]] = {f"mnv3u{w}{t}": {"uri": str(cnn), "extra": {**extra, "workers": w,
                                                                                       "threads": t}} for w, t in plain}
        for w, t, n in shapes:
            models[f"mnv3b{w}{t}{n}"] = {"uri": str(cnn), "extra": {**extra, "workers": w, "threads": t, **bat,
                                                                    "max_batch_size": n}}
        if args.mlserver_adaptive:
            models["mnv3a"] = {"uri": str(cnn), "extra": {**extra, **unb}, "max_batch_size": 8,
                               "max_batch_time": args.batch_wait}
        ports = write_repository(folder, models)
        settings = json.loads((folder / "settings.json").read_text())  # the warm-up's 8-row requests: 4.8 MB
        (folder / "settings.json").write_text(json.dumps({**settings, "grpc_max_message_length": 64 << 20}))
        for name, cls in (("null", "NullModel"), ("nulllist", "NullListModel")):
            (folder / name).mkdir()
            (folder / name / "model-settings.json").write_text(json.dumps(
                {"name": name, "implementation": f"serve_load.{cls}"}))
        with_peer_path()
        g = ports["grpc_port"]
        targets: list[tuple[str, str, Callable[[], int]]] = []
        if "mlserver" in servers:
            targets += [("mlserver", f"MLServer, unbatched {w}x{t}", Grpc(g, f"mnv3u{w}{t}", "x", x)) for w, t in plain]
            targets += [("mlserver", f"MLServer, pdlite batching {n}, {w}x{t}", Grpc(g, f"mnv3b{w}{t}{n}", "x", x))
                        for w, t, n in shapes]
            if args.mlserver_adaptive:
                targets += [("mlserver", "MLServer, MLServer's adaptive batching 8, 2x1", Grpc(g, "mnv3a", "x", x))]
            targets += [("mlserver", "MLServer, a model that does nothing", Grpc(g, "null", "x", x)),
                        ("mlserver", "MLServer, nothing, raw bytes as MLServer's list", Grpc(g, "nulllist", "x", x))]
        ray_port = None
        if "ray" in servers:
            apps = {f"mnv3u{w}{t}": {"model": cnn, **dev, "workers": w, "threads": t, "max_batch_size": 1}
                    for w, t in plain}
            for w, t, n in shapes:
                kw = {"model": cnn, **dev, "workers": w, "threads": t, **bat, "max_batch_size": n}
                apps[f"mnv3b{w}{t}{n}"], apps[f"mnv3s{w}{t}{n}"] = kw, {**kw, "batcher": "serve"}
            ray_port = start_ray({**apps, "null": null_ray_app()})
            rb, rh = v2_binary("x", x)
            targets += [("ray", f"Ray Serve, unbatched {w}x{t}", Rest(ray_port, f"/v2/models/mnv3u{w}{t}/infer", rb, rh))
                        for w, t in plain]
            targets += [("ray", f"Ray Serve, pdlite batching {n}, {w}x{t}",
                         Rest(ray_port, f"/v2/models/mnv3b{w}{t}{n}/infer", rb, rh)) for w, t, n in shapes]
            targets += [("ray", f"Ray Serve, @serve.batch {n}, {w}x{t}",
                         Rest(ray_port, f"/v2/models/mnv3s{w}{t}{n}/infer", rb, rh)) for w, t, n in shapes]
            targets += [("ray", "Ray Serve, a model that does nothing", Rest(ray_port, "/v2/models/null/infer", rb, rh))]
        try:
            with mlserver(folder, Path(tmp) / "mlserver.log") if "mlserver" in servers else nullcontext() as ml:
                for _, label, call in targets:  # warm-up: first runs, connections, a device's models per batch size
                    warm_up(label, call, c, args.warmup, x)
                check_bits(targets, c, cnn, args.device, x)
                cells: dict[str, list[dict[str, Any]]] = {label: [] for _, label, _ in targets}
                me = os.getpid()
                for r in range(args.rounds):
                    order = targets if r % 2 == 0 else targets[::-1]  # A,B,C / C,B,A: no config always first
                    for srv, label, call in order:
                        mine = descendants(ml[1].pid) if ml else []  # the mlserver process and its workers
                        pids = mine if srv == "mlserver" else [p for p in descendants(me) if p != me and p not in mine]
                        cpu0, seen = cpu_s(pids), len(getattr(call, "batches", []))
                        res = load(call, c, args.seconds)
                        res["server_ms"] = (cpu_s(pids) - cpu0) / max(1, res["ok"]) * 1e3
                        sizes = getattr(call, "batches", [])[seen:]
                        res["batch"] = statistics.mean(sizes) if sizes else float("nan")
                        cells[label].append(res)
                if ml:  # a device keeps a static model per batch size in each config (AlexNet: GBs)
                    print(f"mlserver's resident memory: {rss_kib(ml[1].pid) / 2**20:.1f} GiB", flush=True)
        finally:
            if ray_port is not None:
                stop_ray()
    own = bench_models.model_alone(cnn, args.device, x)
    print(f"\nthe model alone (this process, {args.device}, 1 thread; ms a sample, wall / process CPU): batch 1 "
          f"{own[1][0]:.2f} / {own[1][1]:.2f}, batch 8 {own[8][0]:.2f} / {own[8][1]:.2f} ({own[1][0] / own[8][0]:.2f}x "
          f"/ {own[1][1] / own[8][1]:.2f}x), batches of 1..8 in turn {own[0][0]:.2f} / {own[0][1]:.2f}")
    med = {label: {k: statistics.median(v[k] for v in runs)
                   for k in ("rps", "p50", "p99", "client_ms", "server_ms", "batch")} for label, runs in cells.items()}
    print(f"\nCNN ({bench_models.label(args.model)}, 1x3x224x224 FP32, {args.device}) at concurrency {c}: "
          f"medians of {args.rounds} interleaved rounds of {args.seconds:.0f} s; clones x threads; "
          f"batch wait {args.batch_wait * 1e3:.0f} ms")
    print("| server, config | req/s | p50 ms | p99 ms | x unbatched | req/s per round | mean batch | server CPU ms/req "
          "| client CPU ms/req |\n|---|---|---|---|---|---|---|---|---|")
    base: dict[str, float] = {}  # each server's first unbatched config
    for srv, label, _ in targets:
        if "unbatched" in label:
            base.setdefault(srv, med[label]["rps"])
    for srv, label, _ in targets:
        m = med[label]
        rounds = " ".join(f"{v['rps']:.0f}" for v in cells[label])
        print(f"| {label} | {m['rps']:.1f} | {m['p50']:.0f} | {m['p99']:.0f} | {m['rps'] / base[srv]:.2f} | "
              f"{rounds} | {m['batch']:.1f} | {m['server_ms']:.1f} | {m['client_ms']:.2f} |", flush=True)


def warm_up(label: str, call: Callable[[], int], c: int, seconds: float, x: np.ndarray) -> None:
    """Requests of 1..8 rows, 4 each in a row (a device such as OpenVINO builds a static model for a batch size
    that runs 3 times in a row or keeps coming back: nnadapter's hot-shape promotion, in the request path; left
    to the load, AlexNet's builds went on for minutes), then load for SECONDS at a time until two passes in a
    row agree within 20% (at most 10)."""
    if hasattr(call, "sized"):
        for k in range(1, 9):
            one = call.sized(np.concatenate([x] * k))
            codes = [one() for _ in range(4)]
            if codes != [200] * 4:
                print(f"{label}: warm-up with {k} rows answered {codes}", flush=True)
    rates = [load(call, c, seconds)["rps"]]
    while len(rates) < 10 and not (len(rates) >= 2 and 0.8 <= rates[-1] / max(rates[-2], 1e-9) <= 1.25):
        rates.append(load(call, c, seconds)["rps"])
    print(f"{label}: warm-up passes of {seconds:.0f} s, req/s " + " ".join(f"{r:.0f}" for r in rates), flush=True)


def check_bits(targets: list[tuple[str, str, Any]], c: int, cnn: Path, device: str, x: np.ndarray) -> None:
    """C requests at once to each MLServer model config: answers against the local predictor, bit for bit."""
    for srv, label, call in targets:
        if srv == "mlserver" and "nothing" not in label and "adaptive" not in label:
            threads = int(label.rsplit("x", 1)[1])
            with ThreadPoolExecutor(c) as ex:
                answers = list(ex.map(lambda f: f(), [call.answer] * c))
            print(f"{label}: {bench_models.same_bits(answers, cnn, device, threads, x)}", flush=True)


def overload(args: argparse.Namespace) -> None:
    body = v2_json_ocr()
    for label, queue in (("bounded (max_queued 4)", 4), ("unbounded (max_queued 1000)", 1000)):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "repo"
            ports = write_repository(folder, {"ocr": {"extra": {"app": "ocr", "workers": 2, "max_queued": queue}}})
            with mlserver(folder, Path(tmp) / "log") as (_, proc):
                call = Rest(ports["http_port"], "/v2/models/ocr/infer", body, JSON)
                load(call, 2, 2.0)
                r = load(call, args.clients, args.seconds)
                alive = proc.poll() is None and call() == 200
            print(f"\nmlserver OCR, {args.clients} clients, {label}; alive after: {alive}\n{HEAD}")
            print(row("mlserver", "ocr", args.clients, r), flush=True)
    port = start_ray({"ocr": {"app": "ocr", "workers": 2, "max_ongoing_requests": 2, "max_queued_requests": 2}})
    try:
        call = Rest(port, "/v2/models/ocr/infer", body, JSON)
        load(call, 2, 2.0)
        r = load(call, args.clients, args.seconds)
        print(f"\nRay Serve OCR, {args.clients} clients, max_ongoing_requests 2 + max_queued_requests 2; "
              f"alive after: {call() == 200}\n{HEAD}")
        print(row("ray", "ocr", args.clients, r), flush=True)
    finally:
        stop_ray()


def soak(args: argparse.Namespace) -> None:
    x = cnn_input()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        ports = mlserver_repo(folder, None)
        with mlserver(folder, Path(tmp) / "log") as (_, proc):
            cnn = Grpc(ports["grpc_port"], "mnv3", "x", x)
            ocr = Rest(ports["http_port"], "/v2/models/ocr/infer", v2_json_ocr(), JSON)
            samples: list[tuple[float, int]] = []
            stop = time.perf_counter() + args.soak_minutes * 60
            t0 = time.perf_counter()
            results: list[dict[str, Any]] = []
            with ThreadPoolExecutor(2) as ex:
                while time.perf_counter() < stop:
                    left = min(10.0, stop - time.perf_counter())
                    fa, fb = ex.submit(load, cnn, 4, left), ex.submit(load, ocr, 1, left)
                    results += [fa.result(), fb.result()]
                    samples.append((time.perf_counter() - t0, rss_kib(proc.pid)))
                    print(f"  {samples[-1][0]:6.0f} s  rss {samples[-1][1] / 1024:7.1f} MiB  "
                          f"cnn {results[-2]['rps']:.1f} req/s  ocr {results[-1]['rps']:.1f} req/s", flush=True)
            errors = sum(sum(r["other"].values()) for r in results)
            ok = sum(r["ok"] for r in results)
            alive = proc.poll() is None
        second = [m for t, m in samples if 60 <= t < 120] or [samples[0][1]]
        last = [m for t, m in samples if t >= samples[-1][0] - 60]
        growth = statistics.mean(last) / statistics.mean(second) - 1
        print(f"\nsoak {args.soak_minutes} min: {ok} answered, {errors} errors, server alive: {alive}, "
              f"rss second minute {statistics.mean(second) / 1024:.1f} MiB -> last minute "
              f"{statistics.mean(last) / 1024:.1f} MiB ({growth * 100:+.2f}%), max {max(m for _, m in samples) / 1024:.1f} MiB")


def shutdown(args: argparse.Namespace) -> None:
    body = v2_json_ocr()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "repo"
        ports = write_repository(folder, {"ocr": {"extra": {"app": "ocr", "workers": 1, "max_queued": 16}}})
        with mlserver(folder, Path(tmp) / "log") as (_, proc):
            Rest(ports["http_port"], "/v2/models/ocr/infer", body, JSON)()
            with ThreadPoolExecutor(4) as ex:
                t0 = time.perf_counter()
                futs = [ex.submit(Rest(ports["http_port"], "/v2/models/ocr/infer", body, JSON)) for _ in range(4)]
                time.sleep(0.3)
                proc.send_signal(signal.SIGTERM)
                codes = [f.result() for f in futs]
                done = time.perf_counter() - t0
            proc.wait(60)
            print(f"mlserver: SIGTERM 0.3 s after 4 OCR requests (1 worker): answers {codes} within {done:.2f} s, "
                  f"exit code {proc.returncode}")
    from ray import serve

    port = start_ray({"ocr": {"app": "ocr", "workers": 1, "graceful_shutdown_timeout_s": 120}})
    try:
        call = Rest(port, "/v2/models/ocr/infer", body, JSON)
        call()
        with ThreadPoolExecutor(4) as ex:
            t0 = time.perf_counter()
            futs = [ex.submit(Rest(port, "/v2/models/ocr/infer", body, JSON)) for _ in range(4)]
            time.sleep(0.3)
            serve.delete("ocr")  # the replica stops: its requests in progress first
            codes = [f.result() for f in futs]
            done = time.perf_counter() - t0
        print(f"Ray Serve: serve.delete 0.3 s after 4 OCR requests (1 worker): answers {codes} within {done:.2f} s")
    finally:
        stop_ray()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["sweep", "batching", "overload", "soak", "shutdown"])
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--concurrency", default="1,2,4,8,16")
    p.add_argument("--models", default="cnn,ocr")
    p.add_argument("--device", default="host", help="pdlite's device for the CNN (host, intel_openvino, onnxruntime)")
    p.add_argument("--model", default="mnv3", help="batching: the CNN, mnv3, alexnet (made once) or a model folder")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3, help="batching: interleaved rounds (medians)")
    p.add_argument("--servers", default="mlserver,ray", help="batching: mlserver, ray or both")
    p.add_argument("--batch-wait", type=float, default=DEFAULT_BATCH_WAIT_S, help="batching: the batch wait in seconds")
    p.add_argument("--batch-configs", default="2x1",
                   help="batching: the batched servers' clones x threads, WxT or WxT/N (max_batch_size N, 8)")
    p.add_argument("--unbatched-configs", default="2x1", help="batching: the unbatched ones' (the first: the base)")
    p.add_argument("--warmup", type=float, default=1.5, help="batching: warm-up seconds per config (5+ on a device)")
    p.add_argument("--mlserver-adaptive", action="store_true", help="batching: also MLServer's own batching")
    p.add_argument("--soak-minutes", type=float, default=10.0)
    args = p.parse_args()
    if MLModel is None:
        sys.exit("needs pip install pdlite[serve,ocr,onnx]")
    from pdlite.kernels.host import native

    print(f"serve_load {args.mode}; CPU: {os.cpu_count()} cores (shared: numbers are noisy); host kernels: "
          f"{native.load_note}", flush=True)
    {"sweep": sweep, "batching": batching, "overload": overload, "soak": soak, "shutdown": shutdown}[args.mode](args)
    if kernels_changed():  # the servers started during the run may have run other kernels than this process
        print(f"WARNING: {kernels_changed()}")


if __name__ == "__main__":
    main()
