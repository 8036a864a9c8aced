"""The scan's findings on disk, task by task: what makes a corpus scan resumable and keeps the
driver's memory flat.

A finished task leaves three files in the store folder (``<out>/.scan`` for an audit):
``task-NNNNNN.parquet``, its candidate rows (row within the task, text, id);
``task-NNNNNN.ids.npy``, the 64-bit hashes of all its ids, sorted; and, written last,
``task-NNNNNN.json`` (its row count), which is what marks the task finished. Each file is
written whole or not at all, so a scan killed at any moment leaves only finished tasks marked,
and the rerun skips them. ``store.json`` names the audit's cache key and the task list; a store
written for other inputs, options, code or tasks is emptied before use.

Duplicate ids are found from the hash files one slice of the 64-bit range at a time (each file
is sorted, so its share of a slice is one binary search), so the driver holds at most about
:data:`SLICE_HASHES` hashes whatever the pool's size; a repeated hash is confirmed on the ids
themselves, re-read from the pool, because two different ids may share a hash.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit.shardread import read_task
from guarddiag.audit.stream import Task
from guarddiag.errors import GuarddiagError, at

__all__ = ["SLICE_HASHES", "PoolScan", "ScanStore", "TaskFindings", "id_hashes",
           "repeated_hashes"]

SLICE_HASHES = 1 << 23
"""Hashes (8 bytes each) the duplicate check gathers and sorts at once: about 64 MiB."""
_STORE_FORMAT = 1


def id_hashes(ids: pl.Series) -> np.ndarray:
    """The 64-bit hash of each id (the duplicate check's only per-row state)."""
    return ids.hash(seed=0).to_numpy()


@dataclass(frozen=True)
class TaskFindings:
    """What one task's scan found."""

    rows: int
    candidates: tuple[tuple[int, str, str | None], ...]
    """(0-based row within the task, text, id) of every candidate row, in order."""
    id_hashes: np.ndarray | None = field(repr=False)
    """:func:`id_hashes` of the task's ids, sorted (None when rows are numbered)."""
    python_rows: int = 0
    """Rows normalised by the Python path (non-ASCII), for the progress line."""


@dataclass(frozen=True)
class PoolScan:
    """The merged scan: candidate rows in pool order and the pool's size."""

    rows: int
    ids: list[str]
    texts: list[str]
    python_rows: int


_CANDIDATES = {"row": pl.Int64, "text": pl.String, "id": pl.String}


class ScanStore:
    """The findings of a pool's scan tasks in a folder (module docstring)."""

    def __init__(self, folder: str | Path, *, key: str, tasks: list[Task],
                 fresh: bool = False) -> None:
        """Open ``folder`` for the scan of ``tasks`` under the audit cache ``key``; what it
        holds for anything else (or everything, with ``fresh``) is removed first."""
        self.folder = Path(folder)
        self.tasks = tasks
        doc = {"format": _STORE_FORMAT, "key": key,
               "tasks": hashlib.sha256(files.dumps_json([asdict(t) for t in tasks]).encode())
               .hexdigest()}
        stamp = self.folder / "store.json"
        if fresh or not stamp.is_file() or _read_stamp(stamp) != doc:
            self.clear()
            self.folder.mkdir(parents=True, exist_ok=True)
            files.write_json(doc, stamp)

    def clear(self) -> None:
        """Remove the folder and everything in it."""
        if self.folder.exists():
            shutil.rmtree(self.folder)

    def _path(self, index: int, suffix: str) -> Path:
        return self.folder / f"task-{index:06d}{suffix}"

    def finished(self) -> set[int]:
        """Indices of the tasks whose findings are stored."""
        return {i for i in range(len(self.tasks)) if self._path(i, ".json").is_file()}

    def save(self, index: int, findings: TaskFindings) -> None:
        """Store one task's findings; the row count is written last and marks it finished."""
        rows, texts, ids = (zip(*findings.candidates, strict=True) if findings.candidates
                            else ((), (), ()))
        frame = pl.DataFrame({"row": list(rows), "text": list(texts), "id": list(ids)},
                             schema=_CANDIDATES)
        files.write_parquet(frame, self._path(index, ".parquet"))
        if findings.id_hashes is not None:
            with files.atomic_path(self._path(index, ".ids.npy")) as tmp, open(tmp, "wb") as fh:
                np.save(fh, findings.id_hashes, allow_pickle=False)
        files.write_json({"rows": findings.rows, "python_rows": findings.python_rows},
                         self._path(index, ".json"))

    def merged(self) -> PoolScan:
        """Every task's candidate rows in pool order; rows without ids are numbered from 1
        over the whole pool."""
        total = python_rows = 0
        ids: list[str] = []
        texts: list[str] = []
        for i in range(len(self.tasks)):
            counts = files.read_json(self._path(i, ".json"))
            frame = pl.read_parquet(self._path(i, ".parquet"))
            texts.extend(frame.get_column("text").to_list())
            numbered = (frame.get_column("row") + (total + 1)).cast(pl.String)
            ids.extend(frame.get_column("id").fill_null(numbered).to_list())
            total += counts["rows"]
            python_rows += counts["python_rows"]
        return PoolScan(rows=total, ids=ids, texts=texts, python_rows=python_rows)

    def check_unique_ids(self, *, text_column: str, id_column: str) -> None:
        """A duplicate id anywhere in the pool is an error naming the id whose first row comes
        first, at its second row (as :func:`guarddiag.audit.read_pool` does)."""
        repeated = repeated_hashes([self._path(i, ".ids.npy") for i in range(len(self.tasks))])
        if repeated.size:
            _confirm_duplicates(self.tasks, repeated, text_column=text_column,
                                id_column=id_column)


def _read_stamp(path: Path) -> object:
    try:
        return files.read_json(path)
    except (OSError, ValueError, GuarddiagError):
        return None


def _slices(paths: list[Path]) -> Iterator[np.ndarray]:
    """The hashes of every file, gathered one slice of the 64-bit range at a time."""
    sizes = [int(np.load(p, mmap_mode="r").shape[0]) for p in paths]
    parts = max(1, -(-sum(sizes) // SLICE_HASHES))
    bounds = [(k << 64) // parts for k in range(parts + 1)]
    for k in range(parts):
        chunks = []
        for path, size in zip(paths, sizes, strict=True):
            if not size:
                continue
            hashes = np.load(path, mmap_mode="r")
            start = 0 if k == 0 else int(np.searchsorted(hashes, np.uint64(bounds[k])))
            end = size if k == parts - 1 else int(np.searchsorted(hashes,
                                                                  np.uint64(bounds[k + 1])))
            chunks.append(np.array(hashes[start:end]))
            del hashes
        yield np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)


def repeated_hashes(paths: list[Path]) -> np.ndarray:
    """The values that occur more than once over all the sorted uint64 ``.npy`` files, in
    order; memory holds about :data:`SLICE_HASHES` values at a time."""
    repeated = []
    for chunk in _slices(paths):
        ordered = np.sort(chunk)
        same = ordered[1:] == ordered[:-1]
        if same.any():
            repeated.append(np.unique(ordered[1:][same]))
    return np.concatenate(repeated) if repeated else np.zeros(0, dtype=np.uint64)


def _confirm_duplicates(tasks: list[Task], repeated: np.ndarray, *, text_column: str,
                        id_column: str) -> None:
    """Re-read the pool for the ids whose hash repeats; raise on a real duplicate."""
    wanted = pl.Series(repeated).implode()
    first: dict[str, tuple[int, str, int]] = {}      # id → (pool position, shard, row)
    second: dict[str, tuple[str, int]] = {}
    position = 0
    shard_rows: dict[int, int] = {}                   # rows read so far in each shard
    for task in tasks:
        for batch in read_task(task, text_column=text_column, id_column=id_column):
            assert batch.ids is not None
            before = shard_rows.get(task.shard, 0)
            hits = pl.Series(id_hashes(batch.ids)).is_in(wanted).arg_true().to_list()
            for i in hits:
                value = batch.ids[i]
                if value not in first:
                    first[value] = (position + i, task.path, before + i + 1)
                elif value not in second:
                    second[value] = (task.path, before + i + 1)
            position += batch.ids.len()
            shard_rows[task.shard] = before + batch.ids.len()
    if not second:
        return     # only hashes collided
    value = min(second, key=lambda v: first[v][0])
    _, path1, row1 = first[value]
    path2, row2 = second[value]
    also = f"row {row1}" if path1 == path2 else f"{path1} row {row1}"
    raise GuarddiagError(f"{at(path2, row=row2, field=id_column)}: duplicate id "
                         f"{value!r} (also {also}); ids must be unique")
