"""Where a benchmark's contamination comes from: set by the pool recipe, or measured.

The pool recipe copies part of several public benchmarks into the pool on purpose (the
"benchmark mirrors", each sampled at a fixed fraction), so that decontamination has real overlap
to remove. For those benchmarks the exact-overlap share is a *design choice* of the recipe — it
is roughly the sampled fraction — and not a finding about the benchmark; comparing it with the
study's measured overlap would compare a dial setting with a measurement.

A benchmark's overlap is **set by the pool recipe** (``origin = "recipe"``) where at least half
of its exactly matched prompts match a pool row from a *sampled* source — one of which the pool
kept only part (``sampled < read`` in the pool's ``meta.json``) — and **measured**
(``"measured"``) otherwise, including no overlap at all. Without the audit's
``overlap.parquet`` or the pool's ``meta.json`` the origin is ``"unknown"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.analyses.contamination import ContaminationResult

RECIPE_SHARE = 0.5
"""Share of a benchmark's exact matches that must come from sampled sources for its overlap to
count as set by the recipe."""

SCHEMA: dict[str, pl.DataType] = {
    "benchmark": pl.String(), "n": pl.Int64(), "n_exact": pl.Int64(),
    "share_exact": pl.Float64(), "n_exact_sampled": pl.Int64(), "origin": pl.String(),
    "sampled_sources": pl.String()}
"""``n_exact_sampled``: exactly matched prompts with a match from a sampled pool source;
``sampled_sources``: those sources as ``name kept/read (share)``, most matches first."""


@dataclass(frozen=True)
class OverlapOriginResult:
    table: pl.DataFrame = field(repr=False)

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def origin(self, benchmark: str) -> dict[str, Any] | None:
        part = self.table.filter(pl.col("benchmark") == benchmark)
        return part.row(0, named=True) if part.height else None


def _sampled(pool_sources: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """Sources the pool kept only part of: name → (sampled, read)."""
    out = {}
    for name, counts in pool_sources.items():
        try:
            read, sampled = int(counts["read"]), int(counts["sampled"])
        except (KeyError, TypeError, ValueError):
            continue
        if 0 < sampled < read:
            out[str(name)] = (sampled, read)
    return out


def overlap_origins(contamination: ContaminationResult, overlap: pl.DataFrame | None,
                    pool_sources: Mapping[str, Mapping[str, Any]]) -> OverlapOriginResult:
    """The origin of every audited benchmark's exact overlap (module docstring)."""
    sampled = _sampled(pool_sources)
    known = overlap is not None and bool(pool_sources)
    matches = (overlap.with_columns(pl.col("pool_id").str.split(":").list.first().alias("src"))
               .with_columns(pl.col("src").is_in(list(sampled)).alias("is_sampled"))
               if overlap is not None else None)
    rows = []
    for r in contamination.table.iter_rows(named=True):
        bench, n_exact = r["benchmark"], r["n_exact"]
        n_sampled, sources = 0, ""
        if matches is not None:
            part = matches.filter(pl.col("benchmark") == bench)
            n_sampled = part.filter(pl.col("is_sampled"))["prompt_id"].n_unique()
            by_src = (part.filter(pl.col("is_sampled")).group_by("src")
                      .agg(pl.col("prompt_id").n_unique().alias("k"))
                      .sort(["k", "src"], descending=[True, False]))
            sources = ", ".join(
                f"{s} {sampled[s][0]}/{sampled[s][1]} ({100 * sampled[s][0] / sampled[s][1]:.0f}%)"
                for s in by_src["src"].to_list())
        if not known:
            origin = "unknown"
        elif n_exact and n_sampled >= RECIPE_SHARE * n_exact:
            origin = "recipe"
        else:
            origin = "measured"
        rows.append({"benchmark": bench, "n": r["n"], "n_exact": n_exact,
                     "share_exact": r["share_exact"], "n_exact_sampled": n_sampled,
                     "origin": origin, "sampled_sources": sources or None})
    return OverlapOriginResult(table=pl.DataFrame(rows, schema=SCHEMA))
