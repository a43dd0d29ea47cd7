"""Repeated `pdlite ocr` processes on one cache folder: does `auto` keep, process after process, whatever is really
faster for the networks of a short (one folder of images) process? (issue 37, Must-have 3: never slower than the
host over the calls it has seen, 5% margin.)

Each contender runs N processes of `pdlite ocr DIR --quiet --threads T --device D`, each contender on its own
fresh cache folder (XDG_CACHE_HOME: auto's choices and the compiled device models persist from one of its
processes to the next, as for a user running the command again). Processes are interleaved (process i of every
contender, the order rotated, then process i + 1), so a busy machine slows all alike. Per process the table gives
each contender's rec stage (s, from the command's timing table), its whole run (s) and where auto ran rec; the
last lines give auto's rec stage against the host-only one's, process by process (the bar: at most 1.05x from the
process after auto's first purchase on).

    python benchmarks/ocr_processes.py [--dir examples/images] [--processes 6] [--threads 2]
                                       [--contenders host,auto] [--cmd NAME=COMMAND ...]

`--cmd auto-old="python other_checkout_pdlite.py"`: a contender NAME run with that command instead of `pdlite`
(device auto; to compare two versions of the policy in one interleaved run).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STAGE = re.compile(r"^\s*(det|cls|rec)\s+([\d.]+)\s+([\d.]+)\s+(.*)$")
TOTAL = re.compile(r"(\d+) image\(s\) in ([\d.]+) s")


def run_once(cmd: list[str], device: str, folder: str, threads: int, cache: str) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": cache, "OMP_NUM_THREADS": str(threads)}
    env.pop("PDLITE_NNADAPTER_MODEL_CACHE_DIR", None)  # the command's default: under XDG_CACHE_HOME
    r = subprocess.run([*cmd, "ocr", folder, "--quiet", "--threads", str(threads), "--device", device],
                       env=env, capture_output=True, text=True, cwd=REPO, timeout=900)
    out: dict = {}
    for line in (r.stdout + r.stderr).splitlines():
        m = STAGE.match(line)
        if m:
            out[m.group(1)] = float(m.group(2))
            out[m.group(1) + "_on"] = m.group(4).strip()
        m = TOTAL.search(line)
        if m:
            out["total"] = float(m.group(2))
    if r.returncode != 0 or "rec" not in out:
        out["error"] = ((r.stderr or r.stdout).strip().splitlines() or ["failed"])[-1][:200]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=str(REPO / "examples" / "images"))
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--contenders", default="host,auto")
    ap.add_argument("--cmd", action="append", default=[], metavar="NAME=COMMAND",
                    help="run contender NAME (device auto) with COMMAND instead of pdlite")
    args = ap.parse_args(argv)
    cmds = dict(c.split("=", 1) for c in args.cmd)
    names = [c for c in args.contenders.split(",") if c] + [n for n in cmds if n not in args.contenders.split(",")]
    with tempfile.TemporaryDirectory(prefix="pdlite_ocr_processes_") as tmp:
        caches = {n: tempfile.mkdtemp(dir=tmp) for n in names}
        res: dict[str, list[dict]] = {n: [] for n in names}
        for i in range(args.processes):
            k = i % len(names)
            for n in names[k:] + names[:k]:
                cmd = shlex.split(cmds[n]) if n in cmds else [sys.executable, "-m", "pdlite"]
                device = n if n in ("host", "auto", "intel_openvino", "onnxruntime") else "auto"
                res[n].append(run_once(cmd, device, args.dir, args.threads, caches[n]))
                x = res[n][-1]
                print(f"  process {i + 1} {n}: rec {x.get('rec', float('nan')):.2f} s, total "
                      f"{x.get('total', float('nan')):.2f} s, rec on {x.get('rec_on', x.get('error'))}",
                      file=sys.stderr, flush=True)
    print(f"\n{args.processes} `pdlite ocr {args.dir} --quiet` processes per contender, {args.threads} threads; "
          "rec stage s / whole run s (rec on)")
    print("| process | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for i in range(args.processes):
        cells = []
        for n in names:
            x = res[n][i]
            cells.append(x["error"] if "error" in x else
                         f"{x['rec']:.2f} / {x.get('total', float('nan')):.2f} ({x.get('rec_on', '?')})")
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    if "host" in res:
        for n in names:
            if n == "host":
                continue
            ratios = [x["rec"] / h["rec"] for x, h in zip(res[n], res["host"]) if "rec" in x and "rec" in h]
            if ratios:
                print(f"{n} rec / host rec per process: " + ", ".join(f"{r:.2f}" for r in ratios)
                      + f"; worst from process 2 on: {max(ratios[1:] or ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
