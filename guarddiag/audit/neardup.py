"""Word-set Jaccard similarity join with prefix filtering (exact, no sampling).

The contamination audit asks, for every benchmark prompt, which pool rows have a word-set Jaccard
similarity of at least ``t`` (default 0.8) with it. Comparing every pair is 270,000 × 12,000 ≈ 3·10⁹
set intersections; a token index makes it a few seconds.

Blocking is *prefix filtering* (Chaudhuri et al. 2006; Bayardo et al. 2007, "All-Pairs"): fix one
global order of tokens and call the first ``|x| − ⌈t·|x|⌉ + 1`` tokens of a set ``x`` its prefix.
If ``J(x, y) ≥ t`` the two sets share at least ``⌈t·|x|⌉`` tokens, so their prefixes must share a
token. Only pairs sharing a prefix token become candidates, and every candidate is verified with
the exact Jaccard. Unlike MinHash-LSH this loses no pair (recall 1 by the lemma, precision 1 by the
verification), so the near-duplicate column is the same set a brute-force scan would report.

The global order puts tokens absent from the indexed side first, then indexed tokens by ascending
document frequency: probe prefixes then consist of tokens with short (or no) posting lists, which
keeps the candidate set small without changing the result.

The probe is vectorised (polars, numpy and scipy.sparse; no Python loop per text): the Python
probe cost about 20 µs per distinct pool text, which made the near-dup audit 4-13x the exact
one. A batch of probe texts becomes one array of (text, token rank) rows; prefix tokens are the
first ranks of each text's sorted run, candidate pairs the size-compatible part of those ranks'
posting lists (kept sorted by set size, expanded by index arithmetic), and the exact intersection
of a candidate pair is the product of the two sets' 0/1 rows. The pairs and their Jaccard floats
are the ones the per-text Python loop gave (``tests/test_neardup_join.py`` keeps that loop as
the reference).

:func:`near_matches` is the audit's use of the join: benchmark normal forms against pool rows.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.text import words_of_normal_form

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

logger = logging.getLogger(__name__)

__all__ = ["PrefixIndex", "build_index", "check_threshold", "near_matches", "probe_forms",
           "probe_index", "similar_pairs"]

_EPS = 1e-9
"""Slack on ⌈t·n⌉ so float rounding can only lengthen a prefix (more candidates, never a miss)."""

_WORD_PATTERN = r"\w+"
"""``guarddiag.text``'s word pattern; on ASCII text polars' (Rust) ``\\w`` is Python's
``[a-zA-Z0-9_]``, so :func:`_form_tokens` hands only non-ASCII forms to Python's regex."""

Pairs = list[tuple[int, int, float]]


def check_threshold(threshold: float) -> float:
    """A Jaccard threshold must lie in (0, 1]; 0 would make every pair a near duplicate."""
    if not (isinstance(threshold, (int, float)) and 0.0 < float(threshold) <= 1.0):
        raise GuarddiagError(
            f"near-duplicate threshold must be a Jaccard value in (0, 1], got {threshold!r}")
    return float(threshold)


def _prefix_lengths(sizes: np.ndarray, threshold: float) -> np.ndarray:
    """``|x| − ⌈t·|x|⌉ + 1`` per set size (the same float steps as ``math.ceil`` on a float)."""
    return sizes - np.ceil(threshold * sizes.astype(np.float64) - _EPS).astype(np.int64) + 1


def _size_bounds(sizes: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest set size ``m`` with ``t·k <= m <= k/t`` per probe size ``k``
    (``J >= t`` needs both), by the same float steps as a Python ``m < t * k - eps`` test."""
    k = sizes.astype(np.float64)
    return (np.ceil(threshold * k - _EPS).astype(np.int64),
            np.floor(k / threshold + _EPS).astype(np.int64))


@dataclass(frozen=True)
class PrefixIndex:
    """The indexed side of :func:`similar_pairs`, built once and probed batch by batch (a worker
    builds it once for every batch of pool rows it is given)."""

    threshold: float
    sizes: np.ndarray
    """Distinct words of each indexed set (int64)."""
    vocab: pl.DataFrame
    """``word`` → ``rank``, the global token order: indexed tokens by ascending document
    frequency, then the token."""
    posting_keys: np.ndarray
    """Sorted ``rank * band + size`` of each (prefix token, indexed set): the sets whose prefix
    holds a rank, by size, so a probe takes only the size-compatible run of each list."""
    postings: np.ndarray
    """The indexed set of each entry of :attr:`posting_keys`."""
    band: int
    """Largest set size + 2: a rank's posting keys never reach the next rank's."""
    matrix: csr_matrix
    """Indexed set × rank, 1 where the set holds the token (exact intersections)."""


def build_index(indexed: Sequence[Collection[str]], *, threshold: float) -> PrefixIndex:
    """Index the smaller side (benchmark word sets) for :func:`probe_index`."""
    threshold = check_threshold(threshold)
    index_sets = [s if isinstance(s, frozenset) else frozenset(s) for s in indexed]
    doc_freq: Counter[str] = Counter()
    for s in index_sets:
        doc_freq.update(s)
    order = sorted(doc_freq, key=lambda w: (doc_freq[w], w))
    rank = {w: r for r, w in enumerate(order)}
    sizes = np.array([len(s) for s in index_sets], dtype=np.int64)
    sets = np.repeat(np.arange(len(index_sets), dtype=np.int64), sizes)
    ranks = np.fromiter((rank[w] for s in index_sets for w in s), dtype=np.int64,
                        count=int(sizes.sum()))
    n_vocab = max(len(order), 1)
    sets, ranks = _sorted_runs(sets, ranks, n_vocab)
    prefix = _leading(sets, _prefix_lengths(sizes, threshold))
    band = int(sizes.max(initial=0)) + 2
    posting_keys = ranks[prefix] * band + sizes[sets[prefix]]
    by_key = np.lexsort((sets[prefix], posting_keys))
    return PrefixIndex(
        threshold=threshold, sizes=sizes,
        vocab=pl.DataFrame({"word": order, "rank": np.arange(len(order), dtype=np.int64)},
                           schema={"word": pl.String, "rank": pl.Int64}),
        posting_keys=posting_keys[by_key], postings=sets[prefix][by_key], band=band,
        matrix=_incidence(sets, ranks, len(index_sets), n_vocab))


def _incidence(rows: np.ndarray, ranks: np.ndarray, n: int, n_vocab: int) -> csr_matrix:
    """Row × rank 0/1 matrix of sorted, distinct (row, rank) runs."""
    # Imported here: scipy costs ~0.15 s a process, and only the near-dup scan needs it.
    from scipy.sparse import csr_matrix

    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
    return csr_matrix((np.ones(len(ranks), dtype=np.float32), ranks, indptr),
                      shape=(n, n_vocab))


def _sorted_runs(rows: np.ndarray, ranks: np.ndarray, n_vocab: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, rank) pairs sorted by row, then rank: each row's tokens in the global
    order (one sort of combined keys, several times faster than a two-key lexsort)."""
    keys = np.sort(rows * n_vocab + ranks)
    return keys // n_vocab, keys % n_vocab


def _leading(rows: np.ndarray, take: np.ndarray) -> np.ndarray:
    """Mask of the first ``take[row]`` tokens of each row's run (``rows`` sorted; a ``take``
    of 0 or less keeps none)."""
    return _within_runs(np.bincount(rows, minlength=len(take)))[0] < take[rows]


def _within_runs(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``counts[r]`` items laid end to end: each item's position in its run, and
    its run (the expansion of a posting list without a Python loop)."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner], owner


_PROBE_SLICE = 32_768
"""Probe texts joined at once: a slice's tokens and candidate pairs (~100 MiB for 32,768 texts
of ~20 words) are what a probe holds, however many texts it is given."""


def probe_index(index: PrefixIndex, probes: Sequence[Collection[str]]) -> Pairs:
    """Every ``(i, j, J)`` with ``J = jaccard(indexed[i], probes[j]) >= threshold``, sorted."""
    def tokens(start: int, stop: int) -> pl.DataFrame:
        sets = [p if isinstance(p, frozenset) else frozenset(p) for p in probes[start:stop]]
        lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
        return pl.DataFrame({"row": np.repeat(np.arange(len(sets), dtype=np.int64), lengths),
                             "word": [w for s in sets for w in s]},
                            schema={"row": pl.Int64, "word": pl.String})

    return _sliced(index, len(probes), tokens)


def probe_forms(index: PrefixIndex, forms: pl.Series | Sequence[str]) -> Pairs:
    """:func:`probe_index` of the word sets of normal forms (:func:`words_of_normal_form`),
    split into words by polars (the Python regex only for non-ASCII forms)."""
    series = forms if isinstance(forms, pl.Series) else pl.Series(forms, dtype=pl.String)
    return _sliced(index, series.len(),
                   lambda start, stop: _form_tokens(series.slice(start, stop - start)))


def _sliced(index: PrefixIndex, n: int, tokens: Callable[[int, int], pl.DataFrame]) -> Pairs:
    """The pairs of probes ``0..n-1``, joined :data:`_PROBE_SLICE` at a time (``tokens(start,
    stop)``: distinct ``(row, word)`` of those probes, rows from 0), sorted by ``(i, j)``."""
    found = []
    for start in range(0, n, _PROBE_SLICE):
        stop = min(n, start + _PROBE_SLICE)
        sets, probes, similarity = _probe_tokens(index, tokens(start, stop), stop - start)
        found.append((sets, probes + start, similarity))
    if not found:
        return []
    sets, probes, similarity = (np.concatenate(parts) for parts in zip(*found, strict=True))
    order = np.lexsort((probes, sets))
    return list(zip(sets[order].tolist(), probes[order].tolist(), similarity[order].tolist(),
                    strict=True))


def _form_tokens(forms: pl.Series) -> pl.DataFrame:
    """Distinct ``(row, word)`` of each form: a form of ASCII letters, digits and spaces only
    (most of them) is split at spaces, 3x faster than the regex; other ASCII forms take polars'
    regex, the rest Python's."""
    frame = pl.DataFrame({"row": np.arange(forms.len(), dtype=np.int64),
                          "form": forms.cast(pl.String)})
    form = pl.col("form")
    plain = ~form.str.contains("[^0-9A-Za-z ]")
    ascii_ = form.str.len_bytes() == form.str.len_chars()
    split = frame.filter(plain).select("row", form.str.split(" ").list.unique().alias("word"))
    regex = frame.filter(~plain & ascii_).select(
        "row", form.str.extract_all(_WORD_PATTERN).list.unique().alias("word"))
    rest = frame.filter(~ascii_)
    python = pl.DataFrame({"row": rest.get_column("row"),
                           "word": [list(set(words_of_normal_form(f))) for f in
                                    rest.get_column("form").to_list()]},
                          schema={"row": pl.Int64, "word": pl.List(pl.String)})
    return (pl.concat([split, regex, python]).explode("word")
            .filter(pl.col("word").is_not_null() & (pl.col("word") != "")))


def _probe_tokens(index: PrefixIndex, tokens: pl.DataFrame, n: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indexed set, probe row, Jaccard) of the pairs of probe rows ``0..n-1`` given as
    distinct ``(row, word)`` tokens."""
    sizes = np.bincount(tokens.get_column("row").to_numpy(), minlength=n).astype(np.int64)
    known = tokens.join(index.vocab, on="word", how="inner")
    rows, ranks = _sorted_runs(known.get_column("row").to_numpy(),
                               known.get_column("rank").to_numpy(), index.vocab.height or 1)
    # Tokens the index never saw sort first; where they fill the prefix, no indexed set can
    # reach the threshold with the probe (``room`` <= 0 keeps none of its ranks).
    room = _prefix_lengths(sizes, index.threshold) - (sizes - np.bincount(rows, minlength=n))
    prefix = _leading(rows, room)
    sets, probes = _candidates(index, rows[prefix], ranks[prefix], sizes)
    inter = _intersections(index, sets, probes, rows, ranks, n)
    similarity = inter / (sizes[probes] + index.sizes[sets] - inter)
    keep = similarity >= index.threshold
    return sets[keep], probes[keep], similarity[keep]


def _candidates(index: PrefixIndex, rows: np.ndarray, ranks: np.ndarray, sizes: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (indexed set, probe row) pairs that share a prefix token and pass the size
    filter (which only saves verifying pairs that cannot reach the threshold)."""
    low, high = _size_bounds(sizes[rows], index.threshold)
    base = ranks * index.band
    starts = np.searchsorted(index.posting_keys, base + np.clip(low, 0, index.band - 1))
    ends = np.searchsorted(index.posting_keys, base + np.clip(high, 0, index.band - 1),
                           side="right")
    within, owner = _within_runs(np.maximum(ends - starts, 0))
    n_sets = max(len(index.sizes), 1)
    pairs = np.sort(rows[owner] * n_sets + index.postings[starts[owner] + within])
    pairs = pairs[np.concatenate(([True], pairs[1:] != pairs[:-1]))] if len(pairs) else pairs
    return pairs % n_sets, pairs // n_sets


def _intersections(index: PrefixIndex, sets: np.ndarray, probes: np.ndarray,
                   rows: np.ndarray, ranks: np.ndarray, n: int) -> np.ndarray:
    """``|probe ∩ indexed set|`` per candidate pair: the row-wise product of the two 0/1 rows
    (scipy's sparse row gather and product, 2x a numpy look-up of every probe token; counts up
    to 2²⁴ are exact in float32)."""
    probe_rows = _incidence(rows, ranks, n, index.vocab.height or 1)[probes]
    counts = probe_rows.multiply(index.matrix[sets]).sum(axis=1)
    return np.asarray(counts, dtype=np.int64).ravel()


def similar_pairs(indexed: Sequence[Collection[str]], probes: Sequence[Collection[str]], *,
                  threshold: float) -> Pairs:
    """Every ``(i, j, J)`` with ``J = jaccard(indexed[i], probes[j]) >= threshold``.

    ``indexed`` is the smaller side (benchmark prompts), ``probes`` the larger (pool rows); both
    are word sets (``guarddiag.text.word_set``). Empty sets match nothing. ``J`` is computed as
    ``|a ∩ b| / |a ∪ b|``, the same float as :func:`guarddiag.text.jaccard`. Pairs come sorted by
    ``(i, j)``.
    """
    return probe_index(build_index(indexed, threshold=threshold), probes)


def near_matches(forms: Sequence[str], pool_forms: Sequence[str], *, threshold: float
                 ) -> list[tuple[int, int, str, float]]:
    """``(key, pool row, "near", J)`` for every pool row whose word set has Jaccard ``J`` ≥
    ``threshold`` with benchmark normal form ``forms[key]``; equal forms are exact overlaps and
    left out. Pool rows with the same normal form are joined once and share their matches."""
    unique_forms = list(dict.fromkeys(f for f in pool_forms if f))
    logger.info(f"audit: near-duplicate join of {len(unique_forms):,} distinct pool texts × "
                f"{len(forms):,} benchmark texts (word-set Jaccard ≥ {threshold:g})")
    index = build_index([frozenset(words_of_normal_form(f)) for f in forms], threshold=threshold)
    pairs = probe_forms(index, unique_forms)
    near_of: dict[str, list[tuple[int, float]]] = {}
    for key, u, similarity in pairs:
        if unique_forms[u] != forms[key]:   # equal forms are exact overlaps
            near_of.setdefault(unique_forms[u], []).append((key, similarity))
    matches: list[tuple[int, int, str, float]] = []
    for p, form in enumerate(pool_forms):
        for key, similarity in near_of.get(form, ()):
            matches.append((key, p, "near", similarity))
    return matches
