"""The audit over a pool of any size: scan shards in parallel for candidate rows, then audit
those rows with :func:`~guarddiag.audit.frames.audit_frames`.

A pool row can only appear in the outputs if its normal form is a benchmark prompt's (exact), if
its word set has Jaccard ≥ the threshold with some benchmark prompt's other form (near), if its
template form is a benchmark prompt's (template), or if it holds enough of a prompt's word
3-grams (contained). The scan keeps those rows, or a few more (the exact pass keeps every row
whose normal form without spaces is a prompt's; the short-prompt rule is applied later), and of
the rest of the pool only an 8-byte hash of each id, for the search for repeated ids, and
every bad row (:mod:`~guarddiag.audit.badrows`). Each task's
findings go to a :class:`~guarddiag.audit.scanstore.ScanStore` on disk as it finishes, so a
killed scan resumes where it stopped and the driver holds nothing per pool row. ``audit_frames``
then runs on the candidates in pool order, so every output is computed by the same code as an
in-memory audit and is the same bytes whatever the number of workers or the engine: the matches
of a row depend on that row alone, and the candidates keep their pool order. Only the row count
comes from the scan.

Engines: ``local`` runs ``workers`` at once (default every core): an exact or near-dup scan in
threads (polars, pyarrow, numpy, scipy and the near-dup scan's compiled probe release the GIL,
and threads start at no cost and share one benchmark index), a scan with template or
containment candidates (Python code) in this process plus ``workers - 1`` spawned processes;
``ray`` (:mod:`guarddiag.audit.ray_engine`) runs one Ray task per work unit. Every engine maps
the same pure function :func:`scan_task` over the same tasks of
:func:`~guarddiag.audit.stream.plan_tasks`, in whatever order they finish; the store merges the
findings in task order.
"""

from __future__ import annotations

import hashlib
import heapq
import importlib.util
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit.badrows import BadRow
from guarddiag.audit.containment import ContainmentIndex, contained_rows, index_containment
from guarddiag.audit.neardup import PrefixIndex, form_index, probe_forms, spaced_forms
from guarddiag.audit.normal import (
    KeyIndex,
    exact_candidates,
    exact_candidates_and_words,
    key_index,
    normal_forms,
    word_forms,
)
from guarddiag.audit.phrase import turn_forms
from guarddiag.audit.ray_engine import ray_map
from guarddiag.audit.scanstore import (
    Candidate,
    PoolScan,
    ScanStore,
    TaskFindings,
    TaskIds,
    id_hashes,
    sort_hashes,
)
from guarddiag.audit.shardread import PoolBatch, read_task
from guarddiag.audit.stream import RowClock, Task, TaskProgress
from guarddiag.audit.template import template_form
from guarddiag.cores import meanwhile, usable_cores
from guarddiag.errors import GuarddiagError

if TYPE_CHECKING:
    from guarddiag.audit.kernels import CompiledIndex, CompiledKeys
    from guarddiag.audit.options import AuditOptions

logger = logging.getLogger(__name__)

__all__ = ["ENGINES", "ScanSpec", "check_engine", "default_workers", "make_spec", "scan_pool",
           "scan_task"]

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class ScanSpec:
    """What a worker needs to pick candidate rows (the same for every task)."""

    text_column: str
    id_column: str | None
    forms: tuple[str, ...]
    """Benchmark normal forms (non-empty, key order)."""
    near_threshold: float | None
    """Word-set Jaccard for near candidates; None when near-dup is off."""
    template_forms: frozenset[str] | None
    """Benchmark template forms; None when templates are off."""
    containment: tuple[float, int] | None = None
    """(containment threshold, short-prompt word count) for contained candidates; None when
    containment is off."""
    key: str = ""
    """Digest of the fields above: a worker builds its index once per key."""
    fields: tuple[str, ...] | None = None
    """Nested field paths the texts come from (:mod:`guarddiag.audit.fields`); None reads the
    one strict ``text_column``."""
    require: tuple[str, ...] = ()
    """Fields every row must hold as non-empty text (checked in the first pass)."""
    template_min_words: int = 0
    """Unmasked words a template form needs (:func:`~guarddiag.audit.template.template_form`)."""
    compiled: bool = True
    """The scan runs its compiled kernel (:mod:`~guarddiag.audit.kernelchoice`); either way it
    keeps the same rows."""


def make_spec(options: AuditOptions, *, forms: Iterable[str],
              template_forms: Iterable[str] | None, compiled: bool = True) -> ScanSpec:
    """What the scan's workers need, from the audit's options, the benchmark side and whether
    the pool is large enough for the compiled kernels
    (:func:`~guarddiag.audit.kernelchoice.compiled_scan_pays`)."""
    forms = tuple(forms)
    templates = None if template_forms is None else frozenset(template_forms)
    near = options.threshold if options.near_dup else None
    containment = ((options.containment_threshold, options.short_words)
                   if options.containment else None)
    fields = options.text_fields or None
    doc = [options.text_column, options.id_column, list(forms), near,
           None if templates is None else sorted(templates), containment]
    if fields:
        doc += [list(fields), list(options.require_fields)]
    if templates is not None:
        doc.append(options.template_min_words)
    key = hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()
    return ScanSpec(text_column=options.text_column, id_column=options.id_column, forms=forms,
                    near_threshold=near, template_forms=templates, containment=containment,
                    key=key, fields=fields, require=options.require_fields,
                    template_min_words=options.template_min_words,
                    compiled=compiled)


@dataclass(frozen=True)
class _Indexes:
    forms: pl.Series
    keys: KeyIndex
    """The benchmark forms without spaces, for the exact pass."""
    near: PrefixIndex | None
    contained: ContainmentIndex | None
    near_compiled: CompiledIndex | None = None
    """The near index as the compiled probe reads it (:mod:`~guarddiag.audit.kernels`),
    when the near probe alone finds the exact candidates too."""
    keys_compiled: CompiledKeys | None = None
    """The exact keys as the compiled exact pass reads them, when it runs alone."""

    @property
    def near_finds_exact(self) -> bool:
        """Every benchmark form has a word, so the near probe alone finds every exact
        candidate: a row whose form is a benchmark form's has that form's words (Jaccard 1)."""
        return self.near is not None and bool(self.near.sizes.all())


_WORKER_STATE: dict[tuple[str, bool], _Indexes] = {}
"""Per process: (spec key, compiled) → the benchmark side's indexes, built on first use."""
_STATE_LOCK = threading.Lock()


def _state(spec: ScanSpec) -> _Indexes:
    with _STATE_LOCK:
        return _build_state(spec)


def _build_state(spec: ScanSpec) -> _Indexes:
    # The same pool and options make the same key with either kernel; the indexes differ.
    state = _WORKER_STATE.get((spec.key, spec.compiled))
    if state is None:
        near = contained = None
        if spec.near_threshold is not None:
            near = form_index(spec.forms, threshold=spec.near_threshold)
        if spec.containment is not None:
            contained = index_containment(spec.forms, threshold=spec.containment[0],
                                          short_words=spec.containment[1])
        state = _Indexes(forms=pl.Series("form", spec.forms, dtype=pl.String),
                         keys=key_index(spec.forms), near=near, contained=contained)
        if spec.compiled and contained is None:
            if near is None:
                from guarddiag.audit.kernels import compile_keys

                state = replace(state, keys_compiled=compile_keys(state.keys))
            elif state.near_finds_exact:
                state = replace(state, near_compiled=near.compiled)
        _WORKER_STATE.clear()
        _WORKER_STATE[(spec.key, spec.compiled)] = state
    return state


def scan_task(task: Task, spec: ScanSpec, *, threads: int = 1,
              progress: bool = False) -> TaskFindings:
    """Read one task's rows in batches and keep the candidate rows (module docstring), each
    batch split over ``threads`` threads (a task scanned alone: see :func:`_local_map`);
    ``progress`` logs the rows read inside the task (tasks scanned one at a time)."""
    state = _state(spec)
    clock = RowClock("scan", task) if progress else None
    candidates: list[Candidate] = []
    offset = python_rows = surrogates = lines = 0
    missing: dict[str, int] = dict.fromkeys(spec.fields or (), 0)
    empty: dict[str, int] = dict.fromkeys(spec.fields or (), 0)
    non_text: dict[str, int] = dict.fromkeys(spec.fields or (), 0)
    bad: list[BadRow] = []
    for batch in read_task(task, text_column=spec.text_column, id_column=spec.id_column,
                           fields=spec.fields):
        surrogates += batch.surrogates
        lines = max(lines, batch.lines_read)
        for counts, mine in ((batch.missing, missing), (batch.empty, empty),
                             (batch.non_text, non_text)):
            for name, n in counts.items():
                mine[name] += n
        # Rows from 1 within the task, whatever the reader numbered them from.
        bad += [b if b.row is None else replace(b, row=b.row - batch.first_row + offset + 1)
                for b in batch.bad]
        if batch.texts.len():
            keep, slow = _candidates_in_parts(batch.texts, state, spec, threads)
            python_rows += slow
            candidates += _kept(batch, keep, offset)
        offset += batch.n_rows
        if clock is not None:
            clock.rows(offset)
    return TaskFindings(rows=offset, candidates=tuple(candidates), python_rows=python_rows,
                        missing=missing, empty=empty, surrogates=surrogates,
                        non_text=non_text, bad=tuple(bad), lines=lines)


def _kept(batch: PoolBatch, keep: pl.Series, offset: int) -> list[Candidate]:
    """The batch's candidate texts, as :class:`TaskFindings` stores them."""
    units = keep.arg_true()
    texts = batch.texts.gather(units).to_list()
    rows = batch.rows.gather(units) if batch.rows is not None else units
    ids = (batch.ids.gather(rows).to_list() if batch.ids is not None
           else [None] * len(texts))
    paths = (batch.paths.gather(units).to_list() if batch.paths is not None
             else [None] * len(texts))
    at_rows = rows.to_numpy()
    lines: list[int | None] = ([None] * len(texts) if batch.lines is None
                               else batch.lines[at_rows].tolist())
    starts: list[int | None] = ([None] * len(texts) if batch.offsets is None
                                else batch.offsets[at_rows].tolist())
    return list(zip((rows + offset).to_list(), texts, ids, paths, lines, starts, strict=True))


def ids_task(task: Task, spec: ScanSpec) -> TaskIds:
    """The first, cheap pass over one task: its ids' hashes (for repeated ids) and, for the
    required fields, the rows missing or empty there."""
    hashes: list[np.ndarray] = []
    rows = lines = 0
    missing = dict.fromkeys(spec.require, 0)
    empty = dict.fromkeys(spec.require, 0)
    first_gap: dict[str, int] = {}
    for batch in read_task(task, text_column=spec.text_column, id_column=spec.id_column,
                           fields=spec.require or None, ids_only=not spec.require):
        if batch.ids is not None:
            hashes.append(id_hashes(batch.ids.drop_nulls()))
        if spec.require and batch.rows is not None:
            for name in spec.require:
                missing[name] += batch.missing[name]
                empty[name] += batch.empty[name]
                if name not in first_gap and name in batch.first_gap:
                    first_gap[name] = rows + batch.first_gap[name] + 1
        rows += batch.n_rows
        lines = max(lines, batch.lines_read)
    sorted_hashes = None
    if spec.id_column is not None:
        sorted_hashes = (sort_hashes(np.concatenate(hashes)) if hashes
                         else np.zeros(0, np.uint64))
    return TaskIds(rows=rows, id_hashes=sorted_hashes, missing=missing, empty=empty,
                   first_gap=first_gap, lines=lines)


_MIN_PART = 32_768
"""Fewest rows a batch hands each thread (a near-dup probe slice)."""


def _candidates_in_parts(texts: pl.Series, state: _Indexes, spec: ScanSpec, threads: int
                         ) -> tuple[pl.Series, int]:
    """:func:`_candidate_rows` of a batch cut into ``threads`` runs of rows, one per thread: a
    row's candidacy depends on that row alone, so the mask is the same."""
    parts = min(threads, texts.len() // _MIN_PART)
    if parts <= 1:
        return _candidate_rows(texts, state, spec)
    size = -(-texts.len() // parts)
    with ThreadPoolExecutor(max_workers=parts) as pool:
        found = list(pool.map(lambda start: _candidate_rows(texts.slice(start, size), state,
                                                            spec), range(0, texts.len(), size)))
    return pl.concat([keep for keep, _ in found]), sum(slow for _, slow in found)


def _candidate_rows(texts: pl.Series, state: _Indexes, spec: ScanSpec) -> tuple[pl.Series, int]:
    """Which rows of a batch can match (exact, near, contained or template), and how many rows
    the Python normaliser did."""
    if state.contained is None:
        # Equal forms have equal keys, and a key is cheaper than a form; the near-dup probe
        # needs each row's words, not its form (word_forms are cheaper), and finds the exact
        # candidates too unless some benchmark form has no word.
        if state.keys_compiled is not None:
            from guarddiag.audit.kernels import exact_rows

            keep, slow = exact_rows(texts, state.keys_compiled)
        elif state.near is None:
            keep, slow = exact_candidates(texts, state.keys)
        elif state.near_compiled is not None:
            keep, slow = _near_candidates(texts, state.near, state.near_compiled)
        else:
            keep, slow, words = exact_candidates_and_words(texts, state.keys)
            keep = keep | _near_rows(words, state.near, plain_ascii=True)
    else:
        forms, slow = normal_forms(texts)
        keep = (forms.is_in(state.forms.implode())
                | contained_rows(state.contained, turn_forms(texts, forms)))
        if state.near is not None:
            keep = keep | _near_rows(forms, state.near)
    if spec.template_forms is not None:
        wanted = spec.template_forms
        keep = keep | pl.Series([template_form(t, min_words=spec.template_min_words) in wanted
                                 for t in texts.to_list()], dtype=pl.Boolean)
    return keep, slow


def _near_candidates(texts: pl.Series, index: PrefixIndex, compiled: CompiledIndex
                     ) -> tuple[pl.Series, int]:
    """The near-dup scan's candidates when every benchmark form has a word (so the exact ones
    are among them), and how many rows the Python normaliser did: the compiled probe reads every
    row (:func:`~guarddiag.audit.kernels.text_near_rows`) but those holding a character it
    cannot prove, or meets for the first time, whose word forms (:func:`word_forms`) it is then
    handed with every character that ends a word made a space (:func:`spaced_forms`)."""
    from guarddiag.audit.kernels import form_near_rows, text_near_rows

    found = text_near_rows(texts, compiled)
    if found is None:     # a null text: the vectorised probe takes the batch
        forms, slow = word_forms(texts)
        return _near_rows(forms, index, plain_ascii=True), slow
    keep, left = found
    slow = 0
    if left.any():
        rows = np.flatnonzero(left)
        forms, slow = word_forms(texts.gather(rows))
        left_keep = form_near_rows(spaced_forms(forms, plain_ascii=True), compiled)
        assert left_keep is not None, "a word form of a text is a text"
        keep[rows] = left_keep
    return pl.Series(values=keep), slow


def _near_rows(words: pl.Series, index: PrefixIndex, *, plain_ascii: bool = False
               ) -> pl.Series:
    """Rows whose words (``words``: normal forms or, with ``plain_ascii``,
    :func:`~guarddiag.audit.normal.word_forms`) have a Jaccard ≥ the threshold with a benchmark
    form's. A row equal to a benchmark form is among them; it is a candidate either way, and
    the audit of the candidates tells exact from near."""
    unique = words.unique(maintain_order=True)
    # A slice at a time: memory does not follow the batch.
    pairs = probe_forms(index, unique, plain_ascii=plain_ascii)
    if not pairs:
        return pl.Series(np.zeros(words.len(), dtype=bool))
    near = unique.gather(sorted({j for _, j, _ in pairs}))
    return words.is_in(near.implode())


# ─── engines ───────────────────────────────────────────────────────────────────────────────────

Pending = list[tuple[int, Task]]
"""(index in the pool's task list, task) of the tasks still to scan, in pool order."""


def _local_map(pending: Pending, spec: ScanSpec, workers: int
               ) -> Generator[tuple[int, TaskFindings]]:
    """(index, findings) of every pending task as each finishes, from ``workers`` threads (an
    exact or near-dup scan: its kernels release the GIL, and a thread starts at no cost), or
    from this process and ``workers - 1`` spawned processes (templates, containment: Python
    code).

    With processes, this one scans tasks too, taking the next one whenever the others are busy,
    so a worker that starts slowly (its imports) costs only its share. Threads are handed their
    next task as each finishes, this one only keeping the findings (a thread waiting for this
    one to end its own task idled; docs/decisions.md, 2026-12-05). A bad row stops new
    tasks; the tasks already running finish (and are kept), and the error raised is the one of
    the first bad task in pool order, as a scan in order would raise.
    """
    if workers <= 1 or len(pending) <= 1:
        # A lone task (a pool of one row group) would leave the other cores idle: its
        # batches are split over them instead (threads only: the kernels release the GIL).
        threads = workers if _threads_suffice(spec) else 1
        scan = partial(scan_task, threads=threads, progress=True)
        for index, task in pending:
            yield index, scan(task, spec)
        return
    helpers = min(workers, len(pending))
    executor: Executor
    threads = _threads_suffice(spec)
    if threads:
        executor = ThreadPoolExecutor(max_workers=helpers)
    else:
        helpers -= 1
        # spawn, not fork: polars' thread pool does not survive a fork.
        executor = ProcessPoolExecutor(max_workers=helpers,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_end_with_parent, initargs=(os.getpid(),))
    try:
        yield from _drive(executor, list(pending), spec, helpers, this_one=not threads)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


def _end_with_parent(parent: int, every: float = 0.5) -> None:
    """A worker's initializer: a thread that ends the worker as soon as ``parent`` is gone
    (killed, even by SIGKILL, which runs no clean-up), instead of finishing its task for
    nobody."""

    def watch() -> None:
        while True:
            time.sleep(every)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def _drive(executor: Executor, queue: Pending, spec: ScanSpec, helpers: int,
           work: Callable[[Task, ScanSpec], Any] | None = None, *, this_one: bool
           ) -> Iterator[tuple[int, Any]]:
    """``work`` (default :func:`scan_task`) over ``queue`` on ``helpers`` of ``executor``'s
    workers, and on this thread too if ``this_one`` (:func:`_local_map`)."""
    scan: Callable[[Task, ScanSpec], Any] = work or scan_task
    heapq.heapify(queue)
    running: dict[Future[Any], tuple[int, Task]] = {}
    failed: list[tuple[int, GuarddiagError]] = []
    while queue or running:
        while queue and not failed and len(running) < helpers:
            try:
                future = executor.submit(scan, queue[0][1], spec)
            except BrokenProcessPool:
                helpers = 0
                break
            running[future] = heapq.heappop(queue)
        if queue and not failed and (this_one or not helpers):
            index, task = heapq.heappop(queue)
            try:
                findings = scan(task, spec)
            except GuarddiagError as exc:
                failed.append((index, exc))
            else:
                yield index, findings
        elif running:
            wait(running, return_when=FIRST_COMPLETED)
        else:
            break
        for future in [f for f in running if f.done()]:
            index, task = running.pop(future)
            try:
                findings = future.result()
            except BrokenProcessPool:
                # A worker died (out of memory, killed, or a script without a main guard that
                # spawn cannot import): scan its tasks here instead.
                helpers = 0
                heapq.heappush(queue, (index, task))
                continue
            except GuarddiagError as exc:
                failed.append((index, exc))
                continue
            yield index, findings
    if failed:
        raise min(failed, key=lambda f: f[0])[1]


def check_engine(engine: str, *, workers: int | None) -> None:
    """The engine options' rules, before any I/O: a known engine, Ray importable for ``ray``,
    at least one worker."""
    if engine not in ENGINES:
        raise GuarddiagError(f"unknown audit engine {engine!r}: expected one of "
                             f"{', '.join(ENGINES)}")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise GuarddiagError('--engine ray: Ray is not installed; pip install -e ".[ray]" (or '
                             "use --engine local)")
    if workers is not None and workers < 1:
        raise GuarddiagError(f"workers must be at least 1, got {workers}")


def _threads_suffice(spec: ScanSpec) -> bool:
    """The exact and near-dup scans run in polars, numpy and scipy kernels that release the GIL
    (threads beat spawned processes: docs/decisions.md#2026-12-04-the-audits-first-scan); templates
    and containment are Python code."""
    return spec.template_forms is None and spec.containment is None


def default_workers() -> int:
    """Every core this process may use."""
    return usable_cores()


def scan_pool(tasks: list[Task], spec: ScanSpec, *, store: ScanStore,
              engine: str = "local", workers: int | None = None,
              ray_address: str | None = None) -> PoolScan:
    """First a cheap pass over the ids (and the required fields): rows missing a required
    field are one error, before the expensive scan. The search for repeated ids runs beside
    the scan. Then scan every task ``store`` does not hold yet with ``engine``, storing each
    task's findings as it finishes, and merge them in task order, the rows of repeated ids
    under their addresses (:mod:`~guarddiag.audit.badrows`)."""
    count = default_workers() if workers is None else workers
    if engine == "local":
        # The indexes (the exact kernel's key tables, the near-dup index and probe) are built
        # while the id pass reads the pool; the scan's workers wait for them on the state lock.
        # A failure here is met again, and raised, when a worker builds the state itself.
        meanwhile(_state, spec)
    repeated: Future[list[BadRow]] | None = None
    if spec.id_column is not None or spec.require:
        repeated = _first_pass(tasks, spec, store=store, workers=count)
    done = store.finished()
    pending = [(i, t) for i, t in enumerate(tasks) if i not in done]
    if done:
        logger.info(f"audit: resuming the scan in {store.folder}: {len(done):,} of {len(tasks):,} "
                    "task(s) already scanned")
    mapped: Generator[tuple[int, TaskFindings]]
    if engine == "local":
        mapped = _local_map(pending, spec, count)
    elif engine == "ray":
        mapped = ray_map(scan_task, pending, spec, address=ray_address)
    else:
        check_engine(engine, workers=workers)
        raise AssertionError(engine)    # check_engine raised
    clock = TaskProgress("scan", tasks, done)
    with closing(mapped):
        for index, findings in mapped:
            store.save(index, findings)
            clock.finished(index, findings.rows)
    return store.merged(id_column=spec.id_column,
                        repeated=repeated.result() if repeated is not None else ())


def _first_pass(tasks: list[Task], spec: ScanSpec, *, store: ScanStore, workers: int
                ) -> Future[list[BadRow]] | None:
    """Hash every task's ids (threads: the readers release the GIL) and count the required fields'
    gaps; raise for a required field missing in some row (with the true counts). The search for
    repeated ids is started and returned: it sorts every id's hash and re-reads the rows of the
    hashes that repeat, while the scan runs."""
    done = store.checked()
    pending = [(i, t) for i, t in enumerate(tasks) if i not in done]
    clock = TaskProgress("id pass", tasks, done)
    if pending:
        threads = max(1, min(workers, len(pending)))
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for index, found in _drive(pool, list(pending), spec, threads, work=ids_task,
                                       this_one=False):
                store.save_ids(index, found)
                clock.finished(index, found.rows)
    _check_required(tasks, spec, store)
    if spec.id_column is None:
        return None
    return meanwhile(partial(store.repeated_ids, id_column=spec.id_column))


def _check_required(tasks: list[Task], spec: ScanSpec, store: ScanStore) -> None:
    problems = []
    for name in spec.require:
        missing = empty = 0
        first: str | None = None
        for i, task in enumerate(tasks):
            doc = store.first_pass(i)
            missing += doc["missing"].get(name, 0)
            empty += doc["empty"].get(name, 0)
            if first is None and name in doc["first_gap"]:
                row = doc["first_gap"][name]
                first = (f"{task.path} row {row}" if task.byte_range is None
                         else f"{task.path} (row {row} of bytes {task.byte_range[0]:,}-"
                              f"{task.byte_range[1]:,})")
        if missing or empty:
            problems.append(f'field "{name}" is missing (absent or null) in {missing:,} rows and '
                            f"empty in {empty:,} (first: {first})")
    if problems:
        raise GuarddiagError("; ".join(problems) + "; --require-field needs text there in every "
                             "row (drop --require-field to skip and count such rows)")
