"""The analysis step of ``guarddiag report``: load every input once, run every analysis once.

:func:`run_analyses` = :func:`~guarddiag.analyses.inputs.load_inputs` + :func:`analyse`. The
result, :class:`AnalysisResults`, holds each analysis's frozen result (None where its inputs are
absent; ``notes`` and the ``*_note`` fields say why); the report's section builders only turn
these into document blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from guarddiag import paths, stats
from guarddiag.analyses.competence import (
    DEFAULT_COMPETENCE_FLOOR,
    CompetenceResult,
    competence_gate,
)
from guarddiag.analyses.contamination import ContaminationResult, contamination_table
from guarddiag.analyses.correlation import CorrelationResult, val_correlation
from guarddiag.analyses.disclosure import DisclosureResult, disclosure_card
from guarddiag.analyses.inputs import ReportInputs, load_inputs
from guarddiag.analyses.load import BenchmarkLoadResult, benchmark_load
from guarddiag.analyses.mapping import MappingEffectResult, mapping_effect
from guarddiag.analyses.outside import OutsideComparisonResult, outside_comparison
from guarddiag.analyses.paired import PairedResults, paired_comparisons
from guarddiag.analyses.pool import (
    PoolStatsResult,
    ValOverlapResult,
    pool_statistics,
    validation_overlap,
)
from guarddiag.analyses.provenance import ProvenanceResult, branch_provenance
from guarddiag.analyses.rank import (
    DEFAULT_BENCHMARK,
    DEFAULT_GROUP,
    BranchRankResult,
    branch_rank_test,
)
from guarddiag.analyses.scores import DEFAULT_THRESHOLD, SUBSETS, ScoresResult, compute_scores
from guarddiag.analyses.sorry import SorryResults, sorry_results
from guarddiag.analyses.study import StudyComparisonResult, study_comparison
from guarddiag.analyses.tables import (
    RecipeTableResult,
    mapping_effect_by_recipe,
    recipe_table,
)
from guarddiag.analyses.threshold_free import ThresholdFreeResult, threshold_free_metrics
from guarddiag.analyses.valsets import ValSetsResult, val_sets
from guarddiag.analyses.variants import (
    DistillSensitivityResult,
    distill_sensitivity,
    without_variants,
)
from guarddiag.errors import GuarddiagError
from guarddiag.labels import MAPPINGS, BinaryMapping, get_mapping


@dataclass(frozen=True)
class AnalysisOptions:
    """Where the saved tables are and how to analyse them."""

    runs_dir: Path = paths.work_paths().runs
    pool_path: Path | None = paths.work_paths().pool
    audit_dir: Path | None = paths.work_paths().audit
    mapping: str = "loose"
    """Binary mapping of the primary tables (both loose and strict are always computed)."""
    threshold: float = DEFAULT_THRESHOLD
    n_resamples: int = stats.DEFAULT_RESAMPLES
    confidence: float = stats.DEFAULT_CONFIDENCE
    seed: int = 0
    primary_subset: str = "decontaminated"
    """Prompt subset of the primary tables and of the policy/capability call."""
    min_seeds: int = 3
    alpha: float = 0.05
    """Level of the calibrated load test: a benchmark is policy-load where the BH q-value of
    its A-last vs B-last contrast is below alpha (:mod:`~guarddiag.analyses.loadtest`)."""
    competence_floor: float = DEFAULT_COMPETENCE_FLOOR
    """Mean reference CAP on the clear-harm benchmarks below which the report cautions that a
    capability-load call does not mean detection (:mod:`~guarddiag.analyses.competence`)."""
    rank_group: tuple[str, ...] = DEFAULT_GROUP
    rank_benchmark: str = DEFAULT_BENCHMARK
    rank_tail: str = "top"
    rank_explicit: bool = False
    """The user named the rank group/benchmark: an unknown name is an error, not a note."""
    data_dir: Path | None = None
    """Public data directory (benchmark categories for the SORRY-Bench analyses);
    None = ``$GUARDDIAG_DATA``."""
    derived_dir: Path | None = None
    """Folder of derived (mutated) subsets; None = ``work/derived``."""


@dataclass(frozen=True)
class AnalysisResults:
    """Every analysis computed once (None where its inputs are absent; ``notes`` say why)."""

    options: AnalysisOptions
    inputs: ReportInputs
    scores: ScoresResult
    load: BenchmarkLoadResult
    contamination: ContaminationResult | None
    rank: BranchRankResult | None
    rank_note: str | None
    correlation: CorrelationResult | None
    effect: MappingEffectResult
    outside: OutsideComparisonResult
    pool_stats: PoolStatsResult | None
    val_overlap: ValOverlapResult | None
    disclosure: DisclosureResult
    study: StudyComparisonResult
    recipes: Mapping[str, RecipeTableResult]
    """Recipe table per prompt subset, under the primary mapping."""
    effect_by_recipe: pl.DataFrame = field(repr=False)
    """The mapping effect per recipe on the primary subset."""
    sorry: SorryResults | None = None
    """None only where a caller built the results without the SORRY-Bench analyses."""
    paired: PairedResults | None = None
    """Exact McNemar tests with Holm correction for Table 1, Table 2 and the mapping effect
    (:mod:`~guarddiag.analyses.paired`)."""
    competence: CompetenceResult | None = None
    """Reference CAP on the clear-harm benchmarks against the floor; None where no reference
    run was scored on any of them."""
    threshold_free: ThresholdFreeResult | None = None
    """F1, AUPRC and over-refusal at 95 % capture per run on the paired harmful/benign sets
    (:mod:`~guarddiag.analyses.threshold_free`)."""
    provenance: ProvenanceResult | None = None
    """What the branches are: sizes, parameter counts, checkpoint, training rows (run meta)."""
    distill: DistillSensitivityResult | None = None
    """Sensitivity variants (``E6-a05``) beside their base branches; None without variants.
    Variant runs enter no other analysis (:mod:`~guarddiag.analyses.variants`)."""
    val_sets: ValSetsResult | None = None
    """VAL on English, multilingual, overlapping and non-overlapping val rows, and ρ per part
    (:mod:`~guarddiag.analyses.valsets`); None without a pool or val predictions."""
    notes: tuple[str, ...] = ()

    @property
    def benchmarks(self) -> list[str]:
        """Scored benchmarks (not the pool's val split), in name order."""
        return sorted(set(self.scores.binary()["benchmark"].to_list()))


def _scores(inputs: ReportInputs, options: AnalysisOptions, mapping: BinaryMapping,
            contamination: ContaminationResult | None) -> ScoresResult:
    sha = dict(inputs.manifest_sha256)
    if contamination is not None:
        sha.update({k: v for k, v in contamination.sha256().items() if v})
    others = [m for m in MAPPINGS.values() if m.name != mapping.name]
    return compute_scores(
        inputs.predictions, kinds=inputs.kinds, pool=inputs.pool, mappings=(mapping, *others),
        threshold=options.threshold, n_resamples=options.n_resamples, seed=options.seed,
        confidence=options.confidence, benchmark_sha256=sha, source=str(options.runs_dir))


def _rank(scores: ScoresResult, options: AnalysisOptions, mapping: BinaryMapping
          ) -> tuple[BranchRankResult | None, str | None]:
    try:
        return branch_rank_test(scores, group=options.rank_group,
                                benchmark=options.rank_benchmark,
                                subset=options.primary_subset, mapping=mapping.name,
                                tail=options.rank_tail), None
    except GuarddiagError as exc:
        if options.rank_explicit:
            raise
        return None, str(exc)


def _pool(inputs: ReportInputs) -> tuple[PoolStatsResult | None, ValOverlapResult | None]:
    if inputs.pool is None:
        return None, None
    return (pool_statistics(inputs.pool, recorded=inputs.agreement),
            validation_overlap(inputs.pool))


def _paired(inputs: ReportInputs, options: AnalysisOptions, scores: ScoresResult
            ) -> PairedResults:
    aliases = dict(scores.binary().select("benchmark", "metric_alias").unique()
                   .sort("benchmark").iter_rows())
    return paired_comparisons(
        inputs.predictions, mappings={m: MAPPINGS[m] for m in scores.mappings if m in MAPPINGS},
        primary=options.mapping, threshold=options.threshold, subset=options.primary_subset,
        aliases=aliases,
        has_outside=bool(inputs.predictions["guard_kind"].eq("outside").any()))


def analyse(inputs: ReportInputs, options: AnalysisOptions) -> AnalysisResults:
    """Run every analysis once (pure functions of the inputs and options)."""
    mapping = get_mapping(options.mapping)
    if options.primary_subset not in SUBSETS:
        raise GuarddiagError(f"primary subset {options.primary_subset!r} is not one of "
                             f"{', '.join(SUBSETS)}")
    contamination = (contamination_table(inputs.audit_summary, source=inputs.audit_file[0])
                     if inputs.audit_summary is not None and inputs.audit_file else None)
    all_scores = _scores(inputs, options, mapping, contamination)
    distill = distill_sensitivity(all_scores, subset=options.primary_subset,
                                  mapping=mapping.name, run_meta=inputs.run_meta)
    # Sensitivity variants appear only in their own table, never among the ten branches.
    scores = replace(all_scores, table=without_variants(all_scores.table))
    inputs = replace(inputs, predictions=without_variants(inputs.predictions),
                     run_meta=(None if inputs.run_meta is None
                               else without_variants(inputs.run_meta)))
    load = benchmark_load(scores, min_seeds=options.min_seeds, alpha=options.alpha,
                          seed=options.seed)
    subset, mname = options.primary_subset, mapping.name
    rank, rank_note = _rank(scores, options, mapping)
    correlation = (val_correlation(scores, load, subset=subset, mapping=mname)
                   if scores.val().height else None)
    effect = mapping_effect(scores, loose="loose", strict="strict")
    outside = outside_comparison(scores, subset="decontaminated")
    pool_stats, val_overlap = _pool(inputs)
    benches = sorted(set(scores.binary()["benchmark"].to_list()))
    disclosure = disclosure_card(load=load, contamination=contamination, subset=subset,
                                 mapping=mname, threshold=options.threshold, benchmarks=benches)
    study = study_comparison(scores=scores, load=load, rank=rank, correlation=correlation,
                             effect=effect, contamination=contamination, subset=subset,
                             mapping=mname, overlap=inputs.audit_overlap,
                             pool_sources=inputs.pool_sources)
    recipes = {s: recipe_table(scores, subset=s, mapping=options.mapping)
               for s in (subset, *(s for s in SUBSETS if s != subset))}
    sorry = sorry_results(inputs, mapping=mapping, threshold=options.threshold,
                          n_resamples=options.n_resamples, seed=options.seed,
                          confidence=options.confidence)
    paired = _paired(inputs, options, scores)
    competence = competence_gate(scores, kinds=inputs.kinds, subset=subset, mapping=mname,
                                 floor=options.competence_floor,
                                 predictions=inputs.predictions)
    threshold_free = threshold_free_metrics(
        inputs.predictions, mapping=mapping, threshold=options.threshold, subset=subset,
        n_resamples=options.n_resamples, confidence=options.confidence, seed=options.seed)
    return AnalysisResults(
        options=options, inputs=inputs, scores=scores, load=load, contamination=contamination,
        rank=rank, rank_note=rank_note, correlation=correlation, effect=effect,
        outside=outside, pool_stats=pool_stats, val_overlap=val_overlap, disclosure=disclosure,
        study=study, recipes=recipes,
        effect_by_recipe=mapping_effect_by_recipe(effect, subset=subset), sorry=sorry,
        paired=paired, competence=competence, threshold_free=threshold_free,
        provenance=branch_provenance(inputs.run_meta), distill=distill,
        val_sets=(val_sets(inputs.predictions, inputs.pool, correlation,
                           confidence=options.confidence) if inputs.pool is not None else None),
        notes=tuple(inputs.notes))


def run_analyses(options: AnalysisOptions) -> AnalysisResults:
    """Load the saved tables named by ``options`` and run every analysis once."""
    return analyse(load_inputs(options), options)
