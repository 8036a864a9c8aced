"""The audit's result objects: per-benchmark overlap counts and the whole audit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

__all__ = [
    "DEFAULT_CONTAINMENT",
    "DEFAULT_REVIEW_ROWS",
    "DEFAULT_SHORT_THRESHOLD",
    "DEFAULT_SHORT_WORDS",
    "DEFAULT_THRESHOLD",
    "FORMAT_VERSION",
    "N_EXAMPLES",
    "OVERLAP_SCHEMA",
    "REMOVE_MATCH",
    "REMOVE_SCHEMA",
    "REVIEW_DEFINITION",
    "SAME_WORDS_NOTE",
    "AuditResult",
    "BenchmarkOverlap",
    "UnavailableBenchmark",
]

DEFAULT_THRESHOLD = 0.8
"""Word-set Jaccard at or above which a pool row is a near duplicate of a benchmark prompt.

0.8 keeps paraphrases that change a word or two of a 10–20-word prompt and rejects prompts that
only share a template ("Generate the lyrics of <title>") with another title."""

DEFAULT_CONTAINMENT = 0.8
"""Share of a benchmark prompt's word 3-grams a pool row must hold to contain it
(:mod:`guarddiag.audit.containment`): one changed word in the middle of a 20-word prompt keeps
15 of its 18 3-grams (0.83) and is found; two changed words keep 12 (0.67) and are left to the
near-duplicate column."""

DEFAULT_REVIEW_ROWS = 3
"""A short prompt found inside the texts of at least this many rows is a common phrase
(:func:`guarddiag.audit.containment.review_common`)."""
REVIEW_DEFINITION = (
    "review = a contained match, listed but not gated, of a common phrase: a prompt of fewer "
    "than {short} words found in the texts of at least {rows} rows of this corpus, whole or "
    "inside ('if you're', 'what is the meaning of X', 'url'); a phrase planted by hand sits "
    "in a few rows; exact matches are never review")
"""How the summary states the review rule (format with ``short`` and ``rows``)."""

DEFAULT_SHORT_WORDS = 10
"""A benchmark prompt with fewer distinct words than this is *short* for near-dup detection."""
DEFAULT_SHORT_THRESHOLD = 0.9
"""The stricter Jaccard a short prompt's near duplicate needs. In a prompt of n distinct words one
changed word gives Jaccard (n − 1)/(n + 1), 0.8 at nine words, and on a short prompt that one
word is often the whole meaning ("… gut a fish" / "… gut a human"); at 0.9 a single changed word
counts only from 19 words up, while an added or repeated word still counts from nine."""
SAME_WORDS_NOTE = "same words, other order"
"""How a near pair with Jaccard 1.0 (equal word sets, different normal forms) is labelled."""

N_EXAMPLES = 3
"""Example pairs kept per benchmark and kind in summary.json."""

OVERLAP_SCHEMA = {"benchmark": pl.String, "prompt_id": pl.String, "pool_id": pl.String,
                  "kind": pl.String, "similarity": pl.Float64}
"""Columns of ``overlap.parquet``: one row per matched (benchmark prompt, pool row) pair."""
REMOVE_MATCH = pl.Struct({"benchmark": pl.String, "prompt_id": pl.String, "kind": pl.String,
                          "similarity": pl.Float64, "field": pl.String})
"""One match of a pool row in ``rows_to_remove.parquet``."""
REMOVE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "pool_id": pl.String, "file": pl.String, "row": pl.Int64, "line": pl.Int64,
    "byte": pl.Int64, "fields": pl.List(pl.String), "texts": pl.List(pl.String),
    "kinds": pl.List(pl.String), "matches": pl.List(REMOVE_MATCH)}
"""Columns of ``rows_to_remove.parquet``: one row per pool row with a match, in pool order —
its id, its address (file, row within the file from 1, physical line from 1 counting blank
lines and byte offset of that line, for JSON lines; null where unknown), the field paths and
texts that matched (``fields`` is null for the one ``text_column``), the kinds, and every
match."""
FORMAT_VERSION = 1
"""Version of the audit folder's layout; a folder of another version is recomputed."""


@dataclass(frozen=True)
class BenchmarkOverlap:
    """Overlap counts of one benchmark subset with the pool."""

    benchmark: str
    n: int
    """Prompts in the subset."""
    n_exact: int
    """Prompts with at least one exact overlap."""
    n_near: int | None
    """Prompts with a near duplicate but no exact overlap; None when near-dup was not run."""
    n_kept: int
    """Prompts left after decontamination."""
    sha256: str | None = None
    """Digest of the subset's source files (from the benchmark loader)."""
    examples: tuple[dict[str, Any], ...] = ()
    """A few matched pairs with both texts, for a reader to eyeball."""
    n_template: int | None = None
    """Prompts with a template overlap but no exact overlap; None when templates were not
    compared (:mod:`guarddiag.audit.template`)."""
    n_contained: int | None = None
    """Prompts contained in a longer pool row but with no exact overlap; None when containment
    was not looked for (:mod:`guarddiag.audit.containment`)."""
    n_review: int | None = None
    """Prompts whose only matches are listed for review (likely chance, not gated); None when
    containment was not looked for."""

    @property
    def pct_exact(self) -> float:
        return _pct(self.n_exact, self.n)

    @property
    def pct_near(self) -> float | None:
        return None if self.n_near is None else _pct(self.n_near, self.n)

    @property
    def pct_template(self) -> float | None:
        return None if self.n_template is None else _pct(self.n_template, self.n)

    @property
    def pct_contained(self) -> float | None:
        return None if self.n_contained is None else _pct(self.n_contained, self.n)

    @property
    def pct_removed(self) -> float:
        """Share of the subset decontamination drops: the figure ``--fail-above`` gates on."""
        return _pct(self.n - self.n_kept, self.n)


@dataclass(frozen=True)
class UnavailableBenchmark:
    """A subset the audit could not read (files absent), with where to get it."""

    benchmark: str
    reason: str
    n: int | None = None
    """Prompts the subset is expected to hold (its manifest's count), when known."""


@dataclass(frozen=True, eq=False)
class AuditResult:
    """Everything one audit found; :meth:`to_frame` gives the per-benchmark table."""

    benchmarks: tuple[BenchmarkOverlap, ...]
    unavailable: tuple[UnavailableBenchmark, ...]
    overlap: pl.DataFrame = field(repr=False)
    """One row per matched pair (schema in the module docstring)."""
    decontaminated: Mapping[str, tuple[str, ...]] = field(repr=False)
    """Surviving prompt ids per benchmark, in benchmark order."""
    pool_rows: int
    near_dup: bool
    threshold: float
    drop_near: bool
    out_dir: Path | None = None
    short_words: int = DEFAULT_SHORT_WORDS
    """Prompts with fewer distinct words need ``short_threshold`` to have a near duplicate."""
    short_threshold: float = DEFAULT_SHORT_THRESHOLD
    titles: Mapping[str, str] = field(default_factory=dict)
    """Readable subset names (manifest titles) for figures; ids when absent."""
    templates: bool = False
    """Template overlaps were looked for (``n_template`` per benchmark)."""
    drop_template: bool = False
    """Decontamination drops template overlaps too."""
    containment: bool = False
    """Contained overlaps were looked for (``n_contained`` per benchmark)."""
    containment_threshold: float = DEFAULT_CONTAINMENT
    """Share of a prompt's word 3-grams a pool row must hold to contain it."""
    drop_contained: bool = False
    """Decontamination drops contained overlaps too."""
    review_rows: int = 0
    """A short prompt found inside this many rows is a common phrase, its matches review."""
    rows_to_remove: pl.DataFrame = field(
        repr=False, default_factory=lambda: pl.DataFrame(schema=REMOVE_SCHEMA))
    """One row per pool row with a match (:data:`REMOVE_SCHEMA`)."""
    fields: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Per nested text field: rows ``with_text``, ``missing`` (absent or null), ``empty``."""
    surrogates: int = 0
    """Lone surrogates the reader replaced by U+FFFD."""
    bad_rows: Mapping[str, int] = field(default_factory=dict)
    """Bad rows per kind (:mod:`~guarddiag.audit.badrows`; empty when there were none)."""
    short_prompts: int = 0
    """Benchmark prompts of fewer than ``short_words`` distinct words (their near duplicates
    need ``short_threshold``)."""

    @property
    def n_rows_to_remove(self) -> int:
        """Rows of rows_to_remove with a match other than ``review``."""
        return self.rows_to_remove.height - self.n_rows_for_review

    @property
    def n_rows_for_review(self) -> int:
        """Rows of rows_to_remove whose every match is listed for review (likely chance)."""
        if not self.rows_to_remove.height:
            return 0
        only = self.rows_to_remove.get_column("kinds").list.eval(pl.element() == "review")
        return int(only.list.all().sum())

    @property
    def n_prompts_covered(self) -> int:
        """Benchmark prompts the rows to remove match (each benchmark's prompts counted),
        matches for review left out."""
        return (self.overlap.filter(pl.col("kind") != "review")
                .select("benchmark", "prompt_id").unique().height)

    def to_frame(self) -> pl.DataFrame:
        """Per benchmark: counts and percentages (``n_template``, ``pct_template`` only when
        templates were compared)."""
        schema = {"benchmark": pl.String, "n": pl.Int64, "n_exact": pl.Int64,
                  "pct_exact": pl.Float64, "n_near": pl.Int64, "pct_near": pl.Float64,
                  "n_kept": pl.Int64, "pct_removed": pl.Float64}
        rows = [{"benchmark": b.benchmark, "n": b.n, "n_exact": b.n_exact,
                 "pct_exact": b.pct_exact, "n_near": b.n_near, "pct_near": b.pct_near,
                 "n_kept": b.n_kept, "pct_removed": b.pct_removed} for b in self.benchmarks]
        if self.templates:
            schema |= {"n_template": pl.Int64, "pct_template": pl.Float64}
            for row, b in zip(rows, self.benchmarks, strict=True):
                row |= {"n_template": b.n_template, "pct_template": b.pct_template}
        if self.containment:
            schema |= {"n_contained": pl.Int64, "pct_contained": pl.Float64,
                       "n_review": pl.Int64}
            for row, b in zip(rows, self.benchmarks, strict=True):
                row |= {"n_contained": b.n_contained, "pct_contained": b.pct_contained,
                        "n_review": b.n_review}
        return pl.DataFrame(rows, schema=schema)

    @property
    def drops(self) -> str:
        """What decontamination drops: ``exact``, then ``+near``, ``+template`` and
        ``+contained`` as chosen (``exact+near+template+contained`` at most)."""
        return "+".join(k for k, on in (("exact", True), ("near", self.drop_near),
                                        ("template", self.drop_template),
                                        ("contained", self.drop_contained)) if on)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the corpus rows to remove and the prompts they hold, options,
        per-benchmark counts (as :meth:`to_frame`), unavailable subsets with their reasons, and
        the surviving prompt ids per benchmark."""
        doc: dict[str, Any] = {
            "corpus_rows_to_remove": self.n_rows_to_remove,
            "corpus_rows_for_review": self.n_rows_for_review, "bad_rows": dict(self.bad_rows),
            "not_searched": self.not_searched(),
            "benchmark_prompts_covered": self.n_prompts_covered,
            "pool_rows": self.pool_rows, "near_dup": self.near_dup,
            "threshold": self.threshold, "short_words": self.short_words,
            "short_threshold": self.short_threshold, "drop_near": self.drop_near}
        if self.templates:
            doc |= {"templates": True, "drop_template": self.drop_template}
        if self.containment:
            doc |= {"containment": True, "containment_threshold": self.containment_threshold,
                    "drop_contained": self.drop_contained}
        return doc | {"out_dir": None if self.out_dir is None else str(self.out_dir),
                      "benchmarks": self.to_frame().to_dicts(),
                      "unavailable": [{"benchmark": u.benchmark, "reason": u.reason}
                                      for u in self.unavailable],
                      "decontaminated": {k: list(v) for k, v in self.decontaminated.items()}}

    def above(self, pct: float) -> list[BenchmarkOverlap]:
        """Benchmarks whose decontamination removes more than ``pct`` percent of prompts."""
        return [b for b in self.benchmarks if b.pct_removed > pct]

    @property
    def skipped_rows(self) -> int:
        """Bad rows not audited at all (malformed lines, rows holding a wrong-typed value)."""
        return self.bad_rows.get("malformed", 0) + self.bad_rows.get("wrong_type", 0)

    @property
    def fields_without_text(self) -> tuple[str, ...]:
        """The nested text fields that held text in no row (a wrong path, most likely)."""
        return tuple(name for name, c in self.fields.items() if c.get("with_text", 0) == 0)

    def not_searched(self) -> list[str]:
        """What the audit did not search (``not searched: ...``), or searched less closely
        (``searched less closely: ...``), one line each: the summary states them whatever the
        gates say (``--quiet`` included)."""
        never, less = [], []
        if self.unavailable:
            never.append("benchmarks unavailable: " + ", ".join(
                u.benchmark + ("" if u.n is None else f" ({u.n:,} prompts)")
                for u in self.unavailable))
        never += [f"field {name}: text in no row (check the path)"
                  for name in self.fields_without_text]
        if self.skipped_rows:
            never.append(f"{self.skipped_rows:,} bad rows skipped (bad_rows.jsonl)")
        if not self.containment:
            never.append("prompts inside longer texts (containment off: whole texts only)")
        fallback = self.bad_rows.get("missing_id", 0) + self.bad_rows.get("repeated_id", 0)
        if fallback:
            less.append(f"{fallback:,} rows without a unique id, named by their address "
                        "(bad_rows.jsonl)")
        if self.near_dup and self.short_words > 0 and self.short_prompts:
            less.append(f"{self.short_prompts:,} prompts of fewer than {self.short_words} "
                        f"distinct words need Jaccard ≥ {self.short_threshold:g} to be near")
        return ([f"not searched: {line}" for line in never]
                + [f"searched less closely: {line}" for line in less])

    def render(self) -> str:
        """The per-benchmark table as fixed-width text (what ``guarddiag audit`` prints)."""
        short = (f" (≥ {self.short_threshold:g} for prompts under {self.short_words} words)"
                 if self.short_words > 0 else "")
        near = (f"near = word-set Jaccard ≥ {self.threshold:g}{short}" if self.near_dup
                else "near-dup off")
        template = "; template = same sentence, other titles" if self.templates else ""
        if self.containment:
            template += (f"; contained = the prompt in one text: ≤ 5 words as a phrase, more "
                         f"with ≤ 1 word substituted in place, or ≥ "
                         f"{self.containment_threshold:g} of its word 3-grams")
        remove = (f"corpus rows to remove: {self.n_rows_to_remove:,} of {self.pool_rows:,} "
                  f"(they hold {self.n_prompts_covered:,} benchmark prompts; listed in "
                  "rows_to_remove.parquet)")
        review = ([f"listed for review, not gated: {self.n_rows_for_review:,} rows whose only "
                   "matches are likely chance (" + REVIEW_DEFINITION.format(
                       short=self.short_words, rows=self.review_rows) + ")"]
                  if self.n_rows_for_review else [])
        fields = [f"field {name}: text in {c['with_text']:,} rows, {c['missing']:,} missing, "
                  f"{c['empty']:,} empty (skipped)" for name, c in self.fields.items()]
        lines = [remove, *fields,
                 f"pool: {self.pool_rows:,} rows; exact = equal after normalisation; {near}"
                 f"{template}; decontamination drops {self.drops.replace('+', ' + ')}",
                 *self.not_searched(), *review,
                 f"{'benchmark':<28}{'n':>7}{'exact':>8}{'%':>7}{'near':>7}{'%':>7}"
                 + (f"{'templ':>7}{'%':>7}" if self.templates else "")
                 + (f"{'contd':>7}{'%':>7}" if self.containment else "") + f"{'kept':>7}"]
        for b in self.benchmarks:
            near_n = "—" if b.n_near is None else f"{b.n_near:,}"
            near_p = "—" if b.pct_near is None else f"{b.pct_near:.1f}"
            tmpl = ("" if not self.templates else
                    f"{b.n_template or 0:>7,}{b.pct_template or 0.0:>7.1f}")
            if self.containment:
                tmpl += f"{b.n_contained or 0:>7,}{b.pct_contained or 0.0:>7.1f}"
            lines.append(f"{b.benchmark:<28}{b.n:>7,}{b.n_exact:>8,}{b.pct_exact:>7.1f}"
                         f"{near_n:>7}{near_p:>7}{tmpl}{b.n_kept:>7,}")
        for u in self.unavailable:
            lines.append(f"{u.benchmark:<28} unavailable ({u.reason})")
        return "\n".join(lines)


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0

