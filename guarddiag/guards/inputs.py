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


def select_inputs(adapter: GuardAdapter, name: str, *, benchmarks: str | Sequence[str],
                  data_dir: str | Path | None, derived_dir: str | Path | None,
                  frames: dict[str, pl.DataFrame] | None,
                  benchmark_sha256: dict[str, str] | None) -> ScoringInputs:
    """The injected ``frames``, or the selected benchmarks loaded from the data directory."""
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
    if adapter.input == PROMPT_RESPONSE:
        frames = with_responses(frames, guard=name, manifests=manifests, data_dir=data_dir)
    frames = adapter.prepare(frames, known=known)
    if not frames:
        raise GuarddiagError(f"guard {name}: none of the selected benchmarks can be scored")
    if manifests is None:
        return ScoringInputs(frames, benchmark_sha256, unavailable)
    return ScoringInputs(frames, benchmark_sha256, unavailable, data.derived_bases(manifests),
                   frozenset(data.user_benchmarks(manifests)))
