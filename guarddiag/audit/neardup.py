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
keeps the candidate set small without changing the result. A size filter and the positional
filter of PPJoin (Xiao et al. 2008; :func:`_candidates`) drop candidates that cannot reach the
threshold before any is verified (on a 200,000-row synthetic pool: 771,047 → 154,325 to verify,
for 1,488 pairs).

The probe is vectorised (polars, numpy and scipy.sparse; no Python loop per text): a Python
loop per distinct pool text made the near-dup audit several times the exact one
(docs/decisions.md, 2026-12-04). A batch of probe texts becomes one array of (text, token
rank) rows; prefix tokens are the first ranks of each text's sorted run, candidate pairs the
size-compatible part of those ranks' posting lists (kept sorted by set size, expanded by index
arithmetic), and the exact intersection of a candidate pair is the product of the two sets' 0/1
rows. The pairs and their Jaccard floats
are the ones the per-text Python loop gave (``tests/test_neardup_join.py`` keeps that loop as
the reference). The near-dup scan of a pool, which only needs to know which rows have a pair,
runs the same probe compiled, row by row (:mod:`guarddiag.audit.kernels`, faster again);
this one pairs the scan's candidates with their benchmark prompts.

:func:`near_matches` is the audit's use of the join: benchmark normal forms against pool rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from guarddiag.audit.kernelchoice import forced_kernel
from guarddiag.errors import GuarddiagError

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from guarddiag.audit.kernels import CompiledIndex

logger = logging.getLogger(__name__)

__all__ = ["PrefixIndex", "build_index", "check_threshold", "form_index", "near_matches",
           "probe_forms", "probe_index", "similar_pairs", "spaced_forms", "warm_compiled_probe"]

_EPS = 1e-9
"""Slack on ⌈t·n⌉ so float rounding can only lengthen a prefix (more candidates, never a miss)."""

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
    posting_positions: np.ndarray
    """The token's position in that set's run (0 = its rarest token), for the positional
    filter."""
    band: int
    """Largest set size + 2: a rank's posting keys never reach the next rank's."""
    runs: _RunTable | None
    """Where each rank's size-compatible run starts, looked up instead of searched (``None``
    when the table would be too large, see :func:`_run_table`)."""
    set_ptr: np.ndarray
    """Where each indexed set's ranks start in :attr:`set_ranks` (``n + 1`` offsets)."""
    set_ranks: np.ndarray
    """Every indexed set's ranks, ascending within a set."""

    @cached_property
    def matrix(self) -> csr_matrix:
        """Indexed set × rank, 1 where the set holds the token (the vectorised probe's exact
        intersections; built on first use, as scipy is slow to import)."""
        return _incidence_of_runs(self.set_ptr, self.set_ranks, self.vocab.height or 1)

    @cached_property
    def compiled(self) -> CompiledIndex:
        """This index as the compiled probe reads it (:mod:`guarddiag.audit.kernels`),
        built on first use: numba is slow to import."""
        from guarddiag.audit.kernels import compile_index

        return compile_index(self)


def build_index(indexed: Sequence[Collection[str]], *, threshold: float) -> PrefixIndex:
    """Index the smaller side (benchmark word sets) for :func:`probe_index`."""
    return _index_tokens(_set_tokens(indexed), len(indexed), threshold=threshold)


def _set_tokens(word_sets: Sequence[Collection[str]]) -> pl.LazyFrame:
    """Distinct ``(row, word)`` of each word set (rows from 0)."""
    sets = [s if isinstance(s, frozenset) else frozenset(s) for s in word_sets]
    lengths = np.fromiter((len(s) for s in sets), dtype=np.int64, count=len(sets))
    return pl.LazyFrame({"row": np.repeat(np.arange(len(sets), dtype=np.int64), lengths),
                         "word": [w for s in sets for w in s]},
                        schema={"row": pl.Int64, "word": pl.String})


@lru_cache(maxsize=2)
def form_index(forms: tuple[str, ...], *, threshold: float) -> PrefixIndex:
    """:func:`build_index` of the word sets of benchmark normal forms, split by polars as
    :func:`probe_forms` splits probes, and kept per process: the scan and the audit of its
    candidate rows probe the same index."""
    return _index_tokens(_form_tokens(pl.Series(forms, dtype=pl.String)), len(forms),
                         threshold=threshold)


def _index_tokens(lazy_tokens: pl.LazyFrame, n: int, *, threshold: float) -> PrefixIndex:
    """The index of sets ``0..n-1`` given as distinct ``(row, word)`` tokens."""
    threshold = check_threshold(threshold)
    tokens = lazy_tokens.collect()
    vocab = (tokens.group_by("word").len().sort("len", "word")
             .select("word", pl.int_range(pl.len(), dtype=pl.Int64).alias("rank")))
    ranked = tokens.join(vocab, on="word", how="inner")
    n_vocab = max(vocab.height, 1)
    sets, ranks = _sorted_runs(ranked.get_column("row").to_numpy(),
                               ranked.get_column("rank").to_numpy(), n_vocab)
    sizes = np.bincount(sets, minlength=n).astype(np.int64)
    position = _run_positions(sets, sizes)
    prefix = position < _prefix_lengths(sizes, threshold)[sets]
    band = int(sizes.max(initial=0)) + 2
    posting_keys = ranks[prefix] * band + sizes[sets[prefix]]
    by_key = np.lexsort((sets[prefix], posting_keys))
    posting_keys = posting_keys[by_key]
    return PrefixIndex(
        threshold=threshold, sizes=sizes, vocab=vocab,
        posting_keys=posting_keys, postings=sets[prefix][by_key],
        posting_positions=position[prefix][by_key], band=band,
        runs=_run_table(posting_keys // band, posting_keys % band, n_vocab),
        set_ptr=np.concatenate(([0], np.cumsum(sizes))).astype(np.int64), set_ranks=ranks)


_RUN_TABLE_LIMIT = 1 << 23
"""Most entries of a :class:`_RunTable` (64 MiB); past it, runs are found by binary search."""


@dataclass(frozen=True)
class _RunTable:
    """For each rank ``r``, whose postings (sorted by set size) hold sizes ``low..high``:
    ``table[offsets[r] + j]`` is the index of its first posting of size ``>= low + j``, for
    ``j`` in ``0..high - low + 1`` (the last entry is the end of its run). A probe's run is two
    look-ups, much cheaper than two binary searches over every posting key."""

    table: np.ndarray
    offsets: np.ndarray
    low: np.ndarray
    span: np.ndarray
    """Entries of each rank: ``high - low + 2`` (1 for a rank without postings)."""

    def first(self, ranks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Index of the first posting of rank ``ranks[i]`` with size ``>= sizes[i]``."""
        j = np.clip(sizes - self.low[ranks], 0, self.span[ranks] - 1)
        return self.table[self.offsets[ranks] + j]


def _run_table(ranks: np.ndarray, sizes: np.ndarray, n_vocab: int) -> _RunTable | None:
    """The :class:`_RunTable` of postings sorted by (rank, size). Slot ``offsets[r] + s - low[r]
    + 1`` counts the postings of rank ``r`` and size ``s``, so the running count up to an entry
    is every posting of the earlier ranks plus this rank's of a smaller size."""
    high = np.full(n_vocab, -1, dtype=np.int64)
    np.maximum.at(high, ranks, sizes)
    low = np.full(n_vocab, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(low, ranks, sizes)
    low = np.where(high >= 0, low, 0)
    span = high - low + 2
    total = int(span.sum())
    if total > _RUN_TABLE_LIMIT:
        return None
    offsets = np.cumsum(span) - span
    counts = np.bincount(offsets[ranks] + sizes - low[ranks] + 1, minlength=total)
    return _RunTable(table=np.cumsum(counts), offsets=offsets, low=low, span=span)


def _incidence(rows: np.ndarray, ranks: np.ndarray, n: int, n_vocab: int) -> csr_matrix:
    """Row × rank 0/1 matrix of sorted, distinct (row, rank) runs."""
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows, minlength=n))))
    return _incidence_of_runs(indptr, ranks, n_vocab)


def _incidence_of_runs(indptr: np.ndarray, ranks: np.ndarray, n_vocab: int) -> csr_matrix:
    """Row × rank 0/1 matrix of rows ``ranks[indptr[r]:indptr[r + 1]]`` (distinct, sorted)."""
    # Imported here: scipy is slow to import, and only the vectorised probe needs it.
    from scipy.sparse import csr_matrix

    return csr_matrix((np.ones(len(ranks), dtype=np.float32), ranks, indptr),
                      shape=(len(indptr) - 1, n_vocab))


def _sorted_runs(rows: np.ndarray, ranks: np.ndarray, n_vocab: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (row, rank) pairs sorted by row, then rank: each row's tokens in the global
    order (one sort of combined keys, several times faster than a two-key lexsort)."""
    return _sorted_keys(pl.Series(rows * n_vocab + ranks), n_vocab)


def _sorted_keys(keys: pl.Series, n_vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, ranks) of combined ``row * n_vocab + rank`` keys, sorted by row, then rank."""
    # polars' sort: faster than numpy's on these nearly sorted keys.
    ordered = keys.sort().to_numpy()
    return ordered // n_vocab, ordered % n_vocab


def _run_positions(owner: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each item's position in its run, for runs of ``counts[r]`` items laid end to end and
    ``owner`` (sorted) the run of each item: its index less its run's start."""
    return np.arange(len(owner)) - (np.cumsum(counts) - counts)[owner]


def _within_runs(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``counts[r]`` items laid end to end: each item's position in its run, and
    its run (the expansion of a posting list without a Python loop)."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return _run_positions(owner, counts), owner


_PROBE_SLICE = 32_768
"""Probe texts joined at once: a slice's tokens and candidate pairs (~100 MiB for 32,768 texts
of ~20 words) are what a probe holds, however many texts it is given."""


def probe_index(index: PrefixIndex, probes: Sequence[Collection[str]]) -> Pairs:
    """Every ``(i, j, J)`` with ``J = jaccard(indexed[i], probes[j]) >= threshold``, sorted."""
    return _sliced(index, len(probes), lambda start, stop: _set_tokens(probes[start:stop]))


def probe_forms(index: PrefixIndex, forms: pl.Series | Sequence[str], *,
                plain_ascii: bool = False) -> Pairs:
    """:func:`probe_index` of the word sets of normal forms
    (:func:`guarddiag.text.words_of_normal_form`), split into words by polars
    (:func:`spaced_forms`). ``plain_ascii``: a form without a non-ASCII character holds only
    ``[0-9a-z ]`` (the scan's word forms, :func:`guarddiag.audit.normal.word_forms`), so only
    the others are searched for characters that end a word."""
    series = forms if isinstance(forms, pl.Series) else pl.Series(forms, dtype=pl.String)
    return _sliced(index, series.len(),
                   lambda start, stop: _form_tokens(series.slice(start, stop - start),
                                                    plain_ascii=plain_ascii))


def _sliced(index: PrefixIndex, n: int, tokens: Callable[[int, int], pl.LazyFrame]) -> Pairs:
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


def spaced_forms(forms: pl.Series, *, plain_ascii: bool = False) -> pl.Series:
    """The forms with every character that ends a word and is no space (a combining mark, a
    control character) made a space: their words, Python's ``\\w+`` runs, are then their
    pieces between spaces.

    Python's ``\\w`` is ``str.isalnum()`` or ``_``, decided here by Python itself, once per
    distinct character the forms hold outside ``[0-9A-Za-z_ ]`` (polars' Rust regex follows
    another Unicode version); only the forms holding such a character are rewritten. With
    ``plain_ascii``, forms without a non-ASCII character hold only ``[0-9a-z ]`` (the scan's
    word forms, :func:`guarddiag.audit.normal.word_forms`) and are not searched (a tenth of the
    search's time)."""
    if plain_ascii:
        wide = (forms.str.len_bytes() != forms.str.len_chars()).arg_true()
        odd_rows = wide.filter(forms.gather(wide).str.contains("[^0-9A-Za-z_ ]"))
    else:
        odd_rows = forms.str.contains("[^0-9A-Za-z_ ]").arg_true()
    odd = forms.gather(odd_rows)
    held = odd.str.extract_all("[^0-9A-Za-z_ ]").explode().drop_nulls().unique().to_list()
    breaking = [c for c in held if not c.isalnum()]
    if not breaking:
        return forms
    # Single characters, so the Aho-Corasick replacement is exact; only the few forms holding
    # one are rewritten.
    rows = odd_rows.filter(odd.str.contains_any(breaking))
    # scatter writes in place: on a copy (an O(1) clone), not on the caller's series.
    return forms.clone().scatter(rows, forms.gather(rows).str.replace_many(
        breaking, [" "] * len(breaking)))


def _form_tokens(forms: pl.Series, *, plain_ascii: bool = False) -> pl.LazyFrame:
    """Distinct ``(row, word)`` of each form, as Python's ``\\w+`` finds them
    (:func:`spaced_forms`, then the pieces between spaces), as a query (the probe runs it with
    its join, which polars then splits, joins and ranks in one pass)."""
    spaced = spaced_forms(forms.cast(pl.String), plain_ascii=plain_ascii)
    return (pl.LazyFrame({"row": np.arange(forms.len(), dtype=np.int64), "form": spaced})
            .select("row", pl.col("form").str.split(" ").list.unique().alias("word"))
            .explode("word").filter(pl.col("word").is_not_null() & (pl.col("word") != "")))


def _probe_tokens(index: PrefixIndex, tokens: pl.LazyFrame, n: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indexed set, probe row, Jaccard) of the pairs of probe rows ``0..n-1`` given as
    distinct ``(row, word)`` tokens."""
    n_vocab = index.vocab.height or 1
    # One query from the forms to each token's (row, rank) key, null for a word the index
    # lacks: polars runs it as one pipeline, faster than the split, the join and the key as
    # separate steps.
    keyed = (tokens.join(index.vocab.lazy(), on="word", how="left")
             .select("row", (pl.col("row") * n_vocab + pl.col("rank")).alias("key")).collect())
    sizes = np.bincount(keyed.get_column("row").to_numpy(), minlength=n).astype(np.int64)
    # Each row's known tokens in the global order.
    rows, ranks = _sorted_keys(keyed.get_column("key").drop_nulls(), n_vocab)
    # Tokens the index never saw sort first (positions count them); where they fill the
    # prefix, no indexed set can reach the threshold with the probe, and none of its ranks is
    # in the prefix.
    known_counts = np.bincount(rows, minlength=n)
    position = _run_positions(rows, known_counts) + (sizes - known_counts)[rows]
    prefix = position < _prefix_lengths(sizes, index.threshold)[rows]
    sets, probes = _candidates(index, rows[prefix], ranks[prefix], position[prefix], sizes)
    inter = _intersections(index, sets, probes, rows, ranks, n)
    similarity = inter / (sizes[probes] + index.sizes[sets] - inter)
    keep = similarity >= index.threshold
    return sets[keep], probes[keep], similarity[keep]


def _candidates(index: PrefixIndex, rows: np.ndarray, ranks: np.ndarray, positions: np.ndarray,
                sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (indexed set, probe row) pairs that share a prefix token and pass the size and
    positional filters (which only save verifying pairs that cannot reach the threshold).

    The positional filter (Xiao et al. 2008, PPJoin): two sets of sizes ``k`` and ``m`` reach
    Jaccard ``t`` only with ``⌈t(k+m)/(1+t)⌉`` shared tokens, and if their first shared token
    sits at positions ``i`` and ``j`` of their runs they share at most ``1 + min(k-i-1,
    m-j-1)``. That first shared token is in both prefixes, and of all the pair's shared prefix
    tokens it gives the largest bound, so keeping every (token, set) entry whose own bound
    reaches the need keeps every pair that can match.
    """
    low, high = _size_bounds(sizes[rows], index.threshold)
    if index.runs is not None:
        starts, ends = index.runs.first(ranks, low), index.runs.first(ranks, high + 1)
    else:
        base = ranks * index.band
        starts = np.searchsorted(index.posting_keys, base + np.clip(low, 0, index.band - 1))
        ends = np.searchsorted(index.posting_keys, base + np.clip(high, 0, index.band - 1),
                               side="right")
    within, owner = _within_runs(np.maximum(ends - starts, 0))
    entry = starts[owner] + within
    sets = index.postings[entry]
    k, m = sizes[rows[owner]], index.sizes[sets]
    bound = np.minimum(k - positions[owner], m - index.posting_positions[entry])
    need = np.ceil(index.threshold * (k + m) / (1 + index.threshold) - _EPS)
    fits = bound >= need
    n_sets = max(len(index.sizes), 1)
    pairs = pl.Series(rows[owner[fits]] * n_sets + sets[fits]).unique().sort().to_numpy()
    return pairs % n_sets, pairs // n_sets


def _intersections(index: PrefixIndex, sets: np.ndarray, probes: np.ndarray,
                   rows: np.ndarray, ranks: np.ndarray, n: int) -> np.ndarray:
    """``|probe ∩ indexed set|`` per candidate pair: the row-wise product of the two 0/1 rows
    (scipy's sparse row gather and product, faster than a numpy look-up of every probe token;
    counts up to 2²⁴ are exact in float32)."""
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


def warm_compiled_probe() -> None:
    """Import and load the compiled probe (most of it Python's import of numba) on
    a two-word index, so that its first real call starts at once; run beside the benchmark
    loading (:func:`guarddiag.cores.meanwhile`)."""
    from guarddiag.audit.kernels import warm_near

    warm_near(build_index([frozenset({"a", "b"})], threshold=0.5))


_COMPILED_PAIRS_FROM = 20_000
"""Distinct pool forms from which :func:`near_matches` pairs them with the compiled probe: the
vectorised one pairs fewer faster than numba imports where the scan did not need it
(docs/decisions.md#2026-12-05-start-up-costs-behind-the-lazy-imports)."""


def near_matches(forms: Sequence[str], pool_forms: Sequence[str], *, threshold: float
                 ) -> list[tuple[int, int, str, float]]:
    """``(key, pool row, "near", J)`` for every pool row whose word set has Jaccard ``J`` ≥
    ``threshold`` with benchmark normal form ``forms[key]``; equal forms are exact overlaps and
    left out. Pool rows with the same normal form are joined once and share their matches."""
    unique_forms = list(dict.fromkeys(f for f in pool_forms if f))
    logger.info(f"audit: near-duplicate join of {len(unique_forms):,} distinct pool texts × "
                f"{len(forms):,} benchmark texts (word-set Jaccard ≥ {threshold:g})")
    index = form_index(tuple(forms), threshold=threshold)
    pairs: Iterable[tuple[int, int, float]]
    forced = forced_kernel()
    if forced == "vectorised" or (forced is None and len(unique_forms) < _COMPILED_PAIRS_FROM):
        pairs = probe_forms(index, unique_forms)
    else:
        # The compiled probe (the pairs probe_forms finds, with the same floats), on the forms
        # with their word-ending characters spaced.
        from guarddiag.audit.kernels import form_pairs

        found = form_pairs(spaced_forms(pl.Series(unique_forms, dtype=pl.String)),
                           index.compiled)
        assert found is not None, "normal forms are texts"
        pairs = zip(*(a.tolist() for a in found), strict=True)
    near_of: dict[str, list[tuple[int, float]]] = {}
    for key, u, similarity in pairs:
        if unique_forms[u] != forms[key]:   # equal forms are exact overlaps
            near_of.setdefault(unique_forms[u], []).append((key, similarity))
    matches: list[tuple[int, int, str, float]] = []
    for p, form in enumerate(pool_forms):
        for key, similarity in near_of.get(form, ()):
            matches.append((key, p, "near", similarity))
    return matches
