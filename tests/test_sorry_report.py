"""The SORRY-Bench report sections plugged into `guarddiag.report` on synthetic predictions."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag import files
from guarddiag.data import load_benchmark
from guarddiag.report import SORRY_SECTIONS, ReportOptions, make_report, with_sections
from guarddiag.sorry.mutate import _write_subset, mutate_frame


@pytest.mark.realdata
def test_sorry_sections_in_the_report(real_data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the report reads derived manifests from work/derived
    derived = tmp_path / "work" / "derived"
    base = load_benchmark("sorrybench", data_dir=real_data_dir)
    caesar = mutate_frame(base, "caesar").frame
    _write_subset(caesar, subset_id="sorrybench__caesar", base="sorrybench", mutation="caesar",
                  kind="harmful", title="t", derived_dir=derived, notes="n")
    ids = base["prompt_id"].to_list()
    domain_of = {str(n): ("advice" if n > 40 else "other") for n in range(1, 46)}
    advice = np.array([domain_of[c] == "advice" for c in base["category"]])
    rows = []
    # E1 (policy A last) blocks everything; E2 lets the 50 advice prompts through. Both miss
    # every Caesar prompt.
    for branch, p in (("E1", np.full(450, 0.9)), ("E2", np.where(advice, 0.1, 0.9))):
        meta = run_meta("micro", branch, 42)
        rows += rows_for(meta, "sorrybench", p.tolist(), ids=ids)
        rows += rows_for(meta, "sorrybench__caesar", [0.1] * 450, ids=ids)
    preds = frame(rows)
    files.write_parquet(preds, tmp_path / "work" / "runs" / "predictions.parquet")
    out = tmp_path / "out"
    opts = ReportOptions(runs_dir=tmp_path / "work" / "runs", pool_path=None, audit_dir=None,
                         out_dir=out, n_resamples=200, data_dir=real_data_dir,
                         derived_dir=derived)
    make_report(opts, sections=with_sections(SORRY_SECTIONS))
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    ids_in_order = [s["id"] for s in res["sections"]]
    assert ids_in_order[-4:] == ["sorry_categories", "sorry_robustness", "sorry_balance",
                                 "disclosure"]
    assert all(s["omitted"] is None for s in res["sections"] if s["id"].startswith("sorry"))
    doms = {(d["entity"], d["domain"]): d["capture"]
            for d in res["results"]["sorry_categories"]["domains"]}
    assert doms[("micro/E2", "advice")] == 0.0
    assert doms[("micro/E2", "hate")] == 1.0
    assert doms[("micro/E1", "advice")] == 1.0
    rob = {r["run_id"]: r for r in res["results"]["sorry_robustness"]["rows"]}
    assert rob["micro/E1/seed=42"]["delta"] == pytest.approx(-1.0)
    # E2: base capture 400/450, mutated 0 -> delta -400/450.
    assert rob["micro/E2/seed=42"]["delta"] == pytest.approx(-400 / 450)
    # SORRY-Bench has 10 prompts per category: fewer than 30, so no category is ranked
    # (issue 29); all 45 are listed, marked, in domain and name order, with their spans.
    assert not (out / "tables" / "sorry_policy_sensitive.csv").exists()
    small = pl.read_csv(out / "tables" / "sorry_small_categories.csv")
    assert small.height == 45
    assert (small["n"] == 10).all()
    assert set(small["mark"].to_list()) == {"< 30 prompts: not ranked"}
    assert small.select("domain", "category").rows() == sorted(
        small.select("domain", "category").rows())
    moved = small.filter(pl.col("span") > 0)["category"].str.slice(0, 3).to_list()
    assert set(moved) == {"41.", "42.", "43.", "44.", "45."}
    for name in ("sorry_categories", "sorry_robustness", "sorry_balance"):
        assert (out / "figures" / f"{name}.png").is_file()


@pytest.mark.realdata
def test_predictions_of_another_copy_omit_the_categories_with_the_reason(real_data_dir,
                                                                          tmp_path):
    # Scored on sorrybench, but none of the ids is in the data file (another copy or version):
    # no empty breakdown, no empty heat map; the section says why it is missing.
    rows = rows_for(run_meta("micro", "E1", 42), "sorrybench", [0.9] * 12,
                    ids=[f"elsewhere-{i}" for i in range(12)])
    files.write_parquet(frame(rows), tmp_path / "runs" / "predictions.parquet")
    out = tmp_path / "out"
    make_report(ReportOptions(runs_dir=tmp_path / "runs", pool_path=None, audit_dir=None,
                              out_dir=out, n_resamples=50, data_dir=real_data_dir),
                sections=with_sections(SORRY_SECTIONS))
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cats = next(s for s in res["sections"] if s["id"] == "sorry_categories")
    n_file = load_benchmark("sorrybench", data_dir=real_data_dir).height
    assert cats["omitted"] == (
        f"none of the 12 prompt ids predicted on sorrybench is in its data file ({n_file:,} "
        "prompts): the predictions came from another copy of sorrybench (run guarddiag "
        "predict again)")
    assert not (out / "figures" / "sorry_categories.png").exists()
