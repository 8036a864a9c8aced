"""The binary-mapping effect: each run's scores with BOUNDARY_SAFE read as safe vs unsafe.

For every run, benchmark and subset: the score under the ``loose`` mapping (BOUNDARY_SAFE →
safe), under ``strict`` (BOUNDARY_SAFE → unsafe) and the difference strict − loose in
percentage points (study: own student OR-H 5.7% → 96.0%, +90.3 pp; Qwen3Guard-8B 29.7% →
48.5%). Runs read out from ``p_unsafe`` alone (no class probabilities) show no effect by
construction; their ``readout`` column says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import ScoresResult
from guarddiag.errors import GuarddiagError

_KEY = ["run_id", "guard_kind", "branch", "size", "seed", "label_policy", "benchmark",
        "metric", "metric_alias", "subset", "prompt_set", "n"]


@dataclass(frozen=True)
class MappingEffectResult:
    table: pl.DataFrame = field(repr=False)
    """Per run, benchmark, subset: loose, loose_low/high, strict, strict_low/high, delta_pp,
    readout, strict_applied (``native`` where the guard gives no class probabilities, so the
    strict mapping could not be applied)."""
    loose: str
    strict: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def mapping_effect(scores: ScoresResult, *, loose: str = "loose",
                   strict: str = "strict") -> MappingEffectResult:
    """Pair every binary score under ``loose`` with the same score under ``strict``."""
    for name in (loose, strict):
        if name not in scores.mappings:
            raise GuarddiagError(
                f"mapping effect: scores were computed under {', '.join(scores.mappings)}; "
                f"mapping {name!r} is missing")

    def side(mapping: str, prefix: str, extra: tuple[str | pl.Expr, ...] = ()) -> pl.DataFrame:
        return scores.binary(mapping=mapping).select(
            *_KEY, *extra, pl.col("score").alias(prefix),
            pl.col("ci_low").alias(f"{prefix}_low"), pl.col("ci_high").alias(f"{prefix}_high"))

    table = side(loose, "loose", ("readout",)).join(
        side(strict, "strict", (pl.col("mapping_applied").alias("strict_applied"),)), on=_KEY,
        how="inner", nulls_equal=True).with_columns(
        ((pl.col("strict") - pl.col("loose")) * 100).alias("delta_pp")).sort(
        ["benchmark", "subset", "run_id"])
    return MappingEffectResult(table=table, loose=loose, strict=strict)


def _effect(ctx: AnalysisContext) -> MappingEffectResult:
    return mapping_effect(ctx[SCORES], loose="loose", strict="strict")


EFFECT = register_analysis("effect", _effect, result=MappingEffectResult, needs=(SCORES,))
