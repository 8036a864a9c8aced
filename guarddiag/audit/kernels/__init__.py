"""The audit scan's per-row passes, compiled (numba): one pass over a batch's bytes each.

* :mod:`~guarddiag.audit.kernels.near`: the near-dup probe (the rows whose word set reaches the
  Jaccard threshold with a benchmark prompt's);
* :mod:`~guarddiag.audit.kernels.exact`: the exact pass's filter (the rows whose key, the normal
  form without spaces, is a benchmark prompt's).

Each keeps exactly the rows of its vectorised counterpart (:mod:`guarddiag.audit.neardup`,
:func:`guarddiag.audit.normal.exact_candidates`); ``tests/test_kernels.py`` and
``tests/test_exact_kernel.py`` check both. numba compiles the kernels on the first large audit
of an installation and caches the machine code beside these files (``cache=True``). The CLI's
start-up and the audit of a small pool never import them
(:func:`guarddiag.audit.kernelchoice.compiled_scan_pays`). This module holds what both share:
the hashing constants, the slot of an open-addressing table and a column's Arrow buffers.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from guarddiag.audit.normal import large_strings

__all__ = ["FNV_OFFSET", "FNV_PRIME", "column_buffers", "home_slot"]

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
"""FNV-1a's 64-bit offset basis and prime (words past 8 bytes, keys' ends and keys)."""
_MIX = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def home_slot(key, shift):
    """A key's home slot in a table of ``2 ** (64 - shift)`` slots (the high bits of a
    multiply-xorshift mix: a packed word's entropy sits in its low bytes)."""
    key = (key ^ (key >> np.uint64(29))) * _MIX
    return np.int64((key ^ (key >> np.uint64(32))) >> shift)


def column_buffers(texts: pl.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """(offsets, bytes) of a string column without nulls, or ``None`` if it has nulls."""
    arrow = large_strings(texts)
    if arrow is None:
        return None
    _, offsets, data = arrow.buffers()
    offsets_np = np.frombuffer(offsets, dtype=np.int64)[arrow.offset:arrow.offset + len(arrow) + 1]
    data_np = (np.frombuffer(data, dtype=np.uint8) if data is not None
               else np.zeros(0, dtype=np.uint8))
    return offsets_np, data_np


