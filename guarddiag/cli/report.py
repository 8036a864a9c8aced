"""Sub-command: ``guarddiag report`` — render the diagnostic report from saved tables.

Example (CPU, seconds)::

    guarddiag report --runs-dir work/runs --out reports/demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

from guarddiag.cli import add_parser, add_work_paths, work_paths_from

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
    names = tuple(v.strip() for v in value.split(",") if v.strip())
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
    # Options the user leaves out are absent here (SUPPRESS): their defaults are those of
    # ReportOptions, declared once; the "(default …)" in each help is checked against it by
    # tests/test_options_defaults.py. Importing ReportOptions here would slow every --help.
    unset = argparse.SUPPRESS
    p.add_argument("--out", dest="out_dir", type=Path, default=unset, metavar="DIR",
                   help="output folder, reports/<name> (default reports/report)")
    p.add_argument("--mapping", default=unset, choices=("loose", "strict"),
                   help="binary mapping of the primary tables (both are always computed): "
                        "loose = BOUNDARY_SAFE is safe, strict = BOUNDARY_SAFE is unsafe "
                        "(default loose)")
    p.add_argument("--threshold", type=float, default=unset,
                   help="a prompt reads unsafe when P(unsafe) >= this (default 0.5)")
    p.add_argument("--bootstrap", dest="n_resamples", type=int, default=unset, metavar="B",
                   help="prompt-bootstrap resamples per score (default 2000)")
    p.add_argument("--confidence", type=float, default=unset,
                   help="coverage of every interval (default 0.95)")
    p.add_argument("--seed", type=int, default=unset,
                   help="seed of the bootstrap (default 0)")
    p.add_argument("--subset", dest="primary_subset", default=unset,
                   choices=("decontaminated", "full"),
                   help="prompt subset of the primary tables and of the policy/capability "
                        "call (default decontaminated)")
    p.add_argument("--min-seeds", type=int, default=unset,
                   help="seeds a recipe needs to count as a seed group for the floor "
                        "(default 3)")
    p.add_argument("--alpha", type=float, default=unset,
                   help="level of the route-matched calls (each route's A − B test at the "
                        "matched threshold) and of the span test's statistics (default 0.05)")
    p.add_argument("--equivalence-margin", type=float, default=unset,
                   help="a benchmark is called capability only where TOST puts the "
                        "route-matched policy contrast within ±this share (default 0.05)")
    p.add_argument("--competence-floor", type=float, default=unset,
                   help="mean reference CAP on the study's clear-harm benchmarks below which "
                        "the report opens with a caution that a capability call does not mean "
                        "detection (default 0.8, the study's lowest)")
    p.add_argument("--rank-group", type=_group, default=unset, metavar="E1,E7,…",
                   help="branches of the exact rank test (default: the A-last group, the "
                        "study branches whose spec says last_policy: A; naming an unknown "
                        "branch is an error)")
    p.add_argument("--rank-benchmark", default=unset, metavar="ID",
                   help="benchmark of the rank test (default harmbench_copyright)")
    p.add_argument("--rank-tail", default=unset, choices=("top", "bottom", "either"),
                   help="declared direction of the rank test: the group scores highest (top), "
                        "lowest (bottom) or either (default top)")
    p.add_argument("--title", default=unset, help="report title (default guarddiag report)")
    p.set_defaults(handler=_run_report)


_OPTION_DESTS = ("out_dir", "mapping", "threshold", "n_resamples", "confidence", "seed",
                 "primary_subset", "min_seeds", "alpha", "equivalence_margin",
                 "competence_floor", "rank_group", "rank_benchmark", "rank_tail", "title")
"""The flags that set a :class:`~guarddiag.analyses.options.ReportOptions` field of the same
name."""


def report_options(args: argparse.Namespace):  # -> ReportOptions (imported lazily)
    """The :class:`~guarddiag.analyses.options.ReportOptions` the command line asked for:
    the flags given, every other field at its declared default."""
    from guarddiag.analyses.options import ReportOptions
    from guarddiag.typed import validate

    paths = work_paths_from(args)
    given = {k: getattr(args, k) for k in _OPTION_DESTS if hasattr(args, k)}
    given["rank_explicit"] = hasattr(args, "rank_group") or hasattr(args, "rank_benchmark")
    return validate(ReportOptions, {
        "runs_dir": paths.runs, "pool_path": paths.pool, "audit_dir": paths.audit,
        "derived_dir": paths.derived, "data_dir": getattr(args, "data_dir", None), **given},
        where="guarddiag report")


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
