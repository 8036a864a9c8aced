"""Calls that name what was shown, per route: the A-last heads flag more or less at the same
false-flag rate, a moved threshold, a route effect, or equivalence.

The load test (:mod:`~guarddiag.analyses.loadtest`) contrasts every A-last branch with every
B-last one at P(unsafe) ≥ the protocol's cut-off. That contrast is as much "head-only vs full
training" as "policy A vs B", and a guard that flags more of everything (a moved threshold)
passes it as well. This analysis separates them, per (benchmark, mapping, decontamination
level, threshold kind).

**Policy-neutral rows.** The pool's val rows whose policy-A and policy-B labels both read safe
under the mapping: both policies agree they should pass, so a run's flag rate on them is its
false-flag rate whatever policy it learnt, and a shift there is a threshold, not policy content.

**Operating-point matching.** Per run, the matched threshold gives it the reference recipe's
false-flag rate at the cut-off on the neutral rows (the mean over the reference runs of the same
size; an outside guard is matched to the mean over sizes), by the logit-centre rule of
:func:`~guarddiag.analyses.operating.matched_threshold`. Every rate is computed at the cut-off and
at the matched threshold; the AUROC against the same neutral rows (threshold-free) sits beside.

**Degenerate runs.** A run whose matched threshold lies within :data:`DEGENERATE_EDGE` of 0 or 1
(its scores saturate: float32 ties decide its rates), or whose capture on the clear-harm
benchmarks at its matched threshold is below the TF-IDF baseline's at the baseline's own (it
detects less than word counts) is degenerate: a pair that uses it is left out of every contrast,
and named; a route left with no pair is *undetermined (degenerate run: …)*.

**Route-matched contrasts** (:mod:`~guarddiag.analyses.contrast`): each A-last student minus
the runs that took its route with policy-B labels. Each route (distillation: E8 − reference;
head-only: E1, E7, E10 − their controls) is tested on its own.

**Calls per route** (level α; each cohort one test, no correction across benchmarks):

- *A flags more* / *A flags less*: the route's contrast differs from 0 at the matched threshold,
  with that sign. *A flags more* on prompts only policy A blocks is the policy content the study
  describes; *A flags less* says the A-last heads rank this benchmark's prompts lower against
  the neutral rows — on prompts both policies call unsafe, a ranking loss, not policy content.
- *threshold shift* (matched rows only): it differs at the cut-off but not at the matched threshold.
- *capability*: TOST shows the contrast within ±margin (default 5 pp) at level α.
- *undetermined*: none of the above; ``reason`` says why (degenerate runs, low power + MDE).

**The benchmark's call** comes from its routes': the common call where every route that
shows something shows the same (``carried_by`` names the routes when some route showed nothing:
"distill only"); *routes disagree* where they differ; where no route shows anything,
*route-sensitive* if the recipes differ beyond seed noise (one-way F test), else *undetermined*;
*uninformative* where every run scores the same. A call is *stable* when the benchmark's call
and every route's call are the same in every cell (mapping × decontamination × threshold).

At the cut-off's threshold rows the call is the one an analyst who never matched thresholds would
make (no *threshold shift*): the stability table shows where matching changes it.

MDE: the |effect| a two-sided level-α test detects with 80 % power, (t_{1−α/2} + t_{0.8}) · se.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import scipy.stats

from guarddiag.analyses.callwords import (
    CALLS,
    DECONTAM,
    DISAGREE,
    LESS,
    MORE,
    PRIMARY_DECONTAM,
    PRIMARY_THRESHOLD,
    ROUTE_CALLS,
    at_cutoff,
)
from guarddiag.analyses.competence import clear_harm_benchmarks
from guarddiag.analyses.contrast import (
    Contrast,
    Pair,
    contrast,
    p_equivalence,
    p_recipes_differ,
    p_two_sided,
    pooled_variance,
    route_pairs,
)
from guarddiag.analyses.loadtest import NO_PROMPTS
from guarddiag.analyses.operating import degenerate_runs, neutral_note, run_scores
from guarddiag.analyses.placement import place_outside_guards
from guarddiag.analyses.registry import AnalysisContext, AnalysisOmitted, register_analysis
from guarddiag.analyses.study_calls import study_rows
from guarddiag.errors import GuarddiagError
from guarddiag.labels import MAPPINGS, get_mapping
from guarddiag.protocol import protocol
from guarddiag.roles import check_roles, is_reference, is_route_cohort

__all__ = ["CALLS", "CALLS_ANALYSIS", "DECONTAM", "DISAGREE", "LESS", "MORE",
           "PRIMARY_DECONTAM", "PRIMARY_THRESHOLD", "ROUTE_CALLS", "CallsResult",
           "RouteTest", "at_cutoff", "benchmark_verdict", "cohort_test", "compute_calls",
           "route_verdict"]

POWER = 0.8
SAME = "every run scores the same"

_GROUP = ["benchmark", "mapping", "decontam", "threshold"]
TABLE_SCHEMA = {"benchmark": pl.String, "mapping": pl.String, "decontam": pl.String,
                "threshold": pl.String, "call": pl.String, "carried_by": pl.String,
                "route_calls": pl.String, "reason": pl.String, "effect": pl.Float64,
                "effect_low": pl.Float64, "effect_high": pl.Float64, "se": pl.Float64,
                "df": pl.Float64, "p_effect": pl.Float64, "p_equivalence": pl.Float64,
                "p_route": pl.Float64, "mde": pl.Float64, "n_prompts": pl.Int64,
                "n_pairs": pl.Int64, "routes_agree": pl.Boolean}
ROUTE_SCHEMA = {"benchmark": pl.String, "mapping": pl.String, "decontam": pl.String,
                "threshold": pl.String, "route": pl.String, "pairs": pl.String,
                "left_out": pl.String, "call": pl.String, "reason": pl.String,
                "effect": pl.Float64, "effect_low": pl.Float64, "effect_high": pl.Float64,
                "p_effect": pl.Float64, "p_equivalence": pl.Float64, "mde": pl.Float64}
HEADLINE_SCHEMA = {"benchmark": pl.String, "call": pl.String, "carried_by": pl.String,
                   "route_calls": pl.String, "stable": pl.Boolean, "flips": pl.String,
                   "effect": pl.Float64, "effect_low": pl.Float64, "effect_high": pl.Float64,
                   "effect_05": pl.Float64, "effect_05_low": pl.Float64,
                   "effect_05_high": pl.Float64, "reason": pl.String}


@dataclass(frozen=True)
class CallsResult:
    """The calls per (benchmark, mapping, decontam, threshold) and what they rest on."""

    table: pl.DataFrame = field(repr=False)
    """One row per cohort (:data:`TABLE_SCHEMA`)."""
    routes: pl.DataFrame = field(repr=False)
    """Each route's own contrast and call per cohort (:data:`ROUTE_SCHEMA`)."""
    scores: pl.DataFrame = field(repr=False)
    """Every run's rate at the cut-off and at its matched threshold, with AUROC vs the neutral
    rows."""
    thresholds: pl.DataFrame = field(repr=False)
    """Per run and mapping: neutral rows, false-flag rate at the cut-off, target, matched threshold,
    and why the run is degenerate ("" when it is not)."""
    placement: pl.DataFrame = field(repr=False)
    """Outside guards on the B-to-A axis (:mod:`~guarddiag.analyses.placement`)."""
    study: pl.DataFrame = field(repr=False)
    """Per benchmark the study reports on: its figures beside this run's, at the cut-off and matched
    (:mod:`~guarddiag.analyses.study_calls`)."""
    mapping: str
    """The report's mapping (the headline's cohort)."""
    alpha: float = field(default_factory=lambda: protocol().alpha)
    margin: float = field(default_factory=lambda: protocol().equivalence_margin)
    neutral_rows: str = ""
    """Which rows the thresholds are matched on, and why (for the report)."""
    clear_harm: tuple[str, ...] = ()
    """The benchmarks whose capture tells a degenerate run and gates a placement."""
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def _cohort(self, frame: pl.DataFrame, threshold: str = PRIMARY_THRESHOLD) -> pl.DataFrame:
        return frame.filter((pl.col("mapping") == self.mapping)
                            & (pl.col("decontam") == PRIMARY_DECONTAM)
                            & (pl.col("threshold") == threshold))

    def primary(self) -> pl.DataFrame:
        """The headline cohort's rows: the report's mapping, exact-decontaminated, matched."""
        return self._cohort(self.table)

    def primary_routes(self) -> pl.DataFrame:
        """Each route's row at the headline cohort."""
        return self._cohort(self.routes)

    def reference_thresholds(self) -> pl.DataFrame:
        """The threshold rows of the reference recipe's runs under the report's mapping (where
        the operating point is set and what it flags)."""
        runs = self.scores.filter(is_reference())["run_id"].unique()
        return self.thresholds.filter((pl.col("mapping") == self.mapping)
                                      & pl.col("run_id").is_in(runs.implode()))

    def degenerate(self) -> pl.DataFrame:
        """The runs whose operating point is degenerate under the report's mapping."""
        return self.thresholds.filter((pl.col("mapping") == self.mapping)
                                      & (pl.col("degenerate") != ""))

    def stability(self) -> pl.DataFrame:
        """Per benchmark, the call in every cell (mapping × decontam × threshold), wide."""
        cells = self.table.with_columns(
            (pl.col("mapping") + "/" + pl.col("decontam") + "/" + pl.col("threshold"))
            .alias("cell"))
        return cells.pivot(on="cell", index="benchmark", values="call",
                           sort_columns=True).sort("benchmark")

    def headline(self) -> pl.DataFrame:
        """One row per benchmark: the primary call, the routes that carry it and each route's
        call, whether every cell agrees for the benchmark and each route, the choices that flip
        it, and the effect at the matched threshold and at the cut-off (the same routes'
        contrast)."""
        rows = []
        at_05 = {r["benchmark"]: r
                 for r in self._cohort(self.table, at_cutoff()).iter_rows(named=True)}
        for bench, part in self.table.partition_by("benchmark", as_dict=True,
                                                   maintain_order=True).items():
            name = str(bench[0])
            prim = self._cohort(part)
            if prim.height == 0:
                continue
            p = prim.row(0, named=True)
            mine = self.routes.filter(pl.col("benchmark") == name)
            stable = part["call"].n_unique() == 1 and all(
                g["call"].n_unique() == 1 for g in mine.partition_by("route"))
            raw = at_05.get(name, {})
            rows.append({"benchmark": name, "call": p["call"], "carried_by": p["carried_by"],
                         "route_calls": p["route_calls"], "stable": stable,
                         "flips": _flips(part, p, self.mapping),
                         "effect": p["effect"], "effect_low": p["effect_low"],
                         "effect_high": p["effect_high"], "effect_05": raw.get("effect"),
                         "effect_05_low": raw.get("effect_low"),
                         "effect_05_high": raw.get("effect_high"), "reason": p["reason"]})
        return pl.DataFrame(rows, schema=HEADLINE_SCHEMA).sort("benchmark")

    def groups(self, *, subset: str, mapping: str) -> dict[str, str]:
        """Benchmark → ``policy`` (an A/B call, by any route) or ``capability`` (capability on
        every route) at a table's cohort (``subset`` full or decontaminated, ``mapping``) and
        the matched threshold: the sets the correlations and the study's CAP group read, from
        the calls, never from the span test."""
        level = "full" if subset == "full" else PRIMARY_DECONTAM
        cells = self.table.filter((pl.col("mapping") == mapping) & (pl.col("decontam") == level)
                                  & (pl.col("threshold") == PRIMARY_THRESHOLD))
        out = {}
        for r in cells.iter_rows(named=True):
            if r["call"] in (MORE, LESS):
                out[r["benchmark"]] = "policy"
            elif r["call"] == "capability" and not r["carried_by"]:
                out[r["benchmark"]] = "capability"
        return out

    def counts(self) -> dict[str, int]:
        """Primary calls counted per call, in :data:`CALLS` order."""
        calls = self.primary()["call"].to_list()
        return {c: calls.count(c) for c in CALLS if c in calls}


def _flips(part: pl.DataFrame, primary: Mapping[str, Any], mapping: str) -> str:
    """The single choices that change the primary call (the cut-off's threshold, …); a change only
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


# -- one cohort ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RouteTest:
    """One route's contrast in one cohort (``contrast`` None when no usable pair is left)."""

    route: str
    pairs: tuple[Pair, ...]
    usable: tuple[Pair, ...]
    """The pairs none of whose runs is degenerate: the contrast's."""
    left_out: tuple[str, ...]
    """Pairs left out, each with the degenerate run that put it out."""
    contrast: Contrast | None


def _pair_name(pair: Pair) -> str:
    return f"{pair.a.branch}−{'+'.join(r.branch for r in pair.b)}"


def _degenerate_in(pair: Pair, runs: Mapping[tuple[str, str], list[str]],
                   degenerate: Mapping[str, str]) -> str:
    """Why ``pair`` is left out ("" when none of its runs is degenerate)."""
    bad = [f"{rid}: {degenerate[rid]}" for r in (pair.a, *pair.b)
           for rid in runs.get((r.size, r.branch), []) if rid in degenerate]
    return "; ".join(bad)


def cohort_test(rows: pl.DataFrame, *, degenerate: Mapping[str, str] | None = None
                ) -> dict[str, Any]:
    """The cohort's pairs, recipes and seed variance, each route's usable pairs (degenerate runs
    left out), and the reason a cohort is untested (``reason``)."""
    out: dict[str, Any] = {"reason": None, "routes": [], "p_route": None, "n_pairs": 0,
                           "n_prompts": int(rows["n"].min()) if rows.height else 0}  # type: ignore[arg-type]
    if rows.height and out["n_prompts"] == 0:
        out["reason"] = NO_PROMPTS
        return out
    if rows.height and rows["rate"].n_unique() == 1:
        out["reason"] = (f"{SAME}: {100 * float(rows['rate'][0]):.1f} % flagged by every run "
                         "at this cohort's threshold")
        return out
    # fewer prompts than the protocol's floor: rates move in 1/n steps
    if out["n_prompts"] < (need := protocol().min_prompts):
        out["reason"] = f"too few prompts: {out['n_prompts']}, the test needs {need}"
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
    runs: dict[tuple[str, str], list[str]] = {}
    for r in rows.select("size", "branch", "run_id").iter_rows():
        runs.setdefault((str(r[0]), str(r[1])), []).append(str(r[2]))
    out.update(recipes=recipes, s2=s2, df_pool=df_pool,
               p_route=p_recipes_differ(list(recipes.values()), s2, df_pool))
    for route in sorted({p.route for p in pairs}):
        mine = [p for p in pairs if p.route == route]
        why = {_pair_name(p): _degenerate_in(p, runs, degenerate or {}) for p in mine}
        usable = tuple(p for p in mine if not why[_pair_name(p)])
        out["routes"].append(RouteTest(
            route, tuple(mine), usable, tuple(f"{n} ({w})" for n, w in why.items() if w),
            contrast(usable, recipes, s2, df_pool) if usable else None))
    return out


def route_verdict(test: RouteTest, at_05: RouteTest | None, *, alpha: float, margin: float
                  ) -> dict[str, Any]:
    """One route's row: its contrast's interval, p-values, MDE and call (with the reason)."""
    out: dict[str, Any] = {"route": test.route, "pairs": ", ".join(map(_pair_name, test.pairs)),
                           "left_out": "; ".join(test.left_out), "effect": None,
                           "effect_low": None, "effect_high": None, "p_effect": None,
                           "p_equivalence": None, "mde": None}
    c = test.contrast
    if c is None:
        return {**out, "call": "undetermined",
                "reason": "degenerate run: " + "; ".join(test.left_out)}
    t_crit = float(scipy.stats.t.ppf(1 - alpha / 2, c.df))
    out.update(effect=c.effect, effect_low=c.effect - t_crit * c.se,
               effect_high=c.effect + t_crit * c.se, p_effect=p_two_sided(c),
               p_equivalence=p_equivalence(c, margin),
               mde=(t_crit + float(scipy.stats.t.ppf(POWER, c.df))) * c.se)
    if out["p_effect"] < alpha:
        return {**out, "call": MORE if c.effect > 0 else LESS, "reason": ""}
    if at_05 is not None and at_05.contrast is not None and p_two_sided(at_05.contrast) < alpha:
        return {**out, "call": "threshold shift",
                "reason": f"the contrast at {at_cutoff()} vanishes at the matched threshold"}
    if out["p_equivalence"] < alpha:
        return {**out, "call": "capability", "reason": f"contrast within ±{margin * 100:g} pp"}
    return {**out, "call": "undetermined",
            "reason": f"low power: MDE {out['mde'] * 100:.1f} pp, equivalence within "
                      f"±{margin * 100:g} pp not shown"}


def benchmark_verdict(at: Mapping[str, Any], routes: Sequence[Mapping[str, Any]], *,
                      alpha: float) -> tuple[str, str, str]:
    """(call, carried_by, reason) of the benchmark from its routes' calls (module docstring)."""
    if str(at["reason"]).startswith(SAME):
        return "uninformative", "", at["reason"]
    if at["reason"] is not None:
        return "undetermined", "", at["reason"]
    shown = {r["route"]: r["call"] for r in routes if r["call"] != "undetermined"}
    if not shown:
        if at["p_route"] is not None and at["p_route"] < alpha:
            return ("route-sensitive", "",
                    "recipes differ beyond seed noise, but no route shows an A/B contrast")
        return "undetermined", "", "; ".join(f"{r['route']}: {r['reason']}" for r in routes)
    if len(set(shown.values())) > 1:
        return DISAGREE, "", "; ".join(f"{r}: {c}" for r, c in shown.items())
    call = next(iter(shown.values()))
    carried = "" if len(shown) == len(routes) else ", ".join(shown)
    reason = "; ".join(f"{r['route']}: {r['reason']}" for r in routes
                       if r["route"] not in shown)
    return call, carried, reason


def _benchmark_row(at: Mapping[str, Any], routes: Sequence[Mapping[str, Any]], *,
                   alpha: float, margin: float) -> dict[str, Any]:
    """The benchmark's call and the contrast of the routes that carry it (of every route's
    usable pairs where the call is carried by all, or by none)."""
    call, carried, reason = benchmark_verdict(at, routes, alpha=alpha)
    tests: Sequence[RouteTest] = at["routes"]
    usable = [p for t in tests if not carried or t.route in carried.split(", ")
              for p in t.usable]
    row: dict[str, Any] = {"call": call, "carried_by": carried, "reason": reason,
                           "route_calls": "; ".join(f"{r['route']}: {r['call']}"
                                                    for r in routes),
                           "n_prompts": at["n_prompts"], "n_pairs": at["n_pairs"],
                           "p_route": at["p_route"],
                           "routes_agree": len({r["call"] for r in routes}) == 1 if routes
                           else None}
    if usable:
        c = contrast(usable, at["recipes"], at["s2"], at["df_pool"])
        t_crit = float(scipy.stats.t.ppf(1 - alpha / 2, c.df))
        row.update(effect=c.effect, se=c.se, df=c.df, effect_low=c.effect - t_crit * c.se,
                   effect_high=c.effect + t_crit * c.se, p_effect=p_two_sided(c),
                   p_equivalence=p_equivalence(c, margin),
                   mde=(t_crit + float(scipy.stats.t.ppf(POWER, c.df))) * c.se)
    return row


def compute_calls(predictions: pl.DataFrame, *, pool: pl.DataFrame | None,
                  exact_overlap: pl.DataFrame | None = None, mapping: str = "loose",
                  alpha: float | None = None, margin: float | None = None,
                  confidence: float = 0.95, seed: int = 0,
                  clear_harm: Sequence[str] | None = None) -> CallsResult:
    """The calls of every (benchmark, mapping, decontam, threshold) cohort of ``predictions``
    (branch runs with roles; outside guards are placed, not called). ``clear_harm``: the
    benchmarks that tell a degenerate run and gate a placement (default the study's,
    :func:`~guarddiag.analyses.competence.clear_harm_benchmarks`). ``alpha`` and ``margin``
    None: the protocol's α and equivalence margin."""
    alpha = protocol().alpha if alpha is None else alpha
    margin = protocol().equivalence_margin if margin is None else margin
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
    harm = tuple(clear_harm) if clear_harm is not None else clear_harm_benchmarks()
    thresholds = degenerate_runs(scores, thresholds, predictions=predictions, clear_harm=harm)
    degenerate = {m: dict(thresholds.filter((pl.col("mapping") == m)
                                            & (pl.col("degenerate") != ""))
                          .select("run_id", "degenerate").iter_rows())
                  for m in thresholds["mapping"].unique().to_list()}
    branch_rows = scores.filter(is_route_cohort())
    tests: dict[tuple[str, ...], dict[str, Any]] = {}
    for key, part in branch_rows.partition_by(_GROUP, as_dict=True,
                                              maintain_order=True).items():
        k = tuple(str(v) for v in key)
        tests[k] = cohort_test(part, degenerate=degenerate.get(k[1], {}))
    rows, route_rows = [], []
    for key, at in tests.items():
        at_05 = tests.get((*key[:3], at_cutoff())) if key[3] == PRIMARY_THRESHOLD else None
        by_route = {t.route: t for t in (at_05 or {}).get("routes", [])}
        verdicts = [route_verdict(t, by_route.get(t.route), alpha=alpha, margin=margin)
                    for t in at["routes"]]
        cohort = dict(zip(_GROUP, key, strict=True))
        rows.append({**cohort, **_benchmark_row(at, verdicts, alpha=alpha, margin=margin)})
        route_rows += [{**cohort, **v} for v in verdicts]
    table = pl.DataFrame(rows, schema=TABLE_SCHEMA).sort(_GROUP)
    result = CallsResult(table=table, routes=pl.DataFrame(route_rows, schema=ROUTE_SCHEMA)
                         .sort([*_GROUP, "route"]), scores=scores,
                         thresholds=thresholds.sort(["mapping", "run_id"]),
                         placement=pl.DataFrame(), study=pl.DataFrame(),
                         mapping=primary.name, alpha=alpha, margin=margin,
                         neutral_rows=neutral_note(), clear_harm=harm, notes=tuple(notes))
    placement = place_outside_guards(headline=result.headline(), scores=scores,
                                     thresholds=result.thresholds, mapping=primary.name,
                                     clear_harm=harm, confidence=confidence, seed=seed)
    return CallsResult(**{**result.__dict__, "placement": placement,
                          "study": study_rows(result.headline(), margin=margin)})


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
