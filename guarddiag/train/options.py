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

from typing import Annotated

from pydantic import Field, field_validator

from guarddiag.errors import unknown_name
from guarddiag.model.sizes import SIZES, size_names
from guarddiag.typed import Model, field_error, name_list, validate


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


class PlanOptions(Model):
    """Which runs a training plan holds: ``branches`` × ``sizes`` × ``seeds``, plus the runs
    they depend on (``guarddiag train``, ``train plan``, ``sweep`` and the API share it)."""

    branches: str | tuple[str, ...] = "all"
    """'all' or comma-separated branch names (e.g. E1,E8)."""
    sizes: tuple[str, ...] = Field(default=("micro",), min_length=1)
    """Model sizes, comma-separated, each a name of the size table
    (:data:`guarddiag.model.sizes.SIZES`): micro, tiny (random init, CPU), minilm and the other
    frozen pretrained sizes, small, base, large (ModernBERT-base/-large shapes)."""
    seeds: tuple[Annotated[int, Field(ge=0)], ...] = Field(default=(42,), min_length=1)
    """Comma-separated training seeds, e.g. 42,43,44."""

    @field_validator("branches", "sizes", "seeds", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str) and value.strip() != "all":
            return name_list(value)
        return value

    @field_validator("sizes")
    @classmethod
    def _known_sizes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name not in SIZES:
                raise field_error(str(unknown_name("model size", name, size_names())))
        return value

    @classmethod
    def of(cls, **fields: object) -> PlanOptions:
        """The plan with the fields given (None: the default)."""
        return validate(cls, {k: v for k, v in fields.items() if v is not None},
                        where="plan options")
