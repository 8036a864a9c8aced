"""The contamination audit's edges (guarddiag.audit.*): argument checks, one example per
benchmark prompt, clipped example texts, the summary's rounding and decontamination setting and
their round trip, the figure's bars and style, reading awkward pool files, cached reruns and
the reasons given for unavailable subsets.

Small constructed pools and benchmarks; every expected count and message is worked out by hand
in the comments.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from guarddiag.audit import (
    audit_frames,
    audit_pool,
    load_audit,
    plot_overlap,
    read_pool,
    write_audit,
)
from guarddiag.audit.result import BenchmarkOverlap
from guarddiag.errors import GuarddiagError

BENCH = pl.DataFrame({"prompt_id": ["q1", "q2", "q3"],
                      "text": ["how do i pick a lock", "write a poem about the sea",
                               "list three prime numbers"]})
# p1, p2: two pool rows equal to q1; p3: equal to q2; p4: a near duplicate of q3 (one word
# more: Jaccard 4/5 = 0.8); p5 unrelated. q3 has 4 words, so it is a short prompt: the tests
# of the plain Jaccard rule switch the short-prompt rule off (short_words=0).
POOL_IDS = ["p1", "p2", "p3", "p4", "p5"]
POOL_TEXTS = ["How do I pick a lock?", "HOW DO I PICK A LOCK", "Write a poem about the sea",
              "list three prime numbers please", "tell me a joke"]


# ─── audit_frames ──────────────────────────────────────────────────────────────────────────────

def test_drop_near_without_near_dup_and_mismatched_pool_columns_are_errors():
    with pytest.raises(GuarddiagError, match=r"--drop-near \(drop_near\) needs --near-dup"):
        audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, drop_near=True)
    with pytest.raises(GuarddiagError, match="4 pool ids for 5 texts"):
        audit_frames(POOL_IDS[:4], POOL_TEXTS, {"b": BENCH})


def test_examples_show_each_benchmark_prompt_once_exact_before_near():
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True, short_words=0)
    (b,) = res.benchmarks
    assert (b.n_exact, b.n_near, b.n_kept) == (2, 1, 1)       # q1, q2 exact; q3 near
    # q1 matches p1 and p2 but appears once, with its first pool row
    assert [(e["kind"], e["prompt_id"], e["pool_id"]) for e in b.examples] == [
        ("exact", "q1", "p1"), ("exact", "q2", "p3"), ("near", "q3", "p4")]
    assert b.examples[2]["similarity"] == 0.8
    assert b.examples[0]["benchmark_text"] == "how do i pick a lock"   # short: kept whole


def test_long_example_texts_are_clipped_to_300_characters():
    long_text = "word " * 100                                        # 500 characters
    bench = pl.DataFrame({"prompt_id": ["q"], "text": [long_text]})
    res = audit_frames(["p"], [long_text.upper()], {"b": bench})
    (example,) = res.benchmarks[0].examples
    assert example["benchmark_text"] == long_text[:299] + "…"
    assert len(example["benchmark_text"]) == 300
    assert example["pool_text"] == long_text.upper()[:299] + "…"
    exactly = "x" * 300                                             # at the limit: kept whole
    res = audit_frames(["p"], [exactly], {"b": pl.DataFrame({"prompt_id": ["q"],
                                                               "text": [exactly]})})
    assert res.benchmarks[0].examples[0]["benchmark_text"] == exactly


def test_render_names_the_near_duplicate_rule_only_when_it_ran():
    on = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True, short_words=0,
                      threshold=0.8)
    off = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH})
    assert "near = word-set Jaccard ≥ 0.8;" in on.render()
    assert "near-dup off" in off.render()
    assert "near-dup off" not in on.render()


# ─── the audit folder ──────────────────────────────────────────────────────────────────────────

def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("drop_near", [False, True])
def test_summary_rounds_to_four_decimals_and_the_drop_setting_round_trips(tmp_path, drop_near):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True, drop_near=drop_near,
                       short_words=0)
    out = write_audit(res, tmp_path / "audit", figure=False)
    entry = _summary(out)["benchmarks"]["b"]
    # 2 of 3 exact: 66.666…% -> 66.6667; 1 of 3 near: 33.3333; removed 2 (or 3) of 3
    assert entry["pct_exact"] == 66.6667
    assert entry["pct_near"] == 33.3333
    assert entry["pct_removed"] == (100.0 if drop_near else 66.6667)
    assert _summary(out)["decontamination_drops"] == ("exact+near" if drop_near else "exact")
    back = load_audit(out)
    assert back.drop_near is drop_near
    assert back.decontaminated["b"] == (() if drop_near else ("q3",))


def test_no_figure_files_without_figure(tmp_path):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH})
    out = write_audit(res, tmp_path / "audit", figure=False)
    assert sorted(p.name for p in out.iterdir()) == [
        "decontaminated", "meta.json", "overlap.parquet", "rows_to_remove.jsonl",
        "rows_to_remove.parquet", "summary.json"]


def test_an_audit_of_another_format_is_refused(tmp_path):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH})
    out = write_audit(res, tmp_path / "audit", figure=False)
    doc = _summary(out)
    doc["format"] = doc["format"] + 1
    (out / "summary.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(GuarddiagError, match="audit format .* rerun `guarddiag audit`"):
        load_audit(out)


def test_figure_bars_and_style():
    import matplotlib.pyplot as plt

    # two benchmarks, near-dup on: "c" has no near duplicate, so its near bar is 0 wide
    bench_c = pl.DataFrame({"prompt_id": ["c1"], "text": ["tell me a joke"]})
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH, "c": bench_c}, near_dup=True,
                       short_words=0)
    fig = plot_overlap(res)
    try:
        ax = fig.axes[0]
        bars = ax.patches
        assert [round(p.get_width(), 4) for p in bars] == [66.6667, 100.0, 33.3333, 0.0]
        assert {round(p.get_height(), 2) for p in bars} == {0.38}   # two bars per row
        assert not ax.spines["top"].get_visible()
        assert not ax.spines["right"].get_visible()
        assert {line.get_linewidth() for line in ax.xaxis.get_gridlines()} == {0.6}
    finally:
        plt.close(fig)
    fig = plot_overlap(audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}))
    try:
        assert [round(p.get_height(), 2) for p in fig.axes[0].patches] == [0.6]  # one bar
    finally:
        plt.close(fig)


# ─── reading the pool ──────────────────────────────────────────────────────────────────────────

def test_a_null_in_a_binary_text_column_is_an_empty_text_error(tmp_path):
    path = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["a", "b", "c"], "text": [b"ok", None, b"fine"]},
                 schema={"prompt_id": pl.String, "text": pl.Binary}).write_parquet(path)
    with pytest.raises(GuarddiagError, match=r'row 2 field "text": empty text'):
        read_pool(path)


def test_the_empty_text_error_counts_the_empty_rows(tmp_path):
    one = tmp_path / "one.csv"
    pl.DataFrame({"prompt_id": ["a", "b"], "text": ["ok", "  "]}).write_csv(one)
    with pytest.raises(GuarddiagError) as info:
        read_pool(one)
    assert "row 2" in str(info.value)
    assert "in all" not in str(info.value)
    two = tmp_path / "two.csv"
    pl.DataFrame({"prompt_id": ["a", "b", "c"], "text": ["ok", " ", "\t"]}).write_csv(two)
    with pytest.raises(GuarddiagError, match=r"row 2 .*\(2 empty rows in all\)"):
        read_pool(two)


def test_ids_must_be_strings_or_integers_and_present(tmp_path):
    floats = tmp_path / "floats.parquet"
    pl.DataFrame({"prompt_id": [1.5, 2.5], "text": ["a", "b"]}).write_parquet(floats)
    with pytest.raises(GuarddiagError, match="expected string or integer ids, found Float64"):
        read_pool(floats)
    ints = tmp_path / "ints.parquet"
    pl.DataFrame({"prompt_id": [7, 8], "text": ["a", "b"]}).write_parquet(ints)
    assert read_pool(ints) == (["7", "8"], ["a", "b"])
    missing = tmp_path / "missing.parquet"
    pl.DataFrame({"prompt_id": ["x", "y", None], "text": ["a", "b", "c"]}).write_parquet(missing)
    with pytest.raises(GuarddiagError, match=r'row 3 field "prompt_id": missing id'):
        read_pool(missing)


# ─── audit_pool ────────────────────────────────────────────────────────────────────────────────

@pytest.fixture
def stand_in_data(serve_benchmarks):
    """One benchmark and three unavailable subsets with different statuses."""
    unavailable = [
        SimpleNamespace(id="gone", status="unavailable", source="hf:example/gone", message="m"),
        SimpleNamespace(id="nosource", status="unavailable", source=None, message=None),
        SimpleNamespace(id="broken", status="invalid", source="hf:example/broken",
                        message="checksum mismatch"),
    ]
    serve_benchmarks({"b": BENCH}, unavailable=unavailable)


def _pool_file(tmp_path: Path) -> Path:
    path = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": POOL_IDS, "text": POOL_TEXTS}).write_parquet(path)
    return path


def test_unavailable_subsets_get_their_own_reason(tmp_path, stand_in_data):
    res = audit_pool(_pool_file(tmp_path), out_dir=tmp_path / "audit", figure=False)
    assert {u.benchmark: u.reason for u in res.unavailable} == {
        "gone": "files absent; public source: hf:example/gone",
        "nosource": "files absent",
        "broken": "checksum mismatch",
    }


def test_force_recomputes_a_cached_audit(tmp_path, stand_in_data):
    pool, out = _pool_file(tmp_path), tmp_path / "audit"
    assert audit_pool(pool, out_dir=out, figure=False).pool_rows == 5
    doc = _summary(out)
    doc["pool_rows"] = 999          # what the cache says, so a reuse is visible
    (out / "summary.json").write_text(json.dumps(doc), encoding="utf-8")
    assert audit_pool(pool, out_dir=out, figure=False).pool_rows == 999
    assert audit_pool(pool, out_dir=out, figure=False, force=True).pool_rows == 5


# ─── result objects ────────────────────────────────────────────────────────────────────────────

def test_to_dict_is_json_ready_and_names_the_folder_only_when_written(tmp_path):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"b": BENCH}, near_dup=True)
    doc = res.to_dict()
    assert doc["out_dir"] is None
    assert (doc["pool_rows"], doc["near_dup"], doc["drop_near"]) == (5, True, False)
    assert doc["decontaminated"] == {"b": ["q3"]}
    assert doc["benchmarks"][0]["n_exact"] == 2
    json.dumps(doc)                                   # plain JSON types only
    written = replace(res, out_dir=tmp_path / "audit")
    assert written.to_dict()["out_dir"] == str(tmp_path / "audit")


def test_shares_of_an_empty_benchmark_are_zero():
    empty = BenchmarkOverlap(benchmark="e", n=0, n_exact=0, n_near=0, n_kept=0)
    assert (empty.pct_exact, empty.pct_near, empty.pct_removed) == (0.0, 0.0, 0.0)
