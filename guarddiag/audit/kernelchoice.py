"""When the audit's scan runs its compiled kernels (:mod:`guarddiag.audit.kernels`).

Either kernel keeps the rows its vectorised counterpart keeps, so the choice is one of speed.
numba's import and its first load of cached machine code cost a process CPU time and memory,
started beside the benchmark loading (:func:`guarddiag.cores.meanwhile`) but mostly holding the
GIL (the first cached load has numba load its NumPy typing and lowering registries, whose BLAS
check imports ``scipy.linalg``, which the exact audit does not otherwise import). The kernels
save CPU time per pool row in both scans, the near-dup scan most. So each scan runs its kernel
from a pool size on, measured on whole audits (:data:`COMPILED_NEAR_BYTES`,
:data:`COMPILED_EXACT_BYTES`; the figures: docs/decisions.md, 2026-12-05), and
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
"""Pools of this many bytes of files or more take the near-dup scan's compiled probe. Whole
near-dup audits of the synthetic pool broke even near 100,000 rows (6.5 MB of parquet; 1.32-1.34
s against 1.62-1.65 s at 50,000 rows, 1.77-1.81 s against 1.67-1.70 s at 150,000)."""

COMPILED_EXACT_BYTES = 160 << 20
"""Pools of this many bytes of files or more take the exact scan's compiled kernel. Whole exact
audits of the synthetic pool, compiled against vectorised, three runs each: 1.69-1.80 s against
1.45-1.53 s at 1M rows (65 MB), 2.26-2.54 against 2.18-2.27 at 2M (131 MB), 2.50-2.69 against
2.76-2.80 at 3M (196 MB); before the kernel read the ends of rows holding an unprovable
character, 3.72-4.65 against 4.40-4.92 at 5M (327 MB) and 6.25-6.49 against 8.06-8.26 at 10M
(653 MB)."""


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
