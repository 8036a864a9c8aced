"""Scoring texts with a finished run, and the shape of one subset's scores.

A subset to score is a :class:`ScoringInput` (ids, texts and the digest that keys the score
cache); its scores are one row per prompt with the four class probabilities
(:func:`score_frame`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import PROB_COLUMNS
from guarddiag.model.device import pick_device
from guarddiag.model.logits import run_scorer, softmax
from guarddiag.runs import SCORES_SCHEMA

POOL_VAL = "pool_val"
"""Benchmark id of the pool's val split in the predictions table."""


def score_texts(run_dir: str | Path, texts: Sequence[str], *, batch_size: int = 64,
                device: str = "auto") -> np.ndarray:
    """Class probabilities [n, 4] (labels.CLASSES order) of a finished run for ``texts``,
    on ``device`` (auto: CUDA when present, else the CPU; cpu, cuda, cuda:N or mps)."""
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise GuarddiagError(f"texts[{i}]: empty or non-string text")
    scorer = run_scorer(run_dir, batch_size=batch_size, device=pick_device(device))
    return softmax(scorer(texts))


@dataclass(frozen=True)
class ScoringInput:
    """One benchmark (or the pool's val split) to score: ids, texts and a digest."""

    benchmark: str
    prompt_ids: list[str]
    texts: list[str]
    sha256: str


def score_frame(inp: ScoringInput, probs: np.ndarray) -> pl.DataFrame:
    """One subset's scores: a row per prompt with its class probabilities [n, 4]."""
    return pl.DataFrame({"benchmark": [inp.benchmark] * len(inp.prompt_ids),
                         "prompt_id": inp.prompt_ids,
                         **{c: probs[:, j] for j, c in enumerate(PROB_COLUMNS)}},
                        schema=SCORES_SCHEMA)
