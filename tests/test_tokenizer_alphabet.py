"""A trained tokenizer is the same in every process, also with more characters than its alphabet
keeps (the multilingual train copies bring over a thousand): the kept characters are the most
frequent ones, ties broken by the character, never by hash-map order."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from guarddiag.model.tokenizer import ALPHABET_LIMIT, train_tokenizer

BASE = 0x4E00  # CJK ideographs: BertNormalizer makes each its own word


def texts() -> list[str]:
    """1,500 distinct characters: the first 500 three times, the other 1,000 twice (ties)."""
    rows = [" ".join(chr(BASE + i) for i in range(1500)) for _ in range(2)]
    rows.append(" ".join(chr(BASE + i) for i in range(500)))
    return rows + ["the cat sat on the mat"] * 2


def test_the_alphabet_is_the_most_frequent_characters_ties_by_character():
    vocab = train_tokenizer(texts(), vocab_size=1200).tokenizer.get_vocab()
    singles = {t for t in vocab if len(t) == 1}
    # By hand: 't' 'h' 'e' 'a' (4 each: "the" twice, "cat"/"sat"/"mat"/"the" …) and every
    # other Latin letter of the two English rows outrank the CJK ones; then the 500
    # three-times characters; the rest of the 1,000 go to the lowest code points that tie at 2.
    latin = set("thecatsaonm")
    assert latin <= singles
    cjk = sorted(ord(c) - BASE for c in singles - latin)
    assert len(singles) == ALPHABET_LIMIT
    assert cjk == list(range(ALPHABET_LIMIT - len(latin)))


def test_every_process_trains_the_same_tokenizer():
    here_dir = str(Path(__file__).parent)
    code = (f"import hashlib, sys; sys.path.insert(0, {here_dir!r}); "
            "from test_tokenizer_alphabet import texts; "
            "from guarddiag.model.tokenizer import train_tokenizer; "
            "t = train_tokenizer(texts(), vocab_size=1200).tokenizer.to_str(); "
            "print(hashlib.sha256(t.encode()).hexdigest())")
    here = hashlib.sha256(train_tokenizer(texts(), vocab_size=1200).tokenizer.to_str()
                          .encode()).hexdigest()
    others = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.strip() for _ in range(3)}
    assert others == {here}
