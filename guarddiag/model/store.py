"""A guard in a run folder: ``model.safetensors``, ``tokenizer.json`` and the ``model``
section of ``meta.json``; :func:`save_guard` writes them, :func:`load_guard` reads them back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from guarddiag.errors import GuarddiagError
from guarddiag.files import read_json
from guarddiag.model.guard import GuardModel, encoder_from_config, seeded_init
from guarddiag.model.tokenizer import GuardTokenizer
from guarddiag.model.weights import PICKLE_SUFFIXES, load_weights, save_weights, state_to_cpu
from guarddiag.runs import META_FILE, MODEL_FILE


def model_meta(model: GuardModel, tokenizer: GuardTokenizer, *, size: str, max_length: int,
               checkpoint: str | None) -> dict[str, Any]:
    """The ``model`` section of a run's meta.json: everything :func:`load_guard` needs."""
    cfg = model.config.to_dict()
    for key in ("_attn_implementation_autoset", "transformers_version", "architectures",
                "dtype", "torch_dtype"):
        cfg.pop(key, None)
    n_params = sum(p.numel() for p in model.parameters())
    n_head = sum(p.numel() for p in model.heads.parameters())
    return {"size": size, "max_length": int(max_length), "checkpoint": checkpoint,
            "encoder": cfg.get("model_type", "modernbert"),
            "encoder_config": cfg, "tokenizer": tokenizer.describe(),
            "n_params": n_params, "n_head_params": n_head,
            "head_share": n_head / n_params}


def save_guard(model: GuardModel, tokenizer: GuardTokenizer, folder: str | Path, *,
               size: str, max_length: int, checkpoint: str | None = None) -> dict[str, Any]:
    """Write model.safetensors and tokenizer.json; return the meta ``model`` section.

    The caller writes meta.json (with :func:`guarddiag.files.write_meta`) last, so a folder
    with a meta.json is a finished run.
    """
    folder = Path(folder)
    save_weights(state_to_cpu(model), folder / MODEL_FILE)
    tokenizer.save(folder)
    return model_meta(model, tokenizer, size=size, max_length=max_length, checkpoint=checkpoint)


@dataclass(frozen=True)
class LoadedGuard:
    model: GuardModel
    tokenizer: GuardTokenizer
    max_length: int
    meta: dict[str, Any]


def read_model_meta(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / META_FILE
    meta = read_json(path)
    if not isinstance(meta, dict) or not isinstance(meta.get("model"), dict):
        raise GuarddiagError(f'{path} field "model": missing; not a guarddiag run folder')
    return meta


def load_guard(folder: str | Path, *, device: torch.device | None = None) -> LoadedGuard:
    """Load a run folder written by :func:`save_guard` (safetensors only), in eval mode, on
    ``device`` (default: where it was built, the CPU)."""
    folder = Path(folder)
    weights = folder / MODEL_FILE
    if not weights.exists():
        pickles = sorted(p.name for p in folder.glob("*") if p.suffix in PICKLE_SUFFIXES)
        if pickles:
            raise GuarddiagError(f"{folder / pickles[0]}: refusing a pickle checkpoint; "
                                 f"guarddiag loads {MODEL_FILE} only")
        raise GuarddiagError(f"{weights}: weights file not found")
    state = load_weights(weights)
    meta = read_model_meta(folder)
    section = meta["model"]
    tokenizer = GuardTokenizer.load(folder, tokens=section.get("tokenizer", {}).get("tokens"))
    with seeded_init(0):
        encoder = encoder_from_config(dict(section["encoder_config"]))
    model = GuardModel(encoder)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        what = f"missing {missing[:3]}" if missing else f"unexpected {unexpected[:3]}"
        raise GuarddiagError(f"{weights}: weights do not match the model in meta.json ({what})")
    model.eval()
    if device is not None and device.type != "cpu":
        model.to(device)
    return LoadedGuard(model, tokenizer, int(section["max_length"]), meta)


