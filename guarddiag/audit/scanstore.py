"""The scan's findings on disk, task by task: what makes a corpus scan resumable and keeps the
driver's memory flat.

The first, cheap pass over ids leaves ``task-NNNNNN.ids.npy``, the 64-bit hashes of all the
task's ids, sorted, and ``task-NNNNNN.ids.json`` (its row and line counts and the rows each
required field misses), written last. A task the scan finished leaves ``task-NNNNNN.parquet``,
its candidate texts (row within the task, text, id, field path, physical line within the task,
byte offset of the line), and, written last, ``task-NNNNNN.json`` (its row and line counts,
per-field counts and bad rows), which is what marks the task finished. A byte-range task
numbers its rows and lines from 1; the merge moves them on by the rows and lines of the tasks
before it in its shard (:meth:`ScanStore.shifts`), so every address is the shard's own. Each
file is
written whole or not at all, so a scan killed at any moment leaves only finished tasks marked,
and the rerun skips them. ``store.json`` names the audit's cache key and the task list; a store
written for other inputs, options, code or tasks, or without it, is emptied before use. The key
holds the pool's sha256 (seconds for a large pool): a store that has nothing to resume starts empty
while it is computed and names itself as soon as it is known, at the latest before it keeps the
first task's findings (the id pass's files are kept meanwhile; a run killed before then leaves a
store the rerun empties).

Repeated ids are found from the hash files one slice of the 64-bit range at a time (each file
is sorted, so its share of a slice is one binary search), so the driver holds at most about
:data:`SLICE_HASHES` hashes whatever the pool's size; a repeated hash is confirmed on the ids
themselves, re-read from the pool, because two different ids may share a hash. Every row of a
repeated id is a bad row (:mod:`~guarddiag.audit.badrows`) named by its address.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit.badrows import BAD_KINDS, Address, BadRow, address
from guarddiag.audit.shardread import read_task
from guarddiag.audit.stream import Task
from guarddiag.errors import GuarddiagError

__all__ = ["SLICE_HASHES", "Candidate", "PoolScan", "ScanStore", "TaskFindings",
           "TaskIds", "id_hashes", "repeated_hashes", "sort_hashes"]

SLICE_HASHES = 1 << 23
"""Hashes (8 bytes each) the duplicate check gathers and sorts at once: about 64 MiB."""
_STORE_FORMAT = 1


def id_hashes(ids: pl.Series) -> np.ndarray:
    """The 64-bit hash of each id (the duplicate check's only per-row state)."""
    return ids.hash(seed=0).to_numpy()


Candidate = tuple[int, str, "str | None", "str | None", "int | None", "int | None"]
"""(0-based row within the task, text, id, field path or None, physical line within the task
or None, byte offset of the line in the file or None) of a candidate text."""


@dataclass(frozen=True)
class TaskFindings:
    """What one task's scan found."""

    rows: int
    candidates: tuple[Candidate, ...]
    """Every candidate text, in order."""
    python_rows: int = 0
    """Rows normalised by the Python path (non-ASCII), for the progress line."""
    missing: dict[str, int] = field(default_factory=dict)
    """Rows missing each text field (absent or null)."""
    empty: dict[str, int] = field(default_factory=dict)
    """Rows whose text field holds only blank text."""
    surrogates: int = 0
    """Lone surrogates replaced."""
    non_text: dict[str, int] = field(default_factory=dict)
    """Content parts of another type than text, per field."""
    bad: tuple[BadRow, ...] = ()
    """Bad lines and rows, rows and lines numbered within the task from 1."""
    lines: int = 0
    """Physical lines the task read (JSON lines): the next byte range's lines follow them."""


@dataclass(frozen=True)
class TaskIds:
    """What the first pass found in one task: its ids' hashes and the required fields' gaps."""

    rows: int
    id_hashes: np.ndarray | None = field(repr=False)
    """:func:`id_hashes` of the task's ids, sorted (None when rows are numbered)."""
    missing: dict[str, int] = field(default_factory=dict)
    empty: dict[str, int] = field(default_factory=dict)
    first_gap: dict[str, int] = field(default_factory=dict)
    """Per required field, the 1-based row (within the task) of its first missing or empty
    text."""
    lines: int = 0
    """Physical lines the task read (JSON lines)."""


@dataclass(frozen=True)
class PoolScan:
    """The merged scan: candidate rows in pool order and the pool's size."""

    rows: int
    ids: list[str]
    """Each text's row id; a row without a unique id has its address instead."""
    texts: list[str]
    python_rows: int
    fields: list[str] | None = None
    """The field path of each text (None without nested fields)."""
    missing: dict[str, int] = field(default_factory=dict)
    empty: dict[str, int] = field(default_factory=dict)
    surrogates: int = 0
    addresses: list[Address] = field(default_factory=list)
    """Each text's row's address."""
    non_text: dict[str, int] = field(default_factory=dict)
    bad: list[BadRow] = field(default_factory=list)
    """Every bad row of the pool (:mod:`~guarddiag.audit.badrows`), in pool order."""


_CANDIDATES = {"row": pl.Int64, "text": pl.String, "id": pl.String, "field": pl.String,
               "line": pl.Int64, "byte": pl.Int64}


class ScanStore:
    """The findings of a pool's scan tasks in a folder (module docstring)."""

    def __init__(self, folder: str | Path, *, key: str | Future[str], tasks: list[Task],
                 fresh: bool = False) -> None:
        """Open ``folder`` for the scan of ``tasks`` under the audit cache ``key`` (or the key
        once known); what it holds for anything else (or everything, with ``fresh``) is removed
        first."""
        self.folder = Path(folder)
        self.tasks = tasks
        self._key = key
        self._tasks_sha = hashlib.sha256(files.dumps_json([asdict(t) for t in tasks]).encode()
                                         ).hexdigest()
        self._named = False
        stamp = self.folder / "store.json"
        if isinstance(key, Future) and not key.done() and (fresh or not stamp.is_file()):
            self.clear()        # nothing here can be resumed: no need to wait for the key
            self.folder.mkdir(parents=True, exist_ok=True)
            return
        doc = self._doc()
        if fresh or not stamp.is_file() or _read_stamp(stamp) != doc:
            self.clear()
            self.folder.mkdir(parents=True, exist_ok=True)
            files.write_json(doc, stamp)
        self._named = True

    def _doc(self) -> dict[str, Any]:
        key = self._key.result() if isinstance(self._key, Future) else self._key
        return {"format": _STORE_FORMAT, "key": key, "tasks": self._tasks_sha}

    def _name(self, *, wait: bool) -> None:
        """Write ``store.json`` if the key is known (waiting for it, with ``wait``)."""
        if self._named:
            return
        if not wait and isinstance(self._key, Future) and not self._key.done():
            return
        files.write_json(self._doc(), self.folder / "store.json")
        self._named = True

    def clear(self) -> None:
        """Remove the folder and everything in it."""
        if self.folder.exists():
            shutil.rmtree(self.folder)

    def _path(self, index: int, suffix: str) -> Path:
        return self.folder / f"task-{index:06d}{suffix}"

    def finished(self) -> set[int]:
        """Indices of the tasks whose findings are stored."""
        return {i for i in range(len(self.tasks)) if self._path(i, ".json").is_file()}

    def checked(self) -> set[int]:
        """Indices of the tasks whose first pass (ids, required fields) is stored."""
        return {i for i in range(len(self.tasks)) if self._path(i, ".ids.json").is_file()}

    def save_ids(self, index: int, found: TaskIds) -> None:
        """Store one task's first pass; its counts are written last and mark it done."""
        self._name(wait=False)
        if found.id_hashes is not None:
            with files.atomic_path(self._path(index, ".ids.npy")) as tmp, open(tmp, "wb") as fh:
                np.save(fh, found.id_hashes, allow_pickle=False)
        files.write_json({"rows": found.rows, "missing": found.missing, "empty": found.empty,
                          "first_gap": found.first_gap, "lines": found.lines},
                         self._path(index, ".ids.json"))

    def first_pass(self, index: int) -> dict[str, Any]:
        return dict(files.read_json(self._path(index, ".ids.json")))

    def save(self, index: int, findings: TaskFindings) -> None:
        """Store one task's findings; the row count is written last and marks it finished.
        The store is named first, so that every finished task can be resumed (the key is
        usually known by then: the scan's first task ends after the id pass)."""
        self._name(wait=True)
        columns = (list(zip(*findings.candidates, strict=True)) if findings.candidates
                   else [()] * len(_CANDIDATES))
        frame = pl.DataFrame({name: list(values) for name, values
                              in zip(_CANDIDATES, columns, strict=True)}, schema=_CANDIDATES)
        files.write_parquet(frame, self._path(index, ".parquet"))
        files.write_json({"rows": findings.rows, "python_rows": findings.python_rows,
                          "missing": findings.missing, "empty": findings.empty,
                          "surrogates": findings.surrogates, "non_text": findings.non_text,
                          "bad": [b.to_dict() for b in findings.bad], "lines": findings.lines},
                         self._path(index, ".json"))

    def shifts(self, *, first_pass: bool = False) -> list[tuple[int, int]]:
        """Per task, the (rows, physical lines) of the tasks before it in its shard: what moves
        a task's own numbers (from 1) on to its shard's. From the scan's counts, or from the
        first pass's with ``first_pass``."""
        out: list[tuple[int, int]] = []
        before: dict[int, tuple[int, int]] = {}
        for i, task in enumerate(self.tasks):
            doc = files.read_json(self._path(i, ".ids.json" if first_pass else ".json"))
            rows, lines = before.get(task.shard, (0, 0))
            out.append((rows, lines))
            before[task.shard] = (rows + doc["rows"], lines + doc.get("lines", 0))
        return out

    def merged(self, *, id_column: str | None, repeated: Sequence[BadRow] = ()) -> PoolScan:
        """Every task's candidate rows in pool order, with their addresses; rows without ids
        are numbered from 1 over the whole pool, and a row whose id is missing or among
        ``repeated`` (the rows of repeated ids) has its address as its id. The store is named
        first: a run killed after this resumes."""
        self._name(wait=True)
        total = python_rows = surrogates = 0
        ids: list[str] = []
        texts: list[str] = []
        paths: list[str | None] = []
        addresses: list[Address] = []
        counts: dict[str, dict[str, int]] = {"missing": {}, "empty": {}, "non_text": {}}
        bad: list[BadRow] = []
        taken = {b.id for b in repeated}
        for i, (rows_before, lines_before) in enumerate(self.shifts()):
            doc = files.read_json(self._path(i, ".json"))
            frame = pl.read_parquet(self._path(i, ".parquet"))
            path = self.tasks[i].named
            texts.extend(frame.get_column("text").to_list())
            paths.extend(frame.get_column("field").to_list())
            shard_rows = (frame.get_column("row") + rows_before + 1).to_list()
            lines = (frame.get_column("line") + lines_before).to_list()
            addresses += zip([path] * frame.height, shard_rows, lines,
                             frame.get_column("byte").to_list(), strict=True)
            if id_column is None:
                ids += (frame.get_column("row") + (total + 1)).cast(pl.String).to_list()
            else:
                ids += [pid if pid is not None and pid not in taken
                        else address(path, line=line, row=row)
                        for pid, row, line in zip(frame.get_column("id").to_list(), shard_rows,
                                                  lines, strict=True)]
            bad += [replace(BadRow(**b), file=path).shifted(lines=lines_before, rows=rows_before)
                    for b in doc.get("bad", [])]
            total += doc["rows"]
            python_rows += doc["python_rows"]
            surrogates += doc.get("surrogates", 0)
            for name, mine in counts.items():
                for key, n in doc.get(name, {}).items():
                    mine[key] = mine.get(key, 0) + n
        named = [p for p in paths if p is not None]
        order = {t.named: t.shard for t in self.tasks}
        bad = sorted([*bad, *repeated], key=lambda b: (order.get(b.file, -1), b.line or 0,
                                                       b.row or 0, BAD_KINDS.index(b.kind)))
        return PoolScan(rows=total, ids=ids, texts=texts, python_rows=python_rows,
                        fields=named if counts["missing"] or named else None,
                        missing=counts["missing"], empty=counts["empty"],
                        surrogates=surrogates, addresses=addresses,
                        non_text=counts["non_text"], bad=bad)

    def repeated_ids(self, *, id_column: str) -> list[BadRow]:
        """Every row whose id another row holds too, in pool order, as ``repeated_id`` bad
        rows (all of them: the first holder too)."""
        repeated = repeated_hashes([self._path(i, ".ids.npy") for i in range(len(self.tasks))])
        if not repeated.size:
            return []
        return _confirm_duplicates(self.tasks, repeated, id_column=id_column,
                                   shifts=self.shifts(first_pass=True))


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


def sort_hashes(hashes: np.ndarray) -> np.ndarray:
    """``hashes`` (uint64) sorted: polars' multi-threaded sort, several times numpy's on random
    values and on the sorted runs of several tasks laid end to end
    (docs/decisions.md#2026-12-04-the-audits-first-scan)."""
    return pl.Series(hashes, dtype=pl.UInt64).sort().to_numpy()


def repeated_hashes(paths: list[Path]) -> np.ndarray:
    """The values that occur more than once over all the sorted uint64 ``.npy`` files, in
    order; memory holds about :data:`SLICE_HASHES` values at a time."""
    repeated = []
    for chunk in _slices(paths):
        ordered = sort_hashes(chunk)
        same = ordered[1:] == ordered[:-1]
        if same.any():
            repeated.append(np.unique(ordered[1:][same]))
    return np.concatenate(repeated) if repeated else np.zeros(0, dtype=np.uint64)


def _confirm_duplicates(tasks: list[Task], repeated: np.ndarray, *, id_column: str,
                        shifts: list[tuple[int, int]]) -> list[BadRow]:
    """Re-read the pool for the ids whose hash repeats: every row of an id that really
    repeats (two different ids may share a hash), with its address."""
    wanted = pl.Series(repeated).implode()
    seen: dict[str, list[BadRow]] = {}
    for task, (rows_before, lines_before) in zip(tasks, shifts, strict=True):
        task_row = 0
        for batch in read_task(task, text_column="", id_column=id_column, ids_only=True):
            assert batch.ids is not None
            hits = pl.Series(id_hashes(batch.ids)).is_in(wanted).arg_true().to_list()
            for i in hits:
                value = batch.ids[i]
                if value is None:
                    continue
                line = None if batch.lines is None else int(batch.lines[i]) + lines_before
                byte = None if batch.offsets is None else int(batch.offsets[i])
                seen.setdefault(value, []).append(BadRow(
                    kind="repeated_id", file=task.named, line=line, byte=byte,
                    row=rows_before + task_row + i + 1, field=id_column, id=value,
                    message=""))
            task_row += batch.n_rows
    out = []
    for value, holders in seen.items():
        if len(holders) < 2:
            continue    # only hashes collided
        first = holders[0].where
        out += [replace(h, message=f"repeated id {value!r}: {len(holders)} rows hold it "
                                   f"(first: {first})") for h in holders]
    return out
