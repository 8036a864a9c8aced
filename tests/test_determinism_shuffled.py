"""The report does not depend on input row order (issue 18).

The same saved tables are written twice to the same paths, the second time with every table's
rows shuffled (predictions, the outside guard's file, the pool) and the audit summary's
benchmarks in reverse order. Every output must be byte-identical except the input digests
(results.json's and meta.json's ``inputs``), which name the differently ordered files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
from synthetic_runs import study_like

from guarddiag import files
from guarddiag.cli import main


def _write(work: Path, *, shuffle: bool) -> None:
    preds, pool, summary = study_like(seed=11)
    if shuffle:
        preds = preds.sample(fraction=1.0, shuffle=True, seed=1)
        pool = pool.sample(fraction=1.0, shuffle=True, seed=2)
        summary["benchmarks"] = dict(reversed(list(summary["benchmarks"].items())))
    outside = pl.col("guard_kind") == "outside"
    files.write_parquet(preds.filter(~outside), work / "runs" / "predictions.parquet")
    files.write_parquet(preds.filter(outside), work / "runs" / "outside" / "toyguard.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    files.write_json({"coarse_agreement": 0.9}, work / "pool" / "agreement.json")
    files.write_json(summary, work / "audit" / "summary.json")


def _report(work: Path, out: Path) -> None:
    assert main(["report", "--runs-dir", str(work / "runs"), "--pool",
                 str(work / "pool" / "pool.parquet"), "--audit-dir", str(work / "audit"),
                 "--out", str(out), "--bootstrap", "100"]) == 0


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _without_digests(doc):
    """The inputs block with every sha256 value blanked (paths and roles kept)."""
    if isinstance(doc, dict):
        return {k: "-" if k == "sha256" else _without_digests(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_without_digests(v) for v in doc]
    return doc


def test_shuffled_rows_give_identical_outputs(tmp_path):
    work = tmp_path / "work"
    _write(work, shuffle=False)
    _report(work, tmp_path / "first")
    shutil.rmtree(work)
    _write(work, shuffle=True)
    _report(work, tmp_path / "second")
    first, second = _tree(tmp_path / "first"), _tree(tmp_path / "second")
    assert sorted(first) == sorted(second)
    assert len(first) > 10
    meta_a = json.loads(first.pop("meta.json"))
    meta_b = json.loads(second.pop("meta.json"))
    assert meta_a.pop("inputs") != meta_b.pop("inputs")  # the files' bytes did change
    assert meta_a == meta_b
    res_a = json.loads(first.pop("results.json"))
    res_b = json.loads(second.pop("results.json"))
    assert _without_digests(res_a.pop("inputs")) == _without_digests(res_b.pop("inputs"))
    assert json.dumps(res_a) == json.dumps(res_b)  # same values in the same order
    different = [name for name in first if first[name] != second[name]]
    assert different == []
