"""Sub-commands: ``guarddiag audit`` and ``guarddiag bench audit``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.paths import resolve_data_dir

# Handlers import their stage package (polars) and guarddiag.progress (tqdm) when they run:
# every sub-command module is imported to build the parser, and `guarddiag --help` stays fast.

_AUDIT_DESCRIPTION = """\
Contamination audit of a training pool against public benchmark subsets.

Per benchmark it counts exact overlaps (equal after normalisation: Unicode NFKC, casefold,
punctuation and symbols to spaces, whitespace collapsed) and, with --near-dup, near duplicates
as a separate column (word-set Jaccard >= --threshold, found with a prefix-filter index that
loses no pair) and, with --templates, template overlaps (the same sentence with other quoted
titles or names). It writes overlap.parquet, decontaminated/<benchmark>.txt, summary.json,
overlap.png/.pdf and meta.json to --out, and prints the per-benchmark table.

Exit status: 0 = done, 1 = a benchmark is above --fail-above, 2 = bad input.

Example:
  guarddiag audit --pool work/pool/pool.parquet --near-dup --fail-above 5"""

_BENCH_DESCRIPTION = """\
Throughput of the contamination audit on seeded synthetic pools: an exact audit of --rows rows
against all available benchmarks (target: 1,000,000 rows in under 60 s on 2 cores) and a
near-duplicate audit of --near-rows rows (target: 270,000 rows in under 10 min). Pool texts are
stitched from 3-12-word fragments of real prompts (the benchmarks, or --corpus), with
log-normal lengths, and a seeded share of planted exact and near copies of benchmark prompts
whose recovery is checked. Then near-dup recall and precision against a brute-force scan of
every (row, prompt) pair on --recall-rows rows. Prints wall time and rows/s; nothing is
pass/fail.

Example (the acceptance sizes, ~1 min on 2 cores):
  guarddiag bench audit
  guarddiag bench audit --rows 0 --near-rows 0 --recall-pool work/pool/pool.parquet"""


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = add_parser(sub, "audit", help="contamination audit of a pool against benchmarks",
                        description=_AUDIT_DESCRIPTION)
    parser.add_argument("--text-column", default="text", metavar="C",
                        help="column holding the prompt text")
    parser.add_argument("--id-column", default="prompt_id", metavar="C",
                        help="column holding unique row ids; 'none' numbers rows from 1")
    parser.add_argument("--benchmarks", default="all", metavar="IDS",
                        help="'all', 'study' or comma-separated subset ids "
                             "(see `guarddiag data list`)")
    parser.add_argument("--near-dup", action="store_true",
                        help="also find near duplicates (word-set Jaccard >= --threshold)")
    parser.add_argument("--threshold", type=float, default=0.8, metavar="J",
                        help="word-set Jaccard at or above which a pool row is a near duplicate")
    # Defaults live in guarddiag.audit.result (importing it here would load polars for --help);
    # tests/test_cli.py checks that the help states them.
    parser.add_argument("--short-words", type=int, default=None, metavar="N",
                        help="benchmark prompts with fewer distinct words than N are short: one "
                             "changed word can flip their meaning ('gut a fish' / 'gut a "
                             "human'), so their near duplicates need --short-threshold "
                             "(default 10)")
    parser.add_argument("--short-threshold", type=float, default=None, metavar="J",
                        help="word-set Jaccard a short prompt's near duplicate needs "
                             "(default 0.9)")
    parser.add_argument("--drop-near", action="store_true",
                        help="decontaminated lists drop near duplicates too (default: exact "
                             "overlaps only, as in the study); needs --near-dup")
    parser.add_argument("--templates", action="store_true",
                        help="also count template overlaps: a pool row that is the benchmark "
                             "prompt with other quoted titles or names ('Generate the lyrics of "
                             "\"X\" by Y' for another X and Y)")
    parser.add_argument("--drop-template", action="store_true",
                        help="decontaminated lists drop template overlaps too; needs "
                             "--templates")
    parser.add_argument("--fail-above", type=float, default=None, metavar="PCT",
                        help="exit with status 1 when decontamination removes more than PCT%% "
                             "of any benchmark (a release gate)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default <work-dir>/audit)")
    add_work_paths(parser, "pool", "derived",
                   help={"pool": "pool table: parquet, CSV/TSV or JSON lines"})
    parser.add_argument("--force", action="store_true",
                        help="recompute even when --out already holds this exact audit")
    parser.set_defaults(handler=_run_audit)

    bparser = add_parser(bench, "audit", help="throughput of the exact and near-dup audit",
                         description=_BENCH_DESCRIPTION)
    bparser.add_argument("--rows", type=int, default=1_000_000, metavar="N",
                         help="rows of the synthetic pool for the exact audit (0 skips it)")
    bparser.add_argument("--near-rows", type=int, default=270_000, metavar="N",
                         help="rows of the synthetic pool for the near-dup audit (0 skips it)")
    bparser.add_argument("--threshold", type=float, default=0.8, metavar="J",
                         help="near-duplicate word-set Jaccard threshold")
    bparser.add_argument("--corpus", default=None, metavar="FILE",
                         help="table whose 'text' column supplies the fragments (default: the "
                              "benchmark prompts themselves, the hardest case for the index)")
    bparser.add_argument("--seed", type=int, default=0,
                         help="seed of the synthetic pools (default: 0)")
    bparser.add_argument("--benchmarks", default="all", metavar="IDS",
                         help="benchmark subsets to audit against")
    bparser.add_argument("--recall-rows", type=int, default=5000, metavar="N",
                         help="pool rows on which near-dup recall and precision are checked "
                              "against a brute-force scan of every pair (0 skips it)")
    bparser.add_argument("--recall-pool", default=None, metavar="FILE",
                         help="table with a 'text' column to sample the recall rows from "
                              "(default: the synthetic pool), e.g. work/pool/pool.parquet")
    bparser.add_argument("--recall-figure", default=None, metavar="PATH",
                         help="also save the recall-by-Jaccard-bucket plot as PATH.png/.pdf")
    bparser.set_defaults(handler=_run_bench)


def _run_audit(args: argparse.Namespace) -> int:
    from guarddiag.audit import audit_pool
    from guarddiag.audit.result import DEFAULT_SHORT_THRESHOLD, DEFAULT_SHORT_WORDS
    from guarddiag.progress import say

    paths = work_paths_from(args)
    out = args.out if args.out is not None else paths.audit
    id_column = None if args.id_column.lower() == "none" else args.id_column
    result = audit_pool(paths.pool, text_column=args.text_column, id_column=id_column,
                        benchmarks=args.benchmarks, data_dir=resolve_data_dir(args.data_dir),
                        derived_dir=paths.derived, near_dup=args.near_dup,
                        threshold=args.threshold, drop_near=args.drop_near, out_dir=out,
                        short_words=(DEFAULT_SHORT_WORDS if args.short_words is None
                                     else args.short_words),
                        short_threshold=(DEFAULT_SHORT_THRESHOLD if args.short_threshold is None
                                         else args.short_threshold),
                        force=args.force, templates=args.templates,
                        drop_template=args.drop_template)
    print(result.render())
    say(f"audit: wrote {out}/ (overlap.parquet, decontaminated/, summary.json, "
        "overlap.png, overlap.pdf, meta.json)")
    if args.fail_above is not None:
        over = result.above(args.fail_above)
        if over:
            listed = ", ".join(f"{b.benchmark} {b.pct_removed:.1f}%" for b in over)
            print(f"guarddiag: audit gate failed: {len(over)} benchmark(s) above "
                  f"{args.fail_above:g}%: {listed}", file=sys.stderr)
            return 1
    return 0


def _run_bench(args: argparse.Namespace) -> int:
    from guarddiag.audit.bench import bench_audit

    report = bench_audit(rows=args.rows, near_rows=args.near_rows, threshold=args.threshold,
                         corpus=args.corpus, seed=args.seed, benchmarks=args.benchmarks,
                         data_dir=resolve_data_dir(args.data_dir),
                         recall_rows=args.recall_rows, recall_pool=args.recall_pool,
                         recall_figure=args.recall_figure)
    print(report.render())
    return 0
