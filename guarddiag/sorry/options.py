"""The options of ``guarddiag mutate``, declared once: :class:`MutateOptions`.

The command line's flags are generated from it and
:func:`~guarddiag.sorry.mutate.mutate_benchmark` takes it whole (or its fields by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from guarddiag.typed import Model, validate


class MutateOptions(Model):
    """Which SORRY-Bench mutations are written of one benchmark, and how."""

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

    @classmethod
    def of(cls, options: MutateOptions | None = None, /, **fields: Any) -> MutateOptions:
        """``options`` with ``fields`` replaced, checked."""
        base = {} if options is None else options.model_dump(exclude_unset=True)
        return validate(cls, base | fields, where="mutate options")


class TablesOptions(Model):
    """What ``guarddiag balance`` and ``guarddiag jaccard`` tabulate
    (:func:`~guarddiag.sorry.outputs.run_balance`, :func:`~guarddiag.sorry.outputs.run_jaccard`)."""

    benchmarks: str = "all"
    """'all', 'study', 'extra', 'derived' or comma-separated subset ids."""
    out_dir: Path | None = None
    """Output folder (unset: <work-dir>/sorry/balance or <work-dir>/sorry/jaccard)."""
    figure: bool = True
    """Draw the PNG/PDF figure."""
