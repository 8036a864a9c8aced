"""What one guard run scores: the selected benchmark frames (after the adapter's ``prepare``),
their digests and bases, the user's own among them, and the audit's decontamination lists."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from guarddiag import data
from guarddiag.audit import load_decontaminated
from guarddiag.errors import GuarddiagError
from guarddiag.guards.base import PROMPT_RESPONSE, GuardAdapter
from guarddiag.guards.responses import with_responses
from guarddiag.pool.table import read_pool

__all__ = ["ScoringInputs", "decontaminated", "select_inputs"]

logger = logging.getLogger(__name__)


def decontaminated(audit_dir: Path | None, *, derived_dir: str | Path | None,
                   data_dir: str | Path | None) -> dict[str, frozenset[str]] | None:
    """The audit's decontaminated prompt ids per benchmark; None without an audit folder."""
    # The same rule as `guarddiag predict`, so every run agrees on each prompt's flag: derived
    # subsets inherit their base's decontamination.
    if audit_dir is None or not Path(audit_dir).is_dir():
        return None
    bases = data.derived_bases(data.load_manifests(derived_dir=derived_dir, data_dir=data_dir))
    return load_decontaminated(audit_dir, derived_from=bases)


@dataclass(frozen=True)
class ScoringInputs:
    """The benchmark frames to score, after the adapter's ``prepare``."""

    frames: dict[str, pl.DataFrame]
    benchmark_sha256: dict[str, str] | None
    unavailable: tuple[str, ...]
    derived_from: dict[str, str] = field(default_factory=dict)
    """Each derived subset's base (from the manifests; empty for injected frames)."""
    user: frozenset[str] = frozenset()
    """The user's own benchmarks (``data add``) among the frames, and subsets derived from
    them: not audited until an audit covers them."""


POOL_VAL = "pool_val"
"""The pool's val split as a benchmark id (the name ``guarddiag predict`` gives it)."""


def _with_pool_val(frames: dict[str, pl.DataFrame], sha256: dict[str, str] | None,
                   pool_path: str | Path) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    pool = read_pool(pool_path)
    val = pool.split("val").select(pl.lit(POOL_VAL).alias("benchmark"),
                                   pl.col("prompt_id").cast(pl.String), "text",
                                   pl.lit(None, dtype=pl.String).alias("label_kind"))
    return {**frames, POOL_VAL: val}, {**(sha256 or {}), POOL_VAL: pool.sha256}


def select_inputs(adapter: GuardAdapter, name: str, *, benchmarks: str | Sequence[str],
                  data_dir: str | Path | None, derived_dir: str | Path | None,
                  frames: dict[str, pl.DataFrame] | None,
                  benchmark_sha256: dict[str, str] | None,
                  pool: str | Path | None = None) -> ScoringInputs:
    """The injected ``frames``, or the selected benchmarks loaded from the data directory; with
    ``pool``, the pool's val split too (as ``pool_val``, the branches' name for it): the
    report's calls read a guard at the threshold that matches the branches' false-flag rate on
    its policy-neutral rows, and a guard scored on them can be placed at that one operating
    point."""
    unavailable: tuple[str, ...] = ()
    known: list[str] | None = None
    manifests = None
    if frames is None:
        bset = data.load_benchmarks(benchmarks, data_dir=data_dir, derived_dir=derived_dir)
        frames = bset.frames
        benchmark_sha256 = bset.sha256
        unavailable = tuple(s.id for s in bset.unavailable)
        for status in bset.unavailable:
            logger.info(f"skipping {status.id}: unavailable ({status.message})")
        manifests = data.load_manifests(derived_dir=derived_dir, data_dir=data_dir)
        known = list(manifests)
    if not frames:
        raise GuarddiagError(f"no benchmark prompts to score (selected: {benchmarks}; "
                             f"unavailable: {', '.join(unavailable) or 'none'})")
    if pool is not None:
        frames, benchmark_sha256 = _with_pool_val(frames, benchmark_sha256, pool)
    if adapter.input == PROMPT_RESPONSE:
        frames = with_responses(frames, guard=name, manifests=manifests, data_dir=data_dir)
    frames = adapter.prepare(frames, known=known)
    if not frames:
        raise GuarddiagError(f"guard {name}: none of the selected benchmarks can be scored")
    if manifests is None:
        return ScoringInputs(frames, benchmark_sha256, unavailable)
    return ScoringInputs(frames, benchmark_sha256, unavailable, data.derived_bases(manifests),
                   frozenset(data.user_benchmarks(manifests)))
