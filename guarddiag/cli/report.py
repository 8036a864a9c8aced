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
    p.add_argument("--out", type=Path, default=Path("reports/report"), metavar="DIR",
                   help="output folder (reports/<name>)")
    p.add_argument("--mapping", default="loose", choices=("loose", "strict"),
                   help="binary mapping of the primary tables (both are always computed): "
                        "loose = BOUNDARY_SAFE is safe, strict = BOUNDARY_SAFE is unsafe")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="a prompt reads unsafe when P(unsafe) >= this")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B",
                   help="prompt-bootstrap resamples per score")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="coverage of the bootstrap percentile intervals")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--subset", default="decontaminated", choices=("decontaminated", "full"),
                   help="prompt subset of the primary tables and of the policy/capability call")
    p.add_argument("--min-seeds", type=int, default=3,
                   help="seeds a recipe needs to count as a seed group for the floor")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="level of the calibrated load test: a benchmark is policy-load where "
                        "the BH q-value of its A-last vs B-last contrast is below this")
    p.add_argument("--competence-floor", type=float, default=0.80,
                   help="mean reference CAP on the study's clear-harm benchmarks below which "
                        "the report opens with a caution that a capability-load call does not "
                        "mean detection (default 0.80, the study's lowest)")
    p.add_argument("--rank-group", type=_group, default=None, metavar="E1,E7,…",
                   help="branches of the exact rank test (default: the A-last group, the "
                        "study branches whose spec says last_policy: A; naming an unknown "
                        "branch is an error)")
    p.add_argument("--rank-benchmark", default=None, metavar="ID",
                   help="benchmark of the rank test (default harmbench_copyright)")
    p.add_argument("--rank-tail", default="top", choices=("top", "bottom", "either"),
                   help="declared direction of the rank test: the group scores highest (top), "
                        "lowest (bottom) or either")
    p.add_argument("--title", default="guarddiag report", help="report title")
    p.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from guarddiag.analyses.rank import DEFAULT_BENCHMARK, DEFAULT_GROUP
    from guarddiag.report import ReportOptions, make_report

    paths = work_paths_from(args)
    options = ReportOptions(
        runs_dir=paths.runs, pool_path=paths.pool, audit_dir=paths.audit,
        out_dir=args.out, mapping=args.mapping, threshold=args.threshold,
        n_resamples=args.bootstrap, confidence=args.confidence, seed=args.seed,
        primary_subset=args.subset, min_seeds=args.min_seeds, alpha=args.alpha,
        competence_floor=args.competence_floor,
        rank_group=args.rank_group or DEFAULT_GROUP,
        rank_benchmark=args.rank_benchmark or DEFAULT_BENCHMARK, rank_tail=args.rank_tail,
        rank_explicit=args.rank_group is not None or args.rank_benchmark is not None,
        title=args.title, data_dir=args.data_dir,
        derived_dir=paths.derived)
    result = make_report(options)
    print(f"report: {result.out_dir / 'report.html'}")
    width = max((len(section) for section, _ in result.sections), default=0) + 2
    for section, note in result.sections:
        print(f"  {section:<{width}}{'omitted: ' + note if note else 'ok'}")
    for line in result.headline():
        print(line)
    return 0
