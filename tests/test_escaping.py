"""Every data-derived string that reaches the report is escaped, in HTML and in Markdown (issue 18).

Each place a saved table can put text on the page gets its own payload, an ``<img>`` with an
event handler and a ``data-leak`` attribute naming the place, so a failure says where markup got
through. The test also checks that every payload *reached* the page (as text), so a place that
silently stops being shown does not make the check vacuous. Benchmark ids are not among them:
manifest ids must match the manifest id pattern, so markup cannot arrive through them.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from synthetic_runs import COPY, study_like

from guarddiag import files
from guarddiag.cli import main


def payload(where: str) -> str:
    return f"<img src=x onerror=alert(1) data-leak={where}>"


SCRIPT = "</li></ul><script>document.title='leak'</script>"
PLACES = ("title", "outside_guard", "student_branch", "run_id", "unavailable_subset",
          "unavailable_reason", "example_prompt_id", "example_pool_id", "example_text",
          "pool_source")


def _inputs(root: Path) -> Path:
    preds, pool, summary = study_like(seed=7, texts={COPY: [payload("example_text")]})
    outside = pl.col("guard_kind") == "outside"
    preds = preds.with_columns(
        pl.when(outside).then(pl.lit(payload("outside_guard")))
        .when(pl.col("branch") == "E5").then(pl.lit("E5" + payload("student_branch")))
        .otherwise(pl.col("branch")).alias("branch"),
        pl.when(outside).then(pl.lit("guard/" + payload("run_id") + SCRIPT))
        .otherwise(pl.col("run_id")).alias("run_id"))
    # Two of the guard's copyright answers could not be parsed: the report lists the run id
    # in a bullet.
    failed_ids = preds.filter(outside & (pl.col("benchmark") == COPY))["prompt_id"][:2].to_list()
    hit = outside & (pl.col("benchmark") == COPY) & pl.col("prompt_id").is_in(failed_ids)
    preds = preds.with_columns(
        pl.when(hit).then(pl.lit("failed")).otherwise(pl.col("status")).alias("status"),
        pl.when(hit).then(None).otherwise(pl.col("p_unsafe")).alias("p_unsafe"))
    pool = pool.with_columns(
        pl.when(pl.col("source") == "src_a").then(pl.lit(payload("pool_source")))
        .otherwise(pl.col("source")).alias("source"))
    summary["unavailable"] = {"salad" + payload("unavailable_subset"):
                              "files absent " + payload("unavailable_reason") + SCRIPT}
    for entry in summary["benchmarks"].values():
        for ex in entry["examples"]:
            ex["prompt_id"] = "b-1" + payload("example_prompt_id")
            ex["pool_id"] = "tr-1" + payload("example_pool_id")
    work = root / "work"
    files.write_parquet(preds.filter(~outside), work / "runs" / "predictions.parquet")
    files.write_parquet(preds.filter(outside), work / "runs" / "outside" / "guard.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    files.write_json({"coarse_agreement": 0.9}, work / "pool" / "agreement.json")
    files.write_json(summary, work / "audit" / "summary.json")
    return work


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("escaping")
    work = _inputs(root)
    out = root / "out"
    assert main(["report", "--runs-dir", str(work / "runs"), "--pool",
                 str(work / "pool" / "pool.parquet"), "--audit-dir", str(work / "audit"),
                 "--out", str(out), "--bootstrap", "50",
                 "--title", "Report " + payload("title") + SCRIPT]) == 0
    return out


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def test_html_shows_every_payload_as_text(report_dir):
    page = _Page()
    page.feed((report_dir / "report.html").read_text(encoding="utf-8"))
    page.close()
    leaked = sorted({attrs["data-leak"] or "" for _, attrs in page.elements
                     if "data-leak" in attrs})
    assert leaked == [], f"markup got through from: {leaked}"
    assert "script" not in [tag for tag, _ in page.elements]
    assert not [(t, a) for t, a in page.elements if any(k.startswith("on") for k in a)]
    text = "".join(page.text)
    missing = [p for p in PLACES if payload(p) not in text]
    assert missing == [], f"never reached the page (test would be vacuous): {missing}"
    assert SCRIPT in text


def test_markdown_outside_code_has_no_raw_markup(report_dir):
    md = (report_dir / "report.md").read_text(encoding="utf-8")
    prose = "".join(md.split("```")[::2])  # outside fenced code blocks
    for raw in ("<img", "<script", "</li>", "</ul>"):
        assert raw not in prose, raw
    shown = md.replace("\\", "")  # Markdown escapes: outside\_guard
    # Folded tables (overlap examples, per-source overlap; issue 29) are not in report.md: it
    # links their CSVs, which hold the strings verbatim (HTML shows them, checked above).
    linked = "".join((report_dir / t).read_text(encoding="utf-8")
                     for t in re.findall(r"\]\((tables/[^)]+\.csv)\)", md))
    assert "(tables/overlap_examples_all.csv)" in md
    for place in PLACES:
        # shown (escaped) or linked, never dropped
        assert f"data-leak={place}" in shown + linked, place


def test_results_json_keeps_the_strings_verbatim(report_dir):
    # Escaping is for rendering only: the machine-readable results keep the exact input text.
    doc = json.loads((report_dir / "results.json").read_text(encoding="utf-8"))
    blob = json.dumps(doc, ensure_ascii=False)
    assert payload("outside_guard") in blob
    assert "&lt;img" not in blob
