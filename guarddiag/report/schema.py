"""The results.json schema (version 4) as typed code, and the JSON Schema generated from it.

:class:`ResultsJson` is the whole file; each section's payload under ``results[<section id>]``
has its own TypedDict (omitted sections are absent; sections added with
:func:`~guarddiag.report.sections.order.with_sections` bring payloads of their own, which the
schema allows but does not describe). :func:`json_schema` turns these annotations into a JSON
Schema (draft 2020-12), checked in as ``results.schema.json`` beside this module
(:func:`write_json_schema` regenerates it); :func:`guarddiag.report.schema_check.validate_json`
checks a value against the subset of JSON Schema that :func:`json_schema` emits.

Conventions. Fractions are in [0, 1] (shares of prompts, accuracies, spans and floors);
``*_pp`` fields are percentage points. Non-finite numbers are written as null; an exact
probability is ``{"value": float, "exact": "a/b"}``. Table records (:data:`Record`) are one row
of the analysis table named in the field's comment, as ``{column: value}``; their columns are
those of the analysis result's ``to_frame()``. Two score records are comparable only when their
``cohort`` objects are equal apart from ``label_policy`` (the run's property); tables never put
different cohorts in one column.

Changes in version 3
--------------------
- ``summary.provenance`` and ``disclosure.provenance`` (:class:`ProvenanceJson`): the branches'
  sizes, parameter counts, checkpoint (random init or named), training rows, read from each
  run's meta.json, and ``demo`` (a demo size: the report opens with a do-not-cite banner).
- ``scores.recipes`` (:class:`RecipesJson`): Table 1's rows, every cell with one interval,
  ``seed-range+wilson`` (a single run's hull is its Wilson interval); ``bold`` lists the
  capability-load benchmarks, the only columns that mark a best value. ``outside.rows`` and
  ``summary.competence.rows`` name that same interval on every row (was ``wilson`` on
  single-run rows: the numbers are unchanged).
- New section ``threshold_free`` (:class:`ThresholdFreeJson`): F1 at the threshold, AUPRC and
  over-refusal at 95 % capture per run on XSTest, JailbreakBench, WildGuardTest and OR-Bench
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
  ``mapping.paired`` (each run strict vs loose) — :class:`PairedJson`: exact McNemar p per
  comparison and its Holm-adjusted value across the family, ``significant`` at ``alpha``.
- ``study``: new ``overlap_origin`` (per audited benchmark: is its exact overlap set by the pool
  recipe's sampled copies or measured), ``excluded_subsets`` (derived subsets left out of the
  study-comparable means) and ``notes``; the overlap rows' ``here_note`` states the origin.
- Tie-breaks: ``load.by_size`` ``min_branch``/``max_branch`` and the SORRY-Bench
  policy-sensitive ``min_branch``/``max_branch`` name, among tied branches, the first in the
  specs' order (reference, E1…E10) — they were order-dependent.

Changes in version 4
--------------------
- Sensitivity variants (branch specs with ``variant_of``, e.g. ``E6-a05``) are taken out of
  every analysis but the new ``distill`` section (:class:`DistillJson`): they appear in no
  scores, load, rank, correlation, paired or provenance record.
- ``correlation``'s VAL and ``recipes[*].val`` are the primary VAL, the English val rows (were
  all languages); ``val`` gains ``parts`` (:class:`ValPartsJson`).
- ``contamination.containment`` / ``containment_definition`` (only when the audit looked for
  prompts inside longer pool rows) and per-benchmark n_contained, share_contained.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypedDict, Union

from guarddiag.report.schema_payloads import (
    ContaminationJson,
    DistillJson,
    ProvenanceJson,
    RecipesJson,
    ThresholdFreeJson,
    ValPartsJson,
)

SCHEMA_VERSION = 4

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
    alpha: float
    """Level of the calibrated load test (policy where the contrast's BH q < alpha)."""
    competence_floor: float
    """Mean reference CAP on the clear-harm benchmarks below which the report cautions."""
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

IntervalName = Literal["wilson", "seed-range+wilson", "seed-range", "bootstrap-percentile"]
"""Which interval a number carries; defined in :mod:`guarddiag.analyses.intervals`."""


class _CompetenceBase(TypedDict):
    branch: str
    subset: str
    mapping: str
    floor: float
    benchmarks: list[str]
    """Clear-harm study benchmarks scored (study, kind harmful, not copyright); ``missing``:
    those not scored; ``excluded``: study harmful ones left out → why."""
    missing: list[str]
    excluded: dict[str, str]
    below_floor: bool
    lowest_mean: float | None
    """Lowest per-size mean CAP (a fraction; no interval)."""
    sizes: list[Record]
    """Per size: n_benchmarks, mean_cap, seed_low, seed_high (interval ``seed-range`` of the
    per-seed means; null for one seed), interval, n_runs, below_floor."""
    rows: list[Record]
    """Per size and benchmark: n_scored, score, low, high, interval (``seed-range+wilson``;
    with one seed, that run's Wilson interval), n_runs, baseline_score (the TF-IDF baseline of
    the recipe's label policy on the same prompts)."""
    caution: str | None


class CompetenceJson(_CompetenceBase, total=False):
    """How much clear harm the reference recipe detects (the competence gate), and how well
    it ranks beside a TF-IDF baseline (reports before issue 26 lack the last three keys)."""

    ranking: list[Record] | None
    """Per size and ranking pair (same-source harmful/benign): auroc (seed mean), auroc_low,
    auroc_high (seed range), n_runs, baseline, baseline_auroc, margin, beats_baseline."""
    auroc_margin: float
    failed: list[str]
    """Measures that failed: ``CAP`` (below the floor), ``AUROC`` (not above the baseline)."""


class SummaryJson(TypedDict):
    """The lists behind the plain-language summary."""

    policy_load: list[str]
    capability_load: list[str]
    route_sensitive: list[str]
    """Span beyond seed noise, A-last vs B-last contrast not significant."""
    uninformative: list[str]
    """Every run scores the same."""
    undetermined: list[str]
    alpha: float
    subset: str
    mapping: str
    threshold: float
    competence: CompetenceJson | None
    """Null where no reference run was scored on a clear-harm benchmark."""
    provenance: ProvenanceJson | None
    """Null where no run meta.json was found."""


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
    interval: IntervalName
    """``wilson``: one run's rate, n_positive of n_scored."""
    confidence: float
    n_resamples: int
    """B of the prompt bootstrap behind differences and spans, not this interval."""
    n: int
    n_failed: int
    n_scored: int
    n_positive: int


class PairedJson(TypedDict):
    """One family of paired comparisons (one table of the report), Holm-corrected together."""

    family: str
    """``recipes`` (Table 1), ``outside:<mapping>`` (Table 2) or ``mapping``."""
    description: str
    test: str
    alpha: float
    """Family-wise level: a comparison is significant where its Holm-adjusted p < alpha."""
    n_comparisons: int
    n_significant: int
    comparisons: list[Record]
    """family, benchmark, metric_alias, subset, mapping, size, first, second, n, n_first_only
    (b), n_second_only (c), share_first, share_second, delta (= share_first − share_second, a
    fraction), p_value (exact McNemar, two-sided), p_holm, significant."""


class _ScoresBase(TypedDict):
    scores: list[ScoreJson]
    paired: PairedJson | None
    """Each student branch recipe vs the reference recipe of its size (primary cohort); a
    recipe's prompt decision is the majority of its seeds."""
    recipes: RecipesJson


class ScoresJson(_ScoresBase, total=False):
    copy_items: list[Record]
    """Present where harmbench_copyright is scored: COPY split by item kind (prompt-id prefix
    ``lyrics`` / ``passage``), one score row per run (primary subset and mapping; columns of
    ``scores``' long table, ``benchmark`` = ``harmbench_copyright:<kind>``)."""


class LoadJson(TypedDict):
    benchmarks: list[Record]
    """Per (benchmark, subset, mapping): delta, floor_median, floor_widest, widest_group,
    n_groups, n_sizes, n_branches, load_study (the study's rule Δb > widest floor: policy |
    capability | undetermined), ratio_widest, n_prompts, seed_sd, df, p_span, q_span, contrast,
    contrast_se, p_contrast, q_contrast (tests, no intervals), load (the calibrated call:
    policy | route-sensitive | capability | uninformative | undetermined), load_reason."""
    by_size: list[Record]
    seed_groups: list[Record]
    min_seeds: int
    subset: str
    mapping: str
    alpha: float
    """Level of the call (BH q-values below it are significant)."""
    a_last: list[str]
    """The A-last group of the policy contrast; every other student branch is B-last."""
    n_draws: int
    """Monte-Carlo draws of the span's seed-noise null."""
    min_prompts: int
    """Cohorts with fewer prompts are undetermined."""


class ExactJson(TypedDict):
    """A probability, as a float and as the exact fraction ``a/b``."""

    value: float
    exact: str


class TieBlockJson(TypedDict):
    score: float
    branches: list[str]
    n_in_group: int


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
    p_tie_aware: ExactJson
    """= ``p_value``, named beside the closed form (exact only when no tie crosses the group)."""
    n_tied: int
    tie_blocks: list[TieBlockJson]
    tie_straddles_group: bool
    """A tie holds branches in and out of the group: the closed form understates p."""
    extreme_beside_tie: bool
    tie_note: str


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
    paired: PairedJson | None
    """Each run under the strict mapping vs itself under the loose one (primary subset)."""


class OutsideJson(TypedDict):
    rows: list[Record]
    """Guards and branch recipes on the decontaminated prompts, per mapping; every row's
    interval is ``seed-range+wilson`` (a guard is one run: its Wilson interval)."""
    paired: list[PairedJson]
    """Per mapping: each outside guard vs the reference recipe of each size."""
    definitions: dict[str, str]
    """Per outside guard (run id), what "unsafe" means for it, as its adapter states it."""


class SpearmanJson(TypedDict):
    rho: float | None
    p_value: float | None
    """Two-sided (scipy.stats.spearmanr); no interval."""
    n: int
    """Recipes (one point per (size, branch), seed means)."""
    benchmarks: list[str]
    significant: bool | None


class SpearmanGroupJson(SpearmanJson):
    load: Literal["policy", "capability"]
    kind: Literal["harmful", "benign"]


class CorrelationJson(TypedDict):
    policy: SpearmanJson
    """Policy-load and capability-load harmful (CAP) sets (beside the study's +0.74, +0.34)."""
    capability: SpearmanJson
    groups: list[SpearmanGroupJson]
    unit: Literal["recipe"]
    alpha: float
    excluded: list[str]
    """Scored benchmarks not among the study's 15 (extra or mutated subsets), left out."""
    recipes: list[Record]
    """size, branch, n_seeds, val, policy_harmful, policy_benign, capability_harmful,
    capability_benign (seed means; no interval)."""
    subset: str
    mapping: str


class _ValBase(TypedDict):
    overlap: list[Record]
    """Overlap of the val split with each training source (VAL itself is in ``scores``)."""


class ValJson(_ValBase, total=False):
    parts: ValPartsJson
    """VAL on the English, multilingual, overlapping and non-overlapping val rows; absent
    where no student run scored the val split."""


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
    overlap_origin: list[Record] | None
    """Per audited benchmark: n, n_exact, share_exact, n_exact_sampled, origin (recipe: set by
    the pool recipe's sampled copies | measured | unknown), sampled_sources."""
    excluded_subsets: list[str]
    """Derived (mutated) subsets left out of the study-comparable means."""
    notes: list[str]


class DisclosureJson(TypedDict):
    benchmarks: list[Record]
    """Per benchmark: overlap, seed floor, Δb, q_contrast, load (the calibrated call),
    load_study (the study's rule)."""
    threshold: float
    mapping: str
    subset: str
    definitions: dict[str, list[str]]
    """Mapping → its unsafe classes."""
    policies: dict[str, str]
    competence_caution: str | None
    """The competence caution (as in ``summary.competence.caution``), or null."""
    provenance: ProvenanceJson | None


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
    distill: DistillJson
    mapping: MappingJson
    outside: OutsideJson
    threshold_free: ThresholdFreeJson
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

    schema_version: Literal[4]
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
