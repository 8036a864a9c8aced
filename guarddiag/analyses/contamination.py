"""The contamination audit's per-benchmark overlap, read from the audit's summary.json.

Shares are recomputed from the counts (``n_exact / n``, ``n_near / n``) as fractions, so the
report does not depend on how the audit rounded its percentages. Exact overlaps and near
duplicates are separate columns (a prompt counts as near only when it has no exact overlap).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError

SCHEMA = {"benchmark": pl.String, "n": pl.Int64, "n_exact": pl.Int64, "share_exact": pl.Float64,
          "n_near": pl.Int64, "share_near": pl.Float64, "n_kept": pl.Int64,
          "sha256": pl.String}


@dataclass(frozen=True)
class ContaminationResult:
    table: pl.DataFrame = field(repr=False)
    pool_rows: int | None
    near_dup: bool
    near_threshold: float | None
    normalisation: str | None
    unavailable: Mapping[str, str]
    examples: Mapping[str, tuple[Mapping[str, Any], ...]] = field(repr=False)
    """Example matched pairs per benchmark (benchmark_text, pool_text, kind, …)."""
    short_words: int | None = None
    """Benchmark prompts with fewer distinct words need ``short_threshold`` for a near
    duplicate (None: an audit from before this rule)."""
    short_threshold: float | None = None

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def sha256(self) -> dict[str, str | None]:
        return dict(zip(self.table["benchmark"].to_list(), self.table["sha256"].to_list(),
                        strict=True))


def contamination_table(summary: Mapping[str, Any], *,
                        source: str = "summary.json") -> ContaminationResult:
    benches = summary.get("benchmarks")
    if not isinstance(benches, Mapping):
        raise GuarddiagError(f'{source} field "benchmarks": expected a mapping of benchmark ids')
    order = summary.get("benchmark_order") or sorted(benches)
    rows, examples = [], {}
    for name in order:
        entry = benches.get(name)
        if not isinstance(entry, Mapping):
            raise GuarddiagError(f'{source} field "benchmarks.{name}": missing or not a mapping')
        try:
            n, n_exact, n_kept = int(entry["n"]), int(entry["n_exact"]), int(entry["n_kept"])
        except (KeyError, TypeError, ValueError) as exc:
            raise GuarddiagError(f'{source} field "benchmarks.{name}": needs integer n, n_exact '
                                 f"and n_kept ({exc.__class__.__name__}: {exc})") from None
        n_near = entry.get("n_near")
        rows.append({"benchmark": str(name), "n": n, "n_exact": n_exact,
                     "share_exact": n_exact / n if n else None,
                     "n_near": None if n_near is None else int(n_near),
                     "share_near": None if n_near is None or not n else int(n_near) / n,
                     "n_kept": n_kept, "sha256": entry.get("sha256")})
        examples[str(name)] = tuple(e for e in entry.get("examples") or ()
                                    if isinstance(e, Mapping))
    return ContaminationResult(
        table=pl.DataFrame(rows, schema=SCHEMA), pool_rows=summary.get("pool_rows"),
        near_dup=bool(summary.get("near_dup")), near_threshold=summary.get("threshold"),
        normalisation=summary.get("normalisation"),
        unavailable=dict(summary.get("unavailable") or {}), examples=examples,
        short_words=summary.get("short_words"), short_threshold=summary.get("short_threshold"))
