from typing import Annotated

import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.spec import Problems, SpecError, load_yaml_mapping
from guarddiag.typed import Check, SpecModel, check_keys, read_values, validate


def test_yaml_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(GuarddiagError, match=r"bad\.yaml line \d+: malformed YAML"):
        load_yaml_mapping(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- 1\n- 2\n")
    with pytest.raises(GuarddiagError, match="expected a YAML mapping"):
        load_yaml_mapping(lst)
    with pytest.raises(GuarddiagError, match="file not found"):
        load_yaml_mapping(tmp_path / "absent.yaml")
    raw = tmp_path / "latin1.yaml"
    raw.write_bytes(b"a: caf\xe9\n")
    with pytest.raises(GuarddiagError, match="not UTF-8"):
        load_yaml_mapping(raw)


def test_every_problem_is_reported_at_once():
    problems = Problems()
    check_keys({"name": "x", "epochz": 3}, required=["name", "lr"], optional=["epochs"],
               where="E1.yaml", problems=problems)
    assert problems.items == [
        'E1.yaml field "epochz": unknown key (did you mean epochs?)',
        'E1.yaml field "lr": missing required key',
    ]
    with pytest.raises(SpecError) as info:
        problems.raise_if_any("branch specs")
    assert "2 problems in branch specs" in str(info.value)
    assert info.value.problems == problems.items


# ─── spec fields read through a typed model (guarddiag.typed.Check, read_values) ──────────────

class Toy(SpecModel):
    name: Annotated[str, Check("str", pattern=r"[a-z]+", describe="a lower-case word")]
    kind: Annotated[str, Check(allowed=("harmful", "benign"))]
    epochs: Annotated[int, Check("int", minimum=1)] = 3
    share: Annotated[float | None, Check("number", minimum=0.0, maximum=1.0)] = None
    warmup: Annotated[float | None, Check("number", minimum=0.0, maximum=1.0,
                                          open_maximum=True)] = None
    lr: Annotated[float | None, Check("number", minimum=0.0, open_minimum=True)] = None
    rows: Annotated[int | None, Check("int", minimum=1, nullable=True)] = None
    fields: Annotated[tuple[str, ...] | None, Check("str_list")] = None
    anchors: Annotated[bool | None, Check("bool")] = None


def test_read_values_fills_defaults_and_converts():
    problems = Problems()
    values = read_values(Toy, {"name": "toy", "kind": "benign", "share": 1, "rows": None,
                               "fields": ["a", "b"]}, where="t.yaml", problems=problems)
    assert not problems
    assert values == {"name": "toy", "kind": "benign", "epochs": 3, "share": 1.0,
                      "rows": None, "fields": ("a", "b")}
    assert isinstance(values["share"], float)


def test_read_values_reports_every_problem_of_a_mapping_at_once():
    problems = Problems()
    doc = {"name": "Toy", "kind": "harmfull", "epochs": 0, "share": 1.5, "warmup": 1.0,
           "lr": 0, "rows": "x", "fields": [], "anchors": "yes", "epochz": 2}
    values = read_values(Toy, doc, where="t.yaml", problems=problems)
    assert values == {}
    assert problems.items == [
        't.yaml field "epochz": unknown key (did you mean epochs?)',
        't.yaml field "name": expected a lower-case word, got \'Toy\'',
        't.yaml field "kind": expected harmful or benign, got \'harmfull\'',
        't.yaml field "epochs": 0 is below the minimum 1',
        't.yaml field "share": 1.5 is outside [0, 1]',
        't.yaml field "warmup": 1.0 is outside [0, 1)',
        't.yaml field "lr": 0 must be > 0',
        't.yaml field "rows": expected an integer or null, got \'x\'',
        't.yaml field "fields": expected at least one entry',
        't.yaml field "anchors": expected true or false, got \'yes\'',
    ]


def test_read_values_missing_keys_and_wrong_types():
    problems = Problems()
    read_values(Toy, {"share": "half", "epochs": True, "lr": float("nan")}, where="t.yaml",
                problems=problems)
    assert problems.items == [
        't.yaml field "name": missing required key',
        't.yaml field "kind": missing required key',
        't.yaml field "epochs": expected an integer, got True',
        't.yaml field "share": expected a fraction in [0, 1], got \'half\'',
        't.yaml field "lr": expected a number, got nan',
    ]
    problems = Problems()
    assert read_values(Toy, ["not", "a", "mapping"], where="t.yaml", problems=problems) == {}
    assert problems.items == ["t.yaml: expected a mapping, got list"]


def test_a_whole_model_speaks_the_same_dialect():
    # validate() on the same model: the Check's words, every problem at once.
    with pytest.raises(SpecError) as info:
        validate(Toy, {"name": "toy", "kind": "x", "share": 2}, where="t.yaml")
    assert info.value.problems == ["t.yaml field \"kind\": expected harmful or benign, got 'x'",
                                   't.yaml field "share": 2 is outside [0, 1]']


def test_check_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="unknown check kind 'float'"):
        Check("float")
