"""A result declared once gives its results.json payload and that payload's model
(guarddiag.analyses.payload): each field under its key, tables as records, fractions exact,
nested results as their payload; the model checks what the payload writes and refuses the rest;
a type with no JSON form is refused naming the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import polars as pl
import pytest
from pydantic import ValidationError

from guarddiag.analyses.payload import json_key, not_in_payload, payload_model, payload_of
from guarddiag.errors import GuarddiagError


@dataclass(frozen=True)
class BlockResult:
    score: float
    branches: tuple[str, ...]


@dataclass(frozen=True)
class ToyResult:
    """A toy result."""

    table: pl.DataFrame = field(metadata=json_key("rows"))
    """One row per branch."""
    p_value: Fraction
    tail: Literal["top", "bottom"]
    blocks: tuple[BlockResult, ...]
    floor: float | None
    counts: dict[str, int]
    seconds: float = field(default=0.0, metadata=not_in_payload())


def _toy() -> ToyResult:
    return ToyResult(table=pl.DataFrame({"branch": ["E1", "E2"], "score": [0.5, float("nan")]}),
                     p_value=Fraction(1, 210), tail="top",
                     blocks=(BlockResult(score=0.0, branches=("E3", "E4")),),
                     floor=float("inf"), counts={"E1": 3}, seconds=1.5)


def test_the_payload_is_every_field_under_its_key_as_json():
    assert payload_of(_toy()) == {
        "rows": [{"branch": "E1", "score": 0.5}, {"branch": "E2", "score": None}],
        "p_value": {"value": 1 / 210, "exact": "1/210"},
        "tail": "top",
        "blocks": [{"score": 0.0, "branches": ["E3", "E4"]}],
        "floor": None,      # not finite: null
        "counts": {"E1": 3},
    }                       # seconds: not in the payload


def test_the_model_is_derived_from_the_same_declaration():
    model = payload_model(ToyResult)
    assert model.__name__ == "ToyJson"
    assert payload_model(ToyResult) is model                     # made once
    assert list(model.model_fields) == ["rows", "p_value", "tail", "blocks", "floor", "counts"]
    schema = model.model_json_schema()
    assert schema["description"] == "A toy result."
    assert schema["properties"]["rows"]["description"] == "One row per branch."
    assert schema["properties"]["tail"]["enum"] == ["top", "bottom"]
    assert schema["properties"]["blocks"]["items"] == {"$ref": "#/$defs/BlockJson"}
    assert schema["$defs"]["ExactJson"]["required"] == ["value", "exact"]
    model.model_validate(payload_of(_toy()), strict=True)
    bad = payload_of(_toy()) | {"tail": "up", "seconds": 1.5}
    with pytest.raises(ValidationError) as err:
        model.model_validate(bad, strict=True)
    assert sorted((e["loc"], e["type"]) for e in err.value.errors()) == [
        (("seconds",), "extra_forbidden"), (("tail",), "literal_error")]


def test_a_field_with_no_json_form_is_refused_naming_it():
    @dataclass(frozen=True)
    class OddResult:
        when: complex

    with pytest.raises(GuarddiagError, match=r"^OddResult\.when: no JSON form for the type "):
        payload_model(OddResult)
    with pytest.raises(GuarddiagError, match="payload: int is not a result dataclass"):
        payload_of(3)
