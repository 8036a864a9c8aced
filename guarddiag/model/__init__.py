"""The guard: a ModernBERT encoder with three linear heads, its tokenizer, and its files.

Heads (SPEC §3), all linear on the encoder's last hidden states:

* ``class_head``  — [CLS] state → 4 coarse classes (:data:`guarddiag.labels.CLASSES` order);
* ``pillar_head`` — [CLS] state → 24 harm pillars (multi-label);
* ``span_head``   — every token's state → 24 pillar tags (which tokens carry the harmful request).

At hidden size h the heads hold ``h·(4+24+24) + 52`` parameters: 39,988 for ModernBERT-base.

A run folder holds ``model.safetensors`` (the whole guard: ``encoder.*`` and the heads),
``tokenizer.json`` (a `tokenizers` file) and ``meta.json`` (``model`` section: size, encoder
config, special token ids, max length, checkpoint). Weights are read from safetensors only: a
pickle checkpoint (``*.bin``, ``*.pt``…) is refused, because unpickling runs arbitrary code.

Example (CPU, seconds)::

    tok = train_tokenizer(texts, vocab_size=2000)
    guard = build_guard(size="micro", tokenizer=tok, seed=42)
    save_guard(guard, tok, "runs/x", max_length=128)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import nn

from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.labels import CLASSES

N_CLASSES = len(CLASSES)
N_PILLARS = 24
"""Pillar heads are sized by the taxonomy in data_manifests/policies/pillars.yaml (24 ids)."""

MODEL_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


# ----------------------------------------------------------------------------- size table

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


def auto_threads(sizes: Iterable[str]) -> int | None:
    """Intra-op threads for training/scoring these sizes: 1 for the CPU sizes, else None
    (torch's default). Matrices of width 64-128 gain little from a second thread, and on a
    shared 2-core machine two spinning OpenMP threads per process made training ~10x slower
    (measured: 1,189 vs 41 examples/s for micro under a load of 5)."""
    sizes = list(sizes)
    return 1 if sizes and all(s in CPU_SIZES for s in sizes) else None


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Use ``n`` intra-op threads inside the block (None: leave torch's setting), then restore."""
    if n is None:
        yield
        return
    if n < 1:
        raise GuarddiagError(f"--threads: expected at least 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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


# ----------------------------------------------------------------------------- tokenizer

class GuardTokenizer:
    """A `tokenizers` tokenizer that adds [CLS] … [SEP] and knows its special ids."""

    def __init__(self, tokenizer: Tokenizer, *, cls_token: str = "[CLS]",
                 sep_token: str = "[SEP]", pad_token: str = "[PAD]"):
        ids = {}
        for role, token in (("cls", cls_token), ("sep", sep_token), ("pad", pad_token)):
            tid = tokenizer.token_to_id(token)
            if tid is None:
                raise GuarddiagError(f"tokenizer: special token {token!r} ({role}) is missing")
            ids[role] = tid
        self.tokenizer = tokenizer
        self.cls_id: int = ids["cls"]
        self.sep_id: int = ids["sep"]
        self.pad_id: int = ids["pad"]
        self.tokens = {"cls": cls_token, "sep": sep_token, "pad": pad_token}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def special_ids(self) -> dict[str, int]:
        # ModernBERT uses [CLS] as BOS and [SEP] as EOS.
        return {"pad_token_id": self.pad_id, "cls_token_id": self.cls_id,
                "sep_token_id": self.sep_id, "bos_token_id": self.cls_id,
                "eos_token_id": self.sep_id}

    def encode(self, texts: Sequence[str], *, max_length: int) -> list[Any]:
        """`tokenizers` encodings, truncated to ``max_length`` tokens including [CLS]/[SEP]."""
        tok = self.tokenizer
        tok.enable_truncation(max_length=max_length)
        tok.no_padding()
        encodings = tok.encode_batch(list(texts))
        for enc in encodings[:1]:
            if not enc.ids or enc.ids[0] != self.cls_id:
                raise GuarddiagError("tokenizer: encodings must start with the [CLS] token "
                                     "(its post-processor does not add it)")
        return encodings

    def encode_ids(self, texts: Sequence[str], *, max_length: int) -> list[list[int]]:
        return [enc.ids for enc in self.encode(texts, max_length=max_length)]

    def save(self, folder: str | Path) -> Path:
        from guarddiag.files import write_text

        path = Path(folder) / TOKENIZER_FILE
        write_text(self.tokenizer.to_str(), path)
        return path

    def describe(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "vocab_size": self.vocab_size}

    @classmethod
    def load(cls, folder: str | Path, *, tokens: dict[str, str] | None = None
             ) -> GuardTokenizer:
        path = Path(folder) / TOKENIZER_FILE
        if not path.is_file():
            raise GuarddiagError(f"{path}: tokenizer file not found")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust library raises plain Exceptions
            raise GuarddiagError(f"{path}: cannot read tokenizer ({exc})") from None
        tokens = tokens or {}
        return cls(tok, cls_token=tokens.get("cls", "[CLS]"),
                   sep_token=tokens.get("sep", "[SEP]"), pad_token=tokens.get("pad", "[PAD]"))


def train_tokenizer(texts: Iterable[str], *, vocab_size: int) -> GuardTokenizer:
    """Train a lower-cased BPE tokenizer offline on ``texts`` (the pool's training split).

    NFKC + lower-casing keeps the vocabulary small; the normalisers keep character offsets
    aligned with the original text, which the span head's token targets need.
    """
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    # BertNormalizer spaces out CJK characters, so Chinese/Japanese prompts split per
    # character instead of becoming one unknown "word".
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                   strip_accents=False, lowercase=True)])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=list(SPECIAL_TOKENS), limit_alphabet=1000,
                                  show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return GuardTokenizer(tok)


def pretrained_tokenizer(checkpoint: str) -> GuardTokenizer:
    """The checkpoint's own (fast) tokenizer, via transformers."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(checkpoint)
    except (OSError, ValueError) as exc:
        raise GuarddiagError(f"checkpoint {checkpoint}: cannot load its tokenizer "
                             f"({str(exc).splitlines()[0]})") from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise GuarddiagError(f"checkpoint {checkpoint}: needs a fast (tokenizer.json) tokenizer")
    # Round-trip through JSON so truncation settings never leak into the checkpoint's object.
    tok = Tokenizer.from_str(backend.to_str())
    return GuardTokenizer(tok, cls_token=hf.cls_token or "[CLS]",
                          sep_token=hf.sep_token or "[SEP]", pad_token=hf.pad_token or "[PAD]")


# ----------------------------------------------------------------------------- model

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
        self.class_head = nn.Linear(hidden_size, N_CLASSES)
        self.pillar_head = nn.Linear(hidden_size, N_PILLARS)
        self.span_head = nn.Linear(hidden_size, N_PILLARS)


class GuardModel(nn.Module):
    """ModernBERT encoder + the three heads."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
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


def encoder_config(size: ModelSize, *, vocab_size: int, special_ids: dict[str, int]) -> Any:
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
def _seeded(seed: int) -> Iterator[None]:
    # Weight init draws from torch's global generator; fork it so building a model neither
    # depends on nor disturbs anyone else's random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def build_guard(*, size: str, tokenizer: GuardTokenizer, seed: int,
                checkpoint: str | None = None) -> GuardModel:
    """A guard of the given size; pretrained encoder weights when ``checkpoint`` is given.

    ``checkpoint`` is a local folder or a hub id readable by ``from_pretrained``; only its
    safetensors weights are read.
    """
    from transformers import ModernBertModel

    spec = get_size(size)
    with _seeded(seed):
        if checkpoint:
            try:
                encoder = ModernBertModel.from_pretrained(
                    checkpoint, use_safetensors=True, attn_implementation="sdpa")
            except (OSError, ValueError) as exc:
                raise GuarddiagError(
                    f"checkpoint {checkpoint}: cannot load ModernBERT safetensors weights "
                    f"({str(exc).splitlines()[0]})") from None
            if encoder.config.vocab_size < tokenizer.vocab_size:
                raise GuarddiagError(
                    f"checkpoint {checkpoint}: vocabulary {encoder.config.vocab_size} is smaller "
                    f"than its tokenizer's ({tokenizer.vocab_size})")
        else:
            encoder = ModernBertModel(encoder_config(
                spec, vocab_size=tokenizer.vocab_size, special_ids=tokenizer.special_ids()))
        encoder.config._attn_implementation = "sdpa"
        return GuardModel(encoder)


# ----------------------------------------------------------------------------- files

def model_meta(model: GuardModel, tokenizer: GuardTokenizer, *, size: str, max_length: int,
               checkpoint: str | None) -> dict[str, Any]:
    """The ``model`` section of a run's meta.json: everything :func:`load_guard` needs."""
    cfg = model.config.to_dict()
    for key in ("_attn_implementation_autoset", "transformers_version", "architectures",
                "dtype", "torch_dtype"):
        cfg.pop(key, None)
    return {"size": size, "max_length": int(max_length), "checkpoint": checkpoint,
            "encoder_config": cfg, "tokenizer": tokenizer.describe(),
            "n_params": sum(p.numel() for p in model.parameters()),
            "n_head_params": sum(p.numel() for p in model.heads.parameters())}


def state_to_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}


def save_weights(state: dict[str, torch.Tensor], path: str | Path) -> Path:
    """Write tensors as safetensors, atomically."""
    from safetensors.torch import save_file

    from guarddiag.files import atomic_path

    with atomic_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp),
                  metadata={"format": "pt"})
    return Path(path)


def check_safetensors(path: str | Path) -> Path:
    """Refuse anything that is not a safetensors file, before any bytes are deserialised."""
    path = Path(path)
    if path.suffix.lower() in _PICKLE_SUFFIXES:
        raise GuarddiagError(f"{path}: refusing a pickle checkpoint ({path.suffix}); guarddiag "
                             f"loads weights from .safetensors files only")
    if not path.is_file():
        raise GuarddiagError(f"{path}: weights file not found")
    with open(path, "rb") as fh:
        head = fh.read(9)
    # safetensors: 8-byte little-endian header length, then a JSON object.
    ok = len(head) == 9 and head[8:9] == b"{"
    if ok:
        (n,) = struct.unpack("<Q", head[:8])
        ok = 0 < n < path.stat().st_size
    if not ok:
        raise GuarddiagError(f"{path}: not a safetensors file (a pickle or other format is "
                             f"refused); re-save the weights with safetensors")
    return path


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    path = check_safetensors(path)
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise GuarddiagError(f"{path}: corrupt safetensors file ({exc})") from None


def save_guard(model: GuardModel, tokenizer: GuardTokenizer, folder: str | Path, *,
               size: str, max_length: int, checkpoint: str | None = None) -> dict[str, Any]:
    """Write model.safetensors and tokenizer.json; return the meta ``model`` section.

    The caller writes meta.json (with :func:`guarddiag.files.write_meta`) last, so a folder
    with a meta.json is a finished run.
    """
    folder = Path(folder)
    save_weights(state_to_cpu(model), folder / MODEL_FILE)
    tokenizer.save(folder)
    return model_meta(model, tokenizer, size=size, max_length=max_length, checkpoint=checkpoint)


@dataclass(frozen=True)
class LoadedGuard:
    model: GuardModel
    tokenizer: GuardTokenizer
    max_length: int
    meta: dict[str, Any]


def read_model_meta(folder: str | Path) -> dict[str, Any]:
    from guarddiag.files import read_json

    path = Path(folder) / META_FILE
    meta = read_json(path)
    if not isinstance(meta, dict) or not isinstance(meta.get("model"), dict):
        raise GuarddiagError(f'{path} field "model": missing; not a guarddiag run folder')
    return meta


def load_guard(folder: str | Path) -> LoadedGuard:
    """Load a run folder written by :func:`save_guard` (safetensors only), in eval mode."""
    from transformers import ModernBertConfig, ModernBertModel

    folder = Path(folder)
    weights = folder / MODEL_FILE
    if not weights.exists():
        pickles = sorted(p.name for p in folder.glob("*") if p.suffix in _PICKLE_SUFFIXES)
        if pickles:
            raise GuarddiagError(f"{folder / pickles[0]}: refusing a pickle checkpoint; "
                                 f"guarddiag loads {MODEL_FILE} only")
        raise GuarddiagError(f"{weights}: weights file not found")
    state = load_weights(weights)
    meta = read_model_meta(folder)
    section = meta["model"]
    tokenizer = GuardTokenizer.load(folder, tokens=section.get("tokenizer", {}).get("tokens"))
    cfg = ModernBertConfig.from_dict(dict(section["encoder_config"]))
    with _seeded(0):
        encoder = ModernBertModel(cfg)
    encoder.config._attn_implementation = "sdpa"
    model = GuardModel(encoder)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise GuarddiagError(f"{weights}: weights do not match the model in meta.json ({what})")
    model.eval()
    return LoadedGuard(model, tokenizer, int(section["max_length"]), meta)


