"""Helpers the section builders share: cohort wording, percent text, best-value direction, and
the pivot that gives every (benchmark, cohort) its own column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from guarddiag.report.context import ReportContext
from guarddiag.report.document import Column


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def cohort_words(ctx: ReportContext, subset: str | None = None) -> str:
    o = ctx.options
    return (f"{subset or o.primary_subset} prompts, {o.mapping} mapping, unsafe when "
            f"P(unsafe) ≥ {o.threshold:g}")


def best_of(metric: str) -> str | None:
    return {"CAP": "max", "VAL": "max", "OVER-REF": "min"}.get(metric)


def pivot_by_cohort(rows: pl.DataFrame, *, entity_cols: Sequence[str], value: str = "score",
           low: str = "low", high: str = "high",
           cohort: Sequence[str] = ("subset", "mapping_applied", "threshold", "prompt_set")
           ) -> tuple[pl.DataFrame, list[Column]]:
    """Entities × benchmarks, one column per (benchmark, cohort).

    Within a benchmark the cohort most rows share gets the plain column; any other cohort (a
    guard scored on fewer prompts, a binary-only guard's native verdict) gets a column of its
    own, so no column ever mixes cohorts.
    """
    columns: list[Column] = []
    wide: dict[tuple, dict[str, Any]] = {}
    order: list[tuple] = []
    for r in rows.iter_rows(named=True):
        key = tuple(r[c] for c in entity_cols)
        if key not in wide:
            wide[key] = dict(zip(entity_cols, key, strict=True))
            order.append(key)
    for bench in sorted(set(rows["benchmark"].to_list())):
        part = rows.filter(pl.col("benchmark") == bench)
        counts = part.group_by(list(cohort)).len().sort(
            ["len", *cohort], descending=[True, *([False] * len(cohort))], nulls_last=True)
        for i, coh in enumerate(counts.iter_rows(named=True)):
            match = pl.all_horizontal([
                pl.col(c).is_null() if coh[c] is None else pl.col(c) == coh[c] for c in cohort])
            cells = part.filter(match)
            col = bench if i == 0 else f"{bench}~{i}"
            alias = cells["metric_alias"][0]
            header = bench if alias in ("CAP", "OVER-REF") else f"{bench} ({alias})"
            if i:
                header += f" [{coh.get('mapping_applied')}, {cells['n_scored'][0]} prompts]"
            metric = {"COPY": "CAP", "OR-H": "OVER-REF"}.get(alias, alias)
            columns.append(Column(col, header, "pct", low=f"{col}__low", high=f"{col}__high",
                                  best=best_of(metric)))
            for r in cells.iter_rows(named=True):
                w = wide[tuple(r[c] for c in entity_cols)]
                w[col], w[f"{col}__low"], w[f"{col}__high"] = r[value], r[low], r[high]
    # Every pivot column has its interval columns (low, high are always set above).
    keys = [c for col in columns for c in (col.key, col.low, col.high) if c is not None]
    schema: dict[str, Any] = {**{c: rows.schema[c] for c in entity_cols},
                              **dict.fromkeys(keys, pl.Float64)}
    frame = pl.DataFrame([{k: wide[o].get(k) for k in schema} for o in order], schema=schema)
    return frame, columns
