"""The runner: trains a plan (teachers → reference → branches) run by run.

A finished run whose fingerprint (resolved spec, pool and dependency weights, pretrained
checkpoint, :data:`TRAINING_VERSION`) did not change is skipped; a changed one is retrained;
an interrupted one resumes from its checkpoint (:mod:`guarddiag.train.full`). meta.json is
written last, so a folder with a finished meta is a finished run (:mod:`guarddiag.runs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file
from guarddiag.model.device import describe_device, pick_device
from guarddiag.model.lexical import LEXICAL_NGRAMS
from guarddiag.model.sizes import get_size
from guarddiag.model.threads import auto_threads, torch_threads
from guarddiag.pool.table import Pool, read_pool
from guarddiag.runs import (
    CHECKPOINT_FILE,
    META_FILE,
    MODEL_FILE,
    STATUS_FINISHED,
    finished_meta,
    new_run_meta,
    read_run_meta,
    write_run_meta,
)
from guarddiag.train.branches import BranchSet, BranchSpec, PlannedRun, plan_runs
from guarddiag.train.full import train_full
from guarddiag.train.head_only import train_head_only
from guarddiag.train.lock import RunLock
from guarddiag.train.options import PlanOptions, TrainOptions
from guarddiag.train.plan import find_run
from guarddiag.train.pooled import (
    encoder_for,
    spec_at_size,
    train_pooled_full,
    train_pooled_head_only,
)

logger = logging.getLogger(__name__)

TRAINING_VERSION = 2
"""Bumped whenever a change to this package changes what a run learns; it is part of every
run's fingerprint, so finished runs of an older version are retrained, not silently reused."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    branch: str
    size: str
    seed: int
    status: str
    """``trained``, ``resumed`` or ``skipped`` (already finished with the same inputs)."""
    wall_s: float
    n_rows: int
    steps: int
    val_objective: float
    val_acc_a: float
    val_acc_b: float


@dataclass(frozen=True)
class TrainResult:
    runs: tuple[RunSummary, ...]
    runs_dir: Path

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([asdict(r) for r in self.runs])


def _fingerprint(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _run_fingerprint(spec: BranchSpec, run: PlannedRun, pool: Pool, runs_dir: Path,
                     options: TrainOptions) -> tuple[str, dict[str, str]]:
    inputs = {"pool.parquet": pool.sha256}
    for role, dep in (("teacher", run.teacher), ("parent", run.parent)):
        if dep:
            inputs[f"{role}:{dep}"] = sha256_file(runs_dir / dep / MODEL_FILE)
    payload = {"spec": spec.resolved(), "run_id": run.run_id, "inputs": inputs,
               "pretrained": options.pretrained.get(run.size),
               "training_version": TRAINING_VERSION}
    size = get_size(run.size)
    if size.frozen:  # the cached states' identity: checkpoint, length, numerics
        payload["encoder_key"] = encoder_for(run.size, options).key
        if size.lexical:  # (absent otherwise: earlier runs keep their prints)
            payload["lexical"] = f"{size.lexical}:{LEXICAL_NGRAMS}"
        if size.standardize:  # (likewise)
            payload["standardize"] = True
    return _fingerprint(payload), inputs


def train_run(spec: BranchSpec, run: PlannedRun, *, pool: Pool, runs_dir: Path,
              options: TrainOptions | None = None) -> RunSummary:
    """Train one planned run (its dependencies must be finished), or skip it if done.

    The run folder's lock (:class:`~guarddiag.train.lock.RunLock`) is held throughout, so two
    processes never train the same run; the second one, once it gets the lock, finds the run
    finished and skips it."""
    options = options or TrainOptions()
    run_dir = runs_dir / run.run_id
    for dep in run.deps():
        if finished_meta(runs_dir / dep) is None:
            raise GuarddiagError(f"{run.run_id}: needs the finished run {dep} first")
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunLock(run_dir, run_id=run.run_id, wait=options.wait_for_lock):
        return _train_locked(spec, run, pool=pool, runs_dir=runs_dir, options=options)


def _train_locked(spec: BranchSpec, run: PlannedRun, *, pool: Pool, runs_dir: Path,
                  options: TrainOptions) -> RunSummary:
    run_dir = runs_dir / run.run_id
    spec = spec_at_size(spec, run.size)
    fingerprint, inputs = _run_fingerprint(spec, run, pool, runs_dir, options)
    done = finished_meta(run_dir)
    if done is not None:
        if done.get("train", {}).get("fingerprint") == fingerprint:
            (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
            _update_roles(run_dir, spec)
            logger.info(f"{run.run_id}: already finished with this spec and these inputs; skipped")
            return _summary(run, done, status="skipped", wall_s=0.0)
        logger.info(f"{run.run_id}: spec or inputs changed since it was trained; retraining")
        (run_dir / META_FILE).unlink()
    t0 = time.monotonic()
    if get_size(run.size).frozen:
        train = train_pooled_head_only if spec.head_only else train_pooled_full
        info = train(spec, run, run_dir, pool, runs_dir, options)
    elif spec.head_only:
        info = train_head_only(spec, run, run_dir, pool, runs_dir, options)
    else:
        info = train_full(spec, run, run_dir, pool, runs_dir, options, fingerprint)
    wall = time.monotonic() - t0
    model_section = info.pop("model")
    resumed = info.pop("resumed")
    write_run_meta(run_dir, new_run_meta(
        run_id=run.run_id, branch=run.branch, size=run.size, seed=run.seed,
        status=STATUS_FINISHED, label_policy=spec.label_policy(), roles=spec.roles(),
        teacher=run.teacher, parent=run.parent, inputs=inputs, spec=spec.resolved(),
        model=model_section, train={"fingerprint": fingerprint,
                                    "training_version": TRAINING_VERSION,
                                    "wall_s": round(wall, 2), **info}))
    (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
    meta = finished_meta(run_dir) or {}
    summary = _summary(run, meta, status="resumed" if resumed else "trained", wall_s=wall)
    logger.info(f"{run.run_id}: {summary.status} in {wall:.1f}s — val acc A "
                f"{summary.val_acc_a:.3f}, B {summary.val_acc_b:.3f} (kept step "
                f"{meta['train']['best']['step']})")
    return summary


def _update_roles(run_dir: Path, spec: BranchSpec) -> None:
    """Write the spec's roles into a finished run's meta.json where they differ: roles are
    not part of the fingerprint (they say what a run is for, not what it learned), so a role
    changed in the spec, or a run trained before roles existed, is relabelled, not retrained."""
    meta = read_run_meta(run_dir)
    if meta.roles != spec.roles():
        write_run_meta(run_dir, meta.model_copy(update={"roles": spec.roles()}))
        logger.info(f"{meta.run_id}: roles updated in its meta.json")


def _summary(run: PlannedRun, meta: dict[str, Any], *, status: str,
             wall_s: float) -> RunSummary:
    train = meta.get("train", {})
    best = train.get("best", {})
    return RunSummary(run.run_id, run.branch, run.size, run.seed, status, round(wall_s, 2),
                      int(train.get("n_rows", 0)), int(train.get("steps", 0)),
                      float(best.get("val_objective", math.nan)),
                      float(best.get("val_acc_a", math.nan)),
                      float(best.get("val_acc_b", math.nan)))


def train_branches(*, branches: BranchSet, names: str | Sequence[str] | None = None,
                   sizes: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
                   plan: Sequence[PlannedRun] | None = None,
                   runs_dir: str | Path, pool_path: str | Path,
                   options: TrainOptions | None = None) -> TrainResult:
    """Train every run of the plan (``names`` × ``sizes`` × ``seeds``, each None: the
    :class:`~guarddiag.train.options.PlanOptions` default; or ``plan`` as given) in dependency
    order; finished runs are skipped."""
    runs_dir = Path(runs_dir)
    options = options or TrainOptions()
    device_line = describe_device(pick_device(options.device), spec=options.device)
    if plan is None:
        plan = plan_runs(branches, PlanOptions.of(branches=names, sizes=sizes, seeds=seeds))
    pool = read_pool(pool_path)
    threads = options.threads if options.threads is not None else \
        auto_threads(r.size for r in plan)
    logger.info(f"training plan, {len(plan)} run(s) into {runs_dir}"
                + (f" ({threads} torch thread(s))" if threads else "") + ": "
                + ", ".join(r.run_id for r in plan))
    logger.info(device_line)
    out = []
    with torch_threads(threads):
        for run in plan:
            out.append(train_run(branches[run.branch], run, pool=pool, runs_dir=runs_dir,
                                 options=options))
    return TrainResult(tuple(out), runs_dir)



def train_one(*, branches: BranchSet, run_id: str, runs_dir: str | Path,
              pool_path: str | Path, options: TrainOptions | None = None) -> RunSummary:
    """Train exactly the run ``run_id`` (``<size>/<branch>/seed=<s>``) once its dependencies
    are finished — for Slurm arrays and sweeps, where each task trains one run."""
    runs_dir = Path(runs_dir)
    options = options or TrainOptions()
    logger.info(describe_device(pick_device(options.device), spec=options.device))
    run = find_run(branches, run_id)
    for dep in run.deps():
        if finished_meta(runs_dir / dep) is None:
            raise GuarddiagError(f"{run.run_id}: its dependency {dep} is not finished; "
                                 f"train it first (guarddiag train --run {dep})")
    pool = read_pool(pool_path)
    threads = options.threads if options.threads is not None else auto_threads([run.size])
    with torch_threads(threads):
        return train_run(branches[run.branch], run, pool=pool, runs_dir=runs_dir,
                         options=options)
