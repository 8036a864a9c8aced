"""The route-matched, operating-point-matched calls (issue 27): each rule against hand
arithmetic, scipy or sklearn, and the simulated scenarios through the report's own function."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import scipy.stats
from sklearn.metrics import average_precision_score, roc_auc_score

from guarddiag import stats
from guarddiag.analyses import calls, operating
from guarddiag.analyses import calls_sim as sim
from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE, STRICT

# -- operating points ------------------------------------------------------------------------


def test_matched_threshold_is_the_logit_centre_of_the_rows_to_flag():
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
    t = operating.matched_threshold
    # 3 of 10: the centre (on the logit scale) of (0.8, 0.9], odds √(4 · 9) = 6, p = 6/7
    assert t(x, 0.3) == pytest.approx(6 / 7)
    # 6 of 10: centre of (0.4, 0.6], odds √(2/3 · 3/2) = 1: 0.5
    assert t(x, 0.6) == pytest.approx(0.5)
    # 3.5 of 10: halfway (log odds) between the centres for 3 and for 4 rows
    lo4 = 0.5 * (np.log(4.0) + np.log(7 / 3))
    assert t(x, 0.35) == pytest.approx(1 / (1 + np.exp(-(np.log(6.0) + lo4) / 2)))
    # none and all: half a neighbouring gap beyond the highest and the lowest score
    top = np.log(99.0) + (np.log(99.0) - np.log(19.0)) / 2
    assert t(x, 0.0) == pytest.approx(1 / (1 + np.exp(-top)))
    assert t(x, 1.0) == pytest.approx(1 / (1 + np.exp(-(np.log(1 / 9) - (np.log(1 / 4)
                                                                         - np.log(1 / 9)) / 2))))
    for target in (0.0, 0.1, 0.25, 0.3, 0.37, 0.6, 0.81, 1.0):   # within one row of the target
        rate = np.mean(x >= t(x, target))
        assert np.floor(target * 10) / 10 - 1e-12 <= rate <= np.ceil(target * 10) / 10 + 1e-12
    # ties are flagged together: 3 of 10 cannot be had, 0.5 flags the four tied rows
    assert t(np.array([0.5] * 4 + [0.1] * 6), 0.3) == pytest.approx(0.5)
    with pytest.raises(GuarddiagError, match="no neutral rows"):
        t(np.array([]), 0.1)


def test_matched_threshold_moves_with_a_constant_logit_shift():
    # the old rule (nearest 0.5) kept 0.5 for some runs and an interval's low end for others;
    # on the logit scale this one moves exactly with the run, whatever the target
    rng = np.random.default_rng(3)
    z = rng.normal(-3.0, 1.5, 400)
    for target in (0.0, 0.013, 0.033, 0.2, 1.0):
        for shift in (-0.7, 0.4, 1.2):
            a = operating.matched_threshold(1 / (1 + np.exp(-z)), target)
            b = operating.matched_threshold(1 / (1 + np.exp(-(z + shift))), target)
            assert np.log(b / (1 - b)) == pytest.approx(np.log(a / (1 - a)) + shift, abs=1e-9)


def test_auroc_against_neutral_rows_equals_sklearn_with_ties():
    rng = np.random.default_rng(3)
    neutral = np.round(rng.random(57), 1)
    bench = np.round(rng.random(41) * 0.8 + 0.2, 1)
    expected = roc_auc_score(np.r_[np.zeros(57), np.ones(41)], np.r_[neutral, bench])
    assert operating.auroc_against(np.sort(neutral), bench) == pytest.approx(expected, abs=1e-12)


def test_auprc_against_neutral_rows_equals_sklearn_with_ties():
    rng = np.random.default_rng(4)
    for n_neg, n_pos, digits in ((57, 41, 1), (200, 30, 3), (5, 90, 2)):
        neutral = np.round(rng.random(n_neg), digits)
        bench = np.round(rng.random(n_pos) * 0.7 + 0.3, digits)
        expected = average_precision_score(np.r_[np.zeros(n_neg), np.ones(n_pos)],
                                           np.r_[neutral, bench])
        got = operating.auprc_against(np.sort(neutral), bench)
        assert got == pytest.approx(expected, abs=1e-12)


def test_neutral_rows_are_val_rows_both_policies_label_safe_under_the_mapping():
    pool = pl.DataFrame({
        "prompt_id": ["a", "b", "c", "d", "e"],
        "split": ["val", "val", "val", "val", "train"],
        "label_a": ["GENERIC_SAFE", "HARMFUL", "BOUNDARY_SAFE", "GENERIC_SAFE", "GENERIC_SAFE"],
        "label_b": ["GENERIC_SAFE", "BOUNDARY_SAFE", "GENERIC_SAFE", "BOUNDARY_SAFE",
                    "GENERIC_SAFE"]})
    assert operating.neutral_ids(pool, LOOSE) == ["a", "c", "d"]
    assert operating.neutral_ids(pool, STRICT) == ["a"]   # BOUNDARY_SAFE reads unsafe


# -- the contrast ----------------------------------------------------------------------------

def _rows(recipes: dict[str, list[float]], n: int = 100) -> pl.DataFrame:
    """Score rows of one cohort: one per (branch, seed), roles from the bundled specs."""
    specs = sim.load_branches()
    out = []
    for branch, rates in recipes.items():
        roles = specs[branch].roles().model_dump()
        for i, r in enumerate(rates):
            out.append({"size": "micro", "branch": branch, "seed": 42 + i, "rate": r, "n": n,
                        **{k: roles[k] for k in ("role", "route", "last_policy",
                                                 "control_of", "variant_of")}})
    return pl.DataFrame(out)


def test_pairs_come_from_roles_controls_first_then_the_reference_on_its_route():
    rows = _rows({"reference": [0.1], "E1": [0.2], "E1-ctrl": [0.3], "E7": [0.2],
                  "E8": [0.4], "E2": [0.1]})
    pairs, _ = calls.route_pairs(rows)
    got = {p.a.branch: [r.branch for r in p.b] for p in pairs}
    # E7 has no control in the cohort and its route is not the reference's: unpaired
    assert got == {"E1": ["E1-ctrl"], "E8": ["reference"]}


def test_contrast_standard_error_and_welch_df_by_hand():
    rows = _rows({"reference": [0.2, 0.3, 0.4], "E1": [0.6, 0.9, 0.3], "E1-ctrl": [0.25]})
    pairs, recipes = calls.route_pairs(rows)
    s2, df_pool = calls.pooled_variance(list(recipes.values()))
    assert (s2, df_pool) == (pytest.approx((0.02 + 0.18) / 4), 4)
    c = calls.contrast(pairs, recipes, s2, df_pool)
    # E1's own variance 0.09 > s² = 0.05: its term is 0.09/3 on 2 df; the control takes s²/1
    a1, a2 = 0.09 / 3, 0.05 / 1
    assert c.effect == pytest.approx(0.6 - 0.25)
    assert c.se == pytest.approx(np.sqrt(a1 + a2))
    # Satterthwaite gives 5.95 df, but both terms rest on the 4 pooled seed residuals: capped
    assert (a1 + a2) ** 2 / (a1 ** 2 / 2 + a2 ** 2 / 4) == pytest.approx(5.953, abs=1e-3)
    assert c.df == 4
    out = calls.cohort_test(rows, alpha=0.05, margin=0.05)
    t = 0.35 / np.sqrt(a1 + a2)
    assert out["p_effect"] == pytest.approx(2 * scipy.stats.t.sf(t, c.df))
    mde = (scipy.stats.t.ppf(0.975, c.df) + scipy.stats.t.ppf(0.8, c.df)) * c.se
    assert out["mde"] == pytest.approx(mde)


def test_equivalence_is_tost_against_the_margin():
    c = calls.Contrast(effect=0.01, se=0.015, df=10.0)
    lo = scipy.stats.t.sf((0.01 + 0.05) / 0.015, 10)
    hi = scipy.stats.t.cdf((0.01 - 0.05) / 0.015, 10)
    assert calls._p_equivalence(c, 0.05) == pytest.approx(max(lo, hi))


_FLAT = {"E2": [0.05], "E3": [0.05], "E4": [0.05], "E5": [0.05], "E6": [0.05], "E9": [0.05],
         "E7": [0.05], "E7-ctrl": [0.05], "E8": [0.05], "E10": [0.05, 0.05, 0.06],
         "E10-ctrl": [0.05], "E1-ctrl": [0.05], "reference": [0.04, 0.05, 0.06]}


def test_a_recipe_whose_seeds_disagree_widely_cannot_back_capability():
    # sorrybench__morse in the demo: E1's seeds at 97 %, 0 % and 8.8 %
    wide = calls.cohort_test(_rows({**_FLAT, "E1": [0.97, 0.0, 0.088]}),
                             alpha=0.05, margin=0.05)
    call, reason = calls.call_of(wide, None, alpha=0.05, margin=0.05)
    assert call == "undetermined"
    assert reason.startswith("low power")
    assert wide["p_equivalence"] > 0.05
    assert wide["mde"] > 0.3
    # the same layout with E1's seeds agreeing is shown equivalent
    tight = calls.cohort_test(_rows({**_FLAT, "E1": [0.05, 0.06, 0.04]}),
                              alpha=0.05, margin=0.05)
    assert calls.call_of(tight, None, alpha=0.05, margin=0.05)[0] == "capability"


def test_call_rules_in_order():
    base = {"reason": None, "p_effect": 0.5, "p_route": 0.5, "p_equivalence": 0.5, "mde": 0.1}
    def call(at, at05=None):
        return calls.call_of({**base, **at}, at05, alpha=0.05, margin=0.05)[0]
    assert call({"reason": "every run scores the same"}) == "uninformative"
    assert call({"reason": "too few prompts: 3"}) == "undetermined"
    assert call({"p_effect": 0.01}) == "policy content"
    assert call({}, {**base, "p_effect": 0.01}) == "threshold shift"
    assert call({}, None) == "undetermined"          # a 0.5 row has no threshold shift
    assert call({"p_route": 0.01}) == "route-sensitive"
    assert call({"p_equivalence": 0.01}) == "capability"


# -- the headline ----------------------------------------------------------------------------

def _result(cells: dict[tuple[str, str, str], str], effect=(0.2, 0.1, 0.3)) -> calls.CallsResult:
    rows = [{"benchmark": "harmbench_copyright", "mapping": m, "decontam": d, "threshold": t,
             "call": c, "effect": effect[0], "effect_low": effect[1], "effect_high": effect[2]}
            for (m, d, t), c in cells.items()]
    table = pl.DataFrame(rows).with_columns(
        *(pl.lit(None, dtype=v).alias(k) for k, v in calls.TABLE_SCHEMA.items()
          if k not in rows[0])).select(list(calls.TABLE_SCHEMA)).cast(calls.TABLE_SCHEMA)
    empty = pl.DataFrame()
    return calls.CallsResult(table=table, routes=empty, scores=empty, thresholds=empty,
                             placement=empty, mapping="loose")


def _grid(call: str) -> dict[tuple[str, str, str], str]:
    return {(m, d, t): call for m in ("loose", "strict") for d in calls.DECONTAM
            for t in calls.THRESHOLDS}


def test_headline_stable_only_where_every_cell_agrees_and_names_the_flips():
    assert _result(_grid("policy content")).headline().row(0, named=True)["stable"] is True
    cells = _grid("policy content")
    cells[("strict", "exact", "matched")] = "undetermined"
    cells[("strict", "full", "0.5")] = "capability"          # two choices at once
    head = _result(cells).headline().row(0, named=True)
    assert (head["call"], head["stable"], head["flips"]) == (
        "policy content", False, "mapping=strict")
    only_combined = _grid("policy content")
    only_combined[("strict", "full", "0.5")] = "capability"
    assert _result(only_combined).headline()["flips"][0] == "combined choices"


def test_direction_beside_the_study():
    assert calls.study_direction("harmbench_copyright", 0.1, 0.3) == "same"
    assert calls.study_direction("harmbench_copyright", -0.3, -0.1) == "opposite"
    assert calls.study_direction("harmbench_copyright", -0.1, 0.3) == "not comparable"
    # the study saw A-last 3.4–6.8 % against 5.7 % on OR-H: no direction to compare with
    assert calls.study_direction("orbench_hard", 0.1, 0.3) == "not comparable"
    assert calls.study_direction("advbench", 0.1, 0.3) == ""


# -- through the report's function -----------------------------------------------------------

def _draw(scenario: str, seed: int = 5) -> tuple[pl.DataFrame, sim.Layout]:
    layout = sim.demo_layout(stats.derive_rng(seed, "layout"))
    return sim.simulate_predictions(layout, scenario, stats.derive_rng(seed, scenario)), layout


def test_branch_names_do_not_matter_only_roles():
    preds, layout = _draw("content")
    pool, overlap = sim.simulation_pool(layout), sim.exact_overlap(layout)
    renamed = preds.with_columns(pl.col("branch").str.replace("^E", "S"),
                                 pl.col("control_of").str.replace("^E", "S"),
                                 pl.col("run_id").str.replace("/E", "/S"))
    a = calls.compute_calls(preds, pool=pool, exact_overlap=overlap).table
    b = calls.compute_calls(renamed, pool=pool, exact_overlap=overlap).table
    assert a.equals(b)


def test_matched_threshold_undoes_a_constant_shift_of_a_run():
    preds, layout = _draw("threshold")
    res = calls.compute_calls(preds, pool=sim.simulation_pool(layout))
    thr = res.thresholds.filter(pl.col("mapping") == "loose")
    target = thr.filter(pl.col("branch") == "reference")["ffr_05"].mean()
    assert thr["target"].unique().to_list() == [pytest.approx(target)]
    # matched within one neutral row of the target (the rows flag in 1/n steps)
    assert ((thr["ffr_matched"] - thr["target"]).abs() <= 1 / thr["n_neutral"] + 1e-12).all()
    # A-last runs were shifted up: they flag more neutral rows at 0.5, so their t is higher
    a_last = thr.filter(pl.col("branch").is_in(["E1", "E7", "E8", "E10"]))
    others = thr.filter(~pl.col("branch").is_in(["E1", "E7", "E8", "E10"]))
    assert a_last["t_matched"].min() > others["t_matched"].max()


def test_outside_guard_placement_on_the_b_to_a_axis():
    preds, layout = _draw("content")
    e1 = preds.filter(pl.col("run_id") == "micro/E1/seed=42")
    guard = e1.with_columns(pl.lit("guard/copy").alias("run_id"),
                            pl.lit("outside").alias("guard_kind"), pl.lit("copy").alias("branch"),
                            pl.lit(None, dtype=pl.Int64).alias("seed"),
                            *(pl.lit(None, dtype=pl.String).alias(c) for c in
                              ("role", "route", "last_policy", "control_of", "variant_of")))
    res = calls.compute_calls(pl.concat([preds, guard]), pool=sim.simulation_pool(layout))
    assert res.primary().filter(pl.col("benchmark") == sim.PLANTED)["call"][0] == \
        "policy content"
    place = res.placement.filter(pl.col("benchmark") == sim.PLANTED).row(0, named=True)
    s = res.scores.filter((pl.col("benchmark") == sim.PLANTED) & (pl.col("mapping") == "loose")
                          & (pl.col("decontam") == "exact")
                          & (pl.col("threshold") == "matched"))
    mean = {b: s.filter(pl.col("branch") == b)["rate"].mean() for b in
            ("E1", "E7", "E8", "E10", "E1-ctrl", "E7-ctrl", "E10-ctrl", "reference")}
    a_end = (mean["E1"] + mean["E7"] + mean["E8"] + mean["E10"]) / 4
    b_end = (mean["E1-ctrl"] + mean["E7-ctrl"] + mean["reference"] + mean["E10-ctrl"]) / 4
    guard_rate = s.filter(pl.col("branch") == "E1").sort("seed")["rate"][0]
    assert (place["a_end"], place["b_end"]) == (pytest.approx(a_end), pytest.approx(b_end))
    assert place["score"] == pytest.approx(guard_rate)
    assert place["position"] == pytest.approx((guard_rate - b_end) / (a_end - b_end))
    assert place["position_low"] < place["position"] < place["position_high"]
    assert place["threshold"] == "matched"


@pytest.mark.parametrize(("scenario", "call", "at_least"), [
    ("threshold", "threshold shift", 0.8), ("content", "policy content", 0.8)])
def test_simulated_scenarios_meet_the_issue_rates(scenario, call, at_least):
    # a fixed seed: the counts are deterministic; the bounds are the issue's, with 15 draws
    res = sim.run_simulation(draws=15, seed=1, scenarios=[scenario]).table.row(0, named=True)
    assert res[call] >= at_least
    assert res["capability"] <= 0.05
    if scenario == "threshold":
        assert res["policy content"] <= 0.15        # 5 % nominal; 15 draws × 4 cohorts
        assert 0.10 <= res["raw_shift"] <= 0.30     # the shift moves raw rates 10–30 pp
    else:
        assert 0.08 <= res["raw_shift"] <= 0.12     # a ~10 pp planted content effect


@pytest.mark.parametrize("scenario", ["noise", "route"])
def test_no_policy_content_without_content(scenario):
    # 10 draws × 4 cohorts at a fixed seed; nominal 5 %, 400 draws measure ~1–2 % (README)
    res = sim.run_simulation(draws=10, seed=2, scenarios=[scenario]).table.row(0, named=True)
    assert res["policy content"] <= 0.10
    assert abs(res["raw_shift"]) <= 0.02            # no planted A-vs-B move at 0.5


def test_the_report_carries_the_calls_section(tmp_path):
    import json

    from test_report import run_report, write_inputs

    work = write_inputs(tmp_path)
    assert run_report(work, tmp_path / "out") == 0
    doc = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    payload = doc["results"]["calls"]
    assert [h["benchmark"] for h in payload["headline"]] == [
        "harmbench_copyright", "harmbench_standard", "orbench_hard"]
    assert sum(payload["counts"].values()) == 3
    assert len(payload["rows"]) == 3 * 2 * 3 * 2             # benchmarks × cells
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Policy content, threshold shift or route: the calls" in md
    assert (tmp_path / "out" / "tables" / "calls_scores.csv").is_file()


def test_predictions_without_roles_are_one_line_errors():
    preds, layout = _draw("noise")
    with pytest.raises(GuarddiagError, match="has no role, route or last_policy"):
        calls.compute_calls(preds.with_columns(pl.lit(None, dtype=pl.String).alias("role")),
                            pool=sim.simulation_pool(layout))
    with pytest.raises(GuarddiagError, match="pool's val rows are needed"):
        calls.compute_calls(preds, pool=None)


def test_the_table_gives_the_reason_of_an_undetermined_call():
    preds, layout = _draw("noise")
    table = calls.compute_calls(preds, pool=sim.simulation_pool(layout)).table
    undetermined = table.filter(pl.col("call") == "undetermined")
    assert undetermined.height
    reasons = undetermined["reason"].to_list()
    assert all(r is not None and r.startswith("low power: MDE") for r in reasons)


def test_same_inputs_in_another_row_order_give_the_same_bytes():
    preds, layout = _draw("content")
    guard = preds.filter(pl.col("run_id") == "micro/E7/seed=42").with_columns(
        pl.lit("guard/g").alias("run_id"), pl.lit("outside").alias("guard_kind"),
        pl.lit("g").alias("branch"), pl.lit(None, dtype=pl.Int64).alias("seed"),
        *(pl.lit(None, dtype=pl.String).alias(c) for c in
          ("role", "route", "last_policy", "control_of", "variant_of")))
    preds = pl.concat([preds, guard])
    pool, overlap = sim.simulation_pool(layout), sim.exact_overlap(layout)
    a = calls.compute_calls(preds, pool=pool, exact_overlap=overlap)
    b = calls.compute_calls(preds.sample(fraction=1.0, shuffle=True, seed=11),
                            pool=pool.reverse(), exact_overlap=overlap.reverse())
    for name in ("table", "routes", "scores", "thresholds", "placement"):
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.placement.height >= 1                        # the guard is placed
