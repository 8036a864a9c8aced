"""How many torch intra-op threads training and scoring use."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.sizes import CPU_SIZES, FROZEN_SIZES


def auto_threads(sizes: Iterable[str]) -> int | None:
    """Intra-op threads for training/scoring these sizes: 1 for the CPU sizes, else None
    (torch's default). Matrices of width 64-128 gain little from a second thread, and on a
    shared 2-core machine two spinning OpenMP threads per process made training far slower
    (the measurement: docs/decisions.md, 2026-12-03)."""
    sizes = list(sizes)
    return 1 if sizes and all(s in CPU_SIZES or s in FROZEN_SIZES for s in sizes) else None


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Use ``n`` intra-op threads inside the block (None: leave torch's setting), then restore."""
    if n is None:
        yield
        return
    if n < 1:
        raise GuarddiagError(f"--threads: expected at least 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)

