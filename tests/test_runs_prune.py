"""``guarddiag runs prune --benchmarks ID``: a benchmark's rows removed on purpose from the
predictions, the outside guards' tables and the runs' score caches; every other row kept."""

from __future__ import annotations

import json

import polars as pl
import pytest
from synthetic_runs import rows_for, run_meta

from guarddiag import files
from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.runs import SCORES_FILE, SCORES_META, ScoreCache, prune_benchmarks


def _runs(tmp_path):
    runs = tmp_path / "runs"
    branch = run_meta("micro", "E1", 0)
    guard = run_meta("outside", "team", None, kind="outside", policy="outside")
    preds = pl.DataFrame(rows_for(branch, "xstest_safe", [0.1, 0.9, 0.2])
                         + rows_for(branch, "gone_bench", [0.8, 0.7]))
    files.write_parquet(preds, runs / "predictions.parquet")
    outside = pl.DataFrame(rows_for(guard, "xstest_safe", [0.3, 0.6, 0.2])
                           + rows_for(guard, "gone_bench", [0.4, 0.9]))
    files.write_parquet(outside, runs / "outside" / "team.parquet")
    files.write_json({"run_id": "guard/team", "benchmarks": ["gone_bench", "xstest_safe"],
                      "benchmark_sha256": {"gone_bench": "a", "xstest_safe": "b"}},
                     runs / "outside" / "team.meta.json")
    folder = runs / "micro" / "E1" / "seed=0"
    folder.mkdir(parents=True)
    scores = preds.select("benchmark", "prompt_id", "p_GENERIC_SAFE", "p_BOUNDARY_SAFE",
                          "p_HARMFUL", "p_COMPOUND")
    files.write_parquet(scores, folder / SCORES_FILE)
    files.write_json({"key": "k", "inputs": {"gone_bench": "s1", "xstest_safe": "s2"}},
                     folder / SCORES_META)
    return runs, folder


def test_prune_removes_only_the_named_benchmark(tmp_path):
    runs, folder = _runs(tmp_path)
    result = prune_benchmarks(runs, ["gone_bench"])
    # 2 prediction rows + 2 guard rows + 2 cached score rows.
    assert result.n_removed == 6
    assert result.removed == {str(runs / "predictions.parquet"): 2,
                              str(runs / "outside" / "team.parquet"): 2,
                              str(folder / SCORES_FILE): 2}
    for path in (runs / "predictions.parquet", runs / "outside" / "team.parquet",
                 folder / SCORES_FILE):
        frame = pl.read_parquet(path)
        assert frame["benchmark"].to_list() == ["xstest_safe"] * 3
    meta = json.loads((runs / "outside" / "team.meta.json").read_text())
    assert meta["benchmarks"] == ["xstest_safe"]
    assert meta["benchmark_sha256"] == {"xstest_safe": "b"}
    cache = ScoreCache.open(folder, "k")
    assert set(cache.frames) == {"xstest_safe"}
    again = prune_benchmarks(runs, ["gone_bench"])  # nothing left to remove
    assert again.n_removed == 0


def test_prune_cli_says_what_it_removed(tmp_path, capsys):
    runs, _ = _runs(tmp_path)
    assert main(["runs", "prune", "--benchmarks", "gone_bench", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "pruned gone_bench: 6 row(s) removed" in out
    assert f"removed 2 row(s) from {runs / 'predictions.parquet'}" in out


def test_prune_needs_a_runs_folder_and_an_id(tmp_path):
    with pytest.raises(GuarddiagError, match="runs folder not found"):
        prune_benchmarks(tmp_path / "nope", ["x"])
    with pytest.raises(GuarddiagError, match="name at least one benchmark"):
        prune_benchmarks(tmp_path, [" "])
