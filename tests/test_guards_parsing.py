"""Golden answers for the generative guards' parsers and the verdict probabilities."""

from __future__ import annotations

import math

import pytest

from guarddiag.guards.backends import Generation
from guarddiag.guards.base import GuardVerdict, one_hot
from guarddiag.guards.generative import QWEN3GUARD_CLASSES
from guarddiag.guards.parsing import (
    QWEN3GUARD_LEAD,
    parse_llama_guard,
    parse_qwen3guard,
    parse_yes_no,
    verdict_distribution,
)
from guarddiag.labels import LOOSE, STRICT

# ── Qwen3Guard ────────────────────────────────────────────────────────────────────────────────


def test_qwen_category_is_matched_whole_not_inside_another_name():
    # The upstream trap: an unanchored "Violent" pattern fires inside "Non-violent Illegal Acts".
    parsed = parse_qwen3guard("Safety: Unsafe\nCategories: Non-violent Illegal Acts")
    assert parsed.verdict == "Unsafe"
    assert parsed.categories == ("Non-violent Illegal Acts",)
    assert "Violent" not in parsed.categories


def test_qwen_several_categories_and_none():
    parsed = parse_qwen3guard("Safety: Unsafe\nCategories: Violent, Non-violent Illegal Acts, PII")
    assert parsed.categories == ("Violent", "Non-violent Illegal Acts", "PII")
    assert parse_qwen3guard("Safety: Safe\nCategories: None").categories == ()
    assert parse_qwen3guard("Safety: Safe\nCategories: None").verdict == "Safe"


def test_qwen_controversial_and_think_block_and_missing_categories():
    assert parse_qwen3guard("Safety: Controversial\nCategories: Politically Sensitive Topics"
                            ).verdict == "Controversial"
    assert parse_qwen3guard("<think>\n\n</think>\n\nSafety: Unsafe\nCategories: Jailbreak"
                            ).categories == ("Jailbreak",)
    assert parse_qwen3guard("Safety: Unsafe").verdict == "Unsafe"


def test_qwen_unknown_category_is_kept_apart():
    parsed = parse_qwen3guard("Safety: Unsafe\nCategories: Violence, PII")
    assert parsed.categories == ("PII",)
    assert parsed.unknown_categories == ("Violence",)


@pytest.mark.parametrize("text", [
    "",
    "Unsafe",
    "Safety: Dangerous\nCategories: Violent",
    "I think the answer is Safety: Safe",           # quoted inside a longer line
    "Categories: None\nSafety: Safe",                # not on the first line
    "Safety: Safe\nSafety: Unsafe",                  # two verdicts
    "Safety: Unsafe\nCategories: PII\nCategories: Violent",
])
def test_qwen_malformed_answers_fail(text):
    parsed = parse_qwen3guard(text)
    assert parsed.verdict is None
    assert parsed.error


def test_qwen_controversial_reads_safe_loose_and_unsafe_strict():
    # The upstream trap: strict and loose swapped. Loose = Controversial→safe.
    probs = one_hot(QWEN3GUARD_CLASSES["Controversial"])
    v = GuardVerdict(status="ok", class_probs=probs, verdict="Controversial")
    assert v.p_unsafe_under(LOOSE) == 0.0
    assert v.p_unsafe_under(STRICT) == 1.0
    assert v.p_unsafe == 0.0           # the table's p_unsafe is the loose read-out
    assert v.pred_class == "BOUNDARY_SAFE"


# ── Granite Guardian, Llama Guard ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize(("text", "verdict"), [
    ("Yes", "Yes"), ("No", "No"), (" yes\n", "Yes"), ("NO", "No"),
    ("Yes, it is harmful", None), ("Maybe", None), ("", None), ("Yes No", None),
])
def test_granite_yes_no(text, verdict):
    parsed = parse_yes_no(text)
    assert parsed.verdict == verdict
    assert (parsed.error is None) == (verdict is not None)


@pytest.mark.parametrize(("text", "verdict", "codes"), [
    ("safe", "safe", ()),
    ("\n\nsafe", "safe", ()),
    ("unsafe\nS1", "unsafe", ("S1",)),
    ("unsafe\nS1,S10", "unsafe", ("S1", "S10")),
    ("unsafe\nS2, S11", "unsafe", ("S2", "S11")),
    ("unsafe", "unsafe", ()),
    ("Unsafe\nS9", "unsafe", ("S9",)),
])
def test_llama_guard_answers(text, verdict, codes):
    parsed = parse_llama_guard(text)
    assert parsed.verdict == verdict
    assert parsed.categories == codes


@pytest.mark.parametrize("text", [
    "", "unknown", "safe\nS1", "unsafe\nviolent crimes", "unsafe\nS1\nextra",
    "The message is safe",
])
def test_llama_guard_malformed_fails(text):
    assert parse_llama_guard(text).verdict is None


def test_llama_guard_codes_outside_the_custom_list_are_unknown():
    parsed = parse_llama_guard("unsafe\nS1,S3", codes=("S1", "S2"))
    assert parsed.categories == ("S1",)
    assert parsed.unknown_categories == ("S3",)


# ── verdict probabilities ─────────────────────────────────────────────────────────────────────


def test_yes_no_distribution_sums_prefix_tokens():
    # Position 0 alternatives: "Yes" 0.5, "Y" 0.1 (begins Yes), "No" 0.2, "Maybe" 0.1 (ignored).
    gen = Generation(text="Yes", tokens=("Yes",), top_logprobs=((
        ("Yes", math.log(0.5)), ("Y", math.log(0.1)), ("No", math.log(0.2)),
        ("Maybe", math.log(0.1))),))
    dist = verdict_distribution(gen, ("Yes", "No"))
    assert dist == pytest.approx({"Yes": 0.6 / 0.8, "No": 0.2 / 0.8})


def test_qwen_distribution_is_read_after_safety_colon():
    # Tokens: "Safety" ":" " Unsafe" ...; alternatives at the verdict position (index 2):
    # " Unsafe" 0.6, " Uns" 0.1, " Safe" 0.15, " Controversial" 0.05, " Cat" 0.1 (no label).
    alts = ((" Unsafe", math.log(0.6)), (" Uns", math.log(0.1)), (" Safe", math.log(0.15)),
            (" Controversial", math.log(0.05)), (" Cat", math.log(0.1)))
    gen = Generation(text="Safety: Unsafe\nCategories: Violent",
                     tokens=("Safety", ":", " Unsafe", "\n"),
                     top_logprobs=((("Safety", 0.0),), ((":", 0.0),), alts, (("\n", 0.0),)))
    dist = verdict_distribution(gen, ("Safe", "Controversial", "Unsafe"), lead=QWEN3GUARD_LEAD)
    total = 0.6 + 0.1 + 0.15 + 0.05
    assert dist == pytest.approx({"Unsafe": 0.7 / total, "Safe": 0.15 / total,
                                  "Controversial": 0.05 / total})


def test_qwen_distribution_when_a_token_spans_the_lead():
    # One token "Safety: Unsafe" carries lead and verdict; its alternative "Safety: Safe" too.
    gen = Generation(text="Safety: Unsafe", tokens=("Safety: Unsafe",), top_logprobs=((
        ("Safety: Unsafe", math.log(0.3)), ("Safety: Safe", math.log(0.1)),
        ("Categories", math.log(0.6))),))
    dist = verdict_distribution(gen, ("Safe", "Controversial", "Unsafe"), lead=QWEN3GUARD_LEAD)
    assert dist == pytest.approx({"Unsafe": 0.75, "Safe": 0.25, "Controversial": 0.0})


def test_distribution_is_none_without_logprobs_or_labels():
    assert verdict_distribution(Generation(text="Yes", tokens=("Yes",)), ("Yes", "No")) is None
    gen = Generation(text="Yes", tokens=("Yes",), top_logprobs=((("Maybe", -0.1),),))
    assert verdict_distribution(gen, ("Yes", "No")) is None


def test_llama_distribution_skips_leading_whitespace_tokens():
    gen = Generation(text="\n\nunsafe\nS1", tokens=("\n\n", "unsafe", "\n", "S1"),
                     top_logprobs=((("\n\n", -0.01),),
                                   (("unsafe", math.log(0.7)), ("safe", math.log(0.2)),
                                    ("un", math.log(0.05))),
                                   (("\n", 0.0),), (("S1", 0.0),)))
    dist = verdict_distribution(gen, ("safe", "unsafe"))
    assert dist == pytest.approx({"unsafe": 0.75 / 0.95, "safe": 0.2 / 0.95})


def test_lead_pattern_is_anchored():
    assert QWEN3GUARD_LEAD.match("Safety: ") is not None
    assert QWEN3GUARD_LEAD.match("My Safety: ") is None
