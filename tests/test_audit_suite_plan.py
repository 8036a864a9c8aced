"""``bench audit``'s plan for 100M and 1B rows, and the ``--suite`` command end to end.

Oracles: the projection's arithmetic written out by hand; the suite's targets on the public data.
"""

from __future__ import annotations

import json

import pytest

from guarddiag.bench.audit_plan import PLAN_ROWS, PassCost, PeakMemory, ScalePlan, cpu_seconds
from guarddiag.cli import main

# 1M rows in 20 CPU-seconds (10 s wall), no CPU time for the small size: 50,000 rows/s per core
# on 2 busy cores. Peak 400 MiB at 200k rows and 600 MiB at 1M: a working set of 600 MiB.
# 2,000 of the 1M rows matched (0.2 %), 262.144 bytes each in memory.
COST = PassCost(name="exact", rows_small=200_000, rows_large=1_000_000, cpu_s=20.0,
                wall_s=10.0, peak_small_mib=400.0, peak_large_mib=600.0, matched_rows=2000,
                matched_row_bytes=262.144, workers=2)


def test_pass_cost_rates_and_memory_by_hand():
    assert COST.rows_per_core_s == 50_000
    assert COST.cores_used == 2.0
    assert COST.working_mib == 600.0
    assert COST.matched_share == pytest.approx(0.002)
    assert COST.setup_cpu_s == 0.0
    # 100M rows on 16 nodes of 32 cores: 1e8 / (5e4 · 32 · 16) = 3.90625 s.
    assert COST.wall_s_for(100_000_000, nodes=16, cores=32) == pytest.approx(3.90625)
    # 1B rows on one node: 1e9 / (5e4 · 32) = 625 s.
    assert COST.wall_s_for(1_000_000_000, nodes=1, cores=32) == pytest.approx(625.0)
    # Driver at 1B rows: 600 MiB + 2M matched rows × 262.144 B = 600 + 500 MiB.
    assert COST.driver_mib_for(1_000_000_000) == pytest.approx(1100.0)
    # A 32-core worker node: 32 workers within 600 / 2 MiB each.
    assert COST.worker_node_mib(32) == pytest.approx(9_600.0)
    # Store at 1B rows: 1e9 × (8 + 0.002 × 262.144) B = 8.524288e9 B.
    assert COST.store_gib_for(1_000_000_000) == pytest.approx(8.524288e9 / 2**30)


def test_two_sizes_give_the_marginal_rate_and_the_fixed_cost():
    # 200k rows in 6 CPU-s, 1M in 14: 800k rows per 8 s = 100,000 rows/s; fixed 14 − 10 = 4 s.
    cost = PassCost(name="exact", rows_small=200_000, rows_large=1_000_000, cpu_s=14.0,
                    wall_s=7.0, peak_small_mib=1.0, peak_large_mib=1.0, cpu_small_s=6.0)
    assert cost.rows_per_core_s == pytest.approx(100_000)
    assert cost.setup_cpu_s == pytest.approx(4.0)
    # 1B rows on 10 nodes of 10 cores: 4 + 1e9 / (1e5 · 100) = 104 s.
    assert cost.wall_s_for(1_000_000_000, nodes=10, cores=10) == pytest.approx(104.0)


def test_without_matches_the_driver_stays_at_the_larger_peak():
    flat = PassCost(name="near-dup", rows_small=100, rows_large=500, cpu_s=1.0, wall_s=1.0,
                    peak_small_mib=300.0, peak_large_mib=290.0)
    assert flat.working_mib == 300.0
    assert flat.driver_mib_for(10**9) == 300.0
    assert flat.store_gib_for(2**30) == 8.0


def test_plan_lists_every_size_and_node_count_with_its_assumptions():
    plan = ScalePlan(costs=(COST,), nodes=(1, 16), cores_per_node=32)
    rows = plan.to_dict()["projection"]
    assert [(r["rows"], r["nodes"]) for r in rows] == [
        (PLAN_ROWS[0], 1), (PLAN_ROWS[0], 16), (PLAN_ROWS[1], 1), (PLAN_ROWS[1], 16)]
    assert rows[3]["worker_node_mib"] == pytest.approx(9_600.0)
    assert rows[3]["driver_mib"] == pytest.approx(1100.0)
    text = plan.render()
    assert "50,000 rows/s per core" in text
    assert "assumptions:" in text
    assert "10 min" in text          # 625 s for 1B rows on one node


def test_cpu_clock_and_memory_sampler_measure_this_process():
    before = cpu_seconds()
    with PeakMemory(interval=0.01) as memory:
        block = bytearray(64 * 2**20)        # 64 MiB, touched
        for i in range(0, len(block), 4096):
            block[i] = 1
        sum(range(2_000_000))
    assert cpu_seconds() > before
    assert memory.peak_mib >= 64


def test_bench_suite_meets_its_targets_on_the_public_data(real_data_dir, tmp_path, capsys):
    out = tmp_path / "suite.json"
    assert main(["bench", "audit", "--suite", "--cases", "40", "--background", "2000",
                 "--data-dir", str(real_data_dir), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    by_kind = {k["kind"]: k for k in doc["kinds"]}
    assert set(by_kind) == {"exact", "case_punct", "rewrapped", "embedded", "template",
                            "paraphrase", "short", "one_word", "escaped"}
    for kind, k in by_kind.items():
        assert k["precision"] is None or k["precision"] >= 0.99, kind
        if kind != "paraphrase":
            assert k["recall"] >= 0.95, kind
    assert doc["background_matches"] == 0
    assert "embedded" in capsys.readouterr().out


def test_bench_audit_measures_both_sizes_and_projects_them(real_data_dir):
    from guarddiag.bench.audit import bench_audit

    report = bench_audit(rows=3000, near_rows=0, recall_rows=0, contained_rows=0,
                         data_dir=real_data_dir, benchmarks="xstest_safe,xstest_unsafe",
                         nodes=(2,), cores_per_node=4)
    (phase,) = report.phases
    assert phase.found_exact == phase.planted_exact > 0
    assert phase.cpu_s > 0
    assert phase.peak_mib > 50          # a fresh Python process with polars loaded
    assert report.plan is not None
    (cost,) = report.plan.costs
    assert (cost.rows_small, cost.rows_large) == (600, 3000)
    # Every planted copy matched; a row in memory is at least its text's and id's characters.
    assert cost.matched_rows >= phase.found_exact
    assert cost.matched_row_bytes > len("syn-0000001") + 20
    rows = report.plan.to_dict()["projection"]
    assert [(r["rows"], r["nodes"], r["cores_per_node"]) for r in rows] == [
        (100_000_000, 2, 4), (1_000_000_000, 2, 4)]
    assert "projection (4 cores per node)" in report.render()
