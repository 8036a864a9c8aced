"""Sub-command: ``guarddiag label`` — relabel prompts under a written policy with an LLM
committee.

Example::

    guarddiag label --policy policy_c.md --committee committee.yaml --pool work/pool/pool.parquet
"""

from __future__ import annotations

import argparse

from guarddiag.cli import add_parser
from guarddiag.cli.options import Flag, add_options, options_from

MODEL = "guarddiag.guards.options:LabelOptions"


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    label = add_parser(
        sub, "label", help="relabel prompts under a written policy with an LLM committee",
        description="A three-round binary cascade (harmful? → boundary vs generic, or compound\n"
                    "vs harmful), every question asked of every committee model several times;\n"
                    "majority vote (an exact tie resolves to yes and is flagged), Fleiss kappa\n"
                    "per round. Votes are appended to <out>/votes.jsonl as they arrive; a rerun\n"
                    "asks only for missing votes. Writes <out>/labels.parquet (prompt_id,\n"
                    "label_c, …), summary.json, meta.json.\n\n"
                    "  guarddiag label --policy policy_c.md --committee committee.yaml \\\n"
                    "      --pool work/pool/pool.parquet --out work/label")
    add_options(label, MODEL, {"policy": Flag(required=True, metavar="FILE"),
                               "committee": Flag(required=True, metavar="FILE"),
                               "pool": Flag(required=True, metavar="FILE"),
                               "out_dir": Flag(names=("--out",), metavar="DIR")})
    label.set_defaults(handler=_run_label)


def _run_label(args: argparse.Namespace) -> int:
    from guarddiag.guards.committee import describe_committee, label_pool
    from guarddiag.guards.committee_spec import load_committee
    from guarddiag.guards.options import LabelOptions
    from guarddiag.guards.parsing import OUTCOMES

    options = options_from(args, LabelOptions, where="guarddiag label")
    committee = load_committee(options.committee)
    result = label_pool(policy=options.policy, committee=committee, pool=options.pool,
                        out_dir=options.out_dir)
    print(f"labels: {result.out_dir / 'labels.parquet'}  ({result.n_asked} votes asked, "
          f"{result.n_reused} reused, {result.n_unanswered} unanswered)")
    print(f"committee: {describe_committee(committee)}")
    print(f"{'round':<9} {'prompts':>7} {'votes':>6} {'ties':>5} {'kappa_n':>7}  "
          f"{'fleiss_kappa [95% interval]':<29} votes not read (never guessed)")
    for r in result.rounds:
        kappa = "-" if r.fleiss_kappa is None else f"{r.fleiss_kappa:.3f}"
        if r.kappa_low is not None and r.kappa_high is not None:
            kappa += f" [{r.kappa_low:.3f}, {r.kappa_high:.3f}]"
        unread = ", ".join(f"{o} {r.outcomes[o]}" for o in OUTCOMES
                           if o != "parsed" and r.outcomes.get(o))
        print(f"{r.round:<9} {r.n_prompts:>7} {r.n_votes:>6} {r.n_ties:>5} "
              f"{r.n_kappa_prompts:>7}  {kappa:<29} {r.n_invalid}"
              + (f" ({unread})" if unread else ""))
    counts = result.labels.group_by("label_c").len().sort("label_c")
    print("classes: " + ", ".join(f"{k or 'undecided'} {v}" for k, v in
                                  zip(counts["label_c"].to_list(), counts["len"].to_list(),
                                      strict=True)))
    print(f"generation: {result.timing.line()}")
    return 0 if result.n_unanswered == 0 else 1
