"""Sub-commands: ``branches validate|list``, ``train``, ``predict``; ``bench predict`` and
``bench recalibrate``.

Examples::

    guarddiag branches validate
    guarddiag train --branches all --sizes micro --seeds 42
    guarddiag train --branches reference,E1 --sizes micro --seeds 43,44
    guarddiag train --sizes base --checkpoint base=/models/ModernBERT-base \\
        --checkpoint large=/models/ModernBERT-large
    guarddiag predict
    guarddiag bench predict
    guarddiag bench recalibrate
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Sequence

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.errors import GuarddiagError
from guarddiag.paths import resolve_data_dir

_SIZES_HELP = ("model sizes, comma-separated: micro, tiny (random init, CPU), small, base, "
               "large (ModernBERT-base/-large shapes)")


def register(sub: argparse._SubParsersAction, bench: argparse._SubParsersAction) -> None:
    _register_branches(sub)
    _register_train(sub)
    _register_predict(sub)
    _register_bench(bench)


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads (default: 1 for micro/tiny, which gain nothing from more "
                        "and slow down badly on shared cores; torch's default otherwise)")


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
                                      "parents that exist, no dependency cycles.\nEvery problem "
                                      "is printed on its own line naming file and field.")
    lister = add_parser(actions, "list", help="one line per branch",
                        description="List the branches with their routes, label mix, "
                                    "teacher/parent and budget.")
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
    header = ("branch", "routes", "labels", "teacher", "parent", "size", "rows", "epochs",
              "description")
    rows = []
    for name in branches.names():
        s = branches[name]
        rows.append((name, "+".join(s.routes), s.label_policy(), s.teacher or "-",
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

def _register_train(sub: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "train", help="train branch runs (teachers → reference → branches), resumable",
        description="Train every run of --branches × --sizes × --seeds, plus the runs they\n"
                    "depend on, in dependency order (teachers → reference → branches). Each run\n"
                    "writes <runs-dir>/<size>/<branch>/seed=<s>/ with model.safetensors,\n"
                    "tokenizer.json, meta.json and train_log.jsonl. Finished runs with the same\n"
                    "spec and inputs are skipped; an interrupted run resumes from its last\n"
                    "checkpoint to the same final weights.\n\n"
                    "  guarddiag train --branches all --sizes micro --seeds 42\n"
                    "  guarddiag train --branches reference,E1 --seeds 43,44")
    p.add_argument("--branches", default="all", metavar="NAMES",
                   help="'all' or comma-separated branch names (e.g. E1,E8)")
    p.add_argument("--sizes", default="micro", metavar="SIZES", help=_SIZES_HELP)
    p.add_argument("--seeds", default="42", metavar="SEEDS",
                   help="comma-separated training seeds, e.g. 42,43,44")
    add_work_paths(p, "runs", "pool", help={"pool": "labelled pool"})
    p.add_argument("--branches-dir", default=None, metavar="DIR",
                   help="folder of branch specs (default: the bundled branches/)")
    p.add_argument("--checkpoint", action="append", default=[], metavar="SIZE=DIR|ID",
                   help="pretrained ModernBERT weights (safetensors) and tokenizer for a size, "
                        "e.g. base=answerdotai/ModernBERT-base or large=/models/ModernBERT-large;"
                        " repeatable. Without it a size trains from random init with a "
                        "tokenizer trained on the pool")
    p.add_argument("--checkpoint-every", type=float, default=60.0, metavar="SECONDS",
                   help="wall-clock seconds between resume checkpoints")
    _add_threads(p)
    p.set_defaults(handler=_run_train)


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


def _run_train(args: argparse.Namespace) -> int:
    from guarddiag.train import RunOptions, train_branches
    from guarddiag.train.branches import load_branches, parse_seeds, parse_sizes

    paths = work_paths_from(args)
    sizes = parse_sizes(args.sizes)
    seeds = parse_seeds(args.seeds)
    pretrained = _parse_checkpoints(args.checkpoint)
    branches = load_branches(args.branches_dir)
    result = train_branches(
        branches=branches, names=args.branches, sizes=sizes, seeds=seeds,
        runs_dir=paths.runs, pool_path=paths.pool,
        options=RunOptions(checkpoint_every_s=args.checkpoint_every, pretrained=pretrained,
                           threads=args.threads))
    rows = [(r.run_id, r.status, f"{r.wall_s:.1f}", str(r.n_rows), str(r.steps),
             f"{r.val_acc_a:.3f}", f"{r.val_acc_b:.3f}") for r in result.runs]
    _print_table(("run", "status", "wall_s", "rows", "steps", "val_acc_A", "val_acc_B"), rows)
    total = sum(r.wall_s for r in result.runs)
    print(f"{len(result.runs)} run(s), {total:.0f}s of training; val accuracy is on the "
          f"kept checkpoint's val sample")
    return 0


# ----------------------------------------------------------------------------- predict

def _register_predict(sub: argparse._SubParsersAction) -> None:
    p = add_parser(
        sub, "predict", help="score every finished run on every benchmark → predictions.parquet",
        description="Score every finished run under --runs-dir, and the TF-IDF baseline, on\n"
                    "every available benchmark subset and on the pool's val split (benchmark\n"
                    "pool_val), into <runs-dir>/predictions.parquet. Runs already scored with\n"
                    "unchanged inputs are not re-scored, and subsets scored earlier stay in\n"
                    "the table when --benchmarks selects others. survives_decontam comes from\n"
                    "the audit folder when it exists.\n\n"
                    "  guarddiag predict\n"
                    "  guarddiag predict --benchmarks harmbench_copyright,orbench_hard")
    add_work_paths(p, "runs", "pool", "audit", "derived",
                   help={"pool": "labelled pool, for its val split"})
    p.add_argument("--benchmarks", default="all", metavar="IDS",
                   help="benchmark ids or selectors (all, study, extra, derived, a,b,…); "
                        "'none' scores only the pool's val split")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per scoring batch")
    p.add_argument("--no-baseline", action="store_true",
                   help="leave the TF-IDF baseline out")
    _add_threads(p)
    p.set_defaults(handler=_run_predict)


def _run_predict(args: argparse.Namespace) -> int:
    from guarddiag.predict import predict_runs

    paths = work_paths_from(args)
    result = predict_runs(
        runs_dir=paths.runs, pool_path=paths.pool, audit_dir=paths.audit,
        benchmarks=args.benchmarks, data_dir=resolve_data_dir(args.data_dir),
        derived_dir=paths.derived, batch_size=args.batch_size,
        baseline=not args.no_baseline, threads=args.threads)
    rows = [(r.run_id, r.guard_kind, str(r.n_scored), str(r.n_total), f"{r.seconds:.1f}")
            for r in result.runs]
    _print_table(("run", "kind", "scored_now", "prompts", "seconds"), rows)
    print(f"wrote {result.path}: {result.n_rows} rows, {len(result.runs)} runs, "
          f"{len(result.benchmarks)} subsets")
    if result.unavailable:
        print(f"unavailable subsets (skipped): {', '.join(result.unavailable)}")
    print(result.decontam_note)
    return 0


# ----------------------------------------------------------------------------- bench

def _register_bench(bench: argparse._SubParsersAction) -> None:
    p = add_parser(
        bench, "predict", help="examples/s: length-bucketed batches vs padding to max length",
        description="Score the same prompts twice with one guard: length-sorted batches padded\n"
                    "per batch (what `guarddiag predict` does) and input-order batches padded\n"
                    "to the max length. Prints examples/s of each and the speed-up (aim ≥ 3×).\n"
                    "Prompts: every available benchmark subset (else the pool's val split).")
    p.add_argument("--run", default=None, metavar="DIR",
                   help="a finished run folder (default: a fresh random-init guard of --size "
                        "with a tokenizer trained on the pool, the same cost per token)")
    p.add_argument("--size", default="micro", help="model size when --run is not given")
    p.add_argument("--max-length", type=int, default=96,
                   help="max tokens when --run is not given")
    p.add_argument("--n", type=int, default=4000, help="prompts to score (a fixed sample)")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per batch")
    add_work_paths(p, "pool", help={"pool": "labelled pool"})
    _add_threads(p)
    p.set_defaults(handler=_run_bench_predict)

    r = add_parser(
        bench, "recalibrate",
        help="speed-up of cached-state head-only training over recomputing the encoder",
        description="Head-only recalibration two ways on the same rows and batches: encoder\n"
                    "states computed once and cached (what route 3 does) vs the frozen encoder\n"
                    "re-run for every batch. Prints both times and the speed-up (aim ≥ 10×) and\n"
                    "checks that both end at the same head weights.")
    r.add_argument("--run", default=None, metavar="DIR",
                   help="a finished run to recalibrate (default: a fresh random-init guard)")
    r.add_argument("--size", default="micro", help="model size when --run is not given")
    r.add_argument("--max-length", type=int, default=96,
                   help="max tokens when --run is not given")
    r.add_argument("--rows", type=int, default=3000, help="calibration rows (pool train split)")
    r.add_argument("--epochs", type=int, default=10, help="head-training epochs")
    r.add_argument("--batch-size", type=int, default=64, help="rows per step")
    add_work_paths(r, "pool", help={"pool": "labelled pool"})
    _add_threads(r)
    r.set_defaults(handler=_run_bench_recalibrate)


def _bench_guard(args: argparse.Namespace, pool):
    """A finished run, or a fresh guard of --size with a tokenizer trained on the pool."""
    from guarddiag.model import LoadedGuard, build_guard, get_size, load_guard, train_tokenizer

    if args.run:
        return load_guard(args.run)
    size = get_size(args.size, where="--size")
    tok = train_tokenizer(pool.split("train")["text"].to_list(), vocab_size=size.vocab_size)
    model = build_guard(size=size.name, tokenizer=tok, seed=0)
    model.eval()
    return LoadedGuard(model, tok, args.max_length, {})


def _bench_texts(args: argparse.Namespace, pool) -> tuple[list[str], str]:
    from guarddiag.pool.table import hash_order

    texts: list[str] = []
    source = "benchmarks"
    try:
        from guarddiag.data import load_benchmarks

        bset = load_benchmarks("all", data_dir=resolve_data_dir(args.data_dir))
        for frame in bset.frames.values():
            texts += frame["text"].to_list()
    except (ImportError, GuarddiagError):
        texts = []
    if not texts:
        texts = hash_order(pool.split("val"), "bench")["text"].to_list()
        source = "pool val split"
    # A fixed, order-free sample: every run of the bench times the same prompts.
    texts = sorted(set(texts), key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:args.n]
    return texts, source


def _run_bench_predict(args: argparse.Namespace) -> int:
    import torch

    from guarddiag.model import auto_threads, torch_threads
    from guarddiag.pool.table import read_pool
    from guarddiag.predict import bench_predict

    pool = read_pool(work_paths_from(args).pool)
    guard = _bench_guard(args, pool)
    texts, source = _bench_texts(args, pool)
    threads = args.threads or auto_threads([guard.meta.get("model", {}).get("size", args.size)])
    with torch_threads(threads):
        res = bench_predict(guard, texts, batch_size=args.batch_size)
    print(f"{res.n_texts} prompts from {source}, batch {res.batch_size}, max length "
          f"{res.max_length} tokens (mean {res.mean_tokens:.1f}), torch threads "
          f"{threads or torch.get_num_threads()}")
    print(f"length-bucketed, padded per batch : {res.bucketed_ex_per_s:9.1f} examples/s")
    print(f"input order, padded to max length : {res.padded_ex_per_s:9.1f} examples/s")
    print(f"speed-up: {res.speedup:.2f}x (aim >= 3x); max |Δp| between the two: "
          f"{res.max_abs_diff:.2e}")
    return 0


def _run_bench_recalibrate(args: argparse.Namespace) -> int:
    from guarddiag.model import auto_threads, torch_threads
    from guarddiag.pool.table import read_pool, sample_split
    from guarddiag.train import bench_recalibrate, label_rows

    pool = read_pool(work_paths_from(args).pool)
    guard = _bench_guard(args, pool)
    frame = sample_split(pool, "train", args.rows)
    rows = label_rows(frame, fraction=1.0, anchors=False, where=str(pool.path))
    threads = args.threads or auto_threads([guard.meta.get("model", {}).get("size", args.size)])
    with torch_threads(threads):
        res = bench_recalibrate(guard, rows, epochs=args.epochs, batch_size=args.batch_size)
    print(f"{res.n_rows} calibration rows, {res.epochs} epochs, batch {args.batch_size}")
    print(f"cached states : {res.cache_s:7.2f}s encoder pass + {res.cached_train_s:7.2f}s "
          f"head training = {res.cache_s + res.cached_train_s:7.2f}s")
    print(f"recomputing   : {res.recompute_train_s:7.2f}s (encoder re-run for every batch)")
    print(f"speed-up: {res.speedup:.1f}x over the whole run (aim >= 10x); "
          f"{res.per_epoch_speedup:.0f}x per epoch once cached; the two routes' class "
          f"probabilities differ by at most {res.max_abs_diff:.1e}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
