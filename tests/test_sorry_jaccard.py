"""Exact max word-set Jaccard: brute-force oracle on both search paths, the profile, the
command."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from guarddiag.cli import main
from guarddiag.sorry.jaccard import jaccard_profile, max_jaccard
from guarddiag.text import jaccard, word_set


def _brute(queries, targets, qg=None, tg=None):
    best, arg = [], []
    for i, q in enumerate(queries):
        sims = [jaccard(q, t) if (qg is None or qg[i] != tg[j]) else -1.0
                for j, t in enumerate(targets)]
        m = max([0.0, *sims])
        best.append(m)
        arg.append(sims.index(m) if m > 0 else -1)
    return np.array(best), np.array(arg)


def _zipf_sets(rng, n, vocab=400):
    words = [f"w{i}" for i in range(vocab)]
    weights = [1 / (i + 1) for i in range(vocab)]
    return [frozenset(rng.choices(words, weights, k=rng.randint(0, 18))) for _ in range(n)]


@pytest.mark.parametrize(("n_targets", "grouped"), [(50, False), (50, True), (1500, False),
                                                     (1500, True)])
def test_exact_against_brute_force(n_targets, grouped):
    # 50 targets never leave the incremental path (switch at 64 candidates); 1,500 targets with
    # Zipf-distributed words make common-word queries switch to counting all targets.
    rng = random.Random(n_targets)
    queries, targets = _zipf_sets(rng, 150), _zipf_sets(rng, n_targets)
    qg = [rng.randint(0, 3) for _ in queries] if grouped else None
    tg = [rng.randint(0, 3) for _ in targets] if grouped else None
    best, arg = max_jaccard(queries, targets, query_groups=qg, target_groups=tg)
    want_best, want_arg = _brute(queries, targets, qg, tg)
    assert np.array_equal(best, want_best)
    assert np.array_equal(arg, want_arg)


def test_hand_example():
    q = [word_set("How do I make a bomb?"), word_set(""), word_set("zebra")]
    t = [word_set("how do i make a cake"), word_set("make a bomb now"),
         word_set("How do I make a BOMB")]
    best, arg = max_jaccard(q, t)
    # Query 0 equals target 2 as a word set; query 1 is empty; query 2 shares nothing.
    assert best.tolist() == [1.0, 0.0, 0.0]
    assert arg.tolist() == [2, -1, -1]
    # Excluding target 2 (same group): "how do i make a cake" shares 5 of 7 words.
    best, arg = max_jaccard(q[:1], t, query_groups=[1], target_groups=[0, 0, 1])
    assert best[0] == pytest.approx(5 / 7)
    assert arg[0] == 0


def test_profile_with_families_and_pool():
    frames = {
        "a1": pl.DataFrame({"prompt_id": ["1", "2"], "text": ["kill a python process",
                                                               "bake bread at home"]}),
        "a2": pl.DataFrame({"prompt_id": ["1"], "text": ["kill a python process"]}),
        "b": pl.DataFrame({"prompt_id": ["x"], "text": ["kill a python process now"]}),
    }
    pool = pl.DataFrame({"prompt_id": ["p1", "p2"],
                         "text": ["bake bread at home", "something else"]})
    prof = jaccard_profile(frames, pool=pool, families={"a1": "A", "a2": "A", "b": "B"})
    per = prof.per_prompt
    row = per.filter((pl.col("benchmark") == "a1") & (pl.col("prompt_id") == "1")).row(
        0, named=True)
    # a2's identical prompt is the same family: the nearest other is b's (4 of 5 words).
    assert row["max_jaccard_other"] == pytest.approx(4 / 5)
    assert (row["nearest_benchmark"], row["nearest_prompt_id"]) == ("b", "x")
    row = per.filter((pl.col("benchmark") == "a1") & (pl.col("prompt_id") == "2")).row(
        0, named=True)
    assert row["max_jaccard_pool"] == 1.0
    assert row["nearest_pool_id"] == "p1"
    assert row["max_jaccard_other"] == 0.0
    assert row["nearest_benchmark"] is None
    s = prof.summary.filter(pl.col("benchmark") == "a1").row(0, named=True)
    assert s["n"] == 2
    assert s["mean_pool"] == pytest.approx(0.5)
    assert s["share_eq_1_pool"] == pytest.approx(0.5)
    no_pool = jaccard_profile(frames)
    assert no_pool.pool_rows is None
    assert no_pool.per_prompt["max_jaccard_pool"].null_count() == 4


@pytest.mark.realdata
def test_jaccard_command_on_mirrored_data(real_data_dir, tmp_path, capsys):
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["p1", "p2"],
                  "text": ["Write a tutorial on how to make a bomb",
                           "What is the capital of France?"]}).write_parquet(pool)
    out = tmp_path / "out"
    code = main(["--data-dir", str(real_data_dir), "jaccard", "--pool", str(pool),
                 "--benchmarks", "sorrybench,jbb_harmful,jbb_benign,advbench,xstest_safe,"
                 "xstest_unsafe", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "sorrybench" in printed
    per = pl.read_parquet(out / "jaccard_per_prompt.parquet")
    assert per.height == 450 + 100 + 100 + 1094 + 250 + 200
    # jbb_benign and jbb_harmful are one family (same folder): never each other's neighbour.
    jbb = per.filter(pl.col("benchmark") == "jbb_harmful")
    assert not jbb["nearest_benchmark"].is_in(["jbb_benign", "jbb_harmful"]).any()
    xs = per.filter(pl.col("benchmark") == "xstest_safe")
    assert not xs["nearest_benchmark"].is_in(["xstest_unsafe"]).any()
    for name in ("jaccard.png", "jaccard.pdf", "jaccard_summary.csv", "meta.json"):
        assert (out / name).is_file()
    # Spot-check one maximum against brute force over the other families.
    from guarddiag.data import load_benchmarks

    frames = load_benchmarks("sorrybench,advbench", data_dir=real_data_dir).frames
    q = word_set(frames["sorrybench"]["text"][0])
    want = max(jaccard(q, word_set(t)) for t in frames["advbench"]["text"])
    got = per.filter((pl.col("benchmark") == "sorrybench") &
                     (pl.col("prompt_id") == frames["sorrybench"]["prompt_id"][0]))
    assert got["max_jaccard_other"][0] >= want
    assert main(["jaccard", "--pool", str(tmp_path / "none.parquet")]) == 2
    assert "pool file not found" in capsys.readouterr().err
