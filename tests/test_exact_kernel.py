"""The compiled exact pass (:func:`guarddiag.audit.kernels.exact_rows`) against the vectorised
one it stands in for (:func:`guarddiag.audit.normal.exact_candidates`) and against
:func:`guarddiag.text.normalise` itself: the same candidate rows and the same count of rows the
Python normaliser did, on texts in several scripts with separators, control characters,
combining marks, ligatures and keys shorter than their ends; with every hash made to collide; and
with characters the process has not met before."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from guarddiag.audit import kernels
from guarddiag.audit.kernels import (
    code_point_table,
    compile_keys,
    ends_code,
    exact_rows,
    key_code,
    key_codes,
)
from guarddiag.audit.normal import END_CHARS, exact_candidates, key_index
from guarddiag.text import normalise

_PIECES = ["the", "Lock", "DOOR", "key", "a", "I", "42", "Café", "ÉTÉ", "东京", "слово",
           "Straße", "ﬁne", "x\u0301", "™", "ｆｕｌｌ", "ab\u200bcd", "Σίσυφος", "\x00", "\x01",
           "\x7f", "zz"]
_GLUE = [" ", "", ", ", "!", "\t", "\n", "...", " - ", "\u2026", "？", "\u00a0", "'"]


def _texts(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        pieces = [str(p) for p in rng.choice(_PIECES, size=int(rng.integers(1, 7)))]
        text = "".join(p + str(rng.choice(_GLUE)) for p in pieces)
        out.append(str(rng.choice(_GLUE)) + text if rng.random() < 0.3 else text)
    return out


def _case(seed: int) -> tuple[list[str], list[str]]:
    """Pool texts and benchmark forms: a third of the forms come from pool texts (so those
    texts and their case, spacing and punctuation variants are exact matches); the other texts
    often share a form's ends but not its middle."""
    rng = np.random.default_rng(seed)
    texts = _texts(rng, 600)
    forms = sorted({normalise(t) for t in texts[:200:3]} | {normalise(t) for t in
                                                            _texts(rng, 40)} - {""})
    variants = [t.upper() + "!!" if i % 2 else " " + t.replace(" ", "  ") + "."
                for i, t in enumerate(texts[:200:3])]
    same_ends = [f[:END_CHARS] + " zz " + f[-END_CHARS:] for f in forms]
    return [t for t in texts + variants + same_ends if t.strip()], forms


def _truth(texts: list[str], forms: list[str]) -> list[bool]:
    keys = {f.replace(" ", "") for f in forms}
    return [normalise(t).replace(" ", "") in keys for t in texts]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_exact_pass_keeps_the_vectorised_rows(seed: int) -> None:
    texts, forms = _case(seed)
    index = key_index(forms)
    batch = pl.Series("text", texts, dtype=pl.String)
    keep, slow = exact_rows(batch, compile_keys(index))
    want, want_slow = exact_candidates(batch, index)
    assert keep.to_list() == want.to_list()
    # The kernel hands the Python normaliser fewer rows: not those whose ends rule them out.
    assert 0 < slow < want_slow
    # Candidates are exactly the rows whose key is a benchmark key: those the audit keeps.
    assert keep.to_list() == _truth(texts, forms)
    assert sum(keep.to_list()) > 60
    found = [t for t, k in zip(texts, keep.to_list(), strict=True) if k]
    assert any(not t.isascii() for t in found)
    assert any(t.isascii() for t in found)


def test_keys_shorter_than_their_ends_and_empty_keys() -> None:
    forms = ["a", "ab", "abc", "abcd", "abcde", "é", "a b c d e f g h", "东", "lock\x00",
             "\x00door"]
    texts = ["A", "a!", "b a", "AB", "a-b", "abc", "ABCD.", "abcde", "abcdf", "É", "e\u0301",
             "abcdefgh", "a b c d e f g h", "abcd efgh", "东", "東", "!!!", "...", "a\x00",
             "LOCK\x00!", "lock", "\x00 Door", "door"]
    index = key_index(forms)
    keep, _ = exact_rows(pl.Series(texts, dtype=pl.String), compile_keys(index))
    assert keep.to_list() == _truth(texts, forms)
    assert keep.to_list() == exact_candidates(pl.Series(texts, dtype=pl.String), index
                                              )[0].to_list()
    assert ends_code("") == 1 << 63
    assert ends_code("ab") != ends_code("ba")


def test_rows_holding_an_unprovable_character_are_normalised_only_if_their_ends_may_match(
        ) -> None:
    """The ends of a row holding an unprovable character are read when it has END_CHARS key
    characters before the first such character (then a provable one or the row's end) and
    after the last: a row whose ends are then no benchmark key's costs no Python call."""
    forms = ["the lock on the door", "theé lock on the door"]
    texts = ["the lock ™ on the door",      # ™ (NFKC: TM) mid-row; ends match: normalised
             "the loßk on the door",        # ß (casefold: ss) mid-row; ends match: normalised
             "a straße by the sea",         # ends astr / esea: no key's, no Python call
             "ßtraße door",                 # ß before the head's 4 characters: normalised
             "thee\u0301 lock on the door",  # the mark after the head's 4th: normalised
             "the lock on the door\u0301",   # a mark in the tail: normalised
             "a b c d ™ e f g h i",         # ends abcd / fghi: no key's
             "a ™ b c d e f g h i",         # ™ before the head's 4th: normalised
             "what a\u0301 door"]            # ends what / door: no key's
    keep, slow = exact_rows(pl.Series(texts, dtype=pl.String), compile_keys(key_index(forms)))
    assert keep.to_list() == _truth(texts, forms) == [False, False, False, False, True, False,
                                                      False, False, False]
    assert slow == 6


@pytest.mark.parametrize("seed", [0, 1])
def test_no_row_is_missed_whatever_unprovable_characters_it_holds_next_to_its_ends(
        seed: int) -> None:
    """Texts of letters and characters that compose with, decompose or case-fold beside their
    neighbours, run together with no separator, each text's own normal form a benchmark form:
    every row is kept, and rows with other ends are not."""
    rng = np.random.default_rng(seed)
    pieces = ["a", "e", "th", "lock", "\u0301", "\u0327", "e\u0301", "ß", "ﬁ", "™", "Σ", "ς",
              "\u1100", "\u1161", "\u11a8", "가", "ｆ", "Å", "A\u030a", "½", "\u0f73", "ॐ"]
    texts = ["".join(str(p) for p in rng.choice(pieces, size=int(rng.integers(1, 12))))
             for _ in range(1500)]
    forms = sorted({normalise(t) for t in texts[:750]} - {""})
    batch = pl.Series(texts, dtype=pl.String)
    keep, _ = exact_rows(batch, compile_keys(key_index(forms)))
    assert all(keep.to_list()[:750] or [True])
    assert keep.to_list() == _truth(texts, forms)
    assert not all(keep.to_list()[750:])


def test_key_codes_are_the_64_bit_fnv_1a_of_each_keys_code_points() -> None:
    """Against FNV-1a from its published constants (offset basis 14695981039346656037, prime
    1099511628211), with 0 read as 1 (an empty table slot)."""
    def fnv(text: str) -> int:
        h = 14695981039346656037
        for c in text:
            h = ((h ^ ord(c)) * 1099511628211) % 2**64
        return max(h, 1)

    keys = ["", "a", "thelockdoor", "café", "东京слово", "ｆｕｌｌ😀", "x" * 300]
    assert key_codes(pl.Series(keys, dtype=pl.String)).tolist() == [fnv(k) for k in keys]
    assert [key_code(k) for k in keys] == [fnv(k) for k in keys]
    assert key_code("") == 14695981039346656037


def test_every_hash_colliding_still_keeps_only_the_matching_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the FNV prime set to 0 every non-ASCII end and every key hashes alike: the kernel
    (run as Python, which reads the patched constant) then compares such rows with the one key
    its table holds for that hash and hands the others to the Python normaliser."""
    texts, forms = _case(5)
    monkeypatch.setattr(kernels, "FNV_PRIME", np.uint64(0))
    compiled = {name: obj.py_func for name, obj in vars(kernels).items()
                if hasattr(obj, "py_func")}
    assert {"home_slot", "decode_utf8", "_slot_of", "_is_key", "_build_code_table",
            "_key_ends"} <= set(compiled)
    for name, python in compiled.items():
        monkeypatch.setattr(kernels, name, python)
    assert len({key_code(f.replace(" ", "")) for f in forms}) == 1
    with np.errstate(over="ignore"):
        keep, slow = exact_rows(pl.Series(texts, dtype=pl.String),
                                compile_keys(key_index(forms)))
    assert keep.to_list() == _truth(texts, forms)
    ascii_keys = sum(t.isascii() and k for t, k in zip(texts, keep.to_list(), strict=True))
    assert slow > ascii_keys > 0     # ASCII rows matching another key than the table's
    # The same ends and hash, the key a prefix, an extension or a change of the table's: no
    # candidate.
    short = ["abcd abcd", "abcd abcd abcd", "abcd abcd abcd abcd", "abcd abce abcd"]
    with np.errstate(over="ignore"):
        keep, slow = exact_rows(pl.Series(short, dtype=pl.String),
                                compile_keys(key_index(["abcd abcd abcd"])))
    assert keep.to_list() == [False, True, False, False]
    assert slow == 3


def test_characters_met_for_the_first_time_are_looked_up_and_the_rows_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = code_point_table()
    monkeypatch.setattr(kernels._KEY_POINTS, "table", fresh)
    forms = ["ωμέγα key", "straße door", "the lock"]
    texts = ["ΩΜΈΓΑ KEY!", "Straße door", "STRASSE door", "the lock", "the lock ω", "ωμέγα"]
    keep, slow = exact_rows(pl.Series(texts, dtype=pl.String),
                            compile_keys(key_index([normalise(f) for f in forms])))
    assert keep.to_list() == [True, True, True, True, False, False]
    assert slow == 1     # "Straße door": ß case-folds to two characters
    assert fresh[ord("ω")] == fresh[ord("Ω")] == ord("ω")
    assert fresh[ord("A")] == ord("a")
    assert fresh[ord("!")] == -1
    assert fresh[ord("ß")] == -2
    assert (fresh < -3).sum() == 0     # nothing left marked as listed


def test_a_batch_with_a_null_takes_the_vectorised_pass() -> None:
    index = key_index(["the lock"])
    batch = pl.Series(["The lock", None, "door"], dtype=pl.String)
    keep, _ = exact_rows(batch, compile_keys(index))
    assert keep.to_list() == exact_candidates(batch, index)[0].to_list() == [True, False, False]


def test_an_exact_audit_writes_the_same_bytes_with_either_kernel(audit_both_ways) -> None:
    """A small pool's exact audit never loads the kernel; made to, it writes the same
    outputs."""
    texts, forms = _case(7)
    both = audit_both_ways(texts, forms, near=False)
    assert max(both.calls) > 100     # the compiled kernel read the pool (not only a warm-up)
    assert both.vectorised_bytes == both.compiled_bytes
    assert both.compiled.overlap.height == both.vectorised.overlap.height > 20


def test_the_high_byte_check_reads_every_byte_of_a_row() -> None:
    """Rows of every length and alignment, with one byte >= 0x80 anywhere or none: the
    word-at-a-time check agrees with a byte-by-byte one."""
    rng = np.random.default_rng(3)
    data = rng.integers(0, 128, size=64, dtype=np.uint8)
    words = data[:len(data) - len(data) % 8].view(np.uint64)
    checked = 0
    for start in range(0, 20):
        for stop in range(start, start + 30):
            for high in (None, *range(start, stop)):
                row = data.copy()
                if high is not None:
                    row[high] = 0x80 + high
                found = kernels.high_byte(row, row[:len(row) - len(row) % 8].view(np.uint64),
                                          start, stop)
                assert found == bool((row[start:stop] >= 0x80).any()), (start, stop, high)
                checked += 1
    assert checked > 5000
    assert not kernels.high_byte(data, words, 0, 64)
