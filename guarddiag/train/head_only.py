"""Route 3 — head-only recalibration: the parent's encoder stays frozen and only the three
linear heads are retrained on a calibration set.

The heads are linear, so nothing upstream of them changes between epochs: the encoder runs once
over the calibration rows and its states are cached (:func:`encoder_states`); training then
slices the cache, in a whitened basis (:mod:`guarddiag.train.whitening`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.device import CPU, DeviceSetup
from guarddiag.model.guard import GuardHeads, GuardModel, length_sorted_batches
from guarddiag.model.pooled import PooledGuard
from guarddiag.model.portable import adamw
from guarddiag.model.sizes import N_PILLARS
from guarddiag.model.store import load_guard, save_guard
from guarddiag.pool.table import Pool, selection_split
from guarddiag.runs import LOG_FILE
from guarddiag.train.batches import EncodedRows, collate, encode_rows
from guarddiag.train.branches import BranchSpec, PlannedRun
from guarddiag.train.checkpoint import TrainLog
from guarddiag.train.losses import LossWeights, guard_loss
from guarddiag.train.options import TrainOptions
from guarddiag.train.rows import (
    LabelledRows,
    calibration_frame,
    label_counts,
    labelled,
    policy_labels,
)
from guarddiag.train.schedule import eval_steps, lr_at
from guarddiag.train.whitening import WhitenedHeads, Whitening


@dataclass(frozen=True)
class CachedStates:
    """Frozen-encoder features for head-only training: the [CLS] state of every row, and the
    states of every non-special token of rows whose span is known (flattened, row-sorted)."""

    cls: torch.Tensor
    """[rows, hidden]"""
    token_states: torch.Tensor
    """[tokens, hidden]"""
    token_row: torch.Tensor
    """[tokens] row of each cached token, ascending"""
    token_targets: torch.Tensor
    """[tokens, 24] span tags"""

    def rows(self, idx: torch.Tensor) -> CachedStates:
        """The states of rows ``idx``, renumbered 0…len(idx)-1 (indexing only)."""
        starts = torch.searchsorted(self.token_row, idx, right=False)
        ends = torch.searchsorted(self.token_row, idx, right=True)
        counts = ends - starts
        n = int(counts.sum())
        offsets = torch.cumsum(counts, 0) - counts
        gather = torch.repeat_interleave(starts, counts) + \
            (torch.arange(n) - torch.repeat_interleave(offsets, counts))
        local = torch.repeat_interleave(torch.arange(len(idx)), counts)
        return CachedStates(self.cls[idx], self.token_states[gather], local,
                            self.token_targets[gather])


def encoder_states(model: GuardModel, enc: EncodedRows, rows: LabelledRows, *,
                   idx: Sequence[int] | None = None, pad_id: int,
                   batch_size: int = 128, dev: DeviceSetup = CPU) -> CachedStates:
    """Run the frozen encoder once over ``rows`` (or the subset ``idx``, renumbered), on the
    model's device (``dev``); the cached states are float32 on the CPU."""
    pick = list(range(len(rows))) if idx is None else [int(i) for i in idx]
    hidden = model.config.hidden_size
    cls = torch.zeros((len(pick), hidden))
    tok_states, tok_rows, tok_targets = [], [], []
    lengths = [len(enc.ids[i]) for i in pick]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for local in length_sorted_batches(lengths, batch_size):
            batch = collate([pick[j] for j in local], enc, rows, pad_id=pad_id)
            with dev.autocast():
                states = model.encode(dev.put(batch["input_ids"]),
                                      dev.put(batch["attention_mask"]))
            if not dev.is_cpu:
                states = states.float().cpu()
            cls[local] = states[:, 0]
            sel = batch["span_mask"]
            if bool(sel.any()):
                r, t = sel.nonzero(as_tuple=True)
                tok_states.append(states[r, t])
                tok_rows.append(torch.tensor(local, dtype=torch.long)[r])
                tok_targets.append(batch["span_targets"][r, t])
    model.train(was_training)
    if not tok_states:
        return CachedStates(cls, torch.zeros((0, hidden)), torch.zeros(0, dtype=torch.long),
                            torch.zeros((0, N_PILLARS)))
    ts, tr, tt = torch.cat(tok_states), torch.cat(tok_rows), torch.cat(tok_targets)
    order = torch.argsort(tr, stable=True)
    return CachedStates(cls, ts[order], tr[order], tt[order])


def head_loss(heads: GuardHeads | WhitenedHeads, feats: CachedStates, classes: torch.Tensor,
              pillars: torch.Tensor, weights: LossWeights
              ) -> tuple[torch.Tensor, dict[str, float]]:
    """:func:`guard_loss` of the heads on encoder features (no teacher on this route)."""
    span_logits = span_mask = None
    if feats.token_states.shape[0]:
        span_logits = heads.span_head(feats.token_states)
        span_mask = torch.ones(span_logits.shape[0], dtype=torch.bool)
    return guard_loss(heads.class_head(feats.cls), heads.pillar_head(feats.cls), span_logits,
                      classes=classes, pillars=pillars, span_targets=feats.token_targets,
                      span_mask=span_mask, teacher_logits=None, weights=weights)


def train_heads(model: GuardModel | PooledGuard, *,
                features: Callable[[torch.Tensor], CachedStates],
                classes: np.ndarray, pillars: np.ndarray, epochs: int, lr: float,
                batch_size: int, weight_decay: float, seed: int, weights: LossWeights,
                whitening: tuple[Whitening, Whitening] | None = None,
                evaluate: Callable[[], float] | None = None, evals_per_epoch: int = 1,
                on_eval: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Train only ``model.heads``, seeded, starting from their current weights; keep the
    heads whose ``evaluate()`` score (higher is better) is best.

    ``features(idx)`` gives the encoder states of rows ``idx``: sliced from a cache (the
    normal path), or recomputed by the encoder (only for the ``bench recalibrate`` contrast).
    ``whitening`` = (for [CLS] states, for token states): train in that basis (see
    :class:`Whitening`); the heads are folded back to raw states before every evaluation.
    """
    heads = model.heads
    for name, p in model.named_parameters():  # the encoder (or a frozen size's body) stays
        if not name.startswith("heads."):
            p.requires_grad_(False)
    hidden = heads.class_head.in_features
    w_cls, w_tok = whitening or (Whitening.identity(hidden), Whitening.identity(hidden))
    zheads = WhitenedHeads(heads, w_cls, w_tok)
    opt = adamw(zheads.parameters(), lr=lr, weight_decay=weight_decay)
    y = torch.from_numpy(classes)
    z = torch.from_numpy(pillars)
    n_rows = len(classes)
    steps_per_epoch = math.ceil(n_rows / batch_size)
    total = steps_per_epoch * epochs
    evals = eval_steps(steps_per_epoch, epochs, evals_per_epoch)
    gen = torch.Generator().manual_seed(seed)
    best_state, best_score, best_step, step = None, -math.inf, total, 0
    for _ in range(epochs):
        perm = torch.randperm(n_rows, generator=gen)
        for start in range(0, n_rows, batch_size):
            idx = perm[start:start + batch_size]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total=total, peak=lr, warmup=0)
            raw = features(idx)
            feats = CachedStates(w_cls.apply(raw.cls), w_tok.apply(raw.token_states),
                                 raw.token_row, raw.token_targets)
            loss, _ = head_loss(zheads, feats, y[idx], z[idx], weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step in evals and evaluate is not None:
                zheads.fold_into(heads)
                score = evaluate()
                if on_eval is not None:
                    on_eval(step, score)
                if score > best_score:
                    best_score, best_step = score, step
                    best_state = {k: v.detach().clone() for k, v in heads.state_dict().items()}
    if best_state is not None:
        heads.load_state_dict(best_state)
    else:
        zheads.fold_into(heads)
    return {"steps": total, "best_step": best_step, "best_score": best_score}


def fit_whitening(states: CachedStates) -> tuple[Whitening, Whitening]:
    """Whitening of the [CLS] states and of the span-token states of a calibration set."""
    return Whitening.fit(states.cls), Whitening.fit(states.token_states)


def recomputing_features(model: GuardModel, enc: EncodedRows, rows: LabelledRows, *,
                         pad_id: int) -> Callable[[torch.Tensor], CachedStates]:
    """``features`` that re-runs the frozen encoder for every batch (the slow contrast)."""
    def features(idx: torch.Tensor) -> CachedStates:
        return encoder_states(model, enc, rows, idx=idx.tolist(), pad_id=pad_id,
                              batch_size=max(len(idx), 1))
    return features


class HeadEvaluation:
    """Scores the heads on the cached val states (accuracy against the branch's labels picks
    the kept heads) and logs every evaluation."""

    def __init__(self, model: GuardModel | PooledGuard, val_feats: CachedStates,
                 val_rows: LabelledRows, *,
                 labels_a: np.ndarray, labels_b: np.ndarray, weights: LossWeights,
                 log: TrainLog):
        self.model, self.val_feats, self.val_rows = model, val_feats, val_rows
        self.labels_a, self.labels_b = labels_a, labels_b
        self.weights, self.log = weights, log
        self.val_y = torch.from_numpy(val_rows.classes)
        self.val_z = torch.from_numpy(val_rows.pillars)
        self.last: dict[str, float] = {}
        self.evals: list[dict[str, float]] = []

    def score(self) -> float:
        with torch.no_grad():
            loss, _ = head_loss(self.model.heads, self.val_feats, self.val_y, self.val_z,
                                self.weights)
            pred = self.model.heads.class_head(self.val_feats.cls).argmax(-1).numpy()
        self.last.update(objective=float(loss), acc_a=float((pred == self.labels_a).mean()),
                         acc_b=float((pred == self.labels_b).mean()),
                         acc_target=float((pred == self.val_rows.classes).mean()))
        return self.last["acc_target"]

    def record(self, step: int, score: float) -> None:
        last = self.last
        self.evals.append({"step": step, **last})
        self.log.write({"event": "eval", "step": step, "val_objective": last["objective"],
                        "val_acc_a": last["acc_a"], "val_acc_b": last["acc_b"],
                        "val_acc_target": last["acc_target"]})

    def kept(self, step: int) -> dict[str, float]:
        """The meta's ``best`` record of the evaluation at ``step``."""
        kept = next(e for e in self.evals if e["step"] == step)
        return {"step": step, "val_objective": kept["objective"], "val_acc_a": kept["acc_a"],
                "val_acc_b": kept["acc_b"], "val_acc_target": kept["acc_target"]}


def fit_heads(model: GuardModel | PooledGuard, spec: BranchSpec, *, feats: CachedStates,
              val_feats: CachedStates, rows: LabelledRows, val_rows: LabelledRows,
              val_frame: pl.DataFrame, seed: int, weights: LossWeights,
              log: TrainLog) -> tuple[dict[str, Any], HeadEvaluation]:
    """The head-only route's fit, for either model family: the heads over cached states,
    whitened, scored on the val rows; returns train_heads' record and the evaluations."""
    labels_a, labels_b = policy_labels(val_frame)
    judge = HeadEvaluation(model, val_feats, val_rows, labels_a=labels_a, labels_b=labels_b,
                           weights=weights, log=log)
    info = train_heads(model, features=feats.rows, classes=rows.classes, pillars=rows.pillars,
                       epochs=spec.epochs, lr=spec.lr, batch_size=spec.batch_size,
                       weight_decay=spec.weight_decay, seed=seed, weights=weights,
                       whitening=fit_whitening(feats), evaluate=judge.score,
                       evals_per_epoch=spec.evals_per_epoch, on_eval=judge.record)
    return info, judge


def check_encoder_unchanged(model: GuardModel, before: dict[str, torch.Tensor], *,
                            run_id: str) -> None:
    """The route's defining promise: the encoder leaves exactly as it came."""
    for k, v in model.encoder_state_dict().items():
        if not torch.equal(v, before[k]):
            raise GuarddiagError(f"{run_id}: encoder weight {k} changed during head-only "
                                 f"training (internal error)")


def train_head_only(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool,
                    runs_dir: Path, options: TrainOptions) -> dict[str, Any]:
    """Recalibrate the parent's heads into ``run_dir``; returns its meta's training record."""
    dev = DeviceSetup.of(options.device)
    parent = load_guard(runs_dir / (run.parent or ""))
    model, tokenizer = parent.model, parent.tokenizer
    parent_encoder = {k: v.clone() for k, v in model.encoder_state_dict().items()}
    if not dev.is_cpu:
        model.to(dev.device)
    cal_frame, counts = calibration_frame(pool, spec, seed=run.seed)
    val_frame = selection_split(pool, spec.val_rows)
    rows, val_rows = labelled(pool, spec, cal_frame, val_frame, anchors=False)
    enc = encode_rows(tokenizer, rows, max_length=parent.max_length)
    val_enc = encode_rows(tokenizer, val_rows, max_length=parent.max_length)
    weights = LossWeights(0.0, spec.temperature, spec.pillar_weight, spec.span_weight)
    log = TrainLog(run_dir / LOG_FILE, keep_lines=None)
    log.write({"event": "start", "run_id": run.run_id, "parent": run.parent, **counts,
               "n_val": len(val_rows), "seed": run.seed})

    t0 = time.monotonic()
    feats = encoder_states(model, enc, rows, pad_id=tokenizer.pad_id,
                           batch_size=options.eval_batch_size, dev=dev)
    log.write({"event": "cached_states", "rows": len(rows),
               "span_tokens": int(feats.token_states.shape[0]),
               "seconds": round(time.monotonic() - t0, 3)})
    val_feats = encoder_states(model, val_enc, val_rows, pad_id=tokenizer.pad_id,
                               batch_size=options.eval_batch_size, dev=dev)
    # The heads are three linear layers over cached states: they train on the CPU wherever
    # the encoder ran, so this route's arithmetic is the same on every machine.
    if not dev.is_cpu:
        model.to("cpu")
    info, judge = fit_heads(model, spec, feats=feats, val_feats=val_feats, rows=rows,
                            val_rows=val_rows, val_frame=val_frame, seed=run.seed,
                            weights=weights, log=log)
    check_encoder_unchanged(model, parent_encoder, run_id=run.run_id)
    best_info = judge.kept(info["best_step"])
    model_section = save_guard(model, tokenizer, run_dir, size=run.size,
                               max_length=parent.max_length,
                               checkpoint=parent.meta["model"].get("checkpoint"))
    log.write({"event": "done", "step": info["steps"], "kept_step": info["best_step"]})
    return {"model": model_section, "best": best_info,
            "steps": info["steps"], "n_rows": len(rows), "n_val_rows": len(val_rows),
            "resumed": False, "calibration": counts, "label_counts": label_counts(rows),
            **dev.record()}
