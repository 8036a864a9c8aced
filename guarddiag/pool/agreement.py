"""How far two labelling policies agree: agreement shares, Cohen's κ and the A×B confusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from guarddiag.errors import GuarddiagError
from guarddiag.labels import CLASS_INDEX, CLASSES, LOOSE, STRICT, BinaryMapping
from guarddiag.stats import cohen_kappa

__all__ = ["AgreementResult", "agreement", "cohen_kappa"]


@dataclass(frozen=True)
class AgreementResult:
    """How far policy A and policy B agree on the same prompts."""

    n: int
    coarse_agreement: float
    """Share of prompts with the same 4-class label."""
    binary_agreement: float
    """Share with the same safe/unsafe read-out under ``mapping``."""
    kappa_coarse: float
    kappa_binary: float
    confusion: tuple[tuple[int, ...], ...]
    """4×4 counts, rows = policy A class, columns = policy B class, in ``CLASSES`` order."""
    mapping: str
    binary_agreement_strict: float
    """Binary agreement when BOUNDARY_SAFE reads as unsafe (the strict mapping)."""

    @property
    def n_disagree_binary(self) -> int:
        return self.n - round(self.binary_agreement * self.n)

    def to_frame(self) -> pl.DataFrame:
        """The confusion matrix as a table: one row per A class, one column per B class."""
        return pl.DataFrame(
            {"label_a": list(CLASSES),
             **{name: [row[j] for row in self.confusion] for j, name in enumerate(CLASSES)}})

    def to_json(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if x != x else round(x, 6)

        return {"n": self.n, "coarse_agreement": num(self.coarse_agreement),
                "binary_agreement": num(self.binary_agreement),
                "binary_disagreement": num(1 - self.binary_agreement) if self.n else None,
                "binary_agreement_strict": num(self.binary_agreement_strict),
                "kappa_coarse": num(self.kappa_coarse), "kappa_binary": num(self.kappa_binary),
                "mapping": self.mapping, "classes": list(CLASSES),
                "confusion_a_rows_b_cols": [list(r) for r in self.confusion]}


def agreement(label_a: Sequence[str], label_b: Sequence[str], *,
              mapping: BinaryMapping = LOOSE) -> AgreementResult:
    """Coarse and binary agreement, Cohen's κ (4-class and binary) and the A×B confusion."""
    for lab in (*label_a, *label_b):
        if lab not in CLASS_INDEX:
            raise GuarddiagError(f"agreement: class {lab!r} is not one of {', '.join(CLASSES)}")
    n = len(label_a)
    conf = np.zeros((4, 4), dtype=np.int64)
    for x, y in zip(label_a, label_b, strict=True):
        conf[CLASS_INDEX[x], CLASS_INDEX[y]] += 1
    bin_a = ["unsafe" if mapping.is_unsafe(x) else "safe" for x in label_a]
    bin_b = ["unsafe" if mapping.is_unsafe(y) else "safe" for y in label_b]
    strict_eq = sum(STRICT.is_unsafe(x) == STRICT.is_unsafe(y)
                    for x, y in zip(label_a, label_b, strict=True))
    nan = float("nan")
    return AgreementResult(
        n=n,
        coarse_agreement=float(np.trace(conf) / n) if n else nan,
        binary_agreement=sum(x == y for x, y in zip(bin_a, bin_b, strict=True)) / n if n else nan,
        kappa_coarse=cohen_kappa(label_a, label_b, CLASSES) if n else nan,
        kappa_binary=cohen_kappa(bin_a, bin_b, ("safe", "unsafe")) if n else nan,
        confusion=tuple(tuple(int(v) for v in row) for row in conf),
        mapping=mapping.name,
        binary_agreement_strict=strict_eq / n if n else nan,
    )
