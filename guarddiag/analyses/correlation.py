"""Does validation accuracy predict policy-load or capability-load benchmark scores?

Spearman's ρ (scipy) across the student branch runs between VAL (4-class accuracy under policy
A, all languages) and each run's *mean score* over the policy-load benchmarks, and separately
over the capability-load benchmarks (study: +0.74 vs +0.34). A benchmark's score here is the
share of its prompts read as unsafe (CAP on harmful, OVER-REF on benign sets), in one cohort
(subset and mapping); a high ρ on policy-load benchmarks says they reward agreeing with the
labelling policy that VAL measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from guarddiag import stats
from guarddiag.analyses.load import BenchmarkLoadResult, student_runs
from guarddiag.analyses.scores import ScoresResult


@dataclass(frozen=True)
class CorrelationResult:
    table: pl.DataFrame = field(repr=False)
    """Per run: val, policy_mean, capability_mean."""
    policy: stats.SpearmanResult
    capability: stats.SpearmanResult
    policy_benchmarks: tuple[str, ...]
    capability_benchmarks: tuple[str, ...]
    subset: str
    mapping: str

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def summary_frame(self) -> pl.DataFrame:
        return pl.DataFrame({
            "benchmarks": ["policy-load", "capability-load"],
            "n_benchmarks": [len(self.policy_benchmarks), len(self.capability_benchmarks)],
            "n_runs": [self.policy.n, self.capability.n],
            "rho": [self.policy.rho, self.capability.rho],
            "p_value": [self.policy.p_value, self.capability.p_value],
        }, schema={"benchmarks": pl.String, "n_benchmarks": pl.Int64, "n_runs": pl.Int64,
                   "rho": pl.Float64, "p_value": pl.Float64})


def val_correlation(scores: ScoresResult, load: BenchmarkLoadResult, *, subset: str,
                    mapping: str) -> CorrelationResult:
    """ρ(VAL, mean policy-load score) and ρ(VAL, mean capability-load score) over runs."""
    loads: Mapping[str, str] = load.loads(subset=subset, mapping=mapping)
    policy = tuple(sorted(b for b, v in loads.items() if v == "policy"))
    capability = tuple(sorted(b for b, v in loads.items() if v == "capability"))
    val = student_runs(scores.val()).select("run_id", pl.col("score").alias("val"))
    binary = student_runs(scores.binary(subset=subset, mapping=mapping))

    def mean_over(benches: tuple[str, ...], name: str) -> pl.DataFrame:
        part = binary.filter(pl.col("benchmark").is_in(list(benches)))
        return part.group_by("run_id").agg(pl.col("score").mean().alias(name),
                                          pl.len().alias(f"n_{name}"))

    table = (val.join(mean_over(policy, "policy_mean"), on="run_id", how="left")
             .join(mean_over(capability, "capability_mean"), on="run_id", how="left")
             .sort("run_id"))

    def rho(col: str, benches: tuple[str, ...]) -> stats.SpearmanResult:
        # Only runs scored on every benchmark of the set, so each mean is over the same sets.
        part = table.filter(pl.col(f"n_{col}") == len(benches)) if benches else table.clear()
        return stats.spearman(part["val"].to_list(), part[col].to_list())

    return CorrelationResult(
        table=table.select("run_id", "val", "policy_mean", "capability_mean"),
        policy=rho("policy_mean", policy), capability=rho("capability_mean", capability),
        policy_benchmarks=policy, capability_benchmarks=capability, subset=subset,
        mapping=mapping)
