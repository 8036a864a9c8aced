"""A guard's class logits for a list of texts, in length-sorted batches, and their softmax."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES
from guarddiag.model.device import DeviceSetup
from guarddiag.model.guard import length_sorted_batches, pad_batch
from guarddiag.model.pooled import is_pooled, pooled_scorer
from guarddiag.model.store import LoadedGuard, load_guard, read_model_meta


def guard_logits(guard: LoadedGuard, texts: Sequence[str], *, batch_size: int = 64,
                 bucketed: bool = True, max_length: int | None = None) -> np.ndarray:
    """Class logits [n, 4] in input order.

    ``bucketed`` sorts prompts by token length and pads each batch to its longest prompt;
    ``bucketed=False`` keeps input order and pads every batch to ``max_length`` (only for the
    ``bench predict`` contrast). Runs where the guard's weights are (:func:`load_guard`'s
    ``device``): on CUDA under bf16 autocast; on the CPU in float32 as always.
    """
    if batch_size < 1:
        raise GuarddiagError(f"batch size must be at least 1, got {batch_size}")
    max_length = max_length or guard.max_length
    ids = guard.tokenizer.encode_ids(list(texts), max_length=max_length)
    out = np.zeros((len(ids), len(CLASSES)), dtype=np.float32)
    if bucketed:
        batches = length_sorted_batches([len(x) for x in ids], batch_size)
    else:
        batches = [list(range(i, min(i + batch_size, len(ids))))
                   for i in range(0, len(ids), batch_size)]
    model = guard.model
    model.eval()
    setup = DeviceSetup.of(next(model.parameters()).device)
    with torch.inference_mode():
        for idx in batches:
            x, mask = pad_batch([ids[i] for i in idx], pad_id=guard.tokenizer.pad_id,
                                length=None if bucketed else max_length)
            with setup.autocast():
                logits = model(setup.put(x), setup.put(mask), with_span=False).class_logits
            out[idx] = logits.float().cpu().numpy()
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (rows of class logits → class probabilities), by torch: its
    exp is one code on every CPU on the portable path, where NumPy's float64 exp has an AVX-512
    variant of its own."""
    z = torch.from_numpy(np.asarray(logits, dtype=np.float64))
    return torch.softmax(z, dim=1).numpy()


def run_scorer(run_dir: str | Path, *, batch_size: int = 64, device: torch.device | None = None
               ) -> Callable[[Sequence[str]], np.ndarray]:
    """Texts → class logits [n, 4] for any run folder: a fine-tuned guard (:func:`load_guard`,
    on ``device``), or a frozen-size run (cached encoder states, the CPU;
    :mod:`guarddiag.model.pooled`). Every caller that scores a run goes through here."""
    section = read_model_meta(run_dir)["model"]
    if is_pooled(section):
        return pooled_scorer(run_dir, section)
    guard = load_guard(run_dir, device=device)
    return lambda texts: guard_logits(guard, texts, batch_size=batch_size)
