"""Sub-command: ``guarddiag demo`` — the whole study at CPU size, end to end."""

from __future__ import annotations

import argparse
from pathlib import Path

from guarddiag.cli import add_parser
from guarddiag.cores import usable_cores

_DESCRIPTION = """\
Run the whole study at CPU size, in order: data check (pulling data when there is none), pool
build, contamination audit, SORRY-Bench's deterministic mutations of sorrybench, training of
the teachers, the reference and E1-E10 (seed 42) plus seeds 43/44 of every recipe (the seed
floor), at the pretrained CPU size minilm (all-MiniLM-L6-v2 frozen, its states cached once per
prompt; --size micro for the random-init test size),
prediction on every available benchmark and mutated subset, a real outside guard
(alt-profanity-check, when the demo extra is installed) on the same prompts, and the report.

Training and scoring run --jobs runs at a time (default: one per usable core), each in its own
process with one torch thread; the bytes are the same as one after another (--jobs 1).

Resumable: a re-run reuses the finished audit, skips finished training runs, resumes an
interrupted one and scores only runs not yet scored; a second demo reads every encoder state
from the cache ($GUARDDIAG_STATES, else ~/.cache/guarddiag/states).

Example:
  GUARDDIAG_DATA=../shared/data guarddiag demo
  guarddiag demo --work-dir work/demo --out reports/demo --floor-branches reference,E8"""


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}"
                                         ) from None


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return n


def register(sub, bench) -> None:
    from guarddiag.demo_defaults import DEMO_SIZE, FLOOR_BRANCHES, FLOOR_SEEDS, MUTATIONS

    p = add_parser(sub, "demo", help="run the whole study at CPU size, end to end (resumable)",
                   description=_DESCRIPTION)
    p.add_argument("--work-dir", type=Path, default=Path("work/demo"), metavar="DIR",
                   help="pool, audit, runs and predictions of the demo")
    p.add_argument("--out", type=Path, default=Path("reports/demo"), metavar="DIR",
                   help="report folder")
    p.add_argument("--size", default=DEMO_SIZE, metavar="SIZE",
                   help="model size of the students (teachers one size up; default "
                        "%(default)s, see `guarddiag train --list-sizes`)")
    p.add_argument("--floor-branches", type=_names, default=",".join(FLOOR_BRANCHES),
                   metavar="NAMES",
                   help="recipes trained at the extra seeds to measure the seed floor "
                        "(default: all)")
    p.add_argument("--floor-seeds", type=_seeds, default=",".join(map(str, FLOOR_SEEDS)),
                   metavar="SEEDS",
                   help="extra seeds of the floor recipes (with 42 they form a triplet); "
                        "an empty string skips the floor")
    p.add_argument("--mutations", type=_names, default=",".join(MUTATIONS), metavar="NAMES",
                   help="mutations of sorrybench (names or groups, see `guarddiag mutate "
                        "--help`); an empty string skips them")
    p.add_argument("--mirror", default=None, metavar="URL",
                   help="served copy of a data directory, used when no data is present")
    p.add_argument("--bootstrap", type=int, default=2000, metavar="B",
                   help="prompt-bootstrap resamples per score in the report")
    p.add_argument("--jobs", type=_jobs, default=usable_cores(), metavar="N",
                   help="runs trained and scored at a time (default: usable cores, here "
                        "%(default)s; 1 = one after another in this process)")
    p.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from guarddiag.demo import DemoOptions, run_demo

    result = run_demo(DemoOptions(
        data_dir=args.data_dir, work_dir=args.work_dir, out_dir=args.out, size=args.size,
        floor_branches=args.floor_branches, floor_seeds=args.floor_seeds,
        mutations=args.mutations, mirror=args.mirror,
        n_resamples=args.bootstrap, jobs=args.jobs))
    print(f"demo report: {result.out_dir / 'report.html'}")
    print("stage times: " + ", ".join(f"{k} {v:.0f} s" for k, v in result.stage_seconds.items()))
    for line in result.headline:
        print(line)
    return 0
