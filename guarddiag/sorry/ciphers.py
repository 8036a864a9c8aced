"""The deterministic SORRY-Bench mutations: four encodings and seeded misspellings.

Encodings and their exact guarantees (tested on every mirrored benchmark prompt):

* **ASCII** - every character becomes its decimal Unicode code point, separated by single
  spaces (``"Hi!"`` -> ``"72 105 33"``). Despite the name it covers all of Unicode, so
  ``decode_ascii(encode_ascii(x)) == x`` for every string.
* **Caesar** - ASCII letters shift forward by 3 within their case (``xyz`` -> ``abc``); every
  other character is kept. Exact inverse: shift back by 3.
* **Atbash** - ASCII letters are mirrored within their case (``a``<->``z``, ``B``<->``Y``);
  every other character is kept. Its own inverse.
* **Morse** - International Morse for letters, digits and the punctuation
  ``. , ? ' ! / ( ) & : ; = + - _ " $ @``; one code per character, codes separated by a single
  space, a space character becomes ``/``. Morse has no letter case, and characters outside the
  alphabet (newlines, ``#``, accented letters, emoji, …) are *passed through* as their own
  token. Round trip: ``decode_morse(encode_morse(x)) == morse_canonical(x)``, i.e. ``x`` with its
  ASCII letters upper-cased; :func:`morse_unencodable` lists the passed-through characters.
  The decoding is unambiguous because a passed-through token is a single character that is
  never ``.``, ``-`` or ``/`` (those three are themselves encoded) and never an ASCII space.

Misspellings are not reversible by design: :func:`misspell` edits words with a seeded
generator, so the same (text, seed, key) always gives the same output.
"""

from __future__ import annotations

import hashlib
import string

import numpy as np

from guarddiag.errors import GuarddiagError

# --- ASCII (code points)

def encode_ascii(text: str) -> str:
    return " ".join(str(ord(c)) for c in text)


def decode_ascii(code: str) -> str:
    if not code:
        return ""
    try:
        return "".join(chr(int(tok)) for tok in code.split(" "))
    except ValueError:
        raise GuarddiagError(
            "ASCII decoding: expected decimal code points separated by single spaces"
        ) from None


# --- Caesar (shift 3) and Atbash

_LOWER, _UPPER = string.ascii_lowercase, string.ascii_uppercase


def _shift_table(shift: int) -> dict[int, str]:
    table = {}
    for alphabet in (_LOWER, _UPPER):
        for i, c in enumerate(alphabet):
            table[ord(c)] = alphabet[(i + shift) % 26]
    return table


CAESAR_SHIFT = 3
_CAESAR_ENC = _shift_table(CAESAR_SHIFT)
_CAESAR_DEC = _shift_table(-CAESAR_SHIFT)
_ATBASH = {ord(c): alphabet[25 - i] for alphabet in (_LOWER, _UPPER)
           for i, c in enumerate(alphabet)}


def encode_caesar(text: str) -> str:
    return text.translate(_CAESAR_ENC)


def decode_caesar(code: str) -> str:
    return code.translate(_CAESAR_DEC)


def encode_atbash(text: str) -> str:
    return text.translate(_ATBASH)


decode_atbash = encode_atbash


# --- Morse

MORSE: dict[str, str] = {
    "A": ".-", "B": "-...", "C": "-.-.", "D": "-..", "E": ".", "F": "..-.", "G": "--.",
    "H": "....", "I": "..", "J": ".---", "K": "-.-", "L": ".-..", "M": "--", "N": "-.",
    "O": "---", "P": ".--.", "Q": "--.-", "R": ".-.", "S": "...", "T": "-", "U": "..-",
    "V": "...-", "W": ".--", "X": "-..-", "Y": "-.--", "Z": "--..",
    "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-", "5": ".....",
    "6": "-....", "7": "--...", "8": "---..", "9": "----.",
    ".": ".-.-.-", ",": "--..--", "?": "..--..", "'": ".----.", "!": "-.-.--", "/": "-..-.",
    "(": "-.--.", ")": "-.--.-", "&": ".-...", ":": "---...", ";": "-.-.-.", "=": "-...-",
    "+": ".-.-.", "-": "-....-", "_": "..--.-", '"': ".-..-.", "$": "...-..-", "@": ".--.-.",
}
_MORSE_DEC = {code: char for char, code in MORSE.items()}
MORSE_WORD_GAP = "/"


def morse_canonical(text: str) -> str:
    """What a Morse round trip gives back: ASCII letters upper-cased, everything else kept."""
    return "".join(c.upper() if c in _LOWER else c for c in text)


def morse_unencodable(text: str) -> list[str]:
    """Distinct characters of ``text`` that Morse passes through, in order of appearance."""
    seen: dict[str, None] = {}
    for c in text:
        if c != " " and morse_canonical(c) not in MORSE:
            seen.setdefault(c)
    return list(seen)


def encode_morse(text: str) -> str:
    tokens = []
    for c in text:
        if c == " ":
            tokens.append(MORSE_WORD_GAP)
        else:
            tokens.append(MORSE.get(morse_canonical(c), c))
    return " ".join(tokens)


def decode_morse(code: str) -> str:
    if not code:
        return ""
    out = []
    for tok in code.split(" "):
        if tok == MORSE_WORD_GAP:
            out.append(" ")
        elif tok in _MORSE_DEC:
            out.append(_MORSE_DEC[tok])
        elif len(tok) == 1 and tok not in ".-":
            out.append(tok)  # passed through at encoding time
        else:
            raise GuarddiagError(f"Morse decoding: {tok!r} is not a Morse code")
    return "".join(out)


# --- Seeded misspellings

_QWERTY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS: dict[str, str] = {}
for _r, _row in enumerate(_QWERTY_ROWS):
    for _i, _c in enumerate(_row):
        near = [_row[j] for j in (_i - 1, _i + 1) if 0 <= j < len(_row)]
        for _dr in (-1, 1):
            if 0 <= _r + _dr < len(_QWERTY_ROWS):
                other = _QWERTY_ROWS[_r + _dr]
                near += [other[j] for j in (_i - 1, _i, _i + 1) if 0 <= j < len(other)]
        _NEIGHBOURS[_c] = "".join(sorted(set(near)))

MISSPELL_EDITS = ("swap", "drop", "double", "neighbour")
"""Edit kinds, each applied inside one word: swap two adjacent letters, drop a letter, double a
letter, or replace a letter by a QWERTY neighbour (case kept)."""

MISSPELL_MIN_LENGTH = 4
"""Words shorter than this are never edited: mangling "a"/"to"/"the" reads as noise, not typos."""


def stable_key(*parts: str) -> int:
    """A 64-bit integer from strings, stable across runs and platforms (unlike ``hash``)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _word_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, c in enumerate(text + " "):
        if c.isascii() and c.isalpha():
            if start is None:
                start = i
        elif start is not None:
            if i - start >= MISSPELL_MIN_LENGTH:
                spans.append((start, i))
            start = None
    return spans


def _edit_word(word: str, rng: np.random.Generator) -> str:
    kind = MISSPELL_EDITS[int(rng.integers(len(MISSPELL_EDITS)))]
    # Keep the first letter: readers (and tokenisers) anchor on it, as human typos mostly do.
    i = int(rng.integers(1, len(word) - 1)) if len(word) > 2 else 1
    if kind == "swap":
        j = i + 1 if i + 1 < len(word) else i - 1
        a, b = sorted((i, j))
        if word[a] == word[b]:  # swapping equal letters changes nothing: drop one instead
            return word[:a] + word[a + 1:]
        return word[:a] + word[b] + word[a] + word[b + 1:]
    if kind == "drop":
        return word[:i] + word[i + 1:]
    if kind == "double":
        return word[:i + 1] + word[i] + word[i + 1:]
    near = _NEIGHBOURS[word[i].lower()]
    repl = near[int(rng.integers(len(near)))]
    return word[:i] + (repl.upper() if word[i].isupper() else repl) + word[i + 1:]


def misspell(text: str, *, seed: int, key: str = "", rate: float = 0.3) -> str:
    """Introduce typos into about ``rate`` of the words of ``text`` (length >= 4, ASCII letters).

    Each chosen word gets one edit (:data:`MISSPELL_EDITS`). The generator is seeded from
    ``(seed, key)`` — pass the prompt id as ``key`` — so a row's output does not depend on which
    other rows are mutated with it. At least one word is edited whenever any word qualifies, so
    the mutation is never a silent no-op.
    """
    if not 0.0 < rate <= 1.0:
        raise GuarddiagError(f"misspell rate: expected a value in (0, 1], got {rate!r}")
    spans = _word_spans(text)
    if not spans:
        return text
    rng = np.random.default_rng([seed & 0xFFFFFFFF, stable_key(key, text)])
    chosen = rng.random(len(spans)) < rate
    if not chosen.any():
        chosen[int(rng.integers(len(spans)))] = True
    out, last = [], 0
    for (start, end), pick in zip(spans, chosen, strict=True):
        out.append(text[last:start])
        word = text[start:end]
        out.append(_edit_word(word, rng) if pick else word)
        last = end
    out.append(text[last:])
    return "".join(out)
