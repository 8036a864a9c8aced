"""A killed ``guarddiag demo`` resumes and reuses what it had finished (README, issue 18).

A tiny demo: the real pool recipe and policies, the 18 branch specs (13, three route-matched
controls, two α variants) with their budgets cut to a few hundred rows and one epoch (a
temporary GUARDDIAG_BRANCHES folder), one benchmark family (HarmBench's three subsets, through
a data folder of links), no seed floor and no mutations. The demo runs in a child process
(training two runs at a time) that is SIGKILLed as soon as its first training run (the
policy-A teacher) has finished; a second run
must then reuse the pool, the audit and that run, and finish with a report.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guarddiag import paths

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

BUDGET = {"train_rows": 240, "val_rows": 60, "epochs": 1, "evals_per_epoch": 1}
FIRST_RUN = Path("runs") / "tiny" / "T_A" / "seed=42"


def _tiny_branches(folder: Path) -> Path:
    folder.mkdir()
    for spec in sorted(paths.branches_dir().glob("*.yaml")):
        text = spec.read_text(encoding="utf-8")
        for key, value in BUDGET.items():
            text, n = re.subn(rf"^{key}:\s*\S+", f"{key}: {value}", text, flags=re.M)
            assert n == 1, (spec.name, key)
        (folder / spec.name).write_text(text, encoding="utf-8")
    return folder


def _data_dir(real: Path, folder: Path) -> Path:
    (folder / "benchmarks").mkdir(parents=True)
    (folder / "pools").symlink_to(real / "pools", target_is_directory=True)
    (folder / "benchmarks" / "harmbench").symlink_to(real / "benchmarks" / "harmbench",
                                                     target_is_directory=True)
    return folder


def _finished(run_dir: Path) -> bool:
    meta = run_dir / "meta.json"
    try:
        return json.loads(meta.read_text(encoding="utf-8")).get("status") == "finished"
    except (OSError, ValueError):
        return False


def _demo(tmp: Path, env: dict[str, str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "guarddiag", "demo", "--data-dir", str(tmp / "data"),
           "--work-dir", str(tmp / "work"), "--out", str(tmp / "report"),
           "--size", "micro", "--floor-seeds", "", "--mutations", "", "--bootstrap", "50"]
    return subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_killed_demo_resumes_and_reuses_finished_stages(tmp_path, real_data_dir):
    env = {**os.environ, "GUARDDIAG_BRANCHES": str(_tiny_branches(tmp_path / "branches")),
           "GUARDDIAG_PROGRESS": "0", "OMP_NUM_THREADS": "1"}
    _data_dir(real_data_dir, tmp_path / "data")
    work = tmp_path / "work"

    first = _demo(tmp_path, env)
    deadline = time.monotonic() + 900
    while not _finished(work / FIRST_RUN):
        assert first.poll() is None, f"demo ended before the kill:\n{first.communicate()[0]}"
        assert time.monotonic() < deadline, "first training run did not finish in 15 min"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not (tmp_path / "report" / "report.html").exists()  # killed mid-way

    pool = (work / "pool" / "pool.parquet").read_bytes()
    summary = work / "audit" / "summary.json"
    audit_mtime = summary.stat().st_mtime_ns
    model = work / FIRST_RUN / "model.safetensors"
    model_bytes, model_mtime = model.read_bytes(), model.stat().st_mtime_ns

    second = _demo(tmp_path, env)
    log = second.communicate(timeout=900)[0]
    assert second.returncode == 0, log[-3000:]
    assert (work / "pool" / "pool.parquet").read_bytes() == pool
    assert summary.stat().st_mtime_ns == audit_mtime          # audit reused, not redone
    assert model.stat().st_mtime_ns == model_mtime            # finished run not retrained
    assert model.read_bytes() == model_bytes
    timings = json.loads((work / "demo_timings.json").read_text(encoding="utf-8"))
    status = {r["run_id"]: r["status"] for r in timings["runs"]}
    assert status["tiny/T_A/seed=42"] == "skipped"
    assert len(status) == 18                                 # every bundled spec
    assert all(_finished(work / "runs" / rid) for rid in status)
    assert (tmp_path / "report" / "report.html").is_file()
    assert (tmp_path / "report" / "results.json").is_file()
