"""The options of ``guarddiag report``, declared once: :class:`ReportOptions`.

The CLI (``guarddiag report``), the API (:func:`guarddiag.run_report`), the analysis step and the
section builders all take this one object, so their defaults cannot drift. Every default that
changes a reported number (threshold, mapping, resamples, confidence, seed, subset, min seeds,
alpha, competence floor, rank group/benchmark/tail) is read from here and pinned in
``tests/test_options_defaults.py``; the study's constants among them (threshold, alpha,
equivalence margin, competence floor, rank benchmark) default to the protocol's
(:func:`guarddiag.protocol.protocol`), as do the analysis functions' keyword defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from guarddiag import paths, stats
from guarddiag.analyses.defaults import DEFAULT_GROUP, DEFAULT_MIN_SEEDS
from guarddiag.protocol import protocol
from guarddiag.typed import Model


class ReportOptions(Model):
    """Where the saved tables are, how to analyse them, and where the report goes."""

    runs_dir: Path = Field(default_factory=lambda: paths.work_paths().runs)
    """Folder with predictions.parquet and outside/*.parquet."""
    pool_path: Path | None = Field(default_factory=lambda: paths.work_paths().pool)
    """pool.parquet (VAL gold labels, pool statistics); None or absent omits its sections."""
    audit_dir: Path | None = Field(default_factory=lambda: paths.work_paths().audit)
    """Contamination audit folder with summary.json; None or absent omits its section."""
    data_dir: Path | None = None
    """Public data directory (benchmark categories for the SORRY-Bench analyses);
    None = ``$GUARDDIAG_DATA``."""
    derived_dir: Path | None = None
    """Folder of derived (mutated) subsets; None = ``work/derived``."""
    mapping: Literal["loose", "strict"] = "loose"
    """Binary mapping of the primary tables (both loose and strict are always computed)."""
    threshold: float = Field(default_factory=lambda: protocol().cutoff, ge=0.0, le=1.0)
    """A prompt reads unsafe when P(unsafe) >= threshold."""
    n_resamples: int = Field(default=stats.DEFAULT_RESAMPLES, ge=1)
    """Prompt-bootstrap resamples per score."""
    confidence: float = Field(default=stats.DEFAULT_CONFIDENCE, gt=0.0, lt=1.0)
    """Coverage of every interval."""
    seed: int = 0
    """Seed of every bootstrap and Monte-Carlo draw."""
    primary_subset: Literal["decontaminated", "full"] = "decontaminated"
    """Prompt subset of the primary tables and of the policy/capability call."""
    min_seeds: int = Field(default=DEFAULT_MIN_SEEDS, ge=2)
    """Seeds a recipe needs to count as a seed group for the floor."""
    alpha: float = Field(default_factory=lambda: protocol().alpha, gt=0.0, lt=1.0)
    """Level of the calibrated load test: a benchmark is policy-load where the BH q-value of
    its A-last vs B-last contrast is below alpha (:mod:`~guarddiag.analyses.loadtest`)."""
    equivalence_margin: float = Field(default_factory=lambda: protocol().equivalence_margin,
                                      gt=0.0, lt=1.0)
    """A benchmark is called *capability* only where an equivalence test (TOST at level
    alpha) puts the route-matched policy contrast within ±margin (:mod:`~.calls`)."""
    competence_floor: float = Field(default_factory=lambda: protocol().competence_floor,
                                    ge=0.0, le=1.0)
    """Mean reference CAP on the clear-harm benchmarks below which the report cautions that a
    capability-load call does not mean detection (:mod:`~guarddiag.analyses.competence`)."""
    rank_group: tuple[str, ...] = DEFAULT_GROUP
    """Branches of the exact rank test; empty = the A-last group read from the runs' roles."""
    rank_benchmark: str = Field(default_factory=lambda: protocol().rank_benchmark)
    """Benchmark of the rank test."""
    rank_tail: Literal["top", "bottom", "either"] = "top"
    """Declared direction of the rank test."""
    rank_explicit: bool = False
    """The user named the rank group/benchmark: an unknown name is an error, not a note."""
    out_dir: Path = Path("reports/report")
    """Output folder of the report (reports/<name>)."""
    title: str = "guarddiag report"
