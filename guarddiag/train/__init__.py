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

Example (CPU, minutes)::

    guarddiag train --branches all --sizes micro --seeds 42
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch
import torch.nn.functional as F  # noqa: N812 (the usual alias)

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASS_INDEX, CLASSES, LOOSE, pillar_ids
from guarddiag.model import (
    META_FILE,
    MODEL_FILE,
    N_PILLARS,
    GuardModel,
    GuardTokenizer,
    LoadedGuard,
    build_guard,
    get_size,
    load_guard,
    load_weights,
    pad_batch,
    save_guard,
    save_weights,
    state_to_cpu,
    train_tokenizer,
)
from guarddiag.progress import progress, say
from guarddiag.train.branches import BranchSet, BranchSpec, PlannedRun, plan_runs

POOL_COLUMNS = ("prompt_id", "text", "label_a", "label_b", "pillars_a", "pillars_b",
                "span_start", "span_end", "split")
TRAINING_VERSION = 2
"""Bumped whenever a change to this module changes what a run learns; it is part of every
run's fingerprint, so finished runs of an older version are retrained, not silently reused."""
LOG_FILE = "train_log.jsonl"
CHECKPOINT_FILE = "checkpoint.safetensors"
STATUS_FINISHED = "finished"


# ============================================================================ pool

@dataclass(frozen=True)
class Pool:
    """The labelled pool (``pool.parquet``) and its sha256."""

    frame: pl.DataFrame
    path: Path
    sha256: str

    def split(self, name: str) -> pl.DataFrame:
        return self.frame.filter(pl.col("split") == name)


def read_pool(path: str | Path) -> Pool:
    """Read and check ``pool.parquet`` (columns, classes, splits) with one-line errors."""
    from guarddiag.files import read_table, sha256_file

    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: pool file not found; build it with `guarddiag pool build`"
                             f" or pass --pool")
    frame = read_table(path, columns=list(POOL_COLUMNS))
    for col in ("label_a", "label_b"):
        bad = frame.filter(~pl.col(col).is_in(list(CLASSES)))
        if bad.height:
            raise GuarddiagError(f'{path} field "{col}": class {bad[col][0]!r} (prompt '
                                 f'{bad["prompt_id"][0]!r}) is not one of {", ".join(CLASSES)}')
    if frame["prompt_id"].n_unique() != frame.height:
        raise GuarddiagError(f'{path} field "prompt_id": ids are not unique')
    empty = frame.filter(pl.col("text").is_null() | (pl.col("text").str.strip_chars() == ""))
    if empty.height:
        raise GuarddiagError(f'{path} field "text": empty text (prompt '
                             f'{empty["prompt_id"][0]!r})')
    for split in ("train", "val"):
        if frame.filter(pl.col("split") == split).height == 0:
            raise GuarddiagError(f'{path} field "split": no rows in split {split!r}')
    frame = frame.with_columns(pl.col("prompt_id").cast(pl.String))
    return Pool(frame, path, sha256_file(path))


def hash_unit(ids: Sequence[str], salt: str) -> np.ndarray:
    """A uniform number in [0, 1) per id from sha256(salt, id): stable across runs, machines
    and row order, so samples and label mixes are nested (a 25% mix ⊂ a 50% mix)."""
    out = np.empty(len(ids), dtype=np.float64)
    prefix = f"{salt}\x1f".encode()
    for i, pid in enumerate(ids):
        digest = hashlib.sha256(prefix + str(pid).encode()).digest()
        out[i] = int.from_bytes(digest[:7], "big") / float(1 << 56)
    return out


def hash_order(frame: pl.DataFrame, salt: str) -> pl.DataFrame:
    u = hash_unit(frame["prompt_id"].to_list(), salt)
    return frame.with_columns(pl.Series("_u", u)).sort("_u", "prompt_id").drop("_u")


def sample_split(pool: Pool, split: str, n: int | None, *, salt: str = "sample") -> pl.DataFrame:
    """The first ``n`` rows of a split in hash order (all rows when ``n`` is None)."""
    rows = hash_order(pool.split(split), f"{salt}:{split}")
    return rows if n is None else rows.head(n)


# ============================================================================ labels

@dataclass(frozen=True)
class LabelledRows:
    """Rows with the labels one branch trains on."""

    prompt_ids: list[str]
    texts: list[str]
    classes: np.ndarray
    """[n] class index (labels.CLASSES order)."""
    pillars: np.ndarray
    """[n, 24] multi-hot pillar targets."""
    spans: list[tuple[int, int] | None]
    """Character span of the harmful request, where known."""
    policy: np.ndarray
    """[n] bool: the row carries its policy-A labels."""

    def __len__(self) -> int:
        return len(self.texts)


def _pillar_matrix(lists: list[list[str] | None], where: str) -> np.ndarray:
    index = {p: i for i, p in enumerate(pillar_ids())}
    if len(index) != N_PILLARS:
        raise GuarddiagError(f"pillar taxonomy has {len(index)} pillars; the model's pillar "
                             f"heads have {N_PILLARS}")
    out = np.zeros((len(lists), N_PILLARS), dtype=np.float32)
    for r, tags in enumerate(lists):
        for tag in tags or ():
            if tag not in index:
                raise GuarddiagError(f"{where} row {r + 1}: unknown pillar {tag!r}")
            out[r, index[tag]] = 1.0
    return out


def policy_a_mask(frame: pl.DataFrame, *, fraction: float, anchors: bool) -> np.ndarray:
    """Which rows carry policy-A labels: a hash-chosen ``fraction``, plus (with anchors) every
    row policy A blocks and policy B allows."""
    use_a = hash_unit(frame["prompt_id"].to_list(), "policy-mix") < fraction
    if anchors:
        pairs = zip(frame["label_a"].to_list(), frame["label_b"].to_list(), strict=True)
        a_only = np.array([LOOSE.is_unsafe(a) and not LOOSE.is_unsafe(b) for a, b in pairs],
                          dtype=bool)
        use_a |= a_only
    return use_a


def label_rows(frame: pl.DataFrame, *, fraction: float, anchors: bool,
               where: str = "pool") -> LabelledRows:
    use_a = policy_a_mask(frame, fraction=fraction, anchors=anchors)
    label = [a if ua else b for a, b, ua in
             zip(frame["label_a"].to_list(), frame["label_b"].to_list(), use_a, strict=True)]
    pills = [a if ua else b for a, b, ua in
             zip(frame["pillars_a"].to_list(), frame["pillars_b"].to_list(), use_a, strict=True)]
    spans: list[tuple[int, int] | None] = []
    for s, e in zip(frame["span_start"].to_list(), frame["span_end"].to_list(), strict=True):
        spans.append((int(s), int(e)) if s is not None and e is not None and e > s else None)
    return LabelledRows(
        prompt_ids=[str(x) for x in frame["prompt_id"].to_list()],
        texts=frame["text"].to_list(),
        classes=np.array([CLASS_INDEX[c] for c in label], dtype=np.int64),
        pillars=_pillar_matrix(pills, where),
        spans=spans, policy=use_a)


def calibration_frame(pool: Pool, spec: BranchSpec) -> tuple[pl.DataFrame, dict[str, int]]:
    """The calibration rows of a head-only branch, and how many of each kind were drawn."""
    if spec.calibration_split == "train":
        universe = sample_split(pool, "train", spec.train_rows)
    else:
        universe = sample_split(pool, spec.calibration_split, None)
    if universe.height == 0:
        raise GuarddiagError(f'{spec.path} field "calibration_split": the pool has no '
                             f'{spec.calibration_split!r} rows')
    universe = hash_order(universe, "calibration")
    n = max(1, round((spec.calibration_fraction or 0.0) * universe.height))
    n_anchor = round(spec.generic_anchor_fraction * n)
    generic = (pl.col("label_a") == "GENERIC_SAFE") & (pl.col("label_b") == "GENERIC_SAFE")
    anchors = universe.filter(generic).head(n_anchor)
    rest = universe.filter(~pl.col("prompt_id").is_in(anchors["prompt_id"].to_list()))
    if spec.calibration_source == "disagreement":
        rest = rest.filter(pl.col("label_a") != pl.col("label_b"))
    rest = rest.head(n - anchors.height)
    counts = {"n_calibration": anchors.height + rest.height, "n_generic_anchors": anchors.height,
              "n_requested": n,
              "n_disagreement": int((rest["label_a"] != rest["label_b"]).sum())}
    return pl.concat([rest, anchors]), counts


# ============================================================================ losses

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
        sel = span_mask.bool()
        bce_s = F.binary_cross_entropy_with_logits(span_logits[sel], span_targets[sel])
        parts["span"] = float(bce_s.detach())
        loss = loss + weights.span_weight * bce_s
    parts["loss"] = float(loss.detach())
    return loss, parts


# ============================================================================ encoding

@dataclass(frozen=True)
class EncodedRows:
    ids: list[list[int]]
    span_tokens: list[np.ndarray | None]
    """Per row, a bool mask over its tokens: the tokens inside the harmful span."""

    @property
    def lengths(self) -> list[int]:
        return [len(x) for x in self.ids]


def encode_rows(tokenizer: GuardTokenizer, rows: LabelledRows, *,
                max_length: int) -> EncodedRows:
    encodings = tokenizer.encode(rows.texts, max_length=max_length)
    ids, span_tokens = [], []
    for enc, span in zip(encodings, rows.spans, strict=True):
        ids.append(list(enc.ids))
        if span is None:
            span_tokens.append(None)
            continue
        s, e = span
        special = np.array(enc.special_tokens_mask, dtype=bool)
        offsets = np.array(enc.offsets, dtype=np.int64).reshape(-1, 2)
        inside = (offsets[:, 0] < e) & (offsets[:, 1] > s) & ~special
        span_tokens.append(inside)
    return EncodedRows(ids, span_tokens)


def collate(idx: Sequence[int], enc: EncodedRows, rows: LabelledRows, *, pad_id: int
            ) -> dict[str, torch.Tensor]:
    ids, mask = pad_batch([enc.ids[i] for i in idx], pad_id=pad_id)
    width = ids.shape[1]
    span_targets = torch.zeros((len(idx), width, N_PILLARS))
    span_mask = torch.zeros((len(idx), width), dtype=torch.bool)
    for r, i in enumerate(idx):
        inside = enc.span_tokens[i]
        if inside is None:
            continue
        n = len(enc.ids[i])
        special = torch.zeros(n, dtype=torch.bool)
        special[0] = True
        special[n - 1] = True
        span_mask[r, :n] = ~special
        tags = torch.from_numpy(rows.pillars[i])
        span_targets[r, :n][torch.from_numpy(inside)] = tags
    return {"input_ids": ids, "attention_mask": mask,
            "classes": torch.from_numpy(rows.classes[list(idx)]),
            "pillars": torch.from_numpy(rows.pillars[list(idx)]),
            "span_targets": span_targets, "span_mask": span_mask}


def epoch_batches(lengths: Sequence[int], *, batch_size: int, seed: int,
                  epoch: int) -> list[list[int]]:
    """A seeded shuffle for one epoch, with similar lengths grouped to cut padding: shuffle,
    sort within windows of 50 batches, cut into batches, shuffle the batch order."""
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    perm = torch.randperm(len(lengths), generator=gen).tolist()
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start:start + window], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    order = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in order]


# ============================================================================ checkpoints

def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], Any]:
    sd = opt.state_dict()
    tensors = {}
    for pid, state in sd["state"].items():
        for key, value in state.items():
            tensors[f"optim.{pid}.{key}"] = value.detach().clone().contiguous()
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
    from safetensors.torch import save_file

    from guarddiag.files import atomic_path

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
    from safetensors import safe_open

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


class _Log:
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


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by the ``stop_after_steps`` test hook, like a Ctrl-C after that many steps."""


# ============================================================================ run context

@dataclass
class RunOptions:
    checkpoint_every_s: float = 60.0
    """Wall-clock seconds between resume checkpoints (also written at every evaluation)."""
    checkpoint_every_steps: int | None = None
    stop_after_steps: int | None = None
    """Test hook: interrupt after this many optimizer steps in this process."""
    log_every: int = 20
    eval_batch_size: int = 128
    pretrained: dict[str, str] = field(default_factory=dict)
    """size → checkpoint folder or hub id for pretrained encoder weights."""
    threads: int | None = None
    """torch intra-op threads; None = :func:`guarddiag.model.auto_threads` of the plan."""


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    branch: str
    size: str
    seed: int
    status: str
    """``trained``, ``resumed`` or ``skipped`` (already finished with the same inputs)."""
    wall_s: float
    n_rows: int
    steps: int
    val_objective: float
    val_acc_a: float
    val_acc_b: float


@dataclass(frozen=True)
class TrainResult:
    runs: tuple[RunSummary, ...]
    runs_dir: Path

    def to_frame(self) -> pl.DataFrame:
        from dataclasses import asdict

        return pl.DataFrame([asdict(r) for r in self.runs])


def _fingerprint(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _is_finished(run_dir: Path) -> dict[str, Any] | None:
    meta_path = run_dir / META_FILE
    if not (meta_path.is_file() and (run_dir / MODEL_FILE).is_file()):
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return meta if meta.get("status") == STATUS_FINISHED else None


def tokenizer_for(pool: Pool, *, vocab_size: int, cache_dir: Path) -> GuardTokenizer:
    """A BPE tokenizer trained on the pool's whole train split, cached per pool and size."""
    folder = cache_dir / f"{pool.sha256[:16]}-v{vocab_size}"
    if (folder / "tokenizer.json").is_file():
        return GuardTokenizer.load(folder)
    tok = train_tokenizer(pool.split("train")["text"].to_list(), vocab_size=vocab_size)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(folder)
    return tok


def teacher_logits(teacher_dir: Path, texts: list[str], *, cache_dir: Path,
                   batch_size: int = 128) -> np.ndarray:
    """A teacher's class logits for ``texts``, cached on disk by teacher weights and texts."""
    from guarddiag.files import sha256_file
    from guarddiag.predict import guard_logits

    digest = hashlib.sha256()
    digest.update(sha256_file(teacher_dir / MODEL_FILE).encode())
    for t in texts:
        digest.update(t.encode("utf-8") + b"\x1f")
    path = cache_dir / f"{digest.hexdigest()[:32]}.safetensors"
    if path.is_file():
        return load_weights(path)["logits"].numpy()
    logits = guard_logits(load_guard(teacher_dir), texts, batch_size=batch_size)
    save_weights({"logits": torch.from_numpy(logits)}, path)
    return logits


# ============================================================================ evaluation

@dataclass(frozen=True)
class EvalResult:
    objective: float
    acc_a: float
    acc_b: float
    acc_target: float
    """Accuracy against the recipe's target (:func:`recipe_target`): what chooses the kept
    weights."""


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
    z = teacher_logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return (distill_weight * p + (1 - distill_weight) * onehot).argmax(axis=1)


def batch_loss(model: GuardModel, idx: np.ndarray, enc: EncodedRows, rows: LabelledRows, *,
               pad_id: int, teacher: np.ndarray | None, weights: LossWeights
               ) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
    """One batch through the full model and the guard loss: (loss, its parts, class logits).
    ``teacher`` holds the teacher's class logits for every row (route 2), else None."""
    batch = collate(idx, enc, rows, pad_id=pad_id)
    out = model(batch["input_ids"], batch["attention_mask"], with_span=True)
    t = torch.from_numpy(teacher[idx]) if teacher is not None else None
    loss, parts = guard_loss(out.class_logits, out.pillar_logits, out.span_logits,
                             classes=batch["classes"], pillars=batch["pillars"],
                             span_targets=batch["span_targets"], span_mask=batch["span_mask"],
                             teacher_logits=t, weights=weights)
    return loss, parts, out.class_logits


def _evaluate(model: GuardModel, enc: EncodedRows, rows: LabelledRows, *,
              labels_a: np.ndarray, labels_b: np.ndarray, target: np.ndarray,
              teacher: np.ndarray | None, weights: LossWeights, pad_id: int,
              batch_size: int) -> EvalResult:
    """On the val rows: the training objective (logged), and 4-class accuracy against policy
    A, policy B and the recipe's target (which chooses the kept weights)."""
    from guarddiag.model import length_sorted_batches

    model.eval()
    total, n = 0.0, 0
    pred = np.empty(len(rows), dtype=np.int64)
    with torch.inference_mode():
        for idx in length_sorted_batches(enc.lengths, batch_size):
            loss, _, class_logits = batch_loss(model, idx, enc, rows, pad_id=pad_id,
                                               teacher=teacher, weights=weights)
            total += float(loss) * len(idx)
            n += len(idx)
            pred[idx] = class_logits.argmax(-1).numpy()
    model.train()
    return EvalResult(total / max(n, 1), float((pred == labels_a).mean()),
                      float((pred == labels_b).mean()), float((pred == target).mean()))


def _policy_labels(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([CLASS_INDEX[c] for c in frame["label_a"].to_list()], dtype=np.int64),
            np.array([CLASS_INDEX[c] for c in frame["label_b"].to_list()], dtype=np.int64))


def _lr_at(step: int, *, total: int, peak: float, warmup: int) -> float:
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    remaining = max(total - warmup, 1)
    return peak * max(0.0, 1.0 - (step - warmup) / remaining)


def _eval_steps(steps_per_epoch: int, epochs: int, per_epoch: int) -> set[int]:
    """Global step counts (after that many steps) at which the val split is evaluated."""
    out = set()
    for e in range(epochs):
        for k in range(1, per_epoch + 1):
            out.add(e * steps_per_epoch + max(1, round(k * steps_per_epoch / per_epoch)))
    return out


# ============================================================================ route 1+2

def _train_full(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool,
                runs_dir: Path, options: RunOptions, fingerprint: str) -> dict[str, Any]:
    size = get_size(run.size)
    pretrained = options.pretrained.get(run.size)
    if pretrained:
        from guarddiag.model import pretrained_tokenizer

        tokenizer = pretrained_tokenizer(pretrained)
    else:
        tokenizer = tokenizer_for(pool, vocab_size=size.vocab_size,
                                  cache_dir=runs_dir / "_cache" / "tokenizers")
    train_frame = sample_split(pool, "train", spec.train_rows)
    val_frame = sample_split(pool, "val", spec.val_rows)
    rows = label_rows(train_frame, fraction=spec.policy_a_fraction, anchors=spec.anchors,
                      where=str(pool.path))
    val_rows = label_rows(val_frame, fraction=spec.policy_a_fraction, anchors=spec.anchors,
                          where=str(pool.path))
    max_length = int(spec.max_length or 128)
    enc = encode_rows(tokenizer, rows, max_length=max_length)
    val_enc = encode_rows(tokenizer, val_rows, max_length=max_length)
    labels_a, labels_b = _policy_labels(val_frame)

    teach = teach_val = None
    if spec.distill and run.teacher:
        cache = runs_dir / "_cache" / "teacher_logits"
        teacher_dir = runs_dir / run.teacher
        teach = teacher_logits(teacher_dir, rows.texts, cache_dir=cache)
        teach_val = teacher_logits(teacher_dir, val_rows.texts, cache_dir=cache)
    weights = LossWeights.of(spec)
    val_target = recipe_target(val_rows.classes, teach_val, distill_weight=weights.distill_weight)

    model = build_guard(size=run.size, tokenizer=tokenizer, seed=run.seed, checkpoint=pretrained)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=spec.lr,
                            foreach=False)
    steps_per_epoch = math.ceil(len(rows) / spec.batch_size)
    total = steps_per_epoch * spec.epochs
    warmup = round(spec.warmup_fraction * total)
    evals = _eval_steps(steps_per_epoch, spec.epochs, spec.evals_per_epoch)

    ckpt_path = run_dir / CHECKPOINT_FILE
    step, best, best_info, keep_lines = 0, None, None, None
    resumed = False
    if ckpt_path.is_file():
        try:
            m_state, o_state, best, info = load_checkpoint(ckpt_path)
        except (GuarddiagError, KeyError, json.JSONDecodeError):
            info = {}
        if info.get("fingerprint") == fingerprint:
            model.load_state_dict(m_state)
            opt.load_state_dict(o_state)
            step, best_info, keep_lines = info["step"], info["best"], info["log_lines"]
            resumed = True
        else:
            best = None
    log = _Log(run_dir / LOG_FILE, keep_lines=keep_lines)
    if resumed:
        log.write({"event": "resume", "step": step})
        say(f"{run.run_id}: resuming at step {step}/{total}")
    else:
        log.write({"event": "start", "run_id": run.run_id, "n_train": len(rows),
                   "n_val": len(val_rows), "steps": total, "seed": run.seed})

    def checkpoint() -> None:
        save_checkpoint(ckpt_path, model=model, opt=opt, best=best,
                        info={"fingerprint": fingerprint, "step": step, "best": best_info,
                              "log_lines": len(log.lines)})

    model.train()
    bar = progress(total=total, initial=step, desc=run.run_id, unit="step")
    t_start = time.monotonic()
    last_ckpt = t_start
    seen, steps_here = 0, 0
    try:
        while step < total:
            epoch, pos = divmod(step, steps_per_epoch)
            batches = epoch_batches(enc.lengths, batch_size=spec.batch_size, seed=run.seed,
                                    epoch=epoch)
            for idx in batches[pos:]:
                for g in opt.param_groups:
                    g["lr"] = _lr_at(step, total=total, peak=spec.lr, warmup=warmup)
                loss, parts, _ = batch_loss(model, idx, enc, rows, pad_id=tokenizer.pad_id,
                                            teacher=teach, weights=weights)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                step += 1
                steps_here += 1
                seen += len(idx)
                rate = seen / max(time.monotonic() - t_start, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{parts['loss']:.3f}", ex_s=f"{rate:.0f}")
                if step % options.log_every == 0 or step == total:
                    log.write({"event": "step", "step": step, "epoch": epoch,
                               "lr": opt.param_groups[0]["lr"], "ex_per_s": round(rate, 1),
                               **{k: round(v, 5) for k, v in parts.items()}})
                if step in evals:
                    ev = _evaluate(model, val_enc, val_rows, labels_a=labels_a,
                                   labels_b=labels_b, target=val_target, teacher=teach_val,
                                   weights=weights, pad_id=tokenizer.pad_id,
                                   batch_size=options.eval_batch_size)
                    improved = best_info is None or ev.acc_target > best_info["val_acc_target"]
                    if improved:
                        best = state_to_cpu(model)
                        best_info = {"step": step, "val_objective": ev.objective,
                                     "val_acc_a": ev.acc_a, "val_acc_b": ev.acc_b,
                                     "val_acc_target": ev.acc_target}
                    log.write({"event": "eval", "step": step, "val_objective": ev.objective,
                               "val_acc_a": ev.acc_a, "val_acc_b": ev.acc_b,
                               "val_acc_target": ev.acc_target, "kept": improved})
                    checkpoint()
                    last_ckpt = time.monotonic()
                elif (time.monotonic() - last_ckpt >= options.checkpoint_every_s
                      or (options.checkpoint_every_steps
                          and step % options.checkpoint_every_steps == 0)):
                    checkpoint()
                    last_ckpt = time.monotonic()
                if options.stop_after_steps is not None \
                        and steps_here >= options.stop_after_steps and step < total:
                    raise TrainingInterrupted(f"stopped after {steps_here} steps (test hook)")
    finally:
        bar.close()
    assert best is not None
    assert best_info is not None
    model.load_state_dict(best)
    model_section = save_guard(model, tokenizer, run_dir, size=run.size,
                               max_length=max_length, checkpoint=pretrained)
    log.write({"event": "done", "step": step, "kept_step": best_info["step"]})
    return {"model": model_section, "best": best_info, "steps": total,
            "n_rows": len(rows), "n_val_rows": len(val_rows), "resumed": resumed,
            "train_wall_s_this_process": round(time.monotonic() - t_start, 2),
            "label_counts": _label_counts(rows)}


def _label_counts(rows: LabelledRows) -> dict[str, Any]:
    counts = np.bincount(rows.classes, minlength=len(CLASSES))
    return {"classes": {c: int(n) for c, n in zip(CLASSES, counts, strict=True)},
            "n_policy_a": int(rows.policy.sum()),
            "n_with_span": int(sum(s is not None for s in rows.spans))}


# ============================================================================ route 3

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
                   batch_size: int = 128) -> CachedStates:
    """Run the frozen encoder once over ``rows`` (or the subset ``idx``, renumbered)."""
    from guarddiag.model import length_sorted_batches

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
            states = model.encode(batch["input_ids"], batch["attention_mask"])
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


def head_loss(heads: torch.nn.Module, feats: CachedStates, classes: torch.Tensor,
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


@dataclass(frozen=True)
class Whitening:
    """A fixed affine map z = (x − mean) · proj with decorrelated, unit-variance z.

    Head-only training runs in this basis and folds the result back: a linear head on z is a
    linear head on x, so nothing about the model changes, but the ill-conditioned LayerNorm'd
    encoder states no longer slow first-order training (measured on micro: 2 epochs reached a
    loss of 0.28 instead of 0.34, against an optimum of 0.28). Directions in which the states
    hardly vary (LayerNorm leaves at least one) are left out of z, and a head's weights along
    them are carried through unchanged, so no optimiser step can blow them up.
    """

    mean: torch.Tensor
    """[h]"""
    proj: torch.Tensor
    """[h, k]: raw → whitened"""
    lift: torch.Tensor
    """[k, h]: whitened-basis weights are ``w @ lift.T``"""
    null: torch.Tensor
    """[h, h − k]: orthonormal basis of the left-out directions"""

    @classmethod
    def identity(cls, h: int) -> Whitening:
        return cls(torch.zeros(h), torch.eye(h), torch.eye(h), torch.zeros((h, 0)))

    @classmethod
    def fit(cls, x: torch.Tensor, *, floor: float = 1e-4) -> Whitening:
        h = x.shape[1]
        if x.shape[0] < 2:
            return cls.identity(h)
        x = x.double()
        mean = x.mean(0)
        cov = torch.cov((x - mean).T).reshape(h, h)
        eig, vec = torch.linalg.eigh(cov)
        keep = eig > float(eig.max()) * floor
        if not bool(keep.any()):
            return cls.identity(h)
        k_vec, k_eig = vec[:, keep], eig[keep]
        return cls(mean.float(), (k_vec / k_eig.sqrt()).float(),
                   (k_eig.sqrt()[:, None] * k_vec.T).float(), vec[:, ~keep].float())

    @property
    def dims(self) -> int:
        return self.proj.shape[1]

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) @ self.proj

    def head_in(self, linear: torch.nn.Linear) -> tuple[torch.Tensor, torch.Tensor,
                                                         torch.Tensor]:
        """(weight, bias) in the whitened basis, and the weight part along left-out
        directions, such that ``z @ weight.T + bias`` equals ``linear(x)`` on the states."""
        w, b = linear.weight.detach(), linear.bias.detach()
        fixed = w @ self.null @ self.null.T
        return w @ self.lift.T, b + w @ self.mean, fixed

    def head_out(self, weight: torch.Tensor, bias: torch.Tensor, fixed: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(weight, bias) on raw states of a whitened-basis head (inverse of :meth:`head_in`)."""
        w = weight.detach() @ self.proj.T + fixed
        return w, bias.detach() - w @ self.mean


class _WhitenedHeads(torch.nn.Module):
    """The three heads in whitened bases ([CLS] and span tokens may differ in rank)."""

    def __init__(self, heads: torch.nn.Module, w_cls: Whitening, w_tok: Whitening):
        super().__init__()
        self.bases = {"class_head": w_cls, "pillar_head": w_cls, "span_head": w_tok}
        self.fixed: dict[str, torch.Tensor] = {}
        for name, wt in self.bases.items():
            src = getattr(heads, name)
            lin = torch.nn.Linear(wt.dims, src.out_features)
            w, b, fixed = wt.head_in(src)
            with torch.no_grad():
                lin.weight.copy_(w)
                lin.bias.copy_(b)
            setattr(self, name, lin)
            self.fixed[name] = fixed

    def fold_into(self, heads: torch.nn.Module) -> None:
        with torch.no_grad():
            for name, wt in self.bases.items():
                lin = getattr(self, name)
                w, b = wt.head_out(lin.weight, lin.bias, self.fixed[name])
                getattr(heads, name).weight.copy_(w)
                getattr(heads, name).bias.copy_(b)


def train_heads(model: GuardModel, *, features: Callable[[torch.Tensor], CachedStates],
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
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    hidden = heads.class_head.in_features
    w_cls, w_tok = whitening or (Whitening.identity(hidden), Whitening.identity(hidden))
    zheads = _WhitenedHeads(heads, w_cls, w_tok)
    opt = torch.optim.AdamW(zheads.parameters(), lr=lr, weight_decay=weight_decay,
                            foreach=False)
    y = torch.from_numpy(classes)
    z = torch.from_numpy(pillars)
    n_rows = len(classes)
    steps_per_epoch = math.ceil(n_rows / batch_size)
    total = steps_per_epoch * epochs
    evals = _eval_steps(steps_per_epoch, epochs, evals_per_epoch)
    gen = torch.Generator().manual_seed(seed)
    best_state, best_score, best_step, step = None, -math.inf, total, 0
    for _ in range(epochs):
        perm = torch.randperm(n_rows, generator=gen)
        for start in range(0, n_rows, batch_size):
            idx = perm[start:start + batch_size]
            for g in opt.param_groups:
                g["lr"] = _lr_at(step, total=total, peak=lr, warmup=0)
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


def _train_head_only(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool,
                     runs_dir: Path, options: RunOptions) -> dict[str, Any]:
    parent_dir = runs_dir / (run.parent or "")
    parent: LoadedGuard = load_guard(parent_dir)
    model, tokenizer = parent.model, parent.tokenizer
    parent_encoder = {k: v.clone() for k, v in model.encoder_state_dict().items()}
    cal_frame, counts = calibration_frame(pool, spec)
    val_frame = sample_split(pool, "val", spec.val_rows)
    rows = label_rows(cal_frame, fraction=spec.policy_a_fraction, anchors=False,
                      where=str(pool.path))
    val_rows = label_rows(val_frame, fraction=spec.policy_a_fraction, anchors=False,
                          where=str(pool.path))
    enc = encode_rows(tokenizer, rows, max_length=parent.max_length)
    val_enc = encode_rows(tokenizer, val_rows, max_length=parent.max_length)
    labels_a, labels_b = _policy_labels(val_frame)
    weights = LossWeights(0.0, spec.temperature, spec.pillar_weight, spec.span_weight)
    log = _Log(run_dir / LOG_FILE, keep_lines=None)
    log.write({"event": "start", "run_id": run.run_id, "parent": run.parent, **counts,
               "n_val": len(val_rows), "seed": run.seed})

    t0 = time.monotonic()
    feats = encoder_states(model, enc, rows, pad_id=tokenizer.pad_id,
                           batch_size=options.eval_batch_size)
    log.write({"event": "cached_states", "rows": len(rows),
               "span_tokens": int(feats.token_states.shape[0]),
               "seconds": round(time.monotonic() - t0, 3)})
    val_feats = encoder_states(model, val_enc, val_rows, pad_id=tokenizer.pad_id,
                               batch_size=options.eval_batch_size)
    val_y = torch.from_numpy(val_rows.classes)
    val_z = torch.from_numpy(val_rows.pillars)
    last_eval: dict[str, float] = {}

    def evaluate() -> float:
        with torch.no_grad():
            loss, _ = head_loss(model.heads, val_feats, val_y, val_z, weights)
            pred = model.heads.class_head(val_feats.cls).argmax(-1).numpy()
        last_eval.update(objective=float(loss), acc_a=float((pred == labels_a).mean()),
                         acc_b=float((pred == labels_b).mean()),
                         acc_target=float((pred == val_rows.classes).mean()))
        return last_eval["acc_target"]

    evals: list[dict[str, float]] = []

    def on_eval(step: int, score: float) -> None:
        evals.append({"step": step, **last_eval})
        log.write({"event": "eval", "step": step, "val_objective": last_eval["objective"],
                   "val_acc_a": last_eval["acc_a"], "val_acc_b": last_eval["acc_b"],
                   "val_acc_target": last_eval["acc_target"]})

    info = train_heads(model, features=feats.rows, classes=rows.classes, pillars=rows.pillars,
                       epochs=spec.epochs, lr=spec.lr, batch_size=spec.batch_size,
                       weight_decay=spec.weight_decay, seed=run.seed, weights=weights,
                       whitening=fit_whitening(feats), evaluate=evaluate,
                       evals_per_epoch=spec.evals_per_epoch, on_eval=on_eval)
    # The route's defining promise: the encoder leaves exactly as it came.
    for k, v in model.encoder_state_dict().items():
        if not torch.equal(v, parent_encoder[k]):
            raise GuarddiagError(f"{run.run_id}: encoder weight {k} changed during head-only "
                                 f"training (internal error)")
    kept = next(e for e in evals if e["step"] == info["best_step"])
    best_info = {"step": info["best_step"], "val_objective": kept["objective"],
                 "val_acc_a": kept["acc_a"], "val_acc_b": kept["acc_b"],
                 "val_acc_target": kept["acc_target"]}
    model_section = save_guard(model, tokenizer, run_dir, size=run.size,
                               max_length=parent.max_length,
                               checkpoint=parent.meta["model"].get("checkpoint"))
    log.write({"event": "done", "step": info["steps"], "kept_step": info["best_step"]})
    return {"model": model_section, "best": best_info, "steps": info["steps"],
            "n_rows": len(rows), "n_val_rows": len(val_rows), "resumed": False,
            "calibration": counts, "label_counts": _label_counts(rows)}


# ============================================================================ runner

def _run_fingerprint(spec: BranchSpec, run: PlannedRun, pool: Pool, runs_dir: Path,
                     options: RunOptions) -> tuple[str, dict[str, str]]:
    from guarddiag.files import sha256_file

    inputs = {"pool.parquet": pool.sha256}
    for role, dep in (("teacher", run.teacher), ("parent", run.parent)):
        if dep:
            inputs[f"{role}:{dep}"] = sha256_file(runs_dir / dep / MODEL_FILE)
    payload = {"spec": spec.resolved(), "run_id": run.run_id, "inputs": inputs,
               "pretrained": options.pretrained.get(run.size),
               "training_version": TRAINING_VERSION}
    return _fingerprint(payload), inputs


def train_run(spec: BranchSpec, run: PlannedRun, *, pool: Pool, runs_dir: Path,
              options: RunOptions | None = None) -> RunSummary:
    """Train one planned run (its dependencies must be finished), or skip it if done."""
    from guarddiag.files import write_meta

    options = options or RunOptions()
    run_dir = runs_dir / run.run_id
    for dep in run.deps():
        if _is_finished(runs_dir / dep) is None:
            raise GuarddiagError(f"{run.run_id}: needs the finished run {dep} first")
    fingerprint, inputs = _run_fingerprint(spec, run, pool, runs_dir, options)
    done = _is_finished(run_dir)
    if done is not None:
        if done.get("train", {}).get("fingerprint") == fingerprint:
            (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
            say(f"{run.run_id}: already finished with this spec and these inputs; skipped")
            return _summary(run, done, status="skipped", wall_s=0.0)
        say(f"{run.run_id}: spec or inputs changed since it was trained; retraining")
        (run_dir / META_FILE).unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    if spec.head_only:
        info = _train_head_only(spec, run, run_dir, pool, runs_dir, options)
    else:
        info = _train_full(spec, run, run_dir, pool, runs_dir, options, fingerprint)
    wall = time.monotonic() - t0
    model_section = info.pop("model")
    resumed = info.pop("resumed")
    write_meta(run_dir, inputs=inputs, seed=run.seed, status=STATUS_FINISHED,
               run_id=run.run_id, branch=run.branch, size=run.size,
               label_policy=spec.label_policy(), teacher=run.teacher, parent=run.parent,
               spec=spec.resolved(), model=model_section,
               train={"fingerprint": fingerprint, "training_version": TRAINING_VERSION,
                      "wall_s": round(wall, 2), **info})
    (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
    meta = _is_finished(run_dir) or {}
    summary = _summary(run, meta, status="resumed" if resumed else "trained", wall_s=wall)
    say(f"{run.run_id}: {summary.status} in {wall:.1f}s — val acc A {summary.val_acc_a:.3f}, "
        f"B {summary.val_acc_b:.3f} (kept step {meta['train']['best']['step']})")
    return summary


def _summary(run: PlannedRun, meta: dict[str, Any], *, status: str,
             wall_s: float) -> RunSummary:
    train = meta.get("train", {})
    best = train.get("best", {})
    return RunSummary(run.run_id, run.branch, run.size, run.seed, status, round(wall_s, 2),
                      int(train.get("n_rows", 0)), int(train.get("steps", 0)),
                      float(best.get("val_objective", math.nan)),
                      float(best.get("val_acc_a", math.nan)),
                      float(best.get("val_acc_b", math.nan)))


def train_branches(*, branches: BranchSet, names: str | Sequence[str] = "all",
                   sizes: Sequence[str] = ("micro",), seeds: Sequence[int] = (42,),
                   runs_dir: str | Path, pool_path: str | Path,
                   options: RunOptions | None = None) -> TrainResult:
    """Train every run of the plan in dependency order; finished runs are skipped."""
    from guarddiag.model import auto_threads, torch_threads

    runs_dir = Path(runs_dir)
    plan = plan_runs(branches, names=names, sizes=sizes, seeds=seeds)
    pool = read_pool(pool_path)
    options = options or RunOptions()
    threads = options.threads if options.threads is not None else \
        auto_threads(r.size for r in plan)
    say(f"training plan, {len(plan)} run(s) into {runs_dir}"
        + (f" ({threads} torch thread(s))" if threads else "") + ": "
        + ", ".join(r.run_id for r in plan))
    out = []
    with torch_threads(threads):
        for run in plan:
            out.append(train_run(branches[run.branch], run, pool=pool, runs_dir=runs_dir,
                                 options=options))
    return TrainResult(tuple(out), runs_dir)


def finished_runs(runs_dir: str | Path) -> list[Path]:
    """Folders of finished runs under ``runs_dir`` (``<size>/<branch>/seed=<s>``)."""
    runs_dir = Path(runs_dir)
    out = []
    for meta in sorted(runs_dir.glob(f"*/*/seed=*/{META_FILE}")):
        if _is_finished(meta.parent) is not None:
            out.append(meta.parent)
    return out


def remove_run(run_dir: Path) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)


# ============================================================================ bench

@dataclass(frozen=True)
class BenchRecalibrateResult:
    n_rows: int
    epochs: int
    cache_s: float
    """One encoder pass over the calibration rows."""
    cached_train_s: float
    """Head training on the cached states, all epochs."""
    recompute_train_s: float
    """Head training that re-runs the frozen encoder for every batch, all epochs."""
    max_abs_diff: float
    """Largest difference between the two routes' class probabilities on the calibration
    rows (float rounding of differently padded batches, compounded over the steps)."""

    @property
    def speedup(self) -> float:
        return self.recompute_train_s / (self.cache_s + self.cached_train_s)

    @property
    def per_epoch_speedup(self) -> float:
        return self.recompute_train_s / max(self.cached_train_s, 1e-9)

    def to_frame(self) -> pl.DataFrame:
        from dataclasses import asdict

        return pl.DataFrame([{**asdict(self), "speedup": self.speedup,
                              "per_epoch_speedup": self.per_epoch_speedup}])


def bench_recalibrate(guard: LoadedGuard, rows: LabelledRows, *, epochs: int = 10,
                      batch_size: int = 64, lr: float = 0.1, seed: int = 0
                      ) -> BenchRecalibrateResult:
    """Head-only training with cached encoder states vs re-running the encoder per batch.

    Both start from the same heads and see the same batches, so they must end at the same
    weights (up to float rounding of differently padded batches)."""
    import copy

    enc = encode_rows(guard.tokenizer, rows, max_length=guard.max_length)
    weights = LossWeights()
    kwargs = {"classes": rows.classes, "pillars": rows.pillars, "epochs": epochs, "lr": lr,
              "batch_size": batch_size, "weight_decay": 0.0, "seed": seed,
              "weights": weights}
    cached_model = copy.deepcopy(guard.model)
    t0 = time.perf_counter()
    feats = encoder_states(cached_model, enc, rows, pad_id=guard.tokenizer.pad_id)
    t1 = time.perf_counter()
    train_heads(cached_model, features=feats.rows, whitening=fit_whitening(feats), **kwargs)
    t2 = time.perf_counter()
    slow_model = copy.deepcopy(guard.model)
    # The recomputing route needs the same whitening statistics, i.e. one full pass of its
    # own (counted in its time), then re-runs the encoder for every batch.
    stats = encoder_states(slow_model, enc, rows, pad_id=guard.tokenizer.pad_id)
    train_heads(slow_model, features=recomputing_features(slow_model, enc, rows,
                                                          pad_id=guard.tokenizer.pad_id),
                whitening=fit_whitening(stats), **kwargs)
    t3 = time.perf_counter()
    with torch.no_grad():
        p_cached = torch.softmax(cached_model.heads.class_head(feats.cls), -1)
        p_slow = torch.softmax(slow_model.heads.class_head(feats.cls), -1)
        diff = float((p_cached - p_slow).abs().max())
    return BenchRecalibrateResult(len(rows), epochs, t1 - t0, t2 - t1, t3 - t2, diff)
