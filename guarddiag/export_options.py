"""The options of ``guarddiag export decontaminated`` and ``export card``, declared once.

:class:`DecontaminatedOptions` and :class:`CardOptions` live apart from
:mod:`guarddiag.exports`, which loads ``datasets`` on import: the command line reads its
flags' help from them without that cost. The command line's flags are generated from them and
:func:`~guarddiag.exports.export_decontaminated` and :func:`~guarddiag.exports.export_card`
take them whole (or their fields by name).
"""

from __future__ import annotations

from pathlib import Path

from guarddiag.typed import Model

__all__ = ["CardOptions", "DecontaminatedOptions"]


class DecontaminatedOptions(Model):
    """Which audited benchmarks ``export decontaminated`` writes, and where."""

    benchmarks: str | tuple[str, ...] = "all"
    """'all', 'study' or comma-separated subset ids (audited ones only)."""
    out: Path = Path("exports/decontaminated")
    """Output folder."""
    hf: bool = True
    """Also write the Hugging Face datasets folder <out>/hf/ (else JSONL only)."""


class CardOptions(Model):
    """Where ``export card`` writes a report's disclosure card."""

    out: Path | None = None
    """Card file (default <report>/card.yaml)."""
