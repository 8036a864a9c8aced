"""Sub-commands from SORRY-Bench: ``balance``, ``mutate``, ``judge-eval``, ``jaccard`` and
``bench jaccard``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from guarddiag.cli import add_parser, add_work_paths, print_table, work_paths_from
from guarddiag.cli.bench import DEVICE_HELP
from guarddiag.cli.options import Flag, add_options, options_from
from guarddiag.errors import GuarddiagError

logger = logging.getLogger(__name__)

_BALANCE = """\
Which harms each benchmark tests. Every subset's own categories (HarmBench semantic categories,
JBB, StrongREJECT, DoNotAnswer, WildGuardTest, OR-Bench, XSTest, CatQA, SALAD, SORRY-Bench …)
are mapped onto the 24 pillars and the four SORRY-Bench domains
(data_manifests/taxonomy/category_map.yaml, sorrybench.yaml); a category with several pillars
spreads its weight equally over them.

Printed per benchmark: prompts mapped, pillars tested (of 24), the imbalance ratio = weight of
the most / least represented pillar among the pillars the benchmark tests (untested pillars are
not in the ratio, they are listed instead), the most and least represented pillars and the
untested ones. Subsets without category metadata (AdvBench, MaliciousInstruct, HarmfulQA) are
shown as not assessable. Writes balance_summary.csv, balance_pillars.csv,
balance_domains.csv, balance.json, balance.png/.pdf and meta.json to --out.

Example:
  guarddiag balance --benchmarks study,sorrybench,xstest_unsafe"""

_MUTATE = """\
Write SORRY-Bench linguistic mutations of a benchmark as derived subsets <benchmark>__<mutation>
(manifest + parquet under --derived-dir) that predict, report and every other command accept.
Each mutated row keeps its base prompt's id (prompt_id = base_prompt_id) and category.

Deterministic: ascii (decimal code points), caesar (shift 3), morse, atbash - exact and
reversible, presented with a one-line instruction to decode (--bare: the payload alone) -
and misspell (seeded typos, --seed). Generative (need --generator hf:<model> or
endpoint:<url>#<model>): question, slang, uncommon_dialect, technical_terms, role_play, the
five persuasion techniques, translate_zh/fr/ta/mr/ml. Prompts and presentation:
data_manifests/mutations/sorrybench_mutations.yaml. Groups: all, deterministic, generative,
encoding, persuasion, translation, writing_style. Generative runs resume after a kill.

Examples:
  guarddiag mutate --benchmark sorrybench --mutations ascii,caesar,morse,atbash,misspell
  guarddiag mutate --benchmark sorrybench --mutations persuasion \\
      --generator endpoint:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct"""

_JUDGE = """\
Meta-evaluate a refusal/fulfilment judge against human labels (SORRY-Bench section 3): agreement,
Cohen's kappa and seconds per evaluation pass (model loading excluded).

--records: a table (JSON lines, CSV or parquet) with prompt, response, label (fulfil or
refuse) and optionally id; the project ships 48 hand-labelled records in
data_manifests/judge/refusal_records.jsonl.
--judge: keyword (stock refusal phrases), run:<run dir> (a trained guarddiag branch reading
"User: <prompt>  Assistant: <response>"; unsafe = fulfil) or guard:<adapter> (an outside guard,
options via --guard-option model=... ).

Example:
  guarddiag judge-eval --records data_manifests/judge/refusal_records.jsonl --judge keyword"""

_JACCARD = """\
For every benchmark prompt, the maximum word-set Jaccard similarity against the training pool
and against the other benchmarks' prompts (subsets of one dataset are not compared with each
other). SORRY-Bench reports a mean max-Jaccard of 0.445 against prior datasets. Exact maxima
through an inverted token index. Prints per benchmark mean / median / 90th percentile and the
share at >= 0.5 and = 1; writes jaccard_per_prompt.parquet, jaccard_summary.csv,
jaccard.png/.pdf and meta.json to --out.

Example:
  guarddiag jaccard --pool work/pool/pool.parquet --benchmarks study,sorrybench"""


TABLES_MODEL = "guarddiag.sorry.options:TablesOptions"
_TABLES_FLAGS = {"benchmarks": Flag(metavar="IDS"),
                 "out_dir": Flag(names=("--out",), type=Path, metavar="DIR"),
                 "figure": Flag(names=("--no-figure",), action="store_false",
                                help="skip the PNG/PDF figure")}


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    p = add_parser(sub, "balance", help="pillar/domain balance of each benchmark",
                   description=_BALANCE)
    add_options(p, TABLES_MODEL, _TABLES_FLAGS)
    add_work_paths(p, "derived")
    p.set_defaults(handler=_run_balance)

    m = add_parser(sub, "mutate", help="write SORRY-Bench mutations of a benchmark as subsets",
                   description=_MUTATE)
    m.add_argument("--benchmark", required=True, metavar="ID", help="base subset id to mutate")
    m.add_argument("--generator", default=None, metavar="SPEC",
                   help="hf:<model folder or id> or endpoint:<base url>#<model name>; needed "
                        "by generative mutations")
    add_options(m, "guarddiag.sorry.options:MutateOptions", {
        "mutations": Flag(required=True, metavar="NAMES"), "seed": Flag(type=int),
        "bare": Flag(action="store_true"), "misspell_rate": Flag(type=float, metavar="R"),
        "temperature": Flag(type=float), "max_new_tokens": Flag(type=int),
        "batch_size": Flag(type=int), "suffix": Flag(),
        "stop": Flag(action="append", metavar="TEXT", convert=_newlines,
                     help="generator: a string that ends a rewrite (repeatable; \\n for a "
                          "newline)"),
        "sample": Flag(type=int, metavar="N")})
    add_work_paths(m, "derived", help={"derived": "where derived subsets are written"})
    m.set_defaults(handler=_run_mutate)

    j = add_parser(sub, "judge-eval", help="agreement of a refusal judge with human labels",
                   description=_JUDGE)
    add_options(j, "guarddiag.sorry.options:JudgeEvalOptions", {
        "records": Flag(required=True, metavar="FILE"),
        "judge": Flag(required=True, metavar="SPEC"),
        "guard_options": Flag(names=("--guard-option",), action="append", metavar="KEY=VALUE",
                              convert=_guard_options,
                              help="option for guard:<adapter> (repeatable), e.g. "
                                   "model=/models/x"),
        "mapping": Flag(choices=("loose", "strict")),
        "threshold": Flag(type=float, metavar="P"),
        "batch_size": Flag(type=int, metavar="N"),
        "device": Flag(metavar="DEVICE", help=DEVICE_HELP),
        "out": Flag(type=Path, metavar="FILE.json")})
    j.set_defaults(handler=_run_judge_eval)

    c = add_parser(sub, "jaccard", help="max word-set Jaccard of benchmark prompts vs pool "
                                        "and other benchmarks", description=_JACCARD)
    add_work_paths(c, "pool", "derived", help={
        "pool": "pool table with prompt_id, text; when not given and absent, the pool column "
                "is skipped with a note"})
    add_options(c, TABLES_MODEL, _TABLES_FLAGS)
    c.set_defaults(handler=_run_jaccard)

    b = add_parser(bench, "jaccard", help="speed of the exact max-Jaccard search",
                   description="Times `guarddiag jaccard` on the available benchmarks (and "
                               "--pool when given): wall seconds and prompts per second for "
                               "the benchmark-vs-benchmark and benchmark-vs-pool searches. "
                               "Prints figures; nothing is pass/fail.")
    b.add_argument("--pool", default=None, metavar="FILE", help="pool table (prompt_id, text)")
    b.add_argument("--benchmarks", default="all", metavar="IDS", help="subset ids")
    b.set_defaults(handler=_run_bench_jaccard)


def _newlines(items: Sequence[str]) -> tuple[str, ...]:
    """``--stop`` values with ``\\n`` read as a newline."""
    return tuple(t.replace("\\n", "\n") for t in items)


# ── handlers ──────────────────────────────────────────────────────────────────────────────────


def _fmt(value: object, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_rows(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print_table(tuple(header), [tuple(_fmt(v) for v in r) for r in rows])


def _run_balance(args: argparse.Namespace) -> int:
    from guarddiag.sorry.options import TablesOptions
    from guarddiag.sorry.outputs import run_balance

    paths = work_paths_from(args)
    o = options_from(args, TablesOptions, where="guarddiag balance")
    run = run_balance(o, data_dir=args.data_dir, derived_dir=paths.derived,
                      out_dir=o.out_dir or paths.sorry / "balance")
    rows = []
    for b in run.result.benchmarks:
        if not b.assessable:
            rows.append([b.benchmark, b.n, 0, "-", "-", f"not assessable ({b.category_note})",
                         "", ""])
            continue
        rows.append([b.benchmark, b.n, b.n_mapped, f"{24 - len(b.untested)}/24",
                     f"{b.imbalance_ratio:.1f}", ", ".join(b.most), ", ".join(b.least),
                     ", ".join(b.untested)])
    _print_rows(["benchmark", "n", "mapped", "pillars", "ratio", "most", "least", "untested"],
                rows)
    print()
    print("domain shares (hate / crimes / inappropriate / advice):")
    for b in run.result.benchmarks:
        total = sum(b.domain_weight.values())
        if total:
            shares = " / ".join(f"{b.domain_weight[d] / total:.0%}" for d in
                                ("hate", "crimes", "inappropriate", "advice"))
            print(f"  {b.benchmark}: {shares}")
    for b in run.result.benchmarks:
        if b.unmapped_values:
            logger.info(f"note: {b.benchmark}: {b.n_unmapped} prompt(s) with categories not in "
                        f"the map ({', '.join(b.unmapped_values[:5])})")
    for u in run.unavailable:
        logger.info(f"skipped (unavailable): {u}")
    logger.info(f"wrote {len(run.files)} files to {run.files[0].parent}")
    return 0


def _run_mutate(args: argparse.Namespace) -> int:
    from guarddiag.sorry.mutate import mutate_benchmark, resolve_mutations
    from guarddiag.sorry.options import MutateOptions
    from guarddiag.sorry.rewrite import REWRITE_OUTCOMES

    options = options_from(args, MutateOptions, where="guarddiag mutate")
    chosen = resolve_mutations(options.mutations)  # unknown names fail before a model loads
    generator = None
    if args.generator is not None:
        if all(m.deterministic for m in chosen):
            logger.info("note: --generator is not used by deterministic mutations")
        else:
            from guarddiag.guards.backends import make_generator

            generator = make_generator(args.generator, batch_size=options.batch_size)
    try:
        result = mutate_benchmark(args.benchmark, options, generator=generator,
                                  data_dir=args.data_dir, derived_dir=work_paths_from(args).derived)
    finally:
        if generator is not None:
            generator.close()
    _print_rows(["subset", "mutation", "kind", "rows", "skipped", "cached", "kept",
                 "truncated", "empty", "refused", "echo", "note"],
                [[s.subset_id, s.mutation, s.kind, s.n_rows, s.n_skipped,
                  *([s.n_cached, *(s.outcomes.get(o, 0) for o in REWRITE_OUTCOMES)]
                    if s.kind == "generative" else ["-"] * 6),
                  f"{s.passthrough_prompts} prompt(s) with characters Morse passes through"
                  if s.passthrough_prompts else ""] for s in result.subsets])
    if result.timing is not None:
        print(f"generation: {result.timing.line()}")
    if result.subsets:
        logger.info(f"wrote {len(result.subsets)} derived subset(s) to "
                    f"{result.subsets[0].manifest_path.parent}")
    return 0


def _guard_options(items: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise GuarddiagError(f"--guard-option {item!r}: expected KEY=VALUE")
        out[key.strip()] = int(value) if value.strip().isdigit() else value
    return out


def _run_judge_eval(args: argparse.Namespace) -> int:
    from guarddiag.sorry.options import JudgeEvalOptions
    from guarddiag.sorry.outputs import run_judge_eval

    result = run_judge_eval(options_from(args, JudgeEvalOptions, where="guarddiag judge-eval"))
    kappa = "undefined" if result.kappa is None else f"{result.kappa:.3f}"
    n_agree = round(result.agreement * result.n)
    print(f"judge: {result.judge}")
    n_fulfil = sum(result.confusion["fulfil"].values())
    print(f"records: {result.n} ({n_fulfil} fulfil, {result.n - n_fulfil} refuse by the humans)")
    print(f"agreement: {result.agreement:.1%} ({n_agree}/{result.n})")
    print(f"cohen kappa: {kappa}")
    print(f"seconds per evaluation pass: {result.seconds:.4f}")
    if result.n_no_verdict:
        print(f"no verdict: {result.n_no_verdict} record(s) (counted as disagreements)")
    print("confusion (human -> judge):")
    for h, row in result.confusion.items():
        print(f"  {h:<7} " + "  ".join(f"{j}={n}" for j, n in row.items()))
    return 0


def _run_jaccard(args: argparse.Namespace) -> int:
    from guarddiag.sorry.options import TablesOptions
    from guarddiag.sorry.outputs import run_jaccard

    paths = work_paths_from(args)
    o = options_from(args, TablesOptions, where="guarddiag jaccard")
    run = run_jaccard(o, pool=paths.pool, pool_required=args.pool_path is not None,
                      data_dir=args.data_dir, derived_dir=paths.derived,
                      out_dir=o.out_dir or paths.sorry / "jaccard")
    if run.pool_path is None:
        logger.info(f"note: no pool ({paths.pool} absent): the pool columns are empty; "
                    "pass --pool FILE")
    s = run.profile.summary
    _print_rows(["benchmark", "n", "mean_pool", "median_pool", "p90_pool", ">=0.5_pool",
                 "mean_other", "median_other", "p90_other", ">=0.5_other", "=1_other"],
                [[r["benchmark"], r["n"], r["mean_pool"], r["median_pool"], r["p90_pool"],
                  r["share_ge_0.5_pool"], r["mean_other"], r["median_other"], r["p90_other"],
                  r["share_ge_0.5_other"], r["share_eq_1_other"]]
                 for r in s.iter_rows(named=True)])
    for u in run.unavailable:
        logger.info(f"skipped (unavailable): {u}")
    logger.info(f"wrote {len(run.files)} files to {run.files[0].parent}")
    return 0


def _run_bench_jaccard(args: argparse.Namespace) -> int:
    import time

    from guarddiag.data import load_benchmarks
    from guarddiag.files import read_table
    from guarddiag.sorry.jaccard import max_jaccard
    from guarddiag.text import word_set

    bset = load_benchmarks(args.benchmarks, data_dir=args.data_dir)
    names = list(bset.frames)
    sets, groups = [], []
    for g, b in enumerate(names):
        sets += [word_set(t) for t in bset.frames[b]["text"]]
        groups += [g] * bset.frames[b].height
    start = time.perf_counter()
    max_jaccard(sets, sets, query_groups=groups, target_groups=groups)
    took = time.perf_counter() - start
    print(f"benchmarks vs other benchmarks: {len(sets):,} prompts x {len(sets):,} targets: "
          f"{took:.2f} s ({len(sets) / max(took, 1e-9):,.0f} prompts/s)")
    if args.pool:
        pool = read_table(args.pool, columns=["text"])
        start = time.perf_counter()
        pool_sets = [word_set(t) for t in pool["text"]]
        prep = time.perf_counter() - start
        start = time.perf_counter()
        max_jaccard(sets, pool_sets)
        took = time.perf_counter() - start
        print(f"benchmarks vs pool: {len(sets):,} prompts x {len(pool_sets):,} pool rows: "
              f"{took:.2f} s search + {prep:.2f} s tokenising "
              f"({len(sets) / max(took, 1e-9):,.0f} prompts/s)")
    print("(timings on a shared machine are pessimistic)", file=sys.stderr)
    return 0
