"""The results.json schema (version 4): the typed document, and the JSON Schema generated from it.

:func:`results_model` is the whole file as a pydantic model: the top-level parts and, under
``results``, each registered section's payload model — derived from the analysis result the
section writes (:func:`guarddiag.analyses.payload.payload_model`), or, for a payload that
gathers several results, declared in :mod:`guarddiag.report.schema_payloads`; the section
registry, :mod:`guarddiag.report.sections.registry`, says which goes under which id. Omitted
sections are absent; a section registered without a payload type, or added for one report with
:func:`~guarddiag.report.sections.order.with_sections`, brings a payload the schema allows but
does not describe. :func:`json_schema` is pydantic's JSON Schema (draft 2020-12) of that model,
checked in as ``results.schema.json`` beside this module (:func:`write_json_schema` regenerates
it); :func:`validate_results` checks a results.json value against the models, one line per
problem.

Conventions. Fractions are in [0, 1] (shares of prompts, accuracies, spans and floors);
``*_pp`` fields are percentage points. Non-finite numbers are written as null; an exact
probability is ``{"value": float, "exact": "a/b"}``. Table records (:data:`Record`) are one row
of the analysis table named in the field's comment, as ``{column: value}``; their columns are
those of the analysis result's ``to_frame()``. Two score records are comparable only when their
``cohort`` objects are equal apart from ``label_policy`` (the run's property); tables never put
different cohorts in one column.

Changes in version 3
--------------------
- ``summary.provenance`` and ``disclosure.provenance`` (the payload of
  :class:`~guarddiag.analyses.provenance.ProvenanceResult`): the branches' sizes, parameter
  counts, checkpoint (random init or named), training rows, read from each run's meta.json, and
  ``demo`` (a demo size: the report opens with a do-not-cite banner).
- ``scores.recipes`` (:class:`RecipesJson`): Table 1's rows, every cell with one interval,
  ``seed-range+wilson`` (a single run's hull is its Wilson interval); ``bold`` lists the
  capability-load benchmarks, the only columns that mark a best value. ``outside.rows`` and
  ``summary.competence.rows`` name that same interval on every row (was ``wilson`` on
  single-run rows: the numbers are unchanged).
- New section ``threshold_free`` (the payload of
  :class:`~guarddiag.analyses.threshold_free.ThresholdFreeResult`): F1 at the threshold, AUPRC
  and over-refusal at 95 % capture per run on XSTest, JailbreakBench, WildGuardTest and OR-Bench
  harmful/benign pairs, with bootstrap-percentile intervals.
- ``contamination.short_words`` / ``short_threshold``: the stricter near-duplicate Jaccard for
  short prompts; near examples never repeat an exact one, and a Jaccard-1.0 near example
  carries ``note`` "same words, other order".
- ``contamination.templates`` / ``template_definition`` (only when the audit compared
  template forms) and per-benchmark n_template, share_template; ``scores.copy_items`` (where
  harmbench_copyright is scored): COPY per item kind, lyrics and passage.
- ``outside.definitions``: each outside guard's operational definition (run id → sentence).
- ``sorry_balance.benchmarks`` records: new ``category_note`` (why a benchmark is not
  assessable: no category values, or categories present but not mapped to the pillars).

Changes in version 2
--------------------
- ``load.benchmarks`` records: ``load`` is now the calibrated call (``policy`` |
  ``route-sensitive`` | ``capability`` | ``uninformative`` | ``undetermined``; see
  :mod:`guarddiag.analyses.loadtest`); the study's rule (Δb > widest floor) moved to
  ``load_study`` (``policy`` | ``capability`` | ``undetermined``, the version-1 ``load``). New
  columns: ratio_widest (Δb / widest floor), n_prompts, seed_sd (pooled within-recipe SD, a
  fraction), df, p_span, q_span, contrast (A-last − B-last mean, a fraction), contrast_se,
  p_contrast, q_contrast (Benjamini–Hochberg across the benchmarks of one subset and mapping),
  load_reason (why a cohort was not tested, else null). New ``load`` fields: alpha, a_last,
  n_draws (Monte-Carlo draws of the span's null), min_prompts.
- ``summary``: new lists ``route_sensitive`` and ``uninformative`` and the level ``alpha``; the
  lists follow the calibrated call.
- ``disclosure.benchmarks`` records: ``load`` is the calibrated call; new q_contrast and
  load_study.
- ``options``: new ``alpha`` (level of the calibrated load test).
- Scores' ``ci_low``/``ci_high`` are Wilson intervals (were bootstrap percentiles, [0, 0] at 0);
  new ``interval`` (:data:`IntervalName`) on scores, outside and competence rows (a seed mean:
  ``seed-range+wilson``, was ``seed range``). ``summary.competence``, ``disclosure.
  competence_caution``, ``options.competence_floor``: the competence gate. ``correlation``: one
  point per recipe, study benchmarks only, ``recipes`` (was ``runs``), ``groups`` (load × kind),
  ``unit``, ``alpha``, ``excluded``, ``significant``. ``rank.tests[*]``: ``p_tie_aware``,
  ``n_tied``, ``tie_blocks``, ``tie_straddles_group``, ``extreme_beside_tie``, ``tie_note``.
- Paired tests (issue 12): ``scores.paired`` (each student branch recipe vs the reference of
  its size), ``outside.paired`` (per mapping, each outside guard vs the reference recipe) and
  ``mapping.paired`` (each run strict vs loose) — the payload of
  :class:`~guarddiag.analyses.paired.PairedComparisonResult`: exact McNemar p per comparison
  and its Holm-adjusted value across the family, ``significant`` at ``alpha``.
- ``study``: new ``overlap_origin`` (per audited benchmark: is its exact overlap set by the pool
  recipe's sampled copies or measured), ``excluded_subsets`` (derived subsets left out of the
  study-comparable means) and ``notes``; the overlap rows' ``here_note`` states the origin.
- Tie-breaks: ``load.by_size`` ``min_branch``/``max_branch`` and the SORRY-Bench
  policy-sensitive ``min_branch``/``max_branch`` name, among tied branches, the first in the
  specs' order (reference, E1…E10) — they were order-dependent.

Changes in version 4
--------------------
- Sensitivity variants (branch specs with ``variant_of``, e.g. ``E6-a05``) are taken out of
  every analysis but the new ``distill`` section (the payload of
  :class:`~guarddiag.analyses.variants.DistillSensitivityResult`): they appear in no scores,
  load, rank, correlation, paired or provenance record.
- ``correlation``'s VAL and ``recipes[*].val`` are the primary VAL, the English val rows (were
  all languages); ``val`` gains ``parts`` (the payload of
  :class:`~guarddiag.analyses.valsets.ValSetsResult`).
- ``contamination.containment`` / ``containment_definition`` (only when the audit looked for
  prompts inside longer pool rows) and per-benchmark n_contained, share_contained.
- ``outside.answers``: per outside guard, when and from which identity its answers were
  computed (run id → first, last, fingerprint, version, adapter, source, model_sha256,
  training_data, training_rows); ``outside.own_decontam``: guards on the prompts that survive
  the audit of their own training data, beside the pool-decontaminated ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, ValidationError, create_model

from guarddiag.analyses.payload import Doc
from guarddiag.report.schema_payloads import InputsJson, OptionsJson, SectionEntryJson

# The registry as the order module leaves it: every built-in section registered.
from guarddiag.report.sections.order import SECTIONS
from guarddiag.report.sections.registry import SectionRegistry

SchemaVersion = Literal[4]
SCHEMA_VERSION: int = get_args(SchemaVersion)[0]
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
Schema = dict[str, Any]


class OpenDoc(Doc):
    """An object whose unknown keys are allowed (results of undescribed sections)."""

    model_config = ConfigDict(extra="allow")


def results_model(registry: SectionRegistry = SECTIONS) -> type[Doc]:
    """The model of the whole results.json: the fixed top-level parts and, under
    ``results``, every registered section's payload model (each key optional: an omitted
    section is absent)."""
    payloads: dict[str, Any] = {
        sid: (model, Field(default=None, description=f"Payload of section {sid!r}; absent "
                                                     f"when the section is omitted."))
        for sid, model in registry.payloads().items()}
    section_results = create_model(
        "SectionResultsJson", __base__=OpenDoc,
        __doc__="Payload per section id; omitted sections are absent.", **payloads)
    return create_model(
        "ResultsJson", __base__=Doc, __doc__="The whole of results.json.",
        schema_version=(SchemaVersion, ...),
        title=(str, ...), options=(OptionsJson, ...), inputs=(InputsJson, ...),
        notes=(list[str], Field(description="Inputs that were absent and what that omits.")),
        sections=(list[SectionEntryJson], ...), results=(section_results, ...))


def validate_results(value: Any, registry: SectionRegistry = SECTIONS) -> list[str]:
    """Where ``value`` breaks results.json's models, one line per problem (``$.a.b.0.c: …``);
    empty when it conforms. Strict: a string is not a number, an integer not a boolean."""
    try:
        results_model(registry).model_validate(value, strict=True)
    except ValidationError as exc:
        return [f"$.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                for err in exc.errors()]
    return []


def json_schema(registry: SectionRegistry = SECTIONS) -> Schema:
    """The JSON Schema of results.json, generated from :func:`results_model`."""
    schema: Schema = results_model(registry).model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            **schema, "title": f"guarddiag report results.json, schema_version {SCHEMA_VERSION}"}


def json_schema_text() -> str:
    """:func:`json_schema` as the text of ``results.schema.json``."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def write_json_schema(path: Path = SCHEMA_PATH) -> Path:
    """Regenerate the checked-in ``results.schema.json``."""
    path.write_text(json_schema_text(), encoding="utf-8")
    return path
