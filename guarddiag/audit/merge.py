"""Audits add up: an audit of some benchmarks into a folder that already holds an audit of
others keeps the others' lists.

A user keeps one audit folder as benchmarks are added (``guarddiag audit --benchmarks new_set
--out work/audit``). The new audit replaces the lists of the benchmarks it covers and keeps the
rest, but only when the folder's audit is of the same pool with the same options: a list of
another pool or other options beside them would make two benchmarks' "decontaminated" mean two
things, so that is refused, naming the difference. An audit that covers every benchmark the
folder holds replaces the folder whatever it was.

Until the merged folder is complete, the folder's previous audit is kept in ``.previous/``: a
run killed while writing loses nothing, and the rerun merges with it again.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.audit.options import AuditOptions
from guarddiag.audit.outputs import load_audit
from guarddiag.audit.provenance import (
    AuditRecord,
    audit_id,
    drops_of,
    read_audit_records,
)
from guarddiag.audit.result import AuditResult
from guarddiag.errors import GuarddiagError
from guarddiag.paths import AuditFolder

__all__ = ["PREVIOUS_FOLDER", "PreviousAudit", "finish_merge", "keep_previous",
           "merge_results", "merged_records", "new_records", "previous_audit",
           "previous_to_keep"]

PREVIOUS_FOLDER = ".previous"
"""The audit folder's copy of its previous audit while a new one is merged into it."""


@dataclass(frozen=True)
class PreviousAudit:
    """The audit a folder held before this run: its result and per-benchmark records."""

    folder: Path
    result: AuditResult
    records: Mapping[str, AuditRecord]


def previous_audit(out_dir: Path) -> PreviousAudit | None:
    """The folder's finished audit, or the copy a stopped merge left in ``.previous/``."""
    for folder in (out_dir, out_dir / PREVIOUS_FOLDER):
        if AuditFolder(folder).is_finished():
            try:
                return PreviousAudit(folder, load_audit(folder), read_audit_records(folder))
            except GuarddiagError:
                # An audit of another layout version is recomputed, not merged (as before).
                return None
    return None


def previous_to_keep(out_dir: Path, *, pool_sha256: Callable[[], str],
                     options: Mapping[str, Any], covered: Collection[str]
                     ) -> PreviousAudit | None:
    """The folder's audit this audit adds to: the previous audit when it holds benchmarks
    this audit does not cover and was made of the same pool with the same options; an error
    naming the difference when those differ; None when there is nothing to keep.
    ``pool_sha256`` gives the pool's digest, asked for only when there is something to keep
    (it may still be computed meanwhile)."""
    previous = previous_audit(out_dir)
    if previous is None:
        return None
    others = sorted(set(previous.result.decontaminated) - set(covered))
    if not others:
        return None
    record = previous.records[others[0]]
    pool_sha = pool_sha256()
    diff = []
    if record.pool_sha256 != pool_sha:
        diff.append(f"pool sha256 {record.pool_sha256[:12]}… there, {pool_sha[:12]}… now")
    keys = sorted(set(record.options) | set(options))
    diff += [f"{k} {_shown(record.options, k)} there, {_shown(options, k)} now" for k in keys
             if record.options.get(k) != options.get(k)]
    if diff:
        listed = ", ".join(others[:6]) + (f" and {len(others) - 6} more" if len(others) > 6
                                          else "")
        raise GuarddiagError(
            f"{out_dir}: holds an audit of {listed} that this audit would not replace, made "
            f"with another {'pool' if record.pool_sha256 != pool_sha else 'set of options'}"
            f" ({'; '.join(diff)}); audits in one folder must add up: use the same pool and "
            f"options{_as_flags(record.options, options)}, audit those benchmarks too, or "
            f"choose another --out")
    return previous


def _as_flags(there: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """The folder's options that differ, as the command line spells them (``--near-dup``,
    ``--threshold 0.8``); an option to turn off has no flag and is left out, and so is one
    at its default (the command line gives it without a flag)."""
    fields = AuditOptions.model_fields
    flags = []
    for key in sorted(there):
        if there[key] == now.get(key) or there[key] is False or there[key] is None:
            continue
        if key in fields and there[key] == fields[key].default:
            continue
        flag = "--" + key.replace("_", "-")
        flags.append(flag if there[key] is True else f"{flag} {there[key]}")
    return f" ({' '.join(flags)})" if flags else ""


def _shown(options: Mapping[str, Any], key: str) -> str:
    # An option the audit left out (templates, containment and theirs when off) reads "off".
    return repr(options[key]) if key in options else "off"


def keep_previous(previous: PreviousAudit, out_dir: Path) -> None:
    """Copy the folder's audit to ``.previous/`` (once; a stopped run's copy is kept)."""
    target = out_dir / PREVIOUS_FOLDER
    if previous.folder == target:
        return
    staging = out_dir / f"{PREVIOUS_FOLDER}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in AuditFolder.OUTPUTS:
        src = out_dir / name
        if src.is_dir():
            shutil.copytree(src, staging / name)
        elif src.is_file():
            shutil.copy2(src, staging / name)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def finish_merge(out_dir: Path) -> None:
    """The merged folder is complete: drop the copy of the previous audit."""
    shutil.rmtree(out_dir / PREVIOUS_FOLDER, ignore_errors=True)


def new_records(result: AuditResult, *, pool_sha256: str, options: Mapping[str, Any],
                benchmark_sha256: Mapping[str, str]) -> dict[str, AuditRecord]:
    """The records of the benchmarks this audit run covered (one ``audit_id`` for the run)."""
    shas = {b.benchmark: benchmark_sha256.get(b.benchmark) or b.sha256
            for b in result.benchmarks}
    run = audit_id(pool_sha256, options, shas)
    return {b.benchmark: AuditRecord(
        audit_id=run, pool_sha256=pool_sha256, pool_rows=result.pool_rows,
        options=dict(options), drops=drops_of(options), benchmark_sha256=shas[b.benchmark],
        n=b.n, n_kept=b.n_kept) for b in result.benchmarks}


def merge_results(old: AuditResult, new: AuditResult) -> AuditResult:
    """``new`` over ``old``: the benchmarks ``new`` covers (audited or found unavailable) come
    from ``new``, the others from ``old``; ``old``'s order first, then ``new``'s additions."""
    replaced = {b.benchmark for b in new.benchmarks} | {u.benchmark for u in new.unavailable}
    fresh = {b.benchmark: b for b in new.benchmarks}
    benches = [fresh.get(b.benchmark, b) for b in old.benchmarks
               if b.benchmark in fresh or b.benchmark not in replaced]
    benches += [b for b in new.benchmarks if b.benchmark not in {o.benchmark
                                                                 for o in old.benchmarks}]
    overlap = pl.concat([(new if b.benchmark in fresh else old).overlap
                         .filter(pl.col("benchmark") == b.benchmark) for b in benches]
                        or [new.overlap])
    deco = {b.benchmark: (new if b.benchmark in fresh else old).decontaminated[b.benchmark]
            for b in benches}
    unavailable = [u for u in old.unavailable if u.benchmark not in replaced]
    unavailable += list(new.unavailable)
    return replace(new, benchmarks=tuple(benches), overlap=overlap, decontaminated=deco,
                   unavailable=tuple(unavailable), titles={**old.titles, **new.titles})


def merged_records(previous: Mapping[str, AuditRecord], new: Mapping[str, AuditRecord],
                   result: AuditResult) -> dict[str, AuditRecord]:
    """Per benchmark of the merged ``result``: its new record, else its previous one."""
    return {b.benchmark: new.get(b.benchmark) or previous[b.benchmark]
            for b in result.benchmarks}
