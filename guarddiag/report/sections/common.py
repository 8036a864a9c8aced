"""Helpers the section builders share: cohort wording, percent text, best-value direction, and
the pivot that gives every (benchmark, cohort) its own column."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from itertools import combinations
from typing import Any

import polars as pl

from guarddiag.analyses.calls import CALLS_ANALYSIS
from guarddiag.analyses.contamination import CONTAMINATION
from guarddiag.analyses.intervals import SEED_WILSON
from guarddiag.analyses.load import LOAD
from guarddiag.report.context import ReportContext
from guarddiag.report.document import Column

BOLD_RULE = ("Bold: the highest CAP / lowest OVER-REF of a column, only in columns whose "
             "benchmark is called capability on every route (the first screen's call at that "
             "column's cohort) — the highest value, not a significant difference (see the "
             "paired tests). Other columns carry no bold: there a higher number is not a "
             "better guard, or nothing can be read.")
"""The one emphasis rule of the score tables, stated in their captions."""


def missing_steps(ctx: ReportContext, bench: str) -> list[str]:
    """What a benchmark lacks before it can get a call: an audit (the user's own, never
    audited) and the branches' scores (scored by outside guards only), each with its command."""
    inputs = ctx.results.inputs
    steps = []
    if bench in inputs.not_audited:
        steps.append(f"not audited: `guarddiag audit --benchmarks {bench}`")
    if bench in inputs.without_branches:
        steps.append(f"no branch scored on it: `guarddiag predict --benchmarks {bench}`")
    return steps


def missing_steps_sentence(ctx: ReportContext) -> str | None:
    """One sentence naming the benchmarks that lack an audit or the branches' scores, with
    the commands that add them; None when none does."""
    inputs = ctx.results.inputs
    parts = []
    if inputs.not_audited:
        ids = ",".join(inputs.not_audited)
        parts.append(f"not audited (your own benchmarks: no prompt of them counts as "
                     f"decontaminated, so the decontaminated tables leave them out): "
                     f"{', '.join(inputs.not_audited)} — `guarddiag audit --benchmarks {ids}` "
                     f"audits them")
    if inputs.without_branches:
        ids = ",".join(inputs.without_branches)
        parts.append(f"scored by outside guards only, so no call and no placement: "
                     f"{', '.join(inputs.without_branches)} — `guarddiag predict --benchmarks "
                     f"{ids}` scores the branches on them")
    if not parts:
        return None
    return "Not yet comparable: " + "; ".join(parts) + " (then score the guards again: their " \
        "answers are reused)."


def hull_words(confidence: float) -> str:
    """The caption words of the one interval every seed-averaged score cell carries."""
    return (f"Every cell: mean over the row's runs [lowest to highest {int(confidence * 100)}% "
            "Wilson bound of those runs] — interval 'seed-range+wilson', which holds the seed "
            "range and each run's prompt-sampling interval; with one run (runs = 1) it is that "
            "run's own Wilson interval, so one column never mixes two kinds.")


def one_interval_kind(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows of a seed-averaged table, each named with the one interval of its cells: the
    seed-range+wilson hull, which for a single run is its Wilson interval."""
    return frame.with_columns(pl.lit(SEED_WILSON).alias("interval"))


def single_seed_note(ctx: ReportContext, *, subset: str | None = None,
                     mapping: str | None = None) -> str:
    """The note every single-run interval carries: it holds prompt sampling, not seed noise,
    with each benchmark's seed SD (pooled within-recipe SD of the load test, same cohort)."""
    o = ctx.options
    t = ctx.result(LOAD).table.filter(
        (pl.col("subset") == (subset or o.primary_subset))
        & (pl.col("mapping") == (mapping or o.mapping))
        & pl.col("seed_sd").is_not_null()).sort("benchmark")
    sds = "; ".join(f"{r['benchmark']} {100 * r['seed_sd']:.1f}"
                    for r in t.iter_rows(named=True))
    return ("Single-run intervals (one run: runs = 1, an outside guard, or a per-run row) hold "
            "the prompt sample only and exclude seed noise: a retrained seed of the same recipe "
            "moves a score by about one seed SD. Seed SD (pp) per benchmark: "
            + (sds or "not measured (fewer than two seed groups)") + ".")


def capability_benchmarks(ctx: ReportContext, *, subset: str | None = None,
                          mapping: str | None = None) -> set[str]:
    """Benchmarks called *capability* (every route, at the matched threshold) at the cohort of
    the column being bolded (``subset`` and ``mapping``; default: the report's primary ones):
    the only columns where the best value is bold. The calls' own cells decide (a strict-mapping
    column by the strict call); without the calls analysis no column is bolded."""
    calls = ctx.get(CALLS_ANALYSIS)
    if calls is None:
        return set()
    o = ctx.options
    level = "full" if (subset or o.primary_subset) == "full" else "exact"
    cells = calls.table.filter((pl.col("mapping") == (mapping or o.mapping))
                               & (pl.col("decontam") == level)
                               & (pl.col("threshold") == "matched")
                               & (pl.col("call") == "capability")
                               & (pl.col("carried_by") == ""))
    return set(cells["benchmark"].to_list())


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


OVERLAP_KINDS = ("near", "template", "contained")
"""The overlap kinds an audit may count besides exact overlaps."""


def decontam_level(ctx: ReportContext) -> str | None:
    """What the decontaminated subset removed, read from the audit's counts: 'exact' or
    'exact + near + …' (overlap kinds) — the kinds whose counts add up to n − kept on every
    audited benchmark (the fewest such kinds where zero counts leave a choice); None without an
    audit or where no combination adds up."""
    c = ctx.get(CONTAMINATION)
    if c is None or not c.table.height:
        return None
    kinds = [k for k in OVERLAP_KINDS if f"n_{k}" in c.table.columns]
    rows = list(c.table.iter_rows(named=True))
    for size in range(len(kinds) + 1):
        for combo in combinations(kinds, size):
            if all(r["n"] - r["n_kept"] == r["n_exact"] + sum(r[f"n_{k}"] or 0 for k in combo)
                   for r in rows):
                return " + ".join(("exact", *combo))
    return None


def cohort_words(ctx: ReportContext, subset: str | None = None, *,
                 threshold: bool = True) -> str:
    """The cohort of a table, in words; a decontaminated subset names what it removed.
    ``threshold=False`` leaves the read-out out (the first screen names its own)."""
    o = ctx.options
    subset = subset or o.primary_subset
    level = decontam_level(ctx) if subset == "decontaminated" else None
    removed = f" ({level} overlaps removed)" if level else ""
    text = f"{subset}{removed} prompts, {o.mapping} mapping"
    return text + (f", unsafe when P(unsafe) ≥ {o.threshold:g}" if threshold else "")


def best_of(metric: str) -> str | None:
    return {"CAP": "max", "VAL": "max", "OVER-REF": "min"}.get(metric)


def pivot_by_cohort(rows: pl.DataFrame, *, entity_cols: Sequence[str], value: str = "score",
           low: str = "low", high: str = "high",
           cohort: Sequence[str] = ("subset", "mapping_applied", "threshold", "prompt_set"),
           bold: Collection[str] | None = None) -> tuple[pl.DataFrame, list[Column]]:
    """Entities × benchmarks, one column per (benchmark, cohort).

    ``bold``: the benchmarks whose columns mark their best value (None: every column).

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
                                  best=best_of(metric) if bold is None or bench in bold
                                  else None))
            for r in cells.iter_rows(named=True):
                w = wide[tuple(r[c] for c in entity_cols)]
                w[col], w[f"{col}__low"], w[f"{col}__high"] = r[value], r[low], r[high]
    # Every pivot column has its interval columns (low, high are always set above).
    keys = [c for col in columns for c in (col.key, col.low, col.high) if c is not None]
    schema: dict[str, Any] = {**{c: rows.schema[c] for c in entity_cols},
                              **dict.fromkeys(keys, pl.Float64)}
    frame = pl.DataFrame([{k: wide[o].get(k) for k in schema} for o in order], schema=schema)
    return frame, columns
