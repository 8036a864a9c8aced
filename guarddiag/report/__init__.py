"""The diagnostic report: saved tables in, HTML / Markdown / JSON / CSV / LaTeX / figures out.

``make_report(options)`` reads the saved hand-off files only — predictions
(``runs/predictions.parquet`` and ``runs/outside/*.parquet``), ``pool.parquet`` with its
``agreement.json``, and the audit's ``summary.json`` — runs the pure analyses of
:mod:`guarddiag.analyses` once (:func:`analyse`), lets each *section builder* turn results into
document blocks, and renders them. Nothing is retrained or re-scored, and the renderers compute
no statistics.

Sections. A report is a list of :data:`SectionBuilder` functions ``(ReportContext) -> Section``
(:data:`DEFAULT_SECTIONS`). A builder whose inputs are absent returns ``Section.omit(...)`` with a
note; the report shows the note and carries on. To add a section (e.g. the SORRY-Bench
breakdowns) write a builder and pass ``sections=with_sections([builder])``, which keeps the
disclosure card last; no other section changes.

Output folder (``--out``)::

    report.html        one self-contained page: figures as data: URIs, inline CSS, no scripts,
                       no external resources, a Content-Security-Policy that forbids both, and
                       every string from the inputs HTML-escaped
    report.md          the same content as Markdown (figures linked from figures/)
    results.json       every number, with its cohort (schema below)
    tables/<name>.csv  raw values (fractions, not percent), one file per table
    tables/<name>.tex  the same table for LaTeX (booktabs; best value per column in bold),
                       except for the long machine-readable tables (scores_long,
                       mapping_effect_runs), which are CSV only
    figures/<name>.png, figures/<name>.pdf
    meta.json          input digests, versions, git sha (the only file with run-dependent data)

Re-running on the same inputs and options gives byte-identical results.json, tables and
figures (no dates, sorted keys, seeded bootstrap).

results.json schema (version 1)
-------------------------------
::

    {
      "schema_version": 1,
      "title": str,
      "options": {mapping, threshold, n_resamples, confidence, seed, primary_subset, min_seeds,
                  rank_group: [str], rank_benchmark, rank_tail},
      "inputs": {"predictions": [{"path", "sha256"}], "pool": {"path", "sha256"} | null,
                 "agreement": {"path", "sha256"} | null,
                 "audit_summary": {"path", "sha256"} | null},
      "notes": [str],                        # inputs that were absent and what that omits
      "sections": [{"id", "title", "omitted": str | null}],   # in report order
      "results": {<section id>: <payload>}   # payloads below; omitted sections are absent
    }

Fractions are in [0, 1] (shares of prompts, accuracies, spans and floors); ``*_pp`` fields are
percentage points. Payloads:

- ``scores.scores``: one record per (run, benchmark, subset, language, mapping)::

      {"run": {run_id, guard_kind, branch, size, seed, label_policy},
       "cohort": {benchmark, benchmark_sha256, subset ("full" | "decontaminated"),
                  mapping (requested), mapping_applied (mapping | "native" | "mixed"),
                  threshold, readout ("class_probs" | "p_unsafe" | "pred_class"),
                  prompt_set (sha256[:16] of the sorted prompt ids scored), label_policy,
                  lang, seed_floor: {median, widest, n_groups} | null},
       metric ("CAP" | "OVER-REF" | "VAL"), metric_alias ("COPY", "OR-H", …), value, ci_low,
       ci_high, confidence, n_resamples, n, n_failed, n_scored, n_positive}

  Two records are comparable only when their ``cohort`` objects are equal apart from
  ``label_policy`` (the run's property); tables never put different cohorts in one column.
- ``load.benchmarks``: per (benchmark, subset, mapping): delta, floor_median, floor_widest,
  widest_group, n_groups, n_sizes, n_branches, load ("policy" | "capability" |
  "undetermined"); ``load.by_size``, ``load.seed_groups``: the inputs of both.
- ``rank.tests``: per size: group, branches (high → low), scores, ranks (mid-ranks), rank_sum,
  p_closed_form / p_upper / p_lower / p_two_sided as {"value": float, "exact": "a/b"}, tail,
  p_value (of the declared tail), ties, group_holds_top.
- ``mapping.effects``: per run, benchmark, subset: loose, strict (with intervals), delta_pp,
  strict_applied.
- ``outside.rows``: guards (bootstrap interval) and branch recipes (seed range) on the
  decontaminated prompts, per mapping.
- ``correlation``: policy / capability {rho, p_value, n, benchmarks}, runs: [{run_id, val,
  policy_mean, capability_mean}].
- ``val``: overlap of the val split with each training source; VAL per run and language is in
  ``scores``.
- ``pool``: agreement per split, class counts, confusion, recorded (agreement.json as written).
- ``contamination``: per benchmark n, n_exact, share_exact, n_near, share_near, n_kept, sha256;
  pool_rows, near_threshold, unavailable.
- ``study``: quantity, unit, study, study_note, here, here_note.
- ``disclosure``: per benchmark overlap, seed floor, Δb, load; definitions (mapping → unsafe
  classes), policies, threshold.
- ``summary``: the lists behind the plain-language summary.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import analyses, files, paths, plots, stats
from guarddiag import predictions as preds_mod
from guarddiag.analyses.rank import DEFAULT_BENCHMARK, DEFAULT_GROUP
from guarddiag.errors import GuarddiagError
from guarddiag.labels import MAPPINGS, get_mapping
from guarddiag.progress import say

SCHEMA_VERSION = 1

# ─── document model ────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Column:
    """One displayed column: ``key`` in the table's frame, how to format it, and optionally the
    frame columns holding its interval and which value counts as best (bold)."""

    key: str
    header: str
    fmt: str = "text"
    """text | int | pct (fraction shown as %) | pp (fraction shown as points) | num1 | num3 |
    p | rho"""
    low: str | None = None
    high: str | None = None
    best: str | None = None
    """``max`` or ``min``: bold the best value of the column (ties all bold)."""


@dataclass(frozen=True)
class Table:
    name: str
    """File stem under tables/ (and the anchor in HTML)."""
    caption: str
    columns: tuple[Column, ...]
    frame: pl.DataFrame = field(repr=False)
    """Raw values; the CSV is this frame as it is."""
    collapsed: bool = False
    """Shown folded (``<details>``) in HTML: long appendix tables."""
    csv_only: bool = False
    """Machine-readable long tables: written as CSV only and pointed to from HTML/Markdown."""


@dataclass(frozen=True)
class FigureBlock:
    name: str
    figure: Any = field(repr=False)
    caption: str


@dataclass(frozen=True)
class Examples:
    """Verbatim texts (benchmark prompts, pool rows): always escaped, shown as preformatted."""

    caption: str
    items: tuple[tuple[str, str], ...]
    """(label, text) pairs."""


Block = Paragraph | Bullets | Table | FigureBlock | Examples


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...] = ()
    results: Any = None
    """JSON-able payload stored under results.json ``results[id]``."""
    omitted: str | None = None

    @classmethod
    def omit(cls, id: str, title: str, note: str) -> Section:
        return cls(id=id, title=title, omitted=note)


# ─── options, inputs, analyses ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ReportOptions:
    runs_dir: Path = paths.work_paths()["runs"]
    pool_path: Path | None = paths.work_paths()["pool"]
    audit_dir: Path | None = paths.work_paths()["audit"]
    out_dir: Path = Path("reports/report")
    mapping: str = "loose"
    """Binary mapping of the primary tables (both loose and strict are always computed)."""
    threshold: float = analyses.scores.DEFAULT_THRESHOLD
    n_resamples: int = stats.DEFAULT_RESAMPLES
    confidence: float = stats.DEFAULT_CONFIDENCE
    seed: int = 0
    primary_subset: str = "decontaminated"
    """Prompt subset of the primary tables and of the policy/capability call."""
    min_seeds: int = 3
    rank_group: tuple[str, ...] = DEFAULT_GROUP
    rank_benchmark: str = DEFAULT_BENCHMARK
    rank_tail: str = "top"
    rank_explicit: bool = False
    """The user named the rank group/benchmark: an unknown name is an error, not a note."""
    title: str = "guarddiag report"
    data_dir: Path | None = None
    """Public data directory (benchmark categories for the SORRY-Bench sections);
    None = ``$GUARDDIAG_DATA``."""
    derived_dir: Path | None = None
    """Folder of derived (mutated) subsets; None = ``work/derived``."""


@dataclass(frozen=True)
class ReportInputs:
    predictions: pl.DataFrame = field(repr=False)
    prediction_files: tuple[tuple[str, str], ...]
    pool: pl.DataFrame | None = field(repr=False)
    pool_file: tuple[str, str] | None
    agreement: Mapping[str, Any] | None
    agreement_file: tuple[str, str] | None
    audit_summary: Mapping[str, Any] | None = field(repr=False)
    audit_file: tuple[str, str] | None
    kinds: Mapping[str, str]
    titles: Mapping[str, str]
    manifest_sha256: Mapping[str, str | None]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportContext:
    """Everything the section builders read: options, inputs, and each analysis computed once
    (None where its inputs are absent; ``notes`` say why)."""

    options: ReportOptions
    inputs: ReportInputs
    scores: analyses.ScoresResult
    load: analyses.BenchmarkLoadResult
    contamination: analyses.ContaminationResult | None
    rank: analyses.BranchRankResult | None
    rank_note: str | None
    correlation: analyses.CorrelationResult | None
    effect: analyses.MappingEffectResult
    outside: analyses.OutsideComparisonResult
    pool_stats: analyses.PoolStatsResult | None
    val_overlap: analyses.ValOverlapResult | None
    disclosure: analyses.DisclosureResult
    study: analyses.StudyComparisonResult
    notes: tuple[str, ...] = ()

    @property
    def benchmarks(self) -> list[str]:
        """Scored benchmarks (not the pool's val split), in name order."""
        return sorted(set(self.scores.binary()["benchmark"].to_list()))


SectionBuilder = Callable[[ReportContext], Section]


def _file_ref(path: Path) -> tuple[str, str]:
    return (str(path), files.sha256_file(path))


def load_inputs(options: ReportOptions) -> ReportInputs:
    """Read every saved input the report uses; absent optional inputs become notes."""
    notes: list[str] = []
    run_files = preds_mod.run_files(options.runs_dir)
    predictions = preds_mod.load_runs(options.runs_dir)
    pool = pool_file = agreement = agreement_file = None
    if options.pool_path is not None and Path(options.pool_path).is_file():
        pool_path = Path(options.pool_path)
        pool = files.read_table(pool_path)
        pool_file = _file_ref(pool_path)
        agreement_path = pool_path.parent / "agreement.json"
        if agreement_path.is_file():
            agreement = files.read_json(agreement_path)
            agreement_file = _file_ref(agreement_path)
    else:
        notes.append(f"pool {options.pool_path}: not found, so VAL, the pool statistics and the "
                     "validation-split overlap are omitted")
    summary = audit_file = None
    if options.audit_dir is not None and (Path(options.audit_dir) / "summary.json").is_file():
        summary_path = Path(options.audit_dir) / "summary.json"
        summary = files.read_json(summary_path)
        if not isinstance(summary, dict):
            raise GuarddiagError(f"{summary_path}: expected a JSON object")
        audit_file = _file_ref(summary_path)
    else:
        notes.append(f"audit {options.audit_dir}: no summary.json, so the contamination table "
                     "is omitted and benchmark digests come from the manifests")
    from guarddiag.data import load_manifests

    manifests = load_manifests(derived_dir=options.derived_dir)
    kinds = {k: m.kind for k, m in manifests.items()}
    titles = {k: m.title for k, m in manifests.items()}
    manifest_sha = {}
    for k, m in manifests.items():
        digests = [f.sha256 for f in m.files]
        manifest_sha[k] = ",".join(digests) if digests and all(digests) else None
    return ReportInputs(
        predictions=predictions, prediction_files=tuple(_file_ref(p) for p in run_files),
        pool=pool, pool_file=pool_file, agreement=agreement, agreement_file=agreement_file,
        audit_summary=summary, audit_file=audit_file, kinds=kinds, titles=titles,
        manifest_sha256=manifest_sha, notes=tuple(notes))


def analyse(inputs: ReportInputs, options: ReportOptions) -> ReportContext:
    """Run every analysis once for the report (pure functions of the inputs and options)."""
    mapping = get_mapping(options.mapping)
    if options.primary_subset not in analyses.scores.SUBSETS:
        raise GuarddiagError(f"primary subset {options.primary_subset!r} is not one of "
                             f"{', '.join(analyses.scores.SUBSETS)}")
    notes = list(inputs.notes)
    contamination = (analyses.contamination_table(inputs.audit_summary,
                                                  source=inputs.audit_file[0])
                     if inputs.audit_summary is not None and inputs.audit_file else None)
    sha = dict(inputs.manifest_sha256)
    if contamination is not None:
        sha.update({k: v for k, v in contamination.sha256().items() if v})
    others = [m for m in MAPPINGS.values() if m.name != mapping.name]
    scores = analyses.compute_scores(
        inputs.predictions, kinds=inputs.kinds, pool=inputs.pool, mappings=(mapping, *others),
        threshold=options.threshold, n_resamples=options.n_resamples, seed=options.seed,
        confidence=options.confidence, benchmark_sha256=sha,
        source=str(options.runs_dir))
    load = analyses.benchmark_load(scores, min_seeds=options.min_seeds)
    subset, mname = options.primary_subset, mapping.name
    rank = rank_note = None
    try:
        rank = analyses.branch_rank_test(scores, group=options.rank_group,
                                         benchmark=options.rank_benchmark, subset=subset,
                                         mapping=mname, tail=options.rank_tail)
    except GuarddiagError as exc:
        if options.rank_explicit:
            raise
        rank_note = str(exc)
    correlation = None
    if scores.val().height:
        correlation = analyses.val_correlation(scores, load, subset=subset, mapping=mname)
    effect = analyses.mapping_effect(scores, loose="loose", strict="strict")
    outside = analyses.outside_comparison(scores, subset="decontaminated")
    pool_stats = val_overlap = None
    if inputs.pool is not None:
        pool_stats = analyses.pool_statistics(inputs.pool, recorded=inputs.agreement)
        val_overlap = analyses.validation_overlap(inputs.pool)
    benches = sorted(set(scores.binary()["benchmark"].to_list()))
    disclosure = analyses.disclosure_card(load=load, contamination=contamination, subset=subset,
                                          mapping=mname, threshold=options.threshold,
                                          benchmarks=benches)
    study = analyses.study_comparison(scores=scores, load=load, rank=rank,
                                      correlation=correlation, effect=effect,
                                      contamination=contamination, subset=subset, mapping=mname)
    return ReportContext(options=options, inputs=inputs, scores=scores, load=load,
                         contamination=contamination, rank=rank, rank_note=rank_note,
                         correlation=correlation, effect=effect, outside=outside,
                         pool_stats=pool_stats, val_overlap=val_overlap, disclosure=disclosure,
                         study=study, notes=tuple(notes))


# ─── helpers for builders ──────────────────────────────────────────────────────────────────────

def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _cohort_words(ctx: ReportContext, subset: str | None = None) -> str:
    o = ctx.options
    return (f"{subset or o.primary_subset} prompts, {o.mapping} mapping, unsafe when "
            f"P(unsafe) ≥ {o.threshold:g}")


def _records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frame.iter_rows(named=True):
        out.append({k: _jsonable(v) for k, v in row.items()})
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Fraction):
        return {"value": float(v), "exact": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return v


def _best(metric: str) -> str | None:
    return {"CAP": "max", "VAL": "max", "OVER-REF": "min"}.get(metric)


def _pivot(rows: pl.DataFrame, *, entity_cols: Sequence[str], value: str = "score",
           low: str = "low", high: str = "high",
           cohort: Sequence[str] = ("subset", "mapping_applied", "threshold", "prompt_set")
           ) -> tuple[pl.DataFrame, list[Column]]:
    """Entities × benchmarks, one column per (benchmark, cohort).

    Within a benchmark the cohort most rows share gets the plain column; any other cohort (a
    guard scored on fewer prompts, a binary-only guard's native verdict) gets a column of its
    own, so no column ever mixes cohorts.
    """
    columns: list[Column] = []
    wide: dict[tuple, dict[str, Any]] = {}
    order: list[tuple] = []
    for r in rows.iter_rows(named=True):
        key = tuple(r[c] for c in entity_cols)
        if key not in wide:
            wide[key] = dict(zip(entity_cols, key, strict=True))
            order.append(key)
    for bench in sorted(set(rows["benchmark"].to_list())):
        part = rows.filter(pl.col("benchmark") == bench)
        counts = part.group_by(list(cohort)).len().sort(
            ["len", *cohort], descending=[True, *([False] * len(cohort))], nulls_last=True)
        for i, coh in enumerate(counts.iter_rows(named=True)):
            match = pl.all_horizontal([
                pl.col(c).is_null() if coh[c] is None else pl.col(c) == coh[c] for c in cohort])
            cells = part.filter(match)
            col = bench if i == 0 else f"{bench}~{i}"
            alias = cells["metric_alias"][0]
            header = bench if alias in ("CAP", "OVER-REF") else f"{bench} ({alias})"
            if i:
                header += f" [{coh.get('mapping_applied')}, {cells['n_scored'][0]} prompts]"
            metric = {"COPY": "CAP", "OR-H": "OVER-REF"}.get(alias, alias)
            columns.append(Column(col, header, "pct", low=f"{col}__low", high=f"{col}__high",
                                  best=_best(metric)))
            for r in cells.iter_rows(named=True):
                w = wide[tuple(r[c] for c in entity_cols)]
                w[col], w[f"{col}__low"], w[f"{col}__high"] = r[value], r[low], r[high]
    keys = [c for col in columns for c in (col.key, col.low, col.high)]
    schema = {**{c: rows.schema[c] for c in entity_cols}, **dict.fromkeys(keys, pl.Float64)}
    frame = pl.DataFrame([{k: wide[o].get(k) for k in schema} for o in order], schema=schema)
    return frame, columns


# ─── sections ──────────────────────────────────────────────────────────────────────────────────

def section_summary(ctx: ReportContext) -> Section:
    o = ctx.options
    loads = ctx.load.loads(subset=o.primary_subset, mapping=o.mapping)
    policy = sorted(b for b, v in loads.items() if v == "policy")
    capability = sorted(b for b, v in loads.items() if v == "capability")
    undetermined = sorted(b for b in ctx.benchmarks if loads.get(b, "undetermined")
                          == "undetermined")
    runs = ctx.scores.table.select("run_id", "guard_kind", "size").unique()
    n_branch = runs.filter(pl.col("guard_kind") == "branch").height
    n_outside = runs.filter(pl.col("guard_kind") == "outside").height
    n_base = runs.filter(pl.col("guard_kind") == "baseline").height
    sizes = sorted(set(runs.filter(pl.col("guard_kind") == "branch")["size"].to_list()))
    paras = [
        f"This report reads {runs.height} scored runs ({n_branch} branch runs"
        + (f" at size(s) {', '.join(sizes)}" if sizes else "")
        + f", {n_base} baseline, {n_outside} outside guard(s)) on {len(ctx.benchmarks)} "
        f"benchmark subsets. A score is the share of a benchmark's prompts read as unsafe "
        f"({_cohort_words(ctx)}); intervals are {int(o.confidence * 100)}% prompt-bootstrap "
        f"intervals with B = {o.n_resamples:,} resamples (seed {o.seed}) unless a table says "
        "they are seed ranges.",
    ]
    items = []
    if policy:
        items.append(f"Policy-load here: {', '.join(policy)}. On these, branches that differ "
                     "only in how a labelling policy reached them differ by more than seed "
                     "noise (Δb above the widest seed floor): the score measures which "
                     "moderation policy the guard's labels encoded, not how well it detects "
                     "harm. A higher number is not a better guard.")
    if capability:
        items.append(f"Capability-load here: {', '.join(capability)}. Label policy moves "
                     "these by no more than retraining with another seed does, so differences "
                     "between guards larger than the seed floor can be read as detection "
                     "capability.")
    if undetermined:
        items.append(f"Undetermined: {', '.join(undetermined)} — no seed group of at least "
                     f"{o.min_seeds} seeds (or fewer than two branches), so noise cannot be "
                     "told from policy; do not read these as either.")
    if ctx.contamination is not None:
        t = ctx.contamination.table.filter(pl.col("n_exact") > 0).sort(
            ["share_exact", "benchmark"], descending=[True, False])
        if t.height:
            worst = ", ".join(f"{r['benchmark']} {_pct(r['share_exact'])} "
                              f"({r['n_exact']:,}/{r['n']:,})"
                              for r in t.head(5).iter_rows(named=True))
            items.append(f"Contamination: {t.height} of {ctx.contamination.table.height} "
                         f"audited benchmarks share prompts with the training pool (exact "
                         f"overlap after normalisation): {worst}. The primary tables use the "
                         "decontaminated prompts.")
        else:
            items.append("Contamination: the audit found no exact overlap between the training "
                         "pool and any audited benchmark.")
    else:
        items.append("Contamination: no audit was found, so no overlap is known; scores on "
                     "the full benchmarks may include memorised prompts.")
    items.append("Compare: scores in the same column of a table (same benchmark, prompt subset, "
                 "binary mapping, threshold and prompt set), and differences larger than that "
                 "benchmark's seed floor.")
    items.append("Do not compare: scores across columns or subsets (full vs decontaminated), a "
                 "loose-mapping score with a strict one, an outside guard's native verdict with "
                 "a mapped read-out, or any difference inside the seed floor; and do not read a "
                 "policy-load score as capability.")
    payload = {"policy_load": policy, "capability_load": capability,
               "undetermined": undetermined, "subset": o.primary_subset,
               "mapping": o.mapping, "threshold": o.threshold}
    return Section("summary", "At a glance",
                   (*(Paragraph(p) for p in paras), Bullets(tuple(items))), payload)


def section_contamination(ctx: ReportContext) -> Section:
    title = "Training-pool overlap (contamination audit)"
    c = ctx.contamination
    if c is None:
        return Section.omit("contamination", title, "no audit summary.json was found")
    t = c.table
    near = (f"near duplicates (word-set Jaccard ≥ {c.near_threshold:g}, no exact overlap) "
            "are a separate column" if c.near_dup else "near-duplicate search was not run")
    columns = (Column("benchmark", "benchmark"), Column("n", "n", "int"),
               Column("n_exact", "exact", "int"), Column("share_exact", "exact %", "pct"),
               Column("n_near", "near", "int"), Column("share_near", "near %", "pct"),
               Column("n_kept", "kept", "int"))
    blocks: list[Block] = [
        Paragraph(f"Exact overlap = equal after normalisation ({c.normalisation or 'see audit'}"
                  f"); {near}. Pool: {c.pool_rows or 0:,} rows."),
        Table("overlap", "Benchmark prompts found in the training pool", columns, t),
        FigureBlock("overlap", plots.overlap_bars(c),
                    "Share of each benchmark's prompts found in the training pool "
                    "(study Fig. 2a)."),
    ]
    if c.unavailable:
        blocks.append(Bullets(tuple(f"{k}: unavailable ({v})"
                                    for k, v in sorted(c.unavailable.items()))))
    for bench in t["benchmark"].to_list():
        ex = c.examples.get(bench) or ()
        items = []
        for e in ex:
            items.append((f"{bench} {e.get('kind', '')} · prompt {e.get('prompt_id', '')}",
                          str(e.get("benchmark_text", ""))))
            items.append((f"pool row {e.get('pool_id', '')} (similarity "
                          f"{e.get('similarity', '')})", str(e.get("pool_text", ""))))
        if items:
            blocks.append(Examples(f"Example overlaps: {bench}", tuple(items)))
    payload = {"benchmarks": _records(t), "pool_rows": c.pool_rows,
               "near_threshold": c.near_threshold, "near_dup": c.near_dup,
               "unavailable": dict(c.unavailable)}
    return Section("contamination", title, tuple(blocks), payload)


def _score_records(ctx: ReportContext) -> list[dict[str, Any]]:
    floors = {(r["benchmark"], r["subset"], r["mapping"]): r
              for r in ctx.load.table.iter_rows(named=True)}
    out = []
    for r in ctx.scores.table.iter_rows(named=True):
        f = floors.get((r["benchmark"], r["subset"], r["mapping"]))
        floor = ({"median": f["floor_median"], "widest": f["floor_widest"],
                  "n_groups": f["n_groups"]} if f and f["n_groups"] else None)
        out.append(_jsonable({
            "run": {k: r[k] for k in ("run_id", "guard_kind", "branch", "size", "seed",
                                      "label_policy")},
            "cohort": {"benchmark": r["benchmark"], "benchmark_sha256": r["benchmark_sha256"],
                       "subset": r["subset"], "mapping": r["mapping"],
                       "mapping_applied": r["mapping_applied"], "threshold": r["threshold"],
                       "readout": r["readout"], "prompt_set": r["prompt_set"],
                       "label_policy": r["label_policy"], "lang": r["lang"],
                       "seed_floor": floor},
            "metric": r["metric"], "metric_alias": r["metric_alias"], "value": r["score"],
            "ci_low": r["ci_low"], "ci_high": r["ci_high"], "confidence": r["confidence"],
            "n_resamples": r["n_resamples"], "n": r["n"], "n_failed": r["n_failed"],
            "n_scored": r["n_scored"], "n_positive": r["n_positive"]}))
    return out


def section_scores(ctx: ReportContext) -> Section:
    o = ctx.options
    blocks: list[Block] = []
    for subset in (o.primary_subset, *(s for s in analyses.scores.SUBSETS
                                       if s != o.primary_subset)):
        recipes = analyses.recipe_table(ctx.scores, subset=subset, mapping=o.mapping)
        frame, cols = _pivot(recipes.table, entity_cols=["entity", "label_policy", "interval"])
        name = f"scores_{subset}_{o.mapping}"
        blocks.append(Table(
            name, f"Share read unsafe (%) per recipe and benchmark — {_cohort_words(ctx, subset)}."
            " Branch recipes: mean over seeds [seed range]; single runs and outside guards: "
            f"score [{int(o.confidence * 100)}% bootstrap interval]. Bold: highest CAP / lowest "
            "OVER-REF per column.",
            (Column("entity", "recipe / guard"), Column("label_policy", "labels"),
             Column("interval", "interval"), *cols), frame))
        if subset == o.primary_subset:
            blocks.append(FigureBlock(f"heatmap_{subset}_{o.mapping}",
                                      plots.score_heatmap(recipes),
                                      f"Share read unsafe per recipe and benchmark "
                                      f"({_cohort_words(ctx, subset)}); study Table 1."))
    runs = ctx.scores.binary(subset=o.primary_subset, mapping=o.mapping).with_columns(
        pl.col("ci_low").alias("low"), pl.col("ci_high").alias("high"))
    frame, cols = _pivot(runs, entity_cols=["run_id", "label_policy"])
    blocks.append(Table(
        f"scores_runs_{o.primary_subset}_{o.mapping}",
        f"Every run with its {int(o.confidence * 100)}% prompt-bootstrap interval "
        f"(B = {o.n_resamples:,}) — {_cohort_words(ctx)}.",
        (Column("run_id", "run"), Column("label_policy", "labels"), *cols), frame,
        collapsed=True))
    failed = ctx.scores.table.filter(pl.col("n_failed") > 0)
    if failed.height:
        blocks.append(Bullets(tuple(
            f"{r['run_id']} on {r['benchmark']} ({r['subset']}): {r['n_failed']} of {r['n']} "
            "prompts failed (output not parsed); the score covers the others and sits in its "
            "own column" for r in failed.filter(pl.col("mapping") == o.mapping)
            .iter_rows(named=True))))
    long = ctx.scores.table
    blocks.append(Table("scores_long", "All scores in long form, one row per cohort (CSV).",
                        (Column("run_id", "run"), Column("benchmark", "benchmark"),
                         Column("subset", "subset"), Column("mapping_applied", "mapping"),
                         Column("lang", "lang"), Column("metric_alias", "metric"),
                         Column("score", "score", "pct", low="ci_low", high="ci_high")),
                        long, csv_only=True))
    return Section("scores", "Benchmark scores (Table 1)", tuple(blocks),
                   {"scores": _score_records(ctx)})


def section_load(ctx: ReportContext) -> Section:
    o = ctx.options
    t = ctx.load.table.filter((pl.col("subset") == o.primary_subset)
                              & (pl.col("mapping") == o.mapping)).sort("benchmark")
    cols = (Column("benchmark", "benchmark"), Column("metric_alias", "metric"),
            Column("delta", "Δb (pp)", "pp"), Column("floor_median", "median Φb (pp)", "pp"),
            Column("floor_widest", "widest Φb (pp)", "pp"),
            Column("widest_group", "widest group"), Column("n_groups", "seed groups", "int"),
            Column("n_sizes", "sizes", "int"), Column("load", "load"))
    blocks: list[Block] = [
        Paragraph("Δb, the label-supervision span, is the mean over model sizes of the range of "
                  "branch scores (each branch averaged over its seeds; teachers excluded). Φb, "
                  f"the seed floor, is the range over the seeds of one recipe (≥ {o.min_seeds} "
                  "seeds); its median and widest value over all recipes are shown. A benchmark "
                  "is policy-load where Δb exceeds its widest floor, capability-load where it "
                  "does not, undetermined where no floor exists."),
        Table(f"span_floor_{o.primary_subset}_{o.mapping}",
              f"Δb beside Φb per benchmark — {_cohort_words(ctx)} (study Table 4).", cols, t),
        FigureBlock(f"span_floor_{o.primary_subset}_{o.mapping}",
                    plots.span_vs_floor(ctx.load, subset=o.primary_subset, mapping=o.mapping),
                    "Label-supervision span Δb against the seed floor Φb per benchmark."),
        Table("span_by_size", "Span per model size: the highest and lowest branch (all "
              "cohorts).", (Column("benchmark", "benchmark"), Column("subset", "subset"),
                            Column("mapping", "mapping"), Column("size", "size"),
                            Column("max_branch", "max"), Column("max_score", "", "pct"),
                            Column("min_branch", "min"), Column("min_score", "", "pct"),
                            Column("range", "range (pp)", "pp")),
              ctx.load.by_size, collapsed=True),
        Table("seed_groups", "Seed groups behind the floor (all cohorts).",
              (Column("benchmark", "benchmark"), Column("subset", "subset"),
               Column("mapping", "mapping"), Column("size", "size"),
               Column("branch", "branch"), Column("seeds", "seeds"),
               Column("low", "low", "pct"), Column("high", "high", "pct"),
               Column("range", "range (pp)", "pp")), ctx.load.groups, collapsed=True),
    ]
    payload = {"benchmarks": _records(ctx.load.table), "by_size": _records(ctx.load.by_size),
               "seed_groups": _records(ctx.load.groups), "min_seeds": ctx.load.min_seeds,
               "subset": o.primary_subset, "mapping": o.mapping}
    return Section("load", "Policy or capability? Span Δb vs seed floor Φb", tuple(blocks),
                   payload)


def section_rank(ctx: ReportContext) -> Section:
    title = "Exact permutation rank test"
    r = ctx.rank
    if r is None:
        return Section.omit("rank", title, ctx.rank_note or "no rank test")
    frame = r.to_frame()
    cols = (Column("size", "size"), Column("group", "group"), Column("n", "n", "int"),
            Column("k", "k", "int"), Column("rank_sum", "rank sum", "num1"),
            Column("max_rank_sum", "max", "num1"), Column("ties", "ties"),
            Column("p_closed_form", "1/C(n,k)", "p"), Column("p_upper", "P(S≥s)", "p"),
            Column("p_lower", "P(S≤s)", "p"), Column("p_two_sided", "two-sided", "p"),
            Column("p_value", f"p ({r.tail})", "p"))
    blocks: list[Block] = [
        Paragraph(f"Under exchangeable branches, how likely is it that the named group "
                  f"{{{', '.join(r.group)}}} ranks where it does on {r.benchmark} "
                  f"({r.metric}; {_cohort_words(ctx, r.subset)})? Branch score = mean over "
                  "seeds. The closed form 1/C(n,k) is the chance that the group holds the k "
                  "extreme ranks; the exact rank-sum distribution (counted over all C(n,k) "
                  "subsets, equivalent to enumerating all n! orderings) gives a p-value for any "
                  "position, with tied scores sharing mid-ranks and the null taken over the "
                  f"observed tied ranks. The report's p-value is the pre-declared '{r.tail}' "
                  "tail."),
        Table("rank_test", f"Rank test of {{{', '.join(r.group)}}} on {r.benchmark}.", cols,
              frame),
        FigureBlock("rank_test", plots.rank_plot(r),
                    "Branches in rank order; the named group highlighted."),
        Table("rank_branches", "Branch scores and mid-ranks behind the test.",
              (Column("size", "size"), Column("branch", "branch"),
               Column("score", "score", "pct"), Column("rank", "mid-rank", "num1"),
               Column("in_group", "in group")), r.branch_frame()),
    ]
    tests = []
    for size, t in r.tests:
        tests.append(_jsonable({
            "size": size, "group": list(t.group), "branches": list(t.branches),
            "scores": list(t.scores), "ranks": list(t.ranks), "n": t.n, "k": t.k,
            "rank_sum": t.rank_sum, "max_rank_sum": t.max_rank_sum,
            "group_holds_top": t.group_holds_top, "group_holds_bottom": t.group_holds_bottom,
            "ties": t.ties, "p_closed_form": t.p_extreme_top,
            "p_either_closed_form": t.p_extreme_either, "p_upper": t.p_upper,
            "p_lower": t.p_lower, "p_two_sided": t.p_two_sided, "tail": t.tail,
            "p_value": t.p_value}))
    payload = {"benchmark": r.benchmark, "metric": r.metric, "subset": r.subset,
               "mapping": r.mapping, "tail": r.tail, "tests": tests}
    return Section("rank", title, tuple(blocks), payload)


def section_mapping(ctx: ReportContext) -> Section:
    o = ctx.options
    by_recipe = analyses.mapping_effect_by_recipe(ctx.effect, subset=o.primary_subset)
    benign = sorted(set(by_recipe.filter(pl.col("metric_alias").is_in(["OVER-REF", "OR-H"]))
                        ["benchmark"].to_list()))
    shown = benign or sorted(set(by_recipe["benchmark"].to_list()))
    # One row per recipe/guard re-read under both mappings; per benchmark the loose, strict and
    # Δ columns hold only the prompt set most rows share (a guard that failed on some prompts,
    # or gives no class probabilities, is in the CSV, not in these columns).
    mapped = by_recipe.filter((pl.col("strict_applied") == "strict")
                              & pl.col("benchmark").is_in(shown))
    entities = list(dict.fromkeys(mapped["entity"].to_list()))
    wide = {e: {"entity": e} for e in entities}
    cols: list[Column] = [Column("entity", "recipe / guard")]
    left_out: set[str] = set(by_recipe.filter(pl.col("strict_applied") != "strict")["entity"]
                             .to_list())
    for bench in shown:
        part = mapped.filter(pl.col("benchmark") == bench)
        main = part.group_by("prompt_set").len().sort(["len", "prompt_set"],
                                                      descending=[True, False])["prompt_set"][0]
        left_out |= set(part.filter(pl.col("prompt_set") != main)["entity"].to_list())
        alias = part["metric_alias"][0]
        best = "min" if alias in ("OVER-REF", "OR-H") else "max"
        for r in part.filter(pl.col("prompt_set") == main).iter_rows(named=True):
            w = wide[r["entity"]]
            w[f"{bench}__loose"], w[f"{bench}__strict"] = r["loose"], r["strict"]
            w[f"{bench}__delta_pp"] = r["delta_pp"]
        cols += [Column(f"{bench}__loose", f"{bench} loose %", "pct", best=best),
                 Column(f"{bench}__strict", f"{bench} strict %", "pct", best=best),
                 Column(f"{bench}__delta_pp", "Δ (pp)", "num1")]
    schema = {"entity": pl.String, **{c.key: pl.Float64 for c in cols[1:]}}
    frame = pl.DataFrame([{k: wide[e].get(k) for k in schema} for e in entities], schema=schema)
    kinds = "benign benchmarks (OVER-REF)" if benign else "benchmarks"
    blocks: list[Block] = [
        Paragraph("The same predictions read out twice: loose counts BOUNDARY_SAFE as safe, "
                  "strict counts it as unsafe (study: the student's OR-H went from 5.7% to "
                  f"96.0%). Mean over seeds, {o.primary_subset} prompts, threshold "
                  f"{o.threshold:g}; {kinds} below, every benchmark in the CSV."),
        Table(f"mapping_effect_{o.primary_subset}",
              f"Loose vs strict binary mapping on the {kinds} (study Table 2).", tuple(cols),
              frame),
    ]
    if left_out:
        blocks.append(Paragraph(
            "Not in the columns above (a guard with only a binary verdict cannot be re-read "
            "under another mapping, or it was scored on other prompts): "
            f"{', '.join(sorted(left_out))}; see tables/mapping_effect_all.csv."))
    for bench in benign:
        blocks.append(FigureBlock(f"mapping_effect_{bench}",
                                  plots.mapping_effect_plot(mapped, benchmark=bench),
                                  f"Loose vs strict read-out on {bench}."))
    blocks.append(Table("mapping_effect_all", "Every recipe/guard and benchmark (seed means).",
                        (Column("entity", "recipe / guard"), Column("benchmark", "benchmark"),
                         Column("loose", "loose", "pct"), Column("strict", "strict", "pct"),
                         Column("delta_pp", "Δ (pp)", "num1"),
                         Column("strict_applied", "strict read-out")), by_recipe,
                        csv_only=True))
    full = ctx.effect.table
    blocks.append(Table("mapping_effect_runs", "Per run, both subsets, with intervals.",
                        (Column("run_id", "run"), Column("benchmark", "benchmark"),
                         Column("subset", "subset"),
                         Column("loose", "loose", "pct", low="loose_low", high="loose_high"),
                         Column("strict", "strict", "pct", low="strict_low",
                                high="strict_high"),
                         Column("delta_pp", "Δ (pp)", "num1")), full, csv_only=True))
    return Section("mapping", "Binary-mapping effect: BOUNDARY_SAFE as safe or unsafe",
                   tuple(blocks), {"effects": _records(full),
                                   "by_recipe": _records(by_recipe)})


def section_outside(ctx: ReportContext) -> Section:
    title = "Outside guards beside the branches (decontaminated prompts)"
    if not ctx.outside.has_guards:
        return Section.omit("outside", title, "no outside-guard predictions (runs/outside/)")
    t = ctx.outside.table.with_columns(
        pl.when(pl.col("kind") == "outside").then(pl.col("entity"))
        .otherwise(pl.concat_str([pl.col("size"), pl.col("entity")], separator="/"))
        .alias("who"))
    blocks: list[Block] = [Paragraph(
        "Guards: score [bootstrap interval]; branch recipes: mean over seeds [seed range]. "
        "One table per binary mapping; a guard whose read-out could not follow the mapping "
        "(binary verdict only) or whose prompt set differs gets its own column.")]
    for m in sorted(set(t["mapping"].to_list())):
        frame, cols = _pivot(t.filter(pl.col("mapping") == m), entity_cols=["who", "kind"],
                             cohort=("mapping_applied", "prompt_set"))
        blocks.append(Table(f"outside_{m}", f"Outside guards vs branches — decontaminated "
                            f"prompts, {m} mapping, threshold {ctx.options.threshold:g}.",
                            (Column("who", "guard / recipe"), Column("kind", "kind"), *cols),
                            frame))
    return Section("outside", title, tuple(blocks), {"rows": _records(ctx.outside.table)})


def section_correlation(ctx: ReportContext) -> Section:
    title = "Does validation accuracy predict benchmark scores?"
    c = ctx.correlation
    if c is None:
        return Section.omit("correlation", title,
                            "no VAL scores (no pool.parquet or no pool_val predictions)")
    blocks: list[Block] = [
        Paragraph("Spearman ρ across student runs between VAL (4-class accuracy under policy "
                  "A) and the run's mean share read unsafe on policy-load vs capability-load "
                  f"benchmarks ({_cohort_words(ctx, c.subset)}). Study: +0.74 vs +0.34."),
        Table("val_correlation", "Spearman ρ (scipy).",
              (Column("benchmarks", "benchmarks"), Column("n_benchmarks", "n", "int"),
               Column("n_runs", "runs", "int"), Column("rho", "ρ", "rho"),
               Column("p_value", "p", "p")), c.summary_frame()),
        Table("val_correlation_runs", "Per run.", (
            Column("run_id", "run"), Column("val", "VAL", "pct"),
            Column("policy_mean", "policy-load mean", "pct"),
            Column("capability_mean", "capability-load mean", "pct")), c.table,
            collapsed=True),
    ]
    payload = {"policy": {"rho": c.policy.rho, "p_value": c.policy.p_value, "n": c.policy.n,
                          "benchmarks": list(c.policy_benchmarks)},
               "capability": {"rho": c.capability.rho, "p_value": c.capability.p_value,
                              "n": c.capability.n,
                              "benchmarks": list(c.capability_benchmarks)},
               "runs": _records(c.table), "subset": c.subset, "mapping": c.mapping}
    return Section("correlation", title, tuple(blocks), _jsonable(payload))


def section_val(ctx: ReportContext) -> Section:
    title = "Validation split: accuracy and overlap with training"
    if ctx.val_overlap is None:
        return Section.omit("val", title, "no pool.parquet")
    blocks: list[Block] = []
    val = ctx.scores.table.filter(pl.col("metric") == "VAL").with_columns(
        pl.col("ci_low").alias("low"), pl.col("ci_high").alias("high"),
        pl.concat_str([pl.lit("VAL lang="), pl.col("lang")]).alias("benchmark"))
    if val.height:
        frame, cols = _pivot(val, entity_cols=["run_id", "label_policy"],
                             cohort=("subset", "prompt_set"))
        blocks.append(Table("val_accuracy", "4-class accuracy under policy A on the pool's val "
                            "split, per language, with bootstrap intervals.",
                            (Column("run_id", "run"), Column("label_policy", "labels"), *cols),
                            frame))
    overlap = ctx.val_overlap.table
    cols = (Column("lang", "lang"), Column("source", "training source"),
            Column("n_val", "val rows", "int"), Column("n_overlap", "in train", "int"),
            Column("share", "share", "pct"))
    blocks.append(Table("val_overlap", "Val rows whose normalised text is also a train row "
                        "('any' source, and each source with any overlap; study: multilingual "
                        "val 69.3% in policy-A training files, monolingual 0.2%).", cols,
                        overlap.filter((pl.col("source") == "any") | (pl.col("n_overlap") > 0))))
    blocks.append(Table("val_overlap_all", "Val overlap with every training source.", cols,
                        overlap, csv_only=True))
    return Section("val", title, tuple(blocks), {"overlap": _records(ctx.val_overlap.table)})


def section_pool(ctx: ReportContext) -> Section:
    title = "The dual-policy pool"
    p = ctx.pool_stats
    if p is None:
        return Section.omit("pool", title, "no pool.parquet")
    counts = p.class_counts.pivot(on="class", index=["policy", "split"], values="n",
                                  sort_columns=False)
    blocks: list[Block] = [
        Table("pool_agreement", f"Policy A vs B agreement ({p.n_rows:,} rows).",
              (Column("split", "split"), Column("n", "rows", "int"),
               Column("coarse_agreement", "4-class agreement", "pct"),
               Column("binary_agreement", "binary agreement", "pct"),
               Column("kappa_coarse", "κ 4-class", "num3"),
               Column("kappa_binary", "κ binary", "num3")), p.agreement),
        Table("pool_classes", "Class counts per policy and split.",
              tuple(Column(c, c, "text" if c in ("policy", "split") else "int")
                    for c in counts.columns), counts),
        Table("pool_confusion", "A × B confusion (rows: policy A, columns: policy B).",
              tuple(Column(c, c, "text" if c == "label_a" else "int")
                    for c in p.confusion.columns), p.confusion),
    ]
    payload = {"agreement": _records(p.agreement), "class_counts": _records(p.class_counts),
               "confusion": _records(p.confusion), "n_rows": p.n_rows,
               "recorded": _jsonable(p.recorded) if p.recorded is not None else None}
    return Section("pool", title, tuple(blocks), payload)


def section_study(ctx: ReportContext) -> Section:
    t = ctx.study.table
    frame = t.with_columns(
        pl.struct("unit", "study").map_elements(lambda s: _fmt_unit(s["unit"], s["study"]),
                                                return_dtype=pl.String).alias("study_shown"),
        pl.struct("unit", "here").map_elements(lambda s: _fmt_unit(s["unit"], s["here"]),
                                               return_dtype=pl.String).alias("here_shown"))
    cols = (Column("quantity", "quantity"), Column("study_shown", "study"),
            Column("study_note", ""), Column("here_shown", "here"), Column("here_note", ""))
    return Section("study", "Beside the study's numbers", (
        Paragraph("Reference numbers from the study (SPEC §6) beside this run's; '—' where this "
                  f"run has no such measurement. Here: {_cohort_words(ctx)}. Models, pools and "
                  "sizes differ from the study's, so agreement in direction matters more than "
                  "agreement in value."),
        Table("study_comparison", "This run beside the study.", cols, frame),
    ), {"rows": _records(t)})


def _fmt_unit(unit: str, v: float | None) -> str:
    if v is None:
        return "—"
    if unit == "share":
        return f"{100 * v:.1f}%"
    if unit == "pp":
        return f"{100 * v:.1f} pp"
    if unit == "rho":
        return f"{v:+.2f}"
    return f"{v:.3g}"


def section_disclosure(ctx: ReportContext) -> Section:
    d = ctx.disclosure
    cols = (Column("benchmark", "benchmark"), Column("n", "n", "int"),
            Column("share_exact", "prior overlap, exact", "pct"),
            Column("share_near", "near", "pct"),
            Column("floor_median", "seed floor median (pp)", "pp"),
            Column("floor_widest", "seed floor widest (pp)", "pp"),
            Column("n_groups", "seed groups", "int"), Column("delta", "Δb (pp)", "pp"),
            Column("load", "load"))
    defs = tuple(f"{name} mapping: unsafe = {' ∪ '.join(classes)}; every other class is safe"
                 + (" (used for the primary tables)" if name == d.mapping else "")
                 for name, classes in d.definitions)
    pols = tuple(f"Policy {p}: {text}" for p, text in d.policies)
    blocks: list[Block] = [
        Paragraph("What every guard paper should publish beside its scores: how much of each "
                  "benchmark the training data already held, how far scores move between seeds "
                  "of the same recipe, and what exactly 'unsafe' means."),
        Table("disclosure", f"Disclosure card ({d.subset} prompts, {d.mapping} mapping).",
              cols, d.table),
        Paragraph(f"Operational definition. A prompt is flagged unsafe when P(unsafe) ≥ "
                  f"{d.threshold:g}, where P(unsafe) is the summed probability of the unsafe "
                  "classes (a guard without class probabilities uses its own P(unsafe))."),
        Bullets(defs),
        Paragraph("The classes themselves depend on the labelling policy a run was trained on "
                  "(its 'labels' column):"),
        Bullets(pols),
    ]
    payload = {"benchmarks": _records(d.table), "threshold": d.threshold,
               "mapping": d.mapping, "subset": d.subset,
               "definitions": {n: list(c) for n, c in d.definitions},
               "policies": dict(d.policies)}
    return Section("disclosure", "Disclosure card", tuple(blocks), payload)


DEFAULT_SECTIONS: tuple[SectionBuilder, ...] = (
    section_summary, section_contamination, section_scores, section_load, section_rank,
    section_mapping, section_outside, section_correlation, section_val, section_pool,
    section_study, section_disclosure,
)
"""The report's sections, in order; the disclosure card is always last."""


def with_sections(extra: Iterable[SectionBuilder],
                  base: Sequence[SectionBuilder] = DEFAULT_SECTIONS
                  ) -> tuple[SectionBuilder, ...]:
    """``base`` with ``extra`` sections inserted just before the disclosure card."""
    base = tuple(base)
    return (*base[:-1], *extra, base[-1])


# ─── the report object ─────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class Report:
    title: str
    sections: tuple[Section, ...]
    results: Mapping[str, Any] = field(repr=False)
    notes: tuple[str, ...] = ()


def build_report(ctx: ReportContext, *,
                 sections: Sequence[SectionBuilder] = DEFAULT_SECTIONS) -> Report:
    built = []
    seen: set[str] = set()
    for builder in sections:
        section = builder(ctx)
        if section.id in seen:
            raise GuarddiagError(f"report: two sections share the id {section.id!r}")
        seen.add(section.id)
        built.append(section)
    o, i = ctx.options, ctx.inputs

    def ref(x: tuple[str, str] | None) -> dict[str, str] | None:
        return {"path": x[0], "sha256": x[1]} if x else None

    results = {
        "schema_version": SCHEMA_VERSION,
        "title": o.title,
        "options": {"mapping": o.mapping, "threshold": o.threshold,
                    "n_resamples": o.n_resamples, "confidence": o.confidence, "seed": o.seed,
                    "primary_subset": o.primary_subset, "min_seeds": o.min_seeds,
                    "rank_group": list(o.rank_group), "rank_benchmark": o.rank_benchmark,
                    "rank_tail": o.rank_tail},
        "inputs": {"predictions": [ref(x) for x in i.prediction_files],
                   "pool": ref(i.pool_file), "agreement": ref(i.agreement_file),
                   "audit_summary": ref(i.audit_file)},
        "notes": list(ctx.notes),
        "sections": [{"id": s.id, "title": s.title, "omitted": s.omitted} for s in built],
        "results": {s.id: s.results for s in built if s.omitted is None},
    }
    return Report(title=o.title, sections=tuple(built), results=_jsonable(results),
                  notes=ctx.notes)


# ─── rendering: cells ──────────────────────────────────────────────────────────────────────────

def _fmt(v: Any, fmt: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if fmt in ("pct", "pp"):
        return f"{100 * v:.1f}"
    if fmt == "int":
        return f"{int(v):,}"
    if fmt == "num1":
        return f"{v:.1f}"
    if fmt == "num3":
        return f"{v:.3f}"
    if fmt == "p":
        return f"{v:.3g}"
    if fmt == "rho":
        return f"{v:+.2f}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _cells(table: Table) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Header strings and, per row, (cell text, is best) — plain text, escaped by renderers."""
    headers = [c.header for c in table.columns]
    best: dict[str, Any] = {}
    for c in table.columns:
        if c.best and c.key in table.frame.columns:
            vals = [v for v in table.frame[c.key].to_list() if v is not None]
            if vals:
                best[c.key] = max(vals) if c.best == "max" else min(vals)
    rows = []
    for r in table.frame.iter_rows(named=True):
        cells = []
        for c in table.columns:
            v = r.get(c.key)
            text = _fmt(v, c.fmt)
            if c.low and c.high and v is not None and r.get(c.low) is not None:
                text += f" [{_fmt(r[c.low], c.fmt)}, {_fmt(r[c.high], c.fmt)}]"
            cells.append((text, c.key in best and v is not None and v == best[c.key]))
        rows.append(cells)
    return headers, rows


# ─── rendering: HTML ───────────────────────────────────────────────────────────────────────────

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#1a1a1a;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;
margin-top:2em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0 1.2em;display:block;
overflow-x:auto}
caption{caption-side:top;text-align:left;font-style:italic;padding:.3em 0}
th,td{padding:.25em .6em;text-align:right;white-space:nowrap}
th.t,td.t{text-align:left}caption{white-space:normal;max-width:60em}
thead th{border-top:2px solid #333;border-bottom:1px solid #333}
tbody tr:last-child td{border-bottom:2px solid #333}
figure{margin:1em 0}figure img{max-width:100%;height:auto}
figcaption{font-size:.85em;font-style:italic}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;
font-size:.8em;border-left:3px solid #bbb}
.omitted{color:#666;font-style:italic}.notes{color:#555;font-size:.9em}
details summary{cursor:pointer;color:#0645ad}p.ex{font-size:.85em;margin:.4em 0 0}
"""

# No scripts, no remote anything: images only as data: URIs, styles only inline.
_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'none'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'")


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html_table(table: Table) -> str:
    headers, rows = _cells(table)
    # Text columns read left-aligned, numbers right-aligned.
    cls = ['' if c.fmt != "text" else ' class="t"' for c in table.columns]
    out = [f'<table id="{_esc(table.name)}"><caption>{_esc(table.caption)}</caption><thead>'
           "<tr>" + "".join(f"<th{k}>{_esc(h)}</th>" for h, k in zip(headers, cls, strict=True))
           + "</tr></thead><tbody>"]
    for cells in rows:
        out.append("<tr>" + "".join(
            f"<td{k}><strong>{_esc(t)}</strong></td>" if b else f"<td{k}>{_esc(t)}</td>"
            for (t, b), k in zip(cells, cls, strict=True)) + "</tr>")
    out.append("</tbody></table>")
    body = "".join(out)
    if table.collapsed:
        return (f"<details><summary>{_esc(table.caption)} ({len(rows)} rows)</summary>"
                f"{body}</details>")
    return body


def render_html(report: Report, figures_png: Mapping[str, bytes]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_esc(report.title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{_esc(report.title)}</h1>"]
    if report.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{_esc(n)}</li>" for n in report.notes)
                     + "</ul>")
    parts.append("<nav><ol>" + "".join(f'<li><a href="#{_esc(s.id)}">{_esc(s.title)}</a></li>'
                                       for s in report.sections) + "</ol></nav>")
    for s in report.sections:
        parts.append(f'<section id="{_esc(s.id)}"><h2>{_esc(s.title)}</h2>')
        if s.omitted is not None:
            parts.append(f'<p class="omitted">Omitted: {_esc(s.omitted)}.</p></section>')
            continue
        for b in s.blocks:
            if isinstance(b, Paragraph):
                parts.append(f"<p>{_esc(b.text)}</p>")
            elif isinstance(b, Bullets):
                parts.append("<ul>" + "".join(f"<li>{_esc(x)}</li>" for x in b.items) + "</ul>")
            elif isinstance(b, Table) and b.csv_only:
                parts.append(f"<p><em>{_esc(b.caption)}</em> See tables/{_esc(b.name)}.csv "
                             f"({b.frame.height:,} rows).</p>")
            elif isinstance(b, Table):
                parts.append(_html_table(b))
            elif isinstance(b, FigureBlock):
                data = base64.b64encode(figures_png[b.name]).decode("ascii")
                parts.append(f'<figure><img alt="{_esc(b.caption)}" '
                             f'src="data:image/png;base64,{data}"><figcaption>'
                             f"{_esc(b.caption)}</figcaption></figure>")
            elif isinstance(b, Examples):
                # Folded: real audits hold many long examples; a reader opens the ones wanted.
                parts.append(f"<details><summary>{_esc(b.caption)}</summary>" + "".join(
                    f'<p class="ex">{_esc(label)}</p><pre>{_esc(text)}</pre>'
                    for label, text in b.items) + "</details>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ─── rendering: Markdown ───────────────────────────────────────────────────────────────────────

def _md_esc(text: Any) -> str:
    # HTML-escape too: Markdown renderers pass raw HTML through.
    s = html.escape(str(text), quote=False)
    for ch in ("\\", "|", "*", "_", "`", "[", "]"):
        s = s.replace(ch, "\\" + ch)
    return " ".join(s.split())


def _md_table(table: Table) -> str:
    headers, rows = _cells(table)
    lines = [f"*{_md_esc(table.caption)}*", "",
             "| " + " | ".join(_md_esc(h) or " " for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    for cells in rows:
        lines.append("| " + " | ".join(f"**{_md_esc(t)}**" if b else _md_esc(t)
                                       for t, b in cells) + " |")
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    out = [f"# {_md_esc(report.title)}", ""]
    for n in report.notes:
        out.append(f"- {_md_esc(n)}")
    if report.notes:
        out.append("")
    for s in report.sections:
        out += [f"## {_md_esc(s.title)}", ""]
        if s.omitted is not None:
            out += [f"*Omitted: {_md_esc(s.omitted)}.*", ""]
            continue
        for b in s.blocks:
            if isinstance(b, Paragraph):
                out.append(_md_esc(b.text))
            elif isinstance(b, Bullets):
                out += [f"- {_md_esc(x)}" for x in b.items]
            elif isinstance(b, Table):
                if b.collapsed or b.csv_only:
                    out.append(f"*{_md_esc(b.caption)}* — see `tables/{b.name}.csv` "
                               f"({b.frame.height} rows).")
                else:
                    out.append(_md_table(b))
            elif isinstance(b, FigureBlock):
                out.append(f"![{_md_esc(b.caption)}](figures/{b.name}.png)")
            elif isinstance(b, Examples):
                out.append(f"*{_md_esc(b.caption)}*")
                for label, text in b.items:
                    out += ["", _md_esc(label), "", "```text",
                            str(text).replace("```", "ʼʼʼ"), "```"]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


# ─── rendering: LaTeX and CSV ──────────────────────────────────────────────────────────────────

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex_esc(text: Any) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def render_latex(table: Table) -> str:
    headers, rows = _cells(table)
    align = "".join("l" if c.fmt == "text" else "r" for c in table.columns)
    lines = ["% generated by guarddiag report; needs \\usepackage{booktabs}",
             "\\begin{table}[t]", "\\centering", "\\small",
             f"\\caption{{{_tex_esc(table.caption)}}}",
             f"\\label{{tab:{_tex_esc(table.name)}}}",
             f"\\begin{{tabular}}{{{align}}}", "\\toprule",
             " & ".join(_tex_esc(h) for h in headers) + " \\\\", "\\midrule"]
    for cells in rows:
        lines.append(" & ".join(f"\\textbf{{{_tex_esc(t)}}}" if b else _tex_esc(t)
                                for t, b in cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


def render_csv(table: Table) -> str:
    frame = table.frame
    # Nested values (lists) are not CSV cells; none of the report's tables have them.
    return frame.write_csv(line_terminator="\n")


# ─── writing ───────────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class ReportResult:
    out_dir: Path
    files: tuple[Path, ...]
    sections: tuple[tuple[str, str | None], ...]
    """(section id, omitted note or None)."""
    results: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The content of results.json."""

    def headline(self) -> list[str]:
        """A few lines for the terminal: the load call and the rank test."""
        res = self.results.get("results", {})
        lines = []
        summary = res.get("summary")
        if summary:
            lines.append(f"policy-load: {', '.join(summary['policy_load']) or '—'}")
            lines.append(f"capability-load: {', '.join(summary['capability_load']) or '—'}")
            if summary["undetermined"]:
                lines.append(f"undetermined: {', '.join(summary['undetermined'])}")
        for t in (res.get("rank") or {}).get("tests", []):
            lines.append(f"rank test {{{', '.join(t['group'])}}} on "
                         f"{res['rank']['benchmark']} ({t['size']}): p = "
                         f"{t['p_value']['exact']} ({t['p_value']['value']:.4g}, {t['tail']})")
        return lines

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame({"section": [s for s, _ in self.sections],
                             "omitted": [n for _, n in self.sections]},
                            schema={"section": pl.String, "omitted": pl.String})


def write_report(report: Report, out_dir: str | Path, *,
                 inputs: Mapping[str, str] | None = None) -> ReportResult:
    """Write every output file (see the module docstring); stale tables/figures of an earlier
    report in the same folder are removed so the folder always matches results.json."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    pngs: dict[str, bytes] = {}
    names: set[str] = set()
    for s in report.sections:
        for b in s.blocks:
            if isinstance(b, (Table, FigureBlock)):
                kind = "table" if isinstance(b, Table) else "figure"
                if (kind, b.name) in names:
                    raise GuarddiagError(f"report: two {kind}s are named {b.name!r}")
                names.add((kind, b.name))
            if isinstance(b, Table):
                written.append(files.write_text(render_csv(b), out_dir / "tables" /
                                                f"{b.name}.csv"))
                if not b.csv_only:
                    written.append(files.write_text(render_latex(b), out_dir / "tables" /
                                                    f"{b.name}.tex"))
            elif isinstance(b, FigureBlock):
                png, pdf = plots.save_figure(b.figure, out_dir / "figures" / b.name)
                pngs[b.name] = png.read_bytes()
                written += [png, pdf]
    for sub, suffixes in (("tables", (".csv", ".tex")), ("figures", (".png", ".pdf"))):
        folder = out_dir / sub
        if folder.is_dir():
            for f in sorted(folder.iterdir()):
                if f.suffix in suffixes and f not in written:
                    f.unlink()
    written.append(files.write_json(report.results, out_dir / "results.json"))
    written.append(files.write_text(render_markdown(report), out_dir / "report.md"))
    written.append(files.write_text(render_html(report, pngs), out_dir / "report.html"))
    files.write_meta(out_dir, inputs=dict(inputs or {}), seed=report.results["options"]["seed"],
                     stage="report")
    written.append(out_dir / "meta.json")
    return ReportResult(out_dir=out_dir, files=tuple(written),
                        sections=tuple((s.id, s.omitted) for s in report.sections),
                        results=report.results)


def default_sections(options: ReportOptions) -> tuple[SectionBuilder, ...]:
    """:data:`DEFAULT_SECTIONS` plus the SORRY-Bench breakdowns (categories, mutation
    robustness, benchmark balance), which omit themselves when their inputs are absent."""
    from guarddiag.report.sorry_sections import sorry_sections

    return with_sections(sorry_sections(data_dir=options.data_dir,
                                        derived_dir=options.derived_dir))


def make_report(options: ReportOptions, *,
                sections: Sequence[SectionBuilder] | None = None) -> ReportResult:
    """The ``guarddiag report`` verb: load the saved tables, analyse, render, write.

    ``sections`` defaults to :func:`default_sections`.
    """
    if sections is None:
        sections = default_sections(options)
    say(f"report: reading {options.runs_dir}")
    inputs = load_inputs(options)
    say(f"report: {inputs.predictions.height:,} predictions; analysing "
        f"(bootstrap B = {options.n_resamples:,})")
    ctx = analyse(inputs, options)
    report = build_report(ctx, sections=sections)
    say(f"report: writing {options.out_dir}")
    digests = dict(inputs.prediction_files)
    for ref in (inputs.pool_file, inputs.agreement_file, inputs.audit_file):
        if ref:
            digests[ref[0]] = ref[1]
    return write_report(report, options.out_dir, inputs=digests)
