"""The report's distillation-weight table and VAL parts: in results.json (valid against the
schema), in the Markdown, and the variant nowhere else."""

from __future__ import annotations

import json

import polars as pl
from synthetic_runs import study_like
from test_analyses_variants import _variant_rows

from guarddiag import files
from guarddiag.cli import main
from guarddiag.report.schema import validate_results


def test_distill_table_and_val_parts_in_the_report(tmp_path):
    preds, pool, summary = study_like(seed=4, with_guard=False)
    preds = pl.concat([preds, _variant_rows("E6-a05", copy_unsafe=12, val_correct=9)])
    work = tmp_path / "work"
    files.write_parquet(preds, work / "runs" / "predictions.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    files.write_json(summary, work / "audit" / "summary.json")
    out = tmp_path / "out"
    assert main(["report", "--runs-dir", str(work / "runs"), "--pool",
                 str(work / "pool" / "pool.parquet"), "--audit-dir", str(work / "audit"),
                 "--out", str(out), "--bootstrap", "50"]) == 0
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert validate_results(doc) == []
    rows = doc["results"]["distill"]["rows"]
    assert {(r["base"], r["variant"]) for r in rows} == {("E6", "E6-a05")}
    assert [r["variant_score"] for r in rows if r["benchmark"] == "VAL"] == [9 / 15]
    # Nowhere else: not in the scores, the load table, the rank test or the correlation.
    text = json.dumps({k: v for k, v in doc["results"].items() if k != "distill"})
    assert "E6-a05" not in text
    parts = doc["results"]["val"]["parts"]
    assert [r["n_rows"] for r in parts["rows"]] == [15, 15, 3, 12]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Distillation-weight sensitivity" in md
    # A folded appendix table: linked from report.md, shown (folded) in the HTML.
    assert "(tables/distill_sensitivity.csv)" in md
    assert "E6-a05" in (out / "report.html").read_text(encoding="utf-8")
    assert (out / "tables" / "distill_sensitivity.csv").is_file()
    assert (out / "tables" / "val_parts.csv").is_file()
