"""Sub-command: ``guarddiag predict`` — score every finished run into predictions.parquet.

Examples::

    guarddiag predict
    guarddiag predict --device cuda
    guarddiag predict --benchmarks harmbench_copyright,orbench_hard
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from guarddiag.cli import add_parser, add_work_paths, print_table, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.paths import resolve_data_dir

if TYPE_CHECKING:
    from guarddiag.predict.options import PredictOptions

MODEL = "guarddiag.predict.options:PredictOptions"

SCORING_FLAGS = {"benchmarks": Flag(metavar="IDS"), "batch_size": Flag(type=int, metavar="N"),
                 "device": Flag(metavar="DEVICE")}
"""The scoring flags ``predict`` and ``sweep`` share."""

WORK_FIELDS = {"runs_dir": "--runs-dir", "pool_path": "--pool", "audit_dir": "--audit-dir",
               "derived_dir": "--derived-dir", "data_dir": "--data-dir"}
"""PredictOptions fields set by the shared work-folder flags."""


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "predict", help="score every finished run on every benchmark → predictions.parquet",
        description="Score every finished run under --runs-dir, and the TF-IDF baseline, on\n"
                    "every available benchmark subset and on the pool's val split (benchmark\n"
                    "pool_val), into <runs-dir>/predictions.parquet. Runs already scored with\n"
                    "unchanged inputs are not re-scored, and subsets scored earlier stay in\n"
                    "the table when --benchmarks selects others. A benchmark's survives_decontam\n"
                    "comes only from an audit that covers it (--audit-dir); the others keep the\n"
                    "flags the table holds, and predictions.decontam.json records the audit\n"
                    "(folder, pool digest, options) each benchmark's flags came from.\n\n"
                    "  guarddiag predict\n"
                    "  guarddiag predict --benchmarks harmbench_copyright,orbench_hard\n"
                    "  guarddiag predict --benchmarks my_set --audit-dir work/my_audit")
    add_work_paths(p, "runs", "pool", "audit", "derived",
                   help={"pool": "labelled pool, for its val split"})
    add_options(p, MODEL, {
        **SCORING_FLAGS,
        "baseline": Flag(names=("--no-baseline",), action="store_false",
                         help="leave the TF-IDF baseline out"),
        "threads": Flag(type=int, metavar="N")},
        elsewhere=WORK_FIELDS,
        api_only={"out_path": "the table's place is <runs-dir>/predictions.parquet, which "
                              "report and sweep read"})
    p.set_defaults(handler=_run_predict)


def predict_options(args: argparse.Namespace) -> PredictOptions:
    """The :class:`~guarddiag.predict.options.PredictOptions` the command line asked for: the
    flags given, every other field at its declared default."""
    from guarddiag.predict.options import PredictOptions

    paths = work_paths_from(args)
    return options_from(args, PredictOptions, where=f"guarddiag {args.command}",
                        runs_dir=paths.runs, pool_path=paths.pool, audit_dir=paths.audit,
                        derived_dir=paths.derived, data_dir=resolve_data_dir(args.data_dir))


def _run_predict(args: argparse.Namespace) -> int:
    from guarddiag.predict import predict_runs

    result = predict_runs(predict_options(args))
    rows = [(r.run_id, r.guard_kind, str(r.n_scored), str(r.n_total), f"{r.seconds:.1f}")
            for r in result.runs]
    print_table(("run", "kind", "scored_now", "prompts", "seconds"), rows)
    print(f"wrote {result.path}: {result.n_rows} rows, {len(result.runs)} runs, "
          f"{len(result.benchmarks)} subsets")
    if result.unavailable:
        print(f"unavailable subsets (skipped): {', '.join(result.unavailable)}")
    print(result.decontam_note)
    return 0
