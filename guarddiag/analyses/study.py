"""This run's numbers beside the study's reference numbers (SPEC §6).

Each row names a quantity, the study's value (as published; SPEC §6) and the value measured
here in the report's primary cohort, or null where this run has no such measurement (a benchmark
not scored, no seed triplets, no outside guard). Units: ``share`` (a fraction shown as %),
``pp`` (percentage points, stored as a fraction), ``p`` (a probability), ``rho``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.analyses.calls import CALLS_ANALYSIS, CallsResult
from guarddiag.analyses.callwords import at_cutoff
from guarddiag.analyses.competence import clear_harm_benchmarks
from guarddiag.analyses.contamination import CONTAMINATION, ContaminationResult
from guarddiag.analyses.correlation import CORRELATION, CorrelationResult
from guarddiag.analyses.load import LOAD, BenchmarkLoadResult, student_runs
from guarddiag.analyses.mapping import EFFECT, MappingEffectResult
from guarddiag.analyses.overlap_origin import OverlapOriginResult, overlap_origins
from guarddiag.analyses.rank import RANK, BranchRankResult
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.protocol import protocol
from guarddiag.roles import is_a_last, is_reference, is_student, is_variant
from guarddiag.study_figures import study_figures

DERIVED_MARK = "__"
"""Mutated / derived subsets (``sorrybench__caesar``) carry this in their id; the study scored
none, so they are left out of every mean compared with the study's."""

SCHEMA = {"quantity": pl.String, "unit": pl.String, "study": pl.Float64,
          "study_note": pl.String, "here": pl.Float64, "here_note": pl.String}


@dataclass(frozen=True)
class StudyComparisonResult:
    table: pl.DataFrame = field(repr=False)
    subset: str
    mapping: str
    overlap_origin: OverlapOriginResult | None = None
    """Per audited benchmark: is its overlap set by the pool recipe or measured?"""
    excluded_subsets: tuple[str, ...] = ()
    """Derived (mutated) subsets left out of the study-comparable means."""
    notes: tuple[str, ...] = ()
    """What the comparison can and cannot support, in sentences."""

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
                                     & (pl.col("mapping") == mapping)
                                     & ~pl.col("benchmark").str.contains(DERIVED_MARK,
                                                                         literal=True))
                  ["range"].to_list()
                  if load is not None else [])
    rows = []
    for i, (bench, span) in enumerate(study_figures().spans.items()):
        rows.append(_row(f"Δb {span.title}", "pp", span.delta, "", load_value(bench, "delta")))
        rows.append(_row(f"widest seed floor, {span.title}", "pp", span.floor_widest,
                         span.floor_note or "", load_value(bench, "floor_widest"),
                         f"{load_value(bench, 'n_groups') or 0} seed group(s)"
                         if span.floor_note else ""))
        if i == 0:    # the median follows the first benchmark's rows, as in Table 4
            rows.append(_row("median seed floor, all benchmarks", "pp",
                             study_figures().median_floor, "",
                             statistics.median(all_ranges) if all_ranges else None,
                             f"{len(all_ranges)} (seed group, benchmark) range(s)"))
    return rows


def _rank_rows(rank: BranchRankResult | None) -> list[Row]:
    p = study_figures().rank_p
    if rank is None:
        return [_row("rank test of the A-last group on copyright", "p", p.value, p.exact, None)]
    return [_row(f"rank test {{{', '.join(rank.group)}}} on {rank.benchmark} ({test.size})", "p",
                 p.value, f"k = 4 of 10 hold the top ranks: {p.exact}", float(test.p_value),
                 f"exact, {test.tail} tail; n = {test.n}, k = {test.k}"
                 + ("; ties present" if test.ties else ""))
            for test in rank.tests]


_STUDY_VAL = ("multilingual val, 69.3% of it also in policy-A training files (here: the val "
              "section's parts)")


def _correlation_rows(correlation: CorrelationResult | None) -> list[Row]:
    if correlation is None:
        return []
    return [
        _row("Spearman ρ(VAL, mean score on the benchmarks with an A/B call)", "rho",
             study_figures().correlation.policy,
             _STUDY_VAL + "; the study's policy-load set", correlation.policy.rho,
             f"English VAL; n = {correlation.policy.n} recipes (seed means), "
             f"{len(correlation.policy.benchmarks)} harmful study benchmark(s) called A flags "
             "more or less"),
        _row("Spearman ρ(VAL, mean score on the benchmarks called capability)", "rho",
             study_figures().correlation.capability,
             _STUDY_VAL + "; the study's capability-load set", correlation.capability.rho,
             f"English VAL; n = {correlation.capability.n} recipes (seed means), "
             f"{len(correlation.capability.benchmarks)} harmful study benchmark(s) called "
             "capability"),
    ]


def _mapping_rows(effect: MappingEffectResult | None, scores: ScoresResult, *,
                  subset: str) -> list[Row]:
    """OR-H under the loose and the strict mapping (study Table 2)."""
    if effect is None:
        return []
    orh = study_figures().over_refusal
    t = effect.table.filter((pl.col("subset") == subset)
                            & (pl.col("benchmark") == orh.benchmark))
    reference_runs = scores.table.filter(is_reference())["run_id"].unique().to_list()
    ref = t.filter(pl.col("run_id").is_in(reference_runs))
    rows = [
        _row("OR-H, reference student, loose mapping", "share", orh.reference_loose,
             orh.reference_note,
             ref["loose"].mean() if ref.height else None, f"mean of {ref.height} run(s)"),  # pragma: no mutate(guard-always): an empty column's mean is None too  # noqa: E501
        _row("OR-H, reference student, strict mapping", "share", orh.reference_strict,
             orh.reference_note,
             ref["strict"].mean() if ref.height else None, f"mean of {ref.height} run(s)"),  # pragma: no mutate(guard-always): an empty column's mean is None too  # noqa: E501
    ]
    for r in t.filter(pl.col("guard_kind") == "outside").iter_rows(named=True):
        rows.append(_row(f"OR-H, {r['branch']}, loose → strict", "pp", None,
                         orh.outside_note, r["strict"] - r["loose"],
                         f"{100 * r['loose']:.1f}% → {100 * r['strict']:.1f}%"
                         + (" (binary verdict only)" if r["strict_applied"] == "native"
                            else "")))
    return rows


def _student_rows(scores: ScoresResult, calls: CallsResult | None, *, subset: str,
                  mapping: str) -> list[Row]:
    """The A-last branches' COPY and OR-H, and the branches' mean CAP on clear harm at the cut-off
    and at matched thresholds."""
    students = student_runs(scores.binary(subset=subset, mapping=mapping))
    figures = study_figures()
    copy = students.filter(pl.col("benchmark") == protocol().rank_benchmark)
    a_last = copy.filter(is_a_last())
    orh = students.filter((pl.col("benchmark") == figures.over_refusal.benchmark) & is_a_last())
    rows = [
        _row("COPY of the A-last branches, lowest run", "share", figures.a_last.copy_lowest,
             figures.a_last.copy_note, a_last["score"].min() if a_last.height else None,
             f"{a_last.height} run(s)"),
        _row("OR-H of A-last branches, highest run", "share",
             figures.a_last.over_refusal_highest, figures.a_last.over_refusal_note,
             orh["score"].max() if orh.height else None, f"{orh.height} run(s)"),
    ]
    # The clear-harm benchmarks (the competence gate's set, not a call's): the study's six
    # "capability-load" benchmarks were its clearly harmful ones; a set read from this run's
    # calls would move with every call.
    harm = clear_harm_benchmarks()
    per_recipe = students.filter(pl.col("benchmark").is_in(list(harm))).group_by(
        ["size", "branch"]).agg(pl.col("score").mean())
    scored = sorted(set(students["benchmark"].to_list()) & set(harm))
    cap, cut = figures.clear_harm_cap, at_cutoff()
    note = f"{len(scored)} clear-harm benchmark(s), at {cut}"
    rows += [
        _row(f"mean CAP on clear harm, lowest branch ({cut})", "share", cap.lowest, cap.note,
             per_recipe["score"].min() if per_recipe.height else None, note),
        _row(f"mean CAP on clear harm, highest branch ({cut})", "share", cap.highest, cap.note,
             per_recipe["score"].max() if per_recipe.height else None, note),
    ]
    if calls is not None:
        m = calls.scores.filter((pl.col("threshold") == "matched") & (pl.col("mapping") == mapping)
                                & (pl.col("decontam") == ("full" if subset == "full"
                                                          else "exact"))
                                & pl.col("benchmark").is_in(list(harm))
                                & is_student() & ~is_variant())
        matched = m.group_by("size", "branch").agg(pl.col("rate").mean())
        rows += [
            _row("mean CAP on clear harm, lowest branch (matched)", "share", cap.lowest, cap.note,
                 matched["rate"].min() if matched.height else None,
                 "at each run's matched threshold"),
            _row("mean CAP on clear harm, highest branch (matched)", "share", cap.highest,
                 cap.note,
                 matched["rate"].max() if matched.height else None,
                 "at each run's matched threshold"),
        ]
    return rows


def _origin_note(origins: OverlapOriginResult | None, bench: str) -> str:
    o = origins.origin(bench) if origins is not None else None
    if o is None or o["origin"] == "unknown":
        return "origin unknown (no overlap.parquet or pool meta.json)"
    if o["origin"] == "recipe":
        return (f"set by the pool recipe, not measured: {o['n_exact_sampled']} of "
                f"{o['n_exact']} matches come from sampled copies ({o['sampled_sources']})")
    return "measured (the pool holds no sampled copy of it)"


def _overlap_rows(contamination: ContaminationResult | None,
                  origins: OverlapOriginResult | None) -> list[Row]:
    if contamination is None:
        return []
    shares = dict(zip(contamination.table["benchmark"].to_list(),
                      contamination.table["share_exact"].to_list(), strict=True))
    figures = study_figures()
    return [_row(f"exact overlap, {bench}", "share", value,
                 f"study pool ({figures.pool_rows:,} rows)", shares.get(bench),
                 _origin_note(origins, bench) if bench in shares else "not audited here")
            for bench, value in figures.overlap.items()]


def _fairness_notes(contamination: ContaminationResult | None,
                    origins: OverlapOriginResult | None, excluded: list[str]) -> list[str]:
    """Sentences on what the comparison can support (which overlaps are design choices, the
    two over-refusal sets the study's pool held, the subsets left out of the means)."""
    notes = []
    if origins is not None:
        set_by = origins.table.filter(pl.col("origin") == "recipe")
        if set_by.height:
            notes.append(
                "Set by the pool recipe, not measured: the exact overlap of "
                + ", ".join(f"{r['benchmark']} ({100 * r['share_exact']:.1f}%)"
                            for r in set_by.iter_rows(named=True))
                + " — the recipe copies a sampled fraction of these benchmarks into the pool, "
                "so the share is a dial setting, not a finding to compare with the study's.")
    shares = ({} if contamination is None else dict(zip(
        contamination.table["benchmark"].to_list(),
        contamination.table["share_exact"].to_list(), strict=True)))
    figures = study_figures()
    for bench, name in figures.over_refusal_sets.items():
        here = shares.get(bench)
        shown = "not audited" if here is None else f"{100 * here:.1f}%"
        notes.append(f"{name}: exact overlap {shown} here vs {100 * figures.overlap[bench]:.1f}% "
                     "in the study, whose pool held most of that public over-refusal set; "
                     "full-set scores here and there differ in how much of the benchmark the "
                     "guards trained on, so compare decontaminated scores only.")
    if excluded:
        notes.append(f"Left out of every mean compared with the study (derived subsets the "
                     f"study did not score): {', '.join(excluded)}.")
    return notes


def study_comparison(*, scores: ScoresResult, load: BenchmarkLoadResult | None,
                     rank: BranchRankResult | None, correlation: CorrelationResult | None,
                     effect: MappingEffectResult | None,
                     contamination: ContaminationResult | None, subset: str,
                     mapping: str, overlap: pl.DataFrame | None = None,
                     pool_sources: Mapping[str, Mapping[str, Any]] | None = None,
                     calls: CallsResult | None = None) -> StudyComparisonResult:
    """One row per study quantity, in the order of SPEC §6 (module docstring). ``overlap``
    (the audit's exact matches) and ``pool_sources`` (the pool's per-source counts) tell which
    overlaps the pool recipe set (:mod:`~guarddiag.analyses.overlap_origin`)."""
    lt = (load.table.filter((pl.col("subset") == subset) & (pl.col("mapping") == mapping))
          if load is not None else None)
    origins = (overlap_origins(contamination, overlap, pool_sources or {})
               if contamination is not None else None)
    excluded = sorted({b for b in scores.binary()["benchmark"].to_list() if DERIVED_MARK in b})
    rows = [*_load_rows(load, lt, subset=subset, mapping=mapping), *_rank_rows(rank),
            *_correlation_rows(correlation), *_mapping_rows(effect, scores, subset=subset),
            *_student_rows(scores, calls, subset=subset, mapping=mapping),
            *_overlap_rows(contamination, origins)]
    return StudyComparisonResult(
        table=pl.DataFrame(rows, schema=SCHEMA), subset=subset, mapping=mapping,
        overlap_origin=origins, excluded_subsets=tuple(excluded),
        notes=tuple(_fairness_notes(contamination, origins, excluded)))


def _study(ctx: AnalysisContext) -> StudyComparisonResult:
    o, i = ctx.options, ctx.inputs
    return study_comparison(scores=ctx[SCORES], load=ctx[LOAD], rank=ctx.get(RANK),
                            correlation=ctx.get(CORRELATION), effect=ctx[EFFECT],
                            contamination=ctx.get(CONTAMINATION), subset=o.primary_subset,
                            mapping=o.mapping, overlap=i.audit_overlap,
                            pool_sources=i.pool_sources, calls=ctx.get(CALLS_ANALYSIS))


STUDY = register_analysis("study", _study, result=StudyComparisonResult,
                          needs=(SCORES, LOAD, RANK, CORRELATION, EFFECT, CONTAMINATION,
                                 CALLS_ANALYSIS))
