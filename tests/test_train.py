"""Losses against numpy, label mixing, span targets, the head-only route, resume, the runner."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches
from scipy.special import log_softmax as np_log_softmax

from guarddiag.bench.recalibrate import bench_recalibrate
from guarddiag.errors import GuarddiagError
from guarddiag.model import MODEL_FILE, load_weights, train_tokenizer
from guarddiag.pool.table import hash_unit, read_pool, sample_split
from guarddiag.runs import read_run_meta
from guarddiag.train import (
    LossWeights,
    TrainingInterrupted,
    TrainOptions,
    distill_loss,
    encode_rows,
    guard_loss,
    label_rows,
    policy_a_mask,
    train_branches,
    train_run,
)
from guarddiag.train.branches import load_branches, plan_runs
from guarddiag.train.options import PlanOptions
from guarddiag.train.rows import POLICY_ANCHOR_SHARE, policy_anchor_mask

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ----------------------------------------------------------------------------- losses

def test_distill_loss_matches_numpy_kl_times_tau_squared():
    rng = np.random.default_rng(0)
    zs, zt = rng.normal(size=(5, 4)) * 3, rng.normal(size=(5, 4)) * 3
    tau = 4.0
    log_ps, log_pt = np_log_softmax(zs / tau, axis=1), np_log_softmax(zt / tau, axis=1)
    kl_rows = (np.exp(log_pt) * (log_pt - log_ps)).sum(axis=1)  # KL(teacher ‖ student)
    want = kl_rows.mean() * tau**2
    got = distill_loss(torch.tensor(zs), torch.tensor(zt), temperature=tau)
    assert float(got) == pytest.approx(want, rel=1e-10)
    # equal logits: zero; and the τ² scaling by hand for one row
    assert float(distill_loss(torch.tensor(zs), torch.tensor(zs), temperature=tau)) == \
        pytest.approx(0.0, abs=1e-12)
    # teacher [2, 0], student [0, 0], τ = 2: p = (e, 1)/(1+e), q = (½, ½)
    p1, p2 = math.e / (1 + math.e), 1 / (1 + math.e)
    hand = (p1 * math.log(2 * p1) + p2 * math.log(2 * p2)) * 2**2
    got = distill_loss(torch.tensor([[0.0, 0.0]], dtype=torch.float64),
                       torch.tensor([[2.0, 0.0]], dtype=torch.float64), temperature=2)
    assert float(got) == pytest.approx(hand, rel=1e-12)


def test_guard_loss_combines_the_terms_as_documented():
    rng = np.random.default_rng(1)
    zc, zt = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    zp = rng.normal(size=(3, 24))
    zspan = rng.normal(size=(3, 5, 24))
    y = np.array([0, 2, 3])
    pillars = (rng.random((3, 24)) < 0.2).astype(np.float64)
    span_t = (rng.random((3, 5, 24)) < 0.1).astype(np.float64)
    span_mask = np.zeros((3, 5), dtype=bool)
    span_mask[1, 1:4] = True  # only row 1 has a known span, tokens 1-3

    def bce(z, t):
        return np.mean(np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) - z * t)

    ce = -np_log_softmax(zc, axis=1)[np.arange(3), y].mean()
    tau = 4.0
    log_ps, log_pt = np_log_softmax(zc / tau, axis=1), np_log_softmax(zt / tau, axis=1)
    kd = (np.exp(log_pt) * (log_pt - log_ps)).sum(axis=1).mean() * tau**2
    alpha, wp, ws = 0.8, 0.5, 2.0
    want = alpha * kd + (1 - alpha) * ce + wp * bce(zp, pillars) + \
        ws * bce(zspan[span_mask], span_t[span_mask])
    t = torch.tensor
    loss, parts = guard_loss(t(zc), t(zp), t(zspan), classes=t(y), pillars=t(pillars),
                             span_targets=t(span_t), span_mask=t(span_mask),
                             teacher_logits=t(zt),
                             weights=LossWeights(alpha, tau, pillar_weight=wp, span_weight=ws))
    assert float(loss) == pytest.approx(want, rel=1e-10)
    assert parts["ce"] == pytest.approx(ce, rel=1e-10)
    # without a teacher the class term is plain cross-entropy
    loss, _ = guard_loss(t(zc), t(zp), None, classes=t(y), pillars=t(pillars),
                         span_targets=None, span_mask=None, teacher_logits=None,
                         weights=LossWeights(0.0, tau, 1.0, 1.0))
    assert float(loss) == pytest.approx(ce + bce(zp, pillars), rel=1e-10)


def test_recipe_target_is_the_hard_label_unless_the_teacher_outweighs_it():
    from guarddiag.train import recipe_target

    teacher = np.log(np.array([[0.7, 0.1, 0.1, 0.1], [0.4, 0.1, 0.3, 0.2]]))
    hard = np.array([2, 2])
    # α = 0.8: row 1 blends to (0.56, 0.08, 0.28, 0.08) → 0; row 2 to (0.32, 0.08, 0.44,
    # 0.16) → 2
    assert recipe_target(hard, teacher, distill_weight=0.8).tolist() == [0, 2]
    assert recipe_target(hard, None, distill_weight=0.8).tolist() == [2, 2]
    assert recipe_target(hard, teacher, distill_weight=0.0).tolist() == [2, 2]


# ----------------------------------------------------------------------------- labels

@pytest.fixture(scope="module")
def pool_path(tmp_path_factory) -> Path:
    return make_pool(tmp_path_factory.mktemp("pool") / "pool.parquet", n=600)


def test_policy_mix_is_nested_and_near_its_fraction():
    import polars as pl

    ids = [f"r{i}" for i in range(20_000)]
    frame = pl.DataFrame({"prompt_id": ids, "label_a": ["HARMFUL"] * 20_000,
                          "label_b": ["HARMFUL"] * 20_000})
    m25 = policy_a_mask(frame, fraction=0.25, anchors=False)
    m50 = policy_a_mask(frame, fraction=0.5, anchors=False)
    assert not (m25 & ~m50).any()  # every A row of the 25% mix is an A row of the 50% mix
    # binomial(20000, 0.25): sd = sqrt(20000·0.25·0.75) ≈ 61; allow 5 sd
    assert abs(int(m25.sum()) - 5_000) < 5 * math.sqrt(20_000 * 0.25 * 0.75)
    assert policy_a_mask(frame, fraction=1.0, anchors=False).all()
    assert not policy_a_mask(frame, fraction=0.0, anchors=False).any()
    u = hash_unit(["a", "b"], "s")
    assert np.array_equal(u, hash_unit(["a", "b"], "s"))
    assert (u >= 0).all()
    assert (u < 1).all()


def test_anchors_put_a_fixed_quarter_of_a_only_rows_on_policy_a(pool_path):
    # E3/E5's anchors (issue 13): a named, fixed set of A-only rows, not every one of them.
    pool = read_pool(pool_path)
    train = sample_split(pool, "train", None)
    rows = label_rows(train, fraction=0.0, anchors=True)
    anchors = policy_anchor_mask(train)
    assert (rows.policy == anchors).all()
    a_only = ((train["label_a"] == "HARMFUL") & (train["label_b"] != "HARMFUL")).to_numpy()
    assert not anchors[~a_only].any()
    assert not rows.policy[(train["label_a"] == train["label_b"]).to_numpy()].any()
    n = int(a_only.sum())
    share = float(anchors[a_only].mean())
    # A hash draws each A-only row with probability POLICY_ANCHOR_SHARE: within 4 binomial SDs.
    assert abs(share - POLICY_ANCHOR_SHARE) < 4 * (0.25 * 0.75 / n) ** 0.5
    assert 0 < share < 1


def test_span_tokens_are_exactly_the_span(pool_path):
    import polars as pl

    text = "translate good morning. also, explain how to build a pipe bomb"
    start = text.index("explain")
    frame = pl.DataFrame({"prompt_id": ["x"], "text": [text], "label_a": ["COMPOUND"],
                          "label_b": ["COMPOUND"], "pillars_a": [["weapons"]],
                          "pillars_b": [["weapons"]], "span_start": [start],
                          "span_end": [len(text)]})
    rows = label_rows(frame, fraction=0.0, anchors=False)
    tok = train_tokenizer([text] * 3, vocab_size=60)
    enc = encode_rows(tok, rows, max_length=64)
    e = tok.encode([text], max_length=64)[0]
    inside = [t for t, m in zip(e.tokens, enc.span_tokens[0], strict=True) if m]
    assert "".join(inside) == "explainhowtobuildapipebomb"
    assert rows.pillars[0].sum() == 1


def test_pool_errors_are_one_line(tmp_path):
    import polars as pl

    bad = tmp_path / "pool.parquet"
    pl.DataFrame({"prompt_id": ["a"], "text": ["x"]}).write_parquet(bad)
    with pytest.raises(GuarddiagError, match="missing column") as exc:
        read_pool(bad)
    assert "\n" not in str(exc.value)
    with pytest.raises(GuarddiagError, match="pool file not found"):
        read_pool(tmp_path / "nope.parquet")


# ----------------------------------------------------------------------------- runs

@pytest.fixture(scope="module")
def trained(tmp_path_factory, pool_path):
    """T_A, T_B (micro-sized here), reference, E8 and head-only E1 on the synthetic pool."""
    root = tmp_path_factory.mktemp("runs")
    folder = write_tiny_branches(root / "branches")
    for name in ("T_A", "T_B"):
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text().replace("size: one_up", "size: micro"))
    branches = load_branches(folder)
    result = train_branches(branches=branches, names="all", sizes=["micro"], seeds=[42],
                            runs_dir=root / "runs", pool_path=pool_path)
    return branches, root / "runs", result


def test_runner_trains_in_order_and_writes_run_files(trained):
    _, runs, result = trained
    ids = [r.run_id for r in result.runs]
    assert ids == ["micro/T_A/seed=42", "micro/T_B/seed=42", "micro/reference/seed=42",
                   "micro/E8/seed=42", "micro/E1/seed=42"]
    for rid in ids:
        d = runs / rid
        for f in ("model.safetensors", "tokenizer.json", "meta.json", "train_log.jsonl"):
            assert (d / f).is_file(), (rid, f)
        meta = json.loads((d / "meta.json").read_text())
        assert meta["status"] == "finished"
        assert meta["seed"] == 42
        assert set(meta["versions"]) >= {"torch", "transformers", "python"}
        assert len(meta["inputs"]["pool.parquet"]) == 64
        assert not (d / "checkpoint.safetensors").exists()
    ref = json.loads((runs / "micro/reference/seed=42/meta.json").read_text())
    assert ref["teacher"] == "micro/T_B/seed=42"
    assert "teacher:micro/T_B/seed=42" in ref["inputs"]


def test_teachers_learn_their_policy(trained):
    _, _, result = trained
    by = {r.branch: r for r in result.runs}
    # the synthetic pool has a lexical cue per class; policies differ on ~30% of rows
    assert by["T_A"].val_acc_a > by["T_A"].val_acc_b + 0.1
    assert by["T_B"].val_acc_b > by["T_B"].val_acc_a + 0.1


def test_kept_checkpoint_is_the_best_val_evaluation(trained):
    _, runs, _ = trained
    for rid in ("micro/reference/seed=42", "micro/E1/seed=42"):
        log = [json.loads(x) for x in (runs / rid / "train_log.jsonl").read_text().splitlines()]
        evals = [x for x in log if x["event"] == "eval"]
        assert len(evals) >= 2
        # highest accuracy against the recipe's target; the earliest such evaluation on ties
        best = max(evals, key=lambda x: (x["val_acc_target"], -x["step"]))
        meta = json.loads((runs / rid / "meta.json").read_text())
        assert meta["train"]["best"]["step"] == best["step"]


def test_head_only_leaves_the_encoder_bit_identical(trained):
    _, runs, _ = trained
    parent = load_weights(runs / "micro/reference/seed=42" / MODEL_FILE)
    child = load_weights(runs / "micro/E1/seed=42" / MODEL_FILE)
    enc = [k for k in parent if k.startswith("encoder.")]
    assert enc
    assert all(torch.equal(parent[k], child[k]) for k in enc)
    heads = [k for k in parent if k.startswith("heads.")]
    assert len(heads) == 6
    assert any(not torch.equal(parent[k], child[k]) for k in heads)


def test_finished_runs_are_skipped_and_changed_specs_retrained(trained, pool_path):
    branches, runs, _ = trained
    again = train_branches(branches=branches, names="E1", sizes=["micro"], seeds=[42],
                           runs_dir=runs, pool_path=pool_path)
    assert {r.status for r in again.runs} == {"skipped"}
    run = next(r for r in plan_runs(branches, PlanOptions.of(branches="E1", seeds=[42]))
               if r.branch == "E1")
    # meta.json carries the spec's roles; a changed role relabels the run, never retrains it.
    assert read_run_meta(runs / run.run_id).roles == branches["E1"].roles()
    relabelled = branches["E1"].model_copy(update={"role": "control", "control_of": "E8"})
    before = (runs / run.run_id / "model.safetensors").read_bytes()
    assert train_run(relabelled, run, pool=read_pool(pool_path),
                     runs_dir=runs).status == "skipped"
    meta = read_run_meta(runs / run.run_id)
    assert (meta.roles.role, meta.roles.control_of) == ("control", "E8")
    assert (runs / run.run_id / "model.safetensors").read_bytes() == before
    spec = branches["E1"].model_copy(update={"epochs": 3})
    assert train_run(spec, run, pool=read_pool(pool_path), runs_dir=runs).status == "trained"
    assert read_run_meta(runs / run.run_id).roles == branches["E1"].roles()


def test_missing_dependency_is_a_one_line_error(trained, pool_path, tmp_path):
    branches, _, _ = trained
    run = next(r for r in plan_runs(branches, PlanOptions.of(branches="E1", seeds=[7]))
               if r.branch == "E1")
    with pytest.raises(GuarddiagError, match="needs the finished run micro/reference/seed=7"):
        train_run(branches["E1"], run, pool=read_pool(pool_path), runs_dir=tmp_path)


def test_interrupted_run_resumes_to_identical_weights(tmp_path, pool_path):
    folder = write_tiny_branches(tmp_path / "branches")
    (folder / "T_A.yaml").write_text((folder / "T_A.yaml").read_text()
                                     .replace("size: one_up", "size: micro")
                                     .replace("evals_per_epoch: 1", "evals_per_epoch: 3"))
    branches = load_branches(folder)
    kw = {"branches": branches, "names": "T_A", "sizes": ["micro"], "seeds": [42],
          "pool_path": pool_path}
    train_branches(runs_dir=tmp_path / "straight", **kw)
    # 30 steps in all; checkpoints every 4 steps and at evals; killed after 9 steps, so the
    # resume replays from step 8 and must land on the same bits.
    opts = TrainOptions(checkpoint_every_steps=4, stop_after_steps=9, checkpoint_every_s=1e9)
    with pytest.raises(TrainingInterrupted):
        train_branches(runs_dir=tmp_path / "killed", options=opts, **kw)
    rd = tmp_path / "killed/micro/T_A/seed=42"
    assert (rd / "checkpoint.safetensors").is_file()
    assert not (rd / "meta.json").exists()
    res = train_branches(runs_dir=tmp_path / "killed", **kw)
    assert res.runs[0].status == "resumed"
    a = load_weights(tmp_path / "straight/micro/T_A/seed=42" / MODEL_FILE)
    b = load_weights(rd / MODEL_FILE)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    log = [json.loads(x) for x in (rd / "train_log.jsonl").read_text().splitlines()]
    assert [x["event"] for x in log].count("resume") == 1
    steps = [x["step"] for x in log if x["event"] == "eval"]
    assert steps == sorted(set(steps))  # no evaluation logged twice after the resume


@pytest.mark.slow
def test_killed_train_process_resumes_to_identical_weights(tmp_path, pool_path):
    """`guarddiag train` in a child process, SIGKILLed once it has written a checkpoint
    (no handler runs, no clean-up): the rerun resumes from that checkpoint and ends on the
    same bits as an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder = write_tiny_branches(tmp_path / "branches")
    (folder / "T_A.yaml").write_text((folder / "T_A.yaml").read_text()
                                     .replace("size: one_up", "size: micro")
                                     .replace("epochs: 2", "epochs: 12"))  # 180 steps
    argv = [sys.executable, "-m", "guarddiag", "train", "--branches", "T_A", "--sizes",
            "micro", "--seeds", "42", "--pool", str(pool_path), "--branches-dir", str(folder),
            "--threads", "1", "--checkpoint-every", "0.2"]
    env = {**os.environ, "GUARDDIAG_PROGRESS": "0"}
    rd = tmp_path / "killed/micro/T_A/seed=42"
    child = subprocess.Popen([*argv, "--runs-dir", str(tmp_path / "killed")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (rd / "checkpoint.safetensors").is_file():
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    assert not (rd / "meta.json").exists()  # killed mid-run, not after it finished

    resumed = subprocess.run([*argv, "--runs-dir", str(tmp_path / "killed")], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at step" in resumed.stdout + resumed.stderr
    straight = subprocess.run([*argv, "--runs-dir", str(tmp_path / "straight")], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    assert straight.returncode == 0, straight.stderr[-2000:]
    a = load_weights(tmp_path / "straight/micro/T_A/seed=42" / MODEL_FILE)
    b = load_weights(rd / MODEL_FILE)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_whitening_is_an_exact_reparametrisation_of_a_linear_head():
    from guarddiag.train import Whitening

    gen = torch.Generator().manual_seed(0)
    mix = torch.randn(8, 8, generator=gen)
    x = torch.randn(500, 8, generator=gen) @ mix + 3.0  # correlated, off-centre
    x[:, 7] = -x[:, :7].sum(1)  # a null direction, as after LayerNorm without bias
    w = Whitening.fit(x)
    assert w.dims == 7  # the null direction is left out
    z = w.apply(x)
    assert torch.allclose(torch.cov(z.T), torch.eye(7), atol=1e-3)
    head = torch.nn.Linear(8, 4)
    wz, bz, fixed = w.head_in(head)
    assert torch.allclose(z @ wz.T + bz, head(x), atol=1e-3)  # same outputs in either basis
    w2, b2 = w.head_out(wz, bz, fixed)
    assert torch.allclose(w2, head.weight, atol=1e-5)
    assert torch.allclose(b2, head.bias, atol=1e-4)
    # a step in the whitened basis never touches the weight along the left-out direction
    moved, _ = w.head_out(wz + 1.0, bz, fixed)
    null = w.null[:, 0]
    assert torch.allclose(moved @ null, head.weight.detach() @ null, atol=1e-5)


def test_cached_states_train_the_same_heads_as_recomputing(trained, pool_path):
    from guarddiag.model import load_guard

    _, runs, _ = trained
    guard = load_guard(runs / "micro/reference/seed=42")
    pool = read_pool(pool_path)
    rows = label_rows(sample_split(pool, "train", 120), fraction=1.0, anchors=False)
    res = bench_recalibrate(guard, rows, epochs=2, batch_size=32)
    assert res.max_abs_diff < 1e-3
    assert res.n_rows == 120
