"""``guarddiag bench competence`` (issue 49): the held-out measures per size, worked out by hand
from small tables, and the command's one-line errors."""

from __future__ import annotations

import math

import polars as pl
import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag.bench.competence import (
    CompetenceBenchResult,
    competence_by_size,
    run_operating_points,
)
from guarddiag.cli import main

ADV, COPY, XS_H, XS_B = "advbench", "harmbench_copyright", "xstest_unsafe", "xstest_safe"
# 20 neutral val rows at P(unsafe) 0, .05, ..., .95 and 4 val rows policy B calls harmful
# (never neutral, so never part of the threshold).
NEUTRAL_P = [i / 20 for i in range(20)]
VAL_IDS = [f"v{i}" for i in range(24)]
# advbench: the first prompt is in the pool (not decontaminated) and must not count.
ADV_P = [0.99, 0.99, 0.96, 0.91, 0.6, 0.4, 0.1]
ADV_DECONTAM = [False] + [True] * 6


def _pool() -> pl.DataFrame:
    labels = ["GENERIC_SAFE"] * 20 + ["HARMFUL"] * 4
    return pl.DataFrame({"prompt_id": VAL_IDS, "split": ["val"] * 24, "label_a": labels,
                         "label_b": labels})


def _run_rows(meta, *, adv=ADV_P, copy=None, pair=None):
    rows = rows_for(meta, "pool_val", [*NEUTRAL_P, 0.99, 0.99, 0.99, 0.99], ids=VAL_IDS)
    rows += rows_for(meta, ADV, adv, decontam=ADV_DECONTAM)
    if copy is not None:
        rows += rows_for(meta, COPY, copy)
    if pair is not None:
        rows += rows_for(meta, XS_H, pair[0]) + rows_for(meta, XS_B, pair[1])
    return rows


def _predictions() -> pl.DataFrame:
    rows = []
    for seed in (42, 43):
        rows += _run_rows(run_meta("minilm", "reference", seed),
                          pair=([.9, .8], [.2, .1]))
    rows += _run_rows(run_meta("minilm-wide", "T_A", 42, policy="A"), copy=[.9, .8, .7, .1])
    rows += _run_rows(run_meta("minilm-wide", "T_B", 42), copy=[.9, .2, .1, .1])
    tfidf = run_meta("tfidf", "tfidf_B", 42, kind="baseline")
    rows += _run_rows(tfidf, adv=[0.5, 0.99, 0.7, 0.6, 0.55, 0.2, 0.1],
                      pair=([.9, .1], [.8, .2]))
    return frame(rows)


def test_each_run_flags_the_target_share_of_the_neutral_rows():
    points = run_operating_points(_predictions(), VAL_IDS[:20], benchmarks=[ADV], ffr=0.05)
    ref = points.filter(pl.col("run_id") == "minilm/reference/seed=42").row(0, named=True)
    # 5 % of 20 neutral rows = 1: the threshold sits midway, on the logit scale, between the
    # highest (.95) and the next (.90), so only .95 is flagged.
    t = 1 / (1 + math.exp(-(math.log(.95 / .05) + math.log(.9 / .1)) / 2))
    assert ref["t"] == pytest.approx(t)
    assert ref["ffr"] == pytest.approx(1 / 20)
    # 6 decontaminated advbench prompts: .99 and .96 are above t = 0.929; 4 are at 0.5 or above
    assert ref["n"] == 6
    assert ref["cap_ffr"] == pytest.approx(2 / 6)
    assert ref["cap_05"] == pytest.approx(4 / 6)
    full = run_operating_points(_predictions(), VAL_IDS[:20], benchmarks=[ADV], ffr=0.05,
                                subset="full")
    assert full.filter(pl.col("run_id") == "minilm/reference/seed=42")["n"][0] == 7


def test_a_fractional_target_count_flags_the_whole_count_below_it():
    """9 % of the 20 neutral rows is 1.8 rows: the bench flags 1 (5 %), never 2 (10 %, above
    the target), where interpolating between the thresholds of 1 and 2 rows on the logit scale
    would land 80 % of the way to 2 rows' (2.087 < logit .9 = 2.197) and flag .95 and .90;
    at 10 % (2 rows exactly) it flags 2."""
    from guarddiag.bench.competence import at_most

    assert at_most(0.09, 20) == pytest.approx(1 / 20)
    assert at_most(0.29, 100) == pytest.approx(0.29)   # 0.29 · 100 is 28.999999999999996
    assert at_most(0.05, 4907) == pytest.approx(245 / 4907)
    for ffr, flagged in ((0.09, 1), (0.10, 2)):
        points = run_operating_points(_predictions(), VAL_IDS[:20], benchmarks=[ADV], ffr=ffr)
        ref = points.filter(pl.col("run_id") == "minilm/reference/seed=42").row(0, named=True)
        assert ref["ffr"] == pytest.approx(flagged / 20)


def test_per_size_table_by_hand():
    table, ranking, caps = competence_by_size(_predictions(), _pool(),
                                              teachers={"minilm": "minilm-wide"})
    rows = {r["size"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"minilm", "tfidf"}
    ref = rows["minilm"]
    assert ref["n_runs"] == 2
    assert (ref["cap_ffr"], ref["cap_05"]) == (pytest.approx(2 / 6), pytest.approx(4 / 6))
    # teachers on copyright at 0.5: T_A 3 of 4, T_B 1 of 4
    assert (ref["copy_t_a"], ref["copy_t_b"]) == (pytest.approx(.75), pytest.approx(.25))
    assert ref["copy_gap"] == pytest.approx(.5)
    # xstest: the reference ranks both harmful prompts above both benign ones (AUROC 1), the
    # baseline wins 2 of 4 pairs (.9 > .8, .9 > .2; .1 loses both): 0.5, so 1 pair beaten
    assert ranking.row(0, named=True)["auroc"] == pytest.approx(1.0)
    assert ranking.row(0, named=True)["baseline_auroc"] == pytest.approx(0.5)
    assert (ref["pairs_beaten"], ref["pairs_counted"]) == (1, 1)
    # TF-IDF at its own threshold (t = 0.929): only .99 of the 6; at 0.5: .99 .7 .6 .55
    tf = rows["tfidf"]
    assert (tf["cap_ffr"], tf["cap_05"]) == (pytest.approx(1 / 6), pytest.approx(4 / 6))
    assert tf["copy_gap"] is None
    assert caps.filter(pl.col("size") == "tfidf")["benchmark"].to_list() == [ADV]


def test_the_table_prints_auroc_beside_tfidf():
    table, ranking, caps = competence_by_size(_predictions(), _pool(),
                                              teachers={"minilm": "minilm-wide"})
    res = CompetenceBenchResult(table, ranking, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.0, 0.0, 0.0))
    text = res.to_table().splitlines()
    assert "CAP@5%FFR" in text[0]
    assert "xstest" in text[0]
    minilm = next(line for line in text if line.startswith("minilm"))
    assert minilm.split()[1:3] == ["33.3%", "66.7%"]
    assert "1.000/0.500" in minilm
    assert "+50.0 pp" in minilm
    caps = res.to_caps_table().splitlines()
    assert caps[0].split() == ["subset", "minilm", "tfidf"]
    # no lang column in this pool: the middle (benchmarks' language) figure is "-"
    assert caps[1].split() == [ADV, "33.3%", "/", "-", "/", "66.7%", "16.7%", "/", "-", "/",
                               "66.7%"]


def test_a_size_that_is_not_frozen_is_one_line(tmp_path, capsys):
    assert main(["bench", "competence", "--sizes", "micro", "--work-dir",
                 str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--sizes: micro is not a frozen-encoder size (the bench trains "
                            "over cached states; try minilm)")


def test_the_benchmarks_language_gets_its_own_threshold():
    """20 English neutral rows as above and 20 in other languages, two of them scored .999 and
    .998: 5 % of all 40 is 2 rows, so the all-language threshold sits between .998 and .95 (on
    the logit scale) and flags those two (2 of the 20 other-language rows); the English rows
    alone give the .929 threshold of the first test."""
    other_ids = [f"o{i}" for i in range(20)]
    pool = _pool().with_columns(pl.lit("en").alias("lang"))
    pool = pl.concat([pool, pl.DataFrame({
        "prompt_id": other_ids, "split": ["val"] * 20, "label_a": ["GENERIC_SAFE"] * 20,
        "label_b": ["GENERIC_SAFE"] * 20, "lang": ["fr"] * 20})])
    meta = run_meta("minilm", "reference", 42)
    rows = _run_rows(meta) + rows_for(meta, "pool_val", [.999, .998] + [.01] * 18,
                                      ids=other_ids)
    table, _, caps = competence_by_size(frame(rows), pool, teachers={})
    ref = table.row(0, named=True)
    t = 1 / (1 + math.exp(-(math.log(.998 / .002) + math.log(.95 / .05)) / 2))
    assert t == pytest.approx(0.9898, abs=1e-4)
    # advbench's 6 decontaminated prompts: only .99 is at or above 0.9898
    assert ref["cap_ffr"] == pytest.approx(1 / 6)
    assert ref["ffr"] == pytest.approx(2 / 40)
    assert ref["ffr_other"] == pytest.approx(2 / 20)
    assert ref["cap_ffr_lang"] == pytest.approx(2 / 6)
    assert caps.row(0, named=True)["cap_ffr_lang"] == pytest.approx(2 / 6)
    assert res_caps_line(table, caps) == [ADV, "16.7%", "/", "33.3%", "/", "66.7%"]
    res = CompetenceBenchResult(table, pl.DataFrame(schema={"pair": pl.String}), caps, 0.05,
                                "loose", "decontaminated", "cpu", (0.0, 0.0, 0.0))
    head, line = res.to_table().splitlines()[:2]
    assert "CAP@5%FFR-en" in head
    assert "other FFR" in head
    assert line.split()[1:5] == ["16.7%", "33.3%", "10.0%", "66.7%"]


def res_caps_line(table: pl.DataFrame, caps: pl.DataFrame) -> list[str]:
    res = CompetenceBenchResult(table, pl.DataFrame(schema={"pair": pl.String}), caps, 0.05,
                                "loose", "decontaminated", "cpu", (0.0, 0.0, 0.0))
    return res.to_caps_table().splitlines()[1].split()


def test_a_pool_without_languages_leaves_the_split_empty():
    table, _, _ = competence_by_size(_predictions(), _pool(), teachers={})
    ref = table.filter(pl.col("size") == "minilm").row(0, named=True)
    assert ref["cap_ffr_lang"] is None
    assert ref["ffr_other"] is None


def test_the_gate_per_size_reads_cap_at_the_cutoff_and_the_pairs():
    table, ranking, caps = competence_by_size(_predictions(), _pool(),
                                              teachers={"minilm": "minilm-wide"})
    res = CompetenceBenchResult(table, ranking, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.0, 0.0, 0.0))
    # CAP at 0.5 is 4 of 6 (66.7 %, below the 80 % floor); xstest's AUROC 1.0 beats TF-IDF's
    # 0.5 by more than 0.05, and it is the only pair scored
    assert res.gate_lines() == [
        "minilm: the report's competence gate fails (CAP): CAP at 0.5 66.7% (floor 80.0%); "
        "AUROC ≥ TF-IDF + 0.05 on 1 of 1 pairs"]
    passing = table.with_columns(pl.lit(0.9).alias("cap_05"))
    res = CompetenceBenchResult(passing, ranking, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.0, 0.0, 0.0))
    assert res.gate_lines()[0].startswith("minilm: the report's competence gate passes: CAP at "
                                          "0.5 90.0%")


def test_the_gate_per_size_names_a_pair_policy_moves_and_does_not_count_it():
    table, ranking, caps = competence_by_size(_predictions(), _pool(),
                                              teachers={"minilm": "minilm-wide"})
    # xstest as if it had lost to TF-IDF on a pair label policy moves
    moved = ranking.with_columns(pl.lit(False).alias("beats_baseline"),
                                 pl.lit(True).alias("policy_moved"))
    res = CompetenceBenchResult(table, moved, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.0, 0.0, 0.0))
    # its only pair moved: no pair is left to show ranking, so that measure fails too
    assert res.gate_lines() == [
        "minilm: the report's competence gate fails (CAP, AUROC): CAP at 0.5 66.7% (floor "
        "80.0%); AUROC ≥ TF-IDF + 0.05 on 0 of 0 pairs counted (xstest: moved by label policy, "
        "not counted)"]
    lost = moved.with_columns(pl.lit(False).alias("policy_moved"))
    res = CompetenceBenchResult(table, lost, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.0, 0.0, 0.0))
    assert res.gate_lines()[0].startswith("minilm: the report's competence gate fails (CAP, "
                                          "AUROC)")


def test_the_json_holds_every_printed_table_and_the_gate(tmp_path, monkeypatch, capsys):
    import json

    import guarddiag.bench.competence as bench

    table, ranking, caps = competence_by_size(_predictions(), _pool(),
                                              teachers={"minilm": "minilm-wide"})
    res = CompetenceBenchResult(table, ranking, caps, 0.05, "loose", "decontaminated", "cpu",
                                (0.5, 0.25, 0.0))
    # what the command line writes, through the command line (the bench itself stubbed: it
    # trains for minutes; its result is the hand-checked one above)
    monkeypatch.setattr(bench, "bench_competence", lambda **_: res)
    out = tmp_path / "competence.json"
    assert main(["bench", "competence", "--work-dir", str(tmp_path), "--json", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert (doc["ffr"], doc["mapping"], doc["load"]) == (0.05, "loose", [0.5, 0.25, 0.0])
    sizes = {r["size"]: r for r in doc["sizes"]}
    assert (sizes["minilm"]["cap_ffr"], sizes["minilm"]["cap_05"]) == (
        pytest.approx(2 / 6), pytest.approx(4 / 6))
    assert (sizes["minilm"]["pairs_beaten"], sizes["minilm"]["pairs_counted"]) == (1, 1)
    assert sizes["tfidf"]["copy_gap"] is None
    assert [(r["pair"], r["auroc"], r["baseline_auroc"]) for r in doc["ranking"]] == [
        ("xstest", pytest.approx(1.0), pytest.approx(0.5))]
    assert {r["size"] for r in doc["caps"]} == {"minilm", "tfidf"}
    assert doc["gate"] == [
        "minilm: the report's competence gate fails (CAP): CAP at 0.5 66.7% (floor 80.0%); "
        "AUROC ≥ TF-IDF + 0.05 on 1 of 1 pairs"]
