"""Where a guard runs (``--device auto|cpu|cuda|cuda:N|mps``) and at what precision.

The choices are pure functions of what the machine has (:func:`resolve_device`,
:func:`precision_for`), so they are tested on any machine; :func:`pick_device` asks torch.

On the CPU nothing changes: no autocast, no scaler, tensors stay where they are — the CPU path
is today's code path, so CPU results stay byte-identical. On CUDA the forward pass runs under
bf16 autocast (fp16 with a gradient scaler on GPUs without bf16) and batches are copied from
pinned memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from guarddiag.errors import GuarddiagError

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N or mps"


def resolve_device(spec: str | None, *, n_cuda: int, mps: bool = False) -> str:
    """The device a ``--device`` value names on a machine with ``n_cuda`` CUDA devices.

    ``auto`` (or None) is ``cuda`` when there is one, else ``cpu`` (never mps: its kernels
    differ enough that it is opt-in). A device that is not there is a one-line error."""
    text = (spec or "auto").strip().lower()
    if text == "auto":
        return "cuda" if n_cuda > 0 else "cpu"
    if text == "cpu":
        return "cpu"
    if text == "mps":
        if not mps:
            raise GuarddiagError("--device mps: this machine has no MPS (Apple GPU) backend")
        return "mps"
    m = re.fullmatch(r"cuda(?::(\d+))?", text)
    if m is None:
        raise GuarddiagError(f"--device {spec!r}: expected {DEVICE_CHOICES}")
    if n_cuda == 0:
        raise GuarddiagError(f"--device {spec}: CUDA is not available on this machine "
                             f"(torch {torch.__version__}); use --device cpu or auto")
    if m.group(1) is not None and int(m.group(1)) >= n_cuda:
        raise GuarddiagError(f"--device {spec}: this machine has {n_cuda} CUDA device(s), "
                             f"numbered 0-{n_cuda - 1}")
    return text


def pick_device(spec: str | None) -> torch.device:
    """:func:`resolve_device` on this machine."""
    mps_backend = getattr(torch.backends, "mps", None)
    mps = bool(mps_backend is not None and mps_backend.is_available())
    n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return torch.device(resolve_device(spec, n_cuda=n_cuda, mps=mps))


def describe_device(device: torch.device, *, spec: str | None) -> str:
    """One line saying which device ``--device spec`` chose, and why for ``auto``."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return f"device: {device} ({name})" + (" — CUDA found" if spec in (None, "auto") else "")
    if (spec or "auto") == "auto" and device.type == "cpu":
        return "device: cpu (--device auto found no CUDA)"
    return f"device: {device}"


@dataclass(frozen=True)
class Precision:
    """How the forward pass runs on a device."""

    autocast_dtype: torch.dtype | None
    """None: no autocast (full float32, the CPU path)."""
    use_scaler: bool
    """fp16 needs a gradient scaler (its range underflows small gradients); bf16 does not."""

    @property
    def name(self) -> str:
        return {None: "float32", torch.bfloat16: "bfloat16",
                torch.float16: "float16"}[self.autocast_dtype]


def precision_for(device_type: str, *, bf16_supported: bool) -> Precision:
    """float32 on the CPU and MPS; bf16 autocast on CUDA, fp16 + scaler where bf16 is absent."""
    if device_type != "cuda":
        return Precision(None, use_scaler=False)
    if bf16_supported:
        return Precision(torch.bfloat16, use_scaler=False)
    return Precision(torch.float16, use_scaler=True)


@dataclass(frozen=True)
class DeviceSetup:
    """A device, its precision, and the helpers every loop uses."""

    device: torch.device
    precision: Precision

    @classmethod
    def of(cls, spec: str | torch.device | None) -> DeviceSetup:
        device = spec if isinstance(spec, torch.device) else pick_device(spec)
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return cls(device, precision_for(device.type, bf16_supported=bf16))

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    def autocast(self) -> AbstractContextManager[Any]:
        """Autocast on CUDA; on the CPU a no-op, so the CPU path is today's."""
        dtype = self.precision.autocast_dtype
        if dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def scaler(self) -> Any:
        """A GradScaler for fp16, else None."""
        if not self.precision.use_scaler:
            return None
        return torch.amp.GradScaler(self.device.type)

    def put(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CPU tensor on this device: unchanged on the CPU; copied from pinned memory
        (asynchronously) on CUDA."""
        if self.is_cpu:
            return tensor
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def put_all(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if self.is_cpu:
            return batch
        return {k: self.put(v) for k, v in batch.items()}

    def record(self) -> dict[str, str]:
        """What a run's meta records of where it ran."""
        out = {"device": str(self.device), "dtype": self.precision.name}
        if self.device.type == "cuda":
            out["device_name"] = torch.cuda.get_device_name(self.device)
        return out


CPU = DeviceSetup(torch.device("cpu"), Precision(None, use_scaler=False))
"""The CPU setup, without asking torch anything."""


def iter_chunks(idx: list[int], size: int | None) -> Iterator[list[int]]:
    """``idx`` in consecutive chunks of at most ``size`` (None: one chunk) — the micro-batches
    of a gradient-accumulation step."""
    if size is None or size >= len(idx):
        yield idx
        return
    if size < 1:
        raise GuarddiagError(f"--micro-batch: expected at least 1, got {size}")
    for start in range(0, len(idx), size):
        yield idx[start:start + size]
