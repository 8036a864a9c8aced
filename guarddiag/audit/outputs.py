"""The audit folder: writing overlap.parquet, decontaminated lists, the chart, summary.json and
meta.json, and reading a finished folder back."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.audit.containment import CONTAINMENT_DEFINITION
from guarddiag.audit.result import (
    DEFAULT_CONTAINMENT,
    DEFAULT_SHORT_THRESHOLD,
    DEFAULT_SHORT_WORDS,
    FORMAT_VERSION,
    OVERLAP_SCHEMA,
    REMOVE_SCHEMA,
    REVIEW_DEFINITION,
    AuditResult,
    BenchmarkOverlap,
    UnavailableBenchmark,
)
from guarddiag.audit.template import TEMPLATE_DEFINITION
from guarddiag.errors import GuarddiagError
from guarddiag.figures import paper_style, release_figure, save_figure
from guarddiag.paths import AuditFolder

__all__ = ["AUDIT_FIGURE_SAVE", "CHART_SUFFIXES", "inherit_decontamination", "load_audit",
           "load_decontaminated", "load_if_current", "plot_overlap", "save_audit_figure",
           "write_audit"]

AUDIT_FIGURE_SAVE: Mapping[str, Any] = {
    "dpi": 200, "style": None, "settle": False, "bbox_inches": None,
    "png_metadata": {"Software": None},
    "pdf_metadata": {"CreationDate": None, "Creator": None, "Producer": None},
}
"""How the audit's figures are saved (the settings they were first written with, so their
bytes stay the same): PNG at 200 dpi, matplotlib's default rc settings, no extra draw, no
bounding-box crop, no dates or versions in the metadata."""


CHART_SUFFIXES = (".png", ".pdf")
"""The files of the audit's chart: ``overlap.png`` and ``overlap.pdf``."""


def save_audit_figure(fig: Any, stem: Path) -> None:
    """Save ``fig`` as ``<stem>.png`` and ``<stem>.pdf`` with :data:`AUDIT_FIGURE_SAVE`, then
    close it."""
    save_figure(fig, stem, **AUDIT_FIGURE_SAVE)
    release_figure(fig)


def write_audit(result: AuditResult, out_dir: str | Path, *, figure: bool = False,
                meta: Mapping[str, Any] | None = None) -> Path:
    """Write overlap.parquet, decontaminated/, the chart (``figure``), then summary.json and
    meta.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = AuditFolder(out_dir)
    # A previous summary must not vouch for half-rewritten files if this run is killed.
    forget_finished(folder)
    files.write_parquet(result.overlap, folder.overlap)
    files.write_parquet(result.rows_to_remove, folder.rows_to_remove)
    files.write_jsonl(result.rows_to_remove, folder.rows_to_remove_jsonl)
    deco = folder.decontaminated
    if deco.exists():
        shutil.rmtree(deco)
    deco.mkdir()
    for name, kept in result.decontaminated.items():
        files.write_text("".join(f"{pid}\n" for pid in kept), folder.kept_ids(name))
    if figure:
        save_audit_figure(plot_overlap(result), out_dir / "overlap")
    else:   # a chart left by an earlier audit would not show this one
        for suffix in CHART_SUFFIXES:
            (out_dir / f"overlap{suffix}").unlink(missing_ok=True)
    files.write_json(_summary_doc(result), folder.summary)
    meta = dict(meta or {})
    inputs = meta.pop("inputs", None)
    files.write_meta(out_dir, inputs=inputs, seed=None, stage="audit", **meta)
    return out_dir


def forget_finished(folder: AuditFolder) -> None:
    """Remove the two files that mark an audit finished (they are written last)."""
    folder.meta.unlink(missing_ok=True)
    folder.summary.unlink(missing_ok=True)


def _summary_doc(result: AuditResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "corpus_rows_to_remove": result.n_rows_to_remove,
        "corpus_rows_for_review": result.n_rows_for_review,
        "benchmark_prompts_covered": result.n_prompts_covered,
        "pool_rows": result.pool_rows,
        "near_dup": result.near_dup,
        "threshold": result.threshold,
        "short_words": result.short_words,
        "short_threshold": result.short_threshold,
        "decontamination_drops": result.drops,
        "normalisation": "Unicode NFKC, casefold, punctuation/symbols to space, whitespace "
                         "collapsed (guarddiag.text.normalise)",
        "near_definition": f"word-set Jaccard >= {result.threshold:g} between normal forms "
                           f"(>= {result.short_threshold:g} for benchmark prompts of fewer "
                           f"than {result.short_words} distinct words), no exact overlap; "
                           "prefix-filter join, no pair lost",
    }
    # The template keys appear only when templates were compared: an audit without them writes
    # the same summary.json as before they existed.
    if result.fields:
        doc |= {"text_fields": {k: dict(v) for k, v in result.fields.items()}}
    if result.bad_rows:
        doc |= {"bad_rows": dict(result.bad_rows)}
    if result.near_dup:
        doc |= {"short_prompts": result.short_prompts}
    if result.surrogates:
        doc |= {"lone_surrogates_replaced": result.surrogates}
    if result.templates:
        doc |= {"templates": True, "template_definition": TEMPLATE_DEFINITION}
    if result.containment:
        doc |= {"containment": True, "containment_threshold": result.containment_threshold,
                "containment_definition": CONTAINMENT_DEFINITION.format(
                    t=result.containment_threshold, short=result.short_words),
                "review_rows": result.review_rows,
                "review_definition": REVIEW_DEFINITION.format(short=result.short_words,
                                                              rows=result.review_rows)}
    benches = {}
    for b in result.benchmarks:
        entry = {"n": b.n, "n_exact": b.n_exact, "pct_exact": round(b.pct_exact, 4),
                 "n_near": b.n_near,
                 "pct_near": None if b.pct_near is None else round(b.pct_near, 4)}
        if result.templates:
            entry |= {"n_template": b.n_template,
                      "pct_template": None if b.pct_template is None
                      else round(b.pct_template, 4)}
        if result.containment:
            entry |= {"n_contained": b.n_contained,
                      "pct_contained": None if b.pct_contained is None
                      else round(b.pct_contained, 4), "n_review": b.n_review}
        benches[b.benchmark] = entry | {
            "n_kept": b.n_kept, "pct_removed": round(b.pct_removed, 4), "sha256": b.sha256,
            "examples": list(b.examples)}
    return doc | {
        "benchmarks": benches,
        "benchmark_order": [b.benchmark for b in result.benchmarks],
        "unavailable": {u.benchmark: u.reason for u in result.unavailable},
        "unavailable_prompts": {u.benchmark: u.n for u in result.unavailable},
        "not_searched": result.not_searched(),
        "titles": {k: v for k, v in result.titles.items()
                   if k in {b.benchmark for b in result.benchmarks}
                   or k in {u.benchmark for u in result.unavailable}},
    }


def load_if_current(out_dir: Path, key: str) -> AuditResult | None:
    meta_path = AuditFolder(out_dir).meta
    if not meta_path.is_file():
        return None
    try:
        meta = files.read_json(meta_path)
        if meta.get("cache_key") != key:
            return None
        return load_audit(out_dir)
    except GuarddiagError:
        return None


def load_audit(audit_dir: str | Path) -> AuditResult:
    """Read a finished audit folder back into an :class:`AuditResult`."""
    audit_dir = Path(audit_dir)
    folder = AuditFolder(audit_dir)
    summary_path = folder.summary
    if not summary_path.is_file():
        raise GuarddiagError(f"{summary_path}: no finished audit here (run `guarddiag audit`)")
    doc = files.read_json(summary_path)
    if doc.get("format") != FORMAT_VERSION:
        raise GuarddiagError(f"{summary_path}: audit format {doc.get('format')!r}, expected "
                             f"{FORMAT_VERSION}; rerun `guarddiag audit`")
    kept = load_decontaminated(audit_dir, _doc=doc)
    drops = str(doc["decontamination_drops"]).split("+")
    benches = []
    for name in doc["benchmark_order"]:
        entry = doc["benchmarks"][name]
        benches.append(BenchmarkOverlap(
            benchmark=name, n=entry["n"], n_exact=entry["n_exact"], n_near=entry["n_near"],
            n_kept=entry["n_kept"], sha256=entry["sha256"], examples=tuple(entry["examples"]),
            n_template=entry.get("n_template"), n_contained=entry.get("n_contained"),
            n_review=entry.get("n_review")))
    overlap = files.read_table(folder.overlap)
    remove_path = folder.rows_to_remove
    remove = (pl.read_parquet(remove_path) if remove_path.is_file()
              else pl.DataFrame(schema=REMOVE_SCHEMA))
    deco = {name: tuple(_read_ids(folder.kept_ids(name)))
            for name in kept}
    return AuditResult(
        benchmarks=tuple(benches),
        unavailable=tuple(UnavailableBenchmark(k, v, doc.get("unavailable_prompts", {}).get(k))
                          for k, v in doc["unavailable"].items()),
        bad_rows=doc.get("bad_rows", {}), short_prompts=doc.get("short_prompts", 0),
        overlap=overlap.cast(pl.Schema(OVERLAP_SCHEMA | (
            {"field": pl.String} if "field" in overlap.columns else {}))),
        decontaminated=deco, rows_to_remove=remove,
        fields=doc.get("text_fields", {}), surrogates=doc.get("lone_surrogates_replaced", 0),
        pool_rows=doc["pool_rows"], near_dup=doc["near_dup"], threshold=doc["threshold"],
        drop_near="near" in drops, drop_template="template" in drops,
        templates=bool(doc.get("templates")), out_dir=audit_dir,
        containment=bool(doc.get("containment")),
        containment_threshold=doc.get("containment_threshold", DEFAULT_CONTAINMENT),
        drop_contained="contained" in drops, review_rows=doc.get("review_rows", 0),
        titles=doc.get("titles", {}),
        short_words=doc.get("short_words", DEFAULT_SHORT_WORDS),
        short_threshold=doc.get("short_threshold", DEFAULT_SHORT_THRESHOLD))


def _read_ids(path: Path) -> list[str]:
    if not path.is_file():
        raise GuarddiagError(f"{path}: decontaminated id list missing; rerun `guarddiag audit`")
    return path.read_text(encoding="utf-8").splitlines()


def load_decontaminated(audit_dir: str | Path, *,
                        derived_from: Mapping[str, str] | None = None,
                        _doc: Mapping[str, Any] | None = None) -> dict[str, frozenset[str]]:
    """Prompt ids that survive decontamination, per audited benchmark.

    Benchmarks that were unavailable at audit time are absent from the mapping. Each list is
    checked against the count in summary.json, so a truncated file is an error, not a silently
    smaller benchmark. ``derived_from`` (derived subset → base subset, see
    :func:`guarddiag.data.derived_bases`) makes mutated subsets inherit their base's
    decontamination (:func:`inherit_decontamination`).
    """
    folder = AuditFolder(Path(audit_dir))
    doc = _doc if _doc is not None else files.read_json(folder.summary)
    out: dict[str, frozenset[str]] = {}
    for name in doc.get("benchmark_order", []):
        path = folder.kept_ids(name)
        ids = _read_ids(path)
        expected = doc["benchmarks"][name]["n_kept"]
        if len(ids) != expected or len(set(ids)) != len(ids):
            raise GuarddiagError(f"{path}: {len(ids)} ids, {AuditFolder.SUMMARY} says {expected} "
                                 "unique ids; rerun `guarddiag audit`")
        out[name] = frozenset(ids)
    return inherit_decontamination(out, derived_from or {})


def inherit_decontamination(kept: Mapping[str, frozenset[str]],
                            derived_from: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """A derived (mutated) subset keeps a prompt only where its base prompt survives.

    Mutated rows keep their base prompt's id, so a base prompt found in the pool is
    contaminated in every encoding of it. A derived subset the audit covered itself (its mutated
    text checked against the pool too) keeps the ids that survive both; one it did not cover
    gets its base's list. Derived subsets of an unaudited base are left as they are.
    """
    out = dict(kept)
    for derived, base in derived_from.items():
        if base not in kept:
            continue
        own = kept.get(derived)
        out[derived] = kept[base] if own is None else own & kept[base]
    return out


# ─── figure ────────────────────────────────────────────────────────────────────────────────────

def plot_overlap(result: AuditResult) -> Any:
    """Horizontal bars: % of each benchmark's prompts with an exact overlap and (separately) a
    near duplicate, a template overlap and a contained overlap in the pool. Returns a
    matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(result.benchmarks)
    title = result.titles.get
    labels = [f"{title(b.benchmark, b.benchmark)}  (n={b.n:,})" for b in benches]
    labels += [f"{title(u.benchmark, u.benchmark)}  (not available)" for u in result.unavailable]
    count = len(labels)
    style = {"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7.5,
             "ytick.labelsize": 7.5, "legend.fontsize": 7.5, "font.family": "DejaVu Sans",
             "axes.spines.top": False, "axes.spines.right": False, "svg.hashsalt": "guarddiag"}
    with paper_style(style):
        fig, ax = plt.subplots(figsize=(6.3, 0.8 + 0.28 * max(count, 1)), layout="constrained")
        ys = list(range(count))
        exact = [b.pct_exact for b in benches]
        series = [(exact, [b.n_exact for b in benches], "#2b5d8a",
                   "exact (after normalisation)")]
        if result.near_dup:
            series.append(([b.pct_near or 0.0 for b in benches],
                           [b.n_near or 0 for b in benches], "#e39a3b",
                           f"near duplicate (word-set Jaccard ≥ {result.threshold:g})"))
        if result.templates:
            series.append(([b.pct_template or 0.0 for b in benches],
                           [b.n_template or 0 for b in benches], "#7a9a4a",
                           "template (same sentence, other titles)"))
        if result.containment:
            series.append(([b.pct_contained or 0.0 for b in benches],
                           [b.n_contained or 0 for b in benches], "#8a4f7d",
                           "contained (prompt inside a longer row)"))
        height = {1: 0.6, 2: 0.38, 3: 0.26}.get(len(series), 0.2)
        for i, (pct, counts, color, label) in enumerate(series):
            shift = (i - (len(series) - 1) / 2) * height
            bars = ax.barh([y + shift for y in ys[:len(benches)]], pct, height=height,
                           color=color, label=label)
            _annotate(ax, bars, counts)
        ax.set_yticks(ys, labels)
        ax.set_ylim(count - 0.5, -0.5)
        for tick in ax.get_yticklabels()[len(benches):]:
            tick.set_color("#888888")
        top = max([*exact, *(v for pct, *_ in series[1:] for v in pct), 1.0])
        ax.set_xlim(0, min(100.0, top * 1.18 + 2))
        ax.set_xlabel(f"benchmark prompts found in the {result.pool_rows:,}-row training pool "
                      "(%)")
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        fig.legend(loc="outside upper center", ncols=2, frameon=False)
    return fig


def _annotate(ax: Any, bars: Any, counts: list[int]) -> None:
    for bar, n in zip(bars, counts, strict=True):
        if n:
            ax.annotate(f"{bar.get_width():.1f}% ({n:,})",
                        (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        xytext=(2, 0), textcoords="offset points", va="center", fontsize=6.5)

