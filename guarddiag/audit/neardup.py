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

:func:`near_matches` is the audit's use of the join: benchmark normal forms against pool rows.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from guarddiag.errors import GuarddiagError
from guarddiag.text import words_of_normal_form

logger = logging.getLogger(__name__)

_EPS = 1e-9
"""Slack on ⌈t·n⌉ so float rounding can only lengthen a prefix (more candidates, never a miss)."""


def check_threshold(threshold: float) -> float:
    """A Jaccard threshold must lie in (0, 1]; 0 would make every pair a near duplicate."""
    if not (isinstance(threshold, (int, float)) and 0.0 < float(threshold) <= 1.0):
        raise GuarddiagError(
            f"near-duplicate threshold must be a Jaccard value in (0, 1], got {threshold!r}")
    return float(threshold)


def _prefix_length(size: int, threshold: float) -> int:
    return size - math.ceil(threshold * size - _EPS) + 1


@dataclass(frozen=True)
class PrefixIndex:
    """The indexed side of :func:`similar_pairs`, built once and probed batch by batch (a worker
    builds it once for every batch of pool rows it is given)."""

    threshold: float
    sets: list[frozenset[str]]
    sizes: list[int]
    rank: dict[str, int]
    """Global token order: indexed tokens by ascending document frequency, then the token."""
    postings: dict[int, list[int]]
    """Token rank → indexed sets whose prefix holds it."""


def build_index(indexed: Sequence[Collection[str]], *, threshold: float) -> PrefixIndex:
    """Index the smaller side (benchmark word sets) for :func:`probe_index`."""
    threshold = check_threshold(threshold)
    index_sets = [s if isinstance(s, frozenset) else frozenset(s) for s in indexed]
    doc_freq: Counter[str] = Counter()
    for s in index_sets:
        doc_freq.update(s)
    order = sorted(doc_freq, key=lambda w: (doc_freq[w], w))
    rank = {w: r for r, w in enumerate(order)}
    postings: defaultdict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(index_sets):
        if not s:
            continue
        for r in sorted(rank[w] for w in s)[:_prefix_length(len(s), threshold)]:
            postings[r].append(i)
    return PrefixIndex(threshold=threshold, sets=index_sets, sizes=[len(s) for s in index_sets],
                       rank=rank, postings=dict(postings))


def probe_index(index: PrefixIndex, probes: Sequence[Collection[str]]
                ) -> list[tuple[int, int, float]]:
    """Every ``(i, j, J)`` with ``J = jaccard(indexed[i], probes[j]) >= threshold``, sorted."""
    threshold, rank, postings = index.threshold, index.rank, index.postings
    sizes, index_sets = index.sizes, index.sets
    pairs: list[tuple[int, int, float]] = []
    for j, probe in enumerate(probes):
        k = len(probe)
        if k == 0:
            continue
        probe_set = probe if isinstance(probe, frozenset) else frozenset(probe)
        known = [rank[w] for w in probe_set if w in rank]
        # Tokens the index never saw sort first; if they fill the prefix, no indexed set can
        # reach the threshold with this probe.
        room = _prefix_length(k, threshold) - (k - len(known))  # pragma: no mutate(arith@15): a longer prefix only adds candidates; each is verified exactly  # noqa: E501
        if room <= 0:  # pragma: no mutate(guard-never): the probe has no true pair (prefix lemma); verification rejects all  # noqa: E501
            continue
        known.sort()
        candidates: set[int] = set()
        for r in known[:room]:
            hit = postings.get(r)
            if hit:
                candidates.update(hit)
        if not candidates:
            continue
        low, high = threshold * k - _EPS, k / threshold + _EPS
        for i in candidates:
            m = sizes[i]
            if m < low or m > high:  # pragma: no mutate(guard-never): a size filter before exact verification; only speed changes  # noqa: E501
                continue
            inter = len(probe_set & index_sets[i])
            similarity = inter / (k + m - inter)
            if similarity >= threshold:
                pairs.append((i, j, similarity))
    pairs.sort()
    return pairs


def similar_pairs(indexed: Sequence[Collection[str]], probes: Sequence[Collection[str]], *,
                  threshold: float) -> list[tuple[int, int, float]]:
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
    pairs = similar_pairs([frozenset(words_of_normal_form(f)) for f in forms],
                          [frozenset(words_of_normal_form(f)) for f in unique_forms],
                          threshold=threshold)
    near_of: dict[str, list[tuple[int, float]]] = {}
    for key, u, similarity in pairs:
        if unique_forms[u] != forms[key]:   # equal forms are exact overlaps
            near_of.setdefault(unique_forms[u], []).append((key, similarity))
    matches: list[tuple[int, int, str, float]] = []
    for p, form in enumerate(pool_forms):
        for key, similarity in near_of.get(form, ()):
            matches.append((key, p, "near", similarity))
    return matches
