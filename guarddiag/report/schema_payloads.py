"""The results document (results.json) as typed models: the top-level parts and every
section's payload (see :mod:`guarddiag.report.schema` for the conventions, the version history,
and the assembled :func:`~guarddiag.report.schema.results_model`).

Each model is one JSON object; a field's docstring is its description in the generated JSON
Schema. A field declared ``= absent()`` is an optional key (absent in older or narrower
reports), never null unless its type says so.
"""

from __future__ import annotations

from typing import Literal

from guarddiag.analyses.paired import PairedComparisonResult
from guarddiag.analyses.payload import Doc, Payload, Record, absent
from guarddiag.analyses.provenance import ProvenanceResult
from guarddiag.analyses.valsets import ValSetsResult

# ─── top level ─────────────────────────────────────────────────────────────────────────────────

class OptionsJson(Doc):
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


class FileRefJson(Doc):
    path: str
    sha256: str


class InputsJson(Doc):
    predictions: list[FileRefJson]
    pool: FileRefJson | None
    agreement: FileRefJson | None
    audit_summary: FileRefJson | None


class SectionEntryJson(Doc):
    """One section, in report order; ``omitted`` says why a section has no payload."""

    id: str
    title: str
    omitted: str | None


# ─── section payloads ──────────────────────────────────────────────────────────────────────────

IntervalName = Literal["wilson", "seed-range+wilson", "seed-range", "bootstrap-percentile"]
"""Which interval a number carries; defined in :mod:`guarddiag.analyses.intervals`."""


class CompetenceJson(Doc):
    """How much clear harm the reference recipe detects (the competence gate), and how well
    it ranks beside a TF-IDF baseline (reports before issue 26 lack the last three keys)."""
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
    the recipe's label policy on the same prompts; absent in older reports)."""
    caution: str | None
    ranking: list[Record] | None = absent()
    """Per size and ranking pair (same-source harmful/benign): auroc (seed mean), auroc_low,
    auroc_high (seed range), n_runs, baseline, baseline_auroc, margin, beats_baseline,
    policy_tilt (AUROC of the TF-IDF baseline of the other label policy minus the recipe
    policy's; absent in older reports), policy_moved (the tilt reaches the margin: the pair is
    shown and not counted)."""
    auroc_margin: float = absent()
    failed: list[str] = absent()
    """Measures that failed: ``CAP`` (below the floor), ``AUROC`` (not above the baseline on a
    pair that label policy does not move)."""
    policy_moved: list[str] = absent()
    """The ranking pairs label policy moves by the margin, not counted (absent in older
    reports)."""


class FirstScreenJson(Doc):
    """The first screen: what was run, the per-benchmark calls (the report's one verdict), where
    the effects are read, where this run contradicts the study, and what a reader may cite."""

    source: Literal["calls", "none"]
    """The calls analysis, or none (no policy-neutral rows: no A/B call at all)."""
    calls: list[Record]
    """One row per benchmark: benchmark, call (as shown, with "(distill only)" where only some
    routes carry it; "no call" without neutral rows), routes (each route's call), stable (yes /
    no: flips with …), effect, effect_low, effect_high (matched threshold), effect_05,
    effect_05_low, effect_05_high (at the cut-off; fractions), study (verdicts beside the study)."""
    cite: str
    """The one sentence on what a reader may cite."""
    what_was_run: str
    operating_point: str
    """Where the effects are read, with the target false-flag rate and the neutral rows; or why
    there is no call."""
    contradictions: str
    """Where this run contradicts the study, in a sentence ("" where it does not)."""


class BranchesJson(Doc):
    """Every branch of the scored runs with its roles, and the glossary."""

    branches: list[Record]
    """One row per branch: branch, group, role, route, last_policy, label_policy, teacher,
    control_of, variant_of, sizes, n_runs, train_rows (text: one count or a range)."""
    glossary: dict[str, str]
    """Term → definition."""


class SummaryJson(Doc):
    """The lists behind the plain-language summary."""

    calls: dict[str, list[str]]
    """Call word → its benchmarks, from the first screen (a route qualifier stays with its
    benchmark: "harmbench_copyright (distill only)")."""
    alpha: float
    subset: str
    mapping: str
    threshold: float
    competence: CompetenceJson | None
    """Null where no reference run was scored on a clear-harm benchmark."""
    provenance: Payload[ProvenanceResult] | None
    """Null where no run meta.json was found."""


class RunJson(Doc):
    run_id: str
    guard_kind: Literal["branch", "baseline", "outside"]
    branch: str
    size: str | None
    seed: int | None
    label_policy: str


class SeedFloorJson(Doc):
    median: float | None
    widest: float | None
    n_groups: int


class CohortJson(Doc):
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


class ScoreJson(Doc):
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


class _ScoresBase(Doc):
    scores: list[ScoreJson]
    paired: Payload[PairedComparisonResult] | None
    """Each student branch recipe vs the reference recipe of its size (primary cohort); a
    recipe's prompt decision is the majority of its seeds."""
    recipes: RecipesJson


class ScoresJson(_ScoresBase):
    copy_items: list[Record] = absent()
    """Present where harmbench_copyright is scored: COPY split by item kind (prompt-id prefix
    ``lyrics`` / ``passage``), one score row per run (primary subset and mapping; columns of
    ``scores``' long table, ``benchmark`` = ``harmbench_copyright:<kind>``)."""


class LoadJson(Doc):
    benchmarks: list[Record]
    """Per (benchmark, subset, mapping): delta, floor_median, floor_widest, widest_group,
    n_groups, n_sizes, n_branches, ratio_widest, n_prompts, seed_sd, df, p_span, q_span,
    contrast, contrast_se, p_contrast, q_contrast (the span test's statistics, no intervals),
    load_reason (why they were not computed), span_beyond_floor (the study's rule Δb > widest
    floor, a comparison), call (the first screen's: the span test makes none)."""
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


class MappingJson(Doc):
    effects: list[Record]
    """Per run, benchmark, subset: loose, strict (with intervals), delta_pp, strict_applied."""
    by_recipe: list[Record]
    paired: Payload[PairedComparisonResult] | None
    """Each run under the strict mapping vs itself under the loose one (primary subset)."""


class OutsideJson(Doc):
    rows: list[Record]
    """Guards and branch recipes on the decontaminated prompts, per mapping; every row's
    interval is ``seed-range+wilson`` (a guard is one run: its Wilson interval)."""
    paired: list[Payload[PairedComparisonResult]]
    """Per mapping: each outside guard vs the reference recipe of each size."""
    definitions: dict[str, str]
    """Per outside guard (run id), what "unsafe" means for it, as its adapter states it."""
    answers: dict[str, Record] = absent()
    """Per outside guard (run id): first, last (UTC times its answers were asked),
    fingerprint (the identity they are keyed on), version, adapter, source (function, model or
    file), model_sha256, training_data, training_rows."""
    own_decontam: list[Record] = absent()
    """Guards audited against their own training data: per guard, benchmark and prompts
    (pool-decontaminated | own-decontaminated | both), n_scored, n_unsafe, score, low, high
    (loose read-out, Wilson)."""


class _ValBase(Doc):
    overlap: list[Record]
    """Overlap of the val split with each training source (VAL itself is in ``scores``)."""


class ValJson(_ValBase):
    parts: Payload[ValSetsResult] = absent()
    """VAL on the English, multilingual, overlapping and non-overlapping val rows; absent
    where no student run scored the val split."""


class StudyJson(Doc):
    rows: list[Record]
    """quantity, unit, study, study_note, here, here_note."""
    overlap_origin: list[Record] | None
    """Per audited benchmark: n, n_exact, share_exact, n_exact_sampled, origin (recipe: set by
    the pool recipe's sampled copies | measured | unknown), sampled_sources."""
    excluded_subsets: list[str]
    """Derived (mutated) subsets left out of the study-comparable means."""
    notes: list[str]


class DisclosureJson(Doc):
    benchmarks: list[Record]
    """Per benchmark: overlap, seed floor, Δb, q_contrast, span_beyond_floor (the study's rule,
    a comparison), call and call_stable (the first screen's), why (the reason for no call)."""
    threshold: float
    mapping: str
    subset: str
    definitions: dict[str, list[str]]
    """Mapping → its unsafe classes."""
    policies: dict[str, str]
    competence_caution: str | None
    """The competence caution (as in ``summary.competence.caution``), or null."""
    provenance: Payload[ProvenanceResult] | None


class SorryRobustnessJson(Doc):
    rows: list[Record]
    n_resamples: int


class SorryBalanceJson(Doc):
    benchmarks: list[Record]


class _ContaminationBase(Doc):
    benchmarks: list[Record]
    """Per benchmark: n, n_exact, share_exact, n_near, share_near, n_kept, sha256."""
    pool_rows: int | None
    near_threshold: float | None
    near_dup: bool
    short_words: int | None
    """Benchmark prompts with fewer distinct words need ``short_threshold`` (None: an audit
    from before this rule)."""
    short_threshold: float | None
    unavailable: dict[str, str]


class ContaminationJson(_ContaminationBase):
    templates: bool = absent()
    """Present (true) when the audit compared template forms; ``benchmarks`` records then
    carry n_template and share_template (same sentence, other titles; no exact overlap)."""
    template_definition: str | None = absent()
    """The audit's description of a template overlap (summary.json)."""
    containment: bool = absent()
    """Present (true) when the audit looked for prompts inside longer pool rows;
    ``benchmarks`` records then carry n_contained and share_contained (most of the prompt's
    three-word runs in one row; no exact overlap)."""
    containment_definition: str | None = absent()
    """The audit's description of a contained overlap (summary.json)."""
    flag_sources: list[Record] = absent()
    """Present where the predictions record it: per scored benchmark, the audit its
    survives_decontam flags came from (benchmark, audit_dir, audit_id, pool_sha256, pool_rows,
    compared, drops, n, n_kept, via: the base subset a derived subset inherits from)."""


class RecipesJson(Doc):
    """Table 1 (primary subset and mapping): one row per recipe or guard."""

    interval: Literal["seed-range+wilson"]
    """The one interval of every cell: lowest to highest Wilson bound of the row's runs (one
    run: its Wilson interval)."""
    subset: str
    mapping: str
    bold: list[str]
    """Benchmarks whose column marks its best value (called capability on every route)."""
    rows: list[Record]
    """entity, guard_kind, size, branch, label_policy, benchmark, metric_alias, …, score, low,
    high, interval, n_runs, seed_low, seed_high."""


class CallsJson(Doc):
    """Route-matched, operating-point-matched calls per benchmark and route
    (:mod:`guarddiag.analyses.calls`)."""

    headline: list[Record]
    """Per benchmark: benchmark, call, carried_by, route_calls, stable, flips, effect with its
    interval (matched), effect_05 with its interval (at the cut-off), reason."""
    rows: list[Record]
    """Per (benchmark, mapping, decontam, threshold): call, carried_by, route_calls, reason,
    effect with its interval, se, df, p_effect, p_equivalence, p_route, mde, n_prompts,
    n_pairs, routes_agree."""
    routes: list[Record]
    """Each route's own contrast and call per cohort: route, pairs, left_out, call, reason,
    effect, effect_low, effect_high, p_effect, p_equivalence, mde."""
    placement: list[Record]
    """Outside guards on the B-to-A axis at the matched threshold: guard, benchmark, call,
    stable, score, t_matched, b_end, a_end, position (with its interval), where, axis_ends, n,
    draws."""
    unplaced: list[Record]
    """Outside guards placed nowhere: guard, why."""
    thresholds: list[Record]
    """Per run and mapping: n_neutral, ffr_05, target, t_matched, ffr_matched, n_neutral_lang,
    ffr_matched_lang, ffr_matched_other (the neutral rows in the benchmarks' language and the
    share of them and of the others flagged at t), degenerate."""
    study: list[Record]
    """Per benchmark the study reports on: its figures and this run's, verdict (matched) and
    verdict_05."""
    counts: dict[str, int]
    mapping: str
    alpha: float
    margin: float
    neutral_rows: str
    notes: list[str]
