"""The results.json schema (version 1) as typed code, and the JSON Schema generated from it.

:class:`ResultsJson` is the whole file; each section's payload under ``results[<section id>]``
has its own TypedDict (omitted sections are absent; sections added with
:func:`~guarddiag.report.sections.order.with_sections` bring payloads of their own, which the
schema allows but does not describe). :func:`json_schema` turns these annotations into a JSON
Schema (draft 2020-12), checked in as ``results.schema.json`` beside this module
(:func:`write_json_schema` regenerates it); :func:`validate_json` checks a value against the
subset of JSON Schema that :func:`json_schema` emits.

Conventions. Fractions are in [0, 1] (shares of prompts, accuracies, spans and floors);
``*_pp`` fields are percentage points. Non-finite numbers are written as null; an exact
probability is ``{"value": float, "exact": "a/b"}``. Table records (:data:`Record`) are one row
of the analysis table named in the field's comment, as ``{column: value}``; their columns are
those of the analysis result's ``to_frame()``. Two score records are comparable only when their
``cohort`` objects are equal apart from ``label_policy`` (the run's property); tables never put
different cohorts in one column.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict, Union

SCHEMA_VERSION = 1

JsonScalar = str | int | float | bool | None
Record = dict[str, JsonScalar]
"""One table row: column → value."""
JsonValue = Any
"""Any JSON value (files written by other stages, e.g. agreement.json)."""


# ─── top level ─────────────────────────────────────────────────────────────────────────────────

class OptionsJson(TypedDict):
    mapping: str
    threshold: float
    n_resamples: int
    confidence: float
    seed: int
    primary_subset: str
    min_seeds: int
    rank_group: list[str]
    rank_benchmark: str
    rank_tail: Literal["top", "bottom", "either"]


class FileRefJson(TypedDict):
    path: str
    sha256: str


class InputsJson(TypedDict):
    predictions: list[FileRefJson]
    pool: FileRefJson | None
    agreement: FileRefJson | None
    audit_summary: FileRefJson | None


class SectionEntryJson(TypedDict):
    """One section, in report order; ``omitted`` says why a section has no payload."""

    id: str
    title: str
    omitted: str | None


# ─── section payloads ──────────────────────────────────────────────────────────────────────────

class SummaryJson(TypedDict):
    """The lists behind the plain-language summary."""

    policy_load: list[str]
    capability_load: list[str]
    undetermined: list[str]
    subset: str
    mapping: str
    threshold: float


class ContaminationJson(TypedDict):
    benchmarks: list[Record]
    """Per benchmark: n, n_exact, share_exact, n_near, share_near, n_kept, sha256."""
    pool_rows: int | None
    near_threshold: float | None
    near_dup: bool
    unavailable: dict[str, str]


class RunJson(TypedDict):
    run_id: str
    guard_kind: Literal["branch", "baseline", "outside"]
    branch: str
    size: str | None
    seed: int | None
    label_policy: str


class SeedFloorJson(TypedDict):
    median: float | None
    widest: float | None
    n_groups: int


class CohortJson(TypedDict):
    benchmark: str
    benchmark_sha256: str | None
    subset: Literal["full", "decontaminated"]
    mapping: str | None
    """Requested binary mapping; null for VAL."""
    mapping_applied: str | None
    """``mapping``, ``native`` or ``mixed``; null for VAL."""
    threshold: float | None
    readout: Literal["class_probs", "p_unsafe", "pred_class"] | None
    prompt_set: str
    """sha256[:16] of the sorted prompt ids scored."""
    label_policy: str
    lang: str
    seed_floor: SeedFloorJson | None


class ScoreJson(TypedDict):
    """One score: per (run, benchmark, subset, language, mapping)."""

    run: RunJson
    cohort: CohortJson
    metric: Literal["CAP", "OVER-REF", "VAL"]
    metric_alias: str
    """The study's name (COPY, OR-H, …) or the metric."""
    value: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    n_resamples: int
    n: int
    n_failed: int
    n_scored: int
    n_positive: int


class ScoresJson(TypedDict):
    scores: list[ScoreJson]


class LoadJson(TypedDict):
    benchmarks: list[Record]
    """Per (benchmark, subset, mapping): delta, floor_median, floor_widest, widest_group,
    n_groups, n_sizes, n_branches, load (policy | capability | undetermined)."""
    by_size: list[Record]
    seed_groups: list[Record]
    min_seeds: int
    subset: str
    mapping: str


class ExactJson(TypedDict):
    """A probability, as a float and as the exact fraction ``a/b``."""

    value: float
    exact: str


class RankTestJson(TypedDict):
    size: str
    group: list[str]
    branches: list[str]
    """High → low."""
    scores: list[float | None]
    ranks: list[float]
    """Mid-ranks."""
    n: int
    k: int
    rank_sum: float
    max_rank_sum: float
    group_holds_top: bool
    group_holds_bottom: bool
    ties: bool
    p_closed_form: ExactJson
    p_either_closed_form: ExactJson
    p_upper: ExactJson
    p_lower: ExactJson
    p_two_sided: ExactJson
    tail: Literal["top", "bottom", "either"]
    p_value: ExactJson
    """Of the declared tail."""


class RankJson(TypedDict):
    benchmark: str
    metric: str
    subset: str
    mapping: str
    tail: Literal["top", "bottom", "either"]
    tests: list[RankTestJson]


class MappingJson(TypedDict):
    effects: list[Record]
    """Per run, benchmark, subset: loose, strict (with intervals), delta_pp, strict_applied."""
    by_recipe: list[Record]


class OutsideJson(TypedDict):
    rows: list[Record]
    """Guards (bootstrap interval) and branch recipes (seed range) on the decontaminated
    prompts, per mapping."""


class SpearmanJson(TypedDict):
    rho: float | None
    p_value: float | None
    n: int
    benchmarks: list[str]


class CorrelationJson(TypedDict):
    policy: SpearmanJson
    capability: SpearmanJson
    runs: list[Record]
    """run_id, val, policy_mean, capability_mean."""
    subset: str
    mapping: str


class ValJson(TypedDict):
    overlap: list[Record]
    """Overlap of the val split with each training source (VAL itself is in ``scores``)."""


class PoolJson(TypedDict):
    agreement: list[Record]
    class_counts: list[Record]
    confusion: list[Record]
    n_rows: int
    recorded: JsonValue
    """agreement.json as written, or null."""


class StudyJson(TypedDict):
    rows: list[Record]
    """quantity, unit, study, study_note, here, here_note."""


class DisclosureJson(TypedDict):
    benchmarks: list[Record]
    """Per benchmark: overlap, seed floor, Δb, load."""
    threshold: float
    mapping: str
    subset: str
    definitions: dict[str, list[str]]
    """Mapping → its unsafe classes."""
    policies: dict[str, str]


class SorryCategoriesJson(TypedDict):
    domains: list[Record]
    """entity, domain, capture, n_runs."""
    mapping: str
    threshold: float


class SorryRobustnessJson(TypedDict):
    rows: list[Record]
    n_resamples: int


class SorryBalanceJson(TypedDict):
    benchmarks: list[Record]


class SectionResultsJson(TypedDict, total=False):
    """Payload per section id; omitted sections are absent."""

    summary: SummaryJson
    contamination: ContaminationJson
    scores: ScoresJson
    load: LoadJson
    rank: RankJson
    mapping: MappingJson
    outside: OutsideJson
    correlation: CorrelationJson
    val: ValJson
    pool: PoolJson
    study: StudyJson
    disclosure: DisclosureJson
    sorry_categories: SorryCategoriesJson
    sorry_robustness: SorryRobustnessJson
    sorry_balance: SorryBalanceJson


class ResultsJson(TypedDict):
    """The whole of results.json."""

    schema_version: Literal[1]
    title: str
    options: OptionsJson
    inputs: InputsJson
    notes: list[str]
    """Inputs that were absent and what that omits."""
    sections: list[SectionEntryJson]
    results: SectionResultsJson


OPEN_OBJECTS: frozenset[str] = frozenset({"SectionResultsJson"})
"""TypedDicts whose JSON objects may hold keys beyond the annotated ones (extra sections)."""
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")


# ─── JSON Schema ───────────────────────────────────────────────────────────────────────────────

Schema = dict[str, Any]


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _typeddict_schema(tp: type, defs: dict[str, Schema]) -> Schema:
    name = tp.__name__
    if name not in defs:
        defs[name] = {}  # placeholder: a TypedDict may refer to itself
        hints = typing.get_type_hints(tp)
        required: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        body: Schema = {"type": "object",
                        "properties": {k: _schema_of(v, defs) for k, v in hints.items()},
                        "required": [k for k in hints if k in required],
                        "additionalProperties": name in OPEN_OBJECTS}
        if tp.__doc__:
            body["description"] = " ".join(tp.__doc__.split())
        defs[name] = body
    return {"$ref": f"#/$defs/{name}"}


def _schema_of(tp: Any, defs: dict[str, Schema]) -> Schema:
    """The JSON Schema of one annotation."""
    if tp is Any:
        return {}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in simple:
        return {"type": simple[tp]}
    if _is_typeddict(tp):
        return _typeddict_schema(tp, defs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema_of(a, defs) for a in args]}
    if origin is list:
        return {"type": "array", "items": _schema_of(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1], defs)}
    raise TypeError(f"results schema: no JSON Schema for the annotation {tp!r}")


def json_schema() -> Schema:
    """The JSON Schema of results.json, generated from :class:`ResultsJson`."""
    defs: dict[str, Schema] = {}
    root = _typeddict_schema(ResultsJson, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"guarddiag report results.json, schema_version {SCHEMA_VERSION}",
            **root,
            "$defs": dict(sorted(defs.items()))}


def json_schema_text() -> str:
    """:func:`json_schema` as the text of ``results.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def write_json_schema(path: Path = SCHEMA_PATH) -> Path:
    """Regenerate the checked-in ``results.schema.json``."""
    path.write_text(json_schema_text(), encoding="utf-8")
    return path


# ─── validation (the subset of JSON Schema emitted above) ──────────────────────────────────────

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
