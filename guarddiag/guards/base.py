"""The one interface every outside guard implements, and its per-prompt result."""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import yaml

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASSES, LOOSE, BinaryMapping

ClassProbs = tuple[float, float, float, float]
"""Probabilities of GENERIC_SAFE, BOUNDARY_SAFE, HARMFUL, COMPOUND (``labels.CLASSES`` order)."""


@dataclass(frozen=True)
class GuardVerdict:
    """One guard's reading of one prompt.

    A guard that answered but whose answer could not be parsed has ``status`` "failed" and no
    probabilities: it is counted and reported, never read as safe. A prompt that got no answer
    at all (the endpoint failed after every retry) has ``answered`` False and is asked again on
    the next run.
    """

    status: str
    """``ok`` or ``failed``."""
    class_probs: ClassProbs | None = None
    """Class probabilities. A guard without a boundary class puts its safe mass on
    GENERIC_SAFE, so its strict and loose read-outs agree."""
    verdict: str | None = None
    """The guard's own label, as it wrote it (``Unsafe``, ``Yes``, ``safe``, a class name…)."""
    categories: tuple[str, ...] = ()
    """Harm categories the guard named (Qwen3Guard categories, Llama Guard S-codes)."""
    p_source: str = ""
    """Where the probabilities come from: ``logprobs`` (token probabilities of the verdict),
    ``verdict`` (one-hot from the parsed verdict), ``classifier`` (softmax) or ``file``."""
    raw: str | None = None
    """The guard's raw output, kept for audit."""
    error: str | None = None
    """Why the verdict failed (unparseable answer, no answer)."""
    answered: bool = True
    """False when no answer came back (a transport failure, worth asking again)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Adapter-specific details kept in the raw outputs (e.g. the verdict distribution)."""
    cached: bool = False
    """The answer came from the adapter's own cache of earlier requests, not from the guard
    (counted as reused, not asked)."""

    @property
    def p_unsafe(self) -> float | None:
        """P(unsafe) under the loose mapping (the predictions table's ``p_unsafe``)."""
        return self.p_unsafe_under(LOOSE)

    def p_unsafe_under(self, mapping: BinaryMapping) -> float | None:
        if self.status != "ok" or self.class_probs is None:
            return None
        return float(sum(p for p, name in zip(self.class_probs, CLASSES, strict=True)
                         if name in mapping.unsafe))

    @property
    def pred_class(self) -> str | None:
        if self.status != "ok" or self.class_probs is None:
            return None
        probs = self.class_probs
        best = max(range(len(CLASSES)), key=lambda i: (probs[i], -i))
        return CLASSES[best]

    @classmethod
    def failed(cls, error: str, *, raw: str | None = None, answered: bool = True,
               extra: dict[str, Any] | None = None) -> GuardVerdict:
        return cls(status="failed", raw=raw, error=error, answered=answered,
                   extra=extra or {})


def one_hot(label: str) -> ClassProbs:
    vec = [0.0, 0.0, 0.0, 0.0]
    vec[CLASSES.index(label)] = 1.0
    return (vec[0], vec[1], vec[2], vec[3])


def class_probs_from(probs: Mapping[str, float]) -> ClassProbs:
    """A normalised class-probability tuple from ``{class name: mass}`` (missing classes 0)."""
    total = float(sum(probs.values()))
    if total <= 0:
        raise ValueError("no probability mass")
    vec = [float(probs.get(name, 0.0)) / total for name in CLASSES]
    return (vec[0], vec[1], vec[2], vec[3])


PROMPT = "prompt"
PROMPT_RESPONSE = "prompt+response"
INPUTS = (PROMPT, PROMPT_RESPONSE)
"""What a guard reads: the prompt alone, or the prompt with a model's response to it."""


def asked_text(prompt: str, response: str | None = None) -> str:
    """What a guard is asked about one row: the prompt, or the prompt and its response (a
    changed response, like a changed prompt, is asked again on a rerun)."""
    return prompt if response is None else f"{prompt}\n\x1e\n{response}"


def text_digest(text: str) -> str:
    """The digest an answer keeps of the text it answered (:func:`asked_text`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_input(value: str, *, guard: str) -> str:
    """``value`` when it is one of :data:`INPUTS`; a one-line error naming ``guard`` otherwise."""
    if value not in INPUTS:
        raise GuarddiagError(f"guard {guard!r}: input {value!r} is not one of "
                             f"{', '.join(INPUTS)}")
    return value


class GuardAdapter(ABC):
    """An outside guard: prompts in, one :class:`GuardVerdict` per prompt out."""

    kind: str = ""
    """The adapter's registry name (``qwen3guard``, ``file`` …)."""
    name: str = ""
    """The guard's name: the predictions run id is ``guard/<name>``."""
    input: str = PROMPT
    """``prompt``, or ``prompt+response``: a response-level guard, whose
    :meth:`score_prompts` frames carry a ``response`` column (benchmarks with responses only,
    :mod:`guarddiag.guards.responses`)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Everything that determines this guard's answers (model, options); saved in the
        run's metadata, and a change of it stops a resume from mixing two guards' answers."""

    @abstractmethod
    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        """One verdict per prompt text, in order."""

    def prepare(self, frames: dict[str, pl.DataFrame], *,
                known: Collection[str] | None = None) -> dict[str, pl.DataFrame]:
        """Check the benchmark prompts before scoring and return the ones to score.

        ``known`` lists every benchmark id that exists (selected or not).
        """
        return frames

    def score_prompts(self, frame: pl.DataFrame) -> list[GuardVerdict]:
        """Score the rows of a benchmark frame (``benchmark``, ``prompt_id``, ``text``)."""
        return self.score(frame["text"].to_list())

    @property
    def chunk_size(self) -> int:
        """Prompts per call of :meth:`score_prompts` while scoring; answers are stored after
        each call, so this bounds the work a kill can lose."""
        return 256

    @property
    def definition(self) -> str:
        """What "unsafe" means for this guard, in one sentence (its operational definition),
        shown beside Table 2; empty when the adapter cannot say."""
        return ""

    @property
    def answers_any_text(self) -> bool:
        """The guard computes an answer for any text (a model, a function, a service), so
        guarddiag can ask it about canaries and sanity prompts; False for answers looked up in
        a file."""
        return True

    def notes(self) -> tuple[str, ...]:
        """What the run's notes should say about how the guard's answers were read (e.g.
        labels that read two ways); none by default."""
        return ()

    def use_cache(  # noqa: B027 - optional hook
            self, *, scope: str, read: bool, forget: bool = False) -> None:
        """How a cache of the adapter's own requests (an endpoint's response cache) is used:
        entries are keyed by ``scope`` (the guard's identity digest, with its version) beside
        the request, and read only when ``read`` (a rescore and a canary check ask afresh);
        ``forget`` drops the scope's entries (the canaries showed they are another model's)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release models, threads."""


def parse_options(items: Sequence[str] | None) -> dict[str, Any]:
    """``["threshold=0.7", "model_id=x"]`` → ``{"threshold": 0.7, "model_id": "x"}`` (values
    read as YAML scalars): a guard's ``--option`` values."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GuarddiagError(f"--option {item!r}: expected key=value")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        out[key] = value if isinstance(value, (str, int, float, bool)) or value is None else text
    return out


_NAME_OK = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")


def slug(text: str) -> str:
    """A guard name from a model id or file name.

    ``Qwen/Qwen3Guard-Gen-4B`` → ``qwen3guard-gen-4b``.
    """
    base = text.rstrip("/").replace("\\", "/").split("/")[-1]
    out = re.sub(r"[^a-z0-9._+-]+", "-", base.lower()).strip("-.")
    return out or "guard"


def check_guard_name(name: str) -> str:
    if not _NAME_OK.match(name or ""):
        raise GuarddiagError(
            f"guard name {name!r}: use lower-case letters, digits and . _ + - "
            f"(it becomes the file name outside/<name>.parquet and the run id guard/<name>)"
        )
    return name
