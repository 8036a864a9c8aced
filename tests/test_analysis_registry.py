"""Analyses and report sections register themselves (issue 25 item 3, issue 51 item 3): a toy
analysis (one analysis file, tests/toy_analysis.py, whose result is declared once) and its
section (one section file, tests/toy_section.py), brought in by one line, run in the report
step and appear in results.json, its derived schema and the report; the registries refuse what
would make the step ambiguous."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from pathlib import Path

import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag import files
from guarddiag.analyses import (
    ANALYSES,
    BUILT_IN,
    AnalysisContext,
    AnalysisOmitted,
    ReportOptions,
    analyse,
    load_inputs,
)
from guarddiag.analyses.registry import AnalysisRegistry
from guarddiag.analyses.scored import SCORES
from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.report import ReportContext, Section, build_report
from guarddiag.report.schema import json_schema, validate_results
from guarddiag.report.sections.registry import SECTIONS, SectionRegistry

REPO = Path(__file__).resolve().parents[1]
P_REFERENCE = [0.9, 0.1, 0.8, 0.2]
P_E1 = [0.6, 0.4, 0.5, 0.3]
# P(unsafe) >= 0.5: 0.9, 0.8 of the reference run and 0.6, 0.5 of E1's, 4 of the 8.
N_ABOVE, N_PREDICTIONS = 4, 8


def _runs(root: Path) -> Path:
    runs = root / "runs"
    preds = (rows_for(run_meta("micro", "reference", 42), "harmbench_standard", P_REFERENCE)
             + rows_for(run_meta("micro", "E1", 42), "harmbench_standard", P_E1))
    files.write_parquet(frame(preds), runs / "predictions.parquet")
    return runs


def _report(runs: Path, out: Path) -> dict:
    assert main(["report", "--runs-dir", str(runs), "--pool", str(runs / "no.parquet"),
                 "--audit-dir", str(runs / "no"), "--out", str(out), "--bootstrap", "20"]) == 0
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_a_toy_analysis_and_its_section_appear_in_results_json_its_schema_and_the_report(
        tmp_path):
    runs = _runs(tmp_path)
    with ANALYSES.scoped(), SECTIONS.scoped():
        try:
            importlib.import_module("toy_section")  # the one registration line
            toy = sys.modules["toy_analysis"]
            assert "toy_unsafe_share" in ANALYSES.names()
            res = _report(runs, tmp_path / "out")
            schema = json_schema()
        finally:
            sys.modules.pop("toy_section", None)
            sys.modules.pop("toy_analysis", None)
    assert res["results"]["toy_unsafe_share"] == {
        "n_predictions": N_PREDICTIONS, "n_above": N_ABOVE, "threshold": 0.5}
    ids = [s["id"] for s in res["sections"]]
    assert ids[-2:] == ["toy_unsafe_share", "disclosure"]  # before the card, which stays last
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Toy: predictions above the threshold" in md
    assert f"{N_ABOVE} of {N_PREDICTIONS} predictions" in md
    # The payload's model is derived from the result's one declaration: its fields, types and
    # field docstrings are in the schema, under the result's name.
    entry = schema["$defs"]["UnsafeShareJson"]
    assert entry["required"] == ["n_predictions", "n_above", "threshold"]
    assert entry["properties"]["n_above"]["type"] == "integer"
    assert entry["properties"]["n_above"]["description"].startswith(
        "Predictions whose P(unsafe) class mass")
    assert entry["additionalProperties"] is False
    assert schema["$defs"]["SectionResultsJson"]["properties"]["toy_unsafe_share"][
        "$ref"] == "#/$defs/UnsafeShareJson"
    with SECTIONS.scoped():
        SECTIONS.register("toy_unsafe_share", lambda ctx: Section.omit("t", "t", "t"),
                          payload=toy.UnsafeShareResult)
        assert validate_results(res) == []
        res["results"]["toy_unsafe_share"]["n_above"] = "four"
        assert validate_results(res) == [
            "$.results.toy_unsafe_share.n_above: Input should be a valid integer"]
    # Out of the scope, the registries are as they were: the toy is gone.
    assert "toy_unsafe_share" not in ANALYSES.names()
    assert "toy_unsafe_share" not in {e.id for e in SECTIONS.entries()}
    assert "UnsafeShareJson" not in json_schema()["$defs"]


def test_the_built_in_analyses_are_the_registry():
    assert tuple(a.name for a in BUILT_IN if a in ANALYSES.entries()) == tuple(
        a.name for a in BUILT_IN)
    assert set(ANALYSES.names()) == {a.name for a in BUILT_IN}
    # Each need is registered before what needs it, so registration order is a run order.
    seen: set[str] = set()
    for entry in ANALYSES.entries():
        assert {n.name for n in entry.needs} <= seen, entry.name
        seen.add(entry.name)


def test_the_step_runs_each_analysis_once_after_its_needs_and_keeps_omission_notes(tmp_path):
    runs = _runs(tmp_path)
    options = ReportOptions(runs_dir=runs, pool_path=None, audit_dir=None, n_resamples=20)
    registry = AnalysisRegistry()
    calls: list[str] = []

    def count(ctx: AnalysisContext) -> int:
        calls.append("count")
        return ctx.inputs.predictions.height

    def double(ctx: AnalysisContext) -> int:
        calls.append("double")
        return 2 * ctx[count_a]

    def absent(ctx: AnalysisContext) -> int:
        raise AnalysisOmitted("nothing to see")

    count_a = registry.register("count", count, result=int)
    double_a = registry.register("double", double, result=int, needs=(count_a,))
    absent_a = registry.register("absent", absent, result=int)
    results = analyse(load_inputs(options), options, registry=registry)
    assert calls == ["count", "double"]
    assert results[double_a] == 2 * N_PREDICTIONS
    assert results[absent_a] is None
    assert results.omitted == {"absent": "nothing to see"}
    # Results are read by handle only: one of another registry is not there, and a section
    # that needs a result is told which analysis had none and why.
    with pytest.raises(GuarddiagError, match="analysis 'scores' is not registered"):
        _ = results[SCORES]
    ctx = ReportContext(options=options, results=results)
    assert ctx.result(double_a) == 2 * N_PREDICTIONS
    assert ctx.get(absent_a) is None
    with pytest.raises(GuarddiagError, match="read analysis 'absent', which has no result "
                                             r"\(nothing to see\)"):
        ctx.result(absent_a)


def test_the_registries_refuse_duplicates_and_unregistered_needs():
    registry = AnalysisRegistry()
    first = registry.register("a", lambda ctx: 1, result=int)
    with pytest.raises(GuarddiagError, match="analysis 'a' is registered twice"):
        registry.register("a", lambda ctx: 2, result=int)
    other = AnalysisRegistry().register("b", lambda ctx: 1, result=int)
    with pytest.raises(GuarddiagError, match="needs 'b', which is not registered"):
        registry.register("c", lambda ctx: 1, result=int, needs=(other,))
    # An analysis that reads one it did not declare is told so.
    ctx = AnalysisContext(options=ReportOptions(), inputs=None,  # type: ignore[arg-type]
                          all_inputs=None, done={})  # type: ignore[arg-type]
    with pytest.raises(GuarddiagError, match="declare it in needs"):
        ctx.get(first)
    sections = SectionRegistry()
    sections.register("s", lambda ctx: None, last=True)  # type: ignore[arg-type, return-value]
    with pytest.raises(GuarddiagError, match="registered twice"):
        sections.register("s", lambda ctx: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(GuarddiagError, match="already last"):
        sections.register("t", lambda ctx: None, last=True)  # type: ignore[arg-type, return-value]


def test_a_registered_section_must_build_the_id_it_was_registered_under():
    def builder(ctx: ReportContext) -> Section:
        return Section.omit("other", "Other", "nothing")

    ctx = ReportContext(options=ReportOptions(), results=None)  # type: ignore[arg-type]
    with SECTIONS.scoped():
        SECTIONS.register("mine", builder)
        with pytest.raises(GuarddiagError, match="registered as 'mine' built 'other'"):
            build_report(ctx, sections=[builder])


def _reads_by_name(source: str) -> list[str]:
    """Where ``source`` reads an analysis result by name rather than by its typed handle:
    ``<x>.results.<analysis name>`` or ``<x>.results.values``."""
    names = set(ANALYSES.names()) | {"values"}
    return [f"line {node.lineno}: .results.{node.attr}"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr in names
            and isinstance(node.value, ast.Attribute) and node.value.attr == "results"]


def test_report_sections_read_results_by_their_typed_handles_only():
    found = {str(path.relative_to(REPO)): reads
             for path in sorted((REPO / "guarddiag" / "report").rglob("*.py"))
             if (reads := _reads_by_name(path.read_text(encoding="utf-8")))}
    assert found == {}
    # The scan sees both ways of reading by name.
    assert _reads_by_name("a = ctx.results.rank\nb = ctx.results.values.get('calls')\n"
                          "c = ctx.result(RANK)\n") == [
        "line 1: .results.rank", "line 2: .results.values"]
