"""``audit_pool``: audit a pool (one file, shards, a datasets folder) against benchmark subsets
and write the audit folder.

The pool is scanned in batches by :mod:`guarddiag.audit.engine` (all cores, or Ray), which keeps
only the rows that can match; the audit proper runs on those. A rerun with the same pool,
benchmark files, options and code finds its ``meta.json`` cache key and returns the saved result
instead of recomputing. A run that was killed or failed during the scan left its finished tasks
in ``<out>/.scan`` (:mod:`guarddiag.audit.scanstore`); the rerun scans only the others
(``force=True`` starts the scan over).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import data, files
from guarddiag.audit import merge
from guarddiag.audit.badrows import (
    BAD_ROWS_FILE,
    bad_counts,
    bad_rows_failure,
    describe_counts,
    read_bad_rows,
    write_bad_rows,
)
from guarddiag.audit.engine import check_engine, default_workers, make_spec, scan_pool
from guarddiag.audit.exact import index_forms
from guarddiag.audit.frames import audit_frames, check_options
from guarddiag.audit.kernelchoice import compiled_scan_pays, warm_exact_kernel
from guarddiag.audit.neardup import warm_compiled_probe
from guarddiag.audit.options import AuditOptions
from guarddiag.audit.outputs import (
    CHART_SUFFIXES,
    forget_finished,
    load_if_current,
    plot_overlap,
    save_audit_figure,
    write_audit,
)
from guarddiag.audit.provenance import write_audit_records
from guarddiag.audit.result import (
    FORMAT_VERSION,
    AuditResult,
    UnavailableBenchmark,
)
from guarddiag.audit.scanstore import PoolScan, ScanStore
from guarddiag.audit.shardread import arrow_allocator
from guarddiag.audit.stream import (
    TASK_BYTES,
    Shard,
    Task,
    TaskProgress,
    find_shards,
    plan_tasks,
    pool_digest,
)
from guarddiag.audit.template import template_form
from guarddiag.audit.unpack import UNPACK_FOLDER, unpack_big
from guarddiag.cores import meanwhile, objects_alive_now_frozen
from guarddiag.errors import GuarddiagError
from guarddiag.paths import AuditFolder

logger = logging.getLogger(__name__)

__all__ = ["SCAN_FOLDER", "audit_pool"]

SCAN_FOLDER = ".scan"
"""The audit folder's subfolder holding the finished scan tasks of a run not yet complete."""


def audit_pool(pool: str | Path, options: AuditOptions | None = None, *,
               out_dir: str | Path, force: bool = False, data_dir: str | Path | None = None,
               derived_dir: str | Path | None = None, **fields: Any) -> AuditResult:
    """Audit a pool against benchmark subsets and write the results to ``out_dir``.

    ``options`` (:class:`~guarddiag.audit.options.AuditOptions`; default every default), with
    any of its fields replaced by ``fields`` (``near_dup=True``), says what is audited and how.
    ``pool`` is a table file, a glob over shards, a folder of shards or a ``datasets`` folder
    (:mod:`guarddiag.audit.stream`). The ``local`` engine uses ``workers`` cores (default
    every core), ``ray`` a Ray cluster; the outputs are the same bytes with either. Subsets
    whose files are absent are listed in ``AuditResult.unavailable``. A rerun with the same
    pool, benchmark files and options returns the saved result (``figure=True`` draws its chart
    from it if the folder has none), and a rerun after a killed scan scans only the tasks it
    had not finished (``force=True`` recomputes everything).

    Example (CPU, seconds)::

        audit_pool("work/pool/pool.parquet", near_dup=True, out_dir="work/audit")
    """
    opts = AuditOptions.of(options, **fields)
    pool, out_dir = Path(pool), Path(out_dir)
    # The drop rules in the command line's words first, then every option rule before any I/O.
    threshold, short_threshold = check_options(opts)
    check_engine(opts.engine, workers=opts.workers)
    shards = find_shards(str(pool))
    digest = meanwhile(pool_digest, shards)
    if (opts.engine == "local" and not opts.containment
            and compiled_scan_pays(shards, near=opts.near_dup)):
        meanwhile(warm_compiled_probe if opts.near_dup else warm_exact_kernel)
    bench_set = data.load_benchmarks(opts.benchmarks, data_dir=data_dir,
                                     derived_dir=derived_dir)
    unavailable = tuple(UnavailableBenchmark(benchmark=s.id, reason=_reason(s),
                                             n=getattr(s, "expected", None))
                        for s in bench_set.unavailable)
    recorded = _key_options(opts, threshold=threshold, short_threshold=short_threshold)
    covered = [*bench_set.frames, *(u.benchmark for u in unavailable)]

    def cache_key() -> str:
        return _cache_key(digest.result(), bench_set.sha256, list(bench_set.frames),
                          unavailable, recorded)

    key = meanwhile(cache_key)
    # The pool's digest names this audit. Only what the folder holds waits for it (an audit to
    # add to or refuse, a saved result, a scan to resume); otherwise the scan starts meanwhile.
    keep = merge.previous_to_keep(out_dir, pool_sha256=digest.result, options=recorded,
                                  covered=covered)
    cached = None if force else _saved(out_dir, key, figure=opts.figure, bad_rows=opts.bad_rows)
    if cached is not None:
        return cached
    if keep is not None:
        merge.keep_previous(keep, out_dir)
    # A failed run must not leave the previous run's summary vouching for this folder.
    forget_finished(AuditFolder(out_dir))
    tasks = _planned(shards, out_dir, opts)
    frame_options: dict[str, Any] = {
        "near_dup": opts.near_dup, "threshold": threshold, "short_words": opts.short_words,
        "short_threshold": short_threshold, "drop_near": opts.drop_near,
        "templates": opts.templates, "drop_template": opts.drop_template,
        "template_min_words": opts.template_min_words, "containment": opts.containment,
        "drop_contained": opts.drop_contained,
        "containment_threshold": opts.containment_threshold, "review_rows": opts.review_rows,
        "sha256": bench_set.sha256, "unavailable": unavailable}
    with (_resumable(out_dir, key=key, tasks=tasks, fresh=force) as store, arrow_allocator(),
          objects_alive_now_frozen()):
        result = _audit_with_titles(
            shards, tasks, store, bench_set.frames, opts, frame_options=frame_options,
            derived_dir=derived_dir, data_dir=data_dir, bad_rows=out_dir / BAD_ROWS_FILE)
        inputs = ({"pool": digest.result()}
                  | {f"benchmark:{k}": v for k, v in bench_set.sha256.items()})
        result = _write_outputs(result, out_dir, keep=keep, figure=opts.figure, meta={
            "inputs": inputs, "pool_path": str(pool), "options": recorded,
            "audit_options": opts.model_dump(mode="json"), "cache_key": key.result()})
    merge.finish_merge(out_dir)
    return replace(result, out_dir=out_dir)


def _saved(out_dir: Path, key: Future[str], *, figure: bool, bad_rows: str
           ) -> AuditResult | None:
    """The folder's saved audit if ``key`` says it is this one, its chart drawn if ``figure``
    and it has none; else None. A saved audit of a pool with bad rows (saved by a run that
    skipped them) is the ``--bad-rows fail`` error again."""
    if not AuditFolder(out_dir).meta.is_file():
        return None
    cached = load_if_current(out_dir, key.result())
    listed = out_dir / BAD_ROWS_FILE
    if cached is not None and bad_rows == "fail" and listed.is_file():
        raise GuarddiagError(bad_rows_failure(read_bad_rows(listed), listed))
    if cached is not None:
        logger.info(f"audit: {out_dir} is up to date with this pool and these benchmarks "
                    "(use --force to recompute)")
        if figure and not all((out_dir / f"overlap{s}").is_file() for s in CHART_SUFFIXES):
            # Saved without its chart: the chart is a picture of the saved summary, so it is
            # drawn from that (the same bytes as a full run's), not by a new scan.
            save_audit_figure(plot_overlap(cached), out_dir / "overlap")
    return cached


def _key_options(opts: AuditOptions, *, threshold: float, short_threshold: float
                 ) -> dict[str, Any]:
    """The options that change an output, as meta.json records them (and the cache key): an
    audit without templates, containment or nested fields keeps the key it had before they
    existed. The gates, the engine and the figure change no number and are left out."""
    options: dict[str, Any] = {
        "text_column": opts.text_column, "id_column": opts.id_column,
        "near_dup": opts.near_dup, "threshold": threshold, "drop_near": opts.drop_near,
        "short_words": opts.short_words, "short_threshold": short_threshold}
    if opts.text_fields:
        options |= {"text_fields": list(opts.text_fields),
                    "require_fields": list(opts.require_fields)}
    if opts.templates:
        options |= {"templates": True, "drop_template": opts.drop_template,
                    "template_min_words": opts.template_min_words}
    if opts.containment:
        options |= {"containment": True, "containment_threshold": opts.containment_threshold,
                    "drop_contained": opts.drop_contained, "review_rows": opts.review_rows}
    return options


def _planned(shards: list[Shard], out_dir: Path, opts: AuditOptions) -> list[Task]:
    """The scan's tasks, big compressed shards decompressed first, said in the first line."""
    planned = unpack_big(shards, out_dir / UNPACK_FOLDER)
    tasks = plan_tasks(planned)
    _log_start(planned, tasks, opts)
    return tasks


def _log_start(shards: list[Shard], tasks: list[Task], opts: AuditOptions) -> None:
    """The first status line, before any reading, for a pool of :data:`TASK_BYTES` or more
    on disk, decompressed copies counted (a smaller one is done in seconds, and a bad row of
    it is then the only line on stderr): what is scanned, in how many parts, how."""
    size = sum(Path(s.path).stat().st_size for s in shards)
    if size < TASK_BYTES:
        return
    workers = opts.workers or default_workers()
    logger.info(f"audit: scanning {len(shards):,} shard(s), {size / 2**20:,.1f} MiB, in "
                f"{len(tasks):,} task(s) on {workers} worker(s) ({opts.engine} engine): the ids "
                f"first, then the texts; a status line at most every {TaskProgress.EVERY:g} s")


def _write_outputs(result: AuditResult, out_dir: Path, *, keep: merge.PreviousAudit | None,
                   figure: bool, meta: Mapping[str, Any]) -> AuditResult:
    """The audit folder: this run's lists added to the ones ``keep`` holds, each benchmark's
    record of its audit (before summary.json and meta.json, which come last), the outputs."""
    records = merge.new_records(result, pool_sha256=meta["inputs"]["pool"],
                                options=meta["options"],
                                benchmark_sha256={k.removeprefix("benchmark:"): v
                                                  for k, v in meta["inputs"].items()})
    if keep is not None:
        result = merge.merge_results(keep.result, result)
        records = merge.merged_records(keep.records, records, result)
    write_audit_records(out_dir, records)
    write_audit(result, out_dir, figure=figure, meta=meta)
    return result


@contextmanager
def _resumable(out_dir: Path, *, key: Future[str], tasks: list[Task], fresh: bool
               ) -> Iterator[ScanStore]:
    """The scan store in ``out_dir``: kept while the run is unfinished (a killed or failed run
    resumes from its finished tasks), removed once the outputs are written. A run that fails
    before any task finished (a bad first shard) leaves no trace, nor a folder it created."""
    store = ScanStore(out_dir / SCAN_FOLDER, key=key, tasks=tasks, fresh=fresh)
    try:
        yield store
    except GuarddiagError as exc:
        if not store.finished():
            store.clear()
            shutil.rmtree(out_dir / UNPACK_FOLDER, ignore_errors=True)
            if out_dir.is_dir() and not any(out_dir.iterdir()):
                out_dir.rmdir()
        raise _named(exc, tasks) from None
    store.clear()
    shutil.rmtree(out_dir / UNPACK_FOLDER, ignore_errors=True)


def _named(exc: GuarddiagError, tasks: list[Task]) -> GuarddiagError:
    """``exc`` naming the compressed shards rather than their decompressed copies."""
    text = str(exc)
    for task in tasks:
        if task.source is not None:
            text = text.replace(task.path, task.source)
    return exc if text == str(exc) else GuarddiagError(text)


def _audit_with_titles(shards: list[Shard], tasks: list[Task], store: ScanStore,
                       frames: Mapping[str, pl.DataFrame], opts: AuditOptions, *,
                       frame_options: Mapping[str, Any],
                       derived_dir: str | Path | None, data_dir: str | Path | None,
                       bad_rows: Path) -> AuditResult:
    """:func:`_scan_and_audit`, with the benchmarks' titles for the chart."""
    with ThreadPoolExecutor(max_workers=1) as background:
        # This process mostly waits on the scan's workers: read the manifests' titles and
        # import the chart library (about a second) meanwhile.
        manifests = background.submit(data.load_manifests, derived_dir=derived_dir,
                                      data_dir=data_dir)
        chart = background.submit(_import_chart_library if opts.figure else lambda: None)
        result = _scan_and_audit(shards, tasks, store, frames, opts,
                                 frame_options=frame_options, bad_rows=bad_rows)
        chart.result()
        return replace(result, titles={k: m.title for k, m in manifests.result().items()})


def _import_chart_library() -> None:
    # What guarddiag.audit.outputs.plot_overlap does first.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot


def _scan_and_audit(shards: list[Shard], tasks: list[Task], store: ScanStore,
                    frames: Mapping[str, pl.DataFrame], opts: AuditOptions, *,
                    frame_options: Mapping[str, Any], bad_rows: Path) -> AuditResult:
    """Scan the pool for the rows that can match, then audit those rows (``frame_options`` are
    :func:`audit_frames`'s); the result counts every pool row. The pool's bad rows are listed
    in ``bad_rows``, whatever ``--bad-rows`` says; with ``fail`` they are the error, after the
    whole scan (its finished tasks kept for a rerun with ``skip``)."""
    bench_texts = [frame.get_column("text").to_list() for frame in frames.values()]
    templates = None
    if opts.templates:
        templates = {f for texts in bench_texts for t in texts
                     if (f := template_form(t, min_words=opts.template_min_words)) is not None}
    spec = make_spec(opts, forms=index_forms(bench_texts).forms, template_forms=templates,
                     compiled=compiled_scan_pays(shards, near=opts.near_dup))
    # No progress line before the scan: a bad pool row must be the only line on stderr.
    scan = scan_pool(tasks, spec, store=store, engine=opts.engine, workers=opts.workers,
                     ray_address=opts.ray_address)
    listed = write_bad_rows(scan.bad, bad_rows)
    if listed is not None and opts.bad_rows == "fail":
        raise GuarddiagError(bad_rows_failure(scan.bad, listed))
    if scan.rows == 0:
        raise GuarddiagError(f"{shards[0].path if len(shards) == 1 else 'the pool shards'}: "
                             "the pool has no rows"
                             + (f" ({describe_counts(bad_counts(scan.bad))} line(s))"
                                if scan.bad else ""))
    logger.info(f"audit: scanned {scan.rows:,} pool rows in {len(shards):,} shard(s), "
                f"{len(tasks):,} task(s), {opts.engine} engine ({scan.python_rows:,} rows "
                f"normalised by the Python path); {len(scan.ids):,} "
                f"{'texts' if opts.nested else 'rows'} can match")
    counts = _field_counts(scan, opts)
    if scan.surrogates:
        logger.info(f"audit: replaced {scan.surrogates:,} lone surrogate(s) (a \\ud800-style "
                    "escape with no pair) by U+FFFD")
    result = audit_frames(scan.ids, scan.texts, frames, pool_fields=scan.fields,
                          pool_addresses=scan.addresses, **frame_options)
    bad = bad_counts(scan.bad) if scan.bad else {}
    return replace(result, pool_rows=scan.rows, fields=counts, surrogates=scan.surrogates,
                   bad_rows=bad)


def _field_counts(scan: PoolScan, opts: AuditOptions) -> dict[str, dict[str, int]]:
    """Per text field: the rows missing it and the rows where it is blank (skipped), said on
    stderr; a field found in no row is flagged (a wrong path, most likely)."""
    if not opts.nested:
        return {}
    counts = {}
    for name in opts.text_fields:
        missing, empty = scan.missing.get(name, 0), scan.empty.get(name, 0)
        skipped = sum(1 for b in scan.bad if b.kind == "wrong_type")
        counts[name] = {"missing": missing, "empty": empty,
                        "with_text": scan.rows - missing - empty - skipped,
                        "non_text_parts": scan.non_text.get(name, 0)}
        note = (" — in no row at all: check the path" if missing == scan.rows and scan.rows
                else "")
        logger.info(f"audit: field {name}: text in {scan.rows - missing - empty:,} rows; skipped "
                    f"{missing:,} rows missing it (absent or null) and {empty:,} empty{note}")
    return counts


def _reason(status: Any) -> str:
    # data.SubsetStatus: "unavailable" means files absent; keep where to get them on one line.
    source = getattr(status, "source", None)
    if getattr(status, "status", None) == "unavailable" and source:
        return f"files absent; public source: {source}"
    return str(getattr(status, "message", None) or "files absent")


def _cache_key(pool_sha: str, bench_sha: Mapping[str, str], names: list[str],
               unavailable: Sequence[UnavailableBenchmark], options: Mapping[str, Any]) -> str:
    # The code version is part of the key: a changed audit must not reuse an old folder.
    doc = {"format": FORMAT_VERSION, "code": files.package_versions().get("guarddiag"),
           "git": files.git_sha(), "pool": pool_sha, "benchmarks": names,
           "sha256": dict(bench_sha), "unavailable": [u.benchmark for u in unavailable],
           "options": dict(options)}
    return hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()

