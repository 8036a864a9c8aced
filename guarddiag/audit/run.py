"""``audit_pool``: audit a pool file against benchmark subsets and write the audit folder.

A rerun with the same pool, benchmark files, options and code finds its ``meta.json`` cache key
and returns the saved result instead of recomputing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from guarddiag import data, files
from guarddiag.audit.frames import audit_frames, check_options
from guarddiag.audit.outputs import load_if_current, write_audit
from guarddiag.audit.read import read_pool
from guarddiag.audit.result import (
    DEFAULT_SHORT_THRESHOLD,
    DEFAULT_SHORT_WORDS,
    DEFAULT_THRESHOLD,
    FORMAT_VERSION,
    AuditResult,
    UnavailableBenchmark,
)
from guarddiag.errors import GuarddiagError
from guarddiag.progress import say

__all__ = ["audit_pool"]


def audit_pool(pool: str | Path, *, text_column: str = "text",
               id_column: str | None = "prompt_id", benchmarks: str | Sequence[str] = "all",
               data_dir: str | Path | None = None, derived_dir: str | Path | None = None,
               near_dup: bool = False, threshold: float = DEFAULT_THRESHOLD,
               short_words: int = DEFAULT_SHORT_WORDS,
               short_threshold: float = DEFAULT_SHORT_THRESHOLD,
               drop_near: bool = False, out_dir: str | Path, force: bool = False,
               figure: bool = True, templates: bool = False,
               drop_template: bool = False) -> AuditResult:
    """Audit a pool file against benchmark subsets and write the results to ``out_dir``.

    ``benchmarks`` is ``"all"``, ``"study"``, a comma-separated string or a list of subset ids;
    subsets whose files are absent are listed in ``AuditResult.unavailable``. A rerun with the
    same pool, benchmark files and options returns the saved result (``force=True`` recomputes).
    ``templates=True`` also counts template overlaps (:mod:`guarddiag.audit.template`);
    ``drop_template=True`` drops them from the decontaminated lists.

    Example (CPU, seconds)::

        audit_pool("work/pool/pool.parquet", near_dup=True, out_dir="work/audit")
    """
    pool = Path(pool)
    out_dir = Path(out_dir)
    # The drop rules in the command line's words first, then every option rule before any I/O.
    if drop_near and not near_dup:
        raise GuarddiagError("--drop-near needs --near-dup: near duplicates are only found "
                             "with --near-dup")
    if drop_template and not templates:
        raise GuarddiagError("--drop-template needs --templates: template overlaps are only "
                             "found with --templates")
    threshold, short_threshold = check_options(
        threshold=threshold, short_threshold=short_threshold, short_words=short_words,
        near_dup=near_dup, drop_near=drop_near, templates=templates, drop_template=drop_template)
    if not pool.is_file():
        raise GuarddiagError(f"{pool}: pool file not found")
    bench_set = data.load_benchmarks(benchmarks, data_dir=data_dir, derived_dir=derived_dir)
    unavailable = tuple(UnavailableBenchmark(benchmark=s.id, reason=_reason(s))
                        for s in bench_set.unavailable)
    pool_sha = files.sha256_file(pool)
    options = {"text_column": text_column, "id_column": id_column, "near_dup": near_dup,
               "threshold": threshold, "drop_near": drop_near, "short_words": short_words,
               "short_threshold": short_threshold}
    if templates:
        # Only when on: an audit without templates keeps the cache key and meta.json it had.
        options |= {"templates": True, "drop_template": drop_template}
    key = _cache_key(pool_sha, bench_set.sha256, list(bench_set.frames), unavailable, options)
    if not force:
        cached = load_if_current(out_dir, key)
        if cached is not None:
            say(f"audit: {out_dir} is up to date with this pool and these benchmarks "
                "(use --force to recompute)")
            return cached

    ids, texts = read_pool(pool, text_column=text_column, id_column=id_column)
    result = audit_frames(ids, texts, bench_set.frames, near_dup=near_dup, threshold=threshold,
                          short_words=short_words, short_threshold=short_threshold,
                          drop_near=drop_near, sha256=bench_set.sha256, unavailable=unavailable,
                          templates=templates, drop_template=drop_template)
    manifests = data.load_manifests(derived_dir=derived_dir, data_dir=data_dir)
    result = replace(result, titles={k: m.title for k, m in manifests.items()})
    write_audit(result, out_dir, figure=figure,
                meta={"inputs": {"pool": pool_sha, **{f"benchmark:{k}": v
                                                      for k, v in bench_set.sha256.items()}},
                      "pool_path": str(pool), "options": options, "cache_key": key})
    return replace(result, out_dir=out_dir)


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

