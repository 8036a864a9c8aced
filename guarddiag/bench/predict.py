"""``bench predict``: examples/s of length-bucketed batches vs input-order batches padded to the
maximum length."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from guarddiag.model.logits import guard_logits, softmax
from guarddiag.model.store import LoadedGuard


@dataclass(frozen=True)
class BenchPredictResult:
    n_texts: int
    batch_size: int
    max_length: int
    mean_tokens: float
    bucketed_ex_per_s: float
    padded_ex_per_s: float
    max_abs_diff: float
    """Largest difference in class probability between the two paths (should be ~1e-6)."""

    @property
    def speedup(self) -> float:
        return self.bucketed_ex_per_s / self.padded_ex_per_s

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{**asdict(self), "speedup": self.speedup}])


def bench_predict(guard: LoadedGuard, texts: Sequence[str], *, batch_size: int = 64,
                  repeats: int = 1) -> BenchPredictResult:
    """examples/s of length-bucketed batching vs input-order batches padded to max length."""
    texts = list(texts)
    lengths = [len(x) for x in guard.tokenizer.encode_ids(texts, max_length=guard.max_length)]
    guard_logits(guard, texts[: batch_size * 2], batch_size=batch_size)  # warm-up

    def timed(bucketed: bool) -> tuple[float, np.ndarray]:
        best = float("inf")
        out = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = guard_logits(guard, texts, batch_size=batch_size, bucketed=bucketed)
            best = min(best, time.perf_counter() - t0)
        if out is None:
            raise ValueError(f"bench_predict: repeats must be at least 1, got {repeats}")
        return len(texts) / best, out

    fast, a = timed(True)
    slow, b = timed(False)
    diff = float(np.abs(softmax(a) - softmax(b)).max()) if len(texts) else 0.0
    return BenchPredictResult(len(texts), batch_size, guard.max_length,
                              float(np.mean(lengths)) if lengths else 0.0, fast, slow, diff)
