"""``guarddiag bench competence``: which model size gives guards that pass the competence gate,
and at what cost on this machine.

Per size (a frozen size and its teachers' size, :func:`~guarddiag.model.sizes.size_up`), the
bench trains the reference recipe at ``seeds`` and the two teachers T_A and T_B, scores them on
the study's clear-harm subsets, the ranking pairs (:func:`~guarddiag.analyses.competence.
ranking_pairs`), HarmBench-copyright and the pool's val split, and measures, on the
decontaminated prompts of public sets kept outside the pool:

* CAP of the reference on the clear-harm set (mean over the subsets, seed-averaged) at the
  threshold that flags at most ``ffr`` of the policy-neutral val rows (each run's own,
  :func:`~guarddiag.analyses.operating.matched_threshold`) and at 0.5 (the gate's read-out);
* the same CAP at the threshold matched on the neutral rows in the benchmarks' language alone
  (the protocol's ``benchmark_lang``), and the share of the other languages' neutral rows that
  the all-language threshold flags: the clear-harm sets are English, 18 % of the pool's neutral
  rows (42 % before the rows with a train copy were left out) are not, and an English-only
  encoder that cannot read them spends its false-flag budget there (docs/guide/study.md,
  "Choosing a frozen size");
* AUROC of the reference on each ranking pair beside the TF-IDF baseline on the same prompts
  (:func:`~guarddiag.analyses.competence.ranking_table`);
* the teachers' HarmBench-copyright gap, CAP(T_A) − CAP(T_B) at 0.5: the policy content the
  students are distilled from;
* the cost: encoder seconds per 1,000 prompts (a fixed sample, uncached), training seconds per
  1,000 train rows for a whole run (student and teacher), and the peak memory of the process
  that trained and scored the size (each size has its own, so the peaks do not mix).

The states every size reads are embedded first, once per encoder pass for all the sizes that
share a checkpoint (:func:`~guarddiag.model.states.fill_states`), and reused from the state
cache afterwards; finished runs and score caches are reused, so a second bench only renders.

Example (CPU; the first run embeds about 70k prompts, minutes on 2 cores: docs/decisions.md)::

    guarddiag bench competence --sizes minilm,minilm-mean-l256 --work-dir work
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from guarddiag.analyses.competence import (
    COUNTED,
    clear_harm_benchmarks,
    policy_moved_pairs,
    ranking_fails,
    ranking_pairs,
    ranking_table,
)
from guarddiag.analyses.operating import (
    flag_shares_by_language,
    matched_threshold,
    neutral_ids,
    neutral_rows,
)
from guarddiag.analyses.payload import records
from guarddiag.analyses.scores import VAL_BENCHMARK
from guarddiag.cores import usable_cores
from guarddiag.data import load_benchmarks, subset_status
from guarddiag.errors import GuarddiagError
from guarddiag.files import read_json, write_json
from guarddiag.labels import MAPPINGS
from guarddiag.numerics import cpu_flags
from guarddiag.pool.table import read_pool
from guarddiag.predictions import read, with_unsafe_probability
from guarddiag.protocol import protocol
from guarddiag.roles import is_reference, is_teacher
from guarddiag.runs import read_run_meta

BENCH_BRANCHES = ("T_A", "T_B", "reference")
"""What the bench trains per size: the reference recipe and both teachers (T_B teaches it;
T_A only for the copyright gap)."""
DEFAULT_FFR = 0.05
"""False-flag rate on the policy-neutral val rows that sets each run's threshold (at most)."""
COSTS_DIR = "bench-costs"
EMBED_SAMPLE = 512
"""Prompts of the fixed sample whose uncached encoder pass times a size's embedding."""


@dataclass(frozen=True)
class SizeCost:
    """What one size cost on this machine."""

    size: str
    teacher_size: str
    embed_s_per_1k: float
    """Encoder seconds per 1,000 prompts at this size's pooling (uncached, this process's
    threads)."""
    train_s_per_1k: float
    """Reference student: seconds of a whole run (every epoch) per 1,000 train rows, mean over
    seeds (as recorded when each run was trained)."""
    teacher_s_per_1k: float
    """The same for the teachers (mean of T_A and T_B)."""
    peak_mib: float
    """Peak resident memory of the process that trained and scored this size."""
    n_train_rows: int
    threads: int
    """torch threads each run trained with (the encoder sample: every usable core)."""


@dataclass(frozen=True)
class CompetenceBenchResult:
    """Per size: the held-out competence table and the cost."""

    sizes: pl.DataFrame = field(repr=False)
    """Per size: size, n_runs, cap_ffr, cap_ffr_low, cap_ffr_high (seed range), ffr (realised
    false-flag rate on the neutral rows, seed mean), cap_05, cap_ffr_lang (CAP at the threshold
    matched on the neutral rows in the benchmarks' language alone), ffr_other (the share of the
    other languages' neutral rows the all-language threshold flags), copy_t_a, copy_t_b, copy_gap,
    pairs_beaten of pairs_counted (ranking pairs where AUROC ≥ TF-IDF + margin, of those label
    policy does not move: the gate's count, :data:`~guarddiag.analyses.competence.COUNTED`),
    the :class:`SizeCost` fields;
    and a ``tfidf`` row for the policy-B TF-IDF baseline (no cost, no teachers)."""
    ranking: pl.DataFrame = field(repr=False)
    """Per size and pair: :func:`~guarddiag.analyses.competence.ranking_table`."""
    caps: pl.DataFrame = field(repr=False)
    """Per size (and ``tfidf``) and clear-harm subset: cap_ffr and cap_05, seed means."""
    ffr: float
    mapping: str
    subset: str
    cpu: str
    load: tuple[float, float, float]
    """Load average when the bench finished: on a busy machine every time is longer."""
    lang: str = field(default_factory=lambda: protocol().benchmark_lang)
    """The benchmarks' language (``cap_ffr_lang``'s neutral rows)."""

    def to_frame(self) -> pl.DataFrame:
        return self.sizes.clone()

    def to_dict(self) -> dict[str, Any]:
        """Everything ``bench competence`` prints, as JSON values (``--json``): the settings,
        one record per row of ``sizes``, ``ranking`` and ``caps`` (non-finite floats null) and
        the ``gate`` lines."""
        return {"cpu": self.cpu, "load": list(self.load), "ffr": self.ffr,
                "mapping": self.mapping, "subset": self.subset, "lang": self.lang,
                "sizes": records(self.sizes), "ranking": records(self.ranking),
                "caps": records(self.caps), "gate": self.gate_lines()}

    def to_table(self) -> str:
        """The table ``bench competence`` prints (AUROC per pair as recipe/TF-IDF)."""
        pairs = [p for p, _, _ in ranking_pairs() if p in set(self.ranking["pair"].to_list())]
        at = "CAP@" + format(self.ffr, ".0%") + "FFR"
        head = (f"{'size':<18} {at:>10} {at + '-' + self.lang:>13} {'other FFR':>9} "
                f"{'CAP@0.5':>8} "
                + "".join(f" {p[:14]:>14}" for p in pairs)
                + f" {'T_A-T_B copy':>12} {'embed s/1k':>10} {'train s/1k':>10} "
                  f"{'teach s/1k':>10} {'peak MiB':>8}")
        lines = [head]
        for r in self.sizes.iter_rows(named=True):
            cells = []
            for p in pairs:
                hit = self.ranking.filter((pl.col("size") == r["size"]) & (pl.col("pair") == p))
                cells.append(f" {hit['auroc'][0]:.3f}/{hit['baseline_auroc'][0]:.3f}".rjust(15)
                             if hit.height and hit["baseline_auroc"][0] is not None else
                             f" {'':>14}")
            lines.append(
                f"{r['size']:<18} {_pct(r['cap_ffr']):>10} {_pct(r.get('cap_ffr_lang')):>13}"
                f" {_pct(r.get('ffr_other')):>9} {_pct(r['cap_05']):>8}"
                + "".join(cells) + f" {_pp(r['copy_gap']):>12}"
                f" {_num(r.get('embed_s_per_1k')):>10} {_num(r.get('train_s_per_1k'), 2):>10}"
                f" {_num(r.get('teacher_s_per_1k'), 2):>10} {_num(r.get('peak_mib'), 0):>8}")
        return "\n".join(lines)

    def gate_lines(self) -> list[str]:
        """Per size, the report's competence gate (:mod:`guarddiag.analyses.competence`): CAP at
        the cut-off against the protocol's floor, and the pairs where AUROC beats TF-IDF by the
        protocol's margin, of those label policy does not move."""
        proto = protocol()
        lines = []
        for r in self.sizes.filter(pl.col("size") != "tfidf").iter_rows(named=True):
            ranking = self.ranking.filter(pl.col("size") == r["size"])
            moved = policy_moved_pairs(ranking)
            counted = ranking.filter(COUNTED)
            beaten = counted.filter(pl.col("beats_baseline")).height
            failed = [*(["CAP"] if r["cap_05"] < proto.competence_floor else []),
                      *(["AUROC"] if ranking_fails(ranking) else [])]
            verdict = f"fails ({', '.join(failed)})" if failed else "passes"
            lines.append(
                f"{r['size']}: the report's competence gate {verdict}: CAP at {proto.cutoff:g}"
                f" {_pct(r['cap_05'])} (floor {_pct(proto.competence_floor)}); "
                f"AUROC ≥ TF-IDF + {proto.auroc_margin:g} on {beaten} of {counted.height} pairs"
                + (f" counted ({', '.join(moved)}: moved by label policy, not counted)"
                   if moved else ""))
        return lines

    def to_caps_table(self) -> str:
        """CAP per clear-harm subset and size: at the matched threshold / at the threshold
        matched on the benchmarks' language / at 0.5 (the middle one blank without it)."""
        sizes = self.sizes["size"].to_list()
        lines = [f"{'subset':<22}" + "".join(f" {s[:25]:>25}" for s in sizes)]
        for b in dict.fromkeys(self.caps["benchmark"].to_list()):
            cells = []
            for s in sizes:
                hit = self.caps.filter((pl.col("size") == s) & (pl.col("benchmark") == b))
                if not hit.height:
                    cells.append(f" {'':>25}")
                    continue
                lang = hit["cap_ffr_lang"][0]
                text = " / ".join((_pct(hit["cap_ffr"][0]), _pct(lang) or "-",
                                   _pct(hit["cap_05"][0])))
                cells.append(f" {text:>25}")
            lines.append(f"{b:<22}" + "".join(cells))
        return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "" if x is None else f"{100 * x:+.1f} pp"


def _num(x: float | None, digits: int = 1) -> str:
    return "" if x is None else f"{x:.{digits}f}"


# ----------------------------------------------------------------------------- measures

def at_most(ffr: float, n: int) -> float:
    """The largest share of ``n`` neutral rows that is whole and not above ``ffr``: the bench's
    operating point flags floor(ffr · n) rows, so a target read as "CAP at ≤ 5 % false flags"
    holds for its number (the report's matched rule interpolates between the two whole counts
    around a fractional target instead, which can flag 5.01 %)."""
    # 1e-9: a product a hair under a whole count (0.29 · 100 = 28.999999999999996) is that count
    return math.floor(ffr * n + 1e-9) / n


def run_operating_points(predictions: pl.DataFrame, neutral: Sequence[str], *,
                         benchmarks: Sequence[str], mapping: str = "loose",
                         subset: str = "decontaminated", ffr: float = DEFAULT_FFR,
                         in_lang: Sequence[str] = ()) -> pl.DataFrame:
    """Per run and benchmark of ``benchmarks``: CAP (share with P(unsafe) ≥ t) at the run's
    threshold t flagging at most ``ffr`` of the ``neutral`` val rows (:func:`at_most`), and at
    the protocol's cut-off;
    with t and the realised false-flag rate. Given ``in_lang`` (the neutral rows in the
    benchmarks' language), also CAP at the threshold flagging ``ffr`` of those alone
    (``cap_ffr_lang``) and the share of the other neutral rows flagged at t (``ffr_other``);
    null without them. Benchmark rows are the decontaminated ones unless ``subset`` is
    ``full``."""
    ok = with_unsafe_probability(predictions.filter(pl.col("status") == "ok"),
                                 MAPPINGS[mapping], column="_p")
    val = ok.filter((pl.col("benchmark") == VAL_BENCHMARK)
                    & pl.col("prompt_id").is_in(list(neutral))).with_columns(
        pl.col("prompt_id").is_in(list(in_lang)).alias("_in"))
    bench = ok.filter(pl.col("benchmark").is_in(list(benchmarks)))
    if subset == "decontaminated":
        bench = bench.filter(pl.col("survives_decontam"))
    cutoff = protocol().cutoff
    rows: list[dict[str, object]] = []
    for run in val.sort("run_id").partition_by("run_id", maintain_order=True):
        rid = str(run["run_id"][0])
        p_neutral, mask = run["_p"].to_numpy(), run["_in"].to_numpy()
        t = matched_threshold(p_neutral, at_most(ffr, p_neutral.size))
        t_lang = (matched_threshold(p_neutral[mask], at_most(ffr, int(mask.sum())))
                  if mask.any() else None)
        ffr_other = flag_shares_by_language(p_neutral, mask, t)[1] if in_lang else None
        mine = bench.filter(pl.col("run_id") == rid)
        for b in benchmarks:
            p = mine.filter(pl.col("benchmark") == b)["_p"].to_numpy()
            if p.size:
                rows.append({"run_id": rid, "benchmark": b, "n": int(p.size), "t": t,
                             "ffr": float(np.mean(p_neutral >= t)), "ffr_other": ffr_other,
                             "cap_ffr": float(np.mean(p >= t)),
                             "cap_ffr_lang": (float(np.mean(p >= t_lang))
                                              if t_lang is not None else None),
                             "cap_05": float(np.mean(p >= cutoff))})
    return pl.DataFrame(rows, schema={"run_id": pl.String, "benchmark": pl.String,
                                      "n": pl.Int64, "t": pl.Float64, "ffr": pl.Float64,
                                      "ffr_other": pl.Float64, "cap_ffr": pl.Float64,
                                      "cap_ffr_lang": pl.Float64, "cap_05": pl.Float64})


def _runs(predictions: pl.DataFrame) -> pl.DataFrame:
    cols = ["run_id", "guard_kind", "branch", "size", "seed", "label_policy", "role"]
    return predictions.select(cols).unique("run_id").sort("run_id")


def competence_by_size(predictions: pl.DataFrame, pool: pl.DataFrame, *,
                       teachers: dict[str, str], mapping: str = "loose",
                       subset: str = "decontaminated", ffr: float = DEFAULT_FFR,
                       margin: float | None = None
                       ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(per-size table, ranking table, per-subset CAPs) of the reference recipe at each size
    in ``predictions`` and of the policy-B TF-IDF baseline (size ``tfidf``); ``teachers``
    maps a student size to its teachers' size (for the copyright gap); ``margin`` None: the
    protocol's ``auroc_margin``."""
    proto = protocol()
    copyright_id = proto.rank_benchmark
    clear = [b for b in clear_harm_benchmarks() if b in set(predictions["benchmark"].to_list())]
    if not clear:
        raise GuarddiagError("bench competence: no clear-harm subset was scored (is the data "
                             "directory's benchmarks/ folder there?)")
    rows = neutral_rows(pool, MAPPINGS[mapping])  # read once: both lists below are its rows
    neutral = neutral_ids(rows)
    # The benchmarks' language alone (module docstring): its own threshold, and how many of the
    # other languages' neutral rows the all-language threshold flags. A pool without a lang
    # column leaves both null.
    in_lang = (neutral_ids(rows, lang=proto.benchmark_lang) if "lang" in rows.columns
               else [])
    points = run_operating_points(predictions, neutral, benchmarks=[*clear, copyright_id],
                                  mapping=mapping, subset=subset, ffr=ffr, in_lang=in_lang
                                  ).join(_runs(predictions), on="run_id")
    ref = points.filter(is_reference() | ((pl.col("guard_kind") == "baseline")
                                          & (pl.col("label_policy") == "B")))
    ref = ref.with_columns(pl.when(pl.col("guard_kind") == "baseline").then(pl.lit("tfidf"))
                           .otherwise(pl.col("size")).alias("size"))
    clear_rows = ref.filter(pl.col("benchmark").is_in(clear))
    caps = clear_rows.group_by(["size", "benchmark"]).agg(
        pl.col("cap_ffr").mean(), pl.col("cap_05").mean(), pl.col("cap_ffr_lang").mean()
    ).sort(["size", "benchmark"])
    per_run = clear_rows.group_by(["size", "run_id"]).agg(
        pl.col("cap_ffr").mean(), pl.col("cap_05").mean(), pl.col("ffr").first(),
        pl.col("cap_ffr_lang").mean(), pl.col("ffr_other").first(),
        pl.len().alias("k")).filter(pl.col("k") == len(clear))
    table = per_run.group_by("size").agg(
        pl.len().alias("n_runs"), pl.col("cap_ffr").mean(),
        pl.col("cap_ffr").min().alias("cap_ffr_low"),
        pl.col("cap_ffr").max().alias("cap_ffr_high"), pl.col("ffr").mean(),
        pl.col("cap_05").mean(), pl.col("cap_ffr_lang").mean(), pl.col("ffr_other").mean())
    copy = points.filter((pl.col("benchmark") == copyright_id) & is_teacher())
    gap = [{"size": s, **_copy_gap(copy.filter(pl.col("size") == t))}
           for s, t in teachers.items()]
    ranking = ranking_table(predictions, mapping=mapping, subset=subset, margin=margin)
    beaten = ranking.group_by("size").agg(
        (COUNTED & pl.col("beats_baseline")).sum().alias("pairs_beaten"),
        COUNTED.sum().alias("pairs_counted"))
    table = table.join(pl.DataFrame(gap, schema={"size": pl.String, "copy_t_a": pl.Float64,
                                                 "copy_t_b": pl.Float64,
                                                 "copy_gap": pl.Float64}),
                       on="size", how="left").join(beaten, on="size", how="left")
    return table.sort("size"), ranking, caps


def _copy_gap(teacher_rows: pl.DataFrame) -> dict[str, float | None]:
    """CAP at 0.5 of T_A and T_B on HarmBench-copyright and their difference."""
    by = {str(r["label_policy"]): float(r["cap_05"]) for r in teacher_rows.iter_rows(named=True)}
    a, b = by.get("A"), by.get("B")
    return {"copy_t_a": a, "copy_t_b": b, "copy_gap": a - b if a is not None and b is not None
            else None}


# ----------------------------------------------------------------------------- the bench

@dataclass(frozen=True)
class _SizeTask:
    size: str
    seeds: tuple[int, ...]
    runs_dir: str
    pool_path: str
    data_dir: str | None
    benchmarks: tuple[str, ...]
    sample: tuple[str, ...]


def _bench_size(task: _SizeTask) -> SizeCost:
    """In a process of its own: time the encoder on the sample, train the size's runs and fill
    their score caches; its peak memory is this process's. Where every run was already
    finished, the cost recorded when they were trained (``<runs>/bench-costs/<size>.json``)."""
    from guarddiag.model.sizes import size_up
    from guarddiag.model.threads import auto_threads
    from guarddiag.predict.options import BATCH_SIZE
    from guarddiag.predict.runner import fill_score_cache, scoring_inputs
    from guarddiag.train import load_branches, plan_runs, train_branches
    from guarddiag.train.options import PlanOptions, TrainOptions
    from guarddiag.train.pooled import encoder_for

    runs_dir = Path(task.runs_dir)
    stored = runs_dir / COSTS_DIR / f"{task.size}.json"
    plan = plan_runs(load_branches(), PlanOptions.of(branches=tuple(BENCH_BRANCHES),
                                                     sizes=(task.size,), seeds=task.seeds))
    encoder = encoder_for(task.size, TrainOptions())
    t0 = time.perf_counter()
    encoder.embed(list(task.sample))
    embed_s = time.perf_counter() - t0
    trained = train_branches(branches=load_branches(), plan=plan, runs_dir=runs_dir,
                             pool_path=task.pool_path)
    inputs, _, _ = scoring_inputs(pool_path=Path(task.pool_path), benchmarks=task.benchmarks,
                                  data_dir=Path(task.data_dir) if task.data_dir else None,
                                  derived_dir=None)
    per_1k: dict[str, list[float]] = {"reference": [], "teacher": []}
    n_rows = 0
    for run in plan:
        fill_score_cache(runs_dir / run.run_id, inputs, batch_size=BATCH_SIZE)
        train = read_run_meta(runs_dir / run.run_id).train
        kind = "reference" if run.branch == "reference" else "teacher"
        per_1k[kind].append(1000 * float(train["wall_s"]) / int(train["n_rows"]))
        n_rows = int(train["n_rows"])
    if stored.is_file() and all(r.status == "skipped" for r in trained.runs):
        return SizeCost(**read_json(stored))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cost = SizeCost(task.size, size_up(task.size), 1000 * embed_s / len(task.sample),
                    float(np.mean(per_1k["reference"])), float(np.mean(per_1k["teacher"])),
                    peak_kib / 1024, n_rows, auto_threads([task.size]) or 0)
    write_json(asdict(cost), stored)
    return cost


def bench_benchmarks(data_dir: Path | None) -> tuple[str, ...]:
    """The subsets the bench scores that are available: clear harm, copyright, the pairs."""
    wanted = [*clear_harm_benchmarks(), *protocol().policy_content,
              *(b for _, h, n in ranking_pairs() for b in (h, n))]
    status = {s.id: s.status for s in subset_status(data_dir=data_dir, ids=",".join(wanted))}
    return tuple(b for b in dict.fromkeys(wanted) if status.get(b) == "available")


def bench_competence(*, sizes: str | Sequence[str], pool_path: Path, audit_dir: Path,
                     runs_dir: Path, data_dir: Path | None,
                     seeds: str | Sequence[int] = (42, 43, 44), ffr: float = DEFAULT_FFR,
                     mapping: str = "loose",
                     subset: str = "decontaminated") -> CompetenceBenchResult:
    """The module docstring's bench, for each of ``sizes`` (frozen sizes; a list or
    ``"a,b"``, as :class:`~guarddiag.train.options.PlanOptions` reads them) into ``runs_dir``."""
    from guarddiag.model.sizes import get_size, size_up
    from guarddiag.model.states import fill_states
    from guarddiag.model.threads import torch_threads
    from guarddiag.predict import predict_runs
    from guarddiag.predict.sweep import die_with_parent
    from guarddiag.train.options import PlanOptions, TrainOptions
    from guarddiag.train.pooled import encoder_for

    plan = PlanOptions.of(sizes=sizes, seeds=seeds)
    sizes, seeds = plan.sizes, plan.seeds
    for size in sizes:
        if not get_size(size).frozen:
            raise GuarddiagError(f"--sizes: {size} is not a frozen-encoder size (the bench "
                                 f"trains over cached states; try minilm)")
    if not 0.0 < ffr < 1.0:
        raise GuarddiagError(f"--ffr: expected a share in (0, 1), got {ffr}")
    benchmarks = bench_benchmarks(data_dir)
    pool = read_pool(pool_path)
    frames = load_benchmarks(",".join(benchmarks), data_dir=data_dir).frames
    texts = pool.frame.filter(pl.col("split").is_in(["train", "val"]))["text"].to_list()
    for frame in frames.values():
        texts += frame["text"].to_list()
    with torch_threads(usable_cores()):
        fill_states([encoder_for(s, TrainOptions()) for size in sizes
                     for s in (size, size_up(size))], texts)
    # The same prompts time every size's encoder: a hash-ordered sample of the benchmarks.
    every = {t for f in frames.values() for t in f["text"].to_list()}
    sample = tuple(sorted(every, key=lambda t: hashlib.sha256(t.encode()).hexdigest()
                          )[:EMBED_SAMPLE])
    costs = []
    for size in sizes:
        task = _SizeTask(size, tuple(seeds), str(runs_dir), str(pool_path),
                         str(data_dir) if data_dir else None, benchmarks, sample)
        # A process per size: its peak memory is this size's alone.
        with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as ex:
            costs.append(ex.submit(_bench_size, task).result())
    res = predict_runs(runs_dir=runs_dir, pool_path=pool_path, audit_dir=audit_dir,
                       benchmarks=benchmarks, data_dir=data_dir)
    mine = {*sizes, *(size_up(s) for s in sizes)}
    preds = read(res.path).filter(pl.col("size").is_in(list(mine))
                                  | (pl.col("guard_kind") == "baseline"))
    table, ranking, caps = competence_by_size(preds, pool.frame,
                                              teachers={s: size_up(s) for s in sizes},
                                              mapping=mapping, subset=subset, ffr=ffr)
    cost = pl.DataFrame([asdict(c) for c in costs]).drop("teacher_size")
    table = table.join(cost, on="size", how="left")
    order = {s: i for i, s in enumerate([*sizes, "tfidf"])}
    table = table.sort(pl.col("size").replace_strict(order, return_dtype=pl.Int64))
    return CompetenceBenchResult(table, ranking.filter(pl.col("size").is_in(list(sizes))),
                                 caps, ffr, mapping, subset, cpu_flags(), os.getloadavg())
