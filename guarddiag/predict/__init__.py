"""Scoring: every finished run on every available benchmark subset, into one predictions table.

``guarddiag predict`` writes ``work/runs/predictions.parquet`` (schema:
:mod:`guarddiag.predictions`): one row per (run, benchmark, prompt), for every finished branch
run and the TF-IDF baseline, on every available benchmark subset and on the pool's val split
(benchmark ``pool_val``). Batches are sorted by length and padded per batch, under
``torch.inference_mode``. Scoring is incremental: a run's scores are kept beside it
(``scores.parquet`` + ``scores.json``) and only benchmarks whose inputs changed are re-scored;
benchmarks scored earlier but outside this call's selection are kept, not dropped.

Example::

    guarddiag predict --runs-dir work/runs --pool work/pool/pool.parquet --audit-dir work/audit
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE, PROB_COLUMNS
from guarddiag.model import (
    MODEL_FILE,
    LoadedGuard,
    length_sorted_batches,
    load_guard,
    pad_batch,
)
from guarddiag.progress import progress, say

POOL_VAL = "pool_val"
"""Benchmark id of the pool's val split in the predictions table."""
SCORES_FILE = "scores.parquet"
SCORES_META = "scores.json"


# ============================================================================ scoring

def guard_logits(guard: LoadedGuard, texts: Sequence[str], *, batch_size: int = 64,
                 bucketed: bool = True, max_length: int | None = None) -> np.ndarray:
    """Class logits [n, 4] in input order.

    ``bucketed`` sorts prompts by token length and pads each batch to its longest prompt;
    ``bucketed=False`` keeps input order and pads every batch to ``max_length`` (only for the
    ``bench predict`` contrast).
    """
    if batch_size < 1:
        raise GuarddiagError(f"batch size must be at least 1, got {batch_size}")
    max_length = max_length or guard.max_length
    ids = guard.tokenizer.encode_ids(list(texts), max_length=max_length)
    out = np.zeros((len(ids), len(CLASSES)), dtype=np.float32)
    if bucketed:
        batches = length_sorted_batches([len(x) for x in ids], batch_size)
    else:
        batches = [list(range(i, min(i + batch_size, len(ids))))
                   for i in range(0, len(ids), batch_size)]
    model = guard.model
    model.eval()
    with torch.inference_mode():
        for idx in batches:
            x, mask = pad_batch([ids[i] for i in idx], pad_id=guard.tokenizer.pad_id,
                                length=None if bucketed else max_length)
            logits = model(x, mask, with_span=False).class_logits
            out[idx] = logits.float().numpy()
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def score_texts(run_dir: str | Path, texts: Sequence[str], *, batch_size: int = 64
                ) -> np.ndarray:
    """Class probabilities [n, 4] (labels.CLASSES order) of a finished run for ``texts``."""
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise GuarddiagError(f"texts[{i}]: empty or non-string text")
    return softmax(guard_logits(load_guard(run_dir), texts, batch_size=batch_size))


# ============================================================================ inputs

@dataclass(frozen=True)
class ScoringInput:
    """One benchmark (or the pool's val split) to score: ids, texts and a digest."""

    benchmark: str
    prompt_ids: list[str]
    texts: list[str]
    sha256: str


def _inputs(*, pool_path: Path, benchmarks: str | Sequence[str], data_dir: Path | None,
            derived_dir: Path | None) -> tuple[list[ScoringInput], list[str], Any]:
    from guarddiag.train import read_pool

    out: list[ScoringInput] = []
    unavailable: list[str] = []
    ids = benchmarks if isinstance(benchmarks, str) else list(benchmarks)
    if ids != "none" and ids != []:
        from guarddiag.data import load_benchmarks

        bset = load_benchmarks(ids, data_dir=data_dir, derived_dir=derived_dir)
        for name, frame in bset.frames.items():
            out.append(ScoringInput(name, [str(x) for x in frame["prompt_id"].to_list()],
                                    frame["text"].to_list(), bset.sha256[name]))
        unavailable = [s.id for s in bset.unavailable]
    pool = read_pool(pool_path)
    val = pool.split("val")
    out.append(ScoringInput(POOL_VAL, val["prompt_id"].to_list(), val["text"].to_list(),
                            pool.sha256))
    return out, unavailable, pool


# ============================================================================ per-run cache

@dataclass
class ScoreCache:
    """One scorer's scores on disk (``scores.parquet`` + ``scores.json`` in its run folder),
    valid for one scorer ``key`` (the model's sha256, or the baseline's spec and pool) and,
    per subset, for the subset's sha256.

    Subsets outside the current selection stay in the cache, and so in predictions.parquet:
    ``predict --benchmarks X`` adds X without dropping what was scored before."""

    folder: Path
    key: str
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    shas: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, folder: Path, key: str) -> ScoreCache:
        from guarddiag.files import read_json

        cache = cls(folder, key)
        meta_path, scores_path = folder / SCORES_META, folder / SCORES_FILE
        if meta_path.is_file() and scores_path.is_file():
            meta = read_json(meta_path)
            if meta.get("key") == key:
                frame = pl.read_parquet(scores_path)
                for bench, sha in meta.get("inputs", {}).items():
                    cache.frames[bench] = frame.filter(pl.col("benchmark") == bench)
                    cache.shas[bench] = sha
        return cache

    def missing(self, inputs: list[ScoringInput]) -> list[ScoringInput]:
        """The inputs not yet scored, or scored on other prompts than they hold now."""
        return [inp for inp in inputs
                if self.shas.get(inp.benchmark) != inp.sha256
                or self.frames[inp.benchmark].height != len(inp.prompt_ids)]

    def put(self, inp: ScoringInput, frame: pl.DataFrame) -> None:
        self.frames[inp.benchmark] = frame
        self.shas[inp.benchmark] = inp.sha256

    def save(self) -> pl.DataFrame:
        """Write the cache; returns every subset's scores (sorted by subset)."""
        from guarddiag.files import write_json, write_parquet

        order = sorted(self.frames)
        frame = pl.concat([self.frames[b] for b in order]) if order else _empty_scores()
        write_parquet(frame, self.folder / SCORES_FILE)
        write_json({"key": self.key, "inputs": {b: self.shas[b] for b in order}},
                   self.folder / SCORES_META)
        return frame


def _empty_scores() -> pl.DataFrame:
    return pl.DataFrame(schema={"benchmark": pl.String, "prompt_id": pl.String,
                                **dict.fromkeys(PROB_COLUMNS, pl.Float64)})


def _score_frame(inp: ScoringInput, probs: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame({"benchmark": [inp.benchmark] * len(inp.prompt_ids),
                         "prompt_id": inp.prompt_ids,
                         **{c: probs[:, j] for j, c in enumerate(PROB_COLUMNS)}},
                        schema={"benchmark": pl.String, "prompt_id": pl.String,
                                **dict.fromkeys(PROB_COLUMNS, pl.Float64)})


# ============================================================================ predict

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

    def to_frame(self) -> pl.DataFrame:
        from dataclasses import asdict

        return pl.DataFrame([asdict(r) for r in self.runs])


def predict_runs(*, runs_dir: str | Path, pool_path: str | Path,
                 audit_dir: str | Path | None = None, benchmarks: str | Sequence[str] = "all",
                 data_dir: str | Path | None = None, derived_dir: str | Path | None = None,
                 out_path: str | Path | None = None, batch_size: int = 64,
                 baseline: bool = True, threads: int | None = None) -> PredictResult:
    """Score every finished run (and the TF-IDF baseline) into one predictions table.

    ``threads``: torch intra-op threads (None: 1 when every run is a CPU size, see
    :func:`guarddiag.model.auto_threads`)."""
    from guarddiag import predictions
    from guarddiag.files import write_parquet
    from guarddiag.model import auto_threads, torch_threads
    from guarddiag.train import finished_runs

    runs_dir = Path(runs_dir)
    out_path = Path(out_path) if out_path is not None else runs_dir / "predictions.parquet"
    run_dirs = finished_runs(runs_dir)
    if not run_dirs:
        raise GuarddiagError(f"{runs_dir}: no finished runs; run `guarddiag train` first")
    inputs, unavailable, pool = _inputs(
        pool_path=Path(pool_path), benchmarks=benchmarks,
        data_dir=Path(data_dir) if data_dir else None,
        derived_dir=Path(derived_dir) if derived_dir else None)
    n_prompts = sum(len(i.texts) for i in inputs)
    say(f"scoring {len(run_dirs)} run(s) on {len(inputs)} subset(s), {n_prompts} prompts each"
        + (f"; unavailable: {', '.join(unavailable)}" if unavailable else ""))

    metas = {d: _read_meta(d) for d in run_dirs}
    if threads is None:
        threads = auto_threads(m["size"] for m in metas.values())
    with torch_threads(threads):
        frames, report = _score_runs(run_dirs, metas, inputs, batch_size=batch_size)
    if baseline:
        from guarddiag.predict.baseline import score_baselines

        for run_id, info, scores, n_scored, secs in score_baselines(
                pool=pool, inputs=inputs, runs_dir=runs_dir):
            frames.append(_with_run_columns(scores, run_id=run_id, guard_kind="baseline",
                                            **info))
            report.append(RunScoring(run_id, "baseline", n_scored, n_prompts, secs))

    table = pl.concat(frames)
    decontam, note = _decontam(audit_dir)
    table = _add_decontam(table, decontam)
    table = predictions.validate(table, source=str(out_path))
    table = table.sort(["run_id", "benchmark", "prompt_id"])
    write_parquet(table, out_path)
    return PredictResult(out_path, table.height, tuple(report),
                         tuple(i.benchmark for i in inputs), tuple(unavailable), note)


def _score_runs(run_dirs: list[Path], metas: dict[Path, dict[str, Any]],
                inputs: list[ScoringInput], *, batch_size: int
                ) -> tuple[list[pl.DataFrame], list[RunScoring]]:
    from guarddiag.files import sha256_file

    n_prompts = sum(len(i.texts) for i in inputs)
    frames: list[pl.DataFrame] = []
    report: list[RunScoring] = []
    for run_dir in run_dirs:
        t0 = time.monotonic()
        meta = metas[run_dir]
        cache = ScoreCache.open(run_dir, sha256_file(run_dir / MODEL_FILE))
        todo = cache.missing(inputs)
        if todo:
            guard = load_guard(run_dir)
            bar = progress(total=sum(len(i.texts) for i in todo), desc=meta["run_id"],
                           unit="ex")
            for inp in todo:
                probs = softmax(guard_logits(guard, inp.texts, batch_size=batch_size))
                cache.put(inp, _score_frame(inp, probs))
                bar.update(len(inp.texts))
            bar.close()
        scores = cache.save()
        frames.append(_with_run_columns(
            scores, run_id=meta["run_id"], guard_kind="branch", branch=meta["branch"],
            size=meta["size"], seed=meta["seed"], label_policy=meta["label_policy"]))
        report.append(RunScoring(meta["run_id"], "branch", sum(len(i.texts) for i in todo),
                                 n_prompts, round(time.monotonic() - t0, 2)))
    return frames, report


def _read_meta(run_dir: Path) -> dict[str, Any]:
    from guarddiag.files import read_json

    meta = read_json(run_dir / "meta.json")
    for key in ("run_id", "branch", "size", "seed", "label_policy"):
        if key not in meta:
            raise GuarddiagError(f'{run_dir / "meta.json"} field "{key}": missing')
    return meta


def _with_run_columns(scores: pl.DataFrame, *, run_id: str, guard_kind: str, branch: str,
                      size: str, seed: int | None, label_policy: str) -> pl.DataFrame:
    probs = scores.select(PROB_COLUMNS).to_numpy()
    unsafe_cols = [c for c, name in zip(PROB_COLUMNS, CLASSES, strict=True)
                   if LOOSE.is_unsafe(name)]
    pred = np.array(CLASSES, dtype=object)[probs.argmax(axis=1)] if len(probs) else []
    return scores.with_columns(
        pl.lit(run_id).alias("run_id"), pl.lit(guard_kind).alias("guard_kind"),
        pl.lit(branch).alias("branch"), pl.lit(size).alias("size"),
        pl.lit(seed, dtype=pl.Int64).alias("seed"),
        pl.lit(label_policy).alias("label_policy"),
        pl.sum_horizontal([pl.col(c) for c in unsafe_cols]).clip(0.0, 1.0).alias("p_unsafe"),
        pl.Series("pred_class", list(pred), dtype=pl.String),
        pl.lit("ok").alias("status"))


def _decontam(audit_dir: str | Path | None) -> tuple[dict[str, frozenset[str]] | None, str]:
    if audit_dir is None or not Path(audit_dir).is_dir():
        note = (f"no audit folder at {audit_dir}; survives_decontam is True everywhere "
                f"(run `guarddiag audit` for decontaminated scores)")
        say(note)
        return None, note
    from guarddiag.audit import load_decontaminated

    found = load_decontaminated(audit_dir)
    return found, f"survives_decontam from {audit_dir} ({len(found)} benchmark lists)"


def _add_decontam(table: pl.DataFrame, decontam: dict[str, frozenset[str]] | None
                  ) -> pl.DataFrame:
    if decontam is None:
        return table.with_columns(pl.lit(True).alias("survives_decontam"))
    keep = pl.DataFrame(
        [(b, pid) for b, ids in decontam.items() for pid in ids],
        schema={"benchmark": pl.String, "prompt_id": pl.String}, orient="row",
    ).with_columns(pl.lit(True).alias("_kept"))
    audited = list(decontam)
    # A subset the audit did not cover (the pool's own val split, derived subsets) is not
    # contaminated by definition of the audit: it counts as surviving.
    return (table.join(keep, on=["benchmark", "prompt_id"], how="left")
            .with_columns(pl.when(pl.col("benchmark").is_in(audited))
                          .then(pl.col("_kept").fill_null(False))
                          .otherwise(pl.lit(True)).alias("survives_decontam"))
            .drop("_kept"))


# ============================================================================ bench

@dataclass(frozen=True)
class BenchPredictResult:
    n_texts: int
    batch_size: int
    max_length: int
    mean_tokens: float
    bucketed_ex_per_s: float
    padded_ex_per_s: float
    max_abs_diff: float
    """Largest difference in class probability between the two paths (should be ~1e-6)."""

    @property
    def speedup(self) -> float:
        return self.bucketed_ex_per_s / self.padded_ex_per_s

    def to_frame(self) -> pl.DataFrame:
        from dataclasses import asdict

        return pl.DataFrame([{**asdict(self), "speedup": self.speedup}])


def bench_predict(guard: LoadedGuard, texts: Sequence[str], *, batch_size: int = 64,
                  repeats: int = 1) -> BenchPredictResult:
    """examples/s of length-bucketed batching vs input-order batches padded to max length."""
    texts = list(texts)
    lengths = [len(x) for x in guard.tokenizer.encode_ids(texts, max_length=guard.max_length)]
    guard_logits(guard, texts[: batch_size * 2], batch_size=batch_size)  # warm-up

    def timed(bucketed: bool) -> tuple[float, np.ndarray]:
        best = float("inf")
        out = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = guard_logits(guard, texts, batch_size=batch_size, bucketed=bucketed)
            best = min(best, time.perf_counter() - t0)
        return len(texts) / best, out

    fast, a = timed(True)
    slow, b = timed(False)
    diff = float(np.abs(softmax(a) - softmax(b)).max()) if len(texts) else 0.0
    return BenchPredictResult(len(texts), batch_size, guard.max_length,
                              float(np.mean(lengths)) if lengths else 0.0, fast, slow, diff)
