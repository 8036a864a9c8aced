"""The run-folder layout: run ids and their folders, finished runs, and the per-run score cache.

A runs folder holds one folder per run, named by its run id ``<size>/<branch>/seed=<s>`` (the
TF-IDF baselines use ``baseline/<name>/seed=<s>``). A run folder holds:

* ``model.safetensors``, ``tokenizer.json`` — the guard (:mod:`guarddiag.model`);
* ``meta.json`` — written last, so a folder whose meta says ``status: finished`` is a finished
  run; ``train_log.jsonl`` and, while training, ``checkpoint.safetensors`` and
  ``train.lock`` (who trains it: pid, host, start time);
* ``scores.parquet`` + ``scores.json`` — its cached class probabilities (:class:`ScoreCache`).

``_cache/`` (tokenizers, teacher logits), ``predictions.parquet`` and ``outside/`` sit beside
the runs (:class:`guarddiag.paths.RunsFolder` names them). This module knows file names and
folders only; it does not load models (no torch here).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import polars as pl
from pydantic import Field

from guarddiag.audit.provenance import prune_flag_sources
from guarddiag.errors import GuarddiagError
from guarddiag.files import (
    META_FILE,
    git_sha,
    package_versions,
    read_json,
    write_json,
    write_parquet,
)
from guarddiag.labels import PROB_COLUMNS
from guarddiag.paths import RunsFolder
from guarddiag.roles import BranchRoles
from guarddiag.typed import Model, validate

MODEL_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
LOG_FILE = "train_log.jsonl"
CHECKPOINT_FILE = "checkpoint.safetensors"
LOCK_FILE = "train.lock"
"""Present while a process trains the run (:class:`guarddiag.train.lock.RunLock`)."""
SCORES_FILE = "scores.parquet"
SCORES_META = "scores.json"
STATUS_FINISHED = "finished"

SCORES_SCHEMA = {"benchmark": pl.String, "prompt_id": pl.String,
                 **dict.fromkeys(PROB_COLUMNS, pl.Float64)}
"""Columns of a run's ``scores.parquet``: one row per (subset, prompt)."""


# ----------------------------------------------------------------------------- run ids

def run_id(size: str, branch: str, seed: int) -> str:
    """The id of a run, which is also its folder under the runs folder."""
    return f"{size}/{branch}/seed={seed}"


def finished_meta(run_dir: Path) -> dict[str, Any] | None:
    """The meta.json of a finished run (weights and a meta saying ``finished``), else None."""
    meta_path = run_dir / META_FILE
    if not (meta_path.is_file() and (run_dir / MODEL_FILE).is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return meta if meta.get("status") == STATUS_FINISHED else None


def finished_runs(runs_dir: str | Path) -> list[Path]:
    """Folders of finished runs under ``runs_dir`` (``<size>/<branch>/seed=<s>``)."""
    runs_dir = Path(runs_dir)
    out = []
    for meta in sorted(runs_dir.glob(f"*/*/seed=*/{META_FILE}")):
        if finished_meta(meta.parent) is not None:
            out.append(meta.parent)
    return out


def remove_run(run_dir: Path) -> None:
    """Delete a run folder and everything in it (missing folders are fine)."""
    shutil.rmtree(run_dir, ignore_errors=True)


class RunMeta(Model):
    """A trained run's ``meta.json``: what the run is (its id, branch, size, seed and roles) and
    how it was made (inputs' sha256, versions, the resolved spec, the model, the training)."""

    run_id: str
    """``<size>/<branch>/seed=<s>``."""
    branch: str
    size: str
    seed: int
    status: str
    """``finished`` once the weights are saved (meta.json is written last)."""
    label_policy: str
    """The hard labels' policy: ``A``, ``B`` or a mix such as ``A25+B75`` (``+anchors``)."""
    roles: BranchRoles | None = None
    """The branch's roles when it was trained or last skipped (:mod:`guarddiag.roles`); None
    only in a meta written before roles existed."""
    teacher: str | None = None
    """Run id of the teacher it was distilled from."""
    parent: str | None = None
    """Run id of the parent whose heads it recalibrated."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Input name → sha256 (the pool, the teacher's or parent's weights)."""
    versions: dict[str, str] = Field(default_factory=dict)
    git_sha: str | None = None
    spec: dict[str, Any] = Field(default_factory=dict)
    """The resolved recipe (:meth:`guarddiag.train.branches.BranchSpec.resolved`)."""
    model: dict[str, Any] = Field(default_factory=dict)
    """The model section (:mod:`guarddiag.model`): size, parameters, checkpoint."""
    train: dict[str, Any] = Field(default_factory=dict)
    """The training record: fingerprint, rows, steps, the kept evaluation, wall time."""


def read_run_meta(run_dir: Path) -> RunMeta:
    """A run's meta.json through :class:`RunMeta` (one line per problem, naming the field)."""
    path = run_dir / META_FILE
    return validate(RunMeta, read_json(path), where=path)


def new_run_meta(**fields: Any) -> RunMeta:
    """A run's meta with the versions and git sha of this process."""
    return RunMeta(versions=package_versions(), git_sha=git_sha(), **fields)


def write_run_meta(run_dir: Path, meta: RunMeta) -> Path:
    """Write a run's ``meta.json``."""
    return write_json(meta.model_dump(mode="json"), run_dir / META_FILE)


# ----------------------------------------------------------------------------- score cache

class ScoredSubset(Protocol):
    """What the cache needs to know of a subset to score (see predict's ``ScoringInput``).

    Read-only members, so a frozen dataclass satisfies it."""

    @property
    def benchmark(self) -> str: ...

    @property
    def prompt_ids(self) -> Sequence[str]: ...

    @property
    def sha256(self) -> str: ...


S = TypeVar("S", bound=ScoredSubset)


def empty_scores() -> pl.DataFrame:
    return pl.DataFrame(schema=SCORES_SCHEMA)


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

    def missing(self, inputs: Sequence[S]) -> list[S]:
        """The inputs not yet scored, or scored on other prompts than they hold now."""
        return [inp for inp in inputs
                if self.shas.get(inp.benchmark) != inp.sha256
                or self.frames[inp.benchmark].height != len(inp.prompt_ids)]

    def put(self, inp: ScoredSubset, frame: pl.DataFrame) -> None:
        self.frames[inp.benchmark] = frame
        self.shas[inp.benchmark] = inp.sha256

    def save(self) -> pl.DataFrame:
        """Write the cache; returns every subset's scores (sorted by subset)."""
        order = sorted(self.frames)
        frame = pl.concat([self.frames[b] for b in order]) if order else empty_scores()
        write_parquet(frame, self.folder / SCORES_FILE)
        write_json({"key": self.key, "inputs": {b: self.shas[b] for b in order}},
                   self.folder / SCORES_META)
        return frame


# ----------------------------------------------------------------------------- pruning

@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune_benchmarks` removed, per file."""

    benchmarks: tuple[str, ...]
    removed: dict[str, int]
    """Rows removed, by the file they were removed from (files without such rows absent)."""

    @property
    def n_removed(self) -> int:
        return sum(self.removed.values())


def _prune_table(path: Path, benchmarks: Sequence[str], removed: dict[str, int]) -> None:
    frame = pl.read_parquet(path)
    if "benchmark" not in frame.columns:
        return
    kept = frame.filter(~pl.col("benchmark").is_in(list(benchmarks)))
    if kept.height != frame.height:
        write_parquet(kept, path)
        # The table's decontamination record names its sha256: describe the pruned table.
        prune_flag_sources(path, benchmarks)
        removed[str(path)] = frame.height - kept.height


def _prune_json_list(path: Path, key: str, benchmarks: Sequence[str]) -> None:
    """Drop ``benchmarks`` from the list or mapping under ``key`` of a JSON file."""
    if not path.is_file():
        return
    meta = read_json(path)
    value = meta.get(key) if isinstance(meta, dict) else None
    if isinstance(value, dict):
        meta[key] = {k: v for k, v in value.items() if k not in benchmarks}
    elif isinstance(value, list):
        meta[key] = [k for k in value if k not in benchmarks]
    else:
        return
    write_json(meta, path)


def prune_benchmarks(runs_dir: str | Path, benchmarks: Sequence[str]) -> PruneResult:
    """Remove every row of ``benchmarks`` from a runs folder, on purpose: the predictions
    table, each outside guard's table (and its meta's benchmark list) and each run's score
    cache. Other benchmarks' rows stay as they were; a guard's raw answers stay (scoring the
    benchmark again reuses them)."""
    runs_dir = Path(runs_dir)
    wanted = tuple(dict.fromkeys(b.strip() for b in benchmarks if b.strip()))
    if not wanted:
        raise GuarddiagError("--benchmarks: name at least one benchmark id to prune")
    if not runs_dir.is_dir():
        raise GuarddiagError(f"{runs_dir}: runs folder not found")
    removed: dict[str, int] = {}
    folder = RunsFolder(runs_dir)
    if folder.predictions.is_file():
        _prune_table(folder.predictions, wanted, removed)
    for path in folder.outside_tables():
        _prune_table(path, wanted, removed)
        meta_path = RunsFolder.meta_of(path)
        _prune_json_list(meta_path, "benchmarks", wanted)
        _prune_json_list(meta_path, "benchmark_sha256", wanted)
    for scores in sorted(runs_dir.glob(f"**/{SCORES_FILE}")):
        _prune_table(scores, wanted, removed)
        _prune_json_list(scores.parent / SCORES_META, "inputs", wanted)
    return PruneResult(benchmarks=wanted, removed=removed)
