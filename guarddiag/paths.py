"""Where things live: the public data directory, the bundled specs, the work folders and the
file names inside them.

The work folder's layout has one owner each: :class:`WorkPaths` (which folder holds what),
:class:`PoolFolder` (the pool table, its agreement and meta), :class:`RunsFolder` (a runs
folder's predictions table, outside guards and shared caches; the files inside one run's folder
are :mod:`guarddiag.runs`') and :class:`AuditFolder` (an audit folder's outputs). Every module
asks them for a path instead of joining a file name by hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from guarddiag.errors import GuarddiagError

META_FILE = "meta.json"
"""The file that says how a folder's contents were made (a run, an audit, a pool, a report).
Declared here, with every other file name of the work folder, where polars-free modules (this one
is imported by ``import guarddiag``) can name it; :mod:`guarddiag.files` writes it."""

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
class PoolFolder:
    """A pool folder, as ``guarddiag pool build`` writes it."""

    path: Path

    @property
    def table(self) -> Path:
        """The labelled pool, ``pool.parquet``."""
        return self.path / "pool.parquet"

    @property
    def agreement(self) -> Path:
        """The two policies' agreement, overall and per split (``agreement.json``)."""
        return self.path / "agreement.json"

    @property
    def meta(self) -> Path:
        """How the pool was built: recipe, sources, counts (``meta.json``)."""
        return self.path / META_FILE


@dataclass(frozen=True)
class OutsideGuardFiles:
    """One outside guard's files in a runs folder, ``outside/<run>.*``."""

    table: Path
    """Its predictions, ``<run>.parquet``."""
    raw: Path
    """Its raw answers, ``<run>.raw.jsonl`` (reused when the benchmark is scored again)."""
    meta: Path
    """Its settings, identity and counts, ``<run>.meta.json``."""
    canaries: Path
    """Canary answers that tell whether the same guard still answers, ``<run>.canaries.json``."""


@dataclass(frozen=True)
class RunsFolder:
    """A runs folder: one folder per run (``<size>/<branch>/seed=<s>``, :mod:`guarddiag.runs`),
    the predictions table every analysis reads, the outside guards' tables and the caches the
    runs share."""

    path: Path

    PREDICTIONS: ClassVar[str] = "predictions.parquet"
    OUTSIDE: ClassVar[str] = "outside"
    CACHE: ClassVar[str] = "_cache"
    _TABLE, _META = ".parquet", ".meta.json"

    @property
    def predictions(self) -> Path:
        """The branches' and baselines' predictions, ``predictions.parquet``."""
        return self.path / self.PREDICTIONS

    @property
    def outside(self) -> Path:
        """Outside guards' predictions, one parquet file per guard (``outside/``)."""
        return self.path / self.OUTSIDE

    @property
    def cache(self) -> Path:
        """Tokenizers and teacher logits shared between runs (``_cache/``)."""
        return self.path / self.CACHE

    def outside_guard(self, run: str) -> OutsideGuardFiles:
        """The files of the outside guard ``run``."""
        return OutsideGuardFiles(*(self.outside / f"{run}{suffix}" for suffix in
                                   (self._TABLE, ".raw.jsonl", self._META, ".canaries.json")))

    def outside_tables(self) -> list[Path]:
        """Every outside guard's predictions table, in name order."""
        return sorted(self.outside.glob(f"*{self._TABLE}"))

    def outside_metas(self) -> list[Path]:
        """Every outside guard's meta file, in name order."""
        return sorted(self.outside.glob(f"*{self._META}"))

    @classmethod
    def meta_of(cls, table: Path) -> Path:
        """The meta file beside an outside guard's table."""
        return table.with_suffix(cls._META)


@dataclass(frozen=True)
class AuditFolder:
    """A contamination audit's folder (its layout: :mod:`guarddiag.audit`). ``summary.json`` and
    ``meta.json`` are written last, so a folder holding both is a finished audit."""

    path: Path

    SUMMARY: ClassVar[str] = "summary.json"
    META: ClassVar[str] = META_FILE
    OVERLAP: ClassVar[str] = "overlap.parquet"
    ROWS_TO_REMOVE: ClassVar[str] = "rows_to_remove"
    DECONTAMINATED: ClassVar[str] = "decontaminated"
    PROVENANCE: ClassVar[str] = "provenance.json"
    OUTPUTS: ClassVar[tuple[str, ...]] = (SUMMARY, META, OVERLAP, PROVENANCE, DECONTAMINATED)
    """What one audit leaves behind and a merge carries over."""

    @property
    def summary(self) -> Path:
        """Per benchmark: sizes, overlap counts and kinds, examples (``summary.json``)."""
        return self.path / self.SUMMARY

    @property
    def meta(self) -> Path:
        """How the audit was made: inputs, options, cache key (``meta.json``)."""
        return self.path / self.META

    @property
    def overlap(self) -> Path:
        """Every match of a benchmark prompt in the pool (``overlap.parquet``)."""
        return self.path / self.OVERLAP

    @property
    def rows_to_remove(self) -> Path:
        """The pool rows with a match (``rows_to_remove.parquet``)."""
        return self.path / f"{self.ROWS_TO_REMOVE}.parquet"

    @property
    def rows_to_remove_jsonl(self) -> Path:
        """The same rows with their addresses and texts (``rows_to_remove.jsonl``)."""
        return self.path / f"{self.ROWS_TO_REMOVE}.jsonl"

    @property
    def decontaminated(self) -> Path:
        """One list of kept prompt ids per benchmark (``decontaminated/``)."""
        return self.path / self.DECONTAMINATED

    def kept_ids(self, benchmark: str) -> Path:
        """A benchmark's kept prompt ids, one a line (``decontaminated/<benchmark>.txt``)."""
        return self.decontaminated / f"{benchmark}.txt"

    @property
    def provenance(self) -> Path:
        """Per benchmark, the audit that wrote its list (``provenance.json``)."""
        return self.path / self.PROVENANCE

    def is_finished(self) -> bool:
        """Both files an audit writes last are there."""
        return self.summary.is_file() and self.meta.is_file()


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
        return cls(root=base, pool=PoolFolder(base / "pool").table, audit=base / "audit",
                   runs=base / "runs", derived=base / "derived")

    @property
    def runs_folder(self) -> RunsFolder:
        """The runs folder's own layout."""
        return RunsFolder(self.runs)

    @property
    def audit_folder(self) -> AuditFolder:
        """The audit folder's own layout."""
        return AuditFolder(self.audit)

    @property
    def predictions(self) -> Path:
        """The predictions table every analysis reads."""
        return self.runs_folder.predictions

    @property
    def sorry(self) -> Path:
        """Outputs of the SORRY-Bench commands (``balance/``, ``jaccard/``)."""
        return self.root / "sorry"

    @property
    def outside(self) -> Path:
        """Outside guards' predictions, one parquet file per guard."""
        return self.runs_folder.outside


def work_paths(work_dir: str | os.PathLike[str] | None = None) -> WorkPaths:
    """The default layout of every stage's hand-off under one work folder."""
    return WorkPaths.under(work_dir)
