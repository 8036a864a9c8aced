"""The route-matched contrast of A-last recipes with their B-side matches, and its tests.

A **pair** is an A-last student recipe (role student, last policy A) and the runs of the same
size that took its route with policy-B labels: its controls (``control_of``), or, where it has
none and its route is the reference's, the reference (E8, distilled from T_A, against the
reference distilled from T_B). A **contrast** over pairs is the mean over them of (A mean − B
mean); each route's pairs give that route's own contrast.

**Seed noise.** A recipe's variance is its own seed variance where it has ≥ 2 seeds and never
less than the pooled within-recipe variance s² (a recipe whose seeds agree by chance does not
shrink the error); a recipe with one seed takes s². Var(effect) = Σ w_k² σ_k² / n_k, with
Welch–Satterthwaite degrees of freedom, never more than the pooled df (every variance term
rests on the same seed residuals). A recipe whose seeds disagree widely (97 / 0 / 8.8 %)
thus widens the interval, and an equivalence test cannot pass through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import scipy.stats


@dataclass(frozen=True)
class Recipe:
    size: str
    branch: str
    route: str
    scores: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores))

    @property
    def ss(self) -> float:
        return float(np.sum((np.asarray(self.scores) - self.mean) ** 2))


@dataclass(frozen=True)
class Pair:
    """An A-last recipe and its route-matched B side (one or more recipes) at one size."""

    a: Recipe
    b: tuple[Recipe, ...]

    @property
    def route(self) -> str:
        return self.a.route

    def weights(self) -> dict[tuple[str, str], float]:
        w = {(self.a.size, self.a.branch): 1.0}
        for r in self.b:
            w[(r.size, r.branch)] = w.get((r.size, r.branch), 0.0) - 1.0 / len(self.b)
        return w


def route_pairs(rows: pl.DataFrame) -> tuple[list[Pair], dict[tuple[str, str], Recipe]]:
    """The route-matched pairs of one cohort's branch rows (read from their roles), and every
    recipe (students, the reference and controls) by (size, branch)."""
    recipes: dict[tuple[str, str], Recipe] = {}
    info: dict[tuple[str, str], dict[str, Any]] = {}
    ordered = rows.sort(["size", "branch", "seed"])
    for key, part in ordered.partition_by(["size", "branch"], as_dict=True,
                                          maintain_order=True).items():
        k = (str(key[0]), str(key[1]))
        first = part.row(0, named=True)
        recipes[k] = Recipe(k[0], k[1], first["route"],
                            tuple(part.sort("seed")["rate"].to_list()))
        info[k] = first
    pairs = []
    for k, m in info.items():
        if not (m["role"] == "student" and m["last_policy"] == "A" and m["variant_of"] is None):
            continue
        controls = [recipes[j] for j, c in info.items()
                    if j[0] == k[0] and c["role"] == "control" and c["control_of"] == k[1]
                    and c["route"] == m["route"]]
        if not controls:
            controls = [recipes[j] for j, c in info.items()
                        if j[0] == k[0] and c["role"] == "reference" and c["route"] == m["route"]]
        if controls:
            pairs.append(Pair(recipes[k], tuple(controls)))
    return pairs, recipes


def pooled_variance(recipes: Sequence[Recipe]) -> tuple[float | None, int]:
    """(s², df): pooled within-recipe variance over the recipes with ≥ 2 seeds."""
    df = sum(r.n - 1 for r in recipes if r.n >= 2)
    if df < 1:
        return None, 0
    return sum(r.ss for r in recipes if r.n >= 2) / df, df


@dataclass(frozen=True)
class Contrast:
    effect: float
    se: float
    df: float


def contrast(pairs: Sequence[Pair], recipes: Mapping[tuple[str, str], Recipe],
             s2: float, df_pool: int) -> Contrast:
    """Mean over ``pairs`` of (A − B), its standard error and Welch–Satterthwaite df."""
    weights: dict[tuple[str, str], float] = {}
    for pair in pairs:
        for k, w in pair.weights().items():
            weights[k] = weights.get(k, 0.0) + w / len(pairs)
    effect, pooled, terms = 0.0, 0.0, []
    for k, w in weights.items():
        r = recipes[k]
        effect += w * r.mean
        own = r.ss / (r.n - 1) if r.n >= 2 else -1.0
        # never less than the pooled variance: seeds that agree by chance do not shrink it
        if own > s2:
            terms.append((w * w * own / r.n, r.n - 1))
        else:
            pooled += w * w * s2 / r.n
    # every term that uses s² shares its one estimate: one term on df_pool, or Satterthwaite
    # would count the same degrees of freedom once per recipe
    terms.append((pooled, df_pool))
    v = sum(a for a, _ in terms)
    denom = sum(a * a / d for a, d in terms if d > 0)
    df = v * v / denom if denom > 0 else float(df_pool)
    # a recipe's own ss is also in s²: the terms are not independent, and together they rest on
    # df_pool seed residuals, so Satterthwaite (which adds them as if independent) is capped there
    return Contrast(effect, math.sqrt(v), min(df, float(df_pool)))


def p_two_sided(c: Contrast) -> float:
    if c.se == 0:
        return 0.0 if c.effect != 0 else 1.0
    return float(2 * scipy.stats.t.sf(abs(c.effect) / c.se, c.df))


def p_equivalence(c: Contrast, margin: float) -> float:
    """TOST: the larger of the two one-sided p-values against ±margin."""
    if c.se == 0:
        return 0.0 if abs(c.effect) < margin else 1.0
    low = scipy.stats.t.sf((c.effect + margin) / c.se, c.df)
    high = scipy.stats.t.cdf((c.effect - margin) / c.se, c.df)
    return float(max(low, high))


def p_recipes_differ(recipes: Sequence[Recipe], s2: float, df_pool: int) -> float | None:
    """One-way F test: do the recipes' means differ beyond seed noise (per size, summed)?"""
    ssb, df1 = 0.0, 0
    by_size: dict[str, list[Recipe]] = {}
    for r in recipes:
        by_size.setdefault(r.size, []).append(r)
    for part in by_size.values():
        if len(part) < 2:
            continue
        grand = sum(r.n * r.mean for r in part) / sum(r.n for r in part)
        ssb += sum(r.n * (r.mean - grand) ** 2 for r in part)
        df1 += len(part) - 1
    if df1 == 0:
        return None
    if s2 == 0:
        return 0.0 if ssb > 0 else 1.0
    return float(scipy.stats.f.sf(ssb / df1 / s2, df1, df_pool))


def contrast_side(pairs: Sequence[Pair], recipes: Mapping[tuple[str, str], Recipe],
                  s2: float, df_pool: int, *, side: str) -> Contrast:
    """The mean of one side of ``pairs`` (``a``: the A-last recipes, ``b``: their matches)
    with its seed-noise standard error."""
    weights: dict[tuple[str, str], float] = {}
    for p in pairs:
        members = [p.a] if side == "a" else list(p.b)
        for r in members:
            weights[(r.size, r.branch)] = (weights.get((r.size, r.branch), 0.0)
                                           + 1.0 / len(members) / len(pairs))
    mean = sum(w * recipes[k].mean for k, w in weights.items())
    var = 0.0
    for k, w in weights.items():
        r = recipes[k]
        own = r.ss / (r.n - 1) if r.n >= 2 else 0.0
        var += w * w * max(own, s2) / r.n
    return Contrast(mean, math.sqrt(var), float(df_pool))
