"""Sub-command ``runs prune``: remove a benchmark's rows from a runs folder, on purpose.

Example::

    guarddiag runs prune --benchmarks ho_aegis_harmful
"""

from __future__ import annotations

import argparse

from guarddiag.cli import add_group, add_parser, add_work_paths, work_paths_from
from guarddiag.typed import name_list


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    runs_sub = add_group(
        sub, "runs", help="the runs folder: prune a benchmark's rows",
        description="Maintenance of the runs folder (predictions.parquet, outside/, each "
                    "run's score cache).")
    prune = add_parser(
        runs_sub, "prune", help="remove every row of the named benchmarks",
        description="Remove the named benchmarks' rows from predictions.parquet, every\n"
                    "outside guard's table and every run's score cache. Use it for a\n"
                    "benchmark whose manifest is gone (the report lists it as 'scored\n"
                    "earlier, manifest not found' and leaves it out) or one you no longer\n"
                    "want scored. Other benchmarks' rows stay as they were; a guard's raw\n"
                    "answers stay, so scoring the benchmark again reuses them.\n\n"
                    "  guarddiag runs prune --benchmarks ho_aegis_harmful,team_benign")
    prune.add_argument("--benchmarks", required=True, metavar="IDS",
                       help="comma-separated benchmark ids")
    add_work_paths(prune, "runs")
    prune.set_defaults(handler=_run_prune)


def _run_prune(args: argparse.Namespace) -> int:
    from guarddiag.runs import prune_benchmarks

    runs_dir = work_paths_from(args).runs
    result = prune_benchmarks(runs_dir, name_list(args.benchmarks))
    for path, n in result.removed.items():
        print(f"removed {n:,} row(s) from {path}")
    print(f"pruned {', '.join(result.benchmarks)}: {result.n_removed:,} row(s) removed "
          f"from {runs_dir}")
    return 0
