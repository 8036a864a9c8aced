"""`any-guardrail <https://pypi.org/project/any-guardrail/>`_ as an outside guard.

any-guardrail (Mozilla AI) puts about forty guardrails behind one call: encoder classifiers
(HarmAug-Guard, DuoGuard, deepset, PIGuard …), generative guards (Llama Guard, ShieldGemma,
Qwen3Guard …) and hosted APIs (OpenAI moderation, Azure, Bedrock …). Each returns a
``GuardrailOutput`` with ``valid`` (True when the text passed) and, where the guardrail has one,
``score`` (a risk score in [0, 1], higher = more likely violating). Install it with
``pip install -e ".[anyguardrail]"`` (Python ≥ 3.11)::

    guarddiag guards score --adapter any-guardrail --target harm_guard
    guarddiag guards score --adapter any-guardrail --target harm_guard --option threshold=0.7 \\
        --input prompt+response --benchmarks wildguardtest_harmful,wildguardtest_benign

``--target`` is the any-guardrail name (``harm_guard``, ``duo_guard``, ``deepset`` …;
``python -c "import any_guardrail as a; print(list(a.GuardrailName))"`` lists them).
``--option key=value`` (repeatable) sets a parameter: one of the guardrail's ``create``
parameters (``model_id``, ``threshold``, ``api_key`` …) or of its ``validate`` call
(``policy`` …), as ``AnyGuardrail.get_parameter_schema`` lists them; values are read as YAML
scalars (``0.7`` is a number, ``true`` a boolean).

Operational definition (what "unsafe" means here): **P(unsafe) is the guardrail's score when it
reports one, else 1 when it calls the text invalid and 0 when valid; unsafe = P(unsafe) ≥ 0.5**.
What it flags is what that guardrail was built for (harm, toxicity, prompt injection …): its
any-guardrail description is quoted in the definition beside Table 2. A guardrail's own
``threshold`` moves only its ``valid`` flag (kept in the raw outputs), not a score.

With ``input="prompt+response"`` the guardrail reads each prompt together with a model's
response (its ``output_text`` or equivalent, mapped by ``AnyGuardrail.evaluate``), on
benchmarks whose manifests carry responses (WildGuardTest). A guardrail with no response slot
is a one-line error before anything is scored.

Most guardrails fetch their model from the Hugging Face Hub (or call a remote API) when they are
built; without network access, and with no copy in the local Hugging Face cache, loading fails
with one line saying so. In Python, an already-built guardrail object (anything with the
``validate`` of its any-guardrail class) can be passed as ``guardrail=`` instead.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from numbers import Real
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.guards.base import (
    PROMPT_RESPONSE,
    GuardAdapter,
    GuardVerdict,
    check_input,
)
from guarddiag.guards.responses import RESPONSE

INSTALL_HINT = 'pip install -e ".[anyguardrail]" (Python ≥ 3.11)'
_SECRET_WORDS = ("key", "token", "secret", "password", "credential")


def available() -> bool:
    """Whether any-guardrail is installed."""
    return importlib.util.find_spec("any_guardrail") is not None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {(text[0] if text else '')[:200]}"


def _probability(score: Any) -> tuple[float | None, str | None]:
    """A score as P(unsafe), or why it cannot be one."""
    if isinstance(score, bool) or not isinstance(score, Real):
        return None, f"score {score!r} is not a number"
    p = float(score)
    if math.isnan(p) or not 0.0 <= p <= 1.0:
        return None, f"score {p} is outside [0, 1]"
    return p, None


def verdict_from_output(output: Any) -> GuardVerdict:
    """One ``GuardrailOutput`` read as a verdict: P(unsafe) = ``score`` when present, else
    ``not valid``; a failed verdict (never safe) when neither can be read."""
    valid = getattr(output, "valid", None)
    score = getattr(output, "score", None)
    categories = tuple(str(getattr(c, "name", c)) for c in getattr(output, "categories", None)
                       or () if getattr(c, "triggered", False))
    explanation = getattr(output, "explanation", None)
    raw = explanation if isinstance(explanation, str) else None
    extra = {"valid": valid, "score": score, "action": getattr(output, "action", None)}
    if score is not None:
        p, problem = _probability(score)
        source = "score"
    elif isinstance(valid, bool):
        p, problem, source = (0.0 if valid else 1.0), None, "verdict"
    else:
        p, problem, source = None, "no score and no valid/invalid verdict", ""
    if p is None:
        return GuardVerdict.failed(problem or "unreadable output", raw=raw, extra=extra)
    label = None if not isinstance(valid, bool) else "valid" if valid else "invalid"
    return GuardVerdict(status="ok", class_probs=(1.0 - p, 0.0, p, 0.0), verdict=label,
                        categories=categories, p_source=source, raw=raw, extra=extra)


class AnyGuardrailAdapter(GuardAdapter):
    """One any-guardrail guardrail, asked prompt by prompt (or prompt + response)."""

    kind = "any-guardrail"

    def __init__(self, *, target: str, guardrail: Any = None,
                 options: Mapping[str, Any] | None = None, name: str | None = None,
                 input: str = "prompt", batch_size: int = 32,
                 definition: str | None = None) -> None:
        if not available():
            raise GuarddiagError(f"any-guardrail is not installed: {INSTALL_HINT}")
        from any_guardrail import AnyGuardrail, GuardrailName

        names = [str(n.value) for n in AnyGuardrail.get_supported_guardrails()]
        wanted = (target or "").strip().lower().replace("-", "_")
        if wanted not in names:
            raise unknown_name("any-guardrail guardrail", target, names)
        if batch_size < 1:
            raise GuarddiagError(f"guard {target!r}: batch size must be ≥ 1, got {batch_size}")
        self._gname = GuardrailName(wanted)
        self.target = wanted
        self.name = name or wanted.replace("_", "-")
        self.input = check_input(input, guard=self.name)
        self.batch_size = batch_size
        self.options = dict(options or {})
        self._create, self._validate = self._split_options(AnyGuardrail)
        self._metadata = AnyGuardrail.metadata(self._gname)
        self._definition = definition or self._default_definition()
        self._injected = guardrail is not None
        self.guardrail = guardrail if guardrail is not None else self._build(AnyGuardrail)
        self._check_call()

    def _split_options(self, factory: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Options for ``AnyGuardrail.create`` and for each ``validate`` call, by the
        guardrail's parameter schema."""
        stages: dict[str, set[str]] = {}
        for spec in factory.get_parameter_schema(self._gname):
            stages.setdefault(spec.name, set()).add(str(getattr(spec.stage, "value", spec.stage)))
        create: dict[str, Any] = {}
        validate: dict[str, Any] = {}
        for key, value in self.options.items():
            if key not in stages or key in ("output_text", "output", "comparison_text"):
                takes = ", ".join(k for k in stages if k not in ("output_text", "output")) \
                    or "none"
                raise GuarddiagError(f"guard {self.name!r}: any-guardrail {self.target} has no "
                                     f"option {key!r} (it takes: {takes})")
            (create if "create" in stages[key] else validate)[key] = value
        return create, validate

    def _build(self, factory: Any) -> Any:
        try:
            return factory.create(self._gname, **self._create)
        except ImportError as exc:
            raise GuarddiagError(
                f"any-guardrail {self.target}: a package it needs is missing "
                f"({_first_line(exc)}); install the extra its backend needs, e.g. "
                f"pip install \"any-guardrail[huggingface]\"") from None
        except Exception as exc:  # the model download or API client: one line
            hosted = self._metadata.requires_api_key or \
                "api" in str(self._metadata.backend).lower()
            where = ("a remote API (and its key), unreachable without network access" if hosted
                     else "its model from the Hugging Face Hub, unreachable without network "
                          "access unless the model is already in the local Hugging Face cache "
                          "(HF_HUB_OFFLINE=1 fails at once instead of retrying)")
            raise GuarddiagError(f"any-guardrail {self.target}: cannot load the guardrail "
                                 f"({_first_line(exc)}); it needs {where}") from None

    def _check_call(self) -> None:
        """The call shape, checked once before scoring (a guardrail without a response slot,
        a required validate option missing)."""
        from any_guardrail.evaluate import EvaluateArgumentError, build_validate_call

        response = "response" if self.input == PROMPT_RESPONSE else None
        try:
            build_validate_call(self._gname, self.guardrail, "prompt", response,
                                dict(self._validate))
        except EvaluateArgumentError as exc:
            what = ("it has no response slot, so it cannot score prompt + response"
                    if response is not None and "no response" in str(exc) else str(exc))
            raise GuarddiagError(f"guard {self.name!r} (any-guardrail {self.target}): "
                                 f"{what}") from None

    def _default_definition(self) -> str:
        meta = self._metadata
        reads = ("the prompt with a model's response" if self.input == PROMPT_RESPONSE
                 else "the prompt")
        return (f"any-guardrail {self.target} ({meta.display_name}: "
                f"{meta.description.rstrip('.')}), reading {reads}: unsafe = P(unsafe) ≥ 0.5, "
                f"P(unsafe) = its risk score, or 1 when it calls the text invalid and 0 when "
                f"valid if it gives no score")

    @property
    def definition(self) -> str:
        return self._definition

    @property
    def chunk_size(self) -> int:
        return self.batch_size

    def describe(self) -> dict[str, Any]:
        masked = {k: ("***" if any(w in k.lower() for w in _SECRET_WORDS) else v)
                  for k, v in sorted(self.options.items())}
        out: dict[str, Any] = {"adapter": self.kind, "guardrail": self.target,
                               "options": masked, "any_guardrail": _version()}
        if self._injected:
            cls = type(self.guardrail)
            out["object"] = f"{cls.__module__}.{cls.__qualname__}"
        if self.input == PROMPT_RESPONSE:
            out["input"] = self.input
        return out

    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        if self.input == PROMPT_RESPONSE:
            raise GuarddiagError(f"guard {self.name!r} scores prompt + response: give it "
                                 f"benchmark frames with a response column")
        labels = [f"prompt {i + 1} ({t[:60]!r})" for i, t in enumerate(texts)]
        return self._score(list(texts), [None] * len(texts), labels)

    def score_prompts(self, frame: pl.DataFrame) -> list[GuardVerdict]:
        labels = [f"{b}/{p}" for b, p in zip(frame["benchmark"], frame["prompt_id"], strict=True)]
        responses = (frame[RESPONSE].to_list() if self.input == PROMPT_RESPONSE
                     else [None] * frame.height)
        return self._score(frame["text"].to_list(), responses, labels)

    def _score(self, prompts: list[str], responses: list[str | None], labels: list[str]
               ) -> list[GuardVerdict]:
        from any_guardrail import AnyGuardrail

        out: list[GuardVerdict] = []
        errors: list[str] = []
        for prompt, response, where in zip(prompts, responses, labels, strict=True):
            try:
                output = AnyGuardrail.evaluate(self._gname, self.guardrail, prompt, response,
                                               **self._validate)
            except Exception as exc:  # the guardrail's model or API: kept, asked again later
                errors.append(f"{_first_line(exc)} on {where}")
                out.append(GuardVerdict.failed(_first_line(exc), answered=False))
                continue
            if isinstance(output, list):
                out.append(GuardVerdict.failed("validate returned a list for one text"))
                continue
            out.append(verdict_from_output(output))
        if prompts and len(errors) == len(prompts):
            raise GuarddiagError(f"guard {self.name!r} (any-guardrail {self.target}) failed on "
                                 f"every prompt of a batch of {len(prompts)}: {errors[0]}")
        return out


def _version() -> str | None:
    try:
        return version("any-guardrail")
    except PackageNotFoundError:
        return None
