"""Scoring: every finished run on every available benchmark subset, into one predictions table.

``guarddiag predict`` writes ``work/runs/predictions.parquet`` (schema:
:mod:`guarddiag.predictions`): one row per (run, benchmark, prompt), for every finished branch
run and the TF-IDF baseline, on every available benchmark subset and on the pool's val split
(benchmark ``pool_val``). Batches are sorted by length and padded per batch, under
``torch.inference_mode``, on ``--device`` (CUDA in bf16 autocast when present; the CPU in
float32, as always, otherwise). Scoring is incremental: a run's scores are kept beside it
(``scores.parquet`` + ``scores.json``) and only benchmarks whose inputs changed are re-scored;
benchmarks scored earlier but outside this call's selection are kept, not dropped.
``survives_decontam`` of a benchmark changes only with an audit that covers it, and
``predictions.decontam.json`` records where each benchmark's flags came from
(:func:`guarddiag.audit.provenance.flag_predictions`).

Modules: :mod:`~guarddiag.predict.score` (score texts with a run; one subset's scores),
:mod:`~guarddiag.predict.options` (:class:`PredictOptions`, declared once),
:mod:`~guarddiag.predict.runner` (``predict_runs``: the predictions table),
:mod:`~guarddiag.predict.baseline` (the TF-IDF guards); ``bench predict`` is
:mod:`guarddiag.bench.predict`. The per-run score cache is :class:`guarddiag.runs.ScoreCache`;
the class logits come from :func:`guarddiag.model.guard_logits`.

Example::

    guarddiag predict --runs-dir work/runs --pool work/pool/pool.parquet --audit-dir work/audit
"""

from __future__ import annotations

from guarddiag.predict.baseline import BaselineSpec, TfidfGuard, default_baselines, fit_baseline
from guarddiag.predict.options import BATCH_SIZE, PredictOptions
from guarddiag.predict.runner import PredictResult, RunScoring, predict_runs
from guarddiag.predict.score import POOL_VAL, ScoringInput, score_frame, score_texts

__all__ = [
    "BATCH_SIZE",
    "POOL_VAL",
    "BaselineSpec",
    "PredictOptions",
    "PredictResult",
    "RunScoring",
    "ScoringInput",
    "TfidfGuard",
    "default_baselines",
    "fit_baseline",
    "predict_runs",
    "score_frame",
    "score_texts",
]
