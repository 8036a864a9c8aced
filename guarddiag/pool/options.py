"""The options of ``guarddiag pool build``, declared once: :class:`PoolOptions`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from guarddiag import paths
from guarddiag.typed import Model


class PoolOptions(Model):
    """Which recipe builds the pool, with which seed, and where it goes."""

    recipe: Path | None = None
    """Pool recipe YAML (unset: data_manifests/pools/default.yaml)."""
    out_dir: Path = Field(default_factory=lambda: paths.work_paths().pool.parent)
    """Output folder (pool.parquet, agreement.json, meta.json)."""
    seed: int | None = None
    """Override the recipe's seed (sampling, synthetic rows, splits)."""
    data_dir: Path | None = None
    """Public data directory; None = ``$GUARDDIAG_DATA``."""
