"""Overlap examples that match the counts, and a stricter near threshold for short prompts
(issue 17, item 7)."""

from __future__ import annotations

import polars as pl
import pytest

from guarddiag.audit.frames import audit_frames
from guarddiag.audit.result import SAME_WORDS_NOTE
from guarddiag.errors import GuarddiagError
from guarddiag.text import jaccard, word_set

FISH = "what is the best way to gut a fish"            # 9 distinct words
HUMAN = "what is the best way to gut a human"
LONG = "please explain in plain words what is the best way to clean and gut a fresh fish"
LONG_OTHER = "please explain in plain words what is the best way to clean and gut a fresh trout"


def _bench(*texts: str) -> dict[str, pl.DataFrame]:
    return {"b": pl.DataFrame({"prompt_id": [f"q{i}" for i in range(len(texts))],
                               "text": list(texts)})}


def test_one_changed_word_in_a_short_prompt_is_not_a_near_duplicate():
    # Hand arithmetic: 8 shared words of 10 in all = 0.8, exactly the default threshold.
    assert jaccard(word_set(FISH), word_set(HUMAN)) == pytest.approx(0.8)
    assert len(word_set(FISH)) == 9
    res = audit_frames(["p1"], [HUMAN], _bench(FISH), near_dup=True)
    assert res.benchmarks[0].n_near == 0
    # With the short-prompt rule off (no prompt is short) the pair is found at 0.8.
    off = audit_frames(["p1"], [HUMAN], _bench(FISH), near_dup=True, short_words=0)
    assert off.benchmarks[0].n_near == 1


def test_long_prompts_keep_the_ordinary_threshold():
    # 17 distinct words, one swapped: 16 / 18 = 0.889 ≥ 0.8, and the prompt is not short.
    assert len(word_set(LONG)) == 17
    j = jaccard(word_set(LONG), word_set(LONG_OTHER))
    assert j == pytest.approx(16 / 18)
    res = audit_frames(["p1"], [LONG_OTHER], _bench(LONG), near_dup=True)
    assert res.benchmarks[0].n_near == 1
    # Raising the short-word count above 17 makes it short, and 0.889 < 0.9 drops it.
    strict = audit_frames(["p1"], [LONG_OTHER], _bench(LONG), near_dup=True, short_words=18)
    assert strict.benchmarks[0].n_near == 0


def test_a_short_prompt_still_matches_an_added_word():
    # One extra word: 9 / 10 = 0.9 ≥ the short threshold.
    res = audit_frames(["p1"], [FISH + " quickly"], _bench(FISH), near_dup=True)
    assert res.benchmarks[0].n_near == 1


def test_near_examples_never_repeat_an_exact_prompt_and_label_reordered_words():
    reordered = "fresh fish a gut and clean to way best the is what words plain in explain please"
    pool_ids = ["p-exact", "p-near-of-exact", "p-reordered"]
    pool_texts = [LONG, LONG_OTHER, reordered]
    bench = _bench(LONG, "please explain in plain words what is the best way to clean and gut "
                         "a fresh fish today")
    res = audit_frames(pool_ids, pool_texts, bench, near_dup=True)
    b = res.benchmarks[0]
    kinds = [(e["kind"], e["prompt_id"]) for e in b.examples]
    exact_ids = {pid for kind, pid in kinds if kind == "exact"}
    near_ids = {pid for kind, pid in kinds if kind == "near"}
    assert exact_ids == {"q0"}            # q0 is LONG itself, also near LONG_OTHER/reordered
    assert "q0" not in near_ids           # counted as exact, so never shown as near
    assert b.n_exact == 1
    assert b.n_near == 1                  # q1 (LONG plus one word, 17 / 18) is near
    notes = {e["pool_id"]: e.get("note") for e in b.examples if e["kind"] == "near"}
    assert all(note is None for pid, note in notes.items() if pid != "p-reordered")


def test_same_words_other_order_is_labelled():
    reordered = "fish fresh a gut and clean to way best the is what words plain in explain please"
    res = audit_frames(["p1"], [reordered], _bench(LONG), near_dup=True)
    (example,) = res.benchmarks[0].examples
    assert example["kind"] == "near"
    assert example["similarity"] == 1.0
    assert example["note"] == SAME_WORDS_NOTE


def test_short_threshold_below_the_near_threshold_is_an_error():
    with pytest.raises(GuarddiagError, match=r"short-prompt threshold 0.7 is below the near "
                                             r"threshold 0.8"):
        audit_frames(["p1"], [FISH], _bench(FISH), near_dup=True, short_threshold=0.7)
