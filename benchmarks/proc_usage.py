"""CPU time and resident memory of a process tree from /proc (Linux), for the serving benchmarks."""
from __future__ import annotations

import os
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """PID and its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for t in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (t / "children").read_text().split()]
        except OSError:
            pass
    return found


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of PIDS so far."""
    total = 0
    for p in pids:
        try:
            total += sum(int(v) for v in Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident memory of PID and its descendants (KiB)."""
    total = 0
    for p in descendants(pid):
        try:
            total += sum(int(line.split()[1]) for line in Path(f"/proc/{p}/status").read_text().splitlines()
                         if line.startswith("VmRSS:"))
        except OSError:
            pass
    return total
