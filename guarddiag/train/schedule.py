"""The learning-rate schedule (linear warm-up, linear decay) and the evaluation steps."""

from __future__ import annotations


def lr_at(step: int, *, total: int, peak: float, warmup: int) -> float:
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    remaining = max(total - warmup, 1)
    return peak * max(0.0, 1.0 - (step - warmup) / remaining)


def eval_steps(steps_per_epoch: int, epochs: int, per_epoch: int) -> set[int]:
    """Global step counts (after that many steps) at which the val split is evaluated."""
    out = set()
    for e in range(epochs):
        for k in range(1, per_epoch + 1):
            out.add(e * steps_per_epoch + max(1, round(k * steps_per_epoch / per_epoch)))
    return out

