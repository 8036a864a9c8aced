import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.labels import (
    CLASSES,
    LOOSE,
    STRICT,
    check_class,
    class_probs_to_unsafe,
    get_mapping,
    pillar_ids,
)


def test_mappings_name_their_unsafe_classes():
    assert LOOSE.unsafe_mask() == (False, False, True, True)
    assert STRICT.unsafe_mask() == (False, True, True, True)
    assert get_mapping("strict") is STRICT


def test_unsafe_probability_under_each_mapping():
    probs = dict(zip(CLASSES, (0.1, 0.5, 0.3, 0.1), strict=True))
    assert class_probs_to_unsafe(probs, LOOSE) == pytest.approx(0.3 + 0.1)
    assert class_probs_to_unsafe(probs, STRICT) == pytest.approx(0.5 + 0.3 + 0.1)


def test_unknown_mapping_and_class_are_one_line_errors():
    with pytest.raises(GuarddiagError, match="unknown binary mapping 'strcit'.*strict"):
        get_mapping("strcit")
    with pytest.raises(GuarddiagError, match="row 3.*'SAFE' is not one of"):
        check_class("SAFE", "pool.csv row 3")


def test_pillar_taxonomy_has_24_unique_ids():
    ids = pillar_ids()
    assert len(ids) == 24
    assert len(set(ids)) == 24
    assert "copyright" in ids
