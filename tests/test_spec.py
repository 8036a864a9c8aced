import pytest

from guarddiag.errors import GuarddiagError
from guarddiag.spec import Problems, SpecError, check_keys, load_yaml_mapping


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
