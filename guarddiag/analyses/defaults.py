"""The report's defaults that are not the study's protocol, shared by options and analyses.

:class:`~guarddiag.analyses.options.ReportOptions` declares the report's options for the CLI, the
API and the analysis step; the analyses that register themselves
(:mod:`~guarddiag.analyses.registry`) take the same defaults as keyword defaults. Declared here,
below both, neither imports the other for a value (the registry's context names
``ReportOptions``, so an options module that imported the analyses closed a circle). The study's
constants (cut-off, alpha, margins, the competence floor, the rank test's benchmark) are the
protocol's (:mod:`guarddiag.protocol`).
"""

from __future__ import annotations

__all__ = ["DEFAULT_GROUP", "DEFAULT_MIN_SEEDS"]

DEFAULT_MIN_SEEDS = 3
"""Seeds a recipe needs to count as a seed group for the floor."""
DEFAULT_GROUP: tuple[str, ...] = ()
"""No names: the group is read from the runs' roles, the A-last group (students whose last
policy signal is A)."""
