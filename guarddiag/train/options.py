"""Options of a training run that come from the command line, not from its branch spec:
checkpointing, logging, pretrained encoder weights, threads, the device, and a test hook."""

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

    device: str = "auto"
    """``--device``: auto (CUDA when present, else the CPU), cpu, cuda, cuda:N or mps. On the
    CPU training is float32 and bit-for-bit what it always was."""
    micro_batch: int | None = None
    """Rows per forward pass; a step accumulates gradients over micro-batches up to the branch's
    batch size (for GPUs whose memory does not hold a whole batch). None: the whole batch."""
    compile: bool = False
    """``torch.compile`` the encoder (CUDA; slow to start, faster per step on long runs)."""
    wait_for_lock: bool = False
    """When another process holds a run's lock: wait for it (True) or stop with an error."""
