"""An outside guard's predictions table and the per-benchmark summary printed after a run."""

from __future__ import annotations

from typing import Any

import polars as pl

from guarddiag.guards.rawlog import Answers, verdict_from_record
from guarddiag.labels import CLASSES, PROB_COLUMNS, get_mapping
from guarddiag.protocol import protocol

__all__ = ["RUN_PREFIX", "guard_table", "summary"]

RUN_PREFIX = "guard/"


def guard_table(name: str, kind: str, frames: dict[str, pl.DataFrame], done: Answers,
                decontam: dict[str, frozenset[str]] | None, *, unaudited: frozenset[str]
                ) -> pl.DataFrame:
    """The predictions table of the run ``name`` from its answers ``done``: ``survives_decontam``
    from ``decontam`` (the audit's lists), null on the ``unaudited`` benchmarks, else True."""
    cols: dict[str, list[Any]] = {c: [] for c in
                                  ("benchmark", "prompt_id", *PROB_COLUMNS, "p_unsafe",
                                   "pred_class", "survives_decontam", "status")}
    for bench, frame in frames.items():
        kept = decontam.get(bench) if decontam is not None else None
        for pid in frame["prompt_id"].to_list():
            v = verdict_from_record(done[(bench, pid)])
            cols["benchmark"].append(bench)
            cols["prompt_id"].append(pid)
            probs = v.class_probs if v.status == "ok" else None
            for i, col in enumerate(PROB_COLUMNS):
                cols[col].append(probs[i] if probs is not None else None)
            cols["p_unsafe"].append(v.p_unsafe)
            cols["pred_class"].append(v.pred_class)
            cols["survives_decontam"].append(pid in kept if kept is not None else
                                             None if bench in unaudited else True)
            cols["status"].append(v.status)
    n = len(cols["benchmark"])
    return pl.DataFrame({
        "run_id": [RUN_PREFIX + name] * n, "guard_kind": ["outside"] * n,
        "branch": [name] * n, "size": [kind] * n, "seed": pl.Series([None] * n, dtype=pl.Int64),
        "label_policy": ["outside"] * n,
        **{k: pl.Series(v, dtype=pl.Float64 if k in (*PROB_COLUMNS, "p_unsafe") else
                        pl.Boolean if k == "survives_decontam" else pl.String)
           for k, v in cols.items()},
    })


def summary(table: pl.DataFrame, frames: dict[str, pl.DataFrame], mapping: str
             ) -> pl.DataFrame:
    """Per benchmark: share predicted unsafe (p_unsafe ≥ the protocol's cut-off, the report's
    default threshold) under loose and strict."""
    cutoff = protocol().cutoff
    strict_unsafe = [c for c, name in zip(PROB_COLUMNS, CLASSES, strict=True)
                     if name in get_mapping("strict").unsafe]
    kinds = {b: (f["label_kind"].unique().sort().str.join("/").item()
                 if "label_kind" in f.columns else None) for b, f in frames.items()}
    ok = table.filter(pl.col("status") == "ok").with_columns(
        (pl.col("p_unsafe") >= cutoff).alias("unsafe_loose"),
        (pl.sum_horizontal([pl.col(c) for c in strict_unsafe]) >= cutoff)
        .alias("unsafe_strict"))
    per = ok.group_by("benchmark").agg(
        (pl.col("unsafe_loose").mean() * 100).alias("pct_unsafe_loose"),
        (pl.col("unsafe_strict").mean() * 100).alias("pct_unsafe_strict"))
    counts = table.group_by("benchmark").agg(
        pl.len().alias("n"), (pl.col("status") == "failed").sum().alias("n_failed"))
    out = counts.join(per, on="benchmark", how="left").sort("benchmark").with_columns(
        pl.col("benchmark").replace_strict(kinds, default=None).alias("kind"))
    order = ["benchmark", "kind", "n", "n_failed", "pct_unsafe_loose", "pct_unsafe_strict"]
    out = out.select(order)
    return out.with_columns(pl.lit(mapping).alias("mapping"))
