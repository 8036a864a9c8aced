"""The compiled near-dup probe (:mod:`guarddiag.audit.kernels`) against a brute-force
Jaccard over :func:`guarddiag.text.word_set` and against the vectorised probe it stands in for:
the same rows kept, on random texts with mixed case, punctuation, control characters, repeated
words, words of 8 and 9 bytes and long words sharing their first 8 bytes, at edge thresholds,
with and without the index's run table, and with every long word's hash made to collide; texts
in several scripts rewritten by the kernel as the word forms the vectorised scan reads; and the
choice between the compiled and vectorised kernels (:mod:`guarddiag.audit.kernelchoice`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from guarddiag.audit import engine, kernelchoice, kernels, neardup
from guarddiag.audit.kernels import (
    code_point_table,
    compile_index,
    form_near_rows,
    text_near_rows,
)
from guarddiag.audit.neardup import form_index, spaced_forms
from guarddiag.audit.normal import is_provable, word_forms
from guarddiag.audit.stream import Shard
from guarddiag.errors import GuarddiagError
from guarddiag.text import jaccard, normalise, word_set, words_of_normal_form

_WORDS = ["a", "I", "to", "the", "lock", "Door", "key", "night", "abcdefgh", "abcdefghi",
          "abcdefghij", "abcdefghik", "abcdefghijklmnop", "abcdefghijklmnoq", "x1", "42",
          "sea", "wind", "poem", "write", "quietly", "z"]
_GLUE = [" ", "  ", ", ", "! ", "\t", "\x01", " - ", "'", "...", "\n"]


def _texts(rng: np.random.Generator, n: int, *, base: list[list[str]]) -> list[str]:
    """Random texts: a base text's words with some dropped, some added or repeated, case
    flipped, glued by separators and control characters."""
    out = []
    for _ in range(n):
        words = list(base[int(rng.integers(len(base)))])
        rng.shuffle(words)
        words = words[int(rng.integers(0, 3)):]
        words += [str(w) for w in rng.choice(_WORDS, size=int(rng.integers(0, 4)))]
        if words and rng.random() < 0.3:
            words.append(words[0])
        words = [w.upper() if rng.random() < 0.2 else w for w in words]
        out.append("".join(w + str(rng.choice(_GLUE)) for w in words))
    return out


def _brute_force(texts: list[str], forms: list[str], threshold: float) -> list[bool]:
    sets = [frozenset(words_of_normal_form(f)) for f in forms]
    return [bool(w) and any(s and jaccard(s, w) >= threshold for s in sets)
            for w in (word_set(t) for t in texts)]


def _case(seed: int, n: int = 400) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    base = [[str(w) for w in rng.choice(_WORDS, size=int(rng.integers(1, 9)))] for _ in range(25)]
    forms = sorted({normalise(" ".join(b)) for b in base} - {""})
    return _texts(rng, n, base=base), forms


@pytest.mark.parametrize("threshold", [0.5, 0.8, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_compiled_probe_keeps_the_rows_a_brute_force_jaccard_keeps(threshold: float,
                                                                      seed: int) -> None:
    texts, forms = _case(seed)
    expected = _brute_force(texts, forms, threshold)
    assert 20 < sum(expected) < len(texts) - 20
    found = text_near_rows(pl.Series(texts, dtype=pl.String),
                           compile_index(form_index(tuple(forms), threshold=threshold)))
    assert found is not None
    keep, wide = found
    assert not wide.any()
    assert keep.tolist() == expected


def test_rows_the_kernel_cannot_prove_or_meets_first_are_left_to_the_caller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A character met for the first time leaves its row to the caller once, and is then
    known; an unprovable one (a ligature, whose NFKC is two letters) always does."""
    fresh = code_point_table()
    monkeypatch.setattr(kernels._WORD_POINTS, "table", fresh)
    index = compile_index(form_index(("the lock", "sea wind", "café noir"), threshold=0.8))
    texts = pl.Series(["the lock", "CAFÉ, noir!", "Sea, wind!", "ﬁ sea wind", "", "café"])
    first = text_near_rows(texts, index)
    assert first is not None
    assert first[1].tolist() == [False, True, False, True, False, True]
    assert first[0].tolist() == [True, False, True, False, False, False]
    again = text_near_rows(texts, index)
    assert again is not None
    keep, left = again
    assert left.tolist() == [False, False, False, True, False, False]
    assert keep.tolist() == [True, True, True, False, False, False]
    assert fresh[ord("É")] == fresh[ord("é")] == ord("é")
    assert fresh[ord("ﬁ")] == -2
    assert fresh[ord(",")] == -1
    assert (fresh < -3).sum() == 0     # nothing left marked as listed
    assert text_near_rows(pl.Series(["the lock", None], dtype=pl.String), index) is None


def test_the_compiled_probe_reads_texts_of_any_script() -> None:
    """Texts in several scripts, read by the kernel itself (their word forms code point by
    code point): once their characters are known, every row but the unprovable ones is decided
    there, as the brute force decides it."""
    rng = np.random.default_rng(6)
    vocab = ["café", "Straße", "naïve", "东京", "日本語のテキスト", "ΑΘΗΝΑ", "слово", "mañana",
             "the", "lock", "x", "résumé", "Ⅻ", "ab\u200bcd", "\x01", "ÉTÉ", "ｆｕｌｌ", "…",
             "\u00a0", "ﬁne", "x\u0301", "𠮷野家", "😀"]
    base = [[str(w) for w in rng.choice(vocab, size=int(rng.integers(1, 7)))] for _ in range(20)]
    forms = sorted({normalise(" ".join(b)) for b in base} - {""})
    texts = _texts(rng, 400, base=base)
    index = compile_index(form_index(tuple(forms), threshold=0.8))
    series = pl.Series(texts, dtype=pl.String)
    text_near_rows(series, index)     # learns the characters
    found = text_near_rows(series, index)
    assert found is not None
    keep, left = found
    status = is_provable({c for t in texts for c in t if not c.isascii()})
    unprovable = [any(status.get(c) == 0 for c in t) for t in texts]
    assert left.tolist() == unprovable
    expected = _brute_force(texts, forms, 0.8)
    decided = [k for k, u in zip(keep.tolist(), unprovable, strict=True) if not u]
    assert decided == [e for e, u in zip(expected, unprovable, strict=True) if not u]
    assert sum(decided) > 10
    assert sum(not t.isascii() and not u for t, u in zip(texts, unprovable, strict=True)) > 100


def test_the_compiled_probe_reads_word_forms_of_any_script() -> None:
    """Word forms of texts in several scripts, with the characters that end a word spaced
    (:func:`spaced_forms`): the compiled probe keeps the rows the brute force keeps."""
    rng = np.random.default_rng(5)
    vocab = ["café", "Straße", "naïve", "东京", "日本語のテキスト", "ΑΘΗΝΑ", "слово", "mañana",
             "the", "lock", "x", "résumé", "a\u0301", "ﬁne", "Ⅻ", "x\u0301", "ab\u200bcd",
             "q\u0300z", "\x01"]
    base = [[str(w) for w in rng.choice(vocab, size=int(rng.integers(1, 7)))] for _ in range(20)]
    forms = sorted({normalise(" ".join(b)) for b in base} - {""})
    texts = _texts(rng, 300, base=base)
    words, _ = word_forms(pl.Series(texts, dtype=pl.String))
    spaced = spaced_forms(words)
    assert (spaced != words).sum() > 20      # combining marks, a zero-width space
    keep = form_near_rows(spaced, compile_index(form_index(tuple(forms), threshold=0.8)))
    assert keep is not None
    expected = _brute_force(texts, forms, 0.8)
    assert keep.tolist() == expected
    assert sum(expected) > 20
    # Without the spacing, a combining mark would join the words on either side of it.
    unspaced = form_near_rows(words, compile_index(form_index(tuple(forms), threshold=0.8)))
    assert unspaced is not None
    assert unspaced.tolist() != expected


def _long_lists() -> tuple[list[str], list[str]]:
    """Forms over a small vocabulary whose rarest word ("mid", in a few dozen of them) and
    every other word each sit in more prefixes than the kernel scans a list for (it looks
    their size-compatible runs up instead), with set sizes 3 to 7."""
    rng = np.random.default_rng(2)
    letters = list("abcdefgh")
    mid = {" ".join(["mid", *sorted(rng.choice(letters, size=int(rng.integers(2, 6)),
                                                replace=False))]) for _ in range(200)}
    other = {" ".join(sorted(rng.choice(letters, size=int(rng.integers(3, 8)), replace=False)))
             for _ in range(400)}
    forms = sorted(mid | other)
    texts = []
    for form in rng.choice(sorted(mid), size=300):
        words = str(form).split()
        if rng.random() < 0.5:      # one or two more words, or one fewer
            words += [str(w) for w in rng.choice([*letters, "z"], size=int(rng.integers(1, 3)))]
        elif rng.random() < 0.5:
            words = words[1:]
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts, forms


def test_long_posting_lists_are_looked_up_in_the_run_table() -> None:
    texts, forms = _long_lists()
    index = form_index(tuple(forms), threshold=0.8)
    compiled = index.compiled
    assert np.sort(np.diff(compiled.rank_start))[-3] > 2 * kernels._SHORT_LIST
    found = text_near_rows(pl.Series(texts, dtype=pl.String), compiled)
    assert found is not None
    expected = _brute_force(texts, forms, 0.8)
    assert found[0].tolist() == expected
    assert 30 < sum(expected) < len(texts) - 20


@pytest.mark.parametrize("case", [3, "long lists"])
def test_without_a_run_table_the_postings_are_searched(monkeypatch: pytest.MonkeyPatch,
                                                       case: int | str) -> None:
    texts, forms = _case(3) if case == 3 else _long_lists()
    with_runs = compile_index(neardup._index_tokens(
        neardup._form_tokens(pl.Series(forms)), len(forms), threshold=0.8))
    monkeypatch.setattr(neardup, "_RUN_TABLE_LIMIT", 0)
    index = neardup._index_tokens(neardup._form_tokens(pl.Series(forms)), len(forms),
                                  threshold=0.8)
    assert index.runs is None
    assert len(with_runs.run_table)
    series = pl.Series(texts, dtype=pl.String)
    found, searched = text_near_rows(series, with_runs), text_near_rows(series,
                                                                          compile_index(index))
    assert found is not None
    assert searched is not None
    assert searched[0].tolist() == found[0].tolist() == _brute_force(texts, forms, 0.8)


def test_colliding_long_words_are_told_apart_by_their_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the FNV prime set to 0, every word past 8 bytes gets the same key: the kernels
    (run as Python, which reads the patched constant) must then compare the words' bytes, in
    the vocabulary table and among a row's distinct words."""
    texts, forms = _case(4, n=150)
    expected = _brute_force(texts, forms, 0.8)
    monkeypatch.setattr(kernels, "FNV_PRIME", np.uint64(0))
    compiled = {name: obj.py_func for name, obj in vars(kernels).items()
                if hasattr(obj, "py_func")}
    assert {"_key", "home_slot", "_build_table", "_probe"} <= set(compiled)
    for name, python in compiled.items():
        monkeypatch.setattr(kernels, name, python)
    with np.errstate(over="ignore"):
        index = compile_index(form_index(tuple(forms), threshold=0.8))
        found = text_near_rows(pl.Series(texts, dtype=pl.String), index)
    assert found is not None
    assert found[0].tolist() == expected
    long_words = {w for t in texts for w in word_set(t) if len(w) > 8}
    assert len(long_words) >= 4


def test_the_scan_keeps_the_same_rows_with_and_without_the_compiled_probe() -> None:
    """The near-dup scan's candidates (:func:`engine._candidate_rows`) with the compiled probe
    and with the vectorised one alone, on texts mixing ASCII rows, accented and CJK rows,
    combining marks (words a mark ends), ligatures and unprovable characters (the Python
    normaliser), and a batch holding a null."""
    rng = np.random.default_rng(9)
    texts, forms = _case(6, n=300)
    extra = ["Café de la Paix, the lock", "the lock a\u0301 sea", "ﬁne ™ the lock",
             "東京 the lock door", "STRASSE straße the lock door key", "the\u200block door key"]
    texts = [t if rng.random() < 0.7 else t + " " + str(rng.choice(extra)) for t in texts]
    texts += extra
    spec = engine.ScanSpec(text_column="text", id_column=None, forms=tuple(forms),
                           near_threshold=0.8, template_forms=None, key="compiled-vs-vectorised")
    state = engine._state(spec)
    assert state.near_compiled is not None
    vectorised = replace(state, near_compiled=None)
    for batch in (pl.Series("text", texts), pl.Series("text", [*texts[:50], None])):
        keep, slow = engine._candidate_rows(batch, state, spec)
        want, want_slow = engine._candidate_rows(batch, vectorised, spec)
        assert keep.to_list() == want.to_list()
        assert slow == want_slow
        assert slow > 0
    assert sum(_brute_force(texts, forms, 0.8)) > 20


@pytest.mark.parametrize("threshold", [0.5, 0.8, 1.0])
def test_the_compiled_pairs_are_the_vectorised_probes_pairs(threshold: float) -> None:
    """form_pairs finds every (prompt, form, Jaccard) probe_forms finds, in the same order and
    with the same floats, on normal forms in several scripts with word-ending characters."""
    rng = np.random.default_rng(int(threshold * 10))
    vocab = [*_WORDS, "café", "东京", "слово", "x\u0301", "ab\u200bcd", "\x01"]
    base = [[str(w) for w in rng.choice(vocab, size=int(rng.integers(1, 9)))] for _ in range(30)]
    forms = tuple(sorted({normalise(" ".join(b)) for b in base} - {""}))
    pool = sorted({normalise(t) for t in _texts(rng, 400, base=base)})
    index = form_index(forms, threshold=threshold)
    want = neardup.probe_forms(index, pool)
    found = kernels.form_pairs(spaced_forms(pl.Series(pool, dtype=pl.String)),
                                  index.compiled)
    assert found is not None
    got = list(zip(*(a.tolist() for a in found), strict=True))
    assert got == want
    assert len(want) > 30
    assert threshold == 1.0 or any(0 < j < 1 for _, _, j in want)


@pytest.mark.parametrize("near", [True, False])
def test_the_compiled_kernels_pay_from_a_pool_size(tmp_path: Path, near: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(kernelchoice.SCAN_KERNEL_ENV, raising=False)
    limit = kernelchoice.COMPILED_NEAR_BYTES if near else kernelchoice.COMPILED_EXACT_BYTES
    small, large = tmp_path / "a.parquet", tmp_path / "b.parquet"
    small.write_bytes(b"x" * (limit - 1))
    large.write_bytes(b"x")
    pays = kernelchoice.compiled_scan_pays
    assert not pays([Shard(path=str(small), fmt="parquet")], near=near)
    assert pays([Shard(path=str(small), fmt="parquet"), Shard(path=str(large), fmt="parquet")],
                near=near)
    assert pays([Shard(path=str(tmp_path / "gone"), fmt="parquet")], near=near)


def test_an_audit_writes_the_same_bytes_with_either_probe(audit_both_ways) -> None:
    """A small pool's near-dup audit never loads the compiled probe (numba's import would cost
    more than it saves); made to, it writes the same outputs, candidates and pairs alike."""
    texts, forms = _case(8, n=300)
    texts = [t for t in texts if t.strip()] + [
        "Café, the lock!", "the lock x\u0301 door", "ﬁne ™ the lock", "東京 the lock door"]
    forms = [*forms, "the lock x door"]     # the combining mark's row: Jaccard 1, not exact
    both = audit_both_ways(texts, forms, near=True)
    assert max(both.calls) > 100     # the compiled kernel read the pool (not only a warm-up)
    assert both.vectorised_bytes == both.compiled_bytes
    assert both.compiled.overlap.height == both.vectorised.overlap.height > 20


@pytest.mark.parametrize("near", [True, False])
def test_the_kernels_can_be_forced_either_way(tmp_path: Path, near: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    small = [Shard(path=str(tmp_path / "small.parquet"), fmt="parquet")]
    (tmp_path / "small.parquet").write_bytes(b"x")
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "compiled")
    assert kernelchoice.compiled_scan_pays(small, near=near)
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "vectorised")
    assert not kernelchoice.compiled_scan_pays(
        [Shard(path=str(tmp_path / "gone"), fmt="parquet")], near=near)
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "fast")
    with pytest.raises(GuarddiagError, match="GUARDDIAG_SCAN_KERNEL='fast': expected auto"):
        kernelchoice.compiled_scan_pays(small, near=near)


def test_near_matches_follows_the_forced_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced vectorised, the audit's pairing never loads the kernel however many forms it
    pairs; forced compiled, it does for a few, with the same matches."""
    texts, forms = _case(10, n=200)
    pool_forms = [normalise(t) for t in texts]
    calls = []
    real = kernels.form_pairs

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(kernels, "form_pairs", counted)
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "compiled")
    compiled = neardup.near_matches(forms, pool_forms, threshold=0.8)
    assert calls == [1]
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "vectorised")
    monkeypatch.setattr(neardup, "_COMPILED_PAIRS_FROM", 0)
    monkeypatch.setattr(kernels, "form_pairs", None)    # a call would raise TypeError
    assert neardup.near_matches(forms, pool_forms, threshold=0.8) == compiled
    assert len(compiled) > 20


@pytest.mark.parametrize("near", [True, False])
def test_a_bad_kernel_setting_stops_an_audit(tmp_path: Path, serve_benchmarks, near: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from guarddiag.audit import audit_pool

    serve_benchmarks({"Q": pl.DataFrame({"prompt_id": ["q1"], "text": ["the lock and key"]})})
    pool = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["r1", "r2"], "text": ["The lock and key!", "other"]}
                 ).write_parquet(pool)
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "fast")
    with pytest.raises(GuarddiagError, match="GUARDDIAG_SCAN_KERNEL='fast'"):
        audit_pool(pool, out_dir=tmp_path / "n", near_dup=near, figure=False)
    monkeypatch.setenv(kernelchoice.SCAN_KERNEL_ENV, "auto")
    assert audit_pool(pool, out_dir=tmp_path / "n", near_dup=near,
                      figure=False).overlap.height == 1


def test_folded_rows_are_the_word_forms_the_vectorised_scan_reads() -> None:
    """The kernel's rewrite of a non-ASCII row (:func:`kernels._fold_words`) has the words of
    its word form with word-ending characters spaced, in every script, 4-byte characters
    included; rows holding an unprovable character are left, with an empty string."""
    texts = ["Café NOIR", "𠮷野家 の 牛丼", "ΑΘΗΝΑ, ÉTÉ…", "naïve\u200bword x\u0301", "ﬁne day",
             "Straße", "mañana 😀 Ⅻ", "слово\u00a0СЛОВО", "a_b—c", "ｆｕｌｌ"]
    series = pl.Series(texts, dtype=pl.String)
    kernels._WORD_POINTS.learn(sorted({c for t in texts for c in t}))
    buffers = kernels.column_buffers(series)
    assert buffers is not None
    offsets, data = buffers
    rows = np.arange(len(texts), dtype=np.int64)
    folded_offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    folded = np.empty(2 * len(data) + 8, dtype=np.uint8)
    left = np.zeros(len(texts), dtype=np.bool_)
    unknown = np.zeros(64, dtype=np.int64)
    kernels._fold_words(offsets, data, rows, kernels._WORD_POINTS.ready(), folded_offsets,
                        folded, left, unknown)
    assert unknown[0] == 0
    words, _ = word_forms(series)
    want = spaced_forms(words).to_list()
    status = is_provable({c for t in texts for c in t if not c.isascii()})
    for i, text in enumerate(texts):
        got = bytes(folded[folded_offsets[i]:folded_offsets[i + 1]]).decode()
        if any(status.get(c) == 0 for c in text):
            assert left[i]
            assert got == ""
        else:
            assert not left[i]
            assert got.split() == want[i].split(), text
    assert left.sum() == 5     # a combining mark, ﬁ, ß, Ⅻ, full-width letters
    assert not left[1]
