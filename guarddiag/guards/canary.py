"""Canaries: a few saved answers asked again before any saved answer is reused.

A guard's identity (:func:`guarddiag.guards.scoring.identity`) is what guarddiag can see of it:
a function's source, a model folder's files, the options. A model object a function closes
over, or the model behind an endpoint's name, is invisible to it; retrained or swapped, it would
silently lend the old answers to the new guard. So each answer set keeps a canary sample: up to
:data:`CANARY_SIZE` prompts with their answers, in ``<run>.canaries.json`` beside the raw log.
Every scoring run that would reuse saved answers first asks the guard about the canaries again,
with every cache of the adapter bypassed; one answer that differs by more than the tolerance
(:data:`CANARY_TOLERANCE` on any class probability, or another status) means the guard changed
behind the same identity, and no saved answer is reused.

The sample is the answered prompts with the smallest digest of (benchmark, prompt id): spread
over the benchmarks, the same from run to run, and replaced only where its benchmark is scored
again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.guards.base import GuardAdapter, GuardVerdict, asked_text, text_digest
from guarddiag.guards.responses import RESPONSE

__all__ = ["CANARY_SIZE", "CANARY_TOLERANCE", "Canary", "CanaryCheck", "canaries_from",
           "check_canaries", "pick_canaries", "read_canaries", "write_canaries"]

CANARY_SIZE = 32
"""Saved answers asked again before a reuse (fewer when fewer were answered)."""
CANARY_TOLERANCE = 1e-4
"""The largest difference in any class probability (hence in P(unsafe)) that still counts as
the same answer: float noise of a batch on another device, not another model."""


@dataclass(frozen=True)
class Canary:
    """One saved prompt and the guard's answer to it."""

    benchmark: str
    prompt_id: str
    text: str
    response: str | None
    """The response the guard read with the prompt (a prompt + response guard), else None."""
    status: str
    class_probs: tuple[float, float, float, float] | None


@dataclass(frozen=True)
class CanaryCheck:
    """What asking the canaries again showed."""

    n: int
    """Canaries asked."""
    n_answered: int
    """Canaries that got an answer (a request can fail; those are not compared)."""
    differ: tuple[str, ...]
    """``benchmark/prompt_id: old → new`` for every canary whose answer changed."""
    largest: float
    """The largest difference in a class probability among the compared answers."""

    @property
    def same(self) -> bool:
        return not self.differ


def _rank(benchmark: str, prompt_id: str) -> str:
    return hashlib.sha256(f"{benchmark}\x1f{prompt_id}".encode()).hexdigest()


def pick_canaries(candidates: Sequence[Canary], *, size: int = CANARY_SIZE) -> list[Canary]:
    """The ``size`` candidates of smallest rank (one per prompt)."""
    unique = {(c.benchmark, c.prompt_id): c for c in candidates}
    return [unique[k] for k in sorted(unique, key=lambda k: _rank(*k))[:size]]


def canaries_from(done: Mapping[tuple[str, str], Mapping[str, Any]],
                  frames: Mapping[str, pl.DataFrame], *, pairs: bool) -> list[Canary]:
    """Candidates among the answers ``done`` holds for the prompts of ``frames``: answered,
    read (status ok) and asked about the text the frame holds now."""
    out = []
    for bench, frame in frames.items():
        responses = frame[RESPONSE].to_list() if pairs else [None] * frame.height
        for pid, text, response in zip(frame["prompt_id"].to_list(), frame["text"].to_list(),
                                       responses, strict=True):
            rec = done.get((bench, pid))
            if rec is None or rec.get("status") != "ok" or not rec.get("answered", True) \
                    or rec.get("class_probs") is None:
                continue
            if rec.get("text_sha256") != text_digest(asked_text(text, response)):
                continue
            out.append(Canary(bench, pid, text, response, "ok", _probs(rec["class_probs"])))
    return out


def _probs(values: Any) -> tuple[float, float, float, float] | None:
    if values is None:
        return None
    a, b, c, d = (float(v) for v in values)
    return (a, b, c, d)


def read_canaries(path: Path, fingerprint: str) -> list[Canary]:
    """The canaries saved for ``fingerprint`` (none for another identity or a bad file)."""
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("fingerprint") != fingerprint:
            return []
        return [Canary(benchmark=str(c["benchmark"]), prompt_id=str(c["prompt_id"]),
                       text=str(c["text"]), response=c.get("response"), status=str(c["status"]),
                       class_probs=_probs(c.get("class_probs")))
                for c in doc["canaries"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []  # unreadable: the answers get a fresh sample, taken from themselves


def write_canaries(path: Path, fingerprint: str, canaries: Sequence[Canary], *,
                   tolerance: float) -> None:
    files.write_json({"fingerprint": fingerprint, "tolerance": tolerance,
                      "canaries": [asdict(c) for c in canaries]}, path)


def _difference(old: Canary, new: GuardVerdict) -> float | None:
    """The largest class-probability difference; None when the status changed."""
    if new.status != old.status:
        return None
    if old.class_probs is None or new.class_probs is None:
        return 0.0 if old.class_probs == new.class_probs else None
    return max(abs(a - b) for a, b in zip(old.class_probs, new.class_probs, strict=True))


def _shown(probs: tuple[float, ...] | None, status: str) -> str:
    if probs is None:
        return status
    return f"P(unsafe) {probs[2] + probs[3]:.4f}"


def check_canaries(adapter: GuardAdapter, canaries: Sequence[Canary], *,
                   tolerance: float = CANARY_TOLERANCE) -> CanaryCheck:
    """Ask ``adapter`` about ``canaries`` again (its caches must be bypassed by the caller) and
    compare the answers with the saved ones."""
    frame = pl.DataFrame({"benchmark": [c.benchmark for c in canaries],
                          "prompt_id": [c.prompt_id for c in canaries],
                          "text": [c.text for c in canaries]})
    if any(c.response is not None for c in canaries):
        frame = frame.with_columns(pl.Series(RESPONSE, [c.response or "" for c in canaries]))
    verdicts = adapter.score_prompts(frame) if canaries else []
    differ, largest, answered = [], 0.0, 0
    for old, new in zip(canaries, verdicts, strict=True):
        if not new.answered:
            continue
        answered += 1
        delta = _difference(old, new)
        if delta is not None and delta <= tolerance:
            largest = max(largest, delta)
            continue
        largest = max(largest, delta if delta is not None else 1.0)
        differ.append(f"{old.benchmark}/{old.prompt_id}: {_shown(old.class_probs, old.status)}"
                      f" → {_shown(new.class_probs, new.status)}")
    return CanaryCheck(n=len(canaries), n_answered=answered, differ=tuple(differ),
                       largest=largest)
