"""What guarddiag takes from SORRY-Bench (SPEC §7): the fine-grained taxonomy and benchmark
balance, linguistic mutations as derived subsets, robustness to them, refusal-judge
meta-evaluation, and the word-set Jaccard profile.

Modules: :mod:`~.taxonomy` (categories → pillars and domains), :mod:`~.ciphers` and
:mod:`~.mutate` (deterministic mutations written as derived subsets), :mod:`~.balance` (pillar
balance, capture by category), :mod:`~.robustness` (capture on mutated vs base prompts),
:mod:`~.jaccard` (word-set Jaccard profile), :mod:`~.judge` (refusal-judge meta-evaluation),
:mod:`~.plots` (their figures) and :mod:`~.outputs` (the ``guarddiag sorry`` commands' verbs).

Pure analyses (frozen results with ``to_frame()``): :func:`measure_balance`,
:func:`capture_by_category`, :func:`policy_sensitive_categories`, :func:`measure_robustness`,
:func:`jaccard_profile`, :func:`evaluate_judge`; the report reaches them through
:mod:`guarddiag.analyses.sorry`. Submodules import each other directly, never this face.
"""

from guarddiag.sorry.balance import (
    BalanceResult,
    BenchmarkBalance,
    CategoryBreakdown,
    PolicySensitivity,
    capture_by_category,
    measure_balance,
    policy_sensitive_categories,
    unsafe_decisions,
)
from guarddiag.sorry.jaccard import JaccardProfile, jaccard_profile, max_jaccard
from guarddiag.sorry.judge import JudgeEvalResult, evaluate_judge, keyword_verdict
from guarddiag.sorry.mutate import (
    MutateResult,
    decode_prompt,
    encode_prompt,
    mutate_benchmark,
    mutate_frame,
    resolve_mutations,
)
from guarddiag.sorry.robustness import RobustnessResult, measure_robustness
from guarddiag.sorry.taxonomy import category_maps, sorry_taxonomy

__all__ = [
    "BalanceResult",
    "BenchmarkBalance",
    "CategoryBreakdown",
    "JaccardProfile",
    "JudgeEvalResult",
    "MutateResult",
    "PolicySensitivity",
    "RobustnessResult",
    "capture_by_category",
    "category_maps",
    "decode_prompt",
    "encode_prompt",
    "evaluate_judge",
    "jaccard_profile",
    "keyword_verdict",
    "max_jaccard",
    "measure_balance",
    "measure_robustness",
    "mutate_benchmark",
    "mutate_frame",
    "policy_sensitive_categories",
    "resolve_mutations",
    "sorry_taxonomy",
    "unsafe_decisions",
]
