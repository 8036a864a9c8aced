"""The SORRY-Bench analyses of the analysis step, each with the note that says why it is absent.

* :func:`sorry_categories` - capture per SORRY-Bench domain and category
  (:func:`guarddiag.sorry.balance.capture_by_category`), its mean over the seeds of each recipe
  (:func:`domain_capture_by_recipe`), and the categories whose decisions move most between
  branches (:func:`guarddiag.sorry.balance.policy_sensitive_categories`).
* :func:`sorry_robustness` - capture on mutated subsets against their base prompts
  (:func:`guarddiag.sorry.robustness.measure_robustness`).
* :func:`sorry_balance` - which pillars and domains every scored benchmark tests
  (:func:`guarddiag.sorry.balance.measure_balance`).

All three use the full prompt sets (decontamination lists are per base benchmark; the mutated
subsets have none) and the benchmark frames already read by
:func:`guarddiag.analyses.inputs.load_inputs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from guarddiag.analyses.inputs import ReportInputs
from guarddiag.analyses.payload import not_in_payload
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.errors import GuarddiagError
from guarddiag.labels import BinaryMapping, get_mapping
from guarddiag.sorry.balance import (
    BalanceResult,
    CategoryBreakdown,
    PolicySensitivity,
    capture_by_category,
    measure_balance,
    policy_sensitive_categories,
)
from guarddiag.sorry.robustness import RobustnessResult, measure_robustness
from guarddiag.sorry.taxonomy import SORRY_BENCHMARK, base_benchmark


@dataclass(frozen=True)
class SorryCategoriesResult:
    """Capture per SORRY-Bench domain and category on one benchmark."""

    benchmark: str = field(metadata=not_in_payload())
    mapping: str
    threshold: float
    breakdown: CategoryBreakdown = field(metadata=not_in_payload())
    domains: pl.DataFrame = field(repr=False)
    """Domain capture per recipe (mean over seeds): entity, domain, capture, n_runs."""
    sensitive: PolicySensitivity | None = field(metadata=not_in_payload())
    sensitive_note: str | None = field(metadata=not_in_payload())
    """Why ``sensitive`` is None (e.g. fewer than two branches)."""

    def to_frame(self) -> pl.DataFrame:
        return self.domains.clone()


@dataclass(frozen=True)
class SorryResults:
    """The three SORRY-Bench analyses; each None with a note where its inputs are absent."""

    categories: SorryCategoriesResult | None
    categories_note: str | None
    robustness: RobustnessResult | None
    robustness_note: str | None
    balance: BalanceResult | None
    balance_note: str | None


def domain_capture_by_recipe(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """Mean capture over the seeds of a recipe (size/branch) per ``key``; outside guards by
    name."""
    entity = pl.when(pl.col("guard_kind") == "outside").then(pl.col("branch")).otherwise(
        pl.concat_str([pl.col("size"), pl.lit("/"), pl.col("branch")]))
    return frame.with_columns(entity.alias("entity")).group_by(
        ["entity", key], maintain_order=True).agg(
        pl.col("capture").mean(), pl.col("run_id").n_unique().alias("n_runs")).sort(
        ["entity", key])


def sorry_categories(inputs: ReportInputs, *, mapping: BinaryMapping, threshold: float,
                     benchmark: str = SORRY_BENCHMARK
                     ) -> tuple[SorryCategoriesResult | None, str | None]:
    """Capture per domain and category on ``benchmark``, or None and the reason."""
    if benchmark not in inputs.scored:
        return None, f"no predictions on {benchmark}"
    frames = {b: f for b, f in inputs.benchmark_frames.items() if b == benchmark}
    if benchmark not in frames:
        missing = [b for b in inputs.unavailable_benchmarks if b == benchmark]
        return None, (f"benchmark {benchmark} is not available "
                      f"({', '.join(missing) or 'no manifest'})")
    res = capture_by_category(inputs.predictions, frames, mapping=mapping, threshold=threshold)
    if res.by_category.height == 0:
        # Predicted, but not on these prompts: an empty breakdown would draw an empty figure.
        predicted = inputs.predictions.filter(pl.col("benchmark") == benchmark)
        return None, (f"none of the {predicted['prompt_id'].n_unique():,} prompt ids predicted "
                      f"on {benchmark} is in its data file ({frames[benchmark].height:,} "
                      f"prompts): the predictions came from another copy of {benchmark} "
                      "(run guarddiag predict again)")
    sensitive: PolicySensitivity | None = None
    note: str | None = None
    try:
        sensitive = policy_sensitive_categories(inputs.predictions, frames, mapping=mapping,
                                                threshold=threshold)
    except GuarddiagError as exc:
        note = str(exc)
    return SorryCategoriesResult(
        benchmark=benchmark, mapping=mapping.name, threshold=threshold, breakdown=res,
        domains=domain_capture_by_recipe(res.by_domain, "domain"), sensitive=sensitive,
        sensitive_note=note), None


def sorry_robustness(inputs: ReportInputs, *, mapping: BinaryMapping, threshold: float,
                     n_resamples: int, seed: int, confidence: float
                     ) -> tuple[RobustnessResult | None, str | None]:
    """Capture on every scored mutated subset against its base, or None and the reason."""
    mutated = inputs.mutated_subsets()
    if not mutated:
        return None, ("no predictions on mutated subsets with their base "
                      "(`guarddiag mutate`, then `guarddiag predict`)")
    frames = {b: f for b, f in inputs.benchmark_frames.items() if b in mutated}
    return measure_robustness(inputs.predictions, frames,
                              bases={b: inputs.derived_from[b] for b in frames},
                              mapping=mapping, threshold=threshold, n_resamples=n_resamples,
                              seed=seed, confidence=confidence), None


def sorry_balance(inputs: ReportInputs) -> tuple[BalanceResult | None, str | None]:
    """Pillar and domain balance of the scored benchmarks' bases, or None and the reason."""
    ids = {base_benchmark(b) for b in inputs.scored}
    frames = {b: f for b, f in inputs.benchmark_frames.items() if b in ids}
    if not frames:
        return None, "no scored benchmark is available to read its categories"
    return measure_balance(frames), None


def sorry_results(inputs: ReportInputs, *, mapping: BinaryMapping, threshold: float,
                  n_resamples: int, seed: int, confidence: float) -> SorryResults:
    """All three SORRY-Bench analyses of the report."""
    categories, categories_note = sorry_categories(inputs, mapping=mapping, threshold=threshold)
    robustness, robustness_note = sorry_robustness(
        inputs, mapping=mapping, threshold=threshold, n_resamples=n_resamples, seed=seed,
        confidence=confidence)
    balance, balance_note = sorry_balance(inputs)
    return SorryResults(categories=categories, categories_note=categories_note,
                        robustness=robustness, robustness_note=robustness_note,
                        balance=balance, balance_note=balance_note)


def _sorry(ctx: AnalysisContext) -> SorryResults:
    o = ctx.options
    return sorry_results(ctx.inputs, mapping=get_mapping(o.mapping), threshold=o.threshold,
                         n_resamples=o.n_resamples, seed=o.seed, confidence=o.confidence)


SORRY = register_analysis("sorry", _sorry, result=SorryResults)
