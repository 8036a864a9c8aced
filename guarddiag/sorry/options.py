"""The options of the SORRY-Bench verbs, declared once: :class:`MutateOptions`,
:class:`TablesOptions` (``balance``, ``jaccard``) and :class:`JudgeEvalOptions`.

The command line's flags are generated from them and the verbs
(:func:`~guarddiag.sorry.mutate.mutate_benchmark`, :func:`~guarddiag.sorry.outputs.run_balance`,
:func:`~guarddiag.sorry.outputs.run_jaccard`, :func:`~guarddiag.sorry.outputs.run_judge_eval`)
take them whole (or their fields by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from guarddiag.protocol import protocol
from guarddiag.typed import Model, VerbOptions


class MutateOptions(VerbOptions):
    """Which SORRY-Bench mutations are written of one benchmark, and how."""

    WHERE = "mutate options"

    mutations: str | tuple[str, ...]
    """Comma-separated mutation names or groups (all, deterministic, generative, encoding,
    persuasion, translation, writing_style)."""
    seed: int = 0
    """Seed of the misspellings, of generator sampling and of the sample."""
    bare: bool = False
    """Encodings: write the encoded payload without the decoding instruction."""
    misspell_rate: float = 0.3
    """Share of words (>= 4 letters) misspelt."""
    temperature: float = 0.0
    """Generator sampling temperature (0 = greedy)."""
    max_new_tokens: int = Field(default=1024, ge=1)
    """Generator output limit."""
    batch_size: int = Field(default=16, ge=1)
    """Prompts per generator call (and per resume checkpoint)."""
    suffix: str | None = None
    """Appended to the subset ids: <benchmark>__<mutation>_<suffix>."""
    stop: tuple[str, ...] = ()
    """Generator: strings that end a rewrite."""
    sample: int | None = None
    """Mutate a seeded sample (seed) of this many base prompts only: a trial run (its notes
    say so)."""


class TablesOptions(Model):
    """What ``guarddiag balance`` and ``guarddiag jaccard`` tabulate
    (:func:`~guarddiag.sorry.outputs.run_balance`, :func:`~guarddiag.sorry.outputs.run_jaccard`)."""

    benchmarks: str = "all"
    """'all', 'study', 'extra', 'derived' or comma-separated subset ids."""
    out_dir: Path | None = None
    """Output folder (unset: <work-dir>/sorry/balance or <work-dir>/sorry/jaccard)."""
    figure: bool = True
    """Draw the PNG/PDF figure."""


class JudgeEvalOptions(Model):
    """Which refusal judge ``guarddiag judge-eval``
    (:func:`~guarddiag.sorry.outputs.run_judge_eval`) meta-evaluates, on which records."""

    records: str | Path
    """Records table with prompt, response, label (fulfil/refuse)."""
    judge: str
    """keyword | run:<run dir> | guard:<adapter>."""
    mapping: Literal["loose", "strict"] = "loose"
    """Binary mapping for run:/guard: judges."""
    threshold: float = Field(default_factory=lambda: protocol().cutoff, ge=0.0, le=1.0)
    """P(unsafe) at or above which a run:/guard: judge says fulfil; its default is the
    protocol's cut-off."""
    batch_size: int = Field(default=64, ge=1)
    """run: judge batch size."""
    guard_options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options of the guard:<adapter> judge (model=/models/x)."""
    device: str = "auto"
    """auto (CUDA when present, else the CPU), cpu, cuda, cuda:N or mps."""
    out: Path | None = None
    """Also write the summary JSON here (and the per-record verdicts beside it)."""
