"""Simulations of the calls (:mod:`~guarddiag.analyses.calls`) through the report's own code.

Each draw builds a predictions table at the demo's layout — the bundled branch specs and their
roles, one size, every student, control and the reference at the demo's three seeds — from
per-prompt logits, and runs :func:`~guarddiag.analyses.calls.compute_calls` on it, the function
the report step calls. Per run: logit = prompt base + run offset N(0, 0.25²)
+ prompt noise N(0, 0.6²) (seed-like noise: a retrained run moves its threshold a little and
its prompts a little). P(unsafe) = sigmoid(logit), all of it HARMFUL.

Scenarios (issue 27):

(i) ``noise``: pure seed noise, every recipe alike.
(ii) ``threshold``: the A-last runs get a constant logit shift on every prompt, the neutral val
     rows included (a moved threshold, no policy content).
(iii) ``route``: every head-only run is shifted, whatever its policy (a route effect).
(iv) ``content``: A-last logits raised only on the prompts of one policy-A-only category of
     one benchmark (``mixed``), sized to move that benchmark's rate about 10 pp.
(v) ``degenerate``: every control is a control that never saw an unsafe label (issue 48): its
    logits squeezed to a third and lowered by 7, so it flags almost nothing and ranks poorly.
(vi) ``ranking``: the A-last head-only runs rank worse without any content: extra prompt noise
     N(0, 1.5²) on every prompt, the neutral rows included.

The A/B calls carry the sign ("A flags more" / "A flags less"): the share of "A flags more"
where no content was planted is the false policy-content rate.

``guarddiag bench calls`` prints the share of each call per scenario over the draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.stats

from guarddiag import stats
from guarddiag.analyses.calls import CALLS, MORE, at_cutoff, compute_calls
from guarddiag.predictions import COLUMNS, SCHEMA
from guarddiag.roles import ROLE_COLUMNS
from guarddiag.train.branches import load_branches

SCENARIOS = ("noise", "threshold", "route", "content", "degenerate", "ranking")
SEEDS = (42, 43, 44)
"""The demo's seeds: it trains every branch and control at all three (``demo.FLOOR_SEEDS``)."""
SHIFT = 1.2
"""Logit shift of scenarios (ii) and (iii): raw flag rates move 10–30 pp on most benchmarks."""
CONTENT_SHIFT = 1.7
"""Logit rise of scenario (iv) on the A-only category: about 10 pp on its benchmark (the
issue's size for "capability ≤ 5 %" and "policy content ≥ 80 %")."""
RUN_SD, PROMPT_SD = 0.25, 0.6
RANKING_SD = 1.5
"""Extra prompt noise of scenario (vi): the A-last head-only runs' AUROC falls by about 0.1."""
PLANTED = "mixed"
BENCHMARKS = {  # name: (n prompts, mean base logit, sd, share in the A-only category)
    "harmful": (200, 2.0, 1.5, 0.0),
    "a_only": (100, -1.5, 1.0, 0.0),
    "benign": (300, -3.0, 1.5, 0.0),
    PLANTED: (200, -0.5, 2.0, 0.3),
}
N_NEUTRAL = 400


@dataclass(frozen=True)
class Layout:
    """The simulated runs: (branch, seed, roles) and the prompts' base logits."""

    runs: tuple[tuple[str, int, dict[str, str | None]], ...]
    base: dict[str, np.ndarray]
    category: dict[str, np.ndarray]


def demo_layout(rng: np.random.Generator) -> Layout:
    specs = load_branches()
    runs = []
    for name in specs.names():
        spec = specs[name]
        if spec.role == "teacher" or spec.variant_of is not None:
            continue
        roles = spec.roles().model_dump()
        for seed in SEEDS:
            runs.append((name, seed, roles))
    base, category = {}, {}
    for b, (n, mu, sd, share) in BENCHMARKS.items():
        base[b] = rng.normal(mu, sd, n)
        category[b] = np.arange(n) < round(share * n)
    base["pool_val"] = rng.normal(-3.0, 1.5, N_NEUTRAL)
    category["pool_val"] = np.zeros(N_NEUTRAL, dtype=bool)
    return Layout(tuple(runs), base, category)


def _shift(scenario: str, roles: dict[str, str | None], bench: str, category: np.ndarray
           ) -> np.ndarray | float:
    a_last = roles["role"] == "student" and roles["last_policy"] == "A"
    if scenario == "threshold" and a_last:
        return SHIFT
    if scenario == "route" and roles["route"] == "head_only":
        return SHIFT
    if scenario == "content" and a_last and bench == PLANTED:
        return np.where(category, CONTENT_SHIFT, 0.0)
    return 0.0


def simulate_predictions(layout: Layout, scenario: str, rng: np.random.Generator
                         ) -> pl.DataFrame:
    """One draw's predictions table (every column of :data:`guarddiag.predictions.SCHEMA`)."""
    cols: dict[str, list[object]] = {c: [] for c in COLUMNS}
    for branch, seed, roles in layout.runs:
        offset = rng.normal(0.0, RUN_SD)
        for bench, base in layout.base.items():
            n = base.size
            logit = base + offset + rng.normal(0.0, PROMPT_SD, n) + _shift(
                scenario, roles, bench, layout.category[bench])
            if scenario == "degenerate" and roles["role"] == "control":
                logit = logit / 3.0 - 7.0
            if (scenario == "ranking" and roles["route"] == "head_only"
                    and roles["role"] == "student" and roles["last_policy"] == "A"):
                logit = logit + rng.normal(0.0, RANKING_SD, n)
            p = 1.0 / (1.0 + np.exp(-logit))
            ids = [f"{bench}-{i}" for i in range(n)] if bench != "pool_val" else \
                [f"pv-{i}" for i in range(n)]
            fixed = {"run_id": f"micro/{branch}/seed={seed}", "guard_kind": "branch",
                     "branch": branch, "size": "micro", "seed": seed, "label_policy": "B",
                     **{c: roles[c] for c in ROLE_COLUMNS}, "benchmark": bench,
                     "p_BOUNDARY_SAFE": 0.0, "p_COMPOUND": 0.0, "survives_decontam": True,
                     "status": "ok"}
            for c, v in fixed.items():
                cols[c].extend([v] * n)
            cols["prompt_id"].extend(ids)
            cols["p_HARMFUL"].extend(p.tolist())
            cols["p_unsafe"].extend(p.tolist())
            cols["p_GENERIC_SAFE"].extend((1.0 - p).tolist())
            cols["pred_class"].extend(np.where(p >= 0.5, "HARMFUL", "GENERIC_SAFE").tolist())
    return pl.DataFrame(cols, schema=SCHEMA)


def simulation_pool(layout: Layout) -> pl.DataFrame:
    n = layout.base["pool_val"].size
    return pl.DataFrame({"prompt_id": [f"pv-{i}" for i in range(n)], "split": ["val"] * n,
                         "label_a": ["GENERIC_SAFE"] * n, "label_b": ["GENERIC_SAFE"] * n})


def exact_overlap(layout: Layout) -> pl.DataFrame:
    """Every tenth prompt of each benchmark overlaps the pool exactly."""
    rows = [(b, f"{b}-{i}") for b, base in layout.base.items() if b != "pool_val"
            for i in range(0, base.size, 10)]
    return pl.DataFrame(rows, schema={"benchmark": pl.String, "prompt_id": pl.String},
                        orient="row").with_columns(pl.lit("x").alias("pool_id"))


def _interval(k: int, n: int) -> dict[str, float | None]:
    """95 % Clopper-Pearson interval of k of n (a draw's cohorts share its runs, so the
    interval is somewhat narrower than the true Monte-Carlo error)."""
    if n == 0:
        return {"policy_low": None, "policy_high": None}
    ci = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return {"policy_low": float(ci.low), "policy_high": float(ci.high)}


@dataclass(frozen=True)
class SimulationResult:
    """Per scenario, the share of each primary call over the draws."""

    table: pl.DataFrame
    """scenario, benchmarks (which cohorts are counted), draws, cohorts, one column per call,
    raw_shift (mean A-last − B-last rate at 0.5 on the counted benchmarks, the size of the
    planted move), policy_low/policy_high (95 % interval of the "A flags more" share)."""
    seed: int

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()


def run_simulation(*, draws: int = 200, seed: int = 0,
                   scenarios: Sequence[str] = SCENARIOS) -> SimulationResult:
    """Draw ``draws`` predictions tables per scenario and tally the calls of the report's
    primary cohort (loose mapping, exact-decontaminated, matched threshold). Scenario (iv)
    counts the planted benchmark only; the others count every benchmark."""
    layout = demo_layout(stats.derive_rng(seed, "calls-sim-layout"))
    pool, overlap = simulation_pool(layout), exact_overlap(layout)
    rows = []
    for scenario in scenarios:
        rng = stats.derive_rng(seed, "calls-sim", scenario)
        counts = dict.fromkeys(CALLS, 0)
        shifts: list[float] = []
        cohorts = 0
        for _ in range(draws):
            preds = simulate_predictions(layout, scenario, rng)
            result = compute_calls(preds, pool=pool, exact_overlap=overlap, seed=seed)
            prim = result.primary()
            if scenario == "content":
                prim = prim.filter(pl.col("benchmark") == PLANTED)
            for call in prim["call"].to_list():
                counts[call] += 1
            cohorts += prim.height
            raw = result.table.filter(
                (pl.col("mapping") == "loose") & (pl.col("decontam") == "exact")
                & (pl.col("threshold") == at_cutoff()) & pl.col("benchmark").is_in(
                    prim["benchmark"].to_list()))
            shifts += [float(v) for v in raw["effect"].drop_nulls().to_list()]
        rows.append({"scenario": scenario,
                     "benchmarks": PLANTED if scenario == "content" else "all",
                     "draws": draws, "cohorts": cohorts,
                     **{c: counts[c] / cohorts if cohorts else None for c in CALLS},
                     "raw_shift": float(np.mean(shifts)) if shifts else None,
                     **_interval(counts[MORE], cohorts)})
    schema = {"scenario": pl.String, "benchmarks": pl.String, "draws": pl.Int64,
              "cohorts": pl.Int64, **dict.fromkeys(CALLS, pl.Float64),
              "raw_shift": pl.Float64, "policy_low": pl.Float64, "policy_high": pl.Float64}
    return SimulationResult(pl.DataFrame(rows, schema=schema), seed)
