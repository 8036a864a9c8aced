"""The one validator: typed models for specs, run metadata, each verb's options, the results
document.

Every concept that crosses a boundary (a YAML file, a CLI flag, a JSON file another tool reads)
is declared once as a :class:`Model` subclass, and read with :func:`validate` (a whole model) or
:func:`read_values` (a spec mapping read field by field, so the checks between fields still run
on the valid ones), which turn pydantic's errors into guarddiag's one error dialect: one line per
problem naming the file and the field (``<file> field "<key>": <what was expected>, got
<value>``), every problem at once. A spec field says what it accepts with :class:`Check` (a
non-empty string, a fraction in [0, 1], one of a few values …), whose messages are worded for
people who edit YAML; :func:`check_keys` checks the keys of the few nested mappings still read
by hand. :mod:`guarddiag.spec` keeps only what pydantic lacks: loading YAML safely with
line-precise errors, and collecting problems across files.

pydantic (v2) is the choice because it gives, from one declaration, validation with the field's
location, defaults that the CLI, the API and the engines share, and a JSON Schema for outside
tools; frozen dataclasses stay for the small in-memory result objects of the analyses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from guarddiag.errors import GuarddiagError, did_you_mean
from guarddiag.spec import Problems, SpecError, load_yaml_mapping


def name_list(value: str | Iterable[object]) -> tuple[str, ...]:
    """A list of names as a command line spells it (``"a, b"``) or as a sequence: the stripped,
    non-empty entries in order (``"a,,b "`` → ``("a", "b")``; ``""`` → ``()``). The one reading
    of a comma-separated list: flags, options models and API arguments that take either."""
    parts = value.split(",") if isinstance(value, str) else value
    return tuple(s for s in (str(p).strip() for p in parts) if s)


class Model(BaseModel):
    """Base of every typed model: immutable, unknown keys are errors, values are checked
    on assignment-free construction only (models are frozen)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False,
                              validate_default=True, use_attribute_docstrings=True)


class SpecModel(Model):
    """Base of a spec file's model (a YAML mapping whose fields carry a :class:`Check`): a
    default stands for a key the author left out and is taken as given, not checked."""

    model_config = ConfigDict(validate_default=False)


M = TypeVar("M", bound=Model)


def _field_path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _problem(model: type[Model], error: Mapping[str, Any], where: str) -> str:
    loc = tuple(error.get("loc", ()))
    field = _field_path(loc) if loc else ""
    place = f'{where} field "{field}"' if field else where
    kind = error.get("type", "")
    if kind == _SPEC_ERROR:  # a Check's message already shows the value
        return f"{place}: {error.get('msg', '')}"
    if kind == "extra_forbidden":
        allowed = sorted(model.model_fields)
        return f"{place}: unknown key ({did_you_mean(str(loc[-1]), allowed)})"
    if kind == "missing":
        return f"{place}: missing required key"
    message = str(error.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    value = error.get("input")
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{place}: {message[0].lower() + message[1:] if message else message}, got {shown}"


def validate(model: type[M], data: Mapping[str, Any] | Any, *,
             where: str | PathLike[str]) -> M:
    """``model`` built from ``data``; a :class:`~guarddiag.spec.SpecError` listing every
    problem (one line each, naming ``where`` and the field) otherwise.

    >>> class Opts(Model):
    ...     threshold: float = 0.5
    >>> validate(Opts, {"threshold": "x"}, where="run.yaml")
    Traceback (most recent call last):
    ...
    guarddiag.spec.SpecError: run.yaml field "threshold": input should be a valid number, \
unable to parse string as a number, got 'x'
    """
    if not isinstance(data, Mapping):
        raise GuarddiagError(f"{where}: expected a mapping, got {type(data).__name__}")
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        problems = [_problem(model, err, str(where)) for err in exc.errors()]
        raise SpecError(str(where), problems) from None


def validate_file(model: type[M], path: str | PathLike[str]) -> M:
    """``model`` read from the YAML file at ``path``: :func:`validate`, the path naming every
    problem."""
    return validate(model, load_yaml_mapping(Path(path)), where=path)


def replaced(model: type[M], options: M | None, fields: Mapping[str, Any], *,
             where: str) -> M:
    """``options`` (None: every default) with ``fields`` replaced, checked as ``model``: what
    a verb that takes its options object whole, or its fields by name, builds."""
    base = {} if options is None else options.model_dump(exclude_unset=True)
    return validate(model, {**base, **fields}, where=where)


V = TypeVar("V", bound="VerbOptions")


class VerbOptions(Model):
    """A verb's options model, built whole or field by field: ``of(options, **fields)``."""

    WHERE: ClassVar[str] = "options"
    """How an error names the model (``audit options``: …)."""

    @classmethod
    def of(cls: type[V], options: V | None = None, /, **fields: Any) -> V:
        """``options`` (default: every default) with ``fields`` replaced, checked."""
        return replaced(cls, options, fields, where=cls.WHERE)


def read_values(model: type[Model], doc: Any, *, where: str, problems: Problems,
                extra_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The fields of ``model`` read from a spec mapping, each validated on its own, every problem
    recorded in ``problems`` (unknown keys — ``extra_keys`` are left for the caller to read —,
    missing required keys, then each value in the model's order).

    Returns the valid values and the defaults of absent fields (a None default is left out, so
    ``values.get`` says absent); an invalid value is left out, so the caller's checks between
    fields still run on the valid ones in the same pass."""
    fields = model.model_fields
    check_keys(doc, required=[n for n, f in fields.items() if f.is_required()],
               optional=[*(n for n, f in fields.items() if not f.is_required()), *extra_keys],
               where=where, problems=problems)
    if not isinstance(doc, Mapping):
        return {}
    adapters = _field_adapters(model)
    values: dict[str, Any] = {}
    for name, info in fields.items():
        if name not in doc:
            default = None if info.is_required() else info.get_default(call_default_factory=True)
            if default is not None:
                values[name] = default
            continue
        try:
            values[name] = adapters[name].validate_python(doc[name])
        except ValidationError as exc:
            problems.items.extend(_problem(model, {**err, "loc": (name, *err["loc"])}, where)
                                  for err in exc.errors())
    return values


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


@cache
def _field_adapters(model: type[Model]) -> dict[str, TypeAdapter[Any]]:
    return {name: TypeAdapter(info.rebuild_annotation())
            for name, info in model.model_fields.items()}


# ─── what a spec field accepts ─────────────────────────────────────────────────────────────────

_SPEC_ERROR = "guarddiag_spec"


def field_error(message: str) -> PydanticCustomError:
    """The error a validator raises when ``message`` already names the bad value: reported as
    it is (``<where> field "<key>": <message>``), with no ``, got …`` after it."""
    return PydanticCustomError(_SPEC_ERROR, "{message}", {"message": message})


CHECK_KINDS = ("any", "str", "text", "bool", "int", "number", "str_list", "mapping", "list")
"""What a :class:`Check` accepts: ``str`` a non-empty string, ``text`` any string, ``int`` an
integer (not a bool), ``number`` a finite int or float (read as float), ``str_list`` a non-empty
list of non-empty strings (read as a tuple)."""

_KIND_TEXT = {"str": "a non-empty string", "text": "a string", "bool": "true or false",
              "int": "an integer", "number": "a number", "mapping": "a mapping",
              "list": "a list", "str_list": "a list of non-empty strings"}


def _kind_ok(kind: str, value: Any) -> bool:
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


@dataclass(frozen=True)
class Check:
    """What one spec field accepts, as pydantic metadata: ``name: Annotated[str, Check("str",
    pattern=ID)]``. Its single validator replaces pydantic's type check, so the message says what
    a YAML author should write (``expected a fraction in [0, 1], got 2``)."""

    kind: str = "any"
    """One of :data:`CHECK_KINDS`."""
    allowed: tuple[Any, ...] | None = None
    """The only values accepted (checked after the kind)."""
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
    """What the value should look like, for the error message (defaults to the kind's)."""

    def __post_init__(self) -> None:
        if self.kind not in CHECK_KINDS:
            raise ValueError(f"unknown check kind {self.kind!r}")

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self._validate)

    def _validate(self, value: Any) -> Any:
        message = self.problem(value)
        if message is not None:
            raise field_error(message)
        if self.kind == "number" and value is not None:
            return float(value)
        if self.kind == "str_list" and value is not None:
            return tuple(value)
        return value

    def problem(self, value: Any) -> str | None:
        """Why ``value`` does not fit (one message), or None when it does."""
        if value is None and self.nullable:
            return None
        what = self.describe or _KIND_TEXT.get(self.kind, "a value")
        if self.kind == "number" and self.minimum == 0 and self.maximum == 1 \
                and not self.describe:
            what = "a fraction in [0, 1]"
        or_null = " or null" if self.nullable else ""
        if not _kind_ok(self.kind, value):
            return f"expected {what}{or_null}, got {value!r}"
        if self.kind == "str_list" and not value:
            return "expected at least one entry"
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            return f"expected {what}{or_null}, got {value!r}"
        if self.allowed is not None and value not in self.allowed:
            return f"expected {_choices(self.allowed)}, got {value!r}"
        if self.kind in ("int", "number"):
            return self._range_problem(value)
        return None

    def _interval(self) -> str:
        left = "(" if self.open_minimum else "["
        right = ")" if self.open_maximum else "]"
        return f"{left}{self.minimum:g}, {self.maximum:g}{right}"

    def _range_problem(self, value: float) -> str | None:
        low, high = self.minimum, self.maximum
        below = low is not None and (value <= low if self.open_minimum else value < low)
        above = high is not None and (value >= high if self.open_maximum else value > high)
        if not (below or above):
            return None
        if low is not None and high is not None:
            return f"{value} is outside {self._interval()}"
        if below:
            return f"{value} must be > {low:g}" if self.open_minimum else \
                f"{value} is below the minimum {low:g}"
        return f"{value} must be < {high:g}" if self.open_maximum else \
            f"{value} is above the maximum {high:g}"
