"""Sub-command: ``guarddiag report`` — render the diagnostic report from saved tables.

Example (CPU, seconds)::

    guarddiag report --runs-dir work/runs --out reports/demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.typed import name_list

MODEL = "guarddiag.analyses.options:ReportOptions"

_DESCRIPTION = """\
Render the diagnostic report from the saved tables only (no retraining, no re-scoring):
predictions (runs/predictions.parquet and runs/outside/*.parquet), pool.parquet with its
agreement.json, and the audit's summary.json. Writes report.html (self-contained), report.md,
results.json, tables/*.csv and *.tex, figures/*.png and *.pdf. Missing optional inputs (pool,
audit, outside guards) omit their sections with a note.

Example:
  guarddiag report --runs-dir work/runs --out reports/demo
  guarddiag report --mapping strict --bootstrap 5000 --seed 7 --out reports/strict"""


def _group(value: str) -> tuple[str, ...]:
    names = name_list(value)
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of branch names")
    return names


def register(sub, bench) -> None:
    p = add_parser(sub, "report", help="render the diagnostic report from saved predictions",
                   description=_DESCRIPTION)
    add_work_paths(p, "runs", "pool", "audit", "derived", help={
        "runs": "folder with predictions.parquet and outside/*.parquet",
        "pool": "pool.parquet (VAL gold labels, pool statistics); optional",
        "audit": "contamination audit folder with summary.json; optional"})
    add_options(p, MODEL, {
        "out_dir": Flag(names=("--out",), type=Path, metavar="DIR"),
        "mapping": Flag(choices=("loose", "strict"),
                        help="binary mapping of the primary tables (both are always computed): "
                             "loose = BOUNDARY_SAFE is safe, strict = BOUNDARY_SAFE is unsafe"),
        "threshold": Flag(type=float),
        "n_resamples": Flag(names=("--bootstrap",), type=int, metavar="B"),
        "confidence": Flag(type=float),
        "seed": Flag(type=int, help="seed of the bootstrap"),
        "primary_subset": Flag(names=("--subset",), choices=("decontaminated", "full")),
        "min_seeds": Flag(type=int),
        "alpha": Flag(type=float,
                      help="level of the route-matched calls (each route's A − B test at the "
                           "matched threshold) and of the span test's statistics"),
        "equivalence_margin": Flag(type=float,
                                   help="a benchmark is called capability only where TOST puts "
                                        "the route-matched policy contrast within ±this share"),
        "competence_floor": Flag(type=float,
                                 help="mean reference CAP on the study's clear-harm benchmarks "
                                      "below which the report opens with a caution that a "
                                      "capability call does not mean detection (the default "
                                      "is the study's lowest)"),
        "rank_group": Flag(type=_group, metavar="E1,E7,…",
                           help="branches of the exact rank test (default: the A-last group, "
                                "the study branches whose spec says last_policy: A; naming an "
                                "unknown branch is an error)"),
        "rank_benchmark": Flag(metavar="ID"),
        "rank_tail": Flag(choices=("top", "bottom", "either"),
                          help="declared direction of the rank test: the group scores highest "
                               "(top), lowest (bottom) or either"),
        "title": Flag(help="report title")},
        elsewhere={"runs_dir": "--runs-dir", "pool_path": "--pool", "audit_dir": "--audit-dir",
                   "derived_dir": "--derived-dir", "data_dir": "--data-dir"},
        api_only={"rank_explicit": "set by the command line itself: --rank-group or "
                                   "--rank-benchmark given"})
    p.set_defaults(handler=_run_report)


def report_options(args: argparse.Namespace):  # -> ReportOptions (imported lazily)
    """The :class:`~guarddiag.analyses.options.ReportOptions` the command line asked for:
    the flags given, every other field at its declared default."""
    from guarddiag.analyses.options import ReportOptions

    paths = work_paths_from(args)
    return options_from(
        args, ReportOptions, where="guarddiag report", runs_dir=paths.runs,
        pool_path=paths.pool, audit_dir=paths.audit, derived_dir=paths.derived,
        data_dir=getattr(args, "data_dir", None),
        rank_explicit=hasattr(args, "rank_group") or hasattr(args, "rank_benchmark"))


def _run_report(args: argparse.Namespace) -> int:
    from guarddiag.report import make_report

    result = make_report(report_options(args))
    print(f"report: {result.out_dir / 'report.html'}")
    width = max((len(section) for section, _ in result.sections), default=0) + 2
    for section, note in result.sections:
        print(f"  {section:<{width}}{'omitted: ' + note if note else 'ok'}")
    for line in result.headline():
        print(line)
    return 0
