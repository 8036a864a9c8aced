"""Balance over pillars/domains, capture by category/domain, policy-sensitive categories."""

from __future__ import annotations

import math

import polars as pl
import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag.errors import GuarddiagError
from guarddiag.labels import STRICT
from guarddiag.sorry.balance import (
    benchmark_balance,
    capture_by_category,
    measure_balance,
    policy_sensitive_categories,
    unsafe_decisions,
)


def test_balance_by_hand():
    cats = ["Violence", "Violence", "Sexual content", "Non-violent crimes", None]
    b = benchmark_balance("strongreject", cats)
    assert (b.n, b.n_mapped, b.n_unmapped, b.n_out_of_taxonomy) == (5, 4, 1, 0)
    # Violence: violent_crime + terrorism, 1/2 each, twice -> 1.0 each.
    assert b.pillar_weight["violent_crime"] == pytest.approx(1.0)
    assert b.pillar_weight["terrorism"] == pytest.approx(1.0)
    assert b.pillar_weight["adult_content"] == pytest.approx(0.5)
    assert b.pillar_weight["fraud"] == pytest.approx(1 / 3)
    assert sum(b.pillar_weight.values()) == pytest.approx(4.0)
    # most / least among tested pillars: 1.0 / (1/3) = 3.
    assert b.imbalance_ratio == pytest.approx(3.0)
    assert b.most == ("violent_crime", "terrorism")
    assert b.least == ("cybercrime", "fraud", "nonviolent_crime")
    assert len(b.untested) == 24 - 7
    assert "copyright" in b.untested
    # Domains: crimes 3 (two Violence + one Non-violent), inappropriate 1.
    assert b.domain_weight == {"hate": 0.0, "crimes": 3.0, "inappropriate": 1.0, "advice": 0.0}
    assert b.domain_imbalance_ratio == pytest.approx(3.0)
    assert b.untested_domains == ("hate", "advice")


def test_balance_without_categories_is_not_assessable():
    b = benchmark_balance("advbench", [None, None])
    assert not b.assessable
    assert not b.has_map
    assert b.imbalance_ratio is None
    assert b.untested == ()
    b = benchmark_balance("wildguardtest_benign", ["benign"] * 3)
    assert not b.assessable
    assert b.has_map
    assert b.n_out_of_taxonomy == 3
    b = benchmark_balance("strongreject", ["Violence", "made-up"])
    assert b.unmapped_values == ("made-up",)
    assert b.n_unmapped == 1
    res = measure_balance({"x": pl.DataFrame({"category": ["Violence"]})})
    assert res.summary_frame()["n_mapped"].to_list() == [0]  # benchmark "x" has no map
    with pytest.raises(GuarddiagError, match="no category column"):
        measure_balance({"strongreject": pl.DataFrame({"text": ["a"]})})


def test_category_notes_say_what_is_missing_and_where_to_map_it():
    """Issue 17: a benchmark whose prompts carry categories that no map covers is not "without
    category metadata"; the note names the file to edit."""
    assert benchmark_balance("advbench", [None, None]).category_note.startswith(
        "no category metadata")
    # A user benchmark (no entry in category_map.yaml) whose manifest declares a category field.
    note = benchmark_balance("my_benchmark", ["Physics", "Chemistry", "Physics"]).category_note
    assert note == ("categories present (2 values, e.g. Chemistry, Physics), not mapped to the "
                    "24 pillars: add a mapping in data_manifests/taxonomy/category_map.yaml")
    # A mapped benchmark whose values the map lacks.
    note = benchmark_balance("strongreject", ["made-up", "also-new"]).category_note
    assert note == ("categories present, 2 value(s) not in the map (also-new, made-up): add "
                    "them in data_manifests/taxonomy/category_map.yaml")
    assert benchmark_balance("wildguardtest_benign", ["benign"]).category_note == (
        "categories outside the harm taxonomy (e.g. benign)")
    assert benchmark_balance("strongreject", ["Violence"]).category_note is None
    summary = measure_balance({"my_benchmark": pl.DataFrame({"category": ["Physics"]}),
                               "strongreject": pl.DataFrame({"category": ["Violence"]})}
                              ).summary_frame()
    notes = summary["category_note"].to_list()
    assert notes[0].startswith("categories present (1 value, e.g. Physics)")
    assert notes[1] is None


@pytest.mark.realdata
def test_balance_on_mirrored_data(real_data_dir):
    from guarddiag.data import load_benchmarks

    res = measure_balance(load_benchmarks("all", data_dir=real_data_dir).frames)
    by = {b.benchmark: b for b in res.benchmarks}
    sorry = by["sorrybench"]
    # 45 categories x 10 prompts: 5/20/15/5 categories per domain.
    assert sorry.domain_weight == pytest.approx(
        {"hate": 50.0, "crimes": 200.0, "inappropriate": 150.0, "advice": 50.0})
    assert sorry.untested == ("trafficking",)
    # Copyright is HarmBench-copyright's only pillar.
    assert by["harmbench_copyright"].most == ("copyright",)
    assert by["harmbench_copyright"].imbalance_ratio == 1.0
    assert not by["advbench"].assessable
    summary = res.summary_frame()
    assert summary.height == len(res.benchmarks)
    assert res.to_frame().height == 24 * len(res.benchmarks)


# ── capture by category ───────────────────────────────────────────────────────────────────────

def _sorry_frame() -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": ["a", "b", "c", "d", "e"],
                         "category": ["1", "1", "6", "6", "41"]})


def test_capture_by_category_by_hand():
    meta = run_meta("micro", "E1", 42)
    preds = frame(rows_for(meta, "sorrybench", [0.9, 0.2, 0.7, 0.6, 0.1],
                           ids=["a", "b", "c", "d", "e"]))
    res = capture_by_category(preds, {"sorrybench": _sorry_frame()})
    cap = dict(zip(res.by_category["category"], res.by_category["capture"], strict=True))
    assert cap == {"1. Personal Insulting Words": 0.5, "6. Self-Harm": 1.0,
                   "41. Medical Advice": 0.0}
    dom = dict(zip(res.by_domain["domain"], res.by_domain["capture"], strict=True))
    assert dom == {"hate": 0.5, "crimes": 1.0, "advice": 0.0}
    assert res.to_frame()["n"].sum() == 5


def test_capture_uses_the_binary_mapping():
    meta = run_meta("micro", "E1", 42)
    # p_unsafe 0.2 + boundary 0.5: safe under loose, unsafe under strict (0.7 >= 0.5).
    preds = frame(rows_for(meta, "sorrybench", [0.2] * 5, p_boundary=[0.5] * 5,
                           ids=["a", "b", "c", "d", "e"]))
    loose = capture_by_category(preds, {"sorrybench": _sorry_frame()})
    strict = capture_by_category(preds, {"sorrybench": _sorry_frame()}, mapping=STRICT)
    assert loose.by_domain["capture"].to_list() == [0.0, 0.0, 0.0]
    assert strict.by_domain["capture"].to_list() == [1.0, 1.0, 1.0]
    decided = unsafe_decisions(preds.with_columns(pl.lit("failed").alias("status")))
    assert decided.height == 0  # failed rows are left out, never read as safe


def test_policy_sensitive_categories_by_hand():
    ids = ["a", "b", "c", "d"]
    cats = pl.DataFrame({"prompt_id": ids, "category": ["41", "41", "1", "1"]})
    rows = []
    rows += rows_for(run_meta("micro", "E1", 42), "sorrybench", [0.9, 0.9, 0.9, 0.1], ids=ids)
    rows += rows_for(run_meta("micro", "E1", 43), "sorrybench", [0.9, 0.1, 0.9, 0.1], ids=ids)
    rows += rows_for(run_meta("micro", "E2", 42), "sorrybench", [0.1, 0.1, 0.9, 0.1], ids=ids)
    rows += rows_for(run_meta("x", "g", None, kind="outside"), "sorrybench", [0.9] * 4, ids=ids)
    res = policy_sensitive_categories(frame(rows), {"sorrybench": cats})
    t = res.to_frame()
    assert t["category"].to_list() == ["41. Medical Advice", "1. Personal Insulting Words"]
    first = t.row(0, named=True)
    # E1 capture on 41 = mean(1.0, 0.5) = 0.75, E2 = 0.0 -> span 0.75.
    assert first["span"] == pytest.approx(0.75)
    assert (first["min_branch"], first["max_branch"]) == ("E2", "E1")
    # Majorities: prompt a E1 yes / E2 no (flip); b E1 0.5 -> no / E2 no: flip share 1/2.
    assert first["flip_share"] == pytest.approx(0.5)
    second = t.row(1, named=True)
    assert second["span"] == pytest.approx(0.0)
    assert second["flip_share"] == 0.0
    assert math.isclose(first["n"], 2)


def test_policy_sensitive_needs_branch_predictions():
    rows = rows_for(run_meta("x", "g", None, kind="outside"), "sorrybench", [0.9], ids=["a"])
    with pytest.raises(GuarddiagError, match="no branch predictions"):
        policy_sensitive_categories(frame(rows), {"sorrybench": _sorry_frame()})
