"""The committed example report (reports/example/) is complete: every file its Markdown links
and every resource or anchor its HTML refers to exists, and its results.json is there and
validates against the checked-in schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

from guarddiag.report.schema import SCHEMA_VERSION, validate_results

EXAMPLE = Path(__file__).resolve().parents[1] / "reports" / "example"


def _md_targets(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _html_refs(text: str) -> list[str]:
    return re.findall(r"""(?:href|src)="([^"]*)\"""", text)


def test_markdown_links_point_at_files_that_exist():
    md = (EXAMPLE / "report.md").read_text(encoding="utf-8")
    targets = [t for t in _md_targets(md) if not t.startswith(("http://", "https://", "#"))]
    assert targets, "the example report.md links no figure"
    missing = sorted({t for t in targets if not (EXAMPLE / t).is_file()})
    assert missing == []


def test_html_refers_only_to_embedded_data_and_its_own_anchors():
    html = (EXAMPLE / "report.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', html))
    refs = _html_refs(html)
    assert any(r.startswith("data:image/png;base64,") for r in refs)
    for ref in refs:
        if ref.startswith("#"):
            assert ref[1:] in ids, f"anchor {ref} has no target"
        else:
            assert ref.startswith("data:"), f"external reference {ref[:60]}"


def test_results_json_is_committed_and_valid():
    results = json.loads((EXAMPLE / "results.json").read_text(encoding="utf-8"))
    assert results["schema_version"] == SCHEMA_VERSION
    assert validate_results(results) == []


def test_the_link_checks_can_fail(tmp_path):
    # The helpers above see a link and an anchor: a report that links a missing file or an
    # unknown anchor would fail the tests above.
    assert _md_targets("see ![x](figures/a.png) and [t](tables/b.csv)") == [
        "figures/a.png", "tables/b.csv"]
    assert _html_refs('<a href="#nope">x</a><img src="data:image/png;base64,AAAA">') == [
        "#nope", "data:image/png;base64,AAAA"]
