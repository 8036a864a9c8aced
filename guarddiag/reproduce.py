"""A demo run's fingerprint, and ``guarddiag bench reproduce``: does this machine compute what
the committed example computed?

The demo writes ``<report>/reproduce.json`` beside its report: the kernels and CPU it ran on,
the sha256 of the frozen encoder's states of :data:`PROBE_COUNT` fixed benchmark prompts, the
predictions table's sha256, and the first screen's call per benchmark. ``bench reproduce``
recomputes the states of the same prompts here (seconds) and, given a finished demo's work and
report folders, compares its predictions and calls with the fingerprint's. On the portable path
(:mod:`guarddiag.numerics`) every figure must be the same bytes on any x86-64 CPU;
``tests/test_reproduce.py`` checks the states against ``reports/example`` in CI, on whatever CPU
CI has.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guarddiag import files, numerics
from guarddiag.errors import GuarddiagError
from guarddiag.paths import WorkPaths

if TYPE_CHECKING:
    from guarddiag.model.sizes import EncoderSpec

FINGERPRINT = "reproduce.json"
PROBE_COUNT = 64
"""Benchmark prompts whose states the fingerprint pins (a few seconds to embed)."""


def probe_prompts(texts: Sequence[str]) -> list[str]:
    """:data:`PROBE_COUNT` prompts chosen by their sha256 (independent of load order)."""
    return sorted(set(texts), key=lambda t: hashlib.sha256(t.encode()).hexdigest())[:PROBE_COUNT]


def states_digest(spec: EncoderSpec, prompts: Sequence[str]) -> str:
    """sha256 of the frozen encoder ``spec``'s float32 states of ``prompts`` (no cache)."""
    from guarddiag.model.states import FrozenEncoder

    enc = FrozenEncoder.load(spec, numeric="fp32")
    return hashlib.sha256(enc.embed(list(prompts)).tobytes()).hexdigest()


def first_screen_calls(report_dir: Path) -> dict[str, str]:
    doc = files.read_json(report_dir / "results.json")
    rows = ((doc.get("results") or {}).get("first_screen") or {}).get("calls") or []
    return {r["benchmark"]: r["call"] for r in rows}


def write_fingerprint(*, report_dir: Path, predictions: Path, encoder: EncoderSpec | None,
                      prompts: Sequence[str]) -> Path:
    """Write ``<report_dir>/reproduce.json`` for a finished demo: the states of a sample of
    ``prompts`` under its frozen ``encoder`` (None at a size without one: no states), the
    predictions' digest and the first screen's calls."""
    probe = probe_prompts(prompts)
    states = (None if encoder is None else
              {**encoder.to_record(), "prompts": probe, "sha256": states_digest(encoder, probe)})
    doc = {"kernels": numerics.active().to_dict(), "cpu": numerics.cpu_flags(),
           "states": states,
           "predictions_sha256": files.sha256_file(predictions),
           "calls": first_screen_calls(report_dir)}
    path = report_dir / FINGERPRINT
    files.write_json(doc, path)
    return path


@dataclass(frozen=True)
class ReproduceResult:
    """What this machine computed beside the fingerprint."""

    example_kernels: str
    here_kernels: str
    cpu_example: str
    cpu_here: str
    states_same: bool | None
    """None where the fingerprint pins no states (a random-init size)."""
    predictions_same: bool | None
    """None where no finished demo was given."""
    calls: tuple[tuple[str, str, str | None], ...]
    """(benchmark, the example's call, this run's call or None)."""

    @property
    def calls_same(self) -> int:
        return sum(a == b for _, a, b in self.calls)

    @property
    def ok(self) -> bool:
        return (self.states_same is not False and self.predictions_same is not False
                and all(b is None or a == b for _, a, b in self.calls))

    def to_dict(self) -> dict[str, Any]:
        return {"example_kernels": self.example_kernels, "here_kernels": self.here_kernels,
                "cpu_example": self.cpu_example, "cpu_here": self.cpu_here,
                "states_same": self.states_same, "predictions_same": self.predictions_same,
                "calls": [{"benchmark": b, "example": a, "here": h} for b, a, h in self.calls],
                "ok": self.ok}


def reproduce(example_dir: str | Path, *, work_dir: str | Path | None = None,
              report_dir: str | Path | None = None) -> ReproduceResult:
    """Recompute the fingerprint's states here; with a finished demo's ``work_dir`` (its
    runs/predictions.parquet) and ``report_dir`` (its results.json), compare those too."""
    example_dir = Path(example_dir)
    path = example_dir / FINGERPRINT
    if not path.is_file():
        raise GuarddiagError(f"{path}: no fingerprint (the demo writes it beside its report)")
    doc = files.read_json(path)
    st = doc["states"]
    from guarddiag.model.sizes import EncoderSpec

    states_same = (None if st is None else st["sha256"] == states_digest(
        EncoderSpec.from_record(st), st["prompts"]))
    preds_same = None
    calls: list[tuple[str, str, str | None]] = []
    if work_dir is not None:
        preds = WorkPaths.under(work_dir).predictions
        if not preds.is_file():
            raise GuarddiagError(f"{preds}: not found (run the demo into {work_dir} first)")
        preds_same = files.sha256_file(preds) == doc["predictions_sha256"]
    mine = first_screen_calls(Path(report_dir)) if report_dir is not None else {}
    calls = [(b, c, mine.get(b) if report_dir is not None else None)
             for b, c in sorted(doc["calls"].items())]
    return ReproduceResult(doc["kernels"]["tag"], numerics.active().tag, doc["cpu"],
                           numerics.cpu_flags(), states_same, preds_same, tuple(calls))
