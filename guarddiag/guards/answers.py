"""Reading one answer a guard function or service gave about one prompt.

An answer is

* a number: P(unsafe) in [0, 1] (its safe mass is GENERIC_SAFE, so strict and loose agree);
* a label string, read like a predictions file's ``label`` column (safe / unsafe / yes / no /
  controversial / the four class names);
* a mapping: ``{"p_unsafe": x}``, ``{"label": "unsafe"}``, ``{"score": x}`` (P(unsafe)),
  ``{"label": "unsafe", "score": x}`` (a Hugging Face pipeline: x is the label's probability),
  or class probabilities over the four class names summing to 1 (absent classes are 0);
* a list of ``{"label", "score"}`` mappings (a pipeline with ``top_k=None``).

Anything else (NaN, a value outside [0, 1], an unknown label or key) is a one-line
:class:`~guarddiag.errors.GuarddiagError` naming the guard and the prompt. Labels that read two
ways (``yes``/``no``, ``true``/``false``, ``1``/``0``: yes to "is it harmful?" or to "is it
safe?") are read as yes = unsafe, and the reader remembers them so the run's notes name them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.guards.base import ClassProbs, GuardVerdict, class_probs_from, one_hot
from guarddiag.guards.predfile import DEFAULT_LABELS
from guarddiag.labels import CLASSES, LOOSE

__all__ = ["PROB_TOL", "TWO_WAY_LABELS", "AnswerReader"]

PROB_TOL = 1e-4
"""How far probabilities that must sum to 1 may miss it."""
TWO_WAY_LABELS = frozenset({"yes", "no", "true", "false", "1", "0"})
"""Labels that answer a question, not name a class: read as yes = unsafe."""


class AnswerReader:
    """Reads the answers of the guard ``name`` into class probabilities."""

    def __init__(self, name: str, *, source: str = "callable") -> None:
        self.name = name
        self.source = source
        """The verdicts' ``p_source``."""
        self.two_way: set[str] = set()
        """The two-way labels read so far, as the guard wrote them."""

    def notes(self) -> tuple[str, ...]:
        """One note naming the two-way labels read, if any."""
        if not self.two_way:
            return ()
        shown = ", ".join(repr(v) for v in sorted(self.two_way))
        return (f"guard {self.name!r} answered {shown}: read as yes/true/1 = unsafe and "
                f"no/false/0 = safe (an answer to 'is this harmful?'); if it answers 'is this "
                f"safe?', return P(unsafe) or 'unsafe'/'safe' instead",)

    def fail(self, where: str, what: str) -> GuarddiagError:
        return GuarddiagError(f"guard {self.name!r}: {what} for {where}")

    def prob(self, value: Any, where: str, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, Real):
            raise self.fail(where, f"{field} {value!r} is not a number")
        p = float(value)
        if math.isnan(p) or not 0.0 <= p <= 1.0:
            raise self.fail(where, f"{field} {p} is outside [0, 1]")
        return p

    def label(self, value: Any, where: str) -> ClassProbs:
        key = str(value).strip().lower()
        cls = DEFAULT_LABELS.get(key)
        if cls is None:
            raise self.fail(where, f"unknown label {value!r} (expected one of "
                                   f"{', '.join(sorted(DEFAULT_LABELS))})")
        if key in TWO_WAY_LABELS:
            self.two_way.add(str(value).strip())
        return one_hot(cls)

    def _scored_label(self, answer: Mapping[str, Any], where: str) -> ClassProbs:
        """``{"label": l, "score": s}`` (a Hugging Face pipeline): s is the probability of l,
        the rest goes to the opposite side (safe ↔ HARMFUL)."""
        s = self.prob(answer["score"], where, "score")
        cls = CLASSES[[p > 0 for p in self.label(answer["label"], where)].index(True)]
        unsafe = s if cls in LOOSE.unsafe else 1.0 - s
        return (1.0 - unsafe, 0.0, unsafe, 0.0)

    def _label_scores(self, answer: Sequence[Any], where: str) -> ClassProbs:
        """A list of ``{"label", "score"}`` (a pipeline with ``top_k=None``): each label's score
        goes to its class."""
        mass: dict[str, float] = {}
        for item in answer:
            if not (isinstance(item, Mapping) and {"label", "score"} <= set(item)):
                raise self.fail(where, f"answer {answer!r} is a list, expected one number, "
                                       f"label or mapping (or a list of label/score mappings)")
            probs = self.label(item["label"], where)
            cls = CLASSES[probs.index(1.0)]
            mass[cls] = mass.get(cls, 0.0) + self.prob(item["score"], where, "score")
        if abs(sum(mass.values()) - 1.0) > PROB_TOL:
            raise self.fail(where, f"label scores sum to {sum(mass.values()):.6f}, expected 1")
        return class_probs_from(mass)

    def _mapping(self, answer: Mapping[str, Any], where: str) -> ClassProbs:
        if "p_unsafe" in answer:
            p = self.prob(answer["p_unsafe"], where, "p_unsafe")
            return (1.0 - p, 0.0, p, 0.0)
        if "label" in answer and "score" in answer:
            return self._scored_label(answer, where)
        if "score" in answer:
            p = self.prob(answer["score"], where, "score (read as P(unsafe))")
            return (1.0 - p, 0.0, p, 0.0)
        if "label" in answer:
            return self.label(answer["label"], where)
        unknown = sorted(str(k) for k in answer if k not in CLASSES)
        if unknown or not answer:
            raise self.fail(where, f"answer keys {unknown or '{}'} are not p_unsafe, label, "
                                   f"score or the class names {', '.join(CLASSES)}")
        vec = [self.prob(answer.get(c, 0.0), where, c) for c in CLASSES]
        if abs(sum(vec) - 1.0) > PROB_TOL:
            raise self.fail(where, f"class probabilities sum to {sum(vec):.6f}, expected 1")
        return (vec[0], vec[1], vec[2], vec[3])

    def probs(self, answer: Any, where: str) -> ClassProbs:
        if isinstance(answer, str):
            return self.label(answer, where)
        if isinstance(answer, (list, tuple)):
            return self._label_scores(answer, where)
        if isinstance(answer, Mapping):
            return self._mapping(answer, where)
        p = self.prob(answer, where, "P(unsafe)")
        return (1.0 - p, 0.0, p, 0.0)

    def verdict(self, answer: Any, where: str) -> GuardVerdict:
        """The verdict of one answer about the prompt ``where`` names."""
        probs = self.probs(answer.item() if hasattr(answer, "item") else answer, where)
        verdict = answer if isinstance(answer, str) else None
        return GuardVerdict(status="ok", class_probs=probs, verdict=verdict,
                            p_source=self.source,
                            raw=json.dumps(answer, sort_keys=True, default=str))
