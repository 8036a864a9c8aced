"""The guard: an encoder (ModernBERT by default, or any Hugging Face encoder checkpoint) with
three linear heads, its tokenizer, and its files.

Heads (SPEC §3), all linear on the encoder's last hidden states:

* ``class_head``  — [CLS] state → 4 coarse classes (:data:`guarddiag.labels.CLASSES` order);
* ``pillar_head`` — [CLS] state → 24 harm pillars (multi-label);
* ``span_head``   — every token's state → 24 pillar tags (which tokens carry the harmful request).

At hidden size h the heads hold ``h·(4+24+24) + 52`` parameters: 39,988 for ModernBERT-base
(0.027 % of its 149 M), 20,020 for MiniLM-L6 (0.088 % of 22.7 M); the meta records the share.

A run folder holds ``model.safetensors`` (the whole guard: ``encoder.*`` and the heads),
``tokenizer.json`` (a `tokenizers` file) and ``meta.json`` (``model`` section: size, encoder
config, special token ids, max length, checkpoint). Weights are read from safetensors only: a
pickle checkpoint (``*.bin``, ``*.pt``…) is refused, because unpickling runs arbitrary code.

Modules: :mod:`~guarddiag.model.sizes` (the size table, no torch),
:mod:`~guarddiag.model.threads` (torch thread count), :mod:`~guarddiag.model.tokenizer`,
:mod:`~guarddiag.model.guard` (encoder + heads, seeded build), :mod:`~guarddiag.model.weights`
(safetensors I/O), :mod:`~guarddiag.model.store` (a guard in a run folder),
:mod:`~guarddiag.model.logits` (batched class logits, softmax) and
:mod:`~guarddiag.model.device` (``--device`` and the precision it implies). File names come from
:mod:`guarddiag.runs`.

Example (CPU, seconds)::

    tok = train_tokenizer(texts, vocab_size=2000)
    guard = build_guard(size="micro", tokenizer=tok, seed=42)
    save_guard(guard, tok, "runs/x", max_length=128)
"""

from __future__ import annotations

from guarddiag.model.device import DeviceSetup, Precision, pick_device, precision_for
from guarddiag.model.guard import (
    GuardHeads,
    GuardModel,
    GuardOutput,
    build_guard,
    encoder_config,
    length_sorted_batches,
    pad_batch,
    seeded_init,
    size_param_counts,
)
from guarddiag.model.logits import guard_logits, softmax
from guarddiag.model.sizes import (
    CPU_SIZES,
    N_CLASSES,
    N_PILLARS,
    SIZES,
    ModelSize,
    get_size,
    head_param_count,
    size_names,
    size_up,
)
from guarddiag.model.store import LoadedGuard, load_guard, model_meta, read_model_meta, save_guard
from guarddiag.model.threads import auto_threads, torch_threads
from guarddiag.model.tokenizer import (
    SPECIAL_TOKENS,
    GuardTokenizer,
    pretrained_tokenizer,
    train_tokenizer,
)
from guarddiag.model.weights import (
    PICKLE_SUFFIXES,
    check_safetensors,
    load_weights,
    save_weights,
    state_to_cpu,
)
from guarddiag.runs import META_FILE, MODEL_FILE, TOKENIZER_FILE

__all__ = [
    "CPU_SIZES",
    "META_FILE",
    "MODEL_FILE",
    "N_CLASSES",
    "N_PILLARS",
    "PICKLE_SUFFIXES",
    "SIZES",
    "SPECIAL_TOKENS",
    "TOKENIZER_FILE",
    "DeviceSetup",
    "GuardHeads",
    "GuardModel",
    "GuardOutput",
    "GuardTokenizer",
    "LoadedGuard",
    "ModelSize",
    "Precision",
    "auto_threads",
    "build_guard",
    "check_safetensors",
    "encoder_config",
    "get_size",
    "guard_logits",
    "head_param_count",
    "length_sorted_batches",
    "load_guard",
    "load_weights",
    "model_meta",
    "pad_batch",
    "pick_device",
    "precision_for",
    "pretrained_tokenizer",
    "read_model_meta",
    "save_guard",
    "save_weights",
    "seeded_init",
    "size_names",
    "size_param_counts",
    "size_up",
    "softmax",
    "state_to_cpu",
    "torch_threads",
    "train_tokenizer",
]
