"""The report's defaults read by both ReportOptions and the analyses' keyword defaults.

:class:`~guarddiag.analyses.options.ReportOptions` declares the report's options for the CLI, the
API and the analysis step; the analyses that register themselves
(:mod:`~guarddiag.analyses.registry`) take the same defaults as keyword defaults. Declared here,
below both, neither imports the other for a number (the registry's context names
``ReportOptions``, so an options module that imported the analyses closed a circle).
"""

from __future__ import annotations

__all__ = ["DEFAULT_BENCHMARK", "DEFAULT_COMPETENCE_FLOOR", "DEFAULT_GROUP", "DEFAULT_MARGIN",
           "DEFAULT_MIN_SEEDS"]

DEFAULT_MARGIN = 0.05
"""Equivalence margin of a *capability* call: the contrast lies within ±5 pp."""
DEFAULT_COMPETENCE_FLOOR = 0.80
"""Mean reference CAP on the clear-harm benchmarks below which the report cautions: the study's
lowest branch mean CAP (80.0%, SPEC §6)."""
DEFAULT_MIN_SEEDS = 3
"""Seeds a recipe needs to count as a seed group for the floor."""
DEFAULT_GROUP: tuple[str, ...] = ()
"""No names: the group is read from the runs' roles, the A-last group (students whose last
policy signal is A)."""
DEFAULT_BENCHMARK = "harmbench_copyright"
"""Benchmark of the exact rank test."""
