"""Devices, one run at a time under a lock, the plan graph, and the device check."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.model import MODEL_FILE, load_weights
from guarddiag.model.device import CPU, DeviceSetup, iter_chunks, precision_for, resolve_device
from guarddiag.runs import LOCK_FILE
from guarddiag.train import TrainingInterrupted, TrainOptions, train_one
from guarddiag.train.branches import load_branches
from guarddiag.train.lock import RunLock, RunLockedError
from guarddiag.train.options import PlanOptions
from guarddiag.train.plan import find_run, plan_graph

pytestmark = pytest.mark.usefixtures("one_torch_thread")
NO_CUDA = not torch.cuda.is_available()


# ----------------------------------------------------------------------------- devices

def test_auto_is_cuda_when_present_else_cpu():
    assert resolve_device("auto", n_cuda=0) == "cpu"
    assert resolve_device(None, n_cuda=0, mps=True) == "cpu"  # mps only when asked for
    assert resolve_device("auto", n_cuda=2) == "cuda"
    assert resolve_device("cuda:1", n_cuda=2) == "cuda:1"
    assert resolve_device("CPU", n_cuda=2) == "cpu"
    assert resolve_device("mps", n_cuda=0, mps=True) == "mps"


@pytest.mark.parametrize(("spec", "n_cuda", "message"), [
    ("cuda", 0, "CUDA is not available"), ("cuda:0", 0, "CUDA is not available"),
    ("cuda:2", 2, "has 2 CUDA device"), ("mps", 0, "no MPS"), ("tpu", 1, "expected auto")])
def test_a_missing_device_is_a_one_line_error(spec, n_cuda, message):
    with pytest.raises(GuarddiagError, match=message) as exc:
        resolve_device(spec, n_cuda=n_cuda)
    assert "\n" not in str(exc.value)


def test_precision_is_a_function_of_device_and_bf16_support():
    cpu = precision_for("cpu", bf16_supported=True)
    assert (cpu.autocast_dtype, cpu.use_scaler, cpu.name) == (None, False, "float32")
    bf16 = precision_for("cuda", bf16_supported=True)
    assert (bf16.autocast_dtype, bf16.use_scaler) == (torch.bfloat16, False)
    fp16 = precision_for("cuda", bf16_supported=False)
    assert (fp16.autocast_dtype, fp16.use_scaler, fp16.name) == (torch.float16, True, "float16")
    assert precision_for("mps", bf16_supported=True).autocast_dtype is None


def test_the_cpu_setup_leaves_tensors_and_arithmetic_alone():
    setup = DeviceSetup.of("cpu")
    assert setup == CPU
    x = torch.randn(3, 4)
    assert setup.put(x) is x  # not a copy: the CPU path is today's path
    batch = {"a": x}
    assert setup.put_all(batch) is batch
    assert setup.scaler() is None
    with setup.autocast():
        y = x @ x.T
    assert y.dtype == torch.float32
    assert setup.record() == {"device": "cpu", "dtype": "float32"}


def test_micro_batches_cover_the_batch_in_order():
    idx = list(range(10))
    assert list(iter_chunks(idx, None)) == [idx]
    assert list(iter_chunks(idx, 4)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(iter_chunks(idx, 10)) == [idx]


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_cli_device_cuda_without_cuda_exits_2_with_one_line(capsys):
    assert main(["train", "--device", "cuda", "--pool", "nope.parquet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "--device cuda: CUDA is not available" in err
    assert main(["bench", "gpu"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_guards_score_device_cuda_without_cuda_exits_2(tmp_path, capsys):
    labels = tmp_path / "labels.yaml"
    labels.write_text("labels:\n  SAFE: GENERIC_SAFE\n  UNSAFE: HARMFUL\n")
    code = main(["guards", "score", "--adapter", "hf-classifier", "--model", str(tmp_path),
                 "--labels", str(labels), "--device", "cuda", "--benchmarks", "none",
                 "--work-dir", str(tmp_path / "work")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.splitlines()[-1].endswith("use --device cpu or auto")


# ----------------------------------------------------------------------------- runs

@pytest.fixture(scope="module")
def setup_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    pool = make_pool(root / "pool.parquet", n=300)
    folder = write_tiny_branches(root / "branches")
    for name in ("T_A", "T_B"):
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text().replace("size: one_up", "size: micro"))
    return load_branches(folder), pool, folder


def test_plan_graph_has_the_dependency_edges_and_levels(setup_runs, tmp_path):
    branches, _, _ = setup_runs
    graph = plan_graph(branches, PlanOptions.of(sizes=["micro"], seeds=[42]), runs_dir=tmp_path)
    levels = {n.id: n.level for n in graph.nodes}
    assert levels == {"micro/T_A/seed=42": 0, "micro/T_B/seed=42": 0,
                      "micro/reference/seed=42": 1, "micro/E8/seed=42": 1,
                      "micro/E1/seed=42": 2}
    assert set(graph.edges) == {
        ("micro/T_B/seed=42", "micro/reference/seed=42", "teacher"),
        ("micro/T_A/seed=42", "micro/E8/seed=42", "teacher"),
        ("micro/reference/seed=42", "micro/E1/seed=42", "parent")}
    routes = {n.branch: n.route for n in graph.nodes}
    assert routes == {"T_A": "hard_labels", "T_B": "hard_labels", "reference": "distill",
                      "E8": "distill", "E1": "head_only"}
    doc = graph.to_dict()
    assert doc["levels"] == 3
    assert {n["status"] for n in doc["nodes"]} == {"pending"}
    assert json.loads(json.dumps(doc)) == doc


def test_find_run_names_the_runs_a_branch_has(setup_runs):
    branches, _, _ = setup_runs
    run = find_run(branches, "micro/E1/seed=7")
    assert run.parent == "micro/reference/seed=7"
    with pytest.raises(GuarddiagError, match="its runs are .*small/E1/seed=7"):
        find_run(branches, "huge/E1/seed=7")
    with pytest.raises(GuarddiagError, match="expected <size>/<branch>/seed=<s>"):
        find_run(branches, "micro/E1")


def test_train_run_with_a_missing_dependency_exits_2_naming_it(setup_runs, tmp_path, capsys):
    _, pool, folder = setup_runs
    code = main(["train", "--run", "micro/E1/seed=42", "--runs-dir", str(tmp_path),
                 "--pool", str(pool), "--branches-dir", str(folder), "--device", "auto"])
    err = capsys.readouterr().err
    assert code == 2
    assert "device: cpu (--device auto found no CUDA)" in err or not NO_CUDA
    last = err.strip().splitlines()[-1]
    assert "micro/reference/seed=42 is not finished" in last


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _write_lock(run_dir: Path, pid: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / LOCK_FILE).write_text(json.dumps(
        {"pid": pid, "host": socket.gethostname(), "since": "2026-01-01T00:00:00Z"}))


def test_a_live_holder_stops_the_second_process_with_its_name(setup_runs, tmp_path):
    branches, pool, _ = setup_runs
    holder = _sleeper()
    try:
        _write_lock(tmp_path / "micro/T_A/seed=42", holder.pid)
        with pytest.raises(RunLockedError, match=f"being trained by pid {holder.pid} on ") as exc:
            train_one(branches=branches, run_id="micro/T_A/seed=42", runs_dir=tmp_path,
                      pool_path=pool)
        assert "\n" not in str(exc.value)
        assert not (tmp_path / "micro/T_A/seed=42/meta.json").exists()
    finally:
        holder.kill()
        holder.wait()


def test_waiting_for_a_holder_then_finding_the_run_done(tmp_path):
    run_dir = tmp_path / "run"
    holder = _sleeper()
    _write_lock(run_dir, holder.pid)
    waited: list[int] = []

    def release() -> None:
        time.sleep(0.3)
        (run_dir / LOCK_FILE).unlink()

    t = threading.Thread(target=release)
    t.start()
    try:
        with RunLock(run_dir, run_id="x", wait=True, poll_s=0.02,
                     on_wait=lambda h: waited.append(h["pid"])):
            mine = json.loads((run_dir / LOCK_FILE).read_text())
            assert mine["pid"] == os.getpid()
    finally:
        t.join()
        holder.kill()
        holder.wait()
    assert waited == [holder.pid]
    assert not (run_dir / LOCK_FILE).exists()  # released on exit


def test_a_dead_holders_lock_is_taken_over(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _write_lock(tmp_path, dead.pid)
    with RunLock(tmp_path, run_id="r"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert f"took over the lock of pid {dead.pid}" in capsys.readouterr().err
    # a holder on another host is never declared dead: its pid means nothing here
    (tmp_path / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": "elsewhere"}))
    with pytest.raises(RunLockedError, match=f"pid {dead.pid} on elsewhere"):
        RunLock(tmp_path, run_id="r").acquire()


def test_two_threads_never_hold_one_lock(tmp_path):
    inside, overlap = [0], [False]

    def work() -> None:
        with RunLock(tmp_path, run_id="r", wait=True, poll_s=0.005):
            inside[0] += 1
            overlap[0] |= inside[0] > 1
            time.sleep(0.02)
            inside[0] -= 1

    # threads share a pid, so each must fail to create the file while another holds it
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not overlap[0]


def test_an_interrupted_train_run_resumes_to_identical_weights(setup_runs, tmp_path):
    branches, pool, _ = setup_runs
    kw = {"branches": branches, "run_id": "micro/T_A/seed=42", "pool_path": pool}
    straight = train_one(runs_dir=tmp_path / "straight", **kw)
    assert straight.status == "trained"
    opts = TrainOptions(checkpoint_every_steps=3, stop_after_steps=7, checkpoint_every_s=1e9)
    with pytest.raises(TrainingInterrupted):
        train_one(runs_dir=tmp_path / "killed", options=opts, **kw)
    rd = tmp_path / "killed/micro/T_A/seed=42"
    assert not (rd / LOCK_FILE).exists()  # released on the way out
    graph = plan_graph(branches, PlanOptions.of(branches="T_A", sizes=["micro"], seeds=[42]),
                       runs_dir=tmp_path / "killed")
    assert graph.nodes[0].status == "interrupted"
    resumed = train_one(runs_dir=tmp_path / "killed", **kw)
    assert resumed.status == "resumed"
    a = load_weights(tmp_path / "straight/micro/T_A/seed=42" / MODEL_FILE)
    b = load_weights(rd / MODEL_FILE)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert train_one(runs_dir=tmp_path / "killed", **kw).status == "skipped"
    meta = json.loads((rd / "meta.json").read_text())
    assert meta["train"]["device"] == "cpu"
    assert meta["train"]["dtype"] == "float32"
    assert set(meta["versions"]) >= {"torch", "transformers"}


def test_list_sizes_gives_the_heads_share_of_every_size(capsys):
    assert main(["train", "--list-sizes"]) == 0
    rows = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()[1:6]}
    assert set(rows) == {"micro", "tiny", "small", "base", "large"}
    base = rows["base"]
    # heads: 768·(4 + 24 + 24) + 52 = 39,988; the ModernBERT-base model card says 149M
    assert base[5] == "39,988"
    total = int(base[4].replace(",", ""))
    assert 148_500_000 < total < 149_500_000
    assert base[6] == f"{100 * 39_988 / total:.4f}"  # ≈ 0.0268 %, the study's "0.03 %"
    assert rows["large"][5] == f"{1024 * 52 + 52:,}"


# ----------------------------------------------------------------------------- device check

def test_device_check_on_the_cpu_agrees_with_itself():
    from guarddiag.bench.train import device_check

    res = device_check(device="cpu", size="micro", batch_size=4, seq_len=24)
    assert res.max_abs_diff == 0.0  # the same float32 model and batch twice
    assert res.passed
    assert res.train_ex_per_s > 0
    assert res.score_ex_per_s_cpu > 0


@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs CUDA")
def test_device_check_bf16_on_cuda_matches_the_cpu():
    from guarddiag.bench.train import DEVICE_CHECK_TOLERANCE, device_check

    res = device_check(device="cuda", size="base", batch_size=8, seq_len=128)
    assert res.dtype in ("bfloat16", "float16")
    assert res.max_abs_diff <= DEVICE_CHECK_TOLERANCE


def test_micro_batches_accumulate_the_whole_batchs_gradient(setup_runs, tmp_path):
    """Each micro-batch's loss is weighted by its share of the rows, so for the per-row mean
    terms (class CE, pillar BCE) the accumulated gradient is the whole batch's; the span
    term (a mean over tokens) is switched off here because it is only close, not equal."""
    from guarddiag.train.full import FullRoute

    branches, pool, _ = setup_runs
    spec = branches["T_A"].model_copy(update={"span_weight": 0.0})
    run = find_run(branches, "micro/T_A/seed=42")
    from guarddiag.pool.table import read_pool

    grads = []
    for micro in (None, 3):
        run_dir = tmp_path / str(micro) / run.run_id
        run_dir.mkdir(parents=True)
        route = FullRoute(spec, run, run_dir, options=TrainOptions(micro_batch=micro),
                          fingerprint="test")
        route.setup(read_pool(pool), tmp_path / str(micro))
        route._forward_backward(list(range(10)))
        grads.append({n: p.grad.clone() for n, p in route.model.named_parameters()
                      if p.grad is not None})
    whole, accumulated = grads
    assert whole.keys() == accumulated.keys()
    assert len(whole) > 10
    for name, g in whole.items():
        torch.testing.assert_close(accumulated[name], g, atol=1e-6, rtol=1e-4, msg=name)
    # the weighting matters: the unweighted sum of 4 micro-batch gradients is far off
    assert not torch.allclose(4 * accumulated["heads.class_head.weight"],
                              whole["heads.class_head.weight"], atol=1e-4)


def test_train_plan_cli_writes_the_graph(setup_runs, tmp_path, capsys):
    _, _, folder = setup_runs
    out = tmp_path / "plan.json"
    argv = ["train", "plan", "--branches", "E1", "--sizes", "micro", "--seeds", "42",
            "--runs-dir", str(tmp_path / "runs"), "--branches-dir", str(folder)]
    assert main([*argv, "--out", str(out)]) == 0
    assert "3 runs in 3 level(s)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert [n["id"] for n in doc["nodes"]] == ["micro/T_B/seed=42", "micro/reference/seed=42",
                                              "micro/E1/seed=42"]
    assert doc["edges"][-1] == {"from": "micro/reference/seed=42", "to": "micro/E1/seed=42",
                                "role": "parent"}
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc


@pytest.mark.slow
def test_two_train_run_processes_never_train_one_run_twice(setup_runs, tmp_path):
    """A real second `guarddiag train --run` on a run being trained: without --wait it exits
    2 naming the holder's pid; with --wait it waits, then finds the run finished (skipped)."""
    _, pool, folder = setup_runs
    slow = tmp_path / "branches"
    slow.mkdir()
    text = (folder / "T_A.yaml").read_text().replace("epochs: 2", "epochs: 40")
    (slow / "T_A.yaml").write_text(text)
    argv = [sys.executable, "-m", "guarddiag", "train", "--run", "micro/T_A/seed=42",
            "--pool", str(pool), "--branches-dir", str(slow), "--runs-dir",
            str(tmp_path / "runs"), "--threads", "1", "--device", "cpu"]
    env = {**os.environ, "GUARDDIAG_PROGRESS": "0"}
    first = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    lock = tmp_path / "runs/micro/T_A/seed=42" / LOCK_FILE
    deadline = time.monotonic() + 120
    while not lock.is_file():
        assert first.poll() is None, first.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    second = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert second.returncode == 2
    last = second.stderr.strip().splitlines()[-1]
    assert f"being trained by pid {first.pid}" in last
    waiter = subprocess.run([*argv, "--wait"], env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-2000:]
    assert waiter.returncode == 0, waiter.stderr[-2000:]
    assert f"waiting for pid {first.pid}" in waiter.stderr
    assert "micro/T_A/seed=42  skipped" in waiter.stdout
    log = (tmp_path / "runs/micro/T_A/seed=42/train_log.jsonl").read_text().splitlines()
    assert sum('"event": "start"' in line for line in log) == 1  # trained once
