"""Text normalisation shared by de-duplication and the contamination audit.

:func:`normalise` defines what counts as an *exact* overlap: two prompts overlap when their
normalised forms are equal. Steps, in order:

1. Unicode NFKC (full-width letters, ligatures and compatibility forms fold to their base);
2. ``str.casefold`` (a stronger lower-casing: ``ß`` → ``ss``);
3. every character whose Unicode category is punctuation (P*) or symbol (S*) becomes a space;
4. runs of whitespace collapse to one space, and the ends are stripped.

So ``"How do I  make a BOMB?!"`` and ``"how do i make a bomb"`` are exact overlaps, while any
change of a word is not (that is what the near-duplicate column is for).
"""

from __future__ import annotations

import re
import unicodedata


class _PunctSymbolSpaces(dict[int, str]):
    """The ``str.translate`` table of step 3, filled as code points are met: a P* or S* code
    point maps to a space, any other to itself. Translating in C is several times faster
    than a per-character Python test; filling the table lazily costs one category look-up per
    distinct code point instead of all 1.1M of them in every process
    (docs/decisions.md#2026-12-02-the-normal-forms-translate-table)."""

    def __missing__(self, cp: int) -> str:
        value = " " if unicodedata.category(chr(cp))[0] in ("P", "S") else chr(cp)
        self[cp] = value
        return value


_PUNCT_SYMBOL_SPACES = _PunctSymbolSpaces()


def normalise(text: str) -> str:
    """The normal form used for exact overlap (see the module docstring)."""
    # NFKC is the identity on ASCII and casefold equals lower there: skip the Unicode pass.
    folded = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()  # pragma: no mutate(guard-never): NFKC+casefold = lower on ASCII  # noqa: E501
    # str.split() splits on exactly the characters regex \s matches (Py_UNICODE_ISSPACE), so the
    # join collapses whitespace runs and strips the ends.
    return " ".join(folded.translate(_PUNCT_SYMBOL_SPACES).split())


_WORD = re.compile(r"\w+", re.UNICODE)


def words_of_normal_form(normal: str) -> list[str]:
    """Word tokens of an already normalised string (what :func:`word_set` collects)."""
    return _WORD.findall(normal)


def word_set(text: str) -> frozenset[str]:
    """Set of word tokens of the normal form, used for word-set Jaccard similarity."""
    return frozenset(_WORD.findall(normalise(text)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets have similarity 0 (nothing to compare)."""
    if not a and not b:  # pragma: no mutate(and → or): one empty set gives 0/|other| = 0.0 as well
        return 0.0
    return len(a & b) / len(a | b)
