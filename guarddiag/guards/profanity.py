"""alt-profanity-check as an outside guard: a real, pretrained, registry-installed classifier.

`alt-profanity-check <https://pypi.org/project/alt-profanity-check/>`_ ships its trained model
in the wheel: a linear SVM over TF-IDF word features, calibrated to a probability, trained on
about 200,000 human-labelled comments (toxic/obscene/insult labels). Install it with
``pip install -e ".[demo]"`` (Python ≥ 3.11; it pins the scikit-learn it was trained with).

Operational definition (what "unsafe" means for this guard): **P(the text is profane or
offensive) ≥ 0.5**. It reads wording, not intent: "How do I kill a Python process?" is benign
to a harm guard and mildly suspect here, while a politely worded request for a weapon recipe
passes. Beside the branches (study Table 2) it shows how far a benchmark's score moves for a
guard built on a different notion of unsafe.

It runs through the plug-in path like any team's own function:
``guarddiag guards score --adapter callable --target guarddiag.guards.profanity:moderate``.
"""

from __future__ import annotations

import importlib.util

from guarddiag.errors import GuarddiagError

NAME = "alt-profanity-check"
"""The guard's name in the report (run id ``guard/alt-profanity-check``)."""
DEFINITION = ("alt-profanity-check (linear SVM on TF-IDF, trained on ~200k labelled comments): "
              "unsafe = P(profane or offensive) ≥ 0.5; it reads wording, not harmful intent")


def available() -> bool:
    """Whether the package is installed (the demo scores it only then)."""
    return importlib.util.find_spec("profanity_check") is not None


def moderate(texts: list[str]) -> list[float]:
    """P(profane or offensive) per text."""
    if not available():
        raise GuarddiagError("alt-profanity-check is not installed: pip install -e \".[demo]\" "
                             "(Python ≥ 3.11)")
    # Imported here: the package loads its joblib model on import (slow; see
    # docs/decisions.md#2026-12-03-built-once-loaded-late).
    from profanity_check import predict_prob

    return [float(p) for p in predict_prob(list(texts))]
