"""Short prompts inside a turn: a whole phrase, or the prompt with one word substituted, in place.

The 3-gram measure of :mod:`guarddiag.audit.containment` cannot see a prompt of five words or
fewer (one or three 3-grams are common English), and a prompt of six to nine words with one
word changed keeps too few of its 3-grams (a middle word takes three of a six-word prompt's
four). This module finds them by their words *in place*, on the normal form (words are the
space-separated tokens of :func:`guarddiag.text.normalise`):

* a prompt of at most :data:`PHRASE_WORDS` words is found where a turn holds it as a whole
  phrase: the same words, consecutive, starting and ending at word boundaries;
* a prompt of more words is found where a run of as many consecutive words of the turn differs
  from it in at most :data:`SUBSTITUTED` position (one word substituted, none inserted or
  dropped); the similarity is the share of the prompt's words in place.

The search indexes the benchmark side only. A match with at most ``e`` substituted words keeps
intact at least one of any ``e·k + 1`` of the prompt's runs of ``k`` consecutive words (one
word is in at most ``k`` runs), so each prompt is anchored at its ``e·k + 1`` rarest runs of
``k = min(3, n)`` words: a run of the turn equal to an anchor proposes an alignment (turn,
prompt, offset), and each alignment is then checked word by word. No match is lost and every
one is exact. Words and runs are joined as 64-bit hashes; a collision can only propose an
alignment, and :func:`phrase_matches` compares the strings of every one it reports.

Escaped line breaks: a turn holding the two characters ``\\n`` (or ``\\t``, ``\\r``) where a
line break was meant (``"...\\nthreaten to..."``) would normalise to ``nthreaten``;
:func:`turn_forms` makes them spaces first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from guarddiag.audit.normal import normal_forms
from guarddiag.text import normalise

__all__ = ["ESCAPED_BREAK", "PHRASE_WORDS", "SUBSTITUTED", "PhraseIndex", "index_phrases",
           "phrase_hits", "phrase_matches", "turn_form", "turn_forms"]

PHRASE_WORDS = 5
"""Prompts of at most this many words are looked for as whole phrases (no word changed)."""
SUBSTITUTED = 1
"""Words a longer prompt may have substituted, in place, and still be found."""
ESCAPED_BREAK = r"\\[nrt]"
"""A backslash and ``n``, ``r`` or ``t``: a line break or tab written as two characters."""
_ESCAPED = re.compile(ESCAPED_BREAK)
_POS_BITS = 32
"""(row, position) packed into one 64-bit join key: rows and positions stay below 2**32."""


def turn_form(text: str) -> str:
    """The normal form a turn is searched in: escaped line breaks made spaces first."""
    return normalise(_ESCAPED.sub(" ", text) if "\\" in text else text)


def turn_forms(texts: pl.Series, forms: pl.Series | None = None) -> pl.Series:
    """:func:`turn_form` of every text, vectorised; ``forms`` (their normal forms, when known)
    are reused for the texts without an escaped break."""
    escaped = texts.str.contains(ESCAPED_BREAK)
    if forms is None:
        forms = normal_forms(texts)[0]
    if not escaped.any():
        return forms
    rows = escaped.arg_true()
    fixed = normal_forms(texts.gather(rows).str.replace_all(ESCAPED_BREAK, " "))[0]
    return forms.scatter(rows, fixed)


@dataclass(frozen=True)
class PhraseIndex:
    """The benchmark side of the in-place word search."""

    forms: tuple[str, ...]
    """Benchmark normal forms by key (as :class:`guarddiag.audit.exact.FormIndex`)."""
    words: pl.DataFrame
    """``key``, ``ppos``, ``w``: every word of each prompt, hashed, with its position."""
    anchors: pl.DataFrame
    """``g``, ``k``, ``key``, ``ppos``: each prompt's anchor runs of ``k`` words (hashed) and
    where they start."""
    need: pl.DataFrame
    """``key``, ``n`` (words), ``need`` (words a match holds in place: ``n - allowed``)."""


def index_phrases(forms: Sequence[str]) -> PhraseIndex:
    """Index every non-empty benchmark normal form of ``forms`` (key = position).

    A prompt of ``n`` words is anchored at runs of ``k = min(3, n)`` words: one substituted
    word spoils at most ``k`` of its runs, so ``allowed · k + 1`` of them (the rarest among the
    benchmark prompts' runs) keep at least one intact. Runs of three are rare in any text where
    single words are not ("card", "number": a word anchor proposed 1.8M alignments in a 40,000-
    row chat corpus, the runs a few thousand)."""
    forms = tuple(forms)
    split = (pl.DataFrame({"form": list(forms)}, schema={"form": pl.String})
             .with_row_index("key")
             .filter(pl.col("form") != "")
             .select("key", pl.col("form").str.split(" ").alias("w")))
    need = (split.select("key", pl.col("w").list.len().cast(pl.Int64).alias("n"))
            .with_columns((pl.col("n") - pl.when(pl.col("n") <= PHRASE_WORDS).then(0)
                           .otherwise(SUBSTITUTED)).alias("need"),
                          pl.min_horizontal(pl.col("n"), pl.lit(_RUN, pl.Int64)).alias("k")))
    words = _positions(split, "key", "ppos")
    runs = (words.join(need.select("key", "k", "n", "need"), on="key")
            .with_columns(_runs("key"))
            .with_columns(pl.when(pl.col("k") == 1).then("g1")
                          .when(pl.col("k") == 2).then("g2").otherwise("g3").alias("g"))
            .filter(pl.col("ppos") + pl.col("k") <= pl.col("n")))
    rarity = runs.group_by("g").agg(pl.col("key").n_unique().alias("df"))
    anchors = (runs.join(rarity, on="g")
               .sort("key", "df", "ppos")
               .with_columns(pl.int_range(pl.len()).over("key").alias("rank"))
               .filter(pl.col("rank") < (pl.col("n") - pl.col("need")) * pl.col("k") + 1))
    return PhraseIndex(forms=forms, words=words.select("key", "ppos", "w"),
                       anchors=anchors.select("g", "k", "key", "ppos"),
                       need=need.select("key", "n", "need"))


_RUN = 3
"""Words in an anchor run (fewer for prompts of one or two words)."""


def _positions(split: pl.DataFrame, owner: str, position: str) -> pl.DataFrame:
    """``split`` (``owner``, ``w``: a list of words) exploded to one row per word: its
    position in its list and its hash."""
    starts = pl.col("w").list.len().cum_sum() - pl.col("w").list.len()
    return (split.with_columns(starts.alias("start"))
            .explode("w")
            .select(owner, (pl.int_range(pl.len()) - pl.col("start")).alias(position),
                    pl.col("w").hash(seed=0)))


_MIX = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F)
"""Odd 64-bit constants folding a run's next word hashes into one (wrapping products): a
collision can only propose an alignment, which is then checked word by word."""


def _runs(owner: str) -> list[pl.Expr]:
    """The hashes of the runs of one, two and three words starting at each position (null
    where the owner's words end first), from the word hashes ``w`` of consecutive rows."""
    def within(i: int) -> pl.Expr:
        return pl.when(pl.col(owner).shift(-i) == pl.col(owner)).then(pl.col("w").shift(-i))

    two = pl.col("w") ^ (within(1) * pl.lit(_MIX[0], dtype=pl.UInt64))
    return [pl.col("w").alias("g1"), two.alias("g2"),
            (two ^ (within(2) * pl.lit(_MIX[1], dtype=pl.UInt64))).alias("g3")]


def phrase_hits(index: PhraseIndex, forms: pl.Series) -> pl.DataFrame:
    """(``row``, ``key``, ``held``) of every alignment where row ``row`` of ``forms`` (turn
    forms, rows from 0) holds prompt ``key`` with at most the allowed words substituted;
    ``held`` is the number of the prompt's words in place (best alignment of the row)."""
    empty = pl.DataFrame(schema={"row": pl.Int64, "key": pl.UInt32, "held": pl.Int64})
    if index.need.height == 0 or forms.len() == 0:
        return empty
    split = (pl.DataFrame({"form": forms}).with_row_index("row")
             .filter(pl.col("form") != "")
             .select(pl.col("row").cast(pl.Int64), pl.col("form").str.split(" ").alias("w")))
    lengths = split.select("row", pl.col("w").list.len().cast(pl.Int64).alias("len"))
    turn = _positions(split, "row", "pos")
    sizes = index.anchors.get_column("k").unique().to_list()
    grams = turn.lazy().with_columns(_runs("row"))
    proposed = pl.concat([
        grams.select("row", "pos", pl.col(f"g{k}").alias("g"))
        .join(index.anchors.lazy().filter(pl.col("k") == k), on="g")
        .select("row", "key", (pl.col("pos") - pl.col("ppos")).alias("offset"))
        for k in sizes])
    aligned = (proposed.unique()
               .join(index.need.lazy(), on="key")
               .join(lengths.lazy(), on="row")
               .filter((pl.col("offset") >= 0) & (pl.col("offset") + pl.col("n") <= pl.col("len")))
               .select("row", "key", "offset", "need"))
    placed = (aligned.join(index.words.lazy(), on="key")
              .select("row", "key", "offset", "need", "w",
                      _packed(pl.col("row"), pl.col("offset") + pl.col("ppos"))))
    return (placed.join(turn.lazy().select(_packed(pl.col("row"), pl.col("pos")),
                                           pl.col("w").alias("tw")), on="rp")
            .group_by("row", "key", "offset", "need")
            .agg((pl.col("w") == pl.col("tw")).sum().cast(pl.Int64).alias("held"))
            .filter(pl.col("held") >= pl.col("need"))
            .group_by("row", "key").agg(pl.col("held").max())
            .sort("row", "key")
            .collect())


def _packed(row: pl.Expr, pos: pl.Expr) -> pl.Expr:
    # One 64-bit join key: joining one column is about twice as fast as two.
    return (row.cast(pl.UInt64) * pl.lit(1 << _POS_BITS, dtype=pl.UInt64)
            + pos.cast(pl.UInt64)).alias("rp")


def phrase_matches(index: PhraseIndex, forms: pl.Series) -> list[tuple[int, int, float]]:
    """(key, row, share of the prompt's words in place) of every match :func:`phrase_hits`
    proposes, checked on the strings (a hash collision cannot add one); rows from 0."""
    hits = phrase_hits(index, forms)
    if hits.height == 0:
        return []
    texts = forms.to_list()
    out = []
    for row, key, _ in hits.iter_rows():
        held = _held_in_place(index.forms[key].split(" "), texts[row].split(" "))
        if held is not None:
            out.append((key, row, held))
    return out


def _held_in_place(prompt: list[str], turn: list[str]) -> float | None:
    """The best share of ``prompt``'s words in place over the runs of ``turn`` of its length,
    if a run differs in no more than the allowed positions; else None."""
    n = len(prompt)
    allowed = 0 if n <= PHRASE_WORDS else SUBSTITUTED
    best = max((sum(a == b for a, b in zip(prompt, turn[start:start + n], strict=True))
                for start in range(len(turn) - n + 1)), default=-1)
    return best / n if best >= n - allowed else None
