"""The mutation-testing tool (guarddiag.devtools.mutation): its operators, sampling, the named
mutants of issue 18, and one end-to-end run on a throwaway repository."""

from __future__ import annotations

import json
from pathlib import Path

from guarddiag.devtools import mutation
from guarddiag.devtools.mutants import OPERATORS, module_mutants

SOURCE = '''"""Docstring: 1 < 2 is never mutated."""
import statistics


def floor(values, limit=3):
    if not values:
        return None
    mid = statistics.median(values)
    return mid > limit and len(values) + 1 or f"{mid + 1}"
'''


def _by_description(source: str) -> dict[str, str]:
    return {m.description: m.mutated for m in module_mutants("toy.py", source)}


def test_each_operator_makes_a_one_place_change():
    muts = module_mutants("toy.py", SOURCE)
    ops = {m.operator for m in muts}
    assert ops == set(OPERATORS)
    by = _by_description(SOURCE)
    assert "    return (mid >= limit) and len(values) + 1 or" in by["> → >="]
    assert "len(values) - 1" in by["+ → -"]
    assert "statistics.max(values)" in by[".median() → .max()"]
    assert "    if True:\n        return None" in by["if guard dropped (always)"]
    assert "    if False:\n        return None" in by["if body removed (never)"]
    assert "def floor(values, limit=4):" in by["3 → 4"]
    assert "    if (values):" in by["not x → x"]
    for m in muts:
        changed = [line for line in m.diff(context=0).splitlines()
                   if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
        assert len(changed) == 2, m.id  # one line out, one line in
        compile(m.mutated, "toy.py", "exec")
    # never inside docstrings or f-strings
    assert not [m for m in muts if m.line == 1]
    assert not [m for m in muts if "{mid - 1}" in m.mutated]


def test_pragma_and_strict_keyword_are_left_alone():
    src = "def f(a, b):\n    return list(zip(a, b, strict=True))  # pragma: no mutate\n"
    assert module_mutants("t.py", src) == []
    src = "def f(a, b):\n    return list(zip(a, b, strict=True))\n"
    assert [m.description for m in module_mutants("t.py", src)] == ["returns None"]


def test_sampling_is_seeded_and_stable():
    muts = module_mutants("toy.py", SOURCE)
    a = mutation.sample(muts, 4, 7, "toy.py")
    assert [m.id for m in a] == [m.id for m in mutation.sample(muts, 4, 7, "toy.py")]
    assert len(a) == 4
    assert mutation.sample(muts, 0, 7, "toy.py") == muts


def test_named_mutants_of_issue_18_are_all_found():
    root = Path(__file__).resolve().parents[1]
    found = mutation.known_mutants(root)
    assert len(found) == 8
    missing = [name for name, m in found if m is None]
    assert missing == [], "re-derive these in guarddiag/devtools/mutation.py KNOWN"


def test_default_modules_all_have_tests():
    root = Path(__file__).resolve().parents[1]
    modules = mutation.expand_modules(mutation.DEFAULT_MODULES, root)
    assert "guarddiag/stats.py" in modules
    assert [m for m in modules if not mutation.tests_for(m, root, None)] == []


def test_end_to_end_on_a_throwaway_repo(tmp_path, capsys):
    repo = tmp_path / "repo"
    (repo / "guarddiag").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "guarddiag" / "toy.py").write_text(
        "def big(x):\n    return x > 10\n\n\ndef unused(x):\n    return x * 2\n",
        encoding="utf-8")
    (repo / "tests" / "test_toy.py").write_text(
        "from guarddiag.toy import big\n\n\ndef test_big():\n    assert big(11)\n"
        "    assert not big(10)\n", encoding="utf-8")
    (repo / "guarddiag" / "__init__.py").write_text("", encoding="utf-8")
    out = tmp_path / "result.json"
    code = mutation.main(["--repo", str(repo), "--modules", "guarddiag/toy.py", "--tests",
                          "tests/test_toy.py", "--max-mutants", "0", "--json", str(out)])
    assert code == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    (mod,) = doc["modules"]
    status = {m["description"]: m["status"] for m in mod["mutants"]}
    assert status["> → >="] == "killed"
    assert status["10 → 11"] == "killed"
    assert status["* → /"] == "survived"       # nothing tests unused()
    assert status["2 → 3"] == "survived"
    assert mod["killed"] + mod["survived"] == len(mod["mutants"])
    printed = capsys.readouterr().out
    assert "guarddiag/toy.py" in printed
    assert "+    return (x / 2)" in printed      # survivors shown as diffs
    assert (repo / "guarddiag" / "toy.py").read_text(encoding="utf-8").endswith("x * 2\n")


def test_annotations_and_dataclass_reprs_are_left_alone():
    src = ("from dataclasses import field\n\n\n"
           "def f(x: int | None, *, y: list[int] | None = None) -> int | None:\n"
           "    return x\n\n\n"
           "class R:\n    table: int | None = field(repr=False)\n")
    assert [m.description for m in module_mutants("t.py", src)] == ["returns None"]
