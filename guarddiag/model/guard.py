"""The guard model: an encoder (ModernBERT by default, or any Hugging Face encoder checkpoint)
and three linear heads, built seeded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from guarddiag.errors import GuarddiagError
from guarddiag.model.portable import PortableLinear, use_portable_linears
from guarddiag.model.sizes import N_CLASSES, N_PILLARS, ModelSize, get_size
from guarddiag.model.tokenizer import GuardTokenizer, SpecialIds
from guarddiag.progress import library_bars_follow_ours

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class GuardOutput:
    class_logits: torch.Tensor
    """[batch, 4]"""
    pillar_logits: torch.Tensor
    """[batch, 24]"""
    span_logits: torch.Tensor | None
    """[batch, tokens, 24], or None when not asked for."""


class GuardHeads(nn.Module):
    """The three linear heads; applied to cached encoder states in head-only training."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.class_head = PortableLinear(hidden_size, N_CLASSES)
        self.pillar_head = PortableLinear(hidden_size, N_PILLARS)
        self.span_head = PortableLinear(hidden_size, N_PILLARS)


class GuardModel(nn.Module):
    """An encoder (ModernBERT, or any ``AutoModel`` encoder) + the three heads."""

    def __init__(self, encoder: PreTrainedModel):
        super().__init__()
        self.encoder = use_portable_linears(encoder)
        hidden = encoder.config.hidden_size
        self.heads = GuardHeads(hidden)

    @property
    def config(self) -> Any:
        return self.encoder.config

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Last hidden states [batch, tokens, hidden]."""
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                with_span: bool = True) -> GuardOutput:
        states = self.encode(input_ids, attention_mask)
        return self.heads_on(states, with_span=with_span)

    def heads_on(self, states: torch.Tensor, *, with_span: bool = True) -> GuardOutput:
        cls_state = states[:, 0]
        h = self.heads
        return GuardOutput(h.class_head(cls_state), h.pillar_head(cls_state),
                           h.span_head(states) if with_span else None)

    def encoder_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if k.startswith("encoder.")}


def pad_batch(ids: Sequence[Sequence[int]], *, pad_id: int,
              length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id lists to ``length`` (default: the longest); ids and attention mask."""
    width = length if length is not None else max(len(x) for x in ids)
    out = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):
        n = min(len(row), width)
        out[i, :n] = torch.as_tensor(row[:n], dtype=torch.long)
        mask[i, :n] = 1
    return out, mask


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), so each batch pads to
    its own longest prompt instead of the global maximum. Ties keep input order."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def encoder_config(size: ModelSize, *, vocab_size: int, special_ids: SpecialIds) -> Any:
    """A ModernBertConfig of the size's shape for a vocabulary trained here."""
    from transformers import ModernBertConfig

    n = size.num_hidden_layers
    every = size.global_attn_every_n_layers
    # transformers 5 describes the global/local pattern per layer (`layer_types`).
    layer_types = ["full_attention" if i % every == 0 else "sliding_attention"
                   for i in range(n)]
    # A vocabulary that is not ModernBERT's needs its own special ids: the defaults (50281…)
    # would index past the embedding table.
    return ModernBertConfig(
        vocab_size=vocab_size, hidden_size=size.hidden_size, num_hidden_layers=n,
        num_attention_heads=size.num_attention_heads, intermediate_size=size.intermediate_size,
        max_position_embeddings=size.max_position_embeddings, layer_types=layer_types,
        **special_ids)


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    # Weight init draws from torch's global generator; fork it so building a model neither
    # depends on nor disturbs anyone else's random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def build_guard(*, size: str, tokenizer: GuardTokenizer, seed: int,
                checkpoint: str | None = None) -> GuardModel:
    """A guard of the given size; pretrained encoder weights when ``checkpoint`` is given.

    ``checkpoint`` is a local folder or a hub id of any Hugging Face encoder (``AutoModel``:
    ModernBERT, BERT, MiniLM…) readable by ``from_pretrained``; only its safetensors weights
    are read. Without it the size's ModernBERT shape is built from random init.
    """
    from transformers import ModernBertModel

    spec = get_size(size)
    with seeded_init(seed):
        if checkpoint:
            encoder = load_pretrained_encoder(checkpoint)
            if encoder.config.vocab_size < tokenizer.vocab_size:
                raise GuarddiagError(
                    f"checkpoint {checkpoint}: vocabulary {encoder.config.vocab_size} is smaller "
                    f"than its tokenizer's ({tokenizer.vocab_size})")
        else:
            encoder = ModernBertModel(encoder_config(
                spec, vocab_size=tokenizer.vocab_size, special_ids=tokenizer.special_ids()))
        if encoder.config.model_type == "modernbert":
            encoder.config._attn_implementation = "sdpa"
        return GuardModel(encoder)


def load_pretrained_encoder(checkpoint: str) -> Any:
    """Any Hugging Face encoder's safetensors weights, with SDPA attention where the
    architecture has it (else its default attention)."""
    from transformers import AutoModel

    library_bars_follow_ours()
    try:
        try:
            return AutoModel.from_pretrained(checkpoint, use_safetensors=True,
                                             attn_implementation="sdpa")
        except ValueError as exc:
            if "sdpa" not in str(exc).lower() and "attention" not in str(exc).lower():
                raise
            return AutoModel.from_pretrained(checkpoint, use_safetensors=True)
    except (OSError, ValueError, KeyError) as exc:
        raise GuarddiagError(
            f"checkpoint {checkpoint}: cannot load encoder safetensors weights "
            f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None


def encoder_from_config(config: dict[str, Any]) -> Any:
    """An encoder with random weights from a saved ``encoder_config`` (a run's meta.json):
    ModernBERT as before, any other ``model_type`` through ``AutoModel``."""
    from transformers import AutoConfig, AutoModel, ModernBertConfig, ModernBertModel

    config = dict(config)
    model_type = config.get("model_type", "modernbert")
    if model_type == "modernbert":
        encoder = ModernBertModel(ModernBertConfig.from_dict(config))
        encoder.config._attn_implementation = "sdpa"
        return encoder
    config.pop("model_type", None)
    try:
        cfg = AutoConfig.for_model(model_type, **config)
    except (ValueError, KeyError) as exc:
        raise GuarddiagError(f"encoder model_type {model_type!r}: not an architecture this "
                             f"transformers knows ({exc})") from None
    return AutoModel.from_config(cfg)


def size_param_counts(size: str) -> tuple[int, int]:
    """(all parameters, head parameters) of a random-init guard of ``size`` with the size's
    own vocabulary, counted on the meta device (no memory, no init)."""
    from transformers import ModernBertModel

    spec = get_size(size)
    special: SpecialIds = {"pad_token_id": 0, "cls_token_id": 2, "sep_token_id": 3,
                           "bos_token_id": 2, "eos_token_id": 3}
    with torch.device("meta"):
        model = GuardModel(ModernBertModel(encoder_config(
            spec, vocab_size=spec.vocab_size, special_ids=special)))
    total = sum(p.numel() for p in model.parameters())
    return total, sum(p.numel() for p in model.heads.parameters())
