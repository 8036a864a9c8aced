"""Pool statistics (A/B agreement, class counts) and validation-split overlap with training.

:func:`pool_statistics` recomputes, from pool.parquet itself, what the pool build records in
agreement.json: per split and overall, the coarse (4-class) exact agreement of the two policies'
labels, the binary agreement under the loose mapping, Cohen's κ of both, the class counts per
policy and the A×B confusion matrix. The recorded agreement.json is kept beside it as given.

:func:`validation_overlap`: the share of val rows whose normalised text
(:func:`guarddiag.text.normalise`) also appears among the *train* rows of each training source —
the study found its multilingual val split overlapping 69.3% with policy-A training files
(monolingual 0.2%). Per language and overall.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from guarddiag import stats
from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE
from guarddiag.text import normalise


def _require(pool: pl.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in pool.columns]
    if missing:
        raise GuarddiagError(f"pool: missing column(s) {', '.join(missing)} needed for {what}")


@dataclass(frozen=True)
class PoolStatsResult:
    n_rows: int
    agreement: pl.DataFrame = field(repr=False)
    """Per split (and ``all``): n, coarse_agreement, binary_agreement, kappa_coarse,
    kappa_binary."""
    class_counts: pl.DataFrame = field(repr=False)
    """policy, split, class, n."""
    confusion: pl.DataFrame = field(repr=False)
    """label_a × label_b counts over the whole pool (rows: label_a; one column per label_b)."""
    recorded: Mapping[str, Any] | None = None
    """agreement.json as the pool build wrote it, if present."""

    def to_frame(self) -> pl.DataFrame:
        return self.agreement.clone()


def pool_statistics(pool: pl.DataFrame, *,
                    recorded: Mapping[str, Any] | None = None) -> PoolStatsResult:
    _require(pool, ("label_a", "label_b", "split"), "pool statistics")
    if pool.height == 0:
        raise GuarddiagError("pool: no rows")
    for col in ("label_a", "label_b"):
        bad = pool.filter(~pl.col(col).is_in(list(CLASSES)))
        if bad.height:
            raise GuarddiagError(f"pool column {col}: value {bad[col][0]!r} is not one of "
                                 f"{', '.join(CLASSES)}")
    unsafe = list(LOOSE.unsafe)
    rows = []
    splits = ["all", *sorted(set(pool["split"].to_list()))]
    for split in splits:
        part = pool if split == "all" else pool.filter(pl.col("split") == split)
        a, b = part["label_a"].to_list(), part["label_b"].to_list()
        ua = [x in unsafe for x in a]
        ub = [x in unsafe for x in b]
        rows.append({
            "split": split, "n": part.height,
            "coarse_agreement": sum(x == y for x, y in zip(a, b, strict=True)) / part.height,
            "binary_agreement": sum(x == y for x, y in zip(ua, ub, strict=True)) / part.height,
            "kappa_coarse": _finite(stats.cohen_kappa(a, b)),
            # Binary labels are booleans; cohen_kappa only compares labels for equality.
            "kappa_binary": _finite(stats.cohen_kappa(cast(list[str], ua),
                                                      cast(list[str], ub))),
        })
    agreement = pl.DataFrame(rows, schema={
        "split": pl.String, "n": pl.Int64, "coarse_agreement": pl.Float64,
        "binary_agreement": pl.Float64, "kappa_coarse": pl.Float64, "kappa_binary": pl.Float64})
    counts = []
    for policy, col in (("A", "label_a"), ("B", "label_b")):
        for split in splits:
            part = pool if split == "all" else pool.filter(pl.col("split") == split)
            got = dict(part[col].value_counts().iter_rows())
            counts += [{"policy": policy, "split": split, "class": c, "n": int(got.get(c, 0))}
                       for c in CLASSES]
    class_counts = pl.DataFrame(counts, schema={"policy": pl.String, "split": pl.String,
                                                "class": pl.String, "n": pl.Int64})
    pairs = dict(pool.group_by(["label_a", "label_b"]).len().select(
        pl.concat_str(["label_a", "label_b"], separator="|"), "len").iter_rows())
    confusion = pl.DataFrame(
        [{"label_a": a, **{b: int(pairs.get(f"{a}|{b}", 0)) for b in CLASSES}} for a in CLASSES],
        schema={"label_a": pl.String, **dict.fromkeys(CLASSES, pl.Int64)})
    return PoolStatsResult(n_rows=pool.height, agreement=agreement, class_counts=class_counts,
                           confusion=confusion, recorded=recorded)


def _finite(x: float) -> float | None:
    return None if x != x else x  # NaN (undefined κ) -> None


@dataclass(frozen=True)
class ValOverlapResult:
    table: pl.DataFrame = field(repr=False)
    """lang (``all`` or a language code), source (a training source, or ``any``), n_val,
    n_overlap, share."""

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def validation_overlap(pool: pl.DataFrame) -> ValOverlapResult:
    """Share of val rows whose normalised text is also a train row of each source."""
    _require(pool, ("text", "source", "split", "lang"), "validation overlap")
    train = pool.filter(pl.col("split") == "train")
    val = pool.filter(pl.col("split") == "val")
    sources_of: dict[str, set[str]] = defaultdict(set)
    for text, source in zip(train["text"].to_list(), train["source"].to_list(), strict=True):
        sources_of[normalise(text)].add(str(source))
    all_sources = sorted({str(s) for s in train["source"].to_list()})
    val_rows = [(str(lang) if lang is not None else "und", sources_of.get(normalise(t), set()))
                for t, lang in zip(val["text"].to_list(), val["lang"].to_list(), strict=True)]
    rows = []
    for lang in ["all", *sorted({lang for lang, _ in val_rows})]:
        part = [hit for lg, hit in val_rows if lang in ("all", lg)]
        for source in ["any", *all_sources]:
            n_hit = sum(1 for hit in part if (hit if source == "any" else source in hit))
            rows.append({"lang": lang, "source": source, "n_val": len(part),
                         "n_overlap": n_hit, "share": n_hit / len(part) if part else None})
    return ValOverlapResult(table=pl.DataFrame(rows, schema={
        "lang": pl.String, "source": pl.String, "n_val": pl.Int64, "n_overlap": pl.Int64,
        "share": pl.Float64}))


def _pool_stats(ctx: AnalysisContext) -> PoolStatsResult | None:
    """None without a pool."""
    i = ctx.inputs
    return None if i.pool is None else pool_statistics(i.pool, recorded=i.agreement)


def _val_overlap(ctx: AnalysisContext) -> ValOverlapResult | None:
    """None without a pool."""
    return None if ctx.inputs.pool is None else validation_overlap(ctx.inputs.pool)


POOL_STATS = register_analysis("pool_stats", _pool_stats, result=PoolStatsResult)
VAL_OVERLAP = register_analysis("val_overlap", _val_overlap, result=ValOverlapResult)
