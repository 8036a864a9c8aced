"""Linear layers, the optimiser and a square root that compute the same bytes on any x86-64 CPU.

On the CPU torch sends a float32 ``nn.Linear`` to MKL, whose only vendor-neutral branch
(``MKL_CBWR=COMPATIBLE``) is SSE2 code, much slower
(docs/decisions.md#2026-12-06-the-encoders-numeric-paths). oneDNN's inner product held to AVX2
(:mod:`guarddiag.numerics`) is JIT code that runs alike on Intel and AMD, with any thread count and
batch composition, and is as fast as torch's default here; torch only uses it for reduced precisions
and compiled graphs, so :class:`PortableLinear` calls its operator (the one torch.compile's CPU back
end emits) directly, forward and backward (own code: torch has no public float32 oneDNN linear with
a backward).

``torch.sqrt`` goes to MKL's vector maths, which is not correctly rounded on AMD (19.5 % of
float32 square roots differ from IEEE's there, none on Intel): AdamW runs fused (its kernel uses
the vector unit's own square root) and :func:`exact_sqrt` takes NumPy's, which is IEEE's.

On other devices (CUDA), other dtypes or where torch lacks oneDNN, every function here falls
back to torch's own, so the same model code serves every device.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


def _onednn(x: torch.Tensor) -> bool:
    return bool(x.device.type == "cpu" and x.dtype == torch.float32
                and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)


def _dnn_matmul(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ w.T + b`` for a 2-D float32 ``x`` by oneDNN's inner product, on dense tensors (no
    conversion to oneDNN's own tensors: half the time of ``mkldnn_linear`` here). ``w`` may be
    pre-packed by :func:`_pack` (the same bytes out)."""
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), w.contiguous(), b, "none", [],
                                              "")


def _pack(w: torch.Tensor) -> torch.Tensor:
    """A frozen weight in oneDNN's blocked layout (another 10 % off a frozen layer's time)."""
    return torch.ops.mkldnn._reorder_linear_weight(w.detach().contiguous(), None)


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        flat = x.reshape(-1, x.shape[-1])
        return _dnn_matmul(flat, weight, bias).reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = _dnn_matmul(g, weight.t()).reshape(x.shape)
        if ctx.needs_input_grad[1]:
            gw = _dnn_matmul(g.t(), x.reshape(-1, x.shape[-1]).t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``F.linear``, by oneDNN for float32 on the CPU (see the module's docstring)."""
    if not _onednn(x) or weight.dtype != torch.float32:
        return F.linear(x, weight, bias)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                    or (bias is not None and bias.requires_grad)):
        out: torch.Tensor = _OneDnnLinear.apply(x, weight, bias)
        return out
    flat = x.reshape(-1, x.shape[-1])
    return _dnn_matmul(flat, weight, bias).reshape(*x.shape[:-1], weight.shape[0])


class PortableLinear(nn.Linear):
    """``nn.Linear`` with the same parameters and state-dict keys, computed by :func:`linear`;
    a frozen layer keeps its weight packed for oneDNN until the weight changes."""

    _packed: tuple[int, int, torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.requires_grad or not _onednn(x):
            return linear(x, self.weight, self.bias)
        key = (id(self.weight), self.weight._version)
        if self._packed is None or self._packed[:2] != key:
            self._packed = (*key, _pack(self.weight))
        flat = x.reshape(-1, x.shape[-1])
        return _dnn_matmul(flat, self._packed[2], self.bias).reshape(*x.shape[:-1],
                                                                     self.out_features)


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def use_portable_linears(module: ModuleT) -> ModuleT:
    """Every ``nn.Linear`` inside ``module`` becomes a :class:`PortableLinear` holding the same
    parameter objects (an optimiser made before or after sees the same tensors); in place."""
    for name, child in list(module.named_children()):
        if type(child) is nn.Linear:
            swapped = PortableLinear.__new__(PortableLinear)
            swapped.__dict__.update(child.__dict__)
            setattr(module, name, swapped)
        else:
            use_portable_linears(child)
    return module


def adamw(params: nn.Module | Iterable[torch.Tensor], *, lr: float,
          weight_decay: float = 0.01) -> torch.optim.AdamW:
    """AdamW as torch computes it, fused: its kernel takes the vector unit's square root, not
    MKL's (see the module's docstring). Given a module, weight decay applies to its matrices
    only (not to biases and norms); given tensors, to all of them."""
    if isinstance(params, nn.Module):
        groups: list[dict[str, Any]] = [
            {"params": [p for p in params.parameters() if p.ndim >= 2],
             "weight_decay": weight_decay},
            {"params": [p for p in params.parameters() if p.ndim < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, fused=True)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)


def exact_sqrt(t: torch.Tensor) -> torch.Tensor:
    """The IEEE (correctly rounded) square root of a CPU tensor, by NumPy."""
    return torch.from_numpy(np.sqrt(t.detach().cpu().numpy()))
