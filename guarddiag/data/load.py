"""Loading benchmark subsets: verification, caching, status, and writing derived subsets.

Loading a subset checks each file's sha256 and row count, reads it, applies the manifest's row
filter, reduces the rows to the record shape (see :mod:`guarddiag.data`) and checks ids are
unique and the prompt count is the manifest's ``expected_count``. Frames already verified in
this process are kept, keyed by the manifest and each file's size and mtime; across processes,
the frame the same file bytes, manifest and reading code gave is kept in the derived-cache
folder (:func:`guarddiag.paths.cache_dir`), keyed by a digest of all of them, while every
file is still hashed and checked on every load.

A derived (mutated) subset is written by :func:`write_derived_subset`: ``<id>.parquet`` plus
its manifest ``<id>.yaml`` under ``derived_dir``; its id is ``<base>__<mutation>``
(:data:`SUBSET_SEPARATOR`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from guarddiag import paths
from guarddiag.data import read as read_module
from guarddiag.data.fields import ID_PATTERN
from guarddiag.data.manifest import (
    KINDS,
    BenchmarkManifest,
    default_derived_dir,
    load_manifests,
    resolve_ids,
    searched_folders,
)
from guarddiag.data.read import FILE, ROW, normalise_file, read_file_rows
from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.files import (
    atomic_path,
    read_cached_parquet,
    sha256_file,
    verify_file,
    write_cached_parquet,
    write_parquet,
)

__all__ = [
    "DERIVED_COLUMNS",
    "FRAME_SCHEMA",
    "SUBSET_SEPARATOR",
    "BenchmarkSet",
    "SubsetStatus",
    "load_benchmark",
    "load_benchmarks",
    "load_subset",
    "subset_status",
    "write_derived_subset",
]


FRAME_SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(), "prompt_id": pl.String(), "text": pl.String(),
    "label_kind": pl.String(), "category": pl.String(),
}
DERIVED_COLUMNS = ("prompt_id", "text", "base_prompt_id", "mutation", "category")
SUBSET_SEPARATOR = "__"
"""``<base>__<mutation>``: the derived subset id of a mutation."""

@dataclass(frozen=True)
class SubsetStatus:
    """Whether one subset can be used, and why not."""

    id: str
    kind: str
    study: bool
    derived: bool
    status: str
    """``available`` | ``unavailable`` (a file is absent) | ``invalid`` (present but wrong)."""
    expected: int
    found: int | None
    """Prompts found after the filter (None unless the subset loaded)."""
    sha256: str | None
    """Subset digest (see :class:`BenchmarkSet`); None unless the subset loaded."""
    checksum_verified: bool
    """False when a file has no pinned sha256: only its row count was verified."""
    missing: tuple[str, ...]
    source: str
    message: str | None = None
    defined_in: str = "built-in"
    """``built-in`` (data_manifests/), ``user`` (the user manifests folder) or ``derived``."""
    manifest: str = ""
    """The manifest file the subset is defined by."""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "study": self.study, "derived": self.derived,
                "status": self.status, "expected": self.expected, "found": self.found,
                "sha256": self.sha256, "checksum_verified": self.checksum_verified,
                "missing": list(self.missing), "source": self.source, "message": self.message,
                "defined_in": self.defined_in, "manifest": self.manifest}


@dataclass(frozen=True)
class BenchmarkSet:
    """Loaded subsets, the ones that could not be loaded, and one digest per subset.

    ``sha256[id]`` is the file's sha256 for a one-file subset, else the sha256 of the files'
    hex digests joined by newlines in manifest order. A subset's digest identifies the exact
    bytes its prompts came from.
    """

    frames: dict[str, pl.DataFrame]
    unavailable: list[SubsetStatus] = field(default_factory=list)
    sha256: dict[str, str] = field(default_factory=dict)

    @property
    def n_prompts(self) -> int:
        return sum(f.height for f in self.frames.values())

    def to_frame(self) -> pl.DataFrame:
        """Every loaded prompt in one table (derived columns null for base subsets)."""
        if not self.frames:
            return pl.DataFrame(schema=FRAME_SCHEMA)
        return pl.concat(list(self.frames.values()), how="diagonal_relaxed")


def _subset_digest(digests: list[str]) -> str:
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


# Frames already verified in this process, keyed by the manifest and each file's (path, size,
# mtime): several commands load the same subsets, and re-hashing unchanged files is wasted work.
_CACHE: dict[tuple[Any, ...], tuple[pl.DataFrame, str, bool]] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def _verify(manifest: BenchmarkManifest, path: Path, sha256: str) -> None:
    """The pinned checksum; for a user benchmark the error says how to take an edited file."""
    try:
        verify_file(path, sha256=sha256, what=f"{manifest.id} data file")
    except GuarddiagError as exc:
        if not manifest.user:
            raise
        raise GuarddiagError(f"{exc}; if you edited it, run `guarddiag data add {path} --id "
                             f"{manifest.id} ... --replace` to use the new version "
                             f"({manifest.manifest_path})") from None


def load_subset(manifest: BenchmarkManifest, data_dir: Path
                ) -> tuple[pl.DataFrame, str, bool]:
    """Load and verify one subset whose files exist. Returns (frame, digest, verified).

    One-line errors name the file, row and field (checksum, row count, column, text, ids).
    Every file is hashed (and checked against its pinned sha256) on every load; the frame
    those bytes give is read from the derived-cache folder when a run read them before."""
    file_paths = [manifest.file_path(e, data_dir) for e in manifest.files]
    key = (manifest, *(_file_key(p) for p in file_paths))
    if key in _CACHE:
        return _CACHE[key]
    digests, verified = [], True
    for entry, path in zip(manifest.files, file_paths, strict=True):
        if entry.sha256 is not None:
            _verify(manifest, path, entry.sha256)
            digests.append(entry.sha256)
        else:
            digests.append(sha256_file(path))
            verified = False
    stored = _stored_frame_path(manifest, digests)
    frame = read_cached_parquet(stored, rows=manifest.expected_count)
    if frame is None:
        frame = _checked_frame(manifest, file_paths)
        write_cached_parquet(frame, stored)
    result = (frame, _subset_digest(digests), verified)
    _CACHE[key] = result
    return result


def _checked_frame(manifest: BenchmarkManifest, file_paths: list[Path]) -> pl.DataFrame:
    """Read, filter and reduce the subset's files, checking every row (the record shape)."""
    parts = []
    for entry, path in zip(manifest.files, file_paths, strict=True):
        raw = read_file_rows(path, entry)
        if raw.height != entry.rows:
            raise GuarddiagError(f"{path}: {raw.height} data rows, but "
                                 f"{manifest.manifest_path.name} expects {entry.rows} (a "
                                 f"different version of the file?)")
        parts.append(normalise_file(manifest, entry, path, raw))
    frame = pl.concat(parts, how="vertical")
    dup = frame.filter(pl.col("prompt_id").is_duplicated())
    if dup.height:
        first = dup.row(0, named=True)
        again = dup.filter(pl.col("prompt_id") == first["prompt_id"]).row(1, named=True)
        # Name the file's own id column when it has one: that is where the user looks.
        field_name = manifest.id_field or "prompt_id"
        raise GuarddiagError(f'{again[FILE]} row {again[ROW]} field "{field_name}": '
                             f"duplicate id {first['prompt_id']!r} (first at {first['__file']} "
                             f"row {first[ROW]}); ids must be unique within {manifest.id}")
    if frame.height != manifest.expected_count:
        where = ", ".join(str(p) for p in file_paths)
        raise GuarddiagError(f"{where}: {frame.height} prompts in {manifest.id} after the "
                             f"filter, but {manifest.manifest_path.name} expects "
                             f"{manifest.expected_count}")
    return frame.drop(ROW, FILE)


def _stored_frame_path(manifest: BenchmarkManifest, digests: list[str]) -> Path | None:
    """``<cache>/subsets/<id>-<digest>.parquet``: the digest covers the files' sha256, the
    whole manifest, the source of the code that reads them and the polars version, so an edit
    to any of them is a new entry (a version constant would go stale at the first edit that
    forgot to bump it). None when the cache is off or that code's files cannot be read."""
    root = paths.cache_dir()
    reader = _reader_digest()
    if root is None or reader is None:
        return None
    digest = hashlib.sha256(f"subset v1\npolars {pl.__version__}\n{reader}\n"
                            f"{manifest!r}\n".encode())
    digest.update("\n".join(digests).encode())
    return root / "subsets" / f"{manifest.id}-{digest.hexdigest()}.parquet"


@functools.cache
def _reader_digest() -> str | None:
    """sha256 of the modules that turn a subset's files into its frame; None (no cache) where
    their files cannot be read."""
    digest = hashlib.sha256()
    try:
        for source in (read_module.__file__, __file__):
            digest.update(Path(source).read_bytes())
    except (OSError, TypeError):   # TypeError: a module without a file (__file__ None)
        return None
    return digest.hexdigest()


def _status(manifest: BenchmarkManifest, data_dir: Path
            ) -> tuple[SubsetStatus, pl.DataFrame | None]:
    missing = tuple(str(manifest.file_path(e, data_dir)) for e in manifest.files
                    if not manifest.file_path(e, data_dir).is_file())
    status_of = partial(SubsetStatus, id=manifest.id, kind=manifest.kind,
                        study=manifest.study, derived=manifest.derived,
                        expected=manifest.expected_count, source=manifest.source,
                        defined_in=manifest.defined_in, manifest=str(manifest.manifest_path))
    if missing:
        how = (f"put the file back, or add it again with `guarddiag data add ... --id "
               f"{manifest.id} --replace` ({manifest.manifest_path})" if manifest.user else
               f"get it with `guarddiag data pull --ids {manifest.id}` "
               f"(source: {manifest.source})")
        msg = (f"{manifest.id}: file not found: {missing[0]}"
               + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else "") + f"; {how}")
        return status_of(status="unavailable", found=None, sha256=None,
                         checksum_verified=False, missing=missing, message=msg), None
    try:
        frame, digest, verified = load_subset(manifest, data_dir)
    except GuarddiagError as exc:
        return status_of(status="invalid", found=None, sha256=None, checksum_verified=False,
                         missing=(), message=str(exc)), None
    note = None if verified else (f"{manifest.id}: no pinned sha256; row count verified, "
                                  f"computed sha256 {digest}")
    return status_of(status="available", found=frame.height, sha256=digest,
                     checksum_verified=verified, missing=(), message=note), frame


def subset_status(*, data_dir: str | os.PathLike[str] | None = None,
                  ids: str | Sequence[str] = "all",
                  derived_dir: str | os.PathLike[str] | None = None,
                  manifests_dir: str | os.PathLike[str] | None = None,
                  user_manifests_dir: str | os.PathLike[str] | None = None
                  ) -> list[SubsetStatus]:
    """Status of each selected subset; loads (and so verifies) every present one."""
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir,
                               data_dir=data_dir, user_manifests_dir=user_manifests_dir)
    root = paths.resolve_data_dir(data_dir)
    searched = searched_folders(manifests_dir=manifests_dir, data_dir=data_dir,
                                user_manifests_dir=user_manifests_dir, derived_dir=derived_dir)
    return [_status(manifests[i], root)[0]
            for i in resolve_ids(ids, manifests, searched=searched)]


def load_benchmark(benchmark_id: str, *, data_dir: str | os.PathLike[str] | None = None,
                   derived_dir: str | os.PathLike[str] | None = None,
                   manifests_dir: str | os.PathLike[str] | None = None,
                   user_manifests_dir: str | os.PathLike[str] | None = None) -> pl.DataFrame:
    """One verified subset in the record shape; a one-line error when it cannot be loaded."""
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir,
                               data_dir=data_dir, user_manifests_dir=user_manifests_dir)
    if benchmark_id not in manifests:
        searched = searched_folders(manifests_dir=manifests_dir, data_dir=data_dir,
                                    user_manifests_dir=user_manifests_dir,
                                    derived_dir=derived_dir)
        raise GuarddiagError(f"{unknown_name('benchmark', benchmark_id, list(manifests))}; "
                             f"{searched}")
    status, frame = _status(manifests[benchmark_id], paths.resolve_data_dir(data_dir))
    if frame is None:
        raise GuarddiagError(status.message or f"{benchmark_id}: {status.status}")
    return frame


def load_benchmarks(ids: str | Sequence[str] = "all", *,
                    data_dir: str | os.PathLike[str] | None = None,
                    derived_dir: str | os.PathLike[str] | None = None,
                    manifests_dir: str | os.PathLike[str] | None = None,
                    user_manifests_dir: str | os.PathLike[str] | None = None) -> BenchmarkSet:
    """Every selected subset that is present, verified; absent ones listed in ``unavailable``.

    A present but wrong subset (checksum, count, column, text, ids) raises: numbers computed
    from it would be silently wrong. The user manifests folder is read too
    (:func:`guarddiag.data.manifest.user_manifests_root`).
    """
    manifests = load_manifests(derived_dir=derived_dir, manifests_dir=manifests_dir,
                               data_dir=data_dir, user_manifests_dir=user_manifests_dir)
    root = paths.resolve_data_dir(data_dir)
    frames: dict[str, pl.DataFrame] = {}
    unavailable: list[SubsetStatus] = []
    digests: dict[str, str] = {}
    searched = searched_folders(manifests_dir=manifests_dir, data_dir=data_dir,
                                user_manifests_dir=user_manifests_dir, derived_dir=derived_dir)
    for sid in resolve_ids(ids, manifests, searched=searched):
        status, frame = _status(manifests[sid], root)
        if status.status == "invalid":
            raise GuarddiagError(status.message or f"{sid}: invalid")
        if frame is None:
            unavailable.append(status)
            continue
        frames[sid] = frame
        digests[sid] = status.sha256 or ""
    return BenchmarkSet(frames=frames, unavailable=unavailable, sha256=digests)


# ── derived subsets ───────────────────────────────────────────────────────────────────────────


def write_derived_subset(frame: pl.DataFrame, *, subset_id: str, derived_from: str,
                         mutation: str, kind: str, title: str | None = None,
                         derived_dir: str | os.PathLike[str] | None = None,
                         notes: str | None = None) -> Path:
    """Write a derived subset (``<id>.parquet`` + ``<id>.yaml``) under ``derived_dir``.

    ``frame`` has the columns ``prompt_id``, ``text``, ``base_prompt_id``, ``mutation``,
    ``category``. The parquet is written first and the manifest (which pins its sha256) last,
    both atomically, so a killed run leaves either the old subset or the new one. Returns the
    manifest path.
    """
    if not re.fullmatch(ID_PATTERN, subset_id):
        raise GuarddiagError(f"derived subset id {subset_id!r}: expected lower-case letters, "
                             f"digits, _ or -")
    if kind not in KINDS:
        raise GuarddiagError(f"derived subset {subset_id}: kind must be harmful or benign, "
                             f"got {kind!r}")
    missing = [c for c in DERIVED_COLUMNS if c not in frame.columns]
    if missing:
        raise GuarddiagError(f"derived subset {subset_id}: missing column(s) "
                             f"{', '.join(missing)}")
    if frame.height == 0:
        raise GuarddiagError(f"derived subset {subset_id}: no rows")
    root = default_derived_dir(derived_dir)
    data = frame.select([pl.col(c).cast(pl.String) for c in DERIVED_COLUMNS])
    parquet = write_parquet(data, root / f"{subset_id}.parquet")
    doc = {
        "id": subset_id, "title": title or f"{derived_from} × {mutation}", "kind": kind,
        "derived_from": derived_from, "mutation": mutation,
        "files": [{"path": parquet.name, "format": "parquet",
                   "sha256": sha256_file(parquet), "rows": data.height}],
        "expected_count": data.height,
    }
    if notes:
        doc["notes"] = notes
    header = ("# Derived benchmark subset written by guarddiag (guarddiag.data."
              "write_derived_subset).\n# Columns: prompt_id, text, base_prompt_id, mutation, "
              "category. Do not edit by hand:\n# the sha256 pins the parquet beside it.\n")
    target = root / f"{subset_id}.yaml"
    with atomic_path(target) as tmp:
        tmp.write_text(header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True),
                       encoding="utf-8")
    return target

