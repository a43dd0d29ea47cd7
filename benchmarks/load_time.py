"""Time to create a predictor: from the original Paddle model (CxxConfig: parse + analysis) vs from the `.nb`.

    python benchmarks/load_time.py [--repeat 7] [--models mobilenet_v1,resnet18] [--markdown]

For each legacy model found in tests/fixtures/models or ../shared/models: optimize it once
with Opt (x86,host) into a temporary folder, then take the median wall time of `repeat`
predictor creations for each way of loading (after one warm-up, so imports are not counted).
Also checks that the `.nb` predictor gives the same outputs as the full one on case.npz.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pdlite.api.config import CxxConfig  # noqa: E402
from pdlite.api.mobile import MobileConfig  # noqa: E402
from pdlite.api.opt import Opt  # noqa: E402
from pdlite.api.predictor import create_paddle_predictor  # noqa: E402

MODELS = ["mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_small_noncombined",
          "ppocr_cls_v2", "ppocr_det_v4", "resnet18", "transformer_encoder"]


ROOTS = [REPO / "tests" / "fixtures" / "models", REPO.parent / "shared" / "models"]


def find_model(name: str) -> Path | None:
    for root in ROOTS:
        if (root / name).is_dir():
            return root / name
    return None


def median_ms(make, repeat: int) -> float:
    make()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        make()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def cxx(d: Path):
    cfg = CxxConfig()
    cfg.set_model_dir(str(d))
    return create_paddle_predictor(cfg)


def mobile(path: str, **options):
    cfg = MobileConfig()
    cfg.set_model_from_file(path)
    for k, v in options.items():
        cfg.set_option(k, v)
    return create_paddle_predictor(cfg)


def model_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.iterdir() if p.is_file() and not p.name.startswith(("case", "README"))
               and not p.name.endswith(".txt"))


def bench(name: str, d: Path, tmp: Path, repeat: int) -> list[str]:
    opt = Opt()
    opt.set_model_dir(str(d))
    opt.set_valid_places("x86,host")
    opt.set_optimize_out(str(tmp / name))
    path = opt.run()
    r = opt.last_report
    t_cxx = median_ms(lambda: cxx(d), repeat)
    t_nb = median_ms(lambda: mobile(path), repeat)
    t_nb_nocrc = median_ms(lambda: mobile(path, verify_checksum=False), repeat)
    t_mmap = median_ms(lambda: mobile(path, mmap=True, verify_checksum=False), repeat)
    same = "-"
    case = d / "case.npz"
    if case.exists():
        z = np.load(case)
        ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
        a, b = cxx(d).predict(ins), mobile(path).predict(ins)
        same = "yes" if all(np.array_equal(x, y) for x, y in zip(a, b)) else "NO"
    return [name, f"{model_bytes(d) / 1e6:.1f}", f"{r['bytes'] / 1e6:.1f}", f"{r['ops_before']}",
            f"{r['ops_after']}", f"{r['optimize_ms']:.0f}", f"{t_cxx:.1f}", f"{t_nb:.1f}", f"{t_nb_nocrc:.1f}",
            f"{t_mmap:.1f}", f"{t_cxx / t_nb:.1f}x", same]


HEADER = ["model", "model MB", ".nb MB", "ops", "ops (opt)", "opt ms", "CxxConfig ms", ".nb ms",
          ".nb no-crc ms", ".nb mmap ms", "speed-up", "same outputs"]


def print_table(rows: list[list[str]], markdown: bool) -> None:
    if markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    widths = [max(len(x[i]) for x in [HEADER, *rows]) for i in range(len(HEADER))]
    for r in [HEADER, ["-" * w for w in widths], *rows]:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--root", action="append", default=[], help="another folder of models to search")
    args = ap.parse_args(argv)
    ROOTS.extend(Path(r) for r in args.root)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            d = find_model(name)
            if d is None:
                print(f"# {name}: not found, skipped", file=sys.stderr)
                continue
            try:
                rows.append(bench(name, d, Path(tmp), args.repeat))
            except Exception as e:  # report and go on with the other models
                print(f"# {name}: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
            print(f"# {name} done", file=sys.stderr, flush=True)
    print_table(rows, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
