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
from functools import lru_cache

_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=1 << 16)
def _is_punct_or_symbol(char: str) -> bool:
    return unicodedata.category(char)[0] in ("P", "S")


def normalise(text: str) -> str:
    """The normal form used for exact overlap (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    stripped = "".join(" " if _is_punct_or_symbol(c) else c for c in folded)
    return _SPACE.sub(" ", stripped).strip()


_WORD = re.compile(r"\w+", re.UNICODE)


def word_set(text: str) -> frozenset[str]:
    """Set of word tokens of the normal form, used for word-set Jaccard similarity."""
    return frozenset(_WORD.findall(normalise(text)))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets have similarity 0 (nothing to compare)."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
