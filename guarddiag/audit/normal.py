"""Vectorised normal forms: :func:`guarddiag.text.normalise` over a whole column at once.

``guarddiag.text.normalise`` stays the one definition of the normal form (NFKC, casefold,
punctuation and symbols to spaces, whitespace collapsed); this module computes it in polars'
Rust kernels for every row where the result is provably the same, and calls the Python function
for the rest.

A row takes the vectorised path when every character in it is ASCII, *provable* or
*separator-like*, properties :func:`is_provable` decides from Python's own ``unicodedata`` (so
the two paths can never disagree on a Unicode version), for each character the first time a
batch holds it. A character ``c`` is provable when

* NFKC leaves it alone in any context: ``NFKC(c) == c``, its combining class is 0, neither it nor
  the first character of its decomposition can be the second half of a canonical composition,
  and it is not a Hangul conjoining jamo. Then NFKC of a string of such characters is the string
  itself: NFKD splits each character on its own, canonical ordering has no run of marks to
  reorder across characters, and recomposition can only rebuild each character, since the
  starter that begins the next one blocks every mark and composes with nothing before it;
* case folding is one character to one character and equals lower-casing (``ß``, ``ς``, the
  Cherokee letters, ``İ`` and the final-sigma ``Σ`` are out), and polars' ``to_lowercase``
  gives the same character (checked on the spot, character by character);
* lower-casing does not move it in or out of the separators (categories P* and S*, and what
  ``str.split`` treats as whitespace).

A character is **separator-like** when NFKC turns it into separators only (``…`` into ``...``,
the full-width ``？`` into ``?``) and it meets the context conditions above (combining class 0,
no canonical composition with its neighbours); the normal form then treats it as a separator.

On an ASCII row the four steps are byte rules: NFKC is the identity, ``casefold`` maps A-Z to
a-z, and the separators are the 32 bytes of ``string.punctuation`` and the 10 that
``str.split`` treats as whitespace. On a vectorised row the normal form is then: every separator
character becomes a space (polars ``replace_many``), runs of spaces collapse, the ends are
stripped of spaces, and the row is lower-cased. About 97% of the non-ASCII rows of a pool built
from the benchmark prompts take this path; rows with ligatures, full-width letters, ``ß``,
``™`` or combining marks go through Python. Only the characters a batch holds are looked up, so
the separator list handed to ``replace_many`` stays short. ``tests/test_normalise_vectorised.py``
checks both paths against ``normalise`` on a large random Unicode sample and on every
character.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from guarddiag.text import normalise

__all__ = ["END_CHARS", "WORD_BYTES", "KeyIndex", "exact_candidates",
           "exact_candidates_and_words", "form_keys", "is_provable", "key_code_points", "key_index",
           "large_strings", "normal_forms", "word_code_points", "word_forms"]

_JAMO = ((0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF))
_ASCII_SEPARATORS = tuple(chr(c) for c in range(128)
                          if unicodedata.category(chr(c))[0] in "PS" or chr(c).isspace())
"""The 32 ASCII punctuation and symbol characters and the 10 ASCII whitespace ones."""
_PROVABLE: dict[str, int] = {}
"""Per process: non-ASCII character → 1 provable, 2 separator-like, 0 neither; filled as
batches bring new characters."""


def _is_separator(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS" or ch.isspace()


@lru_cache(maxsize=1)
def _composition_seconds() -> frozenset[str]:
    """Characters that are the second half of a two-character canonical decomposition (the
    ones canonical composition can merge into the character before them)."""
    out = set()
    # No decomposition is defined above U+2FA1D; most code points have none, so the empty
    # ones are skipped before any splitting (this runs in every audit process).
    for decomposition in map(unicodedata.decomposition, map(chr, range(0x30000))):
        if decomposition and decomposition[0] != "<":
            parts = decomposition.split()
            if len(parts) == 2:
                out.add(chr(int(parts[1], 16)))
    return frozenset(out)


def _unicode_rules_hold(ch: str) -> bool:
    """The NFKC, case-folding and separator conditions of the module docstring."""
    cp = ord(ch)
    second = _composition_seconds()
    if unicodedata.category(ch) in ("Cn", "Cs", "Co") or unicodedata.combining(ch):
        return False
    if unicodedata.normalize("NFKC", ch) != ch or ch in second:
        return False
    if any(low <= cp <= high for low, high in _JAMO):
        return False
    head = unicodedata.normalize("NFKD", ch)[0]
    if unicodedata.combining(head) or head in second:
        return False
    lower = ch.lower()
    return (len(lower) == 1 and ch.casefold() == lower and cp != 0x3A3
            and _is_separator(ch) == _is_separator(lower))


def _separator_like(ch: str) -> bool:
    """NFKC turns ``ch`` into separators only (``…`` → ``...``, full-width ``？`` → ``?``), in
    any context: then the normal form treats it as a separator."""
    second = _composition_seconds()
    if unicodedata.category(ch) in ("Cn", "Cs", "Co") or unicodedata.combining(ch):
        return False
    head = unicodedata.normalize("NFKD", ch)[0]
    if ch in second or unicodedata.combining(head) or head in second:
        return False
    folded = unicodedata.normalize("NFKC", ch)
    return all(c in _ASCII_SEPARATORS or (_unicode_rules_hold(c) and _is_separator(c))
               for c in folded)


def is_provable(chars: Iterable[str]) -> dict[str, int]:
    """For each (non-ASCII) character: 1 if provable, 2 if separator-like, 0 if neither (module
    docstring); remembered per process."""
    chars = list(dict.fromkeys(chars))
    new = [c for c in chars if c not in _PROVABLE]
    if new:
        ruled = [c for c in new if _unicode_rules_hold(c)]
        # polars lower-cases with Rust's Unicode tables, possibly a newer version than
        # Python's: a character counts only where the two agree.
        lowered = pl.Series(ruled, dtype=pl.String).str.to_lowercase().to_list()
        agree = {c for c, low in zip(ruled, lowered, strict=True) if low == c.lower()}
        _PROVABLE.update((c, 1 if c in agree else 2 if _separator_like(c) else 0)
                         for c in new)
    return {c: _PROVABLE[c] for c in chars}


def key_code_points(chars: Iterable[str]) -> dict[str, int]:
    """What each character becomes in a key (a normal form without its spaces) on the
    vectorised path: the code point of its lower case, -1 for a separator (dropped), or -2
    if it is not provable (its row's key needs :func:`guarddiag.text.normalise`). For the
    compiled exact pass (:mod:`guarddiag.audit.kernels`), which reads code points."""
    return {c: (-1 if kind == 2 or _is_separator(c) else ord(c.lower())) if kind else -2
            for c, kind in is_provable(chars).items()}


def word_code_points(chars: Iterable[str]) -> dict[str, int]:
    """What each character becomes in a row's word form, its word-ending characters made
    spaces (:func:`word_forms`, then :func:`guarddiag.audit.neardup.spaced_forms`): the code
    point of its lower case if that is a word character (Python's ``\\w``: ``isalnum()`` or
    ``_``), -1 for a space, or -2 if it is not provable (its row's words need
    :func:`guarddiag.text.normalise`). For the compiled near-dup probe
    (:mod:`guarddiag.audit.kernels`), which reads code points."""
    out = {}
    for c, kind in is_provable(chars).items():
        low = c.lower()
        word = kind == 1 and not _is_separator(c) and (low.isalnum() or low == "_")
        out[c] = ord(low) if word else -1 if kind else -2
    return out


def _vectorised(texts: pl.Series, separators: list[str], *, keys: bool) -> pl.Series:
    # Aho-Corasick over single characters (replace_many) is several times faster than a regex
    # replacement here; ASCII bytes never sit inside a multi-byte character, so it is exact.
    if keys:
        return texts.str.replace_many(separators, [""] * len(separators)).str.to_lowercase()
    spaced = texts.str.replace_many(separators, [" "] * len(separators))
    return spaced.str.replace_all(" {2,}", " ").str.strip_chars(" ").str.to_lowercase()


def _characters(texts: pl.Series) -> tuple[list[str], pl.Series]:
    """(the separators among the characters ``texts`` hold, the positions of the texts holding
    an unprovable character): one extraction of the non-ASCII characters answers both."""
    held = texts.str.extract_all(r"[^\x00-\x7F]")
    flat = held.explode()          # an empty or null list becomes one null
    status = is_provable(flat.drop_nulls().unique().to_list())
    separators = [*_ASCII_SEPARATORS, *(c for c, kind in status.items()
                                        if kind == 2 or (kind == 1 and _is_separator(c)))]
    unprovable = [c for c, kind in status.items() if kind == 0]
    if not unprovable:
        return separators, pl.Series([], dtype=pl.UInt32)
    owner = np.repeat(np.arange(texts.len(), dtype=np.uint32),
                      held.list.len().fill_null(1).clip(lower_bound=1).to_numpy())
    bad = flat.is_in(pl.Series(unprovable, dtype=pl.String).implode()).to_numpy()
    return separators, pl.Series(np.unique(owner[bad]), dtype=pl.UInt32)


@dataclass(frozen=True)
class _Wide:
    """A batch's rows that hold a non-ASCII character, worked out once per batch for every
    pass that needs them (the exact pass's key ends and the near-dup scan's words)."""

    rows: pl.Series
    """Their positions in the batch."""
    separators: list[str]
    """The ASCII separators and the separator-like characters these rows hold."""
    slow: pl.Series
    """Positions, among :attr:`rows`, of the rows holding an unprovable character."""
    python: pl.Series
    """Those rows' normal forms, by :func:`guarddiag.text.normalise`."""

    @property
    def python_keys(self) -> pl.Series:
        """The keys (normal forms without their spaces) of :attr:`python`."""
        return self.python.str.replace_all(" ", "", literal=True)

    @property
    def slow_rows(self) -> pl.Series:
        """Positions in the batch of the rows holding an unprovable character."""
        return self.rows.gather(self.slow)

    def words(self, mapped: pl.Series) -> pl.Series:
        """The word forms of these rows, in :attr:`rows` order, from the batch after the byte
        table (:data:`WORD_BYTES`: every ASCII byte but a letter or digit is a space already):
        the non-ASCII separators to spaces, lower-cased, or the normal form for an unprovable
        row. Lower-casing never moves a character in or out of the separators (module
        docstring), so these are the words of the normal form, at a fraction of its cost (no
        collapse or strip either)."""
        wide = [c for c in self.separators if c > "\x7f"]
        out = mapped.gather(self.rows)
        if wide:
            out = out.str.replace_many(wide, [" "] * len(wide))
        out = out.str.to_lowercase()
        return out.scatter(self.slow, self.python) if self.slow.len() else out

    def forms(self, texts: pl.Series, *, keys: bool) -> pl.Series:
        """The normal forms (``keys``: without spaces) of these rows, in :attr:`rows` order."""
        out = _vectorised(texts.gather(self.rows), self.separators, keys=keys)
        if self.slow.len():
            out = out.scatter(self.slow, self.python_keys if keys else self.python)
        return out


def _wide(texts: pl.Series) -> _Wide:
    rows = (texts.str.len_bytes() != texts.str.len_chars()).arg_true()
    wide = texts.gather(rows)
    separators, slow = _characters(wide)
    python = pl.Series([normalise(t) for t in wide.gather(slow).to_list()], dtype=pl.String)
    return _Wide(rows=rows, separators=separators, slow=slow, python=python)


def _forms(texts: pl.Series, *, keys: bool) -> tuple[pl.Series, int]:
    out = _vectorised(texts, list(_ASCII_SEPARATORS), keys=keys).rename("form")
    wide = _wide(texts)
    if wide.rows.len() == 0:
        return out, 0
    return out.scatter(wide.rows, wide.forms(texts, keys=keys)), wide.slow.len()


def normal_forms(texts: pl.Series) -> tuple[pl.Series, int]:
    """The normal form of every (non-null) text, and how many rows needed the Python path.

    Equal, row for row, to ``[normalise(t) for t in texts]`` (module docstring).
    """
    return _forms(texts, keys=False)


WORD_BYTES = np.array([b + 32 if 0x41 <= b <= 0x5A else b if chr(b).isalnum() else 0x20
                        for b in range(128)] + list(range(128, 256)), dtype=np.uint8)
"""Byte table of an ASCII row's words: A-Z to a-z, digits and a-z kept, every other ASCII byte
to a space (the separators, which the normal form makes spaces, and the control characters,
which it keeps but which end a word as a space does); bytes of 0x80 and up are kept (ASCII bytes
never sit inside a UTF-8 sequence, so a multi-byte character passes through whole). A row
without a non-ASCII character thus holds only ``[0-9a-z ]``."""


_WORD_CONTROLS = [chr(b) for b in range(128) if WORD_BYTES[b] == 0x20 and chr(b) != " "
                  and chr(b) not in _ASCII_SEPARATORS]
"""The ASCII control characters a normal form keeps and a word form makes spaces."""


def word_forms(texts: pl.Series) -> tuple[pl.Series, int]:
    """Per row, a string whose words (Python's ``\\w+`` runs, which the near-dup probe takes)
    are the words of its normal form, and how many rows needed the Python path: a row's form
    before its spaces collapse and its ends are stripped, its ASCII control characters spaces
    too (one byte-table pass over the column, :data:`WORD_BYTES`, cheaper than the form,
    then :meth:`_Wide.words` for the rows holding a non-ASCII character), or its normal form
    (:func:`normal_forms`) for a row holding an unprovable character. A row without a
    non-ASCII character holds only ``[0-9a-z ]``. For the near-dup scan, which needs each row's
    word set and not its form."""
    wide = _wide(texts)
    return _word_forms(texts, wide), wide.slow.len()


def large_strings(texts: pl.Series) -> Any:
    """``texts`` as one Arrow large-string array, for passes over its offset and byte buffers
    (the word forms' byte table, the compiled near-dup probe), or ``None`` if it holds a
    null."""
    import pyarrow as pa

    arrow = texts.cast(pl.String).to_arrow()
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    if arrow.null_count:
        return None
    return arrow if isinstance(arrow, pa.LargeStringArray) else arrow.cast(pa.large_string())


def _word_forms(texts: pl.Series, wide: _Wide) -> pl.Series:
    import pyarrow as pa

    arrow = large_strings(texts)
    if arrow is None:
        return normal_forms(texts)[0].str.replace_many(_WORD_CONTROLS,
                                                       [" "] * len(_WORD_CONTROLS))
    _, offsets, data = arrow.buffers()
    mapped = WORD_BYTES[np.frombuffer(data, dtype=np.uint8)] if data is not None else None
    out = pl.Series(texts.name, pa.LargeStringArray.from_buffers(
        len(arrow), offsets, pa.py_buffer(mapped) if mapped is not None else data,
        offset=arrow.offset), dtype=pl.String)
    if wide.rows.len():
        out = out.scatter(wide.rows, wide.words(out))
    return out


def form_keys(texts: pl.Series) -> tuple[pl.Series, int]:
    """Every text's normal form without its spaces, and how many rows needed the Python path.

    Equal normal forms have equal keys, so the exact pass looks up keys (one deletion instead of
    a replacement, a collapse and a strip) and leaves the few rows whose key is a benchmark
    prompt's to the exact comparison.
    """
    return _forms(texts, keys=True)


# ─── the exact pass: keys, and their ends first ────────────────────────────────────────────────

END_CHARS = 4
"""Key characters compared at each end of a row before its whole key is computed."""
_WINDOW = 12
"""Characters read at each end of a row for its key's ends: enough for END_CHARS key characters
unless the window is mostly separators (such rows get their whole key computed)."""


@dataclass(frozen=True)
class KeyIndex:
    """The benchmark side of the exact pass."""

    keys: pl.Series
    """Every benchmark normal form without its spaces."""
    ends: pl.Series
    """Every key's first and last :data:`END_CHARS` characters, joined by a NUL."""


def key_index(forms: Iterable[str]) -> KeyIndex:
    keys = [f.replace(" ", "") for f in forms]
    return KeyIndex(keys=pl.Series("key", keys, dtype=pl.String),
                    ends=pl.Series("ends", sorted({f"{k[:END_CHARS]}\0{k[-END_CHARS:]}"
                                                   for k in keys}), dtype=pl.String))


def exact_candidates(texts: pl.Series, index: KeyIndex) -> tuple[pl.Series, int]:
    """Which rows' normal forms can be benchmark forms (their keys are benchmark keys), and
    how many rows needed the Python path.

    Equal forms have equal keys, and equal keys have equal ends. The ends come from a window of
    :data:`_WINDOW` characters at each end of the row, a fraction of the text; only rows whose
    ends are a benchmark key's (about 1.5% of a synthetic pool), whose window held too few key
    characters, or that hold an unprovable character get their whole key computed.
    """
    return _exact_candidates(texts, index, _wide(texts))


def exact_candidates_and_words(texts: pl.Series, index: KeyIndex
                               ) -> tuple[pl.Series, int, pl.Series]:
    """:func:`exact_candidates` and :func:`word_forms` of one batch, its non-ASCII rows'
    characters looked up and its unprovable rows normalised once for both (the near-dup scan
    when some benchmark form has no word, so that the probe alone would miss its copies)."""
    wide = _wide(texts)
    keep, slow = _exact_candidates(texts, index, wide)
    return keep, slow, _word_forms(texts, wide)


def _exact_candidates(texts: pl.Series, index: KeyIndex, wide: _Wide
                      ) -> tuple[pl.Series, int]:
    separators = wide.separators
    none = [""] * len(separators)
    # Both windows in one string, "<head>\0<tail>", cleaned and lower-cased in one pass each (a
    # third of the time of two): NUL is no separator and lower-cases to itself, so the result
    # is clean(head) + NUL + clean(tail). Its first END_CHARS characters are the key's when
    # they hold no NUL, likewise its last; a NUL among them (the head or tail window had too
    # few key characters, or the text holds a NUL) makes the row unsure, i.e. a candidate.
    window = (texts.str.head(_WINDOW) + "\0" + texts.str.tail(_WINDOW)
              ).str.replace_many(separators, none).str.to_lowercase()
    head, tail = window.str.head(END_CHARS), window.str.tail(END_CHARS)
    unsure = (head.str.contains("\0", literal=True) | tail.str.contains("\0", literal=True))
    maybe = (head + "\0" + tail).is_in(index.ends.implode()) | unsure
    slow_rows = wide.slow_rows
    slow = pl.Series(values=np.zeros(texts.len(), dtype=bool)).scatter(slow_rows, True)
    keep = pl.Series(values=np.zeros(texts.len(), dtype=bool))
    fast_rows = (maybe & ~slow).arg_true()
    if fast_rows.len():
        keys = _vectorised(texts.gather(fast_rows), separators, keys=True)
        keep = keep.scatter(fast_rows.filter(keys.is_in(index.keys.implode())), True)
    if slow_rows.len():
        keep = keep.scatter(slow_rows.filter(wide.python_keys.is_in(index.keys.implode())), True)
    return keep, slow_rows.len()
