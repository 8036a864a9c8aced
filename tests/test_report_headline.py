"""The report's first screen says what was measured (issue 17, issue 29): sizes, parameter counts,
checkpoint and training rows from each run's meta.json, and a do-not-cite banner whenever the
branches are demo sizes (decided by the size registry)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag import files
from guarddiag.cli import main
from guarddiag.model.sizes import CPU_SIZES, SIZES
from guarddiag.report.schema import validate_results

BANNER = "Demo-size models: do not cite these verdicts."


def _work(root: Path, *, size: str, n_params: int, checkpoint: str | None,
          rows: dict[str, int]) -> Path:
    runs = root / "runs"
    preds = []
    for branch, n_rows in rows.items():
        meta = run_meta(size, branch, 42)
        preds += rows_for(meta, "harmbench_standard", [0.9, 0.1, 0.8, 0.2])
        files.write_json({"run_id": meta["run_id"], "branch": branch, "size": size, "seed": 42,
                          "label_policy": "B", "status": "finished",
                          "model": {"size": size, "n_params": n_params,
                                    "checkpoint": checkpoint},
                          "spec": {"name": branch, "train_rows": 8000},
                          "train": {"n_rows": n_rows}},
                         runs / size / branch / "seed=42" / "meta.json")
    files.write_parquet(frame(preds), runs / "predictions.parquet")
    return runs


def _report(runs: Path, out: Path) -> tuple[dict, str, str]:
    assert main(["report", "--runs-dir", str(runs), "--pool", str(runs / "no.parquet"),
                 "--audit-dir", str(runs / "no"), "--out", str(out), "--bootstrap", "50"]) == 0
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert validate_results(res) == []
    return (res, (out / "report.md").read_text(encoding="utf-8"),
            (out / "report.html").read_text(encoding="utf-8"))


def test_demo_sizes_open_with_the_banner_and_their_provenance(tmp_path):
    assert "micro" in CPU_SIZES  # the registry's demo sizes; the test follows it
    runs = _work(tmp_path, size="micro", n_params=609_908, checkpoint=None,
                 rows={"reference": 8000, "E1": 1272})
    res, md, html = _report(runs, tmp_path / "out")
    first = md.split("## What was run and what it says", 1)[1].split("\n## ", 1)[0]
    assert first.lstrip().startswith(f"> **{BANNER}")  # the banner opens the first screen
    assert "**Cite: nothing about guards — these are demo-size models" in first
    assert res["results"]["first_screen"]["cite"].startswith("Cite: nothing about guards")
    summary = md.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    assert BANNER not in summary  # once, on the first screen
    assert ("micro: 2 branch runs (reference, E1), 0.61 M parameters, random init, trained on "
            "1,272–8,000 rows — demo size") in summary
    disclosure = md.split("## Disclosure card", 1)[1]
    assert BANNER in disclosure
    assert f'<p class="banner">{BANNER}' in html
    prov = res["results"]["summary"]["provenance"]
    assert prov["demo"] is True
    (row,) = prov["sizes"]
    assert (row["n_params_min"], row["train_rows_min"], row["train_rows_max"]) == (
        609_908, 1272, 8000)
    assert row["checkpoint"] == "random init"
    assert res["results"]["disclosure"]["provenance"] == prov


@pytest.mark.parametrize("size", [s for s in SIZES if s not in CPU_SIZES][:1])
def test_a_pretrained_size_gets_no_banner(tmp_path, size):
    runs = _work(tmp_path, size=size, n_params=149_000_000,
                 checkpoint=SIZES[size].pretrained or "local/ckpt", rows={"reference": 50_000})
    res, md, _ = _report(runs, tmp_path / "out")
    assert BANNER not in md
    assert res["results"]["summary"]["provenance"]["demo"] is False
    assert "149.00 M parameters" in md


def test_runs_without_meta_say_so(tmp_path):
    runs = tmp_path / "runs"
    files.write_parquet(frame(rows_for(run_meta("micro", "reference", 42),
                                       "harmbench_standard", [0.9, 0.1])),
                        runs / "predictions.parquet")
    res, md, _ = _report(runs, tmp_path / "out")
    assert res["results"]["summary"]["provenance"] is None
    assert "no run meta.json was found" in md
