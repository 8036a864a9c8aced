"""Exports (issue 15): decontaminated subsets as JSONL and a Hugging Face datasets folder, and
the disclosure card as model-card YAML."""

from __future__ import annotations

import json

import datasets
import polars as pl
import pytest
import yaml
from synthetic_runs import study_like

import guarddiag
from guarddiag import files
from guarddiag.cli import main
from guarddiag.data import load_benchmarks
from guarddiag.errors import GuarddiagError
from guarddiag.export_options import CardOptions
from guarddiag.exports import export_card, export_decontaminated
from guarddiag.spec import SpecError


@pytest.fixture(scope="module")
def audited(real_data_dir, tmp_path_factory):
    """An audit of a pool holding 7 xstest_safe prompts verbatim (case changed) and noise."""
    root = tmp_path_factory.mktemp("export")
    safe = load_benchmarks(["xstest_safe"], data_dir=real_data_dir).frames["xstest_safe"]
    copied = safe["text"].to_list()[10:17]
    texts = [t.upper() for t in copied] + [f"unrelated training row number {i}" for i in range(20)]
    pool = root / "pool.csv"
    pl.DataFrame({"prompt_id": [f"r{i}" for i in range(len(texts))], "text": texts}
                 ).write_csv(pool)
    guarddiag.run_audit(pool, benchmarks=["xstest_safe", "xstest_unsafe"], out=root / "audit",
                        data_dir=real_data_dir)
    removed = set(safe["prompt_id"].to_list()[10:17])
    return root, removed


def test_jsonl_and_hf_folder_hold_exactly_the_surviving_prompts(audited, real_data_dir):
    root, removed = audited
    result = export_decontaminated(root / "audit", out=root / "out", data_dir=real_data_dir)
    assert result.rows == {"xstest_safe": 250 - len(removed), "xstest_unsafe": 200}
    lines = (root / "out" / "xstest_safe.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    ids = {r["prompt_id"] for r in rows}
    assert len(rows) == 243
    assert not ids & removed
    assert set(rows[0]) >= {"benchmark", "prompt_id", "text", "label_kind"}
    hf = datasets.load_from_disk(str(root / "out" / "hf"))
    assert sorted(hf) == ["xstest_safe", "xstest_unsafe"]
    assert hf["xstest_safe"].num_rows == 243
    assert set(hf["xstest_safe"]["prompt_id"]) == ids
    manifest = files.read_json(root / "out" / "manifest.json")
    assert manifest["sha256"]["xstest_safe.jsonl"] == files.sha256_file(
        root / "out" / "xstest_safe.jsonl")


def test_same_audit_same_bytes(audited, real_data_dir, tmp_path):
    root, _ = audited
    for name in ("a", "b"):
        assert main(["export", "decontaminated", "--audit-dir", str(root / "audit"),
                     "--out", str(tmp_path / name), "--data-dir", str(real_data_dir)]) == 0
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert a == b
    for rel in a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_missing_audit_is_one_line(tmp_path):
    with pytest.raises(GuarddiagError, match=r"no summary.json; run `guarddiag audit` first"):
        export_decontaminated(tmp_path, out=tmp_path / "o")


def test_card_carries_the_reports_calls_and_counts(tmp_path):
    preds, pool, summary = study_like(seed=5)
    work = tmp_path / "work"
    files.write_parquet(preds, work / "runs" / "predictions.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    files.write_json({"coarse_agreement": 0.9}, work / "pool" / "agreement.json")
    files.write_json(summary, work / "audit" / "summary.json")
    assert main(["report", "--work-dir", str(work), "--out", str(tmp_path / "rep"),
                 "--bootstrap", "200"]) == 0
    result = export_card(tmp_path / "rep")
    card = yaml.safe_load((tmp_path / "rep" / "card.yaml").read_text(encoding="utf-8"))
    doc = files.read_json(tmp_path / "rep" / "results.json")
    summary_out = doc["results"]["summary"]
    assert card["guarddiag"]["calls_by_word"] == summary_out["calls"]
    first = {r["benchmark"]: r["call"] for r in doc["results"]["first_screen"]["calls"]}
    by_name = {b["benchmark"]: b for b in card["guarddiag"]["benchmarks"]}
    # The audit summary says 40 prompts with 10 exact overlaps each (see synthetic_runs).
    for entry in by_name.values():
        assert entry["n"] == 40
        assert entry["n_kept"] == 30
        assert entry["share_exact"] == pytest.approx(0.25)
        assert entry["call"] == first[entry["benchmark"]]    # the first screen's, one verdict
        assert "load" not in entry
        assert "load_study" not in entry
    assert result.to_frame().height == len(by_name)
    # The options object whole, or its field by name: the same card, where it says.
    whole = export_card(tmp_path / "rep", CardOptions(out=tmp_path / "a.yaml"))
    named = export_card(tmp_path / "rep", out=tmp_path / "b.yaml")
    assert (whole.path, named.path) == (tmp_path / "a.yaml", tmp_path / "b.yaml")
    assert whole.path.read_bytes() == named.path.read_bytes() \
        == (tmp_path / "rep" / "card.yaml").read_bytes()
    with pytest.raises(SpecError, match='field "outt"'):
        export_card(tmp_path / "rep", outt=tmp_path / "c.yaml")
