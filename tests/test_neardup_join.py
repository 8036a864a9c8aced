"""The vectorised prefix-filter join (:mod:`guarddiag.audit.neardup`) against the per-text
Python probe it replaced and a brute-force oracle: the same pairs and the same Jaccard floats,
on random word sets with short ones, duplicates, empty sets and edge thresholds."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from guarddiag.audit import neardup
from guarddiag.audit.neardup import build_index, probe_forms, probe_index, similar_pairs
from guarddiag.text import jaccard, words_of_normal_form

_EPS = 1e-9


def _python_probe(indexed: list[frozenset[str]], probes: list[frozenset[str]],
                  threshold: float) -> list[tuple[int, int, float]]:
    """The probe as it was before vectorising (one Python loop per probe text)."""
    def prefix(size: int) -> int:
        return size - math.ceil(threshold * size - _EPS) + 1

    doc_freq: Counter[str] = Counter()
    for s in indexed:
        doc_freq.update(s)
    rank = {w: r for r, w in enumerate(sorted(doc_freq, key=lambda w: (doc_freq[w], w)))}
    postings: defaultdict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(indexed):
        for r in sorted(rank[w] for w in s)[:prefix(len(s))]:
            postings[r].append(i)
    pairs = []
    for j, probe in enumerate(probes):
        k = len(probe)
        if k == 0:
            continue
        known = sorted(rank[w] for w in probe if w in rank)
        room = prefix(k) - (k - len(known))
        if room <= 0:
            continue
        candidates = {i for r in known[:room] for i in postings.get(r, ())}
        for i in candidates:
            m = len(indexed[i])
            if m < threshold * k - _EPS or m > k / threshold + _EPS:
                continue
            inter = len(probe & indexed[i])
            if inter / (k + m - inter) >= threshold:
                pairs.append((i, j, inter / (k + m - inter)))
    return sorted(pairs)


def _random_sets(rng: np.random.Generator, n: int, vocab: int) -> list[frozenset[str]]:
    """Word sets of 0-25 words from a Zipf-like vocabulary, with planted near copies."""
    weights = 1.0 / np.arange(1, vocab + 1)
    weights /= weights.sum()
    sets: list[frozenset[str]] = []
    for _ in range(n):
        size = int(rng.choice([0, 1, 2, 3, 4, 5, 8, 12, 20, 25]))
        sets.append(frozenset(f"w{x}" for x in rng.choice(vocab, size=size, p=weights)))
    return sets


def _near_copies(rng: np.random.Generator, sets: list[frozenset[str]], n: int
                 ) -> list[frozenset[str]]:
    out = []
    for _ in range(n):
        words = list(sets[int(rng.integers(len(sets)))])
        if words and rng.random() < 0.5:
            words.pop(int(rng.integers(len(words))))
        if rng.random() < 0.5:
            words.append(f"w{int(rng.integers(10_000))}")   # often a word the index lacks
        out.append(frozenset(words))
    return out


@pytest.mark.parametrize("threshold", [0.1, 0.5, 0.6, 2 / 3, 0.75, 0.8, 0.9, 0.95, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("run_table", [True, False], ids=["run-table", "binary-search"])
def test_vectorised_join_equals_python_probe_and_oracle(threshold, seed, run_table,
                                                        monkeypatch):
    """Both ways of finding a rank's size-compatible postings (the look-up table, and the
    binary search an index too large for the table falls back to) give the oracle's pairs."""
    if not run_table:
        monkeypatch.setattr(neardup, "_RUN_TABLE_LIMIT", 0)
    rng = np.random.default_rng(seed)
    indexed = _random_sets(rng, 300, 400)
    indexed += indexed[:20]                       # duplicate indexed sets
    probes = _random_sets(rng, 400, 600) + _near_copies(rng, indexed, 600)
    probes += probes[:50]                         # duplicate probes
    expected = _python_probe(indexed, probes, threshold)
    oracle = sorted((i, j, jaccard(a, b)) for i, a in enumerate(indexed)
                    for j, b in enumerate(probes) if a and b and jaccard(a, b) >= threshold)
    assert expected == oracle
    assert (build_index(indexed, threshold=threshold).runs is None) is not run_table
    assert similar_pairs(indexed, probes, threshold=threshold) == expected
    assert len(expected) > 50 or threshold == 1.0


def test_forms_split_like_python_regex():
    """Polars splits ASCII forms, Python's regex the rest: the same word sets either way,
    including underscores, control characters, digits and non-ASCII words."""
    forms = ["how to make a bomb", "how to make a bomb at home", "a_b c\x00d e", "a b c d e",
             "naïve café recipe now", "naive cafe recipe now", "x²y ½ 3", "",
             "北京 天安门 广场 在 哪里", "北京 天安门 广场 在 哪儿", "म क् ष", "how to  make a bomb"]
    pool = [*forms, "how to make the bomb", "c d e a b", "a b c d", "naïve café recipe"]
    sets = [frozenset(words_of_normal_form(f)) for f in forms]
    pool_sets = [frozenset(words_of_normal_form(f)) for f in pool]
    for threshold in (0.5, 0.8, 1.0):
        index = build_index(sets, threshold=threshold)
        assert probe_forms(index, pool) == probe_index(index, pool_sets) \
            == _python_probe(sets, pool_sets, threshold)


def test_empty_sides_give_no_pairs():
    assert similar_pairs([], [frozenset({"a"})], threshold=0.8) == []
    assert similar_pairs([frozenset({"a"})], [], threshold=0.8) == []
    assert similar_pairs([frozenset()], [frozenset()], threshold=0.8) == []
    assert probe_forms(build_index([], threshold=0.8), ["a b", ""]) == []


def test_run_table_finds_what_a_binary_search_finds():
    """Each rank's first posting of size >= s, for sizes below, inside and above its run, and
    for ranks without postings: the table's answer is the sorted keys' searchsorted."""
    rng = np.random.default_rng(3)
    n_vocab, band = 40, 30
    ranks = rng.integers(0, n_vocab, 500)
    ranks[np.isin(ranks, [0, 7, 39])] = 1            # ranks 0, 7 and 39 have no postings
    sizes = rng.integers(1, band - 1, 500)
    keys = np.sort(ranks * band + sizes)
    runs = neardup._run_table(keys // band, keys % band, n_vocab)
    assert runs is not None
    probe_ranks = np.repeat(np.arange(n_vocab), band + 4)
    probe_sizes = np.tile(np.arange(-2, band + 2), n_vocab)
    expected = np.searchsorted(keys, probe_ranks * band + np.clip(probe_sizes, 0, band - 1))
    expected = np.where(probe_sizes >= band, np.searchsorted(keys, (probe_ranks + 1) * band),
                        expected)
    assert np.array_equal(runs.first(probe_ranks, probe_sizes), expected)
