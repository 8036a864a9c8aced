"""Where things live: the public data directory, the bundled specs, the default work folders."""

from __future__ import annotations

import os
from pathlib import Path

from guarddiag.errors import GuarddiagError

DATA_ENV = "GUARDDIAG_DATA"
"""Environment variable naming the public data directory (``benchmarks/`` and ``pools/``)."""

DEFAULT_DATA_DIR = Path.home() / ".cache" / "guarddiag" / "data"
"""Where ``guarddiag data pull`` puts files when neither --data-dir nor GUARDDIAG_DATA is set."""

DEFAULT_WORK_DIR = Path("work")
"""Default root of generated work products: pool/, audit/, runs/."""

_PACKAGE = Path(__file__).resolve().parent


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``--data-dir`` if given, else ``$GUARDDIAG_DATA``, else :data:`DEFAULT_DATA_DIR`.

    The directory need not exist yet (``data pull`` creates it); commands that read data report
    missing files one by one.
    """
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    return DEFAULT_DATA_DIR


def _spec_root(name: str) -> Path:
    # A wheel carries the specs inside the package; an editable install (and a source checkout)
    # reads them from the repository root, so edits to branches/*.yaml take effect at once.
    bundled = _PACKAGE / "_specs" / name
    if bundled.is_dir():
        return bundled
    repo = _PACKAGE.parent / name
    if repo.is_dir():
        return repo
    raise GuarddiagError(f"cannot find the {name}/ folder next to the guarddiag package ({repo})")


def manifests_dir() -> Path:
    """``data_manifests/``: benchmark, pool and policy manifests."""
    override = os.environ.get("GUARDDIAG_MANIFESTS")
    return Path(override) if override else _spec_root("data_manifests")


def branches_dir() -> Path:
    """``branches/``: the teacher, reference and E1–E10 branch specs."""
    override = os.environ.get("GUARDDIAG_BRANCHES")
    return Path(override) if override else _spec_root("branches")


def work_paths(work_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Default locations of every stage's hand-off under one work folder."""
    root = Path(work_dir) if work_dir is not None else DEFAULT_WORK_DIR
    return {
        "root": root,
        "pool": root / "pool" / "pool.parquet",
        "audit": root / "audit",
        "runs": root / "runs",
        "predictions": root / "runs" / "predictions.parquet",
        "derived": root / "derived",
    }
