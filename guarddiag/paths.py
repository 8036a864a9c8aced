"""Where things live: the public data directory, the bundled specs, the default work folders."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from guarddiag.errors import GuarddiagError

DATA_ENV = "GUARDDIAG_DATA"
"""Environment variable naming the public data directory (``benchmarks/`` and ``pools/``)."""

DEFAULT_DATA_DIR = Path.home() / ".cache" / "guarddiag" / "data"
"""Where ``guarddiag data pull`` puts files when neither --data-dir nor GUARDDIAG_DATA is set."""

CACHE_ENV = "GUARDDIAG_CACHE"
"""Environment variable naming the folder of derived caches (the benchmark subsets' verified
frames, the audit's benchmark normal forms); ``off`` turns them off."""

DEFAULT_CACHE_DIR = Path.home() / ".cache" / "guarddiag" / "cache"

USER_DATA_ENV = "XDG_DATA_HOME"
"""The XDG base directory of a user's own data files (default ``~/.local/share``)."""

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


def user_data_dir() -> Path:
    """guarddiag's folder of the user's own files (their benchmarks' manifests):
    ``$XDG_DATA_HOME/guarddiag``, else ``~/.local/share/guarddiag``. Never the shared data
    directory: what a user adds stays theirs."""
    env = os.environ.get(USER_DATA_ENV)
    base = Path(env).expanduser() if env and Path(env).is_absolute() else \
        Path.home() / ".local" / "share"
    return base / "guarddiag"


def cache_dir() -> Path | None:
    """``$GUARDDIAG_CACHE``, else :data:`DEFAULT_CACHE_DIR`; None when it is ``off``. Every
    entry is keyed by a digest of what it was computed from, so a stale one is never read."""
    env = os.environ.get(CACHE_ENV)
    if env and env.strip().lower() == "off":
        return None
    return Path(env).expanduser() if env else DEFAULT_CACHE_DIR


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
    return Path(override) if override else builtin_manifests_dir()


def builtin_manifests_dir() -> Path:
    """The ``data_manifests/`` guarddiag ships, whatever ``$GUARDDIAG_MANIFESTS`` names."""
    return _spec_root("data_manifests")


def branches_dir() -> Path:
    """``branches/``: the teacher, reference and E1–E10 branch specs."""
    override = os.environ.get("GUARDDIAG_BRANCHES")
    return Path(override) if override else _spec_root("branches")


@dataclass(frozen=True)
class WorkPaths:
    """Where every stage's hand-off lives. ``WorkPaths.under(root)`` gives the default layout
    under one work folder; a command's ``--pool``/``--runs-dir``/… options replace single fields
    (``dataclasses.replace``)."""

    root: Path
    """The work folder (default ``work/``)."""
    pool: Path
    """The labelled pool table, ``<root>/pool/pool.parquet``."""
    audit: Path
    """The contamination audit folder, ``<root>/audit``."""
    runs: Path
    """Training runs, their scores and ``predictions.parquet``, ``<root>/runs``."""
    derived: Path
    """Derived (mutated) benchmark subsets, ``<root>/derived``."""

    @classmethod
    def under(cls, root: str | os.PathLike[str] | None = None) -> WorkPaths:
        base = Path(root) if root is not None else DEFAULT_WORK_DIR
        return cls(root=base, pool=base / "pool" / "pool.parquet", audit=base / "audit",
                   runs=base / "runs", derived=base / "derived")

    @property
    def predictions(self) -> Path:
        """The predictions table every analysis reads."""
        return self.runs / "predictions.parquet"

    @property
    def sorry(self) -> Path:
        """Outputs of the SORRY-Bench commands (``balance/``, ``jaccard/``)."""
        return self.root / "sorry"

    @property
    def outside(self) -> Path:
        """Outside guards' predictions, one parquet file per guard."""
        return self.runs / "outside"


def work_paths(work_dir: str | os.PathLike[str] | None = None) -> WorkPaths:
    """The default layout of every stage's hand-off under one work folder."""
    return WorkPaths.under(work_dir)
