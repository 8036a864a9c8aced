"""The label schema's small functions by value, and the pillar taxonomy's validation on
hand-made taxonomy files (issue 18: mutants of guarddiag.labels that no test noticed)."""

from __future__ import annotations

import pytest

from guarddiag import labels
from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE, STRICT, check_class, check_pillars, pillars


def test_is_unsafe_per_mapping():
    assert [LOOSE.is_unsafe(c) for c in CLASSES] == [False, False, True, True]
    assert [STRICT.is_unsafe(c) for c in CLASSES] == [False, True, True, True]
    assert not LOOSE.is_unsafe("SAFE")


def test_check_class_returns_a_known_class():
    for name in CLASSES:
        assert check_class(name, "row 1") == name


def test_check_pillars_returns_known_tags_and_names_an_unknown_one():
    assert check_pillars(["copyright", "cbrn"], "rule x") == ["copyright", "cbrn"]
    assert check_pillars((), "rule x") == []
    with pytest.raises(GuarddiagError, match="unknown pillar 'copyrite' in rule x"):
        check_pillars(["cbrn", "copyrite"], "rule x")


def test_real_taxonomy_numbers_heads_from_one():
    taxonomy = pillars()
    assert [p.number for p in taxonomy] == list(range(1, 25))
    assert (taxonomy[0].id, taxonomy[-1].id) == ("violent_crime", "animal_environment")
    assert taxonomy[19].policy_note == "A-only"  # copyright


@pytest.fixture
def taxonomy_file(tmp_path, monkeypatch):
    """Point GUARDDIAG_MANIFESTS at a folder whose pillars.yaml the test writes."""
    (tmp_path / "policies").mkdir()
    monkeypatch.setenv("GUARDDIAG_MANIFESTS", str(tmp_path))
    pillars.cache_clear()
    yield tmp_path / "policies" / "pillars.yaml"
    pillars.cache_clear()


def test_hand_made_taxonomy(taxonomy_file):
    taxonomy_file.write_text("pillars:\n  - {id: a, title: A}\n  - {id: b, title: B, "
                             "policy_note: A-only}\n", encoding="utf-8")
    got = pillars()
    assert [(p.id, p.number, p.title, p.policy_note) for p in got] == [
        ("a", 1, "A", ""), ("b", 2, "B", "A-only")]
    assert labels.pillar_ids() == ("a", "b")


@pytest.mark.parametrize(("text", "message"), [
    ("pillars: []\n", "expected a non-empty list"),
    ("pillars: {a: 1}\n", "expected a non-empty list"),
    ("pillars:\n  - {id: a, title: A}\n  - {id: a, title: B}\n", "pillar ids must be unique"),
    ("pillars:\n  - {id: a, title: A}\n  - {id: b}\n", r"pillars\[2\]"),
])
def test_bad_taxonomy_is_one_line_error(taxonomy_file, text, message):
    taxonomy_file.write_text(text, encoding="utf-8")
    with pytest.raises(GuarddiagError, match=message) as info:
        pillars()
    assert "\n" not in str(info.value)
