"""The contamination audit's per-benchmark overlap, read from the audit's summary.json.

Shares are recomputed from the counts (``n_exact / n``, ``n_near / n``, ``n_template / n``) as
fractions, so the report does not depend on how the audit rounded its percentages. Exact
overlaps, near duplicates and (when the audit compared them) template and contained overlaps
are separate columns (a prompt counts as near, template or contained only when it has no exact
overlap).

:func:`copy_items` scores HarmBench-copyright's two item kinds apart: its lyrics and its book
passages are two templates, and a pool can hold one and not the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from guarddiag.analyses.registry import AnalysisContext, register_analysis
from guarddiag.analyses.scores import compute_scores
from guarddiag.errors import GuarddiagError
from guarddiag.labels import LOOSE, BinaryMapping
from guarddiag.paths import AuditFolder
from guarddiag.protocol import protocol

SCHEMA = {"benchmark": pl.String, "n": pl.Int64, "n_exact": pl.Int64, "share_exact": pl.Float64,
          "n_near": pl.Int64, "share_near": pl.Float64, "n_kept": pl.Int64,
          "sha256": pl.String}


@dataclass(frozen=True)
class ContaminationResult:
    table: pl.DataFrame = field(repr=False)
    pool_rows: int | None
    near_dup: bool
    near_threshold: float | None
    normalisation: str | None
    unavailable: Mapping[str, str]
    examples: Mapping[str, tuple[Mapping[str, Any], ...]] = field(repr=False)
    """Example matched pairs per benchmark (benchmark_text, pool_text, kind, …)."""
    short_words: int | None = None
    """Benchmark prompts with fewer distinct words need ``short_threshold`` for a near
    duplicate (None: an audit from before this rule)."""
    short_threshold: float | None = None
    templates: bool = False
    """The audit compared template forms: the table has ``n_template`` and ``share_template``."""
    template_definition: str | None = None
    containment: bool = False
    """The audit looked for prompts inside longer rows: the table has ``n_contained`` and
    ``share_contained``."""
    containment_definition: str | None = None
    contrast: pl.DataFrame | None = field(default=None, repr=False)
    """Opposite-label contrast pairs per benchmark (:func:`contrast_pairs`), or None where the
    audit's matches, the pool's labels or the benchmarks' kinds are not there."""

    def to_frame(self) -> pl.DataFrame:
        return self.table.clone()

    def sha256(self) -> dict[str, str | None]:
        return dict(zip(self.table["benchmark"].to_list(), self.table["sha256"].to_list(),
                        strict=True))


def contamination_table(summary: Mapping[str, Any], *,
                        source: str = AuditFolder.SUMMARY) -> ContaminationResult:
    benches = summary.get("benchmarks")
    if not isinstance(benches, Mapping):
        raise GuarddiagError(f'{source} field "benchmarks": expected a mapping of benchmark ids')
    order = summary.get("benchmark_order") or sorted(benches)
    templates = bool(summary.get("templates"))
    containment = bool(summary.get("containment"))
    rows, examples = [], {}
    for name in order:
        entry = benches.get(name)
        if not isinstance(entry, Mapping):
            raise GuarddiagError(f'{source} field "benchmarks.{name}": missing or not a mapping')
        try:
            n, n_exact, n_kept = int(entry["n"]), int(entry["n_exact"]), int(entry["n_kept"])
        except (KeyError, TypeError, ValueError) as exc:
            raise GuarddiagError(f'{source} field "benchmarks.{name}": needs integer n, n_exact '
                                 f"and n_kept ({exc.__class__.__name__}: {exc})") from None
        n_near = entry.get("n_near")
        rows.append({"benchmark": str(name), "n": n, "n_exact": n_exact,
                     "share_exact": n_exact / n if n else None,
                     "n_near": None if n_near is None else int(n_near),
                     "share_near": None if n_near is None or not n else int(n_near) / n,
                     "n_kept": n_kept, "sha256": entry.get("sha256")})
        for kind, on in (("template", templates), ("contained", containment)):
            if on:
                count = entry.get(f"n_{kind}")
                rows[-1] |= {f"n_{kind}": None if count is None else int(count),
                             f"share_{kind}": None if count is None or not n else int(count) / n}
        examples[str(name)] = tuple(e for e in entry.get("examples") or ()
                                    if isinstance(e, Mapping))
    schema = (SCHEMA | ({"n_template": pl.Int64, "share_template": pl.Float64} if templates
                        else {})
              | ({"n_contained": pl.Int64, "share_contained": pl.Float64} if containment
                 else {}))
    return ContaminationResult(
        table=pl.DataFrame(rows, schema=schema), pool_rows=summary.get("pool_rows"),
        near_dup=bool(summary.get("near_dup")), near_threshold=summary.get("threshold"),
        normalisation=summary.get("normalisation"),
        unavailable=dict(summary.get("unavailable") or {}), examples=examples,
        short_words=summary.get("short_words"), short_threshold=summary.get("short_threshold"),
        templates=templates, template_definition=summary.get("template_definition"),
        containment=containment, containment_definition=summary.get("containment_definition"))


COPY_ITEM_KINDS = ("lyrics", "passage")
"""HarmBench-copyright's item kinds: the prefix of each prompt id (``lyrics_wonderful_world``,
``passage_snow_crash``; the upstream Tags column says the same, "lyrics" or "book")."""


def copy_items(predictions: pl.DataFrame, *, mapping: BinaryMapping, threshold: float,
               confidence: float, subset: str) -> pl.DataFrame | None:
    """COPY per item kind: each run's capture on HarmBench-copyright's lyrics and passage
    prompts apart, as :func:`~guarddiag.analyses.scores.compute_scores` rows whose
    ``benchmark`` is ``harmbench_copyright:lyrics`` or ``harmbench_copyright:passage`` (an id
    of another prefix goes to ``harmbench_copyright:other``). None when the benchmark was not
    scored or no prompt id names its kind. The benchmark is the protocol's first
    ``policy_content`` one."""
    copy_id = protocol().rank_benchmark
    prefix = pl.col("prompt_id").str.split("_").list.first()
    part = predictions.filter(pl.col("benchmark") == copy_id)
    if not part.select(prefix.is_in(list(COPY_ITEM_KINDS)).any()).item():
        return None
    item = pl.when(prefix.is_in(list(COPY_ITEM_KINDS))).then(prefix).otherwise(pl.lit("other"))
    part = part.with_columns(pl.concat_str([pl.lit(copy_id + ":"), item])
                             .alias("benchmark"))
    kinds = dict.fromkeys(part["benchmark"].unique().to_list(), "harmful")
    scored = compute_scores(part, kinds=kinds, mappings=(mapping,), threshold=threshold,
                            confidence=confidence, source=copy_id)
    return scored.binary(subset=subset, mapping=mapping.name)


CONTRAST_SCHEMA = {"benchmark": pl.String, "n_contrast": pl.Int64,
                   **{f"n_contrast_{k}": pl.Int64 for k in ("near", "template", "contained")}}


def contrast_pairs(matches: pl.DataFrame, pool: pl.DataFrame, kinds: Mapping[str, str], *,
                   mapping: BinaryMapping = LOOSE) -> pl.DataFrame:
    """Opposite-label contrast pairs: benchmark prompts (with no exact overlap) whose every
    near, template or contained match is a pool row labelled, under both policies, on the
    other side of the benchmark's kind (a harmful prompt's benign rewrite, or the reverse):
    not leaks of the prompt's label. Per benchmark: n_contrast (distinct prompts) and, per
    kind, the prompts of that kind whose matches of that kind are all such rows. Benchmarks
    of unknown kind are left out."""
    unsafe = sorted(mapping.unsafe)
    labels = pool.select(pl.col("prompt_id").alias("pool_id"),
                         (pl.col("label_a").is_in(unsafe)).alias("a"),
                         (pl.col("label_b").is_in(unsafe)).alias("b"))
    kind_of = pl.DataFrame({"benchmark": list(kinds), "harmful": [kinds[k] == "harmful"
                                                                   for k in kinds]},
                           schema={"benchmark": pl.String, "harmful": pl.Boolean})
    exact = matches.filter(pl.col("kind") == "exact").select("benchmark", "prompt_id").unique()
    m = (matches.filter(pl.col("kind") != "exact")
         .join(exact, on=["benchmark", "prompt_id"], how="anti")
         .join(kind_of, on="benchmark", how="inner")
         .join(labels, on="pool_id", how="left")
         .with_columns(((pl.col("a") == ~pl.col("harmful")) & (pl.col("b") == ~pl.col("harmful")))
                       .fill_null(False).alias("opposite")))
    per_kind = m.group_by("benchmark", "kind", "prompt_id").agg(pl.col("opposite").all())
    per_prompt = m.group_by("benchmark", "prompt_id").agg(pl.col("opposite").all())
    rows = []
    for bench in sorted(set(m["benchmark"].to_list())):
        row: dict[str, Any] = {"benchmark": bench, "n_contrast": per_prompt.filter(
            (pl.col("benchmark") == bench) & pl.col("opposite")).height}
        for k in ("near", "template", "contained"):
            row[f"n_contrast_{k}"] = per_kind.filter(
                (pl.col("benchmark") == bench) & (pl.col("kind") == k)
                & pl.col("opposite")).height
        rows.append(row)
    return pl.DataFrame(rows, schema=CONTRAST_SCHEMA)


def _contamination(ctx: AnalysisContext) -> ContaminationResult | None:
    """The audit's overlap per benchmark, with its contrast pairs where the audit's matches and
    the pool's labels are there; None without an audit summary."""
    i = ctx.inputs
    if i.audit_summary is None or not i.audit_file:
        return None
    result = contamination_table(i.audit_summary, source=i.audit_file[0])
    if i.audit_matches is None or i.pool is None or not {"label_a", "label_b"} <= set(
            i.pool.columns):
        return result
    return replace(result, contrast=contrast_pairs(i.audit_matches, i.pool, i.kinds))


CONTAMINATION = register_analysis("contamination", _contamination, result=ContaminationResult)
