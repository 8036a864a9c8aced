"""``guarddiag predict``: every finished run and the TF-IDF baselines on every subset, into one
predictions table (schema: :mod:`guarddiag.predictions`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from guarddiag import data, predictions
from guarddiag.audit.provenance import FlagSource, flag_predictions, write_flag_sources
from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file, write_parquet
from guarddiag.labels import CLASSES, LOOSE, PROB_COLUMNS
from guarddiag.model.device import describe_device, pick_device
from guarddiag.model.logits import run_scorer, softmax
from guarddiag.model.threads import auto_threads, torch_threads
from guarddiag.paths import RunsFolder
from guarddiag.pool.table import Pool, read_pool
from guarddiag.predict.baseline import default_baselines, score_baselines, teacher_rows_of_runs
from guarddiag.predict.options import PredictOptions
from guarddiag.predict.score import POOL_VAL, ScoringInput, score_frame
from guarddiag.progress import progress
from guarddiag.roles import ROLE_COLUMNS, BranchRoles
from guarddiag.runs import (
    META_FILE,
    MODEL_FILE,
    RunMeta,
    ScoreCache,
    finished_runs,
    read_run_meta,
)
from guarddiag.typed import validate

logger = logging.getLogger(__name__)


def scoring_inputs(*, pool_path: Path, benchmarks: str | Sequence[str], data_dir: Path | None,
            derived_dir: Path | None) -> tuple[list[ScoringInput], list[str], Pool]:
    """The selected benchmark subsets that are available, the ids of those that are not, and
    the pool (its val split is scored as benchmark ``pool_val``)."""
    out: list[ScoringInput] = []
    unavailable: list[str] = []
    ids = benchmarks if isinstance(benchmarks, str) else list(benchmarks)
    if ids != "none" and ids != []:
        bset = data.load_benchmarks(ids, data_dir=data_dir, derived_dir=derived_dir)
        for name, frame in bset.frames.items():
            out.append(ScoringInput(name, [str(x) for x in frame["prompt_id"].to_list()],
                                    frame["text"].to_list(), bset.sha256[name]))
        unavailable = [s.id for s in bset.unavailable]
    pool = read_pool(pool_path)
    val = pool.split("val")
    out.append(ScoringInput(POOL_VAL, val["prompt_id"].to_list(), val["text"].to_list(),
                            pool.sha256))
    return out, unavailable, pool


@dataclass(frozen=True)
class RunScoring:
    run_id: str
    guard_kind: str
    n_scored: int
    """Prompts scored in this call (0 when every benchmark came from the cache)."""
    n_total: int
    seconds: float


@dataclass(frozen=True)
class PredictResult:
    path: Path
    n_rows: int
    runs: tuple[RunScoring, ...]
    benchmarks: tuple[str, ...]
    unavailable: tuple[str, ...]
    decontam_note: str
    flag_sources: Mapping[str, FlagSource] = field(default_factory=dict)
    """Per benchmark, the audit its ``survives_decontam`` flags came from (also written beside
    the table, :func:`guarddiag.audit.provenance.flags_path`)."""

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([asdict(r) for r in self.runs])


def predict_runs(options: PredictOptions | None = None, **fields: Any) -> PredictResult:
    """Score every finished run (and the TF-IDF baseline) into one predictions table.

    ``options`` (:class:`~guarddiag.predict.options.PredictOptions`), or its fields by name
    (``predict_runs(runs_dir=..., pool_path=...)``), validated as one model; fields given by
    name override those of ``options``."""
    if options is None or fields:
        base = {} if options is None else options.model_dump(exclude_unset=True)
        options = validate(PredictOptions, {**base, **fields}, where="predict")
    o = options
    runs_dir, device, benchmarks = o.runs_dir, o.device, o.benchmarks
    data_dir, derived_dir, threads = o.data_dir, o.derived_dir, o.threads
    batch_size, baseline, audit_dir = o.batch_size, o.baseline, o.audit_dir
    dev = pick_device(device)
    out_path = o.out_path if o.out_path is not None else RunsFolder(runs_dir).predictions
    run_dirs = finished_runs(runs_dir)
    if not run_dirs:
        raise GuarddiagError(f"{runs_dir}: no finished runs; run `guarddiag train` first")
    inputs, unavailable, pool = scoring_inputs(
        pool_path=o.pool_path, benchmarks=benchmarks, data_dir=data_dir,
        derived_dir=derived_dir)
    n_prompts = sum(len(i.texts) for i in inputs)
    logger.info(f"scoring {len(run_dirs)} run(s) on {len(inputs)} subset(s), "
                f"{n_prompts} prompts each"
                + (f"; unavailable: {', '.join(unavailable)}" if unavailable else ""))

    logger.info(describe_device(dev, spec=device))
    metas = {d: read_run_meta(d) for d in run_dirs}
    if threads is None:
        threads = auto_threads(m.size for m in metas.values())
    with torch_threads(threads):
        frames, report = _score_runs(run_dirs, metas, inputs, batch_size=batch_size,
                                     device=dev)
    if baseline:
        rows = teacher_rows_of_runs(list(metas.values()))
        for run_id, info, scores, n_scored, secs in score_baselines(
                pool=pool, inputs=inputs, runs_dir=runs_dir,
                specs=default_baselines(rows) if rows else None):
            frames.append(_with_run_columns(scores, run_id=run_id, guard_kind="baseline",
                                            **info))
            report.append(RunScoring(run_id, "baseline", n_scored, n_prompts, secs))

    table = pl.concat(frames)
    kept = sorted(set(table["benchmark"].to_list()) - {i.benchmark for i in inputs})
    if kept:  # the score caches keep every subset scored before: a selection adds, never drops
        logger.info(f"kept the rows of {len(kept)} subset(s) scored earlier, outside this "
                    f"selection: {', '.join(kept)}")
    manifests = data.load_manifests(derived_dir=derived_dir, data_dir=data_dir)
    bases = data.derived_bases(manifests)
    # A flag changes only with its own audit: benchmarks the audit does not cover keep what
    # the table at out_path holds (read before it is rewritten).
    flagged = flag_predictions(
        table, audit_dir=audit_dir, selected=[i.benchmark for i in inputs],
        benchmark_sha256={i.benchmark: i.sha256 for i in inputs}, derived_from=bases,
        previous_file=out_path, unaudited=(POOL_VAL,), user=data.user_benchmarks(manifests))
    table = predictions.validate(flagged.table, source=str(out_path))
    table = table.sort(["run_id", "benchmark", "prompt_id"])
    write_parquet(table, out_path)
    write_flag_sources(out_path, flagged.sources)
    return PredictResult(out_path, table.height, tuple(report),
                         tuple(i.benchmark for i in inputs), tuple(unavailable), flagged.note,
                         flagged.sources)


def _score_runs(run_dirs: list[Path], metas: dict[Path, RunMeta],
                inputs: list[ScoringInput], *, batch_size: int,
                device: torch.device | None = None
                ) -> tuple[list[pl.DataFrame], list[RunScoring]]:
    n_prompts = sum(len(i.texts) for i in inputs)
    frames: list[pl.DataFrame] = []
    report: list[RunScoring] = []
    for run_dir in run_dirs:
        t0 = time.monotonic()
        meta = metas[run_dir]
        if meta.roles is None:
            raise GuarddiagError(
                f"{run_dir / META_FILE}: no roles (trained before branch roles existed); run "
                f"`guarddiag train` again: finished runs are not retrained, only get their roles")
        scores, n_scored = fill_score_cache(run_dir, inputs, batch_size=batch_size,
                                            device=device, desc=meta.run_id)
        frames.append(_with_run_columns(
            scores, run_id=meta.run_id, guard_kind="branch", branch=meta.branch,
            size=meta.size, seed=meta.seed, label_policy=meta.label_policy,
            roles=meta.roles))
        report.append(RunScoring(meta.run_id, "branch", n_scored, n_prompts,
                                 round(time.monotonic() - t0, 2)))
    return frames, report


def fill_score_cache(run_dir: Path, inputs: list[ScoringInput], *, batch_size: int,
                     device: torch.device | None = None, desc: str = ""
                     ) -> tuple[pl.DataFrame, int]:
    """Score ``inputs`` not yet in the run's score cache and save it: (every subset's scores,
    prompts scored now). A sweep fans this out over runs; ``predict_runs`` then only reads."""
    cache = ScoreCache.open(run_dir, sha256_file(run_dir / MODEL_FILE))
    todo = cache.missing(inputs)
    if todo:
        scorer = run_scorer(run_dir, batch_size=batch_size, device=device)
        bar = progress(total=sum(len(i.texts) for i in todo), desc=desc, unit="ex")
        for inp in todo:
            probs = softmax(scorer(inp.texts))
            cache.put(inp, score_frame(inp, probs))
            bar.update(len(inp.texts))
        bar.close()
    return cache.save(), sum(len(i.texts) for i in todo)


def _with_run_columns(scores: pl.DataFrame, *, run_id: str, guard_kind: str, branch: str,
                      size: str, seed: int | None, label_policy: str,
                      roles: BranchRoles | None = None) -> pl.DataFrame:
    """The scores with the run's columns; ``roles`` fills the role columns (null without)."""
    probs = scores.select(PROB_COLUMNS).to_numpy()
    unsafe_cols = [c for c, name in zip(PROB_COLUMNS, CLASSES, strict=True)
                   if LOOSE.is_unsafe(name)]
    pred = np.array(CLASSES, dtype=object)[probs.argmax(axis=1)] if len(probs) else []
    return scores.with_columns(
        pl.lit(run_id).alias("run_id"), pl.lit(guard_kind).alias("guard_kind"),
        pl.lit(branch).alias("branch"), pl.lit(size).alias("size"),
        pl.lit(seed, dtype=pl.Int64).alias("seed"),
        pl.lit(label_policy).alias("label_policy"),
        *(pl.lit(value, dtype=pl.String).alias(name) for name, value in
          (roles.model_dump() if roles is not None
           else dict.fromkeys(ROLE_COLUMNS)).items()),
        pl.sum_horizontal([pl.col(c) for c in unsafe_cols]).clip(0.0, 1.0).alias("p_unsafe"),
        pl.Series("pred_class", list(pred), dtype=pl.String),
        pl.lit("ok").alias("status"))
