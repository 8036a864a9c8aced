"""A guard that is a plain Python function: ``list[str] -> list[float | dict | str]``.

The quickest way in for a team with its own guard (GuardBench's ``moderate=fn``): pass the
function to :func:`guarddiag.score_guard`, or name it on the command line with
``guarddiag guards score --adapter callable --target package.module:function``.

The function gets a list of prompt texts and returns one answer per text, in order: a number
(P(unsafe)), a label, a mapping or a list of label/score mappings, read by
:class:`~guarddiag.guards.answers.AnswerReader` (``yes``/``no`` is read as yes = unsafe, and the
run's notes say so).

The whole batch may also come back as a numpy array or torch tensor of n values (or n×1), or as
an n×2 array or list of ``[P(safe), P(unsafe)]`` rows (scikit-learn's ``predict_proba``); other
shapes are a one-line error naming the guard, the batch and the shape.

The answers are saved and reused under the guard's identity: the function's module and name, a
digest of its source and of the plain values (numbers, strings) it reads from module globals or
its closure, and the ``version`` given to ``score_guard``. A model object the function uses is
not hashed: pass a new ``version`` (or ``rescore=True``) when it changes.

Anything else (a wrong length, NaN, a value outside [0, 1], an unknown label, an exception) stops
the run with one line naming the guard and the first prompt it concerns; nothing is read as safe.
A function that calls a service itself may fail now and then: ``retries`` asks a failed batch
again with the HTTP guards' retry policy (:func:`~guarddiag.guards.transport.call_with_retries`:
exponential backoff with jitter) before the run stops.

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
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.guards.answers import PROB_TOL, AnswerReader
from guarddiag.guards.base import (
    PROMPT_RESPONSE,
    GuardAdapter,
    GuardVerdict,
    check_input,
    slug,
)
from guarddiag.guards.responses import RESPONSE
from guarddiag.guards.transport import call_with_retries

logger = logging.getLogger(__name__)

GuardFunction = Callable[[list[str]], Sequence[Any]]
"""What a callable guard is: prompt texts in, one answer per text out."""
PairGuardFunction = Callable[[list[str], list[str]], Sequence[Any]]
"""A response-level callable guard: prompts and their responses in, one answer per pair out."""


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


_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)


def _constant(value: Any) -> bool:
    if isinstance(value, (tuple, frozenset)):
        return all(_constant(v) for v in value)
    return isinstance(value, _CONSTANT_TYPES)


def _read_values(fn: Callable[..., Any]) -> dict[str, str]:
    """The plain values (numbers, strings, tuples of them) the function reads from its module's
    globals and its closure: a threshold set from the command line changes the answers without
    changing the source. Models and other objects are not hashed (pass ``version=``)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    names: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    out: dict[str, str] = {}
    module_globals = getattr(fn, "__globals__", {})
    for n in sorted(names):
        if n in module_globals and _constant(module_globals[n]):
            out[n] = repr(module_globals[n])
    for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if _constant(value):
            out[n] = repr(value)
    return out


def _fingerprint(fn: Callable[..., Any]) -> str:
    """Where the function lives, a digest of its source and of the plain values it reads (so an
    edited function or a changed module constant is noticed)."""
    where = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = ""
    values = _read_values(fn)
    if not source and not values:
        return where
    # Without values the digest is the source's alone, as before values were read: saved
    # answers of an unchanged function stay valid.
    doc = source + ("\0" + json.dumps(values, sort_keys=True) if values else "")
    return f"{where}#{hashlib.sha256(doc.encode('utf-8')).hexdigest()[:16]}"


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
                 definition: str | None = None, input: str = "prompt", retries: int = 0,
                 backoff_s: float = 1.0) -> None:
        """``retries``: ask a batch whose call raised again, up to this many times, after
        exponential backoff of ``backoff_s`` (off by default: a bug fails at once)."""
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
        if retries < 0:
            raise GuarddiagError(f"guard {self.name!r}: retries must be ≥ 0, got {retries}")
        self.retries, self.backoff_s = int(retries), float(backoff_s)
        self._definition = definition or ""
        self.reader = AnswerReader(self.name)

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
            answers = call_with_retries(lambda: self.function(*args), retries=self.retries,
                                        backoff_s=self.backoff_s, on_retry=self._retrying)
        except Exception as exc:  # the user's function: one line
            tries = f" (after {self.retries + 1} tries)" if self.retries else ""
            raise GuarddiagError(f"guard {self.name!r} raised {type(exc).__name__}: {exc} on a "
                                 f"batch of {len(texts)} starting at {labels[0]}{tries}"
                                 ) from None
        answers = self._rows(answers, len(texts), labels[0])
        if len(answers) != len(texts):
            raise GuarddiagError(f"guard {self.name!r} returned {len(answers)} answer(s) for "
                                 f"{len(texts)} prompts (batch starting at {labels[0]})")
        return [self.reader.verdict(a, where) for a, where in zip(answers, labels, strict=True)]

    def _retrying(self, exc: Exception, attempt: int) -> None:
        logger.warning(f"guard {self.name!r} raised {type(exc).__name__}: {exc}; asking the batch "
                       f"again ({attempt} of {self.retries})")

    def _shape_error(self, shape: tuple[int, ...], n: int, first: str) -> GuarddiagError:
        return GuarddiagError(
            f"guard {self.name!r} returned an array of shape {shape} for a batch of {n} "
            f"prompts starting at {first}; expected {n} values of P(unsafe), or an {n}×2 array "
            f"of [P(safe), P(unsafe)] rows (predict_proba)")

    def _rows(self, answers: Any, n: int, first: str) -> list[Any]:
        """One answer per prompt from what the function returned: a sequence, a numpy array or
        torch tensor of n values (or n×1), or an n×2 array / list of [P(safe), P(unsafe)]
        pairs (predict_proba). Any other shape: one line naming guard, batch and shape."""
        if hasattr(answers, "detach") and hasattr(answers, "cpu"):  # a torch tensor
            answers = answers.detach().cpu().numpy()
        shape = getattr(answers, "shape", None)
        if isinstance(shape, tuple) and hasattr(answers, "tolist"):
            rows = answers.tolist()
            if len(shape) == 1 and shape[0] == n:
                return list(rows)
            if len(shape) == 2 and shape[0] == n and shape[1] in (1, 2):
                return [r[0] if shape[1] == 1 else self._pair(r, first) for r in rows]
            raise self._shape_error(tuple(int(d) for d in shape), n, first)
        if isinstance(answers, (str, bytes, Mapping)) or not isinstance(answers, Sequence):
            try:
                answers = list(answers)  # generators, other iterables
            except TypeError:
                raise GuarddiagError(f"guard {self.name!r} returned {type(answers).__name__}, "
                                     f"expected one answer per prompt (batch starting at "
                                     f"{first})") from None
        # Rows that are arrays themselves (list(predict_proba(...))) read as lists.
        answers = [a.tolist() if getattr(a, "ndim", 0) >= 1 and hasattr(a, "tolist") else a
                   for a in answers]
        pairs = [a for a in answers if isinstance(a, (list, tuple))
                 and all(isinstance(x, Real) and not isinstance(x, bool) for x in a)]
        if answers and len(pairs) == len(answers):
            widths = sorted({len(a) for a in pairs})
            if widths != [2] or len(answers) != n:
                shape = (len(answers), widths[0]) if len(widths) == 1 else (len(answers), -1)
                raise self._shape_error(shape, n, first)
            return [self._pair(a, first) for a in answers]
        return list(answers)

    def _pair(self, row: Sequence[Any], first: str) -> dict[str, float]:
        p_safe, p_unsafe = (float(x) for x in row)
        if abs(p_safe + p_unsafe - 1.0) > PROB_TOL:
            raise GuarddiagError(
                f"guard {self.name!r}: a row [{p_safe:g}, {p_unsafe:g}] of the batch starting at "
                f"{first} sums to {p_safe + p_unsafe:g}; two columns are read as [P(safe), "
                f"P(unsafe)] and must sum to 1")
        return {"p_unsafe": p_unsafe}

    def notes(self) -> tuple[str, ...]:
        return self.reader.notes()
