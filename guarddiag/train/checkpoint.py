"""Resume checkpoints (model, optimizer, best weights, loop position in one file) and the
run's ``train_log.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from guarddiag.files import atomic_path
from guarddiag.model.weights import load_weights, state_to_cpu


def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], Any]:
    sd = opt.state_dict()
    tensors = {}
    for pid, state in sd["state"].items():
        for key, value in state.items():
            tensors[f"optim.{pid}.{key}"] = value.detach().to("cpu").clone().contiguous()
    return tensors, sd["param_groups"]


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], groups: Any) -> dict[str, Any]:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optim."):
            _, pid, name = key.split(".", 2)
            state.setdefault(int(pid), {})[name] = value
    for g in groups:
        if "betas" in g:
            g["betas"] = tuple(g["betas"])
    return {"state": state, "param_groups": groups}


def save_checkpoint(path: Path, *, model: torch.nn.Module, opt: torch.optim.Optimizer,
                    best: dict[str, torch.Tensor] | None, info: dict[str, Any]) -> None:
    """Model, optimizer, best-so-far weights and loop position in ONE atomic safetensors file
    (the position rides in the header metadata), so a kill never leaves a mismatched pair."""
    tensors = {f"model.{k}": v for k, v in state_to_cpu(model).items()}
    opt_tensors, groups = _flatten_optimizer(opt)
    tensors.update(opt_tensors)
    if best is not None:
        tensors.update({f"best.{k}": v for k, v in best.items()})
    meta = {"info": json.dumps(info, sort_keys=True), "groups": json.dumps(groups)}
    with atomic_path(path) as tmp:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=meta)


def load_checkpoint(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any],
                                         dict[str, torch.Tensor] | None, dict[str, Any]]:
    tensors = load_weights(path)
    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
    info = json.loads(meta["info"])
    groups = json.loads(meta["groups"])
    model = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    best = {k[5:]: v for k, v in tensors.items() if k.startswith("best.")} or None
    optim = _unflatten_optimizer({k: v for k, v in tensors.items() if k.startswith("optim.")},
                                 groups)
    return model, optim, best, info


class TrainLog:
    """train_log.jsonl; on resume it is cut back to the checkpoint's line count."""

    def __init__(self, path: Path, *, keep_lines: int | None):
        self.path = path
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if keep_lines is None:
            lines = []
        self.lines = lines[:keep_lines] if keep_lines is not None else []
        path.write_text("".join(x + "\n" for x in self.lines), encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True)
        self.lines.append(line)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

