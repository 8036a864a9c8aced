"""Contamination audit: which benchmark prompts also sit in a training pool.

For every benchmark subset the audit counts

* **exact** overlaps: a pool row whose normal form (:func:`guarddiag.text.normalise`: Unicode
  NFKC, casefold, punctuation and symbols to spaces, whitespace collapsed) equals the benchmark
  prompt's normal form;
* **near** duplicates (``near_dup=True``), a separate column: a pool row whose word set
  (:func:`guarddiag.text.word_set`) has Jaccard similarity ≥ ``threshold`` (default 0.8) with the
  prompt's, and that is not an exact overlap. Found by prefix filtering
  (:mod:`guarddiag.audit.neardup`), which reports exactly the pairs a brute-force scan would.
  A benchmark prompt counts as near only when it has no exact overlap, so exact + near never
  double-count.

It then writes, to ``out_dir`` (default ``work/audit/``)::

    overlap.parquet            one row per matched (benchmark prompt, pool row) pair:
                               benchmark, prompt_id, pool_id, kind ("exact" | "near"), similarity
                               (1.0 for exact, the word-set Jaccard for near)
    decontaminated/<id>.txt    the benchmark's prompt ids that survive, one per line, in order
    summary.json               per benchmark: n, n_exact, pct_exact, n_near, pct_near, n_kept,
                               pct_removed, sha256, examples; unavailable subsets with the reason
    overlap.png, overlap.pdf   bar chart: exact and near % per benchmark
    meta.json                  input digests, options, versions

Decontamination drops exact overlaps (as in the study); ``drop_near=True`` drops near duplicates
too. ``summary.json`` and ``meta.json`` are written last, and a rerun with the same inputs and
options finds them and returns the saved result instead of recomputing.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from guarddiag import files
from guarddiag.audit.neardup import check_threshold, similar_pairs
from guarddiag.errors import GuarddiagError, at
from guarddiag.progress import say
from guarddiag.text import normalise, words_of_normal_form

__all__ = [
    "DEFAULT_THRESHOLD",
    "AuditResult",
    "BenchmarkOverlap",
    "UnavailableBenchmark",
    "audit_frames",
    "audit_pool",
    "load_audit",
    "load_decontaminated",
    "plot_overlap",
    "read_pool",
]

DEFAULT_THRESHOLD = 0.8
"""Word-set Jaccard at or above which a pool row is a near duplicate of a benchmark prompt.

0.8 keeps paraphrases that change a word or two of a 10–20-word prompt and rejects prompts that
only share a template ("Generate the lyrics of <title>") with another title."""

N_EXAMPLES = 3
"""Example pairs kept per benchmark and kind in summary.json."""

_EXAMPLE_CHARS = 300
_OVERLAP_SCHEMA = {"benchmark": pl.String, "prompt_id": pl.String, "pool_id": pl.String,
                   "kind": pl.String, "similarity": pl.Float64}
_FORMAT_VERSION = 1


# ─── result objects ────────────────────────────────────────────────────────────────────────────

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

    @property
    def pct_exact(self) -> float:
        return _pct(self.n_exact, self.n)

    @property
    def pct_near(self) -> float | None:
        return None if self.n_near is None else _pct(self.n_near, self.n)

    @property
    def pct_removed(self) -> float:
        """Share of the subset decontamination drops: the figure ``--fail-above`` gates on."""
        return _pct(self.n - self.n_kept, self.n)


@dataclass(frozen=True)
class UnavailableBenchmark:
    """A subset the audit could not read (files absent), with where to get it."""

    benchmark: str
    reason: str


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
    titles: Mapping[str, str] = field(default_factory=dict)
    """Readable subset names (manifest titles) for figures; ids when absent."""

    def to_frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            [{"benchmark": b.benchmark, "n": b.n, "n_exact": b.n_exact,
              "pct_exact": b.pct_exact, "n_near": b.n_near, "pct_near": b.pct_near,
              "n_kept": b.n_kept, "pct_removed": b.pct_removed} for b in self.benchmarks],
            schema={"benchmark": pl.String, "n": pl.Int64, "n_exact": pl.Int64,
                    "pct_exact": pl.Float64, "n_near": pl.Int64, "pct_near": pl.Float64,
                    "n_kept": pl.Int64, "pct_removed": pl.Float64})

    def above(self, pct: float) -> list[BenchmarkOverlap]:
        """Benchmarks whose decontamination removes more than ``pct`` percent of prompts."""
        return [b for b in self.benchmarks if b.pct_removed > pct]

    def render(self) -> str:
        """The per-benchmark table as fixed-width text (what ``guarddiag audit`` prints)."""
        near = (f"near = word-set Jaccard ≥ {self.threshold:g}" if self.near_dup
                else "near-dup off")
        lines = [f"pool: {self.pool_rows:,} rows; exact = equal after normalisation; {near}; "
                 f"decontamination drops {'exact + near' if self.drop_near else 'exact'}",
                 f"{'benchmark':<28}{'n':>7}{'exact':>8}{'%':>7}{'near':>7}{'%':>7}{'kept':>7}"]
        for b in self.benchmarks:
            near_n = "—" if b.n_near is None else f"{b.n_near:,}"
            near_p = "—" if b.pct_near is None else f"{b.pct_near:.1f}"
            lines.append(f"{b.benchmark:<28}{b.n:>7,}{b.n_exact:>8,}{b.pct_exact:>7.1f}"
                         f"{near_n:>7}{near_p:>7}{b.n_kept:>7,}")
        for u in self.unavailable:
            lines.append(f"{u.benchmark:<28} unavailable ({u.reason})")
        return "\n".join(lines)


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


# ─── reading the pool ──────────────────────────────────────────────────────────────────────────

def read_pool(path: str | Path, *, text_column: str = "text",
              id_column: str | None = "prompt_id") -> tuple[list[str], list[str]]:
    """Read (ids, texts) of a pool table (parquet, CSV/TSV, JSON lines), checking every row.

    ``id_column=None`` numbers rows from 1. One-line errors name the file, the row (1-based data
    row) and the field: missing column, empty or null text, non-UTF-8 bytes, duplicate ids.
    """
    path = Path(path)
    needed = [text_column] + ([id_column] if id_column is not None else [])
    df = files.read_table(path, columns=needed)
    texts = _text_values(df, path, text_column)
    if id_column is None:
        ids = [str(i) for i in range(1, df.height + 1)]
    else:
        ids = _id_values(df, path, id_column)
    if not texts:
        raise GuarddiagError(f"{path}: the pool has no rows")
    return ids, texts


def _text_values(df: pl.DataFrame, path: Path, column: str) -> list[str]:
    series = df.get_column(column)
    if series.dtype == pl.Binary:
        # Parquet "binary" columns arrive undecoded; find the first row that is not UTF-8.
        decoded = []
        for row, raw in enumerate(series.to_list(), start=1):
            if raw is None:
                decoded.append(None)
                continue
            try:
                decoded.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise GuarddiagError(f"{at(path, row=row, field=column)}: not UTF-8 text "
                                     f"(byte {exc.start})") from None
        series = pl.Series(column, decoded, dtype=pl.String)
    elif series.dtype != pl.String:
        raise GuarddiagError(f"{at(path, field=column)}: expected text, found {series.dtype} "
                             "values")
    blank = series.is_null() | (series.str.strip_chars().str.len_chars() == 0)
    if blank.any():
        row = int(blank.arg_max()) + 1
        count = int(blank.sum())
        more = f" ({count} empty rows in all)" if count > 1 else ""
        raise GuarddiagError(f"{at(path, row=row, field=column)}: empty text; every pool row "
                             f"needs a non-empty prompt{more}")
    return series.to_list()


def _id_values(df: pl.DataFrame, path: Path, column: str) -> list[str]:
    series = df.get_column(column)
    if series.dtype not in (pl.String, pl.Int64, pl.Int32, pl.UInt64, pl.UInt32, pl.Int16,
                            pl.Int8, pl.UInt16, pl.UInt8):
        raise GuarddiagError(f"{at(path, field=column)}: expected string or integer ids, found "
                             f"{series.dtype}")
    series = series.cast(pl.String)
    if series.is_null().any():
        row = int(series.is_null().arg_max()) + 1
        raise GuarddiagError(f"{at(path, row=row, field=column)}: missing id")
    dup = series.is_duplicated()
    if dup.any():
        first = int(dup.arg_max())
        value = series[first]
        rows = (pl.arange(1, df.height + 1, eager=True).filter(series == value)).to_list()
        raise GuarddiagError(f"{at(path, row=rows[1], field=column)}: duplicate id {value!r} "
                             f"(also row {rows[0]}); ids must be unique")
    return series.to_list()


# ─── the audit itself ──────────────────────────────────────────────────────────────────────────

def audit_frames(pool_ids: Sequence[str], pool_texts: Sequence[str],
                 benchmarks: Mapping[str, pl.DataFrame], *, near_dup: bool = False,
                 threshold: float = DEFAULT_THRESHOLD, drop_near: bool = False,
                 sha256: Mapping[str, str] | None = None,
                 unavailable: Sequence[UnavailableBenchmark] = ()) -> AuditResult:
    """Audit pool rows against benchmark frames (columns ``prompt_id``, ``text``); writes nothing.

    Pool ids must be unique and texts non-empty (:func:`read_pool` checks both).
    """
    threshold = check_threshold(threshold)
    if drop_near and not near_dup:
        raise GuarddiagError("drop_near needs near_dup: near duplicates are only found with "
                             "near_dup=True")
    if len(pool_ids) != len(pool_texts):
        raise GuarddiagError(f"{len(pool_ids)} pool ids for {len(pool_texts)} texts")
    names = list(benchmarks)
    bench_ids: list[list[str]] = []
    bench_texts: list[list[str]] = []
    for name in names:
        frame = benchmarks[name]
        missing = [c for c in ("prompt_id", "text") if c not in frame.columns]
        if missing:
            raise GuarddiagError(f"benchmark {name}: missing column(s) {', '.join(missing)}")
        bench_ids.append(frame.get_column("prompt_id").cast(pl.String).to_list())
        bench_texts.append(frame.get_column("text").to_list())

    # One normal form per benchmark prompt; prompts with the same form share every match.
    key_of: dict[str, int] = {}
    keyed: list[tuple[int, int, int]] = []   # (key, benchmark index, row)
    for b, texts in enumerate(bench_texts):
        for row, text in enumerate(texts):
            form = normalise(text)
            if form:
                keyed.append((key_of.setdefault(form, len(key_of)), b, row))
    forms = list(key_of)
    members: list[list[tuple[int, int]]] = [[] for _ in forms]
    for key, b, row in keyed:
        members[key].append((b, row))

    say(f"audit: normalising {len(pool_texts):,} pool rows")
    pool_forms = [normalise(t) for t in pool_texts]
    # (key, pool row, kind, similarity); pool rows with the same normal form share matches.
    matches: list[tuple[int, int, str, float]] = []
    for p, form in enumerate(pool_forms):
        key = key_of.get(form)
        if key is not None:
            matches.append((key, p, "exact", 1.0))

    if near_dup:
        unique_forms = list(dict.fromkeys(f for f in pool_forms if f))
        say(f"audit: near-duplicate join of {len(unique_forms):,} distinct pool texts × "
            f"{len(forms):,} benchmark texts (word-set Jaccard ≥ {threshold:g})")
        pairs = similar_pairs([frozenset(words_of_normal_form(f)) for f in forms],
                              [frozenset(words_of_normal_form(f)) for f in unique_forms],
                              threshold=threshold)
        near_of: dict[str, list[tuple[int, float]]] = {}
        for key, u, similarity in pairs:
            if unique_forms[u] != forms[key]:   # equal forms are exact overlaps
                near_of.setdefault(unique_forms[u], []).append((key, similarity))
        for p, form in enumerate(pool_forms):
            for key, similarity in near_of.get(form, ()):
                matches.append((key, p, "near", similarity))

    # Expand to (benchmark, prompt) pairs, ordered by benchmark, prompt, kind, pool row.
    expanded = sorted((b, row, kind != "exact", p, similarity)
                      for key, p, kind, similarity in matches for b, row in members[key])
    by_bench: dict[int, list[tuple[int, bool, int, float]]] = {}
    for b, row, is_near, p, similarity in expanded:
        by_bench.setdefault(b, []).append((row, is_near, p, similarity))

    results: list[BenchmarkOverlap] = []
    decontaminated: dict[str, tuple[str, ...]] = {}
    for b, name in enumerate(names):
        part = by_bench.get(b, [])
        exact_rows = {row for row, is_near, _, _ in part if not is_near}
        near_rows = {row for row, is_near, _, _ in part if is_near} - exact_rows
        dropped = exact_rows | near_rows if drop_near else exact_rows
        ids = bench_ids[b]
        decontaminated[name] = tuple(pid for row, pid in enumerate(ids) if row not in dropped)
        results.append(BenchmarkOverlap(
            benchmark=name, n=len(ids), n_exact=len(exact_rows),
            n_near=len(near_rows) if near_dup else None, n_kept=len(decontaminated[name]),
            sha256=(sha256 or {}).get(name),
            examples=_examples(part, ids, bench_texts[b], pool_ids, pool_texts)))

    overlap = pl.DataFrame(
        {"benchmark": [names[b] for b, *_ in expanded],
         "prompt_id": [bench_ids[b][row] for b, row, *_ in expanded],
         "pool_id": [pool_ids[p] for _, _, _, p, _ in expanded],
         "kind": ["near" if is_near else "exact" for _, _, is_near, _, _ in expanded],
         "similarity": [similarity for *_, similarity in expanded]},
        schema=_OVERLAP_SCHEMA)
    return AuditResult(benchmarks=tuple(results), unavailable=tuple(unavailable),
                       overlap=overlap, decontaminated=decontaminated,
                       pool_rows=len(pool_texts), near_dup=near_dup, threshold=threshold,
                       drop_near=drop_near)


def _examples(part: list[tuple[int, bool, int, float]], ids: list[str], texts: list[str],
              pool_ids: Sequence[str], pool_texts: Sequence[str]) -> tuple[dict[str, Any], ...]:
    out = []
    for want_near in (False, True):
        # One example per benchmark prompt, first prompts first: the reader sees distinct items.
        seen: set[int] = set()
        for row, is_near, p, similarity in part:
            if is_near != want_near or row in seen:
                continue
            seen.add(row)
            out.append({"kind": "near" if is_near else "exact", "prompt_id": ids[row],
                        "pool_id": pool_ids[p], "similarity": round(similarity, 4),
                        "benchmark_text": _clip(texts[row]), "pool_text": _clip(pool_texts[p])})
            if len(seen) == N_EXAMPLES:
                break
    return tuple(out)


def _clip(text: str) -> str:
    return text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS - 1] + "…"


def audit_pool(pool: str | Path, *, text_column: str = "text",
               id_column: str | None = "prompt_id", benchmarks: str | Sequence[str] = "all",
               data_dir: str | Path | None = None, derived_dir: str | Path | None = None,
               near_dup: bool = False, threshold: float = DEFAULT_THRESHOLD,
               drop_near: bool = False, out_dir: str | Path, force: bool = False,
               figure: bool = True) -> AuditResult:
    """Audit a pool file against benchmark subsets and write the results to ``out_dir``.

    ``benchmarks`` is ``"all"``, ``"study"``, a comma-separated string or a list of subset ids;
    subsets whose files are absent are listed in ``AuditResult.unavailable``. A rerun with the
    same pool, benchmark files and options returns the saved result (``force=True`` recomputes).

    Example (CPU, seconds)::

        audit_pool("work/pool/pool.parquet", near_dup=True, out_dir="work/audit")
    """
    from guarddiag import data

    pool = Path(pool)
    out_dir = Path(out_dir)
    threshold = check_threshold(threshold)
    if drop_near and not near_dup:
        raise GuarddiagError("--drop-near needs --near-dup: near duplicates are only found "
                             "with --near-dup")
    if not pool.is_file():
        raise GuarddiagError(f"{pool}: pool file not found")
    bench_set = data.load_benchmarks(benchmarks, data_dir=data_dir, derived_dir=derived_dir)
    unavailable = tuple(UnavailableBenchmark(benchmark=s.id, reason=_reason(s))
                        for s in bench_set.unavailable)
    pool_sha = files.sha256_file(pool)
    options = {"text_column": text_column, "id_column": id_column, "near_dup": near_dup,
               "threshold": threshold, "drop_near": drop_near}
    key = _cache_key(pool_sha, bench_set.sha256, list(bench_set.frames), unavailable, options)
    if not force:
        cached = _load_if_current(out_dir, key)
        if cached is not None:
            say(f"audit: {out_dir} is up to date with this pool and these benchmarks "
                "(use --force to recompute)")
            return cached

    ids, texts = read_pool(pool, text_column=text_column, id_column=id_column)
    result = audit_frames(ids, texts, bench_set.frames, near_dup=near_dup, threshold=threshold,
                          drop_near=drop_near, sha256=bench_set.sha256, unavailable=unavailable)
    manifests = data.load_manifests(derived_dir=derived_dir)
    result = replace(result, titles={k: m.title for k, m in manifests.items()})
    write_audit(result, out_dir, figure=figure,
                meta={"inputs": {"pool": pool_sha, **{f"benchmark:{k}": v
                                                      for k, v in bench_set.sha256.items()}},
                      "pool_path": str(pool), "options": options, "cache_key": key})
    return replace(result, out_dir=out_dir)


def _reason(status: Any) -> str:
    # data.SubsetStatus: "unavailable" means files absent; keep where to get them on one line.
    source = getattr(status, "source", None)
    if getattr(status, "status", None) == "unavailable" and source:
        return f"files absent; public source: {source}"
    return str(getattr(status, "message", None) or "files absent")


def _cache_key(pool_sha: str, bench_sha: Mapping[str, str], names: list[str],
               unavailable: Sequence[UnavailableBenchmark], options: Mapping[str, Any]) -> str:
    # The code version is part of the key: a changed audit must not reuse an old folder.
    doc = {"format": _FORMAT_VERSION, "code": files.package_versions().get("guarddiag"),
           "git": files.git_sha(), "pool": pool_sha, "benchmarks": names,
           "sha256": dict(bench_sha), "unavailable": [u.benchmark for u in unavailable],
           "options": dict(options)}
    return hashlib.sha256(files.dumps_json(doc).encode()).hexdigest()


# ─── writing and reading the audit folder ──────────────────────────────────────────────────────

def write_audit(result: AuditResult, out_dir: str | Path, *, figure: bool = True,
                meta: Mapping[str, Any] | None = None) -> Path:
    """Write overlap.parquet, decontaminated/, the figure, then summary.json and meta.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # A previous summary must not vouch for half-rewritten files if this run is killed.
    for name in ("meta.json", "summary.json"):
        (out_dir / name).unlink(missing_ok=True)
    files.write_parquet(result.overlap, out_dir / "overlap.parquet")
    deco = out_dir / "decontaminated"
    if deco.exists():
        shutil.rmtree(deco)
    deco.mkdir()
    for name, kept in result.decontaminated.items():
        files.write_text("".join(f"{pid}\n" for pid in kept), deco / f"{name}.txt")
    if figure:
        fig = plot_overlap(result)
        _save_figure(fig, out_dir / "overlap")
    files.write_json(_summary_doc(result), out_dir / "summary.json")
    meta = dict(meta or {})
    inputs = meta.pop("inputs", None)
    files.write_meta(out_dir, inputs=inputs, seed=None, stage="audit", **meta)
    return out_dir


def _summary_doc(result: AuditResult) -> dict[str, Any]:
    return {
        "format": _FORMAT_VERSION,
        "pool_rows": result.pool_rows,
        "near_dup": result.near_dup,
        "threshold": result.threshold,
        "decontamination_drops": "exact+near" if result.drop_near else "exact",
        "normalisation": "Unicode NFKC, casefold, punctuation/symbols to space, whitespace "
                         "collapsed (guarddiag.text.normalise)",
        "near_definition": f"word-set Jaccard >= {result.threshold:g} between normal forms, "
                           "no exact overlap; prefix-filter join, no pair lost",
        "benchmarks": {b.benchmark: {
            "n": b.n, "n_exact": b.n_exact, "pct_exact": round(b.pct_exact, 4),
            "n_near": b.n_near, "pct_near": None if b.pct_near is None else round(b.pct_near, 4),
            "n_kept": b.n_kept, "pct_removed": round(b.pct_removed, 4), "sha256": b.sha256,
            "examples": list(b.examples)} for b in result.benchmarks},
        "benchmark_order": [b.benchmark for b in result.benchmarks],
        "unavailable": {u.benchmark: u.reason for u in result.unavailable},
        "titles": {k: v for k, v in result.titles.items()
                   if k in {b.benchmark for b in result.benchmarks}
                   or k in {u.benchmark for u in result.unavailable}},
    }


def _load_if_current(out_dir: Path, key: str) -> AuditResult | None:
    meta_path = out_dir / "meta.json"
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
    summary_path = audit_dir / "summary.json"
    if not summary_path.is_file():
        raise GuarddiagError(f"{summary_path}: no finished audit here (run `guarddiag audit`)")
    doc = files.read_json(summary_path)
    if doc.get("format") != _FORMAT_VERSION:
        raise GuarddiagError(f"{summary_path}: audit format {doc.get('format')!r}, expected "
                             f"{_FORMAT_VERSION}; rerun `guarddiag audit`")
    kept = load_decontaminated(audit_dir, _doc=doc)
    benches = []
    for name in doc["benchmark_order"]:
        entry = doc["benchmarks"][name]
        benches.append(BenchmarkOverlap(
            benchmark=name, n=entry["n"], n_exact=entry["n_exact"], n_near=entry["n_near"],
            n_kept=entry["n_kept"], sha256=entry["sha256"], examples=tuple(entry["examples"])))
    overlap = files.read_table(audit_dir / "overlap.parquet")
    deco = {name: tuple(_read_ids(audit_dir / "decontaminated" / f"{name}.txt"))
            for name in kept}
    return AuditResult(
        benchmarks=tuple(benches),
        unavailable=tuple(UnavailableBenchmark(k, v) for k, v in doc["unavailable"].items()),
        overlap=overlap.cast(_OVERLAP_SCHEMA), decontaminated=deco,
        pool_rows=doc["pool_rows"], near_dup=doc["near_dup"], threshold=doc["threshold"],
        drop_near=doc["decontamination_drops"] == "exact+near", out_dir=audit_dir,
        titles=doc.get("titles", {}))


def _read_ids(path: Path) -> list[str]:
    if not path.is_file():
        raise GuarddiagError(f"{path}: decontaminated id list missing; rerun `guarddiag audit`")
    return path.read_text(encoding="utf-8").splitlines()


def load_decontaminated(audit_dir: str | Path, *,
                        _doc: Mapping[str, Any] | None = None) -> dict[str, frozenset[str]]:
    """Prompt ids that survive decontamination, per audited benchmark.

    Benchmarks that were unavailable at audit time are absent from the mapping. Each list is
    checked against the count in summary.json, so a truncated file is an error, not a silently
    smaller benchmark.
    """
    audit_dir = Path(audit_dir)
    summary_path = audit_dir / "summary.json"
    doc = _doc if _doc is not None else files.read_json(summary_path)
    out: dict[str, frozenset[str]] = {}
    for name in doc.get("benchmark_order", []):
        path = audit_dir / "decontaminated" / f"{name}.txt"
        ids = _read_ids(path)
        expected = doc["benchmarks"][name]["n_kept"]
        if len(ids) != expected or len(set(ids)) != len(ids):
            raise GuarddiagError(f"{path}: {len(ids)} ids, summary.json says {expected} "
                                 "unique ids; rerun `guarddiag audit`")
        out[name] = frozenset(ids)
    return out


# ─── figure ────────────────────────────────────────────────────────────────────────────────────

def plot_overlap(result: AuditResult) -> Any:
    """Horizontal bars: % of each benchmark's prompts with an exact overlap and (separately) a
    near duplicate in the pool. Returns a matplotlib Figure."""
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
    with plt.rc_context(style):
        fig, ax = plt.subplots(figsize=(6.3, 0.8 + 0.28 * max(count, 1)), layout="constrained")
        ys = list(range(count))
        height = 0.38 if result.near_dup else 0.6
        exact = [b.pct_exact for b in benches]
        off = height / 2 if result.near_dup else 0.0
        bars = ax.barh([y - off for y in ys[:len(benches)]], exact, height=height,
                       color="#2b5d8a", label="exact (after normalisation)")
        _annotate(ax, bars, [b.n_exact for b in benches])
        if result.near_dup:
            near = [b.pct_near or 0.0 for b in benches]
            bars = ax.barh([y + off for y in ys[:len(benches)]], near, height=height,
                           color="#e39a3b",
                           label=f"near duplicate (word-set Jaccard ≥ {result.threshold:g})")
            _annotate(ax, bars, [b.n_near or 0 for b in benches])
        ax.set_yticks(ys, labels)
        ax.set_ylim(count - 0.5, -0.5)
        for tick in ax.get_yticklabels()[len(benches):]:
            tick.set_color("#888888")
        top = max([*exact, *([b.pct_near or 0.0 for b in benches]), 1.0])
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


def _save_figure(fig: Any, stem: Path) -> None:
    import matplotlib.pyplot as plt

    # Fixed metadata keeps the bytes the same from run to run.
    with files.atomic_path(stem.with_suffix(".png")) as tmp:
        fig.savefig(tmp, format="png", dpi=200, metadata={"Software": None})
    with files.atomic_path(stem.with_suffix(".pdf")) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Creator": None,
                                                 "Producer": None})
    plt.close(fig)
