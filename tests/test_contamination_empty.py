"""An audited benchmark with no prompts has no shares (not a division by zero), with and without
template overlaps."""

from __future__ import annotations

import pytest

from guarddiag.analyses.contamination import contamination_table


@pytest.mark.parametrize("templates", [False, True])
def test_an_empty_benchmark_has_no_shares(templates):
    entry = {"n": 0, "n_exact": 0, "n_near": 0, "n_kept": 0}
    full = {"n": 8, "n_exact": 2, "n_near": 1, "n_kept": 6}
    if templates:
        entry["n_template"] = 0
        full["n_template"] = 4
    summary = {"benchmarks": {"empty": entry, "full": full},
               "benchmark_order": ["empty", "full"], "templates": templates}
    rows = contamination_table(summary).table.rows(named=True)
    empty, other = rows
    assert empty["share_exact"] is None
    assert empty["share_near"] is None
    assert other["share_exact"] == pytest.approx(2 / 8)
    assert other["share_near"] == pytest.approx(1 / 8)
    if templates:
        assert empty["share_template"] is None
        assert other["share_template"] == pytest.approx(4 / 8)
    else:
        assert "share_template" not in other
