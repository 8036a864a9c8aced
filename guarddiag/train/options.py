"""Options of a training run that come from the command line, not from its branch spec:
checkpointing, logging, pretrained encoder weights, threads, and a test hook."""

from __future__ import annotations

from dataclasses import dataclass, field


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by the ``stop_after_steps`` test hook, like a Ctrl-C after that many steps."""


@dataclass
class RunOptions:
    checkpoint_every_s: float = 60.0
    """Wall-clock seconds between resume checkpoints (also written at every evaluation)."""
    checkpoint_every_steps: int | None = None
    stop_after_steps: int | None = None
    """Test hook: interrupt after this many optimizer steps in this process."""
    log_every: int = 20
    eval_batch_size: int = 128
    pretrained: dict[str, str] = field(default_factory=dict)
    """size → checkpoint folder or hub id for pretrained encoder weights."""
    threads: int | None = None
    """torch intra-op threads; None = :func:`guarddiag.model.auto_threads` of the plan."""

