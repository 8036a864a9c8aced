"""Turning result values into JSON values for results.json (non-finite floats become null,
exact fractions ``{"value", "exact"}``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import polars as pl


def records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frame.iter_rows(named=True):
        out.append({k: jsonable(v) for k, v in row.items()})
    return out


def jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Fraction):
        return {"value": float(v), "exact": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    return v
