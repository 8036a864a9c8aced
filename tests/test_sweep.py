"""`guarddiag sweep`: the plan as parallel tasks gives the sequential runner's bytes, on the
local process pool and on a local two-worker Ray cluster, also when a worker is killed mid-run."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.predict import predict_runs
from guarddiag.predict.options import PredictOptions
from guarddiag.predict.sweep import sweep
from guarddiag.runs import CHECKPOINT_FILE, LOCK_FILE
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches
from guarddiag.train.options import TrainOptions

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HAS_RAY = importlib.util.find_spec("ray") is not None
RUN_IDS = ["micro/T_A/seed=42", "micro/T_B/seed=42", "micro/reference/seed=42",
           "micro/E8/seed=42", "micro/E1/seed=42"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A tiny branch set on a 300-row pool, trained and scored once by the sequential runner."""
    tmp = tmp_path_factory.mktemp("grid")
    pool = make_pool(tmp / "pool.parquet", n=300)
    folder = write_tiny_branches(tmp / "branches")
    for name in ("T_A", "T_B"):
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text().replace("size: one_up", "size: micro"))
    seq = tmp / "sequential"
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_branches(branches=load_branches(folder), names="all", sizes=["micro"],
                       seeds=[42], runs_dir=seq, pool_path=pool)
        predict_runs(runs_dir=seq, pool_path=pool, benchmarks="none", device="cpu")
    finally:
        torch.set_num_threads(before)
    return pool, folder, seq


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def same_bytes(par: Path, seq: Path) -> None:
    for run_id in RUN_IDS:
        for name in ("model.safetensors", "scores.parquet"):
            assert (par / run_id / name).read_bytes() == (seq / run_id / name).read_bytes(), \
                f"{run_id}/{name}"
    assert (par / "predictions.parquet").read_bytes() == \
        (seq / "predictions.parquet").read_bytes()


def kill_after_first_checkpoint(run_dir: Path, killed: list[int]) -> threading.Thread:
    """SIGKILL the process training ``run_dir`` (its pid is in the run's lock) as soon as the
    run has written a resume checkpoint — a worker lost mid-run."""
    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if (run_dir / CHECKPOINT_FILE).is_file() and (run_dir / LOCK_FILE).is_file():
                try:
                    pid = int(json.loads((run_dir / LOCK_FILE).read_text())["pid"])
                except (OSError, ValueError, KeyError):
                    continue
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.002)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_two_worker_sweep_writes_the_sequential_bytes(grid, tmp_path):
    pool, folder, seq = grid
    par = tmp_path / "sweep"
    res = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                branches_dir=folder, engine="local", jobs=2,
                score=PredictOptions(pool_path=pool, benchmarks="none", device="cpu", threads=1))
    assert [r.run_id for r in res.runs] == RUN_IDS
    assert {r.status for r in res.runs} == {"trained"}
    from guarddiag.pool.table import read_pool

    # every run scores the pool's val split once (benchmarks "none")
    assert res.n_scored == 5 * read_pool(pool).split("val").height
    out = predict_runs(runs_dir=par, pool_path=pool, benchmarks="none", device="cpu")
    assert all(r.n_scored == 0 for r in out.runs if r.guard_kind == "branch")  # from caches
    same_bytes(par, seq)
    # a rerun resumes from the runs folder: everything is finished, nothing is retrained
    again = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                  branches_dir=folder, engine="local", jobs=2)
    assert {r.status for r in again.runs} == {"skipped"}


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_worker_killed_mid_run_is_retried_and_resumes_to_the_same_weights(
        engine, grid, tmp_path, request):
    if engine == "ray":
        if not HAS_RAY:
            pytest.skip("Ray is not installed")
        request.getfixturevalue("ray_cluster")
    pool, folder, seq = grid
    par = tmp_path / engine
    killed: list[int] = []
    watcher = kill_after_first_checkpoint(par / "micro/T_A/seed=42", killed)
    res = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                branches_dir=folder, engine=engine, jobs=2,
                options=TrainOptions(checkpoint_every_steps=1),
                score=PredictOptions(pool_path=pool, benchmarks="none", device="cpu", threads=1))
    watcher.join(timeout=1)
    assert len(killed) == 1
    status = {r.run_id: r.status for r in res.runs}
    assert status["micro/T_A/seed=42"] == "resumed"
    events = [json.loads(line)["event"] for line in
              (par / "micro/T_A/seed=42/train_log.jsonl").read_text().splitlines()]
    assert events.count("start") == 1
    assert events.count("resume") == 1
    predict_runs(runs_dir=par, pool_path=pool, benchmarks="none", device="cpu")
    same_bytes(par, seq)


@pytest.mark.slow
def test_the_ray_engine_on_two_local_workers_writes_the_sequential_bytes(
        grid, ray_cluster, tmp_path):
    pool, folder, seq = grid
    par = tmp_path / "ray"
    res = sweep(names="all", sizes=["micro"], seeds=[42], runs_dir=par, pool_path=pool,
                branches_dir=folder, engine="ray",
                score=PredictOptions(pool_path=pool, benchmarks="none", device="cpu", threads=1))
    assert [r.run_id for r in res.runs] == RUN_IDS
    assert {r.status for r in res.runs} == {"trained"}
    assert ray_cluster.cluster_resources()["CPU"] == 2
    predict_runs(runs_dir=par, pool_path=pool, benchmarks="none", device="cpu")
    same_bytes(par, seq)


@pytest.mark.skipif(HAS_RAY, reason="Ray is installed")
def test_the_ray_engine_without_ray_is_a_one_line_error(tmp_path, capsys):
    with pytest.raises(GuarddiagError, match=r'pip install -e "\.\[ray\]"'):
        sweep(runs_dir=tmp_path, pool_path=tmp_path / "pool.parquet", engine="ray")
    assert main(["sweep", "--engine", "ray", "--pool", str(tmp_path / "p.parquet")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_local_workers_die_with_the_sweep_process(tmp_path):
    """A killed sweep (or demo) leaves no orphan worker training on."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, time\n"
        "from guarddiag.predict.sweep import LocalEngine\n"
        "def pid(_):\n"
        "    return os.getpid()\n"
        "if __name__ == '__main__':\n"
        "    eng = LocalEngine(1)\n"
        "    eng.submit('pid', pid, None, gpu=False)\n"
        "    print(eng.next_done()[1], flush=True)\n"
        "    eng.submit('sleep', time.sleep, 120, gpu=False)\n"
        "    time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path)
    worker = int(parent.stdout.readline())
    assert running(worker)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(worker)


def running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def die_once(marker: str) -> str:
    """Kill this worker the first time (as a lost machine would), succeed when retried."""
    if not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return "retried"


def slow(value: str) -> str:
    time.sleep(1.5)
    return value


def test_a_pool_broken_between_results_is_rebuilt_on_the_next_submit(tmp_path):
    """A worker dies while another task is in flight and the sweep submits new work before it
    collects the failure: the submit rebuilds the pool, and every task still gets its result."""
    from guarddiag.predict.sweep import LocalEngine

    eng = LocalEngine(2)
    try:
        eng.submit("slow", slow, "a", gpu=False)
        eng.submit("die", die_once, str(tmp_path / "died"), gpu=False)
        deadline = time.monotonic() + 60
        while not (tmp_path / "died").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the pool notices the dead worker and marks itself broken
        eng.submit("after", slow, "b", gpu=False)
        results = dict(eng.next_done() for _ in range(3))
    finally:
        eng.close()
    assert results == {"slow": "a", "die": "retried", "after": "b"}
    assert eng.retries == 2  # one restart
