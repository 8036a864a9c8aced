"""The words of the calls and the cohort the first screen reads them at, declared once
(:mod:`~guarddiag.analyses.calls` makes the calls; placement, the report and the simulations
read these)."""

from __future__ import annotations

from guarddiag.protocol import protocol

MORE, LESS = "A flags more", "A flags less"
"""The two A/B calls, named by the sign of A-last − B-last at the matched threshold."""
DISAGREE = "routes disagree"
CALLS = (MORE, LESS, "threshold shift", "route-sensitive", "capability", DISAGREE,
         "undetermined", "uninformative")
"""Every call of a benchmark, in the order the report lists them."""
ROUTE_CALLS = (MORE, LESS, "threshold shift", "capability", "undetermined")
"""Every call of one route."""
DECONTAM = ("full", "exact", "all_kinds")
PRIMARY_DECONTAM = "exact"
PRIMARY_THRESHOLD = "matched"
"""The first screen's cohort: exact-decontaminated prompts at the matched threshold."""


def at_cutoff() -> str:
    """The ``threshold`` label of the cohort read at the protocol's cut-off (``"0.5"`` under
    the built-in protocol)."""
    return protocol().cutoff_name


def thresholds() -> tuple[str, str]:
    """The two threshold kinds of every cohort: the protocol's cut-off, then matched."""
    return at_cutoff(), PRIMARY_THRESHOLD
