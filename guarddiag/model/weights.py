"""Tensors on disk: safetensors only (a pickle checkpoint is refused), written atomically."""

from __future__ import annotations

import struct
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from guarddiag.errors import GuarddiagError
from guarddiag.files import atomic_path

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def state_to_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}


def save_weights(state: dict[str, torch.Tensor], path: str | Path) -> Path:
    """Write tensors as safetensors, atomically."""
    with atomic_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp),
                  metadata={"format": "pt"})
    return Path(path)


def check_safetensors(path: str | Path) -> Path:
    """Refuse anything that is not a safetensors file, before any bytes are deserialised."""
    path = Path(path)
    if path.suffix.lower() in PICKLE_SUFFIXES:
        raise GuarddiagError(f"{path}: refusing a pickle checkpoint ({path.suffix}); guarddiag "
                             f"loads weights from .safetensors files only")
    if not path.is_file():
        raise GuarddiagError(f"{path}: weights file not found")
    with open(path, "rb") as fh:
        head = fh.read(9)
    # safetensors: 8-byte little-endian header length, then a JSON object.
    ok = len(head) == 9 and head[8:9] == b"{"
    if ok:
        (n,) = struct.unpack("<Q", head[:8])
        ok = 0 < n < path.stat().st_size
    if not ok:
        raise GuarddiagError(f"{path}: not a safetensors file (a pickle or other format is "
                             f"refused); re-save the weights with safetensors")
    return path


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    path = check_safetensors(path)
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise GuarddiagError(f"{path}: corrupt safetensors file ({exc})") from None


