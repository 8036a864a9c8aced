"""The training objective: cross-entropy, distillation KL, pillar and span BCE; the recipe's
target class (which chooses the kept weights)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)

from guarddiag.labels import CLASSES
from guarddiag.model.logits import softmax
from guarddiag.train.branches import BranchSpec


def distill_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, *,
                 temperature: float) -> torch.Tensor:
    """KL(softmax(z_t/τ) ‖ softmax(z_s/τ))·τ², averaged over the batch.

    The τ² keeps the gradient scale comparable to the hard-label loss as τ grows (Hinton et
    al., 2015)."""
    t = temperature
    log_p_student = F.log_softmax(student_logits / t, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits / t, dim=-1)
    return F.kl_div(log_p_student, log_p_teacher, log_target=True,
                    reduction="batchmean") * (t * t)


@dataclass(frozen=True)
class LossWeights:
    distill_weight: float = 0.0
    """α; 0 = hard labels only."""
    temperature: float = 4.0
    pillar_weight: float = 1.0
    span_weight: float = 1.0

    @classmethod
    def of(cls, spec: BranchSpec) -> LossWeights:
        return cls(spec.distill_weight if spec.distill else 0.0, spec.temperature,
                   spec.pillar_weight, spec.span_weight)


def guard_loss(class_logits: torch.Tensor, pillar_logits: torch.Tensor,
               span_logits: torch.Tensor | None, *, classes: torch.Tensor,
               pillars: torch.Tensor, span_targets: torch.Tensor | None,
               span_mask: torch.Tensor | None, teacher_logits: torch.Tensor | None,
               weights: LossWeights) -> tuple[torch.Tensor, dict[str, float]]:
    """The training objective and its parts (for the log).

    class term = α·τ²·KL(teacher‖student) + (1−α)·CE, or CE alone without a teacher;
    + pillar_weight · BCE(pillars) + span_weight · BCE(span tags over tokens of rows whose
    span is known). The teacher only speaks about classes, so the pillar and span terms are
    always hard-label terms.
    """
    ce = F.cross_entropy(class_logits, classes)
    parts = {"ce": float(ce.detach())}
    if teacher_logits is not None and weights.distill_weight > 0:
        kd = distill_loss(class_logits, teacher_logits, temperature=weights.temperature)
        parts["kd"] = float(kd.detach())
        loss = weights.distill_weight * kd + (1.0 - weights.distill_weight) * ce
    else:
        loss = ce
    bce_p = F.binary_cross_entropy_with_logits(pillar_logits, pillars)
    parts["pillar"] = float(bce_p.detach())
    loss = loss + weights.pillar_weight * bce_p
    if span_logits is not None and span_mask is not None and bool(span_mask.any()):
        if span_targets is None:
            raise ValueError("guard_loss: span_mask marks span tokens but span_targets is None")
        sel = span_mask.bool()
        bce_s = F.binary_cross_entropy_with_logits(span_logits[sel], span_targets[sel])
        parts["span"] = float(bce_s.detach())
        loss = loss + weights.span_weight * bce_s
    parts["loss"] = float(loss.detach())
    return loss, parts


def recipe_target(classes: np.ndarray, teacher_logits: np.ndarray | None, *,
                  distill_weight: float) -> np.ndarray:
    """The class a recipe teaches for each row: argmax of α·p_teacher + (1−α)·one-hot(hard
    label), i.e. the hard label unless a confident teacher outweighs it.

    The kept checkpoint maximises accuracy against this on the val split. Accuracy, not the
    val loss: the val split holds languages and sources the training rows lack, where a
    sharpening model's loss rises while its accuracy still improves."""
    onehot = np.eye(len(CLASSES))[classes]
    if teacher_logits is None or distill_weight <= 0:
        return classes.copy()
    p = softmax(teacher_logits)
    return (distill_weight * p + (1 - distill_weight) * onehot).argmax(axis=1)

