"""The study's figures beside this run's, benchmark by benchmark, at the cut-off and at the matched
threshold: same direction, opposite, or not shown here.

The study (SPEC §4-§6) gives a direction for two benchmarks and a span for a third:

* HarmBench-copyright: the A-last branches (E1, E7, E8, E10) at 100, E3/E5 at 0-1 and E6 at 17:
  A-last flags more;
* OR-Bench-hard: A-last 3.4-6.8 % over-refusal against E3/E5's 40.3-56.4 % (the study's Table 1
  note): A-last flags *less*, by about 43 pp (E8, the "own student" of its 5.7 %, is A-last);
* WildGuard-benign: a span of 4.3 pp over every branch, inside the widest seed floor (5.0 pp):
  no A/B direction.

Here the difference is the route-matched A-last − B-last contrast of the calls
(:mod:`~guarddiag.analyses.calls`), with its interval: *same* where the interval excludes 0 on
the study's side, *opposite* where it excludes 0 on the other, *not shown here* where it holds
0. For WildGuard-benign, *same* where the interval lies within ±margin (no direction, as in the
study), *opposite* where it excludes 0.
"""

from __future__ import annotations

import polars as pl

from guarddiag.analyses.callwords import PRIMARY_THRESHOLD, at_cutoff
from guarddiag.protocol import protocol
from guarddiag.study_figures import study_figures

STUDY_SCHEMA = {"benchmark": pl.String, "study_a_last": pl.String, "study_b_last": pl.String,
                "study_difference": pl.String, "effect": pl.Float64, "effect_low": pl.Float64,
                "effect_high": pl.Float64, "verdict": pl.String, "effect_05": pl.Float64,
                "effect_05_low": pl.Float64, "effect_05_high": pl.Float64,
                "verdict_05": pl.String}


def direction_verdict(sign: int, low: float | None, high: float | None, *,
                      margin: float | None = None) -> str:
    """same / opposite / not shown here, for an interval of A-last − B-last (module docstring);
    ``margin`` None: the protocol's equivalence margin."""
    margin = protocol().equivalence_margin if margin is None else margin
    if low is None or high is None:
        return "not shown here"
    if sign == 0:
        if -margin <= low and high <= margin:
            return "same"
        return "opposite" if low > 0 or high < 0 else "not shown here"
    if low > 0 or high < 0:
        return "same" if (low > 0) == (sign > 0) else "opposite"
    return "not shown here"


def study_rows(headline: pl.DataFrame, *, margin: float | None = None) -> pl.DataFrame:
    """One row per benchmark with a published direction
    (:attr:`~guarddiag.study_figures.StudyFigures.directions`) that this run scored."""
    directions = study_figures().directions
    rows = []
    for r in headline.filter(pl.col("benchmark").is_in(list(directions))).iter_rows(
            named=True):
        fig = directions[r["benchmark"]]
        rows.append({"benchmark": r["benchmark"], "study_a_last": fig.a_last,
                     "study_b_last": fig.b_last, "study_difference": fig.difference,
                     **{k: r[k] for k in ("effect", "effect_low", "effect_high", "effect_05",
                                          "effect_05_low", "effect_05_high")},
                     "verdict": direction_verdict(fig.sign, r["effect_low"], r["effect_high"],
                                                  margin=margin),
                     "verdict_05": direction_verdict(fig.sign, r["effect_05_low"],
                                                     r["effect_05_high"], margin=margin)})
    return pl.DataFrame(rows, schema=STUDY_SCHEMA).sort("benchmark")


def contradictions(study: pl.DataFrame) -> str:
    """One sentence on where this run contradicts the study ("" where it does not)."""
    bits = []
    for r in study.iter_rows(named=True):
        where = [w for w, v in ((PRIMARY_THRESHOLD, r["verdict"]), (at_cutoff(), r["verdict_05"]))
                 if v == "opposite"]
        if where:
            bits.append(f"{r['benchmark']} at {' and '.join(where)} (study: "
                        f"{r['study_difference']})")
    return ("This run contradicts the study on " + "; ".join(bits) + ".") if bits else ""
