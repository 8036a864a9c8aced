"""Sub-commands: ``guarddiag export decontaminated`` and ``guarddiag export card``."""

from __future__ import annotations

import argparse
from pathlib import Path

from guarddiag.cli import add_group, add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.paths import resolve_data_dir

# Handlers import guarddiag.exports (datasets, pyarrow) when they run, and the flags' models
# live in guarddiag.export_options, so that building the parser and `--help` stay fast.

_DECONTAMINATED = """\
Write the prompts that survive decontamination, per audited benchmark, for other tools:
<out>/<benchmark>.jsonl (benchmark, prompt_id, text, label_kind, category), a Hugging Face
datasets folder <out>/hf/ (one split per benchmark; datasets.load_from_disk reads it) and
<out>/manifest.json (rows and sha256 per file). Same audit, same bytes.

Example:
  guarddiag export decontaminated --audit-dir work/audit --out exports/decontaminated"""

_CARD = """\
Write a report's disclosure card as model-card YAML (what a guard release should publish beside
its scores): per benchmark the prompts, the share found in the training pool, and the
policy/capability call with its test statistics, plus the report's settings and competence
check. Reads <report>/results.json; writes <report>/card.yaml unless --out is given.

Example:
  guarddiag export card --report reports/demo"""


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    export_sub = add_group(sub, "export", help="decontaminated subsets (JSONL, HF datasets) "
                                               "and the disclosure card (model-card YAML)",
                           description="Exports for other tools.", metavar="WHAT")
    deco = add_parser(export_sub, "decontaminated", help="decontaminated benchmark prompts",
                      description=_DECONTAMINATED)
    add_options(deco, "guarddiag.export_options:DecontaminatedOptions", {
        "benchmarks": Flag(metavar="IDS"), "out": Flag(type=Path, metavar="DIR"),
        "hf": Flag(names=("--no-hf",), action="store_false",
                   help="skip the Hugging Face datasets folder (JSONL only)")})
    add_work_paths(deco, "audit", "derived", help={"audit": "audit folder with summary.json"})
    deco.set_defaults(handler=_run_decontaminated)

    card = add_parser(export_sub, "card", help="the disclosure card as model-card YAML",
                      description=_CARD)
    card.add_argument("--report", type=Path, required=True, metavar="DIR",
                      help="report folder holding results.json")
    add_options(card, "guarddiag.export_options:CardOptions",
                {"out": Flag(type=Path, metavar="FILE")})
    card.set_defaults(handler=_run_card)


def _run_decontaminated(args: argparse.Namespace) -> int:
    from guarddiag.export_options import DecontaminatedOptions
    from guarddiag.exports import export_decontaminated

    paths = work_paths_from(args)
    options = options_from(args, DecontaminatedOptions, where="guarddiag export decontaminated")
    result = export_decontaminated(paths.audit, options,
                                   data_dir=resolve_data_dir(args.data_dir),
                                   derived_dir=paths.derived)
    for name, n in result.rows.items():
        print(f"{name:<28} {n:>7,}  {result.out_dir / (name + '.jsonl')}")
    if result.hf_dir is not None:
        print(f"Hugging Face datasets folder: {result.hf_dir}")
    return 0


def _run_card(args: argparse.Namespace) -> int:
    from guarddiag.export_options import CardOptions
    from guarddiag.exports import export_card

    result = export_card(args.report, options_from(args, CardOptions,
                                                   where="guarddiag export card"))
    print(result.path)
    return 0
