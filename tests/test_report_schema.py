"""results.json's schema as typed models: the checked-in JSON Schema is the one generated from
the models, the models catch what they should, the committed example validates both against
the models and (with the independent ``jsonschema`` validator) against the checked-in file,
and the report package only renders (its imports)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pytest

from guarddiag.report import SCHEMA_VERSION
from guarddiag.report.schema import SCHEMA_PATH, json_schema, json_schema_text, validate_results

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "guarddiag" / "report"
EXAMPLE = REPO / "reports" / "example" / "results.json"


def test_checked_in_schema_is_the_generated_one():
    # Regenerate with: python -c "from guarddiag.report.schema import write_json_schema as w; w()"
    assert SCHEMA_PATH.read_text(encoding="utf-8") == json_schema_text()


def test_schema_names_every_default_section_and_the_version():
    schema = json_schema()
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION, "title":
                                                      "Schema Version", "type": "integer"}
    sections = schema["$defs"]["SectionResultsJson"]
    assert sections.get("required", []) == []
    assert sections["additionalProperties"] is True
    assert set(sections["properties"]) == {
        "first_screen", "summary", "branches", "contamination", "scores", "load", "rank",
        "mapping", "outside",
        "threshold_free", "correlation", "val", "pool", "study", "disclosure", "sorry_categories",
        "sorry_robustness", "sorry_balance", "distill", "calls"}
    # A payload's field docstring is its description in the schema.
    assert "calibrated load test" in schema["$defs"]["OptionsJson"]["properties"]["alpha"][
        "description"]


def _minimal() -> dict:
    return {"schema_version": SCHEMA_VERSION, "title": "t",
            "options": {"mapping": "loose", "threshold": 0.5, "n_resamples": 10,
                        "confidence": 0.95, "seed": 0, "primary_subset": "decontaminated",
                        "min_seeds": 3, "alpha": 0.05, "competence_floor": 0.8,
                        "rank_group": ["E1"], "rank_benchmark": "b",
                        "rank_tail": "top"},
            "inputs": {"predictions": [{"path": "p", "sha256": "x"}], "pool": None,
                       "agreement": None, "audit_summary": None},
            "notes": [], "sections": [{"id": "val", "title": "V", "omitted": "no pool"}],
            "results": {"extra_section": {"anything": [1, 2]}}}


def test_models_and_generated_schema_accept_a_minimal_file():
    assert validate_results(_minimal()) == []
    jsonschema.Draft202012Validator(json_schema()).validate(_minimal())


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.update(schema_version=True), "$.schema_version: Input should be 4"),
    (lambda r: r["options"].update(seed=1.5), "$.options.seed: Input should be a valid integer"),
    (lambda r: r["options"].update(seed=False),
     "$.options.seed: Input should be a valid integer"),
    (lambda r: r["options"].pop("mapping"), "$.options.mapping: Field required"),
    (lambda r: r["inputs"].update(extra=1), "$.inputs.extra: Extra inputs are not permitted"),
    (lambda r: r["options"].update(rank_tail="up"),
     "$.options.rank_tail: Input should be 'top', 'bottom' or 'either'"),
    (lambda r: r["inputs"].update(pool="p"),
     "$.inputs.pool: Input should be a valid dictionary or instance of FileRefJson"),
    (lambda r: r["results"].update(val={"overlap": [{"lang": ["en"]}]}),
     "$.results.val.overlap.0.lang.str: Input should be a valid string"),
    # A hand-written model holding a result's derived payload (val.parts: ValSetsResult's,
    # its confidence not in the payload) checks it like any other.
    (lambda r: r["results"].update(val={"overlap": [], "parts": {
        "rows": [], "runs": [], "recipes": [], "spearman": [], "confidence": 0.95}}),
     "$.results.val.parts.confidence: Extra inputs are not permitted"),
    (lambda r: r["results"].update(val={"overlap": [], "parts": {
        "rows": [], "runs": [], "recipes": []}}),
     "$.results.val.parts.spearman: Field required"),
])
def test_models_name_each_problem(change, message):
    res = _minimal()
    change(res)
    problems = validate_results(res)
    assert problems[0] == message
    # The generated JSON Schema, read by an independent validator, rejects it too.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(json_schema()).validate(res)


def test_example_report_follows_the_models_and_the_checked_in_schema():
    example = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert validate_results(example) == []
    checked_in = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(checked_in)
    jsonschema.Draft202012Validator(checked_in).validate(example)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("path", sorted(REPORT.rglob("*.py")), ids=lambda p: p.stem)
def test_report_reads_only_results(path):
    """The report renders: it reads no data files and computes no statistics itself."""
    banned = ("guarddiag.data", "guarddiag.stats", "guarddiag.predictions",
              "guarddiag.files.read", "guarddiag.analyses.scores.compute",
              "guarddiag.sorry.balance", "guarddiag.sorry.robustness")
    bad = sorted(i for i in _imports(path) if i.startswith(banned))
    assert bad == []
