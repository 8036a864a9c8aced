"""Sub-command: ``guarddiag pool build`` (the dual-policy training pool)."""

from __future__ import annotations

import argparse
import logging

from guarddiag.cli import add_group, add_parser
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.labels import CLASSES
from guarddiag.paths import resolve_data_dir

logger = logging.getLogger(__name__)

# Handlers import their stage package (polars) and guarddiag.progress (tqdm) when they run:
# every sub-command module is imported to build the parser, and `guarddiag --help` stays fast.

_DESCRIPTION = """\
Build the dual-policy training pool from the public prompt sources a recipe names.

Every prompt is labelled twice, under policy A (a moderator rulebook) and policy B (genuinely
harmful intent only), by the category -> class rules in data_manifests/policies/. The recipe
(default: data_manifests/pools/default.yaml) also adds copyright-reproduction requests built
from title lists, COMPOUND rows (a benign instruction joined to a blocked request, span kept)
and jailbreak-wrapped benign requests, then de-duplicates and splits train/val/cal.

Writes <out>/pool.parquet, <out>/agreement.json and <out>/meta.json, and prints the sizes,
class counts per policy, agreement statistics and the A x B confusion matrix.

example:
  guarddiag pool build --out work/pool
"""


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    pool_sub = add_group(sub, "pool", help="build the dual-policy training pool",
                         description="Training-pool commands.")
    build = add_parser(pool_sub, "build", help="label public prompts under policies A and B",
                       description=_DESCRIPTION)
    add_options(build, "guarddiag.pool.options:PoolOptions", {
        "recipe": Flag(metavar="FILE"), "out_dir": Flag(names=("--out",), metavar="DIR"),
        "seed": Flag(type=int)}, elsewhere={"data_dir": "--data-dir"})
    build.set_defaults(handler=_run_build)


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.1f}%"


def _run_build(args: argparse.Namespace) -> int:
    from guarddiag.pool import build_pool
    from guarddiag.pool.options import PoolOptions

    o = options_from(args, PoolOptions, where="guarddiag pool build",
                     data_dir=getattr(args, "data_dir", None))
    result = build_pool(recipe=o.recipe, data_dir=resolve_data_dir(o.data_dir),
                        out_dir=o.out_dir, seed=o.seed)
    logger.info(f"pool: wrote {result.pool_path}, {result.agreement_path.name}, "
                f"{result.meta_path.name}")

    splits = result.split_counts()
    n_other = int((result.pool["lang"] != "en").sum())
    print(f"pool: {result.pool.height:,} unique prompts (seed {result.seed})")
    print("splits: " + ", ".join(f"{k} {v:,}" for k, v in splits.items())
          + f" (non-English rows, all in val: {n_other:,})")
    print()
    print(f"{'class':<15}{'policy A':>10}{'policy B':>10}")
    for row in result.class_counts().iter_rows(named=True):
        print(f"{row['class']:<15}{row['policy_a']:>10,}{row['policy_b']:>10,}")
    a = result.agreement
    print()
    print(f"coarse exact agreement   {_pct(a.coarse_agreement)}")
    print(f"binary agreement (loose) {_pct(a.binary_agreement)}  "
          f"(disagreement {_pct(1 - a.binary_agreement)}, {a.n_disagree_binary:,} prompts)")
    print(f"binary agreement (strict) {_pct(a.binary_agreement_strict)}")
    print(f"Cohen's kappa            4-class {a.kappa_coarse:.3f}, binary {a.kappa_binary:.3f}")
    for split, sa in result.agreement_by_split.items():
        print(f"  {split:<5} n={sa.n:>6,}  coarse {_pct(sa.coarse_agreement)}  "
              f"binary {_pct(sa.binary_agreement)}")
    print()
    print("confusion (rows: policy A, columns: policy B)")
    short = {"GENERIC_SAFE": "G_SAFE", "BOUNDARY_SAFE": "B_SAFE", "HARMFUL": "HARMFUL",
             "COMPOUND": "COMPOUND"}
    print(f"{'':<15}" + "".join(f"{short[c]:>10}" for c in CLASSES))
    for name, counts in zip(CLASSES, a.confusion, strict=True):
        print(f"{name:<15}" + "".join(f"{v:>10,}" for v in counts))
    return 0
