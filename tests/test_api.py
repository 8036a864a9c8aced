"""The Python API (issue 15): the README's example runs, a plain function is a guard, and a bad
answer stops with one line naming the guard and the first prompt concerned."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import polars as pl
import pytest

import guarddiag
from guarddiag.cli import main
from guarddiag.data import load_benchmarks
from guarddiag.errors import GuarddiagError
from guarddiag.guards.callable import CallableGuardAdapter, load_target

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _readme_example() -> str:
    section = README.split("### Python API", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert found, "README's Python API section has no python block"
    return found.group(1)


def test_readme_python_example_runs(real_data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_readme_example(), "README.md", "exec"), {"__name__": "readme_example"})
    runs = pl.read_parquet(tmp_path / "work" / "runs" / "outside" / "my_guard.parquet")
    counts = dict(runs.group_by("benchmark").len().iter_rows())
    assert counts == {"xstest_safe": 250, "xstest_unsafe": 200}
    # The example's guard flags exactly the prompts containing "kill": count them in the data.
    frames = load_benchmarks(["xstest_safe", "xstest_unsafe"], data_dir=real_data_dir).frames
    for bench, frame in frames.items():
        kill = frame.filter(pl.col("text").str.to_lowercase().str.contains("kill", literal=True))
        flagged = runs.filter((pl.col("benchmark") == bench) & (pl.col("p_unsafe") >= 0.5))
        assert sorted(flagged["prompt_id"].to_list()) == sorted(kill["prompt_id"].to_list())
        assert kill.height > 0
    assert (tmp_path / "reports" / "mine" / "report.html").is_file()
    assert (tmp_path / "work" / "audit" / "summary.json").is_file()


def _keyword(texts: list[str]) -> list[float]:
    return [0.9 if "kill" in t.lower() else 0.1 for t in texts]


def test_score_guard_with_a_lambda_scores_every_prompt(real_data_dir, tmp_path):
    result = guarddiag.score_guard(lambda texts: [0.25] * len(texts), benchmarks=["xstest_safe"],
                                   runs_dir=tmp_path / "runs", audit_dir=None)
    assert result.n_prompts == 250
    assert result.name == "callable"
    table = pl.read_parquet(result.table_path)
    assert table.height == 250
    assert table["p_unsafe"].to_list() == [0.25] * 250
    as_dict = result.to_dict()
    assert json.loads(json.dumps(as_dict))["n_prompts"] == 250
    assert as_dict["benchmarks"][0]["benchmark"] == "xstest_safe"


def test_cli_target_writes_the_same_parquet_as_the_python_call(real_data_dir, tmp_path,
                                                               monkeypatch):
    (tmp_path / "team_guard.py").write_text(
        "def moderate(texts):\n    return [0.9 if 'kill' in t.lower() else 0.1 for t in texts]\n",
        encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["guards", "score", "--adapter", "callable", "--target", "team_guard:moderate",
                 "--benchmarks", "xstest_safe", "--runs-dir", "cli_runs"]) == 0
    import team_guard  # the same module the CLI imported

    guarddiag.score_guard(team_guard.moderate, benchmarks=["xstest_safe"], runs_dir="api_runs",
                          audit_dir="work/audit")
    cli = (tmp_path / "cli_runs" / "outside" / "moderate.parquet").read_bytes()
    api = (tmp_path / "api_runs" / "outside" / "moderate.parquet").read_bytes()
    assert cli == api
    sys.modules.pop("team_guard", None)


@pytest.mark.parametrize(("answers", "p_unsafe"), [
    ([0.0, 1.0, 0.3], [0.0, 1.0, 0.3]),
    (["safe", "UNSAFE", "controversial"], [0.0, 1.0, 0.0]),
    ([{"p_unsafe": 0.2}, {"label": "yes"}, {"HARMFUL": 0.75, "GENERIC_SAFE": 0.25}],
     [0.2, 1.0, 0.75]),
    ([{"COMPOUND": 0.5, "BOUNDARY_SAFE": 0.5}, True, 1], None),
])
def test_answer_forms_read_as_documented(answers, p_unsafe):
    guard = CallableGuardAdapter(function=lambda texts: answers, name="g")
    if p_unsafe is None:  # True is not a probability (a bool slipped through is an error)
        with pytest.raises(GuarddiagError, match=r"guard 'g': P\(unsafe\) True is not a number"):
            guard.score(["a", "b", "c"])
        return
    got = [v.p_unsafe for v in guard.score(["a", "b", "c"])]
    assert got == pytest.approx(p_unsafe)


def test_compound_mass_is_unsafe_under_loose_and_boundary_only_under_strict():
    guard = CallableGuardAdapter(function=lambda t: [{"COMPOUND": 0.5, "BOUNDARY_SAFE": 0.5}],
                                 name="g")
    (verdict,) = guard.score(["x"])
    assert verdict.p_unsafe == pytest.approx(0.5)  # loose: COMPOUND + HARMFUL
    assert verdict.p_unsafe_under(guarddiag.STRICT) == pytest.approx(1.0)


def _frame(n: int) -> pl.DataFrame:
    return pl.DataFrame({"benchmark": ["xs"] * n, "prompt_id": [f"q{i}" for i in range(n)],
                         "text": [f"prompt {i}" for i in range(n)]})


@pytest.mark.parametrize(("fn", "message"), [
    (lambda t: 1 / 0, r"guard 'bad' raised ZeroDivisionError: division by zero on a batch of 3 "
                      r"starting at xs/q0"),
    (lambda t: [0.1] * (len(t) - 1), r"guard 'bad' returned 2 answer\(s\) for 3 prompts"),
    (lambda t: [0.1, math.nan, 0.2], r"guard 'bad': P\(unsafe\) nan is outside \[0, 1\] for xs/q1"),
    (lambda t: [0.1, 0.2, 1.5], r"guard 'bad': P\(unsafe\) 1.5 is outside \[0, 1\] for xs/q2"),
    (lambda t: ["safe", "maybe", "unsafe"], r"guard 'bad': unknown label 'maybe' .* for xs/q1"),
    (lambda t: [{"HARMFUL": 0.5, "GENERIC_SAFE": 0.4}] * 3,
     r"class probabilities sum to 0.900000, expected 1 for xs/q0"),
    (lambda t: 7, r"guard 'bad' returned int, expected one answer per prompt"),
])
def test_bad_answers_stop_with_one_line_naming_guard_and_prompt(fn, message):
    guard = CallableGuardAdapter(function=fn, name="bad")
    with pytest.raises(GuarddiagError, match=message) as err:
        guard.score_prompts(_frame(3))
    assert "\n" not in str(err.value)


def test_unimportable_target_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GuarddiagError, match=r"cannot import 'no_such_module_xyz'"):
        load_target("no_such_module_xyz:f")
    with pytest.raises(GuarddiagError, match=r"expected package.module:function"):
        load_target("just_a_module")
    with pytest.raises(GuarddiagError, match=r"'json' has no attribute 'nope'"):
        load_target("json:nope")
    code = main(["guards", "score", "--adapter", "callable", "--target", "no_such_module_xyz:f",
                 "--benchmarks", "xstest_safe", "--runs-dir", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no_such_module_xyz" in err[0]


def test_import_guarddiag_stays_light():
    """The verbs load on first use: importing the package pulls in no heavy library."""
    import subprocess

    code = ("import sys, guarddiag; heavy = [m for m in ('polars', 'torch', 'matplotlib', "
            "'scipy', 'transformers') if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ""
    assert callable(guarddiag.run_audit)
    assert callable(guarddiag.run_report)


def test_a_guards_definition_reaches_table_2(real_data_dir, tmp_path):
    """What "unsafe" means for a guard is stated beside its scores (issue 15: the demo's
    outside guard with its operational definition)."""
    sentence = "unsafe = the prompt contains the word kill"
    guarddiag.score_guard(_keyword, benchmarks=["xstest_safe", "xstest_unsafe"], name="kw",
                          runs_dir=tmp_path / "runs", audit_dir=None, definition=sentence)
    meta = json.loads((tmp_path / "runs" / "outside" / "kw.meta.json").read_text("utf-8"))
    assert meta["definition"] == sentence
    report = guarddiag.run_report(tmp_path / "runs", out=tmp_path / "rep", n_resamples=100)
    assert report.to_dict()["results"]["results"]["outside"]["definitions"] == {
        "guard/kw": sentence}
    assert f"kw: {sentence}" in (tmp_path / "rep" / "report.md").read_text("utf-8")
