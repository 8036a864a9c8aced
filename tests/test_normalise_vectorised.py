"""The vectorised normal form (guarddiag.audit.normal) against the one definition,
guarddiag.text.normalise, which is the oracle throughout: every code point in context, a large
seeded random Unicode sample (combining marks, full-width forms, ß/ſ/Turkish i, emoji, RTL
text, whitespace variants), and the exact pass's candidate rows."""

from __future__ import annotations

import itertools
import random
import re

import polars as pl

from guarddiag.audit.normal import (
    exact_candidates,
    form_keys,
    is_provable,
    key_index,
    normal_forms,
    word_forms,
)
from guarddiag.text import normalise, words_of_normal_form

WHITESPACE = ["\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", " ", "\x85",
              "\xa0", "\u1680", "\u2000", "\u2007", "\u200a", "\u2028", "\u2029", "\u202f",
              "\u205f", "\u3000", "\u200b", "\u180e", "\ufeff"]
COMBINING = [chr(c) for c in [*range(0x300, 0x370), 0x591, 0x5B0, 0x5BC, 0x64B, 0x650, 0x651,
                              0x670, 0x93C, 0x94D, 0x9BE, 0xBBE, 0x1DC0, 0x20D7, 0x302A]]
FULL_WIDTH = [chr(c) for c in range(0xFF01, 0xFF5F)] + ["\u3000", "\uff61", "\uff9f"]
CASE_TRAPS = ["ß", "ẞ", "ſ", "İ", "ı", "i", "I", "K", "Å", "Σ", "σ", "ς", "ǅ", "ǈ", "ﬁ", "ﬂ",
              "ﬀ", "ŉ", "ΐ", "Ꭰ", "ꭰ", "ᏸ", "Ω", "ẚ", "ʼn", "ϐ", "ᾼ", "ᾳ", "Ⅻ", "ⓐ", "Ⓐ"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "❤️", "🏳️‍🌈", "\ufe0f", "\u200d", "🇫🇷", "🍕", "™", "©", "…",
         "‼", "⁉", "№", "℃", "½", "²", "①"]
RTL = [chr(c) for c in [*range(0x5D0, 0x5EB), *range(0x621, 0x64B), 0x200E, 0x200F, 0x202A,
                        0x202B, 0x202E, 0x2066, 0x2069, 0x61C, 0xFB1D, 0xFB2A, 0xFDFA, 0xFEFB]]
OTHER = ["가", "각", "\u1100", "\u1161", "\u11a8", "\ua960", "\ud7b0", "中", "文", "、", "。",
         "「", "」", "ー", "・", "Ж", "ж", "Ё", "ё", "é", "e\u0301", "ñ", "Ø", "ø", "œ", "Œ",
         "\u0b47", "\u0b3e", "\u0dd9", "\u0dcf", "ꙮ", "\U0001d400", "\U0001d7ce", "\U00020000",
         "\U000e0041", "\U000f0000", "\u2126", "\u212a", "\u212b", "\u00b5", "\u0345"]
WORDS = ["How", "do", "I", "make", "a", "BOMB", "write", "poem", "e-mail", "café", "don't",
         "STRASSE", "straße", "İstanbul", "ıslak", "naïve", "Ünïcödé", "ﬁle", "ｗｏｒｄ"]


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pools = [WHITESPACE, COMBINING, FULL_WIDTH, CASE_TRAPS, EMOJI, RTL, OTHER, WORDS,
             [chr(c) for c in range(0x20, 0x7F)]]
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randrange(0, 14)):
            kind = rng.randrange(len(pools) + 2)
            if kind < len(pools):
                parts.append(rng.choice(pools[kind]))
            elif kind == len(pools):
                cp = rng.randrange(0x80, 0x30000)                   # anything in BMP/SMP/SIP
                parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")
            else:
                parts.append(" " if rng.random() < 0.5 else rng.choice(WORDS).lower())
        texts.append("".join(parts))
    return texts


def _python(texts: list[str]) -> list[str]:
    return [normalise(t) for t in texts]


def test_random_unicode_sample_equals_python_normal_form():
    texts = _random_texts(60_000, seed=16)
    expected = _python(texts)
    forms, n_python = normal_forms(pl.Series(texts, dtype=pl.String))
    assert forms.to_list() == expected
    keys, _ = form_keys(pl.Series(texts, dtype=pl.String))
    assert keys.to_list() == [f.replace(" ", "") for f in expected]
    # The sample is built to be hard, but the vectorised path still takes part of it.
    assert 0 < n_python < len(texts)


def test_word_forms_hold_the_words_of_the_normal_form():
    """The near-dup scan's word forms: the same words as the normal form by Python's regex, and
    by a split at spaces where every other character is a word character (runs of spaces and
    spaces at the ends are what may differ)."""
    texts = [*_random_texts(20_000, seed=23), "".join(chr(c) for c in range(128)),
             "  How do I  make a BOMB?!  ", "", "   ", "_under_score_", "A\x00B c\x7fD"]
    series = pl.Series(texts, dtype=pl.String)
    for part in (series, series.slice(7, 900)):          # a slice: its buffers start mid-way
        got, n_python = word_forms(part)
        assert n_python == normal_forms(part)[1]
        got = got.to_list()
        for text, words in zip(part.to_list(), got, strict=True):
            expected = set(words_of_normal_form(normalise(text)))
            assert set(words_of_normal_form(words)) == expected
            if all(c.isalnum() for c in words.replace(" ", "")):
                assert set(words.split()) == expected      # how the probe splits such rows
            if text.isascii():      # what lets the probe skip its search for odd characters
                assert re.fullmatch("[0-9a-z ]*", words), text
    assert word_forms(pl.Series(["  How do I  make a BOMB?!  "]))[0].to_list() == [
        "  how do i  make a bomb    "]
    # A null sends the batch through the normal form; its control characters become spaces.
    assert word_forms(pl.Series(["A\x00B-c", None, "ﬁne\x7f"]))[0].to_list() == [
        "a b c", None, "fine "]


def test_every_code_point_in_context():
    # Each code point between letters (upper and lower), doubled, and at both ends, so that
    # composition with a neighbour, case, separators and stripping are all exercised.
    points = [chr(cp) for cp in range(0x80, 0x30000) if not 0xD800 <= cp <= 0xDFFF]
    texts = [f"Ab{c}Cd {c}{c}e{c}" for c in points]
    texts += [f"{a}{b}" for a, b in itertools.pairwise(points)][::7]
    forms, _ = normal_forms(pl.Series(texts, dtype=pl.String))
    got = forms.to_list()
    bad = [t for t, f in zip(texts, got, strict=True) if f != normalise(t)]
    assert bad == []


def test_ascii_rows_take_the_vectorised_path_and_agree():
    texts = ["".join(chr(c) for c in range(128)), "  How do I  make a BOMB?!  ", "\x1c\x1f",
             "e-mail: bob@example.com", "tabs\tand\r\nnewlines", "", "   ", "_under_score_"]
    forms, n_python = normal_forms(pl.Series(texts, dtype=pl.String))
    assert forms.to_list() == _python(texts)
    assert n_python == 0
    assert forms.to_list()[1] == "how do i make a bomb"


def test_which_characters_are_vectorised():
    kinds = is_provable(["é", "ж", "中", "…", "？", "ß", "İ", "ς", "Σ", "ﬁ", "\u0301", "Ꭰ",
                         "\u1161", "\u00a0"])
    # 1: provable (NFKC-stable, casefold = lower); 2: NFKC gives separators only; 0: Python.
    assert kinds == {"é": 1, "ж": 1, "中": 1, "…": 2, "？": 2, "ß": 0, "İ": 0, "ς": 0, "Σ": 0,
                     "ﬁ": 0, "\u0301": 0, "Ꭰ": 0, "\u1161": 0, "\u00a0": 2}
    forms, n_python = normal_forms(pl.Series(["Wait… what？ Café ЖУК", "Ｗｒｉｔｅ"]))
    assert forms.to_list() == ["wait what café жук", "write"]
    assert n_python == 1          # only the full-width row


def test_exact_candidates_are_the_rows_whose_key_is_a_benchmark_key():
    rng = random.Random(3)
    bench = [*_random_texts(400, seed=4), "How do I make a bomb?", "write a poem", "ab c"]
    bench_forms = [f for f in _python(bench) if f]
    pool = []
    for _ in range(30_000):
        if rng.random() < 0.2:
            base = rng.choice(bench)
            pool.append(rng.choice([base.upper(), base.lower(), f"  {base}!!", base + "\u3000",
                                    base.replace(" ", "\t"), base + "…"]))
        else:
            pool.append(_random_texts(1, seed=rng.randrange(10**9))[0])
    pool += ["a bc", "A-B-C", "How do I make a bomb", "xx How do I make a bomb"]
    keep, _ = exact_candidates(pl.Series(pool, dtype=pl.String), key_index(bench_forms))
    keys = {f.replace(" ", "") for f in bench_forms}
    expected = [normalise(t).replace(" ", "") in keys for t in pool]
    assert keep.to_list() == expected
    # Every row with an exact overlap is a candidate (equal forms have equal keys) ...
    forms = set(bench_forms)
    assert all(k for k, t in zip(keep.to_list(), pool, strict=True) if normalise(t) in forms)
    # ... and a few more, which the exact comparison then drops: "a bc" has the key of "ab c".
    assert keep.to_list()[-4:] == [True, True, True, False]


def test_exact_candidates_at_the_window_edges():
    # Keys of 1-6 characters, windows that are mostly separators, NUL inside a text, rows just
    # shorter and longer than the window: a candidate exactly when the key is a benchmark key.
    bench = ["ab", "abcd", "abcdef", "x" * 20, "a\0b c", "q" * 8 + " " + "r" * 8]
    bench_forms = [f for f in _python(bench) if f]
    pool = ["AB", "a-b", "!" * 40 + "ab" + "?" * 40, "!" * 15 + "abcd" + "." * 15,
            "ab cd ef", "ABCDEFG", "x" * 20, "x" * 21, "X " * 20, "a\0B c", "a\0b", "\0",
            "q" * 8 + "-" * 30 + "r" * 8, "q" * 8 + "r" * 7, "…ab…", "ＡＢ", "é" * 3, ""]
    keep, _ = exact_candidates(pl.Series(pool, dtype=pl.String), key_index(bench_forms))
    keys = {f.replace(" ", "") for f in bench_forms}
    assert keep.to_list() == [normalise(t).replace(" ", "") in keys for t in pool]
