"""Outside guards on the B-to-A axis of a benchmark, at one operating point.

An outside guard is placed where the calls (:mod:`~guarddiag.analyses.calls`) found an A/B
difference: position = (guard − B end) / (A end − B end), 0 = like the B-side branches, 1 = like
the A-last ones. Everything is read at the **matched** threshold (the reference's false-flag
rate on the policy-neutral val rows), the guard's too, so the guard has to be scored on those
rows (``guards score`` does it when given the pool); a guard without them is not placed, as a
guard read at the cut-off against branch ends read at their matched thresholds (0.9999 for some)
mixes two operating points.

A benchmark is on the axis only where its A and B ends differ, in the direction of its call, by
more than the widest seed range of the recipes at either end; a guard is placed only where it
passes the competence gate (mean capture on the clear-harm benchmarks at its matched threshold
at least the floor), and every placement says when the axis ends themselves fail it. A position
outside [0, 1] is kept and marked *off the axis* with the side. The interval draws both ends
from their seed noise and the guard's rate from its binomial noise, seeded by the benchmark and
the guard's counts, so the same scores under another guard name give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from guarddiag import stats
from guarddiag.analyses.callwords import (
    LESS,
    MORE,
    PRIMARY_DECONTAM,
    PRIMARY_THRESHOLD,
    at_cutoff,
)
from guarddiag.analyses.contrast import contrast_side, pooled_variance, route_pairs
from guarddiag.protocol import protocol
from guarddiag.roles import is_reference, is_route_cohort

PLACEMENT_DRAWS = 2000
"""Monte-Carlo draws of a placement interval (a ratio of noisy ends has no exact one here)."""
PLACEMENT_SCHEMA = {"guard": pl.String, "benchmark": pl.String, "call": pl.String,
                    "stable": pl.Boolean, "score": pl.Float64, "t_matched": pl.Float64,
                    "b_end": pl.Float64, "a_end": pl.Float64, "position": pl.Float64,
                    "position_low": pl.Float64, "position_high": pl.Float64,
                    "where": pl.String, "axis_ends": pl.String, "n": pl.Int64,
                    "draws": pl.Int64}
SKIPPED_SCHEMA = {"guard": pl.String, "why": pl.String}


def _clear_harm_capture(scores: pl.DataFrame, run_ids: list[str], *, mapping: str,
                        clear_harm: Sequence[str], threshold: str) -> dict[str, float]:
    """Mean capture on the clear-harm benchmarks per run, exact-decontaminated prompts."""
    part = scores.filter(pl.col("run_id").is_in(run_ids) & (pl.col("mapping") == mapping)
                         & (pl.col("decontam") == "exact") & (pl.col("threshold") == threshold)
                         & pl.col("benchmark").is_in(list(clear_harm)))
    return {str(r): float(c) for r, c in part.group_by("run_id").agg(pl.col("rate").mean())
            .iter_rows()}


def _where(position: float) -> str:
    if position < 0:
        return "off the axis (beyond the B end)"
    if position > 1:
        return "off the axis (beyond the A end)"
    return "on the axis"


def place_outside_guards(*, headline: pl.DataFrame, scores: pl.DataFrame,
                         thresholds: pl.DataFrame, mapping: str, clear_harm: Sequence[str],
                         confidence: float, seed: int) -> pl.DataFrame:
    """The placement table (:data:`PLACEMENT_SCHEMA`) from the calls' headline, scores and
    thresholds (:class:`~guarddiag.analyses.calls.CallsResult`); why a guard was placed
    nowhere is :func:`unplaced_guards`."""
    head = headline.filter(pl.col("call").is_in([MORE, LESS]))
    cohort = scores.filter((pl.col("mapping") == mapping)
                           & (pl.col("decontam") == PRIMARY_DECONTAM)
                           & (pl.col("threshold") == PRIMARY_THRESHOLD))
    mine = thresholds.filter(pl.col("mapping") == mapping)
    placeable = set(mine.filter(pl.col("n_neutral") > 0)["run_id"].to_list())
    outside = cohort.filter(pl.col("guard_kind") == "outside")
    cap = _clear_harm_capture(scores, outside["run_id"].unique().to_list(), mapping=mapping,
                              clear_harm=clear_harm, threshold=PRIMARY_THRESHOLD)
    refs = cohort.filter(is_reference())["run_id"].unique().to_list()
    ref_cap = _clear_harm_capture(scores, refs, mapping=mapping, clear_harm=clear_harm,
                                  threshold=at_cutoff())
    competence = protocol().competence_floor
    weak = bool(ref_cap) and float(np.mean(list(ref_cap.values()))) < competence
    axis_note = ("weak: the branches fail the competence gate" if weak else "")
    t_of = dict(mine.select("run_id", "t_matched").iter_rows())
    rows = []
    for h in head.iter_rows(named=True):
        bench = h["benchmark"]
        branch = cohort.filter((pl.col("benchmark") == bench) & is_route_cohort())
        carried = h["carried_by"].split(", ") if h["carried_by"] else None
        pairs, recipes = route_pairs(branch)
        pairs = [p for p in pairs if carried is None or p.route in carried]
        s2, df_pool = pooled_variance(list(recipes.values()))
        if not pairs or s2 is None:
            continue
        a_end = contrast_side(pairs, recipes, s2, df_pool, side="a")
        b_end = contrast_side(pairs, recipes, s2, df_pool, side="b")
        floor = max((max(r.scores) - min(r.scores)) for p in pairs for r in (p.a, *p.b))
        gap = (a_end.effect - b_end.effect) * (1 if h["call"] == MORE else -1)
        if gap <= floor:
            continue
        for g in outside.filter(pl.col("benchmark") == bench).iter_rows(named=True):
            rid = g["run_id"]
            if rid not in placeable or cap.get(rid, 0.0) < competence:
                continue
            s, n = g["rate"], g["n"]
            rng = stats.derive_rng(seed, "calls-placement", bench, f"{s:.17g}", str(n))
            a = rng.normal(a_end.effect, a_end.se, PLACEMENT_DRAWS)
            b = rng.normal(b_end.effect, b_end.se, PLACEMENT_DRAWS)
            x = rng.binomial(n, s, PLACEMENT_DRAWS) / n
            with np.errstate(divide="ignore", invalid="ignore"):
                pos = (x - b) / (a - b)
            tail = (1 - confidence) / 2
            lo, hi = np.quantile(pos, [tail, 1 - tail])
            position = (s - b_end.effect) / (a_end.effect - b_end.effect)
            rows.append({"guard": g["branch"], "benchmark": bench, "call": h["call"],
                         "stable": h["stable"], "score": s, "t_matched": t_of.get(rid),
                         "b_end": b_end.effect, "a_end": a_end.effect, "position": position,
                         "position_low": float(lo), "position_high": float(hi),
                         "where": _where(position), "axis_ends": axis_note, "n": n,
                         "draws": PLACEMENT_DRAWS})
    return pl.DataFrame(rows, schema=PLACEMENT_SCHEMA).sort(["guard", "benchmark"])


def unplaced_guards(*, scores: pl.DataFrame, thresholds: pl.DataFrame,
                    placement: pl.DataFrame, mapping: str, clear_harm: Sequence[str]
                    ) -> pl.DataFrame:
    """Outside guards that were placed nowhere, each with why."""
    outside = scores.filter(pl.col("guard_kind") == "outside")
    names = dict(outside.select("run_id", "branch").unique().iter_rows())
    neutral = dict(thresholds.filter(pl.col("mapping") == mapping)
                   .select("run_id", "n_neutral").iter_rows())
    cap = _clear_harm_capture(scores, list(names), mapping=mapping, clear_harm=clear_harm,
                              threshold=PRIMARY_THRESHOLD)
    placed = set(placement["guard"].to_list()) if placement.height else set()
    competence = protocol().competence_floor
    rows = []
    for rid, name in sorted(names.items()):
        if name in placed:
            continue
        if not neutral.get(rid):
            why = ("not scored on the policy-neutral val rows, so no matched threshold: "
                   "score it again with the pool (guarddiag guards score --pool …)")
        elif cap.get(rid, 0.0) < competence:
            why = (f"fails the competence gate: clear-harm capture {100 * cap.get(rid, 0.0):.1f}"
                   f" % at its matched threshold, below {100 * competence:.0f} %")
        else:
            why = "no benchmark has A and B ends apart by more than the seed floor"
        rows.append({"guard": name, "why": why})
    return pl.DataFrame(rows, schema=SKIPPED_SCHEMA)
