"""Robustness table: capture change per mutation, paired by base prompt, cluster bootstrap."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from synthetic_runs import frame, rows_for, run_meta

from guarddiag.errors import GuarddiagError
from guarddiag.sorry.robustness import measure_robustness

IDS = ["a", "b", "c", "d"]


def _derived(ids, bases, mutation="caesar"):
    return pl.DataFrame({"prompt_id": ids, "base_prompt_id": bases,
                         "mutation": [mutation] * len(ids)})


def test_delta_by_hand():
    e1, e2 = run_meta("micro", "E1", 42), run_meta("micro", "E2", 42)
    rows = []
    rows += rows_for(e1, "sorrybench", [0.9, 0.9, 0.9, 0.1], ids=IDS)
    rows += rows_for(e1, "sorrybench__caesar", [0.1, 0.9, 0.1, 0.1], ids=IDS)
    rows += rows_for(e2, "sorrybench", [0.9, 0.1, 0.9, 0.1], ids=IDS)
    rows += rows_for(e2, "sorrybench__caesar", [0.9, 0.1, 0.9, 0.1], ids=IDS)
    res = measure_robustness(frame(rows), {"sorrybench__caesar": _derived(IDS, IDS)},
                             n_resamples=500, seed=1)
    t = res.to_frame()
    assert t["run_id"].to_list() == ["micro/E1/seed=42", "micro/E2/seed=42"]
    r1 = t.row(0, named=True)
    # base 3/4 unsafe, mutated 1/4 -> delta -1/2.
    assert (r1["capture_base"], r1["capture_mutated"], r1["delta"]) == (0.75, 0.25, -0.5)
    assert r1["n"] == 4
    assert r1["mutation"] == "caesar"
    assert r1["base_benchmark"] == "sorrybench"
    assert r1["delta_low"] <= -0.5 <= r1["delta_high"] <= 0.0
    r2 = t.row(1, named=True)
    # Unchanged decisions on every prompt: the paired interval collapses to 0.
    assert (r2["delta"], r2["delta_low"], r2["delta_high"]) == (0.0, 0.0, 0.0)
    table = res.table()
    assert table.columns == ["run_id", "capture_base_pct", "caesar"]
    assert table["caesar"][0].startswith("-50.0 [")
    # Same inputs, same numbers.
    again = measure_robustness(frame(rows), {"sorrybench__caesar": _derived(IDS, IDS)},
                               n_resamples=500, seed=1)
    assert again.to_frame().equals(t)


def test_pairs_only_prompts_present_on_both_sides():
    e1 = run_meta("micro", "E1", 42)
    rows = rows_for(e1, "sorrybench", [0.9, 0.9, 0.9, 0.9], ids=IDS)
    # Prompt d had an empty rewrite: no mutated row.
    rows += rows_for(e1, "sorrybench__slang", [0.1, 0.1, 0.9], ids=IDS[:3])
    res = measure_robustness(frame(rows), {"sorrybench__slang": _derived(IDS[:3], IDS[:3],
                                                                         "slang")},
                             n_resamples=200)
    r = res.to_frame().row(0, named=True)
    assert r["n"] == 3
    assert r["capture_base"] == 1.0
    assert r["capture_mutated"] == pytest.approx(1 / 3)


def test_cluster_bootstrap_matches_a_brute_force_oracle():
    """Two variants per base prompt; resampling base prompts, checked against a plain loop."""
    rng = np.random.default_rng(0)
    n = 40
    base_ids = [f"q{i}" for i in range(n)]
    b = (rng.random(n) < 0.8).astype(float)
    v1 = (rng.random(n) < 0.5).astype(float)
    v2 = (rng.random(n) < 0.5).astype(float)
    meta = run_meta("micro", "E1", 42)
    mut_ids = [f"{q}-{k}" for q in base_ids for k in (1, 2)]
    mut_p = [0.9 if x else 0.1 for pair in zip(v1, v2, strict=True) for x in pair]
    rows = rows_for(meta, "sorrybench", [0.9 if x else 0.1 for x in b], ids=base_ids)
    rows += rows_for(meta, "sorrybench__misspell", mut_p, ids=mut_ids)
    derived = _derived(mut_ids, [q for q in base_ids for _ in (1, 2)], "misspell")
    res = measure_robustness(frame(rows), {"sorrybench__misspell": derived},
                             n_resamples=4000, seed=7)
    r = res.to_frame().row(0, named=True)
    per_base = (v1 + v2) / 2 - b
    assert r["delta"] == pytest.approx(per_base.mean())
    # Oracle: resample whole base prompts (both variants move together), 4,000 times.
    oracle_rng = np.random.default_rng(12345)
    draws = np.array([per_base[oracle_rng.integers(0, n, n)].mean() for _ in range(4000)])
    lo, hi = np.quantile(draws, [0.025, 0.975])
    assert r["delta_low"] == pytest.approx(lo, abs=0.03)
    assert r["delta_high"] == pytest.approx(hi, abs=0.03)


def test_bad_derived_frame():
    rows = rows_for(run_meta("micro", "E1", 42), "sorrybench", [0.9], ids=["a"])
    with pytest.raises(GuarddiagError, match="missing column base_prompt_id"):
        measure_robustness(frame(rows), {"sorrybench__x": pl.DataFrame(
            {"prompt_id": ["a"], "mutation": ["x"]})})
    with pytest.raises(GuarddiagError, match="cannot tell its base"):
        measure_robustness(frame(rows), {"odd": _derived(["a"], ["a"])})
