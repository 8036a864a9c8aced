"""guarddiag.typed: pydantic errors become one line per problem naming the file and the field."""

from __future__ import annotations

import pytest

from guarddiag.spec import SpecError
from guarddiag.typed import Model, validate


class _Spec(Model):
    name: str
    threshold: float = 0.8
    """Containment threshold."""
    tags: tuple[str, ...] = ()


def test_valid_mapping_builds_a_frozen_model_with_defaults():
    spec = validate(_Spec, {"name": "x"}, where="s.yaml")
    assert (spec.name, spec.threshold, spec.tags) == ("x", 0.8, ())
    with pytest.raises(Exception, match="frozen"):
        spec.name = "y"  # type: ignore[misc]


def test_every_problem_is_one_line_naming_file_and_field():
    with pytest.raises(SpecError) as info:
        validate(_Spec, {"threshhold": 0.7, "tags": ["a", 3]}, where="s.yaml")
    problems = info.value.problems
    assert len(problems) == 3
    assert 's.yaml field "name": missing required key' in problems
    assert any(p.startswith('s.yaml field "threshhold": unknown key (did you mean threshold')
               for p in problems)
    assert any(p.startswith('s.yaml field "tags[1]": ') and p.endswith("got 3")
               for p in problems)
    assert all("\n" not in p for p in problems)


def test_a_non_mapping_is_refused_with_the_place():
    with pytest.raises(Exception, match=r"^s\.yaml: expected a mapping, got list$"):
        validate(_Spec, [1], where="s.yaml")
