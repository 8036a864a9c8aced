"""The one error type users see.

Every mistake a user can make (a missing file, a wrong checksum, a malformed spec, an unknown
benchmark) raises :class:`GuarddiagError` with one line that says what is wrong, where (file, row,
field) and what was expected. The CLI prints that line and exits with status 2; it never shows a
traceback for a user mistake.
"""

from __future__ import annotations

from os import PathLike


class GuarddiagError(Exception):
    """A user-facing error whose message is one self-contained line."""


def at(path: str | PathLike[str] | None = None, *, row: int | None = None,
       field: str | None = None) -> str:
    """Format a location as ``file:row [field]`` for error messages.

    >>> at("pool.csv", row=12, field="text")
    'pool.csv row 12 field "text"'
    """
    parts = []
    if path is not None:
        parts.append(str(path))
    if row is not None:
        parts.append(f"row {row}")
    if field is not None:
        parts.append(f'field "{field}"')
    return " ".join(parts) if parts else "<input>"


def did_you_mean(name: str, choices: list[str] | tuple[str, ...]) -> str:
    """A short hint listing the valid choices, closest first.

    rapidfuzz's WRatio scores partial names and typos alike ("harmbench" → the three
    harmbench_* subsets, "jbb" → jbb_benign, jbb_harmful), where difflib's ratio offered
    advbench and nothing; ties keep name order, so the hint is stable. Imported here, when a
    hint is wanted: every command imports this module, and rapidfuzz's import is not free
    (docs/decisions.md#2026-12-05-start-up-costs-behind-the-lazy-imports).
    """
    from rapidfuzz import fuzz, process

    scored = process.extract(name, list(choices), scorer=fuzz.WRatio, limit=None,
                             score_cutoff=70)
    close = [choice for choice, _, _ in sorted(scored, key=lambda m: (-m[1], m[0]))[:3]]
    if close:
        return f"did you mean {', '.join(close)}?"
    shown = ", ".join(sorted(choices)[:12])
    more = "" if len(choices) <= 12 else f", … ({len(choices)} in all)"
    return f"expected one of {shown}{more}"


def unknown_name(kind: str, name: str, choices: list[str] | tuple[str, ...],
                 where: str | None = None) -> GuarddiagError:
    """The error for an unknown branch, benchmark, adapter, mutation, size…"""
    loc = f" in {where}" if where else ""
    return GuarddiagError(f"unknown {kind} {name!r}{loc}: {did_you_mean(name, choices)}")
