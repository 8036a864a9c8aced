"""Section payloads: the contamination section's, and those added in results.json versions 3
and 4 (see :mod:`guarddiag.report.schema`, whose :class:`~guarddiag.report.schema.ResultsJson`
refers to them)."""

from __future__ import annotations

from typing import Literal, TypedDict

Record = dict[str, str | int | float | bool | None]
"""One table row: column → value (as :data:`guarddiag.report.schema.Record`)."""


class _ContaminationBase(TypedDict):
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


class ContaminationJson(_ContaminationBase, total=False):
    templates: bool
    """Present (true) when the audit compared template forms; ``benchmarks`` records then
    carry n_template and share_template (same sentence, other titles; no exact overlap)."""
    template_definition: str | None
    """The audit's description of a template overlap (summary.json)."""
    containment: bool
    """Present (true) when the audit looked for prompts inside longer pool rows;
    ``benchmarks`` records then carry n_contained and share_contained (most of the prompt's
    three-word runs in one row; no exact overlap)."""
    containment_definition: str | None
    """The audit's description of a contained overlap (summary.json)."""
    flag_sources: list[Record]
    """Present where the predictions record it: per scored benchmark, the audit its
    survives_decontam flags came from (benchmark, audit_dir, audit_id, pool_sha256, pool_rows,
    compared, drops, n, n_kept, via: the base subset a derived subset inherits from)."""


class ProvenanceJson(TypedDict):
    """What the branches are, from each scored run's meta.json."""

    demo: bool
    """Some branch size is a demo size (a CPU size of the size registry, random init): the
    report opens with a do-not-cite banner."""
    sizes: list[Record]
    """Per (guard_kind, size): n_runs, branches, n_params_min, n_params_max, checkpoint
    ("random init" or checkpoint names), train_rows_min, train_rows_max, demo_size."""
    sentence: str


class RecipesJson(TypedDict):
    """Table 1 (primary subset and mapping): one row per recipe or guard."""

    interval: Literal["seed-range+wilson"]
    """The one interval of every cell: lowest to highest Wilson bound of the row's runs (one
    run: its Wilson interval)."""
    subset: str
    mapping: str
    bold: list[str]
    """Benchmarks whose column marks its best value (capability-load calls only)."""
    rows: list[Record]
    """entity, guard_kind, size, branch, label_policy, benchmark, metric_alias, …, score, low,
    high, interval, n_runs, seed_low, seed_high."""


class ThresholdFreeJson(TypedDict):
    """F1, AUPRC and over-refusal at 95 % capture per run on the paired harmful/benign sets
    (:mod:`guarddiag.analyses.threshold_free`)."""

    rows: list[Record]
    """Per (pair, run): pair, harmful, benign, run_id, guard_kind, branch, size, seed,
    label_policy, n_harmful, n_benign, base_rate, f1, auprc, over_refusal_at_capture (each a
    fraction with ``_low``/``_high``), threshold_at_capture, interval."""
    pairs: list[list[str]]
    """[pair, harmful benchmark, benign benchmark]."""
    missing: list[str]
    threshold: float
    capture: float
    subset: str
    mapping: str
    interval: Literal["bootstrap-percentile"]
    n_resamples: int
    confidence: float
    seed: int


class ValPartsJson(TypedDict):
    rows: list[Record]
    """val_set (en | multilingual | multilingual_overlap | multilingual_no_overlap), n_rows."""
    runs: list[Record]
    """Per student run and part: run_id, size, branch, seed, label_policy, val_set, n_scored,
    n_correct, score, ci_low, ci_high (Wilson)."""
    recipes: list[Record]
    """Per recipe: size, branch, n_seeds and the seed-mean VAL of each part (no interval)."""
    spearman: list[Record]
    """Per part and (load, kind) set: val_set, load, kind, n_benchmarks, n_recipes, rho,
    p_value."""


class DistillJson(TypedDict):
    rows: list[Record]
    """Per (size, base, variant, benchmark; benchmark ``VAL`` = the primary VAL):
    metric_alias, base_score, base_low, base_high, variant_score, variant_low, variant_high
    (seed-range+wilson), delta_pp, n_base_runs, n_variant_runs."""
    recipes: list[Record]
    """Per (size, branch): role (base | variant), base, distill_weight (α, from meta.json),
    n_runs."""
    subset: str
    mapping: str
