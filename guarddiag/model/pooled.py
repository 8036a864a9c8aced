"""The guard of a frozen size: a pretrained encoder that never trains, its cached mean-pooled
states, and a trainable part over them (an MLP body and the three heads).

Routes keep their meaning (SPEC §3): hard labels and distillation train the body and the heads;
head-only recalibration trains the heads alone on the body's (fixed) output. The span head is
kept, so the heads are the study's three, but it has no per-token states to train on (the cache
holds one pooled state per prompt), so its loss is off at these sizes.

A run folder holds ``model.safetensors`` (``body.*`` and ``heads.*`` only: the encoder is the
checkpoint's file, named and pinned by sha256 in meta.json) and ``meta.json``; scoring a run
reloads the checkpoint and refuses one whose weights differ from those the run was trained on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from guarddiag import numerics
from guarddiag.errors import GuarddiagError
from guarddiag.model.guard import GuardHeads, GuardOutput, seeded_init
from guarddiag.model.lexical import lexical_features
from guarddiag.model.portable import PortableLinear, exact_sqrt
from guarddiag.model.sizes import EncoderSpec, ModelSize, get_size, head_param_count
from guarddiag.model.states import FrozenEncoder, frozen_encoder
from guarddiag.model.weights import load_weights, save_weights, state_to_cpu
from guarddiag.runs import MODEL_FILE

logger = logging.getLogger(__name__)

POOLED_KIND = "frozen-pooled"
"""``model.kind`` in the meta.json of a frozen-size run."""


class Standardize(nn.Module):
    """Each input feature shifted by the training rows' mean and scaled by their standard
    deviation, fixed once :meth:`fit` has seen them (buffers: saved with the weights, and frozen
    with the body on the head-only route). A feature that never varied in training reads 0.

    Own code, not sklearn's ``StandardScaler``: the statistics must live in the torch model's
    state (its safetensors file, the body the head-only route keeps) and be the same bytes on
    every CPU (float64 means, NumPy's IEEE square root)."""

    shift: torch.Tensor
    scale: torch.Tensor

    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("shift", torch.zeros(n))
        self.register_buffer("scale", torch.ones(n))

    def fit(self, x: torch.Tensor, *, block: int = 256) -> None:
        # ``block`` features at a time: a float64 copy of all 48,002 decoder states would take
        # 0.9 GB, twice over
        for start in range(0, x.shape[1], block):
            part = x[:, start:start + block].detach().double()
            mean = part.mean(0)
            std = exact_sqrt(((part - mean) ** 2).mean(0))
            self.shift[start:start + block] = mean.float()
            # 1/0 is inf in the branch where() drops
            self.scale[start:start + block] = torch.where(std > 0, 1.0 / std, 0.0).float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.shift) * self.scale


class PooledGuard(nn.Module):
    """A trainable MLP body over cached encoder states, and the three heads on its output."""

    def __init__(self, in_size: int, *, body_hidden: int, body_layers: int,
                 standardize: bool = False):
        super().__init__()
        layers: list[nn.Module] = [Standardize(in_size) if standardize
                                   else nn.LayerNorm(in_size, elementwise_affine=False)]
        width = in_size
        for _ in range(body_layers):
            layers += [PortableLinear(width, body_hidden), nn.GELU()]
            width = body_hidden
        self.body = nn.Sequential(*layers)
        self.heads = GuardHeads(width)
        self.in_size, self.width = in_size, width

    def fit_inputs(self, states: torch.Tensor) -> None:
        """Fit the input standardisation to the training rows' states (a body with the
        per-row norm has nothing to fit)."""
        if isinstance(self.body[0], Standardize):
            self.body[0].fit(states)

    def features(self, states: torch.Tensor) -> torch.Tensor:
        return self.body(states)

    def forward(self, states: torch.Tensor) -> GuardOutput:
        return self.heads_on(self.features(states))

    def heads_on(self, feats: torch.Tensor) -> GuardOutput:
        h = self.heads
        return GuardOutput(h.class_head(feats), h.pillar_head(feats), None)


def build_pooled(size: ModelSize | str, *, seed: int, in_size: int) -> PooledGuard:
    spec = get_size(size) if isinstance(size, str) else size
    if not spec.frozen:
        raise GuarddiagError(f"model size {spec.name}: not a frozen-encoder size")
    with seeded_init(seed):
        return PooledGuard(in_size, body_hidden=spec.body_hidden, body_layers=spec.body_layers,
                           standardize=spec.standardize)


def encoder_param_count(encoder: FrozenEncoder) -> int:
    return sum(p.numel() for p in encoder.model.parameters())


def pooled_meta(model: PooledGuard, encoder: FrozenEncoder, *, size: str) -> dict[str, Any]:
    """The ``model`` section of a frozen-size run's meta.json. ``head_share`` is of the whole
    guard (frozen encoder + body + heads), the study's 0.03 % measure; ``head_share_trainable``
    of what the full routes train (body + heads)."""
    n_trainable = sum(p.numel() for p in model.parameters())
    n_head = sum(p.numel() for p in model.heads.parameters())
    n_encoder = encoder_param_count(encoder)
    spec = get_size(size)
    # The encoder's record, with the pooling always named (every run's meta has had it).
    return {"size": size, "kind": POOLED_KIND, **encoder.spec.to_record(),
            "pooling": encoder.spec.pooling, "encoder": "frozen " + str(
                encoder.model.config.model_type), "encoder_key": encoder.key,
            "numeric": encoder.numeric, "kernels": numerics.active().tag,
            "lexical": spec.lexical, "in_size": model.in_size,
            "body_hidden": spec.body_hidden, "body_layers": spec.body_layers,
            **({"standardize": True} if spec.standardize else {}),
            "n_params": n_encoder + n_trainable, "n_encoder_params": n_encoder,
            "n_trainable_params": n_trainable, "n_head_params": n_head,
            "head_share": n_head / (n_encoder + n_trainable),
            "head_share_trainable": n_head / n_trainable}


def save_pooled(model: PooledGuard, encoder: FrozenEncoder, folder: str | Path, *,
                size: str) -> dict[str, Any]:
    """Write model.safetensors (body and heads); return the meta ``model`` section."""
    save_weights(state_to_cpu(model), Path(folder) / MODEL_FILE)
    return pooled_meta(model, encoder, size=size)


def is_pooled(model_section: dict[str, Any]) -> bool:
    return model_section.get("kind") == POOLED_KIND


def load_pooled(folder: str | Path, model_section: dict[str, Any]
                ) -> tuple[PooledGuard, FrozenEncoder]:
    """A frozen-size run's trainable part (eval mode) and its encoder, whose weights must be
    the ones it was trained on."""
    folder = Path(folder)
    sec = model_section
    encoder = frozen_encoder(EncoderSpec.from_record(sec),
                             numeric=str(sec.get("numeric", "fp32")))
    trained_on = str(sec.get("kernels", ""))
    if (encoder.key != sec.get("encoder_key") and trained_on
            and encoder.key_under(trained_on) == sec.get("encoder_key")):
        # the same encoder, weights and tokens; only the kernels that computed its states differ
        logger.warning(f"{folder}: trained on {trained_on} kernels, scored here on "
                       f"{numerics.active().tag}: its states differ in the last digits, so "
                       "its scores may too (GUARDDIAG_NUMERICS=portable reproduces on any CPU)")
    elif encoder.key != sec.get("encoder_key"):
        raise GuarddiagError(
            f"{folder}: checkpoint {sec['checkpoint']} is not the encoder this run was trained "
            f"on (state key {encoder.key}, the run's {sec.get('encoder_key')}); retrain it")
    with seeded_init(0):
        model = PooledGuard(int(sec["in_size"]), body_hidden=int(sec["body_hidden"]),
                            body_layers=int(sec["body_layers"]),
                            standardize=bool(sec.get("standardize", False)))
    state = load_weights(folder / MODEL_FILE)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise GuarddiagError(f"{folder / MODEL_FILE}: weights do not match the model in "
                             f"meta.json ({what})")
    model.eval()
    return model, encoder


def guard_inputs(encoder: FrozenEncoder, texts: Sequence[str], *, lexical: int = 0
                 ) -> np.ndarray:
    """What a frozen size's body reads for ``texts``: the cached states, and with ``lexical``
    buckets the texts' lexical features appended."""
    states = encoder.states(list(texts))
    if not lexical:
        return states
    return np.hstack([states, lexical_features(texts, lexical)])


def pooled_logits(model: PooledGuard, states: np.ndarray, *, batch_size: int = 4096
                  ) -> np.ndarray:
    """Class logits [n, 4] of cached states, float32 on the CPU."""
    out = np.zeros((len(states), 4), dtype=np.float32)
    with torch.inference_mode():
        for s in range(0, len(states), batch_size):
            x = torch.from_numpy(np.ascontiguousarray(states[s:s + batch_size]))
            out[s:s + batch_size] = model(x).class_logits.numpy()
    return out


def pooled_scorer(folder: str | Path, model_section: dict[str, Any]
                  ) -> Callable[[Sequence[str]], np.ndarray]:
    """Texts → class logits for a frozen-size run (states from the cache, else embedded)."""
    model, encoder = load_pooled(folder, model_section)
    lexical = int(model_section.get("lexical", 0))

    def score(texts: Sequence[str]) -> np.ndarray:
        return pooled_logits(model, guard_inputs(encoder, texts, lexical=lexical))
    return score


def trainable_param_counts(size: str) -> tuple[int, int]:
    """(body + head parameters, head parameters) of a frozen size, on the meta device."""
    spec = get_size(size)
    with torch.device("meta"):
        model = build_pooled(spec, seed=0, in_size=spec.in_size())
    heads = sum(p.numel() for p in model.heads.parameters())
    if heads != head_param_count(model.width):  # the heads are the study's three
        raise GuarddiagError(f"model size {size}: unexpected head shape")
    return sum(p.numel() for p in model.parameters()), heads
