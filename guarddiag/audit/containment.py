"""Contained overlaps: a benchmark prompt embedded in a longer pool row.

A jailbreak wrapper around a benchmark prompt, or a forum post that quotes it, is neither an
exact overlap (the row holds other text) nor a near duplicate (the word-set Jaccard falls with
the row's length: a 20-word prompt in a 400-word row has J ≤ 0.05). The audit's
``containment=True`` finds such rows by how much of the *prompt* sits in the row, whatever the
row's length. Words are the space-separated tokens of the normal form
(:func:`guarddiag.text.normalise`) of the row with escaped line breaks (``\\n`` written as two
characters) made spaces first (:func:`~guarddiag.audit.phrase.turn_form`), so case,
punctuation and line wrapping never matter. A row contains a prompt of ``n`` words when

* ``n`` ≤ 5: the row holds it as a whole phrase (:mod:`guarddiag.audit.phrase`);
* ``n`` ≥ 6: the row holds it with at most one word substituted, in place (a prompt of six to
  nine words, the length where one word costs most of its 3-grams, is found this way);
* ``n`` ≥ 6 and at least ``short_words`` distinct words (default 10): also when the row holds
  at least the threshold (default :data:`DEFAULT_CONTAINMENT`, 0.8) of its **shingles**, the
  distinct runs of :data:`SHINGLE_WORDS` consecutive words. The containment of prompt ``q`` in
  row ``r`` is ``|S(q) ∩ S(r)| / |S(q)|``: word runs of three keep the order of the prompt (a
  row holding its words in another order does not match), and one changed word in the middle
  of a 20-word prompt removes 3 of its 18 shingles (0.83: still found), two remove 6 (0.67: not
  found; that is the near-duplicate column's job).

The two normal forms must differ (equal forms are exact overlaps). The similarity reported is
the share of shingles for the shingle rule, else the share of the prompt's words in place.

The shingle search indexes the benchmark side only and streams pool rows through it in batches
(polars, all cores): a row becomes a candidate for a prompt when it holds two of the prompt's
*prefix* shingles — the ``m − ⌈t·m⌉ + 2`` of its ``m`` shingles that are rarest among benchmark
prompts. A row with containment ≥ ``t`` misses at most ``m − ⌈t·m⌉`` of them, so it holds two
prefix shingles (the prefix-filter lemma of :mod:`guarddiag.audit.neardup`, one step further);
every candidate is then counted exactly. No pair is lost and none is guessed. Shingles are
joined as 64-bit hashes; a collision can only add a candidate, and every reported pair is
recounted on the strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from guarddiag.audit.exact import Match
from guarddiag.audit.phrase import (
    PHRASE_WORDS,
    SUBSTITUTED,
    PhraseIndex,
    index_phrases,
    phrase_hits,
    phrase_matches,
)
from guarddiag.audit.result import DEFAULT_CONTAINMENT, DEFAULT_REVIEW_ROWS, REVIEW_DEFINITION
from guarddiag.errors import GuarddiagError

__all__ = ["CONTAINMENT_DEFINITION", "DEFAULT_CONTAINMENT", "DEFAULT_REVIEW_ROWS",
           "MIN_CONTAINED_WORDS", "REVIEW_DEFINITION",
           "SHINGLE_WORDS", "ContainmentIndex", "check_containment", "contained_matches",
           "contained_rows", "containment", "index_containment", "review_common", "shingles"]

SHINGLE_WORDS = 3
"""Words per shingle. Three keeps word order (a shuffled copy does not match) while one changed
word costs only three shingles; five-word shingles would lose a 20-word prompt with one word
changed (11 of 16 left, 0.69)."""
MIN_CONTAINED_WORDS = PHRASE_WORDS + 1
"""Fewest words (of the normal form) a prompt needs for the shingle rule and for a substituted
word; shorter ones are looked for as whole phrases."""
CONTAINMENT_DEFINITION = (
    "contained = the prompt inside one pool text (normal forms; escaped \\n, \\t, \\r "
    "in the text split words): a prompt of at most " + str(PHRASE_WORDS) + " words as a whole "
    "phrase; a longer one with at most " + str(SUBSTITUTED) + " word substituted in place; one "
    "of at least {short} distinct words also when the text holds >= {t:g} of its distinct "
    "word 3-grams; no exact overlap")
"""How summary.json describes a contained overlap (format with ``t`` and ``short``)."""


_EPS = 1e-9
_PREFIX_HITS = 2
"""Prefix shingles a candidate must hold (module docstring): the prefix is that much longer."""
_MIX = 0x9E3779B97F4A7C15
"""Odd 64-bit constant folding a row number into a shingle hash, for one-column joins."""
_BATCH_ROWS = 200_000
"""Pool rows shingled at once: bounds the exploded word table to a few hundred MB."""


def check_containment(threshold: float) -> float:
    """A containment threshold must lie in (0, 1]; 0 would make every pair contained."""
    if not (isinstance(threshold, (int, float)) and 0.0 < float(threshold) <= 1.0):
        raise GuarddiagError(
            f"containment threshold must be a share in (0, 1], got {threshold!r}")
    return float(threshold)


def shingles(form: str) -> frozenset[str]:
    """The distinct :data:`SHINGLE_WORDS`-word runs of a normal form (empty when shorter)."""
    words = form.split(" ") if form else []
    k = SHINGLE_WORDS
    return frozenset(" ".join(words[i:i + k]) for i in range(len(words) - k + 1))


def containment(prompt_form: str, row_form: str) -> float:
    """``|S(prompt) ∩ S(row)| / |S(prompt)|`` of two normal forms (0.0 for a prompt with no
    shingle)."""
    prompt = shingles(prompt_form)
    return len(prompt & shingles(row_form)) / len(prompt) if prompt else 0.0


@dataclass(frozen=True)
class ContainmentIndex:
    """The benchmark side of the containment search (shingles as 64-bit hashes)."""

    forms: tuple[str, ...]
    """Benchmark normal forms by key (as :class:`guarddiag.audit.exact.FormIndex`)."""
    threshold: float
    prefix: pl.DataFrame
    """``h``, ``key``: each indexed prompt's prefix shingles."""
    full: pl.DataFrame
    """``key``, ``h``: every shingle of each indexed prompt."""
    need: pl.DataFrame
    """``key``, ``m`` (shingles), ``need`` (shingles a containing row must hold), ``hits``
    (prefix shingles a containing row must hold)."""
    vocabulary: pl.DataFrame
    """``h``: every indexed shingle once."""
    phrases: PhraseIndex
    """The whole-phrase and substituted-word search over every prompt."""


def index_containment(forms: Sequence[str], *, threshold: float = DEFAULT_CONTAINMENT,
                      short_words: int = 10) -> ContainmentIndex:
    """Index the shingles of benchmark normal forms ``forms`` (key = position)."""
    threshold = check_containment(threshold)
    forms = tuple(forms)
    # The pool scan and the audit of its candidate rows index the same benchmarks in one
    # process: build once (docs/decisions.md#2026-12-03-built-once-loaded-late).
    cached = _LAST_INDEX.get((threshold, short_words))
    if cached is not None and cached.forms == forms:
        return cached
    _LAST_INDEX.clear()
    _LAST_INDEX[(threshold, short_words)] = index = _build_index(
        forms, threshold=threshold, short_words=short_words)
    return index


_LAST_INDEX: dict[tuple[float, int], ContainmentIndex] = {}


def _build_index(forms: tuple[str, ...], *, threshold: float, short_words: int
                 ) -> ContainmentIndex:
    k = SHINGLE_WORDS
    # Prompts under short_words distinct words are left to the in-place word search.
    words = (pl.DataFrame({"form": list(forms)}, schema={"form": pl.String})
             .with_row_index("key")
             .select("key", pl.col("form").str.split(" ").alias("w"))
             .filter(pl.col("w").list.len() >= MIN_CONTAINED_WORDS,
                     pl.col("w").list.n_unique() >= short_words))
    shingle = pl.concat_str([pl.col("w").shift(-i) for i in range(k)], separator=" ")
    full = (words.explode("w")
            .select("key", shingle.alias("s"),
                    (pl.col("key").shift(-(k - 1)) == pl.col("key")).alias("whole"))
            .filter(pl.col("whole"))
            .select("key", "s")
            .unique())
    m = pl.col("m")
    # A row holding `need` of the m shingles misses at most m − need, so it holds at least
    # `hits` of the m − need + hits rarest: two hits cut the candidates about in half.
    need = (full.group_by("key").agg(pl.len().cast(pl.UInt32).alias("m"))
            .with_columns((threshold * m.cast(pl.Float64) - _EPS).ceil().cast(pl.UInt32)
                          .alias("need"))
            .with_columns(pl.min_horizontal(pl.col("need"), pl.lit(_PREFIX_HITS, pl.UInt32))
                          .alias("hits"))
            .select("key", "m", "need", "hits")
            .sort("key"))
    doc_freq = full.group_by("s").agg(pl.len().alias("df"))
    prefix = (full.join(doc_freq, on="s")
              .sort("key", "df", "s")
              .with_columns(pl.int_range(pl.len()).over("key").alias("rank"))
              .join(need, on="key")
              .filter(pl.col("rank") < pl.col("m") - pl.col("need") + pl.col("hits")))
    return ContainmentIndex(
        forms=forms, threshold=threshold,
        prefix=prefix.select(_hash(pl.col("s")), "key"),
        full=full.select("key", _hash(pl.col("s"))),
        need=need, vocabulary=full.select(_hash(pl.col("s"))).unique(),
        phrases=index_phrases(forms))


def _hash(shingle: pl.Expr) -> pl.Expr:
    # Joining 64-bit hashes is several times faster than joining strings. A collision can only
    # add a candidate, and every reported pair is recounted on the strings themselves.
    return shingle.hash(seed=0).alias("h")


def contained_matches(index: ContainmentIndex, pool_forms: Sequence[str] | pl.Series, *,
                      offset: int = 0, exact_forms: Sequence[str] | None = None
                      ) -> list[tuple[int, int, str, float]]:
    """``(key, pool row, "contained", similarity)`` for every pool row that contains benchmark form
    ``index.forms[key]`` (module docstring); rows are numbered from ``offset``. ``pool_forms``
    are the rows' turn forms (:func:`~guarddiag.audit.phrase.turn_forms`), ``exact_forms``
    their normal forms when they differ (a row whose normal form is the prompt's is an exact
    overlap). Sorted by (pool row, key)."""
    forms = pool_forms if isinstance(pool_forms, pl.Series) else pl.Series(
        "form", list(pool_forms), dtype=pl.String)
    found: dict[tuple[int, int], float] = {}
    for start in range(0, len(forms), _BATCH_ROWS):
        batch = forms.slice(start, _BATCH_ROWS)
        for key, row, held in phrase_matches(index.phrases, batch):
            found[(key, start + row)] = held
        if index.need.height:
            found |= _shingle_matches(index, batch, start)
    out = []
    for (key, row), similarity in found.items():
        exact = (exact_forms[row] if exact_forms is not None else forms[row])
        if exact != index.forms[key]:      # equal forms are exact overlaps
            out.append((key, offset + row, "contained", similarity))
    out.sort(key=lambda m: (m[1], m[0]))
    return out


def _shingle_matches(index: ContainmentIndex, batch: pl.Series, start: int
                     ) -> dict[tuple[int, int], float]:
    """The shingle rule's (key, row from ``start``) → share of shingles, recounted on the
    strings."""
    need = dict(zip(index.need.get_column("key").to_list(),
                    index.need.get_column("need").to_list(), strict=True))
    texts = batch.to_list()
    out = {}
    prompts: dict[int, frozenset[str]] = {}
    last_row, row_set = -1, frozenset[str]()
    for row, key in _candidates(index, batch).iter_rows():
        if row != last_row:    # candidates come sorted by row
            last_row, row_set = row, shingles(texts[row])
        prompt = prompts.get(key)
        if prompt is None:
            prompt = prompts[key] = shingles(index.forms[key])
        shared = len(prompt & row_set)
        if shared >= need[key]:
            out[(key, start + row)] = shared / len(prompt)
    return out


def review_common(matches: list[Match], forms: Sequence[str], pool_ids: Sequence[str], *,
                  short_words: int, review_rows: int) -> list[Match]:
    """``matches`` with every ``contained`` match of a *common phrase* made ``review``: a
    prompt of fewer than ``short_words`` words that is found in the texts (whole or inside)
    of at least ``review_rows`` distinct rows (``pool_ids`` of the matches' pool positions) of
    the corpus. A phrase planted by hand sits in a few rows; one that is common English sits
    in many (0 turns the rule off). Exact matches stay what they are."""
    if review_rows <= 0:
        return matches
    rows: dict[int, set[str]] = {}
    for key, p, kind, _ in matches:
        if kind in ("exact", "contained", "review") and len(forms[key].split(" ")) < short_words:
            rows.setdefault(key, set()).add(pool_ids[p])
    common = {key for key, held in rows.items() if len(held) >= review_rows}
    return [(key, p, "review" if kind == "contained" and key in common else kind, similarity)
            for key, p, kind, similarity in matches]


def contained_rows(index: ContainmentIndex, forms: pl.Series) -> pl.Series:
    """Per row of ``forms`` (turn forms), whether it may contain an indexed prompt: every row
    :func:`contained_matches` reports is True (a hash collision may add a row, never lose
    one). For a pool scan that keeps candidate rows and audits them afterwards."""
    keep = np.zeros(forms.len(), dtype=bool)
    for start in range(0, forms.len(), _BATCH_ROWS):
        batch = forms.slice(start, _BATCH_ROWS)
        rows = phrase_hits(index.phrases, batch).get_column("row")
        if index.need.height:
            rows = pl.concat([rows, _candidates(index, batch).get_column("row")
                              .cast(pl.Int64)])
        keep[rows.to_numpy() + start] = True
    return pl.Series("contained", keep)


def _candidates(index: ContainmentIndex, forms: pl.Series) -> pl.DataFrame:
    """(row, key) pairs of one batch (rows from 0) whose hashed shingle count reaches the
    prompt's ``need``."""
    k = SHINGLE_WORDS
    words = (pl.DataFrame({"form": forms})
             .with_row_index("row")
             .select("row", pl.col("form").str.split(" ").alias("w"))
             .explode("w"))
    # A shingle is a word and the next k − 1 words of the same row.
    shingle = pl.concat_str([pl.col("w").shift(-i) for i in range(k)], separator=" ")
    pool = (words.lazy()
            .select("row", _hash(shingle),
                    (pl.col("row").shift(-(k - 1)) == pl.col("row")).alias("whole"))
            .filter(pl.col("whole"))
            .select("row", "h")
            .collect())
    # A row with fewer shingles than a prompt needs cannot contain it: this bound drops most
    # candidates of long prompts before they are expanded.
    held = pool.lazy().group_by("row").agg(pl.len().alias("held"))
    candidates = (pool.lazy().join(index.prefix.lazy(), on="h")
                  .group_by("row", "key").agg(pl.len().alias("found"))
                  .join(index.need.lazy(), on="key")
                  .filter(pl.col("found") >= pl.col("hits"))
                  .join(held, on="row")
                  .filter(pl.col("need") <= pl.col("held"))
                  .select("row", "key"))
    return (candidates.join(index.full.lazy(), on="key")
            .select("row", "key", _row_key(pl.col("h")))
            .join(pool.lazy().select(_row_key(pl.col("h"))), on="rk", how="semi")
            .group_by("row", "key").agg(pl.len().alias("shared"))
            .join(index.need.lazy(), on="key")
            .filter(pl.col("shared") >= pl.col("need"))
            .select("row", "key")
            .sort("row", "key")
            .collect())


def _row_key(h: pl.Expr) -> pl.Expr:
    # (row, shingle) as one 64-bit key: joining one column is about twice as fast as two. A
    # collision can only add to a count, and reported pairs are recounted on the strings.
    return (h ^ (pl.col("row").cast(pl.UInt64) * pl.lit(_MIX, dtype=pl.UInt64))).alias("rk")
