"""Sub-command: ``guarddiag sweep`` — train the grid as parallel tasks, then predict.

Examples::

    guarddiag sweep --engine local --jobs 2
    guarddiag sweep --engine ray --address auto --sizes base --seeds 42,43
"""

from __future__ import annotations

import argparse

from guarddiag.cli import add_parser, add_work_paths, print_table, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.cli.predict import MODEL as PREDICT_MODEL
from guarddiag.cli.predict import SCORING_FLAGS, WORK_FIELDS, predict_options
from guarddiag.cli.train import (
    TRAIN_FLAGS,
    add_plan_options,
    add_train_options,
    plan_options,
    train_options,
)

SWEEP_MODEL = "guarddiag.predict.options:SweepOptions"


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "sweep", help="train the grid as parallel tasks (process pool or Ray), then predict",
        description="Train every run of --branches × --sizes × --seeds as parallel tasks that\n"
                    "respect the dependencies (teachers → reference → branches; head-only after\n"
                    "its encoder), then score every run in parallel and write the predictions\n"
                    "table (the same bytes as `train` + `predict`). --engine local uses a\n"
                    "process pool of --jobs workers; --engine ray submits Ray tasks (num_gpus=1\n"
                    "per CUDA run, else num_cpus=1), retried on worker loss; pip install -e\n"
                    "\".[ray]\". Reruns resume from the runs folder.\n\n"
                    "  guarddiag sweep --engine local --jobs 2\n"
                    "  guarddiag sweep --engine ray --address auto --sizes base --seeds 42,43")
    add_plan_options(p)
    add_work_paths(p, "audit", "derived")
    add_options(p, SWEEP_MODEL, {
        "engine": Flag(choices=("local", "ray")),
        "jobs": Flag(type=int, metavar="N"),
        "address": Flag(metavar="ADDR"),
        "predict": Flag(names=("--no-predict",), action="store_false", help="train only")})
    add_train_options(p, {f: TRAIN_FLAGS[f] for f in ("pretrained", "device")})
    add_options(p, PREDICT_MODEL, {f: SCORING_FLAGS[f] for f in ("benchmarks", "batch_size")},
                elsewhere={**WORK_FIELDS, "device": "--device"},
                api_only={"baseline": "sweep fills the branches' score caches; the baseline is "
                                      "predict's", "threads": "one per CPU-size run, as predict",
                          "out_path": "the table's place is <runs-dir>/predictions.parquet"})
    p.set_defaults(handler=_run_sweep)


def _run_sweep(args: argparse.Namespace) -> int:
    from guarddiag.predict import predict_runs
    from guarddiag.predict.options import SweepOptions
    from guarddiag.predict.sweep import sweep

    paths = work_paths_from(args)
    plan = plan_options(args)
    how = options_from(args, SweepOptions, where="guarddiag sweep")
    scoring = predict_options(args)
    res = sweep(names=plan.branches, sizes=plan.sizes, seeds=plan.seeds, runs_dir=paths.runs,
                pool_path=paths.pool, branches_dir=args.branches_dir,
                options=train_options(args), how=how, score=scoring if how.predict else None)
    rows = [(r.run_id, r.status, f"{r.wall_s:.1f}", f"{r.val_acc_a:.3f}", f"{r.val_acc_b:.3f}")
            for r in res.runs]
    print_table(("run", "status", "wall_s", "val_acc_A", "val_acc_B"), rows)
    print(f"{len(res.runs)} run(s) trained in {res.train_wall_s:.1f}s wall on the {res.engine} "
          f"engine" + (f" ({res.jobs} at a time)" if res.engine == "local" else "")
          + (f"; {res.n_scored} prompts scored in {res.score_wall_s:.1f}s"
             if how.predict else ""))
    if how.predict:
        out = predict_runs(scoring)
        print(f"wrote {out.path}: {out.n_rows} rows, {len(out.runs)} runs")
    return 0
