"""A demo-shaped set of saved tables (every one of the 23 benchmark manifests, reference +
E1..E10 + teachers at three seeds each, one outside guard, an audit, run meta.json at a demo
size): for checks of how a report of the demo's size reads, without running the demo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from synthetic_runs import frame, rows_for, run_meta

from guarddiag import files

BENCHMARKS = (
    "advbench", "catqa_en", "donotanswer", "harmbench_contextual", "harmbench_copyright",
    "harmbench_standard", "harmfulqa", "jbb_benign", "jbb_harmful", "maliciousinstruct",
    "openai_moderation_flagged", "openai_moderation_unflagged", "orbench_hard", "orbench_toxic",
    "saladbench_attack", "saladbench_base", "saladbench_defense", "sorrybench", "strongreject",
    "wildguardtest_benign", "wildguardtest_harmful", "xstest_safe", "xstest_unsafe")
BRANCHES = ("reference", *(f"E{i}" for i in range(1, 11)), "T_A", "T_B")
A_LAST = {"E1", "E7", "E8", "E10", "T_A"}
N = 40


def write_demo_shaped(root: Path, *, seed: int = 1) -> Path:
    """Write runs/, audit/ under ``root``; return root. Every third benchmark carries a planted
    A-last shift of 30 points; every fifth prompt is an exact overlap."""
    rng = np.random.default_rng(seed)
    decontam = [i % 5 != 0 for i in range(N)]
    rows = []
    for b in BRANCHES:
        for s in (42, 43, 44):
            meta = run_meta("micro", b, s, policy="A" if b in A_LAST else "B")
            files.write_json({"run_id": meta["run_id"], "branch": b, "size": "micro",
                              "seed": s, "status": "finished",
                              "model": {"size": "micro", "n_params": 609_908,
                                        "checkpoint": None},
                              "spec": {"name": b, "train_rows": 8000},
                              "train": {"n_rows": 8000}},
                             root / "runs" / "micro" / b / f"seed={s}" / "meta.json")
            for k, bench in enumerate(BENCHMARKS):
                rate = 0.3 + 0.02 * k + (0.3 if (b in A_LAST and k % 3 == 0) else 0)
                u = np.where(rng.random(N) < rate, 0.8, 0.2)
                rows += rows_for(meta, bench, u.tolist(), decontam=decontam)
    meta = run_meta("outside", "toyguard", None, kind="outside", policy="outside")
    for bench in BENCHMARKS:
        rows += rows_for(meta, bench, np.where(rng.random(N) < .5, .7, .1).tolist(),
                         classes=False, decontam=decontam)
    files.write_parquet(frame(rows), root / "runs" / "predictions.parquet")
    files.write_json({
        "format": 1, "pool_rows": 1000, "near_dup": True, "threshold": 0.8,
        "normalisation": "NFKC", "benchmark_order": list(BENCHMARKS), "unavailable": {},
        "benchmarks": {b: {"n": N, "n_exact": 8, "pct_exact": 20.0, "n_near": 2,
                           "pct_near": 5.0, "n_kept": 32, "pct_removed": 20.0,
                           "sha256": f"{i:064x}",
                           "examples": [{"kind": kind, "prompt_id": f"{b}-{j}",
                                         "pool_id": f"p{j}", "similarity": 1.0,
                                         "benchmark_text": "a harmful prompt " * 8,
                                         "pool_text": "a pool row " * 10}
                                        for kind in ("exact", "near") for j in range(4)]}
                       for i, b in enumerate(BENCHMARKS)}}, root / "audit" / "summary.json")
    return root
