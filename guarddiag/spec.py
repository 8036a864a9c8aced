"""What the validator (:mod:`guarddiag.typed`, pydantic) lacks: YAML loaded safely with
line-precise one-line errors, and problems collected across files so all are reported at once.

Spec files (data manifests, policies, pool recipes, branch specs, taxonomy, mutations) declare
their keys as typed models (:class:`guarddiag.typed.SpecModel`) and are read with
:func:`guarddiag.typed.read_values` or :func:`guarddiag.typed.validate`; what only they know
(cross-field rules, links between files) they add to the same :class:`Problems`. Every message
is one line naming the file and the field: ``<file> field "<key>": expected <what>, got
<value>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guarddiag.errors import GuarddiagError

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
