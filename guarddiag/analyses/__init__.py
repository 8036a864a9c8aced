"""Pure analyses over the saved tables; each returns a frozen result object with ``to_frame()``.

The report renders these results and computes nothing itself.
"""

from __future__ import annotations

from guarddiag.analyses.contamination import ContaminationResult, contamination_table
from guarddiag.analyses.correlation import CorrelationResult, val_correlation
from guarddiag.analyses.disclosure import DisclosureResult, disclosure_card
from guarddiag.analyses.load import BenchmarkLoadResult, benchmark_load
from guarddiag.analyses.mapping import MappingEffectResult, mapping_effect
from guarddiag.analyses.outside import OutsideComparisonResult, outside_comparison
from guarddiag.analyses.pool import (
    PoolStatsResult,
    ValOverlapResult,
    pool_statistics,
    validation_overlap,
)
from guarddiag.analyses.rank import BranchRankResult, branch_rank_test
from guarddiag.analyses.scores import ScoresResult, check_prompt_sets, compute_scores
from guarddiag.analyses.study import StudyComparisonResult, study_comparison
from guarddiag.analyses.tables import RecipeTableResult, mapping_effect_by_recipe, recipe_table

__all__ = [
    "BenchmarkLoadResult",
    "BranchRankResult",
    "ContaminationResult",
    "CorrelationResult",
    "DisclosureResult",
    "MappingEffectResult",
    "OutsideComparisonResult",
    "PoolStatsResult",
    "RecipeTableResult",
    "ScoresResult",
    "StudyComparisonResult",
    "ValOverlapResult",
    "benchmark_load",
    "branch_rank_test",
    "check_prompt_sets",
    "compute_scores",
    "contamination_table",
    "disclosure_card",
    "mapping_effect",
    "mapping_effect_by_recipe",
    "outside_comparison",
    "pool_statistics",
    "recipe_table",
    "study_comparison",
    "val_correlation",
    "validation_overlap",
]
