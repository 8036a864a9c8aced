"""The options of ``guarddiag predict`` and ``sweep``, declared once: :class:`PredictOptions`,
:class:`SweepOptions`.

The CLI (``guarddiag predict``, and ``sweep``'s scoring step), the demo and
:func:`~guarddiag.predict.runner.predict_runs` take this one object, so their defaults cannot
drift; the defaults are pinned in ``tests/test_options_defaults.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from guarddiag import paths
from guarddiag.cores import usable_cores
from guarddiag.typed import Model, VerbOptions

BATCH_SIZE = 64
"""Prompts per scoring batch, unless a caller says otherwise (the demo's parallel scoring uses
it too, so its score caches are what ``predict_runs`` would have written)."""


class PredictOptions(Model):
    """What to score, with what, and where the predictions table goes."""

    runs_dir: Path = Field(default_factory=lambda: paths.work_paths().runs)
    """Runs folder: every finished run under it is scored."""
    pool_path: Path = Field(default_factory=lambda: paths.work_paths().pool)
    """Labelled pool: its val split is scored as benchmark ``pool_val``; the TF-IDF baseline
    is fitted on it."""
    audit_dir: Path | None = Field(default_factory=lambda: paths.work_paths().audit)
    """Audit folder: ``survives_decontam`` comes from it when it exists."""
    benchmarks: str | tuple[str, ...] = "all"
    """Benchmark ids or selectors (all, study, extra, derived, a,b,…); ``none`` scores only
    the pool's val split."""
    data_dir: Path | None = None
    """Public data directory; None = ``$GUARDDIAG_DATA``."""
    derived_dir: Path | None = None
    """Folder of derived (mutated) subsets; None = none."""
    out_path: Path | None = None
    """The predictions table; None = ``<runs_dir>/predictions.parquet``."""
    batch_size: int = Field(default=BATCH_SIZE, ge=1)
    """Prompts per scoring batch (sorted by length, padded per batch)."""
    baseline: bool = True
    """Score the TF-IDF baseline too."""
    threads: int | None = Field(default=None, ge=1)
    """torch intra-op threads; None = 1 when every run is a CPU size
    (:func:`guarddiag.model.auto_threads`)."""
    device: str = "auto"
    """auto (CUDA when present), cpu, cuda, cuda:N or mps; on CUDA the guards score under bf16
    autocast."""


class SweepOptions(VerbOptions):
    """How ``guarddiag sweep`` (:func:`~guarddiag.predict.sweep.sweep`) runs the plan's tasks."""

    WHERE = "sweep options"

    engine: Literal["local", "ray"] = "local"
    """local: a process pool of ``jobs`` workers; ray: Ray tasks on a cluster."""
    jobs: int = Field(default_factory=usable_cores, ge=1)
    """Local engine: runs at a time (default: the usable cores)."""
    address: str | None = None
    """Ray cluster address (auto: the running cluster; None: start one)."""
    predict: bool = True
    """Score every run after training and write the predictions table."""
