"""The size table: encoder shapes from micro (CPU, random init) to ModernBERT-large.

Plain data and arithmetic: this module itself needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from guarddiag.errors import unknown_name
from guarddiag.labels import CLASSES

N_CLASSES = len(CLASSES)
N_PILLARS = 24
"""Pillar heads are sized by the taxonomy in data_manifests/policies/pillars.yaml (24 ids)."""


@dataclass(frozen=True)
class ModelSize:
    """One row of the size table."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int
    """Target vocabulary of a tokenizer trained offline (a checkpoint brings its own)."""
    global_attn_every_n_layers: int
    """1 = every layer attends globally; ModernBERT itself alternates 1 global : 2 local."""
    max_position_embeddings: int = 8192
    pretrained: str | None = None
    """Public checkpoint of this shape, for ``--checkpoint SIZE=…`` (not fetched by default)."""


SIZES: dict[str, ModelSize] = {
    s.name: s for s in (
        # CPU sizes, random init. micro is the demo student (≈0.55M parameters with an 8k
        # vocabulary), tiny its teachers. Two layers of global attention: at these lengths local
        # windows only cost mask building.
        ModelSize("micro", 64, 2, 2, 128, 8192, 1, 512),
        ModelSize("tiny", 128, 2, 4, 256, 8192, 1, 512),
        ModelSize("small", 384, 6, 6, 576, 16384, 3, 8192),
        ModelSize("base", 768, 22, 12, 1152, 50368, 3, 8192, "answerdotai/ModernBERT-base"),
        ModelSize("large", 1024, 28, 16, 2624, 50368, 3, 8192, "answerdotai/ModernBERT-large"),
    )
}
SIZE_ORDER: tuple[str, ...] = tuple(SIZES)


CPU_SIZES = ("micro", "tiny")


def get_size(name: str, *, where: str | None = None) -> ModelSize:
    try:
        return SIZES[name]
    except KeyError:
        raise unknown_name("model size", name, SIZE_ORDER, where) from None


def size_up(name: str) -> str:
    """The next size up (micro→tiny, base→large); ``large`` stays ``large``."""
    i = SIZE_ORDER.index(get_size(name).name)
    return SIZE_ORDER[min(i + 1, len(SIZE_ORDER) - 1)]


def head_param_count(hidden_size: int) -> int:
    """Parameters of the three heads: weights h·(4+24+24) plus 52 biases."""
    return hidden_size * (N_CLASSES + 2 * N_PILLARS) + N_CLASSES + 2 * N_PILLARS

