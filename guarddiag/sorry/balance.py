"""Which harms a benchmark tests: pillar/domain balance, and capture broken down by category.

Balance (``guarddiag balance``)
-------------------------------
Each prompt's category spreads one unit of weight over its pillars and domains
(:mod:`guarddiag.sorry.taxonomy`). Per benchmark this gives a weighted count per pillar (summing
to the number of mapped prompts) and per domain. From it:

* ``imbalance_ratio`` = weight of the most represented pillar / weight of the least represented
  pillar *among the pillars the benchmark tests* (weight > 0). Pillars with zero weight are not
  in the ratio (it would be infinite for almost every benchmark); they are listed separately as
  ``untested``, with their number. A benchmark testing one pillar has ratio 1. A benchmark with
  no mapped prompt (no category metadata, or only out-of-taxonomy categories) has no ratio and
  is reported as not assessable.
* ``most`` / ``least``: the pillar(s) at the maximum / minimum tested weight (ties listed).

Capture by category and domain (for the report)
-----------------------------------------------
:func:`capture_by_category` gives, for every run and benchmark, the share of prompts called
unsafe within each category and within each SORRY-Bench domain (domain capture weights each
prompt by its domain weight). :func:`policy_sensitive_categories` ranks categories by how far
the branches' capture moves: span = mean over model sizes of (max - min over branches of the
branch's capture, averaged over its seeds) — the label-supervision span Δ of SPEC §6 taken per
category — and ``flip_share``, the share of the category's prompts on which the branches'
majority decisions are not unanimous.

The unsafe decision of a prediction row is the report's: P(unsafe) under the binary mapping
(``loose`` by default; ``guarddiag.predictions.with_unsafe_probability``) at or above the
threshold (default the protocol's cut-off, 0.5); failed rows are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE, BinaryMapping, branch_order, pillar_ids
from guarddiag.predictions import unsafe_decisions
from guarddiag.sorry.taxonomy import (
    DOMAINS,
    category_domain,
    category_label,
    prompt_weights,
)

CATEGORY_MAP_FILE = "data_manifests/taxonomy/category_map.yaml"
"""Where a benchmark's own categories are mapped onto the pillars and domains."""

# ── balance ───────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class BenchmarkBalance:
    """How one benchmark's prompts spread over the 24 pillars and 4 domains."""

    benchmark: str
    n: int
    n_mapped: int
    """Prompts whose category maps onto at least one pillar."""
    n_out_of_taxonomy: int
    """Prompts whose category is mapped to no pillar (e.g. "benign")."""
    n_unmapped: int
    """Prompts whose category is null or missing from the map (or no map for the benchmark)."""
    has_map: bool
    pillar_weight: dict[str, float]
    """All 24 pillars, in taxonomy order; zeros included."""
    domain_weight: dict[str, float]
    imbalance_ratio: float | None
    most: tuple[str, ...]
    least: tuple[str, ...]
    untested: tuple[str, ...]
    domain_imbalance_ratio: float | None
    untested_domains: tuple[str, ...]
    unmapped_values: tuple[str, ...]
    """Distinct category values not found in the map (to extend category_map.yaml)."""
    n_with_category: int = 0
    """Prompts with a category value at all (mapped or not)."""

    @property
    def assessable(self) -> bool:
        return self.n_mapped > 0

    @property
    def category_note(self) -> str | None:
        """Why the benchmark is not assessable, in words that say what to do; None when it is.

        A benchmark whose manifest names a category field but whose categories have no entry in
        the map is not "without metadata": its categories are there, only not mapped."""
        if self.assessable:
            return None
        if self.n_out_of_taxonomy and not self.n_unmapped:
            return "categories outside the harm taxonomy (e.g. benign)"
        if self.n_with_category == 0:
            return ("no category metadata (the manifest names no category_field, or every "
                    "value is empty)")
        shown = ", ".join(self.unmapped_values[:3]) + (
            ", …" if len(self.unmapped_values) > 3 else "")
        if not self.has_map:
            k = len(self.unmapped_values)
            return (f"categories present ({k} value{'s' if k != 1 else ''}, e.g. {shown}), "
                    f"not mapped to the 24 pillars: add a mapping in {CATEGORY_MAP_FILE}")
        return (f"categories present, {len(self.unmapped_values)} value(s) not in the map "
                f"({shown}): add them in {CATEGORY_MAP_FILE}")


@dataclass(frozen=True)
class BalanceResult:
    benchmarks: tuple[BenchmarkBalance, ...]

    def to_frame(self) -> pl.DataFrame:
        """Long table: one row per (benchmark, pillar) with weight and share of mapped prompts."""
        rows = []
        for b in self.benchmarks:
            for pillar, w in b.pillar_weight.items():
                rows.append({"benchmark": b.benchmark, "pillar": pillar, "weight": w,
                             "share": w / b.n_mapped if b.n_mapped else None})
        return pl.DataFrame(rows, schema={"benchmark": pl.String, "pillar": pl.String,
                                          "weight": pl.Float64, "share": pl.Float64})

    def domain_frame(self) -> pl.DataFrame:
        rows = []
        for b in self.benchmarks:
            total = sum(b.domain_weight.values())
            for domain, w in b.domain_weight.items():
                rows.append({"benchmark": b.benchmark, "domain": domain, "weight": w,
                             "share": w / total if total else None})
        return pl.DataFrame(rows, schema={"benchmark": pl.String, "domain": pl.String,
                                          "weight": pl.Float64, "share": pl.Float64})

    def summary_frame(self) -> pl.DataFrame:
        """One row per benchmark: counts, ratio, most/least represented and untested pillars."""
        return pl.DataFrame([{
            "benchmark": b.benchmark, "n": b.n, "n_mapped": b.n_mapped,
            "n_out_of_taxonomy": b.n_out_of_taxonomy, "n_unmapped": b.n_unmapped,
            "pillars_tested": len(b.pillar_weight) - len(b.untested) if b.assessable else 0,
            "imbalance_ratio": b.imbalance_ratio,
            "most": ", ".join(b.most), "least": ", ".join(b.least),
            "n_untested": len(b.untested) if b.assessable else None,
            "untested": ", ".join(b.untested) if b.assessable else None,
            "domain_imbalance_ratio": b.domain_imbalance_ratio,
            "untested_domains": ", ".join(b.untested_domains) if b.assessable else None,
            "category_note": b.category_note,
        } for b in self.benchmarks], schema={
            "benchmark": pl.String, "n": pl.Int64, "n_mapped": pl.Int64,
            "n_out_of_taxonomy": pl.Int64, "n_unmapped": pl.Int64, "pillars_tested": pl.Int64,
            "imbalance_ratio": pl.Float64, "most": pl.String, "least": pl.String,
            "n_untested": pl.Int64, "untested": pl.String, "domain_imbalance_ratio": pl.Float64,
            "untested_domains": pl.String, "category_note": pl.String})

    def pillar_matrix(self) -> tuple[list[str], list[str], np.ndarray]:
        """(benchmarks, pillars, shares) with NaN rows for benchmarks that are not assessable."""
        names = [b.benchmark for b in self.benchmarks]
        pillars = list(pillar_ids())
        mat = np.full((len(names), len(pillars)), np.nan)
        for i, b in enumerate(self.benchmarks):
            if b.assessable:
                mat[i] = [b.pillar_weight[p] / b.n_mapped for p in pillars]
        return names, pillars, mat


def _ratio(weights: Mapping[str, float]) -> tuple[float | None, tuple[str, ...],
                                                  tuple[str, ...], tuple[str, ...]]:
    # Weights are sums of 1/k fractions: round before comparing so equal counts tie exactly.
    tested = {k: round(v, 9) for k, v in weights.items() if v > 1e-12}
    untested = tuple(k for k, v in weights.items() if v <= 1e-12)
    if not tested:
        return None, (), (), untested
    hi, lo = max(tested.values()), min(tested.values())
    most = tuple(k for k, v in tested.items() if v == hi)
    least = tuple(k for k, v in tested.items() if v == lo)
    return hi / lo, most, least, untested


def benchmark_balance(benchmark: str, categories: Sequence[str | None]) -> BenchmarkBalance:
    """Balance of one benchmark from its prompts' category values."""
    weights = prompt_weights(benchmark, categories)
    pillars = dict.fromkeys(pillar_ids(), 0.0)
    domains = dict.fromkeys(DOMAINS, 0.0)
    status_counts = {"mapped": 0, "out_of_taxonomy": 0, "unmapped": 0, "no_map": 0}
    unmapped: dict[str, None] = {}
    for value, w in zip(categories, weights, strict=True):
        status_counts[w.status] += 1
        if w.status in ("unmapped", "no_map") and value is not None:
            unmapped.setdefault(str(value))
        for p, x in w.pillars.items():
            pillars[p] += x
        for d, x in w.domains.items():
            domains[d] += x
    ratio, most, least, untested = _ratio(pillars)
    dratio, _, _, dun = _ratio(domains)
    return BenchmarkBalance(
        benchmark=benchmark, n=len(categories), n_mapped=status_counts["mapped"],
        n_out_of_taxonomy=status_counts["out_of_taxonomy"],
        n_unmapped=status_counts["unmapped"] + status_counts["no_map"],
        has_map=status_counts["no_map"] == 0, pillar_weight=pillars, domain_weight=domains,
        imbalance_ratio=ratio, most=most, least=least,
        untested=untested if status_counts["mapped"] else (),
        domain_imbalance_ratio=dratio, untested_domains=dun if status_counts["mapped"] else (),
        unmapped_values=tuple(sorted(unmapped)),
        n_with_category=sum(1 for v in categories if v is not None and str(v).strip()))


def measure_balance(frames: Mapping[str, pl.DataFrame]) -> BalanceResult:
    """Balance of every benchmark frame (``guarddiag.data`` frames: ``category`` column)."""
    out = []
    for bench, frame in frames.items():
        if "category" not in frame.columns:
            raise GuarddiagError(f"benchmark {bench}: no category column")
        out.append(benchmark_balance(bench, frame["category"].to_list()))
    return BalanceResult(tuple(out))


# ── decisions ─────────────────────────────────────────────────────────────────────────────────


_RUN_COLUMNS = ("run_id", "guard_kind", "branch", "size", "seed")


def _joined(predictions: pl.DataFrame, frames: Mapping[str, pl.DataFrame],
            mapping: BinaryMapping, threshold: float | None) -> pl.DataFrame:
    decided = unsafe_decisions(predictions, mapping=mapping, threshold=threshold)
    parts = []
    for bench, frame in frames.items():
        cats = frame["category"].to_list() if "category" in frame.columns \
            else [None] * frame.height
        labels = [category_label(bench, c) for c in cats]
        domains = [category_domain(bench, c) for c in cats]
        parts.append(pl.DataFrame({
            "benchmark": [bench] * frame.height,
            "prompt_id": frame["prompt_id"].cast(pl.String),
            "category": pl.Series(labels, dtype=pl.String),
            "domain": pl.Series(domains, dtype=pl.String),
        }))
    if not parts:
        raise GuarddiagError("capture by category: no benchmark frames given")
    meta = pl.concat(parts)
    cols = [c for c in _RUN_COLUMNS if c in decided.columns]
    return decided.select([*cols, "benchmark", "prompt_id", "unsafe"]).join(
        meta, on=["benchmark", "prompt_id"], how="inner")


@dataclass(frozen=True)
class CategoryBreakdown:
    """Capture per (run, benchmark, category) and per (run, benchmark, domain)."""

    by_category: pl.DataFrame
    """run_id, guard_kind, branch, size, seed, benchmark, category, domain, n, n_unsafe,
    capture."""
    by_domain: pl.DataFrame
    """run_id, …, benchmark, domain, n, n_unsafe, capture."""
    mapping: str

    def to_frame(self) -> pl.DataFrame:
        return self.by_category


def capture_by_category(predictions: pl.DataFrame, frames: Mapping[str, pl.DataFrame], *,
                        mapping: BinaryMapping = LOOSE,
                        threshold: float | None = None) -> CategoryBreakdown:
    """Every run's capture within each category and domain of each given benchmark.

    ``frames`` are the benchmarks to break down (e.g. ``{"sorrybench": frame}``); predictions of
    other benchmarks are ignored. SORRY-Bench categories are labelled ``"<n>. <name>"``.
    Prompts of categories without a domain get domain null and are left out of ``by_domain``.
    """
    joined = _joined(predictions, frames, mapping, threshold)
    keys = [c for c in _RUN_COLUMNS if c in joined.columns] + ["benchmark"]
    agg = [pl.len().alias("n"), pl.col("unsafe").sum().cast(pl.Int64).alias("n_unsafe"),
           pl.col("unsafe").mean().alias("capture")]
    by_cat = joined.group_by([*keys, "category", "domain"]).agg(agg).sort(
        [*keys, "category"], nulls_last=True)
    by_dom = joined.filter(pl.col("domain").is_not_null()).group_by([*keys, "domain"]).agg(
        agg).sort([*keys, "domain"])
    return CategoryBreakdown(by_category=by_cat, by_domain=by_dom, mapping=mapping.name)


@dataclass(frozen=True)
class PolicySensitivity:
    """Categories ranked by how much the branches' decisions move on them."""

    table: pl.DataFrame
    """benchmark, category, domain, n, span, flip_share, min_branch, max_branch, n_branches,
    sorted by span (descending). Branches tied at the lowest (highest) capture: min_branch
    (max_branch) is the first of them in :func:`guarddiag.labels.branch_order`."""

    def to_frame(self) -> pl.DataFrame:
        return self.table


def policy_sensitive_categories(predictions: pl.DataFrame, frames: Mapping[str, pl.DataFrame],
                                *, mapping: BinaryMapping = LOOSE, threshold: float | None = None,
                                guard_kind: str = "branch") -> PolicySensitivity:
    """Span and flip share of every category across the branches (module docstring).

    Only ``guard_kind`` rows (branch runs by default) take part. A category needs at least two
    branches within one size to have a span.
    """
    joined = _joined(predictions, frames, mapping, threshold)
    if "guard_kind" in joined.columns:
        joined = joined.filter(pl.col("guard_kind") == guard_kind)
    if joined.height == 0:
        raise GuarddiagError(f"policy-sensitive categories: no {guard_kind} predictions on "
                             f"{', '.join(frames)}")
    cat_keys = ["benchmark", "category", "domain"]
    # Branch capture per size = mean over its seeds' captures, summed in run_id order (a float
    # sum depends on its order) and rounded, so equal captures tie exactly; ties go to the
    # branch that comes first in the specs' order (reference, E1…E10), then by name.
    per_seed = joined.group_by([*cat_keys, "size", "branch", "run_id"]).agg(
        pl.col("unsafe").mean().alias("capture")).sort(
        [*cat_keys, "size", "branch", "run_id"], nulls_last=True)
    per_branch = per_seed.group_by([*cat_keys, "size", "branch"], maintain_order=True).agg(
        pl.col("capture").mean().round(12)).with_columns(
        pl.col("branch").map_elements(branch_order, return_dtype=pl.Int64).alias("_order"))
    span = per_branch.group_by([*cat_keys, "size"], maintain_order=True).agg(
        (pl.col("capture").max() - pl.col("capture").min()).alias("span"),
        pl.col("branch").sort_by(["capture", "_order", "branch"]).first().alias("min_branch"),
        pl.col("branch").sort_by(["capture", "_order", "branch"],
                                 descending=[True, False, False]).first().alias("max_branch"),
        pl.len().alias("n_branches"),
    ).filter(pl.col("n_branches") >= 2)
    # Majority decision of each branch on each prompt (over seeds), then: unanimous or not?
    votes = joined.group_by([*cat_keys, "size", "branch", "prompt_id"]).agg(
        (pl.col("unsafe").mean() > 0.5).alias("majority"))
    flips = votes.group_by([*cat_keys, "size", "prompt_id"]).agg(
        (pl.col("majority").n_unique() > 1).alias("flip"), pl.len().alias("nb")).filter(
        pl.col("nb") >= 2).group_by([*cat_keys, "size"]).agg(
        pl.col("flip").mean().alias("flip_share"), pl.len().alias("n"))
    per_size = span.join(flips, on=[*cat_keys, "size"], how="inner").sort(
        [*cat_keys, "size"], nulls_last=True)
    # min/max branch are reported for the first size (sizes sort by name).
    table = per_size.group_by(cat_keys, maintain_order=True).agg(
        pl.col("n").max(), pl.col("span").mean(), pl.col("flip_share").mean(),
        pl.col("min_branch").first(), pl.col("max_branch").first(),
        pl.col("n_branches").max(),
    ).sort(["span", "flip_share", "benchmark", "category"],
           descending=[True, True, False, False], nulls_last=True)
    return PolicySensitivity(table=table)
