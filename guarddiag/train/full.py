"""Routes 1 and 2 — hard labels and distillation: fine-tune the whole guard.

A run is a recipe in three steps (:class:`FullRoute`): ``setup`` (tokenizer, labelled rows,
teacher logits, model, optimizer, and the checkpoint of an interrupted run), ``train`` (the
seeded loop with evaluations on the English val rows and resume checkpoints) and ``save`` (the kept
weights: the best evaluation). The class loss is ``α·τ²·KL(teacher ‖ student) + (1−α)·CE``
with a teacher (route 2), plain CE without (route 1).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file
from guarddiag.model.device import CPU, DeviceSetup, iter_chunks
from guarddiag.model.guard import GuardModel, build_guard, length_sorted_batches
from guarddiag.model.logits import run_scorer
from guarddiag.model.portable import adamw
from guarddiag.model.sizes import get_size
from guarddiag.model.store import save_guard
from guarddiag.model.tokenizer import GuardTokenizer, pretrained_tokenizer, train_tokenizer
from guarddiag.model.weights import load_weights, save_weights, state_to_cpu
from guarddiag.paths import RunsFolder
from guarddiag.pool.table import Pool, selection_split
from guarddiag.progress import progress
from guarddiag.runs import CHECKPOINT_FILE, LOG_FILE, MODEL_FILE, TOKENIZER_FILE
from guarddiag.train.batches import EncodedRows, collate, encode_rows, epoch_batches
from guarddiag.train.branches import BranchSpec, PlannedRun
from guarddiag.train.checkpoint import TrainLog, load_checkpoint, save_checkpoint
from guarddiag.train.losses import LossWeights, guard_loss, recipe_target
from guarddiag.train.options import TrainingInterrupted, TrainOptions
from guarddiag.train.rows import (
    LabelledRows,
    label_counts,
    labelled,
    policy_labels,
    training_frame,
)
from guarddiag.train.schedule import eval_steps, lr_at

logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- inputs

def tokenizer_for(pool: Pool, *, vocab_size: int, cache_dir: Path) -> GuardTokenizer:
    """A BPE tokenizer trained on the pool's whole train split, cached per pool and size."""
    folder = cache_dir / f"{pool.sha256[:16]}-v{vocab_size}"
    if (folder / TOKENIZER_FILE).is_file():
        return GuardTokenizer.load(folder)
    tok = train_tokenizer(pool.split("train")["text"].to_list(), vocab_size=vocab_size)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(folder)
    return tok


def teacher_logits(teacher_dir: Path, texts: list[str], *, cache_dir: Path,
                   batch_size: int = 128, device: torch.device | None = None) -> np.ndarray:
    """A teacher's class logits for ``texts``, cached on disk by teacher weights and texts."""
    digest = hashlib.sha256()
    digest.update(sha256_file(teacher_dir / MODEL_FILE).encode())
    if device is not None and device.type != "cpu":
        # logits from an autocast (bf16) pass are not the CPU's float32 ones: never mix them
        digest.update(f"device:{device.type}".encode())
    for t in texts:
        digest.update(t.encode("utf-8") + b"\x1f")
    path = cache_dir / f"{digest.hexdigest()[:32]}.safetensors"
    if path.is_file():
        return load_weights(path)["logits"].numpy()
    logits = run_scorer(teacher_dir, batch_size=batch_size, device=device)(texts)
    save_weights({"logits": torch.from_numpy(logits)}, path)
    return logits


# ----------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class EvalResult:
    objective: float
    acc_a: float
    acc_b: float
    acc_target: float
    """Accuracy against the recipe's target (:func:`recipe_target`): what chooses the kept
    weights."""


def batch_loss(model: GuardModel, idx: list[int], enc: EncodedRows, rows: LabelledRows, *,
               pad_id: int, teacher: np.ndarray | None, weights: LossWeights,
               dev: DeviceSetup = CPU) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
    """One batch through the full model and the guard loss: (loss, its parts, class logits).
    ``teacher`` holds the teacher's class logits for every row (route 2), else None. On the
    CPU, ``dev`` changes nothing; on CUDA the batch moves there and runs under autocast."""
    batch = dev.put_all(collate(idx, enc, rows, pad_id=pad_id))
    with dev.autocast():
        out = model(batch["input_ids"], batch["attention_mask"], with_span=True)
        t = dev.put(torch.from_numpy(teacher[idx])) if teacher is not None else None
        loss, parts = guard_loss(out.class_logits, out.pillar_logits, out.span_logits,
                                 classes=batch["classes"], pillars=batch["pillars"],
                                 span_targets=batch["span_targets"],
                                 span_mask=batch["span_mask"], teacher_logits=t,
                                 weights=weights)
    return loss, parts, out.class_logits


def evaluate_val(model: GuardModel, enc: EncodedRows, rows: LabelledRows, *,
                 labels_a: np.ndarray, labels_b: np.ndarray, target: np.ndarray,
                 teacher: np.ndarray | None, weights: LossWeights, pad_id: int,
                 batch_size: int, dev: DeviceSetup = CPU) -> EvalResult:
    """On the val rows: the training objective (logged), and 4-class accuracy against policy
    A, policy B and the recipe's target (which chooses the kept weights)."""
    model.eval()
    total, n = 0.0, 0
    pred = np.empty(len(rows), dtype=np.int64)
    with torch.inference_mode():
        for idx in length_sorted_batches(enc.lengths, batch_size):
            loss, _, class_logits = batch_loss(model, idx, enc, rows, pad_id=pad_id,
                                               teacher=teacher, weights=weights, dev=dev)
            total += float(loss) * len(idx)
            n += len(idx)
            pred[idx] = class_logits.argmax(-1).cpu().numpy()
    model.train()
    return EvalResult(total / max(n, 1), float((pred == labels_a).mean()),
                      float((pred == labels_b).mean()), float((pred == target).mean()))


# ----------------------------------------------------------------------------- the recipe

@dataclass(frozen=True)
class FullData:
    """What a full-route run trains and evaluates on, prepared once in :meth:`FullRoute.setup`."""

    tokenizer: GuardTokenizer
    max_length: int
    rows: LabelledRows
    enc: EncodedRows
    val_rows: LabelledRows
    val_enc: EncodedRows
    labels_a: np.ndarray
    """[n_val] class index under policy A"""
    labels_b: np.ndarray
    val_target: np.ndarray
    """[n_val] the recipe's target class (:func:`recipe_target`): chooses the kept weights."""
    teacher: np.ndarray | None
    """Teacher class logits of every training row (route 2), else None."""
    teacher_val: np.ndarray | None


def prepare_data(spec: BranchSpec, run: PlannedRun, pool: Pool, runs_dir: Path, *,
                 pretrained: str | None, weights: LossWeights,
                 device: torch.device | None = None) -> FullData:
    """Tokenizer, labelled train and val rows, and the teacher's logits for a distill run."""
    size = get_size(run.size)
    if pretrained:
        tokenizer = pretrained_tokenizer(pretrained)
    else:
        tokenizer = tokenizer_for(pool, vocab_size=size.vocab_size,
                                  cache_dir=RunsFolder(runs_dir).cache / "tokenizers")
    train_frame = training_frame(pool, spec)
    val_frame = selection_split(pool, spec.val_rows)
    rows, val_rows = labelled(pool, spec, train_frame, val_frame, anchors=spec.anchors)
    max_length = int(spec.max_length or 128)
    enc = encode_rows(tokenizer, rows, max_length=max_length)
    val_enc = encode_rows(tokenizer, val_rows, max_length=max_length)
    labels_a, labels_b = policy_labels(val_frame)

    teach = teach_val = None
    if spec.distill and run.teacher:
        cache = RunsFolder(runs_dir).cache / "teacher_logits"
        teacher_dir = runs_dir / run.teacher
        teach = teacher_logits(teacher_dir, rows.texts, cache_dir=cache, device=device)
        teach_val = teacher_logits(teacher_dir, val_rows.texts, cache_dir=cache, device=device)
    val_target = recipe_target(val_rows.classes, teach_val, distill_weight=weights.distill_weight)
    return FullData(tokenizer, max_length, rows, enc, val_rows, val_enc, labels_a, labels_b,
                    val_target, teach, teach_val)


class FullRoute:
    """One run of routes 1-2: :meth:`setup`, :meth:`train`, :meth:`save`.

    A checkpoint holds the model, the optimizer, the best weights so far and the loop
    position, so a resumed run replays the same batches to the same final weights."""

    def __init__(self, spec: BranchSpec, run: PlannedRun, run_dir: Path, *,
                 options: TrainOptions, fingerprint: str):
        self.spec, self.run, self.run_dir = spec, run, run_dir
        self.options, self.fingerprint = options, fingerprint
        self.pretrained = options.pretrained.get(run.size)
        self.weights = LossWeights.of(spec)
        self.dev = DeviceSetup.of(options.device)
        self.scaler = self.dev.scaler()
        self.ckpt_path = run_dir / CHECKPOINT_FILE
        self.step = 0
        self.best: dict[str, torch.Tensor] | None = None
        self.best_info: dict[str, Any] | None = None
        self.resumed = False

    def setup(self, pool: Pool, runs_dir: Path) -> None:
        spec, run = self.spec, self.run
        self.data = prepare_data(spec, run, pool, runs_dir, pretrained=self.pretrained,
                                 weights=self.weights, device=self.dev.device)
        self.model = build_guard(size=run.size, tokenizer=self.data.tokenizer, seed=run.seed,
                                 checkpoint=self.pretrained)
        if not self.dev.is_cpu:
            self.model.to(self.dev.device)
        if self.options.compile:
            # Module.compile keeps the parameter names, so checkpoints and saved weights are
            # the same files as without it.
            self.model.encoder.compile()
        self.opt = adamw(self.model, lr=spec.lr, weight_decay=spec.weight_decay)
        self.steps_per_epoch = math.ceil(len(self.data.rows) / spec.batch_size)
        self.total = self.steps_per_epoch * spec.epochs
        self.warmup = round(spec.warmup_fraction * self.total)
        self.evals = eval_steps(self.steps_per_epoch, spec.epochs, spec.evals_per_epoch)
        self.log = TrainLog(self.run_dir / LOG_FILE, keep_lines=self._resume())
        if self.resumed:
            self.log.write({"event": "resume", "step": self.step})
            logger.info(f"{run.run_id}: resuming at step {self.step}/{self.total}")
        else:
            self.log.write({"event": "start", "run_id": run.run_id,
                            "n_train": len(self.data.rows), "n_val": len(self.data.val_rows),
                            "steps": self.total, "seed": run.seed})

    def _resume(self) -> int | None:
        """Load the checkpoint an interrupted run of the same fingerprint left; returns the
        number of log lines it had written (None: start afresh)."""
        if not self.ckpt_path.is_file():
            return None
        try:
            m_state, o_state, best, info = load_checkpoint(self.ckpt_path)
        except (GuarddiagError, KeyError, json.JSONDecodeError):
            return None
        if info.get("fingerprint") != self.fingerprint:
            return None
        self.model.load_state_dict(m_state)
        self.opt.load_state_dict(o_state)
        self.best, self.step, self.best_info = best, info["step"], info["best"]
        if self.scaler is not None and info.get("scaler"):
            self.scaler.load_state_dict(info["scaler"])
        self.resumed = True
        return info["log_lines"]

    def train(self) -> None:
        """The loop, from the current step to the last."""
        self.model.train()
        bar = progress(total=self.total, initial=self.step, desc=self.run.run_id, unit="step")
        self.t_start = time.monotonic()
        self.last_ckpt = self.t_start
        self.seen, self.steps_here = 0, 0
        try:
            while self.step < self.total:
                epoch, pos = divmod(self.step, self.steps_per_epoch)
                batches = epoch_batches(self.data.enc.lengths, batch_size=self.spec.batch_size,
                                        seed=self.run.seed, epoch=epoch)
                for idx in batches[pos:]:
                    self._train_step(idx, epoch=epoch, bar=bar)
        finally:
            bar.close()

    def _forward_backward(self, idx: list[int]) -> dict[str, float]:
        """Gradients of one step's loss; with ``micro_batch``, accumulated over micro-batches,
        each weighted by its share of the rows. Dropout draws from a generator seeded by
        (run seed, step), so a resumed run replays the same masks (ModernBERT has none)."""
        data = self.data
        chunks = list(iter_chunks(idx, self.options.micro_batch))
        total: dict[str, float] = {}
        rng_devices = [self.dev.device] if self.dev.device.type == "cuda" else []
        with torch.random.fork_rng(devices=rng_devices):
            torch.manual_seed(self.run.seed * 1_000_003 + self.step)
            for k, chunk in enumerate(chunks):
                loss, parts, _ = batch_loss(self.model, chunk, data.enc, data.rows,
                                            pad_id=data.tokenizer.pad_id,
                                            teacher=data.teacher, weights=self.weights,
                                            dev=self.dev)
                if k == 0:
                    self.opt.zero_grad(set_to_none=True)
                if len(chunks) > 1:
                    loss = loss * (len(chunk) / len(idx))
                if self.scaler is not None:
                    self.scaler.scale(loss).backward()
                else:
                    loss.backward()
                share = len(chunk) / len(idx)
                for key, v in parts.items():
                    total[key] = total.get(key, 0.0) + v * share
        return parts if len(chunks) == 1 else total

    def _optimizer_step(self) -> None:
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.scaler.step(self.opt)
            self.scaler.update()
            return
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()

    def _train_step(self, idx: list[int], *, epoch: int, bar: Any) -> None:
        opt, options = self.opt, self.options
        for g in opt.param_groups:
            g["lr"] = lr_at(self.step, total=self.total, peak=self.spec.lr, warmup=self.warmup)
        parts = self._forward_backward(idx)
        self._optimizer_step()
        self.step += 1
        self.steps_here += 1
        self.seen += len(idx)
        rate = self.seen / max(time.monotonic() - self.t_start, 1e-9)
        bar.update(1)
        bar.set_postfix(loss=f"{parts['loss']:.3f}", ex_s=f"{rate:.0f}")
        if self.step % options.log_every == 0 or self.step == self.total:
            self.log.write({"event": "step", "step": self.step, "epoch": epoch,
                            "lr": opt.param_groups[0]["lr"], "ex_per_s": round(rate, 1),
                            **{k: round(v, 5) for k, v in parts.items()}})
        if self.step in self.evals:
            self._evaluate_and_keep()
            self._checkpoint()
        elif (time.monotonic() - self.last_ckpt >= options.checkpoint_every_s
              or (options.checkpoint_every_steps
                  and self.step % options.checkpoint_every_steps == 0)):
            self._checkpoint()
        if options.stop_after_steps is not None \
                and self.steps_here >= options.stop_after_steps and self.step < self.total:
            raise TrainingInterrupted(f"stopped after {self.steps_here} steps (test hook)")

    def _evaluate_and_keep(self) -> None:
        """Evaluate on the val rows; keep the weights when the target accuracy improved."""
        data = self.data
        ev = evaluate_val(self.model, data.val_enc, data.val_rows, labels_a=data.labels_a,
                          labels_b=data.labels_b, target=data.val_target,
                          teacher=data.teacher_val, weights=self.weights,
                          pad_id=data.tokenizer.pad_id,
                          batch_size=self.options.eval_batch_size, dev=self.dev)
        improved = self.best_info is None or ev.acc_target > self.best_info["val_acc_target"]
        if improved:
            self.best = state_to_cpu(self.model)
            self.best_info = {"step": self.step, "val_objective": ev.objective,
                              "val_acc_a": ev.acc_a, "val_acc_b": ev.acc_b,
                              "val_acc_target": ev.acc_target}
        self.log.write({"event": "eval", "step": self.step, "val_objective": ev.objective,
                        "val_acc_a": ev.acc_a, "val_acc_b": ev.acc_b,
                        "val_acc_target": ev.acc_target, "kept": improved})

    def _checkpoint(self) -> None:
        save_checkpoint(self.ckpt_path, model=self.model, opt=self.opt, best=self.best,
                        info={"fingerprint": self.fingerprint, "step": self.step,
                              "best": self.best_info, "log_lines": len(self.log.lines),
                              **({"scaler": self.scaler.state_dict()} if self.scaler else {})})
        self.last_ckpt = time.monotonic()

    def save(self) -> dict[str, Any]:
        """Write the kept weights; returns what the run's meta records of the training."""
        assert self.best is not None
        assert self.best_info is not None
        data = self.data
        self.model.load_state_dict(self.best)
        model_section = save_guard(self.model, data.tokenizer, self.run_dir, size=self.run.size,
                                   max_length=data.max_length, checkpoint=self.pretrained)
        self.log.write({"event": "done", "step": self.step, "kept_step": self.best_info["step"]})
        return {"model": model_section, "best": self.best_info, "steps": self.total,
                "n_rows": len(data.rows), "n_val_rows": len(data.val_rows),
                "resumed": self.resumed,
                "train_wall_s_this_process": round(time.monotonic() - self.t_start, 2),
                **self.dev.record(), "micro_batch": self.options.micro_batch,
                "compiled": self.options.compile,
                "label_counts": label_counts(data.rows)}


def train_full(spec: BranchSpec, run: PlannedRun, run_dir: Path, pool: Pool, runs_dir: Path,
               options: TrainOptions, fingerprint: str) -> dict[str, Any]:
    """Train one run of routes 1-2 into ``run_dir``; returns its meta's training record."""
    route = FullRoute(spec, run, run_dir, options=options, fingerprint=fingerprint)
    route.setup(pool, runs_dir)
    route.train()
    return route.save()
