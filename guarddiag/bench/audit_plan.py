"""A plan for 100M and 1B rows: the audit's measured cost per core, projected to N nodes.

``guarddiag bench audit`` times each pass at two pool sizes and records, per pass, the CPU
seconds of this process and its worker processes (so ``rows / CPU s`` is the throughput of one
core whatever the number of workers) and the peak resident memory of all of them together. The
projection assumes, and the printed plan says so:

* the passes are embarrassingly parallel over shards: every row is matched against the same
  small benchmark index, so N nodes of C cores run at N × C times the per-core rate (no
  speed-up from caching, no loss to stragglers or to reading; the merge is of candidate rows
  only, a small share of the pool);
* memory does not grow with the rows a process reads: the scan streams batches and stores each
  task's findings on disk (:mod:`guarddiag.audit.scanstore`), so a process holds its libraries,
  the benchmark index and the batches in flight — the *working set*, measured as the larger
  peak of the two sizes over all of the run's processes. What grows is the candidate rows the
  driver merges at the end, one per pool row that matched (their share and their in-memory size
  are measured at the larger size), and, on disk, the store: an 8-byte id hash per pool row plus
  the candidate rows. A worker node runs one worker per core, each within the working set's
  share of one measured worker (an upper bound: the measured set includes the driver's audit of
  the candidates and a copy of the libraries per process).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["PLAN_ROWS", "PassCost", "PeakMemory", "ScalePlan", "cpu_seconds"]

PLAN_ROWS = (100_000_000, 1_000_000_000)
"""Pool sizes the plan projects to."""
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads) and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _rss_bytes(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
        return int(fields[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _descendants(root: int) -> list[int]:
    """``root`` and every live process below it (from /proc; empty off Linux)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        out += frontier
    return out


class PeakMemory:
    """Context manager: the peak summed RSS (MiB) of this process and its children, sampled
    every ``interval`` seconds on a thread (Linux /proc; 0 elsewhere)."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        pid = os.getpid()
        children_every = 10   # walking /proc is slower than reading one file: every 10th tick
        tick, tree = 0, [pid]
        while not self._stop.is_set():
            if tick % children_every == 0:
                tree = _descendants(pid) if Path("/proc").is_dir() else [pid]
            total = sum(_rss_bytes(p) for p in tree)
            self.peak_mib = max(self.peak_mib, total / 2**20)
            tick += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass(frozen=True)
class PassCost:
    """One pass measured at two pool sizes."""

    name: str
    rows_small: int
    rows_large: int
    cpu_s: float
    """CPU seconds (all processes) at ``rows_large``."""
    wall_s: float
    peak_small_mib: float
    peak_large_mib: float
    cpu_small_s: float | None = None
    """CPU seconds at ``rows_small``; with it the rate is the marginal one, free of the fixed
    cost of loading benchmarks, building indexes and writing outputs."""

    @property
    def rows_per_core_s(self) -> float:
        if self.cpu_small_s is not None and self.cpu_s > self.cpu_small_s \
                and self.rows_large > self.rows_small:
            return (self.rows_large - self.rows_small) / (self.cpu_s - self.cpu_small_s)
        return self.rows_large / self.cpu_s if self.cpu_s > 0 else float("inf")

    @property
    def setup_cpu_s(self) -> float:
        """CPU seconds a run spends whatever its size (0 without two sizes)."""
        return max(0.0, self.cpu_s - self.rows_large / self.rows_per_core_s)

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    matched_rows: int = 0
    """Pool rows that matched at ``rows_large`` (what the driver merges; the candidates of an
    exact scan are these rows)."""
    matched_row_bytes: float = 0.0
    """Mean bytes of one matched row held in memory (its text and id as Python strings and
    two list slots)."""
    workers: int = 1
    """Workers the measured runs used (one batch in flight each)."""

    @property
    def working_mib(self) -> float:
        """Peak memory that does not grow with the pool: libraries, index, batches in flight."""
        return max(self.peak_small_mib, self.peak_large_mib)

    @property
    def matched_share(self) -> float:
        return self.matched_rows / self.rows_large if self.rows_large > 0 else 0.0

    def wall_s_for(self, rows: int, *, nodes: int, cores: int) -> float:
        return self.setup_cpu_s + rows / (self.rows_per_core_s * cores * nodes)

    def driver_mib_for(self, rows: int) -> float:
        """The driver: the working set plus every matched row of ``rows``."""
        return self.working_mib + rows * self.matched_share * self.matched_row_bytes / 2**20

    def worker_node_mib(self, cores: int) -> float:
        """A worker node: one worker per core, each within the measured working set's share
        of one worker."""
        return self.working_mib / max(1, self.workers) * cores

    def store_gib_for(self, rows: int) -> float:
        """The scan store on disk: an 8-byte id hash per row plus the matched rows."""
        return rows * (8 + self.matched_share * self.matched_row_bytes) / 2**30


@dataclass(frozen=True)
class ScalePlan:
    """Projected wall time and memory of each pass for :data:`PLAN_ROWS` on ``nodes``."""

    costs: tuple[PassCost, ...]
    nodes: tuple[int, ...]
    cores_per_node: int

    def to_dict(self) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        for c in self.costs:
            for total in PLAN_ROWS:
                for n in self.nodes:
                    rows.append({"pass": c.name, "rows": total, "nodes": n,
                                 "cores_per_node": self.cores_per_node,
                                 "wall_s": c.wall_s_for(total, nodes=n,
                                                        cores=self.cores_per_node),
                                 "worker_node_mib": c.worker_node_mib(self.cores_per_node),
                                 "driver_mib": c.driver_mib_for(total),
                                 "store_gib": c.store_gib_for(total)})
        return {"measured": [{"pass": c.name, "rows": c.rows_large, "cpu_s": c.cpu_s,
                              "wall_s": c.wall_s, "cores_used": c.cores_used,
                              "rows_per_core_s": c.rows_per_core_s,
                              "peak_mib": [c.peak_small_mib, c.peak_large_mib],
                              "peak_rows": [c.rows_small, c.rows_large],
                              "working_mib": c.working_mib, "matched_rows": c.matched_rows,
                              "matched_row_bytes": c.matched_row_bytes, "workers": c.workers}
                             for c in self.costs],
                "projection": rows}

    def render(self) -> str:
        lines = ["per-core throughput (rows / CPU-second of every audit process) and memory:"]
        for c in self.costs:
            lines.append(f"  {c.name:<10}{c.rows_per_core_s:>10,.0f} rows/s per core "
                         f"({c.cores_used:.1f} cores busy, {c.setup_cpu_s:.1f} CPU-s fixed "
                         f"cost); peak RSS {c.peak_small_mib:,.0f} MiB at {c.rows_small:,} "
                         f"rows, {c.peak_large_mib:,.0f} MiB at {c.rows_large:,}; "
                         f"{c.workers} worker(s); {c.matched_share:.2%} of rows matched, "
                         f"{c.matched_row_bytes:,.0f} B each in memory")
        lines.append(f"projection ({self.cores_per_node} cores per node):")
        lines.append(f"  {'pass':<10}{'rows':>7}{'nodes':>7}{'wall':>11}{'worker node':>14}"
                     f"{'driver':>11}{'store (disk)':>14}")
        for c in self.costs:
            for total in PLAN_ROWS:
                for n in self.nodes:
                    wall = c.wall_s_for(total, nodes=n, cores=self.cores_per_node)
                    lines.append(f"  {c.name:<10}{_rows(total):>7}{n:>7}{_duration(wall):>11}"
                                 f"{_mib(c.worker_node_mib(self.cores_per_node)):>14}"
                                 f"{_mib(c.driver_mib_for(total)):>11}"
                                 f"{c.store_gib_for(total):>10.1f} GiB")
        lines += [
            "assumptions: rows are matched independently against one small benchmark index, "
            "so N nodes × C cores run N × C times the per-core rate measured between the two "
            "sizes, plus the fixed cost once (no straggler, I/O or merge cost).",
            "memory: a process streams its rows, so its working set (the larger measured peak) "
            "does not grow with the pool; a worker node runs one worker per core, each within "
            "one measured worker's share of that set (an upper bound). The driver adds every "
            "matched row (the measured share and size; a more contaminated corpus needs more) "
            "and writes the scan store to disk: 8 bytes of id hash per row plus the matched "
            "rows.",
        ]
        return "\n".join(lines)


def _rows(n: int) -> str:
    return f"{n // 1_000_000_000}B" if n >= 1_000_000_000 else f"{n // 1_000_000}M"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _mib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"
