"""Training: the losses, the three routes by which a policy reaches a guard, and the runner.

Routes (SPEC §3):

1. *hard labels* — fine-tune the whole guard on pool labels: cross-entropy on the 4 classes,
   BCE on the 24 pillars, and per-token BCE on the span head for rows whose harmful span is
   known;
2. *distillation* — the class loss becomes ``α·τ²·KL(softmax(z_t/τ) ‖ softmax(z_s/τ)) +
   (1−α)·CE``: the student matches a teacher's softened class distribution (τ = 4);
3. *head-only* — the parent's encoder is frozen and its states are computed once and cached
   (the heads are linear, so nothing upstream changes between epochs); only the three heads
   are retrained on a calibration set.

The runner trains a plan (teachers → reference → branches), skips finished runs whose inputs
did not change, and resumes an interrupted run from its last checkpoint to the same final
weights. Every run is seeded; the kept weights are the best evaluation on the val split.

Modules, one job each: :mod:`~guarddiag.train.branches` (the specs and the plan),
:mod:`~guarddiag.train.rows` (label mixing, calibration sets), :mod:`~guarddiag.train.losses`,
:mod:`~guarddiag.train.batches` (tokenised rows, span targets, epoch order),
:mod:`~guarddiag.train.schedule`, :mod:`~guarddiag.train.checkpoint` (resume files, the log),
:mod:`~guarddiag.train.options`, :mod:`~guarddiag.train.full` (routes 1-2),
:mod:`~guarddiag.train.head_only` and :mod:`~guarddiag.train.whitening` (route 3),
:mod:`~guarddiag.train.runner`, :mod:`~guarddiag.train.lock` (one process per run),
:mod:`~guarddiag.train.plan` (a run by id, the dependency graph).
Its benches (``bench recalibrate``, ``bench train``, ``bench gpu``) are in :mod:`guarddiag.bench`.
The pool table and its hash-ordered samples are :mod:`guarddiag.pool.table`; the run-folder
layout is :mod:`guarddiag.runs`.

Example (CPU, minutes)::

    guarddiag train --branches all --sizes micro --seeds 42
"""

from __future__ import annotations

from guarddiag.train.batches import EncodedRows, collate, encode_rows, epoch_batches
from guarddiag.train.branches import BranchSet, BranchSpec, PlannedRun, load_branches, plan_runs
from guarddiag.train.checkpoint import TrainLog, load_checkpoint, save_checkpoint
from guarddiag.train.full import FullRoute, teacher_logits, tokenizer_for, train_full
from guarddiag.train.head_only import (
    CachedStates,
    encoder_states,
    fit_whitening,
    head_loss,
    train_head_only,
    train_heads,
)
from guarddiag.train.losses import LossWeights, distill_loss, guard_loss, recipe_target
from guarddiag.train.options import TrainingInterrupted, TrainOptions
from guarddiag.train.rows import LabelledRows, calibration_frame, label_rows, policy_a_mask
from guarddiag.train.runner import (
    TRAINING_VERSION,
    RunSummary,
    TrainResult,
    train_branches,
    train_one,
    train_run,
)
from guarddiag.train.whitening import Whitening

__all__ = [
    "TRAINING_VERSION",
    "BranchSet",
    "BranchSpec",
    "CachedStates",
    "EncodedRows",
    "FullRoute",
    "LabelledRows",
    "LossWeights",
    "PlannedRun",
    "RunSummary",
    "TrainLog",
    "TrainOptions",
    "TrainResult",
    "TrainingInterrupted",
    "Whitening",
    "calibration_frame",
    "collate",
    "distill_loss",
    "encode_rows",
    "encoder_states",
    "epoch_batches",
    "fit_whitening",
    "guard_loss",
    "head_loss",
    "label_rows",
    "load_branches",
    "load_checkpoint",
    "plan_runs",
    "policy_a_mask",
    "recipe_target",
    "save_checkpoint",
    "teacher_logits",
    "tokenizer_for",
    "train_branches",
    "train_full",
    "train_head_only",
    "train_heads",
    "train_one",
    "train_run",
]
