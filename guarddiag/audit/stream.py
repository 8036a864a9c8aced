"""A pool as shards read in batches: which files ``--pool`` names, and the work units over them.

``--pool`` is one table file, a glob over shards (``'corpus/*.jsonl.zst'``), a folder of shards
(its ``.json`` files and names starting with ``.`` or ``_`` are not shards), or a Hugging Face
``datasets`` folder (``Dataset.save_to_disk``: ``state.json`` and ``*.arrow``
files). A shard is parquet, Arrow (IPC file or stream), CSV/TSV or JSON lines, the text formats
optionally gzip- or zstd-compressed (``.gz``, ``.zst``); a plain ``.json`` list of records is read
whole, as before. Rows are numbered from 1 within their shard, the way errors name them.

A :class:`Task` is what one worker reads on its own (a worker process or a Ray task reads the file
itself, so only paths and small results cross process boundaries): a run of row groups of a
parquet shard, a byte range of an uncompressed JSON lines shard (``.jsonl``, ``.ndjson``), or a
whole shard of any other format. CSV and TSV are not split, because a quoted field may hold line
ends, so a byte offset does not tell where a row starts; a gzip or zstd stream cannot be entered
in the middle. Tasks come in pool order, shard by shard, and depend only on the shards' files
(row group sizes, file sizes), never on the number of workers.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from guarddiag import files
from guarddiag.errors import GuarddiagError

logger = logging.getLogger(__name__)

__all__ = ["BATCH_ROWS", "TASK_BYTES", "TASK_ROWS", "Shard", "Task", "TaskProgress", "find_shards",
           "plan_tasks", "pool_digest", "shard_format", "task_weight"]

BATCH_ROWS = 262_144
"""Rows a reader hands on at a time; with ~100-byte texts a batch is ~30 MB of text, so a worker's
memory stays flat whatever the shard's size."""
TASK_ROWS = 250_000
"""Parquet row groups are grouped into tasks of about this many rows."""
TASK_BYTES = 64 << 20
"""An uncompressed JSON lines shard is split into byte ranges of this size (the last one
shorter): with ~150-byte rows a range holds ~450,000 rows, about a parquet task's."""

_FORMATS = (("parquet", ".parquet"), ("arrow", ".arrow"), ("csv", ".csv"), ("tsv", ".tsv"),
            ("jsonl", ".jsonl"), ("jsonl", ".ndjson"), ("json", ".json"))
_COMPRESSED = (".gz", ".zst")
_COMPRESSIBLE = ("csv", "tsv", "jsonl")
"""The formats that may be gzip- or zstd-compressed."""


@dataclass(frozen=True)
class Shard:
    """One file of the pool."""

    path: str
    fmt: str
    """``parquet``, ``arrow``, ``csv``, ``tsv``, ``jsonl`` or ``json``."""
    source: str | None = None
    """The compressed shard ``path`` was decompressed from (:mod:`~guarddiag.audit.unpack`);
    addresses name it."""


@dataclass(frozen=True)
class Task:
    """The rows one worker reads: ``row_groups`` of a parquet shard, the lines of a JSON lines
    shard that start in ``byte_range``, or (both None) the whole shard."""

    shard: int
    """Index of the shard in :func:`find_shards`'s list."""
    path: str
    fmt: str
    row_groups: tuple[int, ...] | None
    first_row: int
    """1-based row number, within the shard, of the task's first row; for a ``byte_range``
    task it is 1 and *local*: the rows before the range are not counted when it is planned, so
    its rows (and :attr:`~guarddiag.audit.shardread.PoolBatch.first_row`) are numbered from 1
    within the task. Its error messages still name the shard's own lines and rows."""
    byte_range: tuple[int, int] | None = None
    """(start, end) byte offsets in the file: the task reads every line whose first byte lies in
    [start, end) (its last line may run past end). The ranges of a shard tile the file, so each
    line is read by exactly one task."""
    source: str | None = None
    """The shard's :attr:`Shard.source`: the file addresses name, when not ``path``."""

    @property
    def named(self) -> str:
        """The file the task's rows are reported in."""
        return self.source or self.path


def shard_format(path: str | Path) -> str:
    """The format of a shard from its name (``.csv.gz`` is csv, gzip-compressed)."""
    name = str(path).lower()
    for suffix in _COMPRESSED:
        if name.endswith(suffix):
            inner = name[:-len(suffix)]
            for fmt, ext in _FORMATS:
                if inner.endswith(ext) and fmt in _COMPRESSIBLE:
                    return fmt
            break
    else:
        for fmt, ext in _FORMATS:
            if name.endswith(ext):
                return fmt
    known = ", ".join(ext for _, ext in _FORMATS)
    raise GuarddiagError(f"{path}: unsupported pool shard format (expected {known}; CSV, TSV "
                         "and JSON lines may end in .gz or .zst)")


def find_shards(pool: str | Path) -> list[Shard]:
    """The shards ``pool`` names (module docstring), in a fixed order."""
    spec = str(pool)
    path = Path(spec)
    if path.is_file():
        return [Shard(path=spec, fmt=shard_format(spec))]
    if path.is_dir():
        return _folder_shards(path)
    if any(ch in spec for ch in "*?["):
        matches = sorted(p for p in glob.glob(spec, recursive=True) if Path(p).is_file())
        if not matches:
            raise GuarddiagError(f"{spec}: no pool shard matches this pattern")
        return [Shard(path=p, fmt=shard_format(p)) for p in matches]
    raise GuarddiagError(f"{spec}: pool file not found")


def _folder_shards(folder: Path) -> list[Shard]:
    if (folder / "dataset_dict.json").is_file():
        splits = ", ".join(files.read_json(folder / "dataset_dict.json").get("splits", []))
        raise GuarddiagError(f"{folder}: a datasets DatasetDict folder; pass one split's folder "
                             f"(splits: {splits})")
    state = folder / "state.json"
    if state.is_file():
        names = [d.get("filename") for d in files.read_json(state).get("_data_files", [])]
        if not names or not all(isinstance(n, str) for n in names):
            raise GuarddiagError(f"{state}: no _data_files list; is this a datasets folder "
                                 "written by save_to_disk?")
        return [Shard(path=str(folder / n), fmt="arrow") for n in names]
    shards = []
    for p in sorted(folder.iterdir()):
        if not p.is_file() or p.name.startswith((".", "_")):
            continue
        try:
            fmt = shard_format(p)
        except GuarddiagError:
            continue
        # A folder's .json files are metadata (dataset_info.json, meta.json), not rows.
        if fmt != "json":
            shards.append(Shard(path=str(p), fmt=fmt))
    if not shards:
        raise GuarddiagError(f"{folder}: no pool shard (parquet, arrow, csv, tsv, jsonl) in "
                             "this folder")
    return shards


def plan_tasks(shards: list[Shard], *, task_rows: int = TASK_ROWS,
               task_bytes: int = TASK_BYTES) -> list[Task]:
    """Work units in pool order: parquet row groups in runs of about ``task_rows`` rows, an
    uncompressed JSON lines shard over ``task_bytes`` bytes in ranges of ``task_bytes`` bytes,
    one task per shard otherwise."""
    if task_bytes < 1:
        raise GuarddiagError(f"task_bytes must be at least 1, got {task_bytes}")
    tasks: list[Task] = []
    for s, shard in enumerate(shards):
        if _splittable(shard):
            size = os.path.getsize(shard.path)
            if size > task_bytes:
                tasks.extend(Task(shard=s, path=shard.path, fmt=shard.fmt, row_groups=None,
                                  first_row=1, byte_range=(start, min(start + task_bytes, size)),
                                  source=shard.source)
                             for start in range(0, size, task_bytes))
                continue
        if shard.fmt != "parquet":
            tasks.append(Task(shard=s, path=shard.path, fmt=shard.fmt, row_groups=None,
                              first_row=1))
            continue
        sizes = _row_group_sizes(shard.path)
        group: list[int] = []
        first, rows = 1, 0
        for g, n in enumerate(sizes):
            group.append(g)
            rows += n
            if rows >= task_rows or g == len(sizes) - 1:
                tasks.append(Task(shard=s, path=shard.path, fmt="parquet",
                                  row_groups=tuple(group), first_row=first))
                first += rows
                group, rows = [], 0
        if not sizes:
            tasks.append(Task(shard=s, path=shard.path, fmt="parquet", row_groups=(),
                              first_row=1))
    return tasks


def _splittable(shard: Shard) -> bool:
    """JSON lines that can be entered at any byte: a line starts after a line end."""
    return shard.fmt == "jsonl" and not shard.path.lower().endswith(_COMPRESSED)


def _row_group_sizes(path: str) -> list[int]:
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GuarddiagError(f"{path}: cannot read as parquet ({first})") from None
    return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]


def pool_digest(shards: list[Shard]) -> str:
    """The pool's sha256: the file's own for one file (what meta.json always recorded), else the
    sha256 of the shards' names and digests in order."""
    if len(shards) == 1:
        return files.sha256_file(shards[0].path)
    # hashlib releases the GIL on large blocks: shards are hashed on every core at once.
    with ThreadPoolExecutor(max_workers=min(len(shards), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(files.sha256_file, [s.path for s in shards]))
    doc = [[Path(s.path).name, d] for s, d in zip(shards, digests, strict=True)]
    return hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()


class TaskProgress:
    """One status line at most every :attr:`EVERY` seconds: tasks and rows done, the rate and
    the time left, estimated from the bytes (or rows) of the tasks still to do."""

    EVERY = 10.0

    def __init__(self, what: str, tasks: list[Task], done: set[int]) -> None:
        self.what, self.tasks = what, tasks
        self.weights = [task_weight(t) for t in tasks]
        self.total = sum(self.weights) or 1
        self.left = self.total - sum(self.weights[i] for i in done)
        self.start_left = self.left
        self.count, self.rows = len(done), 0
        self.start = self.last = time.monotonic()

    def finished(self, index: int, rows: int) -> None:
        self.count += 1
        self.rows += rows
        self.left -= self.weights[index]
        now = time.monotonic()
        if now - self.last < self.EVERY or self.count == len(self.tasks):
            return
        self.last = now
        spent, share = now - self.start, 1 - self.left / max(self.start_left, 1)
        eta = spent / share * (1 - share) if share > 0 else float("nan")
        logger.info(f"audit: {self.what} {self.count:,}/{len(self.tasks):,} tasks, "
                    f"{self.rows:,} rows in {_clock(spent)}, about {_clock(eta)} left")


class RowClock:
    """Progress inside one task (a CSV, TSV or Arrow file is one task however big): one line
    at most every :attr:`TaskProgress.EVERY` seconds with the rows read so far and the rate.
    Its length in rows is unknown until the end, so no time left is given."""

    def __init__(self, what: str, task: Task) -> None:
        self.what, self.name = what, Path(task.path).name
        self.start = self.last = time.monotonic()

    def rows(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < TaskProgress.EVERY:
            return
        self.last = now
        spent = now - self.start
        logger.info(f"audit: {self.what} of {self.name}: {done:,} rows in {_clock(spent)} "
                    f"({done / max(spent, 1e-9):,.0f} rows/s)")


def task_weight(task: Task) -> int:
    """A task's share of its pool's work: its bytes, row groups or file size."""
    if task.byte_range is not None:
        return task.byte_range[1] - task.byte_range[0]
    if task.row_groups is not None:
        return max(1, len(task.row_groups))
    try:
        return max(1, os.path.getsize(task.path))
    except OSError:
        return 1


def _clock(seconds: float) -> str:
    if seconds != seconds:      # NaN
        return "?"
    seconds = int(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds < 3600 else \
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
