"""The audit over a pool of any size: scan shards in parallel for candidate rows, then audit
those rows with :func:`~guarddiag.audit.frames.audit_frames`.

A pool row can only appear in the outputs if its normal form is a benchmark prompt's (exact), if
its word set has Jaccard ≥ the threshold with some benchmark prompt's other form (near), if its
template form is a benchmark prompt's (template), or if it holds enough of a prompt's word
3-grams (contained). The scan keeps those rows, or a few more (the exact pass keeps every row
whose normal form without spaces is a prompt's; the short-prompt rule is applied later), and of
the rest of the pool only an 8-byte hash of each id, for the duplicate check. Each task's
findings go to a :class:`~guarddiag.audit.scanstore.ScanStore` on disk as it finishes, so a
killed scan resumes where it stopped and the driver holds nothing per pool row. ``audit_frames``
then runs on the candidates in pool order, so every output is computed by the same code as an
in-memory audit and is the same bytes whatever the number of workers or the engine: the matches
of a row depend on that row alone, and the candidates keep their pool order. Only the row count
comes from the scan.

Engines: ``local`` runs ``workers`` at once (default every core): an exact-only scan in threads
(polars and pyarrow release the GIL, and threads start at no cost), a scan with near-dup,
template or containment candidates (Python code) in this process plus ``workers - 1`` spawned
processes; ``ray`` (:mod:`guarddiag.audit.ray_engine`) runs one Ray task per work unit. Every
engine maps the same pure function :func:`scan_task` over the same tasks of
:func:`~guarddiag.audit.stream.plan_tasks`, in whatever order they finish; the store merges the
findings in task order.
"""

from __future__ import annotations

import hashlib
import heapq
import importlib.util
import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np
import polars as pl

from guarddiag import files
from guarddiag.audit.containment import ContainmentIndex, contained_rows, index_containment
from guarddiag.audit.neardup import PrefixIndex, build_index, probe_index
from guarddiag.audit.normal import KeyIndex, exact_candidates, key_index, normal_forms
from guarddiag.audit.ray_engine import ray_map
from guarddiag.audit.scanstore import PoolScan, ScanStore, TaskFindings, id_hashes
from guarddiag.audit.shardread import read_task
from guarddiag.audit.stream import Task
from guarddiag.audit.template import template_form
from guarddiag.errors import GuarddiagError
from guarddiag.progress import progress, say
from guarddiag.text import words_of_normal_form

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


def make_spec(*, text_column: str, id_column: str | None, forms: Iterable[str],
              near_threshold: float | None, template_forms: Iterable[str] | None,
              containment: tuple[float, int] | None = None) -> ScanSpec:
    forms = tuple(forms)
    templates = None if template_forms is None else frozenset(template_forms)
    doc = [text_column, id_column, list(forms), near_threshold,
           None if templates is None else sorted(templates), containment]
    key = hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()
    return ScanSpec(text_column=text_column, id_column=id_column, forms=forms,
                    near_threshold=near_threshold, template_forms=templates,
                    containment=containment, key=key)


@dataclass(frozen=True)
class _Indexes:
    forms: pl.Series
    keys: KeyIndex
    """The benchmark forms without spaces, for the exact pass."""
    near: PrefixIndex | None
    contained: ContainmentIndex | None


_WORKER_STATE: dict[str, _Indexes] = {}
"""Per process: spec key → the benchmark side's indexes, built on first use."""
_STATE_LOCK = threading.Lock()


def _state(spec: ScanSpec) -> _Indexes:
    with _STATE_LOCK:
        return _build_state(spec)


def _build_state(spec: ScanSpec) -> _Indexes:
    state = _WORKER_STATE.get(spec.key)
    if state is None:
        near = contained = None
        if spec.near_threshold is not None:
            near = build_index([frozenset(words_of_normal_form(f)) for f in spec.forms],
                               threshold=spec.near_threshold)
        if spec.containment is not None:
            contained = index_containment(spec.forms, threshold=spec.containment[0],
                                          short_words=spec.containment[1])
        state = _Indexes(forms=pl.Series("form", spec.forms, dtype=pl.String),
                         keys=key_index(spec.forms),
                         near=near, contained=contained)
        _WORKER_STATE.clear()
        _WORKER_STATE[spec.key] = state
    return state


def scan_task(task: Task, spec: ScanSpec) -> TaskFindings:
    """Read one task's rows in batches and keep the candidate rows (module docstring)."""
    state = _state(spec)
    candidates: list[tuple[int, str, str | None]] = []
    hashes: list[np.ndarray] = []
    offset = python_rows = 0
    for batch in read_task(task, text_column=spec.text_column, id_column=spec.id_column):
        keep, slow = _candidate_rows(batch.texts, state, spec)
        python_rows += slow
        rows = keep.arg_true()
        texts = batch.texts.gather(rows).to_list()
        ids = (batch.ids.gather(rows).to_list() if batch.ids is not None
               else [None] * len(texts))
        candidates.extend(zip((rows + offset).to_list(), texts, ids, strict=True))
        if batch.ids is not None:
            hashes.append(id_hashes(batch.ids))
        offset += batch.texts.len()
    sorted_hashes = None
    if spec.id_column is not None:
        sorted_hashes = np.sort(np.concatenate(hashes)) if hashes else np.zeros(0, np.uint64)
    return TaskFindings(rows=offset, candidates=tuple(candidates), id_hashes=sorted_hashes,
                        python_rows=python_rows)


def _candidate_rows(texts: pl.Series, state: _Indexes, spec: ScanSpec) -> tuple[pl.Series, int]:
    """Which rows of a batch can match (exact, near, contained or template), and how many rows
    the Python normaliser did."""
    if state.near is None and state.contained is None:
        # Exact only: equal forms have equal keys, and a key is cheaper than a form.
        keep, slow = exact_candidates(texts, state.keys)
    else:
        forms, slow = normal_forms(texts)
        keep = forms.is_in(state.forms.implode())
        if state.near is not None:
            keep = keep | _near_rows(forms, state.near, spec.forms)
        if state.contained is not None:
            keep = keep | contained_rows(state.contained, forms)
    if spec.template_forms is not None:
        wanted = spec.template_forms
        keep = keep | pl.Series([template_form(t) in wanted for t in texts.to_list()],
                                dtype=pl.Boolean)
    return keep, slow


def _near_rows(forms: pl.Series, index: PrefixIndex, bench_forms: tuple[str, ...]
               ) -> pl.Series:
    """Rows whose form has a near pair (Jaccard ≥ threshold) with another benchmark form."""
    unique = forms.unique(maintain_order=True).to_list()
    pairs = probe_index(index, [frozenset(words_of_normal_form(f)) for f in unique])
    near = {unique[j] for i, j, _ in pairs if unique[j] != bench_forms[i]}
    if not near:
        return pl.Series(np.zeros(forms.len(), dtype=bool))
    return forms.is_in(pl.Series(sorted(near), dtype=pl.String).implode())


# ─── engines ───────────────────────────────────────────────────────────────────────────────────

Pending = list[tuple[int, Task]]
"""(index in the pool's task list, task) of the tasks still to scan, in pool order."""


def _local_map(pending: Pending, spec: ScanSpec, workers: int
               ) -> Iterator[tuple[int, TaskFindings]]:
    """(index, findings) of every pending task as each finishes, from this process and
    ``workers - 1`` threads (an exact-only scan: polars and pyarrow release the GIL, and a
    thread starts at no cost) or spawned processes (near-dup, templates, containment: Python
    code).

    This process scans tasks too, taking the next one whenever the others are busy, so a
    worker that starts slowly (imports take about a second) or a busy core costs only its
    share. A bad row stops new tasks; the tasks already running finish (and are kept), and the
    error raised is the one of the first bad task in pool order, as a scan in order would raise.
    """
    if workers <= 1 or len(pending) <= 1:
        for index, task in pending:
            yield index, scan_task(task, spec)
        return
    helpers = min(workers, len(pending)) - 1
    executor: Executor
    if _exact_only(spec):
        executor = ThreadPoolExecutor(max_workers=helpers)
    else:
        # spawn, not fork: polars' thread pool does not survive a fork.
        executor = ProcessPoolExecutor(max_workers=helpers,
                                       mp_context=multiprocessing.get_context("spawn"))
    try:
        yield from _drive(executor, list(pending), spec, helpers)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


def _drive(executor: Executor, queue: Pending, spec: ScanSpec, helpers: int
           ) -> Iterator[tuple[int, TaskFindings]]:
    heapq.heapify(queue)
    running: dict[Future[TaskFindings], tuple[int, Task]] = {}
    failed: list[tuple[int, GuarddiagError]] = []
    while queue or running:
        while queue and not failed and len(running) < helpers:
            try:
                future = executor.submit(scan_task, queue[0][1], spec)
            except BrokenProcessPool:
                helpers = 0
                break
            running[future] = heapq.heappop(queue)
        if queue and not failed:
            index, task = heapq.heappop(queue)
            try:
                findings = scan_task(task, spec)
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


def _exact_only(spec: ScanSpec) -> bool:
    return (spec.near_threshold is None and spec.template_forms is None
            and spec.containment is None)


def default_workers() -> int:
    """Every core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def scan_pool(tasks: list[Task], spec: ScanSpec, *, store: ScanStore,
              engine: str = "local", workers: int | None = None,
              ray_address: str | None = None) -> PoolScan:
    """Scan every task ``store`` does not hold yet with ``engine``, storing each task's
    findings as it finishes, then merge them in task order; duplicate ids anywhere in the pool
    are an error naming both rows."""
    done = store.finished()
    pending = [(i, t) for i, t in enumerate(tasks) if i not in done]
    if done:
        say(f"audit: resuming the scan in {store.folder}: {len(done):,} of {len(tasks):,} "
            "task(s) already scanned")
    mapped: Iterator[tuple[int, TaskFindings]]
    if engine == "local":
        mapped = _local_map(pending, spec, default_workers() if workers is None else workers)
    elif engine == "ray":
        mapped = ray_map(scan_task, pending, spec, address=ray_address)
    else:
        check_engine(engine, workers=workers)
        raise AssertionError(engine)    # check_engine raised
    with progress(total=len(tasks), initial=len(done), desc="audit: scan", unit="task") as bar:
        for index, findings in mapped:
            store.save(index, findings)
            bar.update(1)
    if spec.id_column is not None:
        store.check_unique_ids(text_column=spec.text_column, id_column=spec.id_column)
    return store.merged()
