"""`guarddiag sweep`: the plan as parallel tasks gives the sequential runner's bytes."""

from __future__ import annotations

import importlib.util

import pytest
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.predict import predict_runs
from guarddiag.predict.sweep import ScoreTask, sweep
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_a_two_worker_sweep_writes_the_sequential_bytes(tmp_path):
    pool = make_pool(tmp_path / "pool.parquet", n=300)
    folder = write_tiny_branches(tmp_path / "branches")
    for name in ("T_A", "T_B"):
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text().replace("size: one_up", "size: micro"))
    seq = tmp_path / "sequential"
    train_branches(branches=load_branches(folder), names="all", sizes=["micro"], seeds=[42],
                   runs_dir=seq, pool_path=pool)
    predict_runs(runs_dir=seq, pool_path=pool, benchmarks="none", device="cpu")

    par = tmp_path / "sweep"
    res = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                branches_dir=folder, engine="local", jobs=2,
                score=ScoreTask("", str(pool), "none", None, None, 64, "cpu", 1))
    assert [r.run_id for r in res.runs] == ["micro/T_A/seed=42", "micro/T_B/seed=42",
                                            "micro/reference/seed=42", "micro/E8/seed=42",
                                            "micro/E1/seed=42"]
    assert {r.status for r in res.runs} == {"trained"}
    from guarddiag.pool.table import read_pool

    # every run scores the pool's val split once (benchmarks "none")
    assert res.n_scored == 5 * read_pool(pool).split("val").height
    out = predict_runs(runs_dir=par, pool_path=pool, benchmarks="none", device="cpu")
    assert all(r.n_scored == 0 for r in out.runs if r.guard_kind == "branch")  # from caches
    for r in res.runs:
        for name in ("model.safetensors", "scores.parquet"):
            assert (par / r.run_id / name).read_bytes() == (seq / r.run_id / name).read_bytes()
    assert (par / "predictions.parquet").read_bytes() == \
        (seq / "predictions.parquet").read_bytes()
    # a rerun resumes from the runs folder: everything is finished, nothing is retrained
    again = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                  branches_dir=folder, engine="local", jobs=2)
    assert {r.status for r in again.runs} == {"skipped"}


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed")
def test_the_ray_engine_without_ray_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(GuarddiagError, match=r'pip install -e "\.\[ray\]"'):
        sweep(runs_dir=tmp_path, pool_path=tmp_path / "pool.parquet", engine="ray")
    assert main(["sweep", "--engine", "ray", "--pool", str(tmp_path / "p.parquet")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
