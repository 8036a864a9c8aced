"""Throughput of whole-guard training and scoring (``bench train``), and the device check
(``bench gpu``): one training step and one scoring batch of a ModernBERT-base-shaped guard on
CUDA in bf16 beside the same batch on the CPU, with the two probabilities compared."""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.device import DeviceSetup
from guarddiag.model.guard import GuardModel, encoder_config, pad_batch, seeded_init
from guarddiag.model.logits import guard_logits, softmax
from guarddiag.model.portable import adamw
from guarddiag.model.sizes import N_CLASSES, get_size
from guarddiag.model.store import LoadedGuard
from guarddiag.model.tokenizer import SpecialIds

DEVICE_CHECK_TOLERANCE = 0.02
"""Largest |p_cuda − p_cpu| the device check accepts. bf16 keeps 8 bits of mantissa (relative
error ≈ 0.4 % per rounding); over 22 layers of a random-init base model the class
probabilities move by ~1e-3, so 0.02 catches a wrong kernel or a broken cast, not rounding."""


def train_step(model: GuardModel, opt: torch.optim.Optimizer, ids: torch.Tensor,
               mask: torch.Tensor, labels: torch.Tensor, dev: DeviceSetup) -> float:
    """One optimizer step of the class loss on one batch; returns the loss."""
    with dev.autocast():
        logits = model(dev.put(ids), dev.put(mask), with_span=False).class_logits
        loss = torch.nn.functional.cross_entropy(logits.float(), dev.put(labels))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.detach())


def _sync(dev: DeviceSetup) -> None:
    if dev.device.type == "cuda":
        torch.cuda.synchronize(dev.device)


def timed_train_steps(model: GuardModel, batches: Sequence[tuple[torch.Tensor, torch.Tensor]],
                      dev: DeviceSetup, *, seed: int = 0) -> float:
    """Examples/s of full fine-tuning steps over ``batches`` (after one untimed step)."""
    opt = adamw(model.parameters(), lr=1e-5)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    labels = [torch.randint(0, N_CLASSES, (len(ids),), generator=gen) for ids, _ in batches]
    train_step(model, opt, *batches[0], labels[0], dev)  # warm-up: allocations, kernels
    _sync(dev)
    t0 = time.perf_counter()
    for (ids, mask), y in zip(batches, labels, strict=True):
        train_step(model, opt, ids, mask, y, dev)
    _sync(dev)
    return sum(len(ids) for ids, _ in batches) / (time.perf_counter() - t0)


@dataclass(frozen=True)
class BenchTrainResult:
    encoder: str
    n_params: int
    head_share: float
    n_texts: int
    batch_size: int
    max_length: int
    device: str
    train_ex_per_s: float
    score_ex_per_s: float

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([asdict(self)])


def bench_train(guard: LoadedGuard, texts: Sequence[str], *, batch_size: int = 32,
                encoder: str = "", device: str = "cpu") -> BenchTrainResult:
    """Full fine-tuning and scoring throughput of ``guard`` on ``texts``."""
    if not texts:
        raise GuarddiagError("bench train: no texts to time")
    dev = DeviceSetup.of(device)
    model = guard.model
    if not dev.is_cpu:
        model.to(dev.device)
    ids = guard.tokenizer.encode_ids(list(texts), max_length=guard.max_length)
    batches = [pad_batch(ids[i:i + batch_size], pad_id=guard.tokenizer.pad_id)
               for i in range(0, len(ids), batch_size)]
    t0 = time.perf_counter()
    guard_logits(guard, texts, batch_size=batch_size)
    _sync(dev)
    score = len(texts) / (time.perf_counter() - t0)
    train = timed_train_steps(model, batches, dev)
    n_params = sum(p.numel() for p in model.parameters())
    n_head = sum(p.numel() for p in model.heads.parameters())
    return BenchTrainResult(encoder or str(guard.meta.get("model", {}).get("encoder", "?")),
                            n_params, n_head / n_params, len(texts), batch_size,
                            guard.max_length, str(dev.device), train, score)


# ----------------------------------------------------------------------------- device check

@dataclass(frozen=True)
class DeviceCheckResult:
    size: str
    device: str
    dtype: str
    batch_size: int
    seq_len: int
    score_ex_per_s: float
    score_ex_per_s_cpu: float
    train_ex_per_s: float
    train_ex_per_s_cpu: float
    max_abs_diff: float
    """Largest |p_device − p_cpu| over the batch's class probabilities."""
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs_diff <= self.tolerance

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame([{**asdict(self), "passed": self.passed}])


def random_batch(*, n: int, seq_len: int, vocab_size: int, seed: int
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [n, seq_len] starting with id 2 ([CLS] of the check's config), lengths spread
    between seq_len/2 and seq_len, padded with id 0."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(seq_len // 2, seq_len + 1, (n,), generator=gen).tolist()
    rows = []
    for length in lengths:
        body = torch.randint(5, vocab_size, (length - 2,), generator=gen).tolist()
        rows.append([2, *body, 3])
    return pad_batch(rows, pad_id=0, length=seq_len)


def _score(model: GuardModel, ids: torch.Tensor, mask: torch.Tensor,
           dev: DeviceSetup) -> tuple[np.ndarray, float]:
    model.eval()
    with torch.inference_mode():
        with dev.autocast():  # warm-up
            model(dev.put(ids), dev.put(mask), with_span=False)
        _sync(dev)
        t0 = time.perf_counter()
        with dev.autocast():
            logits = model(dev.put(ids), dev.put(mask), with_span=False).class_logits
        out = logits.float().cpu().numpy()
        _sync(dev)
    return softmax(out), len(ids) / (time.perf_counter() - t0)


def device_check(*, device: str = "cuda", size: str = "base", batch_size: int = 8,
                 seq_len: int = 128, seed: int = 0,
                 tolerance: float = DEVICE_CHECK_TOLERANCE) -> DeviceCheckResult:
    """Score one batch and take one training step with a random-init guard of ``size`` on
    ``device`` and on the CPU; compare the class probabilities."""
    from transformers import ModernBertModel

    dev = DeviceSetup.of(device)
    spec = get_size(size)
    special: SpecialIds = {"pad_token_id": 0, "cls_token_id": 2, "sep_token_id": 3,
                           "bos_token_id": 2, "eos_token_id": 3}
    with seeded_init(seed):
        cpu_model = GuardModel(ModernBertModel(encoder_config(
            spec, vocab_size=spec.vocab_size, special_ids=special)))
    cpu_model.encoder.config._attn_implementation = "sdpa"
    dev_model = copy.deepcopy(cpu_model).to(dev.device)
    ids, mask = random_batch(n=batch_size, seq_len=seq_len, vocab_size=spec.vocab_size,
                             seed=seed)
    cpu = DeviceSetup.of("cpu")
    p_cpu, score_cpu = _score(cpu_model, ids, mask, cpu)
    p_dev, score_dev = _score(dev_model, ids, mask, dev)
    train_cpu = timed_train_steps(cpu_model, [(ids, mask)], cpu, seed=seed)
    train_dev = timed_train_steps(dev_model, [(ids, mask)], dev, seed=seed)
    return DeviceCheckResult(size, str(dev.device), dev.precision.name, batch_size, seq_len,
                             score_dev, score_cpu, train_dev, train_cpu,
                             float(np.abs(p_dev - p_cpu).max()), tolerance)
