"""Sub-commands: ``guarddiag audit`` and ``guarddiag bench audit``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import Flag, add_options, comma_ints, options_from
from guarddiag.paths import resolve_data_dir

if TYPE_CHECKING:
    from guarddiag.audit.gate import GateResult
    from guarddiag.audit.options import AuditOptions

logger = logging.getLogger(__name__)

# Handlers import their stage package (polars) and guarddiag.progress (tqdm) when they run:
# every sub-command module is imported to build the parser, and `guarddiag --help` stays fast.

MODEL = "guarddiag.audit.options:AuditOptions"

_AUDIT_DESCRIPTION = """\
Contamination audit of a training pool against public benchmark subsets.

Per benchmark it counts exact overlaps (equal after normalisation: Unicode NFKC, casefold,
punctuation and symbols to spaces, whitespace collapsed) and, with --near-dup, near duplicates
as a separate column (word-set Jaccard >= --threshold, found with a prefix-filter index that
loses no pair), with --templates, template overlaps (the same sentence with other quoted
titles or names) and, with --containment, benchmark prompts held inside longer rows. It
writes overlap.parquet, decontaminated/<benchmark>.txt, summary.json and meta.json (with
--figure also the bar chart overlap.png/.pdf) to --out, and prints the per-benchmark table.

The pool may be one file, a quoted glob over shards, a folder of shards or a datasets
save_to_disk folder, in parquet, Arrow, CSV/TSV or JSON lines (.gz/.zst too); it is read in
batches on every core (or on a Ray cluster with --engine ray), so its size is bounded by disk,
not memory; a big plain JSON-lines file is split into byte ranges. Each finished part is kept in
<out>/.scan until the outputs are written, so a killed or failed run resumes where it stopped
when run again (--force starts over). Bad rows (malformed JSON lines, wrong-typed fields or
ids, missing or repeated ids) are all listed in bad_rows.jsonl with file, physical line and
byte offset in one pass; --bad-rows fail (the default) then exits 2 after the whole scan,
leaving no summary.json, and --bad-rows skip audits the rest.

Audits add up: --benchmarks new_set into an --out that holds an audit of other benchmarks adds
new_set's list and keeps theirs, when that audit is of the same pool with the same options (it
refuses otherwise, naming the difference). provenance.json records per benchmark the audit that
wrote its list (pool digest, options, benchmark digest); predict copies it beside the table.

Texts may come from nested fields (--text-field, repeatable): a chat corpus is audited on both
sides of the conversation with --text-field 'messages[].content' --text-field prompt
--text-field response; rows missing a field are skipped and counted per field, and a turn's
content may be text or a list of parts ({"type": "text", "text": ...}; other parts counted).
rows_to_remove.parquet and .jsonl list every corpus row with a match (id, address: file, row,
physical line and byte offset; field paths, texts, the benchmark prompts and kinds); the
printed summary leads with their count.

Exit status: 0 = done (gates passed), 1 = a gate failed (--fail-above, --max-corpus-rows),
2 = bad input, or a gate could not check (a --text-field held text in no row, a selected
benchmark is unavailable, bad rows were skipped; --allow-missing-field, --allow-unavailable,
--allow-bad-rows accept each), 3 = internal error. The summary always lists what was not
searched.

Examples:
  guarddiag audit --pool work/pool/pool.parquet --near-dup --fail-above 5
  guarddiag audit --pool chat.jsonl --id-column id --text-field 'messages[].content' \\
      --text-field prompt --text-field response --near-dup --templates --containment \\
      --fail-above 0 --max-corpus-rows 0 --out work/audit-chat
  guarddiag audit --benchmarks my_set --out work/audit     # add my_set to the folder"""

_BENCH_DESCRIPTION = """\
Throughput of the contamination audit on seeded synthetic pools: an exact audit of --rows rows
against all available benchmarks (target: 1,000,000 rows in under 60 s on 2 cores) and a
near-duplicate audit of --near-rows rows (target: 270,000 rows in under 10 min). Pool texts are
stitched from 3-12-word fragments of real prompts (the benchmarks, or --corpus), with
log-normal lengths, and a seeded share of planted exact and near copies of benchmark prompts
whose recovery is checked. Then near-dup recall and precision against a brute-force scan of
every (row, prompt) pair on --recall-rows rows. Prints wall time and rows/s; nothing is
pass/fail.

A plan for 1B rows: each pass (exact, near-dup, and exact + containment on --contained-rows)
also runs on a fifth of its rows; the bench prints rows per CPU-second per core (all audit
processes counted), the peak memory at both sizes and the share of rows that matched, and the
projected wall time, node and driver memory and scan-store disk of 100M and 1B rows on each of
--nodes nodes of --cores-per-node cores, with the assumptions.

--suite instead plants labelled contamination of every kind (exact, case/punctuation,
re-wrapped, embedded in 5-50x longer text, template with another title, light paraphrase) and
near-miss distractors in a seeded pool, runs the audit (near-dup, templates, containment) and
prints precision and recall per kind (--json PATH also writes them). --layout chat writes the
same cases as a chat corpus (messages lists and prompt/response rows, each text in a user turn
or in an answer, benign filler on the other side) and audits messages[].content, prompt and
response.

--peer instead puts the audit beside its floor and its peer on one --near-rows synthetic pool
and prints one table: a bare polars join (read, lower-case, hash join, write), the exact and
the near-dup audit (whole command, fresh process, peak memory; each once as the command runs
and once with the chart), then the prefix-filter join and datasketch's MinHashLSH
(--num-perm permutations) on the same word sets (matching only, no I/O), each with its pairs,
recall and precision against an exact oracle (every pair's intersection count, a sparse
product); then the ratios exact / bare join, near-dup / exact (without and with the chart)
and datasketch / prefix join. datasketch is the optional peer extra: pip install "guarddiag[peer]".

Example (the acceptance sizes; their time: docs/decisions.md#2026-12-03-guarddiag-bench-audit):
  guarddiag bench audit
  guarddiag bench audit --rows 0 --near-rows 0 --recall-pool work/pool/pool.parquet
  guarddiag bench audit --suite --json work/audit-suite.json
  guarddiag bench audit --peer --near-rows 200000"""


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    parser = add_parser(sub, "audit", help="contamination audit of a pool against benchmarks",
                        description=_AUDIT_DESCRIPTION)
    add_options(parser, MODEL, {**_TEXT_FLAGS, **_SEARCH_FLAGS, **_CONTAINMENT_FLAGS,
                                **_GATE_FLAGS, **_ENGINE_FLAGS})
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="output folder (default <work-dir>/audit)")
    add_work_paths(parser, "pool", "derived",
                   help={"pool": "pool: a table file (parquet, Arrow, CSV/TSV or JSON "
                                     "lines; .gz/.zst), a quoted glob over shards "
                                     "('corpus/*.jsonl.zst'), a folder of shards or a "
                                     "datasets save_to_disk folder"})
    parser.add_argument("--force", action="store_true",
                        help="recompute even when --out already holds this exact audit, and "
                             "start an interrupted scan over instead of resuming it")
    parser.set_defaults(handler=_run_audit)
    _register_apply(parser)
    _register_bench(bench)


_APPLY_DESCRIPTION = """\
Write the cleaned corpus an audit asks for, and audit it again.

Every shard of the audited pool is written to --out under its own name and in its own format
without the audit's rows to remove (found by their address: file, physical line and byte
offset for JSON lines, row for tables) and its skipped bad rows; JSON lines are copied byte for
byte, blank lines and line ends included. The removed rows go to --out/removed/, and the
cleaned corpus is audited again into --out/audit/ with the audit's own options; the exit status
is that audit's gates' (0 passed, 1 failed, 2 could not check). Rows listed for review are
removed too unless --keep-review.

Example:
  guarddiag audit --pool chat.jsonl --id-column id --text-field 'messages[].content' \\
      --containment --fail-above 0 --out work/audit-chat
  guarddiag audit apply --audit-dir work/audit-chat --out work/chat-clean"""


def _register_apply(audit: argparse.ArgumentParser) -> None:
    sub = audit.add_subparsers(dest="audit_command", metavar="apply")
    parser = add_parser(sub, "apply", help="write the cleaned corpus and audit it again",
                        description=_APPLY_DESCRIPTION)
    add_work_paths(parser, "audit", "derived",
                   help={"audit": "the finished audit whose rows to remove are applied"})
    add_options(parser, "guarddiag.audit.options:ApplyOptions", {
        "out": Flag(type=Path, required=True, metavar="DIR"),
        "keep_review": Flag(action="store_true")})
    parser.set_defaults(handler=_run_apply)


_TEXT_FLAGS = {
    "text_column": Flag(metavar="C", help="the one top-level column holding the text; every "
                                          "row must hold non-empty text there"),
    "text_fields": Flag(names=("--text-field",), action="append", metavar="PATH", convert=tuple,
                        help="a field whose texts are audited, repeatable: a column, or a "
                             "nested path (messages[].content, messages[role=user].content, "
                             "data.prompt, response); rows missing it or holding empty text "
                             "there are skipped and counted per field; replaces --text-column"),
    "require_fields": Flag(names=("--require-field",), action="append", metavar="PATH",
                           convert=tuple,
                           help="a --text-field every row must hold as non-empty text "
                                "(repeatable): rows without it are an error, with the true "
                                "counts, before the scan"),
    "id_column": Flag(metavar="C", convert=lambda v: None if v.lower() == "none" else v,
                      help="column holding unique row ids; 'none' numbers rows from 1"),
    "benchmarks": Flag(metavar="IDS", help="'all', 'study' or comma-separated subset ids "
                                           "(see `guarddiag data list`)"),
}
_SEARCH_FLAGS = {
    "near_dup": Flag(action="store_true",
                     help="also find near duplicates (word-set Jaccard >= --threshold)"),
    "threshold": Flag(type=float, metavar="J",
                      help="word-set Jaccard at or above which a pool row is a near duplicate"),
    "short_words": Flag(type=int, metavar="N",
                        help="benchmark prompts with fewer distinct words than N are short: one "
                             "changed word can flip their meaning ('gut a fish' / 'gut a "
                             "human'), so their near duplicates need --short-threshold"),
    "short_threshold": Flag(type=float, metavar="J",
                            help="word-set Jaccard a short prompt's near duplicate needs"),
    "drop_near": Flag(action="store_true",
                      help="decontaminated lists drop near duplicates too (default: exact "
                           "overlaps only, as in the study); needs --near-dup"),
    "templates": Flag(action="store_true",
                      help="also count template overlaps: a pool row that is the benchmark "
                           "prompt with other quoted titles or names ('Generate the lyrics of "
                           "\"X\" by Y' for another X and Y)"),
    "template_min_words": Flag(type=int, metavar="N",
                               help="words besides the slots a template needs to count: a "
                                    "generic frame ('What does \"X\" mean?', 3 words) matches "
                                    "every other question of that frame"),
    "drop_template": Flag(action="store_true",
                          help="decontaminated lists drop template overlaps too; needs "
                               "--templates"),
}
_CONTAINMENT_FLAGS = {
    "containment": Flag(action="store_true",
                        help="also find contained overlaps: a benchmark prompt inside a longer "
                             "pool row (a jailbreak wrapper, a post quoting it), whatever the "
                             "row's length"),
    "containment_threshold": Flag(type=float, metavar="C",
                                  help="share of the prompt's three-word runs a row must hold, "
                                       "for prompts of --short-words distinct words or more; "
                                       "every prompt is also found as a whole phrase (5 words "
                                       "or fewer) or with one word substituted in place (6 or "
                                       "more)"),
    "drop_contained": Flag(action="store_true",
                           help="decontaminated lists drop contained overlaps too; needs "
                                "--containment"),
    "review_rows": Flag(type=int, metavar="N",
                        help="a prompt of fewer than --short-words words found in the texts "
                             "of N rows or more (whole or inside) is a common phrase: its "
                             "contained matches are listed for review, not gated (0: never)"),
}
_GATE_FLAGS = {
    "fail_above": Flag(type=float, metavar="PCT",
                       help="release gate: exit with status 1 when more than PCT%% of any one "
                            "benchmark's prompts are in the corpus, counting every audited "
                            "kind but --gate-exclude (a share of the benchmark, not of the "
                            "corpus: 0 fails on any hit)"),
    "max_corpus_rows": Flag(type=int, metavar="N",
                            help="release gate: exit with status 1 when more than N corpus "
                                 "rows hold a benchmark prompt (every audited kind but "
                                 "--gate-exclude)"),
    "gate_exclude": Flag(action="append", metavar="KIND", convert=tuple,
                         choices=("exact", "near", "template", "contained"),
                         help="an overlap kind the gates do not count (repeatable)"),
    "bad_rows": Flag(choices=("fail", "skip"),
                     help="bad rows (malformed JSON lines, wrong-typed fields or ids, missing "
                          "or repeated ids) are all listed in bad_rows.jsonl with file, line "
                          "and byte; fail: exit 2 after the whole scan; skip: audit the rest, "
                          "rows without a unique id under their address"),
    "allow_missing_field": Flag(action="store_true",
                                help="a gate may pass though a --text-field held text in no "
                                     "row (else it could not check: exit 2)"),
    "allow_unavailable": Flag(action="store_true",
                              help="a gate may pass though a selected benchmark is "
                                   "unavailable (else exit 2)"),
    "allow_bad_rows": Flag(action="store_true",
                           help="a gate may pass though --bad-rows skip left rows unsearched "
                                "(else exit 2)"),
}
_ENGINE_FLAGS = {
    "figure": Flag(action=argparse.BooleanOptionalAction,
                   help="also draw overlap.png/.pdf, the per-benchmark bar chart (off by "
                        "default: matplotlib's import and two renders take most of a small "
                        "audit's time); on an audit in --out that is still current, the chart "
                        "is drawn from its saved summary without a new scan"),
    "engine": Flag(choices=("local", "ray"),
                   help="local: --workers processes on this machine; ray: one Ray task per "
                        "shard part on the cluster (the shards must be at the same path on "
                        "every node); the outputs are the same bytes"),
    "workers": Flag(type=int, metavar="N",
                    help="cores the local engine uses (default: every core)"),
    "ray_address": Flag(metavar="ADDR",
                        help="Ray cluster to join ('auto' for the one `ray start` made; "
                             "default: start a local one)"),
}
"""The audit's flags, one per :class:`~guarddiag.audit.options.AuditOptions` field (their
defaults are the model's)."""


def _register_bench(bench: argparse._SubParsersAction) -> None:
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
    bparser.add_argument("--contained-rows", type=int, default=200_000, metavar="N",
                         help="rows of the synthetic pool for the exact + containment audit "
                              "(0 skips it)")
    bparser.add_argument("--nodes", type=comma_ints, default="1,16", metavar="N[,N...]",
                         help="node counts the 100M/1B-row projection is printed for")
    bparser.add_argument("--cores-per-node", type=int, default=32, metavar="C",
                         help="cores of one node in the projection")
    bparser.add_argument("--no-plan", action="store_true",
                         help="skip the fifth-size runs and the projection")
    bparser.add_argument("--suite", action="store_true",
                         help="plant every kind of contamination and print precision and "
                              "recall per kind instead of throughput")
    bparser.add_argument("--layout", choices=("flat", "chat"), default="flat",
                         help="--suite: flat = one text column; chat = a JSON-lines chat "
                              "corpus (messages lists and prompt/response rows, texts in user "
                              "turns and in answers) audited on both sides")
    bparser.add_argument("--cases", type=int, default=200, metavar="N",
                         help="--suite: planted copies and distractors per kind")
    bparser.add_argument("--background", type=int, default=20_000, metavar="N",
                         help="--suite: unplanted background rows")
    bparser.add_argument("--peer", action="store_true",
                         help="compare with datasketch's MinHashLSH on one --near-rows pool "
                              "instead: both timings, each one's recall against the exact "
                              "oracle, one table (needs the peer extra: pip install "
                              "\"guarddiag[peer]\")")
    bparser.add_argument("--num-perm", type=int, default=128, metavar="K",
                         help="--peer: MinHash permutations of datasketch's MinHashLSH")
    bparser.add_argument("--json", default=None, metavar="PATH",
                         help="also write the result as JSON")
    bparser.set_defaults(handler=_run_bench)


def audit_options_from(args: argparse.Namespace) -> AuditOptions:
    """The :class:`~guarddiag.audit.options.AuditOptions` the command line sets."""
    from guarddiag.audit.options import AuditOptions

    if hasattr(args, "text_column") and hasattr(args, "text_fields"):
        from guarddiag.errors import GuarddiagError

        raise GuarddiagError("--text-column and --text-field: use one (--text-field takes "
                             "a top-level column too)")
    return options_from(args, AuditOptions, where="guarddiag audit")


def _run_audit(args: argparse.Namespace) -> int:
    from guarddiag.audit import audit_pool
    from guarddiag.audit.gate import check_gate

    paths = work_paths_from(args)
    out = args.out if args.out is not None else paths.audit
    options = audit_options_from(args)
    result = audit_pool(paths.pool, options, out_dir=out, force=args.force,
                        data_dir=resolve_data_dir(args.data_dir), derived_dir=paths.derived)
    print(result.render())
    chart = "overlap.png, overlap.pdf, " if options.figure else ""
    logger.info(f"audit: wrote {out}/ (rows_to_remove.parquet/.jsonl, overlap.parquet, "
                f"decontaminated/, summary.json, {chart}meta.json)")
    return _gate_status(check_gate(result, options))


def _run_apply(args: argparse.Namespace) -> int:
    from guarddiag.audit.apply import apply_audit
    from guarddiag.audit.options import ApplyOptions

    paths = work_paths_from(args)
    applied = apply_audit(paths.audit,
                          options_from(args, ApplyOptions, where="guarddiag audit apply"),
                          data_dir=resolve_data_dir(args.data_dir), derived_dir=paths.derived)
    print(applied.render())
    return _gate_status(applied.gate)


def _gate_status(gate: GateResult) -> int:
    """Say on stderr which gates failed and what they could not check; the exit status."""
    for failure in gate.failures:
        print(f"guarddiag: audit gate failed: {failure}", file=sys.stderr)
    for unchecked in gate.unchecked:
        print(f"guarddiag: audit gate could not check: {unchecked}", file=sys.stderr)
    return gate.status


def _run_bench(args: argparse.Namespace) -> int:
    from guarddiag import files

    if args.peer:
        return _run_peer(args)
    if args.suite:
        from guarddiag.bench.audit_suite import run_suite

        suite = run_suite(benchmarks=args.benchmarks, data_dir=resolve_data_dir(args.data_dir),
                          cases=args.cases, background=args.background, seed=args.seed,
                          layout=args.layout)
        print(suite.render())
        if args.json:
            files.write_json(suite.to_dict(), Path(args.json))
        return 0
    from guarddiag.bench.audit import bench_audit

    report = bench_audit(rows=args.rows, near_rows=args.near_rows, threshold=args.threshold,
                         corpus=args.corpus, seed=args.seed, benchmarks=args.benchmarks,
                         data_dir=resolve_data_dir(args.data_dir),
                         recall_rows=args.recall_rows, recall_pool=args.recall_pool,
                         recall_figure=args.recall_figure, contained_rows=args.contained_rows,
                         nodes=list(args.nodes), cores_per_node=args.cores_per_node,
                         plan=not args.no_plan)
    print(report.render())
    if args.json:
        doc = {"phases": report.to_frame().to_dicts(),
               "plan": report.plan.to_dict() if report.plan is not None else None}
        files.write_json(doc, Path(args.json))
    return 0


def _run_peer(args: argparse.Namespace) -> int:
    # Say how to install datasketch before importing the bench (polars, the audit) at all.
    from guarddiag.bench.audit_peer import require_datasketch

    require_datasketch()
    from guarddiag import files
    from guarddiag.bench.audit import bench_peer

    result = bench_peer(rows=args.near_rows, threshold=args.threshold, seed=args.seed,
                        benchmarks=args.benchmarks, data_dir=resolve_data_dir(args.data_dir),
                        num_perm=args.num_perm)
    print(result.render())
    if args.json:
        files.write_json(result.to_dict(), Path(args.json))
    return 0
