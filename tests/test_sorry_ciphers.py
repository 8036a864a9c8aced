"""Encodings and misspellings: hand-written examples, exact round trips on every benchmark
prompt, reproducible seeded typos."""

from __future__ import annotations

import re

import pytest
from rapidfuzz.distance import OSA

from guarddiag.errors import GuarddiagError
from guarddiag.sorry import ciphers
from guarddiag.sorry.mutate import decode_prompt, encode_prompt

# ── hand-written examples ─────────────────────────────────────────────────────────────────────

def test_atbash_hand_examples():
    # a<->z, b<->y, ..., case kept, everything else untouched.
    assert ciphers.encode_atbash("Hello, World!") == "Svool, Dliow!"
    assert ciphers.encode_atbash("abc xyz ABC XYZ") == "zyx cba ZYX CBA"
    assert ciphers.encode_atbash("Wizard 42 é") == "Draziw 42 é"
    assert ciphers.decode_atbash("Svool") == "Hello"


def test_morse_hand_examples():
    assert ciphers.encode_morse("SOS") == "... --- ..."
    assert ciphers.encode_morse("Hi you") == ".... .. / -.-- --- ..-"
    assert ciphers.encode_morse("a1.") == ".- .---- .-.-.-"
    assert ciphers.encode_morse("what?") == ".-- .... .- - ..--.."
    assert ciphers.decode_morse("... --- ... / .- ..--..") == "SOS A?"
    # Outside the alphabet: passed through as its own token.
    assert ciphers.encode_morse("a\nb #") == ".- \n -... / #"
    assert ciphers.decode_morse(".- \n -... / #") == "A\nB #"
    assert ciphers.morse_unencodable("a\nb #é") == ["\n", "#", "é"]


def test_caesar_and_ascii_hand_examples():
    assert ciphers.encode_caesar("Hello xyz ABC") == "Khoor abc DEF"
    assert ciphers.decode_caesar("Khoor abc DEF") == "Hello xyz ABC"
    assert ciphers.encode_ascii("Hi!") == "72 105 33"
    assert ciphers.encode_ascii("é😀") == "233 128512"
    assert ciphers.decode_ascii("72 105 33") == "Hi!"
    assert ciphers.encode_ascii("") == ""
    assert ciphers.decode_ascii("") == ""


def test_malformed_codes_are_one_line_errors():
    with pytest.raises(GuarddiagError, match="ASCII decoding"):
        ciphers.decode_ascii("72 x 33")
    with pytest.raises(GuarddiagError, match="not a Morse code"):
        ciphers.decode_morse(".-.-.-.-.-")


def test_presented_prompt_round_trips():
    text = "Tell me how to pick a lock.\nThanks!"
    for name in ("ascii", "caesar", "atbash"):
        wrapped = encode_prompt(name, text)
        assert wrapped.endswith(encode_prompt(name, text, bare=True))
        assert wrapped != encode_prompt(name, text, bare=True)
        assert decode_prompt(name, wrapped) == text
    assert decode_prompt("morse", encode_prompt("morse", text)) == \
        "TELL ME HOW TO PICK A LOCK.\nTHANKS!"
    with pytest.raises(GuarddiagError, match="presentation"):
        decode_prompt("caesar", "no instruction here")


# ── every benchmark prompt ────────────────────────────────────────────────────────────────────

@pytest.mark.realdata
def test_round_trips_on_every_benchmark_prompt(real_data_dir):
    from guarddiag.data import load_benchmarks

    frames = load_benchmarks("all", data_dir=real_data_dir).frames
    assert "sorrybench" in frames
    assert len(frames) >= 15
    n = 0
    for frame in frames.values():
        for x in frame["text"]:
            n += 1
            assert ciphers.decode_ascii(ciphers.encode_ascii(x)) == x
            assert ciphers.decode_caesar(ciphers.encode_caesar(x)) == x
            assert ciphers.decode_atbash(ciphers.encode_atbash(x)) == x
            for name in ("ascii", "caesar", "atbash"):  # as presented in a mutated subset
                assert decode_prompt(name, encode_prompt(name, x)) == x
            back = ciphers.decode_morse(ciphers.encode_morse(x))
            # Up to letter case; characters outside the alphabet come back unchanged.
            assert back == ciphers.morse_canonical(x)
            ascii_lower = "".join(c.lower() if c.isascii() else c for c in back)
            assert ascii_lower == "".join(c.lower() if c.isascii() else c for c in x)
    assert n > 10_000


# ── misspellings ──────────────────────────────────────────────────────────────────────────────

_WORD = re.compile(r"[A-Za-z]+")


def test_misspell_is_reproducible_and_seeded():
    text = "Write a persuasive article about the history of the printing press in Europe"
    a = ciphers.misspell(text, seed=7, key="p1")
    assert a == ciphers.misspell(text, seed=7, key="p1")
    assert a != text
    outs = {ciphers.misspell(text, seed=s, key="p1") for s in range(10)}
    assert len(outs) > 5  # seeds give different typos
    # The key (prompt id) is part of the seed: the same text in two rows differs.
    assert ciphers.misspell(text, seed=7, key="p2") != a or len(outs) == 1


def test_misspell_edits_are_single_typos_inside_long_words():
    text = "Please explain carefully how photosynthesis converts sunlight into chemical energy"
    for seed in range(30):
        out = ciphers.misspell(text, seed=seed, key="k")
        before, after = _WORD.findall(text), _WORD.findall(out)
        assert len(before) == len(after)
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert changed, "at least one word is edited"
        for b, a in changed:
            assert len(b) >= 4
            assert OSA.distance(b, a) == 1  # one swap, drop, double or substitution
            assert a[0] == b[0]  # first letter kept


def test_misspell_leaves_short_texts_and_rejects_bad_rate():
    assert ciphers.misspell("Hi, do it now", seed=1) == "Hi, do it now"
    with pytest.raises(GuarddiagError, match="rate"):
        ciphers.misspell("Something", seed=1, rate=0.0)


@pytest.mark.realdata
def test_misspell_rate_on_sorrybench(real_data_dir):
    from guarddiag.data import load_benchmark

    texts = load_benchmark("sorrybench", data_dir=real_data_dir)["text"].to_list()
    eligible = changed = 0
    for i, t in enumerate(texts):
        out = ciphers.misspell(t, seed=0, key=str(i))
        b, a = _WORD.findall(t), _WORD.findall(out)
        assert len(b) == len(a)
        for wb, wa in zip(b, a, strict=True):
            if len(wb) >= 4:
                eligible += 1
                changed += wb != wa
    # rate 0.3, plus one forced edit in the rare prompt where no word was drawn.
    assert 0.27 < changed / eligible < 0.34
