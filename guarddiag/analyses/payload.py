"""A result's results.json payload and its typed model, both derived from the result's own
declaration.

An analysis result is declared once, as a frozen dataclass with typed fields (the docstring
under a field is its description). From that one declaration come

- :func:`payload_of`: the value written under ``results[<section id>]`` in results.json
  (a table becomes its records, an exact fraction ``{"value", "exact"}``, a tuple a list, a
  nested result its own payload, a non-finite float null);
- :func:`payload_model`: the pydantic model of that value, which results.json's validation
  and its JSON Schema (:mod:`guarddiag.report.schema`) use; named ``<Name>Json`` for a
  ``<Name>Result``.

A field's key in the payload is its name, or the one given with :func:`json_key` (a table
named ``table`` in Python that results.json has always called ``rows``); a field marked
:func:`not_in_payload` stays out of it. A hand-written model of the results document that holds
a result's payload names it ``Payload[TheResult]``. This module also holds the base types of
the results document (:class:`Doc`, :data:`Record`).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import textwrap
import types
from collections.abc import Mapping
from fractions import Fraction
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import polars as pl
from pydantic import ConfigDict, Field, GetCoreSchemaHandler, create_model

from guarddiag.errors import GuarddiagError
from guarddiag.typed import Model

JsonScalar = str | int | float | bool | None
Record = dict[str, JsonScalar]
"""One table row: column → value."""

_JSON_KEY = "guarddiag.json_key"
_LEFT_OUT = "guarddiag.not_in_payload"
T = TypeVar("T")


class Doc(Model):
    """Base of the results document's objects: unknown keys are errors; an optional key's
    default (absent) is not validated."""

    model_config = ConfigDict(validate_default=False)


def absent() -> Any:
    """The default of an optional key: absent from the object (never written as null)."""
    return Field(default=None)


class ExactJson(Doc):
    """A probability, as a float and as the exact fraction ``a/b``."""

    value: float
    exact: str


def json_key(key: str) -> dict[str, str]:
    """Field metadata: the field's key in the payload is ``key``, not its Python name
    (``table: pl.DataFrame = field(metadata=json_key("rows"))``)."""
    return {_JSON_KEY: key}


def not_in_payload() -> dict[str, bool]:
    """Field metadata: the field stays out of the payload (a value the report does not
    write)."""
    return {_LEFT_OUT: True}


class _AsPayload:
    """Marks a result type in a model's annotation: validated and described as its payload."""

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> Any:
        return handler.generate_schema(payload_model(source))


Payload = Annotated[T, _AsPayload()]
"""``Payload[FooResult]`` in a results-document model: the payload of a ``FooResult``, its model
derived (:func:`payload_model`)."""


def records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A table as JSON records, one per row (column → value)."""
    return [{k: jsonable(v) for k, v in row.items()} for row in frame.iter_rows(named=True)]


def jsonable(v: Any) -> Any:
    """``v`` as a JSON value (non-finite floats null, fractions ``{"value", "exact"}``)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Fraction):
        return {"value": float(v), "exact": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, pl.DataFrame):
        return records(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return payload_of(v)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    return v


def payload_of(result: Any) -> dict[str, Any]:
    """The results.json value of ``result`` (a dataclass instance): every field under its
    key (:func:`json_key`), as :func:`jsonable`."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise GuarddiagError(f"payload: {type(result).__name__} is not a result dataclass")
    return {_key(f): jsonable(getattr(result, f.name)) for f in _fields(result)}


def _fields(result: Any) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(result) if not f.metadata.get(_LEFT_OUT)]


def _key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get(_JSON_KEY, f.name))


_MODELS: dict[type, type[Doc]] = {}


def payload_model(result_type: type) -> type[Doc]:
    """The pydantic model of :func:`payload_of`'s value for ``result_type`` (a dataclass), its
    field docstrings as descriptions; ``FooResult`` gives ``FooJson`` (made once per type)."""
    if result_type in _MODELS:
        return _MODELS[result_type]
    if not dataclasses.is_dataclass(result_type):
        raise GuarddiagError(f"payload_model: {result_type.__name__} is not a result dataclass")
    hints = get_type_hints(result_type)
    docs = _field_docs(result_type)
    fields: dict[str, Any] = {
        _key(f): (_json_type(hints[f.name], f"{result_type.__name__}.{f.name}"),
                  Field(description=docs.get(f.name)))
        for f in _fields(result_type)}
    name = result_type.__name__.removesuffix("Result") + "Json"
    model: type[Doc] = create_model(name, __base__=Doc, __doc__=result_type.__doc__, **fields)
    _MODELS[result_type] = model
    return model


def _json_type(hint: Any, where: str) -> Any:
    """The type of a field's JSON value, from its Python type."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is pl.DataFrame:
        return list[Record]
    if hint is Fraction:
        return ExactJson
    if hint in (str, int, float, bool, type(None)) or origin is Literal or hint is Any:
        return hint
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return payload_model(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(_json_type(a, where) for a in args)]  # noqa: UP007 - built at runtime
    if origin in (tuple, list):
        items = tuple(dict.fromkeys(_json_type(a, where) for a in args if a is not Ellipsis))
        item = Union[items] if len(items) > 1 else items[0]  # noqa: UP007
        return types.GenericAlias(list, (item,))
    if origin in (dict, Mapping) or hint is Mapping:
        value = _json_type(args[1], where) if args else Any
        return types.GenericAlias(dict, (str, value))
    raise GuarddiagError(f"{where}: no JSON form for the type {hint!r} (use a table, a "
                         f"fraction, a scalar, a tuple, a mapping or a result dataclass)")


def _field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of ``cls``'s class body (and its bases')."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0]
        if not isinstance(body, ast.ClassDef):
            continue
        for node, after in zip(body.body, body.body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs
