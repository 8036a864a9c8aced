"""The built-in analyses of the report step: importing this module registers every one of them
(each module registers itself with one call, :mod:`~guarddiag.analyses.registry`).

An analysis outside this list registers itself the same way when its module is imported; the
step, results.json and the report sections then find it through the registry.
"""

from __future__ import annotations

from typing import Any

from guarddiag.analyses.calls import CALLS_ANALYSIS
from guarddiag.analyses.competence import COMPETENCE
from guarddiag.analyses.contamination import CONTAMINATION
from guarddiag.analyses.correlation import CORRELATION
from guarddiag.analyses.disclosure import DISCLOSURE
from guarddiag.analyses.load import LOAD
from guarddiag.analyses.mapping import EFFECT
from guarddiag.analyses.outside import OUTSIDE
from guarddiag.analyses.paired import PAIRED
from guarddiag.analyses.pool import POOL_STATS, VAL_OVERLAP
from guarddiag.analyses.provenance import PROVENANCE
from guarddiag.analyses.rank import RANK
from guarddiag.analyses.registry import Analysis
from guarddiag.analyses.scored import ALL_SCORES, DISTILL, SCORES
from guarddiag.analyses.sorry import SORRY
from guarddiag.analyses.study import STUDY
from guarddiag.analyses.tables import EFFECT_BY_RECIPE, RECIPES
from guarddiag.analyses.threshold_free import THRESHOLD_FREE
from guarddiag.analyses.valsets import VAL_SETS_ANALYSIS

BUILT_IN: tuple[Analysis[Any], ...] = (
    CONTAMINATION, ALL_SCORES, SCORES, DISTILL, LOAD, RANK, CORRELATION, EFFECT, OUTSIDE,
    POOL_STATS, VAL_OVERLAP, DISCLOSURE, STUDY, RECIPES, EFFECT_BY_RECIPE, SORRY, PAIRED,
    COMPETENCE, THRESHOLD_FREE, PROVENANCE, VAL_SETS_ANALYSIS, CALLS_ANALYSIS,
)
"""Every built-in analysis (the report's own; plug-ins add to the registry, not here)."""
