"""Paired tests for every two-guard comparison the report shows on the same prompts.

Two guards scored on the same prompts are compared prompt by prompt: ``n_first_only`` (b) is the
number of prompts the first reads unsafe and the second safe, ``n_second_only`` (c) the reverse,
and the exact McNemar test (:func:`guarddiag.stats.mcnemar_exact`) asks whether b and c differ
more than chance. Holm's correction (:func:`guarddiag.stats.holm`) runs across the comparisons of
one family, i.e. of one table of the report; a difference is called significant only where the
Holm-adjusted p is below ``alpha`` (default the protocol's α).

Families (:func:`paired_comparisons`):

* ``recipes`` (Table 1, primary subset and mapping): every student branch recipe against the
  reference recipe of the same model size, on every benchmark.
* ``outside:<mapping>`` (Table 2, decontaminated prompts, one family per binary mapping): every
  outside guard against the reference recipe of each size, on every benchmark both scored.
* ``mapping`` (the mapping effect, primary subset): every run under the strict mapping against
  the same run under the loose one (strict reads a superset of loose as unsafe, so c = 0).

A recipe with several seeds reads a prompt as unsafe when at least half of its seeds do (its
majority decision), so its tested share can differ slightly from the seed mean the tables show;
``share_first`` / ``share_second`` are the shares tested. Prompts that either guard failed on are
left out of that pair (``n`` counts the prompts compared).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag import stats
from guarddiag.analyses.payload import json_key
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scored import SCORES
from guarddiag.analyses.scores import VAL_BENCHMARK
from guarddiag.labels import MAPPINGS, BinaryMapping, branch_order
from guarddiag.predictions import unsafe_decisions
from guarddiag.protocol import protocol
from guarddiag.roles import is_reference, is_student, names_where

TEST = ("exact McNemar test (two-sided binomial on the prompts the two read differently), "
        "Holm-corrected across the comparisons of one table")
"""The test of every paired family, in words."""

SCHEMA: dict[str, pl.DataType] = {
    "family": pl.String(), "benchmark": pl.String(), "metric_alias": pl.String(),
    "subset": pl.String(), "mapping": pl.String(), "size": pl.String(), "first": pl.String(),
    "second": pl.String(), "n": pl.Int64(), "n_first_only": pl.Int64(),
    "n_second_only": pl.Int64(), "share_first": pl.Float64(), "share_second": pl.Float64(),
    "delta": pl.Float64(), "p_value": pl.Float64(), "p_holm": pl.Float64(),
    "significant": pl.Boolean()}
"""Columns of :meth:`PairedComparisonResult.to_frame` (``delta = share_first − share_second``,
a fraction)."""


@dataclass(frozen=True)
class PairedComparisonResult:
    """One family of paired comparisons (one table of the report), Holm-corrected together."""

    table: pl.DataFrame = field(repr=False, metadata=json_key("comparisons"))
    """family, benchmark, metric_alias, subset, mapping, size, first, second, n, n_first_only
    (b), n_second_only (c), share_first, share_second, delta (= share_first − share_second, a
    fraction), p_value (exact McNemar, two-sided), p_holm, significant."""
    family: str
    """``recipes`` (Table 1), ``outside:<mapping>`` (Table 2) or ``mapping``."""
    description: str
    """What is compared with what, in words (the report's caption uses it)."""
    alpha: float = field(default_factory=lambda: protocol().alpha)
    """Family-wise level: a comparison is significant where its Holm-adjusted p < alpha."""
    test: str = field(init=False, default=TEST)
    """The test, in words (the same for every family)."""
    n_comparisons: int = field(init=False)
    n_significant: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_comparisons", self.table.height)
        object.__setattr__(self, "n_significant", self.significant().height)

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def significant(self) -> pl.DataFrame:
        """The comparisons whose Holm-adjusted p is below ``alpha``, in table order."""
        return self.table.filter(pl.col("significant"))


@dataclass(frozen=True)
class PairedResults:
    """The paired families the report shows (None where the report shows no such table)."""

    recipes: PairedComparisonResult | None
    outside: tuple[PairedComparisonResult, ...]
    mapping: PairedComparisonResult | None
    alpha: float = field(default_factory=lambda: protocol().alpha)


# ─── prompt-level decisions ────────────────────────────────────────────────────────────────────

def _decisions(predictions: pl.DataFrame, mapping: BinaryMapping, threshold: float,
               subset: str) -> pl.DataFrame:
    d = unsafe_decisions(predictions.filter(pl.col("benchmark") != VAL_BENCHMARK),
                         mapping=mapping, threshold=threshold)
    if subset == "decontaminated":
        d = d.filter(pl.col("survives_decontam"))
    return d.select("run_id", "guard_kind", "branch", "size", "benchmark", "prompt_id",
                    "unsafe")


def recipe_decisions(predictions: pl.DataFrame, *, mapping: BinaryMapping, threshold: float,
                     subset: str) -> pl.DataFrame:
    """Per (guard_kind, size, branch, benchmark, prompt): ``unsafe`` = at least half of the
    recipe's seeds read the prompt unsafe (an outside guard's one run: its decision)."""
    d = _decisions(predictions, mapping, threshold, subset)
    return d.group_by(["guard_kind", "size", "branch", "benchmark", "prompt_id"]).agg(
        (pl.col("unsafe").cast(pl.Int64).sum() * 2 >= pl.len()).alias("unsafe"))


# ─── tests ─────────────────────────────────────────────────────────────────────────────────────

def _count_pairs(pairs: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """b, c and both shares per ``keys`` from columns ``u1`` (first) and ``u2`` (second)."""
    return pairs.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("n"),
        (pl.col("u1") & ~pl.col("u2")).sum().cast(pl.Int64).alias("n_first_only"),
        (~pl.col("u1") & pl.col("u2")).sum().cast(pl.Int64).alias("n_second_only"),
        pl.col("u1").cast(pl.Int64).sum().alias("_k1"),
        pl.col("u2").cast(pl.Int64).sum().alias("_k2"))


def _finish(counts: list[dict[str, Any]], *, family: str, description: str,
            alpha: float | None) -> PairedComparisonResult:
    """Exact McNemar p per row, Holm across the rows, in a stable order; ``alpha`` None: the
    protocol's α."""
    alpha = protocol().alpha if alpha is None else alpha
    rows = sorted(counts, key=lambda r: (r["benchmark"], r["mapping"] or "", r["size"] or "",
                                         branch_order(r["first"]), r["first"],
                                         branch_order(r["second"]), r["second"]))
    p = [stats.mcnemar_exact(r["n_first_only"], r["n_second_only"]) for r in rows]
    adjusted = stats.holm(p)
    out = []
    for r, pv, ph in zip(rows, p, adjusted, strict=True):
        n = r["n"]
        s1, s2 = r["_k1"] / n, r["_k2"] / n
        out.append({**{k: r.get(k) for k in SCHEMA if k in r}, "family": family,  # pragma: no mutate(guard-always): a key missing from a row is null either way  # noqa: E501
                    "share_first": s1, "share_second": s2, "delta": (r["_k1"] - r["_k2"]) / n,
                    "p_value": pv, "p_holm": ph, "significant": ph < alpha})
    table = pl.DataFrame(out, schema=SCHEMA) if out else pl.DataFrame(schema=SCHEMA)  # pragma: no mutate(guard-always): DataFrame([], schema) is the same empty frame  # noqa: E501
    return PairedComparisonResult(table=table, family=family, description=description,
                                  alpha=alpha)


def _records(counts: pl.DataFrame, **fixed: Any) -> list[dict[str, Any]]:
    return [{**fixed, **r} for r in counts.iter_rows(named=True)]


def recipes_vs_reference(predictions: pl.DataFrame, *, mapping: BinaryMapping,
                         threshold: float, subset: str, aliases: Mapping[str, str],
                         alpha: float | None = None) -> PairedComparisonResult | None:
    """Every student branch recipe against the reference recipe of its size (Table 1)."""
    students = predictions.filter(is_student())
    reference = names_where(students, is_reference())
    rec = recipe_decisions(students, mapping=mapping, threshold=threshold, subset=subset)
    ref = rec.filter(pl.col("branch").is_in(reference)).select(
        "size", "benchmark", "prompt_id", pl.col("branch").alias("second"),
        pl.col("unsafe").alias("u2"))
    others = rec.filter(~pl.col("branch").is_in(reference)).select(
        "size", "benchmark", "prompt_id", pl.col("branch").alias("first"),
        pl.col("unsafe").alias("u1"))
    if ref.height == 0 or others.height == 0:
        return None
    pairs = others.join(ref, on=["size", "benchmark", "prompt_id"], how="inner")
    counts = _count_pairs(pairs, ["size", "benchmark", "first", "second"])
    rows = [{**r, "metric_alias": aliases.get(r["benchmark"])}
            for r in _records(counts, subset=subset, mapping=mapping.name)]
    return _finish(rows, family="recipes", alpha=alpha, description=(
        "each student branch recipe against the reference recipe of the same size, per "
        f"benchmark ({subset} prompts, {mapping.name} mapping)"))


def outside_vs_reference(predictions: pl.DataFrame, *, mapping: BinaryMapping,
                         threshold: float, aliases: Mapping[str, str],
                         subset: str = "decontaminated",
                         alpha: float | None = None) -> PairedComparisonResult | None:
    """Every outside guard against the reference recipe of each size (Table 2, one mapping)."""
    d = predictions.filter((pl.col("guard_kind") == "outside") | is_reference())
    rec = recipe_decisions(d, mapping=mapping, threshold=threshold, subset=subset)
    guards = rec.filter(pl.col("guard_kind") == "outside").select(
        "benchmark", "prompt_id", pl.col("branch").alias("first"), pl.col("unsafe").alias("u1"))
    ref = rec.filter(pl.col("guard_kind") == "branch").select(
        "size", "branch", "benchmark", "prompt_id", pl.col("unsafe").alias("u2"))
    if guards.height == 0 or ref.height == 0:
        return None
    pairs = guards.join(ref, on=["benchmark", "prompt_id"], how="inner")
    counts = _count_pairs(pairs, ["size", "branch", "benchmark", "first"])
    rows = [{**r, "metric_alias": aliases.get(r["benchmark"]),
             "second": f"{r['size']}/{r['branch']}"}
            for r in _records(counts, subset=subset, mapping=mapping.name)]
    return _finish(rows, family=f"outside:{mapping.name}", alpha=alpha, description=(
        "each outside guard against the reference recipe of each size, per benchmark "
        f"({subset} prompts, {mapping.name} mapping; leaving out the prompts either one "
        "failed on)"))


def strict_vs_loose(predictions: pl.DataFrame, *, loose: BinaryMapping, strict: BinaryMapping,
                    threshold: float, subset: str, aliases: Mapping[str, str],
                    alpha: float | None = None) -> PairedComparisonResult | None:
    """Every run under ``strict`` against itself under ``loose`` (the mapping effect)."""
    lo = _decisions(predictions, loose, threshold, subset).select(
        "run_id", "benchmark", "prompt_id", pl.col("unsafe").alias("u2"))
    st = _decisions(predictions, strict, threshold, subset).select(
        "run_id", "benchmark", "prompt_id", pl.col("unsafe").alias("u1"))
    if lo.height == 0:
        return None
    pairs = st.join(lo, on=["run_id", "benchmark", "prompt_id"], how="inner")
    counts = _count_pairs(pairs, ["run_id", "benchmark"])
    rows = [{**r, "metric_alias": aliases.get(r["benchmark"]), "first": r["run_id"],
             "second": r["run_id"]}
            for r in _records(counts, subset=subset, mapping=f"{strict.name} vs {loose.name}",
                              size=None)]
    return _finish(rows, family="mapping", alpha=alpha, description=(
        f"each run under the {strict.name} mapping against the same run under the "
        f"{loose.name} mapping, per benchmark ({subset} prompts)"))


def paired_comparisons(predictions: pl.DataFrame, *, mappings: Mapping[str, BinaryMapping],
                       primary: str, threshold: float, subset: str,
                       aliases: Mapping[str, str], has_outside: bool,
                       alpha: float | None = None) -> PairedResults:
    """The three families of the report (module docstring). ``mappings`` holds every binary
    mapping scored, by name; ``primary`` is the report's; ``aliases`` maps a benchmark to its
    metric name (CAP, OVER-REF, COPY, OR-H); ``alpha`` None: the protocol's α."""
    alpha = protocol().alpha if alpha is None else alpha
    recipes = recipes_vs_reference(predictions, mapping=mappings[primary], threshold=threshold,
                                   subset=subset, aliases=aliases, alpha=alpha)
    outside: list[PairedComparisonResult] = []
    if has_outside:
        for name in sorted(mappings):
            res = outside_vs_reference(predictions, mapping=mappings[name], threshold=threshold,
                                       aliases=aliases, alpha=alpha)
            if res is not None:
                outside.append(res)
    effect = None
    if "loose" in mappings and "strict" in mappings:
        effect = strict_vs_loose(predictions, loose=mappings["loose"],
                                 strict=mappings["strict"], threshold=threshold, subset=subset,
                                 aliases=aliases, alpha=alpha)
    return PairedResults(recipes=recipes, outside=tuple(outside), mapping=effect, alpha=alpha)


def _paired(ctx: AnalysisContext) -> PairedResults:
    o, scores, predictions = ctx.options, ctx[SCORES], ctx.inputs.predictions
    aliases = dict(scores.binary().select("benchmark", "metric_alias").unique()
                   .sort("benchmark").iter_rows())
    return paired_comparisons(
        predictions, mappings={m: MAPPINGS[m] for m in scores.mappings if m in MAPPINGS},
        primary=o.mapping, threshold=o.threshold, subset=o.primary_subset, aliases=aliases,
        has_outside=bool(predictions["guard_kind"].eq("outside").any()))


PAIRED = register_analysis("paired", _paired, result=PairedResults, needs=(SCORES,))
