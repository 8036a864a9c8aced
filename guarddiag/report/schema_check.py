"""Checking a value against results.json's JSON Schema (:func:`validate_json`).

Understands the subset of JSON Schema that :func:`guarddiag.report.schema.json_schema` emits.
"""

from __future__ import annotations

from collections.abc import Mapping

from guarddiag.report.schema import Schema, json_schema

_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,)}


def _has_type(value: object, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[name])


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _check(value: object, schema: Schema, root: Schema, where: str, errors: list[str]) -> None:
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        schema = root["$defs"][name]
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            trial: list[str] = []
            _check(value, option, root, where, trial)
            if not trial:
                return
        errors.append(f"{where}: {value!r:.80} matches none of the allowed shapes")
        return
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        errors.append(f"{where}: {value!r:.80} is not one of {schema['enum']}")
    if "type" in schema and not _has_type(value, schema["type"]):
        errors.append(f"{where}: expected {schema['type']}, got {type(value).__name__}")
        return
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], root, f"{where}[{i}]", errors)
    if isinstance(value, dict):
        _check_object(value, schema, root, where, errors)


def _check_object(value: dict[str, object], schema: Schema, root: Schema, where: str,
                  errors: list[str]) -> None:
    props: Schema = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            errors.append(f"{where}: missing key {key!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            _check(item, props[key], root, f"{where}.{key}", errors)
        elif extra is False:
            errors.append(f"{where}: unexpected key {key!r}")
        elif isinstance(extra, dict):
            _check(item, extra, root, f"{where}.{key}", errors)


def validate_json(value: object, schema: Schema | None = None) -> list[str]:
    """Where ``value`` breaks ``schema`` (default: results.json's), one line per problem;
    empty when it conforms. Understands the keywords :func:`json_schema` emits: ``type``,
    ``enum``, ``anyOf``, ``$ref`` into ``$defs``, ``properties``, ``required``,
    ``additionalProperties`` and ``items``."""
    root = json_schema() if schema is None else schema
    errors: list[str] = []
    _check(value, root, root, "$", errors)
    return errors
