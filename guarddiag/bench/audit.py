"""``guarddiag bench audit``: throughput of the contamination audit on seeded synthetic pools.

A synthetic pool row is stitched from 3–12-word fragments of real prompts (by default the
benchmark prompts themselves, so every pool word is a benchmark word: the worst case for the
near-duplicate index), with a log-normal length of median 20 words. A seeded share of rows are
planted copies of benchmark prompts: *exact* ones changed only in case, spacing and trailing
punctuation, and *near* ones with one word dropped, replaced or added. The bench checks that the
audit recovers every planted row, and prints wall time and rows/s for the whole
``audit_pool`` call (reading the pool, loading the benchmarks, matching, writing the outputs).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import polars as pl

from guarddiag import data, files
from guarddiag.audit.engine import default_workers
from guarddiag.audit.exact import index_forms
from guarddiag.audit.kernelchoice import SCAN_KERNEL_ENV
from guarddiag.audit.neardup import similar_pairs
from guarddiag.audit.normal import normal_forms
from guarddiag.audit.outputs import save_audit_figure
from guarddiag.audit.run import audit_pool
from guarddiag.bench.audit_peer import (
    PeerResult,
    PeerRow,
    audit_method,
    pair_rows,
    require_datasketch,
)
from guarddiag.bench.audit_plan import PassCost, PeakMemory, ScalePlan, cpu_seconds
from guarddiag.errors import GuarddiagError
from guarddiag.figures import paper_style
from guarddiag.text import jaccard, normalise, word_set, words_of_normal_form

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

EXACT_TARGET_S = 60.0
NEAR_TARGET_S = 600.0


@dataclass(frozen=True)
class SyntheticPool:
    """A seeded synthetic pool and which of its rows were planted."""

    frame: pl.DataFrame
    """Columns ``prompt_id``, ``text``."""
    planted_exact: tuple[int, ...]
    """Row indices whose normal form equals a benchmark prompt's."""
    planted_near: tuple[int, ...]
    """Row indices with word-set Jaccard ≥ the threshold to a benchmark prompt, not exact."""


def synthetic_pool(corpus: Sequence[str], plant_from: Sequence[str], *, rows: int, seed: int,
                   threshold: float = 0.8, exact_share: float = 0.002,
                   near_share: float = 0.002) -> SyntheticPool:
    """Build ``rows`` sentence-like prompts from fragments of ``corpus``, planting copies of
    ``plant_from`` texts (see the module docstring). Same arguments, same pool."""
    words = [w for text in corpus for w in text.split()]
    if len(words) < 50 or not plant_from:
        raise GuarddiagError("synthetic pool: need a corpus of at least 50 words and some "
                             "benchmark prompts to plant")
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.rint(rng.lognormal(np.log(20.0), 0.75, size=rows)), 3, 400)
    lengths = lengths.astype(np.int64)
    n_frag = int(lengths.sum() // 3 + rows)   # fragments are >= 3 words: always enough
    frag_len = rng.integers(3, 13, size=n_frag)
    frag_start = rng.integers(0, len(words) - 12, size=n_frag)
    endings = rng.choice(np.array([".", "?", "", "!"]), size=rows, p=[0.45, 0.35, 0.15, 0.05])
    texts: list[str] = []
    c = 0
    for length, end in zip(lengths.tolist(), endings.tolist(), strict=True):
        pieces: list[str] = []
        need = length
        while need > 0:
            take = min(int(frag_len[c]), need)
            start = int(frag_start[c])
            pieces.extend(words[start:start + take])
            need -= take
            c += 1
        text = " ".join(pieces)
        texts.append(text[:1].upper() + text[1:] + end)

    n_exact, n_near = int(rows * exact_share), int(rows * near_share)
    slots = rng.permutation(rows)[:n_exact + n_near]
    sources = rng.integers(0, len(plant_from), size=n_exact + n_near)
    variant = rng.integers(0, 4, size=n_exact + n_near)
    edit = rng.integers(0, 3, size=n_exact + n_near)
    position = rng.random(size=n_exact + n_near)
    filler = rng.integers(0, len(words), size=n_exact + n_near)
    planted_exact, planted_near = [], []
    for i, (slot, src) in enumerate(zip(slots.tolist(), sources.tolist(), strict=True)):
        original = plant_from[src]
        if i < n_exact:
            copy = (original.upper(), original.lower(), "  " + original.replace(" ", "  "),
                    original.rstrip(".?!") + " ?!")[variant[i]]
            if normalise(copy) == normalise(original) and normalise(copy):
                texts[slot] = copy
                planted_exact.append(slot)
            continue
        tokens = original.split()
        at = int(position[i] * len(tokens))
        if edit[i] == 0 and len(tokens) > 1:
            tokens.pop(at)
        elif edit[i] == 1:
            tokens[min(at, len(tokens) - 1)] = words[filler[i]]
        else:
            tokens.insert(at, words[filler[i]])
        copy = " ".join(tokens)
        if normalise(copy) != normalise(original) and \
                jaccard(word_set(copy), word_set(original)) >= threshold:
            planted_near.append(slot)
        texts[slot] = copy   # a short prompt's edit may fall below the threshold: still a row
    ids = [f"syn-{i:07d}" for i in range(1, rows + 1)]
    frame = pl.DataFrame({"prompt_id": ids, "text": texts},
                         schema={"prompt_id": pl.String, "text": pl.String})
    return SyntheticPool(frame=frame, planted_exact=tuple(sorted(planted_exact)),
                         planted_near=tuple(sorted(planted_near)))


@dataclass(frozen=True)
class BenchPhase:
    """One timed audit run."""

    name: str
    rows: int
    wall_s: float
    target_s: float
    planted_exact: int
    found_exact: int
    planted_near: int | None
    found_near: int | None
    pairs: int
    cpu_s: float = 0.0
    """CPU seconds of this process and its worker processes during the run."""
    peak_mib: float = 0.0
    """Peak summed RSS of those processes during the run."""
    matched_rows: int = 0
    """Pool rows with at least one overlap."""
    matched_row_bytes: float = 0.0
    """Mean bytes one matched row takes in the driver's lists (text and id strings, two
    list slots)."""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s if self.wall_s > 0 else float("inf")


@dataclass(frozen=True)
class AuditBenchResult:
    phases: tuple[BenchPhase, ...]
    n_benchmarks: int
    n_prompts: int
    unavailable: tuple[str, ...]
    generate_s: float
    synthetic_rows: int
    median_words: float
    seed: int
    cpus: int
    load_start: float
    load_end: float
    peak_rss_mib: float
    recall: RecallResult | None = None
    plan: ScalePlan | None = None
    """Per-core rates and the projection to 100M and 1B rows (:mod:`guarddiag.bench.audit_plan`)."""

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{"phase": p.name, "rows": p.rows, "wall_s": p.wall_s,
                              "rows_per_s": p.rows_per_s, "target_s": p.target_s}
                             for p in self.phases])

    def render(self) -> str:
        lines = [
            f"machine: {self.cpus} CPUs; load average {self.load_start:.2f} at start, "
            f"{self.load_end:.2f} at end (other jobs on the machine slow these figures down)",
            f"benchmarks: {self.n_benchmarks} subsets, {self.n_prompts:,} prompts"
            + (f"; unavailable: {', '.join(self.unavailable)}" if self.unavailable else ""),
        ]
        if self.synthetic_rows:
            lines.append(f"synthetic pool: {self.synthetic_rows:,} rows, median "
                         f"{self.median_words:.0f} words/row, seed {self.seed}, generated in "
                         f"{self.generate_s:.1f} s (not counted below)")
        for p in self.phases:
            verdict = "within" if p.wall_s < p.target_s else "OVER"
            found = f"planted exact found {p.found_exact:,}/{p.planted_exact:,}"
            if p.planted_near is not None:
                found += f", planted near found {p.found_near:,}/{p.planted_near:,}"
            lines.append(f"{p.name:<9}{p.rows:>11,} rows {p.wall_s:>8.1f} s "
                         f"{p.rows_per_s:>10,.0f} rows/s  target < {p.target_s:.0f} s "
                         f"({verdict}); {p.pairs:,} pairs; {found}")
        if self.recall is not None:
            lines.append(self.recall.render())
        if self.plan is not None:
            lines.append(self.plan.render())
        lines.append(f"peak memory (RSS): {self.peak_rss_mib:,.0f} MiB")
        return "\n".join(lines)


def bench_audit(*, rows: int = 1_000_000, near_rows: int = 270_000, threshold: float = 0.8,
                corpus: str | Path | None = None, seed: int = 0,
                benchmarks: str | Sequence[str] = "all", data_dir: str | Path | None = None,
                recall_rows: int = 5000, recall_pool: str | Path | None = None,
                recall_figure: str | Path | None = None, contained_rows: int = 0,
                nodes: Sequence[int] = (1, 16), cores_per_node: int = 32,
                plan: bool = True) -> AuditBenchResult:
    """Time ``audit_pool`` on synthetic pools of ``rows`` (exact), ``near_rows`` (near-dup) and
    ``contained_rows`` (exact + containment), then check near-dup recall against brute force on
    ``recall_rows`` rows of ``recall_pool`` (default: the synthetic pool); ``recall_figure``
    saves the recall plot (PNG and PDF). With ``plan`` each pass is also run on a fifth of its
    rows, and the per-core rate and the memory (working set, matched rows) are projected to
    100M and 1B rows on each of ``nodes`` nodes of ``cores_per_node`` cores
    (:mod:`guarddiag.bench.audit_plan`)."""
    if min(rows, near_rows, recall_rows, contained_rows) < 0 or \
            rows + near_rows + recall_rows + contained_rows == 0:
        raise GuarddiagError("bench audit: --rows, --near-rows, --contained-rows and "
                             "--recall-rows must be >= 0, not all 0")
    if not nodes or min(nodes) < 1 or cores_per_node < 1:
        raise GuarddiagError(f"bench audit: --nodes and --cores-per-node must be >= 1, got "
                             f"{list(nodes)} and {cores_per_node}")
    load_start = os.getloadavg()[0]
    bench_set = data.load_benchmarks(benchmarks, data_dir=data_dir)
    if not bench_set.frames:
        raise GuarddiagError("bench audit: no benchmark subset is available (check --data-dir)")
    bench_texts = [t for f in bench_set.frames.values() for t in f.get_column("text").to_list()]
    if corpus is None:
        corpus_texts = bench_texts
    else:
        corpus_texts = files.read_table(corpus, columns=["text"]).get_column("text").to_list()
        corpus_texts = [t for t in corpus_texts if t]

    started = time.perf_counter()
    n_synthetic = max(rows, near_rows, contained_rows, 0 if recall_pool else recall_rows)
    if n_synthetic:
        logger.info(f"bench audit: generating a {n_synthetic:,}-row synthetic pool")
    pool = synthetic_pool(corpus_texts, bench_texts, rows=n_synthetic, seed=seed,
                          threshold=threshold)
    generate_s = time.perf_counter() - started
    # The median of word counts is a number, or None for an empty pool.
    median = pool.frame.get_column("text").str.split(" ").list.len().median()
    median_words = float(cast("float | None", median) or 0.0)

    phases, costs = _run_phases(pool, {"exact": rows, "near-dup": near_rows,
                                       "contained": contained_rows}, plan=plan,
                                benchmarks=benchmarks, data_dir=data_dir, threshold=threshold)
    recall = None
    if recall_rows:
        recall = _recall(pool, bench_texts, recall_pool=recall_pool, rows=recall_rows,
                         threshold=threshold, seed=seed, figure=recall_figure)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return AuditBenchResult(
        phases=tuple(phases), n_benchmarks=len(bench_set.frames), n_prompts=len(bench_texts),
        unavailable=tuple(s.id for s in bench_set.unavailable), generate_s=generate_s,
        synthetic_rows=n_synthetic,
        median_words=median_words, seed=seed, cpus=os.cpu_count() or 1,
        load_start=load_start, load_end=os.getloadavg()[0], peak_rss_mib=peak, recall=recall,
        plan=ScalePlan(costs=tuple(costs), nodes=tuple(nodes), cores_per_node=cores_per_node)
        if plan and costs else None)


def bench_peer(*, rows: int = 200_000, threshold: float = 0.8, seed: int = 0,
               benchmarks: str | Sequence[str] = "all", data_dir: str | Path | None = None,
               num_perm: int = 128) -> PeerResult:
    """``bench audit --peer``: on one seeded synthetic pool of ``rows`` rows, the exact, the
    near-dup and the full audit ("full": near-dup, templates, containment; whole command, fresh
    process), the prefix-filter join and datasketch's MinHashLSH (word sets to pairs), each
    pair finder's recall against the exact oracle (:mod:`guarddiag.bench.audit_peer`)."""
    require_datasketch()
    if rows < 1:
        raise GuarddiagError(f"bench audit --peer: --near-rows must be >= 1, got {rows}")
    bench_set = data.load_benchmarks(benchmarks, data_dir=data_dir)
    if not bench_set.frames:
        raise GuarddiagError("bench audit: no benchmark subset is available (check --data-dir)")
    bench_texts = [t for f in bench_set.frames.values() for t in f.get_column("text").to_list()]
    logger.info(f"bench audit: generating a {rows:,}-row synthetic pool")
    pool = synthetic_pool(bench_texts, bench_texts, rows=rows, seed=seed, threshold=threshold)
    timed = []
    with tempfile.TemporaryDirectory(prefix="guarddiag-peer-") as tmp:
        timed.append(_time_bare_join(pool, bench_texts, Path(tmp)))
        for name, near, full in (("exact", 0, 0), ("near-dup", 1, 0), ("full", 1, 1)):
            for figure in (False, True)[:1 if full else 2]:    # "full": the release check
                phase = _time_phase(pool, name, rows, near=bool(near), containment=bool(full),
                                    tmp=Path(tmp), benchmarks=benchmarks, data_dir=data_dir,
                                    threshold=threshold, figure=figure, templates=bool(full))
                timed.append(PeerRow(method=audit_method(name, chart=figure),
                                     scope="whole command", wall_s=phase.wall_s,
                                     peak_mib=phase.peak_mib))
    forms = index_forms([f.get_column("text").to_list() for f in bench_set.frames.values()])
    bench_sets = [frozenset(words_of_normal_form(f)) for f in forms.forms]
    pool_forms = normal_forms(pool.frame.get_column("text"))[0].to_list()
    pool_sets = [frozenset(words_of_normal_form(f)) for f in pool_forms]
    logger.info(f"bench audit: exact oracle of {len(pool_sets):,} × {len(bench_sets):,} pairs")
    t0 = time.perf_counter()
    oracle = brute_force_pairs(bench_sets, pool_sets, threshold)
    oracle_s = time.perf_counter() - t0
    logger.info("bench audit: prefix-filter join and datasketch MinHashLSH on the same word sets")
    found = pair_rows(bench_sets, pool_sets, oracle, threshold=threshold, num_perm=num_perm)
    return PeerResult(rows=(*timed, *found), pool_rows=rows, prompts=len(bench_sets),
                      threshold=threshold, num_perm=num_perm, oracle_pairs=len(oracle),
                      oracle_s=oracle_s, seed=seed)


def _run_phases(pool: SyntheticPool, sizes: dict[str, int], *, plan: bool,
                benchmarks: str | Sequence[str], data_dir: str | Path | None,
                threshold: float) -> tuple[list[BenchPhase], list[PassCost]]:
    """Each pass with rows: on a fifth of them first (the marginal rate, with ``plan``),
    then on all of them (the timed phase)."""
    phases: list[BenchPhase] = []
    costs: list[PassCost] = []
    with tempfile.TemporaryDirectory(prefix="guarddiag-bench-") as tmp:
        for name, n in sizes.items():
            if not n:
                continue
            def timed(rows: int, name: str = name) -> BenchPhase:
                return _time_phase(pool, name, rows, near=name == "near-dup",
                                   containment=name == "contained", tmp=Path(tmp),
                                   benchmarks=benchmarks, data_dir=data_dir,
                                   threshold=threshold)
            small = timed(max(1, n // 5)) if plan else None
            phase = timed(n)
            phases.append(phase)
            if small is not None:
                costs.append(PassCost(name=name, rows_small=small.rows, rows_large=n,
                                      cpu_s=phase.cpu_s, wall_s=phase.wall_s,
                                      peak_small_mib=small.peak_mib,
                                      peak_large_mib=phase.peak_mib, cpu_small_s=small.cpu_s,
                                      matched_rows=phase.matched_rows,
                                      matched_row_bytes=phase.matched_row_bytes,
                                      workers=default_workers()))
    return phases, costs


def _time_phase(pool: SyntheticPool, name: str, n: int, *, near: bool, containment: bool,
                tmp: Path, benchmarks: str | Sequence[str], data_dir: str | Path | None,
                threshold: float, figure: bool = False, templates: bool = False) -> BenchPhase:
    """One timed ``audit_pool`` run on the first ``n`` synthetic rows, with what it recovered
    (``figure``: with the chart, as ``--figure`` draws it; ``templates`` looked for too)."""
    path = _pool_file(pool, n, tmp)
    logger.info(f"bench audit: {name} audit of {n:,} rows{' with the chart' if figure else ''}")
    options = {"benchmarks": benchmarks, "data_dir": data_dir, "near_dup": near,
               "threshold": threshold, "out_dir": tmp / f"audit-{name}-{n}", "force": True,
               "containment": containment, "figure": figure, "templates": templates}
    overlap, wall, cpu, peak = _in_fresh_process(_audit_measured, path, options)
    exact_ids = set(overlap.filter(pl.col("kind") == "exact").get_column("pool_id").to_list())
    any_ids = set(overlap.get_column("pool_id").to_list())
    ids = pool.frame.get_column("prompt_id")
    planted_exact = [ids[i] for i in pool.planted_exact if i < n]
    planted_near = [ids[i] for i in pool.planted_near if i < n]
    return BenchPhase(
        name=name, rows=n, wall_s=wall, target_s=NEAR_TARGET_S if near else EXACT_TARGET_S,
        planted_exact=len(planted_exact),
        found_exact=sum(i in exact_ids for i in planted_exact),
        planted_near=len(planted_near) if near else None,
        found_near=sum(i in any_ids for i in planted_near) if near else None,
        pairs=overlap.height, cpu_s=cpu, peak_mib=peak, matched_rows=len(any_ids),
        matched_row_bytes=_row_bytes(pool.frame.head(n).filter(pl.col("prompt_id").is_in(
            sorted(any_ids)))))


def _in_fresh_process(measure: Callable[..., _T], *args: Any) -> _T:
    """``measure(*args)`` in a fresh (spawned) process: the peak memory and CPU time it
    measures are that run's alone, not what the bench and earlier runs left behind."""
    with ProcessPoolExecutor(max_workers=1,
                             mp_context=multiprocessing.get_context("spawn")) as child:
        return child.submit(measure, *args).result()


def _pool_file(pool: SyntheticPool, n: int, tmp: Path) -> Path:
    """The first ``n`` synthetic rows as parquet, written once per size: the passes timed on
    the same rows read the same file."""
    path = tmp / f"pool-{n}.parquet"
    return path if path.is_file() else files.write_parquet(pool.frame.head(n), path)


def _time_bare_join(pool: SyntheticPool, bench_texts: list[str], tmp: Path) -> PeerRow:
    """The floor an exact audit is held to: in a fresh process, read the pool's ids and texts
    and the benchmark texts from parquet, lower-case both, keep the pool rows whose text is a
    benchmark text (a hash semi-join) and write them out; nothing else."""
    pool_path = _pool_file(pool, pool.frame.height, tmp)
    bench_path = files.write_parquet(pl.DataFrame({"text": bench_texts}, schema={
        "text": pl.String}), tmp / "benchmarks-bare.parquet")
    logger.info(f"bench audit: bare polars join of {pool.frame.height:,} rows")
    wall, peak = _in_fresh_process(_bare_join_measured, pool_path, bench_path,
                                   tmp / "bare-out.parquet")
    return PeerRow(method="bare polars join", scope="read, lower, join", wall_s=wall,
                   peak_mib=peak)


def _bare_join_measured(pool_path: Path, bench_path: Path, out: Path) -> tuple[float, float]:
    """In a child process: wall seconds and peak RSS (MiB) of the bare join."""
    t0 = time.perf_counter()
    with PeakMemory() as memory:
        bench = (pl.scan_parquet(bench_path).select(pl.col("text").str.to_lowercase())
                 .unique())
        (pl.scan_parquet(pool_path).select("prompt_id", pl.col("text").str.to_lowercase())
         .join(bench, on="text", how="semi").collect().write_parquet(out))
    return time.perf_counter() - t0, memory.peak_mib


def _row_bytes(rows: pl.DataFrame) -> float:
    """Mean in-memory bytes of a row held as a text and an id in two Python lists."""
    if not rows.height:
        return 0.0
    slots = 2 * struct.calcsize("P")
    sizes = [sys.getsizeof(t) + sys.getsizeof(i) + slots
             for t, i in zip(rows["text"].to_list(), rows["prompt_id"].to_list(), strict=True)]
    return sum(sizes) / len(sizes)


def _audit_measured(path: Path, options: dict[str, Any]
                    ) -> tuple[pl.DataFrame, float, float, float]:
    """In a child process: overlap table, wall and CPU seconds (with its workers) and peak summed
    RSS in MiB of the audit; a near-dup one runs compiled at every size, as at scale."""
    if options["near_dup"]:
        os.environ[SCAN_KERNEL_ENV] = "compiled"
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    with PeakMemory() as memory:
        result = audit_pool(path, **options)
    return result.overlap, time.perf_counter() - t0, cpu_seconds() - cpu0, memory.peak_mib


def _recall(pool: SyntheticPool, bench_texts: list[str], *, recall_pool: str | Path | None,
            rows: int, threshold: float, seed: int,
            figure: str | Path | None) -> RecallResult:
    if recall_pool is not None:
        sample = files.read_table(recall_pool, columns=["text"]).get_column("text")
        sample_texts = [t for t in sample.to_list() if t]
    else:
        sample_texts = pool.frame.get_column("text").to_list()
    logger.info(f"bench audit: near-dup recall vs brute force on {rows:,} rows")
    recall = recall_check(sample_texts, bench_texts, threshold=threshold, rows=rows, seed=seed)
    if figure is not None:
        save_audit_figure(plot_recall(recall), Path(figure).with_suffix(""))
    return recall


# ─── near-dup recall against brute force ───────────────────────────────────────────────────────

RECALL_BUCKETS = (0.8, 0.85, 0.9, 0.95, 1.0)
"""Lower edges of the Jaccard buckets recall is reported in (the last bucket is J = 1)."""


@dataclass(frozen=True)
class RecallResult:
    """Near-dup join vs a brute-force scan of every (pool row, benchmark prompt) pair."""

    rows: int
    prompts: int
    threshold: float
    oracle_pairs: int
    found_pairs: int
    true_positives: int
    buckets: tuple[tuple[float, float, int, int], ...]
    """(low, high, oracle pairs, found pairs) per Jaccard bucket."""
    oracle_s: float
    join_s: float

    @property
    def recall(self) -> float:
        return self.true_positives / self.oracle_pairs if self.oracle_pairs else 1.0

    @property
    def precision(self) -> float:
        return self.true_positives / self.found_pairs if self.found_pairs else 1.0

    def render(self) -> str:
        lines = [f"near-dup recall vs brute force: {self.rows:,} pool rows × {self.prompts:,} "
                 f"benchmark prompts, Jaccard ≥ {self.threshold:g}: {self.oracle_pairs:,} true "
                 f"pairs, {self.found_pairs:,} found; recall {self.recall:.4f}, precision "
                 f"{self.precision:.4f} (brute force {self.oracle_s:.1f} s, index "
                 f"{self.join_s:.1f} s)"]
        for low, high, n_oracle, n_found in self.buckets:
            span = "J = 1" if low == high else f"{low:.2f} ≤ J < {high:.2f}"
            rec = f"{n_found / n_oracle:.4f}" if n_oracle else "—"
            lines.append(f"  {span:<18} true {n_oracle:>7,}  found {n_found:>7,}  recall {rec}")
        return "\n".join(lines)


def brute_force_pairs(bench_sets: list[frozenset[str]], pool_sets: list[frozenset[str]],
                       threshold: float, *, chunk: int = 1000) -> set[tuple[int, int]]:
    """Every pair with Jaccard ≥ threshold, from exact intersection counts of all pairs.

    Independent of the prefix index: |a ∩ b| for every pair of compatible sizes is one sparse
    0/1 matrix product.
    """
    import scipy.sparse as sp  # heavy, and only this oracle needs it

    vocab: dict[str, int] = {}
    for s in bench_sets:
        for w in s:
            vocab.setdefault(w, len(vocab))

    def matrix(sets: list[frozenset[str]]) -> sp.csr_matrix:
        indptr: list[int] = [0]
        indices: list[int] = []
        for s in sets:
            indices.extend(vocab[w] for w in s if w in vocab)
            indptr.append(len(indices))
        data = np.ones(len(indices), dtype=np.int32)
        return sp.csr_matrix((data, indices, indptr), shape=(len(sets), len(vocab)))

    bench_m = matrix(bench_sets).T.tocsc()
    bench_size = np.array([len(s) for s in bench_sets], dtype=np.int64)
    # |a ∩ b| ≤ min(|a|, |b|), so J ≥ t needs t·|b| ≤ |a| ≤ |b|/t: each pool row is multiplied
    # only with the prompts of such sizes (with slack, so no pair is lost to rounding); this
    # cuts the product several-fold and keeps the oracle an exact count of every pair.
    by_size = np.argsort(bench_size, kind="stable")
    sorted_size = bench_size[by_size]
    pool_size = np.array([len(s) for s in pool_sets], dtype=np.int64)
    out: set[tuple[int, int]] = set()
    for k in np.unique(pool_size[pool_size > 0]).tolist():
        low = np.searchsorted(sorted_size, threshold * k - 1e-9, side="left")
        high = np.searchsorted(sorted_size, k / threshold + 1e-9, side="right")
        cols = by_size[low:high]
        if not cols.size:
            continue
        sub = bench_m[:, cols]
        rows = np.flatnonzero(pool_size == k)
        for start in range(0, rows.size, chunk):
            part = rows[start:start + chunk]
            inter = (matrix([pool_sets[j] for j in part.tolist()]) @ sub).tocoo()
            union = k + bench_size[cols[inter.col]] - inter.data
            # Same float as text.jaccard: |a ∩ b| / |a ∪ b|.
            keep = inter.data / union >= threshold
            out.update(zip(cols[inter.col[keep]].tolist(), part[inter.row[keep]].tolist(),
                           strict=True))
    return out


def recall_check(pool_texts: Sequence[str], bench_texts: Sequence[str], *,
                 threshold: float = 0.8, rows: int | None = 5000, seed: int = 0
                 ) -> RecallResult:
    """Recall and precision of the prefix-filter join against brute force on a seeded sample of
    ``rows`` pool rows (all rows when None)."""
    rng = np.random.default_rng(seed)
    if rows is not None and rows < len(pool_texts):
        pick = np.sort(rng.choice(len(pool_texts), size=rows, replace=False))
        pool_texts = [pool_texts[i] for i in pick.tolist()]
    bench_sets = [word_set(t) for t in bench_texts]
    pool_sets = [word_set(t) for t in pool_texts]
    t0 = time.perf_counter()
    oracle = brute_force_pairs(bench_sets, pool_sets, threshold)
    oracle_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = similar_pairs(bench_sets, pool_sets, threshold=threshold)
    join_s = time.perf_counter() - t0
    found_set = {(i, j) for i, j, _ in found}
    sim = {(i, j): jaccard(bench_sets[i], pool_sets[j]) for i, j in oracle | found_set}
    buckets = []
    edges = [e for e in RECALL_BUCKETS if e >= threshold] or [threshold]
    if edges[0] > threshold:
        edges.insert(0, threshold)
    for k, low in enumerate(edges):
        high = edges[k + 1] if k + 1 < len(edges) else low
        def inside(pair: tuple[int, int], low: float = low, high: float = high) -> bool:
            return sim[pair] == 1.0 if low == high else low <= sim[pair] < high
        buckets.append((low, high, sum(map(inside, oracle)),
                        sum(map(inside, oracle & found_set))))
    return RecallResult(rows=len(pool_texts), prompts=len(bench_texts), threshold=threshold,
                        oracle_pairs=len(oracle), found_pairs=len(found_set),
                        true_positives=len(oracle & found_set), buckets=tuple(buckets),
                        oracle_s=oracle_s, join_s=join_s)


def plot_recall(result: RecallResult) -> object:
    """Bar chart of recall per Jaccard bucket, with the number of true pairs under each bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = {"font.size": 8, "axes.spines.top": False, "axes.spines.right": False,
             "font.family": "DejaVu Sans"}
    with paper_style(style):
        fig, ax = plt.subplots(figsize=(5.0, 2.6), layout="constrained")
        names = ["J = 1" if lo == hi else f"[{lo:.2f}, {hi:.2f})"
                 for lo, hi, _, _ in result.buckets]
        values = [f / o if o else 0.0 for _, _, o, f in result.buckets]
        bars = ax.bar(names, values, color="#2b5d8a", width=0.6)
        for bar, (_, _, o, f) in zip(bars, result.buckets, strict=True):
            ax.annotate(f"{f:,}/{o:,}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
        ax.set_ylim(0, 1.12)
        ax.axhline(0.95, color="#aa3333", linewidth=0.8, linestyle="--")
        ax.annotate("0.95", (1.0, 0.95), xycoords=("axes fraction", "data"), xytext=(2, -3),
                    textcoords="offset points", color="#aa3333", fontsize=7)
        ax.set_ylabel("recall vs brute force")
        ax.set_xlabel(f"word-set Jaccard of the true pair\n({result.rows:,} pool rows × "
                      f"{result.prompts:,} benchmark prompts)")
    return fig
