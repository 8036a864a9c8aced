"""Which interval a number carries, named once for every table and for results.json.

- ``wilson``: one run's rate (k of n prompts), :func:`guarddiag.stats.wilson_interval`. Never a
  zero-width interval at 0% or 100%.
- ``seed-range+wilson``: a recipe trained with several seeds, shown as its seed mean. The
  interval runs from the lowest Wilson lower bound of any of its seeds to the highest Wilson
  upper bound: it holds the seed range (how far retraining moves the score) *and* each seed's
  prompt-sampling uncertainty, so three seeds that all score 0 of 75 read [0, 4.9%], not [0, 0].
  The bare seed range stays beside it (``seed_low``, ``seed_high``).
- ``seed-range``: min–max over the seeds of one recipe (the seed floor Φb and the span Δb are
  built from these).
- ``bootstrap-percentile``: the seeded prompt bootstrap (B resamples), kept for differences
  between runs on the same prompts and for spans.
"""

from __future__ import annotations

from typing import Final

import polars as pl

WILSON = "wilson"
SEED_WILSON = "seed-range+wilson"
SEED_RANGE = "seed-range"
BOOTSTRAP: Final = "bootstrap-percentile"
INTERVALS = (WILSON, SEED_WILSON, SEED_RANGE, BOOTSTRAP)


def recipe_interval_aggs() -> list[pl.Expr]:
    """Aggregations over the score rows (one per seed) of one recipe: mean ``score``, its
    ``low``/``high`` (Wilson for one run, the seed-range+wilson hull for several), the bare
    ``seed_low``/``seed_high``, ``interval`` and ``n_runs``."""
    single = pl.len() == 1
    return [
        pl.col("score").mean().alias("score"),
        pl.when(single).then(pl.col("ci_low").first()).otherwise(pl.col("ci_low").min())  # pragma: no mutate(call@46): one row (single): first = last  # noqa: E501
        .alias("low"),
        pl.when(single).then(pl.col("ci_high").first()).otherwise(pl.col("ci_high").max())  # pragma: no mutate(call@47): one row (single): first = last  # noqa: E501
        .alias("high"),
        pl.col("score").min().alias("seed_low"), pl.col("score").max().alias("seed_high"),
        pl.when(single).then(pl.lit(WILSON)).otherwise(pl.lit(SEED_WILSON)).alias("interval"),
        pl.len().cast(pl.Int64).alias("n_runs"),
    ]
