"""Calls that name what was shown: policy content, a moved threshold, the route, or equivalence.

The load test (:mod:`~guarddiag.analyses.loadtest`) contrasts every A-last branch with every
B-last one at P(unsafe) ≥ 0.5. That contrast is as much "head-only vs full training" as "policy A
vs B", and a guard that flags more of everything (a moved threshold) passes it as well. This
analysis separates the three, per (benchmark, mapping, decontamination level, threshold kind).

**Policy-neutral rows.** The pool's val rows whose policy-A and policy-B labels both read safe
under the mapping: both policies agree they should pass, so a run's flag rate on them is its
false-flag rate whatever policy it learnt, and a shift there is a threshold, not policy content.

**Operating-point matching.** Per run, the matched threshold t is the threshold nearest 0.5
whose false-flag rate on the neutral rows is the largest not above the reference recipe's at
0.5 (the mean over the reference runs of the same size; an outside guard is matched to the mean
over sizes). Every rate is computed at 0.5 and at t; the AUROC of the benchmark's prompts
against the same neutral rows (threshold-free) sits beside them. A run without neutral rows
keeps 0.5 (``matched`` says).

**Route-matched contrast.** Each A-last student (role student, last policy A) is paired with
the runs of the same size that took its route with policy-B labels: its controls
(``control_of``), or, where it has none and its route is the reference's, the reference (E8, the
T_A-distilled branch, against the T_B-distilled reference). effect = mean over pairs of (A mean
− B mean); each route's own contrast is reported beside it.

**Seed noise.** A recipe's variance is its own seed variance where it has ≥ 2 seeds and never
less than the pooled within-recipe variance s² (a recipe whose seeds agree by chance does not
shrink the error); a recipe with one seed takes s². Var(effect) = Σ w_k² σ_k² / n_k, with
Welch–Satterthwaite degrees of freedom, never more than the pooled df (every variance term
rests on the same seed residuals). A recipe whose seeds disagree widely (97 / 0 / 8.8 %)
thus widens the interval, and an equivalence test cannot pass through it.

**Calls** (level α; each cohort is one test, no correction across benchmarks):

- *uninformative*: every run scores the same.
- *undetermined*: nothing below was shown; ``reason`` says why (too few prompts, too few seeds,
  no route-matched pair, or low power with the MDE).
- *policy content*: the route-matched contrast differs from 0 at the matched threshold.
- *threshold shift* (matched rows only): it differs at 0.5 but not at the matched threshold.
- *route-sensitive*: the recipes differ beyond seed noise (one-way F test over recipes), but not
  along A/B within a route.
- *capability*: TOST shows the contrast within ±margin (default 5 pp) at level α.

At the ``0.5`` threshold rows the call is the one an analyst who never matched thresholds would
make (no *threshold shift*): the stability table shows where matching changes it.

MDE: the |effect| a two-sided level-α test detects with 80 % power, (t_{1−α/2} + t_{0.8}) · se.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import scipy.stats

from guarddiag import stats
from guarddiag.analyses.loadtest import NO_PROMPTS
from guarddiag.analyses.operating import NEUTRAL_NOTE, run_scores
from guarddiag.analyses.registry import AnalysisContext, AnalysisOmitted, register_analysis
from guarddiag.errors import GuarddiagError
from guarddiag.labels import MAPPINGS, get_mapping
from guarddiag.roles import check_roles

DEFAULT_MARGIN = 0.05
"""Equivalence margin of a *capability* call: the contrast lies within ±5 pp."""
DEFAULT_ALPHA = 0.05
POWER = 0.8
MIN_PROMPTS = 20
"""A cohort scored on fewer prompts than this is undetermined (rates move in 1/n steps)."""

PLACEMENT_DRAWS = 2000
"""Monte-Carlo draws of an outside guard's placement interval (a ratio has no exact one here)."""
CALLS = ("policy content", "threshold shift", "route-sensitive", "capability",
         "undetermined", "uninformative")
DECONTAM = ("full", "exact", "all_kinds")
THRESHOLDS = ("0.5", "matched")
PRIMARY_DECONTAM = "exact"
PRIMARY_THRESHOLD = "matched"
STUDY_A_MINUS_B: Mapping[str, float] = {"harmbench_copyright": 0.99,
                                        "orbench_hard": 0.051 - 0.057}
"""A-last − B-last difference the study reports (SPEC §6): copyright, A-last at 100 and a span
of 0.99 down to the reference; OR-H, A-last 3.4–6.8 % (mid 5.1) against the own student's 5.7."""
STUDY_MIN_DIFF = 0.02
"""Below this |difference| the study saw no direction: "not comparable"."""

_GROUP = ["benchmark", "mapping", "decontam", "threshold"]
TABLE_SCHEMA = {"benchmark": pl.String, "mapping": pl.String, "decontam": pl.String,
                "threshold": pl.String, "call": pl.String, "reason": pl.String,
                "effect": pl.Float64, "effect_low": pl.Float64, "effect_high": pl.Float64,
                "se": pl.Float64, "df": pl.Float64, "p_effect": pl.Float64,
                "p_equivalence": pl.Float64, "p_route": pl.Float64, "mde": pl.Float64,
                "n_prompts": pl.Int64, "n_pairs": pl.Int64, "routes_agree": pl.Boolean}
ROUTE_SCHEMA = {"benchmark": pl.String, "mapping": pl.String, "decontam": pl.String,
                "threshold": pl.String, "route": pl.String, "pairs": pl.String,
                "effect": pl.Float64, "effect_low": pl.Float64, "effect_high": pl.Float64}


@dataclass(frozen=True)
class CallsResult:
    """The calls per (benchmark, mapping, decontam, threshold) and what they rest on."""

    table: pl.DataFrame = field(repr=False)
    """One row per cohort (:data:`TABLE_SCHEMA`)."""
    routes: pl.DataFrame = field(repr=False)
    """Each route's own contrast per cohort (:data:`ROUTE_SCHEMA`)."""
    scores: pl.DataFrame = field(repr=False)
    """Every run's rate at 0.5 and at its matched threshold, with AUROC vs the neutral rows."""
    thresholds: pl.DataFrame = field(repr=False)
    """Per run and mapping: neutral rows, false-flag rate at 0.5, target, matched threshold."""
    placement: pl.DataFrame = field(repr=False)
    """Outside guards on the B-to-A axis, per benchmark with a policy-content call."""
    mapping: str
    """The report's mapping (the headline's cohort)."""
    alpha: float = DEFAULT_ALPHA
    margin: float = DEFAULT_MARGIN
    neutral_rows: str = ""
    """Which rows the thresholds are matched on, and why (for the report)."""
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def primary(self) -> pl.DataFrame:
        """The headline cohort's rows: the report's mapping, exact-decontaminated, matched."""
        return self.table.filter((pl.col("mapping") == self.mapping)
                                 & (pl.col("decontam") == PRIMARY_DECONTAM)
                                 & (pl.col("threshold") == PRIMARY_THRESHOLD))

    def stability(self) -> pl.DataFrame:
        """Per benchmark, the call in every cell (mapping × decontam × threshold), wide."""
        cells = self.table.with_columns(
            (pl.col("mapping") + "/" + pl.col("decontam") + "/" + pl.col("threshold"))
            .alias("cell"))
        return cells.pivot(on="cell", index="benchmark", values="call",
                           sort_columns=True).sort("benchmark")

    def headline(self) -> pl.DataFrame:
        """One row per benchmark: the primary call, whether every cell agrees, the choices that
        flip it, the effect with its interval, and its direction beside the study's."""
        rows = []
        for bench, part in self.table.partition_by("benchmark", as_dict=True,
                                                   maintain_order=True).items():
            name = str(bench[0])
            prim = part.filter((pl.col("mapping") == self.mapping)
                               & (pl.col("decontam") == PRIMARY_DECONTAM)
                               & (pl.col("threshold") == PRIMARY_THRESHOLD))
            if prim.height == 0:
                continue
            p = prim.row(0, named=True)
            rows.append({"benchmark": name, "call": p["call"],
                         "stable": part["call"].n_unique() == 1,
                         "flips": _flips(part, p, self.mapping),
                         "effect": p["effect"], "effect_low": p["effect_low"],
                         "effect_high": p["effect_high"],
                         "study_direction": study_direction(name, p["effect_low"],
                                                            p["effect_high"])})
        return pl.DataFrame(rows, schema={
            "benchmark": pl.String, "call": pl.String, "stable": pl.Boolean,
            "flips": pl.String, "effect": pl.Float64, "effect_low": pl.Float64,
            "effect_high": pl.Float64, "study_direction": pl.String}).sort("benchmark")

    def counts(self) -> dict[str, int]:
        """Primary calls counted per call, in :data:`CALLS` order."""
        calls = self.primary()["call"].to_list()
        return {c: calls.count(c) for c in CALLS if c in calls}


def _flips(part: pl.DataFrame, primary: Mapping[str, Any], mapping: str) -> str:
    """The single choices that change the primary call (``threshold=0.5``, …); a change only
    combinations of choices bring is named ``combined choices``."""
    dims = {"mapping": mapping, "decontam": PRIMARY_DECONTAM, "threshold": PRIMARY_THRESHOLD}
    out: list[str] = []
    for dim in dims:
        others = part.filter(pl.all_horizontal(
            [pl.col(d) == v for d, v in dims.items() if d != dim] + [pl.col(dim) != dims[dim]]))
        out += [f"{dim}={r[dim]}" for r in others.iter_rows(named=True)
                if r["call"] != primary["call"]]
    if not out and part["call"].n_unique() > 1:
        out.append("combined choices")
    return ", ".join(out)


def study_direction(benchmark: str, low: float | None, high: float | None) -> str:
    """same / opposite / not comparable beside the study's A-last − B-last difference; "" where
    the study reports none for ``benchmark``."""
    study = STUDY_A_MINUS_B.get(benchmark)
    if study is None:
        return ""
    if abs(study) < STUDY_MIN_DIFF or low is None or high is None or low <= 0.0 <= high:
        return "not comparable"
    return "same" if (low > 0) == (study > 0) else "opposite"


# -- the contrast ----------------------------------------------------------------------------

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


def _p_two_sided(c: Contrast) -> float:
    if c.se == 0:
        return 0.0 if c.effect != 0 else 1.0
    return float(2 * scipy.stats.t.sf(abs(c.effect) / c.se, c.df))


def _p_equivalence(c: Contrast, margin: float) -> float:
    """TOST: the larger of the two one-sided p-values against ±margin."""
    if c.se == 0:
        return 0.0 if abs(c.effect) < margin else 1.0
    low = scipy.stats.t.sf((c.effect + margin) / c.se, c.df)
    high = scipy.stats.t.cdf((c.effect - margin) / c.se, c.df)
    return float(max(low, high))


def _p_route(recipes: Sequence[Recipe], s2: float, df_pool: int) -> float | None:
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


def cohort_test(rows: pl.DataFrame, *, alpha: float, margin: float) -> dict[str, Any]:
    """Effect, interval, p-values, MDE and the reason a cohort is untested (``reason``)."""
    out: dict[str, Any] = dict.fromkeys(
        ["effect", "effect_low", "effect_high", "se", "df", "p_effect", "p_equivalence",
         "p_route", "mde"])
    out.update(reason=None, n_prompts=int(rows["n"].min()) if rows.height else 0,  # type: ignore[arg-type]
               n_pairs=0, routes_agree=None, routes=[])
    if rows.height and out["n_prompts"] == 0:
        out["reason"] = NO_PROMPTS
        return out
    if rows.height and rows["rate"].n_unique() == 1:
        out["reason"] = "every run scores the same"
        return out
    if out["n_prompts"] < MIN_PROMPTS:
        out["reason"] = f"too few prompts: {out['n_prompts']}, the test needs {MIN_PROMPTS}"
        return out
    pairs, recipes = route_pairs(rows)
    s2, df_pool = pooled_variance(list(recipes.values()))
    out["n_pairs"] = len(pairs)
    if s2 is None:
        out["reason"] = "too few seeds: no recipe has two seeds to measure seed noise"
        return out
    if not pairs:
        out["reason"] = "no route-matched pair: no A-last student has a control or a reference " \
                        "on its route"
        return out
    c = contrast(pairs, recipes, s2, df_pool)
    t_crit = float(scipy.stats.t.ppf(1 - alpha / 2, c.df))
    out.update(effect=c.effect, se=c.se, df=c.df, effect_low=c.effect - t_crit * c.se,
               effect_high=c.effect + t_crit * c.se, p_effect=_p_two_sided(c),
               p_equivalence=_p_equivalence(c, margin),
               p_route=_p_route(list(recipes.values()), s2, df_pool),
               mde=(t_crit + float(scipy.stats.t.ppf(POWER, c.df))) * c.se)
    verdicts, routes = set(), []
    for route in sorted({p.route for p in pairs}):
        rc = contrast([p for p in pairs if p.route == route], recipes, s2, df_pool)
        tc = float(scipy.stats.t.ppf(1 - alpha / 2, rc.df))
        lo, hi = rc.effect - tc * rc.se, rc.effect + tc * rc.se
        verdicts.add("up" if lo > 0 else "down" if hi < 0 else "none")
        names = ", ".join(sorted({f"{p.a.branch}−{'+'.join(r.branch for r in p.b)}"
                                  for p in pairs if p.route == route}))
        routes.append({"route": route, "pairs": names, "effect": rc.effect,
                       "effect_low": lo, "effect_high": hi})
    out["routes_agree"], out["routes"] = len(verdicts) == 1, routes
    return out


def call_of(at: Mapping[str, Any], at_05: Mapping[str, Any] | None, *, alpha: float,
            margin: float) -> tuple[str, str]:
    """(call, reason) of one cohort; ``at_05`` is the same cohort at 0.5 for a matched row
    (None for a 0.5 row, which has no *threshold shift*)."""
    if at["reason"] == "every run scores the same":
        return "uninformative", at["reason"]
    if at["reason"] is not None:
        return "undetermined", at["reason"]
    if at["p_effect"] < alpha:
        return "policy content", ""
    if at_05 is not None and at_05["reason"] is None and at_05["p_effect"] < alpha:
        return "threshold shift", "the contrast at 0.5 vanishes at the matched threshold"
    if at["p_route"] is not None and at["p_route"] < alpha:
        return "route-sensitive", "recipes differ, but not along A/B within a route"
    if at["p_equivalence"] < alpha:
        return "capability", f"contrast within ±{margin * 100:g} pp"
    return "undetermined", (f"low power: MDE {at['mde'] * 100:.1f} pp, equivalence "
                            f"within ±{margin * 100:g} pp not shown")


def compute_calls(predictions: pl.DataFrame, *, pool: pl.DataFrame | None,
                  exact_overlap: pl.DataFrame | None = None, mapping: str = "loose",
                  alpha: float = DEFAULT_ALPHA, margin: float = DEFAULT_MARGIN,
                  confidence: float = 0.95, seed: int = 0) -> CallsResult:
    """The calls of every (benchmark, mapping, decontam, threshold) cohort of ``predictions``
    (branch runs with roles; outside guards are placed, not called)."""
    if pool is None:
        raise GuarddiagError("calls: the pool's val rows are needed to match operating points")
    if not 0.0 < alpha < 1.0:
        raise GuarddiagError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    if not 0.0 < margin < 1.0:
        raise GuarddiagError(f"margin: expected a share in (0, 1), got {margin!r}")
    check_roles(predictions, source="predictions")
    primary = get_mapping(mapping)
    mappings = (primary, *(m for m in MAPPINGS.values() if m.name != primary.name))
    notes = []
    if exact_overlap is None:
        notes.append("no overlap.parquet: the exact level is the audit's decontaminated list")
    scores, thresholds = run_scores(predictions, pool=pool, mappings=mappings,
                                    exact_overlap=exact_overlap)
    branch_rows = scores.filter((pl.col("guard_kind") == "branch")
                                & pl.col("role").is_in(["reference", "student", "control"])
                                & pl.col("variant_of").is_null())
    tests: dict[tuple[str, ...], dict[str, Any]] = {}
    for key, part in branch_rows.partition_by(_GROUP, as_dict=True,
                                              maintain_order=True).items():
        tests[tuple(str(k) for k in key)] = cohort_test(part, alpha=alpha, margin=margin)
    rows, route_rows = [], []
    for key, at in tests.items():
        at_05 = tests.get((*key[:3], "0.5")) if key[3] == "matched" else None
        call, reason = call_of(at, at_05, alpha=alpha, margin=margin)
        cohort = dict(zip(_GROUP, key, strict=True))
        rows.append({**{c: at[c] for c in TABLE_SCHEMA if c in at}, **cohort, "call": call,
                     "reason": reason})
        route_rows += [{**cohort, **r} for r in at["routes"]]
    table = pl.DataFrame(rows, schema=TABLE_SCHEMA).sort(_GROUP)
    result = CallsResult(table=table, routes=pl.DataFrame(route_rows, schema=ROUTE_SCHEMA),
                         scores=scores, thresholds=thresholds.sort(["mapping", "run_id"]),
                         placement=pl.DataFrame(schema=PLACEMENT_SCHEMA), mapping=primary.name,
                         alpha=alpha, margin=margin, neutral_rows=NEUTRAL_NOTE,
                         notes=tuple(notes))
    return _with_placement(result, confidence=confidence, seed=seed)


PLACEMENT_SCHEMA = {"guard": pl.String, "benchmark": pl.String, "score": pl.Float64,
                    "threshold": pl.String, "b_end": pl.Float64, "a_end": pl.Float64,
                    "position": pl.Float64, "position_low": pl.Float64,
                    "position_high": pl.Float64, "n": pl.Int64, "draws": pl.Int64}


def _with_placement(result: CallsResult, *, confidence: float, seed: int) -> CallsResult:
    """Each outside guard's matched-point score at 0 (B-like) … 1 (A-like) on every benchmark
    whose primary call is policy content; interval by drawing both ends from their seed noise
    and the guard's rate from its binomial noise."""
    prim = result.primary().filter(pl.col("call") == "policy content")
    guards = result.scores.filter((pl.col("guard_kind") == "outside")
                                  & (pl.col("mapping") == result.mapping)
                                  & (pl.col("decontam") == PRIMARY_DECONTAM)
                                  & (pl.col("threshold") == PRIMARY_THRESHOLD))
    matched = dict(zip(result.thresholds.filter(pl.col("mapping") == result.mapping)["run_id"],
                       result.thresholds.filter(pl.col("mapping") == result.mapping)["n_neutral"],
                       strict=True))
    rows = []
    for bench in prim["benchmark"].to_list():
        branch = result.scores.filter(
            (pl.col("benchmark") == bench) & (pl.col("mapping") == result.mapping)
            & (pl.col("decontam") == PRIMARY_DECONTAM)
            & (pl.col("threshold") == PRIMARY_THRESHOLD) & (pl.col("guard_kind") == "branch")
            & pl.col("role").is_in(["reference", "student", "control"])
            & pl.col("variant_of").is_null())
        pairs, recipes = route_pairs(branch)
        s2, df_pool = pooled_variance(list(recipes.values()))
        if not pairs or s2 is None:
            continue
        a_end = contrast_side(pairs, recipes, s2, df_pool, side="a")
        b_end = contrast_side(pairs, recipes, s2, df_pool, side="b")
        for g in guards.filter(pl.col("benchmark") == bench).iter_rows(named=True):
            rng = stats.derive_rng(seed, "calls-placement", g["run_id"], bench)
            a = rng.normal(a_end.effect, a_end.se, PLACEMENT_DRAWS)
            b = rng.normal(b_end.effect, b_end.se, PLACEMENT_DRAWS)
            s = g["rate"]
            x = rng.binomial(g["n"], s, PLACEMENT_DRAWS) / g["n"]
            with np.errstate(divide="ignore", invalid="ignore"):
                pos = (x - b) / (a - b)
            tail = (1 - confidence) / 2
            lo, hi = np.quantile(pos, [tail, 1 - tail])
            rows.append({"guard": g["branch"], "benchmark": bench, "score": s,
                         "threshold": "matched" if matched.get(g["run_id"], 0) else "0.5",
                         "b_end": b_end.effect, "a_end": a_end.effect,
                         "position": (s - b_end.effect) / (a_end.effect - b_end.effect)
                         if a_end.effect != b_end.effect else None,
                         "position_low": float(lo), "position_high": float(hi),
                         "n": g["n"], "draws": PLACEMENT_DRAWS})
    placement = pl.DataFrame(rows, schema=PLACEMENT_SCHEMA).sort(["guard", "benchmark"])
    return CallsResult(**{**result.__dict__, "placement": placement})


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


def _calls(ctx: AnalysisContext) -> CallsResult:
    """Route-matched, operating-point-matched calls per benchmark (issue 27)."""
    o, inputs = ctx.options, ctx.inputs
    if inputs.pool is None:
        raise AnalysisOmitted("no pool.parquet: the neutral val rows that match operating "
                              "points come from it")
    if "role" not in inputs.predictions.columns:
        raise AnalysisOmitted("predictions without roles")
    return compute_calls(inputs.predictions, pool=inputs.pool,
                         exact_overlap=inputs.audit_overlap, mapping=o.mapping, alpha=o.alpha,
                         margin=o.equivalence_margin, confidence=o.confidence, seed=o.seed)


CALLS_ANALYSIS = register_analysis("calls", _calls, result=CallsResult)
