"""The routes at a frozen size (``minilm``): the encoder never trains, so every route reads its
cached states (:mod:`guarddiag.model.states`) and trains only the part above them.

* hard labels / distillation (:func:`train_pooled_full`): the MLP body and the three heads, on
  the whole train split (:data:`~guarddiag.model.sizes.FROZEN_TRAINING` replaces the YAML's
  micro budget), distilling from the teacher's logits exactly as :mod:`~guarddiag.train.full`;
* head-only (:func:`train_pooled_head_only`): the parent's body is frozen as well, and its output
  on the calibration rows is cached; the heads train as in :mod:`~guarddiag.train.head_only`.

A run takes seconds once the states are cached, so an interrupted run starts again rather than
resuming a checkpoint (the same seed gives the same bytes); the states survive in the cache.

Example (CPU; the first run embeds the pool, minutes on 2 cores: docs/decisions.md)::

    guarddiag train --sizes minilm --branches reference --seeds 42,43,44
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model.embedpath import encoder_numeric
from guarddiag.model.pooled import (
    PooledGuard,
    build_pooled,
    guard_inputs,
    load_pooled,
    save_pooled,
)
from guarddiag.model.portable import adamw
from guarddiag.model.sizes import FROZEN_TRAINING, N_PILLARS, get_size
from guarddiag.model.states import FrozenEncoder, frozen_encoder
from guarddiag.model.store import read_model_meta
from guarddiag.model.weights import state_to_cpu
from guarddiag.paths import RunsFolder
from guarddiag.pool.table import Pool, selection_split
from guarddiag.runs import LOG_FILE
from guarddiag.train.branches import BranchSpec, PlannedRun
from guarddiag.train.checkpoint import TrainLog
from guarddiag.train.full import teacher_logits
from guarddiag.train.head_only import CachedStates, fit_heads
from guarddiag.train.losses import LossWeights, guard_loss, recipe_target
from guarddiag.train.options import TrainOptions
from guarddiag.train.rows import (
    calibration_frame,
    label_counts,
    labelled,
    policy_labels,
    training_frame,
)
from guarddiag.train.schedule import eval_steps, lr_at


def spec_at_size(spec: BranchSpec, size: str) -> BranchSpec:
    """The spec a run at ``size`` trains with: unchanged for a trained encoder; at a frozen
    size the whole train split, the size's token length and an MLP's optimiser settings
    (full routes), or the whole split as the calibration base (head-only)."""
    s = get_size(size)
    if not s.frozen:
        return spec
    if spec.head_only:
        return spec.model_copy(update={"train_rows": None})
    return spec.model_copy(update={"max_length": s.max_length, **FROZEN_TRAINING})


def encoder_for(size: str, options: TrainOptions) -> FrozenEncoder:
    """The frozen encoder of ``size`` (from its checkpoint, or the one ``options.pretrained``
    names for it) on this machine's numeric path."""
    spec = get_size(size).encoder(options.pretrained.get(size))
    return frozen_encoder(spec, numeric=encoder_numeric(spec))


def _evaluate(model: PooledGuard, x: torch.Tensor, *, classes: np.ndarray, pillars: np.ndarray,
              teacher: np.ndarray | None, weights: LossWeights, labels_a: np.ndarray,
              labels_b: np.ndarray, target: np.ndarray) -> dict[str, float]:
    model.eval()
    with torch.inference_mode():
        out = model(x)
        t = torch.from_numpy(teacher) if teacher is not None else None
        loss, _ = guard_loss(out.class_logits, out.pillar_logits, None,
                             classes=torch.from_numpy(classes),
                             pillars=torch.from_numpy(pillars), span_targets=None,
                             span_mask=None, teacher_logits=t, weights=weights)
        pred = out.class_logits.argmax(-1).numpy()
    model.train()
    return {"val_objective": float(loss), "val_acc_a": float((pred == labels_a).mean()),
            "val_acc_b": float((pred == labels_b).mean()),
            "val_acc_target": float((pred == target).mean())}


def train_pooled_full(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool,
                      runs_dir: Path, options: TrainOptions) -> dict[str, Any]:
    """Routes 1-2 at a frozen size: the body and heads on cached states; the kept weights are
    those of the evaluation with the best accuracy against the recipe's target."""
    encoder = encoder_for(run.size, options)
    weights = LossWeights.of(spec)
    train_frame = training_frame(pool, spec)
    val_frame = selection_split(pool, spec.val_rows)
    rows, val_rows = labelled(pool, spec, train_frame, val_frame, anchors=spec.anchors)
    labels_a, labels_b = policy_labels(val_frame)
    log = TrainLog(run_dir / LOG_FILE, keep_lines=None)
    t0 = time.monotonic()
    lexical = get_size(run.size).lexical
    x = torch.from_numpy(guard_inputs(encoder, rows.texts, lexical=lexical))
    xv = torch.from_numpy(guard_inputs(encoder, val_rows.texts, lexical=lexical))
    teach = teach_val = None
    if spec.distill and run.teacher:
        cache = RunsFolder(runs_dir).cache / "teacher_logits"
        teach = teacher_logits(runs_dir / run.teacher, rows.texts, cache_dir=cache)
        teach_val = teacher_logits(runs_dir / run.teacher, val_rows.texts, cache_dir=cache)
    target = recipe_target(val_rows.classes, teach_val, distill_weight=weights.distill_weight)
    log.write({"event": "start", "run_id": run.run_id, "n_train": len(rows),
               "n_val": len(val_rows), "seed": run.seed,
               "states_s": round(time.monotonic() - t0, 3)})

    model = build_pooled(run.size, seed=run.seed, in_size=x.shape[1])
    model.fit_inputs(x)
    opt = adamw(model, lr=spec.lr, weight_decay=spec.weight_decay)
    y, z = torch.from_numpy(rows.classes), torch.from_numpy(rows.pillars)
    t_all = torch.from_numpy(teach) if teach is not None else None
    steps_per_epoch = math.ceil(len(rows) / spec.batch_size)
    total = steps_per_epoch * spec.epochs
    warmup = round(spec.warmup_fraction * total)
    evals = eval_steps(steps_per_epoch, spec.epochs, spec.evals_per_epoch)
    gen = torch.Generator().manual_seed(run.seed)
    best: dict[str, torch.Tensor] | None = None
    best_info: dict[str, Any] | None = None
    step = 0
    model.train()
    for epoch in range(spec.epochs):
        perm = torch.randperm(len(rows), generator=gen)
        for start in range(0, len(rows), spec.batch_size):
            idx = perm[start:start + spec.batch_size]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total=total, peak=spec.lr, warmup=warmup)
            out = model(x[idx])
            loss, parts = guard_loss(out.class_logits, out.pillar_logits, None, classes=y[idx],
                                     pillars=z[idx], span_targets=None, span_mask=None,
                                     teacher_logits=t_all[idx] if t_all is not None else None,
                                     weights=weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % options.log_every == 0 or step == total:
                log.write({"event": "step", "step": step, "epoch": epoch,
                           **{k: round(v, 5) for k, v in parts.items()}})
            if step in evals:
                ev = _evaluate(model, xv, classes=val_rows.classes, pillars=val_rows.pillars,
                               teacher=teach_val, weights=weights, labels_a=labels_a,
                               labels_b=labels_b, target=target)
                kept = best_info is None or ev["val_acc_target"] > best_info["val_acc_target"]
                if kept:
                    best, best_info = state_to_cpu(model), {"step": step, **ev}
                log.write({"event": "eval", "step": step, **ev, "kept": kept})
    assert best is not None
    assert best_info is not None
    model.load_state_dict(best)
    model_section = save_pooled(model, encoder, run_dir, size=run.size)
    log.write({"event": "done", "step": step, "kept_step": best_info["step"]})
    return {"model": model_section, "best": best_info, "steps": total, "n_rows": len(rows),
            "n_val_rows": len(val_rows), "resumed": False, "device": "cpu",
            "label_counts": label_counts(rows)}


def _body_states(model: PooledGuard, states: np.ndarray) -> CachedStates:
    """The frozen body's output as head-only's cached states (no per-token states here)."""
    with torch.no_grad():
        feats = model.features(torch.from_numpy(states))
    return CachedStates(feats, torch.zeros((0, model.width)), torch.zeros(0, dtype=torch.long),
                        torch.zeros((0, N_PILLARS)))


def train_pooled_head_only(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool,
                           runs_dir: Path, options: TrainOptions) -> dict[str, Any]:
    """Route 3 at a frozen size: the parent's encoder and body frozen, its heads retrained."""
    parent_dir = runs_dir / (run.parent or "")
    model, encoder = load_pooled(parent_dir, read_model_meta(parent_dir)["model"])
    before = {k: v.clone() for k, v in model.body.state_dict().items()}
    cal_frame, counts = calibration_frame(pool, spec, seed=run.seed)
    val_frame = selection_split(pool, spec.val_rows)
    rows, val_rows = labelled(pool, spec, cal_frame, val_frame, anchors=False)
    weights = LossWeights(0.0, spec.temperature, spec.pillar_weight, spec.span_weight)
    log = TrainLog(run_dir / LOG_FILE, keep_lines=None)
    log.write({"event": "start", "run_id": run.run_id, "parent": run.parent, **counts,
               "n_val": len(val_rows), "seed": run.seed})
    lexical = int(read_model_meta(parent_dir)["model"].get("lexical", 0))
    feats = _body_states(model, guard_inputs(encoder, rows.texts, lexical=lexical))
    val_feats = _body_states(model, guard_inputs(encoder, val_rows.texts, lexical=lexical))
    info, judge = fit_heads(model, spec, feats=feats, val_feats=val_feats, rows=rows,
                            val_rows=val_rows, val_frame=val_frame, seed=run.seed,
                            weights=weights, log=log)
    for k, v in model.body.state_dict().items():
        if not torch.equal(v, before[k]):
            raise GuarddiagError(f"{run.run_id}: body weight {k} changed during head-only "
                                 f"training (internal error)")
    model_section = save_pooled(model, encoder, run_dir, size=run.size)
    log.write({"event": "done", "step": info["steps"], "kept_step": info["best_step"]})
    return {"model": model_section, "best": judge.kept(info["best_step"]),
            "steps": info["steps"], "n_rows": len(rows), "n_val_rows": len(val_rows),
            "resumed": False, "calibration": counts, "label_counts": label_counts(rows),
            "device": "cpu"}

