"""Pure analyses over the saved tables; each returns a frozen result object with ``to_frame()``.

Modules: :mod:`~.scores` (CAP / OVER-REF / VAL with Wilson intervals;
:mod:`~.intervals` names every interval), :mod:`~.load` (span
vs seed floor) and :mod:`~.loadtest` (the calibrated policy/capability call),
:mod:`~.rank` (exact rank test), :mod:`~.mapping` and :mod:`~.tables` (mapping effect, recipe
tables), :mod:`~.outside`, :mod:`~.correlation`, :mod:`~.competence` (the competence gate),
:mod:`~.pool`, :mod:`~.valsets` (VAL on English, multilingual and train-overlapping val rows),
:mod:`~.variants` (sensitivity variants such as E6-a05 and the distillation-weight table),
:mod:`~.contamination`, :mod:`~.disclosure`, :mod:`~.study` (beside the study's numbers;
:mod:`~.overlap_origin`: overlap set by the pool recipe or measured), :mod:`~.paired` (exact
McNemar with Holm for every two-guard comparison shown),
:mod:`~.sorry` (the SORRY-Bench analyses of the report), and the analysis step:
:mod:`~.inputs` (load every saved input once), :mod:`~.options` (:class:`ReportOptions`, the
one declaration of the report's options), :mod:`~.registry` (each analysis registers itself
with its inputs and result type; :mod:`~.catalog` lists the built-in ones; :mod:`~.scored`
registers the score tables, variants in and out) and :mod:`~.step`
(run every registered analysis once, :func:`run_analyses` → :class:`AnalysisResults`).

The report renders these results and computes nothing itself.
"""

from __future__ import annotations

from guarddiag.analyses.catalog import BUILT_IN
from guarddiag.analyses.competence import CompetenceResult, competence_gate
from guarddiag.analyses.contamination import ContaminationResult, contamination_table
from guarddiag.analyses.correlation import CorrelationResult, val_correlation
from guarddiag.analyses.disclosure import DisclosureResult, disclosure_card
from guarddiag.analyses.inputs import ReportInputs, load_inputs
from guarddiag.analyses.load import BenchmarkLoadResult, benchmark_load
from guarddiag.analyses.mapping import MappingEffectResult, mapping_effect
from guarddiag.analyses.options import ReportOptions
from guarddiag.analyses.outside import OutsideComparisonResult, outside_comparison
from guarddiag.analyses.pool import (
    PoolStatsResult,
    ValOverlapResult,
    pool_statistics,
    validation_overlap,
)
from guarddiag.analyses.rank import BranchRankResult, branch_rank_test
from guarddiag.analyses.registry import (
    ANALYSES,
    Analysis,
    AnalysisContext,
    AnalysisOmitted,
    register_analysis,
)
from guarddiag.analyses.scores import ScoresResult, check_prompt_sets, compute_scores
from guarddiag.analyses.sorry import SorryCategoriesResult, SorryResults, sorry_results
from guarddiag.analyses.step import AnalysisResults, analyse, run_analyses
from guarddiag.analyses.study import StudyComparisonResult, study_comparison
from guarddiag.analyses.tables import RecipeTableResult, mapping_effect_by_recipe, recipe_table
from guarddiag.analyses.valsets import ValSetsResult, val_sets
from guarddiag.analyses.variants import (
    DistillSensitivityResult,
    distill_sensitivity,
    without_variants,
)

__all__ = [
    "ANALYSES",
    "BUILT_IN",
    "Analysis",
    "AnalysisContext",
    "AnalysisOmitted",
    "AnalysisResults",
    "BenchmarkLoadResult",
    "BranchRankResult",
    "CompetenceResult",
    "ContaminationResult",
    "CorrelationResult",
    "DisclosureResult",
    "DistillSensitivityResult",
    "MappingEffectResult",
    "OutsideComparisonResult",
    "PoolStatsResult",
    "RecipeTableResult",
    "ReportInputs",
    "ReportOptions",
    "ScoresResult",
    "SorryCategoriesResult",
    "SorryResults",
    "StudyComparisonResult",
    "ValOverlapResult",
    "ValSetsResult",
    "analyse",
    "benchmark_load",
    "branch_rank_test",
    "check_prompt_sets",
    "competence_gate",
    "compute_scores",
    "contamination_table",
    "disclosure_card",
    "distill_sensitivity",
    "load_inputs",
    "mapping_effect",
    "mapping_effect_by_recipe",
    "outside_comparison",
    "pool_statistics",
    "recipe_table",
    "register_analysis",
    "run_analyses",
    "sorry_results",
    "study_comparison",
    "val_correlation",
    "val_sets",
    "validation_overlap",
    "without_variants",
]
