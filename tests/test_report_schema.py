"""results.json's schema as code: the checked-in JSON Schema is the generated one, the
validator catches what it should, and the report package only renders (its imports)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from guarddiag.report import SCHEMA_VERSION
from guarddiag.report.schema import SCHEMA_PATH, json_schema, json_schema_text
from guarddiag.report.schema_check import validate_json

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "guarddiag" / "report"


def test_checked_in_schema_is_the_generated_one():
    # Regenerate with: python -c "from guarddiag.report.schema import write_json_schema as w; w()"
    assert SCHEMA_PATH.read_text(encoding="utf-8") == json_schema_text()


def test_schema_names_every_default_section_and_the_version():
    schema = json_schema()
    root = schema["$defs"]["ResultsJson"]
    assert root["properties"]["schema_version"] == {"enum": [SCHEMA_VERSION]}
    sections = schema["$defs"]["SectionResultsJson"]
    assert sections["required"] == []
    assert set(sections["properties"]) == {
        "summary", "contamination", "scores", "load", "rank", "mapping", "outside",
        "threshold_free", "correlation", "val", "pool", "study", "disclosure", "sorry_categories",
        "sorry_robustness", "sorry_balance", "distill"}


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


def test_validator_accepts_a_minimal_file():
    assert validate_json(_minimal()) == []


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.update(schema_version=True),
     f"$.schema_version: True is not one of [{SCHEMA_VERSION}]"),
    (lambda r: r["options"].update(seed=1.5), "$.options.seed: expected integer, got float"),
    (lambda r: r["options"].update(seed=False), "$.options.seed: expected integer, got bool"),
    (lambda r: r["options"].pop("mapping"), "$.options: missing key 'mapping'"),
    (lambda r: r["inputs"].update(extra=1), "$.inputs: unexpected key 'extra'"),
    (lambda r: r["options"].update(rank_tail="up"),
     "$.options.rank_tail: 'up' is not one of ['top', 'bottom', 'either']"),
    (lambda r: r["inputs"].update(pool="p"),
     "$.inputs.pool: 'p' matches none of the allowed shapes"),
    (lambda r: r["results"].update(val={"overlap": [{"lang": ["en"]}]}),
     "$.results.val.overlap[0].lang: ['en'] matches none of the allowed shapes"),
])
def test_validator_names_each_problem(change, message):
    res = _minimal()
    change(res)
    assert validate_json(res) == [message]


def test_example_report_follows_the_schema():
    path = REPO / "reports" / "example" / "results.json"
    if not path.is_file():
        pytest.skip("reports/example/results.json is not in this checkout")
    assert validate_json(json.loads(path.read_text(encoding="utf-8"))) == []


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
