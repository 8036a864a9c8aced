"""The route-matched, operating-point-matched calls (issue 27): each rule against hand
arithmetic, scipy or sklearn, and the simulated scenarios through the report's own function."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import scipy.stats
from sklearn.metrics import average_precision_score, roc_auc_score

from guarddiag import stats
from guarddiag.analyses import calls, callwords, contrast, operating, placement, study_calls
from guarddiag.bench import calls as sim
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
    assert operating.neutral_ids(operating.neutral_rows(pool, LOOSE)) == ["a", "c", "d"]
    # BOUNDARY_SAFE reads unsafe
    assert operating.neutral_ids(operating.neutral_rows(pool, STRICT)) == ["a"]
    # one read serves every language: ids and languages, sorted by id whatever the pool order
    mixed = pool.reverse().with_columns(pl.Series("lang", ["en", "de", "en", "de", "en"]))
    assert operating.neutral_rows(mixed, LOOSE).rows() == [("a", "en"), ("c", "en"), ("d", "de")]
    assert operating.neutral_ids(operating.neutral_rows(mixed, LOOSE), lang="de") == ["d"]
    with pytest.raises(GuarddiagError, match="missing column 'lang'"):
        operating.neutral_ids(operating.neutral_rows(pool, LOOSE), lang="en")


def test_a_neutral_row_with_a_train_copy_is_not_a_neutral_row():
    """Val row "c" has a train copy up to case, punctuation and spacing (the text
    :func:`guarddiag.text.normalise` maps to one form), "d" only shares words with a train row:
    "c" leaves the neutral rows, "d" stays; the same rule names "c" ``multilingual_overlap``
    in the VAL parts."""
    from guarddiag.analyses.valsets import val_parts

    pool = pl.DataFrame({
        "prompt_id": ["a", "c", "d", "c@train-copy", "t"],
        "text": ["wie spät ist es", "Wo ist der Bahnhof?", "wo ist der park",
                 "wo  ist der BAHNHOF", "wo ist der bahnhof park"],
        "split": ["val", "val", "val", "train", "train"],
        "label_a": ["GENERIC_SAFE"] * 5, "label_b": ["GENERIC_SAFE"] * 5,
        "lang": ["de"] * 5})
    assert operating.neutral_ids(operating.neutral_rows(pool, LOOSE)) == ["a", "d"]
    assert operating.neutral_ids(operating.neutral_rows(pool, LOOSE), lang="de") == ["a", "d"]
    parts = dict(val_parts(pool).select("prompt_id", "val_set").iter_rows())
    assert parts == {"a": "multilingual_no_overlap", "c": "multilingual_overlap",
                     "d": "multilingual_no_overlap"}
    # without texts (a simulation's frame) no row can be told to have a copy
    assert operating.neutral_ids(operating.neutral_rows(pool.drop("text"), LOOSE)) == [
        "a", "c", "d"]


def test_matched_false_flags_split_by_the_benchmarks_language_by_hand():
    """Two runs over 6 neutral val rows, 4 English and 2 French (plus one val row policy B
    calls harmful, never neutral). The reference flags 1 of 6 at 0.5 (its .9 English row): that
    is the target. The other run's matched threshold flags 1 of 6 too, its top row, which is
    French: so it flags 0 of the 4 English rows and 1 of the 2 French ones."""
    from synthetic_runs import frame, rows_for, run_meta

    ids = ["e1", "e2", "e3", "e4", "f1", "f2", "h"]
    pool = pl.DataFrame({
        "prompt_id": ids, "split": ["val"] * 7,
        "label_a": ["GENERIC_SAFE"] * 6 + ["HARMFUL"],
        "label_b": ["GENERIC_SAFE"] * 6 + ["HARMFUL"],
        "lang": ["en"] * 4 + ["fr"] * 2 + ["en"]})
    rows = (rows_for(run_meta("minilm", "reference", 42), "pool_val",
                     [.9, .1, .2, .3, .4, .1, .99], ids=ids)
            + rows_for(run_meta("minilm", "E1", 42), "pool_val",
                       [.2, .1, .3, .4, .95, .6, .99], ids=ids))
    _, thr = operating.run_scores(frame(rows), pool=pool, mappings=(LOOSE,))
    by = {r["branch"]: r for r in thr.iter_rows(named=True)}
    ref, e1 = by["reference"], by["E1"]
    assert (ref["n_neutral"], ref["n_neutral_lang"]) == (6, 4)
    assert ref["target"] == pytest.approx(1 / 6)
    assert (ref["ffr_matched_lang"], ref["ffr_matched_other"]) == (pytest.approx(1 / 4), 0.0)
    assert (e1["ffr_matched_lang"], e1["ffr_matched_other"]) == (0.0, pytest.approx(1 / 2))
    # a pool without languages leaves the split null
    _, thr = operating.run_scores(frame(rows), pool=pool.drop("lang"), mappings=(LOOSE,))
    assert thr["n_neutral_lang"].null_count() == thr.height


# -- the contrast ----------------------------------------------------------------------------

def _rows(recipes: dict[str, list[float]], n: int = 100) -> pl.DataFrame:
    """Score rows of one cohort: one per (branch, seed), roles from the bundled specs."""
    specs = sim.load_branches()
    out = []
    for branch, rates in recipes.items():
        roles = specs[branch].roles().model_dump()
        for i, r in enumerate(rates):
            out.append({"run_id": f"micro/{branch}/seed={42 + i}", "size": "micro",
                        "branch": branch, "seed": 42 + i, "rate": r, "n": n,
                        **{k: roles[k] for k in ("role", "route", "last_policy",
                                                 "control_of", "variant_of")}})
    return pl.DataFrame(out)


def test_pairs_come_from_roles_controls_first_then_the_reference_on_its_route():
    rows = _rows({"reference": [0.1], "E1": [0.2], "E1-ctrl": [0.3], "E7": [0.2],
                  "E8": [0.4], "E2": [0.1]})
    pairs, _ = contrast.route_pairs(rows)
    got = {p.a.branch: [r.branch for r in p.b] for p in pairs}
    # E7 has no control in the cohort and its route is not the reference's: unpaired
    assert got == {"E1": ["E1-ctrl"], "E8": ["reference"]}


def test_contrast_standard_error_and_welch_df_by_hand():
    rows = _rows({"reference": [0.2, 0.3, 0.4], "E1": [0.6, 0.9, 0.3], "E1-ctrl": [0.25]})
    pairs, recipes = contrast.route_pairs(rows)
    s2, df_pool = contrast.pooled_variance(list(recipes.values()))
    assert (s2, df_pool) == (pytest.approx((0.02 + 0.18) / 4), 4)
    c = contrast.contrast(pairs, recipes, s2, df_pool)
    # E1's own variance 0.09 > s² = 0.05: its term is 0.09/3 on 2 df; the control takes s²/1
    a1, a2 = 0.09 / 3, 0.05 / 1
    assert c.effect == pytest.approx(0.6 - 0.25)
    assert c.se == pytest.approx(np.sqrt(a1 + a2))
    # Satterthwaite gives 5.95 df, but both terms rest on the 4 pooled seed residuals: capped
    assert (a1 + a2) ** 2 / (a1 ** 2 / 2 + a2 ** 2 / 4) == pytest.approx(5.953, abs=1e-3)
    assert c.df == 4
    [route] = calls.cohort_test(rows)["routes"]
    out = calls.route_verdict(route, None, alpha=0.05, margin=0.05)
    t = 0.35 / np.sqrt(a1 + a2)
    assert out["route"] == "head_only"
    assert out["p_effect"] == pytest.approx(2 * scipy.stats.t.sf(t, c.df))
    mde = (scipy.stats.t.ppf(0.975, c.df) + scipy.stats.t.ppf(0.8, c.df)) * c.se
    assert out["mde"] == pytest.approx(mde)


def test_equivalence_is_tost_against_the_margin():
    c = contrast.Contrast(effect=0.01, se=0.015, df=10.0)
    lo = scipy.stats.t.sf((0.01 + 0.05) / 0.015, 10)
    hi = scipy.stats.t.cdf((0.01 - 0.05) / 0.015, 10)
    assert contrast.p_equivalence(c, 0.05) == pytest.approx(max(lo, hi))


_FLAT = {"E2": [0.05], "E3": [0.05], "E4": [0.05], "E5": [0.05], "E6": [0.05], "E9": [0.05],
         "E7": [0.05], "E7-ctrl": [0.05], "E8": [0.05], "E10": [0.05, 0.05, 0.06],
         "E10-ctrl": [0.05], "E1-ctrl": [0.05], "reference": [0.04, 0.05, 0.06]}


def _verdicts(rows: pl.DataFrame, **degenerate: str) -> dict[str, dict]:
    at = calls.cohort_test(rows, degenerate=degenerate)
    return {t.route: calls.route_verdict(t, None, alpha=0.05, margin=0.05)
            for t in at["routes"]}


def test_a_recipe_whose_seeds_disagree_widely_cannot_back_capability():
    # sorrybench__morse in the demo: E1's seeds at 97 %, 0 % and 8.8 %
    wide = _verdicts(_rows({**_FLAT, "E1": [0.97, 0.0, 0.088]}))["head_only"]
    assert wide["call"] == "undetermined"
    assert wide["reason"].startswith("low power")
    assert wide["p_equivalence"] > 0.05
    assert wide["mde"] > 0.3
    # the same layout with E1's seeds agreeing is shown equivalent
    tight = _verdicts(_rows({**_FLAT, "E1": [0.05, 0.06, 0.04]}))["head_only"]
    assert tight["call"] == "capability"


def test_a_route_call_carries_the_sign_and_a_moved_threshold_is_named():
    def verdict(effect, se=0.01, at05=None):
        test = calls.RouteTest("distill", (), (), (), contrast.Contrast(effect, se, 8.0))
        low = None if at05 is None else calls.RouteTest(
            "distill", (), (), (), contrast.Contrast(at05, 0.01, 8.0))
        return calls.route_verdict(test, low, alpha=0.05, margin=0.05)["call"]
    assert verdict(0.2) == "A flags more"
    assert verdict(-0.2) == "A flags less"
    assert verdict(0.0, at05=0.2) == "threshold shift"     # beyond noise at 0.5 only
    assert verdict(0.0) == "capability"                     # within ±5 pp, TOST
    assert verdict(0.0, se=0.2) == "undetermined"           # nothing shown
    gone = calls.RouteTest("head_only", (), (), ("E7−E7-ctrl (micro/E7/seed=42: x)",), None)
    out = calls.route_verdict(gone, None, alpha=0.05, margin=0.05)
    assert (out["call"], out["reason"]) == ("undetermined",
                                            "degenerate run: E7−E7-ctrl (micro/E7/seed=42: x)")


def test_the_benchmark_call_comes_from_its_routes():
    at = {"reason": None, "p_route": 0.5}
    def verdict(*route_calls, p_route=0.5):
        routes = [{"route": r, "call": c, "reason": "why"} for r, c in
                  zip(("distill", "head_only"), route_calls, strict=False)]
        return calls.benchmark_verdict({**at, "p_route": p_route}, routes, alpha=0.05)[:2]
    assert verdict("A flags more", "A flags more") == ("A flags more", "")
    assert verdict("A flags more", "undetermined") == ("A flags more", "distill")
    assert verdict("undetermined", "A flags less") == ("A flags less", "head_only")
    assert verdict("A flags more", "A flags less") == ("routes disagree", "")
    assert verdict("A flags more", "capability") == ("routes disagree", "")
    assert verdict("undetermined", "undetermined") == ("undetermined", "")
    assert verdict("undetermined", "undetermined", p_route=0.01) == ("route-sensitive", "")
    same = {"reason": "every run scores the same: 0.0 % flagged", "p_route": None}
    assert calls.benchmark_verdict(same, [], alpha=0.05)[0] == "uninformative"
    assert calls.benchmark_verdict({"reason": "too few prompts: 3", "p_route": None}, [],
                                   alpha=0.05)[0] == "undetermined"


def test_a_degenerate_run_leaves_its_pair_out_and_is_named():
    rows = _rows({**_FLAT, "E1": [0.30, 0.32, 0.31], "E10": [0.05, 0.06, 0.05],
                  "E1-ctrl": [0.05, 0.06, 0.04]})
    fine = _verdicts(rows)["head_only"]
    assert fine["call"] == "A flags more"                   # E1 carries the route
    out = _verdicts(rows, **{"micro/E1-ctrl/seed=42": "matched threshold 0.0002"})["head_only"]
    assert "E1−E1-ctrl (micro/E1-ctrl/seed=42: matched threshold 0.0002)" in out["left_out"]
    assert out["pairs"] == "E1−E1-ctrl, E10−E10-ctrl, E7−E7-ctrl"
    assert out["call"] == "capability"                      # E7 and E10 pairs alone: flat
    every = {f"micro/{b}-ctrl/seed=42": "x" for b in ("E1", "E7", "E10")}
    gone = _verdicts(rows, **every)["head_only"]
    assert gone["call"] == "undetermined"
    assert gone["reason"].startswith("degenerate run: E1−E1-ctrl")


def test_degenerate_operating_points_by_hand():
    thr = pl.DataFrame({"run_id": ["r1", "r2", "r3", "base"], "mapping": ["loose"] * 4,
                        "n_neutral": [100, 100, 0, 100],
                        "t_matched": [0.9999, 0.5, 0.99999, 0.4]})
    rows = [("r1", "branch", "A", b, r) for b, r in (("advbench", 0.9), ("donotanswer", 0.8))]
    rows += [("r2", "branch", "B", b, r) for b, r in (("advbench", 0.3), ("donotanswer", 0.4))]
    rows += [("base", "baseline", None, b, r) for b, r in (("advbench", 0.5),
                                                          ("donotanswer", 0.5))]
    scores = pl.DataFrame(rows, schema=["run_id", "guard_kind", "last_policy", "benchmark",
                                        "rate"], orient="row").with_columns(
        pl.lit("loose").alias("mapping"), pl.lit("exact").alias("decontam"),
        pl.lit("matched").alias("threshold"))
    preds = pl.DataFrame({"run_id": ["r1", "r2", "base"], "label_policy": ["A", "B", "B"]})
    out = operating.degenerate_runs(scores, thr, predictions=preds,
                                    clear_harm=("advbench", "donotanswer"))
    why = dict(out.select("run_id", "degenerate").iter_rows())
    assert why["r1"] == "matched threshold 1 − 0.0001"      # 0.85 capture: above TF-IDF's 0.5
    # r2: mean capture 0.35 below the B baseline's 0.5; r3 has no neutral rows: nothing to say
    assert why["r2"] == "clear-harm capture 35.0 % below TF-IDF's 50.0 %"
    assert (why["r3"], why["base"]) == ("", "")


# -- the headline ----------------------------------------------------------------------------

def _result(cells: dict[tuple[str, str, str], str], effect=(0.2, 0.1, 0.3),
            route_cells: dict[tuple[str, str, str], str] | None = None) -> calls.CallsResult:
    rows = [{"benchmark": "harmbench_copyright", "mapping": m, "decontam": d, "threshold": t,
             "call": c, "carried_by": "", "route_calls": "", "effect": effect[0],
             "effect_low": effect[1], "effect_high": effect[2]}
            for (m, d, t), c in cells.items()]
    table = pl.DataFrame(rows).with_columns(
        *(pl.lit(None, dtype=v).alias(k) for k, v in calls.TABLE_SCHEMA.items()
          if k not in rows[0])).select(list(calls.TABLE_SCHEMA)).cast(calls.TABLE_SCHEMA)
    routes = pl.DataFrame([{"benchmark": "harmbench_copyright", "mapping": m, "decontam": d,
                            "threshold": t, "route": "distill", "call": c}
                           for (m, d, t), c in (route_cells or cells).items()])
    empty = pl.DataFrame()
    return calls.CallsResult(table=table, routes=routes, scores=empty, thresholds=empty,
                             placement=empty, study=empty, mapping="loose")


def _grid(call: str) -> dict[tuple[str, str, str], str]:
    return {(m, d, t): call for m in ("loose", "strict") for d in calls.DECONTAM
            for t in callwords.thresholds()}


def test_headline_stable_only_where_every_cell_agrees_and_names_the_flips():
    assert _result(_grid("A flags more")).headline().row(0, named=True)["stable"] is True
    cells = _grid("A flags more")
    cells[("strict", "exact", "matched")] = "undetermined"
    cells[("strict", "full", "0.5")] = "capability"          # two choices at once
    head = _result(cells).headline().row(0, named=True)
    assert (head["call"], head["stable"], head["flips"]) == (
        "A flags more", False, "mapping=strict")
    only_combined = _grid("A flags more")
    only_combined[("strict", "full", "0.5")] = "capability"
    assert _result(only_combined).headline()["flips"][0] == "combined choices"
    # the benchmark's call holds everywhere, one route's does not: not stable
    route_cells = _grid("A flags more")
    route_cells[("loose", "full", "matched")] = "undetermined"
    assert _result(_grid("A flags more"), route_cells=route_cells).headline()["stable"][0] \
        is False


def test_direction_beside_the_study():
    v = study_calls.direction_verdict
    assert v(+1, 0.1, 0.3) == "same"
    assert v(+1, -0.3, -0.1) == "opposite"
    assert v(+1, -0.1, 0.3) == "not shown here"
    # OR-Bench-hard: the study's A-last flag 3.4-6.8 % against E3/E5's 40.3-56.4 %
    assert v(-1, -0.5, -0.3) == "same"
    assert v(-1, 0.05, 0.2) == "opposite"
    # WildGuard-benign: no A/B direction in the study
    assert v(0, -0.03, 0.04) == "same"
    assert v(0, -0.08, 0.04) == "not shown here"
    assert v(0, 0.01, 0.2) == "opposite"
    head = pl.DataFrame({"benchmark": ["orbench_hard", "advbench"], "effect": [0.1, 0.0],
                         "effect_low": [0.05, -0.1], "effect_high": [0.2, 0.1],
                         "effect_05": [-0.4, 0.0], "effect_05_low": [-0.5, -0.1],
                         "effect_05_high": [-0.3, 0.1]})
    rows = study_calls.study_rows(head)
    assert rows["benchmark"].to_list() == ["orbench_hard"]   # the study has no advbench figure
    assert rows.row(0, named=True)["verdict"] == "opposite"
    assert rows.row(0, named=True)["verdict_05"] == "same"
    assert study_calls.contradictions(rows) == (
        "This run contradicts the study on orbench_hard at matched (study: about −43 pp).")


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


def _guard(preds: pl.DataFrame, source: str, name: str) -> pl.DataFrame:
    """An outside guard whose answers are a copy of run ``source``'s (neutral rows too)."""
    return preds.filter(pl.col("run_id") == source).with_columns(
        pl.lit(f"guard/{name}").alias("run_id"), pl.lit("outside").alias("guard_kind"),
        pl.lit(name).alias("branch"), pl.lit(None, dtype=pl.Int64).alias("seed"),
        *(pl.lit(None, dtype=pl.String).alias(c) for c in
          ("role", "route", "last_policy", "control_of", "variant_of")))


def test_outside_guard_placement_on_the_b_to_a_axis():
    preds, layout = _draw("content")
    guards = pl.concat([_guard(preds, "micro/E1/seed=42", "copy"),
                        _guard(preds, "micro/E1/seed=42", "same_scores_other_name")])
    no_neutral = _guard(preds, "micro/E1/seed=42", "no_neutral").filter(
        pl.col("benchmark") != "pool_val")
    res = calls.compute_calls(pl.concat([preds, guards, no_neutral]),
                              pool=sim.simulation_pool(layout), clear_harm=("harmful",))
    assert res.primary().filter(pl.col("benchmark") == sim.PLANTED)["call"][0] == \
        "A flags more"
    place = res.placement.filter(pl.col("benchmark") == sim.PLANTED)
    first = place.row(0, named=True)
    s = res.scores.filter((pl.col("benchmark") == sim.PLANTED) & (pl.col("mapping") == "loose")
                          & (pl.col("decontam") == "exact")
                          & (pl.col("threshold") == "matched"))
    mean = {b: s.filter(pl.col("branch") == b)["rate"].mean() for b in
            ("E1", "E7", "E8", "E10", "E1-ctrl", "E7-ctrl", "E10-ctrl", "reference")}
    a_end = (mean["E1"] + mean["E7"] + mean["E8"] + mean["E10"]) / 4
    b_end = (mean["E1-ctrl"] + mean["E7-ctrl"] + mean["reference"] + mean["E10-ctrl"]) / 4
    guard_rate = s.filter(pl.col("branch") == "copy")["rate"][0]
    assert (first["a_end"], first["b_end"]) == (pytest.approx(a_end), pytest.approx(b_end))
    assert first["score"] == pytest.approx(guard_rate)
    assert first["position"] == pytest.approx((guard_rate - b_end) / (a_end - b_end))
    assert first["position_low"] < first["position"] < first["position_high"]
    # read at its own matched threshold, the guard's interval depends on its scores alone
    assert place["guard"].to_list() == ["copy", "same_scores_other_name"]
    assert place.drop("guard").n_unique() == 1
    why = dict(placement.unplaced_guards(scores=res.scores, thresholds=res.thresholds,
                                         placement=res.placement, mapping=res.mapping,
                                         clear_harm=res.clear_harm).iter_rows())
    assert why["no_neutral"].startswith("not scored on the policy-neutral val rows")


@pytest.mark.parametrize(("scenario", "call", "at_least"), [
    ("threshold", "threshold shift", 0.6), ("content", "A flags more", 0.8)])
def test_simulated_scenarios_meet_the_issue_rates(scenario, call, at_least):
    # a fixed seed: the counts are deterministic; the bounds are the issue's, with 15 draws
    res = sim.run_simulation(draws=15, seed=1, scenarios=[scenario]).table.row(0, named=True)
    assert res[call] >= at_least
    assert res["capability"] <= 0.05
    if scenario == "threshold":
        assert res["A flags more"] <= 0.15          # 5 % nominal; 15 draws × 4 cohorts
        assert 0.10 <= res["raw_shift"] <= 0.30     # the shift moves raw rates 10–30 pp
    else:
        assert 0.08 <= res["raw_shift"] <= 0.12     # a ~10 pp planted content effect


@pytest.mark.parametrize("scenario", ["noise", "route", "degenerate", "ranking"])
def test_no_policy_content_without_content(scenario):
    # 10 draws × 4 cohorts at a fixed seed; nominal 5 %, 400 draws measure it (README)
    res = sim.run_simulation(draws=10, seed=2, scenarios=[scenario]).table.row(0, named=True)
    assert res["A flags more"] <= 0.10
    if scenario in ("noise", "route"):
        assert abs(res["raw_shift"]) <= 0.02        # no planted A-vs-B move at 0.5
    if scenario == "ranking":                       # the lowered ranking is named as such
        assert res["A flags less"] + res["routes disagree"] >= 0.5


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
    assert "The calls, route by route" in md
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
    assert all(r is not None and "low power: MDE" in r for r in undetermined["reason"])


def test_same_inputs_in_another_row_order_give_the_same_bytes():
    preds, layout = _draw("content")
    preds = pl.concat([preds, _guard(preds, "micro/E7/seed=42", "g")])
    pool, overlap = sim.simulation_pool(layout), sim.exact_overlap(layout)
    a = calls.compute_calls(preds, pool=pool, exact_overlap=overlap, clear_harm=("harmful",))
    b = calls.compute_calls(preds.sample(fraction=1.0, shuffle=True, seed=11),
                            pool=pool.reverse(), exact_overlap=overlap.reverse(),
                            clear_harm=("harmful",))
    for name in ("table", "routes", "scores", "thresholds", "placement", "study"):
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.placement.height >= 1                        # the guard is placed


def test_a_derived_subset_inherits_its_bases_exact_overlaps():
    # sorrybench__caesar keeps sorrybench's prompt ids: the calls count the same 433 of 450
    # prompts as Table 1 does (issue 48: 450 there, 433 here).
    preds, layout = _draw("noise")
    derived = preds.filter(pl.col("benchmark") == "harmful").with_columns(
        pl.lit("harmful__caesar").alias("benchmark"))
    res = calls.compute_calls(pl.concat([preds, derived]), pool=sim.simulation_pool(layout),
                              exact_overlap=sim.exact_overlap(layout))
    n = dict(res.scores.filter((pl.col("decontam") == "exact") & (pl.col("threshold") == "0.5")
                               & (pl.col("run_id") == "micro/E1/seed=42")
                               & (pl.col("mapping") == "loose"))
             .select("benchmark", "n").iter_rows())
    assert n["harmful__caesar"] == n["harmful"] == 200 - 20   # every tenth prompt overlaps


def test_the_calls_intro_says_where_the_references_false_flags_fall():
    from types import SimpleNamespace

    from guarddiag.analyses.calls import CallsResult
    from guarddiag.report.sections.calls import _by_language

    # The reference is found by its role, whatever its branch is called ("mine" here).
    scores = pl.DataFrame({"run_id": ["r1", "r2", "e1"], "guard_kind": ["branch"] * 3,
                           "role": ["reference", "reference", "a_last"]})

    def result(thr: pl.DataFrame) -> SimpleNamespace:
        res = SimpleNamespace(thresholds=thr, scores=scores, mapping="loose")
        res.reference_thresholds = lambda: CallsResult.reference_thresholds(res)
        return res

    thr = pl.DataFrame({"run_id": ["r1", "r2", "e1"], "mapping": ["loose"] * 3,
                        "branch": ["mine", "mine", "reference"],
                        "n_neutral": [10, 10, 10], "n_neutral_lang": [6, 6, 6],
                        "ffr_matched_lang": [0.1, 0.2, 0.9],
                        "ffr_matched_other": [0.25, 0.5, 0.0]})
    words = _by_language(result(thr))
    assert words == (" Of those rows 6 are in the benchmarks' language (en) and 4 in others; at "
                     "its matched threshold the reference flags 15.0% of the first and 37.5% of "
                     "the others (seed mean).")
    assert _by_language(result(thr.with_columns(
        pl.lit(None, pl.Int64).alias("n_neutral_lang")))) == ""
