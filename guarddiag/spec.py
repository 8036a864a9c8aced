"""The one spec reader: flat YAML loaded safely, checked against declared fields, every problem
reported at once.

Area modules (data manifests, policies, pool recipes, branch specs, taxonomy, mutations) declare
their keys as :class:`Field` tuples (name, type, required, allowed values, default) and read a
mapping with :func:`read_fields`; what only they know (cross-field rules, links between files)
they add to the same :class:`Problems`. Every message is one line naming the file and the field:
``<file> field "<key>": expected <what>, got <value>``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
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


# ─── declared fields ───────────────────────────────────────────────────────────────────────────

FIELD_TYPES = ("any", "str", "text", "bool", "int", "number", "str_list", "mapping", "list")
"""What a :class:`Field` value may be: ``str`` a non-empty string, ``text`` any string,
``int`` an integer (not a bool), ``number`` a finite int or float (read as float),
``str_list`` a non-empty list of non-empty strings (read as a tuple)."""

NO_DEFAULT: Any = object()
"""A field without a default is left out of :func:`read_fields`' result when absent."""


@dataclass(frozen=True)
class Field:
    """One key of a spec mapping, declared once; :func:`read_fields` checks it."""

    name: str
    type: str = "any"
    """One of :data:`FIELD_TYPES`."""
    required: bool = False
    allowed: tuple[Any, ...] | None = None
    """The only values accepted (checked after the type)."""
    default: Any = NO_DEFAULT
    """Value used when the key is absent."""
    nullable: bool = False
    """A null value is accepted and read as None."""
    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    """The value must lie strictly above ``minimum``."""
    open_maximum: bool = False
    """The value must lie strictly below ``maximum``."""
    pattern: str | None = None
    """A regex a ``str`` value must match in full, described by ``describe``."""
    describe: str | None = None
    """What the value should look like, for the error message (defaults to the type's)."""

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")


_TYPE_TEXT = {"str": "a non-empty string", "text": "a string", "bool": "true or false",
              "int": "an integer", "number": "a number", "mapping": "a mapping",
              "list": "a list", "str_list": "a list of non-empty strings"}


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "any":
        return True
    if kind == "str":
        return isinstance(value, str) and value != ""
    if kind == "text":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind == "mapping":
        return isinstance(value, Mapping)
    if kind == "list":
        return isinstance(value, list)
    return isinstance(value, list) and all(isinstance(v, str) and v != "" for v in value)


def _choices(allowed: Sequence[Any]) -> str:
    shown = [str(a) for a in allowed]
    if len(shown) == 2:
        return f"{shown[0]} or {shown[1]}"
    return f"one of {', '.join(shown)}"


def _interval(spec: Field) -> str:
    left = "(" if spec.open_minimum else "["
    right = ")" if spec.open_maximum else "]"
    return f"{left}{spec.minimum:g}, {spec.maximum:g}{right}"


def _range_problem(spec: Field, value: float) -> str | None:
    low, high = spec.minimum, spec.maximum
    below = low is not None and (value <= low if spec.open_minimum else value < low)
    above = high is not None and (value >= high if spec.open_maximum else value > high)
    if not (below or above):
        return None
    if low is not None and high is not None:
        return f"{value} is outside {_interval(spec)}"
    if below:
        return f"{value} must be > {low:g}" if spec.open_minimum else \
            f"{value} is below the minimum {low:g}"
    return f"{value} must be < {high:g}" if spec.open_maximum else \
        f"{value} is above the maximum {high:g}"


def field_problem(spec: Field, value: Any) -> str | None:
    """Why ``value`` does not fit ``spec`` (one message), or None when it does."""
    if value is None and spec.nullable:
        return None
    what = spec.describe or _TYPE_TEXT.get(spec.type, "a value")
    if spec.type == "number" and spec.minimum == 0 and spec.maximum == 1 and not spec.describe:
        what = "a fraction in [0, 1]"
    or_null = " or null" if spec.nullable else ""
    if not _type_ok(spec.type, value):
        return f"expected {what}{or_null}, got {value!r}"
    if spec.type == "str_list" and not value:
        return "expected at least one entry"
    if spec.pattern is not None and not re.fullmatch(spec.pattern, value):
        return f"expected {what}{or_null}, got {value!r}"
    if spec.allowed is not None and value not in spec.allowed:
        return f"expected {_choices(spec.allowed)}, got {value!r}"
    if spec.type in ("int", "number"):
        return _range_problem(spec, value)
    return None


def _read_value(spec: Field, value: Any) -> Any:
    if spec.type == "number" and value is not None:
        return float(value)
    if spec.type == "str_list" and value is not None:
        return tuple(value)
    return value


def read_fields(doc: Any, fields: Sequence[Field], *, where: str, problems: Problems,
                extra_keys: Iterable[str] = ()) -> dict[str, Any]:
    """Check ``doc`` against declared fields, recording every problem in ``problems``.

    Unknown keys (``extra_keys`` are tolerated for the caller to read itself), missing
    required keys, then each present value's type, allowed values and range. Returns the
    valid values, and the defaults of absent fields that have one; an invalid value is left
    out (its problem is recorded).
    """
    check_keys(doc, required=[f.name for f in fields if f.required],
               optional=[*(f.name for f in fields if not f.required), *extra_keys],
               where=where, problems=problems)
    if not isinstance(doc, Mapping):
        return {}
    values: dict[str, Any] = {}
    for spec in fields:
        if spec.name not in doc:
            if spec.default is not NO_DEFAULT:
                values[spec.name] = spec.default
            continue
        value = doc[spec.name]
        message = field_problem(spec, value)
        if message is None:
            values[spec.name] = _read_value(spec, value)
        else:
            problems.add(f'{where} field "{spec.name}"', message)
    return values
