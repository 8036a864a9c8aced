"""What the validator (:mod:`guarddiag.typed`, pydantic) lacks: YAML loaded safely with
line-precise one-line errors, and problems collected across files so all are reported at once.

Spec files (data manifests, policies, pool recipes, branch specs, taxonomy, mutations) declare
their keys as typed models (:class:`guarddiag.typed.SpecModel`) and are read with
:func:`guarddiag.typed.read_values` or :func:`guarddiag.typed.validate`; what only they know
(cross-field rules, links between files) they add to the same :class:`Problems`. The nested
mappings still read by hand are checked for unknown and missing keys by :func:`check_keys`
(with :func:`guarddiag.errors.did_you_mean`). Every message is one line naming the file and the
field: ``<file> field "<key>": expected <what>, got <value>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guarddiag.errors import GuarddiagError, did_you_mean

_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level is a mapping; one-line errors otherwise."""
    path = Path(path)
    if not path.is_file():
        raise GuarddiagError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise GuarddiagError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        # libyaml's parser where PyYAML has it (several times faster; every command reads ~25
        # manifests); a file it rejects is read again by the pure-Python parser, whose error
        # message (and line) is the one reported.
        doc = yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        doc = None
    try:
        if doc is None:
            doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise GuarddiagError(f"{path}{line}: malformed YAML ({problem})") from None
    if not isinstance(doc, dict):
        raise GuarddiagError(f"{path}: expected a YAML mapping at the top level")
    return doc


def mapping_section(source: str | Path | Mapping[str, Any], key: str, *, what: str,
                    entries: str) -> tuple[dict[Any, Any], str]:
    """A non-empty mapping given directly, or the ``key:`` mapping of a YAML file holding
    only that key; returned with the place to name in errors (``entries`` says what the
    mapping holds, e.g. "label → class")."""
    if isinstance(source, Mapping):
        doc, where = dict(source), what
    else:
        raw = load_yaml_mapping(source)
        require_keys(raw, required={key}, where=str(source))
        doc, where = raw[key], f'{source} field "{key}"'
    if not isinstance(doc, dict) or not doc:
        raise GuarddiagError(f"{where}: expected a non-empty mapping of {entries}")
    return doc, where


@dataclass
class Problems:
    """Collects spec problems so a validator can report all of them at once."""

    items: list[str] = field(default_factory=list)

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{where}: {message}")

    def extend(self, other: Problems) -> None:
        self.items.extend(other.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, what: str = "spec") -> None:
        if self.items:
            raise SpecError(what, self.items)


class SpecError(GuarddiagError):
    """One or more spec problems; each is a one-line message naming file and field."""

    def __init__(self, what: str, problems: list[str]):
        self.problems = list(problems)
        if len(problems) == 1:
            super().__init__(problems[0])
        else:
            lines = "\n".join(f"  {p}" for p in problems)
            super().__init__(f"{len(problems)} problems in {what}:\n{lines}")


def check_keys(doc: Mapping[str, Any], *, required: Iterable[str], optional: Iterable[str] = (),
               where: str, problems: Problems) -> None:
    """Record unknown keys and missing required keys of one mapping."""
    if not isinstance(doc, Mapping):
        problems.add(where, f"expected a mapping, got {type(doc).__name__}")
        return
    required = list(required)
    allowed = set(required) | set(optional)
    for key in doc:
        if key not in allowed:
            problems.add(f'{where} field "{key}"',
                         f"unknown key ({did_you_mean(str(key), sorted(allowed))})")
    for key in required:
        if key not in doc:
            problems.add(f'{where} field "{key}"', "missing required key")


def require_keys(doc: Mapping[str, Any], *, required: Iterable[str],
                 optional: Iterable[str] = (), where: str) -> None:
    """:func:`check_keys` for a single mapping, raising at once."""
    problems = Problems()
    check_keys(doc, required=required, optional=optional, where=where, problems=problems)
    problems.raise_if_any(where)
