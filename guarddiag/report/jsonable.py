"""Turning result values into JSON values for results.json (non-finite floats become null,
exact fractions ``{"value", "exact"}``): the one home is :mod:`guarddiag.analyses.payload`,
re-exported here for the section builders."""

from __future__ import annotations

from guarddiag.analyses.payload import jsonable, payload_of, records

__all__ = ["jsonable", "payload_of", "records"]
