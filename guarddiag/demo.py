"""``guarddiag demo``: the whole study at CPU size, in order, resumable.

Stages (each a library verb; a re-run skips or reuses what is finished):

1. data check  - every benchmark subset's status; with no data at all, ``data pull`` first;
2. pool build  - the dual-policy pool (deterministic, seconds) → ``<work>/pool/``;
3. audit       - exact, near-duplicate, template and contained overlap with every benchmark,
                 and its chart
                 → ``<work>/audit/`` (a finished audit with the same inputs is reused);
4. mutate      - SORRY-Bench's deterministic linguistic mutations (ASCII, Caesar, Morse,
                 Atbash, seeded misspellings) of the sorrybench subset → ``<work>/derived/``,
                 scored and reported like any subset (robustness table);
5. train       - at a frozen size (the default, ``minilm``) first the encoder states of every
                 pool, benchmark and mutated prompt, once, into the state cache (a second demo
                 reads them all); then teachers, reference and E1–E10 at the demo size, seed
                 42, and seeds 43 and 44 of the seed-floor recipes (default: every branch and
                 variant), so the report has a seed floor Φb per recipe beside the span Δb
                 (finished runs are skipped, an interrupted run starts again or resumes from
                 its last checkpoint);
6. predict     - every run and the TF-IDF baseline on every available benchmark subset and on
                 the pool's val split → ``<work>/runs/predictions.parquet`` (runs already scored
                 are not scored again);
7. outside     - a real pretrained guard, alt-profanity-check (:mod:`guarddiag.guards.profanity`),
                 through the plug-in (callable) path on the same prompts → ``<work>/runs/outside/``
                 (skipped with a note when the ``demo`` extra is not installed);
8. report      - ``reports/demo/`` from the saved tables only.

Example (minutes on 2 CPU cores; measured times in docs/guide/study.md)::

    GUARDDIAG_DATA=../shared/data guarddiag demo
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from guarddiag import paths
from guarddiag.audit import audit_pool
from guarddiag.cores import usable_cores
from guarddiag.data import load_benchmarks, pull, subset_status
from guarddiag.demo_defaults import MUTATED_BENCHMARK, DemoOptions
from guarddiag.errors import GuarddiagError
from guarddiag.files import write_json
from guarddiag.guards import profanity
from guarddiag.guards.callable import CallableGuardAdapter
from guarddiag.guards.scoring import score_guard
from guarddiag.pool import build_pool
from guarddiag.reproduce import write_fingerprint
from guarddiag.sorry.mutate import mutate_benchmark, resolve_mutations

if TYPE_CHECKING:
    from guarddiag.train.branches import BranchSet, PlannedRun
    from guarddiag.train.runner import RunSummary

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoResult:
    out_dir: Path
    work_dir: Path
    stage_seconds: dict[str, float] = field(default_factory=dict)
    headline: tuple[str, ...] = ()


def _check_data(data_dir: Path, mirror: str | None) -> None:
    status = subset_status(data_dir=data_dir, ids="study")
    available = [s for s in status if s.status == "available"]
    invalid = [s for s in status if s.status == "invalid"]
    if invalid:
        s = invalid[0]
        raise GuarddiagError(f"benchmark subset {s.id} in {data_dir} is present but wrong: "
                             f"{s.message}")
    if not available:
        logger.info(f"demo: no benchmark data in {data_dir}; trying `guarddiag data pull`")
        try:
            result = pull(ids="all", data_dir=data_dir, mirror=mirror)
        except GuarddiagError as exc:
            raise GuarddiagError(_no_data_advice(data_dir, str(exc))) from None
        if not [s for s in subset_status(data_dir=data_dir, ids="study")
                if s.status == "available"]:
            failed = "; ".join(f"{f.path}: {f.message}" for f in result.failed[:3])
            raise GuarddiagError(_no_data_advice(data_dir, failed or "nothing downloaded"))
        status = subset_status(data_dir=data_dir, ids="study")
        available = [s for s in status if s.status == "available"]
    if not (data_dir / "pools").is_dir():
        raise GuarddiagError(
            f"{data_dir / 'pools'}: the public prompt pools are missing; the pool is built from "
            f"them. Point GUARDDIAG_DATA (or --data-dir) at a data directory holding "
            f"benchmarks/ and pools/ (each pinned in its SOURCES.md)")
    unavailable = [s.id for s in status if s.status == "unavailable"]
    logger.info(f"demo: {len(available)} of {len(status)} study subsets available"
                + (f" (unavailable, skipped: {', '.join(unavailable)})" if unavailable else ""))


def _no_data_advice(data_dir: Path, why: str) -> str:
    return (f"no benchmark data in {data_dir} and `guarddiag data pull` failed ({why}). "
            f"Either set GUARDDIAG_DATA (or --data-dir) to a directory holding benchmarks/ and "
            f"pools/, or run `guarddiag data pull --mirror URL` against a served copy of one")


def _mutate(mutations: tuple[str, ...], *, data_dir: Path, derived_dir: Path) -> None:
    """Deterministic mutations of the SORRY-Bench subset, when it is available."""
    if not mutations:
        return
    status = subset_status(data_dir=data_dir, ids=MUTATED_BENCHMARK)[0]
    if status.status != "available":
        logger.info(f"demo: {MUTATED_BENCHMARK} is {status.status}; no mutations")
        return
    result = mutate_benchmark(MUTATED_BENCHMARK, mutations=list(mutations), seed=0,
                              data_dir=data_dir, derived_dir=derived_dir)
    logger.info(f"demo: {len(result.subsets)} mutated subset(s): "
                + ", ".join(m.subset_id for m in result.subsets))


def _score_outside(*, data_dir: Path, work: paths.WorkPaths) -> None:
    if not profanity.available():
        logger.info(f"demo: {profanity.NAME} is not installed (pip install -e \".[demo]\"); the "
                    "report has no outside guard")
        return
    guard = CallableGuardAdapter(function=profanity.moderate, name=profanity.NAME,
                                 batch_size=1024, definition=profanity.DEFINITION)
    result = score_guard(guard, benchmarks="all,derived", runs_dir=work.runs,
                         audit_dir=work.audit, data_dir=data_dir, derived_dir=work.derived,
                         pool=work.pool)
    logger.info(f"demo: {profanity.NAME}: {result.n_prompts:,} prompts, {result.n_asked:,} asked, "
                f"{result.n_reused:,} reused")


def _train(branches: BranchSet, options: DemoOptions, work: paths.WorkPaths
           ) -> list[RunSummary]:
    """Every run at seed 42, then the floor recipes at the floor seeds: ``jobs`` at a time in
    worker processes (dependencies first), or one after another here with ``jobs`` 1."""
    from guarddiag.predict.sweep import sweep
    from guarddiag.train import train_branches

    plan = demo_plan(branches, options)
    if options.jobs > 1:
        return list(sweep(plan=plan, runs_dir=work.runs, pool_path=work.pool, engine="local",
                          jobs=options.jobs).runs)
    return list(train_branches(branches=branches, plan=plan, runs_dir=work.runs,
                               pool_path=work.pool).runs)


def demo_plan(branches: BranchSet, options: DemoOptions) -> list[PlannedRun]:
    """Every branch at ``seed``, then the floor branches (default all: every recipe, the
    route-matched controls E1-ctrl/E7-ctrl/E10-ctrl with the recipes they control) at the floor
    seeds, dependencies first: the head-only contrast's seed noise is measured per recipe."""
    from guarddiag.predict.sweep import merge_plans
    from guarddiag.train.branches import plan_runs
    from guarddiag.train.options import PlanOptions

    return list(merge_plans(
        plan_runs(branches, PlanOptions.of(sizes=(options.size,), seeds=(options.seed,))),
        plan_runs(branches, PlanOptions.of(branches=_floor_names(options),
                                           sizes=(options.size,), seeds=options.floor_seeds))
        if options.floor_seeds else []))


def _floor_names(options: DemoOptions) -> str | list[str]:
    return "all" if tuple(options.floor_branches) == ("all",) else list(options.floor_branches)


def _embed_states(options: DemoOptions, work: paths.WorkPaths, data_dir: Path) -> None:
    """At a frozen size: every prompt the runs will read (pool, benchmarks, mutated subsets)
    embedded once here, with every usable core, so the parallel runs only read the cache."""
    # The size table needs no torch, but guarddiag.model's package face loads it.
    from guarddiag.model.sizes import get_size, size_up

    if not get_size(options.size).frozen:
        return
    import polars as pl

    from guarddiag.model.states import fill_states
    from guarddiag.model.threads import torch_threads
    from guarddiag.train.options import TrainOptions
    from guarddiag.train.pooled import encoder_for

    texts = pl.read_parquet(work.pool, columns=["text"])["text"].to_list()
    bench = load_benchmarks("all,derived", data_dir=data_dir, derived_dir=work.derived)
    for frame in bench.frames.values():
        texts += frame["text"].to_list()
    with torch_threads(usable_cores()):
        fill_states([encoder_for(size, TrainOptions())
                     for size in (options.size, size_up(options.size))], texts)


def _score_in_parallel(runs: list[RunSummary], options: DemoOptions, work: paths.WorkPaths,
                       data_dir: Path) -> None:
    """Fill every run's score cache ``jobs`` at a time (``predict_runs`` then only reads them;
    the same bytes as scoring there)."""
    if options.jobs < 2:
        return
    from guarddiag.predict.options import PredictOptions
    from guarddiag.predict.sweep import score_runs

    score_runs(run_dirs=[work.runs / r.run_id for r in runs], engine="local", jobs=options.jobs,
               score=PredictOptions(runs_dir=work.runs, pool_path=work.pool,
                                    benchmarks="all,derived", data_dir=data_dir,
                                    derived_dir=work.derived, threads=1))


def _fingerprint(options: DemoOptions, work: paths.WorkPaths, data_dir: Path) -> None:
    """``<report>/reproduce.json``: what ``guarddiag bench reproduce`` compares another
    machine's run with (:mod:`guarddiag.reproduce`)."""
    from guarddiag.model.sizes import get_size

    size = get_size(options.size)
    texts = [t for f in load_benchmarks("all", data_dir=data_dir).frames.values()
             for t in f["text"].to_list()]
    path = write_fingerprint(report_dir=Path(options.out_dir),
                             predictions=work.predictions,
                             encoder=size.encoder() if size.frozen else None, prompts=texts)
    logger.info(f"demo: fingerprint for `guarddiag bench reproduce` → {path}")


def run_demo(options: DemoOptions | None = None) -> DemoResult:
    """Run every stage of the study at demo size; see the module docstring."""
    # torch, transformers and matplotlib load only when the stages that need them run.
    from guarddiag.model.sizes import get_size
    from guarddiag.predict import predict_runs
    from guarddiag.report import ReportOptions, make_report
    from guarddiag.train.branches import load_branches, select_branches

    options = options or DemoOptions()
    data_dir = paths.resolve_data_dir(options.data_dir)
    work = paths.work_paths(options.work_dir)
    pool_dir = work.pool.parent
    times: dict[str, float] = {}
    branches = load_branches()
    # Unknown floor branches fail here, before twenty minutes of training.
    select_branches(branches, _floor_names(options))
    get_size(options.size, where="--size")
    if options.mutations:
        resolve_mutations(list(options.mutations))

    def stage(name: str, step: int) -> float:
        logger.info(f"demo [{step}/8] {name}")
        return time.perf_counter()

    t = stage("data check", 1)
    _check_data(data_dir, options.mirror)
    times["data"] = time.perf_counter() - t

    t = stage("pool build", 2)
    pool = build_pool(data_dir=data_dir, out_dir=pool_dir)
    times["pool"] = time.perf_counter() - t
    logger.info(f"demo: pool {pool.pool.height:,} prompts")

    t = stage("contamination audit", 3)
    audit_pool(work.pool, data_dir=data_dir, near_dup=True, templates=True, containment=True,
               figure=True, out_dir=work.audit)
    times["audit"] = time.perf_counter() - t

    t = stage(f"{MUTATED_BENCHMARK} mutations ({', '.join(options.mutations) or 'none'})", 4)
    _mutate(options.mutations, data_dir=data_dir, derived_dir=work.derived)
    times["mutate"] = time.perf_counter() - t

    t = stage(f"train all branches ({options.size}, seed {options.seed}) and the seed floor "
              f"({', '.join(options.floor_branches)} × seeds "
              f"{', '.join(map(str, options.floor_seeds))})", 5)
    _embed_states(options, work, data_dir)
    runs = _train(branches, options, work)
    times["train"] = time.perf_counter() - t

    t = stage("predict", 6)
    _score_in_parallel(runs, options, work, data_dir)
    predict_runs(runs_dir=work.runs, pool_path=work.pool, audit_dir=work.audit,
                 benchmarks="all,derived", data_dir=data_dir, derived_dir=work.derived)
    times["predict"] = time.perf_counter() - t

    t = stage(f"outside guard ({profanity.NAME})", 7)
    _score_outside(data_dir=data_dir, work=work)
    times["outside"] = time.perf_counter() - t

    t = stage("report", 8)
    report = make_report(ReportOptions(
        runs_dir=work.runs, pool_path=work.pool, audit_dir=work.audit,
        out_dir=options.out_dir, n_resamples=options.n_resamples, data_dir=data_dir,
        derived_dir=work.derived, title="guarddiag demo report"))
    times["report"] = time.perf_counter() - t

    _fingerprint(options, work, data_dir)
    write_json({"jobs": options.jobs,
                "stage_seconds": {k: round(v, 1) for k, v in times.items()},
                "runs": [{"run_id": r.run_id, "status": r.status, "wall_s": round(r.wall_s, 1),
                          "val_acc_a": r.val_acc_a} for r in runs]},
               Path(options.work_dir) / "demo_timings.json")
    return DemoResult(out_dir=options.out_dir, work_dir=Path(options.work_dir),
                      stage_seconds=times, headline=tuple(report.headline()))

