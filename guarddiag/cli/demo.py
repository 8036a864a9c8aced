"""Sub-command: ``guarddiag demo`` — the whole study at CPU size, end to end."""

from __future__ import annotations

import argparse
from pathlib import Path

from guarddiag.cli import add_parser
from guarddiag.cli.options import Flag, add_options, comma_ints, options_from
from guarddiag.typed import name_list

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


_MODEL = "guarddiag.demo_defaults:DemoOptions"


def register(sub, bench) -> None:
    p = add_parser(sub, "demo", help="run the whole study at CPU size, end to end (resumable)",
                   description=_DESCRIPTION)
    add_options(p, _MODEL, {
        "work_dir": Flag(metavar="DIR", type=Path),
        "out_dir": Flag(names=("--out",), metavar="DIR", type=Path),
        "size": Flag(metavar="SIZE"),
        "floor_branches": Flag(type=name_list, metavar="NAMES"),
        "floor_seeds": Flag(type=comma_ints, metavar="SEEDS"),
        "mutations": Flag(type=name_list, metavar="NAMES"),
        "mirror": Flag(metavar="URL"),
        "n_resamples": Flag(names=("--bootstrap",), type=int, metavar="B"),
        "jobs": Flag(type=int, metavar="N"),
    }, elsewhere={"data_dir": "--data-dir"},
        api_only={"seed": "the study's first seed; the floor seeds are the flag to change"})
    p.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from guarddiag.demo import run_demo
    from guarddiag.demo_defaults import DemoOptions

    result = run_demo(options_from(args, DemoOptions, where="guarddiag demo",
                                   data_dir=args.data_dir))
    print(f"demo report: {result.out_dir / 'report.html'}")
    print("stage times: " + ", ".join(f"{k} {v:.0f} s" for k, v in result.stage_seconds.items()))
    for line in result.headline:
        print(line)
    return 0
