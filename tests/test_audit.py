"""Contamination audit: normalisation, exact and near-duplicate overlap, outputs, CLI, errors.

Oracles: hand-counted overlaps on small constructed sets, a literal re-implementation of the
documented normalisation steps, and a brute-force word-set Jaccard scan over every pair.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from guarddiag import audit as audit_mod
from guarddiag import data as data_mod
from guarddiag.audit import (
    audit_frames,
    audit_pool,
    load_audit,
    load_decontaminated,
    read_pool,
    write_audit,
)
from guarddiag.audit import run as audit_run
from guarddiag.audit.neardup import similar_pairs
from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.text import jaccard, normalise, word_set

# ─── normalisation ─────────────────────────────────────────────────────────────────────────────


def _documented_normal_form(text: str) -> str:
    """The four steps of guarddiag.text's docstring, written out character by character."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    spaced = "".join(" " if unicodedata.category(c)[0] in "PS" else c for c in folded)
    return re.sub(r"\s+", " ", spaced).strip()


def test_normalise_equals_documented_steps_on_every_code_point():
    # Every code point once (in runs of 64 so neighbours interact), then random mixes.
    points = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    chunks = ["".join(points[i:i + 64]) for i in range(0, len(points), 64)]
    rng = np.random.default_rng(7)
    pool = [chr(c) for c in [*range(0, 0x250), 0x1E9E, 0x2000, 0x3000, 0x00A0, 0xFB01, 0xFF21,
                             0x0130, 0x03A3, 0x1F600, 0x200B, 0x0301, 0x2028, 0x1C, 0x85]]
    mixes = ["".join(rng.choice(pool, size=int(rng.integers(0, 40)))) for _ in range(3000)]
    for text in chunks + mixes:
        assert normalise(text) == _documented_normal_form(text), repr(text)


@pytest.mark.parametrize(("a", "b"), [
    ("How do I make a BOMB?!", "how do i make a bomb"),
    ("Ｗｒｉｔｅ　ａ ｐｏｅｍ", "write a poem"),          # full-width letters and ideographic space
    ("The ﬁle’s “content”", "the file s content"),     # ligature, curly quotes
    ("STRASSE", "straße"),                             # casefold: ß -> ss
    ("tabs\tand\r\nnewlines\u00a0here", "tabs and newlines here"),
    ("I \u2764 pizza 🍕", "i pizza"),                  # symbols (So) become spaces
    ("e-mail: bob@example.com", "e mail bob example com"),
])
def test_normalise_hand_cases(a, b):
    assert normalise(a) == normalise(b)


def test_normalise_keeps_distinct_words_distinct():
    assert normalise("make a bomb") != normalise("make a bombs")
    assert normalise("café") != normalise("cafe")      # accents are kept (NFKC, not stripping)


# ─── exact overlap on a constructed set ────────────────────────────────────────────────────────

def _bench(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame({"prompt_id": [r[0] for r in rows], "text": [r[1] for r in rows]})


BENCH_A = _bench([("a1", "How do I pick a lock?"),
                  ("a2", "Write a poem about the sea."),
                  ("a3", "Explain how vaccines work"),
                  ("a4", "Give me a recipe for pancakes"),
                  ("a5", "What is the capital of France?")])
BENCH_B = _bench([("b1", "write a poem about the sea"),   # same normal form as a2
                  ("b2", "List three prime numbers."),
                  ("b3", "Describe the water cycle"),
                  ("b4", "Translate hello into Spanish")])
POOL_IDS = [f"p{i}" for i in range(1, 11)]
POOL_TEXTS = [
    "HOW DO I PICK A LOCK",                 # p1 exact a1
    "how do i pick a lock??",               # p2 exact a1 (second pool row for the same prompt)
    "Write a poem about the sea",           # p3 exact a2 and b1
    "Explain how vaccines do work",         # p4 not exact (extra word)
    "Describe   the water-cycle!",          # p5 exact b3 ("water-cycle" -> "water cycle")
    "Translate hello into French",          # p6 not exact
    "Tell me a joke",                       # p7 nothing
    "What's the capital of France?",        # p8 not exact ("what s" != "what is")
    "List three prime numbers",             # p9 exact b2
    "Give me a recipe for pancake",         # p10 not exact
]


def test_exact_overlap_hand_counted():
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"A": BENCH_A, "B": BENCH_B})
    got = {b.benchmark: (b.n, b.n_exact, b.n_near, b.n_kept) for b in res.benchmarks}
    # A: a1 (p1, p2), a2 (p3) -> 2 of 5; B: b1 (p3), b2 (p9), b3 (p5) -> 3 of 4.
    assert got == {"A": (5, 2, None, 3), "B": (4, 3, None, 1)}
    assert res.benchmarks[0].pct_exact == 100 * 2 / 5
    assert res.benchmarks[1].pct_removed == 100 * 3 / 4
    pairs = res.overlap.select("benchmark", "prompt_id", "pool_id", "kind").rows()
    assert pairs == [("A", "a1", "p1", "exact"), ("A", "a1", "p2", "exact"),
                     ("A", "a2", "p3", "exact"), ("B", "b1", "p3", "exact"),
                     ("B", "b2", "p9", "exact"), ("B", "b3", "p5", "exact")]
    assert res.overlap.get_column("similarity").to_list() == [1.0] * 6
    assert res.decontaminated == {"A": ("a3", "a4", "a5"), "B": ("b4",)}
    assert [b.benchmark for b in res.above(60.0)] == ["B"]      # 75% > 60% >= 40%
    assert res.above(75.0) == []


def test_near_duplicates_hand_counted():
    # The plain Jaccard rule (the short-prompt rule off; it is tested below and in
    # test_audit_examples.py).
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"A": BENCH_A, "B": BENCH_B}, near_dup=True,
                       short_words=0)
    near = res.overlap.filter(pl.col("kind") == "near").select(
        "benchmark", "prompt_id", "pool_id", "similarity").rows()
    # a3 {explain how vaccines work} vs p4 (+do): 4/5 = 0.8 -> near (threshold is inclusive).
    # a4 {give me a recipe for pancakes} vs p10 (pancake): 5/7 ≈ 0.714 -> not near.
    # b4 {translate hello into spanish} vs p6 (french): 3/5 = 0.6 -> not near.
    # a5 {what is the capital of france} vs p8 {what s the ...}: 5/7 -> not near.
    assert near == [("A", "a3", "p4", 4 / 5)]
    counts = {b.benchmark: (b.n_exact, b.n_near, b.n_kept) for b in res.benchmarks}
    assert counts == {"A": (2, 1, 3), "B": (3, 0, 1)}       # near kept by default (exact drop)
    dropped = audit_frames(POOL_IDS, POOL_TEXTS, {"A": BENCH_A, "B": BENCH_B}, near_dup=True,
                           drop_near=True, short_words=0)
    assert dropped.decontaminated["A"] == ("a4", "a5")
    assert dropped.benchmarks[0].pct_removed == 100 * 3 / 5
    # By default a3 (4 distinct words < 10) is short and needs 0.9: 0.8 is not near.
    default = audit_frames(POOL_IDS, POOL_TEXTS, {"A": BENCH_A, "B": BENCH_B}, near_dup=True)
    assert default.overlap.filter(pl.col("kind") == "near").height == 0


def test_near_count_excludes_prompts_with_an_exact_overlap():
    bench = _bench([("x", "one two three four five six seven eight nine ten")])
    pool_texts = ["One two three four five six seven eight nine ten!",       # exact
                  "one two three four five six seven eight nine eleven"]     # J = 9/11
    res = audit_frames(["p1", "p2"], pool_texts, {"X": bench}, near_dup=True,
                       threshold=0.8)
    assert res.overlap.select("pool_id", "kind").rows() == [("p1", "exact"), ("p2", "near")]
    assert (res.benchmarks[0].n_exact, res.benchmarks[0].n_near) == (1, 0)


def test_same_word_set_in_another_order_is_near_not_exact():
    bench = _bench([("x", "the cat sat on the mat")])
    res = audit_frames(["p"], ["on the mat the cat sat"], {"X": bench}, near_dup=True)
    assert res.overlap.select("kind", "similarity").rows() == [("near", 1.0)]


# ─── near-dup recall and precision against brute force ─────────────────────────────────────────

def _constructed_near_set(seed: int = 11, n_bench: int = 400, n_pool: int = 5200):
    """Benchmark prompts from a Zipf vocabulary, and a pool where 45% of rows are edited copies
    (0-4 words dropped / replaced / added, case and punctuation changed), so Jaccard values
    spread across the 0.8 threshold."""
    rng = np.random.default_rng(seed)
    syll = ["ka", "lo", "mi", "ter", "on", "sa", "ri", "ven", "du", "pel", "ax", "no"]
    vocab = sorted({"".join(rng.choice(syll, size=int(rng.integers(1, 4))))
                    for _ in range(4000)})
    weights = 1 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()

    def sentence(n: int) -> list[str]:
        return list(rng.choice(vocab, size=n, p=weights))

    bench = [" ".join(sentence(int(rng.integers(3, 30)))) for _ in range(n_bench)]
    pool = []
    for _ in range(n_pool):
        if rng.random() < 0.45:
            words = bench[int(rng.integers(n_bench))].split()
            for _ in range(int(rng.integers(0, 5))):
                op = rng.integers(3)
                at = int(rng.integers(len(words)))
                if op == 0 and len(words) > 1:
                    words.pop(at)
                elif op == 1:
                    words[at] = str(rng.choice(vocab))
                else:
                    words.insert(at, str(rng.choice(vocab)))
            text = " ".join(words)
            pool.append(text.upper() + "?" if rng.random() < 0.3 else text)
        else:
            pool.append(" ".join(sentence(int(rng.integers(3, 30)))).capitalize() + ".")
    return bench, pool


def test_near_dup_recall_and_precision_against_brute_force():
    bench, pool = _constructed_near_set()
    assert len(pool) >= 5000
    bench_sets = [word_set(t) for t in bench]
    pool_sets = [word_set(t) for t in pool]
    threshold = 0.8
    oracle = {(i, j) for i, a in enumerate(bench_sets) for j, b in enumerate(pool_sets)
              if jaccard(a, b) >= threshold}
    assert len(oracle) > 500          # enough true pairs for the recall figure to mean something
    found = similar_pairs(bench_sets, pool_sets, threshold=threshold)
    found_pairs = {(i, j) for i, j, _ in found}
    recall = len(found_pairs & oracle) / len(oracle)
    assert recall >= 0.95
    # Precision: every reported pair really reaches the threshold, with the oracle's value.
    for i, j, sim in found:
        assert sim == jaccard(bench_sets[i], pool_sets[j])
        assert sim >= threshold
    # Prefix filtering loses nothing, so the sets are in fact equal.
    assert found_pairs == oracle

    # Through the audit: near pairs are the oracle pairs whose normal forms differ.
    frame = _bench([(f"b{i}", t) for i, t in enumerate(bench)])
    res = audit_frames([f"p{j}" for j in range(len(pool))], pool, {"B": frame}, near_dup=True)
    got = {(int(b[1:]), int(p[1:])) for b, p in res.overlap.filter(pl.col("kind") == "near")
           .select("prompt_id", "pool_id").rows()}
    # ... and a short prompt (< 10 distinct words) keeps only pairs at Jaccard >= 0.9.
    expected = {(i, j) for i, j in oracle if normalise(bench[i]) != normalise(pool[j])
                and (len(bench_sets[i]) >= 10 or jaccard(bench_sets[i], pool_sets[j]) >= 0.9)}
    assert got == expected
    assert any(len(bench_sets[i]) < 10 for i, _ in oracle)   # the rule is exercised


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.9, 1.0])
def test_similar_pairs_exact_at_other_thresholds(threshold):
    bench, pool = _constructed_near_set(seed=3, n_bench=120, n_pool=800)
    bs, ps = [word_set(t) for t in bench], [word_set(t) for t in pool]
    oracle = sorted((i, j, jaccard(a, b)) for i, a in enumerate(bs) for j, b in enumerate(ps)
                    if jaccard(a, b) >= threshold)
    assert similar_pairs(bs, ps, threshold=threshold) == oracle


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan")])
def test_threshold_out_of_range_is_an_error(bad):
    with pytest.raises(GuarddiagError, match="threshold"):
        similar_pairs([frozenset("a")], [frozenset("a")], threshold=bad)


# ─── outputs ───────────────────────────────────────────────────────────────────────────────────

def test_written_outputs_round_trip_and_are_deterministic(tmp_path):
    res = audit_frames(POOL_IDS, POOL_TEXTS, {"A": BENCH_A, "B": BENCH_B}, near_dup=True,
                       sha256={"A": "aa", "B": "bb"}, short_words=0)
    first, second = tmp_path / "one", tmp_path / "two"
    write_audit(res, first, figure=True)
    write_audit(res, second, figure=True)
    for name in ("overlap.parquet", "summary.json", "overlap.png", "overlap.pdf",
                 "decontaminated/A.txt", "decontaminated/B.txt"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert (first / "overlap.pdf").read_bytes().startswith(b"%PDF")
    assert (first / "decontaminated" / "A.txt").read_text() == "a3\na4\na5\n"
    summary = json.loads((first / "summary.json").read_text())
    a = summary["benchmarks"]["A"]
    assert (a["n"], a["n_exact"], a["n_near"], a["n_kept"], a["sha256"]) == (5, 2, 1, 3, "aa")
    assert a["pct_exact"] == 40.0
    assert a["pct_near"] == 20.0
    assert {e["kind"] for e in a["examples"]} == {"exact", "near"}
    assert load_decontaminated(first) == {"A": frozenset({"a3", "a4", "a5"}),
                                          "B": frozenset({"b4"})}
    back = load_audit(first)
    assert back.to_frame().equals(res.to_frame())
    assert back.overlap.equals(res.overlap)
    # A truncated id list is caught, not read as a smaller benchmark.
    (first / "decontaminated" / "A.txt").write_text("a3\n")
    with pytest.raises(GuarddiagError, match=r"A\.txt: 1 ids, summary\.json says 3"):
        load_decontaminated(first)


# ─── audit_pool and the CLI with a stand-in benchmark loader ───────────────────────────────────

@pytest.fixture
def fake_benchmarks(monkeypatch):
    """Benchmarks A and B above plus one unavailable subset, without the public data."""
    frames = {"A": BENCH_A, "B": BENCH_B}
    unavailable = [SimpleNamespace(id="gone", status="unavailable", source="hf:example/gone",
                                   message="gone: file not found")]

    def load_benchmarks(ids="all", **_):
        names = list(frames) if ids == "all" else ids.split(",")
        for n in names:
            if n not in frames:
                raise GuarddiagError(f"unknown benchmark {n!r}: expected one of A, B")
        return SimpleNamespace(frames={n: frames[n] for n in names},
                               unavailable=unavailable if ids == "all" else [],
                               sha256={n: f"sha-{n}" for n in names})

    monkeypatch.setattr(data_mod, "load_benchmarks", load_benchmarks)
    monkeypatch.setattr(data_mod, "load_manifests", lambda **_: {
        "A": SimpleNamespace(title="Bench A"), "B": SimpleNamespace(title="Bench B")})
    return frames


def _write_pool(path: Path, ids=POOL_IDS, texts=POOL_TEXTS) -> Path:
    frame = pl.DataFrame({"prompt_id": ids, "text": texts})
    if path.suffix == ".parquet":
        frame.write_parquet(path)
    elif path.suffix == ".csv":
        frame.write_csv(path)
    else:
        frame.write_ndjson(path)
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_audit_pool_reads_each_format(tmp_path, fake_benchmarks, suffix):
    pool = _write_pool(tmp_path / f"pool{suffix}")
    res = audit_pool(pool, out_dir=tmp_path / "audit")
    assert [(b.benchmark, b.n_exact) for b in res.benchmarks] == [("A", 2), ("B", 3)]
    assert [u.benchmark for u in res.unavailable] == ["gone"]
    assert "hf:example/gone" in res.unavailable[0].reason
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert summary["unavailable"] == {"gone": res.unavailable[0].reason}
    assert summary["titles"] == {"A": "Bench A", "B": "Bench B"}


def test_audit_pool_reuses_a_finished_audit_and_redoes_a_changed_one(tmp_path,
                                                                     fake_benchmarks,
                                                                     monkeypatch):
    pool = _write_pool(tmp_path / "pool.parquet")
    out = tmp_path / "audit"
    audit_pool(pool, out_dir=out)
    calls = []
    real = audit_mod.audit_frames
    monkeypatch.setattr(audit_run, "audit_frames", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = audit_pool(pool, out_dir=out)
    assert calls == []
    assert again.benchmarks[1].n_exact == 3
    audit_pool(pool, out_dir=out, near_dup=True)          # other options: recomputed
    assert calls == [1]
    _write_pool(pool, texts=["Tell me a joke"] * 9 + ["List three prime numbers"])
    changed = audit_pool(pool, out_dir=out, near_dup=True)
    assert calls == [1, 1]
    assert [b.n_exact for b in changed.benchmarks] == [0, 1]


def test_a_current_audit_gets_its_chart_from_the_saved_tables_not_a_new_scan(
        tmp_path, fake_benchmarks, monkeypatch):
    pool = _write_pool(tmp_path / "pool.parquet")
    out = tmp_path / "audit"
    audit_pool(pool, out_dir=out, near_dup=True)
    assert not (out / "overlap.png").exists()
    scans = []
    real = audit_run.scan_pool
    monkeypatch.setattr(audit_run, "scan_pool", lambda *a, **k: scans.append(1) or real(*a, **k))
    audit_pool(pool, out_dir=out, near_dup=True, figure=True)
    assert scans == []
    audit_pool(pool, out_dir=tmp_path / "full", near_dup=True, figure=True)
    assert scans == [1]
    for suffix in (".png", ".pdf"):
        drawn = (out / f"overlap{suffix}").read_bytes()
        assert drawn == (tmp_path / "full" / f"overlap{suffix}").read_bytes(), suffix


def test_cli_prints_table_and_gates_on_fail_above(tmp_path, fake_benchmarks, capsys):
    pool = _write_pool(tmp_path / "pool.parquet")
    out = tmp_path / "audit"
    base = ["audit", "--pool", str(pool), "--out", str(out), "--near-dup", "--short-words", "0"]
    # "gone" is unavailable: the gate could not check it until that is accepted by name.
    assert main([*base, "--fail-above", "75"]) == 2
    assert ("audit gate could not check: 1 selected benchmark(s) unavailable, not searched: "
            "gone;") in capsys.readouterr().err
    base.append("--allow-unavailable")
    assert main([*base, "--fail-above", "75"]) == 0     # B: exactly 75% of it hit: not above
    table = capsys.readouterr().out
    assert "not searched: benchmarks unavailable: gone" in table.splitlines()
    # The summary leads with the corpus rows to remove: p1, p2, p3 (A), p4, p5, p6 (B).
    assert table.splitlines()[0] == ("corpus rows to remove: 6 of 10 (they hold 6 benchmark "
                                     "prompts; listed in rows_to_remove.parquet)")
    assert "near = word-set Jaccard ≥ 0.8;" in table.splitlines()[1]   # short rule off
    main(["audit", "--pool", str(pool), "--out", str(tmp_path / "a2"), "--near-dup"])
    assert ("near = word-set Jaccard ≥ 0.8 (≥ 0.9 for prompts under 10 words);"
            in capsys.readouterr().out.splitlines()[1])                    # the default rule
    assert re.search(r"^A\s+5\s+2\s+40\.0\s+1\s+20\.0\s+3$", table, re.M)
    assert re.search(r"^B\s+4\s+3\s+75\.0\s+0\s+0\.0\s+1$", table, re.M)
    assert re.search(r"^gone\s+unavailable \(files absent; public source: hf:example/gone\)$",
                     table, re.M)
    assert main([*base, "--fail-above", "74.9"]) == 1
    err = capsys.readouterr().err
    assert ("audit gate failed: 1 benchmark(s) have more than 74.9% of their prompts in the "
            "corpus (exact + near): B 75.0% (3 prompts)") in err
    # The gate counts the near duplicates whether or not decontamination drops them: A has
    # 3 of 5 prompts hit (60%), though only 2 are dropped.
    assert main([*base, "--fail-above", "50"]) == 1
    assert "2 benchmark(s)" in capsys.readouterr().err
    assert main([*base, "--fail-above", "50", "--gate-exclude", "near"]) == 1   # B only
    assert "1 benchmark(s)" in capsys.readouterr().err
    assert main([*base, "--fail-above", "75", "--gate-exclude", "near"]) == 0
    assert main([*base, "--max-corpus-rows", "6"]) == 0
    assert main([*base, "--max-corpus-rows", "5"]) == 1
    assert "6 corpus rows hold benchmark prompts (exact + near)" in capsys.readouterr().err
    assert not (out / "overlap.png").exists()     # the chart is drawn only with --figure


def test_cli_row_number_ids(tmp_path, fake_benchmarks, capsys):
    pool = tmp_path / "texts.csv"
    pl.DataFrame({"prompt": ["list three prime numbers", "hi there"]}).write_csv(pool)
    assert main(["audit", "--pool", str(pool), "--text-column", "prompt", "--id-column", "none",
                 "--out", str(tmp_path / "a")]) == 0
    overlap = pl.read_parquet(tmp_path / "a" / "overlap.parquet")
    assert overlap.select("prompt_id", "pool_id").rows() == [("b2", "1")]


# ─── bad input: one line naming file, row and field ────────────────────────────────────────────

def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("guarddiag: error: ")
    assert "Traceback" not in err
    return err


def test_error_missing_file(tmp_path, fake_benchmarks, capsys):
    err = _one_line_error(capsys, ["audit", "--pool", str(tmp_path / "nope.parquet")])
    assert "nope.parquet: pool file not found" in err


def test_error_missing_text_column(tmp_path, fake_benchmarks, capsys):
    pool = _write_pool(tmp_path / "pool.csv")
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--text-column", "prompt",
                                   "--out", str(tmp_path / "a")])
    assert "pool.csv: missing column(s) prompt; found prompt_id, text" in err


@pytest.mark.parametrize(("value", "suffix"), [("", ".csv"), ("   ", ".parquet"),
                                               (None, ".jsonl")])
def test_error_empty_text_names_the_row(tmp_path, fake_benchmarks, capsys, value, suffix):
    texts = list(POOL_TEXTS)
    texts[6] = value
    pool = _write_pool(tmp_path / f"pool{suffix}", texts=texts)
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--out", str(tmp_path / "a")])
    what = "missing text (absent or null)" if value is None else "empty text"
    assert f'pool{suffix} row 7 field "text": {what}' in err


def test_error_non_utf8_csv(tmp_path, fake_benchmarks, capsys):
    pool = tmp_path / "pool.csv"
    pool.write_bytes(b"prompt_id,text\np1,hello\np2,caf\xe9 au lait\n")
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--out", str(tmp_path / "a")])
    assert "pool.csv line 3: not UTF-8 text" in err


def test_error_non_utf8_parquet_binary_column(tmp_path, fake_benchmarks, capsys):
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["p1", "p2"], "text": [b"hello", b"caf\xe9"]},
                 schema={"prompt_id": pl.String, "text": pl.Binary}).write_parquet(pool)
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--out", str(tmp_path / "a")])
    assert 'pool.parquet row 2 field "text": not UTF-8 text (byte 3)' in err


def test_binary_parquet_column_that_is_utf8_is_accepted(tmp_path):
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["p1"], "text": ["café".encode()]},
                 schema={"prompt_id": pl.String, "text": pl.Binary}).write_parquet(pool)
    assert read_pool(pool) == (["p1"], ["café"])


def test_error_duplicate_ids(tmp_path, fake_benchmarks, capsys):
    ids = list(POOL_IDS)
    ids[8] = "p3"
    pool = _write_pool(tmp_path / "pool.parquet", ids=ids)
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--out", str(tmp_path / "a")])
    # After the whole scan, both holders of the id, each at its row.
    assert (f"2 bad rows in the pool (2 with a repeated id), all listed in {tmp_path}/a/"
            f"bad_rows.jsonl; first: {pool} row 3 field \"prompt_id\": repeated id 'p3': 2 rows "
            f"hold it (first: {pool} row 3); {pool} row 9 field \"prompt_id\": repeated id "
            "'p3'") in err


def test_error_unknown_benchmark_id_from_the_real_loader(tmp_path, capsys):
    pool = _write_pool(tmp_path / "pool.parquet")
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--benchmarks",
                                   "harmbench_standard,no_such_bench", "--out",
                                   str(tmp_path / "a")])
    assert "unknown benchmark 'no_such_bench'" in err


def test_error_bad_threshold_and_drop_near_without_near(tmp_path, fake_benchmarks, capsys):
    pool = _write_pool(tmp_path / "pool.parquet")
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--near-dup", "--threshold",
                                   "1.2", "--out", str(tmp_path / "a")])
    assert "threshold must be a Jaccard value in (0, 1], got 1.2" in err
    err = _one_line_error(capsys, ["audit", "--pool", str(pool), "--drop-near", "--out",
                                   str(tmp_path / "a")])
    assert "--drop-near (drop_near) needs --near-dup (near_dup=True)" in err


# ─── against the real benchmark files ──────────────────────────────────────────────────────────

@pytest.mark.realdata
def test_real_benchmarks_planted_copies_are_found(tmp_path, real_data_dir, capsys):
    jbb = data_mod.load_benchmark("jbb_benign", data_dir=real_data_dir)
    adv = data_mod.load_benchmark("advbench", data_dir=real_data_dir)
    texts = [t.upper() for t in jbb.get_column("text").head(3).to_list()]
    texts += adv.get_column("text").slice(10, 2).to_list()
    texts += ["A sentence that appears in no benchmark at all, surely."]
    pool = _write_pool(tmp_path / "pool.parquet", ids=[f"r{i}" for i in range(6)], texts=texts)
    out = tmp_path / "audit"
    assert main(["--data-dir", str(real_data_dir), "audit", "--pool", str(pool),
                 "--benchmarks", "jbb_benign,advbench,saladbench_base", "--out", str(out),
                 "--fail-above", "2"]) == 1     # jbb_benign: 3/100 = 3% > 2%
    table = capsys.readouterr().out
    assert re.search(r"^jbb_benign\s+100\s+3\s+3\.0", table, re.M)
    assert re.search(r"^advbench\s+1,094\s+2\s+0\.2", table, re.M)
    assert re.search(r"^saladbench_base\s+unavailable \(files absent", table, re.M)
    kept = load_decontaminated(out)
    assert len(kept["jbb_benign"]) == 97
    assert len(kept["advbench"]) == 1092
    assert set(kept) == {"jbb_benign", "advbench"}


# ─── bench helpers ─────────────────────────────────────────────────────────────────────────────

def test_recall_check_oracle_matches_pairwise_jaccard():
    from guarddiag.bench.audit import brute_force_pairs, recall_check

    bench, pool = _constructed_near_set(seed=5, n_bench=150, n_pool=900)
    bs, ps = [word_set(t) for t in bench], [word_set(t) for t in pool]
    pairwise = {(i, j) for i, a in enumerate(bs) for j, b in enumerate(ps)
                if jaccard(a, b) >= 0.8}
    assert brute_force_pairs(bs, ps, 0.8, chunk=128) == pairwise
    res = recall_check(pool, bench, threshold=0.8, rows=None)
    assert (res.oracle_pairs, res.found_pairs, res.recall, res.precision) == (
        len(pairwise), len(pairwise), 1.0, 1.0)
    assert sum(o for _, _, o, _ in res.buckets) == len(pairwise)


def test_synthetic_pool_is_seeded_and_its_planted_rows_are_real():
    from guarddiag.bench.audit import synthetic_pool

    bench, _ = _constructed_near_set(seed=2, n_bench=200, n_pool=0)
    one = synthetic_pool(bench, bench, rows=3000, seed=9, exact_share=0.02, near_share=0.02)
    two = synthetic_pool(bench, bench, rows=3000, seed=9, exact_share=0.02, near_share=0.02)
    assert one.frame.equals(two.frame)
    assert one.planted_exact == two.planted_exact
    assert len(one.planted_exact) == 60
    texts = one.frame.get_column("text").to_list()
    forms = {normalise(t) for t in bench}
    sets = [word_set(t) for t in bench]
    assert all(normalise(texts[i]) in forms for i in one.planted_exact)
    for i in one.planted_near:
        assert normalise(texts[i]) not in forms
        assert max(jaccard(word_set(texts[i]), s) for s in sets) >= 0.8
    lengths = [len(t.split()) for t in texts]
    assert 10 <= float(np.median(lengths)) <= 30
