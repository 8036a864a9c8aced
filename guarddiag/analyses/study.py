"""This run's numbers beside the study's reference numbers (SPEC §6).

Each row names a quantity, the study's value (as published; SPEC §6) and the value measured
here in the report's primary cohort, or null where this run has no such measurement (a benchmark
not scored, no seed triplets, no outside guard). Units: ``share`` (a fraction shown as %),
``pp`` (percentage points, stored as a fraction), ``p`` (a probability), ``rho``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.analyses.contamination import ContaminationResult
from guarddiag.analyses.correlation import CorrelationResult
from guarddiag.analyses.load import BenchmarkLoadResult, student_runs
from guarddiag.analyses.mapping import MappingEffectResult
from guarddiag.analyses.rank import BranchRankResult
from guarddiag.analyses.scores import ScoresResult

STUDY_OVERLAP = {"jbb_benign": 0.880, "orbench_hard": 0.821, "harmbench_copyright": 0.250,
                 "wildguardtest_harmful": 0.143, "strongreject": 0.121, "advbench": 0.020,
                 "orbench_toxic": 0.0}
"""Exact overlap of the study's training pool with each benchmark (SPEC §6)."""
STUDY_A_LAST = ("E1", "E7", "E8", "E10")

SCHEMA = {"quantity": pl.String, "unit": pl.String, "study": pl.Float64,
          "study_note": pl.String, "here": pl.Float64, "here_note": pl.String}


@dataclass(frozen=True)
class StudyComparisonResult:
    table: pl.DataFrame = field(repr=False)
    subset: str
    mapping: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


Row = dict[str, object]


def _row(quantity: str, unit: str, study: float | None, study_note: str, here: object,
         here_note: str = "") -> Row:
    """One row; ``here`` is a number or None (the frame's schema makes it a float)."""
    return {"quantity": quantity, "unit": unit, "study": study, "study_note": study_note,
            "here": here, "here_note": here_note}


def _load_rows(load: BenchmarkLoadResult | None, lt: pl.DataFrame | None, *, subset: str,
               mapping: str) -> list[Row]:
    """Span Δb and seed floors (study Table 4)."""

    def load_value(bench: str, col: str) -> Any:
        if lt is None:
            return None
        part = lt.filter(pl.col("benchmark") == bench)
        return part[col][0] if part.height else None

    all_ranges = (load.groups.filter((pl.col("subset") == subset)
                                     & (pl.col("mapping") == mapping))["range"].to_list()
                  if load is not None else [])
    return [
        _row("Δb HarmBench-copyright", "pp", 0.99, "", load_value("harmbench_copyright", "delta")),
        _row("widest seed floor, HarmBench-copyright", "pp", 0.585, "37 triplets (111 runs)",
             load_value("harmbench_copyright", "floor_widest"),
             f"{load_value('harmbench_copyright', 'n_groups') or 0} seed group(s)"),
        _row("median seed floor, all benchmarks", "pp", 0.040, "",
             statistics.median(all_ranges) if all_ranges else None,
             f"{len(all_ranges)} (seed group, benchmark) range(s)"),
        _row("Δb WildGuard-benign", "pp", 0.043, "", load_value("wildguardtest_benign", "delta")),
        _row("widest seed floor, WildGuard-benign", "pp", 0.050, "",
             load_value("wildguardtest_benign", "floor_widest")),
    ]


def _rank_rows(rank: BranchRankResult | None) -> list[Row]:
    if rank is None:
        return [_row("rank test {E1, E7, E8, E10} on copyright", "p", 1 / 210, "1/C(10,4)",
                     None)]
    return [_row(f"rank test {{{', '.join(rank.group)}}} on {rank.benchmark} ({size})", "p",
                 1 / 210, "k = 4 of 10 hold the top ranks: 1/C(10,4)", float(test.p_value),
                 f"exact, {test.tail} tail; n = {test.n}, k = {test.k}"
                 + ("; ties present" if test.ties else ""))
            for size, test in rank.tests]


def _correlation_rows(correlation: CorrelationResult | None) -> list[Row]:
    if correlation is None:
        return []
    return [
        _row("Spearman ρ(VAL, mean score on policy-load benchmarks)", "rho", 0.74, "",
             correlation.policy.rho, f"n = {correlation.policy.n} runs, "
             f"{len(correlation.policy_benchmarks)} benchmark(s)"),
        _row("Spearman ρ(VAL, mean score on capability-load benchmarks)", "rho", 0.34, "",
             correlation.capability.rho, f"n = {correlation.capability.n} runs, "
             f"{len(correlation.capability_benchmarks)} benchmark(s)"),
    ]


def _mapping_rows(effect: MappingEffectResult | None, *, subset: str) -> list[Row]:
    """OR-H under the loose and the strict mapping (study Table 2)."""
    if effect is None:
        return []
    t = effect.table.filter((pl.col("subset") == subset)
                            & (pl.col("benchmark") == "orbench_hard"))
    ref = t.filter((pl.col("guard_kind") == "branch") & (pl.col("branch") == "reference"))
    rows = [
        _row("OR-H, reference student, loose mapping", "share", 0.057, "own student",
             ref["loose"].mean() if ref.height else None, f"mean of {ref.height} run(s)"),
        _row("OR-H, reference student, strict mapping", "share", 0.960, "own student",
             ref["strict"].mean() if ref.height else None, f"mean of {ref.height} run(s)"),
    ]
    for r in t.filter(pl.col("guard_kind") == "outside").iter_rows(named=True):
        rows.append(_row(f"OR-H, {r['branch']}, loose → strict", "pp", None,
                         "Qwen3Guard-8B 29.7% → 48.5%", r["strict"] - r["loose"],
                         f"{100 * r['loose']:.1f}% → {100 * r['strict']:.1f}%"
                         + (" (binary verdict only)" if r["strict_applied"] == "native"
                            else "")))
    return rows


def _student_rows(scores: ScoresResult, lt: pl.DataFrame | None, *, subset: str,
                  mapping: str) -> list[Row]:
    """The A-last branches' COPY and OR-H, and mean CAP on capability-load benchmarks."""
    students = student_runs(scores.binary(subset=subset, mapping=mapping))
    copy = students.filter(pl.col("benchmark") == "harmbench_copyright")
    a_last = copy.filter(pl.col("branch").is_in(list(STUDY_A_LAST)))
    orh = students.filter((pl.col("benchmark") == "orbench_hard")
                          & pl.col("branch").is_in(list(STUDY_A_LAST)))
    rows = [
        _row("COPY of A-last branches (E1, E7, E8, E10), lowest run", "share", 1.0,
             "all score 100", a_last["score"].min() if a_last.height else None,
             f"{a_last.height} run(s)"),
        _row("OR-H of A-last branches, highest run", "share", 0.068, "3.4–6.8%",
             orh["score"].max() if orh.height else None, f"{orh.height} run(s)"),
    ]
    if lt is not None:
        cap_benches = lt.filter((pl.col("load") == "capability")
                                & (pl.col("metric") == "CAP"))["benchmark"].to_list()
        per_recipe = students.filter(pl.col("benchmark").is_in(cap_benches)).group_by(
            ["size", "branch"]).agg(pl.col("score").mean())
        note = f"{len(cap_benches)} capability-load harmful benchmark(s)"
        rows += [
            _row("mean CAP on capability-load benchmarks, lowest branch", "share", 0.800,
                 "6 benchmarks", per_recipe["score"].min() if per_recipe.height else None,
                 note),
            _row("mean CAP on capability-load benchmarks, highest branch", "share", 0.911,
                 "6 benchmarks", per_recipe["score"].max() if per_recipe.height else None,
                 note),
        ]
    return rows


def _overlap_rows(contamination: ContaminationResult | None) -> list[Row]:
    if contamination is None:
        return []
    shares = dict(zip(contamination.table["benchmark"].to_list(),
                      contamination.table["share_exact"].to_list(), strict=True))
    return [_row(f"exact overlap, {bench}", "share", value, "study pool (269,861 rows)",
                 shares.get(bench), "" if bench in shares else "not audited here")
            for bench, value in STUDY_OVERLAP.items()]


def study_comparison(*, scores: ScoresResult, load: BenchmarkLoadResult | None,
                     rank: BranchRankResult | None, correlation: CorrelationResult | None,
                     effect: MappingEffectResult | None,
                     contamination: ContaminationResult | None, subset: str,
                     mapping: str) -> StudyComparisonResult:
    """One row per study quantity, in the order of SPEC §6 (module docstring)."""
    lt = (load.table.filter((pl.col("subset") == subset) & (pl.col("mapping") == mapping))
          if load is not None else None)
    rows = [*_load_rows(load, lt, subset=subset, mapping=mapping), *_rank_rows(rank),
            *_correlation_rows(correlation), *_mapping_rows(effect, subset=subset),
            *_student_rows(scores, lt, subset=subset, mapping=mapping),
            *_overlap_rows(contamination)]
    return StudyComparisonResult(table=pl.DataFrame(rows, schema=SCHEMA), subset=subset,
                                 mapping=mapping)
