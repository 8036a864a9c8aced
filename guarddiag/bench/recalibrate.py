"""``bench recalibrate``: head-only training on cached encoder states vs re-running the
frozen encoder for every batch."""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass
from functools import partial

import polars as pl
import torch

from guarddiag.model.store import LoadedGuard
from guarddiag.train.batches import encode_rows
from guarddiag.train.head_only import (
    encoder_states,
    fit_whitening,
    recomputing_features,
    train_heads,
)
from guarddiag.train.losses import LossWeights
from guarddiag.train.rows import LabelledRows


@dataclass(frozen=True)
class BenchRecalibrateResult:
    n_rows: int
    epochs: int
    cache_s: float
    """One encoder pass over the calibration rows."""
    cached_train_s: float
    """Head training on the cached states, all epochs."""
    recompute_train_s: float
    """Head training that re-runs the frozen encoder for every batch, all epochs."""
    max_abs_diff: float
    """Largest difference between the two routes' class probabilities on the calibration
    rows (float rounding of differently padded batches, compounded over the steps)."""

    @property
    def speedup(self) -> float:
        return self.recompute_train_s / (self.cache_s + self.cached_train_s)

    @property
    def per_epoch_speedup(self) -> float:
        return self.recompute_train_s / max(self.cached_train_s, 1e-9)

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{**asdict(self), "speedup": self.speedup,
                              "per_epoch_speedup": self.per_epoch_speedup}])


def bench_recalibrate(guard: LoadedGuard, rows: LabelledRows, *, epochs: int = 10,
                      batch_size: int = 64, lr: float = 0.1, seed: int = 0
                      ) -> BenchRecalibrateResult:
    """Head-only training with cached encoder states vs re-running the encoder per batch.

    Both start from the same heads and see the same batches, so they must end at the same
    weights (up to float rounding of differently padded batches)."""
    enc = encode_rows(guard.tokenizer, rows, max_length=guard.max_length)
    weights = LossWeights()
    train = partial(train_heads, classes=rows.classes, pillars=rows.pillars, epochs=epochs,
                    lr=lr, batch_size=batch_size, weight_decay=0.0, seed=seed, weights=weights)
    cached_model = copy.deepcopy(guard.model)
    t0 = time.perf_counter()
    feats = encoder_states(cached_model, enc, rows, pad_id=guard.tokenizer.pad_id)
    t1 = time.perf_counter()
    train(cached_model, features=feats.rows, whitening=fit_whitening(feats))
    t2 = time.perf_counter()
    slow_model = copy.deepcopy(guard.model)
    # The recomputing route needs the same whitening statistics, i.e. one full pass of its
    # own (counted in its time), then re-runs the encoder for every batch.
    stats = encoder_states(slow_model, enc, rows, pad_id=guard.tokenizer.pad_id)
    train(slow_model, features=recomputing_features(slow_model, enc, rows,
                                                    pad_id=guard.tokenizer.pad_id),
          whitening=fit_whitening(stats))
    t3 = time.perf_counter()
    with torch.no_grad():
        p_cached = torch.softmax(cached_model.heads.class_head(feats.cls), -1)
        p_slow = torch.softmax(slow_model.heads.class_head(feats.cls), -1)
        diff = float((p_cached - p_slow).abs().max())
    return BenchRecalibrateResult(len(rows), epochs, t1 - t0, t2 - t1, t3 - t2, diff)
