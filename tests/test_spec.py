import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.spec import Field, Problems, SpecError, check_keys, load_yaml_mapping, read_fields


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


# ─── declared fields ───────────────────────────────────────────────────────────────────────────

FIELDS = (
    Field("name", "str", required=True, pattern=r"[a-z]+", describe="a lower-case word"),
    Field("kind", required=True, allowed=("harmful", "benign")),
    Field("epochs", "int", minimum=1, default=3),
    Field("share", "number", minimum=0.0, maximum=1.0),
    Field("warmup", "number", minimum=0.0, maximum=1.0, open_maximum=True),
    Field("lr", "number", minimum=0.0, open_minimum=True),
    Field("rows", "int", minimum=1, nullable=True),
    Field("fields", "str_list"),
    Field("anchors", "bool"),
)


def test_read_fields_fills_defaults_and_converts():
    problems = Problems()
    values = read_fields({"name": "toy", "kind": "benign", "share": 1, "rows": None,
                          "fields": ["a", "b"]}, FIELDS, where="t.yaml", problems=problems)
    assert not problems
    assert values == {"name": "toy", "kind": "benign", "epochs": 3, "share": 1.0,
                      "rows": None, "fields": ("a", "b")}
    assert isinstance(values["share"], float)


def test_read_fields_reports_every_problem_of_a_mapping_at_once():
    problems = Problems()
    doc = {"name": "Toy", "kind": "harmfull", "epochs": 0, "share": 1.5, "warmup": 1.0,
           "lr": 0, "rows": "x", "fields": [], "anchors": "yes", "epochz": 2}
    values = read_fields(doc, FIELDS, where="t.yaml", problems=problems)
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


def test_read_fields_missing_keys_and_wrong_types():
    problems = Problems()
    read_fields({"share": "half", "epochs": True, "lr": float("nan")}, FIELDS, where="t.yaml",
                problems=problems)
    assert problems.items == [
        't.yaml field "name": missing required key',
        't.yaml field "kind": missing required key',
        't.yaml field "epochs": expected an integer, got True',
        't.yaml field "share": expected a fraction in [0, 1], got \'half\'',
        't.yaml field "lr": expected a number, got nan',
    ]
    problems = Problems()
    assert read_fields(["not", "a", "mapping"], FIELDS, where="t.yaml", problems=problems) == {}
    assert problems.items == ["t.yaml: expected a mapping, got list"]


def test_field_rejects_an_unknown_type():
    with pytest.raises(ValueError, match="unknown type 'float'"):
        Field("x", "float")
