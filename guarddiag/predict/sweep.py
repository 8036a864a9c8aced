"""``guarddiag sweep``: the branch × size × seed grid as parallel tasks, then the predictions.

Each run is one task (:func:`train_task`, i.e. ``train --run``), submitted once the runs it
needs are finished (teachers → reference → branches; head-only runs after their encoder), so
independent runs train side by side. Each finished run is then scored in its own task
(:func:`score_task`, which fills the run's score cache), and the predictions table is assembled
from the caches exactly as ``guarddiag predict`` does — the same bytes as the sequential path.

Engines: ``local`` (a process pool of ``jobs`` workers; a worker that dies is replaced and its
task resubmitted) and ``ray`` (``pip install -e ".[ray]"``; one task per run with
``num_gpus=1`` on CUDA or ``num_cpus`` on the CPU, retried on worker loss). Either way a run
folder's lock keeps a run from being trained twice, and a rerun resumes from the runs folder:
finished runs are skipped, interrupted ones resume from their checkpoints.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.model.device import pick_device
from guarddiag.model.threads import auto_threads, torch_threads
from guarddiag.predict.options import PredictOptions, SweepOptions
from guarddiag.predict.runner import fill_score_cache, scoring_inputs
from guarddiag.train.branches import PlannedRun, load_branches, plan_runs
from guarddiag.train.options import PlanOptions, TrainOptions
from guarddiag.train.runner import RunSummary, train_one

logger = logging.getLogger(__name__)


def merge_plans(*plans: Sequence[PlannedRun]) -> list[PlannedRun]:
    """One plan from several (e.g. the grid at seed 42, then the seed-floor recipes at other
    seeds): each run once, at its first place. Every input lists a run's dependencies before it,
    so the merged plan does too."""
    seen: dict[str, PlannedRun] = {}
    for plan in plans:
        for run in plan:
            seen.setdefault(run.run_id, run)
    return list(seen.values())


@dataclass(frozen=True)
class SweepTask:
    """Everything a worker needs to train or score one run (picklable)."""

    run_id: str
    runs_dir: str
    pool_path: str
    branches_dir: str | None
    options: TrainOptions = field(default_factory=TrainOptions)


def train_task(task: SweepTask) -> RunSummary:
    """Train one run in a worker (``train --run``); waits for a lock another holds."""
    options = task.options.model_copy(update={"wait_for_lock": True})
    return train_one(branches=load_branches(task.branches_dir), run_id=task.run_id,
                     runs_dir=task.runs_dir, pool_path=task.pool_path, options=options)


def score_task(job: tuple[str, PredictOptions]) -> int:
    """Fill the score cache of one run (``job``: its folder and the scoring options) in a
    worker; returns the prompts scored."""
    run_dir, options = job
    inputs, _, _ = scoring_inputs(pool_path=options.pool_path, benchmarks=options.benchmarks,
                                  data_dir=options.data_dir, derived_dir=options.derived_dir)
    with torch_threads(options.threads):
        _, n = fill_score_cache(Path(run_dir), inputs, batch_size=options.batch_size,
                                device=pick_device(options.device), desc=run_dir)
    return n


# ----------------------------------------------------------------------------- engines

def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: on Linux, have the kernel SIGKILL this worker when the sweep's
    process dies (a killed ``guarddiag demo`` leaves no orphan training on). Elsewhere a no-op;
    an orphan then finishes its run, and the run's lock keeps a rerun from training it twice."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the call above
        os._exit(1)


class LocalEngine:
    """A spawn-context process pool; a broken pool (a worker killed) is rebuilt and the tasks
    that were in flight are resubmitted, up to ``retries`` times."""

    def __init__(self, jobs: int, *, retries: int = 3):
        self.jobs, self.retries = jobs, retries
        self.pool = self._new_pool()
        self.futures: dict[Future[Any], tuple[str, Callable[[Any], Any], Any]] = {}

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn: a forked child would inherit torch's thread pools and locks mid-state
        return ProcessPoolExecutor(max_workers=self.jobs, mp_context=get_context("spawn"),
                                   initializer=die_with_parent, initargs=(os.getpid(),))

    def submit(self, key: str, fn: Callable[[Any], Any], arg: Any, *, gpu: bool) -> None:
        try:
            future = self.pool.submit(fn, arg)
        except BrokenProcessPool:  # a worker died since the last result was collected
            self._restart(key)
            future = self.pool.submit(fn, arg)
        self.futures[future] = (key, fn, arg)

    def next_done(self) -> tuple[str, Any]:
        done, _ = wait(list(self.futures), return_when=FIRST_COMPLETED)
        fut = next(iter(done))
        key, fn, arg = self.futures.pop(fut)
        try:
            return key, fut.result()
        except BrokenProcessPool:
            self._restart(key)
            self.futures[self.pool.submit(fn, arg)] = (key, fn, arg)
            return self.next_done()

    def _restart(self, key: str) -> None:
        """A new pool after a worker died: tasks that finished keep their results, every other
        task in flight is submitted again (its run resumes from its checkpoint)."""
        if self.retries <= 0:
            raise GuarddiagError(f"{key}: a sweep worker died and the retries are used up")
        self.retries -= 1
        logger.info(f"{key}: a sweep worker died; restarting the pool and resubmitting")
        kept = {f: v for f, v in self.futures.items()  # finished, or failed on their own
                if f.done() and not f.cancelled()
                and not isinstance(f.exception(), BrokenProcessPool)}
        redo = [v for f, v in self.futures.items() if f not in kept]
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool, self.futures = self._new_pool(), kept
        for k, f, a in redo:
            self.futures[self.pool.submit(f, a)] = (k, f, a)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class RayEngine:
    """Ray tasks: ``num_gpus=1`` for a CUDA run, else ``num_cpus=1``; ``max_retries`` reruns a
    task whose worker died (the run resumes from its checkpoint)."""

    def __init__(self, *, address: str | None, retries: int = 3):
        try:
            import ray
        except ImportError:
            raise GuarddiagError('--engine ray: Ray is not installed; pip install -e ".[ray]" '
                                 '(or use --engine local)') from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.retries = retries
        self.refs: dict[Any, str] = {}

    def submit(self, key: str, fn: Callable[[Any], Any], arg: Any, *, gpu: bool) -> None:
        remote = self.ray.remote(fn).options(
            num_gpus=1 if gpu else 0, num_cpus=0 if gpu else 1, max_retries=self.retries)
        self.refs[remote.remote(arg)] = key

    def next_done(self) -> tuple[str, Any]:
        done, _ = self.ray.wait(list(self.refs), num_returns=1)
        key = self.refs.pop(done[0])
        return key, self.ray.get(done[0])

    def close(self) -> None:
        pass


# ----------------------------------------------------------------------------- the sweep

@dataclass(frozen=True)
class SweepResult:
    runs: tuple[RunSummary, ...]
    n_scored: int
    train_wall_s: float
    score_wall_s: float
    engine: str
    jobs: int


def open_engine(how: SweepOptions) -> LocalEngine | RayEngine:
    """The engine a sweep or a scoring fan-out runs on (its options checked by the model)."""
    return LocalEngine(how.jobs) if how.engine == "local" else RayEngine(address=how.address)


def sweep(*, names: str | Sequence[str] | None = None, sizes: Sequence[str] | None = None,
          seeds: Sequence[int] | None = None, plan: Sequence[PlannedRun] | None = None,
          runs_dir: str | Path, pool_path: str | Path,
          branches_dir: str | Path | None = None, options: TrainOptions | None = None,
          how: SweepOptions | None = None, score: PredictOptions | None = None,
          **fields: Any) -> SweepResult:
    """Train the plan, dependencies first, on the engine ``how`` names
    (:class:`~guarddiag.predict.options.SweepOptions`, any field replaced by ``fields``:
    ``engine="ray"``, ``jobs=2``); then, with ``score`` (the scoring options; their
    ``runs_dir`` and ``out_path`` are not read), fill every run's score cache in parallel.

    The plan is ``names`` × ``sizes`` × ``seeds`` (each None: :class:`PlanOptions`' default),
    or ``plan`` as given (e.g. from :func:`merge_plans`)."""
    options = options or TrainOptions()
    how = SweepOptions.of(how, **fields)
    gpu = pick_device(options.device).type == "cuda"
    if plan is None:
        plan = plan_runs(load_branches(branches_dir),
                         PlanOptions.of(branches=names, sizes=sizes, seeds=seeds))
    if score is not None and score.threads is None:
        score = score.model_copy(update={"threads": auto_threads(r.size for r in plan)})
    bdir = str(branches_dir) if branches_dir is not None else None
    eng = open_engine(how)
    logger.info(f"sweep: {len(plan)} run(s) on the {how.engine} engine"
                + (f", {how.jobs} at a time" if how.engine == "local" else ""))
    try:
        t0 = time.monotonic()
        summaries = _train_plan(eng, plan, SweepTask("", str(runs_dir), str(pool_path), bdir,
                                                     options), gpu=gpu, jobs=how.jobs)
        t1 = time.monotonic()
        n_scored = 0 if score is None else _score_plan(
            eng, [Path(runs_dir) / run.run_id for run in plan], score, gpu=gpu)
        t2 = time.monotonic()
    finally:
        eng.close()
    return SweepResult(tuple(summaries[r.run_id] for r in plan), n_scored,
                       round(t1 - t0, 2), round(t2 - t1, 2), how.engine, how.jobs)


def score_runs(*, run_dirs: Sequence[str | Path], score: PredictOptions,
               how: SweepOptions | None = None, **fields: Any) -> int:
    """Fill the score caches of finished runs in parallel on the engine ``how`` names (any
    field replaced by ``fields``); ``predict_runs`` then only reads them. Returns the prompts
    scored."""
    gpu = pick_device(score.device).type == "cuda"
    eng = open_engine(SweepOptions.of(how, **fields))
    try:
        return _score_plan(eng, [Path(d) for d in run_dirs], score, gpu=gpu)
    finally:
        eng.close()


def _score_plan(eng: LocalEngine | RayEngine, run_dirs: Sequence[Path],
                score: PredictOptions, *, gpu: bool) -> int:
    for run_dir in run_dirs:
        eng.submit(str(run_dir), score_task, (str(run_dir), score), gpu=gpu)
    return sum(int(eng.next_done()[1]) for _ in run_dirs)


def _train_plan(eng: LocalEngine | RayEngine, plan: Sequence[Any], base: SweepTask, *,
                gpu: bool, jobs: int) -> dict[str, RunSummary]:
    """Submit each run once every run it needs has finished; at most ``jobs`` in flight on
    the local engine (Ray schedules by the resources each task asks for)."""
    pending = list(plan)
    done: dict[str, RunSummary] = {}
    in_flight = 0
    while pending or in_flight:
        for run in list(pending):
            if in_flight >= jobs and isinstance(eng, LocalEngine):
                break
            if all(d in done for d in run.deps()):
                eng.submit(run.run_id, train_task, replace(base, run_id=run.run_id), gpu=gpu)
                pending.remove(run)
                in_flight += 1
        if not in_flight:
            missing = sorted({d for r in pending for d in r.deps() if d not in done})
            raise GuarddiagError(f"sweep: runs {', '.join(missing)} are needed but not in "
                                 f"the plan")
        key, summary = eng.next_done()
        done[key] = summary
        in_flight -= 1
    return done
