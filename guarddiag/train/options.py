"""Options of a training run that come from the caller, not from its branch spec:
checkpointing, logging, pretrained encoder weights, threads, the device, and a test hook.

:class:`TrainOptions` is declared once: ``guarddiag train`` and ``guarddiag sweep`` build it
from their flags (an unset flag keeps the model's default), the Python API
(:func:`~guarddiag.train.train_branches`, :func:`~guarddiag.train.train_one`) and the runner
take the same object, so their defaults cannot drift (pinned in tests/test_train_options.py).
None of them changes what a run learns, so they stay out of the run fingerprint, except
``pretrained`` (the weights a size starts from).
"""

from __future__ import annotations

from pydantic import Field

from guarddiag.typed import Model


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by the ``stop_after_steps`` test hook, like a Ctrl-C after that many steps."""


class TrainOptions(Model):
    """How to train (where to checkpoint, which device, which pretrained weights)."""

    checkpoint_every_s: float = Field(default=60.0, gt=0.0)
    """Wall-clock seconds between resume checkpoints (also written at every evaluation)."""
    checkpoint_every_steps: int | None = Field(default=None, ge=1)
    """Also checkpoint every this many optimizer steps (None: by wall clock only)."""
    stop_after_steps: int | None = Field(default=None, ge=1)
    """Test hook: interrupt after this many optimizer steps in this process."""
    log_every: int = Field(default=20, ge=1)
    """Optimizer steps between lines of ``train_log.jsonl``."""
    eval_batch_size: int = Field(default=128, ge=1)
    """Rows per forward pass when evaluating on the val sample."""
    pretrained: dict[str, str] = Field(default_factory=dict)
    """size → checkpoint folder or hub id for pretrained encoder weights."""
    threads: int | None = Field(default=None, ge=1)
    """torch intra-op threads; None = :func:`guarddiag.model.auto_threads` of the plan."""
    device: str = "auto"
    """``--device``: auto (CUDA when present, else the CPU), cpu, cuda, cuda:N or mps. On the
    CPU training is float32 and bit-for-bit what it always was."""
    micro_batch: int | None = Field(default=None, ge=1)
    """Rows per forward pass; a step accumulates gradients over micro-batches up to the branch's
    batch size (for GPUs whose memory does not hold a whole batch). None: the whole batch."""
    compile: bool = False
    """``torch.compile`` the encoder (CUDA; slow to start, faster per step on long runs)."""
    wait_for_lock: bool = False
    """When another process holds a run's lock: wait for it (True) or stop with an error."""
