"""The one home of typed models: specs, run metadata, each verb's options, the results document.

Every concept that crosses a boundary (a YAML file, a CLI flag, a JSON file another tool reads)
is declared once as a :class:`Model` subclass, and read with :func:`validate`, which turns
pydantic's errors into guarddiag's one error dialect: one line per problem naming the file and
the field (``<file> field "<key>": <what was expected>, got <value>``), every problem at once.

pydantic (v2) is the choice because it gives, from one declaration, validation with the field's
location, defaults that the CLI, the API and the engines share, and a JSON Schema for outside
tools; frozen dataclasses stay for the small in-memory result objects of the analyses.
"""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from guarddiag.errors import GuarddiagError, did_you_mean
from guarddiag.spec import SpecError


class Model(BaseModel):
    """Base of every typed model: immutable, unknown keys are errors, values are checked
    on assignment-free construction only (models are frozen)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False,
                              validate_default=True, use_attribute_docstrings=True)


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
