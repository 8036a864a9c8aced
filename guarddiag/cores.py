"""How many CPU cores this process may use: the one answer every parallel stage asks."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. a Slurm or container limit), at
    least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)
