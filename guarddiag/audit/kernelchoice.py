"""When the audit's scan runs its compiled kernels (:mod:`guarddiag.audit.kernels`).

Either kernel keeps the rows its vectorised counterpart keeps, so the choice is one of speed.
numba's import and its first load of cached machine code cost a process CPU time and memory,
started beside the benchmark loading (:func:`guarddiag.cores.meanwhile`) but mostly holding the
GIL (the first cached load has numba load its NumPy typing and lowering registries, whose BLAS
check imports ``scipy.linalg``, which the exact audit does not otherwise import). The kernels
save CPU time per pool row in both scans, the near-dup scan most. So each scan runs its kernel
from a pool size on, measured on whole audits (:data:`COMPILED_NEAR_BYTES`,
:data:`COMPILED_EXACT_BYTES`; the figures:
docs/decisions.md#2026-12-05-where-the-compiled-kernels-pay), and
:data:`SCAN_KERNEL_ENV` forces either everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from guarddiag.audit.stream import Shard
from guarddiag.errors import GuarddiagError

__all__ = ["COMPILED_EXACT_BYTES", "COMPILED_NEAR_BYTES", "SCAN_KERNEL_ENV", "compiled_scan_pays",
           "forced_kernel", "warm_exact_kernel"]

SCAN_KERNEL_ENV = "GUARDDIAG_SCAN_KERNEL"
"""``compiled`` or ``vectorised`` forces the scan's kernels, and the near-dup pairing's
(:func:`~guarddiag.audit.neardup.near_matches`); ``vectorised`` never imports numba. Unset or
``auto``: by the size of the work. The bench measures the compiled kernels at every size."""

COMPILED_NEAR_BYTES = 8 << 20
"""Pools of this many bytes of files or more take the near-dup scan's compiled probe: whole
near-dup audits of the synthetic pool broke even near 100,000 rows, 6.5 MB of parquet
(docs/decisions.md#2026-12-05-where-the-compiled-kernels-pay)."""

COMPILED_EXACT_BYTES = 160 << 20
"""Pools of this many bytes of files or more take the exact scan's compiled kernel: whole exact
audits of the synthetic pool, compiled against vectorised, broke even between 2M and 3M rows
(docs/decisions.md#2026-12-05-where-the-compiled-kernels-pay)."""


def forced_kernel() -> str | None:
    """``compiled`` or ``vectorised`` if :data:`SCAN_KERNEL_ENV` forces the kernels, else
    ``None``."""
    forced = os.environ.get(SCAN_KERNEL_ENV, "auto")
    if forced not in ("auto", "compiled", "vectorised"):
        raise GuarddiagError(f"{SCAN_KERNEL_ENV}={forced!r}: expected auto, compiled or "
                             "vectorised")
    return None if forced == "auto" else forced


def compiled_scan_pays(shards: Sequence[Shard], *, near: bool) -> bool:
    """Whether a scan of ``shards`` (``near``: a near-dup scan) should run its compiled kernel:
    as :data:`SCAN_KERNEL_ENV` says, else by their size on disk (a file that cannot be sized
    counts as large)."""
    forced = forced_kernel()
    if forced is not None:
        return forced == "compiled"
    total = 0
    for shard in shards:
        try:
            total += os.path.getsize(shard.path)
        except OSError:
            return True
    return total >= (COMPILED_NEAR_BYTES if near else COMPILED_EXACT_BYTES)


def warm_exact_kernel() -> None:
    """Import and load the exact scan's kernel, so that its first real call starts at once."""
    from guarddiag.audit.kernels import warm_exact

    warm_exact()
