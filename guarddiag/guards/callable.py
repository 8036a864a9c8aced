"""A guard that is a plain Python function: ``list[str] -> list[float | dict | str]``.

The quickest way in for a team with its own guard (GuardBench's ``moderate=fn``): pass the
function to :func:`guarddiag.score_guard`, or name it on the command line with
``guarddiag guards score --adapter callable --target package.module:function``.

The function gets a list of prompt texts and returns one answer per text, in order. An answer is

* a number: P(unsafe) in [0, 1] (its safe mass is GENERIC_SAFE, so strict and loose agree);
* a label string, read like a predictions file's ``label`` column (safe / unsafe / yes / no /
  controversial / the four class names);
* a mapping: ``{"p_unsafe": x}``, ``{"label": "unsafe"}``, or class probabilities over the four
  class names summing to 1 (``{"HARMFUL": 0.7, "GENERIC_SAFE": 0.3}``; absent classes are 0).

Anything else (a wrong length, NaN, a value outside [0, 1], an unknown label, an exception) stops
the run with one line naming the guard and the first prompt it concerns; nothing is read as safe.

A response-level guard (``input="prompt+response"``, on the command line ``--input
prompt+response``) is a function ``fn(prompts, responses)``: it gets the prompts and, in the same
order, a model's response to each, and answers whether the exchange is unsafe. It runs on
benchmarks that carry responses (a manifest ``response_field``: WildGuardTest); any other is a
one-line error naming the benchmark.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.guards.base import (
    PROMPT_RESPONSE,
    ClassProbs,
    GuardAdapter,
    GuardVerdict,
    check_input,
    one_hot,
    slug,
)
from guarddiag.guards.predfile import DEFAULT_LABELS
from guarddiag.guards.responses import RESPONSE
from guarddiag.labels import CLASSES

GuardFunction = Callable[[list[str]], Sequence[Any]]
"""What a callable guard is: prompt texts in, one answer per text out."""
PairGuardFunction = Callable[[list[str], list[str]], Sequence[Any]]
"""A response-level callable guard: prompts and their responses in, one answer per pair out."""

_PROB_TOL = 1e-4


def load_target(target: str) -> GuardFunction:
    """The function named by ``package.module:function`` (dots after the colon walk attributes)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise GuarddiagError(f"--target {target!r}: expected package.module:function")
    # Like `python -m`, look in the current directory first: a team's guard module usually
    # sits beside the data, not in site-packages.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import failure becomes one line
        raise GuarddiagError(f"--target {target!r}: cannot import {module_name!r} "
                             f"({type(exc).__name__}: {exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise GuarddiagError(f"--target {target!r}: {module_name!r} has no attribute "
                                 f"{attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise GuarddiagError(f"--target {target!r}: {attr!r} is not callable")
    return obj


def _function_name(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__name__", "") or type(fn).__name__
    return "callable" if name == "<lambda>" else slug(name)


def _fingerprint(fn: Callable[..., Any]) -> str:
    """Where the function lives and a digest of its source (so an edited function is noticed)."""
    where = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return where
    return f"{where}#{hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]}"


def _check_arity(fn: Callable[..., Any], *, guard: str, pairs: bool) -> None:
    """A prompt guard takes one list, a prompt + response guard two; say so before scoring."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    takes_more = any(p.kind is p.VAR_POSITIONAL for p in params)
    if pairs and len(positional) < 2 and not takes_more:
        raise GuarddiagError(f"guard {guard!r} scores prompt + response, so its function takes "
                             f"two lists (prompts, responses); it takes {len(positional)}")
    if not pairs and len(required) >= 2:
        raise GuarddiagError(f"guard {guard!r}: its function needs {len(required)} arguments; "
                             f"a function fn(prompts, responses) scores prompt + response "
                             f"(input='prompt+response', --input prompt+response)")


class CallableGuardAdapter(GuardAdapter):
    """Answers computed by a Python function over batches of prompt texts."""

    kind = "callable"

    def __init__(self, *, function: GuardFunction | PairGuardFunction | None = None,
                 target: str | None = None, name: str | None = None, batch_size: int = 64,
                 definition: str | None = None, input: str = "prompt") -> None:
        if (function is None) == (target is None):
            raise GuarddiagError("guard 'callable' needs exactly one of a function or "
                                 "--target package.module:function")
        if batch_size < 1:
            raise GuarddiagError(f"guard 'callable': batch size must be ≥ 1, got {batch_size}")
        self.target = target
        self.function: Callable[..., Sequence[Any]] = (
            function if function is not None else load_target(target or ""))
        default = (target or "").rpartition(":")[2].rpartition(".")[2]
        self.name = name or (slug(default) if default else _function_name(self.function))
        self.input = check_input(input, guard=self.name)
        _check_arity(self.function, guard=self.name, pairs=self.input == PROMPT_RESPONSE)
        self.batch_size = batch_size
        self._definition = definition or ""

    @property
    def definition(self) -> str:
        return self._definition

    @property
    def chunk_size(self) -> int:
        return self.batch_size

    def describe(self) -> dict[str, Any]:
        # The function itself (module, qualified name, source digest), not how it was named:
        # a --target and the same function passed in Python give the same answers.
        out = {"adapter": self.kind, "function": _fingerprint(self.function)}
        if self.input == PROMPT_RESPONSE:
            out["input"] = self.input
        return out

    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        if self.input == PROMPT_RESPONSE:
            raise GuarddiagError(f"guard {self.name!r} scores prompt + response: give it "
                                 f"benchmark frames with a response column")
        labels = [f"prompt {i + 1} ({t[:60]!r})" for i, t in enumerate(texts)]
        return self._score(list(texts), labels)

    def score_prompts(self, frame: pl.DataFrame) -> list[GuardVerdict]:
        labels = [f"{b}/{p}" for b, p in zip(frame["benchmark"], frame["prompt_id"], strict=True)]
        responses = (frame[RESPONSE].to_list() if self.input == PROMPT_RESPONSE else None)
        return self._score(frame["text"].to_list(), labels, responses)

    def _score(self, texts: list[str], labels: list[str],
               responses: list[str] | None = None) -> list[GuardVerdict]:
        if not texts:
            return []
        args = (list(texts),) if responses is None else (list(texts), list(responses))
        try:
            answers = self.function(*args)
        except Exception as exc:  # the user's function: one line
            raise GuarddiagError(f"guard {self.name!r} raised {type(exc).__name__}: {exc} on a "
                                 f"batch of {len(texts)} starting at {labels[0]}") from None
        if isinstance(answers, (str, bytes, Mapping)) or not isinstance(answers, Sequence):
            try:
                answers = list(answers)  # numpy arrays, tensors, generators
            except TypeError:
                raise GuarddiagError(f"guard {self.name!r} returned {type(answers).__name__}, "
                                     f"expected one answer per prompt (batch starting at "
                                     f"{labels[0]})") from None
        if len(answers) != len(texts):
            raise GuarddiagError(f"guard {self.name!r} returned {len(answers)} answer(s) for "
                                 f"{len(texts)} prompts (batch starting at {labels[0]})")
        return [self._verdict(a, where) for a, where in zip(answers, labels, strict=True)]

    def _fail(self, where: str, what: str) -> GuarddiagError:
        return GuarddiagError(f"guard {self.name!r}: {what} for {where}")

    def _prob(self, value: Any, where: str, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, Real):
            raise self._fail(where, f"{field} {value!r} is not a number")
        p = float(value)
        if math.isnan(p) or not 0.0 <= p <= 1.0:
            raise self._fail(where, f"{field} {p} is outside [0, 1]")
        return p

    def _label(self, value: Any, where: str) -> ClassProbs:
        cls = DEFAULT_LABELS.get(str(value).strip().lower())
        if cls is None:
            raise self._fail(where, f"unknown label {value!r} (expected one of "
                                    f"{', '.join(sorted(DEFAULT_LABELS))})")
        return one_hot(cls)

    def _probs(self, answer: Any, where: str) -> ClassProbs:
        if isinstance(answer, str):
            return self._label(answer, where)
        if isinstance(answer, Mapping):
            if "p_unsafe" in answer:
                p = self._prob(answer["p_unsafe"], where, "p_unsafe")
                return (1.0 - p, 0.0, p, 0.0)
            if "label" in answer:
                return self._label(answer["label"], where)
            unknown = sorted(str(k) for k in answer if k not in CLASSES)
            if unknown or not answer:
                raise self._fail(where, f"answer keys {unknown or '{}'} are not p_unsafe, label "
                                        f"or the class names {', '.join(CLASSES)}")
            vec = [self._prob(answer.get(c, 0.0), where, c) for c in CLASSES]
            if abs(sum(vec) - 1.0) > _PROB_TOL:
                raise self._fail(where, f"class probabilities sum to {sum(vec):.6f}, expected 1")
            return (vec[0], vec[1], vec[2], vec[3])
        p = self._prob(answer, where, "P(unsafe)")
        return (1.0 - p, 0.0, p, 0.0)

    def _verdict(self, answer: Any, where: str) -> GuardVerdict:
        probs = self._probs(answer.item() if hasattr(answer, "item") else answer, where)
        verdict = answer if isinstance(answer, str) else None
        return GuardVerdict(status="ok", class_probs=probs, verdict=verdict, p_source="callable",
                            raw=json.dumps(answer, sort_keys=True, default=str))
