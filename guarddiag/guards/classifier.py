"""Any Hugging Face sequence classifier as a guard, its labels mapped to classes by a YAML file.

The label file names, for every label of the model (``config.id2label``), the class it means::

    # labels.yaml — Prompt-Guard-style classifier
    labels:
      BENIGN: GENERIC_SAFE
      INJECTION: COMPOUND
      JAILBREAK: HARMFUL

Class probabilities are the softmax over the model's labels, summed per class.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.guards.backends import load_error, model_digest, resolve_model_source
from guarddiag.guards.base import GuardAdapter, GuardVerdict, class_probs_from, slug
from guarddiag.labels import CLASSES
from guarddiag.progress import library_bars_follow_ours
from guarddiag.typed import mapping_section


def load_label_map(source: str | Path | Mapping[str, str], *, what: str = "labels"
                   ) -> dict[str, str]:
    """``{label: class}`` from a mapping or a YAML file with a ``labels:`` mapping."""
    doc, where = mapping_section(source, "labels", what=what, entries="label → class")
    out: dict[str, str] = {}
    for label, cls in doc.items():
        if cls not in CLASSES:
            raise GuarddiagError(f"{where}: label {label!r} maps to {cls!r}, expected one of "
                                 f"{', '.join(CLASSES)}")
        out[str(label)] = str(cls)
    return out


class HFClassifierAdapter(GuardAdapter):
    """``AutoModelForSequenceClassification`` + its tokenizer, batched, softmax per prompt."""

    kind = "hf-classifier"

    def __init__(self, *, model: str | None = None, labels: str | Path | Mapping[str, str]
                 | None = None, name: str | None = None, batch_size: int = 32,
                 max_length: int = 512, device: str | None = None):
        if not model:
            raise GuarddiagError("guard 'hf-classifier' needs --model <folder or hub id>")
        if labels is None:
            raise GuarddiagError("guard 'hf-classifier' needs --labels <yaml> mapping each model "
                                 "label to GENERIC_SAFE, BOUNDARY_SAFE, HARMFUL or COMPOUND")
        self.label_map = load_label_map(labels)
        source = resolve_model_source(model)  # before the slow imports: fail fast on a typo
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        library_bars_follow_ours()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            self.model = AutoModelForSequenceClassification.from_pretrained(source)
        except (OSError, ValueError, KeyError) as exc:
            raise load_error(model, exc) from None
        config = self.model.config
        if getattr(config, "problem_type", None) == "multi_label_classification":
            raise GuarddiagError(f"{model}: a multi-label classifier has no single class per "
                                 f"prompt; only single-label (softmax) classifiers are supported")
        self.model_labels = [config.id2label[i] for i in range(config.num_labels)]
        missing = [lab for lab in self.model_labels if lab not in self.label_map]
        extra = [lab for lab in self.label_map if lab not in self.model_labels]
        if missing or extra:
            detail = (f"model label(s) not mapped: {', '.join(missing)}" if missing
                      else f"label(s) the model does not have: {', '.join(extra)}")
            raise GuarddiagError(f"{labels if not isinstance(labels, Mapping) else 'labels'}: "
                                 f"{detail} (the model's labels: {', '.join(self.model_labels)})")
        self.model_id = model
        self.model_sha256 = model_digest(source)
        self.name = name or slug(model)
        self.batch_size = max(1, int(batch_size))
        limit = getattr(self.tokenizer, "model_max_length", max_length) or max_length
        self.max_length = int(min(max_length, limit))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()

    @property
    def chunk_size(self) -> int:
        return 8 * self.batch_size

    def describe(self) -> dict[str, Any]:
        return {"adapter": self.kind, "model": self.model_id, "labels": self.label_map,
                "max_length": self.max_length,
                **({"model_sha256": self.model_sha256} if self.model_sha256 else {})}

    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        import torch

        out: list[GuardVerdict] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            enc = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True,
                                 max_length=self.max_length).to(self.device)
            with torch.no_grad():
                probs = torch.softmax(self.model(**enc).logits.float(), dim=-1).cpu().tolist()
            for row in probs:
                by_label = dict(zip(self.model_labels, row, strict=True))
                mass: dict[str, float] = {}
                for label, p in by_label.items():
                    cls = self.label_map[label]
                    mass[cls] = mass.get(cls, 0.0) + p
                top = max(by_label, key=lambda lab: by_label[lab])
                out.append(GuardVerdict(status="ok", class_probs=class_probs_from(mass),
                                        verdict=top, p_source="classifier",
                                        raw=_json(by_label)))
        return out


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
