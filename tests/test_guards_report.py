"""Acceptance: a predictions-file guard and a loopback-endpoint guard, scored by
``guards score`` into runs/outside/, appear in the rendered report's outside-guard table next to
the branches, on the same decontaminated prompts."""

from __future__ import annotations

import json

import polars as pl
import pytest
from guards_support import ScriptedServer, user_text
from synthetic_runs import KINDS, study_like

from guarddiag import files
from guarddiag.cli import main
from guarddiag.guards import get_adapter, score_guard


def _script(body, n):
    # The toy endpoint guard: prompts whose id ends in an even digit are unsafe.
    text = user_text(body)
    if int(text[-1]) % 2 == 0:
        return "Safety: Unsafe\nCategories: Violent"
    return "Safety: Controversial\nCategories: None" if text[-1] == "1" else \
        "Safety: Safe\nCategories: None"


def test_outside_guards_appear_next_to_branches_in_the_report(tmp_path):
    preds, pool, summary = study_like(seed=4, with_guard=False)
    work = tmp_path / "work"
    files.write_parquet(preds, work / "runs" / "predictions.parquet")
    files.write_parquet(pool, work / "pool" / "pool.parquet")
    audit = work / "audit"
    files.write_json(summary, audit / "summary.json")
    frames = {}
    for bench, kind in KINDS.items():
        rows = preds.filter(pl.col("benchmark") == bench).select(
            "prompt_id", "survives_decontam").unique().sort("prompt_id")
        kept = rows.filter(pl.col("survives_decontam"))["prompt_id"].to_list()
        (audit / "decontaminated").mkdir(parents=True, exist_ok=True)
        (audit / "decontaminated" / f"{bench}.txt").write_text("\n".join(kept) + "\n",
                                                                encoding="utf-8")
        frames[bench] = pl.DataFrame({"benchmark": bench, "prompt_id": rows["prompt_id"],
                                      "text": [f"prompt text {p}" for p in rows["prompt_id"]],
                                      "label_kind": kind})
    # A team's guard run elsewhere, as a CSV of labels.
    csv = tmp_path / "team_guard.csv"
    pl.DataFrame({
        "benchmark": [b for b, f in frames.items() for _ in range(f.height)],
        "prompt_id": [p for f in frames.values() for p in f["prompt_id"]],
        "label": [("unsafe", "safe")[i % 2] for i in range(sum(f.height for f in
                                                             frames.values()))],
    }).write_csv(csv)
    runs = work / "runs"
    file_result = score_guard(get_adapter("file", file=str(csv)), frames=frames, runs_dir=runs,
                              audit_dir=audit)
    # A team benchmark scored earlier whose manifest is gone now (another
    # GUARDDIAG_USER_MANIFESTS, a removed file): reported and left out, never a failure.
    gone = pl.DataFrame({"benchmark": "team_gone", "prompt_id": ["1", "2"],
                         "text": ["a", "b"], "label_kind": "harmful"})
    score_guard(get_adapter("callable", function=lambda texts: [0.9] * len(texts),
                            name="gone_guard"),
                frames={"team_gone": gone}, runs_dir=runs, audit_dir=audit, version="v7")
    with ScriptedServer(_script) as server:
        endpoint = get_adapter("qwen3guard", endpoint=f"{server.base_url}#Qwen/Qwen3Guard-Gen-4B")
        endpoint_result = score_guard(endpoint, frames=frames, runs_dir=runs, audit_dir=audit)
    assert file_result.n_failed == endpoint_result.n_failed == 0

    out = tmp_path / "report"
    assert main(["report", "--runs-dir", str(runs), "--pool", str(work / "pool" / "pool.parquet"),
                 "--audit-dir", str(audit), "--out", str(out), "--bootstrap", "50"]) == 0
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = res["results"]["outside"]["rows"]
    guards = {r["entity"] for r in rows if r["kind"] == "outside"}
    assert guards == {"team_guard", "qwen3guard-gen-4b"}
    assert {r["kind"] for r in rows} == {"outside", "branch"}
    for bench in KINDS:
        mine = [r for r in rows if r["benchmark"] == bench and r["kind"] == "outside"]
        assert {r["entity"] for r in mine} == guards
        # Same decontaminated prompts as the branches: 30 of 40 survive (every 4th removed).
        assert {r["n_scored"] for r in mine} == {30}
    # The endpoint guard's strict read-out counts Controversial; loose does not.
    q = {(r["benchmark"], r["mapping"]): r["score"] for r in rows
         if r["entity"] == "qwen3guard-gen-4b"}
    table = pl.read_parquet(endpoint_result.table_path).filter(pl.col("survives_decontam"))
    for bench in KINDS:
        part = table.filter(pl.col("benchmark") == bench)
        loose = (part["p_unsafe"] >= 0.5).mean()
        strict = ((part["p_HARMFUL"] + part["p_BOUNDARY_SAFE"]) >= 0.5).mean()
        assert q[(bench, "loose")] == pytest.approx(loose)
        assert q[(bench, "strict")] == pytest.approx(strict)
    assert "team_gone" not in {r["benchmark"] for r in rows}
    assert any(n.startswith("scored earlier, manifest not found: team_gone")
               for n in res["notes"])
    # When and from which identity each guard's answers were computed.
    answers = res["results"]["outside"]["answers"]
    assert set(answers) == {"guard/team_guard", "guard/qwen3guard-gen-4b"}
    team_meta = json.loads((runs / "outside" / "team_guard.meta.json").read_text())
    assert answers["guard/team_guard"]["fingerprint"] == team_meta["fingerprint"]
    assert answers["guard/team_guard"]["first"] == team_meta["answers_computed"]["first"]
    assert answers["guard/team_guard"]["model_sha256"] == files.sha256_file(csv)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert f"identity {team_meta['fingerprint']}" in md
    assert "scored earlier, manifest not found: team\\_gone" in md
    assert "team\\_guard" in md  # Markdown escapes the underscore
    assert "qwen3guard-gen-4b" in md

