"""Outside guards: adapters behind one interface, and the generative back ends they share.

>>> from guarddiag.guards import get_adapter, score_guard      # doctest: +SKIP
>>> guard = get_adapter("qwen3guard", model="/models/Qwen3Guard-Gen-4B")
>>> score_guard(guard, benchmarks="study", runs_dir="work/runs")

A guard reads the prompt, or the prompt with a model's response (``input="prompt+response"``, on
benchmarks whose manifests carry responses). ``any-guardrail`` (optional extra) brings that
package's guardrails in (:mod:`guarddiag.guards.anyguardrail`).

Torch and transformers are imported only when a model-backed adapter is built.
"""

from guarddiag.guards.backends import Generation, TextGenerator, make_generator
from guarddiag.guards.base import GuardAdapter, GuardVerdict
from guarddiag.guards.registry import ADAPTERS, adapters_frame, get_adapter
from guarddiag.guards.scoring import GuardScoreResult, score_guard

__all__ = [
    "ADAPTERS",
    "Generation",
    "GuardAdapter",
    "GuardScoreResult",
    "GuardVerdict",
    "TextGenerator",
    "adapters_frame",
    "get_adapter",
    "make_generator",
    "score_guard",
]
