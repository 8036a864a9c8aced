"""The mutation-testing tool (guarddiag.devtools.mutation): its operators, sampling, the named
mutants of issue 18, and one end-to-end run on a throwaway repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guarddiag.devtools import mutation
from guarddiag.devtools.mutants import (
    NO_REASON,
    OPERATORS,
    module_mutants,
    normalised_source,
    source_sha256,
)

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


def test_strict_keyword_is_left_alone_and_a_pragma_marks_equivalent():
    src = "def f(a, b):\n    return list(zip(a, b, strict=True))\n"
    (plain,) = module_mutants("t.py", src)
    assert plain.description == "returns None"
    assert plain.equivalent == ""
    marked = src.replace("True))\n", "True))  # pragma: no mutate: why not\n")
    (m,) = module_mutants("t.py", marked)
    assert (m.id, m.equivalent) == (plain.id, "why not")
    bare = src.replace("True))\n", "True))  # pragma: no mutate\n")
    assert module_mutants("t.py", bare)[0].equivalent == NO_REASON
    scoped = src.replace("True))\n", "True))  # pragma: no mutate(guard, cmp): other ops\n")
    assert module_mutants("t.py", scoped)[0].equivalent == ""
    scoped = src.replace("True))\n", "True))  # pragma: no mutate(return): this op\n")
    assert module_mutants("t.py", scoped)[0].equivalent == "this op"
    guarded = ("def f(x):\n"
               "    return x.mean() if x else None  # pragma: no mutate(guard-always): y\n")
    marks = {m.description: m.equivalent for m in module_mutants("t.py", guarded)}
    assert marks["conditional expression guard dropped (always)"] == "y"
    assert marks["conditional expression body removed (never)"] == ""
    assert marks[".mean() → .max()"] == ""
    two = "def f(a, b):\n    return a - (b - 1)  # pragma: no mutate(arith@11): z\n"
    marks = {(m.col, m.description): m.equivalent for m in module_mutants("t.py", two)}
    assert marks[(11, "- → +")] == "z"
    assert marks[(16, "- → +")] == ""
    both = "def f(a, b):\n    return not a and not b  # pragma: no mutate(and → or): w\n"
    marks = {m.description: m.equivalent for m in module_mutants("t.py", both)}
    assert marks == {"and → or": "w", "not x → x": "", "returns None": ""}


def test_pragma_comments_do_not_change_the_hash_or_the_sample():
    marked = SOURCE.replace("    mid = statistics.median(values)\n",
                            "    mid = statistics.median(values)  # pragma: no mutate: x\n")
    assert marked != SOURCE
    assert normalised_source(marked) == SOURCE
    assert source_sha256(marked) == source_sha256(SOURCE)
    assert source_sha256(SOURCE.replace("limit=3", "limit=2")) != source_sha256(SOURCE)
    plain, with_pragma = module_mutants("toy.py", SOURCE), module_mutants("toy.py", marked)
    assert [m.id for m in plain] == [m.id for m in with_pragma]
    assert [m.id for m in mutation.sample(plain, 5, 3, "toy.py")] == \
        [m.id for m in mutation.sample(with_pragma, 5, 3, "toy.py")]
    line = SOURCE.splitlines().index("    mid = statistics.median(values)") + 1
    assert {m.line for m in with_pragma if m.equivalent} == {line}


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


def _toy_repo(tmp_path: Path, body: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "guarddiag").mkdir(parents=True, exist_ok=True)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "guarddiag" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "guarddiag" / "toy.py").write_text(body, encoding="utf-8")
    (repo / "tests" / "test_toy.py").write_text(
        "from guarddiag.toy import big\n\n\ndef test_big():\n    assert big(11)\n"
        "    assert not big(10)\n", encoding="utf-8")
    return repo


def _run_toy(repo: Path, out: Path, *extra: str) -> dict:
    code = mutation.main(["--repo", str(repo), "--modules", "guarddiag/toy.py", "--tests",
                          "tests/test_toy.py", "--max-mutants", "0", "--no-diffs",
                          "--json", str(out), *extra])
    assert code == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_survivors_of_carries_kills_and_retests_only_survivors(tmp_path, capsys):
    body = "def big(x):\n    return x > 10\n\n\ndef unused(x):\n    return x * 2\n"
    repo = _toy_repo(tmp_path, body)
    first = _run_toy(repo, tmp_path / "a.json")
    (mod,) = first["modules"]
    assert mod["sha256"] == source_sha256(body)
    killed = {m["id"] for m in mod["mutants"] if m["status"] == "killed"}
    survived = {m["id"] for m in mod["mutants"] if m["status"] == "survived"}
    assert len(killed) == 3
    assert len(survived) == 3
    # the survivors are now guarded by a test and one line gets a pragma
    (repo / "tests" / "test_toy.py").write_text(
        "from guarddiag.toy import big, unused\n\n\ndef test_big():\n    assert big(11)\n"
        "    assert not big(10)\n\n\ndef test_unused():\n    assert unused(3) == 6\n",
        encoding="utf-8")
    capsys.readouterr()
    second = _run_toy(repo, tmp_path / "b.json", "--survivors-of", str(tmp_path / "a.json"))
    (mod2,) = second["modules"]
    assert mod2["incremental"] is True
    by_id = {m["id"]: m for m in mod2["mutants"]}
    assert set(by_id) == killed | survived
    assert all(by_id[i].get("carried") is True and by_id[i]["status"] == "killed"
               for i in killed)
    assert all("carried" not in by_id[i] and by_id[i]["status"] == "killed" for i in survived)
    assert (second["killed"], second["total"]) == (6, 6)
    assert "3 result(s) carried over, 3 mutant(s) tested" in capsys.readouterr().out
    # a pragma: same hash, so still incremental; its mutants leave the denominator
    (repo / "guarddiag" / "toy.py").write_text(
        body.replace("x * 2\n", "x * 2  # pragma: no mutate: toy reason\n"), encoding="utf-8")
    third = _run_toy(repo, tmp_path / "c.json", "--survivors-of", str(tmp_path / "a.json"))
    (mod3,) = third["modules"]
    assert mod3["incremental"] is True
    assert mod3["equivalent"] == 3
    assert {m["reason"] for m in mod3["mutants"] if m["status"] == "equivalent"} == \
        {"toy reason"}
    assert (third["killed"], third["total"]) == (3, 3)
    # a real change of the module: everything runs again, nothing carried
    (repo / "guarddiag" / "toy.py").write_text(body.replace("x * 2", "x * 3"),
                                               encoding="utf-8")
    fourth = _run_toy(repo, tmp_path / "d.json", "--survivors-of", str(tmp_path / "a.json"))
    (mod4,) = fourth["modules"]
    assert mod4["incremental"] is False
    assert mod4["carried"] == 0
    assert not any(m.get("carried") for m in mod4["mutants"])


def test_survivors_of_refuses_a_different_sample(tmp_path):
    repo = _toy_repo(tmp_path, "def big(x):\n    return x > 10\n")
    _run_toy(repo, tmp_path / "a.json")
    with pytest.raises(SystemExit, match="same options"):
        mutation.main(["--repo", str(repo), "--modules", "guarddiag/toy.py", "--tests",
                       "tests/test_toy.py", "--max-mutants", "5", "--survivors-of",
                       str(tmp_path / "a.json"), "--list"])
