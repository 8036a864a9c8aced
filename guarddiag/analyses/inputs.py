"""Reading the saved hand-off files the analysis step needs, once.

:func:`load_inputs` reads the predictions (``runs/predictions.parquet`` and
``runs/outside/*.parquet``), ``pool.parquet`` with its ``agreement.json``, the audit's
``summary.json``, the benchmark manifests, and the benchmark frames the SORRY-Bench analyses
need (categories, base prompt ids). Absent optional inputs become notes, never errors.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from guarddiag import files
from guarddiag import predictions as preds_mod
from guarddiag.audit.provenance import (
    FlagSource,
    check_flags_match_audit,
    merge_flag_sources,
    read_audit_records,
    read_flag_sources,
)
from guarddiag.data import BenchmarkManifest, load_benchmarks, load_manifests
from guarddiag.errors import GuarddiagError
from guarddiag.paths import AuditFolder, PoolFolder, RunsFolder
from guarddiag.sorry.taxonomy import SORRY_BENCHMARK, base_benchmark

FileRef = tuple[str, str]
"""(path, sha256) of one input file."""


@dataclass(frozen=True)
class ReportInputs:
    """Every saved input of the analysis step, read once."""

    predictions: pl.DataFrame = field(repr=False)
    prediction_files: tuple[FileRef, ...]
    pool: pl.DataFrame | None = field(repr=False)
    pool_file: FileRef | None
    agreement: Mapping[str, Any] | None
    agreement_file: FileRef | None
    audit_summary: Mapping[str, Any] | None = field(repr=False)
    audit_file: FileRef | None
    kinds: Mapping[str, str]
    titles: Mapping[str, str]
    manifest_sha256: Mapping[str, str | None]
    notes: tuple[str, ...] = ()
    derived_from: Mapping[str, str] = field(default_factory=dict)
    """Each derived (mutated) subset's base subset, from its manifest."""
    benchmark_frames: Mapping[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    """Frames (categories, base prompt ids) of the scored benchmarks the SORRY-Bench analyses
    read, in manifest order; only those available."""
    unavailable_benchmarks: tuple[str, ...] = ()
    """Benchmarks of those whose files are not there."""
    audit_overlap: pl.DataFrame | None = field(default=None, repr=False)
    """The audit's exact matches (``overlap.parquet``: benchmark, prompt_id, pool_id), or None."""
    audit_matches: pl.DataFrame | None = field(default=None, repr=False)
    """Every match of the audit (``overlap.parquet``: benchmark, prompt_id, pool_id, kind), or
    None without that file."""
    pool_sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per pool source, its row counts as the pool stage recorded them (``meta.json`` beside
    pool.parquet: read, sampled, kept); empty where that file is absent."""
    outside_definitions: Mapping[str, str] = field(default_factory=dict)
    """Per outside guard (run id ``guard/<name>``), what "unsafe" means for it, from
    ``runs/outside/<name>.meta.json``; guards that state none are absent."""
    flag_sources: Mapping[str, FlagSource] = field(default_factory=dict)
    """Per benchmark, the audit its ``survives_decontam`` flags came from, as the predictions
    files record it (:mod:`guarddiag.audit.provenance`); absent where none is recorded."""
    unrecorded_flag_files: tuple[str, ...] = ()
    """Predictions files that record no audit for their flags (written before these records,
    or by a tool that keeps none)."""
    outside_answers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per outside guard (run id), when and by which identity its answers were computed
    (:func:`read_outside_answers`)."""
    outside_own: pl.DataFrame | None = field(default=None, repr=False)
    """Per outside guard audited against its own training data: run_id, benchmark, prompt_id,
    survives_own_decontam (:func:`read_outside_own`); None when no guard was."""
    no_manifest: tuple[str, ...] = ()
    """Benchmarks scored earlier whose manifest is not found now: left out of the analyses."""
    run_meta: pl.DataFrame | None = field(default=None, repr=False)
    """Per scored run with a ``meta.json`` in the runs folder: size, parameters, checkpoint,
    training rows (:data:`RUN_META_SCHEMA`); None where no run
    folder has one (predictions copied without their runs)."""

    @property
    def scored(self) -> list[str]:
        """Benchmarks with predictions (not the pool's val split), in name order."""
        return sorted(set(self.predictions["benchmark"].to_list()) - {"pool_val"})

    @property
    def not_audited(self) -> list[str]:
        """Scored benchmarks no audit covers whose flags are therefore unknown (null
        ``survives_decontam``: the user's own), in name order."""
        null = self.predictions.filter(pl.col("survives_decontam").is_null())
        return sorted(set(null["benchmark"].to_list()) - {"pool_val"})

    @property
    def without_branches(self) -> list[str]:
        """Benchmarks only outside guards were scored on (no branch run): they get no call
        and no placement until ``guarddiag predict`` scores the branches on them."""
        by_kind = self.predictions.group_by("benchmark").agg(
            (pl.col("guard_kind") == "branch").any().alias("branch"))
        return sorted(set(by_kind.filter(~pl.col("branch"))["benchmark"].to_list())
                      - {"pool_val"})

    def mutated_subsets(self) -> list[str]:
        """Scored derived subsets whose base subset is scored too, in name order."""
        scored = self.scored
        return [b for b in scored if b in self.derived_from and self.derived_from[b] in scored]


class InputOptions(Protocol):
    """Where the inputs are (an :class:`~guarddiag.analyses.options.ReportOptions`)."""

    @property
    def runs_dir(self) -> Path: ...
    @property
    def pool_path(self) -> Path | None: ...
    @property
    def audit_dir(self) -> Path | None: ...
    @property
    def data_dir(self) -> Path | None: ...
    @property
    def derived_dir(self) -> Path | None: ...


def file_ref(path: Path) -> FileRef:
    return (str(path), files.sha256_file(path))


def _read_pool(pool_path: Path | None, notes: list[str]
               ) -> tuple[pl.DataFrame | None, FileRef | None, Any, FileRef | None]:
    if pool_path is None or not Path(pool_path).is_file():
        notes.append(f"pool {pool_path}: not found, so VAL, the pool statistics and the "
                     "validation-split overlap are omitted")
        return None, None, None, None
    pool_path = Path(pool_path)
    pool = files.read_table(pool_path)
    agreement = agreement_file = None
    agreement_path = PoolFolder(pool_path.parent).agreement
    if agreement_path.is_file():
        agreement = files.read_json(agreement_path)
        agreement_file = file_ref(agreement_path)
    return pool, file_ref(pool_path), agreement, agreement_file


def _read_audit(audit_dir: Path | None, notes: list[str]
                ) -> tuple[Mapping[str, Any] | None, FileRef | None]:
    summary_path = AuditFolder(Path(audit_dir)).summary if audit_dir is not None else None
    if summary_path is None or not summary_path.is_file():
        notes.append(f"audit {audit_dir}: no {AuditFolder.SUMMARY}, so the contamination table "
                     "is omitted and benchmark digests come from the manifests")
        return None, None
    summary = files.read_json(summary_path)
    if not isinstance(summary, dict):
        raise GuarddiagError(f"{summary_path}: expected a JSON object")
    return summary, file_ref(summary_path)


def _manifest_digest(m: BenchmarkManifest) -> str | None:
    digests = [f.sha256 for f in m.files if f.sha256]
    return ",".join(digests) if digests and len(digests) == len(m.files) else None


def _sorry_benchmark_ids(scored: list[str], derived_from: Mapping[str, str]) -> list[str]:
    """The benchmarks whose frames the SORRY-Bench analyses read: SORRY-Bench itself, the base
    benchmark of every scored subset (balance) and the scored mutated subsets (robustness)."""
    ids = {base_benchmark(b) for b in scored}
    if SORRY_BENCHMARK in scored:
        ids.add(SORRY_BENCHMARK)
    ids |= {b for b in scored if b in derived_from and derived_from[b] in scored}
    return sorted(ids)


def _read_benchmark_frames(ids: list[str], manifests: Mapping[str, BenchmarkManifest], *,
                           data_dir: str | os.PathLike[str] | None,
                           derived_dir: str | os.PathLike[str] | None
                           ) -> tuple[dict[str, pl.DataFrame], tuple[str, ...]]:
    wanted = [i for i in ids if i in manifests]
    if not wanted:
        return {}, ()
    bset = load_benchmarks(wanted, data_dir=data_dir, derived_dir=derived_dir)
    return dict(bset.frames), tuple(s.id for s in bset.unavailable)


def _read_overlap_origin(audit_dir: Path | None, pool_path: Path | None
                         ) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    """The audit's exact matches and the pool's per-source counts: where a benchmark's overlap
    comes from (:mod:`guarddiag.analyses.overlap_origin`)."""
    overlap = None
    if audit_dir is not None and AuditFolder(Path(audit_dir)).overlap.is_file():
        overlap = files.read_table(AuditFolder(Path(audit_dir)).overlap).filter(
            pl.col("kind") == "exact").select("benchmark", "prompt_id", "pool_id")
    meta_path = PoolFolder(Path(pool_path).parent).meta if pool_path is not None else None
    meta = files.read_json(meta_path) if meta_path is not None and meta_path.is_file() else {}
    sources = meta.get("sources") if isinstance(meta, dict) else None
    return overlap, dict(sources) if isinstance(sources, dict) else {}


def _read_matches(audit_dir: Path | None) -> pl.DataFrame | None:
    """Every match of the audit, of every kind (contrast pairs are read from them)."""
    if audit_dir is None or not AuditFolder(Path(audit_dir)).overlap.is_file():
        return None
    return files.read_table(AuditFolder(Path(audit_dir)).overlap).select(
        "benchmark", "prompt_id", "pool_id", "kind")


def _section(meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = meta.get(key)
    return value if isinstance(value, dict) else {}


def _meta_row(meta: Mapping[str, Any]) -> dict[str, Any]:
    model, spec, train = (_section(meta, k) for k in ("model", "spec", "train"))
    rows = train.get("n_rows", spec.get("train_rows"))
    kind = meta.get("kind", "branch")
    run_id = str(meta.get("run_id", ""))
    return {"run_id": run_id, "guard_kind": kind,
            "size": meta.get("size"),
            "branch": meta.get("branch", spec.get("name")),
            "n_params": model.get("n_params"), "checkpoint": model.get("checkpoint"),
            "train_rows": rows if isinstance(rows, int) else None,
            "distill_weight": _distill_weight(spec)}


def _distill_weight(spec: Mapping[str, Any]) -> float | None:
    """α of a distilling run (its spec's ``distill_weight``), else None."""
    routes, alpha = spec.get("routes"), spec.get("distill_weight")
    if not (isinstance(routes, list) and "distill" in routes):
        return None
    return float(alpha) if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) \
        else None


def read_outside_definitions(runs_dir: Path) -> dict[str, str]:
    """Each outside guard's operational definition, by run id, in name order."""
    out: dict[str, str] = {}
    for path in RunsFolder(Path(runs_dir)).outside_metas():
        meta = files.read_json(path)
        definition = meta.get("definition") if isinstance(meta, dict) else None
        if isinstance(definition, str) and definition and isinstance(meta.get("run_id"), str):
            out[meta["run_id"]] = definition
    return out


def read_outside_answers(runs_dir: Path) -> dict[str, dict[str, Any]]:
    """Per outside guard (run id, name order): the first and last time its answers were asked
    (UTC), its identity digest, its version and the function or model it names."""
    out: dict[str, dict[str, Any]] = {}
    for path in RunsFolder(Path(runs_dir)).outside_metas():
        meta = files.read_json(path)
        if not (isinstance(meta, dict) and isinstance(meta.get("run_id"), str)):
            continue
        computed = _section(meta, "answers_computed")
        adapter = _section(meta, "adapter")
        what = adapter.get("function") or adapter.get("model") or adapter.get("file") \
            or adapter.get("guardrail")
        out[meta["run_id"]] = {
            "first": computed.get("first"), "last": computed.get("last"),
            "fingerprint": meta.get("fingerprint"), "version": meta.get("version"),
            "adapter": adapter.get("adapter"), "source": str(what) if what else None,
            "model_sha256": adapter.get("model_sha256") or adapter.get("sha256"),
            "training_data": (_section(meta, "training_data").get("file")),
            "training_rows": (_section(meta, "training_data").get("rows"))}
    return out


def read_outside_own(runs_dir: Path) -> pl.DataFrame | None:
    """The :data:`~guarddiag.predictions.OWN_DECONTAM` flags of every outside guard that has
    them (non-null rows)."""
    parts = []
    for path in RunsFolder(Path(runs_dir)).outside_tables():
        frame = files.read_table(path)
        if preds_mod.OWN_DECONTAM in frame.columns:
            parts.append(frame.select("run_id", "benchmark", "prompt_id",
                                      pl.col(preds_mod.OWN_DECONTAM).cast(pl.Boolean))
                         .filter(pl.col(preds_mod.OWN_DECONTAM).is_not_null()))
    parts = [p for p in parts if p.height]
    return pl.concat(parts) if parts else None


def _drop_unknown_benchmarks(predictions: pl.DataFrame,
                             manifests: Mapping[str, BenchmarkManifest], notes: list[str]
                             ) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """Rows of benchmarks whose manifest is gone (another user manifests folder, a removed
    file) are left out with a note, never a failure; ``guarddiag runs prune`` removes them."""
    gone = sorted(set(predictions["benchmark"].to_list()) - set(manifests) - {"pool_val"})
    for bench in gone:
        notes.append(f"scored earlier, manifest not found: {bench} (left out of the analyses; "
                     f"`guarddiag runs prune --benchmarks {bench}` removes its rows)")
    if not gone:
        return predictions, ()
    return predictions.filter(~pl.col("benchmark").is_in(gone)), tuple(gone)


RUN_META_SCHEMA: dict[str, type[pl.DataType]] = {
    "run_id": pl.String, "guard_kind": pl.String, "size": pl.String, "branch": pl.String,
    "n_params": pl.Int64, "checkpoint": pl.String, "train_rows": pl.Int64,
    "distill_weight": pl.Float64}
"""One row per scored run with a meta.json: ``n_params`` (null for the TF-IDF baselines, which
count features, not parameters), ``checkpoint`` (null = random init), ``train_rows`` (rows the
run was trained on: the training log's ``n_rows``, else the spec's ``train_rows``),
``distill_weight`` (α of a distilling run, else null)."""


def read_run_meta(runs_dir: Path, run_ids: set[str]) -> pl.DataFrame | None:
    """The provenance fields of each scored run's ``meta.json`` (``<size>/<branch>/seed=<s>``
    and ``baseline/<name>/seed=<s>`` folders), in run-id order; None where there are none."""
    rows = []
    for path in sorted(Path(runs_dir).glob("*/*/seed=*/meta.json")):
        meta = files.read_json(path)
        if isinstance(meta, dict) and meta.get("run_id") in run_ids:
            rows.append(_meta_row(meta))
    return pl.DataFrame(rows, schema=RUN_META_SCHEMA) if rows else None


def load_inputs(options: InputOptions) -> ReportInputs:
    """Read every saved input of the analysis step; absent optional inputs become notes."""
    notes: list[str] = []
    run_files = preds_mod.run_files(options.runs_dir)
    predictions = preds_mod.load_runs(options.runs_dir)
    recorded = {str(f): read_flag_sources(f) for f in run_files}
    flag_sources = merge_flag_sources({k: v for k, v in recorded.items() if v is not None})
    pool, pool_file, agreement, agreement_file = _read_pool(options.pool_path, notes)
    summary, audit_file = _read_audit(options.audit_dir, notes)
    if summary is not None and flag_sources and options.audit_dir is not None:
        check_flags_match_audit(flag_sources, read_audit_records(options.audit_dir),
                                options.audit_dir)
    audit_overlap, pool_sources = _read_overlap_origin(options.audit_dir, options.pool_path)
    manifests = load_manifests(derived_dir=options.derived_dir, data_dir=options.data_dir)
    predictions, no_manifest = _drop_unknown_benchmarks(predictions, manifests, notes)
    if predictions.height == 0:
        raise GuarddiagError(f"{options.runs_dir}: every scored benchmark's manifest is gone "
                             f"({', '.join(no_manifest)}); nothing to report")
    derived_from = {k: m.derived_from for k, m in manifests.items()
                    if m.derived and m.derived_from}
    scored = sorted(set(predictions["benchmark"].to_list()) - {"pool_val"})
    frames, unavailable = _read_benchmark_frames(
        _sorry_benchmark_ids(scored, derived_from), manifests, data_dir=options.data_dir,
        derived_dir=options.derived_dir)
    return ReportInputs(
        predictions=predictions, prediction_files=tuple(file_ref(p) for p in run_files),
        pool=pool, pool_file=pool_file, agreement=agreement, agreement_file=agreement_file,
        audit_summary=summary, audit_file=audit_file,
        kinds={k: m.kind for k, m in manifests.items()},
        titles={k: m.title for k, m in manifests.items()},
        manifest_sha256={k: _manifest_digest(m) for k, m in manifests.items()},
        notes=tuple(notes), derived_from=derived_from, benchmark_frames=frames,
        unavailable_benchmarks=unavailable, audit_overlap=audit_overlap,
        audit_matches=_read_matches(options.audit_dir),
        pool_sources=pool_sources,
        run_meta=read_run_meta(options.runs_dir, set(predictions["run_id"].to_list())),
        outside_definitions=read_outside_definitions(options.runs_dir),
        flag_sources=flag_sources,
        unrecorded_flag_files=tuple(k for k, v in recorded.items() if v is None),
        outside_answers=read_outside_answers(options.runs_dir), no_manifest=no_manifest,
        outside_own=read_outside_own(options.runs_dir))
